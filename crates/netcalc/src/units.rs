//! Values with units, parsed exactly (the command line): data in bits, time in seconds, rates in
//! bit/s, all as [`Q`]. `"0.5ms"` is exactly 1/2000 s and `"20B/us"` exactly
//! 160 000 000 bit/s; a number may also be written as a fraction (`"302800/3069Mbit/s"`)
//! so that a rate such as Fast Ethernet's payload rate after preamble and gap can be
//! given without rounding.

use std::fmt;

use num_bigint::BigInt;

use crate::q::Q;

/// What a value was expected to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Data: `1514B`, `25B`, `2MB`, `2MiB`, `12000bit`.
    Data,
    /// Time: `20us`, `1ms`, `0.5ms`, `10s`.
    Time,
    /// Rate: `100Mbit/s`, `20B/us`, `40Mbps`.
    Rate,
}

impl Kind {
    /// The base unit values of this kind are kept in.
    pub fn base(self) -> &'static str {
        match self {
            Kind::Data => "bit",
            Kind::Time => "s",
            Kind::Rate => "bit/s",
        }
    }

    /// How the error message describes the expected form.
    pub fn expected(self) -> &'static str {
        match self {
            Kind::Data => "a size like 1514B, 2MB or 12000bit",
            Kind::Time => "a duration like 20us, 1ms or 0.5ms",
            Kind::Rate => "a rate like 100Mbit/s or 20B/us",
        }
    }
}

/// A value that is not a number with a unit of the expected kind.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected {}, got \"{text}\"{}", kind.expected(), hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
pub struct UnitError {
    pub kind: Kind,
    pub text: String,
    pub hint: Option<String>,
}

/// The largest denominator a value may have in its base unit (bit, s, bit/s): a
/// picosecond is the finest time. Sums of many values with large coprime denominators
/// would make every later computation slow.
pub const MAX_DENOMINATOR: u64 = lockstep_core::limits::MAX_DENOMINATOR;

/// Most digits a number may have (numerator and denominator of a fraction
/// together): far more than any physical quantity needs, few enough that no value
/// can make later arithmetic slow.
pub const MAX_DIGITS: usize = 40;

/// Parses a value of the given kind into its base unit (bit, s, bit/s).
pub fn parse(kind: Kind, text: &str) -> Result<Q, UnitError> {
    let err = |hint: Option<String>| UnitError {
        kind,
        text: shortened(text),
        hint,
    };
    let (number, unit) = split(text.trim()).ok_or_else(|| err(None))?;
    let digits = number.bytes().filter(u8::is_ascii_digit).count();
    if digits > MAX_DIGITS {
        return Err(err(Some(format!(
            "{digits} digits: a number has at most {MAX_DIGITS}"
        ))));
    }
    let value = parse_number(number).ok_or_else(|| err(None))?;
    if unit.is_empty() {
        return Err(err(Some("the unit is missing".into())));
    }
    let scale = match kind {
        Kind::Data => data_unit(unit),
        Kind::Time => time_unit(unit),
        Kind::Rate => rate_unit(unit),
    };
    let value = match scale {
        Some(s) => value * s,
        None => return Err(err(Some(unit_hint(kind, unit)))),
    };
    if value.parts().1 > BigInt::from(MAX_DENOMINATOR) {
        return Err(err(Some(format!(
            "finer than 1/{MAX_DENOMINATOR} {}: a value's denominator is at most 10^12",
            kind.base()
        ))));
    }
    Ok(value)
}

/// Parses data (bits).
pub fn data(text: &str) -> Result<Q, UnitError> {
    parse(Kind::Data, text)
}
/// Parses a time (seconds).
pub fn time(text: &str) -> Result<Q, UnitError> {
    parse(Kind::Time, text)
}
/// Parses a rate (bit/s).
pub fn rate(text: &str) -> Result<Q, UnitError> {
    parse(Kind::Rate, text)
}

fn unit_hint(kind: Kind, unit: &str) -> String {
    if kind == Kind::Data && unit == "b" {
        return "\"b\" is ambiguous: write bit or B".into();
    }
    let other = [Kind::Data, Kind::Time, Kind::Rate].into_iter().find(|k| {
        *k != kind
            && match k {
                Kind::Data => data_unit(unit).is_some(),
                Kind::Time => time_unit(unit).is_some(),
                Kind::Rate => rate_unit(unit).is_some(),
            }
    });
    match other {
        Some(Kind::Data) => format!("\"{unit}\" is a unit of data"),
        Some(Kind::Time) => format!("\"{unit}\" is a unit of time"),
        Some(Kind::Rate) => format!("\"{unit}\" is a unit of rate"),
        None => format!("unknown unit \"{unit}\""),
    }
}

/// `text` for a message: at most 48 characters, the rest elided.
fn shortened(text: &str) -> String {
    let mut out: String = text.chars().take(48).collect();
    if out.len() < text.len() {
        out.push('…');
    }
    out
}

