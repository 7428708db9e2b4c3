//! The demo's answer: one row per flow with the paper's jitter and each part's, a
//! headline per part, the TDP verdicts (window, share inside, jitter against two
//! frames, outliers by cause) and the same figures as a typed document.

use lockstep_plan::scenario::{RunMode, RunSpec};
use serde::Serialize;

use crate::lab::results::{FlowLine, ScenarioLines};
use crate::lab::tables::grid;
use crate::report::human::{fmt_ns, range_text};
use crate::report::window::WindowReport;
use crate::sim::paper::{figures, Table};

/// One part of the demo and what it measured.
pub struct Part {
    /// "simulated, ideal host".
    pub name: String,
    /// Time scale the part ran at (1: the paper's timing).
    pub scale: u32,
    pub tf_ns: i64,
    pub lines: ScenarioLines,
}

impl Part {
    fn run(&self, mode: RunMode) -> Option<&(RunSpec, Vec<FlowLine>)> {
        self.lines.runs.iter().find(|(r, _)| r.mode == mode)
    }

    fn flow(&self, mode: RunMode, name: &str) -> Option<&FlowLine> {
        self.run(mode)?.1.iter().find(|l| l.flow == name)
    }

    fn jitter(&self, mode: RunMode, name: &str) -> Option<i64> {
        self.flow(mode, name)?.jitter_ns
    }

    /// A real duration in the paper's units.
    fn unscaled(&self, ns: i64) -> i64 {
        ns / i64::from(self.scale.max(1))
    }
}

/// The demo's figures for one flow (ns; `live_*` in real time unless `_scaled`).
#[derive(Clone, Debug, Default, Serialize)]
pub struct DemoFlow {
    pub flow: String,
    pub paper_fifo_ns: Option<i64>,
    pub paper_tdp_ns: Option<i64>,
    pub sim_fifo_jitter_ns: Option<i64>,
    pub sim_tdp_jitter_ns: Option<i64>,
    pub host_sim_fifo_jitter_ns: Option<i64>,
    pub host_sim_tdp_jitter_ns: Option<i64>,
    pub live_fifo_jitter_ns: Option<i64>,
    pub live_tdp_jitter_ns: Option<i64>,
    pub live_fifo_jitter_scaled_ns: Option<i64>,
    pub live_tdp_jitter_scaled_ns: Option<i64>,
    /// p99.9 − min of the live TDP latencies: the jitter of 99.9 % of the packets.
    pub live_tdp_jitter_999_ns: Option<i64>,
    /// Share of the live TDP packets inside the window the schedule promises.
    pub live_tdp_in_window: Option<f64>,
    pub live_tdp_outliers: Option<u64>,
    /// Live TDP outliers their records do not explain.
    pub unexplained: Option<u64>,
    pub live_tdp_lost: Option<u64>,
    /// Live TDP packets the routers slipped (a slipped packet is dropped in mesh4).
    pub live_tdp_slips: Option<u64>,
}

/// The rows, in the paper's flow order.
pub fn rows(paper: Table, ideal: &Part, host: &Part, live: Option<&Part>) -> Vec<DemoFlow> {
    paper
        .iter()
        .map(|&(name, _, _)| {
            let (pf, pt) = figures(paper, name).unzip();
            let tdp = live.and_then(|l| l.flow(RunMode::Tdp, name));
            let window = tdp.and_then(|l| l.window.as_ref());
            let scaled = |mode| live.and_then(|l| Some(l.unscaled(l.jitter(mode, name)?)));
            DemoFlow {
                flow: name.to_string(),
                paper_fifo_ns: pf,
                paper_tdp_ns: pt,
                sim_fifo_jitter_ns: ideal.jitter(RunMode::Fifo, name),
                sim_tdp_jitter_ns: ideal.jitter(RunMode::Tdp, name),
                host_sim_fifo_jitter_ns: host.jitter(RunMode::Fifo, name),
                host_sim_tdp_jitter_ns: host.jitter(RunMode::Tdp, name),
                live_fifo_jitter_ns: live.and_then(|l| l.jitter(RunMode::Fifo, name)),
                live_tdp_jitter_ns: tdp.and_then(|l| l.jitter_ns),
                live_fifo_jitter_scaled_ns: scaled(RunMode::Fifo),
                live_tdp_jitter_scaled_ns: scaled(RunMode::Tdp),
                live_tdp_jitter_999_ns: tdp.and_then(FlowLine::jitter_999_ns),
                live_tdp_in_window: window.and_then(|w| w.inside_share()),
                live_tdp_outliers: window.map(|w| w.outside),
                unexplained: window.map(|w| w.unexplained),
                live_tdp_lost: tdp.map(|l| l.lost),
                live_tdp_slips: tdp.map(|l| l.slips),
            }
        })
        .collect()
}

