//! The largest (and, where it matters, smallest) value lockstep takes for each number a
//! user gives: on the command line, in a scenario, node, network, export or host file,
//! or in a request to the controller. Every limit is far beyond what an experiment
//! needs and small enough that no accepted value makes a later step (planning,
//! simulating, admitting, writing results) slow or huge. README's "Limits" table lists
//! them with where each is checked.
//!
//! The helpers return the message without the field; the caller names the option or
//! the field (`--duration: 30d is above the limit of 7 days (604800s)`).

use crate::time::Duration;

/// Fastest link, flow or shaping rate: 1 Tbit/s.
pub const MAX_BIT_RATE_BPS: u64 = 1_000_000_000_000;
/// How [`MAX_BIT_RATE_BPS`] is written in messages.
pub const MAX_BIT_RATE_TEXT: &str = "1 Tbit/s";

/// Fastest packet rate: 100 Mpps (one packet every 10 ns).
pub const MAX_PACKET_RATE_PPS: u64 = 100_000_000;
/// How [`MAX_PACKET_RATE_PPS`] is written in messages.
pub const MAX_PACKET_RATE_TEXT: &str = "100 Mpps";
/// Shortest period between packets: the period of [`MAX_PACKET_RATE_PPS`].
pub const MIN_PACKET_PERIOD: Duration = Duration::from_nanos(10);

/// Shortest time-frame: 1 µs.
pub const MIN_TF: Duration = Duration::from_micros(1);
/// Longest time-frame: 10 s (also after a time scale is applied).
pub const MAX_TF: Duration = Duration::from_secs(10);

/// Most frames in a time-cycle (scenario, node file, controller): every port keeps a
/// row per frame.
pub const MAX_K: u32 = 100_000;

/// Longest duration any option or file field takes unless a tighter limit applies
/// (a run, an interval, a timeout): 7 days.
pub const MAX_DURATION: Duration = Duration::from_secs(7 * 24 * 3600);
/// How [`MAX_DURATION`] is written in messages.
pub const MAX_DURATION_TEXT: &str = "7 days (604800s)";

/// Longest simulated time (`sim run --duration`, a scenario's `duration`, `sim gen
/// --duration`, `demo --duration`): 1 day of virtual time.
pub const MAX_SIM_DURATION: Duration = Duration::from_secs(24 * 3600);
/// How [`MAX_SIM_DURATION`] is written in messages.
pub const MAX_SIM_DURATION_TEXT: &str = "1 day (86400s)";

/// Longest delay a model or an allowance adds to each packet or wake-up (processing,
/// propagation, a fixed host lateness, a spin margin): 1 s.
pub const MAX_DELAY: Duration = Duration::from_secs(1);

/// Largest wake-up lateness in a measured host model (a histogram bucket): 10 s.
pub const MAX_HOST_LATENESS: Duration = Duration::from_secs(10);
/// Most buckets in a measured host model's histogram.
pub const MAX_HISTOGRAM_BUCKETS: usize = 1_000_000;

/// Shortest period of a periodic probe (timer interval, noise period, request
/// interval): 1 µs.
pub const MIN_INTERVAL: Duration = Duration::from_micros(1);

/// Most samples or packets a `--count` (or a flow's `count`) asks for: 10¹².
pub const MAX_COUNT: u64 = 1_000_000_000_000;

/// Most spikes `probe noise --max-spikes` keeps (each is kept in memory).
pub const MAX_SPIKES: u64 = 1_000_000;

/// Largest CPU number (the CPU-list parser's limit).
pub const MAX_CPU: usize = crate::audit::cpulist::MAX_CPU;

/// Most nodes, links and flows in a scenario file.
pub const MAX_SCENARIO_NODES: usize = 1_000_000;
pub const MAX_SCENARIO_LINKS: usize = 2_000_000;
pub const MAX_SCENARIO_FLOWS: usize = 1_000_000;
/// Most time-frames a scenario's `tf` lists (each is a run per mode).
pub const MAX_TFS: usize = 64;

/// Packets a router's best-effort queue may be told to hold.
pub const MAX_BE_QUEUE: usize = 1_000_000;

/// Most servers and flows in a network file (`calc`, `ctl serve --network`).
pub const MAX_NETWORK_SERVERS: usize = 100_000;
pub const MAX_NETWORK_FLOWS: usize = 100_000;
/// Most reservations (shaped, best-effort and TDP flows) the controller holds.
pub const MAX_RESERVATIONS: usize = 100_000;

/// Largest packet of a T-SPEC (`max_packet`): the largest IPv4 packet.
pub const MAX_PACKET_BYTES: u64 = 65_535;
/// Largest bucket or buffer of a network file or request: 1 TB.
pub const MAX_DATA_BYTES: u64 = 1_000_000_000_000;
/// Longest server latency of a network file: 1 s.
pub const MAX_SERVER_LATENCY: Duration = MAX_DELAY;
/// Finest fraction a network value may have in its base unit (bit, s, bit/s): its
/// denominator is at most 10¹² (a picosecond, a picobit).
pub const MAX_DENOMINATOR: u64 = 1_000_000_000_000;

