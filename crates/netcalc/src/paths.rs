//! Sums of per-server terms along the tails of flow paths, shared between flows.
//!
//! When every server is FIFO, a flow's end-to-end bounds are sums over its path of
//! per-server terms (see [`crate::admission`]): its TFA bound is `Σ D_j`, and the
//! latency of its SFA service curve is `Σ c_j − b⁰ Σ 1/R_j − r W` with
//! `W = Σ_i s_i Σ_{k > i} 1/R_k` (`s` the delay by which a server propagates
//! arrival curves). Every one of them is a function of the path's tail: the sums for
//! `(j, rest…)` are `j`'s terms plus the sums for `rest…`. Flows crossing one region
//! of a network share many tails, so [`PathSums`] computes each tail once per
//! recomputation and every flow that ends in it reuses it.

use rustc_hash::FxHashMap;

use crate::q::{Unreduced, Q};

/// What one server contributes to the sums of a path through it.
pub(crate) struct Terms<'a> {
    /// The FIFO delay bound `D`.
    pub delay: &'a Q,
    /// The delay `s` by which arrival curves leave the server.
    pub shift: &'a Q,
    /// `T + Σ b_k / R`: the server's part of its members' residual latencies.
    pub cterm: &'a Q,
    /// The server's rate `R`; `None` where a flow's own `b/R` is not to be taken
    /// out (a server whose only member is the flow: its residual latency is `T`,
    /// given as `cterm`, which keeps the large fractions of `Σ b / R` out of the sums).
    pub rate: Option<&'a Q>,
}

/// The sums over one tail of a path.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sums {
    /// `Σ D`.
    pub delay: Q,
    /// `Σ c`.
    pub cterm: Q,
    /// `Σ 1/R`.
    pub inv_rate: Q,
    /// `Σ_i s_i Σ_{k > i} 1/R_k` over the tail's positions `i < k`.
    pub weighted: Q,
}

/// The sums over one tail on fractions left unreduced until they are read (see
/// [`Unreduced`]): no gcd of a numerator per step.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct LazySums {
    pub delay: Unreduced,
    pub cterm: Unreduced,
    pub inv_rate: Unreduced,
    pub weighted: Unreduced,
}

impl LazySums {
    /// The sums over `(server, rest…)` from those over `rest…`; `None` where a
    /// magnitude would pass 256 bits or a term is beyond them.
    fn extend(&self, t: &Terms) -> Option<LazySums> {
        let inv_rate = match t.rate {
            Some(rate) => Unreduced::recip_of(rate)?.add(self.inv_rate)?,
            None => self.inv_rate,
        };
        let weighted = Unreduced::of(t.shift)?.mul(self.inv_rate)?;
        Some(LazySums {
            delay: Unreduced::of(t.delay)?.add(self.delay)?,
            cterm: Unreduced::of(t.cterm)?.add(self.cterm)?,
            inv_rate,
            weighted: weighted.add(self.weighted)?,
        })
    }

    /// The same sums in lowest terms.
    fn to_exact(self) -> Sums {
        Sums {
            delay: self.delay.to_q(),
            cterm: self.cterm.to_q(),
            inv_rate: self.inv_rate.to_q(),
            weighted: self.weighted.to_q(),
        }
    }

    /// [`Tail::bounds`] on the unreduced sums: two gcds in all.
    fn bounds(&self, r: &Q, b0: &Q, offset: &Q) -> Option<(Q, Q)> {
        let own = Unreduced::of(offset)?.sub(Unreduced::of(b0)?.mul(self.inv_rate)?)?;
        let rw = Unreduced::of(r)?.mul(self.weighted)?;
        let sfa = self.cterm.sub(rw)?.add(own)?;
        Some((self.delay.to_q(), sfa.to_q()))
    }
}

impl Sums {
    /// The sums over `(server, rest…)` from those over `rest…`.
    fn extend(&self, t: &Terms) -> Option<Sums> {
        Some(Sums {
            delay: t.delay + &self.delay,
            cterm: t.cterm + &self.cterm,
            inv_rate: match t.rate {
                Some(rate) => &Q::one().checked_div(rate)? + &self.inv_rate,
                None => self.inv_rate.clone(),
            },
            weighted: &(t.shift * &self.inv_rate) + &self.weighted,
        })
    }

    /// [`Tail::bounds`] in lowest terms throughout.
    fn bounds(&self, r: &Q, b0: &Q, offset: &Q) -> (Q, Q) {
        // The flow's own small terms first, so only two operations are on the long
        // sums.
        let own = offset - &(b0 * &self.inv_rate);
        let sfa = &(&self.cterm - &(r * &self.weighted)) + &own;
        (self.delay.clone(), sfa)
    }
}

