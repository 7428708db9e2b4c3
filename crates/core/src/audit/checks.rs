//! The judgement: one function per tuning item, each from the snapshot to a
//! [`Check`]. Rules are documented on each function; tests pin them on fixtures.

use std::collections::BTreeMap;

use super::interrupts::{self, IrqLine};
use super::{
    cpulist, paths, Check, Counts, Intent, Nic, NicIrqs, Read, Report, Snapshot, Verdict,
    STA_UNSYNC, TIME_ERROR,
};

/// `/dev/cpu_dma_latency` when nobody asks for anything (`PM_QOS_DEFAULT_VALUE`).
const DMA_LATENCY_DEFAULT_US: i64 = 2_000_000_000;

/// Runs every check. With `intent.rt_cpus` the isolation, SMT, C-state, governor and
/// IRQ checks judge those CPUs (and the layout); without, the whole host.
pub fn audit(s: &Snapshot, intent: &Intent) -> Report {
    let cx = Cx::new(s, intent);
    let mut checks = vec![
        cx.preempt_rt(),
        cx.isolcpus(),
        cx.nohz_full(),
        cx.rcu_nocbs(),
        cx.rcu_nocb_poll(),
        cx.idle_poll(),
        cx.processor_max_cstate(),
        cx.intel_idle_max_cstate(),
        cx.smt(),
        cx.governor(),
        cx.cstates(),
        cx.dma_latency(),
        cx.irqbalance(),
    ];
    checks.extend(cx.nic_checks());
    if let Some(c) = cx.other_irqs() {
        checks.push(c);
    }
    checks.extend([
        cx.rt_throttling(),
        cx.clocksource(),
        cx.thp(),
        cx.sync(),
        cx.hypervisor(),
    ]);
    let mut counts = Counts::default();
    for c in &checks {
        match c.verdict {
            Verdict::Pass => counts.pass += 1,
            Verdict::Warn => counts.warn += 1,
            Verdict::Fail => counts.fail += 1,
            Verdict::Unknown => counts.unknown += 1,
        }
    }
    let boot_params_to_add = cx.boot_params_to_add(&checks);
    let mut unreadable: Vec<String> = s
        .unreadable
        .iter()
        .map(|(p, e)| format!("{p}: {e}"))
        .collect();
    if s.facts.dma_latency_unscanned > 0 {
        unreadable.push(format!(
            "/proc/*/fd of {} processes (holders of /dev/cpu_dma_latency among them are not listed): permission denied",
            s.facts.dma_latency_unscanned
        ));
    }
    Report {
        intent: intent.clone(),
        counts,
        checks,
        boot_params_to_add,
        unreadable,
    }
}

/// Boot parameters from a kernel command line (everything after `--` goes to init).
/// A flag without a value maps to an empty string; a repeated one keeps the last.
pub fn boot_params(cmdline: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for word in cmdline.split_whitespace() {
        if word == "--" {
            break;
        }
        let (k, v) = word.split_once('=').unwrap_or((word, ""));
        out.insert(k.to_string(), v.trim_matches('"').to_string());
    }
    out
}

/// The CPUs of an `isolcpus=` value: flags (`nohz`, `domain`, `managed_irq`) before the
/// list are skipped.
fn isolcpus_list(v: &str) -> Option<Vec<usize>> {
    let list = v
        .split(',')
        .skip_while(|p| p.chars().next().is_some_and(|c| c.is_ascii_alphabetic()))
        .collect::<Vec<_>>()
        .join(",");
    cpulist::parse(&list).ok()
}

struct Cx<'a> {
    s: &'a Snapshot,
    intent: &'a Intent,
    params: Option<BTreeMap<String, String>>,
    /// Sorted, without duplicates (a parsed cpulist): look CPUs up with
    /// [`Cx::is_online`].
    online: Vec<usize>,
    /// The CPUs judged: the RT CPUs, else every online CPU.
    scope: Vec<usize>,
    irqs: Vec<IrqLine>,
}

fn check(id: &str, title: &str, verdict: Verdict, evidence: String, fix: Option<String>) -> Check {
    Check {
        id: id.to_string(),
        title: title.to_string(),
        verdict,
        evidence,
        fix: if verdict == Verdict::Pass { None } else { fix },
    }
}

fn unknown(id: &str, title: &str, why: String) -> Check {
    check(id, title, Verdict::Unknown, why, None)
}

fn list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        "none".to_string()
    } else {
        cpulist::format(cpus)
    }
}

fn subset(a: &[usize], b: &[usize]) -> bool {
    a.iter().all(|x| b.contains(x))
}

impl<'a> Cx<'a> {
    fn new(s: &'a Snapshot, intent: &'a Intent) -> Self {
        let params = s.files.get(paths::CMDLINE).map(|c| boot_params(c));
        let online = s.online_cpus();
        let scope = intent.rt_cpus.clone().unwrap_or_else(|| online.clone());
        let irqs = s
            .files
            .get(paths::INTERRUPTS)
            .map(|t| interrupts::parse(t))
            .unwrap_or_default();
        Cx {
            s,
            intent,
            params,
            online,
            scope,
            irqs,
        }
    }

    /// Whether `cpu` is online: a binary search, since a sibling list checked CPU by
    /// CPU against a scan of the online list took seconds on a (fuzzed) host of
    /// 50 000 CPUs.
    fn is_online(&self, cpu: usize) -> bool {
        self.online.binary_search(&cpu).is_ok()
    }

    /// Why a file gave nothing: the read error, or that it does not exist.
    fn why(&self, path: &str) -> String {
        match self.s.read(path) {
            Read::Unreadable(e) => format!("{path}: {e}"),
            Read::Missing => format!("{path} does not exist"),
            Read::Text(_) => format!("{path}: not understood"),
        }
    }

