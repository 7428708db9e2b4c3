//! Injecting a scenario's faults into a lab run, on the run's clock: a link is
//! taken down (`ip link set … down` on both veth ends, in their namespaces) and up
//! again; a router's process is killed with SIGKILL and started again with the same
//! node file. A clock offset needs nothing here (it is in the router's node file);
//! a flood is the scenario's own loads. What was done, and when, is noted.
//!
//! The schedule ([`Injector::due`]) is pure; [`apply`] does it.

use anyhow::{anyhow, Context, Result};
use lockstep_core::Duration;
use lockstep_linux::{iface, netns};
use lockstep_plan::fault::{Fault, FaultKind};
use lockstep_plan::plan::Plan;
use lockstep_plan::scenario::{RouterLayout, Scenario};

use super::topo::ns_name;

/// One thing to do to the running network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Both ends of a link (namespace, interface) down or up.
    Link {
        ends: [(String, String); 2],
        up: bool,
        what: String,
    },
    /// SIGKILL the router's process.
    Kill { node: String },
    /// Start the router's process again.
    Restart { node: String },
}

/// An action due at `at` (TAI ns) for fault `fault` (its index in the plan).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub at: i64,
    pub fault: usize,
    pub action: Action,
}

/// The faults of a run as a schedule of actions (TAI ns).
#[derive(Clone, Debug, Default)]
pub struct Injector {
    steps: Vec<Step>,
    next: usize,
}

impl Injector {
    /// The outages of `p`'s faults for a run starting at `start_ns`. A router to
    /// restart must have a process of its own (`routers = "per-node"`).
    pub fn new(s: &Scenario, p: &Plan, run_id: &str, start_ns: i64) -> Result<Injector> {
        let mut steps = Vec::new();
        for (fault, f) in p.faults.iter().enumerate() {
            let mut step = |at, action| steps.push(Step { at, fault, action });
            let Some((at, end)) = f.outage() else {
                continue;
            };
            let (at, end) = (start_ns + at.as_nanos(), start_ns + end.as_nanos());
            match &f.kind {
                FaultKind::LinkDown { ends: [a, b] } => {
                    let ends = [link_end(p, run_id, a, b)?, link_end(p, run_id, b, a)?];
                    let what = format!("{a}-{b}");
                    let down = Action::Link {
                        ends: ends.clone(),
                        up: false,
                        what: what.clone(),
                    };
                    step(at, down);
                    step(
                        end,
                        Action::Link {
                            ends,
                            up: true,
                            what,
                        },
                    );
                }
                FaultKind::RouterRestart { node } => {
                    if s.routers != RouterLayout::PerNode {
                        return Err(anyhow!(
                            "{}: scenario.routers: a router-restart fault kills one router's process; set routers = \"per-node\"",
                            s.source.file
                        ));
                    }
                    step(at, Action::Kill { node: node.clone() });
                    step(end, Action::Restart { node: node.clone() });
                }
                FaultKind::ClockOffset { .. } | FaultKind::Flood => {}
            }
        }
        steps.sort_by_key(|s| s.at);
        Ok(Injector { steps, next: 0 })
    }

    /// The actions due by `now` not yet handed out, in time order.
    pub fn due(&mut self, now: i64) -> Vec<Step> {
        let mut out = Vec::new();
        while let Some(step) = self.steps.get(self.next).filter(|s| s.at <= now) {
            out.push(step.clone());
            self.next += 1;
        }
        out
    }
}

/// The faults as they were injected: each outage from when its first action began
/// to when its last was done (`taken`: fault index, began, done, in order; the
/// machine may have done them late). A fault with no action keeps its plan.
pub fn as_injected(faults: &[Fault], start_ns: i64, taken: &[(usize, i64, i64)]) -> Vec<Fault> {
    let mut out = faults.to_vec();
    for (i, f) in out.iter_mut().enumerate() {
        let mine: Vec<&(usize, i64, i64)> = taken.iter().filter(|t| t.0 == i).collect();
        let (Some(first), Some(last)) = (mine.first(), mine.last()) else {
            continue;
        };
        f.at = Duration(first.1 - start_ns);
        f.down = Duration((last.2 - first.1).max(1));
    }
    out
}

/// The namespace and interface of `me`'s end of the link to `peer`.
fn link_end(p: &Plan, run_id: &str, me: &str, peer: &str) -> Result<(String, String)> {
    let node = p
        .node(me)
        .ok_or_else(|| anyhow!("fault: no node \"{me}\""))?;
    let peer_i = p
        .nodes
        .iter()
        .position(|n| n.name == peer)
        .ok_or_else(|| anyhow!("fault: no node \"{peer}\""))?;
    let f = node
        .ifaces
        .iter()
        .find(|f| f.peer == peer_i)
        .ok_or_else(|| anyhow!("fault: no link between \"{me}\" and \"{peer}\""))?;
    Ok((ns_name(run_id, me), f.ifname.clone()))
}

