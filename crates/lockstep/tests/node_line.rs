//! `lockstep node` end to end in network namespaces (needs root and iproute2;
//! otherwise each test prints a skip note and passes):
//!
//! ```text
//!  sender ns                router ns (lockstep node, core)            receiver ns
//!  <b>s 10.0.1.2 ──veth── <b>a 10.0.1.1 [port 1]   [port 2] 10.0.2.1 <b>b ──veth── <b>d 10.0.2.2
//! ```
//!
//! The sender sends two flows for about a second (TF = 1 ms, k = 4: flow 1 two
//! packets in slot 1, flow 2 one packet in slot 3), the router forwards them with
//! d = 1, the receiver measures. The checks are functional and exact, from the
//! nodes' JSON files: every packet sent arrived (per flow, none lost), the router
//! forwarded each of them (marked, in its reserved frame, or counted as a slip),
//! saw no unknown DSCP, recorded a hop in every probe, and sent padding. A FIFO run
//! checks the same without frames. The router waits with a different strategy in
//! each run (core: hybrid, edge: sleep, FIFO: spin). A last test runs an edge router
//! that takes its rows from the admission controller and follows a new table while it
//! runs. Another runs the sender in the router's process and thread. No timing
//! thresholds.
//!
//! Names are `lsn-<pid hex>-<n>`; namespaces are owned by guards that delete them
//! even when an assertion fails, child processes by guards that kill them, and every
//! wait is bounded by a wall-clock cap.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use lockstep_core::ClockId;
use lockstep_linux::cmd;
use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::iface::{self, format_mac, IfaceError, Mac};
use lockstep_linux::netns::{self, NetnsGuard};
use lockstep_linux::packet::PacketSocket;
use lockstep_linux::RecvMode;
use serde_json::Value;

static COUNTER: AtomicU32 = AtomicU32::new(0);
/// One topology at a time: the machine has few cores, and three nodes each.
static SERIAL: Mutex<()> = Mutex::new(());

const TF_NS: i64 = 1_000_000;
/// Longest any single wait of the test may take.
const CAP: StdDuration = StdDuration::from_secs(20);

fn unique() -> String {
    format!(
        "lsn-{:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

fn can_run(test: &str) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping {test}: needs root (network namespaces, raw sockets)");
        return false;
    }
    if cmd::find_program("ip").is_none() {
        eprintln!("skipping {test}: `ip` (iproute2) is not installed");
        return false;
    }
    true
}

/// A child process killed (and reaped) when dropped.
struct Proc {
    name: &'static str,
    child: Option<Child>,
    log: PathBuf,
}

impl Proc {
    fn pid(&self) -> i32 {
        self.child.as_ref().map_or(0, |c| c.id() as i32)
    }

    /// Waits for the process to end by itself (bounded); its exit code.
    fn wait(&mut self) -> Option<i32> {
        let start = StdInstant::now();
        while start.elapsed() < CAP {
            if let Some(c) = self.child.as_mut() {
                if let Ok(Some(status)) = c.try_wait() {
                    self.child = None;
                    return status.code();
                }
            }
            std::thread::sleep(StdDuration::from_millis(20));
        }
        panic!("{} did not exit within {CAP:?}:\n{}", self.name, self.log());
    }

    /// Asks it to stop (SIGTERM) and waits.
    fn stop(&mut self) -> Option<i32> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        self.wait()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Removes a directory on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        // LSN_KEEP=1 keeps the files (configs, logs, results) for a look.
        if std::env::var_os("LSN_KEEP").is_some() {
            eprintln!("kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

struct Line {
    // Dropped in this order: the namespaces go, and the veth pairs with them.
    s: NetnsGuard,
    r: NetnsGuard,
    d: NetnsGuard,
    ifs: [String; 4],
    macs: [Mac; 4],
}

const S_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 2);
const RA_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 1, 1);
const RB_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 1);
const D_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// Builds the three namespaces and two links, offloads off, IPv6 off, static
/// neighbours and routes on the hosts; the router namespace keeps kernel forwarding
/// off (the default of a new namespace).
fn line(base: &str) -> Line {
    let s = NetnsGuard::create(&format!("{base}S")).unwrap();
    let r = NetnsGuard::create(&format!("{base}R")).unwrap();
    let d = NetnsGuard::create(&format!("{base}D")).unwrap();
    for ns in [&s, &r, &d] {
        ns.run(|| -> Result<(), IfaceError> {
            iface::sysctl_set("net.ipv6.conf.all.disable_ipv6", "1")?;
            iface::sysctl_set("net.ipv6.conf.default.disable_ipv6", "1")?;
            iface::set_up("lo")
        })
        .unwrap()
        .unwrap();
    }
    let ifs = [
        format!("{base}s"),
        format!("{base}a"),
        format!("{base}b"),
        format!("{base}d"),
    ];
    assert!(ifs.iter().all(|n| n.len() <= 15), "{ifs:?}");
    iface::create_veth_between(&ifs[0], Some(s.name()), &ifs[1], Some(r.name())).unwrap();
    iface::create_veth_between(&ifs[2], Some(r.name()), &ifs[3], Some(d.name())).unwrap();
    let setup = |ns: &NetnsGuard, ifname: &str, ip: Ipv4Addr| -> Mac {
        ns.run(|| -> Result<Mac, String> {
            ethtool::set_offloads(ifname, Offloads::ALL_OFF).map_err(|e| e.to_string())?;
            iface::add_addr(ifname, ip, 24).map_err(|e| e.to_string())?;
            iface::set_up(ifname).map_err(|e| e.to_string())?;
            iface::mac(ifname).map_err(|e| e.to_string())
        })
        .unwrap()
        .unwrap()
    };
    let macs = [
        setup(&s, &ifs[0], S_IP),
        setup(&r, &ifs[1], RA_IP),
        setup(&r, &ifs[2], RB_IP),
        setup(&d, &ifs[3], D_IP),
    ];
    s.run(|| -> Result<(), IfaceError> {
        iface::add_neigh(&ifs[0], RA_IP, macs[1])?;
        iface::add_route(Ipv4Addr::new(10, 0, 2, 0), 24, Some(RA_IP), None)
    })
    .unwrap()
    .unwrap();
    d.run(|| -> Result<(), IfaceError> {
        iface::add_neigh(&ifs[3], RB_IP, macs[2])?;
        iface::add_route(Ipv4Addr::new(10, 0, 1, 0), 24, Some(RB_IP), None)
    })
    .unwrap()
    .unwrap();
    Line { s, r, d, ifs, macs }
}

