//! `lockstep export FILE [--apply] [--json]`: the Linux `tc` commands that put a
//! shaping plan or a TDP port schedule into the kernel.
//!
//! **Shaped flows** (`[[flow]]`, loeser) become token buckets in the kernel: a device
//! that carries one flow gets a single `tbf` (rate `r`, burst = the bucket `b`), a
//! device with several gets an `htb` root with one class per flow (rate = ceil = `r`,
//! so a flow never borrows beyond its T-SPEC; burst = cburst = `b`) and a `u32` filter
//! per flow on its 5-tuple. A flow without a `match` takes the device's unclassified
//! traffic (the htb `default` class); with none, unclassified traffic is not shaped.
//!
//! **TDP port schedules** (`[[port]]`, time-driven forwarding, or the `[node]` table of a `lockstep
//! node` file) become a `taprio` qdisc with one gate entry per time-frame: the reserved
//! traffic class is open alone in the frames that have rows, best effort alone in the
//! others (so no best-effort frame is ever on the wire when a reserved one is due),
//! the cycle (`k` frames) based at the frames' epoch on `CLOCK_TAI`. Under it, on the
//! reserved queue, `etf` sends each packet at its launch time — set by taprio itself in
//! txtime-assist mode (`--txtime-assist`, `flags 0x1`), or by senders using
//! `SO_TXTIME` (`etf = true` in the port).
//!
//! The commands are printed (stdout), each with a comment saying what it does, ready
//! for `sh`. `--apply` runs them, after replacing each device's root qdisc, but only if
//! the running kernel has every qdisc they use (probed in a throwaway namespace): a
//! kernel without `taprio` gets the commands printed and nothing applied, exit 3.
//!
//! ```toml
//! [[flow]]
//! name = "c"
//! dev = "eth0"
//! rate = "40Mbit/s"        # r
//! burst = "51514B"         # b, at least max_packet
//! max_packet = "1514B"     # M (default 1514B); with peak: tbf's mtu
//! peak = "100Mbit/s"       # optional C: tbf peakrate
//! latency = "50ms"         # tbf: longest wait in its queue (or limit = "100kB")
//! match = { src = "10.0.0.3", dst = "10.0.0.2", proto = "udp", dport = 9000 }
//!
//! [[port]]
//! dev = "eth1"
//! tf = "250us"
//! k = 4
//! rows = [0, 2]            # frames with reservations (or {slot, packets, size} rows)
//! reserved_prio = 6        # skb priority (SO_PRIORITY) of reserved packets
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lockstep_core::net::Prefix;
use lockstep_core::tdp::config::NodeConfig;
use lockstep_core::units::{BitRate, Size};
use lockstep_core::Duration;
use lockstep_linux::{cmd, iface, tc};
use serde::{Deserialize, Serialize};
use toml::de::{DeTable, DeValue};

use crate::{EnvError, UsageError};

/// Default largest packet `M` of a flow: a full Ethernet frame without FCS.
const DEFAULT_MAX_PACKET: Size = Size(1514);
/// Default `latency` of a tbf: how long a packet may wait for tokens before tbf drops it.
const DEFAULT_TBF_LATENCY: Duration = Duration::from_millis(50);
/// Default skb priority of reserved packets: the highest a process may set with
/// `SO_PRIORITY` without `CAP_NET_ADMIN`.
pub const DEFAULT_RESERVED_PRIO: u8 = 6;
/// Default etf `delta` (and taprio `txtime-delay`): how long before a packet's launch
/// time the kernel hands it to the driver.
const DEFAULT_ETF_DELTA: Duration = Duration::from_micros(200);
/// Traffic classes of the taprio schedule: 0 = best effort, 1 = reserved.
const GATE_BEST_EFFORT: u8 = 0x01;
const GATE_RESERVED: u8 = 0x02;

#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The plan: a TOML file of [[flow]] and/or [[port]] tables, or a `lockstep node`
    /// file (its [node] table gives the port schedules).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
    /// Run the commands (root), replacing each device's root qdisc; only when the
    /// kernel has every qdisc they use.
    #[arg(long)]
    pub apply: bool,
    /// Print the commands as one JSON document instead of a commented script.
    #[arg(long)]
    pub json: bool,
    /// How to shape a device that carries a single flow (devices with several always
    /// get htb).
    #[arg(long, value_name = "auto|tbf|htb", default_value = "auto")]
    pub qdisc: QdiscChoice,
    /// taprio txtime-assist mode (flags 0x1): taprio stamps each packet's launch time
    /// and etf on the reserved queue sends it then.
    #[arg(long)]
    pub txtime_assist: bool,
    /// skb priority of reserved packets for a node file (0..15, default 6).
    #[arg(long, value_name = "PRIO", value_parser = clap::value_parser!(u8).range(0..16))]
    pub reserved_prio: Option<u8>,
    /// Write the script (or with --json the document) into FILE, whole or not at all,
    /// instead of printing it.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What shapes a device with one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum QdiscChoice {
    /// tbf for a device with one flow, htb for several.
    Auto,
    /// tbf (refused for a device with several flows).
    Tbf,
    /// htb with classes and filters, even for one flow.
    Htb,
}

/// A bad value in the plan: which field, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the field: `flow[1].rate`, `port[0].rows[2]`, `node.flows`.
    pub field: String,
    pub message: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for FieldError {}

fn bad(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

// ---------------------------------------------------------------------------------
// The file as written.

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    flow: Vec<RawFlow>,
    #[serde(default)]
    port: Vec<RawPort>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: String,
    dev: String,
    rate: String,
    burst: String,
    #[serde(default)]
    ceil: Option<String>,
    #[serde(default)]
    peak: Option<String>,
    #[serde(default)]
    max_packet: Option<String>,
    #[serde(default)]
    latency: Option<String>,
    #[serde(default)]
    limit: Option<String>,
    #[serde(default, rename = "match")]
    matcher: Option<RawMatch>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawMatch {
    #[serde(default)]
    src: Option<String>,
    #[serde(default)]
    dst: Option<String>,
    #[serde(default)]
    proto: Option<toml::Value>,
    #[serde(default)]
    sport: Option<i64>,
    #[serde(default)]
    dport: Option<i64>,
}

#[derive(Deserialize, Debug)]
#[serde(deny_unknown_fields)]
struct RawPort {
    dev: String,
    tf: String,
    k: i64,
    rows: Vec<toml::Value>,
    #[serde(default)]
    reserved_prio: Option<i64>,
    #[serde(default)]
    epoch_ns: Option<i64>,
    #[serde(default)]
    etf: Option<bool>,
    #[serde(default)]
    etf_delta: Option<String>,
    #[serde(default)]
    offload: Option<bool>,
    #[serde(default)]
    txtime_assist: Option<bool>,
}

// ---------------------------------------------------------------------------------
// The checked plan.

/// 5-tuple of a flow (every present field must match).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FlowMatch {
    pub src: Option<Prefix>,
    pub dst: Option<Prefix>,
    pub proto: Option<u8>,
    pub sport: Option<u16>,
    pub dport: Option<u16>,
}

impl FlowMatch {
    fn is_empty(&self) -> bool {
        *self == FlowMatch::default()
    }
}

/// A shaped flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FlowSpec {
    pub name: String,
    pub dev: String,
    pub rate: BitRate,
    pub burst: Size,
    pub ceil: Option<BitRate>,
    pub peak: Option<BitRate>,
    pub max_packet: Size,
    pub latency: Option<Duration>,
    pub limit: Option<Size>,
    pub matcher: FlowMatch,
}

/// A TDP output port's gate schedule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PortSpec {
    pub dev: String,
    pub tf: Duration,
    pub k: u32,
    /// Frames (`0..k`) that have reservations.
    pub rows: BTreeSet<u32>,
    pub reserved_prio: u8,
    /// Instant (TAI ns) at which frame 0 starts: the schedule's base-time.
    pub epoch_ns: i64,
    pub etf: bool,
    pub etf_delta: Duration,
    pub offload: bool,
    pub txtime_assist: bool,
}

/// Everything to export.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Plan {
    pub flows: Vec<FlowSpec>,
    pub ports: Vec<PortSpec>,
}

/// Options of the command line that change the plan.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    pub qdisc: QdiscChoice,
    pub txtime_assist: bool,
    pub reserved_prio: Option<u8>,
}

fn check_dev(field: String, dev: &str) -> Result<String, FieldError> {
    if iface::valid_ifname(dev) {
        Ok(dev.to_string())
    } else {
        Err(bad(
            field,
            format!(
                "\"{dev}\" is not an interface name (1 to 15 characters, no '/', ':' or spaces)"
            ),
        ))
    }
}

