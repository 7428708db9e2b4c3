//! A saved run's `summary.json`, read into types: the fields every result document
//! shares, and the results of the kinds whose report can be made again from them —
//! the lab's and the simulator's runs (their report is kept whole under
//! `results.report`; the lab's jitter, rt-service and shaped-switch runs keep it
//! since this version) and the probes (their distributions).

use std::path::{Path, PathBuf};

use lockstep_core::stats::Summary;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use crate::lab::faults::FaultVerdict;
use crate::lab::results::FlowLine;
use crate::report::html::LabReport;

/// The file every saved run holds.
pub const SUMMARY: &str = "summary.json";

/// Why a directory cannot be read as a saved run.
#[derive(Debug, thiserror::Error)]
pub enum SavedError {
    #[error("{dir}: no such directory (give the directory a run wrote its results to)", dir = .dir.display())]
    NoDir { dir: PathBuf },
    #[error("{dir}: not a saved run: it has no {SUMMARY} (`lab run`, `sim run` and `probe … --output DIR` write one)", dir = .dir.display())]
    NoSummary { dir: PathBuf },
    #[error("{path}: cannot read: {source}", path = .path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: not JSON: {message}", path = .path.display())]
    NotJson { path: PathBuf, message: String },
    #[error("{path}: field `{field}` is malformed: {message}", path = .path.display())]
    Malformed {
        path: PathBuf,
        field: String,
        message: String,
    },
    #[error("{path}: a `{kind}` document keeps no report to make again (saved runs of `lab run`, `sim run` and the probes do)", path = .path.display())]
    Unsupported { path: PathBuf, kind: String },
}

/// The fields every result document shares, with the kind's own `results`.
#[derive(Debug, Deserialize)]
pub struct Doc<R> {
    pub kind: String,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub started_at: String,
    /// Host facts, as the report shows them.
    #[serde(default)]
    pub host: Value,
    #[serde(default)]
    pub warnings: Vec<String>,
    /// What the run did to its thread (probes): `policy`, `priority`, `cpu`, `mlocked`.
    #[serde(default)]
    pub realtime: Option<Realtime>,
    pub results: R,
}

/// A probe's `realtime`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct Realtime {
    pub policy: Option<String>,
    pub priority: Option<i64>,
    pub cpu: Option<u64>,
    pub mlocked: bool,
}

/// The results of `lab.run`, `sim.run` and `sim.shaped-switch`.
#[derive(Debug, Deserialize)]
pub struct NetworkResults {
    /// What report.html shows.
    pub report: LabReport,
    /// One entry per run (TDP scenarios; the shaped switch's rows are read apart).
    #[serde(default)]
    pub runs: Vec<RunLines>,
    #[serde(default)]
    pub interrupted: Option<String>,
}

/// `results.runs[]` of a TDP scenario's run.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct RunLines {
    pub label: String,
    /// `fifo`, `tdp` or `kernel`.
    pub mode: String,
    pub tf_ns: i64,
    pub flows: Vec<FlowLine>,
    pub faults: Vec<FaultVerdict>,
    /// The lab's best-effort loads (the simulator's have fewer fields).
    pub loads: Vec<crate::lab::run::LoadResult>,
}

/// The results of the kinds whose summary is one table (the shaped switch, the
/// jitter and rt-service methods): their report, whose notes are that table.
#[derive(Debug, Deserialize)]
pub struct TabledResults {
    pub report: LabReport,
}

/// The results of a probe: its distributions and the counters its summary names.
/// Each kind fills the fields it has (see docs/FORMATS.md).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct ProbeResults {
    // probe.timer
    pub latency: Option<Summary>,
    pub samples: Option<u64>,
    pub overruns: Option<u64>,
    pub missed_periods: Option<u64>,
    pub max_at: Option<lockstep_core::measure::timer::MaxAt>,
    // probe.noise
    pub mode: Option<String>,
    pub gaps: Option<Summary>,
    pub reads: Option<u64>,
    pub above_threshold: Option<u64>,
    pub stolen_ns: Option<i64>,
    pub deviation: Option<Summary>,
    pub lateness: Option<Summary>,
    pub ticks: Option<u64>,
    pub spikes_total: Option<u64>,
    // probe.stream
    pub sent: Option<u64>,
    pub achieved_pps: Option<f64>,
    pub l_i: Option<Summary>,
    pub l_tx_from_send: Option<Summary>,
    pub l_tx_from_wake: Option<Summary>,
    // probe.sink
    pub probes: Option<u64>,
    pub totals: Option<SeqTotals>,
    pub one_way: Option<Summary>,
    pub delta_t: Option<Summary>,
    pub kernel_delta_t: Option<Summary>,
    pub send_path: Option<Summary>,
    pub wire_stack: Option<Summary>,
    pub rx_path: Option<Summary>,
    // probe.rr.server and probe.rr.client
    pub requests: Option<u64>,
    pub responses: Option<u64>,
    pub turnaround: Option<Summary>,
    pub answered: Option<u64>,
    pub lost: Option<u64>,
    pub rtt: Option<Summary>,
    pub network: Option<Summary>,
    // every probe
    pub elapsed_ns: Option<i64>,
    pub stopped_by: Option<String>,
    pub stop_reason: Option<String>,
}