/// `"-12.5 Mbit/s"` → (`"-12.5"`, `"Mbit/s"`). The number is a sign, digits and at
/// most one `.`, optionally followed by `/` and a second such number.
fn split(t: &str) -> Option<(&str, &str)> {
    let bytes = t.as_bytes();
    let mut i = 0;
    if matches!(bytes.first(), Some(b'-') | Some(b'+')) {
        i += 1;
    }
    let num_end = |mut i: usize| {
        while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.' || bytes[i] == b'_')
        {
            i += 1;
        }
        i
    };
    let start = i;
    i = num_end(i);
    if i == start {
        return None;
    }
    // A fraction: `/` followed by a digit (a `/` followed by a letter is the unit's).
    if bytes.get(i) == Some(&b'/') && bytes.get(i + 1).is_some_and(|b| b.is_ascii_digit()) {
        i = num_end(i + 1);
    }
    let (n, u) = t.split_at(i);
    Some((n, u.trim()))
}

/// A decimal (`12`, `12.5`, `.5`, `1_000`) or a fraction of two decimals (`302800/3069`).
pub fn parse_number(s: &str) -> Option<Q> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match body.split_once('/') {
        Some((a, b)) => decimal(a)?.checked_div(&decimal(b)?)?,
        None => decimal(body)?,
    };
    Some(if neg { -v } else { v })
}

fn decimal(s: &str) -> Option<Q> {
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let digits = |p: &str| {
        !p.starts_with('_')
            && !p.ends_with('_')
            && p.chars().all(|c| c.is_ascii_digit() || c == '_')
    };
    if !digits(int) || !digits(frac) {
        return None;
    }
    let all: String = int
        .chars()
        .chain(frac.chars())
        .filter(|c| *c != '_')
        .collect();
    if all.is_empty() {
        return None;
    }
    let n: BigInt = all.parse().ok()?;
    let places = frac.chars().filter(|c| *c != '_').count();
    let d = BigInt::from(10u32).pow(places as u32);
    Q::from_big(n, d)
}

fn q(n: i64) -> Q {
    Q::int(n)
}

/// Bits in one `unit`.
fn data_unit(unit: &str) -> Option<Q> {
    let bytes = |n: i64| Some(q(8 * n));
    match unit {
        "bit" | "bits" | "Bit" => Some(q(1)),
        "kbit" | "Kbit" | "kBit" | "KBit" => Some(q(1_000)),
        "Mbit" | "MBit" => Some(q(1_000_000)),
        "Gbit" | "GBit" => Some(q(1_000_000_000)),
        "Kibit" => Some(q(1 << 10)),
        "Mibit" => Some(q(1 << 20)),
        "Gibit" => Some(q(1 << 30)),
        "B" | "byte" | "bytes" => bytes(1),
        "kB" | "KB" => bytes(1_000),
        "MB" => bytes(1_000_000),
        "GB" => bytes(1_000_000_000),
        "KiB" => bytes(1 << 10),
        "MiB" => bytes(1 << 20),
        "GiB" => bytes(1 << 30),
        _ => None,
    }
}

/// Seconds in one `unit`.
fn time_unit(unit: &str) -> Option<Q> {
    match unit {
        "s" | "sec" => Some(q(1)),
        "ms" => Q::ratio(1, 1_000),
        "us" | "µs" | "μs" => Q::ratio(1, 1_000_000),
        "ns" => Q::ratio(1, 1_000_000_000),
        "ps" => Q::ratio(1, 1_000_000_000_000),
        "min" => Some(q(60)),
        _ => None,
    }
}

/// Bit/s in one `unit`.
fn rate_unit(unit: &str) -> Option<Q> {
    match unit {
        "bps" => return Some(q(1)),
        "kbps" | "Kbps" => return Some(q(1_000)),
        "Mbps" => return Some(q(1_000_000)),
        "Gbps" => return Some(q(1_000_000_000)),
        _ => {}
    }
    let (amount, per) = unit.split_once('/')?;
    let d = data_unit(amount.trim())?;
    let t = time_unit(per.trim())?;
    d.checked_div(&t)
}

/// Display units for bounds: delays in microseconds, data in bytes, rates in Mbit/s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Us,
    Bytes,
    Mbps,
}

impl Unit {
    /// The unit's name as printed and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Us => "us",
            Unit::Bytes => "B",
            Unit::Mbps => "Mbit/s",
        }
    }
    /// How many of this unit one base unit (s, bit, bit/s) is.
    fn per_base(self) -> Q {
        match self {
            Unit::Us => Q::int(1_000_000),
            Unit::Bytes => Q::ratio(1, 8).unwrap_or_default(),
            Unit::Mbps => Q::ratio(1, 1_000_000).unwrap_or_default(),
        }
    }
}

/// A value expressed in a display unit: exact and as a float.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    pub exact: Q,
    pub unit: Unit,
}

impl Shown {
    /// `base` (in s, bit or bit/s) converted to `unit`.
    pub fn new(base: &Q, unit: Unit) -> Shown {
        Shown {
            exact: base * unit.per_base(),
            unit,
        }
    }
    pub fn value(&self) -> f64 {
        self.exact.to_f64()
    }
}