fn ms(v: Option<i64>) -> String {
    v.map_or("-".into(), |ns| format!("{:.3}", ns as f64 / 1e6))
}

fn ratio(fifo: Option<i64>, tdp: Option<i64>) -> Option<f64> {
    let (f, t) = (fifo?, tdp?);
    (t > 0).then(|| f as f64 / t as f64)
}

fn times(r: Option<f64>) -> String {
    match r {
        None => "-".into(),
        Some(x) if x >= 100.0 => format!("{x:.0}x"),
        Some(x) => format!("{x:.1}x"),
    }
}

/// FIFO's and TDP's jitter in ms and their ratio.
fn triple(fifo: Option<i64>, tdp: Option<i64>) -> [String; 3] {
    [ms(fifo), ms(tdp), times(ratio(fifo, tdp))]
}

/// The table of every flow's jitter, part by part (`scale`: the live part's, if it
/// ran).
pub fn table(rows: &[DemoFlow], scale: Option<u32>) -> String {
    let header = [
        "flow",
        "paper FIFO",
        "TDP",
        "ratio",
        "| sim FIFO",
        "TDP",
        "ratio",
        "| this host FIFO",
        "TDP",
        "ratio",
        "| live FIFO",
        "TDP",
        "ratio",
        "in window",
        "outliers",
        "unexplained",
    ];
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let mut v = vec![r.flow.clone()];
            v.extend(triple(r.paper_fifo_ns, r.paper_tdp_ns));
            v.extend(triple(r.sim_fifo_jitter_ns, r.sim_tdp_jitter_ns));
            v.extend(triple(r.host_sim_fifo_jitter_ns, r.host_sim_tdp_jitter_ns));
            v.extend(triple(
                r.live_fifo_jitter_scaled_ns,
                r.live_tdp_jitter_scaled_ns,
            ));
            v.extend([
                r.live_tdp_in_window
                    .map_or("-".into(), |s| format!("{:.2}%", s * 100.0)),
                r.live_tdp_outliers.map_or("-".into(), |n| n.to_string()),
                r.unexplained.map_or("-".into(), |n| n.to_string()),
            ]);
            v.truncate(if scale.is_some() { v.len() } else { 10 });
            v
        })
        .collect();
    let (live, header) = match scale {
        Some(s) if s > 1 => (format!("; live: at scale {s}, divided by {s}"), &header[..]),
        Some(_) => ("; live: at the paper's timing".into(), &header[..]),
        None => (String::new(), &header[..10]),
    };
    format!(
        "End-to-end delay jitter (max - min) per flow, ms — paper: baldi2006 Table I; sim: simulated, ideal host; this host: simulated with this host's wake-ups{live}:\n{}",
        grid(header, &cells)
    )
}

fn times_range(lo: f64, hi: f64) -> String {
    let (a, b) = (times(Some(lo)), times(Some(hi)));
    if a == b {
        a
    } else {
        format!("{a}–{b}")
    }
}

/// What the paper measured, in one line: its TDP jitter range and FIFO/TDP ratios.
pub fn paper_line(paper: Table) -> String {
    let tdp: Vec<i64> = paper.iter().map(|&(_, _, t)| i64::from(t)).collect();
    let r: Vec<f64> = paper
        .iter()
        .map(|&(_, f, t)| f64::from(f) / f64::from(t.max(1)))
        .collect();
    let lo = r.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = r.iter().cloned().fold(0.0, f64::max);
    format!(
        "  (baldi2006 Table I, measured: TDP jitter {}, {}–{} below FIFO)",
        range(&tdp, |us| format!("{us}us")),
        times(Some(lo)),
        times(Some(hi))
    )
}

/// The range of some values, `lo–hi` by `f`; `-` for none.
fn range(v: &[i64], f: impl Fn(i64) -> String) -> String {
    range_text(v, f).unwrap_or_else(|| "-".into())
}

