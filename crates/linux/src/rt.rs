//! Real-time setup of the time-critical thread (host tuning): scheduling policy and
//! priority, CPU affinity, locked memory, and `/dev/cpu_dma_latency`.
//!
//! Scheduling and affinity apply to the **calling thread** (Linux treats pid 0 as the
//! caller), so call [`apply`] from the thread that does the time-critical work.
//! Everything is validated before anything is changed; a failure part-way leaves the
//! earlier steps in place (they only affect this thread and this process).
//!
//! `/dev/cpu_dma_latency` is held only when asked (cyclictest users trip over it being
//! held silently) and released when the [`RtState`] or [`DmaLatencyGuard`] is dropped.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;

use lockstep_core::sched::Policy;
use serde::Serialize;
use thiserror::Error;

use crate::sys::{format_cpulist, last_error};

/// The priority used when a real-time policy is asked for without one (as `chrt`
/// users expect for a time-critical thread, and below the kernel's own 99 threads).
pub const DEFAULT_RT_PRIORITY: i32 = 90;

/// Path of the PM QoS device that keeps CPUs out of deep C-states while held open.
pub const DMA_LATENCY_PATH: &str = "/dev/cpu_dma_latency";

/// The kernel's name of a policy, as `chrt` and `ps` print it.
pub fn sched_name(p: Policy) -> &'static str {
    match p {
        Policy::Fifo => "SCHED_FIFO",
        Policy::Rr => "SCHED_RR",
        Policy::Other => "SCHED_OTHER",
    }
}

/// Why the real-time setup failed. Every message says what to do about it.
#[derive(Debug, Error)]
pub enum RtError {
    #[error("{}", invalid_priority_message(*.policy, *.priority))]
    InvalidPriority { policy: Policy, priority: i32 },

    #[error("{}", policy_denied_message(*.policy, *.priority, *.as_root))]
    PolicyDenied {
        policy: Policy,
        priority: i32,
        /// Running with euid 0: then the missing budget is the cgroup's, not a capability.
        as_root: bool,
    },

    #[error("cannot set {} priority {priority}: {source}", sched_name(*.policy))]
    Policy {
        policy: Policy,
        priority: i32,
        #[source]
        source: io::Error,
    },

    #[error("CPU {cpu} is not available: online CPUs are {}", format_cpulist(.online))]
    CpuUnavailable { cpu: usize, online: Vec<usize> },

    #[error("CPU {cpu} is online but outside this process's allowed CPUs {} (cgroup cpuset or taskset)", format_cpulist(.allowed))]
    CpuNotAllowed { cpu: usize, allowed: Vec<usize> },

    #[error("cannot pin to CPU {cpu}: {source}")]
    Affinity {
        cpu: usize,
        #[source]
        source: io::Error,
    },

    #[error("cannot lock memory (mlockall): {} (run as root, or grant CAP_IPC_LOCK: `sudo setcap cap_ipc_lock+ep $(which lockstep)`, or raise RLIMIT_MEMLOCK: `ulimit -l unlimited` / memlock in /etc/security/limits.conf)", if *.out_of_memory { "locked-memory limit exceeded" } else { "permission denied" })]
    MlockDenied { out_of_memory: bool },

    #[error("cannot lock memory (mlockall): {0}")]
    Mlock(#[source] io::Error),

    #[error("{DMA_LATENCY_PATH} does not exist: this kernel offers no PM QoS device, so C-states cannot be limited from user space (boot with processor.max_cstate=1 or idle=poll instead)")]
    DmaLatencyMissing,

    #[error("cannot open {DMA_LATENCY_PATH}: permission denied (run as root)")]
    DmaLatencyDenied,

    #[error("invalid cpu_dma_latency {0} us: must be 0 or more")]
    InvalidDmaLatency(i32),

    #[error("cannot hold {DMA_LATENCY_PATH}: {0}")]
    DmaLatency(#[source] io::Error),
}

impl RtError {
    /// A missing privilege (the binary exits with status 3).
    pub fn is_permission(&self) -> bool {
        matches!(
            self,
            RtError::PolicyDenied { .. } | RtError::MlockDenied { .. } | RtError::DmaLatencyDenied
        )
    }

    /// The environment lacks a privilege or a kernel feature (exit status 3); otherwise
    /// the request itself was wrong (status 2) or an unexpected system error occurred.
    pub fn is_environment(&self) -> bool {
        self.is_permission() || matches!(self, RtError::DmaLatencyMissing)
    }

    /// The request itself is invalid (exit status 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            RtError::InvalidPriority { .. }
                | RtError::CpuUnavailable { .. }
                | RtError::CpuNotAllowed { .. }
                | RtError::InvalidDmaLatency(_)
        )
    }
}

