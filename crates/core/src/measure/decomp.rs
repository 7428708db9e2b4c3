//! The receiver's per-flow accounting: statistics of the result document and the per-packet
//! latency decomposition, from the probe packet's own timestamps.
//!
//! A packet meant to leave in the frame starting at `t0` carries `t0`, the sender's
//! wake-up `t_wake` and application send time `t_send`, and one hop record per router
//! it crossed (`rx_kernel`, `rx_app`, `tx_app` at that router). The receiver adds its
//! kernel RX timestamp and its application receive time `app_rx`. Per flow it keeps
//! the distribution of every span between consecutive instants, which telescope to
//! the true end-to-end latency `L = app_rx − t0` (never `L mod TF`: `t0` travels with
//! the packet):
//!
//! ```text
//! L_I        = t_wake − t0                     sender wake-up
//! send path  = t_send − t_wake                 sender, user space part of L_Tx
//! link →h1   = h1.rx_kernel − t_send           sender kernel TX path + wire (delta)
//! h1 residence = h1.tx_app − h1.rx_kernel      router 1: stack, queueing, its frame wait
//! link h1→h2 = h2.rx_kernel − h1.tx_app        router 1 TX path + wire
//! ...
//! link →rx   = kernel_rx − (last tx_app, or t_send)
//! L_Rx       = app_rx − kernel_rx              receive path
//! ```
//!
//! The kernel part of each `L_Tx` is known only where the packet left: the sender and
//! routers write their software TX timestamps to `DIR/<node>-tx.csv` (keyed by flow
//! and sequence number) for a per-packet join; each link span here includes it.
//!
//! Statistics per flow: count, loss, duplicates, reordering (SeqTracker), RFC 3550
//! jitter, inter-arrival times (application and kernel). Memory is bounded: at most
//! [`MAX_FLOWS`](crate::measure::sink::MAX_FLOWS) flows, at most [`MAX_HOP_ENTRIES`] hop positions per flow; the
//! histograms are sized up front so steady-state recording does not allocate.

use std::collections::BTreeMap;

use crate::measure::sink::{Intake, Screened};
use crate::stats::{Histogram, Rfc3550Jitter, SeqReport, SeqTracker, Summary};
use crate::wire::{ProbeRepr, WireError, NOT_FILLED};
use serde::Serialize;

/// (hop position, node) pairs kept per flow; more (a path that keeps changing) are
/// counted in [`RxCounters::hop_overflow`].
pub const MAX_HOP_ENTRIES: usize = 16;

/// Histograms are sized for values up to this before the run.
const PREALLOCATE_UP_TO_NS: i64 = 1_000_000_000;

fn histogram() -> Histogram {
    let mut h = Histogram::new();
    h.record(PREALLOCATE_UP_TO_NS);
    h.reset();
    h
}

/// `later − earlier` when both are filled in.
fn span(later: i64, earlier: i64) -> Option<i64> {
    (later != NOT_FILLED && earlier != NOT_FILLED).then(|| later.saturating_sub(earlier))
}

fn record(h: &mut Histogram, v: Option<i64>) {
    if let Some(v) = v {
        h.record(v);
    }
}

/// Datagrams that were not measured, by reason, and totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RxCounters {
    #[serde(flatten)]
    pub intake: Intake,
    /// Hop records beyond [`MAX_HOP_ENTRIES`] (position, node) pairs of a flow.
    pub hop_overflow: u64,
    /// Datagrams longer than the receive buffer slot (cut, then invalid).
    pub truncated: u64,
}

#[derive(Debug)]
struct HopAcc {
    position: u8,
    node: u32,
    link_in: Histogram,
    residence: Histogram,
    rx_path: Histogram,
}

#[derive(Debug)]
struct FlowAcc {
    seq: SeqTracker,
    jitter: Rfc3550Jitter,
    latency: Histogram,
    inter_arrival: Histogram,
    kernel_inter_arrival: Histogram,
    l_i: Histogram,
    send_path: Histogram,
    hops: Vec<HopAcc>,
    last_link: Histogram,
    l_rx: Histogram,
    last_app_rx: Option<i64>,
    last_kernel_rx: Option<i64>,
}

