//! The probe packet: the UDP payload every lockstep probe and sender emits.
//!
//! One format serves every measurement so that any node on the path (sender, TDP
//! router, rr server, receiver) can read and extend it without knowing which probe
//! produced it. It carries the sending frame index so a receiver reports the true
//! latency `L`, not `L mod TF` (the latency decomposition), and the sender's three timestamps so the
//! receiver can split `L` into `L_I`, `L_Tx`, `delta` and `L_Rx`.
//!
//! # Layout (network byte order)
//!
//! Header, [`HEADER_LEN`] = 64 bytes in version 1:
//!
//! | offset | size | field        | meaning                                                         |
//! |-------:|-----:|--------------|-----------------------------------------------------------------|
//! | 0      | 4    | magic        | `b"LKST"`; anything else is a foreign packet                    |
//! | 4      | 1    | version      | [`VERSION`] = 1                                                 |
//! | 5      | 1    | flags        | bit 0 [`FLAG_RESPONSE`], bit 1 [`FLAG_PADDING`], others must be 0 |
//! | 6      | 2    | header_len   | offset of the first hop record; ≥ 64, multiple of 4             |
//! | 8      | 4    | flow_id      | the flow (reservation) the packet belongs to                    |
//! | 12     | 1    | hop_count    | number of hop records that follow the header, ≤ [`MAX_HOPS`]   |
//! | 13     | 1    | reserved     | 0 on emit, ignored on parse                                     |
//! | 14     | 2    | checksum     | Internet checksum over header and hop records, this field 0     |
//! | 16     | 8    | seq          | per-flow sequence number (u64)                                  |
//! | 24     | 8    | frame        | sender's time-frame index (i64)                                 |
//! | 32     | 8    | t0_ns        | nominal send time: start of the frame the packet is meant for   |
//! | 40     | 8    | t_wake_ns    | sender wake-up time                                             |
//! | 48     | 8    | t_send_ns    | sender application send time (written right before `send`)     |
//! | 56     | 4    | total_len    | whole payload length the sender emitted (u32)                   |
//! | 60     | 4    | reserved     | 0 on emit, ignored on parse                                     |
//!
//! Then `hop_count` hop records of [`HOP_LEN`] = 32 bytes each, starting at
//! `header_len`:
//!
//! | offset | size | field        | meaning                                        |
//! |-------:|-----:|--------------|------------------------------------------------|
//! | 0      | 4    | node         | node id of the hop                             |
//! | 4      | 1    | kind         | 0 = router, 1 = rr server ([`HopKind`])        |
//! | 5      | 1    | flags        | bit 0: the hop slipped the packet (sent it     |
//! |        |      |              | after its frame, or best effort); other bits 0 |
//! |        |      |              | on emit, ignored on parse                      |
//! | 6      | 2    | reserved     | 0 on emit, ignored on parse                    |
//! | 8      | 8    | rx_kernel_ns | kernel RX timestamp at the hop                 |
//! | 16     | 8    | rx_app_ns    | application receive time at the hop            |
//! | 24     | 8    | tx_app_ns    | application send time at the hop               |
//!
//! Then padding up to `total_len` bytes, ignored (emitted as zeros).
//!
//! All timestamps are `i64` nanoseconds of the node's configured clock (the common time reference);
//! [`NOT_FILLED`] (0) means "not filled".
//!
//! # Rules
//!
//! - **Room for hops.** Hop records live *inside* `total_len`, in front of the
//!   padding, so a router appends one in place without moving bytes or growing the
//!   datagram. A sender that wants `n` hops recorded picks
//!   `total_len ≥ HEADER_LEN + n * HOP_LEN` ([`min_total_len`]);
//!   [`Packet::push_hop`] fails with [`WireError::NoRoom`] otherwise.
//! - **Truncation.** `total_len` is what the sender emitted; a buffer shorter than it
//!   was cut somewhere (snap length, MTU, a bad middlebox) and is rejected, even when
//!   only padding is missing, because the padding is the packet size being measured.
//! - **Forward compatibility.** A larger `header_len` (a future minor version that
//!   added fields) is accepted and its extra bytes skipped; a smaller one is an error.
//!   An unknown flag bit or a new major `version` is an error: its meaning could change
//!   how the packet must be treated.
//! - **Checksum.** The RFC 1071 ones'-complement sum covers `0 .. header_len +
//!   hop_count * HOP_LEN` with the checksum field taken as zero; it catches every
//!   single-bit error, which matters because UDP checksums are optional and often
//!   offloaded. Padding is not covered (it carries nothing). In-place updates
//!   ([`Packet::push_hop`], [`Packet::set_t_send_ns_and_checksum`],
//!   [`Packet::replace_hop`]) adjust the checksum incrementally (RFC 1624), so a packet
//!   corrupted before a hop touched it still fails verification afterwards.
//!
//! # Example
//!
//! ```
//! use lockstep_core::wire::probe::{
//!     min_total_len, parse_probe, HopKind, HopRecord, Packet, ProbeRepr,
//! };
//!
//! // Sender: a 200-byte probe with room for two hop records.
//! let repr = ProbeRepr { flow_id: 7, seq: 1, frame: 42, total_len: 200, ..ProbeRepr::default() };
//! assert!(min_total_len(2) <= repr.buffer_len());
//! let mut buf = [0u8; 1500];
//! let len = repr.emit_into(&mut buf)?;
//! let mut packet = Packet::new_checked(&mut buf[..len])?;
//! packet.set_t_send_ns_and_checksum(1_000_500); // right before send()
//!
//! // A router on the path appends its timestamps in place.
//! let hop = HopRecord { node: 3, kind: HopKind::Router, rx_kernel_ns: 1_010_000,
//!                       rx_app_ns: 1_012_000, tx_app_ns: 1_013_000, slipped: false };
//! packet.push_hop(&hop)?;
//!
//! // Receiver.
//! let got = parse_probe(&buf[..len])?;
//! assert_eq!((got.frame, got.t_send_ns), (42, 1_000_500));
//! assert_eq!(got.hops(), &[hop]);
//! # Ok::<(), lockstep_core::wire::WireError>(())
//! ```

