//! Total flow analysis of a network whose servers depend on each other in a cycle
//! (a ring, or flows that loop), by its fixed point.
//!
//! With FIFO servers and each flow bounded by its token bucket `(r, b)`, the delay
//! bound of server `s` is `D_s = T_s + Σ_visits (b + r Σ_{u before s} D_u) / R_s`:
//! every visit of a flow to `s` brings its burst grown by its rate times the delay
//! bounds of the servers it crossed before (a flow that loops visits a server more
//! than once). That is an affine system `D = c + A D` with `A ≥ 0`. When the
//! iteration from `D = 0` converges — exactly when `I − A` is a nonsingular
//! M-matrix, which Gaussian elimination checks by finding every pivot positive — its
//! limit, the unique solution, is a valid bound (the time-stopping argument: stop
//! every source at some time, the network empties with finite delays, they satisfy
//! the system, hence are at most its solution). It is solved exactly in rationals.
//! When it does not converge the bursts can grow without limit around the cycle and
//! the method gives no bound, saying so.

use super::{Bound, NoBound};
use crate::curve::{delay_bound_rate_latency, Curve};
use crate::model::{InputError, Multiplexing, Network};
use crate::q::Q;

/// The TFA bound of every flow of a (possibly cyclic) network of FIFO servers; with
/// `line_shaping`, each server's output limited to its rate ([`shaped`]).
pub(super) fn tfa(
    net: &Network,
    line_shaping: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Bound>, InputError> {
    let paths = paths(net)?;
    if let Some(why) = not_fifo(net) {
        return Ok(vec![Err(why); net.flows.len()]);
    }
    Ok(match delays(net, &paths, line_shaping, stop) {
        Ok(None) => Vec::new(),
        Ok(Some(d)) => paths
            .iter()
            .map(|p| Ok(p.iter().map(|&s| d[s].clone()).sum()))
            .collect(),
        Err(why) => vec![Err(why); net.flows.len()],
    })
}

/// Each flow's path as server indices.
pub(super) fn paths(net: &Network) -> Result<Vec<Vec<usize>>, InputError> {
    let index = |name: &str| net.servers.iter().position(|s| s.name == name);
    let mut paths = Vec::with_capacity(net.flows.len());
    for f in &net.flows {
        let p: Option<Vec<usize>> = f.path.iter().map(|s| index(s)).collect();
        paths.push(p.ok_or_else(|| {
            InputError::general(format!("flow {}: unknown server on its path", f.name))
        })?);
    }
    Ok(paths)
}

/// Why the fixed point does not apply, when a server is not FIFO.
pub(super) fn not_fifo(net: &Network) -> Option<NoBound> {
    let s = net
        .servers
        .iter()
        .find(|s| s.multiplexing != Multiplexing::Fifo)?;
    Some(NoBound::NotApplicable(format!(
        "cyclic network with {} under arbitrary multiplexing: the fixed point covers FIFO servers only",
        s.name
    )))
}

/// Every server's delay bound at the fixed point (`Ok(None)` once `stop` says so),
/// or why there is none.
pub(super) fn delays(
    net: &Network,
    paths: &[Vec<usize>],
    line_shaping: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<Q>>, NoBound> {
    if shapes(net, line_shaping) {
        return Ok(shaped(net, paths, line_shaping, false, stop)?.and_then(Settled::bounds));
    }
    affine(net, paths, stop)
}

/// Whether the fixed point is the line-shaped iteration's rather than the affine one's.
fn shapes(net: &Network, line_shaping: bool) -> bool {
    line_shaping || net.servers.iter().any(|s| s.shaper.is_some())
}

/// Why a fixed point gives no bound.
fn diverges() -> NoBound {
    NoBound::Unbounded(
        "the fixed point diverges: around the cycle the bursts grow without limit".into(),
    )
}

/// The fixed point of the affine system, solved exactly; `None` once `stop` says so
/// (asked at each pivot).
fn affine(
    net: &Network,
    paths: &[Vec<usize>],
    stop: &dyn Fn() -> bool,
) -> Result<Option<Vec<Q>>, NoBound> {
    let n = net.servers.len();
    let (a, c) = system(net, paths, n);
    match solve(a, c, stop) {
        None => Ok(None),
        Some(None) => Err(diverges()),
        Some(Some(d)) => Ok(Some(d)),
    }
}

/// `I − A` and `c` of `D = c + A D`.
fn system(net: &Network, paths: &[Vec<usize>], n: usize) -> (Vec<Vec<Q>>, Vec<Q>) {
    let mut m: Vec<Vec<Q>> = (0..n)
        .map(|s| {
            (0..n)
                .map(|u| if s == u { Q::one() } else { Q::zero() })
                .collect()
        })
        .collect();
    let mut c: Vec<Q> = net.servers.iter().map(|s| s.latency.clone()).collect();
    for (f, p) in net.flows.iter().zip(paths) {
        let (r, b) = f.arrival_curve().token_bucket_envelope();
        for (h, &s) in p.iter().enumerate() {
            let rate = &net.servers[s].rate;
            c[s] = c[s].add_ref(&(&b / rate));
            let share = &r / rate;
            for &u in &p[..h] {
                m[s][u] = m[s][u].sub_ref(&share);
            }
        }
    }
    (m, c)
}

/// Solves `M x = c` by Gaussian elimination without pivoting; `Some(None)` unless
/// every pivot is positive (then `M` is a nonsingular M-matrix and `x ≥ 0`); `None`
/// once `stop` says so.
fn solve(mut m: Vec<Vec<Q>>, mut c: Vec<Q>, stop: &dyn Fn() -> bool) -> Option<Option<Vec<Q>>> {
    let n = c.len();
    for k in 0..n {
        if stop() {
            return None;
        }
        if !m[k][k].is_positive() {
            return Some(None);
        }
        for i in k + 1..n {
            if m[i][k].is_zero() {
                continue;
            }
            let factor = &m[i][k] / &m[k][k];
            let pivot_row = m[k].clone();
            for (x, p) in m[i].iter_mut().zip(&pivot_row).skip(k) {
                *x = x.sub_ref(&factor.mul_ref(p));
            }
            let v = factor.mul_ref(&c[k]);
            c[i] = c[i].sub_ref(&v);
        }
    }
    let mut x = vec![Q::zero(); n];
    for k in (0..n).rev() {
        let mut acc = c[k].clone();
        for j in k + 1..n {
            acc = acc.sub_ref(&m[k][j].mul_ref(&x[j]));
        }
        x[k] = &acc / &m[k][k];
    }
    Some(Some(x))
}

/// The grid the line-shaped fixed point is rounded up to: 1 ns.
fn grid() -> Q {
    Q::ratio(1, 1_000_000_000).unwrap_or_else(Q::one)
}

/// Iterations after which a line-shaped fixed point that has not settled is given up.
const MAX_ROUNDS: usize = 100_000;

/// The fixed point when servers shape their output: with `line_shaping` every
/// server is a link, and what leaves server `p` towards the next one is also bounded
/// by `R_p t + M_p` (its rate, and the largest packet of its flows); a server with
/// its own shaper `σ_p` (the network file's `shaper`) bounds it by `σ_p`. The
/// traffic a server receives from one input is then at most
/// `min(Σ (b + r U + r t), R_p t + M_p, σ_p)` with `U` the delays upstream of that
/// visit.
/// The delay bounds are then no longer affine in each other; they are iterated from
/// 0, each rounded up to the nanosecond: the sequence only grows, and it stops at a
/// `D` whose bounds `F(D)` are at most `D` — an upper bound of the fixed point the
/// exact iteration converges to — or gives up after [`MAX_ROUNDS`] rounds or when a
/// bound passes an hour. Once `stop` says so (asked every round) it gives nothing
/// (`Ok(None)`): a round short of the fixed point bounds nothing.
///
/// With `certify`, for a caller that needs to know whether the fixed point exists
/// but not the bounds, every [`CERTIFY_EVERY`] rounds it extrapolates where the
/// increments lead and tests that point `P` ([`certified`]): when `F(P) ≤ P` under
/// an hour, the iteration from zero can never pass `P` (`F` only grows with `D`, and
/// so does the rounding up to the grid), so it would settle on the grid below it.
/// It then ends with [`Settled::Certified`], without the thousands of rounds a
/// network just below its load limit needs (and also where the plain iteration
/// would have stopped at [`MAX_ROUNDS`]).
fn shaped(
    net: &Network,
    paths: &[Vec<usize>],
    line_shaping: bool,
    certify: bool,
    stop: &dyn Fn() -> bool,
) -> Result<Option<Settled>, NoBound> {
    let n = net.servers.len();
    let step = grid();
    let hour = Q::int(3600);
    let mut d = vec![Q::zero(); n];
    let mut before: Vec<f64> = Vec::new();
    for r in 1..=MAX_ROUNDS {
        if stop() {
            return Ok(None);
        }
        let Some(next) = round(net, paths, line_shaping, &d) else {
            return Err(NoBound::Unbounded("a server is overloaded".into()));
        };
        let next: Vec<Q> = next.iter().map(|x| x.ceil_to(&step)).collect();
        if next.iter().any(|x| x > &hour) {
            break;
        }
        if next == d {
            return Ok(Some(Settled::Fixed(d)));
        }
        let at = r % CERTIFY_EVERY;
        let inc: Vec<Q> = match certify && (at == 0 || at == CERTIFY_EVERY - 1) {
            true => next.iter().zip(&d).map(|(a, b)| a.sub_ref(b)).collect(),
            false => Vec::new(),
        };
        d = next;
        if !inc.is_empty() && at == 0 && certified(net, paths, line_shaping, &d, &inc, &before) {
            return Ok(Some(Settled::Certified));
        }
        if !inc.is_empty() && at == CERTIFY_EVERY - 1 {
            before = inc.iter().map(Q::to_f64).collect();
        }
    }
    Err(diverges())
}

/// How the line-shaped iteration ended.
enum Settled {
    /// At its fixed point on the grid: the delay bounds.
    Fixed(Vec<Q>),
    /// Proved to converge before it got there (only when asked to certify).
    Certified,
}

impl Settled {
    fn bounds(self) -> Option<Vec<Q>> {
        match self {
            Settled::Fixed(d) => Some(d),
            Settled::Certified => None,
        }
    }
}

/// Rounds of the line-shaped iteration between two tries of a certificate.
const CERTIFY_EVERY: usize = 32;

/// Whether the fixed point of [`delays`] exists (`None` once `stop` says so), for a
/// caller that needs the answer, not the bounds: the line-shaped iteration stops as
/// soon as a certificate proves it converges.
pub(super) fn converges(
    net: &Network,
    paths: &[Vec<usize>],
    line_shaping: bool,
    stop: &dyn Fn() -> bool,
) -> Option<bool> {
    let answer = match shapes(net, line_shaping) {
        true => shaped(net, paths, line_shaping, true, stop).map(|s| s.map(|_| ())),
        false => affine(net, paths, stop).map(|d| d.map(|_| ())),
    };
    match answer {
        Ok(Some(())) => Some(true),
        Ok(None) => None,
        Err(_) => Some(false),
    }
}

/// Whether `P = d + k·inc` is a certificate of convergence: `F(P)`, rounded up to
/// the grid, at most `P` on every server, and `P` under an hour. `k` sums the
/// geometric tail of increments shrinking at their largest ratio to the ones of the
/// round `before` (twice over, for margin); increments that stopped shrinking give
/// no point. The ratio is only an estimate: the test itself is exact.
fn certified(
    net: &Network,
    paths: &[Vec<usize>],
    line_shaping: bool,
    d: &[Q],
    inc: &[Q],
    before: &[f64],
) -> bool {
    let ratio = inc
        .iter()
        .zip(before)
        .filter(|(_, b)| **b > 0.0)
        .map(|(i, b)| i.to_f64() / b)
        .fold(0.0f64, f64::max);
    // (a NaN ratio is not below 1 either)
    if ratio.partial_cmp(&1.0) != Some(std::cmp::Ordering::Less) {
        return false;
    }
    let k = Q::int((2.0 * ratio / (1.0 - ratio)).ceil().min(1e9) as i64 + 1);
    let point: Vec<Q> = d
        .iter()
        .zip(inc)
        .map(|(v, i)| v.add_ref(&i.mul_ref(&k)))
        .collect();
    let (step, hour) = (grid(), Q::int(3600));
    if point.iter().any(|x| x > &hour) {
        return false;
    }
    round(net, paths, line_shaping, &point)
        .is_some_and(|f| f.iter().zip(&point).all(|(x, p)| &x.ceil_to(&step) <= p))
}

/// `F(D)`: each server's delay bound given the others' `d`; `None` when a server is
/// overloaded.
fn round(net: &Network, paths: &[Vec<usize>], line_shaping: bool, d: &[Q]) -> Option<Vec<Q>> {
    let n = net.servers.len();
    // per server, per input (the previous server, or none for a source): the token
    // buckets that arrive that way
    let mut inputs: Vec<Vec<(Option<usize>, Q, Q)>> = vec![Vec::new(); n];
    for (f, p) in net.flows.iter().zip(paths) {
        let (r, b) = f.arrival_curve().token_bucket_envelope();
        let mut upstream = Q::zero();
        for (h, &s) in p.iter().enumerate() {
            let from = h.checked_sub(1).map(|k| p[k]);
            let burst = b.add_ref(&r.mul_ref(&upstream));
            match inputs[s]
                .iter_mut()
                .find(|(i, _, _)| *i == from && from.is_some())
            {
                Some((_, rr, bb)) => {
                    *rr = rr.add_ref(&r);
                    *bb = bb.add_ref(&burst);
                }
                None => inputs[s].push((from, r.clone(), burst)),
            }
            upstream = upstream.add_ref(&d[s]);
        }
    }
    let largest = if line_shaping {
        largest_packets(net, paths)
    } else {
        vec![None; n]
    };
    let mut out = Vec::with_capacity(n);
    for (s, srv) in net.servers.iter().enumerate() {
        let curves: Vec<Curve> = inputs[s]
            .iter()
            .map(|(from, r, b)| {
                let mut c = Curve::token_bucket(r.clone(), b.clone());
                let Some(p) = *from else { return c };
                if let Some(m) = &largest[p] {
                    c = c.min(&Curve::token_bucket(net.servers[p].rate.clone(), m.clone()));
                }
                if let Some(sh) = &net.servers[p].shaper {
                    c = c.min(&sh.curve());
                }
                c
            })
            .collect();
        let total = Curve::sum(curves.iter());
        out.push(delay_bound_rate_latency(&total, &srv.rate, &srv.latency)?);
    }
    Some(out)
}

/// Each server's largest packet (`None` when a flow crossing it has no `max_packet`:
/// its output is then not line-shaped).
pub(super) fn largest_packets(net: &Network, paths: &[Vec<usize>]) -> Vec<Option<Q>> {
    let mut out: Vec<Option<Option<Q>>> = vec![None; net.servers.len()];
    for (f, p) in net.flows.iter().zip(paths) {
        for &s in p {
            out[s] = Some(match (out[s].take(), &f.max_packet) {
                (None, m) => m.clone(),
                (Some(Some(a)), Some(m)) => Some(a.max(m.clone())),
                (Some(_), _) => None,
            });
        }
    }
    out.into_iter().map(Option::flatten).collect()
}
