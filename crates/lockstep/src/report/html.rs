//! The self-contained `report.html` of a lab run.
//!
//! One page, inline CSS and inline SVG drawn here (see [`super::svg`]): no scripts, no
//! fonts, nothing fetched, so the page opens offline, in a mail attachment or in
//! headless Chromium for a screenshot. The types below are also what the lab writes to
//! `summary.json`, so the page can be re-rendered from a result directory.
//!
//! Everything textual in a report (flow, node and run names, notes, the command line,
//! host facts) comes from user files and is escaped; every section copes with missing
//! data (a flow that received nothing, a run without routers) by saying so.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;

use lockstep_core::stats::Summary;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::svg::{self, esc, n, Axis, Chart};

/// Everything one lab run produced, as the report shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LabReport {
    pub title: String,
    pub scenario: String,
    /// When the report was made (RFC 3339).
    pub generated_at: String,
    /// The exact argument vector.
    pub command: Vec<String>,
    /// Host facts (`lockstep_linux::host::HostFacts` as JSON).
    pub host: Value,
    /// One entry per mode or setting compared (`FIFO`, `TDP`, `TF=250us`).
    pub runs: Vec<RunReport>,
    /// Warnings and remarks for the reader.
    pub notes: Vec<String>,
}

/// One run of the scenario in one mode.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunReport {
    /// `"FIFO"`, `"TDP"`, `"TF=250us"`.
    pub label: String,
    pub tf_ns: Option<i64>,
    pub flows: Vec<FlowReport>,
    /// The routers crossed, in path order where there is one.
    pub hops: Vec<HopReport>,
    /// FIFO: why the flows have no network-calculus bound, when they have none.
    pub bound_note: Option<String>,
}

/// What the receiver measured for one flow.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct FlowReport {
    pub name: String,
    /// True end-to-end latency `L` (never `L mod TF`), with histogram buckets.
    pub latency: Summary,
    pub inter_arrival: Summary,
    /// (time since the start, ΔT), both in ns, decimated to at most ~4000 points
    /// keeping the extremes.
    pub inter_arrival_series: Vec<(i64, i64)>,
    /// The decomposition split, in path order: `L_I`, `L_Tx`, links, residences, `L_Rx`.
    pub decomposition: Vec<Component>,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub slips: u64,
    /// TDP: the window the schedule promises and the packets outside it, traced.
    pub window: Option<super::window::WindowReport>,
    /// FIFO: the network-calculus bound of the network part of the delay (ns).
    pub bound_ns: Option<i64>,
}

/// One part of the latency split (`"L_I"`, `"link R1→R2"`, `"R1 residence"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Component {
    pub name: String,
    pub summary: Summary,
}

/// One router's counters in a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HopReport {
    pub node: String,
    /// Frame slips at this hop, per flow name.
    pub slips_per_flow: Vec<(String, u64)>,
    pub forwarded: u64,
    pub dropped: u64,
    pub padding_sent: u64,
    pub best_effort_forwarded: u64,
    /// Frame-timer wake-up latency of the node.
    pub wakeup: Option<Summary>,
}

impl LabReport {
    /// The report of a lab run that wrote `doc` (the result document): its command, start and host,
    /// the `runs` to show and the printed `table` as notes.
    pub fn for_doc(
        title: String,
        scenario: &str,
        doc: &crate::report::ResultDoc,
        runs: Vec<RunReport>,
        table: &str,
    ) -> LabReport {
        LabReport {
            title,
            scenario: scenario.to_string(),
            generated_at: doc.started_at.clone(),
            command: doc.command.clone(),
            host: serde_json::to_value(&doc.host).unwrap_or(Value::Null),
            runs,
            notes: table.lines().map(str::to_string).collect(),
        }
    }
}

/// A distribution of a result document (`{"count", "min_ns", …}`), empty when absent.
pub fn summary_of(v: &Value) -> Summary {
    serde_json::from_value(v.clone()).unwrap_or_default()
}

/// The latency split `(label, key)` of a result object, for the parts it has.
pub fn components(res: &Value, parts: &[(&str, &str)]) -> Vec<Component> {
    parts
        .iter()
        .filter(|(_, k)| res[*k].is_object())
        .map(|(name, k)| Component {
            name: name.to_string(),
            summary: summary_of(&res[*k]),
        })
        .collect()
}

/// One colour per run (Okabe–Ito: distinguishable with colour-blindness; the first
/// run, usually FIFO, in vermillion, the second, usually TDP, in blue).
pub(super) const RUN_COLORS: [&str; 8] = [
    "#D55E00", "#0072B2", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#7F7F7F", "#000000",
];
/// One colour per flow (frame slips per hop).
const FLOW_COLORS: [&str; 10] = [
    "#4E79A7", "#F28E2B", "#59A14F", "#E15759", "#B07AA1", "#76B7B2", "#EDC948", "#9C755F",
    "#FF9DA7", "#BAB0AC",
];
/// Latency components are coloured by role, so the same kind of time looks the same
/// in every flow: the end-host parts in warm colours, wire time in greys, router
/// residence in cool colours (one per router along the path).
const RESIDENCE_COLORS: [&str; 5] = ["#4E79A7", "#76B7B2", "#59A14F", "#B07AA1", "#9C755F"];
const LINK_COLORS: [&str; 5] = ["#CFCAC5", "#9D9891", "#D9C7A7", "#B5ACA3", "#E4DCD2"];
/// Components the report does not recognise by name.
const OTHER_COLORS: [&str; 6] = [
    "#8DA0CB", "#E78AC3", "#A6D854", "#E5C494", "#66C2A5", "#FC8D62",
];

/// Colours for the components of one flow, in order.
fn component_colors(names: &[String]) -> Vec<&'static str> {
    let (mut residence, mut link, mut other) = (0, 0, 0);
    let next = |counter: &mut usize, palette: &[&'static str]| {
        let c = color(palette, *counter);
        *counter += 1;
        c
    };
    names
        .iter()
        .map(|name| {
            let lower = name.to_ascii_lowercase();
            match lower.as_str() {
                "l_i" => "#F28E2B",
                "l_tx" => "#EDC948",
                "l_rx" => "#E15759",
                "delta" => next(&mut link, &LINK_COLORS),
                _ if lower.contains("residence") => next(&mut residence, &RESIDENCE_COLORS),
                _ if lower.starts_with("link") || lower.starts_with("wire") => {
                    next(&mut link, &LINK_COLORS)
                }
                _ => next(&mut other, &OTHER_COLORS),
            }
        })
        .collect()
}

/// Dark text on light fills, white on dark ones.
fn text_color_on(fill: &str) -> &'static str {
    let hex = fill.trim_start_matches('#');
    let channel = |i: usize| {
        hex.get(i..i + 2)
            .and_then(|h| u8::from_str_radix(h, 16).ok())
            .map_or(0.5, |v| v as f64 / 255.0)
    };
    let luma = 0.299 * channel(0) + 0.587 * channel(2) + 0.114 * channel(4);
    if luma < 0.55 {
        "#ffffff"
    } else {
        "#1d2330"
    }
}

pub(super) fn color(palette: &[&'static str], i: usize) -> &'static str {
    palette
        .get(i % palette.len().max(1))
        .copied()
        .unwrap_or("#888888")
}

/// Chart canvas width in SVG user units; the page shows two charts side by side at
/// about this size on a laptop screen.
pub(super) const CHART_W: f64 = 620.0;

/// Renders the whole page.
pub fn render(report: &LabReport) -> String {
    let names = Names::of(report);
    let mut page = String::with_capacity(256 * 1024);
    head(&mut page, report);
    header(&mut page, report);
    if report.runs.is_empty() {
        page.push_str(r#"<section><p class="empty">This report holds no runs.</p></section>"#);
    } else {
        super::verdict::glance_section(&mut page, report);
        summary_section(&mut page, report);
        if report.runs.len() >= 2 {
            comparison_section(&mut page, report, &names);
        }
        latency_section(&mut page, report, &names);
        super::ccdf::ccdf_section(&mut page, report, &names);
        super::verdict::outliers_section(&mut page, report);
        decomposition_section(&mut page, report, &names);
        inter_arrival_section(&mut page, report, &names);
        slips_section(&mut page, report, &names);
    }
    end_page(&mut page);
    page
}

/// The footer every page of lockstep ends with, and the end of the document.
pub(crate) fn end_page(page: &mut String) {
    let _ = writeln!(
        page,
        r#"<footer>lockstep {} · a self-contained page: no scripts, nothing fetched</footer></main></body></html>"#,
        env!("CARGO_PKG_VERSION")
    );
}

/// Flow names across all runs, in order of first appearance; the position picks the
/// flow's colour, so a flow keeps its colour in every chart.
pub(super) struct Names {
    pub(super) flows: Vec<String>,
    /// Name → position in `flows`.
    position: HashMap<String, usize>,
    /// Per run: name → index of its first flow of that name.
    in_run: Vec<HashMap<String, usize>>,
}

impl Names {
    fn of(report: &LabReport) -> Names {
        let mut flows: Vec<String> = Vec::new();
        let mut position: HashMap<String, usize> = HashMap::new();
        let mut add = |name: &str| {
            if !position.contains_key(name) {
                position.insert(name.to_string(), flows.len());
                flows.push(name.to_string());
            }
        };
        for run in &report.runs {
            for f in &run.flows {
                add(&f.name);
            }
        }
        for run in &report.runs {
            for h in &run.hops {
                for (f, _) in &h.slips_per_flow {
                    add(f);
                }
            }
        }
        let in_run = report
            .runs
            .iter()
            .map(|run| {
                let mut m = HashMap::new();
                for (i, f) in run.flows.iter().enumerate() {
                    m.entry(f.name.clone()).or_insert(i);
                }
                m
            })
            .collect();
        Names {
            flows,
            position,
            in_run,
        }
    }

    fn flow_color(&self, name: &str) -> &'static str {
        let i = self.position.get(name).copied().unwrap_or(0);
        color(&FLOW_COLORS, i)
    }

    /// The first flow called `name` of run `ri`.
    fn find<'a>(&self, report: &'a LabReport, ri: usize, name: &str) -> Option<&'a FlowReport> {
        let i = *self.in_run.get(ri)?.get(name)?;
        report.runs.get(ri)?.flows.get(i)
    }

    /// Every run's flow called `name`, with the run's index.
    pub(super) fn across<'a>(
        &self,
        report: &'a LabReport,
        name: &str,
    ) -> Vec<(usize, &'a FlowReport)> {
        (0..report.runs.len())
            .filter_map(|ri| self.find(report, ri, name).map(|f| (ri, f)))
            .collect()
    }
}

