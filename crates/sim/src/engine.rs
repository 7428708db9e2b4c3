//! The discrete-event loop. Two kinds of event: a frame arrives at a node's port
//! (after its link serialised and propagated it), and a node wakes up (for a timer
//! its state machine asked for, or for packets that arrived). A node acts at its
//! wake-up: it hands every packet that arrived to its state machine, lets it move
//! its frame state to now, and sends what it hands out. Its host model decides how
//! late each wake-up is; each packet handled takes the node's processing time. A
//! node that wants no timer and has no packet costs nothing.
//!
//! A quiet router (ideal host, no processing time, a CPU of its own) takes a
//! packet the instant it arrives, and its wake-up is left out when all it would do
//! is find nothing to send (a TDP router that queues a packet for a later frame);
//! a timer asked for twice is queued once. Both keep every event in the place it
//! had when each wake-up was queued, so a run is the same, with about half the
//! events of a TDP network ([`Engine::ingest`]).
//!
//! Every router runs with its per-packet events on ([`Node::set_events`]); the
//! engine drains them after each call into the node and keeps a
//! [`NodeEventSummary`] per router (slips and drops by reason), read with
//! [`Engine::node_events`]. Events come only from slips and drops, so a run
//! without them pays one empty-queue check per packet.

use std::collections::{BTreeMap, VecDeque};

use lockstep_core::net::PortId;
use lockstep_core::tdp::{
    Delivery, DropReason, Mode, Node, NodeConfig, NodeEvent, PacketBuf, RxMeta, SlipOutcome,
    SlipReason,
};
use lockstep_core::{ClockId, Instant};
use serde::Serialize;

use crate::host::Host;
use crate::hostmodel::HostModel;
use crate::link::LinkDir;
use crate::queue::{EventQueue, Place};
use crate::rng::Rng;
use crate::spare::Spare;

/// The clock of every instant the simulator hands a state machine. Simulated time is
/// one timeline of `i64` nanoseconds; each node reads it through its [`NodeClock`]
/// (offset, drift) and the reading is an instant of this one clock, TAI, the clock
/// the live nodes run on by default.
pub const SIM_CLOCK: ClockId = ClockId::Tai;

/// A node's clock against true (simulated) time: `local = t + offset + t·drift`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeClock {
    pub offset_ns: i64,
    /// Parts per billion (1000 = 1 ppm fast).
    pub drift_ppb: i64,
}

impl NodeClock {
    pub fn local(&self, t: i64) -> i64 {
        if self.drift_ppb == 0 {
            return t.saturating_add(self.offset_ns);
        }
        // in 64 bits while nothing overflows (the same truncating division, so the
        // same result as the 128-bit arithmetic below, without its division call)
        let fast = t
            .checked_mul(self.drift_ppb)
            .and_then(|p| t.checked_add(p / 1_000_000_000))
            .and_then(|v| v.checked_add(self.offset_ns));
        if let Some(v) = fast {
            return v;
        }
        let d = i128::from(t) * i128::from(self.drift_ppb) / 1_000_000_000;
        (i128::from(t) + d + i128::from(self.offset_ns)).clamp(i64::MIN as i128, i64::MAX as i128)
            as i64
    }

    /// What this clock reads at true time `t`, as an instant of [`SIM_CLOCK`].
    pub fn instant(&self, t: i64) -> Instant {
        Instant::new(SIM_CLOCK, self.local(t))
    }

