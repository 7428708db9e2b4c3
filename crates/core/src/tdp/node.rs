//! The sans-IO TDP node of time-driven forwarding: an edge or core router (or, in FIFO mode, the
//! plain router it is compared with) that moves Ethernet frames between ports. It
//! never reads a clock or touches a socket: every call carries `now`, an [`Instant`]
//! of the node's clock (the common time reference), and transmissions come out of [`Node::poll_transmit`].
//!
//! The node runs on the clock of the first instant it is given; every later one
//! (kernel receive times included) must be of the same clock (checked in debug
//! builds). Inside, and in what it writes (the hop records of probes, counters),
//! times are `i64` nanoseconds of that clock; frame numbers are `i64` too.
//!
//! # Driving it
//!
//! ```text
//! loop {
//!     wait until a frame arrives or poll_timeout() passes
//!     for each received frame: node.handle_packet(now, port, bytes, RxMeta { .. })
//!     if now >= poll_timeout(): node.handle_timeout(now)
//!     while let Some(tx) = node.poll_transmit(now) { send tx.buf on tx.port; node.recycle(tx.buf) }
//! }
//! ```
//!
//! In TDP mode [`Node::poll_timeout`] is the next frame start: the node wants to run
//! at every frame start to flush that frame's queue first, send padding and start
//! best effort. Before the first call it returns
//! `Some(Instant::earliest(ClockId::default()))` ("now", due whatever the driver's
//! clock: see [`Instant::is_earliest`]) so the driver starts it at once. In FIFO mode
//! it is `None`: everything leaves at once.
//!
//! # Forwarding (TDP mode)
//!
//! - A TDP-marked packet (DSCP `xx1100`) arriving on port `p` has its upstream frame
//!   recovered by `p`'s alternating-bit [`InputTracker`]; it leaves in frame
//!   `upstream + d`, `d` being the flow's (non-immediate forwarding; the flow is found
//!   by the classifier rules, DSCP carries no flow id) or else the input port's
//!   (immediate forwarding). It waits in the output port's [`FrameQueues`].
//! - An edge treats marked packets like a core does (they come from TDP
//!   neighbours) and classifies unmarked packets by 5-tuple, polices each flow to its
//!   reservation (at most the row's packet count in each of its frames, i.e. its
//!   reserved packets per cycle), and holds each packet until the flow's next
//!   reserved frame with room.
//! - At each frame start that frame's queue is sent first; a port with nothing
//!   reserved sends one padding packet (UDP to the neighbour's discard port, marked
//!   with the frame) so the neighbour's tracker stays in step; then best effort is
//!   served FIFO in what is left of the frame, each packet only if it ends on the
//!   wire before the frame's send deadline (`(TF - guard) * C` per frame at most).
//! - Frame slips — a reserved packet arriving after its frame began, still queued
//!   when its frame ended, or handed out after the send deadline — are counted per
//!   flow and per port; the packet then goes best effort or is dropped
//!   ([`SlipAction`]).
//! - L2/L3: LPM route, static neighbour, source MAC of the output port, TTL
//!   decremented (dropped at TTL ≤ 1), DSCP set to the frame mark for reserved
//!   packets and to a non-TDP value for best effort, checksums updated
//!   incrementally. A forwarded probe (`wire::probe`) gets a hop record.
//!
//! # Events
//!
//! [`NodeCounters`] say how many packets slipped or were dropped; events say which.
//! After [`Node::set_events`]`(true)` every slip and every drop the node counts also
//! queues one typed [`NodeEvent`], drained with [`Node::poll_event`] like
//! `poll_transmit`:
//!
//! ```text
//! node.set_events(true);
//! ... node.handle_packet(now, port, bytes, rx) / handle_timeout / poll_transmit ...
//! while let Some(ev) = node.poll_event() {
//!     match ev {
//!         NodeEvent::Slip { flow, port, frame, at, why, action, probe } => ..,
//!         NodeEvent::Drop { flow, port, at, why, probe } => ..,
//!     }
//! }
//! ```
//!
//! - [`NodeEvent::Slip`], one per increment of a port's `slipped`: the reserved
//!   packet's flow, output port, the frame it missed, when (`now` of the call
//!   that saw it), why ([`SlipReason`]: `Late` on arrival, `TooEarly` /
//!   `QueueFull` when its frame queue refused it, `MissedFrame` when still queued
//!   or held at the end of its frame, `PastDeadline` when handed out after the send
//!   deadline) and what became of it ([`SlipOutcome`]: sent late, best effort, or
//!   dropped).
//! - [`NodeEvent::Drop`], one per other dropped packet ([`DropReason`]): on
//!   reception (malformed, ARP, not IPv4, no route, no neighbour, TTL expired, for
//!   the node itself, for another host, unknown port: the input port) or while
//!   waiting to leave (policed at an edge, best-effort queue full or best effort
//!   disabled: the output port). Received padding is not a drop. A slipped packet
//!   that `on_slip = "drop"` drops is only a `Slip` (with `SlipOutcome::Dropped`);
//!   one sent best effort that then finds the best-effort queue full is a `Slip`
//!   followed by a `Drop`.
//! - Both carry the probe's flow id and sequence number ([`ProbeTag`]) when the
//!   packet is a probe.
//!
//! Events cost nothing while off (the default): no event is built, nothing is
//! allocated. When on they wait in a queue of at most [`EVENT_CAPACITY`]; what
//! does not fit is counted in `NodeCounters::events_lost`, never queued. Events
//! change neither forwarding nor any other counter.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::Ipv4Addr;

use rustc_hash::FxHashMap;
use thiserror::Error;

use super::config::{BestEffortConfig, FlowConfig, Mode, NodeConfig, Role, SlipAction};
use super::counters::{FlowCounters, NodeCounters, PortCounters};
use super::deps::{
    checksum, Classifier, EtherType, EthernetAddress, EthernetFrame, FiveTuple, Ipv4Packet,
    NeighbourTable, NextHopCache, PortId, Prefix, Route, RouteTable, Rule, UdpPacket, DISCARD_PORT,
    PROTO_TCP, PROTO_UDP,
};
pub use super::event::{DropReason, NodeEvent, ProbeTag, SlipOutcome, SlipReason, EVENT_CAPACITY};
use super::marking::{classify, InputTracker, Mark};
use super::pool::{PacketBuf, Pool};
use super::queues::{EnqueueError, FrameQueues};
use super::schedule::{Entry, Link, PortSchedule, ScheduleError};
use crate::frame::FrameClock;
use crate::time::{Instant, LearnedClock};
use crate::wire::probe::{HopKind, HopRecord, Packet as ProbePacket, MAGIC, NOT_FILLED};

/// Smallest IP length Ethernet carries (a shorter datagram is padded to it).
const MIN_IP_LEN: u32 = 46;
/// Length of a padding frame: Ethernet 14 + IPv4 20 + UDP 8.
const PADDING_FRAME_LEN: usize = 42;
/// Idle buffers the pool keeps.
const POOL_KEEP: usize = 8192;

/// What the driver knows about a received frame besides its bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxMeta {
    /// Kernel RX timestamp (`SO_TIMESTAMPING`), same clock as `now`.
    pub kernel_rx: Option<Instant>,
}

/// Why a packet leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxKind {
    /// A reserved packet in its frame.
    Reserved,
    /// Best effort (and everything in FIFO mode).
    BestEffort,
    /// A padding packet keeping the neighbour in step.
    Padding,
}

/// A frame to send.
#[derive(Debug)]
pub struct Transmit {
    pub port: PortId,
    pub buf: PacketBuf,
    /// The reserved flow the packet belongs to, when the node knows it.
    pub flow: Option<u32>,
    /// The frame the packet is sent in (reserved and padding packets).
    pub frame: Option<i64>,
    pub kind: TxKind,
}

/// A configuration the node refuses; `field` names where (`flows[2].rows[0]`).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{field}: {message}")]
pub struct NodeConfigError {
    pub field: String,
    pub message: String,
}

