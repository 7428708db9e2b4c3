//! The sender role: a thin driver over [`lockstep_core::tdp::Sender`], which holds
//! every decision (which frames, skipped and late frames, DSCP marks, what each
//! probe carries, the wake-up distribution). This file only moves bytes and
//! timestamps.
//!
//! The frames come from the flow rows of `[node]`, repeated every cycle. For each
//! frame the driver waits for its start `t0` with the configured strategy
//! ([`Sender::next_start`]), hands the time it woke to
//! [`Sender::handle_timeout`] and sends what [`Sender::poll_transmit`] hands out,
//! reading the clock for each packet (`t_send`). A packet is sent on its flow's
//! socket, whose DSCP is set whenever the packet's differs (the frame mark in TDP
//! mode, `0x0c` plus the frame and cycle parity bits, unless `live.mark = false`: the
//! first hop is an edge router, which marks). A packet the socket refuses is counted
//! as a send error and handed back ([`Sender::retract`]). A new table from the
//! controller goes to [`Sender::set_schedule`] between two frames.
//!
//! The loop is a few steps ([`Driver::begin`], [`Driver::poll`]: the next frame start
//! or a stop, [`next_step`]; [`Driver::on_time`]: a frame sent; [`Driver::end`]: the
//! files and the outcome) that [`run`] takes with a wait in between, and that a router
//! thread takes for a sender running in it (`lockstep node --config S --config R`,
//! `super::router`), so a sender writes the same files either way. Its sockets are
//! opened in `live.netns` when the file names one.
//!
//! Software TX timestamps (one socket per flow, ids from 0) are matched to the packets
//! they belong to by a [`TxMatcher`] and give the kernel part of `L_Tx`
//! (`tx_kernel − t_wake`) per flow; with `--output` every packet is written to
//! `DIR/<name>-tx.csv` (`flow,seq,frame,t0,t_wake,t_send,tx_kernel`) for the lab to
//! join with the receiver's packets. Nothing allocates per packet.
//!
//! With `live.io` a frame mode (`packet`, `ring`, `ring-v2`, `xdp`) a flow's packets
//! leave as whole Ethernet/IPv4/UDP frames through the frame port of the interface
//! the kernel's route to the destination leaves by, shared by the flows leaving
//! there ([`super::hostio`]): the same payload, addresses, ports (a socket stays
//! bound to the flow's source address and port) and DSCP as the UDP path, to the
//! next hop's MAC from the neighbour table; a frame's packets leave in batches, and
//! the TX timestamps are matched by the flow's sequence number as on the UDP path.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration as StdDuration;

use anyhow::{Context, Result};
use lockstep_core::measure::txmatch::TxMatcher;
use lockstep_core::stats::{Histogram, Summary};
use lockstep_core::tdp::config::Mode;
use lockstep_core::tdp::{NodeConfig, NodeConfigError, Sender, SenderFlow, SenderSchedule};
use lockstep_core::wire::udpframe::UdpFrameHeader;
use lockstep_core::wire::EthernetAddress;
use lockstep_core::Instant;
use lockstep_linux::port::{IoMode, PortSetup};
use lockstep_linux::signal::stop_requested;
use lockstep_linux::udp::{TimestampConfig, UdpSocket};
use lockstep_linux::{iface, route, ClockMap, Waiter};

use serde::Serialize;
use serde_json::{Map, Value};

use super::config::LiveFlow;
use super::{csv, hostio, to_node_clock, Ctx, Outcome, StopReason};
use crate::probe::stream::SendErrors;
use crate::report::SampleWriter;
use crate::{EnvError, UsageError};

/// Sent packets remembered per flow for matching TX timestamps.
const TX_RING: usize = 4096;
/// How long to wait for the last TX timestamps at the end.
const FINAL_DRAIN: StdDuration = StdDuration::from_millis(200);
/// Socket receive buffer: it holds the TX timestamp queue.
const SOCKET_RCVBUF: usize = 1 << 20;

/// What is kept of a sent packet until its TX timestamp comes.
#[derive(Clone, Copy)]
struct Sent {
    seq: u64,
    frame: i64,
    t0: i64,
    t_wake: i64,
    t_send: i64,
}

