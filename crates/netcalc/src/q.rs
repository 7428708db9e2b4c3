//! `Q`: exact rational numbers that never overflow silently.
//!
//! Bounds are compared against deadlines and buffers, and an admission decision must
//! not depend on rounding, so every quantity is an exact fraction. Most values fit a
//! pair of `i128` (the fast path); an operation whose result would overflow is redone
//! on fixed 256-bit magnitudes (stack arithmetic, one shared allocation for the
//! result: the fractions of deep networks, whose denominators grow by a rate per FIFO
//! hop, mostly live there), and only beyond that on heap big integers. A result that fits a smaller tier is brought back to it. The
//! representation is canonical (lowest terms, positive denominator, the smallest tier
//! it fits), so derived equality is value equality.

use std::cmp::Ordering;
use std::fmt;
use std::ops::{Add, Div, Mul, Neg, Sub};
use std::sync::Arc;

use num_bigint::{BigInt, Sign};
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};

use crate::u256::U256;

/// An exact rational number.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Q(Repr);

#[derive(Clone, PartialEq, Eq, Hash)]
enum Repr {
    /// `n / d` in lowest terms, `d > 0`, neither equal to `i128::MIN` (so negation and
    /// `abs` cannot overflow).
    Small(i128, i128),
    /// Only values that do not fit `Small` and whose numerator and denominator fit
    /// 256 bits: magnitudes, and the sign apart. Shared like `Big` (inline, it made
    /// every `Q` 80 bytes instead of 48, and the i128-only runs ~15 % slower).
    Mid(Arc<Wide>),
    /// Only values that do not fit `Small`. Shared: values are never changed in
    /// place, and the analyses copy curves (and so their numbers) a lot, so a copy
    /// is a reference count, not three allocations.
    Big(Arc<BigRational>),
}

/// `±n / d` on 256-bit magnitudes. In `Repr::Mid`: lowest terms, `n > 0`, `d > 0`;
/// as an operand of the 256-bit arithmetic any value of the first two tiers (`n` may
/// be zero, then `neg` is false).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
struct Wide {
    neg: bool,
    n: U256,
    d: U256,
}

fn gcd_u64(mut a: u64, mut b: u64) -> u64 {
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    // One division first: the denominators here are mostly powers of ten and rates,
    // which often divide one another (the odd factors 5^k take the binary loop one
    // step per bit).
    if a < b {
        std::mem::swap(&mut a, &mut b);
    }
    let r = a % b;
    if r == 0 {
        return b;
    }
    (a, b) = (b, r);
    let shift = (a | b).trailing_zeros();
    a >>= a.trailing_zeros();
    b >>= b.trailing_zeros();
    // Both odd: the smaller stays, the difference (even) loses its twos. `min` and
    // `abs_diff` compile to conditional moves: no branch to mispredict per bit.
    while a != b {
        let d = a.abs_diff(b);
        a = a.min(b);
        b = d >> d.trailing_zeros();
    }
    a << shift
}

pub(crate) fn gcd_u128(mut a: u128, mut b: u128) -> u128 {
    if a == 0 {
        return b;
    }
    if b == 0 {
        return a;
    }
    // Most values fit 64 bits, where the loop is several times cheaper.
    match (u64::try_from(a), u64::try_from(b)) {
        (Ok(x), Ok(y)) => return u128::from(gcd_u64(x, y)),
        // One wide, one narrow (a denominator against a rate, say): one division
        // brings both to 64 bits, where the binary loop would take a step per bit.
        (Err(_), Ok(y)) => return u128::from(gcd_u64((a % u128::from(y)) as u64, y)),
        (Ok(x), Err(_)) => return u128::from(gcd_u64(x, (b % u128::from(x)) as u64)),
        _ => {}
    }
    // Both wide: one Euclidean step first. Denominators here often divide one
    // another (then this is the answer) or differ in size (then it shrinks a lot).
    if a < b {
        std::mem::swap(&mut a, &mut b);
    }
    let r = a % b;
    if r == 0 {
        return b;
    }
    if let Ok(y) = u64::try_from(r) {
        return u128::from(gcd_u64((b % u128::from(y)) as u64, y));
    }
    (a, b) = (b, r);
    let shift = (a | b).trailing_zeros();
    a >>= a.trailing_zeros();
    b >>= b.trailing_zeros();
    // As in `gcd_u64`, until both fit 64 bits, where the loop is cheaper.
    while (a | b) >> 64 != 0 {
        if a == b {
            return a << shift;
        }
        let d = a.abs_diff(b);
        a = a.min(b);
        b = d >> d.trailing_zeros();
    }
    u128::from(gcd_u64(a as u64, b as u64)) << shift
}

/// gcd of two `i128` that are not `i128::MIN`, as `i128` (always fits then).
#[inline]
fn gcd(a: i128, b: i128) -> i128 {
    let (a, b) = (a.unsigned_abs(), b.unsigned_abs());
    // Whole numbers and equal denominators are common: no loop for them.
    if a == 1 || b == 1 {
        return 1;
    }
    if a == b {
        return a as i128;
    }
    gcd_u128(a, b) as i128
}

/// `a / b` for an exact division (`b > 0`), on 64 bits when both fit; otherwise
/// without dividing (a 128-bit division is a library call several times slower):
/// with `b = 2^k m`, `m` odd, `|a| / b = (|a| >> k) · m⁻¹` modulo 2^128, exact since
/// the quotient fits.
#[inline]
fn div_exact(a: i128, b: i128) -> i128 {
    if b == 1 {
        return a;
    }
    if let (Ok(x), Ok(y)) = (i64::try_from(a), i64::try_from(b)) {
        return i128::from(x / y);
    }
    let k = b.trailing_zeros();
    let m = (b as u128) >> k;
    let q = (a.unsigned_abs() >> k).wrapping_mul(inverse_u128(m)) as i128;
    if a < 0 {
        -q
    } else {
        q
    }
}

