//! `lockstep probe stream`: a constant-bit-rate sender of probe packets.
//!
//! Packet `i` is meant to leave at `t0 = start + i * period` (the grid of
//! [`lockstep_core::measure::pacer`], which also decides what happens when the sender
//! is late: send at once, skip slots beyond `--max-behind`). Every packet carries its
//! sequence number, frame index, `t0`, the wake-up time `t_wake` (read after the wait)
//! and `t_send` (read right before `send`), so a `lockstep probe sink` can split the
//! one-way latency (the latency decomposition). The sender itself reports what only it can see:
//! `L_I = t_wake − t0`, and the kernel part of `L_Tx` from software TX timestamps
//! (`SO_TIMESTAMPING`): kernel TX timestamp − `t_send` and − `t_wake`.
//!
//! TX timestamps come back on the socket's error queue. It is drained without blocking,
//! one entry at a time while the next slot is at least [`DRAIN_SLACK`] away (or
//! regardless once [`DRAIN_FORCE`] are waiting, so the queue never overflows), and
//! once more at the end.
//!
//! **Shaping** (`--shape RATE,BUCKET[,TS]`, loeser §3): a packet leaves when
//! the pacer says *and* the token bucket of [`lockstep_core::shaper`] — refilled once
//! per shaping interval `TS` — holds its size, charged as its Ethernet frame (payload +
//! UDP + IP + 14-byte Ethernet header, as loeser counts). A packet that waits for
//! tokens carries the instant it was released as its `t0`, so a sink measures the
//! network part; the wait itself is in the report (`shaper.delayed`, `max_wait_ns`).
//! Shaped streams never skip slots unless `--max-behind` is given (the bucket already
//! bounds every burst). `--symmetric-burst` (loeser §4.1) drops the pacer: the sender
//! empties its full bucket at the start and then sends whatever each refill allows — the
//! worst case a port sees when every source does it at the same instant
//! (`--start-at-ns`). The sender's CPU time (getrusage, user + system) is reported
//! with every run, per shaping interval when shaped (loeser Table 5); use `--strategy
//! sleep` to measure it (the hybrid strategy spins).
//!
//! `--greedy` sends unshaped traffic for a kernel qdisc (tbf, htb) to shape: packets
//! back to back from `--start-at-ns`, as fast as the blocking socket takes them. Once
//! the qdisc below holds a socket buffer's worth, `send` waits, so the sender runs at
//! the qdisc's rate without the qdisc dropping anything (given a qdisc queue larger
//! than the socket buffer).
//!
//! The pacing strategy defaults to `sleep`, as every probe's: plain sleeping pays the
//! full timer wake-up latency on every packet but leaves the CPU to others (10 kpps
//! for 3 s on this project's 2-vCPU VM: 0.8 s of CPU sleeping, 2.8 s under `hybrid`). `--strategy hybrid` (sleep
//! until `--margin` before the slot, then spin) is for a stream that must keep its
//! grid at high rates; `--strategy spin` for the highest.

use std::net::SocketAddr;
use std::time::Duration as StdDuration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use lockstep_core::measure::pacer::{self, Pacer, PacerCounters, DEFAULT_MAX_BEHIND};
use lockstep_core::measure::txmatch::TxMatcher;
use lockstep_core::sched::WaitStrategy;
use lockstep_core::shaper::{
    exact_bytes, Release, Shaper, ShaperError, ShaperStats, SymmetricBurst, TokenBucket,
};
use lockstep_core::stats::Histogram;
use lockstep_core::units::{BitRate, Hint, Kind, PacketRate, Size, UnitError};
use lockstep_core::wire::{ProbePacket, ProbeRepr, HEADER_LEN};
use lockstep_core::{limits, Duration, Instant};
use lockstep_linux::rusage::{self, CpuTime};
use lockstep_linux::signal::stop_requested;
use lockstep_linux::udp::{TimestampConfig, Transient, UdpSocket};
use lockstep_linux::{clock, tc, ClockMap};
use serde::Serialize;
use serde_json::Value;

use crate::cli::{
    parse_dscp, parse_duration_positive, parse_size, LengthArgs, OutputArgs, RtArgs, WaitArgs,
};
use crate::report::human::{dist_table, kv};
use crate::report::{Output, ResultDoc, SampleWriter};
use crate::{EnvError, UsageError};

/// Largest UDP payload over IPv4.
pub(crate) const MAX_UDP_PAYLOAD: u64 = 65_507;
/// Drain a TX timestamp only when the next packet is at least this far away (one
/// `recvmsg(MSG_ERRQUEUE)` costs about a microsecond)...
const DRAIN_SLACK: Duration = Duration::from_micros(3);
/// ... unless this many are waiting: then drain regardless, before the error queue
/// (charged to the socket receive buffer, [`SOCKET_RCVBUF`]) overflows and the kernel
/// drops timestamps.
const DRAIN_FORCE: u64 = 64;
/// Receive buffer asked for the sending socket: it holds the TX timestamp queue.
const SOCKET_RCVBUF: usize = 1 << 20;
/// Sent packets remembered for matching TX timestamps.
const TX_RING: usize = 8192;
/// How long to wait for the last TX timestamps at the end.
const FINAL_DRAIN: StdDuration = StdDuration::from_millis(200);
/// Default rate when neither --rate, --period nor --preset is given.
const DEFAULT_PERIOD: Duration = Duration::from_micros(100);
/// Default run length.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);
/// Default shaping interval of `--shape` (the tick of a 1 kHz kernel, loeser's middle
/// setting).
const DEFAULT_SHAPING_INTERVAL: Duration = Duration::from_millis(1);
/// What a UDP datagram adds to its payload on Ethernet: UDP header 8 B, Ethernet
/// header 14 B (no FCS, preamble or gap — loeser's 1514-byte frames), plus the IP
/// header ([`IPV4_HEADER`] or [`IPV6_HEADER`]).
const UDP_ETHERNET_OVERHEAD: u64 = 8 + 14;
const IPV4_HEADER: u64 = 20;
const IPV6_HEADER: u64 = 40;

/// Named stream profiles; explicit flags override their values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, Serialize)]
pub enum Preset {
    /// SMPTE ST 2022-6 (uncompressed HD-SDI over IP): 1376-byte payloads every 7.41 µs.
    #[value(name = "st2022-6")]
    #[serde(rename = "st2022-6")]
    St2022_6,
}

impl Preset {
    fn period(self) -> Duration {
        match self {
            Preset::St2022_6 => Duration::from_nanos(7_410),
        }
    }
    fn size(self) -> u64 {
        match self {
            Preset::St2022_6 => 1376,
        }
    }
}

