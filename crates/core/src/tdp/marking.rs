//! Frame marking (baldi2006, time-driven forwarding): a reserved packet carries a compressed
//! timestamp in its DSCP — `0x0c` marks a TDP packet, `0x10` is set in odd frames,
//! `0x20` in odd cycles. Per input link the receiving node keeps the frame of the last
//! packet and advances it when the parity changes (an alternating-bit protocol); its
//! own clock bounds the answer, so lost packets and idle links are recovered from.

use crate::frame::{parity_bits, DSCP_CYCLE_PARITY, DSCP_FRAME_PARITY, DSCP_TDP_MARK};

/// The mask of the bits that carry the TDP mark (the low four DSCP bits).
const MARK_MASK: u8 = 0x0f;
const PARITY_MASK: u8 = DSCP_FRAME_PARITY | DSCP_CYCLE_PARITY;

/// What a packet's DSCP says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// A TDP packet with its two parity bits (`0x10`/`0x20`).
    Tdp { parity: u8 },
    /// Anything else: best effort.
    BestEffort,
}

/// Reads the 6-bit DSCP. Only `xx1100` is a TDP mark, so standard codepoints such as
/// EF (`101110`) are never mistaken for one.
pub fn classify(dscp: u8) -> Mark {
    if dscp & MARK_MASK == DSCP_TDP_MARK {
        Mark::Tdp {
            parity: dscp & PARITY_MASK,
        }
    } else {
        Mark::BestEffort
    }
}

/// How the upstream frame of a packet was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recovery {
    /// From the alternating-bit counter (the normal case).
    Counter,
    /// The counter's answer did not fit the local clock (packets were lost or the link
    /// was idle): re-synchronised from the local frame.
    Resync,
}

/// Why no upstream frame fits a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MarkError {
    #[error("parity bits {parity:#04x} never occur with k = {k}")]
    ImpossibleParity { parity: u8, k: u32 },
}

/// The alternating-bit state of one input link.
#[derive(Clone, Debug)]
pub struct InputTracker {
    k: u32,
    /// Largest lag, in frames, between the upstream frame and the local frame at
    /// arrival (the forwarding delay of the link bounds it).
    max_lag: i64,
    /// Frames the upstream clock may be ahead of ours.
    lead: i64,
    last: Option<(i64, u8)>,
    resyncs: u64,
}

impl InputTracker {
    /// `max_lag` is the most frames a packet can spend between its upstream frame
    /// and its arrival here (at least 1); `lead` the most frames the upstream clock
    /// may run ahead of this node's (1 is safe for sync errors below a frame).
    pub fn new(k: u32, max_lag: u32, lead: u32) -> Self {
        InputTracker {
            k: k.max(1),
            max_lag: max_lag.max(1) as i64,
            lead: lead as i64,
            last: None,
            resyncs: 0,
        }
    }

    pub fn resyncs(&self) -> u64 {
        self.resyncs
    }

    pub fn last_frame(&self) -> Option<i64> {
        self.last.map(|(f, _)| f)
    }

    /// The upstream frame of a TDP packet with `parity` bits that arrives in local
    /// frame `now_frame` (the frame the packet was *processed* in: it may lag its
    /// upstream frame by up to `max_lag` frames).
    pub fn on_packet(&mut self, now_frame: i64, parity: u8) -> Result<(i64, Recovery), MarkError> {
        self.on_packet_within(now_frame, parity, self.max_lag)
    }

    /// The same for a packet whose frame of arrival on the wire is known (the kernel's
    /// receive timestamp): a link carries a frame's packets within that frame, so the
    /// packet arrived in its upstream frame or the one after, and the counter is only
    /// trusted inside that window. A wider window is ambiguous without padding: the
    /// frame-parity bit repeats every two frames, so a packet of frame `F` after a
    /// silent frame `F − 1` looks like one more packet of frame `F − 2`.
    pub fn on_arrival(
        &mut self,
        arrival_frame: i64,
        parity: u8,
    ) -> Result<(i64, Recovery), MarkError> {
        self.on_packet_within(arrival_frame, parity, 1)
    }

    fn on_packet_within(
        &mut self,
        now_frame: i64,
        parity: u8,
        max_lag: i64,
    ) -> Result<(i64, Recovery), MarkError> {
        let parity = parity & PARITY_MASK;
        let lo = now_frame.saturating_sub(max_lag);
        let hi = now_frame.saturating_add(self.lead);
        let by_counter = self.last.and_then(|(f, p)| {
            if p == parity {
                Some(f)
            } else {
                self.next_with(f, parity)
            }
        });
        let (frame, how) = match by_counter {
            Some(f) if f >= lo && f <= hi => (f, Recovery::Counter),
            _ => {
                // the latest matching frame not after ours; one ahead only if the
                // clocks' lead allows it and nothing behind fits
                let behind = self
                    .latest_with(now_frame, parity)
                    .ok_or(MarkError::ImpossibleParity { parity, k: self.k })?;
                let f = match self.next_with(now_frame, parity) {
                    Some(ahead) if behind < lo && ahead <= hi => ahead,
                    _ => behind,
                };
                if self.last.is_some() {
                    self.resyncs += 1;
                }
                (
                    f,
                    if self.last.is_some() {
                        Recovery::Resync
                    } else {
                        Recovery::Counter
                    },
                )
            }
        };
        self.last = Some((frame, parity));
        Ok((frame, how))
    }

