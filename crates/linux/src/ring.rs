//! A packet socket with a receive ring mapped into the process (`PACKET_RX_RING`): the
//! kernel writes every received frame into shared memory and flips its owner bit; the
//! process reads the frame where it lies and flips the bit back. No system call per
//! frame or per batch, and no copy into a buffer of the process.
//!
//! Two layouts ([`RingVersion`]):
//!
//! - `TPACKET_V3`: blocks of frames packed one after another. The kernel hands a
//!   block over when it is full, or when it has been open for the retire timeout
//!   (1 ms, the least the kernel takes): at a low rate a frame waits up to that long
//!   before the process can see it. The fewest wake-ups per frame.
//! - `TPACKET_V2`: fixed frame slots, each handed over as soon as it is written.
//!
//! Each frame carries the kernel's receive time (`tp_sec`/`tp_nsec`, `CLOCK_REALTIME`,
//! software: `PACKET_TIMESTAMP`), whether its L4 checksum is unfinished
//! (`TP_STATUS_CSUMNOTREADY`) or verified, and the VLAN tag the NIC took off: the same
//! [`FrameMeta`] as [`PacketSocket::recv_batch`] gives.
//!
//! Sending goes through the socket as usual (`sendmmsg`): a receive ring leaves the
//! send path of the socket alone.
//!
//! Safety: the mapping is shared with the kernel. A frame slot (V2) or block (V3) is
//! read only while its status word, loaded with acquire ordering, says the process owns
//! it, and given back with a release store after its last read; every offset and
//! length in a header is checked against the slot or block before a byte is read, so a
//! malformed entry is skipped, never read out of bounds.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use lockstep_core::{ClockId, Instant};

use crate::packet::{
    FrameKind, FrameMeta, PacketError, PacketSocket, PacketStats, VlanTag, PACKET_OUTGOING,
    TP_STATUS_CSUMNOTREADY, TP_STATUS_CSUM_VALID,
};
use crate::port::{FramePort, IoMode};
use crate::sockopt::setsockopt;
use crate::sys::last_error;
use crate::udp::{NetError, TxTimestamp};

// From <linux/if_packet.h>.
const PACKET_RX_RING: libc::c_int = 5;
const PACKET_VERSION: libc::c_int = 10;
const PACKET_TIMESTAMP: libc::c_int = 17;
const TPACKET_V2: libc::c_int = 1;
const TPACKET_V3: libc::c_int = 2;
const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;

/// `struct tpacket2_hdr` is 32 bytes; the `sockaddr_ll` follows at 32.
const V2_HDR: usize = 32;
/// `struct tpacket3_hdr` is 48 bytes; the `sockaddr_ll` follows at 48.
const V3_HDR: usize = 48;
/// `sll_pkttype` within `sockaddr_ll`.
const SLL_PKTTYPE: usize = 10;
/// `struct tpacket_block_desc`: version, offset_to_priv, then `tpacket_hdr_v1`
/// (block_status at 8, num_pkts at 12, offset_to_first_pkt at 16, blk_len at 20).
const V3_BLOCK_DESC: usize = 48;

/// Frame slot (V2) and largest frame (V3): a 1500-byte MTU frame, its VLAN tag and
/// the headers in front of it.
const FRAME_SIZE: usize = 2048;
/// Block size: a multiple of the page size and of the frame slot.
const BLOCK_SIZE: usize = 1 << 16;
/// Blocks in the ring: 4 MiB in all.
const BLOCK_NR: usize = 64;
/// How long the kernel keeps a V3 block open before handing it over, in ms.
const RETIRE_TOV_MS: u32 = 1;

/// The ring layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingVersion {
    /// `TPACKET_V2`: frame slots, each handed over at once.
    V2,
    /// `TPACKET_V3`: blocks, handed over full or after the retire timeout.
    V3,
}

use crate::mmap::Mmap as Mapping;

impl Mapping {
    /// Maps the `len` bytes of the ring `sock` just set up (`what` names it in an
    /// error).
    fn of(sock: &PacketSocket, len: usize, what: &'static str) -> Result<Mapping, NetError> {
        Mapping::new(Some(sock.as_raw_fd()), len, 0)
            .map_err(|source| NetError::Io { op: what, source })
    }

