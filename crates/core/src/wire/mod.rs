//! Wire formats in the smoltcp style: a zero-copy `Packet<T: AsRef<[u8]>>` view with
//! checked constructors, plus a `Repr` with `parse`/`emit`. Malformed bytes are an
//! error value, never a panic.
//!
//! - [`probe`]: the probe packet every lockstep sender and probe puts in its UDP
//!   payload (header, per-hop records, padding).

pub mod probe;

pub use probe::{
    min_total_len, parse_probe, HopKind, HopRecord, Packet as ProbePacket, ProbeRepr, WireError,
    FLAG_PADDING, FLAG_RESPONSE, HEADER_LEN, HOP_FLAG_SLIPPED, HOP_LEN, KNOWN_FLAGS, MAGIC,
    MAX_HOPS, MIN_PACKET_LEN, NOT_FILLED, VERSION,
};

// Link, network and transport headers a lockstep router parses and rewrites in user
// space: Ethernet II, IPv4, UDP, and the Internet checksum they share.
pub mod checksum;
pub mod ethernet;
pub mod ipv4;
pub mod udp;
pub mod udpframe;

pub use ethernet::{EtherType, EthernetAddress, EthernetError, EthernetFrame, EthernetRepr};
pub use ipv4::{Ipv4Error, Ipv4Packet, Ipv4Repr, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
pub use udp::{UdpError, UdpPacket, UdpRepr, DISCARD_PORT};