/// Takes a link's two ends down or up.
pub fn set_link(ends: &[(String, String); 2], up: bool) -> Result<()> {
    for (ns, dev) in ends {
        let dev2 = dev.clone();
        netns::run_in(ns, move || {
            if up {
                iface::set_up(&dev2)
            } else {
                iface::set_down(&dev2)
            }
        })?
        .with_context(|| format!("setting {ns}:{dev} {}", if up { "up" } else { "down" }))?;
    }
    Ok(())
}

/// How a note says when an action happened (began and done): `at 1.002s` after
/// the start, how late and how long it took.
pub fn note(start_ns: i64, planned: i64, (began, done): (i64, i64), action: &Action) -> String {
    let what = match action {
        Action::Link { up, what, .. } => format!("link {what} {}", if *up { "up" } else { "down" }),
        Action::Kill { node } => format!("{node} killed (SIGKILL)"),
        Action::Restart { node } => format!("{node} started again"),
    };
    format!(
        "fault: {what} at {} (planned {}, {} late, took {})",
        Duration(began - start_ns),
        Duration(planned - start_ns),
        Duration(began - planned),
        Duration(done - began)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINK_DOWN: &str = include_str!("../../../../scenarios/faults/link-down.toml");
    const RESTART: &str = include_str!("../../../../scenarios/faults/router-restart.toml");

    fn planned(text: &str) -> (Scenario, Plan) {
        let s = Scenario::parse("f.toml", text).unwrap();
        let p = lockstep_plan::plan::plan(&s, &s.runs()[0]).unwrap();
        (s, p)
    }

    #[test]
    fn a_link_goes_down_and_up_on_both_ends_at_its_times() {
        let (s, p) = planned(LINK_DOWN);
        let mut inj = Injector::new(&s, &p, "t1", 5_000_000_000).unwrap();
        assert!(inj.due(5_999_999_999).is_empty());
        let at = |at, action| Step {
            at,
            fault: 0,
            action,
        };
        let ends = [
            ("ls-t1-r1".to_string(), "to-r2".to_string()),
            ("ls-t1-r2".to_string(), "to-r1".to_string()),
        ];
        let what = "r1-r2".to_string();
        let down = Action::Link {
            ends: ends.clone(),
            up: false,
            what: what.clone(),
        };
        assert_eq!(inj.due(6_000_000_000), vec![at(6_000_000_000, down)]);
        assert!(inj.due(6_000_000_000).is_empty(), "handed out once");
        let up = Action::Link {
            ends,
            up: true,
            what,
        };
        assert_eq!(inj.due(9_000_000_000), vec![at(6_100_000_000, up)]);
        // judged by when it was done: down 3 ms late, up 50 ms late
        let taken = [
            (0, 6_003_000_000, 6_004_000_000),
            (0, 6_150_000_000, 6_151_000_000),
        ];
        let f = as_injected(&p.faults, 5_000_000_000, &taken);
        assert_eq!(f[0].at, Duration(1_003_000_000));
        assert_eq!(f[0].down, Duration(148_000_000));
    }

    #[test]
    fn a_restart_needs_a_process_per_router() {
        let (s, p) = planned(RESTART);
        let mut inj = Injector::new(&s, &p, "t2", 0).unwrap();
        let node = "r2".to_string();
        let kill = Step {
            at: 1_000_000_000,
            fault: 0,
            action: Action::Kill { node: node.clone() },
        };
        let again = Step {
            at: 1_050_000_000,
            fault: 0,
            action: Action::Restart { node },
        };
        assert_eq!(inj.due(i64::MAX), vec![kill, again]);
        let shared = RESTART.replace("routers = \"per-node\"", "routers = \"one-process\"");
        let (s, p) = planned(&shared);
        let e = Injector::new(&s, &p, "t3", 0).unwrap_err().to_string();
        assert_eq!(
            e,
            "f.toml: scenario.routers: a router-restart fault kills one router's process; set routers = \"per-node\""
        );
    }

    #[test]
    fn notes_say_what_was_done_and_how_late() {
        let a = Action::Kill { node: "r2".into() };
        assert_eq!(
            note(0, 1_000_000_000, (1_000_250_000, 1_000_300_000), &a),
            "fault: r2 killed (SIGKILL) at 1.00025s (planned 1s, 250us late, took 50us)"
        );
    }
}
