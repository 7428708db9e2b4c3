//! `lockstep host …`: the audit's documents, bad input, and (as root) the apply/restore
//! round trip on the settings this machine lets change, which must leave every file
//! byte for byte as it was.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn tmp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lockstep-cli-host-{}-{name}", std::process::id()))
}

fn online() -> Vec<usize> {
    let t = std::fs::read_to_string("/sys/devices/system/cpu/online").unwrap();
    lockstep_core::audit::cpulist::parse(&t).unwrap()
}

#[test]
fn audit_prints_a_checklist_and_a_json_document() {
    let o = lockstep(&["host", "audit"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("host audit: "), "{text}");
    assert!(text.contains("] real-time kernel (PREEMPT_RT)\n"), "{text}");
    assert!(text.contains(" pass, "), "{text}");

    let o = lockstep(&["host", "audit", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON document on stdout");
    assert_eq!(doc["kind"], "host.audit");
    assert!(doc["host"]["kernel"]["release"].is_string());
    assert_eq!(doc["command"][1], "host");
    let checks = doc["audit"]["checks"].as_array().expect("checks");
    assert!(checks.len() >= 19, "{checks:?}");
    for c in checks {
        let v = c["verdict"].as_str().unwrap();
        assert!(["pass", "warn", "fail", "unknown"].contains(&v), "{c}");
        assert!(c["id"].is_string() && c["evidence"].is_string(), "{c}");
    }
    let n = &doc["results"]["counts"];
    let total: u64 = ["pass", "warn", "fail", "unknown"]
        .iter()
        .map(|k| n[k].as_u64().unwrap())
        .sum();
    assert_eq!(total as usize, checks.len());
    // The checklist went to stderr.
    assert!(stderr(&o).starts_with("host audit: "));

    // --strict: exit 1 exactly when a check fails
    let o = lockstep(&["host", "audit", "--strict", "--json"]);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON document on stdout");
    let fails_now = doc["results"]["counts"]["fail"].as_u64().unwrap();
    assert_eq!(doc["check_failed"], fails_now > 0);
    if fails_now > 0 {
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains(&format!("--strict: {fails_now} check(s) failed")));
    } else {
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

#[test]
fn audit_judges_a_layout() {
    let cpus = online();
    let last = cpus.last().unwrap().to_string();
    let o = lockstep(&["host", "audit", "--rt-cpus", &last, "--nic", "lo", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        doc["audit"]["intent"]["rt_cpus"][0].as_u64(),
        Some(*cpus.last().unwrap() as u64)
    );
    let ids: Vec<&str> = doc["audit"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert!(ids.contains(&"nic.coalescing.lo"), "{ids:?}");
    assert!(ids.contains(&"irq.other_affinity"), "{ids:?}");
}

#[test]
fn every_probe_result_embeds_the_audit() {
    let mut args = vec![
        "probe",
        "timer",
        "--interval",
        "1ms",
        "--count",
        "3",
        "--json",
    ];
    if !is_root() {
        args.push("--no-mlock");
    }
    let o = lockstep(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        doc["audit"]["checks"]
            .as_array()
            .is_some_and(|c| !c.is_empty()),
        "{doc}"
    );
}

#[test]
fn bad_input_is_exit_2_with_a_clear_message() {
    let online = lockstep_core::audit::cpulist::format(&online());
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            vec!["host", "audit", "--rt-cpus", "999"],
            format!("lockstep: --rt-cpus: CPU 999 is not online (online CPUs: {online})\n"),
        ),
        (
            vec!["host", "audit", "--rt-cpus", "abc"],
            "lockstep: --rt-cpus: expected a CPU list like 1 or 2-3,6: malformed cpu list \"abc\" at \"abc\"\n".to_string(),
        ),
        (
            vec!["host", "audit", "--nic", "lst-nonexist0"],
            "lockstep: --nic: no interface \"lst-nonexist0\" in this network namespace (see `ip link`)\n".to_string(),
        ),
        (
            vec!["host", "apply"],
            "lockstep: --rt-cpus: required by apply (e.g. --rt-cpus 1)\n".to_string(),
        ),
        (
            vec!["host", "apply", "--rt-cpus", &online],
            format!("lockstep: --rt-cpus {online} leaves no CPU for interrupts and housekeeping (online CPUs: {online})\n"),
        ),
        (
            vec!["host", "audit", "--nic-irqs", "both"],
            "lockstep: --nic-irqs: expected housekeeping or rt, got \"both\"\n".to_string(),
        ),
    ];
    for (args, want) in cases {
        let o = lockstep(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), want, "{args:?}");
    }
    let state = tmp("missing.json");
    let s = state.to_str().unwrap();
    let o = lockstep(&["host", "restore", "--state", s]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        stderr(&o),
        format!("lockstep: no saved state at {s}: nothing to restore (`lockstep host apply` saves one)\n")
    );
}

#[test]
fn restore_refuses_a_state_from_another_boot() {
    let state = tmp("otherboot.json");
    std::fs::write(
        &state,
        r#"{"version":1,"boot_id":"00000000-0000-0000-0000-000000000000","request":{"rt_cpus":[1],"nic":null,"nic_irqs":"housekeeping"},"entries":[]}"#,
    )
    .unwrap();
    let o = lockstep(&["host", "restore", "--state", state.to_str().unwrap()]);
    std::fs::remove_file(&state).unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "was saved during another boot (boot id 00000000-0000-0000-0000-000000000000, now "
        ),
        "{}",
        stderr(&o)
    );
}

/// Every file `apply` may touch, with its exact bytes.
fn tunables() -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut paths = vec!["/proc/sys/kernel/sched_rt_runtime_us".to_string()];
    if let Ok(d) = std::fs::read_dir("/proc/irq") {
        for e in d.flatten() {
            let p = e.path().join("smp_affinity_list");
            if p.exists() {
                paths.push(p.to_string_lossy().into_owned());
            }
        }
    }
    for c in online() {
        paths.push(format!(
            "/sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
        ));
    }
    for p in paths {
        if let Ok(b) = std::fs::read(&p) {
            out.insert(p, b);
        }
    }
    out
}

