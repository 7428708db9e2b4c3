//! `lockstep sim run`: plan each run of a scenario as the lab does, simulate it,
//! measure the receivers' deliveries with the lab's own results pipeline, and write
//! the same result document and report, labelled "simulated".

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lockstep_core::tdp::{Role, SlipOutcome};
use lockstep_core::{ClockId, Duration};
use lockstep_plan::plan::{plan, Plan};
use lockstep_plan::scenario::{RunMode, RunSpec, Scenario};
use lockstep_sim::{Engine, EngineStats, Kind, NodeEventSummary, NotCut, SimNode, SimOptions};
use serde::Serialize;
use serde_json::{json, Value};

use super::pipeline::{pipelined, Measure};
use super::{hostfile, paper, SimRunArgs};
use crate::lab::faults::{self, FaultCheck, FaultVerdict};
use crate::lab::results::{
    assemble, flow_inputs, node_ids, router_report, Collected, FlowLine, FlowsMeter, ScenarioLines,
    TxJoin,
};
use crate::lab::{tables, LabScenario, ScenarioFile, ScenarioKind};
use crate::report::html::LabReport;
use crate::report::packets::PacketWriter;
use crate::report::{finish_lab_run_streamed, ResultDoc, Show};
use crate::stop::{self, Cut};
use crate::{Interrupted, UsageError};

/// Simulated time after the traffic ends for what is in flight to arrive.
const DRAIN_NS: i64 = 1_000_000_000;
/// Simulated time per step of the loop (progress is checked between steps).
const STEP_NS: i64 = 50_000_000;
/// Wall time a step of the loop should take at most: the stop flag is looked at
/// between steps, and a step is shortened until it takes about this long.
const STEP_WALL_NS: i64 = 50_000_000;

/// The next step of simulated time after one of `step` took `wall` ns: halved while
/// steps take longer than [`STEP_WALL_NS`], doubled (up to `max`) while they take
/// under a quarter of it. Where steps end does not change what is simulated.
pub(crate) fn next_step(step: i64, wall: i64, max: i64) -> i64 {
    if wall > STEP_WALL_NS {
        (step / 2).max(1_000)
    } else if wall < STEP_WALL_NS / 4 {
        step.saturating_mul(2).min(max)
    } else {
        step
    }
}

/// One simulated run.
pub struct SimOutcome {
    pub run: RunSpec,
    pub collected: Collected,
    pub stats: EngineStats,
    /// Wall time of the simulation itself (the event loop).
    pub wall_ns: i64,
    /// Simulated time the run had reached when a stop ended it (from the traffic's
    /// start; the rest of the run was not simulated, nor were packets in flight then
    /// let arrive).
    pub interrupted_at: Option<Duration>,
    /// Wall time to plan the run and to build the simulated network.
    pub plan_ns: i64,
    pub build_ns: i64,
    /// The process's peak resident memory when the simulation ended.
    pub peak_rss_bytes: Option<u64>,
    pub loads: Vec<LoadLine>,
    /// Each router's slips and drops by reason (from its events), in plan order.
    pub node_events: Vec<(String, NodeEventSummary)>,
    /// What each injected fault did (empty without faults).
    pub faults: Vec<FaultVerdict>,
    /// Threads (parts of the network) the run took, and why it ran whole when more
    /// were asked for.
    pub threads: usize,
    pub whole: Option<NotCut>,
}

/// What a best-effort load did.
#[derive(Clone, Debug, Serialize)]
pub struct LoadLine {
    pub load: String,
    pub sent: u64,
    pub received: u64,
}

/// What `sim run` refuses, by the file's kind.
fn check_kind(file: &ScenarioFile) -> Result<()> {
    let why = match file.kind() {
        ScenarioKind::Tdp | ScenarioKind::Shaped => return Ok(()),
        ScenarioKind::Jitter => "a jitter-source scenario measures this host's scheduler, interrupts and NICs, which a simulator does not have",
        ScenarioKind::RtService => "an rt-service scenario measures a real server's response time under this host's load, which a simulator does not have",
    };
    Err(UsageError(format!(
        "{}: kind: {why}; run it with `lockstep lab run` (the simulator takes the tdp kind — routers, senders, receivers and loads — and shaped-switch)",
        file.shown
    ))
    .into())
}

