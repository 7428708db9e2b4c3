//! `lockstep probe timer`: periodic wake-ups like cyclictest, with percentiles.
//!
//! The thread asks to be woken at `start + k·interval` on an absolute clock and
//! measures how late each wake-up is. The hot loop is wait → clock read (inside the
//! waiter) → [`TimerState::record`]: no allocation, no system call besides the wait and
//! the clock read (plus, only when asked, a buffered CSV row per wake-up, and a
//! progress line on stderr at most once a second). All accounting — overruns, skipped
//! deadlines, the histogram — lives in the sans-IO core.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use clap::Args;
use lockstep_core::audit::cpulist;
use lockstep_core::measure::noise::pow2_buckets;
use lockstep_core::measure::timer::{ThresholdHit, TimerReport, TimerState};
use lockstep_core::sched::{Policy, WaitStrategy};
use lockstep_core::stats::Summary;
use lockstep_core::{Duration, Instant};
use lockstep_linux::rt::RtRequest;
use lockstep_linux::{signal, tracefs};
use serde_json::{json, Value};

use crate::cli::{
    parse_duration_positive, parse_interval, LengthArgs, OutputArgs, RtArgs, WaitArgs,
};
use crate::report::human::{dist_table, fmt_ns, kv, pow2_histogram};
use crate::report::{Output, ResultDoc, SampleWriter};
use crate::{CheckFailed, EnvError, UsageError};

/// Run length when neither --duration nor --count is given.
const DEFAULT_LENGTH: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
pub struct TimerArgs {
    /// Wake-up period (cyclictest -i; at least 1us).
    #[arg(long, short = 'i', value_name = "DUR", default_value = "1ms", value_parser = parse_interval, allow_hyphen_values = true)]
    pub interval: Duration,
    /// Stop at the first wake-up later than this: write a marker into the kernel trace
    /// buffer, stop tracing (cyclictest -b) and exit with status 1.
    #[arg(long, short = 'b', value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub threshold: Option<Duration>,
    /// One measuring thread per CPU of this list (`0-3,6`; cyclictest -t -a LIST), each
    /// pinned and set up as the single thread would be (--priority, --policy, …);
    /// results per CPU and merged. Not with --cpu.
    #[arg(long, value_name = "LIST", value_parser = super::parse_cpus, conflicts_with = "cpu")]
    pub cpus: Option<super::CpuList>,
    /// With --threshold: record the kernel's scheduler, interrupt and timer events
    /// (sched_switch, sched_wakeup, irq and softirq entry/exit, hrtimer, local timer:
    /// those this kernel has) in a bounded trace buffer (2 MiB per CPU, cleared at the
    /// start), and when the threshold is crossed save the end of the trace, up to the
    /// marker, to FILE. tracefs is mounted if needed and put back as it was afterwards
    /// (also on an error or Ctrl-C). Needs root.
    #[arg(long, value_name = "FILE", requires = "threshold")]
    pub trace: Option<PathBuf>,
    #[command(flatten)]
    pub length: LengthArgs,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Why the loop ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Duration,
    Count,
    Threshold,
    Signal,
}

impl Stop {
    fn name(self) -> &'static str {
        match self {
            Stop::Duration => "duration",
            Stop::Count => "count",
            Stop::Threshold => "threshold",
            Stop::Signal => "signal",
        }
    }
}

/// Progress lines on stderr: once a second on a terminal, every few seconds into a
/// file or pipe (so logs stay short), never with --quiet.
pub(crate) struct Progress {
    enabled: bool,
    step_ns: i64,
    next_ns: i64,
}

impl Progress {
    pub(crate) fn new(quiet: bool, start_ns: i64) -> Self {
        let step = if std::io::stderr().is_terminal() {
            Duration::SECOND
        } else {
            Duration::from_secs(5)
        };
        Progress {
            enabled: !quiet,
            step_ns: step.as_nanos(),
            next_ns: start_ns.saturating_add(step.as_nanos()),
        }
    }

    /// Whether a line is due at `now_ns` (and schedules the next one).
    #[inline]
    pub(crate) fn due(&mut self, now_ns: i64) -> bool {
        if !self.enabled || now_ns < self.next_ns {
            return false;
        }
        while self.next_ns <= now_ns {
            self.next_ns = self.next_ns.saturating_add(self.step_ns);
        }
        true
    }
}