fn cfg_err(field: impl Into<String>, message: impl Into<String>) -> NodeConfigError {
    NodeConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// A packet inside the node.
#[derive(Debug)]
struct Pending {
    buf: PacketBuf,
    /// Index into `Node::flows`.
    flow: Option<usize>,
    /// Forwarding frame (reserved packets).
    frame: i64,
    /// IPv4 total length (what the link carries besides Ethernet overhead).
    ip_len: u32,
    rx_kernel_ns: i64,
    rx_app_ns: i64,
    /// It slipped here: its hop record says so.
    slipped: bool,
}

#[derive(Debug)]
struct PortState {
    id: PortId,
    mac: EthernetAddress,
    addr: Ipv4Addr,
    link: Link,
    d: Option<u32>,
    capacity_bits: u128,
    tracker: InputTracker,
    queues: FrameQueues<Pending>,
    /// Edge: packets held for frames beyond the next one, ring indexed by
    /// `frame mod (k + 1)` (empty unless the node is an edge in TDP mode).
    hold: Vec<VecDeque<Pending>>,
    /// Reserved packets one frame beyond the queues' reach that arrived less than a
    /// guard before the current frame ends (an upstream clock ahead of this node's
    /// by less than the guard, over a fast link): queued when the frame turns.
    early: VecDeque<Pending>,
    /// The wire bits held in `early`, at most one frame's capacity.
    early_bits: u128,
    be: VecDeque<Pending>,
    /// A ready padding frame (DSCP 0), `None` when the port sends no padding.
    padding: Option<[u8; PADDING_FRAME_LEN]>,
    padding_due: bool,
    /// Bits handed out in the current frame.
    frame_bits: u128,
    /// When the link is done with everything handed out so far (model).
    link_free_at: i64,
}

#[derive(Debug)]
struct FlowState {
    id: u32,
    /// Port index of `out_port`.
    out: usize,
    d: Option<u32>,
    police: bool,
    /// Largest IP size any of its rows allows.
    max_size: u32,
    /// `(slot, packets)` on `out`, by slot.
    slots: Vec<(u32, u32)>,
    /// Edge: packets assigned per frame, ring indexed by `frame mod (k + 1)`.
    used: Vec<(i64, u32)>,
}

/// Why a received frame goes no further.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InDrop {
    Malformed,
    Arp,
    NonIpv4,
    NoRoute,
    NoNeighbour,
    TtlExpired,
    Local,
    OtherHost,
    Padding,
}

impl InDrop {
    /// The event reason of a drop (padding is consumed, not dropped).
    fn reason(self) -> Option<DropReason> {
        Some(match self {
            InDrop::Malformed => DropReason::Malformed,
            InDrop::Arp => DropReason::Arp,
            InDrop::NonIpv4 => DropReason::NonIpv4,
            InDrop::NoRoute => DropReason::NoRoute,
            InDrop::NoNeighbour => DropReason::NoNeighbour,
            InDrop::TtlExpired => DropReason::TtlExpired,
            InDrop::Local => DropReason::Local,
            InDrop::OtherHost => DropReason::OtherHost,
            InDrop::Padding => return None,
        })
    }
}

/// What a received IPv4 packet says (read before anything is rewritten).
struct Parsed {
    dst_mac: EthernetAddress,
    dst: Ipv4Addr,
    dscp: u8,
    ttl: u8,
    ip_len: u32,
    proto: u8,
    whole: bool,
    tuple: Option<FiveTuple>,
    udp_dst: Option<u16>,
}

/// What the node does with the DSCP of a packet it sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DscpAction {
    Keep,
    Set(u8),
    /// Best effort: a TDP mark is replaced by 0 (default forwarding), anything
    /// else is kept.
    Unmark,
}

/// The sans-IO node.
#[derive(Debug)]
pub struct Node {
    config: NodeConfig,
    clock: FrameClock,
    /// The clock of the instants the node is given.
    clock_id: LearnedClock,
    k: u32,
    ports: Vec<PortState>,
    /// The ports' addresses, in port order (what is local, without touching every
    /// port's state for each packet).
    addrs: Vec<Ipv4Addr>,
    flows: Vec<FlowState>,
    flow_by_id: FxHashMap<u32, usize>,
    /// The flow (index into `flows`) of each classifier rule.
    flow_of_rule: Vec<Option<usize>>,
    routes: RouteTable,
    neigh: NeighbourTable,
    /// The route and neighbour tables' answers for recent (destination, TTL) pairs.
    nexthop: NextHopCache,
    classifier: Classifier,
    has_rules: bool,
    best_effort: BestEffortConfig,
    current: Option<i64>,
    /// Packets an edge holds for later frames (all ports).
    held: usize,
    pool: Pool,
    scratch: Vec<Pending>,
    counters: NodeCounters,
    /// Whether slips and drops are queued as [`NodeEvent`]s.
    events_on: bool,
    /// At most [`EVENT_CAPACITY`]; empty (and unallocated) while events are off.
    events: VecDeque<NodeEvent>,
    /// TDP: whether something may have become sendable since a poll last handed
    /// out nothing: set when a frame begins and when a packet joins a port's
    /// best-effort queue, the only ways a port gets something to send within a
    /// frame (a reserved packet is always queued for a later frame, and a
    /// best-effort packet that did not fit in a frame fits no better later in it).
    sendable: bool,
}

impl Node {
    /// Validates the configuration and builds the node. Every error names the
    /// field it is about.
    pub fn new(config: NodeConfig) -> Result<Node, NodeConfigError> {
        build(config)
    }

    /// Replaces the node's flows (rules, rows, forwarding delays, policing) while it
    /// runs — what a new table from the admission controller changes — keeping every
    /// packet in flight: queued and held packets keep their frames, bookings of flows
    /// whose rows did not change are kept, counters follow each flow by id (a removed
    /// flow's counters stay in the list). Refused, with nothing changed, when the new
    /// flows fail the checks of [`Node::new`] or need a forwarding delay beyond what
    /// the port queues were built for (restart the node then).
    pub fn update_flows(&mut self, flows: Vec<FlowConfig>) -> Result<(), NodeConfigError> {
        let mut cfg = self.config.clone();
        cfg.flows = flows;
        let fresh = build(cfg)?;
        // the same ports, in the same order: only the flows changed
        let longer = self
            .ports
            .iter()
            .zip(&fresh.ports)
            .enumerate()
            .find(|(_, (old, new))| new.queues.d_max() > old.queues.d_max());
        if let Some((i, (old, new))) = longer {
            return Err(cfg_err(
                format!("ports[{i}]"),
                format!(
                    "the new flows need forwarding delays up to {} frames, the running queues hold {}: restart the node to apply this table",
                    new.queues.d_max(),
                    old.queues.d_max()
                ),
            ));
        }
        let remap: Vec<Option<usize>> = self
            .flows
            .iter()
            .map(|f| fresh.flow_by_id.get(&f.id).copied())
            .collect();
        let fix = |p: &mut Pending| {
            p.flow = p.flow.and_then(|i| remap.get(i).copied().flatten());
        };
        for port in &mut self.ports {
            port.queues.for_each_mut(fix);
            for q in &mut port.hold {
                q.iter_mut().for_each(fix);
            }
            port.early.iter_mut().for_each(fix);
            port.be.iter_mut().for_each(fix);
        }
        let Node {
            flows: mut new_flows,
            flow_by_id,
            flow_of_rule,
            classifier,
            has_rules,
            counters: fresh_counters,
            config,
            ..
        } = fresh;
        for nf in &mut new_flows {
            if let Some(&oi) = self.flow_by_id.get(&nf.id) {
                if self.flows[oi].slots == nf.slots {
                    nf.used = std::mem::take(&mut self.flows[oi].used);
                }
            }
        }
        let mut counters = fresh_counters.flows;
        for c in &mut counters {
            if let Some(&oi) = self.flow_by_id.get(&c.flow) {
                *c = self.counters.flows[oi].clone();
            }
        }
        for (oi, old) in self.flows.iter().enumerate() {
            if !flow_by_id.contains_key(&old.id) {
                counters.push(self.counters.flows[oi].clone());
            }
        }
        self.flows = new_flows;
        self.flow_by_id = flow_by_id;
        self.flow_of_rule = flow_of_rule;
        self.classifier = classifier;
        self.has_rules = has_rules;
        self.counters.flows = counters;
        self.config = config;
        Ok(())
    }

    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    pub fn frame_clock(&self) -> &FrameClock {
        &self.clock
    }

    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Turns per-packet [`NodeEvent`]s on or off (off when built). Turning them off
    /// discards the events not yet polled.
    pub fn set_events(&mut self, on: bool) {
        self.events_on = on;
        if !on {
            self.events = VecDeque::new();
        }
    }

    /// Whether slips and drops are queued as [`NodeEvent`]s.
    pub fn events_enabled(&self) -> bool {
        self.events_on
    }

    /// The oldest slip or drop not polled yet; always `None` while events are off.
    /// Call until `None` after each call that hands the node a packet or time.
    pub fn poll_event(&mut self) -> Option<NodeEvent> {
        self.events.pop_front()
    }

