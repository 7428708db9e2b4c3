//! Option types that mean the same in every subcommand: how to wait for an
//! instant and which scheduling policy to ask for. The Linux layer carries them out.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::time::Duration;

/// How to wait until an absolute instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WaitStrategy {
    /// `clock_nanosleep(TIMER_ABSTIME)`: cheapest, pays the full wake-up latency.
    Sleep,
    /// Busy-poll the clock: lowest error, burns the CPU.
    Spin,
    /// Sleep until `margin` before the instant, then spin.
    Hybrid,
}

impl WaitStrategy {
    pub fn name(self) -> &'static str {
        match self {
            WaitStrategy::Sleep => "sleep",
            WaitStrategy::Spin => "spin",
            WaitStrategy::Hybrid => "hybrid",
        }
    }
}

impl fmt::Display for WaitStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for WaitStrategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sleep" => Ok(WaitStrategy::Sleep),
            "spin" => Ok(WaitStrategy::Spin),
            "hybrid" => Ok(WaitStrategy::Hybrid),
            _ => Err(format!("expected sleep, hybrid or spin, got \"{s}\"")),
        }
    }
}

/// Default spin margin of the hybrid strategy: long enough to cover a typical
/// wake-up latency of a non-RT kernel (p99.9 of cyclictest on this kind of VM is ~10 µs).
pub const DEFAULT_HYBRID_MARGIN: Duration = Duration::from_micros(50);

/// Scheduling policy of the time-critical thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    Fifo,
    Rr,
    Other,
}

impl Policy {
    pub fn name(self) -> &'static str {
        match self {
            Policy::Fifo => "fifo",
            Policy::Rr => "rr",
            Policy::Other => "other",
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "fifo" => Ok(Policy::Fifo),
            "rr" => Ok(Policy::Rr),
            "other" => Ok(Policy::Other),
            _ => Err(format!("expected fifo, rr or other, got \"{s}\"")),
        }
    }
}
