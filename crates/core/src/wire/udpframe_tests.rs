use super::*;
use crate::wire::checksum::checksum;
use proptest::prelude::*;

const SRC: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(192, 168, 0, 1), 1234);
const DST: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(192, 168, 0, 199), 9);

fn header() -> UdpFrameHeader {
    UdpFrameHeader {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        src: SRC,
        dst: DST,
    }
}

fn frame(dscp: u8, payload: &[u8]) -> Vec<u8> {
    let mut buf = vec![0u8; UdpFrameHeader::frame_len(payload.len())];
    let n = header().emit(dscp, payload, &mut buf).unwrap();
    assert_eq!(n, buf.len());
    buf
}

/// Sets the IPv4 header checksum right again after an edit.
fn fix_ip_checksum(f: &mut [u8]) {
    f[24] = 0;
    f[25] = 0;
    let c = checksum(&f[14..34]);
    f[24..26].copy_from_slice(&c.to_be_bytes());
}

#[test]
fn a_frame_is_byte_for_byte_what_the_stack_sends() {
    // 192.168.0.1:1234 → 192.168.0.199:9, "abcd": IPv4 total length 0x20, header
    // checksum 0xb8b4 (the ipv4 module's known header, 0xb861, with 0x53 less
    // length); UDP checksum 0xb41b (worked out by hand in the udp module).
    let expected: Vec<u8> = [
        &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00][..],
        &[
            0x45, 0x00, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0xb4, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ],
        &[0x04, 0xd2, 0x00, 0x09, 0x00, 0x0c, 0xb4, 0x1b],
        b"abcd",
    ]
    .concat();
    assert_eq!(frame(0, b"abcd"), expected);
}

#[test]
fn a_frame_parses_back_with_its_dscp_and_payload() {
    let payload: Vec<u8> = (0..200u32).map(|i| (i * 7) as u8).collect();
    for dscp in [0u8, 0x0c, 0x0f, 0x3f] {
        let f = frame(dscp, &payload);
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        let e = EthernetRepr::parse(&eth).unwrap();
        assert_eq!(e.ethertype, EtherType::IPV4);
        assert_eq!(e.src, header().src_mac);
        assert_eq!(e.dst, header().dst_mac);
        let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
        let r = Ipv4Repr::parse(&ip).unwrap();
        assert_eq!(
            (r.src, r.dst, r.dscp, r.ecn, r.ttl),
            (*SRC.ip(), *DST.ip(), dscp, 0, 64)
        );
        assert_eq!(r.protocol, PROTO_UDP);
        assert!(ip.dont_frag());
        let udp = UdpPacket::new_checked(ip.payload()).unwrap();
        let u = UdpRepr::parse(&udp, r.src, r.dst, true).unwrap();
        assert_eq!((u.src_port, u.dst_port), (1234, 9));
        assert_eq!(udp.payload(), &payload[..]);
        assert_eq!(accept(&f, DST, L4Checksum::Verify), Ok(&payload[..]));
        assert_eq!(source(&f), Some(*SRC.ip()));
    }
}

#[test]
fn emit_refuses_what_does_not_fit() {
    let mut small = [0u8; 64];
    assert_eq!(
        header().emit(0, b"abcd", &mut small[..30]),
        Err(FrameBuildError::BufferTooSmall {
            needed: 46,
            got: 30
        })
    );
    assert!(matches!(
        header().emit(0x40, b"abcd", &mut small),
        Err(FrameBuildError::Ipv4(Ipv4Error::BadDscp(0x40)))
    ));
    let big = vec![0u8; 70_000];
    let mut buf = vec![0u8; 70_100];
    assert!(header().emit(0, &big, &mut buf).is_err());
}