    /// The frame the node is in (after the last call), `None` before the first.
    pub fn current_frame(&self) -> Option<i64> {
        self.current
    }

    /// Buffers the pool has allocated (constant once the node has warmed up).
    pub fn buffers_allocated(&self) -> u64 {
        self.pool.allocated()
    }

    /// Asks the CPU to load the node's own fields a packet reads (a hint, see
    /// [`crate::prefetch`]): the first of three steps taken a few events before the
    /// node is handed a packet or woken, each after the one before has had time to
    /// arrive.
    pub fn prefetch_state(&self) {
        use crate::prefetch::prefetch;
        prefetch(&self.config.mode);
        prefetch(&self.clock);
        prefetch(&self.clock_id);
        prefetch(&self.ports);
        prefetch(&self.flows);
        prefetch(&self.nexthop);
        prefetch(&self.classifier);
        prefetch(&self.pool);
        prefetch(&self.counters.ports);
        prefetch(&self.counters.frames);
    }

    /// The second step: the tables the fields of [`Node::prefetch_state`] point to.
    pub fn prefetch_tables(&self) {
        use crate::prefetch::prefetch;
        for p in self.ports.iter().take(8) {
            prefetch(&p.id);
            prefetch(&p.tracker);
            prefetch(&p.queues);
            prefetch(&p.be);
        }
        prefetch(self.counters.ports.as_ptr());
        prefetch(self.flows.as_ptr());
        prefetch(self.flow_of_rule.as_ptr());
        prefetch(self.addrs.as_ptr());
    }

    /// The third step: the ports' queues.
    pub fn prefetch_queues(&self) {
        for p in self.ports.iter().take(8) {
            p.queues.prefetch();
        }
    }

    /// For a frame about to arrive on `port`: that port's state and counters, and
    /// the next-hop cache slot of the frame's destination when its bytes are an
    /// untagged IPv4 frame (read at their fixed places; anything else is left to
    /// [`Node::handle_buf`]).
    pub fn prefetch_arrival(&self, port: PortId, frame: &[u8]) {
        use crate::prefetch::prefetch;
        if let Some(pi) = self.port_index(port) {
            prefetch(&self.ports[pi].tracker);
            if let Some(c) = self.counters.ports.get(pi) {
                prefetch(c);
            }
        }
        // Ethernet type at 12, IPv4 TTL at 14 + 8 and destination at 14 + 16
        if let Some(h) = frame.get(12..34) {
            if h[..2] == [0x08, 0x00] {
                let dst = Ipv4Addr::new(h[18], h[19], h[20], h[21]);
                self.nexthop.prefetch(dst, h[10]);
            }
        }
        if self.has_rules {
            if let Some(t) = peek_tuple(frame) {
                self.classifier.prefetch(&t);
            }
        }
    }

    /// Gives a sent buffer back to the pool.
    pub fn recycle(&mut self, buf: PacketBuf) {
        self.pool.put(buf);
    }

    fn forwards(&self) -> bool {
        matches!(self.config.role, Role::Edge | Role::Core)
    }

    fn tdp(&self) -> bool {
        self.config.mode == Mode::Tdp && self.forwards()
    }

    fn port_index(&self, id: PortId) -> Option<usize> {
        // ports are usually numbered in order: look there before searching
        let i = usize::from(id.0);
        if self.ports.get(i).is_some_and(|p| p.id == id) {
            return Some(i);
        }
        self.ports.iter().position(|p| p.id == id)
    }

