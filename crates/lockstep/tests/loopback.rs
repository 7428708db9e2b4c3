//! End-to-end runs on loopback: `probe stream` into `probe sink`, foreign and broken
//! datagrams into a sink, and `probe rr client` against `probe rr server`, each as a
//! child process. Only counts and the presence of every field are asserted, never
//! timing values (the machine is shared and noisy). Children are always killed (a
//! guard's Drop) and every wait is bounded.

use std::io::{BufRead, BufReader, Read};
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::{Child, ChildStderr, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use lockstep_core::wire::ProbeRepr;
use serde_json::Value;

/// How long any child may run before the test gives up on it.
const BOUND: Duration = Duration::from_secs(30);

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn args(list: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = list.iter().map(|s| s.to_string()).collect();
    if !is_root() {
        // mlockall may exceed RLIMIT_MEMLOCK without root; not what these tests are about.
        v.push("--no-mlock".into());
    }
    v
}

/// A free UDP port on 127.0.0.1: bind port 0, read it, release it.
fn free_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind port 0");
    s.local_addr().expect("local addr").port()
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-loopback-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

/// A child process that is killed when the guard goes out of scope.
struct Guard {
    child: Option<Child>,
    stdout: Option<mpsc::Receiver<String>>,
    stderr: Option<mpsc::Receiver<String>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn read_all_in_thread(mut r: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut s = String::new();
        let _ = r.read_to_string(&mut s);
        let _ = tx.send(s);
    });
    rx
}

/// Starts `lockstep` with `args`, capturing stdout and stderr. With `ready`, waits
/// (bounded) until a stderr line contains it, so a server is listening before the test
/// sends anything.
fn spawn(args: &[String], ready: Option<&str>) -> Guard {
    let mut child = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the lockstep binary starts");
    let stdout = child.stdout.take().map(read_all_in_thread);
    let stderr_pipe: ChildStderr = child.stderr.take().expect("stderr piped");
    let mut guard = Guard {
        child: Some(child),
        stdout,
        stderr: None,
    };
    let Some(marker) = ready else {
        guard.stderr = Some(read_all_in_thread(stderr_pipe));
        return guard;
    };
    // Read stderr lines in a thread; report the marker line, then keep the rest.
    let (line_tx, line_rx) = mpsc::channel::<String>();
    let (rest_tx, rest_rx) = mpsc::channel::<String>();
    let marker = marker.to_string();
    thread::spawn(move || {
        let mut reader = BufReader::new(stderr_pipe);
        let mut seen = String::new();
        let mut line = String::new();
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => break,
                Ok(_) => {
                    seen.push_str(&line);
                    if line.contains(&marker) {
                        let _ = line_tx.send(line.clone());
                        break;
                    }
                }
            }
        }
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        seen.push_str(&rest);
        let _ = rest_tx.send(seen);
    });
    guard.stderr = Some(rest_rx);
    if line_rx.recv_timeout(BOUND).is_err() {
        let err = guard.finish_stderr();
        panic!(
            "{args:?} never printed \"{}\"; stderr:\n{err}",
            ready.unwrap_or_default()
        );
    }
    guard
}

impl Guard {
    fn finish_stderr(&mut self) -> String {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stderr
            .take()
            .and_then(|r| r.recv_timeout(Duration::from_secs(5)).ok())
            .unwrap_or_default()
    }

    /// Waits (bounded) for the child to exit; returns (exit code, stdout, stderr).
    fn wait(&mut self) -> (Option<i32>, String, String) {
        let mut child = self.child.take().expect("child still owned");
        let started = Instant::now();
        let status = loop {
            match child.try_wait().expect("try_wait") {
                Some(s) => break Some(s),
                None if started.elapsed() > BOUND => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                None => thread::sleep(Duration::from_millis(10)),
            }
        };
        let take = |r: Option<mpsc::Receiver<String>>| {
            r.and_then(|r| r.recv_timeout(Duration::from_secs(5)).ok())
                .unwrap_or_default()
        };
        let out = take(self.stdout.take());
        let err = take(self.stderr.take());
        let status =
            status.unwrap_or_else(|| panic!("child ran longer than {BOUND:?}; stderr:\n{err}"));
        (status.code(), out, err)
    }

