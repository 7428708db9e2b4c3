//! `lockstep host …`: what on this host adds latency (audit), and the run-time tuning
//! that can be undone (apply / restore / hold-latency).
//!
//! The reading is in `lockstep_linux::audit`, the judgement and the plan in
//! `lockstep_core::audit`, the changes and the state file in `lockstep_linux::tune`;
//! this file parses options, prints and maps errors to exit statuses.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use lockstep_core::audit::{self, cpulist, plan, Intent, NicIrqs, Report, Snapshot};
use lockstep_core::units::{Exact, Kind, Whole};
use lockstep_linux::host::HostFacts;
use lockstep_linux::tune::{self, Status, TuneError};

use crate::report::ResultDoc;
use crate::{CheckFailed, EnvError, Interrupted, UsageError};

#[derive(Subcommand, Debug)]
pub enum HostCmd {
    /// Check this host for what adds latency (read-only, no root needed): real-time
    /// kernel, isolation, SMT, governor, C-states, IRQ affinity, coalescing, RT
    /// throttling, clock source, huge pages, clock sync. Each item: pass / warn / fail
    /// / unknown, the evidence and the fix.
    Audit(AuditArgs),
    /// Apply the run-time tuning that can be undone (IRQ affinity, performance governor,
    /// RT throttling off, NIC coalescing off), saving the previous values first. With
    /// `-- CMD ARGS`: also hold /dev/cpu_dma_latency at 0, run CMD, then restore.
    /// Never touches the boot command line (prints what to add instead).
    Apply(ApplyArgs),
    /// Put back what `apply` changed, exactly, from the saved state.
    Restore(RestoreArgs),
    /// Hold /dev/cpu_dma_latency at a value (default 0: no C-state exits) while CMD runs.
    HoldLatency(HoldArgs),
}

/// The layout the host is meant to have.
#[derive(Args, Debug, Clone)]
pub struct IntentArgs {
    /// The CPUs for real-time threads (kernel list syntax: 1 or 2-3,6).
    #[arg(long, value_name = "LIST", value_parser = parse_cpus)]
    pub rt_cpus: Option<CpuSet>,
    /// The NIC of the time-critical traffic.
    #[arg(long, value_name = "IFACE")]
    pub nic: Option<String>,
    /// Where the NIC's interrupts belong: with the other interrupts on the housekeeping
    /// CPUs, or on the RT CPUs next to the receiving thread (toussaint2018).
    #[arg(long, value_name = "housekeeping|rt", default_value = "housekeeping", value_parser = parse_nic_irqs)]
    pub nic_irqs: NicIrqs,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    #[command(flatten)]
    pub intent: IntentArgs,
    /// Print the result document on stdout (the checklist goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Also write the files read into DIR (files/…, snapshot.json): a fixture for tests
    /// and bug reports.
    #[arg(long, value_name = "DIR")]
    pub capture: Option<PathBuf>,
    /// Exit with status 1 when a check fails (for scripts and CI gates).
    #[arg(long)]
    pub strict: bool,
}

#[derive(Args, Debug)]
pub struct ApplyArgs {
    #[command(flatten)]
    pub intent: IntentArgs,
    /// Where the previous values are saved.
    #[arg(long, value_name = "FILE", default_value = tune::DEFAULT_STATE)]
    pub state: PathBuf,
    /// Run this command with the tuning applied and /dev/cpu_dma_latency held at 0,
    /// then restore.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The state saved by `apply`.
    #[arg(long, value_name = "FILE", default_value = tune::DEFAULT_STATE)]
    pub state: PathBuf,
}

