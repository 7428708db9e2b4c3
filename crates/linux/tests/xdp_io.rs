//! The `AF_XDP` port (`--io xdp`, [`lockstep_linux::xdp`]) in network namespaces:
//! hand-built frames go from one xdp port to another byte for byte and in order,
//! through every ring more than once; frames from the peer's network stack come in
//! and never reach the port's own stack; frames the port sends reach the peer's
//! stack; a stamped frame gets its TX timestamp; an interface that already has an
//! XDP program makes the port fall back to the packet socket with a note, and a
//! closed port leaves no program behind.
//!
//! They need root (and iproute2); where the kernel lacks `AF_XDP` (or bpf(2)) the
//! port falls back and each test prints a skip note and passes. Every test names
//! what it creates `lsx-<pid hex>-<counter>…`, owns it through `NetnsGuard`s that
//! delete it even when an assertion fails, and checks at the end that nothing of its
//! is left. Loops are bounded by a count and a wall-clock cap; nothing asserts speed.

use std::net::SocketAddr;
use std::time::{Duration as StdDuration, Instant as StdInstant};

mod common;

use common::{
    recv_n, recv_n_for, send_all, udp_frame, udp_frame_between, unique, Pair, CAP, IP_A, IP_B,
};
use lockstep_core::{ClockId, Duration};
use lockstep_linux::iface;
use lockstep_linux::netns::{self, NetnsGuard};
use lockstep_linux::packet::FrameKind;
use lockstep_linux::port::{self, FramePort, IoChoice, IoMode, OpenedPort, PortSetup};
use lockstep_linux::udp::{RecvMode, UdpSocket};

fn can_run(test: &str) -> bool {
    common::can_run(test, &["ip"])
}

/// Two namespaces joined by a veth pair, offloads off (as the lab has them).
fn pair(base: &str) -> Pair {
    let p = common::pair(base);
    p.offloads_off();
    p
}

fn open_any(ns: &NetnsGuard, ifname: &str, stamps: bool) -> OpenedPort {
    let setup = PortSetup {
        tx_timestamps: stamps,
        ..PortSetup::default()
    };
    ns.run(|| port::open(ifname, IoChoice::Force(IoMode::Xdp), &setup))
        .unwrap()
        .unwrap()
}

/// An xdp port on `ifname` in `ns`; `None` (with the fallback's note) when the
/// kernel lacks AF_XDP here.
fn open_xdp(ns: &NetnsGuard, ifname: &str, test: &str) -> Option<Box<dyn FramePort>> {
    let o = open_any(ns, ifname, true);
    eprintln!(
        "{test}: {} port on {ifname}, notes {:?}",
        o.port.mode(),
        o.notes
    );
    if o.port.mode() != IoMode::Xdp {
        eprintln!("skipping {test}: no AF_XDP here: {:?}", o.notes);
        return None;
    }
    Some(o.port)
}

fn left_nothing(base: &str) {
    assert_eq!(netns::list(base).unwrap(), Vec::<String>::new());
    assert_eq!(iface::list(base).unwrap(), Vec::new());
}

/// Frames of every size from one xdp port to another, exact and in order, with two
/// TX timestamps; then 5,000 more in batches (every ring wraps twice).
#[test]
fn xdp_port_moves_exact_frames_in_order() {
    let test = "xdp_port_moves_exact_frames";
    if !can_run(test) {
        return;
    }
    let base = unique("lsx");
    {
        let p = pair(&base);
        let Some(mut rx) = open_xdp(&p.b, &p.if_b, test) else {
            return;
        };
        let Some(mut tx) = open_xdp(&p.a, &p.if_a, test) else {
            return;
        };
        let frames: Vec<Vec<u8>> = (0..40u16)
            .map(|i| udp_frame(&p, i, &vec![i as u8; if i % 2 == 0 { 18 } else { 1472 }]))
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
            "exact frames, in order"
        );
        for (d, m) in &got {
            assert_eq!((m.len, m.truncated), (d.len(), false));
            let k = m.kernel_rx.expect("a receive time from the XDP program");
            assert_eq!(k.clock, ClockId::Realtime);
            let now = lockstep_linux::now(ClockId::Realtime).ns;
            assert!(k.ns > 1_000_000_000_000_000_000 && k.ns <= now, "{k:?}");
            assert_eq!((m.kind, m.vlan), (FrameKind::Host, None));
        }
        // Exactly the two stamped frames got TX timestamps, ids 0 and 1.
        let mut ids = Vec::new();
        let start = StdInstant::now();
        while ids.len() < 2 && start.elapsed() < CAP {
            if tx.tx_timestamps(&mut |t| ids.push(t.id)).unwrap() == 0 {
                std::thread::sleep(StdDuration::from_millis(1));
            }
        }
        ids.sort_unstable();
        assert_eq!(ids, vec![0, 1], "only the stamped frames");

        // 5,000 frames, 50 at a time, each batch received before the next is sent.
        for batch in 0..100u16 {
            let frames: Vec<Vec<u8>> = (0..50u16)
                .map(|i| {
                    let id = batch * 50 + i;
                    udp_frame(&p, id, &id.to_be_bytes().repeat(1 + usize::from(id % 700)))
                })
                .collect();
            send_all(tx.as_mut(), &frames, &[]);
            let got = recv_n(rx.as_mut(), frames.len());
            assert_eq!(got.len(), frames.len(), "batch {batch}");
            assert!(
                got.iter().zip(&frames).all(|((d, _), f)| d == f),
                "batch {batch}"
            );
        }
        let s = rx.take_stats().unwrap();
        assert_eq!((s.packets, s.drops), (5040, 0));
        let mut extra = 0;
        rx.recv(64, &mut |_, _| extra += 1).unwrap();
        assert_eq!(extra, 0);
    }
    left_nothing(&base);
}

