//! The `shaped-switch` scenario (loeser Fig. 4, Tables 4–5): hosts A–E on a Linux
//! bridge whose port towards B sends at 100 Mbit/s (tc tbf, one FIFO). C, D and E send
//! symmetric bursts through lockstep's `Ts`-refilled token bucket; A sends a small probe
//! every period. Per `Ts` the report puts the SPEC §4 bound for A's packets next to the
//! observed maximum delay, the loss and the shapers' CPU time.
//!
//! The scenario file is `[scenario] kind = "shaped-switch"` with its own fields; it
//! does not use the node/link/flow tables of the other scenarios.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{bail, Context, Result};
use lockstep_core::units::{BitRate, Size};
use lockstep_core::Duration;
use lockstep_netcalc::{fifo_port, PortFlow, Q};
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::scenario::{ScenarioError, Source};

/// What a UDP/IPv4 datagram adds on Ethernet (14 + 20 + 8 bytes; loeser's 1514-byte
/// frames count neither FCS nor preamble).
const FRAME_OVERHEAD: u64 = 42;
/// loeser Table 4 (t_max, t_est, t_obs in µs; t_max/t_est include their 80 µs) and
/// Table 5 (CPU % of C, D, E), for Ts = 10 ms, 1 ms, 100 µs.
const LOESER: [(i64, [f64; 3], [f64; 3]); 3] = [
    (10_000_000, [9357.0, 9731.0, 8759.0], [4.1, 2.9, 2.3]),
    (1_000_000, [1380.0, 1345.0, 1300.0], [11.0, 9.0, 7.2]),
    (100_000, [582.0, 506.0, 438.0], [21.2, 17.2, 11.9]),
];
/// Names of the shaped senders, in the order of `rates`.
const SHAPED: [&str; 3] = ["c", "d", "e"];

/// True when a scenario file asks for this scenario (`[scenario] kind`).
pub fn is_shaped(text: &str) -> bool {
    toml::from_str::<toml::Table>(text)
        .ok()
        .and_then(|t| {
            t.get("scenario")?
                .get("kind")?
                .as_str()
                .map(|k| k == "shaped-switch")
        })
        .unwrap_or(false)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    scenario: RawShaped,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShaped {
    #[allow(dead_code)]
    kind: String,
    name: Spanned<String>,
    port_rate: Spanned<String>,
    t_mux: Option<Spanned<String>>,
    ts: Spanned<Vec<Spanned<String>>>,
    rates: Spanned<Vec<Spanned<String>>>,
    payload: Option<Spanned<String>>,
    probe_period: Option<Spanned<String>>,
    probe_size: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    strategy: Option<Spanned<String>>,
}

/// A checked `shaped-switch` scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Shaped {
    pub name: String,
    pub port_rate: BitRate,
    pub t_mux: Duration,
    pub ts: Vec<Duration>,
    /// Rates of C, D, E.
    pub rates: Vec<BitRate>,
    /// UDP payload of the shaped flows.
    pub payload: Size,
    pub probe_period: Duration,
    pub probe_size: Size,
    pub duration: Duration,
    /// `--strategy` of the senders: sleep (default) leaves the CPU to the others on a
    /// small host; hybrid or spin wake more precisely but each keeps a core busy.
    pub strategy: String,
}

fn dur(src: &Source, s: &Spanned<String>, field: &str) -> Result<Duration, ScenarioError> {
    Duration::parse(s.get_ref())
        .map_err(|e| src.error(&s.span(), field, e.to_string()))
        .and_then(|d| {
            if d.is_negative() {
                Err(src.error(&s.span(), field, "must not be negative"))
            } else {
                Ok(d)
            }
        })
}

fn positive(src: &Source, s: &Spanned<String>, field: &str) -> Result<Duration, ScenarioError> {
    let d = dur(src, s, field)?;
    if d.is_positive() {
        Ok(d)
    } else {
        Err(src.error(&s.span(), field, "must be above 0"))
    }
}

fn rate(src: &Source, s: &Spanned<String>, field: &str) -> Result<BitRate, ScenarioError> {
    match s.get_ref().parse::<BitRate>() {
        Ok(r) if r.0 > 0 => Ok(r),
        Ok(_) => Err(src.error(&s.span(), field, "must be above 0")),
        Err(e) => Err(src.error(&s.span(), field, e.to_string())),
    }
}

