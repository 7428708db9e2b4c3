//! What a node counts (the issue: malformed packets, unknown DSCP values, packets
//! for unknown flows and late packets are counted, never fatal). Serialized into
//! each node's counters file.

use serde::{Deserialize, Serialize};

use super::deps::PortId;

/// Counters of one port, as input and as output.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct PortCounters {
    pub port: PortId,
    /// Frames received on this port.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Frames received on this port and dropped before being queued (malformed,
    /// not IPv4, no route, TTL expired, ...; the node-wide counters say why).
    pub rx_dropped: u64,
    /// Frames handed out on this port, of every kind.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_reserved: u64,
    pub tx_best_effort: u64,
    pub tx_padding: u64,
    /// Packets dropped while waiting for this port (best-effort queue full, best
    /// effort disabled, slipped packets with `on_slip = "drop"`).
    pub tx_dropped: u64,
    /// Reserved packets that missed their frame on this port: arrived too late,
    /// were still queued when the frame ended, or left after its send deadline.
    pub slipped: u64,
    /// The part of `slipped` handed out in the guard, after the frame's send deadline.
    pub late_tx: u64,
    /// Padding packets from the neighbour, consumed here.
    pub padding_received: u64,
    /// Times the alternating-bit tracker of this input port had to re-synchronise.
    pub resyncs: u64,
    /// Frames in which this port's padding could not be sent (the node did not run
    /// during the frame).
    pub padding_missed: u64,
}

impl PortCounters {
    /// All zero.
    pub fn new(port: PortId) -> Self {
        PortCounters {
            port,
            rx_packets: 0,
            rx_bytes: 0,
            rx_dropped: 0,
            tx_packets: 0,
            tx_bytes: 0,
            tx_reserved: 0,
            tx_best_effort: 0,
            tx_padding: 0,
            tx_dropped: 0,
            slipped: 0,
            late_tx: 0,
            padding_received: 0,
            resyncs: 0,
            padding_missed: 0,
        }
    }
}

/// Counters of one reserved flow.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlowCounters {
    pub flow: u32,
    /// Packets of the flow handed out in a reserved frame.
    pub forwarded: u64,
    /// Frame slips (arrived late, missed its frame in the queue, or left late).
    pub slipped: u64,
    /// The part of `slipped` that left after the send deadline of its frame.
    pub late: u64,
    /// Edge: packets beyond the reservation (or larger than its rows), dropped.
    pub policed: u64,
    /// Edge: packets beyond the reservation sent best effort (`police = false`).
    pub excess: u64,
}

/// Node-wide counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NodeCounters {
    pub ports: Vec<PortCounters>,
    pub flows: Vec<FlowCounters>,
    /// Frame starts the node went through.
    pub frames: u64,
    pub best_effort_forwarded: u64,
    pub best_effort_dropped: u64,
    pub padding_sent: u64,
    pub padding_received: u64,
    /// Not an Ethernet/IPv4 frame we can read, or an IPv4 header checksum mismatch.
    pub malformed: u64,
    /// ARP (neighbours are static): counted and dropped.
    pub arp: u64,
    /// Other EtherTypes (IPv6, VLAN-tagged, ...): counted and dropped.
    pub non_ipv4: u64,
    pub no_route: u64,
    pub no_neighbour: u64,
    pub ttl_expired: u64,
    /// Addressed to one of this node's addresses (and not padding): dropped.
    pub local: u64,
    /// A unicast frame for another MAC address (a promiscuous socket saw it).
    pub other_host: u64,
    /// A handle_packet for a port the node does not have.
    pub unknown_port: u64,
    /// A TDP mark whose parity bits no frame can carry.
    pub unknown_dscp: u64,
    /// A TDP packet matching no flow, arriving on a port without a forwarding delay.
    pub unknown_flow: u64,
    /// Alternating-bit re-synchronisations over all input ports.
    pub resyncs: u64,
    /// A TDP packet whose forwarding frame is beyond the output queues (upstream
    /// clock too far ahead): sent best effort.
    pub too_early: u64,
    /// A reserved packet that did not fit its frame queue (more than a frame's
    /// worth): sent best effort.
    pub queue_full: u64,
    /// Edge: a flow's packet routed to a port other than the flow's `out_port`:
    /// sent best effort.
    pub misrouted: u64,
    /// Probes that got a hop record, and probes without room for one.
    pub hops_recorded: u64,
    pub hops_no_room: u64,
    /// Events ([`crate::tdp::node::NodeEvent`]) not kept because the node's event
    /// queue was full (absent from the file while zero).
    #[serde(skip_serializing_if = "is_zero")]
    pub events_lost: u64,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}
