//! The LP analysis of a cyclic network: a fixed point on the bursts of the flows
//! where the cycles are cut, each round solving linear programs on the cut,
//! feed-forward network (after Bouillard's treatment of cyclic networks in panco,
//! written for this crate).
//!
//! Servers are ranked (their order in the network); a hop from a server to one of
//! the same or a lower rank is *cut*, which leaves a feed-forward network in which
//! each flow is a chain of *segments*, one per piece of its path between cuts. A
//! segment after a cut is a flow of its own there, entering with a curve that bounds
//! what its flow sends across the cut. The iteration starts from the TFA fixed point
//! (valid when it converges, [`super::cyclic`]): a segment's entry curve is its
//! flow's curve shifted by the TFA delay bounds of the servers it crossed before,
//! and bounded by the shaper (and, with line shaping, the line) of the server it
//! leaves; the segments that cross the same cut together are bounded together by it.
//! Each round then analyses the cut network with these curves and bounds what each
//! segment sends across its cut by the smaller of `b + r d` (`(r, b)` its entry
//! curve's token bucket, `d` its smaller TFA or SFA bound there) and the LP's bound
//! on its output burst ([`super::plp::output_burst`]), and takes the smaller of that
//! and the curve it had. Every round's curves are valid (valid curves in, valid bounds out),
//! so the iteration may stop anywhere: it stops when a round lowers no burst by more
//! than [`PROGRESS`] (relative), or after [`MAX_ROUNDS`] rounds.
//!
//! A flow's bound is then the sum of its segments' best bounds (TFA, SFA, LP on the
//! cut network with the last curves), or its TFA fixed-point bound when smaller.

use super::{cyclic, lp, plp, sfa, tfa, Arrivals, Bound, NoBound};
use crate::curve::Curve;
use crate::model::{Flow, InputError, Network};
use crate::q::Q;

/// Rounds after which the iteration stops even if it still improves.
pub const MAX_ROUNDS: usize = 40;
/// A round that lowers no burst by more than this fraction of it ends the iteration.
pub const PROGRESS: f64 = 1e-4;

/// What the fixed point gives: every flow's bound, the rounds it took, and whether
/// it stopped because the bursts stopped improving (not at [`MAX_ROUNDS`]).
#[derive(Clone, Debug)]
pub struct FixedPoint {
    pub bounds: Vec<Bound>,
    pub rounds: usize,
    pub converged: bool,
}

/// The fixed point on `net`, with hops from a server to one of the same or lower
/// `rank` cut (`rank[s]` for every server); `None` once `stop` says so.
pub fn run(
    net: &Network,
    line_shaping: bool,
    rank: &[usize],
    stop: &dyn Fn() -> bool,
) -> Result<Option<FixedPoint>, InputError> {
    let paths = cyclic::paths(net)?;
    if rank.len() < net.servers.len() {
        return Err(InputError::general(format!(
            "{} ranks for {} servers",
            rank.len(),
            net.servers.len()
        )));
    }
    let none = |why: NoBound| FixedPoint {
        bounds: vec![Err(why); net.flows.len()],
        rounds: 0,
        converged: false,
    };
    if let Some(why) = cyclic::not_fifo(net) {
        return Ok(Some(none(why)));
    }
    let d = match cyclic::delays(net, &paths, line_shaping, stop) {
        Ok(None) => return Ok(None),
        Ok(Some(d)) => d,
        Err(why) => {
            let why = format!("no starting point: the TFA fixed point gives none ({why})");
            return Ok(Some(none(NoBound::Unbounded(why))));
        }
    };
    let cut = Cut::new(net, &paths, rank, line_shaping);
    let tfa_bounds: Vec<Q> = paths
        .iter()
        .map(|p| p.iter().map(|&s| d[s].clone()).sum())
        .collect();
    let mut sources = cut.start(net, &paths, &d);
    for round in 1..=MAX_ROUNDS {
        if stop() {
            return Ok(None);
        }
        let arr = Arrivals::of_sources(&cut.net, &sources, &cut.groups)?;
        let next = cut.improve(&arr, &sources);
        let more = progressed(&sources, &next);
        if round == MAX_ROUNDS || !more {
            return Ok(Some(FixedPoint {
                bounds: cut.bounds(&arr, &tfa_bounds),
                rounds: round,
                converged: !more,
            }));
        }
        sources = next;
    }
    Ok(None)
}

/// The cut network: one flow per segment.
struct Cut {
    net: Network,
    /// Each segment's flow and the hops of its path it covers.
    segs: Vec<(usize, std::ops::Range<usize>)>,
    /// Each segment entering through a cut: the shaper (and line) of the server it
    /// leaves, if any.
    limit: Vec<Option<Curve>>,
    /// The segments that cross the same cut together, and that server's shaper.
    groups: Vec<(Vec<usize>, Curve)>,
}

impl Cut {
    fn new(net: &Network, paths: &[Vec<usize>], rank: &[usize], line_shaping: bool) -> Cut {
        let shaping = limits(net, paths, line_shaping);
        let mut cut = Cut {
            net: Network {
                servers: net.servers.clone(),
                flows: Vec::new(),
            },
            segs: Vec::new(),
            limit: Vec::new(),
            groups: Vec::new(),
        };
        // the segments entering through each cut hop (from, to)
        let mut hops: Vec<((usize, usize), Vec<usize>)> = Vec::new();
        for (g, p) in paths.iter().enumerate() {
            let mut start = 0;
            for h in 1..=p.len() {
                if h < p.len() && rank[p[h]] > rank[p[h - 1]] {
                    continue;
                }
                let k = cut.segs.len();
                cut.segment(net, g, start..h, p);
                let from = start.checked_sub(1).map(|j| p[j]);
                cut.limit.push(from.and_then(|s| shaping[s].clone()));
                if let Some(from) = from {
                    match hops.iter_mut().find(|(e, _)| *e == (from, p[start])) {
                        Some((_, v)) => v.push(k),
                        None => hops.push(((from, p[start]), vec![k])),
                    }
                }
                start = h;
            }
        }
        cut.groups = hops
            .into_iter()
            .filter_map(|((from, _), v)| Some((v, shaping[from].clone()?)))
            .collect();
        cut
    }