fn size(src: &Source, s: &Spanned<String>, field: &str) -> Result<Size, ScenarioError> {
    s.get_ref()
        .parse::<Size>()
        .map_err(|e| src.error(&s.span(), field, e.to_string()))
}

impl Shaped {
    /// Parses and checks the file; errors name file, line and field.
    pub fn parse(file: &str, text: &str) -> Result<Shaped, ScenarioError> {
        let src = Source {
            file: file.to_string(),
            text: text.to_string(),
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            src.error(&span, "", e.message().to_string())
        })?;
        let r = raw.scenario;
        let port_rate = rate(&src, &r.port_rate, "scenario.port_rate")?;
        let t_mux = match &r.t_mux {
            Some(s) => dur(&src, s, "scenario.t_mux")?,
            None => Duration::ZERO,
        };
        let mut ts = Vec::new();
        for (i, s) in r.ts.get_ref().iter().enumerate() {
            ts.push(positive(&src, s, &format!("scenario.ts[{i}]"))?);
        }
        if ts.is_empty() {
            return Err(src.error(&r.ts.span(), "scenario.ts", "give at least one Ts"));
        }
        let mut rates = Vec::new();
        for (i, s) in r.rates.get_ref().iter().enumerate() {
            rates.push(rate(&src, s, &format!("scenario.rates[{i}]"))?);
        }
        if rates.len() != SHAPED.len() {
            return Err(src.error(
                &r.rates.span(),
                "scenario.rates",
                "expected three rates (C, D, E)",
            ));
        }
        let total: u128 = rates.iter().map(|r| u128::from(r.0)).sum();
        if total >= u128::from(port_rate.0) {
            return Err(src.error(
                &r.rates.span(),
                "scenario.rates",
                "their sum must stay below port_rate (A's probe needs room too)",
            ));
        }
        let payload = match &r.payload {
            Some(s) => size(&src, s, "scenario.payload")?,
            None => Size(1472),
        };
        let probe_size = match &r.probe_size {
            Some(s) => size(&src, s, "scenario.probe_size")?,
            None => Size(64),
        };
        for (v, s, f) in [
            (payload, &r.payload, "scenario.payload"),
            (probe_size, &r.probe_size, "scenario.probe_size"),
        ] {
            if !(64..=1472).contains(&v.0) {
                let span: Range<usize> = s.as_ref().map(|s| s.span()).unwrap_or(0..0);
                return Err(src.error(&span, f, "expected 64B to 1472B (one Ethernet frame)"));
            }
        }
        let probe_period = match &r.probe_period {
            Some(s) => positive(&src, s, "scenario.probe_period")?,
            None => Duration::from_millis(1),
        };
        let duration = match &r.duration {
            Some(s) => positive(&src, s, "scenario.duration")?,
            None => Duration::from_secs(5),
        };
        let strategy = match &r.strategy {
            Some(st) => match st.get_ref().as_str() {
                v @ ("sleep" | "hybrid" | "spin") => v.to_string(),
                other => {
                    return Err(src.error(
                        &st.span(),
                        "scenario.strategy",
                        format!("expected sleep, hybrid or spin, got \"{other}\""),
                    ))
                }
            },
            None => "sleep".to_string(),
        };
        let name = r.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(src.error(&r.name.span(), "scenario.name", "must not be empty"));
        }
        let s = Shaped {
            name,
            port_rate,
            t_mux,
            ts,
            rates,
            payload,
            probe_period,
            probe_size,
            duration,
            strategy,
        };
        // the bound must be computable for every Ts (checks r < C, b ≥ M)
        for (i, t) in s.ts.iter().enumerate() {
            if let Err(e) = s.bound(*t) {
                let span = r.ts.get_ref().get(i).map(|x| x.span()).unwrap_or(0..0);
                return Err(src.error(&span, format!("scenario.ts[{i}]"), e.to_string()));
            }
        }
        Ok(s)
    }

    /// Bytes of the shaped flows' buckets at `ts`: `r·Ts + M` (loeser Table 3),
    /// rounded up to a whole byte.
    pub fn bucket_bytes(&self, rate: BitRate, ts: Duration) -> u64 {
        let bits = u128::from(rate.0) * ts.as_nanos().max(0) as u128;
        let bytes = bits.div_ceil(8 * 1_000_000_000);
        u64::try_from(bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(self.payload.0 + FRAME_OVERHEAD)
    }

    /// The SPEC §4 bound for A's packets at `ts`: one FIFO port at `port_rate` with
    /// `t_mux`; C, D, E as token buckets `(r, bucket + r·Ts)` (the affine envelope of a
    /// `Ts`-refilled bucket, `Shaper::affine_burst_nanobits`), A as `(M/period, M)`.
    pub fn bound(&self, ts: Duration) -> Result<Bound, lockstep_netcalc::FifoPortError> {
        self.bound_with(ts, true)
    }

    /// [`Shaped::bound`] with `b = bucket` for C, D, E when `envelope` is false:
    /// loeser's convention (Table 4), which leaves out the `r·Ts` a bucket refilled
    /// once per `Ts` can add.
    pub fn bound_with(
        &self,
        ts: Duration,
        envelope: bool,
    ) -> Result<Bound, lockstep_netcalc::FifoPortError> {
        let c = Q::int(self.port_rate.0 as i64);
        let t_mux = Q::ratio(i128::from(self.t_mux.as_nanos()), 1_000_000_000).unwrap_or(Q::zero());
        let ts_s = Q::ratio(i128::from(ts.as_nanos()), 1_000_000_000).unwrap_or(Q::zero());
        let m = Q::int(((self.payload.0 + FRAME_OVERHEAD) * 8) as i64);
        let mut flows = Vec::new();
        for r in &self.rates {
            let rq = Q::int(r.0 as i64);
            let bucket = Q::int((self.bucket_bytes(*r, ts) * 8) as i64);
            let b = if envelope {
                &bucket + &(&rq * &ts_s)
            } else {
                bucket
            };
            flows.push(PortFlow::new(rq, b, m.clone()));
        }
        let ma = Q::int(((self.probe_size.0 + FRAME_OVERHEAD) * 8) as i64);
        let period =
            Q::ratio(i128::from(self.probe_period.as_nanos()), 1_000_000_000).unwrap_or(Q::one());
        let ra = &ma / &period;
        flows.push(PortFlow::new(ra, ma.clone(), ma));
        let p = fifo_port(&c, &t_mux, &flows)?;
        Ok(Bound {
            delay: p.delay,
            delay_estimate: p.delay_estimate,
            backlog: p.backlog,
        })
    }

    /// The probe command lines of one run (without the executable and netns prefix).
    pub fn commands(
        &self,
        ts: Duration,
        start_at_ns: i64,
        dir: &Path,
    ) -> Vec<(String, Vec<String>)> {
        let d = self.duration.to_string();
        let idle = "1s".to_string();
        let p = |f: &str| dir.join(f).display().to_string();
        let mut v = vec![
            (
                "b".to_string(),
                vec![
                    "probe".into(),
                    "sink".into(),
                    "--bind".into(),
                    format!("{}:9000", addr("b")),
                    "--idle-timeout".into(),
                    idle.clone(),
                    "--json".into(),
                ],
            ),
            (
                "b".to_string(),
                vec![
                    "probe".into(),
                    "sink".into(),
                    "--bind".into(),
                    format!("{}:9001", addr("b")),
                    "--idle-timeout".into(),
                    idle,
                    "--json".into(),
                ],
            ),
            (
                "a".to_string(),
                vec![
                    "probe".into(),
                    "stream".into(),
                    "--to".into(),
                    format!("{}:9000", addr("b")),
                    "--period".into(),
                    self.probe_period.to_string(),
                    "--size".into(),
                    format!("{}B", self.probe_size.0),
                    "--start-at-ns".into(),
                    start_at_ns.to_string(),
                    "--strategy".into(),
                    self.strategy.clone(),
                    "-D".into(),
                    d.clone(),
                    "--json".into(),
                ],
            ),
        ];
        for (i, (h, r)) in SHAPED.iter().zip(&self.rates).enumerate() {
            v.push((
                h.to_string(),
                vec![
                    "probe".into(),
                    "stream".into(),
                    "--to".into(),
                    format!("{}:9001", addr("b")),
                    "--flow".into(),
                    (i + 1).to_string(),
                    "--shape".into(),
                    format!("{}bit/s,{}B,{}", r.0, self.bucket_bytes(*r, ts), ts),
                    "--symmetric-burst".into(),
                    "--size".into(),
                    format!("{}B", self.payload.0),
                    "--start-at-ns".into(),
                    start_at_ns.to_string(),
                    "--strategy".into(),
                    self.strategy.clone(),
                    "-D".into(),
                    d.clone(),
                    "--json".into(),
                ],
            ));
        }
        let _ = p;
        v
    }
}

