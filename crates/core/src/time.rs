//! Nanosecond time: instants tagged with the clock they were read from, signed
//! durations, and the human duration syntax (`250us`, `7.41us`, `1.5ms`, `10s`).
//!
//! Nothing here reads a clock: instants come in from the Linux layer or the simulator.

use std::fmt;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::units::{Exact, Kind, Whole};

/// Which clock an instant was read from (the common time reference). The default is `CLOCK_TAI`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ClockId {
    #[default]
    Tai,
    Realtime,
    Monotonic,
}

impl ClockId {
    pub const ALL: [ClockId; 3] = [ClockId::Tai, ClockId::Realtime, ClockId::Monotonic];

    pub fn name(self) -> &'static str {
        match self {
            ClockId::Tai => "tai",
            ClockId::Realtime => "realtime",
            ClockId::Monotonic => "monotonic",
        }
    }
}

impl fmt::Display for ClockId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ClockId {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "tai" => Ok(ClockId::Tai),
            "realtime" => Ok(ClockId::Realtime),
            "monotonic" => Ok(ClockId::Monotonic),
            _ => Err(format!("expected tai, realtime or monotonic, got \"{s}\"")),
        }
    }
}

/// A signed span of time in nanoseconds.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Duration(pub i64);

impl Duration {
    pub const ZERO: Duration = Duration(0);
    pub const MAX: Duration = Duration(i64::MAX);
    pub const NANOSECOND: Duration = Duration(1);
    pub const MICROSECOND: Duration = Duration(1_000);
    pub const MILLISECOND: Duration = Duration(1_000_000);
    pub const SECOND: Duration = Duration(1_000_000_000);

    pub const fn from_nanos(ns: i64) -> Self {
        Duration(ns)
    }
    pub const fn from_micros(us: i64) -> Self {
        Duration(us * 1_000)
    }
    pub const fn from_millis(ms: i64) -> Self {
        Duration(ms * 1_000_000)
    }
    pub const fn from_secs(s: i64) -> Self {
        Duration(s * 1_000_000_000)
    }
    pub const fn as_nanos(self) -> i64 {
        self.0
    }
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    pub const fn is_positive(self) -> bool {
        self.0 > 0
    }
    pub const fn is_negative(self) -> bool {
        self.0 < 0
    }
    pub fn checked_add(self, rhs: Duration) -> Option<Duration> {
        self.0.checked_add(rhs.0).map(Duration)
    }
    pub fn checked_sub(self, rhs: Duration) -> Option<Duration> {
        self.0.checked_sub(rhs.0).map(Duration)
    }
    pub fn checked_mul(self, rhs: i64) -> Option<Duration> {
        self.0.checked_mul(rhs).map(Duration)
    }
    pub fn abs(self) -> Duration {
        Duration(self.0.saturating_abs())
    }

    /// Parses the human syntax of the unit [`grammar`](crate::units::grammar): an
    /// optional sign, a decimal or a fraction and a unit (`ns`, `us`/`µs`, `ms`, `s`,
    /// `min`): `250us`, `-1.5ms`, `1/2ms`. The value must be a whole number of
    /// nanoseconds (`1/3ms` is an error, not rounded) and fit in an `i64`.
    pub fn parse(text: &str) -> Result<Duration, ParseDurationError> {
        parse_duration(text)
    }
}

impl fmt::Display for Duration {
    /// Prints in the largest unit not exceeding the value, exactly (no rounding):
    /// `7410` ns prints as `7.41us`, `1_500_000` as `1.5ms`. The output parses back
    /// to the same value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0 as i128;
        let mag = ns.unsigned_abs();
        let (unit, scale): (&str, u128) = if mag >= 1_000_000_000 {
            ("s", 1_000_000_000)
        } else if mag >= 1_000_000 {
            ("ms", 1_000_000)
        } else if mag >= 1_000 {
            ("us", 1_000)
        } else {
            ("ns", 1)
        };
        let sign = if ns < 0 { "-" } else { "" };
        let whole = mag / scale;
        let frac = mag % scale;
        if frac == 0 {
            return write!(f, "{sign}{whole}{unit}");
        }
        let digits = scale.trailing_zeros_dec();
        let mut frac_s = format!("{frac:0width$}", width = digits);
        while frac_s.ends_with('0') {
            frac_s.pop();
        }
        write!(f, "{sign}{whole}.{frac_s}{unit}")
    }
}

trait DecDigits {
    fn trailing_zeros_dec(self) -> usize;
}
impl DecDigits for u128 {
    fn trailing_zeros_dec(self) -> usize {
        let mut n = self;
        let mut d = 0;
        while n >= 10 {
            n /= 10;
            d += 1;
        }
        d
    }
}