    /// Adds flow `g`'s segment over `hops` of its path `p`.
    fn segment(&mut self, net: &Network, g: usize, hops: std::ops::Range<usize>, p: &[usize]) {
        let f = &net.flows[g];
        self.net.flows.push(Flow {
            name: format!("{}#{}", f.name, hops.start),
            path: p[hops.clone()]
                .iter()
                .map(|&s| net.servers[s].name.clone())
                .collect(),
            rate: f.rate.clone(),
            burst: f.burst.clone(),
            peak: None,
            max_packet: None,
            deadline: None,
        });
        self.segs.push((g, hops));
    }

    /// The entry curves from the TFA fixed point's server delays `d`.
    fn start(&self, net: &Network, paths: &[Vec<usize>], d: &[Q]) -> Vec<Curve> {
        self.segs
            .iter()
            .zip(&self.limit)
            .map(|((g, hops), limit)| {
                let before: Q = paths[*g][..hops.start].iter().map(|&s| d[s].clone()).sum();
                let c = net.flows[*g].arrival_curve().shift(&before);
                limit.as_ref().map_or_else(|| c.clone(), |l| c.min(l))
            })
            .collect()
    }

    /// The next round's entry curves: each segment after a cut bounded by what the
    /// segment before it can send.
    fn improve(&self, arr: &Arrivals, sources: &[Curve]) -> Vec<Curve> {
        let mut next = sources.to_vec();
        for k in 1..self.segs.len() {
            if self.segs[k].0 != self.segs[k - 1].0 {
                continue;
            }
            let (r, b) = sources[k - 1].token_bucket_envelope();
            let by_delay = cheap(arr, k - 1)
                .ok()
                .map(|d| b.add_ref(&r.mul_ref(&d)).to_f64());
            let by_lp = plp::output_burst(arr, k - 1).ok();
            let burst = [by_delay, by_lp].into_iter().flatten().reduce(f64::min);
            if let Some(q) = burst.and_then(bits_up) {
                next[k] = next[k].min(&Curve::token_bucket(r, q));
            }
        }
        next
    }

    /// Each flow's bound: the sum of its segments' best bounds, or its TFA
    /// fixed-point bound when smaller.
    fn bounds(&self, arr: &Arrivals, tfa_bounds: &[Q]) -> Vec<Bound> {
        let mut sums: Vec<Option<Q>> = vec![None; tfa_bounds.len()];
        for (g, _) in &self.segs {
            sums[*g] = Some(Q::zero());
        }
        for (k, (g, _)) in self.segs.iter().enumerate() {
            let d = best(arr, k).ok();
            sums[*g] = sums[*g].take().zip(d).map(|(a, b)| a.add_ref(&b));
        }
        sums.into_iter()
            .zip(tfa_bounds)
            .map(|(s, t)| Ok(s.map_or_else(|| t.clone(), |s| s.min(t.clone()))))
            .collect()
    }
}

/// What each server sends on is at most its shaper and, with `line_shaping`, its
/// line (`R t + M`, `M` its largest packet), the smaller of both; `None` when
/// neither applies.
fn limits(net: &Network, paths: &[Vec<usize>], line_shaping: bool) -> Vec<Option<Curve>> {
    let largest = if line_shaping {
        cyclic::largest_packets(net, paths)
    } else {
        vec![None; net.servers.len()]
    };
    net.servers
        .iter()
        .zip(largest)
        .map(|(srv, m)| {
            let line = m.map(|m| Curve::token_bucket(srv.rate.clone(), m));
            let own = srv.shaper.as_ref().map(|s| s.curve());
            match (line, own) {
                (Some(a), Some(b)) => Some(a.min(&b)),
                (a, b) => a.or(b),
            }
        })
        .collect()
}

/// Segment `k`'s smallest bound on the cut network (TFA, SFA, LP).
fn best(arr: &Arrivals, k: usize) -> Bound {
    let all = [tfa::flow(arr, k), sfa::flow(arr, k), lp::flow(arr, k)];
    let mut out: Option<Q> = None;
    for q in all.into_iter().flatten() {
        out = Some(out.map_or(q.clone(), |o| o.min(q)));
    }
    out.ok_or_else(|| NoBound::Unbounded("no method bounds the segment".into()))
}

/// Segment `k`'s smaller bound of TFA and SFA (no program to solve).
fn cheap(arr: &Arrivals, k: usize) -> Bound {
    let (a, b) = (tfa::flow(arr, k), sfa::flow(arr, k));
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A burst from the solver, in bits, raised by the LP's margin and rounded up to
/// 10⁻⁶ bit.
fn bits_up(b: f64) -> Option<Q> {
    let up = (b.max(0.0) * (1.0 + lp::MARGIN) * 1e6).ceil() + 1.0;
    if !up.is_finite() || up > 1e30 {
        return None;
    }
    Q::ratio(up as i128, 1_000_000)
}

/// Whether some entry curve's burst fell by more than [`PROGRESS`] of it.
fn progressed(old: &[Curve], new: &[Curve]) -> bool {
    old.iter().zip(new).any(|(a, b)| {
        let (x, y) = (
            a.token_bucket_envelope().1.to_f64(),
            b.token_bucket_envelope().1.to_f64(),
        );
        x - y > PROGRESS * x.abs().max(1e-9)
    })
}
