//! Results: the result-document JSON document, the output directory, streamed per-sample CSV,
//! and the human summary tables.

pub mod ccdf;
pub mod compare;
pub mod html;
pub mod human;
pub mod packets;
pub mod probe_page;
pub mod samples;
pub mod svg;
pub mod verdict;
pub mod window;

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::cli::OutputArgs;
pub use samples::SampleWriter;

/// Version of the result document layout; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// One result document (the result document): what ran, where, with which settings, and what it
/// measured. Every measuring command builds one.
#[derive(Debug, Serialize)]
pub struct ResultDoc {
    pub lockstep: Tool,
    /// e.g. "probe.timer"
    pub kind: String,
    /// The exact argument vector.
    pub command: Vec<String>,
    /// Wall-clock start (RFC 3339, UTC).
    pub started_at: String,
    pub host: lockstep_linux::host::HostFacts,
    /// The host audit (`lockstep host audit`): what on this host adds latency, item by
    /// item, with the evidence and the fix.
    pub audit: Option<lockstep_core::audit::Report>,
    /// The effective settings of the run (after defaults).
    pub config: Value,
    /// What the run did to the thread (policy, priority, CPU, mlock, dma latency).
    pub realtime: Value,
    /// The measurements: distributions in the result-document shape, counters.
    pub results: Map<String, Value>,
    /// Anything the user should know (missing kernel features, fallbacks, stolen CPU).
    pub warnings: Vec<String>,
    /// Whether a requested check (e.g. --threshold) failed; exit status 1 then.
    pub check_failed: bool,
}

#[derive(Debug, Serialize)]
pub struct Tool {
    pub version: &'static str,
    pub schema: u32,
}

impl ResultDoc {
    pub fn new(kind: &str, config: impl Serialize) -> Self {
        let host = lockstep_linux::host::collect();
        let audit = embedded_audit(&host);
        let mut doc = Self::with_host(kind, config, host);
        doc.audit = Some(audit);
        doc
    }

    /// A document for these host facts, without the audit (the caller sets it).
    pub fn with_host(
        kind: &str,
        config: impl Serialize,
        host: lockstep_linux::host::HostFacts,
    ) -> Self {
        let warnings = host.warnings();
        ResultDoc {
            lockstep: Tool {
                version: env!("CARGO_PKG_VERSION"),
                schema: SCHEMA_VERSION,
            },
            kind: kind.to_string(),
            command: std::env::args().collect(),
            started_at: rfc3339_now(),
            host,
            audit: None,
            config: serde_json::to_value(config).unwrap_or(Value::Null),
            realtime: Value::Null,
            results: Map::new(),
            warnings,
            check_failed: false,
        }
    }

    pub fn set_realtime(&mut self, rt: impl Serialize) {
        self.realtime = serde_json::to_value(rt).unwrap_or(Value::Null);
    }

    pub fn insert(&mut self, key: &str, value: impl Serialize) {
        self.results.insert(
            key.to_string(),
            serde_json::to_value(value).unwrap_or(Value::Null),
        );
    }

    pub fn warn(&mut self, w: impl Into<String>) {
        self.warnings.push(w.into());
    }
}

/// The wall-clock time now, in UTC to the second (RFC 3339: `2026-11-27T23:05:03Z`).
pub(crate) fn rfc3339_now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Where a run's human text, JSON and files go, following the command line: with `--json` the
/// document is the only thing on stdout and human text goes to stderr.
pub struct Output {
    pub args: OutputArgs,
}

impl Output {
    pub fn new(args: &OutputArgs) -> Result<Self> {
        if let Some(dir) = &args.output {
            fs::create_dir_all(dir)
                .with_context(|| format!("--output: cannot create directory {}", dir.display()))?;
        }
        Ok(Output { args: args.clone() })
    }

    /// The per-sample CSV path asked for, if any.
    pub fn samples_path(&self) -> Result<Option<PathBuf>> {
        match (&self.args.samples, &self.args.output) {
            (None, _) => Ok(None),
            (Some(p), _) if !p.as_os_str().is_empty() => Ok(Some(p.clone())),
            (Some(_), Some(dir)) => Ok(Some(dir.join("samples.csv"))),
            (Some(_), None) => Err(crate::UsageError(
                "--samples: give a file (--samples FILE) or an output directory (--output DIR)"
                    .into(),
            )
            .into()),
        }
    }

    /// Opens the per-sample CSV writer when asked for.
    pub fn sample_writer(&self, header: &[&str]) -> Result<Option<SampleWriter>> {
        match self.samples_path()? {
            Some(p) => Ok(Some(SampleWriter::create(&p, header)?)),
            None => Ok(None),
        }
    }

