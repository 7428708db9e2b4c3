//! Greatest common divisor of big integers by Lehmer's method (Knuth, TAOCP vol. 2,
//! §4.5.2, Algorithm L), on little-endian 64-bit limbs.
//!
//! Why not `num_integer::Integer::gcd`: num-bigint uses the binary (Stein) algorithm
//! and allocates a new number at every shift, hundreds of times per gcd of numbers of
//! a few hundred bits. Exact analyses of deep networks reduce every sum and product of
//! such fractions to lowest terms, and that gcd was most of their time. Lehmer's
//! method runs the Euclidean algorithm on the leading 63 bits of both numbers (in
//! registers) for as long as the quotients are provably the same as the full
//! numbers', then applies the collected steps to the full numbers at once: one
//! multi-limb pass per ~30 bits removed instead of one per bit.

use std::cmp::Ordering;

use num_bigint::{BigInt, BigUint, Sign};
use num_traits::Zero;

/// gcd(a, b) ≥ 0; gcd(0, b) = |b|.
pub(crate) fn gcd_int(a: &BigInt, b: &BigInt) -> BigInt {
    BigInt::from_biguint(Sign::Plus, gcd(a.magnitude(), b.magnitude()))
}

/// gcd(a, b); gcd(0, b) = b.
pub(crate) fn gcd(a: &BigUint, b: &BigUint) -> BigUint {
    let mut u = a.to_u64_digits();
    let mut v = b.to_u64_digits();
    from_limbs(&gcd_limbs(&mut u, &mut v))
}

fn from_limbs(limbs: &[u64]) -> BigUint {
    let mut digits = Vec::with_capacity(limbs.len() * 2);
    for &l in limbs {
        digits.push(l as u32);
        digits.push((l >> 32) as u32);
    }
    BigUint::new(digits)
}

fn normalise(x: &mut Vec<u64>) {
    while x.last() == Some(&0) {
        x.pop();
    }
}

fn cmp_limbs(a: &[u64], b: &[u64]) -> Ordering {
    a.len()
        .cmp(&b.len())
        .then_with(|| a.iter().rev().cmp(b.iter().rev()))
}

fn bit_len(x: &[u64]) -> u64 {
    match x.last() {
        None => 0,
        Some(&top) => 64 * (x.len() as u64 - 1) + u64::from(64 - top.leading_zeros()),
    }
}

/// The 64 bits of `x >> shift` starting at bit 0 (the caller makes sure they are all
/// there is: `x < 2^(shift + 64)`).
fn bits_from(x: &[u64], shift: u64) -> u64 {
    let (w, s) = ((shift / 64) as usize, shift % 64);
    let lo = x.get(w).copied().unwrap_or(0);
    let hi = x.get(w + 1).copied().unwrap_or(0);
    if s == 0 {
        lo
    } else {
        (lo >> s) | (hi << (64 - s))
    }
}

fn to_u128(x: &[u64]) -> u128 {
    let lo = x.first().copied().unwrap_or(0);
    let hi = x.get(1).copied().unwrap_or(0);
    (u128::from(hi) << 64) | u128::from(lo)
}

use crate::q::gcd_u128;

/// `p u + q v` where the caller knows the result is not negative (`p`, `q` of
/// opposite signs or zero, each below 2^63 in magnitude).
fn lin_comb(p: i64, u: &[u64], q: i64, v: &[u64]) -> Vec<u64> {
    let (p, q) = (i128::from(p), i128::from(q));
    let n = u.len().max(v.len());
    let mut out = Vec::with_capacity(n + 1);
    let mut carry: i128 = 0;
    for i in 0..n {
        let a = i128::from(u.get(i).copied().unwrap_or(0));
        let b = i128::from(v.get(i).copied().unwrap_or(0));
        // |p a|, |q b| < 2^127 and of opposite signs, so the sum fits; the carry is
        // below 2^64 in magnitude.
        let acc = p * a + q * b + carry;
        out.push(acc as u64);
        carry = acc >> 64;
    }
    debug_assert!(carry >= 0, "Lehmer step produced a negative number");
    if carry > 0 {
        out.push(carry as u64);
    }
    normalise(&mut out);
    out
}

