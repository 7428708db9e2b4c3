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
use std::path::Path;

use lockstep_core::stats::{Histogram, Summary};
use lockstep_core::tdp::Role;
use lockstep_core::wire::NOT_FILLED;
use serde_json::Value;

use super::plan::Plan;
use crate::report::html::{Component, FlowReport, HopReport, RunReport};

/// Most points of an inter-arrival series in the report.
pub const SERIES_MAX: usize = 4000;

/// A CSV of integers with a header, cells addressed by column name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Table {
    columns: HashMap<String, usize>,
    pub rows: Vec<Vec<Option<i64>>>,
}

impl Table {
    /// Parses the text; malformed cells are empty, short rows are padded.
    pub fn parse(text: &str) -> Table {
        let mut lines = text.lines();
        let columns: HashMap<String, usize> = lines
            .next()
            .unwrap_or("")
            .split(',')
            .enumerate()
            .map(|(i, c)| (c.trim().to_string(), i))
            .collect();
        let width = columns.len();
        let rows = lines
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let mut r: Vec<Option<i64>> = l.split(',').map(|c| c.trim().parse().ok()).collect();
                r.resize(width.max(r.len()), None);
                r
            })
            .collect();
        Table { columns, rows }
    }

    pub fn read(path: &Path) -> Option<Table> {
        std::fs::read_to_string(path).ok().map(|t| Table::parse(&t))
    }

    pub fn col(&self, name: &str) -> Option<usize> {
        self.columns.get(name).copied()
    }

    /// A cell; `None` when the column or value is absent.
    pub fn get(&self, row: &[Option<i64>], name: &str) -> Option<i64> {
        self.col(name).and_then(|i| row.get(i).copied().flatten())
    }
}

/// A timestamp that is filled in.
fn filled(v: Option<i64>) -> Option<i64> {
    v.filter(|&x| x != NOT_FILLED)
}

/// `(flow, seq) → tx_kernel` of a node's TX file.
pub fn tx_times(t: &Table) -> HashMap<(u32, u64), i64> {
    let mut out = HashMap::new();
    for r in &t.rows {
        let (Some(f), Some(s), Some(tx)) = (
            t.get(r, "flow"),
            t.get(r, "seq"),
            filled(t.get(r, "tx_kernel")),
        ) else {
            continue;
        };
        out.insert((f as u32, s as u64), tx);
    }
    out
}

/// Rows per flow of a sender's TX file (what it sent, when its JSON does not say).
pub fn rows_per_flow(t: &Table) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for r in &t.rows {
        if let Some(f) = t.get(r, "flow") {
            *out.entry(f as u32).or_insert(0) += 1;
        }
    }
    out
}

/// Keeps at most `max` points of a series: the first and last, and in each of
/// `max / 2` equal chunks the lowest and the highest value, in time order.
pub fn decimate(series: &[(i64, i64)], max: usize) -> Vec<(i64, i64)> {
    if series.len() <= max || max < 4 {
        return series.to_vec();
    }
    let chunks = max / 2;
    let size = series.len().div_ceil(chunks);
    let mut out = Vec::with_capacity(max);
    for chunk in series.chunks(size) {
        let (mut lo, mut hi) = (0, 0);
        for (i, p) in chunk.iter().enumerate() {
            if p.1 < chunk[lo].1 {
                lo = i;
            }
            if p.1 > chunk[hi].1 {
                hi = i;
            }
        }
        let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    out
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
}

/// The per-packet measurements of one flow.
#[derive(Clone, Debug, Default)]
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
}

impl FlowMeasure {
    fn component(&mut self, name: String, v: i64) {
        match self.components.iter_mut().find(|(n, _)| *n == name) {
            Some((_, h)) => h.record(v),
            None => {
                let mut h = Histogram::new();
                h.record(v);
                self.components.push((name, h));
            }
        }
    }
}

