//! The accounting of `lockstep probe rr client`: request/response latency like
//! sockperf ping-pong, with the round trip split by where the time went.
//!
//! The client stamps each request with its application send time `t_send`; the kernel
//! reports the request's software TX timestamp on the error queue (matched by the
//! socket's datagram counter, which equals the request's sequence number because the
//! client sends exactly one datagram per request, starting at 0); the server appends a
//! hop record with its kernel RX timestamp, its application receive time and its
//! application send time; the client notes the kernel RX timestamp and application
//! receive time of the response. Then:
//!
//! - `rtt = client app rx − client app send` (what sockperf reports, halved there);
//! - client send path `= client kernel TX ts − client app send`;
//! - server turnaround `= server tx_app − server rx_kernel`, on the server's clock
//!   alone, so valid across hosts whose clocks disagree;
//! - client receive path `= client app rx − client kernel rx`;
//! - network `= rtt − send path − turnaround − receive path`: the wire both ways plus
//!   the kernel stacks between the timestamps (the client's RX stack below its
//!   timestamp, the server's TX path).
//!
//! The RTT is recorded as soon as the response arrives. The split needs the TX
//! timestamp too, which the client drains from the error queue *after* the response
//! (never between send and receive, to keep the hot path lean); a sample is completed
//! when both are in, or given up on (split without the send path and network) when its
//! slot is reused [`WINDOW`] requests later or at [`RrClientState::finish`].
//!
//! A request not answered within the client's timeout is **lost** ([`RrClientState::on_timeout`]);
//! a response that arrives after that is counted as **late** (not as an RTT sample: the
//! client had given up on it). A second response to an answered request is a
//! **duplicate**. Responses for requests the client does not know (never sent, or older
//! than the window) are **unexpected**. Foreign and malformed datagrams are counted by
//! kind and ignored. Nothing here allocates per packet.

use serde::Serialize;

use crate::measure::sink::InvalidCounts;
use crate::stats::{Histogram, Summary};
use crate::wire::{parse_probe, HopKind, HopRecord, WireError, NOT_FILLED};

/// Requests remembered for late/duplicate responses and TX timestamps. A power of two
/// dividing 2^32, so the socket's 32-bit TX counter maps onto the same slot as the
/// request's sequence number.
pub const WINDOW: usize = 256;

const PREALLOCATE_UP_TO_NS: i64 = 1_000_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum SlotState {
    #[default]
    Empty,
    Outstanding,
    /// Answered; the split is still waiting for the TX timestamp.
    Answered,
    /// Answered and reported.
    Done,
    TimedOut,
}

#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    state: SlotState,
    seq: u64,
    t_send_ns: i64,
    tx_kernel_ns: Option<i64>,
    app_rx_ns: i64,
    kernel_rx_ns: Option<i64>,
    server: Option<HopRecord>,
}

/// One answered request, with its split (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RrSample {
    pub seq: u64,
    /// Client application send time.
    pub t_send_ns: i64,
    /// Client kernel TX timestamp.
    pub tx_kernel_ns: Option<i64>,
    /// Server kernel RX / application RX / application TX (server clock).
    pub server_rx_kernel_ns: Option<i64>,
    pub server_rx_app_ns: Option<i64>,
    pub server_tx_app_ns: Option<i64>,
    /// Client kernel RX timestamp and application receive time.
    pub kernel_rx_ns: Option<i64>,
    pub app_rx_ns: i64,
    pub rtt_ns: i64,
    pub send_path_ns: Option<i64>,
    pub turnaround_ns: Option<i64>,
    pub rx_path_ns: Option<i64>,
    pub network_ns: Option<i64>,
}

/// What [`RrClientState::on_response`] made of a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RrEvent {
    /// The response to an outstanding request: the RTT is recorded. `sample` is the
    /// completed split when the TX timestamp was already in.
    Answered {
        seq: u64,
        rtt_ns: i64,
        sample: Option<RrSample>,
    },
    /// A response to a request that had timed out.
    Late {
        seq: u64,
    },
    /// A second response to an answered request.
    Duplicate {
        seq: u64,
    },
    /// A valid probe that is not a response to a request the client knows.
    Unexpected,
    Foreign,
    Invalid(WireError),
}

