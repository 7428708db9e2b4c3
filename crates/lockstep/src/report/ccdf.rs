//! The latency CCDF of each flow, every run overlaid: the share of packets slower
//! than each latency, on a log scale, so the tail — where TDP's promise and a host's
//! stalls show — is as visible as the body. Each TDP run's window top is marked.

use std::fmt::Write;

use lockstep_core::stats::Summary;

use super::html::{
    color, fmt_ns, run_swatch, unit_for, FlowReport, LabReport, Measure, Names, CHART_W,
    PACKET_LATENCY, RUN_COLORS,
};
use super::svg::{self, esc, n, Axis, Chart};

/// `(value, share of samples above it)` at each histogram bucket, increasing.
pub fn ccdf(s: &Summary) -> Vec<(i64, f64)> {
    let h = &s.histogram;
    let total: u64 = h.count.iter().sum();
    if total == 0 {
        return Vec::new();
    }
    let mut pairs: Vec<(i64, u64)> = h
        .bucket_ns
        .iter()
        .copied()
        .zip(h.count.iter().copied())
        .collect();
    pairs.sort_unstable();
    let mut above = total;
    pairs
        .into_iter()
        .map(|(v, c)| {
            above = above.saturating_sub(c);
            (v, above as f64 / total as f64)
        })
        .collect()
}

pub(super) fn ccdf_section(page: &mut String, report: &LabReport, names: &Names) {
    page.push_str(r#"<section id="ccdf"><h2>Latency CCDF</h2><p class="lead">Share of packets slower than each latency (log scale): the tail, all runs overlaid. A dashed line marks the top of a TDP run's window or a FIFO flow's network-calculus bound.</p><div class="cards">"#);
    for name in &names.flows {
        let flows = names.across(report, name);
        if flows.is_empty() {
            continue;
        }
        let _ = write!(page, "<figure><figcaption><h3>{}</h3>", esc(name));
        for &(ri, _) in &flows {
            let label = report.runs.get(ri).map_or("", |r| r.label.as_str());
            let _ = write!(
                page,
                r#"<span class="legend">{}{}</span>"#,
                run_swatch(ri),
                esc(label)
            );
        }
        page.push_str("</figcaption>");
        page.push_str(&chart(name, &flows, PACKET_LATENCY));
        page.push_str("</figure>");
    }
    page.push_str("</div></section>");
}

/// A run's curve on a chart: run index, CCDF points, its window's top or its bound.
type Curve = (usize, Vec<(i64, f64)>, Option<i64>);

pub(super) fn chart(name: &str, flows: &[(usize, &FlowReport)], m: Measure) -> String {
    let curves: Vec<Curve> = flows
        .iter()
        .map(|&(ri, f)| {
            let top = f.window.as_ref().map(|w| w.high_ns).or(f.bound_ns);
            (ri, ccdf(&f.latency), top)
        })
        .collect();
    let xs = curves
        .iter()
        .flat_map(|(_, c, w)| c.iter().map(|p| p.0).chain(*w));
    let (Some(lo), Some(hi)) = (xs.clone().min(), xs.max()) else {
        return String::new();
    };
    let p_min = curves
        .iter()
        .flat_map(|(_, c, _)| c.iter().map(|p| p.1))
        .filter(|&p| p > 0.0)
        .fold(1.0f64, f64::min);
    let (div, unit) = unit_for(lo.unsigned_abs().max(hi.unsigned_abs()) as f64);
    let (x0, x1) = (
        lo as f64 / div,
        (hi as f64 / div).max(lo as f64 / div + 1e-9),
    );
    let chart = Chart {
        width: CHART_W,
        height: 260.0,
        left: 62.0,
        right: 18.0,
        top: 20.0,
        bottom: 44.0,
        x: Axis::linear(x0, x1, 6, &format!("{} ({unit})", m.quantity)),
        y: Axis::log(
            p_min / 2.0,
            1.0,
            2,
            &format!("share of {} slower", m.items),
            svg::sci_label,
        ),
    };
    let mut s = chart.open(&format!("latency CCDF of {name}"));
    let floor = p_min / 2.0;
    for (ri, c, window) in &curves {
        let col = color(&RUN_COLORS, *ri);
        let mut d = String::new();
        for (i, &(v, p)) in c.iter().enumerate() {
            let x = chart.px(v as f64 / div);
            if i == 0 {
                let _ = write!(d, "M{} {}", n(x), n(chart.py(1.0)));
            }
            let _ = write!(d, "H{}V{}", n(x), n(chart.py(p.max(floor))));
        }
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{col}" stroke-width="1.8" stroke-linejoin="round"/>"#
        );
        if let Some(w) = window {
            let x = chart.px(*w as f64 / div);
            s.push_str(&chart.marker(x, col, "5 4", &format!("limit {}", fmt_ns(*w)), 12.0));
        }
    }
    s.push_str(Chart::close());
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::stats::Histogram;

    #[test]
    fn the_ccdf_falls_from_below_one_to_zero() {
        let mut h = Histogram::new();
        for v in [100, 100, 200, 300] {
            h.record(v);
        }
        let c = ccdf(&h.summary());
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].1, 0.5);
        assert_eq!(c[1].1, 0.25);
        assert_eq!(c[2].1, 0.0);
        assert!(ccdf(&Histogram::new().summary()).is_empty());
    }
}
