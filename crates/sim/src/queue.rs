//! The event queue: events come out ordered by time and, among those of one
//! instant, by their [`Place`]: when they were scheduled, then who scheduled them
//! and how many events that one had scheduled before. The tie-break makes a run
//! deterministic, and it depends on nothing but the events themselves (not on the
//! order in which nodes happened to be handled), so a network cut into parts that
//! run apart orders every instant the same way.
//!
//! A calendar of buckets rather than one heap: time is cut into buckets of
//! [`BUCKET_NS`], a ring of [`RING`] buckets covers the next few milliseconds (where
//! nearly every event of a network falls: the next frame start, a packet's arrival
//! at the far end of a link) and a heap holds the rest. A bucket is sorted when the
//! clock reaches it; events scheduled into it after that are inserted in order. So
//! an event costs a push onto a short vector and a pop from it, both in memory the
//! loop touched a moment ago, where a heap of a large network's events would sift
//! through megabytes for each. Time only moves forward: an event is never scheduled
//! before the last one taken out.
//!
//! A bitmap of the ring, one bit per bucket, says which buckets hold events, so the
//! clock jumps to the next bucket with events (a `trailing_zeros` over at most
//! `RING / 64` words) instead of walking the empty ones: a small, sparse network has
//! one event every few microseconds, and most buckets are empty.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// log2 of the bucket width in nanoseconds.
const BUCKET_BITS: u32 = 10;
/// Width of a bucket: 1.024 µs.
pub const BUCKET_NS: i64 = 1 << BUCKET_BITS;
/// Buckets in the ring: together 4.2 ms ahead of the clock.
pub const RING: usize = 4096;
/// A bucket's deque is kept for reuse up to this many events (a burst — every
/// router's frame start at one instant — does not pin its size in every bucket).
const KEEP: usize = 256;
/// Larger deques kept aside for the next burst (a large network's frame starts come
/// every frame: without them each burst grows a deque from `KEEP` again, copying
/// its events at every doubling).
const SPARE_BIG: usize = 4;

/// An event's place among the events of its instant: the time it was scheduled
/// (earlier first), then a tag its scheduler gives (the engine's: the node that
/// scheduled it and how many it had scheduled before).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    pub created: i64,
    pub tag: u64,
}

struct Item<E> {
    at: i64,
    place: Place,
    event: E,
}

impl<E> Item<E> {
    fn key(&self) -> (i64, Place) {
        (self.at, self.place)
    }
}

impl<E> PartialEq for Item<E> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl<E> Eq for Item<E> {}
impl<E> PartialOrd for Item<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<E> Ord for Item<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        // a max-heap: the earliest first
        other.key().cmp(&self.key())
    }
}

fn bucket_of(at: i64) -> i64 {
    at >> BUCKET_BITS
}

/// Which slots of the ring hold events: bit `s % 64` of word `s / 64` for slot `s`.
struct Occupancy {
    words: [u64; RING / 64],
}

impl Occupancy {
    fn new() -> Self {
        Occupancy {
            words: [0; RING / 64],
        }
    }

    fn set(&mut self, slot: usize) {
        self.words[slot / 64] |= 1 << (slot % 64);
    }

    fn clear(&mut self, slot: usize) {
        self.words[slot / 64] &= !(1 << (slot % 64));
    }

    #[cfg(test)]
    fn get(&self, slot: usize) -> bool {
        self.words[slot / 64] & (1 << (slot % 64)) != 0
    }

    /// How many slots after `from` (0 for `from` itself, going round the ring) the
    /// first set bit is, or `None` when no bit is set.
    fn distance_to_next(&self, from: usize) -> Option<usize> {
        let n = self.words.len();
        let (w0, bit) = (from / 64, from % 64);
        // the first word from `from`'s bit on, then the whole words after it, then
        // the first word again for the bits below `from`'s
        let first = self.words[w0] >> bit;
        if first != 0 {
            return Some(first.trailing_zeros() as usize);
        }
        for k in 1..=n {
            let w = self.words[(w0 + k) % n];
            if w != 0 {
                let slot = (w0 + k) % n * 64 + w.trailing_zeros() as usize;
                return Some((slot + RING - from) % RING);
            }
        }
        None
    }
}

