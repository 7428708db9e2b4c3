//! The `rt-service` scenario (garcia Table 2): a request/response server
//! (`probe rr server`) in namespace `srv`, a client (`probe rr client`) in namespace
//! `cli` sending requests at random intervals (1–10 ms), and bulk TCP streams
//! (iperf3) loading the server's host at the same time over other links (namespaces
//! `b1`, `b2`, … each with its own veth to `srv`). One run per configuration:
//!
//! - `untuned`: the server blocks in `recvmsg`, SCHED_OTHER, anywhere; the bulk
//!   processes anywhere; no receive steering (a veth's receive softirq runs on the
//!   sender's CPU);
//! - `rt-priority`: the same with the server at SCHED_FIFO `priority`;
//! - `dedicated-cpu`: the server (SCHED_FIFO, blocking) pinned on `rt_cpu` with its
//!   link's receive processing steered there (RPS), everything else — iperf3 servers
//!   and clients, the bulk links' receive processing — on `other_cpu`;
//! - `separated-rt-path`: the server's real-time socket served by its own
//!   high-priority thread that busy-polls it (`probe rr server --poll --priority P
//!   --cpu rt_cpu`), the rr link's receive processing on that CPU, the bulk links'
//!   receive processing on the other CPU, and the bulk processes free to use every
//!   CPU: bulk traffic is never handled by the real-time thread — garcia's separate
//!   RT poll list, done in user space.
//!
//! The client is the same in every configuration (SCHED_FIFO `priority` + 5, pinned
//! on `other_cpu`, blocking receive): it stands for the remote machine of the paper.
//! Per configuration: mean, p99, p99.9 and std-dev of the response time (the client's
//! round trip), the bulk throughput (iperf3's received bit rate, all streams) and the
//! machine's CPU use over the run (`/proc/stat`, all CPUs).

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use lockstep_core::Duration;
use lockstep_linux::proc::{Group, Proc};
use lockstep_linux::rps;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::method::{exe, read_json, spawn, STOP_GRACE};
use super::scenario::{ScenarioError, Source};
use super::topo::Topology;

/// garcia Table 2 (µs): mean, p99, std-dev.
pub const GARCIA: [(&str, f64, f64, f64); 4] = [
    ("No method (vanilla Linux)", 123.0, 184.9, 22.0),
    ("RT Preempt Patch Only", 91.8, 120.5, 11.8),
    ("Dedicated processor", 58.1, 80.8, 7.7),
    ("Outsourcing", 32.6, 49.5, 2.8),
];
/// garcia Fig. 6: bulk throughput (Gbit/s) of the same four methods.
pub const GARCIA_GBPS: [f64; 4] = [18.8, 16.0, 8.6, 18.8];

/// The four configurations, in garcia's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Config {
    Untuned,
    RtPriority,
    DedicatedCpu,
    SeparatedRtPath,
}

impl Config {
    pub const ALL: [Config; 4] = [
        Config::Untuned,
        Config::RtPriority,
        Config::DedicatedCpu,
        Config::SeparatedRtPath,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Config::Untuned => "untuned",
            Config::RtPriority => "rt-priority",
            Config::DedicatedCpu => "dedicated-cpu",
            Config::SeparatedRtPath => "separated-rt-path",
        }
    }

    pub fn parse(s: &str) -> Option<Config> {
        Config::ALL.into_iter().find(|c| c.name() == s)
    }

    /// The row of garcia Table 2 this configuration stands for.
    pub fn garcia(self) -> usize {
        self as usize
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    scenario: RawRt,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRt {
    #[allow(dead_code)]
    kind: String,
    name: Spanned<String>,
    duration: Option<Spanned<String>>,
    interval: Option<Spanned<String>>,
    rt_cpu: Option<Spanned<i64>>,
    other_cpu: Option<Spanned<i64>>,
    priority: Option<Spanned<i64>>,
    bulk_streams: Option<Spanned<i64>>,
    configurations: Option<Spanned<Vec<Spanned<String>>>>,
}

/// A checked `rt-service` scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RtService {
    pub name: String,
    pub duration: Duration,
    /// `--random-interval` of the client (`1ms..10ms`).
    pub interval: (Duration, Duration),
    pub rt_cpu: usize,
    pub other_cpu: usize,
    pub priority: i32,
    pub bulk_streams: usize,
    pub configurations: Vec<Config>,
}