use thiserror::Error;

use super::checksum::{fold, ones_complement_sum, update_bytes, SumChange};

/// `b"LKST"`: the first four bytes of every probe packet.
pub const MAGIC: [u8; 4] = *b"LKST";
/// The wire format version this build emits and accepts.
pub const VERSION: u8 = 1;
/// Length of the version 1 header; the smallest valid `header_len`.
pub const HEADER_LEN: usize = 64;
/// Length of one hop record.
pub const HOP_LEN: usize = 32;
/// Most hop records a packet may carry (bounds the work a receiver does per packet
/// and lets [`ProbeRepr`] live without heap allocation). 24 covers the longest
/// looping path of the four-router mesh (21 router visits), so every hop of it can
/// be traced.
pub const MAX_HOPS: usize = 24;
/// Hop records every flow must have room for (a flow's packet size decides how many
/// more it records, up to [`MAX_HOPS`]).
pub const MIN_RECORDED_HOPS: usize = 8;
/// The shortest buffer that can hold a probe packet.
pub const MIN_PACKET_LEN: usize = HEADER_LEN;
/// Flag bit 0: this packet is a response from an rr server.
pub const FLAG_RESPONSE: u8 = 0x01;
/// Flag bit 1: this packet is a TDP padding packet (time-driven forwarding), sent to keep a
/// neighbour in step when a node has nothing else to send in a frame.
pub const FLAG_PADDING: u8 = 0x02;
/// Every flag bit this version knows.
pub const KNOWN_FLAGS: u8 = FLAG_RESPONSE | FLAG_PADDING;
/// Timestamp value meaning "not filled".
pub const NOT_FILLED: i64 = 0;

/// The smallest `total_len` that leaves room for `hops` hop records.
pub const fn min_total_len(hops: usize) -> usize {
    HEADER_LEN + hops * HOP_LEN
}

