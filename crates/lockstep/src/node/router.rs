//! The edge and core roles: a user-space router on AF_PACKET sockets, one per port,
//! driving the sans-IO [`Node`].
//!
//! One thread runs one router, or several (`lockstep node --config A --config B`,
//! what `lockstep lab` does by default): each router opens its ports in its own
//! namespace (`live.netns`), then the one loop below waits on every port of every
//! router with one `ppoll` and handles the earliest frame start of them all. On a
//! small host this is one wake-up per frame for all routers instead of one per
//! router, and no router waits for a CPU another router holds.
//!
//! A thread can run senders too (a sender's file among the routers': it joins the
//! thread of the first router listed after it, [`thread_of`]). A sender member is the
//! standalone sender's own driver ([`sender::Driver`]) taken step by step: its next
//! frame start is one more deadline of the loop, at it the member sends its frame
//! (and takes its TX timestamps), and it drops out of the deadlines once it stops (its
//! own end, `--sender-duration`, or its counts). Right after a member sent, the loop
//! receives on every port: the kernel hands a frame written into a veth to the
//! namespace at its other end on the sending CPU, during the send, so the edge router
//! takes it in the same turn, without a wake-up of another thread.
//!
//! # The frame loop
//!
//! ```text
//! wait for the start (--start-at-ns)
//! loop {
//!     senders              each member whose frame start has passed sends its frame;
//!                          if one did, receive on every port at once
//!     tick(now)            if the node's poll_timeout() has passed: handle_timeout(now)
//!                          and record the frame-timer wake-up latency now − frame start
//!     flush(now)           poll_transmit() until None, sendmmsg per port in batches
//!     deadline = min(poll_timeout() of every router, next frame start of every
//!                    sender, end of run, now + HOUSEKEEPING)
//!     now = run_until(deadline)
//! }
//! ```
//!
//! A router must receive packets between frame starts, so `run_until` is not a plain
//! sleep: `lockstep_linux::Waiter` (used for the start) cannot watch sockets while it
//! waits. The same three strategies, with the sockets watched. Until the clock reads
//! `deadline` it repeats:
//!
//! 1. **wait** — `sleep`: `ppoll` on all port sockets with a timeout up to the
//!    deadline (a packet ends it early); `hybrid`: the same up to the deadline minus a
//!    spin margin, then busy-polling (the margin adapts to the `ppoll` overshoot this
//!    host shows, as the hybrid `Waiter` does, capped at 1/4 of a frame, unless
//!    `live.fixed_margin`); `spin`: no wait, busy-polling all the way. Before a
//!    deadline that is no frame start (FIFO mode, housekeeping) hybrid just sleeps.
//! 2. **receive** — every port without blocking, `live.batch` frames at a time
//!    through [`FramePort`] (`--io`: `recvmmsg` on a packet socket, or straight out
//!    of a receive ring shared with the kernel); before each batch, `tick` (a frame start that has passed is handled
//!    first, so packets are never processed in a frame the node has not started);
//!    each frame goes to `handle_packet` with its kernel RX timestamp (converted from
//!    `CLOCK_REALTIME` to the node's clock) and the application receive time (one
//!    clock reading per batch). A batch that gives a router a frame start before
//!    the deadline (an idle router's first packet) ends the wait: the loop plans
//!    again.
//! 3. **forward** — `flush`: whatever may leave now leaves now (FIFO mode: everything;
//!    TDP: best effort in the unused part of the frame).
//! 4. **TX timestamps** — only probes ask for one (a control message on the probe's
//!    message of the `sendmmsg`); data frames never do, so forwarding them costs no
//!    error-queue entry and no read. The timestamps are drained from the error
//!    queues of the ports with probes outstanding (`recvmmsg`, a batch of entries per
//!    call); a probe's kernel TX time is matched to it by the socket's counter of
//!    stamped frames (`SOF_TIMESTAMPING_OPT_ID`) through a [`TxMatcher`] per port.
//!
//! The wake-up latency of every frame start — the first clock reading at or after the
//! frame start, minus the frame start — is recorded in a histogram (`wakeup`), so the
//! node reports how late it started each frame, processing of a packet batch that
//! straddled the start included.
//!
//! # Details
//!
//! - Frames the kernel left with an unfinished L4 checksum (`TP_STATUS_CSUMNOTREADY`,
//!   offloads on) are finished (UDP and TCP) in a scratch buffer before the node sees
//!   them; frames longer than the receive slot are counted and dropped.
//! - A short `sendmmsg` means the device dropped the next frame (`ENOBUFS`): it is
//!   counted (`tx_device_drops`) and the rest is sent.
//! - Nothing allocates per packet: receive slots, send batches, the TX timestamp ring
//!   and the histograms are sized at start; packet buffers come from the node's pool
//!   and go back to it after sending.
//! - With `--output`, every probe forwarded is a row of `DIR/<name>-tx.csv`:
//!   `flow,seq,port,kind,frame,rx_kernel,rx_app,tx_app,tx_kernel` (`kind`: 0 reserved,
//!   1 best effort).
//! - The kernel's own IPv4 forwarding must be off in the namespace (it would forward
//!   every packet a second time): the router refuses to start otherwise.

use std::os::fd::AsFd;

use anyhow::{Context, Result};
use lockstep_core::margin::MarginTuner;
use lockstep_core::measure::txmatch::TxMatcher;
use lockstep_core::sched::WaitStrategy;
use lockstep_core::stats::{Histogram, Summary};
use lockstep_core::tdp::config::{NodeConfig, Role};
use lockstep_core::tdp::node::{Node, RxMeta, TxKind};
use lockstep_core::tdp::PacketBuf;
use lockstep_core::wire::checksum::{fold, ones_complement_sum};
use lockstep_core::wire::{
    EtherType, EthernetFrame, Ipv4Packet, ProbePacket, UdpPacket, MAGIC, PROTO_TCP, PROTO_UDP,
};
use lockstep_core::{ClockId, Duration, Instant};
use lockstep_linux::packet::{PacketError, BATCH_MAX};
use lockstep_linux::poll::Poller;
use lockstep_linux::port::{self, FramePort, IoChoice, PortError, PortSetup};
use lockstep_linux::signal::stop_requested;
use lockstep_linux::udp::Transient;

use lockstep_linux::wait::{MARGIN_SLACK, MAX_ADAPTIVE_MARGIN, MIN_ADAPTIVE_MARGIN};
use lockstep_linux::{ClockMap, Waiter};
use serde::Serialize;
use serde_json::{Map, Value};

use super::config::LiveConfig;
use super::{csv, sender, to_node_clock, Ctx, Outcome, StopReason};
use crate::report::SampleWriter;
use crate::{EnvError, UsageError};

/// Receive slot per frame: any frame of a 1500-byte MTU link, VLAN tag included.
const SLOT: usize = port::SLOT;
/// Probes remembered per port for matching TX timestamps.
const TX_RING: usize = 4096;
/// The loop looks at the stop flag and the end of the run at least this often.
const HOUSEKEEPING_NS: i64 = 50_000_000;
/// Socket buffers asked for (the receive buffer also holds the TX timestamp queue).
const SOCKET_BUF: usize = 4 << 20;
/// Look for a new table from the controller this often.
const TABLE_CHECK_NS: i64 = 100_000_000;
/// Re-measure the REALTIME → node clock offset this often.
const REMAP_EVERY_NS: i64 = 1_000_000_000;