impl RtService {
    pub fn parse(file: &str, text: &str) -> Result<RtService, ScenarioError> {
        let src = Source {
            file: file.to_string(),
            text: text.to_string(),
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| src.toml_error(&e))?;
        let r = raw.scenario;
        let dur = |s: &Spanned<String>, field: &str| -> Result<Duration, ScenarioError> {
            match Duration::parse(s.get_ref().trim()) {
                Ok(d) if d.is_positive() => Ok(d),
                Ok(_) => Err(src.error(&s.span(), field, "must be above 0")),
                Err(e) => Err(src.error(&s.span(), field, e.to_string())),
            }
        };
        let duration = match &r.duration {
            Some(d) => {
                let v = dur(d, "scenario.duration")?;
                lockstep_core::limits::sim_duration(v)
                    .map_err(|m| src.error(&d.span(), "scenario.duration", m))?;
                v
            }
            None => Duration::from_secs(20),
        };
        let interval = match &r.interval {
            None => (Duration::from_millis(1), Duration::from_millis(10)),
            Some(s) => {
                let Some((a, b)) = s.get_ref().split_once("..") else {
                    return Err(src.error(
                        &s.span(),
                        "scenario.interval",
                        "expected MIN..MAX, like \"1ms..10ms\"",
                    ));
                };
                let a = Duration::parse(a.trim())
                    .map_err(|e| src.error(&s.span(), "scenario.interval", e.to_string()))?;
                let b = Duration::parse(b.trim())
                    .map_err(|e| src.error(&s.span(), "scenario.interval", e.to_string()))?;
                if !a.is_positive() || b < a {
                    return Err(src.error(
                        &s.span(),
                        "scenario.interval",
                        "expected 0 < MIN ≤ MAX",
                    ));
                }
                lockstep_core::limits::interval(a)
                    .and_then(|()| lockstep_core::limits::duration(b))
                    .map_err(|m| src.error(&s.span(), "scenario.interval", m))?;
                (a, b)
            }
        };
        let int = |v: &Option<Spanned<i64>>, field: &str, default: i64, lo: i64, hi: i64| match v {
            None => Ok(default),
            Some(s) if (lo..=hi).contains(s.get_ref()) => Ok(*s.get_ref()),
            Some(s) => Err(src.error(
                &s.span(),
                field,
                format!("expected {lo}..{hi}, got {}", s.get_ref()),
            )),
        };
        let rt_cpu = int(&r.rt_cpu, "scenario.rt_cpu", 1, 0, 4095)? as usize;
        let other_cpu = int(&r.other_cpu, "scenario.other_cpu", 0, 0, 4095)? as usize;
        if rt_cpu == other_cpu {
            let span = r.other_cpu.as_ref().map(|s| s.span()).unwrap_or(0..0);
            return Err(src.error(&span, "scenario.other_cpu", "must differ from rt_cpu"));
        }
        let priority = int(&r.priority, "scenario.priority", 80, 1, 90)? as i32;
        let bulk_streams = int(&r.bulk_streams, "scenario.bulk_streams", 2, 0, 8)? as usize;
        let configurations = match &r.configurations {
            None => Config::ALL.to_vec(),
            Some(list) => {
                let mut v = Vec::new();
                for (i, c) in list.get_ref().iter().enumerate() {
                    let field = format!("scenario.configurations[{i}]");
                    let k = Config::parse(c.get_ref()).ok_or_else(|| {
                        src.error(
                            &c.span(),
                            &field,
                            format!(
                                "expected untuned, rt-priority, dedicated-cpu or separated-rt-path, got \"{}\"",
                                c.get_ref()
                            ),
                        )
                    })?;
                    if v.contains(&k) {
                        return Err(src.error(&c.span(), &field, "listed twice"));
                    }
                    v.push(k);
                }
                if v.is_empty() {
                    return Err(src.error(
                        &list.span(),
                        "scenario.configurations",
                        "give at least one (or leave the field out for all four)",
                    ));
                }
                v
            }
        };
        Ok(RtService {
            name: r.name.get_ref().clone(),
            duration,
            interval,
            rt_cpu,
            other_cpu,
            priority,
            bulk_streams,
            configurations,
        })
    }
}