/// Events by time.
pub struct EventQueue<E> {
    /// The events of bucket `b` (absolute number, `cursor < b < cursor + RING`)
    /// are `ring[b mod RING]`, in insertion order; `ring[cursor mod RING]` is empty.
    ring: Vec<VecDeque<Item<E>>>,
    /// Bit `s` set ⇔ `ring[s]` holds events.
    occupied: Occupancy,
    /// The events of the bucket the clock is in (`cursor`), in order.
    current: VecDeque<Item<E>>,
    cursor: i64,
    /// Events in the ring and in `current`.
    near: usize,
    /// Events beyond the ring.
    far: BinaryHeap<Item<E>>,
    /// The place of the event taken out last.
    last_out: Place,
    peak: usize,
    /// Whether `cursor` has been placed (at the first event).
    placed: bool,
    /// Empty deques of more than `KEEP` slots, for buckets that fill past it.
    spare_big: Vec<VecDeque<Item<E>>>,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            ring: (0..RING).map(|_| VecDeque::new()).collect(),
            occupied: Occupancy::new(),
            current: VecDeque::new(),
            cursor: 0,
            near: 0,
            far: BinaryHeap::new(),
            last_out: Place::default(),
            peak: 0,
            placed: false,
            spare_big: Vec::new(),
        }
    }
}

impl<E> EventQueue<E> {
    fn slot(b: i64) -> usize {
        b.rem_euclid(RING as i64) as usize
    }

    /// Files an event of bucket `b` (`cursor < b < cursor + RING`) in the ring.
    fn put_in_ring(&mut self, b: i64, item: Item<E>) {
        let slot = Self::slot(b);
        let events = &mut self.ring[slot];
        if events.len() == events.capacity() && events.len() >= KEEP {
            // full past KEEP: continue in a larger spare instead of doubling
            let n = events.len();
            if let Some(i) = self.spare_big.iter().position(|b| b.capacity() > n) {
                let mut big = self.spare_big.swap_remove(i);
                big.extend(events.drain(..));
                std::mem::swap(events, &mut big);
            }
        }
        events.push_back(item);
        self.occupied.set(slot);
        self.near += 1;
    }

    /// The first bucket after the clock's that holds events in the ring.
    fn next_in_ring(&self) -> Option<i64> {
        let from = self.cursor + 1;
        let d = self.occupied.distance_to_next(Self::slot(from))?;
        Some(from + d as i64)
    }

    /// The place of the event taken out last ([`Place::default`] before any).
    pub fn last_out(&self) -> Place {
        self.last_out
    }

    /// Schedules `event` at `at` in `place` among the events of that instant. An
    /// event scheduled for the instant being taken from must come after the event
    /// taken out last (time only moves forward).
    #[inline]
    pub fn push(&mut self, at: i64, place: Place, event: E) {
        let item = Item { at, place, event };
        if !self.placed {
            self.placed = true;
            self.cursor = bucket_of(at);
        }
        let b = bucket_of(at).max(self.cursor);
        if b >= self.cursor + RING as i64 {
            self.far.push(item);
        } else if b == self.cursor {
            // the bucket being taken from: in its place (usually at or near the
            // end: after every event of the same time already there, unless its
            // place was reserved before theirs)
            let key = item.key();
            if self.current.back().is_none_or(|x| x.key() < key) {
                self.current.push_back(item);
            } else {
                let i = self.current.partition_point(|x| x.key() < key);
                self.current.insert(i, item);
            }
            self.near += 1;
        } else {
            self.put_in_ring(b, item);
        }
        self.peak = self.peak.max(self.len());
    }

    /// Moves the clock to bucket `b` (the current one is empty): the far events
    /// that now fall in the ring join it, and bucket `b` is sorted into `current`.
    fn advance_to(&mut self, b: i64) {
        self.cursor = b;
        let end = b + RING as i64;
        while self.far.peek().is_some_and(|i| bucket_of(i.at) < end) {
            if let Some(item) = self.far.pop() {
                let ib = bucket_of(item.at).max(b);
                self.put_in_ring(ib, item);
            }
        }
        let slot = Self::slot(b);
        self.occupied.clear(slot);
        let events = &mut self.ring[slot];
        if events.len() > 1 {
            events.make_contiguous().sort_unstable_by_key(Item::key);
        }
        // the emptied deque serves the bucket that now enters the ring
        std::mem::swap(&mut self.current, events);
        if events.capacity() > KEEP {
            let mut big = std::mem::take(events);
            // empty already; clearing puts its start back at slot 0, so the burst it
            // takes next lies in one piece and sorts without being moved first
            big.clear();
            if self.spare_big.len() < SPARE_BIG {
                self.spare_big.push(big);
            }
        }
    }

