//! Matching kernel TX timestamps to the packets they belong to.
//!
//! A socket with `SOF_TIMESTAMPING_OPT_ID` numbers the datagrams it sends (0, 1, 2 …,
//! wrapping at 2³²) and hands each one's TX timestamp back later, on its error
//! queue, under that id. The driver tells the matcher what it sent under which id
//! ([`TxMatcher::note_sent`]) and hands it every timestamp it reads
//! ([`TxMatcher::on_timestamp`]); the matcher gives back the packet a timestamp
//! belongs to. What the driver remembers of a packet (`T`) is up to it.
//!
//! Memory is bounded and nothing allocates per packet: the packets are kept in a
//! ring of a fixed number of slots, indexed by id. A packet whose slot is needed
//! again before its timestamp came is given up on (evicted: the kernel dropped its
//! timestamp, or it is far behind). At the end, [`TxMatcher::drain_unmatched`] hands
//! out, in the order they were sent, the packets whose timestamp never came.

use serde::Serialize;

/// What became of the packets and timestamps handed to a [`TxMatcher`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TxMatchCounts {
    /// Packets noted as sent.
    pub sent: u64,
    /// Timestamps matched to a packet.
    pub matched: u64,
    /// Timestamps with a time but no packet waiting under their id.
    pub unmatched: u64,
    /// Timestamps without a time (another kind of report on the same queue).
    pub orphans: u64,
    /// Packets given up on because their slot was needed for a newer one.
    pub evicted: u64,
}

#[derive(Clone, Copy, Debug)]
struct Slot<T> {
    id: u32,
    /// Position in the order of sending (never wraps).
    order: u64,
    item: T,
}

/// Sent packets waiting for their TX timestamps.
#[derive(Debug)]
pub struct TxMatcher<T> {
    slots: Vec<Option<Slot<T>>>,
    waiting: usize,
    counts: TxMatchCounts,
}

impl<T: Copy> TxMatcher<T> {
    /// A matcher remembering up to `capacity` packets, rounded up to a power of
    /// two (so that consecutive ids take consecutive slots across the wrap of the
    /// 32-bit id).
    pub fn new(capacity: usize) -> TxMatcher<T> {
        TxMatcher {
            slots: vec![None; capacity.max(1).next_power_of_two()],
            waiting: 0,
            counts: TxMatchCounts::default(),
        }
    }

    fn index(&self, id: u32) -> usize {
        id as usize & (self.slots.len() - 1)
    }

    /// How many packets it can remember.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The packet `item` left under timestamp id `id`. Returns the packet it
    /// evicted, if its slot was still taken.
    pub fn note_sent(&mut self, id: u32, item: T) -> Option<T> {
        let order = self.counts.sent;
        self.counts.sent += 1;
        let idx = self.index(id);
        let old = self.slots[idx].replace(Slot { id, order, item });
        match old {
            Some(s) => {
                self.counts.evicted += 1;
                Some(s.item)
            }
            None => {
                self.waiting += 1;
                None
            }
        }
    }

    /// A timestamp for id `id`, with its time if it has one. Returns the packet it
    /// belongs to and the time; `None` (counted) when it has no time or no packet
    /// waits under its id. A timestamp without a time leaves the packet waiting.
    pub fn on_timestamp<S>(&mut self, id: u32, time: Option<S>) -> Option<(T, S)> {
        let Some(time) = time else {
            self.counts.orphans += 1;
            return None;
        };
        let idx = self.index(id);
        match self.slots[idx] {
            Some(s) if s.id == id => {
                self.slots[idx] = None;
                self.waiting -= 1;
                self.counts.matched += 1;
                Some((s.item, time))
            }
            _ => {
                self.counts.unmatched += 1;
                None
            }
        }
    }

    /// Timestamps still owed: packets sent minus timestamps seen (of any kind).
    pub fn outstanding(&self) -> u64 {
        let c = &self.counts;
        c.sent.saturating_sub(c.matched + c.unmatched + c.orphans)
    }

    /// Packets remembered and still waiting for their timestamp.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

    pub fn counts(&self) -> &TxMatchCounts {
        &self.counts
    }

    /// Hands out every packet still waiting, in the order they were sent, and
    /// forgets them (all of them, even if the iterator is dropped early). Sorts the
    /// ring in place: no allocation.
    pub fn drain_unmatched(&mut self) -> DrainUnmatched<'_, T> {
        self.slots
            .sort_unstable_by_key(|s| s.as_ref().map_or(u64::MAX, |s| s.order));
        let n = self.waiting;
        self.waiting = 0;
        DrainUnmatched {
            slots: &mut self.slots[..n],
            next: 0,
        }
    }
}

