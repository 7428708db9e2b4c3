//! Waiting for an absolute instant (`--strategy sleep|hybrid|spin`).
//!
//! Every strategy ends by reading the clock until it shows the deadline, so a waiter
//! never returns early, whatever the kernel does (early wake-ups, signals, a clock the
//! kernel cannot sleep on). The returned instant is that last reading: the wake-up time
//! `L_I` is measured from (the latency decomposition).

use std::cell::RefCell;

use lockstep_core::margin::MarginTuner;
use lockstep_core::sched::{WaitStrategy, DEFAULT_HYBRID_MARGIN};
use lockstep_core::{ClockId, Duration, Instant};
use thiserror::Error;

use crate::clock::{clockid, now};
use crate::sys::ns_to_timespec;

/// Why a waiter cannot sleep on its clock.
#[derive(Debug, Error)]
pub enum WaitError {
    #[error("this kernel cannot sleep on CLOCK_{} with clock_nanosleep ({source}); use --strategy spin or another --clock", .clock.name().to_ascii_uppercase())]
    Unsupported {
        clock: ClockId,
        #[source]
        source: std::io::Error,
    },
}

/// Smallest margin the adaptive hybrid strategy goes down to.
pub const MIN_ADAPTIVE_MARGIN: Duration = Duration::from_micros(2);
/// Largest margin it goes up to unless told otherwise.
pub const MAX_ADAPTIVE_MARGIN: Duration = Duration::from_millis(1);
/// Added to the observed sleep overshoot.
pub const MARGIN_SLACK: Duration = Duration::from_micros(2);

/// Waits until absolute instants of one clock with one strategy.
///
/// The hybrid strategy adapts its spin margin to the sleep overshoot it observes
/// ([`MarginTuner`]) unless it was made fixed with [`Waiter::with_fixed_margin`].
#[derive(Clone, Debug)]
pub struct Waiter {
    clock: ClockId,
    strategy: WaitStrategy,
    margin: Duration,
    tuner: Option<RefCell<MarginTuner>>,
}

impl Waiter {
    /// A waiter with the default initial hybrid margin ([`DEFAULT_HYBRID_MARGIN`]),
    /// adaptive.
    pub fn new(clock: ClockId, strategy: WaitStrategy) -> Waiter {
        Waiter {
            clock,
            strategy,
            margin: DEFAULT_HYBRID_MARGIN,
            tuner: None,
        }
        .tuned(true)
    }

    fn tuned(mut self, adaptive: bool) -> Waiter {
        self.tuner = (adaptive && self.strategy == WaitStrategy::Hybrid).then(|| {
            RefCell::new(MarginTuner::new(
                self.margin,
                MIN_ADAPTIVE_MARGIN,
                MAX_ADAPTIVE_MARGIN,
                MARGIN_SLACK,
            ))
        });
        self
    }

    /// Sets how long before the deadline the hybrid strategy stops sleeping and starts
    /// spinning (the starting point when adaptive). Negative margins count as zero.
    pub fn with_margin(mut self, margin: Duration) -> Waiter {
        self.margin = if margin.is_negative() {
            Duration::ZERO
        } else {
            margin
        };
        let adaptive = self.tuner.is_some();
        self.tuned(adaptive)
    }

    /// Keeps the hybrid margin where it is instead of adapting it.
    pub fn with_fixed_margin(self) -> Waiter {
        self.tuned(false)
    }

    /// Caps the adaptive margin, e.g. to a fraction of a period so a real-time thread
    /// never spins whole periods away (RT throttling would then stall it).
    pub fn with_max_margin(self, max: Duration) -> Waiter {
        if let Some(t) = &self.tuner {
            t.borrow_mut().set_max(max);
        }
        self
    }

    /// Whether the hybrid margin adapts.
    pub fn is_adaptive(&self) -> bool {
        self.tuner.is_some()
    }

    pub fn clock(&self) -> ClockId {
        self.clock
    }

    pub fn strategy(&self) -> WaitStrategy {
        self.strategy
    }

    /// The hybrid margin in force now.
    pub fn margin(&self) -> Duration {
        match &self.tuner {
            Some(t) => t.borrow().margin(),
            None => self.margin,
        }
    }

    /// Reads the waiter's clock.
    #[inline]
    pub fn now(&self) -> Instant {
        now(self.clock)
    }

    /// Checks once, at start-up, that the kernel can sleep on this clock (spinning needs
    /// only a readable clock). Without this check a refused sleep silently turns into a
    /// spin.
    pub fn check(&self) -> Result<(), WaitError> {
        crate::clock::check(self.clock).map_err(|e| match e {
            crate::clock::ClockError::Unsupported { clock, source } => {
                WaitError::Unsupported { clock, source }
            }
        })?;
        if self.strategy == WaitStrategy::Spin {
            return Ok(());
        }
        // A deadline already in the past: the kernel validates it and returns at once.
        let past = now(self.clock).ns.saturating_sub(1);
        match sleep_abs(clockid(self.clock), past) {
            0 => Ok(()),
            err => Err(WaitError::Unsupported {
                clock: self.clock,
                source: std::io::Error::from_raw_os_error(err),
            }),
        }
    }

