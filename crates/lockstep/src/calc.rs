//! `lockstep calc NETWORK.toml… [--method tfa|sfa|pmoo|all] [--json]`: provable delay
//! and backlog bounds of a feed-forward network of rate-latency servers and shaped
//! flows, computed exactly by `lockstep-netcalc`.
//!
//! Per flow: the end-to-end delay bound of each method asked for (total flow
//! analysis, separated flow analysis, pay multiplexing only once), the best one
//! marked, and the deadline verdict; each method's run time. Per server: the backlog
//! bound against its buffer, the FIFO delay, the rules of thumb and, where they
//! apply, the single-port formulas. Every bound is an exact fraction in its unit
//! next to a float. Exit status 1 when a deadline or a buffer check fails, 2 on bad
//! input (naming file, line and field). Ctrl-C/SIGTERM is looked at before each flow
//! of each method (and each round of a cyclic network's fixed point): the bounds
//! found so far are printed, the rest shown `-`, the document says `interrupted`, and
//! the exit status is 3.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lockstep_netcalc::methods::diverge::{self, Divergence};
use lockstep_netcalc::methods::{self, Bound, Method};
use lockstep_netcalc::units::{round4, Shown, Unit};
use lockstep_netcalc::{Network, Report, ServerBounds, Q};
use serde_json::{json, Value};

use lockstep_plan::scenario::{RunMode, RunSpec};

use crate::report::ResultDoc;
use crate::stop::{self, Cut};
use crate::{CheckFailed, Interrupted, UsageError};

#[derive(Args, Debug)]
pub struct CalcArgs {
    /// Network files: [[server]] (name, rate, latency, buffer, multiplexing, shaper) and
    /// [[flow]] (name, path, rate, burst, peak, max_packet, deadline) tables.
    #[arg(value_name = "NETWORK.toml", required = true)]
    pub networks: Vec<PathBuf>,
    /// Which analysis: total flow (tfa), separated flow (sfa), pay multiplexing only
    /// once (pmoo, arbitrary multiplexing only), the linear program over a FIFO path's
    /// instants (lp), or all of them side by side.
    #[arg(long, value_enum, default_value_t = MethodArg::All)]
    pub method: MethodArg,
    /// Print the JSON document on stdout (the table goes to stderr); an array of
    /// documents with several files.
    #[arg(long)]
    pub json: bool,
    /// Also write the results into DIR (created if missing): `summary.json` (the
    /// document, an array with several files) and `summary.txt` (the tables).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MethodArg {
    Tfa,
    Sfa,
    Pmoo,
    Lp,
    All,
}

impl MethodArg {
    fn methods(self) -> Vec<Method> {
        match self {
            MethodArg::Tfa => vec![Method::Tfa],
            MethodArg::Sfa => vec![Method::Sfa],
            MethodArg::Pmoo => vec![Method::Pmoo],
            MethodArg::Lp => vec![Method::Lp],
            MethodArg::All => Method::ALL.to_vec(),
        }
    }
}

/// One method's bounds of every flow, and what computing them took.
struct MethodRun {
    method: Method,
    bounds: Vec<Bound>,
    seconds: f64,
}

/// Everything `calc` found about one network file.
struct Calc {
    file: String,
    net: Network,
    /// The per-server bounds (feed-forward networks only).
    report: Option<Report>,
    runs: Vec<MethodRun>,
    /// The TFA's bound at each hop, when the TFA ran.
    tfa_hops: Option<Vec<Result<Vec<Q>, methods::NoBound>>>,
    /// What a stop left undone (`LP: 12 of 40 flows bounded; PMOO not run`).
    interrupted: Option<String>,
    /// Why a cyclic network's fixed point diverges, when it does.
    diverged: Option<Diverged>,
}

/// A diverging fixed point explained: how loaded the cycles are, the scale of the
/// flows' rates at which it converges, and the TFA's bounds of that scaled network.
struct Diverged {
    why: Divergence,
    scaled: Vec<Bound>,
}

impl Calc {
    /// The smallest bound of flow `f` and the method that gave it (the first on a
    /// tie).
    fn best(&self, f: usize) -> Option<(Method, &Q)> {
        let mut best: Option<(Method, &Q)> = None;
        for run in &self.runs {
            if let Some(Ok(b)) = run.bounds.get(f) {
                if best.is_none_or(|(_, q)| b < q) {
                    best = Some((run.method, b));
                }
            }
        }
        best
    }

