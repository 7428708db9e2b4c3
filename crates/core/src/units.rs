//! Quantities with units: sizes (`1514B`, `2MB`, `64KiB`), packet rates
//! (`100000pps`, `135kpps`) and bit rates (`100Mbit/s`, `20B/us`), all parsed exactly
//! by the one [`grammar`] every value a user writes goes through: a value that is not
//! a whole number of the base unit is an error, never rounded.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::time::Duration;

pub mod grammar;

pub use grammar::{Exact, Hint, Kind, UnitError, Whole, MAX_DIGITS};

/// The error of every unit parser (the name the size and rate parsers have always had).
pub type ParseUnitError = UnitError;

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

/// How a [`Size`] is read: whole bytes (a base unit, the bit, is 1/8 of one).
const SIZE: Whole = Whole {
    kind: Kind::Data,
    per_base: Exact {
        negative: false,
        num: 1,
        den: 8,
    },
    unit: "bytes",
    range: "at most 18446744073709551615B",
    signed: false,
};

impl FromStr for Size {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (_, v) = SIZE.parse(s)?;
        u64::try_from(v).map(Size).map_err(|_| SIZE.out_of_range(s))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

/// A packet rate in packets per second, kept exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketRate {
    /// Thousandths of a packet per second: a rate is parsed exactly, and one finer
    /// than that is refused.
    pub milli_pps: u64,
}

impl PacketRate {
    pub fn pps(self) -> f64 {
        self.milli_pps as f64 / 1000.0
    }
    /// The period between packets, rounded to the nearest nanosecond; `None` for a zero rate.
    pub fn period(self) -> Option<Duration> {
        if self.milli_pps == 0 {
            return None;
        }
        let ns = (1_000_000_000_000u128 + self.milli_pps as u128 / 2) / self.milli_pps as u128;
        i64::try_from(ns).ok().map(Duration)
    }
}

/// How a [`PacketRate`] is read: whole thousandths of a packet per second.
const PACKET_RATE: Whole = Whole {
    kind: Kind::PacketRate,
    per_base: Exact::int(1000),
    unit: "thousandths of a packet per second",
    range: crate::limits::MAX_PACKET_RATE_TEXT,
    signed: false,
};

impl FromStr for PacketRate {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (_, v) = PACKET_RATE.parse(s)?;
        check_rate(
            Kind::PacketRate,
            s,
            v,
            u128::from(crate::limits::MAX_PACKET_RATE_PPS) * 1000,
        )?;
        u64::try_from(v)
            .map(|milli_pps| PacketRate { milli_pps })
            .map_err(|_| PACKET_RATE.out_of_range(s))
    }
}

/// A rate `v` read from `s` is above 0 and at most `max`.
fn check_rate(kind: Kind, s: &str, v: u128, max: u128) -> Result<(), UnitError> {
    let text = grammar::shortened(s);
    if v == 0 {
        return Err(UnitError::Zero { kind, text });
    }
    if v > max {
        let limit = match kind {
            Kind::Rate => crate::limits::MAX_BIT_RATE_TEXT,
            _ => crate::limits::MAX_PACKET_RATE_TEXT,
        };
        return Err(UnitError::AboveLimit { kind, text, limit });
    }
    Ok(())
}

impl fmt::Display for PacketRate {
    /// Exactly, in pps (`100000pps`, `2.5pps`, `0.001pps`): parses back to the same
    /// rate. (Printing [`PacketRate::pps`], a float, rounded rates above 2^53
    /// millipackets per second.)
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (whole, milli) = (self.milli_pps / 1000, self.milli_pps % 1000);
        if milli == 0 {
            write!(f, "{whole}pps")
        } else {
            let frac = format!("{milli:03}");
            write!(f, "{whole}.{}pps", frac.trim_end_matches('0'))
        }
    }
}

