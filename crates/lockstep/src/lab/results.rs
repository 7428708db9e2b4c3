//! From the files the nodes of one run wrote to the report of that run: per flow the
//! true end-to-end latency `L`, inter-arrival times, the latency decomposition (SPEC
//! §3, hop by hop), sent/received/lost and frame slips; per router its counters.
//!
//! Inputs, in the run's directory (written by `lockstep node --output DIR`):
//! - `<receiver>-packets.csv`: one row per probe received (`flow, seq, frame, t0,
//!   t_wake, t_send, kernel_rx, app_rx, latency, h1_node, h1_rx_kernel, h1_rx_app,
//!   h1_tx_app, …`);
//! - `<sender>-tx.csv` (`flow, seq, …, tx_kernel`) and `<router>-tx.csv` (`flow, seq,
//!   …, tx_app, tx_kernel`): software TX timestamps, joined by (flow, seq) so each
//!   span uses the kernel's own departure time where there is one;
//! - `<node>.json`: each node's counters (routers: per-flow slips), the sender's
//!   per-flow `sent`, wake-up latency.
//!
//! Columns are found by name, so an added column changes nothing; a missing file
//! makes the figures that need it absent, never an error.
//!
//! The decomposition telescopes: `L_I + L_Tx + link + residence + … + L_Rx = L` for
//! every packet whose timestamps are all there.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use lockstep_core::stats::{Histogram, Summary};
use lockstep_core::tdp::Role;
use lockstep_core::tdp::{Delivery, FlowWindow, NodeCounters, PortCounters, WindowTally};
use lockstep_core::wire::NOT_FILLED;
use serde_json::Value;

use super::plan::{FlowPlan, NodePlan, Plan};
use super::scenario::RunSpec;
use crate::report::html::{Component, FlowReport, HopReport, RunReport};
pub use crate::report::samples::IntRows;
use crate::report::window::{flow_window, WindowReport, WORST_KEPT};

/// Most points of an inter-arrival series in the report.
pub const SERIES_MAX: usize = 4000;

/// Most TX timestamps the lab joins (per run); beyond that a long run's per-hop
/// split uses the application's send times (a few µs of kernel TX path move from
/// "link" to "residence") and memory stays bounded.
pub const TX_JOIN_MAX: usize = 2_000_000;

fn cell(row: &[Option<i64>], i: Option<usize>) -> Option<i64> {
    i.and_then(|i| row.get(i).copied().flatten())
}

/// A timestamp that is filled in.
fn filled(v: Option<i64>) -> Option<i64> {
    v.filter(|&x| x != NOT_FILLED)
}

/// A node's TX file (`flow,seq,…,tx_kernel`): `(flow, seq) → tx_kernel` into `out`
/// while it holds fewer than `cap` entries, and the rows per flow (what a sender
/// sent). Returns whether every row fitted.
pub fn read_tx(
    text: impl std::io::Read,
    cap: usize,
    out: &mut HashMap<(u32, u64), i64>,
    rows: &mut BTreeMap<u32, u64>,
) -> bool {
    let Some((cols, mut file)) = IntRows::open(text) else {
        return true;
    };
    let (f, s, t) = (cols.get("flow"), cols.get("seq"), cols.get("tx_kernel"));
    let mut row = Vec::new();
    let mut complete = true;
    while file.next_row(&mut row) {
        let Some(flow) = cell(&row, f) else { continue };
        *rows.entry(flow as u32).or_insert(0) += 1;
        if let (Some(seq), Some(tx)) = (cell(&row, s), filled(cell(&row, t))) {
            if out.len() < cap {
                out.insert((flow as u32, seq as u64), tx);
            } else {
                complete = false;
            }
        }
    }
    complete
}

/// A point of a series: (time since the first, value).
type Point = (i64, i64);

/// Points of an inter-arrival series kept per time bucket: the lowest and the
/// highest, so spikes survive. Only buckets that got a point are held (in time
/// order), so a flow with few packets costs little however long the run.
#[derive(Clone, Debug)]
struct Series {
    width: i64,
    first: Option<i64>,
    /// Buckets (index, lowest, highest), by index.
    buckets: Vec<(usize, Point, Point)>,
}

impl Series {
    /// `span_ns`: how long the series may run (the run's length); at most
    /// [`SERIES_MAX`] points come out.
    fn new(span_ns: i64) -> Series {
        let n = SERIES_MAX / 2;
        Series {
            width: (span_ns / n as i64).max(1),
            first: None,
            buckets: Vec::new(),
        }
    }

