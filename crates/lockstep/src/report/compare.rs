//! The page of `lockstep compare A B`: who A and B are, a table per run with each
//! figure of both, the ratio B/A and the better figure coloured, and per flow both
//! runs' latency PMF and CCDF on one chart (A in the report's first run colour, B in
//! its second). Self-contained like report.html: inline CSS and SVG, no script.

use std::fmt::Write;

use super::html::{
    fmt_tf, run_swatch, shell_line, FlowReport, LabReport, Measure, CSS, PACKET_LATENCY,
};
use super::svg::esc;
use crate::saved::compare::{ratio_text, value_text, Better, CompareDoc, Metric, SideInfo};

/// Extra rules of the comparison page.
const COMPARE_CSS: &str = r#"
td.better{background:#dcefe2;color:#0b5a2a;font-weight:700}
td.worse{color:#8a3a20}
td.fig{color:var(--muted)}
table.sides td{white-space:normal;text-align:left}
"#;

pub fn render(c: &CompareDoc, a: &LabReport, b: &LabReport) -> String {
    let mut page = String::with_capacity(128 * 1024);
    let title = format!("lockstep compare: {} vs {}", c.a.dir, c.b.dir);
    let _ = write!(
        page,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>{}</title><style>{CSS}{COMPARE_CSS}</style></head><body><main>"#,
        esc(&title)
    );
    sides(&mut page, c, a, b);
    for run in c.runs.iter().filter(|r| !r.flows.is_empty()) {
        let _ = write!(page, "<section><h2>{}</h2>", esc(&run.run));
        table(&mut page, &run.flows);
        let probe = c.a.kind.starts_with("probe.");
        charts(&mut page, &run.run, (a, b), &run.flows, probe);
        page.push_str("</section>");
    }
    unmatched(&mut page, c);
    super::html::end_page(&mut page);
    page
}

/// The heading and the two runs: directory, kind, title, start, command line.
fn sides(page: &mut String, c: &CompareDoc, a: &LabReport, b: &LabReport) {
    page.push_str(r#"<header><h1>lockstep compare</h1><p class="lead">Each figure of run A and run B, the ratio B/A and the better one in green (lower is better for every figure: latency, jitter, spread, loss, slips).</p><div class="wide"><table class="sides"><thead><tr><th class="l"></th><th class="l">Directory</th><th class="l">Kind</th><th class="l">Run</th><th class="l">Started</th><th class="l">Command</th></tr></thead><tbody>"#);
    for (i, name, s, r) in [(0, "A", &c.a, a), (1, "B", &c.b, b)] {
        side_row(page, i, name, s, r);
    }
    page.push_str("</tbody></table></div></header>");
}

fn side_row(page: &mut String, i: usize, name: &str, s: &SideInfo, r: &LabReport) {
    let tfs: Vec<String> = r
        .runs
        .iter()
        .map(|run| match run.tf_ns {
            Some(tf) => format!("{} (TF {})", run.label, fmt_tf(tf)),
            None => run.label.clone(),
        })
        .collect();
    let _ = write!(
        page,
        r#"<tr><td class="l">{}<b>{name}</b></td><td class="l">{}</td><td class="l">{}</td><td class="l">{}<br><span class="nodata">{}</span></td><td class="l">{}</td><td class="l"><code>{}</code></td></tr>"#,
        run_swatch(i),
        esc(&s.dir),
        esc(&s.kind),
        esc(&s.title),
        esc(&tfs.join(", ")),
        esc(&s.started_at),
        esc(&shell_line(&r.command)),
    );
}

/// One run's table: a row per flow and figure.
fn table(page: &mut String, flows: &[crate::saved::compare::FlowCompare]) {
    page.push_str(r#"<div class="wide"><table><thead><tr><th class="l">Flow</th><th class="l">Figure</th><th>A</th><th>B</th><th>B/A</th><th class="l">Better</th></tr></thead><tbody>"#);
    for f in flows {
        for (i, m) in f.metrics.iter().enumerate() {
            let _ = write!(
                page,
                r#"<tr{}><td class="l">{}</td><td class="l fig">{}</td>{}{}<td class="ratio">{}</td><td class="l">{}</td></tr>"#,
                if i == 0 { r#" class="first""# } else { "" },
                if i == 0 { esc(&f.flow) } else { String::new() },
                esc(m.metric),
                cell(m, Better::A),
                cell(m, Better::B),
                ratio_text(m.ratio),
                better_label(m.better),
            );
        }
    }
    page.push_str("</tbody></table></div>");
}

/// A side's value, green when it is the better one.
fn cell(m: &Metric, this: Better) -> String {
    let v = if this == Better::A { m.a } else { m.b };
    let class = match m.better {
        Some(Better::Same) | None => "",
        Some(b) if b == this => r#" class="better""#,
        Some(_) => r#" class="worse""#,
    };
    let text = match (m.unit, v) {
        ("ns", Some(x)) => super::html::fmt_ns(x.round() as i64),
        _ => value_text(m.unit, v),
    };
    format!("<td{class}>{}</td>", esc(&text))
}

fn better_label(b: Option<Better>) -> &'static str {
    match b {
        Some(Better::A) => "A",
        Some(Better::B) => "B",
        Some(Better::Same) => "same",
        None => "—",
    }
}

/// Per flow both runs' PMF and CCDF, overlaid.
fn charts(
    page: &mut String,
    run: &str,
    (a, b): (&LabReport, &LabReport),
    flows: &[crate::saved::compare::FlowCompare],
    probe: bool,
) {
    page.push_str(r#"<div class="cards">"#);
    for f in flows {
        let (Some(fa), Some(fb)) = (flow(a, run, &f.flow), flow(b, run, &f.flow)) else {
            continue;
        };
        let both = [(0, fa), (1, fb)];
        // a probe's distributions are each their own quantity
        let m = match probe {
            true => Measure {
                quantity: &f.flow,
                items: "samples",
            },
            false => PACKET_LATENCY,
        };
        let legend = format!(
            r#"<span class="legend">{}A</span><span class="legend">{}B</span>"#,
            run_swatch(0),
            run_swatch(1)
        );
        let (pmf, _) = super::html::pmf_chart(&f.flow, &both, m);
        let _ = write!(
            page,
            r#"<figure><figcaption><h3>{} — PMF</h3>{legend}</figcaption>{pmf}</figure>"#,
            esc(&f.flow)
        );
        let ccdf = super::ccdf::chart(&f.flow, &both, m);
        let _ = write!(
            page,
            r#"<figure><figcaption><h3>{} — CCDF</h3>{legend}</figcaption>{ccdf}</figure>"#,
            esc(&f.flow)
        );
    }
    page.push_str("</div>");
}

fn flow<'a>(r: &'a LabReport, run: &str, name: &str) -> Option<&'a FlowReport> {
    r.runs
        .iter()
        .find(|x| x.label == run)?
        .flows
        .iter()
        .find(|f| f.name == name)
}

/// Runs and flows only one side has.
fn unmatched(page: &mut String, c: &CompareDoc) {
    if c.only_in_a.is_empty() && c.only_in_b.is_empty() {
        return;
    }
    page.push_str(r#"<section><h2>Only in one run</h2><ul class="notes">"#);
    for (name, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        for u in list {
            let what = match &u.flow {
                None => format!("run {}", u.run),
                Some(f) => format!("{} flow {f}", u.run),
            };
            let _ = write!(page, "<li>only in {name}: {}</li>", esc(&what));
        }
    }
    page.push_str("</ul></section>");
}
