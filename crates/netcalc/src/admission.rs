//! The analyses on a feed-forward network, kept up to date flow by flow.
//!
//! [`Admission`] holds a validated network and, for every flow, its arrival curve at
//! each hop, its per-hop delay bounds and its residual service at each hop; for every
//! server the aggregate arrival curve, the FIFO delay and the backlog bound.
//!
//! **Total flow analysis (TFA)**: servers are visited in topological order. At a FIFO
//! server every bit waits at most `D = h(Σα, β)` (the aggregate's delay bound), so each
//! flow's output arrival curve is `α(t + D)`; under arbitrary multiplexing a flow gets
//! the residual service `[β − α_cross]+`, its hop delay is `h(α, β_res)` and its output
//! `α ⊘ β_res`. A flow's TFA bound is the sum of its hop delays.
//!
//! **Separated flow analysis (SFA)**: the flow's residual service at every hop (FIFO:
//! [`Service::fifo_residual_token_bucket`], arbitrary: [`Service::arbitrary_residual`],
//! the cross traffic's arrival curves from the TFA) are convolved along the path and
//! the delay bound is taken once end to end, so the flow pays its burst only once.
//!
//! Every bound only grows when traffic is added (the property tests check it), so a
//! set of flows that is admissible stays admissible when any of them leaves.
//!
//! **Admission** changes only what a flow touches: the servers on its path and
//! everything downstream of them (their arrival curves change), and the flows crossing
//! those servers. They are recomputed in place, every replaced value moved into an
//! undo log; unless every deadline and buffer still holds the log is replayed
//! backwards, so a rejection leaves the state exactly as it was. Removing a flow
//! recomputes the same region and restores every bound exactly (the arithmetic is
//! exact and the result depends only on the set of flows).
//!
//! **Closed forms** (every server FIFO): a FIFO server moves every member's arrival
//! curve by the same delay, which adds `r` times that delay to the burst of the
//! member's token-bucket envelope. So a server's aggregate envelope follows from its
//! members' first-hop envelopes and the delays of the servers upstream of it
//! ([`ServerState::upstream`]), and a flow's SFA service curve from sums of
//! per-server terms along its path ([`crate::paths`]), shared by the flows whose
//! paths end alike: the same exact bounds with fewer operations, and no residual
//! service per hop (a unit property test compares both ways).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;

use crate::curve::{
    backlog_bound_rate_latency, delay_bound, delay_offset_rate_latency, fifo_aggregate,
    fifo_deviations, Curve, Service,
};
use crate::fifo::{fifo_port, FifoPort, PortFlow};
use crate::model::{
    check_flow, check_servers, cycle_message, overload_message, Field, Flow, InputError,
    Multiplexing, Network, Server,
};
use crate::paths::{PathSums, Terms};
use crate::q::Q;

/// Which analysis gave a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Analysis {
    /// Total flow analysis: per-hop bounds summed.
    Tfa,
    /// Separated flow analysis: pay bursts only once.
    Sfa,
}

impl Analysis {
    pub fn name(self) -> &'static str {
        match self {
            Analysis::Tfa => "TFA",
            Analysis::Sfa => "SFA",
        }
    }
}

/// The bounds of one flow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowBounds {
    /// Shared with the admission's own record of the flow: a report of many changed
    /// flows copies no names.
    pub name: Arc<str>,
    pub path: Arc<[String]>,
    /// End-to-end delay bound of the total flow analysis, seconds.
    pub tfa: Q,
    /// Delay bound at each hop of the total flow analysis, seconds.
    pub tfa_hops: Vec<Q>,
    /// End-to-end delay bound of the separated flow analysis, seconds.
    pub sfa: Q,
    pub deadline: Option<Q>,
}

impl FlowBounds {
    /// The analysis with the smaller bound (TFA on a tie).
    pub fn best(&self) -> Analysis {
        if self.sfa < self.tfa {
            Analysis::Sfa
        } else {
            Analysis::Tfa
        }
    }
    /// The smaller of the two bounds.
    pub fn bound(&self) -> &Q {
        match self.best() {
            Analysis::Tfa => &self.tfa,
            Analysis::Sfa => &self.sfa,
        }
    }
    /// Whether the bound meets the deadline (`None` without a deadline).
    pub fn meets_deadline(&self) -> Option<bool> {
        self.deadline.as_ref().map(|d| self.bound() <= d)
    }
}

/// The bounds of one server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerBounds {
    pub name: String,
    pub multiplexing: Multiplexing,
    pub rate: Q,
    pub latency: Q,
    /// Number of flows crossing it.
    pub flows: usize,
    /// `Σ r` of those flows, bit/s.
    pub load: Q,
    /// Backlog bound `v(Σα, β)`, bits.
    pub backlog: Q,
    pub buffer: Option<Q>,
    /// FIFO: the delay bound every bit gets here, `h(Σα, β)`, seconds.
    pub fifo_delay: Option<Q>,
    /// Rules of thumb (the FIFO port analysis, loeser Eq. 5 and 7) from the token-bucket bursts `b_k`
    /// of the flows as they arrive here: `Σ b_k + R T` bits and `Σ b_k / R + T` s.
    pub backlog_estimate: Q,
    pub delay_estimate: Q,
    /// The loeser port formulas, when every flow arrives here as a T-SPEC with the
    /// port's rate as peak and one common `M` (a FIFO port fed directly by shaped
    /// senders, as in loeser).
    pub spec_port: Option<FifoPort>,
}

impl ServerBounds {
    /// Whether the backlog fits the buffer (`None` without a buffer).
    pub fn fits(&self) -> Option<bool> {
        self.buffer.as_ref().map(|b| &self.backlog <= b)
    }
}

/// Every bound of the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// In the order the flows were given or admitted.
    pub flows: Vec<FlowBounds>,
    /// In the order of the input.
    pub servers: Vec<ServerBounds>,
}

impl Report {
    /// Flows whose bound misses their deadline.
    pub fn late_flows(&self) -> impl Iterator<Item = &FlowBounds> {
        self.flows
            .iter()
            .filter(|f| f.meets_deadline() == Some(false))
    }
    /// Servers whose backlog bound exceeds their buffer.
    pub fn overflowing_servers(&self) -> impl Iterator<Item = &ServerBounds> {
        self.servers.iter().filter(|s| s.fits() == Some(false))
    }
    pub fn flow(&self, name: &str) -> Option<&FlowBounds> {
        self.flows.iter().find(|f| &*f.name == name)
    }
    pub fn server(&self, name: &str) -> Option<&ServerBounds> {
        self.servers.iter().find(|s| s.name == name)
    }
}

