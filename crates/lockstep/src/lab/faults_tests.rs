use super::*;
use lockstep_core::wire::probe::ProbeRepr;
use lockstep_core::Duration;

const MS: i64 = 1_000_000;

/// TF 1 ms; the window of a flow leaving the edge 2 frames after the sender: a
/// latency of 2 to 3 ms is in time.
fn window() -> FlowWindow {
    FlowWindow {
        tf_ns: MS,
        departures: vec![1, 2],
        gap: 0,
        early: 0,
        late_ns: 0,
    }
}

fn flow(id: u32, name: &str, path: &[&str]) -> FlowFacts {
    FlowFacts {
        id,
        name: name.into(),
        path: path.iter().map(|s| s.to_string()).collect(),
        window: Some(window()),
    }
}

/// Flow `id`'s packet `seq`, sent at `seq` ms, delivered after `latency_ms`.
fn got(id: u32, seq: u64, latency_ns: i64) -> Delivery {
    let t0 = seq as i64 * MS;
    Delivery {
        probe: ProbeRepr {
            flow_id: id,
            seq,
            t0_ns: t0,
            ..ProbeRepr::default()
        },
        kernel_rx_ns: None,
        app_rx_ns: t0 + latency_ns,
    }
}

fn run() -> RunFacts {
    RunFacts {
        start_ns: 0,
        end_ns: 200 * MS,
        cycle_ns: 10 * MS,
        guard_ns: 5_000,
    }
}

fn link_down(at_ms: i64, for_ms: i64) -> Fault {
    Fault {
        kind: FaultKind::LinkDown {
            ends: ["r1".into(), "r2".into()],
        },
        at: Duration(at_ms * MS),
        down: Duration(for_ms * MS),
    }
}

fn check_with(lost: impl Fn(u64) -> bool, late: impl Fn(u64) -> bool) -> FaultCheck {
    let mut c = FaultCheck::new(vec![
        flow(1, "a", &["tx", "r1", "r2", "rx"]),
        flow(2, "b", &["tx2", "r2", "rx"]),
    ]);
    for seq in 0..200 {
        if !lost(seq) {
            let l = if late(seq) { 9 * MS } else { 2 * MS + 500 };
            c.add(&got(1, seq, l));
        }
        c.add(&got(2, seq, 2 * MS + 100));
    }
    c
}

fn sent() -> BTreeMap<u32, u64> {
    BTreeMap::from([(1, 200), (2, 200)])
}

#[test]
fn an_outage_that_costs_only_its_own_packets_passes_and_says_when_it_was_whole() {
    // down from 50 to 60 ms: packets 48..=60 lost (the ones on their way), 61 late
    let c = check_with(|s| (48..=60).contains(&s), |s| s == 61);
    let v = c.judge(&[link_down(50, 10)], &run(), &sent(), &BTreeMap::new());
    assert_eq!(v.len(), 1);
    let v = &v[0];
    assert!(v.pass, "{v:?}");
    assert_eq!(v.flows_hit, vec!["a".to_string()]);
    assert_eq!((v.lost, v.late), (13, 1));
    // the last bad packet (61) was sent 1 ms after the outage ended
    assert_eq!(v.recovered_after_ns, Some(MS));
    assert_eq!(
        v.detail,
        "whole again 1ms after the outage (two cycles: 20ms)"
    );
}

#[test]
fn bad_packets_long_after_the_outage_fail() {
    let c = check_with(|s| s == 50 || s == 150, |_| false);
    let v = &c.judge(&[link_down(50, 10)], &run(), &sent(), &BTreeMap::new())[0];
    assert!(!v.pass);
    assert_eq!(
        v.detail,
        "flow a: 1 lost and 0 late packets sent more than two cycles after it ended"
    );
}

