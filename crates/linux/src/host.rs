//! Host facts recorded with every result (the result document's `"host"`): what kernel, whether
//! it is real-time, which CPU, how CPUs are isolated, the governor, the clock source and
//! the clock sync state.
//!
//! Gathering needs no privilege and changes nothing. Whatever cannot be read is listed
//! in [`HostFacts::unreadable`] with the reason, so a result never silently lacks a
//! fact. The parsing functions are pure (text in, value out) and tested on fixtures;
//! [`collect`] only reads files and calls them.

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::io;

use serde::{Deserialize, Serialize};

/// `uname` release, version and machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFacts {
    /// e.g. `6.8.0-45-generic`.
    pub release: String,
    /// e.g. `#1 SMP PREEMPT_DYNAMIC Tue Jan 1 00:00:00 UTC 2025`.
    pub version: String,
    /// e.g. `x86_64`.
    pub machine: String,
}

/// CPU isolation: what the kernel reports and the boot parameters that set it up.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Isolation {
    /// `/sys/devices/system/cpu/isolated` (isolcpus).
    pub isolated: Vec<usize>,
    /// `/sys/devices/system/cpu/nohz_full` (empty when the kernel lacks NO_HZ_FULL).
    pub nohz_full: Vec<usize>,
    /// The latency-relevant boot parameters found in `/proc/cmdline` (a flag without a
    /// value maps to an empty string).
    pub boot_params: BTreeMap<String, String>,
}

/// The kernel's clock discipline state (`adjtimex`) and the sync daemons running.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncFacts {
    /// The kernel considers the clock synchronized: `STA_UNSYNC` clear and the state
    /// not `TIME_ERROR`.
    pub synchronized: bool,
    /// `adjtimex` return value: `TIME_OK`, `TIME_INS`, `TIME_DEL`, `TIME_OOP`,
    /// `TIME_WAIT` or `TIME_ERROR`.
    pub state: String,
    /// The set `STA_*` status flags, e.g. `["STA_PLL", "STA_NANO"]`.
    pub status: Vec<String>,
    /// Maximum error the kernel assumes, in nanoseconds.
    pub maxerror_ns: i64,
    /// Estimated error, in nanoseconds.
    pub esterror_ns: i64,
    /// Current PLL offset, in nanoseconds.
    pub offset_ns: i64,
    /// TAI − UTC in seconds; 0 means nobody set it and CLOCK_TAI equals CLOCK_REALTIME.
    pub tai_offset_s: i64,
    /// Clock sync daemons found running (`ptp4l`, `phc2sys`, `chronyd`, `ntpd`, …).
    pub daemons: Vec<String>,
}

/// Everything a result document records about the host.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFacts {
    pub hostname: String,
    pub kernel: KernelFacts,
    /// A PREEMPT_RT kernel.
    pub rt: bool,
    /// The preemption model, when visible (`none`, `voluntary`, `full`, `lazy`, `rt`,
    /// `dynamic`).
    pub preempt: Option<String>,
    pub cpu_model: Option<String>,
    /// Online CPUs.
    pub cores: usize,
    pub isolation: Isolation,
    /// The cpufreq governor (`performance`), per CPU when they differ
    /// (`cpu0=performance, cpu1=powersave`), or `unknown (no cpufreq)`.
    pub governor: String,
    /// `tsc`, `hpet`, `kvm-clock`, …
    pub clocksource: Option<String>,
    pub sync: SyncFacts,
    /// The hypervisor (`kvm`, `xen`, `hyper-v`, …) when running virtualized.
    pub virtualization: Option<String>,
    /// What could not be read, and why.
    pub unreadable: Vec<String>,
}