/// What would break if a flow were admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Breaking {
    /// A flow's bound (the new one's or an admitted one's) would exceed its deadline.
    Flow { name: String, bound: Q, deadline: Q },
    /// A server's backlog bound would exceed its buffer.
    Port {
        server: String,
        backlog: Q,
        buffer: Q,
    },
    /// The flows through a server would need more than its rate.
    Stability { server: String, load: Q, rate: Q },
    /// The flow would close a cycle of servers (out of scope).
    Cycle { servers: Vec<String> },
    /// The flow itself is malformed (unknown server, zero rate, duplicate name...).
    Invalid(InputError),
}

/// A rejected admission: why, and what would break. Nothing was changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Reject {
    pub reason: String,
    pub breaking: Breaking,
}

/// An admitted flow: its bounds, and the bounds of other flows that changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmitOk {
    pub bounds: FlowBounds,
    /// Other flows whose TFA or SFA bound changed, with their new bounds.
    pub changed: Vec<FlowBounds>,
    /// Servers recomputed (the flow's path and everything downstream).
    pub servers_touched: usize,
    /// Flows recomputed.
    pub flows_touched: usize,
}

/// A removed flow: the other flows whose bounds changed, with their new bounds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoveOk {
    pub removed: FlowBounds,
    pub changed: Vec<FlowBounds>,
}

/// A network under admission control.
#[derive(Clone, Debug)]
pub struct Admission {
    servers: Vec<Server>,
    server_index: HashMap<String, usize>,
    sstate: Vec<ServerState>,
    /// Flow slots (a removed flow leaves a hole for the next one).
    flows: Vec<Option<FlowSlot>>,
    free: Vec<usize>,
    flow_index: HashMap<String, usize>,
    /// `succ[u][v]`: how many flows go from server u straight to server v.
    succ: Vec<BTreeMap<usize, u32>>,
    next_seq: u64,
    /// See [`Admission::set_propagation_grid`].
    grid: Option<Q>,
    /// Per flow slot: the number of the last recomputation that touched it.
    mark: Vec<u64>,
    /// Recomputations so far (numbers the marks).
    epoch: u64,
    /// The buffers of the last accepted pass, emptied, for the next one.
    spare: Spare,
    /// Every server is FIFO: the closed forms apply (see [`ServerState::upstream`]).
    closed: bool,
}

/// Empty pass buffers kept between admissions: an admission's undo log is tens of
/// kilobytes, and handing a block that large back to the allocator every time made
/// it consolidate its free lists every time. A copy of the state starts without.
#[derive(Debug, Default)]
struct Spare(Pass);

impl Clone for Spare {
    fn clone(&self) -> Spare {
        Spare::default()
    }
}

#[derive(Clone, Debug)]
struct ServerState {
    /// (flow slot, hop index of this server on the flow's path), sorted.
    members: Vec<(usize, usize)>,
    /// `Σ r` of the members (kept up to date as flows come and go).
    load: Q,
    fifo_delay: Option<Q>,
    backlog: Q,
    /// Closed forms, for networks of FIFO servers only. A FIFO server moves each
    /// member's arrival curve by one delay `s` (the FIFO delay, rounded up to the
    /// grid if there is one), which adds `r s` to the burst of its token-bucket
    /// envelope `(r, b)`. So the members' envelope rates add up to `env_rate`, and
    /// their bursts to `burst0` (their bursts at their first hops) plus, for every
    /// server `i` upstream of this one on a member's path, `s_i` times the `Σ r` of
    /// those members (`upstream[i]`): a few products instead of a sum over members.
    env_rate: Q,
    /// `R − env_rate`: a member's FIFO residual rate here is this plus its own `r`
    /// (set with the first member).
    spare: Q,
    burst0: Q,
    upstream: BTreeMap<usize, Q>,
    /// The delay `s` (closed forms only).
    shift: Q,
    /// `T + Σ b / R` (closed forms only): every member's FIFO residual latency is
    /// this minus its own `b / R`.
    cterm: Q,
}

impl ServerState {
    fn empty() -> ServerState {
        ServerState {
            members: Vec::new(),
            load: Q::zero(),
            fifo_delay: None,
            backlog: Q::zero(),
            env_rate: Q::zero(),
            spare: Q::zero(),
            burst0: Q::zero(),
            upstream: BTreeMap::new(),
            shift: Q::zero(),
            cterm: Q::zero(),
        }
    }

    /// Adds (`sign` 1) or takes away (`sign` −1) a member's part of the closed
    /// forms: its envelope `(r, b)` at its first hop, and `r` for each server
    /// `upstream` of this one on its path. `rate`: the server's.
    fn account(&mut self, rate: &Q, env: &(Q, Q), upstream: &[usize], sign: i64) {
        let (r, b) = (&env.0 * &Q::int(sign), &env.1 * &Q::int(sign));
        self.env_rate = &self.env_rate + &r;
        self.spare = rate - &self.env_rate;
        self.burst0 = &self.burst0 + &b;
        for &i in upstream {
            let sum = self.upstream.entry(i).or_insert_with(Q::zero);
            *sum = &*sum + &r;
            if sum.is_zero() {
                self.upstream.remove(&i);
            }
        }
    }
}

/// A server's values that a recomputation replaces.
#[derive(Debug)]
struct ServerVals {
    fifo_delay: Option<Q>,
    backlog: Q,
    shift: Q,
    cterm: Q,
}

#[derive(Clone, Debug)]
struct FlowSlot {
    def: Flow,
    /// `def.name` and `def.path`, shared with every [`FlowBounds`] of the flow.
    name: Arc<str>,
    names: Arc<[String]>,
    path: Vec<usize>,
    seq: u64,
    /// The token-bucket envelope `(r, b)` of its arrival curve at its first hop.
    env0: (Q, Q),
    st: FlowState,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct FlowState {
    /// Arrival curve at each hop (index 0: the T-SPEC).
    arrivals: Vec<Curve>,
    hop_delay: Vec<Q>,
    /// Residual service at each hop.
    residual: Vec<Service>,
    tfa: Q,
    sfa: Q,
}

impl FlowState {
    fn fresh(def: &Flow, hops: usize) -> FlowState {
        let a = def.arrival_curve();
        FlowState {
            arrivals: vec![a; hops],
            hop_delay: vec![Q::zero(); hops],
            residual: vec![Service::rate_latency(Q::one(), Q::zero()); hops],
            tfa: Q::zero(),
            sfa: Q::zero(),
        }
    }
}

/// A value a recomputation replaced (moved out, not copied), to put back if the
/// change is rejected.
#[derive(Debug)]
enum Undo {
    Arrival(usize, usize, Curve),
    HopDelay(usize, usize, Q),
    Residual(usize, usize, Service),
    /// A flow's whole state (a full re-analysis starts from fresh states).
    Flow(usize, Box<FlowState>),
}

/// One recomputation, done in place: what it replaced and which flows it touched.
#[derive(Debug, Default)]
struct Pass {
    undo: Vec<Undo>,
    /// Each recomputed server's previous FIFO delay, backlog and closed-form terms
    /// (apart from `undo`, whose entries are a quarter of their size without them).
    servers: Vec<(usize, ServerVals)>,
    /// Flow slots whose state was recomputed, in the order first touched.
    touched: Vec<usize>,
    /// For each touched flow whose end-to-end bounds were recomputed: its previous
    /// TFA and SFA bounds.
    ends: Vec<(usize, Q, Q)>,
    /// The path sums of the closed forms.
    sums: PathSums,
    /// Arrival curves an accepted pass replaced, kept for their buffers: the next
    /// pass writes shifted curves into them instead of allocating new ones.
    curves: Vec<Curve>,
}

impl Pass {
    /// Drops what the pass recorded, keeping the buffers.
    fn clear(&mut self) {
        for u in self.undo.drain(..) {
            if let Undo::Arrival(_, _, curve) = u {
                self.curves.push(curve);
            }
        }
        self.servers.clear();
        self.touched.clear();
        self.ends.clear();
        self.sums.clear();
    }
}

/// An internal failure of the analysis (an unbounded bound where validation should
/// have prevented it): reported as instability of a server.
struct Unbounded(usize);

impl Admission {
    /// Validates a network and analyses it completely. Deadlines and buffers are not
    /// enforced here (see [`Report::late_flows`]): a network file may describe a
    /// configuration that fails its checks, and `calc` reports that.
    pub fn new(net: &Network) -> Result<Admission, InputError> {
        Admission::with_grid(net, None)
    }

