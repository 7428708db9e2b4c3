//! The TDP properties of `scenarios/line.toml` (sender → r1 edge → r2 core →
//! receiver), checked on the probes the receiver got, whoever delivered them: the
//! simulator (`scenario_line_sim.rs`) or the namespace lab (`scenario_line_lab.rs`).
//!
//! The property: a probe of the reserved flow leaves hop `n + 1` exactly `d` frames
//! after it left hop `n`, where a hop's frame is `FrameClock::frame_of(tx_app_ns)` of
//! its hop record (the router's application send time), with the scenario's TF and
//! `k` and epoch 0 (what the plan gives every router), and `d` is the scenario's.
//! [`check_line_properties`] measures it and does not assert: each test decides what
//! must hold for which probes (see their header comments).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use lockstep_core::frame::FrameClock;
use lockstep_core::tdp::Delivery;
use lockstep_core::Duration;
use lockstep_plan::plan::{plan, Plan};
use lockstep_plan::scenario::{RunMode, Scenario};

/// The scenario file, as the tests read it.
pub const LINE: &str = include_str!("../../../../scenarios/line.toml");

/// What the checks need of the scenario, all from the file and its TDP plan.
pub struct LineParams {
    pub tf: Duration,
    /// Frames per cycle.
    pub k: u32,
    /// Forwarding delay at a router, in frames.
    pub d: u32,
    /// The reserved flow's id (the probes' `flow_id`).
    pub flow: u32,
    pub flow_name: String,
    /// The routers the flow crosses, in path order: (name, node id of its hop
    /// records).
    pub routers: Vec<(String, u32)>,
    /// The plan of the TDP run (the lab and the simulator plan it the same way).
    pub plan: Plan,
    /// The scenario's traffic time of a run (the lab test runs shorter).
    #[allow(dead_code)]
    pub duration: Duration,
}

impl LineParams {
    pub fn clock(&self) -> FrameClock {
        FrameClock::new(self.tf, self.k).expect("the scenario's TF and k make a frame clock")
    }

    pub fn router_ids(&self) -> Vec<u32> {
        self.routers.iter().map(|(_, id)| *id).collect()
    }
}

/// The line scenario's parameters and its TDP run's plan.
pub fn line_params() -> LineParams {
    let s = Scenario::parse("line.toml", LINE).expect("scenarios/line.toml parses");
    assert_eq!(s.tfs.len(), 1, "line.toml has one TF");
    let spec = s
        .runs()
        .into_iter()
        .find(|r| r.mode == RunMode::Tdp)
        .expect("line.toml has a TDP run");
    let p = plan(&s, &spec).expect("line.toml plans");
    assert_eq!(p.flows.len(), 1, "line.toml has one reserved flow");
    let f = &p.flows[0];
    let routers: Vec<(String, u32)> = f
        .path
        .iter()
        .skip(1)
        .take(f.path.len().saturating_sub(2))
        .map(|n| (n.clone(), p.node(n).expect("a planned node").id))
        .collect();
    assert_eq!(routers.len(), 2, "line: r1 then r2, {:?}", f.path);
    // the plan's schedule agrees: every link after the first is crossed d frames
    // after the one before it (no per-link or per-flow d in the file)
    assert!(
        f.offsets.windows(2).all(|w| w[1] - w[0] == s.d),
        "plan offsets {:?} with d = {}",
        f.offsets,
        s.d
    );
    LineParams {
        tf: s.tfs[0],
        k: s.k,
        d: s.d,
        flow: f.id,
        flow_name: f.name.clone(),
        routers,
        plan: p,
        duration: s.duration,
    }
}

/// A pair of consecutive hops not `d` frames apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotD {
    pub seq: u64,
    /// Index of the later hop in the probe's hop records (1 = the second router).
    pub hop: usize,
    /// Frames from the earlier hop's send to the later one's.
    pub frames: i64,
}

/// What [`check_line_properties`] saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Probes of the reserved flow looked at.
    pub probes: usize,
    /// Deliveries of other flows (ignored).
    pub other_flows: usize,
    /// Consecutive hop pairs compared (over the probes whose hop records name the
    /// routers in path order).
    pub pairs: usize,
    /// Of them, the pairs exactly `d` frames apart.
    pub exact: usize,
    /// The others.
    pub not_d: Vec<NotD>,
    /// Frames between consecutive hops → pairs.
    pub gaps: BTreeMap<i64, usize>,
    /// Probes whose hop records are not exactly the routers of the path, in order.
    pub off_path: Vec<u64>,
    /// Sequence numbers seen more than once.
    pub duplicates: Vec<u64>,
    /// Every sequence number seen.
    pub seqs: BTreeSet<u64>,
}

impl Report {
    /// The sequence numbers `0 .. sent` not among the probes looked at (the lost
    /// ones, when every delivery was given).
    pub fn missing_below(&self, sent: u64) -> Vec<u64> {
        (0..sent).filter(|s| !self.seqs.contains(s)).collect()
    }
}

/// Measures the line properties on `deliveries` (see the module doc).
pub fn check_line_properties(deliveries: &[Delivery], line: &LineParams) -> Report {
    let clock = line.clock();
    let routers = line.router_ids();
    let d = i64::from(line.d);
    let mut r = Report::default();
    for del in deliveries {
        let p = &del.probe;
        if p.flow_id != line.flow {
            r.other_flows += 1;
            continue;
        }
        r.probes += 1;
        if !r.seqs.insert(p.seq) {
            r.duplicates.push(p.seq);
        }
        let hops = p.hops();
        let nodes: Vec<u32> = hops.iter().map(|h| h.node).collect();
        if nodes != routers {
            r.off_path.push(p.seq);
            continue;
        }
        for (i, w) in hops.windows(2).enumerate() {
            let frames = clock.frame_of(w[1].tx_app_ns) - clock.frame_of(w[0].tx_app_ns);
            r.pairs += 1;
            *r.gaps.entry(frames).or_default() += 1;
            if frames == d {
                r.exact += 1;
            } else {
                r.not_d.push(NotD {
                    seq: p.seq,
                    hop: i + 1,
                    frames,
                });
            }
        }
    }
    r
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} probes ({} of other flows), {} hop pairs: {} exactly d frames apart, {} not (first: {:?}); frames between hops → pairs {:?}; {} off path (first: {:?}), {} duplicates",
            self.probes,
            self.other_flows,
            self.pairs,
            self.exact,
            self.not_d.len(),
            self.not_d.iter().take(5).collect::<Vec<_>>(),
            self.gaps,
            self.off_path.len(),
            self.off_path.iter().take(5).collect::<Vec<_>>(),
            self.duplicates.len(),
        )
    }
}