    fn push(&mut self, t: i64, v: i64) {
        let first = *self.first.get_or_insert(t);
        let x = t - first;
        let i = ((x / self.width).max(0) as usize).min(SERIES_MAX / 2 - 1);
        let p = (x, v);
        // points come in time order: the bucket is the last one or a new last one
        let at = match self.buckets.last() {
            Some(&(j, _, _)) if j == i => self.buckets.len() - 1,
            Some(&(j, _, _)) if j > i => match self.buckets.binary_search_by_key(&i, |b| b.0) {
                Ok(at) => at,
                Err(at) => {
                    self.buckets.insert(at, (i, p, p));
                    return;
                }
            },
            _ => {
                self.buckets.push((i, p, p));
                return;
            }
        };
        let (_, lo, hi) = &mut self.buckets[at];
        if v < lo.1 {
            *lo = p;
        }
        if v > hi.1 {
            *hi = p;
        }
    }

    fn points(&self) -> Vec<Point> {
        let mut out = Vec::new();
        for (_, lo, hi) in &self.buckets {
            let (a, b) = if lo.0 <= hi.0 { (*lo, *hi) } else { (*hi, *lo) };
            out.push(a);
            if b != a {
                out.push(b);
            }
        }
        out
    }
}

/// What the lab knows about one flow to measure it.
#[derive(Clone, Debug)]
pub struct FlowInput<'a> {
    pub id: u32,
    pub name: &'a str,
    /// Node names along the path (sender first).
    pub path: &'a [String],
    pub sent: Option<u64>,
    pub slips: u64,
    /// Router ids the hop records should name, in order.
    pub expect_hops: Vec<u32>,
    /// TDP: the latency window the schedule promises (packets outside it are traced).
    pub window: Option<FlowWindow>,
}

/// The per-packet measurements of one flow.
#[derive(Clone, Debug)]
pub struct FlowMeasure {
    pub latency: Histogram,
    pub inter_arrival: Histogram,
    pub series: Vec<(i64, i64)>,
    /// In path order.
    pub components: Vec<(String, Histogram)>,
    pub received: u64,
    pub duplicates: u64,
    /// Packets with `L > TF`.
    pub over_tf: u64,
    /// Hop record nodes seen (the path the packets took), first packet's.
    pub hop_nodes: Vec<u32>,
    /// Packets whose hop records did not name the planned routers in order.
    pub off_path: u64,
    /// TDP: packets inside and outside the flow's window, the outliers traced.
    pub window: WindowTally,
}

impl FlowMeasure {
    /// Records `v` in component `name` (added, in order, when first seen).
    fn component(&mut self, name: &str, v: i64) -> usize {
        match self.components.iter().position(|(n, _)| n == name) {
            Some(i) => {
                self.components[i].1.record(v);
                i
            }
            None => {
                let mut h = Histogram::new();
                h.record(v);
                self.components.push((name.to_string(), h));
                self.components.len() - 1
            }
        }
    }
}

/// A component of the decomposition by what it spans, not by its name: a span
/// kind and the node ids at its ends (`None`: the path's sender or receiver).
type SpanKey = (u8, Option<u32>, Option<u32>);
const SPAN_LI: u8 = 0;
const SPAN_LTX: u8 = 1;
const SPAN_LINK: u8 = 2;
const SPAN_RESIDENCE: u8 = 3;
const SPAN_LRX: u8 = 4;

/// One flow while its packets stream by.
struct Acc<'a> {
    input: &'a FlowInput<'a>,
    m: FlowMeasure,
    /// Components already named: span → index in `m.components`, in the order
    /// they were first seen (a packet's spans mostly come in this order).
    spans: Vec<(SpanKey, usize)>,
    /// Where in `spans` the next span of the packet being decomposed is looked
    /// for first.
    cursor: usize,
    /// Sequence numbers seen (one bit each).
    seen: Vec<u64>,
    last_rx: Option<i64>,
    series: Series,
}

/// Sequence numbers beyond this are not de-duplicated (a sender never gets there).
const SEQ_BITMAP_MAX: u64 = 1 << 32;

impl Acc<'_> {
    /// Marks `seq` seen; false if it was already.
    fn first_time(&mut self, seq: u64) -> bool {
        if seq >= SEQ_BITMAP_MAX {
            return true;
        }
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if w >= self.seen.len() {
            self.seen.resize(w + 1, 0);
        }
        let had = self.seen[w] & (1 << b) != 0;
        self.seen[w] |= 1 << b;
        !had
    }
}

/// TX timestamps joined to the packets: the sender's by (flow, seq), each router's
/// by its name.
#[derive(Clone, Debug, Default)]
pub struct TxJoin {
    pub sender: HashMap<(u32, u64), i64>,
    pub routers: HashMap<String, HashMap<(u32, u64), i64>>,
}