/// `3.0s/10s` or `n=30000/100000`: how far the run is.
pub(crate) fn progress_head(
    elapsed: Duration,
    dur: Option<Duration>,
    n: u64,
    count: Option<u64>,
) -> String {
    let t = match dur {
        Some(d) => format!("T: {:.1}s/{}", elapsed.as_secs_f64(), d),
        None => format!("T: {:.1}s", elapsed.as_secs_f64()),
    };
    match count {
        Some(c) => format!("{t}  n={n}/{c}"),
        None => format!("{t}  n={n}"),
    }
}

/// The columns of the per-wake-up CSV.
const SAMPLE_HEADER: [&str; 4] = ["index", "deadline_ns", "wake_ns", "latency_ns"];

/// What every measuring thread shares: the settings, the trace files and the stop of
/// the whole run (set by the thread that crosses --threshold, or fails).
struct Plan<'a> {
    args: &'a TimerArgs,
    duration: Option<Duration>,
    count: Option<u64>,
    tracer: Option<&'a tracefs::TraceMarker>,
    halt: &'a AtomicBool,
}

impl Plan<'_> {
    /// The waiter of one thread: spinning whole periods under SCHED_FIFO would trip
    /// RT throttling, so a quarter of each period is kept for sleeping.
    fn waiter(&self) -> lockstep_linux::Waiter {
        let interval = self.args.interval.as_nanos();
        self.args
            .wait
            .waiter()
            .with_max_margin(Duration(interval / 4 * 3))
    }

    fn state(&self, start_ns: i64) -> Result<TimerState> {
        let mut state =
            TimerState::new(self.args.interval, start_ns).map_err(|e| UsageError(e.to_string()))?;
        if let Some(t) = self.args.threshold {
            state = state
                .with_threshold(t)
                .map_err(|e| UsageError(format!("--threshold: {e}")))?;
        }
        Ok(state)
    }

    /// Why to stop now, if another thread or a signal says so.
    fn stop_asked(&self) -> Option<Stop> {
        if signal::stop_requested() {
            Some(Stop::Signal)
        } else if self.halt.load(Ordering::Relaxed) {
            Some(Stop::Threshold)
        } else {
            None
        }
    }
}

/// One measuring thread's run.
struct CpuRun {
    tid: i32,
    rt: lockstep_linux::rt::RtState,
    state: TimerState,
    stop: Stop,
    last_latency: i64,
    /// With --strategy hybrid: the final margin.
    hybrid: Option<Value>,
    /// The marker written on a threshold hit, and whether tracing stopped.
    trace: Option<Value>,
    trace_error: Option<String>,
}

pub fn run(args: TimerArgs) -> Result<()> {
    let (duration, count) = args.length.or_default(DEFAULT_LENGTH);
    // Validate everything before touching the system.
    TimerState::new(args.interval, 0).map_err(|e| UsageError(format!("--interval: {e}")))?;
    let halt = AtomicBool::new(false);
    let plan = Plan {
        args: &args,
        duration,
        count,
        tracer: None,
        halt: &halt,
    };
    plan.waiter().check().map_err(|e| EnvError(e.to_string()))?;
    let req = args.rt.request();
    let cpus = args.cpus.as_ref().map(|c| c.0.clone());
    let config = json!({
        "interval_ns": args.interval.as_nanos(),
        "duration_ns": duration.map(|d| d.as_nanos()),
        "count": count,
        "clock": args.wait.clock,
        "strategy": args.wait.strategy,
        "margin_ns": args.wait.margin.as_nanos(),
        "threshold_ns": args.threshold.map(|d| d.as_nanos()),
        "cpus": cpus,
        "rt_request": req,
    });
    let out = Output::new(&args.out)?;
    let mut doc = ResultDoc::new("probe.timer", config);
    let (mut session, own_marker) = open_trace(&args, &mut doc)?;
    let plan = Plan {
        tracer: session.as_ref().map(|s| s.marker()).or(own_marker.as_ref()),
        ..plan
    };
    let runs = match &cpus {
        None => vec![measure(
            &plan,
            &req,
            out.sample_writer(&SAMPLE_HEADER)?,
            crate::say::quiet(),
        )?],
        Some(list) => super::on_each_cpu(&req, list, &out, &SAMPLE_HEADER, |r, w, q| {
            measure(&plan, r, w, q)
        })?,
    };
    let saved = match (session.as_mut(), &args.trace) {
        (Some(s), Some(file)) => Some(save_trace(s, file, &runs, &mut doc)),
        _ => None,
    };
    drop(session);
    finish(&args, doc, &out, runs, saved)
}