    fn param(&self, key: &str) -> Option<&str> {
        self.params
            .as_ref()
            .and_then(|p| p.get(key))
            .map(String::as_str)
    }

    fn rt_list(&self) -> String {
        match &self.intent.rt_cpus {
            Some(c) => cpulist::format(c),
            None => "<RT CPUs>".to_string(),
        }
    }

    /// Pass: PREEMPT_RT. Warn: a fully preemptible (or dynamic) kernel. Fail: none or
    /// voluntary preemption.
    fn preempt_rt(&self) -> Check {
        const ID: &str = "kernel.preempt_rt";
        const T: &str = "real-time kernel (PREEMPT_RT)";
        let v = &self.s.facts.uname_version;
        let words: Vec<&str> = v.split_whitespace().collect();
        let sys_rt = self.s.text(paths::REALTIME) == Some("1");
        let fix = Some("boot a PREEMPT_RT kernel (Debian/Ubuntu: apt install linux-image-rt-amd64, or a kernel ≥ 6.12 built with CONFIG_PREEMPT_RT=y)".to_string());
        let ev = format!("{} {v}", self.s.facts.uname_release);
        if sys_rt || words.contains(&"PREEMPT_RT") {
            return check(ID, T, Verdict::Pass, format!("{ev} (PREEMPT_RT)"), None);
        }
        if v.is_empty() {
            return unknown(ID, T, "uname could not be read".to_string());
        }
        if words.contains(&"PREEMPT_DYNAMIC") {
            // debugfs shows the model in parentheses: `none voluntary (full) lazy`.
            let debugfs = self.s.text(paths::PREEMPT).and_then(|t| {
                t.split_whitespace()
                    .find_map(|w| w.strip_prefix('(').and_then(|w| w.strip_suffix(')')))
            });
            let (model, src) = match (debugfs, self.param("preempt")) {
                (Some(m), _) => (Some(m), paths::PREEMPT.to_string()),
                (None, Some(m)) if !m.is_empty() => (Some(m), "/proc/cmdline preempt=".to_string()),
                (None, _) => (
                    None,
                    format!("{}; no preempt= in /proc/cmdline", self.why(paths::PREEMPT)),
                ),
            };
            let verdict = match model {
                Some("none") | Some("voluntary") => Verdict::Fail,
                _ => Verdict::Warn,
            };
            return check(
                ID,
                T,
                verdict,
                format!(
                    "{ev}: not PREEMPT_RT; preemption model {} ({src})",
                    model.unwrap_or("unknown (the build's default)")
                ),
                fix,
            );
        }
        if words.contains(&"PREEMPT") || words.contains(&"PREEMPT_LAZY") {
            return check(
                ID,
                T,
                Verdict::Warn,
                format!("{ev}: fully preemptible, not PREEMPT_RT"),
                fix,
            );
        }
        check(
            ID,
            T,
            Verdict::Fail,
            format!("{ev}: no kernel preemption (server or voluntary model)"),
            fix,
        )
    }

    /// A CPU set from a sysfs file (falling back to the boot parameter): with RT CPUs,
    /// pass when it covers them and fail otherwise; without, pass when it is not empty
    /// and warn when it is.
    fn cpu_set_check(
        &self,
        id: &str,
        title: &str,
        found: Result<(Vec<usize>, String), String>,
        param: &str,
        what: &str,
    ) -> Check {
        let fix = Some(format!("boot parameter {param}={}", self.rt_list()));
        let (cpus, source) = match found {
            Ok(x) => x,
            Err(why) => return unknown(id, title, why),
        };
        match &self.intent.rt_cpus {
            Some(rt) => {
                let missing: Vec<usize> =
                    rt.iter().copied().filter(|c| !cpus.contains(c)).collect();
                if missing.is_empty() {
                    check(
                        id,
                        title,
                        Verdict::Pass,
                        format!(
                            "{what} CPUs {} ({source}) cover the RT CPUs {}",
                            list(&cpus),
                            list(rt)
                        ),
                        None,
                    )
                } else {
                    check(
                        id,
                        title,
                        Verdict::Fail,
                        format!(
                            "{what} CPUs {} ({source}); RT CPUs {} not covered",
                            list(&cpus),
                            list(&missing)
                        ),
                        fix,
                    )
                }
            }
            None if cpus.is_empty() => check(
                id,
                title,
                Verdict::Warn,
                format!("no {what} CPU ({source})"),
                fix,
            ),
            None => check(
                id,
                title,
                Verdict::Pass,
                format!("{what} CPUs {} ({source})", list(&cpus)),
                None,
            ),
        }
    }

    fn sysfs_or_param(
        &self,
        path: &str,
        param: &str,
        parse: fn(&str) -> Option<Vec<usize>>,
    ) -> Result<(Vec<usize>, String), String> {
        if let Some(t) = self.s.text(path) {
            return cpulist::parse(t)
                .map(|c| (c, path.to_string()))
                .map_err(|e| format!("{path}: {e}"));
        }
        match (&self.params, self.param(param)) {
            (Some(_), Some(v)) => parse(v)
                .map(|c| (c, format!("/proc/cmdline {param}={v}")))
                .ok_or_else(|| format!("/proc/cmdline: {param}={v} not understood")),
            (Some(_), None) => Ok((
                Vec::new(),
                format!("{} and no {param}= in /proc/cmdline", self.why(path)),
            )),
            (None, _) => Err(format!("{}; {}", self.why(path), self.why(paths::CMDLINE))),
        }
    }

