//! # lockstep-netcalc — provable delay bounds (the FIFO port analysis)
//!
//! Deterministic network calculus in exact rational arithmetic, for the admission
//! controller and `lockstep calc`. Pure: no I/O beyond parsing the TOML text handed in.
//!
//! - [`q`]: `Q`, exact rationals (i128 fast path, big integers when needed).
//! - [`units`]: values with units (`"160Mbit/s"`, `"20B/us"`, `"0.5ms"`, `"2MiB"`),
//!   parsed exactly; display in µs / bytes with the exact fraction.
//! - [`curve`]: arrival curves (token bucket, T-SPEC and their sums), service curves
//!   (rate-latency, convolutions, FIFO and arbitrary residuals), deconvolution, delay
//!   and backlog bounds.
//! - [`fifo`]: one FIFO port exactly as the FIFO port analysis (loeser Eq. 2–7).
//! - [`model`]: servers, flows, networks and the field-naming input errors.
//! - [`methods`]: the tightest TFA, SFA and PMOO this crate knows, for `calc`
//!   (bundled arrival curves; not monotone in the traffic, so not for admission).
//! - [`admission`]: total and separated flow analysis on a feed-forward network, kept
//!   up to date flow by flow ([`Admission`]).
//! - [`parse`]: the network file.
//! - [`sim`]: an exact fluid simulator of symmetric bursts through FIFO rate-latency
//!   servers, the test oracle the bounds are checked against.

pub mod admission;
mod bigcd;
pub mod curve;
pub mod fifo;
pub mod methods;
pub mod model;
pub mod parse;
mod paths;
pub mod q;
pub mod sim;
mod u256;
pub mod units;

pub use admission::{
    analyse, Admission, AdmitOk, Analysis, Breaking, FlowBounds, Reject, RemoveOk, Report,
    ServerBounds,
};
pub use curve::{backlog_bound, delay_bound, fifo_aggregate, Curve, FifoAggregate, Service};
pub use fifo::{fifo_port, FifoPort, FifoPortError, PortFlow};
pub use model::{Field, Flow, InputError, Multiplexing, Network, Server, Shaper};
pub use parse::{load, parse_cyclic, parse_network};
pub use q::Q;
