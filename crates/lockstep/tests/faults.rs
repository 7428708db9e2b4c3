//! The fault scenarios (`scenarios/faults/*.toml`), each run by the simulator and,
//! as root, in network namespaces, with one body of checks for both: the result
//! document of `lockstep sim run` and of `lockstep lab run` carries, per run, a
//! verdict for each injected fault.
//!
//! The simulator (ideal hosts) must pass every check, exactly: the outage costs only
//! the packets on their way, and a flow is whole again at once; a clock offset
//! within the guard costs nothing, beyond it only slips; a best-effort flood costs
//! the reserved flow nothing in TDP and loses its packets in FIFO (exit 1 then).
//!
//! The lab runs on a shared, noisy machine, so its checks are what the fault
//! visibly did, never timing: both actions of an outage were taken (the run's
//! `fault_log`), the flow came back after it, each document carries its verdicts;
//! pass or fail is reported, not asserted.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::cli::{lockstep, scenario};
use serde_json::Value;

/// Where a run writes, fresh for each test.
fn out_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-faults-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// `lockstep sim run FILE --json` (or `lab run`) and its document.
fn run(driver: &str, file: &str, extra: &[&str], out: &Path) -> (Output, Value) {
    let path = scenario(&format!("faults/{file}"));
    let out_s = out.display().to_string();
    let mut args = vec![driver, "run", path.as_str(), "--json", "-o", out_s.as_str()];
    args.extend_from_slice(extra);
    let o = lockstep(&args);
    let doc = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{driver} run {file}: no JSON document ({e}); stderr:\n{}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    (o, doc)
}

