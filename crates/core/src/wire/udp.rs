//! UDP (RFC 768) over IPv4.
//!
//! | offset | size | field    |
//! |-------:|-----:|----------|
//! | 0      | 2    | src_port |
//! | 2      | 2    | dst_port |
//! | 4      | 2    | length (header + payload) |
//! | 6      | 2    | checksum |
//!
//! The checksum covers the IPv4 pseudo-header (source, destination, protocol 17,
//! UDP length), the header and the payload. Over IPv4 a checksum field of 0 means
//! "no checksum"; so a computed checksum of 0 is sent as `0xffff`, its other
//! ones'-complement representation.
//!
//! Packets read from an `AF_PACKET` socket on a host whose sender had checksum
//! offload on arrive "partial" (`TP_STATUS_CSUMNOTREADY`): the field holds only the
//! pseudo-header sum and the rest was meant for the NIC.
//! [`UdpPacket::finish_partial_checksum`] completes it, as the NIC would have.

use std::net::Ipv4Addr;

use thiserror::Error;

use super::checksum::{fold, ones_complement_sum, pseudo_header_sum, update_bytes, SumChange};
use super::ipv4::PROTO_UDP;

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;
/// The discard service (RFC 863): where TDP padding packets go, so that a neighbour
/// that is not a lockstep node drops them quietly.
pub const DISCARD_PORT: u16 = 9;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum UdpError {
    /// The buffer ends before the header or before the length the header claims.
    #[error("truncated UDP datagram: needed {needed} bytes, got {got}")]
    Truncated { needed: usize, got: usize },
    /// The length field is shorter than the header.
    #[error("bad UDP length {0} (at least {HEADER_LEN})")]
    BadLength(u16),
    #[error("UDP checksum mismatch (corrupted datagram)")]
    BadChecksum,
    #[error("UDP payload of {0} bytes does not fit in a 65535-byte datagram")]
    PayloadTooLong(usize),
    #[error("buffer too small for UDP datagram: needed {needed} bytes, got {got}")]
    BufferTooSmall { needed: usize, got: usize },
}

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

fn read_u16(data: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([data[at], data[at + 1]])
}

fn write_u16(data: &mut [u8], at: usize, value: u16) {
    data[at..at + 2].copy_from_slice(&value.to_be_bytes());
}

/// A computed checksum as it goes on the wire: 0 would mean "none", so `0xffff`.
fn on_wire(checksum: u16) -> u16 {
    if checksum == 0 {
        0xffff
    } else {
        checksum
    }
}

