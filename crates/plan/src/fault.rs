//! Faults injected on purpose (`[[fault]]` in a scenario): what a run does to its
//! own network so the checks can show that the reservations survive it.
//!
//! ```toml
//! [[fault]]
//! kind = "clock-offset"      # the router's clock reads this far ahead (negative:
//! node = "r2"                # behind) of everybody else's, the whole run
//! offset = "20us"
//!
//! [[fault]]
//! kind = "link-down"         # the link carries nothing, both ways, from `at`
//! between = ["r1", "r2"]     # (after the run starts) for `for`
//! at = "1s"
//! for = "100ms"
//!
//! [[fault]]
//! kind = "router-restart"    # the router is killed (SIGKILL: everything it holds
//! node = "r2"                # is lost) at `at` and started again `for` later
//! at = "1s"
//! for = "50ms"
//!
//! [[fault]]
//! kind = "flood"             # the scenario's [[load]]s flood the reserved links
//!                            # with best effort: nothing reserved may suffer
//! ```

use lockstep_core::Duration;
use serde::Deserialize;
use toml::Spanned;

use crate::scenario::{LinkSpec, Loc, NodeSpec, ScenarioError, Source};

/// Most faults in one scenario.
pub const MAX_FAULTS: usize = 16;
/// Largest clock offset (either way).
pub const MAX_OFFSET: Duration = Duration::from_millis(1000);
/// Longest outage.
pub const MAX_DOWN: Duration = Duration::from_millis(60_000);

/// What goes wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The router's clock reads `offset` ahead of true time (behind when negative).
    ClockOffset { node: String, offset: Duration },
    /// The link between the two nodes carries nothing, either way.
    LinkDown { ends: [String; 2] },
    /// The router is killed and, after the outage, started afresh.
    RouterRestart { node: String },
    /// The scenario's best-effort loads flood the reserved links (the loads are
    /// the fault; this names the check).
    Flood,
}

/// One fault of a run: what, from when (after the run's start) and for how long
/// (a clock offset lasts the whole run: `at` and `down` are zero).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    pub kind: FaultKind,
    pub at: Duration,
    pub down: Duration,
}

impl Fault {
    /// `clock-offset`, `link-down`, `router-restart`.
    pub fn name(&self) -> &'static str {
        match self.kind {
            FaultKind::ClockOffset { .. } => "clock-offset",
            FaultKind::LinkDown { .. } => "link-down",
            FaultKind::RouterRestart { .. } => "router-restart",
            FaultKind::Flood => "flood",
        }
    }

    /// What it hits: `r2`, `r1-r2`.
    pub fn target(&self) -> String {
        match &self.kind {
            FaultKind::ClockOffset { node, .. } | FaultKind::RouterRestart { node } => node.clone(),
            FaultKind::LinkDown { ends } => format!("{}-{}", ends[0], ends[1]),
            FaultKind::Flood => "every link".to_string(),
        }
    }

    /// The outage, `[at, at + down)`; `None` for a fault that lasts the run.
    pub fn outage(&self) -> Option<(Duration, Duration)> {
        match self.kind {
            FaultKind::ClockOffset { .. } | FaultKind::Flood => None,
            _ => Some((self.at, Duration(self.at.as_nanos() + self.down.as_nanos()))),
        }
    }

    /// The same fault in a run `s` times slower.
    pub fn scaled(&self, s: i64) -> Fault {
        let mut f = self.clone();
        f.at = Duration(f.at.as_nanos().saturating_mul(s));
        f.down = Duration(f.down.as_nanos().saturating_mul(s));
        if let FaultKind::ClockOffset { offset, .. } = &mut f.kind {
            *offset = Duration(offset.as_nanos().saturating_mul(s));
        }
        f
    }
}

/// Whether a run of `duration` with time-cycles of `cycle` leaves two cycles after
/// every outage, so recovery can be seen; the error says what `--duration` would.
pub fn check_room(faults: &[Fault], duration: Duration, cycle: Duration) -> Result<(), String> {
    for (i, f) in faults.iter().enumerate() {
        let Some((_, end)) = f.outage() else {
            continue;
        };
        let needed = end.as_nanos() + 2 * cycle.as_nanos();
        if needed > duration.as_nanos() {
            return Err(format!(
                "fault[{i}] ({} {}) ends at {end}, and recovery takes two cycles ({}) to see: the run lasts {duration}; give --duration {} or more",
                f.name(),
                f.target(),
                Duration(2 * cycle.as_nanos()),
                Duration(needed)
            ));
        }
    }
    Ok(())
}