fn rate(field: String, s: &str) -> Result<BitRate, FieldError> {
    s.parse().map_err(|e| bad(field, format!("{e}")))
}

fn size(field: String, s: &str) -> Result<Size, FieldError> {
    s.parse().map_err(|e| bad(field, format!("{e}")))
}

/// Largest bucket or queue limit: tc counts them in 32-bit bytes.
const MAX_TC_BYTES: u64 = u32::MAX as u64;
/// Largest `max_packet` (tbf's `mtu`): the largest IPv4 packet.
const MAX_TC_PACKET: u64 = 65_535;
/// Longest tbf `latency`.
const MAX_TBF_LATENCY: Duration = Duration::from_secs(10);

/// `s` as a size of at most `max` bytes.
fn size_at_most(field: String, s: &str, max: u64) -> Result<Size, FieldError> {
    let v = size(field.clone(), s)?;
    if v.bytes() > max {
        return Err(bad(field, format!("{v} is above the limit of {max}B")));
    }
    Ok(v)
}

/// `s` as a positive duration of at most `max`.
fn duration_at_most(field: String, s: &str, max: Duration) -> Result<Duration, FieldError> {
    let d = positive_duration(field.clone(), s)?;
    lockstep_core::limits::duration_at_most(d, max, &max.to_string()).map_err(|m| bad(field, m))?;
    Ok(d)
}

fn positive_duration(field: String, s: &str) -> Result<Duration, FieldError> {
    let d = Duration::parse(s).map_err(|e| bad(field.clone(), e.to_string()))?;
    if d.is_positive() {
        Ok(d)
    } else {
        Err(bad(field, format!("must be positive, got \"{s}\"")))
    }
}

fn proto(field: String, v: &toml::Value) -> Result<u8, FieldError> {
    match v {
        toml::Value::String(s) => match s.to_ascii_lowercase().as_str() {
            "icmp" => Ok(1),
            "tcp" => Ok(6),
            "udp" => Ok(17),
            "sctp" => Ok(132),
            _ => Err(bad(
                field,
                format!("expected udp, tcp, icmp, sctp or a protocol number 0..255, got \"{s}\""),
            )),
        },
        toml::Value::Integer(n) => u8::try_from(*n)
            .map_err(|_| bad(field, format!("expected a protocol number 0..255, got {n}"))),
        other => Err(bad(
            field,
            format!("expected udp, tcp, icmp, sctp or a protocol number, got {other}"),
        )),
    }
}

fn port_number(field: String, n: i64) -> Result<u16, FieldError> {
    u16::try_from(n).map_err(|_| bad(field, format!("expected a port 0..65535, got {n}")))
}

fn check_match(at: &str, raw: &RawMatch) -> Result<FlowMatch, FieldError> {
    let prefix = |key: &str, s: &Option<String>| -> Result<Option<Prefix>, FieldError> {
        s.as_deref()
            .map(|s| {
                s.parse::<Prefix>()
                    .map_err(|e| bad(format!("{at}.{key}"), e.to_string()))
            })
            .transpose()
    };
    let m = FlowMatch {
        src: prefix("src", &raw.src)?,
        dst: prefix("dst", &raw.dst)?,
        proto: raw
            .proto
            .as_ref()
            .map(|v| proto(format!("{at}.proto"), v))
            .transpose()?,
        sport: raw
            .sport
            .map(|n| port_number(format!("{at}.sport"), n))
            .transpose()?,
        dport: raw
            .dport
            .map(|n| port_number(format!("{at}.dport"), n))
            .transpose()?,
    };
    for (key, given) in [("sport", m.sport.is_some()), ("dport", m.dport.is_some())] {
        if given && !matches!(m.proto, Some(6 | 17 | 132)) {
            return Err(bad(
                format!("{at}.{key}"),
                "a port match needs proto = \"udp\", \"tcp\" or \"sctp\" (ports are read at their offset in those headers)",
            ));
        }
    }
    Ok(m)
}

fn check_flow(i: usize, raw: &RawFlow) -> Result<FlowSpec, FieldError> {
    let at = format!("flow[{i}]");
    if raw.name.trim().is_empty() {
        return Err(bad(format!("{at}.name"), "must not be empty"));
    }
    // names go into the script's comments and the JSON: one safe set
    lockstep_core::names::check(raw.name.trim()).map_err(|m| bad(format!("{at}.name"), m))?;
    let dev = check_dev(format!("{at}.dev"), &raw.dev)?;
    let r = rate(format!("{at}.rate"), &raw.rate)?;
    let burst = size_at_most(format!("{at}.burst"), &raw.burst, MAX_TC_BYTES)?;
    let max_packet = match &raw.max_packet {
        Some(s) => size_at_most(format!("{at}.max_packet"), s, MAX_TC_PACKET)?,
        None => DEFAULT_MAX_PACKET,
    };
    if max_packet.bytes() == 0 {
        return Err(bad(format!("{at}.max_packet"), "must be at least 1B"));
    }
    if burst < max_packet {
        return Err(bad(
            format!("{at}.burst"),
            format!(
                "{burst} is below the largest packet ({max_packet}{}): such a packet would never conform",
                if raw.max_packet.is_none() { ", the default max_packet" } else { "" }
            ),
        ));
    }
    let ceil = raw
        .ceil
        .as_deref()
        .map(|s| rate(format!("{at}.ceil"), s))
        .transpose()?;
    if let Some(c) = ceil {
        if c < r {
            return Err(bad(
                format!("{at}.ceil"),
                format!("{c} is below the rate {r}"),
            ));
        }
    }
    let peak = raw
        .peak
        .as_deref()
        .map(|s| rate(format!("{at}.peak"), s))
        .transpose()?;
    if let Some(p) = peak {
        if p <= r {
            return Err(bad(
                format!("{at}.peak"),
                format!("{p} must be above the rate {r} (tbf's peakrate)"),
            ));
        }
    }
    let latency = raw
        .latency
        .as_deref()
        .map(|s| duration_at_most(format!("{at}.latency"), s, MAX_TBF_LATENCY))
        .transpose()?;
    let limit = raw
        .limit
        .as_deref()
        .map(|s| size_at_most(format!("{at}.limit"), s, MAX_TC_BYTES))
        .transpose()?;
    if latency.is_some() && limit.is_some() {
        return Err(bad(
            format!("{at}.limit"),
            "give latency or limit, not both (tbf takes one)",
        ));
    }
    if limit.is_some_and(|l| l.bytes() == 0) {
        return Err(bad(format!("{at}.limit"), "must be at least 1B"));
    }
    let matcher = match &raw.matcher {
        Some(m) => check_match(&format!("{at}.match"), m)?,
        None => FlowMatch::default(),
    };
    Ok(FlowSpec {
        name: raw.name.trim().to_string(),
        dev,
        rate: r,
        burst,
        ceil,
        peak,
        max_packet,
        latency,
        limit,
        matcher,
    })
}

fn check_row(at: String, k: u32, v: &toml::Value) -> Result<Option<u32>, FieldError> {
    let slot_of = |field: String, n: i64| -> Result<u32, FieldError> {
        match u32::try_from(n) {
            Ok(s) if s < k => Ok(s),
            _ => Err(bad(field, format!("frame {n} is not in 0..{k} (k = {k})"))),
        }
    };
    match v {
        toml::Value::Integer(n) => slot_of(at, *n).map(Some),
        toml::Value::Table(t) => {
            for key in t.keys() {
                if !matches!(key.as_str(), "slot" | "packets" | "size") {
                    return Err(bad(
                        format!("{at}.{key}"),
                        "unknown field (a row has slot, packets, size)",
                    ));
                }
            }
            let slot = match t.get("slot") {
                Some(toml::Value::Integer(n)) => slot_of(format!("{at}.slot"), *n)?,
                Some(other) => {
                    return Err(bad(
                        format!("{at}.slot"),
                        format!("expected a frame number, got {other}"),
                    ))
                }
                None => return Err(bad(format!("{at}.slot"), "missing")),
            };
            for key in ["packets", "size"] {
                match t.get(key) {
                    None => {}
                    Some(toml::Value::Integer(n)) if *n >= 0 => {}
                    Some(other) => {
                        return Err(bad(
                            format!("{at}.{key}"),
                            format!("expected a whole number ≥ 0, got {other}"),
                        ))
                    }
                }
            }
            // A row of zero packets reserves nothing.
            Ok(match t.get("packets") {
                Some(toml::Value::Integer(0)) => None,
                _ => Some(slot),
            })
        }
        other => Err(bad(
            at,
            format!("expected a frame number or a {{slot, packets, size}} table, got {other}"),
        )),
    }
}