    /// The event `n` places after the earliest waiting one (0: the earliest), when
    /// it is in the clock's bucket (what comes next at about this time; `None`
    /// past the bucket, even when later buckets hold events).
    pub fn upcoming(&self, n: usize) -> Option<&E> {
        self.current.get(n).map(|i| &i.event)
    }

    /// The earliest event, if it is due at or before `until`.
    pub fn pop_until(&mut self, until: i64) -> Option<(i64, E)> {
        loop {
            if let Some(first) = self.current.front() {
                if first.at > until {
                    return None;
                }
                let item = self.current.pop_front()?;
                self.near -= 1;
                self.last_out = item.place;
                return Some((item.at, item.event));
            }
            // the current bucket is done: on to the next one with events, never
            // beyond `until` (what is scheduled later must not land behind the clock);
            // the ring's events all come before the far ones
            let next = if let Some(b) = self.next_in_ring() {
                b
            } else {
                let b = bucket_of(self.far.peek()?.at);
                b.max(self.cursor + 1)
            };
            if next > bucket_of(until) {
                return None;
            }
            self.advance_to(next);
        }
    }

    /// When the earliest event is due (a search of the first bucket with events).
    pub fn next_at(&self) -> Option<i64> {
        if let Some(i) = self.current.front() {
            return Some(i.at);
        }
        match self.next_in_ring() {
            Some(b) => self.ring[Self::slot(b)].iter().map(|i| i.at).min(),
            None => self.far.peek().map(|i| i.at),
        }
    }

    /// Whether an event is due at or before `t` (`t` at or after the last event
    /// taken out).
    pub fn any_due_by(&self, t: i64) -> bool {
        // the current bucket, when not empty, holds the earliest event
        if let Some(i) = self.current.front() {
            return i.at <= t;
        }
        let last = bucket_of(t);
        if last <= self.cursor {
            return false;
        }
        // the earliest event is in the first bucket with events: the ring's, or when
        // the ring is empty the far heap's
        match self.next_in_ring() {
            Some(b) if b < last => true,
            Some(b) if b == last => self.ring[Self::slot(b)].iter().any(|i| i.at <= t),
            Some(_) => false,
            None => self.far.peek().is_some_and(|i| i.at <= t),
        }
    }

    /// Whether the bitmap holds its invariant: bit set ⇔ ring bucket not empty.
    #[cfg(test)]
    fn occupancy_matches(&self) -> bool {
        (0..RING).all(|s| self.occupied.get(s) != self.ring[s].is_empty()) // set ⇔ not empty
    }

