//! `lockstep demo`: baldi2006's first experiment (mesh4) three ways, one table.
//!
//! 1. simulated with every node acting on time, at the paper's timing: what
//!    time-driven forwarding does;
//! 2. simulated with this host's wake-ups (a short `probe timer` first), at the
//!    paper's timing: what this host would do to it;
//! 3. live in network namespaces on this host, at a time scale chosen from that probe
//!    so the host's stalls stay well inside a frame (`--scale` forces one,
//!    `--no-live` skips this part and the need for root).
//!
//! [`host`] measures the host and picks the scale, [`table`] builds the rows,
//! headlines and verdicts.

pub mod host;
pub mod table;

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use lockstep_core::{ClockId, Duration};
use lockstep_plan::scenario::{FlowRate, Scenario};
use serde_json::json;

use crate::cli::parse_duration_positive;
use crate::lab::run::{require_root, run_scenario as lab_run, RunOptions};
use crate::lab::{OverrideArgs, MESH4};
use crate::report::human::fmt_ns;
use crate::report::{write_atomic, ResultDoc};
use crate::sim::paper::BALDI_TABLE_I;
use crate::sim::SimRunArgs;
use crate::UsageError;
use table::Part;

#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Simulated traffic time of each simulated run (default: the scenario's, 10s; at
    /// most 1 day).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = crate::cli::parse_sim_duration, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Traffic time of each live run (default: long enough for 1200 packets per flow
    /// at the chosen scale, at most 90s).
    #[arg(long, value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub live_duration: Option<Duration>,
    /// Time scale of the live run (1 = the paper's timing: TF 250us, 100 Mb/s links);
    /// default: chosen from this host's wake-ups.
    #[arg(long, value_name = "S", value_parser = crate::cli::parse_time_scale)]
    pub scale: Option<u32>,
    /// Skip the live run (no root needed).
    #[arg(long)]
    pub no_live: bool,
    /// Print one result document on stdout (text on stderr).
    #[arg(long)]
    pub json: bool,
    /// Result directory (default: lab-results/demo-<time>).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
}

/// Packets per flow the default live run is long enough for...
const LIVE_PACKETS: u64 = 1200;
/// ...unless that takes longer than this per mode (at large time scales flows send
/// a few packets a second): then fewer packets, stated in the output.
const LIVE_MAX_SECS: u64 = 90;

/// Where the text goes: stdout, or stderr when stdout carries the document; on a
/// terminal the FIFO/TDP ratios are coloured by which did better.
struct Say {
    json: bool,
    paint: bool,
}

impl Say {
    fn new(json: bool) -> Say {
        use std::io::IsTerminal;
        let paint = if json {
            std::io::stderr().is_terminal()
        } else {
            std::io::stdout().is_terminal()
        };
        Say { json, paint }
    }

