//! `lockstep sim run` of the shaped-switch scenario ([`crate::lab::shaped`]): the
//! lab's switch in virtual time, one run per (shaper, `Ts`), the bound for A's packets
//! next to what the simulation observed.
//!
//! # The network
//!
//! The scenario becomes a plan like any other, so the simulator's own build path makes
//! the nodes: hosts A–E, each on its own link to a switch `sw`, the core's router in
//! FIFO mode (it forwards at once; each port's link is one FIFO queue with a byte
//! limit, towards B the lab's tbf `limit`, [`lab::PORT_QUEUE_LIMIT`]). Every link runs
//! at `port_rate`, as the Fast Ethernet switch of loeser's Fig. 4 (the lab's veths
//! have no rate of their own): a host's burst reaches the switch at the port's rate,
//! the peak rate the bound assumes of every flow. A is a sender whose flow has one
//! probe of `probe_size` per frame, B its receiver; A's packets are measured by the
//! lab's own results pipeline. C, D and E are the plan's loads to B, each turned into a
//! greedy source behind its shaper ([`lockstep_sim::shaped`]): lockstep's bucket
//! refilled once per `Ts`, or the core's models of tbf and htb, with the bucket
//! `b = r·Ts + M` of the row. Every shaped source starts with a full bucket at the
//! same instant: the symmetric burst.
//!
//! # A's phase
//!
//! With an ideal host a probe every `probe_period` sits at the same instant of every
//! shaping interval (the period divides `Ts` or `Ts` divides it), so it would sample
//! the queue at one phase of the refills only. A's probes are simulated
//! [`PHASE_STEP`] further apart, which sweeps them across the interval as a real
//! host's timer jitter does. The bound keeps the scenario's period: a slower probe
//! stays within it.
//!
//! # What is compared
//!
//! The bound is the lab's ([`Shaped::bound_on_port`]) for the simulated port's
//! framing: with `--framing tbf` exactly the lab's, with `ethernet` the same flows
//! counted in the 24 bytes more a real Ethernet port sends per frame. It covers A's
//! packet from its arrival at the switch to the end of its transmission towards B:
//! the `switch` column, A's one-way delay less its own link (exact in virtual time:
//! A's link carries nothing else). The one-way delay (application to application, as
//! the lab's) is shown too. With an ideal host the switch delay never exceeds the
//! bound; host models, processing and propagation add time the bound does not count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{anyhow, Context, Result};
use lockstep_core::Duration;
use lockstep_plan::plan::{plan, Plan};
use lockstep_plan::scenario::Scenario;
use lockstep_sim::shaped::{port_towards, ShapedLoad};
use lockstep_sim::source::{Pattern, ShaperModel};
use lockstep_sim::{EngineStats, Kind, SimOptions};
use serde::Serialize;
use serde_json::{json, Value};

use super::SimRunArgs;
use crate::lab::results::{assemble, flow_inputs, node_ids, Collected, FlowsMeter, TxJoin};
use crate::lab::shaped::{self as lab, Shaped, ShaperKind};
use crate::report::html::LabReport;
use crate::report::{finish_lab_run, ResultDoc};
use crate::stop::stop_requested;
use crate::{Interrupted, UsageError};

/// How much further apart A's probes are simulated than `probe_period` (see the
/// module documentation).
pub const PHASE_STEP: Duration = Duration(1_000);
/// Simulated time after the traffic ends for what is queued to arrive.
const DRAIN_NS: i64 = 1_000_000_000;
/// Simulated time per step of the loop (progress is checked between steps).
const STEP_NS: i64 = 50_000_000;
/// The shaped hosts, in the order of `rates` (the plan's loads in that order).
const SHAPED: [&str; 3] = ["c", "d", "e"];
const SWITCH: &str = "sw";
/// What the result document says of the shapers' CPU time.
const CPU: &str = "n/a (simulated)";