    /// The status word at `off`, as an atomic shared with the kernel.
    fn status(&self, off: usize) -> Option<&AtomicU32> {
        if !off.is_multiple_of(4) || off.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked), 4-byte aligned (the mapping is page aligned and
        // `off` a multiple of 4); the kernel writes this word concurrently, which is
        // why it is only ever accessed atomically.
        Some(unsafe { &*self.ptr.add(off).cast::<AtomicU32>() })
    }

    /// `len` bytes at `off`, which the caller owns (its status word said so).
    fn owned(&self, off: usize, len: usize) -> Option<&[u8]> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked); the caller saw, with acquire ordering, that the
        // kernel handed this slot or block to the process, and the kernel writes it
        // again only after the release store that gives it back, which happens after
        // the returned slice's last use (it lives only for the caller's borrow).
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) })
    }
}

/// A packet socket with a receive ring.
pub struct RingSocket {
    sock: PacketSocket,
    map: Mapping,
    version: RingVersion,
    /// V2: frame slots; V3: blocks.
    units: usize,
    unit_size: usize,
    /// The next slot or block to look at.
    next: usize,
    /// V3: how far into the current block (`next`) the frames have been handed out:
    /// (frames handed out, offset of the next one).
    partial: Option<(u32, usize)>,
}

impl std::fmt::Debug for RingSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingSocket")
            .field("sock", &self.sock)
            .field("version", &self.version)
            .field("units", &self.units)
            .finish_non_exhaustive()
    }
}

/// `struct tpacket_req3` (the V2 request is its first four fields).
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

fn unsupported(detail: &'static str) -> NetError {
    NetError::Unsupported {
        feature: "a packet receive ring",
        detail,
    }
}

/// Sets the ring up on `fd` (before bind): version, software timestamps, the ring.
fn set_ring(fd: RawFd, version: RingVersion) -> Result<(), NetError> {
    let v = match version {
        RingVersion::V2 => TPACKET_V2,
        RingVersion::V3 => TPACKET_V3,
    };
    setsockopt(fd, libc::SOL_PACKET, PACKET_VERSION, &v).map_err(|e| match e.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOPROTOOPT) => match version {
            RingVersion::V2 => unsupported("the kernel has no TPACKET_V2 (Linux 2.6.27)"),
            RingVersion::V3 => unsupported("the kernel has no TPACKET_V3 (Linux 3.2)"),
        },
        _ => NetError::Io {
            op: "setsockopt(PACKET_VERSION)",
            source: e,
        },
    })?;
    // Software receive times in tp_sec/tp_nsec (the kernel's default too).
    let ts = libc::SOF_TIMESTAMPING_SOFTWARE as libc::c_int;
    let _ = setsockopt(fd, libc::SOL_PACKET, PACKET_TIMESTAMP, &ts);
    let frame_nr = (BLOCK_SIZE / FRAME_SIZE * BLOCK_NR) as u32;
    let r = match version {
        RingVersion::V2 => setsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_RX_RING,
            &TpacketReq {
                block_size: BLOCK_SIZE as u32,
                block_nr: BLOCK_NR as u32,
                frame_size: FRAME_SIZE as u32,
                frame_nr,
            },
        ),
        RingVersion::V3 => setsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_RX_RING,
            &TpacketReq3 {
                block_size: BLOCK_SIZE as u32,
                block_nr: BLOCK_NR as u32,
                frame_size: FRAME_SIZE as u32,
                frame_nr,
                retire_blk_tov: RETIRE_TOV_MS,
                ..TpacketReq3::default()
            },
        ),
    };
    r.map_err(|e| match e.raw_os_error() {
        Some(libc::ENOPROTOOPT) => unsupported("the kernel has no PACKET_RX_RING"),
        _ => NetError::Io {
            op: "setsockopt(PACKET_RX_RING)",
            source: e,
        },
    })
}

impl RingSocket {
    /// Opens a packet socket with a receive ring on interface `ifname` of the calling
    /// thread's namespace.
    pub fn bind(ifname: &str, version: RingVersion) -> Result<RingSocket, PacketError> {
        RingSocket::bind_index(crate::packet::ifindex_of(ifname)?, version)
    }

    /// Opens one on the interface with index `ifindex`.
    pub fn bind_index(ifindex: u32, version: RingVersion) -> Result<RingSocket, PacketError> {
        RingSocket::open_index(ifindex, version, false)
    }