/// A `[[fault]]` table as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFault {
    kind: Spanned<String>,
    #[serde(default)]
    node: Option<Spanned<String>>,
    #[serde(default)]
    between: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    offset: Option<Spanned<String>>,
    #[serde(default)]
    at: Option<Spanned<String>>,
    #[serde(default, rename = "for")]
    down: Option<Spanned<String>>,
}

/// What checking a fault needs of the rest of the scenario.
pub(crate) struct Context<'a> {
    pub src: &'a Source,
    pub nodes: &'a [NodeSpec],
    pub links: &'a [LinkSpec],
    /// How many `[[load]]`s the scenario has.
    pub loads: usize,
    pub duration: Duration,
    /// The longest time-cycle of the runs: a run must go on for two of them after
    /// an outage, so recovery can be seen.
    pub longest_cycle: Duration,
}

/// Checks every `[[fault]]`; errors name `fault[i].field`.
pub(crate) fn check(
    cx: &Context<'_>,
    raw: &[Spanned<RawFault>],
) -> Result<(Vec<Fault>, Vec<Loc>), ScenarioError> {
    if let Some(extra) = raw.get(MAX_FAULTS) {
        let field = format!("fault[{MAX_FAULTS}]");
        let msg = format!("at most {MAX_FAULTS} faults in a scenario");
        return Err(cx.src.error(&extra.span(), field, msg));
    }
    let mut faults = Vec::new();
    let mut locs = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let loc = Loc {
            span: r.span(),
            field: format!("fault[{i}]"),
        };
        faults.push(one(cx, i, &loc, r.get_ref())?);
        locs.push(loc);
    }
    Ok((faults, locs))
}

fn one(cx: &Context<'_>, i: usize, loc: &Loc, r: &RawFault) -> Result<Fault, ScenarioError> {
    let f = |x: &str| format!("fault[{i}].{x}");
    let err = |s: &std::ops::Range<usize>, field: &str, m: String| cx.src.error(s, f(field), m);
    let kind = r.kind.get_ref().as_str();
    let allowed: &[&str] = match kind {
        "clock-offset" => &["node", "offset"],
        "link-down" => &["between", "at", "for"],
        "router-restart" => &["node", "at", "for"],
        "flood" => &[],
        other => {
            let m = format!(
                "expected clock-offset, link-down, router-restart or flood, got \"{other}\""
            );
            return Err(err(&r.kind.span(), "kind", m));
        }
    };
    for (field, span) in r.given() {
        if !allowed.contains(&field) {
            let m = format!(
                "a {kind} fault has no `{field}` (it takes {})",
                allowed.join(", ")
            );
            return Err(err(&span, field, m));
        }
    }
    let missing = |field: &str| {
        let m = format!("a {kind} fault needs `{field}`");
        cx.src.error(&loc.span, f(field), m)
    };
    if kind == "flood" {
        if cx.loads == 0 {
            let m = "a flood fault needs the [[load]]s that flood the links".to_string();
            return Err(err(&r.kind.span(), "kind", m));
        }
        return Ok(Fault {
            kind: FaultKind::Flood,
            at: Duration::ZERO,
            down: Duration::ZERO,
        });
    }
    if kind == "clock-offset" {
        let node = router(
            cx,
            r.node.as_ref().ok_or_else(|| missing("node"))?,
            &f("node"),
        )?;
        let o = r.offset.as_ref().ok_or_else(|| missing("offset"))?;
        let offset = duration(cx, o, &f("offset"))?;
        if offset.as_nanos().unsigned_abs() > MAX_OFFSET.as_nanos().unsigned_abs() {
            return Err(err(
                &o.span(),
                "offset",
                format!("more than {MAX_OFFSET} either way"),
            ));
        }
        return Ok(Fault {
            kind: FaultKind::ClockOffset { node, offset },
            at: Duration::ZERO,
            down: Duration::ZERO,
        });
    }
    let at_s = r.at.as_ref().ok_or_else(|| missing("at"))?;
    let at = duration(cx, at_s, &f("at"))?;
    if at.is_negative() {
        return Err(err(&at_s.span(), "at", "must not be negative".into()));
    }
    let down_s = r.down.as_ref().ok_or_else(|| missing("for"))?;
    let down = duration(cx, down_s, &f("for"))?;
    if !down.is_positive() || down > MAX_DOWN {
        let m = format!("an outage lasts more than 0 and at most {MAX_DOWN}, got {down}");
        return Err(err(&down_s.span(), "for", m));
    }
    let end = at.as_nanos() + down.as_nanos() + 2 * cx.longest_cycle.as_nanos();
    if end > cx.duration.as_nanos() {
        let m = format!(
            "the run ({}) ends before two cycles ({}) after the outage ends: recovery could not be seen",
            cx.duration,
            Duration(2 * cx.longest_cycle.as_nanos())
        );
        return Err(err(&at_s.span(), "at", m));
    }
    let kind = if kind == "link-down" {
        let b = r.between.as_ref().ok_or_else(|| missing("between"))?;
        FaultKind::LinkDown {
            ends: link(cx, b, &f("between"))?,
        }
    } else {
        let node = router(
            cx,
            r.node.as_ref().ok_or_else(|| missing("node"))?,
            &f("node"),
        )?;
        FaultKind::RouterRestart { node }
    };
    Ok(Fault { kind, at, down })
}