/// A datagram from the peer's stack arrives at the xdp port and not at a UDP socket
/// of the port's own namespace (the program takes it before the stack); a frame the
/// port sends reaches a UDP socket behind the peer.
#[test]
fn xdp_port_takes_frames_before_the_stack_and_sends_to_the_peer() {
    let test = "xdp_port_and_the_stack";
    if !can_run(test) {
        return;
    }
    let base = unique("lsx");
    {
        let p = pair(&base);
        let Some(mut port_b) = open_xdp(&p.b, &p.if_b, test) else {
            return;
        };
        let sock_a =
            p.a.run(|| UdpSocket::bind(SocketAddr::from((IP_A, 7000))))
                .unwrap()
                .unwrap();
        let sock_b =
            p.b.run(|| UdpSocket::bind(SocketAddr::from((IP_B, 7000))))
                .unwrap()
                .unwrap();
        sock_a
            .send_to(b"to the port", SocketAddr::from((IP_B, 7000)))
            .unwrap();
        let got = recv_n(port_b.as_mut(), 1);
        assert_eq!(got.len(), 1);
        assert!(got[0].0.ends_with(b"to the port"));
        let mut buf = [0u8; 64];
        let r = sock_b
            .recv(
                &mut buf,
                RecvMode::Block {
                    timeout: Some(Duration::from_millis(100)),
                },
            )
            .unwrap();
        assert!(r.is_none(), "the stack behind the port saw the datagram");

        // B's port sends a datagram to A's stack.
        let back = udp_frame_between((p.mac_b, IP_B), (p.mac_a, IP_A), 9, b"from the port");
        send_all(port_b.as_mut(), &[back], &[]);
        let r = sock_a
            .recv(
                &mut buf,
                RecvMode::Block {
                    timeout: Some(Duration::from_secs(5)),
                },
            )
            .unwrap();
        let info = r.expect("the datagram the port sent");
        assert_eq!(&buf[..info.len], b"from the port");
    }
    left_nothing(&base);
}

/// A second xdp port on an interface whose XDP program the first holds falls back
/// to the packet socket with a note; once the first is closed its program is gone
/// and a new xdp port opens.
#[test]
fn xdp_port_falls_back_when_the_interface_is_taken_and_leaves_nothing() {
    let test = "xdp_port_falls_back";
    if !can_run(test) {
        return;
    }
    let base = unique("lsx");
    {
        let p = pair(&base);
        let Some(first) = open_xdp(&p.b, &p.if_b, test) else {
            return;
        };
        let second = open_any(&p.b, &p.if_b, false);
        assert_eq!(second.port.mode(), IoMode::Packet);
        let note = second.notes.first().cloned().unwrap_or_default();
        assert!(
            note.contains("the xdp mode is not available here"),
            "{note}"
        );
        assert!(note.ends_with("using packet"), "{note}");
        drop(second);
        drop(first);
        let again = open_any(&p.b, &p.if_b, false);
        assert_eq!(again.port.mode(), IoMode::Xdp, "{:?}", again.notes);
    }
    left_nothing(&base);
}

/// The link goes down and comes back: frames arrive again.
#[test]
fn xdp_port_survives_a_link_flap() {
    let test = "xdp_link_flap";
    if !can_run(test) {
        return;
    }
    let base = unique("lsx");
    {
        let p = pair(&base);
        let Some(mut rx) = open_xdp(&p.b, &p.if_b, test) else {
            return;
        };
        let Some(mut tx) = open_xdp(&p.a, &p.if_a, test) else {
            return;
        };
        p.b.run(|| iface::set_down(&p.if_b)).unwrap().unwrap();
        let frame = udp_frame(&p, 1, b"down");
        let _ = tx.send(&[&frame], &[]);
        let _ = rx.take_error();
        p.b.run(|| iface::set_up(&p.if_b)).unwrap().unwrap();
        let frame = udp_frame(&p, 2, b"again");
        let mut got = Vec::new();
        let start = StdInstant::now();
        while got.is_empty() && start.elapsed() < CAP {
            let _ = tx.send(&[&frame], &[]);
            got = recv_n_for(rx.as_mut(), 1, StdDuration::from_millis(200));
        }
        assert_eq!(got.first().map(|g| &g.0), Some(&frame));
    }
    left_nothing(&base);
}
