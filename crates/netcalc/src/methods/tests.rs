use super::*;
use crate::model::{Flow, Multiplexing, Server};

fn i(n: i64) -> Q {
    Q::int(n)
}

fn q(n: i128, d: i128) -> Q {
    Q::ratio(n, d).unwrap()
}

fn tandem(n: usize, mux: Multiplexing, flows: &[(usize, usize)]) -> Network {
    Network {
        servers: (0..n)
            .map(|k| Server {
                name: format!("s{k}"),
                rate: i(20),
                latency: i(20),
                buffer: None,
                multiplexing: mux,
                shaper: None,
            })
            .collect(),
        flows: flows
            .iter()
            .enumerate()
            .map(|(k, &(a, b))| Flow {
                name: format!("f{k}"),
                path: (a..=b).map(|s| format!("s{s}")).collect(),
                rate: i(5),
                burst: i(25),
                peak: None,
                max_packet: None,
                deadline: None,
            })
            .collect(),
    }
}

fn all(net: &Network, m: Method) -> Vec<Q> {
    bounds(net, m)
        .unwrap()
        .into_iter()
        .map(|b| b.unwrap())
        .collect()
}

#[test]
fn two_flows_through_three_fifo_servers() {
    let net = tandem(3, Multiplexing::Fifo, &[(0, 2), (0, 2)]);
    // the aggregate leaves each server as 10 t + 50 + 10·20: D = 22.5, 32.5, 42.5
    assert_eq!(all(&net, Method::Tfa), vec![q(195, 2); 2]);
    // both flows as one FIFO aggregate through β_{20, 60}: 60 + 50/20
    assert_eq!(all(&net, Method::Sfa), vec![q(125, 2); 2]);
    assert!(matches!(
        bounds(&net, Method::Pmoo).unwrap()[0],
        Err(NoBound::NotApplicable(_))
    ));
}

#[test]
fn two_flows_through_three_arbitrary_servers() {
    let net = tandem(3, Multiplexing::Arbitrary, &[(0, 2), (0, 2)]);
    // R = 20 − 5, T = 60 + (25 + 5·60)/15, plus 25/15
    assert_eq!(all(&net, Method::Pmoo), vec![q(250, 3); 2]);
}

/// A ring of `n` servers; flow `k` starts at server `k` and crosses `len` of them.
fn ring(n: usize, len: usize, rate: i64) -> Network {
    let mut net = tandem(n, Multiplexing::Fifo, &[]);
    net.flows = (0..n)
        .map(|k| Flow {
            name: format!("f{k}"),
            path: (0..len).map(|h| format!("s{}", (k + h) % n)).collect(),
            rate: i(rate),
            burst: i(25),
            peak: None,
            max_packet: None,
            deadline: None,
        })
        .collect();
    net
}

#[test]
fn a_ring_gets_the_fixed_point_of_the_tfa() {
    // D0 = 20 + (25 + 25 + 5 D1)/20 and the same for D1: D0 = D1 = 30
    let net = ring(2, 2, 5);
    assert!(is_cyclic(&net));
    assert_eq!(all(&net, Method::Tfa), vec![i(60); 2]);
    assert!(matches!(
        bounds(&net, Method::Sfa).unwrap()[0],
        Err(NoBound::NotApplicable(_))
    ));
    // a flow that loops: s0 s1 s0 s1, alone. D0 = 20 + (25 + (25 + 5 D0 + 5 D1))/20,
    // D1 = 20 + ((25 + 5 D0) + (25 + 10 D0 + 5 D1))/20: D0 = 60, D1 = 90, and the
    // flow crosses each twice
    let mut net = ring(2, 4, 5);
    net.flows.truncate(1);
    assert_eq!(all(&net, Method::Tfa), vec![i(300)]);
}

#[test]
fn a_diverging_fixed_point_says_so() {
    // four flows each crossing all four servers of a ring at a quarter of their rate:
    // every server's delay feeds the others' bursts with a gain of 1.5
    let net = ring(4, 4, 5);
    let b = bounds(&net, Method::Tfa).unwrap();
    assert!(
        matches!(&b[0], Err(NoBound::Unbounded(why)) if why.contains("diverges")),
        "{b:?}"
    );
}

