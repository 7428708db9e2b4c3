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

use std::collections::HashMap;

use crate::q::Q;

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

/// Tails computed so far: node 0 is the empty tail; `(server, rest)` names the tail
/// that starts at `server` and continues with the tail `rest`.
#[derive(Debug)]
pub(crate) struct PathSums {
    index: HashMap<(usize, usize), usize>,
    nodes: Vec<Sums>,
}

impl Default for PathSums {
    fn default() -> PathSums {
        PathSums {
            index: HashMap::new(),
            nodes: vec![Sums::default()],
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
    pub fn of<'a>(&mut self, path: &[usize], terms: impl Fn(usize) -> Terms<'a>) -> Option<&Sums> {
        let mut id = 0;
        for &j in path.iter().rev() {
            id = match self.index.get(&(j, id)) {
                Some(&n) => n,
                None => {
                    let sums = Self::extend(&self.nodes[id], &terms(j))?;
                    self.nodes.push(sums);
                    let n = self.nodes.len() - 1;
                    self.index.insert((j, id), n);
                    n
                }
            };
        }
        self.nodes.get(id)
    }

    /// The sums over `(server, rest…)` from those over `rest…`.
    fn extend(rest: &Sums, t: &Terms) -> Option<Sums> {
        Some(Sums {
            delay: t.delay + &rest.delay,
            cterm: t.cterm + &rest.cterm,
            inv_rate: match t.rate {
                Some(rate) => &Q::one().checked_div(rate)? + &rest.inv_rate,
                None => rest.inv_rate.clone(),
            },
            weighted: &(t.shift * &rest.inv_rate) + &rest.weighted,
        })
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
            let got = memo.of(&path, terms).unwrap().clone();
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
