//! The accounting of `lockstep probe noise`: what the OS steals from a busy loop.
//!
//! Two views of the same question:
//!
//! - [`GapRecorder`] (oslat-style): a loop reads the clock back to back; every gap
//!   between two consecutive readings is recorded. Without interference a gap is the
//!   cost of one clock read (tens of nanoseconds); anything longer is time the loop did
//!   not get (interrupts, preemption, SMIs, hypervisor steal). Gaps above a threshold
//!   are summed into the *stolen* time.
//! - [`TickRecorder`] (the *dummy program* of toussaint2018, host tuning): a loop spins
//!   until each tick `start + i·period` of an ideal grid and timestamps it. The
//!   interval between consecutive timestamps should be exactly the period; its
//!   deviation shows the network-independent jitter a packet stream with that period
//!   would see. Ticks are never skipped: after a stall the loop catches up with
//!   back-to-back ticks (deviation ≈ −period), as a receiver drains packets that
//!   queued up meanwhile. Spikes (deviation above a threshold) are listed with their
//!   time since the start, up to a cap; all are counted.
//!
//! Nothing here reads a clock; the probe hands in the readings.

use serde::Serialize;
use thiserror::Error;

use crate::stats::{Histogram, Summary};
use crate::time::Duration;

/// Magnitude the histograms are sized for up front (recording stays allocation-free
/// for gaps up to this long).
const PREALLOCATE_UP_TO_NS: i64 = 10_000_000_000;

/// Why a noise run cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NoiseError {
    #[error("the threshold must be positive, got {0}")]
    NonPositiveThreshold(Duration),
    #[error("the period must be positive, got {0}")]
    NonPositivePeriod(Duration),
    #[error("the spike threshold must be positive, got {0}")]
    NonPositiveSpike(Duration),
}

fn preallocated() -> Histogram {
    let mut h = Histogram::new();
    h.record(PREALLOCATE_UP_TO_NS);
    h.record(-PREALLOCATE_UP_TO_NS);
    h.reset();
    h
}

/// Count of values in `[from_ns, to_ns)`: one power-of-two range of a distribution,
/// the coarse shape that can be compared with other tools' histograms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Pow2Bucket {
    pub from_ns: i64,
    pub to_ns: i64,
    pub count: u64,
}

/// Counts of the non-negative values of `h` per power-of-two range: `[0,1)`, `[1,2)`,
/// `[2,4)`, `[4,8)`, … (empty ranges left out). Exact, because no bucket of the
/// histogram straddles a power of two.
pub fn pow2_buckets(h: &Histogram) -> Vec<Pow2Bucket> {
    let mut counts = [0u64; 64];
    for (v, c) in h.buckets() {
        if v < 0 {
            continue;
        }
        let k = (u64::BITS - (v as u64).leading_zeros()) as usize; // 0 for 0, 1 for 1, 2 for 2..4
        if let Some(slot) = counts.get_mut(k) {
            *slot = slot.saturating_add(c);
        }
    }
    counts
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c > 0)
        .map(|(k, &c)| {
            let (from, to) = if k == 0 {
                (0, 1)
            } else {
                (1i64 << (k - 1), (1i128 << k).min(i64::MAX as i128) as i64)
            };
            Pow2Bucket {
                from_ns: from,
                to_ns: to,
                count: c,
            }
        })
        .collect()
}

/// The result of the oslat-style run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GapReport {
    /// Clock readings taken.
    pub reads: u64,
    /// Distribution of the gaps between consecutive readings.
    pub gaps: Summary,
    /// Gap counts per power-of-two range.
    pub gaps_pow2: Vec<Pow2Bucket>,
    pub threshold_ns: i64,
    /// Gaps longer than the threshold.
    pub above_threshold: u64,
    /// Sum of the gaps longer than the threshold.
    pub stolen_ns: i64,
    /// From the first reading to the last.
    pub span_ns: i64,
    /// `stolen_ns / span_ns` (0 for an empty span).
    pub stolen_fraction: f64,
    /// Where the longest gap ended, from the first reading.
    pub max_gap_at_ns: Option<i64>,
    /// Readings smaller than the one before (only if the clock was stepped back).
    pub backward_steps: u64,
}

