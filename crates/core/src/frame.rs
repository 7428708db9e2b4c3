//! The common time reference: time-frames of length `TF` counted from an
//! epoch, `k` frames per time-cycle, cycles optionally grouped in super-cycles, a
//! per-node clock offset and a guard at the end of each frame.
//!
//! All arithmetic is done in `i128` so it is exact for every `i64` instant, including
//! instants before the epoch (frame indices are then negative, and the floor is taken
//! towards minus infinity) and near the `i64` limits.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::time::Duration;

/// DSCP codepoint bits that mark a TDP packet (baldi2006).
pub const DSCP_TDP_MARK: u8 = 0x0c;
/// DSCP bit set in odd frames.
pub const DSCP_FRAME_PARITY: u8 = 0x10;
/// DSCP bit that toggles every cycle (set in odd cycles).
pub const DSCP_CYCLE_PARITY: u8 = 0x20;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("time-frame TF must be positive, got {0}")]
    NonPositiveFrame(Duration),
    #[error("k (frames per cycle) must be at least 1, got 0")]
    ZeroK,
    #[error("cycles per super-cycle must be at least 1, got 0")]
    ZeroSuperCycle,
    #[error("guard {guard} must be shorter than the time-frame {tf}")]
    GuardTooLong { guard: Duration, tf: Duration },
    #[error("guard must not be negative, got {0}")]
    NegativeGuard(Duration),
}

/// One node's view of the common time reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameClock {
    tf: Duration,
    epoch_ns: i64,
    k: u32,
    cycles_per_supercycle: Option<u32>,
    offset: Duration,
    guard: Duration,
}

impl FrameClock {
    /// A frame clock with epoch 0, no offset, no guard and no super-cycle.
    pub fn new(tf: Duration, k: u32) -> Result<Self, FrameError> {
        if !tf.is_positive() {
            return Err(FrameError::NonPositiveFrame(tf));
        }
        if k == 0 {
            return Err(FrameError::ZeroK);
        }
        Ok(FrameClock {
            tf,
            epoch_ns: 0,
            k,
            cycles_per_supercycle: None,
            offset: Duration::ZERO,
            guard: Duration::ZERO,
        })
    }

    pub fn with_epoch(mut self, epoch_ns: i64) -> Self {
        self.epoch_ns = epoch_ns;
        self
    }

    /// The node's clock reads `true time + offset` (to emulate imperfect sync).
    pub fn with_offset(mut self, offset: Duration) -> Self {
        self.offset = offset;
        self
    }

    pub fn with_guard(mut self, guard: Duration) -> Result<Self, FrameError> {
        if guard.is_negative() {
            return Err(FrameError::NegativeGuard(guard));
        }
        if guard >= self.tf {
            return Err(FrameError::GuardTooLong { guard, tf: self.tf });
        }
        self.guard = guard;
        Ok(self)
    }

    pub fn with_supercycle(mut self, cycles: u32) -> Result<Self, FrameError> {
        if cycles == 0 {
            return Err(FrameError::ZeroSuperCycle);
        }
        self.cycles_per_supercycle = Some(cycles);
        Ok(self)
    }

    pub fn tf(&self) -> Duration {
        self.tf
    }
    pub fn k(&self) -> u32 {
        self.k
    }
    pub fn epoch_ns(&self) -> i64 {
        self.epoch_ns
    }
    pub fn offset(&self) -> Duration {
        self.offset
    }
    pub fn guard(&self) -> Duration {
        self.guard
    }
    pub fn cycles_per_supercycle(&self) -> Option<u32> {
        self.cycles_per_supercycle
    }

    /// Nanoseconds since the epoch as this node sees them, exactly.
    fn since_epoch(&self, t_ns: i64) -> i128 {
        t_ns as i128 + self.offset.as_nanos() as i128 - self.epoch_ns as i128
    }

    /// `frame(t) = floor((t + offset - epoch) / TF)`. Every `i64` instant has a frame
    /// index that fits in an `i64` because `TF >= 1 ns`... except when the offset pushes
    /// past the limits, where the index saturates.
    pub fn frame_of(&self, t_ns: i64) -> i64 {
        // 64-bit arithmetic whenever it cannot overflow (every instant of a real run;
        // a 128-bit division costs several times more), 128-bit at the limits
        if let Some(since) = self.since_epoch_i64(t_ns) {
            return since.div_euclid(self.tf.as_nanos());
        }
        let f = self
            .since_epoch(t_ns)
            .div_euclid(self.tf.as_nanos() as i128);
        f.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }

    /// [`Self::since_epoch`] when it fits in an `i64`.
    #[inline]
    fn since_epoch_i64(&self, t_ns: i64) -> Option<i64> {
        t_ns.checked_add(self.offset.as_nanos())?
            .checked_sub(self.epoch_ns)
    }

    /// How far into its frame the instant lies, in `[0, TF)`.
    pub fn position_in_frame(&self, t_ns: i64) -> Duration {
        if let Some(since) = self.since_epoch_i64(t_ns) {
            return Duration(since.rem_euclid(self.tf.as_nanos()));
        }
        Duration(
            self.since_epoch(t_ns)
                .rem_euclid(self.tf.as_nanos() as i128) as i64,
        )
    }