/// One line saying what a part showed.
pub fn headline(p: &Part, flows: &[&str]) -> String {
    let tdp: Vec<i64> = flows
        .iter()
        .filter_map(|f| p.jitter(RunMode::Tdp, f))
        .collect();
    let ratios: Vec<f64> = flows
        .iter()
        .filter_map(|f| ratio(p.jitter(RunMode::Fifo, f), p.jitter(RunMode::Tdp, f)))
        .collect();
    let lost: u64 = p
        .lines
        .runs
        .iter()
        .flat_map(|(_, l)| l.iter().map(|x| x.lost))
        .sum();
    let jit = range(&tdp, |ns| fmt_ns(p.unscaled(ns)));
    let real = if p.scale > 1 {
        format!(" ({} real)", range(&tdp, fmt_ns))
    } else {
        String::new()
    };
    let cmp = match (
        ratios.iter().cloned().reduce(f64::min),
        ratios.iter().cloned().reduce(f64::max),
    ) {
        (Some(lo), Some(hi)) if lo >= 1.0 => format!("{} below FIFO", times_range(lo, hi)),
        (Some(lo), Some(hi)) => format!("FIFO/TDP {}", times_range(lo, hi)),
        _ => "no FIFO run".into(),
    };
    let two_tf = tdp.iter().filter(|&&j| j < 2 * p.tf_ns).count();
    format!(
        "{}: TDP jitter {jit}{real}, {cmp}, {lost} lost; {two_tf} of {} flows under 2 TF{}",
        p.name,
        tdp.len(),
        window_text(p)
    )
}

/// `; 99.98% of TDP packets in their window, 3 outliers (0 unexplained)`.
fn window_text(p: &Part) -> String {
    let Some((_, lines)) = p.run(RunMode::Tdp) else {
        return String::new();
    };
    let t = WindowReport::total(lines.iter().filter_map(|l| l.window.as_ref()));
    t.inside_share().map_or(String::new(), |share| {
        format!(
            "; {:.2}% of TDP packets in their window, {} outside ({} unexplained)",
            share * 100.0,
            t.outside,
            t.unexplained
        )
    })
}

/// The live TDP verdict per flow: window, share inside, jitter of 99.9 % of packets
/// against 2 TF, outliers by cause.
pub fn verdicts(p: &Part) -> Option<String> {
    let (_, lines) = p.run(RunMode::Tdp)?;
    let two_tf = 2 * p.tf_ns;
    let rows: Vec<Vec<String>> = lines
        .iter()
        .filter_map(|l| {
            let w = l.window.as_ref()?;
            let j999 = l.jitter_999_ns();
            Some(vec![
                l.flow.clone(),
                format!("{} – {}", fmt_ns(w.low_ns), fmt_ns(w.high_ns)),
                w.inside_share()
                    .map_or("-".into(), |s| format!("{:.3}%", s * 100.0)),
                j999.map_or("-".into(), |j| {
                    let ok = if j < two_tf { "<" } else { ">=" };
                    format!("{} {ok} 2 TF", fmt_ns(j))
                }),
                format!("{} ({} slipped)", l.lost, l.slips),
                w.causes_text(),
            ])
        })
        .collect();
    let head = [
        "flow",
        "window (real time)",
        "inside",
        "jitter of 99.9%",
        "lost",
        "outliers by cause",
    ];
    Some(format!(
        "{} — TDP verdicts (TF {}):\n{}",
        p.name,
        fmt_ns(p.tf_ns),
        grid(&head, &rows)
    ))
}

