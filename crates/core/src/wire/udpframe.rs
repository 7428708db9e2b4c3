//! A UDP datagram as a whole Ethernet frame: what a host that sends and receives
//! through a frame port (a packet socket, a receive ring, `AF_XDP`) writes and reads
//! in place of the kernel's UDP stack.
//!
//! [`UdpFrameHeader::emit`] writes Ethernet II, IPv4 (no options, DF, identification
//! 0, TTL 64, the DSCP asked for, header checksum) and UDP (the checksum over the
//! pseudo-header and the payload) around a payload, as the kernel's stack would
//! send it from a socket bound to the same address and port.
//!
//! [`accept`] takes a received frame apart and hands back the UDP payload when the
//! frame is an unfragmented IPv4 UDP datagram to the given address and port with
//! good checksums; otherwise the reason it was dropped ([`FrameDrop`]), which
//! [`FrameDrops`] counts. Malformed bytes are a reason, never a panic.

use std::net::{Ipv4Addr, SocketAddrV4};

use serde::Serialize;
use thiserror::Error;

use super::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use super::ipv4::{Ipv4Error, Ipv4Packet, Ipv4Repr, DEFAULT_TTL, PROTO_UDP};
use super::udp::{UdpError, UdpPacket, UdpRepr};

/// Bytes in front of the payload: Ethernet, IPv4 and UDP headers.
pub const OVERHEAD: usize = super::ethernet::HEADER_LEN + super::ipv4::HEADER_LEN + 8;

/// Why a frame could not be written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameBuildError {
    #[error(transparent)]
    Ipv4(#[from] Ipv4Error),
    #[error(transparent)]
    Udp(#[from] UdpError),
    #[error("buffer too small for the frame: needed {needed} bytes, got {got}")]
    BufferTooSmall { needed: usize, got: usize },
}

/// Everything of a flow's frames but the DSCP and the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpFrameHeader {
    pub src_mac: EthernetAddress,
    pub dst_mac: EthernetAddress,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
}

impl UdpFrameHeader {
    /// Length of the frame carrying `payload_len` bytes.
    pub fn frame_len(payload_len: usize) -> usize {
        OVERHEAD.saturating_add(payload_len)
    }

    /// Writes the frame carrying `payload` with `dscp` into the front of `buf`;
    /// returns its length. Fails, leaving `buf` in no useful state, when `buf` is
    /// too short, the DSCP does not fit in 6 bits or the payload in a datagram.
    pub fn emit(&self, dscp: u8, payload: &[u8], buf: &mut [u8]) -> Result<usize, FrameBuildError> {
        let needed = Self::frame_len(payload.len());
        let got = buf.len();
        let frame = buf
            .get_mut(..needed)
            .ok_or(FrameBuildError::BufferTooSmall { needed, got })?;
        let udp = UdpRepr {
            src_port: self.src.port(),
            dst_port: self.dst.port(),
            payload_len: payload.len(),
        };
        let ip = Ipv4Repr {
            src: *self.src.ip(),
            dst: *self.dst.ip(),
            protocol: PROTO_UDP,
            dscp,
            ecn: 0,
            ttl: DEFAULT_TTL,
            payload_len: udp.buffer_len(),
        };
        ip.validate()?;
        let mut eth = EthernetFrame::new_unchecked(&mut *frame);
        EthernetRepr {
            src: self.src_mac,
            dst: self.dst_mac,
            ethertype: EtherType::IPV4,
        }
        .emit(&mut eth)
        .map_err(|_| FrameBuildError::BufferTooSmall { needed, got })?;
        let mut ipp = Ipv4Packet::new_unchecked(eth.payload_mut());
        ip.emit(&mut ipp)?;
        let mut udpp = UdpPacket::new_unchecked(ipp.payload_mut());
        udp.emit_header(&mut udpp)?;
        udpp.payload_mut().copy_from_slice(payload);
        udpp.fill_checksum(ip.src, ip.dst);
        Ok(needed)
    }
}