pub(super) fn options(args: &SimRunArgs) -> Result<SimOptions> {
    Ok(SimOptions {
        seed: args.seed,
        host: hostfile::parse(&args.host)?,
        processing_ns: args.processing.as_nanos(),
        propagation_ns: args.propagation.as_nanos(),
        framing: args.framing,
        links: args.links,
        cpus: args.cpus,
        threads: match args.threads {
            super::Threads::Exactly(n) => lockstep_sim::Threads::Exactly(usize::from(n)),
            // (the CPUs this process may run on; one when that cannot be read)
            super::Threads::Auto => lockstep_sim::Threads::UpTo(
                lockstep_linux::rt::allowed_cpus().map_or(1, |c| c.len().max(1)),
            ),
        },
        ..SimOptions::default()
    })
}

/// A run's options: with `--node-hosts DIR`, each node's wake-ups as the lab's run
/// of the same mode measured them (`DIR/<run>/` when it exists, else `DIR`).
fn run_options(opts: &SimOptions, args: &SimRunArgs, run_dir: &str) -> Result<SimOptions> {
    let Some(dir) = &args.node_hosts else {
        return Ok(opts.clone());
    };
    let per_run = dir.join(run_dir);
    let dir = if per_run.is_dir() {
        per_run
    } else {
        dir.clone()
    };
    Ok(SimOptions {
        hosts: hostfile::from_lab_run(&dir)?,
        ..opts.clone()
    })
}

pub fn run(args: SimRunArgs) -> Result<()> {
    let loading = wall_ns();
    let file = ScenarioFile::read(&args.scenario)?;
    check_kind(&file)?;
    let text = file.text().to_string();
    // checking a big scenario takes a while and cannot look at the stop flag
    let overrides = args.overrides.clone();
    let loaded = match stop::unless_stopped(move || file.load(&overrides)) {
        Ok(l) => l?,
        Err(Cut::Stopped) => {
            return Err(Interrupted(format!(
                "while reading {}: nothing simulated",
                args.scenario.display()
            ))
            .into())
        }
        Err(e) => anyhow::bail!("reading {}: {e}", args.scenario.display()),
    };
    let s = match loaded {
        LabScenario::Tdp(s) => s,
        LabScenario::Shaped(s) => return super::shaped::run(&s, &text, &args),
        LabScenario::Jitter(_) | LabScenario::RtService(_) => {
            return Err(UsageError(format!(
                "{}: only TDP and shaped-switch scenarios can be simulated",
                args.scenario.display()
            ))
            .into())
        }
    };
    let load_ns = wall_ns() - loading;
    run_scenario(&s, &args, load_ns).map(|_| ())
}

