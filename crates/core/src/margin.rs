//! The adaptive spin margin of the hybrid wait strategy.
//!
//! Hybrid waiting sleeps until `deadline - margin` and spins the rest. If the sleep
//! overshoots by more than the margin, the wake-up is late; if the margin is much
//! larger than the overshoot, CPU time is burnt spinning. The right margin is the tail
//! of this host's sleep overshoot, which differs by orders of magnitude between a tuned
//! PREEMPT_RT box (a few µs) and a busy VM (hundreds of µs). The tuner watches every
//! sleep's overshoot and keeps the margin at the 99.9th percentile of the recent ones
//! plus a slack, within `[min, max]`:
//!
//! - **fast attack**: an overshoot beyond the margin raises the margin at once;
//! - **slow release**: the margin is recomputed from the last two windows of
//!   [`WINDOW`] sleeps, so it falls back only after a quiet stretch.

use crate::time::Duration;

/// Sleeps per window.
pub const WINDOW: u32 = 1024;
/// Overshoots are binned in 1 µs buckets up to this many µs; larger ones land in the
/// last bucket (the margin is capped well below anyway).
const BUCKETS: usize = 2048;
/// Quantile of the overshoot the margin covers, in parts per million.
const QUANTILE_PPM: u64 = 999_000;

#[derive(Clone, Debug)]
pub struct MarginTuner {
    margin_ns: i64,
    min_ns: i64,
    max_ns: i64,
    slack_ns: i64,
    current: Box<[u32; BUCKETS]>,
    previous: Box<[u32; BUCKETS]>,
    in_current: u32,
    in_previous: u32,
}

impl MarginTuner {
    /// Starts at `initial`, stays within `[min, max]` and adds `slack` to the observed
    /// quantile. Negative values count as zero; `max` below `min` is raised to `min`.
    pub fn new(initial: Duration, min: Duration, max: Duration, slack: Duration) -> Self {
        let min_ns = min.as_nanos().max(0);
        let max_ns = max.as_nanos().max(min_ns);
        MarginTuner {
            margin_ns: initial.as_nanos().clamp(min_ns, max_ns),
            min_ns,
            max_ns,
            slack_ns: slack.as_nanos().max(0),
            current: Box::new([0; BUCKETS]),
            previous: Box::new([0; BUCKETS]),
            in_current: 0,
            in_previous: 0,
        }
    }

    /// The margin to use for the next sleep.
    #[inline]
    pub fn margin(&self) -> Duration {
        Duration(self.margin_ns)
    }

    /// Lowers the ceiling, e.g. to a fraction of the caller's period so a real-time
    /// thread never spins through whole periods.
    pub fn set_max(&mut self, max: Duration) {
        self.max_ns = max.as_nanos().max(self.min_ns);
        self.margin_ns = self.margin_ns.min(self.max_ns);
    }

    /// Records how late a sleep returned after its target (`woke - target`).
    #[inline]
    pub fn observe(&mut self, overshoot: Duration) {
        let ns = overshoot.as_nanos().max(0);
        let bucket = ((ns / 1_000) as usize).min(BUCKETS - 1);
        self.current[bucket] += 1;
        self.in_current += 1;
        let wanted = ns.saturating_add(self.slack_ns);
        if wanted > self.margin_ns {
            self.margin_ns = wanted.min(self.max_ns);
        }
        if self.in_current >= WINDOW {
            self.roll();
        }
    }

    /// Recomputes the margin from the last two windows and starts a new window.
    fn roll(&mut self) {
        let total = (self.in_current + self.in_previous) as u64;
        let rank = (total * QUANTILE_PPM).div_ceil(1_000_000).max(1);
        let mut seen = 0u64;
        let mut quantile_ns = 0i64;
        for b in 0..BUCKETS {
            seen += (self.current[b] + self.previous[b]) as u64;
            if seen >= rank {
                // upper edge of the 1 µs bucket
                quantile_ns = (b as i64 + 1) * 1_000;
                break;
            }
        }
        self.margin_ns = quantile_ns
            .saturating_add(self.slack_ns)
            .clamp(self.min_ns, self.max_ns);
        std::mem::swap(&mut self.current, &mut self.previous);
        self.current.fill(0);
        self.in_previous = self.in_current;
        self.in_current = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: i64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn attack_is_immediate_and_capped() {
        let mut t = MarginTuner::new(us(50), us(5), us(300), us(2));
        t.observe(us(10));
        assert_eq!(t.margin(), us(50));
        t.observe(us(120));
        assert_eq!(t.margin(), us(122));
        t.observe(us(5_000));
        assert_eq!(t.margin(), us(300));
    }

    #[test]
    fn release_follows_the_quantile_of_two_windows() {
        let mut t = MarginTuner::new(us(50), us(5), us(1_000), us(2));
        // a window of quiet sleeps (3.5 us) with one 200 us outlier
        t.observe(us(200));
        for _ in 1..WINDOW {
            t.observe(Duration(3_500));
        }
        // 1 outlier in 1024: below the 0.1 % tail → quantile bucket [3, 4) us → 4 + 2
        assert_eq!(t.margin(), us(6));
        // two outliers in the next window: 3 of 2048 ≥ 0.1 % → the tail covers them
        t.observe(us(200));
        t.observe(us(200));
        assert_eq!(t.margin(), us(202));
        for _ in 2..WINDOW {
            t.observe(Duration(3_500));
        }
        assert_eq!(t.margin(), us(201 + 2));
        // a quiet window: the two outliers, now 2 of 2048, fall below the 0.1 % tail
        for _ in 0..WINDOW {
            t.observe(Duration(3_500));
        }
        assert_eq!(t.margin(), us(6));
    }

    #[test]
    fn bounds_hold() {
        let mut t = MarginTuner::new(us(1), us(5), us(3), us(0));
        assert_eq!(t.margin(), us(5)); // max raised to min
        t.set_max(us(100));
        for _ in 0..WINDOW {
            t.observe(Duration(-7));
        }
        assert_eq!(t.margin(), us(5));
        t.set_max(us(1));
        assert_eq!(t.margin(), us(5));
    }
}
