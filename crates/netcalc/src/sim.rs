//! An exact fluid simulator of symmetric bursts (loeser §4.1) through FIFO
//! rate-latency servers: the oracle the analytical bounds are tested against.
//!
//! Every source is greedy from `t = 0` with a full bucket: its cumulative arrivals are
//! `min(K t, α(t))`, its T-SPEC capped by a very fast line rate `K` (a jump would make
//! FIFO order among simultaneous bits ambiguous; a steep ramp is a valid trajectory
//! that comes as close to the jump as wanted). Each server is a delay line of `T`
//! followed by a constant-rate `R` FIFO queue, so its output is exactly
//! `(A ⊗ λ_R)(t − T)` — it offers the service curve `R (t − T)+` and nothing more. The
//! output of each flow follows FIFO order: `D_f(t) = A_f(A⁻¹(D(t)))`.
//!
//! All functions are continuous piecewise-linear with exact rational breakpoints, so
//! the delays are exact; the worst one is found at the breakpoints. Any valid bound
//! must be at least the delay this trajectory produces.

use std::collections::BTreeSet;

use crate::curve::Curve;
use crate::model::{Multiplexing, Network};
use crate::q::Q;

/// A continuous, non-decreasing, piecewise-linear function with `f(0) = 0`: linear
/// between `pts`, slope `tail` after the last point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pl {
    pts: Vec<(Q, Q)>,
    tail: Q,
}

impl Pl {
    /// `min(K t, α(t))`: a greedy source with a full bucket at `t = 0`.
    pub fn greedy(alpha: &Curve, line_rate: &Q) -> Pl {
        let c = alpha.min(&Curve::token_bucket(line_rate.clone(), Q::zero()));
        let pts = c.points().to_vec();
        let tail = c.rate().clone();
        Pl { pts, tail }
    }

    /// [`Pl::greedy`] starting at `start` instead of 0 (silent before): still a
    /// trajectory its arrival curve allows.
    pub fn greedy_from(alpha: &Curve, line_rate: &Q, start: &Q) -> Pl {
        let g = Pl::greedy(alpha, line_rate);
        if !start.is_positive() {
            return g;
        }
        let mut pts = vec![(Q::zero(), Q::zero())];
        pts.extend(g.pts.iter().map(|(t, y)| (t + start, y.clone())));
        Pl { pts, tail: g.tail }
    }

    pub fn zero() -> Pl {
        Pl {
            pts: vec![(Q::zero(), Q::zero())],
            tail: Q::zero(),
        }
    }

    pub fn eval(&self, t: &Q) -> Q {
        let i = match self.pts.binary_search_by(|p| p.0.cmp(t)) {
            Ok(i) => return self.pts[i].1.clone(),
            Err(i) => i,
        };
        if i == 0 {
            return Q::zero();
        }
        if i == self.pts.len() {
            let (lt, ly) = &self.pts[i - 1];
            return ly + &(&self.tail * &(t - lt));
        }
        let (t0, y0) = &self.pts[i - 1];
        let (t1, y1) = &self.pts[i];
        y0 + &(&(y1 - y0) * &(t - t0) / (t1 - t0))
    }

    /// Breakpoint times.
    pub fn times(&self) -> impl Iterator<Item = &Q> {
        self.pts.iter().map(|p| &p.0)
    }

    /// The earliest `t` with `f(t) ≥ x` (`strict`: `f(t) > x`); `None` if never.
    pub fn inv(&self, x: &Q, strict: bool) -> Option<Q> {
        let reached = |y: &Q| if strict { y > x } else { y >= x };
        if !strict && !x.is_positive() {
            return Some(Q::zero());
        }
        for w in self.pts.windows(2) {
            let ((t0, y0), (t1, y1)) = (&w[0], &w[1]);
            if reached(y1) {
                if y1 == y0 {
                    return Some(t0.clone());
                }
                // On this piece: y0 + s (t − t0) crosses x.
                let t = t0 + &(&(x - y0) * &(t1 - t0) / (y1 - y0));
                return Some(t.max(t0.clone()));
            }
        }
        let (lt, ly) = self.pts.last()?;
        if reached(ly) {
            return Some(lt.clone());
        }
        if !self.tail.is_positive() {
            return None;
        }
        Some(lt + &((x - ly) / &self.tail))
    }

