//! Where a time-driven packet lost its time: the window a flow's schedule promises
//! and, for a packet outside it, the hop (node and frame) and the reason.
//!
//! The schedule gives every packet of a flow a fixed route through frames: the edge
//! sends it in the first of the flow's reserved frames after it arrives — at most
//! `offsets[1]` frames after the sender's frame for a sender on the network's clock,
//! up to `gap` frames more for a sender whose clock is its own (it is in no frame of
//! the network's) — and router `k` of the path sends it `offsets[k + 1] - offsets[k]`
//! frames after router `k - 1`. So the latency `L = app_rx - t0` of a packet that
//! kept its schedule lies in
//!
//! ```text
//! [ (offsets[last] - early - 1) × TF ,  (offsets[last] + gap + 1) × TF ]
//! ```
//!
//! where `early` = `offsets[1]` is how much sooner the edge may send than the delay
//! the plan allows it (the frame after arrival, where the flow's frames are dense),
//! `gap` the longest run of frames between two of the flow's reserved frames at the
//! edge (0 for a synchronous sender), the last `TF` the frame in which the packet
//! crosses the last link and is read, and the frame below the floor a margin for an
//! asynchronous sender's phase.
//!
//! [`trace`] follows a packet outside that window through its hop records and names
//! the first place that cost it frames, with the reason: the source sent late, a
//! router woke late or slipped, a router's queue held it for a later frame, a link
//! delivered it late, or the receiver read it late. A packet that came *early* was
//! slipped by a router (it then travels without its frame's mark and the next router
//! forwards it at once) or sent best effort sooner than its frame. No system calls:
//! the records carry every time needed.

use crate::tdp::Delivery;
use crate::wire::{HopRecord, NOT_FILLED};

/// What a flow's schedule promises, in nanoseconds and frames.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowWindow {
    pub tf_ns: i64,
    /// Per router of the path (edge first): frames after the sender's frame in which
    /// it sends the packet (the plan's offsets of the links that leave the routers).
    pub departures: Vec<i64>,
    /// The longest gap, in frames, between two reserved frames of the flow at the edge
    /// (0 for a synchronous sender: the edge never waits for the next one).
    pub gap: i64,
    /// How many frames sooner than its offset the edge may send (at most its offset:
    /// the frame after the packet arrived).
    pub early: i64,
    /// A wake-up or a hand-over later than this into its frame counts as late.
    pub late_ns: i64,
}

/// Why a packet left its window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Cause {
    /// The sender sent it late, and the edge had to hold it for a later frame.
    SourceLate,
    /// A router woke late and sent it in a later frame than its own.
    LateWakeup,
    /// A router sent it after its frame's deadline (and said so: the hop record's
    /// slipped flag).
    Slip,
    /// A router, on time, queued it for a later frame (its frame was full).
    QueueFull,
    /// It reached a router (or the receiver) late although the hop before sent it in
    /// its frame: the link (queue, shaper, the machine's softirq) held it.
    LinkLate,
    /// The receiver read it late.
    ReceiverLate,
    /// A router forwarded it best effort at once instead of in its frame (it came
    /// without its reservation's mark), so it arrived early.
    BestEffort,
    /// Its hop records end before its path does, and the recorded part kept time.
    Unrecorded,
    /// Nothing in its records explains it.
    Unexplained,
}

impl Cause {
    pub const ALL: [Cause; 9] = [
        Cause::SourceLate,
        Cause::LateWakeup,
        Cause::Slip,
        Cause::QueueFull,
        Cause::LinkLate,
        Cause::ReceiverLate,
        Cause::BestEffort,
        Cause::Unrecorded,
        Cause::Unexplained,
    ];

    /// Short name, for tables and documents.
    pub fn name(self) -> &'static str {
        match self {
            Cause::SourceLate => "source late",
            Cause::LateWakeup => "late wake-up",
            Cause::Slip => "slip",
            Cause::QueueFull => "queue full",
            Cause::LinkLate => "link late",
            Cause::ReceiverLate => "receiver late",
            Cause::BestEffort => "best effort",
            Cause::Unrecorded => "unrecorded hop",
            Cause::Unexplained => "unexplained",
        }
    }

    /// Whether the records name where the time went.
    pub fn explained(self) -> bool {
        !matches!(self, Cause::Unrecorded | Cause::Unexplained)
    }
}

