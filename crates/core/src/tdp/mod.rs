//! Time-Driven Priority (pipeline forwarding), SPEC §2 — the pure parts: the
//! scheduling table, the per-port frame queues and the frame marking carried in DSCP.
//!
//! - [`schedule`]: `k` rows of `(flow, packets)` per output port, validated against
//!   the link capacity of a frame minus the guard.
//! - [`queues`]: the `n_buf = d_max + 1` frame queues of an output port and the
//!   queue-index formula of baldi2006.
//! - [`marking`]: the DSCP mark and the alternating-bit recovery of the upstream frame
//!   on each input link.

pub mod marking;
pub mod queues;
pub mod schedule;
