//! The one grammar of numbers with units, used by every value a user writes — on the
//! command line, in scenario, node, network and export files, in controller requests.
//!
//! ```text
//! value    := space* sign? number space* unit space*
//! sign     := "+" | "-"
//! number   := decimal ("/" decimal)?        a fraction: 1/2ms, 302800/3069Mbit/s
//! decimal  := digits ("." digits?)? | "." digits
//! digits   := a digit, then digits and "_" (1_000), not ending in "_"
//! ```
//!
//! A number has at most [`MAX_DIGITS`] digits (numerator and denominator together),
//! so it is exact in `u128`. The units of each [`Kind`] are in [`unit_scale`]. The
//! result is exact: a type that holds whole units (nanoseconds, bytes, bit/s)
//! refuses a value that is not a whole number of them instead of rounding it.

use std::fmt;

use thiserror::Error;

/// Most digits a number may have, numerator and denominator together: any such
/// number is exact in `u128`, and far more than a physical quantity needs.
pub const MAX_DIGITS: usize = 38;

/// Most characters of the text an error message repeats.
const SHOWN_CHARS: usize = 48;

/// What a value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A duration: `100us`, `1.5ms`, `1/2ms`; base unit the second.
    Time,
    /// Data: `1514B`, `2MB`, `12000bit`; base unit the bit.
    Data,
    /// A bit rate: `100Mbit/s`, `20B/us`, `40Mbps`; base unit bit/s.
    Rate,
    /// A packet rate: `100000pps`, `135kpps`; base unit packets per second.
    PacketRate,
}

impl Kind {
    /// The kind with an article: `a duration`.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Time => "a duration",
            Kind::Data => "a size",
            Kind::Rate => "a bit rate",
            Kind::PacketRate => "a packet rate",
        }
    }

    /// What an error message says was expected.
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Time => "a duration like 100us, 1.5ms or 1/2ms",
            Kind::Data => "a size like 1514B, 2MB or 12000bit",
            Kind::Rate => "a bit rate like 100Mbit/s or 20B/us",
            Kind::PacketRate => "a packet rate like 100000pps or 135kpps",
        }
    }

    /// The base unit of [`unit_scale`].
    pub fn base(self) -> &'static str {
        match self {
            Kind::Time => "s",
            Kind::Data => "bit",
            Kind::Rate => "bit/s",
            Kind::PacketRate => "pps",
        }
    }

    const ALL: [Kind; 4] = [Kind::Time, Kind::Data, Kind::Rate, Kind::PacketRate];
}

/// Why text is not a value of its kind, said after `expected …, got "…"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hint {
    MissingUnit,
    UnknownUnit(String),
    /// The unit is one of another kind.
    OtherKind(String, Kind),
    /// `b`, which could be a bit or a byte.
    AmbiguousB,
    TooManyDigits(usize),
    DivisionByZero,
    Negative,
    /// Finer than 1/[`crate::limits::MAX_DENOMINATOR`] of the base unit.
    TooFine(Kind),
}

impl fmt::Display for Hint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hint::MissingUnit => f.write_str("the unit is missing"),
            Hint::UnknownUnit(u) => write!(f, "unknown unit \"{u}\""),
            Hint::OtherKind(u, k) => write!(f, "\"{u}\" is a unit of {}", kind_name(*k)),
            Hint::AmbiguousB => f.write_str("\"b\" is ambiguous: write bit or B"),
            Hint::TooManyDigits(n) => write!(f, "{n} digits: a number has at most {MAX_DIGITS}"),
            Hint::DivisionByZero => f.write_str("division by zero"),
            Hint::Negative => f.write_str("it cannot be negative"),
            Hint::TooFine(k) => write!(
                f,
                "finer than 1/{d} {b}: a value's denominator is at most 10^12",
                d = crate::limits::MAX_DENOMINATOR,
                b = k.base()
            ),
        }
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Time => "time",
        Kind::Data => "data",
        Kind::Rate => "bit rate",
        Kind::PacketRate => "packet rate",
    }
}