    /// `isolcpus`: the scheduler keeps other threads off these CPUs.
    fn isolcpus(&self) -> Check {
        let found = self.sysfs_or_param(paths::ISOLATED, "isolcpus", isolcpus_list);
        self.cpu_set_check(
            "boot.isolcpus",
            "CPU isolation (isolcpus)",
            found,
            "isolcpus",
            "isolated",
        )
    }

    /// `nohz_full`: no periodic tick on a CPU with one runnable thread.
    fn nohz_full(&self) -> Check {
        let found = self.sysfs_or_param(paths::NOHZ_FULL, "nohz_full", |v| cpulist::parse(v).ok());
        self.cpu_set_check(
            "boot.nohz_full",
            "tickless CPUs (nohz_full)",
            found,
            "nohz_full",
            "nohz_full",
        )
    }

    /// `rcu_nocbs`: RCU callbacks run elsewhere. Only the boot parameter shows it; a
    /// bare `rcu_nocbs` offloads every CPU.
    fn rcu_nocbs(&self) -> Check {
        let found = match (&self.params, self.param("rcu_nocbs")) {
            (None, _) => Err(self.why(paths::CMDLINE)),
            (Some(_), None) => Ok((Vec::new(), "no rcu_nocbs= in /proc/cmdline".to_string())),
            (Some(_), Some("")) => Ok((
                self.online.clone(),
                "/proc/cmdline rcu_nocbs (all CPUs)".to_string(),
            )),
            (Some(_), Some(v)) => cpulist::parse(v)
                .map(|c| (c, format!("/proc/cmdline rcu_nocbs={v}")))
                .map_err(|e| format!("/proc/cmdline rcu_nocbs: {e}")),
        };
        self.cpu_set_check(
            "boot.rcu_nocbs",
            "RCU callbacks offloaded (rcu_nocbs)",
            found,
            "rcu_nocbs",
            "RCU-offloaded",
        )
    }

    /// A boot flag that should be present: pass when it is, else `absent` verdict.
    fn flag(
        &self,
        id: &str,
        title: &str,
        key: &str,
        want: &str,
        absent: Verdict,
        extra_fix: &str,
    ) -> Check {
        let Some(p) = &self.params else {
            return unknown(id, title, self.why(paths::CMDLINE));
        };
        let shown = if want.is_empty() {
            key.to_string()
        } else {
            format!("{key}={want}")
        };
        match p.get(key) {
            Some(v) if v == want => check(
                id,
                title,
                Verdict::Pass,
                format!("{shown} in /proc/cmdline"),
                None,
            ),
            other => check(
                id,
                title,
                absent,
                match other {
                    Some(v) => format!("/proc/cmdline has {key}={v}"),
                    None => format!("no {shown} in /proc/cmdline"),
                },
                Some(format!("boot parameter {shown}{extra_fix}")),
            ),
        }
    }

    fn rcu_nocb_poll(&self) -> Check {
        self.flag(
            "boot.rcu_nocb_poll",
            "RCU offload threads poll (rcu_nocb_poll)",
            "rcu_nocb_poll",
            "",
            Verdict::Warn,
            "",
        )
    }

    /// `idle=poll`: CPUs spin instead of halting (no wake-up from an idle state).
    fn idle_poll(&self) -> Check {
        self.flag(
            "boot.idle_poll",
            "polling idle loop (idle=poll)",
            "idle",
            "poll",
            Verdict::Warn,
            " (at run time: hold /dev/cpu_dma_latency at 0 with `lockstep host hold-latency -- CMD`)",
        )
    }

    fn cpuidle_driver(&self) -> Option<&str> {
        self.s.text(paths::CPUIDLE_DRIVER)
    }

    /// A `max_cstate` module parameter: pass when at most `max`, or when its driver is
    /// not the cpuidle driver in use (then it has no effect), else warn.
    fn max_cstate(
        &self,
        id: &str,
        title: &str,
        path: &str,
        key: &str,
        driver: &str,
        max: i64,
    ) -> Check {
        let fix = Some(format!("boot parameter {key}={max}"));
        let current = self.cpuidle_driver();
        let value = self
            .s
            .text(path)
            .map(|t| (t.to_string(), path.to_string()))
            .or_else(|| {
                self.param(key)
                    .map(|v| (v.to_string(), format!("/proc/cmdline {key}")))
            });
        let in_use = current == Some(driver);
        match value {
            Some((v, src)) => match v.parse::<i64>() {
                Ok(n) if n <= max => check(id, title, Verdict::Pass, format!("{key} = {n} ({src})"), None),
                Ok(n) if !in_use => check(
                    id,
                    title,
                    Verdict::Pass,
                    format!(
                        "{key} = {n} ({src}), but the cpuidle driver is {}, not {driver}: no effect",
                        current.unwrap_or("none")
                    ),
                    None,
                ),
                Ok(n) => check(
                    id,
                    title,
                    Verdict::Warn,
                    format!("{key} = {n} ({src}); {driver} is the cpuidle driver"),
                    fix,
                ),
                Err(_) => unknown(id, title, format!("{src}: \"{v}\" is not a number")),
            },
            None if !in_use => check(
                id,
                title,
                Verdict::Pass,
                format!("{driver} not in use (cpuidle driver {})", current.unwrap_or("unknown")),
                None,
            ),
            None => unknown(id, title, self.why(path)),
        }
    }

    fn processor_max_cstate(&self) -> Check {
        self.max_cstate(
            "boot.processor_max_cstate",
            "ACPI C-states limited (processor.max_cstate)",
            paths::PROCESSOR_MAX_CSTATE,
            "processor.max_cstate",
            "acpi_idle",
            1,
        )
    }