/// Most frames per cycle an exported schedule may have: taprio takes one gate entry
/// per frame, and tc's netlink message must hold them all.
const MAX_FRAMES: u32 = 4096;

fn check_port(i: usize, raw: &RawPort, opts: &Options) -> Result<PortSpec, FieldError> {
    let at = format!("port[{i}]");
    let dev = check_dev(format!("{at}.dev"), &raw.dev)?;
    let tf = positive_duration(format!("{at}.tf"), &raw.tf)?;
    lockstep_core::limits::tf(tf).map_err(|m| bad(format!("{at}.tf"), m))?;
    let k = match u32::try_from(raw.k) {
        Ok(k) if (1..=MAX_FRAMES).contains(&k) => k,
        _ => {
            return Err(bad(
                format!("{at}.k"),
                format!(
                "expected 1 to {MAX_FRAMES} frames per cycle (one taprio gate entry each), got {}",
                raw.k
            ),
            ))
        }
    };
    if tf.checked_mul(i64::from(k)).is_none() {
        return Err(bad(format!("{at}.k"), "k × tf overflows"));
    }
    let mut rows = BTreeSet::new();
    for (j, v) in raw.rows.iter().enumerate() {
        if let Some(slot) = check_row(format!("{at}.rows[{j}]"), k, v)? {
            rows.insert(slot);
        }
    }
    if rows.is_empty() {
        return Err(bad(
            format!("{at}.rows"),
            "no frame is reserved: the reserved gate would never open",
        ));
    }
    let reserved_prio = match raw.reserved_prio {
        None => opts.reserved_prio.unwrap_or(DEFAULT_RESERVED_PRIO),
        Some(p) => match u8::try_from(p) {
            Ok(p) if p < 16 => p,
            _ => {
                return Err(bad(
                    format!("{at}.reserved_prio"),
                    format!("{p} is not an skb priority 0..15"),
                ))
            }
        },
    };
    let epoch_ns = raw.epoch_ns.unwrap_or(0);
    let etf_delta = match &raw.etf_delta {
        Some(s) => duration_at_most(
            format!("{at}.etf_delta"),
            s,
            lockstep_core::limits::MAX_DELAY,
        )?,
        None => DEFAULT_ETF_DELTA,
    };
    let txtime_assist = opts.txtime_assist || raw.txtime_assist.unwrap_or(false);
    let etf = raw.etf.unwrap_or(txtime_assist);
    if txtime_assist && !etf {
        return Err(bad(
            format!("{at}.etf"),
            "txtime-assist needs etf on the reserved queue (taprio sets launch times for it)",
        ));
    }
    Ok(PortSpec {
        dev,
        tf,
        k,
        rows,
        reserved_prio,
        epoch_ns,
        etf,
        etf_delta,
        offload: raw.offload.unwrap_or(false),
        txtime_assist,
    })
}

/// The port schedules of a node: one per port that carries reserved rows.
pub fn ports_of_node(node: &NodeConfig, opts: &Options) -> Result<Vec<PortSpec>, FieldError> {
    let mut by_port: BTreeMap<u16, BTreeSet<u32>> = BTreeMap::new();
    for f in &node.flows {
        for r in &f.rows {
            if r.packets > 0 {
                by_port.entry(f.out_port.0).or_default().insert(r.slot);
            }
        }
    }
    if by_port.is_empty() {
        return Err(bad(
            "node.flows",
            "no flow has rows: the node reserves nothing, so there is no gate schedule",
        ));
    }
    let k = node.frame.k;
    if k > MAX_FRAMES {
        return Err(bad(
            "node.frame.k",
            format!("expected at most {MAX_FRAMES} frames per cycle (one taprio gate entry each), got {k}"),
        ));
    }
    let cycle = node
        .frame
        .tf
        .checked_mul(i64::from(k))
        .unwrap_or(Duration::MAX);
    let mut ports = Vec::new();
    for (i, p) in node.ports.iter().enumerate() {
        let Some(rows) = by_port.remove(&p.id.0) else {
            continue;
        };
        if let Some(bad_slot) = rows.iter().find(|&&s| s >= k) {
            return Err(bad(
                "node.flows",
                format!(
                    "a row of port {} is in frame {bad_slot}, not in 0..{k}",
                    p.id
                ),
            ));
        }
        let dev = check_dev(format!("node.ports[{i}].ifname"), &p.ifname)?;
        // A negative epoch is the same schedule as its remainder modulo the cycle.
        let epoch_ns = if node.frame.epoch_ns < 0 && cycle.is_positive() {
            node.frame.epoch_ns.rem_euclid(cycle.as_nanos())
        } else {
            node.frame.epoch_ns
        };
        ports.push(PortSpec {
            dev,
            tf: node.frame.tf,
            k,
            rows,
            reserved_prio: opts.reserved_prio.unwrap_or(DEFAULT_RESERVED_PRIO),
            epoch_ns,
            etf: opts.txtime_assist,
            etf_delta: DEFAULT_ETF_DELTA,
            offload: false,
            txtime_assist: opts.txtime_assist,
        });
    }
    if let Some((port, _)) = by_port.into_iter().next() {
        return Err(bad(
            "node.flows",
            format!("a flow leaves on port {port}, which [[node.ports]] does not list"),
        ));
    }
    Ok(ports)
}

/// Parses and checks an export file (`[[flow]]`, `[[port]]`).
pub fn parse_plan(text: &str, opts: &Options) -> Result<Plan, FieldError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().to_string();
        match e.span() {
            Some(span) => {
                let (line, col) = line_col(text, span.start);
                bad(format!("line {line}, column {col}"), msg)
            }
            None => bad("file", msg),
        }
    })?;
    if raw.flow.is_empty() && raw.port.is_empty() {
        return Err(bad(
            "file",
            "nothing to export: no [[flow]] or [[port]] table (or a [node] table)",
        ));
    }
    let mut plan = Plan::default();
    for (i, f) in raw.flow.iter().enumerate() {
        plan.flows.push(check_flow(i, f)?);
    }
    for (i, p) in raw.port.iter().enumerate() {
        plan.ports.push(check_port(i, p, opts)?);
    }
    check_plan(&plan, opts)?;
    Ok(plan)
}

/// Cross-checks: names unique, one root qdisc per device, one default class per device.
fn check_plan(plan: &Plan, opts: &Options) -> Result<(), FieldError> {
    let mut names = BTreeMap::new();
    for (i, f) in plan.flows.iter().enumerate() {
        if let Some(j) = names.insert(f.name.as_str(), i) {
            return Err(bad(
                format!("flow[{i}].name"),
                format!("\"{}\" is also the name of flow[{j}]", f.name),
            ));
        }
    }
    let mut port_devs = BTreeMap::new();
    for (i, p) in plan.ports.iter().enumerate() {
        if let Some(j) = port_devs.insert(p.dev.as_str(), i) {
            return Err(bad(
                format!("port[{i}].dev"),
                format!("{} already has a schedule (port[{j}])", p.dev),
            ));
        }
    }
    for (dev, idx) in flows_by_dev(plan) {
        if let Some(j) = port_devs.get(dev) {
            return Err(bad(
                format!("flow[{}].dev", idx[0]),
                format!("{dev} also has a TDP schedule (port[{j}]): both need its root qdisc"),
            ));
        }
        if idx.len() > 1 && opts.qdisc == QdiscChoice::Tbf {
            return Err(bad(
                format!("flow[{}].dev", idx[1]),
                format!(
                    "--qdisc tbf: {dev} carries {} flows, and a tbf shapes a whole device as one",
                    idx.len()
                ),
            ));
        }
        let unmatched: Vec<usize> = idx
            .iter()
            .copied()
            .filter(|&i| plan.flows[i].matcher.is_empty())
            .collect();
        if idx.len() > 1 && unmatched.len() > 1 {
            return Err(bad(
                format!("flow[{}].match", unmatched[1]),
                format!(
                    "flows {} and {} on {dev} both lack a match: only one can take the unclassified traffic",
                    plan.flows[unmatched[0]].name, plan.flows[unmatched[1]].name
                ),
            ));
        }
    }
    Ok(())
}

/// Flow indices per device, devices in order of first appearance.
fn flows_by_dev(plan: &Plan) -> Vec<(&str, Vec<usize>)> {
    let mut out: Vec<(&str, Vec<usize>)> = Vec::new();
    for (i, f) in plan.flows.iter().enumerate() {
        match out.iter_mut().find(|(d, _)| *d == f.dev) {
            Some((_, v)) => v.push(i),
            None => out.push((f.dev.as_str(), vec![i])),
        }
    }
    out
}

