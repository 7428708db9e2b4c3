//! Fuzz the router's parse path: a frame read as Ethernet → IPv4 → UDP. Arbitrary
//! bytes must never panic; the router's in-place rewrites (TTL decrement, DSCP
//! marking with incremental checksum updates) must keep a valid header valid and an
//! invalid one invalid; whatever parses must re-emit from its reprs into a frame
//! that parses to the same reprs and payload.
//!
//! Each input is tried twice: as received, and with its IPv4 and UDP checksums
//! recomputed (when the lengths allow), so the fuzzer reaches the checks behind the
//! checksums without having to forge them.
//!
//! The stable, deterministic twin that runs in `cargo test` is the
//! `fuzz_smoke_frame_stack_*` section of crates/core/src/wire/udp.rs.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lockstep_core::net::FiveTuple;
use lockstep_core::wire::{
    EtherType, EthernetFrame, EthernetRepr, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr, PROTO_UDP,
};

const ETH: usize = EthernetRepr::HEADER_LEN;

fn check(data: &[u8]) {
    let Ok(frame) = EthernetFrame::new_checked(data) else {
        assert!(data.len() < ETH);
        return;
    };
    let eth = EthernetRepr::parse(&frame).expect("a checked frame parses");
    if eth.ethertype != EtherType::IPV4 {
        return;
    }
    let Ok(ip) = Ipv4Packet::new_checked(frame.payload()) else {
        return;
    };
    let _ = (
        ip.dscp(),
        ip.ecn(),
        ip.ident(),
        ip.frag_offset(),
        ip.options(),
    );
    let _ = (ip.datagram(), FiveTuple::from_ipv4(&ip));

    // The router hot path, on a copy.
    let valid = ip.verify_checksum();
    let mut owned = data.to_vec();
    let mut f = EthernetFrame::new_unchecked(&mut owned[..]);
    let mut p = Ipv4Packet::new_checked(f.payload_mut()).expect("same bytes");
    let _ = p.decrement_ttl();
    p.set_dscp_incremental(ip.ttl() & 0x3f);
    assert_eq!(
        p.verify_checksum(),
        valid,
        "incremental update changed validity"
    );

    let Ok(ip_repr) = Ipv4Repr::parse(&ip) else {
        return;
    };
    let (src, dst) = (ip_repr.src, ip_repr.dst);
    let mut out = vec![0u8; ETH + ip_repr.buffer_len()];
    eth.emit(&mut EthernetFrame::new_unchecked(&mut out[..]))
        .expect("emit ethernet");
    ip_repr
        .emit(&mut Ipv4Packet::new_unchecked(&mut out[ETH..]))
        .expect("emit a parsed IPv4 repr");

    let mut udp_repr = None;
    if ip_repr.protocol == PROTO_UDP {
        if let Ok(udp) = UdpPacket::new_checked(ip.payload()) {
            let _ = (udp.src_port(), udp.dst_port(), udp.checksum());
            if let Ok(repr) = UdpRepr::parse(&udp, src, dst, true) {
                let at = ETH + Ipv4Repr::HEADER_LEN;
                let body = at + UdpRepr::HEADER_LEN;
                out[body..body + repr.payload_len].copy_from_slice(udp.payload());
                repr.emit(&mut UdpPacket::new_unchecked(&mut out[at..]), src, dst)
                    .expect("emit a parsed UDP repr");
                udp_repr = Some((repr, &ip.payload()[UdpRepr::HEADER_LEN..repr.buffer_len()]));
            }
        }
    }
    // Re-parse what was emitted.
    let frame2 = EthernetFrame::new_checked(&out[..]).expect("re-parse ethernet");
    assert_eq!(EthernetRepr::parse(&frame2), Ok(eth));
    let ip2 = Ipv4Packet::new_checked(frame2.payload()).expect("re-parse IPv4");
    let ip_repr2 = Ipv4Repr::parse(&ip2).expect("re-parse IPv4 repr");
    // A malformed UDP part leaves zeros behind the IPv4 header: still a valid
    // IPv4 datagram with the same repr.
    assert_eq!(ip_repr2, ip_repr);
    if let Some((repr, payload)) = udp_repr {
        let udp2 = UdpPacket::new_checked(ip2.payload()).expect("re-parse UDP");
        assert_eq!(UdpRepr::parse(&udp2, src, dst, true), Ok(repr));
        assert_eq!(udp2.payload(), payload);
    }
}

/// The input with its IPv4 header checksum and UDP checksum recomputed, when the
/// lengths allow.
fn with_fixed_checksums(data: &[u8]) -> Option<Vec<u8>> {
    let mut fixed = data.to_vec();
    let mut frame = EthernetFrame::new_checked(&mut fixed[..]).ok()?;
    let mut ip = Ipv4Packet::new_checked(frame.payload_mut()).ok()?;
    ip.fill_checksum();
    let (src, dst, proto) = (ip.src_addr(), ip.dst_addr(), ip.protocol());
    if proto == PROTO_UDP {
        if let Ok(mut udp) = UdpPacket::new_checked(ip.payload_mut()) {
            udp.fill_checksum(src, dst);
            assert!(udp.verify_checksum(src, dst));
        }
    }
    assert!(ip.verify_checksum());
    Some(fixed)
}

fuzz_target!(|data: &[u8]| {
    check(data);
    if let Some(fixed) = with_fixed_checksums(data) {
        check(&fixed);
    }
});