impl HostFacts {
    /// Facts that threaten measurement quality, for humans (one line each).
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        if !self.sync.synchronized {
            w.push(format!(
                "the kernel clock is not synchronized (state {}); cross-host results are only as good as the clock",
                self.sync.state
            ));
        }
        if self.sync.tai_offset_s == 0 {
            w.push("the kernel's TAI offset is 0: CLOCK_TAI equals CLOCK_REALTIME (ptp4l or chronyd with leapsectz would set it)".to_string());
        }
        if !self.rt {
            w.push("not a PREEMPT_RT kernel: expect wake-up latency spikes".to_string());
        }
        if let Some(v) = &self.virtualization {
            w.push(format!(
                "running under a hypervisor ({v}): the host can steal the CPU at any time"
            ));
        }
        w
    }
}

/// Whether `e` just means "not there" (a feature the kernel lacks, not a failure).
fn missing(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

struct Reader {
    unreadable: Vec<String>,
}

impl Reader {
    /// Reads a text file; a failure is recorded unless `optional` and the file is absent.
    fn read(&mut self, path: &str, optional: bool) -> Option<String> {
        match std::fs::read_to_string(path) {
            Ok(s) => Some(s),
            Err(e) if optional && missing(&e) => None,
            Err(e) => {
                self.unreadable.push(format!("{path}: {e}"));
                None
            }
        }
    }
}

/// Gathers the facts. Never fails: what cannot be read is listed in `unreadable`.
pub fn collect() -> HostFacts {
    let mut r = Reader {
        unreadable: Vec::new(),
    };
    let uts = uname();
    let (hostname, kernel) = match uts {
        Ok(u) => u,
        Err(e) => {
            r.unreadable.push(format!("uname: {e}"));
            (String::new(), KernelFacts::default())
        }
    };

    let realtime = r.read("/sys/kernel/realtime", true);
    let rt = is_rt(realtime.as_deref(), &kernel.version);
    let cmdline = r.read("/proc/cmdline", false).unwrap_or_default();
    let boot_params = parse_boot_params(&cmdline);
    let preempt_debug = if kernel.version.contains("PREEMPT_DYNAMIC") && !rt {
        match std::fs::read_to_string("/sys/kernel/debug/sched/preempt") {
            Ok(s) => Some(s),
            Err(e) => {
                r.unreadable.push(format!(
                    "/sys/kernel/debug/sched/preempt (preemption model of this PREEMPT_DYNAMIC kernel): {e}{}",
                    if missing(&e) { " (debugfs not mounted?)" } else { "" }
                ));
                None
            }
        }
    } else {
        None
    };
    let preempt = parse_preempt(
        preempt_debug.as_deref(),
        &kernel.version,
        boot_params.get("preempt").map(String::as_str),
    );

    let cpuinfo = r.read("/proc/cpuinfo", false).unwrap_or_default();
    let cpu_model = parse_cpu_model(&cpuinfo);
    let cores = online_cpus().len();

    let isolated = r
        .read("/sys/devices/system/cpu/isolated", false)
        .map(|s| cpulist_or_note(&s, "/sys/devices/system/cpu/isolated", &mut r.unreadable))
        .unwrap_or_default();
    let nohz_full = r
        .read("/sys/devices/system/cpu/nohz_full", true)
        .map(|s| cpulist_or_note(&s, "/sys/devices/system/cpu/nohz_full", &mut r.unreadable))
        .unwrap_or_default();

    let governor = summarize_governors(&read_governors(&mut r));
    let clocksource = r
        .read(
            "/sys/devices/system/clocksource/clocksource0/current_clocksource",
            false,
        )
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());

    let sync = read_sync(&mut r);
    let virtualization = detect_virtualization(&cpuinfo, &mut r);

    HostFacts {
        hostname,
        kernel,
        rt,
        preempt,
        cpu_model,
        cores,
        isolation: Isolation {
            isolated,
            nohz_full,
            boot_params,
        },
        governor,
        clocksource,
        sync,
        virtualization,
        unreadable: r.unreadable,
    }
}