/// 1-based line and column of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (
        line,
        before.get(start..).map_or(0, |s| s.chars().count()) + 1,
    )
}

// ---------------------------------------------------------------------------------
// The commands.

/// One `tc` invocation and what it does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TcCommand {
    /// The arguments after `tc`.
    pub argv: Vec<String>,
    /// What the command does, one line per part.
    pub comment: Vec<String>,
}

impl TcCommand {
    /// The command line as typed.
    pub fn line(&self) -> String {
        cmd::command_line("tc", &self.argv)
    }
}

/// What one device gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceCommands {
    pub dev: String,
    /// `tbf`, `htb` or `taprio`.
    pub root: &'static str,
    /// The qdisc kinds the commands use (the kernel must have each).
    pub qdiscs: Vec<&'static str>,
    /// What the device's commands do together.
    pub summary: String,
    pub commands: Vec<TcCommand>,
}

fn words(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn tc_rate(r: BitRate) -> String {
    format!("{}bit", r.bps())
}

fn tc_size(s: Size) -> String {
    format!("{}b", s.bytes())
}

/// tc takes whole microseconds: rounded up, so the limit is never tighter than asked.
fn tc_micros(d: Duration) -> String {
    format!("{}us", d.as_nanos().saturating_add(999) / 1000)
}

fn tbf_commands(f: &FlowSpec) -> DeviceCommands {
    let mut argv = words(&["qdisc", "add", "dev", &f.dev, "root", "tbf"]);
    let burst = f.burst;
    argv.extend([
        "rate".into(),
        tc_rate(f.rate),
        "burst".into(),
        tc_size(burst),
    ]);
    let mut comment = vec![
        format!(
            "tbf shapes everything leaving {} as flow \"{}\":",
            f.dev, f.name
        ),
        format!("  rate {} = r ({}), the sustained rate", tc_rate(f.rate), f.rate),
        format!(
            "  burst {} = b, the bucket (tc qdisc show prints it rounded down to whole µs at the rate)",
            tc_size(burst)
        ),
    ];
    if let Some(p) = f.peak {
        let mtu = f.max_packet;
        argv.extend(["peakrate".into(), tc_rate(p), "mtu".into(), tc_size(mtu)]);
        comment.push(format!(
            "  peakrate {} mtu {} = C ({p}) and M ({}): a second bucket of one packet at the peak rate",
            tc_rate(p),
            tc_size(mtu),
            f.max_packet
        ));
    }
    match (f.limit, f.latency) {
        (Some(l), _) => {
            argv.extend(["limit".into(), tc_size(l)]);
            comment.push(format!(
                "  limit {}: bytes that may wait for tokens; beyond that tbf drops",
                tc_size(l)
            ));
        }
        (None, latency) => {
            let l = latency.unwrap_or(DEFAULT_TBF_LATENCY);
            argv.extend(["latency".into(), tc_micros(l)]);
            comment.push(format!(
                "  latency {}: the longest a packet may wait for tokens; beyond that tbf drops{}",
                tc_micros(l),
                if latency.is_none() { " (default)" } else { "" }
            ));
        }
    }
    if !f.matcher.is_empty() {
        comment.push(format!(
            "  (its match is not used: tbf cannot classify; --qdisc htb shapes only {}'s packets)",
            f.name
        ));
    }
    DeviceCommands {
        dev: f.dev.clone(),
        root: "tbf",
        qdiscs: vec!["tbf"],
        summary: format!("{}: 1 shaped flow ({}) -> tbf", f.dev, f.name),
        commands: vec![TcCommand { argv, comment }],
    }
}

/// `src 10.0.0.3/32, UDP, dport 9000` for comments.
fn describe_match(m: &FlowMatch) -> String {
    let mut parts = Vec::new();
    if let Some(p) = m.proto {
        parts.push(match p {
            1 => "ICMP".to_string(),
            6 => "TCP".to_string(),
            17 => "UDP".to_string(),
            132 => "SCTP".to_string(),
            n => format!("protocol {n}"),
        });
    }
    if let Some(s) = m.src {
        parts.push(format!("src {s}"));
    }
    if let Some(d) = m.dst {
        parts.push(format!("dst {d}"));
    }
    if let Some(p) = m.sport {
        parts.push(format!("sport {p}"));
    }
    if let Some(p) = m.dport {
        parts.push(format!("dport {p}"));
    }
    parts.join(", ")
}

fn htb_commands(plan: &Plan, dev: &str, idx: &[usize]) -> DeviceCommands {
    let flows: Vec<&FlowSpec> = idx.iter().filter_map(|&i| plan.flows.get(i)).collect();
    // Minor class ids 1.. in file order (tc reads them in hex).
    let default = flows
        .iter()
        .position(|f| f.matcher.is_empty())
        .map_or(0, |p| p + 1);
    let mut commands = vec![TcCommand {
        argv: words(&[
            "qdisc",
            "add",
            "dev",
            dev,
            "root",
            "handle",
            "1:",
            "htb",
            "default",
            &format!("{default:x}"),
        ]),
        comment: vec![
            format!("htb root on {dev}, handle 1:, one class per flow;"),
            match default {
                0 => "  default 0: unclassified traffic is not shaped (htb sends it straight out)"
                    .to_string(),
                d => format!(
                    "  default {d:x}: unclassified traffic goes to class 1:{d:x} (flow \"{}\", which has no match)",
                    flows.get(d - 1).map_or("", |f| f.name.as_str())
                ),
            },
        ],
    }];
    for (j, f) in flows.iter().enumerate() {
        let minor = j + 1;
        let ceil = f.ceil.unwrap_or(f.rate);
        let burst = f.burst;
        commands.push(TcCommand {
            argv: vec![
                "class".into(),
                "add".into(),
                "dev".into(),
                dev.into(),
                "parent".into(),
                "1:".into(),
                "classid".into(),
                format!("1:{minor:x}"),
                "htb".into(),
                "rate".into(),
                tc_rate(f.rate),
                "ceil".into(),
                tc_rate(ceil),
                "burst".into(),
                tc_size(burst),
                "cburst".into(),
                tc_size(burst),
            ],
            comment: vec![
                format!("class 1:{minor:x} = flow \"{}\":", f.name),
                format!("  rate {} = r ({})", tc_rate(f.rate), f.rate),
                if ceil == f.rate {
                    format!(
                        "  ceil {} = r: the class never borrows, the flow stays within its T-SPEC",
                        tc_rate(ceil)
                    )
                } else {
                    format!(
                        "  ceil {} ({ceil}): it may borrow up to this",
                        tc_rate(ceil)
                    )
                },
                format!(
                    "  burst = cburst = {} = b, the bucket (tc rounds it up to its 64 ns tick)",
                    tc_size(burst)
                ),
            ],
        });
    }
    for (j, f) in flows.iter().enumerate() {
        let m = &f.matcher;
        if m.is_empty() {
            continue;
        }
        let minor = j + 1;
        let mut argv = words(&[
            "filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
        ]);
        if let Some(s) = m.src {
            argv.extend(words(&["match", "ip", "src", &s.to_string()]));
        }
        if let Some(d) = m.dst {
            argv.extend(words(&["match", "ip", "dst", &d.to_string()]));
        }
        if let Some(p) = m.proto {
            argv.extend(words(&["match", "ip", "protocol", &p.to_string(), "0xff"]));
        }
        if let Some(p) = m.sport {
            argv.extend(words(&["match", "ip", "sport", &p.to_string(), "0xffff"]));
        }
        if let Some(p) = m.dport {
            argv.extend(words(&["match", "ip", "dport", &p.to_string(), "0xffff"]));
        }
        argv.extend(["flowid".into(), format!("1:{minor:x}")]);
        let mut comment = vec![format!(
            "IPv4 packets with {} go to class 1:{minor:x} (flow \"{}\")",
            describe_match(m),
            f.name
        )];
        if m.sport.is_some() || m.dport.is_some() {
            comment.push(
                "  (u32 reads the ports right after a 20-byte IP header: packets with IP options are not matched)"
                    .to_string(),
            );
        }
        commands.push(TcCommand { argv, comment });
    }
    DeviceCommands {
        dev: dev.to_string(),
        root: "htb",
        qdiscs: vec!["htb"],
        summary: format!(
            "{dev}: {} shaped flow{} ({}) -> htb",
            flows.len(),
            if flows.len() == 1 { "" } else { "s" },
            flows
                .iter()
                .map(|f| f.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        commands,
    }
}

fn taprio_commands(p: &PortSpec) -> DeviceCommands {
    let tf = p.tf.as_nanos();
    let mut argv = words(&[
        "qdisc", "add", "dev", &p.dev, "parent", "root", "handle", "100:", "taprio", "num_tc", "2",
        "map",
    ]);
    for prio in 0u8..16 {
        argv.push(if prio == p.reserved_prio { "1" } else { "0" }.to_string());
    }
    argv.extend(words(&["queues", "1@0", "1@1", "base-time"]));
    argv.push(p.epoch_ns.to_string());
    let mut comment = vec![
        format!(
            "taprio on {}: one gate entry per time-frame (TF = {}, k = {} frames, cycle {})",
            p.dev,
            p.tf,
            p.k,
            Duration(tf.saturating_mul(i64::from(p.k)))
        ),
        "  num_tc 2: traffic class 0 = best effort, 1 = reserved".to_string(),
        format!(
            "  map: skb priority {} (SO_PRIORITY of the reserved senders) -> class 1, every other -> class 0",
            p.reserved_prio
        ),
        format!(
            "  queues 1@0 1@1: class 0 on TX queue 0, class 1 on TX queue 1 ({} needs 2 TX queues)",
            p.dev
        ),
        format!(
            "  base-time {}: the cycle starts at the frames' epoch (TAI ns), so entry i is frame i mod k",
            p.epoch_ns
        ),
    ];
    for frame in 0..p.k {
        let reserved = p.rows.contains(&frame);
        let mask = if reserved {
            GATE_RESERVED
        } else {
            GATE_BEST_EFFORT
        };
        argv.extend([
            "sched-entry".into(),
            "S".into(),
            format!("{mask:02x}"),
            tf.to_string(),
        ]);
        comment.push(format!(
            "  sched-entry S {mask:02x} {tf}: frame {frame} {}",
            if reserved {
                "has reservations: only the reserved gate is open"
            } else {
                "has none: only best effort"
            }
        ));
    }
    argv.extend(words(&["clockid", "CLOCK_TAI"]));
    comment.push("  clockid CLOCK_TAI: the clock every lockstep node reads".to_string());
    if p.txtime_assist {
        argv.extend(words(&[
            "flags",
            "0x1",
            "txtime-delay",
            &p.etf_delta.as_nanos().to_string(),
        ]));
        comment.push(format!(
            "  flags 0x1 txtime-delay {}: txtime-assist, taprio gives each packet a launch time in its gate ({} ahead)",
            p.etf_delta.as_nanos(),
            p.etf_delta
        ));
    }
    let mut commands = vec![TcCommand { argv, comment }];
    let mut qdiscs = vec!["taprio"];
    if p.etf {
        let mut argv = words(&[
            "qdisc",
            "replace",
            "dev",
            &p.dev,
            "parent",
            "100:2",
            "etf",
            "clockid",
            "CLOCK_TAI",
            "delta",
        ]);
        argv.push(p.etf_delta.as_nanos().to_string());
        let mut comment = vec![
            "etf on the reserved queue (100:2): each packet leaves at its launch time".to_string(),
            format!(
                "  delta {}: handed to the driver {} before it",
                p.etf_delta.as_nanos(),
                p.etf_delta
            ),
        ];
        if p.offload {
            argv.push("offload".into());
            comment.push("  offload: the NIC launches the packet (LaunchTime)".to_string());
        }
        if p.txtime_assist {
            argv.push("skip_sock_check".into());
            comment.push(
                "  skip_sock_check: the launch time comes from taprio, not from an SO_TXTIME socket"
                    .to_string(),
            );
        } else {
            comment.push(
                "  reserved senders must set launch times (SO_TXTIME): etf drops packets without one"
                    .to_string(),
            );
        }
        commands.push(TcCommand { argv, comment });
        qdiscs.push("etf");
    }
    DeviceCommands {
        dev: p.dev.clone(),
        root: "taprio",
        qdiscs,
        summary: format!(
            "{}: TDP schedule, {} of {} frames reserved -> taprio{}",
            p.dev,
            p.rows.len(),
            p.k,
            if p.etf { " + etf" } else { "" }
        ),
        commands,
    }
}

/// The commands of a plan, device by device (shaped flows first, in file order).
pub fn commands(plan: &Plan, opts: &Options) -> Vec<DeviceCommands> {
    let mut out = Vec::new();
    for (dev, idx) in flows_by_dev(plan) {
        let one = idx.len() == 1;
        let tbf = one && opts.qdisc != QdiscChoice::Htb;
        match (tbf, idx.first().and_then(|&i| plan.flows.get(i))) {
            (true, Some(f)) => out.push(tbf_commands(f)),
            _ => out.push(htb_commands(plan, dev, &idx)),
        }
    }
    for p in &plan.ports {
        out.push(taprio_commands(p));
    }
    out
}

/// The commented script.
pub fn render(source: &Path, devices: &[DeviceCommands]) -> String {
    // every comment is one line whatever it holds: a newline in a path or a value
    // could otherwise start a line the shell runs
    let one_line = |t: &str| t.replace(['\n', '\r'], " ");
    let mut s = format!(
        "# lockstep export of {}\n\
         # Run as root. Each device's root qdisc must be the default one: remove another\n\
         # first with `tc qdisc del dev DEV root` (lockstep export --apply does).\n",
        one_line(&source.display().to_string())
    );
    for d in devices {
        s.push_str(&format!("\n# == {} ==\n", one_line(&d.summary)));
        for c in &d.commands {
            for line in &c.comment {
                s.push_str("# ");
                s.push_str(&one_line(line));
                s.push('\n');
            }
            s.push_str(&c.line());
            s.push('\n');
        }
    }
    s
}

#[derive(Serialize)]
struct JsonCommand<'a> {
    line: String,
    argv: Vec<&'a str>,
    comment: &'a [String],
}

#[derive(Serialize)]
struct JsonDevice<'a> {
    dev: &'a str,
    root: &'a str,
    qdiscs: &'a [&'static str],
    summary: &'a str,
    commands: Vec<JsonCommand<'a>>,
}

