//! Separated flow analysis: the residual service of every server on the path
//! (FIFO: the `θ = T + burst/R` member of the FIFO family; arbitrary:
//! `[β − α_cross]+`, the cross traffic bounded as in [`super::arrivals`]) convolved
//! into one end-to-end service, and the flow's delay bound taken once against it, so
//! its burst is paid once.
//!
//! When every server on the path is FIFO, the flows whose path is exactly this
//! flow's are also analysed as one aggregate: FIFO servers in a row keep the
//! aggregate in order, so each of its bits waits at most `h(Σα, ⊗ β_res)` with the
//! residuals left by the others only — each of their bursts is then charged once,
//! not once per hop as cross traffic. The smaller bound is the flow's.

use super::arrivals::Theta;
use super::{Arrivals, Bound, NoBound};
use crate::curve::{delay_bound, Curve, Service};
use crate::model::Multiplexing;

pub(super) fn bounds(arr: &Arrivals) -> Vec<Bound> {
    (0..arr.paths.len()).map(|f| flow(arr, f)).collect()
}

fn flow(arr: &Arrivals, f: usize) -> Bound {
    if let Some(s) = &arr.unbounded {
        return Err(NoBound::Unbounded(format!("no bound on what leaves {s}")));
    }
    let alone = separated(arr, &[f]);
    let path = &arr.paths[f];
    let all_fifo = path
        .iter()
        .all(|&s| arr.servers[s].multiplexing == Multiplexing::Fifo);
    let same: Vec<usize> = (0..arr.paths.len())
        .filter(|&g| arr.paths[g] == *path)
        .collect();
    if !all_fifo || same.len() < 2 {
        return alone;
    }
    match (alone, separated(arr, &same)) {
        (Ok(a), Ok(b)) => Ok(a.min(b)),
        (Ok(a), Err(_)) | (Err(_), Ok(a)) => Ok(a),
        (Err(e), Err(_)) => Err(e),
    }
}

/// The delay bound of the aggregate of `set` (flows with one path) against the
/// convolution of the residuals the other flows leave it along that path, the
/// smaller of both FIFO residual choices.
fn separated(arr: &Arrivals, set: &[usize]) -> Bound {
    let mut best: Option<Bound> = None;
    for theta in Theta::ALL {
        let b = separated_with(arr, set, theta);
        best = Some(match (best, b) {
            (Some(Ok(a)), Ok(b)) => Ok(a.min(b)),
            (Some(Ok(a)), Err(_)) | (Some(Err(_)), Ok(a)) | (None, Ok(a)) => Ok(a),
            (Some(Err(e)), Err(_)) | (None, Err(e)) => Err(e),
        });
    }
    best.unwrap_or_else(|| Err(NoBound::NotApplicable("no residual".into())))
}

fn separated_with(arr: &Arrivals, set: &[usize], theta: Theta) -> Bound {
    let path = &arr.paths[set[0]];
    let mut beta: Option<Service> = None;
    for &s in path {
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
    let alpha = Curve::sum(set.iter().map(|&g| &arr.per_flow[g][0]));
    delay_bound(&alpha, &beta).ok_or_else(|| NoBound::Unbounded("end to end".into()))
}