/// Measures the flows of one receiver packet by packet: the lab feeds it the rows
/// of the receiver's packet file, the simulator the receiver's deliveries as they
/// happen. `ids` names node ids (hop records carry ids); `span_ns` is the run's
/// length (for the series).
pub struct FlowsMeter<'a> {
    accs: Vec<Acc<'a>>,
    by_id: rustc_hash::FxHashMap<u32, usize>,
    tf_ns: i64,
    ids: &'a HashMap<u32, String>,
    tx: &'a TxJoin,
}

impl<'a> FlowsMeter<'a> {
    pub fn new(
        flows: &'a [FlowInput<'a>],
        tf_ns: i64,
        span_ns: i64,
        ids: &'a HashMap<u32, String>,
        tx: &'a TxJoin,
    ) -> FlowsMeter<'a> {
        let accs = flows
            .iter()
            .map(|f| Acc {
                input: f,
                m: FlowMeasure {
                    latency: Histogram::new(),
                    inter_arrival: Histogram::new(),
                    series: Vec::new(),
                    components: Vec::new(),
                    received: 0,
                    duplicates: 0,
                    over_tf: 0,
                    hop_nodes: Vec::new(),
                    off_path: 0,
                    window: WindowTally::default(),
                },
                spans: Vec::new(),
                cursor: 0,
                seen: Vec::new(),
                last_rx: None,
                series: Series::new(span_ns),
            })
            .collect();
        let by_id = flows.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
        FlowsMeter {
            accs,
            by_id,
            tf_ns,
            ids,
            tx,
        }
    }

    /// One packet a receiver took (another flow's is ignored).
    pub fn add(&mut self, d: &Delivery) {
        let p = &d.probe;
        let Some(&ai) = self.by_id.get(&p.flow_id) else {
            return;
        };
        let a = &mut self.accs[ai];
        if !a.first_time(p.seq) {
            a.m.duplicates += 1;
            return;
        }
        a.m.received += 1;
        let t0 = filled(Some(p.t0_ns));
        let app = Some(d.app_rx_ns);
        if let (Some(t0), Some(app)) = (t0, app) {
            let l = app - t0;
            a.m.latency.record(l);
            if l > self.tf_ns {
                a.m.over_tf += 1;
            }
            if let Some(w) = &a.input.window {
                a.m.window.add(w, d, WORST_KEPT);
            }
        }
        if let Some(app) = app {
            if let Some(prev) = a.last_rx {
                a.m.inter_arrival.record(app - prev);
                a.series.push(app, app - prev);
            } else {
                a.series.first = Some(app);
            }
            a.last_rx = Some(app);
        }
        let hops = p.hops();
        if a.m.received == 1 {
            a.m.hop_nodes = hops.iter().map(|h| h.node).collect();
        }
        let expect = &a.input.expect_hops;
        let shown = hops.len().min(expect.len());
        // a packet records at most MAX_HOPS routers (the packet file fewer): a
        // shorter record of the planned path is that path
        if hops.len() > expect.len() || hops[..shown].iter().zip(expect).any(|(h, e)| h.node != *e)
        {
            a.m.off_path += 1;
        }
        decompose(a, d, self.ids, self.tx);
    }

    pub fn finish(self) -> Vec<FlowMeasure> {
        self.accs
            .into_iter()
            .map(|a| {
                let mut m = a.m;
                m.series = a.series.points();
                m
            })
            .collect()
    }
}

impl Acc<'_> {
    /// Records `v` in the component spanning `key`, named by `name` when first seen.
    /// The packet's spans usually follow those of the packet before: the one at
    /// the cursor is tried first, so a packet costs one comparison per span.
    fn span(&mut self, key: SpanKey, v: i64, name: impl FnOnce() -> String) {
        let at = match self.spans.get(self.cursor) {
            Some((k, _)) if *k == key => Some(self.cursor),
            _ => self.spans.iter().position(|(k, _)| *k == key),
        };
        if let Some(at) = at {
            self.cursor = at + 1;
            let i = self.spans[at].1;
            self.m.components[i].1.record(v);
            return;
        }
        let i = self.m.component(&name(), v);
        self.spans.push((key, i));
        self.cursor = self.spans.len();
    }
}

