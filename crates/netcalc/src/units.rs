//! Values with units, parsed exactly by lockstep-core's one unit
//! [`grammar`](lockstep_core::units::grammar): data in bits, time in seconds, rates in
//! bit/s, all as [`Q`]. `"0.5ms"` is exactly 1/2000 s and `"20B/us"` exactly
//! 160 000 000 bit/s; a number may also be written as a fraction
//! (`"302800/3069Mbit/s"`) so that a rate such as Fast Ethernet's payload rate after
//! preamble and gap can be given without rounding. The grammar reads the text; this
//! module only turns its exact number into a `Q`.

use std::fmt;

use lockstep_core::units::grammar::{self, Decimal, Hint, Number};
use num_bigint::BigInt;

use crate::q::Q;

pub use lockstep_core::units::grammar::{Kind, UnitError, MAX_DIGITS};

/// The largest denominator a value may have in its base unit (bit, s, bit/s): a
/// picosecond is the finest time. Sums of many values with large coprime denominators
/// would make every later computation slow.
pub const MAX_DENOMINATOR: u64 = lockstep_core::limits::MAX_DENOMINATOR;

/// Parses a value of the given kind into its base unit (bit, s, bit/s).
pub fn parse(kind: Kind, text: &str) -> Result<Q, UnitError> {
    let q = grammar::lex(kind, text)?;
    let scale = Q::from_big(BigInt::from(q.scale.num), BigInt::from(q.scale.den));
    let value = number(&q.number)
        .zip(scale)
        .map(|(n, s)| n * s)
        .ok_or_else(|| UnitError::malformed(kind, text, None))?;
    if value.parts().1 > BigInt::from(MAX_DENOMINATOR) {
        return Err(UnitError::malformed(kind, text, Some(Hint::TooFine(kind))));
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

/// A number without a unit in the grammar's syntax — a decimal (`12`, `12.5`, `.5`,
/// `1_000`) or a fraction of two (`302800/3069`), of any length.
pub fn parse_number(s: &str) -> Option<Q> {
    number(&Number::lex(s)?)
}

/// The exact value of a lexed number, however many digits it has.
fn number(n: &Number<'_>) -> Option<Q> {
    let v = match &n.bottom {
        Some(b) => decimal(&n.top)?.checked_div(&decimal(b)?)?,
        None => decimal(&n.top)?,
    };
    Some(if n.negative { -v } else { v })
}

fn decimal(d: &Decimal<'_>) -> Option<Q> {
    let digits: String = d.digits().map(|c| char::from(b'0' + c)).collect();
    let n: BigInt = digits.parse().ok()?;
    Q::from_big(n, BigInt::from(10u32).pow(d.places()))
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
        assert!(e.contains("600000 digits: a number has at most 38"), "{e}");
        assert!(e.len() < 200, "{}", e.len());
        assert!(rate(&format!("{}Mbit/s", "9".repeat(38))).is_ok());
        assert!(rate(&format!("{}Mbit/s", "9".repeat(39))).is_err());
        let e = rate("100Mbit").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a bit rate like 100Mbit/s or 20B/us, got \"100Mbit\" (\"Mbit\" is a unit of data)"
        );
        let e = time("20").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"20\" (the unit is missing)"
        );
        let e = data("25b").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a size like 1514B, 2MB or 12000bit, got \"25b\" (\"b\" is ambiguous: write bit or B)"
        );
        let e = rate("fast").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a bit rate like 100Mbit/s or 20B/us, got \"fast\""
        );
        assert!(rate("10Mbit/fortnight").is_err());
        assert!(rate("1/0Mbit/s").is_err());
        assert!(time("1.2.3ms").is_err());
        // the finest value is 10^-12 of the base unit
        assert_eq!(time("1ps").unwrap(), qq(1, 1_000_000_000_000));
        assert_eq!(time("3/7us").unwrap(), qq(3, 7_000_000));
        assert_eq!(
            time("1/7ps").unwrap_err().to_string(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"1/7ps\" (finer than 1/1000000000000 s: a value's denominator is at most 10^12)"
        );
        assert_eq!(
            rate("1/1000000000001bit/s").unwrap_err().to_string(),
            "expected a bit rate like 100Mbit/s or 20B/us, got \"1/1000000000001bit/s\" (finer than 1/1000000000000 bit/s: a value's denominator is at most 10^12)"
        );
        assert!(data("0.000000000001bit").is_ok());
        assert!(data("0.0000000000001bit").is_err());
        assert!(time(".ms").is_err());
        assert!(data("").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_exact_value_reads_back(
            n in -1_000_000_000_000_000i128..1_000_000_000_000_000,
            d in 1i128..=1_000_000_000_000,
        ) {
            let q = qq(n, d);
            for (kind, base) in [(Kind::Data, "bit"), (Kind::Time, "s"), (Kind::Rate, "bit/s")] {
                let text = format!("{q}{base}");
                proptest::prop_assert_eq!(parse(kind, &text), Ok(q.clone()), "{}", text);
            }
            // the same value in another unit of each kind
            let bytes = format!("{n}/{}B", 8 * d);
            proptest::prop_assert_eq!(data(&bytes), Ok(q.clone()), "{}", bytes);
            let ms = format!("{}/{d}ms", 1000 * n);
            proptest::prop_assert_eq!(time(&ms), Ok(q.clone()), "{}", ms);
        }
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
