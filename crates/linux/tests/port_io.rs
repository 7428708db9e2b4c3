//! Every I/O mode of a router port ([`lockstep_linux::port`]) in network namespaces:
//! hand-built frames sent from one port arrive at the other byte for byte and in
//! order, with kernel RX times; only the frames that asked get a TX timestamp, and
//! their ids count them alone; an unfinished checksum is reported.
//!
//! They need root (and iproute2); otherwise, or where the kernel lacks a mode, each
//! prints a skip note and passes. Every test names what it creates
//! `lsp-<pid hex>-<counter>…`, owns it through `NetnsGuard`s that delete it even when
//! an assertion fails, and checks at the end that nothing of its is left. Loops are
//! bounded by a count and a wall-clock cap; nothing asserts speed.

use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::time::{Duration as StdDuration, Instant as StdInstant};

mod common;

use common::{recv_n, recv_n_for, send_all, udp_frame, unique, Pair, CAP, IP_A, IP_B};
use lockstep_core::{ClockId, Duration};
use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::iface;
use lockstep_linux::netns::{self, NetnsGuard};
use lockstep_linux::packet::FrameKind;
use lockstep_linux::poll::Poller;
use lockstep_linux::port::{self, FramePort, IoChoice, IoMode, PortError, PortSetup};
use lockstep_linux::udp::UdpSocket;

fn can_run(test: &str) -> bool {
    common::can_run(test, &["ip"])
}

/// Two namespaces joined by a veth pair, addressed, up, IPv6 off, static neighbours,
/// every offload off.
fn pair(base: &str) -> Pair {
    let p = common::pair(base);
    p.offloads_off();
    p
}

/// Opens a port in `mode` inside `ns`; `None` (with a note) when the kernel lacks it.
fn open(ns: &NetnsGuard, ifname: &str, mode: IoMode, test: &str) -> Option<Box<dyn FramePort>> {
    let setup = PortSetup {
        tx_timestamps: true,
        ..PortSetup::default()
    };
    match ns
        .run(|| port::open(ifname, IoChoice::Force(mode), &setup))
        .unwrap()
    {
        Ok(o) => {
            assert_eq!(o.port.mode(), mode);
            eprintln!("{test}: {mode} port on {ifname}, notes {:?}", o.notes);
            Some(o.port)
        }
        Err(e @ PortError::ModeUnavailable { .. }) => {
            eprintln!("skipping {test}: {e}");
            None
        }
        Err(e) => panic!("opening a {mode} port: {e}"),
    }
}