/// The trace files, opened before the run so that the spike costs two writes: with
/// --trace a session (events on, in a bounded buffer), else with --threshold the
/// marker alone (a warning when tracefs is not there).
fn open_trace(
    args: &TimerArgs,
    doc: &mut ResultDoc,
) -> Result<(Option<tracefs::TraceSession>, Option<tracefs::TraceMarker>)> {
    if args.trace.is_some() {
        let s = tracefs::TraceSession::start(&tracefs::SESSION_EVENTS, tracefs::SESSION_BUFFER_KB)
            .map_err(|e| EnvError(format!("--trace: {e}")))?;
        return Ok((Some(s), None));
    }
    let marker = match args.threshold {
        Some(_) => tracefs::TraceMarker::open()
            .map_err(|e| {
                doc.warn(format!(
                    "--threshold: no trace marker will be written ({e})"
                ))
            })
            .ok(),
        None => None,
    };
    Ok((None, marker))
}

/// How much of the trace `--trace FILE` keeps: the end of the buffer, where the spike
/// and the marker are.
const TRACE_KEEP_BYTES: usize = 8 << 20;

/// `--trace FILE`: saves the end of the trace when a thread crossed the threshold,
/// then puts tracefs back as it was; what happened, for the document's `trace`.
fn save_trace(
    session: &mut tracefs::TraceSession,
    file: &Path,
    runs: &[CpuRun],
    doc: &mut ResultDoc,
) -> Value {
    let hit = runs.iter().any(|r| r.trace.is_some());
    let saved = if hit {
        session
            .save(file, TRACE_KEEP_BYTES)
            .map_err(|e| doc.warn(format!("--trace: the trace was not saved: {e}")))
            .ok()
    } else {
        doc.warn("--trace: the threshold was not crossed, so no trace was saved");
        None
    };
    let events = session.events().to_vec();
    if let Err(e) = session.restore() {
        doc.warn(format!(
            "--trace: tracefs could not be put back as it was: {e}"
        ));
    }
    json!({
        "file": saved.map(|_| file),
        "saved_bytes": saved,
        "events": events,
    })
}

/// Sets up the calling thread as `req` says and measures on it; any failure stops the
/// other threads of the run too.
fn measure(
    plan: &Plan,
    req: &RtRequest,
    samples: Option<SampleWriter>,
    quiet: bool,
) -> Result<CpuRun> {
    let r = measure_here(plan, req, samples, quiet);
    if r.is_err() {
        plan.halt.store(true, Ordering::Relaxed);
    }
    r
}

fn measure_here(
    plan: &Plan,
    req: &RtRequest,
    mut samples: Option<SampleWriter>,
    quiet: bool,
) -> Result<CpuRun> {
    let rt = lockstep_linux::rt::apply(req)?;
    let waiter = plan.waiter();
    let mut state = plan.state(waiter.now().ns)?;
    let (stop, last_latency) = wake_loop(plan, &waiter, &mut state, &mut samples, quiet)?;
    if stop == Stop::Threshold && state.threshold_hit().is_some() {
        plan.halt.store(true, Ordering::Relaxed);
    }
    // Freeze the trace right away so the events around the spike stay in the buffer.
    let (trace, trace_error) = match (state.threshold_hit(), plan.tracer) {
        (Some(h), Some(t)) => mark_trace(t, &h),
        _ => (None, None),
    };
    if let Some(s) = samples.take() {
        s.finish()?;
    }
    let hybrid = (plan.args.wait.strategy == WaitStrategy::Hybrid)
        .then(|| json!({"final_ns": waiter.margin().as_nanos(), "adaptive": waiter.is_adaptive()}));
    Ok(CpuRun {
        tid: lockstep_linux::rt::thread_id(),
        rt,
        state,
        stop,
        last_latency,
        hybrid,
        trace,
        trace_error,
    })
}

