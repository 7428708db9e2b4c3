//! Every wait gives way to Ctrl-C / SIGTERM: a run asked to stop prints what it has
//! and exits instead of finishing a long sleep; `--duration` ends a run even when its
//! first wake-up would come later.
//!
//! One test per command: started, left until it is busy (a line it prints on stderr,
//! or a short while), sent SIGTERM; it must exit before a generous guard against a
//! hang ([`GUARD`]) with its documented status — 0 for what runs until stopped
//! (probes), 3 for a command whose work was cut short — and have printed what it
//! had. How long each stop took is printed, never asserted beyond the guard.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn start(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the lockstep binary runs")
}

/// Sends SIGINT after `after`, then waits (bounded) for the exit; the output and
/// how long the stop took.
fn interrupt(mut child: Child, after: Duration) -> (Option<i32>, String, Duration) {
    std::thread::sleep(after);
    // SAFETY: kill(2) on our own child's PID.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0);
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("still running 20 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = t0.elapsed();
    let out = child.wait_with_output().expect("output");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text, took)
}

/// Starts `args` and interrupts it once it runs: a SIGINT that arrives before the
/// handler is installed ends the process by signal, so that is retried with a later
/// signal (bounded).
fn run_and_interrupt(args: &[&str]) -> (Option<i32>, String, Duration) {
    let mut last = None;
    for after_ms in [400, 1500, 4000] {
        let r = interrupt(start(args), Duration::from_millis(after_ms));
        if r.0.is_some() {
            return r;
        }
        last = Some(r);
    }
    last.expect("tried")
}

#[test]
fn ctrl_c_ends_a_long_timer_wait_with_the_results() {
    let (code, text, took) = run_and_interrupt(&[
        "probe",
        "timer",
        "--interval",
        "10s",
        "-D",
        "60s",
        "--no-mlock",
    ]);
    eprintln!("stopped {took:?} after SIGINT");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("stopped by: signal"), "{text}");
}

/// CLOCK_MONOTONIC now plus `ahead`, in ns: a start far off, within the 7 days
/// a duration may span.
fn monotonic_in(ahead: Duration) -> String {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0);
    let now = ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128;
    (now + ahead.as_nanos() as i128).to_string()
}

#[test]
fn ctrl_c_ends_a_wait_for_a_far_start() {
    let start = monotonic_in(Duration::from_secs(86_400));
    let (code, text, took) = run_and_interrupt(&[
        "probe",
        "stream",
        "--to",
        "127.0.0.1:9",
        "--rate",
        "100pps",
        "--start-at-ns",
        &start,
        "-D",
        "1s",
        "--no-mlock",
    ]);
    eprintln!("stopped {took:?} after SIGINT");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("sent: 0"), "{text}");
}

#[test]
fn the_duration_ends_a_run_before_its_first_wake_up() {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args([
            "probe",
            "timer",
            "--interval",
            "10s",
            "-D",
            "0.3s",
            "--no-mlock",
        ])
        .output()
        .expect("runs");
    eprintln!("took {:?}", t0.elapsed());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(text.contains("stopped by: duration"), "{text}");
}

/// Longest a stopped command may take to exit before the test calls it hung.
const GUARD: Duration = Duration::from_secs(5);
/// Longest a command may take to get busy (a debug build planning a network).
const BUSY_CAP: Duration = Duration::from_secs(180);

/// When to send the signal.
enum When<'a> {
    /// Once a line of standard error contains this.
    Line(&'a str),
    /// After this long.
    After(Duration),
}

