//! Sequence-number accounting: loss, duplicates, reordering and runs of consecutive
//! misses (the result document), in O(1) per packet and bounded memory.
//!
//! The first packet received sets the base (a sender usually starts at 0, but the
//! first packets may be lost or the receiver may start late). Packets are judged
//! against a sliding window of the last `W` sequence numbers below the highest one
//! seen, kept as a ring bitmap:
//!
//! - above the highest: in order, or a gap of `missing` packets;
//! - inside the window: a duplicate if already seen, else *reordered* (late, not lost);
//!   a late packet below the base (inside the window) lowers the base;
//! - `W` or more below the highest: *too old* — counted on its own, since the window no
//!   longer knows whether it is a duplicate or a late fill; its sequence number stays
//!   counted as lost.
//!
//! A loss run (maximal run of consecutive missing sequence numbers) is final once it
//! slides out of the window; a run reaching into the window can still be split or
//! shrunk by late packets, so [`SeqTracker::report`] counts those as if the stream
//! ended now. A gap of any size costs O(W/64) at most: nothing loops per missing packet.

use serde::{Deserialize, Serialize};

/// Default reorder window, in packets.
pub const DEFAULT_WINDOW: u64 = 4096;
const MIN_WINDOW: u64 = 64;
/// Largest window (2 MiB of bitmap): keeps `with_window` from allocating absurdly.
const MAX_WINDOW: u64 = 1 << 24;

/// What one received sequence number was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqEvent {
    /// The first packet: it sets the base.
    First,
    /// Exactly one above the highest so far.
    InOrder,
    /// Above the highest, skipping `missing` sequence numbers (lost unless they come late).
    Gap { missing: u64 },
    /// Below the highest, not seen before: late but not lost.
    Reordered,
    /// Seen before.
    Duplicate,
    /// Too far below the highest for the window to judge.
    TooOld,
}

/// Counters of a [`SeqTracker`]. `received == unique + duplicates + too_old`, and
/// `lost == (highest_seq - first_seq + 1) - unique`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeqReport {
    /// Every packet recorded.
    pub received: u64,
    /// Distinct sequence numbers accepted (including late ones).
    pub unique: u64,
    pub duplicates: u64,
    /// Late packets (a subset of `unique`).
    pub reordered: u64,
    /// Expected minus unique.
    pub lost: u64,
    pub too_old: u64,
    /// Maximal runs of consecutive missing sequence numbers.
    pub loss_runs: u64,
    pub longest_loss_run: u64,
    /// The base: lowest sequence number accepted (the first received, unless an
    /// earlier one arrived late within the window).
    pub first_seq: Option<u64>,
    pub highest_seq: Option<u64>,
}

/// Loss runs that left the window, plus the run still open at its lower edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Runs {
    closed: u64,
    longest: u64,
    /// Consecutive missing sequence numbers ending just below the window (or, while
    /// scanning, just below the position being scanned).
    open: u64,
}

impl Runs {
    fn close(&mut self) {
        if self.open > 0 {
            self.closed += 1;
            self.longest = self.longest.max(self.open);
            self.open = 0;
        }
    }

    /// Feed `len` (1..=64) slots in increasing sequence order, lowest bit first;
    /// a 1 bit is a received (or pre-base) slot, a 0 bit a missing one. Costs one
    /// iteration per run in the chunk, not per bit.
    fn feed(&mut self, mut bits: u64, len: u32) {
        let mut rest = len;
        while rest > 0 {
            let zeros = bits.trailing_zeros().min(rest);
            self.open = self.open.saturating_add(u64::from(zeros));
            rest -= zeros;
            if rest == 0 {
                break;
            }
            bits = bits.checked_shr(zeros).unwrap_or(0);
            let ones = (!bits).trailing_zeros().min(rest);
            self.close();
            rest -= ones;
            bits = bits.checked_shr(ones).unwrap_or(0);
        }
    }
}

/// Mask of the `len` (1..=64) low bits.
fn low_mask(len: u32) -> u64 {
    u64::MAX >> (64 - len)
}

