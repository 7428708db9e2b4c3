//! `lockstep sim run --packets` and `lockstep sim compare`, end to end through the
//! binary (no root needed):
//! - `--packets` writes each receiver's per-packet file per run, in the lab's format;
//! - two simulations of line.toml with the same seed compared: every flow's figures
//!   equal on both sides, Kolmogorov–Smirnov distance 0, and on the TDP run every
//!   packet on time in both and no router hop in another frame;
//! - a host model that makes nodes late changes the latencies (KS > 0) but not the
//!   frames of the packets no node was late for;
//! - a directory without per-packet files, or without a result document, is refused
//!   with exit status 2 and a message naming the file or the missing option;
//! - `--node-hosts` on a directory holding no node result is refused the same way.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::cli::{lockstep, scenario};

/// A fresh directory of this test's own.
fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lockstep-cli-compare-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn simulate(out: &Path, extra: &[&str]) {
    let line = scenario("line.toml");
    let o = out.display().to_string();
    let mut args = vec![
        "sim",
        "run",
        &line,
        "-D",
        "200ms",
        "-q",
        "--packets",
        "-o",
        &o,
    ];
    args.extend_from_slice(extra);
    let r = lockstep(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
}

fn compare(a: &Path, b: &Path) -> Vec<Value> {
    let (a, b) = (a.display().to_string(), b.display().to_string());
    let r = lockstep(&["sim", "compare", &a, &b, "--json"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v: Value = serde_json::from_slice(&r.stdout).expect("sim compare --json prints JSON");
    v.as_array().expect("one entry per run").clone()
}

fn run<'a>(runs: &'a [Value], label: &str) -> &'a Value {
    runs.iter()
        .find(|r| r["run"] == label)
        .expect("the run is compared")
}

#[test]
fn the_same_simulation_twice_compares_equal() {
    let (a, b) = (dir("a"), dir("b"));
    simulate(&a, &[]);
    simulate(&b, &[]);
    for mode in ["fifo", "tdp"] {
        let text = std::fs::read_to_string(a.join(mode).join("rx-packets.csv")).unwrap();
        let header = text.lines().next().unwrap();
        assert!(header.starts_with("flow,seq,frame,t0,"), "{header}");
        assert!(header.ends_with("h24_tx_app,h24_slipped"), "{header}");
        assert!(text.lines().count() > 100, "{mode}: a row per packet");
    }
    let runs = compare(&a, &b);
    assert_eq!(runs.len(), 2);
    for r in &runs {
        let f = &r["flows"][0];
        assert_eq!(f["flow"], "ctl");
        assert_eq!(f["lab"], f["sim"], "{}", r["run"]);
        assert_eq!(f["ks"], 0.0, "{}", r["run"]);
    }
    let fr = &run(&runs, "TDP")["frames"];
    assert_eq!(fr["paired"], fr["clean_both"]);
    assert_eq!(fr["hops_compared"], fr["clean_both"]);
    assert_eq!(
        (
            fr["hop_mismatches"].as_u64(),
            fr["edge_wait_differs"].as_u64()
        ),
        (Some(0), Some(0))
    );
    assert!(run(&runs, "FIFO")["frames"].is_null());
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn late_nodes_move_latencies_not_the_frames_of_on_time_packets() {
    let (a, b) = (dir("ideal"), dir("late"));
    simulate(&a, &[]);
    simulate(&b, &["--host", "fixed:20us"]);
    let runs = compare(&a, &b);
    let tdp = run(&runs, "TDP");
    assert!(tdp["flows"][0]["ks"].as_f64().unwrap() > 0.5);
    let fr = &tdp["frames"];
    assert!(fr["hops_compared"].as_u64().unwrap() > 100);
    assert_eq!(fr["hop_mismatches"].as_u64(), Some(0));
    let _ = std::fs::remove_dir_all(&a);
    let _ = std::fs::remove_dir_all(&b);
}

#[test]
fn what_cannot_be_compared_is_refused() {
    let (a, b) = (dir("with"), dir("without"));
    simulate(&a, &[]);
    let line = scenario("line.toml");
    let bs = b.display().to_string();
    let r = lockstep(&["sim", "run", &line, "-D", "50ms", "-q", "-o", &bs]);
    assert!(r.status.success());
    let as_ = a.display().to_string();
    let r = lockstep(&["sim", "compare", &as_, &bs]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("no per-packet file (run sim run with --packets)"),
        "{err}"
    );
    let empty = dir("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let es = empty.display().to_string();
    let r = lockstep(&["sim", "compare", &as_, &es]);
    assert_ne!(r.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&r.stderr).contains("summary.json"));
    let r = lockstep(&[
        "sim",
        "run",
        &line,
        "-D",
        "50ms",
        "-q",
        "-o",
        &bs,
        "--node-hosts",
        &es,
    ]);
    assert_eq!(r.status.code(), Some(2));
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("--node-hosts") && err.contains("no node result file"),
        "{err}"
    );
    for d in [a, b, empty] {
        let _ = std::fs::remove_dir_all(d);
    }
}
