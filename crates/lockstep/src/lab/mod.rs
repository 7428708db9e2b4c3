//! `lockstep lab …` and `lockstep demo`: build a test network in namespaces from a
//! scenario file, run it in each mode, collect results and a report.
//!
//! - [`scenario`]: the scenario file and its checks (errors name file, line, field).
//! - [`plan`]: addresses, routes, schedules and node configurations (pure).
//! - [`topo`]: the namespaces, veths, shaping, addresses, routes; always removed.
//! - [`run`]: starting the nodes on one frame, the load, progress, collecting.
//! - [`results`]: from the nodes' files to per-flow figures and the report.
//! - [`tables`]: the terminal tables (FIFO vs TDP, TF sweep).
//! - [`method`]: `kind = "jitter"`, the jitter-source methodology (baseline, variants,
//!   contribution table).
//! - [`rtservice`]: `kind = "rt-service"`, garcia Table 2 in the lab.

pub use lockstep_plan::{plan, scenario};

pub mod method;
pub mod results;
pub mod rtservice;
pub mod run;
pub mod shaped;
pub mod tables;
pub mod topo;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lockstep_core::Duration;

use crate::cli::parse_duration_positive;
use crate::UsageError;
use scenario::{RunMode, Scenario};

/// The mesh4 scenario, built in: `lockstep demo` runs it from any directory.
pub const MESH4: &str = include_str!("../../../../scenarios/mesh4.toml");

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Build a scenario's network in namespaces, run each mode/TF, collect results and
    /// write report.html (needs root).
    Run(RunArgs),
    /// Check a scenario and show its plan (addresses, routes, schedules) without
    /// building anything; --output writes the node files.
    Plan(PlanArgs),
    /// Remove what a crashed run left behind: namespaces ls-* and their processes.
    Clean,
}

/// Overrides shared by `run` and `plan`.
#[derive(Args, Debug, Clone)]
pub struct OverrideArgs {
    /// Run at this time-frame length instead of the scenario's TF(s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_positive)]
    pub tf: Option<Duration>,
    /// Run these modes instead of the scenario's (comma-separated: fifo,tdp,kernel).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_mode)]
    pub modes: Option<Vec<RunMode>>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (see scenarios/).
    #[arg(value_name = "SCENARIO.toml")]
    pub scenario: PathBuf,
    /// Traffic duration of each run (default: the scenario's).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = parse_duration_positive)]
    pub duration: Option<Duration>,
    /// Result directory (default: lab-results/<scenario>-<time>).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print the SPEC §7 document on stdout (tables go to stderr).
    #[arg(long)]
    pub json: bool,
    /// Leave the namespaces in place after each run (remove with `lockstep lab clean`).
    #[arg(long)]
    pub keep: bool,
    /// No progress on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Turn the kernel's real-time throttling off for the run (sched_rt_runtime_us =
    /// -1, put back at the end, or by `lockstep lab clean` after a crash): without it a
    /// polling SCHED_FIFO thread is stopped for 50 ms of every second. A host setting:
    /// for a machine of your own.
    #[arg(long)]
    pub rt_throttling_off: bool,
    /// Methodology scenarios (`kind = "jitter"`): run the baseline and every variant
    /// this many times, interleaved round by round.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: Option<u32>,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[arg(value_name = "SCENARIO.toml")]
    pub scenario: PathBuf,
    /// Write each run's node files into DIR/<run>/config/.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Traffic duration of each run, simulated and measured (default 10s).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = parse_duration_positive)]
    pub duration: Option<Duration>,
    /// Result directory (default: lab-results/mesh4-<time>).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// No progress on stderr.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

fn parse_mode(s: &str) -> Result<RunMode, String> {
    RunMode::parse(s.trim()).ok_or_else(|| format!("expected fifo, tdp or kernel, got \"{s}\""))
}

/// Reads and checks a scenario file, with the command line's overrides.
pub fn load(path: &std::path::Path, o: &OverrideArgs) -> Result<Scenario> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read the scenario: {e}", path.display())))?;
    let s = Scenario::parse(&path.display().to_string(), &text)
        .map_err(|e| UsageError(e.to_string()))?;
    s.with_overrides(o.tf, o.modes.clone())
        .map_err(|e| UsageError(e.to_string()).into())
}