fn frame(mode: &str) -> String {
    format!("mode = \"{mode}\"\n\n[node.frame]\ntf = \"1ms\"\nk = 4\n")
}

fn port(id: u16, ifname: &str, mac: &Mac, addr: Ipv4Addr, extra: &str) -> String {
    format!(
        "[[node.ports]]\nid = {id}\nifname = \"{ifname}\"\nmac = \"{}\"\naddr = \"{addr}\"\nprefix_len = 24\nrate_bps = 1000000000\n{extra}\n",
        format_mac(mac)
    )
}

/// The three node files.
fn configs(l: &Line, mode: &str, role: &str, strategy: &str) -> [String; 3] {
    configs_with(l, mode, role, strategy, "")
}

/// The three node files, with `router_live` added to the router's `[live]`.
fn configs_with(
    l: &Line,
    mode: &str,
    role: &str,
    strategy: &str,
    router_live: &str,
) -> [String; 3] {
    let sender = format!(
        "[node]\nname = \"snd\"\nid = 10\nrole = \"sender\"\n{}\n{}\
         [[node.flows]]\nid = 1\nout_port = 1\nrows = [{{ slot = 1, packets = 2, size = 256 }}]\n\n\
         [[node.flows]]\nid = 2\nout_port = 1\nrows = [{{ slot = 3, packets = 1, size = 256 }}]\n\n\
         [live]\nmark = {}\n\
         [[live.flows]]\nflow = 1\ndst = \"{D_IP}:7000\"\nsrc_port = 6001\nsize = 200\n\n\
         [[live.flows]]\nflow = 2\ndst = \"{D_IP}:7000\"\nsrc_port = 6002\nsize = 200\n",
        frame(mode),
        port(1, &l.ifs[0], &l.macs[0], S_IP, ""),
        // an edge router marks; the sender marks for a core in TDP mode
        mode == "tdp" && role == "core",
    );
    // An edge polices a flow to its reservation: on a loaded machine a late sender
    // or router makes a flow exceed it for a moment. Send the excess best effort,
    // so every packet still arrives (and is counted as excess).
    let police = if role == "edge" { "police = false" } else { "" };
    let router = format!(
        "[node]\nname = \"r1\"\nid = 7\nrole = \"{role}\"\n{}\n{}{}\
         [[node.flows]]\nid = 1\nout_port = 2\nrule = {{ dst_ports = [7000, 7000], src_ports = [6001, 6001] }}\n\
         rows = [{{ slot = 2, packets = 2, size = 256 }}]\n{police}\n\
         [[node.flows]]\nid = 2\nout_port = 2\nrule = {{ dst_ports = [7000, 7000], src_ports = [6002, 6002] }}\n\
         rows = [{{ slot = 0, packets = 1, size = 256 }}]\n{police}\n\
         [live]\nstrategy = \"{strategy}\"\nnames = {{ \"7\" = \"R1\" }}\n{router_live}\n",
        frame(mode),
        port(
            1,
            &l.ifs[1],
            &l.macs[1],
            RA_IP,
            &format!(
                "d = 1\npadding = false\nneighbour_addr = \"{S_IP}\"\nneighbour_mac = \"{}\"",
                format_mac(&l.macs[0])
            )
        ),
        port(
            2,
            &l.ifs[2],
            &l.macs[2],
            RB_IP,
            &format!(
                "neighbour_addr = \"{D_IP}\"\nneighbour_mac = \"{}\"",
                format_mac(&l.macs[3])
            )
        ),
    );
    let receiver = format!(
        "[node]\nname = \"rcv\"\nid = 20\nrole = \"receiver\"\n{}\n{}\
         [live]\nbind = \"{D_IP}:7000\"\nsamples = true\nnames = {{ \"7\" = \"R1\" }}\n",
        frame(mode),
        port(1, &l.ifs[3], &l.macs[3], D_IP, ""),
    );
    [sender, router, receiver]
}

fn spawn(ns: &str, name: &'static str, dir: &Path, config: &str, extra: &[String]) -> Proc {
    let cfg = dir.join(format!("{name}.toml"));
    std::fs::write(&cfg, config).unwrap();
    let log = dir.join(format!("{name}.log"));
    let mut c: Command = netns::command(ns, env!("CARGO_BIN_EXE_lockstep")).unwrap();
    c.arg("node")
        .arg("--config")
        .arg(&cfg)
        .arg("--output")
        .arg(dir.join("out"))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    Proc {
        name,
        child: Some(c.spawn().unwrap()),
        log,
    }
}