/// A zero-copy view of a UDP datagram (the IPv4 payload).
///
/// After [`UdpPacket::new_checked`] no getter or setter panics as long as the
/// length field is not changed afterwards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wrap a buffer after [`UdpPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>, UdpError> {
        let packet = UdpPacket::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `HEADER_LEN ≤ length ≤ buffer length`. Bytes after `length` are ignored.
    pub fn check_len(&self) -> Result<(), UdpError> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(UdpError::Truncated {
                needed: HEADER_LEN,
                got,
            });
        }
        let len = self.len();
        if usize::from(len) < HEADER_LEN {
            return Err(UdpError::BadLength(len));
        }
        if got < usize::from(len) {
            return Err(UdpError::Truncated {
                needed: usize::from(len),
                got,
            });
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// The length field: header plus payload.
    #[allow(clippy::len_without_is_empty)] // a wire field, never "empty"
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload: from the header to `length`.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    /// Header and payload up to `length`, or `None` if the buffer is shorter.
    fn datagram(&self) -> Option<&[u8]> {
        let data = self.buffer.as_ref();
        let len = usize::from(read_u16(data.get(..HEADER_LEN)?, field::LENGTH));
        if len < HEADER_LEN {
            return None;
        }
        data.get(..len)
    }

    /// Does the checksum match the pseudo-header of `src → dst`? A checksum of 0
    /// ("none", allowed over IPv4) passes. `false`, never a panic, when the buffer
    /// is shorter than the length field says.
    pub fn verify_checksum(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let Some(datagram) = self.datagram() else {
            return false;
        };
        if self.checksum() == 0 {
            return true;
        }
        let len = datagram.len() as u16;
        let sum = ones_complement_sum(datagram, pseudo_header_sum(src, dst, PROTO_UDP, len));
        fold(sum) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    pub fn set_src_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::SRC_PORT, port);
    }

    pub fn set_dst_port(&mut self, port: u16) {
        write_u16(self.buffer.as_mut(), field::DST_PORT, port);
    }

    pub fn set_len(&mut self, len: u16) {
        write_u16(self.buffer.as_mut(), field::LENGTH, len);
    }

    pub fn set_checksum(&mut self, checksum: u16) {
        write_u16(self.buffer.as_mut(), field::CHECKSUM, checksum);
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Compute the checksum for `src → dst` over header and payload (0 sent as
    /// `0xffff`).
    pub fn fill_checksum(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let len = self.len();
        let datagram = &self.buffer.as_ref()[..usize::from(len)];
        let sum = ones_complement_sum(datagram, pseudo_header_sum(src, dst, PROTO_UDP, len));
        self.set_checksum(on_wire(!fold(sum)));
    }

    /// Adjusts the checksum for a change of the covered bytes (no checksum, 0,
    /// stays none). Equals [`UdpPacket::fill_checksum`] when the checksum was right.
    pub fn adjust_checksum(&mut self, change: SumChange) {
        let old = self.checksum();
        if old != 0 {
            self.set_checksum(on_wire(change.apply(old)));
        }
    }

    /// Complete a checksum left partial by a sender's offload
    /// (`CHECKSUM_PARTIAL` / `TP_STATUS_CSUMNOTREADY`): the field holds the folded
    /// pseudo-header sum, not complemented; sum the datagram with it in place and
    /// store the complement, as the NIC (or Linux's `skb_checksum_help`) would.
    pub fn finish_partial_checksum(&mut self) {
        let len = usize::from(self.len());
        let sum = ones_complement_sum(&self.buffer.as_ref()[..len], 0);
        self.set_checksum(on_wire(!fold(sum)));
    }

    /// Adjust the checksum after bytes `old` of the datagram became `new` (same
    /// length, starting at an even offset from the UDP header), without summing the
    /// datagram again: how a router keeps the checksum right after appending a hop
    /// record to a probe. A checksum of 0 ("none") stays 0.
    pub fn update_checksum(&mut self, old: &[u8], new: &[u8]) {
        let checksum = self.checksum();
        if checksum != 0 {
            self.set_checksum(on_wire(update_bytes(checksum, old, new)));
        }
    }
}

/// A parsed UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Bytes after the header.
    pub payload_len: usize,
}

impl UdpRepr {
    /// Length of the UDP header.
    pub const HEADER_LEN: usize = HEADER_LEN;

    /// Validate lengths and, when `check_checksum`, the checksum for `src → dst`
    /// (skip it when the kernel already checked it or the sender left it partial).
    pub fn parse<T: AsRef<[u8]>>(
        packet: &UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
        check_checksum: bool,
    ) -> Result<UdpRepr, UdpError> {
        packet.check_len()?;
        if check_checksum && !packet.verify_checksum(src, dst) {
            return Err(UdpError::BadChecksum);
        }
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Header plus payload: the length field [`UdpRepr::emit`] writes.
    pub fn buffer_len(&self) -> usize {
        HEADER_LEN.saturating_add(self.payload_len)
    }

    fn check_buffer(&self, got: usize) -> Result<u16, UdpError> {
        let needed = self.buffer_len();
        // The IPv4 header (20 bytes) must fit in the same 65535-byte datagram.
        if needed > usize::from(u16::MAX) - super::ipv4::HEADER_LEN {
            return Err(UdpError::PayloadTooLong(self.payload_len));
        }
        if got < needed {
            return Err(UdpError::BufferTooSmall { needed, got });
        }
        Ok(needed as u16)
    }

    /// Write the header with checksum 0 ("none"); the payload is left alone. For a
    /// sender that writes the payload afterwards and then calls
    /// [`UdpPacket::fill_checksum`] (or leaves the checksum out).
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
    ) -> Result<(), UdpError> {
        let len = self.check_buffer(packet.as_bytes().len())?;
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.set_checksum(0);
        Ok(())
    }

