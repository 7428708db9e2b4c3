//! The jitter-source methodology (toussaint2018 §IV): a `kind = "jitter"` scenario
//! declares a **baseline** (every known jitter source removed) and **variants**, each
//! restoring exactly one source. `lockstep lab run S.toml --repeat N` runs the
//! baseline and every variant N times, interleaved round by round (baseline, v1, v2,
//! …, then again) so a slow drift of the machine hits all of them alike, and prints a
//! **contribution table**: per source, how much the inter-arrival ΔT std-dev, p99.9
//! and maximum grow against the baseline of the same round, with the spread over the
//! rounds.
//!
//! One run: a paced CBR stream (`probe stream`) in namespace `tx` sends to a packet
//! sink (`probe sink`) in namespace `rx` over one veth pair. The settings a variant may
//! change:
//!
//! - `receive`: the sink busy-polls (`poll`) or blocks in `recvmsg` (`block`);
//! - `rt_priority`: the sink runs SCHED_FIFO at `[scenario] priority` or SCHED_OTHER;
//! - `irq`: where the receive softirq runs — a veth has no interrupt line, its receive
//!   work runs where Receive Packet Steering (`rps_cpus` of the sink side's rx queue)
//!   sends it: `same` = the sink's CPU (toussaint2018 puts the NIC interrupt on the
//!   application's core), `other` = another CPU;
//! - `load`: a background load on every CPU (`stress-ng --cpu 0`, else `hackbench`);
//! - `dma_latency`: `hold` keeps `/dev/cpu_dma_latency` at 0 for the run (the host
//!   module's guard, held by this process), `release` leaves C-states to the governor;
//! - `pacing`: the sender waits for each packet's instant by `hybrid` (sleep then
//!   spin), `sleep` or `spin`.
//!
//! The dummy program of toussaint2018 (`probe noise --period P`, the same period as
//! the stream) measures the network-independent jitter under the baseline's settings:
//! concurrently on `noise_cpu` when the scenario names a CPU that neither the sender
//! nor the sink uses, otherwise (a 2-CPU host has no idle CPU) in a slot of its own in
//! every round, on the sink's CPU with the sink's priority.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::ops::Range;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use lockstep_core::units::Size;
use lockstep_core::Duration;
use lockstep_linux::proc::{Netns, Proc, Spec};
use lockstep_linux::rps;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::scenario::{ScenarioError, Source};
use super::topo::Topology;

// ----- settings ----------------------------------------------------------------

macro_rules! choice {
    ($name:ident { $($var:ident = $s:literal),+ $(,)? }) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
        #[serde(rename_all = "kebab-case")]
        pub enum $name { $($var),+ }
        impl $name {
            pub const NAMES: &'static [&'static str] = &[$($s),+];
            pub fn name(self) -> &'static str { match self { $($name::$var => $s),+ } }
            pub fn parse(s: &str) -> Option<$name> { match s { $($s => Some($name::$var),)+ _ => None } }
        }
    };
}

choice!(Receive { Poll = "poll", Block = "block" });
choice!(IrqPlace { Same = "same", Other = "other" });
choice!(Load { None = "none", Auto = "auto", StressNg = "stress-ng", Hackbench = "hackbench" });
choice!(DmaLatency { Hold = "hold", Release = "release" });
choice!(Pacing { Hybrid = "hybrid", Sleep = "sleep", Spin = "spin" });

/// The settings of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Setup {
    pub receive: Receive,
    pub rt_priority: bool,
    pub irq: IrqPlace,
    pub load: Load,
    pub dma_latency: DmaLatency,
    pub pacing: Pacing,
}

impl Default for Setup {
    /// toussaint2018's tuned baseline.
    fn default() -> Setup {
        Setup {
            receive: Receive::Poll,
            rt_priority: true,
            irq: IrqPlace::Same,
            load: Load::None,
            dma_latency: DmaLatency::Hold,
            pacing: Pacing::Hybrid,
        }
    }
}

impl Setup {
    /// `field=value` for every setting that differs from `base`.
    pub fn changes_from(&self, base: &Setup) -> Vec<String> {
        let mut v = Vec::new();
        if self.receive != base.receive {
            v.push(format!("receive={}", self.receive.name()));
        }
        if self.rt_priority != base.rt_priority {
            v.push(format!("rt_priority={}", self.rt_priority));
        }
        if self.irq != base.irq {
            v.push(format!("irq={}", self.irq.name()));
        }
        if self.load != base.load {
            v.push(format!("load={}", self.load.name()));
        }
        if self.dma_latency != base.dma_latency {
            v.push(format!("dma_latency={}", self.dma_latency.name()));
        }
        if self.pacing != base.pacing {
            v.push(format!("pacing={}", self.pacing.name()));
        }
        v
    }
}

// ----- the file ------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    scenario: RawScenario,
    baseline: Option<RawSetup>,
    #[serde(default)]
    variant: Vec<Spanned<RawVariant>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    #[allow(dead_code)]
    kind: String,
    name: Spanned<String>,
    duration: Option<Spanned<String>>,
    period: Spanned<String>,
    payload: Option<Spanned<String>>,
    sender_cpu: Option<Spanned<i64>>,
    sink_cpu: Option<Spanned<i64>>,
    noise_cpu: Option<Spanned<i64>>,
    priority: Option<Spanned<i64>>,
    noise: Option<bool>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawSetup {
    receive: Option<Spanned<String>>,
    rt_priority: Option<bool>,
    irq: Option<Spanned<String>>,
    load: Option<Spanned<String>>,
    dma_latency: Option<Spanned<String>>,
    pacing: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVariant {
    name: Spanned<String>,
    receive: Option<Spanned<String>>,
    rt_priority: Option<bool>,
    irq: Option<Spanned<String>>,
    load: Option<Spanned<String>>,
    dma_latency: Option<Spanned<String>>,
    pacing: Option<Spanned<String>>,
}

/// One variant: the baseline with one jitter source restored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    pub name: String,
    pub setup: Setup,
    /// What differs from the baseline (`field=value`).
    pub changes: Vec<String>,
}