/// The iterator of [`TxMatcher::drain_unmatched`].
#[derive(Debug)]
pub struct DrainUnmatched<'a, T> {
    slots: &'a mut [Option<Slot<T>>],
    next: usize,
}

impl<T> Iterator for DrainUnmatched<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let slot = self.slots.get_mut(self.next)?;
        self.next += 1;
        slot.take().map(|s| s.item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.slots.len() - self.next;
        (left, Some(left))
    }
}

impl<T> ExactSizeIterator for DrainUnmatched<'_, T> {}

impl<T> Drop for DrainUnmatched<'_, T> {
    fn drop(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_by_id_and_counts_the_rest() {
        let mut m: TxMatcher<u64> = TxMatcher::new(8);
        for id in 0..5u32 {
            assert_eq!(m.note_sent(id, 100 + u64::from(id)), None);
        }
        assert_eq!((m.waiting(), m.outstanding()), (5, 5));
        assert_eq!(m.on_timestamp(1, Some(-7i64)), Some((101, -7)));
        // twice: the packet is gone
        assert_eq!(m.on_timestamp(1, Some(0i64)), None);
        // never sent
        assert_eq!(m.on_timestamp(6, Some(0i64)), None);
        // no time: the packet keeps waiting
        assert_eq!(m.on_timestamp::<i64>(3, None), None);
        assert_eq!(m.on_timestamp(3, Some(9i64)), Some((103, 9)));
        let c = *m.counts();
        assert_eq!(
            (c.sent, c.matched, c.unmatched, c.orphans, c.evicted),
            (5, 2, 2, 1, 0)
        );
        assert_eq!(m.waiting(), 3);
        assert_eq!(m.outstanding(), 0);
    }

    #[test]
    fn a_full_ring_evicts_the_oldest_and_a_late_timestamp_is_unmatched() {
        let mut m: TxMatcher<u32> = TxMatcher::new(4);
        for id in 0..4u32 {
            m.note_sent(id, id);
        }
        assert_eq!(m.note_sent(4, 4), Some(0));
        assert_eq!(m.note_sent(5, 5), Some(1));
        assert_eq!(m.counts().evicted, 2);
        assert_eq!(m.waiting(), 4);
        // id 0 shares slot 0 with id 4: not a match
        assert_eq!(m.on_timestamp(0, Some(1u8)), None);
        assert_eq!(m.on_timestamp(4, Some(1u8)), Some((4, 1)));
        assert_eq!(m.counts().unmatched, 1);
    }

    #[test]
    fn ids_wrap() {
        let mut m: TxMatcher<u64> = TxMatcher::new(3);
        assert_eq!(m.capacity(), 4);
        m.note_sent(u32::MAX, 1);
        m.note_sent(0, 2);
        assert_eq!(m.on_timestamp(0, Some(())), Some((2, ())));
        assert_eq!(m.on_timestamp(u32::MAX, Some(())), Some((1, ())));
        assert_eq!(m.waiting(), 0);
    }

    #[test]
    fn leftovers_come_out_in_sending_order_once() {
        let mut m: TxMatcher<u64> = TxMatcher::new(4);
        // ids wrap inside the ring: slot order differs from sending order
        for (i, id) in [u32::MAX - 1, u32::MAX, 0, 1].into_iter().enumerate() {
            m.note_sent(id, i as u64);
        }
        m.on_timestamp(u32::MAX, Some(()));
        let left: Vec<u64> = m.drain_unmatched().collect();
        assert_eq!(left, vec![0, 2, 3]);
        assert_eq!(m.waiting(), 0);
        assert_eq!(m.drain_unmatched().count(), 0);
        // dropping the iterator early forgets the rest too
        m.note_sent(7, 70);
        m.note_sent(8, 80);
        assert_eq!(m.drain_unmatched().next(), Some(70));
        assert_eq!(m.drain_unmatched().len(), 0);
        // the ring works again afterwards
        m.note_sent(9, 90);
        assert_eq!(m.on_timestamp(9, Some(())), Some((90, ())));
    }

    #[test]
    fn a_zero_capacity_still_holds_one() {
        let mut m: TxMatcher<u8> = TxMatcher::new(0);
        assert_eq!(m.capacity(), 1);
        m.note_sent(5, 1);
        assert_eq!(m.on_timestamp(5, Some(())), Some((1, ())));
    }
}
