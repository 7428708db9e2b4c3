//! Command-line behaviour of `lockstep probe timer` and `lockstep probe noise`:
//! exit statuses, error messages, the JSON document's structure and the sample files.
//! Only structure and counts are asserted, never timing values (the machine is shared).

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Memory locking is on by default; without root it may exceed RLIMIT_MEMLOCK, which
/// is not what these tests are about.
fn base(args: &[&'static str]) -> Vec<&'static str> {
    let mut v = args.to_vec();
    if !is_root() {
        v.push("--no-mlock");
    }
    v
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON document ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            stderr(o)
        )
    })
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-cli-timer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

fn assert_distribution(d: &Value, count: u64) {
    assert_eq!(d["count"].as_u64(), Some(count), "{d}");
    for key in [
        "min_ns",
        "mean_ns",
        "max_ns",
        "stddev_ns",
        "jitter_ns",
        "histogram",
    ] {
        assert!(d.get(key).is_some(), "distribution lacks {key}: {d}");
    }
    let p = d["percentiles_ns"]
        .as_object()
        .expect("percentiles_ns object");
    let keys: Vec<_> = p.keys().map(String::as_str).collect();
    assert_eq!(keys, ["50", "90", "99", "99.9", "99.99", "99.999"]);
    let h = &d["histogram"];
    let total: u64 = h["count"]
        .as_array()
        .expect("counts")
        .iter()
        .filter_map(Value::as_u64)
        .sum();
    assert_eq!(total, count);
    assert_eq!(
        h["bucket_ns"].as_array().map(Vec::len),
        h["count"].as_array().map(Vec::len)
    );
}

fn assert_document(doc: &Value, kind: &str) {
    assert_eq!(doc["kind"], kind);
    assert!(doc["host"].is_object(), "host facts: {doc}");
    let cmd = doc["command"]
        .as_array()
        .expect("command is the argument vector");
    assert!(cmd.iter().any(|a| a == "probe"));
    assert!(doc["realtime"].is_object());
    assert!(doc["warnings"].is_array());
}

