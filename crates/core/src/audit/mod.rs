//! The host audit: what on this host adds latency, judged from captured text.
//!
//! The Linux layer reads `/proc`, `/sys`, `adjtimex`, the ethtool coalescing settings
//! and the process table into a [`Snapshot`] and changes nothing; everything that
//! *decides* lives here and is a pure function of the snapshot and the user's
//! [`Intent`] (which CPUs are for real-time threads, which NIC carries the
//! time-critical traffic). Tests run the judgement on captured fixtures of real hosts.
//!
//! - [`audit()`]: every check with a [`Verdict`], the evidence and the exact command or
//!   boot parameter that would fix it;
//! - [`plan::plan`]: the run-time changes `lockstep host apply` would make (only what
//!   can be undone: IRQ affinity, governor, RT throttling, NIC coalescing);
//! - [`cpulist`]: the kernel's CPU-list syntax (`0-3,6`), both ways.

mod checks;
pub mod cpulist;
pub mod interrupts;
pub mod plan;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use checks::audit;

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Tuned as the host audit recommends.
    Pass,
    /// Adds latency or jitter in some cases, or the tuning is incomplete.
    Warn,
    /// Adds latency or jitter to the time-critical path; the fix is given.
    Fail,
    /// Could not be read (the evidence says why).
    Unknown,
}

impl Verdict {
    /// Fixed-width tag for the human checklist.
    pub fn tag(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Fail => "FAIL",
            Verdict::Unknown => " ?  ",
        }
    }
}

/// One item of the audit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Stable identifier, e.g. `boot.isolcpus`, `nic.coalescing.eth0`.
    pub id: String,
    /// What is checked, for humans.
    pub title: String,
    pub verdict: Verdict,
    /// What was found (values read, and from where).
    pub evidence: String,
    /// The command or boot parameter that would fix it (none when it passes).
    pub fix: Option<String>,
}

/// Where the NIC's interrupts should go when real-time CPUs are given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NicIrqs {
    /// Like every other interrupt: on the housekeeping CPUs, away from the RT CPUs.
    #[default]
    Housekeeping,
    /// On the RT CPUs, where the receiving thread runs (toussaint2018 §IV-A: spares a
    /// wake-up and an inter-processor interrupt).
    Rt,
}

impl std::str::FromStr for NicIrqs {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "housekeeping" => Ok(NicIrqs::Housekeeping),
            "rt" => Ok(NicIrqs::Rt),
            _ => Err(format!("expected housekeeping or rt, got \"{s}\"")),
        }
    }
}

/// What the host is meant to do; the layout checks judge against it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Intent {
    /// The CPUs reserved for real-time threads (`--rt-cpus`).
    pub rt_cpus: Option<Vec<usize>>,
    /// The NIC of the time-critical traffic (`--nic`).
    pub nic: Option<String>,
    /// Where that NIC's interrupts belong.
    pub nic_irqs: NicIrqs,
}

/// Counts per verdict.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub pass: usize,
    pub warn: usize,
    pub fail: usize,
    pub unknown: usize,
}

/// The audit of one host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    pub intent: Intent,
    pub counts: Counts,
    pub checks: Vec<Check>,
    /// Boot parameters that the failing or warning boot checks ask for, as one string
    /// to add to the kernel command line (lockstep never edits it).
    pub boot_params_to_add: Vec<String>,
    /// Files and facts that could not be read, and why.
    pub unreadable: Vec<String>,
}

impl Report {
    /// The check with this id.
    pub fn get(&self, id: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.id == id)
    }
}

/// A process: its PID and `comm`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proc {
    pub pid: u32,
    pub comm: String,
}

/// The raw `adjtimex` values the sync check needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timex {
    /// Return value (`TIME_OK` = 0 … `TIME_ERROR` = 5).
    pub state: i32,
    /// `STA_*` bits.
    pub status: i32,
    pub maxerror_us: i64,
    pub esterror_us: i64,
}

/// `STA_UNSYNC` of `<linux/timex.h>`.
pub const STA_UNSYNC: i32 = 0x0040;
/// `TIME_ERROR` of `<linux/timex.h>`.
pub const TIME_ERROR: i32 = 5;

/// The interrupt-coalescing settings that matter for latency (`ethtool -c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coalesce {
    /// Delay a receive interrupt by up to this many µs (`rx-usecs`).
    pub rx_usecs: u32,
    /// ... or until this many frames arrived (`rx-frames`).
    pub rx_max_frames: u32,
    pub tx_usecs: u32,
    pub tx_max_frames: u32,
    /// The driver tunes `rx-usecs` itself (`adaptive-rx`).
    pub adaptive_rx: bool,
    pub adaptive_tx: bool,
}

impl Coalesce {
    /// An interrupt per frame, no adaptation ("coalescing off").
    pub const OFF: Coalesce = Coalesce {
        rx_usecs: 0,
        rx_max_frames: 1,
        tx_usecs: 0,
        tx_max_frames: 1,
        adaptive_rx: false,
        adaptive_tx: false,
    };

