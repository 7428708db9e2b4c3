//! The network-calculus delay bound of each flow of a FIFO run, where one exists: the
//! planned network as FIFO servers (one per directional link a flow crosses) and the
//! flows as token buckets read off their schedules, analysed exactly by
//! `lockstep-netcalc` (the smaller of its total and separated flow analyses; on a
//! network whose servers depend on each other in a cycle, as flows that loop make
//! them, the total flow analysis' fixed point). The bound covers the network —
//! queueing, transmission, a router's processing allowance — not the end hosts'
//! wake-ups.
//!
//! There is none when a best-effort load shares the network (it is not shaped) or
//! when the fixed point diverges: the reason is returned instead.

use std::collections::{BTreeMap, HashMap};

use lockstep_core::tdp::schedule::Link;
use lockstep_core::tdp::Role;
use lockstep_netcalc::methods::{self, Method};
use lockstep_netcalc::{Flow, Multiplexing, Network, Server, Shaper, Q};

use super::plan::{FlowPlan, NodePlan, Plan};
use super::scenario::RunMode;
use crate::report::html::RunReport;

/// Flows beyond which no bound is computed here (exact analysis of a large network
/// takes long; `lockstep calc` is the tool for it).
const MAX_FLOWS: usize = 200;

/// A FIFO run's report gets each flow's bound, or the reason there is none.
pub fn add_fifo_bounds(report: &mut RunReport, plan: &Plan) {
    if plan.run.mode != RunMode::Fifo {
        return;
    }
    match fifo_bounds(plan) {
        Ok(b) => {
            let ids: BTreeMap<&str, u32> =
                plan.flows.iter().map(|f| (f.name.as_str(), f.id)).collect();
            for f in &mut report.flows {
                f.bound_ns = ids.get(f.name.as_str()).and_then(|id| b.get(id)).copied();
            }
        }
        Err(why) => report.bound_note = Some(why),
    }
}

/// Per flow id, its end-to-end bound in ns (rounded up); or why there is none.
pub fn fifo_bounds(plan: &Plan) -> Result<BTreeMap<u32, i64>, String> {
    if plan.flows.len() > MAX_FLOWS {
        return Err(format!(
            "no network-calculus bound: {} flows (more than {MAX_FLOWS}; `lockstep calc` analyses large networks)",
            plan.flows.len()
        ));
    }
    if !plan.loads.is_empty() {
        return Err(format!(
            "no network-calculus bound: {} best-effort load(s) share the network unshaped",
            plan.loads.len()
        ));
    }
    let net = network(plan)?;
    let mut best: Vec<Option<Q>> = vec![None; net.flows.len()];
    let mut why = None;
    for m in [Method::Tfa, Method::Sfa] {
        let opts = methods::Options { line_shaping: true };
        let bounds = methods::bounds_with(&net, m, opts)
            .map_err(|e| format!("no network-calculus bound: {}", e.message))?;
        for (b, got) in best.iter_mut().zip(bounds) {
            match got {
                Ok(q) => *b = Some(b.take().map_or(q.clone(), |old| old.min(q))),
                Err(e) => {
                    why.get_or_insert(e);
                }
            }
        }
    }
    let mut out = BTreeMap::new();
    for (f, b) in plan.flows.iter().zip(&best) {
        if let Some(b) = b {
            out.insert(f.id, ns_up(b));
        }
    }
    if out.is_empty() {
        let why = why.map_or_else(|| "no flow".to_string(), |w| w.to_string());
        return Err(format!(
            "no network-calculus bound: {why}{}",
            divergence_note(&net)
        ));
    }
    Ok(out)
}

/// Why a cyclic network's fixed point diverges, in numbers (`; ...`), or nothing
/// when that does not apply.
fn divergence_note(net: &Network) -> String {
    let stop = crate::stop::stop_requested;
    let Ok(Some(d)) = lockstep_netcalc::methods::diverge::divergence(net, true, &stop) else {
        return String::new();
    };
    let names: Vec<&str> = d
        .busiest
        .iter()
        .filter_map(|b| net.servers.get(b.server).map(|s| s.name.as_str()))
        .collect();
    let pct = |q: &Q| format!("{:.2} %", q.to_f64() * 100.0);
    format!(
        "; its busiest looped links ({}) run at {} of their rate, and the fixed point converges only with every flow at {} or less of its rate (`lockstep calc` gives the bounds there)",
        names.join(", "),
        pct(&d.utilisation),
        pct(&d.scale)
    )
}