/// A forwarded probe waiting for its TX timestamp.
#[derive(Clone, Copy)]
struct TxMeta {
    flow: u32,
    seq: u64,
    reserved: bool,
    frame: Option<i64>,
    rx_kernel: i64,
    rx_app: i64,
    tx_app: i64,
}

/// What the driver counts per port (the node counts the rest).
#[derive(Clone, Debug, Default, Serialize)]
struct DriverCounters {
    port: u16,
    ifname: String,
    rx_frames: u64,
    rx_batches: u64,
    /// Longer than the receive slot: dropped.
    rx_truncated: u64,
    /// Unfinished L4 checksums finished here.
    csum_finished: u64,
    /// Arrived with a VLAN tag stripped by the NIC (forwarded untagged).
    vlan_stripped: u64,
    /// Dropped by the socket's receive queue (PACKET_STATISTICS).
    rx_socket_drops: u64,
    /// Receives that found the interface down (ENETDOWN): the router waits for it
    /// to come back.
    rx_link_down: u64,
    tx_frames: u64,
    tx_batches: u64,
    /// Not taken by the device (ENOBUFS).
    tx_device_drops: u64,
    tx_errors: u64,
    tx_timestamps: u64,
    /// Probes whose TX timestamp never came.
    tx_timestamps_missing: u64,
}

struct PortIo {
    id: lockstep_core::net::PortId,
    /// The port's frames in and out (`--io`).
    port: Box<dyn FramePort>,
    out: Vec<PacketBuf>,
    out_meta: Vec<Option<TxMeta>>,
    /// The socket's TX timestamp id of the next probe sent (only probes ask for one).
    next_id: u32,
    /// Probes sent whose timestamps have not been drained.
    outstanding: u64,
    /// Probes sent, by timestamp id, until their TX timestamp comes.
    tx: TxMatcher<TxMeta>,
    /// Kernel TX timestamp − application send time of probes.
    tx_path: Histogram,
    c: DriverCounters,
    /// The last `ppoll` saw data to read (always true when busy-polling): only such
    /// ports are read, so a wake-up for one packet costs one `recvmmsg`, not one per
    /// port of every router.
    readable: bool,
    /// The last `ppoll` saw an error on the port (an error-queue entry, or the
    /// socket's own error: ENETDOWN after a link went down).
    error: bool,
}

struct Router {
    node: Node,
    ports: Vec<PortIo>,
    clock: ClockId,
    map: ClockMap,
    next_remap: i64,
    batch: usize,
    tx_ts: bool,
    node_id: u32,
    csv: Option<SampleWriter>,
    scratch: Vec<u8>,
    wakeup: Histogram,
    /// An error-queue entry waits on one of the ports (seen by the last `ppoll`).
    errqueue: bool,
    /// The controller's table watcher (`--controller`): a new table replaces the
    /// node's flows between two frames ([`Node::update_flows`]).
    watcher: Option<crate::ctl::sync::Watcher>,
    next_table_check: i64,
    /// What happened meanwhile, for the node's warnings.
    notes: Vec<String>,
}

/// The routers (and senders) one thread runs (one, or several with `--config A
/// --config B`: one `ppoll` over every port of every router, one wake-up per frame
/// start for all of them) and how it waits.
struct Group {
    routers: Vec<Router>,
    /// Senders run by the same thread (`lockstep node` with a sender's file among the
    /// routers'): each wakes the loop at its frame starts like a router.
    senders: Vec<SenderMember>,
    clock: ClockId,
    poller: Poller,
    tuner: MarginTuner,
    fixed_margin: bool,
    strategy: WaitStrategy,
    /// After a wake-up that found frames, how long (ns) to sleep before taking
    /// frames again (`live.coalesce`; 0: wait for the next arrival).
    coalesce: i64,
}

/// The ports of one router, opened in its namespace.
struct Opened {
    ports: Vec<Box<dyn FramePort>>,
    notes: Vec<String>,
    kernel_forwards: bool,
}

/// Opens `node.ports` (in the calling thread's network namespace) the way `io` says.
fn open_ports(node_cfg: &NodeConfig, live: &LiveConfig, io: IoChoice) -> Result<Opened> {
    let mut ports = Vec::with_capacity(node_cfg.ports.len());
    let mut notes = Vec::new();
    let setup = PortSetup {
        buffer: SOCKET_BUF,
        qdisc_bypass: live.qdisc_bypass,
        rx_timestamps: true,
        tx_timestamps: live.tx_timestamps,
        // Frames start coming in once every router of the thread is set up
        // ([`Router::start_receiving`]), not while a later port's ring is allocated.
        until_start: true,
    };
    for (i, p) in node_cfg.ports.iter().enumerate() {
        let opened = port::open(&p.ifname, io, &setup).map_err(|e| match &e {
            _ if e.is_permission() => EnvError(format!(
                "node.ports[{i}]: {e} (a router reads and writes raw frames: run it as root or with CAP_NET_RAW)"
            )),
            PortError::Packet(PacketError::NoInterface(_)) => {
                EnvError(format!("node.ports[{i}].ifname: {e}"))
            }
            _ => EnvError(format!("node.ports[{i}] ({}): {e}", p.ifname)),
        })?;
        notes.extend(opened.notes);
        if let Ok(o) = lockstep_linux::ethtool::get_offloads(&p.ifname) {
            if o.gro || o.gso || o.tso {
                notes.push(format!(
                    "{}: segmentation offloads are on (GRO {}, GSO {}, TSO {}): frames larger than the MTU may arrive and be dropped; turn them off",
                    p.ifname, o.gro, o.gso, o.tso
                ));
            }
        }
        ports.push(opened.port);
    }
    let kernel_forwards =
        lockstep_linux::iface::sysctl_get("net.ipv4.ip_forward").is_ok_and(|v| v.trim() == "1");
    Ok(Opened {
        ports,
        notes,
        kernel_forwards,
    })
}

/// How many routers share a thread, and how many threads run, when `routers` are
/// spread over up to `threads` (consecutive routers share one).
pub(crate) fn spread(routers: usize, threads: usize) -> (usize, usize) {
    let threads = threads.clamp(1, routers.max(1));
    let per = routers.max(1).div_ceil(threads);
    (per, routers.max(1).div_ceil(per))
}

/// The thread of each node, in the order given (`is_router`: a router, else a
/// sender), when the routers are spread over up to `threads` ([`spread`]): a sender
/// joins the thread of the first router listed after it, the last thread when none
/// follows (the lab lists each sender right before the edge router it sends into).
/// Never decreasing, so each thread's nodes are consecutive.
pub(crate) fn thread_of(is_router: &[bool], threads: usize) -> Vec<usize> {
    let routers = is_router.iter().filter(|&&r| r).count();
    let (per, n) = spread(routers, threads);
    let mut out = vec![0; is_router.len()];
    let mut k = routers;
    let mut next = n.saturating_sub(1);
    for (i, &router) in is_router.iter().enumerate().rev() {
        if router {
            k -= 1;
            next = k / per;
        }
        out[i] = next;
    }
    out
}

