//! Log-bucket (HDR-style) histogram of signed nanosecond values.
//!
//! Latency distributions span many orders of magnitude (a 1.2 µs median with a 40 ms
//! tail), so buckets grow with the value: every power of two `[2^e, 2^(e+1))` is cut
//! into [`SUB_BUCKETS`] equal sub-buckets, and values below `2 * SUB_BUCKETS` get one
//! bucket each (exact nanosecond resolution at the low end). A bucket is then never
//! wider than 1/128 of its lower bound, which bounds the error of every percentile
//! while keeping memory proportional to the *logarithm* of the largest value.
//!
//! Negative values (one-way latency between two clocks that disagree) go to a mirrored
//! side indexed by magnitude. Each side is a window of counters that grows, in whole
//! power-of-two blocks, only to cover the magnitudes recorded so far — from the block
//! of the smallest to that of the largest — so values that stay within a narrow range
//! (a link's delay, a residence time) take a block or two whatever their size, and
//! thousands of such histograms fit in little memory. An all-positive histogram of
//! 1 ns – 100 s values holds 3968 counters (31 KiB), and the whole `i64` range fits
//! in 2 × 7424 counters (116 KiB). Growth happens only when a new smallest or largest
//! magnitude arrives, at most 58 times per side in a histogram's life, so `record` is
//! O(1) and allocation-free in the steady state. [`Histogram::reset`] keeps room for
//! every magnitude up to the largest seen (the window then starts at zero), so a
//! histogram sized by recording its largest expected value and resetting never
//! allocates again below that value.
//!
//! Count, min and max are exact. Mean and standard deviation are exact too (up to the
//! final `f64` rounding): the histogram keeps the sum in `i128` and the sum of squares
//! modulo 2^128, from which the sum of squared deviations is recovered exactly whenever
//! it provably fits (always, for any realistic latency data; see [`Histogram::stddev`]).

use super::summary::{HistogramBuckets, Summary, PERCENTILES};

/// log2 of the number of sub-buckets per power of two.
const SUB_BITS: u32 = 7;
/// Sub-buckets per power of two: the bucket width is at most `1/SUB_BUCKETS` of its
/// lower bound.
pub const SUB_BUCKETS: usize = 1 << SUB_BITS;

/// Bucket index of a magnitude. Indices `0..2*SUB_BUCKETS` are exact values; above,
/// each power of two `2^e` adds `SUB_BUCKETS` buckets of width `2^(e - SUB_BITS)`.
#[inline]
fn bucket_index(mag: u64) -> usize {
    // Position of the highest set bit (0 for magnitudes 0 and 1).
    let top = u64::BITS - 1 - (mag | 1).leading_zeros();
    let shift = top.saturating_sub(SUB_BITS);
    // `mag >> shift` lies in [SUB_BUCKETS, 2*SUB_BUCKETS) once shift > 0, so the blocks
    // of consecutive exponents are contiguous.
    ((shift as usize) << SUB_BITS) + (mag >> shift) as usize
}

/// Lowest magnitude and width of bucket `idx` (the inverse of [`bucket_index`]).
#[inline]
fn bucket_bounds(idx: usize) -> (u64, u64) {
    let shift = (idx >> SUB_BITS).saturating_sub(1) as u32;
    let mantissa = (idx - ((shift as usize) << SUB_BITS)) as u64;
    (mantissa << shift, 1u64 << shift)
}

/// Smallest value (not magnitude) that a bucket of the given side holds. This is what
/// [`Histogram::buckets`] reports, so a bucket covers `[its value, next bucket's value)`.
fn bucket_low_value(negative: bool, idx: usize) -> i64 {
    let (lo, w) = bucket_bounds(idx);
    if negative {
        // The most negative value of the bucket is -(lo + w - 1), but never below i64::MIN.
        let mag = (lo as i128 + w as i128 - 1).min(1i128 << 63);
        clamp_i64(-mag)
    } else {
        clamp_i64(lo as i128)
    }
}

