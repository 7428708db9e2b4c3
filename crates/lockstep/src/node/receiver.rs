//! The receiver role: one UDP socket (`live.bind`), every flow told apart by the
//! probe's flow id, accounted by the sans-IO [`Receiver`] (this file only moves
//! datagrams and timestamps to it and writes the deliveries it hands out).
//!
//! Datagrams are taken in batches (`recvmmsg`, `live.batch` at a time) with software
//! RX timestamps. The application receive time is read once per batch, right after
//! the call returns. With the `spin` strategy the socket is busy-polled; otherwise
//! the receive blocks (in slices of [`BLOCK_SLICE`] so that the end of the run and
//! SIGTERM are noticed). With `samples = true` and `--output`, every probe the
//! receiver hands out as a [`Delivery`](lockstep_core::tdp::Delivery) becomes a row of `DIR/<name>-packets.csv`
//! (the per-packet file, [`crate::report::packets`]).
//!
//! With `live.io` a frame mode (`packet`, `ring`, `ring-v2`, `xdp`) the datagrams
//! come from a frame port on the interface that has `live.bind`'s address instead
//! ([`super::hostio::RecvPort`]): the frames that are UDP to `live.bind` with good
//! checksums go to the same [`Receiver`] with the kernel RX time the port gives
//! (where it gives none, the clock read when the frame was taken: counted in
//! `rx_time_from_clock`, with a warning), the rest are counted by why in
//! `frame_drops`. The socket stays bound, unread, so the kernel's stack does not
//! answer the copies it sees with ICMP port unreachable.

use std::net::SocketAddrV4;

use anyhow::{Context, Result};
use lockstep_core::measure::decomp::{FlowResult, RxCounters};
use lockstep_core::stats::Summary;
use lockstep_core::tdp::Receiver;
use lockstep_core::wire::udpframe::FrameDrops;
use lockstep_core::{ClockId, Duration, Instant};
use lockstep_linux::port::{self, IoChoice, IoMode, PortSetup};
use lockstep_linux::signal::stop_requested;
use lockstep_linux::udp::{RecvMode, TimestampConfig, UdpSocket};
use lockstep_linux::{route, ClockMap, Waiter};
use serde_json::{Map, Value};
use std::os::fd::AsFd;

use super::hostio::RecvPort;
use super::{csv, Ctx, Outcome, StopReason};
use crate::report::human::fmt_ns;
use crate::report::packets::{self, PacketWriter};
use crate::EnvError;

/// How long one blocking receive waits before the loop looks at the clock again.
const BLOCK_SLICE: Duration = Duration::from_millis(20);
/// Receive slot per datagram (jumbo frames fit; longer ones are cut and counted).
const SLOT: usize = 9216;
/// Socket receive buffer asked for.
const SOCKET_RCVBUF: usize = 4 << 20;
/// Re-measure the REALTIME → node clock offset this often.
const REMAP_EVERY_NS: i64 = 1_000_000_000;

pub(crate) fn run(ctx: &mut Ctx, waiter: &Waiter) -> Result<(Outcome, Option<i64>)> {
    let live = ctx.file.live.clone();
    let Some(bind) = live.bind else {
        return Err(crate::UsageError("live.bind: a receiver needs an address".into()).into());
    };
    let mode = live.io.and_then(super::frame_mode);
    let (sock, rx_ts) = open(ctx, bind, mode.is_none())?;
    let frames = mode.map(|m| open_frames(ctx, bind, m)).transpose()?;
    let samples = samples_writer(ctx, live.samples)?;
    let batch = live.batch.min(lockstep_linux::udp::RECV_BATCH_MAX);
    let buf = vec![0u8; SLOT * batch];
    let mode = if live.strategy == lockstep_core::sched::WaitStrategy::Spin {
        RecvMode::Poll
    } else {
        RecvMode::Block {
            timeout: Some(BLOCK_SLICE),
        }
    };

    ctx.ready()?;
    let _rt = ctx.apply_rt()?;
    ctx.progress(&format!(
        "listening on {bind} ({}, {})",
        frames.as_ref().map_or("udp", |f| f.port.mode().name()),
        if mode == RecvMode::Poll {
            "busy-poll"
        } else {
            "blocking"
        }
    ));
    // A receiver does not wait for the start: it takes whatever comes from now on,
    // and its duration runs from the common start.
    let now = waiter.now().ns;
    let start = ctx.start_at_ns.unwrap_or(now);
    let mut d = Driver {
        sock,
        frames,
        rx: Receiver::new(samples.is_some()),
        samples,
        buf,
        mode,
        map: ClockMap::measure(ctx.clock),
    };
    let stop = d.run(ctx.clock, now, ctx.end_for(start))?;
    let stop_ns = waiter.now().ns;
    if let Some(w) = d.samples.take() {
        w.finish()?;
    }
    Ok((d.outcome(ctx, rx_ts, stop, stop_ns)?, Some(start)))
}