    fn deadline(&self, f: usize) -> Option<&Q> {
        self.net.flows.get(f).and_then(|fl| fl.deadline.as_ref())
    }

    /// Whether flow `f`'s best bound meets its deadline (`None` without one).
    fn meets_deadline(&self, f: usize) -> Option<bool> {
        let d = self.deadline(f)?;
        Some(self.best(f).is_some_and(|(_, b)| b <= d))
    }

    fn overflowing(&self) -> Vec<&str> {
        self.report
            .iter()
            .flat_map(|r| r.overflowing_servers().map(|s| s.name.as_str()))
            .collect()
    }

    fn late_flows(&self) -> Vec<&str> {
        (0..self.net.flows.len())
            .filter(|&f| self.meets_deadline(f) == Some(false))
            .map(|f| self.net.flows[f].name.as_str())
            .collect()
    }
}

/// `--output DIR`: the document and the tables, each written whole or not at all.
fn write_output(dir: &Path, json: &str, text: &str) -> Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--output: cannot create {}", dir.display()))?;
    crate::report::write_atomic(&dir.join("summary.json"), json.as_bytes())?;
    crate::report::write_atomic(&dir.join("summary.txt"), text.as_bytes())
}

pub fn run(args: CalcArgs) -> Result<()> {
    let methods = args.method.methods();
    let mut all = Vec::with_capacity(args.networks.len());
    let mut not_read = Vec::new();
    for path in &args.networks {
        match compute(path, &methods)? {
            Some(c) => all.push(c),
            None => not_read.push(path.display().to_string()),
        }
    }
    let text: String = all.iter().map(human).collect::<Vec<_>>().join("\n");
    let docs: Vec<ResultDoc> = all.iter().map(document).collect();
    let json = match docs.as_slice() {
        [one] => serde_json::to_string_pretty(one)?,
        _ => serde_json::to_string_pretty(&docs)?,
    };
    if let Some(dir) = &args.output {
        write_output(dir, &json, &text)?;
    }
    if args.json {
        crate::say::say_part!("{text}");
        println!("{json}");
    } else {
        print!("{text}");
    }
    let mut undone: Vec<String> = all
        .iter()
        .filter_map(|c| Some(format!("{}: {}", c.file, c.interrupted.as_ref()?)))
        .collect();
    if !not_read.is_empty() {
        undone.push(format!("not analysed: {}", not_read.join(", ")));
    }
    if !undone.is_empty() {
        return Err(Interrupted(undone.join("; ")).into());
    }
    let mut why = Vec::new();
    for c in &all {
        let late = c.late_flows();
        if !late.is_empty() {
            why.push(format!(
                "{}: deadline missed by {}",
                c.file,
                late.join(", ")
            ));
        }
        let over = c.overflowing();
        if !over.is_empty() {
            why.push(format!(
                "{}: buffer too small at {}",
                c.file,
                over.join(", ")
            ));
        }
    }
    if !why.is_empty() {
        return Err(CheckFailed(why.join("; ")).into());
    }
    Ok(())
}

/// What reading a network file gives: the network, the per-server analysis
/// (feed-forward networks only) and how the methods treat its servers.
type Loaded = (Network, Option<Report>, methods::Options);

/// Reads and checks one network file (a big scenario takes long to plan: see
/// [`compute`]).
fn load_network(path: &PathBuf) -> Result<Loaded> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{file}: cannot read it: {e}")))?;
    let located = |e: lockstep_netcalc::InputError| located(&file, e);
    // a scenario's servers are links: their output is line-shaped
    let opts = methods::Options {
        line_shaping: is_scenario(&text),
    };
    if opts.line_shaping {
        let net = scenario_network(path)?;
        // a cyclic network (flows that loop) has no per-server analysis
        let report = lockstep_netcalc::Admission::new(&net)
            .ok()
            .map(|a| a.snapshot());
        return Ok((net, report, opts));
    }
    let net = lockstep_netcalc::parse_network(&text).map_err(located)?;
    if methods::is_cyclic(&net) {
        // only the fixed points (TFA, LP) apply; no per-server analysis
        let net = lockstep_netcalc::parse_cyclic(&text).map_err(located)?;
        return Ok((net, None, opts));
    }
    let adm = lockstep_netcalc::load(&text).map_err(located)?;
    Ok((adm.network(), Some(adm.snapshot()), opts))
}