/// Measures one flow from the receiver's packet table. `ids` names node ids (hop
/// records carry ids), `sender_tx` and `router_tx` are the joined TX timestamps
/// (`router_tx` by router name), `expect_hops` the router ids the path crosses.
pub fn measure_flow(
    packets: &Table,
    flow: &FlowInput<'_>,
    tf_ns: i64,
    ids: &HashMap<u32, String>,
    sender_tx: &HashMap<(u32, u64), i64>,
    router_tx: &HashMap<String, HashMap<(u32, u64), i64>>,
    expect_hops: &[u32],
) -> FlowMeasure {
    let mut m = FlowMeasure::default();
    let mut seen = std::collections::HashSet::new();
    let mut last_rx: Option<i64> = None;
    let mut first_rx: Option<i64> = None;
    let mut series = Vec::new();
    let sender = flow.path.first().cloned().unwrap_or_default();
    let receiver = flow.path.last().cloned().unwrap_or_default();
    for r in &packets.rows {
        let g = |n: &str| packets.get(r, n);
        if g("flow") != Some(i64::from(flow.id)) {
            continue;
        }
        let Some(seq) = g("seq").map(|s| s as u64) else {
            continue;
        };
        if !seen.insert(seq) {
            m.duplicates += 1;
            continue;
        }
        m.received += 1;
        let t0 = filled(g("t0"));
        let app = filled(g("app_rx"));
        if let (Some(t0), Some(app)) = (t0, app) {
            let l = app - t0;
            m.latency.record(l);
            if l > tf_ns {
                m.over_tf += 1;
            }
        }
        if let Some(app) = app {
            if let Some(prev) = last_rx {
                let d = app - prev;
                m.inter_arrival.record(d);
                series.push((app - first_rx.unwrap_or(app), d));
            } else {
                first_rx = Some(app);
            }
            last_rx = Some(app);
        }
        // the hop records
        let mut hops = Vec::new();
        for h in 1.. {
            let node = packets.get(r, &format!("h{h}_node"));
            if packets.col(&format!("h{h}_node")).is_none() {
                break;
            }
            let Some(node) = node else { break };
            hops.push((
                node as u32,
                filled(packets.get(r, &format!("h{h}_rx_kernel"))),
                filled(packets.get(r, &format!("h{h}_rx_app"))),
                filled(packets.get(r, &format!("h{h}_tx_app"))),
            ));
        }
        let hop_ids: Vec<u32> = hops.iter().map(|h| h.0).collect();
        if m.received == 1 {
            m.hop_nodes = hop_ids.clone();
        }
        if hop_ids != expect_hops {
            m.off_path += 1;
        }
        // the decomposition
        let key = (flow.id, seq);
        let t_wake = filled(g("t_wake"));
        let t_send = filled(g("t_send"));
        if let (Some(t0), Some(w)) = (t0, t_wake) {
            m.component("L_I".into(), w - t0);
        }
        let mut depart = sender_tx.get(&key).copied().or(t_send);
        if let (Some(w), Some(d)) = (t_wake, depart) {
            m.component("L_Tx".into(), d - w);
        }
        let mut prev_name = sender.clone();
        for (node, rx_k, rx_a, tx_a) in hops {
            let name = ids
                .get(&node)
                .cloned()
                .unwrap_or_else(|| format!("node {node}"));
            let arrive = rx_k.or(rx_a);
            if let (Some(d), Some(a)) = (depart, arrive) {
                m.component(format!("link {prev_name}→{name}"), a - d);
            }
            let leave = router_tx
                .get(&name)
                .and_then(|t| t.get(&key).copied())
                .or(tx_a);
            if let (Some(a), Some(l)) = (arrive, leave) {
                m.component(format!("{name} residence"), l - a);
            }
            depart = leave;
            prev_name = name;
        }
        let k_rx = filled(g("kernel_rx"));
        if let (Some(d), Some(k)) = (depart, k_rx) {
            m.component(format!("link {prev_name}→{receiver}"), k - d);
        }
        if let (Some(k), Some(a)) = (k_rx, app) {
            m.component("L_Rx".into(), a - k);
        }
    }
    m.series = decimate(&series, SERIES_MAX);
    m
}