/// `d` is at most `max`: `"{d} is above the limit of {max_text}"`.
pub fn duration_at_most(d: Duration, max: Duration, max_text: &str) -> Result<(), String> {
    if d > max {
        Err(format!("{d} is above the limit of {max_text}"))
    } else {
        Ok(())
    }
}

/// A run's or an option's duration: at most [`MAX_DURATION`].
pub fn duration(d: Duration) -> Result<(), String> {
    duration_at_most(d, MAX_DURATION, MAX_DURATION_TEXT)
}

/// A simulated time: at most [`MAX_SIM_DURATION`].
pub fn sim_duration(d: Duration) -> Result<(), String> {
    duration_at_most(d, MAX_SIM_DURATION, MAX_SIM_DURATION_TEXT)
}

/// A delay of a model or an allowance: at most [`MAX_DELAY`].
pub fn delay(d: Duration) -> Result<(), String> {
    duration_at_most(d, MAX_DELAY, &MAX_DELAY.to_string())
}

/// A time-frame: from [`MIN_TF`] to [`MAX_TF`].
pub fn tf(tf: Duration) -> Result<(), String> {
    if tf < MIN_TF {
        return Err(format!(
            "a time-frame of {tf} is below the limit of {MIN_TF}"
        ));
    }
    if tf > MAX_TF {
        return Err(format!(
            "a time-frame of {tf} is above the limit of {MAX_TF}"
        ));
    }
    Ok(())
}

/// Frames per cycle: from 1 to [`MAX_K`].
pub fn k(k: u64) -> Result<(), String> {
    if k == 0 {
        return Err("k = 0: a time-cycle needs at least one frame".into());
    }
    if k > u64::from(MAX_K) {
        return Err(format!(
            "k = {k} is above the limit of {MAX_K} frames per cycle"
        ));
    }
    Ok(())
}

/// A bit rate: at most [`MAX_BIT_RATE_BPS`].
pub fn bit_rate(bps: u64, shown: &str) -> Result<(), String> {
    if bps > MAX_BIT_RATE_BPS {
        Err(format!("{shown} is above the limit of {MAX_BIT_RATE_TEXT}"))
    } else {
        Ok(())
    }
}

/// A count of samples or packets: at most [`MAX_COUNT`].
pub fn count(n: u64) -> Result<(), String> {
    if n > MAX_COUNT {
        Err(format!("{n} is above the limit of {MAX_COUNT}"))
    } else {
        Ok(())
    }
}

/// A periodic probe's period: at least [`MIN_INTERVAL`].
pub fn interval(d: Duration) -> Result<(), String> {
    if d < MIN_INTERVAL {
        Err(format!("{d} is below the limit of {MIN_INTERVAL}"))
    } else {
        Ok(())
    }
}

/// A CPU number: at most [`MAX_CPU`].
pub fn cpu(n: u64) -> Result<(), String> {
    if n > MAX_CPU as u64 {
        Err(format!("CPU {n} is above the limit of {MAX_CPU}"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_value_and_the_limit() {
        assert_eq!(
            duration(Duration::from_secs(700_000)).unwrap_err(),
            "700000s is above the limit of 7 days (604800s)"
        );
        assert!(duration(MAX_DURATION).is_ok());
        assert_eq!(
            sim_duration(Duration::from_secs(86_401)).unwrap_err(),
            "86401s is above the limit of 1 day (86400s)"
        );
        assert_eq!(
            delay(Duration::from_millis(1500)).unwrap_err(),
            "1.5s is above the limit of 1s"
        );
        assert_eq!(
            tf(Duration::from_nanos(999)).unwrap_err(),
            "a time-frame of 999ns is below the limit of 1us"
        );
        assert_eq!(
            tf(Duration::from_secs(11)).unwrap_err(),
            "a time-frame of 11s is above the limit of 10s"
        );
        assert!(tf(MIN_TF).is_ok() && tf(MAX_TF).is_ok());
        assert_eq!(
            k(100_001).unwrap_err(),
            "k = 100001 is above the limit of 100000 frames per cycle"
        );
        assert!(k(100_000).is_ok());
        assert_eq!(
            bit_rate(MAX_BIT_RATE_BPS + 1, "1000000000001bit/s").unwrap_err(),
            "1000000000001bit/s is above the limit of 1 Tbit/s"
        );
        assert!(bit_rate(MAX_BIT_RATE_BPS, "1Tbit/s").is_ok());
        assert_eq!(
            count(MAX_COUNT + 1).unwrap_err(),
            "1000000000001 is above the limit of 1000000000000"
        );
        assert_eq!(
            interval(Duration::from_nanos(999)).unwrap_err(),
            "999ns is below the limit of 1us"
        );
        assert_eq!(
            cpu(65_537).unwrap_err(),
            "CPU 65537 is above the limit of 65536"
        );
    }
}