/// Gaps shorter than this are counted in a plain array (one increment on the hot path)
/// and folded into the histogram when a report is made: nearly every gap of the
/// oslat loop is a single clock read of a few tens of nanoseconds, so the loop runs
/// about as fast as the clock can be read.
const DIRECT_NS: usize = 1024;

/// Records the gaps between consecutive clock readings (see the module docs).
#[derive(Clone, Debug)]
pub struct GapRecorder {
    threshold_ns: i64,
    /// Gaps in `0..DIRECT_NS`, by value.
    direct: Box<[u64]>,
    /// All other gaps (long and negative ones).
    gaps: Histogram,
    first_ns: Option<i64>,
    last_ns: i64,
    reads: u64,
    above: u64,
    stolen_ns: i64,
    max_gap_ns: i64,
    max_gap_at_ns: Option<i64>,
    backward: u64,
    /// The spans of the recorders merged into this one.
    merged_span_ns: i64,
}

impl GapRecorder {
    /// Gaps longer than `threshold` count as stolen time.
    pub fn new(threshold: Duration) -> Result<Self, NoiseError> {
        if !threshold.is_positive() {
            return Err(NoiseError::NonPositiveThreshold(threshold));
        }
        Ok(GapRecorder {
            threshold_ns: threshold.as_nanos(),
            direct: vec![0; DIRECT_NS].into_boxed_slice(),
            gaps: preallocated(),
            first_ns: None,
            last_ns: 0,
            reads: 0,
            above: 0,
            stolen_ns: 0,
            max_gap_ns: i64::MIN,
            max_gap_at_ns: None,
            backward: 0,
            merged_span_ns: 0,
        })
    }

    /// Accounts one clock reading; returns the gap since the previous one (`None` for
    /// the first reading). Allocation-free.
    #[inline]
    pub fn record(&mut self, t_ns: i64) -> Option<i64> {
        self.reads += 1;
        let Some(first) = self.first_ns else {
            self.first_ns = Some(t_ns);
            self.last_ns = t_ns;
            return None;
        };
        let gap = t_ns.saturating_sub(self.last_ns);
        self.last_ns = t_ns;
        match self.direct.get_mut(gap as u64 as usize) {
            Some(c) if gap >= 0 => *c += 1,
            _ => self.gaps.record(gap),
        }
        if gap < 0 {
            self.backward += 1;
        } else if gap > self.threshold_ns {
            self.above += 1;
            self.stolen_ns = self.stolen_ns.saturating_add(gap);
        }
        if gap > self.max_gap_ns {
            self.max_gap_ns = gap;
            self.max_gap_at_ns = Some(t_ns.saturating_sub(first));
        }
        Some(gap)
    }

    /// Whether a gap returned by [`GapRecorder::record`] counts as stolen time.
    #[inline]
    pub fn is_above(&self, gap_ns: i64) -> bool {
        gap_ns > self.threshold_ns
    }

    pub fn reads(&self) -> u64 {
        self.reads
    }

    /// All gaps so far as one histogram (builds it: for reports and progress lines,
    /// not for the hot loop).
    pub fn gaps(&self) -> Histogram {
        let mut h = self.gaps.clone();
        for (v, &c) in self.direct.iter().enumerate() {
            h.record_n(v as i64, c);
        }
        h
    }

    /// The longest gap so far.
    pub fn max_gap(&self) -> Option<i64> {
        (self.reads > 1).then_some(self.max_gap_ns)
    }

