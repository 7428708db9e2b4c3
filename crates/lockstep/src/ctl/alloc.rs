//! TDP frame allocation (time-driven forwarding): admission of a time-driven flow means finding
//! frames. A flow crosses output ports `h_0, h_1, …` (a hop is `node/port`); it is
//! sent by `h_0` in frame `start` and, with the forwarding delays `d_j`, by `h_j` in
//! frame `start + d_0 + … + d_j`. Reservations repeat every cycle of `k` frames, so
//! hop `j` reserves row `(start + Σ_{i≤j} d_i) mod k` of its port's scheduling table.
//! A row has room when its bits on the wire plus the flow's fit in the frame:
//! `Σ packets · (size + overhead) · 8 ≤ (TF − guard) · C` — the same rule (and the
//! same [`Link`] arithmetic) the node checks its table with, so a table this module
//! hands out is one the node accepts.
//!
//! The allocator tries the start frames `0, 1, …, k − 1` and takes the first one at
//! which every hop has room (first fit: deterministic, so a replay of the same
//! requests gives the same tables). A caller may ask for a given start (the
//! controller does so when it reloads its database: a flow keeps the frames it was
//! given even if an earlier flow has left since). A rejection says, per start frame
//! tried, which hop and which frame had no room and how many bits were left.
//!
//! The bits booked per frame and the search are the planner's frame allocator
//! ([`lockstep_plan::alloc::FrameBook`], policy [`Policy::FirstFit`]); this module
//! resolves `node/port` names to its links, keeps the tables' entries, and words the
//! answers.
//!
//! `d_0` is the delay of the first hop relative to the start frame (normally 0: the
//! sender sends in the start frame); `d_j` for `j ≥ 1` is the non-immediate
//! forwarding delay of the flow at hop `j`'s node, which the node requires in
//! `[1, k)`.

use std::collections::{BTreeMap, BTreeSet};

use lockstep_core::tdp::schedule::{Link, ETHERNET_OVERHEAD};
use lockstep_core::units::BitRate;
use lockstep_core::Duration;
use lockstep_plan::alloc::{self as book, FrameBook, Hop, LinkId, Placement, Policy, Request};
use serde::{Deserialize, Serialize};

/// The TDP network as the controller sees it: the common time reference and every
/// node's output ports with their link rates (the `--tdp FILE`).
///
/// ```toml
/// tf = "250us"
/// k = 4
/// guard = "5us"                 # optional, default 0
/// [[node]]
/// name = "s0"
/// ports = [{ id = 1, rate = "100Mbit/s" }]
/// [[node]]
/// name = "r1"
/// ports = [{ id = 1, rate = "100Mbit/s" }, { id = 2, rate = "100Mbit/s", overhead = 38 }]
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TdpNetwork {
    #[serde(with = "lockstep_core::tdp::config::human_duration")]
    pub tf: Duration,
    pub k: u32,
    #[serde(default, with = "lockstep_core::tdp::config::human_duration")]
    pub guard: Duration,
    #[serde(rename = "node", default)]
    pub nodes: Vec<TdpNode>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TdpNode {
    pub name: String,
    pub ports: Vec<TdpPort>,
}

/// An output port: the node's port id (as in its `[[node.ports]]`) and its link.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TdpPort {
    pub id: u16,
    pub rate: BitRate,
    /// Bytes the link adds per IP packet (default: Ethernet, 38).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overhead: Option<u32>,
}

/// A TDP network description that cannot be used: which field, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct TdpNetworkError {
    pub field: String,
    pub message: String,
}

/// A request for a TDP flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TdpFlowSpec {
    pub name: String,
    /// The flow id the nodes know it by (their `[[node.flows]] id`); the smallest free
    /// id from 1 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u32>,
    /// Output ports, `node/port`, in the order the flow crosses them.
    pub path: Vec<String>,
    /// Packets per cycle, all sent in the one reserved frame of each hop.
    pub packets: u32,
    /// Largest packet, bytes of IP length.
    pub size: u32,
    /// Forwarding delay (frames) of each hop, see the module docs.
    pub d: Vec<u32>,
    /// A given start frame instead of the first that fits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<u32>,
}

/// One hop of an allocated flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HopAlloc {
    pub node: String,
    pub port: u16,
    pub d: u32,
    /// The row (`frame mod k`) reserved at this hop.
    pub slot: u32,
}

/// An allocated flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Allocation {
    pub name: String,
    pub id: u32,
    pub start: u32,
    pub packets: u32,
    pub size: u32,
    pub hops: Vec<HopAlloc>,
}