/// The latency decomposition of one packet, span by span.
fn decompose(a: &mut Acc<'_>, d: &Delivery, ids: &HashMap<u32, String>, tx: &TxJoin) {
    let p = &d.probe;
    a.cursor = 0;
    let key = (a.input.id, p.seq);
    let t0 = filled(Some(p.t0_ns));
    let t_wake = filled(Some(p.t_wake_ns));
    if let (Some(t0), Some(w)) = (t0, t_wake) {
        a.span((SPAN_LI, None, None), w - t0, || "L_I".into());
    }
    let mut depart = tx.sender.get(&key).copied().or(filled(Some(p.t_send_ns)));
    if let (Some(w), Some(d)) = (t_wake, depart) {
        a.span((SPAN_LTX, None, None), d - w, || "L_Tx".into());
    }
    let input = a.input;
    let name_of = |id: Option<u32>| match id {
        None => input.path.first().cloned().unwrap_or_default(),
        Some(id) => ids
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("node {id}")),
    };
    let mut prev: Option<u32> = None;
    for h in p.hops() {
        let node = Some(h.node);
        let arrive = filled(Some(h.rx_kernel_ns)).or(filled(Some(h.rx_app_ns)));
        if let (Some(d), Some(ar)) = (depart, arrive) {
            a.span((SPAN_LINK, prev, node), ar - d, || {
                format!("link {}→{}", name_of(prev), name_of(node))
            });
        }
        let timed = if tx.routers.is_empty() {
            None
        } else {
            tx.routers
                .get(&name_of(node))
                .and_then(|t| t.get(&key).copied())
        };
        let leave = timed.or(filled(Some(h.tx_app_ns)));
        if let (Some(ar), Some(l)) = (arrive, leave) {
            a.span((SPAN_RESIDENCE, node, None), l - ar, || {
                format!("{} residence", name_of(node))
            });
        }
        depart = leave;
        prev = node;
    }
    // a path longer than the hop records: the rest is one span
    let k_rx = d.kernel_rx_ns.and_then(|k| filled(Some(k)));
    if let (Some(dep), Some(k)) = (depart, k_rx) {
        let receiver = input.path.last().map(String::as_str).unwrap_or("");
        a.span((SPAN_LINK, prev, None), k - dep, || {
            format!("link {}→{receiver}", name_of(prev))
        });
    }
    if let Some(k) = k_rx {
        a.span((SPAN_LRX, None, None), d.app_rx_ns - k, || "L_Rx".into());
    }
}

/// Measures every flow of one receiver from its packet CSV in one pass.
pub fn measure_flows<'a>(
    packets: impl BufRead,
    flows: &'a [FlowInput<'a>],
    tf_ns: i64,
    span_ns: i64,
    ids: &'a HashMap<u32, String>,
    tx: &'a TxJoin,
) -> Vec<FlowMeasure> {
    let mut meter = FlowsMeter::new(flows, tf_ns, span_ns, ids, tx);
    for d in crate::report::packets::read(packets) {
        meter.add(&d);
    }
    meter.finish()
}

impl FlowMeasure {
    pub fn report(&self, flow: &FlowInput<'_>, ids: &HashMap<u32, String>) -> FlowReport {
        let sent = flow.sent.unwrap_or(self.received);
        FlowReport {
            name: flow.name.to_string(),
            latency: self.latency.summary(),
            inter_arrival: self.inter_arrival.summary(),
            inter_arrival_series: self.series.clone(),
            decomposition: self
                .components
                .iter()
                .map(|(n, h)| Component {
                    name: n.clone(),
                    summary: h.summary(),
                })
                .collect(),
            sent,
            received: self.received,
            lost: sent.saturating_sub(self.received),
            slips: flow.slips,
            window: flow
                .window
                .as_ref()
                .map(|w| WindowReport::new(w, &self.window, ids)),
            bound_ns: None,
        }
    }
}

/// What the lab reads of a node's result file (`<node>.json`); the rest of the
/// document is for people and other tools.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct NodeDoc {
    #[serde(default)]
    pub warnings: Vec<String>,
    /// A router's counters.
    #[serde(default, deserialize_with = "lenient")]
    pub counters: Option<NodeCounters>,
    /// A router's wake-up lateness.
    #[serde(default, deserialize_with = "lenient")]
    pub wakeup: Option<Summary>,
    /// A sender's flows.
    #[serde(default)]
    pub tx_flows: Vec<TxFlowDoc>,
}

/// A part of a node's file this build cannot read is left out, not fatal: a newer
/// or older node may have written it.
fn lenient<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    let v = <Option<Value> as serde::Deserialize>::deserialize(d)?;
    Ok(v.and_then(|v| serde_json::from_value(v).ok()))
}

/// One flow of a sender's result file.
#[derive(Clone, Debug, Default, serde::Deserialize)]
pub struct TxFlowDoc {
    pub flow: u32,
    #[serde(default)]
    pub sent: Option<u64>,
}

/// A router's result file → its part of the report.
pub fn hop_report(name: &str, doc: &NodeDoc, flow_names: &BTreeMap<u32, String>) -> HopReport {
    let c = doc.counters.clone().unwrap_or_default();
    router_report(name, &c, doc.wakeup.clone(), flow_names)
}