    /// Progress and human text: stderr with --json, else stdout.
    pub fn human(&self, text: &str) {
        if self.args.json {
            crate::say::say_part!("{text}");
        } else {
            print!("{text}");
        }
    }

    /// Progress lines (suppressed with --quiet); always on stderr.
    pub fn progress(&self, text: &str) {
        if !crate::say::quiet() {
            eprintln!("{text}");
        }
    }

    /// Prints the JSON document (with --json) and writes it to DIR/summary.json.
    pub fn finish(&self, doc: &ResultDoc) -> Result<()> {
        let text = serde_json::to_string_pretty(doc)?;
        if let Some(dir) = &self.args.output {
            write_atomic(&dir.join("summary.json"), text.as_bytes())?;
        }
        if self.args.json {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.write_all(b"\n")?;
        }
        Ok(())
    }
}

/// Writes a file whole or not at all (see [`lockstep_linux::durable`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    Ok(lockstep_linux::durable::write_atomic(path, bytes)?)
}

/// The end of a lab run: `DIR/summary.json` (`text`) and `DIR/report.html`, then the
/// table on stdout, or with `--json` the document on stdout and the table on stderr.
pub fn finish_lab_run(
    out: &Path,
    text: &str,
    report: &html::LabReport,
    table: &str,
    json: bool,
) -> anyhow::Result<()> {
    write_atomic(&out.join("summary.json"), text.as_bytes())?;
    write_atomic(&out.join("report.html"), html::render(report).as_bytes())?;
    Show::of(json).print(table, text);
    Ok(())
}

/// What a finished run prints on stdout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Show {
    /// The human table.
    Table,
    /// The document (the table on stderr).
    Json,
    /// Nothing: a caller shows the results its own way (the demo).
    Nothing,
}

impl Show {
    /// `--json` or not; nothing at all for a caller that shows the results itself.
    pub fn of_run(json: bool, silent: bool) -> Show {
        if silent {
            Show::Nothing
        } else {
            Show::of(json)
        }
    }

    /// Prints a finished run: the table, or the document with the table on stderr.
    pub fn print(self, table: &str, doc: &str) {
        match self {
            Show::Table => print!("{table}"),
            Show::Json => {
                crate::say::say_part!("{table}");
                println!("{doc}");
            }
            Show::Nothing => {}
        }
    }

    pub fn of(json: bool) -> Show {
        if json {
            Show::Json
        } else {
            Show::Table
        }
    }
}

/// [`finish_lab_run`] for a document too large to hold twice: the report is
/// rendered and dropped first, then the document goes straight to
/// `DIR/summary.json` (no string of it in memory) and, with `--json`, from there to
/// stdout. The same bytes as [`finish_lab_run`] with the document pretty-printed.
pub fn finish_lab_run_streamed(
    out: &Path,
    doc: &Value,
    report: html::LabReport,
    table: &str,
    show: Show,
) -> anyhow::Result<()> {
    write_atomic(&out.join("report.html"), html::render(&report).as_bytes())?;
    drop(report);
    let path = out.join("summary.json");
    lockstep_linux::durable::write_atomic_with(&path, |w| {
        serde_json::to_writer_pretty(w, doc).map_err(std::io::Error::from)
    })?;
    match show {
        Show::Json => {
            crate::say::say_part!("{table}");
            let mut f =
                fs::File::open(&path).with_context(|| format!("cannot read {}", path.display()))?;
            let stdout = std::io::stdout();
            let mut lock = stdout.lock();
            std::io::copy(&mut f, &mut lock)?;
            writeln!(lock)?;
        }
        Show::Table => print!("{table}"),
        Show::Nothing => {}
    }
    Ok(())
}

/// The audit embedded in every result document: no intent, cheap (a few hundred file
/// reads and one ioctl per NIC).
pub fn embedded_audit(host: &lockstep_linux::host::HostFacts) -> lockstep_core::audit::Report {
    let snap = lockstep_linux::audit::snapshot(host, None);
    lockstep_core::audit::audit(&snap, &lockstep_core::audit::Intent::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_time_is_rfc3339_utc_to_the_second() {
        let t = rfc3339_now();
        assert_eq!(t.len(), "2026-11-27T23:05:03Z".len(), "{t}");
        assert!(t.ends_with('Z') && t.as_bytes()[10] == b'T', "{t}");
        assert!(humantime::parse_rfc3339(&t).is_ok(), "{t}");
    }
}
