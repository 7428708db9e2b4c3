//! Running a scenario: for each of its runs (mode × TF), build the network, start
//! every node on one common frame, run the best-effort load, wait, stop, collect,
//! tear down — also on failure and on Ctrl-C — then write the result files and print
//! the tables.
//!
//! Output directory:
//!
//! ```text
//! DIR/summary.json        the result document; results.report is the LabReport
//! DIR/report.html         self-contained report (plots)
//! DIR/scenario.toml       the scenario as run
//! DIR/host.json           host facts
//! DIR/<run>/config/*.toml each node's `lockstep node` file
//! DIR/<run>/<node>.json   each node's counters and results
//! DIR/<run>/*-packets.csv per-packet records (receivers); *-tx.csv TX timestamps
//! DIR/<run>/logs/         each process's stdout/stderr (nodes, load)
//! ```

use std::fs;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{anyhow, bail, Context, Result};
use lockstep_core::tdp::Role;
use lockstep_core::{ClockId, Duration};
use lockstep_linux::proc::{Group, Netns, Spec};
use lockstep_linux::{cmd, signal};
use serde::Serialize;
use serde_json::{json, Value};

use super::faults::{self, FaultVerdict};
use super::inject::{self, Action, Injector, Step};
use super::plan::{plan, LoadPlan, Plan};
use super::results::{collect, FlowLine, ScenarioLines};
use super::scenario::{
    fmt_bit_rate, LoadProto, LoadTool, RouterLayout, RunSpec, Scenario, SenderLayout,
};
use super::tables;
use super::topo::{new_run_id, ns_name, Topology};
use crate::report::html::{render, LabReport, RunReport};
use crate::report::{write_atomic, ResultDoc, Show};
use crate::{EnvError, Interrupted, UsageError};

/// How `lab run` (and `demo`) was asked to run.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    pub duration: Option<Duration>,
    pub output: Option<PathBuf>,
    pub json: bool,
    pub keep: bool,
    pub quiet: bool,
    /// Print nothing on stdout (the caller shows the returned lines).
    pub silent: bool,
    /// `--max-loss`, `--fail-above`: checked per flow and run once the results are
    /// written.
    pub gates: crate::gates::GateArgs,
    /// `--io`: how the routers' ports move frames (default: each router's choice).
    pub io: Option<lockstep_linux::port::IoMode>,
}

/// Capabilities in `/proc/self/status` `CapEff` that a lab needs: CAP_NET_ADMIN (12),
/// CAP_NET_RAW (13), CAP_SYS_ADMIN (21).
const NEEDED_CAPS: [(u32, &str); 3] = [
    (12, "CAP_NET_ADMIN"),
    (13, "CAP_NET_RAW"),
    (21, "CAP_SYS_ADMIN"),
];

/// The capabilities from `needed` missing in a `/proc/<pid>/status` text.
pub fn missing_caps(status: &str) -> Vec<&'static str> {
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    NEEDED_CAPS
        .iter()
        .filter(|(bit, _)| eff & (1u64 << bit) == 0)
        .map(|(_, n)| *n)
        .collect()
}

/// Refuses (exit 3) without the privileges to build namespaces and raw sockets.
pub fn require_root(what: &str) -> Result<()> {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    let missing = missing_caps(&status);
    if missing.is_empty() {
        return Ok(());
    }
    Err(EnvError(format!(
        "{what} needs root: the lab works with network namespaces, veth links and raw sockets (missing {}). Run it with sudo.",
        missing.join(", ")
    ))
    .into())
}

fn std_dur(d: Duration) -> StdDuration {
    StdDuration::from_nanos(d.as_nanos().max(0) as u64)
}

/// Progress on stderr: one line per step, a line rewritten in place on a terminal.
struct Progress {
    quiet: bool,
    tty: bool,
    prefix: String,
    /// Not a terminal: when the last status line was printed.
    last: std::cell::Cell<Option<StdInstant>>,
}

impl Progress {
    fn line(&self, text: &str) {
        if !self.quiet {
            eprintln!("{}{text}", self.prefix);
        }
    }

    fn status(&self, text: &str, last: bool) {
        if self.quiet {
            return;
        }
        if self.tty {
            eprint!("\r\x1b[2K{}{text}", self.prefix);
            if last {
                eprintln!();
            }
        } else {
            // a log, not a terminal: a line every few seconds
            let due = self
                .last
                .get()
                .is_none_or(|t| t.elapsed() >= StdDuration::from_secs(5));
            if last || due {
                self.last.set(Some(StdInstant::now()));
                eprintln!("{}{text}", self.prefix);
            }
        }
    }
}

/// What a process of a run is: routers and receivers outlive the senders by the
/// drain time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ProcKind {
    Node,
    LoadServer,
    LoadClient,
}

/// Every process of a run; whatever still runs when this is dropped is stopped.
type Procs = Group<ProcKind>;

/// Starts `program args` in namespace `ns`, its output in `logs/<name>.out|.err`. It
/// stays in this process's group: a Ctrl-C at the terminal reaches it too.
fn spawn(
    procs: &mut Procs,
    ns: &str,
    program: &Path,
    args: &[String],
    logs: &Path,
    name: &str,
    kind: ProcKind,
) -> Result<()> {
    let spec = Spec::new(name, program)
        .args(args)
        .netns(Netns::Enter(ns.to_string()))
        .stdout(logs.join(format!("{name}.out")))
        .stderr(logs.join(format!("{name}.err")))
        .in_caller_group();
    procs.spawn(kind, spec)?;
    Ok(())
}

/// Notes exits; returns the first node among them that failed (non-zero status).
fn node_failure(procs: &mut Procs) -> Option<String> {
    procs.poll().into_iter().find_map(|(kind, p)| {
        let s = p.status().filter(|s| !s.success())?;
        (kind == ProcKind::Node)
            .then(|| format!("{} exited with {s}: {}", p.name(), p.stderr_tail()))
    })
}

