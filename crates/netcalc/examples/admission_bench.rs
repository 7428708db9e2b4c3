//! Admission benchmark (bench/admission.sh): admits 10,000 shaped flows one by one into
//! a network of 1,000 FIFO rate-latency servers with random feed-forward paths of 2–6
//! hops (seeded), timing each admission, then times a full re-analysis of the final
//! network.
//!
//! Topologies (`--topology`):
//! - `pods` (default): 100 groups of 10 servers; a flow's path is 2–6 servers of one
//!   group in increasing order (the servers of a cell or a rack). What an admission
//!   touches (its path, everything downstream, the flows crossing them) stays within
//!   the group.
//! - `flat`: one order of all 1,000 servers; each hop goes 1–20 places further on.
//!   Everything downstream of a path is a large part of the network, so an admission
//!   recomputes much more: this shows the cost of the cone.
//!
//! `--grid-ps N` rounds the FIFO delays by which arrival curves are propagated up to N
//! picoseconds ([`Admission::set_propagation_grid`]): bounds stay valid, numbers stay
//! small.
//!
//! Usage: admission_bench [--flows N] [--servers N] [--seed S] [--topology pods|flat]
//!        [--grid-ps N]

use std::time::{Duration, Instant};

use lockstep_netcalc::{Admission, Flow, Multiplexing, Network, Server, Q};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn arg<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> T {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn mbit(n: i64) -> Q {
    Q::int(n * 1_000_000)
}
fn us(n: i64) -> Q {
    Q::ratio(n as i128, 1_000_000).unwrap_or_default()
}
fn bytes(n: i64) -> Q {
    Q::int(8 * n)
}

/// CPU time of the calling thread: unlike the wall clock it does not count the time
/// other processes on this shared machine hold the core.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes the timespec we pass.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let n_flows: usize = arg(&args, "--flows", 10_000);
    let n_servers: usize = arg(&args, "--servers", 1_000);
    let seed: u64 = arg(&args, "--seed", 1);
    let topology: String = arg(&args, "--topology", "pods".to_string());
    // Round propagated FIFO delays up to this many picoseconds (0: exact).
    let grid_ps: i64 = arg(&args, "--grid-ps", 0);
    let pod = 10usize;
    let mut rng = StdRng::seed_from_u64(seed);

    let servers: Vec<Server> = (0..n_servers)
        .map(|j| Server {
            name: format!("s{j}"),
            rate: if rng.gen_bool(0.5) {
                mbit(1_000)
            } else {
                mbit(10_000)
            },
            latency: us([2, 5, 10][rng.gen_range(0..3)]),
            buffer: Some(bytes(16 << 20)),
            multiplexing: Multiplexing::Fifo,
            shaper: None,
        })
        .collect();
    let flows: Vec<Flow> = (0..n_flows)
        .map(|k| {
            let hops = rng.gen_range(2..=6usize);
            let mut path: Vec<usize> = Vec::with_capacity(hops);
            if topology == "flat" {
                let mut at = rng.gen_range(0..n_servers.saturating_sub(6 * 20).max(1));
                for _ in 0..hops {
                    path.push(at);
                    at += rng.gen_range(1..=20);
                }
                path.retain(|&s| s < n_servers);
            } else {
                let group = rng.gen_range(0..n_servers / pod);
                let mut picks: Vec<usize> = (0..pod).collect();
                for i in 0..hops {
                    let j = rng.gen_range(i..pod);
                    picks.swap(i, j);
                }
                path = picks[..hops].to_vec();
                path.sort_unstable();
                for s in &mut path {
                    *s += group * pod;
                }
            }
            let r = rng.gen_range(1..=10i64);
            let ts_us = [100i64, 1_000][rng.gen_range(0..2)];
            // b = r · Ts + M (loeser §3.1), M = 1514 B, on a 1 Gbit/s access link.
            let burst = Q::int(r * ts_us) + bytes(1514);
            Flow {
                name: format!("f{k}"),
                path: path.iter().map(|s| format!("s{s}")).collect(),
                rate: mbit(r),
                burst,
                peak: Some(mbit(1_000)),
                max_packet: Some(bytes(1514)),
                deadline: Some(us(100_000)),
            }
        })
        .collect();

    let empty = Network {
        servers: servers.clone(),
        flows: Vec::new(),
    };
    let mut adm = match Admission::new(&empty) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("admission_bench: {e}");
            std::process::exit(2);
        }
    };
    if grid_ps > 0 {
        adm.set_propagation_grid(Q::ratio(grid_ps as i128, 1_000_000_000_000));
    }
    let mut times = Vec::with_capacity(n_flows);
    let mut cpu_times = Vec::with_capacity(n_flows);
    let mut slowest: Vec<(Duration, usize, usize, usize)> = Vec::new();
    let (mut rejected, mut servers_touched, mut flows_touched) = (0usize, 0usize, 0usize);
    let started = Instant::now();
    for f in flows {
        let (c0, t0) = (thread_cpu(), Instant::now());
        let r = adm.admit(f);
        let dt = t0.elapsed();
        cpu_times.push(thread_cpu().saturating_sub(c0));
        times.push(dt);
        match r {
            Ok(ok) => {
                servers_touched += ok.servers_touched;
                flows_touched += ok.flows_touched;
                slowest.push((dt, times.len() - 1, ok.servers_touched, ok.flows_touched));
                slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
                slowest.truncate(3);
            }
            Err(_) => rejected += 1,
        }
    }
    let total = started.elapsed();
    let admitted = n_flows - rejected;
    times.sort_unstable();
    cpu_times.sort_unstable();
    let (c_full, t_full) = (thread_cpu(), Instant::now());
    let full = adm.full_reanalysis();
    let full_time = t_full.elapsed();
    let full_cpu = thread_cpu().saturating_sub(c_full);
    let t_new = Instant::now();
    let grid = (grid_ps > 0)
        .then(|| Q::ratio(grid_ps as i128, 1_000_000_000_000))
        .flatten();
    let fresh = Admission::with_grid(&adm.network(), grid).map(|a| a.snapshot());
    let new_time = t_new.elapsed();
    let same = fresh.as_ref().is_ok_and(|f| *f == full) && adm.snapshot() == full;
    let worst = full
        .flows
        .iter()
        .map(|f| f.bound().to_f64())
        .fold(0.0, f64::max)
        * 1e6;
    let small = full
        .flows
        .iter()
        .all(|f| f.tfa.is_small() && f.sfa.is_small());

    let arithmetic = if grid_ps > 0 {
        format!("propagated delays rounded up to {grid_ps} ps")
    } else {
        "exact".to_string()
    };
    println!("admission benchmark: {n_servers} servers, {n_flows} flows, topology {topology}, seed {seed}, {arithmetic}");
    println!(
        "  admitted {admitted}, rejected {rejected}; per admission recomputed on average {:.1} servers and {:.1} flows",
        servers_touched as f64 / admitted.max(1) as f64,
        flows_touched as f64 / admitted.max(1) as f64
    );
    println!(
        "  per admission: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms, mean {:.3} ms (all {} admissions: {:.2} s)",
        pct(&times, 0.5).as_secs_f64() * 1e3,
        pct(&times, 0.99).as_secs_f64() * 1e3,
        times.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3 / n_flows.max(1) as f64,
        n_flows,
        total.as_secs_f64()
    );
    println!(
        "  per admission, thread CPU time: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        pct(&cpu_times, 0.5).as_secs_f64() * 1e3,
        pct(&cpu_times, 0.99).as_secs_f64() * 1e3,
        cpu_times.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    println!(
        "  full re-analysis of the final network: {:.2} s, CPU {:.2} s (validate + analyse from the file's data: {:.2} s)",
        full_time.as_secs_f64(),
        full_cpu.as_secs_f64(),
        new_time.as_secs_f64()
    );
    println!(
        "  incremental state equals the full re-analysis: {same}; largest bound {worst:.1} us; all bounds in the i128 fast path: {small}"
    );
    for (dt, k, s, f) in &slowest {
        println!(
            "  slow: admission #{k} took {:.3} ms ({s} servers, {f} flows recomputed)",
            dt.as_secs_f64() * 1e3
        );
    }
    if !same {
        std::process::exit(1);
    }
}