#[test]
fn line_shaping_keeps_a_busier_ring_bounded_and_never_loosens() {
    // every flow crosses the whole ring of four at 3/20 of the rate each (load
    // 12/20): unshaped, the gain around the ring is 0.9 per server
    let mut net = ring(4, 4, 3);
    for f in &mut net.flows {
        f.max_packet = Some(i(25));
    }
    let plain = all(&net, Method::Tfa);
    let opts = Options { line_shaping: true };
    let shaped: Vec<Q> = bounds_with(&net, Method::Tfa, opts)
        .unwrap()
        .into_iter()
        .map(|b| b.unwrap())
        .collect();
    for (p, s) in plain.iter().zip(&shaped) {
        assert!(s <= p, "shaped {s} > plain {p}");
    }
    // at 4/20 each (load 16/20) the unshaped gain is 1.2 per server: diverges;
    // with 25-bit packets on 20 Mbit/s links what enters from the ring is capped
    let mut net = ring(4, 4, 4);
    for f in &mut net.flows {
        f.max_packet = Some(i(25));
    }
    assert!(bounds(&net, Method::Tfa).unwrap()[0].is_err());
    let b = bounds_with(&net, Method::Tfa, opts).unwrap();
    assert!(b[0].is_ok(), "{b:?}");
}

#[test]
fn the_lp_on_two_flows_through_three_fifo_servers() {
    // valid (at least the 60 + 50/20 = 62.5 the aggregate can reach) and rounded up
    // to the picosecond: not tighter here than the SFA's aggregate
    let net = tandem(3, Multiplexing::Fifo, &[(0, 2), (0, 2)]);
    let b = all(&net, Method::Lp);
    assert!(b[0] >= q(125, 2), "{}", b[0]);
    assert!(b[0] <= q(6438, 100), "{}", b[0]);
    let arb = tandem(3, Multiplexing::Arbitrary, &[(0, 2), (0, 2)]);
    assert!(matches!(
        bounds(&arb, Method::Lp).unwrap()[0],
        Err(NoBound::NotApplicable(_))
    ));
}

#[test]
fn a_stop_leaves_out_the_flows_not_analysed_yet() {
    use std::cell::Cell;
    let net = tandem(3, Multiplexing::Fifo, &[(0, 2), (0, 1), (1, 2), (0, 2)]);
    for m in Method::ALL {
        let every = bounds(&net, m).unwrap();
        // asked before each of the 3 servers' propagation, then before each flow:
        // yes from the third flow on
        let asked = Cell::new(0);
        let stop = || {
            asked.set(asked.get() + 1);
            asked.get() > 3 + 2
        };
        let some = bounds_until(&net, m, Options::default(), &stop).unwrap();
        assert_eq!(some, every[..2], "{m:?}");
        let none = bounds_until(&net, m, Options::default(), &|| true).unwrap();
        assert!(none.is_empty(), "{m:?}");
        assert_eq!(
            bounds_until(&net, m, Options::default(), &|| false).unwrap(),
            every
        );
    }
    // a cyclic network's fixed point: every bound or none
    for line_shaping in [false, true] {
        let mut net = ring(4, 4, 3);
        for f in &mut net.flows {
            f.max_packet = Some(i(25));
        }
        let opts = Options { line_shaping };
        let every = bounds_with(&net, Method::Tfa, opts).unwrap();
        assert_eq!(every.len(), net.flows.len());
        assert!(bounds_until(&net, Method::Tfa, opts, &|| true)
            .unwrap()
            .is_empty());
    }
}

/// Servers of rate 20 and latency 20 (FIFO), flows `(path first, path last, r, b)`.
fn fifo_net(n: usize, flows: &[(usize, usize, i64, i64)]) -> Network {
    let mut net = tandem(n, Multiplexing::Fifo, &[]);
    net.flows = flows
        .iter()
        .enumerate()
        .map(|(k, &(a, b, r, burst))| Flow {
            name: format!("f{k}"),
            path: (a..=b).map(|s| format!("s{s}")).collect(),
            rate: i(r),
            burst: i(burst),
            peak: None,
            max_packet: None,
            deadline: None,
        })
        .collect();
    net
}

#[test]
fn optimal_theta_on_one_server_is_the_aggregate_bound() {
    // f0 (5, 25) with f1 (5, 25) through β_{20, 20}: the classic residual
    // β_{15, 20 + 25/20} gives 21.25 + 25/15 = 275/12; the best θ is the aggregate's
    // delay bound, T + (b_c + σ)/R = 20 + 50/20 = 45/2, the TFA bound.
    let net = fifo_net(1, &[(0, 0, 5, 25), (0, 0, 5, 25)]);
    let by = sfa_by_theta(&net).unwrap();
    assert_eq!(by[0].envelope, Ok(q(275, 12)));
    assert_eq!(by[0].burst, Ok(q(275, 12)));
    assert_eq!(by[0].optimal, Ok(q(45, 2)));
    assert_eq!(all(&net, Method::Sfa), vec![q(45, 2); 2]);
    assert_eq!(all(&net, Method::Tfa), vec![q(45, 2); 2]);
}

