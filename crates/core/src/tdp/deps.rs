//! The wire and net names the node uses, in one place.

pub use crate::net::{
    Classifier, FiveTuple, NeighbourTable, NextHopCache, PortId, Prefix, Route, RouteTable, Rule,
};
pub use crate::wire::checksum;
pub use crate::wire::{
    EtherType, EthernetAddress, EthernetFrame, Ipv4Packet, UdpPacket, DISCARD_PORT, PROTO_TCP,
    PROTO_UDP,
};