    /// The true time at which this clock reads `local` (rounded up).
    pub fn true_of(&self, local: i64) -> i64 {
        let x = i128::from(local) - i128::from(self.offset_ns);
        if self.drift_ppb == 0 {
            return x.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        }
        let den = 1_000_000_000i128 + i128::from(self.drift_ppb);
        let t = scaled_floor(x, den);
        let t = if self.local_i128(t) < i128::from(local) {
            t + 1
        } else {
            t
        };
        t.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    fn local_i128(&self, t: i128) -> i128 {
        t + t * i128::from(self.drift_ppb) / 1_000_000_000 + i128::from(self.offset_ns)
    }
}

/// `floor(x · 10⁹ / den)` for `den > 0`. With `x = q·den + r` (`0 ≤ r < den`) it
/// is `q·10⁹ + floor(r·10⁹ / den)`: in 64 bits when `x` and `den` fit (no 128-bit
/// division call), otherwise in 128.
fn scaled_floor(x: i128, den: i128) -> i128 {
    const G: i64 = 1_000_000_000;
    if let (Ok(x64), Ok(d64)) = (i64::try_from(x), i64::try_from(den)) {
        if d64 > 0 && d64 <= G * 2 {
            let (q, r) = (x64.div_euclid(d64), x64.rem_euclid(d64));
            // r < den ≤ 2·10⁹, so r·10⁹ < 2^63; q·10⁹ and the sum are checked
            if let Some(v) = q.checked_mul(G).and_then(|a| a.checked_add(r * G / d64)) {
                return i128::from(v);
            }
        }
    }
    (x * 1_000_000_000).div_euclid(den)
}

/// A packet waiting for its node: the port it came in on, its bytes, when it arrived.
type Inbound = (u16, PacketBuf, i64);

/// What a simulated node is.
#[derive(Debug)]
pub enum Kind {
    Router(Box<Node>),
    Host(Box<Host>),
}

/// One output port: its link direction and where it leads.
#[derive(Clone, Debug)]
pub struct Port {
    pub link: LinkDir,
    /// The node at the far end: its index in the network, or in its part when the
    /// network runs in parts ([`crate::parts`]).
    pub to: u32,
    pub to_port: u16,
    /// The part the far end runs in (0 when the network runs whole).
    pub to_part: u32,
}

impl Port {
    /// `buf` arriving over this port's link at the far end at `at`.
    fn arrival(&self, at: i64, place: Place, buf: PacketBuf) -> Outgoing {
        Outgoing {
            part: self.to_part,
            at,
            place,
            ev: Ev::Arrive(self.to, self.to_port, buf),
        }
    }
}

/// A node of the simulated network.
#[derive(Debug)]
pub struct SimNode {
    pub name: String,
    pub kind: Kind,
    pub ports: Vec<Port>,
    pub clock: NodeClock,
    pub host: HostModel,
    /// What each packet the node receives, and each it sends, costs it.
    pub processing_ns: i64,
    rng: Rng,
    inbox: VecDeque<Inbound>,
    wake_at: Option<i64>,
    busy_until: i64,
    /// Wake-ups for a timer, and how late each was (true time).
    pub timer_wakeups: u64,
    pub late_sum_ns: i64,
    /// The slips and drops the router reported (empty for hosts).
    pub events: NodeEventSummary,
    /// A router's configuration, to start it afresh after a fault killed it.
    pub fresh: Option<NodeConfig>,
    /// Killed by a fault and not started again yet: it takes and sends nothing.
    pub down: bool,
    /// How many of its ports' links a fault holds down.
    links_down: u32,
    /// The timer wake-up last queued for this router and not taken out yet: the
    /// same wake-up asked for again is not queued twice.
    timer_queued: Option<i64>,
    /// A wake-up the engine did not queue, with the place in the order of events
    /// it would have had (see [`Engine::ingest`]).
    held: Option<(i64, Place)>,
    /// How many events this node has scheduled: the tag of each event's place.
    scheduled: u64,
    /// Its index in the whole network (the same when it runs in parts).
    pub(crate) id: u32,
}

impl SimNode {
    pub fn new(name: String, kind: Kind, ports: Vec<Port>, rng: Rng) -> SimNode {
        SimNode {
            name,
            kind,
            ports,
            clock: NodeClock::default(),
            host: HostModel::Ideal,
            processing_ns: 0,
            rng,
            inbox: VecDeque::new(),
            wake_at: None,
            busy_until: i64::MIN,
            timer_wakeups: 0,
            late_sum_ns: 0,
            events: NodeEventSummary::default(),
            fresh: None,
            down: false,
            links_down: 0,
            timer_queued: None,
            held: None,
            scheduled: 0,
            id: 0,
        }
    }

    /// A fault takes the link of `port` down (`true`) or brings it back.
    fn set_link_down(&mut self, port: u16, down: bool) {
        let Some(p) = self.ports.get_mut(usize::from(port)) else {
            return;
        };
        if p.link.down != down {
            p.link.down = down;
            self.links_down = if down {
                self.links_down + 1
            } else {
                self.links_down.saturating_sub(1)
            };
        }
    }

    fn poll_timeout(&self) -> Option<i64> {
        match &self.kind {
            Kind::Router(n) => n.poll_timeout().map(|t| t.ns),
            Kind::Host(h) => h.poll_timeout(),
        }
    }
}

/// What one router's [`NodeEvent`]s add up to: its frame slips and drops by reason.
/// Serialized with snake_case reasons (`{"slips": 3, "slip_reasons": {"late": 3},
/// ...}`), in a fixed order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NodeEventSummary {
    /// Reserved packets that missed their frame.
    pub slips: u64,
    pub slip_reasons: BTreeMap<SlipReason, u64>,
    /// What became of the slipped packets (sent late, best effort, dropped).
    pub slip_outcomes: BTreeMap<SlipOutcome, u64>,
    /// Packets dropped for other reasons than a slip.
    pub drops: u64,
    pub drop_reasons: BTreeMap<DropReason, u64>,
}