/// A value that did not parse; every message repeats the text (at most 48
/// characters of it).
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum UnitError {
    #[error("expected {}, got \"{text}\"{}", kind.expected(), hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Malformed {
        kind: Kind,
        text: String,
        hint: Option<Hint>,
    },
    /// Exact, but not a whole number of what the type holds.
    #[error("{text} is not a whole number of {whole}")]
    NotWhole {
        kind: Kind,
        text: String,
        whole: &'static str,
    },
    #[error("{text} is out of range ({range})")]
    OutOfRange {
        kind: Kind,
        text: String,
        range: &'static str,
    },
    #[error("{} must be above 0, got \"{text}\"", kind.noun())]
    Zero { kind: Kind, text: String },
    #[error("{text} is above the limit of {limit}")]
    AboveLimit {
        kind: Kind,
        text: String,
        limit: &'static str,
    },
}

impl UnitError {
    pub fn malformed(kind: Kind, text: &str, hint: Option<Hint>) -> UnitError {
        UnitError::Malformed {
            kind,
            text: shortened(text),
            hint,
        }
    }

    /// The kind that was expected.
    pub fn kind(&self) -> Kind {
        match self {
            UnitError::Malformed { kind, .. }
            | UnitError::NotWhole { kind, .. }
            | UnitError::OutOfRange { kind, .. }
            | UnitError::Zero { kind, .. }
            | UnitError::AboveLimit { kind, .. } => *kind,
        }
    }
}

/// `text` for a message: trimmed, at most 48 characters, the rest elided.
pub fn shortened(text: &str) -> String {
    let text = text.trim();
    let mut out: String = text.chars().take(SHOWN_CHARS).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// An exact rational number in lowest terms: `num / den`, `den >= 1`; zero is never
/// negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Exact {
    pub negative: bool,
    pub num: u128,
    pub den: u128,
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Why an exact value is not a whole number that fits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inexact {
    NotWhole,
    TooLarge,
}

impl Exact {
    /// `num / den` in lowest terms; `None` when `den` is 0.
    pub fn new(negative: bool, num: u128, den: u128) -> Option<Exact> {
        if den == 0 {
            return None;
        }
        let g = gcd(num, den);
        Some(Exact {
            negative: negative && num != 0,
            num: num / g,
            den: den / g,
        })
    }

    /// The whole number `n`.
    pub const fn int(n: u128) -> Exact {
        Exact {
            negative: false,
            num: n,
            den: 1,
        }
    }

    /// `1 / n` (`n > 0`).
    const fn inverse_of(n: u128) -> Exact {
        Exact {
            negative: false,
            num: 1,
            den: n,
        }
    }

    /// `self * other`, `None` if a part of the product does not fit in `u128`.
    pub fn checked_mul(self, other: Exact) -> Option<Exact> {
        let (g1, g2) = (gcd(self.num, other.den), gcd(other.num, self.den));
        let num = (self.num / g1).checked_mul(other.num / g2.max(1))?;
        let den = (self.den / g2.max(1)).checked_mul(other.den / g1.max(1))?;
        Exact::new(self.negative != other.negative, num, den)
    }

    /// `self / other`, `None` for a zero divisor or a part that does not fit.
    pub fn checked_div(self, other: Exact) -> Option<Exact> {
        if other.num == 0 {
            return None;
        }
        let inverse = Exact {
            negative: other.negative,
            num: other.den,
            den: other.num,
        };
        self.checked_mul(inverse)
    }

    /// The magnitude of `self * scale` as a whole number.
    pub fn whole_times(self, scale: Exact) -> Result<u128, Inexact> {
        let (g1, g2) = (gcd(self.num, scale.den), gcd(scale.num, self.den));
        // both factors are in lowest terms, so the product's denominator is 1 only
        // when both reduced denominators are
        if self.den / g2.max(1) != 1 || scale.den / g1.max(1) != 1 {
            return Err(Inexact::NotWhole);
        }
        (self.num / g1.max(1))
            .checked_mul(scale.num / g2.max(1))
            .ok_or(Inexact::TooLarge)
    }
}

/// A decimal as written: its integer and fraction digits, `_` included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decimal<'a> {
    pub int: &'a str,
    pub frac: &'a str,
}