impl fmt::Display for Shown {
    /// `80.4167 us (965/12)`; whole values print once (`1514 B`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.value();
        let exact = self.exact.to_string();
        let short = format_float(v);
        if short == exact {
            write!(f, "{short} {}", self.unit.name())
        } else {
            write!(f, "{short} {} ({exact})", self.unit.name())
        }
    }
}

/// A float with at most 4 decimals, trailing zeros removed.
pub fn format_float(v: f64) -> String {
    let s = format!("{v:.4}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `v` rounded to 4 decimals (the `value` next to an exact bound in JSON).
pub fn round4(v: f64) -> f64 {
    (v * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qq(n: i128, d: i128) -> Q {
        Q::ratio(n, d).unwrap()
    }

    #[test]
    fn the_brief_examples_parse_exactly() {
        assert_eq!(rate("160Mbit/s").unwrap(), Q::int(160_000_000));
        assert_eq!(rate("20B/us").unwrap(), Q::int(160_000_000));
        assert_eq!(rate("100Mbit/s").unwrap(), Q::int(100_000_000));
        assert_eq!(rate("40Mbit/s").unwrap(), Q::int(40_000_000));
        assert_eq!(rate("40Mbps").unwrap(), Q::int(40_000_000));
        assert_eq!(rate("40MBit/s").unwrap(), Q::int(40_000_000));
        assert_eq!(data("25B").unwrap(), Q::int(200));
        assert_eq!(data("1514B").unwrap(), Q::int(12_112));
        assert_eq!(data("2MB").unwrap(), Q::int(16_000_000));
        assert_eq!(data("2MiB").unwrap(), Q::int(16_777_216));
        assert_eq!(data("12000bit").unwrap(), Q::int(12_000));
        assert_eq!(time("20us").unwrap(), qq(1, 50_000));
        assert_eq!(time("1ms").unwrap(), qq(1, 1_000));
        assert_eq!(time("0.5ms").unwrap(), qq(1, 2_000));
        assert_eq!(time("45 us").unwrap(), qq(45, 1_000_000));
        // 100 Mbit/s * 1514 / 1534.5: Fast Ethernet after preamble and gap.
        assert_eq!(
            rate("302800/3069Mbit/s").unwrap(),
            qq(302_800_000_000, 3069)
        );
        assert_eq!(rate("-40Mbit/s").unwrap(), Q::int(-40_000_000));
        assert_eq!(rate("0.000001bit/ns").unwrap(), Q::int(1_000));
    }

    #[test]
    fn errors_name_the_value_and_what_was_expected() {
        // a huge number is refused (it would slow every later computation), and the
        // message does not repeat it
        let huge = format!("{}Mbit/s", "9".repeat(600_000));
        let e = rate(&huge).unwrap_err().to_string();
        assert!(e.contains("600000 digits: a number has at most 40"), "{e}");
        assert!(e.len() < 200, "{}", e.len());
        assert!(rate(&format!("{}Mbit/s", "9".repeat(40))).is_ok());
        let e = rate("100Mbit").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a rate like 100Mbit/s or 20B/us, got \"100Mbit\" (\"Mbit\" is a unit of data)"
        );
        let e = time("20").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a duration like 20us, 1ms or 0.5ms, got \"20\" (the unit is missing)"
        );
        let e = data("25b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a size like 1514B, 2MB or 12000bit, got \"25b\" (\"b\" is ambiguous: write bit or B)"
        );
        let e = rate("fast").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a rate like 100Mbit/s or 20B/us, got \"fast\""
        );
        assert!(rate("10Mbit/fortnight").is_err());
        assert!(rate("1/0Mbit/s").is_err());
        assert!(time("1.2.3ms").is_err());
        // the finest value is 10^-12 of the base unit
        assert_eq!(time("1ps").unwrap(), qq(1, 1_000_000_000_000));
        assert_eq!(time("3/7us").unwrap(), qq(3, 7_000_000));
        assert_eq!(
            time("1/7ps").unwrap_err().to_string(),
            "expected a duration like 20us, 1ms or 0.5ms, got \"1/7ps\" (finer than 1/1000000000000 s: a value's denominator is at most 10^12)"
        );
        assert_eq!(
            rate("1/1000000000001bit/s").unwrap_err().to_string(),
            "expected a rate like 100Mbit/s or 20B/us, got \"1/1000000000001bit/s\" (finer than 1/1000000000000 bit/s: a value's denominator is at most 10^12)"
        );
        assert!(data("0.000000000001bit").is_ok());
        assert!(data("0.0000000000001bit").is_err());
        assert!(time(".ms").is_err());
        assert!(data("").is_err());
    }

    #[test]
    fn shown_values() {
        let d = Shown::new(&qq(965, 12_000_000), Unit::Us);
        assert_eq!(d.exact, qq(965, 12));
        assert_eq!(d.to_string(), "80.4167 us (965/12)");
        let b = Shown::new(&Q::int(12_112), Unit::Bytes);
        assert_eq!(b.to_string(), "1514 B");
        assert_eq!(round4(80.416_666), 80.4167);
    }
}