/// A router's counters → its part of the report.
pub fn router_report(
    name: &str,
    c: &NodeCounters,
    wakeup: Option<Summary>,
    flow_names: &BTreeMap<u32, String>,
) -> HopReport {
    let sum = |f: fn(&PortCounters) -> u64| c.ports.iter().map(f).sum::<u64>();
    let slips = c
        .flows
        .iter()
        .map(|f| {
            let name = flow_names
                .get(&f.flow)
                .cloned()
                .unwrap_or_else(|| format!("flow {}", f.flow));
            (name, f.slipped)
        })
        .collect();
    let dropped = sum(|p| p.tx_dropped) + c.malformed + c.no_route + c.no_neighbour + c.ttl_expired;
    HopReport {
        node: name.to_string(),
        slips_per_flow: slips,
        forwarded: sum(|p| p.tx_packets).saturating_sub(sum(|p| p.tx_padding)),
        dropped,
        padding_sent: c.padding_sent,
        best_effort_forwarded: c.best_effort_forwarded,
        wakeup,
    }
}

/// Slips of each flow summed over the routers' result files.
pub fn slips_by_flow(router_docs: &[(String, NodeDoc)]) -> BTreeMap<u32, u64> {
    slips_of(router_docs.iter().filter_map(|(_, d)| d.counters.as_ref()))
}

/// Slips of each flow summed over routers' counters.
pub fn slips_of<'a>(routers: impl Iterator<Item = &'a NodeCounters>) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for c in routers {
        for f in &c.flows {
            *out.entry(f.flow).or_insert(0) += f.slipped;
        }
    }
    out
}

/// What each sender says it sent, per flow (`tx_flows[].sent`).
pub fn sent_by_flow(doc: &NodeDoc) -> BTreeMap<u32, u64> {
    doc.tx_flows
        .iter()
        .filter_map(|f| Some((f.flow, f.sent?)))
        .collect()
}

/// One run's measurements, as the terminal and `summary.json` show them.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct FlowLine {
    pub flow: String,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    pub slips: u64,
    pub min_ns: Option<i64>,
    pub p50_ns: Option<i64>,
    pub p99_ns: Option<i64>,
    pub p999_ns: Option<i64>,
    pub max_ns: Option<i64>,
    pub jitter_ns: Option<i64>,
    /// Fraction of packets with `L > TF` (arrived in a later frame).
    pub over_tf: Option<f64>,
    /// The routers the hop records named (first packet), and packets that took
    /// another path.
    pub hops: Vec<String>,
    pub off_path: u64,
    pub duplicates: u64,
    /// TDP: the flow against its window (the report's copy; not repeated here).
    #[serde(skip)]
    pub window: Option<WindowReport>,
}

impl FlowLine {
    /// `p99.9 − min` of the latency: the jitter of 99.9 % of the packets.
    pub fn jitter_999_ns(&self) -> Option<i64> {
        Some(self.p999_ns? - self.min_ns?)
    }
}

/// A scenario's runs as the lab or the simulator measured them, for a caller that
/// shows them its own way (the demo).
#[derive(Clone, Debug)]
pub struct ScenarioLines {
    /// The result directory (summary.json, report.html).
    pub dir: std::path::PathBuf,
    pub runs: Vec<(RunSpec, Vec<FlowLine>)>,
}

/// Everything measured in one run directory.
pub struct Collected {
    pub report: RunReport,
    pub lines: Vec<FlowLine>,
    /// Node warnings, `name: text`.
    pub warnings: Vec<String>,
}

fn open(path: &Path) -> Option<BufReader<File>> {
    File::open(path)
        .ok()
        .map(|f| BufReader::with_capacity(1 << 16, f))
}

