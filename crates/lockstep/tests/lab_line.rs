//! `lockstep lab run scenarios/line.toml` end to end (needs root and iproute2;
//! otherwise it prints a skip note and passes): sender → R1 (edge) → R2 (core) →
//! receiver, one reserved flow plus best-effort load, FIFO then TDP, at TF = 1 ms for
//! one second each.
//!
//! The checks are functional and exact, from the files the lab writes: every packet
//! the sender sent arrived exactly once; every one carries the hop records of R1 then
//! R2 (routed along its path); R1 classified every packet into the flow (forwarded in
//! its frame or counted as a slip) and R2 recognised every packet R1 sent in a frame
//! by its DSCP mark (forwarded in its frame or counted as a slip); the result files
//! and the report exist; and afterwards no namespace of this run (`ls-<run id>-*`)
//! is left, whatever other labs run on the machine. No timing
//! thresholds: slips are counted, never asserted to be zero.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use serde_json::Value;

fn scenario() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/line.toml")
}

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn u(v: &Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for p in path {
        cur = &cur[p];
    }
    cur.as_u64()
        .unwrap_or_else(|| panic!("{path:?} is not a number in {v}"))
}

/// The flow's counters of a router's JSON.
fn flow_counters(doc: &Value) -> &Value {
    &doc["counters"]["flows"][0]
}

#[test]
fn line_delivers_routes_marks_and_counts_every_packet() {
    if !common::lab::can_run("lab_line") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("lockstep-lab-line-{}", std::process::id()));
    run_and_check(&scenario(), &dir, None);
}

