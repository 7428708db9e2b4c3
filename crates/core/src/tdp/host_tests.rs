//! The sender state machine with injected time.

use std::net::Ipv4Addr;

use super::*;
use crate::tdp::config::{
    BestEffortConfig, FlowConfig, FrameConfig, Mode, PortConfig, Role, RowConfig, SlipAction,
};
use crate::tdp::deps::{EthernetAddress, PortId};
use crate::tdp::schedule::Entry;
use crate::time::{ClockId, Duration, Instant};
use crate::wire::parse_probe;

const TF: i64 = 100_000;
const GUARD: i64 = 10_000;

/// `ns` nanoseconds as an instant of the clock the tests run on (TAI).
fn tai(ns: i64) -> Instant {
    Instant::new(ClockId::Tai, ns)
}

fn flow(id: u32, rows: &[(u32, u32)]) -> FlowConfig {
    FlowConfig {
        id,
        rule: None,
        out_port: PortId(1),
        d: None,
        rows: rows
            .iter()
            .map(|&(slot, packets)| RowConfig {
                slot,
                packets,
                size: 300,
            })
            .collect(),
        police: true,
        dst: None,
    }
}

/// k = 4 frames of 100 µs (10 µs guard); flow 1 sends 2 packets in slot 1, flow 2
/// one in slot 1 and one in slot 3.
fn config() -> NodeConfig {
    NodeConfig {
        name: "tx".into(),
        id: 1,
        role: Role::Sender,
        mode: Mode::Tdp,
        frame: FrameConfig {
            tf: Duration(TF),
            k: 4,
            epoch_ns: 0,
            offset: Duration::ZERO,
            guard: Duration(GUARD),
            lead: 1,
        },
        ports: vec![PortConfig {
            id: PortId(1),
            ifname: "s0".into(),
            mac: EthernetAddress([2, 0, 0, 0, 1, 2]),
            addr: Ipv4Addr::new(10, 0, 1, 2),
            prefix_len: 24,
            rate_bps: 1_000_000_000,
            neighbour_mac: None,
            neighbour_addr: None,
            d: None,
            padding: None,
        }],
        routes: vec![],
        neighbours: vec![],
        flows: vec![flow(1, &[(1, 2)]), flow(2, &[(1, 1), (3, 1)])],
        best_effort: BestEffortConfig::default(),
        padding: false,
        on_slip: SlipAction::BestEffort,
    }
}

fn sender(counts: [Option<u64>; 2], mark: bool) -> Sender {
    let flows = [
        SenderFlow {
            id: 1,
            size: 200,
            count: counts[0],
        },
        SenderFlow {
            id: 2,
            size: 128,
            count: counts[1],
        },
    ];
    Sender::new(&config(), &flows, mark).unwrap()
}

/// What one packet handed out says: (flow, index, seq, frame, t0, t_wake, t_send, dscp).
type Sent = (u32, usize, u64, i64, i64, i64, i64, u8);

/// Every packet of the frame, each handed out one nanosecond after the last, after
/// checking that its payload parses back to the same fields.
fn drain(s: &mut Sender, mut now: i64) -> Vec<Sent> {
    let mut out = Vec::new();
    while let Some(tx) = s.poll_transmit(tai(now)) {
        let p = parse_probe(tx.payload).unwrap();
        assert_eq!(
            (p.flow_id, p.seq, p.frame, p.t0_ns, p.t_wake_ns, p.t_send_ns),
            (
                tx.flow,
                tx.seq,
                tx.frame,
                tx.t0.ns,
                tx.t_wake.ns,
                tx.t_send.ns
            )
        );
        assert_eq!(p.total_len as usize, tx.payload.len());
        assert!(p.hops().is_empty());
        out.push((
            tx.flow,
            tx.index,
            tx.seq,
            tx.frame,
            tx.t0.ns,
            tx.t_wake.ns,
            tx.t_send.ns,
            tx.dscp,
        ));
        now += 1;
    }
    out
}

fn dscp(frame: i64) -> u8 {
    crate::frame::DSCP_TDP_MARK | crate::frame::parity_bits(frame, 4)
}

