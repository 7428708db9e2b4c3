//! The short tables a lab run prints: per run and flow the latency figures, FIFO and
//! TDP side by side like baldi2006's Tables I–II, and for a TF sweep the latency PMF
//! summary per TF like welponer2012's Table I (with the share of packets that arrived
//! in a later frame, `L > TF`).

use super::results::FlowLine;
use super::scenario::{RunMode, RunSpec};
use crate::report::human::fmt_ns;

fn ns(v: Option<i64>) -> String {
    v.map(fmt_ns).unwrap_or_else(|| "-".into())
}

fn pct(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(0.0) => "0".into(),
        Some(x) if x < 0.0001 => format!("{:.5}%", x * 100.0),
        Some(x) => format!("{:.2}%", x * 100.0),
    }
}

/// Renders rows of cells with left-aligned first and right-aligned other columns.
pub(crate) fn grid(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            if let Some(x) = w.get_mut(i) {
                *x = (*x).max(c.chars().count());
            }
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i].saturating_sub(c.chars().count());
            if i == 0 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str("  ");
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

/// One run: per flow count, latency min/p50/p99/max, jitter (max − min), loss, slips.
pub fn run_table(run: &RunSpec, lines: &[FlowLine]) -> String {
    let rows: Vec<Vec<String>> = lines
        .iter()
        .map(|l| {
            vec![
                l.flow.clone(),
                l.received.to_string(),
                ns(l.min_ns),
                ns(l.p50_ns),
                ns(l.p99_ns),
                ns(l.max_ns),
                ns(l.jitter_ns),
                l.lost.to_string(),
                l.slips.to_string(),
            ]
        })
        .collect();
    let mut head = vec![
        "flow", "count", "min", "p50", "p99", "max", "jitter", "lost", "slips",
    ];
    let mut rows = rows;
    if lines.iter().any(|l| l.window.is_some()) {
        head.extend(["in window", "outside: cause"]);
        for (r, l) in rows.iter_mut().zip(lines) {
            let w = l.window.as_ref();
            r.push(pct(w.and_then(|w| w.inside_share())));
            r.push(w.map_or("-".into(), |w| match w.outside {
                0 => "0".into(),
                n => format!("{n}: {}", w.causes_text()),
            }));
        }
    }
    format!("{} (TF {}):\n{}", run.label, run.tf, grid(&head, &rows))
}

/// FIFO vs TDP per flow (jitter = max − min end-to-end delay), for every TF that has
/// both; `None` otherwise.
pub fn comparison_table(runs: &[(RunSpec, Vec<FlowLine>)]) -> Option<String> {
    let mut out = String::new();
    for (fifo, fl) in runs.iter().filter(|(r, _)| r.mode == RunMode::Fifo) {
        if fl.is_empty() {
            continue;
        }
        let Some((_, tl)) = runs
            .iter()
            .find(|(r, _)| r.mode == RunMode::Tdp && r.tf == fifo.tf)
        else {
            continue;
        };
        let rows: Vec<Vec<String>> = fl
            .iter()
            .map(|f| {
                let t = tl.iter().find(|t| t.flow == f.flow);
                let tj = t.and_then(|t| t.jitter_ns);
                let ratio = match (f.jitter_ns, tj) {
                    (Some(a), Some(b)) if b > 0 => format!("{:.1}x", a as f64 / b as f64),
                    _ => "-".into(),
                };
                vec![
                    f.flow.clone(),
                    ns(f.jitter_ns),
                    ns(tj),
                    ratio,
                    ns(f.p99_ns),
                    ns(t.and_then(|t| t.p99_ns)),
                    f.lost.to_string(),
                    t.map(|t| t.lost.to_string()).unwrap_or_else(|| "-".into()),
                    t.map(|t| t.slips.to_string()).unwrap_or_else(|| "-".into()),
                ]
            })
            .collect();
        out.push_str(&format!(
            "End-to-end delay jitter (max − min), FIFO vs TDP at TF {} (baldi2006 Tables I–II):\n{}",
            fifo.tf,
            grid(
                &["flow", "FIFO", "TDP", "FIFO/TDP", "FIFO p99", "TDP p99", "FIFO lost", "TDP lost", "TDP slips"],
                &rows
            )
        ));
    }
    (!out.is_empty()).then_some(out)
}