/// A sink's loss accounting summed over its flows (the fields it needs of them).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub struct SeqTotals {
    pub unique: u64,
    pub lost: u64,
    pub duplicates: u64,
    pub reordered: u64,
}

/// A saved run, by what made it.
#[derive(Debug)]
pub enum Saved {
    /// `lab.run`, `sim.run`: a TDP scenario's runs.
    Network(Doc<NetworkResults>),
    /// `sim.shaped-switch`, `lab.shaped-switch`, `lab.jitter`, `lab.rt-service`.
    Tabled(Doc<TabledResults>),
    /// `probe.*`.
    Probe(Box<Doc<ProbeResults>>),
}

/// The kinds of probe documents.
pub const PROBE_KINDS: [&str; 6] = [
    "probe.timer",
    "probe.noise",
    "probe.stream",
    "probe.sink",
    "probe.rr.server",
    "probe.rr.client",
];

/// A saved run read from its directory, with the document's text (`report --json`).
pub struct Loaded {
    pub dir: PathBuf,
    pub text: String,
    pub saved: Saved,
}

impl Saved {
    pub fn kind(&self) -> &str {
        match self {
            Saved::Network(d) => &d.kind,
            Saved::Tabled(d) => &d.kind,
            Saved::Probe(d) => &d.kind,
        }
    }
}

/// Reads `DIR/summary.json` into its kind's types.
pub fn load(dir: &Path) -> Result<Loaded, SavedError> {
    let path = dir.join(SUMMARY);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(_) if !dir.is_dir() => {
            return Err(SavedError::NoDir {
                dir: dir.to_path_buf(),
            })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SavedError::NoSummary {
                dir: dir.to_path_buf(),
            })
        }
        Err(source) => return Err(SavedError::Read { path, source }),
    };
    let saved = parse(&path, &text)?;
    Ok(Loaded {
        dir: dir.to_path_buf(),
        text,
        saved,
    })
}

/// The document `text` (read from `path`) into its kind's types.
pub fn parse(path: &Path, text: &str) -> Result<Saved, SavedError> {
    #[derive(Deserialize)]
    struct Head {
        kind: String,
    }
    let head: Head = typed(path, text)?;
    match head.kind.as_str() {
        "lab.run" | "sim.run" => Ok(Saved::Network(typed(path, text)?)),
        "sim.shaped-switch" | "lab.shaped-switch" | "lab.jitter" | "lab.rt-service" => {
            Ok(Saved::Tabled(typed(path, text)?))
        }
        k if PROBE_KINDS.contains(&k) => Ok(Saved::Probe(Box::new(typed(path, text)?))),
        _ => Err(SavedError::Unsupported {
            path: path.to_path_buf(),
            kind: head.kind,
        }),
    }
}

/// `text` as a `T`; an error names the field that does not fit.
fn typed<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, SavedError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let t = serde_path_to_error::deserialize(&mut de)
        .map_err(|e| classify(path, e.path().to_string(), e.into_inner()))?;
    de.end().map_err(|e| classify(path, ".".into(), e))?;
    Ok(t)
}

/// A syntax error is not JSON; anything else names the field (`.`: the document).
fn classify(path: &Path, field: String, e: serde_json::Error) -> SavedError {
    let message = e.to_string();
    if e.is_syntax() || e.is_eof() {
        return SavedError::NotJson {
            path: path.to_path_buf(),
            message,
        };
    }
    SavedError::Malformed {
        path: path.to_path_buf(),
        field: if field == "." {
            "(the document)".into()
        } else {
            field
        },
        message: strip_position(&message),
    }
}

/// serde_json's message without its ` at line L column C` (the field says where).
fn strip_position(m: &str) -> String {
    match m.rfind(" at line ") {
        Some(i) => m[..i].to_string(),
        None => m.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_type_names_its_field() {
        let text = r#"{"kind": "sim.run", "results": {"report": {"runs": [{"label": 5}]}}}"#;
        let e = parse(Path::new("x/summary.json"), text).unwrap_err();
        let m = e.to_string();
        assert!(m.contains("`results.report.runs[0].label`"), "{m}");
        assert!(!m.contains("at line"), "{m}");
    }

    #[test]
    fn garbage_is_not_json_and_a_missing_report_is_named() {
        let e = parse(Path::new("s.json"), "{\"kind\": ").unwrap_err();
        assert!(matches!(e, SavedError::NotJson { .. }), "{e}");
        let e = parse(Path::new("s.json"), r#"{"kind": "sim.run", "results": {}}"#).unwrap_err();
        assert!(e.to_string().contains("missing field `report`"), "{e}");
        let e = parse(Path::new("s.json"), r#"{"kind": "calc", "results": {}}"#).unwrap_err();
        assert!(matches!(e, SavedError::Unsupported { .. }), "{e}");
    }
}
