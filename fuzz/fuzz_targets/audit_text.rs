//! Fuzz the host audit's parsers and judgement: arbitrary text in the kernel files it
//! reads (`/proc/interrupts`, CPU lists, cpuidle states, the command line, …) must
//! never panic, and every check must carry evidence.
//!
//! The stable, deterministic twin that runs in `cargo test` is `audit_never_panics`
//! in crates/core/src/audit/mod.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_core::audit::{self, interrupts, paths, plan, Intent, Nic, NicIrqs, Snapshot};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parts: Vec<&str> = text.split('\u{1}').collect();
    let _ = interrupts::parse(&text);
    let _ = audit::cpulist::parse(&text);
    let mut s = Snapshot::default();
    let mut all: Vec<String> = paths::FIXED.iter().map(|p| p.to_string()).collect();
    for c in 0..2 {
        all.extend(paths::per_cpu(c));
        all.push(format!("{}/latency", paths::idle_state(c, 0)));
        all.push(format!("{}/name", paths::idle_state(c, 0)));
    }
    all.push(paths::irq_affinity(1));
    for (p, t) in all.into_iter().zip(parts.iter().cycle()) {
        s.files.insert(p, t.to_string());
    }
    // Every per-CPU check walks the online CPUs (linear by design): a list of tens
    // of thousands made one input take a good part of a second, and libFuzzer spend
    // its time there rather than explore. Hosts that large are the business of
    // checks.rs's tests (smt_on_a_host_of_many_cpus); here the judgement runs on at
    // most 256 online CPUs, the parsers on anything.
    if s.online_cpus().len() > 256 {
        return;
    }
    s.facts.nics.push(Nic {
        name: "eth0".into(),
        device: Some("virtio0".into()),
        msi_irqs: vec![1],
        ..Nic::default()
    });
    let intent = Intent {
        rt_cpus: Some(vec![1]),
        nic: Some("eth0".into()),
        nic_irqs: NicIrqs::Rt,
    };
    for i in [Intent::default(), intent] {
        let r = audit::audit(&s, &i);
        assert!(r.checks.iter().all(|c| !c.evidence.is_empty()));
    }
    let _ = plan::plan(
        &s,
        &plan::Request {
            rt_cpus: vec![1],
            nic: Some("eth0".into()),
            nic_irqs: NicIrqs::Housekeeping,
        },
    );
});