    /// From the first reading to the last (after [`GapRecorder::merge`]: the spans
    /// added up, so that the stolen fraction is of the time measured on all CPUs).
    pub fn span(&self) -> Duration {
        let own = self.first_ns.map_or(0, |f| self.last_ns.saturating_sub(f));
        Duration::from_nanos(own.saturating_add(self.merged_span_ns))
    }

    /// Adds another CPU's gaps to these (`probe noise --cpus`): distributions and
    /// counts add up, spans too; the longest gap keeps where it happened on its CPU.
    pub fn merge(&mut self, other: &GapRecorder) {
        if other.reads > 1 && (self.reads <= 1 || other.max_gap_ns > self.max_gap_ns) {
            self.max_gap_ns = other.max_gap_ns;
            self.max_gap_at_ns = other.max_gap_at_ns;
        }
        for (c, o) in self.direct.iter_mut().zip(other.direct.iter()) {
            *c += o;
        }
        self.gaps.merge(&other.gaps);
        self.reads += other.reads;
        self.above += other.above;
        self.stolen_ns = self.stolen_ns.saturating_add(other.stolen_ns);
        self.backward += other.backward;
        self.merged_span_ns = self.merged_span_ns.saturating_add(other.span().as_nanos());
    }

    pub fn stolen(&self) -> Duration {
        Duration::from_nanos(self.stolen_ns)
    }

    pub fn report(&self) -> GapReport {
        let span_ns = self.span().as_nanos();
        let gaps = self.gaps();
        GapReport {
            reads: self.reads,
            gaps: gaps.summary(),
            gaps_pow2: pow2_buckets(&gaps),
            threshold_ns: self.threshold_ns,
            above_threshold: self.above,
            stolen_ns: self.stolen_ns,
            span_ns,
            stolen_fraction: if span_ns > 0 {
                self.stolen_ns as f64 / span_ns as f64
            } else {
                0.0
            },
            max_gap_at_ns: self.max_gap_at_ns,
            backward_steps: self.backward,
        }
    }
}

/// What one tick of the dummy program amounted to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tick {
    pub index: u64,
    /// The ideal grid point `start + (index+1)·period`.
    pub deadline_ns: i64,
    /// `timestamp − deadline`.
    pub lateness_ns: i64,
    /// `timestamp − previous timestamp` (`None` for the first tick).
    pub interval_ns: Option<i64>,
    /// `interval − period`.
    pub deviation_ns: Option<i64>,
    /// Whether the deviation exceeded the spike threshold.
    pub spike: bool,
}

/// One spike of the dummy program: a tick interval longer than `period + spike`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Spike {
    pub index: u64,
    /// Timestamp of the tick, from the start of the run.
    pub since_start_ns: i64,
    pub interval_ns: i64,
    pub deviation_ns: i64,
}

/// The result of a dummy-program run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TickReport {
    pub period_ns: i64,
    pub ticks: u64,
    /// Distribution of `interval − period` over consecutive ticks (`ticks − 1` values).
    pub deviation: Summary,
    /// Distribution of `timestamp − ideal grid point`.
    pub lateness: Summary,
    pub spike_threshold_ns: i64,
    /// All spikes, counted.
    pub spikes_total: u64,
    /// The first spikes, up to the cap.
    pub spikes: Vec<Spike>,
    /// Whether spikes were left out of the list.
    pub spikes_truncated: bool,
    /// Ticks served more than one period after their grid point (catching up after
    /// a stall).
    pub late_ticks: u64,
    /// From the start of the run to the last tick.
    pub span_ns: i64,
}

/// Records the ticks of the dummy program (see the module docs).
#[derive(Clone, Debug)]
pub struct TickRecorder {
    start_ns: i64,
    period_ns: i64,
    spike_ns: i64,
    keep: usize,
    ticks: u64,
    prev_ns: Option<i64>,
    last_ns: Option<i64>,
    deviation: Histogram,
    lateness: Histogram,
    spikes: Vec<Spike>,
    spikes_total: u64,
    late: u64,
    /// The spans of the recorders merged into this one.
    merged_span_ns: i64,
}