/// Middle of a bucket, used for percentiles: the largest distance from any value of
/// the bucket is `w/2`, which is at most `lo / (2*SUB_BUCKETS)`.
fn bucket_mid_value(negative: bool, idx: usize) -> i64 {
    let (lo, w) = bucket_bounds(idx);
    let mag = lo as i128 + (w as i128 - 1) / 2;
    if negative {
        clamp_i64(-mag)
    } else {
        clamp_i64(mag)
    }
}

fn clamp_i64(v: i128) -> i64 {
    v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// The counters of one side: bucket `idx` is `counts[idx - base]`.
#[derive(Clone, Debug, Default)]
struct Side {
    /// First bucket held, a multiple of [`SUB_BUCKETS`].
    base: usize,
    counts: Vec<u64>,
}

impl Side {
    #[inline]
    fn add(&mut self, idx: usize, n: u64) {
        if idx < self.base || idx - self.base >= self.counts.len() {
            self.make_room(idx, idx);
        }
        if let Some(c) = self.counts.get_mut(idx - self.base) {
            *c = c.saturating_add(n);
        }
    }

    /// Make room for buckets `lo..=hi` (the cold path of `add`): grow to whole
    /// power-of-two blocks, exactly, so that memory follows the values seen.
    #[cold]
    #[inline(never)]
    fn make_room(&mut self, lo: usize, hi: usize) {
        let block_lo = (lo >> SUB_BITS) << SUB_BITS;
        let block_hi = ((hi >> SUB_BITS) + 1) << SUB_BITS;
        if self.counts.is_empty() {
            self.base = block_lo;
        }
        let end = (self.base + self.counts.len()).max(block_hi);
        if block_lo < self.base {
            let mut counts = Vec::with_capacity(end - block_lo);
            counts.resize(self.base - block_lo, 0);
            counts.extend_from_slice(&self.counts);
            counts.resize(end - block_lo, 0);
            self.counts = counts;
            self.base = block_lo;
        } else if end > self.base + self.counts.len() {
            let len = end - self.base;
            self.counts.reserve_exact(len - self.counts.len());
            self.counts.resize(len, 0);
        }
    }

    /// Non-empty buckets as (index, count), in increasing index order.
    fn iter(&self) -> impl DoubleEndedIterator<Item = (usize, u64)> + '_ {
        let base = self.base;
        self.counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c > 0)
            .map(move |(i, &c)| (base + i, c))
    }

    fn merge(&mut self, from: &Side) {
        let mut used = from.iter();
        let (Some((lo, _)), hi) = (used.next(), used.next_back()) else {
            return;
        };
        let hi = hi.map_or(lo, |(i, _)| i);
        if self.counts.is_empty() || lo < self.base || hi >= self.base + self.counts.len() {
            self.make_room(lo, hi);
        }
        for (i, c) in from.iter() {
            if let Some(a) = self.counts.get_mut(i - self.base) {
                *a = a.saturating_add(c);
            }
        }
    }

    /// Zero every counter, keeping room from bucket 0 up to the highest held.
    fn reset(&mut self) {
        if self.base > 0 {
            let end = self.base + self.counts.len();
            self.counts = vec![0; end];
            self.base = 0;
        } else {
            self.counts.iter_mut().for_each(|c| *c = 0);
        }
    }

    fn capacity(&self) -> usize {
        self.counts.capacity()
    }
}

/// A mergeable log-bucket histogram of `i64` nanosecond values (see the module docs).
#[derive(Clone, Debug, Default)]
pub struct Histogram {
    /// Counters of values `>= 0`, by [`bucket_index`] of the value.
    pos: Side,
    /// Counters of values `< 0`, by [`bucket_index`] of the magnitude.
    neg: Side,
    count: u64,
    /// Valid only when `count > 0`.
    min: i64,
    max: i64,
    /// Exact sum (cannot wrap while `count < 2^63`).
    sum: i128,
    /// Sum of squares modulo 2^128 (see [`Histogram::stddev`]).
    sum_sq: u128,
}

impl Histogram {
    /// An empty histogram; it allocates nothing until the first value is recorded.
    pub fn new() -> Self {
        Self::default()
    }