/// `lockstep node` for node `name` of a run: its node file from `config_dir`, its
/// results into `dir`, started at `start_ns` for `d`.
fn node_args(
    config_dir: &Path,
    dir: &Path,
    ready: Option<&Path>,
    name: &str,
    start_ns: i64,
    d: Duration,
) -> Vec<String> {
    let config = config_dir.join(format!("{name}.toml"));
    let mut args = vec![
        "node".to_string(),
        "--config".into(),
        config.display().to_string(),
    ];
    args.extend(["--output".into(), dir.display().to_string()]);
    if let Some(r) = ready {
        args.extend(["--ready-file".into(), r.join(name).display().to_string()]);
    }
    args.extend(["--start-at-ns".into(), start_ns.to_string()]);
    args.extend(["--duration".into(), d.to_string(), "-q".into()]);
    args
}

/// How the lab's routers move frames unless `--io` says otherwise: AF_XDP, which
/// falls back to the packet socket with a note where the kernel or the interface
/// lacks it. The lab owns its veths, so taking every frame before the kernel's stack
/// costs nothing else; on 2 vCPUs it forwards about 1.6 times what the packet
/// socket does (docs/BENCHMARKS.md). (`lockstep node` on its own keeps the packet
/// socket: a host's interfaces may carry its own traffic too.)
pub const LAB_DEFAULT_IO: lockstep_linux::port::IoMode = lockstep_linux::port::IoMode::Xdp;

/// `--io MODE` for a router's command line: the one asked for, or the lab's default.
fn io_args(io: Option<lockstep_linux::port::IoMode>) -> Vec<String> {
    let m = io.unwrap_or(LAB_DEFAULT_IO);
    vec!["--io".to_string(), m.name().to_string()]
}

/// Does what the fault schedule says is due: a link down or up, a router killed
/// or started again (from its node file, for the rest of the run). Returns notes.
fn inject_due(
    inj: &mut Injector,
    procs: &mut Procs,
    run: &InjectRun<'_>,
    taken: &mut Vec<(usize, i64, i64)>,
) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    let now = lockstep_linux::now(ClockId::Tai).ns;
    for Step {
        at: planned,
        fault,
        action,
    } in inj.due(now)
    {
        let began = lockstep_linux::now(ClockId::Tai).ns;
        match &action {
            Action::Link { ends, up, .. } => inject::set_link(ends, *up)?,
            Action::Kill { node } => {
                if let Some(mut p) = procs.take(node) {
                    p.kill();
                }
            }
            Action::Restart { node } => {
                let d = Duration(run.end_ns.saturating_sub(planned).max(0));
                let mut args = node_args(run.config_dir, run.dir, None, node, planned, d);
                // only routers restart: the same ports as the first process
                args.extend(io_args(run.io));
                let ns = ns_name(run.run_id, node);
                spawn(procs, &ns, run.exe, &args, run.logs, node, ProcKind::Node)?;
            }
        }
        let done = lockstep_linux::now(ClockId::Tai).ns;
        notes.push(inject::note(run.start_ns, planned, (began, done), &action));
        taken.push((fault, began, done));
    }
    Ok(notes)
}

/// What restarting a node needs to know of its run.
struct InjectRun<'a> {
    exe: &'a Path,
    config_dir: &'a Path,
    dir: &'a Path,
    logs: &'a Path,
    run_id: &'a str,
    start_ns: i64,
    /// When the routers' processes end.
    end_ns: i64,
    /// `--io` of the routers.
    io: Option<lockstep_linux::port::IoMode>,
}

fn is_node(k: ProcKind) -> bool {
    k == ProcKind::Node
}

/// What a load did.
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct LoadResult {
    pub load: String,
    pub sent_packets: Option<u64>,
    pub received_packets: Option<u64>,
    pub seconds: Option<f64>,
    pub received_pps: Option<f64>,
    pub received_bps: Option<f64>,
    pub error: Option<String>,
    /// CPU time the whole machine was busy (every CPU, every process: `/proc/stat`
    /// user, nice, system, irq, softirq) while the load ran, in ns, and that window's
    /// length: what forwarding the load cost, with whatever else ran meanwhile.
    pub machine_busy_ns: Option<i64>,
    pub machine_window_ns: Option<i64>,
}

/// One run's outcome.
pub struct RunOutcome {
    pub run: RunSpec,
    pub report: RunReport,
    pub lines: Vec<FlowLine>,
    pub loads: Vec<LoadResult>,
    pub warnings: Vec<String>,
    /// What each injected fault did, and what was done when.
    pub faults: Vec<FaultVerdict>,
    pub fault_log: Vec<String>,
    /// How far the traffic had run when a stop ended the run (its nodes were stopped
    /// and their results collected).
    pub interrupted_at: Option<Duration>,
}

fn load_desc(s: &Scenario, l: &LoadPlan) -> String {
    let tool = match (l.tool, l.proto) {
        (LoadTool::Lockstep, _) => "lockstep",
        (LoadTool::Iperf3, LoadProto::Udp) => "iperf3 udp",
        (LoadTool::Iperf3, LoadProto::Tcp) => "iperf3 tcp",
    };
    let rate = l.rate_bps.map(fmt_bit_rate).unwrap_or_else(|| "max".into());
    let size = l.size.map(|b| format!(" {b}B")).unwrap_or_default();
    format!(
        "load[{}] {tool} {rate}{size} {}→{}",
        l.index, s.nodes[l.from].name, s.nodes[l.to].name
    )
}

/// Payload bytes of the lockstep generator when the scenario does not say.
const DEFAULT_LOAD_SIZE: u32 = 1000;