/// Simulates a parsed scenario (`args.scenario` names it in messages; `load_ns`: the
/// wall time it took to read and check it).
pub fn run_scenario(s: &Scenario, args: &SimRunArgs, load_ns: i64) -> Result<ScenarioLines> {
    if s.modes.contains(&RunMode::Kernel) {
        return Err(UsageError(format!(
            "{}: scenario.modes: \"kernel\" (Linux forwarding) runs only in the lab; simulate with --modes fifo,tdp",
            args.scenario.display()
        ))
        .into());
    }
    let opts = options(args)?;
    let duration = args.duration.unwrap_or(s.duration);
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| default_output(&s.name));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("--output: cannot create {}", dir.display()))?;
    let mut doc = ResultDoc::new("sim.run", config(s, args, &opts, duration));
    crate::report::write_atomic(&dir.join("scenario.toml"), s.source.text.as_bytes())?;
    let runs = s.runs();
    let mut outcomes: Vec<SimOutcome> = Vec::new();
    let shared = std::sync::Arc::new(s.clone());
    for (i, run) in runs.iter().enumerate() {
        if outcomes.iter().any(|o| o.interrupted_at.is_some()) {
            break;
        }
        let planning = wall_ns();
        // planning a big network cannot look at the stop flag
        let (sc, r) = (shared.clone(), run.clone());
        let p = match stop::unless_stopped(move || plan(&sc, &r)) {
            Ok(p) => p.map_err(|e| UsageError(e.to_string()))?,
            Err(Cut::Stopped) => break,
            Err(e) => anyhow::bail!("planning {}: {e}", run.label),
        };
        let cycle = Duration(run.tf.as_nanos().saturating_mul(i64::from(s.k)));
        lockstep_plan::fault::check_room(&s.faults, duration, cycle)
            .map_err(|e| UsageError(format!("{}: {e}", args.scenario.display())))?;
        let plan_ns = wall_ns() - planning;
        let prefix = format!("sim {} [{}/{} {}] ", s.name, i + 1, runs.len(), run.label);
        let packets = args.packets.then(|| dir.join(&run.dir));
        let opts = run_options(&opts, args, &run.dir)?;
        let Some(mut o) = simulate(
            &p,
            &opts,
            duration,
            &prefix,
            crate::say::quiet(),
            packets.as_deref(),
        )?
        else {
            break;
        };
        o.plan_ns = plan_ns;
        outcomes.push(o);
    }
    // what a stop left undone: the run it cut short, the runs not simulated
    let mut undone: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            let at = o.interrupted_at?;
            Some(format!("{} stopped at {at} of {duration}", o.run.label))
        })
        .collect();
    let skipped: Vec<&str> = runs[outcomes.len()..]
        .iter()
        .map(|r| r.label.as_str())
        .collect();
    if !skipped.is_empty() {
        undone.push(format!("not simulated: {}", skipped.join(", ")));
    }
    let interrupted = (!undone.is_empty()).then(|| undone.join("; "));
    let lines = finish(
        s,
        args,
        &opts,
        &mut doc,
        &dir,
        outcomes,
        load_ns,
        interrupted.as_deref(),
    )?;
    match interrupted {
        Some(i) => Err(Interrupted(i).into()),
        None => Ok(lines),
    }
}

fn config(s: &Scenario, args: &SimRunArgs, opts: &SimOptions, duration: Duration) -> Value {
    json!({
        "scenario": s.name,
        "file": s.source.file,
        "simulated": true,
        "duration": duration.to_string(),
        "tf": s.tfs.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
        "k": s.k,
        "modes": s.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
        "seed": opts.seed,
        "host_model": opts.host.label(),
        "node_hosts": args.node_hosts.as_ref().map(|d| d.display().to_string()),
        "processing": args.processing.to_string(),
        "propagation": args.propagation.to_string(),
        "framing": opts.links.framing(opts.framing).name(),
        "framing_bytes": opts.links.framing(opts.framing).overhead(),
        "links": opts.links.name(),
        "cpus": opts.cpus,
    })
}

pub(super) fn default_output(name: &str) -> PathBuf {
    let secs = lockstep_linux::now(ClockId::Realtime).ns / 1_000_000_000;
    PathBuf::from("sim-results").join(format!("{name}-{secs}"))
}

fn wall_ns() -> i64 {
    lockstep_linux::now(ClockId::Monotonic).ns
}

/// Each receiver's per-packet file in `dir`, by node index.
fn packet_writers(p: &Plan, dir: Option<&Path>) -> Result<Vec<Option<PacketWriter>>> {
    let Some(dir) = dir else {
        return Ok(Vec::new());
    };
    p.nodes
        .iter()
        .map(|n| match n.role {
            Role::Receiver => {
                PacketWriter::create(&dir.join(format!("{}-packets.csv", n.name))).map(Some)
            }
            _ => Ok(None),
        })
        .collect()
}

/// What a run measures of each delivered probe: its flow's statistics, the fault
/// checks and the receiver's per-packet file (the first write error is kept).
struct RunMeasure<'a> {
    meter: FlowsMeter<'a>,
    check: Option<FaultCheck>,
    writers: Vec<Option<PacketWriter>>,
    write_err: Option<anyhow::Error>,
}

impl Measure for RunMeasure<'_> {
    fn add(&mut self, node: usize, d: &lockstep_core::tdp::Delivery) {
        self.meter.add(d);
        if let Some(c) = self.check.as_mut() {
            c.add(d);
        }
        if let Some(Some(w)) = self.writers.get_mut(node) {
            if let Err(e) = w.write(d) {
                self.write_err.get_or_insert(e);
            }
        }
    }
}