/// Bytes a probe's IP packet needs beyond its payload (IPv4 20, UDP 8).
const IP_UDP: u32 = 28;
/// What the planner adds to a probe for the switch's hop record.
const HOP_RECORD: u32 = 32;

/// The plan's scenario file: A–E on their links to the switch, A's probe flow, C, D
/// and E's loads to B. The planner sizes a probe with room for the switch's hop
/// record; [`plan_of`] puts A's probe back to the scenario's size.
pub fn plan_scenario(s: &Shaped) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[scenario]\nname = \"{}\"\ntf = \"{}\"\nk = 2\nd = 1\nmodes = [\"fifo\"]\nduration = \"{}\"\n",
        s.name.replace(['"', '\\'], "_"),
        Duration(s.probe_period.as_nanos() + PHASE_STEP.as_nanos()),
        s.duration
    );
    for (n, role) in [
        ("a", "sender"),
        ("b", "receiver"),
        ("c", "sender"),
        ("d", "sender"),
        ("e", "sender"),
        (SWITCH, "edge"),
    ] {
        let _ = writeln!(t, "[[node]]\nname = \"{n}\"\nrole = \"{role}\"\n");
    }
    for h in ["a", "b", "c", "d", "e"] {
        let _ = writeln!(
            t,
            "[[link]]\nbetween = [\"{h}\", \"{SWITCH}\"]\nrate = \"{}bps\"\n",
            s.port_rate.0
        );
    }
    let _ = writeln!(
        t,
        "[[flow]]\nname = \"a\"\npath = [\"a\", \"{SWITCH}\", \"b\"]\nsize = \"{}B\"\npackets = 1\nevery = 1\n",
        s.probe_size.0 + u64::from(IP_UDP + HOP_RECORD)
    );
    for (h, r) in SHAPED.iter().zip(&s.rates) {
        let _ = writeln!(
            t,
            "[[load]]\nfrom = \"{h}\"\nto = \"b\"\ntool = \"lockstep\"\nrate = \"{}bps\"\nsize = \"{}B\"\n",
            r.0, s.payload.0
        );
    }
    t
}

/// The plan of the simulated switch. A's probe is the scenario's `probe_size` of
/// payload, as in the lab: no room for a hop record (the planner's probes have room
/// for one per router), so the switch forwards it without one.
pub fn plan_of(s: &Shaped) -> Result<Plan> {
    let text = plan_scenario(s);
    let bug = |e: String| {
        anyhow!("the simulated shaped-switch network is refused ({e}); this is a bug in lockstep")
    };
    let sc = Scenario::parse(&format!("{} (simulated network)", s.name), &text)
        .map_err(|e| bug(e.to_string()))?;
    let run = sc
        .runs()
        .into_iter()
        .next()
        .ok_or_else(|| bug("no run".into()))?;
    let mut p = plan(&sc, &run).map_err(|e| bug(e.to_string()))?;
    let payload = u32::try_from(s.probe_size.0).map_err(|e| bug(e.to_string()))?;
    let ip = payload + IP_UDP;
    for f in &mut p.flows {
        f.size = ip;
    }
    for n in &mut p.nodes {
        let Some(file) = n.config.as_mut() else {
            continue;
        };
        for f in &mut file.node.flows {
            for r in &mut f.rows {
                r.size = ip;
            }
        }
        for f in &mut file.live.flows {
            f.size = payload;
        }
    }
    Ok(p)
}

/// What shapes C, D and E in a row.
fn model(
    s: &Shaped,
    kind: ShaperKind,
    ts: Duration,
    rate: lockstep_core::units::BitRate,
) -> ShaperModel {
    let bucket = lockstep_core::units::Size(s.bucket_bytes(rate, ts));
    match kind {
        ShaperKind::Lockstep => ShaperModel::Lockstep { rate, bucket, ts },
        ShaperKind::Tbf => ShaperModel::Tbf { rate, bucket },
        ShaperKind::Htb => ShaperModel::Htb { rate, bucket },
    }
}