    /// Asks the child to stop like Ctrl-C would (SIGTERM), then waits.
    fn terminate(&mut self) -> (Option<i32>, String, String) {
        if let Some(c) = &self.child {
            // SAFETY: kill has no memory-safety preconditions; the pid is our child,
            // which has not been reaped yet.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGTERM);
            }
        }
        self.wait()
    }
}

fn json(out: &str, err: &str) -> Value {
    serde_json::from_str(out)
        .unwrap_or_else(|e| panic!("stdout is one JSON document ({e}):\n{out}\nstderr:\n{err}"))
}

fn u(v: &Value, path: &[&str]) -> u64 {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    cur.as_u64()
        .unwrap_or_else(|| panic!("{} is not an unsigned integer in {v}", path.join(".")))
}

/// Reads a CSV written by `--samples`: the header and the rows.
fn read_csv(path: &PathBuf) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).expect("samples file");
    let mut lines = text.lines();
    let header = lines
        .next()
        .expect("header")
        .split(',')
        .map(String::from)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

#[test]
fn stream_into_sink_counts_every_packet_and_fills_every_field() {
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let csv = tmp("sink-samples.csv");
    let mut sink = spawn(
        &args(&[
            "probe",
            "sink",
            "--bind",
            &bind,
            "--count",
            "1000",
            "--json",
            "--samples",
            csv.to_str().unwrap(),
        ]),
        Some("listening on"),
    );
    let mut stream = spawn(
        &args(&[
            "probe",
            "stream",
            "--to",
            &bind,
            "--count",
            "1000",
            "--rate",
            "20000pps",
            // Never skip a slot, however late a busy machine makes the sender, so that
            // frame == seq holds without any timing assumption.
            "--max-behind",
            "1000000000",
            "--json",
        ]),
        None,
    );
    let (code, out, err) = stream.wait();
    assert_eq!(code, Some(0), "stream failed:\n{err}");
    let st = json(&out, &err);
    assert_eq!(st["kind"], "probe.stream");
    let r = &st["results"];
    assert_eq!(u(r, &["sent"]), 1000);
    assert_eq!(u(r, &["l_i", "count"]), 1000);
    assert_eq!(u(r, &["send_errors", "enobufs"]), 0);
    assert_eq!(u(r, &["send_errors", "refused"]), 0);
    // Loopback hands out software TX timestamps: each packet got one.
    assert_eq!(u(r, &["tx_timestamps"]), 1000);
    assert_eq!(u(r, &["tx_timestamps_missing"]), 0);
    assert_eq!(u(r, &["l_tx_from_send", "count"]), 1000);

    let (code, out, err) = sink.wait();
    assert_eq!(code, Some(0), "sink failed:\n{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["kind"], "probe.sink");
    let r = &doc["results"];
    assert_eq!(r["stop_reason"], "count");
    assert_eq!(u(r, &["probes"]), 1000);
    assert_eq!(u(r, &["datagrams"]), 1000);
    assert_eq!(u(r, &["foreign"]), 0);
    assert_eq!(u(r, &["invalid_total"]), 0);
    let t = &r["totals"];
    assert_eq!(u(t, &["received"]), 1000);
    assert_eq!(u(t, &["unique"]), 1000);
    assert_eq!(u(t, &["lost"]), 0);
    assert_eq!(u(t, &["duplicates"]), 0);
    assert_eq!(u(t, &["reordered"]), 0);
    assert_eq!(u(t, &["loss_runs"]), 0);
    let flows = r["flows"].as_array().expect("flows");
    assert_eq!(flows.len(), 1);
    assert_eq!(u(&flows[0], &["flow"]), 0);
    assert_eq!(u(&flows[0], &["seq", "first_seq"]), 0);
    assert_eq!(u(&flows[0], &["seq", "highest_seq"]), 999);
    for (name, count) in [
        ("delta_t", 999),
        ("kernel_delta_t", 999),
        ("one_way", 1000),
        ("l_i", 1000),
        ("send_path", 1000),
        ("wire_stack", 1000),
        ("rx_path", 1000),
    ] {
        assert_eq!(u(r, &[name, "count"]), count, "{name}");
    }

    let (header, rows) = read_csv(&csv);
    assert_eq!(
        header,
        [
            "seq",
            "flow",
            "frame",
            "t0",
            "t_wake",
            "t_send",
            "kernel_rx",
            "app_rx",
            "delta_t",
            "one_way",
            "rx_path"
        ]
    );
    assert_eq!(rows.len(), 1000);
    let delta_t = header.iter().position(|h| h == "delta_t").unwrap();
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), header.len(), "row {i}: {row:?}");
        assert_eq!(row[0], i.to_string(), "rows in sequence order");
        assert_eq!(row[2], i.to_string(), "frame = seq");
        for (j, cell) in row.iter().enumerate() {
            let name = &header[j];
            if i == 0 && j == delta_t {
                // The first packet has no predecessor: no inter-arrival time.
                assert_eq!(cell, "", "row 0 delta_t");
                continue;
            }
            if name == "seq" || name == "flow" || name == "frame" {
                continue;
            }
            assert!(!cell.is_empty(), "row {i}: {name} is empty");
            let v: i64 = cell
                .parse()
                .unwrap_or_else(|_| panic!("row {i}: {name} = {cell}"));
            assert_ne!(v, 0, "row {i}: {name} is zero");
        }
    }
}

