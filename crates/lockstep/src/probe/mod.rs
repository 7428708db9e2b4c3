//! `lockstep probe …`: measure what the OS adds. Each probe drives a pure accumulator
//! of `lockstep_core::measure` with timestamps from the Linux layer.

pub mod noise;
pub mod rr;
pub mod sink;
pub mod stream;
pub mod timer;

use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Subcommand;
use lockstep_linux::rt::RtRequest;

use crate::report::{Output, SampleWriter};

#[derive(Subcommand, Debug)]
pub enum ProbeCmd {
    /// Periodic wake-ups like cyclictest: wake-up latency and overruns.
    ///
    /// The text output ends with a latency histogram (cyclictest -h, compact: one line
    /// per power-of-two range of latencies, its count and a bar); --json carries every
    /// bucket under results.latency.histogram.
    Timer(timer::TimerArgs),
    /// What the OS steals from a busy loop (oslat-style gaps; --period: the dummy program).
    ///
    /// The one probe that never sleeps: what it measures is a CPU kept busy (every
    /// other probe waits by sleeping unless told otherwise). Pin it (--cpu, --cpus).
    Noise(noise::NoiseArgs),
    /// Constant-bit-rate sender of probe packets.
    Stream(stream::StreamArgs),
    /// Packet sink: inter-arrival, one-way and receive-path latency, loss, reordering.
    Sink(sink::SinkArgs),
    /// Request/response latency like sockperf ping-pong.
    #[command(subcommand)]
    Rr(rr::RrCmd),
}

/// The CPUs of `--cpus`, sorted, each once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

/// `--cpus LIST`: the kernel's CPU-list syntax (`0-3,6`), at least one CPU, none above
/// [`lockstep_core::limits::MAX_CPU`].
pub fn parse_cpus(s: &str) -> Result<CpuList, String> {
    let cpus = lockstep_core::audit::cpulist::parse(s)
        .map_err(|e| format!("expected a CPU list like 0-3,6: {e}"))?;
    if cpus.is_empty() {
        return Err(format!("expected a CPU list like 0-3,6, got \"{s}\""));
    }
    for &c in &cpus {
        lockstep_core::limits::cpu(c as u64)?;
    }
    Ok(CpuList(cpus))
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

/// `--cpus`: one pinned thread per CPU of `cpus`, each set up as `req` says with
/// its own sample file (`samples.cpuN.csv`, when samples are asked for), running
/// `measure(its request, its writer, quiet)`; their results in the order of the
/// list. Only the first thread shows progress.
pub(crate) fn on_each_cpu<T: Send>(
    req: &RtRequest,
    cpus: &[usize],
    out: &Output,
    header: &[&str],
    measure: impl Fn(&RtRequest, Option<SampleWriter>, bool) -> Result<T> + Sync,
) -> Result<Vec<T>> {
    let base = out.samples_path()?;
    let mut writers = Vec::with_capacity(cpus.len());
    for &cpu in cpus {
        writers.push(match &base {
            Some(p) => Some(SampleWriter::create(&per_cpu_path(p, cpu), header)?),
            None => None,
        });
    }
    let measure = &measure;
    std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .zip(writers)
            .enumerate()
            .map(|(i, (&cpu, w))| {
                let req = RtRequest {
                    cpu: Some(cpu),
                    ..req.clone()
                };
                let quiet = crate::say::quiet() || i > 0;
                s.spawn(move || measure(&req, w, quiet))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| anyhow::anyhow!("a measuring thread panicked"))?
            })
            .collect()
    })
}

/// `samples.csv` → `samples.cpu3.csv`: one sample file per CPU.
fn per_cpu_path(p: &Path, cpu: usize) -> PathBuf {
    let stem = p.file_stem().unwrap_or_default().to_string_lossy();
    let name = match p.extension() {
        Some(ext) => format!("{stem}.cpu{cpu}.{}", ext.to_string_lossy()),
        None => format!("{stem}.cpu{cpu}"),
    };
    p.with_file_name(name)
}