/// One flow's socket or frame port and what the driver measures of it.
struct FlowIo {
    id: u32,
    dst: SocketAddrV4,
    via: Via,
    /// DSCP currently set on the socket (the kernel's UDP stack).
    dscp: Option<u8>,
    errors: SendErrors,
    tx: TxMatcher<Sent>,
    l_tx: Histogram,
    tx_from_send: Histogram,
}

/// How a flow's packets leave.
enum Via {
    /// The kernel's UDP stack: the flow's connected socket.
    Udp(UdpSocket),
    /// Whole frames through the port of the interface the route leaves by
    /// ([`hostio`]); the bound socket keeps the source port the flow's.
    Frames {
        port: hostio::Shared,
        slot: hostio::Slot,
        header: UdpFrameHeader,
        /// The sequence number of the flow's next packet (the sender's own count).
        next_seq: u64,
        _bound: UdpSocket,
    },
}

impl FlowIo {
    /// Binds the flow's socket and connects it, or opens the frame port of its route
    /// (`live.io`); turns TX timestamps off for good (`tx_ts`) when the socket cannot
    /// have them.
    fn open(ctx: &mut Ctx, lf: &LiveFlow, tx_ts: &mut bool) -> Result<FlowIo> {
        let node = &ctx.file.node;
        // nodefile::check_sender made sure these exist.
        let nf = node
            .flows
            .iter()
            .find(|f| f.id == lf.flow)
            .ok_or_else(|| UsageError(format!("live.flows: unknown flow {}", lf.flow)))?;
        let dst = lf
            .dst
            .or(nf.dst)
            .ok_or_else(|| UsageError(format!("live.flows: flow {} has no dst", lf.flow)))?;
        let src_ip = node
            .ports
            .iter()
            .find(|p| p.id == nf.out_port)
            .map(|p| p.addr)
            .ok_or_else(|| UsageError(format!("node.flows: flow {} has no out_port", nf.id)))?;
        let bind = SocketAddr::V4(SocketAddrV4::new(src_ip, lf.src_port));
        let sock = UdpSocket::bind(bind).map_err(|e| {
            EnvError(format!(
                "flow {}: cannot bind {bind} (is {src_ip} an address of this host or namespace?): {e}",
                lf.flow
            ))
        })?;
        let via = match ctx.file.live.io.and_then(super::frame_mode) {
            Some(mode) => open_frames(ctx, lf, dst, sock, mode, *tx_ts)?,
            None => {
                sock.connect(SocketAddr::V4(dst)).map_err(|e| {
                    EnvError(format!("flow {}: cannot connect to {dst}: {e}", lf.flow))
                })?;
                if *tx_ts && !enable_tx_timestamps(&sock) {
                    ctx.warn("software TX timestamps unavailable: no L_Tx figures");
                    *tx_ts = false;
                }
                Via::Udp(sock)
            }
        };
        Ok(FlowIo {
            id: lf.flow,
            dst,
            via,
            dscp: None,
            errors: SendErrors::default(),
            tx: TxMatcher::new(TX_RING),
            l_tx: preallocated(),
            tx_from_send: preallocated(),
        })
    }

