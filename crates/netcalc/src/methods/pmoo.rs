//! Pay multiplexing only once (Schmitt, Zdarsky and Martinovic, 2008) for
//! rate-latency servers and token-bucket cross traffic, under arbitrary
//! multiplexing: along the flow's path `s_1 … s_n`, every cross flow occupies runs of
//! consecutive servers, and the flow gets the one residual service
//!
//! `R = min_k (R_k − Σ_{runs at k} r_j)`,
//! `T = Σ_k T_k + Σ_runs (b_j + r_j Σ_{k in run} T_k) / R`,
//!
//! where `(r_j, b_j)` is the token-bucket envelope of the cross flow's arrival curve
//! where its run starts (a flow that leaves the path and comes back is a new run
//! with its arrival curve there). Each cross burst and each latency is paid once.
//! The bound is `h(α, β_{R,T})` with the flow's own arrival curve.
//!
//! It needs arbitrary multiplexing at every server of the path (strict service
//! curves); on a FIFO server it is not applied.

use super::{Arrivals, Bound, NoBound};
use crate::curve::{delay_bound, Service};
use crate::model::Multiplexing;
use crate::q::Q;

pub(super) fn bounds(arr: &Arrivals) -> Vec<Bound> {
    (0..arr.paths.len()).map(|f| flow(arr, f)).collect()
}

/// A cross flow's stay on the path: positions `from..=to`, and its token bucket.
struct Run {
    from: usize,
    to: usize,
    rate: Q,
    burst: Q,
}

fn flow(arr: &Arrivals, f: usize) -> Bound {
    if let Some(s) = &arr.unbounded {
        return Err(NoBound::Unbounded(format!("no bound on what leaves {s}")));
    }
    let path = &arr.paths[f];
    if let Some(&s) = path
        .iter()
        .find(|&&s| arr.servers[s].multiplexing != Multiplexing::Arbitrary)
    {
        let name = &arr.servers[s].name;
        return Err(NoBound::NotApplicable(format!(
            "{name} is FIFO (PMOO needs arbitrary multiplexing)"
        )));
    }
    let runs = runs(arr, f);
    let mut rate: Option<Q> = None;
    for (k, &s) in path.iter().enumerate() {
        let cross: Q = runs
            .iter()
            .filter(|r| r.from <= k && k <= r.to)
            .map(|r| r.rate.clone())
            .sum();
        let left = &arr.servers[s].rate - &cross;
        rate = Some(match rate {
            Some(r) => r.min(left),
            None => left,
        });
    }
    let rate = rate.ok_or_else(|| NoBound::NotApplicable("empty path".into()))?;
    if !rate.is_positive() {
        return Err(NoBound::Unbounded(
            "the cross traffic takes the whole rate".into(),
        ));
    }
    let latency_of = |from: usize, to: usize| -> Q {
        path[from..=to]
            .iter()
            .map(|&s| arr.servers[s].latency.clone())
            .sum()
    };
    let mut latency = latency_of(0, path.len() - 1);
    for r in &runs {
        let paid = &r.burst + &(&r.rate * &latency_of(r.from, r.to));
        latency = &latency + &(&paid / &rate);
    }
    let beta = Service::rate_latency(rate, latency);
    delay_bound(&arr.per_flow[f][0], &beta).ok_or_else(|| NoBound::Unbounded("end to end".into()))
}

/// Every other flow's runs of consecutive servers on `f`'s path.
fn runs(arr: &Arrivals, f: usize) -> Vec<Run> {
    let path = &arr.paths[f];
    let mut out = Vec::new();
    for (g, gp) in arr.paths.iter().enumerate() {
        if g == f {
            continue;
        }
        let mut open: Option<(usize, usize, usize)> = None; // (from, to, hop of g at from)
        for (h, s) in gp.iter().enumerate() {
            let pos = path.iter().position(|x| x == s);
            open = match (open, pos) {
                (Some((from, to, gh)), Some(p)) if p == to + 1 => Some((from, p, gh)),
                (prev, p) => {
                    if let Some(run) = prev {
                        out.push(close(arr, g, run));
                    }
                    p.map(|p| (p, p, h))
                }
            };
        }
        if let Some(run) = open {
            out.push(close(arr, g, run));
        }
    }
    out
}

fn close(arr: &Arrivals, g: usize, (from, to, gh): (usize, usize, usize)) -> Run {
    let (rate, burst) = arr.per_flow[g][gh].token_bucket_envelope();
    Run {
        from,
        to,
        rate,
        burst,
    }
}