/// The bound for A's packets at one `Ts`, in seconds and bits (exact).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bound {
    /// Eq. 6.
    pub delay: Q,
    /// Eq. 7, the rule of thumb `Σb/C + t_mux`.
    pub delay_estimate: Q,
    /// Eq. 4, bits.
    pub backlog: Q,
}

fn addr(host: &str) -> String {
    let i = ["a", "b", "c", "d", "e"]
        .iter()
        .position(|h| *h == host)
        .unwrap_or(0);
    format!("10.77.0.{}", i + 1)
}

fn ns_name(host: &str) -> String {
    format!("ls-shp-{host}")
}

const HOSTS: [&str; 5] = ["a", "b", "c", "d", "e"];
const SWITCH: &str = "ls-shp-sw";

fn ip(args: &[&str]) -> Result<()> {
    lockstep_linux::cmd::ip(args)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Builds the switch: namespaces, veths, the bridge and the tbf on B's port.
fn build(s: &Shaped) -> Result<()> {
    ip(&["netns", "add", SWITCH])?;
    ip(&["-n", SWITCH, "link", "add", "br0", "type", "bridge"])?;
    ip(&["-n", SWITCH, "link", "set", "br0", "up"])?;
    for h in HOSTS {
        let ns = ns_name(h);
        let port = format!("p{h}");
        ip(&["netns", "add", &ns])?;
        ip(&[
            "link", "add", "eth0", "netns", &ns, "type", "veth", "peer", "name", &port, "netns",
            SWITCH,
        ])?;
        ip(&["-n", SWITCH, "link", "set", &port, "master", "br0"])?;
        ip(&["-n", SWITCH, "link", "set", &port, "up"])?;
        ip(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/24", addr(h)),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    }
    let rate = format!("{}bit", s.port_rate.0);
    lockstep_linux::cmd::tc(&[
        "-n", SWITCH, "qdisc", "add", "dev", "pb", "root", "tbf", "rate", &rate, "burst", "3028",
        "limit", "4000000",
    ])
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// Removes every namespace of the scenario (ignores the ones already gone).
pub fn teardown() {
    for h in HOSTS {
        let _ = lockstep_linux::cmd::ip(&["netns", "del", &ns_name(h)]);
    }
    let _ = lockstep_linux::cmd::ip(&["netns", "del", SWITCH]);
}

/// The measured figures of one run.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Observed {
    pub received: u64,
    pub lost: u64,
    /// Largest one-way delay of A's packets, application to application (the sink's
    /// `one_way`): includes both hosts' scheduling, which on a small shared machine
    /// running six probes can dominate.
    pub max_delay_ns: Option<i64>,
    /// Largest delay from A's kernel TX timestamp to B's kernel RX timestamp (the
    /// sink's `wire_stack`): the bridge and its queue, without the applications.
    pub max_net_delay_ns: Option<i64>,
    /// Rates C, D, E achieved on the wire (bit/s): below the reservation when the
    /// host could not keep up.
    pub shaper_wire_bps: Vec<Option<f64>>,
    /// Shapers' CPU load (CPU time / wall time) of C, D, E.
    pub cpu_load: Vec<Option<f64>>,
    pub cpu_ns: Vec<Option<i64>>,
    pub shaped_received: u64,
}

fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

fn read_json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

/// One run at `ts`: build, start sinks then streams, wait, collect, tear down.
pub fn run_one(s: &Shaped, ts: Duration, dir: &Path, quiet: bool) -> Result<Observed> {
    teardown();
    let res = (|| -> Result<Observed> {
        build(s)?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let exe = std::env::current_exe().context("finding the lockstep binary")?;
        let start = monotonic_ns() + 1_500_000_000;
        let cmds = s.commands(ts, start, dir);
        let names = [
            "sink-a",
            "sink-shaped",
            "stream-a",
            "stream-c",
            "stream-d",
            "stream-e",
        ];
        let mut children: Vec<(String, Child)> = Vec::new();
        for (i, (host, args)) in cmds.iter().enumerate() {
            let name = names.get(i).copied().unwrap_or("extra");
            let out = std::fs::File::create(dir.join(format!("{name}.json")))?;
            let err = std::fs::File::create(dir.join(format!("{name}.log")))?;
            let child = Command::new("ip")
                .args(["netns", "exec", &ns_name(host)])
                .arg(&exe)
                .args(args)
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err))
                .spawn()
                .with_context(|| format!("starting {name}"))?;
            children.push((name.to_string(), child));
            if i == 1 {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
        if !quiet {
            eprintln!("Ts {ts}: running {} …", s.duration);
        }
        for (name, c) in children.iter_mut() {
            let st = c.wait().with_context(|| format!("waiting for {name}"))?;
            if !st.success() && !quiet {
                eprintln!("  {name} exited with {st}");
            }
        }
        let mut o = Observed::default();
        if let Some(v) = read_json(&dir.join("sink-a.json")) {
            let r = &v["results"];
            o.received = r["totals"]["received"].as_u64().unwrap_or(0);
            o.lost = r["totals"]["lost"].as_u64().unwrap_or(0);
            o.max_delay_ns = r["one_way"]["max_ns"].as_i64();
            o.max_net_delay_ns = r["wire_stack"]["max_ns"].as_i64();
        }
        if let Some(v) = read_json(&dir.join("sink-shaped.json")) {
            o.shaped_received = v["results"]["totals"]["received"].as_u64().unwrap_or(0);
        }
        for n in ["stream-c", "stream-d", "stream-e"] {
            let v = read_json(&dir.join(format!("{n}.json")));
            let cpu = v.as_ref().map(|v| v["results"]["sender_cpu"].clone());
            o.cpu_load
                .push(cpu.as_ref().and_then(|c| c["load"].as_f64()));
            o.cpu_ns
                .push(cpu.as_ref().and_then(|c| c["total_ns"].as_i64()));
            o.shaper_wire_bps.push(
                v.as_ref()
                    .and_then(|v| v["results"]["shaper"]["wire_rate_bps"].as_f64()),
            );
        }
        Ok(o)
    })();
    teardown();
    res
}

fn us(q: &Q) -> String {
    format!("{:.1}", q.to_f64() * 1e6)
}

/// The table of one scenario: ours next to loeser's Tables 4–5.
pub fn table(s: &Shaped, rows: &[(Duration, Option<Observed>)]) -> String {
    let ms = |n: &Option<i64>| {
        n.map(|n| format!("{:.1}", n as f64 / 1e3))
            .unwrap_or_else(|| "-".into())
    };
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:>6} | {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>6} {:>4} | {:>14} | {:>14} | loeser t_max t_est t_obs µs; CPU % C/D/E",
        "Ts", "t_max µs", "t_est µs", "t_max(b)", "app µs", "net µs", "recv A", "lost", "CPU % C/D/E", "Mbit/s C/D/E"
    );
    for (ts, o) in rows {
        let (tm, te) = match s.bound(*ts) {
            Ok(b) => (us(&b.delay), us(&b.delay_estimate)),
            Err(e) => (e.to_string(), String::new()),
        };
        let tl = s
            .bound_with(*ts, false)
            .map(|b| us(&b.delay))
            .unwrap_or_default();
        let list = |v: &[Option<f64>], scale: f64| {
            v.iter()
                .map(|l| {
                    l.map(|l| format!("{:.1}", l * scale))
                        .unwrap_or_else(|| "-".into())
                })
                .collect::<Vec<_>>()
                .join("/")
        };
        let (app, net, recv, lost, cpu, rate) = match o {
            Some(o) => (
                ms(&o.max_delay_ns),
                ms(&o.max_net_delay_ns),
                o.received.to_string(),
                o.lost.to_string(),
                list(&o.cpu_load, 100.0),
                list(&o.shaper_wire_bps, 1e-6),
            ),
            None => (
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
                "-".into(),
            ),
        };
        let paper = LOESER
            .iter()
            .find(|(n, _, _)| *n == ts.as_nanos())
            .map(|(_, d, c)| format!("{} {} {}; {}/{}/{}", d[0], d[1], d[2], c[0], c[1], c[2]))
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            t,
            "{:>6} | {tm:>9} {te:>9} {tl:>9} | {app:>9} {net:>9} | {recv:>6} {lost:>4} | {cpu:>14} | {rate:>14} | {paper}",
            ts.to_string()
        );
    }
    let _ = writeln!(
        t,
        "bound: SPEC §4 Eq. 6 (t_max) and Eq. 7 (t_est) for A's packets, one FIFO port at {} bit/s, t_mux {}, \
         C/D/E as (r, bucket + r·Ts); t_max(b): Eq. 6 with b = bucket (loeser's convention); app = A's one-way max (application to application), \
         net = kernel TX to RX timestamp max; loeser's t_max/t_est add 80 µs and use b = bucket",
        s.port_rate.0, s.t_mux
    );
    t
}

