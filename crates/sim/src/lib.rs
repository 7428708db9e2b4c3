//! # lockstep-sim — the network in virtual time
//!
//! A discrete-event simulator that drives the very state machines the live nodes
//! drive — the core's TDP/FIFO router [`lockstep_core::tdp::Node`], its
//! [`Sender`](lockstep_core::tdp::Sender) and [`Receiver`](lockstep_core::tdp::Receiver)
//! — with a virtual clock, over modelled links and hosts. It builds its network from
//! the same plan the lab builds in namespaces, so a scenario file runs unchanged in
//! both.
//!
//! - [`link`]: a port's FIFO byte-limited queue, serialisation and propagation.
//! - [`hostmodel`]: how late a node acts (ideal, fixed, or a measured wake-up
//!   histogram).
//! - [`host`]: the kernel side of a simulated sender or receiver.
//! - [`source`]: token-bucket shaped sources (lockstep's bucket, models of Linux tbf
//!   and htb); [`shaped`]: a plan's loads sent through them.
//! - [`engine`]: the event loop; [`build`]: plan → simulated nodes; [`spare`]:
//!   packet buffers reused from receivers to senders.
//!
//! Deterministic: a run is a pure function of (plan, options); nothing reads the
//! wall clock and the only chance comes from a seeded generator ([`rng`]).

pub mod build;
pub mod engine;
pub mod host;
pub mod hostmodel;
pub mod link;
pub mod parts;
pub mod queue;
pub mod rng;
pub mod shaped;
pub mod source;
pub mod spare;

pub use build::{build, faults, BuildError};
pub use engine::{Engine, EngineStats, Kind, NodeClock, NodeEventSummary, SimFault, SimNode};
pub use hostmodel::{HostModel, Measured, ModelError};
pub use link::{Discipline, Framing};
pub use parts::{Parts, Whole};

use std::collections::BTreeMap;

use lockstep_core::tdp::Delivery;
use lockstep_plan::plan::Plan;

/// How to simulate.
#[derive(Clone, Debug)]
pub struct SimOptions {
    pub seed: u64,
    /// True time at which every node starts.
    pub start_ns: i64,
    /// The host model of every node not named in `hosts`.
    pub host: HostModel,
    /// Host models by node name.
    pub hosts: BTreeMap<String, HostModel>,
    /// Time each node takes per packet it receives, and per packet it sends.
    pub processing_ns: i64,
    /// Clock offset and drift by node name.
    pub clocks: BTreeMap<String, NodeClock>,
    pub framing: Framing,
    pub propagation_ns: i64,
    pub links: LinkModel,
    /// CPUs the nodes share (one host, as in the lab); `None`: a CPU each.
    pub cpus: Option<u32>,
    /// Threads to run the network on, in as many parts ([`Parts`]).
    pub threads: Threads,
}

/// How many threads (parts of the network) to run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// This many (1: whole); a network that cannot be cut runs whole and says why.
    Exactly(usize),
    /// Up to this many (the CPUs there are), each part at least
    /// [`ROUTERS_PER_PART`] routers: a small network runs whole, silently.
    UpTo(usize),
}

/// The fewest routers a part gets when the number of parts is chosen: below some
/// hundreds of routers a network runs faster whole (measured on generated grids,
/// 2 threads against 1: 36 and 100 routers 1.2–2.5× slower, 256 routers 1.2–1.5×
/// faster).
pub const ROUTERS_PER_PART: usize = 128;

/// What the simulated links are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkModel {
    /// Ports that serialise every frame at the link rate (real Ethernet).
    #[default]
    Wire,
    /// What the lab's links are: veths that hand a frame over at once, behind `tc
    /// tbf` at the link rate with the lab's bucket where the link is shaped.
    Veth,
}

impl LinkModel {
    /// The name the command line and the results use: `wire`, `veth`.
    pub fn name(self) -> &'static str {
        match self {
            LinkModel::Wire => "wire",
            LinkModel::Veth => "veth",
        }
    }

    /// What a frame costs on these links when `asked` is asked for: a veth's tbf
    /// counts the Ethernet header only, whatever was asked.
    pub fn framing(self, asked: Framing) -> Framing {
        match self {
            LinkModel::Wire => asked,
            LinkModel::Veth => Framing::Tbf,
        }
    }
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            seed: 1,
            start_ns: 1_000_000_000,
            host: HostModel::Ideal,
            hosts: BTreeMap::new(),
            processing_ns: 0,
            clocks: BTreeMap::new(),
            framing: Framing::Ethernet,
            propagation_ns: 0,
            links: LinkModel::Wire,
            cpus: None,
            threads: Threads::Exactly(1),
        }
    }
}