    /// The next instant the node wants [`Node::handle_timeout`]: the next frame
    /// start in TDP mode (best effort never waits inside a frame: what does not fit
    /// now cannot fit later in the same frame), `None` in FIFO mode and for hosts.
    /// A TDP node with nothing queued, held or to pad wants no timer either: the
    /// next packet brings its frame state up to date, so an idle node costs nothing
    /// per frame.
    ///
    /// Before the first call it is [`Instant::earliest`] of `ClockId::default()`: due
    /// at once, whatever the driver's clock.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if !self.tdp() {
            return None;
        }
        match self.current {
            None => Some(Instant::earliest(self.clock_id.id())),
            Some(_) if self.idle() => None,
            Some(c) => self
                .clock
                .frame_start(c.saturating_add(1))
                .map(|t| self.clock_id.at(t)),
        }
    }

    /// Nothing queued, held or waiting, and no port that sends padding.
    fn idle(&self) -> bool {
        self.held == 0
            && self
                .ports
                .iter()
                .all(|p| p.padding.is_none() && p.queues.is_empty() && p.be.is_empty())
    }

    /// Moves the node's frame state to `now` (frame starts, slips, padding).
    pub fn handle_timeout(&mut self, now: Instant) {
        let now_ns = self.clock_id.ns(now, "node");
        if self.tdp() {
            self.advance(now_ns);
        }
    }

    /// A frame received on `port`. The bytes are copied into a pooled buffer.
    pub fn handle_packet(&mut self, now: Instant, port: PortId, frame: &[u8], rx: RxMeta) {
        let buf = self.pool.copy_of(frame);
        self.handle_buf(now, port, buf, rx);
    }

    /// A frame received on `port`, handed over with its buffer (no copy: how a
    /// simulator passes frames between nodes). The buffer ends in this node's pool
    /// or in a [`Transmit`].
    pub fn handle_buf(&mut self, now: Instant, port: PortId, buf: PacketBuf, rx: RxMeta) {
        let now_ns = self.clock_id.ns(now, "node");
        let Some(pi) = self.port_index(port) else {
            self.counters.unknown_port += 1;
            self.drop_event(now_ns, port, None, &buf, DropReason::UnknownPort);
            self.pool.put(buf);
            return;
        };
        if self.tdp() {
            self.advance(now_ns);
        }
        let pc = &mut self.counters.ports[pi];
        pc.rx_packets += 1;
        pc.rx_bytes += buf.len() as u64;
        if !self.forwards() {
            self.counters.local += 1;
            self.counters.ports[pi].rx_dropped += 1;
            self.drop_event(now_ns, port, None, &buf, DropReason::Local);
            self.pool.put(buf);
            return;
        }
        let pending = Pending {
            buf,
            flow: None,
            frame: 0,
            ip_len: 0,
            rx_kernel_ns: rx
                .kernel_rx
                .map_or(NOT_FILLED, |k| self.clock_id.ns(k, "node")),
            rx_app_ns: now_ns,
            slipped: false,
        };
        if let Err((why, p)) = self.ingress(now_ns, pi, pending) {
            let c = &mut self.counters;
            match why {
                InDrop::Malformed => c.malformed += 1,
                InDrop::Arp => c.arp += 1,
                InDrop::NonIpv4 => c.non_ipv4 += 1,
                InDrop::NoRoute => c.no_route += 1,
                InDrop::NoNeighbour => c.no_neighbour += 1,
                InDrop::TtlExpired => c.ttl_expired += 1,
                InDrop::Local => c.local += 1,
                InDrop::OtherHost => c.other_host += 1,
                InDrop::Padding => {
                    c.padding_received += 1;
                    c.ports[pi].padding_received += 1;
                }
            }
            if why != InDrop::Padding {
                c.ports[pi].rx_dropped += 1;
            }
            if let Some(r) = why.reason() {
                self.drop_event(now_ns, port, p.flow, &p.buf, r);
            }
            self.pool.put(p.buf);
        }
    }

    /// The next frame to send, if one may leave at `now`. Call until `None`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<Transmit> {
        let now_ns = self.clock_id.ns(now, "node");
        if !self.forwards() {
            return None;
        }
        if self.config.mode == Mode::Fifo {
            for pi in 0..self.ports.len() {
                if let Some(p) = self.ports[pi].be.pop_front() {
                    return Some(self.transmit(now_ns, pi, p, TxKind::BestEffort, None));
                }
            }
            return None;
        }
        self.advance(now_ns);
        let c = self.current?;
        let deadline = self.clock.send_deadline(c).unwrap_or(i64::MAX);
        // 1. the frame's reserved queue, first, on every port
        for pi in 0..self.ports.len() {
            if let Some(mut p) = self.ports[pi].queues.pop() {
                // the next one's bytes, while this one is sent (a hint)
                if let Some(next) = self.ports[pi].queues.front() {
                    crate::prefetch::prefetch(next.buf.as_slice().as_ptr());
                }
                if now_ns > deadline {
                    p.slipped = true;
                    self.counters.ports[pi].slipped += 1;
                    self.counters.ports[pi].late_tx += 1;
                    if let Some(fi) = p.flow {
                        self.counters.flows[fi].slipped += 1;
                        self.counters.flows[fi].late += 1;
                    }
                    let (why, action) = (SlipReason::PastDeadline, SlipOutcome::SentLate);
                    self.slip_event(now_ns, pi, &p, why, action);
                }
                return Some(self.transmit(now_ns, pi, p, TxKind::Reserved, Some(c)));
            }
        }
        // 2. padding where nothing was reserved
        for pi in 0..self.ports.len() {
            if self.ports[pi].padding_due {
                self.ports[pi].padding_due = false;
                if let Some(t) = self.padding(now_ns, pi, c) {
                    return Some(t);
                }
            }
        }
        // 3. best effort in what is left of the frame
        for pi in 0..self.ports.len() {
            let Some(head) = self.ports[pi].be.front() else {
                continue;
            };
            if self.best_effort_fits(pi, head.ip_len, now_ns, deadline) {
                if let Some(p) = self.ports[pi].be.pop_front() {
                    return Some(self.transmit(now_ns, pi, p, TxKind::BestEffort, None));
                }
            }
        }
        self.sendable = false;
        None
    }

    /// Whether [`Node::poll_transmit`] at `now` may hand out a packet. `false` is
    /// certain: it would hand out none and change nothing. In FIFO mode: no port
    /// has a packet waiting. In TDP mode: the node is in `now`'s frame already and
    /// no packet has become sendable since a poll last handed out nothing (nothing
    /// reads the ports then, so the answer costs no memory traffic). A driver that
    /// knows this may skip the call.
    pub fn may_transmit(&self, now: Instant) -> bool {
        if !self.forwards() {
            return false;
        }
        if self.config.mode == Mode::Fifo {
            return self.ports.iter().any(|p| !p.be.is_empty());
        }
        // a frame to move to first (poll_transmit would begin it)
        if self.current != Some(self.clock.frame_of(now.ns)) {
            return true;
        }
        self.sendable
    }

    // ----- ingress -------------------------------------------------------------

    fn ingress(&mut self, now: i64, pi: usize, mut p: Pending) -> Result<(), (InDrop, Pending)> {
        let parsed = match parse(p.buf.as_slice(), self.has_rules) {
            Ok(v) => v,
            Err(why) => return Err((why, p)),
        };
        p.ip_len = parsed.ip_len;
        if parsed.dst_mac != self.ports[pi].mac && parsed.dst_mac.is_unicast() {
            // seen only because the socket is promiscuous: another host's frame
            return Err((InDrop::OtherHost, p));
        }
        let tdp = self.tdp();
        // The link-level mark first: even a packet we drop tells us the upstream frame.
        let mut upstream = None;
        let mut marked = false;
        if tdp {
            if let Mark::Tdp { parity } = classify(parsed.dscp) {
                marked = true;
                // The frame the packet *arrived* in: the kernel's receive time when
                // the driver has one (a router that processes a packet late —
                // woken late, busy with a batch — must not take it for a packet of
                // a later upstream frame: the parity bits only tell apart
                // neighbouring frames), else the processing time.
                let port = &mut self.ports[pi];
                let before = port.tracker.resyncs();
                let recovered = if p.rx_kernel_ns == NOT_FILLED {
                    port.tracker.on_packet(self.clock.frame_of(now), parity)
                } else {
                    port.tracker
                        .on_arrival(self.clock.frame_of(p.rx_kernel_ns.min(now)), parity)
                };
                match recovered {
                    Ok((f, _)) => upstream = Some(f),
                    Err(_) => self.counters.unknown_dscp += 1,
                }
                let resynced = port.tracker.resyncs() - before;
                self.counters.ports[pi].resyncs += resynced;
                self.counters.resyncs += resynced;
            }
        }
        if self.addrs.contains(&parsed.dst) {
            if parsed.proto == PROTO_UDP && parsed.udp_dst == Some(DISCARD_PORT) {
                return Err((InDrop::Padding, p));
            }
            return Err((InDrop::Local, p));
        }
        if parsed.ttl <= 1 {
            return Err((InDrop::TtlExpired, p));
        }
        let (out, dst_mac) = match self.next_hop(parsed.dst, parsed.ttl) {
            Ok(v) => v,
            Err(why) => return Err((why, p)),
        };
        if parsed.whole {
            if let Some(t) = &parsed.tuple {
                p.flow = self
                    .classifier
                    .first_match(t)
                    .and_then(|r| self.flow_of_rule.get(r).copied().flatten());
            }
        }
        if rewrite_forward(p.buf.as_mut_slice(), self.ports[out].mac, dst_mac).is_err() {
            return Err((InDrop::TtlExpired, p));
        }
        if !tdp {
            self.push_best_effort(now, out, p);
            return Ok(());
        }
        if marked {
            let Some(up) = upstream else {
                self.push_best_effort(now, out, p);
                return Ok(());
            };
            let d = p.flow.and_then(|fi| self.flows[fi].d).or(self.ports[pi].d);
            match d {
                Some(d) => self.enqueue_reserved(now, out, up.saturating_add(i64::from(d)), p),
                None => {
                    self.counters.unknown_flow += 1;
                    self.push_best_effort(now, out, p);
                }
            }
            return Ok(());
        }
        match p.flow {
            Some(fi) if self.config.role == Role::Edge && !self.flows[fi].slots.is_empty() => {
                if self.flows[fi].out != out {
                    self.counters.misrouted += 1;
                    self.push_best_effort(now, out, p);
                } else {
                    self.edge_admit(now, fi, p);
                }
            }
            _ => self.push_best_effort(now, out, p),
        }
        Ok(())
    }

    /// The output port index and next-hop MAC for `dst` at `ttl`: from the cache,
    /// or from the route and neighbour tables (and then cached).
    fn next_hop(&mut self, dst: Ipv4Addr, ttl: u8) -> Result<(usize, EthernetAddress), InDrop> {
        if let Some(hit) = self.nexthop.get(dst, ttl) {
            return Ok(hit);
        }
        let route = self.routes.lookup(dst, ttl).ok_or(InDrop::NoRoute)?;
        let next_hop = route.next_hop.unwrap_or(dst);
        let out = self.port_index(route.port).ok_or(InDrop::NoRoute)?;
        let mac = self.neigh.lookup(next_hop).ok_or(InDrop::NoNeighbour)?;
        self.nexthop.put(dst, ttl, out, mac);
        Ok((out, mac))
    }

    /// Edge: the flow's next reserved frame with room, or policing.
    fn edge_admit(&mut self, now: i64, fi: usize, mut p: Pending) {
        let out = self.flows[fi].out;
        let frame = if p.ip_len > self.flows[fi].max_size {
            None
        } else {
            let c = self.current.unwrap_or_else(|| self.clock.frame_of(now));
            self.assign_frame(fi, c)
        };
        match frame {
            Some(f) => {
                p.frame = f;
                let c = self.ports[out].queues.current_frame();
                if c.checked_add(1) == Some(f) {
                    self.enqueue_reserved(now, out, f, p);
                } else {
                    let idx = f.rem_euclid(i64::from(self.k) + 1) as usize;
                    match self.ports[out].hold.get_mut(idx) {
                        Some(q) => {
                            q.push_back(p);
                            self.held += 1;
                        }
                        // (unreachable: an edge holds k + 1 frames)
                        None => self.slip(now, out, p, SlipReason::TooEarly),
                    }
                }
            }
            None if self.flows[fi].police => {
                self.counters.flows[fi].policed += 1;
                self.counters.ports[out].tx_dropped += 1;
                let port = self.ports[out].id;
                self.drop_event(now, port, p.flow, &p.buf, DropReason::Policed);
                self.pool.put(p.buf);
            }
            None => {
                self.counters.flows[fi].excess += 1;
                self.push_best_effort(now, out, p);
            }
        }
    }

    /// The first frame after `c`, within one cycle, whose row gives flow `fi` a
    /// packet it has not used yet; books it.
    fn assign_frame(&mut self, fi: usize, c: i64) -> Option<i64> {
        let k = i64::from(self.k);
        let flow = &mut self.flows[fi];
        if flow.used.is_empty() {
            flow.used = vec![(i64::MIN, 0); self.k as usize + 1];
        }
        let first = c.checked_add(1)?;
        let start = first.rem_euclid(k) as u32;
        let from = flow.slots.partition_point(|&(s, _)| s < start);
        let n = flow.slots.len();
        for i in 0..n {
            let (slot, packets) = flow.slots[(from + i) % n];
            let ahead = (i64::from(slot) - i64::from(start)).rem_euclid(k);
            let f = first.checked_add(ahead)?;
            let idx = f.rem_euclid(k + 1) as usize;
            let entry = flow.used.get_mut(idx)?;
            if entry.0 != f {
                *entry = (f, 0);
            }
            if entry.1 < packets {
                entry.1 += 1;
                return Some(f);
            }
        }
        None
    }

    fn enqueue_reserved(&mut self, now: i64, out: usize, frame: i64, mut p: Pending) {
        p.frame = frame;
        let bytes = wire_bytes(&self.ports[out].link, p.ip_len);
        match self.ports[out].queues.try_enqueue(frame, bytes, p) {
            Ok(_) => {}
            Err((EnqueueError::Late { .. }, p)) => self.slip(now, out, p, SlipReason::Late),
            // A packet placed too far ahead (its frame was recovered wrongly) or
            // finding its frame's queue full will not leave in its intended frame
            // either: it is a slip like a late one, and `on_slip` decides its fate.
            // Sending it best effort regardless let it wait behind a saturated
            // link for seconds (mesh4).
            Err((
                EnqueueError::TooEarly {
                    frame,
                    current,
                    d_max,
                },
                p,
            )) => {
                if let Err(p) = self.hold_early(now, out, (frame, current, d_max), p) {
                    self.counters.too_early += 1;
                    self.slip(now, out, p, SlipReason::TooEarly);
                }
            }
            Err((EnqueueError::Full { .. }, p)) => {
                self.counters.queue_full += 1;
                self.slip(now, out, p, SlipReason::QueueFull);
            }
        }
    }

    /// A reserved packet that missed its frame on port `out`.
    /// The guard at a frame's start: a reserved packet for the frame just beyond the
    /// queues' reach (`current + d_max + 1`) that arrives less than a guard before
    /// the current frame ends is held (at most one frame's capacity per port) and
    /// queued when the frame turns. Its upstream's clock is ahead of this node's by
    /// less than the guard and the link was faster than the difference. Anything
    /// else is handed back: a slip.
    fn hold_early(
        &mut self,
        now: i64,
        out: usize,
        (frame, current, d_max): (i64, i64, u32),
        p: Pending,
    ) -> Result<(), Pending> {
        let guard = self.clock.guard().as_nanos();
        let within = self
            .clock
            .frame_start(current.saturating_add(1))
            .is_some_and(|start| start.saturating_sub(now) <= guard);
        let port = &mut self.ports[out];
        let bits = u128::from(wire_bytes(&port.link, p.ip_len)) * 8;
        let next_reach = current.saturating_add(i64::from(d_max) + 1);
        if guard == 0
            || !within
            || frame != next_reach
            || port.early_bits + bits > port.capacity_bits
        {
            return Err(p);
        }
        port.early_bits += bits;
        port.early.push_back(p);
        self.held += 1;
        Ok(())
    }

    /// At a frame's turn: the packets [`Self::hold_early`] kept go to their queues.
    fn release_early(&mut self, now: i64, pi: usize) {
        // In place, the ones held now only (a packet may be held again): no
        // allocation per frame.
        let n = self.ports[pi].early.len();
        if n == 0 {
            return;
        }
        self.ports[pi].early_bits = 0;
        for _ in 0..n {
            let Some(p) = self.ports[pi].early.pop_front() else {
                break;
            };
            self.held -= 1;
            let frame = p.frame;
            self.enqueue_reserved(now, pi, frame, p);
        }
    }

    fn slip(&mut self, now: i64, out: usize, mut p: Pending, why: SlipReason) {
        p.slipped = true;
        self.counters.ports[out].slipped += 1;
        if let Some(fi) = p.flow {
            self.counters.flows[fi].slipped += 1;
        }
        let action = match self.config.on_slip {
            SlipAction::BestEffort => SlipOutcome::BestEffort,
            SlipAction::Drop => SlipOutcome::Dropped,
        };
        self.slip_event(now, out, &p, why, action);
        match self.config.on_slip {
            SlipAction::BestEffort => self.push_best_effort(now, out, p),
            SlipAction::Drop => {
                self.counters.ports[out].tx_dropped += 1;
                self.pool.put(p.buf);
            }
        }
    }

    fn push_best_effort(&mut self, now: i64, out: usize, p: Pending) {
        let fifo = self.config.mode == Mode::Fifo;
        let port = &mut self.ports[out];
        let why = if !fifo && !self.best_effort.enabled {
            DropReason::BestEffortDisabled
        } else if port.be.len() >= self.best_effort.queue {
            DropReason::BestEffortFull
        } else {
            port.be.push_back(p);
            self.sendable = true;
            return;
        };
        self.counters.best_effort_dropped += 1;
        self.counters.ports[out].tx_dropped += 1;
        let id = self.ports[out].id;
        self.drop_event(now, id, p.flow, &p.buf, why);
        self.pool.put(p.buf);
    }

    // ----- events --------------------------------------------------------------

    /// A slip of `p` on port `out`, if events are on.
    fn slip_event(
        &mut self,
        now: i64,
        out: usize,
        p: &Pending,
        why: SlipReason,
        action: SlipOutcome,
    ) {
        if !self.events_on {
            return;
        }
        self.push_event(NodeEvent::Slip {
            flow: p.flow.map(|fi| self.flows[fi].id),
            port: self.ports[out].id,
            frame: p.frame,
            at: self.clock_id.at(now),
            why,
            action,
            probe: probe_tag(p.buf.as_slice()),
        });
    }

    /// A drop of the packet in `buf` (of flow index `flow`) at `port`, if events
    /// are on.
    fn drop_event(
        &mut self,
        now: i64,
        port: PortId,
        flow: Option<usize>,
        buf: &PacketBuf,
        why: DropReason,
    ) {
        if !self.events_on {
            return;
        }
        self.push_event(NodeEvent::Drop {
            flow: flow.map(|fi| self.flows[fi].id),
            port,
            at: self.clock_id.at(now),
            why,
            probe: probe_tag(buf.as_slice()),
        });
    }

    /// The one place events are queued: bounded, the excess only counted.
    fn push_event(&mut self, ev: NodeEvent) {
        if self.events.len() >= EVENT_CAPACITY {
            self.counters.events_lost += 1;
        } else {
            self.events.push_back(ev);
        }
    }

    // ----- frames --------------------------------------------------------------

    /// Brings the frame state to the frame of `now` (TDP mode).
    fn advance(&mut self, now: i64) {
        let f = self.clock.frame_of(now);
        let Some(c) = self.current else {
            self.current = Some(f);
            let mut scratch = std::mem::take(&mut self.scratch);
            for port in &mut self.ports {
                port.queues.skip_to(f, |_, p| scratch.push(p));
            }
            self.scratch = scratch;
            self.begin_frame();
            return;
        };
        if f <= c {
            return;
        }
        // After k + 2 frames every queue and hold has emptied; jump the rest.
        let horizon = i64::from(self.k) + 2;
        let stepped_to = if f.saturating_sub(c) > horizon {
            c.saturating_add(horizon)
        } else {
            f
        };
        let mut g = c;
        while g < stepped_to {
            g += 1;
            self.step_to(now, g);
        }
        if stepped_to < f {
            let skipped = (f.saturating_sub(stepped_to) - 1) as u64;
            for pi in 0..self.ports.len() {
                if self.ports[pi].padding_due {
                    self.counters.ports[pi].padding_missed += 1 + skipped;
                }
                let mut scratch = std::mem::take(&mut self.scratch);
                self.ports[pi].queues.skip_to(f, |_, p| scratch.push(p));
                for p in scratch.drain(..) {
                    self.slip(now, pi, p, SlipReason::MissedFrame);
                }
                self.scratch = scratch;
                for q in 0..self.ports[pi].hold.len() {
                    while let Some(p) = self.ports[pi].hold[q].pop_front() {
                        self.held -= 1;
                        self.slip(now, pi, p, SlipReason::MissedFrame);
                    }
                }
                self.ports[pi].early_bits = 0;
                while let Some(p) = self.ports[pi].early.pop_front() {
                    self.held -= 1;
                    self.slip(now, pi, p, SlipReason::MissedFrame);
                }
            }
            self.counters.frames += skipped;
            self.current = Some(f);
            self.begin_frame();
        }
    }

    /// One frame later than the current one (`now`: the instant of the call).
    fn step_to(&mut self, now: i64, g: i64) {
        self.current = Some(g);
        let ring = i64::from(self.k) + 1;
        for pi in 0..self.ports.len() {
            if self.ports[pi].padding_due {
                self.counters.ports[pi].padding_missed += 1;
            }
            let mut scratch = std::mem::take(&mut self.scratch);
            self.ports[pi].queues.advance_to(g, |_, p| scratch.push(p));
            for p in scratch.drain(..) {
                self.slip(now, pi, p, SlipReason::MissedFrame);
            }
            self.scratch = scratch;
            self.release_early(now, pi);
            // edge: the frame after this one is now within reach of the queues
            let next = g.saturating_add(1);
            let idx = next.rem_euclid(ring) as usize;
            if idx < self.ports[pi].hold.len() {
                while let Some(p) = self.ports[pi].hold[idx].pop_front() {
                    self.held -= 1;
                    if p.frame == next {
                        self.enqueue_reserved(now, pi, next, p);
                    } else {
                        self.slip(now, pi, p, SlipReason::MissedFrame);
                    }
                }
            }
        }
        self.begin_frame();
    }

    /// Per-port state at the start of the current frame.
    fn begin_frame(&mut self) {
        self.counters.frames += 1;
        self.sendable = true;
        for port in &mut self.ports {
            port.frame_bits = 0;
            port.padding_due = port.padding.is_some() && port.queues.pending_now() == 0;
        }
    }

    fn best_effort_fits(&self, pi: usize, ip_len: u32, now: i64, deadline: i64) -> bool {
        if !self.best_effort.pace {
            return true;
        }
        if now > deadline {
            return false;
        }
        let port = &self.ports[pi];
        let bits = port.link.packet_bits(ip_len.max(MIN_IP_LEN));
        if port.frame_bits + bits > port.capacity_bits {
            return false;
        }
        let start = now.max(port.link_free_at);
        start.saturating_add(tx_ns(&port.link, bits)) <= deadline
    }

    // ----- egress --------------------------------------------------------------

    fn transmit(
        &mut self,
        now: i64,
        pi: usize,
        mut p: Pending,
        kind: TxKind,
        frame: Option<i64>,
    ) -> Transmit {
        let dscp = match (kind, frame) {
            (TxKind::Reserved, Some(f)) => DscpAction::Set(self.clock.dscp(f)),
            _ if self.config.mode == Mode::Fifo => DscpAction::Keep,
            _ => DscpAction::Unmark,
        };
        let hop = HopRecord {
            node: self.config.id,
            kind: HopKind::Router,
            rx_kernel_ns: p.rx_kernel_ns,
            rx_app_ns: p.rx_app_ns,
            tx_app_ns: now,
            slipped: p.slipped,
        };
        match rewrite_egress(p.buf.as_mut_slice(), dscp, Some(&hop)) {
            HopOutcome::Recorded => self.counters.hops_recorded += 1,
            HopOutcome::NoRoom => self.counters.hops_no_room += 1,
            HopOutcome::NotProbe => {}
        }
        self.account(now, pi, p.ip_len, p.buf.len());
        let pc = &mut self.counters.ports[pi];
        match kind {
            TxKind::Reserved => pc.tx_reserved += 1,
            _ => pc.tx_best_effort += 1,
        }
        if kind != TxKind::Reserved {
            self.counters.best_effort_forwarded += 1;
        }
        if let Some(fi) = p.flow {
            if kind == TxKind::Reserved || self.config.mode == Mode::Fifo {
                self.counters.flows[fi].forwarded += 1;
            }
        }
        Transmit {
            port: self.ports[pi].id,
            flow: p.flow.map(|fi| self.flows[fi].id),
            frame: if kind == TxKind::Reserved {
                frame
            } else {
                None
            },
            kind,
            buf: std::mem::take(&mut p.buf),
        }
    }

    fn padding(&mut self, now: i64, pi: usize, frame: i64) -> Option<Transmit> {
        let template = self.ports[pi].padding?;
        let mut buf = self.pool.copy_of(&template);
        let dscp = self.clock.dscp(frame);
        let _ = rewrite_egress(buf.as_mut_slice(), DscpAction::Set(dscp), None);
        self.account(now, pi, (PADDING_FRAME_LEN - 14) as u32, buf.len());
        self.counters.ports[pi].tx_padding += 1;
        self.counters.padding_sent += 1;
        Some(Transmit {
            port: self.ports[pi].id,
            buf,
            flow: None,
            frame: Some(frame),
            kind: TxKind::Padding,
        })
    }

    /// Books a transmission against the frame and the link model.
    fn account(&mut self, now: i64, pi: usize, ip_len: u32, frame_len: usize) {
        let port = &mut self.ports[pi];
        let bits = port.link.packet_bits(ip_len.max(MIN_IP_LEN));
        port.frame_bits += bits;
        port.link_free_at = now
            .max(port.link_free_at)
            .saturating_add(tx_ns(&port.link, bits));
        let pc = &mut self.counters.ports[pi];
        pc.tx_packets += 1;
        pc.tx_bytes += frame_len as u64;
    }
}

