//! A polynomial-size linear program over the flow's path *and the servers upstream
//! of it*, in the spirit of Bouillard's PLP (panco; "Trade-off between accuracy and
//! tractability of network calculus in FIFO networks", 2022), written for this crate.
//!
//! Where [`super::lp`] follows the flow's path alone and takes what arrives there
//! from elsewhere as the arrival curves the propagation gives, this program also
//! models the servers that cross traffic comes from: starting from the flow's path,
//! every server from which a flow arrives at a modelled server is modelled too
//! (a tree: each modelled server has one modelled successor, its *parent*), up to
//! [`MAX_TREE`] servers. A flow that arrives at a modelled server from its parent's
//! child is followed back through it; any other arrival is a source there, bounded
//! by its propagated arrival curve.
//!
//! The instants are shared by every flow of a server. The last server's departure
//! `t_0` of the flow's bit; at each server the instants at which its parent's
//! instants were *departures* from it, their FIFO arrival instants at it (same
//! order), and one more: the start `σ` of the service guarantee for its earliest
//! departure, `A(a) − A(σ) ≥ R (τ − σ − T)`. So a server at depth `d` below the root
//! has `d + 2` instants, all in a known order, and between every pair of them every
//! flow's and every bundle's arrival curve there, non-decreasing cumulative
//! arrivals, and the server's shaper on what it sent between two departures. FIFO
//! links the flows that go on to the parent (departure at `τ` = arrival at its
//! FIFO instant `a`), and every departure's delay `τ − a` is at most the server's
//! TFA bound (the aggregate's delay bound, a *cut* in Bouillard's words). The
//! objective is the bit's delay, `t_0` minus its arrival at the flow's first server.
//!
//! Every FIFO trajectory gives a feasible point: the bit's own instants, for every
//! other departure instant `τ` the latest `a ≤ τ` with `A(a) ≤ D(τ)` (which keeps
//! the order and the TFA bound), and the service curve's `σ ≤ a`. Solved in floating
//! point and rounded up as [`super::lp`] does.
//!
//! The same program with another objective bounds what leaves the flow's last
//! server ([`output_burst`]), for the fixed point of cyclic networks.

use super::lp::{le, pieces, time_unit, Cmp, Program, Variable};
use super::{Arrivals, NoBound};
use crate::model::Multiplexing;

/// Trees of more servers than this are cut there (the servers beyond are not
/// modelled; what comes from them is bounded by its arrival curve).
pub const MAX_TREE: usize = 16;
/// Programs estimated above this many constraints are not built (servers upstream
/// are left out first; a path alone above it gets no bound from this program).
pub const MAX_ROWS: usize = 60_000;

/// The modelled servers: root first, every parent before its children.
struct Tree {
    order: Vec<usize>,
    parent: Vec<Option<usize>>,
    in_tree: Vec<bool>,
}

impl Tree {
    /// Flow `g` crosses `s` coming from a modelled child of `s`.
    fn linked(&self, arr: &Arrivals, g: usize, s: usize) -> bool {
        prev(arr, g, s).is_some_and(|p| self.in_tree[p] && self.parent[p] == Some(s))
    }
}

/// The server flow `g` crosses before `s`.
fn prev(arr: &Arrivals, g: usize, s: usize) -> Option<usize> {
    let h = arr.hop(g, s)?;
    h.checked_sub(1).map(|k| arr.paths[g][k])
}