#[derive(Args, Debug)]
pub struct StreamArgs {
    /// Where to send the probe packets.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub to: SocketAddr,
    /// Local address to send from (default: any address, a free port).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub bind: Option<SocketAddr>,
    /// Packet rate, e.g. 100000pps or 135kpps (default 10000pps), or a bit rate, e.g.
    /// 10Mbit/s: sent in whole Ethernet frames of --size + 42 bytes over IPv4 (UDP 8,
    /// IPv4 20, Ethernet header 14; + 62 over IPv6; no preamble, FCS or gap), one every
    /// 8 x frame / rate rounded up to a whole nanosecond, so never above the rate.
    #[arg(long, value_name = "RATE", value_parser = parse_stream_rate, conflicts_with = "period")]
    pub rate: Option<StreamRate>,
    /// Time between packets, e.g. 7.41us (instead of --rate; at least 10ns, the period
    /// of 100 Mpps).
    #[arg(long, value_name = "DUR", value_parser = parse_packet_period, allow_hyphen_values = true)]
    pub period: Option<Duration>,
    /// UDP payload size, at least the 64-byte probe header (default 64B).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<Size>,
    /// DSCP codepoint to mark the packets with (0..63).
    #[arg(long, value_name = "DSCP", value_parser = parse_dscp)]
    pub dscp: Option<u8>,
    /// Traffic class of the packets (SO_PRIORITY, 0..15): the class a taprio or mqprio
    /// qdisc maps to its queue and gate (`lockstep export` writes such qdiscs: this
    /// is their sender). Above 6 needs root or CAP_NET_ADMIN.
    #[arg(long, value_name = "N", value_parser = parse_priority_class)]
    pub priority_class: Option<u32>,
    /// Give every packet a launch time (SO_TXTIME on CLOCK_TAI; each packet carries
    /// its slot + --txtime-lead in an SCM_TXTIME message) for an etf qdisc on the
    /// outgoing interface to send it then (`lockstep export` writes etf qdiscs). Exits
    /// with status 3 when the kernel refuses the option or the interface has no etf
    /// qdisc to honour it (without one, nothing would hold the packets).
    #[arg(long)]
    pub txtime: bool,
    /// With --txtime: how long after its slot a packet is launched (room for the
    /// sender's wake-up and etf's delta; the sink sees it in the one-way latency).
    #[arg(long, value_name = "DUR", default_value = "500us", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub txtime_lead: Duration,
    /// Flow id carried in every packet (a sink separates flows by it).
    #[arg(long, value_name = "ID", default_value_t = 0)]
    pub flow: u32,
    /// A named profile: st2022-6 = 1376-byte payloads every 7.41us.
    #[arg(long, value_name = "NAME")]
    pub preset: Option<Preset>,
    /// Catch-up bound: a late sender sends the missed slots at once, but skips all
    /// but this many (0 = never catch up). Default 16; unbounded with --shape. At most
    /// 10^12.
    #[arg(long, value_name = "N", value_parser = parse_max_behind)]
    pub max_behind: Option<u64>,
    /// Shape with a token bucket refilled once per shaping interval: RATE,BUCKET[,TS],
    /// e.g. 40Mbit/s,10kB,1ms (TS defaults to 1ms). The bucket must hold RATE*TS plus
    /// one packet (its Ethernet frame: payload + 42 bytes over IPv4).
    #[arg(long, value_name = "RATE,BUCKET[,TS]", value_parser = parse_shape_boxed)]
    pub shape: Option<Box<ShapeSpec>>,
    /// Symmetric burst (loeser 4.1): empty the full bucket at the start, then send as
    /// fast as the bucket allows (instead of --rate/--period).
    #[arg(long, requires = "shape", conflicts_with_all = ["rate", "period", "preset"])]
    pub symmetric_burst: bool,
    /// Unshaped: send back to back, as fast as the (blocking) socket takes them, for a
    /// kernel qdisc (tbf, htb) to shape (instead of --rate/--period/--shape).
    #[arg(long, conflicts_with_all = ["rate", "period", "preset", "shape", "symmetric_burst", "max_behind"])]
    pub greedy: bool,
    /// Start at this instant (nanoseconds of --clock) instead of 1 ms from now, so
    /// several senders start (and burst) together.
    #[arg(long, value_name = "NS")]
    pub start_at_ns: Option<i64>,
    #[command(flatten)]
    pub length: LengthArgs,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--rate`: a packet rate, or a bit rate sent in whole frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamRate {
    Packets(PacketRate),
    Bits(BitRate),
}

impl StreamRate {
    /// The time between packets whose Ethernet frames are `wire` bytes: a packet
    /// rate's period rounded to the nearest nanosecond; for a bit rate 8 x `wire` /
    /// rate rounded up to a whole nanosecond (never faster than the rate), at least
    /// [`limits::MIN_PACKET_PERIOD`].
    pub fn period(self, wire: u64) -> Result<Duration, String> {
        let bits = match self {
            StreamRate::Packets(r) => return r.period().ok_or_else(|| "must be above 0pps".into()),
            StreamRate::Bits(b) => b,
        };
        let ns = (u128::from(wire) * 8_000_000_000).div_ceil(u128::from(bits.bps()));
        let period = Duration(i64::try_from(ns).unwrap_or(i64::MAX));
        if period < limits::MIN_PACKET_PERIOD {
            return Err(format!(
                "{bits} in {wire}B frames is a packet every {period}, above the limit of {}",
                limits::MAX_PACKET_RATE_TEXT
            ));
        }
        Ok(period)
    }
}

/// `--rate`: a packet rate (`135kpps`) or a bit rate (`10Mbit/s`).
fn parse_stream_rate(s: &str) -> Result<StreamRate, String> {
    match s.parse::<PacketRate>() {
        Ok(r) => Ok(StreamRate::Packets(r)),
        Err(UnitError::Malformed {
            hint: Some(Hint::OtherKind(_, Kind::Rate)),
            ..
        }) => s
            .parse::<BitRate>()
            .map(StreamRate::Bits)
            .map_err(|e| e.to_string()),
        Err(UnitError::Malformed { text, hint, .. }) => Err(format!(
            "expected a packet rate like 100000pps or a bit rate like 10Mbit/s, got \"{text}\"{}",
            hint.map(|h| format!(" ({h})")).unwrap_or_default()
        )),
        Err(e) => Err(e.to_string()),
    }
}

/// `--period`: from [`limits::MIN_PACKET_PERIOD`] (10 ns: 100 Mpps) to 7 days.
fn parse_packet_period(s: &str) -> Result<Duration, String> {
    let d = parse_duration_positive(s)?;
    if d < limits::MIN_PACKET_PERIOD {
        return Err(format!(
            "{d} is below the limit of {} ({})",
            limits::MIN_PACKET_PERIOD,
            limits::MAX_PACKET_RATE_TEXT
        ));
    }
    Ok(d)
}

/// `--priority-class`: 0 to 15 (the classes a taprio or mqprio map takes).
fn parse_priority_class(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(n) if n <= 15 => Ok(n),
        _ => Err(format!("expected a traffic class 0..15, got \"{s}\"")),
    }
}

/// `--txtime`: turns SO_TXTIME on and checks that the outgoing interface has an etf
/// qdisc to honour it; returns what to add to a slot of the run's clock to get its
/// launch time on CLOCK_TAI (the lead included). Exit status 3 when it cannot work.
fn setup_txtime(
    sock: &UdpSocket,
    run_clock: lockstep_core::ClockId,
    lead: Duration,
) -> Result<i64> {
    sock.enable_txtime()
        .map_err(|e| EnvError(format!("--txtime: {e}")))?;
    let iface = sock
        .interface()
        .unwrap_or_else(|| "the outgoing interface".into());
    let add = format!(
        "tc qdisc replace dev {iface} root etf clockid CLOCK_TAI delta 300000 \
         (or etf under each class of a taprio qdisc, as `lockstep export` writes)"
    );
    match tc::honours_txtime(&iface) {
        Ok(true) => {}
        Ok(false) => {
            let why = match tc::qdisc_available("etf") {
                Ok(false) => format!(
                    "this kernel has none (it needs CONFIG_NET_SCH_ETF or the module sch_etf); on a kernel with one: {add}"
                ),
                Ok(true) => format!("{iface} has none: add one: {add}"),
                Err(e) => format!("{iface} has none (and whether this kernel has one is unknown: {e}): {add}"),
            };
            return Err(EnvError(format!(
                "--txtime: SO_TXTIME is on, but its launch times need an etf qdisc on {iface}: {why}"
            ))
            .into());
        }
        Err(e) => {
            return Err(
                EnvError(format!("--txtime: cannot read the qdiscs of {iface}: {e}")).into(),
            )
        }
    }
    let now = clock::now(run_clock).ns;
    let tai = clock::now(lockstep_core::ClockId::Tai).ns;
    Ok(tai.saturating_sub(now).saturating_add(lead.as_nanos()))
}

/// `--max-behind`: 0 to [`limits::MAX_COUNT`].
fn parse_max_behind(s: &str) -> Result<u64, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a whole number of packets, got \"{s}\""))?;
    limits::count(n)?;
    Ok(n)
}

/// `ADDR:PORT` (IPv4, `[IPv6]:PORT`, or `localhost:PORT`).
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    let t = s.trim();
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    if let Some(port) = t.strip_prefix("localhost:") {
        if let Ok(p) = port.parse::<u16>() {
            return Ok(SocketAddr::from(([127, 0, 0, 1], p)));
        }
    }
    Err(format!(
        "expected ADDR:PORT like 127.0.0.1:9000 or [::1]:9000, got \"{s}\""
    ))
}

/// The parameters of `--shape RATE,BUCKET[,TS]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShapeSpec {
    pub rate: BitRate,
    pub bucket: Size,
    pub ts: Duration,
}

/// `RATE,BUCKET[,TS]`, e.g. `40Mbit/s,10kB,1ms`; each part parsed exactly.
pub(crate) fn parse_shape(s: &str) -> Result<ShapeSpec, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    let (rate, bucket, ts) = match parts.as_slice() {
        [r, b] => (*r, *b, None),
        [r, b, t] => (*r, *b, Some(*t)),
        _ => {
            return Err(format!(
                "expected RATE,BUCKET[,TS] like 40Mbit/s,10kB,1ms, got \"{s}\""
            ))
        }
    };
    let rate = rate.parse::<BitRate>().map_err(|e| format!("rate: {e}"))?;
    let bucket = bucket.parse::<Size>().map_err(|e| format!("bucket: {e}"))?;
    if bucket.bytes() > limits::MAX_DATA_BYTES {
        return Err(format!(
            "bucket: {bucket} is above the limit of {}B (1 TB)",
            limits::MAX_DATA_BYTES
        ));
    }
    let ts = match ts {
        Some(t) => {
            let d = Duration::parse(t).map_err(|e| format!("shaping interval: {e}"))?;
            if !d.is_positive() {
                return Err(format!(
                    "shaping interval: expected a positive duration like 1ms, got \"{t}\""
                ));
            }
            limits::delay(d).map_err(|m| format!("shaping interval: {m}"))?;
            d
        }
        None => DEFAULT_SHAPING_INTERVAL,
    };
    Ok(ShapeSpec { rate, bucket, ts })
}