impl FromStr for Duration {
    type Err = ParseDurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_duration(s)
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_add(rhs.0))
    }
}
impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        Duration(self.0.saturating_sub(rhs.0))
    }
}
impl Neg for Duration {
    type Output = Duration;
    fn neg(self) -> Duration {
        Duration(self.0.saturating_neg())
    }
}
impl AddAssign for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}
impl SubAssign for Duration {
    fn sub_assign(&mut self, rhs: Duration) {
        *self = *self - rhs;
    }
}

/// Why a duration did not parse: the one error of the unit [`grammar`](crate::units::grammar).
pub type ParseDurationError = crate::units::UnitError;

/// How a [`Duration`] is read: whole nanoseconds, signed, within `i64`.
const DURATION: Whole = Whole {
    kind: Kind::Time,
    per_base: Exact::int(1_000_000_000),
    unit: "nanoseconds",
    range: "at most about 292 years",
    signed: true,
};

fn parse_duration(text: &str) -> Result<Duration, ParseDurationError> {
    let (negative, ns) = DURATION.parse(text)?;
    let ns = i64::try_from(ns).map_err(|_| DURATION.out_of_range(text))?;
    Ok(Duration(if negative { -ns } else { ns }))
}

/// A point in time: nanoseconds since the epoch of `clock` (for TAI and REALTIME the
/// Unix epoch; for MONOTONIC an arbitrary boot-time origin).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Instant {
    pub clock: ClockId,
    pub ns: i64,
}

impl Instant {
    pub const fn new(clock: ClockId, ns: i64) -> Self {
        Instant { clock, ns }
    }
    pub const fn as_nanos(self) -> i64 {
        self.ns
    }
    /// `self - earlier`, or `None` if the two come from different clocks.
    pub fn checked_since(self, earlier: Instant) -> Option<Duration> {
        (self.clock == earlier.clock).then(|| Duration(self.ns.saturating_sub(earlier.ns)))
    }
    /// The earliest instant of `clock` (`i64::MIN` nanoseconds), before every other
    /// instant of it: the timeout a state machine asks for when it wants to run at
    /// once, whatever the time (a node before it was first given the time).
    pub const fn earliest(clock: ClockId) -> Self {
        Instant {
            clock,
            ns: i64::MIN,
        }
    }
    /// Whether this is the [`Instant::earliest`] of its clock.
    pub const fn is_earliest(self) -> bool {
        self.ns == i64::MIN
    }
}

/// The clock a sans-IO state machine runs on, learnt from the first instant it is
/// given ([`ClockId::default`] until then). Every later instant must be of the same
/// clock: a debug build asserts it, a release build takes the nanoseconds as given.
/// The state machines keep `i64` nanoseconds inside and convert at their API.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LearnedClock(Option<ClockId>);

impl LearnedClock {
    /// The nanoseconds of `t`, after learning its clock (the first time) or checking
    /// that it is the one learnt; `who` names the state machine in the assertion.
    #[inline]
    pub(crate) fn ns(&mut self, t: Instant, who: &str) -> i64 {
        match self.0 {
            None => self.0 = Some(t.clock),
            Some(c) => debug_assert!(
                c == t.clock,
                "{who} runs on the {c} clock but was given an instant of the {} clock",
                t.clock
            ),
        }
        t.ns
    }

    /// The clock learnt, or the default before any instant.
    #[inline]
    pub(crate) fn id(self) -> ClockId {
        self.0.unwrap_or_default()
    }

    /// `ns` nanoseconds of the clock as an instant.
    #[inline]
    pub(crate) fn at(self, ns: i64) -> Instant {
        Instant::new(self.id(), ns)
    }
}

