//! `lockstep node --controller URL`: a sender over loopback (no root needed) takes its
//! frames from the admission controller at start, and a change of its table while it
//! runs moves its packets to the new frame from a frame boundary on.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_lockstep");

struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child killed when dropped.
struct Kid(Child);

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// TF 2 ms, k 4, the sender's port at 10 Mbit/s: 20 000 bits a frame; a 300-byte
/// packet takes 2704 bits.
const TDP: &str =
    "tf = \"2ms\"\nk = 4\n[[node]]\nname = \"tx\"\nports = [{ id = 1, rate = \"10Mbit/s\" }]\n";
const NETWORK: &str = "[[server]]\nname = \"s0\"\nrate = \"10Mbit/s\"\nlatency = \"10us\"\n";

fn post(url: &str, path: &str, body: &Value) -> (u16, Value) {
    call(url, "POST", path, Some(body))
}

fn call(url: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let a: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into();
    let u = format!("{url}{path}");
    let mut r = match (method, body) {
        ("POST", Some(b)) => a.post(&u).send_json(b).unwrap(),
        ("DELETE", _) => a.delete(&u).call().unwrap(),
        _ => a.get(&u).call().unwrap(),
    };
    let st = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    (st, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn a_sender_follows_the_controllers_table() {
    let dir = std::env::temp_dir().join(format!("lsn-ctl-{:x}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let _scratch = Scratch(dir.clone());
    std::fs::write(dir.join("tdp.toml"), TDP).unwrap();
    std::fs::write(dir.join("net.toml"), NETWORK).unwrap();

    let mut server = Kid(Command::new(BIN)
        .args(["ctl", "serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.join("ctl.db"))
        .arg("--network")
        .arg(dir.join("net.toml"))
        .arg("--tdp")
        .arg(dir.join("tdp.toml"))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap());
    let (tx, rx) = mpsc::channel();
    let stderr = server.0.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let url = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("server start");
        if let Some(i) = line.find("listening on ") {
            break line[i + 13..].trim().to_string();
        }
    };

    // A blocker fills most of frame 0, so flow 3 gets frame 1.
    let (st, v) = post(
        &url,
        "/tdp/flows",
        &json!({"name": "blk", "id": 9, "path": ["tx/1"], "packets": 7, "size": 300, "d": [0]}),
    );
    assert_eq!(st, 201, "{v}");
    let (st, v) = post(
        &url,
        "/tdp/flows",
        &json!({"name": "f3", "id": 3, "path": ["tx/1"], "packets": 2, "size": 300, "d": [0]}),
    );
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["flow"]["start"], 1);

    // The receiving end: a socket of the test.
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let port = sink.local_addr().unwrap().port();
    // The file has flow 3 without rows: the controller gives them.
    let sender = format!(
        "[node]\nname = \"tx\"\nid = 1\nrole = \"sender\"\n[node.frame]\ntf = \"2ms\"\nk = 4\n\n\
         [[node.ports]]\nid = 1\nifname = \"lo\"\nmac = \"02:00:00:00:00:01\"\naddr = \"127.0.0.1\"\nprefix_len = 8\nrate_bps = 10000000\n\n\
         [[node.flows]]\nid = 3\nout_port = 1\n\n\
         [live]\nstrategy = \"sleep\"\n\
         [[live.flows]]\nflow = 3\ndst = \"127.0.0.1:{port}\"\nsize = 192\ncount = 1000\n"
    );
    std::fs::write(dir.join("tx.toml"), sender).unwrap();
    let out = dir.join("out");
    // Not a Kid: the bounded wait below kills it if it does not end.
    let node = Command::new(BIN)
        .args(["node", "--config"])
        .arg(dir.join("tx.toml"))
        .args(["--controller", &url, "--output"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first packet arrived, move flow 3 to frame 0.
    let mut buf = [0u8; 2048];
    sink.recv(&mut buf).expect("the sender sends");
    assert_eq!(call(&url, "DELETE", "/tdp/flows/blk", None).0, 200);
    assert_eq!(call(&url, "DELETE", "/tdp/flows/f3", None).0, 200);
    let (st, v) = post(
        &url,
        "/tdp/flows",
        &json!({"name": "f3", "id": 3, "path": ["tx/1"], "packets": 2, "size": 300, "d": [0]}),
    );
    assert_eq!((st, v["flow"]["start"].clone()), (201, json!(0)));

    let output = node.wait_with_output_bounded();
    assert_eq!(output.0, Some(0), "{}", output.1);
    assert!(
        output.1.contains("scheduling table version 2 from"),
        "{}",
        output.1
    );
    assert!(
        output.1.contains("schedule version 5 from the controller"),
        "{}",
        output.1
    );

    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("tx.json")).unwrap()).unwrap();
    assert_eq!(doc["stop_reason"], "count");
    assert_eq!(doc["counters"]["sent"], 1000);
    // Rows: flow,seq,frame,...: frame 1 of the cycle first, then frame 0 only.
    let csv = std::fs::read_to_string(out.join("tx-tx.csv")).unwrap();
    let frames: Vec<i64> = csv
        .lines()
        .skip(1)
        .map(|r| r.split(',').nth(2).unwrap().parse().unwrap())
        .collect();
    assert_eq!(frames.len(), 1000);
    let slots: Vec<i64> = frames.iter().map(|f| f.rem_euclid(4)).collect();
    let switch = slots
        .iter()
        .position(|&s| s == 0)
        .expect("moved to frame 0");
    assert!(switch > 0);
    assert!(slots[..switch].iter().all(|&s| s == 1), "{slots:?}");
    assert!(slots[switch..].iter().all(|&s| s == 0), "{slots:?}");
    // Two packets in every frame it sent in.
    for w in frames.chunks(2) {
        assert_eq!(w[0], w[1], "{frames:?}");
    }
}

/// Waits (bounded) for a child and returns its exit code and stderr.
trait WaitBounded {
    fn wait_with_output_bounded(self) -> (Option<i32>, String);
}

impl WaitBounded for Child {
    fn wait_with_output_bounded(mut self) -> (Option<i32>, String) {
        let stderr = self.stderr.take();
        let reader = std::thread::spawn(move || {
            stderr
                .map(|s| std::io::read_to_string(s).unwrap_or_default())
                .unwrap_or_default()
        });
        for _ in 0..6000 {
            if let Some(st) = self.try_wait().unwrap() {
                return (st.code(), reader.join().unwrap_or_default());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.kill();
        let _ = self.wait();
        (None, reader.join().unwrap_or_default())
    }
}