/// A checked `jitter` scenario.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Jitter {
    pub name: String,
    pub duration: Duration,
    /// Packet period of the stream.
    pub period: Duration,
    /// UDP payload of each packet.
    pub payload: Size,
    pub sender_cpu: usize,
    pub sink_cpu: usize,
    /// A CPU of its own for the dummy program (runs concurrently), else `None` (it
    /// runs in a slot of its own each round).
    pub noise_cpu: Option<usize>,
    /// SCHED_FIFO priority of the sink (and the dummy program) when `rt_priority`.
    pub priority: i32,
    /// Run the dummy program at all.
    pub noise: bool,
    pub baseline: Setup,
    pub variants: Vec<Variant>,
}

fn parse_choice<T>(
    src: &Source,
    v: &Option<Spanned<String>>,
    field: &str,
    names: &[&str],
    parse: fn(&str) -> Option<T>,
    default: T,
) -> Result<T, ScenarioError> {
    match v {
        None => Ok(default),
        Some(s) => parse(s.get_ref()).ok_or_else(|| {
            src.error(
                &s.span(),
                field,
                format!(
                    "expected one of {}, got \"{}\"",
                    names
                        .iter()
                        .map(|n| format!("\"{n}\""))
                        .collect::<Vec<_>>()
                        .join(", "),
                    s.get_ref()
                ),
            )
        }),
    }
}

#[allow(clippy::too_many_arguments)]
fn setup_from(
    src: &Source,
    table: &str,
    receive: &Option<Spanned<String>>,
    rt_priority: Option<bool>,
    irq: &Option<Spanned<String>>,
    load: &Option<Spanned<String>>,
    dma: &Option<Spanned<String>>,
    pacing: &Option<Spanned<String>>,
    base: Setup,
) -> Result<Setup, ScenarioError> {
    Ok(Setup {
        receive: parse_choice(
            src,
            receive,
            &format!("{table}.receive"),
            Receive::NAMES,
            Receive::parse,
            base.receive,
        )?,
        rt_priority: rt_priority.unwrap_or(base.rt_priority),
        irq: parse_choice(
            src,
            irq,
            &format!("{table}.irq"),
            IrqPlace::NAMES,
            IrqPlace::parse,
            base.irq,
        )?,
        load: parse_choice(
            src,
            load,
            &format!("{table}.load"),
            Load::NAMES,
            Load::parse,
            base.load,
        )?,
        dma_latency: parse_choice(
            src,
            dma,
            &format!("{table}.dma_latency"),
            DmaLatency::NAMES,
            DmaLatency::parse,
            base.dma_latency,
        )?,
        pacing: parse_choice(
            src,
            pacing,
            &format!("{table}.pacing"),
            Pacing::NAMES,
            Pacing::parse,
            base.pacing,
        )?,
    })
}

fn cpu(
    src: &Source,
    v: &Option<Spanned<i64>>,
    field: &str,
    default: usize,
) -> Result<usize, ScenarioError> {
    match v {
        None => Ok(default),
        Some(s) => usize::try_from(*s.get_ref())
            .ok()
            .filter(|c| *c < 4096)
            .ok_or_else(|| {
                src.error(
                    &s.span(),
                    field,
                    format!("expected a CPU number (0, 1, …), got {}", s.get_ref()),
                )
            }),
    }
}

