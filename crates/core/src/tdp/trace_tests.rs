use super::*;
use crate::wire::{HopKind, HopRecord, ProbeRepr};

const TF: i64 = 250_000;

/// Three routers, d = 3 each: the edge sends 3 frames after the sender's frame, the
/// next two 3 frames after the one before; one reserved frame in 5.
fn window() -> FlowWindow {
    FlowWindow {
        tf_ns: TF,
        departures: vec![3, 6, 9],
        gap: 4,
        early: 0,
        late_ns: TF / 4,
    }
}

/// A packet of frame 100 that kept its schedule: each router gets it 80 µs into a
/// frame and sends it at the start of its frame; the receiver reads it 90 µs into
/// the last router's frame.
fn on_time() -> Delivery {
    let t0 = 100 * TF;
    let mut p = ProbeRepr {
        flow_id: 1,
        seq: 7,
        frame: 100,
        t0_ns: t0,
        t_wake_ns: t0,
        t_send_ns: t0 + 1_000,
        ..ProbeRepr::default()
    };
    for (i, f) in [103i64, 106, 109].iter().enumerate() {
        let rx = (f - 3) * TF + 80_000;
        p.hops[i] = HopRecord {
            node: 10 + i as u32,
            kind: HopKind::Router,
            rx_kernel_ns: rx,
            rx_app_ns: rx + 2_000,
            tx_app_ns: f * TF + 1_000,
            slipped: false,
        };
    }
    p.hop_count = 3;
    Delivery {
        probe: p,
        kernel_rx_ns: Some(109 * TF + 85_000),
        app_rx_ns: 109 * TF + 90_000,
    }
}

/// Moves router `i`'s send, and every later time, `frames` frames later.
fn delay_from(d: &mut Delivery, i: usize, frames: i64) {
    let by = frames * TF;
    d.probe.hops[i].tx_app_ns += by;
    for h in &mut d.probe.hops[i + 1..3] {
        h.rx_kernel_ns += by;
        h.rx_app_ns += by;
        h.tx_app_ns += by;
    }
    d.kernel_rx_ns = d.kernel_rx_ns.map(|t| t + by);
    d.app_rx_ns += by;
}

#[test]
fn the_window_is_the_last_departure_plus_the_edge_gap_and_a_frame() {
    assert_eq!(window().bounds(), (8 * TF, 14 * TF));
}

#[test]
fn a_packet_that_kept_its_schedule_is_inside() {
    assert_eq!(trace(&window(), &on_time()), None);
    // the edge may hold it up to the gap longer (a source with its own clock)
    let mut d = on_time();
    delay_from(&mut d, 0, 4);
    assert_eq!(trace(&window(), &d), None);
}

#[test]
fn a_slip_is_named_with_its_router_and_frame() {
    let mut d = on_time();
    d.probe.hops[1].rx_app_ns = d.probe.hops[1].rx_kernel_ns + 1_000;
    d.probe.hops[1].slipped = true;
    delay_from(&mut d, 1, 7);
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(o.cause, Cause::Slip);
    assert_eq!((o.hop, o.node, o.frame), (Some(1), Some(11), Some(106)));
    assert_eq!(o.by_ns, 7 * TF + 1_000);
    assert_eq!(o.outside_ns, d.latency_ns() - 14 * TF);
}

#[test]
fn a_router_that_woke_after_its_frame_began_is_a_late_wake_up() {
    let mut d = on_time();
    // got it at 80 µs into frame 103, woke 2.1 ms later (frame 111)
    d.probe.hops[1].rx_app_ns = d.probe.hops[1].rx_kernel_ns + 2_100_000;
    delay_from(&mut d, 1, 6);
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(o.cause, Cause::LateWakeup);
    assert_eq!((o.hop, o.by_ns), (Some(1), 2_100_000));
}

#[test]
fn a_router_on_time_that_sent_in_a_later_frame_had_a_full_queue() {
    let mut d = on_time();
    delay_from(&mut d, 2, 6);
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(o.cause, Cause::QueueFull);
    assert_eq!(
        (o.hop, o.frame, o.by_ns),
        (Some(2), Some(109), 6 * TF + 1_000)
    );
}

#[test]
fn a_packet_handed_over_after_its_frame_was_late_on_the_link() {
    let mut d = on_time();
    // router 1 sent in frame 106 but router 2 got it in frame 110
    d.probe.hops[2].rx_kernel_ns = 110 * TF + 5_000;
    d.probe.hops[2].rx_app_ns = 110 * TF + 6_000;
    delay_from(&mut d, 2, 6);
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(o.cause, Cause::LinkLate);
    assert_eq!(o.hop, Some(2));
    assert_eq!(o.by_ns, 4 * TF + 5_000);
}