/// The figures of one configuration.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Row {
    pub config: Option<Config>,
    pub answered: u64,
    pub lost: u64,
    pub mean_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    pub p999_ns: Option<f64>,
    pub std_ns: Option<f64>,
    pub max_ns: Option<f64>,
    /// Sum over the bulk streams, received bit rate.
    pub bulk_bps: Option<f64>,
    /// Busy share of all CPUs over the run (0..1).
    pub cpu_busy: Option<f64>,
    pub notes: Vec<String>,
    /// A stop (SIGINT/SIGTERM) ended this configuration early: its processes were
    /// stopped and what the client had measured read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

const SRV: &str = "10.79.0.1";

/// `ls-<tag>-srv` with `eth0` to `ls-<tag>-cli` and `ethN` to `ls-<tag>-bN`; removed on
/// drop.
struct Star {
    srv: String,
    cli: String,
    bulk: Vec<String>,
    _topo: Topology,
}

impl Star {
    fn build(tag: &str, bulk: usize) -> Result<Star> {
        let srv = format!("ls-{tag}-srv");
        let cli = format!("ls-{tag}-cli");
        let bulk: Vec<String> = (1..=bulk).map(|i| format!("ls-{tag}-b{i}")).collect();
        let mut t = Topology::new();
        t.fresh_namespace(&srv)?;
        let peers = std::iter::once(&cli).chain(&bulk);
        for (net, ns) in peers.enumerate() {
            let dev = format!("eth{net}");
            let net = u8::try_from(net).context("too many bulk streams")?;
            t.fresh_namespace(ns)?;
            t.veth(&srv, &dev, ns, "eth0")?;
            t.addr(&srv, &dev, Ipv4Addr::new(10, 79, net, 1), 24)?;
            t.addr(ns, "eth0", Ipv4Addr::new(10, 79, net, 2), 24)?;
            t.up(&srv, &dev)?;
            t.up(ns, "eth0")?;
        }
        Ok(Star {
            srv,
            cli,
            bulk,
            _topo: t,
        })
    }
}

fn s(x: &str) -> String {
    x.to_string()
}

/// The rr server's command line in a configuration.
pub fn server_command(r: &RtService, c: Config, exe: &str) -> Vec<String> {
    let mut v = vec![
        s(exe),
        s("probe"),
        s("rr"),
        s("server"),
        s("--bind"),
        format!("{SRV}:7000"),
        s("-D"),
        (r.duration + Duration::from_secs(3)).to_string(),
        s("--json"),
        s("-q"),
    ];
    match c {
        Config::Untuned => {}
        Config::RtPriority => v.extend([s("--priority"), r.priority.to_string()]),
        Config::DedicatedCpu => v.extend([
            s("--priority"),
            r.priority.to_string(),
            s("--cpu"),
            r.rt_cpu.to_string(),
        ]),
        Config::SeparatedRtPath => v.extend([
            s("--poll"),
            s("--priority"),
            r.priority.to_string(),
            s("--cpu"),
            r.rt_cpu.to_string(),
        ]),
    }
    v
}

/// The client's command line (the same in every configuration).
pub fn client_command(r: &RtService, exe: &str) -> Vec<String> {
    vec![
        s(exe),
        s("probe"),
        s("rr"),
        s("client"),
        s("--to"),
        format!("{SRV}:7000"),
        s("--random-interval"),
        format!("{}..{}", r.interval.0, r.interval.1),
        s("-D"),
        r.duration.to_string(),
        s("--priority"),
        (r.priority + 5).to_string(),
        s("--cpu"),
        r.other_cpu.to_string(),
        s("--json"),
        s("-q"),
    ]
}

/// `taskset -c CPU` in front of a bulk process when the configuration pins it.
fn bulk_prefix(r: &RtService, c: Config) -> Vec<String> {
    if c == Config::DedicatedCpu {
        vec![s("taskset"), s("-c"), r.other_cpu.to_string()]
    } else {
        Vec::new()
    }
}