    /// Receive interrupts are not delayed: no adaptation, `rx-usecs` 0 and at most one
    /// frame per interrupt (0 frames means "not used" for drivers that time only).
    pub fn rx_off(&self) -> bool {
        !self.adaptive_rx && self.rx_usecs == 0 && self.rx_max_frames <= 1
    }

    /// `ethtool -c` wording.
    pub fn describe(&self) -> String {
        format!(
            "adaptive-rx {} rx-usecs {} rx-frames {} adaptive-tx {} tx-usecs {} tx-frames {}",
            on_off(self.adaptive_rx),
            self.rx_usecs,
            self.rx_max_frames,
            on_off(self.adaptive_tx),
            self.tx_usecs,
            self.tx_max_frames
        )
    }
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// A network interface backed by a device (virtual interfaces without a device are
/// listed only when named with `--nic`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Nic {
    pub name: String,
    /// The device behind it (basename of `/sys/class/net/IF/device`: a PCI address
    /// or `virtio2`); none for veth, bridges, loopback.
    pub device: Option<String>,
    /// Its MSI interrupts (`device/msi_irqs`, for virtio the parent PCI device's).
    pub msi_irqs: Vec<u32>,
    /// `ETHTOOL_GCOALESCE`, when the driver has it.
    pub coalesce: Option<Coalesce>,
    /// The driver has no interrupt coalescing (`EOPNOTSUPP`).
    pub coalesce_unsupported: bool,
    /// Why the coalescing could not be read otherwise.
    pub coalesce_error: Option<String>,
}

/// What is not a plain text file: `uname`, the process table, `adjtimex`, NICs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Facts {
    pub uname_release: String,
    pub uname_version: String,
    /// The hypervisor, when virtualized.
    pub hypervisor: Option<String>,
    /// Running processes (`/proc/PID/comm`); `None` when `/proc` could not be listed.
    pub processes: Option<Vec<Proc>>,
    /// The `/dev/cpu_dma_latency` value (µs; 2000000000 = nobody asks), when readable
    /// (the device is root-only).
    pub dma_latency_us: Option<i64>,
    /// Processes with `/dev/cpu_dma_latency` open (found through `/proc/*/fd`).
    pub dma_latency_holders: Vec<Proc>,
    /// Processes whose open files could not be inspected (other users' without root).
    pub dma_latency_unscanned: usize,
    pub timex: Option<Timex>,
    /// NICs with a device, plus the one named by `--nic`.
    pub nics: Vec<Nic>,
}

/// Everything the audit judges: text files by absolute path, the ones that could not
/// be read, and the other facts. A path absent from both maps does not exist.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    pub files: BTreeMap<String, String>,
    /// Path → why it could not be read.
    pub unreadable: BTreeMap<String, String>,
    pub facts: Facts,
}

/// What reading a path gave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Read<'a> {
    Text(&'a str),
    Missing,
    Unreadable(&'a str),
}

impl Snapshot {
    pub fn read(&self, path: &str) -> Read<'_> {
        if let Some(t) = self.files.get(path) {
            Read::Text(t)
        } else if let Some(e) = self.unreadable.get(path) {
            Read::Unreadable(e)
        } else {
            Read::Missing
        }
    }

    /// The trimmed text of a file, if it was read.
    pub fn text(&self, path: &str) -> Option<&str> {
        self.files.get(path).map(|s| s.trim())
    }

    /// The online CPUs (`/sys/devices/system/cpu/online`), empty when unknown.
    pub fn online_cpus(&self) -> Vec<usize> {
        self.text(paths::CPU_ONLINE)
            .and_then(|t| cpulist::parse(t).ok())
            .unwrap_or_default()
    }
}

/// The paths the audit reads. The collector reads the fixed ones, then the per-CPU
/// and per-IRQ ones for the CPUs and IRQs it found.
pub mod paths {
    pub const CMDLINE: &str = "/proc/cmdline";
    pub const REALTIME: &str = "/sys/kernel/realtime";
    pub const CPU_ONLINE: &str = "/sys/devices/system/cpu/online";
    pub const ISOLATED: &str = "/sys/devices/system/cpu/isolated";
    pub const NOHZ_FULL: &str = "/sys/devices/system/cpu/nohz_full";
    pub const SMT_CONTROL: &str = "/sys/devices/system/cpu/smt/control";
    pub const SMT_ACTIVE: &str = "/sys/devices/system/cpu/smt/active";
    pub const CPUIDLE_DRIVER: &str = "/sys/devices/system/cpu/cpuidle/current_driver";
    pub const PROCESSOR_MAX_CSTATE: &str = "/sys/module/processor/parameters/max_cstate";
    pub const INTEL_IDLE_MAX_CSTATE: &str = "/sys/module/intel_idle/parameters/max_cstate";
    pub const INTERRUPTS: &str = "/proc/interrupts";
    pub const RT_RUNTIME: &str = "/proc/sys/kernel/sched_rt_runtime_us";
    pub const RT_PERIOD: &str = "/proc/sys/kernel/sched_rt_period_us";
    pub const CLOCKSOURCE: &str =
        "/sys/devices/system/clocksource/clocksource0/current_clocksource";
    pub const CLOCKSOURCES: &str =
        "/sys/devices/system/clocksource/clocksource0/available_clocksource";
    pub const THP_ENABLED: &str = "/sys/kernel/mm/transparent_hugepage/enabled";
    pub const THP_DEFRAG: &str = "/sys/kernel/mm/transparent_hugepage/defrag";
    pub const BOOT_ID: &str = "/proc/sys/kernel/random/boot_id";
    /// The preemption model of a PREEMPT_DYNAMIC kernel (debugfs, root only).
    pub const PREEMPT: &str = "/sys/kernel/debug/sched/preempt";

