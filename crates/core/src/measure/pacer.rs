//! Pacing of a constant-rate sender (`lockstep probe stream`): which packet goes out
//! next, when, and what to do when the sender has fallen behind its grid.
//!
//! # The grid
//!
//! Slot `f` (the packet's *frame index*) is meant to leave at
//! `t0(f) = start + f * period`. Every packet carries its frame index and `t0`, so a
//! receiver measures the true one-way latency `app_rx − t0` (the latency decomposition) and the sender's
//! wake-up latency `L_I = t_wake − t0`, whatever happened in between.
//!
//! # Catch-up policy
//!
//! A sender that wakes up late (a preempted thread, a stolen vCPU) finds one or more
//! slots already in the past. It then sends **immediately, without waiting**, and keeps
//! the late packets' nominal `t0`, so the lateness shows in `L_I` and in the one-way
//! latency instead of being hidden. Sending every missed slot back to back after a long
//! stall would put a burst on the wire that no constant-bit-rate source produces, so the
//! backlog is bounded: when the next unsent slot lies more than `max_behind` whole
//! periods behind the wake-up time, the oldest slots are **skipped** (counted, never
//! sent) until exactly `max_behind` remain. A stall therefore produces at most
//! `max_behind + 1` packets back to back.
//!
//! Sequence numbers stay contiguous across skipped slots (a skipped slot is not a lost
//! packet: it never left), so `frame == seq` until the first skip and `frame > seq`
//! after. `max_behind = 0` means "never catch up": after a stall the sender sends the
//! current slot and goes on from there. `max_behind = u64::MAX` never skips.
//!
//! A packet *went out late* when it left more than one period after its `t0`
//! (`t_send − t0 > period`): it then left in (or after) the slot of a later packet.

use serde::Serialize;
use thiserror::Error;

use crate::time::Duration;

/// Default bound on the backlog of a late sender: long enough to ride out a short
/// preemption without skipping, short enough that a stall never bursts more than
/// 17 packets onto the wire.
pub const DEFAULT_MAX_BEHIND: u64 = 16;

/// A sender is considered to sustain its rate when it achieves at least this fraction
/// of the target rate.
pub const SUSTAINED_FRACTION: f64 = 0.99;

/// Why a pacer cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PacerError {
    #[error("the packet period must be positive, got {0}")]
    NonPositivePeriod(Duration),
}

/// The packet to send now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Sequence number: packets sent before this one.
    pub seq: u64,
    /// Slot (frame) index on the grid.
    pub frame: u64,
    /// Nominal send time of the slot, `start + frame * period`.
    pub t0_ns: i64,
    /// Slots skipped right before this one by the catch-up policy.
    pub skipped: u64,
}

/// The pacing state of one constant-rate stream (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pacer {
    start_ns: i64,
    period_ns: i64,
    max_behind: u64,
    next_frame: u64,
    next_seq: u64,
    skipped: u64,
    late: u64,
    max_backlog: u64,
}

/// What the pacer saw over a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PacerCounters {
    /// Packets handed out by [`Pacer::take`].
    pub taken: u64,
    /// Slots skipped by the catch-up policy.
    pub skipped: u64,
    /// Packets that left more than one period after their `t0`.
    pub late: u64,
    /// The largest number of whole periods the sender found itself behind.
    pub max_backlog: u64,
}

impl Pacer {
    /// A grid starting at `start_ns` with one slot every `period`.
    pub fn new(start_ns: i64, period: Duration, max_behind: u64) -> Result<Pacer, PacerError> {
        if !period.is_positive() {
            return Err(PacerError::NonPositivePeriod(period));
        }
        Ok(Pacer {
            start_ns,
            period_ns: period.as_nanos(),
            max_behind,
            next_frame: 0,
            next_seq: 0,
            skipped: 0,
            late: 0,
            max_backlog: 0,
        })
    }

    pub fn period(&self) -> Duration {
        Duration(self.period_ns)
    }

    pub fn start_ns(&self) -> i64 {
        self.start_ns
    }

