//! Total flow analysis: the flow's delay bound at every server of its path, summed.
//! At a FIFO server every bit waits at most the aggregate's delay bound
//! `h(Σα, β)`; at an arbitrary-multiplexing server the flow gets the residual
//! `[β − α_cross]+` and waits at most `h(α, [β − α_cross]+)`. The arrival curves are
//! the bundled ones of [`super::arrivals`].

use super::arrivals::Theta;
use super::{Arrivals, Bound, NoBound};
use crate::curve::delay_bound;
use crate::q::Q;

/// The delay bound of flow `f` at each hop.
pub(crate) fn hops(arr: &Arrivals, f: usize) -> Result<Vec<Q>, NoBound> {
    arr.bounded()?;
    let mut out = Vec::with_capacity(arr.paths[f].len());
    for (h, &s) in arr.paths[f].iter().enumerate() {
        let name = &arr.servers[s].name;
        let unbounded = || NoBound::Unbounded(format!("at {name}"));
        let d = match &arr.fifo_delay[s] {
            Some(d) => d.clone(),
            None => {
                let beta = arr.residual(s, &[f], Theta::Burst).ok_or_else(unbounded)?;
                let alpha = arr.per_flow[f].get(h).ok_or_else(unbounded)?;
                delay_bound(alpha, &beta).ok_or_else(unbounded)?
            }
        };
        out.push(d);
    }
    Ok(out)
}

pub(super) fn flow(arr: &Arrivals, f: usize) -> Bound {
    Ok(hops(arr, f)?.into_iter().sum())
}
