//! Statistics every measurement reports (the result document).
//!
//! - [`Histogram`]: log-bucket histogram of nanosecond values — count, exact
//!   min/mean/max/stddev, percentiles within a stated relative error, PMF; mergeable.
//! - [`Summary`]: the result-document distribution object built from a histogram.
//! - [`Rfc3550Jitter`]: the RFC 3550 inter-arrival jitter estimate.
//! - [`ks_statistic`]: the two-sample Kolmogorov–Smirnov distance of two samples.
//! - [`SeqTracker`]: loss, duplicates, reordering and loss runs from sequence numbers.

pub mod histogram;
pub mod jitter;
pub mod ks;
pub mod seq;
pub mod summary;

pub use histogram::Histogram;
pub use jitter::Rfc3550Jitter;
pub use ks::ks_statistic;
pub use seq::{SeqEvent, SeqReport, SeqTracker};
pub use summary::{HistogramBuckets, Summary, PERCENTILES};
