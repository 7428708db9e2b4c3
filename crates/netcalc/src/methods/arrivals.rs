//! Arrival curves at every server of a feed-forward network, per flow and per
//! bundle.
//!
//! Servers are visited in topological order. What arrives at a server comes in
//! *bundles*: the flows that a predecessor sent this way together, with one curve
//! bounding their sum (a flow entering the network here is a bundle of its own).
//! Leaving a server, the flows are grouped by their next server, and each group `G`
//! is bounded by the deconvolution `α_G ⊘ β_G` of what arrived of it by the service
//! it gets — the server itself when nothing else crosses it, else the residual left
//! by the others (FIFO: `θ = T + burst/R` member of the FIFO family; arbitrary:
//! `[β − α_cross]+`). Each flow also keeps a curve of its own: the smaller of its
//! deconvolution by its own residual, its group's curve and, at a FIFO server,
//! `α(t + D)` with `D` the aggregate's delay bound; after arbitrary servers, its
//! source curve deconvolved by the PMOO residual of its path so far. A server with
//! an output shaper `R t + M` bounds everything it sends on, so every group's and
//! every flow's curve leaving it is also min'ed with the shaper (still concave: the
//! minimum of concave piecewise-linear curves). An unbounded output stays unbounded:
//! the shaper alone, without a server-side bound, is not used as one.
//!
//! What arrived of a set of flows `S` is then bounded by summing, over the bundles,
//! the bundle's curve when the bundle lies inside `S`, the smaller of the bundle's
//! curve and its members' own curves when it overlaps `S`, and nothing otherwise.

use std::collections::HashMap;

use crate::curve::{delay_bound, Curve, Service};
use crate::model::{cycle_message, InputError, Multiplexing, Network, Server, Shaper};
use crate::q::Q;

use super::NoBound;

/// Flows that arrive at a server together, and a bound on their sum.
#[derive(Clone, Debug)]
pub(crate) struct Bundle {
    /// Flow indices, ascending.
    pub flows: Vec<usize>,
    pub curve: Curve,
}

/// The arrival curves of a network.
#[derive(Clone, Debug)]
pub struct Arrivals {
    pub(crate) servers: Vec<Server>,
    /// Each flow's path, as server indices.
    pub(crate) paths: Vec<Vec<usize>>,
    /// Each flow's arrival curve at each hop of its path.
    pub(crate) per_flow: Vec<Vec<Curve>>,
    /// What arrives at each server, in bundles.
    pub(crate) bundles: Vec<Vec<Bundle>>,
    /// The flows crossing each server, ascending.
    pub(crate) at: Vec<Vec<usize>>,
    /// FIFO servers: the delay bound of everything crossing them.
    pub(crate) fifo_delay: Vec<Option<Q>>,
    /// The first server whose output has no bound (the analyses then give none).
    pub(crate) unbounded: Option<String>,
}

impl Arrivals {
    /// Propagates the flows' arrival curves through `net` (a valid network; a cycle
    /// is an error naming it).
    pub fn of(net: &Network) -> Result<Arrivals, InputError> {
        let (mut arr, order) = Arrivals::start(net)?;
        arr.propagate(&order, &|| false);
        Ok(arr)
    }

    /// [`Arrivals::of`], asking `stop` before each server: `None` once it says yes.
    pub fn of_until(
        net: &Network,
        stop: &dyn Fn() -> bool,
    ) -> Result<Option<Arrivals>, InputError> {
        let (mut arr, order) = Arrivals::start(net)?;
        Ok(arr.propagate(&order, stop).then_some(arr))
    }