impl FlowMeasure {
    pub fn report(&self, flow: &FlowInput<'_>) -> FlowReport {
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
        }
    }
}

fn u(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// A router's counters document (`counters` of its JSON) → its part of the report.
pub fn hop_report(name: &str, doc: &Value, flow_names: &BTreeMap<u32, String>) -> HopReport {
    let c = doc.get("counters").cloned().unwrap_or(Value::Null);
    let ports: Vec<Value> = c
        .get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let sum = |k: &str| ports.iter().map(|p| u(p, k)).sum::<u64>();
    let mut slips = Vec::new();
    for f in c
        .get("flows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let id = u(f, "flow") as u32;
        let name = flow_names
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("flow {id}"));
        slips.push((name, u(f, "slipped")));
    }
    let dropped = sum("tx_dropped")
        + ["malformed", "no_route", "no_neighbour", "ttl_expired"]
            .iter()
            .map(|k| u(&c, k))
            .sum::<u64>();
    HopReport {
        node: name.to_string(),
        slips_per_flow: slips,
        forwarded: sum("tx_packets").saturating_sub(sum("tx_padding")),
        dropped,
        padding_sent: u(&c, "padding_sent"),
        best_effort_forwarded: u(&c, "best_effort_forwarded"),
        wakeup: doc
            .get("wakeup")
            .filter(|w| !w.is_null())
            .and_then(|w| serde_json::from_value::<Summary>(w.clone()).ok()),
    }
}

/// Slips of each flow summed over the routers' documents.
pub fn slips_by_flow(router_docs: &[(String, Value)]) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for (_, d) in router_docs {
        let flows = d
            .get("counters")
            .and_then(|c| c.get("flows"))
            .and_then(Value::as_array);
        for f in flows.into_iter().flatten() {
            *out.entry(u(f, "flow") as u32).or_insert(0) += u(f, "slipped");
        }
    }
    out
}

/// What each sender says it sent, per flow (`tx_flows[].sent`).
pub fn sent_by_flow(doc: &Value) -> BTreeMap<u32, u64> {
    let mut out = BTreeMap::new();
    for f in doc
        .get("tx_flows")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if let Some(s) = f.get("sent").and_then(Value::as_u64) {
            out.insert(u(f, "flow") as u32, s);
        }
    }
    out
}

/// One run's measurements, as the terminal and `summary.json` show them.
#[derive(Clone, Debug, serde::Serialize)]
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
}

/// Everything measured in one run directory.
pub struct Collected {
    pub report: RunReport,
    pub lines: Vec<FlowLine>,
    /// Node warnings, `name: text`.
    pub warnings: Vec<String>,
}

