//! Invariants of the analyses on small random feed-forward networks:
//! - the incremental state always equals a full re-analysis;
//! - adding a flow never lowers another flow's bound (TFA, SFA, the smaller of both)
//!   or a server's backlog bound;
//! - removing a flow restores every bound exactly;
//! - no bound is below the worst delay an exact fluid simulation of symmetric bursts
//!   through FIFO rate-latency servers produces;
//! - the loeser port formulas equal the generic deviations;
//! - all of this also with propagated delays rounded up to a grid;
//! - no method's bound is below the simulation with output shapers `R' t + M` of
//!   rate `R' ≥ R` (the simulated servers respect them; tighter shapers are not
//!   simulated);
//! - the LP fixed point of cyclic networks, run on them with cuts, is never below
//!   the simulation.
//!
//! Sizes are small so the whole file runs in a few seconds.

use lockstep_netcalc::methods::{self, Method};
use lockstep_netcalc::sim::{simulate, simulate_from};
use lockstep_netcalc::{
    backlog_bound, delay_bound, fifo_port, Admission, Curve, Flow, Multiplexing, Network, PortFlow,
    Server, Service, Shaper, Q,
};
use proptest::prelude::*;

fn i(n: i64) -> Q {
    Q::int(n)
}

/// Path mask, r, b, optional (C − r, M).
type FlowSpec = (Vec<bool>, i64, i64, Option<(i64, i64)>);

#[derive(Clone, Debug)]
struct Spec {
    servers: Vec<(i64, i64, bool)>, // rate, latency (in 1/2 units), fifo
    flows: Vec<FlowSpec>,
}

fn spec(max_servers: usize, max_flows: usize, fifo_only: bool) -> impl Strategy<Value = Spec> {
    (1..=max_servers).prop_flat_map(move |n| {
        let servers = prop::collection::vec((12i64..=24, 0i64..=4, any::<bool>()), n);
        let flow = (
            prop::collection::vec(any::<bool>(), n),
            1i64..=3,
            1i64..=20,
            prop::option::of((0i64..=20, 1i64..=20)),
        );
        let flows = prop::collection::vec(flow, 1..=max_flows);
        (servers, flows).prop_map(move |(mut servers, flows)| {
            if fifo_only {
                for s in &mut servers {
                    s.2 = true;
                }
            }
            Spec { servers, flows }
        })
    })
}

fn network(s: &Spec) -> Network {
    let servers = s
        .servers
        .iter()
        .enumerate()
        .map(|(k, (r, l, fifo))| Server {
            name: format!("s{k}"),
            rate: i(*r),
            latency: Q::ratio(*l as i128, 2).unwrap(),
            buffer: None,
            multiplexing: if *fifo {
                Multiplexing::Fifo
            } else {
                Multiplexing::Arbitrary
            },
            shaper: None,
        })
        .collect();
    let flows = s
        .flows
        .iter()
        .enumerate()
        .map(|(k, (mask, r, b, peak))| {
            let mut path: Vec<String> = mask
                .iter()
                .enumerate()
                .filter(|(_, on)| **on)
                .map(|(j, _)| format!("s{j}"))
                .collect();
            if path.is_empty() {
                path.push(format!("s{}", k % s.servers.len()));
            }
            let (peak, max_packet) = match peak {
                Some((extra, m)) => (Some(i(r + extra)), Some(i((*m).min(*b)))),
                None => (None, None),
            };
            Flow {
                name: format!("f{k}"),
                path,
                rate: i(*r),
                burst: i(*b),
                peak,
                max_packet,
                deadline: None,
            }
        })
        .collect();
    Network { servers, flows }
}

/// The first flow whose bound is below its simulated worst delay, as a message.
fn first_below(net: &Network, sim: &[Q], what: &str, bounds: &[methods::Bound]) -> Option<String> {
    net.flows
        .iter()
        .zip(bounds)
        .zip(sim)
        .find_map(|((f, b), worst)| match b {
            Ok(b) if worst > b => Some(format!("{}: simulated {worst} > {what} {b}", f.name)),
            _ => None,
        })
}

