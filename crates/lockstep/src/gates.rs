//! Pass/fail gates for CI: `--max-loss PCT` and `--fail-above STAT=DUR` on the loss
//! and latency of a probe (`probe sink`, `probe rr client`) or of every flow of every
//! run of a lab (`lab run`, each mode or row on its own). A run that crosses one still
//! prints and writes its results, marks the document `check_failed`, lists the
//! crossings under `results.crossings` and exits 1.

use clap::Args;
use lockstep_core::stats::Summary;
use serde::Serialize;

use crate::cli::parse_duration;
use crate::report::html::RunReport;
use crate::report::ResultDoc;
use crate::CheckFailed;

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

/// One gate a run crossed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Crossing {
    /// The lab's run (its mode, or row): `FIFO`, `TDP`, `tbf Ts=1ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The lab's flow.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flow: Option<String>,
    /// `loss`, or the latency statistic (`p50` … `p99.999`, `max`).
    pub stat: String,
    #[serde(flatten)]
    pub measured: Measured,
    /// The sentence the terminal shows.
    pub message: String,
}

/// What was measured against what was allowed.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Measured {
    Loss {
        lost: u64,
        total: u64,
        /// Lost over total (0.02 is 2 %).
        share: f64,
        /// `--max-loss` as a share.
        max_share: f64,
    },
    Latency {
        value_ns: i64,
        /// The `--fail-above` duration.
        limit_ns: i64,
    },
}

impl GateArgs {
    /// Whether any gate was asked for.
    pub fn any(&self) -> bool {
        self.max_loss.is_some() || !self.fail_above.is_empty()
    }

    /// The gates `lost` of `total` packets and `latency` cross, the latency named
    /// `what` in the sentences (empty: it passed).
    pub fn check(&self, lost: u64, total: u64, what: &str, latency: &Summary) -> Vec<Crossing> {
        let mut out = Vec::new();
        if let Some(max) = self.max_loss {
            let share = if total == 0 {
                0.0
            } else {
                lost as f64 / total as f64
            };
            if share > max {
                out.push(Crossing {
                    run: None,
                    flow: None,
                    stat: "loss".into(),
                    measured: Measured::Loss {
                        lost,
                        total,
                        share,
                        max_share: max,
                    },
                    message: format!(
                        "lost {lost} of {total} ({:.4}%), above --max-loss {}%",
                        share * 100.0,
                        max * 100.0
                    ),
                });
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
                out.push(Crossing {
                    run: None,
                    flow: None,
                    message: format!(
                        "{what} {name} {} is above --fail-above {name}={}",
                        lockstep_core::Duration(v),
                        lockstep_core::Duration(l.ns)
                    ),
                    stat: name,
                    measured: Measured::Latency {
                        value_ns: v,
                        limit_ns: l.ns,
                    },
                });
            }
        }
        out
    }

    /// Writes the crossings into the document: `check_failed`, and with any gate
    /// asked for `results.crossings` (empty: passed). The error to end the run with
    /// when one was crossed (exit status 1), after the results are written.
    pub fn record(&self, doc: &mut ResultDoc, crossings: &[Crossing]) -> Option<CheckFailed> {
        doc.check_failed = !crossings.is_empty();
        if self.any() {
            doc.insert("crossings", crossings);
        }
        (!crossings.is_empty()).then(|| {
            CheckFailed(
                crossings
                    .iter()
                    .map(|c| c.message.as_str())
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })
    }

    /// The gates each flow of each lab run crosses, on its own (a mode's flows are not
    /// pooled with another mode's): the sentences name the run and the flow.
    pub fn check_runs(&self, runs: &[RunReport]) -> Vec<Crossing> {
        let mut out = Vec::new();
        for r in runs {
            for f in &r.flows {
                // the sender's count, or what arrived and what was missed when that is
                // larger (a receiver may count a loss the sender's file lacks)
                let total = f.sent.max(f.received.saturating_add(f.lost));
                for mut c in self.check(f.lost, total, "latency", &f.latency) {
                    c.message = format!("{}: flow {}: {}", r.label, f.name, c.message);
                    c.run = Some(r.label.clone());
                    c.flow = Some(f.name.clone());
                    out.push(c);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::html::FlowReport;
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
        let f: Vec<String> = g
            .check(2, 100, "RTT", &lat)
            .into_iter()
            .map(|c| c.message)
            .collect();
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
        assert!(g.check(1, 100, "RTT", &Summary::default()).is_empty());
    }

    fn flow(name: &str, sent: u64, lost: u64, p50_ns: i64) -> FlowReport {
        let mut pct = BTreeMap::new();
        pct.insert("50".to_string(), p50_ns);
        FlowReport {
            name: name.into(),
            latency: Summary {
                count: sent - lost,
                max_ns: Some(p50_ns * 2),
                percentiles_ns: pct,
                ..Summary::default()
            },
            sent,
            received: sent - lost,
            lost,
            ..FlowReport::default()
        }
    }

    fn run(label: &str, flows: Vec<FlowReport>) -> RunReport {
        RunReport {
            label: label.into(),
            tf_ns: None,
            flows,
            hops: Vec::new(),
            bound_note: None,
        }
    }

    #[test]
    fn each_flow_of_each_run_is_judged_on_its_own() {
        let runs = [
            run("FIFO", vec![flow("a", 100, 0, 900), flow("b", 100, 5, 100)]),
            run("TDP", vec![flow("a", 100, 0, 100), flow("b", 100, 0, 100)]),
        ];
        let g = GateArgs {
            max_loss: Some(0.01),
            fail_above: vec![parse_limit("p50=500ns").unwrap()],
        };
        let c = g.check_runs(&runs);
        let named: Vec<(Option<&str>, Option<&str>, &str)> = c
            .iter()
            .map(|c| (c.run.as_deref(), c.flow.as_deref(), c.stat.as_str()))
            .collect();
        // pooled, the TDP run's flows would hide FIFO's: each crossing is its own
        assert_eq!(
            named,
            [
                (Some("FIFO"), Some("a"), "p50"),
                (Some("FIFO"), Some("b"), "loss")
            ]
        );
        assert_eq!(
            c[0].message,
            "FIFO: flow a: latency p50 900ns is above --fail-above p50=500ns"
        );
        assert!(c[1].message.starts_with("FIFO: flow b: lost 5 of 100"));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v[0]["value_ns"], 900);
        assert_eq!(v[0]["limit_ns"], 500);
        assert_eq!(v[1]["lost"], 5);
        assert_eq!(v[1]["total"], 100);
        assert_eq!(v[1]["max_share"], 0.01);
        // no gate asked for: nothing crosses
        assert!(GateArgs::default().check_runs(&runs).is_empty());
        assert!(!GateArgs::default().any() && g.any());
    }
}
