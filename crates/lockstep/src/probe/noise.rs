//! `lockstep probe noise`: what the OS steals from a busy loop.
//!
//! Default (oslat-style): read the clock back to back on one CPU and record every gap
//! between consecutive readings; gaps above `--threshold` are stolen time.
//! With `--period P`: the *dummy program* of toussaint2018 — spin until each tick
//! `start + i·P` and timestamp it; the deviation of each tick interval from `P` is the
//! network-independent jitter a stream with that packet period would see.
//!
//! Both loops only read the clock and call the sans-IO accumulators of
//! `lockstep_core::measure::noise`.

use anyhow::{Context, Result};
use clap::Args;
use lockstep_core::measure::noise::{GapRecorder, GapReport, TickRecorder, TickReport};
use lockstep_core::sched::{Policy, WaitStrategy};
use lockstep_core::{limits, ClockId, Duration, Instant};
use lockstep_linux::{clock, signal, Waiter};
use serde_json::{json, Value};

use super::timer::{progress_head, Progress};
use crate::cli::{parse_clock, parse_duration_positive, LengthArgs, OutputArgs, RtArgs};
use crate::report::human::{dist_table, fmt_ns, kv, pow2_histogram};
use crate::report::{Output, ResultDoc, SampleWriter};
use crate::{EnvError, UsageError};
use lockstep_linux::rt::RtRequest;

/// Run length when neither --duration nor --count is given.
const DEFAULT_LENGTH: Duration = Duration::from_secs(10);

#[derive(Args, Debug)]
pub struct NoiseArgs {
    /// Dummy-program mode (toussaint2018): spin until each tick of this period and
    /// timestamp it (e.g. 7.41us, the packet period of an ST 2022-6 stream; at least
    /// 1us).
    #[arg(long, value_name = "DUR", value_parser = crate::cli::parse_interval, allow_hyphen_values = true)]
    pub period: Option<Duration>,
    /// Gaps between clock readings longer than this count as stolen time (one clock
    /// read takes tens of nanoseconds; a timer tick or an interrupt costs microseconds).
    /// Only reported: it does not fail the run.
    #[arg(long, value_name = "DUR", default_value = "1us", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub threshold: Duration,
    /// With --period: a tick interval longer than period + this is a spike.
    #[arg(long, value_name = "DUR", default_value = "5us", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub spike: Duration,
    /// With --period: how many spikes to list (all are counted; at most 1000000).
    #[arg(long, value_name = "N", default_value = "1000", value_parser = parse_max_spikes)]
    pub max_spikes: u64,
    /// Clock to read.
    #[arg(long, value_name = "tai|realtime|monotonic", default_value = "monotonic", value_parser = parse_clock)]
    pub clock: ClockId,
    /// One measuring thread per CPU of this list (`0-3,6`; oslat --cpu-list), each
    /// pinned and set up as the single thread would be; results per CPU and merged
    /// (distributions and counts added up, spans too). Not with --cpu.
    #[arg(long, value_name = "LIST", value_parser = super::parse_cpus, conflicts_with = "cpu")]
    pub cpus: Option<super::CpuList>,
    #[command(flatten)]
    pub length: LengthArgs,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub out: OutputArgs,
}

/// `--max-spikes`: 1 to [`limits::MAX_SPIKES`] (each listed spike is kept in memory).
fn parse_max_spikes(s: &str) -> Result<u64, String> {
    let n = match s.trim().parse::<u64>() {
        Ok(n) if n > 0 => n,
        _ => return Err(format!("expected a positive whole number, got \"{s}\"")),
    };
    if n > limits::MAX_SPIKES {
        return Err(format!("{n} is above the limit of {}", limits::MAX_SPIKES));
    }
    Ok(n)
}

