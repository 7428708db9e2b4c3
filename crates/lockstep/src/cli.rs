//! The argument groups and value parsers every subcommand shares; the tree of
//! subcommands is [`crate::commands`].
//!
//! Value parsers return messages of the form `expected a duration like 100us, 1.5ms or 1/2ms, got "abc"`;
//! `main` prefixes them with the option's name.

use std::path::PathBuf;

use clap::Args;
use lockstep_core::sched::{Policy, WaitStrategy};
use lockstep_core::{limits, ClockId, Duration};

/// Real-time setup of the measuring thread.
#[derive(Args, Debug, Clone)]
pub struct RtArgs {
    /// Real-time priority (1..99 for fifo/rr). Implies --policy fifo when no policy is given.
    #[arg(long, short = 'p', value_name = "PRIO")]
    pub priority: Option<i32>,
    /// Scheduling policy of the measuring thread.
    #[arg(long, value_name = "fifo|rr|other", value_parser = parse_policy)]
    pub policy: Option<Policy>,
    /// Pin the measuring thread to this CPU.
    #[arg(long, short = 'a', value_name = "CPU", value_parser = parse_cpu)]
    pub cpu: Option<usize>,
    /// Do not lock memory (mlockall is on by default, like cyclictest -m).
    #[arg(long)]
    pub no_mlock: bool,
    /// Hold /dev/cpu_dma_latency at 0 during the run (keeps CPUs out of deep C-states).
    #[arg(long)]
    pub dma_latency_zero: bool,
}

/// How to wait for an instant.
#[derive(Args, Debug, Clone)]
pub struct WaitArgs {
    /// Clock to read and sleep on.
    #[arg(long, value_name = "tai|realtime|monotonic", default_value = "monotonic", value_parser = parse_clock)]
    pub clock: ClockId,
    /// How to wait: sleep (clock_nanosleep; the default of every probe: it leaves the
    /// CPU to others), spin (busy-poll) or hybrid (sleep, then spin: on time at the cost
    /// of a CPU, e.g. for a high-rate stream that must keep its grid).
    #[arg(long, value_name = "sleep|hybrid|spin", default_value = "sleep", value_parser = parse_strategy)]
    pub strategy: WaitStrategy,
    /// Spin margin of the hybrid strategy: where it starts; it then follows the tail
    /// (p99.9) of the sleep overshoot this host shows, unless --fixed-margin.
    #[arg(long, value_name = "DUR", default_value = "50us", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub margin: Duration,
    /// Keep the hybrid margin at --margin instead of adapting it.
    #[arg(long)]
    pub fixed_margin: bool,
}

impl WaitArgs {
    /// The waiter these options describe.
    pub fn waiter(&self) -> lockstep_linux::Waiter {
        let w = lockstep_linux::Waiter::new(self.clock, self.strategy).with_margin(self.margin);
        if self.fixed_margin {
            w.with_fixed_margin()
        } else {
            w
        }
    }
}

/// Where results go.
#[derive(Args, Debug, Clone)]
pub struct OutputArgs {
    /// Print the JSON result document on stdout (human text goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Write the result files (summary.json, samples.csv on request) into this directory.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Stream raw per-sample CSV to FILE (default: DIR/samples.csv with --output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "", value_parser = parse_path_or_empty)]
    pub samples: Option<PathBuf>,
}

/// How long a run lasts.
#[derive(Args, Debug, Clone)]
pub struct LengthArgs {
    /// Run for this long (e.g. 10s).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// Stop after this many samples / packets.
    #[arg(long, short = 'l', visible_alias = "loops", value_name = "N", value_parser = parse_count)]
    pub count: Option<u64>,
}

pub fn parse_duration(s: &str) -> Result<Duration, String> {
    Duration::parse(s).map_err(|e| e.to_string())
}

