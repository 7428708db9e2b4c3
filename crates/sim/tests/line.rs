//! The line scenario in virtual time: every probe crosses each router exactly `d`
//! frames after the previous one, nothing is lost, and a seed gives one result.

use lockstep_core::frame::FrameClock;
use lockstep_core::tdp::{Delivery, NodeCounters, SlipOutcome, SlipReason};
use lockstep_plan::plan::plan;
use lockstep_plan::scenario::{RunMode, Scenario};
use lockstep_sim::{engine, HostModel, Kind, SimOptions};

const LINE: &str = include_str!("../../../scenarios/line.toml");

fn run(
    mode: RunMode,
    seconds: i64,
    opts: &SimOptions,
) -> (Vec<Delivery>, lockstep_sim::EngineStats) {
    let s = Scenario::parse("line.toml", LINE).unwrap();
    let spec = s.runs().into_iter().find(|r| r.mode == mode).unwrap();
    let p = plan(&s, &spec).unwrap();
    let mut e = engine(&p, opts).unwrap();
    let mut got = Vec::new();
    e.run_until(opts.start_ns + seconds * 1_000_000_000, &mut |_, d| {
        got.push(*d)
    });
    (got, e.stats())
}

#[test]
fn tdp_probes_leave_every_hop_d_frames_after_the_last() {
    let opts = SimOptions::default();
    let (got, stats) = run(RunMode::Tdp, 1, &opts);
    assert!(got.len() > 3000, "{} probes, {stats:?}", got.len());
    let clock = FrameClock::new(lockstep_core::Duration::from_micros(250), 8).unwrap();
    for d in &got {
        let hops = d.probe.hops();
        assert_eq!(hops.len(), 2);
        let f1 = clock.frame_of(hops[0].tx_app_ns);
        let f2 = clock.frame_of(hops[1].tx_app_ns);
        assert_eq!(f2 - f1, 2, "seq {}", d.probe.seq);
    }
    let seqs: Vec<u64> = got.iter().map(|d| d.probe.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
}

/// The summary of a run's router events, by router, and the routers' counters.
type Summaries = Vec<(String, lockstep_sim::NodeEventSummary, NodeCounters)>;

fn summaries(opts: &SimOptions, millis: i64) -> Summaries {
    let s = Scenario::parse("line.toml", LINE).unwrap();
    let spec = s
        .runs()
        .into_iter()
        .find(|r| r.mode == RunMode::Tdp)
        .unwrap();
    let p = plan(&s, &spec).unwrap();
    let mut e = engine(&p, opts).unwrap();
    e.run_until(opts.start_ns + millis * 1_000_000, &mut |_, _| {});
    let counters: Vec<NodeCounters> = e
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            Kind::Router(r) => Some(r.counters().clone()),
            Kind::Host(_) => None,
        })
        .collect();
    e.node_events()
        .zip(counters)
        .map(|((name, ev), c)| (name.to_string(), ev.clone(), c))
        .collect()
}

#[test]
fn a_router_that_wakes_late_reports_its_slips_by_reason() {
    // r2 acts 300 us (more than a 250 us frame) after every timer and arrival:
    // its frame queues are flushed a frame late
    let mut opts = SimOptions::default();
    opts.hosts.insert("r2".into(), HostModel::Fixed(300_000));
    let got = summaries(&opts, 200);
    let names: Vec<&str> = got.iter().map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(names, ["r1", "r2"]);
    let (_, r2, c2) = &got[1];
    assert!(r2.slips > 0, "{r2:?}");
    assert_eq!(
        r2.slips,
        c2.ports.iter().map(|p| p.slipped).sum::<u64>(),
        "{r2:?}"
    );
    assert_eq!(r2.slip_reasons.values().sum::<u64>(), r2.slips);
    assert!(
        r2.slip_reasons.contains_key(&SlipReason::MissedFrame),
        "{r2:?}"
    );
    let dropped_slips = r2
        .slip_outcomes
        .get(&SlipOutcome::Dropped)
        .copied()
        .unwrap_or(0);
    let counted_drops: u64 = c2
        .ports
        .iter()
        .map(|p| p.rx_dropped + p.tx_dropped)
        .sum::<u64>()
        - dropped_slips;
    assert_eq!(r2.drops, counted_drops, "{r2:?}");
    // the edge runs on time
    assert_eq!(got[0].1.slips, 0, "{:?}", got[0].1);
    // same seed, same summary
    assert_eq!(summaries(&opts, 200), got);
}
