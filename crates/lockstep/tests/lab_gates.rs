//! `lockstep lab run --max-loss PCT --fail-above STAT=DUR`: the CI gates of the
//! probes on every flow of every mode of a lab. A bad value is refused (exit 2, naming
//! the option) before anything is built; a crossed gate still writes the results,
//! sets `check_failed`, lists each crossing (mode, flow, statistic) and exits 1; a
//! gate that holds exits 0. The end-to-end runs need root and iproute2 (otherwise
//! they print a skip note and pass).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;

use common::cli::{lockstep, scenario};
use serde_json::Value;

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_gate_values_exit_2_naming_the_option() {
    let line = scenario("line.toml");
    for (args, says) in [
        (
            &["--max-loss", "5"][..],
            "lockstep: --max-loss: expected a percentage like 0.1% or 0, got \"5\"",
        ),
        (
            &["--max-loss", "120%"][..],
            "lockstep: --max-loss: expected a percentage like 0.1% or 0, got \"120%\"",
        ),
        (
            &["--fail-above", "p42=1ms"][..],
            "lockstep: --fail-above: unknown statistic \"p42\"",
        ),
        (
            &["--fail-above", "p99"][..],
            "lockstep: --fail-above: expected STAT=DUR like p99=500us, got \"p99\"",
        ),
        (
            &["--fail-above", "p99=soon"][..],
            "lockstep: --fail-above: ",
        ),
    ] {
        for file in [line.as_str(), &scenario("rt-service.toml")] {
            let mut a = vec!["lab", "run", file];
            a.extend_from_slice(args);
            let o = lockstep(&a);
            assert_eq!(o.status.code(), Some(2), "{a:?}: {}", stderr(&o));
            assert!(stderr(&o).starts_with(says), "{a:?}: {}", stderr(&o));
            assert!(o.stdout.is_empty(), "{a:?}");
        }
    }
}

/// A result directory removed on drop.
struct Out(PathBuf);

impl Out {
    fn new(name: &str) -> Out {
        let p =
            std::env::temp_dir().join(format!("lockstep-lab-gates-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Out(p)
    }
}

impl Drop for Out {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `lab run line.toml` for a short while in both modes with `gates`, as JSON.
fn line_with(dir: &Path, gates: &[&str]) -> Output {
    let mut a = vec![
        "lab".to_string(),
        "run".into(),
        scenario("line.toml"),
        "--tf".into(),
        "1ms".into(),
        "--duration".into(),
        "1s".into(),
        "--json".into(),
        "-q".into(),
        "--output".into(),
        dir.display().to_string(),
    ];
    a.extend(gates.iter().map(|s| s.to_string()));
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    lockstep(&a)
}

fn summary(dir: &Path) -> Value {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json written");
    serde_json::from_str(&text).expect("summary.json is JSON")
}

#[test]
fn a_crossed_gate_exits_1_after_writing_the_results_and_names_mode_flow_and_stat() {
    if !common::lab::can_run("lab_gates") {
        return;
    }
    let out = Out::new("crossed");
    // no packet crosses a lab in a nanosecond
    let o = line_with(&out.0, &["--fail-above", "p50=1ns"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    // the results are all there, and stdout is the document
    let doc = summary(&out.0);
    assert!(out.0.join("report.html").is_file());
    let stdout: Value = serde_json::from_slice(&o.stdout).expect("JSON on stdout");
    assert_eq!(stdout, doc);
    assert_eq!(doc["check_failed"], true);
    let crossings = doc["results"]["crossings"]
        .as_array()
        .expect("results.crossings");
    // every flow of every mode is judged on its own
    let seen: BTreeSet<(String, String, String)> = crossings
        .iter()
        .map(|c| {
            (
                c["run"].as_str().unwrap_or("").to_string(),
                c["flow"].as_str().unwrap_or("").to_string(),
                c["stat"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    for mode in ["FIFO", "TDP"] {
        assert!(
            seen.contains(&(mode.into(), "ctl".into(), "p50".into())),
            "{mode}: {crossings:?}"
        );
    }
    for c in crossings {
        assert_eq!(c["limit_ns"], 1, "{c}");
        assert!(c["value_ns"].as_i64().unwrap_or(0) > 1, "{c}");
    }
    // the terminal names the mode, the flow and the statistic
    for mode in ["FIFO", "TDP"] {
        assert!(
            err.contains(&format!("{mode}: flow ctl: latency p50 ")),
            "{err}"
        );
    }
    assert!(err.contains("is above --fail-above p50=1ns"), "{err}");
}

#[test]
fn gates_that_hold_exit_0_and_say_so() {
    if !common::lab::can_run("lab_gates") {
        return;
    }
    let out = Out::new("held");
    let o = line_with(
        &out.0,
        &[
            "--max-loss",
            "50%",
            "--fail-above",
            "p99=10s",
            "--fail-above",
            "max=60s",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = summary(&out.0);
    assert_eq!(doc["check_failed"], false);
    assert_eq!(doc["results"]["crossings"], serde_json::json!([]));
}