pub fn run(args: NoiseArgs) -> Result<()> {
    let (duration, count) = args.length.or_default(DEFAULT_LENGTH);
    clock::check(args.clock).map_err(|e| EnvError(e.to_string()))?;
    let max_spikes = usize::try_from(args.max_spikes)
        .map_err(|_| UsageError(format!("--max-spikes: {} is too large", args.max_spikes)))?;
    // Validate the accumulators' settings before touching the system.
    GapRecorder::new(args.threshold).map_err(|e| UsageError(format!("--threshold: {e}")))?;
    if let Some(p) = args.period {
        TickRecorder::new(0, p, args.spike, 0).map_err(|e| UsageError(e.to_string()))?;
    }
    let req = args.rt.request();
    let mode = if args.period.is_some() {
        "period"
    } else {
        "gaps"
    };
    let config = json!({
        "mode": mode,
        "duration_ns": duration.map(|d| d.as_nanos()),
        "count": count,
        "clock": args.clock,
        "threshold_ns": args.threshold.as_nanos(),
        "period_ns": args.period.map(|p| p.as_nanos()),
        "spike_ns": args.period.map(|_| args.spike.as_nanos()),
        "max_spikes": args.period.map(|_| args.max_spikes),
        "cpus": args.cpus.as_ref().map(|c| &c.0),
        "rt_request": req,
    });
    let out = Output::new(&args.out)?;
    let header: &[&str] = if args.period.is_some() {
        &[
            "index",
            "deadline_ns",
            "t_ns",
            "interval_ns",
            "deviation_ns",
            "lateness_ns",
        ]
    } else {
        &["read_index", "t_ns", "gap_ns"]
    };
    let doc = ResultDoc::new("probe.noise", config);
    let limits = Limits { duration, count };
    let set = Setup {
        args: &args,
        limits,
        max_spikes,
    };
    let runs = match &args.cpus {
        None => vec![measure(
            &set,
            &req,
            out.sample_writer(header)?,
            crate::say::quiet(),
        )?],
        Some(list) => super::on_each_cpu(&req, &list.0, &out, header, |r, w, q| {
            measure(&set, r, w, q)
        })?,
    };
    finish(&args, doc, &out, runs, mode)
}

/// What every measuring thread needs.
struct Setup<'a> {
    args: &'a NoiseArgs,
    limits: Limits,
    max_spikes: usize,
}

/// One thread's recorder.
enum Rec {
    Gaps(GapRecorder),
    Ticks(TickRecorder),
}

/// One measuring thread's run.
struct CpuRun {
    tid: i32,
    rt: lockstep_linux::rt::RtState,
    rec: Rec,
    stopped: &'static str,
}

/// Sets up the calling thread and runs the loop of the mode on it.
fn measure(
    set: &Setup,
    req: &RtRequest,
    mut samples: Option<SampleWriter>,
    quiet: bool,
) -> Result<CpuRun> {
    let rt = lockstep_linux::rt::apply(req)?;
    let args = set.args;
    let (rec, stopped) = match args.period {
        None => {
            let rec = GapRecorder::new(args.threshold).map_err(|e| UsageError(e.to_string()))?;
            let (rec, stopped) = run_gaps(rec, args.clock, set.limits, &mut samples, quiet)?;
            (Rec::Gaps(rec), stopped)
        }
        Some(period) => {
            let start = clock::now(args.clock);
            let rec = TickRecorder::new(start.ns, period, args.spike, set.max_spikes)
                .map_err(|e| UsageError(e.to_string()))?;
            let (rec, stopped) =
                run_ticks(rec, start.ns, args.clock, set.limits, &mut samples, quiet)?;
            (Rec::Ticks(rec), stopped)
        }
    };
    if let Some(s) = samples.take() {
        s.finish()?;
    }
    Ok(CpuRun {
        tid: lockstep_linux::rt::thread_id(),
        rt,
        rec,
        stopped,
    })
}