fn run_one(r: &RtService, c: Config, tag: &str, dir: &Path) -> Result<Row> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let exe = exe()?;
    let star = Star::build(tag, r.bulk_streams)?;
    let mut row = Row {
        config: Some(c),
        ..Row::default()
    };
    let rt_mask = 1u64 << r.rt_cpu;
    let other_mask = 1u64 << r.other_cpu;
    match c {
        Config::Untuned | Config::RtPriority => {}
        Config::DedicatedCpu => {
            rps::set_cpus(&star.srv, "eth0", rt_mask)?;
            for i in 1..=r.bulk_streams {
                rps::set_cpus(&star.srv, &format!("eth{i}"), other_mask)?;
            }
        }
        // The polling thread never sleeps: the requests' receive work stays where the
        // veth hands it over (the client's CPU), the thread only reads its socket.
        Config::SeparatedRtPath => {
            for i in 1..=r.bulk_streams {
                rps::set_cpus(&star.srv, &format!("eth{i}"), other_mask)?;
            }
        }
    }
    let secs = (r.duration.as_nanos() / 1_000_000_000).max(1);
    // the servers, stopped together at the end (or on drop)
    let mut servers: Group<()> = Group::new();
    let server = spawn("server", Some(&star.srv), &server_command(r, c, &exe), dir)?;
    servers.push((), server);
    for i in 1..=r.bulk_streams {
        let mut argv = bulk_prefix(r, c);
        argv.extend([
            s("iperf3"),
            s("-s"),
            s("-1"),
            s("-B"),
            format!("10.79.{i}.1"),
            s("-p"),
            (5200 + i).to_string(),
        ]);
        let name = format!("iperf3-server-{i}");
        servers.push((), spawn(&name, Some(&star.srv), &argv, dir)?);
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut clients: Vec<Proc> = Vec::new();
    for (i, ns) in star.bulk.iter().enumerate() {
        let i = i + 1;
        let mut argv = bulk_prefix(r, c);
        argv.extend([
            s("iperf3"),
            s("-c"),
            format!("10.79.{i}.1"),
            s("-p"),
            (5200 + i).to_string(),
            s("-t"),
            (secs + 2).to_string(),
            s("--json"),
        ]);
        clients.push(spawn(&format!("iperf3-client-{i}"), Some(ns), &argv, dir)?);
    }
    // the bulk streams ramp up for a second before the measurement starts
    std::thread::sleep(std::time::Duration::from_secs(1));
    let m0 = lockstep_linux::rusage::machine_cpu();
    let mut client = spawn("client", Some(&star.cli), &client_command(r, &exe), dir)?;
    // a stop asked of lockstep is passed on: the client writes what it measured
    let e = client.wait_or_stop(crate::stop::CHILD_GRACE)?;
    let m1 = lockstep_linux::rusage::machine_cpu();
    row.interrupted = e.stopped;
    if e.stopped {
        row.notes
            .push("interrupted by SIGINT/SIGTERM: stopped early".into());
    } else if !e.status.success() {
        row.notes.push(format!("client exited with {}", e.status));
    }
    for p in clients.iter_mut() {
        let e = p.wait_or_stop(crate::stop::CHILD_GRACE)?;
        if !e.status.success() && !e.stopped {
            row.notes
                .push(format!("{} exited with {}", p.name(), e.status));
        }
    }
    servers.stop(|_| true, STOP_GRACE);
    if let (Some(a), Some(b)) = (m0, m1) {
        let d = b.since(a);
        let total = d.user_ns
            + d.nice_ns
            + d.system_ns
            + d.idle_ns
            + d.iowait_ns
            + d.irq_ns
            + d.softirq_ns
            + d.steal_ns;
        if total > 0 {
            row.cpu_busy = Some(1.0 - d.idle_ns as f64 / total as f64);
        }
    }
    if let Some(v) = read_json(&dir.join("client.json")) {
        let res = &v["results"];
        row.answered = res["answered"].as_u64().unwrap_or(0);
        row.lost = res["lost"].as_u64().unwrap_or(0);
        let rtt = &res["rtt"];
        row.mean_ns = rtt["mean_ns"].as_f64();
        row.p99_ns = rtt["percentiles_ns"]["99"].as_f64();
        row.p999_ns = rtt["percentiles_ns"]["99.9"].as_f64();
        row.std_ns = rtt["stddev_ns"].as_f64();
        row.max_ns = rtt["max_ns"].as_f64();
    }
    let mut bps = 0.0;
    let mut have = 0;
    for i in 1..=r.bulk_streams {
        if let Some(v) = read_json(&dir.join(format!("iperf3-client-{i}.json"))) {
            if let Some(b) = v["end"]["sum_received"]["bits_per_second"].as_f64() {
                bps += b;
                have += 1;
            }
        }
    }
    if have == r.bulk_streams && have > 0 {
        row.bulk_bps = Some(bps);
    } else if r.bulk_streams > 0 {
        row.notes.push(format!(
            "only {have} of {} bulk streams reported",
            r.bulk_streams
        ));
    }
    Ok(row)
}

