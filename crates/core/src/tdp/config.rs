//! The node configuration (`node.toml`): what the lab generates for each node and
//! `lockstep node --config` reads. Plain serde data; [`crate::tdp::node::Node::new`]
//! validates it and names the offending field in every error.
//!
//! Durations are written with their unit (`tf = "250us"`); an integer is
//! read as nanoseconds. MAC addresses read `"02:00:00:00:00:01"`, prefixes
//! `"10.0.1.0/24"`.

use std::net::{Ipv4Addr, SocketAddrV4};

use serde::{Deserialize, Serialize};

use super::deps::{EthernetAddress, PortId, Prefix, Route};
use crate::time::Duration;

/// What a node does (time-driven forwarding).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Sends its flows' packets at the start of their frames (a UDP program).
    Sender,
    /// Classifies unmarked traffic into flows, polices, holds, marks, forwards.
    Edge,
    /// Forwards TDP-marked traffic by frame.
    Core,
    /// Receives flows and measures them (a UDP program).
    Receiver,
}

/// How a router schedules its output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Time-driven priority: reserved packets leave in their frame.
    #[default]
    Tdp,
    /// Every packet leaves at once on arrival (the baldi2006 comparison baseline).
    Fifo,
}

/// What happens to a reserved packet that missed its frame (a frame slip). It is
/// counted either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SlipAction {
    /// Forward it as best effort (unmarked): it still arrives, just not on time.
    #[default]
    BestEffort,
    /// Drop it.
    Drop,
}

/// The common time reference as this node sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FrameConfig {
    /// Time-frame length `TF`.
    #[serde(with = "human_duration")]
    pub tf: Duration,
    /// Frames per time-cycle.
    pub k: u32,
    /// Instant (ns of the node's clock) at which frame 0 starts.
    #[serde(default)]
    pub epoch_ns: i64,
    /// The node's clock reads true time plus this (to emulate imperfect sync).
    #[serde(default, with = "human_duration")]
    pub offset: Duration,
    /// No new transmission starts in the last `guard` of a frame.
    #[serde(default, with = "human_duration")]
    pub guard: Duration,
    /// Frames an upstream clock may run ahead of this node's (alternating-bit
    /// recovery window, see [`crate::tdp::marking::InputTracker`]).
    #[serde(default = "default_lead")]
    pub lead: u32,
}

fn default_lead() -> u32 {
    1
}

/// One port (an interface for routers, the socket's interface for hosts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    pub id: PortId,
    pub ifname: String,
    pub mac: EthernetAddress,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    /// Link capacity `C` in bit/s.
    pub rate_bps: u64,
    /// The node at the other end of the link: padding goes there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbour_mac: Option<EthernetAddress>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbour_addr: Option<Ipv4Addr>,
    /// Immediate forwarding delay (frames) for TDP packets arriving on this port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d: Option<u32>,
    /// Per-port override of the node's `padding` switch (e.g. off towards a plain
    /// host that would answer the discard port with ICMP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub padding: Option<bool>,
}

/// A static neighbour (the node never sends ARP).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourConfig {
    pub addr: Ipv4Addr,
    pub mac: EthernetAddress,
}

/// 5-tuple classification of a flow (every present field must match).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<Prefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<Prefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<u8>,
    /// Inclusive range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src_ports: Option<(u16, u16)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_ports: Option<(u16, u16)>,
}

/// One reservation row: `packets` packets of at most `size` bytes (IP length) in
/// frame `slot` of every cycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RowConfig {
    pub slot: u32,
    pub packets: u32,
    pub size: u32,
}

/// A reserved flow as this node knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowConfig {
    pub id: u32,
    /// How to recognise the flow's packets (needed by an edge, and by a core for
    /// non-immediate forwarding: DSCP carries no flow id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<FlowRule>,
    /// The port the flow leaves on; its rows are reserved there.
    pub out_port: PortId,
    /// Non-immediate forwarding delay (frames) of this flow at this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub d: Option<u32>,
    /// The flow's reservation on `out_port`.
    #[serde(default)]
    pub rows: Vec<RowConfig>,
    /// Edge: drop what exceeds the reservation (otherwise send it best effort).
    #[serde(default = "yes")]
    pub police: bool,
    /// Sender: where the flow's datagrams go.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<SocketAddrV4>,
}

/// Best-effort service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BestEffortConfig {
    /// Forward unreserved traffic at all (otherwise it is dropped and counted).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Keep best effort inside the unused part of each frame (`(TF - guard) * C`).
    #[serde(default = "yes")]
    pub pace: bool,
    /// Packets a port's best-effort queue holds; arrivals beyond are dropped.
    #[serde(default = "default_be_queue")]
    pub queue: usize,
}

impl Default for BestEffortConfig {
    fn default() -> Self {
        BestEffortConfig {
            enabled: true,
            pace: true,
            queue: default_be_queue(),
        }
    }
}

fn default_be_queue() -> usize {
    1024
}

fn yes() -> bool {
    true
}

/// A node's whole configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    pub name: String,
    /// Written into the hop records of probes this node forwards.
    pub id: u32,
    pub role: Role,
    #[serde(default)]
    pub mode: Mode,
    pub frame: FrameConfig,
    pub ports: Vec<PortConfig>,
    #[serde(default)]
    /// Static routes (`prefix`, `port`, optional `next_hop`); each port's own
    /// subnet is added as a connected route unless a route names it.
    pub routes: Vec<Route>,
    #[serde(default)]
    pub neighbours: Vec<NeighbourConfig>,
    #[serde(default)]
    pub flows: Vec<FlowConfig>,
    #[serde(default)]
    pub best_effort: BestEffortConfig,
    /// Send a padding packet in every frame in which a port has nothing reserved.
    /// The node assumes its neighbours do the same: with padding it trusts the
    /// alternating-bit counter over a window of `d` frames (so a packet processed
    /// late is counted as a slip), without it over `d - 1` frames (an idle upstream
    /// frame is then recovered from the local clock).
    #[serde(default = "yes")]
    pub padding: bool,
    #[serde(default)]
    pub on_slip: SlipAction,
}

/// Serde for [`Duration`] in the human syntax (`"250us"`), or integer nanoseconds.
pub mod human_duration {
    use std::fmt;

    use serde::de::{self, Visitor};
    use serde::{Deserializer, Serializer};

    use crate::time::Duration;

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(d)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Duration;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration with its unit such as \"250us\", or nanoseconds")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Duration, E> {
                Duration::parse(v).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Duration, E> {
                Ok(Duration(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Duration, E> {
                i64::try_from(v)
                    .map(Duration)
                    .map_err(|_| E::custom("duration out of range"))
            }
        }
        d.deserialize_any(V)
    }
}