    fn from_samples(times: BTreeSet<Q>, f: impl Fn(&Q) -> Q) -> Pl {
        let mut pts: Vec<(Q, Q)> = times.iter().map(|t| (t.clone(), f(t))).collect();
        let last = pts.last().map(|p| p.0.clone()).unwrap_or_default();
        let next = &last + &Q::one();
        let tail = &f(&next) - &f(&last);
        if pts.first().is_none_or(|p| !p.0.is_zero()) {
            pts.insert(0, (Q::zero(), Q::zero()));
        }
        Pl { pts, tail }.simplified()
    }

    fn simplified(mut self) -> Pl {
        // Drop points in the middle of a straight piece.
        let mut out: Vec<(Q, Q)> = Vec::with_capacity(self.pts.len());
        for p in self.pts.drain(..) {
            while out.len() >= 2 {
                let (a, b) = (&out[out.len() - 2], &out[out.len() - 1]);
                let collinear = &(&b.1 - &a.1) * &(&p.0 - &b.0) == &(&p.1 - &b.1) * &(&b.0 - &a.0);
                if collinear {
                    out.pop();
                } else {
                    break;
                }
            }
            out.push(p);
        }
        // A last point on the tail line is redundant too.
        while out.len() >= 2 {
            let (a, b) = (&out[out.len() - 2], &out[out.len() - 1]);
            if &b.1 - &a.1 == &self.tail * &(&b.0 - &a.0) {
                out.pop();
            } else {
                break;
            }
        }
        self.pts = out;
        self
    }