    /// [`Arrivals::of`] with each flow's curve at its first server given (`sources`,
    /// in the flows' order) and flows that enter the network together: each group
    /// (flows with the same first server) arrives as one bundle bounded by the
    /// smaller of its curve and its members' sum.
    pub(crate) fn of_sources(
        net: &Network,
        sources: &[Curve],
        groups: &[(Vec<usize>, Curve)],
    ) -> Result<Arrivals, InputError> {
        let (mut arr, order) = Arrivals::start(net)?;
        for (own, c) in arr.per_flow.iter_mut().zip(sources) {
            own[0] = c.clone();
        }
        arr.bundles.iter_mut().for_each(Vec::clear);
        let mut alone = vec![true; arr.paths.len()];
        for (flows, curve) in groups {
            let mut flows = flows.clone();
            flows.sort_unstable();
            let Some(&first) = flows.first().and_then(|&f| arr.paths[f].first()) else {
                continue;
            };
            flows.iter().for_each(|&f| alone[f] = false);
            let sum = Curve::sum(flows.iter().map(|&f| &arr.per_flow[f][0]));
            arr.bundles[first].push(Bundle {
                flows,
                curve: sum.min(curve),
            });
        }
        for (f, p) in arr.paths.iter().enumerate() {
            if let (true, Some(&first)) = (alone[f], p.first()) {
                arr.bundles[first].push(Bundle {
                    flows: vec![f],
                    curve: arr.per_flow[f][0].clone(),
                });
            }
        }
        arr.propagate(&order, &|| false);
        Ok(arr)
    }

    /// The sources' curves at their first servers, and the servers in the order the
    /// propagation takes them.
    fn start(net: &Network) -> Result<(Arrivals, Vec<usize>), InputError> {
        let paths = paths(net);
        let n = net.servers.len();
        let order = topological(n, &paths).map_err(|cycle| {
            let names: Vec<String> = cycle.iter().map(|&s| net.servers[s].name.clone()).collect();
            InputError::general(cycle_message(&names))
        })?;
        let mut at = vec![Vec::new(); n];
        for (f, p) in paths.iter().enumerate() {
            for &s in p {
                at[s].push(f);
            }
        }
        let mut arr = Arrivals {
            servers: net.servers.clone(),
            per_flow: net
                .flows
                .iter()
                .zip(&paths)
                .map(|(f, p)| {
                    let mut v = Vec::with_capacity(p.len());
                    v.push(f.arrival_curve());
                    v
                })
                .collect(),
            paths,
            bundles: vec![Vec::new(); n],
            at,
            fifo_delay: vec![None; n],
            unbounded: None,
        };
        for (f, p) in arr.paths.iter().enumerate() {
            if let Some(&first) = p.first() {
                arr.bundles[first].push(Bundle {
                    flows: vec![f],
                    curve: arr.per_flow[f][0].clone(),
                });
            }
        }
        Ok((arr, order))
    }

    /// What leaves each server, in `order`; `false` once `stop` (asked before each
    /// server) says so.
    fn propagate(&mut self, order: &[usize], stop: &dyn Fn() -> bool) -> bool {
        for &s in order {
            if stop() {
                return false;
            }
            self.leave(s);
            if self.unbounded.is_some() {
                break;
            }
        }
        true
    }

    /// `Ok` when every output was bounded; else why no method can bound anything.
    pub(crate) fn bounded(&self) -> Result<(), NoBound> {
        match &self.unbounded {
            Some(s) => Err(NoBound::Unbounded(format!("no bound on what leaves {s}"))),
            None => Ok(()),
        }
    }

    /// The name of the first of `servers` not under multiplexing `mux`.
    pub(crate) fn first_not(&self, servers: &[usize], mux: Multiplexing) -> Option<&str> {
        servers
            .iter()
            .map(|&s| &self.servers[s])
            .find(|srv| srv.multiplexing != mux)
            .map(|srv| srv.name.as_str())
    }

    /// The hop at which flow `f` crosses server `s`.
    pub(crate) fn hop(&self, f: usize, s: usize) -> Option<usize> {
        self.paths[f].iter().position(|&x| x == s)
    }

