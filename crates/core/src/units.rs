//! Quantities with units (SPEC §8): sizes (`1514B`, `2MB`, `64KiB`) and packet rates
//! (`100000pps`, `135kpps`). Bit rates for network calculus are parsed exactly there.

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
        u64::try_from(v)
            .map(|milli_pps| PacketRate { milli_pps })
            .map_err(|_| err())
    }
}

impl fmt::Display for PacketRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.milli_pps.is_multiple_of(1000) {
            write!(f, "{}pps", self.milli_pps / 1000)
        } else {
            write!(f, "{}pps", self.pps())
        }
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
}