/// [`parse_shape`], boxed (keeps the argument struct, and so the command enum, small).
fn parse_shape_boxed(s: &str) -> Result<Box<ShapeSpec>, String> {
    parse_shape(s).map(Box::new)
}

/// The Ethernet frame that carries a UDP payload of `payload` bytes to `to`.
pub(crate) fn wire_bytes(payload: usize, to: &SocketAddr) -> u64 {
    let ip = if to.is_ipv4() {
        IPV4_HEADER
    } else {
        IPV6_HEADER
    };
    payload as u64 + UDP_ETHERNET_OVERHEAD + ip
}

/// The payload size: `given` (or `default`), checked against `min` (the probe header
/// and the hop records the command needs) and the largest UDP payload.
pub(crate) fn check_size(
    given: Option<Size>,
    default: u64,
    min: usize,
    why: &str,
) -> Result<usize> {
    let size = given.map(|s| s.bytes()).unwrap_or(default);
    if size < min as u64 {
        return Err(UsageError(format!(
            "--size: {size}B is below the minimum of {min}B ({why})"
        ))
        .into());
    }
    if size > MAX_UDP_PAYLOAD {
        return Err(UsageError(format!(
            "--size: {size}B is above the largest UDP payload ({MAX_UDP_PAYLOAD}B)"
        ))
        .into());
    }
    Ok(size as usize)
}

/// The local address to bind when none was given: any address of `to`'s family.
pub(crate) fn any_addr_for(to: &SocketAddr) -> SocketAddr {
    if to.is_ipv4() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        SocketAddr::from(([0u16; 8], 0))
    }
}

/// Copies every field of a serialized report into the document's results.
pub(crate) fn insert_all(doc: &mut ResultDoc, report: &impl Serialize) {
    if let Ok(Value::Object(map)) = serde_json::to_value(report) {
        for (k, v) in map {
            doc.insert(&k, v);
        }
    }
}

/// Applies the real-time request and records it in the document.
pub(crate) fn apply_rt(rt: &RtArgs, doc: &mut ResultDoc) -> Result<lockstep_linux::RtState> {
    let state = lockstep_linux::rt::apply(&rt.request())?;
    doc.set_realtime(&state);
    Ok(state)
}

/// `ClockMap::measure`, turning a kernel timestamp into the run's clock.
pub(crate) fn to_run_clock(map: &ClockMap, t: Instant) -> i64 {
    map.to_target(t.ns).ns
}