/// `FILE:LINE: field: message` (exit status 2).
fn located(file: &str, e: lockstep_netcalc::InputError) -> UsageError {
    let at = match e.line {
        Some(l) => format!("{file}:{l}"),
        None => file.to_string(),
    };
    UsageError(format!("{at}: {}", field_message(&e)))
}

/// Reads, checks and analyses one network file; `None` when a stop came before it
/// was read. Reading and planning cannot look at the stop flag, nor can one flow's
/// linear program: they run on threads of their own ([`crate::stop`]), and after a
/// stop the bounds found so far are kept.
fn compute(path: &std::path::Path, methods: &[Method]) -> Result<Option<Calc>> {
    let file = path.display().to_string();
    let p = path.to_path_buf();
    let (net, report, opts) = match stop::unless_stopped(move || load_network(&p)) {
        Ok(loaded) => loaded?,
        Err(Cut::Stopped) => return Ok(None),
        Err(e @ Cut::Panicked) => anyhow::bail!("reading {file}: {e}"),
    };
    let mut runs = Vec::with_capacity(methods.len());
    let mut undone = Vec::new();
    let shared = Arc::new(net.clone());
    for &method in methods {
        let name = method.name().to_uppercase();
        if stop::stop_requested() {
            undone.push(format!("{name} not run"));
            continue;
        }
        let t0 = Instant::now();
        let worker = shared.clone();
        type Item = Result<Bound, lockstep_netcalc::InputError>;
        let (bounds, ended) = stop::collect_unless_stopped(move |each: &dyn Fn(Item)| {
            let done =
                methods::bounds_each(&worker, method, opts, &stop::stop_requested, &mut |b| {
                    each(Ok(b))
                });
            if let Err(e) = done {
                each(Err(e));
            }
        });
        let bounds = bounds
            .into_iter()
            .collect::<Result<Vec<Bound>, _>>()
            .map_err(|e| located(&file, e))?;
        if let Err(e @ Cut::Panicked) = ended {
            anyhow::bail!("{file}: the {name} analysis {e}");
        }
        if bounds.len() < net.flows.len() {
            undone.push(format!(
                "{name}: {} of {} flows analysed",
                bounds.len(),
                net.flows.len()
            ));
        }
        runs.push(MethodRun {
            method,
            bounds,
            seconds: t0.elapsed().as_secs_f64(),
        });
    }
    let tfa_hops = if methods.contains(&Method::Tfa) && undone.is_empty() {
        let worker = shared.clone();
        match stop::unless_stopped(move || {
            methods::tfa_per_hop_until(&worker, &stop::stop_requested)
        }) {
            Ok(hops) => {
                let hops = hops.map_err(|e| located(&file, e))?;
                if hops.len() < net.flows.len() {
                    undone.push("TFA per hop: not finished".into());
                }
                Some(hops)
            }
            Err(Cut::Stopped) => {
                undone.push("TFA per hop: not finished".into());
                None
            }
            Err(e @ Cut::Panicked) => anyhow::bail!("{file}: the TFA per hop {e}"),
        }
    } else {
        None
    };
    let diverged = if undone.is_empty() && diverging(&runs) {
        explain(shared, opts, &file, &mut undone)?
    } else {
        None
    };
    let interrupted = (!undone.is_empty()).then(|| undone.join("; "));
    Ok(Some(Calc {
        file,
        net,
        report,
        runs,
        tfa_hops,
        interrupted,
        diverged,
    }))
}

/// Whether a method found a flow unbounded (a cyclic network's fixed point that
/// diverges, or the LP without a start because of it).
fn diverging(runs: &[MethodRun]) -> bool {
    runs.iter()
        .flat_map(|r| &r.bounds)
        .any(|b| matches!(b, Err(methods::NoBound::Unbounded(_))))
}

