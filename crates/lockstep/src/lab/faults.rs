//! The pass/fail checks of a run with injected faults (`[[fault]]`), the same for
//! the lab and the simulator: both feed every delivered probe to a [`FaultCheck`]
//! and give it what each flow's sender sent and each router's slips.
//!
//! A packet is *bad* when it was lost or arrived outside the window its schedule
//! promises (TDP). What each fault may cost:
//! - **clock offset** within the guard: nothing (no slip, no bad packet); beyond
//!   it: slips, and no packet lost but those the slips dropped;
//! - **flood** (best-effort loads on the reserved links): nothing;
//! - **link down** and **router restart**: only packets on their way while the
//!   outage lasts, on the flows that cross the link or the router: every bad packet
//!   was sent between the outage's start minus the flow's longest latency and two
//!   time-cycles after the outage ends ("resume within two cycles"); every other
//!   flow keeps every packet (a packet late where the outage cannot reach it is the
//!   host's lateness: counted apart, not failed).
//!
//! Pure: time comes in the probes' own timestamps.

use std::collections::BTreeMap;

use lockstep_core::tdp::{Delivery, FlowWindow};
use lockstep_plan::fault::{Fault, FaultKind};
use serde::Serialize;

use crate::lab::plan::Plan;
use crate::lab::results::FlowInput;
use crate::report::samples::IntRows;

/// Most packets per flow the check remembers (a fault scenario is short).
pub const MAX_TRACKED: usize = 4_000_000;

/// One flow as the check sees it.
#[derive(Clone, Debug)]
pub struct FlowFacts {
    pub id: u32,
    pub name: String,
    /// Node names along the path, sender first.
    pub path: Vec<String>,
    pub window: Option<FlowWindow>,
}

/// The run the faults were injected into.
#[derive(Clone, Debug)]
pub struct RunFacts {
    /// When the run started and when its senders stopped, on the probes' clock (ns).
    pub start_ns: i64,
    pub end_ns: i64,
    /// A time-cycle (k·TF).
    pub cycle_ns: i64,
    pub guard_ns: i64,
}

/// What one fault did to the run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(default)]
pub struct FaultVerdict {
    pub fault: String,
    pub target: String,
    pub pass: bool,
    /// Flows whose path crosses what the fault hit.
    pub flows_hit: Vec<String>,
    /// Packets lost and packets outside their window, on the flows hit.
    pub lost: u64,
    pub late: u64,
    /// After an outage: packets late (none lost) where the outage could not reach
    /// them — a late host, not the fault; counted, not failed.
    pub late_unrelated: u64,
    /// Slips at the routers, all of them.
    pub slips: u64,
    /// After an outage: how long after it ended the last flow hit was whole again
    /// (every later packet in time), in ns; `None` when no packet was bad.
    pub recovered_after_ns: Option<i64>,
    /// Why it failed, or what it showed.
    pub detail: String,
}

#[derive(Clone, Debug, Default)]
struct Track {
    /// (seq, t0, good) of every delivered packet.
    got: Vec<(u64, i64, bool)>,
    /// The longest latency of a packet inside its window.
    max_good_ns: i64,
}

/// A bad stretch of one flow: lost or late packets sent between `from` and `to`
/// (probe clock, ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Bad {
    from: i64,
    to: i64,
    lost: u64,
    late: u64,
}

/// Collects the deliveries of a run, then judges each fault.
#[derive(Clone, Debug)]
pub struct FaultCheck {
    flows: Vec<FlowFacts>,
    tracks: BTreeMap<u32, Track>,
}

impl FaultCheck {
    pub fn new(flows: Vec<FlowFacts>) -> FaultCheck {
        let tracks = flows.iter().map(|f| (f.id, Track::default())).collect();
        FaultCheck { flows, tracks }
    }

    /// One delivered probe (a duplicate or another flow's is ignored).
    pub fn add(&mut self, d: &Delivery) {
        let p = &d.probe;
        self.add_packet(p.flow_id, p.seq, p.t0_ns, d.latency_ns());
    }

    /// One delivered packet of flow `flow`: its sequence number, when it was sent
    /// and its end-to-end latency.
    pub fn add_packet(&mut self, flow: u32, seq: u64, t0: i64, latency: i64) {
        let Some(f) = self.flows.iter().find(|f| f.id == flow) else {
            return;
        };
        let Some(t) = self.tracks.get_mut(&flow) else {
            return;
        };
        if t.got.len() >= MAX_TRACKED {
            return;
        }
        let good = f.window.as_ref().is_none_or(|w| in_window(w, latency));
        if good {
            t.max_good_ns = t.max_good_ns.max(latency);
        }
        t.got.push((seq, t0, good));
    }