/// Seconds → ns, rounded up.
fn ns_up(s: &Q) -> i64 {
    let ns = s.mul_ref(&Q::int(1_000_000_000));
    let step = ns.ceil_to(&Q::one());
    step.to_f64().round() as i64
}

/// The planned network as FIFO servers and token-bucket flows (what `lockstep calc`
/// analyses of a scenario).
pub fn network(plan: &Plan) -> Result<Network, String> {
    // per server: rate, largest frame in bits, whether a router sends on it
    let mut servers: BTreeMap<String, (u64, u128, bool)> = BTreeMap::new();
    let mut flows = Vec::new();
    let by_name: HashMap<&str, &NodePlan> =
        plan.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
    for f in &plan.flows {
        // a real port's frame: the IP packet plus Ethernet's overhead
        let wire = Link::ethernet(0).packet_bits(f.size);
        let mut path = Vec::new();
        for hop in f.path.windows(2) {
            let from = by_name.get(hop[0].as_str()).copied();
            let rate = from
                .and_then(|n| link_rate(plan, n, &hop[1]))
                .ok_or_else(|| format!("no link from {} to {} in the plan", hop[0], hop[1]))?;
            let name = format!("{}→{}", hop[0], hop[1]);
            let router = from.is_some_and(|n| matches!(n.role, Role::Edge | Role::Core));
            let e = servers.entry(name.clone()).or_insert((rate, 0, router));
            e.1 = e.1.max(wire);
            path.push(name);
        }
        let first_rate = path.first().and_then(|p| servers.get(p)).map_or(0, |s| s.0);
        flows.push(flow(plan, f, path, wire, first_rate)?);
    }
    let servers = servers
        .into_iter()
        .map(|(name, (rate, largest, router))| {
            let tx = Q::ratio(largest as i128, i128::from(rate.max(1))).unwrap_or_else(Q::zero);
            let proc_s = if router {
                Q::ratio(i128::from(plan.processing.as_nanos()), 1_000_000_000)
                    .unwrap_or_else(Q::zero)
            } else {
                Q::zero()
            };
            Server {
                name,
                rate: Q::int(rate as i64),
                latency: tx.add_ref(&proc_s),
                buffer: None,
                multiplexing: Multiplexing::Fifo,
                // a link sends whole frames at its rate: what the next node has
                // received of it is at most R t + its largest frame
                shaper: Some(Shaper {
                    rate: Q::int(rate as i64),
                    burst: Q::int(largest as i64),
                }),
            }
        })
        .collect();
    Ok(Network { servers, flows })
}

/// The rate of the link from node `a` to node `b`.
fn link_rate(plan: &Plan, na: &NodePlan, b: &str) -> Option<u64> {
    na.ifaces
        .iter()
        .find(|i| plan.nodes.get(i.peer).is_some_and(|p| p.name == b))
        .map(|i| i.rate_bps)
}