/// The tree of flow `f`: its path, then every FIFO server a flow comes from to a
/// modelled server, breadth first, up to [`MAX_TREE`] servers and [`MAX_ROWS`]
/// estimated constraints.
fn tree(arr: &Arrivals, f: usize) -> Result<Tree, NoBound> {
    let n = arr.servers.len();
    let mut t = Tree {
        order: Vec::new(),
        parent: vec![None; n],
        in_tree: vec![false; n],
    };
    let mut depth = vec![0usize; n];
    let mut rows = 0;
    let path = &arr.paths[f];
    for (j, &s) in path.iter().enumerate().rev() {
        if t.in_tree[s] {
            return Err(NoBound::NotApplicable("a server twice on the path".into()));
        }
        t.in_tree[s] = true;
        t.parent[s] = path.get(j + 1).copied();
        depth[s] = path.len() - 1 - j;
        rows += cost(arr, s, depth[s]);
        t.order.push(s);
    }
    if rows > MAX_ROWS {
        return Err(NoBound::NotApplicable(format!(
            "about {rows} constraints (the polynomial LP takes at most {MAX_ROWS})"
        )));
    }
    let mut k = 0;
    while k < t.order.len() {
        let s = t.order[k];
        k += 1;
        for &g in &arr.at[s] {
            let Some(p) = prev(arr, g, s) else { continue };
            let fifo = arr.servers[p].multiplexing == Multiplexing::Fifo;
            let more = cost(arr, p, depth[s] + 1);
            if t.in_tree[p] || !fifo || t.order.len() >= MAX_TREE || rows + more > MAX_ROWS {
                continue;
            }
            t.in_tree[p] = true;
            t.parent[p] = Some(s);
            depth[p] = depth[s] + 1;
            rows += more;
            t.order.push(p);
        }
    }
    Ok(t)
}

/// Estimated constraints at server `s` modelled `d` levels below the root: two
/// curve pieces per flow and bundle for each pair of its `d + 2` instants.
fn cost(arr: &Arrivals, s: usize, d: usize) -> usize {
    let sets = arr.at[s].len() + arr.bundles[s].len();
    (d + 2) * (d + 1) * sets
}

/// The program's instants and values: per server, its instants (latest first) and
/// each crossing flow's cumulative arrivals there (`values[s][i][u]`, `i` the
/// flow's position in `arr.at[s]`).
struct Trajectory {
    t0: Variable,
    times: Vec<Vec<Variable>>,
    values: Vec<Vec<Vec<Variable>>>,
}

/// The program's constraints for flow `f` (no objective yet).
fn constraints(arr: &Arrivals, f: usize) -> Result<(Program, Trajectory), NoBound> {
    arr.bounded()?;
    if arr.paths[f].is_empty() {
        return Err(NoBound::NotApplicable("empty path".into()));
    }
    if let Some(name) = arr.first_not(&arr.paths[f], Multiplexing::Fifo) {
        return Err(NoBound::NotApplicable(format!(
            "{name} is not FIFO (the LP covers FIFO paths)"
        )));
    }
    let tree = tree(arr, f)?;
    let n = arr.servers.len();
    let mut lp = Program::new(time_unit(arr, &arr.paths[f]));
    let t0 = lp.add_var(0.0);
    let mut tr = Trajectory {
        t0,
        times: vec![Vec::new(); n],
        values: vec![Vec::new(); n],
    };
    for &s in &tree.order {
        let deps = match tree.parent[s] {
            Some(h) => tr.times[h].clone(),
            None => vec![t0],
        };
        server(&mut lp, arr, s, &deps, &mut tr);
        if let Some(h) = tree.parent[s] {
            link(&mut lp, arr, &tree, s, h, &tr);
        }
    }
    Ok((lp, tr))
}

/// Server `s`'s instants for the departures `deps` (latest first), its values, and
/// every constraint that involves `s` alone.
fn server(lp: &mut Program, arr: &Arrivals, s: usize, deps: &[Variable], tr: &mut Trajectory) {
    let m = deps.len();
    let times: Vec<Variable> = (0..=m).map(|_| lp.add_var(0.0)).collect();
    for u in 0..m {
        le(lp, times[u + 1], times[u]);
        le(lp, times[u], deps[u]);
        if let Some(d) = &arr.fifo_delay[s] {
            // τ − a ≤ D_s
            let e = vec![(deps[u], 1.0), (times[u], -1.0)];
            lp.add_constraint(e, Cmp::Le, d.to_f64() / lp.unit * (1.0 + 1e-12));
        }
    }
    let values: Vec<Vec<Variable>> = arr.at[s]
        .iter()
        .map(|_| (0..=m).map(|_| lp.add_var(0.0)).collect())
        .collect();
    service(lp, arr, s, deps, &times, &values);
    curves(lp, arr, s, &times, &values);
    shaper(lp, arr, s, deps, &values);
    tr.times[s] = times;
    tr.values[s] = values;
}