/// Why a buffer is not a valid probe packet, or why an operation on one failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// The buffer ends before the header, the hop records or `total_len`.
    #[error("truncated probe packet: needed {needed} bytes, got {got}")]
    Truncated { needed: usize, got: usize },
    /// The magic is not `b"LKST"`.
    #[error("not a lockstep probe packet (bad magic)")]
    Foreign,
    /// A version this build does not speak.
    #[error("unsupported probe packet version {0} (this build speaks version {VERSION})")]
    UnsupportedVersion(u8),
    /// `header_len` is below [`HEADER_LEN`] or not a multiple of 4.
    #[error("bad probe header length {0} (must be at least {HEADER_LEN} and a multiple of 4)")]
    BadHeaderLen(u16),
    /// `hop_count` is above [`MAX_HOPS`].
    #[error("probe packet claims {0} hop records, at most {MAX_HOPS} are allowed")]
    TooManyHops(u8),
    /// `total_len` is shorter than the header plus the hop records it carries.
    #[error(
        "probe packet total length {total_len} is shorter than its header and hop records ({needed} bytes)"
    )]
    BadTotalLen { total_len: u32, needed: usize },
    /// The checksum does not match: the packet was corrupted.
    #[error("probe packet checksum mismatch (corrupted packet)")]
    BadChecksum,
    /// A flag bit this version does not know is set.
    #[error("unknown probe packet flags 0x{0:02x} (known: 0x{KNOWN_FLAGS:02x})")]
    UnknownFlags(u8),
    /// A hop record has a kind this version does not know.
    #[error("hop record {index} has unknown kind {kind}")]
    UnknownHopKind { index: u8, kind: u8 },
    /// [`Packet::push_hop`]: the padding left no room for another hop record, or the
    /// packet already carries [`MAX_HOPS`].
    #[error(
        "no room for another hop record: {hop_count} present, total length {total_len} bytes (each hop needs {HOP_LEN} bytes inside total_len, at most {MAX_HOPS} hops)"
    )]
    NoRoom { hop_count: u8, total_len: u32 },
    /// [`Packet::replace_hop`]: no hop record at that index.
    #[error("no hop record {index}: the packet carries {hop_count}")]
    NoSuchHop { index: usize, hop_count: u8 },
    /// [`ProbeRepr::emit`]: the output buffer is shorter than `total_len`.
    #[error("buffer too small for probe packet: needed {needed} bytes, got {got}")]
    BufferTooSmall { needed: usize, got: usize },
}

/// Who appended a hop record.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum HopKind {
    /// A forwarding node (TDP router, edge router, FIFO router).
    #[default]
    Router,
    /// The request/response server that turned a request into a response.
    RrServer,
}

impl HopKind {
    /// The wire value.
    pub const fn to_u8(self) -> u8 {
        match self {
            HopKind::Router => 0,
            HopKind::RrServer => 1,
        }
    }

    /// The kind for a wire value, `None` for a value this version does not know.
    pub const fn from_u8(value: u8) -> Option<HopKind> {
        match value {
            0 => Some(HopKind::Router),
            1 => Some(HopKind::RrServer),
            _ => None,
        }
    }
}

/// One hop's timestamps, appended by a router or the rr server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct HopRecord {
    pub node: u32,
    pub kind: HopKind,
    pub rx_kernel_ns: i64,
    pub rx_app_ns: i64,
    pub tx_app_ns: i64,
    /// The hop slipped the packet: sent it after its frame's send deadline, or
    /// best effort after it missed its frame.
    pub slipped: bool,
}

/// Hop record flag: the hop slipped the packet.
pub const HOP_FLAG_SLIPPED: u8 = 0x01;

/// Byte offsets of the fields (see the module doc).
mod field {
    pub const MAGIC: usize = 0;
    pub const VERSION: usize = 4;
    pub const FLAGS: usize = 5;
    pub const HEADER_LEN: usize = 6;
    pub const FLOW_ID: usize = 8;
    pub const HOP_COUNT: usize = 12;
    pub const RESERVED0: usize = 13;
    pub const CHECKSUM: usize = 14;
    pub const SEQ: usize = 16;
    pub const FRAME: usize = 24;
    pub const T0: usize = 32;
    pub const T_WAKE: usize = 40;
    pub const T_SEND: usize = 48;
    pub const TOTAL_LEN: usize = 56;
    // 60..64 reserved.

