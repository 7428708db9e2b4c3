//! `lockstep lab run` of an rt-service scenario, shortened to a second per
//! configuration (needs root; skipped otherwise; the bulk load only when iperf3 is
//! installed). Checks function, not timing: every configuration answers requests,
//! the table, summary.json and report.html carry the four rows, no namespace is left
//! behind.

use std::process::Command;

mod common;
use common::lab::namespaces;

use serde_json::Value;

#[test]
fn four_configurations_answer_and_clean_up() {
    if unsafe { libc::geteuid() } != 0
        || lockstep_linux::cmd::find_program("ip").is_none()
        || std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
            < 2
    {
        eprintln!("skipping lab_rtservice: needs root, iproute2 and 2 CPUs");
        return;
    }
    let bulk = if lockstep_linux::cmd::find_program("iperf3").is_some() {
        1
    } else {
        eprintln!("lab_rtservice: iperf3 missing, running without the bulk load");
        0
    };
    let dir = std::env::temp_dir().join(format!("lockstep-lab-rts-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = dir.join("rt.toml");
    std::fs::write(
        &scenario,
        format!(
            "[scenario]\nkind = \"rt-service\"\nname = \"rt-test\"\nduration = \"1s\"\nbulk_streams = {bulk}\n"
        ),
    )
    .unwrap();
    let out_dir = dir.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["lab", "run"])
        .arg(&scenario)
        .args(["--json", "-o"])
        .arg(&out_dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("lockstep runs");
    let tag = format!("ls-rts{}-", child.id());
    let out = child.wait_with_output().expect("lockstep finishes");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        namespaces(&tag).is_empty(),
        "namespaces left: {:?}",
        namespaces(&tag)
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("garcia Table 2"), "{stderr}");
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let rows = doc["results"]["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["config"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "untuned",
            "rt-priority",
            "dedicated-cpu",
            "separated-rt-path"
        ]
    );
    for r in rows {
        assert!(r["answered"].as_u64().unwrap() > 0, "{r}");
        if bulk > 0 {
            assert!(r["bulk_bps"].as_f64().unwrap() > 0.0, "{r}");
        }
    }
    assert!(out_dir.join("summary.json").is_file());
    // report.html: one run per configuration
    let html = std::fs::read_to_string(out_dir.join("report.html")).expect("report.html");
    for c in [
        "untuned",
        "rt-priority",
        "dedicated-cpu",
        "separated-rt-path",
    ] {
        assert!(html.contains(c), "{c} missing from report.html");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
