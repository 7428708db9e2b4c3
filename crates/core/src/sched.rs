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

/// Why router threads cannot each have a CPU of their own ([`thread_cpus`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ThreadCpuError {
    #[error("CPU {base} is not online (online: {})", crate::audit::cpulist::format(.online))]
    NotOnline { base: usize, online: Vec<usize> },
    #[error("{threads} router threads need {threads} CPUs, and {} are online ({}): run fewer threads", .online.len(), crate::audit::cpulist::format(.online))]
    TooFew { threads: usize, online: Vec<usize> },
}

/// The CPU of each of `threads` router threads when their file says `live.cpu =
/// base`: thread `i` takes the `i`-th online CPU counting from `base` and wrapping
/// round to the first (`online` sorted, as the kernel lists it): base 1 of CPUs
/// 0-3 with 3 threads gives 1, 2, 3; with 4 threads 1, 2, 3, 0. No two threads
/// share a CPU, so more threads than online CPUs are refused, as is a base that is
/// not online.
pub fn thread_cpus(
    base: usize,
    threads: usize,
    online: &[usize],
) -> Result<Vec<usize>, ThreadCpuError> {
    let Some(at) = online.iter().position(|&c| c == base) else {
        return Err(ThreadCpuError::NotOnline {
            base,
            online: online.to_vec(),
        });
    };
    if threads > online.len() {
        return Err(ThreadCpuError::TooFew {
            threads,
            online: online.to_vec(),
        });
    }
    Ok(online
        .iter()
        .cycle()
        .skip(at)
        .take(threads)
        .copied()
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_thread_takes_the_next_online_cpu_from_the_base() {
        assert_eq!(thread_cpus(0, 1, &[0, 1]), Ok(vec![0]));
        assert_eq!(thread_cpus(1, 1, &[0, 1]), Ok(vec![1]));
        assert_eq!(thread_cpus(0, 2, &[0, 1]), Ok(vec![0, 1]));
        assert_eq!(thread_cpus(1, 2, &[0, 1]), Ok(vec![1, 0]));
        assert_eq!(thread_cpus(1, 3, &[0, 1, 2, 3]), Ok(vec![1, 2, 3]));
        assert_eq!(thread_cpus(1, 4, &[0, 1, 2, 3]), Ok(vec![1, 2, 3, 0]));
        // gaps in the online list are skipped, not counted
        assert_eq!(thread_cpus(2, 3, &[0, 2, 5]), Ok(vec![2, 5, 0]));
    }

    #[test]
    fn more_threads_than_cpus_or_a_base_offline_is_refused() {
        let e = thread_cpus(0, 3, &[0, 1]).unwrap_err();
        assert_eq!(
            e,
            ThreadCpuError::TooFew {
                threads: 3,
                online: vec![0, 1]
            }
        );
        assert_eq!(
            e.to_string(),
            "3 router threads need 3 CPUs, and 2 are online (0-1): run fewer threads"
        );
        let e = thread_cpus(2, 1, &[0, 1]).unwrap_err();
        assert_eq!(e.to_string(), "CPU 2 is not online (online: 0-1)");
        assert!(thread_cpus(1, 1, &[0, 2]).is_err());
    }
}