    fn intel_idle_max_cstate(&self) -> Check {
        self.max_cstate(
            "boot.intel_idle_max_cstate",
            "intel_idle C-states off (intel_idle.max_cstate)",
            paths::INTEL_IDLE_MAX_CSTATE,
            "intel_idle.max_cstate",
            "intel_idle",
            0,
        )
    }

    /// SMT: pass when off or absent; with RT CPUs, fail when one has an online sibling
    /// thread (it shares the core's pipeline and caches); without, warn when active.
    fn smt(&self) -> Check {
        const ID: &str = "cpu.smt";
        const T: &str = "simultaneous multithreading (SMT)";
        let fix = Some("echo off > /sys/devices/system/cpu/smt/control (run time; offlines the sibling threads) or boot parameter nosmt".to_string());
        let control = self.s.text(paths::SMT_CONTROL);
        let active = self.s.text(paths::SMT_ACTIVE);
        let mut shared = Vec::new();
        let mut read_any = false;
        for &cpu in &self.scope {
            if let Some(t) = self.s.text(&paths::siblings(cpu)) {
                read_any = true;
                if let Ok(sib) = cpulist::parse(t) {
                    let others: Vec<usize> = sib
                        .into_iter()
                        .filter(|&c| c != cpu && self.is_online(c))
                        .collect();
                    if !others.is_empty() {
                        let mut group = others;
                        group.push(cpu);
                        let g = list(&group);
                        if !shared.contains(&g) {
                            shared.push(g);
                        }
                    }
                }
            }
        }
        let ev = format!(
            "smt/control {}, smt/active {}",
            control.unwrap_or("unread"),
            active.unwrap_or("unread")
        );
        if !shared.is_empty() {
            let verdict = if self.intent.rt_cpus.is_some() {
                Verdict::Fail
            } else {
                Verdict::Warn
            };
            return check(
                ID,
                T,
                verdict,
                format!("{ev}; threads sharing a core: {}", shared.join("; ")),
                fix,
            );
        }
        match (active, read_any) {
            (Some("1"), _) => check(ID, T, Verdict::Warn, ev, fix),
            (Some(_), _) | (None, true) => check(
                ID,
                T,
                Verdict::Pass,
                format!("{ev}; no CPU judged shares its core"),
                None,
            ),
            (None, false) => unknown(ID, T, self.why(paths::SMT_ACTIVE)),
        }
    }

    /// The cpufreq governor of the judged CPUs: pass when all are `performance`, fail
    /// otherwise; unknown without cpufreq (typical of a VM: nothing to set).
    fn governor(&self) -> Check {
        const ID: &str = "cpu.governor";
        const T: &str = "CPU frequency governor";
        let mut per: Vec<(usize, &str)> = Vec::new();
        let mut errors = Vec::new();
        for &cpu in &self.scope {
            let p = paths::governor(cpu);
            match self.s.read(&p) {
                Read::Text(t) => per.push((cpu, t.trim())),
                Read::Unreadable(e) => errors.push(format!("{p}: {e}")),
                Read::Missing => {}
            }
        }
        if per.is_empty() {
            return unknown(
                ID,
                T,
                if errors.is_empty() {
                    format!(
                        "no cpufreq on CPUs {} (no scaling_governor): the frequency is not controlled by this OS, typical of a VM",
                        list(&self.scope)
                    )
                } else {
                    errors.join("; ")
                },
            );
        }
        let slow: Vec<usize> = per
            .iter()
            .filter(|(_, g)| *g != "performance")
            .map(|(c, _)| *c)
            .collect();
        let ev = per
            .iter()
            .map(|(c, g)| format!("cpu{c} {g}"))
            .collect::<Vec<_>>()
            .join(", ");
        if slow.is_empty() {
            check(ID, T, Verdict::Pass, ev, None)
        } else {
            check(
                ID,
                T,
                Verdict::Fail,
                ev,
                Some(format!(
                    "for c in {}; do echo performance > /sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor; done (or lockstep host apply)",
                    slow.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(" ")
                )),
            )
        }
    }

    /// The enabled cpuidle states of a CPU: (name, exit latency µs).
    fn idle_states(&self, cpu: usize) -> Vec<(String, i64)> {
        let mut v = Vec::new();
        for k in 0..paths::MAX_IDLE_STATES {
            let dir = paths::idle_state(cpu, k);
            let Some(name) = self.s.text(&format!("{dir}/name")) else {
                break;
            };
            let lat = self
                .s
                .text(&format!("{dir}/latency"))
                .and_then(|t| t.parse::<i64>().ok())
                .unwrap_or(i64::MAX);
            let disabled = self.s.text(&format!("{dir}/disable")) == Some("1");
            if !disabled {
                v.push((name.to_string(), lat));
            }
        }
        v
    }

