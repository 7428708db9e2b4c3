//! Seeded synthetic latencies in nanoseconds: a log-normal body and a heavy tail.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One latency distribution: a log-normal body of median `median_ns` and log-sd
/// `sigma`; with probability `tail_p` a Pareto tail from `tail_from_ns` (shape
/// `alpha`), capped at `cap_ns`.
#[derive(Clone, Copy)]
pub struct Shape {
    pub median_ns: f64,
    pub sigma: f64,
    pub tail_p: f64,
    pub tail_from_ns: f64,
    pub alpha: f64,
    pub cap_ns: f64,
}

/// A host's wake-up or a packet's latency: 3 µs median, one in a thousand from 20 µs
/// on with a Pareto tail (shape 0.9) up to 40 ms.
pub const HOST: Shape = Shape {
    median_ns: 3_000.0,
    sigma: 0.35,
    tail_p: 1e-3,
    tail_from_ns: 20_000.0,
    alpha: 0.9,
    cap_ns: 40_000_000.0,
};

pub fn samples(shape: Shape, n: usize, seed: u64) -> Vec<i64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out = Vec::with_capacity(n);
    let mu = shape.median_ns.ln();
    while out.len() < n {
        let v = if rng.gen::<f64>() < shape.tail_p {
            // Pareto: x_m / U^(1/alpha), U in (0, 1].
            let u = 1.0 - rng.gen::<f64>();
            (shape.tail_from_ns / u.powf(1.0 / shape.alpha)).min(shape.cap_ns)
        } else {
            // Box–Muller: one standard normal from two uniforms.
            let u1 = 1.0 - rng.gen::<f64>();
            let u2 = rng.gen::<f64>();
            let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
            (mu + shape.sigma * z).exp()
        };
        out.push(v.round().max(1.0) as i64);
    }
    out
}

/// The value of rank `ceil(p/100 * n)` (at least 1) of sorted values: the definition
/// both histograms estimate.
pub fn exact_percentile(sorted: &[i64], p: f64) -> i64 {
    let n = sorted.len() as u128;
    let ppm = (p * 1e6).round() as u128;
    let rank = (n * ppm).div_ceil(100_000_000).clamp(1, n.max(1));
    sorted[rank as usize - 1]
}