    /// [`Admission::new`] with propagated delays rounded up to `grid` from the start
    /// (see [`Admission::set_propagation_grid`]).
    pub fn with_grid(net: &Network, grid: Option<Q>) -> Result<Admission, InputError> {
        let server_index = check_servers(&net.servers)?;
        let mut adm = Admission {
            servers: net.servers.clone(),
            server_index,
            sstate: vec![ServerState::empty(); net.servers.len()],
            flows: Vec::new(),
            free: Vec::new(),
            flow_index: HashMap::new(),
            succ: vec![BTreeMap::new(); net.servers.len()],
            next_seq: 0,
            grid: grid.filter(Q::is_positive),
            mark: Vec::new(),
            epoch: 0,
            spare: Spare::default(),
            closed: net
                .servers
                .iter()
                .all(|s| s.multiplexing == Multiplexing::Fifo),
        };
        for (i, f) in net.flows.iter().enumerate() {
            let field = |k: &str| Field::new("flow", Some(i), Some(&f.name)).key(k);
            let path = check_flow(f, &adm.server_index, &field)?;
            if adm.flow_index.contains_key(&f.name) {
                return Err(InputError::at(
                    field("name"),
                    format!("a flow named \"{}\" is already defined", f.name),
                ));
            }
            adm.insert_slot(f.clone(), path);
        }
        // Stability, in server order.
        for (j, s) in adm.servers.iter().enumerate() {
            let st = &adm.sstate[j];
            if st.load > s.rate {
                let list: Vec<(&str, &Q)> = st
                    .members
                    .iter()
                    .filter_map(|(f, _)| adm.flows[*f].as_ref())
                    .map(|f| (f.def.name.as_str(), &f.def.rate))
                    .collect();
                return Err(InputError::at(
                    Field::new("server", Some(j), Some(&s.name)).key("rate"),
                    overload_message(s, &st.load, &list),
                ));
            }
        }
        let all: Vec<usize> = (0..adm.servers.len()).collect();
        let order = match adm.topo_order(&all) {
            Ok(o) => o,
            Err(cycle) => {
                let names: Vec<String> =
                    cycle.iter().map(|&s| adm.servers[s].name.clone()).collect();
                // Name the last flow whose path has an edge of the cycle (the one that
                // closes it, in file order).
                let field = net.flows.iter().enumerate().rev().find_map(|(i, f)| {
                    f.path
                        .windows(2)
                        .any(|w| names.windows(2).any(|c| c[0] == w[0] && c[1] == w[1]))
                        .then(|| Field::new("flow", Some(i), Some(&f.name)).key("path"))
                });
                return Err(InputError {
                    field: field.map(Box::new),
                    message: cycle_message(&names),
                    line: None,
                    column: None,
                });
            }
        };
        if let Err(Unbounded(j)) = adm.analyse_all(&order) {
            return Err(InputError::at(
                Field::new("server", Some(j), Some(&adm.servers[j].name)).key("rate"),
                "the analysis found no finite bound at this server (it is saturated)",
            ));
        }
        Ok(adm)
    }