/// Loss / duplicate / reorder accounting over `u64` sequence numbers (module docs).
#[derive(Clone, Debug)]
pub struct SeqTracker {
    /// Ring bitmap: bit `seq mod window` is 1 when `seq` was received or lies below
    /// the base, for every `seq` in `(highest - window, highest]`.
    bits: Box<[u64]>,
    /// Power of two, multiple of 64.
    window: u64,
    base: Option<u64>,
    highest: u64,
    received: u64,
    unique: u64,
    duplicates: u64,
    reordered: u64,
    too_old: u64,
    runs: Runs,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl SeqTracker {
    /// A tracker with the default window of [`DEFAULT_WINDOW`] packets.
    pub fn new() -> Self {
        Self::with_window(DEFAULT_WINDOW)
    }

    /// A tracker judging packets up to `n` below the highest; `n` is rounded up to a
    /// power of two in `64..=2^24`.
    pub fn with_window(n: u64) -> Self {
        let window = n
            .clamp(MIN_WINDOW, MAX_WINDOW)
            .checked_next_power_of_two()
            .unwrap_or(MAX_WINDOW);
        SeqTracker {
            bits: vec![0u64; (window / 64) as usize].into_boxed_slice(),
            window,
            base: None,
            highest: 0,
            received: 0,
            unique: 0,
            duplicates: 0,
            reordered: 0,
            too_old: 0,
            runs: Runs::default(),
        }
    }

    /// The effective window, in packets.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// Account for one received sequence number. O(1), except that a gap costs up to
    /// O(window/64) word operations.
    pub fn record(&mut self, seq: u64) -> SeqEvent {
        self.received += 1;
        let Some(base) = self.base else {
            self.base = Some(seq);
            self.highest = seq;
            // Everything below the base counts as "not missing".
            self.bits.iter_mut().for_each(|w| *w = u64::MAX);
            self.unique = 1;
            return SeqEvent::First;
        };
        if seq > self.highest {
            let step = seq - self.highest;
            self.slide(seq);
            self.unique += 1;
            return if step == 1 {
                SeqEvent::InOrder
            } else {
                SeqEvent::Gap { missing: step - 1 }
            };
        }
        let behind = self.highest - seq;
        if behind >= self.window {
            self.too_old += 1;
            return SeqEvent::TooOld;
        }
        if seq < base {
            // A late packet from before the first one: the slots between it and the old
            // base turn from "before the stream" into missing. They are all inside the
            // window, since `seq` is.
            self.update_range(seq.wrapping_add(1), base - seq - 1, |w, m| w & !m);
            self.set(seq);
            self.base = Some(seq);
            self.unique += 1;
            self.reordered += 1;
            return SeqEvent::Reordered;
        }
        if self.get(seq) {
            self.duplicates += 1;
            SeqEvent::Duplicate
        } else {
            self.set(seq);
            self.unique += 1;
            self.reordered += 1;
            SeqEvent::Reordered
        }
    }

    /// The counters now, with loss runs still inside the window counted as if the
    /// stream ended here. O(window/64).
    pub fn report(&self) -> SeqReport {
        let mut runs = self.runs;
        if self.base.is_some() {
            // Scan the whole window, oldest slot first, continuing the open run.
            let bottom = self.bottom();
            self.for_chunks(bottom, self.window, |word, off, len| {
                runs.feed(word >> off, len);
            });
        }
        runs.close();
        let lost = match self.base {
            Some(base) => {
                let expected = u128::from(self.highest - base) + 1;
                u64::try_from(expected.saturating_sub(u128::from(self.unique))).unwrap_or(u64::MAX)
            }
            None => 0,
        };
        SeqReport {
            received: self.received,
            unique: self.unique,
            duplicates: self.duplicates,
            reordered: self.reordered,
            lost,
            too_old: self.too_old,
            loss_runs: runs.closed,
            longest_loss_run: runs.longest,
            first_seq: self.base,
            highest_seq: self.base.map(|_| self.highest),
        }
    }

    /// The final counters: every run is closed.
    pub fn finish(self) -> SeqReport {
        self.report()
    }

    /// Oldest sequence number inside the window (wrapping below 0 at the start of a
    /// stream, where those slots hold pre-base 1 bits).
    fn bottom(&self) -> u64 {
        self.highest.wrapping_add(1).wrapping_sub(self.window)
    }

    /// Move the top of the window to `new_high` (> highest): the slots leaving the window
    /// feed the loss runs and are cleared for the sequence numbers entering it.
    fn slide(&mut self, new_high: u64) {
        let step = new_high - self.highest;
        let leaving = step.min(self.window);
        let bottom = self.bottom();
        let mut runs = self.runs;
        self.update_chunks(bottom, leaving, |word, off, len| {
            runs.feed(word >> off, len);
            word & !(low_mask(len) << off)
        });
        // Sequence numbers skipped by so much that they leave the window at once.
        runs.open = runs.open.saturating_add(step - leaving);
        self.runs = runs;
        self.highest = new_high;
        self.set(new_high);
    }

    fn slot(&self, seq: u64) -> (usize, u32) {
        let pos = seq & (self.window - 1);
        ((pos / 64) as usize, (pos % 64) as u32)
    }

    fn get(&self, seq: u64) -> bool {
        let (w, b) = self.slot(seq);
        self.bits.get(w).is_some_and(|word| word >> b & 1 == 1)
    }

    fn set(&mut self, seq: u64) {
        let (w, b) = self.slot(seq);
        if let Some(word) = self.bits.get_mut(w) {
            *word |= 1 << b;
        }
    }

    fn update_range(&mut self, start: u64, len: u64, f: impl Fn(u64, u64) -> u64) {
        self.update_chunks(start, len, |word, off, n| f(word, low_mask(n) << off));
    }

    /// Visit the slots of `len` (<= window) sequence numbers from `start`, as runs of
    /// bits within one word: `f(word, bit offset, bit count)`.
    fn for_chunks(&self, start: u64, len: u64, mut f: impl FnMut(u64, u32, u32)) {
        self.walk(start, len, |i, off, n| {
            if let Some(&word) = self.bits.get(i) {
                f(word, off, n);
            }
        });
    }

    /// Like [`Self::for_chunks`], replacing each word by `f`'s result.
    fn update_chunks(&mut self, start: u64, len: u64, mut f: impl FnMut(u64, u32, u32) -> u64) {
        let window = self.window;
        let bits = &mut self.bits;
        walk_ring(window, start, len, |i, off, n| {
            if let Some(word) = bits.get_mut(i) {
                *word = f(*word, off, n);
            }
        });
    }

    fn walk(&self, start: u64, len: u64, f: impl FnMut(usize, u32, u32)) {
        walk_ring(self.window, start, len, f);
    }
}

/// Split the ring positions of `len` consecutive sequence numbers from `start` into
/// per-word chunks `(word index, bit offset, bit count)`, in sequence order.
fn walk_ring(window: u64, start: u64, len: u64, mut f: impl FnMut(usize, u32, u32)) {
    let mut pos = start & (window - 1);
    let mut rest = len.min(window);
    while rest > 0 {
        let off = (pos % 64) as u32;
        let n = (64 - off).min(u32::try_from(rest).unwrap_or(64));
        f((pos / 64) as usize, off, n);
        pos = (pos + u64::from(n)) & (window - 1);
        rest -= u64::from(n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeSet, HashSet};

    fn feed(t: &mut SeqTracker, seqs: &[u64]) -> Vec<SeqEvent> {
        seqs.iter().map(|&s| t.record(s)).collect()
    }

    #[test]
    fn in_order_stream() {
        let mut t = SeqTracker::new();
        let ev = feed(&mut t, &(5..15).collect::<Vec<_>>());
        assert_eq!(ev[0], SeqEvent::First);
        assert!(ev[1..].iter().all(|&e| e == SeqEvent::InOrder));
        assert_eq!(
            t.report(),
            SeqReport {
                received: 10,
                unique: 10,
                first_seq: Some(5),
                highest_seq: Some(14),
                ..SeqReport::default()
            }
        );
    }

    #[test]
    fn empty_report() {
        let t = SeqTracker::new();
        assert_eq!(t.report(), SeqReport::default());
        assert_eq!(t.window(), 4096);
    }

    #[test]
    fn loss_duplicate_reorder() {
        let mut t = SeqTracker::new();
        let ev = feed(&mut t, &[0, 1, 3, 2, 2, 5, 9]);
        assert_eq!(
            ev,
            vec![
                SeqEvent::First,
                SeqEvent::InOrder,
                SeqEvent::Gap { missing: 1 },
                SeqEvent::Reordered,
                SeqEvent::Duplicate,
                SeqEvent::Gap { missing: 1 },
                SeqEvent::Gap { missing: 3 },
            ]
        );
        assert_eq!(
            t.finish(),
            SeqReport {
                received: 7,
                unique: 6,
                duplicates: 1,
                reordered: 1,
                lost: 4, // 4, 6, 7, 8
                too_old: 0,
                loss_runs: 2,
                longest_loss_run: 3,
                first_seq: Some(0),
                highest_seq: Some(9),
            }
        );
    }

    #[test]
    fn late_fill_splits_and_shrinks_runs() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, 10]);
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (9, 1, 9));
        t.record(4); // splits 1..9 into 1..3 and 5..9
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (8, 2, 5));
        t.record(9); // shrinks 5..9 to 5..8
        t.record(1); // shrinks 1..3 to 2..3
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (6, 2, 4));
        for s in [2, 3, 5, 6, 7, 8] {
            assert_eq!(t.record(s), SeqEvent::Reordered);
        }
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (0, 0, 0));
        assert_eq!(r.reordered, 9);
    }

    #[test]
    fn run_across_window_edge() {
        let mut t = SeqTracker::with_window(64);
        assert_eq!(t.window(), 64);
        feed(&mut t, &[0, 100]);
        // Window now holds 37..=100: 1..=36 left it (final), 37..=99 may still come.
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (99, 1, 99));
        assert_eq!(t.record(50), SeqEvent::Reordered);
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (98, 2, 49));
        assert_eq!(t.record(36), SeqEvent::TooOld);
        assert_eq!(t.record(37), SeqEvent::Reordered); // oldest slot still in the window
        assert_eq!(t.record(0), SeqEvent::TooOld); // not judged as a duplicate
        let r = t.finish();
        assert_eq!(
            r,
            SeqReport {
                received: 6,
                unique: 4,
                duplicates: 0,
                reordered: 2,
                lost: 97,
                too_old: 2,
                loss_runs: 3, // 1..=36, 38..=49, 51..=99
                longest_loss_run: 49,
                first_seq: Some(0),
                highest_seq: Some(100),
            }
        );
    }

    #[test]
    fn runs_finalise_as_they_slide_out() {
        let mut t = SeqTracker::with_window(64);
        // Gaps of 1, 2, 3 ... far apart so each run leaves the window.
        let mut s = 0u64;
        let mut seqs = vec![];
        for gap in 1..=10u64 {
            seqs.push(s);
            s += gap + 1;
            seqs.extend(s..s + 100);
            s += 100;
        }
        feed(&mut t, &seqs);
        let r = t.report();
        assert_eq!((r.loss_runs, r.longest_loss_run, r.lost), (10, 10, 55));
        assert_eq!(t.runs.closed, 10); // all of them already final
    }

    #[test]
    fn jump_between_one_and_two_windows() {
        let mut t = SeqTracker::with_window(64);
        feed(&mut t, &[0, 1, 2, 3, 70, 72]);
        // Missing 4..=69 (66) then 71.
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (67, 2, 66));
        assert_eq!(t.record(10), SeqEvent::Reordered); // 72 - 10 = 62 < 64
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (66, 3, 59));
    }

    #[test]
    fn huge_jump_is_cheap() {
        let mut t = SeqTracker::new();
        let far = 1u64 << 63;
        let ev = feed(&mut t, &[0, far, far + 1, 5, far - 1]);
        assert_eq!(
            ev,
            vec![
                SeqEvent::First,
                SeqEvent::Gap { missing: far - 1 },
                SeqEvent::InOrder,
                SeqEvent::TooOld,
                SeqEvent::Reordered,
            ]
        );
        let r = t.report();
        assert_eq!(r.lost, far - 2);
        assert_eq!((r.loss_runs, r.longest_loss_run), (1, far - 2));
        // A full-range jump.
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, u64::MAX]);
        let r = t.report();
        assert_eq!(
            (r.lost, r.loss_runs, r.longest_loss_run),
            (u64::MAX - 1, 1, u64::MAX - 1)
        );
        assert_eq!(r.highest_seq, Some(u64::MAX));
    }

    #[test]
    fn late_packet_before_first_lowers_base() {
        let mut t = SeqTracker::new();
        let ev = feed(&mut t, &[10, 12, 7, 7]);
        assert_eq!(
            ev,
            vec![
                SeqEvent::First,
                SeqEvent::Gap { missing: 1 },
                SeqEvent::Reordered,
                SeqEvent::Duplicate,
            ]
        );
        let r = t.report();
        assert_eq!(r.first_seq, Some(7));
        // Missing 8, 9 and 11.
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (3, 2, 2));
        assert_eq!(r.reordered, 1);
    }

    #[test]
    fn starts_near_the_top_of_the_range() {
        let mut t = SeqTracker::with_window(64);
        let top = u64::MAX;
        feed(&mut t, &[top - 5, top - 3, top]);
        let r = t.report();
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (3, 2, 2));
        assert_eq!(t.record(top - 4), SeqEvent::Reordered);
        assert_eq!(t.record(top - 9), SeqEvent::Reordered);
        let r = t.finish();
        assert_eq!(r.first_seq, Some(top - 9));
        // Missing top-8..=top-6 and top-2..=top-1.
        assert_eq!((r.lost, r.loss_runs, r.longest_loss_run), (5, 2, 3));
    }

    #[test]
    fn window_rounding() {
        assert_eq!(SeqTracker::with_window(0).window(), 64);
        assert_eq!(SeqTracker::with_window(100).window(), 128);
        assert_eq!(SeqTracker::with_window(4096).window(), 4096);
        assert_eq!(SeqTracker::with_window(u64::MAX).window(), 1 << 24);
    }

    #[test]
    fn report_serializes() {
        let mut t = SeqTracker::new();
        feed(&mut t, &[0, 2]);
        let r = t.report();
        let v = serde_json::to_value(&r).unwrap_or_default();
        assert_eq!(
            v,
            serde_json::json!({
                "received": 2, "unique": 2, "duplicates": 0, "reordered": 0, "lost": 1,
                "too_old": 0, "loss_runs": 1, "longest_loss_run": 1,
                "first_seq": 0, "highest_seq": 2
            })
        );
        let back: SeqReport = serde_json::from_value(v).unwrap_or_default();
        assert_eq!(back, r);
    }

    /// Brute-force model: everything is known, nothing ever slides out.
    #[derive(Default)]
    struct Model {
        seen: HashSet<u64>,
        received: u64,
        reordered: u64,
        highest: Option<u64>,
    }

    impl Model {
        fn record(&mut self, s: u64) -> SeqEvent {
            self.received += 1;
            let ev = match self.highest {
                None => SeqEvent::First,
                Some(h) if s == h + 1 => SeqEvent::InOrder,
                Some(h) if s > h => SeqEvent::Gap { missing: s - h - 1 },
                _ if self.seen.contains(&s) => SeqEvent::Duplicate,
                _ => SeqEvent::Reordered,
            };
            if ev == SeqEvent::Reordered {
                self.reordered += 1;
            }
            self.seen.insert(s);
            self.highest = Some(self.highest.map_or(s, |h| h.max(s)));
            ev
        }

        fn report(&self) -> SeqReport {
            let sorted: BTreeSet<u64> = self.seen.iter().copied().collect();
            let first = sorted.first().copied();
            let highest = sorted.last().copied();
            let gaps: Vec<u64> = sorted
                .iter()
                .zip(sorted.iter().skip(1))
                .map(|(a, b)| b - a - 1)
                .filter(|&g| g > 0)
                .collect();
            let unique = self.seen.len() as u64;
            SeqReport {
                received: self.received,
                unique,
                duplicates: self.received - unique,
                reordered: self.reordered,
                lost: match (first, highest) {
                    (Some(f), Some(h)) => h - f + 1 - unique,
                    _ => 0,
                },
                too_old: 0,
                loss_runs: gaps.len() as u64,
                longest_loss_run: gaps.iter().copied().max().unwrap_or(0),
                first_seq: first,
                highest_seq: highest,
            }
        }
    }

    /// A stream of `n` sequence numbers from `start`, with drops and duplicates, each
    /// copy displaced by less than `max_shift` positions: sort by `seq + offset`, with
    /// `offset < max_shift`. Then when `s` arrives nothing above `s + max_shift - 1`
    /// has arrived, so a window of `max_shift` or more judges every packet.
    fn stream(window: u64) -> impl Strategy<Value = Vec<u64>> {
        let start = prop_oneof![Just(0u64), 0u64..1_000_000, Just(u64::MAX - 5_000)];
        (
            start,
            prop::collection::vec((0u8..10, 0u8..10, any::<u64>(), any::<u64>()), 1..600),
            1u64..=window,
        )
            .prop_map(|(start, slots, max_shift)| {
                let mut keyed = vec![];
                for (i, (drop, dup, o1, o2)) in slots.into_iter().enumerate() {
                    let seq = start + i as u64;
                    // Bursty drops: slot kinds 0..2 drop (about 20 %).
                    if drop < 2 {
                        continue;
                    }
                    keyed.push((i as u64 + o1 % max_shift, seq));
                    if dup == 0 {
                        keyed.push((i as u64 + o2 % max_shift, seq));
                    }
                }
                keyed.sort_by_key(|&(k, _)| k);
                keyed.into_iter().map(|(_, s)| s).collect()
            })
    }

    fn check_against_model(window: u64, seqs: &[u64]) -> Result<(), TestCaseError> {
        let mut t = SeqTracker::with_window(window);
        let mut m = Model::default();
        for (i, &s) in seqs.iter().enumerate() {
            let got = t.record(s);
            let want = m.record(s);
            prop_assert_eq!(got, want, "packet {} (seq {})", i, s);
            // The model's report is O(n log n): compare often, not always.
            if i % 8 == 0 {
                prop_assert_eq!(t.report(), m.report(), "after packet {} (seq {})", i, s);
            }
        }
        let r = t.finish();
        prop_assert_eq!(r.received, r.unique + r.duplicates + r.too_old);
        prop_assert_eq!(r, m.report());
        Ok(())
    }

    proptest! {
        #[test]
        fn matches_brute_force_small_window(seqs in stream(64)) {
            check_against_model(64, &seqs)?;
        }

        #[test]
        fn matches_brute_force_mid_window(seqs in stream(256)) {
            check_against_model(256, &seqs)?;
        }

        #[test]
        fn matches_brute_force_default_window(seqs in stream(700)) {
            check_against_model(DEFAULT_WINDOW, &seqs)?;
        }

        /// Arbitrary input, including far-too-old and huge jumps: never panics, and the
        /// counters stay consistent.
        #[test]
        fn arbitrary_input_is_consistent(seqs in prop::collection::vec(
            prop_oneof![0u64..300, any::<u64>()], 1..200)
        ) {
            let mut t = SeqTracker::with_window(64);
            for &s in &seqs {
                t.record(s);
                let r = t.report();
                prop_assert_eq!(r.received, r.unique + r.duplicates + r.too_old);
                prop_assert!(r.longest_loss_run <= r.lost);
                prop_assert!(r.loss_runs <= r.lost);
                prop_assert_eq!(r.lost == 0, r.loss_runs == 0);
            }
        }
    }
}
