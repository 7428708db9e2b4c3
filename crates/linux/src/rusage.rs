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

/// The most memory this process has held resident so far (`ru_maxrss`), in bytes.
pub fn peak_rss_bytes() -> Option<u64> {
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `ru` is a valid, writable rusage for the duration of the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return None;
    }
    u64::try_from(ru.ru_maxrss).ok().map(|kib| kib * 1024)
}

/// The whole machine's CPU time by kind, summed over all CPUs (`/proc/stat`, line
/// `cpu`), in nanoseconds. The kernel samples it at its tick (tick accounting) or
/// measures it (`CONFIG_IRQ_TIME_ACCOUNTING` for irq and softirq): on a tick-accounted
/// kernel a tick that lands in a softirq counts as `softirq` here *and* as system time
/// of whatever task was running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MachineCpu {
    pub user_ns: i64,
    pub nice_ns: i64,
    pub system_ns: i64,
    pub idle_ns: i64,
    pub iowait_ns: i64,
    pub irq_ns: i64,
    pub softirq_ns: i64,
    pub steal_ns: i64,
}

impl MachineCpu {
    /// The time used since `earlier`, field by field.
    pub fn since(self, e: MachineCpu) -> MachineCpu {
        MachineCpu {
            user_ns: self.user_ns.saturating_sub(e.user_ns),
            nice_ns: self.nice_ns.saturating_sub(e.nice_ns),
            system_ns: self.system_ns.saturating_sub(e.system_ns),
            idle_ns: self.idle_ns.saturating_sub(e.idle_ns),
            iowait_ns: self.iowait_ns.saturating_sub(e.iowait_ns),
            irq_ns: self.irq_ns.saturating_sub(e.irq_ns),
            softirq_ns: self.softirq_ns.saturating_sub(e.softirq_ns),
            steal_ns: self.steal_ns.saturating_sub(e.steal_ns),
        }
    }
}

/// The `cpu` line of `/proc/stat` text, its ticks of `1/clk_tck` s turned into ns.
pub fn parse_proc_stat(text: &str, clk_tck: i64) -> Option<MachineCpu> {
    if clk_tck <= 0 {
        return None;
    }
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<i64> = line
        .split_whitespace()
        .skip(1)
        .map(|w| w.parse::<i64>().ok())
        .collect::<Option<Vec<_>>>()?;
    let ns =
        |i: usize| -> Option<i64> { v.get(i).map(|t| t.saturating_mul(1_000_000_000) / clk_tck) };
    Some(MachineCpu {
        user_ns: ns(0)?,
        nice_ns: ns(1)?,
        system_ns: ns(2)?,
        idle_ns: ns(3)?,
        iowait_ns: ns(4)?,
        irq_ns: ns(5)?,
        softirq_ns: ns(6)?,
        steal_ns: ns(7).unwrap_or(0),
    })
}

/// The machine's CPU time so far (`/proc/stat`); `None` when it cannot be read.
pub fn machine_cpu() -> Option<MachineCpu> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    // SAFETY: sysconf has no memory arguments.
    let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as i64;
    parse_proc_stat(&text, tck)
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
    fn proc_stat_cpu_line() {
        let text = "cpu  988954 340 207256 675227 9171 0 23519 2554 0 0\n\
                    cpu0 475980 165 98343 365310 2378 0 11479 1240 0 0\nintr 1 2\n";
        let m = parse_proc_stat(text, 100).unwrap();
        assert_eq!(m.user_ns, 9_889_540_000_000);
        assert_eq!(m.system_ns, 2_072_560_000_000);
        assert_eq!(m.softirq_ns, 235_190_000_000);
        assert_eq!(m.steal_ns, 25_540_000_000);
        let earlier = parse_proc_stat("cpu  1 0 6 0 0 0 19 0\n", 100).unwrap();
        assert_eq!(m.since(earlier).softirq_ns, 235_000_000_000);
        assert_eq!(parse_proc_stat("cpu0 1 2 3\n", 100), None);
        assert_eq!(parse_proc_stat("cpu  1 x 3 4 5 6 7\n", 100), None);
        assert_eq!(parse_proc_stat(text, 0), None);
        assert!(machine_cpu().is_some());
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