impl TickRecorder {
    /// A grid starting at `start_ns` (a clock reading) with ticks every `period`, the
    /// first one at `start_ns + period`; spikes are deviations above `spike`; the
    /// first `keep` spikes are listed (the list is allocated here, once).
    pub fn new(
        start_ns: i64,
        period: Duration,
        spike: Duration,
        keep: usize,
    ) -> Result<Self, NoiseError> {
        if !period.is_positive() {
            return Err(NoiseError::NonPositivePeriod(period));
        }
        if !spike.is_positive() {
            return Err(NoiseError::NonPositiveSpike(spike));
        }
        Ok(TickRecorder {
            start_ns,
            period_ns: period.as_nanos(),
            spike_ns: spike.as_nanos(),
            keep,
            ticks: 0,
            prev_ns: None,
            last_ns: None,
            deviation: preallocated(),
            lateness: preallocated(),
            // grows as spikes come: `keep` is only the most it holds
            spikes: Vec::with_capacity(keep.min(1024)),
            spikes_total: 0,
            late: 0,
            merged_span_ns: 0,
        })
    }

    /// Grid point of tick `index`: `start + (index+1)·period`, saturating.
    pub fn deadline(&self, index: u64) -> i64 {
        let v = self.start_ns as i128 + (index as i128 + 1) * self.period_ns as i128;
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// The grid point of the next tick to record.
    #[inline]
    pub fn next_deadline(&self) -> i64 {
        self.deadline(self.ticks)
    }

    /// Accounts the timestamp of the next tick. Allocation-free.
    #[inline]
    pub fn record(&mut self, t_ns: i64) -> Tick {
        let index = self.ticks;
        let deadline_ns = self.deadline(index);
        let lateness_ns = t_ns.saturating_sub(deadline_ns);
        self.lateness.record(lateness_ns);
        if lateness_ns > self.period_ns {
            self.late += 1;
        }
        let interval_ns = self.prev_ns.map(|p| t_ns.saturating_sub(p));
        let deviation_ns = interval_ns.map(|i| i.saturating_sub(self.period_ns));
        let mut spike = false;
        if let (Some(interval), Some(dev)) = (interval_ns, deviation_ns) {
            self.deviation.record(dev);
            if dev > self.spike_ns {
                spike = true;
                self.spikes_total += 1;
                if self.spikes.len() < self.keep {
                    self.spikes.push(Spike {
                        index,
                        since_start_ns: t_ns.saturating_sub(self.start_ns),
                        interval_ns: interval,
                        deviation_ns: dev,
                    });
                }
            }
        }
        self.prev_ns = Some(t_ns);
        self.last_ns = Some(t_ns);
        self.ticks += 1;
        Tick {
            index,
            deadline_ns,
            lateness_ns,
            interval_ns,
            deviation_ns,
            spike,
        }
    }

    pub fn ticks(&self) -> u64 {
        self.ticks
    }

    pub fn spikes_total(&self) -> u64 {
        self.spikes_total
    }

    pub fn deviation(&self) -> &Histogram {
        &self.deviation
    }

    /// From the start to the last tick (after [`TickRecorder::merge`]: the spans
    /// added up).
    pub fn span(&self) -> Duration {
        let own = self.last_ns.map_or(0, |l| l.saturating_sub(self.start_ns));
        Duration::from_nanos(own.saturating_add(self.merged_span_ns))
    }

    /// Adds another CPU's ticks of the same period to these (`probe noise --cpus`):
    /// distributions and counts add up, spans too; its spikes follow these in the
    /// list while there is room.
    pub fn merge(&mut self, other: &TickRecorder) {
        self.ticks += other.ticks;
        self.deviation.merge(&other.deviation);
        self.lateness.merge(&other.lateness);
        let room = self.keep.saturating_sub(self.spikes.len());
        self.spikes.extend(other.spikes.iter().take(room).copied());
        self.spikes_total += other.spikes_total;
        self.late += other.late;
        self.merged_span_ns = self.merged_span_ns.saturating_add(other.span().as_nanos());
    }

    pub fn report(&self) -> TickReport {
        TickReport {
            period_ns: self.period_ns,
            ticks: self.ticks,
            deviation: self.deviation.summary(),
            lateness: self.lateness.summary(),
            spike_threshold_ns: self.spike_ns,
            spikes_total: self.spikes_total,
            spikes: self.spikes.clone(),
            spikes_truncated: self.spikes_total > self.spikes.len() as u64,
            late_ticks: self.late,
            span_ns: self.span().as_nanos(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn merged_cpus_add_up() {
        let mut a = GapRecorder::new(Duration::from_nanos(100)).unwrap();
        let mut b = GapRecorder::new(Duration::from_nanos(100)).unwrap();
        for t in [0, 20, 520, 540] {
            a.record(t); // gaps 20, 500 (stolen), 20; span 540
        }
        for t in [10_000, 10_030, 12_030] {
            b.record(t); // gaps 30, 2000 (stolen); span 2030
        }
        a.merge(&b);
        let r = a.report();
        assert_eq!((r.reads, r.gaps.count, r.above_threshold), (7, 5, 2));
        assert_eq!((r.stolen_ns, r.span_ns), (2500, 2570));
        assert_eq!((r.gaps.max_ns, r.max_gap_at_ns), (Some(2000), Some(2030)));

        let p = Duration::from_nanos(1_000);
        let s = Duration::from_nanos(100);
        let mut x = TickRecorder::new(0, p, s, 2).unwrap();
        let mut y = TickRecorder::new(5_000, p, s, 2).unwrap();
        for t in [1_000, 2_500, 3_000] {
            x.record(t); // deviations 500 (spike), -500
        }
        for t in [6_000, 7_000, 8_300, 9_600] {
            y.record(t); // deviations 0, 300 (spike), 300 (spike)
        }
        x.merge(&y);
        let r = x.report();
        assert_eq!((r.ticks, r.deviation.count, r.spikes_total), (7, 5, 3));
        assert_eq!(r.spikes.len(), 2, "the list keeps its limit");
        assert!(r.spikes_truncated);
        assert_eq!(r.span_ns, 3_000 + 4_600);
    }

    #[test]
    fn gaps_and_stolen_time() {
        let mut g = GapRecorder::new(Duration::from_nanos(100)).unwrap();
        // Readings: gaps 20, 20, 500 (stolen), 20, 100 (not above), 2000 (stolen).
        let reads = [1_000, 1_020, 1_040, 1_540, 1_560, 1_660, 3_660];
        let gaps: Vec<_> = reads.iter().map(|&t| g.record(t)).collect();
        assert_eq!(
            gaps,
            vec![
                None,
                Some(20),
                Some(20),
                Some(500),
                Some(20),
                Some(100),
                Some(2000)
            ]
        );
        assert!(g.is_above(101));
        assert!(!g.is_above(100));
        let r = g.report();
        assert_eq!(r.reads, 7);
        assert_eq!(r.gaps.count, 6);
        assert_eq!(r.gaps.min_ns, Some(20));
        assert_eq!(r.gaps.max_ns, Some(2000));
        assert_eq!(r.above_threshold, 2);
        assert_eq!(r.stolen_ns, 2500);
        assert_eq!(r.span_ns, 2660);
        assert_eq!(r.stolen_fraction, 2500.0 / 2660.0);
        assert_eq!(r.max_gap_at_ns, Some(2660));
        assert_eq!(g.max_gap(), Some(2000));
        assert_eq!(r.backward_steps, 0);
        assert_eq!(
            r.gaps_pow2,
            vec![
                Pow2Bucket {
                    from_ns: 16,
                    to_ns: 32,
                    count: 3
                },
                Pow2Bucket {
                    from_ns: 64,
                    to_ns: 128,
                    count: 1
                },
                Pow2Bucket {
                    from_ns: 256,
                    to_ns: 512,
                    count: 1
                },
                Pow2Bucket {
                    from_ns: 1024,
                    to_ns: 2048,
                    count: 1
                },
            ]
        );
    }

    #[test]
    fn short_and_long_gaps_end_up_in_one_distribution() {
        // Gaps on both sides of the direct-count limit.
        let mut g = GapRecorder::new(Duration::from_micros(10)).unwrap();
        let mut t = 0;
        assert_eq!(g.record(t), None);
        let mut exact = Histogram::new();
        for gap in [0, 1, 1023, 1024, 1025, 40, 40, 1_000_000] {
            t += gap;
            assert_eq!(g.record(t), Some(gap));
            exact.record(gap);
        }
        assert_eq!(g.gaps(), exact);
        assert_eq!(g.report().gaps, exact.summary());
        assert_eq!(g.max_gap(), Some(1_000_000));
    }

    #[test]
    fn empty_and_single_reading() {
        let mut g = GapRecorder::new(Duration::MICROSECOND).unwrap();
        let r = g.report();
        assert_eq!(
            (r.reads, r.gaps.count, r.span_ns, r.stolen_fraction),
            (0, 0, 0, 0.0)
        );
        assert_eq!(r.max_gap_at_ns, None);
        assert_eq!(g.max_gap(), None);
        assert_eq!(g.record(5), None);
        assert_eq!(g.max_gap(), None);
        let r = g.report();
        assert_eq!((r.reads, r.gaps.count, r.span_ns), (1, 0, 0));
        assert!(r.gaps_pow2.is_empty());
    }

    #[test]
    fn backward_steps_are_counted_not_stolen() {
        let mut g = GapRecorder::new(Duration::from_nanos(10)).unwrap();
        g.record(100);
        assert_eq!(g.record(40), Some(-60));
        assert_eq!(g.record(41), Some(1));
        let r = g.report();
        assert_eq!(r.backward_steps, 1);
        assert_eq!(r.stolen_ns, 0);
        assert_eq!(r.gaps.min_ns, Some(-60));
        // Negative gaps are left out of the power-of-two shape.
        assert_eq!(
            r.gaps_pow2,
            vec![Pow2Bucket {
                from_ns: 1,
                to_ns: 2,
                count: 1
            }]
        );
    }

    #[test]
    fn pow2_ranges_at_the_edges() {
        let mut h = Histogram::new();
        for v in [0, 1, 2, 3, 4, 255, 256, 511, 512, i64::MAX] {
            h.record(v);
        }
        let b = pow2_buckets(&h);
        let shape: Vec<_> = b.iter().map(|p| (p.from_ns, p.count)).collect();
        assert_eq!(
            shape,
            vec![
                (0, 1),
                (1, 1),
                (2, 2),
                (4, 1),
                (128, 1),
                (256, 2),
                (512, 1),
                (1 << 62, 1)
            ]
        );
        assert_eq!(b.last().map(|p| p.to_ns), Some(i64::MAX));
        assert_eq!(b.iter().map(|p| p.count).sum::<u64>(), 10);
    }

    #[test]
    fn dummy_program_ticks() {
        // Period 7410 ns (toussaint2018), start at 10_000.
        let p = 7_410;
        let mut t = TickRecorder::new(10_000, Duration(p), Duration::from_micros(5), 2).unwrap();
        assert_eq!(t.next_deadline(), 17_410);
        // Tick 0 on time + 30 ns, tick 1 + 50 ns: interval p + 20.
        let k = t.record(17_440);
        assert_eq!(
            k,
            Tick {
                index: 0,
                deadline_ns: 17_410,
                lateness_ns: 30,
                interval_ns: None,
                deviation_ns: None,
                spike: false
            }
        );
        let k = t.record(24_870);
        assert_eq!(
            (
                k.deadline_ns,
                k.lateness_ns,
                k.interval_ns,
                k.deviation_ns,
                k.spike
            ),
            (24_820, 50, Some(p + 20), Some(20), false)
        );
        // A 15 us stall: tick 2 (grid 32_230) comes at 47_230.
        let k = t.record(47_230);
        assert_eq!(
            (k.lateness_ns, k.deviation_ns, k.spike),
            (15_000, Some(47_230 - 24_870 - p), true)
        );
        // Catch-up: ticks 3 and 4 (grid 39_640 and 47_050) are due already.
        let k = t.record(47_260);
        assert_eq!(
            (k.lateness_ns, k.deviation_ns, k.spike),
            (7_620, Some(30 - p), false)
        );
        let k = t.record(47_290);
        assert_eq!(k.lateness_ns, 240);
        // Two more spikes, only the cap (2) listed.
        let d5 = t.next_deadline();
        assert_eq!(d5, 54_460);
        t.record(d5 + 6_000);
        t.record(t.next_deadline() + 20_000);
        let r = t.report();
        assert_eq!(r.ticks, 7);
        assert_eq!(r.deviation.count, 6);
        assert_eq!(r.lateness.count, 7);
        assert_eq!(r.spikes_total, 3);
        assert!(r.spikes_truncated);
        assert_eq!(
            r.spikes,
            vec![
                Spike {
                    index: 2,
                    since_start_ns: 37_230,
                    interval_ns: 22_360,
                    deviation_ns: 22_360 - p
                },
                Spike {
                    index: 5,
                    since_start_ns: 50_460,
                    interval_ns: 60_460 - 47_290,
                    deviation_ns: 60_460 - 47_290 - p
                },
            ]
        );
        assert_eq!(r.late_ticks, 3); // ticks 2, 3 and 6
        assert_eq!(r.span_ns, 61_870 + 20_000 - 10_000);
    }

    #[test]
    fn bad_settings_are_errors() {
        assert_eq!(
            GapRecorder::new(Duration::ZERO).unwrap_err(),
            NoiseError::NonPositiveThreshold(Duration::ZERO)
        );
        assert!(TickRecorder::new(0, Duration(-1), Duration(1), 0).is_err());
        assert_eq!(
            TickRecorder::new(0, Duration(1), Duration::ZERO, 0)
                .unwrap_err()
                .to_string(),
            "the spike threshold must be positive, got 0ns"
        );
    }

    proptest! {
        /// Stolen time plus the short gaps add up to the span, and the tick deviations
        /// sum to (last − first) − (ticks − 1)·period, whatever the readings.
        #[test]
        fn totals_add_up(steps in prop::collection::vec(0i64..100_000, 1..300), thr in 1i64..50_000) {
            let mut g = GapRecorder::new(Duration(thr)).unwrap();
            let mut t = TickRecorder::new(0, Duration(7_410), Duration(thr), 10).unwrap();
            let mut now = 1_000i64;
            let mut short = 0i64;
            g.record(now);
            t.record(now);
            for &s in &steps {
                now += s;
                g.record(now);
                t.record(now);
                if s <= thr { short += s; }
            }
            let r = g.report();
            prop_assert_eq!(r.stolen_ns + short, r.span_ns);
            prop_assert_eq!(r.gaps_pow2.iter().map(|b| b.count).sum::<u64>(), steps.len() as u64);
            let tr = t.report();
            let sum = tr.deviation.mean_ns.unwrap_or(0.0) * steps.len() as f64;
            let exact = (now - 1_000 - steps.len() as i64 * 7_410) as f64;
            prop_assert!((sum - exact).abs() <= 1e-6 * exact.abs().max(1.0));
            prop_assert_eq!(tr.spikes.len() as u64, tr.spikes_total.min(10));
        }
    }
}