    /// Opens one on the interface with index `ifindex` that takes no frame until
    /// [`FramePort::start`]: the ring is allocated and mapped meanwhile, and frames
    /// that arrive before the start do not wait in it.
    pub fn bind_index_idle(ifindex: u32, version: RingVersion) -> Result<RingSocket, PacketError> {
        RingSocket::open_index(ifindex, version, true)
    }

    fn open_index(
        ifindex: u32,
        version: RingVersion,
        idle: bool,
    ) -> Result<RingSocket, PacketError> {
        let setup = |fd| set_ring(fd, version);
        let sock = if idle {
            PacketSocket::bind_index_idle_with(ifindex, setup)?
        } else {
            PacketSocket::bind_index_with(ifindex, setup)?
        };
        let len = BLOCK_SIZE * BLOCK_NR;
        let map = Mapping::of(&sock, len, "mmap(packet receive ring)")?;
        let (units, unit_size) = match version {
            RingVersion::V2 => (len / FRAME_SIZE, FRAME_SIZE),
            RingVersion::V3 => (BLOCK_NR, BLOCK_SIZE),
        };
        Ok(RingSocket {
            sock,
            map,
            version,
            units,
            unit_size,
            next: 0,
            partial: None,
        })
    }

    /// The socket under the ring: options, sending, TX timestamps.
    pub fn socket(&self) -> &PacketSocket {
        &self.sock
    }

    pub fn version(&self) -> RingVersion {
        self.version
    }

    /// Hands up to `max` frames the kernel has written to `each`, in order, and gives
    /// their slots back; returns how many. Never waits.
    pub fn recv_frames(&mut self, max: usize, each: &mut dyn FnMut(&[u8], FrameMeta)) -> usize {
        match self.version {
            RingVersion::V2 => self.recv_v2(max, each),
            RingVersion::V3 => self.recv_v3(max, each),
        }
    }

    fn recv_v2(&mut self, max: usize, each: &mut dyn FnMut(&[u8], FrameMeta)) -> usize {
        let mut handed = 0;
        // at most one lap of the ring
        for _ in 0..self.units {
            if handed >= max {
                break;
            }
            let off = self.next * self.unit_size;
            let Some(status) = self.map.status(off) else {
                break;
            };
            let s = status.load(Ordering::Acquire);
            if s & TP_STATUS_USER == 0 {
                break;
            }
            if let Some(slot) = self.map.owned(off, self.unit_size) {
                if let Some((data, meta)) = parse_v2(slot, s) {
                    each(data, meta);
                    handed += 1;
                }
            }
            status.store(TP_STATUS_KERNEL, Ordering::Release);
            self.next = (self.next + 1) % self.units;
        }
        handed
    }

    fn recv_v3(&mut self, max: usize, each: &mut dyn FnMut(&[u8], FrameMeta)) -> usize {
        let mut handed = 0;
        for _ in 0..self.units {
            if handed >= max {
                break;
            }
            let off = self.next * self.unit_size;
            let Some(status) = self.map.status(off + 8) else {
                break;
            };
            if status.load(Ordering::Acquire) & TP_STATUS_USER == 0 {
                break;
            }
            let Some(block) = self.map.owned(off, self.unit_size) else {
                break;
            };
            let (done, at) = self.partial.unwrap_or((0, usize::MAX));
            let walk = walk_v3_block(block, done, at, max - handed, each);
            handed += walk.handed;
            match walk.resume {
                Some(r) => {
                    // stopped at `max` inside the block: keep it for the next call
                    self.partial = Some(r);
                    break;
                }
                None => {
                    self.partial = None;
                    status.store(TP_STATUS_KERNEL, Ordering::Release);
                    self.next = (self.next + 1) % self.units;
                }
            }
        }
        handed
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(
        b.get(at..at.checked_add(2)?)?.try_into().ok()?,
    ))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The fields of a ring frame header both versions have.
struct RingHdr {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    sec: u32,
    nsec: u32,
    vlan_tci: u16,
    vlan_tpid: u16,
    pkttype: u8,
}

/// The frame data of `hdr`, which starts at `at` of `unit`: `tp_snaplen` bytes from
/// `tp_mac`, both checked against the unit.
fn frame_data<'a>(unit: &'a [u8], at: usize, hdr: &RingHdr) -> Option<&'a [u8]> {
    let start = at.checked_add(usize::from(hdr.mac))?;
    let end = start.checked_add(usize::try_from(hdr.snaplen).ok()?)?;
    unit.get(start..end)
}