impl<'a> Decimal<'a> {
    fn lex(s: &'a str) -> Option<Decimal<'a>> {
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        let ok = |p: &str| {
            !p.starts_with('_')
                && !p.ends_with('_')
                && p.bytes().all(|c| c.is_ascii_digit() || c == b'_')
        };
        if (int.is_empty() && frac.is_empty()) || !ok(int) || !ok(frac) {
            return None;
        }
        Some(Decimal { int, frac })
    }

    /// Every digit, integer part then fraction, without `_`.
    pub fn digits(&self) -> impl Iterator<Item = u8> + 'a {
        let (int, frac) = (self.int, self.frac);
        int.bytes()
            .chain(frac.bytes())
            .filter(u8::is_ascii_digit)
            .map(|c| c - b'0')
    }

    /// How many digits the fraction has (its denominator is 10 to that power).
    pub fn places(&self) -> u32 {
        self.frac.bytes().filter(u8::is_ascii_digit).count() as u32
    }

    /// `digits / 10^places`, `None` if a part does not fit in `u128`.
    fn exact(&self) -> Option<(u128, u128)> {
        let mut num: u128 = 0;
        for d in self.digits() {
            num = num.checked_mul(10)?.checked_add(u128::from(d))?;
        }
        Some((num, 10u128.checked_pow(self.places())?))
    }
}

/// A number as written: a sign, a decimal and, for a fraction, a second decimal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Number<'a> {
    pub negative: bool,
    pub top: Decimal<'a>,
    pub bottom: Option<Decimal<'a>>,
}

impl<'a> Number<'a> {
    /// The number that is the whole of `s` (`-12.5`, `302800/3069`, `1_000`).
    pub fn lex(s: &'a str) -> Option<Number<'a>> {
        let (negative, body) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (top, bottom) = match body.split_once('/') {
            Some((a, b)) => (Decimal::lex(a)?, Some(Decimal::lex(b)?)),
            None => (Decimal::lex(body)?, None),
        };
        Some(Number {
            negative,
            top,
            bottom,
        })
    }

    /// Digits in all, numerator and denominator.
    pub fn digit_count(&self) -> usize {
        self.top.digits().count() + self.bottom.map_or(0, |b| b.digits().count())
    }

    /// The exact value; `None` for a zero denominator or above [`MAX_DIGITS`] digits.
    pub fn exact(&self) -> Option<Exact> {
        if self.digit_count() > MAX_DIGITS {
            return None;
        }
        let (n, d) = self.top.exact()?;
        let top = Exact::new(self.negative, n, d)?;
        match &self.bottom {
            None => Some(top),
            Some(b) => {
                let (n, d) = b.exact()?;
                top.checked_div(Exact::new(false, n, d)?)
            }
        }
    }
}

/// Splits `"-12.5 Mbit/s"` into the number's text and the unit's (trimmed). A `/`
/// followed by a digit or `.` continues the number (a fraction), one followed by
/// anything else starts the unit (`B/us`, `/s`).
pub fn split(text: &str) -> Option<(&str, &str)> {
    let t = text.trim();
    let bytes = t.as_bytes();
    let in_number = |b: u8| b.is_ascii_digit() || b == b'.' || b == b'_';
    let run = |mut i: usize| {
        while i < bytes.len() && in_number(bytes[i]) {
            i += 1;
        }
        i
    };
    let start = usize::from(matches!(bytes.first(), Some(b'-' | b'+')));
    let mut end = run(start);
    if end == start {
        return None;
    }
    if bytes.get(end) == Some(&b'/') && bytes.get(end + 1).is_some_and(|b| in_number(*b)) {
        end = run(end + 1);
    }
    let (n, u) = t.split_at(end);
    Some((n, u.trim()))
}

/// A value as written: its number and what one of its unit is in the kind's base
/// unit ([`Kind::base`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quantity<'a> {
    pub number: Number<'a>,
    pub scale: Exact,
}

