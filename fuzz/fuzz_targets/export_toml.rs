//! Fuzz `lockstep export`'s plan file (crates/lockstep/src/export.rs): arbitrary
//! text must never panic `parse_plan` (`[[flow]]` and `[[port]]` tables) under any
//! of the command line's options, nor a node file's way in (`[node]`: the node file
//! parser, then `ports_of_node`), nor the `tc` commands of a plan that parses.
//!
//! Invariant: every line of the script `render` writes is empty, a comment or a
//! `tc` command — whatever a name or path holds, the shell never runs anything else.
//!
//! `lockstep` is a binary crate without a library, so its `export.rs` is compiled
//! into this target with `#[path]`; the few names it takes from the binary's root
//! (`UsageError`, `EnvError`, `Interrupted`, `node::config`, and `stop` and `say`, compiled
//! here from their files too) are given here as the binary defines
//! them.
//!
//! The stable, deterministic twin that runs in `cargo test` is
//! crates/lockstep/src/export_fuzz_smoke.rs.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/lockstep/src/export.rs"]
mod export;

/// As crates/lockstep/src/main.rs defines it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// As crates/lockstep/src/main.rs defines it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EnvError(pub String);

/// As crates/lockstep/src/main.rs defines it.
#[derive(Debug, thiserror::Error)]
#[error("interrupted by SIGINT/SIGTERM: {0}")]
pub struct Interrupted(pub String);

#[allow(dead_code)]
#[path = "../../crates/lockstep/src/stop.rs"]
mod stop;

#[allow(dead_code, unused_imports, unused_macros)]
#[path = "../../crates/lockstep/src/say.rs"]
mod say;

/// As crates/lockstep/src/node/mod.rs exports it.
mod node {
    pub use lockstep_plan::nodefile as config;
}

use export::{commands, parse_plan, ports_of_node, render, Options, Plan, QdiscChoice};

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

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first options are the most permissive (the others only refuse more:
    // several flows on a tbf, etf turned off under txtime-assist), so the others
    // are tried only on a plan these take.
    if let Ok(plan) = parse_plan(text, &OPTIONS[0]) {
        script(&plan, &OPTIONS[0]);
        for opts in &OPTIONS[1..] {
            if let Ok(plan) = parse_plan(text, opts) {
                script(&plan, opts);
            }
        }
        return;
    }
    // As export's `load`: a top-level [node] table makes it a node file (which
    // parse_plan refuses: an unknown key).
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
});