#[derive(Serialize)]
struct StreamConfig {
    to: String,
    bind: Option<String>,
    period_ns: i64,
    rate_pps: f64,
    size_bytes: usize,
    dscp: Option<u8>,
    flow: u32,
    preset: Option<Preset>,
    max_behind: u64,
    duration_ns: Option<i64>,
    count: Option<u64>,
    clock: lockstep_core::ClockId,
    strategy: WaitStrategy,
    margin_ns: i64,
    shape: Option<ShapeConfig>,
    start_at_ns: Option<i64>,
    greedy: bool,
    priority_class: Option<u32>,
    txtime: Option<TxtimeConfig>,
}

#[derive(Serialize)]
struct TxtimeConfig {
    clock: lockstep_core::ClockId,
    lead_ns: i64,
}

#[derive(Serialize)]
struct ShapeConfig {
    rate: BitRate,
    rate_bps: u64,
    bucket_bytes: u64,
    ts_ns: i64,
    /// What each packet is charged: its Ethernet frame.
    packet_wire_bytes: u64,
    symmetric_burst: bool,
}

/// What the report says about the shaper.
#[derive(Serialize)]
struct ShaperReport {
    rate: BitRate,
    rate_bps: u64,
    bucket_bytes: u64,
    ts_ns: i64,
    packet_wire_bytes: u64,
    symmetric_burst: bool,
    /// Packets of the opening burst (symmetric burst only).
    burst_packets: Option<u64>,
    /// `b + r·Ts`: the burst of the smallest token bucket this output conforms to.
    affine_burst: String,
    #[serde(flatten)]
    stats: ShaperStats,
    /// Mean wait of the delayed packets.
    mean_wait_ns: Option<i64>,
    /// Wire bits sent per second over the run (start to end).
    wire_rate_bps: Option<f64>,
}

/// The sender's CPU time over the sending loop (getrusage, whole process).
#[derive(Serialize)]
struct CpuReport {
    #[serde(flatten)]
    time: CpuTime,
    total_ns: i64,
    wall_ns: i64,
    /// CPU time / wall time: the share of one CPU the sender used.
    load: Option<f64>,
    /// Shaping intervals in the run and the CPU time per interval (shaped runs).
    intervals: Option<i64>,
    per_interval_ns: Option<i64>,
}

/// What decides when packets go.
enum Source {
    /// The constant-rate grid, optionally behind a shaper.
    Paced {
        pacer: Pacer,
        shaper: Option<Shaper>,
    },
    /// A symmetric-burst source: greedy behind its bucket.
    Burst { source: SymmetricBurst, taken: u64 },
    /// Unshaped and back to back from `start` (`--greedy`).
    Greedy { start: i64, taken: u64 },
}

impl Source {
    fn taken(&self) -> u64 {
        match self {
            Source::Paced { pacer, .. } => pacer.next_seq(),
            Source::Burst { taken, .. } | Source::Greedy { taken, .. } => *taken,
        }
    }

    /// When the next packet is due, and its shaper release (shaped sources).
    fn next_due(&self, wire: u64) -> Result<(i64, Option<Release>)> {
        let never = || anyhow::anyhow!("a {wire}B packet never fits the bucket");
        match self {
            Source::Paced { pacer, shaper } => {
                let due = pacer.next_deadline();
                match shaper {
                    Some(sh) => {
                        let r = sh.plan(due, wire).ok_or_else(never)?;
                        Ok((r.at_ns, Some(r)))
                    }
                    None => Ok((due, None)),
                }
            }
            Source::Burst { source, .. } => {
                let r = source.next().ok_or_else(never)?;
                Ok((r.at_ns, Some(r)))
            }
            Source::Greedy { start, .. } => Ok((*start, None)),
        }
    }

    /// The packet due at `due` is being sent (woke at `wake_ns`): its sequence number,
    /// frame index and `t0`.
    fn take(&mut self, wake_ns: i64, due: i64, shaped: bool) -> (u64, u64, i64) {
        match self {
            Source::Paced { pacer, .. } => {
                let slot = pacer.take(wake_ns);
                (slot.seq, slot.frame, if shaped { due } else { slot.t0_ns })
            }
            Source::Burst { taken, .. } => {
                let seq = *taken;
                *taken += 1;
                (seq, seq, due)
            }
            Source::Greedy { taken, .. } => {
                let seq = *taken;
                *taken += 1;
                (seq, seq, wake_ns)
            }
        }
    }

    /// The packet left at `now_ns`: the shaper takes its tokens.
    fn sent(&mut self, release: Option<Release>, t0: i64, now_ns: i64, wire: u64) {
        match self {
            Source::Paced { pacer, shaper } => {
                pacer.record_sent(t0, now_ns);
                if let (Some(sh), Some(r)) = (shaper.as_mut(), release) {
                    sh.send(r, now_ns, wire);
                }
            }
            Source::Burst { source, .. } => {
                if let Some(r) = release {
                    source.sent(r, now_ns);
                }
            }
            Source::Greedy { .. } => {}
        }
    }

    fn shaper(&self) -> Option<&Shaper> {
        match self {
            Source::Paced { shaper, .. } => shaper.as_ref(),
            Source::Burst { source, .. } => Some(source.shaper()),
            Source::Greedy { .. } => None,
        }
    }

    fn counters(&self) -> PacerCounters {
        match self {
            Source::Paced { pacer, .. } => pacer.counters(),
            Source::Burst { taken, .. } | Source::Greedy { taken, .. } => PacerCounters {
                taken: *taken,
                skipped: 0,
                late: 0,
                max_backlog: 0,
            },
        }
    }
}

fn shaper_error(e: ShaperError) -> anyhow::Error {
    UsageError(format!("--shape: {e}")).into()
}

/// Send errors by kind; none is fatal.
#[derive(Default, Serialize, Debug)]
pub(crate) struct SendErrors {
    /// ENOBUFS: a full device queue or socket buffer.
    enobufs: u64,
    /// EAGAIN/EWOULDBLOCK.
    eagain: u64,
    /// ECONNREFUSED: an ICMP port unreachable came back (nobody listening yet).
    refused: u64,
    other: u64,
    /// The last error of kind `other`, for the user to read.
    last_other: Option<String>,
}

impl SendErrors {
    pub(crate) fn count(&mut self, e: &lockstep_linux::NetError) {
        match e.transient() {
            Some(Transient::NoBuffers) => self.enobufs += 1,
            Some(Transient::WouldBlock) => self.eagain += 1,
            Some(Transient::Refused) => self.refused += 1,
            Some(Transient::LinkDown) | None => {
                self.other += 1;
                self.last_other = Some(e.to_string());
            }
        }
    }
    /// `n` frames a full device queue (or transmit ring) did not take.
    pub(crate) fn count_queue_full(&mut self, n: u64) {
        self.enobufs += n;
    }

