//! Fuzz the network file of `lockstep calc` and the admission controller
//! (crates/netcalc/src/parse.rs): arbitrary text must never panic
//! `parse_network`, `parse_cyclic` or `load`.
//!
//! On a small network that parses (at most 8 servers, 8 flows and 32 hops in all),
//! it also computes what `lockstep calc` computes: the TFA, SFA and PMOO bounds of a
//! feed-forward network, or the TFA fixed point (plain and line-shaped) of a cyclic
//! one. The LP method is left out (a linear program per flow: slow, and floating
//! point). The admission controller's incremental state is checked against a
//! reanalysis from scratch after admitting every flow one by one and after
//! removing the first.
//!
//! The stable, deterministic twin that runs in `cargo test` is
//! crates/netcalc/tests/fuzz_smoke.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_netcalc::methods::{self, Method, Options};
use lockstep_netcalc::{load, parse_cyclic, parse_network, Admission, Network};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(net) = parse_network(text) else {
        return;
    };
    let hops: usize = net.flows.iter().map(|f| f.path.len()).sum();
    if net.servers.len() > 8 || net.flows.len() > 8 || hops > 32 {
        return;
    }
    if methods::is_cyclic(&net) {
        let Ok(net) = parse_cyclic(text) else { return };
        for line_shaping in [false, true] {
            let b = methods::bounds_with(&net, Method::Tfa, Options { line_shaping })
                .expect("TFA of a checked cyclic network");
            assert_eq!(b.len(), net.flows.len());
        }
        return;
    }
    let Ok(adm) = load(text) else { return };
    let _ = adm.snapshot();
    let net = adm.network();
    for m in [Method::Tfa, Method::Sfa, Method::Pmoo] {
        let b = methods::bounds(&net, m).expect("bounds of a checked network");
        assert_eq!(b.len(), net.flows.len());
    }
    let _ = methods::tfa_per_hop(&net);

    // The same flows admitted one at a time.
    let servers = Network {
        servers: net.servers.clone(),
        flows: Vec::new(),
    };
    let Ok(mut inc) = Admission::new(&servers) else {
        return;
    };
    for f in net.flows.iter().cloned() {
        let _ = inc.admit(f);
    }
    assert_eq!(inc.snapshot(), inc.full_reanalysis(), "after admitting");
    if let Some(first) = net.flows.first() {
        let _ = inc.remove(&first.name);
        assert_eq!(inc.snapshot(), inc.full_reanalysis(), "after removing");
    }
});
