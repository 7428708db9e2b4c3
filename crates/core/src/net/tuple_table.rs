//! The classifier's exact rules as an open-addressing table: 5-tuple → index of the
//! first rule for it. A lookup reads one slot (a tuple and an index, 20 bytes) and
//! usually one cache line, and where that line lies follows from the tuple alone,
//! so a driver that sees a packet coming can ask for it ahead of time
//! ([`TupleTable::prefetch`]). A general hash map reads two places (its control
//! bytes and its entries) and offers no such hint.

use super::classify::FiveTuple;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    key: FiveTuple,
    /// Rule index; [`VACANT`] for an empty slot.
    rule: u32,
}

const VACANT: u32 = u32::MAX;

const EMPTY: Slot = Slot {
    key: FiveTuple {
        src: std::net::Ipv4Addr::UNSPECIFIED,
        dst: std::net::Ipv4Addr::UNSPECIFIED,
        proto: 0,
        src_port: 0,
        dst_port: 0,
    },
    rule: VACANT,
};

/// 5-tuple → first rule index, at most half full (linear probing).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TupleTable {
    /// A power of two long and at least 2, or empty.
    slots: Vec<Slot>,
}

fn hash(t: &FiveTuple) -> u64 {
    let a = (u64::from(u32::from(t.src)) << 32) | u64::from(u32::from(t.dst));
    let b = (u64::from(t.proto) << 32) | (u64::from(t.src_port) << 16) | u64::from(t.dst_port);
    // two rounds of multiply-and-fold: every input bit reaches the top bits used
    let x = (a ^ b.rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

impl TupleTable {
    /// The largest rule index the table holds.
    pub const MAX_RULE: usize = VACANT as usize - 1;

    /// The table of `entries` (tuple, rule index up to [`TupleTable::MAX_RULE`]);
    /// the first index given for a tuple is kept.
    pub fn new(entries: impl IntoIterator<Item = (FiveTuple, u32)>) -> TupleTable {
        let entries: Vec<(FiveTuple, u32)> =
            entries.into_iter().filter(|&(_, i)| i != VACANT).collect();
        if entries.is_empty() {
            return TupleTable::default();
        }
        let size = (entries.len() * 2).next_power_of_two();
        let mut table = TupleTable {
            slots: vec![EMPTY; size],
        };
        for (t, i) in entries {
            table.insert(t, i);
        }
        table
    }

    /// The slot a search for `t` starts at (the table is not empty).
    fn home(&self, t: &FiveTuple) -> usize {
        (hash(t) >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    fn insert(&mut self, key: FiveTuple, rule: u32) {
        let mask = self.slots.len() - 1;
        let mut i = self.home(&key);
        loop {
            let s = &mut self.slots[i];
            if s.rule == VACANT {
                *s = Slot { key, rule };
                return;
            }
            if s.key == key {
                return;
            }
            i = (i + 1) & mask;
        }
    }

    /// The rule index kept for `t`.
    #[inline]
    pub fn get(&self, t: &FiveTuple) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.home(t);
        // at most half full: a vacant slot ends every search
        loop {
            let s = &self.slots[i];
            if s.rule == VACANT {
                return None;
            }
            if s.key == *t {
                return Some(s.rule as usize);
            }
            i = (i + 1) & mask;
        }
    }

    /// Asks for the memory where [`TupleTable::get`] of `t` starts looking (a hint:
    /// nothing changes).
    #[inline]
    pub fn prefetch(&self, t: &FiveTuple) {
        if !self.slots.is_empty() {
            crate::prefetch::prefetch(&self.slots[self.home(t)]);
        }
    }

    /// How many tuples the table holds.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.rule != VACANT).count()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;
    use std::net::Ipv4Addr;

    fn tuple(s: u32, d: u32, proto: u8, sp: u16, dp: u16) -> FiveTuple {
        FiveTuple {
            src: Ipv4Addr::from(s),
            dst: Ipv4Addr::from(d),
            proto,
            src_port: sp,
            dst_port: dp,
        }
    }

    #[test]
    fn the_first_index_of_a_tuple_is_kept() {
        let a = tuple(1, 2, 17, 5000, 5001);
        let b = tuple(1, 2, 17, 5000, 5002);
        let t = TupleTable::new([(a, 3), (b, 4), (a, 7)]);
        assert_eq!((t.get(&a), t.get(&b), t.len()), (Some(3), Some(4), 2));
        assert_eq!(t.get(&tuple(1, 2, 6, 5000, 5001)), None);
        let empty = TupleTable::new([]);
        assert_eq!((empty.get(&a), empty.is_empty()), (None, true));
        empty.prefetch(&a);
    }

    proptest! {
        /// The table answers as a map filled with the first index of each tuple
        /// does, for the tuples in it and for others.
        #[test]
        fn answers_like_a_map(
            keys in prop::collection::vec((0u32..8, 0u32..8, 0u8..3, 0u16..4, 0u16..4), 0..200),
            probes in prop::collection::vec((0u32..8, 0u32..8, 0u8..3, 0u16..4, 0u16..4), 0..50),
        ) {
            let entries: Vec<(FiveTuple, u32)> = keys
                .iter()
                .zip(0u32..)
                .map(|(&(s, d, p, sp, dp), i)| (tuple(s, d, p, sp, dp), i))
                .collect();
            let mut map = HashMap::new();
            for &(t, i) in &entries {
                map.entry(t).or_insert(i);
            }
            let table = TupleTable::new(entries.iter().copied());
            prop_assert_eq!(table.len(), map.len());
            for &(s, d, p, sp, dp) in keys.iter().chain(&probes) {
                let t = tuple(s, d, p, sp, dp);
                prop_assert_eq!(table.get(&t), map.get(&t).map(|&i| i as usize));
            }
        }
    }
}