    /// Files read once per system.
    pub const FIXED: [&str; 18] = [
        CMDLINE,
        REALTIME,
        PREEMPT,
        CPU_ONLINE,
        ISOLATED,
        NOHZ_FULL,
        SMT_CONTROL,
        SMT_ACTIVE,
        CPUIDLE_DRIVER,
        PROCESSOR_MAX_CSTATE,
        INTEL_IDLE_MAX_CSTATE,
        INTERRUPTS,
        RT_RUNTIME,
        RT_PERIOD,
        CLOCKSOURCE,
        CLOCKSOURCES,
        THP_ENABLED,
        THP_DEFRAG,
    ];

    pub fn governor(cpu: usize) -> String {
        format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_governor")
    }
    pub fn governors_available(cpu: usize) -> String {
        format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_available_governors")
    }
    pub fn siblings(cpu: usize) -> String {
        format!("/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    }
    /// Directory of one cpuidle state; holds `name`, `latency` (µs) and `disable`.
    pub fn idle_state(cpu: usize, state: usize) -> String {
        format!("/sys/devices/system/cpu/cpu{cpu}/cpuidle/state{state}")
    }
    pub fn irq_affinity(irq: u32) -> String {
        format!("/proc/irq/{irq}/smp_affinity_list")
    }
    /// Per-CPU files read for each online CPU.
    pub fn per_cpu(cpu: usize) -> [String; 3] {
        [governor(cpu), governors_available(cpu), siblings(cpu)]
    }
    /// Largest number of cpuidle states the collector looks for per CPU.
    pub const MAX_IDLE_STATES: usize = 16;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Fuzz smoke (the stable twin of `fuzz/fuzz_targets/audit_text.rs`): whatever
    /// text the kernel files hold, the audit and the plan never panic and every check
    /// carries evidence.
    fn snapshot_of(texts: &[String]) -> Snapshot {
        let mut s = Snapshot::default();
        let mut paths_: Vec<String> = paths::FIXED.iter().map(|p| p.to_string()).collect();
        for c in 0..3 {
            paths_.extend(paths::per_cpu(c));
            paths_.push(format!("{}/name", paths::idle_state(c, 0)));
            paths_.push(format!("{}/latency", paths::idle_state(c, 0)));
        }
        for irq in [0, 1, 30, 31] {
            paths_.push(paths::irq_affinity(irq));
        }
        for (p, t) in paths_.into_iter().zip(texts.iter().cycle()) {
            s.files.insert(p, t.clone());
        }
        s.files.insert(paths::CPU_ONLINE.into(), "0-2\n".into());
        s.facts.nics.push(Nic {
            name: "eth0".into(),
            device: Some("virtio0".into()),
            ..Nic::default()
        });
        s
    }

    proptest! {
        #![proptest_config(crate::fuzz_config(256))]

        #[test]
        fn audit_never_panics(texts in proptest::collection::vec(
            prop_oneof![
                "[0-9,:/ -]{0,12}",
                "\\PC{0,40}",
                Just("  CPU0 CPU1 CPU2\n 30: 1 2 3 PCI-MSI 0-edge virtio0-input.0\n 31: x\n".to_string()),
                Just("always [madvise] never".to_string()),
                Just("-1".to_string()),
            ],
            1..8,
        )) {
            let s = snapshot_of(&texts);
            for intent in [
                Intent::default(),
                Intent { rt_cpus: Some(vec![1]), nic: Some("eth0".into()), nic_irqs: NicIrqs::Rt },
                Intent { rt_cpus: Some(vec![0, 2]), nic: None, nic_irqs: NicIrqs::Housekeeping },
            ] {
                let r = audit(&s, &intent);
                prop_assert!(r.checks.iter().all(|c| !c.evidence.is_empty()));
                if let Some(rt) = intent.rt_cpus {
                    let _ = plan::plan(&s, &plan::Request { rt_cpus: rt, nic: intent.nic, nic_irqs: intent.nic_irqs });
                }
            }
        }
    }
}