impl NodeEventSummary {
    pub fn add(&mut self, ev: &NodeEvent) {
        match *ev {
            NodeEvent::Slip { why, action, .. } => {
                self.slips += 1;
                *self.slip_reasons.entry(why).or_default() += 1;
                *self.slip_outcomes.entry(action).or_default() += 1;
            }
            NodeEvent::Drop { why, .. } => {
                self.drops += 1;
                *self.drop_reasons.entry(why).or_default() += 1;
            }
        }
    }

    /// No slip and no drop.
    pub fn is_empty(&self) -> bool {
        self.slips == 0 && self.drops == 0
    }
}

/// Folds the events a router queued into its summary.
fn drain_events(node: &mut Node, into: &mut NodeEventSummary) {
    while let Some(ev) = node.poll_event() {
        into.add(&ev);
    }
}

#[derive(Debug)]
pub(crate) enum Ev {
    Wake(u32),
    Arrive(u32, u16, PacketBuf),
    /// A fault (index into the engine's list) begins (`true`) or ends.
    Fault(u32, bool),
}

impl Ev {
    /// The node the event is for.
    fn node(&self) -> Option<usize> {
        match *self {
            Ev::Wake(i) | Ev::Arrive(i, _, _) => Some(i as usize),
            Ev::Fault(..) => None,
        }
    }
}

/// Bits of an event tag that count the events its node scheduled before it; the
/// rest name the node (so up to 2^24 - 1 nodes, and 2^40 events per node).
const TAG_COUNT_BITS: u32 = 40;
/// The scheduler named in the tags of fault events: after every node.
const FAULT_SCHEDULER: u64 = (1 << (64 - TAG_COUNT_BITS)) - 1;

/// The place of the next event node `i` schedules at `now`: its index, then how
/// many it scheduled before (`scheduled`, counted up).
fn schedule_place(i: usize, scheduled: &mut u64, now: i64) -> Place {
    let count = *scheduled & ((1 << TAG_COUNT_BITS) - 1);
    *scheduled += 1;
    let node = (i as u64).min(FAULT_SCHEDULER - 1);
    Place {
        created: now,
        tag: (node << TAG_COUNT_BITS) | count,
    }
}

/// How many events ahead the engine starts loading a node's memory (see
/// [`Engine::prefetch_ahead`]): four steps, one pointer level each.
const PREFETCH_DISTANCE: usize = 4;
/// From how many nodes on the engine prefetches: a small network stays in the
/// cache, where the hints only cost instructions (mesh4's 14 nodes: 3–8 % slower
/// with them; a 961-router grid, about 100 MB of state: about 10 % faster).
const PREFETCH_FROM_NODES: usize = 1024;

/// A fault the engine injects, on the simulated network's nodes and ports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimFault {
    /// Both directions of a link: (node, port) at each end.
    LinkDown {
        ends: [(u32, u16); 2],
        at: i64,
        until: i64,
    },
    /// A router killed at `at` (all it holds lost) and started afresh at `until`.
    Restart { node: u32, at: i64, until: i64 },
}

/// Counts of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Events handled.
    pub events: u64,
    /// Frames that crossed a link (padding included).
    pub packet_hops: u64,
    /// Frames a full port queue refused.
    pub link_drops: u64,
    /// Frames lost to an injected fault: sent into or arriving over a link that is
    /// down, or to a router that is down (what a killed router held in its queues
    /// is gone with it and not counted here).
    pub fault_drops: u64,
    pub wakeups: u64,
    /// Most events waiting at once.
    pub peak_events: u64,
}

impl EngineStats {
    /// Adds the counts of another part of the network (the most events waiting:
    /// the sum of each part's most).
    pub fn add(&mut self, o: &EngineStats) {
        self.events += o.events;
        self.packet_hops += o.packet_hops;
        self.link_drops += o.link_drops;
        self.fault_drops += o.fault_drops;
        self.wakeups += o.wakeups;
        self.peak_events += o.peak_events;
    }
}

/// The CPUs the nodes share when they run on one host (as the lab's do): when each
/// is free again.
#[derive(Clone, Debug, Default)]
struct Cpus {
    free_at: Vec<i64>,
}

impl Cpus {
    /// When the first CPU is free; `None` with no limit.
    fn earliest(&self) -> Option<i64> {
        self.free_at.iter().copied().min()
    }

