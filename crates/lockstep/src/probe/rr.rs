//! `lockstep probe rr server|client`: request/response latency like sockperf
//! ping-pong, with the round trip split into client send path, server turnaround,
//! client receive path and network (see [`lockstep_core::measure::rr`]).
//!
//! The client sends one request at a time and waits for its response (or
//! `--timeout`, after which the request counts as lost and the client goes on). By
//! default the next request leaves as soon as the response is in (back-to-back, like
//! `sockperf ping-pong`); `--interval D` schedules requests every D and
//! `--random-interval A..B` at uniformly random intervals (seeded, `--seed`). A
//! request whose exchange overran its successor's slot makes that one leave at once
//! (no burst: there is never more than one request in flight).
//!
//! The hot path is kept lean: between `send` and the receive of the response there is
//! nothing but the receive loop (`--poll` busy-polls with `MSG_DONTWAIT` like sockperf
//! with a non-blocking socket; the default blocks in `recvmsg`). The TX timestamp of
//! the request is drained from the error queue *after* the response, and parsing and
//! accounting happen after the receive time was read.
//!
//! The server appends a hop record (kind rr-server: its kernel RX timestamp, its
//! application receive time, and its application send time read right before the
//! reply) into the room the client left in the request, sets the response flag and
//! sends the datagram back. Its turnaround is measured on its own clock, so the split
//! holds across hosts whose clocks disagree.

use std::net::SocketAddr;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lockstep_core::measure::rr::{RrClientState, RrEvent, RrSample};
use lockstep_core::measure::sink::InvalidCounts;
use lockstep_core::stats::Histogram;
use lockstep_core::units::Size;
use lockstep_core::wire::{
    parse_probe, HopKind, HopRecord, ProbePacket, ProbeRepr, WireError, FLAG_RESPONSE, HEADER_LEN,
    HOP_LEN,
};
use lockstep_core::{ClockId, Duration, Instant};
use lockstep_linux::signal::stop_requested;
use lockstep_linux::udp::{RecvMode, TimestampConfig, Transient, UdpSocket};
use lockstep_linux::{clock, ClockMap, NetError, Waiter};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::stream::{any_addr_for, apply_rt, check_size, insert_all, parse_addr, to_run_clock};
use crate::cli::{
    parse_clock, parse_dscp, parse_duration_positive, parse_size, LengthArgs, OutputArgs, RtArgs,
    WaitArgs,
};
use crate::report::human::{dist_table, kv};
use crate::report::{Output, ResultDoc, SampleWriter};
use crate::{EnvError, UsageError};

/// Smallest request: the probe header plus room for the server's hop record.
const MIN_REQUEST: usize = HEADER_LEN + HOP_LEN;
/// Receive buffer: any UDP datagram fits.
const RECV_BUF: usize = 65_536;
/// A blocking server wakes up this often to look at the stop flag and the clock.
const SERVER_SLICE: Duration = Duration::from_millis(100);
/// Re-measure the REALTIME → run clock offset this often.
const REMAP_EVERY: Duration = Duration::from_secs(1);
/// Default run length of the client.
const DEFAULT_DURATION: Duration = Duration::from_secs(10);

#[derive(Subcommand, Debug)]
pub enum RrCmd {
    /// Echo requests back with a hop record of the server's timestamps.
    Server(RrServerArgs),
    /// Send requests, measure the round trip and split it.
    Client(RrClientArgs),
}