/// Writes the marker of a threshold hit and stops tracing (cyclictest -b).
fn mark_trace(t: &tracefs::TraceMarker, h: &ThresholdHit) -> (Option<Value>, Option<String>) {
    let marker = format!(
        "lockstep probe timer: wake-up {} latency {} ns > threshold {} ns, stopping trace",
        h.index, h.latency_ns, h.threshold_ns
    );
    let done = t.mark_and_stop(&marker);
    let err = done
        .as_ref()
        .err()
        .map(|e| format!("--threshold: cannot mark and stop the trace: {e}"));
    let v = json!({
        "dir": t.dir(),
        "marker": marker,
        "tracing_stopped": done.is_ok(),
    });
    (Some(v), err)
}

/// The measuring loop: wait, read the clock, record, until the run's end.
fn wake_loop(
    plan: &Plan,
    waiter: &lockstep_linux::Waiter,
    state: &mut TimerState,
    samples: &mut Option<SampleWriter>,
    quiet: bool,
) -> Result<(Stop, i64)> {
    let clock = plan.args.wait.clock;
    let start_ns = state.first_deadline_ns() - plan.args.interval.as_nanos();
    let end_ns = plan.duration.map(|d| start_ns.saturating_add(d.as_nanos()));
    let mut progress = Progress::new(quiet, start_ns);
    let mut deadline = state.first_deadline_ns();
    let mut last_latency = 0i64;
    let stop = loop {
        if let Some(s) = plan.stop_asked() {
            break s;
        }
        // the run's end comes before the next wake-up: stop there, not after it
        if let Some(e) = end_ns.filter(|&e| deadline > e) {
            waiter.wait_until(Instant::new(clock, e));
            break plan.stop_asked().unwrap_or(Stop::Duration);
        }
        let wake = waiter.wait_until(Instant::new(clock, deadline));
        if wake.ns < deadline {
            if let Some(s) = plan.stop_asked() {
                // back early: a stop was asked for; this wait is no sample
                break s;
            }
        }
        let w = state.record(deadline, wake.ns);
        last_latency = w.latency_ns;
        if let Some(s) = samples.as_mut() {
            s.row(&[
                Some(w.index as i64),
                Some(deadline),
                Some(wake.ns),
                Some(w.latency_ns),
            ])?;
        }
        if w.over_threshold {
            break Stop::Threshold;
        }
        if plan.count.is_some_and(|c| state.samples() >= c) {
            break Stop::Count;
        }
        if end_ns.is_some_and(|e| w.next_deadline_ns > e) {
            break Stop::Duration;
        }
        if progress.due(wake.ns) {
            progress_line(state, plan);
        }
        deadline = w.next_deadline_ns;
    };
    Ok((stop, last_latency))
}

fn progress_line(state: &TimerState, plan: &Plan) {
    let h = state.latency();
    let head = progress_head(state.elapsed(), plan.duration, state.samples(), plan.count);
    let p99 = h.percentile(99.0).map(fmt_ns).unwrap_or_default();
    let max = h.max().map(fmt_ns).unwrap_or_default();
    eprintln!("{head}  p99={p99} max={max}");
}

/// Why the whole run ended: a threshold or a signal in any thread, else the first's.
fn run_stop(runs: &[CpuRun]) -> Stop {
    let any = |s: Stop| runs.iter().any(|r| r.stop == s);
    if any(Stop::Threshold) {
        Stop::Threshold
    } else if any(Stop::Signal) {
        Stop::Signal
    } else {
        runs.first().map_or(Stop::Duration, |r| r.stop)
    }
}

/// The result document and the text of the finished runs.
fn finish(
    args: &TimerArgs,
    mut doc: ResultDoc,
    out: &Output,
    runs: Vec<CpuRun>,
    saved_trace: Option<Value>,
) -> Result<()> {
    let Some(first) = runs.first() else {
        anyhow::bail!("no measuring thread ran");
    };
    doc.set_realtime(&first.rt);
    let multi = args.cpus.is_some();
    if let (true, Value::Object(rt)) = (multi, &mut doc.realtime) {
        rt.insert("cpu".into(), Value::Null);
        rt.insert("cpus".into(), json!(args.cpus.as_ref().map(|c| &c.0)));
    }
    rt_warnings(&mut doc, args, first.rt.policy);
    let mut merged = first.state.clone();
    for r in &runs[1..] {
        merged.merge(&r.state);
    }
    let report = merged.report();
    run_warnings(&mut doc, &report, args.wait.clock);
    for r in &runs {
        if let Some(e) = &r.trace_error {
            doc.warn(e.clone());
        }
    }
    let stop = run_stop(&runs);
    let results = serde_json::to_value(&report).context("cannot encode the report")?;
    if let Value::Object(map) = results {
        doc.results.extend(map);
    }
    doc.insert("stopped_by", stop.name());
    if let Some(h) = &first.hybrid {
        doc.insert("hybrid_margin", h);
    }
    if let Some(t) = trace_value(&runs, saved_trace) {
        doc.insert("trace", t);
    }
    if multi {
        doc.insert("per_cpu", per_cpu_results(&runs)?);
    }
    let hit = report.threshold;
    doc.check_failed = hit.is_some();
    out.human(&human_text(&report, &doc, &runs, &merged, stop, multi));
    out.finish(&doc)?;
    match hit {
        Some(h) => Err(CheckFailed(format!(
            "--threshold: wake-up {} was {} late (threshold {}), {} after the start",
            h.index,
            fmt_ns(h.latency_ns),
            fmt_ns(h.threshold_ns),
            fmt_ns(h.since_start_ns)
        ))
        .into()),
        None => Ok(()),
    }
}

