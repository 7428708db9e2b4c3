//! A simulated end host: the kernel part of a sender, a receiver or a load
//! source/sink, modelled (UDP/IPv4/Ethernet framing, port demultiplexing); the
//! application part is the core's state machine ([`Sender`], [`Receiver`]) or a
//! constant-rate source.
//!
//! The host counts its own times (its clock's readings, the sources' periods) in
//! `i64` nanoseconds and hands the state machines instants of [`SIM_CLOCK`].

use std::net::{Ipv4Addr, SocketAddrV4};

use lockstep_core::tdp::{Delivery, PacketBuf, Receiver, Sender};

use crate::source::ShapedSource;
use crate::spare::Spare;
use lockstep_core::wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, UdpPacket,
    UdpRepr, PROTO_UDP,
};
use lockstep_core::Instant;

use crate::engine::SIM_CLOCK;

/// TTL of the packets a host sends (Linux's default for UDP sockets).
pub const HOST_TTL: u8 = 64;

/// The host's one interface.
#[derive(Clone, Copy, Debug)]
pub struct Iface {
    pub mac: EthernetAddress,
    pub addr: Ipv4Addr,
    pub peer_mac: EthernetAddress,
}

/// A flow the sender sends, with its addresses.
#[derive(Clone, Copy, Debug)]
pub struct FlowAddr {
    pub id: u32,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
}

/// The flow id a load source's probes carry (no receiver measures it).
const LOAD_FLOW_ID: u32 = 1000;

/// A constant-rate best-effort source (the lab's `probe stream` or iperf3 load).
#[derive(Clone, Debug)]
pub struct Cbr {
    pub src_port: u16,
    pub dst: SocketAddrV4,
    pub period_ns: i64,
    pub next_ns: i64,
    pub sent: u64,
    /// The UDP payload every datagram carries (an empty probe).
    pub payload: Vec<u8>,
}

impl Cbr {
    /// A source of `size`-byte datagrams every `period_ns` from `start_ns`.
    pub fn new(src_port: u16, dst: SocketAddrV4, size: u32, period_ns: i64, start_ns: i64) -> Cbr {
        let payload = lockstep_core::tdp::host::probe_buffer(LOAD_FLOW_ID, size)
            .unwrap_or_else(|_| vec![0; size as usize]);
        Cbr {
            src_port,
            dst,
            period_ns,
            next_ns: start_ns,
            sent: 0,
            payload,
        }
    }
}

/// What a host is.
#[derive(Debug, Default)]
pub struct Host {
    pub iface: Option<Iface>,
    pub sender: Option<(Sender, Vec<FlowAddr>)>,
    pub receiver: Option<(Receiver, u16)>,
    pub sources: Vec<Cbr>,
    /// Token-bucket shaped sources.
    pub shaped: Vec<ShapedSource>,
    /// Load sinks: (UDP port, datagrams received).
    pub sinks: Vec<(u16, u64)>,
    /// Frames for this host that nothing listened for.
    pub foreign: u64,
    /// The traffic has ended: no more sending.
    pub stopped: bool,
}

