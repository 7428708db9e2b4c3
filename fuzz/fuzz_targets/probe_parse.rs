//! Fuzz the probe packet parser: arbitrary bytes must never panic, and whatever
//! parses must re-emit into a packet that parses to the same repr.
//!
//! Each input is tried twice: as received, and with its checksum recomputed (when
//! its lengths allow), so that the fuzzer reaches the flag, hop-kind and
//! round-trip checks behind the checksum without having to forge checksums.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_core::wire::probe::{parse_probe, HopRecord, Packet};

fn check(data: &[u8]) {
    // The zero-copy view: after new_checked no accessor may panic.
    if let Ok(packet) = Packet::new_checked(data) {
        let _ = (packet.flags(), packet.seq(), packet.frame(), packet.t_send_ns());
        for index in 0..=usize::from(packet.hop_count()) {
            let _ = packet.hop(index);
        }
        let _ = packet.verify_checksum();
        let mut owned = data.to_vec();
        let mut writable = Packet::new_unchecked(&mut owned[..]);
        if writable.push_hop(&HopRecord::default()).is_ok() {
            assert!(writable.verify_checksum() == packet.verify_checksum());
        }
        let _ = writable.replace_hop(0, &HopRecord::default());
    }

    if let Ok(repr) = parse_probe(data) {
        let mut out = vec![0u8; repr.buffer_len()];
        let written = repr.emit_into(&mut out);
        assert_eq!(written, Ok(repr.buffer_len()), "emit of a parsed repr failed");
        assert_eq!(parse_probe(&out), Ok(repr), "re-parse differs");
    }
}

fuzz_target!(|data: &[u8]| {
    check(data);
    let mut fixed = data.to_vec();
    if let Ok(mut packet) = Packet::new_checked(&mut fixed[..]) {
        packet.fill_checksum();
        assert!(packet.verify_checksum());
        check(&fixed);
    }
});
