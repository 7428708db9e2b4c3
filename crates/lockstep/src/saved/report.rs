//! `lockstep report DIR`: a saved run's report.html and human summary, made again
//! from its summary.json alone.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use lockstep_core::Duration;
use serde_json::Value;

use super::doc::{self, Doc, Loaded, NetworkResults, Saved};
use super::probe;
use crate::lab::results::FlowLine;
use crate::lab::run::{loads_table, LoadResult};
use crate::lab::scenario::{RunMode, RunSpec};
use crate::lab::tables;
use crate::report::html::{self, LabReport};

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// A saved run: the directory `lab run`, `sim run` or `probe … --output` wrote.
    #[arg(value_name = "DIR")]
    pub dir: PathBuf,
    /// Write the page here (default: DIR/report.html).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the saved result document on stdout (the summary goes to stderr).
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: ReportArgs) -> Result<()> {
    let loaded = doc::load(&args.dir)?;
    let file = args
        .output
        .clone()
        .unwrap_or_else(|| args.dir.join("report.html"));
    let (page, mut text) = page_and_text(&loaded);
    crate::report::write_atomic(&file, page.as_bytes())?;
    text.push_str(&format!(
        "results: {}\nreport:  {}\n",
        loaded.dir.display(),
        file.display()
    ));
    crate::report::Show::of(args.json).print(&text, loaded.text.trim_end());
    Ok(())
}

/// The page and the human summary of a saved run.
fn page_and_text(loaded: &Loaded) -> (String, String) {
    match &loaded.saved {
        Saved::Network(d) => (html::render(&report_of(&loaded.saved)), network_human(d)),
        Saved::Tabled(d) => {
            let sim = if d.kind.starts_with("sim.") {
                "simulated (virtual time)\n"
            } else {
                ""
            };
            (
                html::render(&report_of(&loaded.saved)),
                format!("{sim}{}", lines(&d.results.report.notes)),
            )
        }
        Saved::Probe(d) => (
            crate::report::probe_page::render(&probe::page(d)),
            probe::human(d),
        ),
    }
}

/// A saved run as the report's types: the report it saved, a probe's distributions
/// as the flows of one run.
pub fn report_of(saved: &Saved) -> LabReport {
    match saved {
        Saved::Network(d) => page(d.results.report.clone(), d),
        Saved::Tabled(d) => page(d.results.report.clone(), d),
        Saved::Probe(d) => probe::lab_report(d),
    }
}

/// The report a run saved, with what it keeps outside `results` (the simulator's
/// start, command line and host stay out of its seed-fixed `results`).
pub fn page<R>(mut report: LabReport, d: &Doc<R>) -> LabReport {
    if report.generated_at.is_empty() {
        report.generated_at = d.started_at.clone();
    }
    if report.command.is_empty() {
        report.command = d.command.clone();
    }
    if report.host == Value::Null {
        report.host = d.host.clone();
    }
    report
}

fn lines(v: &[String]) -> String {
    v.iter().map(|l| format!("{l}\n")).collect()
}

/// The runs' tables as `lab run` and `sim run` print them.
fn network_human(d: &Doc<NetworkResults>) -> String {
    let res = &d.results;
    let mut out = String::new();
    if d.kind == "sim.run" {
        out.push_str("simulated (virtual time)\n");
    }
    let runs = run_lines(d);
    for (spec, lines) in runs.iter().filter(|(_, l)| !l.is_empty()) {
        out.push_str(&tables::run_table(spec, lines));
        out.push('\n');
    }
    let paper = match d.kind.as_str() {
        "sim.run" => crate::sim::run::paper_table(&res.report.scenario, &runs),
        _ => None,
    };
    let compared = paper.or_else(|| tables::comparison_table(&runs).map(|t| t + "\n"));
    out.push_str(&compared.unwrap_or_default());
    if d.kind == "lab.run" {
        let loads: Vec<(&str, &[LoadResult])> = res
            .runs
            .iter()
            .map(|r| (r.label.as_str(), &r.loads[..]))
            .collect();
        for t in [tables::sweep_table(&runs), loads_table(&loads)]
            .into_iter()
            .flatten()
        {
            out.push_str(&t);
            out.push('\n');
        }
    }
    for r in &res.runs {
        out.push_str(&crate::lab::faults::lines(&r.label, &r.faults));
    }
    if let Some(i) = &res.interrupted {
        out.push_str(&format!("interrupted by SIGINT/SIGTERM: {i}\n"));
    }
    out
}

/// Each run's spec and flow lines, a TDP flow's window taken from the report.
fn run_lines(d: &Doc<NetworkResults>) -> Vec<(RunSpec, Vec<FlowLine>)> {
    d.results
        .runs
        .iter()
        .map(|r| {
            let spec = RunSpec {
                mode: RunMode::parse(&r.mode).unwrap_or(RunMode::Fifo),
                tf: Duration::from_nanos(r.tf_ns),
                label: r.label.clone(),
                dir: r.mode.clone(),
            };
            let shown = d.results.report.runs.iter().find(|x| x.label == r.label);
            let lines = r
                .flows
                .iter()
                .map(|l| FlowLine {
                    window: shown
                        .and_then(|s| s.flows.iter().find(|f| f.name == l.flow))
                        .and_then(|f| f.window.clone()),
                    ..l.clone()
                })
                .collect();
            (spec, lines)
        })
        .collect()
}
