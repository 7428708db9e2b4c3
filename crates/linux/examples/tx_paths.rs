//! Sending through a packet socket two ways, on one veth pair in two throwaway
//! namespaces: `sendmmsg` (what a router port does) against a transmit ring
//! (`PACKET_TX_RING`, one `send` per batch). Prints the sending thread's CPU time per
//! frame (getrusage: user + system, the veth's delivery to the other end included) and
//! the wall-clock rate, for 64-byte and 1514-byte frames, three rounds each.
//!
//!   sudo cargo run --release -p lockstep-linux --example tx_paths [FRAMES]
//!
//! Frames go to a MAC address nobody has: the other end drops them on arrival.

use std::time::Instant as StdInstant;

use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::iface;
use lockstep_linux::netns::NetnsGuard;
use lockstep_linux::packet::PacketSocket;
use lockstep_linux::ring::TxRing;
use lockstep_linux::rusage::{cpu_time, Who};

const BATCH: usize = 32;

fn main() {
    let frames: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(500_000);
    let base = format!("ltx-{:x}", std::process::id());
    let a = NetnsGuard::create(&format!("{base}A")).expect("namespace (root?)");
    let b = NetnsGuard::create(&format!("{base}B")).expect("namespace");
    let (if_a, if_b) = (format!("{base}a"), format!("{base}b"));
    iface::create_veth_between(&if_a, Some(a.name()), &if_b, Some(b.name())).expect("veth");
    for (ns, i) in [(&a, &if_a), (&b, &if_b)] {
        ns.run(|| {
            iface::set_up(i).expect("up");
            ethtool::set_offloads(i, Offloads::ALL_OFF).expect("offloads");
        })
        .expect("in namespace");
    }
    let ifindex = a.run(|| iface::ifindex(&if_a)).unwrap().unwrap();
    println!("frames per run {frames}, batch {BATCH}; CPU ns per frame (sending thread), kpps");
    for size in [64usize, 1514] {
        let mut f = vec![0u8; size];
        f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x99]);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let batch: Vec<&[u8]> = (0..BATCH).map(|_| f.as_slice()).collect();
        for round in 1..=3 {
            let sock = a
                .run(|| PacketSocket::bind_index(ifindex))
                .unwrap()
                .unwrap();
            let _ = sock.set_send_buffer(4 << 20);
            let mmsg = measure(frames, || sock.send_batch(&batch).unwrap_or(0));
            drop(sock);
            let arrived0 = rx_packets(b.name(), &if_b);
            let mut ring = a.run(|| TxRing::bind_index(ifindex)).unwrap().unwrap();
            let tx = measure(frames, || ring.send(&batch).unwrap_or(0));
            drop(ring);
            let arrived = rx_packets(b.name(), &if_b).saturating_sub(arrived0);
            println!(
                "{size:>5} B round {round}: sendmmsg {:>6.0} ns {:>6.0} kpps | tx ring {:>6.0} ns {:>6.0} kpps ({arrived} arrived)",
                mmsg.0, mmsg.1, tx.0, tx.1
            );
        }
    }
}

/// Sends `n` frames with `send` (frames sent per call); (CPU ns per frame, kpps).
fn measure(n: usize, mut send: impl FnMut() -> usize) -> (f64, f64) {
    let c0 = cpu_time(Who::Thread).unwrap();
    let t0 = StdInstant::now();
    let mut sent = 0;
    let mut idle = 0u64;
    while sent < n && idle < 10_000_000 {
        let k = send();
        if k == 0 {
            idle += 1;
            std::hint::spin_loop();
        }
        sent += k;
    }
    let wall = t0.elapsed().as_secs_f64();
    let cpu = cpu_time(Who::Thread).unwrap().since(c0).total_ns() as f64;
    (cpu / sent.max(1) as f64, sent as f64 / wall / 1e3)
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