impl FlowAcc {
    fn new() -> FlowAcc {
        FlowAcc {
            seq: SeqTracker::new(),
            jitter: Rfc3550Jitter::new(),
            latency: histogram(),
            inter_arrival: histogram(),
            kernel_inter_arrival: histogram(),
            l_i: histogram(),
            send_path: histogram(),
            hops: Vec::with_capacity(4),
            last_link: histogram(),
            l_rx: histogram(),
            last_app_rx: None,
            last_kernel_rx: None,
        }
    }
}

/// What [`Accounts::handle`] made of a datagram.
// The probe travels by value: boxing it would allocate for every packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A probe, measured: the packet for the per-packet CSV.
    Probe(ProbeRepr),
    Padding,
    Foreign,
    Invalid(WireError),
    FlowLimit,
}

/// The receiver's accumulator.
#[derive(Debug)]
pub struct Accounts {
    flows: BTreeMap<u32, FlowAcc>,
    counters: RxCounters,
}

impl Default for Accounts {
    fn default() -> Self {
        Self::new()
    }
}

impl Accounts {
    pub fn new() -> Accounts {
        Accounts {
            flows: BTreeMap::new(),
            counters: RxCounters::default(),
        }
    }

    pub fn counters(&self) -> &RxCounters {
        &self.counters
    }

    /// A datagram was cut to fit the receive slot.
    pub fn note_truncated(&mut self) {
        self.counters.truncated += 1;
    }

    /// Accounts for one datagram (its UDP payload), received by the application at
    /// `app_rx` and by the kernel at `kernel_rx` (both on the node's clock).
    pub fn handle(&mut self, app_rx: i64, kernel_rx: Option<i64>, payload: &[u8]) -> Outcome {
        let flows = &self.flows;
        let p = match self
            .counters
            .intake
            .screen(payload, |f| flows.contains_key(&f), flows.len())
        {
            Screened::Probe(p) => p,
            Screened::Padding => return Outcome::Padding,
            Screened::Foreign => return Outcome::Foreign,
            Screened::Invalid(e) => return Outcome::Invalid(e),
            Screened::FlowLimit => return Outcome::FlowLimit,
        };
        let c = &mut self.counters;
        let f = self.flows.entry(p.flow_id).or_insert_with(FlowAcc::new);
        f.seq.record(p.seq);
        if p.t0_ns != NOT_FILLED {
            f.jitter.update(p.t0_ns, app_rx);
        }
        record(&mut f.latency, span(app_rx, p.t0_ns));
        record(
            &mut f.inter_arrival,
            f.last_app_rx.map(|l| app_rx.saturating_sub(l)),
        );
        f.last_app_rx = Some(app_rx);
        if let Some(k) = kernel_rx {
            record(
                &mut f.kernel_inter_arrival,
                f.last_kernel_rx.map(|l| k.saturating_sub(l)),
            );
            f.last_kernel_rx = Some(k);
        }
        record(&mut f.l_i, span(p.t_wake_ns, p.t0_ns));
        record(&mut f.send_path, span(p.t_send_ns, p.t_wake_ns));
        // Walk the path: each hop's arrival is measured from the previous departure.
        let mut prev_tx = p.t_send_ns;
        for (i, h) in p.hops().iter().enumerate() {
            let position = i as u8;
            let idx = match f
                .hops
                .iter()
                .position(|a| a.position == position && a.node == h.node)
            {
                Some(idx) => Some(idx),
                None if f.hops.len() < MAX_HOP_ENTRIES => {
                    f.hops.push(HopAcc {
                        position,
                        node: h.node,
                        link_in: histogram(),
                        residence: histogram(),
                        rx_path: histogram(),
                    });
                    Some(f.hops.len() - 1)
                }
                None => {
                    c.hop_overflow += 1;
                    None
                }
            };
            if let Some(a) = idx.and_then(|i| f.hops.get_mut(i)) {
                record(&mut a.link_in, span(h.rx_kernel_ns, prev_tx));
                record(&mut a.residence, span(h.tx_app_ns, h.rx_kernel_ns));
                record(&mut a.rx_path, span(h.rx_app_ns, h.rx_kernel_ns));
            }
            prev_tx = h.tx_app_ns;
        }
        if let Some(k) = kernel_rx {
            record(&mut f.last_link, span(k, prev_tx));
            f.l_rx.record(app_rx.saturating_sub(k));
        }
        Outcome::Probe(p)
    }

