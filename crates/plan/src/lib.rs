//! # lockstep-plan — scenarios and the planner
//!
//! Pure code (no system calls, no clock): the lab and the simulator read the same
//! scenario files and build the same network from the same plan.
//!
//! - [`scenario`]: the scenario file (`scenarios/*.toml`) — nodes, links, reserved
//!   flows, best-effort load, the runs to compare — checked field by field, every
//!   error naming the file, line, column and field.
//! - [`alloc`]: the TDP frame allocator — which frames of the cycle a flow reserves
//!   on every link of its path; the planner and `lockstep ctl` both book with it.
//! - [`plan`]: topology + flows → routes, TDP schedules (booked in an [`alloc`] book) and
//!   one node configuration per node, for one run (mode and time-frame).
//! - [`fault`]: faults a run injects on purpose (a router's clock off, a link
//!   down, a router killed and restarted).
//! - [`nodefile`]: the node file (`node.toml`): the sans-IO node's configuration
//!   plus what the live driver needs (strategy, priority, flows to send).

pub mod alloc;
pub mod fault;
pub mod nodefile;
pub mod plan;
pub mod scenario;
