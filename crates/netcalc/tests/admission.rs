//! The admission API: what an admission returns, what a rejection names, and that a
//! rejection changes nothing. Values computed by hand in the comments.

use lockstep_netcalc::{Admission, Breaking, Flow, Multiplexing, Network, Server, Q};

fn i(n: i64) -> Q {
    Q::int(n)
}
fn q(n: i128, d: i128) -> Q {
    Q::ratio(n, d).unwrap()
}

fn server(name: &str, rate: i64, buffer: Option<i64>) -> Server {
    Server {
        name: name.into(),
        rate: i(rate),
        latency: i(0),
        buffer: buffer.map(i),
        multiplexing: Multiplexing::Fifo,
        shaper: None,
    }
}

fn flow(name: &str, path: &[&str], r: i64, b: i64, deadline: Option<Q>) -> Flow {
    Flow {
        name: name.into(),
        path: path.iter().map(|s| s.to_string()).collect(),
        rate: i(r),
        burst: i(b),
        peak: None,
        max_packet: None,
        deadline,
    }
}

#[test]
fn admit_reports_the_new_bounds_and_what_changed() {
    // One FIFO server R = 1000 bit/s, T = 0. f0 = (100, 1000) alone: 1000/1000 = 1 s.
    let net = Network {
        servers: vec![server("s0", 1000, None)],
        flows: vec![flow("f0", &["s0"], 100, 1000, Some(q(6, 5)))],
    };
    let mut adm = Admission::new(&net).unwrap();
    assert_eq!(adm.bounds("f0").unwrap().tfa, i(1));
    // f1 = (100, 100): aggregate delay 1100/1000 = 11/10 s for both (TFA). SFA of f1:
    // β_{900, 1000/1000} → 1 + 100/900 = 10/9 s; of f0: β_{900, 1/10} → 1/10 + 10/9.
    let ok = adm.admit(flow("f1", &["s0"], 100, 100, None)).unwrap();
    assert_eq!(ok.bounds.tfa, q(11, 10));
    assert_eq!(ok.bounds.sfa, q(10, 9));
    assert_eq!(ok.changed.len(), 1);
    assert_eq!(&*ok.changed[0].name, "f0");
    assert_eq!(ok.changed[0].tfa, q(11, 10));
    assert_eq!(ok.changed[0].sfa, &q(1, 10) + &q(10, 9));
    assert_eq!(ok.servers_touched, 1);
    assert_eq!(adm.len(), 2);
}

#[test]
fn a_rejection_names_what_would_break_and_changes_nothing() {
    let net = Network {
        servers: vec![server("s0", 1000, None), server("s1", 1000, Some(1200))],
        flows: vec![
            flow("f0", &["s0"], 100, 1000, Some(q(6, 5))),
            flow("g0", &["s1"], 100, 1000, None),
        ],
    };
    let mut adm = Admission::new(&net).unwrap();
    let before = adm.snapshot();

    // f1 = (100, 500) on s0: the aggregate delay becomes 1500/1000 = 3/2 s > 6/5.
    let r = adm.admit(flow("f1", &["s0"], 100, 500, None)).unwrap_err();
    assert_eq!(
        r.breaking,
        Breaking::Flow {
            name: "f0".into(),
            bound: q(3, 2),
            deadline: q(6, 5)
        }
    );
    assert!(r.reason.contains("\"f0\""), "{}", r.reason);
    assert_eq!(adm.snapshot(), before);

    // The new flow's own deadline is checked first: alone with f0 it would see 3/2 s.
    let r = adm
        .admit(flow("f2", &["s0"], 100, 500, Some(i(1))))
        .unwrap_err();
    assert!(matches!(r.breaking, Breaking::Flow { ref name, .. } if name == "f2"));

    // g1 = (100, 500) on s1: backlog 1000 + 500 = 1500 bits > 1200.
    let r = adm.admit(flow("g1", &["s1"], 100, 500, None)).unwrap_err();
    assert_eq!(
        r.breaking,
        Breaking::Port {
            server: "s1".into(),
            backlog: i(1500),
            buffer: i(1200)
        }
    );

    // 100 + 950 > 1000.
    let r = adm.admit(flow("big", &["s0"], 950, 10, None)).unwrap_err();
    assert_eq!(
        r.breaking,
        Breaking::Stability {
            server: "s0".into(),
            load: i(1050),
            rate: i(1000)
        }
    );

    // s0 → s1 exists through h0; s1 → s0 would close a cycle.
    adm.admit(flow("h0", &["s0", "s1"], 1, 10, None)).unwrap();
    let before = adm.snapshot();
    let r = adm
        .admit(flow("back", &["s1", "s0"], 1, 10, None))
        .unwrap_err();
    assert_eq!(
        r.breaking,
        Breaking::Cycle {
            servers: vec!["s0".into(), "s1".into(), "s0".into()]
        }
    );
    assert_eq!(r.reason, "cyclic network: s0 → s1 → s0 (out of scope)");

    let r = adm.admit(flow("x", &["s7"], 1, 10, None)).unwrap_err();
    assert!(matches!(r.breaking, Breaking::Invalid(_)));
    assert_eq!(r.reason, "flow \"x\".path[0]: unknown server \"s7\"");
    let r = adm.admit(flow("f0", &["s0"], 1, 10, None)).unwrap_err();
    assert_eq!(
        r.reason,
        "flow \"f0\".name: a flow named \"f0\" is already admitted"
    );
    assert_eq!(adm.snapshot(), before);
}