    pub(crate) fn total(&self) -> u64 {
        self.enobufs + self.eagain + self.refused + self.other
    }
}

/// What is kept of a sent packet until its TX timestamp comes.
#[derive(Clone, Copy)]
struct Pending {
    seq: u64,
    frame: u64,
    t0: i64,
    t_wake: i64,
    t_send: i64,
}

/// The sender's bookkeeping of TX timestamps: the sent packets wait in a
/// [`TxMatcher`] (which counts matched, unmatched, orphan and evicted ones).
struct TxBook {
    tx: TxMatcher<Pending>,
    tx_from_send: Histogram,
    tx_from_wake: Histogram,
    samples: Option<SampleWriter>,
}

impl TxBook {
    fn note_sent(&mut self, id: u32, p: Pending) -> Result<()> {
        match self.tx.note_sent(id, p) {
            // Its timestamp never came (the kernel dropped it): give up on it.
            Some(old) => write_row(&mut self.samples, &old, None),
            None => Ok(()),
        }
    }

    fn on_tx(&mut self, map: &ClockMap, id: u32, software: Option<Instant>) -> Result<()> {
        let Some((p, sw)) = self.tx.on_timestamp(id, software) else {
            return Ok(());
        };
        let ts = to_run_clock(map, sw);
        self.tx_from_send.record(ts.saturating_sub(p.t_send));
        self.tx_from_wake.record(ts.saturating_sub(p.t_wake));
        write_row(&mut self.samples, &p, Some(ts))
    }

    /// Writes the rows still waiting (no TX timestamp came), in sequence order.
    fn flush_unmatched(&mut self) -> Result<u64> {
        let mut left = 0;
        for p in self.tx.drain_unmatched() {
            write_row(&mut self.samples, &p, None)?;
            left += 1;
        }
        Ok(left)
    }
}

fn write_row(samples: &mut Option<SampleWriter>, p: &Pending, tx: Option<i64>) -> Result<()> {
    if let Some(w) = samples.as_mut() {
        w.row(&[
            i64::try_from(p.seq).ok(),
            i64::try_from(p.frame).ok(),
            Some(p.t0),
            Some(p.t_wake),
            Some(p.t_send),
            tx,
            tx.map(|t| t.saturating_sub(p.t_send)),
            Some(p.t_wake.saturating_sub(p.t0)),
        ])?;
    }
    Ok(())
}

fn drain_tx(sock: &UdpSocket, map: &ClockMap, book: &mut TxBook, max: usize) -> Result<usize> {
    let mut n = 0;
    while n < max {
        match sock.poll_tx_timestamp() {
            Ok(Some(ts)) => {
                n += 1;
                book.on_tx(map, ts.id, ts.software)?;
            }
            Ok(None) => break,
            Err(e) => return Err(e).context("reading TX timestamps"),
        }
    }
    Ok(n)
}