/// Runs the routers and senders of `ctxs` until the end of the run, on up to
/// `threads` threads ([`thread_of`]); thread `i` is pinned to `cpus[i]` (an empty
/// `cpus`: to the first file's `live.cpu`, if any). One outcome (and the start) per
/// node, in the order given.
pub(crate) fn run(
    ctxs: &mut [Ctx],
    waiter: &Waiter,
    threads: usize,
    cpus: &[usize],
) -> Result<(Vec<Outcome>, Option<i64>)> {
    let is_router: Vec<bool> = ctxs
        .iter()
        .map(|c| c.file.node.role != Role::Sender)
        .collect();
    let of = thread_of(&is_router, threads);
    let first_cpu = ctxs.first().and_then(|c| c.file.live.cpu);
    let cpu_of = |i: usize| cpus.get(i).copied().or(first_cpu);
    let mut chunks: Vec<&mut [Ctx]> = Vec::new();
    let mut rest: &mut [Ctx] = ctxs;
    for t in 0..of.last().map_or(0, |&t| t + 1) {
        let len = of.iter().filter(|&&x| x == t).count();
        let (chunk, tail) = std::mem::take(&mut rest).split_at_mut(len);
        chunks.push(chunk);
        rest = tail;
    }
    if let [one] = chunks.as_mut_slice() {
        return run_thread(one, waiter, cpu_of(0));
    }
    let results: Vec<Result<(Vec<Outcome>, Option<i64>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = chunks
            .into_iter()
            .enumerate()
            .map(|(i, chunk)| {
                let cpu = cpu_of(i);
                std::thread::Builder::new()
                    .name(format!("routers-{i}"))
                    .spawn_scoped(s, move || {
                        let w = chunk
                            .first()
                            .map(|c| c.waiter())
                            .context("an empty group of routers")?;
                        run_thread(chunk, &w, cpu)
                    })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| match h {
                Ok(h) => h
                    .join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a router thread panicked"))),
                Err(e) => Err(anyhow::Error::new(e).context("starting a router thread")),
            })
            .collect()
    });
    let mut outcomes = Vec::new();
    let mut start = None;
    for r in results {
        let (o, st) = r?;
        outcomes.extend(o);
        start = start.or(st);
    }
    Ok((outcomes, start))
}

/// A sender run by a router thread: its driver, its file's index in the thread's
/// `ctxs`, the frame start it waits for next (none once stopped).
struct SenderMember {
    driver: sender::Driver,
    ctx: usize,
    next: Option<Instant>,
}

/// Runs the routers and senders of `ctxs` in the calling thread, pinned to `cpu` if
/// given.
fn run_thread(
    ctxs: &mut [Ctx],
    waiter: &Waiter,
    cpu: Option<usize>,
) -> Result<(Vec<Outcome>, Option<i64>)> {
    if ctxs.is_empty() {
        return Ok((Vec::new(), None));
    }
    let mut g = open_group(ctxs, waiter)?;
    for ctx in ctxs.iter() {
        ctx.ready()?;
    }
    let _rt = thread_rt(ctxs, cpu)?;
    for ctx in ctxs.iter().filter(|c| c.file.node.role != Role::Sender) {
        let names: Vec<String> = ctx
            .file
            .node
            .ports
            .iter()
            .map(|p| p.ifname.clone())
            .collect();
        ctx.progress(&format!(
            "{}: forwarding between {}",
            ctx.file.node.name,
            names.join(", ")
        ));
    }
    for r in &mut g.routers {
        r.start_receiving()?;
    }
    let start = ctxs[0].wait_start(waiter);
    let mut stop = StopReason::Signal;
    if let Some(start) = start {
        let end = ctxs.iter().filter_map(|c| c.end_for(start)).max();
        stop = g.run(ctxs, start, end)?;
    }
    let stop_ns = lockstep_linux::now(g.clock).ns;
    Ok((g.outcomes(ctxs, stop, stop_ns)?, start))
}

/// Opens the routers' ports and the senders' sockets of one thread, and how it
/// waits: the first file's way (`run_group` made sure the others agree).
fn open_group(ctxs: &mut [Ctx], waiter: &Waiter) -> Result<Group> {
    let mut routers = Vec::with_capacity(ctxs.len());
    let mut senders = Vec::new();
    for (i, ctx) in ctxs.iter_mut().enumerate() {
        if ctx.file.node.role == Role::Sender {
            let driver = sender::Driver::new(ctx)?;
            senders.push(SenderMember {
                driver,
                ctx: i,
                next: None,
            });
        } else {
            routers.push(open(ctx, waiter.now().ns)?);
        }
    }
    let live = ctxs[0].file.live.clone();
    // The shortest frame of the group bounds the spin margin.
    let tf = routers
        .iter()
        .map(|r| r.node.frame_clock().tf())
        .chain(senders.iter().map(|s| s.driver.tf()))
        .min()
        .unwrap_or(Duration::from_millis(1));
    // At most a quarter of each frame spinning: the router thread shares its CPU with
    // the kernel's packet processing, and a thread that polls most of every frame is
    // what RT throttling stops (on line at TF 1 ms, a 3/4 cap gave a p99.9 wake-up of
    // 2 ms; 1/4 keeps the hybrid win where a frame is short).
    let max_margin = Duration(tf.as_nanos() / 4).min(MAX_ADAPTIVE_MARGIN);
    let initial = live
        .margin
        .unwrap_or(lockstep_core::sched::DEFAULT_HYBRID_MARGIN);
    let mut tuner = MarginTuner::new(initial, MIN_ADAPTIVE_MARGIN, max_margin, MARGIN_SLACK);
    tuner.set_max(max_margin);
    Ok(Group {
        routers,
        senders,
        clock: ctxs[0].clock,
        poller: Poller::new(),
        tuner,
        fixed_margin: live.fixed_margin,
        strategy: live.strategy,
        coalesce: live.coalesce.unwrap_or(Duration::ZERO).as_nanos(),
    })
}

/// The thread's real-time settings (the first file's, on `cpu`), said in every
/// node's document; a polling real-time thread warns of RT throttling.
fn thread_rt(ctxs: &mut [Ctx], cpu: Option<usize>) -> Result<Option<lockstep_linux::RtState>> {
    let live = ctxs[0].file.live.clone();
    let rt = ctxs[0].apply_rt_on(cpu)?;
    if rt.is_some() {
        let realtime = ctxs[0].realtime.clone();
        for c in &mut ctxs[1..] {
            c.realtime = realtime.clone();
        }
    }
    if rt.is_some() && live.priority.is_some() && live.strategy != WaitStrategy::Sleep {
        if let Some(w) = rt_throttling_warning() {
            for c in ctxs.iter_mut() {
                c.warn(w.clone());
            }
        }
    }
    Ok(rt)
}

/// A real-time thread that polls (hybrid, spin) can use more than the kernel's RT
/// budget (`sched_rt_runtime_us` of every `sched_rt_period_us`, 95 % by default):
/// the kernel then stops it for the rest of the period — 50 ms, hundreds of frames.
fn rt_throttling_warning() -> Option<String> {
    lockstep_linux::throttle::in_force().map(throttling_text)
}

#[cfg(test)]
fn rt_throttling_note(runtime: &str, period: &str) -> Option<String> {
    lockstep_linux::throttle::budget_from(runtime, period).map(throttling_text)
}