/// Runs one planned run and measures it; with `packets`, writes every receiver's
/// per-packet file into that directory. `None` when a stop came while the simulated
/// network was being built; a stop during the run ends it where it is
/// ([`SimOutcome::interrupted_at`]).
pub fn simulate(
    p: &Plan,
    opts: &SimOptions,
    duration: Duration,
    prefix: &str,
    quiet: bool,
    packets: Option<&Path>,
) -> Result<Option<SimOutcome>> {
    let writers = packet_writers(p, packets)?;
    let building = wall_ns();
    // building a big network cannot look at the stop flag
    let (bp, bo) = (p.clone(), opts.clone());
    let (mut e, whole) = match stop::unless_stopped(move || lockstep_sim::sim(&bp, &bo)) {
        Ok(e) => e.map_err(|e| UsageError(e.to_string()))?,
        Err(Cut::Stopped) => return Ok(None),
        Err(e) => anyhow::bail!("building the simulated network: {e}"),
    };
    if let (Some(w), false) = (whole, quiet) {
        eprintln!("{prefix}runs on one thread: {w}");
    }
    // the network's tables are read in no particular order: huge pages spare most
    // of the address-translation misses (a hint, counted in the build; the results
    // do not depend on it)
    lockstep_linux::hugepages::back_heap();
    let build_ns = wall_ns() - building;
    let ids = node_ids(p);
    let tx = TxJoin::default();
    let none = BTreeMap::new();
    let inputs = flow_inputs(p, &none, &none);
    let tf_ns = p.run.tf.as_nanos();
    let measure = RunMeasure {
        meter: FlowsMeter::new(&inputs, tf_ns, duration.as_nanos(), &ids, &tx),
        check: (!p.faults.is_empty()).then(|| FaultCheck::new(faults::fault_flows(p, &inputs))),
        writers,
        write_err: None,
    };
    let started = wall_ns();
    let end = opts.start_ns.saturating_add(duration.as_nanos());
    let ((interrupted_at, sent), m) = pipelined(measure, |out| {
        let mut on_delivery = |i: usize, d: &lockstep_core::tdp::Delivery| out.push(i, d);
        let mut step = STEP_NS;
        let mut shown = started;
        let mut interrupted_at = None;
        while e.now() < end {
            if stop::stop_requested() {
                interrupted_at = Some(Duration(e.now().saturating_sub(opts.start_ns)));
                break;
            }
            let until = e.now().saturating_add(step).min(end);
            let t = wall_ns();
            e.run_until(until, &mut on_delivery);
            step = next_step(step, wall_ns() - t, STEP_NS);
            if !quiet && wall_ns() - shown >= 1_000_000_000 {
                shown = wall_ns();
                progress(
                    prefix,
                    e.now(),
                    e.stats(),
                    opts.start_ns,
                    duration,
                    shown - started,
                );
            }
        }
        let sent = sent_per_flow(e.nodes());
        e.stop_sources();
        if interrupted_at.is_none() {
            e.run_until(end.saturating_add(DRAIN_NS), &mut on_delivery);
        }
        (interrupted_at, sent)
    });
    let wall = wall_ns() - started;
    let threads = e.parts();
    let e = e.into_engine();
    let RunMeasure {
        meter,
        check,
        writers,
        write_err,
    } = m;
    if let Some(e) = write_err {
        return Err(e);
    }
    for w in writers.into_iter().flatten() {
        w.finish()?;
    }
    let peak_rss_bytes = lockstep_linux::rusage::peak_rss_bytes();
    let faults = check.map_or_else(Vec::new, |c| {
        let slips = e
            .node_events()
            .map(|(n, s)| (n.to_string(), s.slips))
            .collect();
        c.judge(
            &p.faults,
            &faults::run_facts(p, opts.start_ns, end),
            &sent,
            &slips,
        )
    });
    let measured: BTreeMap<u32, _> = inputs.iter().map(|f| f.id).zip(meter.finish()).collect();
    let routers: Vec<lockstep_core::tdp::NodeCounters> =
        routers_named(&e).map(|(_, c)| c.clone()).collect();
    let slips = crate::lab::results::slips_of(routers.iter());
    let flow_names = p.flows.iter().map(|f| (f.id, f.name.clone())).collect();
    let hops = routers_named(&e)
        .map(|(n, c)| router_report(n, c, None, &flow_names))
        .collect();
    let final_inputs = flow_inputs(p, &sent, &slips);
    let mut collected = assemble(p, &final_inputs, &measured, hops, Vec::new());
    crate::lab::bound::add_fifo_bounds(&mut collected.report, p);
    if !quiet {
        progress(prefix, e.now(), e.stats(), opts.start_ns, duration, wall);
    }
    let outcome = SimOutcome {
        run: p.run.clone(),
        collected,
        stats: e.stats(),
        wall_ns: wall,
        interrupted_at,
        plan_ns: 0,
        build_ns,
        peak_rss_bytes,
        loads: loads(p, &e),
        faults,
        node_events: e
            .node_events()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect(),
        threads,
        whole,
    };
    // the network and the measuring's histograms were allocated on other threads,
    // whose allocator arenas the result document cannot reuse: give their memory back
    drop(e);
    lockstep_linux::malloc::give_back();
    Ok(Some(outcome))
}