impl Jitter {
    /// Parses and checks the file; errors name file, line and field.
    pub fn parse(file: &str, text: &str) -> Result<Jitter, ScenarioError> {
        let src = Source {
            file: file.to_string(),
            text: text.to_string(),
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| src.toml_error(&e))?;
        let r = raw.scenario;
        let name = r.name.get_ref().trim().to_string();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(src.error(
                &r.name.span(),
                "scenario.name",
                "expected a name of letters, digits, - and _",
            ));
        }
        let dur = |s: &Spanned<String>, field: &str| -> Result<Duration, ScenarioError> {
            match Duration::parse(s.get_ref()) {
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
            None => Duration::from_secs(3),
        };
        let period = dur(&r.period, "scenario.period")?;
        if period < lockstep_core::limits::MIN_PACKET_PERIOD {
            return Err(src.error(
                &r.period.span(),
                "scenario.period",
                format!(
                    "{period} is below the limit of {} ({})",
                    lockstep_core::limits::MIN_PACKET_PERIOD,
                    lockstep_core::limits::MAX_PACKET_RATE_TEXT
                ),
            ));
        }
        lockstep_core::limits::duration(period)
            .map_err(|m| src.error(&r.period.span(), "scenario.period", m))?;
        let payload = match &r.payload {
            None => Size(1376),
            Some(s) => {
                let p = s
                    .get_ref()
                    .parse::<Size>()
                    .map_err(|e| src.error(&s.span(), "scenario.payload", e.to_string()))?;
                if p.0 < 64 || p.0 > 1472 {
                    return Err(src.error(
                        &s.span(),
                        "scenario.payload",
                        format!(
                            "expected 64B to 1472B (the probe header to a full frame), got {}B",
                            p.0
                        ),
                    ));
                }
                p
            }
        };
        let sender_cpu = cpu(&src, &r.sender_cpu, "scenario.sender_cpu", 0)?;
        let sink_cpu = cpu(&src, &r.sink_cpu, "scenario.sink_cpu", 1)?;
        if sender_cpu == sink_cpu {
            let span = r.sink_cpu.as_ref().map(|s| s.span()).unwrap_or(0..0);
            return Err(src.error(
                &span,
                "scenario.sink_cpu",
                format!("the sink needs a CPU of its own, not the sender's ({sender_cpu})"),
            ));
        }
        let noise_cpu = match &r.noise_cpu {
            None => None,
            Some(s) => {
                let c = cpu(&src, &r.noise_cpu, "scenario.noise_cpu", 0)?;
                if c == sender_cpu || c == sink_cpu {
                    return Err(src.error(
                        &s.span(),
                        "scenario.noise_cpu",
                        format!("the dummy program needs an idle CPU, not the sender's or the sink's ({c}); leave the field out to run it in a slot of its own"),
                    ));
                }
                Some(c)
            }
        };
        let priority = match &r.priority {
            None => 80,
            Some(p) => match i32::try_from(*p.get_ref()) {
                Ok(v) if (1..=99).contains(&v) => v,
                _ => {
                    return Err(src.error(
                        &p.span(),
                        "scenario.priority",
                        format!("expected a SCHED_FIFO priority 1..99, got {}", p.get_ref()),
                    ))
                }
            },
        };
        let b = raw.baseline.unwrap_or_default();
        let baseline = setup_from(
            &src,
            "baseline",
            &b.receive,
            b.rt_priority,
            &b.irq,
            &b.load,
            &b.dma_latency,
            &b.pacing,
            Setup::default(),
        )?;
        if raw.variant.is_empty() {
            return Err(src.error(
                &(0..0),
                "variant",
                "expected at least one [[variant]] (each restores one jitter source)",
            ));
        }
        let mut variants: Vec<Variant> = Vec::new();
        for (i, v) in raw.variant.iter().enumerate() {
            let span: Range<usize> = v.span();
            let v = v.get_ref();
            let table = format!("variant[{i}]");
            let setup = setup_from(
                &src,
                &table,
                &v.receive,
                v.rt_priority,
                &v.irq,
                &v.load,
                &v.dma_latency,
                &v.pacing,
                baseline,
            )?;
            let vname = v.name.get_ref().trim().to_string();
            if vname.is_empty() {
                return Err(src.error(
                    &v.name.span(),
                    format!("{table}.name"),
                    "must not be empty",
                ));
            }
            if variants.iter().any(|o| o.name == vname) || vname == "baseline" {
                return Err(src.error(
                    &v.name.span(),
                    format!("{table}.name"),
                    format!("\"{vname}\" is used twice"),
                ));
            }
            let changes = setup.changes_from(&baseline);
            if changes.is_empty() {
                return Err(src.error(
                    &span,
                    &table,
                    format!("variant \"{vname}\" changes nothing: it must restore one jitter source (set receive, rt_priority, irq, load, dma_latency or pacing to a value the baseline does not have)"),
                ));
            }
            variants.push(Variant {
                name: vname,
                setup,
                changes,
            });
        }
        Ok(Jitter {
            name,
            duration,
            period,
            payload,
            sender_cpu,
            sink_cpu,
            noise_cpu,
            priority,
            noise: r.noise.unwrap_or(true),
            baseline,
            variants,
        })
    }

    /// The packet rate the period asks for.
    pub fn target_pps(&self) -> f64 {
        1e9 / self.period.as_nanos() as f64
    }
}

// ----- the arithmetic --------------------------------------------------------------

/// The figures of one run that the table compares (nanoseconds).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub std_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
}

/// A value over the repetitions: mean and range.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    /// Repetitions that gave a value.
    pub n: usize,
}

impl Spread {
    /// `None` for an empty list.
    pub fn of(v: &[f64]) -> Option<Spread> {
        if v.is_empty() {
            return None;
        }
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread {
            mean: v.iter().sum::<f64>() / v.len() as f64,
            min,
            max,
            n: v.len(),
        })
    }
}

/// The cost of one jitter source: the variant minus the baseline of the same round.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Contribution {
    pub name: String,
    pub std_ns: Option<Spread>,
    pub p999_ns: Option<Spread>,
    pub max_ns: Option<Spread>,
    /// The variant's own figures (not differences).
    pub absolute: Option<[Spread; 3]>,
}

fn spreads(v: &[Metrics]) -> Option<[Spread; 3]> {
    let s: Vec<f64> = v.iter().map(|m| m.std_ns).collect();
    let p: Vec<f64> = v.iter().map(|m| m.p999_ns).collect();
    let x: Vec<f64> = v.iter().map(|m| m.max_ns).collect();
    Some([Spread::of(&s)?, Spread::of(&p)?, Spread::of(&x)?])
}

/// The baseline's own figures over the rounds.
pub fn baseline_spread(baseline: &[Option<Metrics>]) -> Option<[Spread; 3]> {
    let v: Vec<Metrics> = baseline.iter().flatten().copied().collect();
    spreads(&v)
}

