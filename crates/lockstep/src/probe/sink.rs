//! `lockstep probe sink`: receive probe packets and report inter-arrival times,
//! one-way latency and its decomposition (the latency decomposition), the receive path, RFC 3550 jitter,
//! loss, duplicates and reordering per flow. The accounting is
//! [`lockstep_core::measure::sink::SinkState`]; this file receives and timestamps.
//!
//! Per datagram the sink records the kernel RX timestamp (software, converted from
//! `CLOCK_REALTIME` to the run's `--clock`) and the application receive time (the
//! clock read right after `recvmsg` returns).
//!
//! **Clocks.** One-way latency compares the sender's clock (its `t0`, `t_wake`,
//! `t_send`) with the sink's. The default `--clock monotonic` is shared by a sender and
//! a sink on the same host, and by nothing else: across hosts use `--clock tai` (or
//! `realtime`) on both ends, with the clocks kept in sync (PTP: ptp4l + phc2sys; NTP:
//! chrony), and read the one-way figures knowing the sync error. Inter-arrival and
//! receive-path figures use the sink's clock alone and are valid either way.
//!
//! **When it stops.** After `--count` probe packets, after `--duration`, after
//! `--idle-timeout` (default 2 s) without a datagram once the first one arrived, or on
//! Ctrl-C — whichever comes first. Without any of them it waits for the first packet
//! indefinitely. `--idle-timeout off` disables the idle stop.

use anyhow::{Context, Result};
use clap::Args;
use lockstep_core::measure::sink::{Handled, SinkState};
use lockstep_core::{ClockId, Duration};
use lockstep_linux::signal::stop_requested;
use lockstep_linux::udp::{RecvMode, TimestampConfig, UdpSocket};
use lockstep_linux::{clock, ClockMap};
use serde::Serialize;

use super::stream::{apply_rt, insert_all, parse_addr, to_run_clock};
use crate::cli::{parse_clock, LengthArgs, OutputArgs, RtArgs};
use crate::report::human::{dist_table, fmt_ns, kv};
use crate::report::{Output, ResultDoc};
use crate::EnvError;

/// How long a blocking receive waits before the loop looks at the clock and the stop
/// flag again.
const BLOCK_SLICE: Duration = Duration::from_millis(50);
/// Re-measure the REALTIME → run clock offset this often (MONOTONIC drifts when NTP
/// slews REALTIME).
const REMAP_EVERY: Duration = Duration::from_secs(1);
/// Receive buffer: the largest UDP payload, so no datagram is ever truncated.
const RECV_BUF: usize = 65_536;
/// Ask for a socket receive buffer this large so bursts at 100+ kpps are not dropped
/// while the sink is descheduled.
const SOCKET_RCVBUF: usize = 4 << 20;

