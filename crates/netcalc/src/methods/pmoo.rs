//! Pay multiplexing only once (Schmitt, Zdarsky and Martinovic, 2008) for
//! rate-latency servers and token-bucket cross traffic, under arbitrary
//! multiplexing: along the flow's path `s_1 … s_n`, every cross flow occupies runs of
//! consecutive servers, and the flow gets the one residual service
//!
//! `R = min_k (R_k − Σ_{runs at k} r_j)`,
//! `T = Σ_k T_k + Σ_runs (b_j + r_j Σ_{k in run} T_k) / R`,
//!
//! where `(r_j, b_j)` is the token-bucket envelope of the cross traffic's arrival
//! curve where its run starts (a flow that leaves the path and comes back is a new
//! run with its arrival curve there; cross flows with the same run count as one,
//! bounded together, so a bundle that arrives together pays its bursts once). Each
//! cross burst and each latency is paid once.
//! The bound is `h(α, β_{R,T})` with the flow's own arrival curve.
//!
//! It needs arbitrary multiplexing at every server of the path (strict service
//! curves); on a FIFO server it is not applied.

use super::{Arrivals, Bound, NoBound};
use crate::curve::{delay_bound, Service};
use crate::model::Multiplexing;
use crate::q::Q;

/// Cross flows that stay on the path together: positions `from..=to`, the flows,
/// and their token bucket.
struct Run {
    from: usize,
    to: usize,
    rate: Q,
    burst: Q,
}

pub(super) fn flow(arr: &Arrivals, f: usize) -> Bound {
    arr.bounded()?;
    let last = arr.paths[f].len().saturating_sub(1);
    let beta = service(arr, f, last)?;
    delay_bound(&arr.per_flow[f][0], &beta).ok_or_else(|| NoBound::Unbounded("end to end".into()))
}

/// The PMOO residual service of flow `f` over the first `upto + 1` servers of its
/// path (each of them under arbitrary multiplexing).
pub(crate) fn service(arr: &Arrivals, f: usize, upto: usize) -> Result<Service, NoBound> {
    let path = arr.paths[f]
        .get(..=upto)
        .ok_or_else(|| NoBound::NotApplicable("empty path".into()))?;
    if let Some(name) = arr.first_not(path, Multiplexing::Arbitrary) {
        return Err(NoBound::NotApplicable(format!(
            "{name} is FIFO (PMOO needs arbitrary multiplexing)"
        )));
    }
    let runs = runs(arr, f, path);
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
    Ok(Service::rate_latency(rate, latency))
}

/// The other flows' runs of consecutive servers on `path` (a prefix of `f`'s),
/// those with the same run bounded together (what arrives of them where the run
/// starts, which a bundle that came together bounds better than its members).
fn runs(arr: &Arrivals, f: usize, path: &[usize]) -> Vec<Run> {
    let mut spans: Vec<((usize, usize), Vec<usize>)> = Vec::new();
    for (g, gp) in arr.paths.iter().enumerate() {
        if g == f {
            continue;
        }
        let mut open: Option<(usize, usize)> = None;
        for s in gp {
            let pos = path.iter().position(|x| x == s);
            open = match (open, pos) {
                (Some((from, to)), Some(p)) if p == to + 1 => Some((from, p)),
                (prev, p) => {
                    if let Some(span) = prev {
                        add(&mut spans, span, g);
                    }
                    p.map(|p| (p, p))
                }
            };
        }
        if let Some(span) = open {
            add(&mut spans, span, g);
        }
    }
    spans
        .into_iter()
        .map(|((from, to), flows)| {
            let (rate, burst) = arr.subset(path[from], &flows).token_bucket_envelope();
            Run {
                from,
                to,
                rate,
                burst,
            }
        })
        .collect()
}

fn add(spans: &mut Vec<((usize, usize), Vec<usize>)>, span: (usize, usize), g: usize) {
    match spans.iter_mut().find(|(s, _)| *s == span) {
        Some((_, flows)) => flows.push(g),
        None => spans.push((span, vec![g])),
    }
}
