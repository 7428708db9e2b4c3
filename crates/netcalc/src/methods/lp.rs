//! A linear program for a flow's worst delay along a path of FIFO servers.
//!
//! Follow the bit of the flow that leaves the last server at time `t`. At each server
//! `p_j` the bit that leaves at `τ` arrived at `a ≤ τ` (FIFO: everything that arrived
//! before it has left, `D(τ) = A(a)`, for every flow crossing `p_j`), and some
//! `σ ≤ a` gives the service curve's guarantee, `A(a) − A(σ) ≥ β(τ − σ) ≥ R (τ − σ −
//! T)`. What arrived at `p_j` from the previous server on the path at `a` and at `σ` is
//! what left that server at those instants — two departures there, each with its own
//! arrival time and service instant, and so on back to the first server: a tree of
//! `2^n − 1` departures for a path of `n` servers. The cumulative arrivals and
//! departures of every flow at every instant of the tree are the variables; the
//! constraints are the ones above, the equalities linking servers, and, for every
//! pair of instants at one server whose order is known (`σ ≤ a ≤ τ` of a departure;
//! FIFO keeps the order of departures in the order of their arrivals), each flow's
//! and each bundle's arrival curve there, and at a server with an output shaper
//! `R' t + M'` the shaper on everything it sent between two of its departures. The objective is the bit's delay, the last
//! departure minus its first arrival.
//!
//! Every FIFO trajectory gives a feasible point (its real instants and cumulative
//! values satisfy every constraint), so the maximum is at least every real delay: a
//! valid bound. Only constraints whose instants' order is known are written, which
//! is what keeps the program linear and its size fixed by the path (the exact
//! worst case needs every order, a mixed-integer program). It is solved in floating
//! point ([`microlp`], pure Rust); the result is rounded *up* to [`GRID_PS`]
//! picoseconds after adding a relative margin of [`MARGIN`], so the bound stays valid
//! against the solver's rounding.

use super::{Arrivals, Bound, NoBound};
use crate::curve::Curve;
use crate::model::Multiplexing;
use crate::q::Q;

/// Paths longer than this get no LP bound (the program doubles with every server).
pub const MAX_SERVERS: usize = 7;
/// The grid the LP's bound is rounded up to, in picoseconds.
pub const GRID_PS: i64 = 1;
/// Relative margin added to the solver's optimum before rounding.
pub const MARGIN: f64 = 1e-9;
/// The solver's absolute feasibility tolerance (the smallest it takes).
const FEASIBILITY: f64 = 1e-10;

/// The unit of time of a program: a power of ten near the delays it bounds (the
/// sum of the aggregate delay bounds at `servers`), so that the solver works on
/// numbers of moderate size (its tolerances are absolute); the data unit is 1 bit.
pub(super) fn time_unit(arr: &Arrivals, servers: &[usize]) -> f64 {
    let total: f64 = servers
        .iter()
        .filter_map(|&s| arr.fifo_delay[s].as_ref())
        .map(Q::to_f64)
        .sum();
    if !(total.is_finite() && total > 0.0) {
        return 1e-6;
    }
    10f64.powf(total.log10().floor()).clamp(1e-12, 1.0)
}

/// A variable of a [`Program`] (its index).
pub type Variable = usize;

/// How a constraint's left side compares with its right side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Le,
    Ge,
    Eq,
}

/// One constraint: `Σ coeff · var (cmp) rhs`.
pub type Row = (Vec<(Variable, f64)>, Cmp, f64);

/// A linear program, maximised: every variable is at least 0; `objective[v]` is the
/// coefficient of variable `v`; each row is `Σ coeff · var (cmp) rhs`; times are in
/// units of `unit` seconds. What the solver is given, and what another solver can
/// be given to compare.
#[derive(Clone, Debug)]
pub struct Program {
    pub objective: Vec<f64>,
    pub rows: Vec<Row>,
    pub unit: f64,
}

impl Program {
    /// An empty program whose times are in units of `unit` seconds.
    pub fn new(unit: f64) -> Program {
        Program {
            objective: Vec::new(),
            rows: Vec::new(),
            unit,
        }
    }

    /// The bound the program's maximum delay gives ([`bound_of`]).
    pub fn bound(&self) -> Bound {
        bound_of(self.solve()?, self.unit)
    }

    pub(super) fn add_var(&mut self, obj: f64) -> Variable {
        self.objective.push(obj);
        self.objective.len() - 1
    }

    pub(super) fn add_constraint(&mut self, row: Vec<(Variable, f64)>, cmp: Cmp, rhs: f64) {
        self.rows.push((row, cmp, rhs));
    }