/// Reads a run directory.
pub fn collect(plan: &Plan, dir: &Path) -> Collected {
    let mut docs = BTreeMap::new();
    let mut warnings = Vec::new();
    for n in &plan.nodes {
        if n.config.is_none() {
            continue;
        }
        let path = dir.join(format!("{}.json", n.name));
        match std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        {
            Some(v) => {
                for w in v
                    .get("warnings")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    if let Some(s) = w.as_str() {
                        warnings.push(format!("{}: {s}", n.name));
                    }
                }
                docs.insert(n.name.clone(), v);
            }
            None => warnings.push(format!("{}: no result file {}", n.name, path.display())),
        }
    }
    let ids: HashMap<u32, String> = plan.nodes.iter().map(|n| (n.id, n.name.clone())).collect();
    let flow_names: BTreeMap<u32, String> =
        plan.flows.iter().map(|f| (f.id, f.name.clone())).collect();
    let routers: Vec<(String, Value)> = plan
        .nodes
        .iter()
        .filter(|n| matches!(n.role, Role::Edge | Role::Core))
        .filter_map(|n| docs.get(&n.name).map(|d| (n.name.clone(), d.clone())))
        .collect();
    let slips = slips_by_flow(&routers);
    let mut router_tx = HashMap::new();
    for (name, _) in &routers {
        if let Some(t) = Table::read(&dir.join(format!("{name}-tx.csv"))) {
            router_tx.insert(name.clone(), tx_times(&t));
        }
    }
    let mut sender_tx: HashMap<(u32, u64), i64> = HashMap::new();
    let mut sent: BTreeMap<u32, u64> = BTreeMap::new();
    let mut receivers: BTreeMap<String, Table> = BTreeMap::new();
    for n in &plan.nodes {
        match n.role {
            Role::Sender => {
                if let Some(t) = Table::read(&dir.join(format!("{}-tx.csv", n.name))) {
                    sender_tx.extend(tx_times(&t));
                    for (f, c) in rows_per_flow(&t) {
                        sent.entry(f).or_insert(c);
                    }
                }
                if let Some(d) = docs.get(&n.name) {
                    sent.extend(sent_by_flow(d));
                }
            }
            Role::Receiver => {
                if let Some(t) = Table::read(&dir.join(format!("{}-packets.csv", n.name))) {
                    receivers.insert(n.name.clone(), t);
                }
            }
            _ => {}
        }
    }
    let tf_ns = plan.run.tf.as_nanos();
    let mut flows = Vec::new();
    let mut lines = Vec::new();
    let empty = Table::default();
    for f in &plan.flows {
        let input = FlowInput {
            id: f.id,
            name: &f.name,
            path: &f.path,
            sent: sent.get(&f.id).copied(),
            slips: slips.get(&f.id).copied().unwrap_or(0),
        };
        let receiver = f.path.last().cloned().unwrap_or_default();
        let table = receivers.get(&receiver).unwrap_or(&empty);
        let expect: Vec<u32> = f
            .path
            .iter()
            .skip(1)
            .take(f.path.len().saturating_sub(2))
            .filter_map(|n| plan.node(n).map(|p| p.id))
            .collect();
        let expect = if plan.run.mode == super::scenario::RunMode::Kernel {
            Vec::new()
        } else {
            expect
        };
        let m = measure_flow(table, &input, tf_ns, &ids, &sender_tx, &router_tx, &expect);
        let report = m.report(&input);
        let s = &report.latency;
        lines.push(FlowLine {
            flow: f.name.clone(),
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
        });
        flows.push(report);
    }
    let hops = routers
        .iter()
        .map(|(name, d)| hop_report(name, d, &flow_names))
        .collect();
    Collected {
        report: RunReport {
            label: plan.run.label.clone(),
            tf_ns: Some(tf_ns),
            flows,
            hops,
        },
        lines,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_by_column_name() {
        let t = Table::parse("flow,seq,x\n1,2,3\n4,,oops\n5\n\n");
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.get(&t.rows[0], "x"), Some(3));
        assert_eq!(t.get(&t.rows[1], "seq"), None);
        assert_eq!(t.get(&t.rows[1], "x"), None);
        assert_eq!(t.get(&t.rows[2], "seq"), None);
        assert_eq!(t.get(&t.rows[0], "nope"), None);
        assert_eq!(Table::parse("").rows.len(), 0);
    }

    #[test]
    fn decimation_keeps_extremes_and_bounds_the_length() {
        let s: Vec<(i64, i64)> = (0..10_000)
            .map(|i| (i, if i == 7777 { 1_000_000 } else { i % 10 }))
            .collect();
        let d = decimate(&s, 100);
        assert!(d.len() <= 100);
        assert!(d.contains(&(7777, 1_000_000)));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0));
        let short = vec![(1, 1), (2, 2)];
        assert_eq!(decimate(&short, 100), short);
    }

    const PACKETS: &str = "flow,seq,frame,t0,t_wake,t_send,kernel_rx,app_rx,latency,h1_node,h1_rx_kernel,h1_rx_app,h1_tx_app,h2_node,h2_rx_kernel,h2_rx_app,h2_tx_app
