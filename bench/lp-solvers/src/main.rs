//! Solves every LP program `lockstep calc --method lp` would build for the network
//! files given, with microlp (what lockstep uses) and with HiGHS, and prints per
//! program its size, each solver's time (median of a few solves) and optimum.

use std::time::Instant;

use highs::{HighsModelStatus, RowProblem, Sense};
use lockstep_netcalc::methods::lp::{self, Cmp, Program};
use lockstep_netcalc::methods::Arrivals;

const REPEAT: usize = 5;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn highs_solve(p: &Program) -> Option<f64> {
    let mut pb = RowProblem::default();
    let cols: Vec<highs::Col> = p.objective.iter().map(|&c| pb.add_column(c, 0.0..)).collect();
    for (row, cmp, rhs) in &p.rows {
        let items: Vec<(highs::Col, f64)> = row.iter().map(|&(v, c)| (cols[v], c)).collect();
        match cmp {
            Cmp::Le => pb.add_row(..=*rhs, &items),
            Cmp::Ge => pb.add_row(*rhs.., &items),
            Cmp::Eq => pb.add_row(*rhs..=*rhs, &items),
        }
    }
    let mut model = pb.optimise(Sense::Maximise);
    model.set_option("output_flag", false);
    let solved = model.solve();
    (solved.status() == HighsModelStatus::Optimal).then(|| solved.objective_value())
}

fn time<T>(f: impl Fn() -> T) -> (f64, T) {
    let mut times = Vec::with_capacity(REPEAT);
    let mut last = None;
    for _ in 0..REPEAT {
        let t0 = Instant::now();
        last = Some(f());
        times.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    (median(times), last.expect("REPEAT > 0"))
}

fn main() {
    println!("file\tflow\thops\tvariables\trows\tmicrolp_us\thighs_us\tmicrolp_opt_us\thighs_opt_us");
    let (mut total_m, mut total_h) = (0.0, 0.0);
    for path in std::env::args().skip(1) {
        let text = std::fs::read_to_string(&path).expect("readable file");
        let net = lockstep_netcalc::parse_network(&text).expect("a valid network");
        let Ok(arr) = Arrivals::of(&net) else {
            continue;
        };
        for (f, flow) in net.flows.iter().enumerate() {
            let Ok(p) = lp::program(&arr, f) else {
                continue;
            };
            let (tm, om) = time(|| p.solve().ok());
            let (th, oh) = time(|| highs_solve(&p));
            total_m += tm;
            total_h += th;
            let show = |o: Option<f64>| o.map_or("-".to_string(), |v| format!("{v:.6}"));
            println!(
                "{path}\t{}\t{}\t{}\t{}\t{tm:.0}\t{th:.0}\t{}\t{}",
                flow.name,
                flow.path.len(),
                p.objective.len(),
                p.rows.len(),
                show(om),
                show(oh)
            );
        }
    }
    println!("total\t\t\t\t\t{total_m:.0}\t{total_h:.0}\t\t");
}