fn load_server_args(l: &LoadPlan, secs: u64, exe: &Path) -> (PathBuf, Vec<String>) {
    match l.tool {
        LoadTool::Iperf3 => (
            PathBuf::from("iperf3"),
            vec![
                "-s".into(),
                "-1".into(),
                "-J".into(),
                "-B".into(),
                l.dst.ip().to_string(),
                "-p".into(),
                l.dst.port().to_string(),
            ],
        ),
        LoadTool::Lockstep => (
            exe.to_path_buf(),
            vec![
                "probe".into(),
                "sink".into(),
                "--bind".into(),
                l.dst.to_string(),
                "--idle-timeout".into(),
                "off".into(),
                "--duration".into(),
                format!("{secs}s"),
                "--json".into(),
                "-q".into(),
            ],
        ),
    }
}

fn load_client_args(l: &LoadPlan, d: Duration, exe: &Path) -> (PathBuf, Vec<String>) {
    match l.tool {
        LoadTool::Iperf3 => {
            let secs = (d.as_nanos().max(1) as u64).div_ceil(1_000_000_000);
            let mut a = vec![
                "-c".into(),
                l.dst.ip().to_string(),
                "-p".into(),
                l.dst.port().to_string(),
                "-t".into(),
                secs.to_string(),
                "-J".into(),
            ];
            if l.proto == LoadProto::Udp {
                a.push("-u".into());
                a.push("-b".into());
                a.push(l.rate_bps.unwrap_or(0).to_string());
            } else if let Some(r) = l.rate_bps {
                a.push("-b".into());
                a.push(r.to_string());
            }
            if let Some(s) = l.size {
                a.push("-l".into());
                a.push(s.to_string());
            }
            (PathBuf::from("iperf3"), a)
        }
        LoadTool::Lockstep => {
            let size = l.size.unwrap_or(DEFAULT_LOAD_SIZE);
            let pps = (l.rate_bps.unwrap_or(1) as f64 / (f64::from(size) * 8.0)).max(1.0);
            (
                exe.to_path_buf(),
                vec![
                    "probe".into(),
                    "stream".into(),
                    "--to".into(),
                    l.dst.to_string(),
                    "--rate".into(),
                    format!("{}pps", pps.round() as u64),
                    "--size".into(),
                    format!("{size}B"),
                    "--flow".into(),
                    (1000 + l.index).to_string(),
                    // background load: no need to spin for precise send times
                    "--strategy".into(),
                    "sleep".into(),
                    "--duration".into(),
                    format!("{}", d),
                    "--json".into(),
                    "-q".into(),
                ],
            )
        }
    }
}

/// Reads what a load's processes printed.
fn load_result(desc: String, l: &LoadPlan, logs: &Path) -> LoadResult {
    let read = |name: &str| -> Option<Value> {
        let text = fs::read_to_string(logs.join(name)).ok()?;
        serde_json::from_str(&text).ok()
    };
    let mut r = LoadResult {
        load: desc,
        sent_packets: None,
        received_packets: None,
        seconds: None,
        received_pps: None,
        received_bps: None,
        error: None,
        machine_busy_ns: None,
        machine_window_ns: None,
    };
    match l.tool {
        LoadTool::Iperf3 => {
            let Some(v) = read(&format!("load{}-client.out", l.index)) else {
                r.error = Some("no iperf3 client output".into());
                return r;
            };
            if let Some(e) = v.get("error").and_then(Value::as_str) {
                r.error = Some(e.to_string());
            }
            let end = v.get("end").cloned().unwrap_or(Value::Null);
            if l.proto == LoadProto::Udp {
                let sum = end.get("sum").cloned().unwrap_or(Value::Null);
                let packets = sum.get("packets").and_then(Value::as_u64);
                let lost = sum.get("lost_packets").and_then(Value::as_u64);
                let secs = sum.get("seconds").and_then(Value::as_f64);
                r.sent_packets = packets;
                r.received_packets = packets.zip(lost).map(|(p, l)| p.saturating_sub(l));
                r.seconds = secs;
                r.received_pps = r
                    .received_packets
                    .zip(secs)
                    .filter(|(_, s)| *s > 0.0)
                    .map(|(p, s)| p as f64 / s);
                // payload bits delivered (iperf3's own figure is the sender's rate)
                r.received_bps = r
                    .received_pps
                    .map(|p| p * f64::from(l.size.unwrap_or(0)) * 8.0)
                    .filter(|b| *b > 0.0)
                    .or_else(|| sum.get("bits_per_second").and_then(Value::as_f64));
            } else {
                let sum = end.get("sum_received").cloned().unwrap_or(Value::Null);
                r.seconds = sum.get("seconds").and_then(Value::as_f64);
                r.received_bps = sum.get("bits_per_second").and_then(Value::as_f64);
            }
        }
        LoadTool::Lockstep => {
            let client = read(&format!("load{}-client.out", l.index));
            let server = read(&format!("load{}-server.out", l.index));
            let res = |v: &Option<Value>, k: &str| {
                v.as_ref()
                    .and_then(|v| v.get("results"))
                    .and_then(|r| r.get(k))
                    .cloned()
            };
            r.sent_packets = res(&client, "sent").and_then(|v| v.as_u64());
            r.received_packets = res(&server, "probes").and_then(|v| v.as_u64());
            r.received_pps = res(&server, "receive_rate_pps").and_then(|v| v.as_f64());
            r.received_bps = r
                .received_pps
                .map(|p| p * f64::from(l.size.unwrap_or(DEFAULT_LOAD_SIZE)) * 8.0);
            if server.is_none() {
                r.error = Some("no sink output".into());
            }
        }
    }
    r
}