/// Bytes a packet occupies on the link (what a frame queue's capacity counts).
fn wire_bytes(link: &Link, ip_len: u32) -> u64 {
    u64::from(ip_len.max(MIN_IP_LEN)) + u64::from(link.overhead)
}

/// Nanoseconds `bits` take at the link's rate, rounded up.
fn tx_ns(link: &Link, bits: u128) -> i64 {
    if link.rate_bps == 0 {
        return 0;
    }
    // 64-bit arithmetic while it cannot overflow (any packet), 128-bit beyond
    if let Ok(b) = u64::try_from(bits) {
        if let Some(x) = b.checked_mul(1_000_000_000) {
            return i64::try_from(x.div_ceil(link.rate_bps)).unwrap_or(i64::MAX);
        }
    }
    let ns = (bits * 1_000_000_000).div_ceil(u128::from(link.rate_bps));
    i64::try_from(ns).unwrap_or(i64::MAX)
}

fn parse(buf: &[u8], want_tuple: bool) -> Result<Parsed, InDrop> {
    let eth = EthernetFrame::new_checked(buf).map_err(|_| InDrop::Malformed)?;
    match eth.ethertype() {
        EtherType::IPV4 => {}
        EtherType::ARP => return Err(InDrop::Arp),
        _ => return Err(InDrop::NonIpv4),
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).map_err(|_| InDrop::Malformed)?;
    if !ip.verify_checksum() {
        return Err(InDrop::Malformed);
    }
    let whole = ip.frag_offset() == 0 && !ip.more_frags();
    let proto = ip.protocol();
    let udp_dst = if proto == PROTO_UDP && whole {
        UdpPacket::new_checked(ip.payload())
            .ok()
            .map(|u| u.dst_port())
    } else {
        None
    };
    Ok(Parsed {
        dst_mac: eth.dst_addr(),
        dst: ip.dst_addr(),
        dscp: ip.dscp(),
        ttl: ip.ttl(),
        ip_len: u32::from(ip.total_len()),
        proto,
        whole,
        tuple: if want_tuple && ip.frag_offset() == 0 {
            Some(FiveTuple::from_ipv4(&ip))
        } else {
            None
        },
        udp_dst,
    })
}