    /// Waits until the clock reads at least `deadline` and returns that reading (the
    /// wake-up time) — or returns early, before the deadline, once a stop was asked for
    /// ([`crate::signal`]: Ctrl-C, SIGTERM), so no wait outlives a stop. `deadline` should come from this waiter's clock; the wait always
    /// uses the deadline's own clock so the guarantee holds either way.
    #[inline]
    pub fn wait_until(&self, deadline: Instant) -> Instant {
        debug_assert_eq!(deadline.clock, self.clock, "deadline of another clock");
        let clock = deadline.clock;
        // A sleep whose target has already passed still costs a system call (tens of
        // microseconds on a VM), so look at the clock first: a late caller (a sender
        // catching up) goes straight on.
        let sleep_to = match self.strategy {
            WaitStrategy::Sleep => Some(deadline.ns),
            WaitStrategy::Spin => None,
            WaitStrategy::Hybrid => Some(deadline.ns.saturating_sub(self.margin().as_nanos())),
        };
        if let Some(target) = sleep_to {
            let t = now(clock);
            if t.ns >= deadline.ns {
                return t;
            }
            let rc = if t.ns < target {
                sleep_abs(clockid(clock), target)
            } else {
                -1
            };
            if rc == libc::EINTR {
                // Ctrl-C or SIGTERM: back early, before the deadline
                return now(clock);
            }
            if rc == 0 {
                let woke = now(clock);
                if let Some(tuner) = &self.tuner {
                    tuner
                        .borrow_mut()
                        .observe(Duration(woke.ns.saturating_sub(target)));
                }
                if woke.ns >= deadline.ns {
                    return woke;
                }
            }
        }
        spin_until(clock, deadline.ns)
    }
}

/// `clock_nanosleep(TIMER_ABSTIME)` until `ns`, restarted after signals unless one asked
/// to stop. Returns 0, `EINTR` for a stop, or the error number the kernel gave (the
/// caller then spins instead).
#[inline]
fn sleep_abs(id: libc::clockid_t, ns: i64) -> libc::c_int {
    let ts = ns_to_timespec(ns);
    loop {
        // SAFETY: `ts` is a valid timespec; with TIMER_ABSTIME the remainder pointer
        // is unused and may be null.
        let rc =
            unsafe { libc::clock_nanosleep(id, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
        // a signal that asked to stop ends the sleep; any other is slept through
        if rc != libc::EINTR || crate::signal::stop_requested() {
            return rc;
        }
    }
}

/// Reads the clock until it shows at least `ns`; returns the first such reading, or
/// an earlier one as soon as a stop was asked for (Ctrl-C, SIGTERM).
#[inline]
fn spin_until(clock: ClockId, ns: i64) -> Instant {
    loop {
        let t = now(clock);
        if t.ns >= ns || crate::signal::stop_requested() {
            return t;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRATEGIES: [WaitStrategy; 3] = [
        WaitStrategy::Sleep,
        WaitStrategy::Spin,
        WaitStrategy::Hybrid,
    ];

    #[test]
    fn never_wakes_before_the_deadline() {
        for clock in ClockId::ALL {
            for strategy in STRATEGIES {
                let w = Waiter::new(clock, strategy).with_margin(Duration::from_micros(20));
                w.check().unwrap();
                let mut deadline = w.now() + Duration::from_micros(100);
                for _ in 0..50 {
                    let wake = w.wait_until(deadline);
                    assert_eq!(wake.clock, clock);
                    assert!(wake.ns >= deadline.ns, "{strategy} on {clock} woke early");
                    deadline = deadline + Duration::from_micros(37);
                }
            }
        }
    }

    #[test]
    fn past_deadlines_return_at_once_and_still_not_early() {
        for strategy in STRATEGIES {
            let w = Waiter::new(ClockId::Monotonic, strategy);
            let deadline = w.now() - Duration::from_millis(1);
            assert!(w.wait_until(deadline).ns >= deadline.ns);
            // A deadline before the epoch of the clock (negative timespec) is refused by
            // clock_nanosleep; the spin fallback keeps the guarantee.
            let ancient = Instant::new(ClockId::Monotonic, -5);
            assert!(w.wait_until(ancient).ns >= -5);
        }
    }

    #[test]
    fn margin_larger_than_remaining_time_spins() {
        let w = Waiter::new(ClockId::Tai, WaitStrategy::Hybrid).with_margin(Duration::SECOND);
        let deadline = w.now() + Duration::from_micros(50);
        assert!(w.wait_until(deadline).ns >= deadline.ns);
    }

    #[test]
    fn builder_values() {
        let w = Waiter::new(ClockId::Realtime, WaitStrategy::Hybrid);
        assert_eq!(w.margin(), DEFAULT_HYBRID_MARGIN);
        assert_eq!(w.clock(), ClockId::Realtime);
        assert_eq!(w.strategy(), WaitStrategy::Hybrid);
        assert!(w.is_adaptive());
        // an adaptive margin never goes below its floor; a fixed one is taken as given
        assert_eq!(
            w.clone().with_margin(Duration(-3)).margin(),
            MIN_ADAPTIVE_MARGIN
        );
        let fixed = w.with_fixed_margin().with_margin(Duration(-3));
        assert!(!fixed.is_adaptive());
        assert_eq!(fixed.margin(), Duration::ZERO);
        assert!(!Waiter::new(ClockId::Realtime, WaitStrategy::Sleep).is_adaptive());
    }
}