fn us(v: Option<f64>) -> String {
    v.map(|n| format!("{:.1}", n / 1000.0))
        .unwrap_or_else(|| "-".into())
}

/// The table: our figures per configuration next to garcia Table 2.
pub fn table(rows: &[Row]) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>6} | garcia Table 2 (row) mean/p99/sd µs, Gbit/s",
        "configuration", "mean µs", "p99", "p99.9", "std-dev", "max", "bulk Gb/s", "CPU %"
    );
    for r in rows {
        let Some(c) = r.config else { continue };
        let (gname, gm, gp, gs) = GARCIA[c.garcia()];
        let _ = writeln!(
            t,
            "{:<18} {:>8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>6} | {gname}: {gm}/{gp}/{gs}, {}",
            c.name(),
            us(r.mean_ns),
            us(r.p99_ns),
            us(r.p999_ns),
            us(r.std_ns),
            us(r.max_ns),
            r.bulk_bps
                .map(|b| format!("{:.2}", b / 1e9))
                .unwrap_or_else(|| "-".into()),
            r.cpu_busy
                .map(|b| format!("{:.0}", b * 100.0))
                .unwrap_or_else(|| "-".into()),
            GARCIA_GBPS[c.garcia()]
        );
    }
    t
}

/// The target: the best configuration's p99 ≥ 3× lower than untuned while
/// keeping ≥ 90 % of the untuned bulk throughput. `(best, p99 ratio, throughput
/// share, met)`.
pub fn verdict(rows: &[Row]) -> Option<(Config, f64, f64, bool)> {
    let base = rows.iter().find(|r| r.config == Some(Config::Untuned))?;
    let (bp, bb) = (base.p99_ns?, base.bulk_bps?);
    rows.iter()
        .filter(|r| r.config != Some(Config::Untuned))
        .filter_map(|r| {
            let ratio = bp / r.p99_ns?;
            let share = r.bulk_bps? / bb;
            Some((r.config?, ratio, share, ratio >= 3.0 && share >= 0.9))
        })
        .max_by(|a, b| {
            (a.3, a.1)
                .partial_cmp(&(b.3, b.1))
                .unwrap_or(std::cmp::Ordering::Equal)
        })
}

/// report.html: one run per configuration, the requests' response time (PMF) and
/// its split as the client measured it; the table as notes.
fn html_report(
    r: &RtService,
    doc: &crate::report::ResultDoc,
    out: &Path,
    tab: &str,
) -> crate::report::html::LabReport {
    use crate::report::html::{components, summary_of, FlowReport, LabReport, RunReport};
    let parts = [
        ("client send path", "send_path"),
        ("network", "network"),
        ("server turnaround", "turnaround"),
        ("client receive path", "rx_path"),
    ];
    let runs = r
        .configurations
        .iter()
        .map(|c| {
            let res = read_json(&out.join(c.name()).join("client.json"))
                .map(|v| v["results"].clone())
                .unwrap_or_default();
            RunReport {
                label: c.name().to_string(),
                tf_ns: None,
                flows: vec![FlowReport {
                    name: "requests (response time)".to_string(),
                    latency: summary_of(&res["rtt"]),
                    decomposition: components(&res, &parts),
                    sent: res["sent"].as_u64().unwrap_or(0),
                    received: res["answered"].as_u64().unwrap_or(0),
                    lost: res["lost"].as_u64().unwrap_or(0),
                    ..FlowReport::default()
                }],
                hops: Vec::new(),
                bound_note: None,
            }
        })
        .collect();
    LabReport::for_doc(
        format!("lockstep lab: {} (rt-service, garcia Table 2)", r.name),
        &r.name,
        doc,
        runs,
        tab,
    )
}