#[derive(Args, Debug)]
pub struct RrServerArgs {
    /// Where to listen.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub bind: SocketAddr,
    /// Busy-poll the socket instead of blocking in recvmsg. Blocking (sleeping until
    /// a packet comes) is the default, as every probe waits by sleeping unless told
    /// otherwise: it leaves the CPU to others; polling saves the wake-up at the cost
    /// of a CPU.
    #[arg(long)]
    pub poll: bool,
    /// Node id written into the hop record.
    #[arg(long, value_name = "ID", default_value_t = 0)]
    pub node: u32,
    /// No kernel RX timestamps: the leanest echo, but the hop record carries no kernel
    /// receive time, so clients get no turnaround.
    #[arg(long)]
    pub no_timestamps: bool,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Clock of the server's timestamps (only its own differences are used).
    #[arg(long, value_name = "tai|realtime|monotonic", default_value = "monotonic", value_parser = parse_clock)]
    pub clock: ClockId,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

#[derive(Args, Debug)]
pub struct RrClientArgs {
    /// The server.
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub to: SocketAddr,
    /// Local address (default: any address, a free port).
    #[arg(long, value_name = "ADDR:PORT", value_parser = parse_addr)]
    pub bind: Option<SocketAddr>,
    /// Time between requests (default: back-to-back, the next as soon as the response
    /// is in; at least 1us).
    #[arg(long, value_name = "DUR", value_parser = crate::cli::parse_interval, allow_hyphen_values = true, conflicts_with = "random_interval")]
    pub interval: Option<Duration>,
    /// Uniformly random time between requests, e.g. 1ms..10ms.
    #[arg(long, value_name = "MIN..MAX", value_parser = parse_range)]
    pub random_interval: Option<IntervalRange>,
    /// Seed of --random-interval.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// UDP payload size of a request: the 64-byte probe header plus 32 bytes for the
    /// server's hop record at least (default 96B).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<Size>,
    /// Busy-poll the socket instead of blocking in recvmsg. Blocking (sleeping until
    /// a packet comes) is the default, as every probe waits by sleeping unless told
    /// otherwise: it leaves the CPU to others; polling saves the wake-up at the cost
    /// of a CPU.
    #[arg(long)]
    pub poll: bool,
    /// A request not answered within this time counts as lost.
    #[arg(long, value_name = "DUR", default_value = "100ms", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub timeout: Duration,
    /// DSCP codepoint of the requests.
    #[arg(long, value_name = "DSCP", value_parser = parse_dscp)]
    pub dscp: Option<u8>,
    /// No kernel timestamps: RTT only, like sockperf (the kernel's TX and RX
    /// timestamping costs a few hundred ns per packet), no split.
    #[arg(long)]
    pub no_timestamps: bool,
    #[command(flatten)]
    pub length: LengthArgs,
    #[command(flatten)]
    pub gates: crate::gates::GateArgs,
    #[command(flatten)]
    pub wait: WaitArgs,
    #[command(flatten)]
    pub rt: RtArgs,
    #[command(flatten)]
    pub output: OutputArgs,
}

/// `--random-interval MIN..MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IntervalRange {
    pub min_ns: i64,
    pub max_ns: i64,
}

fn parse_range(s: &str) -> Result<IntervalRange, String> {
    let err = || format!("expected a range of durations like 1ms..10ms, got \"{s}\"");
    let (a, b) = s.split_once("..").ok_or_else(err)?;
    // a well-formed duration out of its limits says which limit
    let bound = |t: &str| match Duration::parse(t) {
        Ok(d) if d.is_positive() => {
            crate::cli::parse_interval(t).map_err(|e| format!("{} ({e})", err()))
        }
        _ => Err(err()),
    };
    let lo = bound(a)?;
    let hi = bound(b)?;
    if lo > hi {
        return Err(format!(
            "the minimum {lo} is above the maximum {hi} in \"{s}\""
        ));
    }
    Ok(IntervalRange {
        min_ns: lo.as_nanos(),
        max_ns: hi.as_nanos(),
    })
}

pub fn run(cmd: RrCmd) -> Result<()> {
    match cmd {
        RrCmd::Server(a) => server(a),
        RrCmd::Client(a) => client(a),
    }
}

/// Send errors by errno, never fatal.
#[derive(Default, Serialize, Debug)]
struct SendErrors {
    total: u64,
    refused: u64,
    last: Option<String>,
}

impl SendErrors {
    fn count(&mut self, e: &NetError) {
        self.total += 1;
        if e.transient() == Some(Transient::Refused) {
            self.refused += 1;
        }
        self.last = Some(e.to_string());
    }
}

fn preallocated() -> Histogram {
    let mut h = Histogram::new();
    h.record(1_000_000_000);
    h.reset();
    h
}

