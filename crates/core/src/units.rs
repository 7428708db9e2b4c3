//! Quantities with units: sizes (`1514B`, `2MB`, `64KiB`), packet rates
//! (`100000pps`, `135kpps`) and bit rates (`100Mbit/s`, `20B/us`), all parsed exactly:
//! a value that is not a whole number of the base unit is an error, never rounded.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ParseUnitError {
    #[error("expected a size like 1514B or 2MB, got \"{0}\"")]
    Size(String),
    #[error("expected a packet rate like 100000pps or 135kpps, got \"{0}\"")]
    Rate(String),
    #[error("expected a bit rate like 100Mbit/s or 20B/us (a whole number of bit/s), got \"{0}\"")]
    BitRate(String),
    #[error("a bit rate must be above 0, got \"{0}\"")]
    ZeroBitRate(String),
    #[error("\"{0}\" is above the limit of {limit}", limit = crate::limits::MAX_BIT_RATE_TEXT)]
    BitRateTooHigh(String),
    #[error("\"{0}\" is above the limit of {limit}", limit = crate::limits::MAX_PACKET_RATE_TEXT)]
    PacketRateTooHigh(String),
}

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Size(pub u64);

impl Size {
    pub fn bytes(self) -> u64 {
        self.0
    }
}

fn split_number(text: &str) -> Option<(&str, &str)> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (n, u) = t.split_at(split);
    if n.is_empty() || n == "." || n.matches('.').count() > 1 {
        return None;
    }
    Some((n, u.trim()))
}

/// Multiplies a decimal string by an integer scale exactly; `None` if the result is
/// not a whole number or overflows.
fn scaled(number: &str, scale: u128) -> Option<u128> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    let mut den: u128 = 1;
    let mut num: u128 = 0;
    for c in int.chars().chain(frac.chars()) {
        num = num.checked_mul(10)?.checked_add(c.to_digit(10)? as u128)?;
    }
    for _ in frac.chars() {
        den = den.checked_mul(10)?;
    }
    let v = num.checked_mul(scale)?;
    (v % den == 0).then_some(v / den)
}

impl FromStr for Size {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseUnitError::Size(s.to_string());
        let (n, unit) = split_number(s).ok_or_else(err)?;
        let scale: u128 = match unit {
            "B" | "b" | "" => 1,
            "kB" | "KB" => 1_000,
            "MB" => 1_000_000,
            "GB" => 1_000_000_000,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            _ => return Err(err()),
        };
        let v = scaled(n, scale).ok_or_else(err)?;
        u64::try_from(v).map(Size).map_err(|_| err())
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}B", self.0)
    }
}

/// A packet rate in packets per second, kept exactly as `packets / period`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketRate {
    /// Packets per second, rounded to the nearest millipacket.
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

impl FromStr for PacketRate {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseUnitError::Rate(s.to_string());
        let (n, unit) = split_number(s).ok_or_else(err)?;
        let scale: u128 = match unit {
            "pps" | "" | "/s" => 1_000,
            "kpps" => 1_000_000,
            "Mpps" => 1_000_000_000,
            _ => return Err(err()),
        };
        let v = scaled(n, scale).ok_or_else(err)?;
        if v == 0 {
            return Err(err());
        }
        if v > u128::from(crate::limits::MAX_PACKET_RATE_PPS) * 1000 {
            return Err(ParseUnitError::PacketRateTooHigh(s.to_string()));
        }
        u64::try_from(v)
            .map(|milli_pps| PacketRate { milli_pps })
            .map_err(|_| err())
    }
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
/// Parsed from `<number><prefix><bit|B>/<s|ms|us|ns>`: `40Mbit/s`, `1.5Gbit/s`,
/// `20B/us` (= 160 Mbit/s), `12.5MB/s`; prefixes `k`/`K`, `M`, `G`, `T` are decimal;
/// `bps`, `kbps`, `Mbps`, `Gbps` are bits per second and `Bit` (loeser's `MBit/s`) is
/// read as `bit`. The value must come out as a whole, positive number of bit/s.
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

impl FromStr for BitRate {
    type Err = ParseUnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParseUnitError::BitRate(s.to_string());
        let (n, unit) = split_number(s).ok_or_else(err)?;
        let scale = bit_rate_scale(unit).ok_or_else(err)?;
        let v = scaled(n, scale).ok_or_else(err)?;
        if v == 0 {
            return Err(ParseUnitError::ZeroBitRate(s.to_string()));
        }
        if v > u128::from(crate::limits::MAX_BIT_RATE_BPS) {
            return Err(ParseUnitError::BitRateTooHigh(s.to_string()));
        }
        u64::try_from(v).map(BitRate).map_err(|_| err())
    }
}

/// Bits per second in one unit of `unit`, `None` for an unknown unit.
fn bit_rate_scale(unit: &str) -> Option<u128> {
    match unit {
        "bps" => return Some(1),
        "kbps" | "Kbps" => return Some(1_000),
        "Mbps" => return Some(1_000_000),
        "Gbps" => return Some(1_000_000_000),
        _ => {}
    }
    let (amount, per) = unit.split_once('/')?;
    let per_second: u128 = match per {
        "s" => 1,
        "ms" => 1_000,
        "us" | "µs" | "μs" => 1_000_000,
        "ns" => 1_000_000_000,
        _ => return None,
    };
    let (prefix, bits): (&str, u128) = if let Some(p) = amount.strip_suffix("bit") {
        (p, 1)
    } else if let Some(p) = amount.strip_suffix("Bit") {
        (p, 1)
    } else if let Some(p) = amount.strip_suffix('B') {
        (p, 8)
    } else {
        return None;
    };
    let prefix: u128 = match prefix {
        "" => 1,
        "k" | "K" => 1_000,
        "M" => 1_000_000,
        "G" => 1_000_000_000,
        "T" => 1_000_000_000_000,
        _ => return None,
    };
    Some(prefix * bits * per_second)
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
        assert_eq!("64".parse::<Size>().unwrap(), Size(64));
        assert_eq!(
            "big".parse::<Size>().unwrap_err().to_string(),
            "expected a size like 1514B or 2MB, got \"big\""
        );
        assert!("1.5B".parse::<Size>().is_err());
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
        assert!("0pps".parse::<PacketRate>().is_err());
        assert!("fast".parse::<PacketRate>().is_err());
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
        for bad in [
            "fast",
            "1.5bit/s",
            "10Mbit",
            "10Mb/s",
            "10mbit/s",
            "-1Mbit/s",
            "1..2Mbit/s",
            "/s",
        ] {
            assert_eq!(
                bad.parse::<BitRate>().unwrap_err(),
                ParseUnitError::BitRate(bad.to_string()),
                "{bad}"
            );
        }
        assert_eq!(
            "0Mbit/s".parse::<BitRate>().unwrap_err().to_string(),
            "a bit rate must be above 0, got \"0Mbit/s\""
        );
        assert_eq!(
            "fast".parse::<BitRate>().unwrap_err().to_string(),
            "expected a bit rate like 100Mbit/s or 20B/us (a whole number of bit/s), got \"fast\""
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
            "\"1000000000001bit/s\" is above the limit of 1 Tbit/s"
        );
        assert_eq!(
            "2Tbit/s".parse::<BitRate>().unwrap_err(),
            ParseUnitError::BitRateTooHigh("2Tbit/s".into())
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
            "\"100000000.001pps\" is above the limit of 100 Mpps"
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
    }
}