fn cpulist_or_note(text: &str, path: &str, unreadable: &mut Vec<String>) -> Vec<usize> {
    match parse_cpulist(text) {
        Ok(v) => v,
        Err(e) => {
            unreadable.push(format!("{path}: {e}"));
            Vec::new()
        }
    }
}

fn c_field(bytes: &[libc::c_char]) -> String {
    let raw: Vec<u8> = bytes
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&raw).into_owned()
}

fn uname() -> io::Result<(String, KernelFacts)> {
    // SAFETY: utsname is a plain C struct of char arrays; all-zero is valid.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is valid and writable.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((
        c_field(&u.nodename),
        KernelFacts {
            release: c_field(&u.release),
            version: c_field(&u.version),
            machine: c_field(&u.machine),
        },
    ))
}

/// The CPUs that are online (`/sys/devices/system/cpu/online`, else the count from
/// `sysconf`, else `available_parallelism`, else CPU 0).
pub fn online_cpus() -> Vec<usize> {
    if let Ok(text) = std::fs::read_to_string("/sys/devices/system/cpu/online") {
        if let Ok(v) = parse_cpulist(&text) {
            if !v.is_empty() {
                return v;
            }
        }
    }
    // SAFETY: sysconf takes a constant and has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    if n > 0 {
        return (0..n as usize).collect();
    }
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0..n).collect()
}

/// Parses the kernel's cpulist format: `0-3,6,8-9` (empty or whitespace = none).
/// Also accepts the stride form `0-7:2/4` (kernel ≥ 5.x, for isolcpus).
pub fn parse_cpulist(text: &str) -> Result<Vec<usize>, String> {
    lockstep_core::audit::cpulist::parse(text)
}

/// The CPU model from `/proc/cpuinfo` (x86 `model name`, arm64 has none but may give
/// `Hardware`/`Processor`, POWER `cpu`).
pub fn parse_cpu_model(cpuinfo: &str) -> Option<String> {
    for key in ["model name", "Processor", "cpu model", "Hardware", "cpu"] {
        for line in cpuinfo.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == key && !v.trim().is_empty() {
                    return Some(v.trim().to_string());
                }
            }
        }
    }
    None
}

/// Whether the `flags` line of `/proc/cpuinfo` has the `hypervisor` bit.
pub fn cpuinfo_has_hypervisor(cpuinfo: &str) -> bool {
    cpuinfo.lines().any(|line| {
        line.split_once(':').is_some_and(|(k, v)| {
            k.trim() == "flags" && v.split_whitespace().any(|f| f == "hypervisor")
        })
    })
}

/// The boot parameters that shape latency (host tuning).
pub const BOOT_PARAMS: [&str; 12] = [
    "isolcpus",
    "nohz_full",
    "rcu_nocbs",
    "rcu_nocb_poll",
    "irqaffinity",
    "idle",
    "processor.max_cstate",
    "intel_idle.max_cstate",
    "intel_pstate",
    "preempt",
    "threadirqs",
    "skew_tick",
];

/// Extracts [`BOOT_PARAMS`] from a kernel command line (stops at `--`, after which
/// arguments go to init). A repeated parameter keeps its last value, as the kernel does.
pub fn parse_boot_params(cmdline: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break;
        }
        let (k, v) = word.split_once('=').unwrap_or((word, ""));
        if BOOT_PARAMS.contains(&k) {
            out.insert(k.to_string(), v.trim_matches('"').to_string());
        }
    }
    out
}

/// A PREEMPT_RT kernel: `/sys/kernel/realtime` reads 1, or the uname version says so.
pub fn is_rt(sys_kernel_realtime: Option<&str>, uname_version: &str) -> bool {
    sys_kernel_realtime.is_some_and(|s| s.trim() == "1")
        || uname_version.split_whitespace().any(|w| w == "PREEMPT_RT")
}