#[test]
fn sends_each_frame_exactly() {
    let mut s = sender([None, None], true);
    assert_eq!(s.poll_timeout(), None, "nothing before start");
    s.start(tai(0));
    assert_eq!(s.poll_timeout(), Some(tai(TF)));
    s.handle_timeout(tai(TF + 500));
    assert_eq!(
        drain(&mut s, TF + 600),
        vec![
            (1, 0, 0, 1, TF, TF + 500, TF + 600, dscp(1)),
            (1, 0, 1, 1, TF, TF + 500, TF + 601, dscp(1)),
            (2, 1, 0, 1, TF, TF + 500, TF + 602, dscp(1)),
        ]
    );
    assert_eq!(s.poll_timeout(), Some(tai(3 * TF)));
    s.handle_timeout(tai(3 * TF));
    assert_eq!(
        drain(&mut s, 3 * TF + 7),
        vec![(2, 1, 1, 3, 3 * TF, 3 * TF, 3 * TF + 7, dscp(3))]
    );
    // the next cycle
    assert_eq!(s.poll_timeout(), Some(tai(5 * TF)));
    assert_eq!(drain(&mut s, 3 * TF + 9), vec![]);
    let c = s.counters();
    assert_eq!(
        (c.frames, c.late_frames, c.skipped_frames, c.sent),
        (2, 0, 0, 4)
    );
    assert_eq!(s.sent_per_flow().collect::<Vec<_>>(), vec![(1, 2), (2, 2)]);
    assert_eq!(s.wakeup().count(), 2);
    assert_eq!(s.wakeup().summary().max_ns, Some(500));
}

#[test]
fn starting_at_a_frame_start_takes_that_frame() {
    let mut s = sender([None, None], true);
    s.start(tai(3 * TF));
    assert_eq!(s.poll_timeout(), Some(tai(3 * TF)));
    s.start(tai(3 * TF + 1));
    assert_eq!(s.poll_timeout(), Some(tai(5 * TF)));
}

#[test]
fn a_frame_reached_a_whole_frame_late_is_skipped() {
    let mut s = sender([None, None], true);
    s.start(tai(0));
    // frame 1 reached at the start of frame 2: skipped, not sent
    s.handle_timeout(tai(2 * TF));
    assert_eq!(drain(&mut s, 2 * TF), vec![]);
    assert_eq!(s.counters().skipped_frames, 1);
    assert_eq!(s.counters().frames, 0);
    assert_eq!(
        s.wakeup().count(),
        1,
        "a skipped frame's wake-up is recorded"
    );
    // the next frame from where it woke
    assert_eq!(s.poll_timeout(), Some(tai(3 * TF)));
    // just under a frame late, in the guard: sent, counted late
    s.handle_timeout(tai(4 * TF - 1));
    let got = drain(&mut s, 4 * TF - 1);
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].2, got[0].3),
        (0, 3),
        "sequence numbers count packets sent"
    );
    let c = s.counters();
    assert_eq!((c.frames, c.late_frames, c.skipped_frames), (1, 1, 1));
    // at the send deadline itself: not late
    s.handle_timeout(tai(6 * TF - GUARD));
    assert_eq!(drain(&mut s, 6 * TF - GUARD).len(), 3);
    assert_eq!(s.counters().late_frames, 1);
    // waking early does nothing
    let next = s.poll_timeout().unwrap();
    s.handle_timeout(next - Duration(1));
    assert_eq!(s.poll_timeout(), Some(next));
    assert_eq!(s.wakeup().count(), 3);
}

#[test]
fn counts_stop_each_flow_and_the_sender() {
    let mut s = sender([Some(3), Some(1)], true);
    s.start(tai(0));
    s.handle_timeout(tai(TF));
    assert_eq!(drain(&mut s, TF).len(), 3);
    assert!(!s.done());
    // frame 3: only flow 2, which is done: woken, nothing sent
    s.handle_timeout(tai(3 * TF));
    assert_eq!(drain(&mut s, 3 * TF), vec![]);
    assert_eq!(s.next_start(), Some(tai(5 * TF)));
    // frame 5: flow 1's third packet; flow 2 is done
    s.handle_timeout(tai(5 * TF));
    let got = drain(&mut s, 5 * TF);
    assert_eq!(
        got.iter().map(|p| (p.0, p.2)).collect::<Vec<_>>(),
        vec![(1, 2)]
    );
    assert!(s.done());
    assert_eq!(s.poll_timeout(), None);
    assert_eq!(s.next_start(), Some(tai(7 * TF)), "the schedule goes on");
    assert_eq!(s.counters().sent, 4);
}

