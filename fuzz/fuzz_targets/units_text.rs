//! Fuzz the unit strings: lockstep-core's durations, sizes, packet rates and bit
//! rates (crates/core/src/time.rs, crates/core/src/units.rs) and lockstep-netcalc's
//! exact data, time and rate values (crates/netcalc/src/units.rs), all read by the
//! one unit grammar (crates/core/src/units/grammar.rs). Arbitrary text
//! must never panic, and whatever parses must print into text that parses back to
//! the same value (`parse(format(x)) == x`): a `Duration`, `Size`, `BitRate` and
//! `PacketRate` by their `Display`, a netcalc value by its exact fraction.
//!
//! The stable, deterministic twins that run in `cargo test` are
//! crates/core/tests/fuzz_smoke_units.rs and crates/netcalc/tests/fuzz_smoke.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_core::units::{BitRate, PacketRate, Size};
use lockstep_core::Duration;
use lockstep_netcalc::units::{self, format_float, Kind, Shown, Unit};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let text = text.as_ref();

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
        // in its base unit, when short enough to be accepted
        if exact.bytes().filter(u8::is_ascii_digit).count() <= units::MAX_DIGITS {
            assert_eq!(units::parse(kind, &format!("{exact}{base}")), Ok(q.clone()));
        }
        let s = Shown::new(&q, shown);
        let _ = (s.to_string(), format_float(s.value()));
    }
    let _ = units::parse_number(text);
});