/// The accepted priority range of a policy, as the kernel enforces it.
pub fn priority_range(p: Policy) -> std::ops::RangeInclusive<i32> {
    match p {
        Policy::Fifo | Policy::Rr => 1..=99,
        Policy::Other => 0..=0,
    }
}

fn invalid_priority_message(policy: Policy, priority: i32) -> String {
    match policy {
        Policy::Fifo | Policy::Rr => format!(
            "invalid priority {priority} for {}: must be in 1..=99",
            sched_name(policy)
        ),
        Policy::Other => format!(
            "invalid priority {priority} for SCHED_OTHER: must be 0 (use --policy fifo or rr for a real-time priority 1..=99)"
        ),
    }
}

/// The message for EPERM from `sched_setscheduler`: how to get the privilege.
pub fn policy_denied_message(policy: Policy, priority: i32, as_root: bool) -> String {
    let what = format!(
        "cannot set {} priority {priority}: permission denied",
        sched_name(policy)
    );
    if as_root {
        format!("{what} although running as root (the cgroup has no real-time budget: set cpu.rt_runtime_us of this cgroup above 0, or run outside the container/cgroup)")
    } else {
        format!("{what} (run as root, or grant CAP_SYS_NICE: `sudo setcap cap_sys_nice+ep $(which lockstep)`, or raise RLIMIT_RTPRIO in /etc/security/limits.conf)")
    }
}

/// What a run asks for (`--policy`, `--priority`, `--cpu`, plus memory locking
/// and C-state control).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RtRequest {
    pub policy: Option<Policy>,
    pub priority: Option<i32>,
    pub cpu: Option<usize>,
    pub mlock: bool,
    pub dma_latency_zero: bool,
}

/// Decides the policy and priority to set from what was given, without touching the
/// system. `None` leaves scheduling alone. A priority alone above 0 means SCHED_FIFO
/// (as with `cyclictest -p`); a real-time policy alone gets [`DEFAULT_RT_PRIORITY`].
pub fn resolve_policy(
    policy: Option<Policy>,
    priority: Option<i32>,
) -> Result<Option<(Policy, i32)>, RtError> {
    let chosen = match (policy, priority) {
        (None, None) => return Ok(None),
        (Some(Policy::Other), None) => (Policy::Other, 0),
        (Some(p), None) => (p, DEFAULT_RT_PRIORITY),
        (None, Some(0)) => (Policy::Other, 0),
        (None, Some(prio)) => (Policy::Fifo, prio),
        (Some(p), Some(prio)) => (p, prio),
    };
    if !priority_range(chosen.0).contains(&chosen.1) {
        return Err(RtError::InvalidPriority {
            policy: chosen.0,
            priority: chosen.1,
        });
    }
    Ok(Some(chosen))
}

fn policy_const(p: Policy) -> libc::c_int {
    match p {
        Policy::Fifo => libc::SCHED_FIFO,
        Policy::Rr => libc::SCHED_RR,
        Policy::Other => libc::SCHED_OTHER,
    }
}

/// Sets the calling thread's scheduling policy and priority.
pub fn set_policy(policy: Policy, priority: i32) -> Result<(), RtError> {
    if !priority_range(policy).contains(&priority) {
        return Err(RtError::InvalidPriority { policy, priority });
    }
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: `param` is a valid sched_param; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setscheduler(0, policy_const(policy), &param) };
    if rc == 0 {
        return Ok(());
    }
    let err = last_error();
    if err.raw_os_error() == Some(libc::EPERM) {
        // SAFETY: geteuid has no preconditions and cannot fail.
        let as_root = unsafe { libc::geteuid() } == 0;
        return Err(RtError::PolicyDenied {
            policy,
            priority,
            as_root,
        });
    }
    Err(RtError::Policy {
        policy,
        priority,
        source: err,
    })
}