/// The inverse of an odd `m` modulo 2^64. Newton's step `x ← x (2 − m x)` doubles
/// the number of right low bits; `x = m` is right to 3 bits (`m² ≡ 1 mod 8`).
pub(crate) fn inverse_u64(m: u64) -> u64 {
    let mut x = m;
    for _ in 0..5 {
        x = x.wrapping_mul(2u64.wrapping_sub(m.wrapping_mul(x)));
    }
    x
}

/// The inverse of an odd `m` modulo 2^128 (one more Newton step from 64 bits).
pub(crate) fn inverse_u128(m: u128) -> u128 {
    let x = u128::from(inverse_u64(m as u64));
    x.wrapping_mul(2u128.wrapping_sub(m.wrapping_mul(x)))
}

fn fits(v: i128) -> bool {
    v != i128::MIN
}

impl Q {
    /// Zero.
    pub fn zero() -> Q {
        Q(Repr::Small(0, 1))
    }
    /// One.
    pub fn one() -> Q {
        Q(Repr::Small(1, 1))
    }
    /// A whole number.
    pub fn int(v: i64) -> Q {
        Q(Repr::Small(v as i128, 1))
    }
    /// `n / d`; `None` when `d` is zero.
    pub fn ratio(n: i128, d: i128) -> Option<Q> {
        if d == 0 {
            return None;
        }
        Some(Self::small_or_big(n, d))
    }
    /// From big integers; `None` when `d` is zero.
    pub fn from_big(n: BigInt, d: BigInt) -> Option<Q> {
        if d.is_zero() {
            return None;
        }
        Some(Self::from_big_reduced(n, d))
    }

    fn small_or_big(n: i128, d: i128) -> Q {
        if fits(n) && fits(d) {
            let g = gcd(n, d);
            let (mut n, mut d) = (div_exact(n, g), div_exact(d, g));
            if d < 0 {
                n = -n;
                d = -d;
            }
            Q(Repr::Small(n, d))
        } else {
            Self::from_big_reduced(BigInt::from(n), BigInt::from(d))
        }
    }

    /// `n / d` (`d ≠ 0`) brought to lowest terms with the Lehmer gcd.
    fn from_big_reduced(n: BigInt, d: BigInt) -> Q {
        let (n, d) = crate::bigcd::reduce(n, d);
        Self::from_big_rational(BigRational::new_raw(n, d))
    }

    fn from_big_rational(r: BigRational) -> Q {
        // `BigRational::new` and the arithmetic keep lowest terms and a positive
        // denominator.
        match (r.numer().to_i128(), r.denom().to_i128()) {
            (Some(n), Some(d)) if fits(n) && fits(d) => return Q(Repr::Small(n, d)),
            _ => {}
        }
        let n = U256::from_biguint(r.numer().magnitude());
        match (n, U256::from_biguint(r.denom().magnitude())) {
            (Some(n), Some(d)) => Q(Repr::Mid(Arc::new(Wide {
                neg: r.is_negative(),
                n,
                d,
            }))),
            _ => Q(Repr::Big(Arc::new(r))),
        }
    }

    fn to_big(&self) -> BigRational {
        let (n, d) = self.parts();
        BigRational::new_raw(n, d)
    }

    /// Numerator and denominator (lowest terms, denominator positive).
    pub fn parts(&self) -> (BigInt, BigInt) {
        match &self.0 {
            Repr::Small(n, d) => (BigInt::from(*n), BigInt::from(*d)),
            Repr::Mid(w) => w.parts(),
            Repr::Big(b) => (b.numer().clone(), b.denom().clone()),
        }
    }

    /// The value on 256-bit magnitudes, unless it is a heap big integer.
    fn wide(&self) -> Option<Wide> {
        match &self.0 {
            Repr::Small(n, d) => Some(Wide {
                neg: *n < 0,
                n: U256::from_u128(n.unsigned_abs()),
                d: U256::from_u128(d.unsigned_abs()),
            }),
            Repr::Mid(w) => Some(**w),
            Repr::Big(_) => None,
        }
    }

    pub fn is_zero(&self) -> bool {
        matches!(self.0, Repr::Small(0, _))
    }
    pub fn is_positive(&self) -> bool {
        match &self.0 {
            Repr::Small(n, _) => *n > 0,
            Repr::Mid(w) => !w.neg,
            Repr::Big(b) => b.is_positive(),
        }
    }
    pub fn is_negative(&self) -> bool {
        match &self.0 {
            Repr::Small(n, _) => *n < 0,
            Repr::Mid(w) => w.neg,
            Repr::Big(b) => b.is_negative(),
        }
    }
    /// Whether the value is held as a pair of `i128` (the fastest representation).
    pub fn is_small(&self) -> bool {
        matches!(self.0, Repr::Small(..))
    }

    /// `self / rhs`, or `None` when `rhs` is zero.
    pub fn checked_div(&self, rhs: &Q) -> Option<Q> {
        if rhs.is_zero() {
            return None;
        }
        Some(self.mul_ref(&rhs.recip_nonzero()))
    }

    fn recip_nonzero(&self) -> Q {
        match &self.0 {
            Repr::Small(n, d) => {
                if *n < 0 {
                    Q(Repr::Small(-*d, -*n))
                } else {
                    Q(Repr::Small(*d, *n))
                }
            }
            // The tiers are symmetric in numerator and denominator.
            Repr::Mid(w) => Q(Repr::Mid(Arc::new(Wide {
                neg: w.neg,
                n: w.d,
                d: w.n,
            }))),
            Repr::Big(b) => Self::from_big_rational(b.recip()),
        }
    }

