//! The sender role: UDP probe packets at the start of each flow's reserved frames.
//!
//! The frames come from [`SenderSchedule`] (the flow rows of `[node]`, repeated every
//! cycle). For each such frame the sender waits for its start `t0` with the
//! configured strategy, reads the clock (`t_wake`: `L_I = t_wake − t0` is recorded
//! for every frame it woke for, skipped ones included: the `wakeup` distribution),
//! and sends each flow's packets of that
//! frame: probe packets carrying seq, frame, `t0`, `t_wake` and `t_send` (read right
//! before `send`), of `size` bytes (room for hop records). In TDP mode the DSCP is
//! the frame mark (`0x0c` plus the frame and cycle parity bits), unless
//! `live.mark = false` (the first hop is an edge router, which marks).
//!
//! A frame the sender reaches more than one whole frame late is skipped (its mark
//! would be stale; counted as `skipped_frames`); one reached after its send deadline
//! but within the frame is sent and counted as `late_frames`. Sequence numbers count
//! packets sent, so skipped frames are not losses.
//!
//! Software TX timestamps (one socket per flow, ids from 0) are matched to the packets
//! they belong to through a ring and give the kernel part of `L_Tx`
//! (`tx_kernel − t_wake`) per flow; with `--output` every packet is written to
//! `DIR/<name>-tx.csv` (`flow,seq,frame,t0,t_wake,t_send,tx_kernel`) for the lab to
//! join with the receiver's packets. Nothing allocates per packet.

use std::net::{SocketAddr, SocketAddrV4};
use std::time::Duration as StdDuration;

use anyhow::{Context, Result};
use lockstep_core::stats::{Histogram, Summary};
use lockstep_core::tdp::config::Mode;
use lockstep_core::tdp::SenderSchedule;
use lockstep_core::wire::{ProbePacket, ProbeRepr};
use lockstep_core::Instant;
use lockstep_linux::signal::stop_requested;
use lockstep_linux::udp::{TimestampConfig, UdpSocket};
use lockstep_linux::{ClockMap, Waiter};
use serde::Serialize;
use serde_json::{Map, Value};

use super::{csv, to_node_clock, Ctx, Outcome, StopReason};
use crate::probe::stream::SendErrors;
use crate::report::SampleWriter;
use crate::{EnvError, UsageError};

/// Sent packets remembered per flow for matching TX timestamps.
const TX_RING: usize = 4096;
/// How long to wait for the last TX timestamps at the end.
const FINAL_DRAIN: StdDuration = StdDuration::from_millis(200);
/// Socket receive buffer: it holds the TX timestamp queue.
const SOCKET_RCVBUF: usize = 1 << 20;

#[derive(Clone, Copy, Default)]
struct Sent {
    used: bool,
    id: u32,
    seq: u64,
    frame: i64,
    t0: i64,
    t_wake: i64,
    t_send: i64,
}

/// One flow's socket and bookkeeping.
struct FlowTx {
    id: u32,
    dst: SocketAddrV4,
    sock: UdpSocket,
    buf: Vec<u8>,
    count: Option<u64>,
    /// DSCP currently set on the socket.
    dscp: Option<u8>,
    seq: u64,
    errors: SendErrors,
    ring: Vec<Sent>,
    l_tx: Histogram,
    tx_from_send: Histogram,
    matched: u64,
    unmatched: u64,
    evicted: u64,
}

impl FlowTx {
    fn done(&self) -> bool {
        self.count.is_some_and(|c| self.seq >= c)
    }

    fn outstanding(&self) -> u64 {
        self.seq
            .saturating_sub(self.matched + self.unmatched + self.evicted)
    }

    fn note_sent(&mut self, s: Sent, csv: &mut Option<SampleWriter>) -> Result<()> {
        let idx = s.id as usize % TX_RING;
        let old = std::mem::replace(&mut self.ring[idx], s);
        if old.used {
            self.evicted += 1;
            write_row(csv, self.id, &old, None)?;
        }
        Ok(())
    }

    /// Takes the TX timestamps queued now; returns how many.
    fn drain(&mut self, map: &ClockMap, csv: &mut Option<SampleWriter>) -> Result<u64> {
        let mut n = 0;
        while n <= TX_RING as u64 {
            let ts = match self.sock.poll_tx_timestamp() {
                Ok(Some(ts)) => ts,
                Ok(None) => break,
                Err(e) => return Err(e).context("reading TX timestamps"),
            };
            n += 1;
            let idx = ts.id as usize % TX_RING;
            let s = self.ring[idx];
            let Some(sw) = ts.software else { continue };
            if !s.used || s.id != ts.id {
                self.unmatched += 1;
                continue;
            }
            self.ring[idx].used = false;
            self.matched += 1;
            let tx = to_node_clock(map, sw);
            self.l_tx.record(tx.saturating_sub(s.t_wake));
            self.tx_from_send.record(tx.saturating_sub(s.t_send));
            write_row(csv, self.id, &s, Some(tx))?;
        }
        Ok(n)
    }