fn ring_meta(hdr: &RingHdr, captured: usize) -> FrameMeta {
    let ns = i64::from(hdr.sec) * 1_000_000_000 + i64::from(hdr.nsec);
    let vlan = VlanTag::from_status(hdr.status, hdr.vlan_tci, hdr.vlan_tpid);
    let len = usize::try_from(hdr.len).unwrap_or(usize::MAX);
    FrameMeta {
        len: len.max(captured),
        kernel_rx: (ns != 0).then_some(Instant::new(ClockId::Realtime, ns)),
        csum_not_ready: hdr.status & TP_STATUS_CSUMNOTREADY != 0,
        csum_valid: hdr.status & TP_STATUS_CSUM_VALID != 0,
        truncated: len > captured,
        vlan,
        kind: FrameKind::from_pkttype(hdr.pkttype),
    }
}

/// One V2 slot whose status word read `status`: its frame and what the kernel says of
/// it; `None` for a malformed header or this host's own outgoing frame.
fn parse_v2(slot: &[u8], status: u32) -> Option<(&[u8], FrameMeta)> {
    let hdr = RingHdr {
        status,
        len: u32_at(slot, 4)?,
        snaplen: u32_at(slot, 8)?,
        mac: u16_at(slot, 12)?,
        sec: u32_at(slot, 16)?,
        nsec: u32_at(slot, 20)?,
        vlan_tci: u16_at(slot, 24)?,
        vlan_tpid: u16_at(slot, 26)?,
        pkttype: *slot.get(V2_HDR + SLL_PKTTYPE)?,
    };
    if hdr.pkttype == PACKET_OUTGOING || usize::from(hdr.mac) < V2_HDR {
        return None;
    }
    let data = frame_data(slot, 0, &hdr)?;
    Some((data, ring_meta(&hdr, data.len())))
}

/// How far [`walk_v3_block`] got.
struct Walk {
    handed: usize,
    /// Stopped at the limit with frames left: (frames done, offset of the next).
    resume: Option<(u32, usize)>,
}

/// Hands the frames of a V3 block to `each`, from frame `done` at offset `at`
/// (`usize::MAX`: the block's first), at most `max`. Stops at the first malformed
/// header (the rest of the block is skipped).
fn walk_v3_block(
    block: &[u8],
    mut done: u32,
    at: usize,
    max: usize,
    each: &mut dyn FnMut(&[u8], FrameMeta),
) -> Walk {
    let mut w = Walk {
        handed: 0,
        resume: None,
    };
    let (Some(num), Some(first)) = (u32_at(block, 12), u32_at(block, 16)) else {
        return w;
    };
    let mut off = if at == usize::MAX {
        match usize::try_from(first) {
            Ok(f) if f >= V3_BLOCK_DESC => f,
            _ => return w,
        }
    } else {
        at
    };
    while done < num {
        if w.handed >= max {
            w.resume = Some((done, off));
            return w;
        }
        let Some(frame) = parse_v3_at(block, off) else {
            return w;
        };
        done += 1;
        if let Some((data, meta)) = frame.data {
            each(data, meta);
            w.handed += 1;
        }
        if done < num {
            // the next header lies after this one, never on or before it
            match Some(frame.next)
                .filter(|&n| n >= V3_HDR)
                .and_then(|n| off.checked_add(n))
            {
                Some(o) => off = o,
                None => return w,
            }
        }
    }
    w
}

struct V3Frame<'a> {
    data: Option<(&'a [u8], FrameMeta)>,
    next: usize,
}

/// The V3 frame header at `off` of `block`.
fn parse_v3_at(block: &[u8], off: usize) -> Option<V3Frame<'_>> {
    let h = block.get(off..off.checked_add(V3_HDR)?)?;
    let hdr = RingHdr {
        status: u32_at(h, 20)?,
        len: u32_at(h, 16)?,
        snaplen: u32_at(h, 12)?,
        mac: u16_at(h, 24)?,
        sec: u32_at(h, 4)?,
        nsec: u32_at(h, 8)?,
        vlan_tci: u32_at(h, 32).map(|v| v as u16)?,
        vlan_tpid: u16_at(h, 36)?,
        pkttype: *block.get(off.checked_add(V3_HDR + SLL_PKTTYPE)?)?,
    };
    let next = usize::try_from(u32_at(h, 0)?).ok()?;
    if usize::from(hdr.mac) < V3_HDR {
        return None;
    }
    let data = frame_data(block, off, &hdr)?;
    let data = (hdr.pkttype != PACKET_OUTGOING).then(|| (data, ring_meta(&hdr, data.len())));
    Some(V3Frame { data, next })
}

