//! The accounting of `lockstep probe sink`: what a receiver of probe packets computes
//! from each datagram and the two receive timestamps the Linux layer hands it.
//!
//! Per packet the sink knows the sender's timestamps carried in the probe header
//! (`t0`, `t_wake`, `t_send`, all on the sender's clock), the kernel RX timestamp and
//! the application receive time (both on the sink's clock). From them it reports:
//!
//! - the inter-arrival time `ΔT` between consecutive packets of a flow, from the
//!   application receive times and from the kernel RX timestamps (toussaint2018's
//!   measure of receive jitter);
//! - the end-to-end one-way latency `L = app_rx − t0` (the latency decomposition): the true `L`, never
//!   reduced modulo a frame, because the packet carries its own `t0`;
//! - its decomposition where the fields exist: `L_I = t_wake − t0` (sender wake-up),
//!   send path `t_send − t_wake` (the sender's user-space part of `L_Tx`; the kernel
//!   part is only known at the sender, from its TX timestamps), wire and stacks
//!   `kernel_rx − t_send` (= kernel part of `L_Tx` + `delta`), and the receive path
//!   `L_Rx = app_rx − kernel_rx`;
//! - RFC 3550 jitter per flow (transit `app_rx − t0`: the nominal send time, as RTP uses
//!   the sampling instant, so sender wake-up jitter counts too);
//! - loss, duplicates, reordering and runs of misses per flow ([`SeqTracker`]).
//!
//! One-way latencies compare two hosts' clocks: they are only meaningful when sender
//! and sink read the same clock (one host) or clocks kept in sync (PTP/NTP). The
//! inter-arrival and receive-path figures use the sink's clock alone.
//!
//! Datagrams that are not lockstep probes (bad magic) are counted as *foreign*;
//! probes that fail to parse (truncated, corrupted, unknown version, ...) are counted
//! by error kind. Neither is fatal and neither touches the statistics. A timestamp
//! field the sender left at 0 ([`NOT_FILLED`]) leaves out the figures that need it.
//!
//! The number of distinct flows tracked is bounded ([`MAX_FLOWS`]) so a stream of
//! packets with random flow ids cannot exhaust memory; packets of flows beyond the
//! bound are counted and ignored.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::stats::{Histogram, Rfc3550Jitter, SeqEvent, SeqReport, SeqTracker, Summary};
use crate::wire::{parse_probe, WireError, NOT_FILLED};

/// At most this many distinct flows are tracked (see the module docs).
pub const MAX_FLOWS: usize = 1024;

/// Values the histograms are sized for up front, so that recording does not allocate
/// during a run unless a value is larger than this.
const PREALLOCATE_UP_TO_NS: i64 = 1_000_000_000;

/// What the sink made of one probe packet: the per-packet row of `--samples`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SinkSample {
    pub flow: u32,
    pub seq: u64,
    pub frame: i64,
    /// Sender timestamps as carried (0 = not filled).
    pub t0_ns: i64,
    pub t_wake_ns: i64,
    pub t_send_ns: i64,
    /// Kernel RX timestamp on the sink's clock, if the kernel gave one.
    pub kernel_rx_ns: Option<i64>,
    /// Application receive time.
    pub app_rx_ns: i64,
    /// `app_rx` minus the previous packet's `app_rx` in the same flow (`None` for a
    /// flow's first packet).
    pub delta_t_ns: Option<i64>,
    /// The same from kernel RX timestamps.
    pub kernel_delta_t_ns: Option<i64>,
    /// `app_rx − t0`: the end-to-end latency `L`.
    pub one_way_ns: Option<i64>,
    /// `app_rx − kernel_rx`: `L_Rx`.
    pub rx_path_ns: Option<i64>,
    /// How the sequence number fitted the flow.
    pub seq_event: SeqEvent,
}

/// What [`SinkState::handle_packet`] did with a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handled {
    /// A probe packet, accounted for.
    Probe(SinkSample),
    /// A TDP padding packet: counted, not measured.
    Padding,
    /// Not a lockstep probe: counted and ignored.
    Foreign,
    /// A probe that failed to parse: counted by kind and ignored.
    Invalid(WireError),
    /// A probe of a flow beyond [`MAX_FLOWS`]: counted and ignored.
    FlowLimit,
}