#[derive(Serialize)]
struct ServerConfig {
    bind: String,
    poll: bool,
    node: u32,
    no_timestamps: bool,
    duration_ns: Option<i64>,
    clock: ClockId,
}

fn server(args: RrServerArgs) -> Result<()> {
    let clock_id = args.clock;
    clock::check(clock_id).map_err(|e| EnvError(e.to_string()))?;
    let out = Output::new(&args.output)?;
    let mut doc = ResultDoc::new(
        "probe.rr.server",
        ServerConfig {
            bind: args.bind.to_string(),
            poll: args.poll,
            node: args.node,
            no_timestamps: args.no_timestamps,
            duration_ns: args.duration.map(|d| d.as_nanos()),
            clock: clock_id,
        },
    );
    let sock = UdpSocket::bind(args.bind).with_context(|| format!("--bind {}", args.bind))?;
    let rx_ts = match sock.enable_timestamping(TimestampConfig {
        tx_software: false,
        rx_software: !args.no_timestamps,
        hardware: false,
    }) {
        Ok(s) => s.rx_software,
        Err(e) if args.no_timestamps => {
            doc.warn(format!("could not turn timestamping off ({e})"));
            false
        }
        Err(e) => {
            doc.warn(format!(
                "software RX timestamps unavailable ({e}): the hop record carries no kernel RX time"
            ));
            false
        }
    };
    let _rt = apply_rt(&args.rt, &mut doc)?;
    let local = sock.local_addr().map(|a| a.to_string()).unwrap_or_default();
    out.progress(&format!(
        "lockstep probe rr server: listening on {local} ({}), clock {clock_id}",
        if args.poll { "busy-poll" } else { "blocking" }
    ));

    let mode = if args.poll {
        RecvMode::Poll
    } else {
        RecvMode::Block {
            timeout: Some(SERVER_SLICE),
        }
    };
    let mut buf = vec![0u8; RECV_BUF];
    let mut map = ClockMap::measure(clock_id);
    let started = clock::now(clock_id).ns;
    let end = args.duration.map(|d| started.saturating_add(d.as_nanos()));
    let mut next_remap = started.saturating_add(REMAP_EVERY.as_nanos());
    let mut requests = 0u64;
    let mut responses = 0u64;
    let mut ignored_responses = 0u64;
    let mut no_room = 0u64;
    let mut foreign = 0u64;
    let mut invalid = InvalidCounts::default();
    let mut errors = SendErrors::default();
    let mut turnaround = preallocated();
    let mut rx_path = preallocated();

    while !stop_requested() {
        let got = sock.recv(&mut buf, mode).context("receiving")?;
        let rx_app = clock::now(clock_id).ns;
        let Some(info) = got else {
            if end.is_some_and(|e| rx_app >= e) {
                break;
            }
            if rx_app >= next_remap {
                map = ClockMap::measure(clock_id);
                next_remap = rx_app.saturating_add(REMAP_EVERY.as_nanos());
            }
            continue;
        };
        let len = info.len.min(buf.len());
        let repr = match parse_probe(&buf[..len]) {
            Ok(r) => r,
            Err(WireError::Foreign) => {
                foreign += 1;
                continue;
            }
            Err(e) => {
                invalid.count(&e);
                continue;
            }
        };
        if repr.is_response() {
            ignored_responses += 1;
            continue;
        }
        requests += 1;
        let rx_kernel = info.kernel_rx.map(|k| to_run_clock(&map, k));
        let mut pkt = ProbePacket::new_unchecked(&mut buf[..len]);
        pkt.set_flags(repr.flags | FLAG_RESPONSE);
        pkt.fill_checksum();
        let tx_app = clock::now(clock_id).ns;
        let hop = HopRecord {
            node: args.node,
            kind: HopKind::RrServer,
            rx_kernel_ns: rx_kernel.unwrap_or(0),
            rx_app_ns: rx_app,
            tx_app_ns: tx_app,
            slipped: false,
        };
        if pkt.push_hop(&hop).is_err() {
            no_room += 1;
        }
        match sock.send_to(&buf[..len], info.from) {
            Ok(_) => responses += 1,
            Err(e) => errors.count(&e),
        }
        if let Some(k) = rx_kernel {
            turnaround.record(tx_app.saturating_sub(k));
            rx_path.record(rx_app.saturating_sub(k));
        }
        if end.is_some_and(|e| tx_app >= e) {
            break;
        }
        if tx_app >= next_remap {
            map = ClockMap::measure(clock_id);
            next_remap = tx_app.saturating_add(REMAP_EVERY.as_nanos());
        }
    }

    if no_room > 0 {
        doc.warn(format!(
            "{no_room} requests had no room for the hop record (clients should send at least {MIN_REQUEST}B): answered without it"
        ));
    }
    if errors.total > 0 {
        doc.warn(format!("{} responses could not be sent", errors.total));
    }
    let turnaround_s = turnaround.summary();
    let rx_path_s = rx_path.summary();
    doc.insert("requests", requests);
    doc.insert("responses", responses);
    doc.insert("ignored_responses", ignored_responses);
    doc.insert("no_room", no_room);
    doc.insert("foreign", foreign);
    doc.insert("invalid", invalid);
    doc.insert("invalid_total", invalid.total());
    doc.insert("send_errors", &errors);
    doc.insert("rx_timestamps", rx_ts);
    doc.insert("turnaround", &turnaround_s);
    doc.insert("rx_path", &rx_path_s);
    let mut text = kv(&[
        ("requests", requests.to_string()),
        ("responses", responses.to_string()),
        ("foreign", foreign.to_string()),
        ("invalid", invalid.total().to_string()),
        ("send errors", errors.total.to_string()),
    ]);
    text.push_str(&dist_table(&[
        ("turnaround", &turnaround_s),
        ("rx path", &rx_path_s),
    ]));
    for w in &doc.warnings {
        text.push_str(&format!("warning: {w}\n"));
    }
    out.human(&text);
    out.finish(&doc)
}

