//! `lockstep sim run` is a pure function of (scenario, options, seed): the same seed
//! twice gives a byte-identical `results` member of `summary.json`
//! (`serde_json::to_string` of it), with the ideal host model and with a measured
//! one (a wake-up histogram, the model that draws from the seeded generator), while
//! another seed under the measured model gives other results (so the seed is really
//! used and the comparison is not vacuous).
//!
//! `results` holds nothing of the wall clock or of the invocation: no key naming
//! wall time or a rate per second, no `started_at`/`generated_at`, and not the output
//! directory (which differs between the two runs); the wall-clock figures are in
//! `performance`. No root needed; no timing thresholds.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/line.toml")
}

/// A scratch directory of this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "lockstep-sim-determinism-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `lockstep sim run scenarios/line.toml --duration 2s --seed SEED --host HOST
/// --output DIR -q`; the written `summary.json`.
fn sim_run(seed: u64, host: &str, dir: &Path) -> Value {
    let (line, out) = (scenario(), dir.to_str().expect("a UTF-8 temp path"));
    let (line, seed) = (line.to_str().expect("a UTF-8 path"), seed.to_string());
    lockstep(&[
        "sim",
        "run",
        line,
        "--duration",
        "2s",
        "--seed",
        &seed,
        "--host",
        host,
        "--output",
        out,
        "-q",
    ]);
    summary(dir)
}

/// The `results` member as one line of JSON, the bytes compared.
fn results_bytes(doc: &Value) -> String {
    assert!(doc["results"].is_object(), "no results object: {doc}");
    serde_json::to_string(&doc["results"]).expect("results serialise")
}