#[test]
fn foreign_and_broken_datagrams_are_counted_not_fatal() {
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let mut sink = spawn(
        &args(&["probe", "sink", "--bind", &bind, "--count", "2", "--json"]),
        Some("listening on"),
    );
    let probe = |seq: u64| {
        let repr = ProbeRepr {
            seq,
            frame: seq as i64,
            t0_ns: 1,
            t_wake_ns: 2,
            t_send_ns: 3,
            total_len: 100,
            ..ProbeRepr::default()
        };
        let mut buf = vec![0u8; 100];
        repr.emit_into(&mut buf).expect("emit");
        buf
    };
    let tx = UdpSocket::bind("127.0.0.1:0").expect("bind");
    tx.connect(&bind).expect("connect");
    tx.send(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    tx.send(&probe(0)[..40]).unwrap();
    tx.send(&probe(0)[..99]).unwrap();
    let mut corrupt = probe(0);
    corrupt[17] ^= 0x40;
    tx.send(&corrupt).unwrap();
    tx.send(&[]).unwrap();
    tx.send(&probe(0)).unwrap();
    tx.send(&probe(1)).unwrap();

    let (code, out, err) = sink.wait();
    assert_eq!(code, Some(0), "sink failed:\n{err}");
    let doc = json(&out, &err);
    let r = &doc["results"];
    assert_eq!(u(r, &["datagrams"]), 7);
    assert_eq!(u(r, &["probes"]), 2);
    assert_eq!(u(r, &["foreign"]), 1);
    // 40 bytes, 99 of 100 bytes, and the empty datagram are truncated probes.
    assert_eq!(u(r, &["invalid", "truncated"]), 3);
    assert_eq!(u(r, &["invalid", "bad_checksum"]), 1);
    assert_eq!(u(r, &["invalid_total"]), 4);
    assert_eq!(u(r, &["totals", "received"]), 2);
    assert_eq!(u(r, &["totals", "lost"]), 0);
    let warnings = doc["warnings"].as_array().expect("warnings");
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .unwrap_or_default()
            .contains("1 foreign datagrams and 4 invalid")),
        "{warnings:?}"
    );
}

