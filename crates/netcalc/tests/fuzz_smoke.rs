//! The deterministic twins of the `netcalc_toml` and `units_text` fuzz targets
//! (fuzz/fuzz_targets/): a few thousand inputs from a fixed seed — random bytes and
//! damaged copies of the network files in examples/ and of unit strings — must never
//! panic the network file's parsers, the bounds `lockstep calc` computes on a small
//! network, the admission controller, nor the unit parser, and keep the targets'
//! invariants.

use lockstep_netcalc::methods::{self, Method, Options};
use lockstep_netcalc::units::{self, format_float, Kind, Shown, Unit};
use lockstep_netcalc::{load, parse_cyclic, parse_network, Admission, Network};
use proptest::prelude::*;

#[path = "../../../fuzz/smoke/inputs.rs"]
mod inputs;

const NETWORKS: &[&str] = &[
    include_str!("../../../examples/loeser-fast-ethernet.toml"),
    include_str!("../../../examples/reference/dnc-ff-3s-1sc-2f-1ac-2p.toml"),
    include_str!("../../../examples/reference/dnc-s-1sc-2f-2ac.toml"),
    include_str!("../../../examples/reference/dnc-ta-2s-2sc-2f-1ac-1p.toml"),
    include_str!("../../../examples/reference/dnc-tr-3s-1sc-2f-1ac-2p.toml"),
    // a ring: cyclic
    r#"
[[server]]
name = "a"
rate = "100Mbit/s"
latency = "10us"
[[server]]
name = "b"
rate = "100Mbit/s"
latency = "10us"
[[flow]]
name = "ab"
path = ["a", "b"]
rate = "10Mbit/s"
burst = "1514B"
[[flow]]
name = "ba"
path = ["b", "a"]
rate = "10Mbit/s"
burst = "1514B"
max_packet = "1514B"
peak = "100Mbit/s"
deadline = "1ms"
"#,
];

const UNITS: &[&str] = &[
    "160Mbit/s",
    "20B/us",
    "302800/3069Mbit/s",
    "-40Mbit/s",
    "0.000001bit/ns",
    "1_000 kbps",
    "2MiB",
    "12000bit",
    "25B",
    "0.5ms",
    "20us",
    "45 µs",
    "1min",
    "3ps",
];

fn seeds(texts: &[&str]) -> Vec<Vec<u8>> {
    texts.iter().map(|s| s.as_bytes().to_vec()).collect()
}

/// What the `netcalc_toml` target does with one input.
fn network_case(text: &str) {
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
}

/// What the `units_text` target does with one input, netcalc's part.
fn unit_case(text: &str) {
    for (kind, base, shown) in [
        (Kind::Data, "bit", Unit::Bytes),
        (Kind::Time, "s", Unit::Us),
        (Kind::Rate, "bit/s", Unit::Mbps),
    ] {
        let Ok(q) = units::parse(kind, text) else {
            continue;
        };
        let exact = q.to_string();
        assert_eq!(units::parse_number(&exact), Some(q.clone()), "{text:?}");
        if exact.bytes().filter(u8::is_ascii_digit).count() <= units::MAX_DIGITS {
            assert_eq!(units::parse(kind, &format!("{exact}{base}")), Ok(q.clone()));
        }
        let s = Shown::new(&q, shown);
        let _ = (s.to_string(), format_float(s.value()));
    }
    let _ = units::parse_number(text);
}

#[test]
fn the_seeds_pass_whole() {
    for n in NETWORKS {
        assert!(parse_network(n).is_ok());
        network_case(n);
    }
    for u in UNITS {
        assert!([Kind::Data, Kind::Time, Kind::Rate]
            .iter()
            .any(|k| units::parse(*k, u).is_ok()));
        unit_case(u);
    }
}

proptest! {
    #![proptest_config(inputs::config(1000))]

    #[test]
    fn fuzz_smoke_netcalc_toml(text in inputs::text(seeds(NETWORKS))) {
        network_case(&text);
    }
}

proptest! {
    #![proptest_config(inputs::config(3000))]

    #[test]
    fn fuzz_smoke_netcalc_units(text in inputs::text(seeds(UNITS))) {
        unit_case(&text);
    }
}
