//! Namespace lab integration tests: namespaces, veth links, offloads, AF_PACKET
//! sockets, qdiscs. They need root (and iproute2); otherwise each prints a skip note
//! and passes.
//!
//! Every test names what it creates `lst-<pid hex>-<counter>...` (interface names stay
//! within 15 bytes), owns it through `NetnsGuard`s that delete it even when an
//! assertion fails, and checks at the end that nothing of its is left. Veth ends are
//! created directly inside their namespaces, so the host's own namespace never holds
//! one. Loops are bounded by a count and a generous wall-clock cap; nothing asserts
//! speed.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration as StdDuration, Instant as StdInstant};

mod common;

use common::{can_run, pair, unique, CAP, IP_A, IP_B};
use lockstep_core::{ClockId, Duration};
use lockstep_linux::cmd;
use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::iface::{self, IfaceError, Mac};
use lockstep_linux::netns::{self, NetnsError, NetnsGuard};
use lockstep_linux::packet::{FrameKind, PacketSocket};
use lockstep_linux::tc::{self, TbfLimit, TcError};
use lockstep_linux::udp::{RecvMode, TimestampConfig, UdpSocket};

/// Runs `body` with a fresh name prefix, then checks that no namespace or host
/// interface with that prefix is left (the body's guards have been dropped by then).
fn with_cleanup_check(test: &str, body: impl FnOnce(&str)) {
    if !can_run(test, &["ip", "tc"]) {
        return;
    }
    let base = unique("lst");
    body(&base);
    assert_eq!(netns::list(&base).unwrap(), Vec::<String>::new());
    assert_eq!(iface::list(&base).unwrap(), Vec::new());
}

/// Deletes a host-namespace link on drop unless it has moved away (then the delete
/// fails and is ignored): a failure between creating and moving leaks nothing.
struct HostLink(String);

impl Drop for HostLink {
    fn drop(&mut self) {
        if iface::ifindex(&self.0).is_ok() {
            let _ = iface::delete_link(&self.0);
        }
    }
}

