//! The deterministic twins of the `scenario_toml` and `nodefile_toml` fuzz targets
//! (fuzz/fuzz_targets/): a few thousand inputs from a fixed seed — random bytes and
//! damaged copies of the scenarios in scenarios/ and of the node files the planner
//! makes of them — must never panic the scenario parser, the planner or the node
//! file parser, and keep the targets' invariants.

use std::path::Path;

use lockstep_plan::nodefile;
use lockstep_plan::plan::{node_file_toml, plan};
use lockstep_plan::scenario::Scenario;
use proptest::prelude::*;

#[path = "../../../fuzz/smoke/inputs.rs"]
mod inputs;

/// The small plain scenarios of scenarios/ (each parses and plans): the seeds.
const SCENARIOS: &[&str] = &[
    include_str!("../../../scenarios/forwarding.toml"),
    include_str!("../../../scenarios/gateway.toml"),
    include_str!("../../../scenarios/line.toml"),
];

/// The large ones: checked whole, not mutated (planning them and reading their
/// node files back takes a tenth of a second each in a debug build; the fuzz
/// target has them in its corpus).
const LARGE: &[&str] = &[
    include_str!("../../../scenarios/mesh4.toml"),
    include_str!("../../../scenarios/mesh4-482.toml"),
];

/// Files of scenarios/ of the lab's other kinds (`[scenario] kind`): the scenario
/// parser refuses them, a mutation may not.
const OTHERS: &[&str] = &[
    include_str!("../../../scenarios/cbr-jitter.toml"),
    include_str!("../../../scenarios/rt-service.toml"),
    include_str!("../../../scenarios/shaped-switch.toml"),
];

fn scenario_seeds() -> Vec<Vec<u8>> {
    SCENARIOS
        .iter()
        .chain(OTHERS)
        .map(|s| s.as_bytes().to_vec())
        .collect()
}

/// The node files of the first run of every scenario.
fn node_file_seeds() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for text in SCENARIOS {
        let s = Scenario::parse("seed.toml", text).expect("a shipped scenario parses");
        let run = &s.runs()[0];
        let p = plan(&s, run).expect("a shipped scenario plans");
        for n in &p.nodes {
            if let Some(f) = &n.config {
                out.push(node_file_toml(f).expect("serializes").into_bytes());
            }
        }
    }
    out
}

/// What the `scenario_toml` target does with one input.
fn scenario_case(text: &str) {
    let Ok(s) = Scenario::parse("fuzz.toml", text) else {
        return;
    };
    if s.k > 4096 || s.nodes.len() > 16 {
        return;
    }
    for run in s.runs().iter().take(4) {
        let Ok(p) = plan(&s, run) else { continue };
        for n in &p.nodes {
            let Some(file) = &n.config else { continue };
            let toml = node_file_toml(file).expect("a planned node file serializes");
            if let Err(e) = nodefile::parse(Path::new("node.toml"), &toml) {
                panic!("the plan made a node file its parser refuses: {e}\n{toml}");
            }
        }
    }
}

/// What the `nodefile_toml` target does with one input.
fn node_file_case(text: &str) {
    let Ok(file) = nodefile::parse(Path::new("node.toml"), text) else {
        return;
    };
    let toml = node_file_toml(&file).expect("a parsed node file serializes");
    let again = match nodefile::parse(Path::new("node.toml"), &toml) {
        Ok(f) => f,
        Err(e) => panic!("a parsed node file, written out, no longer parses: {e}\n{toml}"),
    };
    // a file holding a NaN is not equal even to itself: compare only the others
    #[allow(clippy::eq_op)]
    let comparable = file == file;
    if comparable {
        assert_eq!(again, file, "round trip changed the node file\n{toml}");
    }
}

#[test]
fn the_seeds_pass_whole() {
    for s in SCENARIOS.iter().chain(LARGE) {
        assert!(Scenario::parse("seed.toml", s).is_ok());
        scenario_case(s);
    }
    let seeds = node_file_seeds();
    assert!(seeds.len() >= 6);
    for f in &seeds {
        let text = std::str::from_utf8(f).expect("UTF-8");
        assert!(nodefile::parse(Path::new("node.toml"), text).is_ok());
        node_file_case(text);
    }
}

proptest! {
    #![proptest_config(inputs::config(2000))]

    #[test]
    fn fuzz_smoke_scenario_toml(text in inputs::text(scenario_seeds())) {
        scenario_case(&text);
    }
}

proptest! {
    #![proptest_config(inputs::config(1500))]

    #[test]
    fn fuzz_smoke_nodefile_toml(text in inputs::text(node_file_seeds())) {
        node_file_case(&text);
    }
}