    /// A node ran from `start` to `end` on the first CPU free at `start`.
    fn occupy(&mut self, start: i64, end: i64) {
        if end <= start {
            return;
        }
        if let Some(c) = self.free_at.iter_mut().filter(|f| **f <= start).min() {
            *c = end;
        }
    }
}

/// The network and its clock.
pub struct Engine {
    pub nodes: Vec<SimNode>,
    queue: EventQueue<Ev>,
    stats: EngineStats,
    out: Vec<PacketBuf>,
    spare: Spare,
    now: i64,
    cpus: Cpus,
    faults: Vec<SimFault>,
    /// Whether the network is large enough for [`Engine::prefetch_ahead`].
    prefetch: bool,
    /// Whether quiet routers take packets without a queued wake-up
    /// ([`Engine::ingest`]); off, every wake-up is queued.
    ingest: bool,
    /// Which part of the network this is (0 when it runs whole).
    pub(crate) part: u32,
    /// Arrivals scheduled for nodes of other parts, to be handed over.
    pub(crate) outbox: Vec<Outgoing>,
}

/// Queues an arrival (in `queue` when it is for part `me`, else in `outbox`).
fn route(queue: &mut EventQueue<Ev>, outbox: &mut Vec<Outgoing>, me: u32, o: Outgoing) {
    if o.part == me {
        queue.push(o.at, o.place, o.ev);
    } else {
        outbox.push(o);
    }
}

/// An arrival for a node of another part.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub part: u32,
    pub at: i64,
    pub place: Place,
    pub ev: Ev,
}

impl Engine {
    /// Starts every node at `start` (true time).
    pub fn new(mut nodes: Vec<SimNode>, start: i64) -> Engine {
        for (i, n) in nodes.iter_mut().enumerate() {
            n.id = i as u32;
        }
        Engine::part(nodes, start, 0)
    }

    /// Starts `nodes`, part `part` of a network cut into parts (each node knows
    /// its index in the whole; its ports say in which part their far ends run).
    pub(crate) fn part(mut nodes: Vec<SimNode>, start: i64, part: u32) -> Engine {
        let mut queue = EventQueue::default();
        for (i, n) in nodes.iter_mut().enumerate() {
            match &mut n.kind {
                Kind::Host(h) => {
                    if let Some((s, _)) = h.sender.as_mut() {
                        s.start(n.clock.instant(start));
                    }
                }
                Kind::Router(r) => r.set_events(true),
            }
            n.wake_at = Some(start);
            let place = schedule_place(n.id as usize, &mut n.scheduled, start);
            queue.push(start, place, Ev::Wake(i as u32));
        }
        let prefetch = nodes.len() >= PREFETCH_FROM_NODES;
        Engine {
            nodes,
            queue,
            stats: EngineStats::default(),
            out: Vec::new(),
            spare: Spare::default(),
            now: start,
            cpus: Cpus::default(),
            faults: Vec::new(),
            prefetch,
            ingest: true,
            part,
            outbox: Vec::new(),
        }
    }

    /// Injects `faults` (true times): each begins and ends as an event of the run.
    pub fn inject(&mut self, faults: Vec<SimFault>) {
        for (i, f) in faults.iter().enumerate() {
            let (at, until) = match *f {
                SimFault::LinkDown { at, until, .. } | SimFault::Restart { at, until, .. } => {
                    (at, until)
                }
            };
            // (the engine's own tag, after every node's: the beginning and the end
            // of each fault in the order given)
            let k = 2 * (self.faults.len() + i) as u64;
            let place = |k: u64| Place {
                created: self.now,
                tag: (FAULT_SCHEDULER << TAG_COUNT_BITS) | k,
            };
            let (begin, end) = (place(k), place(k + 1));
            self.queue.push(at, begin, Ev::Fault(i as u32, true));
            self.queue.push(until, end, Ev::Fault(i as u32, false));
        }
        self.faults.extend(faults);
    }

    /// The nodes share `n` CPUs: a node that wakes while every one is busy with
    /// another node's packets waits for the first to be free (its processing time is
    /// what keeps a CPU busy). Without it each node has a CPU of its own.
    pub fn share_cpus(mut self, n: Option<u32>) -> Engine {
        self.cpus.free_at = vec![i64::MIN; n.unwrap_or(0) as usize];
        self
    }

    /// Queues every wake-up a packet or a timer calls for, as the engine did
    /// before its quiet routers took packets at once ([`Engine::ingest`]): the same
    /// run with more events, for the tests that check exactly that.
    pub fn queue_every_wakeup(mut self) -> Engine {
        self.ingest = false;
        self
    }