    /// Record one value.
    #[inline]
    pub fn record(&mut self, v: i64) {
        self.record_n(v, 1);
    }

    /// Record `n` occurrences of the same value (`n == 0` is a no-op).
    #[inline]
    pub fn record_n(&mut self, v: i64, n: u64) {
        if n == 0 {
            return;
        }
        let negative = v < 0;
        let idx = bucket_index(v.unsigned_abs());
        let side = if negative {
            &mut self.neg
        } else {
            &mut self.pos
        };
        side.add(idx, n);
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else {
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        self.count = self.count.saturating_add(n);
        let wide = v as i128;
        self.sum = self.sum.wrapping_add(wide.wrapping_mul(n as i128));
        // |v|^2 <= 2^126 fits; the product with n and the sum wrap modulo 2^128 on purpose.
        let sq = (wide * wide) as u128;
        self.sum_sq = self.sum_sq.wrapping_add(sq.wrapping_mul(n as u128));
    }

    /// Add every value of `other` to `self`. The result is the same as recording both
    /// value streams into one histogram.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        self.pos.merge(&other.pos);
        self.neg.merge(&other.neg);
        if self.count == 0 {
            self.min = other.min;
            self.max = other.max;
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count = self.count.saturating_add(other.count);
        self.sum = self.sum.wrapping_add(other.sum);
        self.sum_sq = self.sum_sq.wrapping_add(other.sum_sq);
    }

    /// Forget every value. The counters stay allocated, for every magnitude up to the
    /// largest recorded so far: recording below it never allocates again.
    pub fn reset(&mut self) {
        self.pos.reset();
        self.neg.reset();
        self.count = 0;
        self.min = 0;
        self.max = 0;
        self.sum = 0;
        self.sum_sq = 0;
    }

    /// Number of values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Exact smallest value.
    pub fn min(&self) -> Option<i64> {
        (self.count > 0).then_some(self.min)
    }

    /// Exact largest value.
    pub fn max(&self) -> Option<i64> {
        (self.count > 0).then_some(self.max)
    }

    /// `sum = q*n + r` with `0 <= r < n`: `q` is the floor of the mean.
    fn mean_parts(&self) -> Option<(i128, i128, u64)> {
        if self.count == 0 {
            return None;
        }
        let n = self.count as i128;
        Some((self.sum.div_euclid(n), self.sum.rem_euclid(n), self.count))
    }

    /// Exact mean, rounded once to `f64`.
    pub fn mean(&self) -> Option<f64> {
        let (q, r, n) = self.mean_parts()?;
        Some(q as f64 + r as f64 / n as f64)
    }

    /// Population standard deviation.
    ///
    /// With `q = floor(mean)` and `sum = q*n + r`, the sum of squared deviations from
    /// the mean is `S - r²/n` where `S = Σ(v - q)² = sum_sq - 2q·sum + n·q²`. Computed
    /// modulo 2^128 that identity stays exact as long as the true `S` fits in 128 bits,
    /// which is guaranteed when `n · (max - min)² < 2^128` (each `|v - q| <= max - min`);
    /// the cancellation between two huge numbers that ruins the textbook `f64` formula
    /// never happens. Beyond that bound (values spanning more than ~2^50 ns with
    /// millions of samples) the result is computed from the buckets instead, within
    /// the histogram's relative error.
    pub fn stddev(&self) -> Option<f64> {
        let (q, r, n) = self.mean_parts()?;
        let range = (self.max as i128 - self.min as i128) as u128;
        let fits = range
            .checked_mul(range)
            .and_then(|r2| r2.checked_mul(n as u128))
            .is_some();
        if !fits {
            return Some(self.bucket_stddev());
        }
        let qu = q as u128; // two's complement: the ring arithmetic below stays exact.
        let sum = self.sum as u128;
        let s = self
            .sum_sq
            .wrapping_sub(qu.wrapping_mul(2).wrapping_mul(sum))
            .wrapping_add((n as u128).wrapping_mul(qu.wrapping_mul(qu)));
        let nf = n as f64;
        let frac = r as f64 / nf;
        let var = s as f64 / nf - frac * frac;
        Some(var.max(0.0).sqrt())
    }

    /// Standard deviation estimated from bucket midpoints (fallback of [`Self::stddev`]).
    fn bucket_stddev(&self) -> f64 {
        let n = self.count as f64;
        let mean = self.mean().unwrap_or(0.0);
        let var = self
            .bucket_iter(bucket_mid_value)
            .map(|(v, c)| {
                let d = v.clamp(self.min, self.max) as f64 - mean;
                c as f64 * d * d
            })
            .sum::<f64>()
            / n;
        var.max(0.0).sqrt()
    }

    /// The value of rank `ceil(p/100 * count)` (at least 1) in sorted order, as the
    /// midpoint of its bucket clamped to `[min, max]` (exactly `min` and `max` for the
    /// first and last rank), so that
    /// `|result - exact| <= relative_error() * |exact|`. `p` is clamped to `0..=100` and
    /// read with 6 decimals, so that `99.999` means exactly 99999/1000 despite binary
    /// floating point. `None` for an empty histogram or a NaN `p`.
    pub fn percentile(&self, p: f64) -> Option<i64> {
        if self.count == 0 || p.is_nan() {
            return None;
        }
        let rank = percentile_rank(p, self.count);
        // The extreme ranks are known exactly.
        if rank == 1 {
            return Some(self.min);
        }
        if rank == self.count {
            return Some(self.max);
        }
        let mut seen = 0u64;
        for (negative, idx, c) in self.raw_buckets() {
            seen = seen.saturating_add(c);
            if seen >= rank {
                let v = bucket_mid_value(negative, idx);
                return Some(v.clamp(self.min, self.max));
            }
        }
        Some(self.max)
    }

    /// Relative error bound of [`Self::percentile`]: half a bucket width over the
    /// smallest value of the bucket, i.e. `1 / (2 * SUB_BUCKETS)` = 1/256 ≈ 0.39 %.
    pub fn relative_error() -> f64 {
        1.0 / (2 * SUB_BUCKETS) as f64
    }

    /// Non-empty buckets as (smallest value the bucket holds, count), in increasing
    /// value order.
    pub fn buckets(&self) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.bucket_iter(bucket_low_value)
    }