    // Inside a hop record.
    pub const HOP_NODE: usize = 0;
    pub const HOP_KIND: usize = 4;
    pub const HOP_FLAGS: usize = 5;
    // 6..8 reserved.
    pub const HOP_RX_KERNEL: usize = 8;
    pub const HOP_RX_APP: usize = 16;
    pub const HOP_TX_APP: usize = 24;
}

fn read<const N: usize>(data: &[u8], at: usize) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(&data[at..at + N]);
    out
}

fn read_u16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(read(data, at))
}
fn read_u32(data: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(read(data, at))
}
fn read_u64(data: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(read(data, at))
}
fn read_i64(data: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(read(data, at))
}
fn write(data: &mut [u8], at: usize, bytes: &[u8]) {
    data[at..at + bytes.len()].copy_from_slice(bytes);
}

/// A hop record's wire bytes, reserved bytes zero.
fn encode_hop(hop: &HopRecord) -> [u8; HOP_LEN] {
    let mut rec = [0u8; HOP_LEN];
    write(&mut rec, field::HOP_NODE, &hop.node.to_be_bytes());
    rec[field::HOP_KIND] = hop.kind.to_u8();
    rec[field::HOP_FLAGS] = if hop.slipped { HOP_FLAG_SLIPPED } else { 0 };
    write(
        &mut rec,
        field::HOP_RX_KERNEL,
        &hop.rx_kernel_ns.to_be_bytes(),
    );
    write(&mut rec, field::HOP_RX_APP, &hop.rx_app_ns.to_be_bytes());
    write(&mut rec, field::HOP_TX_APP, &hop.tx_app_ns.to_be_bytes());
    rec
}