    /// How the flow's packets leave: `udp` or the port's mode.
    fn io_name(&self) -> &'static str {
        match &self.via {
            Via::Udp(_) => "udp",
            Via::Frames { port, .. } => lock(port).mode().name(),
        }
    }

    /// Sends `payload` with `dscp` (a frame port: queues its frame in the port's
    /// batch); `false` when the socket refused it or the frame could not be written
    /// (counted).
    fn send(&mut self, dscp: u8, payload: &[u8]) -> Result<bool> {
        let (port, slot, header, next_seq) = match &mut self.via {
            Via::Udp(sock) => {
                if self.dscp != Some(dscp) {
                    sock.set_dscp(dscp).context("setting the DSCP mark")?;
                    self.dscp = Some(dscp);
                }
                return match sock.send(payload) {
                    Ok(_) => Ok(true),
                    Err(e) => {
                        self.errors.count(&e);
                        Ok(false)
                    }
                };
            }
            Via::Frames {
                port,
                slot,
                header,
                next_seq,
                ..
            } => (port, *slot, &*header, next_seq),
        };
        match lock(port).queue(slot, *next_seq, header, dscp, payload) {
            Ok(true) => {
                *next_seq += 1;
                Ok(true)
            }
            Ok(false) => Ok(false),
            Err(e) => {
                self.errors.count(&e);
                Ok(false)
            }
        }
    }

    /// Sends the frames queued in the flow's port; returns how many of this flow's
    /// frames the device did not take since the last call (counted as send errors).
    fn flush(&mut self) -> Result<u64> {
        let Via::Frames { port, slot, .. } = &self.via else {
            return Ok(0);
        };
        let mut p = lock(port);
        if let Err(e) = p.flush() {
            self.errors.count(&e);
        }
        let refused = p.take_refused(*slot);
        self.errors.count_queue_full(refused);
        Ok(refused)
    }

    /// Remembers a sent packet for its TX timestamp (id: the flow's sequence
    /// number); writes the row of the one it evicts.
    fn note_sent(&mut self, s: Sent, csv: &mut Option<SampleWriter>) -> Result<()> {
        match self.tx.note_sent(s.seq as u32, s) {
            Some(old) => write_row(csv, self.id, &old, None),
            None => Ok(()),
        }
    }

    /// Takes the TX timestamps queued now; returns how many.
    fn drain(&mut self, map: &ClockMap, csv: &mut Option<SampleWriter>) -> Result<u64> {
        if let Via::Frames { port, slot, .. } = &self.via {
            let (port, slot) = (port.clone(), *slot);
            let mut row_err = None;
            let n = lock(&port)
                .timestamps(slot, &mut |seq, sw| {
                    if let Err(e) = self.matched(map, csv, seq as u32, sw) {
                        row_err.get_or_insert(e);
                    }
                })
                .context("reading TX timestamps")?;
            return row_err.map_or(Ok(n), Err);
        }
        let mut n = 0;
        while n <= TX_RING as u64 {
            let Via::Udp(sock) = &self.via else { break };
            let ts = match sock.poll_tx_timestamp() {
                Ok(Some(ts)) => ts,
                Ok(None) => break,
                Err(e) => return Err(e).context("reading TX timestamps"),
            };
            n += 1;
            self.matched(map, csv, ts.id, ts.software)?;
        }
        Ok(n)
    }

    /// A TX timestamp for the packet sent under `id`: its figures and its row.
    fn matched(
        &mut self,
        map: &ClockMap,
        csv: &mut Option<SampleWriter>,
        id: u32,
        sw: Option<lockstep_core::Instant>,
    ) -> Result<()> {
        let Some((s, sw)) = self.tx.on_timestamp(id, sw) else {
            return Ok(());
        };
        let tx = to_node_clock(map, sw);
        self.l_tx.record(tx.saturating_sub(s.t_wake));
        self.tx_from_send.record(tx.saturating_sub(s.t_send));
        write_row(csv, self.id, &s, Some(tx))
    }

    /// Rows of packets whose timestamp never came, in sequence order; returns how
    /// many packets got none (evicted ones included).
    fn flush_unmatched(&mut self, csv: &mut Option<SampleWriter>) -> Result<u64> {
        let id = self.id;
        let mut left = 0;
        for s in self.tx.drain_unmatched() {
            write_row(csv, id, &s, None)?;
            left += 1;
        }
        Ok(left + self.tx.counts().evicted)
    }
}

/// The shared port, also after a thread holding it panicked.
fn lock(port: &hostio::Shared) -> std::sync::MutexGuard<'_, hostio::SendPort> {
    port.lock().unwrap_or_else(|e| e.into_inner())
}

