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
use crate::model::{InputError, Multiplexing, Network};
use crate::q::Q;

/// The TFA bound of every flow of a (possibly cyclic) network of FIFO servers.
pub(super) fn tfa(net: &Network) -> Result<Vec<Bound>, InputError> {
    let n = net.servers.len();
    let index = |name: &str| net.servers.iter().position(|s| s.name == name);
    let mut paths = Vec::with_capacity(net.flows.len());
    for f in &net.flows {
        let p: Option<Vec<usize>> = f.path.iter().map(|s| index(s)).collect();
        paths.push(p.ok_or_else(|| {
            InputError::general(format!("flow {}: unknown server on its path", f.name))
        })?);
    }
    if let Some(s) = net
        .servers
        .iter()
        .find(|s| s.multiplexing != Multiplexing::Fifo)
    {
        let why = format!(
            "cyclic network with {} under arbitrary multiplexing: the fixed point covers FIFO servers only",
            s.name
        );
        return Ok(vec![Err(NoBound::NotApplicable(why)); net.flows.len()]);
    }
    let (a, c) = system(net, &paths, n);
    let d = match solve(a, c) {
        Some(d) => d,
        None => {
            let why = "the fixed point diverges: around the cycle the bursts grow without limit";
            return Ok(vec![Err(NoBound::Unbounded(why.into())); net.flows.len()]);
        }
    };
    Ok(paths
        .iter()
        .map(|p| Ok(p.iter().map(|&s| d[s].clone()).sum()))
        .collect())
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

/// Solves `M x = c` by Gaussian elimination without pivoting; `None` unless every
/// pivot is positive (then `M` is a nonsingular M-matrix and `x ≥ 0`).
fn solve(mut m: Vec<Vec<Q>>, mut c: Vec<Q>) -> Option<Vec<Q>> {
    let n = c.len();
    for k in 0..n {
        if !m[k][k].is_positive() {
            return None;
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
    Some(x)
}
