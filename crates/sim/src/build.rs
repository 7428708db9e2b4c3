//! From a plan (the same one the lab builds in namespaces) to a simulated network:
//! one core [`Node`] per router, one [`Host`] per sender or receiver, one
//! [`LinkDir`] per link direction.

use std::net::SocketAddrV4;

use lockstep_core::net::PortId;
use lockstep_core::tdp::{Mode, Node, Receiver, Role, Sender, SenderFlow};
use lockstep_plan::fault::FaultKind;
use lockstep_plan::plan::{tbf_burst, IfacePlan, LoadPlan, NodePlan, Plan};
use lockstep_plan::scenario::RunMode;
use thiserror::Error;

use crate::engine::{Kind, SimFault, SimNode};
use crate::host::{Cbr, FlowAddr, Host, Iface};
use crate::link::{Discipline, LinkDir};
use crate::rng::Rng;
use crate::{LinkModel, SimOptions};

/// A plan the simulator cannot run.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum BuildError {
    #[error("mode \"kernel\" (Linux forwarding) runs only in the lab: the simulator models lockstep's own routers (use modes = [\"fifo\", \"tdp\"])")]
    KernelMode,
    #[error("node \"{node}\": {message}")]
    Node { node: String, message: String },
    #[error("fault: {0}")]
    Fault(String),
}

fn node_err(n: &NodePlan, message: impl Into<String>) -> BuildError {
    BuildError::Node {
        node: n.name.clone(),
        message: message.into(),
    }
}

/// Payload of a load datagram when the scenario gives none (as the lab).
const DEFAULT_LOAD_SIZE: u32 = 1000;
/// How long a port may queue: a byte limit of this much time at the link rate
/// (the lab's `tc tbf` latency).
pub const QUEUE_TIME_NS: u64 = 100_000_000;

/// The simulated nodes of `plan`, in the plan's order.
pub fn build(plan: &Plan, opts: &SimOptions) -> Result<Vec<SimNode>, BuildError> {
    if plan.run.mode == RunMode::Kernel {
        return Err(BuildError::KernelMode);
    }
    let mut nodes = Vec::with_capacity(plan.nodes.len());
    for (i, n) in plan.nodes.iter().enumerate() {
        let kind = match n.role {
            Role::Edge | Role::Core => Kind::Router(Box::new(router(n)?)),
            Role::Sender | Role::Receiver => Kind::Host(Box::new(host(n, plan)?)),
        };
        let ports = n
            .ifaces
            .iter()
            .map(|f| port_link(plan, f, opts))
            .collect::<Result<Vec<_>, _>>()?;
        let mut node = SimNode::new(
            n.name.clone(),
            kind,
            ports,
            Rng::stream(opts.seed, i as u64),
        );
        if let Some(a) = n.async_clock {
            node.clock.drift_ppb = -a.slow_ppb;
        }
        if let Kind::Router(_) = node.kind {
            node.fresh = n.config.as_ref().map(|c| c.node.clone());
        }
        nodes.push(node);
    }
    add_loads(plan, &mut nodes, opts)?;
    Ok(nodes)
}

/// The plan's outages as the engine injects them, for a run that starts at
/// `start` (true time). A clock offset is no event: the plan puts it in the
/// router's configuration.
pub fn faults(plan: &Plan, start: i64) -> Result<Vec<SimFault>, BuildError> {
    let index = |name: &str| {
        plan.nodes
            .iter()
            .position(|n| n.name == name)
            .ok_or_else(|| BuildError::Fault(format!("no node \"{name}\"")))
    };
    let mut out = Vec::new();
    for f in &plan.faults {
        let Some((at, end)) = f.outage() else {
            continue;
        };
        let (at, until) = (start + at.as_nanos(), start + end.as_nanos());
        match &f.kind {
            FaultKind::LinkDown { ends: [a, b] } => {
                let (ia, ib) = (index(a)?, index(b)?);
                let port = |me: usize, peer: usize| {
                    plan.nodes[me]
                        .ifaces
                        .iter()
                        .position(|x| x.peer == peer)
                        .map(|p| (me as u32, p as u16))
                        .ok_or_else(|| {
                            BuildError::Fault(format!("no link between \"{a}\" and \"{b}\""))
                        })
                };
                let ends = [port(ia, ib)?, port(ib, ia)?];
                out.push(SimFault::LinkDown { ends, at, until });
            }
            FaultKind::RouterRestart { node } => {
                let node = index(node)? as u32;
                out.push(SimFault::Restart { node, at, until });
            }
            FaultKind::ClockOffset { .. } | FaultKind::Flood => {}
        }
    }
    Ok(out)
}

