//! Fuzz the admission controller's request bodies (crates/lockstep/src/ctl/api.rs):
//! arbitrary bytes must never panic the strict JSON reading (`api::object`, which
//! refuses a key given twice) nor the field-by-field reading of each request the
//! controller takes — `POST /flows`, `POST /best-effort/{sender}/standing`,
//! `POST /best-effort/{sender}/oneshot` and `POST /tdp/flows` — nor what the
//! controller does next with a request that reads: a shaped flow goes to exact
//! values (`FlowSpec::to_flow`) and is admitted into a small network, a TDP flow is
//! allocated frames in a small TDP network.
//!
//! Invariant: a shaped flow as the controller stores it (`serde_json` of its
//! `FlowSpec`) reads back, by the same strict path and by `serde`, to the same spec.
//!
//! `lockstep` is a binary crate without a library, so its `ctl/api.rs` and
//! `ctl/alloc.rs` are compiled into this target with `#[path]` (they use only
//! library crates and each other).
//!
//! The stable, deterministic twin that runs in `cargo test` is
//! crates/lockstep/src/ctl/api_fuzz_smoke.rs.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use lockstep_core::Duration;
use lockstep_netcalc::{parse_network, Admission};

// (api.rs reaches alloc.rs as `super::alloc`: both sit at this crate's root)
#[allow(dead_code)]
#[path = "../../crates/lockstep/src/ctl/alloc.rs"]
mod alloc;
#[allow(dead_code)]
#[path = "../../crates/lockstep/src/ctl/api.rs"]
mod api;

use alloc::{Allocator, TdpNetwork};
use api::{Fields, FlowSpec, FLOW_KEYS};

const NET: &str = r#"
[[server]]
name = "s0"
rate = "100Mbit/s"
latency = "20us"
[[server]]
name = "s1"
rate = "100Mbit/s"
latency = "20us"
buffer = "64KiB"
[[server]]
name = "s2"
rate = "1Gbit/s"
latency = "5us"
multiplexing = "arbitrary"
[[flow]]
name = "standing"
path = ["s0", "s1"]
rate = "10Mbit/s"
burst = "3028B"
"#;

const TDP: &str = r#"
tf = "250us"
k = 4
[[node]]
name = "s0"
ports = [{ id = 1, rate = "100Mbit/s" }]
[[node]]
name = "r1"
ports = [{ id = 1, rate = "100Mbit/s" }, { id = 2, rate = "100Mbit/s" }]
[[node]]
name = "r2"
ports = [{ id = 1, rate = "100Mbit/s" }]
"#;

fn admission() -> Admission {
    static A: OnceLock<Admission> = OnceLock::new();
    A.get_or_init(|| Admission::new(&parse_network(NET).expect("NET parses")).expect("NET admits"))
        .clone()
}

fn tdp_network() -> TdpNetwork {
    static T: OnceLock<TdpNetwork> = OnceLock::new();
    T.get_or_init(|| TdpNetwork::parse(TDP).expect("TDP parses"))
        .clone()
}

/// What the controller does with a shaped flow that reads.
fn shaped(spec: FlowSpec) {
    // stored as JSON, read back both ways
    let stored = serde_json::to_string(&spec).expect("a spec serializes");
    let m = api::object(stored.as_bytes()).expect("a stored spec is an object");
    let f = Fields::new(&m, FLOW_KEYS).expect("a stored spec has only flow keys");
    let name = f
        .required_string("name")
        .expect("a stored spec has its name");
    let again = api::flow_spec(&f, name, None).expect("a stored spec reads back");
    assert_eq!(again, spec, "{stored}");
    let by_serde: FlowSpec = serde_json::from_str(&stored).expect("serde reads it back");
    assert_eq!(by_serde, spec, "{stored}");

    let Ok(flow) = spec.to_flow() else { return };
    let mut adm = admission();
    if adm.admit(flow).is_ok() {
        let _ = api::bounds_json(&adm.bounds(&spec.name).expect("admitted"));
        for s in ["s0", "s1", "s2"] {
            let _ = api::server_json(&adm.server_bounds(s).expect("a server of NET"));
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(m) = api::object(data) else { return };

    // POST /flows
    if let Ok(f) = Fields::new(&m, FLOW_KEYS) {
        if let Ok(name) = f.required_string("name") {
            if api::check_name("name", &name).is_ok() {
                if let Ok(spec) = api::flow_spec(&f, name, None) {
                    shaped(spec);
                }
            }
        }
    }
    let keys: Vec<&str> = FLOW_KEYS.iter().copied().filter(|k| *k != "name").collect();
    // POST /best-effort/{sender}/standing
    if let Ok(f) = Fields::new(&m, &keys) {
        let defaults = Some(("1Mbit/s", "1514B"));
        if let Ok(spec) = api::flow_spec(&f, "be.x.standing".into(), defaults) {
            shaped(spec);
        }
    }
    // POST /best-effort/{sender}/oneshot
    let mut oneshot = keys.clone();
    oneshot.push("duration");
    if let Ok(f) = Fields::new(&m, &oneshot) {
        if let Ok(text) = f.required_string("duration") {
            let _ = Duration::parse(&text);
        }
        if let Ok(spec) = api::flow_spec(&f, "be.x.oneshot.1".into(), None) {
            shaped(spec);
        }
    }
    // POST /tdp/flows
    if let Ok(spec) = api::tdp_spec(&m) {
        let mut al = Allocator::new(tdp_network());
        if let Ok(a) = al.allocate(&spec) {
            for node in ["s0", "r1", "r2"] {
                let _ = al.schedule(node);
            }
            assert!(al.release(&a.name).is_some());
        }
    }
});
