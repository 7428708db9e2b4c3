//! A small seeded generator (SplitMix64): the simulator's only source of chance,
//! so a run is a pure function of its inputs. One stream per node, derived from the
//! run's seed and the node's index, so adding a node does not change the others.

/// SplitMix64 (Steele, Lea and Flood, 2014).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The stream of `index` under `seed`.
    pub fn stream(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ index.wrapping_mul(0xd1b5_4a32_d192_ed03));
        r.next_u64();
        r
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (`n > 0`), without modulo bias worth noticing at 64 bits.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_fixed_by_seed_and_index() {
        let a: Vec<u64> = (0..3).map(|_| Rng::stream(7, 1).next_u64()).collect();
        assert_eq!(a[0], a[1]);
        let mut x = Rng::stream(7, 1);
        let mut y = Rng::stream(7, 2);
        assert_ne!(x.next_u64(), y.next_u64());
        let mut r = Rng::new(1);
        assert!((0..1000).all(|_| r.below(10) < 10));
    }
}