/// Probes that failed to parse, by [`WireError`] kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct InvalidCounts {
    pub truncated: u64,
    pub unsupported_version: u64,
    pub bad_header_len: u64,
    pub too_many_hops: u64,
    pub bad_total_len: u64,
    pub bad_checksum: u64,
    pub unknown_flags: u64,
    pub unknown_hop_kind: u64,
    /// Errors parsing never produces (kept so every kind has a home).
    pub other: u64,
}

impl InvalidCounts {
    /// Count one parse error under its kind.
    pub fn count(&mut self, e: &WireError) {
        let slot = match e {
            WireError::Truncated { .. } => &mut self.truncated,
            WireError::UnsupportedVersion(_) => &mut self.unsupported_version,
            WireError::BadHeaderLen(_) => &mut self.bad_header_len,
            WireError::TooManyHops(_) => &mut self.too_many_hops,
            WireError::BadTotalLen { .. } => &mut self.bad_total_len,
            WireError::BadChecksum => &mut self.bad_checksum,
            WireError::UnknownFlags(_) => &mut self.unknown_flags,
            WireError::UnknownHopKind { .. } => &mut self.unknown_hop_kind,
            _ => &mut self.other,
        };
        *slot += 1;
    }

    pub fn total(&self) -> u64 {
        self.truncated
            + self.unsupported_version
            + self.bad_header_len
            + self.too_many_hops
            + self.bad_total_len
            + self.bad_checksum
            + self.unknown_flags
            + self.unknown_hop_kind
            + self.other
    }
}

/// What every receiver of probes counts before it measures anything: the datagrams
/// handed in and why those that are not measured are not (the sink and the TDP
/// receiver's decomposition share it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Intake {
    pub datagrams: u64,
    pub bytes: u64,
    /// Probe packets measured.
    pub probes: u64,
    /// Probes flagged as padding.
    pub padding: u64,
    /// Not lockstep probes.
    pub foreign: u64,
    /// Probes that failed to parse, by kind.
    pub invalid: InvalidCounts,
    /// Probes of flows beyond [`MAX_FLOWS`].
    pub flow_limit: u64,
}

/// What [`Intake::screen`] let through, or why not.
// The probe travels by value: boxing it would allocate for every packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Screened {
    /// A probe to measure (counted in `probes`).
    Probe(crate::wire::ProbeRepr),
    Padding,
    Foreign,
    Invalid(WireError),
    FlowLimit,
}

impl Intake {
    /// Counts one datagram (its UDP payload) and parses it. `tracked(flow)` says
    /// whether the flow is already tracked and `flows` how many are: a probe of a new
    /// flow beyond [`MAX_FLOWS`] is turned away.
    pub fn screen(
        &mut self,
        payload: &[u8],
        tracked: impl FnOnce(u32) -> bool,
        flows: usize,
    ) -> Screened {
        self.datagrams += 1;
        self.bytes += payload.len() as u64;
        let repr = match parse_probe(payload) {
            Ok(repr) => repr,
            Err(WireError::Foreign) => {
                self.foreign += 1;
                return Screened::Foreign;
            }
            Err(e) => {
                self.invalid.count(&e);
                return Screened::Invalid(e);
            }
        };
        if repr.is_padding() {
            self.padding += 1;
            return Screened::Padding;
        }
        if flows >= MAX_FLOWS && !tracked(repr.flow_id) {
            self.flow_limit += 1;
            return Screened::FlowLimit;
        }
        self.probes += 1;
        Screened::Probe(repr)
    }
}

#[derive(Debug, Clone, Default)]
struct FlowState {
    seq: SeqTracker,
    jitter: Rfc3550Jitter,
    last_app_rx: Option<i64>,
    last_kernel_rx: Option<i64>,
}

/// The sink's accumulator (see the module docs).
#[derive(Debug, Clone)]
pub struct SinkState {
    flows: BTreeMap<u32, FlowState>,
    intake: Intake,
    first_app_rx: Option<i64>,
    last_app_rx: Option<i64>,
    delta_t: Histogram,
    kernel_delta_t: Histogram,
    one_way: Histogram,
    l_i: Histogram,
    send_path: Histogram,
    wire_stack: Histogram,
    rx_path: Histogram,
}

impl Default for SinkState {
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

/// `a − b` when both timestamps are filled.
fn span(later: i64, earlier: i64) -> Option<i64> {
    (later != NOT_FILLED && earlier != NOT_FILLED).then(|| later.saturating_sub(earlier))
}

impl SinkState {
    pub fn new() -> Self {
        SinkState {
            flows: BTreeMap::new(),
            intake: Intake::default(),
            first_app_rx: None,
            last_app_rx: None,
            delta_t: preallocated(),
            kernel_delta_t: preallocated(),
            one_way: preallocated(),
            l_i: preallocated(),
            send_path: preallocated(),
            wire_stack: preallocated(),
            rx_path: preallocated(),
        }
    }

