//! The sans-IO TDP sender: the state machine behind `lockstep node` in the sender
//! role and behind every simulated sender. Like [`super::Node`] it never reads a
//! clock: the driver waits for [`Sender::poll_timeout`], calls
//! [`Sender::handle_timeout`] with the time it woke, and sends what
//! [`Sender::poll_transmit`] hands out (a UDP payload and the DSCP to send it with).
//!
//! ```text
//! sender.start(now);
//! while let Some(t0) = sender.poll_timeout() {
//!     wait until t0; sender.handle_timeout(woke);
//!     while let Some(tx) = sender.poll_transmit(clock()) { set DSCP tx.dscp; send tx.payload }
//! }
//! ```
//!
//! For each frame of its schedule the sender records its wake-up latency
//! `L_I = woke − t0` (skipped frames included). A frame it reaches one whole frame
//! late or more is skipped (its mark would be stale): counted, not sent, and sequence
//! numbers count packets sent, so a skipped frame is not a loss. A frame reached after
//! its send deadline but within the frame is sent and counted as late. Each packet is
//! a probe carrying its flow, sequence number, frame, `t0`, `t_wake` and `t_send`
//! (the `now` of the `poll_transmit` that hands it out). A packet the socket
//! refused is handed back with [`Sender::retract`]: its sequence number goes to the
//! next packet of the flow and it is not counted as sent.
//!
//! A new schedule ([`Sender::set_schedule`]) takes over where the sender is: after
//! the last frame it sent in, or from the time it woke late for a skipped one (from
//! `now` when it had nothing left to send).
//!
//! Times cross the API as [`Instant`]s: the sender runs on the clock of the first
//! one it is given (every later one must be of the same clock, checked in debug
//! builds; before any, its timeouts are on `ClockId::default()`). Inside, in the
//! probes it stamps and in its wake-up histogram they are `i64` nanoseconds of that
//! clock; frame numbers are `i64` too.

use std::collections::VecDeque;

use serde::Serialize;

use super::config::NodeConfig;
use super::node::NodeConfigError;
use super::sender::SenderSchedule;
use crate::stats::Histogram;
use crate::time::{Instant, LearnedClock};
use crate::wire::{ProbePacket, ProbeRepr, WireError};

/// One flow the sender sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderFlow {
    /// The flow id of the node configuration's flow whose rows say when.
    pub id: u32,
    /// UDP payload bytes (the probe, with room for hop records).
    pub size: u32,
    /// Stop this flow after this many packets.
    pub count: Option<u64>,
}

/// What a sender counts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SenderCounters {
    /// Frames in which the sender sent.
    pub frames: u64,
    /// Sent after the frame's send deadline (in the guard).
    pub late_frames: u64,
    /// Reached a whole frame late or more: not sent.
    pub skipped_frames: u64,
    /// Packets handed out.
    pub sent: u64,
}

/// A packet to send now.
#[derive(Debug)]
pub struct SenderTransmit<'a> {
    pub flow: u32,
    /// The flow's position in the flows the sender was made with.
    pub index: usize,
    pub seq: u64,
    pub frame: i64,
    /// Start of the frame (the probe's `t0`).
    pub t0: Instant,
    /// When the sender woke for the frame (`t_wake`).
    pub t_wake: Instant,
    /// The `now` it was handed out at (`t_send`).
    pub t_send: Instant,
    /// The DSCP to send it with: the frame mark, or 0 when the sender does not mark.
    pub dscp: u8,
    /// The UDP payload (a probe packet with a valid checksum).
    pub payload: &'a [u8],
}

#[derive(Debug)]
struct FlowTx {
    id: u32,
    buf: Vec<u8>,
    seq: u64,
    count: Option<u64>,
}

impl FlowTx {
    fn done(&self) -> bool {
        self.count.is_some_and(|c| self.seq >= c)
    }
}