#[test]
fn the_sender_runs_on_the_clock_it_is_started_with() {
    let mut s = sender([None, None], true);
    let mono = |ns| Instant::new(ClockId::Monotonic, ns);
    s.start(mono(0));
    assert_eq!(s.poll_timeout(), Some(mono(TF)));
    assert_eq!(s.next_start(), Some(mono(TF)));
    s.handle_timeout(mono(TF + 500));
    let tx = s.poll_transmit(mono(TF + 600)).unwrap();
    assert_eq!(
        (tx.t0, tx.t_wake, tx.t_send),
        (mono(TF), mono(TF + 500), mono(TF + 600))
    );
}

#[test]
fn an_unmarked_sender_sends_dscp_zero() {
    let mut s = sender([None, None], false);
    s.start(tai(0));
    s.handle_timeout(tai(TF));
    assert!(drain(&mut s, TF).iter().all(|p| p.7 == 0));
}

#[test]
fn a_retracted_packet_gives_its_sequence_number_to_the_next() {
    let mut s = sender([None, Some(1)], true);
    s.retract(); // nothing handed out yet: nothing happens
    s.start(tai(0));
    s.handle_timeout(tai(TF));
    assert_eq!(
        s.poll_transmit(tai(TF)).map(|t| (t.flow, t.seq)),
        Some((1, 0))
    );
    s.retract();
    s.retract(); // only once
    assert_eq!(
        s.poll_transmit(tai(TF)).map(|t| (t.flow, t.seq)),
        Some((1, 0))
    );
    assert_eq!(
        s.poll_transmit(tai(TF)).map(|t| (t.flow, t.seq)),
        Some((2, 0))
    );
    s.retract();
    assert!(
        !s.done(),
        "a refused packet does not count towards the flow's count"
    );
    assert!(s.poll_transmit(tai(TF)).is_none());
    assert_eq!(s.counters().sent, 1);
    assert_eq!(s.sent_per_flow().collect::<Vec<_>>(), vec![(1, 1), (2, 0)]);
}

fn only_slot(s: &Sender, slot: u32, flow: u32) -> SenderSchedule {
    let clock = *s.schedule().frame_clock();
    SenderSchedule::new(
        clock,
        [(
            slot,
            Entry {
                flow,
                packets: 1,
                size: 300,
            },
        )],
    )
}

#[test]
fn a_new_schedule_applies_from_where_the_sender_is() {
    let mut s = sender([None, None], true);
    s.start(tai(0));
    s.handle_timeout(tai(TF));
    drain(&mut s, TF);
    // taken after frame 1 was sent, later than frame 2's start: frame 2 still comes
    s.set_schedule(only_slot(&s, 2, 1), tai(2 * TF + 10));
    assert_eq!(s.poll_timeout(), Some(tai(2 * TF)));
    // after a skipped frame: from the time it woke
    s.handle_timeout(tai(3 * TF));
    assert_eq!(s.counters().skipped_frames, 1);
    s.set_schedule(only_slot(&s, 0, 2), tai(3 * TF));
    assert_eq!(s.poll_timeout(), Some(tai(4 * TF)));
    // a schedule without frames leaves nothing to wait for; the next one starts
    // from the time it comes
    s.set_schedule(
        SenderSchedule::new(*s.schedule().frame_clock(), []),
        tai(3 * TF),
    );
    assert_eq!(s.poll_timeout(), None);
    s.set_schedule(only_slot(&s, 1, 1), tai(9 * TF + 1));
    assert_eq!(s.poll_timeout(), Some(tai(13 * TF)));
}

#[test]
fn flows_without_rows_are_refused() {
    let flows = [SenderFlow {
        id: 9,
        size: 200,
        count: None,
    }];
    let e = Sender::new(&config(), &flows, true).unwrap_err();
    assert_eq!(e.field, "flows[0]");
    let small = [SenderFlow {
        id: 1,
        size: 10,
        count: None,
    }];
    let e = Sender::new(&config(), &small, true).unwrap_err();
    assert_eq!(e.field, "flows[0].size");
}