    /// The maximum, solved with [`microlp`] (pure Rust), in the program's units.
    pub fn solve(&self) -> Result<f64, NoBound> {
        use microlp::{ComparisonOp, OptimizationDirection, Problem};
        let mut lp = Problem::new(OptimizationDirection::Maximize);
        let vars: Vec<microlp::Variable> = self
            .objective
            .iter()
            .map(|&c| lp.add_var(c, (0.0, f64::INFINITY)))
            .collect();
        for (row, cmp, rhs) in &self.rows {
            let expr: Vec<(microlp::Variable, f64)> =
                row.iter().map(|&(v, c)| (vars[v], c)).collect();
            let op = match cmp {
                Cmp::Le => ComparisonOp::Le,
                Cmp::Ge => ComparisonOp::Ge,
                Cmp::Eq => ComparisonOp::Eq,
            };
            lp.add_constraint(expr, op, *rhs);
        }
        // the tightest feasibility tolerance the solver takes (absolute; default
        // 1e-7): the optimum it reports is then within the margin of the true one
        let mut options = microlp::SolveOptions::default();
        options.tolerances.feasibility = FEASIBILITY;
        match lp.solve_with(options) {
            Ok(microlp::SolveOutcome::Solution(sol)) => Ok(sol.objective()),
            Ok(_) => Err(NoBound::Unbounded("the LP solver stopped early".into())),
            Err(microlp::Error::Unbounded) => Err(NoBound::Unbounded(
                "the LP is unbounded (a server saturated)".into(),
            )),
            Err(e) => Err(NoBound::Unbounded(format!("the LP solver: {e}"))),
        }
    }
}

/// Flow `f`'s program (maximise its delay), for a feed-forward network.
pub fn program(arr: &Arrivals, f: usize) -> Result<Program, NoBound> {
    check(arr, f)?;
    build(arr, f)
}

/// The bound the optimum `delay` (in units of `unit` seconds) of a program gives:
/// seconds, with the margin, rounded up to the grid.
pub fn bound_of(delay: f64, unit: f64) -> Bound {
    let secs = delay * (1.0 + MARGIN) * unit;
    let ps = (secs * 1e12).ceil();
    if !ps.is_finite() || ps > 1e18 {
        return Err(NoBound::Unbounded("the LP's optimum is unbounded".into()));
    }
    Q::ratio(ps as i128 * i128::from(GRID_PS), 1_000_000_000_000)
        .ok_or_else(|| NoBound::Unbounded("no value".into()))
}

/// One departure of the tree at a server: when the bit arrived (`a`), the service instant (`sigma`), and each crossing flow's cumulative
/// arrivals at `a` and `sigma`.
struct Node {
    a: Variable,
    sigma: Variable,
    at_a: Vec<Variable>,
    at_sigma: Vec<Variable>,
}

/// The instants at one server: a time variable and each flow's cumulative value,
/// with the known order between instants (`le[x][y]`: x ≤ y).
struct Level {
    times: Vec<Variable>,
    values: Vec<Vec<Variable>>,
    le: Vec<Vec<bool>>,
}

/// The smaller of this program's bound (paths of up to [`MAX_SERVERS`]) and the
/// polynomial program's over the path and the servers upstream of it
/// ([`super::plp`]).
pub(super) fn flow(arr: &Arrivals, f: usize) -> Bound {
    let path = program(arr, f).and_then(|p| p.bound());
    let tree = super::plp::flow(arr, f);
    match (path, tree) {
        (Ok(a), Ok(b)) => Ok(a.min(b)),
        (Ok(a), Err(_)) | (Err(_), Ok(a)) => Ok(a),
        (Err(e), Err(_)) => Err(e),
    }
}

/// Why flow `f` gets no program, if it gets none.
fn check(arr: &Arrivals, f: usize) -> Result<(), NoBound> {
    arr.bounded()?;
    let path = &arr.paths[f];
    if let Some(name) = arr.first_not(path, Multiplexing::Fifo) {
        return Err(NoBound::NotApplicable(format!(
            "{name} is not FIFO (the LP covers FIFO paths)"
        )));
    }
    if path.len() > MAX_SERVERS {
        return Err(NoBound::NotApplicable(format!(
            "a path of {} servers (the LP takes at most {MAX_SERVERS})",
            path.len()
        )));
    }
    Ok(())
}