    /// Probability mass function: (bucket value as in [`Self::buckets`], fraction of
    /// all values). Empty for an empty histogram.
    pub fn pmf(&self) -> Vec<(i64, f64)> {
        let n = self.count as f64;
        self.buckets().map(|(v, c)| (v, c as f64 / n)).collect()
    }

    /// Heap and inline bytes used by this histogram.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + (self.pos.capacity() + self.neg.capacity()) * std::mem::size_of::<u64>()
    }

    /// The result-document distribution object.
    pub fn summary(&self) -> Summary {
        let (bucket_ns, count) = self.buckets().unzip();
        let percentiles_ns = if self.count == 0 {
            Default::default()
        } else {
            PERCENTILES
                .iter()
                .filter_map(|&(key, p)| Some((key.to_string(), self.percentile(p)?)))
                .collect()
        };
        Summary {
            count: self.count,
            min_ns: self.min(),
            mean_ns: self.mean(),
            max_ns: self.max(),
            stddev_ns: self.stddev(),
            jitter_ns: match (self.min(), self.max()) {
                (Some(lo), Some(hi)) => Some(hi.saturating_sub(lo)),
                _ => None,
            },
            percentiles_ns,
            histogram: HistogramBuckets { bucket_ns, count },
        }
    }

    /// Non-empty buckets as (negative side?, index, count) in increasing value order.
    fn raw_buckets(&self) -> impl Iterator<Item = (bool, usize, u64)> + '_ {
        let neg = self.neg.iter().rev().map(|(i, c)| (true, i, c));
        let pos = self.pos.iter().map(|(i, c)| (false, i, c));
        neg.chain(pos)
    }

    fn bucket_iter(&self, value: fn(bool, usize) -> i64) -> impl Iterator<Item = (i64, u64)> + '_ {
        self.raw_buckets()
            .map(move |(negative, idx, c)| (value(negative, idx), c))
    }
}