fn throttling_text(b: lockstep_linux::throttle::Budget) -> String {
    format!(
        "real-time throttling is on (kernel.sched_rt_runtime_us = {} of {}): a polling router that uses more is stopped for {} ms of every period, hundreds of frames; turn it off for the run (lockstep lab run --rt-throttling-off, lockstep host apply, or sysctl -w kernel.sched_rt_runtime_us=-1)",
        b.runtime_us,
        b.period_us,
        b.stall_ms()
    )
}

/// One router's node and sockets (opened in `live.netns` when the file names one).
fn open(ctx: &mut Ctx, now: i64) -> Result<Router> {
    let node_cfg = ctx.file.node.clone();
    let live = ctx.file.live.clone();
    let node = Node::new(node_cfg.clone())
        .map_err(|e| UsageError(format!("node.{}: {}", e.field, e.message)))?;
    let io = ctx.io;
    let opened = match &live.netns {
        None => open_ports(&node_cfg, &live, io)?,
        Some(ns) => lockstep_linux::netns::run_in(ns, || open_ports(&node_cfg, &live, io))
            .map_err(|e| EnvError(format!("live.netns: {e}")))??,
    };
    if let Some(first) = opened.ports.first() {
        ctx.progress(&format!("{}: packet I/O {}", node_cfg.name, first.mode()));
    }
    for n in opened.notes {
        ctx.warn(n);
    }
    // After the sockets: a missing interface or privilege is the first thing to say.
    if opened.kernel_forwards {
        let (ns, fix) = match &live.netns {
            Some(ns) => (
                format!("network namespace {ns}"),
                format!("ip netns exec {ns} sysctl -w net.ipv4.ip_forward=0"),
            ),
            None => (
                "this network namespace".to_string(),
                "sysctl -w net.ipv4.ip_forward=0".to_string(),
            ),
        };
        return Err(EnvError(format!(
            "the kernel forwards IPv4 in {ns} too (net.ipv4.ip_forward = 1): every packet would leave twice; set it to 0 ({fix})"
        ))
        .into());
    }
    let mut ports = Vec::with_capacity(node_cfg.ports.len());
    for (p, io_port) in node_cfg.ports.iter().zip(opened.ports) {
        ports.push(PortIo {
            id: p.id,
            port: io_port,
            out: Vec::with_capacity(BATCH_MAX),
            out_meta: Vec::with_capacity(BATCH_MAX),
            next_id: 0,
            outstanding: 0,
            tx: TxMatcher::new(TX_RING),
            tx_path: preallocated(),
            c: DriverCounters {
                port: p.id.0,
                ifname: p.ifname.clone(),
                ..DriverCounters::default()
            },
            readable: true,
            error: false,
        });
    }
    let csv = if live.tx_timestamps {
        csv(
            ctx,
            "-tx.csv",
            &[
                "flow",
                "seq",
                "port",
                "kind",
                "frame",
                "rx_kernel",
                "rx_app",
                "tx_app",
                "tx_kernel",
            ],
        )?
    } else {
        None
    };
    Ok(Router {
        node,
        ports,
        clock: ctx.clock,
        map: ClockMap::measure(ctx.clock),
        next_remap: now.saturating_add(REMAP_EVERY_NS),
        batch: live.batch,
        tx_ts: live.tx_timestamps,
        node_id: node_cfg.id,
        csv,
        scratch: Vec::with_capacity(SLOT),
        wakeup: preallocated(),
        errqueue: false,
        watcher: ctx.controller.take(),
        next_table_check: now,
        notes: Vec::new(),
    })
}

impl Group {
    /// The frame loop (see the module docs), over every router and sender.
    fn run(&mut self, ctxs: &mut [Ctx], start: i64, end: Option<i64>) -> Result<StopReason> {
        let mut now = Instant::new(self.clock, start);
        for m in &mut self.senders {
            if let Some(ctx) = ctxs.get_mut(m.ctx) {
                m.driver.begin(ctx, start);
                m.next = m.driver.poll(ctx, now);
            }
        }
        loop {
            if stop_requested() {
                return Ok(StopReason::Signal);
            }
            if end.is_some_and(|e| now.ns >= e) {
                return Ok(StopReason::Duration);
            }
            if self.routers.is_empty() && self.senders.iter().all(|m| m.driver.stopped()) {
                return Ok(StopReason::Count);
            }
            if self.senders_on_time(ctxs, now)? {
                // What they sent is already at the router it went to (the kernel
                // handed it over on this CPU during the send): take it now.
                self.receive_now()?;
            }
            for r in &mut self.routers {
                r.on_time(now)?;
            }
            let (deadline, precise) = wake_plan(now.ns, self.earliest_timeout(), end);
            now = self.run_until(deadline, precise)?;
        }
    }

    /// The senders whose frame start has come send; each then says when it next
    /// wants to run (none once it has stopped: it drops out). Whether any sent.
    fn senders_on_time(&mut self, ctxs: &mut [Ctx], now: Instant) -> Result<bool> {
        let mut sent = false;
        for m in &mut self.senders {
            let Some(ctx) = ctxs.get_mut(m.ctx) else {
                continue;
            };
            if m.next.is_some_and(|t| now >= t) {
                m.driver.on_time(ctx, now)?;
                sent = true;
            }
            m.next = m.driver.poll(ctx, now);
        }
        Ok(sent)
    }

    /// One receive on every port of every router, without waiting.
    fn receive_now(&mut self) -> Result<usize> {
        for p in self.routers.iter_mut().flat_map(|r| r.ports.iter_mut()) {
            p.readable = true;
        }
        self.receive_all()
    }

    /// A batch from every readable port into its router, and what may leave at once
    /// sent; the TX timestamps and socket errors waiting taken. Frames received.
    fn receive_all(&mut self) -> Result<usize> {
        let mut got = 0;
        for r in &mut self.routers {
            let n = r.receive()?;
            if n > 0 {
                let now = r.now();
                r.flush(now)?;
            }
            if r.errqueue || r.ports.iter().any(|p| p.outstanding > 0) {
                // An error-queue entry makes every ppoll return at once until taken.
                r.drain_tx_timestamps(r.errqueue)?;
                if r.errqueue {
                    r.take_errors();
                }
                r.errqueue = false;
            }
            got += n;
        }
        Ok(got)
    }

    /// The earliest frame start any router or sender waits for.
    fn earliest_timeout(&self) -> Option<i64> {
        earliest(
            self.routers.iter().map(|r| r.node.poll_timeout()),
            self.senders.iter().map(|m| m.next),
        )
    }

    /// After the loop: every node's outcome in the order of `ctxs` (a sender still
    /// running stops with the thread, `stop` at `stop_ns`).
    fn outcomes(
        &mut self,
        ctxs: &mut [Ctx],
        stop: StopReason,
        stop_ns: i64,
    ) -> Result<Vec<Outcome>> {
        let margin = self.tuner.margin();
        let mut routers = self.routers.iter_mut();
        let mut outcomes = Vec::with_capacity(ctxs.len());
        for (i, ctx) in ctxs.iter_mut().enumerate() {
            if let Some(m) = self.senders.iter_mut().find(|m| m.ctx == i) {
                outcomes.push(m.driver.end(ctx, stop, stop_ns)?);
                continue;
            }
            let r = routers.next().context("a router without its file")?;
            for n in std::mem::take(&mut r.notes) {
                ctx.warn(n);
            }
            r.finish()?;
            outcomes.push(r.outcome(ctx, stop, stop_ns, margin)?);
        }
        Ok(outcomes)
    }