/// A packet outside its window and where it lost its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outlier {
    pub seq: u64,
    pub latency_ns: i64,
    /// How far outside the window: above its top (positive) or below its floor
    /// (negative).
    pub outside_ns: i64,
    pub cause: Cause,
    /// Index of the router on the path (0 = edge) where it lost time, when a router.
    pub hop: Option<usize>,
    /// Node id of that router, from its hop record.
    pub node: Option<u32>,
    /// The frame it should have left in there (absolute frame index).
    pub frame: Option<i64>,
    /// How late: the wake-up, the hand-over or the read, in ns; or the frames lost
    /// times TF for a queue; for a packet sent early, how early.
    pub by_ns: i64,
}

impl FlowWindow {
    /// The latency window `[low, high]` in ns.
    pub fn bounds(&self) -> (i64, i64) {
        let last = self.departures.last().copied().unwrap_or(0);
        (
            (last - self.early - 1) * self.tf_ns,
            (last + self.gap + 1) * self.tf_ns,
        )
    }

    fn frame_of(&self, t: i64) -> i64 {
        t.div_euclid(self.tf_ns)
    }

    fn start(&self, frame: i64) -> i64 {
        frame.saturating_mul(self.tf_ns)
    }
}

/// `None` when the packet's latency is inside its window, else where it lost time.
pub fn trace(w: &FlowWindow, d: &Delivery) -> Option<Outlier> {
    let latency = d.latency_ns();
    let (low, high) = w.bounds();
    if (low..=high).contains(&latency) || w.tf_ns <= 0 {
        return None;
    }
    let outside = if latency > high {
        latency - high
    } else {
        latency - low
    };
    let mut o = Outlier {
        seq: d.probe.seq,
        latency_ns: latency,
        outside_ns: outside,
        cause: Cause::Unexplained,
        hop: None,
        node: None,
        frame: None,
        by_ns: 0,
    };
    let found = if outside < 0 {
        first_early(w, d)
    } else {
        first_loss(w, d)
    };
    if let Some((cause, hop, frame, by)) = found {
        o.cause = cause;
        o.hop = hop;
        o.node = hop.and_then(|i| d.probe.hops().get(i)).map(|h| h.node);
        o.frame = frame;
        o.by_ns = by;
    }
    Some(o)
}

/// Where a traced packet lost (or gained) its time: the cause, the router's place on
/// the path, the frame it should have left in, and by how much.
type Found = (Cause, Option<usize>, Option<i64>, i64);