/// A zero-copy view of a probe packet in a byte buffer.
///
/// Build it with [`Packet::new_checked`] for bytes from the network: afterwards no
/// getter or setter panics. [`Packet::new_unchecked`] skips the length checks for
/// buffers the caller sized itself; then a getter or setter whose field lies beyond
/// the buffer panics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without any check.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer after [`Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Packet<T>, WireError> {
        let packet = Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check that the buffer holds the header, `hop_count` hop records and
    /// `total_len` bytes, and that those lengths are consistent. Magic, version,
    /// flags and checksum are not checked here ([`ProbeRepr::parse`] does).
    pub fn check_len(&self) -> Result<(), WireError> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(WireError::Truncated {
                needed: HEADER_LEN,
                got,
            });
        }
        let header_len = self.header_len();
        // A mask, not `is_multiple_of`: the workspace declares Rust 1.80.
        if usize::from(header_len) < HEADER_LEN || header_len & 3 != 0 {
            return Err(WireError::BadHeaderLen(header_len));
        }
        let hop_count = self.hop_count();
        if usize::from(hop_count) > MAX_HOPS {
            return Err(WireError::TooManyHops(hop_count));
        }
        let needed = self.hop_area_end();
        let total_len = self.total_len();
        if (total_len as usize) < needed {
            return Err(WireError::BadTotalLen { total_len, needed });
        }
        if got < needed {
            return Err(WireError::Truncated { needed, got });
        }
        if got < total_len as usize {
            return Err(WireError::Truncated {
                needed: total_len as usize,
                got,
            });
        }
        Ok(())
    }

    /// Give the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The underlying bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn magic(&self) -> [u8; 4] {
        read(self.buffer.as_ref(), field::MAGIC)
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    pub fn header_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::HEADER_LEN)
    }
    pub fn flow_id(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::FLOW_ID)
    }
    pub fn hop_count(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_COUNT]
    }
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
    pub fn seq(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::SEQ)
    }
    /// The sender's time-frame index.
    pub fn frame(&self) -> i64 {
        read_i64(self.buffer.as_ref(), field::FRAME)
    }
    pub fn t0_ns(&self) -> i64 {
        read_i64(self.buffer.as_ref(), field::T0)
    }
    pub fn t_wake_ns(&self) -> i64 {
        read_i64(self.buffer.as_ref(), field::T_WAKE)
    }
    pub fn t_send_ns(&self) -> i64 {
        read_i64(self.buffer.as_ref(), field::T_SEND)
    }
    pub fn total_len(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    /// End of the checksummed region: `header_len + hop_count * HOP_LEN`.
    fn hop_area_end(&self) -> usize {
        usize::from(self.header_len()) + usize::from(self.hop_count()) * HOP_LEN
    }

    fn hop_offset(&self, index: usize) -> usize {
        usize::from(self.header_len()) + index * HOP_LEN
    }

    /// Hop record `index`, or `None` when `index ≥ hop_count`, the record lies
    /// beyond the buffer, or its kind is unknown ([`ProbeRepr::parse`] reports that
    /// as [`WireError::UnknownHopKind`]). Never panics, even on an unchecked packet
    /// whose header is complete.
    pub fn hop(&self, index: usize) -> Option<HopRecord> {
        if index >= usize::from(self.hop_count()) || index >= MAX_HOPS {
            return None;
        }
        let at = self.hop_offset(index);
        let rec = self.buffer.as_ref().get(at..at + HOP_LEN)?;
        Some(HopRecord {
            node: read_u32(rec, field::HOP_NODE),
            kind: HopKind::from_u8(rec[field::HOP_KIND])?,
            rx_kernel_ns: read_i64(rec, field::HOP_RX_KERNEL),
            rx_app_ns: read_i64(rec, field::HOP_RX_APP),
            tx_app_ns: read_i64(rec, field::HOP_TX_APP),
            slipped: rec[field::HOP_FLAGS] & HOP_FLAG_SLIPPED != 0,
        })
    }

    /// Ones'-complement sum of the covered region with the checksum field as zero,
    /// or `None` if the region does not fit the buffer.
    fn covered_sum(&self) -> Option<u32> {
        let data = self.buffer.as_ref();
        let covered = data.get(..self.hop_area_end())?;
        let before = covered.get(..field::CHECKSUM)?;
        let after = covered.get(field::CHECKSUM + 2..)?;
        // `before` has even length, so the two pieces sum as one region
        Some(ones_complement_sum(after, ones_complement_sum(before, 0)))
    }

    /// Does the checksum match? `false` when the covered region does not fit the
    /// buffer. Never panics.
    pub fn verify_checksum(&self) -> bool {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return false;
        }
        match self.covered_sum() {
            Some(sum) => fold(sum + u32::from(self.checksum())) == 0xffff,
            None => false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// The underlying bytes, writable.
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    pub fn set_magic(&mut self, value: [u8; 4]) {
        write(self.buffer.as_mut(), field::MAGIC, &value);
    }
    pub fn set_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::VERSION] = value;
    }
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }
    pub fn set_header_len(&mut self, value: u16) {
        write(
            self.buffer.as_mut(),
            field::HEADER_LEN,
            &value.to_be_bytes(),
        );
    }
    pub fn set_flow_id(&mut self, value: u32) {
        write(self.buffer.as_mut(), field::FLOW_ID, &value.to_be_bytes());
    }
    pub fn set_hop_count(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_COUNT] = value;
    }
    pub fn set_checksum(&mut self, value: u16) {
        write(self.buffer.as_mut(), field::CHECKSUM, &value.to_be_bytes());
    }
    pub fn set_seq(&mut self, value: u64) {
        write(self.buffer.as_mut(), field::SEQ, &value.to_be_bytes());
    }
    pub fn set_frame(&mut self, value: i64) {
        write(self.buffer.as_mut(), field::FRAME, &value.to_be_bytes());
    }
    pub fn set_t0_ns(&mut self, value: i64) {
        write(self.buffer.as_mut(), field::T0, &value.to_be_bytes());
    }
    pub fn set_t_wake_ns(&mut self, value: i64) {
        write(self.buffer.as_mut(), field::T_WAKE, &value.to_be_bytes());
    }
    pub fn set_t_send_ns(&mut self, value: i64) {
        write(self.buffer.as_mut(), field::T_SEND, &value.to_be_bytes());
    }
    pub fn set_total_len(&mut self, value: u32) {
        write(self.buffer.as_mut(), field::TOTAL_LEN, &value.to_be_bytes());
    }

    /// Write hop record `index` at `header_len + index * HOP_LEN` (reserved bytes
    /// zeroed). Neither `hop_count` nor the checksum changes: this is the raw setter
    /// [`ProbeRepr::emit`] uses. Panics if the record lies beyond the buffer.
    pub fn set_hop(&mut self, index: usize, hop: &HopRecord) {
        let at = self.hop_offset(index);
        write(self.buffer.as_mut(), at, &encode_hop(hop));
    }

    /// Recompute the checksum over the header and hop records. Panics if they lie
    /// beyond the buffer (never after [`Packet::new_checked`]).
    pub fn fill_checksum(&mut self) {
        let sum = match self.covered_sum() {
            Some(sum) => sum,
            None => panic!("probe packet hop records lie beyond the buffer"),
        };
        self.set_checksum(!fold(sum));
    }

    /// Overwrite bytes `at .. at + new.len()` (an even offset and length inside the
    /// checksummed region) and adjust the checksum incrementally (RFC 1624 eqn. 3):
    /// `HC' = ~(~HC + ~m + m')`. A mismatch that was there before stays there.
    fn replace_covered(&mut self, at: usize, new: &[u8]) {
        let updated = update_bytes(
            self.checksum(),
            &self.buffer.as_ref()[at..at + new.len()],
            new,
        );
        write(self.buffer.as_mut(), at, new);
        self.set_checksum(updated);
    }

    /// Hot-path helper for a sender: write `t_send_ns` right before `send` and keep
    /// the checksum valid with an incremental update (four words, no pass over the
    /// packet). Panics on a buffer shorter than the header.
    pub fn set_t_send_ns_and_checksum(&mut self, value: i64) {
        self.replace_covered(field::T_SEND, &value.to_be_bytes());
    }

    /// Append a hop record in place: it goes at `header_len + hop_count * HOP_LEN`,
    /// inside the padding the sender reserved, `hop_count` grows by one and the
    /// checksum is updated incrementally.
    ///
    /// Fails, leaving the packet untouched, with the [`Packet::check_len`] errors,
    /// or [`WireError::NoRoom`] when `total_len` leaves no room for another record or
    /// the packet already carries [`MAX_HOPS`]. Never panics.
    pub fn push_hop(&mut self, hop: &HopRecord) -> Result<(), WireError> {
        self.check_len()?;
        self.push_hop_after_check(hop)
    }

    /// [`Packet::push_hop`] on a packet whose lengths [`Packet::check_len`] has
    /// just passed (not checked again).
    fn push_hop_after_check(&mut self, hop: &HopRecord) -> Result<(), WireError> {
        let hop_count = self.hop_count();
        let total_len = self.total_len();
        let at = self.hop_area_end();
        if usize::from(hop_count) >= MAX_HOPS || at + HOP_LEN > total_len as usize {
            return Err(WireError::NoRoom {
                hop_count,
                total_len,
            });
        }
        // The new record was padding, outside the checksum: add its sum, then
        // replace the (hop_count, reserved) word.
        let rec = encode_hop(hop);
        write(self.buffer.as_mut(), at, &rec);
        let hc = u32::from(!self.checksum());
        self.set_checksum(!fold(ones_complement_sum(&rec, hc)));
        let reserved = self.buffer.as_ref()[field::RESERVED0];
        self.replace_covered(field::HOP_COUNT, &[hop_count + 1, reserved]);
        Ok(())
    }

    /// [`Packet::push_hop`], also saying how the bytes around the probe sum before
    /// and after it ([`SumChange`]), so the checksum of the UDP datagram that carries
    /// the probe follows without summing the datagram again. The probe's checksum
    /// keeps its header and records summing to the same value (all ones when it is
    /// right; whatever it was otherwise, since the push updates it incrementally), so
    /// all that changes for the datagram is the padding the new record replaced.
    pub fn push_hop_tracked(&mut self, hop: &HopRecord) -> Result<SumChange, WireError> {
        self.check_len()?;
        self.push_hop_tracked_after_check(hop)
    }

    /// [`Packet::push_hop_tracked`] on a packet made with [`Packet::new_checked`]
    /// (its lengths are not checked again): what a router does once per hop.
    pub(crate) fn push_hop_tracked_after_check(
        &mut self,
        hop: &HopRecord,
    ) -> Result<SumChange, WireError> {
        let at = self.hop_area_end();
        let padding = self.buffer.as_ref().get(at..at + HOP_LEN).unwrap_or(&[]);
        let old = ones_complement_sum(padding, 0);
        self.push_hop_after_check(hop)?;
        Ok(SumChange { old, new: 0 })
    }

    /// Overwrite existing hop record `index` (`< hop_count`) and update the checksum
    /// incrementally: how an rr server fills its own `tx_app_ns` right before sending
    /// the response. Never panics.
    pub fn replace_hop(&mut self, index: usize, hop: &HopRecord) -> Result<(), WireError> {
        self.check_len()?;
        let hop_count = self.hop_count();
        if index >= usize::from(hop_count) {
            return Err(WireError::NoSuchHop { index, hop_count });
        }
        let at = self.hop_offset(index);
        self.replace_covered(at, &encode_hop(hop));
        Ok(())
    }
}