fn progress(prefix: &str, now: i64, st: EngineStats, start: i64, duration: Duration, wall: i64) {
    let done = Duration((now - start).clamp(0, duration.as_nanos()));
    let secs = wall.max(1) as f64 / 1e9;
    eprintln!(
        "{prefix}{done} of {duration} simulated, wall {secs:.1}s, {:.2} M events/s, {:.2} M packet-hops/s",
        st.events as f64 / secs / 1e6,
        st.packet_hops as f64 / secs / 1e6,
    );
}

fn routers_named(e: &Engine) -> impl Iterator<Item = (&str, &lockstep_core::tdp::NodeCounters)> {
    e.nodes.iter().filter_map(|n| match &n.kind {
        Kind::Router(r) => Some((n.name.as_str(), r.counters())),
        Kind::Host(_) => None,
    })
}

fn sent_per_flow<'a>(nodes: impl Iterator<Item = &'a SimNode>) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for n in nodes {
        if let Kind::Host(h) = &n.kind {
            if let Some((s, _)) = &h.sender {
                out.extend(s.sent_per_flow());
            }
        }
    }
    out
}

fn loads(p: &Plan, e: &Engine) -> Vec<LoadLine> {
    let mut out = Vec::new();
    for l in &p.loads {
        let host = |i: usize| match &e.nodes.get(i)?.kind {
            Kind::Host(h) => Some(h),
            Kind::Router(_) => None,
        };
        let sent = host(l.from)
            .and_then(|h| h.sources.iter().find(|c| c.dst == l.dst))
            .map_or(0, |c| c.sent);
        let received = host(l.to)
            .and_then(|h| h.sinks.iter().find(|(port, _)| *port == l.dst.port()))
            .map_or(0, |(_, n)| *n);
        out.push(LoadLine {
            load: format!("{} → {}", p.nodes[l.from].name, p.nodes[l.to].name),
            sent,
            received,
        });
    }
    out
}