#[test]
fn frames_not_for_the_receiver_are_dropped_by_reason() {
    let good = frame(0, b"abcd");
    let to = |ip: [u8; 4], port: u16| SocketAddrV4::new(Ipv4Addr::from(ip), port);
    assert_eq!(
        accept(&good, to([192, 168, 0, 2], 9), L4Checksum::Verify),
        Err(FrameDrop::OtherAddress)
    );
    assert_eq!(
        accept(&good, to([192, 168, 0, 199], 10), L4Checksum::Verify),
        Err(FrameDrop::OtherPort)
    );
    let mut arp = good.clone();
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(
        accept(&arp, DST, L4Checksum::Verify),
        Err(FrameDrop::NotIpv4)
    );
    let mut tcp = good.clone();
    tcp[23] = 6;
    fix_ip_checksum(&mut tcp);
    assert_eq!(
        accept(&tcp, DST, L4Checksum::Verify),
        Err(FrameDrop::OtherProtocol)
    );
    let mut frag = good.clone();
    frag[20] = 0x20; // more fragments
    fix_ip_checksum(&mut frag);
    assert_eq!(
        accept(&frag, DST, L4Checksum::Verify),
        Err(FrameDrop::Fragment)
    );
}

#[test]
fn broken_frames_are_dropped_as_broken() {
    let good = frame(0, b"abcd");
    let mut ip_sum = good.clone();
    ip_sum[24] ^= 0xff;
    assert_eq!(
        accept(&ip_sum, DST, L4Checksum::Verify),
        Err(FrameDrop::BadChecksum)
    );
    let mut udp_sum = good.clone();
    udp_sum[45] ^= 0x01; // a payload byte
    assert_eq!(
        accept(&udp_sum, DST, L4Checksum::Verify),
        Err(FrameDrop::BadChecksum)
    );
    // a checksum the kernel vouched for is not summed again
    assert_eq!(
        accept(&udp_sum, DST, L4Checksum::Trusted),
        Ok(&udp_sum[42..])
    );
    for cut in 0..good.len() {
        let why = accept(&good[..cut], DST, L4Checksum::Verify).unwrap_err();
        assert_eq!(why, FrameDrop::Malformed, "cut at {cut}");
    }
    // a UDP length beyond the IPv4 datagram
    let mut long = good.clone();
    long[38..40].copy_from_slice(&0x0100u16.to_be_bytes());
    assert_eq!(
        accept(&long, DST, L4Checksum::Trusted),
        Err(FrameDrop::Malformed)
    );
}

#[test]
fn link_padding_after_the_datagram_is_not_payload() {
    let mut padded = frame(0, b"ab");
    padded.resize(60, 0);
    assert_eq!(accept(&padded, DST, L4Checksum::Verify), Ok(&b"ab"[..]));
}

#[test]
fn drops_are_counted_by_reason() {
    let mut d = FrameDrops::default();
    for why in [
        FrameDrop::NotIpv4,
        FrameDrop::OtherAddress,
        FrameDrop::OtherProtocol,
        FrameDrop::OtherPort,
        FrameDrop::Fragment,
        FrameDrop::BadChecksum,
        FrameDrop::Malformed,
        FrameDrop::Malformed,
    ] {
        d.count(why);
    }
    assert_eq!(
        d,
        FrameDrops {
            not_ipv4: 1,
            other_address: 1,
            other_protocol: 1,
            other_port: 1,
            fragments: 1,
            bad_checksum: 1,
            malformed: 2,
        }
    );
    assert_eq!(d.broken(), 3);
}

proptest! {
    #[test]
    fn any_bytes_are_an_answer_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = accept(&bytes, DST, L4Checksum::Verify);
        let _ = accept(&bytes, DST, L4Checksum::Trusted);
        let _ = source(&bytes);
    }

    #[test]
    fn a_changed_byte_is_never_accepted_as_other_payload(
        payload in proptest::collection::vec(any::<u8>(), 0..100),
        at in 0usize..142,
        bit in 0u8..8,
    ) {
        let mut f = frame(0x0c, &payload);
        let at = at % f.len();
        f[at] ^= 1 << bit;
        if let Ok(p) = accept(&f, DST, L4Checksum::Verify) {
            // only a change the checksums cannot see passes: the MAC addresses, or a
            // UDP checksum turned into 0, "none"
            prop_assert!(at < 12 || (40..42).contains(&at), "byte {}", at);
            prop_assert_eq!(p, &payload[..]);
        }
    }
}
