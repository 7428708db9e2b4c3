//! `U256`: unsigned 256-bit integers on four 64-bit limbs (little-endian), the middle
//! tier of [`crate::q::Q`] between a pair of `i128` and heap big integers.
//!
//! Why: on deep networks every FIFO hop multiplies denominators by a rate, and the
//! exact analyses carry fractions of 130–220 bits. As big integers each of them is an
//! allocation, and each sum a handful more (conversions, gcd limbs, quotients); here
//! the arithmetic lives in registers and on the stack. Only what `Q` needs: checked sums and
//! products, exact and Euclidean division, a Lehmer gcd and a 512-bit product for
//! comparisons. Anything that overflows is the caller's cue to go to big integers.

use std::cmp::Ordering;

use num_bigint::BigUint;

use crate::q::gcd_u128;

/// An unsigned 256-bit integer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub(crate) struct U256(pub(crate) [u64; 4]);

impl Ord for U256 {
    fn cmp(&self, o: &U256) -> Ordering {
        self.0.iter().rev().cmp(o.0.iter().rev())
    }
}

impl PartialOrd for U256 {
    fn partial_cmp(&self, o: &U256) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl U256 {
    pub(crate) const ZERO: U256 = U256([0; 4]);
    pub(crate) const ONE: U256 = U256([1, 0, 0, 0]);

    pub(crate) fn from_u128(v: u128) -> U256 {
        U256([v as u64, (v >> 64) as u64, 0, 0])
    }

    /// The value, when it fits 128 bits.
    pub(crate) fn to_u128(self) -> Option<u128> {
        (self.0[2] == 0 && self.0[3] == 0)
            .then(|| u128::from(self.0[0]) | (u128::from(self.0[1]) << 64))
    }

    fn to_u64(self) -> Option<u64> {
        (self.0[1..].iter().all(|&l| l == 0)).then_some(self.0[0])
    }

    pub(crate) fn is_zero(self) -> bool {
        self.0 == [0; 4]
    }

    /// Number of significant bits (0 for zero).
    pub(crate) fn bits(self) -> u32 {
        match self.0.iter().rposition(|&l| l != 0) {
            None => 0,
            Some(i) => 64 * i as u32 + (64 - self.0[i].leading_zeros()),
        }
    }

    pub(crate) fn checked_add(self, o: U256) -> Option<U256> {
        let mut out = [0u64; 4];
        let mut carry = false;
        for (i, slot) in out.iter_mut().enumerate() {
            let (s1, c1) = self.0[i].overflowing_add(o.0[i]);
            let (s2, c2) = s1.overflowing_add(u64::from(carry));
            *slot = s2;
            carry = c1 || c2;
        }
        (!carry).then_some(U256(out))
    }

    /// `self − o` modulo 2^256 (exact when `self ≥ o`).
    pub(crate) fn wrapping_sub(self, o: U256) -> U256 {
        let mut out = [0u64; 4];
        let mut borrow = false;
        for (i, slot) in out.iter_mut().enumerate() {
            let (s1, b1) = self.0[i].overflowing_sub(o.0[i]);
            let (s2, b2) = s1.overflowing_sub(u64::from(borrow));
            *slot = s2;
            borrow = b1 || b2;
        }
        U256(out)
    }

    /// `self · m` modulo 2^256.
    fn wrapping_mul_u64(self, m: u64) -> U256 {
        let mut out = [0u64; 4];
        let mut carry = 0u128;
        for (i, slot) in out.iter_mut().enumerate() {
            let p = u128::from(self.0[i]) * u128::from(m) + carry;
            *slot = p as u64;
            carry = p >> 64;
        }
        U256(out)
    }

    /// `self << n` modulo 2^256 (`n < 256`).
    fn shl(self, n: u32) -> U256 {
        let (w, s) = ((n / 64) as usize, n % 64);
        let mut out = [0u64; 4];
        for (i, slot) in out.iter_mut().enumerate().skip(w) {
            let carry = match i.checked_sub(w + 1) {
                Some(j) if s > 0 => self.0[j] >> (64 - s),
                _ => 0,
            };
            *slot = (self.0[i - w] << s) | carry;
        }
        U256(out)
    }

    /// `self >> n` (`n < 256`).
    fn shr(self, n: u32) -> U256 {
        let (w, s) = ((n / 64) as usize, n % 64);
        let mut out = [0u64; 4];
        for (i, slot) in out.iter_mut().take(4 - w).enumerate() {
            let hi = match self.0.get(i + w + 1) {
                Some(&h) if s > 0 => h << (64 - s),
                _ => 0,
            };
            *slot = (self.0[i + w] >> s) | hi;
        }
        U256(out)
    }

    /// The full 512-bit product, as eight limbs.
    pub(crate) fn mul_wide(self, o: U256) -> [u64; 8] {
        let mut out = [0u64; 8];
        for i in 0..4 {
            if self.0[i] == 0 {
                continue;
            }
            let mut carry = 0u128;
            for j in 0..4 {
                let p = u128::from(self.0[i]) * u128::from(o.0[j]) + u128::from(out[i + j]) + carry;
                out[i + j] = p as u64;
                carry = p >> 64;
            }
            out[i + 4] = carry as u64;
        }
        out
    }

    pub(crate) fn checked_mul(self, o: U256) -> Option<U256> {
        if self.bits() + o.bits() > 257 {
            return None;
        }
        let w = self.mul_wide(o);
        (w[4..] == [0; 4]).then_some(U256([w[0], w[1], w[2], w[3]]))
    }

    /// Quotient and remainder by a one-limb divisor (`d > 0`).
    fn divrem_u64(self, d: u64) -> (U256, u64) {
        let mut q = [0u64; 4];
        let mut r = 0u128;
        for i in (0..4).rev() {
            let cur = (r << 64) | u128::from(self.0[i]);
            q[i] = (cur / u128::from(d)) as u64;
            r = cur % u128::from(d);
        }
        (U256(q), r as u64)
    }

    /// The remainder by a one-limb divisor (`d > 0`): half the 128-bit library
    /// divisions of [`U256::divrem_u64`], for the gcd, which needs no quotient.
    fn rem_u64(self, d: u64) -> u64 {
        let d = u128::from(d);
        let mut r = 0u128;
        for i in (0..4).rev() {
            r = ((r << 64) | u128::from(self.0[i])) % d;
        }
        r as u64
    }

    /// Quotient and remainder (`d > 0`).
    pub(crate) fn divrem(self, d: U256) -> (U256, U256) {
        if let Some(d64) = d.to_u64() {
            let (q, r) = self.divrem_u64(d64);
            return (q, U256::from_u128(u128::from(r)));
        }
        let mut q = U256::ZERO;
        let mut r = self;
        while r >= d {
            let (digit, k) = quotient_digit(r, d);
            r = r.wrapping_sub(d.wrapping_mul_u64(digit).shl(k));
            q = q.wrapping_add_digit(digit, k);
        }
        (q, r)
    }

    /// `self + (digit << k)`, for a quotient being built (`digit · 2^k` is at most
    /// the dividend, and so is the sum: neither overflows).
    fn wrapping_add_digit(self, digit: u64, k: u32) -> U256 {
        let add = U256([digit, 0, 0, 0]).shl(k);
        self.checked_add(add).unwrap_or(self)
    }

    /// `self / d` for a `d > 0` known to divide `self`: no division at all. With
    /// `d = 2^k m`, `m` odd, the quotient is `(self >> k) · m⁻¹` modulo 2^256 (exact,
    /// since the quotient is below 2^256), `m⁻¹` by Newton's iteration.
    /// A quotient known to fit 64 or 128 bits (it has at most `bits(self) −
    /// bits(d) + 1`) is found modulo 2^64 or 2^128 with that much of the inverse.
    pub(crate) fn div_exact(self, d: U256) -> U256 {
        if d == U256::ONE {
            return self;
        }
        let k = d.trailing_zeros();
        let (n, m) = (self.shr(k), d.shr(k));
        let q_bits = (n.bits() + 1).saturating_sub(m.bits());
        if q_bits <= 64 {
            let q = n.0[0].wrapping_mul(crate::q::inverse_u64(m.0[0]));
            return U256([q, 0, 0, 0]);
        }
        if q_bits <= 128 {
            let low = |x: U256| (u128::from(x.0[1]) << 64) | u128::from(x.0[0]);
            return U256::from_u128(low(n).wrapping_mul(crate::q::inverse_u128(low(m))));
        }
        n.wrapping_mul(m.inverse_odd())
    }

    /// `self / d` when `d > 0` divides `self`, else `None`: the quotient as
    /// [`U256::div_exact`] would give it, kept only if multiplying back gives `self`.
    pub(crate) fn quotient_if_divides(self, d: U256) -> Option<U256> {
        if d > self && !self.is_zero() {
            return None;
        }
        let q = self.div_exact(d);
        // A product has at least bits(q) + bits(d) − 1 bits: a longer quotient is
        // none, without the product.
        let short = self.is_zero() || q.bits() + d.bits() <= self.bits() + 1;
        (short && q.checked_mul(d) == Some(self)).then_some(q)
    }

    fn trailing_zeros(self) -> u32 {
        match self.0.iter().position(|&l| l != 0) {
            None => 0,
            Some(i) => 64 * i as u32 + self.0[i].trailing_zeros(),
        }
    }

    /// `self · o` modulo 2^256.
    fn wrapping_mul(self, o: U256) -> U256 {
        let mut out = [0u64; 4];
        for i in 0..4 {
            if self.0[i] == 0 {
                continue;
            }
            let mut carry = 0u128;
            for j in 0..4 - i {
                let p = u128::from(self.0[i]) * u128::from(o.0[j]) + u128::from(out[i + j]) + carry;
                out[i + j] = p as u64;
                carry = p >> 64;
            }
        }
        U256(out)
    }

    /// The inverse of an odd value modulo 2^256: each Newton step
    /// `x ← x (2 − m x)` doubles the bits that are right, from 64 (see
    /// [`crate::q::inverse_u64`]).
    fn inverse_odd(self) -> U256 {
        let mut x = U256([crate::q::inverse_u64(self.0[0]), 0, 0, 0]);
        let two = U256([2, 0, 0, 0]);
        for _ in 0..2 {
            x = x.wrapping_mul(two.wrapping_sub(self.wrapping_mul(x)));
        }
        x
    }

    /// gcd(self, o); gcd(0, o) = o.
    pub(crate) fn gcd(self, o: U256) -> U256 {
        // Whole numbers and equal denominators are common: no loop for them.
        if self == U256::ONE || o == U256::ONE {
            return U256::ONE;
        }
        if self == o {
            return self;
        }
        let (mut u, mut v) = if self >= o { (self, o) } else { (o, self) };
        loop {
            if v.is_zero() {
                return u;
            }
            if let Some(x) = u.to_u128() {
                return U256::from_u128(gcd_u128(x, v.to_u128().unwrap_or(0)));
            }
            if let Some(y) = v.to_u64() {
                let r = u.rem_u64(y);
                return U256::from_u128(gcd_u128(u128::from(y), u128::from(r)));
            }
            (u, v) = lehmer_step(u, v);
            if u < v {
                std::mem::swap(&mut u, &mut v);
            }
        }
    }

    pub(crate) fn to_biguint(self) -> BigUint {
        let mut digits = Vec::with_capacity(8);
        for l in self.0 {
            digits.push(l as u32);
            digits.push((l >> 32) as u32);
        }
        BigUint::new(digits)
    }

    /// The value, when it fits 256 bits.
    pub(crate) fn from_biguint(b: &BigUint) -> Option<U256> {
        if b.bits() > 256 {
            return None;
        }
        let mut out = [0u64; 4];
        for (slot, d) in out.iter_mut().zip(b.iter_u64_digits()) {
            *slot = d;
        }
        Some(U256(out))
    }
}

/// One quotient digit of `r / d` (`r ≥ d`, `d ≥ 2^64`) and its weight: `digit · 2^k ·
/// d ≤ r`, and `r` loses about 62 bits per digit (the top 127 bits of `r` over the
/// top 64 bits of `d`, rounded up).
fn quotient_digit(r: U256, d: U256) -> (u64, u32) {
    let (rb, db) = (r.bits(), d.bits());
    let d_top = u128::from(d.shr(db - 64).0[0]) + 1;
    let m = rb.saturating_sub(127).max(db - 64);
    let r_top = r.shr(m).to_u128().unwrap_or(u128::MAX);
    let digit = (r_top / d_top) as u64;
    if digit == 0 {
        // r < d + 2^(db − 64): one subtraction.
        return (1, 0);
    }
    (digit, m - (db - 64))
}

/// `p u + q v` for a Lehmer cosequence pair (`p`, `q` of opposite signs or zero) whose
/// result is known to lie in `[0, 2^256)`: computed modulo 2^256, so exact.
fn lin_comb(p: i64, u: U256, q: i64, v: U256) -> U256 {
    if q <= 0 {
        u.wrapping_mul_u64(p.unsigned_abs())
            .wrapping_sub(v.wrapping_mul_u64(q.unsigned_abs()))
    } else {
        v.wrapping_mul_u64(q as u64)
            .wrapping_sub(u.wrapping_mul_u64(p.unsigned_abs()))
    }
}

/// One step of Lehmer's gcd (`u ≥ v > 2^64`, `u ≥ 2^128`): the Euclidean steps the
/// leading 62 bits determine, applied at once; one division when none can be.
fn lehmer_step(u: U256, v: U256) -> (U256, U256) {
    let shift = u.bits() - 62;
    let x = u.shr(shift).0[0] as i64;
    let y = v.shr(shift).0[0] as i64;
    let (a, b, c, d) = crate::bigcd::cosequence(x, y);
    if b == 0 {
        return (v, u.divrem(v).1);
    }
    (lin_comb(a, u, b, v), lin_comb(c, u, d, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_integer::Integer;
    use num_traits::Zero;
    use rand::{Rng, SeedableRng};

    fn big(x: U256) -> BigUint {
        x.to_biguint()
    }

    /// A random value with a random number of significant bits (0–256), sometimes a
    /// multiple of a shared factor, sometimes all ones.
    fn random(rng: &mut rand::rngs::StdRng) -> U256 {
        let bits = rng.gen_range(0..=256u32);
        let x = U256([rng.gen(), rng.gen(), rng.gen(), rng.gen()]);
        match rng.gen_range(0..8) {
            0 => U256([u64::MAX; 4]).shr(256 - bits.max(1)),
            1 => U256::ONE.shl(bits.min(255)),
            _ if bits == 0 => U256::ZERO,
            _ => x.shr(256 - bits),
        }
    }

    #[test]
    fn arithmetic_agrees_with_big_integers() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let top = BigUint::from(1u8) << 256usize;
        for _ in 0..20_000 {
            let (a, b) = (random(&mut rng), random(&mut rng));
            let (ba, bb) = (big(a), big(b));
            assert_eq!(U256::from_biguint(&ba), Some(a));
            assert_eq!(a.cmp(&b), ba.cmp(&bb));
            assert_eq!(a.bits() as u64, ba.bits());
            let sum = &ba + &bb;
            assert_eq!(a.checked_add(b).map(big), (sum < top).then_some(sum));
            let prod = &ba * &bb;
            let wide = BigUint::new(
                a.mul_wide(b)
                    .iter()
                    .flat_map(|&l| [l as u32, (l >> 32) as u32])
                    .collect(),
            );
            assert_eq!(wide, prod);
            assert_eq!(a.checked_mul(b).map(big), (prod < top).then_some(prod));
            if a >= b {
                assert_eq!(big(a.wrapping_sub(b)), &ba - &bb);
            }
            if !b.is_zero() {
                let (q, r) = a.divrem(b);
                assert_eq!((big(q), big(r)), ba.div_rem(&bb), "{ba} / {bb}");
            }
            assert_eq!(big(a.gcd(b)), ba.gcd(&bb), "gcd({ba}, {bb})");
        }
    }

    #[test]
    fn gcd_of_values_with_large_common_factors() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        for _ in 0..5_000 {
            let g = random(&mut rng).shr(rng.gen_range(0..250));
            let (x, y) = (random(&mut rng), random(&mut rng));
            let (Some(a), Some(b)) = (g.checked_mul(x), g.checked_mul(y)) else {
                continue;
            };
            assert_eq!(big(a.gcd(b)), big(a).gcd(&big(b)));
            if !g.is_zero() {
                assert_eq!(a.div_exact(g), x);
            }
        }
    }

    #[test]
    fn quotient_only_when_it_divides() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(13);
        for _ in 0..5_000 {
            let d = random(&mut rng).shr(rng.gen_range(0..250)).max(U256::ONE);
            let x = random(&mut rng).shr(rng.gen_range(0..256));
            let want = big(x) % big(d) == BigUint::zero();
            let got = x.quotient_if_divides(d);
            assert_eq!(got.is_some(), want, "{:?} / {:?}", x, d);
            if let Some(q) = got {
                assert_eq!(big(q), big(x) / big(d));
            }
            // Quotients of 64, 128 and 256 bits (the inverse to three precisions).
            for q in [x.shr(192), x.shr(128), x] {
                if let Some(m) = d.checked_mul(q) {
                    assert_eq!(m.div_exact(d), q);
                    assert_eq!(m.quotient_if_divides(d), Some(q));
                }
            }
        }
        assert_eq!(U256::ZERO.quotient_if_divides(U256::ONE), Some(U256::ZERO));
        assert_eq!(U256::ONE.quotient_if_divides(U256::from_u128(2)), None);
    }

    #[test]
    fn edges() {
        let max = U256([u64::MAX; 4]);
        assert_eq!(max.checked_add(U256::ONE), None);
        assert_eq!(max.checked_mul(U256::from_u128(2)), None);
        assert_eq!(max.checked_mul(U256::ONE), Some(max));
        assert_eq!(max.divrem(max), (U256::ONE, U256::ZERO));
        assert_eq!(max.gcd(U256::ZERO), max);
        assert_eq!(U256::ZERO.gcd(U256::ZERO), U256::ZERO);
        assert_eq!(max.gcd(max.wrapping_sub(U256::ONE)), U256::ONE);
        let p = U256::ONE.shl(255);
        assert_eq!(p.shr(255), U256::ONE);
        assert_eq!(p.gcd(U256::ONE.shl(200)), U256::ONE.shl(200));
        assert_eq!(U256::from_biguint(&(BigUint::from(1u8) << 256usize)), None);
    }
}