/// Writes and prints the results; `interrupted` says what a stop left undone.
#[allow(clippy::too_many_arguments)]
fn finish(
    s: &Scenario,
    args: &SimRunArgs,
    opts: &SimOptions,
    doc: &mut ResultDoc,
    dir: &Path,
    outcomes: Vec<SimOutcome>,
    load_ns: i64,
    interrupted: Option<&str>,
) -> Result<ScenarioLines> {
    let mut notes = vec![format!(
        "simulated (virtual time): host model {}, processing {} per packet, {} links, framing {} ({} bytes per frame beyond the IP packet), seed {}",
        opts.host.label(),
        args.processing,
        opts.links.name(),
        opts.links.framing(opts.framing).name(),
        opts.links.framing(opts.framing).overhead(),
        opts.seed
    )];
    if !s.description.is_empty() {
        notes.push(s.description.clone());
    }
    for o in &outcomes {
        for l in &o.loads {
            notes.push(format!(
                "{}: load {}: sent {}, delivered {}",
                o.run.label, l.load, l.sent, l.received
            ));
        }
    }
    let mut table = human(s, dir, &outcomes, load_ns);
    if let Some(i) = interrupted {
        let what = format!(
            "interrupted by SIGINT/SIGTERM: {i} (packets in flight at the stop count as lost)"
        );
        table.push_str(&format!("{what}\n"));
        notes.push(what);
        doc.insert("interrupted", i);
    }
    doc.insert("runs", outcomes.iter().map(run_json).collect::<Vec<_>>());
    let perf: Vec<Value> = outcomes.iter().map(perf_json).collect();
    let report = LabReport {
        title: format!("lockstep sim: {} (simulated)", s.name),
        scenario: s.name.clone(),
        generated_at: String::new(),
        command: Vec::new(),
        host: Value::Null,
        runs: outcomes
            .iter()
            .map(|o| o.collected.report.clone())
            .collect(),
        notes,
    };
    let faults_ok = crate::lab::faults::fail_on(
        outcomes
            .iter()
            .map(|o| (o.run.label.as_str(), &o.faults[..])),
    );
    doc.check_failed |= faults_ok.is_err();
    let runs = outcomes
        .into_iter()
        .map(|o| (o.run, o.collected.lines))
        .collect();
    // `results` is fixed by the seed byte for byte: the report's wall-clock time,
    // argument vector (it names the output directory) and host facts stay out of it
    // (the document has them as `started_at`, `command` and `host`; report.html shows
    // them)
    doc.insert("report", &report);
    let report = LabReport {
        generated_at: doc.started_at.clone(),
        command: doc.command.clone(),
        host: serde_json::to_value(&doc.host).unwrap_or(Value::Null),
        ..report
    };
    // the document without copying its results (the bulk of it)
    let results = std::mem::take(&mut doc.results);
    let mut v = serde_json::to_value(&*doc)?;
    if let Value::Object(m) = &mut v {
        m.insert("results".into(), Value::Object(results));
        // wall-clock figures stay out of `results`, which a seed fixes byte for byte
        m.insert(
            "performance".into(),
            json!({
                "load_ns": load_ns,
                "runs": perf,
                "peak_rss_bytes": lockstep_linux::rusage::peak_rss_bytes(),
            }),
        );
    }
    let show = Show::of_run(args.json, args.silent);
    finish_lab_run_streamed(dir, &v, report, &table, show)?;
    faults_ok?;
    Ok(ScenarioLines {
        dir: dir.to_path_buf(),
        runs,
    })
}

fn run_json(o: &SimOutcome) -> Value {
    json!({
        "label": o.run.label,
        "mode": o.run.mode.name(),
        "tf_ns": o.run.tf.as_nanos(),
        "flows": o.collected.lines,
        "loads": o.loads,
        "events": o.stats.events,
        "packet_hops": o.stats.packet_hops,
        "link_drops": o.stats.link_drops,
        "fault_drops": o.stats.fault_drops,
        "faults": o.faults,
        "node_events": node_events_json(&o.node_events),
        "interrupted_at": o.interrupted_at.map(|d| d.to_string()),
    })
}

/// `{"r1": {"slips": 0, "slip_reasons": {}, ...}, ...}`: every router, keys in a
/// fixed order.
fn node_events_json(nodes: &[(String, NodeEventSummary)]) -> Value {
    let map: BTreeMap<&str, &NodeEventSummary> =
        nodes.iter().map(|(n, s)| (n.as_str(), s)).collect();
    serde_json::to_value(map).unwrap_or(Value::Null)
}

/// `r2: 3 slips (late 3; best effort 3), 1 drop (no route 1)`, or `None` for a
/// router with neither.
fn node_events_line(name: &str, s: &NodeEventSummary) -> Option<String> {
    if s.is_empty() {
        return None;
    }
    fn counts<K: Copy>(m: &BTreeMap<K, u64>, name: impl Fn(K) -> &'static str) -> String {
        m.iter()
            .map(|(&k, n)| format!("{} {n}", name(k).replace('_', " ")))
            .collect::<Vec<_>>()
            .join(", ")
    }
    let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut line = format!("{name}: {}", plural(s.slips, "slip"));
    if s.slips > 0 {
        let outcome = |o: SlipOutcome| match o {
            SlipOutcome::SentLate => "sent late",
            SlipOutcome::BestEffort => "best effort",
            SlipOutcome::Dropped => "dropped",
        };
        line.push_str(&format!(
            " ({}; {})",
            counts(&s.slip_reasons, |r| r.name()),
            counts(&s.slip_outcomes, outcome)
        ));
    }
    line.push_str(&format!(", {}", plural(s.drops, "drop")));
    if s.drops > 0 {
        line.push_str(&format!(" ({})", counts(&s.drop_reasons, |r| r.name())));
    }
    Some(line)
}