    /// Account for one received datagram: `bytes` is its UDP payload, `app_rx_ns`
    /// the application receive time and `kernel_rx_ns` the kernel RX timestamp, both
    /// on the sink's clock. Never fails: what is not a valid probe is counted.
    pub fn handle_packet(
        &mut self,
        app_rx_ns: i64,
        kernel_rx_ns: Option<i64>,
        bytes: &[u8],
    ) -> Handled {
        let flows = &self.flows;
        let repr = match self
            .intake
            .screen(bytes, |f| flows.contains_key(&f), flows.len())
        {
            Screened::Probe(repr) => repr,
            Screened::Padding => return Handled::Padding,
            Screened::Foreign => return Handled::Foreign,
            Screened::Invalid(e) => return Handled::Invalid(e),
            Screened::FlowLimit => return Handled::FlowLimit,
        };
        let flow = self.flows.entry(repr.flow_id).or_default();
        self.first_app_rx.get_or_insert(app_rx_ns);
        self.last_app_rx = Some(app_rx_ns);

        let seq_event = flow.seq.record(repr.seq);
        let delta_t_ns = flow.last_app_rx.map(|last| app_rx_ns.saturating_sub(last));
        let kernel_delta_t_ns = match (kernel_rx_ns, flow.last_kernel_rx) {
            (Some(now), Some(last)) => Some(now.saturating_sub(last)),
            _ => None,
        };
        flow.last_app_rx = Some(app_rx_ns);
        if kernel_rx_ns.is_some() {
            flow.last_kernel_rx = kernel_rx_ns;
        }
        if repr.t0_ns != NOT_FILLED {
            flow.jitter.update(repr.t0_ns, app_rx_ns);
        }

        let one_way_ns = span(app_rx_ns, repr.t0_ns);
        let rx_path_ns = kernel_rx_ns.map(|k| app_rx_ns.saturating_sub(k));
        if let Some(v) = delta_t_ns {
            self.delta_t.record(v);
        }
        if let Some(v) = kernel_delta_t_ns {
            self.kernel_delta_t.record(v);
        }
        if let Some(v) = one_way_ns {
            self.one_way.record(v);
        }
        if let Some(v) = span(repr.t_wake_ns, repr.t0_ns) {
            self.l_i.record(v);
        }
        if let Some(v) = span(repr.t_send_ns, repr.t_wake_ns) {
            self.send_path.record(v);
        }
        if let Some(v) = kernel_rx_ns.and_then(|k| span(k, repr.t_send_ns)) {
            self.wire_stack.record(v);
        }
        if let Some(v) = rx_path_ns {
            self.rx_path.record(v);
        }
        Handled::Probe(SinkSample {
            flow: repr.flow_id,
            seq: repr.seq,
            frame: repr.frame,
            t0_ns: repr.t0_ns,
            t_wake_ns: repr.t_wake_ns,
            t_send_ns: repr.t_send_ns,
            kernel_rx_ns,
            app_rx_ns,
            delta_t_ns,
            kernel_delta_t_ns,
            one_way_ns,
            rx_path_ns,
            seq_event,
        })
    }

    /// Probe packets accounted for (not padding, foreign or invalid).
    pub fn probes(&self) -> u64 {
        self.intake.probes
    }

    /// Every datagram handed in.
    pub fn datagrams(&self) -> u64 {
        self.intake.datagrams
    }

