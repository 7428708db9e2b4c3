//! `lockstep lab …`: build a test network in namespaces from a scenario file, run it
//! in each mode, collect results and a report.
//!
//! A scenario file is loaded in one place, [`load`]: [`kind`] reads its
//! `[scenario] kind` (TDP when there is none), refuses the command-line options that
//! kind does not take, and the kind's parser makes a [`LabScenario`]; `lab run`,
//! `lab plan` and `sim run` match on it.
//!
//! - [`kind`]: the kind of a scenario file and which options each kind takes.
//! - [`scenario`]: the scenario file and its checks (errors name file, line, field).
//! - [`plan`]: addresses, routes, schedules and node configurations (pure).
//! - [`topo`]: the namespaces, veths, shaping, addresses, routes; always removed. The
//!   other kinds build their networks on its [`topo::Topology`] too.
//! - [`run`]: starting the nodes on one frame, the load, progress, collecting.
//! - [`results`]: from the nodes' files to per-flow figures and the report.
//! - [`bound`]: a FIFO run's network-calculus bound per flow, or why there is none.
//! - [`tables`]: the terminal tables (FIFO vs TDP, TF sweep).
//! - [`method`]: `kind = "jitter"`, the jitter-source methodology (baseline, variants,
//!   contribution table).
//! - [`rtservice`]: `kind = "rt-service"`, garcia Table 2 in the lab.
//! - [`shaped`]: `kind = "shaped-switch"`, shaped bursts into a bridge port (loeser).

pub use lockstep_plan::{plan, scenario};

pub mod bound;
pub mod faults;
pub mod inject;
pub mod kind;
pub mod method;
pub mod results;
pub mod rtservice;
pub mod run;
pub mod shaped;
pub mod tables;
pub mod topo;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lockstep_core::Duration;

use crate::cli::parse_duration_positive;
use crate::UsageError;
use scenario::{RunMode, Scenario};

pub use kind::{LabFlag, ScenarioKind};

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
    /// Run at this time-frame length instead of the scenario's TF(s) (TDP scenarios).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub tf: Option<Duration>,
    /// Run these modes instead of the scenario's (comma-separated: fifo,tdp,kernel; TDP
    /// scenarios).
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_mode)]
    pub modes: Option<Vec<RunMode>>,
    /// Run the scenario S times slower (time dilation: TF, processing allowance and
    /// periods times S, link, flow and load rates divided by S; frames unchanged), so
    /// a host's stalls shrink against the frame. One of 1, 2, 5, 10, 20, 50, 100, 200
    /// (TDP scenarios).
    #[arg(long, value_name = "S", value_parser = crate::cli::parse_time_scale)]
    pub scale: Option<u32>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The scenario file (see scenarios/).
    #[arg(value_name = "SCENARIO.toml")]
    pub scenario: PathBuf,
    /// Traffic duration of each run (default: the scenario's).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Result directory (default: lab-results/<scenario>-<time>).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print the result document on stdout (tables go to stderr; TDP, jitter and
    /// rt-service scenarios).
    #[arg(long)]
    pub json: bool,
    /// Leave the namespaces in place after each run (remove with `lockstep lab clean`;
    /// TDP scenarios).
    #[arg(long)]
    pub keep: bool,
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
    /// CI gates, checked on every flow of every run (each mode or row on its own).
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
    /// Routers: how their ports move frames (`packet`, `ring`, `ring-v2`, `xdp`; see
    /// `lockstep node --io`). Default: `xdp` (AF_XDP; the packet socket, with a note,
    /// where the kernel or the interface lacks it).
    #[arg(long, value_name = "MODE", value_parser = crate::node::parse_io)]
    pub io: Option<lockstep_linux::port::IoMode>,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

#[derive(Args, Debug)]
pub struct PlanArgs {
    #[arg(value_name = "SCENARIO.toml")]
    pub scenario: PathBuf,
    /// Write each run's node files into DIR/<run>/config/ (TDP scenarios).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print the plan as one JSON document (TDP scenarios): per run its nodes, flows
    /// (frames, offsets, addresses), loads and faults.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub overrides: OverrideArgs,
}