    fn insert_slot(&mut self, def: Flow, path: Vec<usize>) -> usize {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.flows.push(None);
                self.mark.push(0);
                self.flows.len() - 1
            }
        };
        let hops = path.len();
        let st = FlowState::fresh(&def, hops);
        let env0 = st.arrivals[0].token_bucket_envelope();
        for (k, &j) in path.iter().enumerate() {
            let st = &mut self.sstate[j];
            let pos = st.members.partition_point(|m| m.0 < slot);
            st.members.insert(pos, (slot, k));
            st.load = &st.load + &def.rate;
            st.account(&self.servers[j].rate, &env0, &path[..k], 1);
        }
        for w in path.windows(2) {
            *self.succ[w[0]].entry(w[1]).or_insert(0) += 1;
        }
        self.flow_index.insert(def.name.clone(), slot);
        self.flows[slot] = Some(FlowSlot {
            name: Arc::from(def.name.as_str()),
            names: Arc::from(def.path.as_slice()),
            def,
            path,
            seq: self.next_seq,
            env0,
            st,
        });
        self.next_seq += 1;
        slot
    }

    /// Takes a flow out of the structures (the reverse of `insert_slot`; its slot
    /// goes to the free list). Bounds are not recomputed.
    fn remove_slot(&mut self, slot: usize) -> Option<FlowSlot> {
        let f = self.flows.get_mut(slot)?.take()?;
        for (k, &j) in f.path.iter().enumerate() {
            let st = &mut self.sstate[j];
            st.members.retain(|m| m.0 != slot);
            st.load = &st.load - &f.def.rate;
            st.account(&self.servers[j].rate, &f.env0, &f.path[..k], -1);
        }
        for w in f.path.windows(2) {
            if let Some(c) = self.succ[w[0]].get_mut(&w[1]) {
                *c -= 1;
                if *c == 0 {
                    self.succ[w[0]].remove(&w[1]);
                }
            }
        }
        self.flow_index.remove(&f.def.name);
        self.free.push(slot);
        Some(f)
    }

    /// Puts back everything a pass replaced, newest first.
    fn undo(&mut self, pass: Pass) {
        for (slot, tfa, sfa) in pass.ends.into_iter().rev() {
            if let Some(Some(f)) = self.flows.get_mut(slot) {
                f.st.tfa = tfa;
                f.st.sfa = sfa;
            }
        }
        for (j, v) in pass.servers.into_iter().rev() {
            let st = &mut self.sstate[j];
            (st.fifo_delay, st.backlog) = (v.fifo_delay, v.backlog);
            (st.shift, st.cterm) = (v.shift, v.cterm);
        }
        for u in pass.undo.into_iter().rev() {
            match u {
                Undo::Flow(slot, st) => {
                    if let Some(Some(f)) = self.flows.get_mut(slot) {
                        f.st = *st;
                    }
                }
                Undo::Arrival(slot, k, v) => {
                    if let Some(Some(f)) = self.flows.get_mut(slot) {
                        f.st.arrivals[k] = v;
                    }
                }
                Undo::HopDelay(slot, k, v) => {
                    if let Some(Some(f)) = self.flows.get_mut(slot) {
                        f.st.hop_delay[k] = v;
                    }
                }
                Undo::Residual(slot, k, v) => {
                    if let Some(Some(f)) = self.flows.get_mut(slot) {
                        f.st.residual[k] = v;
                    }
                }
            }
        }
    }

    /// Undoes a rejected admission completely: the pass, then the flow's slot, so that
    /// the state is exactly the one before (slots, free list, sequence numbers).
    fn roll_back(&mut self, slot: usize, flows_len: usize, next_seq: u64, pass: Pass) {
        self.undo(pass);
        self.remove_slot(slot);
        if self.flows.len() > flows_len {
            self.free.pop();
            self.flows.truncate(flows_len);
            self.mark.truncate(flows_len);
        }
        self.next_seq = next_seq;
    }

    /// The servers reachable from `start` (inclusive), with `extra` edges added.
    fn cone(&self, start: &[usize], extra: &[(usize, usize)]) -> Vec<usize> {
        let mut seen = vec![false; self.servers.len()];
        let mut queue: VecDeque<usize> = VecDeque::new();
        let mut out = Vec::new();
        for &s in start {
            if !seen[s] {
                seen[s] = true;
                queue.push_back(s);
            }
        }
        while let Some(u) = queue.pop_front() {
            out.push(u);
            let extra_succ = extra.iter().filter(|e| e.0 == u).map(|e| e.1);
            for v in self.succ[u].keys().copied().chain(extra_succ) {
                if !seen[v] {
                    seen[v] = true;
                    queue.push_back(v);
                }
            }
        }
        out
    }

    /// Topological order of `nodes` (a set closed under successors, or the whole
    /// network), or a cycle among them.
    fn topo_order(&self, nodes: &[usize]) -> Result<Vec<usize>, Vec<usize>> {
        self.topo_order_with(nodes, &[])
    }

    fn topo_order_with(
        &self,
        nodes: &[usize],
        extra: &[(usize, usize)],
    ) -> Result<Vec<usize>, Vec<usize>> {
        let inset: HashSet<usize> = nodes.iter().copied().collect();
        let succs = |u: usize| -> Vec<usize> {
            let mut v: Vec<usize> = self.succ[u].keys().copied().collect();
            for e in extra.iter().filter(|e| e.0 == u) {
                if !v.contains(&e.1) {
                    v.push(e.1);
                }
            }
            v
        };
        let mut indeg: HashMap<usize, usize> = nodes.iter().map(|&n| (n, 0)).collect();
        for &u in nodes {
            for v in succs(u) {
                if let Some(d) = indeg.get_mut(&v) {
                    *d += 1;
                }
            }
        }
        let mut ready: Vec<usize> = nodes.iter().copied().filter(|n| indeg[n] == 0).collect();
        ready.sort_unstable_by(|a, b| b.cmp(a));
        let mut order = Vec::with_capacity(nodes.len());
        while let Some(u) = ready.pop() {
            order.push(u);
            for v in succs(u) {
                if let Some(d) = indeg.get_mut(&v) {
                    *d -= 1;
                    if *d == 0 {
                        ready.push(v);
                    }
                }
            }
        }
        if order.len() == nodes.len() {
            return Ok(order);
        }
        // A cycle among the nodes left: walk successors that are left until one repeats.
        let left: HashSet<usize> = nodes.iter().copied().filter(|n| indeg[n] > 0).collect();
        let Some(mut u) = left.iter().min().copied() else {
            return Err(Vec::new());
        };
        let mut walk = vec![u];
        let mut pos: HashMap<usize, usize> = HashMap::from([(u, 0)]);
        loop {
            let next = succs(u)
                .into_iter()
                .filter(|v| left.contains(v) && inset.contains(v))
                .min();
            let Some(v) = next else { return Err(walk) };
            if let Some(&p) = pos.get(&v) {
                let mut cycle = walk[p..].to_vec();
                cycle.push(v);
                return Err(cycle);
            }
            pos.insert(v, walk.len());
            walk.push(v);
            u = v;
        }
    }

    /// Recomputes the servers of `order` (topological) in place and then the
    /// end-to-end bounds of every flow crossing them; `pass` records what was replaced.
    fn recompute(&mut self, order: &[usize], pass: &mut Pass) -> Result<(), Unbounded> {
        self.epoch += 1;
        // Up to three replaced values per member: reserve once instead of growing
        // (and copying) the log while it fills.
        let entries: usize = order
            .iter()
            .map(|&j| 3 * self.sstate[j].members.len())
            .sum();
        pass.undo.reserve(entries);
        pass.servers.reserve(order.len());
        for &j in order {
            match self.closed {
                true => self.compute_server_closed(j, pass)?,
                false => self.compute_server(j, pass)?,
            }
        }
        pass.sums.clear();
        for i in 0..pass.touched.len() {
            let slot = pass.touched[i];
            let bounds = match self.closed {
                true => self.closed_bounds(slot, &mut pass.sums)?,
                false => self.bounds_from_hops(slot)?,
            };
            let Some((tfa, sfa)) = bounds else { continue };
            let Some(f) = self.flows.get_mut(slot).and_then(|f| f.as_mut()) else {
                continue;
            };
            let old_tfa = std::mem::replace(&mut f.st.tfa, tfa);
            let old_sfa = std::mem::replace(&mut f.st.sfa, sfa);
            pass.ends.push((slot, old_tfa, old_sfa));
        }
        Ok(())
    }

    /// A flow's TFA and SFA bounds from its hop delays and residual services.
    fn bounds_from_hops(&self, slot: usize) -> Result<Option<(Q, Q)>, Unbounded> {
        let Some(f) = self.flows.get(slot).and_then(|f| f.as_ref()) else {
            return Ok(None);
        };
        let first = f.path.first().copied().unwrap_or(0);
        let tfa: Q = f.st.hop_delay.iter().sum();
        let sfa = separated_bound(&f.st.arrivals[0], &f.st.residual).ok_or(Unbounded(first))?;
        Ok(Some((tfa, sfa)))
    }

    /// A flow's TFA and SFA bounds in closed form (every server FIFO): the TFA bound
    /// is `Σ D`; its FIFO residual at a server is `β_{R − (Σr − r), c − b/R}` with its
    /// envelope burst there `b = b⁰ + r Σ_{upstream} s`, so the SFA service is
    /// `β_{min, Σ c − b⁰ Σ 1/R − r W}` (see [`crate::paths`]), the same curve as the
    /// convolution of the residuals.
    fn closed_bounds(&self, slot: usize, sums: &mut PathSums) -> Result<Option<(Q, Q)>, Unbounded> {
        let Some(f) = self.flows.get(slot).and_then(|f| f.as_ref()) else {
            return Ok(None);
        };
        let first = f.path.first().copied().unwrap_or(0);
        let (r, b0) = &f.env0;
        // The end-to-end rate: the least residual rate `R − (Σr − r) = spare + r`
        // on the path, from the least spare (comparisons, one sum).
        let tightest = f
            .path
            .iter()
            .map(|&j| &self.sstate[j].spare)
            .min()
            .ok_or(Unbounded(first))?;
        let rate = tightest + r;
        if !rate.is_positive() {
            let j = f
                .path
                .iter()
                .copied()
                .find(|&j| !(&self.sstate[j].spare + r).is_positive());
            return Err(Unbounded(j.unwrap_or(first)));
        }
        let zero = Q::zero();
        // Where the flow is a server's only member, its residual latency there is
        // `T` (c − b/R with Σb = b): given as such, not as two large fractions that
        // cancel at the end.
        let terms = |j: usize| {
            let (st, server) = (&self.sstate[j], &self.servers[j]);
            let alone = st.members.len() == 1;
            Terms {
                delay: st.fifo_delay.as_ref().unwrap_or(&zero),
                shift: &st.shift,
                cterm: if alone { &server.latency } else { &st.cterm },
                rate: (!alone).then_some(&server.rate),
            }
        };
        let s = sums.of(&f.path, terms).ok_or(Unbounded(first))?;
        let offset = delay_offset_rate_latency(&f.st.arrivals[0], &rate).ok_or(Unbounded(first))?;
        let (tfa, sfa) = s.bounds(r, b0, &offset);
        Ok(Some((tfa, sfa.max(Q::zero()))))
    }

    /// The envelope sums `(Σ r, Σ b)` of a server's members: `Σ b` in closed form
    /// from the delays of the servers upstream (see [`ServerState::upstream`]), or,
    /// where more servers than members lie upstream (long paths spread over the
    /// network), from the members' current envelopes. The same value either way.
    fn envelope_sums(&self, j: usize) -> Option<(Q, Q)> {
        let st = &self.sstate[j];
        let burst = if st.upstream.len() <= st.members.len() {
            st.upstream.iter().fold(st.burst0.clone(), |b, (&i, r)| {
                &b + &(&self.sstate[i].shift * r)
            })
        } else {
            let mut b = Q::zero();
            for &(slot, k) in &st.members {
                let curve = self.flows.get(slot)?.as_ref()?.st.arrivals.get(k)?;
                b = &b + &curve.token_bucket_envelope().1;
            }
            b
        };
        Some((st.env_rate.clone(), burst))
    }

    /// [`Admission::compute_server`] in closed form (every server FIFO): the
    /// aggregate's envelope from the server's sums, and no residual service per
    /// member (the end-to-end bounds sum the servers' terms instead).
    fn compute_server_closed(&mut self, j: usize, pass: &mut Pass) -> Result<(), Unbounded> {
        let (agg_r, agg_b) = self.envelope_sums(j).ok_or(Unbounded(j))?;
        let Admission {
            servers,
            sstate,
            flows,
            grid,
            mark,
            epoch,
            ..
        } = self;
        let (rate, lat) = (&servers[j].rate, &servers[j].latency);
        let st = &mut sstate[j];
        let members = touch_members(st, flows, mark, *epoch, pass).ok_or(Unbounded(j))?;
        let (delay, backlog) =
            fifo_deviations(&members, rate, lat, &agg_r, &agg_b).ok_or(Unbounded(j))?;
        let shift = match grid {
            Some(g) => delay.ceil_to(g),
            None => delay.clone(),
        };
        for &(slot, k) in &st.members {
            let f = flows
                .get_mut(slot)
                .and_then(|f| f.as_mut())
                .ok_or(Unbounded(j))?;
            if k + 1 < f.path.len() {
                let mut out = pass.curves.pop().unwrap_or_else(Curve::scratch);
                let (here, next) = f.st.arrivals.split_at_mut(k + 1);
                here[k].shift_into(&shift, &mut out);
                std::mem::swap(&mut next[0], &mut out);
                pass.undo.push(Undo::Arrival(slot, k + 1, out));
            }
            let old = std::mem::replace(&mut f.st.hop_delay[k], delay.clone());
            pass.undo.push(Undo::HopDelay(slot, k, old));
        }
        let cterm = lat + &agg_b.checked_div(rate).ok_or(Unbounded(j))?;
        let old = ServerVals {
            fifo_delay: st.fifo_delay.replace(delay),
            backlog: std::mem::replace(&mut st.backlog, backlog),
            shift: std::mem::replace(&mut st.shift, shift),
            cterm: std::mem::replace(&mut st.cterm, cterm),
        };
        pass.servers.push((j, old));
        Ok(())
    }

    /// Recomputes one server from the current arrival curves of its members, in
    /// place: its delay and backlog, and each member's hop delay, residual service
    /// and arrival curve at its next hop.
    fn compute_server(&mut self, j: usize, pass: &mut Pass) -> Result<(), Unbounded> {
        let Admission {
            servers,
            sstate,
            flows,
            grid,
            mark,
            epoch,
            ..
        } = self;
        let server = &servers[j];
        let (rate, lat) = (&server.rate, &server.latency);
        let st = &mut sstate[j];
        let members = touch_members(st, flows, mark, *epoch, pass).ok_or(Unbounded(j))?;
        // FIFO: h(Σα, β) and v(Σα, β) without building Σα (where every flow arrives
        // as a T-SPEC with the port's rate as peak the delay is the FIFO port analysis's t_switch;
        // ServerBounds::spec_port shows it, the property tests check that both
        // agree). Arbitrary multiplexing needs the sum itself for the cross traffic.
        let (backlog, fifo_delay, fifo, agg) = match server.multiplexing {
            Multiplexing::Fifo => {
                let a = fifo_aggregate(&members, rate, lat).ok_or(Unbounded(j))?;
                (a.backlog.clone(), Some(a.delay.clone()), Some(a), None)
            }
            Multiplexing::Arbitrary => {
                let agg = Curve::sum(members);
                let backlog = backlog_bound_rate_latency(&agg, rate, lat).ok_or(Unbounded(j))?;
                (backlog, None, None, Some(agg))
            }
        };
        // The delay by which the members' arrival curves move to their next hop.
        let shift = fifo_delay.as_ref().map(|d| match grid {
            Some(g) => d.ceil_to(g),
            None => d.clone(),
        });
        for (m, &(slot, k)) in st.members.iter().enumerate() {
            let f = flows
                .get_mut(slot)
                .and_then(|f| f.as_mut())
                .ok_or(Unbounded(j))?;
            let hops = f.path.len();
            let alpha = &f.st.arrivals[k];
            let (residual, hop_delay, out) = match (&fifo, &shift, &agg) {
                (Some(a), Some(shift), _) => {
                    // Token-bucket envelopes add up: the cross traffic's is the
                    // aggregate's minus the flow's.
                    let (r, b) = &a.envelopes[m];
                    let res = Service::fifo_residual_token_bucket_of(
                        rate,
                        lat,
                        &(&a.rate - r),
                        &(&a.burst - b),
                    )
                    .ok_or(Unbounded(j))?;
                    let out = (k + 1 < hops).then(|| alpha.shift(shift));
                    (res, a.delay.clone(), out)
                }
                (_, _, Some(agg)) => {
                    let cross = agg.minus(alpha);
                    let res = Service::arbitrary_residual(rate, lat, &cross).ok_or(Unbounded(j))?;
                    let d = delay_bound(alpha, &res).ok_or(Unbounded(j))?;
                    let out = match k + 1 < hops {
                        true => Some(alpha.deconvolve(&res).ok_or(Unbounded(j))?),
                        false => None,
                    };
                    (res, d, out)
                }
                _ => return Err(Unbounded(j)),
            };
            let old = std::mem::replace(&mut f.st.residual[k], residual);
            pass.undo.push(Undo::Residual(slot, k, old));
            let old = std::mem::replace(&mut f.st.hop_delay[k], hop_delay);
            pass.undo.push(Undo::HopDelay(slot, k, old));
            if let Some(out) = out {
                let old = std::mem::replace(&mut f.st.arrivals[k + 1], out);
                pass.undo.push(Undo::Arrival(slot, k + 1, old));
            }
        }
        let old = ServerVals {
            fifo_delay: std::mem::replace(&mut st.fifo_delay, fifo_delay),
            backlog: std::mem::replace(&mut st.backlog, backlog),
            shift: std::mem::take(&mut st.shift),
            cterm: std::mem::take(&mut st.cterm),
        };
        pass.servers.push((j, old));
        Ok(())
    }

    /// Analyses everything from fresh flow states, in `order` (topological, all
    /// servers); on failure the previous state is put back.
    fn analyse_all(&mut self, order: &[usize]) -> Result<(), Unbounded> {
        let mut pass = Pass::default();
        for slot in 0..self.flows.len() {
            if let Some(f) = self.flows[slot].as_mut() {
                let fresh = FlowState::fresh(&f.def, f.path.len());
                let old = std::mem::replace(&mut f.st, fresh);
                pass.undo.push(Undo::Flow(slot, Box::new(old)));
            }
        }
        match self.recompute(order, &mut pass) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.undo(pass);
                Err(e)
            }
        }
    }

    fn bounds_of(f: &FlowSlot) -> FlowBounds {
        FlowBounds {
            name: Arc::clone(&f.name),
            path: Arc::clone(&f.names),
            tfa: f.st.tfa.clone(),
            tfa_hops: f.st.hop_delay.clone(),
            sfa: f.st.sfa.clone(),
            deadline: f.def.deadline.clone(),
        }
    }

    /// Admits `flow` if its bound, every admitted flow's bound and every buffer still
    /// hold; otherwise nothing changes and the rejection says what would break.
    // A rejection is an ordinary answer carrying the bounds that break, not a rare
    // error path worth boxing.
    #[allow(clippy::result_large_err)]
    pub fn admit(&mut self, flow: Flow) -> Result<AdmitOk, Reject> {
        let field = |k: &str| Field::new("flow", None, Some(&flow.name)).key(k);
        let path = check_flow(&flow, &self.server_index, &field).map_err(|e| Reject {
            reason: e.to_string(),
            breaking: Breaking::Invalid(e),
        })?;
        if self.flow_index.contains_key(&flow.name) {
            let e = InputError::at(
                field("name"),
                format!("a flow named \"{}\" is already admitted", flow.name),
            );
            return Err(Reject {
                reason: e.to_string(),
                breaking: Breaking::Invalid(e),
            });
        }
        for &j in &path {
            let load = &self.sstate[j].load + &flow.rate;
            let s = &self.servers[j];
            if load > s.rate {
                return Err(Reject {
                    reason: format!(
                        "{}: {} plus {} for \"{}\" would exceed its rate {} (unstable)",
                        s.name,
                        crate::model::rate_text(&self.sstate[j].load),
                        crate::model::rate_text(&flow.rate),
                        flow.name,
                        crate::model::rate_text(&s.rate)
                    ),
                    breaking: Breaking::Stability {
                        server: s.name.clone(),
                        load,
                        rate: s.rate.clone(),
                    },
                });
            }
        }
        let edges: Vec<(usize, usize)> = path.windows(2).map(|w| (w[0], w[1])).collect();
        let cone = self.cone(&path, &edges);
        let order = self.topo_order_with(&cone, &edges).map_err(|cycle| {
            let names: Vec<String> = cycle
                .iter()
                .map(|&s| self.servers[s].name.clone())
                .collect();
            Reject {
                reason: cycle_message(&names),
                breaking: Breaking::Cycle { servers: names },
            }
        })?;
        // Insert the flow, recompute in place, and roll everything back if it breaks
        // anything.
        let (flows_len, next_seq) = (self.flows.len(), self.next_seq);
        let name = flow.name.clone();
        let slot = self.insert_slot(flow, path);
        let mut pass = std::mem::take(&mut self.spare.0);
        if let Err(Unbounded(j)) = self.recompute(&order, &mut pass) {
            let s = &self.servers[j];
            let (server, load, rate) =
                (s.name.clone(), self.sstate[j].load.clone(), s.rate.clone());
            self.roll_back(slot, flows_len, next_seq, pass);
            return Err(Reject {
                reason: format!("{server}: no finite bound with \"{name}\" (saturated)"),
                breaking: Breaking::Stability { server, load, rate },
            });
        }
        // Checks: the new flow first, then the others by name, then the ports.
        let late = |f: &FlowSlot| {
            f.def
                .deadline
                .as_ref()
                .is_some_and(|d| std::cmp::min(&f.st.tfa, &f.st.sfa) > d)
        };
        let mut breaking: Option<&FlowSlot> = self.flows[slot].as_ref().filter(|f| late(f));
        if breaking.is_none() {
            for &s in &pass.touched {
                let Some(f) = self.flows[s].as_ref() else {
                    continue;
                };
                if late(f) && breaking.is_none_or(|b| f.def.name < b.def.name) {
                    breaking = Some(f);
                }
            }
        }
        if let Some(f) = breaking {
            let b = Self::bounds_of(f);
            let deadline = b.deadline.clone().unwrap_or_default();
            let reject = Reject {
                reason: format!(
                    "flow \"{}\" would have a delay bound of {} ({}), above its deadline {}",
                    b.name,
                    crate::units::Shown::new(b.bound(), crate::units::Unit::Us),
                    b.best().name(),
                    crate::units::Shown::new(&deadline, crate::units::Unit::Us)
                ),
                breaking: Breaking::Flow {
                    name: b.name.to_string(),
                    bound: b.bound().clone(),
                    deadline,
                },
            };
            self.roll_back(slot, flows_len, next_seq, pass);
            return Err(reject);
        }
        let mut touched = order.clone();
        touched.sort_unstable();
        for j in touched {
            let (s, st) = (&self.servers[j], &self.sstate[j]);
            if let Some(buf) = &s.buffer {
                if &st.backlog > buf {
                    let reject = Reject {
                        reason: format!(
                            "server \"{}\" would need a buffer of {}, more than its {}",
                            s.name,
                            crate::units::Shown::new(&st.backlog, crate::units::Unit::Bytes),
                            crate::units::Shown::new(buf, crate::units::Unit::Bytes)
                        ),
                        breaking: Breaking::Port {
                            server: s.name.clone(),
                            backlog: st.backlog.clone(),
                            buffer: buf.clone(),
                        },
                    };
                    self.roll_back(slot, flows_len, next_seq, pass);
                    return Err(reject);
                }
            }
        }
        // Admitted: report the bounds that changed.
        let f = self.flows[slot].as_ref().ok_or_else(|| Reject {
            reason: format!("flow \"{name}\" vanished during its admission (internal error)"),
            breaking: Breaking::Invalid(InputError::at(
                Field::new("flow", None, Some(&name)),
                "internal error",
            )),
        })?;
        let bounds = Self::bounds_of(f);
        let changed = self.changed_bounds(&pass, Some(slot));
        let flows_touched = pass.touched.len();
        self.keep_buffers(pass);
        Ok(AdmitOk {
            bounds,
            changed,
            servers_touched: order.len(),
            flows_touched,
        })
    }

    /// Keeps an accepted pass's buffers, emptied, for the next one.
    fn keep_buffers(&mut self, mut pass: Pass) {
        pass.clear();
        self.spare = Spare(pass);
    }

    /// The flows of a pass (except `skip`) whose TFA or SFA bound changed, by name.
    fn changed_bounds(&self, pass: &Pass, skip: Option<usize>) -> Vec<FlowBounds> {
        // Sized once: most flows of a pass change, and growing the vector step by
        // step copied the bounds built so far several times.
        let mut changed = Vec::with_capacity(pass.ends.len());
        changed.extend(
            pass.ends
                .iter()
                .filter(|(s, _, _)| Some(*s) != skip)
                .filter_map(|(s, tfa, sfa)| {
                    let f = self.flows.get(*s)?.as_ref()?;
                    (f.st.tfa != *tfa || f.st.sfa != *sfa).then(|| Self::bounds_of(f))
                }),
        );
        changed.sort_by(|a, b| a.name.cmp(&b.name));
        changed
    }

    /// Removes a flow and recomputes what it touched; `None` for an unknown name.
    pub fn remove(&mut self, name: &str) -> Option<RemoveOk> {
        let slot = *self.flow_index.get(name)?;
        let f = self.flows[slot].as_ref()?;
        let removed = Self::bounds_of(f);
        let path = f.path.clone();
        let cone = self.cone(&path, &[]);
        // Still topological once the flow's edges are gone.
        let order = self.topo_order(&cone).ok()?;
        self.remove_slot(slot);
        let mut pass = std::mem::take(&mut self.spare.0);
        // Cannot fail: less traffic than a state that had finite bounds.
        if self.recompute(&order, &mut pass).is_err() {
            self.reanalyse_all();
            return Some(RemoveOk {
                removed,
                changed: Vec::new(),
            });
        }
        let changed = self.changed_bounds(&pass, None);
        self.keep_buffers(pass);
        Some(RemoveOk { removed, changed })
    }

    fn reanalyse_all(&mut self) {
        let all: Vec<usize> = (0..self.servers.len()).collect();
        if let Ok(order) = self.topo_order(&all) {
            // On failure (impossible for a state that was analysed) nothing changes.
            let _ = self.analyse_all(&order);
        }
    }

    /// Rounds the FIFO delay by which a flow's arrival curve is shifted to the next
    /// server *up* to a multiple of `grid` (e.g. 1 ps), or stops rounding (`None`, the
    /// default), and re-analyses everything.
    ///
    /// Why: exact arithmetic is exact, but every FIFO hop divides by a rate and the
    /// next hop's bursts contain that quotient, so denominators grow with the depth
    /// of the network and deep networks spend their time in big-integer arithmetic.
    /// A larger arrival curve is still an arrival curve, so rounding the propagated
    /// delay up keeps every bound valid (and monotone) while keeping the numbers
    /// small; each bound grows by at most the flows' rates times one grid step per
    /// hop. Single-server results, and every per-hop delay, stay exact functions of
    /// their (rounded-up) inputs.
    pub fn set_propagation_grid(&mut self, grid: Option<Q>) {
        self.grid = grid.filter(Q::is_positive);
        self.reanalyse_all();
    }

    /// The bounds of one flow.
    pub fn bounds(&self, name: &str) -> Option<FlowBounds> {
        let slot = *self.flow_index.get(name)?;
        let f = self.flows[slot].as_ref()?;
        Some(Self::bounds_of(f))
    }

    /// The bounds of one server.
    pub fn server_bounds(&self, name: &str) -> Option<ServerBounds> {
        let j = *self.server_index.get(name)?;
        Some(self.server_bounds_of(j, &self.sstate[j]))
    }

    fn server_bounds_of(&self, j: usize, st: &ServerState) -> ServerBounds {
        let s = &self.servers[j];
        let arrivals: Vec<&Curve> = st
            .members
            .iter()
            .filter_map(|&(slot, k)| self.flows.get(slot)?.as_ref()?.st.arrivals.get(k))
            .collect();
        let sum_b: Q = arrivals.iter().map(|a| a.token_bucket_envelope().1).sum();
        let spec_port = match s.multiplexing {
            Multiplexing::Fifo => spec_port(&s.rate, &s.latency, &arrivals),
            Multiplexing::Arbitrary => None,
        };
        ServerBounds {
            name: s.name.clone(),
            multiplexing: s.multiplexing,
            rate: s.rate.clone(),
            latency: s.latency.clone(),
            flows: st.members.len(),
            load: st.load.clone(),
            backlog: st.backlog.clone(),
            buffer: s.buffer.clone(),
            fifo_delay: st.fifo_delay.clone(),
            backlog_estimate: &sum_b + &(&s.rate * &s.latency),
            delay_estimate: &sum_b / &s.rate + &s.latency,
            spec_port,
        }
    }

    /// Every bound, as the state holds it.
    pub fn snapshot(&self) -> Report {
        let mut flows: Vec<&FlowSlot> = self.flows.iter().flatten().collect();
        flows.sort_by_key(|f| f.seq);
        Report {
            flows: flows.iter().map(|f| Self::bounds_of(f)).collect(),
            servers: (0..self.servers.len())
                .map(|j| self.server_bounds_of(j, &self.sstate[j]))
                .collect(),
        }
    }

    /// Every bound recomputed from scratch (what the incremental state must equal).
    pub fn full_reanalysis(&self) -> Report {
        let mut copy = self.clone();
        copy.reanalyse_all();
        copy.snapshot()
    }

    /// The network as it stands (servers, and the admitted flows in order).
    pub fn network(&self) -> Network {
        let mut flows: Vec<&FlowSlot> = self.flows.iter().flatten().collect();
        flows.sort_by_key(|f| f.seq);
        Network {
            servers: self.servers.clone(),
            flows: flows.iter().map(|f| f.def.clone()).collect(),
        }
    }

    /// Number of admitted flows.
    pub fn len(&self) -> usize {
        self.flow_index.len()
    }
    pub fn is_empty(&self) -> bool {
        self.flow_index.is_empty()
    }
}