/// Per variant, round `i` against the baseline's round `i` (a round where either
/// run gave nothing is left out).
pub fn contributions(
    baseline: &[Option<Metrics>],
    variants: &[(String, Vec<Option<Metrics>>)],
) -> Vec<Contribution> {
    variants
        .iter()
        .map(|(name, runs)| {
            let pairs: Vec<(Metrics, Metrics)> = runs
                .iter()
                .zip(baseline)
                .filter_map(|(v, b)| Some(((*v)?, (*b)?)))
                .collect();
            let d = |f: fn(&Metrics) -> f64| -> Option<Spread> {
                Spread::of(&pairs.iter().map(|(v, b)| f(v) - f(b)).collect::<Vec<_>>())
            };
            let own: Vec<Metrics> = runs.iter().flatten().copied().collect();
            Contribution {
                name: name.clone(),
                std_ns: d(|m| m.std_ns),
                p999_ns: d(|m| m.p999_ns),
                max_ns: d(|m| m.max_ns),
                absolute: spreads(&own),
            }
        })
        .collect()
}

/// `1.23 µs` for nanoseconds, with a sign when asked.
pub fn fmt_us(ns: f64, signed: bool) -> String {
    let us = ns / 1000.0;
    let digits = if us.abs() >= 100.0 {
        0
    } else if us.abs() >= 10.0 {
        1
    } else {
        2
    };
    if signed {
        format!("{us:+.digits$}")
    } else {
        format!("{us:.digits$}")
    }
}

/// `+1.20 [+0.90..+1.50]` (µs), or `-` when no round gave a value.
pub fn fmt_spread(s: Option<&Spread>, signed: bool) -> String {
    match s {
        None => "-".to_string(),
        Some(s) if s.n == 1 => fmt_us(s.mean, signed),
        Some(s) => format!(
            "{} [{}..{}]",
            fmt_us(s.mean, signed),
            fmt_us(s.min, signed),
            fmt_us(s.max, signed)
        ),
    }
}

/// The contribution table (µs; mean over the rounds and [min..max]).
pub fn contribution_table(
    baseline: Option<&[Spread; 3]>,
    rows: &[Contribution],
    noise: Option<&[Spread; 3]>,
) -> String {
    let mut t = String::new();
    let w = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(24);
    let _ = writeln!(
        t,
        "{:<w$}  {:>28}  {:>28}  {:>28}",
        "ΔT (µs, mean [min..max] over rounds)", "std-dev", "p99.9", "max"
    );
    let line = |t: &mut String, name: &str, s: [Option<&Spread>; 3], signed: bool| {
        let _ = writeln!(
            t,
            "{:<w$}  {:>28}  {:>28}  {:>28}",
            name,
            fmt_spread(s[0], signed),
            fmt_spread(s[1], signed),
            fmt_spread(s[2], signed)
        );
    };
    match baseline {
        Some(b) => line(
            &mut t,
            "baseline (absolute)",
            [Some(&b[0]), Some(&b[1]), Some(&b[2])],
            false,
        ),
        None => line(&mut t, "baseline (absolute)", [None, None, None], false),
    }
    if let Some(n) = noise {
        line(
            &mut t,
            "dummy program (absolute)",
            [Some(&n[0]), Some(&n[1]), Some(&n[2])],
            false,
        );
    }
    let _ = writeln!(
        t,
        "{:<w$}  change against the baseline of the same round:",
        "source restored"
    );
    for r in rows {
        line(
            &mut t,
            &r.name,
            [r.std_ns.as_ref(), r.p999_ns.as_ref(), r.max_ns.as_ref()],
            true,
        );
    }
    t
}

// ----- running -----------------------------------------------------------------------

/// A pair of namespaces joined by one veth (`eth0` on both sides), removed on drop.
pub struct NsPair {
    pub a: String,
    pub b: String,
    _topo: Topology,
}

pub const ADDR_A: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);
pub const ADDR_B: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 2);

impl NsPair {
    /// `ls-<tag>-a` and `ls-<tag>-b`, `ADDR_A`/`ADDR_B` on /24.
    pub fn build(tag: &str) -> Result<NsPair> {
        let (a, b) = (format!("ls-{tag}-a"), format!("ls-{tag}-b"));
        let mut t = Topology::new();
        t.fresh_namespace(&a)?;
        t.fresh_namespace(&b)?;
        t.veth(&a, "eth0", &b, "eth0")?;
        for (ns, addr) in [(&a, ADDR_A), (&b, ADDR_B)] {
            t.addr(ns, "eth0", addr, 24)?;
            t.up(ns, "eth0")?;
        }
        Ok(NsPair { a, b, _topo: t })
    }
}

/// How long a background process that is stopped (the load, an iperf3 server) has
/// between SIGTERM and SIGKILL.
pub const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Starts `argv` as `name`: through `ip netns exec NS` when `ns` is given, else in
/// this namespace; stdout to `dir/<name>.json`, stderr to `dir/<name>.log`; in a
/// process group of its own, stopped with it when dropped.
pub fn spawn(name: &str, ns: Option<&str>, argv: &[String], dir: &Path) -> Result<Proc> {
    let netns = ns.map_or(Netns::Inherit, |ns| Netns::Exec(ns.to_string()));
    let spec = Spec::from_argv(name, argv)
        .netns(netns)
        .stdout(dir.join(format!("{name}.json")))
        .stderr(dir.join(format!("{name}.log")));
    Ok(spec.spawn()?)
}

pub fn read_json(p: &Path) -> Option<serde_json::Value> {
    serde_json::from_str(&std::fs::read_to_string(p).ok()?).ok()
}

pub fn exe() -> Result<String> {
    Ok(std::env::current_exe()
        .context("finding the lockstep binary")?
        .display()
        .to_string())
}