    /// Counts and parses one datagram like [`Accounts::handle`] but accounts for
    /// nothing per flow.
    pub fn screen(&mut self, payload: &[u8]) -> Outcome {
        match self.counters.intake.screen(payload, |_| true, 0) {
            Screened::Probe(p) => Outcome::Probe(p),
            Screened::Padding => Outcome::Padding,
            Screened::Foreign => Outcome::Foreign,
            Screened::Invalid(e) => Outcome::Invalid(e),
            Screened::FlowLimit => Outcome::FlowLimit,
        }
    }

    /// Per-flow results. `names` maps node ids (as strings) to names and `own` is the
    /// receiver's name; both only label the components.
    pub fn report(&self, names: &BTreeMap<String, String>, own: &str) -> Vec<FlowResult> {
        let name_of = |id: u32| {
            names
                .get(&id.to_string())
                .cloned()
                .unwrap_or_else(|| format!("node {id}"))
        };
        self.flows
            .iter()
            .map(|(&flow, f)| {
                let mut hops: Vec<&HopAcc> = f.hops.iter().collect();
                hops.sort_by_key(|h| (h.position, h.node));
                let hop_results: Vec<HopResult> = hops
                    .iter()
                    .map(|h| HopResult {
                        position: h.position,
                        node: h.node,
                        name: name_of(h.node),
                        link_in: h.link_in.summary(),
                        residence: h.residence.summary(),
                        rx_path: h.rx_path.summary(),
                    })
                    .collect();
                let mut components = vec![
                    Component::new("L_I", &f.l_i),
                    Component::new("send path", &f.send_path),
                ];
                let mut prev = "sender".to_string();
                for h in &hop_results {
                    components.push(Component {
                        name: format!("link {prev}→{}", h.name),
                        summary: h.link_in.clone(),
                    });
                    components.push(Component {
                        name: format!("{} residence", h.name),
                        summary: h.residence.clone(),
                    });
                    prev = h.name.clone();
                }
                components.push(Component {
                    name: format!("link {prev}→{own}"),
                    summary: f.last_link.summary(),
                });
                components.push(Component::new("L_Rx", &f.l_rx));
                let seq = f.seq.report();
                FlowResult {
                    flow,
                    received: seq.received,
                    seq,
                    rfc3550_jitter_ns: f.jitter.value_ns(),
                    latency: f.latency.summary(),
                    inter_arrival: f.inter_arrival.summary(),
                    kernel_inter_arrival: f.kernel_inter_arrival.summary(),
                    decomposition: Decomposition {
                        l_i: f.l_i.summary(),
                        send_path: f.send_path.summary(),
                        hops: hop_results,
                        last_link: f.last_link.summary(),
                        l_rx: f.l_rx.summary(),
                    },
                    components,
                }
            })
            .collect()
    }
}

/// A named part of the end-to-end latency (the shape `report::html` uses).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Component {
    pub name: String,
    pub summary: Summary,
}

impl Component {
    fn new(name: &str, h: &Histogram) -> Component {
        Component {
            name: name.to_string(),
            summary: h.summary(),
        }
    }
}

/// One router on a flow's path, as seen in the hop records.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HopResult {
    /// 0 for the first router after the sender.
    pub position: u8,
    pub node: u32,
    pub name: String,
    /// `rx_kernel` here − departure from the previous node (`t_send` or `tx_app`).
    pub link_in: Summary,
    /// `tx_app − rx_kernel`: stack, queueing and the wait for the forwarding frame.
    pub residence: Summary,
    /// `rx_app − rx_kernel`: the router's own receive path.
    pub rx_path: Summary,
}

/// The spans of the module docs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decomposition {
    pub l_i: Summary,
    pub send_path: Summary,
    pub hops: Vec<HopResult>,
    /// Receiver kernel RX − the last departure.
    pub last_link: Summary,
    pub l_rx: Summary,
}

