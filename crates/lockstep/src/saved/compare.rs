//! `lockstep compare A B`: two saved runs of the same kind side by side — per run
//! and flow (a probe: per distribution) each figure of A and of B, the ratio B/A and
//! which is better (lower is better for every figure compared: latency, jitter,
//! spread, loss, slips).

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use lockstep_core::stats::Summary;
use serde::{Serialize, Serializer};

use super::doc::{self, Loaded, Saved};
use super::report::report_of;
use crate::lab::tables::grid;
use crate::report::html::{FlowReport, LabReport};
use crate::report::human::fmt_ns;
use crate::report::Tool;
use crate::UsageError;

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// The first saved run (A): a directory `lab run`, `sim run` or `probe … --output`
    /// wrote.
    #[arg(value_name = "DIR_A")]
    pub a: PathBuf,
    /// The second saved run (B), of the same kind; ratios are B/A.
    #[arg(value_name = "DIR_B")]
    pub b: PathBuf,
    /// Print the comparison as one JSON document (`kind` "compare").
    #[arg(long)]
    pub json: bool,
    /// Also write a self-contained page: the table, better figures coloured, both
    /// runs' latency PMF and CCDF overlaid per flow.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// The comparison document.
#[derive(Debug, Serialize)]
pub struct CompareDoc {
    /// `compare`.
    pub kind: &'static str,
    pub lockstep: Tool,
    pub a: SideInfo,
    pub b: SideInfo,
    pub runs: Vec<RunCompare>,
    /// Runs (`flow` null) and flows only A has.
    pub only_in_a: Vec<Unmatched>,
    /// Runs and flows only B has.
    pub only_in_b: Vec<Unmatched>,
}

/// Which saved run a side is.
#[derive(Debug, Serialize)]
pub struct SideInfo {
    pub dir: String,
    pub kind: String,
    pub title: String,
    pub started_at: String,
}

/// One run both have (matched by label).
#[derive(Debug, Serialize)]
pub struct RunCompare {
    pub run: String,
    pub flows: Vec<FlowCompare>,
}

/// One flow (or a probe's distribution) both runs have.
#[derive(Debug, Serialize)]
pub struct FlowCompare {
    pub flow: String,
    pub metrics: Vec<Metric>,
}

/// One figure of both.
#[derive(Debug, Clone, Serialize)]
pub struct Metric {
    /// `min`, `mean`, `p50`, `p99`, `p99.9`, `max`, `jitter`, `stddev`, `loss`, `lost`,
    /// `slips`.
    pub metric: &'static str,
    /// `ns`, `share` (of the packets) or `count`.
    pub unit: &'static str,
    #[serde(serialize_with = "number")]
    pub a: Option<f64>,
    #[serde(serialize_with = "number")]
    pub b: Option<f64>,
    /// B/A; null when A is 0 or either is missing.
    pub ratio: Option<f64>,
    /// `a`, `b` or `same`; null when either is missing.
    pub better: Option<Better>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    A,
    B,
    Same,
}

/// A run or a flow one side has and the other has not.
#[derive(Debug, Serialize)]
pub struct Unmatched {
    pub run: String,
    pub flow: Option<String>,
}

/// Whole values as integers (`769040`, not `769040.0`).
fn number<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => s.serialize_i64(*x as i64),
        Some(x) => s.serialize_f64(*x),
        None => s.serialize_none(),
    }
}

pub fn run(args: CompareArgs) -> Result<()> {
    let a = doc::load(&args.a)?;
    let b = doc::load(&args.b)?;
    check_kinds(&a, &b)?;
    let (ra, rb) = (report_of(&a.saved), report_of(&b.saved));
    let cmp = compare(&a, &ra, &b, &rb);
    if let Some(file) = &args.html {
        let page = crate::report::compare::render(&cmp, &ra, &rb);
        crate::report::write_atomic(file, page.as_bytes())?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&cmp)?);
    } else {
        print!("{}", human(&cmp));
        if let Some(file) = &args.html {
            println!("page: {}", file.display());
        }
    }
    Ok(())
}