/// Gives server `k` the shaper `(R + extra) t + M` for `shapers[k] = Some((extra,
/// M))`: never below the server's rate, so the fluid simulation respects it.
fn shape(net: &mut Network, shapers: &[Option<(i64, i64)>]) {
    for (srv, sh) in net.servers.iter_mut().zip(shapers) {
        srv.shaper = sh.map(|(extra, m)| Shaper {
            rate: &srv.rate + &i(extra),
            burst: i(m),
        });
    }
}

fn stable(net: &Network) -> bool {
    net.servers.iter().all(|s| {
        let load: Q = net
            .flows
            .iter()
            .filter(|f| f.path.contains(&s.name))
            .map(|f| f.rate.clone())
            .sum();
        load <= s.rate
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn incremental_equals_full_and_bounds_only_grow(s in spec(4, 5, false), grid in prop::option::of(1i64..=5)) {
        let net = network(&s);
        prop_assume!(stable(&net));
        let grid = grid.map(|g| Q::ratio(g as i128, 7).unwrap());
        let mut adm = Admission::new(&Network { servers: net.servers.clone(), flows: vec![] }).unwrap();
        adm.set_propagation_grid(grid.clone());
        let mut before_last = adm.snapshot();
        for f in &net.flows {
            before_last = adm.snapshot();
            let ok = adm.admit(f.clone());
            prop_assert!(ok.is_ok(), "{:?}", ok);
            let now = adm.snapshot();
            prop_assert_eq!(&now, &adm.full_reanalysis());
            for old in &before_last.flows {
                let new = now.flow(&old.name).unwrap();
                prop_assert!(new.tfa >= old.tfa, "TFA of {} fell: {} -> {}", old.name, old.tfa, new.tfa);
                prop_assert!(new.sfa >= old.sfa, "SFA of {} fell: {} -> {}", old.name, old.sfa, new.sfa);
                prop_assert!(new.bound() >= old.bound(), "bound of {} fell: {:?} -> {:?}", old.name, old, new);
            }
            for (old, new) in before_last.servers.iter().zip(now.servers.iter()) {
                prop_assert!(new.backlog >= old.backlog);
            }
        }
        // Removing the last flow restores the state before it exactly.
        let last = net.flows.last().unwrap().name.clone();
        prop_assert!(adm.remove(&last).is_some());
        prop_assert_eq!(adm.snapshot(), before_last);
        // Removing the first flow gives what a fresh analysis without it gives.
        if net.flows.len() > 2 {
            let first = net.flows[0].name.clone();
            adm.remove(&first).unwrap();
            let rest = Network {
                servers: net.servers.clone(),
                flows: net.flows[1..net.flows.len() - 1].to_vec(),
            };
            let mut fresh = Admission::new(&rest).unwrap();
            fresh.set_propagation_grid(grid.clone());
            let fresh = fresh.snapshot();
            prop_assert_eq!(&adm.snapshot().flows, &fresh.flows);
            prop_assert_eq!(adm.snapshot(), adm.full_reanalysis());
        }
    }

    /// Admissions recompute in place and roll back on rejection: a rejected flow
    /// leaves the state exactly as it was (later admissions and removals still equal a
    /// full re-analysis, so the hidden per-hop curves were restored too), and what is
    /// admitted is exactly the set a fresh analysis accepts.
    #[test]
    fn rejections_roll_back_exactly(
        s in spec(4, 7, false),
        deadlines in prop::collection::vec(prop::option::of(1i64..=40), 7),
        buffers in prop::collection::vec(prop::option::of(10i64..=80), 4),
        grid in prop::option::of(1i64..=5),
    ) {
        let mut net = network(&s);
        for (f, d) in net.flows.iter_mut().zip(deadlines.iter()) {
            f.deadline = d.map(|d| Q::ratio(d as i128, 4).unwrap());
        }
        for (sv, b) in net.servers.iter_mut().zip(buffers.iter()) {
            sv.buffer = b.map(i);
        }
        let grid = grid.map(|g| Q::ratio(g as i128, 7).unwrap());
        let empty = Network { servers: net.servers.clone(), flows: vec![] };
        let mut adm = Admission::with_grid(&empty, grid.clone()).unwrap();
        let mut admitted: Vec<Flow> = Vec::new();
        for f in &net.flows {
            let before = adm.snapshot();
            match adm.admit(f.clone()) {
                Ok(ok) => {
                    admitted.push(f.clone());
                    // Every changed bound is reported, and only those.
                    for c in &ok.changed {
                        prop_assert_ne!(Some(c), before.flow(&c.name));
                    }
                    let now = adm.snapshot();
                    for old in &before.flows {
                        let new = now.flow(&old.name).unwrap();
                        let reported = ok.changed.iter().any(|c| c.name == old.name);
                        prop_assert_eq!(reported, new != old);
                    }
                }
                Err(_) => prop_assert_eq!(adm.snapshot(), before),
            }
            prop_assert_eq!(adm.snapshot(), adm.full_reanalysis());
            let fresh = Admission::with_grid(
                &Network { servers: net.servers.clone(), flows: admitted.clone() },
                grid.clone(),
            ).unwrap();
            prop_assert_eq!(adm.snapshot(), fresh.snapshot());
        }
        // Removing everything, newest first, goes back to the empty network.
        for f in admitted.iter().rev() {
            prop_assert!(adm.remove(&f.name).is_some());
            prop_assert_eq!(adm.snapshot(), adm.full_reanalysis());
        }
        prop_assert_eq!(adm.snapshot(), Admission::new(&empty).unwrap().snapshot());
    }

    #[test]
    fn no_bound_below_the_symmetric_burst_simulation(s in spec(3, 4, true), grid in prop::option::of(1i64..=5)) {
        let net = network(&s);
        prop_assume!(stable(&net));
        let exact = Admission::new(&net).unwrap();
        let mut adm = exact.clone();
        adm.set_propagation_grid(grid.map(|g| Q::ratio(g as i128, 7).unwrap()));
        let report = adm.snapshot();
        // Rounding the propagated delays up never lowers a bound.
        for (e, r) in exact.snapshot().flows.iter().zip(report.flows.iter()) {
            prop_assert!(r.tfa >= e.tfa && r.sfa >= e.sfa);
        }
        let sim = simulate(&net, &i(1000)).unwrap();
        for (f, worst) in report.flows.iter().zip(sim.iter()) {
            prop_assert!(worst <= &f.tfa, "{}: simulated {} > TFA {}", f.name, worst, f.tfa);
            prop_assert!(worst <= &f.sfa, "{}: simulated {} > SFA {}", f.name, worst, f.sfa);
        }
    }

    #[test]
    fn no_method_bound_below_the_symmetric_burst_simulation(s in spec(4, 5, false)) {
        let net = network(&s);
        prop_assume!(stable(&net));
        // The FIFO trajectory is one an arbitrary-multiplexing server may produce
        // too, so it bounds every method from below on any mix of servers.
        let mut fifo = net.clone();
        for srv in &mut fifo.servers {
            srv.multiplexing = Multiplexing::Fifo;
        }
        let sim = simulate(&fifo, &i(1000)).unwrap();
        for m in Method::ALL {
            let bounds = methods::bounds(&net, m).unwrap();
            let below = first_below(&net, &sim, m.name(), &bounds);
            prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
        }
    }

    #[test]
    fn no_method_bound_below_bursts_at_other_times(
        s in spec(4, 5, true),
        starts in prop::collection::vec(0i64..=40, 5),
    ) {
        let net = network(&s);
        prop_assume!(stable(&net));
        // each flow's burst at its own time, in quarter units: cross traffic arriving
        // just behind a flow's burst is what the symmetric trajectory misses
        let starts: Vec<Q> = starts.iter().map(|&x| Q::ratio(x as i128, 4).unwrap()).collect();
        let sim = simulate_from(&net, &i(1000), &starts).unwrap();
        for m in Method::ALL {
            let bounds = methods::bounds(&net, m).unwrap();
            let below = first_below(&net, &sim, m.name(), &bounds);
            prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
        }
    }

    #[test]
    fn optimal_theta_is_no_worse_than_either_fixed_theta_and_never_below_the_simulation(
        s in spec(4, 5, true),
        starts in prop::collection::vec(0i64..=40, 5),
    ) {
        let net = network(&s);
        prop_assume!(stable(&net));
        let by = methods::sfa_by_theta(&net).unwrap();
        let sfa = methods::bounds(&net, Method::Sfa).unwrap();
        for ((f, b), sfa) in net.flows.iter().zip(&by).zip(&sfa) {
            // the SFA takes the smallest of the three
            for other in [&b.burst, &b.envelope, &b.optimal] {
                if let (Ok(o), Ok(s)) = (other, sfa) {
                    prop_assert!(s <= o, "{}: SFA {} above a choice {}", f.name, s, o);
                }
            }
            // for a token-bucket flow, the joint optimum includes the classic choice
            if f.peak.is_none() {
                if let (Ok(o), Ok(e)) = (&b.optimal, &b.envelope) {
                    prop_assert!(o <= e, "{}: optimal θ {} above θ = T + b/R {}", f.name, o, e);
                }
            }
        }
        let optimal: Vec<methods::Bound> = by.iter().map(|b| b.optimal.clone()).collect();
        let sym = simulate(&net, &i(1000)).unwrap();
        let below = first_below(&net, &sym, "optimal-θ SFA", &optimal);
        prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
        let starts: Vec<Q> = starts.iter().map(|&x| Q::ratio(x as i128, 4).unwrap()).collect();
        let shifted = simulate_from(&net, &i(1000), &starts).unwrap();
        let below = first_below(&net, &shifted, "optimal-θ SFA", &optimal);
        prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
    }

    /// Servers with output shapers `R' t + M` (`R' ≥ R`, `M ≥ 0`, often panco's
    /// `R t`): the simulated server sends at most at its rate `R`, so its output
    /// respects such a shaper and the simulation is still a trajectory of the shaped
    /// network; every method, using the shapers, stays above it.
    #[test]
    fn no_method_bound_below_the_simulation_with_shapers(
        s in spec(4, 5, false),
        shapers in prop::collection::vec(prop::option::of((0i64..=6, 0i64..=20)), 4),
        starts in prop::collection::vec(0i64..=40, 5),
    ) {
        let mut net = network(&s);
        prop_assume!(stable(&net));
        shape(&mut net, &shapers);
        let mut fifo = net.clone();
        for srv in &mut fifo.servers {
            srv.multiplexing = Multiplexing::Fifo;
        }
        let sym = simulate(&fifo, &i(1000)).unwrap();
        let starts: Vec<Q> = starts.iter().map(|&x| Q::ratio(x as i128, 4).unwrap()).collect();
        let shifted = simulate_from(&fifo, &i(1000), &starts).unwrap();
        for m in Method::ALL {
            let bounds = methods::bounds(&net, m).unwrap();
            for sim in [&sym, &shifted] {
                let below = first_below(&net, sim, m.name(), &bounds);
                prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
            }
        }
    }

    /// The fixed point with shapers (and with or without line shaping) on
    /// feed-forward FIFO networks, against the simulation as above.
    #[test]
    fn the_fixed_point_with_shapers_is_never_below_the_simulation(
        s in spec(4, 5, true),
        shapers in prop::collection::vec(prop::option::of((0i64..=6, 0i64..=20)), 4),
        shaping in any::<bool>(),
    ) {
        let mut net = network(&s);
        prop_assume!(stable(&net));
        shape(&mut net, &shapers);
        let sim = simulate(&net, &i(1000)).unwrap();
        let opts = methods::Options { line_shaping: shaping };
        let bounds = methods::fixed_point_tfa(&net, opts).unwrap();
        let below = first_below(&net, &sim, "fixed point", &bounds);
        prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
    }

    #[test]
    fn the_fixed_point_is_never_below_the_simulation(s in spec(4, 5, true), shaping in any::<bool>()) {
        let net = network(&s);
        prop_assume!(stable(&net));
        let sim = simulate(&net, &i(1000)).unwrap();
        let opts = methods::Options { line_shaping: shaping };
        let bounds = methods::fixed_point_tfa(&net, opts).unwrap();
        let below = first_below(&net, &sim, "fixed point", &bounds);
        prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
    }

    /// The polynomial program over the servers upstream on its own (the LP method
    /// takes the smaller of it and the path program), with shapers, against
    /// symmetric bursts and bursts at other times.
    #[test]
    fn the_upstream_program_alone_is_never_below_the_simulation(
        s in spec(4, 5, true),
        shapers in prop::collection::vec(prop::option::of((0i64..=6, 0i64..=20)), 4),
        starts in prop::collection::vec(0i64..=40, 5),
    ) {
        let mut net = network(&s);
        prop_assume!(stable(&net));
        shape(&mut net, &shapers);
        let sym = simulate(&net, &i(1000)).unwrap();
        let starts: Vec<Q> = starts.iter().map(|&x| Q::ratio(x as i128, 4).unwrap()).collect();
        let shifted = simulate_from(&net, &i(1000), &starts).unwrap();
        let arr = methods::Arrivals::of(&net).unwrap();
        let bounds: Vec<methods::Bound> = (0..net.flows.len())
            .map(|f| methods::plp::delay_program(&arr, f).and_then(|p| p.bound()))
            .collect();
        for sim in [&sym, &shifted] {
            let below = first_below(&net, sim, "upstream program", &bounds);
            prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
        }
    }

    /// The LP fixed point of cyclic networks on feed-forward FIFO networks, cut where
    /// random server ranks say (a hop to a server of the same or lower rank is cut,
    /// so often every hop), with or without shapers and line shaping: never below the
    /// simulation, never above the TFA fixed point.
    #[test]
    fn the_lp_fixed_point_is_never_below_the_simulation(
        s in spec(4, 5, true),
        shapers in prop::collection::vec(prop::option::of((0i64..=6, 0i64..=20)), 4),
        rank in prop::collection::vec(0usize..4, 4),
        shaping in any::<bool>(),
    ) {
        let mut net = network(&s);
        prop_assume!(stable(&net));
        shape(&mut net, &shapers);
        let sim = simulate(&net, &i(1000)).unwrap();
        let opts = methods::Options { line_shaping: shaping };
        let fp = methods::fixed_point_lp(&net, opts, &rank[..net.servers.len()]).unwrap();
        let below = first_below(&net, &sim, "LP fixed point", &fp.bounds);
        prop_assert!(below.is_none(), "{}", below.unwrap_or_default());
        let tfa = methods::fixed_point_tfa(&net, opts).unwrap();
        for (lp, tfa) in fp.bounds.iter().zip(&tfa) {
            if let (Ok(lp), Ok(tfa)) = (lp, tfa) {
                prop_assert!(lp <= tfa, "LP fixed point {lp} above the TFA one {tfa}");
            }
        }
    }

    #[test]
    fn methods_are_as_tight_as_the_admission_analyses(s in spec(4, 5, false)) {
        let net = network(&s);
        prop_assume!(stable(&net));
        let report = Admission::new(&net).unwrap().snapshot();
        let tfa = methods::bounds(&net, Method::Tfa).unwrap();
        let sfa = methods::bounds(&net, Method::Sfa).unwrap();
        for ((f, t), s) in report.flows.iter().zip(&tfa).zip(&sfa) {
            let t = t.as_ref().unwrap();
            let s = s.as_ref().unwrap();
            prop_assert!(t <= &f.tfa, "{}: TFA {} > admission's {}", f.name, t, f.tfa);
            prop_assert!(s <= &f.sfa, "{}: SFA {} > admission's {}", f.name, s, f.sfa);
        }
    }

    #[test]
    fn spec_port_equals_the_generic_deviations(
        c in 10i64..=40,
        t_mux in 0i64..=6,
        flows in prop::collection::vec((1i64..=3, 0i64..=30, 1i64..=8), 1..=5),
    ) {
        let flows: Vec<PortFlow> = flows.iter().map(|(r, extra, m)| PortFlow::new(i(*r), i(m + extra), i(*m))).collect();
        let load: Q = flows.iter().map(|f| f.r.clone()).sum();
        prop_assume!(load <= i(c));
        let p = fifo_port(&i(c), &i(t_mux), &flows).unwrap();
        let agg = Curve::sum(flows.iter().map(|f| Curve::tspec(i(c), f.m.clone(), f.r.clone(), f.b.clone())).collect::<Vec<_>>().iter());
        let beta = Service::rate_latency(i(c), i(t_mux));
        prop_assert_eq!(Some(p.delay.clone()), delay_bound(&agg, &beta));
        let v = backlog_bound(&agg, &beta).unwrap();
        if p.backlog_exact {
            prop_assert_eq!(p.backlog.clone(), v);
        } else {
            prop_assert!(p.backlog >= v);
        }
        prop_assert!(p.delay_estimate >= p.delay);
        prop_assert!(p.backlog_estimate >= p.backlog);
    }

    #[test]
    fn parsing_never_panics(text in "[\\[\\]a-z_=\" 0-9./\\n]{0,200}") {
        let _ = lockstep_netcalc::load(&text);
    }
}
