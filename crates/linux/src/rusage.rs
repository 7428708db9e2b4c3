//! CPU time used (`getrusage`): what shaping costs a sender per shaping interval
//! (loeser Table 5 measured it as CPU load; here it is user + system time over the run).

use serde::Serialize;
use thiserror::Error;

use crate::sys::last_error;

/// Whose CPU time to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// The whole process, every thread (`RUSAGE_SELF`).
    Process,
    /// The calling thread only (`RUSAGE_THREAD`).
    Thread,
}

/// CPU time, split as the kernel accounts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CpuTime {
    /// Time spent in user mode.
    pub user_ns: i64,
    /// Time spent in the kernel on the caller's behalf (system calls, page faults).
    pub sys_ns: i64,
}

impl CpuTime {
    pub fn total_ns(self) -> i64 {
        self.user_ns.saturating_add(self.sys_ns)
    }

    /// The time used since `earlier` (a reading of the same process or thread).
    pub fn since(self, earlier: CpuTime) -> CpuTime {
        CpuTime {
            user_ns: self.user_ns.saturating_sub(earlier.user_ns),
            sys_ns: self.sys_ns.saturating_sub(earlier.sys_ns),
        }
    }
}

/// `getrusage` failed (it cannot for valid arguments; kept for completeness).
#[derive(Debug, Error)]
#[error("getrusage: {0}")]
pub struct RusageError(#[source] std::io::Error);

/// (`time_t` and `suseconds_t` are 32 bits on some targets: the casts are not no-ops.)
#[allow(clippy::unnecessary_cast)]
fn timeval_ns(tv: libc::timeval) -> i64 {
    (tv.tv_sec as i64)
        .saturating_mul(1_000_000_000)
        .saturating_add((tv.tv_usec as i64).saturating_mul(1_000))
}

/// The CPU time `who` has used so far. The kernel accounts it at the scheduler tick
/// or better (microsecond fields; precise with `CONFIG_VIRT_CPU_ACCOUNTING`).
pub fn cpu_time(who: Who) -> Result<CpuTime, RusageError> {
    let which = match who {
        Who::Process => libc::RUSAGE_SELF,
        Who::Thread => libc::RUSAGE_THREAD,
    };
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the duration of the call.
    if unsafe { libc::getrusage(which, &mut ru) } != 0 {
        return Err(RusageError(last_error()));
    }
    Ok(CpuTime {
        user_ns: timeval_ns(ru.ru_utime),
        sys_ns: timeval_ns(ru.ru_stime),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        let a = CpuTime {
            user_ns: 5,
            sys_ns: 7,
        };
        let b = CpuTime {
            user_ns: 15,
            sys_ns: 27,
        };
        assert_eq!(
            b.since(a),
            CpuTime {
                user_ns: 10,
                sys_ns: 20
            }
        );
        assert_eq!(b.since(a).total_ns(), 30);
        let tv = libc::timeval {
            tv_sec: 2,
            tv_usec: 500,
        };
        assert_eq!(timeval_ns(tv), 2_000_500_000);
    }

    #[test]
    fn readings_never_go_backwards() {
        let p0 = cpu_time(Who::Process).unwrap();
        let t0 = cpu_time(Who::Thread).unwrap();
        // Burn a little CPU so there is something to count (no timing asserted).
        let mut x = 0u64;
        for i in 0..1_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let p1 = cpu_time(Who::Process).unwrap();
        let t1 = cpu_time(Who::Thread).unwrap();
        assert!(p1.user_ns >= p0.user_ns && p1.sys_ns >= p0.sys_ns);
        assert!(t1.user_ns >= t0.user_ns && t1.sys_ns >= t0.sys_ns);
    }
}