// ---------------------------------------------------------------------------------
// Formatting

/// A nanosecond value in a compact unit: `850 ns`, `12.35 µs`, `1.235 ms`, `2.500 s`.
pub fn fmt_ns(ns: i64) -> String {
    fmt_ns_f(ns as f64)
}

fn fmt_ns_f(ns: f64) -> String {
    let a = ns.abs();
    if !ns.is_finite() {
        "—".into()
    } else if a < 999.5 {
        format!("{} ns", ns.round())
    } else if a < 999_995.0 {
        // Where the rounded value would print as "1000.00", the next unit instead.
        format!("{:.2} µs", ns / 1e3)
    } else if a < 999_999_500.0 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// A frame length as a scenario would write it: `250 µs`, `1.5 ms`, else [`fmt_ns`].
pub(super) fn fmt_tf(ns: i64) -> String {
    match ns {
        1_000..=999_999 if ns % 1_000 == 0 => format!("{} µs", ns / 1_000),
        1_000_000..=999_999_999 if ns % 100_000 == 0 => format!("{} ms", ns as f64 / 1e6),
        _ => fmt_ns(ns),
    }
}

pub(super) fn fmt_opt(v: Option<i64>) -> String {
    v.map(fmt_ns).unwrap_or_else(|| "—".into())
}

/// A count with thin-space thousands separators: `1 234 567`.
pub(super) fn fmt_count(v: u64) -> String {
    let digits = v.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push('\u{202f}');
        }
        out.push(c);
    }
    out
}

/// Lost packets with their share of those sent: `12 (0.12 %)`.
fn fmt_loss(lost: u64, sent: u64) -> String {
    if sent == 0 {
        fmt_count(lost)
    } else {
        let pct = lost as f64 * 100.0 / sent as f64;
        let pct = if pct == 0.0 {
            "0".to_string()
        } else if pct < 0.01 {
            format!("{pct:.1e}")
        } else {
            format!("{pct:.2}")
        };
        format!("{} ({pct} %)", fmt_count(lost))
    }
}

/// `a / b` as `24.0×`; `∞` when only `b` is 0, `—` when both are or either is missing.
pub fn fmt_ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => {
            format!("{:.1}×", a / b)
        }
        (Some(a), Some(b)) if b == 0.0 && a > 0.0 => "∞".into(),
        _ => "—".into(),
    }
}

