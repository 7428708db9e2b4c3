//! Two well-kept crates measured against lockstep's own code, on the same inputs in
//! the same process:
//!
//! - `hist`: the `hdrhistogram` crate (3 significant digits, 1 ns … 60 s, the usual
//!   latency setup) against `lockstep_core::stats::Histogram` and its `Summary`: time
//!   per recorded sample over 10 million seeded latencies (a log-normal body of a few
//!   µs with a heavy tail to tens of ms), memory held, the relative error of p50 …
//!   p99.999, max, mean and standard deviation against the exact values of the sorted
//!   samples, the size of the serialized form a result document would store, and the
//!   cost of merging two per-CPU histograms.
//! - `chart`: `plotters` with its SVG backend against the report's hand-written
//!   `svg.rs` (included by path): the same latency CCDF (3 series of 200 points, log
//!   y from 1 to 10⁻⁶, linear latency x, axis titles, tick labels, a legend) on the
//!   same canvas; output bytes, render time (median of many), whether the output is
//!   self-contained. The two SVGs are written to `--out DIR` for a look.
//!
//! `crates-vs-ours [hist|chart|all] [--out DIR] [--samples N]`; `run.sh` builds it in
//! release, runs it three times and measures the crates' build cost.

mod alloc_count;
mod chart;
mod hist;
mod latency;

#[allow(dead_code)]
#[path = "../../../crates/lockstep/src/report/svg.rs"]
mod svg;

#[global_allocator]
static ALLOC: alloc_count::Counting = alloc_count::Counting;

fn main() {
    let mut what = "all".to_string();
    let mut out = std::path::PathBuf::from("/tmp/cmp");
    let mut samples: usize = 10_000_000;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--out" => out = args.next().map(Into::into).unwrap_or(out),
            "--samples" => samples = args.next().and_then(|s| s.parse().ok()).unwrap_or(samples),
            "hist" | "chart" | "all" => what = a,
            other => {
                eprintln!("crates-vs-ours: unknown argument {other}");
                eprintln!("usage: crates-vs-ours [hist|chart|all] [--out DIR] [--samples N]");
                std::process::exit(2);
            }
        }
    }
    if what == "hist" || what == "all" {
        hist::run(samples);
    }
    if what == "chart" || what == "all" {
        if let Err(e) = chart::run(&out) {
            eprintln!("crates-vs-ours: chart: {e}");
            std::process::exit(1);
        }
    }
}
