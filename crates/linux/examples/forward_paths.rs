//! What forwarding costs a router thread in each I/O mode of its ports, apart from the
//! rest of the machine: three throwaway namespaces S — R — D joined by veths (offloads
//! off), a thread in S sending frames as fast as `sendmmsg` goes, and in R a thread
//! that receives a batch on one port, copies each frame (as the router's node does)
//! and sends the batch out of the other port, until the sender is done. Prints, per
//! mode and frame size, the forwarding thread's CPU time per forwarded frame
//! (getrusage: user + system, the veth's delivery into D included), the frames it
//! forwarded per second of wall clock, and how many D received.
//!
//!   sudo cargo run --release -p lockstep-linux --example forward_paths [FRAMES] [MODES]
//!
//! MODES: comma-separated `--io` names (default packet,ring-v2,xdp).

use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant as StdInstant;

use lockstep_core::Duration;
use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::iface;
use lockstep_linux::netns::NetnsGuard;
use lockstep_linux::packet::PacketSocket;
use lockstep_linux::poll::Poller;
use lockstep_linux::port::{self, IoChoice, IoMode, PortSetup};
use lockstep_linux::rusage::{cpu_time, Who};

const BATCH: usize = 64;

fn main() {
    let mut args = std::env::args().skip(1);
    let frames: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(300_000);
    let modes: Vec<IoMode> = args
        .next()
        .unwrap_or_else(|| "packet,ring-v2,xdp".into())
        .split(',')
        .filter_map(IoMode::parse)
        .collect();
    let base = format!("lfw-{:x}", std::process::id());
    let ns: Vec<NetnsGuard> = ["S", "R", "D"]
        .iter()
        .map(|n| NetnsGuard::create(&format!("{base}{n}")).expect("namespace (root?)"))
        .collect();
    let names = [
        format!("{base}s"),
        format!("{base}r1"),
        format!("{base}r2"),
        format!("{base}d"),
    ];
    iface::create_veth_between(&names[0], Some(ns[0].name()), &names[1], Some(ns[1].name()))
        .expect("veth");
    iface::create_veth_between(&names[2], Some(ns[1].name()), &names[3], Some(ns[2].name()))
        .expect("veth");
    for (i, name) in names.iter().enumerate() {
        // s in S, r1 and r2 in R, d in D
        ns[i.div_ceil(2)]
            .run(|| {
                iface::set_up(name).expect("up");
                ethtool::set_offloads(name, Offloads::ALL_OFF).expect("offloads");
            })
            .expect("in namespace");
    }
    println!("{frames} frames per run, batch {BATCH}; forwarding thread: CPU ns per frame, kpps forwarded; frames D got");
    for size in [64usize, 1514] {
        for round in 1..=3 {
            for &mode in &modes {
                let before = rx_packets(ns[2].name(), &names[3]);
                let (cpu, kpps, fwd, note) = run(&ns, &names, mode, size, frames);
                let got = rx_packets(ns[2].name(), &names[3]).saturating_sub(before);
                println!(
                    "{size:>5} B round {round} {:<8} {cpu:>7.0} ns {kpps:>7.0} kpps, {fwd} forwarded, D {got} {note}",
                    mode.name()
                );
            }
        }
    }
}

/// One run: (CPU ns per forwarded frame, kpps forwarded, frames forwarded, a note).
fn run(
    ns: &[NetnsGuard],
    names: &[String; 4],
    mode: IoMode,
    size: usize,
    frames: usize,
) -> (f64, f64, usize, String) {
    let mut f = vec![0u8; size];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let done = AtomicBool::new(false);
    let ready = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            ns[0]
                .run(|| {
                    let ifindex = iface::ifindex(&names[0]).expect("ifindex");
                    let sock = PacketSocket::bind_index(ifindex).expect("packet socket");
                    let batch: Vec<&[u8]> = (0..32).map(|_| f.as_slice()).collect();
                    while !ready.load(Ordering::Acquire) {
                        std::thread::yield_now();
                    }
                    let mut sent = 0;
                    while sent < frames {
                        sent += sock.send_batch(&batch).unwrap_or(0);
                    }
                    done.store(true, Ordering::Release);
                })
                .expect("sender")
        });
        ns[1]
            .run(|| forward(&names[1], &names[2], mode, &ready, &done))
            .expect("forwarder")
    })
}

fn forward(
    a: &str,
    b: &str,
    mode: IoMode,
    ready: &AtomicBool,
    done: &AtomicBool,
) -> (f64, f64, usize, String) {
    let setup = PortSetup {
        rx_timestamps: true,
        qdisc_bypass: true,
        ..PortSetup::default()
    };
    let mut inp = port::open(a, IoChoice::Force(mode), &setup).expect("port in");
    let mut out = port::open(b, IoChoice::Force(mode), &setup).expect("port out");
    let note = format!("{:?}", inp.notes);
    let mut bufs: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(2048)).collect();
    let mut poller = Poller::new();
    let c0 = cpu_time(Who::Thread).expect("rusage");
    let t0 = StdInstant::now();
    ready.store(true, Ordering::Release);
    let mut fwd = 0;
    let mut idle_since: Option<StdInstant> = None;
    loop {
        let _ = poller.wait([inp.port.as_fd()], Some(Duration::from_millis(10)));
        let mut n = 0;
        let _ = inp.port.recv(BATCH, &mut |d, _| {
            bufs[n].clear();
            bufs[n].extend_from_slice(d);
            n += 1;
        });
        if n > 0 {
            let refs: Vec<&[u8]> = bufs[..n].iter().map(|b| b.as_slice()).collect();
            let mut off = 0;
            while off < n {
                match out.port.send(&refs[off..], &[]) {
                    Ok(0) | Err(_) => off += 1, // a device drop
                    Ok(k) => {
                        off += k;
                        fwd += k;
                    }
                }
            }
            idle_since = None;
        } else if done.load(Ordering::Acquire) {
            let t = *idle_since.get_or_insert_with(StdInstant::now);
            if t.elapsed().as_millis() > 200 {
                break;
            }
        }
    }
    let wall = t0.elapsed().as_secs_f64() - 0.2;
    let cpu = cpu_time(Who::Thread).expect("rusage").since(c0).total_ns() as f64;
    (cpu / fwd.max(1) as f64, fwd as f64 / wall / 1e3, fwd, note)
}

/// Frames interface `ifname` of namespace `ns` has received (`ip -s link`).
fn rx_packets(ns: &str, ifname: &str) -> u64 {
    let out = std::process::Command::new("ip")
        .args(["-n", ns, "-s", "-j", "link", "show", ifname])
        .output()
        .ok();
    let v: Option<serde_json::Value> = out.and_then(|o| serde_json::from_slice(&o.stdout).ok());
    v.and_then(|v| v[0]["stats64"]["rx"]["packets"].as_u64())
        .unwrap_or(0)
}