/// Reads a run directory. `span_ns`: how long the traffic ran (bounds the series).
pub fn collect(plan: &Plan, dir: &Path, span_ns: i64) -> Collected {
    let mut docs = BTreeMap::new();
    let mut warnings = Vec::new();
    for n in &plan.nodes {
        if n.config.is_none() {
            continue;
        }
        let path = dir.join(format!("{}.json", n.name));
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                warnings.push(format!(
                    "{}: no result file {}: {e}",
                    n.name,
                    path.display()
                ));
                continue;
            }
        };
        match serde_json::from_str::<NodeDoc>(&text) {
            Ok(v) => {
                warnings.extend(v.warnings.iter().map(|w| format!("{}: {w}", n.name)));
                docs.insert(n.name.clone(), v);
            }
            Err(e) => warnings.push(format!("{}: {}: {e}", n.name, path.display())),
        }
    }
    let ids = node_ids(plan);
    let flow_names: BTreeMap<u32, String> =
        plan.flows.iter().map(|f| (f.id, f.name.clone())).collect();
    let routers: Vec<(String, NodeDoc)> = plan
        .nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Edge | Role::Core))
        .filter_map(|n| docs.get(&n.name).map(|d| (n.name.clone(), d.clone())))
        .collect();
    let slips = slips_by_flow(&routers);

    // TX timestamps, within a bound
    let mut tx = TxJoin::default();
    let mut sent: BTreeMap<u32, u64> = BTreeMap::new();
    let mut joined = 0usize;
    let mut complete = true;
    for n in &plan.nodes {
        let is_router = matches!(n.role, Role::Edge | Role::Core) && n.config.is_some();
        if n.role != Role::Sender && !is_router {
            continue;
        }
        if n.role == Role::Sender {
            // what the sender says it sent, with or without a TX file
            if let Some(d) = docs.get(&n.name) {
                sent.extend(sent_by_flow(d));
            }
        }
        let Some(f) = open(&dir.join(format!("{}-tx.csv", n.name))) else {
            continue;
        };
        let mut map = HashMap::new();
        let mut rows = BTreeMap::new();
        complete &= read_tx(f, TX_JOIN_MAX.saturating_sub(joined), &mut map, &mut rows);
        joined += map.len();
        if n.role == Role::Sender {
            tx.sender.extend(map);
            for (flow, c) in rows {
                sent.entry(flow).or_insert(c);
            }
        } else {
            tx.routers.insert(n.name.clone(), map);
        }
    }
    if !complete {
        warnings.push(format!(
            "more than {TX_JOIN_MAX} TX timestamps: the rest of the per-hop split uses the application's send times"
        ));
    }

    let tf_ns = plan.run.tf.as_nanos();
    let inputs = flow_inputs(plan, &sent, &slips);
    // every receiver's file once, for all its flows
    let mut measured: BTreeMap<u32, FlowMeasure> = BTreeMap::new();
    for n in plan.nodes.iter().filter(|n| n.role == Role::Receiver) {
        let mine: Vec<FlowInput<'_>> = inputs
            .iter()
            .filter(|f| f.path.last() == Some(&n.name))
            .cloned()
            .collect();
        if mine.is_empty() {
            continue;
        }
        let ms = match open(&dir.join(format!("{}-packets.csv", n.name))) {
            Some(f) => measure_flows(f, &mine, tf_ns, span_ns, &ids, &tx),
            None => measure_flows(std::io::empty(), &mine, tf_ns, span_ns, &ids, &tx),
        };
        for (f, m) in mine.iter().zip(ms) {
            measured.insert(f.id, m);
        }
    }
    let hops = routers
        .iter()
        .map(|(name, d)| hop_report(name, d, &flow_names))
        .collect();
    let mut c = assemble(plan, &inputs, &measured, hops, warnings);
    super::bound::add_fifo_bounds(&mut c.report, plan);
    c
}

/// Node ids to names (hop records carry ids).
pub fn node_ids(plan: &Plan) -> HashMap<u32, String> {
    plan.nodes.iter().map(|n| (n.id, n.name.clone())).collect()
}

/// What the results need to know of each planned flow: packets sent and slips
/// (from the nodes), the routers its hop records should name.
pub fn flow_inputs<'a>(
    plan: &'a Plan,
    sent: &BTreeMap<u32, u64>,
    slips: &BTreeMap<u32, u64>,
) -> Vec<FlowInput<'a>> {
    let kernel = plan.run.mode == super::scenario::RunMode::Kernel;
    let tdp = plan.run.mode == super::scenario::RunMode::Tdp;
    // by name once (a search of the nodes per flow was quadratic: 10,000 flows
    // over 30,000 nodes took seconds)
    let by_name: HashMap<&str, &NodePlan> =
        plan.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    let asynchronous = |f: &FlowPlan| {
        f.path
            .first()
            .and_then(|s| by_name.get(s.as_str()))
            .is_some_and(|n| n.async_clock.is_some())
    };
    plan.flows
        .iter()
        .map(|f| FlowInput {
            id: f.id,
            name: &f.name,
            path: &f.path,
            sent: sent.get(&f.id).copied(),
            slips: slips.get(&f.id).copied().unwrap_or(0),
            expect_hops: if kernel {
                Vec::new()
            } else {
                f.path
                    .iter()
                    .skip(1)
                    .take(f.path.len().saturating_sub(2))
                    .filter_map(|n| by_name.get(n.as_str()).map(|n| n.id))
                    .collect()
            },
            window: tdp.then(|| {
                flow_window(
                    plan.run.tf.as_nanos(),
                    plan.k,
                    &f.starts,
                    &f.offsets,
                    asynchronous(f),
                )
            }),
        })
        .collect()
}