/// A flow sent as whole frames: the route to `dst` from the socket's address, the
/// next hop's MAC, the interface's shared port in `mode`.
fn open_frames(
    ctx: &mut Ctx,
    lf: &LiveFlow,
    dst: SocketAddrV4,
    sock: UdpSocket,
    mode: IoMode,
    tx_ts: bool,
) -> Result<Via> {
    let src = match sock.local_addr() {
        Ok(SocketAddr::V4(a)) => a,
        other => {
            return Err(EnvError(format!(
                "flow {}: no IPv4 source address: {other:?}",
                lf.flow
            ))
            .into())
        }
    };
    let hop = route::resolve(*dst.ip(), Some(*src.ip()))
        .map_err(|e| EnvError(format!("flow {}: live.io {mode}: {e}", lf.flow)))?;
    let ifname = hop.route.ifname.clone();
    let env = |e: &dyn std::fmt::Display| EnvError(format!("flow {}: {ifname}: {e}", lf.flow));
    let src_mac = iface::mac(&ifname).map_err(|e| env(&e))?;
    let frame = hostio::frame_len(lf.size as usize);
    let mtu = iface::mtu(&ifname).map_err(|e| env(&e))? as usize;
    if frame > mtu + 14 {
        return Err(UsageError(format!(
            "flow {}: live.flows size {} B makes {frame}-byte frames, more than the MTU of {ifname} ({mtu} B) carries (the kernel's UDP stack would fragment them; a frame port does not): use io = \"udp\" or a smaller size",
            lf.flow, lf.size
        ))
        .into());
    }
    let setup = PortSetup {
        buffer: 4 << 20,
        qdisc_bypass: ctx.file.live.qdisc_bypass,
        rx_timestamps: false,
        tx_timestamps: tx_ts,
        until_start: false,
    };
    let (port, notes) = hostio::send_port(&ifname, mode, &setup, frame).map_err(|e| {
        if e.is_permission() {
            env(&format!(
                "{e} (frames are written raw: run it as root or with CAP_NET_RAW)"
            ))
        } else {
            env(&e)
        }
    })?;
    for n in notes {
        ctx.warn(n);
    }
    let slot = lock(&port).add_flow();
    ctx.progress(&format!(
        "flow {}: {} frames out of {ifname} to {} ({}), next hop of {dst}",
        lf.flow,
        lock(&port).mode(),
        hop.via,
        iface::format_mac(&hop.mac)
    ));
    let header = UdpFrameHeader {
        src_mac: EthernetAddress(src_mac),
        dst_mac: EthernetAddress(hop.mac),
        src,
        dst,
    };
    Ok(Via::Frames {
        port,
        slot,
        header,
        next_seq: 0,
        _bound: sock,
    })
}

fn enable_tx_timestamps(sock: &UdpSocket) -> bool {
    let _ = sock.set_recv_buffer(SOCKET_RCVBUF);
    let cfg = TimestampConfig {
        tx_software: true,
        rx_software: false,
        hardware: false,
    };
    matches!(sock.enable_timestamping(cfg), Ok(s) if s.tx_software)
}

fn write_row(csv: &mut Option<SampleWriter>, flow: u32, s: &Sent, tx: Option<i64>) -> Result<()> {
    if let Some(w) = csv.as_mut() {
        w.row(&[
            Some(i64::from(flow)),
            i64::try_from(s.seq).ok(),
            Some(s.frame),
            Some(s.t0),
            Some(s.t_wake),
            Some(s.t_send),
            tx,
        ])?;
    }
    Ok(())
}

#[derive(Serialize)]
struct SenderCounters {
    /// Frames in which the sender sent.
    frames: u64,
    /// Sent after the frame's send deadline (in the guard).
    late_frames: u64,
    /// Reached more than a frame late: not sent.
    skipped_frames: u64,
    sent: u64,
    send_errors: u64,
    tx_timestamps: u64,
    tx_timestamps_missing: u64,
}

#[derive(Serialize)]
struct FlowSummary<'a> {
    flow: u32,
    dst: String,
    sent: u64,
    send_errors: &'a SendErrors,
    /// Kernel TX timestamp − `t_wake` (the whole `L_Tx`).
    l_tx: Summary,
    /// Kernel TX timestamp − `t_send` (the kernel part).
    tx_from_send: Summary,
}