/// The nodes (indices into `p.nodes`) that run in one process, in the order they are
/// given to it: the routers that run the way the first one does (unless
/// `routers = "per-node"`), each preceded by the senders that send into it and join
/// it (`senders = "with-routers"`, running the way the routers do), so that each
/// sender runs in its edge router's thread (`node::router::thread_of`).
fn shared_process(s: &Scenario, p: &Plan) -> Vec<usize> {
    let live = |i: usize| p.nodes[i].config.as_ref().map(|c| &c.live);
    let is_router = |i: usize| matches!(p.nodes[i].role, Role::Edge | Role::Core);
    let first = (0..p.nodes.len()).find(|&i| is_router(i) && live(i).is_some());
    let agrees = |i: usize| match (first.and_then(live), live(i)) {
        (Some(f), Some(l)) => f.thread_difference(l).is_none(),
        _ => false,
    };
    if s.routers == RouterLayout::PerNode {
        return Vec::new();
    }
    let mut out = Vec::new();
    for r in (0..p.nodes.len()).filter(|&i| is_router(i) && agrees(i)) {
        if s.senders == SenderLayout::WithRouters {
            out.extend((0..p.nodes.len()).filter(|&i| {
                p.nodes[i].role == Role::Sender
                    && agrees(i)
                    && p.nodes[i].ifaces.first().map(|f| f.peer) == Some(r)
            }));
        }
        out.push(r);
    }
    out
}

