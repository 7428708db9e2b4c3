//! A run is a pure function of (plan, options): the line scenario, FIFO and TDP,
//! simulated twice with the same `SimOptions` gives the same deliveries (every probe,
//! its hop records and receive times, and the receiving node), the same
//! `EngineStats` and the same router counters, exactly. The options use a measured
//! host model (a wake-up histogram), the one that draws from the seeded generator;
//! another seed must then change the deliveries, so the comparison is not vacuous.
//! The ideal host model (the default) twice as well.

use lockstep_core::tdp::{Delivery, NodeCounters};
use lockstep_plan::plan::plan;
use lockstep_plan::scenario::{RunMode, Scenario};
use lockstep_sim::{engine, EngineStats, HostModel, Kind, Measured, Parts, Sim, SimOptions};

const LINE: &str = include_str!("../../../scenarios/line.toml");

/// Everything a run yields.
#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    deliveries: Vec<(usize, Delivery)>,
    stats: EngineStats,
    routers: Vec<(String, NodeCounters)>,
}

fn run(mode: RunMode, opts: &SimOptions) -> Outcome {
    run_text(LINE, mode, opts, false)
}

/// A run of scenario `text`; `queued`: with every wake-up queued.
fn run_text(text: &str, mode: RunMode, opts: &SimOptions, queued: bool) -> Outcome {
    let mut e = engine(&plan_for(text, mode), opts).unwrap();
    if queued {
        e = e.queue_every_wakeup();
    }
    drive(Sim::Whole(Box::new(e)), opts)
}

/// The plan of `text`'s run in `mode`.
fn plan_for(text: &str, mode: RunMode) -> lockstep_plan::plan::Plan {
    let s = Scenario::parse("scenario.toml", text).unwrap();
    let spec = s.runs().into_iter().find(|r| r.mode == mode).unwrap();
    plan(&s, &spec).unwrap()
}

/// Runs `e` for 1 s of traffic and 1 s to drain.
fn drive(mut e: Sim, opts: &SimOptions) -> Outcome {
    let mut deliveries = Vec::new();
    let end = opts.start_ns + 1_000_000_000;
    e.run_until(end, &mut |node, d| deliveries.push((node, *d)));
    e.stop_sources();
    e.run_until(end + 1_000_000_000, &mut |node, d| {
        deliveries.push((node, *d))
    });
    outcome(deliveries, &e.into_engine())
}

/// What a run left: its deliveries, the engine's counts, every router's counters.
fn outcome(deliveries: Vec<(usize, Delivery)>, e: &lockstep_sim::Engine) -> Outcome {
    let routers = e
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            Kind::Router(r) => Some((n.name.clone(), r.counters().clone())),
            Kind::Host(_) => None,
        })
        .collect();
    Outcome {
        deliveries,
        stats: e.stats(),
        routers,
    }
}

/// Wake-up latencies from 0 to 150 µs (TF is 250 µs): late enough to move packets
/// between frames now and then.
fn measured(seed: u64) -> SimOptions {
    let m = Measured::new(
        "test histogram".into(),
        &[0, 2_000, 5_000, 20_000, 60_000, 150_000],
        &[40, 30, 15, 10, 4, 1],
    )
    .unwrap();
    SimOptions {
        seed,
        host: HostModel::Measured(m),
        ..SimOptions::default()
    }
}

/// `a` and `b` equal, or the first thing that differs.
fn assert_same(a: &Outcome, b: &Outcome, what: &str) {
    assert_eq!(a.stats, b.stats, "{what}");
    assert_eq!(a.routers, b.routers, "{what}");
    assert_eq!(a.deliveries.len(), b.deliveries.len(), "{what}");
    if let Some(i) = (0..a.deliveries.len()).find(|&i| a.deliveries[i] != b.deliveries[i]) {
        panic!(
            "{what}: delivery {i} differs:\n{:?}\n{:?}",
            a.deliveries[i], b.deliveries[i]
        );
    }
    assert!(a == b, "{what}");
}

#[test]
fn the_same_options_twice_give_the_same_run() {
    for mode in [RunMode::Fifo, RunMode::Tdp] {
        let a = run(mode, &measured(7));
        let b = run(mode, &measured(7));
        assert!(a.deliveries.len() > 3000, "{mode:?}: {:?}", a.stats);
        assert_same(&a, &b, &format!("{mode:?}, seed 7 twice"));
        let c = run(mode, &measured(8));
        assert!(
            a.deliveries != c.deliveries,
            "{mode:?}: seeds 7 and 8 gave the same deliveries: the seed is not used"
        );
    }
}

#[test]
fn ideal_hosts_twice_give_the_same_run() {
    let opts = SimOptions {
        seed: 7,
        ..SimOptions::default()
    };
    for mode in [RunMode::Fifo, RunMode::Tdp] {
        let a = run(mode, &opts);
        let b = run(mode, &opts);
        assert!(a.deliveries.len() > 3000, "{mode:?}: {:?}", a.stats);
        assert_same(&a, &b, &format!("{mode:?}, ideal hosts, seed 7 twice"));
    }
}