    /// The instant (on this node's clock) at which `frame` starts, or `None` if it is
    /// not representable as an `i64`.
    pub fn frame_start(&self, frame: i64) -> Option<i64> {
        let fast = frame
            .checked_mul(self.tf.as_nanos())
            .and_then(|t| t.checked_add(self.epoch_ns))
            .and_then(|t| t.checked_sub(self.offset.as_nanos()));
        if fast.is_some() {
            return fast;
        }
        let t = frame as i128 * self.tf.as_nanos() as i128 + self.epoch_ns as i128
            - self.offset.as_nanos() as i128;
        i64::try_from(t).ok()
    }

    /// The last instant at which a transmission may start in `frame`: the start of
    /// the next frame minus the guard.
    pub fn send_deadline(&self, frame: i64) -> Option<i64> {
        let next = frame.checked_add(1)?;
        self.frame_start(next)?.checked_sub(self.guard.as_nanos())
    }

    /// Whether `t` falls in the guard at the end of its frame.
    pub fn in_guard(&self, t_ns: i64) -> bool {
        self.position_in_frame(t_ns) >= self.tf - self.guard
    }

    /// The first frame starting at or after `t`, and its start.
    pub fn next_frame_start(&self, t_ns: i64) -> Option<(i64, i64)> {
        let f = self.frame_of(t_ns);
        let f = if self.position_in_frame(t_ns) == Duration::ZERO {
            f
        } else {
            f.checked_add(1)?
        };
        Some((f, self.frame_start(f)?))
    }

    /// Position of a frame in its cycle, `frame mod k` in `[0, k)`.
    pub fn slot_in_cycle(&self, frame: i64) -> u32 {
        frame.rem_euclid(self.k as i64) as u32
    }

    /// The cycle a frame belongs to, `floor(frame / k)`.
    pub fn cycle_of(&self, frame: i64) -> i64 {
        frame.div_euclid(self.k as i64)
    }

    /// `(super-cycle index, cycle within it)` when super-cycles are configured.
    pub fn supercycle_of(&self, frame: i64) -> Option<(i64, u32)> {
        let n = self.cycles_per_supercycle? as i64;
        let c = self.cycle_of(frame);
        Some((c.div_euclid(n), c.rem_euclid(n) as u32))
    }

    /// The two parity bits a frame carries in the DSCP field: `0x10` in odd frames,
    /// `0x20` in odd cycles.
    pub fn parity_bits(&self, frame: i64) -> u8 {
        parity_bits(frame, self.k)
    }

    /// The full 6-bit DSCP a TDP packet sent in `frame` carries: the mark plus parity.
    pub fn dscp(&self, frame: i64) -> u8 {
        DSCP_TDP_MARK | self.parity_bits(frame)
    }
}