/// The whole check for one mode.
fn frames_in_and_out(mode: IoMode, test: &str) {
    if !can_run(test) {
        return;
    }
    let base = unique("lsp");
    {
        let p = pair(&base);
        let Some(mut rx) = open(&p.b, &p.if_b, mode, test) else {
            return;
        };
        let Some(mut tx) = open(&p.a, &p.if_a, mode, test) else {
            return;
        };
        assert_eq!(
            rx.ifindex(),
            p.b.run(|| iface::ifindex(&p.if_b)).unwrap().unwrap()
        );

        // 1. 40 frames, from 60-byte minimum to a full 1514-byte frame, in one batch;
        //    frames 3 and 17 ask for a TX timestamp.
        let frames: Vec<Vec<u8>> = (0..40u16)
            .map(|i| {
                let len = if i % 2 == 0 { 18 } else { 1472 };
                udp_frame(&p, i, &vec![i as u8; len])
            })
            .collect();
        let mut stamp = vec![false; frames.len()];
        stamp[3] = true;
        stamp[17] = true;
        send_all(tx.as_mut(), &frames, &stamp);
        let got = recv_n(rx.as_mut(), frames.len());
        let bytes: Vec<&Vec<u8>> = got.iter().map(|(d, _)| d).collect();
        assert_eq!(
            bytes,
            frames.iter().collect::<Vec<_>>(),
            "{mode}: exact frames, in order"
        );
        for (d, m) in &got {
            assert_eq!(m.len, d.len());
            assert!(!m.truncated && !m.csum_not_ready);
            assert_eq!((m.kind, m.vlan), (FrameKind::Host, None));
            let k = m.kernel_rx.expect("a kernel RX time");
            assert_eq!(k.clock, ClockId::Realtime);
            assert!(k.ns > 1_000_000_000_000_000_000, "{k:?}");
        }
        // Nothing more: the receiving port never saw its own (or any other) frames.
        std::thread::sleep(StdDuration::from_millis(20));
        let mut extra = 0;
        rx.recv(64, &mut |_, _| extra += 1).unwrap();
        assert_eq!(extra, 0);

        // 2. Exactly the two stamped frames got TX timestamps, ids 0 and 1.
        let mut ids = Vec::new();
        let start = StdInstant::now();
        while ids.len() < 2 && start.elapsed() < CAP {
            let n = tx
                .tx_timestamps(&mut |t| {
                    assert!(t.software.is_some());
                    ids.push(t.id)
                })
                .unwrap();
            if n == 0 {
                std::thread::sleep(StdDuration::from_millis(1));
            }
        }
        std::thread::sleep(StdDuration::from_millis(20));
        tx.tx_timestamps(&mut |t| ids.push(t.id)).unwrap();
        ids.sort_unstable();
        assert_eq!(ids, vec![0, 1], "{mode}: only the stamped frames");

        // 3. An unfinished checksum (TX checksum offload on at A) is reported.
        p.a.run(|| {
            ethtool::set_offloads(
                &p.if_a,
                Offloads {
                    tx_csum: true,
                    ..Offloads::ALL_OFF
                },
            )
        })
        .unwrap()
        .unwrap();
        let udp =
            p.a.run(|| UdpSocket::bind(SocketAddr::from((IP_A, 4001))))
                .unwrap()
                .unwrap();
        udp.send_to(b"partial", SocketAddr::from((IP_B, 7001)))
            .unwrap();
        let got = recv_n(rx.as_mut(), 1);
        assert_eq!(got.len(), 1, "{mode}: the UDP datagram");
        let (d, m) = &got[0];
        assert!(d.ends_with(b"partial"));
        assert!(m.csum_not_ready, "{mode}: {m:?}");
        assert_eq!(rx.take_stats().unwrap().drops, 0);
    }
    assert_eq!(netns::list(&base).unwrap(), Vec::<String>::new());
    assert_eq!(iface::list(&base).unwrap(), Vec::new());
}

#[test]
fn packet_port_moves_exact_frames_and_stamps_only_on_request() {
    frames_in_and_out(IoMode::Packet, "packet_port");
}

#[test]
fn ring_v3_port_moves_exact_frames_and_stamps_only_on_request() {
    frames_in_and_out(IoMode::Ring, "ring_v3_port");
}

#[test]
fn ring_v2_port_moves_exact_frames_and_stamps_only_on_request() {
    frames_in_and_out(IoMode::RingV2, "ring_v2_port");
}