/// A plan ready to run.
/// Its faults ([`faults`]) are injected.
pub fn engine(plan: &Plan, opts: &SimOptions) -> Result<Engine, BuildError> {
    whole(plan, opts, nodes(plan, opts)?)
}

/// The engine of `nodes`, built from `plan` with `opts`: CPUs shared as asked,
/// the plan's faults injected.
fn whole(plan: &Plan, opts: &SimOptions, nodes: Vec<SimNode>) -> Result<Engine, BuildError> {
    let mut e = Engine::new(nodes, opts.start_ns).share_cpus(opts.cpus);
    e.inject(faults(plan, opts.start_ns)?);
    Ok(e)
}

/// A network ready to run: whole, in one engine, or in parts on threads of their
/// own ([`Parts`]); the same results either way.
pub enum Sim {
    Whole(Box<Engine>),
    Parts(Parts),
}

/// Why a network runs whole although more threads were asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotCut {
    /// Faults change nodes of two parts at one instant.
    Faults,
    /// Nodes that share CPUs share one pool of them.
    SharedCpus,
    Cut(Whole),
}

impl std::fmt::Display for NotCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotCut::Faults => f.write_str("the scenario injects faults"),
            NotCut::SharedCpus => f.write_str("the nodes share CPUs (--cpus)"),
            NotCut::Cut(w) => write!(f, "{w}"),
        }
    }
}

/// A plan ready to run on the threads `opts.threads` allows, or whole (with the
/// reason when more than one thread was asked for). Its faults ([`faults`]) are
/// injected.
pub fn sim(plan: &Plan, opts: &SimOptions) -> Result<(Sim, Option<NotCut>), BuildError> {
    let nodes = nodes(plan, opts)?;
    let routers = nodes
        .iter()
        .filter(|n| matches!(n.kind, Kind::Router(_)))
        .count();
    let (parts, asked) = match opts.threads {
        Threads::Exactly(n) => (n, true),
        Threads::UpTo(n) => (n.min(routers / ROUTERS_PER_PART), false),
    };
    let (nodes, why) = if parts <= 1 {
        (nodes, None)
    } else if !plan.faults.is_empty() {
        (nodes, Some(NotCut::Faults))
    } else if opts.cpus.is_some() {
        (nodes, Some(NotCut::SharedCpus))
    } else {
        match Parts::new(nodes, opts.start_ns, parts) {
            Ok(p) => return Ok((Sim::Parts(p), None)),
            Err((nodes, w)) => (nodes, Some(NotCut::Cut(w))),
        }
    };
    let e = whole(plan, opts, nodes)?;
    Ok((Sim::Whole(Box::new(e)), why.filter(|_| asked)))
}

impl Sim {
    pub fn now(&self) -> i64 {
        match self {
            Sim::Whole(e) => e.now(),
            Sim::Parts(p) => p.now(),
        }
    }

    /// How many parts run at once (1: whole).
    pub fn parts(&self) -> usize {
        match self {
            Sim::Whole(_) => 1,
            Sim::Parts(p) => p.len(),
        }
    }

    pub fn run_until(&mut self, until: i64, on_delivery: &mut impl FnMut(usize, &Delivery)) {
        match self {
            Sim::Whole(e) => e.run_until(until, on_delivery),
            Sim::Parts(p) => p.run_until(until, on_delivery),
        }
    }

    pub fn stop_sources(&mut self) {
        match self {
            Sim::Whole(e) => e.stop_sources(),
            Sim::Parts(p) => p.stop_sources(),
        }
    }

    pub fn stats(&self) -> EngineStats {
        match self {
            Sim::Whole(e) => e.stats(),
            Sim::Parts(p) => p.stats(),
        }
    }

    /// Every node (in parts: part by part).
    pub fn nodes(&self) -> Box<dyn Iterator<Item = &SimNode> + '_> {
        match self {
            Sim::Whole(e) => Box::new(e.nodes.iter()),
            Sim::Parts(p) => Box::new(p.nodes()),
        }
    }

    /// The whole network, to read what the run left in it.
    pub fn into_engine(self) -> Engine {
        match self {
            Sim::Whole(e) => *e,
            Sim::Parts(p) => p.join(),
        }
    }
}

/// The simulated nodes of a plan with the options' host models, processing time and
/// clocks (what [`engine`] starts).
pub fn nodes(plan: &Plan, opts: &SimOptions) -> Result<Vec<SimNode>, BuildError> {
    let mut nodes = build(plan, opts)?;
    for n in &mut nodes {
        n.host = opts.hosts.get(&n.name).unwrap_or(&opts.host).clone();
        n.processing_ns = opts.processing_ns;
        if let Some(c) = opts.clocks.get(&n.name) {
            n.clock = *c;
        }
    }
    Ok(nodes)
}