/// Two histograms are equal when they hold the same values in the same buckets
/// (allocated capacity does not matter).
impl PartialEq for Histogram {
    fn eq(&self, other: &Self) -> bool {
        self.count == other.count
            && self.min() == other.min()
            && self.max() == other.max()
            && self.sum == other.sum
            && self.sum_sq == other.sum_sq
            && self.raw_buckets().eq(other.raw_buckets())
    }
}

/// Rank (1-based) of the `p`-th percentile among `count` values: `ceil(p/100 * count)`,
/// at least 1, with `p` taken to 6 decimals in exact integer arithmetic.
pub(crate) fn percentile_rank(p: f64, count: u64) -> u64 {
    const SCALE: u128 = 100_000_000; // 100 % expressed in millionths of a percent
    let ppm = (p.clamp(0.0, 100.0) * 1e6).round() as u128;
    let rank = (count as u128 * ppm).div_ceil(SCALE);
    (rank as u64).clamp(1, count.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn index_and_bounds_round_trip() {
        // Every exponent block: the first and last magnitude of each bucket map back.
        for idx in 0..(58 << SUB_BITS) {
            let (lo, w) = bucket_bounds(idx);
            assert_eq!(bucket_index(lo), idx, "lo of {idx}");
            assert_eq!(bucket_index(lo + (w - 1)), idx, "hi of {idx}");
            if idx < 2 * SUB_BUCKETS {
                assert_eq!((lo, w), (idx as u64, 1));
            } else {
                // Width never exceeds 1/128 of the lower bound.
                assert!(w * SUB_BUCKETS as u64 <= lo);
            }
        }
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(255), 255);
        assert_eq!(bucket_index(256), 256);
        assert_eq!(bucket_index(257), 256);
        assert_eq!(bucket_index(258), 257);
        assert_eq!(bucket_index(i64::MAX as u64), 7295);
        assert_eq!(bucket_index(1 << 63), 7296);
        assert_eq!(bucket_index(u64::MAX), 7423);
    }

    #[test]
    fn exact_small_values() {
        let mut h = Histogram::new();
        for v in [0, 1, 2, 3, 100, 255] {
            h.record(v);
        }
        assert_eq!(
            h.buckets().collect::<Vec<_>>(),
            vec![(0, 1), (1, 1), (2, 1), (3, 1), (100, 1), (255, 1)]
        );
        assert_eq!(h.percentile(50.0), Some(2));
        assert_eq!(h.percentile(0.0), Some(0));
        assert_eq!(h.percentile(100.0), Some(255));
    }

    #[test]
    fn mean_and_stddev_hand_computed() {
        let mut h = Histogram::new();
        for v in [2, 4, 4, 4, 5, 5, 7, 9] {
            h.record(v);
        }
        assert_eq!(h.count(), 8);
        assert_eq!(h.mean(), Some(5.0));
        assert_eq!(h.stddev(), Some(2.0));

        let mut h = Histogram::new();
        for v in [1, 2, 3, 4] {
            h.record(v);
        }
        assert_eq!(h.mean(), Some(2.5));
        assert_eq!(h.stddev(), Some(1.25f64.sqrt()));

        let mut h = Histogram::new();
        h.record(-3);
        h.record(3);
        assert_eq!(h.mean(), Some(0.0));
        assert_eq!(h.stddev(), Some(3.0));

        // -7, -7, -4: mean -6, deviations -1,-1,2 -> variance 6/3 = 2.
        let mut h = Histogram::new();
        h.record_n(-7, 2);
        h.record(-4);
        assert_eq!(h.mean(), Some(-6.0));
        assert_eq!(h.stddev(), Some(2.0f64.sqrt()));

        // Large offset, small spread: the textbook f64 formula would lose it all.
        let base = 1_000_000_000_000_000_000i64;
        let mut h = Histogram::new();
        for d in [2, 4, 4, 4, 5, 5, 7, 9] {
            h.record(base + d);
        }
        assert_eq!(h.stddev(), Some(2.0));
        assert_eq!(h.mean(), Some((base + 5) as f64));
    }

    #[test]
    fn single_value_and_empty() {
        let h = Histogram::new();
        assert_eq!(h.count(), 0);
        assert_eq!(h.min(), None);
        assert_eq!(h.max(), None);
        assert_eq!(h.mean(), None);
        assert_eq!(h.stddev(), None);
        assert_eq!(h.percentile(50.0), None);
        assert_eq!(h.buckets().count(), 0);
        assert!(h.pmf().is_empty());
        assert_eq!(h.memory_bytes(), std::mem::size_of::<Histogram>());

        let mut h = Histogram::new();
        h.record(12_345);
        assert_eq!(h.stddev(), Some(0.0));
        assert_eq!(h.mean(), Some(12_345.0));
        // Clamped to [min, max], so a single value is reported exactly.
        assert_eq!(h.percentile(50.0), Some(12_345));
        h.record_n(5, 0);
        assert_eq!(h.count(), 1);
        assert_eq!(h.min(), Some(12_345));
    }

    #[test]
    fn extremes_do_not_panic() {
        let mut h = Histogram::new();
        for v in [i64::MIN, i64::MAX, 0, -1, 1, i64::MIN + 1, i64::MAX - 1] {
            h.record(v);
        }
        h.record_n(i64::MAX, 1000);
        assert_eq!(h.min(), Some(i64::MIN));
        assert_eq!(h.max(), Some(i64::MAX));
        assert_eq!(h.percentile(0.0), Some(i64::MIN));
        assert_eq!(h.percentile(100.0), Some(i64::MAX));
        let s = h.summary();
        assert_eq!(s.jitter_ns, Some(i64::MAX));
        assert!(h.stddev().is_some_and(f64::is_finite));
        assert!(h.memory_bytes() <= 2 * 7424 * 8 + std::mem::size_of::<Histogram>());

        // Two extreme values: the exact path cannot prove its bound, the bucket
        // fallback stays within the relative error.
        let mut h = Histogram::new();
        h.record(i64::MIN);
        h.record(i64::MAX);
        let exact = (u64::MAX as f64) / 2.0;
        let sd = h.stddev().unwrap_or(0.0);
        assert!((sd - exact).abs() <= exact * Histogram::relative_error());
        assert_eq!(h.mean(), Some(-0.5));

        let mut h = Histogram::new();
        h.record_n(i64::MAX, 3);
        assert_eq!(h.stddev(), Some(0.0));
        assert_eq!(h.mean(), Some(i64::MAX as f64));
    }

    #[test]
    fn negative_buckets_are_ordered_and_mirrored() {
        let mut h = Histogram::new();
        for v in [-1000, -3, -1, 0, 2, 1000] {
            h.record(v);
        }
        let b: Vec<_> = h.buckets().collect();
        // 1000 lies in [1000, 1004) (width 4 in the 512..1024 block); mirrored, the
        // negative bucket holds [-1003, -1000] and is reported by its lowest value.
        assert_eq!(
            b,
            vec![(-1003, 1), (-3, 1), (-1, 1), (0, 1), (2, 1), (1000, 1)]
        );
        assert_eq!(h.percentile(1.0), Some(-1000)); // clamped to min
        assert_eq!(h.percentile(50.0), Some(-1));
        let pmf = h.pmf();
        assert_eq!(pmf.len(), 6);
        assert!(pmf.iter().all(|&(_, p)| p == 1.0 / 6.0));
    }

    #[test]
    fn percentile_rank_is_exact_in_decimal() {
        assert_eq!(percentile_rank(99.9, 1000), 999);
        assert_eq!(percentile_rank(99.999, 100_000), 99_999);
        assert_eq!(percentile_rank(99.99, 10_000), 9_999);
        assert_eq!(percentile_rank(50.0, 3), 2);
        assert_eq!(percentile_rank(0.0, 10), 1);
        assert_eq!(percentile_rank(100.0, 10), 10);
        assert_eq!(percentile_rank(250.0, 10), 10);
        assert_eq!(percentile_rank(-1.0, 10), 1);
        assert_eq!(percentile_rank(90.0, u64::MAX), 16602069666338596454);
    }

    #[test]
    fn memory_bound_for_one_ns_to_100_s() {
        let mut h = Histogram::new();
        let mut v = 1i64;
        while v <= 100_000_000_000 {
            h.record(v);
            v = v * 11 / 10 + 1;
        }
        h.record(100_000_000_000);
        // 1e11 < 2^37: 30 blocks of 128 counters of 8 bytes.
        assert_eq!(bucket_index(100_000_000_000) >> SUB_BITS, 30);
        assert!(h.memory_bytes() <= 31 * 128 * 8 + std::mem::size_of::<Histogram>());
        assert!(h.memory_bytes() <= 1 << 20);
        // And with the mirrored negative side too.
        h.record(-100_000_000_000);
        assert!(h.memory_bytes() <= 2 * 31 * 128 * 8 + std::mem::size_of::<Histogram>());
    }

    #[test]
    fn values_in_a_narrow_range_take_a_block_or_two() {
        // 40-50 us and 1.9-2.1 ms: one power of two each, wherever it lies
        let mut link = Histogram::new();
        let mut residence = Histogram::new();
        for i in 0..1000 {
            link.record(40_000 + i * 10);
            residence.record(1_900_000 + i * 200);
        }
        let block = SUB_BUCKETS * 8 + std::mem::size_of::<Histogram>();
        assert!(link.memory_bytes() <= 2 * block, "{}", link.memory_bytes());
        assert!(residence.memory_bytes() <= 2 * block);
        // a smaller value widens the window downwards; nothing recorded moves
        let before: Vec<(i64, u64)> = residence.buckets().collect();
        residence.record(3);
        let after: Vec<(i64, u64)> = residence.buckets().collect();
        assert_eq!((after[0], &after[1..]), ((3, 1), &before[..]));
        assert_eq!(residence.percentile(0.0), Some(3));
        let mut merged = link.clone();
        merged.merge(&residence);
        let mut both = Histogram::new();
        for i in 0..1000 {
            both.record(1_900_000 + i * 200);
            both.record(40_000 + i * 10);
        }
        both.record(3);
        assert_eq!(merged, both);
    }

    #[test]
    fn reset_keeps_room_down_to_zero() {
        let mut h = Histogram::new();
        h.record(1_000_000_000);
        h.reset();
        let room = h.memory_bytes();
        assert!(room >= bucket_index(1_000_000_000) * 8);
        for v in [0, 1, 1_000, 1_000_000, 999_999_999] {
            h.record(v);
        }
        assert_eq!(h.memory_bytes(), room);
        assert_eq!(h.count(), 5);
    }

    #[test]
    fn reset_forgets_everything() {
        let mut h = Histogram::new();
        h.record(5);
        h.record(-5);
        h.reset();
        assert_eq!(h, Histogram::new());
        assert_eq!(h.count(), 0);
        assert_eq!(h.buckets().count(), 0);
        h.record(7);
        assert_eq!(h.min(), Some(7));
        assert_eq!(h.mean(), Some(7.0));
    }

    /// Values as latency data looks: mostly small, some negatives, a heavy tail over
    /// many orders of magnitude, and the extremes.
    fn value() -> impl Strategy<Value = i64> {
        prop_oneof![
            4 => 0i64..2_000,
            3 => -500i64..500,
            // Log-uniform (heavy tail): random exponent, random mantissa.
            4 => (0u32..63, any::<u64>(), any::<bool>()).prop_map(|(e, m, neg)| {
                let mag = ((1u64 << e) | (m & ((1u64 << e) - 1))) as i64;
                if neg { -mag } else { mag }
            }),
            // Pareto-like tail around a microsecond latency.
            3 => (1u64..1_000_000).prop_map(|u| (1_000_000_000_000u64 / (u * u)) as i64 + 1_000),
            1 => Just(i64::MAX),
            1 => Just(i64::MIN),
        ]
    }

    fn check_percentile(h: &Histogram, sorted: &[i64], p: f64) -> Result<(), TestCaseError> {
        let rank = percentile_rank(p, sorted.len() as u64) as usize;
        let exact = sorted[rank - 1];
        let got = h
            .percentile(p)
            .ok_or_else(|| TestCaseError::fail("no percentile"))?;
        let diff = (got as i128 - exact as i128).unsigned_abs();
        // diff <= |exact| * relative_error(), in exact integer arithmetic.
        let bound = exact.unsigned_abs() as u128;
        prop_assert!(
            diff * 256 <= bound,
            "p{p}: got {got}, exact {exact} (rank {rank} of {})",
            sorted.len()
        );
        prop_assert!(diff as f64 <= Histogram::relative_error() * bound as f64);
        Ok(())
    }

    proptest! {
        #[test]
        fn percentiles_within_relative_error(
            values in prop::collection::vec(value(), 1..400),
            extra_p in prop::collection::vec(0.0f64..=100.0, 0..8),
        ) {
            let mut h = Histogram::new();
            for &v in &values {
                h.record(v);
            }
            let mut sorted = values.clone();
            sorted.sort_unstable();
            for (_, p) in PERCENTILES {
                check_percentile(&h, &sorted, p)?;
            }
            for p in [0.0, 1.0, 10.0, 25.0, 75.0, 100.0].into_iter().chain(extra_p) {
                check_percentile(&h, &sorted, p)?;
            }
            prop_assert_eq!(h.count(), values.len() as u64);
            prop_assert_eq!(h.min(), sorted.first().copied());
            prop_assert_eq!(h.max(), sorted.last().copied());
            prop_assert_eq!(h.buckets().map(|(_, c)| c).sum::<u64>(), values.len() as u64);
            // Buckets strictly increasing, and each value lies in its bucket.
            let b: Vec<_> = h.buckets().collect();
            prop_assert!(b.windows(2).all(|w| w[0].0 < w[1].0));
        }

        #[test]
        fn mean_and_stddev_exact(values in prop::collection::vec(-(1i64 << 40)..(1i64 << 40), 1..300)) {
            let mut h = Histogram::new();
            for &v in &values {
                h.record(v);
            }
            let n = values.len() as i128;
            let sum: i128 = values.iter().map(|&v| v as i128).sum();
            let sum_sq: i128 = values.iter().map(|&v| (v as i128) * (v as i128)).sum();
            // Exact: mean = sum/n, variance = (n*sum_sq - sum^2) / n^2.
            let mean = sum as f64 / n as f64;
            let var = (n * sum_sq - sum * sum) as f64 / (n * n) as f64;
            let got_mean = h.mean().unwrap_or(f64::NAN);
            let got_sd = h.stddev().unwrap_or(f64::NAN);
            prop_assert!((got_mean - mean).abs() <= 1e-12 * mean.abs().max(1.0));
            prop_assert!((got_sd - var.sqrt()).abs() <= 1e-9 * var.sqrt().max(1.0),
                "sd {} vs {}", got_sd, var.sqrt());
        }

        #[test]
        fn merge_equals_recording_into_one(
            a in prop::collection::vec(value(), 0..200),
            b in prop::collection::vec(value(), 0..200),
            n in 1u64..5,
        ) {
            let mut ha = Histogram::new();
            let mut hb = Histogram::new();
            let mut all = Histogram::new();
            for &v in &a {
                ha.record(v);
                all.record(v);
            }
            for &v in &b {
                hb.record_n(v, n);
                all.record_n(v, n);
            }
            let mut merged = ha.clone();
            merged.merge(&hb);
            prop_assert_eq!(&merged, &all);
            prop_assert_eq!(merged.summary(), all.summary());
            prop_assert_eq!(merged.stddev().map(f64::to_bits), all.stddev().map(f64::to_bits));
            // And the other way round.
            let mut merged2 = hb.clone();
            merged2.merge(&ha);
            prop_assert_eq!(&merged2, &all);
        }
    }
}