/// One shaped flow of a row.
#[derive(Clone, Debug, Serialize)]
pub struct ShapedFlow {
    pub host: String,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    /// What the shaper let through, in frames of payload + 42 bytes, over the traffic
    /// time (bit/s).
    pub wire_rate_bps: f64,
    /// Packets that waited for tokens, and the longest wait.
    pub delayed: u64,
    pub max_wait_ns: i64,
}

/// What one row observed.
#[derive(Clone, Debug, Serialize)]
pub struct Observed {
    /// A's probes.
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    /// A's one-way delay (application to application; with an ideal host, A's link,
    /// the switch and the port).
    pub min_delay_ns: Option<i64>,
    pub p99_delay_ns: Option<i64>,
    pub max_delay_ns: Option<i64>,
    /// The largest delay of A's packets from their arrival at the switch to the end
    /// of their transmission towards B: what the bound covers.
    pub max_switch_delay_ns: Option<i64>,
    pub shaped: Vec<ShapedFlow>,
    /// Frames the port towards B sent and dropped (its queue full).
    pub port_sent: u64,
    pub port_dropped: u64,
}

/// One simulated row.
pub struct Outcome {
    pub kind: ShaperKind,
    pub ts: Duration,
    pub observed: Observed,
    pub collected: Collected,
    pub stats: EngineStats,
    pub wall_ns: i64,
    /// Simulated time the row had reached when a stop ended it (the rest was not
    /// simulated, nor were packets in flight then let arrive).
    pub interrupted_at: Option<Duration>,
}

fn wall_ns() -> i64 {
    lockstep_linux::now(lockstep_core::ClockId::Monotonic).ns
}

fn node_index(p: &Plan, name: &str) -> Result<usize> {
    p.nodes
        .iter()
        .position(|n| n.name == name)
        .ok_or_else(|| anyhow!("the simulated network has no node {name}"))
}

