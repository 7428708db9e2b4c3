//! Separated flow analysis: the residual service of every server on the path
//! (FIFO: a member of the FIFO family `[β(t) − α_c(t − θ)]+ 1{t > θ}`; arbitrary:
//! `[β − α_cross]+`, the cross traffic bounded as in [`super::arrivals`]) convolved
//! into one end-to-end service, and the flow's delay bound taken once against it, so
//! its burst is paid once.
//!
//! On an all-FIFO path the FIFO members are tried three ways and the smallest bound
//! kept: `θ = T + α_c(0+)/R` at every server, `θ = T + b_c/R` at every server (the
//! classic `β_{R − r_c, T + b_c/R}`), and the θ of every server chosen jointly to
//! minimise the end-to-end bound ([`optimal_theta`]).
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
use crate::q::Q;

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
/// leave them: the smallest of both fixed FIFO residual choices and, on an all-FIFO
/// stretch, the jointly optimised θ.
fn separated(arr: &Arrivals, servers: &[usize], set: &[usize], alpha: &Curve) -> Bound {
    let mut best: Option<Bound> = None;
    for choice in Choice::ALL {
        let b = separated_by(arr, servers, set, alpha, choice);
        best = Some(match best {
            Some(a) => smaller(a, b),
            None => b,
        });
    }
    best.unwrap_or_else(|| Err(NoBound::NotApplicable("no residual".into())))
}

/// How the FIFO residuals of a separated bound are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// The same member of the family at every server.
    Fixed(Theta),
    /// Every server's θ chosen jointly for the smallest end-to-end bound
    /// ([`optimal_theta`]; all-FIFO stretches only).
    Optimal,
}

impl Choice {
    pub(crate) const ALL: [Choice; 3] = [
        Choice::Fixed(Theta::Burst),
        Choice::Fixed(Theta::Envelope),
        Choice::Optimal,
    ];
}

/// [`separated`] with one way of choosing the FIFO residuals.
pub(crate) fn separated_by(
    arr: &Arrivals,
    servers: &[usize],
    set: &[usize],
    alpha: &Curve,
    choice: Choice,
) -> Bound {
    match choice {
        Choice::Fixed(theta) => separated_with(arr, servers, set, alpha, theta),
        Choice::Optimal => optimal_theta(arr, servers, set, alpha),
    }
}

/// Flow `f` alone over its whole path, with one way of choosing the FIFO residuals.
pub(crate) fn alone_by(arr: &Arrivals, f: usize, choice: Choice) -> Bound {
    arr.bounded()?;
    separated_by(arr, &arr.paths[f], &[f], &arr.per_flow[f][0], choice)
}

/// The separated bound with every server's θ chosen jointly, exactly.
///
/// At FIFO server `i` (rate `R_i`, latency `T_i`) the others' arrivals are bounded
/// by their token-bucket envelope `(r_i, b_i)`, so the member `θ_i` of the family is
/// at least `[R_i (t − T_i) − b_i − r_i (t − θ_i)]+ 1{t > θ_i}` (a smaller cross
/// curve leaves more). With `θ*_i = T_i + b_i/R_i`, `ρ_i = R_i − r_i` and
/// `θ_i = θ*_i + x_i`, `x_i ≥ 0`, that is 0 up to `θ_i`, then a jump to `R_i x_i`
/// and slope `ρ_i` (`x_i = 0` is the classic `β_{ρ_i, θ*_i}`; a `θ_i` below `θ*_i`
/// only moves that curve right, so it is never better). Each is `δ_{θ_i}` convolved
/// with the concave `γ_i(t) = R_i x_i + ρ_i t` (`t > 0`), and concave curves through
/// the origin convolve to their minimum: end to end `δ_{Σθ_i} ⊗ min_i γ_i`. Against
/// the flow's envelope `σ + ρ t` (`ρ ≤ ρ_i`, so the largest horizontal gap is at the
/// start) the delay bound is
///
/// `D(x) = Σ θ*_i + Σ x_i + max_i (σ − R_i x_i)+ / ρ_i`.
///
/// Fix the last term at `m`: the cheapest `x` has `x_i = (σ − ρ_i m)+ / R_i`, so the
/// bound is `Σ θ*_i + F(m)` with `F(m) = m + Σ_i (σ − ρ_i m)+ / R_i`, convex and
/// piecewise linear with breakpoints `σ/ρ_i`. Its minimum over `m ≥ 0` is at 0 or at
/// a breakpoint, all of which are evaluated exactly; `m = max σ/ρ_i` (every
/// `x_i = 0`) is the classic choice, so this never exceeds it for a token-bucket
/// flow. On one server the optimum is `m = 0` (`ρ/R < 1`): `T + (b + σ)/R`, the
/// FIFO aggregate's own delay bound.
///
/// `NotApplicable` when a server of the stretch is not FIFO.
pub(crate) fn optimal_theta(
    arr: &Arrivals,
    servers: &[usize],
    set: &[usize],
    alpha: &Curve,
) -> Bound {
    if let Some(name) = arr.first_not(servers, Multiplexing::Fifo) {
        return Err(NoBound::NotApplicable(format!(
            "optimal θ needs FIFO servers ({name} is not)"
        )));
    }
    if servers.is_empty() {
        return Err(NoBound::NotApplicable("empty path".into()));
    }
    let (rho, sigma) = alpha.token_bucket_envelope();
    let mut base = Q::zero();
    // (R_i, ρ_i) of every server
    let mut hops = Vec::with_capacity(servers.len());
    for &s in servers {
        let srv = &arr.servers[s];
        let others = arr.others(s, set);
        let (r, b) = if others.is_empty() {
            (Q::zero(), Q::zero())
        } else {
            arr.subset(s, &others).token_bucket_envelope()
        };
        let left = &srv.rate - &r;
        if !left.is_positive() || left < rho {
            return Err(NoBound::Unbounded(format!(
                "no service left at {}",
                srv.name
            )));
        }
        base = &(&base + &srv.latency) + &(&b / &srv.rate);
        hops.push((srv.rate.clone(), left));
    }
    let f = |m: &Q| -> Q {
        let mut v = m.clone();
        for (rate, left) in &hops {
            let need = &sigma - &(left * m);
            if need.is_positive() {
                v = &v + &(&need / rate);
            }
        }
        v
    };
    let mut best = f(&Q::zero());
    for (_, left) in &hops {
        let v = f(&(&sigma / left));
        if v < best {
            best = v;
        }
    }
    Ok(&base + &best)
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