    /// C-states: which idle states the judged CPUs may enter given the
    /// `/dev/cpu_dma_latency` limit. Pass when only zero-latency states (POLL) remain
    /// or `idle=poll`; warn when a state with an exit latency is usable; unknown when
    /// nothing could be read.
    fn cstates(&self) -> Check {
        const ID: &str = "cpu.cstates";
        const T: &str = "idle states (C-states) the CPUs may enter";
        let fix = Some("hold /dev/cpu_dma_latency at 0 while measuring (lockstep host hold-latency -- CMD), or boot parameters idle=poll or processor.max_cstate=1 intel_idle.max_cstate=0".to_string());
        if self.param("idle") == Some("poll") {
            return check(
                ID,
                T,
                Verdict::Pass,
                "idle=poll: CPUs never leave the polling loop".to_string(),
                None,
            );
        }
        let limit = self.s.facts.dma_latency_us;
        let driver = self.cpuidle_driver().unwrap_or("unknown");
        let mut usable_any: Vec<(Vec<usize>, String)> = Vec::new();
        let mut read_any = false;
        for &cpu in &self.scope {
            let states = self.idle_states(cpu);
            if states.is_empty() {
                continue;
            }
            read_any = true;
            let deep: Vec<String> = states
                .iter()
                .filter(|(_, lat)| *lat > 0 && limit.is_none_or(|l| *lat <= l))
                .map(|(n, lat)| format!("{n} ({lat} us)"))
                .collect();
            if !deep.is_empty() {
                let d = deep.join(", ");
                match usable_any
                    .iter_mut()
                    .find(|(_, x): &&mut (Vec<usize>, String)| *x == d)
                {
                    Some((cpus, _)) => cpus.push(cpu),
                    None => usable_any.push((vec![cpu], d)),
                }
            }
        }
        let limit_ev = match limit {
            Some(DMA_LATENCY_DEFAULT_US) => "cpu_dma_latency not limited".to_string(),
            Some(l) => format!("cpu_dma_latency limited to {l} us"),
            None => "cpu_dma_latency unreadable (root only), so every enabled state is counted"
                .to_string(),
        };
        if !read_any {
            if driver == "none" {
                return check(
                    ID,
                    T,
                    Verdict::Warn,
                    "cpuidle driver none: idle CPUs halt (HLT/WFI) and take a wake-up on every interrupt".to_string(),
                    fix,
                );
            }
            return unknown(
                ID,
                T,
                format!(
                    "no cpuidle states readable for CPUs {} (driver {driver})",
                    list(&self.scope)
                ),
            );
        }
        if usable_any.is_empty() {
            check(
                ID,
                T,
                Verdict::Pass,
                format!("driver {driver}; {limit_ev}: only zero-latency states usable"),
                None,
            )
        } else {
            check(
                ID,
                T,
                Verdict::Warn,
                format!(
                    "driver {driver}; {limit_ev}; usable states with an exit latency: {}",
                    usable_any
                        .iter()
                        .map(|(cpus, d)| format!("CPUs {}: {d}", list(cpus)))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                fix,
            )
        }
    }

    /// `/dev/cpu_dma_latency`: pass when held at 0 (naming the holders), warn when
    /// not, unknown when unreadable (root only); the holders found are listed anyway.
    fn dma_latency(&self) -> Check {
        const ID: &str = "cpu.dma_latency";
        const T: &str = "/dev/cpu_dma_latency held at 0";
        let f = &self.s.facts;
        let holders = if f.dma_latency_holders.is_empty() && f.dma_latency_unscanned > 0 {
            "no inspectable process has it open".to_string()
        } else if f.dma_latency_holders.is_empty() {
            "no process has it open".to_string()
        } else {
            format!(
                "open in {}",
                f.dma_latency_holders
                    .iter()
                    .map(|p| format!("PID {} ({})", p.pid, p.comm))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let partial = if f.dma_latency_unscanned > 0 {
            format!(" ({} processes not inspectable)", f.dma_latency_unscanned)
        } else {
            String::new()
        };
        let fix = Some("lockstep host hold-latency -- CMD (holds it at 0 while CMD runs), or a probe's --dma-latency-zero".to_string());
        match f.dma_latency_us {
            None => unknown(
                ID,
                T,
                format!("{}; {holders}{partial}", self.why("/dev/cpu_dma_latency")),
            ),
            Some(0) => check(
                ID,
                T,
                Verdict::Pass,
                format!("0 us; {holders}{partial}"),
                None,
            ),
            Some(DMA_LATENCY_DEFAULT_US) => check(
                ID,
                T,
                Verdict::Warn,
                format!("not held (2000000000 = no request); {holders}{partial}"),
                fix,
            ),
            Some(v) => check(
                ID,
                T,
                Verdict::Warn,
                format!("{v} us; {holders}{partial}"),
                fix,
            ),
        }
    }

    fn running(&self, comm: &str) -> Option<Vec<u32>> {
        self.s.facts.processes.as_ref().map(|ps| {
            ps.iter()
                .filter(|p| p.comm.trim() == comm)
                .map(|p| p.pid)
                .collect()
        })
    }

    /// irqbalance moves interrupts around, undoing any affinity set by hand: fail
    /// with RT CPUs (it will move IRQs onto them), warn without.
    fn irqbalance(&self) -> Check {
        const ID: &str = "irq.irqbalance";
        const T: &str = "irqbalance not running";
        match self.running("irqbalance") {
            None => unknown(ID, T, "the process list (/proc) could not be read".to_string()),
            Some(p) if p.is_empty() => check(ID, T, Verdict::Pass, "not running".to_string(), None),
            Some(p) => check(
                ID,
                T,
                if self.intent.rt_cpus.is_some() { Verdict::Fail } else { Verdict::Warn },
                format!(
                    "running (PID {}): it rewrites IRQ affinities",
                    p.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
                ),
                Some(format!(
                    "systemctl stop irqbalance (or IRQBALANCE_BANNED_CPULIST={} in /etc/default/irqbalance)",
                    self.rt_list()
                )),
            ),
        }
    }

    /// The affinity of an IRQ, or why it is unknown.
    fn affinity(&self, irq: u32) -> Result<Vec<usize>, String> {
        let p = paths::irq_affinity(irq);
        match self.s.text(&p) {
            Some(t) => cpulist::parse(t).map_err(|e| format!("{p}: {e}")),
            None => Err(self.why(&p)),
        }
    }

    fn nics(&self) -> Vec<&Nic> {
        self.s
            .facts
            .nics
            .iter()
            .filter(|n| match &self.intent.nic {
                Some(want) => &n.name == want,
                None => n.device.is_some(),
            })
            .collect()
    }

    /// Interrupt affinity and coalescing of each NIC.
    fn nic_checks(&self) -> Vec<Check> {
        let nics = self.nics();
        if nics.is_empty() {
            let why = match &self.intent.nic {
                Some(n) => format!("interface {n} not found"),
                None => "no interface backed by a device (only virtual ones); name one with --nic"
                    .to_string(),
            };
            return vec![unknown("nic", "NIC interrupts and coalescing", why)];
        }
        let mut out = Vec::new();
        for nic in nics {
            out.push(self.nic_affinity(nic));
            out.push(self.coalescing(nic));
        }
        out
    }

    /// Where a NIC's interrupts may be delivered. With RT CPUs: in housekeeping mode,
    /// fail if one may land on an RT CPU; in `rt` mode, fail if one may land outside
    /// them. Without RT CPUs: pass when each is pinned to one CPU, warn when it may
    /// move between several.
    fn nic_affinity(&self, nic: &Nic) -> Check {
        let id = format!("nic.irq_affinity.{}", nic.name);
        let title = format!("{} interrupt affinity", nic.name);
        let irqs = interrupts::nic_irqs(nic, &self.irqs);
        if irqs.is_empty() {
            let why = if self.s.files.contains_key(paths::INTERRUPTS) {
                format!(
                    "no interrupt of {} found (a virtual interface has none)",
                    nic.name
                )
            } else {
                self.why(paths::INTERRUPTS)
            };
            return if nic.device.is_none() {
                check(&id, &title, Verdict::Pass, why, None)
            } else {
                unknown(&id, &title, why)
            };
        }
        let mut ev = Vec::new();
        let mut bad = Vec::new();
        let mut unknowns = Vec::new();
        let rt = self.intent.rt_cpus.as_deref();
        let housekeeping: Vec<usize> = match rt {
            Some(r) => self
                .online
                .iter()
                .copied()
                .filter(|c| !r.contains(c))
                .collect(),
            None => Vec::new(),
        };
        let target = match (rt, self.intent.nic_irqs) {
            (Some(r), NicIrqs::Rt) => list(r),
            (Some(_), NicIrqs::Housekeeping) => list(&housekeeping),
            (None, _) => "<CPU>".to_string(),
        };
        for irq in &irqs {
            match self.affinity(*irq) {
                Ok(a) => {
                    ev.push(format!("{irq}→{}", list(&a)));
                    let wrong = match (rt, self.intent.nic_irqs) {
                        (Some(r), NicIrqs::Housekeeping) => a.iter().any(|c| r.contains(c)),
                        (Some(r), NicIrqs::Rt) => !subset(&a, r),
                        (None, _) => a.len() > 1,
                    };
                    if wrong {
                        bad.push(*irq);
                    }
                }
                Err(e) => unknowns.push(format!("{irq}: {e}")),
            }
        }
        let mut evidence = format!("IRQ→CPUs {}", ev.join(", "));
        if !unknowns.is_empty() {
            evidence.push_str(&format!("; unreadable: {}", unknowns.join("; ")));
        }
        let fix = Some(format!(
            "for i in {}; do echo {target} > /proc/irq/$i/smp_affinity_list; done{}",
            bad.iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(" "),
            match rt {
                Some(r) => format!(
                    " (or lockstep host apply --rt-cpus {} --nic {}{})",
                    cpulist::format(r),
                    nic.name,
                    if self.intent.nic_irqs == NicIrqs::Rt {
                        " --nic-irqs rt"
                    } else {
                        ""
                    }
                ),
                None => String::new(),
            }
        ));
        if !bad.is_empty() {
            let (verdict, why) = match (rt, self.intent.nic_irqs) {
                (Some(_), NicIrqs::Housekeeping) => (Verdict::Fail, "may interrupt an RT CPU"),
                (Some(_), NicIrqs::Rt) => (Verdict::Fail, "may be handled off the RT CPUs"),
                (None, _) => (
                    Verdict::Warn,
                    "may move between CPUs (give --rt-cpus to judge the layout)",
                ),
            };
            evidence.push_str(&format!(
                "; IRQ {} {why}",
                bad.iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            return check(&id, &title, verdict, evidence, fix);
        }
        if !unknowns.is_empty() {
            return unknown(&id, &title, evidence);
        }
        check(&id, &title, Verdict::Pass, evidence, None)
    }

    /// Interrupt coalescing: pass when receive interrupts are not delayed or the driver
    /// has none, fail when they are, unknown when it could not be read.
    fn coalescing(&self, nic: &Nic) -> Check {
        let id = format!("nic.coalescing.{}", nic.name);
        let title = format!("{} interrupt coalescing off", nic.name);
        let fix = Some(format!(
            "ethtool -C {} adaptive-rx off rx-usecs 0 rx-frames 1 (or lockstep host apply --nic {})",
            nic.name, nic.name
        ));
        match (&nic.coalesce, nic.coalesce_unsupported, &nic.coalesce_error) {
            (Some(c), _, _) if c.rx_off() => check(&id, &title, Verdict::Pass, c.describe(), None),
            (Some(c), _, _) => check(
                &id,
                &title,
                Verdict::Fail,
                format!("{}: receive interrupts are delayed", c.describe()),
                fix,
            ),
            (None, true, _) => check(
                &id,
                &title,
                Verdict::Pass,
                "the driver has no interrupt coalescing (ETHTOOL_GCOALESCE not supported)"
                    .to_string(),
                None,
            ),
            (None, false, Some(e)) => unknown(&id, &title, e.clone()),
            (None, false, None) => unknown(&id, &title, "not read".to_string()),
        }
    }

    /// With RT CPUs: every other interrupt should stay off them. Fail when one may
    /// land there (the fix is `lockstep host apply`; the kernel refuses some, such as
    /// managed or per-CPU ones).
    fn other_irqs(&self) -> Option<Check> {
        let rt = self.intent.rt_cpus.as_deref()?;
        const ID: &str = "irq.other_affinity";
        const T: &str = "other interrupts kept off the RT CPUs";
        if self.irqs.is_empty() {
            return Some(unknown(ID, T, self.why(paths::INTERRUPTS)));
        }
        let mut nic_irqs = Vec::new();
        for n in self.nics() {
            nic_irqs.extend(interrupts::nic_irqs(n, &self.irqs));
        }
        let mut bad = Vec::new();
        let mut unread = 0;
        let mut total = 0;
        for l in &self.irqs {
            if nic_irqs.contains(&l.irq) {
                continue;
            }
            total += 1;
            match self.affinity(l.irq) {
                Ok(a) if a.iter().any(|c| rt.contains(c)) => {
                    bad.push(format!("{}→{}", l.irq, list(&a)))
                }
                Ok(_) => {}
                Err(_) => unread += 1,
            }
        }
        let housekeeping: Vec<usize> = self
            .online
            .iter()
            .copied()
            .filter(|c| !rt.contains(c))
            .collect();
        let mut ev = format!(
            "{} of {total} other IRQs may interrupt RT CPUs {}",
            bad.len(),
            list(rt)
        );
        if !bad.is_empty() {
            ev.push_str(&format!(": {}", bad.join(", ")));
        }
        if unread > 0 {
            ev.push_str(&format!("; {unread} affinities unreadable"));
        }
        Some(if !bad.is_empty() {
            check(
                ID,
                T,
                Verdict::Fail,
                ev,
                Some(format!(
                    "lockstep host apply --rt-cpus {} (writes {} to each /proc/irq/N/smp_affinity_list), and boot parameter irqaffinity={} for interrupts set up later",
                    cpulist::format(rt),
                    list(&housekeeping),
                    list(&housekeeping)
                )),
            )
        } else if unread > 0 && unread == total {
            unknown(ID, T, ev)
        } else {
            check(ID, T, Verdict::Pass, ev, None)
        })
    }

    /// RT throttling: pass when disabled (`-1`), warn when RT threads are stopped for
    /// part of every period.
    fn rt_throttling(&self) -> Check {
        const ID: &str = "sched.rt_throttling";
        const T: &str = "RT throttling off (sched_rt_runtime_us)";
        let Some(rt) = self.s.text(paths::RT_RUNTIME) else {
            return unknown(ID, T, self.why(paths::RT_RUNTIME));
        };
        let period = self.s.text(paths::RT_PERIOD).unwrap_or("?");
        match rt.parse::<i64>() {
            Ok(-1) => check(ID, T, Verdict::Pass, "sched_rt_runtime_us = -1 (no throttling)".to_string(), None),
            Ok(v) => check(
                ID,
                T,
                Verdict::Warn,
                format!("sched_rt_runtime_us = {v} of sched_rt_period_us = {period}: a busy RT thread is stopped for the rest of every period"),
                Some("sysctl -w kernel.sched_rt_runtime_us=-1 (or lockstep host apply)".to_string()),
            ),
            Err(_) => unknown(ID, T, format!("{}: \"{rt}\" is not a number", paths::RT_RUNTIME)),
        }
    }

    /// Clock source: pass for the cheap, vDSO-readable ones (tsc, kvm-clock, arm64's
    /// arch_sys_counter), warn for slow ones (hpet, acpi_pm, jiffies).
    fn clocksource(&self) -> Check {
        const ID: &str = "clock.source";
        const T: &str = "clock source";
        let Some(cs) = self.s.text(paths::CLOCKSOURCE) else {
            return unknown(ID, T, self.why(paths::CLOCKSOURCE));
        };
        let avail = self.s.text(paths::CLOCKSOURCES).unwrap_or("");
        let ev = format!("{cs} (available: {avail})");
        if matches!(
            cs,
            "tsc" | "kvm-clock" | "arch_sys_counter" | "hyperv_clocksource_tsc_page"
        ) {
            return check(ID, T, Verdict::Pass, ev, None);
        }
        let fix = if avail.split_whitespace().any(|c| c == "tsc") {
            "echo tsc > /sys/devices/system/clocksource/clocksource0/current_clocksource"
                .to_string()
        } else {
            "boot parameters clocksource=tsc tsc=reliable (only if the TSC is invariant: constant_tsc nonstop_tsc in /proc/cpuinfo)".to_string()
        };
        check(
            ID,
            T,
            Verdict::Warn,
            format!("{ev}: slow to read"),
            Some(fix),
        )
    }

    /// Transparent huge pages: warn on `always` (khugepaged and compaction stalls),
    /// pass on `madvise`/`never`.
    fn thp(&self) -> Check {
        const ID: &str = "mem.thp";
        const T: &str = "transparent huge pages not always on";
        let sel = |t: &str| {
            t.split_whitespace()
                .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
                .map(str::to_string)
        };
        let Some(en) = self.s.text(paths::THP_ENABLED) else {
            return match self.s.read(paths::THP_ENABLED) {
                Read::Missing => check(
                    ID,
                    T,
                    Verdict::Pass,
                    "kernel without transparent huge pages".to_string(),
                    None,
                ),
                _ => unknown(ID, T, self.why(paths::THP_ENABLED)),
            };
        };
        let enabled = sel(en).unwrap_or_else(|| en.to_string());
        let defrag = self
            .s
            .text(paths::THP_DEFRAG)
            .and_then(sel)
            .unwrap_or_else(|| "unread".to_string());
        let ev = format!("enabled {enabled}, defrag {defrag}");
        if enabled == "always" {
            check(
                ID,
                T,
                Verdict::Warn,
                ev,
                Some("echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or never; boot parameter transparent_hugepage=madvise)".to_string()),
            )
        } else {
            check(ID, T, Verdict::Pass, ev, None)
        }
    }

    /// Clock sync: pass when the kernel clock is synchronized by ptp4l/phc2sys or
    /// chrony with an estimated error ≤ 100 µs; warn when synchronized otherwise
    /// (NTP-class error); fail when unsynchronized; unknown when adjtimex failed.
    fn sync(&self) -> Check {
        const ID: &str = "clock.sync";
        const T: &str = "clock synchronized (adjtimex, ptp4l/phc2sys/chrony)";
        let daemons: Vec<&str> = [
            "ptp4l",
            "phc2sys",
            "ts2phc",
            "chronyd",
            "ntpd",
            "systemd-timesyn",
            "timemaster",
            "ptpd",
        ]
        .into_iter()
        .filter(|d| self.running(d).is_some_and(|p| !p.is_empty()))
        .collect();
        let dl = if daemons.is_empty() {
            "no sync daemon running".to_string()
        } else {
            let names: Vec<&str> = daemons
                .iter()
                .map(|d| {
                    if *d == "systemd-timesyn" {
                        "systemd-timesyncd"
                    } else {
                        d
                    }
                })
                .collect();
            format!("running: {}", names.join(", "))
        };
        let fix = Some("run ptp4l -i IFACE and phc2sys -a -r (PTP hardware clock), or chronyd with a nearby server".to_string());
        let Some(tx) = self.s.facts.timex else {
            return unknown(ID, T, format!("adjtimex could not be read; {dl}"));
        };
        let synced = tx.status & STA_UNSYNC == 0 && tx.state != TIME_ERROR;
        let ev = format!(
            "{}, estimated error {} us, maximum error {} us; {dl}",
            if synced {
                "synchronized"
            } else {
                "not synchronized (STA_UNSYNC or TIME_ERROR)"
            },
            tx.esterror_us,
            tx.maxerror_us
        );
        let precise = daemons.iter().any(|d| {
            matches!(
                *d,
                "ptp4l" | "phc2sys" | "chronyd" | "ts2phc" | "timemaster"
            )
        });
        if !synced {
            check(ID, T, Verdict::Fail, ev, fix)
        } else if precise && tx.esterror_us <= 100 {
            check(ID, T, Verdict::Pass, ev, None)
        } else {
            check(ID, T, Verdict::Warn, ev, fix)
        }
    }

    /// A hypervisor may steal the CPU at any moment: warn.
    fn hypervisor(&self) -> Check {
        const ID: &str = "host.hypervisor";
        const T: &str = "bare metal (no hypervisor)";
        match &self.s.facts.hypervisor {
            None => check(
                ID,
                T,
                Verdict::Pass,
                "no hypervisor detected".to_string(),
                None,
            ),
            Some(h) => check(
                ID,
                T,
                Verdict::Warn,
                format!("running under {h}: the host can steal CPU time at any moment"),
                Some("run on bare metal, or pin this VM's vCPUs to isolated host CPUs".to_string()),
            ),
        }
    }

    /// The boot parameters the failing/warning boot checks ask for.
    fn boot_params_to_add(&self, checks: &[Check]) -> Vec<String> {
        let rt = Some(self.rt_list());
        let mut out = Vec::new();
        for c in checks {
            if c.verdict == Verdict::Pass || c.verdict == Verdict::Unknown {
                continue;
            }
            let p = match c.id.as_str() {
                "boot.isolcpus" => rt.as_ref().map(|r| format!("isolcpus={r}")),
                "boot.nohz_full" => rt.as_ref().map(|r| format!("nohz_full={r}")),
                "boot.rcu_nocbs" => rt.as_ref().map(|r| format!("rcu_nocbs={r}")),
                "boot.rcu_nocb_poll" => Some("rcu_nocb_poll".to_string()),
                "boot.idle_poll" => Some("idle=poll".to_string()),
                "boot.processor_max_cstate" => Some("processor.max_cstate=1".to_string()),
                "boot.intel_idle_max_cstate" => Some("intel_idle.max_cstate=0".to_string()),
                _ => None,
            };
            out.extend(p);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_param_parsing() {
        let p =
            boot_params("root=/dev/sda isolcpus=managed_irq,domain,2-3 rcu_nocb_poll -- idle=poll");
        assert_eq!(p.get("rcu_nocb_poll").map(String::as_str), Some(""));
        assert_eq!(p.get("idle"), None);
        assert_eq!(isolcpus_list("managed_irq,domain,2-3"), Some(vec![2, 3]));
        assert_eq!(isolcpus_list("1,3"), Some(vec![1, 3]));
    }

    #[test]
    fn smt_on_a_host_of_many_cpus() {
        // found by the audit_text fuzz target: CPU 0 listing every one of 50 000
        // online CPUs as its sibling took seconds (each looked up by a scan of the
        // online list)
        let mut s = Snapshot::default();
        s.files.insert(paths::CPU_ONLINE.into(), "0-49999\n".into());
        s.files.insert(paths::siblings(0), "0-49999\n".into());
        s.files.insert(paths::siblings(1), "1,50000\n".into());
        s.files.insert(paths::siblings(2), "2-3\n".into());
        let r = audit(&s, &Intent::default());
        let smt = r.checks.iter().find(|c| c.id == "cpu.smt").unwrap();
        assert_eq!(smt.verdict, Verdict::Warn);
        // CPU 1's sibling is offline: it shares its core with no online thread
        assert!(
            smt.evidence
                .ends_with("threads sharing a core: 0-49999; 2-3"),
            "{}",
            smt.evidence
        );
    }
}