/// Why one start frame does not work: the first hop without room.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Blocked {
    pub start: u32,
    pub hop: usize,
    /// `node/port`.
    pub port: String,
    /// The row at that hop (`frame mod k`).
    pub frame: u32,
    pub free_bits: u128,
    pub needed_bits: u128,
}

/// Why a flow was not allocated. Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// The request itself is malformed (HTTP 400): `field` is the request's key.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// The name or the id is taken (HTTP 409).
    #[error("{field}: {message}")]
    Conflict { field: String, message: String },
    /// No start frame gives every hop room (HTTP 422).
    #[error("{reason}")]
    NoRoom {
        reason: String,
        /// One entry per start frame tried.
        blocked: Vec<Blocked>,
    },
}

#[derive(Clone, Debug)]
struct PortState {
    link: Link,
    capacity_bits: u128,
    /// The port's link in the frame book.
    id: LinkId,
    /// Row `i`: (flow name, flow id, packets, size), in allocation order.
    rows: Vec<Vec<(String, u32, u32, u32)>>,
}

impl PortState {
    /// The bits of row `slot` from its entries (the book keeps the sums).
    #[cfg(test)]
    fn used_bits(&self, slot: u32) -> u128 {
        self.rows
            .get(slot as usize)
            .map(|r| {
                r.iter()
                    .map(|&(_, _, p, s)| u128::from(p) * self.link.packet_bits(s))
                    .sum()
            })
            .unwrap_or(0)
    }
}

/// One row of a port's table as served to a node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowEntry {
    pub flow: String,
    pub id: u32,
    pub packets: u32,
    pub size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Row {
    pub slot: u32,
    pub entries: Vec<RowEntry>,
    pub used_bits: u128,
    pub free_bits: u128,
}

/// One output port's scheduling table (only the rows with reservations).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortTable {
    pub port: u16,
    pub rate_bps: u64,
    pub capacity_bits: u128,
    pub rows: Vec<Row>,
}

/// A flow as one node applies it: the shape of its `[[node.flows]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeFlow {
    pub name: String,
    pub id: u32,
    pub out_port: u16,
    /// The flow's forwarding delay at this node (`None` at its first hop, the sender).
    pub d: Option<u32>,
    pub rows: Vec<NodeRow>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRow {
    pub slot: u32,
    pub packets: u32,
    pub size: u32,
}

/// A node's scheduling table: every port of the node (empty ones included) and the
/// flows it carries.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSchedule {
    pub node: String,
    pub tf_ns: i64,
    pub k: u32,
    pub guard_ns: i64,
    pub ports: Vec<PortTable>,
    pub flows: Vec<NodeFlow>,
}

/// Most frames per cycle the allocator keeps tables for (every port holds `k` rows).
pub const MAX_K: u32 = lockstep_core::limits::MAX_K;

/// Most bytes a port's link may add to each packet (`overhead`).
pub const MAX_OVERHEAD: u32 = 65_535;

/// Most per-start explanations a rejection carries (k may be large).
pub const MAX_BLOCKED: usize = book::MAX_BLOCKED;

/// The frame allocator: the scheduling tables of every port.
#[derive(Clone, Debug)]
pub struct Allocator {
    net: TdpNetwork,
    ports: BTreeMap<(String, u16), PortState>,
    /// The booked bits of every port's frames.
    book: FrameBook,
    flows: BTreeMap<String, Allocation>,
    /// What the book gave each flow (to give it back).
    placements: BTreeMap<String, Placement>,
    /// Allocation order (names).
    order: Vec<String>,
    ids: BTreeSet<u32>,
}

impl TdpNetwork {
    /// Reads the `--tdp FILE` text; errors carry `toml`'s line and column.
    pub fn parse(text: &str) -> Result<TdpNetwork, TdpNetworkError> {
        let net: TdpNetwork = toml::from_str(text).map_err(|e| {
            let field = e
                .span()
                .map(|s| {
                    let before = text.get(..s.start).unwrap_or("");
                    format!("line {}", before.matches('\n').count() + 1)
                })
                .unwrap_or_else(|| "tdp".into());
            TdpNetworkError {
                field,
                message: e.message().to_string(),
            }
        })?;
        net.check()?;
        Ok(net)
    }

