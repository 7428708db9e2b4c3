//! The deterministic twin of the `export_toml` fuzz target
//! (fuzz/fuzz_targets/export_toml.rs): a few thousand inputs from a fixed seed —
//! random bytes and damaged copies of export plans and of a node file — must never
//! panic the plan's parser under any of the command line's options, the node file's
//! way in, or the `tc` commands; every line of the script stays empty, a comment or
//! a `tc` command.

use std::path::Path;

use proptest::prelude::*;

use super::{commands, parse_plan, ports_of_node, render, Options, Plan, QdiscChoice};

use crate::fuzz_inputs as inputs;

/// Export plans; [`seeds`] adds node files.
const SEEDS: &[&str] = &[
    r#"
[[flow]]
name = "c"
dev = "eth0"
rate = "40Mbit/s"
burst = "51514B"
max_packet = "1514B"
peak = "100Mbit/s"
latency = "50ms"
match = { src = "10.0.0.3", dst = "10.0.0.0/24", proto = "udp", dport = 9000, sport = 7 }

[[flow]]
name = "d"
dev = "eth0"
rate = "1Mbit/s"
burst = "2kB"
ceil = "2Mbit/s"
limit = "100kB"
"#,
    r#"
[[port]]
dev = "eth1"
tf = "250us"
k = 4
rows = [2, { slot = 0, packets = 3, size = 1000 }, { slot = 3, packets = 0 }]
reserved_prio = 6
epoch_ns = -5
etf = true
etf_delta = "200us"
offload = false
txtime_assist = true
"#,
];

/// [`SEEDS`] and the node files of scenarios/line.toml's TDP run.
fn seeds() -> Vec<Vec<u8>> {
    let text = include_str!("../../../scenarios/line.toml");
    let s = lockstep_plan::scenario::Scenario::parse("line.toml", text).expect("line parses");
    let tdp = lockstep_plan::scenario::RunMode::Tdp;
    let run = s
        .runs()
        .into_iter()
        .find(|r| r.mode == tdp)
        .expect("a TDP run");
    let p = lockstep_plan::plan::plan(&s, &run).expect("line plans");
    let nodes = p.nodes.iter().filter_map(|n| n.config.as_ref());
    SEEDS
        .iter()
        .map(|s| s.to_string())
        .chain(nodes.map(|f| lockstep_plan::plan::node_file_toml(f).expect("serializes")))
        .map(String::into_bytes)
        .collect()
}

const OPTIONS: [Options; 4] = [
    Options {
        qdisc: QdiscChoice::Auto,
        txtime_assist: false,
        reserved_prio: None,
    },
    Options {
        qdisc: QdiscChoice::Tbf,
        txtime_assist: false,
        reserved_prio: Some(3),
    },
    Options {
        qdisc: QdiscChoice::Htb,
        txtime_assist: true,
        reserved_prio: None,
    },
    Options {
        qdisc: QdiscChoice::Auto,
        txtime_assist: true,
        reserved_prio: Some(15),
    },
];

fn script(plan: &Plan, opts: &Options) {
    let text = render(Path::new("plan.toml"), &commands(plan, opts));
    for line in text.lines() {
        assert!(
            line.is_empty() || line.starts_with('#') || line.starts_with("tc "),
            "a line of the script is neither a comment nor a tc command: {line:?}"
        );
    }
}

/// What the `export_toml` target does with one input.
fn case(text: &str) {
    if let Ok(plan) = parse_plan(text, &OPTIONS[0]) {
        script(&plan, &OPTIONS[0]);
        for opts in &OPTIONS[1..] {
            if let Ok(plan) = parse_plan(text, opts) {
                script(&plan, opts);
            }
        }
        return;
    }
    let is_node_file = toml::from_str::<toml::Table>(text)
        .map(|t| t.contains_key("node"))
        .unwrap_or(false);
    if !is_node_file {
        return;
    }
    let Ok(file) = lockstep_plan::nodefile::parse(Path::new("node.toml"), text) else {
        return;
    };
    for opts in &OPTIONS {
        if let Ok(ports) = ports_of_node(&file.node, opts) {
            let plan = Plan {
                flows: Vec::new(),
                ports,
            };
            script(&plan, opts);
        }
    }
}

#[test]
fn the_seeds_pass_whole() {
    for s in SEEDS {
        if let Err(e) = parse_plan(s, &OPTIONS[0]) {
            panic!("{e}");
        }
    }
    let mut with_ports = 0;
    for s in seeds() {
        let text = String::from_utf8(s).expect("UTF-8");
        if let Ok(f) = lockstep_plan::nodefile::parse(Path::new("node.toml"), &text) {
            with_ports += usize::from(ports_of_node(&f.node, &OPTIONS[0]).is_ok());
        }
        case(&text);
    }
    assert!(with_ports >= 1, "no node file with a port schedule");
}

proptest! {
    #![proptest_config(inputs::config(2000))]

    #[test]
    fn fuzz_smoke_export_toml(text in inputs::text(seeds())) {
        case(&text);
    }
}