/// Why a received frame was not handed to the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameDrop {
    /// Not an IPv4 frame (ARP, IPv6, a VLAN tag, …).
    NotIpv4,
    /// IPv4 to another address.
    OtherAddress,
    /// IPv4, not UDP.
    OtherProtocol,
    /// UDP to another port.
    OtherPort,
    /// A fragment (not reassembled).
    Fragment,
    /// The IPv4 header or the UDP checksum is wrong.
    BadChecksum,
    /// Too short for its headers or for the lengths they give.
    Malformed,
}

/// Frames dropped, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct FrameDrops {
    pub not_ipv4: u64,
    pub other_address: u64,
    pub other_protocol: u64,
    pub other_port: u64,
    pub fragments: u64,
    pub bad_checksum: u64,
    pub malformed: u64,
}

impl FrameDrops {
    pub fn count(&mut self, why: FrameDrop) {
        let c = match why {
            FrameDrop::NotIpv4 => &mut self.not_ipv4,
            FrameDrop::OtherAddress => &mut self.other_address,
            FrameDrop::OtherProtocol => &mut self.other_protocol,
            FrameDrop::OtherPort => &mut self.other_port,
            FrameDrop::Fragment => &mut self.fragments,
            FrameDrop::BadChecksum => &mut self.bad_checksum,
            FrameDrop::Malformed => &mut self.malformed,
        };
        *c += 1;
    }

    /// Frames dropped as broken (bad checksum, malformed), not merely not ours.
    pub fn broken(&self) -> u64 {
        self.bad_checksum + self.malformed
    }
}

/// What the kernel said of a frame's UDP checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L4Checksum {
    /// Verify it here.
    Verify,
    /// The driver or stack verified it (`csum_valid`), or a local sender left it to
    /// an offload (`csum_not_ready`): take it as good.
    Trusted,
}

/// The UDP payload of `frame` when it is an IPv4 UDP datagram to `to` with good
/// checksums (the IPv4 header's always checked); otherwise why not.
pub fn accept(frame: &[u8], to: SocketAddrV4, l4: L4Checksum) -> Result<&[u8], FrameDrop> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| FrameDrop::Malformed)?;
    if eth.ethertype() != EtherType::IPV4 {
        return Err(FrameDrop::NotIpv4);
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).map_err(|_| FrameDrop::Malformed)?;
    let repr = Ipv4Repr::parse(&ip).map_err(|e| match e {
        Ipv4Error::BadChecksum => FrameDrop::BadChecksum,
        Ipv4Error::Fragmented { .. } => FrameDrop::Fragment,
        _ => FrameDrop::Malformed,
    })?;
    if repr.dst != *to.ip() {
        return Err(FrameDrop::OtherAddress);
    }
    if repr.protocol != PROTO_UDP {
        return Err(FrameDrop::OtherProtocol);
    }
    let udp = UdpPacket::new_checked(ip.payload()).map_err(|_| FrameDrop::Malformed)?;
    if udp.dst_port() != to.port() {
        return Err(FrameDrop::OtherPort);
    }
    let check = l4 == L4Checksum::Verify;
    UdpRepr::parse(&udp, repr.src, repr.dst, check).map_err(|e| match e {
        UdpError::BadChecksum => FrameDrop::BadChecksum,
        _ => FrameDrop::Malformed,
    })?;
    let payload = udp.payload();
    let start = OVERHEAD + ip.header_len() - super::ipv4::HEADER_LEN;
    frame
        .get(start..start + payload.len())
        .ok_or(FrameDrop::Malformed)
}

/// The source address of an IPv4 frame (no checks beyond the lengths).
pub fn source(frame: &[u8]) -> Option<Ipv4Addr> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    Ipv4Packet::new_checked(eth.payload())
        .ok()
        .map(|p| p.src_addr())
}

#[cfg(test)]
#[path = "udpframe_tests.rs"]
mod tests;
