//! The line scenario in virtual time: every probe crosses each router exactly `d`
//! frames after the previous one, nothing is lost, and a seed gives one result.

use lockstep_core::frame::FrameClock;
use lockstep_core::tdp::Delivery;
use lockstep_plan::plan::plan;
use lockstep_plan::scenario::{RunMode, Scenario};
use lockstep_sim::{engine, SimOptions};

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
