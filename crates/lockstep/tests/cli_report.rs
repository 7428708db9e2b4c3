//! `lockstep report DIR` and `lockstep compare A B`, end to end through the binary
//! (no root needed):
//! - a simulated run's report.html, deleted, is made again byte for byte from its
//!   directory, and the summary it printed but for the wall-clock lines; `--output
//!   FILE` writes the page elsewhere, `--json` prints the document;
//! - a probe's saved result (`probe timer --output`) gets a page and its summary;
//!   two timer runs compare their wake-up latency with the ratios of their summaries;
//! - two simulations of line.toml (an ideal host and one that acts 20 µs late)
//!   compared: every ratio is B/A of the figures in the two summaries, the better
//!   side the lower one; the page is self-contained; a flow only one side has is
//!   named;
//! - a directory without summary.json, a summary.json that is not JSON or has a
//!   field of the wrong type, and two runs of different kinds are refused with exit
//!   status 2 and a message naming the file, the field or the kinds.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::cli::{lockstep, scenario};

/// A fresh directory of this test's own.
fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("lockstep-cli-report-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Simulates line.toml into `out`; what it printed.
fn simulate(out: &Path, extra: &[&str]) -> String {
    let line = scenario("line.toml");
    let o = out.display().to_string();
    let mut args = vec!["sim", "run", &line, "-D", "200ms", "-q", "-o", &o];
    args.extend_from_slice(extra);
    let r = lockstep(&args);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    String::from_utf8_lossy(&r.stdout).into_owned()
}

/// A run's printed summary without what a re-rendering cannot know: the wall-clock
/// lines and where the files are.
fn content(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.contains(" wall") && !l.starts_with("results:") && !l.starts_with("report:"))
        .collect()
}

fn timer(out: &Path) {
    ok(&[
        "probe",
        "timer",
        "--interval",
        "1ms",
        "--duration",
        "50ms",
        "--no-mlock",
        "--output",
        &s(out),
        "-q",
    ]);
}

fn ok(args: &[&str]) -> std::process::Output {
    let r = lockstep(args);
    assert!(
        r.status.success(),
        "lockstep {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&r.stderr)
    );
    r
}

/// `lockstep ARGS` refused with exit status 2; its message.
fn refused(args: &[&str]) -> String {
    let r = lockstep(args);
    let err = String::from_utf8_lossy(&r.stderr).into_owned();
    assert_eq!(
        r.status.code(),
        Some(2),
        "lockstep {}: {err}",
        args.join(" ")
    );
    err
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn a_simulated_runs_report_is_made_again_byte_for_byte() {
    let d = dir("sim");
    let printed = simulate(&d, &[]);
    let page = d.join("report.html");
    let original = std::fs::read(&page).unwrap();
    std::fs::remove_file(&page).unwrap();
    let r = ok(&["report", &s(&d)]);
    assert_eq!(
        std::fs::read(&page).unwrap(),
        original,
        "report.html differs"
    );
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("TDP (TF 250us):"), "{text}");
    assert!(text.contains("in window"), "{text}");
    assert_eq!(content(&text), content(&printed), "the summary differs");

    let elsewhere = d.join("again.html");
    let r = ok(&["report", &s(&d), "--json", "--output", &s(&elsewhere)]);
    assert_eq!(std::fs::read(&elsewhere).unwrap(), original);
    let printed: Value = serde_json::from_slice(&r.stdout).expect("--json prints the document");
    assert_eq!(printed, read_json(&d.join("summary.json")));
    assert!(String::from_utf8_lossy(&r.stderr).contains("TDP (TF 250us):"));
}

#[test]
fn a_probes_saved_result_gets_a_page_and_its_summary() {
    let d = dir("timer");
    let o = s(&d);
    timer(&d);
    let r = ok(&["report", &o]);
    let text = String::from_utf8_lossy(&r.stdout);
    assert!(text.contains("wake-up latency"), "{text}");
    assert!(text.contains("overruns:"), "{text}");
    let page = std::fs::read_to_string(d.join("report.html")).unwrap();
    assert!(page.contains("lockstep probe timer"));
    assert!(page.contains("<svg") && page.contains("share of samples slower"));
    assert!(page.contains("overruns") && page.contains("stopped by"));
    assert!(!page.contains("<script"));
}