    /// Pointwise sum.
    pub fn sum<'a>(fs: impl IntoIterator<Item = &'a Pl> + Clone) -> Pl {
        let times: BTreeSet<Q> = fs
            .clone()
            .into_iter()
            .flat_map(|f| f.times().cloned())
            .collect();
        let list: Vec<&Pl> = fs.into_iter().collect();
        let mut out = Pl::from_samples(times, |t| list.iter().map(|f| f.eval(t)).sum());
        out.tail = list.iter().map(|f| &f.tail).sum();
        out
    }

    /// The output of a constant-rate `R` queue fed with `self`: `(A ⊗ λ_R)(t)`, then
    /// delayed by `T`.
    pub fn serve(&self, rate: &Q, latency: &Q) -> Pl {
        // Walk A's pieces; the output follows A while A rises no faster than R,
        // otherwise rises at R until it meets A again.
        let mut pts: Vec<(Q, Q)> = vec![(Q::zero(), Q::zero())];
        let mut t = Q::zero();
        let mut y = Q::zero();
        let mut pieces: Vec<(Q, Option<Q>, Q)> = Vec::new(); // (start, end, slope)
        for w in self.pts.windows(2) {
            let ((t0, y0), (t1, y1)) = (&w[0], &w[1]);
            pieces.push((t0.clone(), Some(t1.clone()), (y1 - y0) / (t1 - t0)));
        }
        let last = self.pts.last().map(|p| p.0.clone()).unwrap_or_default();
        pieces.push((last, None, self.tail.clone()));
        for (_, end, slope) in pieces {
            // Within this piece, possibly several phases.
            loop {
                let a_now = self.eval(&t);
                let behind = y < a_now;
                if !behind && slope <= *rate {
                    // Follow A to the end of the piece.
                    match &end {
                        Some(e) => {
                            y = self.eval(e);
                            t = e.clone();
                            pts.push((t.clone(), y.clone()));
                        }
                        None => {
                            return Pl {
                                pts,
                                tail: slope.clone(),
                            }
                            .delayed(latency);
                        }
                    }
                    break;
                }
                // Rising at R below A (or A steeper than R): catch up within the piece?
                // A(t) + slope (s − t) = y + R (s − t) → s = t + (A − y)/(R − slope).
                let catch = if rate > &slope {
                    Some(&t + &((&a_now - &y) / (rate - &slope)))
                } else {
                    None
                };
                let stop = match (&catch, &end) {
                    (Some(c), Some(e)) if c < e => Some((c.clone(), true)),
                    (Some(c), None) => Some((c.clone(), true)),
                    (_, Some(e)) => Some((e.clone(), false)),
                    (None, None) => None,
                };
                match stop {
                    Some((s, caught)) => {
                        y = &y + &(rate * &(&s - &t));
                        t = s;
                        pts.push((t.clone(), y.clone()));
                        if !caught {
                            break;
                        }
                        // Caught up: continue with the following phase in this piece.
                        if end.as_ref() == Some(&t) {
                            break;
                        }
                    }
                    None => {
                        // Never catches up (unstable): rate forever.
                        return Pl {
                            pts,
                            tail: rate.clone(),
                        }
                        .delayed(latency);
                    }
                }
            }
        }
        Pl {
            pts,
            tail: rate.clone(),
        }
        .delayed(latency)
    }

    fn delayed(self, d: &Q) -> Pl {
        let mut pts = vec![(Q::zero(), Q::zero())];
        for (t, y) in self.pts {
            let t = &t + d;
            if pts.last().is_some_and(|p| p.0 == t) {
                continue;
            }
            pts.push((t, y));
        }
        Pl {
            pts,
            tail: self.tail,
        }
        .simplified()
    }

    /// FIFO share of one flow: `A_f(A⁻¹(D(t)))`, where `agg` is the aggregate input,
    /// `out` the aggregate output and `self` the flow's input.
    pub fn fifo_share(&self, agg: &Pl, out: &Pl) -> Pl {
        let mut times: BTreeSet<Q> = out.times().cloned().collect();
        for (_, y) in &agg.pts {
            if let Some(t) = out.inv(y, false) {
                times.insert(t);
            }
        }
        // Breakpoints of the flow's own input (the aggregate may hide them when two
        // flows' slope changes cancel).
        for (_, y) in self.pts.iter().map(|(t, _)| (t, agg.eval(t))) {
            if let Some(t) = out.inv(&y, false) {
                times.insert(t);
            }
        }
        let f = |t: &Q| {
            let d = out.eval(t);
            match agg.inv(&d, false) {
                Some(tau) => self.eval(&tau),
                None => self.eval(t),
            }
        };
        Pl::from_samples(times, f)
    }

    /// `sup_x (e(x) − a(x))` where `a` = arrivals (self) and `e` = departures of the
    /// same bits: the largest delay of any bit.
    pub fn max_delay(&self, departures: &Pl) -> Q {
        let mut xs: BTreeSet<Q> = self.pts.iter().map(|p| p.1.clone()).collect();
        xs.extend(departures.pts.iter().map(|p| p.1.clone()));
        let mut best = Q::zero();
        for x in &xs {
            for strict in [false, true] {
                if !strict && !x.is_positive() {
                    continue;
                }
                if let (Some(a), Some(e)) = (self.inv(x, strict), departures.inv(x, strict)) {
                    best = best.max(&e - &a);
                }
            }
        }
        best
    }
}

/// Worst delay each flow sees in the symmetric-burst trajectory, by flow index; `None`
/// when the network has a non-FIFO server, a cycle or an unknown server.
pub fn simulate(net: &Network, line_rate: &Q) -> Option<Vec<Q>> {
    simulate_from(net, line_rate, &vec![Q::zero(); net.flows.len()])
}