    /// Write the header and the checksum for `src → dst` over the payload already in
    /// the buffer. Fails, writing nothing, when the buffer is shorter than
    /// [`UdpRepr::buffer_len`] or the datagram would not fit in IPv4.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut UdpPacket<T>,
        src: Ipv4Addr,
        dst: Ipv4Addr,
    ) -> Result<(), UdpError> {
        self.emit_header(packet)?;
        packet.fill_checksum(src, dst);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(192, 168, 0, 199);

    /// 1234 → 9, length 12, payload "abcd", checksum worked out by hand:
    /// pseudo-header c0a8+0001+c0a8+00c7+0011+000c = 0x18235 → 0x8236;
    /// header 04d2+0009+000c = 0x04e7; payload 6162+6364 = 0xc4c6;
    /// 0x8236 + 0x04e7 + 0xc4c6 = 0x14be3 → 0x4be4; checksum !0x4be4 = 0xb41b.
    const KNOWN: [u8; 12] = [
        0x04, 0xd2, 0x00, 0x09, 0x00, 0x0c, 0xb4, 0x1b, b'a', b'b', b'c', b'd',
    ];

    #[test]
    fn getters_read_a_known_datagram() {
        let p = UdpPacket::new_checked(&KNOWN[..]).unwrap();
        assert_eq!(p.src_port(), 1234);
        assert_eq!(p.dst_port(), DISCARD_PORT);
        assert_eq!(p.len(), 12);
        assert_eq!(p.checksum(), 0xb41b);
        assert_eq!(p.payload(), b"abcd");
        assert!(p.verify_checksum(SRC, DST));
        assert!(!p.verify_checksum(DST, Ipv4Addr::new(192, 168, 0, 2)));
        assert_eq!(
            UdpRepr::parse(&p, SRC, DST, true),
            Ok(UdpRepr {
                src_port: 1234,
                dst_port: 9,
                payload_len: 4
            })
        );
    }

    #[test]
    fn emit_writes_the_known_datagram() {
        let mut buf = [0xeeu8; 12];
        buf[8..].copy_from_slice(b"abcd");
        let repr = UdpRepr {
            src_port: 1234,
            dst_port: 9,
            payload_len: 4,
        };
        repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), SRC, DST)
            .unwrap();
        assert_eq!(buf, KNOWN);
        repr.emit_header(&mut UdpPacket::new_unchecked(&mut buf[..]))
            .unwrap();
        assert_eq!(&buf[6..8], &[0, 0]);
    }

    #[test]
    fn setters_write_every_field() {
        let mut buf = [0u8; 12];
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        p.set_src_port(0x0102);
        p.set_dst_port(0x0304);
        p.set_len(12);
        p.set_checksum(0x0506);
        p.payload_mut().copy_from_slice(&[7, 8, 9, 10]);
        assert_eq!(buf, [1, 2, 3, 4, 0, 12, 5, 6, 7, 8, 9, 10]);
    }

    #[test]
    fn a_zero_checksum_means_none_and_a_computed_zero_is_sent_as_ffff() {
        let mut none = KNOWN;
        none[6..8].copy_from_slice(&[0, 0]);
        none[8] ^= 0xff; // anything goes without a checksum
        assert!(UdpPacket::new_unchecked(&none[..]).verify_checksum(SRC, DST));

        // Payload chosen so the sum is 0xffff: the checksum computes to 0 and must
        // go on the wire as 0xffff. With length 10: pseudo-header
        // c0a8+0001+c0a8+00c7+0011+000a → 0x8234, header 04d2+0009+000a = 0x04e5,
        // together 0x8719; the payload word 0x78e6 brings the sum to 0xffff.
        let mut buf = [0u8; 10];
        buf[8..].copy_from_slice(&0x78e6u16.to_be_bytes());
        let repr = UdpRepr {
            src_port: 1234,
            dst_port: 9,
            payload_len: 2,
        };
        let mut p = UdpPacket::new_unchecked(&mut buf[..]);
        repr.emit(&mut p, SRC, DST).unwrap();
        assert_eq!(p.checksum(), 0xffff);
        assert!(p.verify_checksum(SRC, DST));
        p.set_checksum(0x0001);
        assert!(!p.verify_checksum(SRC, DST));
    }

    #[test]
    fn partial_checksum_is_finished_like_the_nic() {
        // What the sender's kernel hands the NIC: the folded pseudo-header sum.
        let mut buf = KNOWN;
        let pseudo = fold(pseudo_header_sum(SRC, DST, PROTO_UDP, 12));
        assert_eq!(pseudo, 0x8236);
        buf[6..8].copy_from_slice(&pseudo.to_be_bytes());
        let mut p = UdpPacket::new_checked(&mut buf[..]).unwrap();
        assert!(!p.verify_checksum(SRC, DST));
        p.finish_partial_checksum();
        assert_eq!(buf, KNOWN);
    }

    #[test]
    fn every_truncation_is_rejected() {
        for n in 0..KNOWN.len() {
            let needed = if n < HEADER_LEN { HEADER_LEN } else { 12 };
            assert_eq!(
                UdpPacket::new_checked(&KNOWN[..n]),
                Err(UdpError::Truncated { needed, got: n })
            );
            assert_eq!(
                UdpRepr::parse(&UdpPacket::new_unchecked(&KNOWN[..n]), SRC, DST, false),
                Err(UdpError::Truncated { needed, got: n })
            );
            assert!(!UdpPacket::new_unchecked(&KNOWN[..n]).verify_checksum(SRC, DST));
        }
        let mut short = KNOWN;
        short[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            UdpPacket::new_checked(&short[..]),
            Err(UdpError::BadLength(7))
        );
        assert!(!UdpPacket::new_unchecked(&short[..]).verify_checksum(SRC, DST));
    }

    #[test]
    fn bytes_after_the_length_are_ignored() {
        let mut long = KNOWN.to_vec();
        long.extend_from_slice(&[1, 2, 3]);
        let p = UdpPacket::new_checked(&long[..]).unwrap();
        assert_eq!(p.payload(), b"abcd");
        assert!(p.verify_checksum(SRC, DST));
    }

    #[test]
    fn bad_checksum_is_an_error_only_when_checked() {
        let mut bad = KNOWN;
        bad[9] ^= 1;
        let p = UdpPacket::new_checked(&bad[..]).unwrap();
        assert_eq!(
            UdpRepr::parse(&p, SRC, DST, true),
            Err(UdpError::BadChecksum)
        );
        assert!(UdpRepr::parse(&p, SRC, DST, false).is_ok());
    }

    #[test]
    fn emit_refuses_what_does_not_fit() {
        let repr = UdpRepr {
            src_port: 1,
            dst_port: 2,
            payload_len: 5,
        };
        let mut buf = [0u8; 12];
        assert_eq!(
            repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), SRC, DST),
            Err(UdpError::BufferTooSmall {
                needed: 13,
                got: 12
            })
        );
        assert_eq!(buf, [0; 12]);
        let huge = UdpRepr {
            payload_len: 65_508,
            ..repr
        };
        assert_eq!(
            huge.emit_header(&mut UdpPacket::new_unchecked(&mut buf[..])),
            Err(UdpError::PayloadTooLong(65_508))
        );
        let max = UdpRepr {
            payload_len: 65_507,
            ..repr
        };
        let mut big = vec![0u8; max.buffer_len()];
        assert!(max
            .emit(&mut UdpPacket::new_unchecked(&mut big[..]), SRC, DST)
            .is_ok());
    }

    #[test]
    fn incremental_update_after_a_payload_rewrite() {
        let mut buf = KNOWN;
        let mut p = UdpPacket::new_checked(&mut buf[..]).unwrap();
        p.payload_mut()[..2].copy_from_slice(b"xy");
        p.update_checksum(b"ab", b"xy");
        assert!(p.verify_checksum(SRC, DST));
        let mut none = KNOWN;
        none[6..8].copy_from_slice(&[0, 0]);
        let mut p = UdpPacket::new_checked(&mut none[..]).unwrap();
        p.update_checksum(b"ab", b"xy");
        assert_eq!(p.checksum(), 0);
    }

    fn arb_datagram() -> impl Strategy<Value = (Vec<u8>, Ipv4Addr, Ipv4Addr)> {
        (
            any::<u16>(),
            any::<u16>(),
            prop::collection::vec(any::<u8>(), 0..100),
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
        )
            .prop_map(|(sp, dp, payload, s, d)| {
                let (src, dst) = (Ipv4Addr::from(s), Ipv4Addr::from(d));
                let repr = UdpRepr {
                    src_port: sp,
                    dst_port: dp,
                    payload_len: payload.len(),
                };
                let mut buf = vec![0u8; repr.buffer_len()];
                buf[HEADER_LEN..].copy_from_slice(&payload);
                repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), src, dst)
                    .unwrap();
                (buf, src, dst)
            })
    }

    proptest! {
        #![proptest_config(crate::fuzz_config(256))]

        #[test]
        fn repr_round_trips((buf, src, dst) in arb_datagram()) {
            let p = UdpPacket::new_checked(&buf[..]).unwrap();
            prop_assert_ne!(p.checksum(), 0);
            prop_assert!(p.verify_checksum(src, dst));
            let repr = UdpRepr::parse(&p, src, dst, true).unwrap();
            prop_assert_eq!(repr.payload_len, buf.len() - HEADER_LEN);
            let mut out = buf.clone();
            out[..HEADER_LEN].fill(0);
            repr.emit(&mut UdpPacket::new_unchecked(&mut out[..]), src, dst).unwrap();
            prop_assert_eq!(out, buf);
        }

        #[test]
        fn any_single_bit_flip_is_caught((buf, src, dst) in arb_datagram(),
                                          bit in any::<prop::sample::Index>()) {
            let mut bad = buf.clone();
            let i = bit.index(bad.len() * 8);
            bad[i / 8] ^= 1 << (i % 8);
            let p = UdpPacket::new_unchecked(&bad[..]);
            // A flip in the checksum field that yields 0 means "no checksum".
            if p.checksum() != 0 {
                prop_assert!(!p.verify_checksum(src, dst));
            }
        }

        #[test]
        fn partial_then_finished_equals_full((buf, src, dst) in arb_datagram()) {
            let mut partial = buf.clone();
            let len = partial.len() as u16;
            let pseudo = fold(pseudo_header_sum(src, dst, PROTO_UDP, len));
            partial[6..8].copy_from_slice(&pseudo.to_be_bytes());
            UdpPacket::new_unchecked(&mut partial[..]).finish_partial_checksum();
            prop_assert_eq!(partial, buf);
        }

        #[test]
        fn update_checksum_equals_fill((buf, src, dst) in arb_datagram(),
                                       at in any::<prop::sample::Index>(),
                                       new in prop::collection::vec(any::<u8>(), 0..40)) {
            let mut buf = buf;
            let start = HEADER_LEN + (at.index(buf.len() - HEADER_LEN + 1) & !1);
            let n = new.len().min(buf.len() - start);
            let old = buf[start..start + n].to_vec();
            buf[start..start + n].copy_from_slice(&new[..n]);
            let mut p = UdpPacket::new_unchecked(&mut buf[..]);
            p.update_checksum(&old, &new[..n]);
            let incremental = p.checksum();
            prop_assert!(p.verify_checksum(src, dst));
            p.fill_checksum(src, dst);
            prop_assert_eq!(incremental, p.checksum());
        }

        #[test]
        fn fuzz_smoke_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..64),
                                      s in any::<[u8; 4]>(), d in any::<[u8; 4]>()) {
            fuzz_one(&data, Ipv4Addr::from(s), Ipv4Addr::from(d))?;
        }

        #[test]
        fn fuzz_smoke_mutated_datagrams(
            (buf, src, dst) in arb_datagram(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut in prop::option::of(any::<prop::sample::Index>()),
        ) {
            let mut buf = buf;
            for (at, value) in edits {
                let i = at.index(buf.len());
                buf[i] = value;
            }
            if let Some(at) = cut {
                buf.truncate(at.index(buf.len() + 1));
            }
            fuzz_one(&buf, src, dst)?;
        }
    }

    // -----------------------------------------------------------------------
    // Fuzz smoke for the whole stack: the stable, deterministic twin of
    // fuzz/fuzz_targets/ethernet_ipv4_udp_parse.rs.

    use crate::net::FiveTuple;
    use crate::wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
    use crate::wire::ipv4::{Ipv4Packet, Ipv4Repr};

    const ETH: usize = EthernetRepr::HEADER_LEN;

    /// What the fuzz target checks for one frame.
    fn fuzz_frame(data: &[u8]) -> Result<(), TestCaseError> {
        let Ok(frame) = EthernetFrame::new_checked(data) else {
            prop_assert!(data.len() < ETH);
            return Ok(());
        };
        let eth = EthernetRepr::parse(&frame).expect("a checked frame parses");
        if eth.ethertype != EtherType::IPV4 {
            return Ok(());
        }
        let Ok(ip) = Ipv4Packet::new_checked(frame.payload()) else {
            return Ok(());
        };
        let _ = (ip.options(), ip.datagram(), FiveTuple::from_ipv4(&ip));
        let valid = ip.verify_checksum();
        let mut owned = data.to_vec();
        let mut f = EthernetFrame::new_unchecked(&mut owned[..]);
        let mut p = Ipv4Packet::new_checked(f.payload_mut()).expect("same bytes");
        let _ = p.decrement_ttl();
        p.set_dscp_incremental(ip.ttl() & 0x3f);
        prop_assert_eq!(p.verify_checksum(), valid);

        let Ok(ip_repr) = Ipv4Repr::parse(&ip) else {
            return Ok(());
        };
        let (src, dst) = (ip_repr.src, ip_repr.dst);
        let mut out = vec![0u8; ETH + ip_repr.buffer_len()];
        prop_assert_eq!(
            eth.emit(&mut EthernetFrame::new_unchecked(&mut out[..])),
            Ok(())
        );
        prop_assert_eq!(
            ip_repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[ETH..])),
            Ok(())
        );
        let mut udp_repr = None;
        if ip_repr.protocol == PROTO_UDP {
            if let Ok(udp) = UdpPacket::new_checked(ip.payload()) {
                if let Ok(repr) = UdpRepr::parse(&udp, src, dst, true) {
                    let at = ETH + Ipv4Repr::HEADER_LEN;
                    let body = at + HEADER_LEN;
                    out[body..body + repr.payload_len].copy_from_slice(udp.payload());
                    let mut u = UdpPacket::new_unchecked(&mut out[at..]);
                    prop_assert_eq!(repr.emit(&mut u, src, dst), Ok(()));
                    udp_repr = Some((repr, &ip.payload()[HEADER_LEN..repr.buffer_len()]));
                }
            }
        }
        let frame2 = EthernetFrame::new_checked(&out[..]).expect("re-parse ethernet");
        prop_assert_eq!(EthernetRepr::parse(&frame2), Ok(eth));
        let ip2 = Ipv4Packet::new_checked(frame2.payload()).expect("re-parse IPv4");
        prop_assert_eq!(Ipv4Repr::parse(&ip2), Ok(ip_repr));
        if let Some((repr, payload)) = udp_repr {
            let udp2 = UdpPacket::new_checked(ip2.payload()).expect("re-parse UDP");
            prop_assert_eq!(UdpRepr::parse(&udp2, src, dst, true), Ok(repr));
            prop_assert_eq!(udp2.payload(), payload);
        }
        Ok(())
    }

    /// The frame with IPv4 and UDP checksums recomputed, when the lengths allow.
    fn with_fixed_checksums(data: &[u8]) -> Option<Vec<u8>> {
        let mut fixed = data.to_vec();
        let mut frame = EthernetFrame::new_checked(&mut fixed[..]).ok()?;
        let mut ip = Ipv4Packet::new_checked(frame.payload_mut()).ok()?;
        ip.fill_checksum();
        let (src, dst, proto) = (ip.src_addr(), ip.dst_addr(), ip.protocol());
        if proto == PROTO_UDP {
            if let Ok(mut udp) = UdpPacket::new_checked(ip.payload_mut()) {
                udp.fill_checksum(src, dst);
            }
        }
        Some(fixed)
    }

    /// A valid Ethernet/IPv4/UDP frame, optionally with IPv4 options and link
    /// padding after the datagram.
    fn arb_frame() -> impl Strategy<Value = Vec<u8>> {
        (
            arb_datagram(),
            0usize..=10,
            0usize..20,
            any::<u8>(),
            any::<u8>(),
        )
            .prop_map(|((udp, src, dst), option_words, padding, dscp, ttl)| {
                let header_len = 20 + 4 * option_words;
                let mut v = vec![0u8; ETH + header_len + udp.len() + padding];
                let eth = EthernetRepr {
                    src: EthernetAddress([2, 0, 0, 0, 0, 1]),
                    dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
                    ethertype: EtherType::IPV4,
                };
                eth.emit(&mut EthernetFrame::new_unchecked(&mut v[..]))
                    .unwrap();
                let mut ip = Ipv4Packet::new_unchecked(&mut v[ETH..]);
                ip.set_version(4);
                ip.set_header_len(header_len);
                ip.set_dscp(dscp);
                ip.set_total_len((header_len + udp.len()) as u16);
                ip.set_dont_frag(true);
                ip.set_ttl(ttl);
                ip.set_protocol(PROTO_UDP);
                ip.set_src_addr(src);
                ip.set_dst_addr(dst);
                ip.options_mut().fill(1); // NOPs
                ip.payload_mut().copy_from_slice(&udp);
                ip.fill_checksum();
                v
            })
    }

    fn mutate(
        mut buf: Vec<u8>,
        edits: Vec<(prop::sample::Index, u8)>,
        cut: Option<prop::sample::Index>,
    ) -> Vec<u8> {
        for (at, value) in edits {
            let i = at.index(buf.len());
            buf[i] = value;
        }
        if let Some(at) = cut {
            buf.truncate(at.index(buf.len() + 1));
        }
        buf
    }

    proptest! {
        #![proptest_config(crate::fuzz_config(2000))]

        #[test]
        fn fuzz_smoke_frame_stack_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..120)) {
            fuzz_frame(&data)?;
            if let Some(fixed) = with_fixed_checksums(&data) {
                fuzz_frame(&fixed)?;
            }
        }

        #[test]
        fn fuzz_smoke_frame_stack_ipv4_like_bytes(mut data in prop::collection::vec(any::<u8>(), 34..120)) {
            // Past the first checks: IPv4 ethertype, version 4, IHL 5, UDP.
            data[12..16].copy_from_slice(&[0x08, 0x00, 0x45, 0x00]);
            data[ETH + 9] = PROTO_UDP;
            fuzz_frame(&data)?;
            if let Some(fixed) = with_fixed_checksums(&data) {
                fuzz_frame(&fixed)?;
            }
        }

        #[test]
        fn fuzz_smoke_frame_stack_mutated_frames(
            frame in arb_frame(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
            cut in prop::option::of(any::<prop::sample::Index>()),
        ) {
            // The unmutated frame parses all the way down.
            let f = EthernetFrame::new_checked(&frame[..]).unwrap();
            let ip = Ipv4Packet::new_checked(f.payload()).unwrap();
            let ip_repr = Ipv4Repr::parse(&ip).unwrap();
            let udp = UdpPacket::new_checked(ip.payload()).unwrap();
            prop_assert!(UdpRepr::parse(&udp, ip_repr.src, ip_repr.dst, true).is_ok());
            fuzz_frame(&frame)?;
            let mutated = mutate(frame, edits, cut);
            fuzz_frame(&mutated)?;
            if let Some(fixed) = with_fixed_checksums(&mutated) {
                fuzz_frame(&fixed)?;
            }
        }
    }

    fn fuzz_one(data: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> Result<(), TestCaseError> {
        let _ = UdpPacket::new_unchecked(data).verify_checksum(src, dst);
        if let Ok(p) = UdpPacket::new_checked(data) {
            let _ = (p.src_port(), p.dst_port(), p.payload());
            let mut owned = data.to_vec();
            let mut m = UdpPacket::new_unchecked(&mut owned[..]);
            m.fill_checksum(src, dst);
            prop_assert!(m.verify_checksum(src, dst));
            m.finish_partial_checksum();
        }
        if let Ok(repr) = UdpRepr::parse(&UdpPacket::new_unchecked(data), src, dst, true) {
            let mut out = vec![0u8; repr.buffer_len()];
            if let Some(payload) = data.get(HEADER_LEN..repr.buffer_len()) {
                out[HEADER_LEN..].copy_from_slice(payload);
            }
            let mut p = UdpPacket::new_unchecked(&mut out[..]);
            prop_assert_eq!(repr.emit(&mut p, src, dst), Ok(()));
            prop_assert_eq!(UdpRepr::parse(&p, src, dst, true), Ok(repr));
        }
        Ok(())
    }
}
