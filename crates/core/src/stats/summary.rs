//! The distribution object of the result document, as every result document carries it:
//!
//! ```json
//! {"count": 100000, "min_ns": 1200, "mean_ns": 2350.5, "max_ns": 45000,
//!  "stddev_ns": 800.2, "jitter_ns": 43800,
//!  "percentiles_ns": {"50": 2100, "90": 2900, "99": 3300, "99.9": 8100,
//!                     "99.99": 27000, "99.999": 43000},
//!  "histogram": {"bucket_ns": [..], "count": [..]}}
//! ```
//!
//! Built by [`Histogram::summary`](super::Histogram::summary). An empty distribution has
//! `count` 0, `null` statistics and no percentiles, so a reader never mistakes "no
//! packet arrived" for "every packet took 0 ns".

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The percentiles every distribution reports: (JSON key, percent). The keys sort
/// lexicographically in this same order, so a `BTreeMap` serializes them in it.
pub const PERCENTILES: [(&str, f64); 6] = [
    ("50", 50.0),
    ("90", 90.0),
    ("99", 99.0),
    ("99.9", 99.9),
    ("99.99", 99.99),
    ("99.999", 99.999),
];

/// A distribution of nanosecond values (the result document).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub count: u64,
    pub min_ns: Option<i64>,
    /// Exact mean.
    pub mean_ns: Option<f64>,
    pub max_ns: Option<i64>,
    /// Population standard deviation.
    pub stddev_ns: Option<f64>,
    /// `max - min` (saturating at `i64::MAX`).
    pub jitter_ns: Option<i64>,
    /// Keys of [`PERCENTILES`]; values within the histogram's relative error.
    pub percentiles_ns: BTreeMap<String, i64>,
    pub histogram: HistogramBuckets,
}

/// Non-empty histogram buckets as two parallel arrays: `bucket_ns[i]` is the smallest
/// value bucket `i` holds, `count[i]` how many values fell in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistogramBuckets {
    pub bucket_ns: Vec<i64>,
    pub count: Vec<u64>,
}

impl Summary {
    /// A percentile by its JSON key (`"99.9"`), if the distribution is not empty.
    pub fn percentile(&self, key: &str) -> Option<i64> {
        self.percentiles_ns.get(key).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::super::Histogram;
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn keys_sort_in_declared_order() {
        let mut keys: Vec<_> = PERCENTILES.iter().map(|(k, _)| *k).collect();
        let declared = keys.clone();
        keys.sort_unstable();
        assert_eq!(keys, declared);
        for (k, p) in PERCENTILES {
            assert_eq!(k.parse::<f64>().ok(), Some(p));
        }
    }

    #[test]
    fn json_shape() {
        let mut h = Histogram::new();
        for v in [1200, 2100, 2100, 2900, 3300, 46_000] {
            h.record(v);
        }
        let s = h.summary();
        let text = serde_json::to_string(&s).unwrap_or_default();
        // Field and percentile order as in the result document.
        let order = [
            "\"count\"",
            "\"min_ns\"",
            "\"mean_ns\"",
            "\"max_ns\"",
            "\"stddev_ns\"",
            "\"jitter_ns\"",
            "\"percentiles_ns\"",
            "\"50\"",
            "\"90\"",
            "\"99\"",
            "\"99.9\"",
            "\"99.99\"",
            "\"99.999\"",
            "\"histogram\"",
            "\"bucket_ns\"",
            "\"count\":[",
        ];
        let positions: Vec<_> = order.iter().map(|k| text.find(k)).collect();
        assert!(positions.iter().all(Option::is_some), "{text}");
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");

        let v: Value = serde_json::from_str(&text).unwrap_or_default();
        // Buckets are 8 wide in 1024..2048, 16 in 2048..4096, 256 in 32768..65536:
        // 2100 is in [2096, 2112) whose midpoint 2103 is p50 (rank 3 of 6); every
        // higher percentile has rank 6, the exact max.
        let expected = json!({
            "count": 6,
            "min_ns": 1200,
            "mean_ns": 9600.0,
            "max_ns": 46000,
            "stddev_ns": v["stddev_ns"],
            "jitter_ns": 44800,
            "percentiles_ns": {
                "50": 2103, "90": 46000, "99": 46000, "99.9": 46000,
                "99.99": 46000, "99.999": 46000
            },
            "histogram": {
                "bucket_ns": [1200, 2096, 2896, 3296, 45_824],
                "count": [1, 2, 1, 1, 1]
            }
        });
        assert_eq!(v, expected);
        let sd = v["stddev_ns"].as_f64().unwrap_or(f64::NAN);
        // Population variance of the six values, hand computed: the squared
        // deviations from the mean 9600 sum to 1_592_600_000.
        assert_eq!(sd, (1_592_600_000f64 / 6.0).sqrt());
        assert_eq!(s.percentile("50"), Some(2103));
        assert_eq!(s.percentile("99.999"), Some(46_000));
        assert_eq!(s.percentile("42"), None);

        // Round trip.
        let back: Summary = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, s);
    }

    #[test]
    fn empty_distribution_is_null() {
        let s = Histogram::new().summary();
        let v = serde_json::to_value(&s).unwrap_or_default();
        assert_eq!(
            v,
            json!({
                "count": 0, "min_ns": null, "mean_ns": null, "max_ns": null,
                "stddev_ns": null, "jitter_ns": null, "percentiles_ns": {},
                "histogram": {"bucket_ns": [], "count": []}
            })
        );
        assert_eq!(s.percentile("50"), None);
        let back: Summary = serde_json::from_value(v).unwrap_or_default();
        assert_eq!(back, s);
    }
}