    /// The summary of everything seen so far.
    pub fn report(&self) -> SinkReport {
        let flows: Vec<FlowReport> = self
            .flows
            .iter()
            .map(|(&flow, st)| FlowReport {
                flow,
                seq: st.seq.report(),
                rfc3550_jitter_ns: st.jitter.value_ns(),
            })
            .collect();
        let mut totals = SeqTotals::default();
        for f in &flows {
            totals.add(&f.seq);
        }
        let span_ns = match (self.first_app_rx, self.last_app_rx) {
            (Some(a), Some(b)) => Some(b.saturating_sub(a)),
            _ => None,
        };
        let rate_pps = match span_ns {
            Some(s) if s > 0 && self.intake.probes >= 2 => {
                Some((self.intake.probes - 1) as f64 * 1e9 / s as f64)
            }
            _ => None,
        };
        SinkReport {
            datagrams: self.intake.datagrams,
            bytes: self.intake.bytes,
            probes: self.intake.probes,
            padding: self.intake.padding,
            foreign: self.intake.foreign,
            invalid: self.intake.invalid,
            invalid_total: self.intake.invalid.total(),
            flow_limit_dropped: self.intake.flow_limit,
            totals,
            flows,
            receive_span_ns: span_ns,
            receive_rate_pps: rate_pps,
            delta_t: self.delta_t.summary(),
            kernel_delta_t: self.kernel_delta_t.summary(),
            one_way: self.one_way.summary(),
            l_i: self.l_i.summary(),
            send_path: self.send_path.summary(),
            wire_stack: self.wire_stack.summary(),
            rx_path: self.rx_path.summary(),
        }
    }
}

/// Sequence accounting summed over every flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SeqTotals {
    pub received: u64,
    pub unique: u64,
    pub duplicates: u64,
    pub reordered: u64,
    pub lost: u64,
    pub too_old: u64,
    pub loss_runs: u64,
    pub longest_loss_run: u64,
}

impl SeqTotals {
    fn add(&mut self, r: &SeqReport) {
        self.received += r.received;
        self.unique += r.unique;
        self.duplicates += r.duplicates;
        self.reordered += r.reordered;
        self.lost += r.lost;
        self.too_old += r.too_old;
        self.loss_runs += r.loss_runs;
        self.longest_loss_run = self.longest_loss_run.max(r.longest_loss_run);
    }
}

/// One flow's accounting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlowReport {
    pub flow: u32,
    pub seq: SeqReport,
    /// RFC 3550 inter-arrival jitter estimate (transit `app_rx − t0`).
    pub rfc3550_jitter_ns: f64,
}