/// Each recorded hop with the frame it left in and the frame its schedule gives it:
/// the edge's is `edge` frames after its offset past the sender's frame, each later
/// router's its offset after the frame the router before left in. `None` for a hop
/// the plan has no router for (and the walk's caller gives up there).
fn hop_frames<'a>(
    w: &'a FlowWindow,
    d: &'a Delivery,
    edge: i64,
) -> impl Iterator<Item = Option<(usize, &'a HopRecord, i64, i64)>> + 'a {
    let mut prev: Option<(i64, i64)> = None; // (frame sent, departure offset)
    d.probe.hops().iter().enumerate().map(move |(i, h)| {
        let dep = *w.departures.get(i)?;
        let sent = w.frame_of(h.tx_app_ns);
        let expected = match prev {
            None => w.frame_of(d.probe.t0_ns + w.tf_ns / 2) + dep + edge,
            Some((f, o)) => f + dep - o,
        };
        prev = Some((sent, dep));
        Some((i, h, sent, expected))
    })
}

/// The first place along the path that cost the packet frames.
fn first_loss(w: &FlowWindow, d: &Delivery) -> Option<Found> {
    let mut upstream: Option<i64> = None;
    for step in hop_frames(w, d, w.gap) {
        let (i, h, sent, expected) = step?;
        if sent > expected {
            let (cause, by) = hop_cause(w, d, i, h, expected, upstream);
            return Some((cause, Some(i), Some(expected), by));
        }
        upstream = Some(sent);
    }
    receiver_loss(w, d, upstream)
}

/// Early: the first router that slipped it (it then lost its frame's mark and the
/// next forwarded it at once) or that sent it sooner than its schedule says.
fn first_early(w: &FlowWindow, d: &Delivery) -> Option<Found> {
    for step in hop_frames(w, d, -w.early) {
        let (i, h, sent, expected) = step?;
        if h.slipped {
            let by = h.tx_app_ns - w.start(expected);
            return Some((Cause::Slip, Some(i), Some(expected), by));
        }
        if sent < expected {
            let by = w.start(expected) - h.tx_app_ns;
            return Some((Cause::BestEffort, Some(i), Some(expected), by));
        }
    }
    None
}

/// Why router `i` sent in a later frame than `expected`.
fn hop_cause(
    w: &FlowWindow,
    d: &Delivery,
    i: usize,
    h: &HopRecord,
    expected: i64,
    upstream_frame: Option<i64>,
) -> (Cause, i64) {
    let arrived = if h.rx_kernel_ns != NOT_FILLED {
        h.rx_kernel_ns
    } else {
        h.rx_app_ns
    };
    let due = w.start(expected);
    if i == 0 && d.probe.t_send_ns != NOT_FILLED {
        let source_late = d.probe.t_send_ns - d.probe.t0_ns;
        if source_late > w.late_ns {
            return (Cause::SourceLate, source_late);
        }
        if arrived - d.probe.t_send_ns > w.late_ns && arrived >= due {
            return (Cause::LinkLate, arrived - d.probe.t_send_ns);
        }
    }
    if let Some(up) = upstream_frame {
        // the hop before sent it in frame `up`; it should be here within that frame
        let handed_over = arrived - w.start(up + 1);
        if handed_over > 0 && arrived >= due {
            return (Cause::LinkLate, arrived - w.start(up));
        }
    }
    let woke = h.rx_app_ns - arrived;
    if h.rx_app_ns != NOT_FILLED && h.rx_app_ns >= due && woke > w.late_ns {
        return (Cause::LateWakeup, woke);
    }
    if h.slipped {
        return (Cause::Slip, h.tx_app_ns - due);
    }
    let late_in_frame = h.tx_app_ns - w.start(w.frame_of(h.tx_app_ns));
    if h.tx_app_ns - due > w.late_ns && late_in_frame > w.late_ns {
        return (Cause::LateWakeup, h.tx_app_ns - due);
    }
    (Cause::QueueFull, h.tx_app_ns - due)
}

/// The hops kept time: the receiver, the last link or a hop without a record.
fn receiver_loss(w: &FlowWindow, d: &Delivery, last_frame: Option<i64>) -> Option<Found> {
    if d.probe.hops().len() < w.departures.len() {
        return Some((Cause::Unrecorded, None, None, 0));
    }
    let last = last_frame?;
    let arrived = d.kernel_rx_ns.unwrap_or(d.app_rx_ns);
    let read = d.app_rx_ns - arrived;
    let end = w.start(last + 1);
    // read late, or read after the frame it arrived in had ended: either way the
    // time past the frame's end was the receiver's
    if d.app_rx_ns > end && (read > w.late_ns || arrived <= end) {
        return Some((Cause::ReceiverLate, None, None, read));
    }
    if arrived > end {
        return Some((Cause::LinkLate, None, None, arrived - w.start(last)));
    }
    None
}

/// A window's tally over a flow's packets: how many inside, the outliers per cause
/// and the worst of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WindowTally {
    pub inside: u64,
    pub outside: u64,
    /// Outliers per cause, in [`Cause::ALL`] order.
    pub by_cause: [u64; 9],
    /// The worst outliers (furthest outside), worst first, at most `keep`.
    pub worst: Vec<Outlier>,
}

impl WindowTally {
    /// Counts one packet; keeps the `keep` worst outliers.
    pub fn add(&mut self, w: &FlowWindow, d: &Delivery, keep: usize) {
        let Some(o) = trace(w, d) else {
            self.inside += 1;
            return;
        };
        self.outside += 1;
        if let Some(i) = Cause::ALL.iter().position(|c| *c == o.cause) {
            self.by_cause[i] += 1;
        }
        let at = self
            .worst
            .partition_point(|x| x.outside_ns.abs() >= o.outside_ns.abs());
        if at < keep {
            self.worst.insert(at, o);
            self.worst.truncate(keep);
        }
    }

    /// Outliers the records do not explain.
    pub fn unexplained(&self) -> u64 {
        Cause::ALL
            .iter()
            .zip(self.by_cause)
            .filter(|(c, _)| !c.explained())
            .map(|(_, n)| n)
            .sum()
    }

    /// Share of packets inside the window (`None` before any packet).
    pub fn inside_share(&self) -> Option<f64> {
        let n = self.inside + self.outside;
        (n > 0).then(|| self.inside as f64 / n as f64)
    }
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
