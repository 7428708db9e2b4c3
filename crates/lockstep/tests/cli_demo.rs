//! `lockstep demo --no-live --json`: the simulated parts and the document, without
//! root. What is checked is behaviour (the ideal host keeps every TDP flow in its
//! window, FIFO jitter well above TDP's), never a timing.

mod common;

use common::cli::lockstep;
use serde_json::Value;

#[test]
fn the_demo_without_the_live_part_prints_one_document_with_every_flow() {
    let dir = std::env::temp_dir().join(format!("lockstep-demo-{}", std::process::id()));
    let out = lockstep(&[
        "demo",
        "--no-live",
        "--json",
        "-q",
        "--duration",
        "2s",
        "--output",
        &dir.display().to_string(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let doc: Result<Value, _> = serde_json::from_slice(&out.stdout);
    let files = (
        dir.join("summary.json").is_file(),
        dir.join("simulated/report.html").is_file(),
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{stderr}");
    let doc = doc.expect("one JSON document on stdout");
    assert_eq!(files, (true, true));
    assert_eq!(doc["kind"], "demo");
    assert!(
        stderr.contains("The live run is skipped: --no-live."),
        "{stderr}"
    );
    let r = &doc["results"];
    assert!(r["scale"].as_u64().is_some_and(|s| s >= 1));
    assert_eq!(
        r["tf_ns"].as_i64(),
        Some(250_000 * r["scale"].as_i64().unwrap())
    );
    let flows = r["flows"].as_array().expect("flows");
    let names: Vec<&str> = flows.iter().filter_map(|f| f["flow"].as_str()).collect();
    assert_eq!(names, ["f1234", "f123", "f234", "f341", "f412"]);
    for f in flows {
        let (fifo, tdp) = (
            f["sim_fifo_jitter_ns"].as_i64(),
            f["sim_tdp_jitter_ns"].as_i64(),
        );
        let (fifo, tdp) = (fifo.expect("sim FIFO"), tdp.expect("sim TDP"));
        assert!(tdp < 500_000 && fifo >= 5 * tdp.max(1), "{f}");
        assert!(f["paper_fifo_ns"].as_i64().is_some() && f["paper_tdp_ns"].as_i64().is_some());
        assert!(f["host_sim_tdp_jitter_ns"].as_i64().is_some(), "{f}");
        assert!(
            f["live_tdp_jitter_ns"].is_null() && f["unexplained"].is_null(),
            "{f}"
        );
    }
}

#[test]
fn a_scale_that_is_not_offered_is_refused() {
    let out = lockstep(&["demo", "--scale", "3", "--no-live"]);
    assert_eq!(out.status.code(), Some(2));
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(
        e.contains("expected one of 1, 2, 5, 10, 20, 50, 100, 200, got \"3\""),
        "{e}"
    );
}