/// The verdicts of every run: (run label, verdict).
fn verdicts(doc: &Value) -> Vec<(String, Value)> {
    let runs = doc["results"]["runs"].as_array().expect("results.runs");
    let mut out = Vec::new();
    for r in runs {
        let label = r["label"].as_str().unwrap_or("").to_string();
        for v in r["faults"].as_array().expect("runs[].faults") {
            out.push((label.clone(), v.clone()));
        }
    }
    out
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// The one body: what a run of `file` must show, whoever ran it. `exact`: the
/// simulator's ideal hosts (every check must pass).
fn check(driver: &str, file: &str, exact: bool) -> Value {
    let out = out_dir(&format!("{driver}-{}", file.trim_end_matches(".toml")));
    let (o, doc) = run(driver, file, &[], &out);
    let code = o.status.code();
    assert!(
        matches!(code, Some(0) | Some(1)),
        "{driver} run {file}: exit {code:?}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let vs = verdicts(&doc);
    assert_eq!(vs.len(), 1, "one fault, one TDP run: {vs:?}");
    let (_, v) = &vs[0];
    assert_eq!(v["flows_hit"], serde_json::json!(["ctl"]));
    let failed = vs.iter().any(|(_, v)| v["pass"] == false);
    assert_eq!(doc["check_failed"], serde_json::json!(failed));
    assert_eq!(
        code == Some(1),
        failed,
        "exit 1 exactly when a check failed"
    );
    if exact {
        assert_eq!(v["pass"], true, "{v}");
    }
    if driver == "lab" {
        // what was injected, and when, is in the document
        let runs = doc["results"]["runs"].as_array().expect("runs");
        let log = runs[0]["fault_log"].as_array().expect("fault_log");
        let outages = if file.starts_with("link") || file.starts_with("router") {
            2
        } else {
            0
        };
        assert_eq!(log.len(), outages, "{log:?}");
    }
    let _ = std::fs::remove_dir_all(&out);
    v.clone()
}

/// Link down and router restart: packets lost, the flow back afterwards.
fn outage(driver: &str, file: &str, exact: bool, lost_exactly: u64) {
    let v = check(driver, file, exact);
    // (in the lab the sender may be starved for as long as the link takes to go
    // down, and so send nothing into the outage: only the simulator's loss is sure)
    assert!(
        !v["detail"]
            .as_str()
            .unwrap_or("")
            .contains("never came back"),
        "{v}"
    );
    if exact {
        assert!(u(&v, "lost") > 0, "the outage lost packets: {v}");
        assert_eq!(u(&v, "lost"), lost_exactly, "{v}");
        assert_eq!(u(&v, "late"), 0, "{v}");
        assert_eq!(v["recovered_after_ns"], 0, "whole again at once: {v}");
    }
}

#[test]
fn sim_link_down_costs_only_the_outage() {
    // 100 ms at one packet per 250 us frame
    outage("sim", "link-down.toml", true, 400);
}

#[test]
fn sim_router_restart_costs_only_the_outage() {
    // 50 ms down: 200 frames, and the two packets the router held when it was killed
    outage("sim", "router-restart.toml", true, 202);
}

#[test]
fn sim_clock_offsets_within_and_beyond_the_guard() {
    let v = check("sim", "clock-within-guard.toml", true);
    assert_eq!((u(&v, "slips"), u(&v, "lost"), u(&v, "late")), (0, 0, 0));
    let v = check("sim", "clock-beyond-guard.toml", true);
    assert!(u(&v, "slips") > 0, "{v}");
    assert_eq!(u(&v, "lost"), 0, "{v}");
}

#[test]
fn sim_flood_spares_tdp_and_fails_fifo() {
    let v = check("sim", "flood.toml", true);
    assert_eq!((u(&v, "slips"), u(&v, "lost"), u(&v, "late")), (0, 0, 0));
    // the same flood in FIFO: the reserved flow loses packets, the check fails
    let out = out_dir("sim-flood-fifo");
    let (o, doc) = run("sim", "flood.toml", &["--modes", "fifo"], &out);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(doc["check_failed"], true);
    let vs = verdicts(&doc);
    assert_eq!(vs[0].1["pass"], false);
    assert!(u(&vs[0].1, "lost") > 0);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("fault check failed: FIFO: flood every link"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&out);
}

/// Every fault scenario in namespaces, one after the other (each builds its own
/// `ls-<run id>-*` namespaces and removes them): the same body as the simulator's,
/// minus the exact figures.
#[test]
fn lab_runs_every_fault_scenario() {
    if !common::lab::can_run("lab_runs_every_fault_scenario") {
        return;
    }
    outage("lab", "link-down.toml", false, 0);
    outage("lab", "router-restart.toml", false, 0);
    for file in ["clock-within-guard.toml", "clock-beyond-guard.toml"] {
        let v = check("lab", file, false);
        assert_eq!(v["fault"], "clock-offset", "{v}");
    }
    let v = check("lab", "flood.toml", false);
    assert_eq!(v["fault"], "flood", "{v}");
}

/// The guard at a frame's start: over links so fast that a packet crosses in well
/// under the offset, a router whose clock is behind its upstream's by the guard gets
/// each packet before its frame turns; it holds it for that frame (no slip). A
/// microsecond more than the guard, every packet slips.
#[test]
fn sim_a_clock_behind_by_the_guard_keeps_its_frames_over_a_fast_link() {
    let text = std::fs::read_to_string(scenario("faults/clock-within-guard.toml"))
        .expect("the scenario")
        .replace("rate = \"100Mbit/s\"", "rate = \"10Gbit/s\"");
    assert!(text.contains("10Gbit/s") && text.contains("offset = \"-10us\""));
    let dir = out_dir("fast-link");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    for (offset, slips) in [("-10us", 0), ("-11us", 8001)] {
        let file = dir.join(format!("fast{offset}.toml"));
        std::fs::write(&file, text.replace("-10us", offset)).expect("write scenario");
        let (f, out) = (
            file.display().to_string(),
            dir.join(offset).display().to_string(),
        );
        let o = lockstep(&["sim", "run", &f, "--json", "-o", &out]);
        let doc: Value = serde_json::from_slice(&o.stdout).expect("the document");
        let vs = verdicts(&doc);
        assert_eq!(vs.len(), 1);
        let v = &vs[0].1;
        assert_eq!(v["pass"], true, "{offset}: {v}");
        assert_eq!(u(v, "slips"), slips, "{offset}: {v}");
        assert_eq!((u(v, "lost"), u(v, "late")), (0, 0), "{offset}: {v}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A router restarted by a fault gets the run's `--io` like the first process: the
/// document R2's second process wrote names the mode asked for.
#[test]
fn lab_restarts_a_router_with_the_runs_io_mode() {
    let test = "lab_restarts_a_router_with_the_runs_io_mode";
    if !common::lab::can_run(test) {
        return;
    }
    let out = out_dir("restart-io");
    let (o, _) = run("lab", "router-restart.toml", &["--io", "ring-v2"], &out);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let text = std::fs::read_to_string(out.join("tdp").join("r2.json"))
        .unwrap_or_else(|e| panic!("r2.json: {e}; stderr:\n{stderr}"));
    let r2: Value = serde_json::from_str(&text).expect("r2.json is JSON");
    let args: Vec<&str> = r2["command"]
        .as_array()
        .expect("command")
        .iter()
        .filter_map(|a| a.as_str())
        .collect();
    assert!(
        args.windows(2).any(|w| w == ["--io", "ring-v2"]),
        "{args:?}"
    );
    assert_eq!(r2["io"], "ring-v2", "{stderr}");
    let _ = std::fs::remove_dir_all(&out);
}