    /// Flow `f`'s arrival curve at server `s` (which it crosses).
    pub(crate) fn curve_at(&self, f: usize, s: usize) -> Option<&Curve> {
        self.hop(f, s).and_then(|h| self.per_flow[f].get(h))
    }

    /// A bound on what arrives at server `s` of the flows in `set` (ascending).
    pub(crate) fn subset(&self, s: usize, set: &[usize]) -> Curve {
        let mut parts = Vec::new();
        for b in &self.bundles[s] {
            let inside: Vec<usize> = b
                .flows
                .iter()
                .copied()
                .filter(|f| set.binary_search(f).is_ok())
                .collect();
            if inside.is_empty() {
                continue;
            }
            if inside.len() == b.flows.len() {
                parts.push(b.curve.clone());
                continue;
            }
            let own = Curve::sum(inside.iter().filter_map(|&f| self.curve_at(f, s)));
            parts.push(own.min(&b.curve));
        }
        Curve::sum(parts.iter())
    }

    /// What arrives at `s` of every flow crossing it except those in `set`.
    pub(crate) fn others(&self, s: usize, set: &[usize]) -> Vec<usize> {
        self.at[s]
            .iter()
            .copied()
            .filter(|f| set.binary_search(f).is_err())
            .collect()
    }

    /// The service server `s` leaves to the flows in `set`: the server's own curve
    /// when nothing else crosses it, else the residual by its multiplexing (FIFO:
    /// the member of the family `theta` picks). `None` when the others take the
    /// whole rate.
    pub(crate) fn residual(&self, s: usize, set: &[usize], theta: Theta) -> Option<Service> {
        let srv = &self.servers[s];
        let others = self.others(s, set);
        if others.is_empty() {
            return Some(Service::rate_latency(srv.rate.clone(), srv.latency.clone()));
        }
        let cross = self.subset(s, &others);
        match (srv.multiplexing, theta) {
            (Multiplexing::Fifo, Theta::Burst) => {
                Service::fifo_residual(&srv.rate, &srv.latency, &cross)
            }
            (Multiplexing::Fifo, Theta::Envelope) => {
                Service::fifo_residual_token_bucket(&srv.rate, &srv.latency, &cross)
            }
            (Multiplexing::Arbitrary, _) => {
                Service::arbitrary_residual(&srv.rate, &srv.latency, &cross)
            }
        }
    }

    /// Bounds what leaves server `s`, per next server and per flow. Marks the
    /// network unbounded (naming `s`) when some output has no bound.
    fn leave(&mut self, s: usize) {
        let srv = self.servers[s].clone();
        if srv.multiplexing == Multiplexing::Fifo {
            let total = self.subset(s, &self.at[s].clone());
            let beta = Service::rate_latency(srv.rate.clone(), srv.latency.clone());
            self.fifo_delay[s] = delay_bound(&total, &beta);
        }
        for (next, group) in self.groups_leaving(s) {
            let group_out = self.output_of(s, &group);
            let mut outs = Vec::with_capacity(group.len());
            for &f in &group {
                let mut out = self.output_of(s, &[f]);
                if let Some(d) = &self.fifo_delay[s] {
                    out = tighter(out, self.curve_at(f, s).map(|c| c.shift(d)));
                } else if let Some(h) = self.hop(f, s).filter(|&h| h > 0) {
                    // through arbitrary servers: the PMOO residual of the path so
                    // far pays each cross burst once
                    if let Ok(beta) = super::pmoo::service(self, f, h) {
                        out = tighter(out, self.per_flow[f][0].deconvolve(&beta));
                    }
                }
                if group.len() > 1 {
                    out = tighter(out, group_out.clone());
                }
                outs.push(out);
            }
            // the server's shaper bounds everything leaving it, so each flow and
            // each bundle too (a bound without one still has none)
            let shaper = srv.shaper.as_ref().map(Shaper::curve);
            let shaped = |c: Curve| match &shaper {
                Some(sh) => c.min(sh),
                None => c,
            };
            let outs: Option<Vec<Curve>> = outs.into_iter().map(|o| o.map(shaped)).collect();
            let Some(outs) = outs else {
                self.unbounded.get_or_insert(srv.name.clone());
                return;
            };
            let own = Curve::sum(outs.iter());
            let curve = shaped(group_out.map_or_else(|| own.clone(), |g| g.min(&own)));
            for (&f, c) in group.iter().zip(outs) {
                self.per_flow[f].push(c);
            }
            self.bundles[next].push(Bundle {
                flows: group,
                curve,
            });
        }
    }