/// `PACKET_TX_RING`, and the TX frame states of <linux/if_packet.h>.
const PACKET_TX_RING: libc::c_int = 13;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 4;
/// Where a V2 TX frame's data starts in its slot: `TPACKET2_HDRLEN` minus the
/// `sockaddr_ll` (the kernel's default without `PACKET_TX_HAS_OFF`).
const V2_TX_DATA: usize = 32;

/// A send-only packet socket with a transmit ring (`PACKET_TX_RING`, `TPACKET_V2`):
/// frames are copied into slots shared with the kernel and one `send` hands every
/// filled slot to the kernel. Kept for measuring it against `sendmmsg`; a router port
/// sends with `sendmmsg` (see the benchmarks).
pub struct TxRing {
    sock: PacketSocket,
    map: Mapping,
    slots: usize,
    next: usize,
}

impl TxRing {
    /// Opens one on the interface with index `ifindex`.
    pub fn bind_index(ifindex: u32) -> Result<TxRing, PacketError> {
        let sock = PacketSocket::bind_index_with(ifindex, |fd| {
            let v = TPACKET_V2;
            setsockopt(fd, libc::SOL_PACKET, PACKET_VERSION, &v).map_err(|e| NetError::Io {
                op: "setsockopt(PACKET_VERSION)",
                source: e,
            })?;
            setsockopt(
                fd,
                libc::SOL_PACKET,
                PACKET_TX_RING,
                &TpacketReq {
                    block_size: BLOCK_SIZE as u32,
                    block_nr: BLOCK_NR as u32,
                    frame_size: FRAME_SIZE as u32,
                    frame_nr: (BLOCK_SIZE / FRAME_SIZE * BLOCK_NR) as u32,
                },
            )
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ENOPROTOOPT) => unsupported("the kernel has no PACKET_TX_RING"),
                _ => NetError::Io {
                    op: "setsockopt(PACKET_TX_RING)",
                    source: e,
                },
            })
        })?;
        let len = BLOCK_SIZE * BLOCK_NR;
        let map = Mapping::of(&sock, len, "mmap(packet transmit ring)")?;
        Ok(TxRing {
            sock,
            map,
            slots: len / FRAME_SIZE,
            next: 0,
        })
    }

    pub fn socket(&self) -> &PacketSocket {
        &self.sock
    }

    /// Copies `frames` into free slots, in order, and hands them to the kernel with
    /// one `send`. Returns how many were queued: fewer when the ring is full (slots
    /// the kernel has not sent yet) or a frame does not fit a slot (that one and the
    /// rest are not sent).
    pub fn send(&mut self, frames: &[&[u8]]) -> Result<usize, NetError> {
        let mut queued = 0;
        for f in frames {
            let off = self.next * FRAME_SIZE;
            let Some(status) = self.map.status(off) else {
                break;
            };
            let st = status.load(Ordering::Acquire);
            if st != TP_STATUS_AVAILABLE && st != TP_STATUS_WRONG_FORMAT {
                break;
            }
            if f.len() > FRAME_SIZE - V2_TX_DATA {
                break;
            }
            // SAFETY: the slot is the process's (AVAILABLE, seen with acquire
            // ordering: the kernel is done with it and touches it again only after
            // the release store below); the header fields and the data stay inside
            // the slot (checked: V2_TX_DATA + len <= FRAME_SIZE, the slot within the
            // mapping as `status` checked its start and the mapping is whole slots).
            unsafe {
                let base = self.map.ptr.add(off);
                base.add(4).cast::<u32>().write_unaligned(f.len() as u32); // tp_len
                base.add(8).cast::<u32>().write_unaligned(f.len() as u32); // tp_snaplen
                std::ptr::copy_nonoverlapping(f.as_ptr(), base.add(V2_TX_DATA), f.len());
            }
            status.store(TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.next = (self.next + 1) % self.slots;
            queued += 1;
        }
        if queued > 0 {
            loop {
                // SAFETY: a kick with no data: the kernel sends the ring's requested
                // slots; nothing of ours is read.
                let n = unsafe {
                    libc::send(
                        self.sock.as_raw_fd(),
                        std::ptr::null(),
                        0,
                        libc::MSG_DONTWAIT,
                    )
                };
                if n >= 0 {
                    break;
                }
                let e = last_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) => break,
                    _ => {
                        return Err(NetError::Io {
                            op: "send(PACKET_TX_RING)",
                            source: e,
                        })
                    }
                }
            }
        }
        Ok(queued)
    }
}