#[test]
fn remove_restores_the_bounds_exactly() {
    let net = Network {
        servers: vec![server("s0", 1000, None), server("s1", 700, None)],
        flows: vec![
            flow("a", &["s0", "s1"], 100, 300, None),
            flow("b", &["s1"], 200, 70, None),
        ],
    };
    let mut adm = Admission::new(&net).unwrap();
    let before = adm.snapshot();
    adm.admit(flow("c", &["s0", "s1"], 50, 90, None)).unwrap();
    assert!(adm.bounds("a").unwrap().tfa > before.flow("a").unwrap().tfa);
    let removed = adm.remove("c").unwrap();
    assert_eq!(&*removed.removed.name, "c");
    assert_eq!(removed.changed.len(), 2);
    assert_eq!(adm.snapshot(), before);
    assert!(adm.remove("c").is_none());
    assert!(adm.bounds("c").is_none());
}

/// The controller's acceptance example (docs/CONTROLLER.md): three FIFO servers of
/// 100 Mbit/s and 45 µs in a row, flows of r = 8 Mbit/s with b = M = 1514 B
/// (12112 bit) along all three. One flow alone: SFA = 3·45 µs + 12112/10^8 s =
/// 256.12 µs. A second identical flow raises f1's SFA bound to 702.63 µs; the hand
/// computation (docs/NETWORK-CALCULUS.md, "Two identical flows"):
/// - TFA, aggregate delays: D0 = 45 µs + 24224/10^8 s = 287.24 µs; f2's burst after
///   s0 is b1 = 12112 + 8·10^6·D0 = 360248/25 bit, so D1 = 45 µs + 2 b1/10^8 s =
///   208249/625 µs; b2 = b1 + 8·10^6·D1 = 10672192/625 bit, D2 = 6039221/15625 µs;
///   TFA = D0 + D1 + D2 = 15733571/15625 µs = 1006.948544 µs.
/// - SFA: f1's FIFO residual at each hop is β_{R − r, T + b_c/R} with f2's burst b_c
///   there (b, b1, b2): rate 92 Mbit/s, latencies summed 3·45 µs + (b + b1 + b2)/R =
///   8921473/15625 µs; plus f1's own burst once at 92 Mbit/s, 12112/(92·10^6) s:
///   SFA = 252506379/359375000000 s = 702.6264459… µs.
///
/// Valid, not a bug: pay-bursts-only-once spares only the flow's own burst; the cross
/// flow's burst (grown hop by hop) is paid at every hop. The symmetric-burst
/// simulation stays below both.
#[test]
fn two_identical_flows_on_one_path_exact_bounds() {
    let s = |name: &str| Server {
        name: name.into(),
        rate: i(100_000_000),
        latency: q(45, 1_000_000),
        buffer: None,
        multiplexing: Multiplexing::Fifo,
        shaper: None,
    };
    let f = |name: &str| Flow {
        name: name.into(),
        path: vec!["s0".into(), "s1".into(), "s2".into()],
        rate: i(8_000_000),
        burst: i(12112),
        peak: Some(i(100_000_000)),
        max_packet: Some(i(12112)),
        deadline: None,
    };
    let mut net = Network {
        servers: vec![s("s0"), s("s1"), s("s2")],
        flows: vec![f("f1")],
    };
    let mut adm = Admission::new(&net).unwrap();
    let one = adm.bounds("f1").unwrap();
    assert_eq!(one.sfa, q(6403, 25_000_000)); // 256.12 µs
                                              // Alone: D0 = 45 + 121.12 µs, its burst grows by r·D0 per hop: 539.29197 µs.
    assert_eq!(one.tfa, q(8_426_437, 15_625_000_000));
    let ok = adm.admit(f("f2")).unwrap();
    let two = adm.bounds("f1").unwrap();
    assert_eq!(
        two.tfa_hops,
        vec![
            q(7181, 25_000_000),
            q(208_249, 625_000_000),
            q(6_039_221, 15_625_000_000)
        ]
    );
    assert_eq!(two.tfa, q(15_733_571, 15_625_000_000));
    assert_eq!(two.sfa, q(252_506_379, 359_375_000_000));
    assert_eq!(ok.bounds.sfa, two.sfa);
    net.flows.push(f("f2"));
    // Sources ramping at 1 Tbit/s (close to the instantaneous burst b = M allows):
    // both bursts queue at s0 and leave it at the link rate, with no more queueing
    // after it: just under 3·45 µs + 24224/10^8 s = 377.24 µs, far below the bounds
    // (the SFA's cross-burst-per-hop charge is what makes it loose here).
    let sim = lockstep_netcalc::sim::simulate(&net, &i(1_000_000_000_000)).unwrap();
    for w in &sim {
        assert!(w <= &two.sfa && w <= &two.tfa, "simulated {w}");
        assert!(
            w > &q(377, 1_000_000) && w <= &q(9431, 25_000_000),
            "simulated {w}"
        );
    }
}