    /// The first frame after `from` with these parity bits.
    fn next_with(&self, from: i64, parity: u8) -> Option<i64> {
        let period = 2 * self.k as i64;
        (1..=period)
            .map(|s| from.saturating_add(s))
            .find(|&f| parity_bits(f, self.k) == parity)
    }

    /// The last frame at or before `at` with these parity bits.
    fn latest_with(&self, at: i64, parity: u8) -> Option<i64> {
        let period = 2 * self.k as i64;
        (0..period)
            .map(|s| at.saturating_sub(s))
            .find(|&f| parity_bits(f, self.k) == parity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn classify_marks() {
        assert_eq!(classify(0x0c), Mark::Tdp { parity: 0 });
        assert_eq!(classify(0x3c), Mark::Tdp { parity: 0x30 });
        assert_eq!(classify(0x1c), Mark::Tdp { parity: 0x10 });
        assert_eq!(classify(46), Mark::BestEffort); // EF
        assert_eq!(classify(0), Mark::BestEffort);
        assert_eq!(classify(0x08), Mark::BestEffort);
    }

    #[test]
    fn counter_follows_every_frame() {
        let k = 4;
        let mut t = InputTracker::new(k, 2, 1);
        for f in 0..40 {
            // two packets per frame, arriving one frame later
            for _ in 0..2 {
                assert_eq!(
                    t.on_packet(f + 1, parity_bits(f, k)),
                    Ok((f, Recovery::Counter))
                );
            }
        }
        assert_eq!(t.resyncs(), 0);
    }

    #[test]
    fn recovers_after_a_silent_stretch() {
        let k = 4;
        let mut t = InputTracker::new(k, 2, 1);
        assert_eq!(t.on_packet(11, parity_bits(10, k)).unwrap().0, 10);
        // frames 11..=20 lost; frame 21 has the parity of frame 11 (both odd, cycle 2 vs 5)
        let (f, how) = t.on_packet(22, parity_bits(21, k)).unwrap();
        assert_eq!((f, how), (21, Recovery::Resync));
        assert_eq!(t.resyncs(), 1);
    }

    #[test]
    fn a_frame_after_a_silent_one_is_not_taken_for_the_frame_before() {
        // k = 60: frames 10 and 12 carry the same bits. A packet of frame 10, frame
        // 11 silent, a packet of frame 12 arriving in frame 12.
        let k = 60;
        assert_eq!(parity_bits(10, k), parity_bits(12, k));
        // processing time with a window of 2: the counter's "same frame" is believed
        let mut t = InputTracker::new(k, 2, 1);
        assert_eq!(t.on_packet(10, parity_bits(10, k)).unwrap().0, 10);
        assert_eq!(t.on_packet(12, parity_bits(12, k)).unwrap().0, 10);
        // arrival time: the window is one frame, so the local clock decides
        let mut t = InputTracker::new(k, 2, 1);
        assert_eq!(t.on_arrival(10, parity_bits(10, k)).unwrap().0, 10);
        assert_eq!(
            t.on_arrival(12, parity_bits(12, k)),
            Ok((12, Recovery::Resync))
        );
        // ... and a packet sent at the very end of frame 12 that arrives in frame 13
        assert_eq!(
            t.on_arrival(13, parity_bits(12, k)),
            Ok((12, Recovery::Counter))
        );
    }

    #[test]
    fn impossible_parity_with_k_one() {
        let mut t = InputTracker::new(1, 2, 1);
        assert_eq!(
            t.on_packet(5, DSCP_FRAME_PARITY),
            Err(MarkError::ImpossibleParity { parity: 0x10, k: 1 })
        );
    }

    proptest! {
        /// Whatever packets are lost, the recovered frame is the true one as long as
        /// arrivals lag their frame by at most `max_lag` and the lag window is shorter
        /// than the parity period (2 frames ahead of the counter).
        #[test]
        fn recovers_the_true_frame(
            k in 2u32..20,
            sent in proptest::collection::vec((0i64..4, any::<bool>(), 0i64..2), 1..200)
        ) {
            let mut t = InputTracker::new(k, 1, 0);
            let mut frame = 1000i64;
            for (gap, lost, lag) in sent {
                frame += gap;
                if lost { continue; }
                let (got, _) = t.on_packet(frame + lag, parity_bits(frame, k)).unwrap();
                prop_assert_eq!(got, frame);
            }
        }
    }
}
