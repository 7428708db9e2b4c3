//! A sender and a receiver node over loopback (no root needed): the UDP roles, the
//! sender's packet counts, TX timestamps and frame marks, the receiver's per-flow
//! results and per-packet file, the JSON on stdout and in DIR/<name>.json.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child killed when dropped.
struct Kid(std::process::Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().port()
}

const FRAME: &str = "[node.frame]\ntf = \"2ms\"\nk = 4\n\n[[node.ports]]\nid = 1\nifname = \"lo\"\nmac = \"02:00:00:00:00:01\"\naddr = \"127.0.0.1\"\nprefix_len = 8\nrate_bps = 1000000000\n\n";

#[test]
fn sender_to_receiver_over_loopback() {
    let dir = std::env::temp_dir().join(format!("lsn-{:x}-loop", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _scratch = Scratch(dir.clone());
    let port = free_port();
    let receiver = format!(
        "[node]\nname = \"rx\"\nid = 2\nrole = \"receiver\"\n{FRAME}[live]\nbind = \"127.0.0.1:{port}\"\nsamples = true\nstrategy = \"sleep\"\n"
    );
    let sender = format!(
        "[node]\nname = \"tx\"\nid = 1\nrole = \"sender\"\n{FRAME}\
         [[node.flows]]\nid = 3\nout_port = 1\nrows = [{{ slot = 0, packets = 2, size = 300 }}, {{ slot = 2, packets = 1, size = 300 }}]\n\n\
         [[node.flows]]\nid = 4\nout_port = 1\nrows = [{{ slot = 1, packets = 1, size = 300 }}]\n\n\
         [live]\nstrategy = \"sleep\"\n\
         [[live.flows]]\nflow = 3\ndst = \"127.0.0.1:{port}\"\nsize = 192\ncount = 30\n\n\
         [[live.flows]]\nflow = 4\ndst = \"127.0.0.1:{port}\"\nsize = 64\ncount = 10\n"
    );
    std::fs::write(dir.join("rx.toml"), receiver).unwrap();
    std::fs::write(dir.join("tx.toml"), sender).unwrap();
    let bin = env!("CARGO_BIN_EXE_lockstep");
    let out = dir.join("out");
    let ready = dir.join("rx.ready");
    let mut rx = Kid(Command::new(bin)
        .args(["node", "-q", "--json", "--config"])
        .arg(dir.join("rx.toml"))
        .arg("--output")
        .arg(&out)
        .arg("--ready-file")
        .arg(&ready)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    let start = Instant::now();
    while !ready.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "receiver not ready"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let tx = Command::new(bin)
        .args(["node", "-q", "--config"])
        .arg(dir.join("tx.toml"))
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        tx.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&tx.stderr)
    );
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: kill(2) on our child.
    unsafe { libc::kill(rx.0.id() as i32, libc::SIGTERM) };
    let start = Instant::now();
    let status = loop {
        if let Some(s) = rx.0.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "receiver did not stop"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(status.code(), Some(0));
    let stdout = std::io::read_to_string(rx.0.stdout.take().unwrap()).unwrap();
    let doc: Value = serde_json::from_str(&stdout).unwrap();
    // the same document in DIR/rx.json
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("rx.json")).unwrap()).unwrap();
    assert_eq!(doc, file);
    assert_eq!(doc["name"], "rx");
    assert_eq!(doc["role"], "receiver");
    assert_eq!(doc["mode"], "tdp");
    assert_eq!(doc["stop_reason"], "signal");
    assert!(doc["wakeup"].is_null());
    assert_eq!(doc["counters"]["probes"], 40);
    let f3 = &doc["flows"]["3"];
    let f4 = &doc["flows"]["4"];
    assert_eq!(
        (f3["received"].as_u64(), f3["seq"]["lost"].as_u64()),
        (Some(30), Some(0))
    );
    assert_eq!(
        (f4["received"].as_u64(), f4["seq"]["lost"].as_u64()),
        (Some(10), Some(0))
    );
    let names: Vec<&str> = f3["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["L_I", "send path", "link sender→rx", "L_Rx"]);
    assert_eq!(f3["latency"]["count"], 30);
    assert_eq!(f3["inter_arrival"]["count"], 29);
    assert!(f3["decomposition"]["hops"].as_array().unwrap().is_empty());
    // one CSV row per packet
    let csv = std::fs::read_to_string(out.join("rx-packets.csv")).unwrap();
    assert_eq!(csv.lines().count(), 41);

    let s: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tx.json")).unwrap()).unwrap();
    assert_eq!(s["role"], "sender");
    assert_eq!(s["stop_reason"], "count");
    assert_eq!(s["mark"], true);
    assert_eq!(s["counters"]["sent"], 40);
    assert_eq!(s["counters"]["send_errors"], 0);
    let c = &s["counters"];
    // flow 3 sends 2 + 1 per cycle, flow 4 one: frames = those it sent in
    assert_eq!(
        s["wakeup"]["count"].as_u64().unwrap(),
        c["frames"].as_u64().unwrap() + c["skipped_frames"].as_u64().unwrap()
    );
    let tx_csv = std::fs::read_to_string(out.join("tx-tx.csv")).unwrap();
    let rows: Vec<&str> = tx_csv.lines().skip(1).collect();
    assert_eq!(rows.len(), 40);
    assert_eq!(
        tx_csv.lines().next(),
        Some("flow,seq,frame,t0,t_wake,t_send,tx_kernel")
    );
    // every row's t0 is the start of its frame (TF = 2 ms, epoch 0)
    for r in &rows {
        let v: Vec<i64> = r.split(',').take(4).map(|x| x.parse().unwrap()).collect();
        assert_eq!(v[3], v[2] * 2_000_000, "{r}");
        // flow 3 only in slots 0 and 2, flow 4 only in slot 1
        let slot = v[2].rem_euclid(4);
        assert!(
            if v[0] == 3 {
                slot == 0 || slot == 2
            } else {
                slot == 1
            },
            "{r}"
        );
    }
}
