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
pub mod queue;
pub mod rng;
pub mod shaped;
pub mod source;
pub mod spare;

pub use build::{build, faults, BuildError};
pub use engine::{Engine, EngineStats, Kind, NodeClock, NodeEventSummary, SimFault, SimNode};
pub use hostmodel::{HostModel, Measured, ModelError};
pub use link::{Discipline, Framing};

use std::collections::BTreeMap;

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
}

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
        }
    }
}

/// A plan ready to run.
/// Its faults ([`faults`]) are injected.
pub fn engine(plan: &Plan, opts: &SimOptions) -> Result<Engine, BuildError> {
    let mut e = Engine::new(nodes(plan, opts)?, opts.start_ns).share_cpus(opts.cpus);
    e.inject(faults(plan, opts.start_ns)?);
    Ok(e)
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