/// Binds the socket and, when it is what the receiver reads (`udp`), turns on RX
/// timestamps; says whether it has them. In a frame mode the socket only keeps the
/// kernel's stack from answering the frames it also sees with ICMP port
/// unreachable: its buffer is left small and it is never read.
fn open(ctx: &mut Ctx, bind: SocketAddrV4, udp: bool) -> Result<(UdpSocket, bool)> {
    let sock = UdpSocket::bind(bind.into()).map_err(|e| {
        EnvError(format!(
            "live.bind: cannot listen on {bind} (is {} an address of this host or namespace?): {e}",
            bind.ip()
        ))
    })?;
    if !udp {
        let _ = sock.set_recv_buffer(0);
        return Ok((sock, true));
    }
    if let Err(e) = sock.set_recv_buffer(SOCKET_RCVBUF) {
        ctx.warn(format!("could not enlarge the socket receive buffer: {e}"));
    }
    let rx_ts = match sock.enable_timestamping(TimestampConfig {
        tx_software: false,
        rx_software: true,
        hardware: false,
    }) {
        Ok(s) => {
            for n in s.notes {
                ctx.warn(n);
            }
            s.rx_software
        }
        Err(e) => {
            ctx.warn(format!(
                "software RX timestamps unavailable ({e}): no kernel RX figures"
            ));
            false
        }
    };
    Ok((sock, rx_ts))
}

/// The frame port on the interface that has the receiver's address.
fn open_frames(ctx: &mut Ctx, bind: SocketAddrV4, mode: IoMode) -> Result<RecvPort> {
    let ifname = route::interface_with(*bind.ip())
        .map_err(|e| EnvError(format!("live.bind: live.io {mode}: {e}")))?;
    let setup = PortSetup {
        buffer: SOCKET_RCVBUF,
        qdisc_bypass: false,
        rx_timestamps: true,
        tx_timestamps: false,
        until_start: false,
    };
    let opened = port::open(&ifname, IoChoice::Force(mode), &setup).map_err(|e| {
        let hint = if e.is_permission() {
            " (frames are read raw: run it as root or with CAP_NET_RAW)"
        } else {
            ""
        };
        EnvError(format!("live.io {mode}: {ifname}: {e}{hint}"))
    })?;
    for n in opened.notes {
        ctx.warn(n);
    }
    Ok(RecvPort {
        port: opened.port,
        to: bind,
        drops: FrameDrops::default(),
        clock_rx: 0,
    })
}

/// `DIR/<name>-packets.csv` when `samples = true` and `--output` was given.
fn samples_writer(ctx: &mut Ctx, samples: bool) -> Result<Option<PacketWriter>> {
    if !samples {
        return Ok(None);
    }
    let header = packets::header();
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let w = csv(ctx, "-packets.csv", &header)?;
    if w.is_none() {
        ctx.warn("samples = true needs --output DIR: no per-packet file written");
    }
    Ok(w.map(PacketWriter::over))
}

/// The socket or frame port, the receiver state machine and the per-packet file.
struct Driver {
    sock: UdpSocket,
    /// In a frame mode: the port the datagrams are read from (`sock` is not read).
    frames: Option<RecvPort>,
    rx: Receiver,
    samples: Option<PacketWriter>,
    /// Receive slots, [`SLOT`] bytes each.
    buf: Vec<u8>,
    mode: RecvMode,
    /// REALTIME → node clock, re-measured every [`REMAP_EVERY_NS`].
    map: ClockMap,
}