/// Simulates one row: C, D, E shaped by `kind` with the bucket of `ts`.
pub fn simulate(
    s: &Shaped,
    p: &Plan,
    opts: &SimOptions,
    kind: ShaperKind,
    ts: Duration,
    prefix: &str,
    quiet: bool,
) -> Result<Outcome> {
    let loads: Vec<ShapedLoad> = s
        .rates
        .iter()
        .enumerate()
        .map(|(i, r)| ShapedLoad {
            load: i,
            model: model(s, kind, ts, *r),
            pattern: Pattern::Greedy,
        })
        .collect();
    let mut e =
        lockstep_sim::shaped::engine(p, opts, &loads).map_err(|e| UsageError(e.to_string()))?;
    let (sw, to_b) =
        port_towards(p, SWITCH, "b").ok_or_else(|| anyhow!("the switch has no port to B"))?;
    e.nodes[sw].ports[to_b].link.limit_bytes = lab::PORT_QUEUE_LIMIT;
    let a = node_index(p, "a")?;
    let b = node_index(p, "b")?;
    // A's frame on its own link (idle but for A's probes), then the propagation of
    // both links: the rest of A's one-way delay is the switch's
    let a_link = e.nodes[a]
        .ports
        .first()
        .map_or(0, |l| l.link.transmit_ns(s.probe_size.0 as usize + 42))
        .saturating_add(opts.propagation_ns.saturating_mul(2));

    let ids = node_ids(p);
    let tx = TxJoin::default();
    let none = BTreeMap::new();
    let inputs = flow_inputs(p, &none, &none);
    let duration = s.duration;
    let mut meter = FlowsMeter::new(&inputs, p.run.tf.as_nanos(), duration.as_nanos(), &ids, &tx);
    let mut switch_max: Option<i64> = None;
    let mut on_delivery = |_: usize, d: &lockstep_core::tdp::Delivery| {
        meter.add(d);
        if let Some(k) = d.kernel_rx_ns {
            let v = k - d.probe.t_send_ns - a_link;
            switch_max = Some(switch_max.map_or(v, |m| m.max(v)));
        }
    };
    let started = wall_ns();
    let end = opts.start_ns.saturating_add(duration.as_nanos());
    let mut shown = started;
    let mut step = STEP_NS;
    let mut interrupted_at = None;
    while e.now() < end {
        if stop_requested() {
            interrupted_at = Some(Duration(e.now().saturating_sub(opts.start_ns)));
            break;
        }
        let until = e.now().saturating_add(step).min(end);
        let t = wall_ns();
        e.run_until(until, &mut on_delivery);
        step = super::run::next_step(step, wall_ns() - t, STEP_NS);
        if !quiet && wall_ns() - shown >= 1_000_000_000 {
            shown = wall_ns();
            progress(prefix, &e, opts.start_ns, duration, shown - started);
        }
    }
    e.stop_sources();
    if interrupted_at.is_none() {
        e.run_until(end.saturating_add(DRAIN_NS), &mut on_delivery);
    }
    let wall = wall_ns() - started;
    if !quiet {
        progress(prefix, &e, opts.start_ns, duration, wall);
    }

    let mut sent = BTreeMap::new();
    if let Kind::Host(h) = &e.nodes[a].kind {
        if let Some((snd, _)) = &h.sender {
            sent.extend(snd.sent_per_flow());
        }
    }
    let measured: BTreeMap<u32, _> = inputs.iter().map(|f| f.id).zip(meter.finish()).collect();
    let final_inputs = flow_inputs(p, &sent, &none);
    let mut collected = assemble(p, &final_inputs, &measured, Vec::new(), Vec::new());
    collected.report.label = format!("{kind} Ts={ts}");
    let line = collected.lines.first().cloned();

    let sinks = match &e.nodes[b].kind {
        Kind::Host(h) => h.sinks.clone(),
        Kind::Router(_) => Vec::new(),
    };
    let secs = duration.as_nanos().max(1) as f64 / 1e9;
    let mut shaped = Vec::new();
    for (i, host) in SHAPED.iter().enumerate() {
        let n = node_index(p, host)?;
        let Kind::Host(h) = &e.nodes[n].kind else {
            continue;
        };
        let Some(src) = h.shaped.first() else {
            continue;
        };
        let port = p.loads.get(i).map(|l| l.dst.port());
        let received = sinks
            .iter()
            .find(|(q, _)| Some(*q) == port)
            .map_or(0, |(_, n)| *n);
        let st = src.stats();
        shaped.push(ShapedFlow {
            host: host.to_string(),
            sent: src.sent,
            received,
            lost: src.sent.saturating_sub(received),
            wire_rate_bps: (src.sent * src.frame_bytes() * 8) as f64 / secs,
            delayed: st.delayed,
            max_wait_ns: st.max_wait_ns,
        });
    }
    let port = &e.nodes[sw].ports[to_b].link;
    let observed = Observed {
        sent: line.as_ref().map_or(0, |l| l.sent),
        received: line.as_ref().map_or(0, |l| l.received),
        lost: line.as_ref().map_or(0, |l| l.lost),
        min_delay_ns: line.as_ref().and_then(|l| l.min_ns),
        p99_delay_ns: line.as_ref().and_then(|l| l.p99_ns),
        max_delay_ns: line.as_ref().and_then(|l| l.max_ns),
        max_switch_delay_ns: switch_max,
        shaped,
        port_sent: port.sent,
        port_dropped: port.dropped,
    };
    Ok(Outcome {
        kind,
        ts,
        observed,
        collected,
        stats: e.stats(),
        wall_ns: wall,
        interrupted_at,
    })
}

fn progress(prefix: &str, e: &lockstep_sim::Engine, start: i64, duration: Duration, wall: i64) {
    let done = Duration((e.now() - start).clamp(0, duration.as_nanos()));
    let st = e.stats();
    let secs = wall.max(1) as f64 / 1e9;
    eprintln!(
        "{prefix}{done} of {duration} simulated, wall {secs:.1}s, {:.2} M events/s",
        st.events as f64 / secs / 1e6,
    );
}