/// [`simulate`] with each flow's greedy burst starting at its own time (`starts`, by
/// flow index; silent before): other trajectories the arrival curves allow, some
/// worse than the symmetric one, for testing bounds against.
pub fn simulate_from(net: &Network, line_rate: &Q, starts: &[Q]) -> Option<Vec<Q>> {
    if net
        .servers
        .iter()
        .any(|s| s.multiplexing != Multiplexing::Fifo)
    {
        return None;
    }
    let idx = |name: &str| net.servers.iter().position(|s| s.name == name);
    let paths: Vec<Vec<usize>> = net
        .flows
        .iter()
        .map(|f| f.path.iter().map(|s| idx(s)).collect::<Option<Vec<_>>>())
        .collect::<Option<_>>()?;
    // Topological order by repeated relaxation (small networks).
    let n = net.servers.len();
    let mut order = Vec::new();
    let mut placed = vec![false; n];
    while order.len() < n {
        let next = (0..n).find(|&j| {
            !placed[j]
                && paths.iter().all(|p| {
                    p.iter()
                        .position(|&s| s == j)
                        .is_none_or(|k| p[..k].iter().all(|&u| placed[u]))
                })
        })?;
        placed[next] = true;
        order.push(next);
    }
    let sources: Vec<Pl> = net
        .flows
        .iter()
        .enumerate()
        .map(|(k, f)| {
            let start = starts.get(k).cloned().unwrap_or_else(Q::zero);
            Pl::greedy_from(&f.arrival_curve(), line_rate, &start)
        })
        .collect();
    let mut current: Vec<Pl> = sources.clone();
    for j in order {
        let members: Vec<usize> = (0..net.flows.len())
            .filter(|&f| paths[f].contains(&j))
            .collect();
        if members.is_empty() {
            continue;
        }
        let agg = Pl::sum(members.iter().map(|&f| &current[f]));
        let s = &net.servers[j];
        let out = agg.serve(&s.rate, &s.latency);
        for &f in &members {
            current[f] = current[f].fifo_share(&agg, &out);
        }
    }
    Some(
        sources
            .iter()
            .zip(current.iter())
            .map(|(a, d)| a.max_delay(d))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(n: i64) -> Q {
        Q::int(n)
    }

    #[test]
    fn one_token_bucket_through_one_server() {
        // Source min(100 t, t + 10): ramp to the bucket, then rate 1. Server R = 5,
        // T = 2. Aggregate = the flow. The queue output: A rises at 100 until
        // t = 10/99, the queue serves at 5 until it catches the line t + 10:
        // 5 s = s + 10 → s = 5/2; then follows at rate 1. Delayed by 2.
        let a = Pl::greedy(&Curve::token_bucket(i(1), i(10)), &i(100));
        let out = a.serve(&i(5), &i(2));
        assert_eq!(out.eval(&i(2)), i(0));
        assert_eq!(out.eval(&i(3)), i(5));
        assert_eq!(out.eval(&Q::ratio(9, 2).unwrap()), Q::ratio(25, 2).unwrap());
        assert_eq!(out.eval(&i(6)), i(14));
        // Worst delay: the last bit of the burst (x = 10 + 10/99, arriving at 10/99)
        // leaves when out = x: 2 + x/5 ... = 2 + (10 + 10/99)/5 − 10/99.
        let d = a.max_delay(&out);
        let x = &i(10) + &Q::ratio(10, 99).unwrap();
        let expected = &(&i(2) + &(&x / &i(5))) - &Q::ratio(10, 99).unwrap();
        assert_eq!(d, expected);
        // Below the bound T + b/R = 4.
        assert!(d < i(4));
    }

    #[test]
    fn fifo_share_splits_in_arrival_order() {
        // Two flows, each a ramp of 10 to 10 bits then flat... use token buckets with
        // tiny rates: the aggregate's output is shared in proportion at each instant.
        let f1 = Pl::greedy(&Curve::token_bucket(i(1), i(10)), &i(10));
        let f2 = Pl::greedy(&Curve::token_bucket(i(1), i(10)), &i(10));
        let agg = Pl::sum([&f1, &f2]);
        let out = agg.serve(&i(4), &i(0));
        let d1 = f1.fifo_share(&agg, &out);
        let d2 = f2.fifo_share(&agg, &out);
        // Symmetric flows get half each.
        for t in [i(1), i(3), i(7), i(20)] {
            assert_eq!(&d1.eval(&t) + &d2.eval(&t), out.eval(&t));
            assert_eq!(d1.eval(&t), d2.eval(&t));
        }
    }
}
