//! What the namespace tests of this crate share: unique names, the check that a
//! test can run here, and two namespaces joined by a veth pair.

#![allow(dead_code)] // each test crate uses its own part

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration as StdDuration;

use lockstep_linux::cmd;
use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::iface::{self, IfaceError, Mac};
use lockstep_linux::netns::NetnsGuard;

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
