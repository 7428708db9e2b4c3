//! Pass/fail gates for CI: `--max-loss PCT` and `--fail-above STAT=DUR` on a probe's
//! loss and latency. A run that crosses one still prints and writes its results,
//! marks the document `check_failed` and exits 1.

use clap::Args;
use lockstep_core::stats::Summary;

use crate::cli::parse_duration;

#[derive(Args, Debug, Clone, Default)]
pub struct GateArgs {
    /// Exit 1 when more than this share of the packets was lost: a percentage like
    /// 0.1% or 0 (no loss at all).
    #[arg(long, value_name = "PCT", value_parser = parse_share)]
    pub max_loss: Option<f64>,
    /// Exit 1 when a statistic of the latency is above a duration: STAT is p50, p90,
    /// p99, p99.9, p99.99, p99.999 or max, e.g. p99=500us. Repeatable.
    #[arg(long, value_name = "STAT=DUR", value_parser = parse_limit)]
    pub fail_above: Vec<Limit>,
}

/// A latency statistic and the most it may be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// `max`, or a key of the summary's percentiles (`99.9`).
    pub stat: String,
    pub ns: i64,
}

const STATS: [&str; 7] = ["p50", "p90", "p99", "p99.9", "p99.99", "p99.999", "max"];

fn parse_limit(s: &str) -> Result<Limit, String> {
    let (stat, value) = s
        .split_once('=')
        .ok_or_else(|| format!("expected STAT=DUR like p99=500us, got \"{s}\""))?;
    if !STATS.contains(&stat) {
        return Err(format!(
            "unknown statistic \"{stat}\" (one of {})",
            STATS.join(", ")
        ));
    }
    let d = parse_duration(value)?;
    Ok(Limit {
        stat: stat.trim_start_matches('p').to_string(),
        ns: d.as_nanos(),
    })
}

/// `0.1%` or `0` → the share as a fraction (0.001, 0).
fn parse_share(s: &str) -> Result<f64, String> {
    let bad = || format!("expected a percentage like 0.1% or 0, got \"{s}\"");
    let v: f64 = s.trim_end_matches('%').parse().map_err(|_| bad())?;
    if !(0.0..=100.0).contains(&v) || (!s.ends_with('%') && v != 0.0) {
        return Err(bad());
    }
    Ok(v / 100.0)
}

impl GateArgs {
    /// What the run crossed, one sentence each (empty: it passed). `lost` of `total`
    /// packets; `latency` named `what` in the sentences.
    pub fn failures(&self, lost: u64, total: u64, what: &str, latency: &Summary) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(max) = self.max_loss {
            let share = if total == 0 {
                0.0
            } else {
                lost as f64 / total as f64
            };
            if share > max {
                out.push(format!(
                    "lost {lost} of {total} ({:.4}%), above --max-loss {}%",
                    share * 100.0,
                    max * 100.0
                ));
            }
        }
        for l in &self.fail_above {
            let (name, value) = if l.stat == "max" {
                ("max".to_string(), latency.max_ns)
            } else {
                (
                    format!("p{}", l.stat),
                    latency.percentiles_ns.get(&l.stat).copied(),
                )
            };
            if let Some(v) = value.filter(|&v| v > l.ns) {
                out.push(format!(
                    "{what} {name} {} is above --fail-above {name}={}",
                    lockstep_core::Duration(v),
                    lockstep_core::Duration(l.ns)
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn gates_parse_and_judge() {
        assert_eq!(parse_share("0.1%").unwrap(), 0.001);
        assert_eq!(parse_share("0").unwrap(), 0.0);
        assert!(parse_share("5").is_err());
        assert!(parse_share("150%").is_err());
        assert_eq!(
            parse_limit("p99.9=500us").unwrap(),
            Limit {
                stat: "99.9".into(),
                ns: 500_000
            }
        );
        assert!(parse_limit("p42=1ms")
            .unwrap_err()
            .contains("unknown statistic"));
        assert!(parse_limit("p99").unwrap_err().contains("STAT=DUR"));
        let mut pct = BTreeMap::new();
        pct.insert("99".to_string(), 700_000);
        let lat = Summary {
            count: 10,
            max_ns: Some(2_000_000),
            percentiles_ns: pct,
            ..Summary::default()
        };
        let g = GateArgs {
            max_loss: Some(0.01),
            fail_above: vec![
                parse_limit("p99=500us").unwrap(),
                parse_limit("max=5ms").unwrap(),
            ],
        };
        let f = g.failures(2, 100, "RTT", &lat);
        assert_eq!(f.len(), 2, "{f:?}");
        assert!(
            f[0].starts_with("lost 2 of 100 (2.0000%), above --max-loss 1%"),
            "{}",
            f[0]
        );
        assert!(
            f[1].contains("RTT p99 700us is above --fail-above p99=500us"),
            "{}",
            f[1]
        );
        assert!(g.failures(1, 100, "RTT", &Summary::default()).is_empty());
    }
}