/// L2 addresses of the next hop, TTL − 1 (incremental checksum).
fn rewrite_forward(buf: &mut [u8], src: EthernetAddress, dst: EthernetAddress) -> Result<(), ()> {
    let mut eth = EthernetFrame::new_checked(buf).map_err(|_| ())?;
    eth.set_src_addr(src);
    eth.set_dst_addr(dst);
    let mut ip = Ipv4Packet::new_checked(eth.payload_mut()).map_err(|_| ())?;
    ip.decrement_ttl().map_err(|_| ())?;
    Ok(())
}

enum HopOutcome {
    Recorded,
    NoRoom,
    NotProbe,
}

/// The 5-tuple of an untagged IPv4 frame with a plain 20-byte header, read at
/// fixed places (for a prefetch; [`FiveTuple::from_ipv4`] is what classifies).
fn peek_tuple(frame: &[u8]) -> Option<FiveTuple> {
    let h = frame.get(12..38)?;
    if h[..2] != [0x08, 0x00] || h[2] != 0x45 {
        return None;
    }
    let proto = h[11];
    let first = u16::from_be_bytes([h[8], h[9]]) & 0x1fff == 0;
    let ports = (proto == PROTO_UDP || proto == PROTO_TCP) && first;
    let port = |at: usize| {
        if ports {
            u16::from_be_bytes([h[at], h[at + 1]])
        } else {
            0
        }
    };
    Some(FiveTuple {
        src: Ipv4Addr::new(h[14], h[15], h[16], h[17]),
        dst: Ipv4Addr::new(h[18], h[19], h[20], h[21]),
        proto,
        src_port: port(22),
        dst_port: port(24),
    })
}