/// Why the fixed point diverges ([`diverge::divergence`]) and the TFA's bounds at
/// the scale where it converges; `None` when it does not apply or a stop came first
/// (then said in `undone`).
fn explain(
    net: Arc<Network>,
    opts: methods::Options,
    file: &str,
    undone: &mut Vec<String>,
) -> Result<Option<Diverged>> {
    let found = stop::unless_stopped(move || {
        let Some(why) = diverge::divergence(&net, opts.line_shaping, &stop::stop_requested)? else {
            return Ok(None);
        };
        let at = diverge::scaled(&net, &why.scale);
        let scaled = methods::bounds_until(&at, Method::Tfa, opts, &stop::stop_requested)?;
        Ok(Some(Diverged { why, scaled }))
    });
    match found {
        Ok(Ok(d)) => {
            if stop::stop_requested() {
                undone.push("why the fixed point diverges: not finished".into());
                return Ok(None);
            }
            Ok(d)
        }
        Ok(Err(e)) => Err(located(file, e).into()),
        Err(Cut::Stopped) => {
            undone.push("why the fixed point diverges: not finished".into());
            Ok(None)
        }
        Err(e @ Cut::Panicked) => anyhow::bail!("{file}: explaining the divergence {e}"),
    }
}

/// `flow[2] "f2".path[1]: unknown server "s9"` (the line goes in front).
fn field_message(e: &lockstep_netcalc::InputError) -> String {
    match &e.field {
        Some(f) => format!("{f}: {}", e.message),
        None => e.message.clone(),
    }
}

/// An exact bound: `{"exact": "965/12", "unit": "us", "value": 80.4167}`.
fn bound(q: &Q, unit: Unit) -> Value {
    let s = Shown::new(q, unit);
    json!({ "exact": s.exact.to_string(), "unit": unit.name(), "value": round4(s.value()) })
}

fn opt_bound(q: Option<&Q>, unit: Unit) -> Value {
    q.map(|q| bound(q, unit)).unwrap_or(Value::Null)
}

fn document(c: &Calc) -> ResultDoc {
    let methods: Vec<&str> = c.runs.iter().map(|r| r.method.name()).collect();
    let mut doc = ResultDoc::new("calc", json!({ "network": c.file, "methods": methods }));
    let flows: Vec<Value> = (0..c.net.flows.len()).map(|f| flow_json(c, f)).collect();
    doc.insert("flows", flows);
    // after a stop, as in the table: the servers of a big network take long to write
    let servers: Vec<Value> = match (&c.report, &c.interrupted) {
        (Some(r), None) => r.servers.iter().map(server_json).collect(),
        _ => Vec::new(),
    };
    doc.insert("servers", servers);
    let times: serde_json::Map<String, Value> = c
        .runs
        .iter()
        .map(|r| (r.method.name().to_string(), json!(round4(r.seconds * 1e6))))
        .collect();
    doc.insert("method_time_us", Value::Object(times));
    let late = c.late_flows().len();
    let overflowing = c.overflowing().len();
    doc.insert(
        "summary",
        json!({
            "flows": c.net.flows.len(),
            "servers": c.net.servers.len(),
            "late_flows": late,
            "overflowing_servers": overflowing,
        }),
    );
    doc.check_failed = late + overflowing > 0;
    if let Some(i) = &c.interrupted {
        doc.insert("interrupted", i);
    }
    if let Some(d) = &c.diverged {
        doc.insert("divergence", divergence_json(&c.net, d));
    }
    doc
}

/// A flow: each method's bound (`null` with the reason in `no_bound` when it gives
/// none), the best, the deadline verdict, and the TFA's per-hop bounds.
fn flow_json(c: &Calc, f: usize) -> Value {
    let fl = &c.net.flows[f];
    let mut v = json!({ "name": fl.name, "path": fl.path });
    let mut none = serde_json::Map::new();
    for run in &c.runs {
        let key = run.method.name();
        match run.bounds.get(f) {
            Some(Ok(b)) => v[key] = bound(b, Unit::Us),
            Some(Err(why)) => {
                v[key] = Value::Null;
                none.insert(key.to_string(), json!(why.to_string()));
            }
            None => v[key] = Value::Null,
        }
    }
    if let Some(Some(Ok(hops))) = c.tfa_hops.as_ref().map(|h| h.get(f)) {
        v["tfa_per_hop"] = hops.iter().map(|d| bound(d, Unit::Us)).collect();
    }
    v["no_bound"] = Value::Object(none);
    let best = c.best(f);
    v["best"] = best.map_or(Value::Null, |(m, _)| json!(m.name()));
    v["bound"] = opt_bound(best.map(|(_, b)| b), Unit::Us);
    v["deadline"] = opt_bound(c.deadline(f), Unit::Us);
    v["meets_deadline"] = json!(c.meets_deadline(f));
    v
}