/// Quiet routers take a packet at once and leave out the wake-up when it would
/// only find nothing to send, and a timer asked for twice is queued once: the run
/// is the same as with every wake-up queued, but for the count of events handled.
#[test]
fn taking_packets_at_once_changes_nothing_but_the_event_count() {
    const MESH4: &str = include_str!("../../../scenarios/mesh4-482.toml");
    const FLOOD: &str = include_str!("../../../scenarios/faults/flood.toml");
    const RESTART: &str = include_str!("../../../scenarios/faults/router-restart.toml");
    let ideal = SimOptions::default();
    let mut compared = Vec::new();
    for (name, text) in [
        ("line", LINE),
        ("mesh4-482", MESH4),
        ("flood", FLOOD),
        ("restart", RESTART),
    ] {
        let modes: Vec<RunMode> = Scenario::parse(name, text)
            .unwrap()
            .runs()
            .iter()
            .map(|r| r.mode)
            .collect();
        for mode in modes {
            compared.push(format!("{name} {mode:?}"));
            let mut fast = run_text(text, mode, &ideal, false);
            let queued = run_text(text, mode, &ideal, true);
            if mode == RunMode::Tdp {
                assert!(
                    fast.stats.events < queued.stats.events,
                    "{name}: {:?}",
                    fast.stats
                );
            }
            fast.stats.events = queued.stats.events;
            fast.stats.peak_events = queued.stats.peak_events;
            assert_same(&fast, &queued, &format!("{name} {mode:?}"));
        }
    }
    assert_eq!(compared.len(), 6, "{compared:?}");
}

/// A run of scenario `text` with the network cut into `parts` parts.
fn run_parts(text: &str, mode: RunMode, opts: &SimOptions, parts: usize) -> Outcome {
    let nodes = lockstep_sim::nodes(&plan_for(text, mode), opts).unwrap();
    let Ok(e) = Parts::new(nodes, opts.start_ns, parts) else {
        panic!("{parts} parts refused");
    };
    // (no more parts than routers: line has two)
    assert!(e.len() >= 2 && e.len() <= parts, "{} parts", e.len());
    drive(Sim::Parts(e), opts)
}

/// Each receiver's deliveries in its order, receivers in their order (how two
/// receivers' deliveries interleave is the one thing parts may change).
fn by_receiver(mut o: Outcome) -> Outcome {
    o.deliveries.sort_by_key(|(node, _)| *node);
    o
}

/// The network cut into parts on threads of their own runs exactly as it does
/// whole: every delivery, every router's counters, every count but the most
/// events waiting at once. With the seeded host model (late wake-ups that move
/// packets between frames) and with ideal hosts, FIFO and TDP.
#[test]
fn a_network_run_in_parts_runs_as_it_does_whole() {
    const MESH4: &str = include_str!("../../../scenarios/mesh4-482.toml");
    let ideal = SimOptions::default();
    let seeded = measured(3);
    for (name, text) in [("line", LINE), ("mesh4-482", MESH4)] {
        for mode in [RunMode::Fifo, RunMode::Tdp] {
            for (host, opts) in [("ideal", &ideal), ("measured", &seeded)] {
                let whole = by_receiver(run_text(text, mode, opts, false));
                assert!(whole.deliveries.len() > 1000, "{name}: {:?}", whole.stats);
                // (line has two routers: two parts at most)
                let cuts: &[usize] = if name == "line" { &[2] } else { &[2, 3] };
                for &parts in cuts {
                    let mut cut = by_receiver(run_parts(text, mode, opts, parts));
                    cut.stats.peak_events = whole.stats.peak_events;
                    assert_same(
                        &whole,
                        &cut,
                        &format!("{name} {mode:?} {host}, {parts} parts"),
                    );
                }
            }
        }
    }
}

/// How many parts a run gets: what was asked, or with `UpTo` one per 128 routers at
/// most; faults keep a network whole, and say so only when parts were asked for.
#[test]
fn parts_as_asked_or_as_the_network_is_large() {
    use lockstep_sim::{sim, NotCut, Threads};
    const FLOOD: &str = include_str!("../../../scenarios/faults/flood.toml");
    let plan_of = |text: &str| plan_for(text, RunMode::Tdp);
    let with = |threads| SimOptions {
        threads,
        ..SimOptions::default()
    };
    let parts = |r: &(Sim, Option<NotCut>)| (r.0.parts(), r.1);
    let line = plan_of(LINE);
    let got = sim(&line, &with(Threads::Exactly(2))).unwrap();
    assert_eq!(parts(&got), (2, None));
    // two routers: far fewer than 128 a part
    let got = sim(&line, &with(Threads::UpTo(8))).unwrap();
    assert_eq!(parts(&got), (1, None));
    let flood = plan_of(FLOOD);
    let got = sim(&flood, &with(Threads::Exactly(2))).unwrap();
    assert_eq!(parts(&got), (1, Some(NotCut::Faults)));
    let shared = SimOptions {
        cpus: Some(2),
        ..with(Threads::Exactly(2))
    };
    assert_eq!(
        parts(&sim(&line, &shared).unwrap()),
        (1, Some(NotCut::SharedCpus))
    );
}
