//! Tests of the probe packet format. The "fuzz smoke" section at the end is the
//! stable-toolchain stand-in for `fuzz/fuzz_targets/probe_parse.rs`: deterministic
//! proptest runs over arbitrary and mutated bytes, run by `cargo test`.

use super::*;
use proptest::prelude::*;

fn hop(node: u32, kind: HopKind, base: i64) -> HopRecord {
    HopRecord {
        node,
        kind,
        rx_kernel_ns: base,
        rx_app_ns: base + 1,
        tx_app_ns: base + 2,
        slipped: false,
    }
}

fn sample(hop_count: u8, total_len: u32) -> ProbeRepr {
    let mut hops = [HopRecord::default(); MAX_HOPS];
    for (i, slot) in hops.iter_mut().enumerate().take(usize::from(hop_count)) {
        let kind = if i % 2 == 0 {
            HopKind::Router
        } else {
            HopKind::RrServer
        };
        *slot = hop(100 + i as u32, kind, 1_000_000 * (i as i64 + 1));
    }
    ProbeRepr {
        flags: FLAG_RESPONSE,
        flow_id: 0x0102_0304,
        seq: 0x1112_1314_1516_1718,
        frame: -5,
        t0_ns: 1_700_000_000_000_000_000,
        t_wake_ns: 1_700_000_000_000_002_000,
        t_send_ns: 1_700_000_000_000_003_500,
        hops,
        hop_count,
        total_len,
    }
}

fn emit_vec(repr: &ProbeRepr) -> Vec<u8> {
    let mut buf = vec![0xAA; repr.buffer_len()];
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]))
        .expect("valid repr");
    buf
}

// ---------------------------------------------------------------------------
// Layout and checksum

#[test]
fn rfc1071_checksum_example() {
    // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
    let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
    assert_eq!(fold(ones_complement_sum(&data, 0)), 0xddf2);
    assert_eq!(fold(0x0001_fffe), 0xffff);
    assert_eq!(fold(0x2_0003), 0x0005);
}

