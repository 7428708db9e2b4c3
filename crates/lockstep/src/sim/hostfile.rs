//! `--host MODEL`: `ideal`, `fixed:DUR`, or the wake-up histogram of a saved
//! `lockstep probe timer --json` document; `--node-hosts DIR`: each node's own
//! wake-up lateness as a lab run measured it (`DIR/<node>.json`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use lockstep_core::Duration;
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
    let m = Measured::new(shown.to_string(), &values, &counts)
        .map_err(|e| UsageError(format!("{shown}: results.latency.histogram: {e}")))?;
    Ok(HostModel::Measured(m))
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
