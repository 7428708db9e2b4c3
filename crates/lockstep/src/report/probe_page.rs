//! The page of a probe's saved result (`lockstep report DIR` of `probe … --output
//! DIR`): the header of report.html, a table of the distributions the probe
//! measured, its counters and warnings, and each distribution's PMF and CCDF.
//! Self-contained like report.html: inline CSS and SVG, no script.

use std::fmt::Write;

use lockstep_core::stats::Summary;
use serde_json::Value;

use super::html::{fmt_count, fmt_opt, head, header, FlowReport, LabReport, Measure};
use super::svg::esc;

/// What the page shows.
#[derive(Debug, Default)]
pub struct ProbePage {
    /// `lockstep probe timer`.
    pub title: String,
    pub generated_at: String,
    pub command: Vec<String>,
    pub host: Value,
    /// The distributions, named as the probe's table names them.
    pub dists: Vec<(String, Summary)>,
    /// The counters of its summary (`overruns`, `stopped by`, …).
    pub facts: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

pub fn render(p: &ProbePage) -> String {
    let top = LabReport {
        title: p.title.clone(),
        generated_at: p.generated_at.clone(),
        command: p.command.clone(),
        host: p.host.clone(),
        ..LabReport::default()
    };
    let mut page = String::with_capacity(64 * 1024);
    head(&mut page, &top);
    header(&mut page, &top);
    table(&mut page, &p.dists);
    facts(&mut page, p);
    charts(&mut page, &p.dists);
    super::html::end_page(&mut page);
    page
}

const KEYS: [&str; 6] = ["50", "90", "99", "99.9", "99.99", "99.999"];

fn table(page: &mut String, dists: &[(String, Summary)]) {
    page.push_str(r#"<section id="summary"><h2>Summary</h2><div class="wide"><table><thead><tr><th class="l">Distribution</th><th>Count</th><th>Min</th>"#);
    for k in KEYS {
        let _ = write!(page, "<th>p{k}</th>");
    }
    page.push_str("<th>Max</th><th>Mean</th><th>Std dev</th></tr></thead><tbody>");
    for (name, s) in dists {
        let _ = write!(
            page,
            r#"<tr><td class="l">{}</td><td>{}</td><td>{}</td>"#,
            esc(name),
            fmt_count(s.count),
            fmt_opt(s.min_ns)
        );
        for k in KEYS {
            let _ = write!(page, "<td>{}</td>", fmt_opt(s.percentile(k)));
        }
        let f = |v: Option<f64>| fmt_opt(v.map(|x| x.round() as i64));
        let _ = write!(
            page,
            "<td>{}</td><td>{}</td><td>{}</td></tr>",
            fmt_opt(s.max_ns),
            f(s.mean_ns),
            f(s.stddev_ns)
        );
    }
    if dists.is_empty() {
        page.push_str(r#"<tr><td class="l" colspan="11"><span class="nodata">no distributions in this result</span></td></tr>"#);
    }
    page.push_str("</tbody></table></div></section>");
}

fn facts(page: &mut String, p: &ProbePage) {
    page.push_str(r#"<section id="run"><h2>Run</h2><dl class="facts">"#);
    for (k, v) in &p.facts {
        let _ = write!(page, "<div><dt>{}</dt><dd>{}</dd></div>", esc(k), esc(v));
    }
    page.push_str("</dl>");
    if !p.warnings.is_empty() {
        page.push_str(r#"<ul class="notes">"#);
        for w in &p.warnings {
            let _ = write!(page, "<li>{}</li>", esc(w));
        }
        page.push_str("</ul>");
    }
    page.push_str("</section>");
}

/// Each distribution's PMF and CCDF, side by side.
fn charts(page: &mut String, dists: &[(String, Summary)]) {
    page.push_str(r#"<section id="charts"><h2>Distributions</h2><p class="lead">Probability of each bin and share of samples above each value (log scales).</p><div class="cards">"#);
    for (name, s) in dists.iter().filter(|(_, s)| s.count > 0) {
        let f = FlowReport {
            name: name.clone(),
            latency: s.clone(),
            ..FlowReport::default()
        };
        let m = Measure {
            quantity: name,
            items: "samples",
        };
        let one = [(0, &f)];
        let (pmf, _) = super::html::pmf_chart(name, &one, m);
        let ccdf = super::ccdf::chart(name, &one, m);
        let _ = write!(
            page,
            r#"<figure><figcaption><h3>{n} — PMF</h3></figcaption>{pmf}</figure><figure><figcaption><h3>{n} — CCDF</h3></figcaption>{ccdf}</figure>"#,
            n = esc(name)
        );
    }
    page.push_str("</div></section>");
}