/// A parsed probe packet, plain data, no heap allocation.
///
/// Two reprs compare equal when their fields and their first `hop_count` hop
/// records are equal: the unused slots of `hops` do not matter.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProbeRepr {
    /// [`FLAG_RESPONSE`] | [`FLAG_PADDING`].
    pub flags: u8,
    pub flow_id: u32,
    pub seq: u64,
    /// The sender's time-frame index.
    pub frame: i64,
    pub t0_ns: i64,
    pub t_wake_ns: i64,
    pub t_send_ns: i64,
    /// Slots `0 .. hop_count` are the hop records; the rest are ignored.
    pub hops: [HopRecord; MAX_HOPS],
    pub hop_count: u8,
    /// The whole payload length; the sender pads up to it.
    pub total_len: u32,
}

impl PartialEq for ProbeRepr {
    fn eq(&self, other: &ProbeRepr) -> bool {
        self.flags == other.flags
            && self.flow_id == other.flow_id
            && self.seq == other.seq
            && self.frame == other.frame
            && self.t0_ns == other.t0_ns
            && self.t_wake_ns == other.t_wake_ns
            && self.t_send_ns == other.t_send_ns
            && self.hop_count == other.hop_count
            && self.total_len == other.total_len
            && self.hops() == other.hops()
    }
}