    /// Receives and forwards until the clock reads `deadline`; returns that reading.
    /// `precise`: the deadline is a frame start (hybrid spins towards it).
    fn run_until(&mut self, deadline: i64, precise: bool) -> Result<Instant> {
        let mut busy = false;
        loop {
            let reading = lockstep_linux::now(self.clock);
            let now = reading.ns;
            if now >= deadline || stop_requested() {
                return Ok(reading);
            }
            let remaining = deadline - now;
            let block_for = match self.strategy {
                WaitStrategy::Spin => None,
                WaitStrategy::Sleep => Some(remaining),
                WaitStrategy::Hybrid if !precise => Some(remaining),
                WaitStrategy::Hybrid => {
                    let m = self.tuner.margin().as_nanos();
                    (remaining > m).then(|| remaining - m)
                }
            };
            if let Some(t) = coalesced_sleep(busy, self.coalesce, block_for, precise) {
                // Frames came last time: let more gather instead of waking for each.
                self.poller
                    .wait(std::iter::empty(), Some(Duration(t)))
                    .context("sleeping between batches (ppoll)")?;
                for p in self.routers.iter_mut().flat_map(|r| r.ports.iter_mut()) {
                    p.readable = true;
                }
            } else if let Some(t) = block_for {
                let fds = self
                    .routers
                    .iter()
                    .flat_map(|r| r.ports.iter().map(|p| p.port.as_fd()));
                let ready = self
                    .poller
                    .wait(fds, Some(Duration(t)))
                    .context("waiting for packets (ppoll)")?;
                let mut i = 0;
                for r in &mut self.routers {
                    r.errqueue = false;
                    for p in &mut r.ports {
                        let ready = self.poller.readiness(i);
                        r.errqueue |= ready.error;
                        p.readable = ready.readable;
                        p.error = ready.error;
                        i += 1;
                    }
                }
                if ready == 0 {
                    if precise && self.strategy == WaitStrategy::Hybrid && !self.fixed_margin {
                        let woke = lockstep_linux::now(self.clock).ns;
                        self.tuner
                            .observe(Duration(woke.saturating_sub(now.saturating_add(t))));
                    }
                    continue;
                }
            } else {
                for p in self.routers.iter_mut().flat_map(|r| r.ports.iter_mut()) {
                    p.readable = true;
                }
            }
            let got = self.receive_all()?;
            busy = got > 0;
            // A packet can give an idle router a frame start before the deadline
            // this wait was planned for (housekeeping): plan again. (Waiting on,
            // its packets left only when the next packet woke the loop: past their
            // send deadline on a router whose clock reads late.)
            if got > 0 && self.earliest_timeout().is_some_and(|t| t < deadline) {
                return Ok(lockstep_linux::now(self.clock));
            }
            if got == 0 && block_for.is_none() {
                std::hint::spin_loop();
            }
        }
    }
}

/// How long to sleep without watching the ports before the next receive: the
/// coalescing time when the last receive found frames (`busy`) and it fits in how
/// long the loop may block (`block_for`: none when it spins); `None`: wait on the
/// ports.
///
/// Before a frame start (`precise`) the sleep ends at least one coalescing time
/// ahead of it, and in that last stretch the router waits on the ports: a frame
/// that arrives just before a frame start is taken at once, before the start
/// closes the queue it may be due in (a packet forwarded one frame after its
/// arrival frame, `d = 1`, would otherwise miss it).
fn coalesced_sleep(
    busy: bool,
    coalesce: i64,
    block_for: Option<i64>,
    precise: bool,
) -> Option<i64> {
    let t = block_for?;
    let reserve = if precise { coalesce } else { 0 };
    (busy && coalesce > 0 && t.saturating_sub(reserve) >= coalesce).then_some(coalesce)
}

/// The earliest of the routers' and the senders' next frame starts (a sender that
/// stopped has none).
fn earliest(
    routers: impl Iterator<Item = Option<Instant>>,
    senders: impl Iterator<Item = Option<Instant>>,
) -> Option<i64> {
    routers.chain(senders).flatten().map(|t| t.ns).min()
}

/// Until when the loop waits from `now`, and whether that is a frame start (hybrid
/// spins towards one): the earliest frame start a router waits for, unless the end
/// of the run or the next housekeeping comes first.
fn wake_plan(now: i64, frame_start: Option<i64>, end: Option<i64>) -> (i64, bool) {
    let mut plan = (now.saturating_add(HOUSEKEEPING_NS), false);
    if let Some(t) = frame_start.filter(|&t| t <= plan.0) {
        plan = (t, true);
    }
    if let Some(e) = end.filter(|&e| e < plan.0) {
        plan = (e, false);
    }
    plan
}

impl Router {
    #[inline]
    fn now(&self) -> Instant {
        lockstep_linux::now(self.clock)
    }

    /// A turn of the frame loop: a frame start that has come, what may leave now,
    /// the TX timestamps due, and now and then the clock map and the controller.
    fn on_time(&mut self, now: Instant) -> Result<()> {
        self.tick(now);
        self.flush(now)?;
        if self.tx_ts && self.ports.iter().any(|p| p.outstanding > 0) {
            self.drain_tx_timestamps(false)?;
        }
        if now.ns >= self.next_remap {
            self.map = ClockMap::measure(self.clock);
            self.next_remap = now.ns.saturating_add(REMAP_EVERY_NS);
        }
        if self.watcher.is_some() && now.ns >= self.next_table_check {
            self.next_table_check = now.ns.saturating_add(TABLE_CHECK_NS);
            self.take_table();
        }
        Ok(())
    }

    /// A newer table from the controller, if one came: the node's flows are
    /// replaced between two frames (packets in flight keep their frames).
    fn take_table(&mut self) {
        let Some(u) = self.watcher.as_ref().and_then(|w| w.take()) else {
            return;
        };
        let applied =
            crate::ctl::sync::apply_checked(self.node.config(), &u.schedule).and_then(|cfg| {
                if cfg.flows == self.node.config().flows {
                    // the version moved for another node's table
                    return Ok(false);
                }
                self.node
                    .update_flows(cfg.flows)
                    .map(|()| true)
                    .map_err(|e| format!("node.{}: {}", e.field, e.message))
            });
        match applied {
            Ok(false) => {}
            Ok(true) => self.notes.push(format!(
                "schedule version {} from the controller applied while running",
                u.version
            )),
            Err(e) => self.notes.push(format!(
                "schedule version {} from the controller not applied: {e}",
                u.version
            )),
        }
    }

    /// Starts the frame(s) whose start has passed; records how late. A node not
    /// started yet is due at once ([`Instant::earliest`], whatever the clock).
    #[inline]
    fn tick(&mut self, now: Instant) {
        if let Some(t) = self.node.poll_timeout() {
            if t.is_earliest() || now >= t {
                self.node.handle_timeout(now);
                if !t.is_earliest() {
                    self.wakeup.record((now - t).as_nanos());
                }
            }
        }
    }

    /// Every port starts taking frames (they were opened taking none, so that what
    /// arrives while the router sets up does not wait in them: after a restart, the
    /// neighbours send all along, and a frame older than its send frame is a slip).
    fn start_receiving(&mut self) -> Result<()> {
        for p in &mut self.ports {
            p.port
                .start()
                .with_context(|| format!("starting to receive on {}", p.c.ifname))?;
        }
        Ok(())
    }