/// The link of a port goes down and comes back: the wait reports the port's error
/// (ENETDOWN), which `take_error` clears, so the next wait sleeps again; once the
/// link is up, frames arrive again.
fn link_down_is_reported_once_and_frames_come_back(mode: IoMode, test: &str) {
    if !can_run(test) {
        return;
    }
    let base = unique("lsp");
    {
        let p = pair(&base);
        let Some(mut rx) = open(&p.b, &p.if_b, mode, test) else {
            return;
        };
        let Some(mut tx) = open(&p.a, &p.if_a, mode, test) else {
            return;
        };
        let mut poller = Poller::new();
        p.b.run(|| iface::set_down(&p.if_b)).unwrap().unwrap();
        let n = poller
            .wait([rx.as_fd()], Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(n, 1, "{mode}: the wait reports the link going down");
        assert!(poller.readiness(0).error);
        let e = rx.take_error().unwrap().expect("a pending error");
        assert_eq!(e.raw_os_error(), Some(libc::ENETDOWN), "{mode}: {e}");
        assert!(rx.take_error().unwrap().is_none());
        let n = poller
            .wait([rx.as_fd()], Some(Duration::from_millis(50)))
            .unwrap();
        assert_eq!(n, 0, "{mode}: the error is reported once");
        p.b.run(|| iface::set_up(&p.if_b)).unwrap().unwrap();
        // The veth's carrier comes back with the peer's; resend until one arrives.
        let frame = udp_frame(&p, 1, b"again");
        let mut got = Vec::new();
        let start = StdInstant::now();
        while got.is_empty() && start.elapsed() < CAP {
            let _ = tx.send(&[&frame], &[]);
            got = recv_n_for(rx.as_mut(), 1, StdDuration::from_millis(200));
        }
        assert_eq!(got.first().map(|g| &g.0), Some(&frame), "{mode}");
    }
    assert_eq!(netns::list(&base).unwrap(), Vec::<String>::new());
}

#[test]
fn packet_port_survives_a_link_flap() {
    link_down_is_reported_once_and_frames_come_back(IoMode::Packet, "packet_link_flap");
}

#[test]
fn ring_v3_port_survives_a_link_flap() {
    link_down_is_reported_once_and_frames_come_back(IoMode::Ring, "ring_v3_link_flap");
}

#[test]
fn ring_v2_port_survives_a_link_flap() {
    link_down_is_reported_once_and_frames_come_back(IoMode::RingV2, "ring_v2_link_flap");
}

/// A port opened `until_start` takes no frame before [`FramePort::start`]: frames
/// that reached its interface before (a second port on it, receiving from its
/// opening, is the witness that they did) are never handed out; the frames sent
/// after the start come, exactly and in order.
fn nothing_before_the_start(mode: IoMode, test: &str) {
    if !can_run(test) {
        return;
    }
    let base = unique("lsp");
    {
        let p = pair(&base);
        let setup = PortSetup {
            until_start: true,
            ..PortSetup::default()
        };
        let opened =
            p.b.run(|| port::open(&p.if_b, IoChoice::Force(mode), &setup))
                .unwrap();
        let mut rx = match opened {
            Ok(o) => o.port,
            Err(e @ PortError::ModeUnavailable { .. }) => {
                eprintln!("skipping {test}: {e}");
                return;
            }
            Err(e) => panic!("opening a {mode} port: {e}"),
        };
        let Some(mut witness) = open(&p.b, &p.if_b, IoMode::Packet, test) else {
            return;
        };
        let Some(mut tx) = open(&p.a, &p.if_a, IoMode::Packet, test) else {
            return;
        };
        let before: Vec<Vec<u8>> = (0..10u16)
            .map(|i| udp_frame(&p, i, b"before the start"))
            .collect();
        send_all(tx.as_mut(), &before, &[]);
        let seen = recv_n(witness.as_mut(), before.len());
        assert_eq!(seen.len(), before.len(), "{mode}: the witness saw them all");
        let mut early = 0;
        rx.recv(64, &mut |_, _| early += 1).unwrap();
        assert_eq!(early, 0, "{mode}: nothing before the start");

        rx.start().unwrap();
        let after: Vec<Vec<u8>> = (100..110u16)
            .map(|i| udp_frame(&p, i, b"after the start"))
            .collect();
        send_all(tx.as_mut(), &after, &[]);
        let got: Vec<Vec<u8>> = recv_n(rx.as_mut(), after.len())
            .into_iter()
            .map(|(d, _)| d)
            .collect();
        assert_eq!(
            got, after,
            "{mode}: exactly the frames sent after the start"
        );
        // a second start changes nothing
        rx.start().unwrap();
        assert_eq!(rx.take_stats().unwrap().drops, 0);
    }
    assert_eq!(netns::list(&base).unwrap(), Vec::<String>::new());
    assert_eq!(iface::list(&base).unwrap(), Vec::new());
}

#[test]
fn packet_port_takes_nothing_before_its_start() {
    nothing_before_the_start(IoMode::Packet, "packet_until_start");
}

#[test]
fn ring_v3_port_takes_nothing_before_its_start() {
    nothing_before_the_start(IoMode::Ring, "ring_v3_until_start");
}

#[test]
fn ring_v2_port_takes_nothing_before_its_start() {
    nothing_before_the_start(IoMode::RingV2, "ring_v2_until_start");
}

#[test]
fn auto_picks_a_mode_and_a_missing_interface_is_named() {
    if !can_run("auto_picks_a_mode") {
        return;
    }
    let base = unique("lsp");
    {
        let p = pair(&base);
        let o =
            p.b.run(|| port::open(&p.if_b, IoChoice::Auto, &PortSetup::default()))
                .unwrap()
                .unwrap();
        assert_eq!(o.port.mode(), port::AUTO_ORDER[0], "{:?}", o.notes);
        let e =
            p.b.run(|| {
                port::open(
                    "lsp-nothere0",
                    IoChoice::Force(IoMode::Ring),
                    &PortSetup::default(),
                )
            })
            .unwrap()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "no interface \"lsp-nothere0\" in this network namespace"
        );
    }
    assert_eq!(netns::list(&base).unwrap(), Vec::<String>::new());
}