/// The calling thread's current policy and priority. SCHED_BATCH and SCHED_IDLE are
/// reported as [`Policy::Other`] (they are not real-time either).
pub fn current_policy() -> io::Result<(Policy, i32)> {
    // SAFETY: pid 0 is the calling thread; no pointers involved.
    let raw = unsafe { libc::sched_getscheduler(0) };
    if raw < 0 {
        return Err(last_error());
    }
    let mut param = libc::sched_param { sched_priority: 0 };
    // SAFETY: `param` is valid and writable; pid 0 is the calling thread.
    if unsafe { libc::sched_getparam(0, &mut param) } != 0 {
        return Err(last_error());
    }
    let policy = match raw & !libc::SCHED_RESET_ON_FORK {
        libc::SCHED_FIFO => Policy::Fifo,
        libc::SCHED_RR => Policy::Rr,
        _ => Policy::Other,
    };
    Ok((policy, param.sched_priority))
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid and writable and its size is passed; pid 0 = this thread.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(last_error());
    }
    let max = libc::CPU_SETSIZE as usize;
    // SAFETY: every index is below CPU_SETSIZE, the size of `set`.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to one CPU. A CPU that is not online, or not allowed to this
/// process, gives an error listing the ones that are.
pub fn pin_to_cpu(cpu: usize) -> Result<(), RtError> {
    let online = crate::host::online_cpus();
    if cpu >= libc::CPU_SETSIZE as usize || !online.contains(&cpu) {
        return Err(RtError::CpuUnavailable { cpu, online });
    }
    // SAFETY: cpu_set_t is a plain bit array; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked above, so the bit is inside `set`.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is valid, its size is passed; pid 0 = the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        return Ok(());
    }
    let err = last_error();
    if err.raw_os_error() == Some(libc::EINVAL) {
        let allowed = allowed_cpus().unwrap_or_default();
        return Err(RtError::CpuNotAllowed { cpu, allowed });
    }
    Err(RtError::Affinity { cpu, source: err })
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`): how much later than
/// asked the kernel may end its sleeps and `poll` timeouts, to batch wake-ups. A
/// normal thread gets 50 µs; a thread that sleeps until frame starts wants 1 ns.
/// (Real-time threads have no slack whatever this says.)
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    let v = libc::c_ulong::try_from(ns.max(1)).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes the value and changes only this thread.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, v, 0, 0, 0) };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

/// The calling thread's timer slack in ns (`PR_GET_TIMERSLACK`).
pub fn timer_slack() -> io::Result<u64> {
    // SAFETY: prctl(PR_GET_TIMERSLACK) only reads this thread's value.
    let rc = unsafe { libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0) };
    if rc >= 0 {
        Ok(rc as u64)
    } else {
        Err(last_error())
    }
}

/// Locks all current and future memory of the process (no page faults on the hot path).
pub fn lock_memory() -> Result<(), RtError> {
    // SAFETY: mlockall takes only flags.
    let rc = unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) };
    if rc == 0 {
        return Ok(());
    }
    let err = last_error();
    match err.raw_os_error() {
        Some(libc::EPERM) => Err(RtError::MlockDenied {
            out_of_memory: false,
        }),
        Some(libc::ENOMEM) => Err(RtError::MlockDenied {
            out_of_memory: true,
        }),
        _ => Err(RtError::Mlock(err)),
    }
}

/// Undoes [`lock_memory`].
pub fn unlock_memory() -> Result<(), RtError> {
    // SAFETY: munlockall takes no arguments.
    if unsafe { libc::munlockall() } == 0 {
        Ok(())
    } else {
        Err(RtError::Mlock(last_error()))
    }
}

/// Holds a PM QoS CPU latency request: while this value lives the kernel keeps CPUs out
/// of C-states whose exit latency exceeds the value. Dropping it closes the device,
/// which releases the request.
#[derive(Debug)]
pub struct DmaLatencyGuard {
    file: File,
    us: i32,
}

impl DmaLatencyGuard {
    /// Opens `/dev/cpu_dma_latency` and writes `us` (microseconds, 0 = no C-states).
    pub fn hold(us: i32) -> Result<DmaLatencyGuard, RtError> {
        if us < 0 {
            return Err(RtError::InvalidDmaLatency(us));
        }
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(DMA_LATENCY_PATH)
            .map_err(|e| match e.kind() {
                io::ErrorKind::NotFound => RtError::DmaLatencyMissing,
                io::ErrorKind::PermissionDenied => RtError::DmaLatencyDenied,
                _ => RtError::DmaLatency(e),
            })?;
        // The device takes a binary s32 (a hex string also works; binary is unambiguous).
        file.write_all(&us.to_ne_bytes())
            .map_err(RtError::DmaLatency)?;
        Ok(DmaLatencyGuard { file, us })
    }

    /// The value this guard asked for.
    pub fn us(&self) -> i32 {
        self.us
    }

    /// The latency the kernel currently enforces (the minimum over all holders).
    pub fn effective_us(&self) -> io::Result<i32> {
        let mut buf = [0u8; 4];
        self.file.read_exact_at(&mut buf, 0)?;
        Ok(i32::from_ne_bytes(buf))
    }
}

/// What [`apply`] did. Serializes as the `rt` part of a result document; owns the
/// `/dev/cpu_dma_latency` request, which is released when this value is dropped.
#[derive(Debug, Serialize)]
pub struct RtState {
    /// The calling thread's policy after setup (read back from the kernel).
    pub policy: Policy,
    /// The calling thread's priority after setup (read back from the kernel).
    pub priority: i32,
    /// The CPU the thread was pinned to, if any.
    pub cpu: Option<usize>,
    pub mlocked: bool,
    /// The cpu_dma_latency value held, if any.
    pub dma_latency_us: Option<i32>,
    #[serde(skip)]
    dma_guard: Option<DmaLatencyGuard>,
}

impl RtState {
    /// One line for humans: `SCHED_FIFO 90 on CPU 1, memory locked, cpu_dma_latency
    /// held at 0 us`.
    pub fn describe(&self) -> String {
        describe(
            self.policy,
            self.priority,
            self.cpu,
            self.mlocked,
            self.dma_latency_us,
        )
    }

    /// Releases the cpu_dma_latency request early (dropping the state does the same).
    pub fn release_dma_latency(&mut self) {
        self.dma_guard = None;
        self.dma_latency_us = None;
    }
}