/// A bit rate, kept exactly as whole bits per second.
///
/// Parsed by the [`grammar`]: `40Mbit/s`, `1.5Gbit/s`, `20B/us` (= 160 Mbit/s),
/// `12.5MB/s`, `100Mbps`. The value must come out as a whole, positive number of
/// bit/s.
/// Printed in the largest of `Gbit/s`, `Mbit/s`, `kbit/s`, `bit/s` that divides it,
/// which parses back to the same value; serialized as that string (an integer reads as
/// bit/s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BitRate(pub u64);

impl BitRate {
    pub const fn from_bps(bps: u64) -> BitRate {
        BitRate(bps)
    }
    /// Bits per second.
    pub const fn bps(self) -> u64 {
        self.0
    }
    pub fn as_f64(self) -> f64 {
        self.0 as f64
    }
}

/// How a [`BitRate`] is read: whole bit/s.
const BIT_RATE: Whole = Whole {
    kind: Kind::Rate,
    per_base: Exact::int(1),
    unit: "bit/s",
    range: crate::limits::MAX_BIT_RATE_TEXT,
    signed: false,
};

impl FromStr for BitRate {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (_, v) = BIT_RATE.parse(s)?;
        check_rate(
            Kind::Rate,
            s,
            v,
            u128::from(crate::limits::MAX_BIT_RATE_BPS),
        )?;
        u64::try_from(v)
            .map(BitRate)
            .map_err(|_| BIT_RATE.out_of_range(s))
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        for (scale, unit) in [
            (1_000_000_000, "Gbit/s"),
            (1_000_000, "Mbit/s"),
            (1_000, "kbit/s"),
        ] {
            if v >= scale && v.is_multiple_of(scale) {
                return write!(f, "{}{unit}", v / scale);
            }
        }
        write!(f, "{v}bit/s")
    }
}

impl Serialize for BitRate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for BitRate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = BitRate;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a bit rate with its unit such as \"100Mbit/s\", or bit/s")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<BitRate, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<BitRate, E> {
                if v == 0 {
                    return Err(E::custom("a bit rate must be above 0"));
                }
                crate::limits::bit_rate(v, &format!("{v} bit/s")).map_err(E::custom)?;
                Ok(BitRate(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<BitRate, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(E::custom("a bit rate must be above 0")),
                }
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!("1514B".parse::<Size>().unwrap(), Size(1514));
        assert_eq!("2MB".parse::<Size>().unwrap(), Size(2_000_000));
        assert_eq!("1.5KiB".parse::<Size>().unwrap(), Size(1536));
        assert_eq!("16bit".parse::<Size>().unwrap(), Size(2));
        assert_eq!("1/2kB".parse::<Size>().unwrap(), Size(500));
        let e = |t: &str| t.parse::<Size>().unwrap_err().to_string();
        assert_eq!(
            e("big"),
            "expected a size like 1514B, 2MB or 12000bit, got \"big\""
        );
        assert_eq!(
            e("64"),
            "expected a size like 1514B, 2MB or 12000bit, got \"64\" (the unit is missing)"
        );
        assert_eq!(
            e("64b"),
            "expected a size like 1514B, 2MB or 12000bit, got \"64b\" (\"b\" is ambiguous: write bit or B)"
        );
        assert_eq!(e("1.5B"), "1.5B is not a whole number of bytes");
        assert_eq!(e("12bit"), "12bit is not a whole number of bytes");
        assert_eq!(
            e("-1B"),
            "expected a size like 1514B, 2MB or 12000bit, got \"-1B\" (it cannot be negative)"
        );
        assert_eq!(
            e("100000000TB"),
            "100000000TB is out of range (at most 18446744073709551615B)"
        );
        assert!("3 parsecs".parse::<Size>().is_err());
    }