    fn line(&self, s: &str) {
        let s = if self.paint {
            table::paint_ratios(s)
        } else {
            s.to_string()
        };
        if self.json {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    }
}

pub fn run(args: DemoArgs) -> Result<()> {
    let s =
        Scenario::parse("scenarios/mesh4.toml", MESH4).map_err(|e| UsageError(e.to_string()))?;
    let dir = args.output.clone().unwrap_or_else(default_output);
    std::fs::create_dir_all(&dir)?;
    let say = Say::new(args.json);
    let root = require_root("demo").is_ok();
    let live = !args.no_live && root;
    let tf = s.tfs[0];
    say.line(&format!(
        "lockstep demo: {} — results in {}",
        s.description,
        dir.display()
    ));
    progress("measuring this host's wake-ups (probe timer, 5 s)");
    let w = host::measure(&dir.join("host"), root)?;
    let scale = args
        .scale
        .unwrap_or_else(|| host::choose_scale(w.max_ns, tf));
    say.line(&intro(&w, scale, tf, &s, &args, live));
    let duration = args.duration.unwrap_or(s.duration);
    // a stop during a simulated part ends the demo: that part wrote what it had
    let stopped = |e: anyhow::Error, part: &str| {
        if e.downcast_ref::<crate::Interrupted>().is_some() {
            e.context(format!(
                "the demo's {part} (what ran is in {})",
                dir.display()
            ))
        } else {
            e
        }
    };
    progress("1/3 simulated, ideal host");
    let ideal = sim_part(&s, &dir, "ideal", "simulated, ideal host", duration)
        .map_err(|e| stopped(e, "simulation on an ideal host"))?;
    progress("2/3 simulated with this host's wake-ups");
    let model = w.file.display().to_string();
    let modelled = sim_part(&s, &dir, &model, "simulated, this host", duration)
        .map_err(|e| stopped(e, "simulation with this host's wake-ups"))?;
    // a failed or interrupted live run still leaves the simulated parts' table and
    // document
    let (live_part, live_error) = if live && crate::stop::stop_requested() {
        let e = crate::Interrupted("before the live run".into());
        say.line(&format!("The live run was not started: {e}"));
        (None, Some(anyhow::Error::from(e)))
    } else if live {
        progress(&format!("3/3 live in namespaces at scale {scale}"));
        match live_part(&s, &args, &dir, scale) {
            Ok(p) => (Some(p), None),
            Err(e) if e.downcast_ref::<crate::Interrupted>().is_some() => {
                say.line(&format!("The live run was cut short: {e:#}"));
                (None, Some(e))
            }
            Err(e) => {
                say.line(&format!("The live run failed: {e:#}"));
                (None, Some(e))
            }
        }
    } else {
        (None, None)
    };
    let rows = table::rows(BALDI_TABLE_I, &ideal, &modelled, live_part.as_ref());
    let parts: Vec<&Part> = [Some(&ideal), Some(&modelled), live_part.as_ref()]
        .into_iter()
        .flatten()
        .collect();
    show(&say, &parts, &rows, live_part.as_ref());
    let doc = demo_doc(&args, &w, scale, tf, &rows, &parts, live_part.is_some())?;
    write_atomic(&dir.join("summary.json"), doc.as_bytes())?;
    if args.json {
        println!("{doc}");
    }
    match live_error {
        Some(e) => Err(e.context("the live run of the demo")),
        None => Ok(()),
    }
}

/// The headlines, the table, the live verdicts and where the reports are.
fn show(say: &Say, parts: &[&Part], rows: &[table::DemoFlow], live: Option<&Part>) {
    let names: Vec<&str> = BALDI_TABLE_I.iter().map(|(n, _, _)| *n).collect();
    say.line("");
    for p in parts {
        say.line(&table::headline(p, &names));
    }
    say.line(&table::paper_line(BALDI_TABLE_I));
    say.line("");
    say.line(&table::table(rows, live.map(|p| p.scale)));
    if let Some(v) = live.and_then(table::verdicts) {
        say.line(&v);
    }
    for p in parts {
        say.line(&format!(
            "report ({}): {}",
            p.name,
            p.lines.dir.join("report.html").display()
        ));
    }
}

fn progress(what: &str) {
    crate::say::say!("== {what}");
}

fn default_output() -> PathBuf {
    let secs = lockstep_linux::now(ClockId::Realtime).ns / 1_000_000_000;
    PathBuf::from("lab-results").join(format!("demo-{secs}"))
}

/// The first lines: what this host does and what the live part will run.
fn intro(
    w: &host::Wakeups,
    scale: u32,
    tf: Duration,
    s: &Scenario,
    args: &DemoArgs,
    live: bool,
) -> String {
    let prio = if w.realtime {
        "a SCHED_FIFO timer"
    } else {
        "a timer (no real-time priority: not root)"
    };
    let mut t = format!(
        "This host: {prio} woke up to {} late (p99.99 {}, p99 {}; {} wake-ups in 5 s).",
        fmt_ns(w.max_ns),
        fmt_ns(w.p9999_ns),
        fmt_ns(w.p99_ns),
        w.count
    );
    if !live {
        let why = if args.no_live {
            "--no-live"
        } else {
            "not root (run as root for it, or pass --no-live)"
        };
        t.push_str(&format!("\nThe live run is skipped: {why}."));
        return t;
    }
    let why = if args.scale.is_some() {
        "as --scale asks".to_string()
    } else {
        format!(
            "the smallest at which a frame holds {} times the largest of those wake-ups",
            host::FRAME_OVER_WAKEUP
        )
    };
    let link = s.links.first().map_or(0, |l| l.rate_bps) / u64::from(scale);
    t.push_str(&format!(
        "\nThe live run uses time scale {scale} ({why}): TF {}, links {} Mb/s, {} per mode; its times are shown real and divided by {scale}.",
        Duration(tf.as_nanos() * i64::from(scale)),
        link as f64 / 1e6,
        live_duration(s, args, scale)
    ));
    t
}

/// The live runs' length: as asked, or long enough for [`LIVE_PACKETS`] per flow.
fn live_duration(s: &Scenario, args: &DemoArgs, scale: u32) -> Duration {
    if let Some(d) = args.live_duration {
        return d;
    }
    let pps = s
        .flows
        .iter()
        .filter_map(|f| match f.rate {
            FlowRate::Packets(p) => Some(p.milli_pps),
            _ => None,
        })
        .min()
        .unwrap_or(800_000)
        / u64::from(scale.max(1));
    let secs = (LIVE_PACKETS * 1000).div_ceil(pps.max(1));
    Duration::from_secs(secs.clamp(10, LIVE_MAX_SECS) as i64)
}

fn sim_part(s: &Scenario, dir: &Path, host: &str, name: &str, duration: Duration) -> Result<Part> {
    let sub = if host == "ideal" {
        "simulated"
    } else {
        "host-model"
    };
    let a = SimRunArgs {
        scenario: PathBuf::from("scenarios/mesh4.toml"),
        duration: Some(duration),
        seed: 1,
        host: host.into(),
        node_hosts: None,
        processing: Duration::ZERO,
        propagation: Duration::ZERO,
        framing: lockstep_sim::Framing::Ethernet,
        links: lockstep_sim::LinkModel::Wire,
        cpus: None,
        threads: crate::sim::Threads::Exactly(1),
        output: Some(dir.join(sub)),
        json: false,
        packets: false,
        overrides: OverrideArgs {
            tf: None,
            modes: None,
            scale: None,
        },
        silent: true,
    };
    let lines = crate::sim::run::run_scenario(s, &a, 0)?;
    Ok(Part {
        name: format!("{name} ({} simulated per mode)", duration),
        scale: 1,
        tf_ns: s.tfs[0].as_nanos(),
        lines,
    })
}

fn live_part(s: &Scenario, args: &DemoArgs, dir: &Path, scale: u32) -> Result<Part> {
    let scaled = s
        .clone()
        .scaled(scale)
        .map_err(|e| UsageError(e.to_string()))?;
    let d = live_duration(s, args, scale);
    let opts = RunOptions {
        duration: Some(d),
        output: Some(dir.join("live")),
        json: false,
        keep: false,
        quiet: crate::say::quiet(),
        silent: true,
        gates: Default::default(),
        io: None,
    };
    let lines = lab_run(&scaled, &opts)?;
    Ok(Part {
        name: format!("live, this host, scale {scale} ({d} per mode)"),
        scale,
        tf_ns: scaled.tfs[0].as_nanos(),
        lines,
    })
}

/// The demo's result document, as text.
fn demo_doc(
    args: &DemoArgs,
    w: &host::Wakeups,
    scale: u32,
    tf: Duration,
    rows: &[table::DemoFlow],
    parts: &[&Part],
    live: bool,
) -> Result<String> {
    let mut doc = ResultDoc::new(
        "demo",
        json!({
            "scenario": "mesh4",
            "duration": args.duration.map(|d| d.to_string()),
            "live": live,
        }),
    );
    doc.insert("scale", scale);
    doc.insert("tf_ns", tf.as_nanos() * i64::from(scale));
    doc.insert("host_wakeups", w);
    doc.insert("flows", rows);
    let dirs: Vec<_> = parts
        .iter()
        .map(|p| json!({"part": p.name, "dir": p.lines.dir, "scale": p.scale, "tf_ns": p.tf_ns}))
        .collect();
    doc.insert("parts", dirs);
    Ok(serde_json::to_string_pretty(&doc)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_runs_are_long_enough_but_never_long() {
        let s = Scenario::parse("mesh4.toml", crate::lab::MESH4).unwrap();
        let args = DemoArgs {
            duration: None,
            live_duration: None,
            scale: None,
            no_live: false,
            json: false,
            output: None,
        };
        // 800 packets/s per flow divided by the scale, 1200 packets, 10 to 90 s
        assert_eq!(live_duration(&s, &args, 1), Duration::from_secs(10));
        assert_eq!(live_duration(&s, &args, 20), Duration::from_secs(30));
        assert_eq!(live_duration(&s, &args, 50), Duration::from_secs(75));
        assert_eq!(live_duration(&s, &args, 200), Duration::from_secs(90));
        let asked = DemoArgs {
            live_duration: Some(Duration::from_secs(500)),
            ..args
        };
        assert_eq!(live_duration(&s, &asked, 200), Duration::from_secs(500));
    }
}