#[test]
fn emitted_bytes_follow_the_documented_layout() {
    let repr = sample(2, 200);
    let buf = emit_vec(&repr);
    assert_eq!(buf.len(), 200);
    assert_eq!(&buf[0..4], b"LKST");
    assert_eq!(buf[4], 1);
    assert_eq!(buf[5], FLAG_RESPONSE);
    assert_eq!(&buf[6..8], &[0, 64]);
    assert_eq!(&buf[8..12], &[1, 2, 3, 4]);
    assert_eq!(buf[12], 2);
    assert_eq!(buf[13], 0);
    assert_eq!(
        &buf[16..24],
        &[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
    );
    assert_eq!(&buf[24..32], &(-5i64).to_be_bytes());
    assert_eq!(&buf[32..40], &1_700_000_000_000_000_000i64.to_be_bytes());
    assert_eq!(&buf[40..48], &1_700_000_000_000_002_000i64.to_be_bytes());
    assert_eq!(&buf[48..56], &1_700_000_000_000_003_500i64.to_be_bytes());
    assert_eq!(&buf[56..60], &200u32.to_be_bytes());
    assert_eq!(&buf[60..64], &[0; 4]);
    // Hop 0 at 64, hop 1 at 96.
    assert_eq!(&buf[64..68], &100u32.to_be_bytes());
    assert_eq!(&buf[68..72], &[0, 0, 0, 0]);
    assert_eq!(&buf[72..80], &1_000_000i64.to_be_bytes());
    assert_eq!(&buf[80..88], &1_000_001i64.to_be_bytes());
    assert_eq!(&buf[88..96], &1_000_002i64.to_be_bytes());
    assert_eq!(&buf[96..100], &101u32.to_be_bytes());
    assert_eq!(&buf[100..104], &[1, 0, 0, 0]);
    // Padding is zero.
    assert!(buf[128..].iter().all(|&b| b == 0));
    // The checksum is the complement of the sum with the field zeroed.
    let mut zeroed = buf[..128].to_vec();
    zeroed[14] = 0;
    zeroed[15] = 0;
    let expected = !fold(ones_complement_sum(&zeroed, 0));
    assert_eq!(u16::from_be_bytes([buf[14], buf[15]]), expected);
    assert!(Packet::new_unchecked(&buf[..]).verify_checksum());
}

#[test]
fn getters_read_every_field() {
    let repr = sample(3, 300);
    let buf = emit_vec(&repr);
    let p = Packet::new_checked(&buf[..]).unwrap();
    assert_eq!(p.magic(), MAGIC);
    assert_eq!(p.version(), VERSION);
    assert_eq!(p.flags(), FLAG_RESPONSE);
    assert_eq!(p.header_len(), 64);
    assert_eq!(p.flow_id(), 0x0102_0304);
    assert_eq!(p.hop_count(), 3);
    assert_eq!(p.seq(), 0x1112_1314_1516_1718);
    assert_eq!(p.frame(), -5);
    assert_eq!(p.t0_ns(), repr.t0_ns);
    assert_eq!(p.t_wake_ns(), repr.t_wake_ns);
    assert_eq!(p.t_send_ns(), repr.t_send_ns);
    assert_eq!(p.total_len(), 300);
    assert_eq!(p.hop(0), Some(repr.hops[0]));
    assert_eq!(p.hop(2), Some(repr.hops[2]));
    assert_eq!(p.hop(3), None);
    assert_eq!(p.hop(usize::MAX), None);
    assert_eq!(p.into_inner().len(), 300);
}

#[test]
fn setters_write_every_field() {
    let mut buf = [0u8; 128];
    let mut p = Packet::new_unchecked(&mut buf[..]);
    p.set_magic(MAGIC);
    p.set_version(VERSION);
    p.set_flags(FLAG_PADDING);
    p.set_header_len(64);
    p.set_flow_id(7);
    p.set_hop_count(1);
    p.set_seq(8);
    p.set_frame(-9);
    p.set_t0_ns(10);
    p.set_t_wake_ns(11);
    p.set_t_send_ns(12);
    p.set_total_len(128);
    p.set_hop(0, &hop(5, HopKind::RrServer, 20));
    p.fill_checksum();
    assert!(p.verify_checksum());
    let repr = ProbeRepr::parse(&p).unwrap();
    assert!(repr.is_padding());
    assert!(!repr.is_response());
    assert_eq!(repr.flow_id, 7);
    assert_eq!(repr.seq, 8);
    assert_eq!(repr.frame, -9);
    assert_eq!((repr.t0_ns, repr.t_wake_ns, repr.t_send_ns), (10, 11, 12));
    assert_eq!(repr.hops(), &[hop(5, HopKind::RrServer, 20)]);
    assert_eq!(repr.total_len, 128);
}

#[test]
fn repr_equality_ignores_unused_hop_slots() {
    let a = sample(1, 100);
    let mut b = a;
    b.hops[5] = hop(9, HopKind::RrServer, 9);
    assert_eq!(a, b);
    b.hops[0].tx_app_ns += 1;
    assert_ne!(a, b);
}

#[test]
fn zero_hops_minimum_packet_round_trips() {
    let repr = ProbeRepr {
        total_len: MIN_PACKET_LEN as u32,
        ..ProbeRepr::default()
    };
    let buf = emit_vec(&repr);
    assert_eq!(buf.len(), 64);
    assert_eq!(parse_probe(&buf), Ok(repr));
}

// ---------------------------------------------------------------------------
// Rejections

#[test]
fn foreign_bytes_are_foreign_whatever_their_length() {
    assert_eq!(
        parse_probe(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"),
        Err(WireError::Foreign)
    );
    assert_eq!(parse_probe(b"X"), Err(WireError::Foreign));
    assert_eq!(parse_probe(b"LKSX"), Err(WireError::Foreign));
    assert_eq!(parse_probe(&[0u8; 1500]), Err(WireError::Foreign));
    // A prefix of the magic is a truncated probe packet.
    assert_eq!(
        parse_probe(b"LK"),
        Err(WireError::Truncated { needed: 64, got: 2 })
    );
    assert_eq!(
        parse_probe(b""),
        Err(WireError::Truncated { needed: 64, got: 0 })
    );
}

#[test]
fn other_versions_are_unsupported() {
    let mut buf = emit_vec(&sample(0, 64));
    buf[4] = 2;
    assert_eq!(parse_probe(&buf), Err(WireError::UnsupportedVersion(2)));
    // Reported before lengths: a future version may be shorter.
    assert_eq!(
        parse_probe(b"LKST\x07"),
        Err(WireError::UnsupportedVersion(7))
    );
}

/// Rewrite a header field then fix the checksum, so the check under test is the
/// one that fires.
fn patched(repr: &ProbeRepr, patch: impl FnOnce(&mut Packet<&mut [u8]>)) -> Vec<u8> {
    let mut buf = emit_vec(repr);
    let mut p = Packet::new_unchecked(&mut buf[..]);
    patch(&mut p);
    if p.covered_sum().is_some() {
        p.fill_checksum();
    }
    buf
}

#[test]
fn unknown_flags_are_rejected_after_the_checksum() {
    for bit in 2..8 {
        let flags = FLAG_RESPONSE | (1 << bit);
        let buf = patched(&sample(1, 100), |p| p.set_flags(flags));
        assert_eq!(parse_probe(&buf), Err(WireError::UnknownFlags(flags)));
    }
    // Without a checksum fix the corruption is reported as such.
    let mut buf = emit_vec(&sample(1, 100));
    buf[5] |= 0x80;
    assert_eq!(parse_probe(&buf), Err(WireError::BadChecksum));
}

#[test]
fn larger_header_len_from_a_future_minor_version_is_skipped() {
    // Build by hand: an 8-byte header extension before the hop records.
    let mut buf = vec![0u8; 160];
    let mut p = Packet::new_unchecked(&mut buf[..]);
    p.set_magic(MAGIC);
    p.set_version(VERSION);
    p.set_header_len(72);
    p.set_flow_id(3);
    p.set_seq(4);
    p.set_total_len(160);
    p.set_hop_count(2);
    p.as_bytes_mut()[64..72].copy_from_slice(b"future!!");
    p.set_hop(0, &hop(1, HopKind::Router, 10));
    p.set_hop(1, &hop(2, HopKind::RrServer, 20));
    p.fill_checksum();
    let repr = parse_probe(&buf).unwrap();
    assert_eq!(repr.flow_id, 3);
    assert_eq!(repr.seq, 4);
    assert_eq!(
        repr.hops(),
        &[hop(1, HopKind::Router, 10), hop(2, HopKind::RrServer, 20)]
    );
    // The extension is covered by the checksum.
    buf[70] ^= 1;
    assert_eq!(parse_probe(&buf), Err(WireError::BadChecksum));
    // Re-emitting writes a version 1 header; the parsed content is the same.
    let again = emit_vec(&repr);
    assert_eq!(Packet::new_unchecked(&again[..]).header_len(), 64);
    assert_eq!(parse_probe(&again), Ok(repr));
}

#[test]
fn short_or_misaligned_header_len_is_rejected() {
    for bad in [0u16, 4, 60, 63, 66, 70] {
        let buf = patched(&sample(0, 200), |p| p.set_header_len(bad));
        assert_eq!(parse_probe(&buf), Err(WireError::BadHeaderLen(bad)));
    }
}

#[test]
fn too_many_hops_is_rejected() {
    let buf = patched(&sample(0, 1000), |p| p.set_hop_count(25));
    assert_eq!(parse_probe(&buf), Err(WireError::TooManyHops(25)));
    let buf = patched(&sample(0, 1000), |p| p.set_hop_count(255));
    assert_eq!(parse_probe(&buf), Err(WireError::TooManyHops(255)));
}

#[test]
fn total_len_shorter_than_header_and_hops_is_rejected() {
    let buf = patched(&sample(2, 200), |p| p.set_total_len(100));
    assert_eq!(
        parse_probe(&buf),
        Err(WireError::BadTotalLen {
            total_len: 100,
            needed: 128
        })
    );
}

#[test]
fn total_len_beyond_buffer_is_truncation() {
    let buf = patched(&sample(0, 100), |p| p.set_total_len(101));
    assert_eq!(
        parse_probe(&buf),
        Err(WireError::Truncated {
            needed: 101,
            got: 100
        })
    );
}

#[test]
fn bytes_beyond_total_len_are_ignored() {
    let repr = sample(1, 100);
    let mut buf = emit_vec(&repr);
    buf.extend_from_slice(&[0xEE; 50]);
    assert_eq!(parse_probe(&buf), Ok(repr));
}

#[test]
fn unknown_hop_kind_is_rejected() {
    let mut buf = emit_vec(&sample(3, 200));
    buf[64 + 2 * 32 + 4] = 7;
    let mut p = Packet::new_unchecked(&mut buf[..]);
    p.fill_checksum();
    assert_eq!(p.hop(2), None);
    assert_eq!(
        parse_probe(&buf),
        Err(WireError::UnknownHopKind { index: 2, kind: 7 })
    );
}

#[test]
fn reserved_bytes_are_ignored_on_parse() {
    let repr = sample(1, 100);
    let buf = patched(&repr, |p| {
        let b = p.as_bytes_mut();
        b[13] = 0xFF;
        b[60..64].copy_from_slice(&[1, 2, 3, 4]);
        // the hop's flags byte: only bit 0 (slipped) has a meaning
        b[64 + 5..64 + 8].copy_from_slice(&[0xFE, 6, 7]);
    });
    assert_eq!(parse_probe(&buf), Ok(repr));
}

#[test]
fn a_hop_flagged_slipped_round_trips() {
    let mut repr = sample(2, 200);
    repr.hops[1].slipped = true;
    let buf = emit_vec(&repr);
    assert_eq!(buf[64 + 32 + 5], 0x01);
    assert_eq!(buf[64 + 5], 0x00);
    assert_eq!(parse_probe(&buf), Ok(repr));
}

#[test]
fn error_messages_are_clear() {
    let msg = |e: WireError| e.to_string();
    assert_eq!(
        msg(WireError::Truncated {
            needed: 64,
            got: 12
        }),
        "truncated probe packet: needed 64 bytes, got 12"
    );
    assert_eq!(
        msg(WireError::Foreign),
        "not a lockstep probe packet (bad magic)"
    );
    assert_eq!(
        msg(WireError::UnsupportedVersion(3)),
        "unsupported probe packet version 3 (this build speaks version 1)"
    );
    assert_eq!(
        msg(WireError::BadHeaderLen(60)),
        "bad probe header length 60 (must be at least 64 and a multiple of 4)"
    );
    assert_eq!(
        msg(WireError::TooManyHops(25)),
        "probe packet claims 25 hop records, at most 24 are allowed"
    );
    assert_eq!(
        msg(WireError::BadTotalLen {
            total_len: 100,
            needed: 128
        }),
        "probe packet total length 100 is shorter than its header and hop records (128 bytes)"
    );
    assert_eq!(
        msg(WireError::BadChecksum),
        "probe packet checksum mismatch (corrupted packet)"
    );
    assert_eq!(
        msg(WireError::UnknownFlags(0x84)),
        "unknown probe packet flags 0x84 (known: 0x03)"
    );
    assert_eq!(
        msg(WireError::UnknownHopKind { index: 2, kind: 7 }),
        "hop record 2 has unknown kind 7"
    );
    assert_eq!(
        msg(WireError::NoRoom {
            hop_count: 1,
            total_len: 96
        }),
        "no room for another hop record: 1 present, total length 96 bytes \
         (each hop needs 32 bytes inside total_len, at most 24 hops)"
    );
    assert_eq!(
        msg(WireError::NoSuchHop {
            index: 3,
            hop_count: 1
        }),
        "no hop record 3: the packet carries 1"
    );
    assert_eq!(
        msg(WireError::BufferTooSmall {
            needed: 100,
            got: 64
        }),
        "buffer too small for probe packet: needed 100 bytes, got 64"
    );
}

#[test]
fn new_checked_rejects_what_would_make_getters_panic() {
    assert_eq!(
        Packet::new_checked(&[0u8; 12][..]),
        Err(WireError::Truncated {
            needed: 64,
            got: 12
        })
    );
    let buf = emit_vec(&sample(2, 128));
    assert!(Packet::new_checked(&buf[..]).is_ok());
    assert_eq!(
        Packet::new_checked(&buf[..127]),
        Err(WireError::Truncated {
            needed: 128,
            got: 127
        })
    );
    assert_eq!(
        Packet::new_checked(&buf[..100]),
        Err(WireError::Truncated {
            needed: 128,
            got: 100
        })
    );
    // verify_checksum and hop never panic, even unchecked.
    let short = Packet::new_unchecked(&buf[..100]);
    assert!(!short.verify_checksum());
    assert_eq!(short.hop(1), None);
    assert!(!Packet::new_unchecked(&buf[..10]).verify_checksum());
}

// ---------------------------------------------------------------------------
// Emit

#[test]
fn emit_rejects_bad_reprs_without_writing() {
    let mut buf = [0x55u8; 256];
    let mut p = Packet::new_unchecked(&mut buf[..]);
    let small = sample(2, 100);
    assert_eq!(
        small.emit(&mut p),
        Err(WireError::BadTotalLen {
            total_len: 100,
            needed: 128
        })
    );
    let mut many = sample(0, 1000);
    many.hop_count = 25;
    assert_eq!(many.emit(&mut p), Err(WireError::TooManyHops(25)));
    let mut flags = sample(0, 100);
    flags.flags = 0x10;
    assert_eq!(flags.emit(&mut p), Err(WireError::UnknownFlags(0x10)));
    let big = sample(0, 300);
    assert_eq!(
        big.emit(&mut p),
        Err(WireError::BufferTooSmall {
            needed: 300,
            got: 256
        })
    );
    assert!(buf.iter().all(|&b| b == 0x55));
}

#[test]
fn emit_leaves_bytes_past_total_len_alone() {
    let repr = sample(1, 100);
    let mut buf = [0x55u8; 150];
    assert_eq!(repr.emit_into(&mut buf), Ok(100));
    assert!(buf[96..100].iter().all(|&b| b == 0));
    assert!(buf[100..].iter().all(|&b| b == 0x55));
    assert_eq!(parse_probe(&buf[..100]), Ok(repr));
}

// ---------------------------------------------------------------------------
// In-place updates

#[test]
fn push_hop_appends_in_the_reserved_room() {
    let repr = sample(0, min_total_len(2) as u32 + 10);
    let mut buf = emit_vec(&repr);
    let mut p = Packet::new_checked(&mut buf[..]).unwrap();
    let h0 = hop(1, HopKind::Router, 100);
    let h1 = hop(2, HopKind::RrServer, 200);
    assert_eq!(p.push_hop(&h0), Ok(()));
    assert!(p.verify_checksum());
    assert_eq!(p.push_hop(&h1), Ok(()));
    assert!(p.verify_checksum());
    let before = p.as_bytes().to_vec();
    assert_eq!(
        p.push_hop(&h0),
        Err(WireError::NoRoom {
            hop_count: 2,
            total_len: 138
        })
    );
    assert_eq!(p.as_bytes(), &before[..]);
    let parsed = parse_probe(&buf).unwrap();
    assert_eq!(parsed.hops(), &[h0, h1]);
    assert_eq!(
        parsed,
        ProbeRepr {
            hop_count: 2,
            hops: {
                let mut hops = [HopRecord::default(); MAX_HOPS];
                hops[0] = h0;
                hops[1] = h1;
                hops
            },
            ..repr
        }
    );
}

#[test]
fn push_hop_stops_at_max_hops() {
    let mut buf = emit_vec(&sample(0, 1500));
    let mut p = Packet::new_unchecked(&mut buf[..]);
    for i in 0..MAX_HOPS {
        assert_eq!(p.push_hop(&hop(i as u32, HopKind::Router, 1)), Ok(()));
    }
    assert_eq!(
        p.push_hop(&hop(99, HopKind::Router, 1)),
        Err(WireError::NoRoom {
            hop_count: MAX_HOPS as u8,
            total_len: 1500
        })
    );
    assert_eq!(parse_probe(&buf).unwrap().hops().len(), MAX_HOPS);
}

#[test]
fn push_hop_on_bad_buffers_errs_without_panicking() {
    let mut short = [0u8; 10];
    assert_eq!(
        Packet::new_unchecked(&mut short[..]).push_hop(&HopRecord::default()),
        Err(WireError::Truncated {
            needed: 64,
            got: 10
        })
    );
    let mut buf = emit_vec(&sample(0, 200));
    let mut cut = buf[..150].to_vec();
    assert_eq!(
        Packet::new_unchecked(&mut cut[..]).push_hop(&HopRecord::default()),
        Err(WireError::Truncated {
            needed: 200,
            got: 150
        })
    );
    buf[12] = 200;
    assert_eq!(
        Packet::new_unchecked(&mut buf[..]).push_hop(&HopRecord::default()),
        Err(WireError::TooManyHops(200))
    );
}

#[test]
fn push_hop_keeps_earlier_corruption_detectable() {
    let mut buf = emit_vec(&sample(1, 200));
    buf[20] ^= 0x04; // corrupt seq in transit
    let mut p = Packet::new_unchecked(&mut buf[..]);
    assert_eq!(p.push_hop(&hop(7, HopKind::Router, 5)), Ok(()));
    assert!(!p.verify_checksum());
    assert_eq!(parse_probe(&buf), Err(WireError::BadChecksum));
}

#[test]
fn replace_hop_updates_a_record_in_place() {
    let mut buf = emit_vec(&sample(2, 200));
    let mut p = Packet::new_unchecked(&mut buf[..]);
    let mut h = p.hop(1).unwrap();
    h.tx_app_ns = 123_456;
    assert_eq!(p.replace_hop(1, &h), Ok(()));
    assert!(p.verify_checksum());
    assert_eq!(
        p.replace_hop(2, &h),
        Err(WireError::NoSuchHop {
            index: 2,
            hop_count: 2
        })
    );
    assert_eq!(parse_probe(&buf).unwrap().hops()[1].tx_app_ns, 123_456);
}

#[test]
fn rr_server_turns_a_request_into_a_response() {
    // What the rr server does: push its hop, set the response flag, fill tx last.
    let mut buf = emit_vec(&ProbeRepr {
        flags: 0,
        ..sample(0, 200)
    });
    let mut p = Packet::new_checked(&mut buf[..]).unwrap();
    p.push_hop(&HopRecord {
        node: 9,
        kind: HopKind::RrServer,
        rx_kernel_ns: 50,
        rx_app_ns: 60,
        tx_app_ns: NOT_FILLED,
        slipped: false,
    })
    .unwrap();
    p.set_flags(p.flags() | FLAG_RESPONSE);
    p.fill_checksum();
    let mut h = p.hop(0).unwrap();
    h.tx_app_ns = 70;
    p.replace_hop(0, &h).unwrap();
    let repr = parse_probe(&buf).unwrap();
    assert!(repr.is_response());
    assert_eq!(repr.hops()[0].tx_app_ns, 70);
}

// ---------------------------------------------------------------------------
// Properties

fn arb_hop() -> impl Strategy<Value = HopRecord> {
    (
        any::<u32>(),
        prop_oneof![Just(HopKind::Router), Just(HopKind::RrServer)],
        any::<i64>(),
        any::<i64>(),
        any::<i64>(),
        any::<bool>(),
    )
        .prop_map(
            |(node, kind, rx_kernel_ns, rx_app_ns, tx_app_ns, slipped)| HopRecord {
                node,
                kind,
                rx_kernel_ns,
                rx_app_ns,
                tx_app_ns,
                slipped,
            },
        )
}

fn arb_repr() -> impl Strategy<Value = ProbeRepr> {
    (
        (0u8..=KNOWN_FLAGS, any::<u32>(), any::<u64>(), any::<i64>()),
        (any::<i64>(), any::<i64>(), any::<i64>()),
        prop::collection::vec(arb_hop(), 0..=MAX_HOPS),
        0u32..200,
    )
        .prop_map(
            |((flags, flow_id, seq, frame), (t0, wake, send), hop_list, pad)| {
                let mut hops = [HopRecord::default(); MAX_HOPS];
                hops[..hop_list.len()].copy_from_slice(&hop_list);
                ProbeRepr {
                    flags,
                    flow_id,
                    seq,
                    frame,
                    t0_ns: t0,
                    t_wake_ns: wake,
                    t_send_ns: send,
                    hops,
                    hop_count: hop_list.len() as u8,
                    total_len: min_total_len(hop_list.len()) as u32 + pad,
                }
            },
        )
}

proptest! {
    #[test]
    fn a_tracked_hop_keeps_the_udp_checksum_a_full_fill_gives(
        repr in arb_repr(),
        hop in arb_hop(),
        padding in any::<u8>(),
        addrs in any::<(u32, u32)>(),
    ) {
        use crate::wire::udp::{UdpPacket, HEADER_LEN as UDP_HEADER};
        let (src, dst) = (std::net::Ipv4Addr::from(addrs.0), std::net::Ipv4Addr::from(addrs.1));
        let probe = emit_vec(&repr);
        let mut dgram = vec![0u8; UDP_HEADER + probe.len()];
        dgram[UDP_HEADER..].copy_from_slice(&probe);
        // whatever the padding holds, the record replaces it
        let end = UDP_HEADER + min_total_len(repr.hops().len());
        dgram[end..].fill(padding);
        let len = dgram.len() as u16;
        let mut udp = UdpPacket::new_unchecked(&mut dgram[..]);
        udp.set_len(len);
        udp.fill_checksum(src, dst);
        let pushed = Packet::new_unchecked(udp.payload_mut()).push_hop_tracked(&hop);
        match pushed {
            Ok(change) => {
                udp.adjust_checksum(change);
                let tracked = udp.checksum();
                udp.fill_checksum(src, dst);
                prop_assert_eq!(tracked, udp.checksum());
                prop_assert!(udp.verify_checksum(src, dst));
            }
            Err(e) => prop_assert!(matches!(e, WireError::NoRoom { .. }), "{:?}", e),
        }
    }

    #[test]
    fn emit_then_parse_round_trips(repr in arb_repr()) {
        let buf = emit_vec(&repr);
        prop_assert_eq!(buf.len(), repr.buffer_len());
        prop_assert_eq!(parse_probe(&buf), Ok(repr));
        let p = Packet::new_checked(&buf[..]).unwrap();
        for (i, h) in repr.hops().iter().enumerate() {
            prop_assert_eq!(p.hop(i), Some(*h));
        }
    }

    #[test]
    fn every_truncation_is_rejected(repr in arb_repr()) {
        let buf = emit_vec(&repr);
        for n in 0..buf.len() {
            let r = parse_probe(&buf[..n]);
            prop_assert!(matches!(r, Err(WireError::Truncated { .. })), "prefix {}: {:?}", n, r);
            prop_assert!(Packet::new_checked(&buf[..n]).is_err());
        }
    }

    #[test]
    fn every_single_bit_flip_is_detected(repr in arb_repr()) {
        let buf = emit_vec(&repr);
        let covered = min_total_len(repr.hops().len());
        for bit in 0..buf.len() * 8 {
            let mut bad = buf.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            let r = parse_probe(&bad);
            if bit / 8 == field::HOP_COUNT && r.is_ok() {
                // A changed hop count moves the end of the covered region: records
                // leave it or padding joins it. A 16-bit sum misses that exactly when
                // the bytes that moved sum to the count's change (about one case in
                // 65,535): then the sums of the two covered regions are the same.
                let old = Packet::new_unchecked(&buf[..]).covered_sum().map(fold);
                let new = Packet::new_unchecked(&bad[..]).covered_sum().map(fold);
                prop_assert_eq!(old, new, "flip of bit {} undetected", bit);
            } else if bit / 8 < covered {
                prop_assert!(r.is_err(), "flip of bit {} undetected", bit);
            } else {
                // Padding carries nothing.
                prop_assert_eq!(r, Ok(repr));
            }
        }
    }

    #[test]
    fn t_send_update_keeps_the_checksum_valid(repr in arb_repr(), t_send in any::<i64>()) {
        let mut buf = emit_vec(&repr);
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_t_send_ns_and_checksum(t_send);
        prop_assert!(p.verify_checksum());
        prop_assert_eq!(parse_probe(&buf), Ok(ProbeRepr { t_send_ns: t_send, ..repr }));
    }

    #[test]
    fn push_hop_equals_emitting_with_the_hop(repr in arb_repr(), extra in arb_hop()) {
        let mut buf = emit_vec(&repr);
        let mut p = Packet::new_unchecked(&mut buf[..]);
        let room = repr.hops().len() < MAX_HOPS
            && min_total_len(repr.hops().len() + 1) <= repr.buffer_len();
        let r = p.push_hop(&extra);
        if room {
            prop_assert_eq!(r, Ok(()));
            let mut want = repr;
            want.hops[repr.hops().len()] = extra;
            want.hop_count += 1;
            prop_assert_eq!(parse_probe(&buf), Ok(want));
            // Same bytes as a fresh emit, up to the checksum representation of zero.
            let fresh = emit_vec(&want);
            prop_assert_eq!(&buf[16..], &fresh[16..]);
            prop_assert_eq!(&buf[..14], &fresh[..14]);
        } else {
            prop_assert_eq!(r, Err(WireError::NoRoom {
                hop_count: repr.hop_count,
                total_len: repr.total_len,
            }));
        }
    }
}

// ---------------------------------------------------------------------------
// Fuzz smoke: the stable, deterministic twin of fuzz/fuzz_targets/probe_parse.rs.

/// What the fuzz target checks for one input: parsing never panics, a checked
/// packet's accessors never panic, and whatever parses re-emits to a packet that
/// parses to the same repr.
fn fuzz_one(data: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(p) = Packet::new_checked(data) {
        let _ = (p.magic(), p.version(), p.flags(), p.checksum(), p.seq());
        let _ = (p.frame(), p.t0_ns(), p.t_wake_ns(), p.t_send_ns());
        for i in 0..=usize::from(p.hop_count()) {
            let _ = p.hop(i);
        }
        let _ = p.verify_checksum();
        let mut owned = data.to_vec();
        let mut m = Packet::new_unchecked(&mut owned[..]);
        let _ = m.push_hop(&HopRecord::default());
        let _ = m.replace_hop(0, &HopRecord::default());
    }
    if let Ok(repr) = parse_probe(data) {
        let mut out = vec![0u8; repr.buffer_len()];
        prop_assert_eq!(repr.emit_into(&mut out), Ok(repr.buffer_len()));
        prop_assert_eq!(parse_probe(&out), Ok(repr));
    }
    Ok(())
}

/// A valid packet, then a few random edits: set bytes, truncate, extend, and
/// (sometimes) re-fill the checksum so the edit reaches the checks behind it.
fn arb_mutated() -> impl Strategy<Value = Vec<u8>> {
    (
        arb_repr(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        prop::option::of(any::<prop::sample::Index>()),
        prop::collection::vec(any::<u8>(), 0..3),
        any::<bool>(),
    )
        .prop_map(|(repr, edits, cut, tail, refill)| {
            let mut buf = emit_vec(&repr);
            for (at, value) in edits {
                let i = at.index(buf.len());
                buf[i] = value;
            }
            if let Some(at) = cut {
                buf.truncate(at.index(buf.len() + 1));
            }
            buf.extend_from_slice(&tail);
            if refill {
                let mut p = Packet::new_unchecked(&mut buf[..]);
                if p.as_bytes().len() >= HEADER_LEN && p.covered_sum().is_some() {
                    p.fill_checksum();
                }
            }
            buf
        })
}

/// Random bytes behind a valid magic and version, so they get past the first checks.
fn arb_probe_like() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..600).prop_map(|mut v| {
        let head = b"LKST\x01";
        let n = head.len().min(v.len());
        v[..n].copy_from_slice(&head[..n]);
        v
    })
}

proptest! {
    #![proptest_config(crate::fuzz_config(3000))]

    #[test]
    fn fuzz_smoke_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..600)) {
        fuzz_one(&data)?;
    }

    #[test]
    fn fuzz_smoke_probe_like_bytes(data in arb_probe_like()) {
        fuzz_one(&data)?;
    }

    #[test]
    fn fuzz_smoke_mutated_packets(data in arb_mutated()) {
        fuzz_one(&data)?;
    }
}
