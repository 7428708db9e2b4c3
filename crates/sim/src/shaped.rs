//! A plan's best-effort loads sent through token buckets instead of at a constant
//! rate: the simulated counterpart of a lab whose load senders are shaped (lockstep's
//! own bucket in the sender, or a Linux qdisc on its egress). The plan is built as
//! for any run ([`crate::nodes`]); each [`ShapedLoad`] then replaces its load's
//! constant-rate source by a [`ShapedSource`] with the same addresses and datagrams.

use lockstep_plan::plan::Plan;
use thiserror::Error;

use crate::engine::{Engine, Kind, SimNode};
use crate::source::{Pattern, ShapedSource, ShaperModel};
use crate::{BuildError, SimOptions};

/// Load `load` of the plan (its index in `plan.loads`), sent as `pattern` through
/// `model`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapedLoad {
    pub load: usize,
    pub model: ShaperModel,
    pub pattern: Pattern,
}

/// Why shaped loads cannot be set up.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ShapeError {
    #[error(transparent)]
    Build(#[from] BuildError),
    #[error("load {0} is not in the plan")]
    NoLoad(usize),
    #[error("load {load}: {message}")]
    Load { load: String, message: String },
}

/// The plan's nodes with `loads` shaped, started at `opts.start_ns` (every shaped
/// source starts then, its bucket full).
pub fn engine(plan: &Plan, opts: &SimOptions, loads: &[ShapedLoad]) -> Result<Engine, ShapeError> {
    let mut nodes = crate::nodes(plan, opts)?;
    shape_loads(plan, &mut nodes, loads, opts.start_ns)?;
    Ok(Engine::new(nodes, opts.start_ns).share_cpus(opts.cpus))
}

/// Replaces the constant-rate source of each load in `loads` by its shaped source,
/// starting at `start_ns`.
pub fn shape_loads(
    plan: &Plan,
    nodes: &mut [SimNode],
    loads: &[ShapedLoad],
    start_ns: i64,
) -> Result<(), ShapeError> {
    for sl in loads {
        let l = plan.loads.get(sl.load).ok_or(ShapeError::NoLoad(sl.load))?;
        let name = || format!("{} → {}", plan.nodes[l.from].name, plan.nodes[l.to].name);
        let err = |message: String| ShapeError::Load {
            load: name(),
            message,
        };
        let Some(Kind::Host(h)) = nodes.get_mut(l.from).map(|n| &mut n.kind) else {
            return Err(err("its source is not a simulated host".into()));
        };
        let Some(i) = h.sources.iter().position(|c| c.dst == l.dst) else {
            return Err(err("the host has no source for it".into()));
        };
        let cbr = h.sources.remove(i);
        let src = ShapedSource::new(
            cbr.src_port,
            cbr.dst,
            cbr.payload,
            sl.model,
            sl.pattern,
            start_ns,
        )
        .map_err(|e| err(format!("{}: {e}", sl.model.name())))?;
        h.shaped.push(src);
    }
    Ok(())
}

/// The index of node `from` and of its port towards node `to`.
pub fn port_towards(plan: &Plan, from: &str, to: &str) -> Option<(usize, usize)> {
    let n = plan.nodes.iter().position(|n| n.name == from)?;
    let t = plan.nodes.iter().position(|n| n.name == to)?;
    let p = plan.nodes[n].ifaces.iter().position(|f| f.peer == t)?;
    Some((n, p))
}