#[test]
fn timer_rejects_a_malformed_interval() {
    let o = lockstep(&["probe", "timer", "--interval", "abc"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains(r#"--interval: expected a duration like 100us, 1.5ms or 1/2ms, got "abc""#),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn timer_rejects_an_unknown_strategy() {
    let o = lockstep(&["probe", "timer", "--strategy", "nap"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(r#"--strategy: expected sleep, hybrid or spin, got "nap""#),
        "{}",
        stderr(&o)
    );
}

#[test]
fn timer_rejects_a_zero_interval_and_bad_counts() {
    let o = lockstep(&["probe", "timer", "--interval", "0us"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains(r#"--interval: expected a positive duration like 100us, got "0us""#)
    );
    let o = lockstep(&["probe", "timer", "--count", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--count: expected a positive whole number"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_interval_may_be_a_fraction() {
    let o = lockstep(&base(&[
        "probe",
        "timer",
        "--interval",
        "1/2ms",
        "--duration",
        "5ms",
        "--json",
        "-q",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(json(&o)["results"]["interval_ns"], 500_000);
    let o = lockstep(&base(&["probe", "timer", "--interval", "1/3ms"]));
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--interval: 1/3ms is not a whole number of nanoseconds"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn timer_short_run_json() {
    let o = lockstep(&base(&[
        "probe",
        "timer",
        "--interval",
        "200us",
        "--count",
        "200",
        "--json",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&o);
    assert_document(&doc, "probe.timer");
    let r = &doc["results"];
    assert_distribution(&r["latency"], 200);
    assert_eq!(r["samples"], 200);
    assert_eq!(r["interval_ns"], 200_000);
    assert_eq!(r["stopped_by"], "count");
    for key in [
        "overruns",
        "missed_periods",
        "early_wakeups",
        "elapsed_ns",
        "max_at",
    ] {
        assert!(r.get(key).is_some(), "results lack {key}");
    }
    assert_eq!(r["threshold"], Value::Null);
    assert_eq!(doc["check_failed"], false);
    assert_eq!(doc["config"]["strategy"], "sleep");
    // No priority asked for: the document says the latencies include normal scheduling.
    assert_eq!(doc["realtime"]["policy"], "other");
    let warnings = doc["warnings"].as_array().expect("warnings");
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("no SCHED_FIFO"))),
        "{warnings:?}"
    );
    // Human text goes to stderr with --json.
    assert!(stderr(&o).contains("wake-up latency"), "{}", stderr(&o));
}

#[test]
fn timer_samples_file_has_one_row_per_wakeup() {
    let path = tmp("timer-samples.csv");
    let p = path.to_str().expect("utf-8 temp path");
    let o = lockstep(
        &base(&[
            "probe",
            "timer",
            "--interval",
            "200us",
            "--count",
            "200",
            "-q",
            "--samples",
        ])
        .into_iter()
        .chain([p])
        .collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&path).expect("samples written");
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 201);
    assert_eq!(lines[0], "index,deadline_ns,wake_ns,latency_ns");
    for (i, line) in lines[1..].iter().enumerate() {
        let v: Vec<i64> = line
            .split(',')
            .map(|c| c.parse().expect("integer cell"))
            .collect();
        assert_eq!(v.len(), 4);
        assert_eq!(v[0], i as i64);
        assert_eq!(v[3], v[2] - v[1], "latency = wake - deadline");
    }
    // Human output on stdout without --json, with cyclictest's summary line.
    assert!(String::from_utf8_lossy(&o.stdout).contains("C:     200"));
}

#[test]
fn timer_threshold_stops_at_the_first_late_wakeup() {
    let o = lockstep(&base(&[
        "probe",
        "timer",
        "--interval",
        "200us",
        "--count",
        "200",
        "--threshold",
        "1ns",
        "--json",
        "-q",
    ]));
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc = json(&o);
    assert_eq!(doc["check_failed"], true);
    let r = &doc["results"];
    assert_eq!(r["stopped_by"], "threshold");
    assert_eq!(r["samples"], 1, "any real wake-up is later than 1 ns");
    assert_eq!(r["threshold"]["index"], 0);
    assert_eq!(r["threshold"]["threshold_ns"], 1);
    assert!(
        stderr(&o).contains("--threshold: wake-up 0 was"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn timer_with_realtime_priority() {
    let o = lockstep(&base(&[
        "probe",
        "timer",
        "--interval",
        "200us",
        "--count",
        "50",
        "--priority",
        "90",
        "--json",
        "-q",
    ]));
    if is_root() {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let doc = json(&o);
        assert_eq!(doc["realtime"]["policy"], "fifo");
        assert_eq!(doc["realtime"]["priority"], 90);
        assert_eq!(doc["results"]["latency"]["count"], 50);
        let warnings = doc["warnings"].as_array().expect("warnings");
        assert!(!warnings
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("no SCHED_FIFO"))));
    } else {
        assert_eq!(o.status.code(), Some(3));
        let e = stderr(&o);
        assert!(
            e.contains("CAP_SYS_NICE") || e.contains("run as root"),
            "{e}"
        );
    }
}

#[test]
fn noise_gap_mode_json() {
    let o = lockstep(&base(&[
        "probe",
        "noise",
        "--duration",
        "200ms",
        "--json",
        "-q",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&o);
    assert_document(&doc, "probe.noise");
    let r = &doc["results"];
    assert_eq!(r["mode"], "gaps");
    assert_eq!(r["stopped_by"], "duration");
    let reads = r["reads"].as_u64().expect("reads");
    assert!(reads >= 2);
    assert_distribution(&r["gaps"], reads - 1);
    let pow2: u64 = r["gaps_pow2"]
        .as_array()
        .expect("pow2")
        .iter()
        .filter_map(|b| b["count"].as_u64())
        .sum();
    assert_eq!(pow2 + r["backward_steps"].as_u64().unwrap_or(0), reads - 1);
    for key in [
        "threshold_ns",
        "above_threshold",
        "stolen_ns",
        "span_ns",
        "stolen_fraction",
        "max_gap_at_ns",
    ] {
        assert!(r.get(key).is_some(), "results lack {key}");
    }
    assert_eq!(r["threshold_ns"], 1_000);
}

#[test]
fn noise_period_mode_json() {
    let o = lockstep(&base(&[
        "probe",
        "noise",
        "--period",
        "10us",
        "--duration",
        "100ms",
        "--json",
        "-q",
    ]));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&o);
    assert_document(&doc, "probe.noise");
    let r = &doc["results"];
    assert_eq!(r["mode"], "period");
    assert_eq!(r["period_ns"], 10_000);
    // The loop serves every tick of the grid up to the end: 100 ms / 10 us.
    assert_eq!(r["ticks"], 10_000);
    assert_distribution(&r["deviation"], 9_999);
    assert_distribution(&r["lateness"], 10_000);
    let listed = r["spikes"].as_array().expect("spikes").len() as u64;
    let total = r["spikes_total"].as_u64().expect("spikes_total");
    assert_eq!(listed, total.min(1000));
    assert_eq!(r["spikes_truncated"], total > 1000);
    assert_eq!(r["spike_threshold_ns"], 5_000);
}

#[test]
fn noise_period_samples_and_count() {
    let path = tmp("noise-samples.csv");
    let p = path.to_str().expect("utf-8 temp path");
    let o = lockstep(
        &base(&[
            "probe",
            "noise",
            "--period",
            "10us",
            "--count",
            "500",
            "--max-spikes",
            "3",
            "-q",
            "--samples",
        ])
        .into_iter()
        .chain([p])
        .collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(&path).expect("samples written");
    let lines: Vec<_> = text.lines().collect();
    assert_eq!(lines.len(), 501);
    assert_eq!(
        lines[0],
        "index,deadline_ns,t_ns,interval_ns,deviation_ns,lateness_ns"
    );
    // The first tick has no interval.
    assert!(
        lines[1].starts_with("0,") && lines[1].contains(",,,"),
        "{}",
        lines[1]
    );
    for line in &lines[2..] {
        let v: Vec<i64> = line
            .split(',')
            .map(|c| c.parse().expect("integer cell"))
            .collect();
        assert_eq!(v[4], v[3] - 10_000);
        assert_eq!(v[5], v[2] - v[1]);
    }
    assert!(String::from_utf8_lossy(&o.stdout).contains("dummy program: ticks every 10us"));
}

#[test]
fn noise_rejects_bad_values() {
    let o = lockstep(&["probe", "noise", "--period", "fast"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o)
            .contains(r#"--period: expected a duration like 100us, 1.5ms or 1/2ms, got "fast""#),
        "{}",
        stderr(&o)
    );
    let o = lockstep(&["probe", "noise", "--samples"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--samples: give a file"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn output_directory_gets_the_summary_and_the_samples() {
    let dir = tmp("timer-out");
    let d = dir.to_str().expect("utf-8 temp path");
    let o = lockstep(
        &base(&[
            "probe",
            "timer",
            "--interval",
            "200us",
            "--count",
            "20",
            "-q",
            "--samples",
            "--output",
        ])
        .into_iter()
        .chain([d])
        .collect::<Vec<_>>(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("summary.json")).expect("summary.json"),
    )
    .expect("summary.json is JSON");
    assert_eq!(summary["results"]["samples"], 20);
    let rows = std::fs::read_to_string(dir.join("samples.csv")).expect("samples.csv");
    assert_eq!(rows.lines().count(), 21);
}