/// The same checks with the sender in the routers' process, and in its own: the
/// results have the same shape and are read from the same files.
#[test]
fn line_delivers_every_packet_whichever_process_the_sender_is_in() {
    if !common::lab::can_run("lab_line (senders)") {
        return;
    }
    let text = std::fs::read_to_string(scenario()).expect("scenarios/line.toml");
    for senders in ["with-routers", "own-process"] {
        let base = std::env::temp_dir().join(format!(
            "lockstep-lab-line-{senders}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&base);
        std::fs::create_dir_all(&base).expect("a scratch directory");
        let file = base.join("line.toml");
        let edited = text.replacen(
            "[scenario]\n",
            &format!("[scenario]\nsenders = \"{senders}\"\n"),
            1,
        );
        std::fs::write(&file, edited).expect("the edited scenario");
        run_and_check(&file, &base.join("out"), Some(senders));
        let _ = std::fs::remove_dir_all(&base);
    }
}

/// The same checks with the sender writing whole frames through AF_XDP (the packet
/// socket where the kernel lacks it) and the receiver taking them from a packet
/// socket (`[[node]] io`): each reports the mode it used.
#[test]
fn line_delivers_every_packet_with_hosts_on_frame_ports() {
    if !common::lab::can_run("lab_line (hosts on frame ports)") {
        return;
    }
    let text = std::fs::read_to_string(scenario()).expect("scenarios/line.toml");
    let base =
        std::env::temp_dir().join(format!("lockstep-lab-line-hostio-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("a scratch directory");
    let file = base.join("line.toml");
    let edited = text
        .replacen(
            "role = \"sender\"\n",
            "role = \"sender\"\nio = \"xdp\"\n",
            1,
        )
        .replacen(
            "role = \"receiver\"\n",
            "role = \"receiver\"\nio = \"packet\"\n",
            1,
        );
    assert_ne!(edited, text, "line.toml has a sender and a receiver");
    std::fs::write(&file, edited).expect("the edited scenario");
    let out = base.join("out");
    // each run's directory (FIFO and TDP) holds every node's result
    let modes = |run: &Path| {
        let (tx, rx) = (json(&run.join("tx.json")), json(&run.join("rx.json")));
        assert!(
            tx["io"] == "xdp" || tx["io"] == "packet",
            "{}: {}",
            run.display(),
            tx["io"]
        );
        assert_eq!(rx["io"], "packet", "{}", run.display());
    };
    run_and_check_with(&file, &out, None, &modes);
    let _ = std::fs::remove_dir_all(&base);
}

/// Runs `scenario` (line, edited or not) into `dir` and checks its results;
/// `senders`: where the scenario says the sender runs, checked from the files.
fn run_and_check(scenario: &Path, dir: &Path, senders: Option<&str>) {
    run_and_check_with(scenario, dir, senders, &|_| {});
}

/// [`run_and_check`], with `more` checking each run's directory too.
fn run_and_check_with(scenario: &Path, dir: &Path, senders: Option<&str>, more: &dyn Fn(&Path)) {
    let dir = dir.to_path_buf();
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["lab", "run"])
        .arg(scenario)
        .args([
            "--tf",
            "1ms",
            "--duration",
            "1s",
            "--json",
            "-q",
            "--output",
        ])
        .arg(&dir)
        .output()
        .expect("running lockstep lab run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "lab run failed ({}): {stderr}",
        out.status
    );

    // the document on stdout is summary.json
    let doc: Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert_eq!(doc, json(&dir.join("summary.json")));
    assert_eq!(doc["kind"], "lab.run");
    assert!(dir.join("report.html").is_file());
    assert!(dir.join("scenario.toml").is_file());
    assert!(dir.join("host.json").is_file());

    // TDP: every delivered packet is checked against its window and each one
    // outside is traced to where it lost time (how many there are is the host's
    // timing; that none is left unexplained is the tracer's behaviour)
    let reports = doc["results"]["report"]["runs"]
        .as_array()
        .expect("report runs");
    for r in reports {
        let f = &r["flows"][0];
        if r["label"] == "TDP" {
            let w = &f["window"];
            assert_eq!(
                u(w, &["inside"]) + u(w, &["outside"]),
                u(f, &["received"]),
                "{w}"
            );
            assert_eq!(u(w, &["unexplained"]), 0, "{w}");
            assert!(u(w, &["high_ns"]) > u(w, &["low_ns"]), "{w}");
        } else {
            assert!(f["window"].is_null(), "FIFO has no window: {f}");
        }
    }
    let runs = doc["results"]["runs"].as_array().expect("runs");
    let labels: Vec<&str> = runs
        .iter()
        .map(|r| r["label"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(labels, ["FIFO", "TDP"]);
    for run in runs {
        let label = run["label"].as_str().unwrap_or("");
        let run_dir = dir.join(run["dir"].as_str().unwrap_or(""));
        more(&run_dir);
        let flow = &run["flows"][0];
        assert_eq!(flow["flow"], "ctl");
        let sent = u(flow, &["sent"]);
        assert!(sent > 0, "{label}: nothing sent");
        // every packet delivered, once
        assert_eq!(u(flow, &["received"]), sent, "{label}: {flow}");
        assert_eq!(u(flow, &["lost"]), 0, "{label}");
        assert_eq!(u(flow, &["duplicates"]), 0, "{label}");
        // routed along its path: R1 then R2 in every packet's hop records
        assert_eq!(flow["hops"], serde_json::json!(["r1", "r2"]), "{label}");
        assert_eq!(u(flow, &["off_path"]), 0, "{label}");
        // the node files agree with the summary
        let tx = json(&run_dir.join("tx.json"));
        // the sender ran in the routers' process (its sockets in its namespace) or
        // in its own, as asked
        let tx_file = std::fs::read_to_string(run_dir.join("config").join("tx.toml"))
            .expect("the generated node file of tx");
        let joined = tx_file.lines().any(|l| l.starts_with("netns = "));
        let own_log = run_dir.join("logs").join("tx.err").exists();
        match senders {
            Some("with-routers") => assert!(joined && !own_log, "{label}: {tx_file}"),
            Some(_) => assert!(!joined && own_log, "{label}: {tx_file}"),
            None => assert_ne!(joined, own_log, "{label}"),
        }
        assert_eq!(tx["stop_reason"], "duration", "{label}: {tx}");
        let r1 = json(&run_dir.join("r1.json"));
        let r2 = json(&run_dir.join("r2.json"));
        let rx = json(&run_dir.join("rx.json"));
        // nothing of this run left behind (other labs may run on the machine: only
        // this run's namespaces, named ls-<run id>-<node>, are looked for)
        let r1_file = std::fs::read_to_string(run_dir.join("config").join("r1.toml"))
            .expect("the generated node file of r1");
        let ns = r1_file
            .lines()
            .find_map(|l| l.strip_prefix("netns = \""))
            .and_then(|l| l.strip_suffix("-r1\""))
            .expect("r1 opens its ports in its namespace (routers in one process)")
            .to_string();
        let left: Vec<String> = common::lab::namespaces("ls-")
            .into_iter()
            .filter(|n| n.starts_with(&format!("{ns}-")))
            .collect();
        assert!(left.is_empty(), "{label}: namespaces left: {left:?}");
        assert_eq!(u(&tx, &["counters", "sent"]), sent, "{label}");
        assert_eq!(u(&rx["flows"]["1"], &["seq", "received"]), sent, "{label}");
        let csv = std::fs::read_to_string(run_dir.join("rx-packets.csv")).expect("packets CSV");
        assert_eq!(
            csv.lines().count() as u64,
            sent + 1,
            "{label}: one row per packet"
        );
        for r in [&r1, &r2] {
            assert!(u(r, &["counters", "hops_recorded"]) >= sent, "{label}");
            assert_eq!(u(r, &["counters", "malformed"]), 0, "{label}");
        }
        let (f1, f2) = (flow_counters(&r1), flow_counters(&r2));
        if run["mode"] == "fifo" {
            assert_eq!(
                u(f1, &["forwarded"]),
                sent,
                "{label}: r1 forwarded every packet"
            );
            assert_eq!(
                u(f2, &["forwarded"]),
                sent,
                "{label}: r2 forwarded every packet"
            );
        } else {
            // R1 (edge) classified every packet: in its frame, or a counted slip
            let fwd1 = u(f1, &["forwarded"]);
            assert_eq!(
                fwd1 + u(f1, &["slipped"]) - u(f1, &["late"]),
                sent,
                "{label}: r1 {f1}"
            );
            assert_eq!(u(f1, &["policed"]), 0, "{label}");
            // R2 (core) recognised every packet R1 sent in a frame by its mark
            let fwd2 = u(f2, &["forwarded"]);
            assert!(fwd2 > 0, "{label}: r2 forwarded nothing in a frame");
            assert_eq!(
                fwd2 + u(f2, &["slipped"]) - u(f2, &["late"]),
                fwd1,
                "{label}: r2 {f2}"
            );
            assert_eq!(u(&r2, &["counters", "unknown_dscp"]), 0, "{label}");
            // and both kept their neighbour in step
            assert!(u(&r1, &["counters", "padding_sent"]) > 0, "{label}");
        }
        // the best-effort load ran
        let load = &run["loads"][0];
        assert!(
            load["received_packets"].as_u64().unwrap_or(0) > 0,
            "{label}: {load}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