impl AsRawFd for RingSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for RingSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl FramePort for RingSocket {
    fn mode(&self) -> IoMode {
        match self.version {
            RingVersion::V2 => IoMode::RingV2,
            RingVersion::V3 => IoMode::Ring,
        }
    }

    fn ifindex(&self) -> u32 {
        self.sock.ifindex()
    }

    fn recv(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(&[u8], FrameMeta),
    ) -> Result<usize, NetError> {
        Ok(self.recv_frames(max.max(1), each))
    }

    fn send(&mut self, frames: &[&[u8]], stamp: &[bool]) -> Result<usize, NetError> {
        self.sock.send_batch_stamped(frames, stamp)
    }

    fn tx_timestamps(&mut self, each: &mut dyn FnMut(TxTimestamp)) -> Result<usize, NetError> {
        self.sock.poll_tx_timestamps(each)
    }

    fn take_stats(&mut self) -> Result<PacketStats, NetError> {
        self.sock.take_stats()
    }

    fn take_error(&mut self) -> Result<Option<NetError>, NetError> {
        self.sock.take_error()
    }

    fn start(&mut self) -> Result<(), NetError> {
        self.sock.start_receiving()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::TP_STATUS_VLAN_VALID;

    fn v2_slot(status: u32, len: u32, snap: u32, mac: u16, pkttype: u8, data: &[u8]) -> Vec<u8> {
        let mut s = vec![0u8; FRAME_SIZE];
        s[0..4].copy_from_slice(&status.to_ne_bytes());
        s[4..8].copy_from_slice(&len.to_ne_bytes());
        s[8..12].copy_from_slice(&snap.to_ne_bytes());
        s[12..14].copy_from_slice(&mac.to_ne_bytes());
        s[16..20].copy_from_slice(&7u32.to_ne_bytes());
        s[20..24].copy_from_slice(&5u32.to_ne_bytes());
        s[24..26].copy_from_slice(&0x2005u16.to_ne_bytes());
        s[V2_HDR + SLL_PKTTYPE] = pkttype;
        let m = usize::from(mac);
        if m + data.len() <= s.len() {
            s[m..m + data.len()].copy_from_slice(data);
        }
        s
    }

    #[test]
    fn a_v2_slot_becomes_its_frame_and_meta() {
        let st = TP_STATUS_USER | TP_STATUS_CSUMNOTREADY | TP_STATUS_VLAN_VALID;
        let s = v2_slot(st, 60, 60, 66, 0, &[0xab; 60]);
        let (d, m) = parse_v2(&s, st).unwrap();
        assert_eq!(d, &[0xab; 60][..]);
        assert_eq!(
            m.kernel_rx,
            Some(Instant::new(ClockId::Realtime, 7_000_000_005))
        );
        assert!(m.csum_not_ready && !m.csum_valid && !m.truncated);
        assert_eq!(
            m.vlan,
            Some(VlanTag {
                tci: 0x2005,
                tpid: 0x8100
            })
        );
        assert_eq!((m.len, m.kind), (60, FrameKind::Host));
        // cut short by the slot
        let s = v2_slot(TP_STATUS_USER, 9000, 100, 66, 0, &[1; 100]);
        let (d, m) = parse_v2(&s, TP_STATUS_USER).unwrap();
        assert_eq!((d.len(), m.len, m.truncated), (100, 9000, true));
        // outgoing, and data beyond the slot, and a header inside the frame data
        assert!(parse_v2(&v2_slot(1, 60, 60, 66, PACKET_OUTGOING, &[]), 1).is_none());
        assert!(parse_v2(&v2_slot(1, 60, 4000, 66, 0, &[]), 1).is_none());
        assert!(parse_v2(&v2_slot(1, 60, 60, 2040, 0, &[]), 1).is_none());
        assert!(parse_v2(&v2_slot(1, 60, 60, 4, 0, &[]), 1).is_none());
        assert!(parse_v2(&[0u8; 20], 1).is_none());
    }

    /// A V3 block with frames of the given payloads, 16-byte aligned one after another.
    fn v3_block(frames: &[(&[u8], u8)]) -> Vec<u8> {
        let mut b = vec![0u8; 8192];
        b[8..12].copy_from_slice(&TP_STATUS_USER.to_ne_bytes());
        b[12..16].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        b[16..20].copy_from_slice(&(V3_BLOCK_DESC as u32).to_ne_bytes());
        let mut off = V3_BLOCK_DESC;
        for (i, (data, pkttype)) in frames.iter().enumerate() {
            let mac = 82usize;
            let size = (mac + data.len()).div_ceil(16) * 16;
            let next = if i + 1 == frames.len() {
                0
            } else {
                size as u32
            };
            let h = &mut b[off..];
            h[0..4].copy_from_slice(&next.to_ne_bytes());
            h[4..8].copy_from_slice(&(i as u32 + 1).to_ne_bytes());
            h[8..12].copy_from_slice(&3u32.to_ne_bytes());
            h[12..16].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            h[16..20].copy_from_slice(&(data.len() as u32).to_ne_bytes());
            h[20..24].copy_from_slice(&(TP_STATUS_USER | TP_STATUS_CSUM_VALID).to_ne_bytes());
            h[24..26].copy_from_slice(&(mac as u16).to_ne_bytes());
            h[V3_HDR + SLL_PKTTYPE] = *pkttype;
            h[mac..mac + data.len()].copy_from_slice(data);
            off += size;
        }
        b
    }

    fn walk_all(block: &[u8], max: usize) -> (Vec<Vec<u8>>, Option<(u32, usize)>) {
        let mut got = Vec::new();
        let w = walk_v3_block(block, 0, usize::MAX, max, &mut |d, m| {
            assert!(m.csum_valid);
            assert_eq!(m.len, d.len());
            got.push(d.to_vec());
        });
        assert_eq!(w.handed, got.len());
        (got, w.resume)
    }

    #[test]
    fn a_v3_block_hands_out_its_frames_in_order_and_resumes() {
        let b = v3_block(&[
            (&[1; 60], 0),
            (&[2; 1514], 0),
            (&[9; 60], PACKET_OUTGOING),
            (&[3; 70], 1),
        ]);
        let (got, resume) = walk_all(&b, 100);
        assert_eq!(got, vec![vec![1; 60], vec![2; 1514], vec![3; 70]]);
        assert_eq!(resume, None);
        // at most 2, then the rest from where it stopped
        let (first, resume) = walk_all(&b, 2);
        assert_eq!(first.len(), 2);
        let (done, at) = resume.unwrap();
        let mut rest = Vec::new();
        let w = walk_v3_block(&b, done, at, 100, &mut |d, _| rest.push(d.to_vec()));
        assert!(w.resume.is_none());
        assert_eq!(rest, vec![vec![3; 70]]);
    }

    #[test]
    fn a_malformed_v3_block_stops_without_reading_out_of_bounds() {
        let mut b = v3_block(&[(&[1; 60], 0), (&[2; 60], 0)]);
        // the second frame's offset points past the block
        b[V3_BLOCK_DESC..V3_BLOCK_DESC + 4].copy_from_slice(&100_000u32.to_ne_bytes());
        assert_eq!(walk_all(&b, 100).0, vec![vec![1; 60]]);
        // a next offset of 0 with frames left would loop on one frame
        b[V3_BLOCK_DESC..V3_BLOCK_DESC + 4].copy_from_slice(&0u32.to_ne_bytes());
        assert_eq!(walk_all(&b, 100).0, vec![vec![1; 60]]);
        // snaplen beyond the block
        let mut b = v3_block(&[(&[1; 60], 0)]);
        b[V3_BLOCK_DESC + 12..V3_BLOCK_DESC + 16].copy_from_slice(&9000u32.to_ne_bytes());
        assert!(walk_all(&b, 100).0.is_empty());
        // first frame inside the block descriptor
        let mut b = v3_block(&[(&[1; 60], 0)]);
        b[16..20].copy_from_slice(&4u32.to_ne_bytes());
        assert!(walk_all(&b, 100).0.is_empty());
        assert!(walk_all(&[0u8; 10], 100).0.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn ring_parsing_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..600), at in 0usize..700, done in 0u32..4) {
            let _ = parse_v2(&bytes, 1);
            let _ = walk_v3_block(&bytes, 0, usize::MAX, 64, &mut |_, _| {});
            let _ = walk_v3_block(&bytes, done, at, 64, &mut |_, _| {});
        }
    }
}
