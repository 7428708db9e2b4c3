//! How close the bounds come to a real trajectory: for the FIFO copy of a reference
//! network (`fifo.*` servers and flows), every combination of burst start times
//! (each flow's greedy burst starting at 0, 5, …, 80 µs) is simulated exactly, and
//! each flow's worst delay found is printed next to its LP and best bounds. A bound
//! below the worst delay found would be a bug; equal means the bound is exact there.
//!
//!   cargo run --release -p lockstep-netcalc --example burst_search -- examples/reference/dnc-ta-4s-1sc-2f-1ac-2p.toml

use lockstep_netcalc::methods::{bounds, Method};
use lockstep_netcalc::sim::simulate_from;
use lockstep_netcalc::{parse_network, Multiplexing, Q};

/// Start times tried per flow: 0 to 80 µs in steps of 5 µs.
const STEPS: i128 = 17;

fn us(q: &Q) -> f64 {
    q.to_f64() * 1e6
}

fn main() {
    let Some(file) = std::env::args().nth(1) else {
        eprintln!("usage: burst_search NETWORK.toml");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        eprintln!("{file}: {e}");
        std::process::exit(2)
    });
    let mut net = parse_network(&text).unwrap_or_else(|e| {
        eprintln!("{file}: {e}");
        std::process::exit(2)
    });
    net.servers.retain(|s| s.multiplexing == Multiplexing::Fifo);
    net.flows.retain(|f| f.name.starts_with("fifo."));
    let n = net.flows.len() as u32;
    let line_rate = Q::int(1_000_000_000_000);
    let mut worst = vec![Q::zero(); net.flows.len()];
    for code in 0..STEPS.pow(n) {
        let mut c = code;
        let starts: Vec<Q> = (0..n)
            .map(|_| {
                let k = c % STEPS;
                c /= STEPS;
                Q::ratio(k * 5, 1_000_000).unwrap_or_else(Q::zero)
            })
            .collect();
        if let Some(d) = simulate_from(&net, &line_rate, &starts) {
            for (w, x) in worst.iter_mut().zip(d) {
                if x > *w {
                    *w = x;
                }
            }
        }
    }
    let per_method: Vec<_> = Method::ALL
        .iter()
        .map(|&m| bounds(&net, m).unwrap_or_default())
        .collect();
    println!("flow\tworst found (us)\tLP (us)\tbest bound (us)");
    for (k, f) in net.flows.iter().enumerate() {
        let lp_at = Method::ALL.iter().position(|&m| m == Method::Lp);
        let lp = lp_at
            .and_then(|i| per_method[i].get(k))
            .and_then(|b| b.as_ref().ok());
        let best = per_method
            .iter()
            .filter_map(|b| b.get(k).and_then(|b| b.as_ref().ok()))
            .min();
        let show = |q: Option<&Q>| q.map_or("-".to_string(), |q| format!("{:.4}", us(q)));
        println!(
            "{}\t{:.4}\t{}\t{}",
            f.name,
            us(&worst[k]),
            show(lp),
            show(best)
        );
    }
}