    pub fn add_ref(&self, rhs: &Q) -> Q {
        if let (Repr::Small(a, b), Repr::Small(c, d)) = (&self.0, &rhs.0) {
            if let Some(q) = add_small(*a, *b, *c, *d) {
                return q;
            }
        }
        if let (Some(x), Some(y)) = (self.wide(), rhs.wide()) {
            if let Some(q) = mid_add(x, y) {
                return q;
            }
        }
        with_parts(self, |a, b| with_parts(rhs, |c, d| big_add(a, b, c, d)))
    }

    pub fn sub_ref(&self, rhs: &Q) -> Q {
        // Negating a shared 256-bit value would allocate a copy only to add it:
        // negate the operand of the addition instead.
        if let (Repr::Small(a, b), Repr::Small(c, d)) = (&self.0, &rhs.0) {
            if let Some(q) = add_small(*a, *b, -*c, *d) {
                return q;
            }
        }
        if let (Some(x), Some(y)) = (self.wide(), rhs.wide()) {
            let y = Wide {
                neg: !y.neg && !y.n.is_zero(),
                ..y
            };
            if let Some(q) = mid_add(x, y) {
                return q;
            }
        }
        self.add_ref(&rhs.neg_ref())
    }

    pub fn mul_ref(&self, rhs: &Q) -> Q {
        if let (Repr::Small(a, b), Repr::Small(c, d)) = (&self.0, &rhs.0) {
            if let Some(q) = mul_small(*a, *b, *c, *d) {
                return q;
            }
        }
        if let (Some(x), Some(y)) = (self.wide(), rhs.wide()) {
            if let Some(q) = mid_mul(x, y) {
                return q;
            }
        }
        with_parts(self, |a, b| with_parts(rhs, |c, d| big_mul(a, b, c, d)))
    }

    pub fn neg_ref(&self) -> Q {
        match &self.0 {
            Repr::Small(n, d) => Q(Repr::Small(-*n, *d)),
            Repr::Mid(w) => Q(Repr::Mid(Arc::new(Wide { neg: !w.neg, ..**w }))),
            Repr::Big(b) => Self::from_big_rational(-(**b).clone()),
        }
    }

    pub fn abs(&self) -> Q {
        if self.is_negative() {
            self.neg_ref()
        } else {
            self.clone()
        }
    }

    pub fn min(self, other: Q) -> Q {
        if other < self {
            other
        } else {
            self
        }
    }
    pub fn max(self, other: Q) -> Q {
        if other > self {
            other
        } else {
            self
        }
    }

    /// The nearest `f64` (for display next to the exact value).
    pub fn to_f64(&self) -> f64 {
        match &self.0 {
            Repr::Small(n, d) => {
                if n.unsigned_abs() < (1u128 << 53) && *d < (1i128 << 53) {
                    *n as f64 / *d as f64
                } else {
                    big_to_f64(&BigInt::from(*n), &BigInt::from(*d))
                }
            }
            Repr::Mid(w) => {
                let (n, d) = w.parts();
                big_to_f64(&n, &d)
            }
            Repr::Big(b) => big_to_f64(b.numer(), b.denom()),
        }
    }

    /// Largest integer not above the value.
    pub fn floor(&self) -> BigInt {
        let b = self.to_big();
        b.floor().to_integer()
    }

    /// The smallest multiple of `step` (> 0) that is not below the value; the value
    /// itself when `step` is not positive.
    pub fn ceil_to(&self, step: &Q) -> Q {
        if !step.is_positive() {
            return self.clone();
        }
        let x = self / step;
        let k = match &x.0 {
            Repr::Small(n, d) => {
                let k = n.div_euclid(*d) + i128::from(n.rem_euclid(*d) != 0);
                Q(Repr::Small(k, 1))
            }
            _ => Q::from_big_rational(x.to_big().ceil()),
        };
        &k * step
    }
}

/// `n / d` as the nearest-ish `f64` without overflowing to infinity for huge parts:
/// both are scaled down to 64 significant bits first.
fn big_to_f64(n: &BigInt, d: &BigInt) -> f64 {
    let shift = |x: &BigInt| x.bits().saturating_sub(64);
    let (sn, sd) = (shift(n), shift(d));
    let nf = (n >> sn).to_f64().unwrap_or(f64::NAN);
    let df = (d >> sd).to_f64().unwrap_or(f64::NAN);
    let exp = sn as i64 - sd as i64;
    let exp = exp.clamp(i32::MIN as i64, i32::MAX as i64) as i32;
    nf / df * 2f64.powi(exp)
}