/// The loeser port (loeser Eq. 2–7) when every arrival curve is a T-SPEC whose peak
/// is the port rate, or a token bucket.
fn spec_port(rate: &Q, latency: &Q, arrivals: &[&Curve]) -> Option<FifoPort> {
    let mut flows = Vec::with_capacity(arrivals.len());
    for a in arrivals {
        let (r, b) = a.token_bucket_envelope();
        match a.slopes() {
            [c, _] if c == rate => {}
            [_] => {}
            _ => return None,
        }
        flows.push(PortFlow::new(r, b, a.burst().clone()));
    }
    fifo_port(rate, latency, &flows).ok()
}

/// The current arrival curves of a server's members; marks each member touched by
/// this pass (numbered `epoch`) and lists the ones touched first here.
fn touch_members<'a>(
    st: &ServerState,
    flows: &'a [Option<FlowSlot>],
    mark: &mut [u64],
    epoch: u64,
    pass: &mut Pass,
) -> Option<Vec<&'a Curve>> {
    let mut members = Vec::with_capacity(st.members.len());
    for &(slot, k) in &st.members {
        members.push(flows.get(slot)?.as_ref()?.st.arrivals.get(k)?);
        if mark[slot] != epoch {
            mark[slot] = epoch;
            pass.touched.push(slot);
        }
    }
    Some(members)
}