/// `sim run` of a shaped-switch scenario (`text` is the file's).
pub fn run(s: &Shaped, text: &str, args: &SimRunArgs) -> Result<()> {
    if args.overrides.tf.is_some() || args.overrides.modes.is_some() {
        return Err(UsageError(format!(
            "{}: --tf and --modes do not apply to the shaped-switch scenario (one FIFO switch, no frames)",
            args.scenario.display()
        ))
        .into());
    }
    let mut s = s.clone();
    if let Some(d) = args.duration {
        s.duration = d;
    }
    let opts = super::run::options(args)?;
    let p = plan_of(&s)?;
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| super::run::default_output(&s.name));
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("--output: cannot create {}", dir.display()))?;
    crate::report::write_atomic(&dir.join("scenario.toml"), text.as_bytes())?;
    let mut doc = ResultDoc::new("sim.shaped-switch", config(&s, args, &opts));
    let rows = lab::plan_rows(&s);
    let mut outcomes: Vec<Outcome> = Vec::new();
    for (i, (kind, ts)) in rows.iter().enumerate() {
        if stop_requested() {
            break;
        }
        let prefix = format!("sim {} [{}/{} {kind} Ts={ts}] ", s.name, i + 1, rows.len());
        outcomes.push(simulate(
            &s,
            &p,
            &opts,
            *kind,
            *ts,
            &prefix,
            crate::say::quiet(),
        )?);
    }
    // what a stop left undone: the row it cut short, the rows not simulated
    let mut undone: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            let at = o.interrupted_at?;
            Some(format!(
                "{} Ts={} stopped at {at} of {}",
                o.kind, o.ts, s.duration
            ))
        })
        .collect();
    let skipped: Vec<String> = rows[outcomes.len()..]
        .iter()
        .map(|(k, t)| format!("{k} Ts={t}"))
        .collect();
    if !skipped.is_empty() {
        undone.push(format!("not simulated: {}", skipped.join(", ")));
    }
    let interrupted = (!undone.is_empty()).then(|| undone.join("; "));
    if let Some(i) = &interrupted {
        doc.insert("interrupted", i);
    }
    finish(
        &s,
        args,
        &opts,
        &mut doc,
        &dir,
        &outcomes,
        interrupted.as_deref(),
    )?;
    match interrupted {
        Some(i) => Err(Interrupted(i).into()),
        None => Ok(()),
    }
}

fn config(s: &Shaped, args: &SimRunArgs, opts: &SimOptions) -> Value {
    json!({
        "scenario": s,
        "file": args.scenario.display().to_string(),
        "simulated": true,
        "duration": s.duration.to_string(),
        "seed": opts.seed,
        "host_model": opts.host.label(),
        "processing": args.processing.to_string(),
        "propagation": args.propagation.to_string(),
        "framing": opts.links.framing(opts.framing).name(),
        "framing_bytes": opts.links.framing(opts.framing).overhead(),
        "link_rate_bps": s.port_rate.0,
        "port_queue_bytes": lab::PORT_QUEUE_LIMIT,
        "probe_period_simulated": Duration(s.probe_period.as_nanos() + PHASE_STEP.as_nanos()).to_string(),
        "sources": "greedy behind the row's shaper, buckets full at the common start",
    })
}

/// The bound of a row for the simulated port's framing.
fn bound(s: &Shaped, o: &Outcome, opts: &SimOptions) -> Option<lab::Bound> {
    s.bound_on_port(
        o.kind,
        o.ts,
        u64::from(opts.links.framing(opts.framing).overhead()),
    )
    .ok()
}

fn us(ns: Option<i64>) -> String {
    ns.map_or_else(|| "-".into(), |n| format!("{:.1}", n as f64 / 1e3))
}

fn q_us(q: &lockstep_netcalc::Q) -> String {
    format!("{:.1}", q.to_f64() * 1e6)
}