fn rr_round_trip(poll: bool, count: u64) {
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let csv = tmp(&format!("rr-samples-{poll}.csv"));
    let mut server_args = vec![
        "probe",
        "rr",
        "server",
        "--bind",
        &bind,
        "--duration",
        "60s",
        "--json",
    ];
    if poll {
        server_args.push("--poll");
    }
    let mut server = spawn(&args(&server_args), Some("listening on"));
    let n = count.to_string();
    let mut client_args = vec![
        "probe",
        "rr",
        "client",
        "--to",
        &bind,
        "--count",
        &n,
        "--timeout",
        "5s",
        "--json",
        "--samples",
        csv.to_str().unwrap(),
    ];
    if poll {
        client_args.push("--poll");
    }
    let mut client = spawn(&args(&client_args), None);
    let (code, out, err) = client.wait();
    assert_eq!(code, Some(0), "client failed:\n{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["kind"], "probe.rr.client");
    let r = &doc["results"];
    assert_eq!(u(r, &["sent"]), count);
    assert_eq!(u(r, &["answered"]), count);
    assert_eq!(u(r, &["lost"]), 0);
    assert_eq!(u(r, &["late"]), 0);
    assert_eq!(u(r, &["duplicates"]), 0);
    assert_eq!(u(r, &["unexpected"]), 0);
    assert_eq!(u(r, &["send_errors", "total"]), 0);
    assert_eq!(u(r, &["tx_timestamps"]), count);
    assert_eq!(u(r, &["split_without_tx"]), 0);
    for name in ["rtt", "send_path", "turnaround", "rx_path", "network"] {
        assert_eq!(u(r, &[name, "count"]), count, "{name}");
        assert!(r[name]["percentiles_ns"]["99.9"].is_i64(), "{name}");
    }
    let (header, rows) = read_csv(&csv);
    assert_eq!(header.len(), 13);
    assert_eq!(rows.len() as u64, count);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), header.len(), "row {i}");
        assert_eq!(row[0], i.to_string(), "rows in sequence order");
        for (j, cell) in row.iter().enumerate() {
            assert!(
                cell.parse::<i64>().is_ok(),
                "row {i}: {} = \"{cell}\"",
                header[j]
            );
        }
    }

    // The server stops cleanly on SIGTERM and reports what it answered.
    let (code, out, err) = server.terminate();
    assert_eq!(code, Some(0), "server failed:\n{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["kind"], "probe.rr.server");
    let r = &doc["results"];
    assert_eq!(u(r, &["requests"]), count);
    assert_eq!(u(r, &["responses"]), count);
    assert_eq!(u(r, &["no_room"]), 0);
    assert_eq!(u(r, &["turnaround", "count"]), count);
}

#[test]
fn rr_blocking_round_trips_with_every_split() {
    rr_round_trip(false, 500);
}

#[test]
fn rr_polling_round_trips_with_every_split() {
    rr_round_trip(true, 200);
}

#[test]
fn rr_client_gates_exit_1_when_crossed_and_keep_the_results() {
    let port = free_port();
    let bind = format!("127.0.0.1:{port}");
    let mut server = spawn(
        &args(&[
            "probe",
            "rr",
            "server",
            "--bind",
            &bind,
            "--duration",
            "60s",
            "--json",
        ]),
        Some("listening on"),
    );
    let client = |gates: &[&str]| {
        let mut a = vec![
            "probe",
            "rr",
            "client",
            "--to",
            &bind,
            "--count",
            "20",
            "--timeout",
            "5s",
            "--json",
        ];
        a.extend_from_slice(gates);
        spawn(&args(&a), None).wait()
    };
    // no loss on loopback: --max-loss 0 passes
    let (code, out, err) = client(&["--max-loss", "0"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(json(&out, &err)["check_failed"], false);
    // no round trip takes under a nanosecond: the gate is crossed, exit 1, the
    // document still printed and marked
    let (code, out, err) = client(&["--fail-above", "p50=1ns", "--max-loss", "0"]);
    assert_eq!(code, Some(1), "{err}");
    let doc = json(&out, &err);
    assert_eq!(doc["check_failed"], true);
    assert_eq!(u(&doc["results"], &["answered"]), 20);
    assert!(
        err.contains("RTT p50") && err.contains("--fail-above p50=1ns"),
        "{err}"
    );
    let _ = server.terminate();
}
