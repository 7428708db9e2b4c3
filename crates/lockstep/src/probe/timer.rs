//! `lockstep probe timer`: periodic wake-ups like cyclictest, with percentiles.
//!
//! The thread asks to be woken at `start + k·interval` on an absolute clock and
//! measures how late each wake-up is. The hot loop is wait → clock read (inside the
//! waiter) → [`TimerState::record`]: no allocation, no system call besides the wait and
//! the clock read (plus, only when asked, a buffered CSV row per wake-up, and a
//! progress line on stderr at most once a second). All accounting — overruns, skipped
//! deadlines, the histogram — lives in the sans-IO core.

use std::io::IsTerminal;

use anyhow::{Context, Result};
use clap::Args;
use lockstep_core::measure::timer::{TimerReport, TimerState};
use lockstep_core::sched::{Policy, WaitStrategy};
use lockstep_core::{Duration, Instant};
use lockstep_linux::{signal, tracefs};
use serde_json::{json, Value};

use crate::cli::{
    parse_duration_positive, parse_interval, LengthArgs, OutputArgs, RtArgs, WaitArgs,
};
use crate::report::human::{dist_table, fmt_ns, kv};
use crate::report::{Output, ResultDoc};
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

pub fn run(args: TimerArgs) -> Result<()> {
    let (duration, count) = args.length.or_default(DEFAULT_LENGTH);
    let clock = args.wait.clock;
    let interval = args.interval;
    // Validate everything before touching the system.
    TimerState::new(interval, 0).map_err(|e| UsageError(format!("--interval: {e}")))?;
    // Spinning whole periods under SCHED_FIFO would trip RT throttling: keep a quarter
    // of each period for sleeping.
    let waiter = args
        .wait
        .waiter()
        .with_max_margin(Duration(interval.as_nanos() / 4 * 3));
    waiter.check().map_err(|e| EnvError(e.to_string()))?;
    let req = args.rt.request();
    let config = json!({
        "interval_ns": interval.as_nanos(),
        "duration_ns": duration.map(|d| d.as_nanos()),
        "count": count,
        "clock": clock,
        "strategy": args.wait.strategy,
        "margin_ns": args.wait.margin.as_nanos(),
        "threshold_ns": args.threshold.map(|d| d.as_nanos()),
        "rt_request": req,
    });
    let out = Output::new(&args.out)?;
    let mut samples = out.sample_writer(&["index", "deadline_ns", "wake_ns", "latency_ns"])?;
    let mut doc = ResultDoc::new("probe.timer", config);
    // Open the trace files before the run, so that the spike costs two writes.
    let tracer = args.threshold.map(|_| tracefs::TraceMarker::open());

    let rt = lockstep_linux::rt::apply(&req)?;
    doc.set_realtime(&rt);
    if rt.policy == Policy::Other {
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
    let tracer = match tracer {
        Some(Ok(t)) => Some(t),
        Some(Err(e)) => {
            doc.warn(format!(
                "--threshold: no trace marker will be written ({e})"
            ));
            None
        }
        None => None,
    };

    let start = waiter.now();
    let mut state = TimerState::new(interval, start.ns).map_err(|e| UsageError(e.to_string()))?;
    if let Some(t) = args.threshold {
        state = state
            .with_threshold(t)
            .map_err(|e| UsageError(format!("--threshold: {e}")))?;
    }
    let end_ns = duration.map(|d| start.ns.saturating_add(d.as_nanos()));
    let mut progress = Progress::new(args.out.quiet, start.ns);
    let mut deadline = state.first_deadline_ns();
    let mut last_latency = 0i64;

    let stop = loop {
        if signal::stop_requested() {
            break Stop::Signal;
        }
        // the run's end comes before the next wake-up: stop there, not after it
        if let Some(e) = end_ns.filter(|&e| deadline > e) {
            waiter.wait_until(Instant::new(clock, e));
            break if signal::stop_requested() {
                Stop::Signal
            } else {
                Stop::Duration
            };
        }
        let wake = waiter.wait_until(Instant::new(clock, deadline));
        if wake.ns < deadline && signal::stop_requested() {
            // back early: a stop was asked for; this wait is no sample
            break Stop::Signal;
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
        if count.is_some_and(|c| state.samples() >= c) {
            break Stop::Count;
        }
        if end_ns.is_some_and(|e| w.next_deadline_ns > e) {
            break Stop::Duration;
        }
        if progress.due(wake.ns) {
            let h = state.latency();
            let head = progress_head(state.elapsed(), duration, state.samples(), count);
            let p99 = h.percentile(99.0).map(fmt_ns).unwrap_or_default();
            let max = h.max().map(fmt_ns).unwrap_or_default();
            eprintln!("{head}  p99={p99} max={max}");
        }
        deadline = w.next_deadline_ns;
    };

    // Freeze the trace right away so the events around the spike stay in the buffer.
    let mut trace = Value::Null;
    let hit = state.threshold_hit();
    if let (Some(h), Some(t)) = (hit, tracer.as_ref()) {
        let marker = format!(
            "lockstep probe timer: wake-up {} latency {} ns > threshold {} ns, stopping trace",
            h.index, h.latency_ns, h.threshold_ns
        );
        let done = t.mark_and_stop(&marker);
        if let Err(e) = &done {
            doc.warn(format!("--threshold: cannot mark and stop the trace: {e}"));
        }
        trace = json!({
            "dir": t.dir(),
            "marker": marker,
            "tracing_stopped": done.is_ok(),
        });
    }
    let thread = rt.describe();
    drop(rt);
    if let Some(s) = samples.take() {
        s.finish()?;
    }

    let report = state.report();
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
    let summary_line = final_line(&report, &doc, last_latency);
    let results = serde_json::to_value(&report).context("cannot encode the report")?;
    if let Value::Object(map) = results {
        doc.results.extend(map);
    }
    doc.insert("stopped_by", stop.name());
    if args.wait.strategy == WaitStrategy::Hybrid {
        doc.insert(
            "hybrid_margin",
            json!({"final_ns": waiter.margin().as_nanos(), "adaptive": waiter.is_adaptive()}),
        );
    }
    if !trace.is_null() {
        doc.insert("trace", trace);
    }
    doc.check_failed = hit.is_some();

    out.human(&human(&report, &doc, &summary_line, thread, stop));
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

/// cyclictest's one-line summary (values in whole microseconds, as it prints them).
fn final_line(r: &TimerReport, doc: &ResultDoc, act_ns: i64) -> String {
    let us = |v: Option<i64>| v.map_or(0, |ns| ns / 1_000);
    let prio = doc
        .realtime
        .get("priority")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    format!(
        "T: 0 ({:>5}) P:{prio:>2} I:{} C:{:>8} Min:{:>7} Act:{:>5} Avg:{:>5} Max:{:>8}",
        std::process::id(),
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

fn human(r: &TimerReport, doc: &ResultDoc, line: &str, thread: String, stop: Stop) -> String {
    let mut s = String::new();
    s.push_str(line);
    s.push_str("\n\nwake-up latency\n");
    s.push_str(&dist_table(&[("latency", &r.latency)]));
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
                "wake-up {} ({} after start)",
                m.index,
                fmt_ns(m.since_start_ns)
            ),
        ));
    }
    s.push('\n');
    s.push_str(&kv(&lines));
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