/// Builds flow `f`'s program: the tree of departures, level by level from the last
/// server back to the first.
fn build(arr: &Arrivals, f: usize) -> Result<Program, NoBound> {
    let path = &arr.paths[f];
    let n = path.len();
    let mut lp = Program::new(time_unit(arr, path));
    let root = lp.add_var(1.0);
    // the departures of the level being built (one per instant of the level above),
    // with the order known between them
    let mut taus = vec![root];
    let mut tau_le = vec![vec![true]];
    let mut above: Option<(usize, Vec<Node>)> = None;
    let mut first_arrival = None;
    for j in (0..n).rev() {
        let s = path[j];
        let nodes: Vec<Node> = taus.iter().map(|&tau| node(&mut lp, arr, s, tau)).collect();
        shaper_constraints(&mut lp, arr, s, &taus, &tau_le, &nodes);
        // the first node of each level follows the bit of interest
        first_arrival = Some(nodes[0].a);
        if let Some((k, parents)) = &above {
            link(&mut lp, arr, path[*k], s, parents, &nodes);
        }
        let level = level(&nodes, &tau_le);
        arrival_constraints(&mut lp, arr, s, &level);
        taus = level.times.clone();
        tau_le = level.le.clone();
        above = Some((j, nodes));
    }
    let a0 = first_arrival.ok_or_else(|| NoBound::NotApplicable("empty path".into()))?;
    // maximise the last departure minus the first arrival
    lp.objective[a0] -= 1.0;
    Ok(lp)
}

/// A departure at server `s` at `tau`: its arrival and service instants, the
/// flows' values there, and the FIFO service constraint.
fn node(lp: &mut Program, arr: &Arrivals, s: usize, tau: Variable) -> Node {
    let a = lp.add_var(0.0);
    let sigma = lp.add_var(0.0);
    le(lp, sigma, a);
    le(lp, a, tau);
    let k = arr.at[s].len();
    let at_a: Vec<Variable> = (0..k).map(|_| lp.add_var(0.0)).collect();
    let at_sigma: Vec<Variable> = (0..k).map(|_| lp.add_var(0.0)).collect();
    // Σ (A(a) − A(σ)) ≥ R (τ − σ − T)
    let srv = &arr.servers[s];
    let r = srv.rate.to_f64() * lp.unit;
    let t = srv.latency.to_f64() / lp.unit;
    let mut e: Vec<(Variable, f64)> = Vec::with_capacity(2 * k + 2);
    for (&x, &y) in at_a.iter().zip(&at_sigma) {
        e.push((x, 1.0));
        e.push((y, -1.0));
        lp.add_constraint(vec![(x, 1.0), (y, -1.0)], Cmp::Ge, 0.0);
    }
    e.push((tau, -r));
    e.push((sigma, r));
    lp.add_constraint(e, Cmp::Ge, -r * t);
    Node {
        a,
        sigma,
        at_a,
        at_sigma,
    }
}

/// A shaped server's output between its departures `τ_x ≤ τ_y` of known order: what
/// every flow crossing it has sent by `τ` is, by FIFO, what it had received by the
/// departure's arrival instant, so `Σ_g (A_g(a_y) − A_g(a_x)) ≤ M' + R' (τ_y − τ_x)`
/// (the shaper bounds the whole aggregate, flows leaving the path included).
fn shaper_constraints(
    lp: &mut Program,
    arr: &Arrivals,
    s: usize,
    taus: &[Variable],
    tau_le: &[Vec<bool>],
    nodes: &[Node],
) {
    let Some(sh) = &arr.servers[s].shaper else {
        return;
    };
    let sigma = pieces(&sh.curve(), lp.unit);
    for (x, row) in tau_le.iter().enumerate() {
        for (y, &ok) in row.iter().enumerate() {
            let (Some(nx), Some(ny)) = (nodes.get(x), nodes.get(y)) else {
                continue;
            };
            if x == y || !ok {
                continue;
            }
            for &(b, r) in &sigma {
                let mut e: Vec<(Variable, f64)> = Vec::with_capacity(2 * nx.at_a.len() + 2);
                for (&vy, &vx) in ny.at_a.iter().zip(&nx.at_a) {
                    e.push((vy, 1.0));
                    e.push((vx, -1.0));
                }
                e.push((taus[y], -r));
                e.push((taus[x], r));
                lp.add_constraint(e, Cmp::Le, b);
            }
        }
    }
}

/// `x ≤ y`.
pub(super) fn le(lp: &mut Program, x: Variable, y: Variable) {
    lp.add_constraint(vec![(y, 1.0), (x, -1.0)], Cmp::Ge, 0.0);
}

/// What arrives at `up` (the server after `down` on the path) from `down` is what
/// `down` sent: each parent instant's value of a flow going on from `down` to `up`
/// equals that flow's departure at the matching child node (its value at the
/// child's arrival instant, by FIFO).
fn link(
    lp: &mut Program,
    arr: &Arrivals,
    up: usize,
    down: usize,
    parents: &[Node],
    children: &[Node],
) {
    let mut instants: Vec<&Vec<Variable>> = Vec::with_capacity(2 * parents.len());
    for p in parents {
        instants.push(&p.at_a);
        instants.push(&p.at_sigma);
    }
    for (values, child) in instants.into_iter().zip(children) {
        for (ui, &g) in arr.at[up].iter().enumerate() {
            let Some(di) = arr.at[down].iter().position(|&x| x == g) else {
                continue;
            };
            let goes_on = arr
                .hop(g, down)
                .and_then(|h| arr.paths[g].get(h + 1))
                .is_some_and(|&nx| nx == up);
            if goes_on {
                lp.add_constraint(
                    vec![(values[ui], 1.0), (child.at_a[di], -1.0)],
                    Cmp::Eq,
                    0.0,
                );
            }
        }
    }
}

