//! The event queue: a binary heap ordered by (time, insertion order), so events at
//! the same instant run in the order they were scheduled — the tie-break that makes
//! a run deterministic.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

struct Item<E> {
    at: i64,
    seq: u64,
    event: E,
}

impl<E> PartialEq for Item<E> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
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
        (other.at, other.seq).cmp(&(self.at, self.seq))
    }
}

/// Events by time.
pub struct EventQueue<E> {
    heap: BinaryHeap<Item<E>>,
    seq: u64,
    peak: usize,
}

impl<E> Default for EventQueue<E> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            seq: 0,
            peak: 0,
        }
    }
}

impl<E> EventQueue<E> {
    pub fn push(&mut self, at: i64, event: E) {
        self.seq += 1;
        self.heap.push(Item {
            at,
            seq: self.seq,
            event,
        });
        self.peak = self.peak.max(self.heap.len());
    }

    /// The earliest event, if it is due at or before `until`.
    pub fn pop_until(&mut self, until: i64) -> Option<(i64, E)> {
        if self.heap.peek()?.at > until {
            return None;
        }
        self.heap.pop().map(|i| (i.at, i.event))
    }

    /// When the earliest event is due.
    pub fn next_at(&self) -> Option<i64> {
        self.heap.peek().map(|i| i.at)
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }

    /// Most events ever waiting at once.
    pub fn peak(&self) -> usize {
        self.peak
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_then_in_insertion_order() {
        let mut q = EventQueue::default();
        q.push(5, "c");
        q.push(1, "a");
        q.push(5, "d");
        q.push(1, "b");
        assert_eq!(q.pop_until(0), None);
        let got: Vec<_> = std::iter::from_fn(|| q.pop_until(10)).collect();
        assert_eq!(got, [(1, "a"), (1, "b"), (5, "c"), (5, "d")]);
        assert_eq!(q.peak(), 4);
    }
}
