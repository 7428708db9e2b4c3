//! `lockstep lab run` of a methodology (`kind = "jitter"`) scenario, shortened to a
//! fraction of a second and two rounds (needs root; skipped otherwise). Checks
//! function, not timing: every run delivers packets, the contribution table and
//! summary.json carry every variant and the dummy program, the rounds are interleaved,
//! and no namespace of the run is left behind.

use std::path::Path;
use std::process::Command;

mod common;
use common::lab::namespaces;

use serde_json::Value;

fn can_run() -> bool {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping lab_jitter: needs root (network namespaces)");
        return false;
    }
    if lockstep_linux::cmd::find_program("ip").is_none() {
        eprintln!("skipping lab_jitter: `ip` (iproute2) is not installed");
        return false;
    }
    if std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        < 2
    {
        eprintln!("skipping lab_jitter: needs 2 CPUs");
        return false;
    }
    true
}

const SCENARIO: &str = r#"[scenario]
kind = "jitter"
name = "jitter-test"
period = "100us"
payload = "200B"
duration = "300ms"
sender_cpu = 0
sink_cpu = 1

[baseline]
dma_latency = "release"

[[variant]]
name = "blocking receive"
receive = "block"

[[variant]]
name = "irq on other CPU"
irq = "other"
"#;

#[test]
fn baseline_and_variants_run_interleaved_and_clean_up() {
    if !can_run() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("lockstep-lab-jitter-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("jitter.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let out_dir = dir.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["lab", "run"])
        .arg(&scenario)
        .args(["--repeat", "2", "--json", "-o"])
        .arg(&out_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lockstep runs");
    let tag = format!("ls-jit{}-", child.id());
    let out = child.wait_with_output().expect("lockstep finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        namespaces(&tag).is_empty(),
        "namespaces left: {:?}",
        namespaces(&tag)
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("change against the baseline"), "{stderr}");
    assert!(stderr.contains("blocking receive"), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let r = &doc["results"];
    assert_eq!(r["repeat"], 2);
    let c = r["contributions"].as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert_eq!(c[0]["source"]["name"], "blocking receive");
    assert_eq!(c[1]["source"]["name"], "irq on other CPU");
    for v in c {
        let runs = v["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0]["round"], 1);
        assert_eq!(runs[1]["round"], 2);
        for run in runs {
            assert!(run["received"].as_u64().unwrap() > 0, "{run}");
        }
        assert_eq!(v["source"]["std_ns"]["n"], 2, "{v}");
    }
    let base = r["baseline"]["runs"].as_array().unwrap();
    assert_eq!(base.len(), 2);
    assert!(base.iter().all(|b| b["received"].as_u64().unwrap() > 0));
    assert_eq!(r["dummy_program"]["runs"].as_array().unwrap().len(), 2);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(summary["results"]["contributions"], r["contributions"]);
    // report.html: a run per (round, baseline or variant)
    let html = std::fs::read_to_string(out_dir.join("report.html")).expect("report.html");
    for run in ["round 1 baseline", "round 2 baseline"] {
        assert!(html.contains(run), "{run} missing from report.html");
    }
    // interleaved: round 1 holds the baseline and every variant
    for d in [
        "baseline",
        "blocking-receive",
        "irq-on-other-cpu",
        "dummy-program",
    ] {
        assert!(out_dir.join("round-1").join(d).is_dir(), "{d}");
        assert!(out_dir.join("round-2").join(d).is_dir(), "{d}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_variant_that_changes_nothing_is_refused() {
    let dir = std::env::temp_dir().join(format!("lockstep-lab-jitter-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("bad.toml");
    std::fs::write(
        &scenario,
        SCENARIO.replace("irq = \"other\"", "irq = \"same\""),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["lab", "plan"])
        .arg(&scenario)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.toml:17:"), "{err}");
    assert!(err.contains("variant[1]"), "{err}");
    assert!(
        err.contains("\"irq on other CPU\" changes nothing"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repeat_is_refused_for_other_scenarios() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/line.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["lab", "run"])
        .arg(&file)
        .args(["--repeat", "2"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--repeat applies to jitter scenarios only;"),
        "{err}"
    );
    assert!(err.contains("line.toml is a TDP scenario"), "{err}");
}