impl Driver {
    /// Receives until `end` or a signal.
    fn run(&mut self, clock: ClockId, now: i64, end: Option<i64>) -> Result<StopReason> {
        let mut next_remap = now.saturating_add(REMAP_EVERY_NS);
        loop {
            if stop_requested() {
                return Ok(StopReason::Signal);
            }
            let app_rx = self.receive_batch(clock)?;
            let now = app_rx.unwrap_or_else(|| lockstep_linux::now(clock).ns);
            if end.is_some_and(|e| now >= e) {
                return Ok(StopReason::Duration);
            }
            if now >= next_remap {
                self.map = ClockMap::measure(clock);
                next_remap = now.saturating_add(REMAP_EVERY_NS);
            }
            if self.mode == RecvMode::Poll && app_rx.is_none() {
                std::hint::spin_loop();
            }
        }
    }

    /// One `recvmmsg`: every datagram goes to the receiver, every delivery it hands
    /// out to the per-packet file. Returns the application receive time (read once,
    /// when the first datagram is looked at), `None` when nothing came.
    fn receive_batch(&mut self, clock: ClockId) -> Result<Option<i64>> {
        if self.frames.is_some() {
            return self.receive_frames(clock);
        }
        let Driver {
            sock,
            rx,
            samples,
            buf,
            mode,
            map,
            ..
        } = self;
        let mut app_rx: Option<Instant> = None;
        let mut err = None;
        sock.recv_batch(buf, SLOT, *mode, |data, info| {
            let app = *app_rx.get_or_insert_with(|| lockstep_linux::now(clock));
            if info.truncated {
                rx.accounts_mut().note_truncated();
            }
            let kernel = info.kernel_rx.map(|k| map.to_target(k.ns));
            rx.handle_packet(app, kernel, data);
            while let Some(d) = rx.poll_event() {
                if let Some(w) = samples.as_mut() {
                    if let Err(e) = w.write(&d) {
                        err.get_or_insert(e);
                    }
                }
            }
        })
        .context("receiving")?;
        match err {
            Some(e) => Err(e),
            None => Ok(app_rx.map(|t| t.ns)),
        }
    }

    /// Up to `live.batch` frames from the port (after waiting up to
    /// [`BLOCK_SLICE`] for one unless busy-polling): the datagrams for the receiver
    /// go to it as [`Driver::receive_batch`] hands them, the rest are counted.
    fn receive_frames(&mut self, clock: ClockId) -> Result<Option<i64>> {
        let Driver {
            frames: Some(fp),
            rx,
            samples,
            buf,
            mode,
            map,
            ..
        } = self
        else {
            return Ok(None);
        };
        if let RecvMode::Block { timeout } = *mode {
            let ready = lockstep_linux::udp::wait_readable(fp.port.as_fd(), timeout)
                .context("waiting for frames")?;
            if !ready {
                return Ok(None);
            }
        }
        let batch = (buf.len() / SLOT).max(1);
        let mut app_rx: Option<Instant> = None;
        let mut err = None;
        let mut clock_rx = 0;
        fp.recv(batch, &mut |data, kernel_rx| {
            let app = *app_rx.get_or_insert_with(|| lockstep_linux::now(clock));
            let kernel = match kernel_rx {
                Some(k) => map.to_target(k.ns),
                None => {
                    clock_rx += 1;
                    lockstep_linux::now(clock)
                }
            };
            rx.handle_packet(app, Some(kernel), data);
            while let Some(d) = rx.poll_event() {
                if let Some(w) = samples.as_mut() {
                    if let Err(e) = w.write(&d) {
                        err.get_or_insert(e);
                    }
                }
            }
        })
        .context("receiving frames")?;
        fp.clock_rx += clock_rx;
        match err {
            Some(e) => Err(e),
            None => Ok(app_rx.map(|t| t.ns)),
        }
    }

