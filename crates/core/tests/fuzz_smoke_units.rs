//! The deterministic twin of the `units_text` fuzz target (fuzz/fuzz_targets/),
//! lockstep-core's part: a few thousand inputs from a fixed seed — random bytes and
//! damaged unit strings — must never panic the parsers of durations, sizes, packet
//! rates and bit rates, and whatever parses must print into text that parses back to
//! the same value.

use lockstep_core::units::{BitRate, PacketRate, Size};
use lockstep_core::Duration;
use proptest::prelude::*;

#[path = "../../../fuzz/smoke/inputs.rs"]
mod inputs;

const UNITS: &[&str] = &[
    "100us",
    "-1.5ms",
    "7.41us",
    "2min",
    "1514B",
    "1.5KiB",
    "2MB",
    "100000pps",
    "2.5pps",
    "135kpps",
    "40Mbit/s",
    "20B/us",
    "12.5MB/s",
    "100Mbps",
    " 2.5 Mbit/s ",
    "1/2ms",
    "3/2kpps",
    "1/2Gbit/s",
    "1_000B",
];

/// What the `units_text` target does with one input, lockstep-core's part.
fn unit_case(text: &str) {
    if let Ok(d) = Duration::parse(text) {
        assert_eq!(Duration::parse(&d.to_string()), Ok(d), "{text:?}");
    }
    if let Ok(s) = text.parse::<Size>() {
        assert_eq!(s.to_string().parse::<Size>(), Ok(s), "{text:?}");
    }
    if let Ok(r) = text.parse::<BitRate>() {
        assert_eq!(r.to_string().parse::<BitRate>(), Ok(r), "{text:?}");
    }
    if let Ok(r) = text.parse::<PacketRate>() {
        let _ = r.period();
        assert_eq!(r.to_string().parse::<PacketRate>(), Ok(r), "{text:?}");
    }
}

#[test]
fn the_seeds_pass_whole() {
    for u in UNITS {
        let parses = Duration::parse(u).is_ok()
            || u.parse::<Size>().is_ok()
            || u.parse::<BitRate>().is_ok()
            || u.parse::<PacketRate>().is_ok();
        assert!(parses, "{u}");
        unit_case(u);
    }
}

proptest! {
    #![proptest_config(inputs::config(4000))]

    #[test]
    fn fuzz_smoke_core_units(text in inputs::text(UNITS.iter().map(|u| u.as_bytes().to_vec()).collect())) {
        unit_case(&text);
    }
}