pub fn describe(r: &RtService) -> String {
    let mut t = format!(
        "scenario {} (rt-service, garcia Table 2): OK\n{} per configuration, requests every {}..{}, {} bulk TCP streams, RT CPU {}, other CPU {}\n",
        r.name, r.duration, r.interval.0, r.interval.1, r.bulk_streams, r.rt_cpu, r.other_cpu
    );
    for c in &r.configurations {
        let _ = writeln!(
            t,
            "  {}: {}",
            c.name(),
            server_command(r, *c, "lockstep").join(" ")
        );
    }
    let _ = writeln!(t, "  client: {}", client_command(r, "lockstep").join(" "));
    t
}

pub fn run(
    r: &RtService,
    duration: Option<Duration>,
    output: Option<PathBuf>,
    json: bool,
    quiet: bool,
    gates: &crate::gates::GateArgs,
) -> Result<()> {
    super::run::require_root("lab run")?;
    let mut r = r.clone();
    if let Some(d) = duration {
        r.duration = d;
    }
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if r.rt_cpu >= ncpu || r.other_cpu >= ncpu {
        return Err(crate::UsageError(format!(
            "scenario.rt_cpu/other_cpu: this host has CPUs 0..{}",
            ncpu - 1
        ))
        .into());
    }
    if r.bulk_streams > 0 && lockstep_linux::cmd::find_program("iperf3").is_none() {
        return Err(crate::EnvError(
            "iperf3 is not installed (Debian: apt-get install iperf3); set bulk_streams = 0 to run without the bulk load".into(),
        )
        .into());
    }
    let out = output.unwrap_or_else(|| super::run::default_output(&r.name));
    let tag = format!("rts{}", std::process::id());
    let mut rows: Vec<Row> = Vec::new();
    for c in &r.configurations {
        if crate::stop::stop_requested() {
            break;
        }
        if !quiet {
            eprintln!("{}: running {} …", c.name(), r.duration);
        }
        let row = run_one(&r, *c, &tag, &out.join(c.name()))?;
        if !quiet {
            for n in &row.notes {
                eprintln!("  {}: {n}", c.name());
            }
        }
        let stopped = row.interrupted;
        rows.push(row);
        if stopped {
            break;
        }
    }
    // what a stop left undone: the configuration it cut short, those not run
    let interrupted = crate::stop::stop_requested().then(|| {
        let mut t = match rows.last() {
            Some(row) if row.interrupted => format!(
                "{} stopped early",
                row.config.map_or("a configuration", |c| c.name())
            ),
            _ => "stopped between configurations".to_string(),
        };
        let rest: Vec<&str> = r.configurations[rows.len()..]
            .iter()
            .map(|c| c.name())
            .collect();
        if !rest.is_empty() {
            t.push_str(&format!("; not run: {}", rest.join(", ")));
        }
        t
    });
    let mut tab = table(&rows);
    if let Some(i) = &interrupted {
        let _ = writeln!(tab, "interrupted by SIGINT/SIGTERM: {i}");
    }
    let v = verdict(&rows);
    match v {
        Some((c, ratio, share, met)) => {
            let _ = writeln!(
                tab,
                "best: {}: p99 {ratio:.2}× lower than untuned with {:.0} % of its bulk throughput — target (≥ 3×, ≥ 90 %) {}",
                c.name(),
                share * 100.0,
                if met { "met" } else { "NOT met" }
            );
        }
        None => {
            let _ = writeln!(tab, "target: cannot judge (untuned or its figures missing)");
        }
    }
    let throttling = super::method::throttling_note();
    if let Some(t) = &throttling {
        let _ = writeln!(tab, "note: {t}");
    }
    let mut doc = crate::report::ResultDoc::new("lab.rt-service", &r);
    if let Some(i) = &interrupted {
        doc.insert("interrupted", i);
    }
    doc.insert("rt_throttling", &throttling);
    doc.insert("rows", &rows);
    doc.insert(
        "garcia_table2_us",
        GARCIA
            .iter()
            .zip(GARCIA_GBPS)
            .map(|((n, m, p, s), g)| serde_json::json!({"method": n, "mean": m, "p99": p, "sd": s, "gbps": g}))
            .collect::<Vec<_>>(),
    );
    doc.insert(
        "target",
        v.map(|(c, ratio, share, met)| {
            serde_json::json!({"best": c, "p99_ratio": ratio, "bulk_share": share, "met": met})
        }),
    );
    let report = html_report(&r, &doc, &out, &tab);
    let crossings = gates.check_runs(&report.runs);
    let failed = gates.record(&mut doc, &crossings);
    // what report.html shows, so that `lockstep report` can make it again
    doc.insert("report", &report);
    let text = serde_json::to_string_pretty(&doc)?;
    crate::report::finish_lab_run(&out, &text, &report, &tab, json)?;
    if let Some(i) = interrupted {
        crate::say::say!("results: {}", out.display());
        return Err(crate::Interrupted(i).into());
    }
    if rows.iter().all(|x| x.answered == 0) {
        bail!(
            "no request was answered in any configuration (see {})",
            out.display()
        );
    }
    crate::say::say!("results: {}", out.display());
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "[scenario]\nkind = \"rt-service\"\nname = \"rt\"\nduration = \"2s\"\n";

    #[test]
    fn parses_defaults_and_errors() {
        let r = RtService::parse("r.toml", GOOD).unwrap();
        assert_eq!(r.configurations, Config::ALL.to_vec());
        assert_eq!(
            r.interval,
            (Duration::from_millis(1), Duration::from_millis(10))
        );
        assert_eq!(r.bulk_streams, 2);
        let e = RtService::parse(
            "r.toml",
            &format!("{GOOD}configurations = [\"untuned\", \"fast\"]\n"),
        )
        .unwrap_err();
        assert_eq!(
            (e.line, e.field.as_str()),
            (5, "scenario.configurations[1]")
        );
        let e =
            RtService::parse("r.toml", &format!("{GOOD}interval = \"10ms..1ms\"\n")).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (5, "scenario.interval"));
        let e = RtService::parse("r.toml", &format!("{GOOD}rt_cpu = 0\n")).unwrap_err();
        assert_eq!(e.field, "scenario.other_cpu");
        let e = RtService::parse("r.toml", &format!("{GOOD}bulk = 2\n")).unwrap_err();
        assert_eq!((e.line, e.field.as_str()), (5, "scenario.bulk"));
    }

    #[test]
    fn durations_have_limits() {
        let e = |extra: &str| {
            RtService::parse("r.toml", &format!("{GOOD}{extra}\n"))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            e("interval = \"500ns..1ms\""),
            "r.toml:5:12: scenario.interval: 500ns is below the limit of 1us"
        );
        assert_eq!(
            e("interval = \"1ms..700000s\""),
            "r.toml:5:12: scenario.interval: 700000s is above the limit of 7 days (604800s)"
        );
        let text = GOOD.replace("\"2s\"", "\"86401s\"");
        assert_eq!(
            RtService::parse("r.toml", &text).unwrap_err().to_string(),
            "r.toml:4:12: scenario.duration: 86401s is above the limit of 1 day (86400s)"
        );
    }

    #[test]
    fn server_modes() {
        let r = RtService::parse("r.toml", GOOD).unwrap();
        let u = server_command(&r, Config::Untuned, "x");
        assert!(!u.contains(&s("--priority")) && !u.contains(&s("--poll")));
        let d = server_command(&r, Config::DedicatedCpu, "x");
        assert!(d.windows(2).any(|w| w == ["--cpu", "1"]) && !d.contains(&s("--poll")));
        let p = server_command(&r, Config::SeparatedRtPath, "x");
        assert!(p.contains(&s("--poll")) && p.windows(2).any(|w| w == ["--priority", "80"]));
    }

    #[test]
    fn verdict_picks_the_best_meeting_row() {
        let row = |c, p99: f64, bps: f64| Row {
            config: Some(c),
            p99_ns: Some(p99),
            bulk_bps: Some(bps),
            ..Row::default()
        };
        let rows = vec![
            row(Config::Untuned, 300.0, 100.0),
            row(Config::RtPriority, 150.0, 100.0),
            row(Config::DedicatedCpu, 50.0, 50.0),
            row(Config::SeparatedRtPath, 100.0, 95.0),
        ];
        let (c, ratio, share, met) = verdict(&rows).unwrap();
        assert_eq!(
            (c, ratio, share, met),
            (Config::SeparatedRtPath, 3.0, 0.95, true)
        );
        let rows = vec![
            row(Config::Untuned, 300.0, 100.0),
            row(Config::DedicatedCpu, 50.0, 50.0),
        ];
        assert_eq!(
            verdict(&rows),
            Some((Config::DedicatedCpu, 6.0, 0.5, false))
        );
    }
}