#[derive(Serialize)]
struct JsonDoc<'a> {
    kind: &'static str,
    command: Vec<String>,
    file: String,
    plan: &'a Plan,
    devices: Vec<JsonDevice<'a>>,
    apply: Option<&'a ApplyOutcome>,
}

/// What `--apply` did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ApplyOutcome {
    /// Qdisc kinds the commands need that the kernel lacks.
    pub missing: Vec<String>,
    /// Commands run successfully.
    pub applied: usize,
    pub total: usize,
    /// Why it stopped, if it did.
    pub error: Option<String>,
}

fn json(
    source: &Path,
    plan: &Plan,
    devices: &[DeviceCommands],
    apply: Option<&ApplyOutcome>,
) -> String {
    let doc = JsonDoc {
        kind: "export",
        command: std::env::args().collect(),
        file: source.display().to_string(),
        plan,
        devices: devices
            .iter()
            .map(|d| JsonDevice {
                dev: &d.dev,
                root: d.root,
                qdiscs: &d.qdiscs,
                summary: &d.summary,
                commands: d
                    .commands
                    .iter()
                    .map(|c| JsonCommand {
                        line: c.line(),
                        argv: c.argv.iter().map(String::as_str).collect(),
                        comment: &c.comment,
                    })
                    .collect(),
            })
            .collect(),
        apply,
    };
    serde_json::to_string_pretty(&doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// Reads the plan: a node file (a top-level `[node]` table) or an export file.
fn load(path: &Path, opts: &Options) -> Result<Plan> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("{}: cannot read it: {e}", path.display())))?;
    let is_node_file = toml::from_str::<toml::Table>(&text)
        .map(|t| t.contains_key("node"))
        .unwrap_or(false);
    if is_node_file {
        let file = crate::node::config::load(path).map_err(|e| UsageError(e.to_string()))?;
        let ports = ports_of_node(&file.node, opts)
            .map_err(|e| UsageError(format!("{}: {e}", path.display())))?;
        return Ok(Plan {
            flows: Vec::new(),
            ports,
        });
    }
    parse_plan(&text, opts).map_err(|e| UsageError(located(path, &text, &e)).into())
}

