//! Nanosecond time: instants tagged with the clock they were read from, signed
//! durations, and the human duration syntax (`250us`, `7.41us`, `1.5ms`, `10s`).
//!
//! Nothing here reads a clock: instants come in from the Linux layer or the simulator.

use std::fmt;
use std::ops::{Add, AddAssign, Neg, Sub, SubAssign};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

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

    /// Parses the human syntax: an optional sign, a decimal number and a unit
    /// (`ns`, `us`/`µs`, `ms`, `s`, `min`). The value must be a whole number of
    /// nanoseconds and fit in an `i64`.
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

/// Why a duration did not parse. The message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseDurationError {
    #[error("expected a duration like 100us, got \"{0}\"")]
    Malformed(String),
    #[error("unknown unit \"{unit}\" in \"{text}\" (expected ns, us, ms, s or min)")]
    UnknownUnit { text: String, unit: String },
    #[error("\"{0}\" is finer than one nanosecond")]
    TooPrecise(String),
    #[error("\"{0}\" is out of range (at most about 292 years)")]
    OutOfRange(String),
}

fn parse_duration(text: &str) -> Result<Duration, ParseDurationError> {
    let t = text.trim();
    let malformed = || ParseDurationError::Malformed(text.to_string());
    let (neg, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let split = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(malformed)?;
    let (number, unit) = body.split_at(split);
    let unit = unit.trim();
    if number.is_empty() || number == "." {
        return Err(malformed());
    }
    let scale: u128 = match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" | "sec" => 1_000_000_000,
        "min" => 60_000_000_000,
        "" => return Err(malformed()),
        other => {
            return Err(ParseDurationError::UnknownUnit {
                text: text.to_string(),
                unit: other.to_string(),
            })
        }
    };
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if frac_part.contains('.') {
        return Err(malformed());
    }
    let out_of_range = || ParseDurationError::OutOfRange(text.to_string());
    let mut total: u128 = 0;
    for c in int_part.chars() {
        total = total
            .checked_mul(10)
            .and_then(|v| v.checked_add(c as u128 - '0' as u128))
            .ok_or_else(out_of_range)?;
        if total > i64::MAX as u128 {
            return Err(out_of_range());
        }
    }
    total = total.checked_mul(scale).ok_or_else(out_of_range)?;
    let mut place = scale;
    for c in frac_part.chars() {
        let digit = c as u128 - '0' as u128;
        if !place.is_multiple_of(10) {
            if digit != 0 {
                return Err(ParseDurationError::TooPrecise(text.to_string()));
            }
            continue;
        }
        place /= 10;
        total += digit * place;
    }
    if total > i64::MAX as u128 {
        return Err(out_of_range());
    }
    let v = total as i64;
    Ok(Duration(if neg { -v } else { v }))
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
        assert_eq!(
            Duration::parse("abc").unwrap_err().to_string(),
            "expected a duration like 100us, got \"abc\""
        );
        assert_eq!(
            Duration::parse("100").unwrap_err(),
            ParseDurationError::Malformed("100".into())
        );
        assert!(matches!(
            Duration::parse("5 hours"),
            Err(ParseDurationError::UnknownUnit { .. })
        ));
        assert_eq!(
            Duration::parse("1.5ns").unwrap_err(),
            ParseDurationError::TooPrecise("1.5ns".into())
        );
        assert!(matches!(
            Duration::parse("99999999999s"),
            Err(ParseDurationError::OutOfRange(_))
        ));
        assert!(Duration::parse("").is_err());
        assert!(Duration::parse("1..2us").is_err());
        assert!(Duration::parse("1.2.3us").is_err());
        assert!(Duration::parse("us").is_err());
        assert!(Duration::parse("-").is_err());
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
