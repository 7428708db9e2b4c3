//! `lockstep sim run` of the shaped-switch scenario, shortened to half a second of
//! virtual time: every (shaper, Ts) row is there, A's packets and the shaped flows all
//! arrive, and with an ideal host A's delay through the switch never exceeds the
//! network-calculus bound of its row — an exact comparison (integer nanoseconds
//! against the bound's exact fraction of a second), virtual time having no noise.
//! The same run twice gives byte-identical `results`. No root needed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/shaped-switch.toml")
}

/// A scratch directory of this test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("lockstep-sim-shaped-{tag}-{}", std::process::id()));
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

/// `lockstep sim run scenarios/shaped-switch.toml --duration 500ms --json -q
/// --output DIR EXTRA…`: the document printed on stdout, and stderr.
fn sim_run(dir: &Path, extra: &[&str]) -> (Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["sim", "run"])
        .arg(scenario())
        .args(["--duration", "500ms", "--json", "--output"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("running lockstep sim run");
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "sim run {extra:?} failed ({}): {stderr}",
        out.status
    );
    let doc: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not the document ({e}): {stderr}"));
    let written = std::fs::read_to_string(dir.join("summary.json")).expect("summary.json");
    let written: Value = serde_json::from_str(&written).expect("summary.json parses");
    assert_eq!(written["results"], doc["results"]);
    assert!(dir.join("report.html").is_file());
    (doc, stderr)
}

/// `"n/d"` or `"n"` (seconds) as a fraction.
fn fraction(s: &str) -> (i128, i128) {
    match s.split_once('/') {
        Some((n, d)) => (n.parse().unwrap(), d.parse().unwrap()),
        None => (s.parse().unwrap(), 1),
    }
}

/// Checks every row and returns (shaper, Ts, switch delay, bound in seconds).
fn check_rows(doc: &Value, a_frame_ns: i64) -> Vec<(String, String, i64, f64)> {
    assert_eq!(doc["kind"], "sim.shaped-switch");
    assert_eq!(doc["config"]["simulated"], true);
    let runs = doc["results"]["runs"].as_array().expect("runs");
    let labels: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "{} {}",
                r["shaper"].as_str().unwrap(),
                r["ts"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        labels,
        [
            "lockstep 10ms",
            "lockstep 1ms",
            "lockstep 100us",
            "tbf 10ms",
            "tbf 1ms",
            "tbf 100us",
            "htb 10ms",
            "htb 1ms",
            "htb 100us"
        ]
    );
    let mut out = Vec::new();
    for r in runs {
        let label = format!("{} {}", r["shaper"], r["ts"]);
        let o = &r["observed"];
        let sent = o["sent"].as_u64().unwrap();
        assert!(sent >= 490, "{label}: A sent {sent}");
        assert_eq!(o["received"].as_u64(), Some(sent), "{label}");
        assert_eq!(o["lost"], 0, "{label}");
        assert_eq!(o["port_dropped"], 0, "{label}");
        for f in o["shaped"].as_array().unwrap() {
            assert!(f["sent"].as_u64().unwrap() > 0, "{label}: {f}");
            assert_eq!(f["received"], f["sent"], "{label}: {f}");
        }
        assert_eq!(r["shaper_cpu"], "n/a (simulated)");
        // the bound covers A's packet in the switch: exact
        let switch = o["max_switch_delay_ns"].as_i64().unwrap();
        let (n, d) = fraction(r["bound_s"].as_str().unwrap());
        assert!(
            i128::from(switch) * d <= n * 1_000_000_000,
            "{label}: {switch} ns above the bound {n}/{d} s"
        );
        assert_eq!(r["within_bound"], true, "{label}");
        // the one-way delay adds A's own frame on its link
        assert_eq!(
            o["max_delay_ns"].as_i64().unwrap() - switch,
            a_frame_ns,
            "{label}"
        );
        out.push((
            r["shaper"].as_str().unwrap().to_string(),
            r["ts"].as_str().unwrap().to_string(),
            switch,
            r["bound"]["float"].as_f64().unwrap(),
        ));
    }
    out
}

#[test]
fn with_an_ideal_host_a_never_waits_longer_than_the_bound() {
    let one = Scratch::new("tbf-1");
    let two = Scratch::new("tbf-2");
    // the lab's port accounting: a frame is its IP packet + 14 bytes
    let (doc, stderr) = sim_run(&one.0, &["--framing", "tbf"]);
    assert!(stderr.contains("t_max µs"), "{stderr}");
    assert!(stderr.contains("simulated (virtual time)"), "{stderr}");
    // A's 64-byte probe: a 106-byte frame, 8.48 µs at 100 Mbit/s
    let tbf = check_rows(&doc, 8_480);
    // the same run again: the same results, byte for byte
    let (again, _) = sim_run(&two.0, &["--framing", "tbf"]);
    assert_eq!(
        serde_json::to_string(&doc["results"]).unwrap(),
        serde_json::to_string(&again["results"]).unwrap()
    );
    assert!(doc["performance"]["runs"][0]["wall_ns"].is_i64());

    // a real Ethernet port sends 24 bytes more per frame: larger bounds, still kept
    let eth = Scratch::new("ethernet");
    let (doc, _) = sim_run(&eth.0, &["--framing", "ethernet"]);
    let ethernet = check_rows(&doc, 10_400);
    for (t, e) in tbf.iter().zip(&ethernet) {
        assert!(e.3 > t.3, "{t:?} {e:?}");
    }
}

#[test]
fn frames_and_modes_do_not_apply() {
    let dir = Scratch::new("usage");
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["sim", "run"])
        .arg(scenario())
        .args(["--tf", "1ms", "-q", "--output"])
        .arg(&dir.0)
        .output()
        .expect("running lockstep sim run");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--tf applies to TDP scenarios only")
            && stderr.contains("is a shaped-switch scenario"),
        "{stderr}"
    );
}
