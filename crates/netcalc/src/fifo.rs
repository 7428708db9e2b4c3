//! One FIFO switch output port exactly as the FIFO port analysis (loeser Equations 2–7).
//!
//! `N` flows with T-SPECs `(C, M, r_k, b_k)` share a port `β(t) = C (t − t_mux)+`:
//!
//! - `g_k = (b_k − M) / (C − r_k)`, the inflection point of flow `k`'s arrival curve;
//!   `g_max = max g_k`;
//! - backlog `B = Σ b_k − g_max (C − Σ r_k) + C t_mux` (Eq. 4), rule of thumb
//!   `B_est = Σ b_k + C t_mux` (Eq. 5);
//! - delay `t_switch = Σ b_k / C − g_max (1 − Σ r_k / C) + t_mux` (Eq. 6), rule of thumb
//!   `t_est = Σ b_k / C + t_mux` (Eq. 7).
//!
//! The aggregate arrival curve rises faster than `C` until `g_max` and slower after,
//! so both deviations peak at `g_max`. That makes `t_switch` exact in every case; `B`
//! is exact when `t_mux ≤ g_max` (loeser: "in practice") and otherwise an upper bound
//! (the true backlog then peaks at `t_mux`), which [`FifoPort::backlog_exact`] says.
//!
//! The same argument holds when each flow has its own packet size `M_k` (a token
//! bucket `(r, b)` is the T-SPEC `(C, b, r, b)`, with `g = 0`), so [`fifo_port`] takes
//! `M` per flow; with one common `M` it is the FIFO port analysis to the letter.

use crate::q::Q;

/// The loeser bounds of one FIFO port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FifoPort {
    /// `g_k` per flow, seconds.
    pub g: Vec<Q>,
    pub g_max: Q,
    /// `Σ r_k`, bit/s.
    pub load: Q,
    /// `B` (Eq. 4), bits.
    pub backlog: Q,
    /// `t_switch` (Eq. 6), seconds.
    pub delay: Q,
    /// `B_est` (Eq. 5), bits.
    pub backlog_estimate: Q,
    /// `t_est` (Eq. 7), seconds.
    pub delay_estimate: Q,
    /// Whether `B` is the exact maximum backlog (`t_mux ≤ g_max`).
    pub backlog_exact: bool,
}

/// Why the loeser formulas do not apply.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FifoPortError {
    #[error("the port rate C must be above 0")]
    ZeroRate,
    #[error("t_mux must not be negative")]
    NegativeLatency,
    #[error("no flows")]
    NoFlows,
    #[error("flow {0}: r must be above 0 and below C, and 0 ≤ M ≤ b")]
    BadFlow(usize),
    #[error("Σ r_k exceeds C (Eq. 1): the port is unstable")]
    Unstable,
}

/// One flow of a port: sustained rate `r` (bit/s), bucket `b` and largest packet `m`
/// (bits); its peak rate is the port's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortFlow {
    pub r: Q,
    pub b: Q,
    pub m: Q,
}

impl PortFlow {
    pub fn new(r: Q, b: Q, m: Q) -> PortFlow {
        PortFlow { r, b, m }
    }
}