    /// Ends the traffic: senders and load sources send nothing more (what is in
    /// flight still arrives).
    pub fn stop_sources(&mut self) {
        for n in &mut self.nodes {
            if let Kind::Host(h) = &mut n.kind {
                h.stopped = true;
            }
        }
    }

    pub fn now(&self) -> i64 {
        self.now
    }

    pub fn stats(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.peak_events = self.queue.peak() as u64;
        s
    }

    /// The slips and drops of each router so far, in the nodes' order.
    pub fn node_events(&self) -> impl Iterator<Item = (&str, &NodeEventSummary)> {
        self.nodes.iter().filter_map(|n| match n.kind {
            Kind::Router(_) => Some((n.name.as_str(), &n.events)),
            Kind::Host(_) => None,
        })
    }

    /// Runs every event due up to `until`; each probe a receiver takes is handed to
    /// `on_delivery` with the receiver's index.
    pub fn run_until(&mut self, until: i64, on_delivery: &mut impl FnMut(usize, &Delivery)) {
        while let Some((t, ev)) = self.queue.pop_until(until) {
            self.now = t;
            self.stats.events += 1;
            self.prefetch_ahead();
            match ev {
                Ev::Wake(i) => self.wake(i as usize, t, on_delivery),
                Ev::Arrive(i, port, buf) => self.arrive(i as usize, port, buf, t, on_delivery),
                Ev::Fault(f, begins) => self.fault(f as usize, begins, t),
            }
        }
        self.now = self.now.max(until);
    }

    /// The network of `nodes` as a run left it, with nothing more to do: what
    /// [`crate::parts::Parts::join`] gives back to read.
    pub(crate) fn finished(nodes: Vec<SimNode>, now: i64, stats: EngineStats) -> Engine {
        // (an engine of no nodes has nothing to start)
        let mut e = Engine::part(Vec::new(), now, 0);
        e.nodes = nodes;
        e.stats = stats;
        e
    }

    /// When the earliest queued event is due.
    pub(crate) fn next_event_at(&self) -> Option<i64> {
        self.queue.next_at()
    }

    /// Queues an arrival handed over by another part.
    pub(crate) fn take(&mut self, o: Outgoing) {
        self.queue.push(o.at, o.place, o.ev);
    }

    /// The place of the next event node `i` schedules now.
    fn place(&mut self, i: usize) -> Place {
        let n = &mut self.nodes[i];
        schedule_place(n.id as usize, &mut n.scheduled, self.now)
    }

    /// Node `i` schedules `ev` at `at`.
    fn push(&mut self, i: usize, at: i64, ev: Ev) {
        let place = self.place(i);
        self.queue.push(at, place, ev);
    }

    /// Overlaps the memory latency of the next events with this one's work: the
    /// nodes and packets a few events ahead are asked for (a hint that changes no
    /// result), in steps that follow their pointers one level per event.
    fn prefetch_ahead(&self) {
        use lockstep_core::prefetch::prefetch;
        if !self.prefetch {
            return;
        }
        let far = PREFETCH_DISTANCE;
        if let Some(ev) = self.queue.upcoming(far) {
            if let Some(n) = ev.node().and_then(|i| self.nodes.get(i)) {
                let base = (n as *const SimNode).cast::<u8>();
                for line in 0..std::mem::size_of::<SimNode>().div_ceil(64) {
                    prefetch(base.wrapping_add(line * 64));
                }
            }
            if let Ev::Arrive(_, _, buf) = ev {
                prefetch(buf.as_slice().as_ptr());
            }
        }
        if let Some(Kind::Router(r)) = self.upcoming_kind(far - 1) {
            r.prefetch_state();
        }
        if let Some(Kind::Router(r)) = self.upcoming_kind(far - 2) {
            r.prefetch_tables();
        }
        if let Some(Kind::Router(r)) = self.upcoming_kind(far - 3) {
            r.prefetch_queues();
        }
        if let Some(Ev::Arrive(i, port, buf)) = self.queue.upcoming(far - 3) {
            if let Some(Kind::Router(r)) = self.nodes.get(*i as usize).map(|n| &n.kind) {
                r.prefetch_arrival(PortId(*port), buf);
            }
        }
    }

    fn upcoming_kind(&self, n: usize) -> Option<&Kind> {
        let i = self.queue.upcoming(n)?.node()?;
        self.nodes.get(i).map(|n| &n.kind)
    }

