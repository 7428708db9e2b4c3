//! IPv4 (RFC 791) headers: a zero-copy view with the router hot-path rewrites (TTL
//! decrement and DSCP marking with an incremental checksum update, RFC 1624), and a
//! [`Ipv4Repr`] for the datagrams lockstep itself sends and receives.
//!
//! | offset | size | field                                              |
//! |-------:|-----:|----------------------------------------------------|
//! | 0      | 1    | version (high 4 bits) = 4, IHL (low 4 bits, words)  |
//! | 1      | 1    | DSCP (high 6 bits), ECN (low 2 bits)               |
//! | 2      | 2    | total length (header + payload)                    |
//! | 4      | 2    | identification                                     |
//! | 6      | 2    | flags (reserved, DF, MF), fragment offset (8-byte units) |
//! | 8      | 1    | TTL                                                |
//! | 9      | 1    | protocol                                           |
//! | 10     | 2    | header checksum                                    |
//! | 12     | 4    | source address                                     |
//! | 16     | 4    | destination address                                |
//! | 20     | …    | options, up to `IHL * 4`; skipped                  |
//!
//! A buffer may be longer than `total_len` (an Ethernet frame padded to its
//! 60-byte minimum): [`Ipv4Packet::payload`] ends at `total_len`.

use std::net::Ipv4Addr;

use thiserror::Error;

use super::checksum::{fold, ones_complement_sum, update16};

/// Length of a header without options; the smallest valid header.
pub const HEADER_LEN: usize = 20;
/// The longest header: IHL 15.
pub const MAX_HEADER_LEN: usize = 60;
pub const PROTO_ICMP: u8 = 1;
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;
/// The TTL [`Ipv4Repr`]s built by lockstep use: Linux's default.
pub const DEFAULT_TTL: u8 = 64;

/// Why bytes are not an IPv4 datagram, or why an operation on one failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Ipv4Error {
    /// The buffer ends before the fixed header, the options or `total_len`.
    #[error("truncated IPv4 packet: needed {needed} bytes, got {got}")]
    Truncated { needed: usize, got: usize },
    #[error("not an IPv4 packet: version {0}")]
    BadVersion(u8),
    /// IHL below 5 words.
    #[error("bad IPv4 header length {0} bytes (at least {HEADER_LEN})")]
    BadHeaderLen(usize),
    /// `total_len` shorter than the header.
    #[error("IPv4 total length {total_len} is shorter than its header ({header_len} bytes)")]
    BadTotalLen { total_len: u16, header_len: usize },
    #[error("IPv4 header checksum mismatch (corrupted packet)")]
    BadChecksum,
    /// [`Ipv4Repr::parse`]: a fragment (MF set or a non-zero offset); lockstep never
    /// sends fragments and does not reassemble them.
    #[error("IPv4 fragment (offset {offset} bytes, more fragments: {more}): not reassembled")]
    Fragmented { offset: u16, more: bool },
    /// [`Ipv4Packet::decrement_ttl`]: the packet must not be forwarded.
    #[error("IPv4 TTL {0} expired")]
    TtlExpired(u8),
    #[error("DSCP {0} does not fit in 6 bits")]
    BadDscp(u8),
    #[error("ECN {0} does not fit in 2 bits")]
    BadEcn(u8),
    #[error("IPv4 payload of {0} bytes does not fit in a 65535-byte datagram")]
    PayloadTooLong(usize),
    #[error("buffer too small for IPv4 packet: needed {needed} bytes, got {got}")]
    BufferTooSmall { needed: usize, got: usize },
}

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_MASK: u16 = 0x1fff;

fn read_u16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