    /// Every row of a receiver's packet file (`flow,seq,…,t0,…,latency`).
    pub fn add_packet_file(&mut self, text: impl std::io::Read) {
        let Some((cols, mut file)) = IntRows::open(text) else {
            return;
        };
        let at = |n| cols.get(n);
        let (f, s, t0, l) = (at("flow"), at("seq"), at("t0"), at("latency"));
        let mut row = Vec::new();
        while file.next_row(&mut row) {
            let cell = |i: Option<usize>| i.and_then(|i| row.get(i).copied().flatten());
            if let (Some(f), Some(s), Some(t0), Some(l)) = (cell(f), cell(s), cell(t0), cell(l)) {
                self.add_packet(f as u32, s as u64, t0, l);
            }
        }
    }

    /// Judges every fault; `sent` is each flow's packets sent, `slips` the routers'
    /// slips by router name.
    pub fn judge(
        mut self,
        faults: &[Fault],
        run: &RunFacts,
        sent: &BTreeMap<u32, u64>,
        slips: &BTreeMap<String, u64>,
    ) -> Vec<FaultVerdict> {
        let mut bad: BTreeMap<u32, Vec<Bad>> = BTreeMap::new();
        for (id, t) in &mut self.tracks {
            t.got.sort_unstable();
            t.got.dedup_by_key(|g| g.0);
            bad.insert(*id, bad_stretches(&t.got, sent.get(id).copied()));
        }
        let total_slips = slips.values().sum();
        faults
            .iter()
            .map(|f| self.verdict(f, run, &bad, total_slips))
            .collect()
    }

    fn verdict(
        &self,
        f: &Fault,
        run: &RunFacts,
        bad: &BTreeMap<u32, Vec<Bad>>,
        slips: u64,
    ) -> FaultVerdict {
        let hit: Vec<&FlowFacts> = self.flows.iter().filter(|x| crosses(x, f)).collect();
        let mut v = FaultVerdict {
            fault: f.name().to_string(),
            target: f.target(),
            pass: true,
            flows_hit: hit.iter().map(|x| x.name.clone()).collect(),
            lost: 0,
            late: 0,
            late_unrelated: 0,
            slips,
            recovered_after_ns: None,
            detail: String::new(),
        };
        for x in &hit {
            for b in bad.get(&x.id).into_iter().flatten() {
                v.lost += b.lost;
                v.late += b.late;
            }
        }
        match (&f.kind, f.outage()) {
            (FaultKind::ClockOffset { offset, .. }, _) => {
                clock_verdict(&mut v, offset.as_nanos(), run.guard_ns, bad)
            }
            (FaultKind::Flood, _) => {
                v.pass = v.lost == 0 && v.late == 0 && v.slips == 0;
                v.detail = if v.pass {
                    "nothing reserved lost, late or slipped".to_string()
                } else {
                    "reserved packets suffered from best effort".to_string()
                };
            }
            (_, Some((at, end))) => {
                let (at, end) = (run.start_ns + at.as_nanos(), run.start_ns + end.as_nanos());
                self.outage_verdict(&mut v, (at, end), run.cycle_ns, bad);
                let needed = end.saturating_add(2 * run.cycle_ns);
                if needed > run.end_ns {
                    v.pass = false;
                    v.detail = format!(
                        "the run ended {} before two cycles after the outage: recovery not seen",
                        lockstep_core::Duration(needed - run.end_ns)
                    );
                }
            }
            (_, None) => {}
        }
        v
    }