    fn arrive(
        &mut self,
        i: usize,
        port: u16,
        buf: PacketBuf,
        t: i64,
        on_delivery: &mut impl FnMut(usize, &Delivery),
    ) {
        self.stats.packet_hops += 1;
        let n = &mut self.nodes[i];
        // (the port's state only looked at while some link of the node is down)
        let link_down =
            n.links_down > 0 && n.ports.get(usize::from(port)).is_some_and(|p| p.link.down);
        if n.down || link_down {
            self.stats.fault_drops += 1;
            self.spare.give(buf);
            return;
        }
        let at = t.saturating_add(n.host.draw(&mut n.rng)).max(n.busy_until);
        let earlier = n.wake_at.is_none_or(|w| at < w);
        if earlier && at == t {
            // (a quiet router always takes it at once, so that whether an event
            // is counted depends on the router alone, not on what other nodes
            // have due at this instant: the same count when the network runs in
            // parts)
            if self.quiet(i) {
                self.ingest(i, port, buf, t);
                return;
            }
            if !self.queue.any_due_by(t) {
                // A wake-up now with nothing else due at this instant: queued, it
                // would be the very next event, so it runs at once (and counts as the
                // event it stands for), the packet handed over without a stop in the
                // inbox.
                self.nodes[i].wake_at = Some(t);
                self.stats.events += 1;
                self.wake_with(i, t, Some((port, buf, t)), on_delivery);
                return;
            }
        }
        let n = &mut self.nodes[i];
        n.inbox.push_back((port, buf, t));
        if earlier {
            n.wake_at = Some(at);
            self.push(i, at, Ev::Wake(i as u32));
        }
    }

    fn wake(&mut self, i: usize, t: i64, on_delivery: &mut impl FnMut(usize, &Delivery)) {
        let n = &mut self.nodes[i];
        if n.timer_queued == Some(t) {
            n.timer_queued = None;
        }
        self.wake_with(i, t, None, on_delivery);
    }

    /// Whether router `i` takes its packets without a queued wake-up when it can
    /// (see [`Engine::ingest`]): a TDP router (a FIFO one sends what it takes at
    /// once, so its wake-up is never left out) on a CPU of its own, with an ideal
    /// host and no processing time, whose every wake-up is on time and whose state
    /// nothing but its own calls changes.
    fn quiet(&self, i: usize) -> bool {
        let n = &self.nodes[i];
        self.ingest
            && matches!(&n.kind, Kind::Router(r) if r.config().mode == Mode::Tdp)
            && n.processing_ns == 0
            && matches!(n.host, HostModel::Ideal)
            && self.cpus.free_at.is_empty()
    }

    /// The place of node `i`'s held wake-up (see [`Engine::ingest`]) when it is
    /// one for `at` still to come: later than now, or now and in a place after the
    /// event being handled.
    fn held_for(&self, i: usize, at: i64) -> Option<Place> {
        let (h, place) = self.nodes[i].held?;
        (h == at && (at > self.now || place > self.queue.last_out())).then_some(place)
    }

    /// A packet for quiet router `i` at `t` that would wake it. The router takes it
    /// at once. Then, if the wake-up would only have noted that it has nothing to
    /// send (the router says so, [`Node::may_transmit`]) and that the timer it
    /// wants is queued already, that is all: no event. Otherwise the wake-up is
    /// queued, to send what there is in its turn. Either way the wake-up keeps the
    /// place in the order of events it had when it was queued for the first packet
    /// of the instant, so everything else happens in the order it did when every
    /// such packet was queued: the router's state changes only through its own
    /// calls, which come in the same order, and what it sends is sent from the
    /// same place. (The same holds a place for a timer asked for twice; see
    /// [`Engine::schedule_timer`].)
    fn ingest(&mut self, i: usize, port: u16, buf: PacketBuf, t: i64) {
        let held = self.held_for(i, t);
        let n = &mut self.nodes[i];
        let Kind::Router(node) = &mut n.kind else {
            return;
        };
        let local = n.clock.instant(t);
        let rx = RxMeta {
            kernel_rx: Some(local),
        };
        node.handle_buf(local, PortId(port), buf, rx);
        drain_events(node, &mut n.events);
        let now = self.now;
        let id = n.id as usize;
        let place = held.unwrap_or_else(|| schedule_place(id, &mut n.scheduled, now));
        let timer = node.poll_timeout().map(|l| n.clock.true_of(l.ns).max(t));
        if node.may_transmit(local) || timer.is_some_and(|at| Some(at) != n.timer_queued) {
            n.held = None;
            n.wake_at = Some(t);
            self.queue.push(t, place, Ev::Wake(i as u32));
            return;
        }
        n.held = Some((t, place));
        n.wake_at = timer;
        n.busy_until = t;
        if held.is_none() {
            // the wake-up that was not queued
            self.stats.wakeups += 1;
            n.timer_wakeups += u64::from(timer.is_some());
        }
    }