fn wait_ready(p: &mut Proc, ready: &Path) {
    let start = StdInstant::now();
    while !ready.exists() {
        if let Some(c) = p.child.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                panic!("{} exited early ({status}):\n{}", p.name, p.log());
            }
        }
        assert!(
            start.elapsed() < CAP,
            "{} not ready within {CAP:?}:\n{}",
            p.name,
            p.log()
        );
        std::thread::sleep(StdDuration::from_millis(10));
    }
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Results of one run: the three node documents.
struct Run {
    sender: Value,
    router: Value,
    receiver: Value,
    packets_csv: String,
    /// The frames that reached the router's port 1 from the sender ([`Hosts::capture`]).
    captured: Vec<Vec<u8>>,
}

/// How the sender and receiver run (`--io`; `None`: their default, udp).
#[derive(Clone, Copy, Default)]
struct Hosts<'a> {
    sender: Option<&'a str>,
    receiver: Option<&'a str>,
    /// Take the sender's static neighbour entry of the router away: a sender writing
    /// frames has the kernel resolve it.
    arp: bool,
    /// Keep a copy of every frame reaching the router's port 1.
    capture: bool,
    /// The sender runs in the router's process (`--config snd --config r1`, the
    /// sender's sockets in its namespace through `live.netns`), in its thread,
    /// started with it.
    joined: bool,
}

/// One run; `strategy` is the router's wait strategy.
fn run_line(test: &str, mode: &str, role: &str, strategy: &str) -> Option<Run> {
    run_line_io(test, mode, role, strategy, None)
}

/// One run with the router's ports in I/O mode `io` (`--io`; `None`: its choice).
fn run_line_io(
    test: &str,
    mode: &str,
    role: &str,
    strategy: &str,
    io: Option<&str>,
) -> Option<Run> {
    run_line_with(test, mode, role, strategy, io, "")
}

/// One run as [`run_line_io`], with `router_live` added to the router's `[live]`.
fn run_line_with(
    test: &str,
    mode: &str,
    role: &str,
    strategy: &str,
    io: Option<&str>,
    router_live: &str,
) -> Option<Run> {
    let hosts = Hosts::default();
    run_line_hosts(test, mode, role, strategy, io, router_live, hosts)
}