/// What the sink reports (the result document's shapes).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SinkReport {
    /// Every datagram received.
    pub datagrams: u64,
    pub bytes: u64,
    /// Probe packets measured.
    pub probes: u64,
    pub padding: u64,
    /// Datagrams that are not lockstep probes.
    pub foreign: u64,
    /// Probes that failed to parse, by kind.
    pub invalid: InvalidCounts,
    pub invalid_total: u64,
    /// Probes of flows beyond [`MAX_FLOWS`].
    pub flow_limit_dropped: u64,
    /// Loss, duplicates and reordering summed over the flows.
    pub totals: SeqTotals,
    pub flows: Vec<FlowReport>,
    /// From the first to the last probe's application receive time.
    pub receive_span_ns: Option<i64>,
    pub receive_rate_pps: Option<f64>,
    /// Inter-arrival time, application receive times.
    pub delta_t: Summary,
    /// Inter-arrival time, kernel RX timestamps.
    pub kernel_delta_t: Summary,
    /// `L = app_rx − t0`.
    pub one_way: Summary,
    /// `L_I = t_wake − t0` (sender).
    pub l_i: Summary,
    /// `t_send − t_wake` (sender, user space).
    pub send_path: Summary,
    /// `kernel_rx − t_send`: sender kernel TX path + wire + receiver stack up to the
    /// RX timestamp.
    pub wire_stack: Summary,
    /// `L_Rx = app_rx − kernel_rx`.
    pub rx_path: Summary,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{ProbeRepr, FLAG_PADDING, HEADER_LEN};

    fn probe(flow: u32, seq: u64, t0: i64, t_wake: i64, t_send: i64) -> Vec<u8> {
        let repr = ProbeRepr {
            flow_id: flow,
            seq,
            frame: seq as i64,
            t0_ns: t0,
            t_wake_ns: t_wake,
            t_send_ns: t_send,
            total_len: 80,
            ..ProbeRepr::default()
        };
        let mut buf = vec![0u8; 80];
        repr.emit_into(&mut buf).unwrap();
        buf
    }

    fn sample(h: Handled) -> SinkSample {
        match h {
            Handled::Probe(s) => s,
            other => panic!("expected a probe, got {other:?}"),
        }
    }

    #[test]
    fn one_packet_every_field() {
        let mut s = SinkState::new();
        let bytes = probe(7, 0, 1_000, 1_100, 1_150);
        let got = sample(s.handle_packet(2_000, Some(1_900), &bytes));
        assert_eq!(
            got,
            SinkSample {
                flow: 7,
                seq: 0,
                frame: 0,
                t0_ns: 1_000,
                t_wake_ns: 1_100,
                t_send_ns: 1_150,
                kernel_rx_ns: Some(1_900),
                app_rx_ns: 2_000,
                delta_t_ns: None,
                kernel_delta_t_ns: None,
                one_way_ns: Some(1_000),
                rx_path_ns: Some(100),
                seq_event: SeqEvent::First,
            }
        );
        let r = s.report();
        assert_eq!(r.probes, 1);
        assert_eq!(r.datagrams, 1);
        assert_eq!(r.bytes, 80);
        assert_eq!(r.one_way.min_ns, Some(1_000));
        assert_eq!(r.l_i.min_ns, Some(100));
        assert_eq!(r.send_path.min_ns, Some(50));
        assert_eq!(r.wire_stack.min_ns, Some(750));
        assert_eq!(r.rx_path.min_ns, Some(100));
        assert_eq!(r.delta_t.count, 0);
        assert_eq!(r.kernel_delta_t.count, 0);
        assert_eq!(r.receive_rate_pps, None);
        assert_eq!(r.flows.len(), 1);
        assert_eq!(r.flows[0].flow, 7);
        assert_eq!(r.totals.received, 1);
    }

    #[test]
    fn inter_arrival_latency_and_jitter() {
        let mut s = SinkState::new();
        // Period 1000; transit (app − t0) = 500, 520, 490.
        let arrivals = [
            (0u64, 10_000i64, 10_500i64),
            (1, 11_000, 11_520),
            (2, 12_000, 12_490),
        ];
        let mut deltas = Vec::new();
        for (seq, t0, app) in arrivals {
            let b = probe(1, seq, t0, t0 + 10, t0 + 20);
            let got = sample(s.handle_packet(app, Some(app - 40), &b));
            deltas.push((got.delta_t_ns, got.kernel_delta_t_ns, got.one_way_ns));
        }
        assert_eq!(
            deltas,
            vec![
                (None, None, Some(500)),
                (Some(1_020), Some(1_020), Some(520)),
                (Some(970), Some(970), Some(490)),
            ]
        );
        let r = s.report();
        assert_eq!(r.delta_t.count, 2);
        assert_eq!(r.delta_t.min_ns, Some(970));
        assert_eq!(r.delta_t.max_ns, Some(1_020));
        assert_eq!(r.one_way.count, 3);
        assert_eq!(r.one_way.mean_ns, Some(1_510.0 / 3.0));
        // J: |D| = 20 -> 1.25; |D| = 30 -> 1.25 + (30 − 1.25)/16.
        assert_eq!(r.flows[0].rfc3550_jitter_ns, 1.25 + 28.75 / 16.0);
        // 3 packets, 2 intervals over 1990 ns.
        assert_eq!(r.receive_span_ns, Some(1_990));
        assert_eq!(r.receive_rate_pps, Some(2.0 * 1e9 / 1_990.0));
    }

    #[test]
    fn loss_duplicates_and_reordering_per_flow() {
        let mut s = SinkState::new();
        let mut t = 1_000;
        for (flow, seq) in [
            (1, 0),
            (2, 0),
            (1, 1),
            (1, 3),
            (2, 1),
            (1, 2),
            (1, 3),
            (2, 5),
        ] {
            t += 100;
            s.handle_packet(t, None, &probe(flow, seq, 500, 600, 700));
        }
        let r = s.report();
        assert_eq!(r.flows.len(), 2);
        let f1 = &r.flows[0].seq;
        assert_eq!(
            (f1.received, f1.duplicates, f1.reordered, f1.lost),
            (5, 1, 1, 0)
        );
        let f2 = &r.flows[1].seq;
        assert_eq!((f2.received, f2.lost, f2.longest_loss_run), (3, 3, 3));
        assert_eq!(r.totals.received, 8);
        assert_eq!(r.totals.lost, 3);
        assert_eq!(r.totals.duplicates, 1);
        assert_eq!(r.totals.reordered, 1);
        // No kernel timestamps: no kernel figures.
        assert_eq!(r.kernel_delta_t.count, 0);
        assert_eq!(r.rx_path.count, 0);
        assert_eq!(r.wire_stack.count, 0);
        // ΔT is per flow: flow 1 arrivals at 1100, 1300, 1400, 1600, 1700.
        assert_eq!(r.delta_t.count, 6);
        assert_eq!(r.delta_t.max_ns, Some(300));
    }

    #[test]
    fn foreign_truncated_and_corrupt_are_counted_not_measured() {
        let mut s = SinkState::new();
        assert_eq!(s.handle_packet(1, None, b"hello world"), Handled::Foreign);
        // An empty datagram could be the start of a probe: truncated, not foreign.
        assert!(matches!(
            s.handle_packet(2, None, b""),
            Handled::Invalid(WireError::Truncated { .. })
        ));
        let good = probe(1, 0, 10, 20, 30);
        assert!(matches!(
            s.handle_packet(3, None, &good[..40]),
            Handled::Invalid(WireError::Truncated { .. })
        ));
        assert!(matches!(
            s.handle_packet(4, None, &good[..HEADER_LEN]),
            Handled::Invalid(WireError::Truncated { .. })
        ));
        let mut bad = good.clone();
        bad[20] ^= 0x01;
        assert_eq!(
            s.handle_packet(5, None, &bad),
            Handled::Invalid(WireError::BadChecksum)
        );
        let mut v2 = good.clone();
        v2[4] = 2;
        assert_eq!(
            s.handle_packet(6, None, &v2),
            Handled::Invalid(WireError::UnsupportedVersion(2))
        );
        let r = s.report();
        assert_eq!(r.datagrams, 6);
        assert_eq!(r.foreign, 1);
        assert_eq!(r.invalid.truncated, 3);
        assert_eq!(r.invalid.bad_checksum, 1);
        assert_eq!(r.invalid.unsupported_version, 1);
        assert_eq!(r.invalid_total, 5);
        assert_eq!(r.probes, 0);
        assert!(r.flows.is_empty());
        assert_eq!(r.totals, SeqTotals::default());
        // The sink still measures afterwards.
        assert!(matches!(s.handle_packet(7, None, &good), Handled::Probe(_)));
        assert_eq!(s.probes(), 1);
    }

    #[test]
    fn unfilled_timestamps_leave_out_what_needs_them() {
        let mut s = SinkState::new();
        let got = sample(s.handle_packet(5_000, Some(4_000), &probe(1, 0, 0, 0, 0)));
        assert_eq!(got.one_way_ns, None);
        assert_eq!(got.rx_path_ns, Some(1_000));
        let r = s.report();
        assert_eq!(r.one_way.count, 0);
        assert_eq!(r.l_i.count, 0);
        assert_eq!(r.send_path.count, 0);
        assert_eq!(r.wire_stack.count, 0);
        assert_eq!(r.rx_path.count, 1);
        assert_eq!(r.flows[0].rfc3550_jitter_ns, 0.0);
    }

    #[test]
    fn padding_is_counted_apart() {
        let mut s = SinkState::new();
        let repr = ProbeRepr {
            flags: FLAG_PADDING,
            total_len: 64,
            ..ProbeRepr::default()
        };
        let mut buf = vec![0u8; 64];
        repr.emit_into(&mut buf).unwrap();
        assert_eq!(s.handle_packet(1, None, &buf), Handled::Padding);
        let r = s.report();
        assert_eq!((r.padding, r.probes, r.datagrams), (1, 0, 1));
    }

    #[test]
    fn flow_table_is_bounded() {
        let mut s = SinkState::new();
        for flow in 0..MAX_FLOWS as u32 {
            assert!(matches!(
                s.handle_packet(1, None, &probe(flow, 0, 1, 1, 1)),
                Handled::Probe(_)
            ));
        }
        assert_eq!(
            s.handle_packet(1, None, &probe(MAX_FLOWS as u32, 0, 1, 1, 1)),
            Handled::FlowLimit
        );
        // Known flows still count.
        assert!(matches!(
            s.handle_packet(1, None, &probe(3, 1, 1, 1, 1)),
            Handled::Probe(_)
        ));
        let r = s.report();
        assert_eq!(r.flow_limit_dropped, 1);
        assert_eq!(r.flows.len(), MAX_FLOWS);
    }

    proptest::proptest! {
        /// Arbitrary bytes never panic and are always accounted for exactly once.
        #[test]
        fn arbitrary_datagrams_are_accounted(
            data in proptest::collection::vec(proptest::collection::vec(0u8..=255, 0..200), 0..50)
        ) {
            let mut s = SinkState::new();
            for (i, d) in data.iter().enumerate() {
                s.handle_packet(i as i64, Some(i as i64), d);
            }
            let r = s.report();
            proptest::prop_assert_eq!(r.datagrams, data.len() as u64);
            proptest::prop_assert_eq!(
                r.probes + r.padding + r.foreign + r.invalid_total + r.flow_limit_dropped,
                r.datagrams
            );
        }
    }
}