/// The runs merged into one recorder (the first one's, with the others added).
fn merged(runs: &[CpuRun]) -> Option<Rec> {
    let mut m = match &runs.first()?.rec {
        Rec::Gaps(g) => Rec::Gaps(g.clone()),
        Rec::Ticks(t) => Rec::Ticks(t.clone()),
    };
    for r in &runs[1..] {
        match (&mut m, &r.rec) {
            (Rec::Gaps(a), Rec::Gaps(b)) => a.merge(b),
            (Rec::Ticks(a), Rec::Ticks(b)) => a.merge(b),
            _ => {}
        }
    }
    Some(m)
}

/// A recorder's results (as JSON) and text.
fn results_of(rec: &Rec) -> Result<(Value, String)> {
    let (v, text) = match rec {
        Rec::Gaps(g) => {
            let r = g.report();
            (serde_json::to_value(&r), human_gaps(&r))
        }
        Rec::Ticks(t) => {
            let r = t.report();
            (serde_json::to_value(&r), human_ticks(&r))
        }
    };
    Ok((v.context("cannot encode the report")?, text))
}

fn finish(
    args: &NoiseArgs,
    mut doc: ResultDoc,
    out: &Output,
    runs: Vec<CpuRun>,
    mode: &str,
) -> Result<()> {
    let (Some(first), Some(all)) = (runs.first(), merged(&runs)) else {
        anyhow::bail!("no measuring thread ran");
    };
    doc.set_realtime(&first.rt);
    if let (Some(cpus), Value::Object(rt)) = (&args.cpus, &mut doc.realtime) {
        rt.insert("cpu".into(), Value::Null);
        rt.insert("cpus".into(), json!(cpus.0));
    }
    rt_warnings(&mut doc, &first.rt);
    rec_warnings(&mut doc, &all, args.clock);
    let (value, text) = results_of(&all)?;
    if let Value::Object(map) = value {
        doc.results.extend(map);
    }
    let stopped = runs
        .iter()
        .map(|r| r.stopped)
        .find(|&s| s == "signal")
        .unwrap_or(first.stopped);
    doc.insert("mode", mode);
    doc.insert("stopped_by", stopped);
    let mut head = String::new();
    if args.cpus.is_some() {
        doc.insert("per_cpu", per_cpu_results(&runs)?);
        head = per_cpu_lines(&runs);
    }
    let mut text = head + &text;
    for w in &doc.warnings {
        text.push_str(&format!("warning: {w}\n"));
    }
    out.human(&text);
    out.finish(&doc)
}

fn rt_warnings(doc: &mut ResultDoc, rt: &lockstep_linux::rt::RtState) {
    if rt.cpu.is_none() {
        doc.warn(
            "no --cpu: the loop may migrate between CPUs; pin it (--cpu N) to measure one CPU",
        );
    }
    if rt.policy != Policy::Other {
        doc.warn(
            "busy loop under a real-time policy: unless kernel.sched_rt_runtime_us is -1, RT throttling takes the CPU away for a while every second and shows up as noise",
        );
    }
}

fn rec_warnings(doc: &mut ResultDoc, rec: &Rec, clk: ClockId) {
    match rec {
        Rec::Gaps(g) => {
            let steps = g.report().backward_steps;
            if steps > 0 {
                doc.warn(format!(
                    "the {clk} clock went back {steps} times during the run (stepped by NTP or by hand)"
                ));
            }
        }
        Rec::Ticks(t) => {
            let late = t.report().late_ticks;
            if late > 0 {
                doc.warn(format!(
                    "{late} ticks were served more than one period late (the loop caught up after a stall)"
                ));
            }
        }
    }
}

/// `results.per_cpu`: each thread's results, with its CPU, thread id and set-up.
fn per_cpu_results(runs: &[CpuRun]) -> Result<Value> {
    let mut list = Vec::with_capacity(runs.len());
    for r in runs {
        let (mut v, _) = results_of(&r.rec)?;
        if let Value::Object(m) = &mut v {
            m.insert("cpu".into(), json!(r.rt.cpu));
            m.insert("tid".into(), json!(r.tid));
            m.insert("stopped_by".into(), json!(r.stopped));
            m.insert("realtime".into(), serde_json::to_value(&r.rt)?);
        }
        list.push(v);
    }
    Ok(Value::Array(list))
}

