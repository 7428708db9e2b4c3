//! `lockstep lab run` of the shaped-switch scenario, shortened to one `Ts` and a
//! fraction of a second (needs root; skipped otherwise). Checks function, not timing:
//! with every shaper (lockstep's, tbf, htb) every probe of A arrives at B, the shaped
//! flows arrive, the kernel qdiscs are set up and counted, the files are written and
//! no namespace is left behind.

use std::path::Path;
use std::process::Command;

mod common;

use serde_json::Value;

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_shaper_delivers_a_probes_and_cleans_up() {
    if !common::lab::can_run("lab_shaped") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("lockstep-lab-shaped-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/shaped-switch.toml");
    let text = std::fs::read_to_string(file)
        .unwrap()
        .replace("ts = [\"10ms\", \"1ms\", \"100us\"]", "ts = [\"1ms\"]");
    let scenario = dir.join("shaped.toml");
    std::fs::write(&scenario, text).unwrap();
    let out_dir = dir.join("out");
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["lab", "run"])
        .arg(&scenario)
        .args(["--duration", "300ms", "-q", "-o"])
        .arg(&out_dir)
        .output()
        .expect("running lockstep lab run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "lab run failed: {stderr}");
    assert!(
        common::lab::namespaces("ls-shp-").is_empty(),
        "namespaces left: {:?}",
        common::lab::namespaces("ls-shp-")
    );

    let summary = json(&out_dir.join("summary.json"));
    assert_eq!(summary["kind"], "lab.shaped-switch");
    let runs = summary["results"]["runs"].as_array().expect("runs");
    // the default: every shaper, one run each at the one Ts
    let shapers: Vec<&str> = runs.iter().filter_map(|r| r["shaper"].as_str()).collect();
    assert_eq!(shapers, vec!["lockstep", "tbf", "htb"]);
    for run in runs {
        let shaper = run["shaper"].as_str().unwrap();
        assert_eq!(run["ts"], "1ms");
        // Eq. 6 at Ts = 1 ms with t_mux 0 (see the unit tests for the hand computation)
        assert!(run["bound_s"].as_str().is_some(), "{shaper}: no bound");
        assert!(
            run["bound"]["float"].as_f64().is_some(),
            "{shaper}: no bound"
        );
        let dir = out_dir.join(format!("{shaper}-ts-1ms"));
        let sent = json(&dir.join("stream-a.json"))["results"]["sent"]
            .as_u64()
            .expect("sent");
        // a late sender skips slots, so `sent` is at most 300; every one it sent arrives
        assert!(sent > 0 && sent <= 300, "{shaper}: sent {sent}");
        let o = &run["observed"];
        assert_eq!(o["received"].as_u64(), Some(sent), "{shaper}: A's probes");
        assert_eq!(o["lost"], 0, "{shaper}");
        assert!(
            o["shaped_received"].as_u64().unwrap() > 0,
            "{shaper}: no shaped packet arrived"
        );
        let rates = o["shaper_wire_bps"].as_array().unwrap();
        assert_eq!(rates.len(), 3, "{shaper}: one wire rate per sender");
        assert!(
            rates.iter().all(|r| r.as_f64().is_some()),
            "{shaper}: {rates:?}"
        );
        let cpu = o["cpu_ns"].as_array().unwrap();
        assert_eq!(cpu.len(), 3, "{shaper}");
        for c in cpu {
            assert!(
                c.as_i64().is_some(),
                "{shaper}: a sender's CPU time is missing"
            );
        }
        assert!(run["sender_cpu_total_ns"].as_i64().is_some(), "{shaper}");
        assert!(o["machine"]["softirq_ns"].as_i64().is_some(), "{shaper}");
        assert!(run["machine_idle_share"].as_f64().is_some(), "{shaper}");
        let qdisc = o["qdisc"].as_array().unwrap();
        let commands = o["kernel_commands"].as_array().unwrap();
        if shaper == "lockstep" {
            assert!(qdisc.is_empty() && commands.is_empty(), "{shaper}");
        } else {
            // the qdisc was set up on C, D and E from lockstep export's translation,
            // carried their traffic, held it back for tokens and dropped nothing
            assert!(
                commands.iter().all(|c| c
                    .as_str()
                    .is_some_and(|c| c.starts_with("tc -n ls-shp-") && c.contains(shaper))),
                "{commands:?}"
            );
            assert_eq!(qdisc.len(), 3, "{shaper}");
            for q in qdisc {
                assert!(q["sent_packets"].as_u64().unwrap() > 0, "{shaper}: {q}");
                assert!(q["overlimits"].as_u64().unwrap() > 0, "{shaper}: {q}");
                assert_eq!(q["dropped"], 0, "{shaper}: {q}");
            }
        }
        for f in ["sink-a", "sink-shaped", "stream-c", "stream-d", "stream-e"] {
            json(&dir.join(format!("{f}.json")));
        }
    }
    let html = std::fs::read_to_string(out_dir.join("report.html")).expect("report.html");
    for label in ["lockstep Ts=1ms", "tbf Ts=1ms", "htb Ts=1ms"] {
        assert!(html.contains(label), "report.html lacks {label}");
    }
    let table = String::from_utf8_lossy(&out.stdout);
    for shaper in ["lockstep", "tbf", "htb"] {
        assert!(
            table
                .lines()
                .any(|l| l.trim_start().starts_with(shaper) && l.contains("1ms")),
            "no {shaper} row: {table}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