    fn check(&self) -> Result<(), TdpNetworkError> {
        let err = |field: String, message: String| Err(TdpNetworkError { field, message });
        if self.k == 0 || self.k > MAX_K {
            return err(
                "k".into(),
                format!("{} is outside 1..={MAX_K} frames per cycle", self.k),
            );
        }
        if !self.tf.is_positive() {
            return err("tf".into(), "must be above 0".into());
        }
        if let Err(m) = lockstep_core::limits::tf(self.tf) {
            return err("tf".into(), m);
        }
        if self.guard.is_negative() || self.guard >= self.tf {
            return err(
                "guard".into(),
                format!(
                    "{} leaves no room in a time-frame of {}",
                    self.guard, self.tf
                ),
            );
        }
        let mut names = BTreeSet::new();
        for (i, n) in self.nodes.iter().enumerate() {
            if n.name.is_empty() || n.name.contains('/') {
                return err(
                    format!("node[{i}].name"),
                    format!("\"{}\" is not a node name (non-empty, no '/')", n.name),
                );
            }
            if !names.insert(n.name.as_str()) {
                return err(
                    format!("node[{i}].name"),
                    format!("node \"{}\" is defined twice", n.name),
                );
            }
            let mut ids = BTreeSet::new();
            for (j, p) in n.ports.iter().enumerate() {
                if let Some(o) = p.overhead.filter(|&o| o > MAX_OVERHEAD) {
                    return err(
                        format!("node[{i}].ports[{j}].overhead"),
                        format!("{o} bytes is above the limit of {MAX_OVERHEAD}"),
                    );
                }
                if !ids.insert(p.id) {
                    return err(
                        format!("node[{i}].ports[{j}].id"),
                        format!("port {} of \"{}\" is defined twice", p.id, n.name),
                    );
                }
            }
        }
        Ok(())
    }
}

/// `"r1/2"` → (`"r1"`, 2).
pub fn parse_hop(text: &str) -> Option<(&str, u16)> {
    let (node, port) = text.rsplit_once('/')?;
    if node.is_empty() {
        return None;
    }
    Some((node, port.trim().parse().ok()?))
}

impl Allocator {
    pub fn new(net: TdpNetwork) -> Allocator {
        let mut ports = BTreeMap::new();
        // k = 0 (a network not checked by `parse`) refuses every request as it is
        // resolved (no d[0] is below k), so the book is never asked.
        let mut frames = FrameBook::new(net.k.max(1), []).expect("k is at least 1");
        for n in &net.nodes {
            for p in &n.ports {
                let link = Link {
                    rate_bps: p.rate.bps(),
                    overhead: p.overhead.unwrap_or(ETHERNET_OVERHEAD),
                };
                let capacity_bits = link.frame_capacity_bits(net.tf, net.guard).unwrap_or(0);
                ports.insert(
                    (n.name.clone(), p.id),
                    PortState {
                        link,
                        capacity_bits,
                        id: frames.add_link(capacity_bits),
                        rows: vec![Vec::new(); net.k as usize],
                    },
                );
            }
        }
        Allocator {
            net,
            ports,
            book: frames,
            flows: BTreeMap::new(),
            placements: BTreeMap::new(),
            order: Vec::new(),
            ids: BTreeSet::new(),
        }
    }

    pub fn network(&self) -> &TdpNetwork {
        &self.net
    }

    pub fn get(&self, name: &str) -> Option<&Allocation> {
        self.flows.get(name)
    }

    /// The allocated flows in allocation order.
    pub fn flows(&self) -> impl Iterator<Item = &Allocation> {
        self.order.iter().filter_map(|n| self.flows.get(n))
    }

    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// Checks a request and resolves its hops: (node, port) and the cumulative offset
    /// of each hop from the start frame.
    fn resolve(&self, spec: &TdpFlowSpec) -> Result<Vec<(String, u16, u64)>, AllocError> {
        let invalid = |field: String, message: String| AllocError::Invalid { field, message };
        let k = self.net.k;
        if spec.name.is_empty() {
            return Err(invalid("name".into(), "must not be empty".into()));
        }
        if spec.path.is_empty() {
            return Err(invalid(
                "path".into(),
                "must name at least one hop (node/port)".into(),
            ));
        }
        if spec.d.len() != spec.path.len() {
            return Err(invalid(
                "d".into(),
                format!(
                    "{} forwarding delays for {} hops: give one per hop",
                    spec.d.len(),
                    spec.path.len()
                ),
            ));
        }
        if spec.packets == 0 {
            return Err(invalid("packets".into(), "must be at least 1".into()));
        }
        if !(28..=65_535).contains(&spec.size) {
            return Err(invalid(
                "size".into(),
                format!(
                    "{} bytes is not an IPv4/UDP packet size (28 to 65535)",
                    spec.size
                ),
            ));
        }
        if let Some(s) = spec.start {
            if s >= k {
                return Err(invalid(
                    "start".into(),
                    format!("frame {s} is outside the cycle of {k} frames"),
                ));
            }
        }
        let mut hops = Vec::with_capacity(spec.path.len());
        let mut seen_nodes = BTreeSet::new();
        let mut offset = 0u64;
        for (j, (h, &d)) in spec.path.iter().zip(&spec.d).enumerate() {
            let Some((node, port)) = parse_hop(h) else {
                return Err(invalid(
                    format!("path[{j}]"),
                    format!("\"{h}\" is not a hop: write node/port, e.g. \"r1/2\""),
                ));
            };
            if !self.ports.contains_key(&(node.to_string(), port)) {
                let known_node = self.net.nodes.iter().any(|n| n.name == node);
                return Err(invalid(
                    format!("path[{j}]"),
                    match known_node {
                        true => format!("node \"{node}\" has no port {port}"),
                        false => format!("unknown node \"{node}\""),
                    },
                ));
            }
            if !seen_nodes.insert(node.to_string()) {
                return Err(invalid(
                    format!("path[{j}]"),
                    format!("node \"{node}\" appears twice: the path loops"),
                ));
            }
            let ok = match j {
                0 => d < k,
                _ => d >= 1 && d < k,
            };
            if !ok {
                return Err(invalid(
                    format!("d[{j}]"),
                    match j {
                        0 => format!("{d} is outside [0, k = {k})"),
                        _ => format!("forwarding delay {d} is outside [1, k = {k})"),
                    },
                ));
            }
            offset += u64::from(d);
            hops.push((node.to_string(), port, offset));
        }
        Ok(hops)
    }

