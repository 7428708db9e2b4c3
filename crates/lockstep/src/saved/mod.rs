//! Saved runs: what `lab run`, `sim run` and the probes wrote into a result
//! directory, read back into types.
//!
//! - [`report`]: `lockstep report DIR` — report.html and the human summary made again
//!   from `DIR/summary.json` alone;
//! - [`compare`]: `lockstep compare A B` — two saved runs of the same kind side by
//!   side, figure by figure;
//! - [`doc`]: the typed document and the errors that name the missing file or the
//!   malformed field; [`probe`]: a probe's result as a report.

pub mod compare;
pub mod doc;
pub mod probe;
pub mod report;