    /// One non-blocking batch from every port into the node; frames received.
    fn receive(&mut self) -> Result<usize> {
        let mut total = 0;
        let Router {
            node,
            ports,
            clock,
            map,
            scratch,
            wakeup,
            batch,
            ..
        } = self;
        for port in ports.iter_mut().filter(|p| p.readable) {
            let PortIo { id, port, c, .. } = port;
            let mut app: Option<Instant> = None;
            let got = port.recv(*batch, &mut |data, meta| {
                let now = *app.get_or_insert_with(|| {
                    let now = lockstep_linux::now(*clock);
                    // a frame start that has passed comes first
                    if let Some(t) = node.poll_timeout() {
                        if t.is_earliest() || now >= t {
                            node.handle_timeout(now);
                            if !t.is_earliest() {
                                wakeup.record((now - t).as_nanos());
                            }
                        }
                    }
                    now
                });
                c.rx_frames += 1;
                if meta.truncated {
                    c.rx_truncated += 1;
                    return;
                }
                if meta.vlan.is_some() {
                    c.vlan_stripped += 1;
                }
                let rx_meta = RxMeta {
                    kernel_rx: meta.kernel_rx.map(|k| map.to_target(k.ns)),
                };
                if meta.csum_not_ready {
                    scratch.clear();
                    scratch.extend_from_slice(data);
                    if finish_l4_checksum(scratch) {
                        c.csum_finished += 1;
                    }
                    node.handle_packet(now, *id, scratch, rx_meta);
                } else {
                    node.handle_packet(now, *id, data, rx_meta);
                }
            });
            let n = match got {
                Err(e) if e.transient() == Some(Transient::LinkDown) => {
                    c.rx_link_down += 1;
                    0
                }
                other => other.with_context(|| format!("receiving on {}", c.ifname))?,
            };
            if n > 0 {
                c.rx_batches += 1;
            }
            total += n;
        }
        Ok(total)
    }

    /// Everything the node lets leave at `now`, in batches per port.
    fn flush(&mut self, now: Instant) -> Result<()> {
        while let Some(tx) = self.node.poll_transmit(now) {
            let Some(pi) = self.ports.iter().position(|p| p.id == tx.port) else {
                self.node.recycle(tx.buf);
                continue;
            };
            let meta = if self.tx_ts {
                probe_meta(&tx.buf, self.node_id, tx.kind, tx.frame)
            } else {
                None
            };
            let p = &mut self.ports[pi];
            p.out.push(tx.buf);
            p.out_meta.push(meta);
            if p.out.len() >= self.batch {
                self.send(pi)?;
            }
        }
        for pi in 0..self.ports.len() {
            if !self.ports[pi].out.is_empty() {
                self.send(pi)?;
            }
        }
        Ok(())
    }

    /// Sends port `pi`'s pending frames (one `sendmmsg` unless the device drops one).
    fn send(&mut self, pi: usize) -> Result<()> {
        let Router {
            node, ports, tx_ts, ..
        } = self;
        let Some(p) = ports.get_mut(pi) else {
            return Ok(());
        };
        let n = p.out.len().min(BATCH_MAX);
        let mut frames: [&[u8]; BATCH_MAX] = [&[]; BATCH_MAX];
        for (slot, b) in frames.iter_mut().zip(p.out.iter()) {
            *slot = b.as_slice();
        }
        // Only probes ask for a TX timestamp (and only they count timestamp ids).
        let mut stamp = [false; BATCH_MAX];
        let mut any_stamp = false;
        if *tx_ts {
            for (s, m) in stamp.iter_mut().zip(p.out_meta.iter()) {
                *s = m.is_some();
                any_stamp |= *s;
            }
        }
        let stamp = if any_stamp { &stamp[..n] } else { &[][..] };
        let mut off = 0;
        while off < n {
            let sent = match p
                .port
                .send(&frames[off..n], stamp.get(off..).unwrap_or_default())
            {
                Ok(s) => s,
                Err(_) => {
                    // Nothing went: count them all and move on (the next batch retries
                    // the socket).
                    p.c.tx_errors += (n - off) as u64;
                    break;
                }
            };
            p.c.tx_batches += 1;
            for i in off..off + sent {
                if let Some(Some(m)) = p.out_meta.get(i).copied() {
                    if stamp.get(i).copied().unwrap_or(false) {
                        // an evicted probe is counted missing by the matcher
                        let _ = p.tx.note_sent(p.next_id, m);
                        p.next_id = p.next_id.wrapping_add(1);
                        p.outstanding += 1;
                    }
                }
            }
            p.c.tx_frames += sent as u64;
            off += sent;
            if off < n {
                // The device refused frame `off` (a probe's consumed its timestamp id).
                p.c.tx_device_drops += 1;
                if stamp.get(off).copied().unwrap_or(false) {
                    p.next_id = p.next_id.wrapping_add(1);
                }
                off += 1;
            }
        }
        p.out_meta.clear();
        for b in p.out.drain(..) {
            node.recycle(b);
        }
        Ok(())
    }

    /// Takes the pending socket errors of the ports the last wait saw one on (a
    /// receive ring never reads the socket, so nothing else would: every wait would
    /// report it again). ENETDOWN counts as a receive that found the link down.
    fn take_errors(&mut self) {
        for p in self.ports.iter_mut().filter(|p| p.error) {
            p.error = false;
            if let Ok(Some(e)) = p.port.take_error() {
                if e.transient() == Some(Transient::LinkDown) {
                    p.c.rx_link_down += 1;
                }
            }
        }
    }

    /// Takes every queued TX timestamp (and whatever else is on the error queues);
    /// matches the probes'. `every`: look at every port's queue, not only those of
    /// ports with timestamps outstanding (one `recvmmsg` saved per idle port on the
    /// forwarding path).
    fn drain_tx_timestamps(&mut self, every: bool) -> Result<()> {
        let Router {
            ports, map, csv, ..
        } = self;
        for p in ports.iter_mut() {
            let PortIo {
                port,
                outstanding,
                tx,
                tx_path,
                c,
                ..
            } = p;
            if !every && *outstanding == 0 {
                continue;
            }
            let mut row_err = None;
            // bounded: at most what was sent plus a ring's worth of leftovers
            let mut budget = *outstanding as usize + TX_RING;
            while budget > 0 {
                let taken = port
                    .tx_timestamps(&mut |ts| {
                        *outstanding = outstanding.saturating_sub(1);
                        let Some((m, sw)) = tx.on_timestamp(ts.id, ts.software) else {
                            return;
                        };
                        let tx_kernel = to_node_clock(map, sw);
                        tx_path.record(tx_kernel.saturating_sub(m.tx_app));
                        if let Err(e) = write_tx_row(csv, c.port, &m, tx_kernel) {
                            row_err.get_or_insert(e);
                        }
                    })
                    .with_context(|| format!("TX timestamps of {}", c.ifname))?;
                if let Some(e) = row_err.take() {
                    return Err(e);
                }
                // A short batch emptied the queue: another call would find nothing.
                if taken < BATCH_MAX {
                    break;
                }
                budget = budget.saturating_sub(taken);
            }
        }
        Ok(())
    }