impl OverrideArgs {
    /// The overrides given, as options only some kinds take.
    pub fn given(&self) -> Vec<LabFlag> {
        let mut v = Vec::new();
        if self.tf.is_some() {
            v.push(LabFlag::Tf);
        }
        if self.modes.is_some() {
            v.push(LabFlag::Modes);
        }
        if self.scale.is_some() {
            v.push(LabFlag::Scale);
        }
        v
    }
}

impl RunArgs {
    /// The options given that only some kinds take, in the order `--help` lists them.
    fn given(&self) -> Vec<LabFlag> {
        let mut v = Vec::new();
        if self.json {
            v.push(LabFlag::Json);
        }
        if self.keep {
            v.push(LabFlag::Keep);
        }
        if self.repeat.is_some() {
            v.push(LabFlag::Repeat);
        }
        v.extend(self.overrides.given());
        v
    }
}

impl PlanArgs {
    fn given(&self) -> Vec<LabFlag> {
        let mut v = Vec::new();
        if self.output.is_some() {
            v.push(LabFlag::PlanOutput);
        }
        v.extend(self.overrides.given());
        v
    }
}

fn parse_mode(s: &str) -> Result<RunMode, String> {
    RunMode::parse(s.trim()).ok_or_else(|| format!("expected fifo, tdp or kernel, got \"{s}\""))
}

/// A scenario of any kind, checked, with the command line's overrides applied.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per command, moved once
pub enum LabScenario {
    Tdp(Scenario),
    Shaped(shaped::Shaped),
    Jitter(method::Jitter),
    RtService(rtservice::RtService),
}

/// A scenario file read and its kind known, not yet parsed.
pub struct ScenarioFile {
    /// As the user gave it (errors name it).
    pub shown: String,
    text: String,
    probed: kind::Probed,
}

impl ScenarioFile {
    /// Reads the file and its `[scenario] kind` (an unknown kind is a usage error).
    pub fn read(path: &Path) -> Result<ScenarioFile> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| UsageError(format!("{shown}: cannot read the scenario: {e}")))?;
        let probed = kind::probe(&shown, &text).map_err(|e| UsageError(e.to_string()))?;
        Ok(ScenarioFile {
            shown,
            text,
            probed,
        })
    }

    pub fn kind(&self) -> ScenarioKind {
        self.probed.kind
    }

    /// The file as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Refuses the first of the options given that this kind does not take.
    pub fn refuse(&self, given: &[LabFlag]) -> Result<()> {
        kind::refuse(given, self.kind(), &self.shown).map_err(|m| UsageError(m).into())
    }

    /// Parses and checks the file with its kind's parser and applies the overrides
    /// (TDP only: for another kind they are refused).
    pub fn load(self, o: &OverrideArgs) -> Result<LabScenario> {
        self.refuse(&o.given())?;
        let usage = |e: lockstep_plan::scenario::ScenarioError| UsageError(e.to_string());
        let file = self.shown.as_str();
        Ok(match self.kind() {
            ScenarioKind::Tdp => {
                let text = kind::tdp_text(file, &self.text, &self.probed).map_err(usage)?;
                let mut s = Scenario::parse(file, &text).map_err(usage)?;
                // the file as written (with its `kind = "tdp"`, if any) goes with the results
                s.source.text = self.text;
                let s = s.with_overrides(o.tf, o.modes.clone()).map_err(usage)?;
                LabScenario::Tdp(s.scaled(o.scale.unwrap_or(1)).map_err(usage)?)
            }
            ScenarioKind::Shaped => {
                LabScenario::Shaped(shaped::Shaped::parse(file, &self.text).map_err(usage)?)
            }
            ScenarioKind::Jitter => {
                LabScenario::Jitter(method::Jitter::parse(file, &self.text).map_err(usage)?)
            }
            ScenarioKind::RtService => LabScenario::RtService(
                rtservice::RtService::parse(file, &self.text).map_err(usage)?,
            ),
        })
    }
}