/// The methodology scenario if the file is one (`[scenario] kind = "jitter"`), else None.
fn load_jitter(path: &std::path::Path) -> Result<Option<method::Jitter>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read the scenario: {e}", path.display())))?;
    if !method::is_jitter(&text) {
        return Ok(None);
    }
    method::Jitter::parse(&path.display().to_string(), &text)
        .map(Some)
        .map_err(|e| UsageError(e.to_string()).into())
}

/// The rt-service scenario if the file is one (`[scenario] kind = "rt-service"`).
fn load_rt(path: &std::path::Path) -> Result<Option<rtservice::RtService>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read the scenario: {e}", path.display())))?;
    if !rtservice::is_rt_service(&text) {
        return Ok(None);
    }
    rtservice::RtService::parse(&path.display().to_string(), &text)
        .map(Some)
        .map_err(|e| UsageError(e.to_string()).into())
}

/// The `shaped-switch` scenario if the file is one (`[scenario] kind`), else None.
fn load_shaped(path: &std::path::Path) -> Result<Option<shaped::Shaped>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read the scenario: {e}", path.display())))?;
    if !shaped::is_shaped(&text) {
        return Ok(None);
    }
    shaped::Shaped::parse(&path.display().to_string(), &text)
        .map(Some)
        .map_err(|e| UsageError(e.to_string()).into())
}

pub fn run(cmd: LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Run(a) => {
            let _lifted = if a.rt_throttling_off {
                run::require_root("lab run --rt-throttling-off")?;
                let lifted = lockstep_linux::throttle::ThrottlingLifted::lift()
                    .map_err(|e| crate::EnvError(format!("--rt-throttling-off: {e}")))?;
                if let Some(l) = &lifted {
                    eprintln!(
                        "lab: RT throttling off for this run (kernel.sched_rt_runtime_us was {}; put back at the end, or by `lockstep lab clean` after a crash)",
                        l.previous()
                    );
                }
                lifted
            } else {
                None
            };
            if let Some(j) = load_jitter(&a.scenario)? {
                return method::run(
                    &j,
                    a.repeat.unwrap_or(1),
                    a.duration,
                    a.output,
                    a.json,
                    a.quiet,
                );
            }
            if let Some(r) = load_rt(&a.scenario)? {
                return rtservice::run(&r, a.duration, a.output, a.json, a.quiet);
            }
            if a.repeat.is_some() {
                return Err(UsageError(format!(
                    "--repeat: {} is not a methodology scenario ([scenario] kind = \"jitter\")",
                    a.scenario.display()
                ))
                .into());
            }
            if let Some(sh) = load_shaped(&a.scenario)? {
                return shaped::run(&sh, a.duration, a.output, a.quiet);
            }
            let s = load(&a.scenario, &a.overrides)?;
            let opts = run::RunOptions {
                duration: a.duration,
                output: a.output,
                json: a.json,
                keep: a.keep,
                quiet: a.quiet,
            };
            run::run_scenario(&s, &opts)
        }
        LabCmd::Plan(a) => {
            if let Some(r) = load_rt(&a.scenario)? {
                print!("{}", rtservice::describe(&r));
                return Ok(());
            }
            if let Some(j) = load_jitter(&a.scenario)? {
                print!("{}", method::describe(&j));
                return Ok(());
            }
            if let Some(sh) = load_shaped(&a.scenario)? {
                print!("{}", shaped::describe(&sh));
                return Ok(());
            }
            let s = load(&a.scenario, &a.overrides)?;
            print!("{}", describe(&s, a.output.as_deref())?);
            Ok(())
        }
        LabCmd::Clean => {
            run::require_root("lab clean")?;
            match lockstep_linux::throttle::restore_after_crash() {
                Ok(Some(v)) => eprintln!(
                    "put back kernel.sched_rt_runtime_us = {v} (a run with --rt-throttling-off was killed)"
                ),
                Ok(None) => {}
                Err(e) => eprintln!("warning: {e}"),
            }
            let removed = topo::clean()?;
            if removed.is_empty() {
                eprintln!("nothing to clean: no ls-* network namespace");
            } else {
                eprintln!(
                    "removed {} namespace(s): {}",
                    removed.len(),
                    removed.join(" ")
                );
            }
            Ok(())
        }
    }
}