    /// The flows at `s` that go on, grouped by their next server.
    fn groups_leaving(&self, s: usize) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for &f in &self.at[s] {
            let Some(h) = self.hop(f, s) else { continue };
            let Some(&next) = self.paths[f].get(h + 1) else {
                continue;
            };
            match groups.iter_mut().find(|(n, _)| *n == next) {
                Some((_, g)) => g.push(f),
                None => groups.push((next, vec![f])),
            }
        }
        groups
    }

    /// `α_set ⊘ β_set` at server `s`, the smaller of both FIFO residuals; `None`
    /// when unbounded.
    fn output_of(&self, s: usize, set: &[usize]) -> Option<Curve> {
        let alpha = self.subset(s, set);
        let out = |theta| {
            self.residual(s, set, theta)
                .and_then(|beta| alpha.deconvolve(&beta))
        };
        let burst = out(Theta::Burst);
        if self.servers[s].multiplexing == Multiplexing::Arbitrary {
            return burst;
        }
        tighter(burst, out(Theta::Envelope))
    }
}

/// Which member of the FIFO residual family `[β(t) − α_c(t − θ)]+ 1{t > θ}` to use.
/// Neither dominates the other when the cross traffic has a peak rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Theta {
    /// `θ = T + α_c(0+)/R`: the largest without a jump.
    Burst,
    /// `θ = T + b/R` with `(r, b)` the cross traffic's token-bucket envelope: the
    /// classic `β_{R − r, T + b/R}`.
    Envelope,
}

/// The smaller of two optional bounds on the same traffic.
fn tighter(a: Option<Curve>, b: Option<Curve>) -> Option<Curve> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(&b)),
        (a, b) => a.or(b),
    }
}

/// The servers of `net` in an order every path follows; on a cycle (a flow that
/// visits a server twice is one), the servers on it or after it.
pub(crate) fn order(net: &Network) -> Result<Vec<usize>, Vec<usize>> {
    topological(net.servers.len(), &paths(net))
}

/// Each flow's path as server indices (unknown names left out).
fn paths(net: &Network) -> Vec<Vec<usize>> {
    let index: HashMap<&str, usize> = net
        .servers
        .iter()
        .enumerate()
        .map(|(k, s)| (s.name.as_str(), k))
        .collect();
    net.flows
        .iter()
        .map(|f| {
            f.path
                .iter()
                .filter_map(|n| index.get(n.as_str()).copied())
                .collect()
        })
        .collect()
}

/// The servers in an order every path follows; on a cycle, the servers on it.
fn topological(n: usize, paths: &[Vec<usize>]) -> Result<Vec<usize>, Vec<usize>> {
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indeg = vec![0usize; n];
    for p in paths {
        for w in p.windows(2) {
            if !succ[w[0]].contains(&w[1]) {
                succ[w[0]].push(w[1]);
                indeg[w[1]] += 1;
            }
        }
    }
    let mut ready: Vec<usize> = (0..n).rev().filter(|&s| indeg[s] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(s) = ready.pop() {
        order.push(s);
        for &t in &succ[s] {
            indeg[t] -= 1;
            if indeg[t] == 0 {
                ready.push(t);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    Err((0..n).filter(|&s| indeg[s] > 0).collect())
}