/// One run as [`run_line_with`], the sender and receiver run as `hosts` says.
fn run_line_hosts(
    test: &str,
    mode: &str,
    role: &str,
    strategy: &str,
    io: Option<&str>,
    router_live: &str,
    hosts: Hosts,
) -> Option<Run> {
    if !can_run(test) {
        return None;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let base = unique();
    let dir = std::env::temp_dir().join(&base);
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = Scratch(dir.clone());
    let l = line(&base);
    let [mut snd, rtr, rcv] = configs_with(&l, mode, role, strategy, router_live);
    let ready = |n: &str| dir.join(format!("{n}.ready"));
    let with_ready = |n: &str| vec!["--ready-file".to_string(), ready(n).display().to_string()];
    let mut router_args = with_ready("router");
    if let Some(io) = io {
        router_args.extend(["--io".to_string(), io.to_string()]);
    }
    let io_arg = |io: Option<&str>| io.map(|m| vec!["--io".to_string(), m.to_string()]);
    let mut capture = hosts.capture.then(|| capture_on(&l.r, &l.ifs[1]));
    if hosts.arp {
        l.s.run(|| cmd::ip(&["neigh", "del", &RA_IP.to_string(), "dev", &l.ifs[0]]))
            .unwrap()
            .unwrap();
    }
    let mut rargs = with_ready("receiver");
    rargs.extend(io_arg(hosts.receiver).unwrap_or_default());
    let mut receiver = spawn(l.d.name(), "receiver", &dir, &rcv, &rargs);
    wait_ready(&mut receiver, &ready("receiver"));
    if hosts.joined {
        // the same waiting as the router's (a thread's nodes agree), its own namespace
        snd = snd.replacen(
            "[live]\n",
            &format!(
                "[live]\nstrategy = \"{strategy}\"\nnetns = \"{}\"\n",
                l.s.name()
            ),
            1,
        );
        std::fs::write(dir.join("sender.toml"), &snd).unwrap();
        // the router runs 200 ms (its linger) past the sender's end, and exits by itself
        let now = lockstep_linux::now(ClockId::Tai).ns;
        let start = (now / TF_NS + 2000) * TF_NS;
        router_args.extend([
            "--config".to_string(),
            dir.join("sender.toml").display().to_string(),
            "--start-at-ns".to_string(),
            start.to_string(),
            "--duration".to_string(),
            "1s".to_string(),
        ]);
        let mut both = spawn(l.r.name(), "router", &dir, &rtr, &router_args);
        wait_ready(&mut both, &ready("router"));
        assert_eq!(
            both.wait(),
            Some(0),
            "router and sender failed:\n{}",
            both.log()
        );
    } else {
        let mut router = spawn(l.r.name(), "router", &dir, &rtr, &router_args);
        wait_ready(&mut router, &ready("router"));
        // All start on the same frame, a little ahead.
        let now = lockstep_linux::now(ClockId::Tai).ns;
        let start = (now / TF_NS + 300) * TF_NS;
        let common = vec!["--start-at-ns".to_string(), start.to_string()];
        let mut sargs = common.clone();
        sargs.extend(["--duration".to_string(), "1s".to_string()]);
        sargs.extend(io_arg(hosts.sender).unwrap_or_default());
        let mut sender = spawn(l.s.name(), "sender", &dir, &snd, &sargs);
        let code = sender.wait();
        assert_eq!(code, Some(0), "sender failed:\n{}", sender.log());
        // let the last packets through the router (its frames are 1 ms)
        std::thread::sleep(StdDuration::from_millis(100));
        assert_eq!(router.stop(), Some(0), "router failed:\n{}", router.log());
    }
    assert_eq!(
        receiver.stop(),
        Some(0),
        "receiver failed:\n{}",
        receiver.log()
    );
    let out = dir.join("out");
    let r = Run {
        sender: read_json(&out.join("snd.json")),
        router: read_json(&out.join("r1.json")),
        receiver: read_json(&out.join("rcv.json")),
        packets_csv: std::fs::read_to_string(out.join("rcv-packets.csv")).unwrap_or_default(),
        captured: capture.as_mut().map(take_frames).unwrap_or_default(),
    };
    let names = [
        l.s.name().to_string(),
        l.r.name().to_string(),
        l.d.name().to_string(),
    ];
    drop(l);
    for n in names {
        assert!(!netns::exists(&n), "namespace {n} left behind");
    }
    drop(scratch);
    Some(r)
}

/// A packet socket on `ifname` of `ns`, for the test to see what arrives there.
fn capture_on(ns: &NetnsGuard, ifname: &str) -> PacketSocket {
    let sock = ns.run(|| PacketSocket::bind(ifname)).unwrap().unwrap();
    sock.set_recv_buffer(16 << 20).unwrap();
    sock
}

/// Every frame the capture socket holds (bounded: the socket's buffer).
fn take_frames(sock: &mut PacketSocket) -> Vec<Vec<u8>> {
    let mut frames = Vec::new();
    let mut buf = vec![0u8; 2048 * 32];
    for _ in 0..100_000 {
        let n = sock
            .recv_batch(&mut buf, 2048, RecvMode::Poll, |d, _| {
                frames.push(d.to_vec())
            })
            .unwrap();
        if n == 0 {
            break;
        }
    }
    frames
}

/// Per flow: (sent by the sender, received by the receiver, lost).
fn per_flow(r: &Run, flow: u32) -> (u64, u64, u64) {
    let sent = r.sender["tx_flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["flow"] == flow)
        .map(|f| u(&f["sent"]))
        .unwrap();
    let rf = &r.receiver["flows"][flow.to_string()];
    (sent, u(&rf["received"]), u(&rf["seq"]["lost"]))
}

fn router_flow(r: &Run, flow: u32) -> &Value {
    r.router["counters"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["flow"] == flow)
        .unwrap()
}

fn check_delivery(r: &Run) -> u64 {
    let sent = u(&r.sender["counters"]["sent"]);
    assert!(sent > 0, "the sender sent nothing: {}", r.sender);
    assert_eq!(u(&r.sender["counters"]["send_errors"]), 0);
    let mut total = 0;
    for flow in [1, 2] {
        let (s, got, lost) = per_flow(r, flow);
        assert!(s > 0, "flow {flow} sent nothing");
        assert_eq!(got, s, "flow {flow}: received {got} of {s}");
        assert_eq!(lost, 0, "flow {flow}");
        total += s;
    }
    assert_eq!(total, sent);
    assert_eq!(u(&r.receiver["counters"]["probes"]), sent);
    assert_eq!(u(&r.receiver["counters"]["foreign"]), 0);
    // flow 1 sends 2 packets in each of its frames (slot 1), flow 2 one (slot 3)
    let (s1, _, _) = per_flow(r, 1);
    let (s2, _, _) = per_flow(r, 2);
    assert_eq!(s1 % 2, 0);
    assert_eq!(s1 / 2 + s2, u(&r.sender["counters"]["frames"]));
    // the sender's frame timer: one wake-up per frame it sent in or skipped (late)
    assert_eq!(
        u(&r.sender["wakeup"]["count"]),
        u(&r.sender["counters"]["frames"]) + u(&r.sender["counters"]["skipped_frames"])
    );
    // the router forwarded every packet out of port 2, towards the receiver
    let rc = &r.router["counters"];
    assert_eq!(rc["ports"][1]["port"], 2);
    let out = &rc["ports"][1];
    assert_eq!(
        u(&out["tx_reserved"]) + u(&out["tx_best_effort"]),
        sent,
        "every packet left on port 2: {rc}"
    );
    assert_eq!(
        u(&rc["no_route"]) + u(&rc["malformed"]) + u(&rc["unknown_dscp"]),
        0
    );
    assert_eq!(u(&rc["unknown_flow"]), 0);
    // each probe crossed R1: a hop record, and the decomposition names it
    assert_eq!(u(&rc["hops_recorded"]), sent);
    for flow in ["1", "2"] {
        let f = &r.receiver["flows"][flow];
        let hops = f["decomposition"]["hops"].as_array().unwrap();
        assert_eq!(hops.len(), 1, "{f}");
        assert_eq!(hops[0]["node"], 7);
        assert_eq!(hops[0]["name"], "R1");
        let n = u(&f["received"]);
        assert_eq!(u(&hops[0]["residence"]["count"]), n);
        assert_eq!(u(&hops[0]["link_in"]["count"]), n);
        assert_eq!(u(&f["latency"]["count"]), n);
        let names: Vec<&str> = f["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "L_I",
                "send path",
                "link sender→R1",
                "R1 residence",
                "link R1→rcv",
                "L_Rx"
            ]
        );
        for c in f["components"].as_array().unwrap() {
            assert_eq!(u(&c["summary"]["count"]), n, "{}", c["name"]);
        }
    }
    // the per-packet file: a header and one row per probe, with R1's hop
    let lines: Vec<&str> = r.packets_csv.lines().collect();
    assert_eq!(lines.len() as u64, sent + 1);
    assert!(
        lines[0].starts_with("flow,seq,frame,t0,t_wake,t_send,kernel_rx,app_rx,latency,h1_node")
    );
    assert!(lines[1..].iter().all(|l| l.split(',').nth(9) == Some("7")));
    sent
}

#[test]
fn tdp_line_delivers_routes_marks_and_pads() {
    let Some(r) = run_line(
        "tdp_line_delivers_routes_marks_and_pads",
        "tdp",
        "core",
        "hybrid",
    ) else {
        return;
    };
    check_tdp(&r);
    assert_eq!(r.router["role"], "core");
    // the sender marked the packets with the frame (DSCP) in TDP mode: the router
    // recovered their frames from the mark on port 1
    assert_eq!(r.sender["mark"], true);
}

#[test]
fn edge_line_classifies_holds_and_marks() {
    let Some(r) = run_line(
        "edge_line_classifies_holds_and_marks",
        "tdp",
        "edge",
        "sleep",
    ) else {
        return;
    };
    check_tdp(&r);
    assert_eq!(r.router["role"], "edge");
    // unmarked packets in: nothing to recover from DSCP, everything classified
    assert_eq!(r.sender["mark"], false);
    let rc = &r.router["counters"];
    assert_eq!(u(&rc["ports"][0]["resyncs"]), 0);
    assert_eq!(u(&rc["misrouted"]), 0);
}

/// What a TDP router run shows, core or edge.
fn check_tdp(r: &Run) {
    let sent = check_delivery(r);
    let rc = &r.router["counters"];
    // marked: every packet left in its reserved frame, or is counted as a slip
    // of its flow (late on a loaded machine, or processed so late that its mark
    // reads as a future frame (`too_early`), or its frame's queue full: then it
    // went best effort, still delivered)
    let mut reserved = 0;
    let mut accounted = 0;
    for flow in [1, 2] {
        let f = router_flow(r, flow);
        let (s, _, _) = per_flow(r, flow);
        // `forwarded` counts reserved departures (late ones too, also in `late`);
        // slipped and (edge) excess packets went best effort
        let n = u(&f["forwarded"]) + u(&f["slipped"]) - u(&f["late"]) + u(&f["excess"]);
        assert!(n <= s, "flow {flow}: {f}");
        assert_eq!(u(&f["policed"]), 0);
        accounted += n;
        reserved += u(&f["forwarded"]);
    }
    assert_eq!(accounted, sent, "{rc}");
    assert!(reserved > 0, "no packet left in a reserved frame: {rc}");
    assert_eq!(u(&rc["ports"][1]["tx_reserved"]), reserved);
    // the router ran frames and padded the frames with nothing reserved on port 2
    assert!(u(&rc["frames"]) > 0);
    assert!(u(&rc["padding_sent"]) > 0, "{rc}");
    assert_eq!(u(&rc["padding_sent"]), u(&rc["ports"][1]["tx_padding"]));
    assert_eq!(u(&rc["ports"][0]["tx_padding"]), 0);
    // it timed every frame start it went through
    assert!(u(&r.router["wakeup"]["count"]) > 0);
    assert_eq!(r.router["mode"], "tdp");
    assert!(sent > 0);
}

/// A sender run by the router's process, in its thread (`lockstep node --config
/// r1.toml --config snd.toml`, the sender's sockets in its own namespace): every
/// packet arrives, in TDP each leaves the edge in its reserved frame or is counted as
/// a slip, as when the sender runs on its own; the sender stops at its own end, no
/// linger, and writes the same result document.
#[test]
fn a_sender_in_the_routers_process_delivers_in_its_frames() {
    for (mode, role, strategy) in [("tdp", "edge", "hybrid"), ("fifo", "core", "sleep")] {
        let test = format!("a_sender_in_the_routers_process_delivers_in_its_frames ({mode})");
        let hosts = Hosts {
            joined: true,
            ..Hosts::default()
        };
        let Some(r) = run_line_hosts(&test, mode, role, strategy, None, "", hosts) else {
            return;
        };
        if mode == "tdp" {
            check_tdp(&r);
        } else {
            let sent = check_delivery(&r);
            assert_eq!(u(&r.router["counters"]["ports"][1]["tx_best_effort"]), sent);
        }
        // one process for both, the sender's own end before the router's
        assert_eq!(r.sender["command"], r.router["command"]);
        assert_eq!(r.sender["role"], "sender");
        assert_eq!(r.sender["stop_reason"], "duration", "{}", r.sender);
        assert_eq!(r.router["stop_reason"], "duration", "{}", r.router);
        assert!(u(&r.router["stop_ns"]) > u(&r.sender["stop_ns"]));
        // it timed its TX like a sender on its own
        assert_eq!(
            u(&r.sender["counters"]["tx_timestamps"]),
            u(&r.sender["counters"]["sent"])
        );
    }
}

/// A core router that coalesces its wake-ups (here 200 µs of a 1 ms frame, far more
/// than a benchmark would use; it forwards one frame after the arrival frame, d = 1)
/// still forwards every packet, in TDP each in its frame or counted as a slip, and
/// in FIFO at once, over the packet socket and AF_XDP.
#[test]
fn a_coalescing_router_keeps_every_packet_and_its_frames() {
    for (mode, io) in [("tdp", "packet"), ("tdp", "xdp"), ("fifo", "xdp")] {
        let test = format!("a_coalescing_router_keeps_every_packet_and_its_frames ({mode}, {io})");
        let live = "coalesce = \"200us\"";
        let Some(r) = run_line_with(&test, mode, "core", "sleep", Some(io), live) else {
            return;
        };
        if mode == "tdp" {
            check_tdp(&r);
        } else {
            let sent = check_delivery(&r);
            assert_eq!(u(&r.router["counters"]["ports"][1]["tx_best_effort"]), sent);
        }
    }
}

#[test]
fn fifo_line_delivers_at_once() {
    let Some(r) = run_line("fifo_line_delivers_at_once", "fifo", "core", "spin") else {
        return;
    };
    let sent = check_delivery(&r);
    let rc = &r.router["counters"];
    assert_eq!(r.router["mode"], "fifo");
    assert_eq!(r.sender["mark"], false);
    // FIFO: no frames, no padding, everything best effort (forwarded on arrival)
    assert_eq!(u(&rc["padding_sent"]), 0);
    assert_eq!(u(&rc["ports"][1]["tx_reserved"]), 0);
    assert_eq!(u(&rc["ports"][1]["tx_best_effort"]), sent);
    for flow in [1, 2] {
        let (s, _, _) = per_flow(&r, flow);
        assert_eq!(u(&router_flow(&r, flow)["forwarded"]), s);
    }
    assert_eq!(u(&r.router["wakeup"]["count"]), 0);
}

/// Every I/O mode of the router's ports forwards every probe, and times every probe
/// it forwarded (TX timestamps are asked for per probe). A mode the kernel lacks
/// makes the router exit 3 with the reason: skipped with that message.
#[test]
fn fifo_line_delivers_through_every_io_mode() {
    for io in ["packet", "ring", "ring-v2", "xdp"] {
        let test = format!("fifo_line_delivers_through_every_io_mode ({io})");
        let Some(r) = run_line_io(&test, "fifo", "core", "hybrid", Some(io)) else {
            return;
        };
        let sent = check_delivery(&r);
        if io == "xdp" && r.router["io"] == "packet" {
            // no AF_XDP here: the router said why and used the packet socket
            eprintln!("{test}: fell back to packet: {}", r.router["warnings"]);
            continue;
        }
        assert_eq!(r.router["io"], io, "{}", r.router);
        let d = &r.router["driver"][1];
        assert_eq!(d["port"], 2);
        assert_eq!(u(&d["tx_timestamps"]), sent, "{d}");
        assert_eq!(u(&d["tx_timestamps_missing"]), 0, "{d}");
        assert_eq!(u(&d["tx_device_drops"]) + u(&d["tx_errors"]), 0, "{d}");
    }
}

/// A controller's HTTP call from the test: (status, JSON body).
fn ctl_call(url: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let a: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(StdDuration::from_secs(30)))
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

/// An edge router that takes its rows from the admission controller follows a new
/// table while it runs: flow 1 is first reserved in slot 1 of the router's output
/// port, then moved to slot 0; the router (started outside the namespaces, opening
/// its ports in its own with `live.netns`, so it reaches the controller on loopback)
/// forwards every probe in a frame of the slot in force, switching once.
#[test]
fn an_edge_router_follows_the_controllers_table() {
    let test = "an_edge_router_follows_the_controllers_table";
    if !can_run(test) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let base = unique();
    let dir = std::env::temp_dir().join(&base);
    std::fs::create_dir_all(&dir).unwrap();
    let scratch = Scratch(dir.clone());
    let l = line(&base);
    let [snd, rtr, rcv] = configs(&l, "tdp", "edge", "sleep");
    // the router's rows come from the controller; its ports live in the router's
    // namespace
    let rtr = rtr.replace("[live]\n", &format!("[live]\nnetns = \"{}\"\n", l.r.name()));

    std::fs::write(
        dir.join("tdp.toml"),
        "tf = \"1ms\"\nk = 4\n[[node]]\nname = \"r1\"\nports = [{ id = 2, rate = \"1Gbit/s\" }]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("net.toml"),
        "[[server]]\nname = \"s0\"\nrate = \"1Gbit/s\"\nlatency = \"10us\"\n",
    )
    .unwrap();
    let log = dir.join("ctl.log");
    let mut server = Proc {
        name: "controller",
        child: Some(
            Command::new(env!("CARGO_BIN_EXE_lockstep"))
                .args(["ctl", "serve", "--listen", "127.0.0.1:0", "--db"])
                .arg(dir.join("ctl.db"))
                .arg("--network")
                .arg(dir.join("net.toml"))
                .arg("--tdp")
                .arg(dir.join("tdp.toml"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap(),
        ),
        log: log.clone(),
    };
    let started = StdInstant::now();
    let url = loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if let Some(i) = text.find("listening on ") {
            break text[i + 13..].lines().next().unwrap().trim().to_string();
        }
        assert!(
            started.elapsed() < CAP,
            "controller not up:\n{}",
            server.log()
        );
        std::thread::sleep(StdDuration::from_millis(20));
    };
    // A blocker fills most of frame 0 of the cycle (80 frames of 1500 B of the
    // 125,000 B a 1 ms frame carries at 1 Gbit/s), so flow 1 (2 × 1000 B) gets frame 1.
    let flow = |name: &str, id: u32, packets: u32, size: u32| serde_json::json!({"name": name, "id": id, "path": ["r1/2"], "packets": packets, "size": size, "d": [0]});
    let (st, v) = ctl_call(&url, "POST", "/tdp/flows", Some(&flow("blk", 9, 80, 1500)));
    assert_eq!(st, 201, "{v}");
    let (st, v) = ctl_call(&url, "POST", "/tdp/flows", Some(&flow("f1", 1, 2, 1000)));
    assert_eq!(
        (st, v["flow"]["start"].clone()),
        (201, serde_json::json!(1)),
        "{v}"
    );

    let cfg = dir.join("router.toml");
    std::fs::write(&cfg, &rtr).unwrap();
    let ready = |n: &str| dir.join(format!("{n}.ready"));
    let rlog = dir.join("router.log");
    let mut router = Proc {
        name: "router",
        child: Some(
            Command::new(env!("CARGO_BIN_EXE_lockstep"))
                .arg("node")
                .arg("--config")
                .arg(&cfg)
                .args(["--controller", &url, "--output"])
                .arg(dir.join("out"))
                .arg("--ready-file")
                .arg(ready("router"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&rlog).unwrap())
                .spawn()
                .unwrap(),
        ),
        log: rlog,
    };
    let with_ready = |n: &str| vec!["--ready-file".to_string(), ready(n).display().to_string()];
    let mut receiver = spawn(l.d.name(), "receiver", &dir, &rcv, &with_ready("receiver"));
    wait_ready(&mut router, &ready("router"));
    wait_ready(&mut receiver, &ready("receiver"));
    let now = lockstep_linux::now(ClockId::Tai).ns;
    let start = (now / TF_NS + 300) * TF_NS;
    let sargs = vec![
        "--start-at-ns".to_string(),
        start.to_string(),
        "--duration".to_string(),
        "1500ms".to_string(),
    ];
    let mut sender = spawn(l.s.name(), "sender", &dir, &snd, &sargs);
    // Half-way, the controller moves flow 1 to frame 0.
    while lockstep_linux::now(ClockId::Tai).ns < start + 700 * TF_NS {
        assert!(started.elapsed() < CAP * 2, "the run did not start");
        std::thread::sleep(StdDuration::from_millis(10));
    }
    assert_eq!(ctl_call(&url, "DELETE", "/tdp/flows/blk", None).0, 200);
    assert_eq!(ctl_call(&url, "DELETE", "/tdp/flows/f1", None).0, 200);
    let (st, v) = ctl_call(&url, "POST", "/tdp/flows", Some(&flow("f1", 1, 2, 1000)));
    assert_eq!(
        (st, v["flow"]["start"].clone()),
        (201, serde_json::json!(0)),
        "{v}"
    );

    assert_eq!(sender.wait(), Some(0), "sender failed:\n{}", sender.log());
    std::thread::sleep(StdDuration::from_millis(100));
    assert_eq!(router.stop(), Some(0), "router failed:\n{}", router.log());
    assert_eq!(
        receiver.stop(),
        Some(0),
        "receiver failed:\n{}",
        receiver.log()
    );
    let _ = server.stop();

    let out = dir.join("out");
    let doc = read_json(&out.join("r1.json"));
    let warnings = doc["warnings"].to_string();
    assert!(
        warnings.contains("applied while running"),
        "{warnings}\n{}",
        router.log()
    );
    // r1-tx.csv: flow,seq,port,kind,frame,...: flow 1's reserved probes, by seq
    let csv = std::fs::read_to_string(out.join("r1-tx.csv")).unwrap();
    let mut rows: Vec<(u64, i64)> = csv
        .lines()
        .skip(1)
        .filter_map(|r| {
            let c: Vec<&str> = r.split(',').collect();
            (c[0] == "1" && c[3] == "0").then(|| (c[1].parse().unwrap(), c[4].parse().unwrap()))
        })
        .collect();
    rows.sort();
    let slots: Vec<i64> = rows.iter().map(|&(_, f)| f.rem_euclid(4)).collect();
    assert!(!slots.is_empty());
    let switch = slots
        .iter()
        .position(|&s| s == 0)
        .unwrap_or_else(|| panic!("never moved to slot 0: {slots:?}"));
    assert!(switch > 0, "{slots:?}");
    assert!(slots[..switch].iter().all(|&s| s == 1), "{slots:?}");
    assert!(slots[switch..].iter().all(|&s| s == 0), "{slots:?}");
    let names = [
        l.s.name().to_string(),
        l.r.name().to_string(),
        l.d.name().to_string(),
    ];
    drop(l);
    for n in names {
        assert!(!netns::exists(&n), "namespace {n} left behind");
    }
    drop(scratch);
}

/// The node's result names `io` as its mode, or, for `xdp` on a kernel without
/// `AF_XDP`, the packet socket it fell back to (said, not failed).
fn check_io_used(test: &str, who: &str, node: &Value, io: &str) {
    if io == "xdp" && node["io"] == "packet" {
        eprintln!(
            "{test}: no AF_XDP here, the {who} used the packet socket: {}",
            node["warnings"]
        );
    } else {
        assert_eq!(node["io"], io, "{node}");
    }
}

/// A sender writing whole frames (`--io` packet, ring-v2, xdp) through a TDP core
/// router to a receiver on the kernel's UDP stack: every packet arrives, and every
/// frame that reached the router is what the UDP stack would have sent — Ethernet
/// from the sender's MAC to the router's, IPv4 with a good header checksum, TTL 64,
/// DF, the frame mark in DSCP, UDP from the flow's source port to 7000 with a good
/// checksum, and the probe's bytes exactly as the sender's core wrote them. In the
/// packet run the sender's neighbour entry for the router is taken away first, so
/// that the kernel resolves it (ARP). A mode the kernel lacks (xdp falls back to the
/// packet socket) is said and the run still checked.
#[test]
fn a_sender_writing_frames_delivers_what_the_udp_stack_would() {
    for io in ["packet", "ring-v2", "xdp"] {
        let test = format!("a_sender_writing_frames_delivers_what_the_udp_stack_would ({io})");
        let hosts = Hosts {
            sender: Some(io),
            arp: io == "packet",
            capture: true,
            ..Hosts::default()
        };
        let Some(r) = run_line_hosts(&test, "tdp", "core", "hybrid", None, "", hosts) else {
            return;
        };
        check_tdp(&r);
        assert_eq!(r.receiver["io"], "udp");
        check_io_used(&test, "sender", &r.sender, io);
        let sent = u(&r.sender["counters"]["sent"]);
        // every packet was timed, as on the UDP path
        assert_eq!(
            u(&r.sender["counters"]["tx_timestamps"]),
            sent,
            "{}",
            r.sender
        );
        assert_eq!(u(&r.sender["counters"]["tx_timestamps_missing"]), 0);
        let mut seen = 0;
        for f in &r.captured {
            if check_sender_frame(f, &r) {
                seen += 1;
            }
        }
        assert_eq!(seen, sent, "frames from the sender seen at the router");
    }
}

/// Checks one captured frame if it is a datagram from the sender; says whether it was.
fn check_sender_frame(f: &[u8], r: &Run) -> bool {
    use lockstep_core::wire::{
        EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, ProbePacket, UdpPacket, UdpRepr,
    };
    let eth = EthernetFrame::new_checked(f).unwrap();
    let e = EthernetRepr::parse(&eth).unwrap();
    if e.ethertype != 0x0800 {
        return false;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    let ipr = Ipv4Repr::parse(&ip).expect("a good IPv4 header");
    if ipr.src != S_IP {
        return false;
    }
    let udp = UdpPacket::new_checked(ip.payload()).unwrap();
    if ipr.dst == RA_IP {
        // the empty datagram to the router's discard port that had the kernel
        // resolve the router's MAC (ARP)
        assert_eq!(
            (ipr.protocol, udp.dst_port(), udp.payload().len()),
            (17, 9, 0)
        );
        return false;
    }
    let macs: [Mac; 2] = [
        r.sender["config"]["node"]["ports"][0]["mac"]
            .as_str()
            .and_then(iface::parse_mac)
            .unwrap(),
        r.router["config"]["node"]["ports"][0]["mac"]
            .as_str()
            .and_then(iface::parse_mac)
            .unwrap(),
    ];
    assert_eq!((e.src.0, e.dst.0), (macs[0], macs[1]));
    assert_eq!((ipr.dst, ipr.ttl, ipr.ecn, ipr.protocol), (D_IP, 64, 0, 17));
    assert!(ip.dont_frag());
    let ur = UdpRepr::parse(&udp, ipr.src, ipr.dst, true).expect("a good UDP checksum");
    assert_eq!(ur.dst_port, 7000);
    assert_eq!(ur.payload_len, 200);
    let p = ProbePacket::new_checked(udp.payload()).unwrap();
    let flow = p.flow_id();
    assert_eq!(ur.src_port, 6000 + flow as u16);
    // the frame mark, as the UDP path sets it: the probe's frame and its parities (k = 4)
    let mark =
        lockstep_core::frame::DSCP_TDP_MARK | lockstep_core::frame::parity_bits(p.frame(), 4);
    assert_eq!(ipr.dscp, mark, "DSCP of frame {}", p.frame());
    // the probe as the sender's core writes it
    let mut want = lockstep_core::tdp::host::probe_buffer(flow, 200).unwrap();
    let mut w = ProbePacket::new_unchecked(&mut want[..]);
    w.set_seq(p.seq());
    w.set_frame(p.frame());
    w.set_t0_ns(p.t0_ns());
    w.set_t_wake_ns(p.t_wake_ns());
    w.set_t_send_ns(p.t_send_ns());
    w.fill_checksum();
    assert_eq!(udp.payload(), &want[..], "probe bytes of flow {flow}");
    true
}

/// A sender on the kernel's UDP stack through a TDP core router to a receiver that
/// takes its frames from a frame port (`--io` packet, ring, xdp): every packet arrives and
/// is measured as on the UDP path; no frame was dropped as broken. A mode the
/// kernel lacks (xdp falls back to the packet socket) is said and the run checked.
#[test]
fn a_receiver_taking_frames_gets_every_packet() {
    for io in ["packet", "ring", "xdp"] {
        let test = format!("a_receiver_taking_frames_gets_every_packet ({io})");
        let hosts = Hosts {
            receiver: Some(io),
            ..Hosts::default()
        };
        let Some(r) = run_line_hosts(&test, "tdp", "core", "hybrid", None, "", hosts) else {
            return;
        };
        check_tdp(&r);
        assert_eq!(r.sender["io"], "udp");
        check_io_used(&test, "receiver", &r.receiver, io);
        let d = &r.receiver["frame_drops"];
        assert_eq!(u(&d["bad_checksum"]) + u(&d["malformed"]), 0, "{d}");
        // every frame had the kernel's RX time
        assert_eq!(u(&r.receiver["rx_time_from_clock"]), 0, "{}", r.receiver);
    }
}

/// `--io udp` is refused for a router, with the reason (exit 2).
#[test]
fn a_router_refuses_the_udp_stack() {
    let dir = std::env::temp_dir().join(format!("lsn-io-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let _scratch = Scratch(dir.clone());
    let cfg = dir.join("r.toml");
    std::fs::write(
        &cfg,
        format!(
            "[node]\nname = \"r1\"\nid = 7\nrole = \"core\"\n{}\n{}",
            frame("fifo"),
            port(1, "lo", &[2, 0, 0, 0, 0, 1], RA_IP, "")
        ),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["node", "--io", "udp", "--config"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--io udp: \"udp\" is the kernel's UDP stack, for a sender or receiver; a router (core) moves frames"), "{err}");
}