/// Reads `text` as a value of `kind`, syntax and unit; the number is not evaluated
/// (see [`whole`] and netcalc's exact values), but its digits are counted.
pub fn lex(kind: Kind, text: &str) -> Result<Quantity<'_>, UnitError> {
    let err = |hint| UnitError::malformed(kind, text, hint);
    let (number, unit) = split(text).ok_or_else(|| err(None))?;
    let number = Number::lex(number).ok_or_else(|| err(None))?;
    let digits = number.digit_count();
    if digits > MAX_DIGITS {
        return Err(err(Some(Hint::TooManyDigits(digits))));
    }
    if number.bottom.is_some_and(|b| b.digits().all(|d| d == 0)) {
        return Err(err(Some(Hint::DivisionByZero)));
    }
    if unit.is_empty() {
        return Err(err(Some(Hint::MissingUnit)));
    }
    let scale = unit_scale(kind, unit).ok_or_else(|| err(Some(unit_hint(kind, unit))))?;
    Ok(Quantity { number, scale })
}

/// What a type holding whole numbers of a unit needs to read a value.
#[derive(Clone, Copy, Debug)]
pub struct Whole {
    pub kind: Kind,
    /// How many of the type's unit one base unit is (`1e9` for nanoseconds).
    pub per_base: Exact,
    /// The type's unit, plural: `nanoseconds`.
    pub unit: &'static str,
    /// The range of the type, for the out-of-range message.
    pub range: &'static str,
    /// Whether a negative value may be written.
    pub signed: bool,
}

impl Whole {
    /// `text` as a sign and a whole number of the type's unit.
    pub fn parse(&self, text: &str) -> Result<(bool, u128), UnitError> {
        let q = lex(self.kind, text)?;
        let number = q.number.exact().ok_or_else(|| self.malformed(text))?;
        if number.negative && !self.signed {
            return Err(UnitError::malformed(self.kind, text, Some(Hint::Negative)));
        }
        let scale = q
            .scale
            .checked_mul(self.per_base)
            .ok_or_else(|| self.out_of_range(text))?;
        match number.whole_times(scale) {
            Ok(v) => Ok((number.negative, v)),
            Err(Inexact::TooLarge) => Err(self.out_of_range(text)),
            Err(Inexact::NotWhole) => Err(UnitError::NotWhole {
                kind: self.kind,
                text: shortened(text),
                whole: self.unit,
            }),
        }
    }

    fn malformed(&self, text: &str) -> UnitError {
        UnitError::malformed(self.kind, text, None)
    }

    /// The error of a value beyond the type's range.
    pub fn out_of_range(&self, text: &str) -> UnitError {
        UnitError::OutOfRange {
            kind: self.kind,
            text: shortened(text),
            range: self.range,
        }
    }
}

fn unit_hint(kind: Kind, unit: &str) -> Hint {
    if matches!(kind, Kind::Data | Kind::Rate) && (unit == "b" || unit.starts_with("b/")) {
        return Hint::AmbiguousB;
    }
    match Kind::ALL
        .into_iter()
        .find(|k| *k != kind && unit_scale(*k, unit).is_some())
    {
        Some(other) => Hint::OtherKind(unit.to_string(), other),
        None => Hint::UnknownUnit(unit.to_string()),
    }
}

/// One `unit` of `kind` in the kind's base unit (s, bit, bit/s, pps); `None` for a
/// unit that is not one of `kind`.
pub fn unit_scale(kind: Kind, unit: &str) -> Option<Exact> {
    match kind {
        Kind::Time => time_unit(unit),
        Kind::Data => data_unit(unit),
        Kind::Rate => rate_unit(unit),
        Kind::PacketRate => packet_rate_unit(unit),
    }
}

/// Seconds in one `unit`.
fn time_unit(unit: &str) -> Option<Exact> {
    Some(match unit {
        "ps" => Exact::inverse_of(1_000_000_000_000),
        "ns" => Exact::inverse_of(1_000_000_000),
        "us" | "µs" | "μs" => Exact::inverse_of(1_000_000),
        "ms" => Exact::inverse_of(1_000),
        "s" | "sec" => Exact::int(1),
        "min" => Exact::int(60),
        _ => return None,
    })
}