/// The preemption model: from debugfs `sched/preempt` (`none voluntary (full) lazy`,
/// the current one in parentheses), else the `preempt=` boot parameter of a dynamic
/// kernel, else the uname version.
pub fn parse_preempt(
    debugfs: Option<&str>,
    uname_version: &str,
    boot_preempt: Option<&str>,
) -> Option<String> {
    let words: Vec<&str> = uname_version.split_whitespace().collect();
    if words.contains(&"PREEMPT_RT") {
        return Some("rt".to_string());
    }
    if let Some(text) = debugfs {
        let current = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix('(').and_then(|w| w.strip_suffix(')')));
        if let Some(c) = current {
            return Some(c.to_string());
        }
    }
    if words.contains(&"PREEMPT_DYNAMIC") {
        return Some(match boot_preempt {
            Some(p) if !p.is_empty() => p.to_string(),
            _ => "dynamic".to_string(),
        });
    }
    if words.contains(&"PREEMPT_LAZY") {
        return Some("lazy".to_string());
    }
    if words.contains(&"PREEMPT") {
        return Some("full".to_string());
    }
    None
}

fn read_governors(r: &mut Reader) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for cpu in online_cpus() {
        let path = format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor");
        match std::fs::read_to_string(&path) {
            Ok(s) => out.push((cpu, s.trim().to_string())),
            Err(e) if missing(&e) => {}
            Err(e) => r.unreadable.push(format!("{path}: {e}")),
        }
    }
    out
}