/// Reads a scenario file of any kind: its kind first, then the options given that the
/// kind does not take are refused (before anything is built or needs root), then the
/// kind's parser checks it and the overrides are applied.
pub fn load(path: &Path, given: &[LabFlag], o: &OverrideArgs) -> Result<LabScenario> {
    let f = ScenarioFile::read(path)?;
    f.refuse(given)?;
    f.load(o)
}

/// [`load`] for `lab run` and `lab plan`: checking a big scenario takes a while and
/// cannot look at the stop flag, so it runs on a thread of its own and a stop ends
/// the command at once (exit 3, nothing done).
fn load_unless_stopped(path: &Path, given: Vec<LabFlag>, o: &OverrideArgs) -> Result<LabScenario> {
    let (p, o) = (path.to_path_buf(), o.clone());
    match crate::stop::unless_stopped(move || load(&p, &given, &o)) {
        Ok(sc) => sc,
        Err(crate::stop::Cut::Stopped) => {
            Err(crate::Interrupted(format!("while reading {}: nothing run", path.display())).into())
        }
        Err(e) => anyhow::bail!("reading {}: {e}", path.display()),
    }
}

pub fn run(cmd: LabCmd) -> Result<()> {
    match cmd {
        LabCmd::Run(a) => {
            // the kind and the options it takes first: a refusal needs no root
            let sc = load_unless_stopped(&a.scenario, a.given(), &a.overrides)?;
            let _lifted = if a.rt_throttling_off {
                run::require_root("lab run --rt-throttling-off")?;
                let lifted = lockstep_linux::throttle::ThrottlingLifted::lift()
                    .map_err(|e| crate::EnvError(format!("--rt-throttling-off: {e}")))?;
                if let Some(l) = &lifted {
                    crate::say::say!(
                        "lab: RT throttling off for this run (kernel.sched_rt_runtime_us was {}; put back at the end, or by `lockstep lab clean` after a crash)",
                        l.previous()
                    );
                }
                lifted
            } else {
                None
            };
            match sc {
                LabScenario::Tdp(s) => {
                    let opts = run::RunOptions {
                        duration: a.duration,
                        output: a.output,
                        json: a.json,
                        keep: a.keep,
                        quiet: crate::say::quiet(),
                        silent: false,
                        gates: a.gates,
                        io: a.io,
                    };
                    run::run_scenario(&s, &opts).map(|_| ())
                }
                LabScenario::Shaped(sh) => {
                    shaped::run(&sh, a.duration, a.output, crate::say::quiet(), &a.gates)
                }
                LabScenario::Jitter(j) => method::run(
                    &j,
                    a.repeat.unwrap_or(1),
                    a.duration,
                    a.output,
                    a.json,
                    crate::say::quiet(),
                    &a.gates,
                ),
                LabScenario::RtService(r) => rtservice::run(
                    &r,
                    a.duration,
                    a.output,
                    a.json,
                    crate::say::quiet(),
                    &a.gates,
                ),
            }
        }
        LabCmd::Plan(a) => {
            let loaded = load_unless_stopped(&a.scenario, a.given(), &a.overrides)?;
            if a.json {
                let LabScenario::Tdp(s) = loaded else {
                    return Err(UsageError(format!(
                        "{}: --json: only a TDP scenario's plan is a document (this kind prints its plan as text)",
                        a.scenario.display()
                    ))
                    .into());
                };
                describe(&s, a.output.as_deref())?;
                println!("{}", serde_json::to_string_pretty(&plan_document(&s)?)?);
                return Ok(());
            }
            match loaded {
                LabScenario::Tdp(s) => print!("{}", describe(&s, a.output.as_deref())?),
                LabScenario::Shaped(sh) => print!("{}", shaped::describe(&sh)),
                LabScenario::Jitter(j) => print!("{}", method::describe(&j)),
                LabScenario::RtService(r) => print!("{}", rtservice::describe(&r)),
            }
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

/// `lab plan`: the plan of every run, as text. Planning a big network cannot look at
/// the stop flag: each run is planned on a thread of its own, and after a stop the
/// text has the runs planned so far and says so.
/// `lab plan --json`: what each run builds.
fn plan_document(s: &Scenario) -> Result<crate::report::ResultDoc> {
    let config = serde_json::json!({ "scenario": s.name, "file": s.source.file });
    let mut doc = crate::report::ResultDoc::new("lab.plan", config);
    let mut runs = Vec::new();
    for run in s.runs() {
        let p = plan::plan(s, &run).map_err(|e| UsageError(e.to_string()))?;
        runs.push(run_plan_json(&p));
    }
    doc.insert("runs", runs);
    Ok(doc)
}

fn run_plan_json(p: &plan::Plan) -> serde_json::Value {
    let nodes: Vec<_> = p
        .nodes
        .iter()
        .map(|n| {
            let ifaces: Vec<_> = n
                .ifaces
                .iter()
                .map(|i| serde_json::json!({"ifname": i.ifname, "addr": i.addr.to_string(), "prefix_len": i.prefix_len, "peer": p.nodes[i.peer].name, "rate_bps": i.rate_bps}))
                .collect();
            serde_json::json!({"name": n.name, "role": scenario::role_name(n.role), "id": n.id, "process": n.config.is_some(), "ifaces": ifaces})
        })
        .collect();
    let flows: Vec<_> = p
        .flows
        .iter()
        .map(|f| serde_json::json!({"id": f.id, "name": f.name, "path": f.path, "starts": f.starts, "offsets": f.offsets, "packets": f.packets, "size": f.size, "src": f.src.to_string(), "dst": f.dst.to_string()}))
        .collect();
    let loads: Vec<_> = p
        .loads
        .iter()
        .map(|l| serde_json::json!({"from": p.nodes[l.from].name, "to": p.nodes[l.to].name, "rate_bps": l.rate_bps, "dst": l.dst.to_string()}))
        .collect();
    let faults: Vec<_> = p
        .faults
        .iter()
        .map(|f| serde_json::json!({"fault": f.name(), "target": f.target(), "at_ns": f.at.as_nanos(), "for_ns": f.down.as_nanos()}))
        .collect();
    serde_json::json!({"label": p.run.label, "mode": p.run.mode.name(), "tf_ns": p.run.tf.as_nanos(), "k": p.k, "nodes": nodes, "flows": flows, "loads": loads, "faults": faults})
}

fn describe(s: &Scenario, out: Option<&std::path::Path>) -> Result<String> {
    let mut t = format!("scenario {} ({}): OK\n", s.name, s.source.file);
    let shared = std::sync::Arc::new(s.clone());
    let runs = s.runs();
    for (i, run) in runs.iter().enumerate() {
        let (sc, r) = (shared.clone(), run.clone());
        let p = match crate::stop::unless_stopped(move || plan::plan(&sc, &r)) {
            Ok(p) => p.map_err(|e| UsageError(e.to_string()))?,
            Err(crate::stop::Cut::Stopped) => {
                let rest: Vec<&str> = runs[i..].iter().map(|r| r.label.as_str()).collect();
                print!("{t}");
                return Err(crate::Interrupted(format!("not planned: {}", rest.join(", "))).into());
            }
            Err(e) => anyhow::bail!("planning {}: {e}", run.label),
        };
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
            let spec = s.flows.iter().find(|x| x.id == f.id);
            let route: Vec<&str> = spec
                .map(|x| x.path.iter().map(|&n| s.nodes[n].name.as_str()).collect())
                .unwrap_or_default();
            let loops = match spec.map(|x| x.loops) {
                Some(n) if n > 1 => format!(" ({n} times round its ring)"),
                _ => String::new(),
            };
            t.push_str(&format!(
                "  flow {} ({}): {} → {}, {} × {}B in frames {starts} of every {}; path {}{loops}; frames later on each link: {:?}\n",
                f.id,
                f.name,
                f.src,
                f.dst,
                f.packets,
                f.size,
                p.k,
                route.join(" → "),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_lists_are_compressed() {
        assert_eq!(compress(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(compress(&[3]), "3");
        assert_eq!(compress(&[]), "");
    }

    fn shipped(name: &str) -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../../scenarios")
            .join(name)
    }

    fn no_overrides() -> OverrideArgs {
        OverrideArgs {
            tf: None,
            modes: None,
            scale: None,
        }
    }

    #[test]
    fn every_shipped_scenario_loads_as_its_kind() {
        let expect = [
            ("line.toml", ScenarioKind::Tdp),
            ("mesh4.toml", ScenarioKind::Tdp),
            ("mesh4-482.toml", ScenarioKind::Tdp),
            ("gateway.toml", ScenarioKind::Tdp),
            ("forwarding.toml", ScenarioKind::Tdp),
            ("cbr-jitter.toml", ScenarioKind::Jitter),
            ("rt-service.toml", ScenarioKind::RtService),
            ("shaped-switch.toml", ScenarioKind::Shaped),
        ];
        for (name, kind) in expect {
            let f = ScenarioFile::read(&shipped(name)).unwrap();
            assert_eq!(f.kind(), kind, "{name}");
            let got = match f.load(&no_overrides()).unwrap() {
                LabScenario::Tdp(_) => ScenarioKind::Tdp,
                LabScenario::Shaped(_) => ScenarioKind::Shaped,
                LabScenario::Jitter(_) => ScenarioKind::Jitter,
                LabScenario::RtService(_) => ScenarioKind::RtService,
            };
            assert_eq!(got, kind, "{name}");
        }
    }

    #[test]
    fn overrides_are_applied_to_tdp_and_refused_for_other_kinds() {
        let o = OverrideArgs {
            tf: Some(Duration::from_micros(100)),
            modes: Some(vec![RunMode::Tdp]),
            scale: None,
        };
        let LabScenario::Tdp(s) = load(&shipped("line.toml"), &[], &o).unwrap() else {
            panic!("line.toml is a TDP scenario")
        };
        assert_eq!(s.tfs, vec![Duration::from_micros(100)]);
        assert_eq!(s.modes, vec![RunMode::Tdp]);
        // a time scale multiplies the TF given
        let scaled = OverrideArgs {
            scale: Some(10),
            ..o.clone()
        };
        let LabScenario::Tdp(s) = load(&shipped("line.toml"), &[], &scaled).unwrap() else {
            panic!("line.toml is a TDP scenario")
        };
        assert_eq!((s.tfs[0], s.time_scale), (Duration::from_millis(1), 10));
        let e = load(&shipped("shaped-switch.toml"), &[], &scaled).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--tf applies to TDP scenarios only; "),
            "{e}"
        );
        let only_scale = OverrideArgs {
            scale: Some(10),
            ..no_overrides()
        };
        let e = load(&shipped("rt-service.toml"), &[], &only_scale).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--scale applies to TDP scenarios only; ")
                && e.to_string().contains("measures this host's own timing"),
            "{e}"
        );
        let e = load(&shipped("cbr-jitter.toml"), &[], &o).unwrap_err();
        assert!(e.downcast_ref::<UsageError>().is_some());
        assert!(e
            .to_string()
            .starts_with("--tf applies to TDP scenarios only; "));
        assert!(e
            .to_string()
            .contains("cbr-jitter.toml is a jitter scenario"));
        // the options given are refused before the file is parsed
        let e = load(
            &shipped("rt-service.toml"),
            &[LabFlag::Keep],
            &no_overrides(),
        )
        .unwrap_err();
        assert!(e
            .to_string()
            .starts_with("--keep applies to TDP scenarios only; "));
    }

    #[test]
    fn a_written_tdp_kind_loads_and_keeps_the_file_as_written() {
        let text = std::fs::read_to_string(shipped("line.toml"))
            .unwrap()
            .replace("[scenario]\n", "[scenario]\nkind = \"tdp\"\n");
        let dir = std::env::temp_dir().join(format!("lockstep-kind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("line-tdp.toml");
        std::fs::write(&p, &text).unwrap();
        let r = load(&p, &[], &no_overrides());
        let _ = std::fs::remove_dir_all(&dir);
        let LabScenario::Tdp(s) = r.unwrap() else {
            panic!("kind = \"tdp\" is a TDP scenario")
        };
        assert_eq!(s.name, "line");
        assert_eq!(s.source.text, text);
    }
}