/// The parity bits of `frame` in a cycle of `k` frames: `0x10` in odd frames, `0x20`
/// in odd cycles. `k` must be at least 1.
pub fn parity_bits(frame: i64, k: u32) -> u8 {
    let mut bits = 0;
    if frame.rem_euclid(2) == 1 {
        bits |= DSCP_FRAME_PARITY;
    }
    if frame.div_euclid(k.max(1) as i64).rem_euclid(2) == 1 {
        bits |= DSCP_CYCLE_PARITY;
    }
    bits
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn clock(tf_us: i64, k: u32) -> FrameClock {
        FrameClock::new(Duration::from_micros(tf_us), k).unwrap()
    }

    #[test]
    fn rejects_bad_parameters() {
        assert_eq!(
            FrameClock::new(Duration::ZERO, 4),
            Err(FrameError::NonPositiveFrame(Duration::ZERO))
        );
        assert_eq!(FrameClock::new(Duration(1), 0), Err(FrameError::ZeroK));
        let c = clock(250, 100);
        assert!(matches!(
            c.with_guard(Duration::from_micros(250)),
            Err(FrameError::GuardTooLong { .. })
        ));
        assert_eq!(c.with_supercycle(0), Err(FrameError::ZeroSuperCycle));
        assert!(c.with_guard(Duration(-1)).is_err());
    }

    #[test]
    fn frame_indices_baldi_example() {
        // TF = 250 us, k = 100, 40 cycles per super-cycle (baldi2006).
        let c = clock(250, 100).with_supercycle(40).unwrap();
        assert_eq!(c.frame_of(0), 0);
        assert_eq!(c.frame_of(249_999), 0);
        assert_eq!(c.frame_of(250_000), 1);
        assert_eq!(c.frame_of(1_000_000_000), 4000);
        assert_eq!(c.slot_in_cycle(4000), 0);
        assert_eq!(c.cycle_of(4000), 40);
        assert_eq!(c.supercycle_of(4000), Some((1, 0)));
        assert_eq!(c.supercycle_of(3999), Some((0, 39)));
        assert_eq!(c.frame_start(4000), Some(1_000_000_000));
    }

    #[test]
    fn before_the_epoch_floors_towards_minus_infinity() {
        let c = clock(100, 4).with_epoch(1_000);
        assert_eq!(c.frame_of(999), -1);
        assert_eq!(c.frame_of(1_000 - 100_000), -1);
        assert_eq!(c.frame_of(1_000 - 100_001), -2);
        assert_eq!(c.slot_in_cycle(-1), 3);
        assert_eq!(c.cycle_of(-1), -1);
        assert_eq!(c.position_in_frame(999), Duration(99_999));
        assert_eq!(c.parity_bits(-1), DSCP_FRAME_PARITY | DSCP_CYCLE_PARITY);
    }

    #[test]
    fn parity_bits_follow_frame_and_cycle() {
        let c = clock(100, 3);
        let bits: Vec<u8> = (0..7).map(|f| c.parity_bits(f)).collect();
        // frames 0..2 are cycle 0, 3..5 cycle 1, 6 cycle 2
        assert_eq!(bits, vec![0x00, 0x10, 0x00, 0x30, 0x20, 0x30, 0x00]);
        assert_eq!(c.dscp(1), 0x1c);
        assert_eq!(c.dscp(0), 0x0c);
    }

    #[test]
    fn offset_and_guard() {
        let c = clock(100, 10)
            .with_offset(Duration::from_micros(10))
            .with_guard(Duration::from_micros(5))
            .unwrap();
        // the node's clock runs 10 us ahead: true time 90 us is already frame 1 for it
        assert_eq!(c.frame_of(90_000), 1);
        assert_eq!(c.frame_start(1), Some(90_000));
        assert_eq!(c.send_deadline(1), Some(185_000));
        assert!(!c.in_guard(184_999));
        assert!(c.in_guard(185_000));
        assert!(c.in_guard(189_999));
        assert!(!c.in_guard(190_000));
        assert_eq!(c.next_frame_start(90_000), Some((1, 90_000)));
        assert_eq!(c.next_frame_start(90_001), Some((2, 190_000)));
    }

    #[test]
    fn near_the_i64_limits() {
        let c = clock(1, 7);
        assert_eq!(c.frame_of(i64::MAX), i64::MAX / 1000);
        assert_eq!(
            c.frame_of(i64::MIN),
            (i64::MIN as i128).div_euclid(1000) as i64
        );
        assert_eq!(c.frame_start(i64::MAX), None);
        assert_eq!(c.send_deadline(i64::MAX), None);
        let tiny = FrameClock::new(Duration(1), 1)
            .unwrap()
            .with_offset(Duration(1));
        assert_eq!(tiny.frame_of(i64::MAX), i64::MAX); // saturates, no panic
        assert_eq!(tiny.frame_start(i64::MIN), None);
    }

    proptest! {
        #[test]
        fn an_instant_lies_in_its_frame(
            tf in 1i64..10_000_000_000, k in 1u32..1000, epoch in any::<i64>(),
            offset in -1_000_000_000i64..1_000_000_000, t in any::<i64>()
        ) {
            let c = FrameClock::new(Duration(tf), k).unwrap()
                .with_epoch(epoch).with_offset(Duration(offset));
            let f = c.frame_of(t);
            if let (Some(start), Some(end)) = (c.frame_start(f), f.checked_add(1).and_then(|n| c.frame_start(n))) {
                prop_assert!(start <= t && t < end);
                prop_assert_eq!(Duration(t - start), c.position_in_frame(t));
            }
            let slot = c.slot_in_cycle(f);
            prop_assert!(slot < k);
            prop_assert_eq!(c.cycle_of(f) as i128 * k as i128 + slot as i128, f as i128);
        }

        /// The 64-bit fast paths give what exact 128-bit arithmetic gives, limits
        /// included (where they fall back to it).
        #[test]
        fn the_fast_paths_are_exact(
            tf in 1i64..10_000_000_000, epoch in any::<i64>(), offset in any::<i64>(),
            t in any::<i64>(), f in any::<i64>()
        ) {
            let c = FrameClock::new(Duration(tf), 8).unwrap()
                .with_epoch(epoch).with_offset(Duration(offset));
            let since = c.since_epoch(t);
            let exact = since.div_euclid(i128::from(tf))
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64;
            prop_assert_eq!(c.frame_of(t), exact);
            prop_assert_eq!(c.position_in_frame(t).as_nanos() as i128, since.rem_euclid(i128::from(tf)));
            let start = i128::from(f) * i128::from(tf) + i128::from(epoch) - i128::from(offset);
            prop_assert_eq!(c.frame_start(f), i64::try_from(start).ok());
        }

        #[test]
        fn parity_changes_every_frame(tf in 1i64..1_000_000, k in 1u32..50, f in -1_000_000i64..1_000_000) {
            let c = FrameClock::new(Duration(tf), k).unwrap();
            prop_assert_ne!(c.parity_bits(f) & DSCP_FRAME_PARITY, c.parity_bits(f + 1) & DSCP_FRAME_PARITY);
            let cycle_bit_changes = (c.parity_bits(f) ^ c.parity_bits(f + 1)) & DSCP_CYCLE_PARITY != 0;
            prop_assert_eq!(cycle_bit_changes, c.slot_in_cycle(f + 1) == 0);
        }
    }
}
