//! Human summaries that read like cyclictest's and sockperf's: one row per
//! distribution, fixed columns, compact units.

use lockstep_core::measure::noise::Pow2Bucket;
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

/// Width of the longest bar of a text histogram.
const BAR_WIDTH: u64 = 40;

/// A text histogram of power-of-two ranges, like cyclictest's `-h` but compact: one
/// line per non-empty range `[from, to)` with its count and a bar of `#` as long as
/// the count is against the largest one (at least one `#`, so a lone outlier shows).
pub fn pow2_histogram(buckets: &[Pow2Bucket]) -> String {
    let top = buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    buckets
        .iter()
        .map(|b| {
            let bar = (b.count.saturating_mul(BAR_WIDTH) / top).max(1) as usize;
            format!(
                "  [{:>9}, {:>9})  {:>12}  {}\n",
                fmt_ns(b.from_ns),
                fmt_ns(b.to_ns),
                b.count,
                "#".repeat(bar)
            )
        })
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

    #[test]
    fn histogram_bars_follow_the_counts() {
        let b = |from_ns, to_ns, count| Pow2Bucket {
            from_ns,
            to_ns,
            count,
        };
        let text = pow2_histogram(&[
            b(1024, 2048, 1000),
            b(2048, 4096, 500),
            b(1 << 20, 1 << 21, 1),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            format!("  [   1.02us,    2.05us)          1000  {}", "#".repeat(40))
        );
        assert!(lines[1].ends_with(&format!(" 500  {}", "#".repeat(20))));
        assert!(
            lines[2].ends_with(" 1  #"),
            "a lone outlier still shows: {}",
            lines[2]
        );
        assert_eq!(pow2_histogram(&[]), "");
    }
}