/// The service guarantee for the earliest departure `τ` (index `m − 1` of `deps`,
/// FIFO instant `a` of the same index) from the last instant `σ`:
/// `Σ (A(a) − A(σ)) ≥ R (τ − σ − T)`.
fn service(
    lp: &mut Program,
    arr: &Arrivals,
    s: usize,
    deps: &[Variable],
    times: &[Variable],
    values: &[Vec<Variable>],
) {
    let ia = deps.len() - 1;
    let (tau, a, sigma) = (deps[ia], times[ia], times[ia + 1]);
    let srv = &arr.servers[s];
    let r = srv.rate.to_f64() * lp.unit;
    let t = srv.latency.to_f64() / lp.unit;
    le(lp, sigma, a);
    let mut e: Vec<(Variable, f64)> = Vec::with_capacity(2 * values.len() + 2);
    for v in values {
        e.push((v[ia], 1.0));
        e.push((v[ia + 1], -1.0));
    }
    e.push((tau, -r));
    e.push((sigma, r));
    lp.add_constraint(e, Cmp::Ge, -r * t);
}

/// Flows (their positions at a server) and the pieces of a curve bounding their sum.
type Set = (Vec<usize>, Vec<(f64, f64)>);

/// Between every pair of `s`'s instants (latest first, so `u < v` means
/// `t_u ≥ t_v`): every flow's and every bundle's arrival curve, and non-decreasing
/// cumulative arrivals.
fn curves(
    lp: &mut Program,
    arr: &Arrivals,
    s: usize,
    times: &[Variable],
    values: &[Vec<Variable>],
) {
    let flows = &arr.at[s];
    let mut sets: Vec<Set> = flows
        .iter()
        .enumerate()
        .map(|(i, &g)| {
            let c = arr.curve_at(g, s).map(|c| pieces(c, lp.unit));
            (vec![i], c.unwrap_or_default())
        })
        .collect();
    for b in arr.bundles[s].iter().filter(|b| b.flows.len() > 1) {
        let idx = b
            .flows
            .iter()
            .filter_map(|g| flows.iter().position(|x| x == g))
            .collect();
        sets.push((idx, pieces(&b.curve, lp.unit)));
    }
    for u in 0..times.len() {
        for vals in values.iter().filter(|_| u + 1 < times.len()) {
            lp.add_constraint(vec![(vals[u], 1.0), (vals[u + 1], -1.0)], Cmp::Ge, 0.0);
        }
        for v in u + 1..times.len() {
            for (idx, c) in &sets {
                for &(b, r) in c {
                    // Σ A(t_u) − A(t_v) ≤ b + r (t_u − t_v)
                    let mut e: Vec<(Variable, f64)> = Vec::with_capacity(2 * idx.len() + 2);
                    for &i in idx {
                        e.push((values[i][u], 1.0));
                        e.push((values[i][v], -1.0));
                    }
                    e.push((times[u], -r));
                    e.push((times[v], r));
                    lp.add_constraint(e, Cmp::Le, b);
                }
            }
        }
    }
}

