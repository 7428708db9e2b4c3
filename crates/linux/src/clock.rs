//! Reading the clocks of the common time reference and mapping kernel socket timestamps onto them.
//!
//! The kernel stamps packets with `CLOCK_REALTIME`, but a run may measure on
//! `CLOCK_TAI` (the default) or `CLOCK_MONOTONIC`. [`ClockMap`] measures the offset
//! between the two once, so that converting a timestamp on the hot path is one addition.

use lockstep_core::{ClockId, Duration, Instant};
use thiserror::Error;

use crate::sys::{last_error, timespec_to_ns};

/// The kernel clock id behind a [`ClockId`].
#[inline]
pub fn clockid(c: ClockId) -> libc::clockid_t {
    match c {
        ClockId::Tai => libc::CLOCK_TAI,
        ClockId::Realtime => libc::CLOCK_REALTIME,
        ClockId::Monotonic => libc::CLOCK_MONOTONIC,
    }
}

/// Why a clock cannot be used.
#[derive(Debug, Error)]
pub enum ClockError {
    #[error("this kernel cannot read CLOCK_{} ({source}){}", .clock.name().to_ascii_uppercase(), unsupported_hint(*.clock))]
    Unsupported {
        clock: ClockId,
        #[source]
        source: std::io::Error,
    },
}

fn unsupported_hint(c: ClockId) -> &'static str {
    match c {
        ClockId::Tai => {
            "; CLOCK_TAI needs Linux 3.10 or later, choose --clock realtime or monotonic"
        }
        _ => "",
    }
}

#[inline]
fn raw_now(id: libc::clockid_t) -> (libc::c_int, i64) {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call; an
    // unknown clock id makes the kernel return EINVAL without writing.
    let rc = unsafe { libc::clock_gettime(id, &mut ts) };
    (rc, timespec_to_ns(&ts))
}

/// Reads clock `c` (vDSO `clock_gettime`, no system call on x86 with the TSC).
///
/// Hot path: no error checking. Call [`check`] once at start-up; a clock the kernel
/// does not know reads as 0.
#[inline]
pub fn now(c: ClockId) -> Instant {
    Instant::new(c, raw_now(clockid(c)).1)
}

/// Reads clock `c`, reporting a kernel that lacks it.
pub fn try_now(c: ClockId) -> Result<Instant, ClockError> {
    let (rc, ns) = raw_now(clockid(c));
    if rc != 0 {
        return Err(ClockError::Unsupported {
            clock: c,
            source: last_error(),
        });
    }
    Ok(Instant::new(c, ns))
}

/// Checks once that the kernel can read clock `c`, so that [`now`] can skip the check.
pub fn check(c: ClockId) -> Result<(), ClockError> {
    try_now(c).map(|_| ())
}

/// The resolution the kernel reports for clock `c` (1 ns with high-resolution timers);
/// zero if the kernel does not know the clock.
pub fn resolution(c: ClockId) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_getres(clockid(c), &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(timespec_to_ns(&ts))
}

/// The kernel's TAI − UTC offset in seconds (`adjtimex` `tai` field), or `None` if
/// `adjtimex` fails. `Some(0)` means nobody (ptp4l, chronyd with `leapsectz`, …) has
/// told the kernel the offset, so `CLOCK_TAI` equals `CLOCK_REALTIME`.
pub fn tai_offset_s() -> Option<i64> {
    read_timex().map(|(tx, _)| i64::from(tx.tai))
}

/// Reads the kernel's NTP state without changing it (`modes = 0` needs no privilege).
pub(crate) fn read_timex() -> Option<(libc::timex, libc::c_int)> {
    // SAFETY: timex is a plain C struct; all-zero is a valid value (modes = 0: read only).
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    // SAFETY: `tx` is valid and writable; with modes = 0 adjtimex only reads state.
    let state = unsafe { libc::adjtimex(&mut tx) };
    (state >= 0).then_some((tx, state))
}

/// Number of back-to-back readings [`ClockMap::measure`] takes; the tightest wins.
const MEASURE_SAMPLES: usize = 32;

/// Converts `CLOCK_REALTIME` nanoseconds (what the kernel puts in socket timestamps)
/// into another clock by adding a fixed offset.
///
/// For `CLOCK_TAI` the offset is a whole number of seconds that only changes at a leap
/// second. `CLOCK_MONOTONIC` drifts against `CLOCK_REALTIME` whenever NTP/PTP slews the
/// latter, so long runs should measure a new map every few seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockMap {
    target: ClockId,
    offset_ns: i64,
    uncertainty_ns: i64,
}