/// Bits in one `unit`.
fn data_unit(unit: &str) -> Option<Exact> {
    let bits: u128 = match unit {
        "bit" | "bits" | "Bit" => 1,
        "kbit" | "Kbit" | "kBit" | "KBit" => 1_000,
        "Mbit" | "MBit" => 1_000_000,
        "Gbit" | "GBit" => 1_000_000_000,
        "Tbit" | "TBit" => 1_000_000_000_000,
        "Kibit" => 1 << 10,
        "Mibit" => 1 << 20,
        "Gibit" => 1 << 30,
        "B" | "byte" | "bytes" => 8,
        "kB" | "KB" => 8_000,
        "MB" => 8_000_000,
        "GB" => 8_000_000_000,
        "TB" => 8_000_000_000_000,
        "KiB" => 8 << 10,
        "MiB" => 8 << 20,
        "GiB" => 8 << 30,
        _ => return None,
    };
    Some(Exact::int(bits))
}

/// Bit/s in one `unit`: `bps` and its prefixes, or data per time (`Mbit/s`, `B/us`).
fn rate_unit(unit: &str) -> Option<Exact> {
    let bps: u128 = match unit {
        "bps" => 1,
        "kbps" | "Kbps" => 1_000,
        "Mbps" => 1_000_000,
        "Gbps" => 1_000_000_000,
        "Tbps" => 1_000_000_000_000,
        _ => {
            let (amount, per) = unit.split_once('/')?;
            return data_unit(amount.trim())?.checked_div(time_unit(per.trim())?);
        }
    };
    Some(Exact::int(bps))
}