/// The figures of `flow` in run `label` of a saved document's report.
fn latency<'a>(doc: &'a Value, label: &str, flow: &str) -> &'a Value {
    let run = doc["results"]["report"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["label"] == label)
        .unwrap();
    let f = run["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == flow)
        .unwrap();
    &f["latency"]
}

fn metric<'a>(cmp: &'a Value, run: &str, flow: &str, name: &str) -> &'a Value {
    let r = cmp["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["run"] == run)
        .unwrap();
    let f = r["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["flow"] == flow)
        .unwrap();
    f["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == name)
        .unwrap_or_else(|| panic!("no {name} in {f}"))
}

#[test]
fn two_simulations_compare_figure_by_figure() {
    let (a, b) = (dir("cmp-a"), dir("cmp-b"));
    simulate(&a, &[]);
    simulate(&b, &["--host", "fixed:20us"]);
    let html = a.join("compare.html");
    let r = ok(&["compare", &s(&a), &s(&b), "--json", "--html", &s(&html)]);
    let cmp: Value = serde_json::from_slice(&r.stdout).expect("--json prints JSON");
    assert_eq!(cmp["kind"], "compare");
    assert_eq!(cmp["a"]["kind"], "sim.run");
    assert_eq!(cmp["b"]["dir"], s(&b));
    assert_eq!(cmp["only_in_a"], Value::Array(vec![]));
    let (da, db) = (
        read_json(&a.join("summary.json")),
        read_json(&b.join("summary.json")),
    );
    for run in ["FIFO", "TDP"] {
        let (la, lb) = (latency(&da, run, "ctl"), latency(&db, run, "ctl"));
        for (name, va, vb) in [
            (
                "p99",
                &la["percentiles_ns"]["99"],
                &lb["percentiles_ns"]["99"],
            ),
            ("max", &la["max_ns"], &lb["max_ns"]),
            ("min", &la["min_ns"], &lb["min_ns"]),
        ] {
            let m = metric(&cmp, run, "ctl", name);
            let (x, y) = (va.as_f64().unwrap(), vb.as_f64().unwrap());
            assert_eq!(m["a"].as_f64(), Some(x), "{run} {name}");
            assert_eq!(m["b"].as_f64(), Some(y), "{run} {name}");
            assert_eq!(m["unit"], "ns");
            let ratio = m["ratio"].as_f64().unwrap();
            assert!(
                (ratio - y / x).abs() < 1e-9,
                "{run} {name}: {ratio} vs {y}/{x}"
            );
            let better = if x < y {
                "a"
            } else if y < x {
                "b"
            } else {
                "same"
            };
            assert_eq!(m["better"], better, "{run} {name}");
        }
        let loss = metric(&cmp, run, "ctl", "loss");
        assert_eq!(
            (&loss["unit"], &loss["better"]),
            (&"share".into(), &"same".into())
        );
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("class=\"better\""));
    for outside in ["<script", "src=\"http", "href=\"http", "url("] {
        assert!(!page.contains(outside), "the page has {outside}");
    }
    let text = String::from_utf8_lossy(&ok(&["compare", &s(&a), &s(&b)]).stdout).into_owned();
    assert!(text.contains("B/A") && text.contains("TDP:"), "{text}");
}

#[test]
fn two_timer_probes_compare_their_wake_up_latency() {
    let (a, b) = (dir("timer-a"), dir("timer-b"));
    timer(&a);
    timer(&b);
    let r = ok(&["compare", &s(&a), &s(&b), "--json"]);
    let cmp: Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(cmp["a"]["kind"], "probe.timer");
    let (da, db) = (
        read_json(&a.join("summary.json")),
        read_json(&b.join("summary.json")),
    );
    let (la, lb) = (&da["results"]["latency"], &db["results"]["latency"]);
    for (name, key) in [("p50", "50"), ("p99", "99"), ("p99.9", "99.9")] {
        let m = metric(&cmp, "probe timer", "wake-up latency", name);
        let x = la["percentiles_ns"][key].as_f64().unwrap();
        let y = lb["percentiles_ns"][key].as_f64().unwrap();
        assert_eq!((m["a"].as_f64(), m["b"].as_f64()), (Some(x), Some(y)));
        assert!(
            (m["ratio"].as_f64().unwrap() - y / x).abs() < 1e-9,
            "{name}"
        );
    }
    let mean = metric(&cmp, "probe timer", "wake-up latency", "mean");
    assert_eq!(mean["a"].as_f64(), la["mean_ns"].as_f64());
    let metrics = cmp["runs"][0]["flows"][0]["metrics"].as_array().unwrap();
    assert!(
        metrics.iter().all(|m| m["metric"] != "slips"),
        "a probe has no slips"
    );
}

#[test]
fn a_flow_only_one_run_has_is_named() {
    let (a, b) = (dir("only-a"), dir("only-b"));
    simulate(&a, &[]);
    std::fs::create_dir_all(&b).unwrap();
    let mut doc = read_json(&a.join("summary.json"));
    doc["results"]["report"]["runs"][1]["flows"][0]["name"] = "other".into();
    std::fs::write(b.join("summary.json"), doc.to_string()).unwrap();
    let r = ok(&["compare", &s(&a), &s(&b), "--json"]);
    let cmp: Value = serde_json::from_slice(&r.stdout).unwrap();
    let one = |run: &str, flow: &str| serde_json::json!([{"run": run, "flow": flow}]);
    assert_eq!(cmp["only_in_a"], one("TDP", "ctl"));
    assert_eq!(cmp["only_in_b"], one("TDP", "other"));
    let text = String::from_utf8_lossy(&ok(&["compare", &s(&a), &s(&b)]).stdout).into_owned();
    assert!(text.contains("only in A: TDP flow ctl"), "{text}");
}

#[test]
fn what_is_not_a_saved_run_is_refused_by_name() {
    let d = dir("bad");
    let err = refused(&["report", &s(&d)]);
    assert!(err.contains("no such directory"), "{err}");
    std::fs::create_dir_all(&d).unwrap();
    let err = refused(&["report", &s(&d)]);
    assert!(
        err.contains("summary.json") && err.contains("not a saved run"),
        "{err}"
    );

    std::fs::write(d.join("summary.json"), "{\"kind\": \"sim.run\", ").unwrap();
    let err = refused(&["report", &s(&d)]);
    assert!(err.contains("not JSON"), "{err}");

    let wrong = r#"{"kind": "sim.run", "results": {"report": {"runs": [{"label": "TDP", "flows": [{"name": "f", "sent": "many"}]}]}}}"#;
    std::fs::write(d.join("summary.json"), wrong).unwrap();
    let err = refused(&["report", &s(&d)]);
    assert!(
        err.contains("`results.report.runs[0].flows[0].sent`"),
        "{err}"
    );
    assert!(!d.join("report.html").exists(), "nothing written");

    std::fs::write(
        d.join("summary.json"),
        r#"{"kind": "sim.run", "results": {}}"#,
    )
    .unwrap();
    let err = refused(&["report", &s(&d)]);
    assert!(err.contains("missing field `report`"), "{err}");
}

#[test]
fn runs_of_different_kinds_are_not_compared() {
    let (sim, probe) = (dir("kind-sim"), dir("kind-probe"));
    simulate(&sim, &[]);
    timer(&probe);
    let err = refused(&["compare", &s(&sim), &s(&probe)]);
    assert!(
        err.contains("sim.run") && err.contains("probe.timer"),
        "{err}"
    );
    assert!(err.contains("cannot be compared"), "{err}");
}
