//! The demo's first step: how late this host wakes up (a short `probe timer` run in
//! a child process, so its real-time priority stays there), and the time scale the
//! live part needs for those wake-ups to stay well inside a frame.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use lockstep_core::Duration;
use lockstep_linux::proc::Spec;
use lockstep_plan::scenario::TIME_SCALES;
use serde::Serialize;
use serde_json::Value;

use crate::EnvError;

/// How long and how often the host is probed.
const PROBE_LENGTH: &str = "5s";
const PROBE_INTERVAL: &str = "200us";

/// The rule: the largest wake-up lateness the probe saw must fit this many times in a
/// frame (its p99.99 alone was seen to let a live run at too small a scale meet a
/// stall longer than a frame at an edge, whose backlog a source at its reserved rate
/// never drains).
pub const FRAME_OVER_WAKEUP: i64 = 4;

/// What the probe measured.
#[derive(Clone, Debug, Serialize)]
pub struct Wakeups {
    /// The probe's result document (a host model for the simulator).
    pub file: PathBuf,
    pub count: u64,
    pub p99_ns: i64,
    pub p9999_ns: i64,
    pub max_ns: i64,
    /// Whether it ran under SCHED_FIFO (as the lab's nodes do).
    pub realtime: bool,
}

/// Runs `lockstep probe timer` into `dir` and reads its figures.
pub fn measure(dir: &Path, realtime: bool) -> Result<Wakeups> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let exe = std::env::current_exe().context("finding the lockstep binary")?;
    let mut args: Vec<String> = ["probe", "timer", "--interval", PROBE_INTERVAL, "--duration"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.push(PROBE_LENGTH.into());
    args.extend([
        "--quiet".into(),
        "--output".into(),
        dir.display().to_string(),
    ]);
    if realtime {
        args.extend(["--priority".into(), "90".into()]);
    } else {
        // without root the locked-memory limit is usually too small for mlockall
        args.push("--no-mlock".into());
    }
    let mut p = Spec::new("probe timer", &exe)
        .args(&args)
        .stdout(dir.join("probe.txt"))
        .stderr(dir.join("probe.log"))
        .in_caller_group()
        .spawn()?;
    // a stop asked of the demo is passed on to the probe, and ends the demo
    let ended = p.wait_or_stop(crate::stop::CHILD_GRACE)?;
    if ended.stopped {
        return Err(crate::Interrupted(format!(
            "while measuring this host's wake-ups (what the probe had is in {})",
            dir.display()
        ))
        .into());
    }
    let status = ended.status;
    if !status.success() {
        return Err(EnvError(format!(
            "the host probe (lockstep {}) failed: {}",
            args.join(" "),
            p.stderr_tail()
        ))
        .into());
    }
    read(&dir.join("summary.json"), realtime)
}

fn read(file: &Path, realtime: bool) -> Result<Wakeups> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the host probe's {}", file.display()))?;
    let doc: Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not a JSON document", file.display()))?;
    let get = |p: &str| doc.pointer(p).and_then(Value::as_i64);
    let missing = |what: &str| EnvError(format!("{}: {what}: missing", file.display()));
    Ok(Wakeups {
        file: file.to_path_buf(),
        count: doc
            .pointer("/results/latency/count")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        p99_ns: get("/results/latency/percentiles_ns/99").ok_or_else(|| missing("p99"))?,
        p9999_ns: get("/results/latency/percentiles_ns/99.99").ok_or_else(|| missing("p99.99"))?,
        max_ns: get("/results/latency/max_ns").ok_or_else(|| missing("max"))?,
        realtime,
    })
}

/// The smallest time scale at which a frame holds [`FRAME_OVER_WAKEUP`] times the
/// host's wake-up lateness `lateness_ns` (the largest scale there is when none does).
pub fn choose_scale(lateness_ns: i64, tf: Duration) -> u32 {
    let need = lateness_ns.max(0).saturating_mul(FRAME_OVER_WAKEUP);
    TIME_SCALES
        .iter()
        .copied()
        .find(|&s| tf.as_nanos().saturating_mul(i64::from(s)) >= need)
        .unwrap_or(TIME_SCALES[TIME_SCALES.len() - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    const TF: Duration = Duration::from_micros(250);

    #[test]
    fn the_scale_is_the_smallest_whose_frame_holds_four_times_the_lateness() {
        assert_eq!(choose_scale(20_000, TF), 1); // 80 µs ≤ 250 µs
        assert_eq!(choose_scale(62_500, TF), 1); // exactly a quarter
        assert_eq!(choose_scale(62_501, TF), 2);
        assert_eq!(choose_scale(145_919, TF), 5); // 584 µs → TF 1.25 ms
        assert_eq!(choose_scale(931_839, TF), 20); // 3.7 ms → TF 5 ms
        assert_eq!(choose_scale(100_000_000, TF), 200);
    }

    #[test]
    fn a_probe_document_gives_its_percentiles() {
        let dir = std::env::temp_dir().join(format!("lockstep-demo-host-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("summary.json");
        let doc = r#"{"kind":"probe.timer","results":{"latency":{"count":25000,"max_ns":958915,
            "percentiles_ns":{"99":6671,"99.99":931839}}}}"#;
        std::fs::write(&f, doc).unwrap();
        let w = read(&f, true).unwrap();
        assert_eq!(
            (w.count, w.p99_ns, w.p9999_ns, w.max_ns),
            (25000, 6671, 931839, 958915)
        );
        std::fs::write(&f, r#"{"results":{"latency":{}}}"#).unwrap();
        let e = read(&f, true).unwrap_err().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(e.ends_with("p99: missing"), "{e}");
    }
}
