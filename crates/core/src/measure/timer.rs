//! The accounting of `lockstep probe timer`: periodic wake-ups on an absolute grid,
//! like cyclictest.
//!
//! The probe asks to be woken at `start + interval`, `start + 2·interval`, … and
//! measures the wake-up latency `wake − deadline` of each. This type does everything
//! except the waiting and the clock reads: it keeps the latency histogram, counts
//! overruns, and decides the next deadline, so that the probe's hot loop is "wait, read
//! the clock, call [`TimerState::record`]" and the schedule logic is tested with
//! hand-made timelines.
//!
//! # Overruns and the schedule
//!
//! The grid never slips: deadlines stay at `start + k·interval`. A wake-up later than
//! one interval (`latency > interval`) is an **overrun**; every deadline of the grid
//! that passed *strictly before* the wake-up (`deadline + j·interval < wake`, `j ≥ 1`)
//! is a **missed period** and is skipped, and the next deadline is the first grid point
//! not in the past. cyclictest skips late deadlines the same way (silently); we count
//! them. A deadline equal to the wake-up time is kept (it is due now, not missed), so a
//! latency of exactly one interval is not an overrun. The alternative — waking for
//! every missed deadline at once — would record a burst of artificial near-zero
//! latencies after each stall and hide how long the stall was.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::stats::{Histogram, Summary};
use crate::time::Duration;

/// Values the latency histogram is sized for up front, so that recording never
/// allocates during a run unless a wake-up is later than this.
const PREALLOCATE_UP_TO_NS: i64 = 10_000_000_000;

/// Why a timer run cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TimerError {
    #[error("the interval must be positive, got {0}")]
    NonPositiveInterval(Duration),
    #[error("the threshold must be positive, got {0}")]
    NonPositiveThreshold(Duration),
}

/// What one wake-up amounted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wakeup {
    /// Index of this wake-up (0 for the first).
    pub index: u64,
    /// `wake − deadline`.
    pub latency_ns: i64,
    /// Deadlines of the grid skipped because they had already passed (0 unless this
    /// wake-up was an overrun).
    pub missed: u64,
    /// The deadline to wait for next.
    pub next_deadline_ns: i64,
    /// Whether the latency exceeded the threshold (always false without one).
    pub over_threshold: bool,
}

impl Wakeup {
    /// Whether this wake-up came more than one interval late.
    pub fn is_overrun(&self) -> bool {
        self.missed > 0
    }
}

/// The first wake-up whose latency exceeded the threshold (cyclictest `-b`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ThresholdHit {
    pub threshold_ns: i64,
    pub index: u64,
    pub deadline_ns: i64,
    pub wake_ns: i64,
    pub latency_ns: i64,
    /// Time from the start of the run to the wake-up.
    pub since_start_ns: i64,
}

/// Where the largest latency happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MaxAt {
    pub index: u64,
    pub latency_ns: i64,
    pub since_start_ns: i64,
}

/// The result of a timer run (the `results` of a `probe.timer` document).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimerReport {
    pub interval_ns: i64,
    /// Number of wake-ups measured.
    pub samples: u64,
    /// Wake-up latency distribution (the result document).
    pub latency: Summary,
    /// Wake-ups later than one interval.
    pub overruns: u64,
    /// Deadlines skipped because an overrun had already passed them.
    pub missed_periods: u64,
    /// Wake-ups before their deadline (only possible if the clock was stepped back).
    pub early_wakeups: u64,
    pub max_at: Option<MaxAt>,
    /// From the start of the run (one interval before the first deadline) to the
    /// last wake-up.
    pub elapsed_ns: i64,
    pub threshold: Option<ThresholdHit>,
}

/// Accounting of a periodic wake-up run (see the module docs).
#[derive(Clone, Debug)]
pub struct TimerState {
    interval_ns: i64,
    start_ns: i64,
    threshold_ns: Option<i64>,
    latency: Histogram,
    samples: u64,
    overruns: u64,
    missed: u64,
    early: u64,
    max_at: Option<MaxAt>,
    last_wake_ns: Option<i64>,
    hit: Option<ThresholdHit>,
}

