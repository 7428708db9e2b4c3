//! `lockstep lab run` of the shaped-switch scenario, shortened to one `Ts` and a
//! fraction of a second (needs root; skipped otherwise). Checks function, not timing:
//! every probe of A arrives at B, the shaped flows arrive, the files are written and
//! no namespace is left behind.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn can_run() -> bool {
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping lab_shaped: needs root (network namespaces)");
        return false;
    }
    for tool in ["ip", "tc"] {
        if lockstep_linux::cmd::find_program(tool).is_none() {
            eprintln!("skipping lab_shaped: `{tool}` (iproute2) is not installed");
            return false;
        }
    }
    true
}

fn shp_namespaces() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with("ls-shp-"))
        .map(str::to_string)
        .collect()
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn shaped_switch_delivers_a_probes_and_cleans_up() {
    if !can_run() {
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
        shp_namespaces().is_empty(),
        "namespaces left: {:?}",
        shp_namespaces()
    );

    let summary = json(&out_dir.join("summary.json"));
    assert_eq!(summary["kind"], "lab.shaped-switch");
    let runs = summary["results"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["ts"], "1ms");
    // Eq. 6 at Ts = 1 ms with t_mux 0 (see the unit tests for the hand computation)
    assert!(run["bound_s"].as_str().is_some());

    let sent = json(&out_dir.join("ts-1ms/stream-a.json"))["results"]["sent"]
        .as_u64()
        .expect("sent");
    // a late sender skips slots, so `sent` is at most 300; every one it sent arrives
    assert!(sent > 0 && sent <= 300, "sent {sent}");
    assert_eq!(run["observed"]["received"].as_u64(), Some(sent));
    assert_eq!(run["observed"]["lost"], 0);
    assert!(run["observed"]["shaped_received"].as_u64().unwrap() > 0);
    let rates = run["observed"]["shaper_wire_bps"].as_array().unwrap();
    assert_eq!(rates.len(), 3, "one wire rate per shaper");
    for cpu in run["observed"]["cpu_ns"].as_array().unwrap() {
        assert!(cpu.as_i64().is_some(), "a shaper's CPU time is missing");
    }
    for f in ["sink-a", "sink-shaped", "stream-c", "stream-d", "stream-e"] {
        json(&out_dir.join(format!("ts-1ms/{f}.json")));
    }
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("1ms"), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}