    /// Rows of packets whose timestamp never came, in sequence order.
    fn flush_unmatched(&mut self, csv: &mut Option<SampleWriter>) -> Result<u64> {
        let mut left: Vec<Sent> = self.ring.iter().filter(|s| s.used).copied().collect();
        left.sort_unstable_by_key(|s| s.seq);
        for s in &left {
            write_row(csv, self.id, s, None)?;
        }
        self.ring.iter_mut().for_each(|s| s.used = false);
        Ok(left.len() as u64 + self.evicted)
    }
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

pub(crate) fn run(ctx: &mut Ctx, waiter: &Waiter) -> Result<(Outcome, Option<i64>)> {
    let node = ctx.file.node.clone();
    let live = ctx.file.live.clone();
    let mut sched = SenderSchedule::from_config(&node)
        .map_err(|e| UsageError(format!("node.{}: {}", e.field, e.message)))?;
    let fclock = *sched.frame_clock();
    let tf = fclock.tf().as_nanos();
    let mark = live.mark.unwrap_or(node.mode == Mode::Tdp);

    let mut flows = Vec::with_capacity(live.flows.len());
    let mut tx_ts = live.tx_timestamps;
    for lf in &live.flows {
        // config::check_sender made sure these exist.
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
        sock.connect(SocketAddr::V4(dst))
            .map_err(|e| EnvError(format!("flow {}: cannot connect to {dst}: {e}", lf.flow)))?;
        if tx_ts {
            let _ = sock.set_recv_buffer(SOCKET_RCVBUF);
            match sock.enable_timestamping(TimestampConfig {
                tx_software: true,
                rx_software: false,
                hardware: false,
            }) {
                Ok(s) if s.tx_software => {}
                Ok(_) | Err(_) => {
                    ctx.warn("software TX timestamps unavailable: no L_Tx figures");
                    tx_ts = false;
                }
            }
        }
        let mut buf = vec![0u8; lf.size as usize];
        ProbeRepr {
            flow_id: lf.flow,
            total_len: lf.size,
            ..ProbeRepr::default()
        }
        .emit_into(&mut buf)
        .map_err(|e| UsageError(format!("live.flows: flow {}: {e}", lf.flow)))?;
        flows.push(FlowTx {
            id: lf.flow,
            dst,
            sock,
            buf,
            count: lf.count,
            dscp: None,
            seq: 0,
            errors: SendErrors::default(),
            ring: vec![Sent::default(); TX_RING],
            l_tx: preallocated(),
            tx_from_send: preallocated(),
            matched: 0,
            unmatched: 0,
            evicted: 0,
        });
    }
    let mut csv = if tx_ts {
        csv(
            ctx,
            "-tx.csv",
            &[
                "flow",
                "seq",
                "frame",
                "t0",
                "t_wake",
                "t_send",
                "tx_kernel",
            ],
        )?
    } else {
        None
    };
    let map = ClockMap::measure(ctx.clock);
    let mut wakeup = preallocated();
    let mut c = SenderCounters {
        frames: 0,
        late_frames: 0,
        skipped_frames: 0,
        sent: 0,
        send_errors: 0,
        tx_timestamps: 0,
        tx_timestamps_missing: 0,
    };

    ctx.ready()?;
    let _rt = ctx.apply_rt()?;
    let targets: Vec<String> = flows
        .iter()
        .map(|f| format!("flow {} → {}", f.id, f.dst))
        .collect();
    ctx.progress(&format!(
        "sending {} ({})",
        targets.join(", "),
        if mark { "frame-marked" } else { "DSCP 0" }
    ));

    let start = ctx.wait_start(waiter);
    let mut stop = StopReason::Signal;
    if let Some(start) = start {
        let end = ctx.end_for(start);
        let mut next = sched.next_at_or_after(start);
        stop = loop {
            let Some(sf) = next else {
                // With a controller, an empty table waits for one.
                match wait_for_table(ctx, waiter, end) {
                    Ok(s) => {
                        sched = s;
                        next = sched.next_at_or_after(waiter.now().ns);
                        continue;
                    }
                    Err(reason) => break reason,
                }
            };
            if stop_requested() {
                break StopReason::Signal;
            }
            if end.is_some_and(|e| sf.start_ns >= e) {
                break StopReason::Duration;
            }
            if flows.iter().all(FlowTx::done) {
                break StopReason::Count;
            }
            let wake = waiter.wait_until(Instant::new(ctx.clock, sf.start_ns)).ns;
            let late = wake.saturating_sub(sf.start_ns);
            wakeup.record(late);
            if late >= tf {
                // The frame is over: its packets would carry a stale mark.
                c.skipped_frames += 1;
                next = sched.next_at_or_after(wake);
                continue;
            }
            c.frames += 1;
            if fclock.send_deadline(sf.frame).is_some_and(|d| wake > d) {
                c.late_frames += 1;
            }
            let dscp = if mark { fclock.dscp(sf.frame) } else { 0 };
            for e in sf.entries {
                let Some(f) = flows.iter_mut().find(|f| f.id == e.flow) else {
                    continue;
                };
                if f.dscp != Some(dscp) {
                    f.sock.set_dscp(dscp).context("setting the DSCP mark")?;
                    f.dscp = Some(dscp);
                }
                for _ in 0..e.packets {
                    if f.done() {
                        break;
                    }
                    let mut pkt = ProbePacket::new_unchecked(&mut f.buf[..]);
                    pkt.set_seq(f.seq);
                    pkt.set_frame(sf.frame);
                    pkt.set_t0_ns(sf.start_ns);
                    pkt.set_t_wake_ns(wake);
                    pkt.set_t_send_ns(0);
                    pkt.fill_checksum();
                    let t_send = waiter.now().ns;
                    pkt.set_t_send_ns_and_checksum(t_send);
                    match f.sock.send(&f.buf) {
                        Ok(_) => {
                            let s = Sent {
                                used: true,
                                id: f.seq as u32,
                                seq: f.seq,
                                frame: sf.frame,
                                t0: sf.start_ns,
                                t_wake: wake,
                                t_send,
                            };
                            f.seq += 1;
                            c.sent += 1;
                            if tx_ts {
                                f.note_sent(s, &mut csv)?;
                            } else {
                                write_row(&mut csv, f.id, &s, None)?;
                            }
                        }
                        Err(e) => {
                            f.errors.count(&e);
                            c.send_errors += 1;
                        }
                    }
                }
            }
            if tx_ts {
                for f in &mut flows {
                    if f.outstanding() > 0 {
                        f.drain(&map, &mut csv)?;
                    }
                }
            }
            // Between two frames: a new table from the controller applies from the
            // next frame on.
            let last = sf.frame;
            if let Some(s) = table_update(ctx) {
                sched = s;
            }
            next = sched.after(last);
        };
    }
    let stop_ns = waiter.now().ns;

    if tx_ts {
        let until = std::time::Instant::now() + FINAL_DRAIN;
        while flows.iter().any(|f| f.outstanding() > 0) && std::time::Instant::now() < until {
            let mut got = 0;
            for f in &mut flows {
                got += f.drain(&map, &mut csv)?;
            }
            if got == 0 {
                std::thread::sleep(StdDuration::from_millis(1));
            }
        }
        for f in &mut flows {
            c.tx_timestamps_missing += f.flush_unmatched(&mut csv)?;
            c.tx_timestamps += f.matched;
        }
    }
    if let Some(w) = csv.take() {
        w.finish()?;
    }
    if c.skipped_frames > 0 {
        ctx.warn(format!(
            "{} frames skipped: the sender woke more than a frame ({}) late",
            c.skipped_frames,
            fclock.tf()
        ));
    }
    if c.send_errors > 0 {
        ctx.warn(format!("{} send errors", c.send_errors));
    }
    if tx_ts && c.tx_timestamps_missing > 0 {
        ctx.warn(format!(
            "{} packets got no TX timestamp",
            c.tx_timestamps_missing
        ));
    }

    let wake_s = wakeup.summary();
    let summaries: Vec<FlowSummary> = flows
        .iter()
        .map(|f| FlowSummary {
            flow: f.id,
            dst: f.dst.to_string(),
            sent: f.seq,
            send_errors: &f.errors,
            l_tx: f.l_tx.summary(),
            tx_from_send: f.tx_from_send.summary(),
        })
        .collect();
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
    Ok((
        Outcome {
            counters: serde_json::to_value(&c)?,
            wakeup: Some(wake_s),
            flows: None,
            extra,
            stop,
            stop_ns,
            lines,
            dists,
        },
        start,
    ))
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

/// No frame to send in: without a controller the sender is done; with one it waits
/// (checking every 10 ms) for a table with frames, the end of the run or a signal.
fn wait_for_table(
    ctx: &mut Ctx,
    waiter: &Waiter,
    end: Option<i64>,
) -> Result<SenderSchedule, StopReason> {
    if ctx.controller.is_none() {
        return Err(StopReason::Count);
    }
    loop {
        if stop_requested() {
            return Err(StopReason::Signal);
        }
        let now = waiter.now().ns;
        if end.is_some_and(|e| now >= e) {
            return Err(StopReason::Duration);
        }
        if let Some(s) = table_update(ctx) {
            if s.next_at_or_after(now).is_some() {
                return Ok(s);
            }
        }
        std::thread::sleep(StdDuration::from_millis(10));
    }
}

fn preallocated() -> Histogram {
    let mut h = Histogram::new();
    h.record(1_000_000_000);
    h.reset();
    h
}