/// What a kind measures, for deciding whether two runs compare: the lab's and the
/// simulator's runs of a TDP scenario do; a probe only with the same probe.
fn family(s: &Saved) -> &str {
    match s {
        Saved::Network(_) => "TDP scenario runs",
        Saved::Tabled(d) if d.kind.ends_with("shaped-switch") => "shaped-switch runs",
        Saved::Tabled(d) => &d.kind,
        Saved::Probe(d) => &d.kind,
    }
}

fn check_kinds(a: &Loaded, b: &Loaded) -> Result<(), UsageError> {
    let (fa, fb) = (family(&a.saved), family(&b.saved));
    if fa == fb {
        return Ok(());
    }
    Err(UsageError(format!(
        "{} holds a {} result ({fa}), {} a {} result ({fb}): they measure different things and cannot be compared",
        a.dir.display(),
        a.saved.kind(),
        b.dir.display(),
        b.saved.kind()
    )))
}

fn side(l: &Loaded, r: &LabReport) -> SideInfo {
    SideInfo {
        dir: l.dir.display().to_string(),
        kind: l.saved.kind().to_string(),
        title: r.title.clone(),
        started_at: r.generated_at.clone(),
    }
}

/// The two reports matched run by run and flow by flow.
pub fn compare(a: &Loaded, ra: &LabReport, b: &Loaded, rb: &LabReport) -> CompareDoc {
    let slips = !matches!(a.saved, Saved::Probe(_));
    let mut doc = CompareDoc {
        kind: "compare",
        lockstep: Tool {
            version: env!("CARGO_PKG_VERSION"),
            schema: crate::report::SCHEMA_VERSION,
        },
        a: side(a, ra),
        b: side(b, rb),
        runs: Vec::new(),
        only_in_a: unmatched(ra, rb),
        only_in_b: unmatched(rb, ra),
    };
    for run in &ra.runs {
        let Some(other) = rb.runs.iter().find(|r| r.label == run.label) else {
            continue;
        };
        let flows = run
            .flows
            .iter()
            .filter_map(|fa| {
                let fb = other.flows.iter().find(|f| f.name == fa.name)?;
                Some(FlowCompare {
                    flow: fa.name.clone(),
                    metrics: metrics(fa, fb, slips),
                })
            })
            .collect();
        doc.runs.push(RunCompare {
            run: run.label.clone(),
            flows,
        });
    }
    doc
}

/// The runs of `x` that `y` lacks, and the flows of common runs it lacks.
fn unmatched(x: &LabReport, y: &LabReport) -> Vec<Unmatched> {
    let mut out = Vec::new();
    for run in &x.runs {
        match y.runs.iter().find(|r| r.label == run.label) {
            None => out.push(Unmatched {
                run: run.label.clone(),
                flow: None,
            }),
            Some(other) => out.extend(
                run.flows
                    .iter()
                    .filter(|f| !other.flows.iter().any(|g| g.name == f.name))
                    .map(|f| Unmatched {
                        run: run.label.clone(),
                        flow: Some(f.name.clone()),
                    }),
            ),
        }
    }
    out
}

/// The figures of one flow on both sides; a figure neither side has is left out.
fn metrics(a: &FlowReport, b: &FlowReport, slips: bool) -> Vec<Metric> {
    let (fa, fb) = (figures(a, slips), figures(b, slips));
    fa.into_iter()
        .zip(fb)
        .filter(|((_, _, x), (_, _, y))| x.is_some() || y.is_some())
        .map(|((metric, unit, x), (_, _, y))| Metric {
            metric,
            unit,
            a: x,
            b: y,
            ratio: ratio(x, y),
            better: better(x, y),
        })
        .collect()
}

type Figure = (&'static str, &'static str, Option<f64>);

/// Every figure compared, in order; `None` where the flow has none.
fn figures(f: &FlowReport, slips: bool) -> Vec<Figure> {
    let l: &Summary = &f.latency;
    let ns = |v: Option<i64>| v.map(|v| v as f64);
    let counted = f.sent > 0;
    let mut out = vec![
        ("min", "ns", ns(l.min_ns)),
        ("mean", "ns", l.mean_ns),
        ("p50", "ns", ns(l.percentile("50"))),
        ("p99", "ns", ns(l.percentile("99"))),
        ("p99.9", "ns", ns(l.percentile("99.9"))),
        ("max", "ns", ns(l.max_ns)),
        ("jitter", "ns", ns(l.jitter_ns)),
        ("stddev", "ns", l.stddev_ns),
        (
            "loss",
            "share",
            counted.then(|| f.lost as f64 / f.sent as f64),
        ),
        ("lost", "count", counted.then_some(f.lost as f64)),
    ];
    if slips {
        out.push(("slips", "count", Some(f.slips as f64)));
    }
    out
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 => Some(b / a),
        _ => None,
    }
}