/// Every ratio token (`12.5x`) of a text in green when TDP did better (above 1) and
/// red when FIFO did (below 1), for a terminal; the padding stays as it was.
pub fn paint_ratios(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    let mut word = String::new();
    let flush = |w: &mut String, out: &mut String| {
        let value = w.strip_suffix('x').and_then(|n| n.parse::<f64>().ok());
        match value {
            Some(v) if v > 1.0 => out.push_str(&format!("\x1b[32m{w}\x1b[0m")),
            Some(v) if v < 1.0 => out.push_str(&format!("\x1b[31m{w}\x1b[0m")),
            _ => out.push_str(w),
        }
        w.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() || c == '.' || c == 'x' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::window::WindowReport;
    use crate::sim::paper::BALDI_TABLE_I;

    fn line(flow: &str, jitter: i64, window: Option<(u64, u64)>) -> FlowLine {
        FlowLine {
            flow: flow.into(),
            sent: 100,
            received: 100,
            lost: 0,
            slips: 0,
            min_ns: Some(1_000_000),
            p50_ns: None,
            p99_ns: None,
            p999_ns: Some(1_000_000 + jitter / 2),
            max_ns: Some(1_000_000 + jitter),
            jitter_ns: Some(jitter),
            over_tf: None,
            hops: Vec::new(),
            off_path: 0,
            duplicates: 0,
            window: window.map(|(inside, outside)| WindowReport {
                inside,
                outside,
                ..WindowReport::default()
            }),
        }
    }

    fn part(name: &str, scale: u32, fifo: i64, tdp: i64) -> Part {
        let flows = |j: i64, w: Option<(u64, u64)>| -> Vec<FlowLine> {
            BALDI_TABLE_I
                .iter()
                .map(|(n, _, _)| line(n, j, w))
                .collect()
        };
        let tf = lockstep_core::Duration::from_micros(250 * i64::from(scale));
        Part {
            name: name.into(),
            scale,
            tf_ns: tf.as_nanos(),
            lines: ScenarioLines {
                dir: "x".into(),
                runs: vec![
                    (
                        RunSpec::new(RunMode::Fifo, tf, true, false),
                        flows(fifo, None),
                    ),
                    (
                        RunSpec::new(RunMode::Tdp, tf, true, false),
                        flows(tdp, Some((999, 1))),
                    ),
                ],
            },
        }
    }

    #[test]
    fn the_papers_line_is_read_off_its_table() {
        assert_eq!(
            paper_line(BALDI_TABLE_I),
            "  (baldi2006 Table I, measured: TDP jitter 180us–440us, 5.2x–17.2x below FIFO)"
        );
    }

    #[test]
    fn ratios_are_painted_by_who_did_better() {
        assert_eq!(
            paint_ratios("f1  12.5x  0.9x  1.0x  3.100  x"),
            "f1  \x1b[32m12.5x\x1b[0m  \x1b[31m0.9x\x1b[0m  1.0x  3.100  x"
        );
        assert_eq!(
            paint_ratios("2.5x–10.1x below"),
            "\x1b[32m2.5x\x1b[0m–\x1b[32m10.1x\x1b[0m below"
        );
    }

    #[test]
    fn live_figures_are_given_real_and_divided_by_the_scale() {
        let ideal = part("simulated, ideal host", 1, 1_000_000, 100_000);
        let host = part("simulated, this host", 1, 1_000_000, 900_000);
        let live = part("live", 20, 40_000_000, 10_000_000);
        let r = rows(BALDI_TABLE_I, &ideal, &host, Some(&live));
        assert_eq!(r.len(), 5);
        assert_eq!(r[0].paper_fifo_ns, Some(3_100_000));
        assert_eq!(r[0].sim_tdp_jitter_ns, Some(100_000));
        assert_eq!(r[0].live_tdp_jitter_ns, Some(10_000_000));
        assert_eq!(r[0].live_tdp_jitter_scaled_ns, Some(500_000));
        assert_eq!(r[0].live_tdp_jitter_999_ns, Some(5_000_000));
        assert_eq!(r[0].live_tdp_in_window, Some(0.999));
        assert_eq!(
            (r[0].live_tdp_outliers, r[0].unexplained),
            (Some(1), Some(0))
        );
        let t = table(&r, Some(20));
        assert!(t.contains("live: at scale 20, divided by 20"), "{t}");
        assert!(t.lines().nth(2).unwrap().starts_with("f1234"), "{t}");
        let t = table(&rows(BALDI_TABLE_I, &ideal, &host, None), None);
        assert!(!t.contains("live"), "{t}");
        assert!(t.lines().nth(1).unwrap().ends_with("ratio"), "{t}");
    }

    #[test]
    fn a_headline_gives_the_range_the_ratio_and_the_window() {
        let live = part("live", 20, 32_000_000, 8_000_000);
        let names: Vec<&str> = BALDI_TABLE_I.iter().map(|(n, _, _)| *n).collect();
        let h = headline(&live, &names);
        assert_eq!(
            h,
            "live: TDP jitter 400.00us (8.000ms real), 4.0x below FIFO, 0 lost; 5 of 5 flows under 2 TF; 99.90% of TDP packets in their window, 5 outside (0 unexplained)"
        );
        let no = rows(BALDI_TABLE_I, &live, &live, None);
        assert_eq!(no[0].live_tdp_in_window, None);
    }
}