/// Packets per second in one `unit`.
fn packet_rate_unit(unit: &str) -> Option<Exact> {
    let pps: u128 = match unit {
        "pps" | "/s" => 1,
        "kpps" => 1_000,
        "Mpps" => 1_000_000,
        _ => return None,
    };
    Some(Exact::int(pps))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` as `kind` in its base unit.
    fn value(kind: Kind, text: &str) -> Exact {
        let q = lex(kind, text).unwrap();
        q.number.exact().unwrap().checked_mul(q.scale).unwrap()
    }

    fn ratio(num: u128, den: u128) -> Exact {
        Exact::new(false, num, den).unwrap()
    }

    #[test]
    fn accepted_spellings() {
        let table: &[(Kind, &[&str], Exact)] = &[
            (
                Kind::Time,
                &["1ns", "1000ps", "0.001us", "1/1000us", "1 ns", " 1ns "],
                ratio(1, 1_000_000_000),
            ),
            (
                Kind::Time,
                &[
                    "1.5ms", "1500us", "1500µs", "1500μs", "3/2ms", "1_500us", "+1.5ms",
                ],
                ratio(3, 2_000),
            ),
            (
                Kind::Time,
                &["2min", "120s", "120sec", "120_000ms", "4/2min"],
                Exact::int(120),
            ),
            (
                Kind::Time,
                &[".5s", "0.5s", "500ms", "1/2s", "1./2s"],
                ratio(1, 2),
            ),
            (
                Kind::Data,
                &[
                    "1514B",
                    "1514byte",
                    "1514bytes",
                    "12112bit",
                    "12112bits",
                    "1.514kB",
                    "1.514KB",
                ],
                Exact::int(12_112),
            ),
            (
                Kind::Data,
                &["2MiB", "2048KiB", "16Mibit", "1/512GiB"],
                Exact::int(16 << 20),
            ),
            (
                Kind::Data,
                &["1kbit", "1Kbit", "1kBit", "1KBit", "1000Bit", "125B"],
                Exact::int(1_000),
            ),
            (
                Kind::Data,
                &["1TB", "8Tbit", "1000GB", "1000000MB"],
                Exact::int(8_000_000_000_000),
            ),
            (
                Kind::Rate,
                &[
                    "100Mbit/s",
                    "100MBit/s",
                    "100Mbps",
                    "0.1Gbit/s",
                    "12.5MB/s",
                    "12.5B/us",
                    "100bit/us",
                    "100000kbit/s",
                    "100000kbps",
                    "100000Kbps",
                    "1/10Gbps",
                ],
                Exact::int(100_000_000),
            ),
            (
                Kind::Rate,
                &["8bit/s", "8bps", "1B/s", "60B/min", "1/1000B/ms"],
                Exact::int(8),
            ),
            (
                Kind::Rate,
                &["1Tbit/s", "1Tbps", "1bit/ps", "125GB/s"],
                Exact::int(1_000_000_000_000),
            ),
            (
                Kind::Rate,
                &["302800/3069Mbit/s"],
                ratio(302_800_000_000, 3069),
            ),
            (
                Kind::PacketRate,
                &["135kpps", "135000pps", "0.135Mpps", "135000/s", "270/2kpps"],
                Exact::int(135_000),
            ),
        ];
        for (kind, spellings, want) in table {
            for text in *spellings {
                assert_eq!(value(*kind, text), *want, "{kind:?} {text}");
            }
        }
        assert_eq!(
            value(Kind::Time, "-1/2ms"),
            Exact::new(true, 1, 2_000).unwrap()
        );
    }

    #[test]
    fn error_messages() {
        let table: &[(Kind, &str, &str)] = &[
            (Kind::Time, "fast", "expected a duration like 100us, 1.5ms or 1/2ms, got \"fast\""),
            (Kind::Time, "20", "expected a duration like 100us, 1.5ms or 1/2ms, got \"20\" (the unit is missing)"),
            (Kind::Time, "8d", "expected a duration like 100us, 1.5ms or 1/2ms, got \"8d\" (unknown unit \"d\")"),
            (Kind::Time, "1/0ms", "expected a duration like 100us, 1.5ms or 1/2ms, got \"1/0ms\" (division by zero)"),
            (Kind::Time, "/2ms", "expected a duration like 100us, 1.5ms or 1/2ms, got \"/2ms\""),
            (Kind::Time, "1.2.3ms", "expected a duration like 100us, 1.5ms or 1/2ms, got \"1.2.3ms\""),

            (Kind::Time, "10Mbit/s", "expected a duration like 100us, 1.5ms or 1/2ms, got \"10Mbit/s\" (\"Mbit/s\" is a unit of bit rate)"),
            (Kind::Data, "25b", "expected a size like 1514B, 2MB or 12000bit, got \"25b\" (\"b\" is ambiguous: write bit or B)"),
            (Kind::Data, "25ms", "expected a size like 1514B, 2MB or 12000bit, got \"25ms\" (\"ms\" is a unit of time)"),
            (Kind::Rate, "100Mbit", "expected a bit rate like 100Mbit/s or 20B/us, got \"100Mbit\" (\"Mbit\" is a unit of data)"),
            (Kind::Rate, "10Mb/s", "expected a bit rate like 100Mbit/s or 20B/us, got \"10Mb/s\" (unknown unit \"Mb/s\")"),
            (Kind::Rate, "10kpps", "expected a bit rate like 100Mbit/s or 20B/us, got \"10kpps\" (\"kpps\" is a unit of packet rate)"),
            (Kind::PacketRate, "lots", "expected a packet rate like 100000pps or 135kpps, got \"lots\""),
        ];
        for (kind, text, want) in table {
            assert_eq!(lex(*kind, text).unwrap_err().to_string(), *want);
        }
        let long = format!("{}us", "1".repeat(39));
        assert_eq!(
            lex(Kind::Time, &long).unwrap_err().to_string(),
            format!("expected a duration like 100us, 1.5ms or 1/2ms, got \"{long}\" (39 digits: a number has at most 38)")
        );
        assert!(lex(Kind::Time, &format!("{}us", "9".repeat(38))).is_ok());
    }

    #[test]
    fn whole_numbers_are_exact() {
        let ns = Whole {
            kind: Kind::Time,
            per_base: Exact::int(1_000_000_000),
            unit: "nanoseconds",
            range: "u128",
            signed: false,
        };
        assert_eq!(ns.parse("1/2ms"), Ok((false, 500_000)));
        assert_eq!(
            ns.parse("1/3ms").unwrap_err().to_string(),
            "1/3ms is not a whole number of nanoseconds"
        );
        assert_eq!(
            ns.parse("-1ms").unwrap_err().to_string(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"-1ms\" (it cannot be negative)"
        );
        assert_eq!(ns.parse("-0ms"), Ok((false, 0)));
        let big = format!("{}min", "9".repeat(38));
        assert_eq!(
            ns.parse(&big).unwrap_err().to_string(),
            format!("{big} is out of range (u128)")
        );
    }
}