// ---- hand-decoding and hand-building Ethernet / IPv4 / UDP (only what the tests need)

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// The one's-complement sum of `data` added to `sum` (not folded).
fn sum16(mut sum: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u32::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

fn fold(mut sum: u32) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Pseudo-header (RFC 768) + UDP header + payload sum of an IPv4/UDP packet.
fn udp_sum(ip_header: &[u8], udp: &[u8]) -> u32 {
    let mut s = sum16(0, &ip_header[12..20]);
    s += 17 + udp.len() as u32;
    sum16(s, udp)
}

/// A parsed IPv4/UDP frame.
#[derive(Debug)]
struct Udp4 {
    dst_mac: Mac,
    src_mac: Mac,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    payload: Vec<u8>,
    ip_csum_ok: bool,
    udp_csum_ok: bool,
}

fn parse_udp4(f: &[u8]) -> Option<Udp4> {
    if f.len() < 14 + 20 + 8 || be16(f, 12) != 0x0800 {
        return None;
    }
    let ip = &f[14..];
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ip[0] >> 4 != 4 || ihl < 20 || ip[9] != 17 {
        return None;
    }
    let total = usize::from(be16(ip, 2));
    let ip = ip.get(..total)?;
    let udp = ip.get(ihl..)?;
    let ulen = usize::from(be16(udp, 4));
    let udp = udp.get(..ulen)?;
    Some(Udp4 {
        dst_mac: f[0..6].try_into().unwrap(),
        src_mac: f[6..12].try_into().unwrap(),
        src: Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
        dst: Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
        sport: be16(udp, 0),
        dport: be16(udp, 2),
        payload: udp[8..].to_vec(),
        ip_csum_ok: fold(sum16(0, &ip[..ihl])) == 0xffff,
        udp_csum_ok: be16(udp, 6) != 0 && fold(udp_sum(ip, udp)) == 0xffff,
    })
}

/// The addresses of a hand-built frame.
struct Ends {
    dst_mac: Mac,
    src_mac: Mac,
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
}

/// An Ethernet/IPv4/UDP frame with both checksums right.
fn build_udp4(e: &Ends, id: u16, payload: &[u8]) -> Vec<u8> {
    let Ends {
        dst_mac,
        src_mac,
        src,
        dst,
        sport,
        dport,
    } = *e;
    let udp_len = 8 + payload.len();
    let total = 20 + udp_len;
    let mut f = Vec::with_capacity(14 + total);
    f.extend(dst_mac);
    f.extend(src_mac);
    f.extend(0x0800u16.to_be_bytes());
    let mut ip = vec![0x45, 0];
    ip.extend((total as u16).to_be_bytes());
    ip.extend(id.to_be_bytes());
    ip.extend(0x4000u16.to_be_bytes()); // DF
    ip.extend([64, 17, 0, 0]);
    ip.extend(src.octets());
    ip.extend(dst.octets());
    let c = !fold(sum16(0, &ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut udp = Vec::with_capacity(udp_len);
    udp.extend(sport.to_be_bytes());
    udp.extend(dport.to_be_bytes());
    udp.extend((udp_len as u16).to_be_bytes());
    udp.extend([0, 0]);
    udp.extend(payload);
    let c = match !fold(udp_sum(&ip, &udp)) {
        0 => 0xffff,
        c => c,
    };
    udp[6..8].copy_from_slice(&c.to_be_bytes());
    f.extend(ip);
    f.extend(udp);
    f
}

#[test]
fn frame_builder_matches_the_parser() {
    let ends = Ends {
        dst_mac: [2; 6],
        src_mac: [4; 6],
        src: IP_A,
        dst: IP_B,
        sport: 5555,
        dport: 7777,
    };
    let f = build_udp4(&ends, 9, b"hello");
    let p = parse_udp4(&f).unwrap();
    assert!(p.ip_csum_ok && p.udp_csum_ok, "{p:?}");
    assert_eq!((p.src, p.dst, p.sport, p.dport), (IP_A, IP_B, 5555, 7777));
    assert_eq!(p.payload, b"hello");
    let mut bad = f.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert!(!parse_udp4(&bad).unwrap().udp_csum_ok);
}

/// Receives on `ps` until `want` accepts a frame, for at most [`CAP`]; returns that
/// frame's parse and meta, and every frame seen before it.
fn recv_until(
    ps: &mut PacketSocket,
    mut want: impl FnMut(&Udp4) -> bool,
) -> (Udp4, lockstep_linux::packet::FrameMeta, Vec<Vec<u8>>) {
    let mut buf = vec![0u8; 2048 * 8];
    let mut before = Vec::new();
    let start = StdInstant::now();
    while start.elapsed() < CAP {
        let mut found = None;
        let mode = RecvMode::Block {
            timeout: Some(Duration::from_millis(100)),
        };
        ps.recv_batch(&mut buf, 2048, mode, |frame, meta| {
            if found.is_some() {
                return;
            }
            assert_eq!(meta.len, frame.len());
            assert!(!meta.truncated);
            match parse_udp4(frame) {
                Some(p) if want(&p) => found = Some((p, meta)),
                _ => before.push(frame.to_vec()),
            }
        })
        .unwrap();
        if let Some((p, m)) = found {
            return (p, m, before);
        }
    }
    panic!("the frame did not arrive within {CAP:?}");
}

#[test]
fn udp_from_a_reaches_a_packet_socket_in_b_with_offloads_off() {
    with_cleanup_check("udp_from_a_reaches_a_packet_socket_in_b", |base| {
        let p = pair(base);
        let (if_a, if_b) = (p.if_a.clone(), p.if_b.clone());

        let mut ps_b = p.b.run(|| PacketSocket::bind(&if_b)).unwrap().unwrap();
        let ts = ps_b
            .enable_timestamping(TimestampConfig {
                rx_software: true,
                ..Default::default()
            })
            .unwrap();
        assert!(ts.rx_software, "{ts:?}");
        eprintln!("rx timestamping notes: {:?}", ts.notes);
        let mut ps_a = p.a.run(|| PacketSocket::bind(&if_a)).unwrap().unwrap();
        assert_eq!(
            ps_a.ifindex(),
            p.a.run(|| iface::ifindex(&if_a)).unwrap().unwrap()
        );
        let tx =
            p.a.run(|| UdpSocket::bind(SocketAddr::from((IP_A, 4000))))
                .unwrap()
                .unwrap();
        let rx =
            p.b.run(|| UdpSocket::bind(SocketAddr::from((IP_B, 9999))))
                .unwrap()
                .unwrap();
        let to_b = SocketAddr::from((IP_B, 9999));

        // 1. Transmit checksum offload on at A: the frame crosses the veth with its UDP
        //    checksum unfinished, and the packet socket says so.
        let on =
            p.a.run(|| {
                ethtool::set_offloads(
                    &if_a,
                    Offloads {
                        tx_csum: true,
                        ..Offloads::ALL_OFF
                    },
                )
            })
            .unwrap()
            .unwrap();
        assert!(on.tx_csum);
        tx.send_to(b"partial", to_b).unwrap();
        let (u, meta, _) = recv_until(&mut ps_b, |u| u.dport == 9999);
        assert_eq!(u.payload, b"partial");
        assert!(meta.csum_not_ready, "{meta:?}");
        assert!(!u.udp_csum_ok);
        assert!(u.ip_csum_ok);

        // 2. All offloads off on both ends, read back.
        for (ns, ifname) in [(&p.a, &if_a), (&p.b, &if_b)] {
            let got = ns
                .run(|| ethtool::set_offloads(ifname, Offloads::ALL_OFF))
                .unwrap()
                .unwrap();
            assert_eq!(got, Offloads::ALL_OFF);
            let read = ns.run(|| ethtool::get_offloads(ifname)).unwrap().unwrap();
            assert_eq!(read, Offloads::ALL_OFF);
            // A veth has no interrupt coalescing.
            let c = ns.run(|| ethtool::get_coalesce(ifname)).unwrap();
            assert!(c.as_ref().is_err_and(|e| e.is_unsupported()), "{c:?}");
        }

        // 3. Now the frame is complete, and decodes by hand.
        tx.send_to(b"complete", to_b).unwrap();
        let (u, meta, _) = recv_until(&mut ps_b, |u| u.payload == b"complete");
        assert!(!meta.csum_not_ready, "{meta:?}");
        assert!(u.ip_csum_ok && u.udp_csum_ok, "{u:?}");
        assert_eq!((u.dst_mac, u.src_mac), (p.mac_b, p.mac_a));
        assert_eq!((u.src, u.dst, u.sport, u.dport), (IP_A, IP_B, 4000, 9999));
        assert_eq!(meta.kind, FrameKind::Host);
        assert_eq!(meta.vlan, None);
        let krx = meta.kernel_rx.expect("kernel RX timestamp");
        assert_eq!(krx.clock, ClockId::Realtime);
        assert!(krx.ns > 0);

        // The kernel in B delivered both datagrams too.
        let mut buf = [0u8; 64];
        for want in [&b"partial"[..], b"complete"] {
            let info = rx
                .recv(
                    &mut buf,
                    RecvMode::Block {
                        timeout: Some(Duration::from_secs(10)),
                    },
                )
                .unwrap()
                .expect("datagram");
            assert_eq!(&buf[..info.len], want);
        }

        // 4. A's packet socket never reports what A sends: A sends to B (outgoing
        //    on if_a, queued to taps before send returns), then B answers (incoming).
        //    Frames arrive in order, so the answer is seen after anything outgoing.
        tx.send_to(b"out", to_b).unwrap();
        let info = rx
            .recv(
                &mut buf,
                RecvMode::Block {
                    timeout: Some(Duration::from_secs(10)),
                },
            )
            .unwrap()
            .expect("datagram");
        assert_eq!(&buf[..info.len], b"out");
        rx.send_to(b"back", SocketAddr::from((IP_A, 4000))).unwrap();
        let (u, meta, before) = recv_until(&mut ps_a, |u| u.payload == b"back");
        assert_eq!(u.src_mac, p.mac_b);
        assert_eq!(meta.kind, FrameKind::Host);
        assert!(
            before.iter().all(|f| f.get(6..12) != Some(&p.mac_a[..])),
            "an outgoing frame was reported: {before:?}"
        );
        let stats = ps_a.take_stats().unwrap();
        assert_eq!(stats.drops, 0);
    });
}

#[test]
fn send_batch_of_64_hand_built_frames_reaches_a_udp_socket() {
    with_cleanup_check("send_batch_of_64_hand_built_frames", |base| {
        let p = pair(base);
        let (if_a, if_b) = (p.if_a.clone(), p.if_b.clone());
        for (ns, ifname) in [(&p.a, &if_a), (&p.b, &if_b)] {
            ns.run(|| ethtool::set_offloads(ifname, Offloads::ALL_OFF))
                .unwrap()
                .unwrap();
        }
        let rx =
            p.b.run(|| UdpSocket::bind(SocketAddr::from((IP_B, 7777))))
                .unwrap()
                .unwrap();
        let ps = p.a.run(|| PacketSocket::bind(&if_a)).unwrap().unwrap();
        ps.set_qdisc_bypass(true).unwrap();
        ps.set_nonblocking(true).unwrap();
        assert!(ps.set_send_buffer(1 << 20).unwrap() > 0);
        let ts = ps
            .enable_timestamping(TimestampConfig {
                tx_software: true,
                ..Default::default()
            })
            .unwrap();
        assert!(ts.tx_software, "{ts:?}");

        let ends = Ends {
            dst_mac: p.mac_b,
            src_mac: p.mac_a,
            src: IP_A,
            dst: IP_B,
            sport: 5555,
            dport: 7777,
        };
        let frames: Vec<Vec<u8>> = (0..64u16)
            .map(|i| build_udp4(&ends, i, &[i as u8; 20]))
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let mut sent = 0;
        let start = StdInstant::now();
        while sent < refs.len() && start.elapsed() < CAP {
            let n = ps.send_batch(&refs[sent..]).unwrap();
            sent += n;
            if n == 0 {
                std::thread::sleep(StdDuration::from_millis(1));
            }
        }
        assert_eq!(sent, 64);

        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        let start = StdInstant::now();
        while got.len() < 64 && start.elapsed() < CAP {
            let mode = RecvMode::Block {
                timeout: Some(Duration::from_millis(100)),
            };
            if let Some(info) = rx.recv(&mut buf, mode).unwrap() {
                assert_eq!(info.len, 20);
                assert_eq!(info.from, SocketAddr::from((IP_A, 5555)));
                assert!(buf[..20].iter().all(|&b| b == buf[0]));
                got.push(buf[0]);
            }
        }
        got.sort_unstable();
        assert_eq!(got, (0..64).collect::<Vec<u8>>());

        let mut ids = Vec::new();
        let start = StdInstant::now();
        while ids.len() < 64 && start.elapsed() < CAP {
            match ps.poll_tx_timestamp().unwrap() {
                Some(t) => {
                    assert_eq!(t.software.unwrap().clock, ClockId::Realtime);
                    ids.push(t.id);
                }
                None => std::thread::sleep(StdDuration::from_millis(1)),
            }
        }
        ids.sort_unstable();
        assert_eq!(ids, (0..64).collect::<Vec<u32>>());
        assert_eq!(ps.poll_tx_timestamp().unwrap(), None);

        // A single send, and an empty batch.
        assert!(ps.send(&frames[0]).unwrap());
        assert_eq!(ps.send_batch(&[]).unwrap(), 0);
        let info = rx
            .recv(
                &mut buf,
                RecvMode::Block {
                    timeout: Some(Duration::from_secs(10)),
                },
            )
            .unwrap()
            .expect("datagram");
        assert_eq!(&buf[..info.len], &[0u8; 20]);
    });
}

#[test]
fn tbf_and_htb_apply_on_a_veth_and_missing_qdiscs_are_detected() {
    with_cleanup_check("tbf_and_qdisc_detection", |base| {
        let ns = NetnsGuard::create(&format!("{base}T")).unwrap();
        let (x, y) = (format!("{base}x"), format!("{base}y"));
        iface::create_veth_between(&x, Some(ns.name()), &y, Some(ns.name())).unwrap();
        ns.run(|| {
            assert_eq!(tc::root_kind(&x).unwrap(), None);
            iface::set_up(&x).unwrap();
            iface::set_up(&y).unwrap();
            assert_eq!(tc::root_kind(&x).unwrap().as_deref(), Some("noqueue"));
            tc::add_tbf(
                &x,
                100_000_000,
                2 * 1514,
                TbfLimit::Latency(Duration::from_millis(50)),
            )
            .unwrap();
            assert_eq!(tc::root_kind(&x).unwrap().as_deref(), Some("tbf"));
            let shown = tc::show(&x).unwrap();
            assert!(shown.contains("rate 100Mbit"), "{shown}");
            tc::add_tbf(&x, 1_000_000_000, 1514, TbfLimit::Bytes(100_000)).unwrap();
            assert!(tc::show(&x).unwrap().contains("rate 1Gbit"));
            let e = tc::add_tbf(&x, 1_000_000, 1000, TbfLimit::Bytes(10_000)).unwrap_err();
            assert!(matches!(e, TcError::InvalidArgument { .. }), "{e}");
            tc::add_htb_rate(&y, 10_000_000, None).unwrap();
            assert_eq!(tc::root_kind(&y).unwrap().as_deref(), Some("htb"));
            tc::clear(&x).unwrap();
            tc::clear(&y).unwrap();
            tc::clear(&x).unwrap(); // nothing configured: still fine
            assert_eq!(tc::root_kind(&x).unwrap().as_deref(), Some("noqueue"));
            assert_eq!(tc::root_kind(&y).unwrap().as_deref(), Some("noqueue"));
            let e = tc::add_tbf("lst-nosuchdev", 1, 2000, TbfLimit::Bytes(1)).unwrap_err();
            assert!(matches!(e, TcError::Iface(IfaceError::NotFound(_))), "{e}");
        })
        .unwrap();

        let mut kinds = vec!["tbf", "htb"];
        kinds.extend(tc::TSN_QDISCS);
        kinds.push("lstnosuch");
        let probes = tc::probe_qdiscs(&kinds).unwrap();
        for p in &probes {
            eprintln!(
                "qdisc {:8} available: {:5} ({})",
                p.kind, p.available, p.detail
            );
        }
        assert_eq!(probes.len(), kinds.len());
        assert!(probes[0].available && probes[1].available);
        assert_eq!(probes[0].detail, "added");
        assert!(!probes.last().unwrap().available);
        eprintln!(
            "qdisc_available(\"taprio\") = {}",
            tc::qdisc_available("taprio").unwrap()
        );
        tc::require_qdisc("tbf").unwrap();
        let e = tc::require_qdisc("lstnosuch").unwrap_err();
        assert!(
            e.to_string().starts_with(
                "the kernel has no lstnosuch qdisc (it needs CONFIG_NET_SCH_LSTNOSUCH, or the module sch_lstnosuch): "
            ),
            "{e}"
        );
        if let Err(e) = tc::require_qdisc("taprio") {
            eprintln!("{e}");
        }
    });
}

#[test]
fn namespaces_are_listed_by_prefix_and_cleaned() {
    with_cleanup_check("namespaces_are_listed_by_prefix_and_cleaned", |base| {
        let prefix = format!("{base}-");
        let guards: Vec<NetnsGuard> = (0..3)
            .map(|i| NetnsGuard::create(&format!("{prefix}{i}")).unwrap())
            .collect();
        let other = NetnsGuard::create(&format!("{base}x")).unwrap();
        let names: Vec<String> = guards.iter().map(|g| g.name().to_string()).collect();
        assert_eq!(netns::list(&prefix).unwrap(), names);
        assert!(netns::exists(other.name()));
        assert!(matches!(
            netns::create(&names[0]),
            Err(NetnsError::AlreadyExists(_))
        ));

        // What `lockstep lab clean` does: list by prefix, kill, delete.
        let mut child = netns::command(&names[1], "sleep")
            .unwrap()
            .arg("30")
            .spawn()
            .unwrap();
        let pids = netns::pids(&names[1]).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(pids.contains(&child.id()), "{pids:?}");
        for n in netns::list(&prefix).unwrap() {
            netns::delete(&n).unwrap();
        }
        assert_eq!(netns::list(&prefix).unwrap(), Vec::<String>::new());
        assert!(netns::exists(other.name()));
        drop(guards); // already gone: dropping is quiet
        other.delete().unwrap();

        // A guard deletes its namespace while unwinding from a panic.
        let name = format!("{base}p");
        let r = std::panic::catch_unwind(|| {
            let _g = NetnsGuard::create(&name).unwrap();
            assert!(netns::exists(&name));
            panic!("test failure inside");
        });
        assert!(r.is_err());
        assert!(!netns::exists(&name));

        // into_name keeps the namespace; delete it by hand.
        let kept = NetnsGuard::create(&name).unwrap().into_name();
        assert!(netns::exists(&kept));
        netns::delete(&kept).unwrap();
    });
}

#[test]
fn interfaces_are_seen_and_changed_only_inside_their_namespace() {
    with_cleanup_check("interfaces_inside_their_namespace", |base| {
        let n1 = NetnsGuard::create(&format!("{base}1")).unwrap();
        let n2 = NetnsGuard::create(&format!("{base}2")).unwrap();
        let (x, y) = (format!("{base}x"), format!("{base}y"));
        iface::create_veth_between(&x, Some(n1.name()), &y, Some(n1.name())).unwrap();
        assert!(matches!(iface::ifindex(&x), Err(IfaceError::NotFound(_))));
        let host_forward = iface::sysctl_get("net.ipv4.ip_forward").unwrap();

        n1.run(|| {
            let listed: Vec<String> = iface::list(base)
                .unwrap()
                .into_iter()
                .map(|(_, n)| n)
                .collect();
            assert_eq!(listed, vec![x.clone(), y.clone()]);
            assert!(!iface::is_up(&x).unwrap());
            iface::set_up(&x).unwrap();
            assert!(iface::is_up(&x).unwrap());
            iface::set_down(&x).unwrap();
            assert!(!iface::is_up(&x).unwrap());
            let m = [0x02, 0x00, 0x5e, 0x10, 0x20, 0x30];
            iface::set_mac(&x, m).unwrap();
            assert_eq!(iface::mac(&x).unwrap(), m);
            iface::set_mtu(&x, 1400).unwrap();
            assert_eq!(iface::mtu(&x).unwrap(), 1400);

            // Sysctls are per namespace.
            let other = if host_forward == "1" { "0" } else { "1" };
            iface::sysctl_set("net.ipv4.ip_forward", other).unwrap();
            assert_eq!(iface::sysctl_get("net.ipv4.ip_forward").unwrap(), other);

            iface::add_addr(&x, IP_A, 24).unwrap();
            iface::set_up(&x).unwrap();
            iface::add_route(Ipv4Addr::new(192, 168, 50, 0), 24, Some(IP_B), None).unwrap();
            let r = cmd::ip(&["route", "show", "192.168.50.0/24"]).unwrap();
            assert!(r.contains("via 10.0.0.2"), "{r}");
            iface::add_neigh(&x, IP_B, [2, 0, 0, 0, 0, 9]).unwrap();
            let n = cmd::ip(&["neigh", "show", "10.0.0.2"]).unwrap();
            assert!(
                n.contains("lladdr 02:00:00:00:00:09") && n.contains("PERMANENT"),
                "{n}"
            );

            // Failures name the command and carry its message.
            let e = iface::add_addr("lst-nosuchdev", Ipv4Addr::new(10, 9, 9, 9), 24).unwrap_err();
            let msg = e.to_string();
            assert!(
                msg.starts_with("`ip addr add 10.9.9.9/24 dev lst-nosuchdev` failed (exit status "),
                "{msg}"
            );
            assert!(msg.contains("Cannot find device"), "{msg}");
            iface::move_to_netns(&y, n2.name()).unwrap();
            assert!(matches!(iface::ifindex(&y), Err(IfaceError::NotFound(_))));
        })
        .unwrap();
        assert_eq!(
            iface::sysctl_get("net.ipv4.ip_forward").unwrap(),
            host_forward
        );
        assert!(n2.run(|| iface::ifindex(&y)).unwrap().is_ok());

        // Child processes run inside the namespace, both ways.
        let out = n1
            .command("ip")
            .unwrap()
            .args(["-o", "link"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(&x) && !text.contains(&y),
            "{text}"
        );
        let out = netns::exec_command(n2.name(), "ip")
            .unwrap()
            .args(["-o", "link"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains(&y), "{text}");

        // A veth created in the host namespace and then moved away leaves nothing.
        let (h1, h2) = (format!("{base}h"), format!("{base}i"));
        let _host_link = HostLink(h1.clone());
        iface::create_veth(&h1, &h2).unwrap();
        iface::move_to_netns(&h1, n1.name()).unwrap();
        iface::move_to_netns(&h2, n2.name()).unwrap();
        assert!(n1.run(|| iface::ifindex(&h1)).unwrap().is_ok());

        // A packet socket on an interface of another namespace is refused clearly.
        let e = PacketSocket::bind(&x).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("no interface \"{x}\" in this network namespace")
        );
    });
}

#[test]
fn supervised_children_run_in_their_namespace_and_rps_is_set_there() {
    use lockstep_linux::proc::{Group, Netns, Spec};
    use lockstep_linux::rps;

    with_cleanup_check("supervised_children_in_namespace", |base| {
        let p = pair(base);
        let dir = std::env::temp_dir().join(format!("{base}-proc"));
        std::fs::create_dir_all(&dir).unwrap();
        let mac_b = iface::format_mac(&p.mac_b);
        // entered with setns: the namespace's interfaces, the host's /sys
        let mut g: Group<()> = Group::new();
        let enter = Spec::new("enter", "ip")
            .args(["-o", "link", "show", "dev", &p.if_b])
            .netns(Netns::Enter(p.b.name().to_string()))
            .stdout(dir.join("enter.out"));
        let exec = Spec::new("exec", "cat")
            .args([format!("/sys/class/net/{}/address", p.if_b)])
            .netns(Netns::Exec(p.b.name().to_string()))
            .stdout(dir.join("exec.out"))
            .stderr(dir.join("exec.err"));
        g.spawn((), enter).unwrap();
        g.spawn((), exec).unwrap();
        assert!(g.wait_until(|_| true, StdInstant::now() + CAP));
        for (_, c) in g.iter() {
            assert!(
                c.status().is_some_and(|s| s.success()),
                "{}: {}",
                c.name(),
                c.stderr_tail()
            );
        }
        let enter = std::fs::read_to_string(dir.join("enter.out")).unwrap();
        assert!(enter.contains(&mac_b), "{enter}");
        // through ip netns exec: /sys is the namespace's
        let exec = std::fs::read_to_string(dir.join("exec.out")).unwrap();
        assert_eq!(exec.trim(), mac_b);

        // a child in the namespace is stopped with its group when the group is dropped
        let mut g: Group<()> = Group::new();
        let pid = g
            .spawn(
                (),
                Spec::new("sleep", "sleep")
                    .args(["30"])
                    .netns(Netns::Exec(p.b.name().to_string())),
            )
            .unwrap()
            .pid();
        // `ip netns exec` enters the namespace just after it starts: give it a moment
        // (at most 2 s, polled)
        let listed = || netns::pids(p.b.name()).unwrap().contains(&pid);
        for _ in 0..200 {
            if listed() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(listed());
        drop(g);
        assert!(!netns::pids(p.b.name()).unwrap().contains(&pid));

        // RPS of the veth end in B, read back through B's /sys
        let read_mask = || {
            let path = rps::mask_path(&p.if_b);
            cmd::ip(&["netns", "exec", p.b.name(), "cat", &path]).unwrap()
        };
        rps::set_cpus(p.b.name(), &p.if_b, 1).unwrap();
        let mask = read_mask();
        assert!(mask.trim().trim_start_matches(['0', ',']) == "1", "{mask}");
        rps::set_cpus(p.b.name(), &p.if_b, 0).unwrap();
        let mask = read_mask();
        assert!(mask.trim().chars().all(|c| c == '0' || c == ','), "{mask}");
        let e = rps::set_cpus(p.b.name(), "lst-nosuchdev", 1).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "could not write /sys/class/net/lst-nosuchdev/queues/rx-0/rps_cpus in "
            ),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    });
}
