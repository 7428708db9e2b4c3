//! Human summaries that read like cyclictest's and sockperf's: one row per
//! distribution, fixed columns, compact units.

use lockstep_core::stats::Summary;

/// A nanosecond value in a compact unit: `850ns`, `12.34us`, `1.234ms`, `2.500s`.
pub fn fmt_ns(ns: i64) -> String {
    let a = ns.unsigned_abs();
    let v = ns as f64;
    if a < 1_000 {
        format!("{ns}ns")
    } else if a < 1_000_000 {
        format!("{:.2}us", v / 1e3)
    } else if a < 1_000_000_000 {
        format!("{:.3}ms", v / 1e6)
    } else {
        format!("{:.3}s", v / 1e9)
    }
}

/// The range of some values written by `f`: `lo–hi`, or one value when they are
/// all the same; `None` for none.
pub fn range_text(v: &[i64], f: impl Fn(i64) -> String) -> Option<String> {
    let (&lo, &hi) = v.iter().min().zip(v.iter().max())?;
    Some(if lo == hi {
        f(lo)
    } else {
        format!("{}–{}", f(lo), f(hi))
    })
}

fn fmt_opt(v: Option<i64>) -> String {
    v.map(fmt_ns).unwrap_or_else(|| "-".into())
}

fn fmt_f(v: Option<f64>) -> String {
    v.map(|x| fmt_ns(x.round() as i64))
        .unwrap_or_else(|| "-".into())
}

const COLUMNS: [&str; 11] = [
    "count", "min", "p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max", "mean", "stddev",
];

/// A table of distributions, one row each.
pub fn dist_table(rows: &[(&str, &Summary)]) -> String {
    let name_w = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0).max(8);
    let mut out = format!("{:<name_w$}", "");
    for c in COLUMNS {
        out.push_str(&format!(" {c:>9}"));
    }
    out.push('\n');
    for (name, s) in rows {
        out.push_str(&format!("{name:<name_w$} {:>9}", s.count));
        out.push_str(&format!(" {:>9}", fmt_opt(s.min_ns)));
        for key in ["50", "90", "99", "99.9", "99.99", "99.999"] {
            out.push_str(&format!(" {:>9}", fmt_opt(s.percentile(key))));
        }
        out.push_str(&format!(" {:>9}", fmt_opt(s.max_ns)));
        out.push_str(&format!(" {:>9}", fmt_f(s.mean_ns)));
        out.push_str(&format!(" {:>9}", fmt_f(s.stddev_ns)));
        out.push('\n');
    }
    out
}

/// `key: value` lines, aligned.
pub fn kv(lines: &[(&str, String)]) -> String {
    let w = lines.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    lines
        .iter()
        .map(|(k, v)| format!("{k:>w$}: {v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_units() {
        assert_eq!(fmt_ns(850), "850ns");
        assert_eq!(fmt_ns(12_345), "12.35us");
        assert_eq!(fmt_ns(1_234_567), "1.235ms");
        assert_eq!(fmt_ns(2_500_000_000), "2.500s");
        assert_eq!(fmt_ns(-5_000), "-5.00us");
    }
}