#[test]
fn late_packets_out_of_the_outages_reach_are_the_hosts() {
    let c = check_with(|s| (48..=60).contains(&s), |s| s == 150);
    let v = &c.judge(&[link_down(50, 10)], &run(), &sent(), &BTreeMap::new())[0];
    assert!(v.pass, "{v:?}");
    assert_eq!((v.lost, v.late, v.late_unrelated), (13, 1, 1));
    assert_eq!(
        v.detail,
        "whole again 1ms after the outage (two cycles: 20ms); 1 late packets out of the outage's reach (the host's)"
    );
}

#[test]
fn bad_packets_before_the_outage_could_reach_them_fail() {
    let c = check_with(|s| s == 10, |_| false);
    let v = &c.judge(&[link_down(50, 10)], &run(), &sent(), &BTreeMap::new())[0];
    assert!(!v.pass);
    assert!(
        v.detail.contains("before the outage could reach them"),
        "{}",
        v.detail
    );
}

#[test]
fn a_flow_that_does_not_cross_the_link_must_lose_nothing() {
    let mut c = FaultCheck::new(vec![flow(2, "b", &["tx2", "r2", "rx"])]);
    for seq in (0..100).filter(|s| *s != 55) {
        c.add(&got(2, seq, 2 * MS + 100));
    }
    let sent = BTreeMap::from([(2, 100)]);
    let v = &c.judge(&[link_down(50, 10)], &run(), &sent, &BTreeMap::new())[0];
    assert!(!v.pass);
    assert!(v.flows_hit.is_empty());
    assert_eq!(
        v.detail,
        "flow b: 1 lost and 0 late packets does not cross it"
    );
}

#[test]
fn losses_at_the_end_mean_the_flow_never_came_back() {
    let c = check_with(|s| s >= 50, |_| false);
    let v = &c.judge(&[link_down(50, 10)], &run(), &sent(), &BTreeMap::new())[0];
    assert!(!v.pass);
    assert_eq!(v.lost, 150);
    assert!(v.detail.contains("never came back"), "{}", v.detail);
    assert_eq!(
        v.recovered_after_ns, None,
        "a flow that never came back has no recovery time"
    );
}

fn offset(ns: i64) -> Fault {
    Fault {
        kind: FaultKind::ClockOffset {
            node: "r2".into(),
            offset: Duration(ns),
        },
        at: Duration::ZERO,
        down: Duration::ZERO,
    }
}

#[test]
fn a_clock_offset_within_the_guard_may_cost_nothing() {
    let clean = check_with(|_| false, |_| false);
    let v = &clean
        .clone()
        .judge(&[offset(-5_000)], &run(), &sent(), &BTreeMap::new())[0];
    assert!(v.pass, "{v:?}");
    assert_eq!(v.detail, "within the guard: no slip, nothing lost or late");
    let slips = BTreeMap::from([("r2".to_string(), 1)]);
    let v = &clean
        .clone()
        .judge(&[offset(4_000)], &run(), &sent(), &slips)[0];
    assert!(!v.pass);
    assert_eq!(v.detail, "within the guard, yet 1 slips, 0 lost, 0 late");
}

#[test]
fn beyond_the_guard_only_slipped_packets_may_be_lost() {
    let c = check_with(|s| s == 3 || s == 4, |_| false);
    let two = BTreeMap::from([("r2".to_string(), 2)]);
    let v = &c.clone().judge(&[offset(50_000)], &run(), &sent(), &two)[0];
    assert!(v.pass, "{v:?}");
    let one = BTreeMap::from([("r2".to_string(), 1)]);
    let v = &c.judge(&[offset(50_000)], &run(), &sent(), &one)[0];
    assert!(!v.pass);
    assert_eq!(v.detail, "beyond the guard: 2 lost but only 1 slips");
}

#[test]
fn a_flow_that_delivered_nothing_lost_all_it_sent() {
    let c = FaultCheck::new(vec![flow(1, "a", &["tx", "r1", "r2", "rx"])]);
    let sent = BTreeMap::from([(1, 7)]);
    let v = &c.judge(&[link_down(50, 10)], &run(), &sent, &BTreeMap::new())[0];
    assert!(!v.pass);
    assert_eq!(v.lost, 7);
}