/// Runs one mode/TF of a scenario in `dir`.
fn run_one(
    s: &Scenario,
    p: &Plan,
    dir: &Path,
    opts: &RunOptions,
    progress: &Progress,
) -> Result<RunOutcome> {
    let exe = std::env::current_exe().context("finding the lockstep binary")?;
    let config_dir = dir.join("config");
    let logs = dir.join("logs");
    let ready = dir.join("ready");
    for d in [dir, &config_dir, &logs, &ready] {
        fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    let run_id = new_run_id();
    // The nodes that share one process, each opening its sockets in its own namespace.
    let grouped: Vec<String> = shared_process(s, p)
        .into_iter()
        .map(|i| p.nodes[i].name.clone())
        .collect();
    for n in &p.nodes {
        if let Some(c) = &n.config {
            let mut c = c.clone();
            if grouped.contains(&n.name) {
                c.live.netns = Some(ns_name(&run_id, &n.name));
            }
            let text = super::plan::node_file_toml(&c)
                .map_err(|e| anyhow!("writing the node file of {}: {e}", n.name))?;
            write_atomic(
                &config_dir.join(format!("{}.toml", n.name)),
                text.as_bytes(),
            )?;
        }
    }
    let duration = opts.duration.unwrap_or(s.duration);
    let tf = p.run.tf;
    let cycle = Duration(tf.as_nanos().saturating_mul(i64::from(p.k)));
    let drain = Duration::from_millis(500) + Duration(cycle.as_nanos().saturating_mul(2));

    let started = StdInstant::now();
    let mut topo = Topology::build(p, &run_id)?;
    progress.line(&format!(
        "built {} namespaces (ls-{run_id}-*) in {:.1}s",
        topo.namespaces().len(),
        started.elapsed().as_secs_f64()
    ));
    if opts.keep {
        topo.keep();
    }
    let mut warnings: Vec<String> = topo.notes.clone();

    // One start instant for every node: a cycle boundary a little ahead.
    let nodes_with_process = p.nodes.iter().filter(|n| n.config.is_some()).count();
    let lead = Duration::from_millis(2000 + 150 * nodes_with_process as i64);
    let now = lockstep_linux::now(ClockId::Tai).ns;
    let c = cycle.as_nanos().max(1);
    let start_ns = (now.saturating_add(lead.as_nanos()))
        .div_euclid(c)
        .saturating_add(1)
        .saturating_mul(c);

    let mut procs = Procs::default();
    // receivers, routers, senders
    let order = |r: Role| match r {
        Role::Receiver => 0,
        Role::Edge | Role::Core => 1,
        Role::Sender => 2,
    };
    let mut nodes: Vec<_> = p.nodes.iter().filter(|n| n.config.is_some()).collect();
    nodes.sort_by_key(|n| order(n.role));
    let grouped = if grouped.len() < 2 {
        Vec::new()
    } else {
        grouped
    };
    if let Some(first) = grouped.first() {
        // every shared router (and sender) in one process, started in the first one's
        // namespace (each opens its sockets in its own)
        let routers = p
            .nodes
            .iter()
            .filter(|n| grouped.contains(&n.name) && n.role != Role::Sender)
            .count();
        let threads = match s.routers {
            RouterLayout::OneThread => 1,
            _ => lockstep_linux::host::online_cpus()
                .len()
                .clamp(1, routers.max(1)),
        };
        let mut args = vec!["node".to_string(), "--threads".into(), threads.to_string()];
        for name in &grouped {
            args.push("--config".into());
            args.push(
                config_dir
                    .join(format!("{name}.toml"))
                    .display()
                    .to_string(),
            );
        }
        args.extend([
            "--output".into(),
            dir.display().to_string(),
            "--ready-dir".into(),
            ready.display().to_string(),
            "--start-at-ns".into(),
            start_ns.to_string(),
            "--duration".into(),
            (duration + drain).to_string(),
            "--sender-duration".into(),
            duration.to_string(),
            "-q".into(),
        ]);
        args.extend(io_args(opts.io));
        spawn(
            &mut procs,
            &ns_name(&run_id, first),
            &exe,
            &args,
            &logs,
            "routers",
            ProcKind::Node,
        )?;
    }
    for n in &nodes {
        if grouped.contains(&n.name) {
            continue;
        }
        let d = if n.role == Role::Sender {
            duration
        } else {
            duration + drain
        };
        let mut args = node_args(&config_dir, dir, Some(&ready), &n.name, start_ns, d);
        if matches!(n.role, Role::Edge | Role::Core) {
            args.extend(io_args(opts.io));
        }
        spawn(
            &mut procs,
            &ns_name(&run_id, &n.name),
            &exe,
            &args,
            &logs,
            &n.name,
            ProcKind::Node,
        )?;
    }
    // load servers (sinks) now, clients at the start
    // a sink listens from now until well after the end
    let until_start = Duration(start_ns.saturating_sub(lockstep_linux::now(ClockId::Tai).ns));
    let load_secs = std_dur(until_start + duration + drain).as_secs() + 3;
    for l in &p.loads {
        let (prog, args) = load_server_args(l, load_secs, &exe);
        let ns = ns_name(&run_id, &s.nodes[l.to].name);
        spawn(
            &mut procs,
            &ns,
            &prog,
            &args,
            &logs,
            &format!("load{}-server", l.index),
            ProcKind::LoadServer,
        )?;
    }

    // wait until every node is ready
    let ready_by = start_ns - Duration::from_millis(50).as_nanos();
    loop {
        if signal::stop_requested() {
            return Err(Interrupted(format!("{}: before its traffic started", p.run.label)).into());
        }
        if let Some(f) = node_failure(&mut procs) {
            bail!("a node failed to start: {f}");
        }
        if let Some(p) = procs.first_exited(is_node) {
            bail!("{} stopped before the start: {}", p.name(), p.stderr_tail());
        }
        let missing: Vec<&str> = nodes
            .iter()
            .filter(|n| !ready.join(&n.name).exists())
            .map(|n| n.name.as_str())
            .collect();
        if missing.is_empty() {
            break;
        }
        if lockstep_linux::now(ClockId::Tai).ns > ready_by {
            bail!(
                "not ready {:.1}s after launch: {} (see {})",
                lead.as_secs_f64(),
                missing.join(", "),
                logs.display()
            );
        }
        std::thread::sleep(StdDuration::from_millis(10));
    }
    progress.line(&format!(
        "{} nodes ready; running {duration} from the start of frame {}",
        nodes.len(),
        start_ns / tf.as_nanos().max(1)
    ));
    // the start
    loop {
        let now = lockstep_linux::now(ClockId::Tai).ns;
        if now >= start_ns {
            break;
        }
        if signal::stop_requested() {
            return Err(Interrupted(format!("{}: before its traffic started", p.run.label)).into());
        }
        std::thread::sleep(StdDuration::from_nanos(
            ((start_ns - now) as u64).min(10_000_000),
        ));
    }
    let cpu0 = (lockstep_linux::rusage::machine_cpu(), StdInstant::now());
    let mut cpu1 = None;
    for l in &p.loads {
        let (prog, args) = load_client_args(l, duration, &exe);
        let ns = ns_name(&run_id, &s.nodes[l.from].name);
        spawn(
            &mut procs,
            &ns,
            &prog,
            &args,
            &logs,
            &format!("load{}-client", l.index),
            ProcKind::LoadClient,
        )?;
    }
    let mut injector = Injector::new(s, p, &run_id, start_ns)?;
    let mut fault_log = Vec::new();
    let mut taken = Vec::new();
    let inject_run = InjectRun {
        exe: &exe,
        config_dir: &config_dir,
        dir,
        logs: &logs,
        run_id: &run_id,
        start_ns,
        end_ns: start_ns.saturating_add((duration + drain).as_nanos()),
        io: opts.io,
    };
    let t_start = StdInstant::now();
    let total = std_dur(duration + drain);
    let give_up = total + StdDuration::from_secs(15);
    let mut last_print = StdInstant::now();
    let mut interrupted_at = None;
    loop {
        if signal::stop_requested() {
            // the nodes write what they measured when stopped; it is collected below
            // to the millisecond: how far it got, not when the signal was seen
            let ms = i64::try_from(t_start.elapsed().as_millis()).unwrap_or(i64::MAX);
            interrupted_at = Some(Duration::from_millis(ms));
            progress.status("", true);
            break;
        }
        if let Some(f) = node_failure(&mut procs) {
            warnings.push(f.clone());
            progress.status("", true);
            progress.line(&format!("warning: {f}"));
        }
        for n in inject_due(&mut injector, &mut procs, &inject_run, &mut taken)? {
            progress.line(&n);
            fault_log.push(n);
        }
        if cpu1.is_none() && t_start.elapsed() >= std_dur(duration) {
            cpu1 = Some((lockstep_linux::rusage::machine_cpu(), StdInstant::now()));
        }
        if procs.running(is_node) == 0 {
            break;
        }
        let el = t_start.elapsed();
        if el > give_up {
            warnings.push(format!(
                "{} node(s) still running {:.0}s after the end: stopped",
                procs.running(is_node),
                el.as_secs_f64() - total.as_secs_f64()
            ));
            procs.stop(is_node, StdDuration::from_secs(3));
            break;
        }
        if last_print.elapsed() >= StdDuration::from_millis(500) {
            last_print = StdInstant::now();
            progress.status(
                &format!(
                    "{:.1}s / {}  ({} nodes running)",
                    el.as_secs_f64().min(std_dur(duration).as_secs_f64()),
                    duration,
                    procs.running(is_node)
                ),
                false,
            );
        }
        std::thread::sleep(StdDuration::from_millis(20));
    }
    if cpu1.is_none() && interrupted_at.is_none() {
        // no node process (the kernel forwards): the load's window is the duration
        let left = std_dur(duration).saturating_sub(t_start.elapsed());
        std::thread::sleep(left);
        cpu1 = Some((lockstep_linux::rusage::machine_cpu(), StdInstant::now()));
    }
    if interrupted_at.is_none() {
        progress.status(&format!("{duration} done"), true);
        // the load: clients are done by now; servers get a moment to report
        procs.wait_until(
            |k| !is_node(k),
            StdInstant::now() + StdDuration::from_secs(5),
        );
    }
    procs.stop(|_| true, StdDuration::from_secs(3));
    drop(procs);
    if opts.keep {
        crate::say::say!(
            "kept namespaces {}: remove them with `lockstep lab clean`",
            topo.namespaces().join(" ")
        );
    }
    topo.teardown()?;

    let got = collect(p, dir, (duration + drain).as_nanos());
    let end_ns = start_ns.saturating_add(duration.as_nanos());
    let faults = match p.faults.is_empty() {
        true => Vec::new(),
        false => {
            // judged by when the machine did what the plan said
            let mut p = p.clone();
            p.faults = inject::as_injected(&p.faults, start_ns, &taken);
            let facts = faults::run_facts(&p, start_ns, end_ns);
            faults::judge_lab_run(&p, dir, &got.lines, &facts)
        }
    };
    // what every node says about the host is said once, in the summary's warnings
    let host = lockstep_linux::host::collect().warnings();
    let own: Vec<String> = got
        .warnings
        .iter()
        .filter(|w| !host.iter().any(|h| w.ends_with(h.as_str())))
        .cloned()
        .collect();
    warnings.extend(merge_warnings(&own));
    if let Some(at) = interrupted_at {
        warnings.push(format!(
            "interrupted by SIGINT/SIGTERM {at} into the run of {duration}: the nodes were stopped and what they had measured collected"
        ));
    }
    let busy = match (cpu0, cpu1) {
        ((Some(a), t0), Some((Some(b), t1))) => {
            let d = b.since(a);
            let ns = d.user_ns + d.nice_ns + d.system_ns + d.irq_ns + d.softirq_ns;
            let window = i64::try_from(t1.duration_since(t0).as_nanos()).unwrap_or(i64::MAX);
            Some((ns, window))
        }
        _ => None,
    };
    let loads = p
        .loads
        .iter()
        .map(|l| {
            let mut r = load_result(load_desc(s, l), l, &logs);
            r.machine_busy_ns = busy.map(|b| b.0);
            r.machine_window_ns = busy.map(|b| b.1);
            r
        })
        .collect();
    Ok(RunOutcome {
        run: p.run.clone(),
        report: got.report,
        lines: got.lines,
        loads,
        warnings,
        faults,
        fault_log,
        interrupted_at,
    })
}

/// `node: text` lines with one text for several nodes merged into `a, b: text`.
pub fn merge_warnings(lines: &[String]) -> Vec<String> {
    let mut by_text: Vec<(String, Vec<String>)> = Vec::new();
    for l in lines {
        let (node, text) = l.split_once(": ").unwrap_or(("", l.as_str()));
        match by_text.iter_mut().find(|(t, _)| t == text) {
            Some((_, nodes)) => nodes.push(node.to_string()),
            None => by_text.push((text.to_string(), vec![node.to_string()])),
        }
    }
    by_text
        .into_iter()
        .map(|(t, nodes)| {
            if nodes.iter().all(String::is_empty) {
                t
            } else {
                format!("{}: {t}", nodes.join(", "))
            }
        })
        .collect()
}

/// Where a run of scenario `name` writes when `--output` is not given:
/// `lab-results/<name>-<unix seconds>`.
pub(crate) fn default_output(name: &str) -> PathBuf {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    PathBuf::from("lab-results").join(format!("{name}-{secs}"))
}

/// Tools a scenario needs besides `ip` and `tc`.
fn check_tools(s: &Scenario) -> Result<()> {
    for p in ["ip", "tc"] {
        if cmd::find_program(p).is_none() {
            return Err(EnvError(format!("the lab needs `{p}`: apt-get install iproute2")).into());
        }
    }
    if let Some(l) = s.loads.iter().find(|l| l.tool == LoadTool::Iperf3) {
        if cmd::find_program("iperf3").is_none() {
            let (line, _) = s.source.line_col(l.loc.span.start);
            return Err(EnvError(format!(
                "{}:{line}: {} uses iperf3, which is not installed: apt-get install iperf3",
                s.source.file, l.loc.field
            ))
            .into());
        }
    }
    Ok(())
}

fn load_table(outcomes: &[RunOutcome]) -> Option<String> {
    let runs: Vec<(&str, &[LoadResult])> = outcomes
        .iter()
        .map(|o| (o.run.label.as_str(), &o.loads[..]))
        .collect();
    loads_table(&runs)
}

/// What each run's best-effort loads delivered, a line each (`None`: no loads).
pub(crate) fn loads_table(runs: &[(&str, &[LoadResult])]) -> Option<String> {
    let mut out = String::new();
    for (label, loads) in runs {
        for l in loads.iter() {
            let pps = l
                .received_pps
                .map(|p| format!("{p:.0} pps"))
                .unwrap_or_else(|| "-".into());
            let bps = l
                .received_bps
                .map(|b| format!("{:.1} Mbit/s", b / 1e6))
                .unwrap_or_else(|| "-".into());
            let counts = match (l.sent_packets, l.received_packets) {
                (Some(s), Some(r)) => format!(", {r} of {s} packets"),
                (None, Some(r)) => format!(", {r} packets"),
                _ => String::new(),
            };
            let err = l
                .error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default();
            out.push_str(&format!(
                "{label:<8} {}: delivered {pps}, {bps}{counts}{err}\n",
                l.load
            ));
        }
    }
    (!out.is_empty()).then(|| format!("Best-effort load:\n{out}"))
}

/// Runs every run of a scenario (see the module docs).
pub fn run_scenario(s: &Scenario, opts: &RunOptions) -> Result<ScenarioLines> {
    require_root("lab run")?;
    check_tools(s)?;
    let dir = opts
        .output
        .clone()
        .unwrap_or_else(|| default_output(&s.name));
    fs::create_dir_all(&dir)
        .with_context(|| format!("--output: cannot create {}", dir.display()))?;
    let mut doc = ResultDoc::new(
        "lab.run",
        json!({
            "scenario": s.name,
            "file": s.source.file,
            "duration": opts.duration.unwrap_or(s.duration).to_string(),
            "tf": s.tfs.iter().map(|t| t.to_string()).collect::<Vec<_>>(),
            "k": s.k,
            "modes": s.modes.iter().map(|m| m.name()).collect::<Vec<_>>(),
            "time_scale": s.time_scale,
        }),
    );
    write_atomic(&dir.join("scenario.toml"), s.source.text.as_bytes())?;
    write_atomic(
        &dir.join("host.json"),
        serde_json::to_string_pretty(&doc.host)?.as_bytes(),
    )?;

    if !opts.quiet {
        for w in &doc.warnings {
            crate::say::say!("lab {}: host: {w}", s.name);
        }
    }
    let runs = s.runs();
    let mut outcomes: Vec<RunOutcome> = Vec::new();
    let tty = std::io::stderr().is_terminal();
    // what a stop left undone: the run it cut short, or whose setup it ended
    let mut cut: Option<String> = None;
    for (i, run) in runs.iter().enumerate() {
        if signal::stop_requested() {
            cut = Some(format!("stopped before {}", run.label));
            break;
        }
        let progress = Progress {
            quiet: opts.quiet,
            tty,
            prefix: format!("lab {} [{}/{} {}] ", s.name, i + 1, runs.len(), run.label),
            last: std::cell::Cell::new(None),
        };
        let p = plan(s, run).map_err(|e| UsageError(e.to_string()))?;
        let cycle = Duration(run.tf.as_nanos().saturating_mul(i64::from(s.k)));
        let duration = opts.duration.unwrap_or(s.duration);
        lockstep_plan::fault::check_room(&s.faults, duration, cycle)
            .map_err(|e| UsageError(format!("{}: {e}", s.source.file)))?;
        progress.line(&format!(
            "{} nodes, {} links, {} flows, TF {} k {}",
            p.nodes.len(),
            s.links.len(),
            p.flows.len(),
            run.tf,
            p.k
        ));
        let o = match run_one(s, &p, &dir.join(&run.dir), opts, &progress) {
            Ok(o) => o,
            Err(e) => match e.downcast_ref::<Interrupted>() {
                Some(i) => {
                    cut = Some(i.0.clone());
                    break;
                }
                None => return Err(e.context(format!("run {} of {}", run.label, s.name))),
            },
        };
        for w in fold_notes(&o.warnings) {
            progress.line(&format!("note: {w}"));
        }
        let stopped = o.interrupted_at;
        outcomes.push(o);
        if let Some(at) = stopped {
            cut = Some(format!(
                "{} stopped {at} into its {}",
                run.label,
                opts.duration.unwrap_or(s.duration)
            ));
            break;
        }
    }
    let interrupted = cut.map(|c| {
        let rest: Vec<&str> = runs[outcomes.len()..]
            .iter()
            .map(|r| r.label.as_str())
            .collect();
        match rest.as_slice() {
            [] => c,
            _ => format!("{c}; no results for {}", rest.join(", ")),
        }
    });
    if let Some(i) = &interrupted {
        if outcomes.is_empty() {
            return Err(Interrupted(format!("{i}; nothing measured")).into());
        }
        doc.insert("interrupted", i);
    }

    // the report
    let mut notes: Vec<String> = Vec::new();
    if !s.description.is_empty() {
        notes.push(s.description.clone());
    }
    notes.extend(doc.warnings.iter().map(|w| format!("host: {w}")));
    for o in &outcomes {
        notes.extend(o.warnings.iter().map(|w| format!("{}: {w}", o.run.label)));
        for l in &o.loads {
            notes.push(format!(
                "{}: {}: delivered {}",
                o.run.label,
                l.load,
                l.received_pps
                    .map(|p| format!("{p:.0} pps"))
                    .unwrap_or_else(|| "-".into())
            ));
        }
    }
    let report = LabReport {
        title: match s.time_scale {
            1 => format!("lockstep lab: {}", s.name),
            x => format!(
                "lockstep lab: {} at time scale {x} (times {x}× the scenario's, rates ÷ {x})",
                s.name
            ),
        },
        scenario: s.name.clone(),
        generated_at: doc.started_at.clone(),
        command: doc.command.clone(),
        host: serde_json::to_value(&doc.host).unwrap_or(Value::Null),
        runs: outcomes.iter().map(|o| o.report.clone()).collect(),
        notes,
    };
    let html = render(&report);
    let report_html = dir.join("report.html");
    write_atomic(&report_html, html.as_bytes())?;
    let crossings = opts.gates.check_runs(&report.runs);
    let failed = opts.gates.record(&mut doc, &crossings);
    let faults_ok = faults::fail_on(
        outcomes
            .iter()
            .map(|o| (o.run.label.as_str(), &o.faults[..])),
    );
    doc.check_failed |= faults_ok.is_err();
    doc.insert("report", &report);
    doc.insert(
        "runs",
        outcomes
            .iter()
            .map(|o| {
                json!({
                    "label": o.run.label,
                    "mode": o.run.mode.name(),
                    "tf_ns": o.run.tf.as_nanos(),
                    "dir": o.run.dir,
                    "flows": o.lines,
                    "loads": o.loads,
                    "warnings": o.warnings,
                    "faults": o.faults,
                    "fault_log": o.fault_log,
                })
            })
            .collect::<Vec<_>>(),
    );
    for o in &outcomes {
        for w in &o.warnings {
            doc.warn(format!("{}: {w}", o.run.label));
        }
    }
    let text = serde_json::to_string_pretty(&doc)?;
    write_atomic(&dir.join("summary.json"), text.as_bytes())?;

    // the tables
    let mut human = String::new();
    for o in outcomes.iter().filter(|o| !o.lines.is_empty()) {
        human.push_str(&tables::run_table(&o.run, &o.lines));
        human.push('\n');
    }
    let pairs: Vec<(RunSpec, Vec<FlowLine>)> = outcomes
        .iter()
        .map(|o| (o.run.clone(), o.lines.clone()))
        .collect();
    if let Some(t) = tables::comparison_table(&pairs) {
        human.push_str(&t);
        human.push('\n');
    }
    if let Some(t) = tables::sweep_table(&pairs) {
        human.push_str(&t);
        human.push('\n');
    }
    if let Some(t) = load_table(&outcomes) {
        human.push_str(&t);
        human.push('\n');
    }
    for o in &outcomes {
        human.push_str(&faults::lines(&o.run.label, &o.faults));
    }
    if let Some(i) = &interrupted {
        human.push_str(&format!("interrupted by SIGINT/SIGTERM: {i}\n"));
    }
    human.push_str(&format!(
        "results: {}\nreport:  {}\n",
        dir.display(),
        report_html.display()
    ));
    Show::of_run(opts.json, opts.silent).print(&human, &text);
    if let Some(i) = interrupted {
        return Err(Interrupted(i).into());
    }
    if let Some(e) = failed {
        return Err(e.into());
    }
    faults_ok?;
    Ok(ScenarioLines { dir, runs: pairs })
}

/// The run's notes for a person: notes that say the same of several ports
/// (`r2: to-d234: AF_XDP in copy mode`, or `r1, r3: to-r2: ...` for the same port
/// name on several nodes) become one line naming the ports; the result document
/// keeps every note as it was.
fn fold_notes(notes: &[String]) -> Vec<String> {
    /// `(places, what)` of a note `node: port: what` or `node, node: port: what`,
    /// where no name has a space.
    fn split(n: &str) -> Option<(Vec<String>, &str)> {
        let (nodes, rest) = n.split_once(": ")?;
        let (port, what) = rest.split_once(": ")?;
        let name = |s: &str| !s.is_empty() && !s.contains(' ');
        let nodes: Vec<&str> = nodes.split(", ").collect();
        let named = nodes.iter().all(|n| name(n)) && name(port);
        named.then(|| (nodes.iter().map(|n| format!("{n} {port}")).collect(), what))
    }
    // Per line, in the order first seen: the first note, what it says of a port
    // (none for a note of another shape) and the ports it is said of.
    let mut lines: Vec<(&String, Option<&str>, Vec<String>)> = Vec::new();
    for n in notes {
        match split(n) {
            Some((places, what)) => match lines.iter_mut().find(|l| l.1 == Some(what)) {
                Some(l) => l.2.extend(places),
                None => lines.push((n, Some(what), places)),
            },
            None => lines.push((n, None, Vec::new())),
        }
    }
    const NAMED: usize = 4;
    lines
        .into_iter()
        .map(|(first, what, places)| match (what, places.len()) {
            (Some(what), n) if n > 1 => {
                let named = places[..n.min(NAMED)].join(", ");
                let tail = match n.saturating_sub(NAMED) {
                    0 => String::new(),
                    more => format!(" and {more} more"),
                };
                format!("{what} ({n} ports: {named}{tail})")
            }
            _ => first.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_that_say_the_same_of_several_ports_are_one_line() {
        let notes: Vec<String> = [
            "r1: to-a: AF_XDP in copy mode",
            "r1 used 3 threads",
            "r1: to-b: AF_XDP in copy mode",
            "r2: to-c: offloads are on: turn them off",
            "r2: to-d: AF_XDP in copy mode",
            "r3: to-e: AF_XDP in copy mode",
            "r3: to-f: AF_XDP in copy mode",
            "r1, r3, r4: to-r2: no XDP here",
            "r1, r2: to-r4: no XDP here",
            "r1, r2: two, words: not a port note",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            super::fold_notes(&notes),
            [
                "AF_XDP in copy mode (5 ports: r1 to-a, r1 to-b, r2 to-d, r3 to-e and 1 more)",
                "r1 used 3 threads",
                "r2: to-c: offloads are on: turn them off",
                "no XDP here (5 ports: r1 to-r2, r3 to-r2, r4 to-r2, r1 to-r4 and 1 more)",
                "r1, r2: two, words: not a port note",
            ]
        );
    }

    #[test]
    fn each_sender_joins_the_routers_right_before_its_edge_router() {
        let names = |s: &Scenario| {
            let p = plan(s, &s.runs()[0]).unwrap();
            shared_process(s, &p)
                .into_iter()
                .map(|i| p.nodes[i].name.clone())
                .collect::<Vec<_>>()
        };
        let mut s = Scenario::parse("mesh4.toml", crate::lab::MESH4).unwrap();
        assert_eq!(s.senders, SenderLayout::WithRouters);
        assert_eq!(
            names(&s),
            ["s1234", "s123", "r1", "s234", "r2", "s341", "r3", "s412", "r4"]
        );
        s.senders = SenderLayout::OwnProcess;
        assert_eq!(names(&s), ["r1", "r2", "r3", "r4"]);
        s.routers = RouterLayout::PerNode;
        s.senders = SenderLayout::WithRouters;
        assert!(names(&s).is_empty());
        // a sender that waits differently from the routers keeps its own process
        let text = crate::lab::MESH4.replacen(
            "name = \"s123\"\nrole = \"sender\"",
            "name = \"s123\"\nrole = \"sender\"\nstrategy = \"spin\"",
            1,
        );
        let s = Scenario::parse("mesh4.toml", &text).unwrap();
        assert_eq!(
            names(&s),
            ["s1234", "r1", "s234", "r2", "s341", "r3", "s412", "r4"]
        );
    }

    #[test]
    fn warnings_of_several_nodes_are_merged() {
        let w = ["tx: slow clock", "r1: slow clock", "r1: 3 slips", "plain"].map(String::from);
        assert_eq!(
            merge_warnings(&w),
            ["tx, r1: slow clock", "r1: 3 slips", "plain"]
        );
    }

    #[test]
    fn capabilities_are_read_from_proc_status() {
        let root = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        assert!(missing_caps(root).is_empty());
        let user = "CapEff:\t0000000000000000\n";
        assert_eq!(
            missing_caps(user),
            ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_ADMIN"]
        );
        let raw_only = "CapEff:\t0000000000002000\n";
        assert_eq!(missing_caps(raw_only), ["CAP_NET_ADMIN", "CAP_SYS_ADMIN"]);
        assert_eq!(
            missing_caps(""),
            ["CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_SYS_ADMIN"]
        );
    }
}