/// A positive duration of at most [`limits::MAX_DURATION`] (7 days).
pub fn parse_duration_positive(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_positive() {
        limits::duration(d)?;
        Ok(d)
    } else {
        Err(format!(
            "expected a positive duration like 100us, got \"{s}\""
        ))
    }
}

/// A duration from 0 to [`limits::MAX_DURATION`].
pub fn parse_duration_nonneg(s: &str) -> Result<Duration, String> {
    let d = parse_duration(s)?;
    if d.is_negative() {
        Err(format!(
            "expected a duration of 0 or more like 5us, got \"{s}\""
        ))
    } else {
        limits::duration(d)?;
        Ok(d)
    }
}

/// A simulated time: positive, at most [`limits::MAX_SIM_DURATION`] (1 day).
pub fn parse_sim_duration(s: &str) -> Result<Duration, String> {
    let d = parse_duration_positive(s)?;
    limits::sim_duration(d)?;
    Ok(d)
}

/// A delay a model adds (processing, propagation): 0 to [`limits::MAX_DELAY`] (1 s).
pub fn parse_delay(s: &str) -> Result<Duration, String> {
    let d = parse_duration_nonneg(s)?;
    limits::delay(d)?;
    Ok(d)
}

/// A time-frame: [`limits::MIN_TF`] (1 µs) to [`limits::MAX_TF`] (10 s).
pub fn parse_tf(s: &str) -> Result<Duration, String> {
    let d = parse_duration_positive(s)?;
    limits::tf(d)?;
    Ok(d)
}

/// The period of a periodic probe: [`limits::MIN_INTERVAL`] (1 µs) to 7 days.
pub fn parse_interval(s: &str) -> Result<Duration, String> {
    let d = parse_duration_positive(s)?;
    limits::interval(d)?;
    Ok(d)
}

/// `--start-at-ns T`: at most [`limits::MAX_DURATION`] after `now` (both on the run's
/// clock); an instant already past is the caller's to handle.
pub fn check_start_at(t: i64, now: i64) -> Result<(), crate::UsageError> {
    let ahead = Duration(t.saturating_sub(now));
    limits::duration(ahead).map_err(|_| {
        crate::UsageError(format!(
            "--start-at-ns {t} is {ahead} from now, above the limit of {}",
            limits::MAX_DURATION_TEXT
        ))
    })
}

/// A CPU number: 0 to [`limits::MAX_CPU`].
pub fn parse_cpu(s: &str) -> Result<usize, String> {
    let n: u64 = s
        .trim()
        .parse()
        .map_err(|_| format!("expected a CPU number (0, 1, …), got \"{s}\""))?;
    limits::cpu(n)?;
    Ok(n as usize)
}

/// A path, or the empty string `--samples` gets without a value (clap's own path
/// parser refuses empty values, which would make the bare flag an error).
pub fn parse_path_or_empty(s: &str) -> Result<PathBuf, String> {
    Ok(PathBuf::from(s))
}

/// A positive count of at most [`limits::MAX_COUNT`] (10¹²).
pub fn parse_count(s: &str) -> Result<u64, String> {
    match s.trim().parse::<u64>() {
        Ok(n) if n > 0 => {
            limits::count(n)?;
            Ok(n)
        }
        _ => Err(format!("expected a positive whole number, got \"{s}\"")),
    }
}

pub fn parse_clock(s: &str) -> Result<ClockId, String> {
    s.parse()
}

pub fn parse_strategy(s: &str) -> Result<WaitStrategy, String> {
    s.parse()
}

pub fn parse_policy(s: &str) -> Result<Policy, String> {
    s.parse()
}

pub fn parse_size(s: &str) -> Result<lockstep_core::units::Size, String> {
    s.parse()
        .map_err(|e: lockstep_core::units::ParseUnitError| e.to_string())
}

pub fn parse_dscp(s: &str) -> Result<u8, String> {
    let v = if let Some(hex) = s.strip_prefix("0x") {
        u8::from_str_radix(hex, 16).ok()
    } else {
        s.parse::<u8>().ok()
    };
    match v {
        Some(v) if v < 64 => Ok(v),
        _ => Err(format!(
            "expected a DSCP value 0..63 (decimal or 0x..), got \"{s}\""
        )),
    }
}