/// Counters and distributions of an rr client run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RrReport {
    /// Requests sent.
    pub sent: u64,
    /// Requests answered in time (RTT samples).
    pub answered: u64,
    /// Requests not answered within the timeout.
    pub lost: u64,
    /// Responses that came after their request timed out.
    pub late: u64,
    pub duplicates: u64,
    /// Valid probes that answer no request the client knows.
    pub unexpected: u64,
    pub foreign: u64,
    pub invalid: InvalidCounts,
    /// Requests still waiting for an answer when the run ended (e.g. Ctrl-C).
    pub in_flight_at_end: u64,
    /// TX timestamps matched to a request.
    pub tx_timestamps: u64,
    /// TX timestamps that matched no remembered request.
    pub tx_timestamps_unmatched: u64,
    /// Answered requests whose split lacks the send path (no TX timestamp came).
    pub split_without_tx: u64,
    pub rtt: Summary,
    pub send_path: Summary,
    pub turnaround: Summary,
    pub rx_path: Summary,
    pub network: Summary,
}

/// The rr client's accumulator (see the module docs).
#[derive(Debug, Clone)]
pub struct RrClientState {
    slots: Box<[Slot; WINDOW]>,
    sent: u64,
    answered: u64,
    lost: u64,
    late: u64,
    duplicates: u64,
    unexpected: u64,
    foreign: u64,
    invalid: InvalidCounts,
    tx_timestamps: u64,
    tx_unmatched: u64,
    split_without_tx: u64,
    rtt: Histogram,
    send_path: Histogram,
    turnaround: Histogram,
    rx_path: Histogram,
    network: Histogram,
}

impl Default for RrClientState {
    fn default() -> Self {
        Self::new()
    }
}

fn preallocated() -> Histogram {
    let mut h = Histogram::new();
    h.record(PREALLOCATE_UP_TO_NS);
    h.reset();
    h
}

fn filled(v: i64) -> Option<i64> {
    (v != NOT_FILLED).then_some(v)
}

fn slot_index(seq: u64) -> usize {
    (seq % WINDOW as u64) as usize
}

impl RrClientState {
    pub fn new() -> Self {
        RrClientState {
            slots: Box::new([Slot::default(); WINDOW]),
            sent: 0,
            answered: 0,
            lost: 0,
            late: 0,
            duplicates: 0,
            unexpected: 0,
            foreign: 0,
            invalid: InvalidCounts::default(),
            tx_timestamps: 0,
            tx_unmatched: 0,
            split_without_tx: 0,
            rtt: preallocated(),
            send_path: preallocated(),
            turnaround: preallocated(),
            rx_path: preallocated(),
            network: preallocated(),
        }
    }

    /// Request `seq` left at `t_send_ns` (client clock). Returns the sample of the
    /// request whose slot this one reuses, if it was still waiting for its TX timestamp.
    pub fn on_send(&mut self, seq: u64, t_send_ns: i64) -> Option<RrSample> {
        self.sent += 1;
        let idx = slot_index(seq);
        let old = self.slots[idx];
        let evicted = match old.state {
            SlotState::Answered => Some(self.complete(idx)),
            // Never answered nor timed out: the client moved on without it.
            SlotState::Outstanding => {
                self.lost += 1;
                None
            }
            _ => None,
        };
        self.slots[idx] = Slot {
            state: SlotState::Outstanding,
            seq,
            t_send_ns,
            ..Slot::default()
        };
        evicted
    }