/// The sender state machine and the sockets it sends on.
pub(crate) struct Driver {
    sender: Sender,
    /// In the order of `live.flows` (the sender's flow indices).
    flows: Vec<FlowIo>,
    tx_ts: bool,
    csv: Option<SampleWriter>,
    map: ClockMap,
    send_errors: u64,
    tx_timestamps: u64,
    tx_timestamps_missing: u64,
    /// Frames marked for the first hop (`live.mark`, or TDP mode).
    mark: bool,
    tf: lockstep_core::Duration,
    /// The end of its run ([`Ctx::end_for`] of the start), set by [`Driver::begin`].
    end: Option<i64>,
    /// Why and when it stopped, once it has.
    stopped: Option<(StopReason, i64)>,
    /// No frame to send in: when to look for a controller's table next.
    next_table_check: i64,
}

/// What a sender does next ([`next_step`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Wake at this frame start (ns) and send.
    At(i64),
    /// No frame to send in, but a controller may send a table with some.
    NoTable,
    /// Done.
    Stop(StopReason),
}

/// What comes after a frame: the next frame start unless it is at or past the end of
/// the run (`end`) or every flow sent its count (`done`); without frames, the sender
/// is done unless a controller may still send a table.
pub(crate) fn next_step(
    next_start: Option<i64>,
    end: Option<i64>,
    done: bool,
    controller: bool,
) -> Step {
    match next_start {
        None if controller => Step::NoTable,
        None => Step::Stop(StopReason::Count),
        Some(t0) if end.is_some_and(|e| t0 >= e) => Step::Stop(StopReason::Duration),
        Some(_) if done => Step::Stop(StopReason::Count),
        Some(t0) => Step::At(t0),
    }
}

/// How often a sender without frames looks for a controller's table.
const TABLE_WAIT_NS: i64 = 10_000_000;

pub(crate) fn run(ctx: &mut Ctx, waiter: &Waiter) -> Result<(Outcome, Option<i64>)> {
    let mut d = Driver::new(ctx)?;
    ctx.ready()?;
    let _rt = ctx.apply_rt()?;
    let start = ctx.wait_start(waiter);
    if let Some(start) = start {
        d.run(ctx, waiter, start)?;
    }
    let outcome = d.end(ctx, StopReason::Signal, waiter.now().ns)?;
    Ok((outcome, start))
}

/// The sender of `live.flows`. The schedule is checked first, so that its errors
/// name fields of `[node]`; the flows' errors name fields of `[live]`.
fn new_sender(node: &NodeConfig, live: &[LiveFlow], mark: bool) -> Result<Sender> {
    SenderSchedule::from_config(node).map_err(|e| field_error("node", e))?;
    let flows: Vec<SenderFlow> = live
        .iter()
        .map(|lf| SenderFlow {
            id: lf.flow,
            size: lf.size,
            count: lf.count,
        })
        .collect();
    Ok(Sender::new(node, &flows, mark).map_err(|e| field_error("live", e))?)
}

fn field_error(table: &str, e: NodeConfigError) -> UsageError {
    UsageError(format!("{table}.{}: {}", e.field, e.message))
}

/// Opens every flow's socket (in `live.netns` when the file names one); whether TX
/// timestamps are on.
fn open_flows(ctx: &mut Ctx) -> Result<(Vec<FlowIo>, bool)> {
    let live = ctx.file.live.clone();
    let open_all = |ctx: &mut Ctx| -> Result<(Vec<FlowIo>, bool)> {
        let mut tx_ts = live.tx_timestamps;
        let mut flows = Vec::with_capacity(live.flows.len());
        for lf in &live.flows {
            flows.push(FlowIo::open(ctx, lf, &mut tx_ts)?);
        }
        Ok((flows, tx_ts))
    };
    match &live.netns {
        None => open_all(ctx),
        Some(ns) => lockstep_linux::netns::run_in(ns, || open_all(ctx))
            .map_err(|e| EnvError(format!("live.netns: {e}")))?,
    }
}

impl Driver {
    /// The sender of the node file with its sockets open and its `-tx.csv` file
    /// (the sender's part of `run`, and of a router thread's members).
    pub(crate) fn new(ctx: &mut Ctx) -> Result<Driver> {
        let mark = ctx
            .file
            .live
            .mark
            .unwrap_or(ctx.file.node.mode == Mode::Tdp);
        let sender = new_sender(&ctx.file.node, &ctx.file.live.flows, mark)?;
        let tf = sender.schedule().frame_clock().tf();
        let d = Driver::open(ctx, sender, mark, tf)?;
        let targets: Vec<String> = d
            .flows
            .iter()
            .map(|f| format!("flow {} → {}", f.id, f.dst))
            .collect();
        ctx.progress(&format!(
            "sending {} ({})",
            targets.join(", "),
            if mark { "frame-marked" } else { "DSCP 0" }
        ));
        Ok(d)
    }