impl ClockMap {
    /// Measures `target − CLOCK_REALTIME`: reads REALTIME, target, REALTIME back to back
    /// several times and keeps the reading with the tightest REALTIME bracket, taking
    /// the middle of the bracket. For TAI the result is snapped to the kernel's exact
    /// TAI offset when that lies inside the bracket.
    pub fn measure(target: ClockId) -> ClockMap {
        if target == ClockId::Realtime {
            return ClockMap::with_offset(ClockId::Realtime, 0);
        }
        let rt = libc::CLOCK_REALTIME;
        let tid = clockid(target);
        let mut best: Option<(i64, i64)> = None; // (bracket width, offset)
        for _ in 0..MEASURE_SAMPLES {
            let (_, r1) = raw_now(rt);
            let (_, t) = raw_now(tid);
            let (_, r2) = raw_now(rt);
            let width = r2.saturating_sub(r1);
            let mid = r1.saturating_add(width / 2);
            let offset = t.saturating_sub(mid);
            if best.is_none_or(|(w, _)| width < w) {
                best = Some((width, offset));
            }
        }
        let (width, mut offset) = best.unwrap_or((0, 0));
        let uncertainty = (width + 1) / 2;
        if target == ClockId::Tai {
            if let Some(tai) = tai_offset_s() {
                let exact = tai.saturating_mul(1_000_000_000);
                if exact.saturating_sub(offset).saturating_abs() <= uncertainty.saturating_add(1) {
                    offset = exact;
                    return ClockMap {
                        target,
                        offset_ns: offset,
                        uncertainty_ns: 0,
                    };
                }
            }
        }
        ClockMap {
            target,
            offset_ns: offset,
            uncertainty_ns: uncertainty,
        }
    }

    /// A map with a known offset (simulation, tests, or an offset measured elsewhere).
    pub const fn with_offset(target: ClockId, offset_ns: i64) -> ClockMap {
        ClockMap {
            target,
            offset_ns,
            uncertainty_ns: 0,
        }
    }

    /// The clock this map converts into.
    pub fn target(&self) -> ClockId {
        self.target
    }

    /// `target − CLOCK_REALTIME` in nanoseconds.
    pub fn offset_ns(&self) -> i64 {
        self.offset_ns
    }

    /// Half the width of the bracket the offset was measured in (0 when exact).
    pub fn uncertainty_ns(&self) -> i64 {
        self.uncertainty_ns
    }

    /// A kernel (`CLOCK_REALTIME`) timestamp expressed in the target clock.
    #[inline]
    pub fn to_target(&self, realtime_ns: i64) -> Instant {
        Instant::new(self.target, realtime_ns.saturating_add(self.offset_ns))
    }

    /// The inverse of [`ClockMap::to_target`]: `CLOCK_REALTIME` nanoseconds of `t`.
    #[inline]
    pub fn to_realtime(&self, t: Instant) -> i64 {
        t.ns.saturating_sub(self.offset_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_never_goes_back() {
        let mut last = now(ClockId::Monotonic);
        for _ in 0..100_000 {
            let t = now(ClockId::Monotonic);
            assert_eq!(t.clock, ClockId::Monotonic);
            assert!(t.ns >= last.ns, "{} < {}", t.ns, last.ns);
            last = t;
        }
    }

    #[test]
    fn every_clock_is_readable_here() {
        for c in ClockId::ALL {
            check(c).unwrap();
            assert!(try_now(c).unwrap().ns > 0);
            assert!(resolution(c) > Duration::ZERO);
        }
    }

    #[test]
    fn realtime_map_is_identity() {
        let m = ClockMap::measure(ClockId::Realtime);
        assert_eq!(m.offset_ns(), 0);
        assert_eq!(m.uncertainty_ns(), 0);
        assert_eq!(
            m.to_target(1_700_000_000_000_000_123),
            Instant::new(ClockId::Realtime, 1_700_000_000_000_000_123)
        );
    }

    #[test]
    fn tai_map_matches_the_kernel_offset() {
        let m = ClockMap::measure(ClockId::Tai);
        assert_eq!(m.target(), ClockId::Tai);
        let tai = tai_offset_s().unwrap();
        // The kernel defines CLOCK_TAI as CLOCK_REALTIME + tai; the bracket contains it
        // unless the offset changed mid-measurement (a leap second).
        assert_eq!(m.offset_ns(), tai * 1_000_000_000);
        let t = m.to_target(5);
        assert_eq!(t, Instant::new(ClockId::Tai, 5 + tai * 1_000_000_000));
        assert_eq!(m.to_realtime(t), 5);
    }

    #[test]
    fn monotonic_map_round_trips() {
        let m = ClockMap::measure(ClockId::Monotonic);
        assert_eq!(m.target(), ClockId::Monotonic);
        assert!(m.uncertainty_ns() >= 0);
        let t = m.to_target(1_000);
        assert_eq!(t.clock, ClockId::Monotonic);
        assert_eq!(m.to_realtime(t), 1_000);
        let fixed = ClockMap::with_offset(ClockId::Monotonic, -10);
        assert_eq!(fixed.to_target(25).ns, 15);
    }

    #[test]
    fn unsupported_clock_message_names_the_way_out() {
        let e = ClockError::Unsupported {
            clock: ClockId::Tai,
            source: std::io::Error::from_raw_os_error(libc::EINVAL),
        };
        assert_eq!(
            e.to_string(),
            "this kernel cannot read CLOCK_TAI (Invalid argument (os error 22)); CLOCK_TAI needs Linux 3.10 or later, choose --clock realtime or monotonic"
        );
    }
}