/// A shaped server's whole output between two departures: by FIFO what left by `τ`
/// is what arrived by its FIFO instant, the value of the same index.
fn shaper(lp: &mut Program, arr: &Arrivals, s: usize, deps: &[Variable], values: &[Vec<Variable>]) {
    let Some(sh) = &arr.servers[s].shaper else {
        return;
    };
    let sigma = pieces(&sh.curve(), lp.unit);
    for u in 0..deps.len() {
        for v in u + 1..deps.len() {
            for &(b, r) in &sigma {
                let mut e: Vec<(Variable, f64)> = Vec::with_capacity(2 * values.len() + 2);
                for vals in values {
                    e.push((vals[u], 1.0));
                    e.push((vals[v], -1.0));
                }
                e.push((deps[u], -r));
                e.push((deps[v], r));
                lp.add_constraint(e, Cmp::Le, b);
            }
        }
    }
}

/// FIFO between child `s` and parent `h`: a flow that goes from `s` to `h` arrives
/// at `h` at each of its instants what it had received at `s` by the FIFO instant
/// of the same index.
fn link(lp: &mut Program, arr: &Arrivals, tree: &Tree, s: usize, h: usize, tr: &Trajectory) {
    for (hi, &g) in arr.at[h].iter().enumerate() {
        if !tree.linked(arr, g, h) || prev(arr, g, h) != Some(s) {
            continue;
        }
        let Some(si) = arr.at[s].iter().position(|&x| x == g) else {
            continue;
        };
        for (&x, &y) in tr.values[h][hi].iter().zip(&tr.values[s][si]) {
            lp.add_constraint(vec![(x, 1.0), (y, -1.0)], Cmp::Eq, 0.0);
        }
    }
}

/// Flow `f`'s delay program: `t_0` minus the bit's arrival at its first server.
pub fn delay_program(arr: &Arrivals, f: usize) -> Result<Program, NoBound> {
    let (mut lp, tr) = constraints(arr, f)?;
    let first = arr.paths[f][0];
    lp.objective[tr.t0] += 1.0;
    lp.objective[tr.times[first][0]] -= 1.0;
    Ok(lp)
}

/// Flow `f`'s delay bound by this program.
pub(super) fn flow(arr: &Arrivals, f: usize) -> super::Bound {
    delay_program(arr, f)?.bound()
}

/// A bound `B` (bits) such that what flow `f` sends out of its last server in any
/// window of length `w` is at most `B + r w`, `(r, b)` its token-bucket envelope at
/// its first server.
///
/// For departures `D(s) ≤ D(t)`: `D(t) − D(s) ≤ A(t) − A(a_s)` with `a_s` the FIFO
/// arrival of the bit leaving at `s`, and `A(t) ≤ A(u) + b + r (t − u)` for every
/// instant `u ≤ s`, so `D(t) − D(s) − r (t − s) ≤ min_u (A(u) + b + r (s − u)) −
/// A(a_s)`: with `s = t_0` and `u` the instants at the first server that is `y −
/// A(a_s)` under `y ≤ A(u) + b + r (t_0 − u)`, maximised over the program.
pub fn output_burst(arr: &Arrivals, f: usize) -> Result<f64, NoBound> {
    let (mut lp, tr) = constraints(arr, f)?;
    let first = arr.paths[f][0];
    let (r, b) = arr.per_flow[f][0].token_bucket_envelope();
    let (r, b) = (r.to_f64() * lp.unit, b.to_f64());
    let i = arr.at[first]
        .iter()
        .position(|&g| g == f)
        .ok_or_else(|| NoBound::NotApplicable("the flow is not at its first server".into()))?;
    let y = lp.add_var(1.0);
    lp.objective[tr.values[first][i][0]] -= 1.0;
    for (&t, &v) in tr.times[first].iter().zip(&tr.values[first][i]) {
        // y − A(u) + r u − r t_0 ≤ b
        let e = vec![(y, 1.0), (v, -1.0), (t, r), (tr.t0, -r)];
        lp.add_constraint(e, Cmp::Le, b * (1.0 + 1e-12) + 1e-12);
    }
    lp.solve()
}