/// One line per CPU, like oslat's columns: the largest gap (or tick deviation), the
/// stolen time (or spikes); the merged results follow.
fn per_cpu_lines(runs: &[CpuRun]) -> String {
    let mut s = String::new();
    for r in runs {
        let cpu = r.rt.cpu.unwrap_or(0);
        let line = match &r.rec {
            Rec::Gaps(g) => {
                let rep = g.report();
                format!(
                    "CPU {cpu:>3} ({:>6})  reads {:>12}  max gap {:>9}  stolen {:>9} ({:.4}%)",
                    r.tid,
                    rep.reads,
                    rep.gaps.max_ns.map(fmt_ns).unwrap_or_else(|| "-".into()),
                    fmt_ns(rep.stolen_ns),
                    100.0 * rep.stolen_fraction
                )
            }
            Rec::Ticks(t) => {
                let rep = t.report();
                format!(
                    "CPU {cpu:>3} ({:>6})  ticks {:>10}  max interval-P {:>9}  spikes {:>8}",
                    r.tid,
                    rep.ticks,
                    rep.deviation
                        .max_ns
                        .map(fmt_ns)
                        .unwrap_or_else(|| "-".into()),
                    rep.spikes_total
                )
            }
        };
        s.push_str(&line);
        s.push('\n');
    }
    s.push_str("all CPUs:\n");
    s
}

#[derive(Clone, Copy)]
struct Limits {
    duration: Option<Duration>,
    count: Option<u64>,
}

/// The oslat loop: read, record, check the end. A row is written only for a gap above
/// the threshold (the write itself may then show up in the next gap, rarely: rows are
/// buffered and flushed every few thousand).
fn run_gaps(
    mut rec: GapRecorder,
    clk: ClockId,
    lim: Limits,
    samples: &mut Option<SampleWriter>,
    quiet: bool,
) -> Result<(GapRecorder, &'static str)> {
    let start = clock::now(clk).ns;
    let end = lim
        .duration
        .map_or(i64::MAX, |d| start.saturating_add(d.as_nanos()));
    let count = lim.count.unwrap_or(u64::MAX);
    let mut progress = Progress::new(quiet, start);
    let stopped = loop {
        let t = clock::now(clk).ns;
        if let Some(gap) = rec.record(t) {
            if rec.is_above(gap) {
                if let Some(s) = samples.as_mut() {
                    s.row(&[Some(rec.reads() as i64 - 1), Some(t), Some(gap)])?;
                }
            }
        }
        if t >= end {
            break "duration";
        }
        if rec.reads() >= count {
            break "count";
        }
        if progress.due(t) {
            eprintln!(
                "{}  max={} stolen={} ({:.3}%)",
                progress_head(
                    Duration::from_nanos(t - start),
                    lim.duration,
                    rec.reads(),
                    lim.count
                ),
                rec.max_gap().map(fmt_ns).unwrap_or_default(),
                fmt_ns(rec.stolen().as_nanos()),
                100.0 * rec.stolen().as_nanos() as f64 / rec.span().as_nanos().max(1) as f64,
            );
        }
        // The stop flag is one relaxed load; checking it every read costs nothing
        // measurable next to the clock read.
        if signal::stop_requested() {
            break "signal";
        }
    };
    Ok((rec, stopped))
}