/// Evaluates Equations 2–7 for port rate `c` (bit/s), multiplexing delay `t_mux` (s)
/// and flows `(r_k, b_k, M_k)`.
pub fn fifo_port(c: &Q, t_mux: &Q, flows: &[PortFlow]) -> Result<FifoPort, FifoPortError> {
    if !c.is_positive() {
        return Err(FifoPortError::ZeroRate);
    }
    if t_mux.is_negative() {
        return Err(FifoPortError::NegativeLatency);
    }
    if flows.is_empty() {
        return Err(FifoPortError::NoFlows);
    }
    let mut g = Vec::with_capacity(flows.len());
    for (k, PortFlow { r, b, m }) in flows.iter().enumerate() {
        if !r.is_positive() || r >= c || b < m || m.is_negative() {
            return Err(FifoPortError::BadFlow(k));
        }
        g.push((b - m) / (c - r)); // Eq. 2
    }
    let load: Q = flows.iter().map(|f| &f.r).sum();
    if &load > c {
        return Err(FifoPortError::Unstable);
    }
    let sum_b: Q = flows.iter().map(|f| &f.b).sum();
    let g_max = g.iter().cloned().fold(Q::zero(), Q::max);
    let backlog = &sum_b - &(&g_max * &(c - &load)) + c * t_mux; // Eq. 4
    let delay = &sum_b / c - &g_max * &(Q::one() - &load / c) + t_mux; // Eq. 6
    Ok(FifoPort {
        backlog_exact: t_mux <= &g_max,
        backlog_estimate: &sum_b + &(c * t_mux), // Eq. 5
        delay_estimate: &sum_b / c + t_mux,      // Eq. 7
        g,
        g_max,
        load,
        backlog,
        delay,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::{backlog_bound, delay_bound, Curve, Service};

    fn i(n: i64) -> Q {
        Q::int(n)
    }
    fn q(n: i128, d: i128) -> Q {
        Q::ratio(n, d).unwrap()
    }
    fn two() -> Vec<PortFlow> {
        vec![
            PortFlow::new(i(2), i(18), i(2)),
            PortFlow::new(i(3), i(9), i(2)),
        ]
    }

    #[test]
    fn two_flows_by_hand() {
        // C = 10, t_mux = 1, M = 2; flows (r, b) = (2, 18), (3, 9).
        // g_1 = 16/8 = 2, g_2 = 7/7 = 1, g_max = 2; Σr = 5, Σb = 27.
        // B = 27 − 2·5 + 10 = 27; t_switch = 27/10 − 2·(1/2) + 1 = 27/10;
        // B_est = 37; t_est = 37/10.
        let p = fifo_port(&i(10), &i(1), &two()).unwrap();
        assert_eq!(p.g, vec![i(2), i(1)]);
        assert_eq!(p.g_max, i(2));
        assert_eq!(p.backlog, i(27));
        assert_eq!(p.delay, q(27, 10));
        assert_eq!(p.backlog_estimate, i(37));
        assert_eq!(p.delay_estimate, q(37, 10));
        assert!(p.backlog_exact);
        // The generic deviations agree.
        let agg =
            Curve::tspec(i(10), i(2), i(2), i(18)).add(&Curve::tspec(i(10), i(2), i(3), i(9)));
        let beta = Service::rate_latency(i(10), i(1));
        assert_eq!(delay_bound(&agg, &beta), Some(q(27, 10)));
        assert_eq!(backlog_bound(&agg, &beta), Some(i(27)));
    }

    #[test]
    fn backlog_formula_is_an_upper_bound_when_t_mux_exceeds_g_max() {
        // Same flows, t_mux = 3 > g_max = 2: B = 27 − 10 + 30 = 47; true backlog at
        // t_mux: α(3) = (2·3 + 18) + (3·3 + 9) = 42. The delay stays exact:
        // 27/10 − 1 + 3 = 47/10.
        let p = fifo_port(&i(10), &i(3), &two()).unwrap();
        assert!(!p.backlog_exact);
        assert_eq!(p.backlog, i(47));
        let agg =
            Curve::tspec(i(10), i(2), i(2), i(18)).add(&Curve::tspec(i(10), i(2), i(3), i(9)));
        let beta = Service::rate_latency(i(10), i(3));
        assert_eq!(backlog_bound(&agg, &beta), Some(i(42)));
        assert_eq!(delay_bound(&agg, &beta), Some(q(47, 10)));
        assert_eq!(p.delay, q(47, 10));
    }

    #[test]
    fn refuses_what_the_formulas_do_not_cover() {
        let f = |r, b, m| PortFlow::new(i(r), i(b), i(m));
        assert_eq!(
            fifo_port(&i(0), &i(0), &[f(1, 1, 1)]),
            Err(FifoPortError::ZeroRate)
        );
        assert_eq!(fifo_port(&i(10), &i(0), &[]), Err(FifoPortError::NoFlows));
        assert_eq!(
            fifo_port(&i(10), &i(0), &[f(1, 4, 5)]),
            Err(FifoPortError::BadFlow(0))
        );
        assert_eq!(
            fifo_port(&i(10), &i(0), &[f(6, 4, 1), f(6, 4, 1)]),
            Err(FifoPortError::Unstable)
        );
        // A token bucket (b = M) has g = 0: two of them at C = 10, t_mux = 0:
        // B = Σb, t_switch = Σb / C.
        let p = fifo_port(&i(10), &i(0), &[f(1, 4, 4), f(2, 6, 6)]).unwrap();
        assert_eq!(p.g_max, i(0));
        assert_eq!(p.backlog, i(10));
        assert_eq!(p.delay, i(1));
    }
}