    /// Opens every flow's socket and the `-tx.csv` file.
    fn open(
        ctx: &mut Ctx,
        sender: Sender,
        mark: bool,
        tf: lockstep_core::Duration,
    ) -> Result<Driver> {
        let (flows, tx_ts) = open_flows(ctx)?;
        let csv = if tx_ts {
            let header = [
                "flow",
                "seq",
                "frame",
                "t0",
                "t_wake",
                "t_send",
                "tx_kernel",
            ];
            csv(ctx, "-tx.csv", &header)?
        } else {
            None
        };
        Ok(Driver {
            sender,
            flows,
            tx_ts,
            csv,
            map: ClockMap::measure(ctx.clock),
            send_errors: 0,
            tx_timestamps: 0,
            tx_timestamps_missing: 0,
            mark,
            tf,
            end: None,
            stopped: None,
            next_table_check: i64::MIN,
        })
    }

    /// The frame loop of a sender on its own, from `start` until a stop: the steps a
    /// router thread takes for its sender members ([`Driver::poll`], [`Driver::on_time`]),
    /// with a wait for each frame start in between.
    fn run(&mut self, ctx: &mut Ctx, waiter: &Waiter, start: i64) -> Result<()> {
        self.begin(ctx, start);
        loop {
            if stop_requested() {
                self.stop(StopReason::Signal, waiter.now().ns);
            }
            if self.stopped.is_some() {
                return Ok(());
            }
            match self.poll(ctx, waiter.now()) {
                Some(t0) => {
                    let woke = waiter.wait_until(t0);
                    self.on_time(ctx, woke)?;
                }
                None if self.stopped.is_none() => {
                    std::thread::sleep(StdDuration::from_nanos(TABLE_WAIT_NS as u64));
                }
                None => {}
            }
        }
    }

    /// Starts the frames at `start`; the run ends at [`Ctx::end_for`] of it (no
    /// linger: a sender stops at `--duration`).
    pub(crate) fn begin(&mut self, ctx: &Ctx, start: i64) {
        self.end = ctx.end_for(start);
        self.sender.start(Instant::new(ctx.clock, start));
    }

    /// The next frame start to wake for; `None` once stopped (the end of its run, its
    /// counts sent: remembered with `now`) or while it waits for a table with frames
    /// from the controller (looked for every 10 ms, a new one applied at once).
    pub(crate) fn poll(&mut self, ctx: &mut Ctx, now: Instant) -> Option<Instant> {
        if self.stopped.is_some() {
            return None;
        }
        let step = |d: &Driver, ctx: &Ctx| {
            let t0 = d.sender.next_start();
            let step = next_step(
                t0.map(|t| t.ns),
                d.end,
                d.sender.done(),
                ctx.controller.is_some(),
            );
            (t0, step)
        };
        let (mut t0, mut next) = step(self, ctx);
        if next == Step::NoTable && self.look_for_table(ctx, now) {
            (t0, next) = step(self, ctx);
        }
        match next {
            Step::At(_) => t0,
            Step::NoTable => None,
            Step::Stop(reason) => {
                self.stop(reason, now.ns);
                None
            }
        }
    }

    /// Without frames: the end of the run stops it; a table with frames from the
    /// controller is applied (`true`).
    fn look_for_table(&mut self, ctx: &mut Ctx, now: Instant) -> bool {
        if self.end.is_some_and(|e| now.ns >= e) {
            self.stop(StopReason::Duration, now.ns);
            return false;
        }
        if now.ns < self.next_table_check {
            return false;
        }
        self.next_table_check = now.ns.saturating_add(TABLE_WAIT_NS);
        match table_update(ctx) {
            Some(s) if s.next_at_or_after(now.ns).is_some() => {
                self.sender.set_schedule(s, now);
                true
            }
            _ => false,
        }
    }