    /// A wake-up of node `i` at `t`; `first` is a packet that arrived at `t` to
    /// be handled after the inbox's (which is then empty).
    fn wake_with(
        &mut self,
        i: usize,
        t: i64,
        mut first: Option<Inbound>,
        on_delivery: &mut impl FnMut(usize, &Delivery),
    ) {
        let n = &mut self.nodes[i];
        if n.wake_at != Some(t) {
            return; // superseded by an earlier wake-up
        }
        if let Some(free) = self.cpus.earliest().filter(|&f| f > t) {
            n.inbox.extend(first);
            n.wake_at = Some(free);
            self.push(i, free, Ev::Wake(i as u32));
            return;
        }
        n.wake_at = None;
        self.stats.wakeups += 1;
        let mut now = t;
        while let Some((port, buf, arrived)) = n.inbox.pop_front().or_else(|| first.take()) {
            let (local, krx) = (n.clock.instant(now), n.clock.instant(arrived));
            match &mut n.kind {
                Kind::Router(node) => {
                    let rx = RxMeta {
                        kernel_rx: Some(krx),
                    };
                    node.handle_buf(local, PortId(port), buf, rx);
                    drain_events(node, &mut n.events);
                }
                Kind::Host(h) => {
                    if let Some(d) = h.handle_frame(local.ns, krx.ns, &buf) {
                        on_delivery(n.id as usize, &d);
                    }
                    self.spare.give(buf);
                }
            }
            now = now.saturating_add(n.processing_ns);
        }
        let now = self.act(i, now);
        self.cpus.occupy(t, now);
        let n = &mut self.nodes[i];
        n.busy_until = now;
        self.schedule_timer(i, now);
    }

    /// Timers due, then everything the node hands out, onto its links, one after
    /// the other: each packet sent costs the node its processing time too (it leaves
    /// when the node is done with it). Returns when the node is done.
    fn act(&mut self, i: usize, now: i64) -> i64 {
        let n = &mut self.nodes[i];
        let local = n.clock.instant(now);
        let cost = n.processing_ns;
        let mut done = now;
        let out = &mut self.out;
        match &mut n.kind {
            Kind::Router(node) => {
                if node.poll_timeout().is_some_and(|t| t <= local) {
                    node.handle_timeout(local);
                }
                while let Some(tx) = node.poll_transmit(local) {
                    let p = usize::from(tx.port.0);
                    done = done.saturating_add(cost);
                    if n.ports.get(p).is_some_and(|port| port.link.down) {
                        self.stats.fault_drops += 1;
                        node.recycle(tx.buf);
                        continue;
                    }
                    let len = tx.buf.len();
                    match n
                        .ports
                        .get_mut(p)
                        .and_then(|port| Some((port.link.send(done, len)?, port)))
                    {
                        Some((at, port)) => {
                            let place = schedule_place(n.id as usize, &mut n.scheduled, self.now);
                            let o = port.arrival(at, place, tx.buf);
                            route(&mut self.queue, &mut self.outbox, self.part, o);
                        }
                        None => {
                            self.stats.link_drops += 1;
                            node.recycle(tx.buf);
                        }
                    }
                }
                drain_events(node, &mut n.events);
            }
            Kind::Host(h) => {
                h.handle_timeout(local.ns, out, &mut self.spare);
                for buf in out.drain(..) {
                    let Some(port) = n.ports.first_mut() else {
                        continue;
                    };
                    done = done.saturating_add(cost);
                    if port.link.down {
                        self.stats.fault_drops += 1;
                        self.spare.give(buf);
                        continue;
                    }
                    match port.link.send(done, buf.len()) {
                        Some(at) => {
                            let place = schedule_place(n.id as usize, &mut n.scheduled, self.now);
                            let o = port.arrival(at, place, buf);
                            route(&mut self.queue, &mut self.outbox, self.part, o);
                        }
                        None => {
                            self.stats.link_drops += 1;
                            self.spare.give(buf);
                        }
                    }
                }
            }
        }
        done
    }

    /// A fault begins or ends at `t`.
    fn fault(&mut self, f: usize, begins: bool, t: i64) {
        let Some(fault) = self.faults.get(f).cloned() else {
            return;
        };
        match fault {
            SimFault::LinkDown { ends, .. } => {
                for (node, port) in ends {
                    if let Some(n) = self.nodes.get_mut(node as usize) {
                        n.set_link_down(port, begins);
                    }
                }
            }
            SimFault::Restart { node, .. } => self.restart(node as usize, begins, t),
        }
    }