fn write_u16(data: &mut [u8], at: usize, value: u16) {
    data[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

fn read_addr(data: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(data[at], data[at + 1], data[at + 2], data[at + 3])
}

/// A zero-copy view of an IPv4 datagram.
///
/// After [`Ipv4Packet::new_checked`] no getter, setter or rewrite panics, as long as
/// the length fields are not changed afterwards (`set_header_len`, `set_total_len`
/// are for building packets). The header checksum is not checked by the view: a
/// router forwards first and lets [`Ipv4Packet::verify_checksum`] or
/// [`Ipv4Repr::parse`] decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wrap a buffer after [`Ipv4Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>, Ipv4Error> {
        let packet = Ipv4Packet::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Version 4, IHL ≥ 5, `header_len ≤ total_len ≤ buffer length`.
    pub fn check_len(&self) -> Result<(), Ipv4Error> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(Ipv4Error::Truncated {
                needed: HEADER_LEN,
                got,
            });
        }
        if self.version() != 4 {
            return Err(Ipv4Error::BadVersion(self.version()));
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Ipv4Error::BadHeaderLen(header_len));
        }
        if got < header_len {
            return Err(Ipv4Error::Truncated {
                needed: header_len,
                got,
            });
        }
        let total_len = self.total_len();
        if usize::from(total_len) < header_len {
            return Err(Ipv4Error::BadTotalLen {
                total_len,
                header_len,
            });
        }
        if got < usize::from(total_len) {
            return Err(Ipv4Error::Truncated {
                needed: usize::from(total_len),
                got,
            });
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole buffer (possibly longer than `total_len`).
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (`IHL * 4`), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// The 6-bit Differentiated Services code point.
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// The 2-bit Explicit Congestion Notification field.
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & FLAG_DF != 0
    }

    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field counts 8-byte units).
    pub fn frag_offset(&self) -> u16 {
        (read_u16(self.buffer.as_ref(), field::FLAGS_FRAG) & FRAG_MASK) << 3
    }

    /// A fragment: MF set or a non-zero offset.
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        read_addr(self.buffer.as_ref(), field::SRC)
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        read_addr(self.buffer.as_ref(), field::DST)
    }

    /// The options between the fixed header and `header_len` (not interpreted).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload: from `header_len` to `total_len`.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..usize::from(self.total_len())]
    }

    /// The datagram: the buffer up to `total_len` (without trailing link padding).
    pub fn datagram(&self) -> &[u8] {
        &self.buffer.as_ref()[..usize::from(self.total_len())]
    }

    /// Does the header (options included) sum to `0xffff`? `false`, never a panic,
    /// when the header does not fit the buffer or IHL is below 5.
    pub fn verify_checksum(&self) -> bool {
        let data = self.buffer.as_ref();
        let Some(&ver_ihl) = data.first() else {
            return false;
        };
        let header_len = usize::from(ver_ihl & 0x0f) * 4;
        if header_len < HEADER_LEN {
            return false;
        }
        match data.get(..header_len) {
            Some(header) => fold(ones_complement_sum(header, 0)) == 0xffff,
            None => false,
        }
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (version << 4) | (*b & 0x0f);
    }

    /// Set IHL from a length in bytes (a multiple of 4, 20 ..= 60).
    pub fn set_header_len(&mut self, len: usize) {
        let ihl = ((len / 4) & 0x0f) as u8;
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ihl;
    }

    /// Set the DSCP (masked to 6 bits), keeping ECN. The checksum is not touched.
    pub fn set_dscp(&mut self, dscp: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = ((dscp & 0x3f) << 2) | (*b & 0x03);
    }

    /// Set ECN (masked to 2 bits), keeping the DSCP. The checksum is not touched.
    pub fn set_ecn(&mut self, ecn: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (ecn & 0x03);
    }

    pub fn set_total_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::TOTAL_LEN, len);
    }

    pub fn set_ident(&mut self, ident: u16) {
        write_u16(self.buffer.as_mut(), field::IDENT, ident);
    }

    fn set_flag(&mut self, flag: u16, on: bool) {
        let data = self.buffer.as_mut();
        let old = read_u16(data, field::FLAGS_FRAG);
        let new = if on { old | flag } else { old & !flag };
        write_u16(data, field::FLAGS_FRAG, new);
    }

    pub fn set_dont_frag(&mut self, on: bool) {
        self.set_flag(FLAG_DF, on);
    }

    pub fn set_more_frags(&mut self, on: bool) {
        self.set_flag(FLAG_MF, on);
    }

    /// Set the fragment offset in bytes (rounded down to 8-byte units).
    pub fn set_frag_offset(&mut self, offset: u16) {
        let data = self.buffer.as_mut();
        let old = read_u16(data, field::FLAGS_FRAG);
        write_u16(
            data,
            field::FLAGS_FRAG,
            (old & !FRAG_MASK) | ((offset >> 3) & FRAG_MASK),
        );
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_protocol(&mut self, protocol: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol;
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, checksum);
    }

    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC..field::SRC + 4].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST..field::DST + 4].copy_from_slice(&addr.octets());
    }

    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (start, end) = (self.header_len(), usize::from(self.total_len()));
        &mut self.buffer.as_mut()[start..end]
    }

    /// Recompute the header checksum over `header_len` bytes.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = self.header_len();
        let sum = ones_complement_sum(&self.buffer.as_ref()[..header_len], 0);
        self.set_checksum(!fold(sum));
    }

    /// Router hot path: rewrite the DSCP (masked to 6 bits; ECN kept) and update the
    /// checksum incrementally (RFC 1624) instead of summing the header again.
    pub fn set_dscp_incremental(&mut self, dscp: u8) {
        let data = self.buffer.as_ref();
        let old = read_u16(data, field::VER_IHL);
        let new = (old & 0xff03) | (u16::from(dscp & 0x3f) << 2);
        let checksum = update16(self.checksum(), old, new);
        let data = self.buffer.as_mut();
        write_u16(data, field::VER_IHL, new);
        write_u16(data, field::CHECKSUM, checksum);
    }

    /// Router hot path: decrement the TTL and update the checksum incrementally
    /// (RFC 1624). Returns the new TTL. A packet arriving with TTL 0 or 1 must not
    /// be forwarded: [`Ipv4Error::TtlExpired`], and the packet is left untouched.
    pub fn decrement_ttl(&mut self) -> Result<u8, Ipv4Error> {
        let ttl = self.ttl();
        if ttl <= 1 {
            return Err(Ipv4Error::TtlExpired(ttl));
        }
        let data = self.buffer.as_ref();
        let old = read_u16(data, field::TTL);
        let new = old - 0x0100;
        let checksum = update16(self.checksum(), old, new);
        let data = self.buffer.as_mut();
        write_u16(data, field::TTL, new);
        write_u16(data, field::CHECKSUM, checksum);
        Ok(ttl - 1)
    }
}

