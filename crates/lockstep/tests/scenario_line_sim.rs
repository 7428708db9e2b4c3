//! `scenarios/line.toml` in TDP mode in the simulator (the library: the same plan as
//! the lab, the default options: ideal hosts, seed 1), checked with the body the lab
//! test uses too (`common/line_props.rs`).
//!
//! Asserted, exactly, for the scenario's whole duration plus a drain (the sources
//! stopped, one simulated second for what is in flight):
//! - nothing is lost: the receiver got every probe the sender sent, once each
//!   (sequence numbers 0 .. sent − 1);
//! - every probe carries the hop records of r1 then r2;
//! - every probe left r2 exactly `d` frames after it left r1 (frames of the hop
//!   records' `tx_app_ns` on the scenario's frame clock);
//! - no router counted a frame slip (ideal hosts are never late), which is the
//!   condition under which the lab test asserts the property for every probe.

mod common;

use common::line_props::{check_line_properties, line_params};
use lockstep_core::tdp::Delivery;
use lockstep_sim::{engine, Kind, SimOptions};

#[test]
fn tdp_line_in_the_simulator_is_exact_and_lossless() {
    let line = line_params();
    let opts = SimOptions::default();
    let mut e = engine(&line.plan, &opts).expect("the simulator builds the line");
    let mut got: Vec<Delivery> = Vec::new();
    let end = opts.start_ns + line.duration.as_nanos();
    e.run_until(end, &mut |_, d| got.push(*d));
    e.stop_sources();
    e.run_until(end + 1_000_000_000, &mut |_, d| got.push(*d));

    let sent: u64 = e
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            Kind::Host(h) => h.sender.as_ref(),
            Kind::Router(_) => None,
        })
        .flat_map(|(s, _)| s.sent_per_flow())
        .filter(|&(flow, _)| flow == line.flow)
        .map(|(_, n)| n)
        .sum();
    let slips: Vec<(String, u64, u64)> = e
        .nodes
        .iter()
        .filter_map(|n| match &n.kind {
            Kind::Router(r) => Some((
                n.name.clone(),
                r.counters().flows.iter().map(|f| f.slipped).sum(),
                r.counters().ports.iter().map(|p| p.slipped).sum(),
            )),
            Kind::Host(_) => None,
        })
        .collect();

    let r = check_line_properties(&got, &line);
    let what = format!(
        "flow {} over {:?}, TF {} k {} d {}, {sent} sent: {r}; router slips (flow, ports): {slips:?}",
        line.flow_name, line.routers, line.tf, line.k, line.d
    );
    eprintln!("{what}");
    // a whole run's worth: one packet per frame for the scenario's duration
    let frames = line.duration.as_nanos() / line.tf.as_nanos();
    assert!(sent as i64 >= frames - 2, "{what}");
    // nothing lost, nothing twice
    assert_eq!(r.probes as u64, sent, "{what}");
    assert!(r.duplicates.is_empty(), "{what}");
    assert!(r.missing_below(sent).is_empty(), "{what}");
    // routed along the path, and every hop pair exactly d frames apart
    assert!(r.off_path.is_empty(), "{what}");
    assert_eq!(r.pairs, r.probes * (line.routers.len() - 1), "{what}");
    assert!(r.not_d.is_empty(), "{what}");
    assert_eq!(r.exact, r.pairs, "{what}");
    // no router slipped a packet
    assert!(slips.iter().all(|&(_, f, p)| f == 0 && p == 0), "{what}");
}