fn describe(
    policy: Policy,
    priority: i32,
    cpu: Option<usize>,
    mlocked: bool,
    dma: Option<i32>,
) -> String {
    let mut s = match policy {
        Policy::Other => sched_name(policy).to_string(),
        _ => format!("{} {priority}", sched_name(policy)),
    };
    if let Some(cpu) = cpu {
        s.push_str(&format!(" on CPU {cpu}"));
    }
    if mlocked {
        s.push_str(", memory locked");
    }
    if let Some(us) = dma {
        s.push_str(&format!(", cpu_dma_latency held at {us} us"));
    }
    s
}

/// The calling thread's kernel id (what `ps -L` shows and cyclictest prints per
/// thread).
pub fn thread_id() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// Carries out `req` on the calling thread: validates it, pins the CPU, sets the policy,
/// locks memory, holds cpu_dma_latency at 0 if asked, then reads the policy back.
pub fn apply(req: &RtRequest) -> Result<RtState, RtError> {
    let sched = resolve_policy(req.policy, req.priority)?;
    if let Some(cpu) = req.cpu {
        pin_to_cpu(cpu)?;
    }
    if let Some((policy, priority)) = sched {
        set_policy(policy, priority)?;
    }
    if req.mlock {
        lock_memory()?;
    }
    let dma_guard = if req.dma_latency_zero {
        Some(DmaLatencyGuard::hold(0)?)
    } else {
        None
    };
    let (policy, priority) =
        current_policy().unwrap_or_else(|_| sched.unwrap_or((Policy::Other, 0)));
    Ok(RtState {
        policy,
        priority,
        cpu: req.cpu,
        mlocked: req.mlock,
        dma_latency_us: dma_guard.as_ref().map(|g| g.us()),
        dma_guard,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timer_slack_is_per_thread() {
        std::thread::spawn(|| {
            set_timer_slack(1).unwrap();
            assert_eq!(timer_slack().unwrap(), 1);
            set_timer_slack(0).unwrap(); // 0 would mean "the default": 1 ns is taken
            assert_eq!(timer_slack().unwrap(), 1);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn invalid_priorities_name_the_range() {
        assert_eq!(
            resolve_policy(Some(Policy::Fifo), Some(0))
                .unwrap_err()
                .to_string(),
            "invalid priority 0 for SCHED_FIFO: must be in 1..=99"
        );
        assert_eq!(
            set_policy(Policy::Rr, 100).unwrap_err().to_string(),
            "invalid priority 100 for SCHED_RR: must be in 1..=99"
        );
        assert_eq!(
            resolve_policy(Some(Policy::Other), Some(5)).unwrap_err().to_string(),
            "invalid priority 5 for SCHED_OTHER: must be 0 (use --policy fifo or rr for a real-time priority 1..=99)"
        );
        assert_eq!(
            resolve_policy(None, Some(-1)).unwrap_err().to_string(),
            "invalid priority -1 for SCHED_FIFO: must be in 1..=99"
        );
        let e = apply(&RtRequest {
            policy: Some(Policy::Fifo),
            priority: Some(120),
            ..Default::default()
        })
        .unwrap_err();
        assert!(e.is_usage() && !e.is_permission());
    }

    #[test]
    fn policy_defaults() {
        assert_eq!(resolve_policy(None, None).unwrap(), None);
        assert_eq!(
            resolve_policy(Some(Policy::Fifo), None).unwrap(),
            Some((Policy::Fifo, DEFAULT_RT_PRIORITY))
        );
        assert_eq!(
            resolve_policy(None, Some(80)).unwrap(),
            Some((Policy::Fifo, 80))
        );
        assert_eq!(
            resolve_policy(None, Some(0)).unwrap(),
            Some((Policy::Other, 0))
        );
        assert_eq!(
            resolve_policy(Some(Policy::Other), None).unwrap(),
            Some((Policy::Other, 0))
        );
    }

    #[test]
    fn permission_message_explains_the_way_out() {
        let e = RtError::PolicyDenied {
            policy: Policy::Fifo,
            priority: 90,
            as_root: false,
        };
        assert_eq!(
            e.to_string(),
            "cannot set SCHED_FIFO priority 90: permission denied (run as root, or grant CAP_SYS_NICE: `sudo setcap cap_sys_nice+ep $(which lockstep)`, or raise RLIMIT_RTPRIO in /etc/security/limits.conf)"
        );
        assert!(e.is_permission());
        assert!(e.is_environment());
        assert!(RtError::MlockDenied {
            out_of_memory: true
        }
        .is_permission());
        assert!(!RtError::DmaLatencyMissing.is_permission());
        assert!(RtError::DmaLatencyMissing.is_environment());
    }

    #[test]
    fn unavailable_cpu_lists_the_online_ones() {
        let online = crate::host::online_cpus();
        let e = pin_to_cpu(999).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "CPU 999 is not available: online CPUs are {}",
                format_cpulist(&online)
            )
        );
        assert!(e.is_usage());
        let fixed = RtError::CpuUnavailable {
            cpu: 7,
            online: vec![0, 1, 2, 3],
        };
        assert_eq!(
            fixed.to_string(),
            "CPU 7 is not available: online CPUs are 0-3"
        );
    }

    #[test]
    fn describe_one_liner() {
        assert_eq!(
            describe(Policy::Fifo, 90, Some(1), true, Some(0)),
            "SCHED_FIFO 90 on CPU 1, memory locked, cpu_dma_latency held at 0 us"
        );
        assert_eq!(describe(Policy::Other, 0, None, false, None), "SCHED_OTHER");
    }

    /// Runs in its own thread so the policy and affinity do not leak into other tests.
    #[test]
    fn apply_fifo_pinned_and_read_back() {
        std::thread::spawn(|| {
            let cpu = *crate::host::online_cpus().last().unwrap();
            let st = apply(&RtRequest {
                policy: Some(Policy::Fifo),
                priority: Some(10),
                cpu: Some(cpu),
                mlock: false,
                dma_latency_zero: false,
            });
            match st {
                Ok(st) => {
                    assert_eq!((st.policy, st.priority), (Policy::Fifo, 10));
                    assert_eq!(allowed_cpus().unwrap(), vec![cpu]);
                    assert_eq!(st.describe(), format!("SCHED_FIFO 10 on CPU {cpu}"));
                    let json = serde_json::to_string(&st).unwrap();
                    assert_eq!(
                        json,
                        format!(r#"{{"policy":"fifo","priority":10,"cpu":{cpu},"mlocked":false,"dma_latency_us":null}}"#)
                    );
                }
                Err(e) if e.is_permission() => eprintln!("skipped: {e}"),
                Err(e) => panic!("{e}"),
            }
        })
        .join()
        .unwrap();
    }

    #[test]
    fn dma_latency_guard_holds_zero() {
        if !std::path::Path::new(DMA_LATENCY_PATH).exists() {
            eprintln!("skipped: {DMA_LATENCY_PATH} missing");
            return;
        }
        match DmaLatencyGuard::hold(0) {
            Ok(g) => {
                assert_eq!(g.us(), 0);
                assert_eq!(g.effective_us().unwrap(), 0);
            }
            Err(e) if e.is_permission() => eprintln!("skipped: {e}"),
            Err(e) => panic!("{e}"),
        }
        assert_eq!(
            DmaLatencyGuard::hold(-1).unwrap_err().to_string(),
            "invalid cpu_dma_latency -1 us: must be 0 or more"
        );
    }

    #[test]
    fn mlock_and_unlock() {
        match lock_memory() {
            Ok(()) => unlock_memory().unwrap(),
            Err(e) if e.is_permission() => eprintln!("skipped: {e}"),
            Err(e) => panic!("{e}"),
        }
    }
}
