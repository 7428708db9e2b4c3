//! A probe's saved result as a report: each distribution it measured is a "flow" of
//! one run (the page draws its PMF and CCDF; a sink's one-way latency and a client's
//! round trip carry their split), and the human summary is the probe's own table.

use lockstep_core::stats::Summary;

use super::doc::{Doc, ProbeResults};
use crate::report::html::{Component, FlowReport, LabReport, RunReport};
use crate::report::human::{dist_table, fmt_ns, kv};
use crate::report::probe_page::ProbePage;

/// The distributions of a probe's result, named as its table names them, in order.
pub fn distributions<'a>(kind: &str, r: &'a ProbeResults) -> Vec<(&'static str, &'a Summary)> {
    let all: Vec<(&'static str, &Option<Summary>)> = match kind {
        "probe.timer" => vec![("wake-up latency", &r.latency)],
        "probe.noise" => vec![
            ("gaps", &r.gaps),
            ("deviation", &r.deviation),
            ("lateness", &r.lateness),
        ],
        "probe.stream" => vec![
            ("L_I", &r.l_i),
            ("L_Tx from send", &r.l_tx_from_send),
            ("L_Tx from wake", &r.l_tx_from_wake),
        ],
        "probe.sink" => vec![
            ("one-way", &r.one_way),
            ("delta T", &r.delta_t),
            ("kernel delta T", &r.kernel_delta_t),
            ("L_I", &r.l_i),
            ("send path", &r.send_path),
            ("wire+stack", &r.wire_stack),
            ("rx path", &r.rx_path),
        ],
        "probe.rr.server" => vec![("turnaround", &r.turnaround), ("rx path", &r.rx_path)],
        _ => vec![
            ("rtt", &r.rtt),
            ("send path", &r.send_path),
            ("turnaround", &r.turnaround),
            ("rx path", &r.rx_path),
            ("network", &r.network),
        ],
    };
    all.into_iter()
        .filter_map(|(name, s)| s.as_ref().map(|s| (name, s)))
        .collect()
}

/// What was lost, of how many, for the probes that count it.
pub fn loss(kind: &str, r: &ProbeResults) -> Option<(u64, u64)> {
    match kind {
        "probe.sink" => r.totals.as_ref().map(|t| (t.lost, t.unique + t.lost)),
        "probe.rr.client" => Some((r.lost?, r.sent?)),
        _ => None,
    }
}

/// `probe.rr.client` → `probe rr client`.
pub fn command_name(kind: &str) -> String {
    kind.replace('.', " ")
}

/// A probe's result as a report of one run whose flows are its distributions (what
/// `compare` matches and draws).
pub fn lab_report(doc: &Doc<ProbeResults>) -> LabReport {
    let r = &doc.results;
    let parts = |names: &[&str]| -> Vec<Component> {
        distributions(&doc.kind, r)
            .into_iter()
            .filter(|(n, _)| names.contains(n))
            .map(|(n, s)| Component {
                name: n.to_string(),
                summary: s.clone(),
            })
            .collect()
    };
    let (lost, total) = loss(&doc.kind, r).unwrap_or((0, 0));
    let flows = distributions(&doc.kind, r)
        .into_iter()
        .map(|(name, s)| {
            let mut f = FlowReport {
                name: name.to_string(),
                latency: s.clone(),
                received: s.count,
                ..FlowReport::default()
            };
            if name == "one-way" {
                f.decomposition = parts(&["L_I", "send path", "wire+stack", "rx path"]);
            }
            if name == "rtt" {
                f.decomposition = parts(&["send path", "network", "turnaround", "rx path"]);
            }
            if matches!(name, "one-way" | "rtt") {
                (f.sent, f.lost) = (total, lost);
            }
            f
        })
        .collect();
    let command = command_name(&doc.kind);
    LabReport {
        title: format!("lockstep {command}"),
        generated_at: doc.started_at.clone(),
        command: doc.command.clone(),
        host: doc.host.clone(),
        runs: vec![RunReport {
            label: command,
            flows,
            ..RunReport::default()
        }],
        ..LabReport::default()
    }
}