    /// After the loop: last timestamps, socket drop counters, files.
    fn finish(&mut self) -> Result<()> {
        let until = std::time::Instant::now() + std::time::Duration::from_millis(100);
        while self.tx_ts
            && self.ports.iter().any(|p| p.outstanding > 0)
            && std::time::Instant::now() < until
        {
            self.drain_tx_timestamps(true)?;
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        for p in &mut self.ports {
            let left = p.tx.drain_unmatched().len() as u64;
            p.c.tx_timestamps = p.tx.counts().matched;
            p.c.tx_timestamps_missing = p.tx.counts().evicted + left;
            if let Ok(s) = p.port.take_stats() {
                p.c.rx_socket_drops += u64::from(s.drops);
            }
        }
        if let Some(w) = self.csv.take() {
            w.finish()?;
        }
        Ok(())
    }

    fn outcome(
        &self,
        ctx: &mut Ctx,
        stop: StopReason,
        stop_ns: i64,
        margin: Duration,
    ) -> Result<Outcome> {
        let counters = self.node.counters();
        let driver: Vec<&DriverCounters> = self.ports.iter().map(|p| &p.c).collect();
        let drops: u64 = driver
            .iter()
            .map(|c| c.rx_socket_drops + c.tx_device_drops + c.tx_errors + c.rx_truncated)
            .sum();
        if drops > 0 {
            ctx.warn(format!(
                "{drops} frames lost in the sockets (receive queue full, device refused, send errors or oversized): see \"driver\""
            ));
        }
        if counters.unknown_dscp > 0 {
            ctx.warn(format!(
                "{} packets carried a TDP mark no frame can have",
                counters.unknown_dscp
            ));
        }
        let slipped: u64 = counters.flows.iter().map(|f| f.slipped).sum();
        if slipped > 0 {
            ctx.warn(format!("{slipped} frame slips (see counters.flows)"));
        }
        let wake = self.wakeup.summary();
        let mut extra = Map::new();
        extra.insert("driver".into(), serde_json::to_value(&driver)?);
        let tx_path: Map<String, Value> = self
            .ports
            .iter()
            .map(|p| {
                (
                    p.c.port.to_string(),
                    serde_json::to_value(p.tx_path.summary()).unwrap_or(Value::Null),
                )
            })
            .collect();
        extra.insert("tx_path".into(), Value::Object(tx_path));
        extra.insert("hybrid_margin_ns".into(), Value::from(margin.as_nanos()));
        if let Some(p) = self.ports.first() {
            extra.insert("io".into(), Value::from(p.port.mode().name()));
        }
        extra.insert(
            "buffers_allocated".into(),
            Value::from(self.node.buffers_allocated()),
        );
        let forwarded: u64 = counters.ports.iter().map(|p| p.tx_reserved).sum();
        let lines = vec![
            ("frames", counters.frames.to_string()),
            (
                "forwarded",
                format!(
                    "{forwarded} reserved, {} best effort, {} padding",
                    counters.best_effort_forwarded, counters.padding_sent
                ),
            ),
            (
                "dropped",
                format!(
                    "{} best effort, {} malformed, {} no route, {} socket",
                    counters.best_effort_dropped, counters.malformed, counters.no_route, drops
                ),
            ),
            ("slips", slipped.to_string()),
            (
                "unknown",
                format!(
                    "{} DSCP, {} flow",
                    counters.unknown_dscp, counters.unknown_flow
                ),
            ),
        ];
        let mut dists: Vec<(String, Summary)> = vec![("wake-up".into(), wake.clone())];
        for p in &self.ports {
            if p.tx_path.count() > 0 {
                dists.push((format!("tx path {}", p.c.ifname), p.tx_path.summary()));
            }
        }
        Ok(Outcome {
            counters: serde_json::to_value(counters)?,
            wakeup: Some(wake),
            flows: None,
            extra,
            stop,
            stop_ns,
            lines,
            dists,
        })
    }
}

/// A row of `-tx.csv`: a forwarded probe and its kernel TX time.
fn write_tx_row(csv: &mut Option<SampleWriter>, port: u16, m: &TxMeta, tx: i64) -> Result<()> {
    let Some(w) = csv.as_mut() else {
        return Ok(());
    };
    w.row(&[
        Some(i64::from(m.flow)),
        i64::try_from(m.seq).ok(),
        Some(i64::from(port)),
        Some(if m.reserved { 0 } else { 1 }),
        m.frame,
        Some(m.rx_kernel),
        Some(m.rx_app),
        Some(m.tx_app),
        Some(tx),
    ])
}

fn preallocated() -> Histogram {
    let mut h = Histogram::new();
    h.record(1_000_000_000);
    h.reset();
    h
}

/// The probe carried by a frame this node is about to send, with the hop record it
/// just wrote: what its TX timestamp will be matched with.
fn probe_meta(frame: &[u8], node: u32, kind: TxKind, frame_no: Option<i64>) -> Option<TxMeta> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::IPV4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
    if ip.protocol() != PROTO_UDP || ip.is_fragment() {
        return None;
    }
    let udp = UdpPacket::new_checked(ip.payload()).ok()?;
    if !udp.payload().starts_with(&MAGIC) {
        return None;
    }
    let probe = ProbePacket::new_checked(udp.payload()).ok()?;
    let hop = probe
        .hop_count()
        .checked_sub(1)
        .and_then(|i| probe.hop(usize::from(i)))
        .filter(|h| h.node == node)?;
    Some(TxMeta {
        flow: probe.flow_id(),
        seq: probe.seq(),
        reserved: kind == TxKind::Reserved,
        frame: frame_no,
        rx_kernel: hop.rx_kernel_ns,
        rx_app: hop.rx_app_ns,
        tx_app: hop.tx_app_ns,
    })
}

