//! The parts of `report.html` that answer the question at a glance: a headline per
//! run (jitter, loss, and for TDP the share of packets inside the window the schedule
//! promises), the host in one sentence, and the TDP outliers — counted per cause and
//! the worst listed with the node, frame and reason where each lost its time.

use std::fmt::Write;

use serde_json::Value;

use super::html::{fmt_ns, LabReport, RunReport};
use super::human::range_text;
use super::svg::esc;
use super::window::{OutlierReport, WindowReport};

/// Outliers the page lists (the worst across a run's flows).
const LISTED: usize = 20;

/// One sentence per run.
pub fn headline(run: &RunReport) -> String {
    let j: Vec<i64> = run
        .flows
        .iter()
        .filter_map(|f| f.latency.jitter_ns)
        .collect();
    let jitter = range_text(&j, fmt_ns)
        .map_or_else(|| "no packets received".into(), |r| format!("jitter {r}"));
    let lost: u64 = run.flows.iter().map(|f| f.lost).sum();
    let slips: u64 = run.flows.iter().map(|f| f.slips).sum();
    let mut s = format!("{jitter} over {} flows, {lost} lost", run.flows.len());
    if slips > 0 {
        let _ = write!(s, " ({slips} frame slips at routers)");
    }
    if let Some(t) = run.tf_ns.filter(|_| !j.is_empty()) {
        let under = j.iter().filter(|&&x| x < 2 * t).count();
        let _ = write!(s, "; {under} of {} flows under 2 TF", j.len());
    }
    s.push_str(&bound_text(run));
    let t = WindowReport::total(run.flows.iter().filter_map(|f| f.window.as_ref()));
    if let Some(share) = t.inside_share() {
        let _ = write!(
            s,
            "; {:.3}% of packets inside the window the schedule promises, {} outside ({} unexplained)",
            share * 100.0,
            t.outside,
            t.unexplained
        );
    }
    s
}

/// `; every flow under its network-calculus bound`, or why there is none.
fn bound_text(run: &RunReport) -> String {
    let with: Vec<(i64, Option<i64>)> = run
        .flows
        .iter()
        .filter_map(|f| Some((f.bound_ns?, f.latency.max_ns)))
        .collect();
    if with.is_empty() {
        return run
            .bound_note
            .as_ref()
            .map_or(String::new(), |n| format!("; {n}"));
    }
    let over = with
        .iter()
        .filter(|(b, m)| m.is_some_and(|m| m > *b))
        .count();
    if over == 0 {
        format!(
            "; every flow's max under its network-calculus bound ({})",
            range_ns(&with)
        )
    } else {
        format!(
            "; {over} of {} flows above their network-calculus bound ({}; it covers the network, not the hosts' wake-ups)",
            with.len(),
            range_ns(&with)
        )
    }
}

fn range_ns(v: &[(i64, Option<i64>)]) -> String {
    let bounds: Vec<i64> = v.iter().map(|x| x.0).collect();
    range_text(&bounds, fmt_ns).unwrap_or_default()
}