/// One governor when all CPUs agree, else `cpuN=gov` per CPU; `unknown (no cpufreq)`
/// when no CPU has cpufreq (typical of virtual machines).
pub fn summarize_governors(per_cpu: &[(usize, String)]) -> String {
    match per_cpu.first() {
        None => "unknown (no cpufreq)".to_string(),
        Some((_, g)) if per_cpu.iter().all(|(_, x)| x == g) => g.clone(),
        Some(_) => per_cpu
            .iter()
            .map(|(c, g)| format!("cpu{c}={g}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

const STA_FLAGS: [(i32, &str); 16] = [
    (libc::STA_PLL, "STA_PLL"),
    (libc::STA_PPSFREQ, "STA_PPSFREQ"),
    (libc::STA_PPSTIME, "STA_PPSTIME"),
    (libc::STA_FLL, "STA_FLL"),
    (libc::STA_INS, "STA_INS"),
    (libc::STA_DEL, "STA_DEL"),
    (libc::STA_UNSYNC, "STA_UNSYNC"),
    (libc::STA_FREQHOLD, "STA_FREQHOLD"),
    (libc::STA_PPSSIGNAL, "STA_PPSSIGNAL"),
    (libc::STA_PPSJITTER, "STA_PPSJITTER"),
    (libc::STA_PPSWANDER, "STA_PPSWANDER"),
    (libc::STA_PPSERROR, "STA_PPSERROR"),
    (libc::STA_CLOCKERR, "STA_CLOCKERR"),
    (libc::STA_NANO, "STA_NANO"),
    (libc::STA_MODE, "STA_MODE"),
    (libc::STA_CLK, "STA_CLK"),
];

/// Names of the `STA_*` bits set in an `adjtimex` status word.
pub fn decode_status(status: i32) -> Vec<String> {
    STA_FLAGS
        .iter()
        .filter(|(bit, _)| status & bit != 0)
        .map(|(_, name)| name.to_string())
        .collect()
}

/// Name of an `adjtimex` return value.
pub fn time_state_name(state: i32) -> String {
    match state {
        libc::TIME_OK => "TIME_OK".to_string(),
        libc::TIME_INS => "TIME_INS".to_string(),
        libc::TIME_DEL => "TIME_DEL".to_string(),
        libc::TIME_OOP => "TIME_OOP".to_string(),
        libc::TIME_WAIT => "TIME_WAIT".to_string(),
        libc::TIME_ERROR => "TIME_ERROR".to_string(),
        other => format!("unknown ({other})"),
    }
}

/// Builds [`SyncFacts`] from raw `adjtimex` values (pure; errors are in µs, the offset
/// in ns when `STA_NANO` is set, else µs).
pub fn sync_from_timex(
    state: i32,
    status: i32,
    maxerror_us: i64,
    esterror_us: i64,
    offset: i64,
    tai: i64,
    daemons: Vec<String>,
) -> SyncFacts {
    SyncFacts {
        synchronized: status & libc::STA_UNSYNC == 0 && state != libc::TIME_ERROR,
        state: time_state_name(state),
        status: decode_status(status),
        maxerror_ns: maxerror_us.saturating_mul(1_000),
        esterror_ns: esterror_us.saturating_mul(1_000),
        offset_ns: if status & libc::STA_NANO != 0 {
            offset
        } else {
            offset.saturating_mul(1_000)
        },
        tai_offset_s: tai,
        daemons,
    }
}

/// The clock sync daemons among process names (`/proc/PID/comm`, cut at 15 bytes by
/// the kernel), sorted and without duplicates.
pub fn sync_daemons<'a>(comms: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    const KNOWN: [(&str, &str); 9] = [
        ("ptp4l", "ptp4l"),
        ("phc2sys", "phc2sys"),
        ("ts2phc", "ts2phc"),
        ("timemaster", "timemaster"),
        ("chronyd", "chronyd"),
        ("ntpd", "ntpd"),
        ("openntpd", "openntpd"),
        ("systemd-timesyn", "systemd-timesyncd"),
        ("ptpd", "ptpd"),
    ];
    let mut out: Vec<String> = comms
        .into_iter()
        .filter_map(|c| {
            let c = c.trim();
            KNOWN
                .iter()
                .find(|(k, _)| *k == c)
                .map(|(_, n)| n.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

// `c_long` is 32 bits on 32-bit targets, so the casts are not always no-ops.
#[allow(clippy::unnecessary_cast)]
fn read_sync(r: &mut Reader) -> SyncFacts {
    let mut comms = Vec::new();
    match std::fs::read_dir("/proc") {
        Ok(dir) => {
            for entry in dir.flatten() {
                let name = entry.file_name();
                let Some(pid) = name.to_str() else { continue };
                if !pid.bytes().all(|b| b.is_ascii_digit()) {
                    continue;
                }
                // Processes may exit between listing and reading: ignore those.
                if let Ok(c) = std::fs::read_to_string(entry.path().join("comm")) {
                    comms.push(c);
                }
            }
        }
        Err(e) => r.unreadable.push(format!("/proc (sync daemons): {e}")),
    }
    let daemons = sync_daemons(comms.iter().map(String::as_str));
    match crate::clock::read_timex() {
        Some((tx, state)) => sync_from_timex(
            state,
            tx.status,
            tx.maxerror as i64,
            tx.esterror as i64,
            tx.offset as i64,
            i64::from(tx.tai),
            daemons,
        ),
        None => {
            r.unreadable
                .push(format!("adjtimex: {}", io::Error::last_os_error()));
            SyncFacts {
                state: "unknown".to_string(),
                daemons,
                ..SyncFacts::default()
            }
        }
    }
}

/// Names a hypervisor from its CPUID leaf 0x40000000 vendor signature.
pub fn hypervisor_name(signature: &[u8; 12]) -> Option<&'static str> {
    Some(match signature {
        b"KVMKVMKVM\0\0\0" => "kvm",
        b"Microsoft Hv" => "hyper-v",
        b"VMwareVMware" => "vmware",
        b"XenVMMXenVMM" => "xen",
        b"TCGTCGTCGTCG" => "qemu-tcg",
        b"bhyve bhyve " => "bhyve",
        b" lrpepyh  vr" => "parallels",
        b"ACRNACRNACRN" => "acrn",
        b"QNXQVMBSQG\0\0" => "qnx",
        b"VBoxVBoxVBox" => "virtualbox",
        _ => return None,
    })
}

#[cfg(target_arch = "x86_64")]
fn cpuid_hypervisor() -> Option<&'static str> {
    #[allow(unused_unsafe)]
    // SAFETY: CPUID exists on every x86_64 CPU; leaf 0x40000000 is reserved for
    // hypervisors and returns zeros or junk (which matches no signature) on bare metal.
    let r = unsafe { std::arch::x86_64::__cpuid(0x4000_0000) };
    let mut sig = [0u8; 12];
    sig[0..4].copy_from_slice(&r.ebx.to_le_bytes());
    sig[4..8].copy_from_slice(&r.ecx.to_le_bytes());
    sig[8..12].copy_from_slice(&r.edx.to_le_bytes());
    hypervisor_name(&sig)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_hypervisor() -> Option<&'static str> {
    None
}

fn detect_virtualization(cpuinfo: &str, r: &mut Reader) -> Option<String> {
    let sys_type = r
        .read("/sys/hypervisor/type", true)
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    if let Some(t) = sys_type {
        return Some(t);
    }
    if !cpuinfo_has_hypervisor(cpuinfo) {
        return None;
    }
    Some(
        cpuid_hypervisor()
            .map(str::to_string)
            .unwrap_or_else(|| "unknown hypervisor".to_string()),
    )
}

/// The hostname alone (for labels), without gathering everything else.
pub fn hostname() -> String {
    let mut buf = [0 as libc::c_char; 256];
    // SAFETY: `buf` is valid and writable for its full length, which is passed.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr(), buf.len() - 1) };
    if rc != 0 {
        return String::new();
    }
    // SAFETY: the last byte was never written (len - 1 passed) and is 0, so the buffer
    // holds a NUL-terminated string.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists() {
        assert_eq!(
            parse_cpulist("0-3,6,8-9\n").unwrap(),
            vec![0, 1, 2, 3, 6, 8, 9]
        );
        assert_eq!(parse_cpulist("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("(null)\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse_cpulist("5").unwrap(), vec![5]);
        assert_eq!(parse_cpulist("0-7:2/4").unwrap(), vec![0, 1, 4, 5]);
        assert_eq!(parse_cpulist("3,1,1").unwrap(), vec![1, 3]);
        assert!(parse_cpulist("3-1").is_err());
        assert!(parse_cpulist("a").is_err());
        assert!(parse_cpulist("1,,2").is_err());
        assert!(parse_cpulist("0-99999999999").is_err());
        assert!(parse_cpulist("0-7:0/4").is_err());
    }

    const CPUINFO_X86: &str = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu vme hypervisor lahf_lm\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 7B13\n";
    const CPUINFO_ARM: &str = "processor\t: 0\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd\nCPU implementer\t: 0x41\n\nHardware\t: BCM2835\n";

    #[test]
    fn cpuinfo() {
        assert_eq!(
            parse_cpu_model(CPUINFO_X86).as_deref(),
            Some("AMD EPYC 7B13")
        );
        assert_eq!(parse_cpu_model(CPUINFO_ARM).as_deref(), Some("BCM2835"));
        assert_eq!(parse_cpu_model(""), None);
        assert!(cpuinfo_has_hypervisor(CPUINFO_X86));
        assert!(!cpuinfo_has_hypervisor(CPUINFO_ARM));
        assert!(!cpuinfo_has_hypervisor("flags : fpu hypervisorx\n"));
    }

    #[test]
    fn boot_params() {
        let cmdline = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 isolcpus=nohz,domain,2-3 nohz_full=2-3 rcu_nocbs=2-3 idle=poll processor.max_cstate=1 intel_idle.max_cstate=0 threadirqs quiet -- isolcpus=9\n";
        let p = parse_boot_params(cmdline);
        let expected: BTreeMap<String, String> = [
            ("idle", "poll"),
            ("intel_idle.max_cstate", "0"),
            ("isolcpus", "nohz,domain,2-3"),
            ("nohz_full", "2-3"),
            ("processor.max_cstate", "1"),
            ("rcu_nocbs", "2-3"),
            ("threadirqs", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(p, expected);
        assert!(parse_boot_params("").is_empty());
    }

    #[test]
    fn rt_and_preempt() {
        let rt_version = "#1 SMP PREEMPT_RT Thu Jan 1 00:00:00 UTC 2025";
        let dyn_version = "#1 SMP PREEMPT_DYNAMIC @0";
        assert!(is_rt(None, rt_version));
        assert!(is_rt(Some("1\n"), "#1 SMP"));
        assert!(!is_rt(None, dyn_version));
        assert!(!is_rt(Some("0\n"), dyn_version));
        assert_eq!(parse_preempt(None, rt_version, None).as_deref(), Some("rt"));
        assert_eq!(
            parse_preempt(Some("none voluntary (full) lazy\n"), dyn_version, None).as_deref(),
            Some("full")
        );
        assert_eq!(
            parse_preempt(None, dyn_version, Some("voluntary")).as_deref(),
            Some("voluntary")
        );
        assert_eq!(
            parse_preempt(None, dyn_version, None).as_deref(),
            Some("dynamic")
        );
        assert_eq!(
            parse_preempt(None, "#1 SMP PREEMPT Mon", None).as_deref(),
            Some("full")
        );
        assert_eq!(parse_preempt(None, "#1 SMP Mon", None), None);
    }

    #[test]
    fn governors() {
        assert_eq!(summarize_governors(&[]), "unknown (no cpufreq)");
        assert_eq!(
            summarize_governors(&[(0, "performance".into()), (1, "performance".into())]),
            "performance"
        );
        assert_eq!(
            summarize_governors(&[(0, "performance".into()), (1, "powersave".into())]),
            "cpu0=performance, cpu1=powersave"
        );
    }

    #[test]
    fn sync_state() {
        let s = sync_from_timex(
            libc::TIME_ERROR,
            libc::STA_UNSYNC | libc::STA_NANO,
            16_000_000,
            16_000_000,
            -250,
            0,
            vec![],
        );
        assert!(!s.synchronized);
        assert_eq!(s.state, "TIME_ERROR");
        assert_eq!(s.status, vec!["STA_UNSYNC", "STA_NANO"]);
        assert_eq!(s.maxerror_ns, 16_000_000_000);
        assert_eq!(s.offset_ns, -250);
        let ok = sync_from_timex(
            libc::TIME_OK,
            libc::STA_PLL,
            12,
            3,
            7,
            37,
            vec!["chronyd".into()],
        );
        assert!(ok.synchronized);
        assert_eq!(ok.esterror_ns, 3_000);
        assert_eq!(ok.offset_ns, 7_000);
        assert_eq!(ok.tai_offset_s, 37);
        assert_eq!(time_state_name(42), "unknown (42)");
    }

    #[test]
    fn daemons() {
        assert_eq!(
            sync_daemons([
                "bash\n",
                "ptp4l\n",
                "phc2sys\n",
                "ptp4l\n",
                "systemd-timesyn\n",
                "ntpdate\n"
            ]),
            vec!["phc2sys", "ptp4l", "systemd-timesyncd"]
        );
    }

    #[test]
    fn hypervisor_signatures() {
        assert_eq!(hypervisor_name(b"KVMKVMKVM\0\0\0"), Some("kvm"));
        assert_eq!(hypervisor_name(b"Microsoft Hv"), Some("hyper-v"));
        assert_eq!(hypervisor_name(&[0; 12]), None);
    }

    #[test]
    fn collect_runs_and_round_trips() {
        let h = collect();
        assert_eq!(h.cores, online_cpus().len());
        assert!(h.cores >= 1);
        assert!(!h.kernel.release.is_empty());
        assert_eq!(h.hostname, hostname());
        let json = serde_json::to_string(&h).unwrap();
        let back: HostFacts = serde_json::from_str(&json).unwrap();
        assert_eq!(back, h);
    }
}