    pub fn len(&self) -> usize {
        self.near + self.far.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Most events ever waiting at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::ops::{Deref, DerefMut};

    /// A queue whose events are placed in the order they are pushed.
    struct Q<E> {
        q: EventQueue<E>,
        n: u64,
    }

    impl<E> Q<E> {
        fn new() -> Self {
            Q {
                q: EventQueue::default(),
                n: 0,
            }
        }

        fn push(&mut self, at: i64, e: E) {
            self.n += 1;
            let place = Place {
                created: 0,
                tag: self.n,
            };
            self.q.push(at, place, e);
        }
    }

    impl<E> Deref for Q<E> {
        type Target = EventQueue<E>;
        fn deref(&self) -> &EventQueue<E> {
            &self.q
        }
    }

    impl<E> DerefMut for Q<E> {
        fn deref_mut(&mut self) -> &mut EventQueue<E> {
            &mut self.q
        }
    }

    #[test]
    fn earliest_first_then_in_insertion_order() {
        let mut q = Q::new();
        q.push(5, "c");
        q.push(1, "a");
        q.push(5, "d");
        q.push(1, "b");
        assert_eq!(q.pop_until(0), None);
        let got: Vec<_> = std::iter::from_fn(|| q.pop_until(10)).collect();
        assert_eq!(got, [(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
        assert_eq!(q.peak(), 4);
    }

    #[test]
    fn an_instant_comes_out_in_the_order_of_places_not_of_pushes() {
        let mut q = EventQueue::default();
        let place = |created, tag| Place { created, tag };
        let far = 3 * RING as i64 * BUCKET_NS;
        q.push(5, place(0, 1), "a");
        q.push(5, place(2, 7), "d");
        q.push(far, place(3, 1), "late");
        q.push(9, place(0, 9), "e");
        assert_eq!(q.last_out(), Place::default());
        assert_eq!(q.pop_until(10), Some((5, "a")));
        assert_eq!(q.last_out(), place(0, 1));
        // pushed after "d", into the bucket being taken from, with places before it:
        // scheduled earlier, or at the same time by a scheduler of a lower tag
        q.push(5, place(2, 3), "c");
        q.push(5, place(1, 99), "b");
        q.push(far, place(2, 1), "early");
        let got: Vec<_> = std::iter::from_fn(|| q.pop_until(far)).collect();
        assert_eq!(
            got,
            [
                (5, "b"),
                (5, "c"),
                (5, "d"),
                (9, "e"),
                (far, "early"),
                (far, "late")
            ]
        );
    }

    #[test]
    fn upcoming_looks_ahead_only_within_the_clock_bucket() {
        let mut q = Q::new();
        for (at, e) in [(7, "a"), (7, "b"), (8, "c"), (5_000_000, "far")] {
            q.push(at, e);
        }
        assert_eq!(q.pop_until(10), Some((7, "a")));
        assert_eq!(q.upcoming(0), Some(&"b"));
        assert_eq!(q.upcoming(1), Some(&"c"));
        assert_eq!(q.upcoming(2), None, "the far event is in another bucket");
        assert_eq!(q.pop_until(10), Some((7, "b")));
        assert_eq!(q.upcoming(0), Some(&"c"));
    }

    #[test]
    fn bursts_past_the_kept_size_stay_in_order_on_spare_deques() {
        let mut q = Q::new();
        let n = 5 * KEEP as u32;
        // a burst per frame, as every router's frame start gives: each one larger
        // than a bucket keeps, filed while the clock is in an earlier bucket
        for burst in 0..(2 * SPARE_BIG as i64) {
            let at = 1_000 + burst * 1_000_000;
            q.push(at - 1_000, u32::MAX);
            for e in 0..n {
                // two instants in the bucket, pushed alternately
                q.push(at + i64::from(e % 2), e);
            }
            assert_eq!(q.pop_until(at - 1), Some((at - 1_000, u32::MAX)));
            let got: Vec<_> = std::iter::from_fn(|| q.pop_until(at + 1)).collect();
            let want: Vec<_> = (0..n)
                .filter(|e| e % 2 == 0)
                .map(|e| (at, e))
                .chain((0..n).filter(|e| e % 2 == 1).map(|e| (at + 1, e)))
                .collect();
            assert_eq!(got, want, "burst {burst}");
            assert!(q.is_empty());
        }
        assert!(q.spare_big.len() <= SPARE_BIG);
        assert!(!q.spare_big.is_empty());
    }

    #[test]
    fn far_events_and_long_gaps() {
        let mut q = Q::new();
        let far = 3 * RING as i64 * BUCKET_NS;
        q.push(1_000, 1);
        q.push(far, 3);
        q.push(far, 4);
        q.push(far - 1, 2);
        assert!(q.any_due_by(1_000) && !q.any_due_by(999));
        assert_eq!(q.pop_until(far - 2), Some((1_000, 1)));
        assert_eq!(q.pop_until(far - 2), None);
        assert!(!q.any_due_by(far - 2));
        // scheduled after the clock stopped short of the far events
        q.push(far - 2, 0);
        assert!(q.any_due_by(far - 2));
        let got: Vec<_> = std::iter::from_fn(|| q.pop_until(i64::MAX)).collect();
        assert_eq!(got, [(far - 2, 0), (far - 1, 2), (far, 3), (far, 4)]);
        assert!(q.is_empty());
    }

    #[test]
    fn occupancy_finds_the_next_bit_round_the_ring() {
        let mut o = Occupancy::new();
        assert_eq!(o.distance_to_next(0), None);
        o.set(70);
        assert_eq!(o.distance_to_next(70), Some(0));
        assert_eq!(o.distance_to_next(3), Some(67));
        assert_eq!(o.distance_to_next(71), Some(RING - 1));
        o.set(RING - 1);
        assert_eq!(o.distance_to_next(71), Some(RING - 72));
        assert_eq!(o.distance_to_next(RING - 1), Some(0));
        o.clear(RING - 1);
        o.clear(70);
        o.set(5);
        // from past the only bit, in its word: round the whole ring back to it
        assert_eq!(o.distance_to_next(6), Some(RING - 1));
        assert_eq!(o.distance_to_next(RING - 1), Some(6));
        o.clear(5);
        assert_eq!(o.distance_to_next(6), None);
    }

    #[test]
    fn jumps_over_empty_buckets_round_the_ring() {
        let mut q = Q::new();
        // each event just inside the ring's reach from the one before: the clock
        // jumps over RING - 10 empty buckets, and goes round the ring 39 times
        let step = (RING as i64 - 10) * BUCKET_NS;
        q.push(0, 0);
        for i in 1..40u32 {
            let (t, e) = q.pop_until(i64::MAX).unwrap();
            assert_eq!(e, i - 1);
            assert!(q.occupancy_matches());
            q.push(t + step, i);
            assert!(q.occupancy_matches());
            assert!(!q.any_due_by(t + step - 1) && q.any_due_by(t + step));
        }
    }

    /// The reference: one heap over (time, place).
    struct Reference {
        heap: BinaryHeap<Item<u32>>,
    }

    impl Reference {
        fn push(&mut self, at: i64, place: Place, e: u32) {
            self.heap.push(Item {
                at,
                place,
                event: e,
            });
        }

        fn pop_until(&mut self, until: i64) -> Option<(i64, u32)> {
            if self.heap.peek()?.at > until {
                return None;
            }
            self.heap.pop().map(|i| (i.at, i.event))
        }
    }

    proptest! {
        /// Any schedule that never goes back in time comes out exactly as from one
        /// heap: each step schedules events some time after the clock (often the
        /// same instant, sometimes far ahead), then takes out what is due by a
        /// point ahead of it.
        #[test]
        fn same_order_as_one_heap(
            steps in prop::collection::vec(
                (
                    prop::collection::vec(
                        (
                            prop_oneof![
                                Just(0i64),
                                0i64..3_000,
                                0i64..20_000_000,
                                Just(RING as i64 * BUCKET_NS),
                            ],
                            0u64..4,
                        ),
                        0..6,
                    ),
                    prop_oneof![0i64..2_000, 0i64..10_000_000],
                    0usize..8,
                ),
                1..120,
            )
        ) {
            let mut q = EventQueue::default();
            let mut r = Reference { heap: BinaryHeap::new() };
            let mut now = 1_000_000_000i64;
            let mut id = 0u32;
            for (delays, ahead, takes) in steps {
                for (d, tag) in delays {
                    id += 1;
                    // scheduled now: for this very instant, after every event of it
                    // taken out (those scheduled now, in the order of `id`, with the
                    // top bit); for a later one any tag (unique with the id)
                    let id64 = u64::from(id);
                    let tag = if d == 0 { (1 << 62) | id64 } else { (tag << 32) | id64 };
                    let place = Place { created: now, tag };
                    q.push(now + d, place, id);
                    r.push(now + d, place, id);
                }
                let until = now + ahead;
                for _ in 0..takes {
                    prop_assert_eq!(q.any_due_by(until), r.heap.peek().is_some_and(|i| i.at <= until));
                    let (a, b) = (q.pop_until(until), r.pop_until(until));
                    prop_assert_eq!(a, b);
                    match a {
                        Some((t, _)) => now = t,
                        None => {
                            now = until;
                            break;
                        }
                    }
                }
                prop_assert_eq!(q.len(), r.heap.len());
                prop_assert!(q.occupancy_matches());
            }
            let rest: Vec<_> = std::iter::from_fn(|| q.pop_until(i64::MAX)).collect();
            let want: Vec<_> = std::iter::from_fn(|| r.pop_until(i64::MAX)).collect();
            prop_assert_eq!(rest, want);
        }
    }
}