    /// Nominal send time of slot `frame` (saturating at the end of time).
    pub fn frame_time(&self, frame: u64) -> i64 {
        let t = self.start_ns as i128 + frame as i128 * self.period_ns as i128;
        t.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// When the next packet is due: wait until then, then call [`Pacer::take`].
    pub fn next_deadline(&self) -> i64 {
        self.frame_time(self.next_frame)
    }

    /// The sequence number the next packet will carry (= packets taken so far).
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The sender is awake at `now_ns`: the packet to send right away. Applies the
    /// catch-up policy when the next slot lies more than `max_behind` periods in the
    /// past. Calling it before [`Pacer::next_deadline`] is allowed (the packet simply
    /// leaves early: its `t0` is still the nominal time).
    pub fn take(&mut self, now_ns: i64) -> Slot {
        let due = self.next_deadline();
        let behind = if now_ns > due {
            let whole = (now_ns as i128 - due as i128) / self.period_ns as i128;
            u64::try_from(whole).unwrap_or(u64::MAX)
        } else {
            0
        };
        self.max_backlog = self.max_backlog.max(behind);
        let skip = behind.saturating_sub(self.max_behind);
        self.next_frame = self.next_frame.saturating_add(skip);
        self.skipped = self.skipped.saturating_add(skip);
        let slot = Slot {
            seq: self.next_seq,
            frame: self.next_frame,
            t0_ns: self.frame_time(self.next_frame),
            skipped: skip,
        };
        self.next_frame = self.next_frame.saturating_add(1);
        self.next_seq = self.next_seq.saturating_add(1);
        slot
    }

    /// The packet of slot `t0_ns` left at `t_send_ns`; returns whether it went out
    /// late (more than one period after `t0`), and counts it.
    pub fn record_sent(&mut self, t0_ns: i64, t_send_ns: i64) -> bool {
        let late = (t_send_ns as i128 - t0_ns as i128) > self.period_ns as i128;
        if late {
            self.late += 1;
        }
        late
    }

    pub fn counters(&self) -> PacerCounters {
        PacerCounters {
            taken: self.next_seq,
            skipped: self.skipped,
            late: self.late,
            max_backlog: self.max_backlog,
        }
    }
}

/// The rate a sender achieved: `(sent − 1)` intervals between its first and last send
/// times, in packets per second. `None` with fewer than two packets or no time between
/// them.
pub fn achieved_pps(sent: u64, first_send_ns: i64, last_send_ns: i64) -> Option<f64> {
    let span = last_send_ns as i128 - first_send_ns as i128;
    if sent < 2 || span <= 0 {
        return None;
    }
    Some((sent - 1) as f64 * 1e9 / span as f64)
}

/// Whether a run sustained its target rate: at least [`SUSTAINED_FRACTION`] of it
/// achieved. Skipped slots lower the achieved rate (the run sent fewer packets in the
/// same time, or took longer for the same count), so they need no separate test. An
/// unknown achieved rate (a run of one packet) counts as sustained.
pub fn sustained(target_pps: f64, achieved: Option<f64>) -> bool {
    achieved.is_none_or(|a| a >= target_pps * SUSTAINED_FRACTION)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(max_behind: u64) -> Pacer {
        Pacer::new(1_000, Duration(100), max_behind).unwrap()
    }

    #[test]
    fn rejects_a_non_positive_period() {
        assert_eq!(
            Pacer::new(0, Duration::ZERO, 1).unwrap_err(),
            PacerError::NonPositivePeriod(Duration::ZERO)
        );
        assert_eq!(
            Pacer::new(0, Duration(-5), 1).unwrap_err().to_string(),
            "the packet period must be positive, got -5ns"
        );
    }

    #[test]
    fn on_time_sender_follows_the_grid() {
        let mut p = pacer(4);
        for i in 0..5u64 {
            let due = p.next_deadline();
            assert_eq!(due, 1_000 + 100 * i as i64);
            let s = p.take(due + 7);
            assert_eq!(
                s,
                Slot {
                    seq: i,
                    frame: i,
                    t0_ns: due,
                    skipped: 0
                }
            );
            assert!(!p.record_sent(s.t0_ns, due + 30));
        }
        assert_eq!(
            p.counters(),
            PacerCounters {
                taken: 5,
                skipped: 0,
                late: 0,
                max_backlog: 0
            }
        );
    }

    #[test]
    fn a_late_sender_catches_up_without_waiting() {
        let mut p = pacer(4);
        // Wake 3.5 periods after slot 0: behind by 3 whole periods, within the bound.
        let s0 = p.take(1_350);
        assert_eq!((s0.seq, s0.frame, s0.t0_ns, s0.skipped), (0, 0, 1_000, 0));
        assert!(p.record_sent(s0.t0_ns, 1_360));
        // The next slots are already due: taken at once, each with its own t0.
        let s1 = p.take(1_370);
        assert_eq!((s1.seq, s1.frame, s1.t0_ns), (1, 1, 1_100));
        assert!(p.record_sent(s1.t0_ns, 1_380));
        let s2 = p.take(1_390);
        assert_eq!((s2.seq, s2.frame, s2.t0_ns), (2, 2, 1_200));
        // 1_400 - 1_200 = 200 > 100: late.
        assert!(p.record_sent(s2.t0_ns, 1_400));
        let s3 = p.take(1_410);
        assert_eq!((s3.seq, s3.frame, s3.t0_ns), (3, 3, 1_300));
        // Exactly one period behind is not late.
        assert!(!p.record_sent(s3.t0_ns, 1_400));
        assert_eq!(p.next_deadline(), 1_400);
        let c = p.counters();
        assert_eq!((c.taken, c.skipped, c.late, c.max_backlog), (4, 0, 3, 3));
    }

    #[test]
    fn a_long_stall_skips_all_but_max_behind_slots() {
        let mut p = pacer(2);
        let s0 = p.take(1_000);
        assert_eq!(s0.frame, 0);
        // Next due at 1_100; wake at 2_050: 9 whole periods behind, keep 2.
        let s1 = p.take(2_050);
        assert_eq!(
            s1,
            Slot {
                seq: 1,
                frame: 8,
                t0_ns: 1_800,
                skipped: 7
            }
        );
        let s2 = p.take(2_060);
        assert_eq!((s2.seq, s2.frame, s2.t0_ns, s2.skipped), (2, 9, 1_900, 0));
        let s3 = p.take(2_070);
        assert_eq!((s3.seq, s3.frame, s3.t0_ns, s3.skipped), (3, 10, 2_000, 0));
        // Caught up: the next slot is in the future.
        assert_eq!(p.next_deadline(), 2_100);
        let c = p.counters();
        assert_eq!((c.taken, c.skipped, c.max_backlog), (4, 7, 9));
    }

    #[test]
    fn max_behind_zero_never_bursts() {
        let mut p = pacer(0);
        p.take(1_000);
        // Next due 1_100, wake at 1_550: jump to slot 5 (t0 1_500).
        let s = p.take(1_550);
        assert_eq!((s.seq, s.frame, s.t0_ns, s.skipped), (1, 5, 1_500, 4));
        assert_eq!(p.next_deadline(), 1_600);
    }

    #[test]
    fn unbounded_catch_up_never_skips() {
        let mut p = pacer(u64::MAX);
        p.take(1_000);
        let s = p.take(1_000_000);
        assert_eq!((s.frame, s.skipped), (1, 0));
    }

    #[test]
    fn early_take_keeps_the_nominal_time() {
        let mut p = pacer(1);
        let s = p.take(0);
        assert_eq!((s.frame, s.t0_ns), (0, 1_000));
    }

    #[test]
    fn grid_saturates_instead_of_overflowing() {
        let p = Pacer::new(i64::MAX - 10, Duration(100), 1).unwrap();
        assert_eq!(p.frame_time(5), i64::MAX);
        let mut p = Pacer::new(0, Duration(1), 0).unwrap();
        let s = p.take(i64::MAX);
        assert_eq!(s.frame, i64::MAX as u64);
        assert_eq!(s.t0_ns, i64::MAX);
    }

    #[test]
    fn achieved_rate_and_sustained() {
        assert_eq!(achieved_pps(0, 0, 0), None);
        assert_eq!(achieved_pps(1, 0, 100), None);
        assert_eq!(achieved_pps(5, 10, 10), None);
        // 11 packets, 10 intervals over 1 ms: 10 000 pps.
        assert_eq!(achieved_pps(11, 0, 1_000_000), Some(10_000.0));
        assert!(sustained(10_000.0, Some(9_900.0)));
        assert!(!sustained(10_000.0, Some(9_899.0)));
        assert!(sustained(10_000.0, None));
    }

    proptest::proptest! {
        /// Whatever the wake-up times, frames strictly increase, seq is contiguous,
        /// t0 is on the grid, taken = sent packets, and frame = seq + skipped.
        #[test]
        fn grid_invariants(
            max_behind in 0u64..20,
            lateness in proptest::collection::vec(0i64..5_000, 1..200),
        ) {
            let mut p = Pacer::new(10_000, Duration(250), max_behind).unwrap();
            let mut last_frame: Option<u64> = None;
            let mut skipped = 0;
            for (i, late) in lateness.iter().enumerate() {
                let now = p.next_deadline() + late;
                let s = p.take(now);
                proptest::prop_assert_eq!(s.seq, i as u64);
                if let Some(f) = last_frame {
                    proptest::prop_assert!(s.frame > f);
                }
                last_frame = Some(s.frame);
                skipped += s.skipped;
                proptest::prop_assert_eq!(s.frame, s.seq + skipped);
                proptest::prop_assert_eq!(s.t0_ns, 10_000 + 250 * s.frame as i64);
                // Never more than max_behind whole periods behind after the skip.
                proptest::prop_assert!((now - s.t0_ns) / 250 <= max_behind as i64);
            }
            proptest::prop_assert_eq!(p.counters().taken, lateness.len() as u64);
            proptest::prop_assert_eq!(p.counters().skipped, skipped);
        }
    }
}