/// A comparison's ratio cell, in the colour of the run that did better (lower is
/// better for every compared figure): the second run's above 1, the first's below.
fn ratio_cell(a: Option<f64>, b: Option<f64>) -> String {
    let better = match (a, b) {
        (Some(a), Some(b)) if a > b => Some(1),
        (Some(a), Some(b)) if a < b => Some(0),
        _ => None,
    };
    let style = better.map_or(String::new(), |i| {
        format!(r#" style="color:{}""#, color(&RUN_COLORS, i))
    });
    format!(r#"<td class="ratio"{style}>{}</td>"#, fmt_ratio(a, b))
}

/// The command line as a shell would take it back: arguments with special characters
/// in single quotes.
pub(super) fn shell_line(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The display unit for nanosecond values up to `max_abs`: µs below 10 ms, ms below
/// 10 s, else s.
pub(super) fn unit_for(max_abs: f64) -> (f64, &'static str) {
    if max_abs < 1e7 {
        (1e3, "µs")
    } else if max_abs < 1e10 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    }
}

/// Host facts as `(key, value)` rows: nested objects flattened to `a.b` keys (two
/// levels), lists joined, empty values left out.
fn flatten_facts(prefix: &str, v: &Value, depth: usize, out: &mut Vec<(String, String)>) {
    let text = match v {
        Value::Null => return,
        Value::Bool(b) => (if *b { "yes" } else { "no" }).to_string(),
        Value::Number(x) => x.to_string(),
        Value::String(s) if s.is_empty() => return,
        Value::String(s) => s.clone(),
        Value::Array(items) if items.is_empty() => return,
        Value::Array(items) => items
            .iter()
            .map(|i| match i {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(map) if depth < 2 => {
            for (k, child) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten_facts(&key, child, depth + 1, out);
            }
            return;
        }
        Value::Object(_) => v.to_string(),
    };
    let key = if prefix.is_empty() { "host" } else { prefix };
    out.push((key.to_string(), text));
}

// ---------------------------------------------------------------------------------
// Page frame

pub(super) const CSS: &str = r#"
:root{--fg:#1d2330;--muted:#5b6472;--line:#d9dee5;--bg:#f4f6f8;--card:#fff;--accent:#0072B2}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1320px;margin:0 auto;padding:24px 28px 40px}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:19px;margin:34px 0 6px;padding-bottom:4px;border-bottom:2px solid var(--line)}
h3{font-size:15px;margin:0 0 6px}
p.lead{color:var(--muted);margin:0 0 12px}
.meta{display:flex;flex-wrap:wrap;gap:6px 22px;color:var(--muted);margin:6px 0 10px}
.meta b{color:var(--fg);font-weight:600}
pre.cmd{background:#1d2330;color:#e8ecf1;padding:8px 12px;border-radius:6px;overflow-x:auto;white-space:pre-wrap;word-break:break-all;font:12.5px/1.4 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;margin:8px 0}
details.host{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:6px 12px;margin:10px 0}
details.host summary{cursor:pointer;font-weight:600}
dl.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(300px,1fr));gap:2px 24px;margin:8px 0 4px;font-size:12.5px}
dl.facts div{display:flex;gap:8px;border-bottom:1px dotted var(--line);padding:2px 0;min-width:0}
dl.facts dt{color:var(--muted);flex:0 0 130px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
dl.facts dd{margin:0;overflow-wrap:anywhere}
ul.glance{margin:6px 0 10px;padding-left:20px;font-size:15px}
ul.glance li{margin:3px 0}
details.notes{background:#fff8e6;border:1px solid #f0d9a0;border-radius:8px;padding:6px 12px;margin:10px 0}
details.notes summary{cursor:pointer;font-weight:600}
details.notes ul{margin:6px 0;padding-left:20px}
ul.notes{background:#fff8e6;border:1px solid #f0d9a0;border-radius:8px;padding:8px 12px 8px 30px;margin:10px 0}
nav{display:flex;flex-wrap:wrap;gap:4px 16px;margin:12px 0 0;font-size:13px}
nav a{color:var(--accent);text-decoration:none}
table{border-collapse:collapse;background:var(--card);font-variant-numeric:tabular-nums;font-size:13px}
th,td{padding:4px 10px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
th{background:#eef1f5;font-weight:600;color:#30363f}
th.l,td.l{text-align:left}
tr.first td{border-top:2px solid #c9d0da}
td.ratio{font-weight:700}
.wide{overflow-x:auto;border:1px solid var(--line);border-radius:8px}
.wide table{width:100%}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:16px;margin-top:12px}
figure,.card{margin:0;background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px 8px;min-width:0}
figcaption{display:flex;flex-wrap:wrap;align-items:baseline;gap:4px 14px;margin-bottom:4px}
figcaption h3{margin:0 8px 0 0}
.legend{display:inline-flex;align-items:center;gap:5px;font-size:12.5px;color:#30363f}
.sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:5px;vertical-align:-1px}
.legend .sw{margin-right:0}
.sw.mark{width:3px;background:#1d2330;border-radius:0}
p.caption{color:var(--muted);font-size:12px;margin:4px 0 0}
p.empty{color:var(--muted);font-style:italic}
.card table{width:100%}
.card .wide,figure .wide{margin-top:8px}
.card th,.card td,figure th,figure td{padding:3px 7px;font-size:12.5px}
.card th,figure th{white-space:normal;vertical-align:bottom}
span.nodata{color:#8a929e;font-style:italic}
svg.chart{width:100%;height:auto;display:block}
svg .plot{fill:#fff}
svg .grid{stroke:#e3e7ed;fill:none}
svg .minor{stroke:#f1f3f6;fill:none}
svg .axis{stroke:#59606b;fill:none}
svg .tick{font-size:11px;fill:#4a515c}
svg .atitle{font-size:12px;fill:#2b313a;font-weight:600}
svg .nodata{font-size:14px;fill:#8a929e;font-style:italic}
svg .val{font-size:10.5px;fill:#1d2330}
svg .dots{fill:none;stroke-linecap:round}
footer{margin-top:40px;color:var(--muted);font-size:12px;text-align:center}
"#;

pub(super) fn head(page: &mut String, report: &LabReport) {
    let title = if report.title.is_empty() {
        "lockstep lab report"
    } else {
        &report.title
    };
    let _ = write!(
        page,
        r#"<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>{}</title><style>{CSS}</style></head><body><main>"#,
        esc(title)
    );
}

pub(super) fn header(page: &mut String, report: &LabReport) {
    let title = if report.title.is_empty() {
        "lockstep lab report"
    } else {
        &report.title
    };
    let _ = write!(page, "<header><h1>{}</h1><div class=\"meta\">", esc(title));
    if !report.scenario.is_empty() {
        let _ = write!(
            page,
            "<span>Scenario <b>{}</b></span>",
            esc(&report.scenario)
        );
    }
    if !report.generated_at.is_empty() {
        let _ = write!(
            page,
            "<span>Generated <b>{}</b></span>",
            esc(&report.generated_at)
        );
    }
    let runs: Vec<String> = report
        .runs
        .iter()
        .map(|r| match r.tf_ns {
            Some(tf) => format!("{} (TF {})", esc(&r.label), fmt_tf(tf)),
            None => esc(&r.label),
        })
        .collect();
    if !runs.is_empty() {
        let _ = write!(page, "<span>Runs <b>{}</b></span>", runs.join(", "));
    }
    page.push_str("</div>");
    if !report.command.is_empty() {
        let _ = write!(
            page,
            r#"<pre class="cmd">$ {}</pre>"#,
            esc(&shell_line(&report.command))
        );
    }
    let mut facts = Vec::new();
    flatten_facts("", &report.host, 0, &mut facts);
    if !facts.is_empty() {
        page.push_str(r#"<details class="host"><summary>Host facts</summary><dl class="facts">"#);
        for (k, v) in &facts {
            let _ = write!(
                page,
                r#"<div><dt title="{k}">{k}</dt><dd>{}</dd></div>"#,
                esc(v),
                k = esc(k)
            );
        }
        page.push_str("</dl></details>");
    }
    if report.runs.is_empty() && !report.notes.is_empty() {
        page.push_str(r#"<ul class="notes">"#);
        for note in &report.notes {
            let _ = write!(page, "<li>{}</li>", esc(note));
        }
        page.push_str("</ul>");
    }
    if !report.runs.is_empty() {
        page.push_str(r##"<nav><a href="#glance">At a glance</a><a href="#summary">Summary</a>"##);
        if report.runs.len() >= 2 {
            page.push_str(r##"<a href="#comparison">Comparison</a>"##);
        }
        page.push_str(
            r##"<a href="#latency">Latency PMF</a><a href="#ccdf">Latency CCDF</a><a href="#outliers">Outliers</a><a href="#decomposition">Decomposition</a><a href="#inter-arrival">Inter-arrival</a><a href="#slips">Frame slips</a></nav>"##,
        );
    }
    page.push_str("</header>");
}

pub(super) fn run_swatch(i: usize) -> String {
    format!(
        r#"<span class="sw" style="background:{}"></span>"#,
        color(&RUN_COLORS, i)
    )
}

// ---------------------------------------------------------------------------------
// Tables

fn summary_section(page: &mut String, report: &LabReport) {
    page.push_str(r#"<section id="summary"><h2>Summary</h2><p class="lead">End-to-end latency L per run and flow; jitter is max − min of L.</p><div class="wide"><table><thead><tr><th class="l">Run</th><th class="l">Flow</th><th>Sent</th><th>Received</th><th>p50</th><th>p99</th><th>Max</th><th>Jitter</th><th>Loss</th><th>Slips</th></tr></thead><tbody>"#);
    for (ri, run) in report.runs.iter().enumerate() {
        if run.flows.is_empty() {
            let _ = write!(
                page,
                r#"<tr class="first"><td class="l">{}{}</td><td class="l" colspan="9"><span class="nodata">no flows</span></td></tr>"#,
                run_swatch(ri),
                esc(&run.label)
            );
        }
        for (fi, f) in run.flows.iter().enumerate() {
            let l = &f.latency;
            let stats = if l.count == 0 {
                r#"<td colspan="4"><span class="nodata">no data</span></td>"#.to_string()
            } else {
                format!(
                    "<td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
                    fmt_opt(l.percentile("50")),
                    fmt_opt(l.percentile("99")),
                    fmt_opt(l.max_ns),
                    fmt_opt(l.jitter_ns)
                )
            };
            let _ = write!(
                page,
                r#"<tr{}><td class="l">{}{}</td><td class="l">{}</td><td>{}</td><td>{}</td>{stats}<td>{}</td><td>{}</td></tr>"#,
                if fi == 0 { r#" class="first""# } else { "" },
                run_swatch(ri),
                esc(&run.label),
                esc(&f.name),
                fmt_count(f.sent),
                fmt_count(f.received),
                fmt_loss(f.lost, f.sent),
                fmt_count(f.slips),
            );
        }
    }
    page.push_str("</tbody></table></div></section>");
}

fn comparison_section(page: &mut String, report: &LabReport, names: &Names) {
    let (Some(a), Some(b)) = (report.runs.first(), report.runs.get(1)) else {
        return;
    };
    let ratio_head = format!("{}/<wbr>{}", esc(&a.label), esc(&b.label));
    // Cards wide enough for a column per run and the ratio.
    let card_px = (190 + 100 * (report.runs.len() + 1)).min(1260);
    let _ = write!(
        page,
        r#"<section id="comparison"><h2>Comparison</h2><p class="lead">Each run side by side per flow; the last column is the first run over the second ({ratio_head}), in the colour of the run that did better (lower is better).</p><div class="cards" style="grid-template-columns:repeat(auto-fill,minmax({card_px}px,1fr))">"#,
    );
    for name in &names.flows {
        let flows: Vec<Option<&FlowReport>> = (0..report.runs.len())
            .map(|ri| names.find(report, ri, name))
            .collect();
        if flows.iter().all(Option::is_none) {
            continue;
        }
        let _ = write!(
            page,
            r#"<div class="card"><h3>{}</h3><table><thead><tr><th class="l"></th>"#,
            esc(name)
        );
        for (ri, run) in report.runs.iter().enumerate() {
            let _ = write!(page, "<th>{}{}</th>", run_swatch(ri), esc(&run.label));
        }
        let _ = write!(page, "<th>{ratio_head}</th></tr></thead><tbody>");
        let first = flows.first().copied().flatten();
        let second = flows.get(1).copied().flatten();
        type Metric = (
            &'static str,
            fn(&FlowReport) -> String,
            fn(&FlowReport) -> Option<f64>,
        );
        let metrics: [Metric; 4] = [
            (
                "Jitter (max − min)",
                |f| fmt_opt(f.latency.jitter_ns),
                |f| f.latency.jitter_ns.map(|v| v as f64),
            ),
            (
                "p99",
                |f| fmt_opt(f.latency.percentile("99")),
                |f| f.latency.percentile("99").map(|v| v as f64),
            ),
            (
                "Loss",
                |f| fmt_loss(f.lost, f.sent),
                |f| Some(f.lost as f64),
            ),
            ("Slips", |f| fmt_count(f.slips), |f| Some(f.slips as f64)),
        ];
        for (label, show, value) in metrics {
            let _ = write!(page, r#"<tr><td class="l">{label}</td>"#);
            for f in &flows {
                match f {
                    Some(f) => {
                        let _ = write!(page, "<td>{}</td>", show(f));
                    }
                    None => page.push_str(r#"<td><span class="nodata">absent</span></td>"#),
                }
            }
            let (a, b) = (first.and_then(value), second.and_then(value));
            let _ = write!(page, "{}</tr>", ratio_cell(a, b));
        }
        page.push_str("</tbody></table></div>");
    }
    page.push_str("</div></section>");
}

// ---------------------------------------------------------------------------------
// Latency PMF

/// How histogram buckets are grouped into the bars of a PMF plot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Binning {
    /// Bins of a power-of-two width, aligned to multiples of it: every histogram
    /// bucket (whose width is a power of two dividing its bounds) falls in exactly
    /// one bin, so the plot has no aliasing combs.
    Linear { width: i64 },
    /// Sixteen bins per power of two (positive values only), for a log x axis.
    Log,
}

impl Binning {
    /// Chooses log bins when all values are positive and span at least 50×; else linear
    /// bins about 1/120 of the range wide, never narrower than the histogram's own
    /// buckets near the top of the range.
    fn choose(lo: i64, hi: i64) -> Binning {
        if lo > 0 && hi / lo >= 50 {
            return Binning::Log;
        }
        let range = hi.saturating_sub(lo).max(0) as u64;
        let top = lo.unsigned_abs().max(hi.unsigned_abs());
        let bucket = if top < 256 {
            1
        } else {
            1u64 << (63 - top.leading_zeros() - 7)
        };
        let want = range.div_ceil(120).max(bucket).max(1);
        let width = want.checked_next_power_of_two().unwrap_or(1 << 62);
        Binning::Linear {
            width: width.min(1 << 62) as i64,
        }
    }

    /// The bin `[lo, hi)` holding `v`.
    fn bin(self, v: i64) -> (i64, i64) {
        match self {
            Binning::Linear { width } => {
                let lo = v.div_euclid(width).saturating_mul(width);
                (lo, lo.saturating_add(width))
            }
            Binning::Log => {
                if v <= 0 {
                    return (v, v.saturating_add(1));
                }
                let e = 63 - (v as u64).leading_zeros();
                if e < 4 {
                    (v, v + 1)
                } else {
                    let w = 1i64 << (e - 4);
                    let lo = v & !(w - 1);
                    (lo, lo.saturating_add(w))
                }
            }
        }
    }
}

/// One PMF bin: `[lo, hi)` in ns and its probability.
type Bin = (i64, i64, f64);

/// The PMF of a distribution over the given bins: `(bin lo, bin hi, probability)` for
/// the non-empty bins, in increasing order.
fn pmf(s: &Summary, binning: Binning) -> Vec<Bin> {
    let h = &s.histogram;
    let total: u64 = h.count.iter().fold(0u64, |a, &c| a.saturating_add(c));
    if total == 0 {
        return Vec::new();
    }
    let mut bins: BTreeMap<i64, (i64, u64)> = BTreeMap::new();
    for (&v, &c) in h.bucket_ns.iter().zip(&h.count) {
        if c == 0 {
            continue;
        }
        let (lo, hi) = binning.bin(v);
        let e = bins.entry(lo).or_insert((hi, 0));
        e.1 = e.1.saturating_add(c);
    }
    bins.into_iter()
        .map(|(lo, (hi, c))| (lo, hi, c as f64 / total as f64))
        .collect()
}

/// Lowest and highest histogram bucket of a distribution (and its max).
fn value_range(s: &Summary) -> Option<(i64, i64)> {
    let h = &s.histogram;
    let mut it = h
        .bucket_ns
        .iter()
        .zip(&h.count)
        .filter(|(_, &c)| c > 0)
        .map(|(&v, _)| v);
    let first = it.next()?;
    let (lo, hi) = it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v)));
    Some((lo, s.max_ns.map_or(hi, |m| m.max(hi))))
}

fn latency_section(page: &mut String, report: &LabReport, names: &Names) {
    page.push_str(r#"<section id="latency"><h2>End-to-end latency PMF</h2><p class="lead">Probability of each latency bin (log scale), all runs overlaid; the shaded band between dashed lines is the window a TDP run's schedule promises, a dotted line a FIFO flow's network-calculus bound (the network's part of the delay, where one can be computed).</p><div class="cards">"#);
    for name in &names.flows {
        let flows: Vec<(usize, &FlowReport)> = names.across(report, name);
        if flows.is_empty() {
            continue;
        }
        let _ = write!(page, "<figure><figcaption><h3>{}</h3>", esc(name));
        for &(ri, f) in &flows {
            let l = &f.latency;
            let detail = if l.count == 0 {
                "no data".to_string()
            } else {
                format!(
                    "p50 {}, p99 {}",
                    fmt_opt(l.percentile("50")),
                    fmt_opt(l.percentile("99"))
                )
            };
            let _ = write!(
                page,
                r#"<span class="legend">{}{} <span style="color:#5b6472">{}</span></span>"#,
                run_swatch(ri),
                esc(report.runs.get(ri).map_or("", |r| r.label.as_str())),
                detail
            );
        }
        page.push_str("</figcaption>");
        let (svg, caption) = pmf_chart(name, &flows, PACKET_LATENCY);
        page.push_str(&svg);
        if !caption.is_empty() {
            let _ = write!(page, r#"<p class="caption">{caption}</p>"#);
        }
        page.push_str("</figure>");
    }
    page.push_str("</div></section>");
}

/// What a chart's values are: the `quantity` of each of the `items`.
#[derive(Clone, Copy, Debug)]
pub struct Measure<'a> {
    /// `end-to-end latency L`, `wake-up latency`.
    pub quantity: &'a str,
    /// `packets`, `samples`.
    pub items: &'a str,
}

/// The lab's and the simulator's charts: each packet's latency.
pub const PACKET_LATENCY: Measure<'static> = Measure {
    quantity: "end-to-end latency L",
    items: "packets",
};

pub(super) fn pmf_chart(
    name: &str,
    flows: &[(usize, &FlowReport)],
    m: Measure,
) -> (String, String) {
    let windows: Vec<(usize, i64, i64)> = flows
        .iter()
        .filter_map(|&(ri, f)| f.window.as_ref().map(|w| (ri, w.low_ns, w.high_ns)))
        .collect();
    let bounds: Vec<(usize, i64)> = flows
        .iter()
        .filter_map(|&(ri, f)| f.bound_ns.map(|b| (ri, b)))
        .collect();
    let range = flows
        .iter()
        .filter_map(|(_, f)| value_range(&f.latency))
        .chain(windows.iter().map(|&(_, lo, hi)| (lo, hi)))
        .chain(bounds.iter().map(|&(_, b)| (b, b)))
        .reduce(|(a, b), (c, d)| (a.min(c), b.max(d)));
    let Some((lo, hi)) = range else {
        return (
            empty_chart(260.0, "no data", &format!("{name}: no data")),
            String::new(),
        );
    };
    let binning = Binning::choose(lo, hi);
    let series: Vec<(usize, Vec<Bin>)> = flows
        .iter()
        .map(|&(ri, f)| (ri, pmf(&f.latency, binning)))
        .collect();
    let bins = series.iter().flat_map(|(_, s)| s.iter());
    let x_lo = bins.clone().map(|b| b.0).min().unwrap_or(lo);
    let x_hi = bins.clone().map(|b| b.1).max().unwrap_or(hi);
    let p_min = bins.clone().map(|b| b.2).fold(1.0f64, f64::min);
    let p_max = bins.map(|b| b.2).fold(0.0f64, f64::max);
    let (div, unit) = unit_for(x_lo.unsigned_abs().max(x_hi.unsigned_abs()) as f64);
    let x_title = format!("{} ({unit})", m.quantity);
    let x = match binning {
        Binning::Log => Axis::log(
            x_lo as f64 / div,
            x_hi as f64 / div,
            4,
            &x_title,
            svg::plain_label,
        ),
        Binning::Linear { .. } => Axis::linear(x_lo as f64 / div, x_hi as f64 / div, 6, &x_title),
    };
    // The top is the power of ten above the highest bin (at most probability 1).
    let y_hi = 10f64
        .powi((p_max.log10() - 1e-9).ceil() as i32)
        .clamp(p_max, 1.0);
    let y = Axis::log(p_min / 2.0, y_hi, 2, "probability", svg::sci_label);
    let chart = Chart {
        width: CHART_W,
        height: 280.0,
        left: 62.0,
        right: 18.0,
        top: 30.0,
        bottom: 44.0,
        x,
        y,
    };
    let mut s = chart.open(&format!("latency PMF of {name}"));
    let floor = chart.y_end();
    // Overlaid fills darken each other: fainter the more runs there are.
    let opacity = 0.26 / series.len().max(2) as f64;
    for (ri, bins) in &series {
        if bins.is_empty() {
            continue;
        }
        let c = color(&RUN_COLORS, *ri);
        let px = |v: i64| chart.px(v as f64 / div);
        let mut d = String::new();
        let mut prev_hi: Option<i64> = None;
        for &(blo, bhi, p) in bins {
            let y = chart.py(p);
            match prev_hi {
                None => {
                    let _ = write!(d, "M{} {}", n(px(blo)), n(floor));
                }
                Some(ph) if ph < blo => {
                    let _ = write!(d, "V{}H{}", n(floor), n(px(blo)));
                }
                Some(_) => {}
            }
            let _ = write!(d, "V{}H{}", n(y), n(px(bhi)));
            prev_hi = Some(bhi);
        }
        let _ = write!(d, "V{}Z", n(floor));
        let _ = write!(
            s,
            r#"<path d="{d}" fill="{c}" fill-opacity="{opacity:.2}" stroke="{c}" stroke-width="1.5" stroke-linejoin="round"/>"#
        );
    }
    for &(ri, lo, hi) in &windows {
        window_band(
            &mut s,
            &chart,
            color(&RUN_COLORS, ri),
            lo as f64 / div,
            hi as f64 / div,
        );
    }
    for &(ri, b) in &bounds {
        bound_line(&mut s, &chart, color(&RUN_COLORS, ri), b as f64 / div);
    }
    s.push_str(Chart::close());
    let caption = match binning {
        Binning::Linear { width } => format!("Bins {} wide.", fmt_ns(width)),
        Binning::Log => "Log x axis (values span more than 50×); 16 bins per doubling.".into(),
    };
    (s, caption)
}

/// A TDP run's window on a latency chart: its two ends dashed, the span shaded.
fn window_band(s: &mut String, chart: &Chart, c: &str, lo: f64, hi: f64) {
    let (x0, x1) = (chart.px(lo), chart.px(hi));
    let (top, bottom) = (chart.top, chart.y_end());
    let _ = write!(
        s,
        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{c}" fill-opacity="0.06"/>"#,
        n(x0),
        n(top),
        n((x1 - x0).max(0.0)),
        n(bottom - top)
    );
    for x in [x0, x1] {
        s.push_str(&chart.marker(x, c, "5 4", "", 0.0));
    }
    let _ = write!(
        s,
        r#"<text class="val" x="{}" y="{}" text-anchor="middle">TDP window</text>"#,
        n((x0 + x1) / 2.0),
        n(top + 12.0)
    );
}

/// A FIFO run's network-calculus bound on a latency chart: a dashed line, labelled.
fn bound_line(s: &mut String, chart: &Chart, c: &str, x: f64) {
    s.push_str(&chart.marker(chart.px(x), c, "2 3", "NC bound", 24.0));
}

/// A chart-sized box with a message, for sections without data.
fn empty_chart(height: f64, message: &str, label: &str) -> String {
    let chart = Chart {
        width: CHART_W,
        height,
        left: 20.0,
        right: 20.0,
        top: 20.0,
        bottom: 20.0,
        x: Axis::categories(&[], ""),
        y: Axis::categories(&[], ""),
    };
    let mut s = format!(
        r#"<svg class="chart" viewBox="0 0 {} {}" role="img" aria-label="{}">"#,
        n(chart.width),
        n(chart.height),
        esc(label)
    );
    let _ = write!(
        s,
        r##"<rect x="1" y="1" width="{}" height="{}" fill="#fafbfc" stroke="#e3e7ed" rx="6"/>"##,
        n(chart.width - 2.0),
        n(chart.height - 2.0)
    );
    s.push_str(&chart.message(message));
    s.push_str(Chart::close());
    s
}

// ---------------------------------------------------------------------------------
// Latency decomposition

fn decomposition_section(page: &mut String, report: &LabReport, names: &Names) {
    page.push_str(r#"<section id="decomposition"><h2>Latency decomposition</h2><p class="lead">Where the time goes, in path order: timer wake-up L_I, transmit path L_Tx, links and router residence, receive path L_Rx; one chart per run, each on its own scale. Stacked means add up to the mean of L; each component's own p99, stacked, is usually more than the p99 of L (black mark).</p><div class="cards">"#);
    for name in &names.flows {
        let flows: Vec<(usize, &FlowReport)> = names.across(report, name);
        if flows.is_empty() {
            continue;
        }
        // The flow's components across runs, in path order.
        let mut components: Vec<String> = Vec::new();
        for (_, f) in &flows {
            for c in &f.decomposition {
                if !components.contains(&c.name) {
                    components.push(c.name.clone());
                }
            }
        }
        let colors = component_colors(&components);
        let _ = write!(page, "<figure><figcaption><h3>{}</h3>", esc(name));
        if !components.is_empty() {
            for (c, col) in components.iter().zip(&colors) {
                let _ = write!(
                    page,
                    r#"<span class="legend"><span class="sw" style="background:{col}"></span>{}</span>"#,
                    esc(c)
                );
            }
            page.push_str(
                r#"<span class="legend"><span class="sw mark"></span>end-to-end L</span>"#,
            );
        }
        page.push_str("</figcaption>");
        let palette: Vec<(&str, &'static str)> = components
            .iter()
            .map(String::as_str)
            .zip(colors.iter().copied())
            .collect();
        for &one in &flows {
            page.push_str(&decomposition_chart(report, name, &[one], &palette));
        }
        page.push_str("</figure>");
    }
    page.push_str("</div></section>");
}

/// One bar of the decomposition chart: its label, (component, value ns) segments and
/// the end-to-end value for the mark.
struct Bar {
    label: String,
    segments: Vec<(String, f64)>,
    total: Option<f64>,
}

fn decomposition_chart(
    report: &LabReport,
    name: &str,
    flows: &[(usize, &FlowReport)],
    palette: &[(&str, &'static str)],
) -> String {
    let fill = |c: &str| {
        palette
            .iter()
            .find(|(n, _)| *n == c)
            .map_or("#888888", |p| p.1)
    };
    let mut bars: Vec<Bar> = Vec::new();
    for &(ri, f) in flows {
        let run = report.runs.get(ri).map_or("", |r| r.label.as_str());
        let mean: Vec<(String, f64)> = f
            .decomposition
            .iter()
            .filter_map(|c| Some((c.name.clone(), c.summary.mean_ns?)))
            .collect();
        let p99: Vec<(String, f64)> = f
            .decomposition
            .iter()
            .filter_map(|c| Some((c.name.clone(), c.summary.percentile("99")? as f64)))
            .collect();
        if mean.is_empty() && p99.is_empty() {
            continue;
        }
        bars.push(Bar {
            label: format!("{run} mean"),
            segments: mean,
            total: f.latency.mean_ns,
        });
        bars.push(Bar {
            label: format!("{run} p99"),
            segments: p99,
            total: f.latency.percentile("99").map(|v| v as f64),
        });
    }
    if bars.is_empty() {
        return empty_chart(
            120.0,
            "no decomposition data",
            &format!("{name}: no decomposition"),
        );
    }
    // Positive parts stack rightwards from 0, negative ones (clock disagreement between
    // hosts) leftwards.
    let mut lo = 0.0f64;
    let mut hi = 0.0f64;
    for b in &bars {
        let pos: f64 = b.segments.iter().map(|s| s.1.max(0.0)).sum();
        let neg: f64 = b.segments.iter().map(|s| s.1.min(0.0)).sum();
        hi = hi.max(pos).max(b.total.unwrap_or(0.0));
        lo = lo.min(neg).min(b.total.unwrap_or(0.0));
    }
    let (div, unit) = unit_for(lo.abs().max(hi));
    let labels: Vec<String> = bars.iter().rev().map(|b| b.label.clone()).collect();
    let left = labels
        .iter()
        .map(|l| svg::text_width(l, 11.0))
        .fold(60.0f64, f64::max)
        .min(220.0)
        + 16.0;
    let row = 26.0;
    let chart = Chart {
        width: CHART_W,
        height: 12.0 + 44.0 + row * bars.len() as f64,
        left,
        right: 18.0,
        top: 12.0,
        bottom: 44.0,
        x: Axis::linear(lo / div, hi / div, 6, &format!("latency ({unit})")),
        y: Axis::categories(&labels, ""),
    };
    let mut s = chart.open(&format!("latency decomposition of {name}"));
    let rows = bars.len() as f64;
    for (i, b) in bars.iter().enumerate() {
        let yc = chart.py(rows - i as f64 - 0.5);
        let (bar_h, y0) = (16.0, yc - 8.0);
        let mark = b.total.map(|t| chart.px(t / div));
        let mut pos = 0.0f64;
        let mut neg = 0.0f64;
        for (cname, v) in &b.segments {
            let (from, to) = if *v >= 0.0 {
                pos += v;
                (pos - v, pos)
            } else {
                neg += v;
                (neg, neg - v)
            };
            let x0 = chart.px(from / div);
            let x1 = chart.px(to / div);
            let w = (x1 - x0).abs();
            let _ = write!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="{}" stroke="#fff" stroke-width="0.6"><title>{} · {}: {}</title></rect>"##,
                n(x0.min(x1)),
                n(y0),
                n(w),
                n(bar_h),
                fill(cname),
                esc(&b.label),
                esc(cname),
                fmt_ns_f(*v)
            );
            // The value inside the segment when it fits and the end-to-end mark does
            // not cross it.
            let text = format!("{:.1}", v / div);
            let half = svg::text_width(&text, 10.5) / 2.0 + 3.0;
            let mid = (x0 + x1) / 2.0;
            let clear = mark.is_none_or(|m| (m - mid).abs() > half + 2.0);
            if w > 2.0 * half && clear {
                let _ = write!(
                    s,
                    r#"<text class="val" x="{}" y="{}" text-anchor="middle" fill="{}">{}</text>"#,
                    n(mid),
                    n(yc + 3.5),
                    text_color_on(fill(cname)),
                    text
                );
            }
        }
        if let (Some(t), Some(x)) = (b.total, mark) {
            let _ = write!(
                s,
                r##"<path d="M{} {}v{}" stroke="#1d2330" stroke-width="2.5"><title>{} · end-to-end L: {}</title></path>"##,
                n(x),
                n(y0 - 3.0),
                n(bar_h + 6.0),
                esc(&b.label),
                fmt_ns_f(t)
            );
        }
    }
    s.push_str(Chart::close());
    s
}

// ---------------------------------------------------------------------------------
// Inter-arrival time series

fn inter_arrival_section(page: &mut String, report: &LabReport, names: &Names) {
    page.push_str(r#"<section id="inter-arrival"><h2>Inter-arrival times</h2><p class="lead">Time between consecutive packets of a flow at the receiver, over the run (decimated, extremes kept).</p><div class="cards">"#);
    for name in &names.flows {
        let flows: Vec<(usize, &FlowReport)> = names.across(report, name);
        if flows.is_empty() {
            continue;
        }
        let _ = write!(page, "<figure><figcaption><h3>{}</h3>", esc(name));
        for &(ri, f) in &flows {
            let ia = &f.inter_arrival;
            let detail = if ia.count == 0 && f.inter_arrival_series.is_empty() {
                "no data".to_string()
            } else {
                format!(
                    "mean {}, max − min {}",
                    ia.mean_ns.map_or("—".into(), fmt_ns_f),
                    fmt_opt(ia.jitter_ns)
                )
            };
            let _ = write!(
                page,
                r#"<span class="legend">{}{} <span style="color:#5b6472">{}</span></span>"#,
                run_swatch(ri),
                esc(report.runs.get(ri).map_or("", |r| r.label.as_str())),
                detail
            );
        }
        page.push_str("</figcaption>");
        page.push_str(&inter_arrival_chart(name, &flows));
        page.push_str("</figure>");
    }
    page.push_str("</div></section>");
}

fn inter_arrival_chart(name: &str, flows: &[(usize, &FlowReport)]) -> String {
    let points = flows
        .iter()
        .flat_map(|(_, f)| f.inter_arrival_series.iter());
    let Some(t_max) = points.clone().map(|p| p.0).max() else {
        return empty_chart(240.0, "no data", &format!("{name}: no inter-arrival data"));
    };
    let t_min = points.clone().map(|p| p.0).min().unwrap_or(0).min(0);
    let d_min = points.clone().map(|p| p.1).min().unwrap_or(0);
    let d_max = points.map(|p| p.1).max().unwrap_or(0);
    let (tdiv, tunit) = time_axis_unit(t_max.saturating_sub(t_min));
    let (ddiv, dunit) = unit_for(d_min.unsigned_abs().max(d_max.unsigned_abs()) as f64);
    let chart = Chart {
        width: CHART_W,
        height: 260.0,
        left: 62.0,
        right: 18.0,
        top: 30.0,
        bottom: 44.0,
        x: Axis::linear(
            t_min as f64 / tdiv,
            t_max as f64 / tdiv,
            7,
            &format!("time since start ({tunit})"),
        ),
        y: Axis::linear(
            d_min as f64 / ddiv,
            d_max as f64 / ddiv,
            5,
            &format!("ΔT ({dunit})"),
        ),
    };
    let mut s = chart.open(&format!("inter-arrival times of {name}"));
    for &(ri, f) in flows {
        // One dot per distinct half-pixel: the picture is the same, the page smaller.
        let mut seen = HashSet::new();
        let mut d = String::new();
        for &(t, dt) in &f.inter_arrival_series {
            let x = chart.px(t as f64 / tdiv);
            let y = chart.py(dt as f64 / ddiv);
            if !x.is_finite() || !y.is_finite() {
                continue;
            }
            if seen.insert(((x * 2.0).round() as i64, (y * 2.0).round() as i64)) {
                let _ = write!(d, "M{} {}h0", n(x), n(y));
            }
        }
        if !d.is_empty() {
            let _ = write!(
                s,
                r#"<path class="dots" d="{d}" stroke="{}" stroke-width="2.6" stroke-opacity="0.75"/>"#,
                color(&RUN_COLORS, ri)
            );
        }
    }
    s.push_str(Chart::close());
    s
}

/// The unit for a time-since-start axis spanning `span` ns: ms below 10 s, s above.
fn time_axis_unit(span: i64) -> (f64, &'static str) {
    if span < 10_000_000 {
        (1e3, "µs")
    } else if span < 10_000_000_000 {
        (1e6, "ms")
    } else {
        (1e9, "s")
    }
}

// ---------------------------------------------------------------------------------
// Frame slips per hop

fn slips_section(page: &mut String, report: &LabReport, names: &Names) {
    page.push_str(r#"<section id="slips"><h2>Frame slips per hop</h2><p class="lead">Packets that left a router later than their time frame, per router and flow, and each router's counters.</p>"#);
    if report.runs.iter().all(|r| r.hops.is_empty()) {
        page.push_str(
            r#"<p class="empty">No routers in these runs: no frame slips to count.</p></section>"#,
        );
        return;
    }
    page.push_str(r#"<div class="cards">"#);
    for (ri, run) in report.runs.iter().enumerate() {
        let _ = write!(
            page,
            "<figure><figcaption><h3>{}{}</h3>",
            run_swatch(ri),
            esc(&run.label)
        );
        let flows = slip_flows(run, names);
        let max = run
            .hops
            .iter()
            .flat_map(|h| h.slips_per_flow.iter().map(|s| s.1))
            .max()
            .unwrap_or(0);
        for f in flows.iter().filter(|_| max > 0) {
            let _ = write!(
                page,
                r#"<span class="legend"><span class="sw" style="background:{}"></span>{}</span>"#,
                names.flow_color(f),
                esc(f)
            );
        }
        page.push_str("</figcaption>");
        if run.hops.is_empty() {
            page.push_str(r#"<p class="empty">No routers in this run.</p>"#);
        } else {
            if max > 0 {
                page.push_str(&slips_chart(run, &flows, names));
            } else if flows.is_empty() {
                page.push_str(r#"<p class="empty">The routers reported no frame-slip counts (FIFO forwarding has no frames).</p>"#);
            } else {
                page.push_str(r#"<p class="empty">No frame slips at any router.</p>"#);
            }
            hop_table(page, run);
        }
        page.push_str("</figure>");
    }
    page.push_str("</div></section>");
}

/// Flows with slip counts in a run, in the report's flow order.
fn slip_flows(run: &RunReport, names: &Names) -> Vec<String> {
    let at_routers: HashSet<&str> = run
        .hops
        .iter()
        .flat_map(|h| h.slips_per_flow.iter().map(|(name, _)| name.as_str()))
        .collect();
    names
        .flows
        .iter()
        .filter(|f| at_routers.contains(f.as_str()))
        .cloned()
        .collect()
}

fn slips_chart(run: &RunReport, flows: &[String], names: &Names) -> String {
    let max = run
        .hops
        .iter()
        .flat_map(|h| h.slips_per_flow.iter().map(|s| s.1))
        .max()
        .unwrap_or(0);
    let hops: Vec<String> = run.hops.iter().map(|h| h.node.clone()).collect();
    let group_px = (CHART_W - 80.0) / hops.len().max(1) as f64;
    let labels: Vec<String> = hops
        .iter()
        .map(|h| svg::fit(h, group_px - 6.0, 11.0))
        .collect();
    let chart = Chart {
        width: CHART_W,
        height: 230.0,
        left: 62.0,
        right: 18.0,
        top: 30.0,
        bottom: 44.0,
        x: Axis::categories(&labels, "router"),
        y: Axis::linear(0.0, max.max(1) as f64, (max.clamp(1, 4)) as usize, "slips"),
    };
    let mut s = chart.open(&format!("frame slips per hop in {}", run.label));
    let group = chart.plot_width() / hops.len().max(1) as f64;
    let bar = (group * 0.8 / flows.len().max(1) as f64).min(34.0);
    for (hi, hop) in run.hops.iter().enumerate() {
        let start = chart.left + group * hi as f64 + (group - bar * flows.len() as f64) / 2.0;
        for (fi, f) in flows.iter().enumerate() {
            let v = hop
                .slips_per_flow
                .iter()
                .filter(|(name, _)| name == f)
                .map(|s| s.1)
                .fold(0u64, u64::saturating_add);
            let x = start + bar * fi as f64;
            let y = chart.py(v as f64);
            let _ = write!(
                s,
                r##"<rect x="{}" y="{}" width="{}" height="{}" fill="{}"><title>{} · {}: {} slips</title></rect>"##,
                n(x + 1.0),
                n(y),
                n((bar - 2.0).max(1.0)),
                n(chart.y_end() - y),
                names.flow_color(f),
                esc(&hop.node),
                esc(f),
                v
            );
            if v > 0 {
                let _ = write!(
                    s,
                    r#"<text class="val" x="{}" y="{}" text-anchor="middle">{}</text>"#,
                    n(x + bar / 2.0),
                    n(y - 4.0),
                    v
                );
            }
        }
    }
    s.push_str(Chart::close());
    s
}

fn hop_table(page: &mut String, run: &RunReport) {
    page.push_str(r#"<div class="wide"><table><thead><tr><th class="l">Router</th><th>Forwarded</th><th>Dropped</th><th>Padding</th><th>Best effort</th><th>Slips</th><th>Wake-up p99</th><th>max</th></tr></thead><tbody>"#);
    for h in &run.hops {
        let slips = h
            .slips_per_flow
            .iter()
            .fold(0u64, |a, s| a.saturating_add(s.1));
        let wake = match &h.wakeup {
            Some(w) if w.count > 0 => format!(
                "<td>{}</td><td>{}</td>",
                fmt_opt(w.percentile("99")),
                fmt_opt(w.max_ns)
            ),
            _ => r#"<td colspan="2"><span class="nodata">no data</span></td>"#.into(),
        };
        let _ = write!(
            page,
            r#"<tr><td class="l">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>{wake}</tr>"#,
            esc(&h.node),
            fmt_count(h.forwarded),
            fmt_count(h.dropped),
            fmt_count(h.padding_sent),
            fmt_count(h.best_effort_forwarded),
            fmt_count(slips)
        );
    }
    page.push_str("</tbody></table></div>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::stats::Histogram;
    use serde_json::json;

    fn dist(values: &[i64]) -> Summary {
        let mut h = Histogram::new();
        for &v in values {
            h.record(v);
        }
        h.summary()
    }

    fn flow(name: &str, latency: &[i64], sent: u64, slips: u64) -> FlowReport {
        let received = latency.len() as u64;
        FlowReport {
            name: name.into(),
            latency: dist(latency),
            inter_arrival: dist(&[1_000_000, 990_000, 1_010_000]),
            inter_arrival_series: vec![
                (0, 1_000_000),
                (1_000_000, 990_000),
                (2_000_000, 1_010_000),
            ],
            decomposition: vec![
                Component {
                    name: "L_I".into(),
                    summary: dist(&[5_000, 7_000]),
                },
                Component {
                    name: "R1 residence".into(),
                    summary: dist(&[10_000, 200_000]),
                },
                Component {
                    name: "L_Rx".into(),
                    summary: dist(&[3_000, 4_000]),
                },
            ],
            sent,
            received,
            lost: sent.saturating_sub(received),
            slips,
            window: None,
            bound_ns: None,
        }
    }

    const ODD: &str = r#"b<&>"'"#;

    /// Two runs, two flows, hops and decomposition, numbers chosen for hand-checked
    /// ratios: flow "alpha" has jitter 480 µs under FIFO and 20 µs under TDP (24×),
    /// the odd-named flow 100 µs and 8 µs (12.5×).
    fn two_runs() -> LabReport {
        let hop = |node: &str, slips: Vec<(String, u64)>| HopReport {
            node: node.into(),
            slips_per_flow: slips,
            forwarded: 1000,
            dropped: 1,
            padding_sent: 20,
            best_effort_forwarded: 300,
            wakeup: Some(dist(&[2_000, 3_000, 40_000])),
        };
        LabReport {
            title: "mesh4: FIFO vs TDP".into(),
            scenario: "scenarios/mesh4.toml".into(),
            generated_at: "2026-11-22T10:00:00Z".into(),
            command: vec![
                "lockstep".into(),
                "lab".into(),
                "run".into(),
                "my scenario.toml".into(),
            ],
            host: json!({"hostname": "vm1", "kernel": {"release": "6.1.0"}, "rt": false,
                         "cores": 2, "sync": {"daemons": [], "state": "TIME_OK"}}),
            runs: vec![
                RunReport {
                    label: "FIFO".into(),
                    tf_ns: None,
                    flows: vec![
                        flow("alpha", &[20_000, 100_000, 500_000], 4, 0),
                        flow(ODD, &[30_000, 130_000], 2, 0),
                    ],
                    hops: vec![hop("R1", vec![]), hop("R2", vec![])],
                    bound_note: None,
                },
                RunReport {
                    label: "TDP".into(),
                    tf_ns: Some(250_000),
                    flows: vec![
                        flow("alpha", &[250_000, 260_000, 270_000], 3, 2),
                        flow(ODD, &[250_000, 258_000], 2, 0),
                    ],
                    hops: vec![
                        hop("R1", vec![("alpha".into(), 2), (ODD.into(), 0)]),
                        hop("R2", vec![("alpha".into(), 0), (ODD.into(), 0)]),
                    ],
                    bound_note: None,
                },
            ],
            notes: vec!["not a PREEMPT_RT kernel".into()],
        }
    }

    /// Structural sanity: the tags we open are closed, nothing is fetched.
    fn assert_well_formed(html: &str) {
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.ends_with("</html>\n"));
        for tag in [
            "svg", "table", "section", "figure", "div", "text", "title", "tr", "td", "th", "p",
            "span", "header",
        ] {
            let open = html.matches(&format!("<{tag}>")).count()
                + html.matches(&format!("<{tag} ")).count();
            let close = html.matches(&format!("</{tag}>")).count();
            assert_eq!(open, close, "<{tag}> opened {open} times, closed {close}");
        }
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(!html.contains("<script"));
        assert!(!html.contains("NaN") && !html.contains("inf\""));
    }

    #[test]
    fn two_run_report() {
        let html = render(&two_runs());
        assert_well_formed(&html);
        assert!(html.contains("<title>mesh4: FIFO vs TDP</title>"));
        // Every flow name, escaped, and never raw.
        assert!(html.contains(">alpha</h3>"));
        assert!(html.contains("b&lt;&amp;&gt;&quot;&#39;"));
        assert!(!html.contains(ODD));
        // Command line quoted as a shell would read it back.
        assert!(html.contains("$ lockstep lab run &#39;my scenario.toml&#39;"));
        // Host facts flattened; empty lists left out.
        assert!(html.contains(r#"<dt title="kernel.release">kernel.release</dt><dd>6.1.0</dd>"#));
        assert!(html.contains(r#"<dt title="rt">rt</dt><dd>no</dd>"#));
        assert!(!html.contains("sync.daemons"));
        // One SVG per chart: 2 PMFs, 2 CCDFs, 4 decompositions (one per flow and run),
        // 2 inter-arrival, 1 slip chart (the FIFO routers report no slip counts: a
        // sentence instead).
        assert_eq!(html.matches("<svg").count(), 11);
        // The comparison: 480/20 = 24.0 and 100/8 = 12.5; p99 = max here (3 and 2
        // values), so the p99 ratios are 500/270 = 1.85… and 130/258 = 0.50….
        assert!(html.contains("<th>FIFO/<wbr>TDP</th>"));
        let jitter_rows: Vec<&str> = html
            .split("<tr><td class=\"l\">Jitter (max − min)</td>")
            .skip(1)
            .collect();
        assert_eq!(jitter_rows.len(), 2);
        assert!(jitter_rows[0]
            .starts_with(r#"<td>480.00 µs</td><td>20.00 µs</td><td class="ratio" style="color:#0072B2">24.0×</td>"#));
        assert!(jitter_rows[1]
            .starts_with(r#"<td>100.00 µs</td><td>8.00 µs</td><td class="ratio" style="color:#0072B2">12.5×</td>"#));
        assert!(html.contains(r#"<td class="l">p99</td><td>500.00 µs</td><td>270.00 µs</td><td class="ratio" style="color:#0072B2">1.9×</td>"#));
        // Loss 1 of 4 vs 0 of 3: infinitely worse; slips 0 vs 2: ratio 0.
        assert!(html.contains(
            r#"<td class="l">Loss</td><td>1 (25.00 %)</td><td>0 (0 %)</td><td class="ratio" style="color:#0072B2">∞</td>"#
        ));
        assert!(html.contains(
            r#"<td class="l">Slips</td><td>0</td><td>2</td><td class="ratio" style="color:#D55E00">0.0×</td>"#
        ));
        // Both ratios of the odd flow are 0/0.
        assert!(html.contains(
            r#"<td class="l">Loss</td><td>0 (0 %)</td><td>0 (0 %)</td><td class="ratio">—</td>"#
        ));
        // Decomposition legend and the notes.
        assert!(html.contains("R1 residence"));
        assert!(html.contains("<li>not a PREEMPT_RT kernel</li>"));
        // FIFO routers report no slip counts; TDP ones do.
        assert!(html.contains("reported no frame-slip counts"));
        assert!(html.contains("<title>R1 · alpha: 2 slips</title>"));
    }

    #[test]
    fn script_in_a_flow_name_is_text() {
        let mut r = two_runs();
        for run in &mut r.runs {
            for f in &mut run.flows {
                f.name = "<script>alert(1)</script>".into();
            }
        }
        r.title = "</title><script>".into();
        r.notes.push("<img src=x onerror=alert(1)>".into());
        let html = render(&r);
        assert_well_formed(&html);
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(html.contains("&lt;img src=x onerror=alert(1)&gt;"));
        assert!(!html.contains("<img"));
    }

    #[test]
    fn empty_data_says_so() {
        // No runs at all.
        let html = render(&LabReport::default());
        assert_well_formed(&html);
        assert!(html.contains("This report holds no runs."));
        assert!(html.contains("<title>lockstep lab report</title>"));

        // A run with a flow that received nothing, no hops, no decomposition.
        let r = LabReport {
            runs: vec![RunReport {
                label: "TDP".into(),
                tf_ns: Some(100_000),
                flows: vec![FlowReport {
                    name: "silent".into(),
                    sent: 10,
                    lost: 10,
                    ..Default::default()
                }],
                hops: vec![],
                bound_note: None,
            }],
            ..Default::default()
        };
        let html = render(&r);
        assert_well_formed(&html);
        assert!(html.contains(r#"<td colspan="4"><span class="nodata">no data</span></td>"#));
        assert!(html.contains("10 (100.00 %)"));
        assert!(html.contains("No routers in these runs"));
        assert!(html.contains("no decomposition data"));
        assert!(html.contains(">no data</text>"));
        // One run: no comparison.
        assert!(!html.contains(r#"id="comparison""#));

        // A run without flows, and hops whose wake-up is unknown.
        let r = LabReport {
            runs: vec![
                RunReport {
                    label: "A".into(),
                    hops: vec![HopReport {
                        node: "R1".into(),
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                RunReport::default(),
            ],
            ..Default::default()
        };
        let html = render(&r);
        assert_well_formed(&html);
        assert!(html.contains("no flows"));
        assert!(html.contains(r#"id="comparison""#));
        assert!(html.contains("No routers in this run."));
        assert!(html.contains(r#"<td colspan="2"><span class="nodata">no data</span></td>"#));
    }

    #[test]
    fn mismatched_histogram_arrays_do_not_panic() {
        let mut r = two_runs();
        if let Some(f) = r.runs.get_mut(0).and_then(|run| run.flows.get_mut(0)) {
            f.latency.histogram.count.pop();
            f.latency.histogram.bucket_ns.push(i64::MAX);
            f.inter_arrival_series.push((i64::MAX, i64::MIN));
        }
        if let Some(f) = r.runs.get_mut(1).and_then(|run| run.flows.get_mut(0)) {
            f.latency.histogram.bucket_ns.clear();
            f.latency.histogram.count.clear();
            f.decomposition[0].summary.mean_ns = Some(-4_000.0);
        }
        assert_well_formed(&render(&r));
    }

    #[test]
    fn binning() {
        // 20..500 µs spans 25×: linear bins of 480 µs / 120 = 4 µs, rounded up to a
        // power of two, and at least the histogram's 2048 ns buckets below 2^19.
        assert_eq!(
            Binning::choose(20_000, 500_000),
            Binning::Linear { width: 4096 }
        );
        // Narrow ranges keep the histogram's bucket width: 250..270 µs has 2048 ns
        // buckets above 2^18 = 262144.
        assert_eq!(
            Binning::choose(250_000, 270_000),
            Binning::Linear { width: 2048 }
        );
        assert_eq!(Binning::choose(5, 100), Binning::Linear { width: 1 });
        assert_eq!(Binning::choose(-50, 50), Binning::Linear { width: 1 });
        assert_eq!(Binning::choose(1_000, 100_000), Binning::Log);
        assert_eq!(Binning::Log.bin(1_000), (992, 1024));
        assert_eq!(Binning::Log.bin(9), (9, 10));
        assert_eq!(Binning::Linear { width: 4096 }.bin(-1), (-4096, 0));

        // 250000 → bucket 249856 (1024 wide), 260000 → 259072, 270000 → 268288 (2048
        // wide above 2^18); in 4096-wide bins: 61, 63 and 65 × 4096.
        let s = dist(&[250_000, 260_000, 270_000]);
        assert_eq!(s.histogram.bucket_ns, vec![249_856, 259_072, 268_288]);
        let third = 1.0 / 3.0;
        assert_eq!(
            pmf(&s, Binning::Linear { width: 4096 }),
            vec![
                (249_856, 253_952, third),
                (258_048, 262_144, third),
                (266_240, 270_336, third)
            ]
        );
        assert!(pmf(&Summary::default(), Binning::Log).is_empty());
        assert_eq!(value_range(&s), Some((249_856, 270_000)));
        assert_eq!(value_range(&Summary::default()), None);
    }

    #[test]
    fn formatting() {
        assert_eq!(fmt_ns(850), "850 ns");
        assert_eq!(fmt_ns(12_345), "12.35 µs");
        assert_eq!(fmt_ns(1_234_567), "1.235 ms");
        assert_eq!(fmt_ns(2_500_000_000), "2.500 s");
        assert_eq!(fmt_count(1_234_567), "1\u{202f}234\u{202f}567");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_ns(999_996), "1.000 ms");
        assert_eq!(fmt_ns(999_994), "999.99 µs");
        assert_eq!(fmt_ns(-999), "-999 ns");
        assert_eq!(fmt_tf(250_000), "250 µs");
        assert_eq!(fmt_tf(1_500_000), "1.5 ms");
        assert_eq!(fmt_tf(2_000_000), "2 ms");
        assert_eq!(fmt_tf(12_345), "12.35 µs");
        assert_eq!(fmt_loss(1, 100_000), "1 (1.0e-3 %)");
        assert_eq!(fmt_loss(5, 0), "5");
        assert_eq!(fmt_ratio(Some(480.0), Some(20.0)), "24.0×");
        assert_eq!(fmt_ratio(Some(0.0), Some(0.0)), "—");
        assert_eq!(fmt_ratio(Some(3.0), Some(0.0)), "∞");
        assert_eq!(fmt_ratio(None, Some(1.0)), "—");
        assert_eq!(
            shell_line(&["a".into(), "b c".into(), "it's".into(), "".into()]),
            r#"a 'b c' 'it'\''s' ''"#
        );
        let mut facts = Vec::new();
        flatten_facts("", &json!("just text"), 0, &mut facts);
        assert_eq!(facts, vec![("host".to_string(), "just text".to_string())]);
    }

    #[test]
    fn json_round_trip() {
        let r = two_runs();
        let text = serde_json::to_string(&r).unwrap_or_default();
        let back: LabReport = serde_json::from_str(&text).unwrap_or_default();
        // serde_json's default float parser may differ from the printed mean in the
        // last bit, so compare what the page shows, and the integer data exactly.
        assert_eq!(render(&back), render(&r));
        assert_eq!(back.runs.len(), 2);
        for (a, b) in back.runs.iter().zip(&r.runs) {
            assert_eq!(a.hops.len(), b.hops.len());
            for (fa, fb) in a.flows.iter().zip(&b.flows) {
                assert_eq!(fa.latency.histogram, fb.latency.histogram);
                assert_eq!(fa.inter_arrival_series, fb.inter_arrival_series);
                assert_eq!((fa.sent, fa.lost, fa.slips), (fb.sent, fb.lost, fb.slips));
            }
        }
        // Missing fields default, so older or partial documents still render.
        let partial: LabReport =
            serde_json::from_str(r#"{"title": "t", "runs": [{"label": "X"}]}"#).unwrap_or_default();
        assert_eq!(partial.runs.len(), 1);
        assert_well_formed(&render(&partial));
    }

    /// A deterministic xorshift64* generator for the sample report.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
        }

        fn exp(&mut self, mean: f64) -> f64 {
            -mean * (1.0 - self.next()).ln()
        }

        fn normal(&mut self, sd: f64) -> f64 {
            let (u, v) = (1.0 - self.next(), self.next());
            sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    /// A report that looks like a real mesh4 run (five flows over two or three routers,
    /// FIFO against TDP with TF = 250 µs), for looking at the page.
    pub(super) fn sample_report() -> LabReport {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let paths: [&[&str]; 5] = [
            &["R1", "R2"],
            &["R1", "R2", "R3"],
            &["R2", "R3", "R4"],
            &["R3", "R4"],
            &["R4", "R1", "R2"],
        ];
        let tf = 250_000.0;
        let mut runs = Vec::new();
        for (mode, tdp) in [("FIFO", false), ("TDP", true)] {
            let mut flows = Vec::new();
            let mut slips_at: BTreeMap<(String, String), u64> = BTreeMap::new();
            for (fi, path) in paths.iter().enumerate() {
                let name = format!("f{} S{}→{}→D", fi + 1, fi + 1, path.join("→"));
                let mut names = vec!["L_I".to_string(), "L_Tx".to_string()];
                let mut prev = format!("S{}", fi + 1);
                for r in path.iter() {
                    names.push(format!("link {prev}→{r}"));
                    names.push(format!("{r} residence"));
                    prev = r.to_string();
                }
                names.push(format!("link {prev}→D"));
                names.push("L_Rx".into());
                let mut comps: Vec<Histogram> = names.iter().map(|_| Histogram::new()).collect();
                let mut lat = Histogram::new();
                let mut ia = Histogram::new();
                let mut series = Vec::new();
                let sent = 20_000u64;
                let mut lost = 0;
                let mut slips = 0;
                let mut last: Option<i64> = None;
                let mut chunk: Vec<(i64, i64)> = Vec::new();
                for i in 0..sent {
                    if !tdp && fi == 2 && rng.next() < 0.003 {
                        lost += 1;
                        continue;
                    }
                    let mut parts = vec![4_000.0 + rng.exp(2_000.0), 6_000.0 + rng.exp(1_500.0)];
                    for r in path.iter() {
                        parts.push(9_000.0 + rng.normal(300.0).abs());
                        let residence = if tdp {
                            let mut v = 232_000.0 + rng.normal(1_500.0);
                            if rng.next() < 1e-4 {
                                v += tf;
                                slips += 1;
                                *slips_at.entry((r.to_string(), name.clone())).or_default() += 1;
                            }
                            v
                        } else {
                            let burst = if rng.next() < 0.01 {
                                rng.exp(300_000.0)
                            } else {
                                0.0
                            };
                            15_000.0 + rng.exp(35_000.0) + burst
                        };
                        parts.push(residence);
                    }
                    parts.push(9_000.0 + rng.normal(300.0).abs());
                    parts.push(8_000.0 + rng.exp(3_000.0));
                    let mut total = 0i64;
                    for (h, v) in comps.iter_mut().zip(&parts) {
                        h.record(*v as i64);
                        total += *v as i64;
                    }
                    lat.record(total);
                    // A flow's packets stay in order: one cannot arrive before the
                    // previous one.
                    let t = (i as i64 * 1_000_000 + total).max(last.map_or(0, |p| p + 8_000));
                    if let Some(prev) = last {
                        ia.record(t - prev);
                        chunk.push((t, t - prev));
                        if chunk.len() == 10 {
                            // Decimate keeping the extremes of every ten points.
                            let lo = chunk.iter().min_by_key(|p| p.1).copied();
                            let hi = chunk.iter().max_by_key(|p| p.1).copied();
                            series.extend(lo);
                            series.extend(hi);
                            chunk.clear();
                        }
                    }
                    last = Some(t);
                }
                flows.push(FlowReport {
                    name,
                    latency: lat.summary(),
                    inter_arrival: ia.summary(),
                    inter_arrival_series: series,
                    decomposition: names
                        .iter()
                        .zip(&comps)
                        .map(|(n, h)| Component {
                            name: n.clone(),
                            summary: h.summary(),
                        })
                        .collect(),
                    sent,
                    received: sent - lost,
                    lost,
                    slips,
                    window: None,
                    bound_ns: None,
                });
            }
            let hops = ["R1", "R2", "R3", "R4"]
                .iter()
                .map(|r| {
                    let mut wake = Histogram::new();
                    for _ in 0..4000 {
                        wake.record((1_500.0 + rng.exp(2_500.0)) as i64);
                    }
                    HopReport {
                        node: r.to_string(),
                        slips_per_flow: if tdp {
                            flows
                                .iter()
                                .filter(|f| {
                                    f.decomposition
                                        .iter()
                                        .any(|c| c.name == format!("{r} residence"))
                                })
                                .map(|f| {
                                    let n = slips_at
                                        .get(&(r.to_string(), f.name.clone()))
                                        .copied()
                                        .unwrap_or(0);
                                    (f.name.clone(), n)
                                })
                                .collect()
                        } else {
                            Vec::new()
                        },
                        forwarded: 60_000,
                        dropped: if tdp { 0 } else { 61 },
                        padding_sent: if tdp { 12_034 } else { 0 },
                        best_effort_forwarded: 431_220,
                        wakeup: tdp.then(|| wake.summary()),
                    }
                })
                .collect();
            runs.push(RunReport {
                label: mode.into(),
                tf_ns: tdp.then_some(tf as i64),
                flows,
                hops,
                bound_note: None,
            });
        }
        LabReport {
            title: "mesh4 — FIFO vs TDP".into(),
            scenario: "scenarios/mesh4.toml".into(),
            generated_at: "2026-11-22T10:00:00Z".into(),
            command: [
                "lockstep",
                "lab",
                "run",
                "scenarios/mesh4.toml",
                "--duration",
                "20s",
                "--output",
                "results/mesh4",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
            host: json!({
                "hostname": "lab-vm", "kernel": {"release": "6.1.0-28-amd64", "version": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1"},
                "rt": false, "preempt": "dynamic", "cpu_model": "AMD EPYC 7B13", "cores": 2,
                "isolation": {"isolcpus": "", "nohz_full": ""}, "governor": "unknown (no cpufreq)",
                "clocksource": "kvm-clock",
                "sync": {"synchronized": true, "state": "TIME_OK", "status": ["STA_PLL", "STA_NANO"],
                         "maxerror_ns": 16_000_000, "esterror_ns": 1000, "offset_ns": 0, "tai_offset_s": 37,
                         "daemons": ["chronyd"]},
                "virtualization": "kvm", "unreadable": []
            }),
            runs,
            notes: vec![
                "not a PREEMPT_RT kernel: expect wake-up latency spikes".into(),
                "running under a hypervisor (kvm): the host can steal the CPU at any time".into(),
            ],
        }
    }

    /// A report shaped like the gateway scenario: one flow straight from sender to
    /// receiver (no routers), one run per TF, latency tails long enough for a log x axis.
    pub(super) fn sample_gateway_report() -> LabReport {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let runs = [500_000i64, 250_000, 100_000, 50_000]
            .iter()
            .map(|&tf| {
                let names = ["L_I", "L_Tx", "delta", "L_Rx"];
                let mut comps: Vec<Histogram> = names.iter().map(|_| Histogram::new()).collect();
                let (mut lat, mut ia) = (Histogram::new(), Histogram::new());
                let mut series = Vec::new();
                let mut last: Option<i64> = None;
                let count = 10_000_000_000 / tf;
                for i in 0..count {
                    let spike = if rng.next() < 2e-3 {
                        rng.exp(400_000.0)
                    } else {
                        0.0
                    };
                    let parts = [
                        3_000.0 + rng.exp(2_500.0) + spike,
                        5_000.0 + rng.exp(1_000.0),
                        2_000.0 + rng.exp(200.0),
                        7_000.0 + rng.exp(2_000.0),
                    ];
                    let mut total = 0;
                    for (h, v) in comps.iter_mut().zip(parts) {
                        h.record(v as i64);
                        total += v as i64;
                    }
                    lat.record(total);
                    let t = (i * tf + total).max(last.map_or(0, |p| p + 5_000));
                    if let Some(p) = last {
                        ia.record(t - p);
                        if i % (count / 2000).max(1) == 0 {
                            series.push((t, t - p));
                        }
                    }
                    last = Some(t);
                }
                RunReport {
                    label: format!("TF={}us", tf / 1000),
                    tf_ns: Some(tf),
                    flows: vec![FlowReport {
                        name: "frames 102B".into(),
                        latency: lat.summary(),
                        inter_arrival: ia.summary(),
                        inter_arrival_series: series,
                        decomposition: names
                            .iter()
                            .zip(&comps)
                            .map(|(n, h)| Component {
                                name: n.to_string(),
                                summary: h.summary(),
                            })
                            .collect(),
                        sent: count as u64,
                        received: count as u64,
                        lost: 0,
                        slips: 0,
                        window: None,
                        bound_ns: None,
                    }],
                    hops: Vec::new(),
                    bound_note: None,
                }
            })
            .collect();
        LabReport {
            title: "gateway — latency per TF".into(),
            scenario: "scenarios/gateway.toml".into(),
            generated_at: "2026-11-22T11:00:00Z".into(),
            command: vec![
                "lockstep".into(),
                "lab".into(),
                "run".into(),
                "scenarios/gateway.toml".into(),
            ],
            host: json!({"hostname": "lab-vm", "rt": false, "cores": 2}),
            runs,
            notes: Vec::new(),
        }
    }

    /// Writes the sample page for a look in a browser or a screenshot:
    /// `cargo test -p lockstep -- --ignored write_sample_report` (path from
    /// `LOCKSTEP_SAMPLE_REPORT`, default /tmp/sample-report.html).
    #[test]
    #[ignore]
    fn write_sample_report() {
        let path = std::env::var("LOCKSTEP_SAMPLE_REPORT")
            .unwrap_or_else(|_| "/tmp/sample-report.html".into());
        let html = render(&sample_report());
        assert_well_formed(&html);
        std::fs::write(&path, html).unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!("wrote {path}");
        let path = path.replace(".html", "-gateway.html");
        let html = render(&sample_gateway_report());
        assert_well_formed(&html);
        std::fs::write(&path, html).unwrap_or_else(|e| panic!("{path}: {e}"));
        eprintln!("wrote {path}");
    }

    #[test]
    fn sample_report_is_well_formed_and_bounded() {
        let html = render(&sample_report());
        assert_well_formed(&html);
        // 5 flows × (PMF, CCDF, 2 decompositions, inter-arrival) + the TDP slip chart.
        assert_eq!(html.matches("<svg").count(), 26);
        // Dots are deduplicated per half pixel: the page stays small.
        assert!(html.len() < 2_000_000, "{} bytes", html.len());
    }
}