fn server_json(s: &ServerBounds) -> Value {
    let spec = s.spec_port.as_ref().map(|p| {
        json!({
            "g_max": bound(&p.g_max, Unit::Us),
            "backlog": bound(&p.backlog, Unit::Bytes),
            "backlog_exact": p.backlog_exact,
            "t_switch": bound(&p.delay, Unit::Us),
            "backlog_estimate": bound(&p.backlog_estimate, Unit::Bytes),
            "t_est": bound(&p.delay_estimate, Unit::Us),
        })
    });
    json!({
        "name": s.name,
        "multiplexing": s.multiplexing.name(),
        "rate": bound(&s.rate, Unit::Mbps),
        "latency": bound(&s.latency, Unit::Us),
        "flows": s.flows,
        "load": bound(&s.load, Unit::Mbps),
        "backlog": bound(&s.backlog, Unit::Bytes),
        "buffer": opt_bound(s.buffer.as_ref(), Unit::Bytes),
        "fits": s.fits(),
        "fifo_delay": opt_bound(s.fifo_delay.as_ref(), Unit::Us),
        "backlog_estimate": bound(&s.backlog_estimate, Unit::Bytes),
        "delay_estimate": bound(&s.delay_estimate, Unit::Us),
        "spec4": spec.unwrap_or(Value::Null),
    })
}

/// Whether a file is a lab/sim scenario (it has a `[scenario]` table) rather than a
/// network file.
fn is_scenario(text: &str) -> bool {
    text.parse::<toml::Table>()
        .is_ok_and(|t| t.contains_key("scenario"))
}

/// A scenario's network as FIFO servers (one per link direction a flow crosses,
/// the router's processing allowance as latency) and token-bucket flows read off
/// their schedules: what its FIFO run is bounded by.
fn scenario_network(path: &std::path::Path) -> Result<Network> {
    let none = crate::lab::OverrideArgs {
        tf: None,
        modes: None,
        scale: None,
    };
    let file = path.display();
    let crate::lab::LabScenario::Tdp(s) = crate::lab::load(path, &[], &none)? else {
        return Err(UsageError(format!(
            "{file}: calc reads network files and TDP scenarios (nodes, links, flows); this scenario kind has no flows to bound"
        ))
        .into());
    };
    let tf = s
        .runs()
        .first()
        .map(|r| r.tf)
        .ok_or_else(|| UsageError(format!("{file}: the scenario has no run")))?;
    let spec = RunSpec::new(RunMode::Fifo, tf, false, false);
    let plan = lockstep_plan::plan::plan(&s, &spec).map_err(|e| UsageError(e.to_string()))?;
    if !plan.loads.is_empty() {
        return Err(UsageError(format!(
            "{file}: {} best-effort load(s) share the network unshaped: no delay bound holds",
            plan.loads.len()
        ))
        .into());
    }
    crate::lab::bound::network(&plan).map_err(|e| UsageError(format!("{file}: {e}")).into())
}

/// `0.12 ms`, `850 us`.
fn duration_text(seconds: f64) -> String {
    if seconds >= 1.0 {
        format!("{seconds:.2} s")
    } else if seconds >= 1e-3 {
        format!("{:.2} ms", seconds * 1e3)
    } else {
        format!("{:.0} us", seconds * 1e6)
    }
}

fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from(" ");
        for (c, cell) in r.iter().enumerate() {
            let pad = widths[c].saturating_sub(cell.chars().count());
            let _ = write!(line, " {cell}{}", " ".repeat(pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn human(c: &Calc) -> String {
    let mut out = format!(
        "{}: {} servers, {} flows (bounds exact; the fraction is the exact value)\n\nflows: end-to-end delay bounds (* best)\n",
        c.file,
        c.net.servers.len(),
        c.net.flows.len()
    );
    let mut head = vec!["flow".to_string(), "path".into()];
    head.extend(c.runs.iter().map(|run| run.method.name().to_uppercase()));
    head.extend(["deadline".to_string(), "verdict".into()]);
    let mut rows = vec![head];
    for (f, fl) in c.net.flows.iter().enumerate() {
        let best = c.best(f).map(|(m, _)| m);
        let mut row = vec![fl.name.clone(), fl.path.join(" > ")];
        for run in &c.runs {
            let mark = if best == Some(run.method) { "*" } else { " " };
            row.push(match run.bounds.get(f) {
                Some(Ok(b)) => format!("{mark}{}", Shown::new(b, Unit::Us)),
                Some(Err(methods::NoBound::NotApplicable(_))) => "  n/a".into(),
                Some(Err(methods::NoBound::Unbounded(_))) => "  unbounded".into(),
                None => "  -".into(),
            });
        }
        row.push(
            c.deadline(f)
                .map(|d| Shown::new(d, Unit::Us).to_string())
                .unwrap_or_else(|| "-".into()),
        );
        row.push(match c.meets_deadline(f) {
            Some(true) => "ok".into(),
            Some(false) => "LATE".into(),
            None => "-".into(),
        });
        rows.push(row);
    }
    out.push_str(&table(&rows));
    let times: Vec<String> = c
        .runs
        .iter()
        .map(|run| {
            format!(
                "{} {}",
                run.method.name().to_uppercase(),
                duration_text(run.seconds)
            )
        })
        .collect();
    let _ = writeln!(out, "run time: {}", times.join(", "));
    let notes: Vec<String> = c
        .runs
        .iter()
        .filter_map(|run| {
            let why = run.bounds.iter().find_map(|b| b.as_ref().err())?;
            Some(format!("{}: {why}", run.method.name().to_uppercase()))
        })
        .collect();
    for n in notes {
        let _ = writeln!(out, "  {n}");
    }
    if let Some(d) = &c.diverged {
        out.push_str(&diverged_text(&c.net, d));
    }
    let lp_bounded = c
        .runs
        .iter()
        .any(|r| r.method == Method::Lp && r.bounds.iter().any(Result::is_ok));
    if lp_bounded {
        let _ = writeln!(
            out,
            "  LP: solved in floating point, each bound raised by a relative {:e} and rounded up to {} ps",
            methods::lp::MARGIN,
            methods::lp::GRID_PS
        );
    }
    if let Some(i) = &c.interrupted {
        // the servers' tables of a big network take long to write: not after a stop
        let _ = writeln!(
            out,
            "  interrupted: {i} (- not analysed; the servers' tables are left out)"
        );
        return out;
    }
    match &c.report {
        Some(r) => out.push_str(&servers_text(r)),
        None => out.push_str(
            "\nservers: the network is cyclic (flows that loop, or servers that feed each other); the per-server backlog bounds need a feed-forward network\n",
        ),
    }
    out
}

/// `99.84 %`: a fraction as a percentage, at most two decimals.
fn percent(q: &Q) -> String {
    let p = format!("{:.2}", q.to_f64() * 100.0);
    let p = p.trim_end_matches('0').trim_end_matches('.');
    format!("{p} %")
}

/// The busiest servers on the cycles: `r1→r2, r2→r3: 15 flow crossings each`, at
/// most four named.
fn busiest_text(net: &Network, why: &Divergence) -> String {
    let names: Vec<&str> = why
        .busiest
        .iter()
        .map(|b| net.servers[b.server].name.as_str())
        .collect();
    let mut text = names.iter().take(4).copied().collect::<Vec<_>>().join(", ");
    if names.len() > 4 {
        let _ = write!(text, ", … ({} in all)", names.len());
    }
    let crossings: Vec<usize> = why.busiest.iter().map(|b| b.crossings).collect();
    match crossings.as_slice() {
        [one] => format!("{text}: {one} flow crossings"),
        [first, rest @ ..] if rest.iter().all(|c| c == first) => {
            format!("{text}: {first} flow crossings each")
        }
        _ => text,
    }
}

/// Why the fixed point diverges, and the TFA's bounds of the scaled network.
fn diverged_text(net: &Network, d: &Diverged) -> String {
    let why = &d.why;
    let mut out = format!(
        "  why unbounded: the fixed point diverges — the servers on the cycles run at up to {} ({}); ",
        percent(&why.utilisation),
        busiest_text(net, why)
    );
    let step = percent(&Q::ratio(1, i128::from(diverge::SCALE_STEPS)).unwrap_or_else(Q::zero));
    if !why.scale.is_positive() {
        let _ = writeln!(
            out,
            "even with every flow at {step} of its rate the TFA fixed point diverges"
        );
        return out;
    }
    let scale = percent(&why.scale);
    let bounded = !d.scaled.is_empty() && d.scaled.iter().all(Result::is_ok);
    let _ = writeln!(
        out,
        "with every flow at ≤ {scale} of its rate (bursts as they are; to {step}) the TFA fixed point converges{}",
        if bounded { " (bounds below)" } else { "" }
    );
    if !bounded {
        return out;
    }
    let _ = writeln!(
        out,
        "\nflows at {scale} of their rates, bursts as they are (a scaled network, not this one): TFA fixed point"
    );
    let mut rows = vec![vec!["flow".to_string(), "TFA".into()]];
    for (fl, b) in net.flows.iter().zip(&d.scaled) {
        if let Ok(b) = b {
            rows.push(vec![fl.name.clone(), Shown::new(b, Unit::Us).to_string()]);
        }
    }
    out.push_str(&table(&rows));
    out
}

/// The document's `divergence`: the busiest servers on the cycles, their
/// utilisation, the scale at which the fixed point converges and the TFA's bounds
/// there.
fn divergence_json(net: &Network, d: &Diverged) -> Value {
    let busiest: Vec<Value> = d
        .why
        .busiest
        .iter()
        .map(|b| json!({ "server": net.servers[b.server].name, "crossings": b.crossings }))
        .collect();
    let scaled: Vec<Value> = net
        .flows
        .iter()
        .zip(&d.scaled)
        .map(|(fl, b)| {
            let bound = b.as_ref().ok();
            json!({ "name": fl.name, "tfa": opt_bound(bound, Unit::Us) })
        })
        .collect();
    json!({
        "busiest_servers": busiest,
        "utilisation": { "exact": d.why.utilisation.to_string(), "value": round4(d.why.utilisation.to_f64()) },
        "converging_scale": { "exact": d.why.scale.to_string(), "value": round4(d.why.scale.to_f64()) },
        "scale_step": format!("1/{}", diverge::SCALE_STEPS),
        "bursts": "kept",
        "scaled_tfa": scaled,
    })
}

/// The servers' tables: backlog against the buffer, and the single-port formulas.
fn servers_text(r: &Report) -> String {
    let mut out = String::from("\nservers: backlog bound against the buffer\n");
    let mut rows = vec![vec![
        "server".to_string(),
        "mux".into(),
        "rate".into(),
        "load".into(),
        "flows".into(),
        "backlog".into(),
        "buffer".into(),
        "check".into(),
        "FIFO delay".into(),
    ]];
    for s in &r.servers {
        rows.push(vec![
            s.name.clone(),
            s.multiplexing.name().into(),
            Shown::new(&s.rate, Unit::Mbps).to_string(),
            Shown::new(&s.load, Unit::Mbps).to_string(),
            s.flows.to_string(),
            Shown::new(&s.backlog, Unit::Bytes).to_string(),
            s.buffer
                .as_ref()
                .map(|b| Shown::new(b, Unit::Bytes).to_string())
                .unwrap_or_else(|| "-".into()),
            match s.fits() {
                Some(true) => "fits".into(),
                Some(false) => "OVERFLOW".into(),
                None => "-".into(),
            },
            s.fifo_delay
                .as_ref()
                .map(|d| Shown::new(d, Unit::Us).to_string())
                .unwrap_or_else(|| "-".into()),
        ]);
    }
    out.push_str(&table(&rows));
    let fifo: Vec<&ServerBounds> = r
        .servers
        .iter()
        .filter(|s| s.fifo_delay.is_some())
        .collect();
    if !fifo.is_empty() {
        out.push_str("\nFIFO servers: the FIFO port analysis (loeser Eq. 4, 6) where every flow arrives as a T-SPEC with the port's rate as peak, and the rules of thumb B_est, t_est (Eq. 5, 7)\n");
        let mut rows = vec![vec![
            "server".to_string(),
            "B (Eq. 4)".into(),
            "t_switch (Eq. 6)".into(),
            "B_est".into(),
            "t_est".into(),
        ]];
        for s in fifo {
            let (b, t) = match &s.spec_port {
                Some(p) => (
                    format!(
                        "{}{}",
                        Shown::new(&p.backlog, Unit::Bytes),
                        if p.backlog_exact {
                            ""
                        } else {
                            " (upper bound: t_mux > g_max)"
                        }
                    ),
                    Shown::new(&p.delay, Unit::Us).to_string(),
                ),
                None => ("-".into(), "-".into()),
            };
            rows.push(vec![
                s.name.clone(),
                b,
                t,
                Shown::new(&s.backlog_estimate, Unit::Bytes).to_string(),
                Shown::new(&s.delay_estimate, Unit::Us).to_string(),
            ]);
        }
        out.push_str(&table(&rows));
    }
    out
}