1,0,10,1000000,1000010,1000020,1001000,1001050,1050,2,1000100,1000110,1000300,3,1000500,1000510,1000800
1,1,11,2000000,2000030,2000040,2002000,2002100,2100,2,2000100,2000110,2000300,3,2000500,2000510,2000800
1,1,11,2000000,2000030,2000040,2002000,2002100,2100,2,2000100,2000110,2000300,3,2000500,2000510,2000800
7,0,10,1000000,1000010,1000020,1001000,1001050,1050,,,,,,,,
1,3,13,4000000,4000010,4000020,4000900,4001000,1000,3,4000100,4000110,4000300,,,,
";

    type Inputs = (
        Vec<String>,
        HashMap<u32, String>,
        HashMap<(u32, u64), i64>,
        HashMap<String, HashMap<(u32, u64), i64>>,
    );

    fn inputs() -> Inputs {
        let path = vec!["tx".to_string(), "r1".into(), "r2".into(), "rx".into()];
        let ids: HashMap<u32, String> = [(2, "r1".to_string()), (3, "r2".to_string())].into();
        let sender_tx: HashMap<(u32, u64), i64> = [((1, 0), 1_000_030)].into();
        let router_tx: HashMap<String, HashMap<(u32, u64), i64>> =
            [("r1".to_string(), [((1, 0), 1_000_310)].into())].into();
        (path, ids, sender_tx, router_tx)
    }

    #[test]
    fn one_packet_decomposes_exactly_into_its_latency() {
        let one: String = PACKETS.lines().take(2).map(|l| format!("{l}\n")).collect();
        let t = Table::parse(&one);
        let (path, ids, sender_tx, router_tx) = inputs();
        let flow = FlowInput {
            id: 1,
            name: "f",
            path: &path,
            sent: None,
            slips: 0,
        };
        let m = measure_flow(&t, &flow, 1500, &ids, &sender_tx, &router_tx, &[2, 3]);
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
        let r = m.report(&flow);
        assert_eq!((r.sent, r.received, r.lost), (1, 1, 0));
    }

    #[test]
    fn a_flow_counts_duplicates_late_packets_and_other_paths() {
        let t = Table::parse(PACKETS);
        let (path, ids, sender_tx, router_tx) = inputs();
        let flow = FlowInput {
            id: 1,
            name: "f",
            path: &path,
            sent: Some(4),
            slips: 2,
        };
        let m = measure_flow(&t, &flow, 1500, &ids, &sender_tx, &router_tx, &[2, 3]);
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
        let r = m.report(&flow);
        assert_eq!((r.sent, r.received, r.lost, r.slips), (4, 3, 1, 2));
        assert_eq!(r.inter_arrival.count, 2);
        assert_eq!(
            r.inter_arrival_series,
            vec![(1_001_050, 1_001_050), (2_999_950, 1_998_900)]
        );
    }

    #[test]
    fn router_counters_become_a_hop_report() {
        let doc: Value = serde_json::json!({
            "counters": {
                "ports": [
                    {"tx_packets": 100, "tx_padding": 10, "tx_dropped": 1},
                    {"tx_packets": 50, "tx_padding": 5, "tx_dropped": 2}
                ],
                "flows": [{"flow": 1, "slipped": 3}, {"flow": 9, "slipped": 0}],
                "padding_sent": 15, "best_effort_forwarded": 40, "no_route": 4
            },
            "wakeup": null
        });
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
        let sent = sent_by_flow(&serde_json::json!({"tx_flows": [{"flow": 1, "sent": 40}]}));
        assert_eq!(sent.get(&1), Some(&40));
    }
}