/// The run's report and table lines from the measured flows and the routers'
/// reports.
pub fn assemble(
    plan: &Plan,
    inputs: &[FlowInput<'_>],
    measured: &BTreeMap<u32, FlowMeasure>,
    hops: Vec<HopReport>,
    warnings: Vec<String>,
) -> Collected {
    let ids = node_ids(plan);
    let mut flows = Vec::new();
    let mut lines = Vec::new();
    for input in inputs {
        let Some(m) = measured.get(&input.id) else {
            continue;
        };
        let report = m.report(input, &ids);
        lines.push(flow_line(input, m, &report, &ids));
        flows.push(report);
    }
    Collected {
        report: RunReport {
            label: plan.run.label.clone(),
            tf_ns: Some(plan.run.tf.as_nanos()),
            flows,
            hops,
            bound_note: None,
        },
        lines,
        warnings,
    }
}

fn flow_line(
    input: &FlowInput<'_>,
    m: &FlowMeasure,
    report: &FlowReport,
    ids: &HashMap<u32, String>,
) -> FlowLine {
    let s = &report.latency;
    FlowLine {
        flow: input.name.to_string(),
        sent: report.sent,
        received: report.received,
        lost: report.lost,
        slips: report.slips,
        min_ns: s.min_ns,
        p50_ns: s.percentile("50"),
        p99_ns: s.percentile("99"),
        p999_ns: s.percentile("99.9"),
        max_ns: s.max_ns,
        jitter_ns: s.jitter_ns,
        over_tf: (s.count > 0).then(|| m.over_tf as f64 / s.count as f64),
        hops: m
            .hop_nodes
            .iter()
            .map(|i| ids.get(i).cloned().unwrap_or_else(|| format!("node {i}")))
            .collect(),
        off_path: m.off_path,
        duplicates: m.duplicates,
        window: report.window.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_by_column_name() {
        let (c, mut file) = IntRows::open(&b"flow,seq,x\n4,,oops\n5"[..]).expect("a header");
        let mut row = Vec::new();
        assert!(file.next_row(&mut row));
        assert_eq!(row, [Some(4), None, None]);
        assert_eq!(cell(&row, c.get("flow")), Some(4));
        assert_eq!(cell(&row, c.get("seq")), None);
        assert_eq!(cell(&row, c.get("nope")), None);
        assert!(file.next_row(&mut row));
        assert_eq!(cell(&row, c.get("x")), None);
        assert!(!file.next_row(&mut row));
    }

    #[test]
    fn tx_files_are_joined_within_a_bound() {
        let text = "flow,seq,frame,tx_kernel\n1,0,9,100\n1,1,10,0\n2,0,9,300\n2,1,10,400\n";
        let (mut map, mut rows) = (HashMap::new(), BTreeMap::new());
        assert!(read_tx(text.as_bytes(), 10, &mut map, &mut rows));
        assert_eq!(
            map,
            HashMap::from([((1, 0), 100), ((2, 0), 300), ((2, 1), 400)])
        );
        assert_eq!(rows, BTreeMap::from([(1, 2), (2, 2)]));
        let (mut map, mut rows) = (HashMap::new(), BTreeMap::new());
        assert!(!read_tx(text.as_bytes(), 2, &mut map, &mut rows));
        assert_eq!(map.len(), 2);
        assert_eq!(rows, BTreeMap::from([(1, 2), (2, 2)]));
    }

    #[test]
    fn series_keep_extremes_in_bounded_buckets() {
        let mut s = Series::new(10_000);
        for i in 0..100_000i64 {
            s.push(i, if i == 77_777 { 1_000_000 } else { i % 10 });
        }
        let p = s.points();
        assert!(p.len() <= SERIES_MAX);
        assert!(p.contains(&(77_777, 1_000_000)));
        assert!(p.windows(2).all(|w| w[0].0 < w[1].0));
    }

    const PACKETS: &str = "flow,seq,frame,t0,t_wake,t_send,kernel_rx,app_rx,latency,h1_node,h1_rx_kernel,h1_rx_app,h1_tx_app,h2_node,h2_rx_kernel,h2_rx_app,h2_tx_app
1,0,10,1000000,1000010,1000020,1001000,1001050,1050,2,1000100,1000110,1000300,3,1000500,1000510,1000800
1,1,11,2000000,2000030,2000040,2002000,2002100,2100,2,2000100,2000110,2000300,3,2000500,2000510,2000800
1,1,11,2000000,2000030,2000040,2002000,2002100,2100,2,2000100,2000110,2000300,3,2000500,2000510,2000800
7,0,10,1000000,1000010,1000020,1001000,1001050,1050,,,,,,,,
1,3,13,4000000,4000010,4000020,4000900,4001000,1000,3,4000100,4000110,4000300,,,,
";

    fn setup() -> (Vec<String>, HashMap<u32, String>, TxJoin) {
        let path = vec!["tx".to_string(), "r1".into(), "r2".into(), "rx".into()];
        let ids: HashMap<u32, String> = [(2, "r1".to_string()), (3, "r2".to_string())].into();
        let tx = TxJoin {
            sender: [((1, 0), 1_000_030)].into(),
            routers: [("r1".to_string(), [((1, 0), 1_000_310)].into())].into(),
        };
        (path, ids, tx)
    }

    fn input<'a>(path: &'a [String], sent: Option<u64>, slips: u64) -> FlowInput<'a> {
        FlowInput {
            id: 1,
            name: "f",
            path,
            sent,
            slips,
            expect_hops: vec![2, 3],
            window: None,
        }
    }

    #[test]
    fn one_packet_decomposes_exactly_into_its_latency() {
        let one: String = PACKETS.lines().take(2).map(|l| format!("{l}\n")).collect();
        let (path, ids, tx) = setup();
        let flows = [input(&path, None, 0)];
        let m = &measure_flows(one.as_bytes(), &flows, 1500, 1_000_000_000, &ids, &tx)[0];
        let spans: Vec<(&str, Option<i64>)> = m
            .components
            .iter()
            .map(|(n, h)| (n.as_str(), h.min()))
            .collect();
        // the sender's and r1's kernel TX times replace t_send and tx_app
        assert_eq!(
            spans,
            [
                ("L_I", Some(10)),
                ("L_Tx", Some(20)),
                ("link tx→r1", Some(70)),
                ("r1 residence", Some(210)),
                ("link r1→r2", Some(190)),
                ("r2 residence", Some(300)),
                ("link r2→rx", Some(200)),
                ("L_Rx", Some(50)),
            ]
        );
        let total: i64 = spans.iter().filter_map(|s| s.1).sum();
        assert_eq!(Some(total), m.latency.min());
        assert_eq!(m.latency.min(), Some(1050));
        let r = m.report(&flows[0], &HashMap::new());
        assert_eq!((r.sent, r.received, r.lost), (1, 1, 0));
    }

    #[test]
    fn a_flow_counts_duplicates_late_packets_and_other_paths() {
        let (path, ids, tx) = setup();
        let flows = [input(&path, Some(4), 2)];
        let m = &measure_flows(PACKETS.as_bytes(), &flows, 1500, 1_000_000_000, &ids, &tx)[0];
        // seq 1 twice, seq 3 crossed r2 only, L = 2100 > TF for seq 1
        assert_eq!(
            (m.received, m.duplicates, m.over_tf, m.off_path),
            (3, 1, 1, 1)
        );
        assert_eq!(m.hop_nodes, vec![2, 3]);
        assert_eq!((m.latency.count(), m.latency.min()), (3, Some(1000)));
        let names: Vec<&str> = m.components.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "L_I",
                "L_Tx",
                "link tx→r1",
                "r1 residence",
                "link r1→r2",
                "r2 residence",
                "link r2→rx",
                "L_Rx",
                "link tx→r2"
            ]
        );
        let r = m.report(&flows[0], &HashMap::new());
        assert_eq!((r.sent, r.received, r.lost, r.slips), (4, 3, 1, 2));
        assert_eq!(r.inter_arrival.count, 2);
        assert_eq!(
            r.inter_arrival_series,
            vec![(1_001_050, 1_001_050), (2_999_950, 1_998_900)]
        );
        // an empty file measures nothing
        let none = &measure_flows(std::io::empty(), &flows, 1500, 1, &ids, &tx)[0];
        assert_eq!((none.received, none.latency.count()), (0, 0));
    }

    #[test]
    fn router_counters_become_a_hop_report() {
        let doc: NodeDoc = serde_json::from_value(serde_json::json!({
            "counters": {
                "ports": [
                    {"tx_packets": 100, "tx_padding": 10, "tx_dropped": 1},
                    {"tx_packets": 50, "tx_padding": 5, "tx_dropped": 2}
                ],
                "flows": [{"flow": 1, "slipped": 3}, {"flow": 9, "slipped": 0}],
                "padding_sent": 15, "best_effort_forwarded": 40, "no_route": 4
            },
            "wakeup": null,
            "something_else": {"ignored": true}
        }))
        .unwrap();
        let names: BTreeMap<u32, String> = [(1, "ctl".to_string())].into();
        let h = hop_report("r1", &doc, &names);
        assert_eq!(h.forwarded, 135);
        assert_eq!(h.dropped, 7);
        assert_eq!(h.padding_sent, 15);
        assert_eq!(h.best_effort_forwarded, 40);
        assert_eq!(
            h.slips_per_flow,
            vec![("ctl".to_string(), 3), ("flow 9".to_string(), 0)]
        );
        assert!(h.wakeup.is_none());
        let s = slips_by_flow(&[("r1".into(), doc.clone()), ("r2".into(), doc)]);
        assert_eq!(s.get(&1), Some(&6));
        let tx: NodeDoc =
            serde_json::from_str(r#"{"tx_flows": [{"flow": 1, "sent": 40}, {"flow": 2}]}"#)
                .unwrap();
        let sent = sent_by_flow(&tx);
        assert_eq!(sent.get(&1), Some(&40));
    }
}
