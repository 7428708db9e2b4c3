//! A small cache of forwarding decisions: for a destination address and the TTL a
//! packet arrived with, the output port and the next hop's MAC address.
//!
//! The route table (longest prefix, then the TTL) and the neighbour table answer the
//! same question for every packet of a flow, and a router carries few flows. The
//! cache is direct-mapped: one slot per hash of `(destination, TTL)`, a hit is one
//! compare, a miss costs the two table lookups it replaces and fills the slot. Only
//! answers are kept (a packet with no route or neighbour asks the tables again), and
//! the tables never change while a node runs, so an entry never goes stale.

use std::net::Ipv4Addr;

use crate::wire::EthernetAddress;

/// Slots in the cache (a power of two).
pub const SLOTS: usize = 64;

#[derive(Clone, Copy, Debug)]
struct Slot {
    /// `(dst << 8 | ttl) + 1`, 0 for an empty slot.
    key: u64,
    port: u32,
    mac: EthernetAddress,
}

const EMPTY: Slot = Slot {
    key: 0,
    port: 0,
    mac: EthernetAddress([0; 6]),
};

/// Output port index and next-hop MAC per `(destination, TTL)`.
#[derive(Clone, Debug)]
pub struct NextHopCache {
    slots: Box<[Slot; SLOTS]>,
}

impl Default for NextHopCache {
    fn default() -> NextHopCache {
        NextHopCache {
            slots: Box::new([EMPTY; SLOTS]),
        }
    }
}

fn key(dst: Ipv4Addr, ttl: u8) -> u64 {
    ((u64::from(u32::from(dst)) << 8) | u64::from(ttl)) + 1
}

fn slot_of(key: u64) -> usize {
    // Fibonacci hashing: the top bits of the product spread neighbouring addresses.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - SLOTS.trailing_zeros())) as usize
}

impl NextHopCache {
    /// The cached port index and MAC for `dst` at `ttl`, if the slot holds them.
    #[inline]
    pub fn get(&self, dst: Ipv4Addr, ttl: u8) -> Option<(usize, EthernetAddress)> {
        let k = key(dst, ttl);
        let s = &self.slots[slot_of(k)];
        (s.key == k).then_some((s.port as usize, s.mac))
    }

    /// Asks for the memory of the slot of `dst` at `ttl` ahead of a
    /// [`NextHopCache::get`] (a hint: nothing changes).
    #[inline]
    pub fn prefetch(&self, dst: Ipv4Addr, ttl: u8) {
        crate::prefetch::prefetch(&self.slots[slot_of(key(dst, ttl))]);
    }

    /// Remembers the answer for `dst` at `ttl`, replacing whatever shared its slot.
    #[inline]
    pub fn put(&mut self, dst: Ipv4Addr, ttl: u8, port: usize, mac: EthernetAddress) {
        let Ok(port) = u32::try_from(port) else {
            return;
        };
        let k = key(dst, ttl);
        self.slots[slot_of(k)] = Slot { key: k, port, mac };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mac(b: u8) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, 0, b])
    }

    #[test]
    fn empty_cache_misses_even_for_the_zero_key() {
        let c = NextHopCache::default();
        assert_eq!(c.get(Ipv4Addr::UNSPECIFIED, 0), None);
        assert_eq!(c.get(Ipv4Addr::new(10, 0, 0, 1), 64), None);
    }

    #[test]
    fn a_hit_needs_the_same_destination_and_ttl() {
        let mut c = NextHopCache::default();
        let dst = Ipv4Addr::new(10, 0, 1, 2);
        c.put(dst, 63, 3, mac(7));
        assert_eq!(c.get(dst, 63), Some((3, mac(7))));
        assert_eq!(c.get(dst, 62), None);
        assert_eq!(c.get(Ipv4Addr::new(10, 0, 1, 3), 63), None);
    }

    proptest! {
        /// Whatever was put and evicted, a hit returns the last answer put for that
        /// exact key: the cache can forget, never confuse.
        #[test]
        fn hits_are_always_the_last_answer_for_that_key(
            ops in prop::collection::vec((any::<u32>(), any::<u8>(), 0usize..16), 1..400),
            probe in prop::collection::vec((any::<u32>(), any::<u8>()), 1..50),
        ) {
            let mut c = NextHopCache::default();
            let mut truth = std::collections::HashMap::new();
            // a narrow address space, so keys collide in slots and repeat
            for &(a, ttl, port) in &ops {
                let dst = Ipv4Addr::from(a % 97);
                c.put(dst, ttl % 4, port, mac(port as u8));
                truth.insert((dst, ttl % 4), port);
            }
            let keys = ops.iter().map(|&(a, t, _)| (a, t)).chain(probe.iter().copied());
            for (a, ttl) in keys {
                let dst = Ipv4Addr::from(a % 97);
                if let Some((port, m)) = c.get(dst, ttl % 4) {
                    prop_assert_eq!(Some(&port), truth.get(&(dst, ttl % 4)));
                    prop_assert_eq!(m, mac(port as u8));
                }
            }
        }
    }
}