/// DSCP for the way the packet leaves, and a hop record if it carries a probe.
fn rewrite_egress(buf: &mut [u8], dscp: DscpAction, hop: Option<&HopRecord>) -> HopOutcome {
    let Ok(mut eth) = EthernetFrame::new_checked(buf) else {
        return HopOutcome::NotProbe;
    };
    let Ok(mut ip) = Ipv4Packet::new_checked(eth.payload_mut()) else {
        return HopOutcome::NotProbe;
    };
    let now = ip.dscp();
    let want = match dscp {
        DscpAction::Keep => now,
        DscpAction::Set(d) => d,
        DscpAction::Unmark => match classify(now) {
            Mark::Tdp { .. } => 0,
            Mark::BestEffort => now,
        },
    };
    if want != now {
        ip.set_dscp_incremental(want);
    }
    let Some(hop) = hop else {
        return HopOutcome::NotProbe;
    };
    if ip.protocol() != PROTO_UDP || ip.frag_offset() != 0 || ip.more_frags() {
        return HopOutcome::NotProbe;
    }
    let Ok(mut udp) = UdpPacket::new_checked(ip.payload_mut()) else {
        return HopOutcome::NotProbe;
    };
    if !udp.payload().starts_with(&MAGIC) {
        return HopOutcome::NotProbe;
    }
    let change = {
        let Ok(mut probe) = ProbePacket::new_checked(udp.payload_mut()) else {
            return HopOutcome::NotProbe;
        };
        match probe.push_hop_tracked_after_check(hop) {
            Ok(change) => change,
            Err(_) => return HopOutcome::NoRoom,
        }
    };
    // the UDP payload starts at an even offset of the datagram, so the probe's
    // even offsets are the datagram's
    udp.adjust_checksum(change);
    HopOutcome::Recorded
}

/// The probe a frame carries (flow id and sequence number), if it is one. Only
/// called for events, which are rare.
fn probe_tag(buf: &[u8]) -> Option<ProbeTag> {
    let eth = EthernetFrame::new_checked(buf).ok()?;
    if eth.ethertype() != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != PROTO_UDP || ip.frag_offset() != 0 || ip.more_frags() {
        return None;
    }
    let udp = UdpPacket::new_checked(ip.payload()).ok()?;
    if !udp.payload().starts_with(&MAGIC) {
        return None;
    }
    let probe = ProbePacket::new_checked(udp.payload()).ok()?;
    Some(ProbeTag {
        flow: probe.flow_id(),
        seq: probe.seq(),
    })
}

/// A padding frame with DSCP 0 and valid checksums: Ethernet to the neighbour,
/// IPv4 TTL 1 (it is for the neighbour itself), UDP 9 → 9, no payload.
fn padding_template(
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    src: Ipv4Addr,
    dst: Ipv4Addr,
) -> [u8; PADDING_FRAME_LEN] {
    let mut f = [0u8; PADDING_FRAME_LEN];
    f[0..6].copy_from_slice(&dst_mac.0);
    f[6..12].copy_from_slice(&src_mac.0);
    f[12..14].copy_from_slice(&EtherType::IPV4.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&28u16.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 1;
    ip[9] = PROTO_UDP;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let c = !checksum::fold(checksum::ones_complement_sum(ip, 0));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&DISCARD_PORT.to_be_bytes());
    udp[2..4].copy_from_slice(&DISCARD_PORT.to_be_bytes());
    udp[4..6].copy_from_slice(&8u16.to_be_bytes());
    let mut sum = checksum::ones_complement_sum(&src.octets(), 0);
    sum = checksum::ones_complement_sum(&dst.octets(), sum);
    sum = checksum::ones_complement_sum(&[0, PROTO_UDP, 0, 8], sum);
    sum = checksum::ones_complement_sum(udp, sum);
    let mut c = !checksum::fold(sum);
    if c == 0 {
        c = 0xffff;
    }
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f
}

// ----- construction and validation --------------------------------------------