/// The instants of a level (each node's `a` then `σ`, in node order) and the order
/// known between them, transitively closed.
fn level(nodes: &[Node], tau_le: &[Vec<bool>]) -> Level {
    let m = 2 * nodes.len();
    let mut le = vec![vec![false; m]; m];
    let mut times = Vec::with_capacity(m);
    let mut values = Vec::with_capacity(m);
    for (k, nd) in nodes.iter().enumerate() {
        times.push(nd.a);
        values.push(nd.at_a.clone());
        times.push(nd.sigma);
        values.push(nd.at_sigma.clone());
        le[2 * k][2 * k] = true;
        le[2 * k + 1][2 * k + 1] = true;
        le[2 * k + 1][2 * k] = true; // σ ≤ a
    }
    // departures in a known order arrived in that order (FIFO)
    for (x, row) in tau_le.iter().enumerate() {
        for (y, &ok) in row.iter().enumerate() {
            if ok && x < nodes.len() && y < nodes.len() {
                le[2 * x][2 * y] = true;
            }
        }
    }
    for k in 0..m {
        let via = le[k].clone();
        for row in le.iter_mut() {
            if row[k] {
                for (cell, &v) in row.iter_mut().zip(&via) {
                    *cell |= v;
                }
            }
        }
    }
    Level { times, values, le }
}

/// For every ordered pair of instants of a level, every flow's and every bundle's
/// arrival curve at server `s`, and that cumulative arrivals do not decrease.
fn arrival_constraints(lp: &mut Program, arr: &Arrivals, s: usize, level: &Level) {
    let flows = &arr.at[s];
    let m = level.times.len();
    let curves: Vec<Vec<(f64, f64)>> = flows
        .iter()
        .map(|&g| {
            arr.curve_at(g, s)
                .map(|c| pieces(c, lp.unit))
                .unwrap_or_default()
        })
        .collect();
    let bundles: Vec<Bundled> = arr.bundles[s]
        .iter()
        .filter(|b| b.flows.len() > 1)
        .map(|b| {
            let idx = b
                .flows
                .iter()
                .filter_map(|g| flows.iter().position(|x| x == g))
                .collect();
            (idx, pieces(&b.curve, lp.unit))
        })
        .collect();
    for x in 0..m {
        for y in 0..m {
            if x == y || !level.le[x][y] {
                continue;
            }
            let (tx, ty) = (level.times[x], level.times[y]);
            le(lp, tx, ty);
            for (i, c) in curves.iter().enumerate() {
                let (vx, vy) = (level.values[x][i], level.values[y][i]);
                lp.add_constraint(vec![(vy, 1.0), (vx, -1.0)], Cmp::Ge, 0.0);
                for &(b, r) in c {
                    // V(y) − V(x) ≤ b + r (t_y − t_x)
                    let e = vec![(vy, 1.0), (vx, -1.0), (ty, -r), (tx, r)];
                    lp.add_constraint(e, Cmp::Le, b);
                }
            }
            for (idx, c) in &bundles {
                for &(b, r) in c {
                    let mut e: Vec<(Variable, f64)> = Vec::with_capacity(2 * idx.len() + 2);
                    for &i in idx {
                        e.push((level.values[y][i], 1.0));
                        e.push((level.values[x][i], -1.0));
                    }
                    e.push((ty, -r));
                    e.push((tx, r));
                    lp.add_constraint(e, Cmp::Le, b);
                }
            }
        }
    }
}

/// A bundle's members (their positions among the server's flows) and its curve's
/// pieces.
type Bundled = (Vec<usize>, Vec<(f64, f64)>);

/// A concave curve as the affine pieces it is the minimum of, `(b, r)`: `α(t) =
/// min (b + r t)`, in bits and bits per `unit` seconds.
pub(super) fn pieces(c: &Curve, unit: f64) -> Vec<(f64, f64)> {
    c.points()
        .iter()
        .zip(c.slopes())
        .map(|((t, y), r)| {
            let b = y - &(r * t);
            // rounded up: a larger curve is still an arrival curve
            (
                b.to_f64() * (1.0 + 1e-12) + 1e-12,
                r.to_f64() * unit * (1.0 + 1e-12),
            )
        })
        .collect()
}