/// The sums over one tail: unreduced while they fit 256 bits, in lowest terms
/// from the first step that would not.
#[derive(Clone, Debug)]
pub(crate) enum Tail {
    Lazy(LazySums),
    Exact(Sums),
}

impl Tail {
    /// The sums over `(server, rest…)` from those over `rest…` (`self`).
    fn extend(&self, t: &Terms) -> Option<Tail> {
        let exact = match self {
            Tail::Lazy(rest) => match rest.extend(t) {
                Some(sums) => return Some(Tail::Lazy(sums)),
                None => rest.to_exact(),
            },
            Tail::Exact(rest) => rest.clone(),
        };
        exact.extend(t).map(Tail::Exact)
    }

    /// A flow's TFA bound `Σ D` and its SFA latency before the cut at zero,
    /// `Σ c − b⁰ Σ 1/R − r W + offset`, for its envelope `(r, b⁰)` at its first hop
    /// and the `offset` of its own arrival curve against the end-to-end rate.
    pub fn bounds(&self, r: &Q, b0: &Q, offset: &Q) -> (Q, Q) {
        match self {
            Tail::Lazy(s) => s
                .bounds(r, b0, offset)
                .unwrap_or_else(|| s.to_exact().bounds(r, b0, offset)),
            Tail::Exact(s) => s.bounds(r, b0, offset),
        }
    }
}

/// Tails computed so far: node 0 is the empty tail; `(server, rest)` names the tail
/// that starts at `server` and continues with the tail `rest`.
#[derive(Debug)]
pub(crate) struct PathSums {
    index: FxHashMap<(usize, usize), usize>,
    nodes: Vec<Tail>,
}

impl Default for PathSums {
    fn default() -> PathSums {
        PathSums {
            index: FxHashMap::default(),
            nodes: vec![Tail::Lazy(LazySums::default())],
        }
    }
}

impl PathSums {
    /// Forgets every tail (the server terms are about to change), keeping the memory.
    pub fn clear(&mut self) {
        self.index.clear();
        self.nodes.truncate(1);
    }

    /// The sums over `path`, computing only the tails not seen before; `None` when a
    /// server's rate is zero (validation rules that out).
    pub fn of<'a>(&mut self, path: &[usize], terms: impl Fn(usize) -> Terms<'a>) -> Option<&Tail> {
        let mut id = 0;
        for &j in path.iter().rev() {
            id = match self.index.get(&(j, id)) {
                Some(&n) => n,
                None => {
                    let sums = self.nodes[id].extend(&terms(j))?;
                    self.nodes.push(sums);
                    let n = self.nodes.len() - 1;
                    self.index.insert((j, id), n);
                    n
                }
            };
        }
        self.nodes.get(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i128, d: i128) -> Q {
        Q::ratio(n, d).unwrap()
    }

    /// Each path's sums equal the sums written out, whether its tails were seen
    /// before or not.
    #[test]
    fn shared_tails_give_the_written_out_sums() {
        let delay = [q(1, 3), q(2, 7), q(5, 11), q(1, 2)];
        let shift = [q(1, 2), q(1, 3), q(1, 2), q(1, 1)];
        let cterm = [q(3, 5), q(1, 9), q(2, 13), q(7, 4)];
        let rate = [q(10, 1), q(3, 1), q(7, 2), q(5, 1)];
        let terms = |j: usize| Terms {
            delay: &delay[j],
            shift: &shift[j],
            cterm: &cterm[j],
            rate: Some(&rate[j]),
        };
        let mut memo = PathSums::default();
        for path in [
            vec![0, 1, 3],
            vec![2, 1, 3],
            vec![1, 3],
            vec![0, 2, 3],
            vec![3],
        ] {
            let got = match memo.of(&path, terms).unwrap() {
                Tail::Lazy(s) => s.to_exact(),
                Tail::Exact(s) => s.clone(),
            };
            let inv = |k: usize| Q::one() / &rate[path[k]];
            let sum = |f: &dyn Fn(usize) -> Q| (0..path.len()).map(f).sum::<Q>();
            assert_eq!(got.delay, sum(&|k| delay[path[k]].clone()));
            assert_eq!(got.cterm, sum(&|k| cterm[path[k]].clone()));
            assert_eq!(got.inv_rate, sum(&inv));
            let w = sum(&|i| &shift[path[i]] * &(i + 1..path.len()).map(inv).sum::<Q>());
            assert_eq!(got.weighted, w);
        }
    }
}