/// How a stopped command ended.
struct Stopped {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Starts `lockstep ARGS`, sends SIGTERM when `when` says, and waits for the exit
/// (at most [`GUARD`]; a command still running then is killed and the test fails).
fn stop_when(args: &[&str], when: When<'_>) -> Stopped {
    let mut child = start(args);
    let mut out = child.stdout.take().expect("stdout piped");
    let err = child.stderr.take().expect("stderr piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let (tx, rx) = mpsc::channel();
    let lines = std::thread::spawn(move || {
        let mut all = String::new();
        for l in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(l.clone());
            all.push_str(&l);
            all.push('\n');
        }
        all
    });
    match when {
        When::Line(marker) => {
            let t0 = Instant::now();
            loop {
                match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(l) if l.contains(marker) => break,
                    Ok(_) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        let _ = child.wait();
                        panic!(
                            "{args:?} ended before printing {marker:?}: {}",
                            lines.join().unwrap_or_default()
                        );
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
                if t0.elapsed() > BUSY_CAP {
                    let _ = child.kill();
                    panic!("{args:?} did not print {marker:?} within {BUSY_CAP:?}");
                }
            }
        }
        When::After(d) => std::thread::sleep(d),
    }
    // SAFETY: kill(2) on our own child's PID.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let t0 = Instant::now();
    let code = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st.code();
        }
        if t0.elapsed() > GUARD {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{args:?} still running {GUARD:?} after SIGTERM: {}",
                lines.join().unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = t0.elapsed();
    let stopped = Stopped {
        code,
        stdout: reader.join().unwrap_or_default(),
        stderr: lines.join().unwrap_or_default(),
    };
    eprintln!("{args:?}: exit {:?} {took:?} after SIGTERM", stopped.code);
    stopped
}

/// A fresh directory under the system's temporary one, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("lockstep-sig-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch directory");
        Scratch(p)
    }
    fn path(&self, f: &str) -> PathBuf {
        self.0.join(f)
    }
    fn arg(&self, f: &str) -> String {
        self.path(f).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn json(path: &std::path::Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A free UDP port on loopback (bound and released: good enough for a test).
fn free_udp_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("a UDP port");
    s.local_addr().expect("its address").port()
}

#[test]
fn sigterm_ends_probe_noise_with_its_table() {
    let s = stop_when(
        &["probe", "noise", "-D", "60s", "--no-mlock"],
        When::After(Duration::from_millis(1500)),
    );
    assert_eq!(s.code, Some(0), "{}", s.stderr);
    assert!(s.stdout.contains("reads:"), "{}", s.stdout);
}

#[test]
fn sigterm_ends_a_probe_sink_waiting_for_packets() {
    let port = free_udp_port().to_string();
    let bind = format!("127.0.0.1:{port}");
    let s = stop_when(
        &["probe", "sink", "--bind", &bind, "-D", "60s", "--no-mlock"],
        When::Line("listening on"),
    );
    assert_eq!(s.code, Some(0), "{}", s.stderr);
    assert!(
        s.stdout.contains("no probe packet arrived"),
        "{}{}",
        s.stdout,
        s.stderr
    );
}

#[test]
fn sigterm_ends_probe_rr_server_and_client_with_their_counts() {
    let bind = format!("127.0.0.1:{}", free_udp_port());
    let mut server = start(&["probe", "rr", "server", "--bind", &bind, "--no-mlock"]);
    std::thread::sleep(Duration::from_millis(500));
    let c = stop_when(
        &[
            "probe",
            "rr",
            "client",
            "--to",
            &bind,
            "-D",
            "60s",
            "--no-mlock",
        ],
        When::Line("requests to"),
    );
    assert_eq!(c.code, Some(0), "{}", c.stderr);
    assert!(c.stdout.contains("answered:"), "{}", c.stdout);
    // the server: SIGTERM, exit 0 with its table (bounded like the rest)
    // SAFETY: kill(2) on our own child's PID.
    assert_eq!(unsafe { libc::kill(server.id() as i32, libc::SIGTERM) }, 0);
    let t0 = Instant::now();
    let code = loop {
        if let Some(st) = server.try_wait().expect("wait") {
            break st.code();
        }
        if t0.elapsed() > GUARD {
            let _ = server.kill();
            panic!("rr server still running {GUARD:?} after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    eprintln!("rr server: exit {code:?} {:?} after SIGTERM", t0.elapsed());
    assert_eq!(code, Some(0));
    let mut out = String::new();
    let _ = server
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out);
    assert!(out.contains("turnaround"), "{out}");
}

/// Seven FIFO servers in a row and 60 flows over most of them: TFA, SFA and PMOO
/// take a moment, the LP of each flow (a program of 127 departures) far longer.
fn lp_network() -> String {
    let mut s = String::new();
    for k in 0..7 {
        s.push_str(&format!(
            "[[server]]\nname = \"s{k}\"\nrate = \"1Gbit/s\"\nlatency = \"10us\"\n\n"
        ));
    }
    for f in 0..60 {
        let path: Vec<String> = (f % 3..7).map(|k| format!("\"s{k}\"")).collect();
        s.push_str(&format!(
            "[[flow]]\nname = \"f{f}\"\npath = [{}]\nrate = \"1Mbit/s\"\nburst = \"1500B\"\n\n",
            path.join(", ")
        ));
    }
    s
}

#[test]
fn sigterm_during_calc_lp_prints_the_bounds_found_so_far() {
    let dir = Scratch::new("calc");
    std::fs::write(dir.path("net.toml"), lp_network()).expect("network file");
    let s = stop_when(
        &["calc", "--method", "all", &dir.arg("net.toml")],
        When::After(Duration::from_secs(3)),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    // the methods that finished are printed (the best bound starred), the LP's
    // flows not reached are "-", and both the table and stderr say so
    assert!(
        s.stdout.contains("flows: end-to-end delay bounds"),
        "{}",
        s.stdout
    );
    assert!(s.stdout.contains('*'), "{}", s.stdout);
    assert!(s.stdout.contains("interrupted: LP: "), "{}", s.stdout);
    assert!(
        s.stderr
            .contains("lockstep: interrupted by SIGINT/SIGTERM: ")
            && s.stderr.contains("LP: "),
        "{}",
        s.stderr
    );
}

#[test]
fn sigterm_during_a_long_sim_run_writes_the_partial_results() {
    let dir = Scratch::new("sim");
    let s = stop_when(
        &[
            "sim",
            "run",
            &common::cli::scenario("mesh4.toml"),
            "-D",
            "600s",
            "--output",
            &dir.arg("out"),
        ],
        // a progress line: the first run is under way
        When::Line("simulated, wall"),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    assert!(
        s.stdout
            .contains("interrupted by SIGINT/SIGTERM: FIFO stopped at "),
        "{}",
        s.stdout
    );
    assert!(s.stdout.contains("not simulated: TDP"), "{}", s.stdout);
    let doc = json(&dir.path("out").join("summary.json"));
    let runs = doc["results"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "only FIFO ran");
    assert!(runs[0]["interrupted_at"].is_string(), "{}", runs[0]);
    assert!(doc["results"]["interrupted"].is_string());
    assert!(dir.path("out").join("report.html").is_file());
}

#[test]
fn sigterm_during_sim_gen_writes_no_half_scenario() {
    let dir = Scratch::new("gen");
    let s = stop_when(
        &[
            "sim",
            "gen",
            "--topology",
            "grid",
            "--routers",
            "10000",
            "--flows",
            "100000",
            "--output",
            &dir.arg("big.toml"),
        ],
        When::After(Duration::from_secs(1)),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    assert!(
        s.stderr
            .contains("while generating the network: nothing written"),
        "{}",
        s.stderr
    );
    assert!(!dir.path("big.toml").exists());
}

#[test]
fn sigterm_during_export_of_a_big_plan_prints_nothing() {
    let dir = Scratch::new("export");
    // 300 ports of 4096 frames: seconds of work in a debug build
    let rows: Vec<String> = (0..4096).step_by(2).map(|f| f.to_string()).collect();
    let mut plan = String::new();
    for i in 0..300 {
        plan.push_str(&format!(
            "[[port]]\ndev = \"vt{i}\"\ntf = \"250us\"\nk = 4096\nrows = [{}]\n\n",
            rows.join(",")
        ));
    }
    std::fs::write(dir.path("plan.toml"), plan).expect("plan file");
    let s = stop_when(
        &["export", &dir.arg("plan.toml")],
        When::After(Duration::from_secs(1)),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    assert!(s.stdout.is_empty(), "half a script printed");
    assert!(s.stderr.contains("nothing printed"), "{}", s.stderr);
}

#[test]
fn sigterm_ends_a_ctl_client_waiting_for_a_silent_controller() {
    // a controller that accepts the connection and never answers
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("a TCP port");
    let url = format!("http://{}", silent.local_addr().expect("address"));
    let held = std::thread::spawn(move || silent.accept().map(|(c, _)| c));
    let s = stop_when(
        &["ctl", "list", "--server", &url],
        When::After(Duration::from_secs(1)),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    assert!(
        s.stderr.contains("while waiting for the controller")
            && s.stderr.contains("nothing was changed"),
        "{}",
        s.stderr
    );
    drop(held);
}

#[test]
fn sigterm_ends_host_hold_latency_and_its_command() {
    if !std::path::Path::new("/dev/cpu_dma_latency").exists() || unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping: needs root and /dev/cpu_dma_latency");
        return;
    }
    let s = stop_when(
        &["host", "hold-latency", "--", "sleep", "30"],
        When::Line("held at"),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    assert!(
        s.stderr.contains("sleep was asked to stop")
            && s.stderr.contains("/dev/cpu_dma_latency released"),
        "{}",
        s.stderr
    );
}

#[test]
fn sigterm_during_the_demo_ends_it_with_what_ran() {
    let dir = Scratch::new("demo");
    let s = stop_when(
        &["demo", "--no-live", "--output", &dir.arg("demo")],
        // the simulation on an ideal host is under way
        When::Line("sim mesh4 [1/2 FIFO]"),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    assert!(
        s.stderr.contains("the demo's simulation on an ideal host"),
        "{}",
        s.stderr
    );
    // the host probe's results and the part that ran are there
    assert!(dir.path("demo").join("host").join("summary.json").is_file());
    assert!(dir
        .path("demo")
        .join("simulated")
        .join("summary.json")
        .is_file());
}

#[test]
fn sigterm_during_a_lab_run_collects_what_the_nodes_measured() {
    if !common::lab::can_run("sigterm_during_a_lab_run") {
        return;
    }
    let dir = Scratch::new("lab");
    let s = stop_when(
        &[
            "lab",
            "run",
            &common::cli::scenario("line.toml"),
            "--tf",
            "1ms",
            "--duration",
            "30s",
            "--json",
            "--output",
            &dir.arg("out"),
        ],
        // the traffic runs (the first progress line comes half a second in)
        When::Line("nodes running)"),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    let doc: serde_json::Value = serde_json::from_str(&s.stdout).expect("the document");
    assert_eq!(doc, json(&dir.path("out").join("summary.json")));
    let why = doc["results"]["interrupted"].as_str().expect("interrupted");
    assert!(why.starts_with("FIFO stopped "), "{why}");
    assert!(why.ends_with("no results for TDP"), "{why}");
    let runs = doc["results"]["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1);
    assert!(dir.path("out").join("report.html").is_file());
    // a stop during the setup: nothing measured, nothing left behind
    let s = stop_when(
        &[
            "lab",
            "run",
            &common::cli::scenario("line.toml"),
            "--tf",
            "1ms",
            "--duration",
            "30s",
            "--output",
            &dir.arg("setup"),
        ],
        When::Line("namespaces"),
    );
    assert_eq!(s.code, Some(3), "{}", s.stderr);
    assert!(s.stderr.contains("nothing measured"), "{}", s.stderr);
    // "built 4 namespaces (ls-<run id>-*)": none of this run's is left
    let prefix = s
        .stderr
        .split("namespaces (")
        .nth(1)
        .and_then(|r| r.split_once('*'))
        .map(|(p, _)| p.to_string())
        .expect("the namespaces' names");
    let left = common::lab::namespaces(&prefix);
    assert!(left.is_empty(), "namespaces left: {left:?}");
}
