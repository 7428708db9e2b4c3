use super::*;
use crate::plan::plan;
use crate::scenario::Scenario;

const LINK_DOWN: &str = include_str!("../../../scenarios/faults/link-down.toml");
const RESTART: &str = include_str!("../../../scenarios/faults/router-restart.toml");
const WITHIN: &str = include_str!("../../../scenarios/faults/clock-within-guard.toml");
const BEYOND: &str = include_str!("../../../scenarios/faults/clock-beyond-guard.toml");
const FLOOD: &str = include_str!("../../../scenarios/faults/flood.toml");

/// The link-down scenario with its `[[fault]]` table replaced by `fault`.
fn with_fault(fault: &str) -> String {
    let at = LINK_DOWN.find("[[fault]]").expect("a fault table");
    format!("{}{fault}", &LINK_DOWN[..at])
}

fn err(text: &str) -> String {
    Scenario::parse("t.toml", text).unwrap_err().to_string()
}

#[test]
fn the_shipped_fault_scenarios_parse() {
    let ms = Duration::from_millis;
    let s = Scenario::parse("link-down.toml", LINK_DOWN).unwrap();
    let ends = ["r1".to_string(), "r2".to_string()];
    let want = Fault {
        kind: FaultKind::LinkDown { ends },
        at: ms(1000),
        down: ms(100),
    };
    assert_eq!(s.faults, vec![want]);
    assert_eq!(s.faults[0].outage(), Some((ms(1000), ms(1100))));
    assert_eq!(s.faults[0].target(), "r1-r2");
    let r = Scenario::parse("router-restart.toml", RESTART).unwrap();
    assert_eq!(r.faults[0].name(), "router-restart");
    assert_eq!(r.faults[0].down, ms(50));
    for (text, off) in [(WITHIN, -10_000), (BEYOND, -100_000)] {
        let c = Scenario::parse("clock.toml", text).unwrap();
        let node = "r2".to_string();
        let offset = Duration(off);
        assert_eq!(c.faults[0].kind, FaultKind::ClockOffset { node, offset });
        assert_eq!(c.faults[0].outage(), None);
    }
    let f = Scenario::parse("flood.toml", FLOOD).unwrap();
    assert_eq!(f.faults[0].kind, FaultKind::Flood);
    assert_eq!(f.loads.len(), 1);
}

#[test]
fn a_clock_offset_is_the_routers_own_configuration() {
    let s = Scenario::parse("clock.toml", BEYOND).unwrap();
    let p = plan(&s, &s.runs()[0]).unwrap();
    let offset = |name: &str| {
        let n = p.node(name).and_then(|n| n.config.as_ref()).unwrap();
        n.node.frame.offset
    };
    assert_eq!(offset("r2"), Duration(-100_000));
    assert_eq!(offset("r1"), Duration::ZERO);
    assert_eq!(p.faults, s.faults);
}