fn perf_json(o: &SimOutcome) -> Value {
    let secs = o.wall_ns.max(1) as f64 / 1e9;
    json!({
        "label": o.run.label,
        "plan_ns": o.plan_ns,
        "build_ns": o.build_ns,
        "wall_ns": o.wall_ns,
        "events": o.stats.events,
        "packet_hops": o.stats.packet_hops,
        "events_per_s": o.stats.events as f64 / secs,
        "packet_hops_per_s": o.stats.packet_hops as f64 / secs,
        "peak_events_queued": o.stats.peak_events,
        "peak_rss_bytes_simulated": o.peak_rss_bytes,
        "threads": o.threads,
        "whole_because": o.whole.map(|w| w.to_string()),
    })
}

fn human(s: &Scenario, dir: &Path, outcomes: &[SimOutcome], load_ns: i64) -> String {
    let mut out = String::from("simulated (virtual time)\n");
    for o in outcomes.iter().filter(|o| !o.collected.lines.is_empty()) {
        out.push_str(&tables::run_table(&o.run, &o.collected.lines));
        out.push('\n');
    }
    let pairs: Vec<(RunSpec, Vec<FlowLine>)> = outcomes
        .iter()
        .map(|o| (o.run.clone(), o.collected.lines.clone()))
        .collect();
    if let Some(t) = paper_table(&s.name, &pairs) {
        out.push_str(&t);
    } else if let Some(t) = tables::comparison_table(&pairs) {
        out.push_str(&t);
        out.push('\n');
    }
    let secs = |ns: i64| ns.max(1) as f64 / 1e9;
    out.push_str(&format!(
        "scenario read and checked in {:.2}s wall\n",
        secs(load_ns)
    ));
    for o in outcomes {
        let lines: Vec<String> = o
            .node_events
            .iter()
            .filter_map(|(n, s)| node_events_line(n, s))
            .collect();
        if !lines.is_empty() {
            out.push_str(&format!("{}: slips and drops per router\n", o.run.label));
            for l in lines {
                out.push_str(&format!("  {l}\n"));
            }
        }
    }
    out.push_str(&faults_text(outcomes));
    for o in outcomes {
        let wall = secs(o.wall_ns);
        out.push_str(&format!(
            "{}: planned in {:.2}s, built in {:.2}s; {} events, {} packet-hops in {wall:.2}s wall ({:.2} M events/s, {:.2} M packet-hops/s)\n",
            o.run.label,
            secs(o.plan_ns),
            secs(o.build_ns),
            o.stats.events,
            o.stats.packet_hops,
            o.stats.events as f64 / wall / 1e6,
            o.stats.packet_hops as f64 / wall / 1e6,
        ));
    }
    out.push_str(&format!(
        "results: {}\nreport:  {}\n",
        dir.display(),
        dir.join("report.html").display()
    ));
    out
}

/// Each run's fault checks, a line each: `TDP: link-down r1-r2: pass — …`.
pub(crate) fn faults_text(outcomes: &[SimOutcome]) -> String {
    let mut out = String::new();
    for o in outcomes {
        out.push_str(&crate::lab::faults::lines(&o.run.label, &o.faults));
    }
    out
}