    /// At (or after) a frame start, `woke` the clock's reading: the sender's frame,
    /// its packets sent, the TX timestamps taken; a new table from the controller
    /// applies from the next frame on.
    pub(crate) fn on_time(&mut self, ctx: &mut Ctx, woke: Instant) -> Result<()> {
        self.sender.handle_timeout(woke);
        self.send_frame(ctx.clock)?;
        if self.tx_ts {
            self.drain_outstanding()?;
        }
        if let Some(s) = table_update(ctx) {
            self.sender.set_schedule(s, lockstep_linux::now(ctx.clock));
        }
        Ok(())
    }

    /// Remembers why and when it stopped (the first stop counts).
    fn stop(&mut self, reason: StopReason, now_ns: i64) {
        self.stopped.get_or_insert((reason, now_ns));
    }

    /// Whether it stopped (and drops out of its thread's deadlines).
    pub(crate) fn stopped(&self) -> bool {
        self.stopped.is_some()
    }

    /// After its run: stopped (`reason` at `now_ns` unless it stopped before), the
    /// last TX timestamps, its files, its outcome.
    pub(crate) fn end(
        &mut self,
        ctx: &mut Ctx,
        reason: StopReason,
        now_ns: i64,
    ) -> Result<Outcome> {
        self.stop(reason, now_ns);
        let (stop, stop_ns) = self.stopped.unwrap_or((reason, now_ns));
        self.finish()?;
        self.outcome(ctx, stop, stop_ns)
    }

    /// Its frame length.
    pub(crate) fn tf(&self) -> lockstep_core::Duration {
        self.tf
    }

    /// Sends every packet the sender hands out now, each stamped with the clock
    /// read right before it leaves.
    fn send_frame(&mut self, clock: lockstep_core::ClockId) -> Result<()> {
        while let Some(tx) = self.sender.poll_transmit(lockstep_linux::now(clock)) {
            let sent = Sent {
                seq: tx.seq,
                frame: tx.frame,
                t0: tx.t0.ns,
                t_wake: tx.t_wake.ns,
                t_send: tx.t_send.ns,
            };
            let Some(f) = self.flows.get_mut(tx.index) else {
                continue;
            };
            if !f.send(tx.dscp, tx.payload)? {
                self.sender.retract();
                self.send_errors += 1;
                continue;
            }
            if self.tx_ts {
                f.note_sent(sent, &mut self.csv)?;
            }
        }
        // A frame port sends its batch now (a full batch has left already).
        for f in &mut self.flows {
            self.send_errors += f.flush()?;
        }
        Ok(())
    }

    /// Takes the TX timestamps of the flows that wait for some.
    fn drain_outstanding(&mut self) -> Result<()> {
        for f in &mut self.flows {
            if f.tx.outstanding() > 0 {
                f.drain(&self.map, &mut self.csv)?;
            }
        }
        Ok(())
    }

    /// After the loop: the last TX timestamps (for up to [`FINAL_DRAIN`]), the rows
    /// of packets that got none, the file.
    fn finish(&mut self) -> Result<()> {
        if self.tx_ts {
            let until = std::time::Instant::now() + FINAL_DRAIN;
            while self.flows.iter().any(|f| f.tx.outstanding() > 0)
                && std::time::Instant::now() < until
            {
                let mut got = 0;
                for f in &mut self.flows {
                    got += f.drain(&self.map, &mut self.csv)?;
                }
                if got == 0 {
                    std::thread::sleep(StdDuration::from_millis(1));
                }
            }
            for f in &mut self.flows {
                self.tx_timestamps_missing += f.flush_unmatched(&mut self.csv)?;
                self.tx_timestamps += f.tx.counts().matched;
            }
        }
        if let Some(w) = self.csv.take() {
            w.finish()?;
        }
        Ok(())
    }

    fn counters(&self) -> SenderCounters {
        let c = self.sender.counters();
        SenderCounters {
            frames: c.frames,
            late_frames: c.late_frames,
            skipped_frames: c.skipped_frames,
            sent: c.sent,
            send_errors: self.send_errors,
            tx_timestamps: self.tx_timestamps,
            tx_timestamps_missing: self.tx_timestamps_missing,
        }
    }