    /// The kernel TX timestamp of datagram `id` (the socket's counter, = request seq
    /// modulo 2^32). Returns the completed sample if the response was already in.
    pub fn on_tx_timestamp(&mut self, id: u32, tx_kernel_ns: i64) -> Option<RrSample> {
        let idx = (id as usize) % WINDOW;
        let slot = &mut self.slots[idx];
        let matches = slot.seq as u32 == id
            && slot.tx_kernel_ns.is_none()
            && matches!(
                slot.state,
                SlotState::Outstanding | SlotState::Answered | SlotState::TimedOut
            );
        if !matches {
            self.tx_unmatched += 1;
            return None;
        }
        slot.tx_kernel_ns = Some(tx_kernel_ns);
        self.tx_timestamps += 1;
        (slot.state == SlotState::Answered).then(|| self.complete(idx))
    }

    /// A datagram arrived at `app_rx_ns` (kernel RX timestamp `kernel_rx_ns`, client
    /// clock).
    pub fn on_response(
        &mut self,
        app_rx_ns: i64,
        kernel_rx_ns: Option<i64>,
        bytes: &[u8],
    ) -> RrEvent {
        let repr = match parse_probe(bytes) {
            Ok(r) => r,
            Err(WireError::Foreign) => {
                self.foreign += 1;
                return RrEvent::Foreign;
            }
            Err(e) => {
                self.invalid.count(&e);
                return RrEvent::Invalid(e);
            }
        };
        let idx = slot_index(repr.seq);
        let slot = self.slots[idx];
        if !repr.is_response() || slot.seq != repr.seq || slot.state == SlotState::Empty {
            self.unexpected += 1;
            return RrEvent::Unexpected;
        }
        let seq = repr.seq;
        match slot.state {
            SlotState::Outstanding => {}
            SlotState::TimedOut => {
                self.late += 1;
                return RrEvent::Late { seq };
            }
            _ => {
                self.duplicates += 1;
                return RrEvent::Duplicate { seq };
            }
        }
        let server = repr
            .hops()
            .iter()
            .rev()
            .find(|h| h.kind == HopKind::RrServer)
            .copied();
        let rtt_ns = app_rx_ns.saturating_sub(slot.t_send_ns);
        self.rtt.record(rtt_ns);
        self.answered += 1;
        let s = &mut self.slots[idx];
        s.state = SlotState::Answered;
        s.app_rx_ns = app_rx_ns;
        s.kernel_rx_ns = kernel_rx_ns;
        s.server = server;
        let sample = s.tx_kernel_ns.is_some().then(|| self.complete(idx));
        RrEvent::Answered {
            seq,
            rtt_ns,
            sample,
        }
    }

    /// The client gave up waiting for request `seq`: it is lost. Does nothing if the
    /// request was answered meanwhile or is not remembered.
    pub fn on_timeout(&mut self, seq: u64) {
        let slot = &mut self.slots[slot_index(seq)];
        if slot.seq == seq && slot.state == SlotState::Outstanding {
            slot.state = SlotState::TimedOut;
            self.lost += 1;
        }
    }

    /// Whether request `seq` is still waiting for its response.
    pub fn is_outstanding(&self, seq: u64) -> bool {
        let slot = &self.slots[slot_index(seq)];
        slot.seq == seq && slot.state == SlotState::Outstanding
    }