/// An unfragmented IPv4 datagram as lockstep sends it: no options, DF set,
/// identification 0 (RFC 6864 allows any value for atomic datagrams).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    /// 6 bits.
    pub dscp: u8,
    /// 2 bits.
    pub ecn: u8,
    pub ttl: u8,
    /// Bytes after the header.
    pub payload_len: usize,
}

impl Ipv4Repr {
    /// Length of the header [`Ipv4Repr::emit`] writes (no options).
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Validate lengths and the checksum; options are skipped. Fragments are
    /// refused ([`Ipv4Error::Fragmented`]): a repr stands for a whole datagram.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr, Ipv4Error> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Ipv4Error::BadChecksum);
        }
        if packet.is_fragment() {
            return Err(Ipv4Error::Fragmented {
                offset: packet.frag_offset(),
                more: packet.more_frags(),
            });
        }
        Ok(Ipv4Repr {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            protocol: packet.protocol(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ttl: packet.ttl(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
        })
    }

    /// Header plus payload: the `total_len` [`Ipv4Repr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN.saturating_add(self.payload_len)
    }

    /// Check the fields fit their bits and the datagram fits 65535 bytes.
    pub fn validate(&self) -> Result<(), Ipv4Error> {
        if self.dscp > 0x3f {
            return Err(Ipv4Error::BadDscp(self.dscp));
        }
        if self.ecn > 0x03 {
            return Err(Ipv4Error::BadEcn(self.ecn));
        }
        if self.buffer_len() > usize::from(u16::MAX) {
            return Err(Ipv4Error::PayloadTooLong(self.payload_len));
        }
        Ok(())
    }

    /// Write the header and its checksum; the payload bytes are left alone. The
    /// buffer must hold the whole datagram ([`Ipv4Repr::buffer_len`]) so that the
    /// result is a valid packet. Fails, writing nothing, otherwise.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Ipv4Packet<T>,
    ) -> Result<(), Ipv4Error> {
        self.validate()?;
        let needed = self.buffer_len();
        let got = packet.as_bytes().len();
        if got < needed {
            return Err(Ipv4Error::BufferTooSmall { needed, got });
        }
        let data = packet.as_bytes_mut();
        data[field::VER_IHL] = 0x45;
        data[field::DSCP_ECN] = (self.dscp << 2) | self.ecn;
        write_u16(data, field::TOTAL_LEN, needed as u16);
        write_u16(data, field::IDENT, 0);
        write_u16(data, field::FLAGS_FRAG, FLAG_DF);
        data[field::TTL] = self.ttl;
        data[field::PROTOCOL] = self.protocol;
        packet.set_src_addr(self.src);
        packet.set_dst_addr(self.dst);
        packet.fill_checksum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::checksum::checksum;
    use proptest::prelude::*;

    /// A hand-made UDP datagram: 192.168.0.1 → 192.168.0.199, TTL 64, DF, total
    /// length 0x73; header checksum 0xb861 worked out by hand (and in the
    /// checksum module's tests).
    fn known_header() -> [u8; 20] {
        [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ]
    }

    fn known_packet() -> Vec<u8> {
        let mut v = known_header().to_vec();
        v.extend((0..0x73 - 20).map(|i| i as u8));
        v
    }

    fn sample_repr() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: PROTO_UDP,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            payload_len: 0x73 - 20,
        }
    }

    #[test]
    fn getters_read_a_known_header() {
        let bytes = known_packet();
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!((p.dscp(), p.ecn()), (0, 0));
        assert_eq!(p.total_len(), 0x73);
        assert_eq!(p.ident(), 0);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert!(!p.is_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), PROTO_UDP);
        assert_eq!(p.checksum(), 0xb861);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert_eq!(p.options(), &[] as &[u8]);
        assert_eq!(p.payload(), &bytes[20..]);
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), Ok(sample_repr()));
    }

    #[test]
    fn emit_writes_the_known_header() {
        let mut buf = known_packet();
        buf[..20].fill(0xaa);
        sample_repr()
            .emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]))
            .unwrap();
        assert_eq!(&buf[..20], &known_header());
        assert_eq!(buf, known_packet());
    }

    #[test]
    fn dscp_ecn_flags_and_fragment_fields() {
        // 0x71 = DSCP 0x1c (a TDP mark in an odd frame), ECN 1; flags MF, offset 185*8.
        let mut bytes = known_header();
        bytes[1] = 0x71;
        bytes[6..8].copy_from_slice(&(0x2000u16 | 185).to_be_bytes());
        let p = Ipv4Packet::new_unchecked(&bytes[..]);
        assert_eq!((p.dscp(), p.ecn()), (0x1c, 1));
        assert!(!p.dont_frag());
        assert!(p.more_frags());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_fragment());
    }

    #[test]
    fn setters_write_every_field() {
        let mut buf = [0u8; 28];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_dscp(0x2c);
        p.set_ecn(2);
        p.set_total_len(28);
        p.set_ident(0xbeef);
        p.set_dont_frag(true);
        p.set_more_frags(true);
        p.set_frag_offset(16);
        p.set_ttl(3);
        p.set_protocol(PROTO_TCP);
        p.set_src_addr(Ipv4Addr::new(10, 0, 0, 1));
        p.set_dst_addr(Ipv4Addr::new(10, 0, 1, 2));
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        p.payload_mut().copy_from_slice(&[9, 8, 7, 6]);
        p.fill_checksum();
        assert!(p.verify_checksum());
        p.set_dont_frag(false);
        p.set_more_frags(false);
        p.set_frag_offset(0);
        p.fill_checksum();
        let header = [
            0x46, 0xb2, 0x00, 0x1c, 0xbe, 0xef, 0x00, 0x00, 0x03, 0x06, 0x00, 0x00, 10, 0, 0, 1,
            10, 0, 1, 2, 1, 1, 1, 0,
        ];
        let sum = checksum(&header);
        assert_eq!(&buf[..10], &header[..10]);
        assert_eq!(&buf[10..12], &sum.to_be_bytes());
        assert_eq!(&buf[12..24], &header[12..24]);
        assert_eq!(&buf[24..], &[9, 8, 7, 6]);
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[9, 8, 7, 6]);
        assert_eq!(
            Ipv4Repr::parse(&p),
            Ok(Ipv4Repr {
                src: Ipv4Addr::new(10, 0, 0, 1),
                dst: Ipv4Addr::new(10, 0, 1, 2),
                protocol: PROTO_TCP,
                dscp: 0x2c,
                ecn: 2,
                ttl: 3,
                payload_len: 4,
            })
        );
    }

    #[test]
    fn every_truncation_is_rejected() {
        let bytes = known_packet();
        for n in 0..bytes.len() {
            let needed = if n < 20 { 20 } else { 0x73 };
            assert_eq!(
                Ipv4Packet::new_checked(&bytes[..n]),
                Err(Ipv4Error::Truncated { needed, got: n }),
                "cut at {n}"
            );
            assert_eq!(
                Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bytes[..n])),
                Err(Ipv4Error::Truncated { needed, got: n })
            );
        }
        // Options beyond the buffer: IHL 15 in a 40-byte buffer.
        let mut with_options = known_packet();
        with_options[0] = 0x4f;
        assert_eq!(
            Ipv4Packet::new_checked(&with_options[..40]),
            Err(Ipv4Error::Truncated {
                needed: 60,
                got: 40
            })
        );
    }

    #[test]
    fn link_padding_after_total_len_is_not_payload() {
        let mut bytes = known_packet();
        bytes.extend_from_slice(&[0; 18]);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload().len(), 0x73 - 20);
        assert_eq!(p.datagram().len(), 0x73);
        assert_eq!(Ipv4Repr::parse(&p).unwrap().payload_len, 0x73 - 20);
    }

    #[test]
    fn malformed_headers_are_rejected() {
        let mut v6 = known_packet();
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]),
            Err(Ipv4Error::BadVersion(6))
        );
        let mut short_ihl = known_packet();
        short_ihl[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&short_ihl[..]),
            Err(Ipv4Error::BadHeaderLen(16))
        );
        assert!(!Ipv4Packet::new_unchecked(&short_ihl[..]).verify_checksum());
        let mut short_total = known_packet();
        short_total[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&short_total[..]),
            Err(Ipv4Error::BadTotalLen {
                total_len: 19,
                header_len: 20
            })
        );
        let mut corrupted = known_packet();
        corrupted[15] ^= 0x04;
        let p = Ipv4Packet::new_checked(&corrupted[..]).unwrap();
        assert!(!p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p), Err(Ipv4Error::BadChecksum));
        let mut fragment = known_packet();
        fragment[6..8].copy_from_slice(&0x2000u16.to_be_bytes());
        let mut p = Ipv4Packet::new_checked(&mut fragment[..]).unwrap();
        p.fill_checksum();
        assert_eq!(
            Ipv4Repr::parse(&p),
            Err(Ipv4Error::Fragmented {
                offset: 0,
                more: true
            })
        );
        assert!(!Ipv4Packet::new_unchecked(&[][..]).verify_checksum());
        assert!(!Ipv4Packet::new_unchecked(&known_header()[..19]).verify_checksum());
    }

    #[test]
    fn ttl_decrement_and_dscp_rewrite_keep_the_checksum() {
        let mut bytes = known_packet();
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.decrement_ttl(), Ok(63));
        assert_eq!(p.checksum(), 0xb961);
        p.set_dscp_incremental(0x1c);
        assert_eq!(p.dscp(), 0x1c);
        assert!(p.verify_checksum());
        let incremental = p.checksum();
        p.fill_checksum();
        assert_eq!(p.checksum(), incremental);

        for ttl in [0u8, 1] {
            let mut bytes = known_packet();
            bytes[8] = ttl;
            let before = bytes.clone();
            let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
            assert_eq!(p.decrement_ttl(), Err(Ipv4Error::TtlExpired(ttl)));
            assert_eq!(bytes, before, "an expired packet is left untouched");
        }
    }

    #[test]
    fn incremental_rewrite_keeps_a_bad_checksum_bad() {
        let mut bytes = known_packet();
        bytes[13] ^= 0x10; // corrupted upstream
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        p.decrement_ttl().unwrap();
        p.set_dscp_incremental(0x0c);
        assert!(!p.verify_checksum());
    }

    #[test]
    fn emit_refuses_bad_reprs() {
        let mut buf = [0u8; 200];
        let mut p = Ipv4Packet::new_unchecked(&mut buf[..]);
        let r = sample_repr();
        assert_eq!(
            Ipv4Repr { dscp: 64, ..r }.emit(&mut p),
            Err(Ipv4Error::BadDscp(64))
        );
        assert_eq!(
            Ipv4Repr { ecn: 4, ..r }.emit(&mut p),
            Err(Ipv4Error::BadEcn(4))
        );
        assert_eq!(
            Ipv4Repr {
                payload_len: 65516,
                ..r
            }
            .emit(&mut p),
            Err(Ipv4Error::PayloadTooLong(65516))
        );
        assert_eq!(
            Ipv4Repr {
                payload_len: 181,
                ..r
            }
            .emit(&mut p),
            Err(Ipv4Error::BufferTooSmall {
                needed: 201,
                got: 200
            })
        );
        assert!(buf.iter().all(|&b| b == 0), "nothing written");
        assert_eq!(
            Ipv4Repr {
                payload_len: usize::MAX,
                ..r
            }
            .buffer_len(),
            usize::MAX
        );
    }

    #[test]
    fn error_messages_are_clear() {
        assert_eq!(
            Ipv4Error::Truncated { needed: 20, got: 7 }.to_string(),
            "truncated IPv4 packet: needed 20 bytes, got 7"
        );
        assert_eq!(
            Ipv4Error::BadTotalLen {
                total_len: 19,
                header_len: 20
            }
            .to_string(),
            "IPv4 total length 19 is shorter than its header (20 bytes)"
        );
        assert_eq!(Ipv4Error::TtlExpired(1).to_string(), "IPv4 TTL 1 expired");
    }

    fn arb_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            0u8..64,
            0u8..4,
            any::<u8>(),
            0usize..200,
        )
            .prop_map(|(s, d, protocol, dscp, ecn, ttl, payload_len)| Ipv4Repr {
                src: Ipv4Addr::from(s),
                dst: Ipv4Addr::from(d),
                protocol,
                dscp,
                ecn,
                ttl,
                payload_len,
            })
    }

    /// Any header a router may see: options, fragments, any ident and flags.
    fn arb_header() -> impl Strategy<Value = Vec<u8>> {
        (
            5usize..=15,
            prop::collection::vec(any::<u8>(), 60),
            0usize..50,
        )
            .prop_map(|(ihl, raw, payload)| {
                let header_len = ihl * 4;
                let mut v = raw[..header_len].to_vec();
                v.resize(header_len + payload, 0x5a);
                v[0] = 0x40 | ihl as u8;
                let total = v.len() as u16;
                v[2..4].copy_from_slice(&total.to_be_bytes());
                let mut p = Ipv4Packet::new_unchecked(&mut v[..]);
                p.fill_checksum();
                v
            })
    }

    proptest! {
        #![proptest_config(crate::fuzz_config(256))]

        #[test]
        fn repr_round_trips(repr in arb_repr(), fill in any::<u8>()) {
            let mut buf = vec![fill; repr.buffer_len()];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..])).unwrap();
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Ipv4Repr::parse(&p), Ok(repr));
            prop_assert!(p.payload().iter().all(|&b| b == fill));
        }

        #[test]
        fn incremental_update_equals_full_recomputation(
            header in arb_header(),
            dscps in prop::collection::vec(0u8..64, 0..4),
            decrements in 0usize..4,
        ) {
            let mut buf = header;
            let mut p = Ipv4Packet::new_checked(&mut buf[..]).unwrap();
            for _ in 0..decrements {
                let ttl = p.ttl();
                match p.decrement_ttl() {
                    Ok(new) => prop_assert_eq!(new, ttl - 1),
                    Err(e) => prop_assert_eq!(e, Ipv4Error::TtlExpired(ttl)),
                }
            }
            for &dscp in &dscps {
                let ecn = p.ecn();
                p.set_dscp_incremental(dscp);
                prop_assert_eq!((p.dscp(), p.ecn()), (dscp, ecn));
            }
            let incremental = p.checksum();
            prop_assert!(p.verify_checksum());
            p.fill_checksum();
            prop_assert_eq!(incremental, p.checksum());
        }

        #[test]
        fn fuzz_smoke_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..120)) {
            fuzz_one(&data)?;
        }

        #[test]
        fn fuzz_smoke_mutated_packets(
            header in arb_header(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut in prop::option::of(any::<prop::sample::Index>()),
            refill in any::<bool>(),
        ) {
            let mut buf = header;
            for (at, value) in edits {
                let i = at.index(buf.len());
                buf[i] = value;
            }
            if let Some(at) = cut {
                buf.truncate(at.index(buf.len() + 1));
            }
            if refill {
                if let Ok(mut p) = Ipv4Packet::new_checked(&mut buf[..]) {
                    p.fill_checksum();
                }
            }
            fuzz_one(&buf)?;
        }
    }

    /// What the fuzz target checks for IPv4 alone: a checked view's accessors and
    /// rewrites never panic, rewrites keep checksum validity, and whatever parses
    /// re-emits to the same repr.
    fn fuzz_one(data: &[u8]) -> Result<(), TestCaseError> {
        let _ = Ipv4Packet::new_unchecked(data).verify_checksum();
        if let Ok(p) = Ipv4Packet::new_checked(data) {
            let _ = (p.dscp(), p.ecn(), p.ident(), p.frag_offset(), p.options());
            let _ = (p.payload(), p.datagram(), p.src_addr(), p.dst_addr());
            let valid = p.verify_checksum();
            let mut owned = data.to_vec();
            let mut m = Ipv4Packet::new_unchecked(&mut owned[..]);
            let _ = m.decrement_ttl();
            m.set_dscp_incremental(0x1c);
            prop_assert_eq!(m.verify_checksum(), valid);
        }
        if let Ok(repr) = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(data)) {
            let mut out = vec![0u8; repr.buffer_len()];
            prop_assert_eq!(
                repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..])),
                Ok(())
            );
            prop_assert_eq!(
                Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&out[..])),
                Ok(repr)
            );
        }
        Ok(())
    }
}