/// A note when the kernel's RT throttling is on: a thread that spins at SCHED_FIFO
/// (a polling sink, the dummy program, a polling server) is then stopped for
/// `period − runtime` of every period (50 ms of each second by default), which shows
/// as ΔT or response-time maxima of ~50 ms.
pub fn throttling_note() -> Option<String> {
    let b = lockstep_linux::throttle::in_force()?;
    Some(format!(
        "RT throttling is on (kernel.sched_rt_runtime_us = {} of {}): a thread spinning at SCHED_FIFO is stopped for {} ms of every period; the lab leaves it as it is unless told (`lockstep lab run --rt-throttling-off`, on a machine of your own)",
        b.runtime_us,
        b.period_us,
        b.stall_ms()
    ))
}

/// Which background load this host offers for `load`.
pub fn load_command(load: Load, secs: u64) -> Result<Option<Vec<String>>, String> {
    let have = |p: &str| {
        std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).any(|d| d.join(p).is_file()))
            .unwrap_or(false)
    };
    let stress = || {
        vec![
            "stress-ng".to_string(),
            "--cpu".into(),
            "0".into(),
            "--timeout".into(),
            format!("{secs}s"),
            "--quiet".into(),
        ]
    };
    let hack = || {
        vec![
            "hackbench".to_string(),
            "-P".into(),
            "-g".into(),
            "2".into(),
            "-l".into(),
            "100000000".into(),
        ]
    };
    match load {
        Load::None => Ok(None),
        Load::StressNg if have("stress-ng") => Ok(Some(stress())),
        Load::Hackbench if have("hackbench") => Ok(Some(hack())),
        Load::Auto if have("stress-ng") => Ok(Some(stress())),
        Load::Auto if have("hackbench") => Ok(Some(hack())),
        Load::StressNg => Err("stress-ng is not installed (Debian: apt-get install stress-ng)".into()),
        Load::Hackbench => Err("hackbench is not installed (Debian: apt-get install rt-tests)".into()),
        Load::Auto => Err(
            "neither stress-ng nor hackbench is installed (Debian: apt-get install stress-ng, or rt-tests for hackbench)".into(),
        ),
    }
}

/// The processes' command lines of one run (without `ip netns exec`).
pub fn run_commands(j: &Jitter, setup: &Setup) -> (Vec<String>, Vec<String>) {
    let exe = "lockstep".to_string();
    let s = |x: &str| x.to_string();
    let mut sink = vec![
        exe.clone(),
        s("probe"),
        s("sink"),
        s("--bind"),
        format!("{ADDR_B}:9000"),
        s("--idle-timeout"),
        s("1s"),
        s("--cpu"),
        j.sink_cpu.to_string(),
        s("--json"),
        s("-q"),
    ];
    if setup.receive == Receive::Poll {
        sink.push(s("--poll"));
    }
    if setup.rt_priority {
        sink.extend([s("--priority"), j.priority.to_string()]);
    }
    let stream = vec![
        exe,
        s("probe"),
        s("stream"),
        s("--to"),
        format!("{ADDR_B}:9000"),
        s("--period"),
        j.period.to_string(),
        s("--size"),
        format!("{}B", j.payload.0),
        s("--strategy"),
        s(setup.pacing.name()),
        s("--cpu"),
        j.sender_cpu.to_string(),
        s("-D"),
        j.duration.to_string(),
        s("--json"),
        s("-q"),
    ];
    (sink, stream)
}

/// The dummy program's command line.
pub fn noise_command(j: &Jitter, cpu: usize) -> Vec<String> {
    let mut v: Vec<String> = ["lockstep", "probe", "noise", "--period"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    v.push(j.period.to_string());
    v.extend(["--cpu".to_string(), cpu.to_string()]);
    v.extend([
        "-D".to_string(),
        j.duration.to_string(),
        "--json".into(),
        "-q".into(),
    ]);
    if j.baseline.rt_priority {
        v.extend(["--priority".to_string(), j.priority.to_string()]);
    }
    v
}

/// What one run measured.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RunResult {
    pub label: String,
    pub round: u32,
    pub metrics: Option<Metrics>,
    pub received: u64,
    pub lost: u64,
    pub achieved_pps: Option<f64>,
    pub note: Option<String>,
    /// A stop (SIGINT/SIGTERM) ended this run early: its stream and sink were
    /// stopped and what the sink had measured read.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub interrupted: bool,
}

fn sink_metrics(v: &serde_json::Value) -> Option<Metrics> {
    let d = &v["results"]["delta_t"];
    Some(Metrics {
        std_ns: d["stddev_ns"].as_f64()?,
        p999_ns: d["percentiles_ns"]["99.9"].as_f64()?,
        max_ns: d["max_ns"].as_f64()?,
    })
}

/// The dummy program's tick intervals (`deviation` is interval − period: add the
/// period back so the figures read like the sink's ΔT).
fn noise_metrics(v: &serde_json::Value) -> Option<Metrics> {
    let r = &v["results"];
    let p = r["period_ns"].as_f64()?;
    let d = &r["deviation"];
    Some(Metrics {
        std_ns: d["stddev_ns"].as_f64()?,
        p999_ns: d["percentiles_ns"]["99.9"].as_f64()? + p,
        max_ns: d["max_ns"].as_f64()? + p,
    })
}

fn fill_exe(mut v: Vec<String>, exe: &str) -> Vec<String> {
    if v.first().map(|s| s == "lockstep").unwrap_or(false) {
        v[0] = exe.to_string();
    }
    v
}