/// Whether `ns` exceeds the bound `q` (seconds), exactly.
fn above(ns: i64, q: &lockstep_netcalc::Q) -> bool {
    let v = lockstep_netcalc::Q::ratio(i128::from(ns), 1_000_000_000)
        .unwrap_or(lockstep_netcalc::Q::zero());
    &v > q
}

/// The table of the rows, the lab's columns where the simulation has them.
pub fn table(s: &Shaped, opts: &SimOptions, outcomes: &[Outcome]) -> String {
    let overhead = u64::from(opts.links.framing(opts.framing).overhead());
    let mut t = String::new();
    let _ = writeln!(
        t,
        "{:>8} {:>6} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>10} | {:>6} {:>6} {:>4} | {:>10} | {:>14} | loeser t_max t_est t_obs µs; CPU %",
        "shaper", "Ts", "t_max µs", "t_est µs", "t_max(b)", "max µs", "p99 µs", "switch µs", "sent A", "recv A", "lost", "lost C/D/E", "Mbit/s C/D/E"
    );
    for o in outcomes {
        let b = bound(s, o, opts);
        let (tm, te) = b.as_ref().map_or(("-".into(), "-".into()), |b| {
            (q_us(&b.delay), q_us(&b.delay_estimate))
        });
        let tl = s
            .bound_on_port(ShaperKind::Tbf, o.ts, overhead)
            .map(|b| q_us(&b.delay))
            .unwrap_or_default();
        let ob = &o.observed;
        let mut sw = us(ob.max_switch_delay_ns);
        if let (Some(n), Some(b)) = (ob.max_switch_delay_ns, &b) {
            if above(n, &b.delay) {
                sw.push('*');
            }
        }
        let lost = ob
            .shaped
            .iter()
            .map(|f| f.lost.to_string())
            .collect::<Vec<_>>()
            .join("/");
        let rate = ob
            .shaped
            .iter()
            .map(|f| format!("{:.1}", f.wire_rate_bps / 1e6))
            .collect::<Vec<_>>()
            .join("/");
        let _ = writeln!(
            t,
            "{:>8} {:>6} | {tm:>9} {te:>9} {tl:>9} | {:>9} {:>9} {sw:>10} | {:>6} {:>6} {:>4} | {lost:>10} | {rate:>14} | {}",
            o.kind.name(),
            o.ts.to_string(),
            us(ob.max_delay_ns),
            us(ob.p99_delay_ns),
            ob.sent,
            ob.received,
            ob.lost,
            lab::paper(o.kind, o.ts)
        );
    }
    let _ = writeln!(
        t,
        "simulated (virtual time): host model {}, framing {} (a frame costs its IP packet + {} bytes on every link), \
         every link {} bit/s, the port towards B queues {} bytes; seed {}. \
         bound: Eq. 6 (t_max) and Eq. 7 (t_est) for A's packets, one FIFO port, t_mux {}; bucket b = r·Ts + M for every shaper \
         (tbf/htb have no Ts: the row's Ts picks b); C/D/E as lockstep (r, b + r·Ts), tbf (r, b), htb (r, b + M); \
         t_max(b): Eq. 6 with (r, b) (loeser's convention). \
         max, p99 = A's one-way delay; switch = from A's packet's arrival at the switch to the end of its transmission \
         towards B, what t_max bounds (* above t_max). A's probes run {} apart (probe_period + {}) so that they sweep the shaping interval. \
         CPU: {CPU}. loeser: T4 t_max t_est t_obs µs (t_max/t_est add 80 µs), T5 CPU % C/D/E, T7 buckets B, t_max - t_obs µs",
        opts.host.label(),
        opts.links.framing(opts.framing).name(),
        opts.links.framing(opts.framing).overhead(),
        s.port_rate.0,
        lab::PORT_QUEUE_LIMIT,
        opts.seed,
        s.t_mux,
        Duration(s.probe_period.as_nanos() + PHASE_STEP.as_nanos()),
        PHASE_STEP,
    );
    t
}

