//! # lockstep-core — the sans-IO core
//!
//! Everything here is pure computation: no system calls, no clocks read, no sockets.
//! Time comes in as an argument. The live node (real clock, real sockets, in
//! `lockstep-linux` and the `lockstep` binary) and the simulator drive the same code.
//!
//! - [`time`]: instants tagged with their clock, durations, the human duration syntax.
//! - [`units`]: sizes, packet rates and bit rates with units (`1514B`, `100000pps`,
//!   `100Mbit/s`).
//! - [`limits`]: the largest (and smallest) value of every number a user gives.
//! - [`frame`]: the common time reference — time-frames, cycles, parity bits.
//! - [`stats`]: histograms, percentiles, RFC 3550 jitter, sequence accounting (what a result document holds).
//! - [`wire`]: wire formats — the probe packet, Ethernet, IPv4, UDP, checksums —
//!   zero-copy views plus `Repr` parse/emit; malformed bytes are errors, never panics.
//! - [`net`]: IPv4 prefixes, the longest-prefix-match route table, the neighbour table
//!   and the 5-tuple classifier of an edge router.
//! - [`tdp`]: Time-Driven Priority (time-driven forwarding): scheduling tables, frame queues, DSCP
//!   marking and frame recovery, and the TDP node state machine.
//! - [`measure`]: the pure accumulators behind each probe (what a probe computes from
//!   the timestamps the Linux layer hands it).
//! - [`margin`]: the adaptive spin margin of the hybrid wait strategy.
//! - [`sched`]: option types shared by every subcommand (wait strategy, policy).
//! - [`audit`]: the host audit — verdicts on captured `/proc` and `/sys`
//!   text (real-time kernel, isolation, C-states, IRQ affinity, coalescing, …) and the
//!   run-time changes `lockstep host apply` makes.
//! - [`shaper`]: token-bucket shaping refilled once per shaping interval (the FIFO port analysis),
//!   its exact output envelope, the symmetric-burst source of loeser §4.1, and models
//!   of the Linux `tbf` and `htb` qdiscs (continuous refill).

pub mod audit;
pub mod frame;
pub mod limits;
pub mod margin;
pub mod measure;
pub mod names;
pub mod net;
pub mod prefetch;
pub mod sched;
pub mod shaper;
pub mod stats;
pub mod tdp;
pub mod time;
pub mod units;
pub mod wire;

pub use time::{ClockId, Duration, Instant};

/// The configuration of the fuzz-smoke property tests (the stable twins of the fuzz
/// targets under `fuzz/`): `cases` inputs from a fixed seed, so `cargo test` runs the
/// same inputs every time and a failure reproduces.
#[cfg(test)]
pub(crate) fn fuzz_config(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x10c4_57e9),
        ..proptest::test_runner::Config::default()
    }
}