#[test]
fn optimal_theta_on_two_servers_is_exact() {
    // f0 (5, 25) through s0, s1 (R = 20, T = 20); f1 (10, 25) crosses s0 only.
    // θ*: 20 + 25/20 = 21.25 at s0 (ρ = 10), 20 at s1 (ρ = 20). Classic (every
    // x = 0): 41.25 + 25/10 = 175/4. F(m) = m + (25 − 10m)+/20 + (25 − 20m)+/20 at
    // its breakpoints 0, 5/4, 5/2: 5/2, 15/8, 5/2; the optimum 41.25 + 15/8 = 345/8
    // (θ_0 = 21.25 + 5/8, θ_1 = 20).
    let net = fifo_net(2, &[(0, 1, 5, 25), (0, 0, 10, 25)]);
    let by = sfa_by_theta(&net).unwrap();
    assert_eq!(by[0].envelope, Ok(q(175, 4)));
    assert_eq!(by[0].burst, Ok(q(175, 4)));
    assert_eq!(by[0].optimal, Ok(q(345, 8)));
    assert_eq!(all(&net, Method::Sfa)[0], q(345, 8));
}

#[test]
fn optimal_theta_needs_fifo_servers() {
    let net = tandem(2, Multiplexing::Arbitrary, &[(0, 1), (0, 0)]);
    let by = sfa_by_theta(&net).unwrap();
    assert!(matches!(by[0].optimal, Err(NoBound::NotApplicable(_))));
    assert!(by[0].envelope.is_ok());
}

#[test]
fn a_shaper_bounds_what_leaves_a_server() {
    let mut net = tandem(3, Multiplexing::Fifo, &[(0, 2), (0, 2)]);
    for s in &mut net.servers {
        s.shaper = Some(crate::model::Shaper {
            rate: i(20),
            burst: i(0),
        });
    }
    // the aggregate enters s0 as 10 t + 50: 20 + 50/20 there; it leaves as
    // min(20 t, 10 t + 250), which a server of rate 20 and latency 20 delays by
    // exactly 20, and so on: 22.5 + 20 + 20 (195/2 without the shaper)
    assert_eq!(all(&net, Method::Tfa), vec![q(125, 2); 2]);
    assert_eq!(all(&net, Method::Sfa), vec![q(125, 2); 2]);
    // a shaper burst M adds M/20 at each of the two servers after the first
    for s in &mut net.servers {
        s.shaper = Some(crate::model::Shaper {
            rate: i(20),
            burst: i(40),
        });
    }
    assert_eq!(all(&net, Method::Tfa), vec![q(125 + 8, 2); 2]);
    // the fixed point (what cyclic networks get) uses the shapers too
    let fp = fixed_point_tfa(&net, Options::default()).unwrap();
    assert_eq!(fp, vec![Ok(q(125 + 8, 2)); 2]);
}

#[test]
fn the_lp_bounds_a_shaped_servers_whole_output() {
    // f0 crosses s0 .. s2, f1 only s0 (it leaves the path there), f2 s1 .. s2
    let mut net = tandem(3, Multiplexing::Fifo, &[(0, 2), (0, 0), (1, 2)]);
    let plain = lp::program(&Arrivals::of(&net).unwrap(), 0).unwrap();
    let before = all(&net, Method::Lp);
    for s in &mut net.servers {
        s.shaper = Some(crate::model::Shaper {
            rate: i(20),
            burst: i(0),
        });
    }
    let shaped = lp::program(&Arrivals::of(&net).unwrap(), 0).unwrap();
    // s0 and s1 have two departures of known order each below the last server:
    // one row per ordered pair and shaper piece
    assert!(shaped.rows.len() > plain.rows.len());
    let after = all(&net, Method::Lp);
    // the same optimum from another program may differ in its last float digits
    for (a, b) in after.iter().zip(&before) {
        assert!(
            a.to_f64() <= b.to_f64() * (1.0 + 1e-12),
            "LP with shapers {a} above {b} without"
        );
    }
}