    /// Allocates frames for a flow, or says why it cannot (nothing changes then).
    pub fn allocate(&mut self, spec: &TdpFlowSpec) -> Result<Allocation, AllocError> {
        let hops = self.resolve(spec)?;
        if self.flows.contains_key(&spec.name) {
            return Err(AllocError::Conflict {
                field: "name".into(),
                message: format!("a TDP flow named \"{}\" is already allocated", spec.name),
            });
        }
        let id = match spec.id {
            Some(id) => {
                if let Some(other) = self.flows.values().find(|a| a.id == id) {
                    return Err(AllocError::Conflict {
                        field: "id".into(),
                        message: format!("flow id {id} is taken by \"{}\"", other.name),
                    });
                }
                id
            }
            None => (1..=u32::MAX)
                .find(|i| !self.ids.contains(i))
                .unwrap_or(u32::MAX),
        };
        // The ports of the hops (resolve checked that each exists).
        let states: Vec<&PortState> = hops
            .iter()
            .enumerate()
            .map(|(j, (node, port, _))| {
                self.ports
                    .get(&(node.clone(), *port))
                    .ok_or_else(|| AllocError::Invalid {
                        field: format!("path[{j}]"),
                        message: format!("node \"{node}\" has no port {port}"),
                    })
            })
            .collect::<Result<_, _>>()?;
        let k = self.net.k;
        let request = Request {
            hops: hops
                .iter()
                .zip(&states)
                .map(|((_, _, off), ps)| Hop {
                    link: ps.id,
                    offset: *off,
                    packet_bits: ps.link.packet_bits(spec.size),
                })
                .collect(),
            packets: spec.packets,
            frames: 1,
            start: spec.start,
            policy: Policy::FirstFit,
        };
        let placement = match self.book.place(&request) {
            Ok(p) => p,
            // A hop whose frame cannot hold the flow at all: no start frame helps.
            Err(book::AllocError::TooBig {
                hop,
                needed_bits,
                capacity_bits,
            }) => {
                let (node, port, _) = &hops[hop];
                return Err(AllocError::NoRoom {
                    reason: format!(
                        "hop {hop} ({node}/{port}): {} packets of {} B need {needed_bits} bits on the wire, more than a frame carries ({capacity_bits} bits: TF {} minus guard {} at {})",
                        spec.packets, spec.size, self.net.tf, self.net.guard,
                        BitRate(states[hop].link.rate_bps)
                    ),
                    blocked: Vec::new(),
                });
            }
            Err(book::AllocError::NoRoom { blocked, .. }) => {
                let mut blocked: Vec<Blocked> = blocked
                    .iter()
                    .map(|b| {
                        let (node, port, _) = &hops[b.hop];
                        Blocked {
                            start: b.start,
                            hop: b.hop,
                            port: format!("{node}/{port}"),
                            frame: b.slot,
                            free_bits: b.free_bits,
                            needed_bits: b.needed_bits,
                        }
                    })
                    .collect();
                let reason = match (spec.start, blocked.first()) {
                    (Some(s), Some(b)) => format!(
                        "start frame {s}: hop {} ({}) frame {} has {} bits left, the flow needs {}",
                        b.hop, b.port, b.frame, b.free_bits, b.needed_bits
                    ),
                    (_, Some(b)) => format!(
                        "no start frame of the {k} in a cycle has room on every hop (start 0: hop {} ({}) frame {} has {} bits left, the flow needs {})",
                        b.hop, b.port, b.frame, b.free_bits, b.needed_bits
                    ),
                    _ => "no start frame has room".into(),
                };
                blocked.truncate(MAX_BLOCKED);
                return Err(AllocError::NoRoom { reason, blocked });
            }
            // Not expected: resolve checked the hops, the start and the frame count.
            Err(e) => {
                return Err(AllocError::Invalid {
                    field: "path".into(),
                    message: e.to_string(),
                })
            }
        };
        let start = placement.starts()[0];
        let alloc = Allocation {
            name: spec.name.clone(),
            id,
            start,
            packets: spec.packets,
            size: spec.size,
            hops: hops
                .iter()
                .zip(&spec.d)
                .enumerate()
                .map(|(j, ((node, port, _), &d))| HopAlloc {
                    node: node.clone(),
                    port: *port,
                    d,
                    slot: placement.slot(start, j).unwrap_or(0),
                })
                .collect(),
        };
        for h in &alloc.hops {
            if let Some(ps) = self.ports.get_mut(&(h.node.clone(), h.port)) {
                if let Some(row) = ps.rows.get_mut(h.slot as usize) {
                    row.push((alloc.name.clone(), id, alloc.packets, alloc.size));
                }
            }
        }
        self.ids.insert(id);
        self.order.push(alloc.name.clone());
        self.placements.insert(alloc.name.clone(), placement);
        self.flows.insert(alloc.name.clone(), alloc.clone());
        Ok(alloc)
    }