    /// Bad packets only on the flows hit, sent while they could meet the outage,
    /// and none later than two cycles after it.
    fn outage_verdict(
        &self,
        v: &mut FaultVerdict,
        (at, end): (i64, i64),
        cycle_ns: i64,
        bad: &BTreeMap<u32, Vec<Bad>>,
    ) {
        let resume_by = end.saturating_add(2 * cycle_ns);
        let mut recovered = None::<i64>;
        let mut never_back = false;
        for x in &self.flows {
            let is_hit = v.flows_hit.contains(&x.name);
            let longest = self.tracks.get(&x.id).map_or(0, |t| t.max_good_ns);
            for b in bad.get(&x.id).into_iter().flatten() {
                let reach = is_hit && b.to >= at.saturating_sub(longest) && b.from <= resume_by;
                if b.lost == 0 && !reach {
                    // late, nothing lost, where the outage cannot have been the cause:
                    // the host's lateness (the window column says why)
                    v.late_unrelated += b.late;
                    continue;
                }
                let why = if !is_hit {
                    Some("does not cross it".to_string())
                } else if b.to == i64::MAX {
                    Some("at the end: the flow never came back".to_string())
                } else if b.to < at.saturating_sub(longest) {
                    Some("sent before the outage could reach them".to_string())
                } else if b.from > resume_by {
                    Some("sent more than two cycles after it ended".to_string())
                } else {
                    None
                };
                if let Some(why) = why {
                    v.pass = false;
                    v.detail = format!(
                        "flow {}: {} lost and {} late packets {why}",
                        x.name, b.lost, b.late
                    );
                }
                if b.to == i64::MAX {
                    never_back = true;
                } else {
                    recovered = Some(recovered.unwrap_or(0).max(b.to.saturating_sub(end)));
                }
            }
        }
        v.recovered_after_ns = recovered.filter(|_| !never_back).map(|r| r.max(0));
        if v.pass {
            v.detail = match recovered {
                None => "no packet lost or late".to_string(),
                Some(r) => format!(
                    "whole again {} after the outage (two cycles: {})",
                    lockstep_core::Duration(r.max(0)),
                    lockstep_core::Duration(2 * cycle_ns)
                ),
            };
            if v.late_unrelated > 0 {
                v.detail.push_str(&format!(
                    "; {} late packets out of the outage's reach (the host's)",
                    v.late_unrelated
                ));
            }
        }
    }
}

/// The flows as the fault checks see them: path and promised window.
pub fn fault_flows(p: &Plan, inputs: &[FlowInput<'_>]) -> Vec<FlowFacts> {
    p.flows
        .iter()
        .map(|f| FlowFacts {
            id: f.id,
            name: f.name.clone(),
            path: f.path.clone(),
            window: inputs
                .iter()
                .find(|i| i.id == f.id)
                .and_then(|i| i.window.clone()),
        })
        .collect()
}

/// The run's start and end on the probes' clock, its cycle and its guard.
pub fn run_facts(p: &Plan, start_ns: i64, end_ns: i64) -> RunFacts {
    let guard = p
        .nodes
        .iter()
        .find_map(|n| n.config.as_ref().map(|c| c.node.frame.guard));
    RunFacts {
        start_ns,
        end_ns,
        cycle_ns: p.run.tf.as_nanos().saturating_mul(i64::from(p.k)),
        guard_ns: guard.map_or(0, |g| g.as_nanos()),
    }
}

/// The verdicts of a lab run from the files it wrote in `dir`: every receiver's
/// packet file, each flow's sent count and slips (its result lines).
pub fn judge_lab_run(
    p: &Plan,
    dir: &std::path::Path,
    lines: &[crate::lab::results::FlowLine],
    run: &RunFacts,
) -> Vec<FaultVerdict> {
    let none = BTreeMap::new();
    let inputs = crate::lab::results::flow_inputs(p, &none, &none);
    let mut check = FaultCheck::new(fault_flows(p, &inputs));
    for n in p
        .nodes
        .iter()
        .filter(|n| n.role == lockstep_core::tdp::Role::Receiver)
    {
        let path = dir.join(format!("{}-packets.csv", n.name));
        if let Ok(f) = std::fs::File::open(&path) {
            check.add_packet_file(std::io::BufReader::new(f));
        }
    }
    let id = |name: &str| p.flows.iter().find(|f| f.name == name).map(|f| f.id);
    let sent = lines
        .iter()
        .filter_map(|l| Some((id(&l.flow)?, l.sent)))
        .collect();
    let slips = BTreeMap::from([("routers".to_string(), lines.iter().map(|l| l.slips).sum())]);
    check.judge(&p.faults, run, &sent, &slips)
}

/// The checks of one run for people, a line each.
pub fn lines(label: &str, verdicts: &[FaultVerdict]) -> String {
    let mut out = String::new();
    for v in verdicts {
        let hit = if v.flows_hit.is_empty() {
            "no flow".to_string()
        } else {
            v.flows_hit.join(", ")
        };
        out.push_str(&format!(
            "{label}: fault {} {}: {} — {}; flows hit: {hit}; lost {}, late {}, slips {}\n",
            v.fault,
            v.target,
            if v.pass { "pass" } else { "FAIL" },
            v.detail,
            v.lost,
            v.late,
            v.slips
        ));
    }
    out
}

/// A failed fault check ends the command with exit code 1 (after the results are
/// written).
pub fn fail_on<'a>(
    runs: impl Iterator<Item = (&'a str, &'a [FaultVerdict])>,
) -> anyhow::Result<()> {
    let failed: Vec<String> = runs
        .flat_map(|(label, vs)| {
            vs.iter()
                .filter(|v| !v.pass)
                .map(move |v| format!("{label}: {} {}: {}", v.fault, v.target, v.detail))
        })
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(crate::CheckFailed(format!("fault check failed: {}", failed.join("; "))).into())
}

