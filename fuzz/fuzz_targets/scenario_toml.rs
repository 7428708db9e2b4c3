//! Fuzz the scenario file (`scenarios/*.toml`) and the planner: arbitrary text must
//! never panic `Scenario::parse`; a scenario that parses must plan (or be refused
//! with an error) without panicking, and every node file a plan makes must be
//! accepted by the node file parser, as `plan`'s documentation promises.
//!
//! Planning books `k` frames on every link, so it only runs on small scenarios
//! (`k ≤ 4096`, at most 16 nodes): a larger one is slow, not wrong, and would make
//! libFuzzer report a timeout instead of exploring.
//!
//! The stable, deterministic twin that runs in `cargo test` is
//! crates/plan/tests/fuzz_smoke.rs.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use lockstep_plan::nodefile;
use lockstep_plan::plan::{node_file_toml, plan};
use lockstep_plan::scenario::Scenario;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
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
});