#[test]
fn a_late_source_is_blamed_before_the_edge() {
    let mut d = on_time();
    d.probe.t_send_ns = d.probe.t0_ns + 2_500_000;
    d.probe.hops[0].rx_kernel_ns = d.probe.t_send_ns + 80_000;
    d.probe.hops[0].rx_app_ns = d.probe.t_send_ns + 82_000;
    delay_from(&mut d, 0, 10);
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(
        (o.cause, o.hop, o.by_ns),
        (Cause::SourceLate, Some(0), 2_500_000)
    );
}

#[test]
fn a_receiver_that_read_late_is_named_when_every_hop_kept_time() {
    let mut d = on_time();
    d.app_rx_ns += 2_000_000;
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(o.cause, Cause::ReceiverLate);
    assert_eq!((o.hop, o.by_ns), (None, 2_005_000));
}

#[test]
fn a_packet_that_arrived_in_its_last_frame_and_was_read_after_it_is_the_receivers() {
    // a synchronous sender (no gap): the window ends with the last router's frame
    let w = FlowWindow { gap: 0, ..window() };
    let mut d = on_time();
    d.kernel_rx_ns = Some(110 * TF - 5_000);
    d.app_rx_ns = 110 * TF + 20_000;
    let o = trace(&w, &d).expect("outside by 20 µs");
    // read 25 µs after it arrived: less than a late wake-up, but past the frame's end
    assert!(25_000 < w.late_ns);
    assert_eq!(
        (o.cause, o.hop, o.by_ns, o.outside_ns),
        (Cause::ReceiverLate, None, 25_000, 20_000)
    );
}

#[test]
fn records_that_end_early_leave_it_unrecorded_and_unexplained() {
    let mut d = on_time();
    d.probe.hop_count = 2;
    d.app_rx_ns += 2_000_000;
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(o.cause, Cause::Unrecorded);
    assert!(!o.cause.explained());
}

#[test]
fn the_tally_counts_causes_and_keeps_the_worst_first() {
    let w = window();
    let mut t = WindowTally::default();
    t.add(&w, &on_time(), 2);
    for extra in [1_500_000, 3_000_000, 2_000_000] {
        let mut d = on_time();
        d.app_rx_ns += extra;
        t.add(&w, &d, 2);
    }
    let mut d = on_time();
    d.probe.hop_count = 1;
    d.app_rx_ns += 5_000_000;
    t.add(&w, &d, 2);
    assert_eq!((t.inside, t.outside), (1, 4));
    assert_eq!(t.by_cause[5], 3); // receiver late
    assert_eq!(t.unexplained(), 1);
    assert_eq!(t.worst.len(), 2);
    assert_eq!(t.worst[0].cause, Cause::Unrecorded);
    assert!(t.worst[0].outside_ns > t.worst[1].outside_ns);
    assert_eq!(t.inside_share(), Some(0.2));
}

#[test]
fn an_early_packet_is_traced_to_the_router_that_slipped_it() {
    let mut d = on_time();
    // router 0 slipped it in its frame 103; router 1 then forwarded it at once
    // (best effort, frame 103 instead of 106), and router 2 too
    d.probe.hops[0].slipped = true;
    delay_from(&mut d, 1, -3);
    d.probe.hops[1].rx_kernel_ns = 103 * TF + 30_000;
    d.probe.hops[1].rx_app_ns = 103 * TF + 31_000;
    delay_from(&mut d, 2, -3);
    let o = trace(&window(), &d).expect("outside");
    assert!(o.outside_ns < 0, "{o:?}");
    assert_eq!(
        (o.cause, o.hop, o.node, o.frame),
        (Cause::Slip, Some(0), Some(10), Some(103))
    );
}

#[test]
fn an_early_packet_sent_before_its_frame_is_best_effort() {
    let mut d = on_time();
    delay_from(&mut d, 1, -3);
    delay_from(&mut d, 2, -3);
    let o = trace(&window(), &d).expect("outside");
    assert_eq!(
        (o.cause, o.hop, o.frame),
        (Cause::BestEffort, Some(1), Some(106))
    );
    assert_eq!(o.by_ns, 3 * TF - 1_000);
    assert!(o.cause.explained());
}