    /// Kills router `i` (`kill`) or starts it afresh from its configuration.
    fn restart(&mut self, i: usize, kill: bool, t: i64) {
        let Some(n) = self.nodes.get_mut(i) else {
            return;
        };
        if kill {
            n.down = true;
            n.held = None;
            self.stats.fault_drops += n.inbox.len() as u64;
            n.inbox.clear();
            n.wake_at = None;
            return;
        }
        let Some(cfg) = n.fresh.clone() else {
            return;
        };
        if let Ok(mut node) = Node::new(cfg) {
            node.set_events(true);
            n.kind = Kind::Router(Box::new(node));
        }
        n.down = false;
        n.busy_until = t;
        n.wake_at = Some(t);
        self.push(i, t, Ev::Wake(i as u32));
    }

    /// Queues the wake-up for the timer node `i` wants, unless an earlier one is
    /// queued. A quiet router's timer that is queued already is not queued again:
    /// the copy would find the router awake and do nothing, unless a packet at
    /// that instant would wake the router after its timer did, in the copy's
    /// place; that place is held for it (see [`Engine::ingest`]).
    fn schedule_timer(&mut self, i: usize, now: i64) {
        let n = &mut self.nodes[i];
        let Some(local) = n.poll_timeout() else {
            return;
        };
        let due = n.clock.true_of(local).max(now);
        let late = n.host.draw(&mut n.rng);
        let at = due.saturating_add(late);
        n.timer_wakeups += 1;
        n.late_sum_ns = n.late_sum_ns.saturating_add(late);
        if n.wake_at.is_some_and(|w| at >= w) {
            return;
        }
        n.wake_at = Some(at);
        if !self.quiet(i) {
            self.push(i, at, Ev::Wake(i as u32));
            return;
        }
        let n = &mut self.nodes[i];
        if n.timer_queued != Some(at) {
            n.timer_queued = Some(at);
            self.push(i, at, Ev::Wake(i as u32));
        } else if self.held_for(i, now).is_none() && self.held_for(i, at).is_none() {
            // (a held wake-up of now still to come is kept, and so is the first
            // copy held for this timer: a later one comes after it)
            let place = self.place(i);
            self.nodes[i].held = Some((at, place));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_cpus_are_taken_first_free_first() {
        let mut c = Cpus {
            free_at: vec![i64::MIN; 2],
        };
        assert_eq!(c.earliest(), Some(i64::MIN));
        c.occupy(100, 130);
        c.occupy(100, 120);
        // both busy: the first is free at 120
        assert_eq!(c.earliest(), Some(120));
        c.occupy(120, 150);
        assert_eq!(c.earliest(), Some(130));
        // no time spent: nothing taken
        c.occupy(130, 130);
        assert_eq!(c.earliest(), Some(130));
        assert_eq!(Cpus::default().earliest(), None);
    }

    #[test]
    fn scaled_floor_is_the_128_bit_division() {
        let xs = [
            0i128,
            1,
            -1,
            999_999_999,
            -1_000_000_001,
            61_000_000_000,
            i64::MAX as i128,
        ];
        let dens = [
            1i128,
            999_999_950,
            1_000_000_000,
            1_000_020_000,
            2_000_000_000,
            3_000_000_000,
        ];
        for x in xs {
            for den in dens {
                let want = (x * 1_000_000_000).div_euclid(den);
                assert_eq!(scaled_floor(x, den), want, "x {x} den {den}");
            }
        }
    }

    #[test]
    fn local_in_64_bits_is_the_128_bit_reading() {
        for drift_ppb in [-200i64, -50, 50, 150, 20_000] {
            let c = NodeClock {
                offset_ns: -7,
                drift_ppb,
            };
            for t in [0i64, 1, 999_999_999, 61_000_000_123, -5_000_000_001] {
                let d = i128::from(t) * i128::from(drift_ppb) / 1_000_000_000;
                let want = i128::from(t) + d + i128::from(c.offset_ns);
                assert_eq!(i128::from(c.local(t)), want, "t {t} drift {drift_ppb}");
            }
        }
    }

    #[test]
    fn clocks_map_both_ways() {
        let c = NodeClock {
            offset_ns: 500,
            drift_ppb: 20_000,
        };
        for t in [0i64, 1, 999_999_999, 123_456_789_012] {
            let l = c.local(t);
            assert_eq!(c.true_of(l), t, "t {t}");
        }
        assert_eq!(c.local(1_000_000_000), 1_000_020_500);
        let plain = NodeClock::default();
        assert_eq!((plain.local(7), plain.true_of(7)), (7, 7));
    }
}