impl Eq for ProbeRepr {}

impl ProbeRepr {
    /// Parse and validate a packet: magic ([`WireError::Foreign`]), version, lengths,
    /// checksum, flags, hop kinds, in that order. A foreign datagram is reported as
    /// foreign whatever its length.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<ProbeRepr, WireError> {
        let data = packet.as_bytes();
        let magic_len = data.len().min(MAGIC.len());
        if data.get(..magic_len) != MAGIC.get(..magic_len) {
            return Err(WireError::Foreign);
        }
        if let Some(&version) = data.get(field::VERSION) {
            if version != VERSION {
                return Err(WireError::UnsupportedVersion(version));
            }
        }
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(WireError::BadChecksum);
        }
        let flags = packet.flags();
        if flags & !KNOWN_FLAGS != 0 {
            return Err(WireError::UnknownFlags(flags));
        }
        let hop_count = packet.hop_count();
        let mut hops = [HopRecord::default(); MAX_HOPS];
        for (index, slot) in hops.iter_mut().enumerate().take(usize::from(hop_count)) {
            *slot = match packet.hop(index) {
                Some(hop) => hop,
                None => {
                    // check_len guaranteed the record is in the buffer: only the kind
                    // can be wrong.
                    let at = packet.hop_offset(index) + field::HOP_KIND;
                    return Err(WireError::UnknownHopKind {
                        index: index as u8,
                        kind: data.get(at).copied().unwrap_or_default(),
                    });
                }
            };
        }
        Ok(ProbeRepr {
            flags,
            flow_id: packet.flow_id(),
            seq: packet.seq(),
            frame: packet.frame(),
            t0_ns: packet.t0_ns(),
            t_wake_ns: packet.t_wake_ns(),
            t_send_ns: packet.t_send_ns(),
            hops,
            hop_count,
            total_len: packet.total_len(),
        })
    }

    /// The hop records this packet carries.
    pub fn hops(&self) -> &[HopRecord] {
        let n = usize::from(self.hop_count).min(MAX_HOPS);
        &self.hops[..n]
    }

    /// Bytes [`ProbeRepr::emit`] writes: `total_len`.
    pub fn buffer_len(&self) -> usize {
        self.total_len as usize
    }

    pub fn is_response(&self) -> bool {
        self.flags & FLAG_RESPONSE != 0
    }

    pub fn is_padding(&self) -> bool {
        self.flags & FLAG_PADDING != 0
    }

    /// Check that the repr can be emitted: known flags, at most [`MAX_HOPS`] hops,
    /// `total_len` large enough for header and hops.
    pub fn validate(&self) -> Result<(), WireError> {
        if self.flags & !KNOWN_FLAGS != 0 {
            return Err(WireError::UnknownFlags(self.flags));
        }
        if usize::from(self.hop_count) > MAX_HOPS {
            return Err(WireError::TooManyHops(self.hop_count));
        }
        let needed = min_total_len(usize::from(self.hop_count));
        if (self.total_len as usize) < needed {
            return Err(WireError::BadTotalLen {
                total_len: self.total_len,
                needed,
            });
        }
        Ok(())
    }

    /// Write header, hop records, zero padding up to `total_len`, and the checksum.
    /// Bytes of the buffer past `total_len` are left alone. Fails (writing nothing)
    /// when [`ProbeRepr::validate`] fails or the buffer is shorter than `total_len`:
    /// sizes come from the command line, so a bad one is an error, not a panic.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
    ) -> Result<(), WireError> {
        self.validate()?;
        let needed = self.buffer_len();
        let got = packet.as_bytes().len();
        if got < needed {
            return Err(WireError::BufferTooSmall { needed, got });
        }
        packet.as_bytes_mut()[..needed].fill(0);
        packet.set_magic(MAGIC);
        packet.set_version(VERSION);
        packet.set_flags(self.flags);
        packet.set_header_len(HEADER_LEN as u16);
        packet.set_flow_id(self.flow_id);
        packet.set_hop_count(self.hop_count);
        packet.set_seq(self.seq);
        packet.set_frame(self.frame);
        packet.set_t0_ns(self.t0_ns);
        packet.set_t_wake_ns(self.t_wake_ns);
        packet.set_t_send_ns(self.t_send_ns);
        packet.set_total_len(self.total_len);
        for (index, hop) in self.hops().iter().enumerate() {
            packet.set_hop(index, hop);
        }
        packet.fill_checksum();
        Ok(())
    }

    /// Emit into the front of `buf`; returns the number of bytes written
    /// (`total_len`).
    pub fn emit_into(&self, buf: &mut [u8]) -> Result<usize, WireError> {
        self.emit(&mut Packet::new_unchecked(&mut *buf))?;
        Ok(self.buffer_len())
    }
}

/// Parse a received datagram payload.
pub fn parse_probe(bytes: &[u8]) -> Result<ProbeRepr, WireError> {
    ProbeRepr::parse(&Packet::new_unchecked(bytes))
}

#[cfg(test)]
#[path = "probe_tests.rs"]
mod tests;