impl Host {
    /// The next instant the host wants to run (nanoseconds of its clock).
    pub fn poll_timeout(&self) -> Option<i64> {
        if self.stopped {
            return None;
        }
        let s = self.sender.as_ref().and_then(|(s, _)| s.poll_timeout());
        let s = s.map(|t| t.ns);
        let c = self.sources.iter().map(|c| c.next_ns).min();
        let shaped = self
            .shaped
            .iter()
            .filter_map(ShapedSource::poll_timeout)
            .min();
        let c = match (c, shaped) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (s, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A frame arrived (kernel time `kernel_rx`), the application takes it at `now`.
    pub fn handle_frame(&mut self, now: i64, kernel_rx: i64, frame: &[u8]) -> Option<Delivery> {
        let Some((port, payload)) = udp_payload(frame, self.iface.map(|i| i.addr)) else {
            self.foreign += 1;
            return None;
        };
        if let Some((r, p)) = self.receiver.as_mut() {
            if *p == port {
                let at = |ns| Instant::new(SIM_CLOCK, ns);
                r.handle_packet(at(now), Some(at(kernel_rx)), payload);
                return r.poll_event();
            }
        }
        match self.sinks.iter_mut().find(|(p, _)| *p == port) {
            Some((_, n)) => *n += 1,
            None => self.foreign += 1,
        }
        None
    }

    /// Everything due at `now`, framed, in the order it is sent.
    /// Frames are built in buffers taken from `spare`.
    pub fn handle_timeout(&mut self, now: i64, out: &mut Vec<PacketBuf>, spare: &mut Spare) {
        let Some(iface) = self.iface.filter(|_| !self.stopped) else {
            return;
        };
        if let Some((s, flows)) = self.sender.as_mut() {
            let at = Instant::new(SIM_CLOCK, now);
            if s.poll_timeout().is_some_and(|t| t <= at) {
                s.handle_timeout(at);
                while let Some(tx) = s.poll_transmit(at) {
                    if let Some(f) = flows.iter().find(|f| f.id == tx.flow) {
                        out.push(udp_frame_in(
                            spare.take(),
                            &iface,
                            f.src,
                            f.dst,
                            tx.dscp,
                            tx.payload,
                        ));
                    }
                }
            }
        }
        for c in &mut self.sources {
            while c.next_ns <= now {
                let src = SocketAddrV4::new(iface.addr, c.src_port);
                out.push(udp_frame_in(
                    spare.take(),
                    &iface,
                    src,
                    c.dst,
                    0,
                    &c.payload,
                ));
                c.sent += 1;
                c.next_ns = c.next_ns.saturating_add(c.period_ns.max(1));
            }
        }
        for sh in &mut self.shaped {
            while sh.poll_send(now) {
                let src = SocketAddrV4::new(iface.addr, sh.src_port);
                out.push(udp_frame_in(
                    spare.take(),
                    &iface,
                    src,
                    sh.dst,
                    0,
                    &sh.payload,
                ));
            }
        }
    }
}

/// The UDP destination port and payload of a frame for `addr`.
fn udp_payload(frame: &[u8], addr: Option<Ipv4Addr>) -> Option<(u16, &[u8])> {
    let (ihl, udp_len, port) = {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        if eth.ethertype() != EtherType::IPV4 {
            return None;
        }
        let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
        if Some(ip.dst_addr()) != addr || ip.protocol() != PROTO_UDP {
            return None;
        }
        let ihl = ip.header_len();
        let udp = UdpPacket::new_checked(ip.payload()).ok()?;
        (ihl, usize::from(udp.len()), udp.dst_port())
    };
    let start = 14 + ihl + 8;
    let end = 14 + ihl + udp_len;
    Some((port, frame.get(start..end)?))
}

/// An Ethernet frame carrying one UDP datagram (UDP checksum 0: offloaded, as a
/// NIC would; routers then keep it 0 and skip recomputing it per hop).
pub fn udp_frame(
    iface: &Iface,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    dscp: u8,
    payload: &[u8],
) -> PacketBuf {
    udp_frame_in(Vec::new(), iface, src, dst, dscp, payload)
}

/// [`udp_frame`] built in `buf` (its old bytes are overwritten).
pub fn udp_frame_in(
    mut buf: Vec<u8>,
    iface: &Iface,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    dscp: u8,
    payload: &[u8],
) -> PacketBuf {
    let ip_len = 20 + 8 + payload.len();
    buf.clear();
    buf.resize(14 + ip_len, 0);
    let eth = EthernetRepr {
        src: iface.mac,
        dst: iface.peer_mac,
        ethertype: EtherType::IPV4,
    };
    let _ = eth.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    let ip = Ipv4Repr {
        src: *src.ip(),
        dst: *dst.ip(),
        protocol: PROTO_UDP,
        dscp,
        ecn: 0,
        ttl: HOST_TTL,
        payload_len: 8 + payload.len(),
    };
    let _ = ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..]));
    let udp = UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        payload_len: payload.len(),
    };
    let _ = udp.emit_header(&mut UdpPacket::new_unchecked(&mut buf[34..]));
    buf[42..].copy_from_slice(payload);
    PacketBuf::from_vec(buf)
}
