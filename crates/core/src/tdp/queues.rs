//! The output module of a TDP port (baldi2006, time-driven forwarding): `n_buf = d_max + 1` frame
//! queues. A packet to be forwarded in frame `TF_out` goes to queue
//! `((TF_out + k - TF_curr) mod k + buf_curr) mod n_buf`; at each frame start the next
//! queue becomes the one being flushed. The extra queue guarantees the queue being
//! flushed is never written.

use std::collections::VecDeque;

use thiserror::Error;

/// The queue-index formula of baldi2006, on frame positions within the cycle
/// (`tf_out`, `tf_curr` in `[0, k)`).
pub fn queue_index(tf_out: u32, tf_curr: u32, k: u32, buf_curr: usize, n_buf: usize) -> usize {
    let ahead = ((tf_out as u64 + k as u64 - tf_curr as u64) % k as u64) as usize;
    (ahead + buf_curr) % n_buf
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EnqueueError {
    /// The packet's frame is the current one (or already past): rule 1 of pipeline
    /// forwarding is broken — a frame slip.
    #[error("packet for frame {frame} arrived in frame {current}: too late for its frame")]
    Late { frame: i64, current: i64 },
    /// The packet's frame is more than `d_max` frames ahead: no queue holds it yet.
    #[error("packet for frame {frame} is more than {d_max} frames ahead of frame {current}")]
    TooEarly {
        frame: i64,
        current: i64,
        d_max: u32,
    },
    /// The queue for that frame already holds a frame's worth of bytes.
    #[error("queue for frame {frame} is full ({bytes} of {capacity} bytes)")]
    Full {
        frame: i64,
        bytes: u64,
        capacity: u64,
    },
}

/// The frame queues of one output port, holding packets of type `P`.
#[derive(Debug, Clone)]
pub struct FrameQueues<P> {
    k: u32,
    queues: Vec<VecDeque<P>>,
    bytes: Vec<u64>,
    /// Packets in all queues (kept here, so an empty port is known without
    /// reading its queues).
    count: usize,
    capacity: u64,
    /// Absolute index of the current frame (the one being flushed).
    current: i64,
    /// Queue being flushed in the current frame.
    buf_curr: usize,
}

impl<P> FrameQueues<P> {
    /// `d_max` is the largest forwarding delay in frames, so `n_buf = d_max + 1`;
    /// `capacity` is the bytes a queue may hold (a frame's worth, `TF * C`).
    /// `d_max` must be in `[1, k)` so every queued frame has a distinct position in the
    /// cycle; `None` otherwise.
    pub fn new(k: u32, d_max: u32, capacity: u64, current: i64) -> Option<Self> {
        if d_max == 0 || d_max >= k {
            return None;
        }
        let n_buf = d_max as usize + 1;
        Some(FrameQueues {
            k,
            queues: (0..n_buf).map(|_| VecDeque::new()).collect(),
            bytes: vec![0; n_buf],
            count: 0,
            capacity,
            current,
            buf_curr: 0,
        })
    }

    pub fn n_buf(&self) -> usize {
        self.queues.len()
    }
    pub fn current_frame(&self) -> i64 {
        self.current
    }
    pub fn buf_curr(&self) -> usize {
        self.buf_curr
    }

    fn slot(&self, frame: i64) -> u32 {
        frame.rem_euclid(self.k as i64) as u32
    }

    /// Puts a packet of `bytes` bytes into the queue of forwarding frame `frame`
    /// (absolute index). Returns the queue index used.
    pub fn enqueue(&mut self, frame: i64, bytes: u64, packet: P) -> Result<usize, EnqueueError> {
        self.try_enqueue(frame, bytes, packet).map_err(|(e, _)| e)
    }

    /// [`FrameQueues::enqueue`] that hands the packet back on error, so a router can
    /// still send it another way (best effort) or recycle its buffer.
    pub fn try_enqueue(
        &mut self,
        frame: i64,
        bytes: u64,
        packet: P,
    ) -> Result<usize, (EnqueueError, P)> {
        let ahead = frame.saturating_sub(self.current);
        if ahead <= 0 {
            return Err((
                EnqueueError::Late {
                    frame,
                    current: self.current,
                },
                packet,
            ));
        }
        let d_max = (self.n_buf() - 1) as u32;
        if ahead > d_max as i64 {
            return Err((
                EnqueueError::TooEarly {
                    frame,
                    current: self.current,
                    d_max,
                },
                packet,
            ));
        }
        let q = queue_index(
            self.slot(frame),
            self.slot(self.current),
            self.k,
            self.buf_curr,
            self.n_buf(),
        );
        let held = self.bytes[q];
        if held.saturating_add(bytes) > self.capacity {
            return Err((
                EnqueueError::Full {
                    frame,
                    bytes: held,
                    capacity: self.capacity,
                },
                packet,
            ));
        }
        self.bytes[q] = held + bytes;
        self.queues[q].push_back(packet);
        self.count += 1;
        Ok(q)
    }

    /// Moves to a later frame. Packets left in the queues of frames that passed are
    /// returned in frame order as slipped (they missed their frame); the queue of the
    /// new current frame is then the one [`FrameQueues::pop`] serves.
    pub fn advance_to(&mut self, frame: i64, mut slipped: impl FnMut(i64, P)) {
        while self.current < frame {
            // whatever the current frame did not send missed it
            let q = self.buf_curr;
            while let Some(p) = self.queues[q].pop_front() {
                self.count -= 1;
                slipped(self.current, p);
            }
            self.bytes[q] = 0;
            self.current += 1;
            self.buf_curr = (self.buf_curr + 1) % self.n_buf();
        }
    }

    /// Moves to a later frame in one step, however far: every queued packet missed
    /// its frame and is returned in frame order as slipped. Costs `O(n_buf)`
    /// whatever the distance (a clock jump, a node that slept through many frames).
    pub fn skip_to(&mut self, frame: i64, mut slipped: impl FnMut(i64, P)) {
        if frame <= self.current {
            return;
        }
        let n = self.n_buf();
        for i in 0..n {
            let q = (self.buf_curr + i) % n;
            let f = self.current.saturating_add(i as i64);
            while let Some(p) = self.queues[q].pop_front() {
                self.count -= 1;
                slipped(f, p);
            }
            self.bytes[q] = 0;
        }
        let steps = frame.saturating_sub(self.current);
        self.buf_curr = ((self.buf_curr as i64 + steps.rem_euclid(n as i64)) % n as i64) as usize;
        self.current = frame;
    }

    /// Asks the CPU for the queues' heads (a hint, see [`crate::prefetch`]).
    pub(crate) fn prefetch(&self) {
        crate::prefetch::prefetch(self.queues.as_ptr());
        crate::prefetch::prefetch(self.bytes.as_ptr());
    }

    /// Next packet to send in the current frame, first in first out.
    pub fn pop(&mut self) -> Option<P> {
        if self.count == 0 {
            return None;
        }
        let p = self.queues[self.buf_curr].pop_front()?;
        self.count -= 1;
        Some(p)
    }

    /// The packet [`FrameQueues::pop`] would hand out next.
    pub fn front(&self) -> Option<&P> {
        if self.count == 0 {
            return None;
        }
        self.queues[self.buf_curr].front()
    }

    /// Packets waiting for the current frame.
    pub fn pending_now(&self) -> usize {
        if self.count == 0 {
            return 0;
        }
        self.queues[self.buf_curr].len()
    }

    /// Every queued packet, to update in place (queue order is kept).
    pub fn for_each_mut(&mut self, mut f: impl FnMut(&mut P)) {
        for q in &mut self.queues {
            q.iter_mut().for_each(&mut f);
        }
    }

    /// The largest forwarding delay these queues hold packets for (`n_buf - 1`).
    pub fn d_max(&self) -> u32 {
        (self.queues.len() as u32).saturating_sub(1)
    }

    /// Packets waiting in all queues.
    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_baldi_formula() {
        // k = 100, n_buf = 3 (d_max = 2); flushing queue 1 in slot 98
        assert_eq!(queue_index(99, 98, 100, 1, 3), 2);
        assert_eq!(queue_index(0, 98, 100, 1, 3), 0); // wraps over the cycle end
        assert_eq!(queue_index(98, 98, 100, 1, 3), 1); // the one being flushed
    }

    #[test]
    fn late_early_and_full() {
        let mut q: FrameQueues<u32> = FrameQueues::new(10, 2, 3000, 100).unwrap();
        assert_eq!(q.n_buf(), 3);
        assert_eq!(
            q.enqueue(100, 10, 1),
            Err(EnqueueError::Late {
                frame: 100,
                current: 100
            })
        );
        assert_eq!(
            q.enqueue(103, 10, 1),
            Err(EnqueueError::TooEarly {
                frame: 103,
                current: 100,
                d_max: 2
            })
        );
        assert_eq!(q.enqueue(101, 1500, 1), Ok(1));
        assert_eq!(q.enqueue(101, 1500, 2), Ok(1));
        assert_eq!(
            q.enqueue(101, 1, 3),
            Err(EnqueueError::Full {
                frame: 101,
                bytes: 3000,
                capacity: 3000
            })
        );
        assert_eq!(q.enqueue(102, 1, 4), Ok(2));
        assert_eq!(q.pop(), None);
        let mut slipped = Vec::new();
        q.advance_to(101, |f, p| slipped.push((f, p)));
        assert_eq!(q.pop(), Some(1));
        q.advance_to(102, |f, p| slipped.push((f, p)));
        assert_eq!(slipped, vec![(101, 2)]);
        assert_eq!(q.pop(), Some(4));
        assert!(q.is_empty());
    }

    #[test]
    fn skip_to_matches_advance_to() {
        let mut a: FrameQueues<u32> = FrameQueues::new(10, 3, 100, 5).unwrap();
        let mut b = a.clone();
        for (f, p) in [(6, 1), (7, 2), (8, 3), (6, 4)] {
            a.enqueue(f, 1, p).unwrap();
            b.enqueue(f, 1, p).unwrap();
        }
        let (mut sa, mut sb) = (Vec::new(), Vec::new());
        a.advance_to(1_005, |f, p| sa.push((f, p)));
        b.skip_to(1_005, |f, p| sb.push((f, p)));
        assert_eq!(sa, sb);
        assert_eq!(sa, vec![(6, 1), (6, 4), (7, 2), (8, 3)]);
        assert!(a.is_empty() && b.is_empty());
        assert_eq!(
            (a.current_frame(), a.buf_curr()),
            (b.current_frame(), b.buf_curr())
        );
        assert_eq!(b.enqueue(1_006, 1, 9), a.enqueue(1_006, 1, 9));
        let err = b.try_enqueue(1_005, 1, 7).unwrap_err();
        assert_eq!(err.1, 7);
    }

    proptest! {
        /// The formula, run on cycle positions, picks the same queue as a brute-force
        /// model that tracks absolute frames: the queue for frame f is
        /// `(f - current + buf_curr) mod n_buf`, and it is never the one being flushed.
        #[test]
        fn formula_matches_brute_force(
            k in 2u32..200, d_max_frac in 0.0f64..1.0, start in -10_000i64..10_000,
            steps in proptest::collection::vec((0u32..5, 1u32..200), 1..60)
        ) {
            let d_max = 1 + ((k - 2) as f64 * d_max_frac) as u32;
            let n_buf = d_max as usize + 1;
            let mut q: FrameQueues<i64> = FrameQueues::new(k, d_max, u64::MAX, start).unwrap();
            let mut model_buf = 0usize;
            let mut current = start;
            for (advance, ahead) in steps {
                current += advance as i64;
                q.advance_to(current, |_, _| {});
                model_buf = (model_buf + advance as usize) % n_buf;
                prop_assert_eq!(q.buf_curr(), model_buf);
                let ahead = 1 + (ahead % d_max) as i64;
                let frame = current + ahead;
                let idx = q.enqueue(frame, 1, frame).unwrap();
                prop_assert_eq!(idx, (ahead as usize + model_buf) % n_buf);
                prop_assert_eq!(q.len(), q.queues.iter().map(VecDeque::len).sum::<usize>());
                prop_assert_ne!(idx, model_buf);
            }
            // every packet comes out in its own frame
            let last = current + d_max as i64;
            while current <= last {
                while let Some(f) = q.pop() { prop_assert_eq!(f, current); }
                current += 1;
                let mut slips = 0;
                q.advance_to(current, |_, _| slips += 1);
                prop_assert_eq!(slips, 0);
            }
            prop_assert!(q.is_empty());
        }
    }
}