/// Every object key inside `v`, with its JSON pointer.
fn keys(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let here = format!("{at}/{k}");
                out.push(here.clone());
                keys(v, &here, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                keys(v, &format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Nothing of the wall clock or of the invocation in `results`.
fn assert_no_wall_clock(doc: &Value, dir: &Path) {
    let mut all = Vec::new();
    keys(&doc["results"], "/results", &mut all);
    let clocky: Vec<&String> = all
        .iter()
        .filter(|p| {
            let k = p.rsplit('/').next().unwrap_or("").to_ascii_lowercase();
            k.contains("wall")
                || k.ends_with("_per_s")
                || k == "started_at"
                || k == "generated_at" && doc.pointer(p).is_some_and(|v| v != "")
                || k == "peak_rss_bytes"
        })
        .collect();
    assert!(
        clocky.is_empty(),
        "wall-clock figures in results: {clocky:?}"
    );
    let text = results_bytes(doc);
    let shown = dir.display().to_string();
    assert!(
        !text.contains(&shown),
        "results name the output directory {shown} (the command line is not a result)"
    );
    // where the wall-clock figures are
    let perf = doc["performance"]["runs"]
        .as_array()
        .expect("performance.runs");
    assert!(!perf.is_empty());
    assert!(perf.iter().all(|r| r["wall_ns"].is_i64()), "{perf:?}");
}

/// A `lockstep probe timer --json` document with a wide wake-up histogram (0 to
/// 150 µs at TF = 250 µs): the measured host model draws every node's lateness from
/// it with the seeded generator.
fn timer_file(dir: &Path) -> PathBuf {
    let path = dir.join("timer.json");
    let doc = serde_json::json!({
        "kind": "probe.timer",
        "results": {"latency": {"histogram": {
            "bucket_ns": [0, 2_000, 5_000, 20_000, 60_000, 150_000],
            "count": [40, 30, 15, 10, 4, 1]
        }}}
    });
    std::fs::write(&path, doc.to_string()).expect("timer file");
    path
}

#[test]
fn the_same_seed_twice_gives_byte_identical_results() {
    let s = Scratch::new("ideal");
    let (d1, d2) = (s.0.join("one"), s.0.join("two"));
    let a = sim_run(7, "ideal", &d1);
    let b = sim_run(7, "ideal", &d2);
    assert_eq!(a["config"]["seed"], 7);
    assert_eq!(a["config"]["host_model"], "ideal");
    let runs: Vec<&str> = a["results"]["runs"]
        .as_array()
        .expect("results.runs")
        .iter()
        .map(|r| r["label"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(runs, ["FIFO", "TDP"]);
    assert_no_wall_clock(&a, &d1);
    assert_no_wall_clock(&b, &d2);
    assert!(
        results_bytes(&a) == results_bytes(&b),
        "seed 7 twice, ideal hosts: the results differ"
    );
}

#[test]
fn a_measured_host_model_is_fixed_by_its_seed() {
    let s = Scratch::new("measured");
    let timer = timer_file(&s.0);
    let host = timer.to_str().expect("a UTF-8 temp path");
    let a = sim_run(7, host, &s.0.join("seed7-one"));
    let b = sim_run(7, host, &s.0.join("seed7-two"));
    let c = sim_run(8, host, &s.0.join("seed8"));
    let model = a["config"]["host_model"].as_str().unwrap_or("");
    assert!(model.starts_with("measured"), "host model: {model}");
    assert_no_wall_clock(&a, &s.0.join("seed7-one"));
    assert!(
        results_bytes(&a) == results_bytes(&b),
        "seed 7 twice, measured hosts: the results differ"
    );
    assert!(
        results_bytes(&a) != results_bytes(&c),
        "seeds 7 and 8 under a measured host model gave the same results: the seed is not used"
    );
}

/// `lockstep sim ARGS` that must succeed; its stderr.
fn lockstep(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("running lockstep");
    assert!(
        out.status.success(),
        "lockstep {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn summary(dir: &Path) -> Value {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// How many threads each run took (`performance.runs[].threads`).
fn threads(doc: &Value) -> Vec<u64> {
    doc["performance"]["runs"]
        .as_array()
        .expect("performance.runs")
        .iter()
        .map(|r| r["threads"].as_u64().unwrap_or(0))
        .collect()
}

#[test]
fn a_network_in_parts_on_threads_gives_the_same_results() {
    let s = Scratch::new("threads");
    let grid = s.0.join("grid.toml");
    let g = grid.to_str().expect("a UTF-8 temp path");
    lockstep(&[
        "sim",
        "gen",
        "--topology",
        "grid",
        "--routers",
        "36",
        "--flows",
        "40",
        "--load",
        "0.6",
        "-o",
        g,
    ]);
    let mut docs = Vec::new();
    for t in ["1", "3"] {
        let dir = s.0.join(format!("t{t}"));
        let d = dir.to_str().expect("a UTF-8 temp path");
        lockstep(&[
            "sim",
            "run",
            g,
            "--duration",
            "200ms",
            "--threads",
            t,
            "-o",
            d,
            "-q",
        ]);
        docs.push(summary(&dir));
    }
    assert_eq!(threads(&docs[0]), [1, 1]);
    assert_eq!(threads(&docs[1]), [3, 3]);
    let delivered = docs[0]["results"]["runs"][1]["flows"][0]["received"].as_u64();
    assert!(
        delivered.unwrap_or(0) > 10,
        "{}",
        docs[0]["results"]["runs"][1]["flows"][0]
    );
    assert!(
        results_bytes(&docs[0]) == results_bytes(&docs[1]),
        "one thread and three parts on three threads: the results differ"
    );
}

#[test]
fn a_run_with_faults_says_it_runs_on_one_thread() {
    let s = Scratch::new("threads-faults");
    let link = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/faults/link-down.toml");
    let dir = s.0.join("out");
    let err = lockstep(&[
        "sim",
        "run",
        link.to_str().expect("a UTF-8 path"),
        "--threads",
        "2",
        "-o",
        dir.to_str().expect("a UTF-8 temp path"),
    ]);
    assert!(
        err.contains("runs on one thread: the scenario injects faults"),
        "{err}"
    );
    let doc = summary(&dir);
    assert!(threads(&doc).iter().all(|&t| t == 1), "{:?}", threads(&doc));
    let why = &doc["performance"]["runs"][0]["whole_because"];
    assert_eq!(why, "the scenario injects faults");
}

#[test]
fn threads_are_auto_or_a_number_from_1_to_256() {
    for bad in ["0", "257", "lots"] {
        let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(["sim", "run"])
            .arg(scenario())
            .args(["--threads", bad])
            .output()
            .expect("running lockstep");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--threads {bad}: {err}");
        assert!(
            err.contains("--threads: expected auto or a number of threads from 1 to 256"),
            "--threads {bad}: {err}"
        );
    }
    // auto (the default) keeps a two-router network whole, and says nothing of it
    let s = Scratch::new("threads-auto");
    let dir = s.0.join("out");
    let err = lockstep(&[
        "sim",
        "run",
        scenario().to_str().expect("a UTF-8 path"),
        "--duration",
        "100ms",
        "-o",
        dir.to_str().expect("a UTF-8 temp path"),
    ]);
    assert!(!err.contains("one thread"), "{err}");
    let doc = summary(&dir);
    assert_eq!(threads(&doc), [1, 1]);
}