/// A flow's token bucket from its schedule: `packets` frames of `wire` bits at the
/// start of each of its frames of the cycle.
fn flow(
    plan: &Plan,
    f: &FlowPlan,
    path: Vec<String>,
    wire: u128,
    peak: u64,
) -> Result<Flow, String> {
    let tf = plan.run.tf.as_nanos();
    let cycle_ns = i128::from(tf) * i128::from(plan.k);
    let burst_bits = i128::from(f.packets) * wire as i128;
    let per_cycle = burst_bits * f.starts.len() as i128;
    let rate = Q::ratio(per_cycle * 1_000_000_000, cycle_ns.max(1))
        .ok_or_else(|| format!("flow {}: no rate", f.name))?;
    // the largest excess of what was sent over rate × time, over every run of
    // consecutive sends (two cycles cover every run)
    let mut times: Vec<i128> = f
        .starts
        .iter()
        .map(|&s| i128::from(s) * i128::from(tf))
        .collect();
    times.sort_unstable();
    let twice: Vec<i128> = times
        .iter()
        .copied()
        .chain(times.iter().map(|t| t + cycle_ns))
        .collect();
    let mut b = Q::int(0);
    for i in 0..times.len() {
        for j in i..twice.len().min(i + times.len()) {
            let sent = Q::int(((j - i + 1) as i128 * burst_bits) as i64);
            let dt = Q::ratio(twice[j] - twice[i], 1_000_000_000).unwrap_or_else(Q::zero);
            b = b.max(sent.sub_ref(&rate.mul_ref(&dt)));
        }
    }
    Ok(Flow {
        name: f.name.clone(),
        path,
        rate,
        burst: b,
        peak: (peak > 0).then(|| Q::int(peak as i64)),
        max_packet: Some(Q::int(wire as i64)),
        deadline: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_plan::plan::plan;
    use lockstep_plan::scenario::Scenario;

    fn text(extra: &str) -> String {
        format!(
            r#"[scenario]
name = "b"
tf = "1ms"
k = 4
d = 2
modes = ["fifo"]
{extra}
[[node]]
name = "tx"
role = "sender"
[[node]]
name = "r1"
role = "core"
[[node]]
name = "rx"
role = "receiver"
[[link]]
between = ["tx", "r1"]
rate = "100Mbit/s"
[[link]]
between = ["r1", "rx"]
rate = "50Mbit/s"
[[flow]]
name = "f"
path = ["tx", "r1", "rx"]
size = "1000B"
packets = 2
every = 2
"#
        )
    }

    #[test]
    fn a_line_of_two_fifo_ports_has_the_bound_of_its_token_bucket() {
        let s = Scenario::parse("b.toml", &text("processing = \"10us\"")).unwrap();
        let p = plan(&s, &s.runs()[0]).unwrap();
        let b = fifo_bounds(&p).unwrap();
        // two 1038-byte frames every 2 ms: r = 8.304 Mb/s, b = 16 608 bits; the
        // ports' latencies (a frame: 83.04 us at 100 Mb/s, 166.08 us at 50 Mb/s plus
        // r1's 10 us) and at most the burst at the slower rate (332.16 us)
        let ns = b[&1];
        assert!(
            ns > 83_040 + 176_080 && ns <= 83_040 + 176_080 + 332_160,
            "{ns}"
        );
    }

    #[test]
    fn a_load_leaves_no_bound_and_says_why() {
        let load = "\n[[load]]\nfrom = \"tx\"\nto = \"rx\"\ntool = \"iperf3\"\nproto = \"udp\"\nrate = \"1Mbit/s\"\n";
        let t = text("") + load;
        let s = Scenario::parse("b.toml", &t).unwrap();
        let p = plan(&s, &s.runs()[0]).unwrap();
        let e = fifo_bounds(&p).unwrap_err();
        assert!(
            e.contains("1 best-effort load(s) share the network unshaped"),
            "{e}"
        );
    }

    #[test]
    fn looping_flows_get_the_fixed_point_of_the_total_flow_analysis() {
        // mesh4 itself (5 loops, ring links 98 % full): the fixed point diverges
        let mesh = Scenario::parse("mesh4.toml", crate::lab::MESH4).unwrap();
        let p = plan(&mesh, &mesh.runs()[0]).unwrap();
        let e = fifo_bounds(&p).unwrap_err();
        assert!(e.contains("fixed point diverges"), "{e}");
        assert!(
            e.contains("run at 99.84 % of their rate, and the fixed point converges only with every flow at 42.90 % or less"),
            "{e}"
        );
        // two loops: bounded
        let text = crate::lab::MESH4.replace("loops = 5", "loops = 2");
        assert_ne!(text, crate::lab::MESH4);
        let mesh = Scenario::parse("mesh4.toml", &text).unwrap();
        let p = plan(&mesh, &mesh.runs()[0]).unwrap();
        let net = network(&p).unwrap();
        assert!(methods::is_cyclic(&net));
        let b = fifo_bounds(&p).unwrap();
        assert_eq!(b.len(), p.flows.len());
        // a flow's bound is at least its packet's transmission at every hop
        for f in &p.flows {
            let hops = (f.path.len() - 1) as i64;
            // ns to send the frame at 1 Gbit/s, faster than any of mesh4's links
            let tx = Link::ethernet(0).packet_bits(f.size) as i64;
            assert!(b[&f.id] >= hops * tx, "{}: {} ns", f.name, b[&f.id]);
        }
    }
}