/// The page of a probe's result.
pub fn page(doc: &Doc<ProbeResults>) -> ProbePage {
    ProbePage {
        title: format!("lockstep {}", command_name(&doc.kind)),
        generated_at: doc.started_at.clone(),
        command: doc.command.clone(),
        host: doc.host.clone(),
        dists: distributions(&doc.kind, &doc.results)
            .into_iter()
            .map(|(n, s)| (n.to_string(), s.clone()))
            .collect(),
        facts: counters(doc)
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        warnings: doc.warnings.clone(),
    }
}

/// The probe's summary as it printed it, from what the document keeps.
pub fn human(doc: &Doc<ProbeResults>) -> String {
    let r = &doc.results;
    let dists = distributions(&doc.kind, r);
    let mut s = format!("{}\n", command_name(&doc.kind));
    s.push_str(&dist_table(&dists));
    s.push('\n');
    s.push_str(&kv(&counters(doc)));
    for w in &doc.warnings {
        s.push_str(&format!("warning: {w}\n"));
    }
    s
}

/// The counters a probe's summary shows.
fn counters(doc: &Doc<ProbeResults>) -> Vec<(&'static str, String)> {
    let r = &doc.results;
    let n = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
    let mut lines = match doc.kind.as_str() {
        "probe.timer" => vec![
            (
                "overruns",
                format!("{} ({} periods missed)", n(r.overruns), n(r.missed_periods)),
            ),
            ("samples", n(r.samples)),
        ],
        "probe.noise" if r.gaps.is_some() => vec![
            ("reads", n(r.reads)),
            ("above threshold", n(r.above_threshold)),
            ("stolen", r.stolen_ns.map_or("-".into(), fmt_ns)),
        ],
        "probe.noise" => vec![("ticks", n(r.ticks)), ("spikes", n(r.spikes_total))],
        "probe.stream" => vec![
            ("sent", n(r.sent)),
            (
                "achieved",
                r.achieved_pps.map_or("-".into(), |p| format!("{p:.0} pps")),
            ),
        ],
        "probe.sink" => vec![("probes", n(r.probes))],
        "probe.rr.server" => vec![("requests", n(r.requests)), ("responses", n(r.responses))],
        _ => vec![("sent", n(r.sent)), ("answered", n(r.answered))],
    };
    if let Some((lost, of)) = loss(&doc.kind, r) {
        lines.push(("lost", format!("{lost} of {of}")));
    }
    if let Some(e) = r.elapsed_ns {
        lines.push(("elapsed", fmt_ns(e)));
    }
    if let Some(by) = r.stopped_by.as_ref().or(r.stop_reason.as_ref()) {
        lines.push(("stopped by", by.clone()));
    }
    if let Some(rt) = &doc.realtime {
        lines.push(("thread", thread(rt)));
    }
    if let Some(m) = r.max_at {
        lines.push((
            "max at",
            format!(
                "wake-up {} ({} after start)",
                m.index,
                fmt_ns(m.since_start_ns)
            ),
        ));
    }
    lines
}

/// `SCHED_FIFO 90 on CPU 1, memory locked`, as the probe says it.
fn thread(rt: &super::doc::Realtime) -> String {
    let policy = match rt.policy.as_deref() {
        Some("fifo") => format!("SCHED_FIFO {}", rt.priority.unwrap_or(0)),
        Some("rr") => format!("SCHED_RR {}", rt.priority.unwrap_or(0)),
        _ => "SCHED_OTHER".to_string(),
    };
    let cpu = rt.cpu.map_or(String::new(), |c| format!(" on CPU {c}"));
    let mem = if rt.mlocked {
        ", memory locked"
    } else {
        ", memory not locked"
    };
    format!("{policy}{cpu}{mem}")
}
