//! What the namespace tests of this crate share: unique names, the check that a
//! test can run here, and two namespaces joined by a veth pair.

#![allow(dead_code)] // each test crate uses its own part

use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use lockstep_core::Duration;
use lockstep_linux::cmd;
use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::iface::{self, IfaceError, Mac};
use lockstep_linux::netns::NetnsGuard;
use lockstep_linux::packet::FrameMeta;
use lockstep_linux::poll::Poller;
use lockstep_linux::port::FramePort;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A name prefix no other test (or concurrent run) uses: `<prefix>-<pid hex>-<n>`.
pub fn unique(prefix: &str) -> String {
    format!(
        "{prefix}-{:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether the test can run (root, and the iproute2 `tools`); prints why not.
pub fn can_run(test: &str, tools: &[&str]) -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping {test}: needs root (network namespaces, raw sockets)");
        return false;
    }
    for tool in tools {
        if cmd::find_program(tool).is_none() {
            eprintln!("skipping {test}: `{tool}` (iproute2) is not installed");
            return false;
        }
    }
    true
}

pub const CAP: StdDuration = StdDuration::from_secs(10);
pub const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Two namespaces joined by a veth pair `if_a` (10.0.0.1/24, in A) — `if_b`
/// (10.0.0.2/24, in B), both up, IPv6 off (no stray router solicitations), static
/// neighbour entries both ways (no ARP).
pub struct Pair {
    // Dropped first to last: both namespaces go, and with them the veth pair.
    pub a: NetnsGuard,
    pub b: NetnsGuard,
    pub if_a: String,
    pub if_b: String,
    pub mac_a: Mac,
    pub mac_b: Mac,
}

pub fn pair(base: &str) -> Pair {
    let a = NetnsGuard::create(&format!("{base}A")).unwrap();
    let b = NetnsGuard::create(&format!("{base}B")).unwrap();
    for ns in [&a, &b] {
        ns.run(|| -> Result<(), IfaceError> {
            iface::sysctl_set("net.ipv6.conf.all.disable_ipv6", "1")?;
            iface::sysctl_set("net.ipv6.conf.default.disable_ipv6", "1")?;
            iface::set_up("lo")
        })
        .unwrap()
        .unwrap();
    }
    let if_a = format!("{base}a");
    let if_b = format!("{base}b");
    assert!(if_a.len() <= 15, "{if_a}");
    iface::create_veth_between(&if_a, Some(a.name()), &if_b, Some(b.name())).unwrap();
    let setup = |ns: &NetnsGuard, ifname: &str, ip: Ipv4Addr| {
        ns.run(|| -> Result<Mac, IfaceError> {
            iface::add_addr(ifname, ip, 24)?;
            iface::set_up(ifname)?;
            iface::mac(ifname)
        })
        .unwrap()
        .unwrap()
    };
    let mac_a = setup(&a, &if_a, IP_A);
    let mac_b = setup(&b, &if_b, IP_B);
    a.run(|| iface::add_neigh(&if_a, IP_B, mac_b))
        .unwrap()
        .unwrap();
    b.run(|| iface::add_neigh(&if_b, IP_A, mac_a))
        .unwrap()
        .unwrap();
    Pair {
        a,
        b,
        if_a,
        if_b,
        mac_a,
        mac_b,
    }
}

impl Pair {
    /// Every offload off on both ends.
    pub fn offloads_off(&self) {
        for (ns, ifname) in [(&self.a, &self.if_a), (&self.b, &self.if_b)] {
            ns.run(|| ethtool::set_offloads(ifname, Offloads::ALL_OFF))
                .unwrap()
                .unwrap();
        }
    }
}

pub fn sum16(mut sum: u32, data: &[u8]) -> u32 {
    for c in data.chunks(2) {
        let w = if c.len() == 2 {
            u16::from_be_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], 0])
        };
        sum += u32::from(w);
    }
    sum
}

pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// An Ethernet/IPv4/UDP frame from A to B with every checksum filled in.
pub fn udp_frame(p: &Pair, id: u16, payload: &[u8]) -> Vec<u8> {
    udp_frame_between((p.mac_a, IP_A), (p.mac_b, IP_B), id, payload)
}

/// An Ethernet/IPv4/UDP frame (port 4000 to 7000) with every checksum filled in.
pub fn udp_frame_between(
    (mac_from, ip_from): (Mac, Ipv4Addr),
    (mac_to, ip_to): (Mac, Ipv4Addr),
    id: u16,
    payload: &[u8],
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(mac_to);
    f.extend(mac_from);
    f.extend([0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend(total.to_be_bytes());
    ip.extend(id.to_be_bytes());
    ip.extend([0x40, 0, 64, 17, 0, 0]);
    ip.extend(ip_from.octets());
    ip.extend(ip_to.octets());
    let c = !fold(sum16(0, &ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let ulen = (8 + payload.len()) as u16;
    let mut udp = Vec::new();
    udp.extend(4000u16.to_be_bytes());
    udp.extend(7000u16.to_be_bytes());
    udp.extend(ulen.to_be_bytes());
    udp.extend([0, 0]);
    udp.extend(payload);
    let mut pseudo = Vec::new();
    pseudo.extend(ip_from.octets());
    pseudo.extend(ip_to.octets());
    pseudo.extend([0, 17]);
    pseudo.extend(ulen.to_be_bytes());
    let c = !fold(sum16(sum16(0, &pseudo), &udp));
    udp[6..8].copy_from_slice(&(if c == 0 { 0xffff } else { c }).to_be_bytes());
    f.extend(ip);
    f.extend(udp);
    f
}

/// Receives on `port` until `want` frames came (or [`CAP`] passed), waiting in `ppoll`.
pub fn recv_n(port: &mut dyn FramePort, want: usize) -> Vec<(Vec<u8>, FrameMeta)> {
    recv_n_for(port, want, CAP)
}

/// [`recv_n`] for at most `cap`.
pub fn recv_n_for(
    port: &mut dyn FramePort,
    want: usize,
    cap: StdDuration,
) -> Vec<(Vec<u8>, FrameMeta)> {
    let mut got = Vec::new();
    let mut poller = Poller::new();
    let start = StdInstant::now();
    while got.len() < want && start.elapsed() < cap {
        poller
            .wait([port.as_fd()], Some(Duration::from_millis(50)))
            .unwrap();
        port.recv(64, &mut |d, m| got.push((d.to_vec(), m)))
            .unwrap();
    }
    got
}

/// Sends `frames` through `port` (stamping where `stamp` says), retrying a full queue.
pub fn send_all(port: &mut dyn FramePort, frames: &[Vec<u8>], stamp: &[bool]) {
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    let mut sent = 0;
    let start = StdInstant::now();
    while sent < refs.len() && start.elapsed() < CAP {
        let n = port
            .send(&refs[sent..], stamp.get(sent..).unwrap_or_default())
            .unwrap();
        sent += n;
        if n == 0 {
            std::thread::sleep(StdDuration::from_millis(1));
        }
    }
    assert_eq!(sent, refs.len());
}