/// The document's `trace`: the marker a thread wrote, with what --trace saved.
fn trace_value(runs: &[CpuRun], saved: Option<Value>) -> Option<Value> {
    let mut trace = runs.iter().find_map(|r| r.trace.clone());
    match (&mut trace, saved) {
        (Some(Value::Object(t)), Some(Value::Object(extra))) => t.extend(extra),
        (None, extra) => trace = extra,
        _ => {}
    }
    trace
}

/// Warnings about how the threads were set up.
fn rt_warnings(doc: &mut ResultDoc, args: &TimerArgs, policy: Policy) {
    if policy == Policy::Other {
        doc.warn("no SCHED_FIFO: latencies include normal scheduling (use --priority 90)");
    } else if args.wait.strategy != WaitStrategy::Sleep {
        doc.warn(format!(
            "{} strategy under a real-time policy: the kernel's RT throttling (kernel.sched_rt_runtime_us) may take the CPU away when the thread spins most of the time",
            args.wait.strategy
        ));
    }
    if !args.rt.dma_latency_zero {
        doc.warn(
            "/dev/cpu_dma_latency not held: idle-state exits add to every wake-up \
             (cyclictest holds it at 0 by default; pass --dma-latency-zero to compare like with like)",
        );
    }
}

/// Warnings about what the run saw.
fn run_warnings(doc: &mut ResultDoc, report: &TimerReport, clock: lockstep_core::ClockId) {
    if report.overruns > 0 {
        doc.warn(format!(
            "{} wake-ups came more than one interval late ({} deadlines skipped); the interval may be too short for this system",
            report.overruns, report.missed_periods
        ));
    }
    if report.early_wakeups > 0 {
        doc.warn(format!(
            "{} wake-ups before their deadline: the {clock} clock was stepped back during the run",
            report.early_wakeups
        ));
    }
}

/// `results.per_cpu`: each thread's results, with its CPU, thread id and set-up.
fn per_cpu_results(runs: &[CpuRun]) -> Result<Value> {
    let mut list = Vec::with_capacity(runs.len());
    for r in runs {
        let mut v = serde_json::to_value(r.state.report()).context("cannot encode the report")?;
        if let Value::Object(m) = &mut v {
            m.insert("cpu".into(), json!(r.rt.cpu));
            m.insert("tid".into(), json!(r.tid));
            m.insert("stopped_by".into(), json!(r.stop.name()));
            m.insert("realtime".into(), serde_json::to_value(&r.rt)?);
        }
        list.push(v);
    }
    Ok(Value::Array(list))
}