/// One run of `setup`: namespaces, RPS, load, dma latency, sink, stream, collect.
fn run_one(
    j: &Jitter,
    tag: &str,
    label: &str,
    round: u32,
    setup: &Setup,
    dir: &Path,
) -> Result<RunResult> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let exe = exe()?;
    let mut r = RunResult {
        label: label.to_string(),
        round,
        ..RunResult::default()
    };
    let ns = NsPair::build(tag)?;
    let mask_same = 1u64 << j.sink_cpu;
    let mask_other = 1u64 << j.sender_cpu;
    rps::set_cpus(
        &ns.b,
        "eth0",
        if setup.irq == IrqPlace::Same {
            mask_same
        } else {
            mask_other
        },
    )?;
    let _dma = match setup.dma_latency {
        DmaLatency::Hold => Some(
            lockstep_linux::rt::DmaLatencyGuard::hold(0)
                .map_err(|e| anyhow::anyhow!("holding /dev/cpu_dma_latency at 0: {e}"))?,
        ),
        DmaLatency::Release => None,
    };
    let secs = (j.duration.as_nanos() / 1_000_000_000 + 4) as u64;
    let mut load = match load_command(setup.load, secs) {
        Ok(Some(argv)) => Some(spawn("load", None, &argv, dir)?),
        Ok(None) => None,
        Err(e) => bail!("{e}"),
    };
    let (sink, stream) = run_commands(j, setup);
    let mut noise = match (j.noise, j.noise_cpu) {
        (true, Some(c)) => Some(spawn(
            "noise",
            None,
            &fill_exe(noise_command(j, c), &exe),
            dir,
        )?),
        _ => None,
    };
    let mut sink = spawn("sink", Some(&ns.b), &fill_exe(sink, &exe), dir)?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut stream = spawn("stream", Some(&ns.a), &fill_exe(stream, &exe), dir)?;
    // a stop asked of lockstep is passed on: they write what they measured
    let e = stream.wait_or_stop(crate::stop::CHILD_GRACE)?;
    r.interrupted |= e.stopped;
    if !e.status.success() && !e.stopped {
        r.note = Some(format!(
            "stream exited with {} (see {}/stream.log)",
            e.status,
            dir.display()
        ));
    }
    let e = sink.wait_or_stop(crate::stop::CHILD_GRACE)?;
    r.interrupted |= e.stopped;
    if !e.status.success() && !e.stopped && r.note.is_none() {
        r.note = Some(format!(
            "sink exited with {} (see {}/sink.log)",
            e.status,
            dir.display()
        ));
    }
    if let Some(n) = noise.as_mut() {
        if let Ok(e) = n.wait_or_stop(crate::stop::CHILD_GRACE) {
            r.interrupted |= e.stopped;
        }
    }
    if r.interrupted {
        r.note = Some("interrupted by SIGINT/SIGTERM: stopped early".into());
    }
    if let Some(l) = load.as_mut() {
        l.stop(STOP_GRACE);
    }
    if let Some(v) = read_json(&dir.join("sink.json")) {
        r.metrics = sink_metrics(&v);
        r.received = v["results"]["totals"]["received"].as_u64().unwrap_or(0);
        r.lost = v["results"]["totals"]["lost"].as_u64().unwrap_or(0);
    }
    if let Some(v) = read_json(&dir.join("stream.json")) {
        r.achieved_pps = v["results"]["achieved_pps"].as_f64();
    }
    Ok(r)
}

/// The dummy program alone on the sink's CPU under the baseline's settings.
fn run_noise_slot(j: &Jitter, round: u32, dir: &Path) -> Result<RunResult> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let exe = exe()?;
    let _dma = match j.baseline.dma_latency {
        DmaLatency::Hold => lockstep_linux::rt::DmaLatencyGuard::hold(0).ok(),
        DmaLatency::Release => None,
    };
    let mut p = spawn(
        "noise",
        None,
        &fill_exe(noise_command(j, j.sink_cpu), &exe),
        dir,
    )?;
    let e = p.wait_or_stop(crate::stop::CHILD_GRACE)?;
    let mut r = RunResult {
        label: "dummy program".into(),
        round,
        interrupted: e.stopped,
        ..RunResult::default()
    };
    if e.stopped {
        r.note = Some("interrupted by SIGINT/SIGTERM: stopped early".into());
    } else if !e.status.success() {
        r.note = Some(format!("noise exited with {}", e.status));
    }
    r.metrics = read_json(&dir.join("noise.json")).and_then(|v| noise_metrics(&v));
    Ok(r)
}

/// report.html: one run per (round, baseline or variant) in the order they ran, the
/// stream's inter-arrival ΔT and one-way latency with its split as the sink measured
/// them; the contribution table as notes.
fn html_report(
    j: &Jitter,
    doc: &crate::report::ResultDoc,
    out: &Path,
    runs: &[&RunResult],
    tab: &str,
) -> crate::report::html::LabReport {
    use crate::report::html::{components, summary_of, FlowReport, LabReport, RunReport};
    let runs = runs
        .iter()
        .map(|r| {
            let dir = out
                .join(format!("round-{}", r.round))
                .join(if r.label == "baseline" {
                    "baseline".to_string()
                } else {
                    slug(&r.label)
                });
            let res = read_json(&dir.join("sink.json"))
                .map(|v| v["results"].clone())
                .unwrap_or_default();
            let parts = [
                ("L_I (sender wake-up)", "l_i"),
                ("send path", "send_path"),
                ("wire and stacks", "wire_stack"),
                ("L_Rx (receive path)", "rx_path"),
            ];
            RunReport {
                label: format!("round {} {}", r.round, r.label),
                tf_ns: None,
                flows: vec![FlowReport {
                    name: "CBR stream".to_string(),
                    latency: summary_of(&res["one_way"]),
                    inter_arrival: summary_of(&res["delta_t"]),
                    decomposition: components(&res, &parts),
                    sent: r.received + r.lost,
                    received: r.received,
                    lost: r.lost,
                    ..FlowReport::default()
                }],
                hops: Vec::new(),
                bound_note: None,
            }
        })
        .collect();
    LabReport::for_doc(
        format!(
            "lockstep lab: {} (jitter sources, toussaint2018 §IV)",
            j.name
        ),
        &j.name,
        doc,
        runs,
        tab,
    )
}