fn build(config: NodeConfig) -> Result<Node, NodeConfigError> {
    let fc = &config.frame;
    if fc.k == 0 {
        return Err(cfg_err("frame.k", "must be at least 1"));
    }
    crate::limits::k(u64::from(fc.k)).map_err(|m| cfg_err("frame.k", m))?;
    if fc.tf.is_positive() {
        crate::limits::tf(fc.tf).map_err(|m| cfg_err("frame.tf", m))?;
    }
    let mut clock = FrameClock::new(fc.tf, fc.k)
        .map_err(|e| cfg_err("frame.tf", e.to_string()))?
        .with_epoch(fc.epoch_ns)
        .with_offset(fc.offset);
    clock = clock
        .with_guard(fc.guard)
        .map_err(|e| cfg_err("frame.guard", e.to_string()))?;
    let k = fc.k;
    let router = matches!(config.role, Role::Edge | Role::Core);
    let tdp_router = router && config.mode == Mode::Tdp;
    if tdp_router && k < 2 {
        return Err(cfg_err(
            "frame.k",
            "a TDP router needs k >= 2 (forwarding delays lie in [1, k))",
        ));
    }
    if config.ports.is_empty() {
        return Err(cfg_err("ports", "at least one port is needed"));
    }
    if config.best_effort.queue == 0 {
        return Err(cfg_err("best_effort.queue", "must be at least 1"));
    }
    if config.best_effort.queue > crate::limits::MAX_BE_QUEUE {
        return Err(cfg_err(
            "best_effort.queue",
            format!(
                "{} packets is above the limit of {}",
                config.best_effort.queue,
                crate::limits::MAX_BE_QUEUE
            ),
        ));
    }
    let d_ok = |d: u32| d >= 1 && d < k;

    // ports
    for (i, p) in config.ports.iter().enumerate() {
        let field = |f: &str| format!("ports[{i}].{f}");
        if !crate::names::valid_ifname(&p.ifname) {
            return Err(cfg_err(
                field("ifname"),
                format!(
                    "\"{}\" is not an interface name (1 to {} bytes, no '/', ':' or spaces)",
                    p.ifname.escape_debug(),
                    crate::names::IFNAME_MAX
                ),
            ));
        }
        for (j, q) in config.ports.iter().enumerate().take(i) {
            if q.id == p.id {
                return Err(cfg_err(field("id"), format!("{} is also ports[{j}]", p.id)));
            }
            if q.addr == p.addr {
                return Err(cfg_err(
                    field("addr"),
                    format!("{} is also the address of ports[{j}]", p.addr),
                ));
            }
            if q.ifname == p.ifname {
                return Err(cfg_err(
                    field("ifname"),
                    format!("{:?} is also the interface of ports[{j}]", p.ifname),
                ));
            }
        }
        if p.prefix_len > 32 {
            return Err(cfg_err(
                field("prefix_len"),
                format!("{} is longer than 32", p.prefix_len),
            ));
        }
        if p.rate_bps == 0 {
            return Err(cfg_err(field("rate_bps"), "must be positive"));
        }
        crate::limits::bit_rate(p.rate_bps, &format!("{} bit/s", p.rate_bps))
            .map_err(|m| cfg_err(field("rate_bps"), m))?;
        if let Some(d) = p.d {
            if !d_ok(d) {
                return Err(cfg_err(
                    field("d"),
                    format!("forwarding delay {d} is outside [1, k = {k})"),
                ));
            }
        }
    }
    let port_index = |id: PortId| config.ports.iter().position(|p| p.id == id);

    // neighbours
    let mut neigh = NeighbourTable::new();
    let mut known: HashMap<Ipv4Addr, (EthernetAddress, String)> = HashMap::new();
    let mut add_neigh =
        |ip: Ipv4Addr, mac: EthernetAddress, field: String| -> Result<(), NodeConfigError> {
            if let Some((m, other)) = known.get(&ip) {
                if *m != mac {
                    return Err(cfg_err(
                        field,
                        format!("{ip} is {mac} here but {m} in {other}"),
                    ));
                }
                return Ok(());
            }
            known.insert(ip, (mac, field));
            neigh.add(ip, mac);
            Ok(())
        };
    for (i, p) in config.ports.iter().enumerate() {
        if let (Some(ip), Some(mac)) = (p.neighbour_addr, p.neighbour_mac) {
            add_neigh(ip, mac, format!("ports[{i}].neighbour_mac"))?;
        }
    }
    for (i, n) in config.neighbours.iter().enumerate() {
        add_neigh(n.addr, n.mac, format!("neighbours[{i}].mac"))?;
    }

    // routes: configured ones, then the ports' connected prefixes
    let mut routes = RouteTable::new();
    for (i, r) in config.routes.iter().enumerate() {
        if port_index(r.port).is_none() {
            return Err(cfg_err(
                format!("routes[{i}].port"),
                format!("unknown {}", r.port),
            ));
        }
        if let Some(nh) = r.next_hop {
            if neigh.lookup(nh).is_none() {
                return Err(cfg_err(
                    format!("routes[{i}].next_hop"),
                    format!("no neighbour entry (MAC address) for {nh}"),
                ));
            }
        }
        routes
            .add(*r)
            .map_err(|e| cfg_err(format!("routes[{i}].prefix"), e.to_string()))?;
    }
    for p in &config.ports {
        let prefix = Prefix::truncating(p.addr, p.prefix_len);
        if routes.get(&prefix).is_none() {
            // an explicit route for the same prefix wins
            let _ = routes.add(Route {
                prefix,
                port: p.id,
                next_hop: None,
                ttl: None,
            });
        }
    }

    // flows
    let mut schedules: Vec<PortSchedule> = config
        .ports
        .iter()
        .map(|_| PortSchedule::new(k))
        .collect::<Result<_, _>>()
        .map_err(|e| cfg_err("frame.k", e.to_string()))?;
    let links: Vec<Link> = config
        .ports
        .iter()
        .map(|p| Link::ethernet(p.rate_bps))
        .collect();
    let mut flows = Vec::new();
    let mut flow_by_id = FxHashMap::default();
    let mut rules = Vec::new();
    for (i, f) in config.flows.iter().enumerate() {
        let field = |x: &str| format!("flows[{i}].{x}");
        if flow_by_id.insert(f.id, i).is_some() {
            return Err(cfg_err(
                field("id"),
                format!("flow {} is configured twice", f.id),
            ));
        }
        let Some(out) = port_index(f.out_port) else {
            return Err(cfg_err(
                field("out_port"),
                format!("unknown {}", f.out_port),
            ));
        };
        if let Some(d) = f.d {
            if !d_ok(d) {
                return Err(cfg_err(
                    field("d"),
                    format!("forwarding delay {d} is outside [1, k = {k})"),
                ));
            }
        }
        let capacity = links[out].frame_capacity_bits(fc.tf, fc.guard).unwrap_or(0);
        let mut per_slot: BTreeMap<u32, u32> = BTreeMap::new();
        let mut max_size = 0;
        for (j, row) in f.rows.iter().enumerate() {
            let rf = || format!("flows[{i}].rows[{j}]");
            if row.packets == 0 {
                return Err(cfg_err(format!("{}.packets", rf()), "must be at least 1"));
            }
            if row.size < 28 || row.size > 65_535 {
                return Err(cfg_err(
                    format!("{}.size", rf()),
                    format!(
                        "{} bytes is not an IPv4/UDP packet size (28 to 65535)",
                        row.size
                    ),
                ));
            }
            let entry = Entry {
                flow: f.id,
                packets: row.packets,
                size: row.size,
            };
            schedules[out]
                .add(row.slot, entry)
                .map_err(|e| cfg_err(format!("{}.slot", rf()), e.to_string()))?;
            let needed_bits = schedules[out].row_bits(row.slot, &links[out]);
            if needed_bits > capacity {
                let e = ScheduleError::RowOverflow {
                    row: row.slot,
                    needed_bits,
                    capacity_bits: capacity,
                    tf: fc.tf,
                    guard: fc.guard,
                    rate_bps: links[out].rate_bps,
                };
                return Err(cfg_err(rf(), format!("row {} overflows: {e}", row.slot)));
            }
            *per_slot.entry(row.slot).or_default() += row.packets;
            max_size = max_size.max(row.size);
        }
        if let Some(rule) = &f.rule {
            let rule = Rule {
                src: rule.src,
                dst: rule.dst,
                proto: rule.proto,
                src_ports: rule.src_ports,
                dst_ports: rule.dst_ports,
                flow: f.id,
            };
            rule.validate()
                .map_err(|e| cfg_err(field("rule"), e.to_string()))?;
            rules.push(rule);
        }
        flows.push(FlowState {
            id: f.id,
            out,
            d: f.d,
            police: f.police,
            max_size,
            slots: per_slot.into_iter().collect(),
            // frame bookings, made on the first packet an edge assigns a frame
            used: Vec::new(),
        });
    }
    for (i, s) in schedules.iter().enumerate() {
        s.validate(fc.tf, fc.guard, &links[i])
            .map_err(|e| cfg_err(format!("ports[{i}]"), e.to_string()))?;
    }

    // ports' run-time state
    let flow_d_max = config.flows.iter().filter_map(|f| f.d).max().unwrap_or(0);
    let port_d_max = config.ports.iter().filter_map(|p| p.d).max().unwrap_or(0);
    let d_max = flow_d_max.max(port_d_max).max(1);
    let queue_k = k.max(2);
    let queue_d = d_max.min(queue_k - 1);
    let edge = tdp_router && config.role == Role::Edge;
    let mut ports = Vec::with_capacity(config.ports.len());
    for (i, p) in config.ports.iter().enumerate() {
        let link = links[i];
        let capacity_bits = link.frame_capacity_bits(fc.tf, fc.guard).unwrap_or(0);
        let queues = FrameQueues::new(queue_k, queue_d, (capacity_bits / 8) as u64, 0)
            .ok_or_else(|| cfg_err(format!("ports[{i}].d"), "no valid frame queues"))?;
        let wants_padding = tdp_router && p.padding.unwrap_or(config.padding);
        let padding = if wants_padding {
            let Some(addr) = p.neighbour_addr else {
                return Err(cfg_err(
                    format!("ports[{i}].neighbour_addr"),
                    "padding needs the neighbour's address (or set padding = false on this port)",
                ));
            };
            let Some(mac) = p.neighbour_mac.or_else(|| neigh.lookup(addr)) else {
                return Err(cfg_err(
                    format!("ports[{i}].neighbour_mac"),
                    format!("padding needs the MAC address of {addr}"),
                ));
            };
            Some(padding_template(p.mac, mac, p.addr, addr))
        } else {
            None
        };
        // The tracker's window. With padding every upstream frame carries a mark,
        // so a repeated parity means "same frame, processed late" and the window
        // reaches back d frames (a packet that late is a slip, and is seen as one).
        // Without padding a repeated parity usually means the upstream skipped a
        // frame: a window of d - 1 frames makes the tracker fall back to the local
        // clock instead of trusting a stale counter.
        let d_in = p.d.unwrap_or(0).max(flow_d_max);
        let max_lag = if config.padding {
            d_in
        } else {
            d_in.saturating_sub(1)
        }
        .max(1);
        ports.push(PortState {
            id: p.id,
            mac: p.mac,
            addr: p.addr,
            link,
            d: p.d,
            capacity_bits,
            tracker: InputTracker::new(k, max_lag, fc.lead),
            queues,
            hold: if edge {
                (0..=k).map(|_| VecDeque::new()).collect()
            } else {
                Vec::new()
            },
            early: VecDeque::new(),
            early_bits: 0,
            be: VecDeque::new(),
            padding,
            padding_due: false,
            frame_bits: 0,
            link_free_at: i64::MIN,
        });
    }

    let counters = NodeCounters {
        ports: config
            .ports
            .iter()
            .map(|p| PortCounters::new(p.id))
            .collect(),
        flows: config
            .flows
            .iter()
            .map(|f| FlowCounters {
                flow: f.id,
                ..FlowCounters::default()
            })
            .collect(),
        ..NodeCounters::default()
    };
    let has_rules = !rules.is_empty();
    let flow_of_rule = rules
        .iter()
        .map(|r| flow_by_id.get(&r.flow).copied())
        .collect();
    Ok(Node {
        clock,
        clock_id: LearnedClock::default(),
        k,
        addrs: ports.iter().map(|p| p.addr).collect(),
        ports,
        flows,
        flow_by_id,
        flow_of_rule,
        routes,
        neigh,
        nexthop: NextHopCache::default(),
        classifier: Classifier::new(rules),
        has_rules,
        best_effort: config.best_effort.clone(),
        current: None,
        held: 0,
        pool: Pool::new(POOL_KEEP),
        scratch: Vec::new(),
        counters,
        events_on: false,
        events: VecDeque::new(),
        sendable: true,
        config,
    })
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