/// One flow at the receiver.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowResult {
    pub flow: u32,
    pub received: u64,
    pub seq: SeqReport,
    pub rfc3550_jitter_ns: f64,
    /// True end-to-end `L = app_rx − t0`.
    pub latency: Summary,
    pub inter_arrival: Summary,
    pub kernel_inter_arrival: Summary,
    pub decomposition: Decomposition,
    /// The decomposition as an ordered list whose parts add up to `L`.
    pub components: Vec<Component>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{HopKind, HopRecord, ProbePacket};

    fn probe(flow: u32, seq: u64, hops: &[HopRecord]) -> Vec<u8> {
        let repr = ProbeRepr {
            flow_id: flow,
            seq,
            frame: 10 + seq as i64,
            t0_ns: 1_000 + 100 * seq as i64,
            t_wake_ns: 1_002 + 100 * seq as i64,
            t_send_ns: 1_005 + 100 * seq as i64,
            total_len: 192,
            ..ProbeRepr::default()
        };
        let mut buf = vec![0u8; 192];
        repr.emit_into(&mut buf).unwrap();
        let mut pkt = ProbePacket::new_checked(&mut buf[..]).unwrap();
        for h in hops {
            pkt.push_hop(h).unwrap();
        }
        buf
    }

    fn hop(node: u32, base: i64) -> HopRecord {
        HopRecord {
            node,
            kind: HopKind::Router,
            rx_kernel_ns: base,
            rx_app_ns: base + 3,
            tx_app_ns: base + 40,
            slipped: false,
        }
    }

    #[test]
    fn components_telescope_to_the_latency() {
        let mut a = Accounts::new();
        // seq 0: t0 1000, wake 1002, send 1005; R7 rx 1010 → tx 1050; R8 rx 1060 → tx 1100
        let bytes = probe(3, 0, &[hop(7, 1010), hop(8, 1060)]);
        let got = a.handle(1_130, Some(1_120), &bytes);
        assert!(matches!(got, Outcome::Probe(ref p) if p.hops().len() == 2));
        let names: BTreeMap<String, String> = [("7".to_string(), "R1".to_string())].into();
        let r = a.report(&names, "rx");
        assert_eq!(r.len(), 1);
        let f = &r[0];
        assert_eq!((f.flow, f.received), (3, 1));
        assert_eq!(f.latency.min_ns, Some(130));
        let parts: Vec<(&str, i64)> = f
            .components
            .iter()
            .map(|c| (c.name.as_str(), c.summary.min_ns.unwrap()))
            .collect();
        assert_eq!(
            parts,
            vec![
                ("L_I", 2),
                ("send path", 3),
                ("link sender→R1", 5),
                ("R1 residence", 40),
                ("link R1→node 8", 10),
                ("node 8 residence", 40),
                ("link node 8→rx", 20),
                ("L_Rx", 10),
            ]
        );
        assert_eq!(parts.iter().map(|(_, v)| v).sum::<i64>(), 130);
        assert_eq!(f.decomposition.hops[0].rx_path.min_ns, Some(3));
    }

    #[test]
    fn flows_loss_and_inter_arrival() {
        let mut a = Accounts::new();
        for seq in [0u64, 1, 3] {
            let app = 2_000 + 100 * seq as i64;
            a.handle(app, None, &probe(1, seq, &[]));
        }
        a.handle(5_000, None, &probe(2, 0, &[]));
        assert_eq!(a.handle(0, None, b"not a probe"), Outcome::Foreign);
        let mut bad = probe(1, 4, &[]);
        bad[20] ^= 1;
        assert_eq!(
            a.handle(0, None, &bad),
            Outcome::Invalid(WireError::BadChecksum)
        );
        let c = a.counters();
        assert_eq!(
            (
                c.intake.datagrams,
                c.intake.probes,
                c.intake.foreign,
                c.intake.invalid.bad_checksum
            ),
            (6, 4, 1, 1)
        );
        let r = a.report(&BTreeMap::new(), "rx");
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].seq.received, r[0].seq.lost), (3, 1));
        assert_eq!(r[0].inter_arrival.count, 2);
        assert_eq!(r[0].inter_arrival.max_ns, Some(200));
        // no kernel timestamps: no L_Rx, no last link
        assert_eq!(r[0].decomposition.l_rx.count, 0);
        assert_eq!(r[0].components.last().unwrap().name, "L_Rx");
        assert_eq!(r[0].components[2].name, "link sender→rx");
        assert_eq!(r[1].flow, 2);
    }
}