#[test]
fn apply_then_restore_leaves_the_host_byte_for_byte() {
    if !is_root() {
        eprintln!("skipped: apply/restore needs root");
        return;
    }
    let cpus = online();
    if cpus.len() < 2 {
        eprintln!("skipped: needs two CPUs (one RT, one housekeeping)");
        return;
    }
    let rt = cpus.last().unwrap().to_string();
    let state = tmp("roundtrip.json");
    let s = state.to_str().unwrap();
    let _ = std::fs::remove_file(&state);
    let before = tunables();

    // Explicit apply, then a second apply is refused (it would save tuned values as
    // the originals), then restore.
    let o = lockstep(&["host", "apply", "--rt-cpus", &rt, "--state", s]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("[done] sched_rt_runtime_us")
            || before
                .get("/proc/sys/kernel/sched_rt_runtime_us")
                .is_some_and(|v| v == b"-1\n"),
        "{err}"
    );
    if state.exists() {
        assert_eq!(
            std::fs::read_to_string("/proc/sys/kernel/sched_rt_runtime_us").unwrap(),
            "-1\n"
        );
        let o2 = lockstep(&["host", "apply", "--rt-cpus", &rt, "--state", s]);
        assert_eq!(o2.status.code(), Some(2), "{}", stderr(&o2));
        assert!(
            stderr(&o2).contains("a saved state already exists at"),
            "{}",
            stderr(&o2)
        );
        let o = lockstep(&["host", "restore", "--state", s]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(
            !state.exists(),
            "the state file is removed after a full restore"
        );
    }
    assert_eq!(
        tunables(),
        before,
        "restore puts every file back byte for byte"
    );

    // The `-- CMD` form: tuned and cpu_dma_latency held at 0 while CMD runs, then
    // restored.
    let o = lockstep(&[
        "host",
        "apply",
        "--rt-cpus",
        &rt,
        "--state",
        s,
        "--",
        "sh",
        "-c",
        "cat /proc/sys/kernel/sched_rt_runtime_us; od -An -t d4 /dev/cpu_dma_latency",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out: Vec<String> = stdout(&o).split_whitespace().map(str::to_string).collect();
    assert_eq!(out, vec!["-1", "0"], "{}", stderr(&o));
    assert!(!state.exists());
    assert_eq!(tunables(), before, "restored after the command");

    // A failing command: exit 1, still restored.
    let o = lockstep(&[
        "host",
        "apply",
        "--rt-cpus",
        &rt,
        "--state",
        s,
        "--",
        "false",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(tunables(), before);
}

#[test]
fn hold_latency_holds_zero_while_the_command_runs() {
    if !is_root() {
        eprintln!("skipped: /dev/cpu_dma_latency needs root");
        return;
    }
    let o = lockstep(&[
        "host",
        "hold-latency",
        "--",
        "od",
        "-An",
        "-t",
        "d4",
        "/dev/cpu_dma_latency",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "0");
}

#[test]
fn hold_latency_takes_a_duration() {
    // Root holds the latency and runs `true`; anyone else is refused the device
    // (exit 3). Either way the value was accepted: a bad value exits 2.
    for args in [
        &["--latency", "10us"][..],
        &["--latency", "1/2ms"],
        &["--us", "10"],
        &["--us", "10us"],
    ] {
        let mut all = vec!["host", "hold-latency"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--", "true"]);
        let o = lockstep(&all);
        assert_ne!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    let o = lockstep(&["host", "hold-latency", "--latency", "1500ns", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--latency: 1500ns is not a whole number of microseconds"),
        "{}",
        stderr(&o)
    );
}