/// Finishes an L4 checksum the sender's stack left to an offload (the field holds the
/// pseudo-header sum): UDP and TCP over IPv4. Returns whether it did.
fn finish_l4_checksum(frame: &mut [u8]) -> bool {
    let Ok(mut eth) = EthernetFrame::new_checked(&mut frame[..]) else {
        return false;
    };
    if eth.ethertype() != EtherType::IPV4 {
        return false;
    }
    let Ok(mut ip) = Ipv4Packet::new_checked(eth.payload_mut()) else {
        return false;
    };
    if ip.is_fragment() {
        return false;
    }
    let proto = ip.protocol();
    let l4 = ip.payload_mut();
    match proto {
        PROTO_UDP => match UdpPacket::new_checked(&mut l4[..]) {
            Ok(mut udp) => {
                udp.finish_partial_checksum();
                true
            }
            Err(_) => false,
        },
        PROTO_TCP if l4.len() >= 20 => {
            let sum = ones_complement_sum(l4, 0);
            let c = !fold(sum);
            l4[16..18].copy_from_slice(&c.to_be_bytes());
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::wire::checksum::pseudo_header_sum;
    use lockstep_core::wire::{HopKind, HopRecord, ProbeRepr};
    use std::net::Ipv4Addr;

    /// An Ethernet/IPv4 frame around `l4` (protocol `proto`), with the L4 checksum
    /// field at `csum_at` holding only the pseudo-header sum, as an offload leaves it.
    fn partial(proto: u8, mut l4: Vec<u8>, csum_at: usize) -> (Vec<u8>, u16) {
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let len = l4.len() as u16;
        l4[csum_at..csum_at + 2].copy_from_slice(&[0, 0]);
        let full = !fold(ones_complement_sum(
            &l4,
            pseudo_header_sum(src, dst, proto, len),
        ));
        let pseudo = fold(pseudo_header_sum(src, dst, proto, len));
        l4[csum_at..csum_at + 2].copy_from_slice(&pseudo.to_be_bytes());
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut ip = vec![0x45, 0];
        ip.extend((20 + len).to_be_bytes());
        ip.extend([0, 0, 0x40, 0, 64, proto, 0, 0]);
        ip.extend(src.octets());
        ip.extend(dst.octets());
        let c = !fold(ones_complement_sum(&ip, 0));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f.extend(ip);
        f.extend(l4);
        (f, full)
    }

    #[test]
    fn a_busy_router_sleeps_its_coalescing_time_but_never_past_its_deadline() {
        // frames came last time: sleep 20 µs without watching the ports
        assert_eq!(
            coalesced_sleep(true, 20_000, Some(100_000), true),
            Some(20_000)
        );
        assert_eq!(
            coalesced_sleep(true, 20_000, Some(100_000), false),
            Some(20_000)
        );
        // the last 20 µs before a frame start are watched: 45 µs ahead, a 20 µs sleep
        // still ends 25 µs ahead; 39 µs ahead, none
        assert_eq!(
            coalesced_sleep(true, 20_000, Some(45_000), true),
            Some(20_000)
        );
        assert_eq!(coalesced_sleep(true, 20_000, Some(39_000), true), None);
        // a deadline that is not a frame start (housekeeping, the end) only caps it
        assert_eq!(
            coalesced_sleep(true, 20_000, Some(30_000), false),
            Some(20_000)
        );
        // nothing came, coalescing off, or spinning: wait on the ports as before
        assert_eq!(coalesced_sleep(false, 20_000, Some(100_000), true), None);
        assert_eq!(coalesced_sleep(true, 0, Some(100_000), true), None);
        assert_eq!(coalesced_sleep(true, 20_000, None, true), None);
    }

    #[test]
    fn a_sender_joins_the_thread_of_the_router_listed_after_it() {
        // s1 r1 s2 r2 r3 on 2 threads: routers r1 r2 | r3; each sender with the next
        let (s, r) = (false, true);
        assert_eq!(thread_of(&[s, r, s, r, r], 2), [0, 0, 0, 0, 1]);
        assert_eq!(thread_of(&[s, r, r, s, r], 3), [0, 0, 1, 2, 2]);
        // a sender after the last router: the last thread
        assert_eq!(thread_of(&[r, r, s], 2), [0, 1, 1]);
        // senders alone: one thread
        assert_eq!(thread_of(&[s, s], 4), [0, 0]);
        // routers only: as `spread` says
        assert_eq!(thread_of(&[r, r, r], 2), [0, 0, 1]);
        assert_eq!(thread_of(&[], 2), Vec::<usize>::new());
    }

    #[test]
    fn the_earliest_deadline_is_over_routers_and_senders() {
        let at = |ns: i64| Some(Instant::new(ClockId::Tai, ns));
        // a sender's frame start before every router's
        assert_eq!(
            earliest([at(500), None].into_iter(), [at(300)].into_iter()),
            Some(300)
        );
        // a router's before the sender's
        assert_eq!(
            earliest([at(200)].into_iter(), [at(300)].into_iter()),
            Some(200)
        );
        // a sender that stopped (or waits for a table) has none: it drops out
        assert_eq!(
            earliest([at(500)].into_iter(), [None, at(900)].into_iter()),
            Some(500)
        );
        assert_eq!(earliest([None].into_iter(), [None].into_iter()), None);
        // and the loop waits for the sender's frame start precisely (hybrid spins)
        assert_eq!(wake_plan(0, Some(300), Some(10_000)), (300, true));
    }

    #[test]
    fn the_loop_waits_for_the_first_of_frame_start_end_and_housekeeping() {
        let h = HOUSEKEEPING_NS;
        // idle: housekeeping only
        assert_eq!(wake_plan(1_000, None, None), (1_000 + h, false));
        // a frame start before it is waited for precisely
        assert_eq!(wake_plan(1_000, Some(2_500), None), (2_500, true));
        // one beyond it waits for the next housekeeping
        assert_eq!(wake_plan(0, Some(h + 1), None), (h, false));
        // the end of the run comes first
        assert_eq!(wake_plan(0, Some(2_500), Some(2_000)), (2_000, false));
        assert_eq!(wake_plan(0, Some(2_500), Some(3_000)), (2_500, true));
    }

    #[test]
    fn rt_throttling_is_noted_only_when_on() {
        assert_eq!(
            rt_throttling_note("950000", "1000000").as_deref(),
            Some("real-time throttling is on (kernel.sched_rt_runtime_us = 950000 of 1000000): a polling router that uses more is stopped for 50 ms of every period, hundreds of frames; turn it off for the run (lockstep lab run --rt-throttling-off, lockstep host apply, or sysctl -w kernel.sched_rt_runtime_us=-1)")
        );
        assert_eq!(rt_throttling_note("-1", "1000000"), None);
        assert_eq!(rt_throttling_note("1000000", "1000000"), None);
        assert_eq!(rt_throttling_note("x", "1000000"), None);
    }

    #[test]
    fn partial_checksums_are_finished() {
        let mut udp = vec![0x1f, 0x40, 0x1b, 0x58, 0, 13, 0, 0];
        udp.extend(b"hello");
        let (mut f, want) = partial(PROTO_UDP, udp, 6);
        assert!(finish_l4_checksum(&mut f));
        assert_eq!(u16::from_be_bytes([f[40], f[41]]), want);
        let mut tcp = vec![0u8; 20];
        tcp[12] = 0x50;
        tcp.extend(b"data!");
        let (mut f, want) = partial(PROTO_TCP, tcp, 16);
        assert!(finish_l4_checksum(&mut f));
        assert_eq!(u16::from_be_bytes([f[50], f[51]]), want);
        assert!(!finish_l4_checksum(&mut [0u8; 10]));
    }

    #[test]
    fn a_forwarded_probe_is_recognised() {
        let mut payload = vec![0u8; 192];
        ProbeRepr {
            flow_id: 4,
            seq: 77,
            total_len: 192,
            ..ProbeRepr::default()
        }
        .emit_into(&mut payload)
        .unwrap();
        let hop = HopRecord {
            node: 3,
            kind: HopKind::Router,
            rx_kernel_ns: 10,
            rx_app_ns: 20,
            tx_app_ns: 30,
            slipped: false,
        };
        ProbePacket::new_checked(&mut payload[..])
            .unwrap()
            .push_hop(&hop)
            .unwrap();
        let mut udp = vec![0x1f, 0x40, 0x1b, 0x58];
        udp.extend((8 + payload.len() as u16).to_be_bytes());
        udp.extend([0, 0]);
        udp.extend(&payload);
        let (f, _) = partial(PROTO_UDP, udp, 6);
        let m = probe_meta(&f, 3, TxKind::Reserved, Some(12)).unwrap();
        assert_eq!(
            (m.flow, m.seq, m.frame, m.reserved),
            (4, 77, Some(12), true)
        );
        assert_eq!((m.rx_kernel, m.rx_app, m.tx_app), (10, 20, 30));
        // the last hop is another node's: not ours to time
        assert!(probe_meta(&f, 9, TxKind::Reserved, None).is_none());
        assert!(probe_meta(&f[..30], 3, TxKind::Reserved, None).is_none());
    }
}
