//! Why a cyclic network's TFA fixed point diverges, in numbers: how loaded the
//! servers on its cycles are, and how far every flow's rate would have to come down
//! for the fixed point to converge.
//!
//! Without shapers the fixed point is `D = c + A D` ([`super::cyclic`]); it
//! converges exactly when `I − A` is a nonsingular M-matrix, i.e. when the spectral
//! radius `ρ(A)` is below 1. Every entry of `A` is a flow's rate over a server's
//! (`r / R`, once per visit), so with every flow's rate scaled by `s` the matrix is
//! `s A` and the fixed point converges exactly when `s < 1/ρ(A)`. The bursts only
//! enter `c`: the threshold is the same whether they are scaled too or kept; here
//! they are kept (the flows send the same packets, fewer of them). With shapers (a
//! scenario's links, `line_shaping`) the delays are not affine and there is no such
//! closed form, but each server's delay bound still only grows with the rates, so
//! converging is monotone in the scale there too; shapers only lower what enters a
//! server, so that threshold is at least the affine one.
//!
//! Either way the threshold is found by bisection over the multiples of
//! `1/`[`SCALE_STEPS`], each tested by running the fixed point itself on the scaled
//! network (exact rationals: the affine one by Gaussian elimination, every pivot
//! positive; the shaped one by its iteration, with its limits).

use super::{cyclic, is_cyclic};
use crate::model::{InputError, Network};
use crate::q::Q;

/// The threshold is a multiple of `1/SCALE_STEPS` (0.1 %), rounded down.
pub const SCALE_STEPS: i64 = 1000;

/// A server on a cycle at the highest utilisation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Busiest {
    /// Its index in the network's servers.
    pub server: usize,
    /// How many times flows cross it (a flow that loops counts at every visit).
    pub crossings: usize,
}

/// Why the TFA fixed point of a cyclic network diverges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    /// The servers on a cycle at the highest utilisation, in the network's order.
    pub busiest: Vec<Busiest>,
    /// Their utilisation: the sustained rates of the flows crossing them, every
    /// visit counted, over the service rate.
    pub utilisation: Q,
    /// The largest multiple of `1/SCALE_STEPS` by which every flow's rate can be
    /// multiplied (bursts as they are) for the fixed point to converge; every smaller
    /// scale converges too. Zero when even `1/SCALE_STEPS` diverges.
    pub scale: Q,
}

/// Why the TFA fixed point of `net` diverges (with `line_shaping` as the TFA runs
/// it); `None` when `net` is not cyclic, has a server that is not FIFO, its fixed
/// point converges, or once `stop` says so.
pub fn divergence(
    net: &Network,
    line_shaping: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Divergence>, InputError> {
    if !is_cyclic(net) || cyclic::not_fifo(net).is_some() {
        return Ok(None);
    }
    let paths = cyclic::paths(net)?;
    let converges = |s: &Q| cyclic::converges(&scaled(net, s), &paths, line_shaping, stop);
    if converges(&Q::one()) != Some(false) {
        return Ok(None);
    }
    let Some(scale) = threshold(&converges) else {
        return Ok(None);
    };
    let (busiest, utilisation) = busiest(net, &paths);
    Ok(Some(Divergence {
        busiest,
        utilisation,
        scale,
    }))
}

/// `net` with every flow's sustained rate multiplied by `scale` (at most 1); bursts,
/// peak rates and packets as they are.
pub fn scaled(net: &Network, scale: &Q) -> Network {
    let mut out = net.clone();
    for f in &mut out.flows {
        f.rate = f.rate.mul_ref(scale);
    }
    out
}

/// The largest `k / SCALE_STEPS` at which `converges`, by bisection: it converges
/// at 0 (no flow's delay feeds another's), not at 1, and converging is monotone in
/// the scale (every server's delay bound grows with the rates). `None` once
/// `converges` gives nothing (a stop).
fn threshold(converges: &dyn Fn(&Q) -> Option<bool>) -> Option<Q> {
    let (mut lo, mut hi) = (0, SCALE_STEPS);
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if converges(&Q::ratio(i128::from(mid), i128::from(SCALE_STEPS))?)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Q::ratio(i128::from(lo), i128::from(SCALE_STEPS))
}

/// The servers on a cycle at the highest utilisation, and that utilisation.
fn busiest(net: &Network, paths: &[Vec<usize>]) -> (Vec<Busiest>, Q) {
    let n = net.servers.len();
    let mut load = vec![Q::zero(); n];
    let mut crossings = vec![0usize; n];
    for (f, p) in net.flows.iter().zip(paths) {
        let (r, _) = f.arrival_curve().token_bucket_envelope();
        for &s in p {
            load[s] = load[s].add_ref(&r);
            crossings[s] += 1;
        }
    }
    let on = on_cycles(n, paths);
    let util: Vec<Option<Q>> = (0..n)
        .map(|s| on[s].then(|| &load[s] / &net.servers[s].rate))
        .collect();
    let top = util.iter().flatten().max().cloned().unwrap_or_else(Q::zero);
    let busiest = (0..n)
        .filter(|&s| util[s].as_ref() == Some(&top))
        .map(|server| Busiest {
            server,
            crossings: crossings[server],
        })
        .collect();
    (busiest, top)
}

/// Which servers lie on a cycle of the flows' hops: in a strongly connected
/// component of more than one server (Kosaraju), or with a hop to itself.
fn on_cycles(n: usize, paths: &[Vec<usize>]) -> Vec<bool> {
    let mut succ = vec![Vec::new(); n];
    let mut pred = vec![Vec::new(); n];
    let mut itself = vec![false; n];
    for w in paths.iter().flat_map(|p| p.windows(2)) {
        itself[w[0]] |= w[0] == w[1];
        succ[w[0]].push(w[1]);
        pred[w[1]].push(w[0]);
    }
    let mut comp = vec![usize::MAX; n];
    let mut sizes = Vec::new();
    for s in finish_order(&succ).into_iter().rev() {
        if comp[s] != usize::MAX {
            continue;
        }
        let id = sizes.len();
        comp[s] = id;
        let (mut stack, mut size) = (vec![s], 0);
        while let Some(u) = stack.pop() {
            size += 1;
            for &v in &pred[u] {
                if comp[v] == usize::MAX {
                    comp[v] = id;
                    stack.push(v);
                }
            }
        }
        sizes.push(size);
    }
    (0..n).map(|s| itself[s] || sizes[comp[s]] > 1).collect()
}

/// The servers in the order a depth-first search along `succ` finishes them.
fn finish_order(succ: &[Vec<usize>]) -> Vec<usize> {
    let n = succ.len();
    let mut seen = vec![false; n];
    let mut out = Vec::with_capacity(n);
    for root in 0..n {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        let mut stack = vec![(root, 0usize)];
        while let Some(top) = stack.last_mut() {
            let u = top.0;
            match succ[u].get(top.1) {
                Some(&v) => {
                    top.1 += 1;
                    if !seen[v] {
                        seen[v] = true;
                        stack.push((v, 0));
                    }
                }
                None => {
                    out.push(u);
                    stack.pop();
                }
            }
        }
    }
    out
}