#[test]
fn a_diverging_ring_says_how_loaded_it_is_and_at_what_scale_it_converges() {
    // four flows of rate 4 each crossing all four servers (R = 20): every server is
    // 16/20 loaded. Server s gets from server u, d hops before it, the bursts grown
    // by the 4 − d flows that crossed u first: A is circulant with the row
    // (0, 3, 2, 1)·4/20, ρ(A) = 24/20 = 6/5, and with the rates scaled by s the
    // fixed point converges exactly when s < 5/6 = 0.8333…
    let net = ring(4, 4, 4);
    assert!(bounds(&net, Method::Tfa).unwrap()[0].is_err());
    let d = diverge::divergence(&net, false, &|| false)
        .unwrap()
        .unwrap();
    assert_eq!(d.utilisation, q(4, 5));
    assert_eq!(d.busiest.len(), 4);
    assert!(d.busiest.iter().all(|b| b.crossings == 4));
    assert_eq!(d.scale, q(833, 1000));
    let at = diverge::scaled(&net, &d.scale);
    assert!(bounds(&at, Method::Tfa).unwrap().iter().all(Result::is_ok));
    let above = diverge::scaled(&net, &q(834, 1000));
    assert!(bounds(&above, Method::Tfa).unwrap()[0].is_err());
    // at 5/6 exactly I − A is singular: diverges
    let edge = diverge::scaled(&net, &q(5, 6));
    assert!(bounds(&edge, Method::Tfa).unwrap()[0].is_err());
}

#[test]
fn only_the_servers_on_a_cycle_count_and_a_converging_network_has_no_divergence() {
    // a feed-forward network, and a ring that converges: nothing to explain
    let net = tandem(3, Multiplexing::Fifo, &[(0, 2), (0, 2)]);
    assert_eq!(diverge::divergence(&net, false, &|| false).unwrap(), None);
    assert_eq!(
        diverge::divergence(&ring(2, 2, 5), false, &|| false).unwrap(),
        None
    );
    // the diverging ring of four plus a server s4 after it, loaded more than the
    // ring (f4 crosses it alone at rate 19) but on no cycle
    let mut net = ring(4, 4, 4);
    net.servers.push(Server {
        name: "s4".into(),
        ..net.servers[0].clone()
    });
    net.flows.push(Flow {
        name: "f4".into(),
        path: vec!["s3".into(), "s4".into()],
        rate: i(1),
        ..net.flows[0].clone()
    });
    net.flows.push(Flow {
        name: "f5".into(),
        path: vec!["s4".into()],
        rate: i(18),
        ..net.flows[0].clone()
    });
    let d = diverge::divergence(&net, false, &|| false)
        .unwrap()
        .unwrap();
    let names: Vec<&str> = d
        .busiest
        .iter()
        .map(|b| net.servers[b.server].name.as_str())
        .collect();
    assert_eq!(names, ["s3"]);
    assert_eq!(d.utilisation, q(17, 20));
    assert_eq!(d.busiest[0].crossings, 5);
    // a stop gives nothing
    assert_eq!(
        diverge::divergence(&ring(4, 4, 4), false, &|| true).unwrap(),
        None
    );
}

/// Two loops through one server s1 (s0 s1 s0 s1 s0 s1 and s2 s1 s2 s1 s2 s1), every
/// flow at `rate`, packets of 2: line shaping caps what each of s1's two upstream
/// servers passes on, but together they can still exceed s1's rate.
fn two_loops(rate: i64) -> Network {
    let mut net = tandem(3, Multiplexing::Fifo, &[]);
    let flow = |name: &str, a: usize| Flow {
        name: name.into(),
        path: (0..6)
            .map(|h| format!("s{}", if h % 2 == 0 { a } else { 1 }))
            .collect(),
        rate: i(rate),
        burst: i(25),
        peak: None,
        max_packet: Some(i(2)),
        deadline: None,
    };
    net.flows = vec![flow("fa", 0), flow("fb", 2)];
    net
}

#[test]
fn the_certified_convergence_test_answers_as_the_line_shaped_iteration() {
    // near its threshold the line-shaped iteration creeps for many rounds; the test
    // with certificates must give the iteration's own answer on both sides of it
    let net = two_loops(3);
    let paths = cyclic::paths(&net).unwrap();
    let d = diverge::divergence(&net, true, &|| false).unwrap().unwrap();
    assert_eq!(d.scale, q(995, 1000));
    let step = q(1, diverge::SCALE_STEPS.into());
    for s in [
        q(1, 2),
        q(9, 10),
        d.scale.clone(),
        d.scale.add_ref(&step),
        Q::one(),
    ] {
        let at = diverge::scaled(&net, &s);
        let plain = cyclic::delays(&at, &paths, true, &|| false).is_ok();
        let quick = cyclic::converges(&at, &paths, true, &|| false);
        assert_eq!(quick, Some(plain), "scale {s}");
        assert_eq!(plain, s <= d.scale, "scale {s}");
    }
}
