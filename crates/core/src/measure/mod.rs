//! The pure accumulators behind each probe: given timestamps (handed in by the Linux
//! layer or a simulator), they compute what the probe reports.
pub mod noise;
pub mod pacer;
pub mod rr;
pub mod sink;
pub mod timer;