/// The headlines, the host sentence and the notes folded under them.
pub fn glance_section(page: &mut String, report: &LabReport) {
    page.push_str(r#"<section id="glance"><h2>At a glance</h2><ul class="glance">"#);
    for run in &report.runs {
        let _ = write!(
            page,
            "<li><b>{}</b>: {}</li>",
            esc(&run.label),
            esc(&headline(run))
        );
    }
    page.push_str("</ul>");
    if let Some(h) = host_sentence(&report.host) {
        let _ = write!(page, r#"<p class="lead">Host: {}</p>"#, esc(&h));
    }
    if !report.notes.is_empty() {
        let _ = write!(
            page,
            r#"<details class="notes"><summary>Notes and warnings ({})</summary><ul>"#,
            report.notes.len()
        );
        for note in &report.notes {
            let _ = write!(page, "<li>{}</li>", esc(note));
        }
        page.push_str("</ul></details>");
    }
    page.push_str("</section>");
}

/// `vm: 2 × Intel Xeon @ 2.50GHz, Linux 6.18 (PREEMPT_DYNAMIC, not PREEMPT_RT), under
/// kvm, clock not synchronised`.
pub fn host_sentence(h: &Value) -> Option<String> {
    let name = h.get("hostname")?.as_str()?;
    let mut parts = Vec::new();
    if let (Some(c), Some(m)) = (
        h.get("cores").and_then(Value::as_u64),
        h.get("cpu_model").and_then(Value::as_str),
    ) {
        parts.push(format!("{c} × {m}"));
    }
    if let Some(r) = h.pointer("/kernel/release").and_then(Value::as_str) {
        let rt = if h.get("rt").and_then(Value::as_bool) == Some(true) {
            "PREEMPT_RT"
        } else {
            "not PREEMPT_RT"
        };
        let pre = h.get("preempt").and_then(Value::as_str).unwrap_or("?");
        parts.push(format!("Linux {r} (preemption {pre}, {rt})"));
    }
    match h.get("virtualization").and_then(Value::as_str) {
        Some(v) if v != "none" && !v.is_empty() => parts.push(format!("a virtual machine ({v})")),
        _ => {}
    }
    if let Some(s) = h.pointer("/sync/synchronized").and_then(Value::as_bool) {
        parts.push(
            if s {
                "clock synchronised"
            } else {
                "clock not synchronised"
            }
            .into(),
        );
    }
    Some(format!("{name}: {}", parts.join(", ")))
}

/// Per TDP run: outliers per flow and cause, then the worst of them.
pub fn outliers_section(page: &mut String, report: &LabReport) {
    let runs: Vec<&RunReport> = report
        .runs
        .iter()
        .filter(|r| r.flows.iter().any(|f| f.window.is_some()))
        .collect();
    if runs.is_empty() {
        return;
    }
    page.push_str(r#"<section id="outliers"><h2>TDP packets outside their window</h2><p class="lead">The schedule gives each packet a window: the frames it leaves each router in (d per hop after the edge) plus the edge's wait for the flow's frame, and the frame in which it crosses the last link. A packet outside it is traced through its hop records to the router and frame where it lost time, and why: a late wake-up, a slip past the frame's deadline, a full queue, a late link, the source or the receiver.</p>"#);
    for run in runs {
        causes_table(page, run);
        worst_table(page, run);
    }
    page.push_str("</section>");
}

fn causes_table(page: &mut String, run: &RunReport) {
    let causes: Vec<String> = run
        .flows
        .iter()
        .filter_map(|f| f.window.as_ref())
        .flat_map(|w| {
            w.causes
                .iter()
                .filter(|(_, n)| *n > 0)
                .map(|(c, _)| c.clone())
        })
        .fold(Vec::new(), |mut v, c| {
            if !v.contains(&c) {
                v.push(c);
            }
            v
        });
    let _ = write!(
        page,
        r#"<h3>{}</h3><div class="wide"><table><thead><tr><th class="l">Flow</th><th>Window</th><th>Inside</th><th>Outside</th>"#,
        esc(&run.label)
    );
    for c in &causes {
        let _ = write!(page, "<th>{}</th>", esc(c));
    }
    page.push_str("<th>Unexplained</th></tr></thead><tbody>");
    for f in &run.flows {
        let Some(w) = &f.window else { continue };
        let share = w
            .inside_share()
            .map_or("-".into(), |s| format!("{:.3}%", s * 100.0));
        let _ = write!(
            page,
            r#"<tr><td class="l">{}</td><td>{} – {}</td><td>{share}</td><td>{}</td>"#,
            esc(&f.name),
            fmt_ns(w.low_ns),
            fmt_ns(w.high_ns),
            w.outside
        );
        for c in &causes {
            let n = w.causes.iter().find(|(x, _)| x == c).map_or(0, |(_, n)| *n);
            let _ = write!(page, "<td>{n}</td>");
        }
        let _ = write!(page, "<td>{}</td></tr>", w.unexplained);
    }
    page.push_str("</tbody></table></div>");
}

fn worst_table(page: &mut String, run: &RunReport) {
    let mut all: Vec<(&str, &OutlierReport)> = run
        .flows
        .iter()
        .filter_map(|f| Some((f.name.as_str(), f.window.as_ref()?)))
        .flat_map(|(n, w)| w.worst.iter().map(move |o| (n, o)))
        .collect();
    if all.is_empty() {
        page.push_str(r#"<p class="empty">Every packet kept its window.</p>"#);
        return;
    }
    all.sort_by_key(|(_, o)| std::cmp::Reverse(o.outside_ns.abs()));
    all.truncate(LISTED);
    let _ = write!(
        page,
        r#"<p class="caption">The {} worst, furthest outside first.</p><div class="wide"><table><thead><tr><th class="l">Flow</th><th>Packet</th><th>Latency</th><th>Outside by</th><th class="l">Cause</th><th class="l">Where</th><th>Frame</th><th>Late by</th></tr></thead><tbody>"#,
        all.len()
    );
    for (flow, o) in all {
        let place = match (&o.node, o.hop) {
            (Some(n), Some(0)) => format!("{n} (edge)"),
            (Some(n), Some(h)) => format!("{n} (router {})", h + 1),
            _ if o.cause == "receiver late" => "receiver".into(),
            _ => "-".into(),
        };
        let _ = write!(
            page,
            r#"<tr><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td><td class="l">{}</td><td class="l">{}</td><td>{}</td><td>{}</td></tr>"#,
            esc(flow),
            o.seq,
            fmt_ns(o.latency_ns),
            fmt_ns(o.outside_ns),
            esc(&o.cause),
            esc(&place),
            o.frame.map_or("-".into(), |f| f.to_string()),
            fmt_ns(o.by_ns)
        );
    }
    page.push_str("</tbody></table></div>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::html::FlowReport;
    use lockstep_core::stats::Histogram;

    fn flow(name: &str, lat: &[i64], window: Option<WindowReport>) -> FlowReport {
        let mut h = Histogram::new();
        lat.iter().for_each(|&v| h.record(v));
        FlowReport {
            name: name.into(),
            latency: h.summary(),
            sent: 10,
            received: lat.len() as u64,
            lost: 10 - lat.len() as u64,
            slips: 1,
            window,
            ..FlowReport::default()
        }
    }

    fn tdp() -> RunReport {
        let w = WindowReport {
            low_ns: 1_000_000,
            high_ns: 2_000_000,
            tf_ns: 250_000,
            inside: 8,
            outside: 1,
            causes: vec![("late wake-up".into(), 1), ("slip".into(), 0)],
            unexplained: 0,
            worst: vec![OutlierReport {
                seq: 41,
                latency_ns: 2_500_000,
                outside_ns: 500_000,
                cause: "late wake-up".into(),
                node: Some("r2".into()),
                hop: Some(1),
                frame: Some(4012),
                by_ns: 700_000,
            }],
        };
        RunReport {
            label: "TDP".into(),
            tf_ns: Some(250_000),
            flows: vec![flow("f1", &[1_200_000, 1_300_000, 2_500_000], Some(w))],
            hops: Vec::new(),
            bound_note: None,
        }
    }

    #[test]
    fn a_tdp_headline_gives_jitter_loss_slips_and_the_window() {
        assert_eq!(
            headline(&tdp()),
            "jitter 1.300 ms over 1 flows, 7 lost (1 frame slips at routers); 0 of 1 flows under 2 TF; 88.889% of packets inside the window the schedule promises, 1 outside (0 unexplained)"
        );
    }

    #[test]
    fn the_outliers_are_counted_by_cause_and_listed_with_their_router() {
        let report = LabReport {
            runs: vec![tdp()],
            ..LabReport::default()
        };
        let mut page = String::new();
        outliers_section(&mut page, &report);
        assert!(page.contains("<th>late wake-up</th>"), "{page}");
        assert!(
            !page.contains("<th>slip</th>"),
            "causes that did not occur are left out"
        );
        assert!(page.contains("r2 (router 2)"), "{page}");
        assert!(page.contains("<td>4012</td>"), "{page}");
    }

    #[test]
    fn the_host_reads_as_a_sentence() {
        let h: Value = serde_json::json!({"hostname": "vm", "cores": 2, "cpu_model": "Xeon",
            "kernel": {"release": "6.18"}, "rt": false, "preempt": "dynamic",
            "virtualization": "kvm", "sync": {"synchronized": false}});
        assert_eq!(
            host_sentence(&h).unwrap(),
            "vm: 2 × Xeon, Linux 6.18 (preemption dynamic, not PREEMPT_RT), a virtual machine (kvm), clock not synchronised"
        );
    }
}