fn row_json(s: &Shaped, opts: &SimOptions, o: &Outcome) -> Value {
    let mut m = lab::bound_json(
        s,
        o.kind,
        o.ts,
        u64::from(opts.links.framing(opts.framing).overhead()),
    );
    m.insert("label".into(), json!(format!("{} Ts={}", o.kind, o.ts)));
    m.insert(
        "observed".into(),
        serde_json::to_value(&o.observed).unwrap_or(Value::Null),
    );
    m.insert(
        "within_bound".into(),
        match (o.observed.max_switch_delay_ns, bound(s, o, opts)) {
            (Some(n), Some(b)) => json!(!above(n, &b.delay)),
            _ => Value::Null,
        },
    );
    m.insert("shaper_cpu".into(), json!(CPU));
    m.insert("events".into(), json!(o.stats.events));
    m.insert("packet_hops".into(), json!(o.stats.packet_hops));
    m.insert("link_drops".into(), json!(o.stats.link_drops));
    Value::Object(m)
}

fn perf_json(o: &Outcome) -> Value {
    let secs = o.wall_ns.max(1) as f64 / 1e9;
    json!({
        "label": format!("{} Ts={}", o.kind, o.ts),
        "wall_ns": o.wall_ns,
        "events": o.stats.events,
        "packet_hops": o.stats.packet_hops,
        "events_per_s": o.stats.events as f64 / secs,
        "packet_hops_per_s": o.stats.packet_hops as f64 / secs,
        "peak_events_queued": o.stats.peak_events,
    })
}

