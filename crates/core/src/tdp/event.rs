//! Typed per-packet events of a [`Node`](super::node::Node): every frame slip and
//! every drop the node counts, with the packet's flow, port, frame and reason, as
//! [`NodeEvent`]s read with [`Node::poll_event`](super::node::Node::poll_event)
//! (the quinn-proto / smoltcp way: the state machine queues, the driver drains).
//!
//! Off by default: a node without [`Node::set_events`](super::node::Node::set_events)
//! builds no event and allocates nothing. When on, events wait in a bounded queue of
//! [`EVENT_CAPACITY`]; an event that finds it full is not kept and counts in
//! [`NodeCounters::events_lost`](super::counters::NodeCounters::events_lost).
//! Events change nothing the node does and no counter but `events_lost`.

use serde::{Deserialize, Serialize};

use super::deps::PortId;
use crate::time::Instant;

/// Most events a node keeps waiting for [`Node::poll_event`](super::node::Node::poll_event).
pub const EVENT_CAPACITY: usize = 65_536;

/// What happened to a packet, in the order the node saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeEvent {
    /// A reserved packet missed its frame on output port `port` (one event per
    /// increment of [`PortCounters::slipped`](super::counters::PortCounters::slipped)).
    Slip {
        /// The reserved flow the node classified it into (`None`: forwarded by the
        /// input port's delay, no rule matched).
        flow: Option<u32>,
        /// The output port whose frame it missed.
        port: PortId,
        /// The frame it missed (its forwarding frame).
        frame: i64,
        /// The node's clock (`now` of the call) when the node saw the slip.
        at: Instant,
        why: SlipReason,
        action: SlipOutcome,
        /// The probe the packet carries, if it is one.
        probe: Option<ProbeTag>,
    },
    /// A packet the node dropped for another reason than a slip (a slip with
    /// `on_slip = "drop"` is a [`NodeEvent::Slip`] with [`SlipOutcome::Dropped`], not
    /// also a drop).
    Drop {
        /// The reserved flow, when the node had classified the packet already.
        flow: Option<u32>,
        /// The input port for drops on reception, the output port for drops while
        /// waiting to leave (see [`DropReason`]).
        port: PortId,
        /// The node's clock (`now` of the call).
        at: Instant,
        why: DropReason,
        /// The probe the packet carries, if it is one.
        probe: Option<ProbeTag>,
    },
}

impl NodeEvent {
    /// The instant (node clock) of the event.
    pub fn at(&self) -> Instant {
        match *self {
            NodeEvent::Slip { at, .. } | NodeEvent::Drop { at, .. } => at,
        }
    }

    /// The port of the event.
    pub fn port(&self) -> PortId {
        match *self {
            NodeEvent::Slip { port, .. } | NodeEvent::Drop { port, .. } => port,
        }
    }

    /// The flow of the event, when the node knew it.
    pub fn flow(&self) -> Option<u32> {
        match *self {
            NodeEvent::Slip { flow, .. } | NodeEvent::Drop { flow, .. } => flow,
        }
    }
}

/// The probe (`wire::probe`) a packet carries: the sender's flow id and sequence
/// number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ProbeTag {
    pub flow: u32,
    pub seq: u64,
}

/// Why a reserved packet missed its frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlipReason {
    /// It arrived (was processed) after its frame had begun.
    Late,
    /// Its recovered frame lies beyond the output queues (upstream clock too far
    /// ahead, or a frame recovered wrongly); counted in `too_early` too.
    TooEarly,
    /// Its frame's queue had no room left; counted in `queue_full` too.
    QueueFull,
    /// It was still queued (or held, at an edge) when its frame ended: the node
    /// did not run during the frame.
    MissedFrame,
    /// It was handed out in its frame but after the frame's send deadline (in the
    /// guard); counted in `late_tx` too.
    PastDeadline,
}

impl SlipReason {
    pub const ALL: [SlipReason; 5] = [
        SlipReason::Late,
        SlipReason::TooEarly,
        SlipReason::QueueFull,
        SlipReason::MissedFrame,
        SlipReason::PastDeadline,
    ];

    /// Short snake_case name (`"late"`, `"missed_frame"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            SlipReason::Late => "late",
            SlipReason::TooEarly => "too_early",
            SlipReason::QueueFull => "queue_full",
            SlipReason::MissedFrame => "missed_frame",
            SlipReason::PastDeadline => "past_deadline",
        }
    }
}

/// What became of a slipped packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlipOutcome {
    /// Sent anyway as a reserved packet of its frame, after the send deadline
    /// ([`SlipReason::PastDeadline`]).
    SentLate,
    /// Queued best effort (`on_slip = "best_effort"`). If the best-effort queue
    /// refuses it a [`NodeEvent::Drop`] follows.
    BestEffort,
    /// Dropped (`on_slip = "drop"`).
    Dropped,
}

/// Why a packet was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    // ----- on reception (port: the input port; `rx_dropped`) -----
    /// Not an Ethernet/IPv4 frame the node can read, or a bad IPv4 checksum.
    Malformed,
    /// ARP (neighbours are static).
    Arp,
    /// Another EtherType.
    NonIpv4,
    /// No route to the destination (or a route through a port the node lacks).
    NoRoute,
    /// No static neighbour entry for the next hop.
    NoNeighbour,
    /// TTL ≤ 1 (or the TTL could not be decremented).
    TtlExpired,
    /// Addressed to the node itself (and not padding), or received by a node that
    /// does not forward.
    Local,
    /// A unicast frame for another MAC address (a promiscuous socket saw it).
    OtherHost,
    /// Received on a port the node does not have (`port` is the id given).
    UnknownPort,
    // ----- while waiting to leave (port: the output port; `tx_dropped`) -----
    /// Edge: beyond the flow's reservation (or larger than its rows), policed.
    Policed,
    /// The output port's best-effort queue was full.
    BestEffortFull,
    /// Best effort is disabled in TDP mode.
    BestEffortDisabled,
}

impl DropReason {
    pub const ALL: [DropReason; 12] = [
        DropReason::Malformed,
        DropReason::Arp,
        DropReason::NonIpv4,
        DropReason::NoRoute,
        DropReason::NoNeighbour,
        DropReason::TtlExpired,
        DropReason::Local,
        DropReason::OtherHost,
        DropReason::UnknownPort,
        DropReason::Policed,
        DropReason::BestEffortFull,
        DropReason::BestEffortDisabled,
    ];

    /// Short snake_case name (`"no_route"`, `"policed"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::Arp => "arp",
            DropReason::NonIpv4 => "non_ipv4",
            DropReason::NoRoute => "no_route",
            DropReason::NoNeighbour => "no_neighbour",
            DropReason::TtlExpired => "ttl_expired",
            DropReason::Local => "local",
            DropReason::OtherHost => "other_host",
            DropReason::UnknownPort => "unknown_port",
            DropReason::Policed => "policed",
            DropReason::BestEffortFull => "best_effort_full",
            DropReason::BestEffortDisabled => "best_effort_disabled",
        }
    }
}