    #[test]
    fn packet_rates_print_exactly() {
        // found by the units_text fuzz target: a rate printed through an f64 lost
        // its last digits ("8888888888888880.83pps" printed as 8888888888888881pps)
        let r = |milli_pps| PacketRate { milli_pps }.to_string();
        assert_eq!(r(8_888_888_888_888_880_830), "8888888888888880.83pps");
        assert_eq!(r(u64::MAX), "18446744073709551.615pps");
        assert_eq!(r(2_500), "2.5pps");
        assert_eq!(r(1), "0.001pps");
        assert_eq!(r(100_000_000), "100000pps");
        for text in ["99999999.999pps", "0.001pps", "12345.67pps", "100000pps"] {
            let rate: PacketRate = text.parse().unwrap();
            assert_eq!(rate.to_string(), text);
            assert_eq!(rate.to_string().parse::<PacketRate>().unwrap(), rate);
        }
    }

    #[test]
    fn rates() {
        let r: PacketRate = "100000pps".parse().unwrap();
        assert_eq!(r.period(), Some(Duration(10_000)));
        let r: PacketRate = "135kpps".parse().unwrap();
        assert_eq!(r.milli_pps, 135_000_000);
        assert_eq!(r.period(), Some(Duration(7_407)));
        let e = |t: &str| t.parse::<PacketRate>().unwrap_err().to_string();
        assert_eq!(e("0pps"), "a packet rate must be above 0, got \"0pps\"");
        assert_eq!(
            e("fast"),
            "expected a packet rate like 100000pps or 135kpps, got \"fast\""
        );
        assert_eq!(
            e("10Mbit/s"),
            "expected a packet rate like 100000pps or 135kpps, got \"10Mbit/s\" (\"Mbit/s\" is a unit of bit rate)"
        );
        assert_eq!(
            e("1/3pps"),
            "1/3pps is not a whole number of thousandths of a packet per second"
        );
        assert_eq!("1/2kpps".parse::<PacketRate>().unwrap().milli_pps, 500_000);
        assert_eq!("20/s".parse::<PacketRate>().unwrap().milli_pps, 20_000);
        assert_eq!(
            "2.5pps".parse::<PacketRate>().unwrap().to_string(),
            "2.5pps"
        );
    }

    #[test]
    fn bit_rates() {
        let r = |s: &str| s.parse::<BitRate>().unwrap().bps();
        assert_eq!(r("40Mbit/s"), 40_000_000);
        assert_eq!(r("40MBit/s"), 40_000_000);
        assert_eq!(r("100kbit/s"), 100_000);
        assert_eq!(r("1.5Gbit/s"), 1_500_000_000);
        assert_eq!(r("20B/us"), 160_000_000);
        assert_eq!(r("12.5MB/s"), 100_000_000);
        assert_eq!(r("1B/ns"), 8_000_000_000);
        assert_eq!(r("3B/ms"), 24_000);
        assert_eq!(r("64bit/s"), 64);
        assert_eq!(r("100Mbps"), 100_000_000);
        assert_eq!(r(" 2.5 Mbit/s "), 2_500_000);
        assert_eq!(r("1/8B/ns"), 1_000_000_000);
        for bad in [
            "fast",
            "10Mbit",
            "10Mb/s",
            "10mbit/s",
            "-1Mbit/s",
            "1..2Mbit/s",
            "/s",
        ] {
            assert!(
                matches!(
                    bad.parse::<BitRate>().unwrap_err(),
                    UnitError::Malformed {
                        kind: Kind::Rate,
                        ..
                    }
                ),
                "{bad}"
            );
        }
        assert_eq!(
            "1.5bit/s".parse::<BitRate>().unwrap_err().to_string(),
            "1.5bit/s is not a whole number of bit/s"
        );
        assert_eq!(
            "10Mbit".parse::<BitRate>().unwrap_err().to_string(),
            "expected a bit rate like 100Mbit/s or 20B/us, got \"10Mbit\" (\"Mbit\" is a unit of data)"
        );
        assert_eq!(
            "0Mbit/s".parse::<BitRate>().unwrap_err().to_string(),
            "a bit rate must be above 0, got \"0Mbit/s\""
        );
        assert_eq!(
            "fast".parse::<BitRate>().unwrap_err().to_string(),
            "expected a bit rate like 100Mbit/s or 20B/us, got \"fast\""
        );
        // Too large for u64 bit/s.
        assert!("20000000TB/s".parse::<BitRate>().is_err());
    }