fn finish(
    s: &Shaped,
    args: &SimRunArgs,
    opts: &SimOptions,
    doc: &mut ResultDoc,
    dir: &Path,
    outcomes: &[Outcome],
    interrupted: Option<&str>,
) -> Result<()> {
    let mut tab = table(s, opts, outcomes);
    if let Some(i) = interrupted {
        let _ = writeln!(
            tab,
            "interrupted by SIGINT/SIGTERM: {i} (packets in flight at the stop count as lost)"
        );
    }
    for o in outcomes {
        let within = match (o.observed.max_switch_delay_ns, bound(s, o, opts)) {
            (Some(n), Some(b)) => !above(n, &b.delay),
            _ => true,
        };
        if !within {
            doc.warn(format!(
                "{} Ts={}: A's switch delay ({}) is above t_max",
                o.kind,
                o.ts,
                Duration(o.observed.max_switch_delay_ns.unwrap_or(0))
            ));
        }
        if o.observed.received == 0 {
            doc.warn(format!("{} Ts={}: no packet of A arrived", o.kind, o.ts));
        }
    }
    let report = LabReport {
        title: format!("lockstep sim: {} (shaped-switch, simulated)", s.name),
        scenario: s.name.clone(),
        generated_at: doc.started_at.clone(),
        command: doc.command.clone(),
        host: serde_json::to_value(&doc.host).unwrap_or(Value::Null),
        runs: outcomes
            .iter()
            .map(|o| o.collected.report.clone())
            .collect(),
        notes: tab.lines().map(str::to_string).collect(),
    };
    // `results` is fixed by the seed byte for byte: no wall-clock time, argument
    // vector or host facts in it (the document has them outside `results`)
    let in_results = LabReport {
        generated_at: String::new(),
        command: Vec::new(),
        host: Value::Null,
        ..report.clone()
    };
    doc.insert(
        "runs",
        outcomes
            .iter()
            .map(|o| row_json(s, opts, o))
            .collect::<Vec<_>>(),
    );
    doc.insert("report", &in_results);
    let mut v = serde_json::to_value(&*doc)?;
    if let Value::Object(m) = &mut v {
        m.insert(
            "performance".into(),
            json!({
                "runs": outcomes.iter().map(perf_json).collect::<Vec<_>>(),
                "peak_rss_bytes": lockstep_linux::rusage::peak_rss_bytes(),
            }),
        );
    }
    let text = serde_json::to_string_pretty(&v)?;
    let mut human = String::from("simulated (virtual time)\n");
    human.push_str(&tab);
    for o in outcomes {
        let secs = o.wall_ns.max(1) as f64 / 1e9;
        let _ = writeln!(
            human,
            "{} Ts={}: {} events, {} packet-hops in {secs:.2}s wall",
            o.kind, o.ts, o.stats.events, o.stats.packet_hops
        );
    }
    let _ = writeln!(
        human,
        "results: {}\nreport:  {}",
        dir.display(),
        dir.join("report.html").display()
    );
    finish_lab_run(dir, &text, &report, &human, args.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = include_str!("../../../../scenarios/shaped-switch.toml");

    #[test]
    fn the_plan_is_the_labs_switch() {
        let s = Shaped::parse("shaped-switch.toml", FILE).unwrap();
        let p = plan_of(&s).unwrap();
        let names: Vec<&str> = p.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d", "e", "sw"]);
        assert_eq!(p.run.tf, Duration(1_001_000));
        assert_eq!(p.flows.len(), 1);
        assert_eq!(p.flows[0].size, 92);
        assert_eq!(p.flows[0].path, ["a", "sw", "b"]);
        let loads: Vec<(usize, Option<u64>, Option<u32>)> = p
            .loads
            .iter()
            .map(|l| (l.from, l.rate_bps, l.size))
            .collect();
        assert_eq!(
            loads,
            [
                (2, Some(40_000_000), Some(1472)),
                (3, Some(32_000_000), Some(1472)),
                (4, Some(20_000_000), Some(1472))
            ]
        );
        assert!(p
            .nodes
            .iter()
            .flat_map(|n| &n.ifaces)
            .all(|f| f.rate_bps == 100_000_000));
        assert_eq!(port_towards(&p, "sw", "b").map(|(n, _)| n), Some(5));
    }

    #[test]
    fn the_bound_is_the_labs_on_the_labs_port() {
        let s = Shaped::parse("shaped-switch.toml", FILE).unwrap();
        for kind in ShaperKind::ALL {
            for ts in &s.ts {
                let lab = s.bound_of(kind, *ts).unwrap();
                assert_eq!(s.bound_on_port(kind, *ts, 14).unwrap(), lab);
                // a real Ethernet port: 24 bytes more per frame, a longer bound
                let eth = s.bound_on_port(kind, *ts, 38).unwrap();
                assert!(eth.delay > lab.delay, "{kind} {ts}");
            }
        }
    }

    #[test]
    fn rows_are_deterministic_and_within_the_bound() {
        let mut s = Shaped::parse("shaped-switch.toml", FILE).unwrap();
        s.duration = Duration::from_millis(200);
        let p = plan_of(&s).unwrap();
        let opts = SimOptions {
            framing: lockstep_sim::Framing::Tbf,
            ..SimOptions::default()
        };
        let ts = Duration::from_millis(1);
        let o = simulate(&s, &p, &opts, ShaperKind::Lockstep, ts, "", true).unwrap();
        let again = simulate(&s, &p, &opts, ShaperKind::Lockstep, ts, "", true).unwrap();
        assert_eq!(
            serde_json::to_value(&o.observed).unwrap(),
            serde_json::to_value(&again.observed).unwrap()
        );
        let ob = &o.observed;
        assert!(ob.received > 150 && ob.lost == 0, "{ob:?}");
        assert_eq!(ob.port_dropped, 0);
        let b = s.bound_on_port(ShaperKind::Lockstep, ts, 14).unwrap();
        assert!(!above(ob.max_switch_delay_ns.unwrap(), &b.delay), "{ob:?}");
        // the one-way delay is the switch delay plus A's 106-byte frame at 100 Mbit/s
        assert_eq!(
            ob.max_delay_ns.unwrap() - ob.max_switch_delay_ns.unwrap(),
            8_480
        );
    }
}