/// The full 256-bit product of two `u128`, as (high, low).
fn wide_mul(a: u128, b: u128) -> (u128, u128) {
    const MASK: u128 = u64::MAX as u128;
    let (a1, a0) = (a >> 64, a & MASK);
    let (b1, b0) = (b >> 64, b & MASK);
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    // Middle column with its carry.
    let mid = (p00 >> 64) + (p01 & MASK) + (p10 & MASK);
    let lo = (p00 & MASK) | (mid << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

/// Big-integer `a/b + c/d` (both in lowest terms, `b, d > 0`) by Knuth's method: the
/// only full-size gcd is the denominators'; the numerator's is against a small factor.
/// (Reducing the plain cross product costs a gcd of the full numerator, which is what
/// dominates the time of exact analyses on deep networks.)
fn big_add(a: &BigInt, b: &BigInt, c: &BigInt, d: &BigInt) -> Q {
    use crate::bigcd::gcd_int;
    if b == d {
        return Q::from_big_reduced(a + c, b.clone());
    }
    let g = gcd_int(b, d);
    if g.is_one() {
        let n = a * d + c * b;
        return Q::from_big_rational(BigRational::new_raw(n, b * d));
    }
    let b1 = b / &g;
    let d1 = d / &g;
    let n = a * &d1 + c * &b1;
    let g2 = gcd_int(&n, &g);
    let den = b1 * (d / &g2);
    Q::from_big_rational(BigRational::new_raw(n / g2, den))
}

/// Calls `f` with the numerator and denominator of `x` as big integers, borrowed when
/// `x` is big (no copy).
fn with_parts<R>(x: &Q, f: impl FnOnce(&BigInt, &BigInt) -> R) -> R {
    match &x.0 {
        Repr::Small(n, d) => f(&BigInt::from(*n), &BigInt::from(*d)),
        Repr::Mid(w) => {
            let (n, d) = w.parts();
            f(&n, &d)
        }
        Repr::Big(b) => f(b.numer(), b.denom()),
    }
}

/// Big-integer `(a/b)(c/d)` (lowest terms): cross-cancel first, so no gcd of the
/// product is needed.
fn big_mul(a: &BigInt, b: &BigInt, c: &BigInt, d: &BigInt) -> Q {
    use crate::bigcd::gcd_int;
    if a.is_zero() || c.is_zero() {
        return Q::zero();
    }
    let g1 = gcd_int(a, d);
    let g2 = gcd_int(c, b);
    let n = (a / &g1) * (c / &g2);
    let den = (b / g2) * (d / g1);
    if den.is_negative() {
        return Q::from_big_rational(BigRational::new_raw(-n, -den));
    }
    Q::from_big_rational(BigRational::new_raw(n, den))
}

impl Wide {
    fn parts(&self) -> (BigInt, BigInt) {
        let sign = if self.neg { Sign::Minus } else { Sign::Plus };
        let n = BigInt::from_biguint(sign, self.n.to_biguint());
        (n, BigInt::from(self.d.to_biguint()))
    }

    /// -1, 0 or 1.
    fn signum(&self) -> i8 {
        match (self.n.is_zero(), self.neg) {
            (true, _) => 0,
            (false, true) => -1,
            (false, false) => 1,
        }
    }
}

/// The canonical `Q` of `±n / d` (lowest terms, `d > 0`): small when it fits.
fn from_wide(neg: bool, n: U256, d: U256) -> Q {
    if n.is_zero() {
        return Q::zero();
    }
    const LIMIT: u128 = i128::MAX as u128;
    match (n.to_u128(), d.to_u128()) {
        (Some(a), Some(b)) if a <= LIMIT && b <= LIMIT => {
            let a = a as i128;
            Q(Repr::Small(if neg { -a } else { a }, b as i128))
        }
        _ => Q(Repr::Mid(Arc::new(Wide { neg, n, d }))),
    }
}

/// `±a ± b` on magnitudes, as (negative, magnitude); `None` on overflow.
fn signed_sum(a_neg: bool, a: U256, b_neg: bool, b: U256) -> Option<(bool, U256)> {
    if a_neg == b_neg {
        return Some((a_neg, a.checked_add(b)?));
    }
    if a >= b {
        Some((a_neg, a.wrapping_sub(b)))
    } else {
        Some((b_neg, b.wrapping_sub(a)))
    }
}

/// `x + y` on 256-bit magnitudes (Knuth's method, as `add_small`); `None` when an
/// intermediate overflows (then big integers take over).
fn mid_add(x: Wide, y: Wide) -> Option<Q> {
    if x.d == y.d {
        let (neg, n) = signed_sum(x.neg, x.n, y.neg, y.n)?;
        let g = n.gcd(x.d);
        return Some(from_wide(neg, n.div_exact(g), x.d.div_exact(g)));
    }
    let g = x.d.gcd(y.d);
    let (b1, d1) = (x.d.div_exact(g), y.d.div_exact(g));
    let (neg, n) = signed_sum(x.neg, x.n.checked_mul(d1)?, y.neg, y.n.checked_mul(b1)?)?;
    // The sum's gcd divides g.
    let g2 = n.gcd(g);
    let den = b1.checked_mul(y.d.div_exact(g2))?;
    Some(from_wide(neg, n.div_exact(g2), den))
}

/// `x · y` on 256-bit magnitudes, cross-cancelled first; `None` on overflow.
fn mid_mul(x: Wide, y: Wide) -> Option<Q> {
    if x.n.is_zero() || y.n.is_zero() {
        return Some(Q::zero());
    }
    let (g1, g2) = (x.n.gcd(y.d), y.n.gcd(x.d));
    let n = x.n.div_exact(g1).checked_mul(y.n.div_exact(g2))?;
    let d = x.d.div_exact(g2).checked_mul(y.d.div_exact(g1))?;
    Some(from_wide(x.neg != y.neg, n, d))
}

/// Compares `x` and `y` through 512-bit cross products.
fn mid_cmp(x: &Wide, y: &Wide) -> Ordering {
    let (sx, sy) = (x.signum(), y.signum());
    if sx != sy || sx == 0 {
        return sx.cmp(&sy);
    }
    let a = x.n.mul_wide(y.d);
    let b = y.n.mul_wide(x.d);
    let by_magnitude = a.iter().rev().cmp(b.iter().rev());
    if sx < 0 {
        by_magnitude.reverse()
    } else {
        by_magnitude
    }
}

/// An exact fraction `±n / d` on 256-bit magnitudes that is *not* kept in lowest
/// terms: a sum takes the least common multiple of the denominators but skips the
/// gcd of the numerator with it, and a product multiplies straight across. For long
/// sums that are read once at the end (the path sums of the closed forms), one gcd
/// at the end ([`Unreduced::to_q`]) replaces one per operation. Every operation
/// returns `None` where a magnitude would pass 256 bits (the caller then works with
/// [`Q`]); the value is always exact. Copied inline: no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Unreduced(Wide);

impl Default for Unreduced {
    fn default() -> Unreduced {
        Unreduced::ZERO
    }
}

impl Unreduced {
    pub(crate) const ZERO: Unreduced = Unreduced(Wide {
        neg: false,
        n: U256::ZERO,
        d: U256::ONE,
    });

    /// `x`, unless it is a heap big integer.
    pub(crate) fn of(x: &Q) -> Option<Unreduced> {
        x.wide().map(Unreduced)
    }

    /// `1 / x`, unless `x` is zero or a heap big integer.
    pub(crate) fn recip_of(x: &Q) -> Option<Unreduced> {
        let w = x.wide().filter(|w| !w.n.is_zero())?;
        Some(Unreduced(Wide {
            neg: w.neg,
            n: w.d,
            d: w.n,
        }))
    }

    /// `self + o` over the least common multiple of the denominators.
    pub(crate) fn add(self, o: Unreduced) -> Option<Unreduced> {
        let (x, y) = (self.0, o.0);
        if x.d == y.d {
            let (neg, n) = signed_sum(x.neg, x.n, y.neg, y.n)?;
            return Some(Unreduced::signed(neg, n, x.d));
        }
        // One denominator is mostly a multiple of the other (a server's delay has
        // the delays of the servers upstream in its denominator): a test that
        // multiplies is cheaper than the gcd.
        let (small, large) = if x.d < y.d { (x, y) } else { (y, x) };
        if let Some(m) = large.d.quotient_if_divides(small.d) {
            let (neg, n) = signed_sum(small.neg, small.n.checked_mul(m)?, large.neg, large.n)?;
            return Some(Unreduced::signed(neg, n, large.d));
        }
        let g = x.d.gcd(y.d);
        let (b1, d1) = (x.d.div_exact(g), y.d.div_exact(g));
        let (neg, n) = signed_sum(x.neg, x.n.checked_mul(d1)?, y.neg, y.n.checked_mul(b1)?)?;
        Some(Unreduced::signed(neg, n, b1.checked_mul(y.d)?))
    }

    /// `self − o`.
    pub(crate) fn sub(self, o: Unreduced) -> Option<Unreduced> {
        self.add(o.neg())
    }

    /// `self · o`, multiplied straight across (zero stays `0/1`).
    pub(crate) fn mul(self, o: Unreduced) -> Option<Unreduced> {
        let (x, y) = (self.0, o.0);
        if x.n.is_zero() || y.n.is_zero() {
            return Some(Unreduced::ZERO);
        }
        let n = x.n.checked_mul(y.n)?;
        Some(Unreduced::signed(x.neg != y.neg, n, x.d.checked_mul(y.d)?))
    }

    fn neg(self) -> Unreduced {
        Unreduced::signed(!self.0.neg, self.0.n, self.0.d)
    }

    /// `±n / d` with zero kept unsigned.
    fn signed(neg: bool, n: U256, d: U256) -> Unreduced {
        Unreduced(Wide {
            neg: neg && !n.is_zero(),
            n,
            d,
        })
    }

    /// The canonical [`Q`] of the value: one gcd.
    pub(crate) fn to_q(self) -> Q {
        let Wide { neg, n, d } = self.0;
        if n.is_zero() {
            return Q::zero();
        }
        let g = n.gcd(d);
        from_wide(neg, n.div_exact(g), d.div_exact(g))
    }
}

fn add_small(a: i128, b: i128, c: i128, d: i128) -> Option<Q> {
    if b == d {
        let n = a.checked_add(c)?;
        return fits(n).then(|| Q::small_or_big(n, b));
    }
    // Knuth 4.5.1: with g = gcd(b, d), a/b + c/d = (a d' + c b') / (b' d) where
    // b' = b/g, d' = d/g; the result's gcd divides g.
    let g = gcd(b, d);
    if g == 1 {
        // Coprime denominators: the sum is already in lowest terms.
        let n = a.checked_mul(d)?.checked_add(c.checked_mul(b)?)?;
        let den = b.checked_mul(d)?;
        return (fits(n) && fits(den)).then_some(Q(Repr::Small(n, den)));
    }
    let (b1, d1) = (div_exact(b, g), div_exact(d, g));
    let n = a.checked_mul(d1)?.checked_add(c.checked_mul(b1)?)?;
    if !fits(n) {
        return None;
    }
    let g2 = gcd(n, g);
    let den = b1.checked_mul(div_exact(d, g2))?;
    fits(den).then(|| Q(Repr::Small(div_exact(n, g2), den)))
}

fn mul_small(a: i128, b: i128, c: i128, d: i128) -> Option<Q> {
    if a == 0 || c == 0 {
        return Some(Q::zero());
    }
    let g1 = gcd(a, d);
    let g2 = gcd(c, b);
    let n = div_exact(a, g1).checked_mul(div_exact(c, g2))?;
    let den = div_exact(b, g2).checked_mul(div_exact(d, g1))?;
    (fits(n) && fits(den)).then_some(Q(Repr::Small(n, den)))
}

impl Ord for Q {
    fn cmp(&self, other: &Q) -> Ordering {
        if let (Repr::Small(a, b), Repr::Small(c, d)) = (&self.0, &other.0) {
            if b == d {
                return a.cmp(c);
            }
            let (sa, sc) = (a.signum(), c.signum());
            if sa != sc {
                return sa.cmp(&sc);
            }
            if let (Some(x), Some(y)) = (a.checked_mul(*d), c.checked_mul(*b)) {
                return x.cmp(&y);
            }
            // Same sign, denominators positive: compare |a|·d with |c|·b in 256 bits
            // (no allocation), reversed for negative values.
            let x = wide_mul(a.unsigned_abs(), d.unsigned_abs());
            let y = wide_mul(c.unsigned_abs(), b.unsigned_abs());
            return if sa < 0 { y.cmp(&x) } else { x.cmp(&y) };
        }
        if let (Some(x), Some(y)) = (self.wide(), other.wide()) {
            return mid_cmp(&x, &y);
        }
        self.to_big().cmp(&other.to_big())
    }
}

impl PartialOrd for Q {
    fn partial_cmp(&self, other: &Q) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Default for Q {
    fn default() -> Q {
        Q::zero()
    }
}

impl From<i64> for Q {
    fn from(v: i64) -> Q {
        Q::int(v)
    }
}

impl fmt::Display for Q {
    /// `n` for whole numbers, `n/d` otherwise (the result document's exact form).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            Repr::Small(n, 1) => write!(f, "{n}"),
            Repr::Small(n, d) => write!(f, "{n}/{d}"),
            Repr::Mid(_) => {
                let (n, d) = self.parts();
                match d.is_one() {
                    true => write!(f, "{n}"),
                    false => write!(f, "{n}/{d}"),
                }
            }
            Repr::Big(b) if b.denom().is_one() => write!(f, "{}", b.numer()),
            Repr::Big(b) => write!(f, "{}/{}", b.numer(), b.denom()),
        }
    }
}

impl fmt::Debug for Q {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

macro_rules! binop {
    ($tr:ident, $m:ident, $imp:ident) => {
        impl $tr<&Q> for &Q {
            type Output = Q;
            fn $m(self, rhs: &Q) -> Q {
                self.$imp(rhs)
            }
        }
        impl $tr<Q> for Q {
            type Output = Q;
            fn $m(self, rhs: Q) -> Q {
                self.$imp(&rhs)
            }
        }
        impl $tr<&Q> for Q {
            type Output = Q;
            fn $m(self, rhs: &Q) -> Q {
                self.$imp(rhs)
            }
        }
        impl $tr<Q> for &Q {
            type Output = Q;
            fn $m(self, rhs: Q) -> Q {
                self.$imp(&rhs)
            }
        }
    };
}
binop!(Add, add, add_ref);
binop!(Sub, sub, sub_ref);
binop!(Mul, mul, mul_ref);

/// Division by a value the caller has established to be non-zero (a validated rate,
/// a positive residual rate). Like integer division, a zero divisor is a bug and
/// panics; inputs never reach it because validation rejects zero rates first.
fn div_nonzero(a: &Q, b: &Q) -> Q {
    match a.checked_div(b) {
        Some(q) => q,
        None => panic!("netcalc: division by zero (a validated non-zero divisor was zero)"),
    }
}

impl Div<&Q> for &Q {
    type Output = Q;
    fn div(self, rhs: &Q) -> Q {
        div_nonzero(self, rhs)
    }
}
impl Div<Q> for Q {
    type Output = Q;
    fn div(self, rhs: Q) -> Q {
        div_nonzero(&self, &rhs)
    }
}
impl Div<&Q> for Q {
    type Output = Q;
    fn div(self, rhs: &Q) -> Q {
        div_nonzero(&self, rhs)
    }
}
impl Div<Q> for &Q {
    type Output = Q;
    fn div(self, rhs: Q) -> Q {
        div_nonzero(self, &rhs)
    }
}

impl Neg for Q {
    type Output = Q;
    fn neg(self) -> Q {
        self.neg_ref()
    }
}
impl Neg for &Q {
    type Output = Q;
    fn neg(self) -> Q {
        self.neg_ref()
    }
}

impl std::iter::Sum for Q {
    fn sum<I: Iterator<Item = Q>>(iter: I) -> Q {
        iter.fold(Q::zero(), |a, b| a + b)
    }
}
impl<'a> std::iter::Sum<&'a Q> for Q {
    fn sum<I: Iterator<Item = &'a Q>>(iter: I) -> Q {
        iter.fold(Q::zero(), |a, b| a + b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i128, d: i128) -> Q {
        Q::ratio(n, d).unwrap()
    }

    #[test]
    fn lowest_terms_and_display() {
        assert_eq!(q(1930, 24).to_string(), "965/12");
        assert_eq!(q(6, -4).to_string(), "-3/2");
        assert_eq!(q(10, 5).to_string(), "2");
        assert_eq!(q(1, 3) + q(1, 6), q(1, 2));
        assert_eq!(q(1, 3) - q(1, 2), q(-1, 6));
        assert_eq!(q(2, 3) * q(9, 4), q(3, 2));
        assert_eq!(q(2, 3) / q(4, 9), q(3, 2));
        assert!(q(1, 3) < q(1, 2));
        assert!(q(-1, 3) > q(-1, 2));
        assert_eq!(Q::ratio(1, 0), None);
        assert_eq!(q(1, 3).checked_div(&Q::zero()), None);
    }

    #[test]
    fn overflow_goes_big_and_comes_back() {
        let big = q(i128::MAX, 1);
        let sum = &big + &big;
        assert!(!sum.is_small());
        assert_eq!(sum.to_string(), "340282366920938463463374607431768211454");
        let back = &sum - &big;
        assert!(back.is_small());
        assert_eq!(back, big);
        // MIN never appears in the small form.
        let min = q(i128::MIN + 1, 1) - Q::one();
        assert!(!min.is_small());
        assert_eq!(-(-min.clone()), min);
        let tiny = q(1, i128::MAX) * q(1, i128::MAX);
        assert!(!tiny.is_small());
        assert!(tiny > Q::zero() && tiny < q(1, i128::MAX));
        assert!((tiny.to_f64() - 1.0 / (i128::MAX as f64).powi(2)).abs() < 1e-90);
        assert_eq!((tiny * q(i128::MAX, 1)) * q(i128::MAX, 1), Q::one());
    }

    #[test]
    fn comparisons_across_representations() {
        let a = q(i128::MAX - 1, i128::MAX);
        let b = q(i128::MAX - 2, i128::MAX - 1);
        assert!(a > b);
        let big = q(i128::MAX, 1) + q(i128::MAX, 1);
        assert!(big > a);
        assert!(-big.clone() < -a.clone());
        assert_eq!(big.cmp(&big.clone()), Ordering::Equal);
    }

    #[test]
    fn wide_products_compare_like_big_ones() {
        let m = u128::MAX;
        assert_eq!(wide_mul(m, m), (m - 1, 1));
        assert_eq!(wide_mul(1 << 64, 1 << 64), (1, 0));
        let a = q(i128::MAX - 3, i128::MAX - 7);
        let b = q(i128::MAX - 5, i128::MAX - 9);
        let big = |x: &Q| x.to_big();
        assert_eq!(a.cmp(&b), big(&a).cmp(&big(&b)));
        assert_eq!((-&a).cmp(&-&b), big(&-&a).cmp(&big(&-&b)));
        assert_eq!(b.cmp(&a), big(&b).cmp(&big(&a)));
    }

    /// Exact division without dividing, against the division it replaces: signs,
    /// powers of two in the divisor, values across the 64-bit boundary.
    #[test]
    fn exact_division_by_inverse() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..20_000 {
            let shift = rng.gen_range(0..126);
            let b: i128 = rng.gen_range(1..=i128::MAX >> shift);
            let bound = i128::MAX / b;
            let k: i128 = rng.gen_range(-bound..=bound);
            assert_eq!(div_exact(k * b, b), k, "{k} * {b}");
        }
        assert_eq!(div_exact(i128::MAX, i128::MAX), 1);
        assert_eq!(div_exact(-(1i128 << 126), 1 << 120), -64);
        assert_eq!(inverse_u64(3).wrapping_mul(3), 1);
    }

    #[test]
    fn gcd_paths_agree() {
        assert_eq!(gcd_u128(0, 5), 5);
        assert_eq!(gcd_u128(12, 18), 6);
        assert_eq!(gcd_u128(1 << 100, 3 << 90), 1 << 90);
        let big = (1u128 << 70) * 3 * 7;
        assert_eq!(gcd_u128(big, 21 << 5), 21 << 5);
        assert_eq!(gcd_u128(u128::MAX, u128::MAX - 1), 1);
        assert_eq!(gcd_u64(48, 180), 12);
        // Against Euclid, across the 64-bit boundary.
        let euclid = |mut a: u128, mut b: u128| {
            while b != 0 {
                (a, b) = (b, a % b);
            }
            a
        };
        let mut x: u128 = 0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834;
        for _ in 0..2000 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let a = x >> (x % 90);
            let b = (x.rotate_left(37) >> (20 + x % 100)) * 1_000_000;
            assert_eq!(gcd_u128(a, b), euclid(a, b), "gcd({a}, {b})");
            assert_eq!(gcd_u128(b, a), euclid(a, b));
        }
    }

    /// A value of any tier: small, 256-bit or beyond, around the tier boundaries
    /// (`i128::MIN`-ish, `2^127`, `2^256`), zero and negative included.
    fn any_q(rng: &mut rand::rngs::StdRng) -> Q {
        use rand::Rng;
        let edge = |rng: &mut rand::rngs::StdRng| -> BigInt {
            let e: [BigInt; 6] = [
                BigInt::from(i128::MIN),
                BigInt::from(i128::MAX),
                BigInt::from(1u8) << 127usize,
                (BigInt::from(1u8) << 256usize) - 1,
                BigInt::from(1u8) << 256usize,
                BigInt::from(0),
            ];
            e[rng.gen_range(0..e.len())].clone() + rng.gen_range(-3i64..=3)
        };
        let part = |rng: &mut rand::rngs::StdRng| -> BigInt {
            match rng.gen_range(0..4) {
                0 => edge(rng),
                1 => BigInt::from(rng.gen::<i64>()),
                _ => {
                    let bits = rng.gen_range(1..300usize);
                    let limbs: Vec<u32> = (0..bits.div_ceil(32)).map(|_| rng.gen()).collect();
                    let v = BigInt::from(num_bigint::BigUint::new(limbs))
                        >> (bits.div_ceil(32) * 32 - bits);
                    if rng.gen() {
                        -v
                    } else {
                        v
                    }
                }
            }
        };
        let n = part(rng);
        let mut d = part(rng);
        if d.is_zero() {
            d = BigInt::from(7);
        }
        Q::from_big(n, d).unwrap_or_default()
    }

    /// The canonical tier of a value: the smallest representation it fits.
    fn canonical(x: &Q) -> bool {
        let (n, d) = x.parts();
        let bits = n.bits().max(d.bits());
        let small = n.to_i128().is_some_and(fits) && d.to_i128().is_some_and(fits);
        match &x.0 {
            Repr::Small(..) => small,
            Repr::Mid(w) => !small && bits <= 256 && !w.n.is_zero(),
            Repr::Big(_) => bits > 256,
        }
    }

    #[test]
    fn the_256_bit_tier_agrees_with_big_integers() {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..20_000 {
            let (x, y) = (any_q(&mut rng), any_q(&mut rng));
            let (bx, by) = (x.to_big(), y.to_big());
            for (got, want) in [
                (&x + &y, &bx + &by),
                (&x - &y, &bx - &by),
                (&x * &y, &bx * &by),
                (-&x, -bx.clone()),
            ] {
                assert_eq!(got.to_big(), want, "{x} {y}");
                assert!(canonical(&got), "{got} is not in its smallest tier");
            }
            if !y.is_zero() {
                let q = &x / &y;
                assert_eq!(q.to_big(), &bx / &by);
                assert!(canonical(&q));
            }
            assert_eq!(x.cmp(&y), bx.cmp(&by), "{x} <=> {y}");
            assert_eq!(x == y, bx == by);
            assert_eq!(
                x.to_string(),
                Q::from_big(bx.numer().clone(), bx.denom().clone())
                    .unwrap_or_default()
                    .to_string()
            );
        }
    }

    /// Unreduced sums, differences and products (chained, so denominators are not in
    /// lowest terms) read back as the canonical `Q` of the same operations, or say
    /// that they left 256 bits; values beyond 256 bits are refused.
    #[test]
    fn unreduced_fractions_agree_with_q() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let (mut kept, mut overflowed) = (0, 0);
        for _ in 0..20_000 {
            let value = |rng: &mut rand::rngs::StdRng| match rng.gen_range(0..3) {
                0 => any_q(rng),
                _ => q(
                    rng.gen::<i64>().into(),
                    rng.gen_range(1..=i128::from(u64::MAX)),
                ),
            };
            let xs: Vec<Q> = (0..4).map(|_| value(&mut rng)).collect();
            let all: Option<Vec<Unreduced>> = xs.iter().map(Unreduced::of).collect();
            let Some(us) = all else {
                assert!(xs.iter().any(|x| matches!(x.0, Repr::Big(_))));
                continue;
            };
            let (mut want, mut got) = (xs[0].clone(), Some(us[0]));
            for (x, u) in xs.iter().zip(&us).skip(1) {
                let op = rng.gen_range(0..3);
                want = match op {
                    0 => &want + x,
                    1 => &want - x,
                    _ => &want * x,
                };
                got = got.and_then(|g| match op {
                    0 => g.add(*u),
                    1 => g.sub(*u),
                    _ => g.mul(*u),
                });
            }
            match got {
                Some(g) => {
                    kept += 1;
                    let q = g.to_q();
                    assert_eq!(q, want);
                    assert!(canonical(&q));
                }
                None => overflowed += 1,
            }
            if let Some(r) = Unreduced::recip_of(&xs[1]) {
                assert_eq!(r.to_q(), Q::one() / &xs[1]);
            }
        }
        assert!(
            kept > 1000 && overflowed > 100,
            "{kept} kept, {overflowed} overflowed"
        );
        assert_eq!(Unreduced::recip_of(&Q::zero()), None);
        assert_eq!(Unreduced::ZERO.to_q(), Q::zero());
    }

    /// Sums whose denominators are multiples of one another (the shortcut without a
    /// gcd) and sums whose denominators share only part of their factors.
    #[test]
    fn unreduced_sums_of_related_denominators() {
        let u = |n: i128, d: i128| Unreduced::of(&q(n, d)).unwrap();
        let third = u(1, 3);
        let s = third.add(u(1, 6)).unwrap();
        assert_eq!(s.to_q(), q(1, 2));
        assert_eq!(s.0.d, U256::from_u128(6), "the lcm, not the product");
        let s = u(5, 12).add(u(-7, 18)).unwrap();
        assert_eq!(s.to_q(), q(1, 36));
        assert_eq!(s.0.d, U256::from_u128(36));
        let wide = Unreduced::of(&(q(1, i128::MAX) * q(1, 3))).unwrap();
        let s = wide.add(third).unwrap().sub(third).unwrap();
        assert_eq!(s.to_q(), q(1, i128::MAX) * q(1, 3));
        assert_eq!(wide.sub(wide).unwrap().to_q(), Q::zero());
        assert!(!wide.sub(wide).unwrap().0.neg);
        // Denominators past 256 bits: refused, not wrapped.
        assert_eq!(wide.mul(wide).and_then(|w| w.mul(wide)), None);
    }

    #[test]
    fn tiers_at_their_boundaries() {
        let max = q(i128::MAX, 1);
        // Just past i128: the 256-bit tier, and back.
        let mid = &max + &Q::one();
        assert!(matches!(mid.0, Repr::Mid(_)));
        assert_eq!(&mid - &Q::one(), max);
        assert!((&mid - &Q::one()).is_small());
        // i128::MIN itself is not small (its negation would overflow).
        let min = -&mid;
        assert!(matches!(min.0, Repr::Mid(_)));
        assert_eq!(min.to_string(), i128::MIN.to_string());
        // Past 256 bits: big integers, and back down through both tiers.
        let m256 = Q::from_big((BigInt::from(1u8) << 256usize) - 1, BigInt::from(1)).unwrap();
        assert!(matches!(m256.0, Repr::Mid(_)));
        let big = &m256 + &Q::one();
        assert!(matches!(big.0, Repr::Big(_)));
        assert_eq!(&big - &Q::one(), m256);
        assert!(matches!((&big - &Q::one()).0, Repr::Mid(_)));
        assert_eq!((&big / &big), Q::one());
        // A tiny 256-bit fraction, its reciprocal and comparisons across the tiers.
        let tiny = q(1, i128::MAX) * q(1, 3);
        assert!(matches!(tiny.0, Repr::Mid(_)));
        assert!(tiny > Q::zero() && -&tiny < Q::zero() && tiny < q(1, i128::MAX));
        assert_eq!(Q::one() / &tiny, q(i128::MAX, 1) * q(3, 1));
        assert_eq!(&tiny - &tiny, Q::zero());
        assert!((&tiny - &tiny).is_small());
    }

    #[test]
    fn ceil_to_a_grid() {
        let ps = q(1, 1_000_000_000_000);
        assert_eq!(q(1, 3).ceil_to(&q(1, 10)), q(2, 5));
        assert_eq!(q(3, 10).ceil_to(&q(1, 10)), q(3, 10));
        assert_eq!(q(-1, 3).ceil_to(&q(1, 10)), q(-3, 10));
        assert_eq!(q(1, 3_000_000).ceil_to(&ps), q(333_334, 1_000_000_000_000));
        assert_eq!(q(5, 7).ceil_to(&Q::zero()), q(5, 7));
    }

    #[test]
    fn float_value() {
        assert!((q(965, 12).to_f64() - 80.416_666_666_666_67).abs() < 1e-12);
    }
}
