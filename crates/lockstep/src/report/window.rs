//! A TDP flow's verdict in the result document: the latency window its schedule
//! promises, how many packets kept it, and every packet outside it traced to the
//! node, frame and reason where it lost its time (counted per cause, the worst
//! listed).

use std::collections::HashMap;

use lockstep_core::tdp::{Cause, FlowWindow, Outlier, WindowTally};
use serde::{Deserialize, Serialize};

/// Outliers a flow's report lists (the worst).
pub const WORST_KEPT: usize = 20;

/// One TDP flow against its window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WindowReport {
    /// The latency window `[low, high]` the schedule promises.
    pub low_ns: i64,
    pub high_ns: i64,
    pub tf_ns: i64,
    pub inside: u64,
    pub outside: u64,
    /// Outliers per cause (every cause, zeros included, in a fixed order).
    pub causes: Vec<(String, u64)>,
    /// Outliers whose records do not say where they lost time.
    pub unexplained: u64,
    /// The worst outliers, furthest outside first.
    pub worst: Vec<OutlierReport>,
}

/// One packet outside its window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OutlierReport {
    pub seq: u64,
    pub latency_ns: i64,
    /// Above the window's top (positive) or below its floor (negative).
    pub outside_ns: i64,
    pub cause: String,
    /// The router where it lost time (none: the source link, the receiver or no
    /// record), its place on the path (0 = edge) and the frame it should have left in.
    pub node: Option<String>,
    pub hop: Option<usize>,
    pub frame: Option<i64>,
    /// How late the wake-up, hand-over or read was (ns).
    pub by_ns: i64,
}

impl WindowReport {
    pub fn new(w: &FlowWindow, t: &WindowTally, ids: &HashMap<u32, String>) -> WindowReport {
        let (low_ns, high_ns) = w.bounds();
        WindowReport {
            low_ns,
            high_ns,
            tf_ns: w.tf_ns,
            inside: t.inside,
            outside: t.outside,
            causes: Cause::ALL
                .iter()
                .zip(t.by_cause)
                .map(|(c, n)| (c.name().to_string(), n))
                .collect(),
            unexplained: t.unexplained(),
            worst: t.worst.iter().map(|o| outlier(o, ids)).collect(),
        }
    }

    /// Several flows' windows added up: packets inside, outside and unexplained (the
    /// bounds, causes and outliers left empty).
    pub fn total<'a>(ws: impl IntoIterator<Item = &'a WindowReport>) -> WindowReport {
        ws.into_iter().fold(WindowReport::default(), |mut t, w| {
            t.inside += w.inside;
            t.outside += w.outside;
            t.unexplained += w.unexplained;
            t
        })
    }

    /// Share of the flow's packets inside the window.
    pub fn inside_share(&self) -> Option<f64> {
        let n = self.inside + self.outside;
        (n > 0).then(|| self.inside as f64 / n as f64)
    }

    /// The causes that occurred, as `3 late wake-up, 1 receiver late`.
    pub fn causes_text(&self) -> String {
        let v: Vec<String> = self
            .causes
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(c, n)| format!("{n} {c}"))
            .collect();
        if v.is_empty() {
            "none".into()
        } else {
            v.join(", ")
        }
    }
}

fn outlier(o: &Outlier, ids: &HashMap<u32, String>) -> OutlierReport {
    OutlierReport {
        seq: o.seq,
        latency_ns: o.latency_ns,
        outside_ns: o.outside_ns,
        cause: o.cause.name().to_string(),
        node: o
            .node
            .map(|n| ids.get(&n).cloned().unwrap_or_else(|| format!("node {n}"))),
        hop: o.hop,
        frame: o.frame,
        by_ns: o.by_ns,
    }
}

/// A flow's window from its plan: `offsets` are the frames after the sender's on
/// each link of the path (the first is the sender's own link), `starts` the frames
/// of the cycle of `k` in which the flow is reserved. The edge may send a packet as
/// soon as the frame after it arrived when that frame is reserved; a sender on a
/// clock of its own (`asynchronous`) may reach the edge just after a reserved frame,
/// and the edge then holds the packet up to the longest gap to the next one.
pub fn flow_window(
    tf_ns: i64,
    k: u32,
    starts: &[u32],
    offsets: &[u32],
    asynchronous: bool,
) -> FlowWindow {
    let departures: Vec<i64> = offsets.iter().skip(1).map(|&o| i64::from(o)).collect();
    // the edge sends in the first reserved frame after the packet arrives, which can
    // be sooner than the forwarding delay the plan allows it
    let early = departures.first().copied().unwrap_or(0);
    let gap = if asynchronous {
        longest_gap(k, starts)
    } else {
        0
    };
    FlowWindow {
        tf_ns,
        departures,
        gap,
        early,
        late_ns: tf_ns / 4,
    }
}

/// The longest run of frames from one reserved frame to the next, round the cycle.
fn longest_gap(k: u32, starts: &[u32]) -> i64 {
    let mut s: Vec<i64> = starts.iter().map(|&f| i64::from(f)).collect();
    s.sort_unstable();
    s.dedup();
    let Some((&first, &last)) = s.first().zip(s.last()) else {
        return i64::from(k);
    };
    let wrap = first + i64::from(k) - last;
    s.windows(2).map(|w| w[1] - w[0]).fold(wrap, i64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_is_the_longest_round_the_cycle() {
        assert_eq!(
            longest_gap(60, &[0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55]),
            5
        );
        assert_eq!(longest_gap(10, &[2, 3]), 9);
        assert_eq!(longest_gap(10, &[4]), 10);
        assert_eq!(longest_gap(10, &[]), 10);
    }

    #[test]
    fn a_plan_gives_the_routers_departures_and_the_window() {
        let w = flow_window(250_000, 60, &[0, 5, 10], &[0, 3, 6, 9], true);
        assert_eq!(w.departures, [3, 6, 9]);
        assert_eq!(w.gap, 50);
        assert_eq!(w.bounds(), (5 * 250_000, 60 * 250_000));
        let sync = flow_window(250_000, 60, &[0, 5, 10], &[0, 3, 6, 9], false);
        assert_eq!((sync.gap, sync.bounds()), (0, (5 * 250_000, 10 * 250_000)));
    }
}