/// The separated flow analysis bound of a flow with arrival curve `alpha` at its first
/// hop and its residual service at each hop: convolve, then one delay bound.
fn separated_bound(alpha: &Curve, hops: &[Service]) -> Option<Q> {
    if hops.iter().all(Service::is_rate_latency) {
        // β_{R1,T1} ⊗ β_{R2,T2} ⊗ … = β_{min R, Σ T}: no curve to build.
        let (first, rest) = hops.split_first()?;
        let mut rate = first.rate();
        let mut latency = first.latency().clone();
        for s in rest {
            rate = std::cmp::min(rate, s.rate());
            latency = &latency + s.latency();
        }
        return crate::curve::delay_bound_rate_latency(alpha, rate, &latency);
    }
    let (first, rest) = hops.split_first()?;
    let beta = rest.iter().fold(first.clone(), |acc, s| acc.convolve(s));
    delay_bound(alpha, &beta)
}

/// Analyses a whole network once.
pub fn analyse(net: &Network) -> Result<Report, InputError> {
    Ok(Admission::new(net)?.snapshot())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Servers: rate, latency in halves. Flows: path mask, r, b, optional (C − r, M),
    /// optional deadline in quarters.
    type Spec = (
        Vec<(i64, i64)>,
        Vec<(Vec<bool>, i64, i64, Option<(i64, i64)>, Option<i64>)>,
    );

    fn spec() -> impl Strategy<Value = Spec> {
        (1usize..=5).prop_flat_map(|n| {
            let servers = prop::collection::vec((12i64..=24, 0i64..=4), n);
            let flow = (
                prop::collection::vec(any::<bool>(), n),
                1i64..=3,
                1i64..=20,
                prop::option::of((0i64..=20, 1i64..=20)),
                prop::option::of(4i64..=60),
            );
            (servers, prop::collection::vec(flow, 1..=7))
        })
    }

    fn network(s: &Spec) -> Network {
        let q = |n: i64, d: i64| Q::ratio(n.into(), d.into()).unwrap_or_default();
        let servers =
            s.0.iter()
                .enumerate()
                .map(|(k, &(r, l))| Server {
                    name: format!("s{k}"),
                    rate: Q::int(r),
                    latency: q(l, 2),
                    buffer: None,
                    multiplexing: Multiplexing::Fifo,
                    shaper: None,
                })
                .collect();
        let flows =
            s.1.iter()
                .enumerate()
                .map(|(k, (mask, r, b, peak, deadline))| {
                    let mut path: Vec<String> = (0..mask.len())
                        .filter(|&j| mask[j])
                        .map(|j| format!("s{j}"))
                        .collect();
                    if path.is_empty() {
                        path.push(format!("s{}", k % mask.len()));
                    }
                    let (peak, max_packet) = match peak {
                        Some((extra, m)) => (Some(Q::int(r + extra)), Some(Q::int((*m).min(*b)))),
                        None => (None, None),
                    };
                    Flow {
                        name: format!("f{k}"),
                        path,
                        rate: Q::int(*r),
                        burst: Q::int(*b),
                        peak,
                        max_packet,
                        deadline: deadline.map(|d| q(d, 4)),
                    }
                })
                .collect();
        Network { servers, flows }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// On FIFO networks the closed forms give exactly the bounds of the general
        /// analysis (hop by hop residual services, summed envelopes), through
        /// admissions, rejections and removals, with and without a grid.
        #[test]
        fn closed_forms_equal_the_general_analysis(s in spec(), grid in prop::option::of(1i64..=5)) {
            let net = network(&s);
            let grid = grid.and_then(|g| Q::ratio(g.into(), 7));
            let empty = Network { servers: net.servers.clone(), flows: vec![] };
            let mut closed = Admission::with_grid(&empty, grid.clone()).unwrap();
            let mut general = closed.clone();
            prop_assert!(closed.closed);
            general.closed = false;
            for f in &net.flows {
                let a = closed.admit(f.clone());
                let b = general.admit(f.clone());
                prop_assert_eq!(&a, &b);
                prop_assert_eq!(closed.snapshot(), general.snapshot());
            }
            for f in &net.flows {
                prop_assert_eq!(closed.remove(&f.name), general.remove(&f.name));
                prop_assert_eq!(closed.snapshot(), general.snapshot());
            }
        }
    }
}
