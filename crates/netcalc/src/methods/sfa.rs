//! Separated flow analysis: the residual service of every server on the path
//! (FIFO: the `θ = T + burst/R` member of the FIFO family; arbitrary:
//! `[β − α_cross]+`, the cross traffic bounded as in [`super::arrivals`]) convolved
//! into one end-to-end service, and the flow's delay bound taken once against it, so
//! its burst is paid once.
//!
//! When every server on the path is FIFO, the flows that go on exactly as this one
//! does from some server of its path are also analysed as one aggregate from there:
//! FIFO servers in a row keep the aggregate in order, so each of its bits waits at
//! most `h(Σα, ⊗ β_res)` with the residuals left by the others only — each of their
//! bursts is then charged once, not once per hop as cross traffic. The flow's bound
//! is then its own separated bound up to that server plus the aggregate's from
//! there (delays add up); the smallest of all these is the flow's.

use super::arrivals::Theta;
use super::{Arrivals, Bound, NoBound};
use crate::curve::{delay_bound, Curve, Service};
use crate::model::Multiplexing;

pub(super) fn flow(arr: &Arrivals, f: usize) -> Bound {
    arr.bounded()?;
    let path = &arr.paths[f];
    let alone = separated(arr, path, &[f], &arr.per_flow[f][0]);
    if arr.first_not(path, Multiplexing::Fifo).is_some() {
        return alone;
    }
    let mut best = alone;
    for k in 0..path.len() {
        if let Some(b) = together_from(arr, f, k) {
            best = smaller(best, b);
        }
    }
    best
}

/// Flow `f` alone over the first `k` servers of its path, then with every flow
/// that goes on exactly as it does from there as one FIFO aggregate: the sum of
/// both delay bounds (`None` when no other flow goes on with it).
fn together_from(arr: &Arrivals, f: usize, k: usize) -> Option<Bound> {
    let path = &arr.paths[f];
    let rest = &path[k..];
    let mut set = Vec::new();
    let mut curves = Vec::new();
    for (g, gp) in arr.paths.iter().enumerate() {
        let Some(j) = gp.iter().position(|&s| s == rest[0]) else {
            continue;
        };
        if gp[j..] == *rest {
            set.push(g);
            curves.push(arr.per_flow[g].get(j)?);
        }
    }
    if set.len() < 2 {
        return None;
    }
    let alpha = Curve::sum(curves);
    let tail = separated(arr, rest, &set, &alpha);
    if k == 0 {
        return Some(tail);
    }
    let head = separated(arr, &path[..k], &[f], &arr.per_flow[f][0]);
    Some(match (head, tail) {
        (Ok(h), Ok(t)) => Ok(h + t),
        (Err(e), _) | (_, Err(e)) => Err(e),
    })
}

fn smaller(a: Bound, b: Bound) -> Bound {
    match (a, b) {
        (Ok(a), Ok(b)) => Ok(a.min(b)),
        (Ok(a), Err(_)) | (Err(_), Ok(a)) => Ok(a),
        (Err(e), Err(_)) => Err(e),
    }
}

/// The delay bound of `alpha`, what arrives of the flows `set` at `servers[0]`,
/// through `servers` against the convolution of the residuals the other flows
/// leave them, the smaller of both FIFO residual choices.
fn separated(arr: &Arrivals, servers: &[usize], set: &[usize], alpha: &Curve) -> Bound {
    let mut best: Option<Bound> = None;
    for theta in Theta::ALL {
        let b = separated_with(arr, servers, set, alpha, theta);
        best = Some(match best {
            Some(a) => smaller(a, b),
            None => b,
        });
    }
    best.unwrap_or_else(|| Err(NoBound::NotApplicable("no residual".into())))
}

fn separated_with(
    arr: &Arrivals,
    servers: &[usize],
    set: &[usize],
    alpha: &Curve,
    theta: Theta,
) -> Bound {
    let mut beta: Option<Service> = None;
    for &s in servers {
        let name = &arr.servers[s].name;
        let res = arr
            .residual(s, set, theta)
            .ok_or_else(|| NoBound::Unbounded(format!("no service left at {name}")))?;
        beta = Some(match beta {
            Some(b) => b.convolve(&res),
            None => res,
        });
    }
    let beta = beta.ok_or_else(|| NoBound::NotApplicable("empty path".into()))?;
    delay_bound(alpha, &beta).ok_or_else(|| NoBound::Unbounded("end to end".into()))
}