#[test]
fn bad_faults_are_named_by_field() {
    let cases = [
        (
            "[[fault]]\nkind = \"meteor\"\n",
            "fault[0].kind: expected clock-offset, link-down, router-restart or flood, got \"meteor\"",
        ),
        (
            "[[fault]]\nkind = \"clock-offset\"\nnode = \"r2\"\noffset = \"1us\"\nat = \"1s\"\n",
            "fault[0].at: a clock-offset fault has no `at` (it takes node, offset)",
        ),
        (
            "[[fault]]\nkind = \"clock-offset\"\nnode = \"r2\"\n",
            "fault[0].offset: a clock-offset fault needs `offset`",
        ),
        (
            "[[fault]]\nkind = \"clock-offset\"\nnode = \"tx\"\noffset = \"1us\"\n",
            "fault[0].node: \"tx\" is a host; faults of this kind hit routers",
        ),
        (
            "[[fault]]\nkind = \"router-restart\"\nnode = \"r9\"\nat = \"1s\"\nfor = \"1ms\"\n",
            "fault[0].node: no node \"r9\"",
        ),
        (
            "[[fault]]\nkind = \"clock-offset\"\nnode = \"r2\"\noffset = \"2s\"\n",
            "fault[0].offset: more than 1s either way",
        ),
        (
            "[[fault]]\nkind = \"link-down\"\nbetween = [\"tx\", \"r2\"]\nat = \"1s\"\nfor = \"1ms\"\n",
            "fault[0].between: no link between \"tx\" and \"r2\"",
        ),
        (
            "[[fault]]\nkind = \"link-down\"\nbetween = [\"r1\"]\nat = \"1s\"\nfor = \"1ms\"\n",
            "fault[0].between: give the two nodes of a link",
        ),
        (
            "[[fault]]\nkind = \"link-down\"\nbetween = [\"r1\", \"r2\"]\nat = \"-1s\"\nfor = \"1ms\"\n",
            "fault[0].at: must not be negative",
        ),
        (
            "[[fault]]\nkind = \"link-down\"\nbetween = [\"r1\", \"r2\"]\nat = \"1s\"\nfor = \"0s\"\n",
            "fault[0].for: an outage lasts more than 0 and at most 60s, got 0ns",
        ),
        (
            "[[fault]]\nkind = \"link-down\"\nbetween = [\"r1\", \"r2\"]\nat = \"1.9s\"\nfor = \"98ms\"\n",
            "fault[0].at: the run (2s) ends before two cycles (4ms) after the outage ends: recovery could not be seen",
        ),
        (
            "[[fault]]\nkind = \"flood\"\n",
            "fault[0].kind: a flood fault needs the [[load]]s that flood the links",
        ),
    ];
    for (fault, want) in cases {
        let e = err(&with_fault(fault));
        assert!(e.ends_with(want), "{fault}\n got: {e}\nwant: {want}");
    }
    let many = "[[fault]]\nkind = \"clock-offset\"\nnode = \"r2\"\noffset = \"1us\"\n".repeat(17);
    assert!(err(&with_fault(&many)).ends_with("fault[16]: at most 16 faults in a scenario"));
}

#[test]
fn a_longer_frame_from_the_command_line_must_leave_room_to_recover() {
    let s = Scenario::parse("link-down.toml", LINK_DOWN).unwrap();
    // 8 frames of 60 ms: two cycles (960 ms) after 1.1 s is past the 2 s run
    let e = s
        .with_overrides(Some(Duration::from_millis(60)), None)
        .unwrap_err()
        .to_string();
    assert!(
        e.ends_with(
            "fault[0]: --tf 60ms: the run (2s) ends before two cycles after this link-down ends"
        ),
        "{e}"
    );
}

#[test]
fn a_run_must_last_two_cycles_past_every_outage() {
    let s = Scenario::parse("link-down.toml", LINK_DOWN).unwrap();
    let cycle = Duration::from_millis(2);
    assert_eq!(
        check_room(&s.faults, Duration::from_millis(2000), cycle),
        Ok(())
    );
    assert_eq!(
        check_room(&s.faults, Duration::from_millis(1000), cycle),
        Err("fault[0] (link-down r1-r2) ends at 1.1s, and recovery takes two cycles (4ms) to see: the run lasts 1s; give --duration 1.104s or more".to_string())
    );
}

#[test]
fn time_scaling_stretches_every_fault() {
    let s = Scenario::parse("link-down.toml", LINK_DOWN).unwrap();
    let s = s.scaled(10).unwrap();
    assert_eq!(s.faults[0].at, Duration::from_millis(10_000));
    assert_eq!(s.faults[0].down, Duration::from_millis(1000));
    let c = Scenario::parse("clock.toml", WITHIN)
        .unwrap()
        .scaled(2)
        .unwrap();
    let FaultKind::ClockOffset { offset, .. } = c.faults[0].kind else {
        panic!("a clock offset");
    };
    assert_eq!(offset, Duration(-20_000));
}