/// Lower is better.
fn better(a: Option<f64>, b: Option<f64>) -> Option<Better> {
    let (a, b) = (a?, b?);
    Some(if a < b {
        Better::A
    } else if b < a {
        Better::B
    } else {
        Better::Same
    })
}

/// A figure as the tables show it.
pub fn value_text(unit: &str, v: Option<f64>) -> String {
    match (unit, v) {
        (_, None) => "-".into(),
        ("ns", Some(x)) => fmt_ns(x.round() as i64),
        ("share", Some(0.0)) => "0".into(),
        ("share", Some(x)) if x < 0.0001 => format!("{:.5}%", x * 100.0),
        ("share", Some(x)) => format!("{:.2}%", x * 100.0),
        (_, Some(x)) => format!("{x}"),
    }
}

/// B/A as `2.35x`, `-` when there is none.
pub fn ratio_text(r: Option<f64>) -> String {
    match r {
        Some(r) if r >= 100.0 => format!("{r:.0}x"),
        Some(r) => format!("{r:.2}x"),
        None => "-".into(),
    }
}

pub fn better_text(b: Option<Better>) -> &'static str {
    match b {
        Some(Better::A) => "A",
        Some(Better::B) => "B",
        Some(Better::Same) => "=",
        None => "",
    }
}

/// The comparison as text: who A and B are, a table per run, what only one has.
pub fn human(c: &CompareDoc) -> String {
    let mut out = String::new();
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        out.push_str(&format!(
            "{name}: {} ({}, {}{})\n",
            s.dir,
            s.kind,
            s.title,
            if s.started_at.is_empty() {
                String::new()
            } else {
                format!(", {}", s.started_at)
            }
        ));
    }
    out.push_str("lower is better for every figure; B/A below 1 means B did better\n");
    // a run whose flows all differ by name is named below, flow by flow
    for run in c.runs.iter().filter(|r| !r.flows.is_empty()) {
        out.push_str(&format!("\n{}:\n", run.run));
        let mut rows = Vec::new();
        for f in &run.flows {
            for (i, m) in f.metrics.iter().enumerate() {
                rows.push(vec![
                    if i == 0 {
                        f.flow.clone()
                    } else {
                        String::new()
                    },
                    // padded: the table right-aligns every column but the first
                    format!("{:<6}", m.metric),
                    value_text(m.unit, m.a),
                    value_text(m.unit, m.b),
                    ratio_text(m.ratio),
                    better_text(m.better).to_string(),
                ]);
            }
        }
        out.push_str(&grid(&["flow", "figure", "A", "B", "B/A", "better"], &rows));
    }
    for (name, list) in [("A", &c.only_in_a), ("B", &c.only_in_b)] {
        for u in list {
            match &u.flow {
                None => out.push_str(&format!("only in {name}: run {}\n", u.run)),
                Some(f) => out.push_str(&format!("only in {name}: {} flow {f}\n", u.run)),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_and_the_better_side() {
        assert_eq!(ratio(Some(2.0), Some(3.0)), Some(1.5));
        assert_eq!(ratio(Some(0.0), Some(3.0)), None);
        assert_eq!(better(Some(2.0), Some(3.0)), Some(Better::A));
        assert_eq!(better(Some(4.0), Some(3.0)), Some(Better::B));
        assert_eq!(better(Some(0.0), Some(0.0)), Some(Better::Same));
        assert_eq!(better(None, Some(0.0)), None);
        assert_eq!(ratio_text(Some(0.5)), "0.50x");
        assert_eq!(value_text("share", Some(0.25)), "25.00%");
        assert_eq!(value_text("count", Some(3.0)), "3");
    }
}