    /// Releases a flow's frames; `None` for an unknown name.
    pub fn release(&mut self, name: &str) -> Option<Allocation> {
        let alloc = self.flows.remove(name)?;
        if let Some(p) = self.placements.remove(name) {
            let released = self.book.release(&p);
            debug_assert_eq!(released, Ok(()), "{name}");
        }
        for h in &alloc.hops {
            if let Some(ps) = self.ports.get_mut(&(h.node.clone(), h.port)) {
                if let Some(row) = ps.rows.get_mut(h.slot as usize) {
                    row.retain(|e| e.0 != name);
                }
            }
        }
        self.ids.remove(&alloc.id);
        self.order.retain(|n| n != name);
        Some(alloc)
    }

    /// The scheduling table of one node; `None` for a node the network does not have.
    pub fn schedule(&self, node: &str) -> Option<NodeSchedule> {
        let n = self.net.nodes.iter().find(|n| n.name == node)?;
        let ports = n
            .ports
            .iter()
            .filter_map(|p| {
                let ps = self.ports.get(&(node.to_string(), p.id))?;
                let rows = ps
                    .rows
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| !r.is_empty())
                    .map(|(slot, r)| {
                        let used = self.book.used_bits(ps.id, slot as u32);
                        Row {
                            slot: slot as u32,
                            entries: r
                                .iter()
                                .map(|(f, id, p, s)| RowEntry {
                                    flow: f.clone(),
                                    id: *id,
                                    packets: *p,
                                    size: *s,
                                })
                                .collect(),
                            used_bits: used,
                            free_bits: ps.capacity_bits.saturating_sub(used),
                        }
                    })
                    .collect();
                Some(PortTable {
                    port: p.id,
                    rate_bps: ps.link.rate_bps,
                    capacity_bits: ps.capacity_bits,
                    rows,
                })
            })
            .collect();
        let flows = self
            .flows()
            .filter_map(|a| {
                let (j, h) = a.hops.iter().enumerate().find(|(_, h)| h.node == node)?;
                Some(NodeFlow {
                    name: a.name.clone(),
                    id: a.id,
                    out_port: h.port,
                    d: (j > 0).then_some(h.d),
                    rows: vec![NodeRow {
                        slot: h.slot,
                        packets: a.packets,
                        size: a.size,
                    }],
                })
            })
            .collect();
        Some(NodeSchedule {
            node: node.to_string(),
            tf_ns: self.net.tf.as_nanos(),
            k: self.net.k,
            guard_ns: self.net.guard.as_nanos(),
            ports,
            flows,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// TF 250 µs at 100 Mb/s: 25 000 bits a frame; a 1002-byte packet takes 8320 bits,
    /// three fill 24 960 (40 left).
    const NET: &str = r#"
tf = "250us"
k = 4
[[node]]
name = "s0"
ports = [{ id = 1, rate = "100Mbit/s" }]
[[node]]
name = "r1"
ports = [{ id = 1, rate = "100Mbit/s" }, { id = 2, rate = "100Mbit/s" }]
[[node]]
name = "r2"
ports = [{ id = 1, rate = "100Mbit/s" }]
"#;

    fn alloc() -> Allocator {
        Allocator::new(TdpNetwork::parse(NET).unwrap())
    }

    fn spec(name: &str, packets: u32, d: &[u32]) -> TdpFlowSpec {
        TdpFlowSpec {
            name: name.into(),
            id: None,
            path: ["s0/1", "r1/2", "r2/1"][..d.len()]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            packets,
            size: 1002,
            d: d.to_vec(),
            start: None,
        }
    }

    fn slots(a: &Allocation) -> Vec<u32> {
        a.hops.iter().map(|h| h.slot).collect()
    }

    #[test]
    fn first_fit_start_frames_are_exact() {
        let mut al = alloc();
        // d = 0, 1, 2: hops at start, start + 1, start + 3.
        let a = al.allocate(&spec("a", 3, &[0, 1, 2])).unwrap();
        assert_eq!((a.id, a.start, slots(&a)), (1, 0, vec![0, 1, 3]));
        // start 0 is full at s0 (40 bits left); start 1: 1, 2, 0.
        let b = al.allocate(&spec("b", 1, &[0, 1, 2])).unwrap();
        assert_eq!((b.id, b.start, slots(&b)), (2, 1, vec![1, 2, 0]));
        // 2 packets (16 640 bits): start 0 is still full at s0; at start 1 every hop
        // holds b's 8320 bits and has 16 680 left.
        let c = al.allocate(&spec("c", 2, &[0, 1, 2])).unwrap();
        assert_eq!((c.id, c.start, slots(&c)), (3, 1, vec![1, 2, 0]));
        // One more 1-packet flow: start 0 full at s0 (40 left), start 1 full at s0
        // (40 left), start 2: s0 2, r1/2 3, r2/1 1: all empty.
        let d = al.allocate(&spec("d", 1, &[0, 1, 2])).unwrap();
        assert_eq!((d.start, slots(&d)), (2, vec![2, 3, 1]));
        // The rows of r2/1 now: frame 0 b + c, frame 1 d, frame 3 a.
        let s = al.schedule("r2").unwrap();
        let rows: Vec<(u32, Vec<&str>, u128, u128)> = s.ports[0]
            .rows
            .iter()
            .map(|r| {
                (
                    r.slot,
                    r.entries.iter().map(|e| e.flow.as_str()).collect(),
                    r.used_bits,
                    r.free_bits,
                )
            })
            .collect();
        assert_eq!(
            rows,
            vec![
                (0, vec!["b", "c"], 24_960, 40),
                (1, vec!["d"], 8_320, 16_680),
                (3, vec!["a"], 24_960, 40),
            ]
        );
        assert_eq!(
            s.flows
                .iter()
                .map(|f| (f.name.as_str(), f.id, f.out_port, f.d, f.rows[0].slot))
                .collect::<Vec<_>>(),
            vec![
                ("a", 1, 1, Some(2), 3),
                ("b", 2, 1, Some(2), 0),
                ("c", 3, 1, Some(2), 0),
                ("d", 4, 1, Some(2), 1)
            ]
        );
        // The sender's view: no d at the first hop.
        let s0 = al.schedule("s0").unwrap();
        assert_eq!(s0.flows[0].d, None);
        assert_eq!(
            s0.flows[0].rows,
            vec![NodeRow {
                slot: 0,
                packets: 3,
                size: 1002
            }]
        );
        // r1 has two ports; port 1 carries nothing.
        let r1 = al.schedule("r1").unwrap();
        assert_eq!(
            r1.ports
                .iter()
                .map(|p| (p.port, p.rows.len()))
                .collect::<Vec<_>>(),
            vec![(1, 0), (2, 3)]
        );
        assert_eq!(al.schedule("nope"), None);
    }

    #[test]
    fn a_full_cycle_rejects_naming_hop_and_frame() {
        let mut al = alloc();
        for (i, n) in ["a", "b", "c", "d"].iter().enumerate() {
            let a = al.allocate(&spec(n, 3, &[0, 1])).unwrap();
            assert_eq!(a.start, i as u32);
        }
        let e = al.allocate(&spec("e", 1, &[0, 1])).unwrap_err();
        let AllocError::NoRoom { reason, blocked } = e else {
            panic!("{e:?}")
        };
        assert_eq!(blocked.len(), 4);
        assert_eq!(
            blocked[0],
            Blocked {
                start: 0,
                hop: 0,
                port: "s0/1".into(),
                frame: 0,
                free_bits: 40,
                needed_bits: 8_320
            }
        );
        assert_eq!(
            reason,
            "no start frame of the 4 in a cycle has room on every hop (start 0: hop 0 (s0/1) frame 0 has 40 bits left, the flow needs 8320)"
        );
        // Only the second hop blocked: another flow from r1 only.
        let mut other = spec("f", 1, &[0]);
        other.path = vec!["r1/2".into()];
        let e = al.allocate(&other).unwrap_err();
        let AllocError::NoRoom { blocked, .. } = e else {
            panic!()
        };
        assert_eq!(blocked[1].port, "r1/2");
        assert_eq!(blocked[1].frame, 1);
        // Releasing b frees start 1 exactly.
        let b = al.release("b").unwrap();
        assert_eq!(slots(&b), vec![1, 2]);
        let e2 = al.allocate(&spec("e", 1, &[0, 1])).unwrap();
        assert_eq!((e2.start, slots(&e2), e2.id), (1, vec![1, 2], 2));
        assert_eq!(al.release("nope"), None);
    }

    #[test]
    fn a_given_start_is_kept_or_refused() {
        let mut al = alloc();
        let mut s = spec("a", 1, &[0, 1, 2]);
        s.start = Some(3);
        let a = al.allocate(&s).unwrap();
        assert_eq!(slots(&a), vec![3, 0, 2]);
        let mut big = spec("b", 3, &[0, 1, 2]);
        big.start = Some(3);
        let e = al.allocate(&big).unwrap_err();
        assert_eq!(
            e.to_string(),
            "start frame 3: hop 0 (s0/1) frame 3 has 16680 bits left, the flow needs 24960"
        );
        // d wraps around the cycle: 3 + 1 + 2 = 6 -> frame 2.
        assert_eq!(a.hops[2].slot, 2);
    }

    #[test]
    fn bad_requests_name_the_field() {
        let mut al = alloc();
        let field = |e: AllocError| match e {
            AllocError::Invalid { field, .. } | AllocError::Conflict { field, .. } => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            field(al.allocate(&spec("a", 1, &[0, 1, 5])).unwrap_err()),
            "d[2]"
        );
        assert_eq!(
            field(al.allocate(&spec("a", 1, &[0, 0])).unwrap_err()),
            "d[1]"
        );
        assert_eq!(
            field(al.allocate(&spec("a", 0, &[0])).unwrap_err()),
            "packets"
        );
        let mut s = spec("a", 1, &[0]);
        s.path = vec!["x9/1".into()];
        assert_eq!(field(al.allocate(&s).unwrap_err()), "path[0]");
        s.path = vec!["s0/7".into()];
        let e = al.allocate(&s).unwrap_err();
        assert_eq!(e.to_string(), "path[0]: node \"s0\" has no port 7");
        s.path = vec!["s0".into()];
        assert_eq!(field(al.allocate(&s).unwrap_err()), "path[0]");
        s.path = vec!["s0/1".into(), "s0/1".into()];
        s.d = vec![0, 1];
        assert_eq!(field(al.allocate(&s).unwrap_err()), "path[1]");
        let mut s = spec("a", 1, &[0]);
        s.d = vec![];
        assert_eq!(field(al.allocate(&s).unwrap_err()), "d");
        s.d = vec![0];
        s.size = 20;
        assert_eq!(field(al.allocate(&s).unwrap_err()), "size");
        // Too big for any frame.
        let e = al.allocate(&spec("a", 4, &[0])).unwrap_err();
        assert!(e.to_string().starts_with("hop 0 (s0/1): 4 packets of 1002 B need 33280 bits on the wire, more than a frame carries (25000 bits"), "{e}");
        // Duplicates.
        al.allocate(&spec("a", 1, &[0])).unwrap();
        assert_eq!(field(al.allocate(&spec("a", 1, &[0])).unwrap_err()), "name");
        let mut s = spec("b", 1, &[0]);
        s.id = Some(1);
        assert_eq!(
            al.allocate(&s).unwrap_err().to_string(),
            "id: flow id 1 is taken by \"a\""
        );
        assert_eq!(al.len(), 1);
    }

    proptest::proptest! {
        /// Any sequence of allocations and releases: no row ever holds more than a
        /// frame carries, first fit takes the smallest start at which every hop has
        /// room, and releasing everything leaves empty tables.
        #[test]
        fn rows_never_overflow_and_first_fit_is_the_smallest_start(
            ops in proptest::collection::vec((0u32..3, 1u32..4, 0u32..3, proptest::bool::ANY), 1..40)
        ) {
            let mut al = alloc();
            let paths: [&[&str]; 3] = [&["s0/1"], &["s0/1", "r1/2"], &["r1/1", "r2/1"]];
            let mut live: Vec<String> = Vec::new();
            for (i, (p, packets, d, release)) in ops.into_iter().enumerate() {
                if release && !live.is_empty() {
                    let name = live.remove(i % live.len());
                    proptest::prop_assert!(al.release(&name).is_some());
                } else {
                    let path: Vec<String> = paths[p as usize].iter().map(|s| s.to_string()).collect();
                    let ds: Vec<u32> = (0..path.len()).map(|j| if j == 0 { 0 } else { 1 + d % 3 }).collect();
                    let s = TdpFlowSpec { name: format!("x{i}"), id: None, path, packets, size: 1002, d: ds, start: None };
                    // The smallest start with room on every hop, computed directly.
                    let fits = |start: u32| {
                        let mut off = 0u64;
                        s.path.iter().zip(&s.d).all(|(h, &d)| {
                            off += u64::from(d);
                            let (n, port) = parse_hop(h).unwrap();
                            let ps = &al.ports[&(n.to_string(), port)];
                            let slot = ((u64::from(start) + off) % 4) as u32;
                            ps.used_bits(slot) + u128::from(packets) * 8320 <= ps.capacity_bits
                        })
                    };
                    let expect = (0..4).find(|&st| fits(st));
                    match al.allocate(&s) {
                        Ok(a) => {
                            proptest::prop_assert_eq!(Some(a.start), expect);
                            live.push(a.name);
                        }
                        Err(AllocError::NoRoom { .. }) => proptest::prop_assert_eq!(expect, None),
                        Err(e) => proptest::prop_assert!(false, "{e}"),
                    }
                }
                for ps in al.ports.values() {
                    for slot in 0..4 {
                        proptest::prop_assert!(ps.used_bits(slot) <= ps.capacity_bits);
                    }
                }
            }
            for name in live {
                al.release(&name);
            }
            for ps in al.ports.values() {
                proptest::prop_assert!(ps.rows.iter().all(Vec::is_empty));
            }
            proptest::prop_assert_eq!(al.len(), 0);
        }
    }

    #[test]
    fn network_file_errors() {
        let e = TdpNetwork::parse(&NET.replace("k = 4", "k = 0")).unwrap_err();
        assert_eq!(e.field, "k");
        let e =
            TdpNetwork::parse(&NET.replace("tf = \"250us\"", "tf = \"250us\"\nguard = \"1ms\""))
                .unwrap_err();
        assert_eq!(e.field, "guard");
        let e = TdpNetwork::parse(&NET.replace("name = \"r2\"", "name = \"r1\"")).unwrap_err();
        assert_eq!(e.field, "node[2].name");
        let e = TdpNetwork::parse(&NET.replace("k = 4", "k = 4\nkk = 1")).unwrap_err();
        assert_eq!(e.field, "line 4");
        assert!(e.message.contains("unknown field `kk`"), "{e}");
        assert_eq!(
            TdpNetwork::parse(&NET.replace("k = 4", "k = 100001"))
                .unwrap_err()
                .to_string(),
            "k: 100001 is outside 1..=100000 frames per cycle"
        );
        assert_eq!(
            TdpNetwork::parse(&NET.replace("tf = \"250us\"", "tf = \"500ns\""))
                .unwrap_err()
                .to_string(),
            "tf: a time-frame of 500ns is below the limit of 1us"
        );
        assert_eq!(
            TdpNetwork::parse(&NET.replace("tf = \"250us\"", "tf = \"11s\""))
                .unwrap_err()
                .to_string(),
            "tf: a time-frame of 11s is above the limit of 10s"
        );
        let e = TdpNetwork::parse(&NET.replacen("rate = \"100Mbit/s\"", "rate = \"2Tbit/s\"", 1))
            .unwrap_err();
        assert!(
            e.message.contains("2Tbit/s is above the limit of 1 Tbit/s"),
            "{e}"
        );
        assert_eq!(
            TdpNetwork::parse(&NET.replacen(
                "rate = \"100Mbit/s\"",
                "rate = \"100Mbit/s\", overhead = 65536",
                1
            ))
            .unwrap_err()
            .to_string(),
            "node[0].ports[0].overhead: 65536 bytes is above the limit of 65535"
        );
        assert_eq!(parse_hop("r1/2"), Some(("r1", 2)));
        assert_eq!(parse_hop("/2"), None);
        assert_eq!(parse_hop("r1/x"), None);
    }
}
