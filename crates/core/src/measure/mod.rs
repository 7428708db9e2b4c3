//! The pure accumulators behind each probe: given timestamps (handed in by the Linux
//! layer or a simulator), they compute what the probe reports.
//!
//! - [`decomp`]: a TDP receiver's per-flow latency decomposition along the hops a
//!   probe recorded (the latency decomposition).
//! - [`txmatch`]: kernel TX timestamps matched to the packets they belong to.

pub mod decomp;
pub mod noise;
pub mod pacer;
pub mod rr;
pub mod sink;
pub mod timer;
pub mod txmatch;