/// A plan's error worded as `lockstep calc` words a network file's:
/// `FILE:LINE: flow[0] "c".rate: why`, the line where the field is written and the
/// table's name when it has one; `FILE:LINE: why` for a TOML syntax error; `FILE:
/// field: why` when the field is not in a table.
fn located(path: &Path, text: &str, e: &FieldError) -> String {
    let syntax_line = e
        .field
        .strip_prefix("line ")
        .and_then(|r| r.split_once(','))
        .and_then(|(n, _)| n.parse::<usize>().ok());
    if let Some(line) = syntax_line {
        return format!("{}:{line}: {}", path.display(), e.message);
    }
    match locate(text, &e.field) {
        Some((line, field)) => format!("{}:{line}: {field}: {}", path.display(), e.message),
        None => format!("{}: {e}", path.display()),
    }
}

/// `table[i]` → (`table`, `i`); `key` → (`key`, `None`).
fn path_segment(seg: &str) -> (&str, Option<usize>) {
    match seg.strip_suffix(']').and_then(|s| s.split_once('[')) {
        Some((key, i)) => (key, i.parse().ok()),
        None => (seg, None),
    }
}

/// The line `field` (`flow[1].match.dport`, `port[0].rows[2]`) is written on (or,
/// for a missing key, its table's) and the field with its table's name
/// (`flow[1] "e-rt".match.dport`).
fn locate(text: &str, field: &str) -> Option<(usize, String)> {
    let doc = DeTable::parse(text).ok()?;
    let (head, rest) = field.split_once('.').unwrap_or((field, ""));
    let (key, Some(index)) = path_segment(head) else {
        return None;
    };
    let DeValue::Array(items) = doc.get_ref().get(key)?.get_ref() else {
        return None;
    };
    let item = items.get(index)?;
    let DeValue::Table(top) = item.get_ref() else {
        return None;
    };
    let mut span = item.span();
    let mut table = top;
    for seg in rest.split('.').filter(|s| !s.is_empty()) {
        let (key, index) = path_segment(seg);
        let Some(v) = table.get(key) else { break };
        span = v.span();
        match (v.get_ref(), index) {
            (DeValue::Array(a), Some(i)) => {
                span = a.get(i).map_or(span, |x| x.span());
                break;
            }
            (DeValue::Table(t), None) => table = t,
            _ => break,
        }
    }
    let name = match top.get("name").map(|n| n.get_ref()) {
        Some(DeValue::String(n)) => format!(" \"{n}\""),
        _ => String::new(),
    };
    let dot = if rest.is_empty() { "" } else { "." };
    Some((
        line_col(text, span.start).0,
        format!("{head}{name}{dot}{rest}"),
    ))
}

/// Which of `kinds` the kernel lacks.
fn missing_qdiscs(kinds: &[&str]) -> Result<Vec<String>> {
    let probes = tc::probe_qdiscs(kinds).context("checking which qdiscs this kernel has")?;
    Ok(probes
        .into_iter()
        .filter(|p| !p.available)
        .map(|p| p.kind)
        .collect())
}

/// Runs the commands, each device's root replaced first. Stops at the first failure,
/// or at a stop asked for (looked at before each command), and removes what it
/// configured.
fn apply(devices: &[DeviceCommands], outcome: &mut ApplyOutcome) -> Result<(), String> {
    for d in devices {
        iface::ifindex(&d.dev).map_err(|e| format!("device {}: {e}", d.dev))?;
    }
    let mut touched: Vec<&str> = Vec::new();
    let result = (|| {
        for d in devices {
            tc::clear(&d.dev).map_err(|e| format!("clearing the root qdisc of {}: {e}", d.dev))?;
            touched.push(&d.dev);
            for c in &d.commands {
                if crate::stop::stop_requested() {
                    return Err(format!(
                        "stopped after {} of {} commands",
                        outcome.applied, outcome.total
                    ));
                }
                cmd::tc(&c.argv).map_err(|e| e.to_string())?;
                outcome.applied += 1;
            }
        }
        Ok(())
    })();
    if result.is_err() {
        for dev in touched {
            let _ = tc::clear(dev);
        }
        outcome.applied = 0;
    }
    result
}

