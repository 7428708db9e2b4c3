//! A plan's load sent through a token bucket: the line scenario's load (tx → rx)
//! shaped by the tbf model sends exactly what its bucket allows over a second of
//! virtual time and all of it arrives; a constant-rate load below its bucket's rate
//! never waits; bad shaped loads are refused with a reason.

use lockstep_core::units::{BitRate, Size};
use lockstep_core::Duration;
use lockstep_plan::plan::{plan, Plan};
use lockstep_plan::scenario::{RunMode, Scenario};
use lockstep_sim::shaped::{engine, port_towards, ShapeError, ShapedLoad};
use lockstep_sim::source::{Pattern, ShapedSource, ShaperModel};
use lockstep_sim::{Engine, Kind, SimOptions};

const LINE: &str = include_str!("../../../scenarios/line.toml");
const S: i64 = 1_000_000_000;

fn line() -> Plan {
    let s = Scenario::parse("line.toml", LINE).unwrap();
    let spec = s
        .runs()
        .into_iter()
        .find(|r| r.mode == RunMode::Fifo)
        .unwrap();
    plan(&s, &spec).unwrap()
}

fn source<'a>(e: &'a Engine, p: &Plan, name: &str) -> &'a ShapedSource {
    let (n, _) = port_towards(p, name, "r1").unwrap();
    match &e.nodes[n].kind {
        Kind::Host(h) => {
            assert!(h.sources.is_empty(), "the constant-rate source is replaced");
            &h.shaped[0]
        }
        Kind::Router(_) => panic!("{name} is a router"),
    }
}

fn received(e: &Engine, p: &Plan) -> u64 {
    let port = p.loads[0].dst.port();
    e.nodes
        .iter()
        .find(|n| n.name == "rx")
        .and_then(|n| match &n.kind {
            Kind::Host(h) => h.sinks.iter().find(|(q, _)| *q == port).map(|(_, n)| *n),
            Kind::Router(_) => None,
        })
        .unwrap()
}

/// Runs one second of traffic, then lets what is queued arrive.
fn run(e: &mut Engine, start: i64) {
    e.run_until(start + S, &mut |_, _| {});
    e.stop_sources();
    e.run_until(start + 2 * S, &mut |_, _| {});
}

#[test]
fn a_greedy_load_behind_tbf_sends_exactly_what_its_bucket_allows() {
    let p = line();
    let opts = SimOptions::default();
    let model = ShaperModel::Tbf {
        rate: BitRate(20_000_000),
        bucket: Size(10_000),
    };
    let load = ShapedLoad {
        load: 0,
        model,
        pattern: Pattern::Greedy,
    };
    let mut e = engine(&p, &opts, &[load]).unwrap();
    run(&mut e, opts.start_ns);
    let src = source(&e, &p, "tx");
    // 1000-byte payloads: 1042-byte frames; by the end of the second the bucket
    // has allowed b + r·1s = 10 000 + 2 500 000 bytes: 2408 whole frames
    assert_eq!(src.frame_bytes(), 1042);
    assert_eq!(src.sent, 2408);
    assert_eq!(received(&e, &p), 2408);
}

#[test]
fn a_constant_rate_load_below_its_rate_never_waits() {
    let p = line();
    let opts = SimOptions::default();
    let model = ShaperModel::Lockstep {
        rate: BitRate(40_000_000),
        bucket: Size(5_000 + 1042),
        ts: Duration::from_millis(1),
    };
    let load = ShapedLoad {
        load: 0,
        model,
        pattern: Pattern::Cbr {
            period_ns: 1_000_000,
        },
    };
    let mut e = engine(&p, &opts, &[load]).unwrap();
    run(&mut e, opts.start_ns);
    let src = source(&e, &p, "tx");
    // one 1042-byte frame every ms (8.3 Mbit/s) over the closed second: 1001, none
    // held back
    assert_eq!(src.sent, 1001);
    assert_eq!(src.stats().delayed, 0);
    assert_eq!(received(&e, &p), 1001);
}

#[test]
fn bad_shaped_loads_are_refused() {
    let p = line();
    let opts = SimOptions::default();
    let tbf = ShaperModel::Tbf {
        rate: BitRate(1_000_000),
        bucket: Size(1_000),
    };
    let load = |load| ShapedLoad {
        load,
        model: tbf,
        pattern: Pattern::Greedy,
    };
    assert_eq!(
        engine(&p, &opts, &[load(3)]).err(),
        Some(ShapeError::NoLoad(3))
    );
    let e = engine(&p, &opts, &[load(0)]).err().unwrap();
    assert_eq!(
        e.to_string(),
        "load tx → rx: tbf: the bucket (1000B) is below the largest packet (1042B): such a \
         packet would never conform"
    );
}