    /// End of the run: completes every answered request still waiting for its TX
    /// timestamp (split without the send path), in sequence order.
    pub fn finish(&mut self) -> Vec<RrSample> {
        let mut pending: Vec<(u64, usize)> = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SlotState::Answered)
            .map(|(i, s)| (s.seq, i))
            .collect();
        pending.sort_unstable();
        pending.into_iter().map(|(_, i)| self.complete(i)).collect()
    }

    /// Records the split of the answered request in slot `idx` and marks it done.
    fn complete(&mut self, idx: usize) -> RrSample {
        let s = self.slots[idx];
        self.slots[idx].state = SlotState::Done;
        let rtt_ns = s.app_rx_ns.saturating_sub(s.t_send_ns);
        let send_path_ns = s.tx_kernel_ns.map(|k| k.saturating_sub(s.t_send_ns));
        let server_rx_kernel_ns = s.server.and_then(|h| filled(h.rx_kernel_ns));
        let server_rx_app_ns = s.server.and_then(|h| filled(h.rx_app_ns));
        let server_tx_app_ns = s.server.and_then(|h| filled(h.tx_app_ns));
        let turnaround_ns = match (server_tx_app_ns, server_rx_kernel_ns) {
            (Some(tx), Some(rx)) => Some(tx.saturating_sub(rx)),
            _ => None,
        };
        let rx_path_ns = s.kernel_rx_ns.map(|k| s.app_rx_ns.saturating_sub(k));
        let network_ns = match (send_path_ns, turnaround_ns, rx_path_ns) {
            (Some(a), Some(b), Some(c)) => {
                Some(rtt_ns.saturating_sub(a).saturating_sub(b).saturating_sub(c))
            }
            _ => None,
        };
        if send_path_ns.is_none() {
            self.split_without_tx += 1;
        }
        for (h, v) in [
            (&mut self.send_path, send_path_ns),
            (&mut self.turnaround, turnaround_ns),
            (&mut self.rx_path, rx_path_ns),
            (&mut self.network, network_ns),
        ] {
            if let Some(v) = v {
                h.record(v);
            }
        }
        RrSample {
            seq: s.seq,
            t_send_ns: s.t_send_ns,
            tx_kernel_ns: s.tx_kernel_ns,
            server_rx_kernel_ns,
            server_rx_app_ns,
            server_tx_app_ns,
            kernel_rx_ns: s.kernel_rx_ns,
            app_rx_ns: s.app_rx_ns,
            rtt_ns,
            send_path_ns,
            turnaround_ns,
            rx_path_ns,
            network_ns,
        }
    }

    /// Answered requests whose split still waits for the TX timestamp.
    pub fn awaiting_tx(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.state == SlotState::Answered)
            .count()
    }

    pub fn sent(&self) -> u64 {
        self.sent
    }

    pub fn answered(&self) -> u64 {
        self.answered
    }

    pub fn report(&self) -> RrReport {
        let in_flight = self
            .slots
            .iter()
            .filter(|s| s.state == SlotState::Outstanding)
            .count() as u64;
        RrReport {
            sent: self.sent,
            answered: self.answered,
            lost: self.lost,
            late: self.late,
            duplicates: self.duplicates,
            unexpected: self.unexpected,
            foreign: self.foreign,
            invalid: self.invalid,
            in_flight_at_end: in_flight,
            tx_timestamps: self.tx_timestamps,
            tx_timestamps_unmatched: self.tx_unmatched,
            split_without_tx: self.split_without_tx,
            rtt: self.rtt.summary(),
            send_path: self.send_path.summary(),
            turnaround: self.turnaround.summary(),
            rx_path: self.rx_path.summary(),
            network: self.network.summary(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ProbeRepr, FLAG_RESPONSE, HEADER_LEN, HOP_LEN};

    const LEN: u32 = (HEADER_LEN + HOP_LEN) as u32;

    /// The server's answer to request `seq` with its hop record.
    fn response(seq: u64, t_send: i64, rx_kernel: i64, rx_app: i64, tx_app: i64) -> Vec<u8> {
        let mut repr = ProbeRepr {
            flags: FLAG_RESPONSE,
            seq,
            t_send_ns: t_send,
            total_len: LEN,
            hop_count: 1,
            ..ProbeRepr::default()
        };
        repr.hops[0] = HopRecord {
            node: 9,
            kind: HopKind::RrServer,
            rx_kernel_ns: rx_kernel,
            rx_app_ns: rx_app,
            tx_app_ns: tx_app,
            slipped: false,
        };
        let mut buf = vec![0u8; LEN as usize];
        repr.emit_into(&mut buf).unwrap();
        buf
    }

    #[test]
    fn full_split_tx_timestamp_after_response() {
        let mut c = RrClientState::new();
        assert_eq!(c.on_send(0, 1_000), None);
        assert!(c.is_outstanding(0));
        // Server clock is 1 s ahead: only its own differences are used.
        let resp = response(0, 1_000, 1_000_002_000, 1_000_002_500, 1_000_003_000);
        let ev = c.on_response(10_000, Some(9_000), &resp);
        assert_eq!(
            ev,
            RrEvent::Answered {
                seq: 0,
                rtt_ns: 9_000,
                sample: None
            }
        );
        assert!(!c.is_outstanding(0));
        assert_eq!(c.awaiting_tx(), 1);
        let s = c.on_tx_timestamp(0, 1_800).unwrap();
        assert_eq!(c.awaiting_tx(), 0);
        assert_eq!(
            s,
            RrSample {
                seq: 0,
                t_send_ns: 1_000,
                tx_kernel_ns: Some(1_800),
                server_rx_kernel_ns: Some(1_000_002_000),
                server_rx_app_ns: Some(1_000_002_500),
                server_tx_app_ns: Some(1_000_003_000),
                kernel_rx_ns: Some(9_000),
                app_rx_ns: 10_000,
                rtt_ns: 9_000,
                send_path_ns: Some(800),
                turnaround_ns: Some(1_000),
                rx_path_ns: Some(1_000),
                network_ns: Some(6_200),
            }
        );
        let r = c.report();
        assert_eq!((r.sent, r.answered, r.lost, r.tx_timestamps), (1, 1, 0, 1));
        assert_eq!(r.rtt.min_ns, Some(9_000));
        assert_eq!(r.network.min_ns, Some(6_200));
        assert_eq!(r.split_without_tx, 0);
        assert_eq!(r.in_flight_at_end, 0);
    }

    #[test]
    fn tx_timestamp_before_response_completes_at_once() {
        let mut c = RrClientState::new();
        c.on_send(0, 100);
        assert_eq!(c.on_tx_timestamp(0, 150), None);
        match c.on_response(1_100, Some(1_000), &response(0, 100, 500, 550, 600)) {
            RrEvent::Answered {
                sample: Some(s), ..
            } => {
                assert_eq!(s.send_path_ns, Some(50));
                assert_eq!(s.turnaround_ns, Some(100));
                assert_eq!(s.rx_path_ns, Some(100));
                assert_eq!(s.network_ns, Some(1_000 - 50 - 100 - 100));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timeouts_late_duplicates_and_unexpected() {
        let mut c = RrClientState::new();
        c.on_send(0, 100);
        c.on_timeout(0);
        assert!(!c.is_outstanding(0));
        assert_eq!(
            c.on_response(5_000, None, &response(0, 100, 1, 2, 3)),
            RrEvent::Late { seq: 0 }
        );
        c.on_send(1, 6_000);
        assert!(matches!(
            c.on_response(7_000, None, &response(1, 6_000, 1, 2, 3)),
            RrEvent::Answered {
                seq: 1,
                rtt_ns: 1_000,
                sample: None
            }
        ));
        assert_eq!(
            c.on_response(7_100, None, &response(1, 6_000, 1, 2, 3)),
            RrEvent::Duplicate { seq: 1 }
        );
        // Never sent.
        assert_eq!(
            c.on_response(7_200, None, &response(77, 0, 1, 2, 3)),
            RrEvent::Unexpected
        );
        // A request (no response flag) is not an answer.
        let mut req = response(1, 6_000, 1, 2, 3);
        let mut p = crate::wire::ProbePacket::new_checked(&mut req[..]).unwrap();
        p.set_flags(0);
        p.fill_checksum();
        assert_eq!(c.on_response(7_300, None, &req), RrEvent::Unexpected);
        assert_eq!(c.on_response(7_400, None, b"xyz"), RrEvent::Foreign);
        let mut bad = response(1, 6_000, 1, 2, 3);
        bad[30] ^= 4;
        assert_eq!(
            c.on_response(7_500, None, &bad),
            RrEvent::Invalid(WireError::BadChecksum)
        );
        // Timing out an answered request changes nothing.
        c.on_timeout(1);
        let done = c.finish();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0].seq, 1);
        assert_eq!(done[0].send_path_ns, None);
        assert_eq!(done[0].network_ns, None);
        assert_eq!(done[0].turnaround_ns, Some(2));
        let r = c.report();
        assert_eq!(
            (
                r.sent,
                r.answered,
                r.lost,
                r.late,
                r.duplicates,
                r.unexpected,
                r.foreign
            ),
            (2, 1, 1, 1, 1, 2, 1)
        );
        assert_eq!(r.invalid.bad_checksum, 1);
        assert_eq!(r.split_without_tx, 1);
        assert_eq!(r.rtt.count, 1);
        assert_eq!(r.send_path.count, 0);
        assert_eq!(r.turnaround.count, 1);
    }

    #[test]
    fn tx_timestamps_match_by_counter_and_reused_slots_complete() {
        let mut c = RrClientState::new();
        c.on_send(0, 10);
        c.on_response(100, Some(90), &response(0, 10, 1, 2, 3));
        // Unknown id.
        assert_eq!(c.on_tx_timestamp(5, 20), None);
        // The slot of seq 0 is reused by seq WINDOW: seq 0 completes without TX ts.
        for seq in 1..WINDOW as u64 {
            c.on_send(seq, 1_000 + seq as i64);
            c.on_timeout(seq);
        }
        let evicted = c.on_send(WINDOW as u64, 5_000).unwrap();
        assert_eq!(evicted.seq, 0);
        assert_eq!(evicted.send_path_ns, None);
        // A stale id (request 0's) does not match the new occupant of its slot.
        assert_eq!(c.on_tx_timestamp(0, 20), None);
        // The 32-bit counter of the new occupant matches.
        assert_eq!(c.on_tx_timestamp(WINDOW as u32, 5_010), None);
        let r = c.report();
        assert_eq!(r.tx_timestamps, 1);
        assert_eq!(r.tx_timestamps_unmatched, 2);
        assert_eq!(r.lost, WINDOW as u64 - 1);
        assert_eq!(r.in_flight_at_end, 1);
    }

    #[test]
    fn a_request_left_outstanding_when_its_slot_is_reused_is_lost() {
        let mut c = RrClientState::new();
        c.on_send(3, 0);
        c.on_send(3 + WINDOW as u64, 10);
        assert_eq!(c.report().lost, 1);
    }

    #[test]
    fn response_without_server_hop_still_gives_rtt() {
        let mut c = RrClientState::new();
        c.on_send(0, 0);
        let repr = ProbeRepr {
            flags: FLAG_RESPONSE,
            seq: 0,
            total_len: HEADER_LEN as u32,
            ..ProbeRepr::default()
        };
        let mut buf = vec![0u8; HEADER_LEN];
        repr.emit_into(&mut buf).unwrap();
        assert!(matches!(
            c.on_response(500, Some(400), &buf),
            RrEvent::Answered { rtt_ns: 500, .. }
        ));
        let s = c.on_tx_timestamp(0, 50).unwrap();
        assert_eq!(s.turnaround_ns, None);
        assert_eq!(s.network_ns, None);
        assert_eq!(s.send_path_ns, Some(50));
        assert_eq!(s.rx_path_ns, Some(100));
    }

    proptest::proptest! {
        /// Any mix of events keeps the books balanced and never panics.
        #[test]
        fn books_balance(ops in proptest::collection::vec((0u8..4, 0u64..600), 0..400)) {
            let mut c = RrClientState::new();
            let mut next = 0u64;
            for (op, x) in ops {
                match op {
                    0 => { c.on_send(next, next as i64 * 10); next += 1; }
                    1 => { c.on_response(x as i64 * 10 + 5, Some(x as i64 * 10), &response(x, 0, 1, 2, 3)); }
                    2 => { c.on_tx_timestamp(x as u32, x as i64); }
                    _ => c.on_timeout(x),
                }
            }
            c.finish();
            let r = c.report();
            proptest::prop_assert_eq!(r.sent, next);
            proptest::prop_assert!(r.answered + r.lost + r.in_flight_at_end <= r.sent);
            proptest::prop_assert_eq!(r.rtt.count, r.answered);
        }
    }
}