fn port_link(
    plan: &Plan,
    f: &IfacePlan,
    opts: &SimOptions,
) -> Result<crate::engine::Port, BuildError> {
    let (link, peer, rate_bps) = (f.link, f.peer, f.rate_bps);
    let pn = &plan.nodes[peer];
    let to_port = pn
        .ifaces
        .iter()
        .position(|f| f.link == link)
        .ok_or_else(|| node_err(pn, format!("no interface on link {link}")))?;
    let limit = (u128::from(rate_bps) * u128::from(QUEUE_TIME_NS) / 8 / 1_000_000_000) as u64;
    let framing = opts.links.framing(opts.framing);
    let wire = LinkDir::new(rate_bps, opts.propagation_ns, limit.max(3028), framing);
    let link_dir = match (opts.links, f.shape) {
        (LinkModel::Wire, _) => wire,
        (LinkModel::Veth, true) => wire.with_discipline(Discipline::Tbf {
            burst: u64::from(tbf_burst(rate_bps)),
        }),
        (LinkModel::Veth, false) => wire.with_discipline(Discipline::Instant),
    };
    Ok(crate::engine::Port {
        link: link_dir,
        to: peer as u32,
        to_port: to_port as u16,
        to_part: 0,
    })
}

fn router(n: &NodePlan) -> Result<Node, BuildError> {
    let file = n
        .config
        .as_ref()
        .ok_or_else(|| node_err(n, "a router without a node configuration"))?;
    Node::new(file.node.clone()).map_err(|e| node_err(n, e.to_string()))
}

fn host(n: &NodePlan, plan: &Plan) -> Result<Host, BuildError> {
    let mut h = Host {
        iface: n.ifaces.first().map(|f| Iface {
            mac: f.mac,
            addr: f.addr,
            peer_mac: f.peer_mac,
        }),
        ..Host::default()
    };
    let Some(file) = n.config.as_ref() else {
        return Ok(h);
    };
    let cfg = &file.node;
    match n.role {
        Role::Sender => {
            let mut flows = Vec::new();
            let mut addrs = Vec::new();
            for lf in &file.live.flows {
                let nf = cfg.flows.iter().find(|f| f.id == lf.flow);
                let dst = lf
                    .dst
                    .or(nf.and_then(|f| f.dst))
                    .ok_or_else(|| node_err(n, format!("flow {} has no destination", lf.flow)))?;
                let src_ip = h.iface.map(|i| i.addr).unwrap_or(*dst.ip());
                flows.push(SenderFlow {
                    id: lf.flow,
                    size: lf.size,
                    count: lf.count,
                });
                addrs.push(FlowAddr {
                    id: lf.flow,
                    src: SocketAddrV4::new(src_ip, lf.src_port),
                    dst,
                });
            }
            let mark = file.live.mark.unwrap_or(cfg.mode == Mode::Tdp);
            // An asynchronous sender keeps the routers' frame on a clock of its own
            // that runs slow (the engine's drift, exact to the part per billion).
            let mut cfg = cfg.clone();
            if let Some(a) = n.async_clock {
                cfg.frame.tf = a.tf;
            }
            let s = Sender::new(&cfg, &flows, mark).map_err(|e| node_err(n, e.to_string()))?;
            h.sender = Some((s, addrs));
        }
        Role::Receiver => {
            let port = file.live.bind.map(|b| b.port()).unwrap_or(0);
            // the run measures the deliveries itself
            h.receiver = Some((Receiver::records_only(), port));
        }
        _ => {}
    }
    let _ = plan;
    Ok(h)
}

fn add_loads(
    plan: &Plan,
    nodes: &mut [crate::engine::SimNode],
    opts: &SimOptions,
) -> Result<(), BuildError> {
    for l in &plan.loads {
        let from = &plan.nodes[l.from];
        let rate = load_rate(l, from);
        let size = l.size.unwrap_or(DEFAULT_LOAD_SIZE).max(64);
        let period = (u128::from(size) * 8 * 1_000_000_000 / u128::from(rate.max(1))) as i64;
        let src = &mut nodes[l.from];
        let Kind::Host(h) = &mut src.kind else {
            return Err(node_err(from, "a load source must be a host"));
        };
        h.sources.push(Cbr::new(
            8000u16.saturating_add(l.index as u16),
            l.dst,
            size,
            period.max(1),
            opts.start_ns,
        ));
        if let Kind::Host(h) = &mut nodes[l.to].kind {
            h.sinks.push((l.dst.port(), 0));
        }
    }
    Ok(())
}

/// The load's rate; "max" (none given) is the source's link rate (a greedy source).
fn load_rate(l: &LoadPlan, from: &NodePlan) -> u64 {
    l.rate_bps
        .or_else(|| from.ifaces.first().map(|f| f.rate_bps))
        .unwrap_or(1)
}

/// The port id of interface `i` of a planned node.
pub fn port_id(i: usize) -> PortId {
    PortId(i as u16)
}