#[derive(Args, Debug)]
pub struct SinkArgs {
    /// Where to listen.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub bind: std::net::SocketAddr,
    /// Busy-poll the socket (MSG_DONTWAIT in a loop) instead of blocking in recvmsg.
    /// Blocking (sleeping until a packet comes) is the default, as every probe waits
    /// by sleeping unless told otherwise: it leaves the CPU to others; polling saves
    /// the wake-up at the cost of a CPU.
    #[arg(long)]
    pub poll: bool,
    /// Stop after this long without a datagram once one arrived ("off" to never).
    #[arg(long, value_name = "DUR|off", default_value = "2s", value_parser = parse_idle)]
    pub idle_timeout: IdleTimeout,
    /// Clock of the run; must be the sender's for one-way latency (tai/realtime + sync across hosts).
    #[arg(long, value_name = "tai|realtime|monotonic", default_value = "monotonic", value_parser = parse_clock)]
    pub clock: ClockId,
    /// Use the NIC's hardware RX timestamps where the interface supports them (its PTP
    /// clock must be on TAI, e.g. by phc2sys, and the run must use --clock tai);
    /// falls back to software timestamps with a warning otherwise.
    #[arg(long)]
    pub hw_timestamps: bool,
    #[command(flatten)]
    pub length: LengthArgs,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--idle-timeout`: a positive duration or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdleTimeout(pub Option<Duration>);

fn parse_idle(s: &str) -> Result<IdleTimeout, String> {
    if s.trim().eq_ignore_ascii_case("off") {
        return Ok(IdleTimeout(None));
    }
    crate::cli::parse_duration_positive(s)
        .map(|d| IdleTimeout(Some(d)))
        .map_err(|_| format!("expected a positive duration like 2s, or off, got \"{s}\""))
}

#[derive(Serialize)]
struct SinkConfig {
    bind: String,
    poll: bool,
    idle_timeout_ns: Option<i64>,
    clock: ClockId,
    duration_ns: Option<i64>,
    count: Option<u64>,
    hw_timestamps: bool,
}

/// Why the run ended.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum StopReason {
    Count,
    Duration,
    Idle,
    Signal,
}

pub fn run(args: SinkArgs) -> Result<()> {
    let clock_id = args.clock;
    clock::check(clock_id).map_err(|e| EnvError(e.to_string()))?;
    let config = SinkConfig {
        bind: args.bind.to_string(),
        poll: args.poll,
        idle_timeout_ns: args.idle_timeout.0.map(|d| d.as_nanos()),
        clock: clock_id,
        duration_ns: args.length.duration.map(|d| d.as_nanos()),
        count: args.length.count,
        hw_timestamps: args.hw_timestamps,
    };
    let out = Output::new(&args.output)?;
    let mut doc = ResultDoc::new("probe.sink", &config);

    let sock = UdpSocket::bind(args.bind).with_context(|| format!("--bind {}", args.bind))?;
    if let Err(e) = sock.set_recv_buffer(SOCKET_RCVBUF) {
        doc.warn(format!("could not enlarge the socket receive buffer: {e}"));
    }
    let mut use_hw = false;
    let rx_ts = match sock.enable_timestamping(TimestampConfig {
        tx_software: false,
        rx_software: true,
        hardware: args.hw_timestamps,
    }) {
        Ok(s) => {
            if args.hw_timestamps {
                for n in &s.notes {
                    doc.warn(format!("--hw-timestamps: {n}"));
                }
                if s.rx_hardware && clock_id != ClockId::Tai {
                    doc.warn("--hw-timestamps: hardware timestamps are on the NIC's TAI clock; use --clock tai to use them (software timestamps used)");
                } else if s.rx_hardware {
                    use_hw = true;
                } else if s.notes.is_empty() {
                    doc.warn("--hw-timestamps: this interface gives no hardware RX timestamps; software timestamps used");
                }
            }
            s.rx_software
        }
        Err(e) => {
            doc.warn(format!(
                "software RX timestamps unavailable ({e}): no kernel RX figures"
            ));
            false
        }
    };
    let mut samples = out.sample_writer(&[
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
        "rx_path",
    ])?;
    let _rt = apply_rt(&args.rt, &mut doc)?;
    let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    out.progress(&format!(
        "lockstep probe sink: listening on {local} ({}), clock {clock_id}",
        if args.poll { "busy-poll" } else { "blocking" }
    ));

    let mut state = SinkState::new();
    let mut buf = vec![0u8; RECV_BUF];
    let mode = if args.poll {
        RecvMode::Poll
    } else {
        RecvMode::Block {
            timeout: Some(BLOCK_SLICE),
        }
    };
    let mut map = ClockMap::measure(clock_id);
    let started = clock::now(clock_id).ns;
    let end = args
        .length
        .duration
        .map(|d| started.saturating_add(d.as_nanos()));
    let idle = args.idle_timeout.0.map(|d| d.as_nanos());
    let mut last_rx: Option<i64> = None;
    let mut next_remap = started.saturating_add(REMAP_EVERY.as_nanos());
    let mut truncated = 0u64;

    let reason = loop {
        if stop_requested() {
            break StopReason::Signal;
        }
        if args.length.count.is_some_and(|c| state.probes() >= c) {
            break StopReason::Count;
        }
        let got = sock.recv(&mut buf, mode).context("receiving")?;
        let now = clock::now(clock_id).ns;
        let Some(info) = got else {
            if end.is_some_and(|e| now >= e) {
                break StopReason::Duration;
            }
            if let (Some(last), Some(idle)) = (last_rx, idle) {
                if now.saturating_sub(last) >= idle {
                    break StopReason::Idle;
                }
            }
            if now >= next_remap {
                map = ClockMap::measure(clock_id);
                next_remap = now.saturating_add(REMAP_EVERY.as_nanos());
            }
            continue;
        };
        let app_rx = now;
        last_rx = Some(app_rx);
        if info.truncated {
            truncated += 1;
        }
        let kernel_rx = match (use_hw, info.hw_rx) {
            (true, Some(hw)) => Some(hw.ns),
            _ => info.kernel_rx.map(|k| to_run_clock(&map, k)),
        };
        let bytes = buf.get(..info.len).unwrap_or_default();
        if let Handled::Probe(s) = state.handle_packet(app_rx, kernel_rx, bytes) {
            if let Some(w) = samples.as_mut() {
                w.row(&[
                    i64::try_from(s.seq).ok(),
                    Some(i64::from(s.flow)),
                    Some(s.frame),
                    Some(s.t0_ns),
                    Some(s.t_wake_ns),
                    Some(s.t_send_ns),
                    s.kernel_rx_ns,
                    Some(s.app_rx_ns),
                    s.delta_t_ns,
                    s.one_way_ns,
                    s.rx_path_ns,
                ])?;
            }
        }
        if end.is_some_and(|e| app_rx >= e) {
            break StopReason::Duration;
        }
        if app_rx >= next_remap {
            map = ClockMap::measure(clock_id);
            next_remap = app_rx.saturating_add(REMAP_EVERY.as_nanos());
        }
    };

    let report = state.report();
    if report.probes == 0 {
        doc.warn("no probe packet arrived".to_string());
    }
    if rx_ts && report.probes > 0 && report.rx_path.count == 0 {
        doc.warn("the kernel gave no RX timestamps: no kernel figures".to_string());
    }
    if let (Some(min), Some(p50)) = (report.one_way.min_ns, report.one_way.percentile("50")) {
        if min < 0 || p50 > 10_000_000_000 {
            doc.warn(format!(
                "one-way latencies look wrong (min {}, median {}): sender and sink must use the same --clock, and hosts need synchronized clocks (tai/realtime + PTP/NTP)",
                fmt_ns(min),
                fmt_ns(p50)
            ));
        }
    }
    if truncated > 0 {
        doc.warn(format!(
            "{truncated} datagrams were longer than {RECV_BUF} bytes and truncated"
        ));
    }
    if report.foreign > 0 || report.invalid_total > 0 {
        doc.warn(format!(
            "ignored {} foreign datagrams and {} invalid probe packets",
            report.foreign, report.invalid_total
        ));
    }
    doc.insert("stop_reason", reason);
    doc.insert("rx_timestamps", rx_ts);
    doc.insert(
        "rx_timestamp_source",
        match (rx_ts, use_hw) {
            (_, true) => "hardware",
            (true, false) => "software",
            (false, false) => "none",
        },
    );
    doc.insert("clock_map_uncertainty_ns", map.uncertainty_ns());
    insert_all(&mut doc, &report);

    let samples_path = match samples.take() {
        Some(w) => Some(w.finish()?),
        None => None,
    };
    let t = &report.totals;
    let mut lines = vec![
        (
            "received",
            format!("{} probes ({} datagrams)", report.probes, report.datagrams),
        ),
        ("lost", t.lost.to_string()),
        ("duplicates", t.duplicates.to_string()),
        ("reordered", t.reordered.to_string()),
        (
            "loss runs",
            format!("{} (longest {})", t.loss_runs, t.longest_loss_run),
        ),
        ("foreign", report.foreign.to_string()),
        ("invalid", report.invalid_total.to_string()),
        (
            "rate",
            report
                .receive_rate_pps
                .map(|r| format!("{} pps", super::stream::fmt_rate(r)))
                .unwrap_or_else(|| "-".into()),
        ),
    ];
    for f in &report.flows {
        lines.push((
            "flow",
            format!(
                "{}: {} received, {} lost, RFC 3550 jitter {}",
                f.flow,
                f.seq.received,
                f.seq.lost,
                fmt_ns(f.rfc3550_jitter_ns.round() as i64)
            ),
        ));
    }
    if let Some(p) = &samples_path {
        lines.push(("samples", p.display().to_string()));
    }
    let mut text = kv(&lines);
    text.push_str(&dist_table(&[
        ("dT(app)", &report.delta_t),
        ("dT(kernel)", &report.kernel_delta_t),
        ("one-way L", &report.one_way),
        ("L_I", &report.l_i),
        ("send path", &report.send_path),
        ("wire+stack", &report.wire_stack),
        ("L_Rx", &report.rx_path),
    ]));
    for w in &doc.warnings {
        text.push_str(&format!("warning: {w}\n"));
    }
    let crossings = args.gates.check(
        t.lost,
        t.unique + t.lost,
        "one-way latency",
        &report.one_way,
    );
    let failed = args.gates.record(&mut doc, &crossings);
    out.human(&text);
    out.finish(&doc)?;
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}