impl PartialOrd for Instant {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        (self.clock == other.clock).then(|| self.ns.cmp(&other.ns))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant {
            clock: self.clock,
            ns: self.ns.saturating_add(rhs.0),
        }
    }
}
impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant {
            clock: self.clock,
            ns: self.ns.saturating_sub(rhs.0),
        }
    }
}
/// Difference of two instants of the same clock. Mixing clocks is a programming
/// error (instants never come from users); in release builds the raw difference is
/// returned.
impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        debug_assert_eq!(self.clock, rhs.clock, "instants of different clocks");
        Duration(self.ns.saturating_sub(rhs.ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spec_examples() {
        assert_eq!(Duration::parse("250us").unwrap(), Duration(250_000));
        assert_eq!(Duration::parse("7.41us").unwrap(), Duration(7_410));
        assert_eq!(Duration::parse("1.5ms").unwrap(), Duration(1_500_000));
        assert_eq!(Duration::parse("10s").unwrap(), Duration(10_000_000_000));
        assert_eq!(Duration::parse("100ns").unwrap(), Duration(100));
        assert_eq!(Duration::parse("2min").unwrap(), Duration(120_000_000_000));
        assert_eq!(Duration::parse("-5us").unwrap(), Duration(-5_000));
        assert_eq!(Duration::parse("3µs").unwrap(), Duration(3_000));
        assert_eq!(Duration::parse(".5us").unwrap(), Duration(500));
        assert_eq!(Duration::parse("1.000000000s").unwrap(), Duration::SECOND);
    }

    #[test]
    fn rejects_bad_text_with_a_reason() {
        let e = |t: &str| Duration::parse(t).unwrap_err().to_string();
        assert_eq!(
            e("abc"),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"abc\""
        );
        assert_eq!(
            e("100"),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"100\" (the unit is missing)"
        );
        assert_eq!(
            e("5 hours"),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"5 hours\" (unknown unit \"hours\")"
        );
        assert_eq!(
            e("5MB"),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"5MB\" (\"MB\" is a unit of data)"
        );
        assert_eq!(e("1.5ns"), "1.5ns is not a whole number of nanoseconds");
        assert_eq!(e("1/3ms"), "1/3ms is not a whole number of nanoseconds");
        assert_eq!(
            e("99999999999s"),
            "99999999999s is out of range (at most about 292 years)"
        );
        for bad in ["", "1..2us", "1.2.3us", "us", "-", "1/0ms", "1/ms", "--1us"] {
            assert!(Duration::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn fractions_and_underscores_are_exact() {
        assert_eq!(Duration::parse("1/2ms").unwrap(), Duration(500_000));
        assert_eq!(Duration::parse("-3/4us").unwrap(), Duration(-750));
        assert_eq!(Duration::parse("1_000us").unwrap(), Duration::MILLISECOND);
        assert_eq!(Duration::parse("1000ps").unwrap(), Duration(1));
        assert_eq!(Duration::parse("0.5/2s").unwrap(), Duration(250_000_000));
    }

    #[test]
    fn prints_exactly_in_the_largest_unit() {
        assert_eq!(Duration(7_410).to_string(), "7.41us");
        assert_eq!(Duration(250_000).to_string(), "250us");
        assert_eq!(Duration(1_500_000).to_string(), "1.5ms");
        assert_eq!(Duration(10_000_000_000).to_string(), "10s");
        assert_eq!(Duration(999).to_string(), "999ns");
        assert_eq!(Duration(0).to_string(), "0ns");
        assert_eq!(Duration(-1_000_001).to_string(), "-1.000001ms");
        // i64::MIN prints, but its magnitude is out of range for parsing
        assert!(Duration(i64::MIN).to_string().parse::<Duration>().is_err());
    }

    proptest::proptest! {
        #[test]
        fn display_parse_round_trip(ns in (i64::MIN + 1)..i64::MAX) {
            let d = Duration(ns);
            proptest::prop_assert_eq!(d.to_string().parse::<Duration>().unwrap(), d);
        }

        #[test]
        fn any_duration_as_a_fraction_of_a_microsecond(ns in (i64::MIN + 1)..i64::MAX) {
            let text = format!("{ns}/1000us");
            proptest::prop_assert_eq!(text.parse::<Duration>().unwrap(), Duration(ns));
        }
    }

    #[test]
    fn instants_carry_their_clock() {
        let a = Instant::new(ClockId::Tai, 100);
        let b = Instant::new(ClockId::Monotonic, 50);
        assert_eq!(a.checked_since(b), None);
        assert_eq!(a.partial_cmp(&b), None);
        assert_eq!(
            a.checked_since(Instant::new(ClockId::Tai, 40)),
            Some(Duration(60))
        );
        assert_eq!((a + Duration(5)).ns, 105);
        let first = Instant::earliest(ClockId::Realtime);
        assert!(first.is_earliest() && !a.is_earliest());
        assert!(first < Instant::new(ClockId::Realtime, i64::MIN + 1));
    }

    #[test]
    fn a_learned_clock_is_the_first_one_given() {
        let mut c = LearnedClock::default();
        assert_eq!(c.id(), ClockId::Tai);
        assert_eq!(c.ns(Instant::new(ClockId::Monotonic, 7), "test"), 7);
        assert_eq!(c.id(), ClockId::Monotonic);
        assert_eq!(c.ns(Instant::new(ClockId::Monotonic, 9), "test"), 9);
        assert_eq!(c.at(5), Instant::new(ClockId::Monotonic, 5));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(
        expected = "node runs on the monotonic clock but was given an instant of the tai clock"
    )]
    fn another_clock_is_caught_in_debug_builds() {
        let mut c = LearnedClock::default();
        c.ns(Instant::new(ClockId::Monotonic, 7), "node");
        c.ns(Instant::new(ClockId::Tai, 8), "node");
    }
}