fn slug(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// `lab run` for a jitter scenario.
pub fn run(
    j: &Jitter,
    repeat: u32,
    duration: Option<Duration>,
    output: Option<PathBuf>,
    json: bool,
    quiet: bool,
    gates: &crate::gates::GateArgs,
) -> Result<()> {
    super::run::require_root("lab run")?;
    let mut j = j.clone();
    if let Some(d) = duration {
        j.duration = d;
    }
    let ncpu = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for (what, c) in [("sender_cpu", j.sender_cpu), ("sink_cpu", j.sink_cpu)]
        .into_iter()
        .chain(j.noise_cpu.map(|c| ("noise_cpu", c)))
    {
        if c >= ncpu {
            return Err(crate::UsageError(format!(
                "scenario.{what} = {c}, but this host has CPUs 0..{}",
                ncpu - 1
            ))
            .into());
        }
    }
    let out = output.unwrap_or_else(|| super::run::default_output(&j.name));
    let tag = format!("jit{}", std::process::id());
    // which variants this host can run
    let mut skipped: Vec<(String, String)> = Vec::new();
    let mut runnable: Vec<&Variant> = Vec::new();
    if let Err(e) = load_command(j.baseline.load, 1) {
        bail!("baseline: load: {e}");
    }
    for v in &j.variants {
        match load_command(v.setup.load, 1) {
            Ok(_) => runnable.push(v),
            Err(e) => {
                crate::say::say!("variant \"{}\" skipped: load: {e}", v.name);
                skipped.push((v.name.clone(), e));
            }
        }
    }
    if !quiet {
        let noise = match (j.noise, j.noise_cpu) {
            (false, _) => "off".to_string(),
            (true, Some(c)) => format!("concurrently on CPU {c}"),
            (true, None) => format!(
                "in a slot of its own each round on CPU {} (no idle CPU named)",
                j.sink_cpu
            ),
        };
        eprintln!(
            "{}: {} rounds × (baseline + {} variants), {} each; stream {}B every {} ({:.1} kpps) CPU {} → sink CPU {}; dummy program {noise}",
            j.name,
            repeat,
            runnable.len(),
            j.duration,
            j.payload.0,
            j.period,
            j.target_pps() / 1000.0,
            j.sender_cpu,
            j.sink_cpu
        );
    }
    let mut base_runs: Vec<RunResult> = Vec::new();
    let mut var_runs: Vec<Vec<RunResult>> = vec![Vec::new(); runnable.len()];
    let mut noise_runs: Vec<RunResult> = Vec::new();
    // a stop ends the run in progress early (what it measured is kept) and runs no
    // more: the table is made of what ran
    let mut interrupted: Option<String> = None;
    let stopped = |r: &RunResult, round: u32| {
        (r.interrupted || crate::stop::stop_requested())
            .then(|| format!("round {} of {repeat}: {} stopped early", round + 1, r.label))
    };
    'rounds: for round in 0..repeat {
        let rdir = out.join(format!("round-{}", round + 1));
        let line = |r: &RunResult| {
            if !quiet {
                let m = r
                    .metrics
                    .map(|m| {
                        format!(
                            "ΔT std {} p99.9 {} max {} µs",
                            fmt_us(m.std_ns, false),
                            fmt_us(m.p999_ns, false),
                            fmt_us(m.max_ns, false)
                        )
                    })
                    .unwrap_or_else(|| "no figures".into());
                let pps = r
                    .achieved_pps
                    .map(|p| format!(", sent {:.1} kpps", p / 1000.0))
                    .unwrap_or_default();
                eprintln!(
                    "  round {} {:<28} {m}{pps}{}",
                    round + 1,
                    r.label,
                    r.note
                        .as_ref()
                        .map(|n| format!(" — {n}"))
                        .unwrap_or_default()
                );
            }
        };
        let b = run_one(
            &j,
            &tag,
            "baseline",
            round + 1,
            &j.baseline,
            &rdir.join("baseline"),
        )?;
        line(&b);
        interrupted = stopped(&b, round);
        base_runs.push(b);
        if interrupted.is_some() {
            break 'rounds;
        }
        for (i, v) in runnable.iter().enumerate() {
            let r = run_one(
                &j,
                &tag,
                &v.name,
                round + 1,
                &v.setup,
                &rdir.join(slug(&v.name)),
            )?;
            line(&r);
            interrupted = stopped(&r, round);
            var_runs[i].push(r);
            if interrupted.is_some() {
                break 'rounds;
            }
        }
        if j.noise && j.noise_cpu.is_none() {
            let r = run_noise_slot(&j, round + 1, &rdir.join("dummy-program"))?;
            line(&r);
            interrupted = stopped(&r, round);
            noise_runs.push(r);
            if interrupted.is_some() {
                break 'rounds;
            }
        }
    }
    if j.noise && j.noise_cpu.is_some() {
        for (round, b) in base_runs.iter().enumerate() {
            let dir = out
                .join(format!("round-{}", round + 1))
                .join("baseline")
                .join("noise.json");
            noise_runs.push(RunResult {
                label: "dummy program".into(),
                round: b.round,
                metrics: read_json(&dir).and_then(|v| noise_metrics(&v)),
                ..RunResult::default()
            });
        }
    }
    let base_m: Vec<Option<Metrics>> = base_runs.iter().map(|r| r.metrics).collect();
    let var_m: Vec<(String, Vec<Option<Metrics>>)> = runnable
        .iter()
        .zip(&var_runs)
        .map(|(v, rs)| (v.name.clone(), rs.iter().map(|r| r.metrics).collect()))
        .collect();
    let contrib = contributions(&base_m, &var_m);
    let base_s = baseline_spread(&base_m);
    let noise_m: Vec<Metrics> = noise_runs.iter().filter_map(|r| r.metrics).collect();
    let noise_s = spreads(&noise_m);
    let mut tab = contribution_table(base_s.as_ref(), &contrib, noise_s.as_ref());
    let pps: Vec<f64> = base_runs.iter().filter_map(|r| r.achieved_pps).collect();
    let achieved = Spread::of(&pps);
    let _ = writeln!(
        tab,
        "stream: {}B every {} = {:.1} kpps asked; the baseline's sender achieved {}",
        j.payload.0,
        j.period,
        j.target_pps() / 1000.0,
        achieved
            .map(|a| format!(
                "{:.1} kpps ({:.1}..{:.1}){}",
                a.mean / 1000.0,
                a.min / 1000.0,
                a.max / 1000.0,
                if a.min < 0.99 * j.target_pps() {
                    " — below the asked rate: this host does not sustain the period"
                } else {
                    " — the asked rate"
                }
            ))
            .unwrap_or_else(|| "no figure".into())
    );
    for (n, e) in &skipped {
        let _ = writeln!(tab, "skipped: {n}: {e}");
    }
    let throttling = throttling_note();
    if let Some(t) = &throttling {
        let _ = writeln!(tab, "note: {t}");
    }
    if let Some(i) = &interrupted {
        let _ = writeln!(
            tab,
            "interrupted by SIGINT/SIGTERM: {i}; the table is made of the runs done"
        );
    }
    let mut doc = crate::report::ResultDoc::new("lab.jitter", &j);
    if let Some(i) = &interrupted {
        doc.insert("interrupted", i);
    }
    doc.insert("repeat", repeat);
    doc.insert("rt_throttling", &throttling);
    doc.insert("target_pps", j.target_pps());
    doc.insert("achieved_pps", achieved);
    doc.insert(
        "baseline",
        serde_json::json!({ "absolute_ns": base_s, "runs": base_runs }),
    );
    doc.insert(
        "contributions",
        contrib
            .iter()
            .zip(&var_runs)
            .map(|(c, rs)| serde_json::json!({ "source": c, "runs": rs }))
            .collect::<Vec<_>>(),
    );
    doc.insert(
        "dummy_program",
        serde_json::json!({ "absolute_ns": noise_s, "runs": noise_runs, "concurrent_cpu": j.noise_cpu }),
    );
    doc.insert(
        "skipped",
        skipped
            .iter()
            .map(|(n, e)| serde_json::json!({ "variant": n, "reason": e }))
            .collect::<Vec<_>>(),
    );
    let mut order: Vec<&RunResult> = base_runs.iter().chain(var_runs.iter().flatten()).collect();
    order.sort_by_key(|r| r.round);
    let report = html_report(&j, &doc, &out, &order, &tab);
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
    if base_runs.iter().all(|r| r.received == 0) {
        bail!(
            "the sink received nothing in any baseline run (see {})",
            out.display()
        );
    }
    crate::say::say!("results: {}", out.display());
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// `lab plan` for a jitter scenario: the runs and their command lines.
pub fn describe(j: &Jitter) -> String {
    let mut t = format!(
        "scenario {} (jitter methodology): OK\nstream {}B every {} ({:.1} kpps), {} per run, sender CPU {}, sink CPU {}\n",
        j.name,
        j.payload.0,
        j.period,
        j.target_pps() / 1000.0,
        j.duration,
        j.sender_cpu,
        j.sink_cpu
    );
    let mut one = |name: &str, s: &Setup, changes: &str| {
        let (sink, stream) = run_commands(j, s);
        let _ = writeln!(
            t,
            "\n{name}{changes}: irq {} load {} dma_latency {}\n  rx: {}\n  tx: {}",
            s.irq.name(),
            s.load.name(),
            s.dma_latency.name(),
            sink.join(" "),
            stream.join(" ")
        );
    };
    one("baseline", &j.baseline, "");
    for v in &j.variants {
        one(&v.name, &v.setup, &format!(" ({})", v.changes.join(", ")));
    }
    if j.noise {
        let cpu = j.noise_cpu.unwrap_or(j.sink_cpu);
        let _ = writeln!(
            t,
            "\ndummy program ({}): {}",
            if j.noise_cpu.is_some() {
                "concurrently"
            } else {
                "own slot each round"
            },
            noise_command(j, cpu).join(" ")
        );
    }
    t
}

#[cfg(test)]
#[path = "method_tests.rs"]
mod tests;