/// `lab plan`: the plan of every run, as text.
fn describe(s: &Scenario, out: Option<&std::path::Path>) -> Result<String> {
    let mut t = format!("scenario {} ({}): OK\n", s.name, s.source.file);
    for run in s.runs() {
        let p = plan::plan(s, &run).map_err(|e| UsageError(e.to_string()))?;
        t.push_str(&format!("\n{} (TF {}, k {}):\n", run.label, run.tf, p.k));
        for n in &p.nodes {
            let ifs: Vec<String> = n
                .ifaces
                .iter()
                .map(|i| format!("{} {}/{} {}", i.ifname, i.addr, i.prefix_len, i.mac))
                .collect();
            let proc = if n.config.is_some() {
                ""
            } else {
                " (no lockstep process)"
            };
            t.push_str(&format!(
                "  {:<12} {:<11} {}{proc}\n",
                n.name,
                scenario::role_name(n.role),
                ifs.join(", ")
            ));
        }
        for f in &p.flows {
            let starts = compress(&f.starts);
            t.push_str(&format!(
                "  flow {} ({}): {} → {}, {} × {}B in frames {starts} of every {}; frames later on each link: {:?}\n",
                f.id,
                f.name,
                f.src,
                f.dst,
                f.packets,
                f.size,
                p.k,
                f.offsets
            ));
        }
        if let Some(dir) = out {
            let d = dir.join(&run.dir).join("config");
            std::fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
            for n in &p.nodes {
                if let Some(c) = &n.config {
                    let text = plan::node_file_toml(c).map_err(|e| anyhow::anyhow!("{e}"))?;
                    crate::report::write_atomic(
                        &d.join(format!("{}.toml", n.name)),
                        text.as_bytes(),
                    )?;
                }
            }
            t.push_str(&format!("  node files: {}\n", d.display()));
        }
    }
    Ok(t)
}

/// `[0, 1, 2, 5, 7, 8]` → `0-2,5,7-8`.
pub fn compress(v: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", v[i], v[j])
        } else {
            v[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

/// mesh4 twice: simulated on an ideal host (what TDP does when every node acts on
/// time), then in namespaces on this machine (what this host does to it).
pub fn demo(args: DemoArgs) -> Result<()> {
    let s =
        Scenario::parse("scenarios/mesh4.toml", MESH4).map_err(|e| UsageError(e.to_string()))?;
    if !args.quiet {
        eprintln!(
            "== 1/2 simulated: mesh4 in virtual time, every node acting on time (ideal host)"
        );
    }
    crate::sim::run::run_scenario(&s, &demo_sim_args(&args))?;
    if !args.quiet {
        eprintln!("\n== 2/2 measured: mesh4 in network namespaces on this machine, in real time");
    }
    let opts = run::RunOptions {
        duration: args.duration,
        output: args.output,
        json: false,
        keep: false,
        quiet: args.quiet,
    };
    // run_scenario ends by printing where the results and the report are
    run::run_scenario(&s, &opts)?;
    println!("\n{DEMO_NOTE}");
    Ok(())
}

const DEMO_NOTE: &str = "Simulated: with every node acting on time, TDP keeps each flow's jitter \
under 2 frames (500us) at full load, while FIFO's is in milliseconds. Measured: here the \
host's late wake-ups (counted as slips) add their own delay; on a virtual machine they \
reach milliseconds. To predict them, measure this host with `lockstep probe timer --json \
> timer.json` and run `lockstep sim run scenarios/mesh4.toml --host timer.json`.";

/// The simulator's part of the demo: the same duration, results beside the lab's.
fn demo_sim_args(args: &DemoArgs) -> crate::sim::SimRunArgs {
    crate::sim::SimRunArgs {
        scenario: PathBuf::from("scenarios/mesh4.toml"),
        duration: args.duration,
        seed: 1,
        host: "ideal".into(),
        processing: Duration::ZERO,
        propagation: Duration::ZERO,
        framing: lockstep_sim::Framing::Ethernet,
        output: args.output.as_ref().map(|o| o.join("simulated")),
        json: false,
        quiet: args.quiet,
        overrides: OverrideArgs {
            tf: None,
            modes: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_lists_are_compressed() {
        assert_eq!(compress(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(compress(&[3]), "3");
        assert_eq!(compress(&[]), "");
    }
}