/// The dummy program: spin to each tick of the grid, timestamp, record.
fn run_ticks(
    mut rec: TickRecorder,
    start: i64,
    clk: ClockId,
    lim: Limits,
    samples: &mut Option<SampleWriter>,
    quiet: bool,
) -> Result<(TickRecorder, &'static str)> {
    let end = lim
        .duration
        .map_or(i64::MAX, |d| start.saturating_add(d.as_nanos()));
    let count = lim.count.unwrap_or(u64::MAX);
    let spin = Waiter::new(clk, WaitStrategy::Spin);
    let mut progress = Progress::new(quiet, start);
    let stopped = loop {
        let deadline = rec.next_deadline();
        if deadline > end {
            break "duration";
        }
        let t = spin.wait_until(Instant::new(clk, deadline)).ns;
        let k = rec.record(t);
        if let Some(s) = samples.as_mut() {
            s.row(&[
                Some(k.index as i64),
                Some(k.deadline_ns),
                Some(t),
                k.interval_ns,
                k.deviation_ns,
                Some(k.lateness_ns),
            ])?;
        }
        if rec.ticks() >= count {
            break "count";
        }
        if signal::stop_requested() {
            break "signal";
        }
        if progress.due(t) {
            let d = rec.deviation();
            eprintln!(
                "{}  dev p99.9={} max={} spikes={}",
                progress_head(
                    Duration::from_nanos(t - start),
                    lim.duration,
                    rec.ticks(),
                    lim.count
                ),
                d.percentile(99.9).map(fmt_ns).unwrap_or_default(),
                d.max().map(fmt_ns).unwrap_or_default(),
                rec.spikes_total(),
            );
        }
    };
    Ok((rec, stopped))
}

fn human_gaps(r: &GapReport) -> String {
    let mut s = String::from("gaps between consecutive clock readings\n");
    s.push_str(&dist_table(&[("gap", &r.gaps)]));
    s.push('\n');
    s.push_str(&kv(&[
        ("reads", r.reads.to_string()),
        ("span", fmt_ns(r.span_ns)),
        (
            "stolen",
            format!(
                "{} in {} gaps > {} ({:.4}% of the run)",
                fmt_ns(r.stolen_ns),
                r.above_threshold,
                fmt_ns(r.threshold_ns),
                100.0 * r.stolen_fraction
            ),
        ),
        (
            "max gap at",
            r.max_gap_at_ns
                .map(|t| format!("{} after start", fmt_ns(t)))
                .unwrap_or_else(|| "-".into()),
        ),
    ]));
    s.push_str("\ngap shape (power-of-two ranges)\n");
    s.push_str(&pow2_histogram(&r.gaps_pow2));
    s
}

/// How many spikes the human summary lists (the JSON has up to --max-spikes).
const SPIKES_SHOWN: usize = 10;

fn human_ticks(r: &TickReport) -> String {
    let mut s = format!(
        "dummy program: ticks every {}\n",
        Duration::from_nanos(r.period_ns)
    );
    s.push_str(&dist_table(&[
        ("interval-P", &r.deviation),
        ("lateness", &r.lateness),
    ]));
    s.push('\n');
    s.push_str(&kv(&[
        ("ticks", r.ticks.to_string()),
        ("span", fmt_ns(r.span_ns)),
        (
            "spikes",
            format!(
                "{} with interval > P + {}",
                r.spikes_total,
                fmt_ns(r.spike_threshold_ns)
            ),
        ),
        (
            "late ticks",
            format!("{} (served more than one period late)", r.late_ticks),
        ),
    ]));
    if !r.spikes.is_empty() {
        s.push_str("\nfirst spikes (tick, time since start, interval - P)\n");
        for sp in r.spikes.iter().take(SPIKES_SHOWN) {
            s.push_str(&format!(
                "  {:>10}  {:>10}  {:>10}\n",
                sp.index,
                fmt_ns(sp.since_start_ns),
                fmt_ns(sp.deviation_ns)
            ));
        }
        if r.spikes_total > SPIKES_SHOWN as u64 {
            s.push_str(&format!(
                "  … {} more\n",
                r.spikes_total - SPIKES_SHOWN as u64
            ));
        }
    }
    s
}