pub fn run(args: StreamArgs) -> Result<()> {
    let shape: Option<ShapeSpec> = args.shape.as_deref().copied();
    let default_size = args.preset.map(Preset::size).unwrap_or(HEADER_LEN as u64);
    let size = check_size(args.size, default_size, HEADER_LEN, "the probe header")?;
    let wire = wire_bytes(size, &args.to);
    // The bucket is checked up front (b >= r*Ts + M) so a bad --shape is a usage error.
    if let Some(sh) = &shape {
        TokenBucket::new(sh.rate, sh.bucket, sh.ts, Size(wire)).map_err(shaper_error)?;
    }
    let period = match (args.rate, args.period, args.preset, shape) {
        (Some(r), _, _, _) => r
            .period(wire)
            .map_err(|m| UsageError(format!("--rate: {m}")))?,
        (None, Some(p), _, _) => p,
        (None, None, Some(preset), _) => preset.period(),
        // A symmetric burst has no grid: its long-term packet rate is the shaper's.
        (None, None, None, Some(sh)) if args.symmetric_burst => {
            let ns = (u128::from(wire) * 8_000_000_000).div_ceil(u128::from(sh.rate.bps()));
            Duration(i64::try_from(ns).unwrap_or(i64::MAX))
        }
        // Greedy has no grid either: the period is only reported (as 0).
        (None, None, None, None) if args.greedy => Duration(1),
        (None, None, None, _) => DEFAULT_PERIOD,
    };
    if !period.is_positive() {
        return Err(UsageError(format!("--rate: the period {period} is below 1ns")).into());
    }
    let (duration, count) = args.length.or_default(DEFAULT_DURATION);
    let target_pps = match (&shape, args.symmetric_burst) {
        (Some(sh), true) => sh.rate.as_f64() / (8.0 * wire as f64),
        // no target: as fast as the socket (and the qdisc below it) goes
        _ if args.greedy => 0.0,
        _ => 1e9 / period.as_nanos() as f64,
    };
    let clock = args.wait.clock;
    // A shaped stream never needs the catch-up bound: the bucket bounds every burst.
    let max_behind = args.max_behind.unwrap_or(if shape.is_some() {
        u64::MAX
    } else {
        DEFAULT_MAX_BEHIND
    });

    let config = StreamConfig {
        to: args.to.to_string(),
        bind: args.bind.map(|b| b.to_string()),
        period_ns: if args.greedy { 0 } else { period.as_nanos() },
        rate_pps: target_pps,
        size_bytes: size,
        dscp: args.dscp,
        flow: args.flow,
        preset: args.preset,
        max_behind,
        duration_ns: duration.map(|d| d.as_nanos()),
        count,
        clock,
        strategy: args.wait.strategy,
        margin_ns: args.wait.margin.as_nanos(),
        shape: shape.map(|sh| ShapeConfig {
            rate: sh.rate,
            rate_bps: sh.rate.bps(),
            bucket_bytes: sh.bucket.bytes(),
            ts_ns: sh.ts.as_nanos(),
            packet_wire_bytes: wire,
            symmetric_burst: args.symmetric_burst,
        }),
        start_at_ns: args.start_at_ns,
        greedy: args.greedy,
        priority_class: args.priority_class,
        txtime: args.txtime.then_some(TxtimeConfig {
            clock: lockstep_core::ClockId::Tai,
            lead_ns: args.txtime_lead.as_nanos(),
        }),
    };
    let out = Output::new(&args.output)?;
    let mut doc = ResultDoc::new("probe.stream", &config);

    let waiter = args.wait.waiter();
    waiter.check().map_err(|e| EnvError(e.to_string()))?;

    let bind = args.bind.unwrap_or_else(|| any_addr_for(&args.to));
    let sock = UdpSocket::bind(bind).with_context(|| format!("--bind {bind}"))?;
    sock.connect(args.to)
        .with_context(|| format!("--to {}", args.to))?;
    if let Some(dscp) = args.dscp {
        sock.set_dscp(dscp).context("--dscp")?;
    }
    if let Some(prio) = args.priority_class {
        sock.set_priority(prio)
            .map_err(|e| EnvError(format!("--priority-class {prio}: {e}")))?;
    }
    // TAI − the run's clock, to turn a slot into its launch time
    let txtime_offset = match args.txtime {
        true => Some(setup_txtime(&sock, clock, args.txtime_lead)?),
        false => None,
    };
    if let Err(e) = sock.set_recv_buffer(SOCKET_RCVBUF) {
        doc.warn(format!(
            "could not enlarge the socket buffer that holds TX timestamps: {e}"
        ));
    }
    let support = sock.enable_timestamping(TimestampConfig {
        tx_software: true,
        rx_software: false,
        hardware: false,
    });
    let tx_ts = match support {
        Ok(s) => s.tx_software,
        Err(e) => {
            doc.warn(format!(
                "software TX timestamps unavailable ({e}): the sender reports no L_Tx"
            ));
            false
        }
    };
    let map = ClockMap::measure(clock);

    let mut book = TxBook {
        tx: TxMatcher::new(TX_RING),
        tx_from_send: Histogram::new(),
        tx_from_wake: Histogram::new(),
        samples: out.sample_writer(&[
            "seq",
            "frame",
            "t0",
            "t_wake",
            "t_send",
            "tx_kernel",
            "l_tx",
            "l_i",
        ])?,
    };
    // Size the histograms up front so recording never allocates mid-run.
    for h in [&mut book.tx_from_send, &mut book.tx_from_wake] {
        h.record(1_000_000_000);
        h.reset();
    }
    let mut l_i = Histogram::new();
    l_i.record(1_000_000_000);
    l_i.reset();

    // The probe packet template; per packet only seq, frame, t0, t_wake, t_send change.
    let mut buf = vec![0u8; size];
    let template = ProbeRepr {
        flow_id: args.flow,
        total_len: size as u32,
        ..ProbeRepr::default()
    };
    template
        .emit_into(&mut buf)
        .map_err(|e| UsageError(format!("--size: {e}")))?;

    let _rt = apply_rt(&args.rt, &mut doc)?;
    let pace = if args.greedy {
        "greedy (as fast as the socket takes them)".to_string()
    } else {
        format!("{} pps ({} period)", fmt_rate(target_pps), period)
    };
    out.progress(&format!(
        "lockstep probe stream: {pace}, {size}B to {}, strategy {}, clock {clock}",
        args.to, args.wait.strategy
    ));

    // Start the grid a little ahead so the first packet is not already late, or at
    // --start-at-ns.
    let lead = Duration::from_millis(1).max(period);
    let now = waiter.now().ns;
    if let Some(t) = args.start_at_ns {
        crate::cli::check_start_at(t, now)?;
    }
    let start = match args.start_at_ns {
        Some(t) if t >= now => t,
        Some(t) => {
            doc.warn(format!(
                "--start-at-ns {t} had passed when the sender was ready ({} late): started at once",
                Duration(now.saturating_sub(t))
            ));
            now.saturating_add(lead.as_nanos())
        }
        None => now.saturating_add(lead.as_nanos()),
    };
    let mut source = match (&shape, args.symmetric_burst) {
        (None, _) if args.greedy => Source::Greedy { start, taken: 0 },
        (Some(sh), true) => Source::Burst {
            source: SymmetricBurst::new(sh.rate, sh.bucket, sh.ts, wire, start)
                .map_err(shaper_error)?,
            taken: 0,
        },
        (shape, _) => Source::Paced {
            pacer: Pacer::new(start, period, max_behind)
                .map_err(|e| UsageError(format!("--period: {e}")))?,
            shaper: match shape {
                Some(sh) => Some(Shaper::new(
                    TokenBucket::new(sh.rate, sh.bucket, sh.ts, Size(wire))
                        .map_err(shaper_error)?
                        .with_epoch(start),
                )),
                None => None,
            },
        },
    };
    let shaped = shape.is_some();
    let end = duration.map(|d| start.saturating_add(d.as_nanos()));

    let mut errors = SendErrors::default();
    let mut sent: u64 = 0;
    let mut first_send: Option<i64> = None;
    let mut last_send = 0i64;
    let cpu_before = rusage::cpu_time(rusage::Who::Process).ok();

    loop {
        if stop_requested() {
            break;
        }
        if count.is_some_and(|c| source.taken() >= c) {
            break;
        }
        let (deadline, release) = source.next_due(wire)?;
        if end.is_some_and(|e| deadline >= e) {
            break;
        }
        let wake = waiter.wait_until(Instant::new(clock, deadline));
        if wake.ns < deadline && stop_requested() {
            // back early from a wait (Ctrl-C during a far --start-at-ns): send nothing
            break;
        }
        // a greedy source's deadline stays at its start: its end is the clock's
        if args.greedy && end.is_some_and(|e| wake.ns >= e) {
            break;
        }
        let (seq, frame, t0) = source.take(wake.ns, deadline, shaped);
        let mut pkt = ProbePacket::new_unchecked(&mut buf[..]);
        pkt.set_seq(seq);
        pkt.set_frame(frame as i64);
        pkt.set_t0_ns(t0);
        pkt.set_t_wake_ns(wake.ns);
        pkt.set_t_send_ns(0);
        pkt.fill_checksum();
        let t_send = waiter.now().ns;
        pkt.set_t_send_ns_and_checksum(t_send);
        let sent_now = match txtime_offset {
            Some(off) => sock.send_at(&buf, t0.saturating_add(off)),
            None => sock.send(&buf),
        };
        match sent_now {
            Ok(_) => {
                let id = sent as u32;
                sent += 1;
                first_send.get_or_insert(t_send);
                last_send = t_send;
                source.sent(release, t0, t_send, wire);
                l_i.record(wake.ns.saturating_sub(t0));
                book.note_sent(
                    id,
                    Pending {
                        seq,
                        frame,
                        t0,
                        t_wake: wake.ns,
                        t_send,
                    },
                )?;
            }
            Err(e) => errors.count(&e),
        }
        // Drain TX timestamps one at a time while the next packet leaves room for a
        // system call, or regardless once many are waiting (the error queue is
        // charged to the receive buffer and drops what does not fit).
        if tx_ts {
            let next_due = source.next_due(wire)?.0;
            while book.tx.outstanding() > 0 {
                let waiting = book.tx.outstanding();
                let slack = next_due.saturating_sub(waiter.now().ns);
                if waiting < DRAIN_FORCE && slack < DRAIN_SLACK.as_nanos() {
                    break;
                }
                if drain_tx(&sock, &map, &mut book, 1)? == 0 {
                    break;
                }
            }
        }
    }
    let loop_end = waiter.now().ns;
    let cpu = match (cpu_before, rusage::cpu_time(rusage::Who::Process).ok()) {
        (Some(a), Some(b)) => Some(b.since(a)),
        _ => None,
    };

    // Collect the last TX timestamps.
    if tx_ts {
        let until = std::time::Instant::now() + FINAL_DRAIN;
        while book.tx.outstanding() > 0 && std::time::Instant::now() < until {
            if drain_tx(&sock, &map, &mut book, usize::MAX)? == 0 {
                std::thread::sleep(StdDuration::from_millis(1));
            }
        }
    }
    let tx_missing = book.flush_unmatched()? + book.tx.counts().evicted;

    let counters = source.counters();
    let achieved = pacer::achieved_pps(sent, first_send.unwrap_or(0), last_send);
    let sustained = pacer::sustained(target_pps, achieved);
    if !sustained {
        doc.warn(format!(
            "the host did not sustain {} pps: achieved {} pps (try --strategy spin, --priority, --cpu)",
            fmt_rate(target_pps),
            achieved.map(fmt_rate).unwrap_or_else(|| "-".into()),
        ));
    }
    if counters.skipped > 0 {
        doc.warn(format!(
            "{} slots skipped: the sender fell more than --max-behind {} periods behind the grid (up to {} periods)",
            counters.skipped, max_behind, counters.max_backlog
        ));
    }
    if counters.late > 0 {
        doc.warn(format!(
            "{} of {sent} packets left more than one period ({period}) behind the grid",
            counters.late
        ));
    }
    if errors.total() > 0 {
        doc.warn(format!(
            "{} send errors (ENOBUFS {}, EAGAIN {}, ECONNREFUSED {}, other {})",
            errors.total(),
            errors.enobufs,
            errors.eagain,
            errors.refused,
            errors.other
        ));
    }
    if tx_missing > 0 {
        doc.warn(format!(
            "{tx_missing} packets got no TX timestamp (the kernel drops them when the error queue is full)"
        ));
    }
    if shaped && args.wait.strategy != WaitStrategy::Sleep {
        doc.warn(format!(
            "the sender's CPU time includes spinning (--strategy {}): use --strategy sleep to measure what shaping costs",
            args.wait.strategy
        ));
    }
    if tx_ts && book.tx.counts().matched == 0 && sent > 0 {
        doc.warn("no software TX timestamp came back: the sender reports no L_Tx".to_string());
    }

    let l_i_s = l_i.summary();
    let tx_send_s = book.tx_from_send.summary();
    let tx_wake_s = book.tx_from_wake.summary();
    doc.insert("sent", sent);
    doc.insert("target_pps", target_pps);
    doc.insert("achieved_pps", achieved);
    doc.insert("sustained", sustained);
    doc.insert("late", counters.late);
    doc.insert("skipped_slots", counters.skipped);
    doc.insert("max_backlog_periods", counters.max_backlog);
    doc.insert("send_errors", &errors);
    doc.insert("tx_timestamps", book.tx.counts().matched);
    doc.insert("tx_timestamps_missing", tx_missing);
    doc.insert("tx_timestamps_unmatched", book.tx.counts().unmatched);
    if args.txtime {
        let dropped = sock.txtime_errors();
        doc.insert("txtime_dropped", dropped);
        if dropped > 0 {
            doc.warn(format!(
                "--txtime: the qdisc dropped {dropped} packets for their launch time (already past when they reached it, or out of its window): raise --txtime-lead"
            ));
        }
    }
    doc.insert("clock_map_uncertainty_ns", map.uncertainty_ns());
    doc.insert("l_i", &l_i_s);
    doc.insert("l_tx_from_send", &tx_send_s);
    doc.insert("l_tx_from_wake", &tx_wake_s);
    // The run lasted from its start to the end of the sending loop.
    let wall_ns = loop_end.saturating_sub(start).max(0);
    let shaper_report = source.shaper().zip(shape).map(|(sh, spec)| {
        let st = sh.stats();
        ShaperReport {
            rate: spec.rate,
            rate_bps: spec.rate.bps(),
            bucket_bytes: spec.bucket.bytes(),
            ts_ns: spec.ts.as_nanos(),
            packet_wire_bytes: wire,
            symmetric_burst: args.symmetric_burst,
            burst_packets: match &source {
                Source::Burst { source, .. } => Some(source.burst_packets()),
                Source::Paced { .. } | Source::Greedy { .. } => None,
            },
            affine_burst: exact_bytes(sh.bucket().affine_burst_nanobits()),
            stats: st,
            mean_wait_ns: (st.delayed > 0).then(|| st.total_wait_ns / st.delayed as i64),
            wire_rate_bps: (wall_ns > 0).then(|| st.sent_bytes as f64 * 8.0 * 1e9 / wall_ns as f64),
        }
    });
    let cpu_report = cpu.map(|time| {
        let intervals = args
            .shape
            .map(|sh| wall_ns / sh.ts.as_nanos())
            .filter(|&n| n > 0);
        CpuReport {
            time,
            total_ns: time.total_ns(),
            wall_ns,
            load: (wall_ns > 0).then(|| time.total_ns() as f64 / wall_ns as f64),
            intervals,
            per_interval_ns: intervals.map(|n| time.total_ns() / n),
        }
    });
    doc.insert("shaper", &shaper_report);
    doc.insert("sender_cpu", &cpu_report);

    let samples_path = match book.samples.take() {
        Some(w) => Some(w.finish()?),
        None => None,
    };
    let mut lines = vec![
        ("sent", sent.to_string()),
        (
            "rate",
            format!(
                "{} pps achieved of {}",
                achieved.map(fmt_rate).unwrap_or_else(|| "-".into()),
                if args.greedy {
                    "as many as possible (greedy)".to_string()
                } else {
                    format!("{} pps", fmt_rate(target_pps))
                }
            ),
        ),
        ("late", counters.late.to_string()),
        ("skipped slots", counters.skipped.to_string()),
        ("send errors", errors.total().to_string()),
        (
            "TX timestamps",
            format!("{} ({} missing)", book.tx.counts().matched, tx_missing),
        ),
    ];
    if let Some(r) = &shaper_report {
        lines.push((
            "shaper",
            format!(
                "{} bucket {}B every {}{}: {} delayed (max wait {}), {} refused",
                r.rate,
                r.bucket_bytes,
                Duration(r.ts_ns),
                if r.symmetric_burst {
                    format!(
                        ", symmetric burst of {} packets",
                        r.burst_packets.unwrap_or(0)
                    )
                } else {
                    String::new()
                },
                r.stats.delayed,
                Duration(r.stats.max_wait_ns),
                r.stats.refused
            ),
        ));
        if let Some(bps) = r.wire_rate_bps {
            lines.push(("wire rate", format!("{:.3} Mbit/s", bps / 1e6)));
        }
    }
    if let Some(c) = &cpu_report {
        let mut t = format!(
            "{} user + {} sys over {}",
            Duration(c.time.user_ns),
            Duration(c.time.sys_ns),
            Duration(c.wall_ns)
        );
        if let Some(load) = c.load {
            t.push_str(&format!(" ({:.1}% of a CPU)", load * 100.0));
        }
        if let (Some(n), Some(per)) = (c.intervals, c.per_interval_ns) {
            t.push_str(&format!(", {} per shaping interval ({n})", Duration(per)));
        }
        lines.push(("sender CPU", t));
    }
    if let Some(p) = &samples_path {
        lines.push(("samples", p.display().to_string()));
    }
    let mut text = kv(&lines);
    text.push_str(&dist_table(&[
        ("L_I", &l_i_s),
        ("L_Tx(send)", &tx_send_s),
        ("L_Tx(wake)", &tx_wake_s),
    ]));
    for w in &doc.warnings {
        text.push_str(&format!("warning: {w}\n"));
    }
    out.human(&text);
    out.finish(&doc)?;
    if sent == 0 && errors.total() > 0 {
        // the results are written; nothing left the host: the environment's fault
        return Err(EnvError(format!(
            "every send failed ({} errors; last: {}): nothing was sent to {}",
            errors.total(),
            errors.last_other.as_deref().unwrap_or("a transient error"),
            args.to
        ))
        .into());
    }
    Ok(())
}