    #[test]
    fn rates_have_an_upper_limit() {
        assert_eq!(r_ok("1Tbit/s"), 1_000_000_000_000);
        assert_eq!(r_ok("125GB/s"), 1_000_000_000_000);
        assert_eq!(
            "1000000000001bit/s"
                .parse::<BitRate>()
                .unwrap_err()
                .to_string(),
            "1000000000001bit/s is above the limit of 1 Tbit/s"
        );
        assert_eq!(
            "2Tbit/s".parse::<BitRate>().unwrap_err(),
            UnitError::AboveLimit {
                kind: Kind::Rate,
                text: "2Tbit/s".into(),
                limit: crate::limits::MAX_BIT_RATE_TEXT
            }
        );
        assert_eq!(
            serde_json::from_str::<BitRate>("1000000000001")
                .unwrap_err()
                .to_string(),
            "1000000000001 bit/s is above the limit of 1 Tbit/s at line 1 column 13"
        );
        assert_eq!(
            "100Mpps".parse::<PacketRate>().unwrap().milli_pps,
            100_000_000_000
        );
        assert_eq!(
            "100000000.001pps"
                .parse::<PacketRate>()
                .unwrap_err()
                .to_string(),
            "100000000.001pps is above the limit of 100 Mpps"
        );
    }

    fn r_ok(s: &str) -> u64 {
        s.parse::<BitRate>().unwrap().bps()
    }

    #[test]
    fn bit_rates_print_exactly_and_round_trip() {
        for (bps, text) in [
            (40_000_000, "40Mbit/s"),
            (1_500_000, "1500kbit/s"),
            (2_000_000_000, "2Gbit/s"),
            (999, "999bit/s"),
            (160_000_000, "160Mbit/s"),
        ] {
            assert_eq!(BitRate(bps).to_string(), text);
            assert_eq!(text.parse::<BitRate>().unwrap(), BitRate(bps));
        }
        let j = serde_json::to_string(&BitRate(40_000_000)).unwrap();
        assert_eq!(j, "\"40Mbit/s\"");
        assert_eq!(
            serde_json::from_str::<BitRate>("\"20B/us\"").unwrap(),
            BitRate(160_000_000)
        );
        assert_eq!(
            serde_json::from_str::<BitRate>("1000").unwrap(),
            BitRate(1000)
        );
        assert!(serde_json::from_str::<BitRate>("0").is_err());
        assert!(serde_json::from_str::<BitRate>("-5").is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_bit_rate_round_trips(bps in 1u64..=crate::limits::MAX_BIT_RATE_BPS) {
            let text = BitRate(bps).to_string();
            proptest::prop_assert_eq!(text.parse::<BitRate>().unwrap(), BitRate(bps));
        }

        #[test]
        fn any_size_round_trips(bytes in proptest::num::u64::ANY) {
            let text = Size(bytes).to_string();
            proptest::prop_assert_eq!(text.parse::<Size>().unwrap(), Size(bytes));
            let bits = format!("{}bit", u128::from(bytes) * 8);
            proptest::prop_assert_eq!(bits.parse::<Size>().unwrap(), Size(bytes));
        }

        #[test]
        fn any_packet_rate_round_trips(
            milli_pps in 1u64..=crate::limits::MAX_PACKET_RATE_PPS * 1000
        ) {
            let rate = PacketRate { milli_pps };
            proptest::prop_assert_eq!(rate.to_string().parse::<PacketRate>().unwrap(), rate);
            let fraction = format!("{milli_pps}/1000pps");
            proptest::prop_assert_eq!(fraction.parse::<PacketRate>().unwrap(), rate);
        }

        #[test]
        fn a_bit_rate_as_a_fraction_of_another_unit(bps in 1u64..=crate::limits::MAX_BIT_RATE_BPS) {
            let text = format!("{bps}/8000B/ms");
            proptest::prop_assert_eq!(text.parse::<BitRate>().unwrap(), BitRate(bps));
        }
    }
}