/// Within the guard nothing may go wrong; beyond it, slips may drop packets but
/// nothing else may be lost.
fn clock_verdict(v: &mut FaultVerdict, offset: i64, guard: i64, bad: &BTreeMap<u32, Vec<Bad>>) {
    let (lost, late): (u64, u64) = bad
        .values()
        .flatten()
        .fold((0, 0), |(l, t), b| (l + b.lost, t + b.late));
    (v.lost, v.late) = (lost, late);
    if offset.unsigned_abs() <= guard.unsigned_abs() {
        v.pass = v.slips == 0 && lost == 0 && late == 0;
        v.detail = if v.pass {
            "within the guard: no slip, nothing lost or late".to_string()
        } else {
            format!(
                "within the guard, yet {} slips, {lost} lost, {late} late",
                v.slips
            )
        };
    } else {
        v.pass = lost <= v.slips;
        v.detail = if v.pass {
            format!(
                "beyond the guard: {} slips, {lost} lost (no more than the slips)",
                v.slips
            )
        } else {
            format!("beyond the guard: {lost} lost but only {} slips", v.slips)
        };
    }
}

/// Whether a latency lies in the window the schedule promises.
fn in_window(w: &FlowWindow, latency: i64) -> bool {
    let (low, high) = w.bounds();
    w.tf_ns <= 0 || (low..=high).contains(&latency)
}

/// Whether flow `x`'s path crosses what `f` hits.
fn crosses(x: &FlowFacts, f: &Fault) -> bool {
    match &f.kind {
        FaultKind::ClockOffset { node, .. } | FaultKind::RouterRestart { node } => {
            x.path.contains(node)
        }
        FaultKind::Flood => true,
        FaultKind::LinkDown { ends: [a, b] } => x
            .path
            .windows(2)
            .any(|w| (&w[0] == a && &w[1] == b) || (&w[0] == b && &w[1] == a)),
    }
}

/// The bad stretches of one flow from its deliveries sorted by sequence number
/// (`sent`: how many it sent, so losses at the end are seen): a lost packet was
/// sent between its delivered neighbours.
fn bad_stretches(got: &[(u64, i64, bool)], sent: Option<u64>) -> Vec<Bad> {
    let mut out: Vec<Bad> = Vec::new();
    let mut push = |b: Bad| match out.last_mut() {
        Some(last) if b.from <= last.to => {
            last.to = last.to.max(b.to);
            last.lost += b.lost;
            last.late += b.late;
        }
        _ => out.push(b),
    };
    let mut prev: Option<(u64, i64)> = None;
    for &(seq, t0, good) in got {
        let (expect, before) = prev.map_or((0, t0), |(s, t)| (s + 1, t));
        if seq > expect {
            let lost = seq - expect;
            push(Bad {
                from: before,
                to: t0,
                lost,
                late: 0,
            });
        }
        if !good {
            push(Bad {
                from: t0,
                to: t0,
                lost: 0,
                late: 1,
            });
        }
        prev = Some((seq, t0));
    }
    let (after, from) = prev.map_or((0, i64::MIN), |(s, t)| (s + 1, t));
    if let Some(sent) = sent.filter(|&n| n > after) {
        push(Bad {
            from,
            to: i64::MAX,
            lost: sent - after,
            late: 0,
        });
    }
    out
}

#[cfg(test)]
#[path = "faults_tests.rs"]
mod tests;