pub fn run(args: ExportArgs) -> Result<()> {
    let opts = Options {
        qdisc: args.qdisc,
        txtime_assist: args.txtime_assist,
        reserved_prio: args.reserved_prio,
    };
    // A big plan (many ports of thousands of frames) takes long to read, to turn into
    // commands and to write out, and none of that can look at the stop flag: each
    // runs on a thread of its own, and a stop ends the command with nothing printed
    // (half a script is worse than none).
    let file = std::sync::Arc::new(args.file.clone());
    let f = file.clone();
    let made = crate::stop::unless_stopped(move || {
        let plan = load(&f, &opts)?;
        let devices = commands(&plan, &opts);
        anyhow::Ok(std::sync::Arc::new((plan, devices)))
    });
    let computed = match made {
        Ok(c) => c?,
        Err(e) => return Err(cut(e, "computing the commands: nothing printed")),
    };
    let devices = &computed.1;
    let total = devices.iter().map(|d| d.commands.len()).sum();
    let json_out = args.json;
    let output = args.output.clone();
    let print = |outcome: Option<ApplyOutcome>| -> Result<()> {
        let (c, f) = (computed.clone(), file.clone());
        let text = crate::stop::unless_stopped(move || {
            if json_out {
                format!("{}\n", json(&f, &c.0, &c.1, outcome.as_ref()))
            } else {
                render(&f, &c.1)
            }
        })
        .map_err(|e| cut(e, "writing the commands out: nothing printed"))?;
        match &output {
            Some(path) => lockstep_linux::durable::write_atomic(path, text.as_bytes())
                .with_context(|| format!("--output {}", path.display())),
            None => {
                print!("{text}");
                Ok(())
            }
        }
    };
    if !args.apply {
        return print(None);
    }
    // In order of first use, so the message names taprio before etf.
    let mut kinds: Vec<&str> = Vec::new();
    for k in devices.iter().flat_map(|d| d.qdiscs.iter().copied()) {
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    let mut outcome = ApplyOutcome {
        total,
        ..ApplyOutcome::default()
    };
    let missing = match missing_qdiscs(&kinds) {
        Ok(m) => m,
        Err(e) => {
            outcome.error = Some(format!("{e:#}"));
            print(Some(outcome))?;
            return Err(
                EnvError(format!("{e:#}: printed the commands, applied none of them")).into(),
            );
        }
    };
    if !missing.is_empty() {
        let list = missing
            .iter()
            .map(|k| format!("{k} ({})", tc::config_option(k)))
            .collect::<Vec<_>>()
            .join(", no ");
        outcome.missing = missing;
        let msg = format!("this kernel has no {list}: printed the commands, applied none of them");
        outcome.error = Some(msg.clone());
        print(Some(outcome))?;
        return Err(EnvError(msg).into());
    }
    let result = apply(devices, &mut outcome);
    if let Err(e) = &result {
        outcome.error = Some(e.clone());
    }
    let applied = outcome.applied;
    print(Some(outcome))?;
    match result {
        Ok(()) => {
            crate::say::say!(
                "lockstep export: applied {} commands on {}",
                applied,
                devices
                    .iter()
                    .map(|d| d.dev.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            Ok(())
        }
        Err(e) if crate::stop::stop_requested() => Err(crate::Interrupted(format!(
            "{e}; removed the root qdiscs it had set, nothing is left applied"
        ))
        .into()),
        Err(e) => Err(EnvError(format!(
            "{e}; removed the root qdiscs it had set, nothing is left applied"
        ))
        .into()),
    }
}

/// The error of a computation a stop cut short (or that panicked).
fn cut(e: crate::stop::Cut, what: &str) -> anyhow::Error {
    match e {
        crate::stop::Cut::Stopped => crate::Interrupted(format!("while {what}")).into(),
        crate::stop::Cut::Panicked => anyhow::anyhow!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: Options = Options {
        qdisc: QdiscChoice::Auto,
        txtime_assist: false,
        reserved_prio: None,
    };

    fn err(text: &str) -> FieldError {
        parse_plan(text, &OPTS).unwrap_err()
    }

    fn lines(devices: &[DeviceCommands]) -> Vec<String> {
        devices
            .iter()
            .flat_map(|d| d.commands.iter().map(TcCommand::line))
            .collect()
    }

    const FLOW: &str = r#"
[[flow]]
name = "c"
dev = "vc"
rate = "40Mbit/s"
burst = "51514B"
"#;

    #[test]
    fn one_flow_is_a_tbf_and_htb_on_request() {
        let plan = parse_plan(FLOW, &OPTS).unwrap();
        assert_eq!(plan.flows[0].rate, BitRate(40_000_000));
        assert_eq!(plan.flows[0].max_packet, Size(1514));
        assert_eq!(
            lines(&commands(&plan, &OPTS)),
            ["tc qdisc add dev vc root tbf rate 40000000bit burst 51514b latency 50000us"]
        );
        let htb = Options {
            qdisc: QdiscChoice::Htb,
            ..OPTS
        };
        assert_eq!(
            lines(&commands(&plan, &htb)),
            [
                "tc qdisc add dev vc root handle 1: htb default 1",
                "tc class add dev vc parent 1: classid 1:1 htb rate 40000000bit ceil 40000000bit burst 51514b cburst 51514b",
            ]
        );
        let extra = FLOW.to_string() + "peak = \"100Mbit/s\"\nlimit = \"100kB\"\n";
        let plan = parse_plan(&extra, &OPTS).unwrap();
        assert_eq!(
            lines(&commands(&plan, &OPTS)),
            ["tc qdisc add dev vc root tbf rate 40000000bit burst 51514b peakrate 100000000bit mtu 1514b limit 100000b"]
        );
    }

    #[test]
    fn many_flows_get_hex_class_ids() {
        let mut text = String::new();
        for i in 0..11 {
            text.push_str(&format!(
                "[[flow]]\nname = \"f{i}\"\ndev = \"v\"\nrate = \"1Mbit/s\"\nburst = \"2kB\"\nmatch = {{ dst = \"10.0.0.{i}\" }}\n"
            ));
        }
        let plan = parse_plan(&text, &OPTS).unwrap();
        let l = lines(&commands(&plan, &OPTS));
        assert_eq!(l[0], "tc qdisc add dev v root handle 1: htb default 0");
        assert!(l[10].contains("classid 1:a htb"), "{}", l[10]);
        assert_eq!(
            l[22],
            "tc filter add dev v parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.10/32 flowid 1:b"
        );
    }

    #[test]
    fn errors_say_file_line_and_the_named_field_as_calc_does() {
        let at = |text: &str| located(Path::new("p.toml"), text, &err(text));
        let text = "[[flow]]\nname = \"c\"\ndev = \"vc\"\nrate = \"40Mbit\"\nburst = \"3028B\"\n";
        assert_eq!(
            at(text),
            "p.toml:4: flow[0] \"c\".rate: expected a bit rate like 100Mbit/s or 20B/us, got \"40Mbit\" (\"Mbit\" is a unit of data)"
        );
        assert!(
            at("[[flow]]\nname = ").starts_with("p.toml:2: "),
            "{}",
            at("[[flow]]\nname = ")
        );
    }

    #[test]
    fn bad_flows_name_the_field() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "rate = \"40Mbit/s\"",
                "rate = \"fast\"",
                "flow[0].rate: expected a bit rate",
            ),
            (
                "rate = \"40Mbit/s\"",
                "rate = \"0Mbit/s\"",
                "flow[0].rate: a bit rate must be above 0",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"1000B\"",
                "flow[0].burst: 1000B is below the largest packet (1514B, the default max_packet)",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nmax_packet = \"0B\"",
                "flow[0].max_packet: must be at least 1B",
            ),
            (
                "dev = \"vc\"",
                "dev = \"a/b\"",
                "flow[0].dev: \"a/b\" is not an interface name",
            ),
            (
                "name = \"c\"",
                "name = \" \"",
                "flow[0].name: must not be empty",
            ),
            (
                "name = \"c\"",
                "name = \"c\\nreboot\"",
                "flow[0].name: \"c\\nreboot\" is not a name",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nceil = \"1Mbit/s\"",
                "flow[0].ceil: 1Mbit/s is below the rate 40Mbit/s",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\npeak = \"40Mbit/s\"",
                "flow[0].peak: 40Mbit/s must be above the rate",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nlatency = \"0ms\"",
                "flow[0].latency: must be positive",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nlatency = \"1ms\"\nlimit = \"1kB\"",
                "flow[0].limit: give latency or limit, not both",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nmatch = { dport = 9 }",
                "flow[0].match.dport: a port match needs proto",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nmatch = { proto = \"gre\" }",
                "flow[0].match.proto: expected udp, tcp",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nmatch = { proto = 300 }",
                "flow[0].match.proto: expected a protocol number 0..255, got 300",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nmatch = { proto = \"udp\", sport = 70000 }",
                "flow[0].match.sport: expected a port 0..65535, got 70000",
            ),
            (
                "burst = \"51514B\"",
                "burst = \"51514B\"\nmatch = { src = \"10.0.0.1/24\" }",
                "flow[0].match.src: 10.0.0.1/24: host bits set",
            ),
        ];
        for (from, to, want) in cases {
            let e = err(&FLOW.replace(from, to)).to_string();
            assert!(e.starts_with(want), "{to}: {e}");
        }
        let e = err(&FLOW.replace("rate = \"40Mbit/s\"", "rate = 5"));
        assert_eq!(e.field, "line 5, column 8");
        assert!(e.message.contains("expected a string"), "{e}");
        let e = err(&FLOW.replace("burst", "bucket"));
        assert!(e.message.contains("unknown field `bucket`"), "{e}");
        assert_eq!(
            err("").to_string(),
            "file: nothing to export: no [[flow]] or [[port]] table (or a [node] table)"
        );
    }

    #[test]
    fn cross_checks_name_the_field() {
        let two = format!("{FLOW}{}", FLOW.replace("name = \"c\"", "name = \"d\""));
        let e = err(&two);
        assert_eq!(e.field, "flow[1].match");
        assert!(
            e.message
                .starts_with("flows c and d on vc both lack a match"),
            "{e}"
        );
        let e = err(&format!("{FLOW}{FLOW}"));
        assert_eq!(
            e.to_string(),
            "flow[1].name: \"c\" is also the name of flow[0]"
        );
        let tbf = Options {
            qdisc: QdiscChoice::Tbf,
            ..OPTS
        };
        let e = parse_plan(&two, &tbf).unwrap_err();
        assert_eq!(
            e.to_string(),
            "flow[1].dev: --qdisc tbf: vc carries 2 flows, and a tbf shapes a whole device as one"
        );
        let port = "[[port]]\ndev = \"vc\"\ntf = \"1ms\"\nk = 2\nrows = [0]\n";
        let e = err(&format!("{FLOW}{port}"));
        assert_eq!(
            e.to_string(),
            "flow[0].dev: vc also has a TDP schedule (port[0]): both need its root qdisc"
        );
        let e = err(&format!("{port}{port}"));
        assert_eq!(
            e.to_string(),
            "port[1].dev: vc already has a schedule (port[0])"
        );
    }

    const PORT: &str = r#"
[[port]]
dev = "p0"
tf = "250us"
k = 4
rows = [2, { slot = 0, packets = 3, size = 1000 }, { slot = 3, packets = 0 }]
"#;

    #[test]
    fn a_port_is_a_gate_per_frame() {
        let plan = parse_plan(PORT, &OPTS).unwrap();
        assert_eq!(plan.ports[0].rows, BTreeSet::from([0, 2]));
        assert_eq!(plan.ports[0].reserved_prio, 6);
        let d = commands(&plan, &OPTS);
        assert_eq!(d[0].qdiscs, ["taprio"]);
        assert_eq!(
            lines(&d),
            ["tc qdisc add dev p0 parent root handle 100: taprio num_tc 2 map 0 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 queues 1@0 1@1 base-time 0 sched-entry S 02 250000 sched-entry S 01 250000 sched-entry S 02 250000 sched-entry S 01 250000 clockid CLOCK_TAI"]
        );
        let assist = Options {
            txtime_assist: true,
            reserved_prio: Some(3),
            ..OPTS
        };
        let text = PORT.replace(
            "k = 4",
            "k = 4\nepoch_ns = 1000\netf_delta = \"150us\"\noffload = true\nreserved_prio = 2",
        );
        let d = commands(&parse_plan(&text, &assist).unwrap(), &assist);
        assert_eq!(d[0].qdiscs, ["taprio", "etf"]);
        assert_eq!(
            lines(&d),
            [
                "tc qdisc add dev p0 parent root handle 100: taprio num_tc 2 map 0 0 1 0 0 0 0 0 0 0 0 0 0 0 0 0 queues 1@0 1@1 base-time 1000 sched-entry S 02 250000 sched-entry S 01 250000 sched-entry S 02 250000 sched-entry S 01 250000 clockid CLOCK_TAI flags 0x1 txtime-delay 150000",
                "tc qdisc replace dev p0 parent 100:2 etf clockid CLOCK_TAI delta 150000 offload skip_sock_check",
            ]
        );
        // etf for SO_TXTIME senders, without txtime-assist.
        let d = commands(
            &parse_plan(&PORT.replace("k = 4", "k = 4\netf = true"), &OPTS).unwrap(),
            &OPTS,
        );
        assert_eq!(
            lines(&d)[1],
            "tc qdisc replace dev p0 parent 100:2 etf clockid CLOCK_TAI delta 200000"
        );
    }

    #[test]
    fn every_number_has_a_limit() {
        let flow = |from: &str, to: &str| {
            assert!(FLOW.contains(from), "{from}");
            err(&FLOW.replace(from, to)).to_string()
        };
        assert_eq!(
            flow("rate = \"40Mbit/s\"", "rate = \"1.5Tbit/s\""),
            "flow[0].rate: 1.5Tbit/s is above the limit of 1 Tbit/s"
        );
        assert_eq!(
            flow("burst = \"51514B\"", "burst = \"4294967296B\""),
            "flow[0].burst: 4294967296B is above the limit of 4294967295B"
        );
        assert_eq!(
            flow(
                "burst = \"51514B\"",
                "burst = \"51514B\"\nmax_packet = \"65536B\""
            ),
            "flow[0].max_packet: 65536B is above the limit of 65535B"
        );
        assert_eq!(
            flow("burst = \"51514B\"", "burst = \"51514B\"\nlimit = \"5GB\""),
            "flow[0].limit: 5000000000B is above the limit of 4294967295B"
        );
        assert_eq!(
            flow(
                "burst = \"51514B\"",
                "burst = \"51514B\"\nlatency = \"11s\""
            ),
            "flow[0].latency: 11s is above the limit of 10s"
        );
        assert_eq!(
            flow(
                "rate = \"40Mbit/s\"",
                "rate = \"40Mbit/s\"\npeak = \"2Tbit/s\""
            ),
            "flow[0].peak: 2Tbit/s is above the limit of 1 Tbit/s"
        );
        let port = |from: &str, to: &str| {
            assert!(PORT.contains(from), "{from}");
            err(&PORT.replace(from, to)).to_string()
        };
        assert_eq!(
            port("tf = \"250us\"", "tf = \"999ns\""),
            "port[0].tf: a time-frame of 999ns is below the limit of 1us"
        );
        assert_eq!(
            port("tf = \"250us\"", "tf = \"10.5s\""),
            "port[0].tf: a time-frame of 10.5s is above the limit of 10s"
        );
        assert_eq!(
            port("k = 4", "k = 4\netf_delta = \"2s\""),
            "port[0].etf_delta: 2s is above the limit of 1s"
        );
    }

    #[test]
    fn bad_ports_name_the_field() {
        let cases: &[(&str, &str, &str)] = &[
            (
                "k = 4",
                "k = 0",
                "port[0].k: expected 1 to 4096 frames per cycle (one taprio gate entry each), got 0",
            ),
            (
                "k = 4",
                "k = 100000000",
                "port[0].k: expected 1 to 4096 frames per cycle (one taprio gate entry each), got 100000000",
            ),
            (
                "tf = \"250us\"",
                "tf = \"0us\"",
                "port[0].tf: must be positive",
            ),
            (
                "tf = \"250us\"",
                "tf = \"fast\"",
                "port[0].tf: expected a duration like 100us",
            ),
            (
                "rows = [2,",
                "rows = [4,",
                "port[0].rows[0]: frame 4 is not in 0..4 (k = 4)",
            ),
            (
                "rows = [2,",
                "rows = [-1,",
                "port[0].rows[0]: frame -1 is not in 0..4",
            ),
            (
                "{ slot = 0, packets = 3, size = 1000 }",
                "{ slot = 0, bytes = 3 }",
                "port[0].rows[1].bytes: unknown field",
            ),
            (
                "{ slot = 0, packets = 3, size = 1000 }",
                "{ packets = 3 }",
                "port[0].rows[1].slot: missing",
            ),
            (
                "{ slot = 0, packets = 3, size = 1000 }",
                "{ slot = 0, packets = -3 }",
                "port[0].rows[1].packets: expected a whole number",
            ),
            (
                "rows = [2,",
                "rows = [\"x\",",
                "port[0].rows[0]: expected a frame number or a {slot, packets, size} table",
            ),
            (
                "k = 4",
                "k = 4\nreserved_prio = 16",
                "port[0].reserved_prio: 16 is not an skb priority 0..15",
            ),
            (
                "k = 4",
                "k = 4\netf_delta = \"-1us\"",
                "port[0].etf_delta: must be positive",
            ),
            (
                "k = 4",
                "k = 4\ntxtime_assist = true\netf = false",
                "port[0].etf: txtime-assist needs etf",
            ),
            (
                "dev = \"p0\"",
                "dev = \"\"",
                "port[0].dev: \"\" is not an interface name",
            ),
        ];
        for (from, to, want) in cases {
            let text = PORT.replace(from, to);
            assert_ne!(text, PORT, "{from}");
            let e = err(&text).to_string();
            assert!(e.starts_with(want), "{to}: {e}");
        }
        let e = err(
            "[[port]]\ndev = \"p0\"\ntf = \"1ms\"\nk = 2\nrows = [{ slot = 1, packets = 0 }]\n",
        );
        assert_eq!(
            e.to_string(),
            "port[0].rows: no frame is reserved: the reserved gate would never open"
        );
    }

    #[test]
    fn a_node_gives_one_schedule_per_port_with_rows() {
        use lockstep_core::tdp::config::{FlowConfig, RowConfig};
        let text = r#"
name = "s"
id = 9
role = "sender"
[frame]
tf = "1ms"
k = 4
epoch_ns = -500000
[[ports]]
id = 1
ifname = "s0"
mac = "02:00:00:00:01:02"
addr = "10.0.1.2"
prefix_len = 24
rate_bps = 1000000000
[[ports]]
id = 2
ifname = "s1"
mac = "02:00:00:00:01:03"
addr = "10.0.2.2"
prefix_len = 24
rate_bps = 1000000000
[[flows]]
id = 5
out_port = 2
rows = [{ slot = 1, packets = 2, size = 300 }, { slot = 3, packets = 1, size = 300 }]
"#;
        let mut node: NodeConfig = toml::from_str(text).unwrap();
        let opts = Options {
            reserved_prio: Some(5),
            ..OPTS
        };
        let ports = ports_of_node(&node, &opts).unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].dev, "s1");
        assert_eq!(ports[0].rows, BTreeSet::from([1, 3]));
        assert_eq!(ports[0].reserved_prio, 5);
        // -0.5 ms is the same schedule as 3.5 ms into a 4 ms cycle.
        assert_eq!(ports[0].epoch_ns, 3_500_000);
        assert!(!ports[0].etf);
        node.flows.push(FlowConfig {
            id: 6,
            rule: None,
            out_port: lockstep_core::net::PortId(7),
            d: None,
            rows: vec![RowConfig {
                slot: 0,
                packets: 1,
                size: 100,
            }],
            police: true,
            dst: None,
        });
        assert_eq!(
            ports_of_node(&node, &opts).unwrap_err().to_string(),
            "node.flows: a flow leaves on port 7, which [[node.ports]] does not list"
        );
        node.flows.clear();
        assert_eq!(
            ports_of_node(&node, &opts).unwrap_err().to_string(),
            "node.flows: no flow has rows: the node reserves nothing, so there is no gate schedule"
        );
    }

    #[test]
    fn every_line_of_the_script_is_a_comment_a_tc_command_or_empty() {
        let plan = parse_plan(&format!("{FLOW}{PORT}"), &OPTS).unwrap();
        let text = render(
            Path::new("plan.toml\nreboot\r\nhalt"),
            &commands(&plan, &OPTS),
        );
        for line in text.lines() {
            assert!(
                line.is_empty() || line.starts_with('#') || line.starts_with("tc "),
                "{line:?}"
            );
        }
        assert!(text.starts_with("# lockstep export of plan.toml reboot"));
    }

    #[test]
    fn the_script_explains_every_command() {
        let plan = parse_plan(&format!("{FLOW}{PORT}"), &OPTS).unwrap();
        let text = render(Path::new("plan.toml"), &commands(&plan, &OPTS));
        let mut comment_before = false;
        for line in text.lines() {
            if line.starts_with("tc ") {
                assert!(comment_before, "no comment before {line}");
            }
            comment_before = line.starts_with('#');
        }
        assert!(text.starts_with("# lockstep export of plan.toml\n"));
        assert!(text.contains("\n# == vc: 1 shaped flow (c) -> tbf ==\n"));
        assert!(text.contains("\n# == p0: TDP schedule, 2 of 4 frames reserved -> taprio ==\n"));
    }
}

#[cfg(test)]
#[path = "export_fuzz_smoke.rs"]
mod fuzz_smoke;
