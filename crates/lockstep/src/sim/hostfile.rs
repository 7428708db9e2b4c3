//! `--host MODEL`: `ideal`, `fixed:DUR`, or the wake-up histogram of a saved
//! `lockstep probe timer --json` document; `--node-hosts DIR`: each node's own
//! wake-up lateness as a lab run measured it (`DIR/<node>.json`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use lockstep_core::{limits, Duration};
use lockstep_sim::{HostModel, Measured, ModelError};
use serde_json::Value;

use crate::UsageError;

/// Reads `--host`.
pub fn parse(spec: &str) -> Result<HostModel> {
    if spec == "ideal" {
        return Ok(HostModel::Ideal);
    }
    if let Some(d) = spec.strip_prefix("fixed:") {
        let d = Duration::parse(d).map_err(|e| UsageError(format!("--host: fixed:{d}: {e}")))?;
        if d.is_negative() {
            return Err(UsageError(format!("--host: fixed:{d} is negative")).into());
        }
        limits::duration_at_most(
            d,
            limits::MAX_HOST_LATENESS,
            &limits::MAX_HOST_LATENESS.to_string(),
        )
        .map_err(|m| UsageError(format!("--host: fixed:{m}")))?;
        return Ok(HostModel::Fixed(d.as_nanos()));
    }
    from_file(Path::new(spec))
}

fn from_file(path: &Path) -> Result<HostModel> {
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| {
        UsageError(format!(
            "--host: expected ideal, fixed:DUR or a `lockstep probe timer --json` file; cannot read {shown}: {e}"
        ))
    })?;
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| UsageError(format!("{shown}: not a JSON document: {e}")))?;
    if doc.get("kind").and_then(Value::as_str) != Some("probe.timer") {
        return Err(UsageError(format!(
            "{shown}: kind: expected \"probe.timer\" (a `lockstep probe timer --json` result)"
        ))
        .into());
    }
    let hist = doc
        .pointer("/results/latency/histogram")
        .ok_or_else(|| UsageError(format!("{shown}: results.latency.histogram: missing")))?;
    let nums = |key: &str| -> Result<Vec<i64>> {
        hist.get(key)
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_i64).collect())
            .ok_or_else(|| {
                UsageError(format!(
                    "{shown}: results.latency.histogram.{key}: expected an array of integers"
                ))
                .into()
            })
    };
    let values = nums("bucket_ns")?;
    let counts: Vec<u64> = nums("count")?
        .into_iter()
        .map(|c| c.max(0) as u64)
        .collect();
    check_histogram(&values)
        .map_err(|m| UsageError(format!("{shown}: results.latency.histogram.{m}")))?;
    let m = Measured::new(shown.to_string(), &values, &counts)
        .map_err(|e| UsageError(format!("{shown}: results.latency.histogram: {e}")))?;
    Ok(HostModel::Measured(m))
}

/// A measured host model's buckets: at most [`limits::MAX_HISTOGRAM_BUCKETS`], none
/// later than [`limits::MAX_HOST_LATENESS`]. The message starts with the field
/// (`bucket_ns[3]: ...`).
fn check_histogram(values: &[i64]) -> Result<(), String> {
    if values.len() > limits::MAX_HISTOGRAM_BUCKETS {
        return Err(format!(
            "bucket_ns: {} buckets is above the limit of {}",
            values.len(),
            limits::MAX_HISTOGRAM_BUCKETS
        ));
    }
    let max = limits::MAX_HOST_LATENESS;
    if let Some((i, &v)) = values.iter().enumerate().find(|(_, &v)| v > max.as_nanos()) {
        return Err(format!(
            "bucket_ns[{i}]: a wake-up {} late is above the limit of {max}",
            Duration(v)
        ));
    }
    Ok(())
}

/// Host models by node name from a lab run directory: every `<node>.json` there
/// with a measured wake-up histogram (`wakeup.histogram`: senders and routers).
pub fn from_lab_run(dir: &Path) -> Result<BTreeMap<String, HostModel>> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| UsageError(format!("--node-hosts: cannot read {}: {e}", dir.display())))?;
    let mut out = BTreeMap::new();
    for e in entries.flatten() {
        let path = e.path();
        if path.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(doc) = serde_json::from_str::<NodeWakeups>(&text) else {
            continue;
        };
        let (Some(name), Some(w)) = (doc.name, doc.wakeup) else {
            continue;
        };
        let h = w.histogram;
        check_histogram(&h.bucket_ns)
            .map_err(|m| UsageError(format!("{}: wakeup.histogram.{m}", path.display())))?;
        match Measured::new(path.display().to_string(), &h.bucket_ns, &h.count) {
            Ok(m) => {
                out.insert(name, HostModel::Measured(m));
            }
            // a node that timed no wake-up (a FIFO router) keeps --host
            Err(ModelError::Empty) => {}
            Err(e) => {
                return Err(UsageError(format!("{}: wakeup.histogram: {e}", path.display())).into())
            }
        }
    }
    if out.is_empty() {
        return Err(UsageError(format!(
            "--node-hosts: {}: no node result file with a measured wake-up histogram (expected a lab run directory such as OUT/tdp)",
            dir.display()
        ))
        .into());
    }
    Ok(out)
}

/// What `--node-hosts` reads of a node's result file.
#[derive(serde::Deserialize)]
struct NodeWakeups {
    name: Option<String>,
    wakeup: Option<lockstep_core::stats::Summary>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(spec: &str) -> String {
        parse(spec).unwrap_err().to_string()
    }

    #[test]
    fn a_fixed_lateness_has_an_upper_limit() {
        assert_eq!(
            parse("fixed:10s").unwrap(),
            HostModel::Fixed(10_000_000_000)
        );
        assert_eq!(
            err("fixed:11s"),
            "--host: fixed:11s is above the limit of 10s"
        );
    }

    #[test]
    fn a_measured_histogram_has_limits() {
        let dir = std::env::temp_dir().join(format!("lockstep-hostfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("timer.json");
        let write = |buckets: &str, counts: &str| {
            let doc = format!(
                r#"{{"kind": "probe.timer", "results": {{"latency": {{"histogram": {{"bucket_ns": {buckets}, "count": {counts}}}}}}}}}"#
            );
            std::fs::write(&file, doc).unwrap();
        };
        write("[1000, 10000000000]", "[5, 1]");
        assert!(matches!(
            parse(file.to_str().unwrap()).unwrap(),
            HostModel::Measured(_)
        ));
        write("[1000, 10000000001]", "[5, 1]");
        assert_eq!(
            err(file.to_str().unwrap()),
            format!(
                "{}: results.latency.histogram.bucket_ns[1]: a wake-up 10.000000001s late is above the limit of 10s",
                file.display()
            )
        );
        let many = vec![1i64; limits::MAX_HISTOGRAM_BUCKETS + 1];
        assert_eq!(
            check_histogram(&many).unwrap_err(),
            "bucket_ns: 1000001 buckets is above the limit of 1000000"
        );
        assert!(check_histogram(&many[1..]).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