#[derive(Serialize)]
struct ClientConfig {
    to: String,
    bind: Option<String>,
    size_bytes: usize,
    poll: bool,
    interval_ns: Option<i64>,
    random_interval: Option<IntervalRange>,
    seed: u64,
    timeout_ns: i64,
    dscp: Option<u8>,
    no_timestamps: bool,
    duration_ns: Option<i64>,
    count: Option<u64>,
    clock: ClockId,
    strategy: lockstep_core::sched::WaitStrategy,
    margin_ns: i64,
}

/// When requests leave.
enum Schedule {
    BackToBack,
    Fixed(i64),
    Random(Box<rand::rngs::StdRng>, IntervalRange),
}

impl Schedule {
    /// The gap to the next request, `None` for back-to-back.
    fn next_gap(&mut self) -> Option<i64> {
        match self {
            Schedule::BackToBack => None,
            Schedule::Fixed(d) => Some(*d),
            Schedule::Random(rng, r) => Some(rng.gen_range(r.min_ns..=r.max_ns)),
        }
    }
}

fn write_sample(w: &mut Option<SampleWriter>, s: &RrSample) -> Result<()> {
    if let Some(w) = w.as_mut() {
        w.row(&[
            i64::try_from(s.seq).ok(),
            Some(s.t_send_ns),
            s.tx_kernel_ns,
            s.server_rx_kernel_ns,
            s.server_rx_app_ns,
            s.server_tx_app_ns,
            s.kernel_rx_ns,
            Some(s.app_rx_ns),
            Some(s.rtt_ns),
            s.send_path_ns,
            s.turnaround_ns,
            s.rx_path_ns,
            s.network_ns,
        ])?;
    }
    Ok(())
}