/// `lab plan` for this scenario: the bounds and the commands.
pub fn describe(s: &Shaped) -> String {
    let rows: Vec<(Duration, Option<Observed>)> = s.ts.iter().map(|t| (*t, None)).collect();
    let mut t = format!("scenario {} (shaped-switch): OK\n", s.name);
    t.push_str(&table(s, &rows));
    for ts in &s.ts {
        let _ = writeln!(t, "\nTs {ts}:");
        for (h, args) in s.commands(*ts, 0, Path::new(".")) {
            let _ = writeln!(t, "  {}: lockstep {}", ns_name(&h), args.join(" "));
        }
    }
    t
}

/// `lab run` for this scenario.
pub fn run(
    s: &Shaped,
    duration: Option<Duration>,
    output: Option<PathBuf>,
    quiet: bool,
) -> Result<()> {
    super::run::require_root("lab run")?;
    let mut s = s.clone();
    if let Some(d) = duration {
        s.duration = d;
    }
    let out = output.unwrap_or_else(|| {
        // like the other scenarios: lab-results/<name>-<unix seconds>
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        PathBuf::from("lab-results").join(format!("{}-{secs}", s.name))
    });
    let mut rows = Vec::new();
    for ts in s.ts.clone() {
        let dir = out.join(format!("ts-{ts}"));
        let o = run_one(&s, ts, &dir, quiet)?;
        rows.push((ts, Some(o)));
    }
    let mut doc = crate::report::ResultDoc::new("lab.shaped-switch", &s);
    let per: Vec<serde_json::Value> = rows
        .iter()
        .map(|(ts, o)| {
            let b = s.bound(*ts).ok();
            serde_json::json!({
                "ts": ts.to_string(),
                "bound_s": b.as_ref().map(|b| b.delay.to_string()),
                "bound_estimate_s": b.as_ref().map(|b| b.delay_estimate.to_string()),
                "backlog_bits": b.as_ref().map(|b| b.backlog.to_string()),
                "bound_b_bucket_s": s.bound_with(*ts, false).ok().map(|b| b.delay.to_string()),
                "observed": o,
            })
        })
        .collect();
    doc.insert("runs", &per);
    let text = serde_json::to_string_pretty(&doc)?;
    crate::report::write_atomic(&out.join("summary.json"), text.as_bytes())?;
    let tab = table(&s, &rows);
    print!("{tab}");
    if rows
        .iter()
        .any(|(_, o)| o.as_ref().is_some_and(|o| o.received == 0))
    {
        bail!(
            "A's packets did not arrive in some run (see {})",
            out.display()
        );
    }
    eprintln!("results: {}", out.display());
    Ok(())
}

#[cfg(test)]
#[path = "shaped_tests.rs"]
mod tests;
