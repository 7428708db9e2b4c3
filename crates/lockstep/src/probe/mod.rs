//! `lockstep probe …`: measure what the OS adds. Each probe drives a pure accumulator
//! of `lockstep_core::measure` with timestamps from the Linux layer.

pub mod noise;
pub mod rr;
pub mod sink;
pub mod stream;
pub mod timer;

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum ProbeCmd {
    /// Periodic wake-ups like cyclictest: wake-up latency and overruns.
    Timer(timer::TimerArgs),
    /// What the OS steals from a busy loop (oslat-style gaps; --period: the dummy program).
    Noise(noise::NoiseArgs),
    /// Constant-bit-rate sender of probe packets.
    Stream(stream::StreamArgs),
    /// Packet sink: inter-arrival, one-way and receive-path latency, loss, reordering.
    Sink(sink::SinkArgs),
    /// Request/response latency like sockperf ping-pong.
    #[command(subcommand)]
    Rr(rr::RrCmd),
}

pub fn run(cmd: ProbeCmd) -> Result<()> {
    match cmd {
        ProbeCmd::Timer(a) => timer::run(a),
        ProbeCmd::Noise(a) => noise::run(a),
        ProbeCmd::Stream(a) => stream::run(a),
        ProbeCmd::Sink(a) => sink::run(a),
        ProbeCmd::Rr(c) => rr::run(c),
    }
}