/// Where the search for the next frame starts.
#[derive(Clone, Copy, Debug)]
enum Resume {
    /// The first frame starting at or after this time.
    AtOrAfter(i64),
    /// The first frame after this one.
    After(i64),
}

/// The sender state machine.
#[derive(Debug)]
pub struct Sender {
    schedule: SenderSchedule,
    mark: bool,
    /// The clock of the instants the sender is given.
    clock_id: LearnedClock,
    flows: Vec<FlowTx>,
    resume: Resume,
    /// The next frame to send in and its start.
    next: Option<(i64, i64)>,
    /// The flow of the packet last handed out, until the next one.
    last: Option<usize>,
    /// Packets of the frame being sent: (flow index, frame, t0, woke).
    queue: VecDeque<(usize, i64, i64, i64)>,
    wakeup: Histogram,
    counters: SenderCounters,
}

impl Sender {
    /// A sender of `flows` on the schedule of `config` (its flows' rows). `mark`:
    /// send with the frame mark (the first router is a core router), else DSCP 0.
    pub fn new(
        config: &NodeConfig,
        flows: &[SenderFlow],
        mark: bool,
    ) -> Result<Sender, NodeConfigError> {
        let schedule = SenderSchedule::from_config(config)?;
        let mut out = Vec::with_capacity(flows.len());
        for (i, f) in flows.iter().enumerate() {
            if !config.flows.iter().any(|c| c.id == f.id) {
                return Err(NodeConfigError {
                    field: format!("flows[{i}]"),
                    message: format!("flow {} has no rows in the node configuration", f.id),
                });
            }
            out.push(FlowTx {
                id: f.id,
                buf: probe_buffer(f.id, f.size).map_err(|e| NodeConfigError {
                    field: format!("flows[{i}].size"),
                    message: e.to_string(),
                })?,
                seq: 0,
                count: f.count,
            });
        }
        Ok(Sender {
            schedule,
            mark,
            clock_id: LearnedClock::default(),
            flows: out,
            resume: Resume::AtOrAfter(0),
            next: None,
            last: None,
            queue: VecDeque::new(),
            wakeup: preallocated(),
            counters: SenderCounters::default(),
        })
    }

    /// The schedule the sender follows.
    pub fn schedule(&self) -> &SenderSchedule {
        &self.schedule
    }

    /// Starts sending with the first frame starting at or after `now`.
    pub fn start(&mut self, now: Instant) {
        let now = self.clock_id.ns(now, "sender");
        self.resume_at(Resume::AtOrAfter(now));
    }

    /// A new schedule (from the admission controller). It applies from where the
    /// sender is (the frame after the last one it sent in, or the first at or after
    /// the time it woke for a skipped frame); from `now` when the old schedule had
    /// no frame left (or before [`Sender::start`]).
    pub fn set_schedule(&mut self, schedule: SenderSchedule, now: Instant) {
        let now = self.clock_id.ns(now, "sender");
        self.schedule = schedule;
        let resume = match self.next {
            Some(_) => self.resume,
            None => Resume::AtOrAfter(now),
        };
        self.resume_at(resume);
    }

    fn resume_at(&mut self, resume: Resume) {
        self.resume = resume;
        let next = match resume {
            Resume::AtOrAfter(t) => self.schedule.next_at_or_after(t),
            Resume::After(frame) => self.schedule.after(frame),
        };
        self.next = next.map(|f| (f.frame, f.start_ns));
    }

    /// The start of the next frame with packets, whether or not every flow is done.
    pub fn next_start(&self) -> Option<Instant> {
        self.next.map(|(_, start)| self.clock_id.at(start))
    }

    /// Every flow has sent its `count`.
    pub fn done(&self) -> bool {
        self.flows.iter().all(FlowTx::done)
    }