    fn outcome(
        &self,
        ctx: &mut Ctx,
        rx_ts: bool,
        stop: StopReason,
        stop_ns: i64,
    ) -> Result<Outcome> {
        let acc = self.rx.accounts();
        let c = acc.counters();
        let flows = acc.report(&ctx.file.live.names, &ctx.file.node.name);
        warn(ctx, c, &flows, rx_ts);
        let (lines, dists) = summary(c, &flows);
        let flows_value: Map<String, Value> = flows
            .iter()
            .map(|f| {
                (
                    f.flow.to_string(),
                    serde_json::to_value(f).unwrap_or(Value::Null),
                )
            })
            .collect();
        let mut extra = Map::new();
        extra.insert("rx_timestamps".into(), Value::Bool(rx_ts));
        let io = self.frames.as_ref().map_or("udp", |f| f.port.mode().name());
        extra.insert("io".into(), Value::String(io.into()));
        if let Some(f) = &self.frames {
            warn_frames(ctx, f);
            extra.insert("frame_drops".into(), serde_json::to_value(f.drops)?);
            extra.insert("rx_time_from_clock".into(), Value::from(f.clock_rx));
        }
        extra.insert(
            "clock_map_uncertainty_ns".into(),
            Value::from(self.map.uncertainty_ns()),
        );
        Ok(Outcome {
            counters: serde_json::to_value(c)?,
            wakeup: None,
            flows: Some(Value::Object(flows_value)),
            extra,
            stop,
            stop_ns,
            lines,
            dists,
        })
    }
}

fn warn(ctx: &mut Ctx, c: &RxCounters, flows: &[FlowResult], rx_ts: bool) {
    if c.intake.probes == 0 {
        ctx.warn("no probe packet arrived");
    }
    if rx_ts && c.intake.probes > 0 && flows.iter().all(|f| f.decomposition.l_rx.count == 0) {
        ctx.warn("the kernel gave no RX timestamps: no kernel figures");
    }
    if c.intake.foreign + c.intake.invalid.total() + c.truncated > 0 {
        ctx.warn(format!(
            "ignored {} foreign datagrams, {} invalid probes ({} cut to {SLOT} bytes)",
            c.intake.foreign,
            c.intake.invalid.total(),
            c.truncated
        ));
    }
}

/// What a frame port dropped, and frames without a kernel RX time.
fn warn_frames(ctx: &mut Ctx, f: &RecvPort) {
    let d = &f.drops;
    if d.broken() > 0 {
        ctx.warn(format!(
            "dropped {} frames with a bad checksum and {} malformed ones",
            d.bad_checksum, d.malformed
        ));
    }
    if f.clock_rx > 0 {
        ctx.warn(format!(
            "{} frames came without a kernel RX time ({} port): their kernel receive time is the clock read when they were taken (L_Rx then counts from there)",
            f.clock_rx,
            f.port.mode()
        ));
    }
}

type Lines = Vec<(&'static str, String)>;

/// The lines and distributions of the human summary.
fn summary(c: &RxCounters, flows: &[FlowResult]) -> (Lines, Vec<(String, Summary)>) {
    let mut lines = vec![
        (
            "received",
            format!(
                "{} probes ({} datagrams)",
                c.intake.probes, c.intake.datagrams
            ),
        ),
        (
            "foreign/invalid",
            format!("{}/{}", c.intake.foreign, c.intake.invalid.total()),
        ),
    ];
    let mut dists = Vec::new();
    for f in flows {
        lines.push((
            "flow",
            format!(
                "{}: {} received, {} lost, {} reordered, jitter (max−min) {}",
                f.flow,
                f.seq.received,
                f.seq.lost,
                f.seq.reordered,
                f.latency
                    .jitter_ns
                    .map(fmt_ns)
                    .unwrap_or_else(|| "-".into())
            ),
        ));
        dists.push((format!("L flow {}", f.flow), f.latency.clone()));
        for comp in &f.components {
            dists.push((format!("  {}", comp.name), comp.summary.clone()));
        }
    }
    (lines, dists)
}