impl RtArgs {
    /// The request for the Linux layer; a priority without a policy means SCHED_FIFO.
    pub fn request(&self) -> lockstep_linux::rt::RtRequest {
        let policy = match (self.policy, self.priority) {
            (Some(p), _) => Some(p),
            (None, Some(_)) => Some(Policy::Fifo),
            (None, None) => None,
        };
        lockstep_linux::rt::RtRequest {
            policy,
            priority: self.priority,
            cpu: self.cpu,
            mlock: !self.no_mlock,
            dma_latency_zero: self.dma_latency_zero,
        }
    }
}

impl LengthArgs {
    /// The run length, with a default when neither bound was given.
    pub fn or_default(&self, default: Duration) -> (Option<Duration>, Option<u64>) {
        match (self.duration, self.count) {
            (None, None) => (Some(default), None),
            (d, c) => (d, c),
        }
    }
}

/// A time scale: one of `lockstep_plan::scenario::TIME_SCALES`.
pub fn parse_time_scale(s: &str) -> Result<u32, String> {
    let scales = lockstep_plan::scenario::TIME_SCALES;
    let list = scales.map(|x| x.to_string()).join(", ");
    match s.trim().parse::<u32>() {
        Ok(x) if scales.contains(&x) => Ok(x),
        _ => Err(format!("expected one of {list}, got \"{s}\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_parsers_explain_themselves() {
        assert_eq!(
            parse_duration("abc").unwrap_err(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"abc\""
        );
        assert_eq!(
            parse_duration_positive("0us").unwrap_err(),
            "expected a positive duration like 100us, got \"0us\""
        );
        assert_eq!(
            parse_count("-3").unwrap_err(),
            "expected a positive whole number, got \"-3\""
        );
        assert_eq!(
            parse_duration_positive("8d").unwrap_err(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"8d\" (unknown unit \"d\")"
        );
        assert_eq!(
            parse_duration_positive("604801s").unwrap_err(),
            "604801s is above the limit of 7 days (604800s)"
        );
        assert_eq!(
            parse_duration_nonneg("10081min").unwrap_err(),
            "604860s is above the limit of 7 days (604800s)"
        );
        assert_eq!(
            parse_count("1000000000001").unwrap_err(),
            "1000000000001 is above the limit of 1000000000000"
        );
        assert_eq!(parse_count("1000000000000").unwrap(), 1_000_000_000_000);
        assert_eq!(
            parse_sim_duration("86401s").unwrap_err(),
            "86401s is above the limit of 1 day (86400s)"
        );
        assert_eq!(
            parse_delay("2s").unwrap_err(),
            "2s is above the limit of 1s"
        );
        assert_eq!(
            parse_tf("500ns").unwrap_err(),
            "a time-frame of 500ns is below the limit of 1us"
        );
        assert_eq!(
            parse_interval("999ns").unwrap_err(),
            "999ns is below the limit of 1us"
        );
        assert_eq!(
            parse_cpu("65537").unwrap_err(),
            "CPU 65537 is above the limit of 65536"
        );
        let week = limits::MAX_DURATION.as_nanos();
        assert!(check_start_at(5 + week, 5).is_ok());
        assert!(check_start_at(-5, 5).is_ok());
        assert_eq!(
            check_start_at(6 + week, 5).unwrap_err().to_string(),
            "--start-at-ns 604800000000006 is 604800.000000001s from now, above the limit of 7 days (604800s)"
        );
        assert_eq!(parse_dscp("0x2e").unwrap(), 46);
        assert!(parse_dscp("64").is_err());
        assert_eq!(
            parse_strategy("nap").unwrap_err(),
            "expected sleep, hybrid or spin, got \"nap\""
        );
    }
}