    /// The start of the next frame to send in; `None` when there is none (an empty
    /// schedule) or every flow is done.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.done() {
            return None;
        }
        self.next.map(|(_, start)| self.clock_id.at(start))
    }

    /// The sender woke at `now` for the frame [`Sender::poll_timeout`] named.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.clock_id.ns(now, "sender");
        let Some((frame, t0)) = self.next else {
            return;
        };
        if now < t0 {
            return;
        }
        let late = now.saturating_sub(t0);
        self.wakeup.record(late);
        let clock = *self.schedule.frame_clock();
        if late >= clock.tf().as_nanos() {
            self.counters.skipped_frames += 1;
            self.resume_at(Resume::AtOrAfter(now));
            return;
        }
        self.counters.frames += 1;
        if clock.send_deadline(frame).is_some_and(|d| now > d) {
            self.counters.late_frames += 1;
        }
        if let Some(sf) = self.schedule.after(frame - 1) {
            for e in sf.entries {
                if let Some(fi) = self.flows.iter().position(|f| f.id == e.flow) {
                    for _ in 0..e.packets {
                        self.queue.push_back((fi, frame, t0, now));
                    }
                }
            }
        }
        self.resume_at(Resume::After(frame));
    }

    /// The next packet of the frame being sent, stamped with `t_send = now`.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<SenderTransmit<'_>> {
        let now = self.clock_id.ns(now, "sender");
        self.last = None;
        loop {
            let (fi, frame, t0, woke) = self.queue.pop_front()?;
            if self.flows[fi].done() {
                continue;
            }
            let dscp = if self.mark {
                self.schedule.frame_clock().dscp(frame)
            } else {
                0
            };
            self.counters.sent += 1;
            self.last = Some(fi);
            let f = &mut self.flows[fi];
            let seq = f.seq;
            f.seq += 1;
            stamp(&mut f.buf, seq, frame, t0, woke, now);
            return Some(SenderTransmit {
                flow: f.id,
                index: fi,
                seq,
                frame,
                t0: self.clock_id.at(t0),
                t_wake: self.clock_id.at(woke),
                t_send: self.clock_id.at(now),
                dscp,
                payload: &f.buf,
            });
        }
    }

    /// The packet last handed out did not leave (the socket refused it): it is not
    /// counted as sent and its sequence number goes to the flow's next packet. Does
    /// nothing when called twice or before any packet.
    pub fn retract(&mut self) {
        if let Some(fi) = self.last.take() {
            self.flows[fi].seq -= 1;
            self.counters.sent -= 1;
        }
    }

    /// Wake-up latency of every frame the sender woke for.
    pub fn wakeup(&self) -> &Histogram {
        &self.wakeup
    }

    pub fn counters(&self) -> &SenderCounters {
        &self.counters
    }

    /// Packets sent so far per flow: `(flow, sent)`.
    pub fn sent_per_flow(&self) -> impl Iterator<Item = (u32, u64)> + '_ {
        self.flows.iter().map(|f| (f.id, f.seq))
    }
}

/// A histogram sized up front (to 1 s) so that recording does not allocate.
fn preallocated() -> Histogram {
    let mut h = Histogram::new();
    h.record(1_000_000_000);
    h.reset();
    h
}

/// A probe of `size` bytes for `flow`, every timestamp still empty.
pub fn probe_buffer(flow: u32, size: u32) -> Result<Vec<u8>, WireError> {
    let mut buf = vec![0u8; size as usize];
    ProbeRepr {
        flow_id: flow,
        total_len: size,
        ..ProbeRepr::default()
    }
    .emit_into(&mut buf)?;
    Ok(buf)
}

/// Writes a packet's sequence number, frame and times, and its checksum.
fn stamp(buf: &mut [u8], seq: u64, frame: i64, t0: i64, woke: i64, now: i64) {
    let mut pkt = ProbePacket::new_unchecked(buf);
    pkt.set_seq(seq);
    pkt.set_frame(frame);
    pkt.set_t0_ns(t0);
    pkt.set_t_wake_ns(woke);
    pkt.set_t_send_ns(now);
    pkt.fill_checksum();
}

#[cfg(test)]
#[path = "host_tests.rs"]
mod tests;