#[derive(Args, Debug)]
pub struct HoldArgs {
    /// The latency to hold, a whole number of microseconds: 0us (the default) keeps
    /// every CPU out of deep C-states, 10us allows those that wake within 10 µs.
    #[arg(long, value_name = "DUR", default_value = "0us", value_parser = parse_dma_latency)]
    pub latency: u32,
    /// Deprecated: --latency in microseconds (a bare number, or a duration).
    #[arg(long, value_name = "US", hide = true, conflicts_with = "latency", value_parser = parse_us)]
    pub us: Option<u32>,
    /// The command to run while holding it.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// A CPU list option (a newtype: clap would read `Vec` as several values).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuSet(pub Vec<usize>);

fn parse_cpus(s: &str) -> Result<CpuSet, String> {
    let v = cpulist::parse(s).map_err(|e| format!("expected a CPU list like 1 or 2-3,6: {e}"))?;
    if v.is_empty() {
        return Err(format!("expected a CPU list like 1 or 2-3,6, got \"{s}\""));
    }
    Ok(CpuSet(v))
}

fn parse_nic_irqs(s: &str) -> Result<NicIrqs, String> {
    s.parse()
}

pub fn run(cmd: HostCmd) -> Result<()> {
    match cmd {
        HostCmd::Audit(a) => run_audit(a),
        HostCmd::Apply(a) => run_apply(a),
        HostCmd::Restore(a) => run_restore(a),
        HostCmd::HoldLatency(a) => run_hold(a),
    }
}

/// Reads the host and checks `--rt-cpus` and `--nic` against it (exit 2 when wrong).
fn read_host(intent: &IntentArgs) -> Result<(HostFacts, Snapshot, Intent)> {
    if let Some(n) = &intent.nic {
        if !lockstep_linux::audit::interface_exists(n) {
            return Err(UsageError(format!(
                "--nic: no interface \"{n}\" in this network namespace (see `ip link`)"
            ))
            .into());
        }
    }
    let host = lockstep_linux::host::collect();
    let snap = lockstep_linux::audit::snapshot(&host, intent.nic.as_deref());
    if let Some(CpuSet(rt)) = &intent.rt_cpus {
        let online = snap.online_cpus();
        if !online.is_empty() {
            plan::validate_rt_cpus(rt, &online).map_err(|e| UsageError(e.to_string()))?;
        }
    }
    let i = Intent {
        rt_cpus: intent.rt_cpus.clone().map(|c| c.0),
        nic: intent.nic.clone(),
        nic_irqs: intent.nic_irqs,
    };
    Ok((host, snap, i))
}

fn run_audit(a: AuditArgs) -> Result<()> {
    let (host, snap, intent) = read_host(&a.intent)?;
    if let Some(dir) = &a.capture {
        lockstep_linux::audit::capture(&snap, dir)
            .with_context(|| format!("--capture: cannot write {}", dir.display()))?;
    }
    let report = audit::audit(&snap, &intent);
    let mut text = checklist(&host, &report);
    if std::path::Path::new(tune::DEFAULT_STATE).exists() {
        text.push_str(&format!(
            "note: `lockstep host apply` is in effect (state in {}); `lockstep host restore` undoes it\n",
            tune::DEFAULT_STATE
        ));
    }
    let failed = report.counts.fail;
    if a.json {
        eprint!("{text}");
        let mut doc = ResultDoc::with_host("host.audit", &intent, host);
        doc.insert("counts", report.counts);
        doc.audit = Some(report);
        doc.check_failed = a.strict && failed > 0;
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        print!("{text}");
    }
    if a.strict && failed > 0 {
        return Err(CheckFailed(format!("--strict: {failed} check(s) failed")).into());
    }
    Ok(())
}

/// The audit as a checklist for humans.
pub fn checklist(host: &HostFacts, r: &Report) -> String {
    let mut s = format!(
        "host audit: {} — Linux {}, {} CPUs{}\n",
        host.hostname,
        host.kernel.release,
        host.cores,
        host.virtualization
            .as_ref()
            .map(|v| format!(", under {v}"))
            .unwrap_or_default()
    );
    let mut intent = Vec::new();
    if let Some(c) = &r.intent.rt_cpus {
        intent.push(format!("RT CPUs {}", cpulist::format(c)));
    }
    if let Some(n) = &r.intent.nic {
        intent.push(format!("NIC {n}"));
    }
    if r.intent.rt_cpus.is_some() {
        intent.push(match r.intent.nic_irqs {
            NicIrqs::Housekeeping => "NIC interrupts on the housekeeping CPUs".to_string(),
            NicIrqs::Rt => "NIC interrupts on the RT CPUs".to_string(),
        });
    }
    if intent.is_empty() {
        s.push_str("intent: none given (--rt-cpus LIST --nic IFACE judge the layout)\n");
    } else {
        s.push_str(&format!("intent: {}\n", intent.join(", ")));
    }
    s.push('\n');
    for c in &r.checks {
        s.push_str(&format!("[{}] {}\n", c.verdict.tag(), c.title));
        s.push_str(&format!("       {}\n", c.evidence));
        if let Some(f) = &c.fix {
            s.push_str(&format!("       fix: {f}\n"));
        }
    }
    let n = r.counts;
    s.push_str(&format!(
        "\n{} pass, {} warn, {} fail, {} unknown\n",
        n.pass, n.warn, n.fail, n.unknown
    ));
    if !r.boot_params_to_add.is_empty() {
        s.push_str(&format!(
            "boot parameters to add (lockstep never edits the boot command line): {}\n",
            r.boot_params_to_add.join(" ")
        ));
    }
    if !r.unreadable.is_empty() {
        s.push_str("could not read:\n");
        for u in &r.unreadable {
            s.push_str(&format!("  {u}\n"));
        }
    }
    s
}

fn tune_error(e: TuneError) -> anyhow::Error {
    if e.is_usage() {
        UsageError(e.to_string()).into()
    } else {
        EnvError(e.to_string()).into()
    }
}

fn run_apply(a: ApplyArgs) -> Result<()> {
    let Some(CpuSet(rt)) = a.intent.rt_cpus.clone() else {
        return Err(UsageError("--rt-cpus: required by apply (e.g. --rt-cpus 1)".into()).into());
    };
    let (_host, snap, intent) = read_host(&a.intent)?;
    let req = plan::Request {
        rt_cpus: rt,
        nic: a.intent.nic.clone(),
        nic_irqs: a.intent.nic_irqs,
    };
    let state = tune::apply(&snap, &req, &a.state).map_err(tune_error)?;
    let mut applied = 0;
    for e in &state.entries {
        let (tag, note) = match &e.status {
            Status::Applied => {
                applied += 1;
                ("done", String::new())
            }
            Status::Pending => ("????", String::new()),
            Status::Refused(why) => ("refused", format!(": {why}")),
            Status::Skipped(why) => ("skipped", format!(": {why}")),
        };
        eprintln!("  [{tag}] {}{note}", e.change.what());
    }
    if state.entries.is_empty() {
        eprintln!("nothing to change: the run-time settings are already as asked");
    } else if applied > 0 {
        eprintln!(
            "{applied} of {} settings changed; previous values saved in {} (`lockstep host restore` puts them back)",
            state.entries.len(),
            a.state.display()
        );
    } else {
        eprintln!("no setting could be changed; no state saved");
    }
    let report = audit::audit(&snap, &intent);
    if !report.boot_params_to_add.is_empty() {
        eprintln!(
            "not changed (needs a reboot; lockstep never edits the boot command line): add {}",
            report.boot_params_to_add.join(" ")
        );
    }
    if a.command.is_empty() {
        eprintln!("/dev/cpu_dma_latency: not held (it lasts only while a process holds it: `lockstep host apply ... -- CMD` or `lockstep host hold-latency -- CMD`)");
        return Ok(());
    }
    let status = run_holding(0, &a.command);
    if applied > 0 {
        restore_and_print(&a.state)?;
    }
    status
}

/// Holds the latency, runs the command, releases. Exit 1 when the command fails.
fn run_holding(us: i32, command: &[String]) -> Result<()> {
    let guard = lockstep_linux::rt::DmaLatencyGuard::hold(us)?;
    eprintln!(
        "/dev/cpu_dma_latency held at {us} us (effective {}) while running: {}",
        guard
            .effective_us()
            .map(|v| format!("{v} us"))
            .unwrap_or_else(|e| format!("unreadable: {e}")),
        command.join(" ")
    );
    // a stop asked of lockstep is passed on to the command, which gets STOP_GRACE
    let status = lockstep_linux::proc::run_attached(command, STOP_GRACE);
    drop(guard);
    let program = command.first().map_or("", String::as_str);
    match status {
        Ok(e) if e.stopped => Err(Interrupted(format!(
            "{program} was asked to stop ({}); /dev/cpu_dma_latency released",
            e.status
        ))
        .into()),
        Ok(e) if e.status.success() => Ok(()),
        Ok(e) => Err(CheckFailed(format!("{program} exited with {}", e.status)).into()),
        Err(e) => Err(UsageError(format!("cannot run {program}: {e}")).into()),
    }
}

/// How long a command run by `hold-latency` or `apply -- CMD` has to end after
/// lockstep passes a SIGINT/SIGTERM on to it (then SIGKILL).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

fn restore_and_print(state: &std::path::Path) -> Result<()> {
    let restored = tune::restore(state).map_err(tune_error)?;
    let mut failed = 0;
    for r in &restored {
        match &r.result {
            Ok(()) => eprintln!("  [undone] {}", r.what),
            Err(e) => {
                failed += 1;
                eprintln!("  [FAILED] {}: {e}", r.what);
            }
        }
    }
    if failed > 0 {
        return Err(EnvError(format!(
            "{failed} of {} settings could not be restored; the state stays in {}",
            restored.len(),
            state.display()
        ))
        .into());
    }
    eprintln!(
        "{} settings restored; {} removed",
        restored.len(),
        state.display()
    );
    Ok(())
}

fn run_restore(a: RestoreArgs) -> Result<()> {
    restore_and_print(&a.state)
}

fn run_hold(a: HoldArgs) -> Result<()> {
    let us = a.us.unwrap_or(a.latency);
    // parse_dma_latency keeps it within i32
    run_holding(i32::try_from(us).unwrap_or(i32::MAX), &a.command)
}

/// How `--latency` is read: whole microseconds, at most what the kernel takes (an `i32`).
const DMA_LATENCY: Whole = Whole {
    kind: Kind::Time,
    per_base: Exact::int(1_000_000),
    unit: "microseconds",
    range: "at most 2147483647us",
    signed: false,
};

/// `--latency`: a duration, a whole number of microseconds from 0 to `i32::MAX`.
pub(crate) fn parse_dma_latency(s: &str) -> Result<u32, String> {
    let (_, us) = DMA_LATENCY.parse(s).map_err(|e| e.to_string())?;
    match u32::try_from(us) {
        Ok(us) if us <= i32::MAX as u32 => Ok(us),
        _ => Err(DMA_LATENCY.out_of_range(s).to_string()),
    }
}

/// The deprecated `--us`: a bare number of microseconds, or a duration.
fn parse_us(s: &str) -> Result<u32, String> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return parse_dma_latency(&format!("{t}us"));
    }
    parse_dma_latency(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_to_hold_is_a_duration_in_whole_microseconds() {
        assert_eq!(parse_dma_latency("10us"), Ok(10));
        assert_eq!(parse_dma_latency("0us"), Ok(0));
        assert_eq!(parse_dma_latency("1.5ms"), Ok(1_500));
        assert_eq!(parse_dma_latency("1/2ms"), Ok(500));
        assert_eq!(
            parse_dma_latency("1500ns").unwrap_err(),
            "1500ns is not a whole number of microseconds"
        );
        assert_eq!(
            parse_dma_latency("10").unwrap_err(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"10\" (the unit is missing)"
        );
        assert_eq!(
            parse_dma_latency("-1us").unwrap_err(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"-1us\" (it cannot be negative)"
        );
        assert_eq!(
            parse_dma_latency("2147483648us").unwrap_err(),
            "2147483648us is out of range (at most 2147483647us)"
        );
        // the deprecated --us: a bare number of microseconds, or a duration
        assert_eq!(parse_us("10"), Ok(10));
        assert_eq!(parse_us("10us"), Ok(10));
        assert!(parse_us("ten").is_err());
    }
}
