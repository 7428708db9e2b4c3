//! `lockstep sim`: the lab's scenarios in virtual time.
//!
//! - [`run`]: `sim run SCENARIO.toml` — the same scenario files as `lab run`, planned
//!   the same way, driven by the simulator (`lockstep-sim`) instead of namespaces; the
//!   same result document and report, labelled "simulated".
//! - [`shaped`]: `sim run` of the shaped-switch scenario: the lab's switch with C, D
//!   and E shaped by lockstep's bucket, tbf or htb, the bound next to the simulation.
//! - [`gen`]: `sim gen` — writes a scenario of a generated network (ring, grid,
//!   fat-tree) to a file.
//! - [`compare`]: `sim compare LAB SIM` — a lab run and a simulated run side by side.
//! - [`paper`]: the figures of the papers a scenario reproduces, shown next to ours.

pub mod compare;
pub mod gen;
pub mod hostfile;
pub mod paper;
pub mod pipeline;
pub mod run;
pub mod shaped;

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use lockstep_core::Duration;

use crate::lab::OverrideArgs;

#[derive(Subcommand, Debug)]
pub enum SimCmd {
    /// Simulate a scenario (the same files as `lab run`): FIFO and TDP runs in virtual
    /// time, per-flow latency and jitter, report.html; no root needed.
    Run(SimRunArgs),
    /// Write a scenario of a generated network (ring, grid or fat-tree of routers with
    /// reserved flows) to a file.
    Gen(gen::GenArgs),
    /// A lab run and a simulated run of the same scenario side by side: per flow
    /// latency percentiles, jitter, loss, slips, the Kolmogorov–Smirnov distance of
    /// the two latency samples, and (TDP) whether every on-time packet left every
    /// router in the same frame.
    Compare(compare::CompareArgs),
}

#[derive(Args, Debug)]
pub struct SimRunArgs {
    /// The scenario file (see scenarios/).
    #[arg(value_name = "SCENARIO.toml")]
    pub scenario: PathBuf,
    /// Simulated traffic time of each run (default: the scenario's; at most 1 day).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = crate::cli::parse_sim_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Seed of every random draw (host models): the same seed gives the same results.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// How late each node acts: `ideal`, `fixed:50us`, or a `lockstep probe timer
    /// --json` result file (its wake-up histogram).
    #[arg(long, value_name = "MODEL", default_value = "ideal")]
    pub host: String,
    /// Each node's own host model from a lab result directory (`lab run --output
    /// DIR`): every run takes the wake-up lateness each sender and router measured in
    /// the lab's run of the same mode (`DIR/<run>/<node>.json`); the other nodes
    /// keep --host.
    #[arg(long, value_name = "DIR")]
    pub node_hosts: Option<PathBuf>,
    /// Time a node takes per packet it handles: each packet it receives and each it
    /// sends costs it this much (a user-space node's system calls; at most 1s).
    #[arg(long, value_name = "DUR", default_value = "0ns", value_parser = crate::cli::parse_delay)]
    pub processing: Duration,
    /// The nodes share this many CPUs, as nodes of one host do (the lab's): a node
    /// that wakes while every CPU is busy with other nodes' packets waits for one.
    /// Default: a CPU each. At most 1024.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=MAX_SIM_CPUS))]
    pub cpus: Option<u32>,
    /// Threads to simulate on: `auto` (default) or a number. The network is cut into
    /// as many parts, each run on a thread of its own, with the same results as on
    /// one. `auto`: as many as this process may use, at most one per 128 routers (a
    /// smaller network runs faster whole). Runs with faults or with --cpus run whole
    /// (a number asked for says so). At most 256.
    #[arg(long, value_name = "N|auto", default_value = "auto", value_parser = parse_threads)]
    pub threads: Threads,
    /// Propagation delay of every link (at most 1s).
    #[arg(long, value_name = "DUR", default_value = "0ns", value_parser = crate::cli::parse_delay)]
    pub propagation: Duration,
    /// Bytes a frame costs on the wire: `ethernet` (IP + 38: header, FCS, preamble,
    /// gap — a real port) or `tbf` (IP + 14: what tc tbf counts on the lab's veths).
    #[arg(long, value_name = "KIND", default_value = "ethernet", value_parser = parse_framing)]
    pub framing: lockstep_sim::Framing,
    /// What the links are: `wire` (ports serialising every frame at the link rate) or
    /// `veth` (what the lab builds: veths that hand a frame over at once, behind tc
    /// tbf at the link rate with the lab's bucket where the link is shaped; counts
    /// bytes as tbf does). Use `veth` to compare with a lab run.
    #[arg(long, value_name = "KIND", default_value = "wire", value_parser = parse_links)]
    pub links: lockstep_sim::LinkModel,
    /// Result directory (default: sim-results/<scenario>-<time>).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print the result document on stdout (tables go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write each receiver's per-packet file, `<run>/<receiver>-packets.csv` in
    /// the result directory, as the lab does (one row per packet: large runs make
    /// large files).
    #[arg(long)]
    pub packets: bool,
    #[command(flatten)]
    pub overrides: OverrideArgs,
    /// Print nothing on stdout (the demo shows the returned lines its own way).
    #[arg(skip)]
    pub silent: bool,
}

/// Most CPUs `sim run --cpus` shares the nodes among (the most one host's CPU set
/// holds; every event scans them).
pub const MAX_SIM_CPUS: i64 = 1024;

/// `--threads`: `auto` or a number of threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    Auto,
    Exactly(u16),
}

/// Most threads `sim run --threads` takes.
pub const MAX_SIM_THREADS: u16 = 256;

fn parse_threads(s: &str) -> Result<Threads, String> {
    if s == "auto" {
        return Ok(Threads::Auto);
    }
    match s.parse::<u16>() {
        Ok(n) if (1..=MAX_SIM_THREADS).contains(&n) => Ok(Threads::Exactly(n)),
        _ => Err(format!(
            "expected auto or a number of threads from 1 to {MAX_SIM_THREADS}, got \"{s}\""
        )),
    }
}

fn parse_framing(s: &str) -> Result<lockstep_sim::Framing, String> {
    match s {
        "ethernet" => Ok(lockstep_sim::Framing::Ethernet),
        "tbf" => Ok(lockstep_sim::Framing::Tbf),
        _ => Err(format!("expected ethernet or tbf, got \"{s}\"")),
    }
}

fn parse_links(s: &str) -> Result<lockstep_sim::LinkModel, String> {
    use lockstep_sim::LinkModel;
    [LinkModel::Wire, LinkModel::Veth]
        .into_iter()
        .find(|l| l.name() == s)
        .ok_or_else(|| format!("expected wire or veth, got \"{s}\""))
}

pub fn run(cmd: SimCmd) -> Result<()> {
    match cmd {
        SimCmd::Run(args) => run::run(args),
        SimCmd::Gen(args) => gen::run(args),
        SimCmd::Compare(args) => compare::run(args),
    }
}
