//! The deterministic twin of the `ctl_request_json` fuzz target
//! (fuzz/fuzz_targets/ctl_request_json.rs): a few thousand request bodies from a
//! fixed seed — random bytes and damaged copies of valid requests (a key given
//! twice among them) — must never panic the strict JSON reading nor the reading of
//! each request the controller takes, nor what it does next with one that reads
//! (exact values and admission for a shaped flow, frames for a TDP flow); a shaped
//! flow as stored reads back to the same spec.

use lockstep_core::Duration;
use lockstep_netcalc::{parse_network, Admission};
use proptest::prelude::*;

use super::super::alloc::{Allocator, TdpNetwork};
use super::{bounds_json, check_name, flow_spec, object, server_json, tdp_spec};
use super::{Fields, FlowSpec, FLOW_KEYS};

use crate::fuzz_inputs as inputs;

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

const BODIES: &[&str] = &[
    r#"{"name":"f1","path":["s0","s1"],"rate":"10Mbit/s","burst":"3028B","peak":"100Mbit/s","max_packet":"1514B","deadline":"1ms"}"#,
    r#"{"path":["s0"],"rate":"1Mbit/s","duration":"10s"}"#,
    r#"{"path":["s1","s2"]}"#,
    r#"{"name":"t1","path":["s0/1","r1/2"],"packets":3,"size":1002,"d":[0,1]}"#,
    r#"{"name":"t2","id":7,"path":["s0/1","r1/2","r2/1"],"packets":1,"size":1002,"d":[0,1,2]}"#,
];

/// What the controller does with a shaped flow that reads.
fn shaped(adm: &Admission, spec: FlowSpec) {
    let stored = serde_json::to_string(&spec).expect("a spec serializes");
    let m = object(stored.as_bytes()).expect("a stored spec is an object");
    let f = Fields::new(&m, FLOW_KEYS).expect("a stored spec has only flow keys");
    let name = f
        .required_string("name")
        .expect("a stored spec has its name");
    let again = flow_spec(&f, name, None).expect("a stored spec reads back");
    assert_eq!(again, spec, "{stored}");
    let by_serde: FlowSpec = serde_json::from_str(&stored).expect("serde reads it back");
    assert_eq!(by_serde, spec, "{stored}");

    let Ok(flow) = spec.to_flow() else { return };
    let mut adm = adm.clone();
    if adm.admit(flow).is_ok() {
        let _ = bounds_json(&adm.bounds(&spec.name).expect("admitted"));
        for s in ["s0", "s1", "s2"] {
            let _ = server_json(&adm.server_bounds(s).expect("a server of NET"));
        }
    }
}

/// What the `ctl_request_json` target does with one body.
fn case(adm: &Admission, tdp: &TdpNetwork, body: &[u8]) {
    let Ok(m) = object(body) else { return };
    if let Ok(f) = Fields::new(&m, FLOW_KEYS) {
        if let Ok(name) = f.required_string("name") {
            if check_name("name", &name).is_ok() {
                if let Ok(spec) = flow_spec(&f, name, None) {
                    shaped(adm, spec);
                }
            }
        }
    }
    let keys: Vec<&str> = FLOW_KEYS.iter().copied().filter(|k| *k != "name").collect();
    if let Ok(f) = Fields::new(&m, &keys) {
        let defaults = Some(("1Mbit/s", "1514B"));
        if let Ok(spec) = flow_spec(&f, "be.x.standing".into(), defaults) {
            shaped(adm, spec);
        }
    }
    let mut oneshot = keys.clone();
    oneshot.push("duration");
    if let Ok(f) = Fields::new(&m, &oneshot) {
        if let Ok(text) = f.required_string("duration") {
            let _ = Duration::parse(&text);
        }
        if let Ok(spec) = flow_spec(&f, "be.x.oneshot.1".into(), None) {
            shaped(adm, spec);
        }
    }
    if let Ok(spec) = tdp_spec(&m) {
        let mut al = Allocator::new(tdp.clone());
        if let Ok(a) = al.allocate(&spec) {
            for node in ["s0", "r1", "r2"] {
                let _ = al.schedule(node);
            }
            assert!(al.release(&a.name).is_some());
        }
    }
}

fn nets() -> (Admission, TdpNetwork) {
    let adm = Admission::new(&parse_network(NET).expect("NET parses")).expect("NET admits");
    (adm, TdpNetwork::parse(TDP).expect("TDP parses"))
}

#[test]
fn the_seeds_pass_whole() {
    let (adm, tdp) = nets();
    for b in BODIES {
        assert!(object(b.as_bytes()).is_ok());
        case(&adm, &tdp, b.as_bytes());
    }
    // a key given twice is refused, not one of the two kept
    let twice = br#"{"name":"f1","name":"f2","path":["s0"],"rate":"1Mbit/s","burst":"1514B"}"#;
    assert!(object(twice).is_err());
}

proptest! {
    #![proptest_config(inputs::config(2000))]

    #[test]
    fn fuzz_smoke_ctl_request_json(body in inputs::input(BODIES.iter().map(|b| b.as_bytes().to_vec()).collect())) {
        let (adm, tdp) = nets();
        case(&adm, &tdp, &body);
    }
}