impl RawFault {
    /// The optional fields given, with where.
    fn given(&self) -> Vec<(&'static str, std::ops::Range<usize>)> {
        let mut out = Vec::new();
        let mut add = |name, s: Option<std::ops::Range<usize>>| {
            if let Some(s) = s {
                out.push((name, s));
            }
        };
        add("node", self.node.as_ref().map(Spanned::span));
        add("between", self.between.as_ref().map(Spanned::span));
        add("offset", self.offset.as_ref().map(Spanned::span));
        add("at", self.at.as_ref().map(Spanned::span));
        add("for", self.down.as_ref().map(Spanned::span));
        out
    }
}

fn duration(cx: &Context<'_>, s: &Spanned<String>, field: &str) -> Result<Duration, ScenarioError> {
    Duration::parse(s.get_ref()).map_err(|e| cx.src.error(&s.span(), field, e.to_string()))
}

/// The name of a router of the scenario.
fn router(cx: &Context<'_>, s: &Spanned<String>, field: &str) -> Result<String, ScenarioError> {
    let name = s.get_ref();
    match cx.nodes.iter().find(|n| &n.name == name) {
        Some(n) if n.is_router() => Ok(name.clone()),
        Some(_) => {
            let m = format!("\"{name}\" is a host; faults of this kind hit routers");
            Err(cx.src.error(&s.span(), field, m))
        }
        None => Err(cx
            .src
            .error(&s.span(), field, format!("no node \"{name}\""))),
    }
}

/// The two ends of a link of the scenario, as written.
fn link(
    cx: &Context<'_>,
    s: &Spanned<Vec<Spanned<String>>>,
    field: &str,
) -> Result<[String; 2], ScenarioError> {
    let names: Vec<&String> = s.get_ref().iter().map(Spanned::get_ref).collect();
    let [a, b] = names.as_slice() else {
        return Err(cx
            .src
            .error(&s.span(), field, "give the two nodes of a link"));
    };
    let index = |n: &str| cx.nodes.iter().position(|x| x.name == n);
    let (Some(ia), Some(ib)) = (index(a), index(b)) else {
        let m = format!("no link between \"{a}\" and \"{b}\": no such node");
        return Err(cx.src.error(&s.span(), field, m));
    };
    let found = cx
        .links
        .iter()
        .any(|l| l.ends == [ia, ib] || l.ends == [ib, ia]);
    if !found {
        let m = format!("no link between \"{a}\" and \"{b}\"");
        return Err(cx.src.error(&s.span(), field, m));
    }
    Ok([(*a).clone(), (*b).clone()])
}

#[cfg(test)]
#[path = "fault_tests.rs"]
mod tests;