fn client(args: RrClientArgs) -> Result<()> {
    let size = check_size(
        args.size,
        MIN_REQUEST as u64,
        MIN_REQUEST,
        "the probe header and one hop record for the server",
    )?;
    let (duration, count) = args.length.or_default(DEFAULT_DURATION);
    let clock_id = args.wait.clock;
    let config = ClientConfig {
        to: args.to.to_string(),
        bind: args.bind.map(|b| b.to_string()),
        size_bytes: size,
        poll: args.poll,
        interval_ns: args.interval.map(|d| d.as_nanos()),
        random_interval: args.random_interval,
        seed: args.seed,
        timeout_ns: args.timeout.as_nanos(),
        dscp: args.dscp,
        no_timestamps: args.no_timestamps,
        duration_ns: duration.map(|d| d.as_nanos()),
        count,
        clock: clock_id,
        strategy: args.wait.strategy,
        margin_ns: args.wait.margin.as_nanos(),
    };
    let out = Output::new(&args.output)?;
    let mut doc = ResultDoc::new("probe.rr.client", &config);
    let waiter = args.wait.waiter();
    waiter.check().map_err(|e| EnvError(e.to_string()))?;

    let bind = args.bind.unwrap_or_else(|| any_addr_for(&args.to));
    let sock = UdpSocket::bind(bind).with_context(|| format!("--bind {bind}"))?;
    sock.connect(args.to)
        .with_context(|| format!("--to {}", args.to))?;
    if let Some(dscp) = args.dscp {
        sock.set_dscp(dscp).context("--dscp")?;
    }
    let wanted = if args.no_timestamps {
        TimestampConfig::default()
    } else {
        TimestampConfig::SOFTWARE
    };
    let support = match sock.enable_timestamping(wanted) {
        Ok(s) => s,
        Err(e) => {
            doc.warn(format!(
                "software timestamps unavailable ({e}): only the RTT is measured"
            ));
            Default::default()
        }
    };
    let mut samples = out.sample_writer(&[
        "seq",
        "t_send",
        "tx_kernel",
        "server_rx_kernel",
        "server_rx_app",
        "server_tx_app",
        "kernel_rx",
        "app_rx",
        "rtt",
        "send_path",
        "turnaround",
        "rx_path",
        "network",
    ])?;

    let mut req = vec![0u8; size];
    ProbeRepr {
        total_len: size as u32,
        ..ProbeRepr::default()
    }
    .emit_into(&mut req)
    .map_err(|e| UsageError(format!("--size: {e}")))?;
    let mut rx = vec![0u8; RECV_BUF];
    let mut schedule = match (args.interval, args.random_interval) {
        (Some(d), _) => Schedule::Fixed(d.as_nanos()),
        (None, Some(r)) => {
            Schedule::Random(Box::new(rand::rngs::StdRng::seed_from_u64(args.seed)), r)
        }
        (None, None) => Schedule::BackToBack,
    };
    let timeout = args.timeout.as_nanos();

    let _rt = apply_rt(&args.rt, &mut doc)?;
    out.progress(&format!(
        "lockstep probe rr client: {size}B requests to {} ({}), timeout {}",
        args.to,
        if args.poll { "busy-poll" } else { "blocking" },
        args.timeout
    ));

    let mut state = RrClientState::new();
    let mut errors = SendErrors::default();
    let mut map = ClockMap::measure(clock_id);
    let started = waiter.now().ns;
    let end = duration.map(|d| started.saturating_add(d.as_nanos()));
    let mut next_remap = started.saturating_add(REMAP_EVERY.as_nanos());
    let mut deadline = started.saturating_add(schedule.next_gap().unwrap_or(0));
    let mut seq: u64 = 0;
    let mut attempts: u64 = 0;
    let mut refused_rx: u64 = 0;

    'run: loop {
        if stop_requested() || count.is_some_and(|c| attempts >= c) {
            break;
        }
        let (t0, t_wake) = match schedule {
            Schedule::BackToBack => {
                let t = waiter.now().ns;
                (t, t)
            }
            _ => (
                deadline,
                waiter.wait_until(Instant::new(clock_id, deadline)).ns,
            ),
        };
        if end.is_some_and(|e| t_wake >= e) {
            break;
        }
        attempts += 1;
        let mut pkt = ProbePacket::new_unchecked(&mut req[..]);
        pkt.set_seq(seq);
        pkt.set_frame(seq as i64);
        pkt.set_t0_ns(t0);
        pkt.set_t_wake_ns(t_wake);
        pkt.set_t_send_ns(0);
        pkt.fill_checksum();
        let t_send = waiter.now().ns;
        pkt.set_t_send_ns_and_checksum(t_send);
        if let Err(e) = sock.send(&req) {
            // Nothing left (nobody listening, a full queue): wait as long as for a lost
            // response, so a missing server does not turn this into a busy loop.
            errors.count(&e);
            let until = Instant::new(clock_id, t_send.saturating_add(timeout));
            Waiter::new(clock_id, lockstep_core::sched::WaitStrategy::Sleep).wait_until(until);
            advance(&mut schedule, &mut deadline, waiter.now().ns);
            continue;
        }
        if let Some(s) = state.on_send(seq, t_send) {
            write_sample(&mut samples, &s)?;
        }

        // Wait for the response: nothing else happens here.
        let give_up = t_send.saturating_add(timeout);
        let mut wait_ns = timeout;
        let answered = loop {
            let mode = if args.poll {
                RecvMode::Poll
            } else {
                RecvMode::Block {
                    timeout: Some(Duration::from_nanos(wait_ns)),
                }
            };
            let got = match sock.recv(&mut rx, mode) {
                Ok(got) => got,
                // An ICMP port unreachable for an earlier request (connected socket):
                // nobody listens there. Counted; the request times out as lost.
                Err(e) if e.transient() == Some(Transient::Refused) => {
                    refused_rx += 1;
                    None
                }
                Err(e) => return Err(e).context("receiving"),
            };
            let now = waiter.now().ns;
            if let Some(info) = got {
                let kernel_rx = info.kernel_rx.map(|k| to_run_clock(&map, k));
                let bytes = rx.get(..info.len).unwrap_or_default();
                if let RrEvent::Answered { seq: s, sample, .. } =
                    state.on_response(now, kernel_rx, bytes)
                {
                    if let Some(sample) = sample {
                        write_sample(&mut samples, &sample)?;
                    }
                    if s == seq {
                        break true;
                    }
                }
            }
            if now >= give_up {
                break false;
            }
            if stop_requested() {
                break 'run;
            }
            wait_ns = give_up.saturating_sub(now).max(1_000);
        };
        if !answered {
            state.on_timeout(seq);
        }

        // The TX timestamp of this request, now that the response is in.
        if support.tx_software {
            while let Some(ts) = sock.poll_tx_timestamp().context("reading TX timestamps")? {
                if let Some(sw) = ts.software {
                    if let Some(s) = state.on_tx_timestamp(ts.id, to_run_clock(&map, sw)) {
                        write_sample(&mut samples, &s)?;
                    }
                }
                if ts.id == seq as u32 {
                    break;
                }
            }
        }
        seq += 1;
        let now = waiter.now().ns;
        if now >= next_remap {
            map = ClockMap::measure(clock_id);
            next_remap = now.saturating_add(REMAP_EVERY.as_nanos());
        }
        advance(&mut schedule, &mut deadline, now);
    }

    // Late TX timestamps, then whatever is still waiting for one.
    if support.tx_software {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(50);
        while state.awaiting_tx() > 0 && std::time::Instant::now() < until {
            match sock.poll_tx_timestamp().context("reading TX timestamps")? {
                Some(ts) => {
                    if let Some(sw) = ts.software {
                        if let Some(s) = state.on_tx_timestamp(ts.id, to_run_clock(&map, sw)) {
                            write_sample(&mut samples, &s)?;
                        }
                    }
                }
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    }
    for s in state.finish() {
        write_sample(&mut samples, &s)?;
    }

    let report = state.report();
    if report.answered == 0 {
        doc.warn(format!(
            "no response came back from {} (is `lockstep probe rr server` running there?)",
            args.to
        ));
    }
    if errors.total > 0 {
        doc.warn(format!(
            "{} requests could not be sent (last error: {})",
            errors.total,
            errors.last.as_deref().unwrap_or("-")
        ));
    }
    if report.lost > 0 {
        doc.warn(format!(
            "{} of {} requests got no response within {}",
            report.lost, report.sent, args.timeout
        ));
    }
    if report.split_without_tx > 0 && !args.no_timestamps {
        doc.warn(format!(
            "{} responses have no client send path and network split (no TX timestamp)",
            report.split_without_tx
        ));
    }
    doc.insert("send_errors", &errors);
    doc.insert("icmp_refused", refused_rx);
    doc.insert("timestamps", &support);
    insert_all(&mut doc, &report);
    let samples_path = match samples.take() {
        Some(w) => Some(w.finish()?),
        None => None,
    };
    let mut lines = vec![
        ("sent", report.sent.to_string()),
        ("answered", report.answered.to_string()),
        ("lost", report.lost.to_string()),
        ("late", report.late.to_string()),
        ("duplicates", report.duplicates.to_string()),
        ("send errors", errors.total.to_string()),
    ];
    if let Some(p) = &samples_path {
        lines.push(("samples", p.display().to_string()));
    }
    let mut text = kv(&lines);
    text.push_str(&dist_table(&[
        ("rtt", &report.rtt),
        ("send path", &report.send_path),
        ("turnaround", &report.turnaround),
        ("rx path", &report.rx_path),
        ("network", &report.network),
    ]));
    for w in &doc.warnings {
        text.push_str(&format!("warning: {w}\n"));
    }
    let crossings = args
        .gates
        .check(report.lost, report.sent, "RTT", &report.rtt);
    let failed = args.gates.record(&mut doc, &crossings);
    out.human(&text);
    out.finish(&doc)?;
    let tried = report.sent + errors.total;
    // Every request failed: none answered and at least one lost or not sent. A run
    // stopped while its only requests were still within their timeout has lost none.
    if report.answered == 0 && report.lost + errors.total > 0 {
        return Err(EnvError(format!(
            "none of the {tried} requests was answered within {} (is `lockstep probe rr server` listening at {}?)",
            args.timeout, args.to
        ))
        .into());
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Moves the schedule to the next request: one gap after the previous slot, or now
/// if the exchange overran it.
fn advance(schedule: &mut Schedule, deadline: &mut i64, now: i64) {
    if let Some(gap) = schedule.next_gap() {
        *deadline = deadline.saturating_add(gap);
        if *deadline < now {
            *deadline = now;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_and_explain() {
        assert_eq!(
            parse_range("1ms..10ms").unwrap(),
            IntervalRange {
                min_ns: 1_000_000,
                max_ns: 10_000_000
            }
        );
        assert_eq!(
            parse_range("1ms").unwrap_err(),
            "expected a range of durations like 1ms..10ms, got \"1ms\""
        );
        assert_eq!(
            parse_range("500ns..1ms").unwrap_err(),
            "expected a range of durations like 1ms..10ms, got \"500ns..1ms\" (500ns is below the limit of 1us)"
        );
        assert_eq!(
            parse_range("1ms..8000000s").unwrap_err(),
            "expected a range of durations like 1ms..10ms, got \"1ms..8000000s\" (8000000s is above the limit of 7 days (604800s))"
        );
        assert_eq!(
            parse_range("5ms..1ms").unwrap_err(),
            "the minimum 5ms is above the maximum 1ms in \"5ms..1ms\""
        );
    }

    #[test]
    fn schedule_never_bursts() {
        let mut s = Schedule::Fixed(100);
        let mut d = 1_000;
        advance(&mut s, &mut d, 1_050);
        assert_eq!(d, 1_100);
        // The exchange overran: the next request leaves now.
        advance(&mut s, &mut d, 5_000);
        assert_eq!(d, 5_000);
        let mut b = Schedule::BackToBack;
        advance(&mut b, &mut d, 9_000);
        assert_eq!(d, 5_000);
    }

    #[test]
    fn random_intervals_are_seeded_and_in_range() {
        let r = IntervalRange {
            min_ns: 1_000,
            max_ns: 2_000,
        };
        let gaps = |seed| {
            let mut s = Schedule::Random(Box::new(rand::rngs::StdRng::seed_from_u64(seed)), r);
            (0..100).map(|_| s.next_gap().unwrap()).collect::<Vec<_>>()
        };
        let a = gaps(7);
        assert_eq!(a, gaps(7));
        assert_ne!(a, gaps(8));
        assert!(a.iter().all(|g| (1_000..=2_000).contains(g)));
    }
}