/// Latency PMF summary per TF and flow (welponer2012 Table I); `None` with one TF.
pub fn sweep_table(runs: &[(RunSpec, Vec<FlowLine>)]) -> Option<String> {
    let mut tfs: Vec<_> = runs.iter().map(|(r, _)| r.tf).collect();
    tfs.dedup();
    if tfs.len() < 2 {
        return None;
    }
    let many_modes = runs.iter().any(|(r, _)| r.mode != runs[0].0.mode);
    let mut rows = Vec::new();
    for (run, lines) in runs {
        for l in lines {
            let mut name = format!("{}", run.tf);
            if many_modes {
                name = format!("{name} {}", run.mode.label());
            }
            rows.push(vec![
                name,
                l.flow.clone(),
                l.received.to_string(),
                ns(l.min_ns),
                ns(l.p50_ns),
                ns(l.p99_ns),
                ns(l.p999_ns),
                ns(l.max_ns),
                pct(l.over_tf),
                l.lost.to_string(),
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    Some(format!(
        "End-to-end latency L per time-frame (welponer2012 Table I; L > TF: arrived in a later frame):\n{}",
        grid(
            &["TF", "flow", "count", "min", "p50", "p99", "p99.9", "max", "L > TF", "lost"],
            &rows
        )
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::Duration;

    fn line(flow: &str, jitter: i64, lost: u64, over: f64) -> FlowLine {
        FlowLine {
            flow: flow.into(),
            sent: 100,
            received: 100 - lost,
            lost,
            slips: 0,
            min_ns: Some(1_000),
            p50_ns: Some(2_000),
            p99_ns: Some(3_000),
            p999_ns: Some(4_000),
            max_ns: Some(1_000 + jitter),
            jitter_ns: Some(jitter),
            over_tf: Some(over),
            hops: vec![],
            off_path: 0,
            duplicates: 0,
            window: None,
        }
    }

    #[test]
    fn a_tdp_run_shows_each_flow_against_its_window() {
        use crate::report::window::WindowReport;
        let tf = Duration::from_micros(250);
        let mut l = line("f1", 20_000, 0, 0.0);
        l.window = Some(WindowReport {
            inside: 999,
            outside: 1,
            causes: vec![("late wake-up".into(), 1), ("slip".into(), 0)],
            ..WindowReport::default()
        });
        let t = run_table(&RunSpec::new(RunMode::Tdp, tf, true, false), &[l]);
        assert!(
            t.lines()
                .nth(1)
                .unwrap()
                .ends_with("in window     outside: cause"),
            "{t}"
        );
        assert!(
            t.lines()
                .nth(2)
                .unwrap()
                .ends_with("99.90%  1: 1 late wake-up"),
            "{t}"
        );
        let fifo = run_table(
            &RunSpec::new(RunMode::Fifo, tf, true, false),
            &[line("f1", 1, 0, 0.0)],
        );
        assert!(!fifo.contains("window"), "{fifo}");
    }

    #[test]
    fn fifo_and_tdp_side_by_side() {
        let tf = Duration::from_micros(250);
        let runs = vec![
            (
                RunSpec::new(RunMode::Fifo, tf, true, false),
                vec![line("f1234", 3_100_000, 0, 0.0)],
            ),
            (
                RunSpec::new(RunMode::Tdp, tf, true, false),
                vec![line("f1234", 180_000, 0, 0.0)],
            ),
        ];
        let t = comparison_table(&runs).unwrap();
        assert_eq!(
            t,
            "End-to-end delay jitter (max − min), FIFO vs TDP at TF 250us (baldi2006 Tables I–II):\n\
             flow      FIFO       TDP  FIFO/TDP  FIFO p99  TDP p99  FIFO lost  TDP lost  TDP slips\n\
             f1234  3.100ms  180.00us     17.2x    3.00us   3.00us          0         0          0\n"
        );
        assert!(sweep_table(&runs).is_none());
        assert_eq!(
            run_table(&runs[1].0, &runs[1].1),
            "TDP (TF 250us):\n\
             flow   count     min     p50     p99       max    jitter  lost  slips\n\
             f1234    100  1.00us  2.00us  3.00us  181.00us  180.00us     0      0\n"
        );
    }

    #[test]
    fn a_tf_sweep_lists_each_tf() {
        let runs: Vec<_> = [500, 50]
            .iter()
            .map(|&us| {
                (
                    RunSpec::new(RunMode::Tdp, Duration::from_micros(us), false, true),
                    vec![line("frame", 50_000, 1, if us == 50 { 0.25 } else { 0.0 })],
                )
            })
            .collect();
        let t = sweep_table(&runs).unwrap();
        assert_eq!(
            t,
            "End-to-end latency L per time-frame (welponer2012 Table I; L > TF: arrived in a later frame):\n\
             TF      flow  count     min     p50     p99   p99.9      max  L > TF  lost\n\
             500us  frame     99  1.00us  2.00us  3.00us  4.00us  51.00us       0     1\n\
             50us   frame     99  1.00us  2.00us  3.00us  4.00us  51.00us  25.00%     1\n"
        );
        assert!(comparison_table(&runs).is_none());
    }
}