/// The text: cyclictest's line per thread (and the merged one), the table, the
/// details, the histogram, the warnings.
fn human_text(
    report: &TimerReport,
    doc: &ResultDoc,
    runs: &[CpuRun],
    merged: &TimerState,
    stop: Stop,
    multi: bool,
) -> String {
    let mut lines = String::new();
    for (i, r) in runs.iter().enumerate() {
        let label = format!("T:{i:>2} ({:>5})", r.tid);
        lines.push_str(&final_line(&label, &r.state.report(), doc, r.last_latency));
        lines.push('\n');
    }
    let mut rows = Vec::new();
    let per_cpu: Vec<(String, TimerReport)> = runs
        .iter()
        .map(|r| (format!("CPU {}", r.rt.cpu.unwrap_or(0)), r.state.report()))
        .collect();
    if multi {
        let label = format!("T:all ({:>5})", std::process::id());
        let act = runs.last().map_or(0, |r| r.last_latency);
        lines.push_str(&final_line(&label, report, doc, act));
        lines.push('\n');
        rows.extend(per_cpu.iter().map(|(n, r)| (n.as_str(), &r.latency)));
        rows.push(("all", &report.latency));
    } else {
        rows.push(("latency", &report.latency));
    }
    let mut thread = runs.first().map(|r| r.rt.describe()).unwrap_or_default();
    let mut max_at = String::new();
    if multi {
        let cpus: Vec<usize> = runs.iter().filter_map(|r| r.rt.cpu).collect();
        for c in &cpus {
            thread = thread.replace(&format!(" on CPU {c}"), "");
        }
        thread = format!("one each on CPUs {}: {thread}", cpulist::format(&cpus));
        let at = per_cpu.iter().find(|(_, r)| r.max_at == report.max_at);
        if let Some((name, _)) = at {
            max_at = format!(" on {name}");
        }
    }
    let hist = histogram_text(merged);
    human(report, doc, &lines, &rows, (thread, &max_at), stop, &hist)
}

/// The latency histogram at the end of the text (power-of-two ranges; early wake-ups,
/// which only a stepped clock makes, are counted apart and not drawn).
fn histogram_text(state: &TimerState) -> String {
    let buckets = pow2_buckets(state.latency());
    if buckets.is_empty() {
        return String::new();
    }
    format!(
        "\nlatency histogram (power-of-two ranges)\n{}",
        pow2_histogram(&buckets)
    )
}

/// cyclictest's one-line summary (values in whole microseconds, as it prints them).
fn final_line(label: &str, r: &TimerReport, doc: &ResultDoc, act_ns: i64) -> String {
    let us = |v: Option<i64>| v.map_or(0, |ns| ns / 1_000);
    let prio = doc
        .realtime
        .get("priority")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    format!(
        "{label} P:{prio:>2} I:{} C:{:>8} Min:{:>7} Act:{:>5} Avg:{:>5} Max:{:>8}",
        Duration::from_nanos(r.interval_ns),
        r.samples,
        us(r.latency.min_ns),
        act_ns / 1_000,
        r.latency
            .mean_ns
            .map_or(0, |m| (m / 1_000.0).round() as i64),
        us(r.latency.max_ns),
    )
}

fn human(
    r: &TimerReport,
    doc: &ResultDoc,
    lines_top: &str,
    rows: &[(&str, &Summary)],
    (thread, max_where): (String, &str),
    stop: Stop,
    hist: &str,
) -> String {
    let mut s = String::new();
    s.push_str(lines_top);
    s.push_str("\nwake-up latency\n");
    s.push_str(&dist_table(rows));
    let mut lines = vec![
        (
            "overruns",
            format!("{} ({} periods missed)", r.overruns, r.missed_periods),
        ),
        ("elapsed", fmt_ns(r.elapsed_ns)),
        ("stopped by", stop.name().to_string()),
        ("thread", thread),
    ];
    if let Some(m) = r.max_at {
        lines.push((
            "max at",
            format!(
                "wake-up {}{max_where} ({} after start)",
                m.index,
                fmt_ns(m.since_start_ns)
            ),
        ));
    }
    s.push('\n');
    s.push_str(&kv(&lines));
    s.push_str(hist);
    for w in &doc.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_is_rate_limited() {
        let mut p = Progress {
            enabled: true,
            step_ns: 1_000,
            next_ns: 1_000,
        };
        assert!(!p.due(999));
        assert!(p.due(1_000));
        assert!(!p.due(1_500));
        // A long stall skips the lines that were missed instead of printing a burst.
        assert!(p.due(5_200));
        assert_eq!(p.next_ns, 6_000);
        let mut quiet = Progress {
            enabled: false,
            step_ns: 1,
            next_ns: 0,
        };
        assert!(!quiet.due(100));
    }

    #[test]
    fn progress_head_formats() {
        assert_eq!(
            progress_head(
                Duration::from_millis(3_000),
                Some(Duration::from_secs(10)),
                30_000,
                None
            ),
            "T: 3.0s/10s  n=30000"
        );
        assert_eq!(
            progress_head(Duration::from_millis(1_300), None, 5, Some(200)),
            "T: 1.3s  n=5/200"
        );
    }
}