/// Algorithm L, steps L2–L3, on the leading digits `x ≥ y ≥ 0` (below 2^62) of two
/// numbers `u ≥ v`: the cosequence `(a, b, c, d)` such that `(a u + b v, c u + d v)`
/// are the remainders the Euclidean algorithm on `u, v` would reach, as long as both
/// candidate quotients agree. `b = 0` when no step could be simulated.
pub(crate) fn cosequence(mut x: i64, mut y: i64) -> (i64, i64, i64, i64) {
    let (mut a, mut b, mut c, mut d): (i64, i64, i64, i64) = (1, 0, 0, 1);
    // Algorithm L, steps L2–L3: while both candidate quotients agree, the
    // quotient is that of the full numbers.
    // (Checked: the cosequence stays below 2^62 in theory; should it not, the
    // simulation just stops early, which is always correct.)
    while let (Some(xa), Some(xb), Some(yc), Some(yd)) = (
        x.checked_add(a),
        x.checked_add(b),
        y.checked_add(c),
        y.checked_add(d),
    ) {
        if yc <= 0 || yd <= 0 || xa < 0 || xb < 0 {
            break;
        }
        let q = xa / yc;
        if q != xb / yd {
            break;
        }
        let (Some(nc), Some(nd)) = (
            q.checked_mul(c).and_then(|qc| a.checked_sub(qc)),
            q.checked_mul(d).and_then(|qd| b.checked_sub(qd)),
        ) else {
            break;
        };
        (a, c) = (c, nc);
        (b, d) = (d, nd);
        (x, y) = (y, x - q * y);
    }
    (a, b, c, d)
}

/// gcd of two normalised limb vectors (consumed).
fn gcd_limbs(u: &mut Vec<u64>, v: &mut Vec<u64>) -> Vec<u64> {
    normalise(u);
    normalise(v);
    if cmp_limbs(u, v) == Ordering::Less {
        std::mem::swap(u, v);
    }
    loop {
        if v.is_empty() {
            return std::mem::take(u);
        }
        if v.len() == 1 {
            // A one-limb divisor: one pass of u mod v, then on machine words.
            let m = u128::from(v[0]);
            let r = u
                .iter()
                .rev()
                .fold(0u128, |r, &l| ((r << 64) | u128::from(l)) % m);
            let g = gcd_u128(m, r);
            return vec![g as u64];
        }
        if u.len() <= 2 {
            let g = gcd_u128(to_u128(u), to_u128(v));
            let mut out = vec![g as u64, (g >> 64) as u64];
            normalise(&mut out);
            return out;
        }
        // Leading 62 bits of u, and the same bits of v (u ≥ v): the simulation and
        // its cosequence stay below 2^62 in magnitude, so every sum and quotient of
        // Algorithm L fits an i64 (a machine division, not a 128-bit library call).
        let shift = bit_len(u) - 62;
        let x = bits_from(u, shift) as i64;
        let y = bits_from(v, shift) as i64;
        let (a, b, c, d) = cosequence(x, y);
        if b == 0 {
            // No step could be simulated (a huge quotient): one full division.
            let bu = from_limbs(u);
            let bv = from_limbs(v);
            let r = &bu % &bv;
            *u = std::mem::take(v);
            *v = r.to_u64_digits();
        } else {
            let nu = lin_comb(a, u, b, v);
            let nv = lin_comb(c, u, d, v);
            *u = nu;
            *v = nv;
        }
    }
}

/// `n / d` in lowest terms with a positive denominator (`d ≠ 0`).
pub(crate) fn reduce(n: BigInt, d: BigInt) -> (BigInt, BigInt) {
    let g = gcd_int(&n, &d);
    let (mut n, mut d) = if g.is_zero() || g == BigInt::from(1) {
        (n, d)
    } else {
        (n / &g, d / &g)
    };
    if d.sign() == Sign::Minus {
        n = -n;
        d = -d;
    }
    (n, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_integer::Integer;
    use rand::{Rng, SeedableRng};

    fn big(rng: &mut rand::rngs::StdRng, limbs: usize) -> BigUint {
        let v: Vec<u64> = (0..limbs).map(|_| rng.gen()).collect();
        from_limbs(&v)
    }

    #[test]
    fn agrees_with_the_binary_gcd() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..3000 {
            let (k, m, n) = (
                rng.gen_range(0..4),
                rng.gen_range(0..8),
                rng.gen_range(0..8),
            );
            let common = big(&mut rng, k);
            let a = big(&mut rng, m) * &common;
            let b = big(&mut rng, n) * &common;
            assert_eq!(gcd(&a, &b), a.gcd(&b), "gcd({a}, {b})");
        }
    }

    #[test]
    fn edge_cases() {
        let z = BigUint::zero();
        let x = BigUint::from(10u32).pow(60);
        assert_eq!(gcd(&z, &z), z);
        assert_eq!(gcd(&x, &z), x);
        assert_eq!(gcd(&z, &x), x);
        assert_eq!(gcd(&x, &x), x);
        // Huge quotients (the single-precision simulation cannot step).
        let y = BigUint::from(3u32);
        assert_eq!(gcd(&(&x * 3u32 + 3u32), &y), y);
        assert_eq!(gcd(&(&x << 300usize), &(&x << 5usize)), &x << 5usize);
        // Powers of ten (the denominators of the analyses): gcd of 10^a·k and 10^b.
        let t = BigUint::from(10u32);
        assert_eq!(
            gcd(&(t.pow(90) * 7u32), &(t.pow(75) * 21u32)),
            t.pow(75) * 7u32
        );
        let (n, d) = reduce(BigInt::from(-6), BigInt::from(-4));
        assert_eq!((n, d), (BigInt::from(3), BigInt::from(2)));
    }
}