/// FIFO and TDP jitter per flow next to the paper's, when the scenario reproduces
/// a published table.
pub(crate) fn paper_table(name: &str, runs: &[(RunSpec, Vec<FlowLine>)]) -> Option<String> {
    let (caption, table) = paper::table_for(name)?;
    let jitter = |mode: RunMode, flow: &str| {
        runs.iter()
            .find(|(r, _)| r.mode == mode)
            .and_then(|(_, l)| l.iter().find(|l| l.flow == flow))
            .and_then(|l| l.jitter_ns.map(|j| (j, l.lost)))
    };
    let ms = |ns: i64| format!("{:.3}ms", ns as f64 / 1e6);
    let mut out = format!(
        "End-to-end delay jitter (max − min) per flow, simulated next to {caption}:\n{:<8}{:>11}{:>11}{:>10}{:>10}{:>10}{:>10}{:>10}\n",
        "flow", "paper FIFO", "paper TDP", "sim FIFO", "sim TDP", "FIFO/TDP", "FIFO lost", "TDP lost"
    );
    for &(flow, _, _) in table {
        let (pf, pt) = paper::figures(table, flow)?;
        let f = jitter(RunMode::Fifo, flow);
        let t = jitter(RunMode::Tdp, flow);
        let cell = |v: Option<(i64, u64)>| v.map_or("-".to_string(), |(j, _)| ms(j));
        let lost = |v: Option<(i64, u64)>| v.map_or("-".to_string(), |(_, l)| l.to_string());
        let ratio = match (f, t) {
            (Some((a, _)), Some((b, _))) if b > 0 => format!("{:.1}x", a as f64 / b as f64),
            _ => "-".into(),
        };
        out.push_str(&format!(
            "{flow:<8}{:>11}{:>11}{:>10}{:>10}{ratio:>10}{:>10}{:>10}\n",
            ms(pf),
            ms(pt),
            cell(f),
            cell(t),
            lost(f),
            lost(t)
        ));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use lockstep_core::net::PortId;
    use lockstep_core::tdp::{DropReason, NodeEvent, SlipReason};
    use lockstep_core::Instant;

    use super::*;

    fn summary(events: &[NodeEvent]) -> NodeEventSummary {
        let mut s = NodeEventSummary::default();
        for e in events {
            s.add(e);
        }
        s
    }

    fn slip(why: SlipReason, action: SlipOutcome) -> NodeEvent {
        NodeEvent::Slip {
            flow: Some(1),
            port: PortId(1),
            frame: 7,
            at: Instant::new(ClockId::Tai, 0),
            why,
            action,
            probe: None,
        }
    }

    fn drop(why: DropReason) -> NodeEvent {
        NodeEvent::Drop {
            flow: None,
            port: PortId(0),
            at: Instant::new(ClockId::Tai, 0),
            why,
            probe: None,
        }
    }

    #[test]
    fn one_line_per_router_with_slips_or_drops() {
        let late = slip(SlipReason::Late, SlipOutcome::BestEffort);
        let r2 = summary(&[late, late, late]);
        assert_eq!(
            node_events_line("r2", &r2).unwrap(),
            "r2: 3 slips (late 3; best effort 3), 0 drops"
        );
        let r3 = summary(&[
            slip(SlipReason::MissedFrame, SlipOutcome::Dropped),
            drop(DropReason::NoRoute),
            drop(DropReason::BestEffortFull),
            drop(DropReason::NoRoute),
        ]);
        assert_eq!(
            node_events_line("r3", &r3).unwrap(),
            "r3: 1 slip (missed frame 1; dropped 1), 3 drops (no route 2, best effort full 1)"
        );
        assert_eq!(node_events_line("r1", &NodeEventSummary::default()), None);
    }

    #[test]
    fn the_json_map_has_every_router_in_a_fixed_order() {
        let r2 = summary(&[
            slip(SlipReason::Late, SlipOutcome::Dropped),
            drop(DropReason::TtlExpired),
        ]);
        let nodes = vec![
            ("r2".to_string(), r2),
            ("r10".to_string(), NodeEventSummary::default()),
        ];
        let v = node_events_json(&nodes);
        assert_eq!(
            v,
            json!({
                "r10": {"slips": 0, "slip_reasons": {}, "slip_outcomes": {}, "drops": 0, "drop_reasons": {}},
                "r2": {
                    "slips": 1, "slip_reasons": {"late": 1}, "slip_outcomes": {"dropped": 1},
                    "drops": 1, "drop_reasons": {"ttl_expired": 1}
                },
            })
        );
        let text = serde_json::to_string(&v).unwrap();
        assert_eq!(
            text,
            serde_json::to_string(&node_events_json(&nodes)).unwrap()
        );
        assert!(text.find("\"r10\"").unwrap() < text.find("\"r2\"").unwrap());
    }
}