impl TimerState {
    /// A run that starts at `start_ns` (a clock reading) and wakes every `interval`;
    /// the first deadline is `start_ns + interval`.
    pub fn new(interval: Duration, start_ns: i64) -> Result<Self, TimerError> {
        if !interval.is_positive() {
            return Err(TimerError::NonPositiveInterval(interval));
        }
        let mut latency = Histogram::new();
        // Size the histogram once, here, rather than on the first slow wake-up.
        latency.record(PREALLOCATE_UP_TO_NS);
        latency.reset();
        Ok(TimerState {
            interval_ns: interval.as_nanos(),
            start_ns,
            threshold_ns: None,
            latency,
            samples: 0,
            overruns: 0,
            missed: 0,
            early: 0,
            max_at: None,
            last_wake_ns: None,
            hit: None,
        })
    }

    /// Flags wake-ups later than `threshold`; the first one is kept as the
    /// [`ThresholdHit`] of the report.
    pub fn with_threshold(mut self, threshold: Duration) -> Result<Self, TimerError> {
        if !threshold.is_positive() {
            return Err(TimerError::NonPositiveThreshold(threshold));
        }
        self.threshold_ns = Some(threshold.as_nanos());
        Ok(self)
    }

    pub fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns)
    }

    /// The deadline of the first wake-up.
    pub fn first_deadline_ns(&self) -> i64 {
        self.start_ns.saturating_add(self.interval_ns)
    }

    /// Accounts one wake-up at `wake_ns` for `deadline_ns` and returns the next
    /// deadline. Allocation-free (the histogram is sized in [`TimerState::new`]).
    #[inline]
    pub fn record(&mut self, deadline_ns: i64, wake_ns: i64) -> Wakeup {
        let index = self.samples;
        let latency = wake_ns.saturating_sub(deadline_ns);
        self.latency.record(latency);
        self.samples += 1;
        self.last_wake_ns = Some(wake_ns);
        if latency < 0 {
            self.early += 1;
        }
        // Grid points deadline + j·interval (j ≥ 1) strictly before the wake-up.
        let missed = if latency > self.interval_ns {
            ((latency - 1) / self.interval_ns) as u64
        } else {
            0
        };
        if missed > 0 {
            self.overruns += 1;
            self.missed = self.missed.saturating_add(missed);
        }
        let next = deadline_ns as i128 + (missed as i128 + 1) * self.interval_ns as i128;
        let next_deadline_ns = next.clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        let since_start_ns = wake_ns.saturating_sub(self.start_ns);
        if self.max_at.is_none_or(|m| latency > m.latency_ns) {
            self.max_at = Some(MaxAt {
                index,
                latency_ns: latency,
                since_start_ns,
            });
        }
        let over_threshold = self.threshold_ns.is_some_and(|t| latency > t);
        if over_threshold && self.hit.is_none() {
            self.hit = Some(ThresholdHit {
                threshold_ns: self.threshold_ns.unwrap_or_default(),
                index,
                deadline_ns,
                wake_ns,
                latency_ns: latency,
                since_start_ns,
            });
        }
        Wakeup {
            index,
            latency_ns: latency,
            missed,
            next_deadline_ns,
            over_threshold,
        }
    }

    /// Wake-ups recorded so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The latency histogram so far (for progress lines).
    pub fn latency(&self) -> &Histogram {
        &self.latency
    }

    pub fn overruns(&self) -> u64 {
        self.overruns
    }

    pub fn missed_periods(&self) -> u64 {
        self.missed
    }

    /// The first wake-up over the threshold, if any.
    pub fn threshold_hit(&self) -> Option<ThresholdHit> {
        self.hit
    }

    /// Time from the start of the run to the last wake-up (0 before the first).
    pub fn elapsed(&self) -> Duration {
        Duration::from_nanos(
            self.last_wake_ns
                .map_or(0, |w| w.saturating_sub(self.start_ns)),
        )
    }

    /// Adds another run of the same interval to this one (`probe timer --cpus`: one
    /// state per CPU, merged for the run's summary): the distributions and counts add
    /// up, the largest latency and the earliest threshold hit win, the elapsed time
    /// spans both runs.
    pub fn merge(&mut self, other: &TimerState) {
        self.latency.merge(&other.latency);
        self.samples += other.samples;
        self.overruns += other.overruns;
        self.missed = self.missed.saturating_add(other.missed);
        self.early += other.early;
        self.start_ns = self.start_ns.min(other.start_ns);
        self.last_wake_ns = match (self.last_wake_ns, other.last_wake_ns) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(m) = other.max_at {
            if self.max_at.is_none_or(|s| m.latency_ns > s.latency_ns) {
                self.max_at = Some(m);
            }
        }
        if let Some(h) = other.hit {
            if self.hit.is_none_or(|s| h.wake_ns < s.wake_ns) {
                self.hit = Some(h);
            }
        }
    }

    pub fn report(&self) -> TimerReport {
        TimerReport {
            interval_ns: self.interval_ns,
            samples: self.samples,
            latency: self.latency.summary(),
            overruns: self.overruns,
            missed_periods: self.missed,
            early_wakeups: self.early,
            max_at: self.max_at,
            elapsed_ns: self.elapsed().as_nanos(),
            threshold: self.hit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const US: i64 = 1_000;

    fn state(interval_us: i64) -> TimerState {
        TimerState::new(Duration::from_micros(interval_us), 1_000_000).unwrap()
    }

    #[test]
    fn on_time_wakeups_follow_the_grid() {
        let mut s = state(100);
        let mut d = s.first_deadline_ns();
        assert_eq!(d, 1_100_000);
        for (i, lat) in [2 * US, 3 * US, 0, 100 * US].into_iter().enumerate() {
            let w = s.record(d, d + lat);
            assert_eq!(w.index, i as u64);
            assert_eq!(w.latency_ns, lat);
            assert_eq!(
                w.missed, 0,
                "a latency of exactly one interval is not an overrun"
            );
            assert_eq!(w.next_deadline_ns, d + 100 * US);
            d = w.next_deadline_ns;
        }
        let r = s.report();
        assert_eq!(r.samples, 4);
        assert_eq!(r.overruns, 0);
        assert_eq!(r.missed_periods, 0);
        assert_eq!(r.latency.count, 4);
        assert_eq!(r.latency.min_ns, Some(0));
        assert_eq!(r.latency.max_ns, Some(100 * US));
        assert_eq!(
            r.max_at,
            Some(MaxAt {
                index: 3,
                latency_ns: 100 * US,
                since_start_ns: 500 * US
            })
        );
        // Start 1 ms, last wake 1.4 ms + 100 us.
        assert_eq!(r.elapsed_ns, 500 * US);
        assert_eq!(r.threshold, None);
    }

    #[test]
    fn overruns_skip_to_the_next_future_deadline() {
        // Interval 100 us, deadlines at 100, 200, 300, ... (start 0).
        let mut s = TimerState::new(Duration::from_micros(100), 0).unwrap();
        // Wake at 201 us for the 100 us deadline: 200 us passed, skip it -> next 300.
        let w = s.record(100 * US, 201 * US);
        assert_eq!(
            (w.latency_ns, w.missed, w.next_deadline_ns),
            (101 * US, 1, 300 * US)
        );
        assert!(w.is_overrun());
        // Wake at exactly 500 us for 300: 400 passed, 500 is due now (kept).
        let w = s.record(300 * US, 500 * US);
        assert_eq!(
            (w.latency_ns, w.missed, w.next_deadline_ns),
            (200 * US, 1, 500 * US)
        );
        // On time.
        let w = s.record(500 * US, 503 * US);
        assert_eq!((w.missed, w.next_deadline_ns), (0, 600 * US));
        // A 1.05 ms stall: 700..=1600 passed (10 deadlines), next 1700.
        let w = s.record(600 * US, 1650 * US);
        assert_eq!((w.missed, w.next_deadline_ns), (10, 1700 * US));
        // One nanosecond past one interval.
        let w = s.record(1700 * US, 1800 * US + 1);
        assert_eq!((w.missed, w.next_deadline_ns), (1, 1900 * US));
        let r = s.report();
        assert_eq!(r.samples, 5);
        assert_eq!(r.overruns, 4);
        assert_eq!(r.missed_periods, 13);
        assert_eq!(
            r.max_at.map(|m| (m.index, m.latency_ns)),
            Some((3, 1050 * US))
        );
        assert_eq!(r.elapsed_ns, 1800 * US + 1);
    }

    #[test]
    fn early_wakeups_are_counted_and_kept_in_the_distribution() {
        let mut s = state(1000);
        let d = s.first_deadline_ns();
        let w = s.record(d, d - 5);
        assert_eq!(
            (w.latency_ns, w.missed, w.next_deadline_ns),
            (-5, 0, d + 1_000_000)
        );
        let r = s.report();
        assert_eq!(r.early_wakeups, 1);
        assert_eq!(r.latency.min_ns, Some(-5));
    }

    #[test]
    fn threshold_keeps_the_first_hit() {
        let mut s = state(100)
            .with_threshold(Duration::from_micros(10))
            .unwrap();
        let d0 = s.first_deadline_ns();
        assert!(
            !s.record(d0, d0 + 10 * US).over_threshold,
            "equal is not over"
        );
        let d1 = d0 + 100 * US;
        let w = s.record(d1, d1 + 10 * US + 1);
        assert!(w.over_threshold);
        let d2 = w.next_deadline_ns;
        assert!(s.record(d2, d2 + 50 * US).over_threshold);
        assert_eq!(
            s.threshold_hit(),
            Some(ThresholdHit {
                threshold_ns: 10 * US,
                index: 1,
                deadline_ns: d1,
                wake_ns: d1 + 10 * US + 1,
                latency_ns: 10 * US + 1,
                since_start_ns: 210 * US + 1,
            })
        );
    }

    #[test]
    fn merged_runs_add_up() {
        let mut a = TimerState::new(Duration::from_micros(100), 0)
            .unwrap()
            .with_threshold(Duration::from_micros(50))
            .unwrap();
        let mut b = TimerState::new(Duration::from_micros(100), 10 * US)
            .unwrap()
            .with_threshold(Duration::from_micros(50))
            .unwrap();
        a.record(100 * US, 102 * US);
        a.record(200 * US, 301 * US); // overrun, over the threshold
        b.record(110 * US, 170 * US); // over the threshold, earlier
        b.record(210 * US, 215 * US);
        b.record(310 * US, 520 * US); // overrun (2 missed), the largest
        let mut m = a.clone();
        m.merge(&b);
        let r = m.report();
        assert_eq!(r.samples, 5);
        assert_eq!(r.latency.count, 5);
        assert_eq!(r.latency.min_ns, Some(2 * US));
        assert_eq!(r.latency.max_ns, Some(210 * US));
        assert_eq!((r.overruns, r.missed_periods), (2, 3));
        assert_eq!(r.max_at.map(|x| x.latency_ns), Some(210 * US));
        assert_eq!(r.threshold.map(|h| h.wake_ns), Some(170 * US));
        assert_eq!(r.elapsed_ns, 520 * US);
    }

    #[test]
    fn bad_settings_are_errors() {
        assert_eq!(
            TimerState::new(Duration::ZERO, 0).unwrap_err(),
            TimerError::NonPositiveInterval(Duration::ZERO)
        );
        assert_eq!(
            state(1)
                .with_threshold(Duration(-1))
                .unwrap_err()
                .to_string(),
            "the threshold must be positive, got -1ns"
        );
    }

    #[test]
    fn extreme_instants_saturate_instead_of_overflowing() {
        let mut s = TimerState::new(Duration::SECOND, i64::MAX - 10).unwrap();
        assert_eq!(s.first_deadline_ns(), i64::MAX);
        let w = s.record(i64::MAX, i64::MAX);
        assert_eq!(w.next_deadline_ns, i64::MAX);
        let w = s.record(i64::MIN, i64::MAX);
        assert_eq!(w.latency_ns, i64::MAX);
        assert!(w.missed > 0);
        assert_eq!(s.report().samples, 2);
    }

    proptest! {
        /// Whatever the wake-ups, every deadline handed out lies on the grid, is later
        /// than the wake-up that produced it (or equal), and the deadlines passed over
        /// plus those waited for account for the whole span.
        #[test]
        fn grid_is_kept(interval in 1i64..10_000, lates in prop::collection::vec(0i64..50_000, 1..200)) {
            let start = 12_345;
            let mut s = TimerState::new(Duration(interval), start).unwrap();
            let mut d = s.first_deadline_ns();
            let mut overruns = 0;
            for &l in &lates {
                let w = s.record(d, d + l);
                prop_assert_eq!((w.next_deadline_ns - start) % interval, 0);
                prop_assert!(w.next_deadline_ns >= d + l);
                prop_assert!(w.next_deadline_ns - interval <= d + l);
                prop_assert_eq!(w.is_overrun(), l > interval);
                overruns += u64::from(l > interval);
                d = w.next_deadline_ns;
            }
            let r = s.report();
            prop_assert_eq!(r.overruns, overruns);
            // Deadlines handed out = waited for + skipped.
            prop_assert_eq!(((d - start) / interval) as u64, r.samples + r.missed_periods + 1);
        }
    }
}