/// A packet rate for humans: whole pps, or with decimals below 10.
pub(crate) fn fmt_rate(pps: f64) -> String {
    if pps >= 10.0 {
        format!("{pps:.0}")
    } else {
        format!("{pps:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bit_rate_is_sent_in_whole_frames() {
        let period = |s: &str, wire| parse_stream_rate(s).unwrap().period(wire);
        // 106-byte frames (a 64-byte payload over IPv4) at 10 Mbit/s: 84.8 us
        assert_eq!(period("10Mbit/s", 106), Ok(lockstep_core::Duration(84_800)));
        // 1514-byte frames at 1 Gbit/s: 12.112 us; at 3 Gbit/s 4037.33 ns, rounded up
        assert_eq!(period("1Gbit/s", 1514), Ok(lockstep_core::Duration(12_112)));
        assert_eq!(period("3Gbit/s", 1514), Ok(lockstep_core::Duration(4_038)));
        assert_eq!(period("135kpps", 106), Ok(lockstep_core::Duration(7_407)));
        assert_eq!(
            period("1Tbit/s", 106).unwrap_err(),
            "1000Gbit/s in 106B frames is a packet every 1ns, above the limit of 100 Mpps"
        );
        assert!(matches!(
            parse_stream_rate("20B/us"),
            Ok(StreamRate::Bits(_))
        ));
        assert_eq!(
            parse_stream_rate("fast").unwrap_err(),
            "expected a packet rate like 100000pps or a bit rate like 10Mbit/s, got \"fast\""
        );
        assert_eq!(
            parse_stream_rate("10").unwrap_err(),
            "expected a packet rate like 100000pps or a bit rate like 10Mbit/s, got \"10\" (the unit is missing)"
        );
        assert_eq!(
            parse_stream_rate("1.5bit/s").unwrap_err(),
            "1.5bit/s is not a whole number of bit/s"
        );
        assert_eq!(
            parse_stream_rate("0pps").unwrap_err(),
            "a packet rate must be above 0, got \"0pps\""
        );
    }

    #[test]
    fn shape_specs_parse_exactly() {
        assert_eq!(
            parse_shape("40Mbit/s,10kB,1ms").unwrap(),
            ShapeSpec {
                rate: BitRate(40_000_000),
                bucket: Size(10_000),
                ts: Duration::from_millis(1),
            }
        );
        assert_eq!(
            parse_shape("20B/us, 2014B").unwrap(),
            ShapeSpec {
                rate: BitRate(160_000_000),
                bucket: Size(2014),
                ts: DEFAULT_SHAPING_INTERVAL,
            }
        );
        assert_eq!(
            parse_shape("40Mbit/s").unwrap_err(),
            "expected RATE,BUCKET[,TS] like 40Mbit/s,10kB,1ms, got \"40Mbit/s\""
        );
        assert_eq!(
            parse_shape("40Mbit/s,1kB,1ms,2").unwrap_err(),
            "expected RATE,BUCKET[,TS] like 40Mbit/s,10kB,1ms, got \"40Mbit/s,1kB,1ms,2\""
        );
        assert_eq!(
            parse_shape("40mbit,10kB").unwrap_err(),
            "rate: expected a bit rate like 100Mbit/s or 20B/us, got \"40mbit\" (unknown unit \"mbit\")"
        );
        assert_eq!(
            parse_shape("0Mbit/s,10kB").unwrap_err(),
            "rate: a bit rate must be above 0, got \"0Mbit/s\""
        );
        assert_eq!(
            parse_shape("40Mbit/s,lots").unwrap_err(),
            "bucket: expected a size like 1514B, 2MB or 12000bit, got \"lots\""
        );
        assert_eq!(
            parse_shape("40Mbit/s,10kB,0ms").unwrap_err(),
            "shaping interval: expected a positive duration like 1ms, got \"0ms\""
        );
        assert!(parse_shape("40Mbit/s,10kB,soon")
            .unwrap_err()
            .starts_with("shaping interval: "));
    }

    #[test]
    fn stream_options_have_limits() {
        assert_eq!(
            parse_shape("2Tbit/s,10kB").unwrap_err(),
            "rate: 2Tbit/s is above the limit of 1 Tbit/s"
        );
        assert_eq!(
            parse_shape("40Mbit/s,1000000000001B").unwrap_err(),
            "bucket: 1000000000001B is above the limit of 1000000000000B (1 TB)"
        );
        assert_eq!(
            parse_shape("40Mbit/s,10kB,1.5s").unwrap_err(),
            "shaping interval: 1.5s is above the limit of 1s"
        );
        assert_eq!(
            parse_packet_period("9ns").unwrap_err(),
            "9ns is below the limit of 10ns (100 Mpps)"
        );
        assert_eq!(parse_packet_period("10ns").unwrap(), Duration(10));
        assert_eq!(
            parse_max_behind("1000000000001").unwrap_err(),
            "1000000000001 is above the limit of 1000000000000"
        );
        assert_eq!(parse_max_behind("0").unwrap(), 0);
    }

    #[test]
    fn packets_are_charged_their_ethernet_frame() {
        let v4: SocketAddr = "10.0.0.1:9".parse().unwrap();
        let v6: SocketAddr = "[::1]:9".parse().unwrap();
        assert_eq!(wire_bytes(1472, &v4), 1514);
        assert_eq!(wire_bytes(64, &v4), 106);
        assert_eq!(wire_bytes(1452, &v6), 1514);
    }
}