    fn warn(&self, ctx: &mut Ctx, c: &SenderCounters, tf: lockstep_core::Duration) {
        if c.skipped_frames > 0 {
            ctx.warn(format!(
                "{} frames skipped: the sender woke more than a frame ({tf}) late",
                c.skipped_frames
            ));
        }
        if c.send_errors > 0 {
            ctx.warn(format!("{} send errors", c.send_errors));
        }
        if self.tx_ts && c.tx_timestamps_missing > 0 {
            ctx.warn(format!(
                "{} packets got no TX timestamp",
                c.tx_timestamps_missing
            ));
        }
    }

    fn flow_summaries(&self) -> Vec<FlowSummary<'_>> {
        self.flows
            .iter()
            .zip(self.sender.sent_per_flow())
            .map(|(f, (_, sent))| FlowSummary {
                flow: f.id,
                dst: f.dst.to_string(),
                sent,
                send_errors: &f.errors,
                l_tx: f.l_tx.summary(),
                tx_from_send: f.tx_from_send.summary(),
            })
            .collect()
    }

    fn outcome(&self, ctx: &mut Ctx, stop: StopReason, stop_ns: i64) -> Result<Outcome> {
        let (tf, mark) = (self.tf, self.mark);
        let c = self.counters();
        self.warn(ctx, &c, tf);
        let wake_s = self.sender.wakeup().summary();
        let summaries = self.flow_summaries();
        let mut dists = vec![("L_I (wake-up)".to_string(), wake_s.clone())];
        for s in &summaries {
            dists.push((format!("L_Tx flow {}", s.flow), s.l_tx.clone()));
        }
        let mut extra = Map::new();
        extra.insert(
            "tx_flows".into(),
            serde_json::to_value(&summaries).unwrap_or(Value::Null),
        );
        extra.insert("mark".into(), Value::Bool(mark));
        let mut io: Vec<&str> = self.flows.iter().map(FlowIo::io_name).collect();
        io.dedup();
        extra.insert("io".into(), Value::String(io.join(",")));
        let lines = vec![
            ("sent", c.sent.to_string()),
            (
                "frames",
                format!(
                    "{} ({} late, {} skipped)",
                    c.frames, c.late_frames, c.skipped_frames
                ),
            ),
            ("send errors", c.send_errors.to_string()),
            (
                "TX timestamps",
                format!("{} ({} missing)", c.tx_timestamps, c.tx_timestamps_missing),
            ),
        ];
        Ok(Outcome {
            counters: serde_json::to_value(&c)?,
            wakeup: Some(wake_s),
            flows: None,
            extra,
            stop,
            stop_ns,
            lines,
            dists,
        })
    }
}

/// The sender's frames from a newer controller table, if one came.
fn table_update(ctx: &mut Ctx) -> Option<SenderSchedule> {
    ctx.schedule_update()?;
    match SenderSchedule::from_config(&ctx.file.node) {
        Ok(s) => Some(s),
        Err(e) => {
            ctx.warn(format!(
                "controller table not applied: node.{}: {}",
                e.field, e.message
            ));
            None
        }
    }
}

fn preallocated() -> Histogram {
    let mut h = Histogram::new();
    h.record(1_000_000_000);
    h.reset();
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sender_sends_until_its_end_or_its_counts() {
        // the next frame start, before the end
        assert_eq!(
            next_step(Some(900), Some(1_000), false, false),
            Step::At(900)
        );
        assert_eq!(next_step(Some(900), None, false, false), Step::At(900));
        // a frame at or past its end: stopped by the duration
        assert_eq!(
            next_step(Some(1_000), Some(1_000), false, false),
            Step::Stop(StopReason::Duration)
        );
        // every count sent
        assert_eq!(
            next_step(Some(900), Some(1_000), true, false),
            Step::Stop(StopReason::Count)
        );
        // no frames: done, unless a controller may send a table with some
        assert_eq!(
            next_step(None, None, false, false),
            Step::Stop(StopReason::Count)
        );
        assert_eq!(next_step(None, Some(1_000), false, true), Step::NoTable);
    }
}
