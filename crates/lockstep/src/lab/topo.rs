//! Building a [`Plan`]'s network in namespaces, and always taking it down again.
//!
//! Every node gets a namespace `ls-<run id>-<node>`; every link a veth pair created
//! directly with its ends in the two namespaces (so no half-built pair is ever seen
//! in the caller's namespace). In each namespace: loopback up, IPv6 off (no router
//! solicitations or MLD noise on the links), IPv4 forwarding off — except for routers
//! in kernel mode — and `rp_filter` off; on each interface the planned MAC, every
//! offload off (checksums, GSO, GRO, TSO: a raw socket must see frames as on the
//! wire), `tc tbf` at the link rate when the link is shaped, addresses where the
//! kernel takes part (hosts, kernel-mode routers), static neighbours and routes.
//!
//! [`Topology`] owns what it built: dropping it (an error, a panic, Ctrl-C) kills any
//! process left in its namespaces and deletes them, which destroys their veths.
//! [`clean`] does the same for the leftovers of a run that was killed outright.
//!
//! The other kinds of scenario (jitter, rt-service, shaped-switch) build their small
//! fixed networks on the same [`Topology`], step by step ([`Topology::new`],
//! [`Topology::fresh_namespace`], [`Topology::veth`], [`Topology::addr`],
//! [`Topology::up`]): only loopback up, veths, addresses; their interfaces keep the
//! kernel's defaults (offloads, IPv6), as their methods measure them.

use std::net::Ipv4Addr;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{anyhow, Context, Result};
use lockstep_core::wire::EthernetAddress;
use lockstep_linux::ethtool::{self, Offloads};
use lockstep_linux::proc::{self, Signal};
use lockstep_linux::tc::{self, TbfLimit};
use lockstep_linux::{iface, netns};

use super::plan::{NodePlan, Plan};

/// Every namespace the lab makes starts with this.
pub const NS_PREFIX: &str = "ls-";

/// The namespace of `node` in run `run_id`.
pub fn ns_name(run_id: &str, node: &str) -> String {
    format!("{NS_PREFIX}{run_id}-{node}")
}

/// A fresh run id: 6 hex digits from the process id and the clock, so two labs on
/// one host do not collide.
pub fn new_run_id() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mix = (t as u64) ^ (u64::from(std::process::id()) << 20);
    let mut x = mix.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^= x >> 29;
    format!("{:06x}", x & 0xff_ffff)
}

pub use lockstep_plan::plan::{tbf_burst, TBF_LATENCY};

/// The namespaces of one run; deleted on drop unless kept.
#[derive(Debug)]
pub struct Topology {
    namespaces: Vec<String>,
    keep: bool,
    /// Non-fatal setup notes (a fixed offload, ...).
    pub notes: Vec<String>,
}

fn mac(m: EthernetAddress) -> iface::Mac {
    m.0
}

impl Topology {
    /// Builds the plan's network. On error, what was built is removed.
    pub fn build(plan: &Plan, run_id: &str) -> Result<Topology> {
        let mut topo = Topology::new();
        // a stop is looked at between steps; what was built is removed on drop
        let stopped = || -> Result<()> {
            if lockstep_linux::signal::stop_requested() {
                return Err(crate::Interrupted(format!(
                    "{}: while building its network",
                    plan.run.label
                ))
                .into());
            }
            Ok(())
        };
        for n in &plan.nodes {
            stopped()?;
            let ns = ns_name(run_id, &n.name);
            netns::create(&ns).with_context(|| format!("creating namespace {ns}"))?;
            topo.namespaces.push(ns.clone());
            let forwarding = n.kernel.forwarding;
            netns::run_in(&ns, move || -> Result<()> {
                iface::set_up("lo")?;
                // Absent when the kernel has no IPv6: nothing to silence then.
                let _ = iface::sysctl_set("net.ipv6.conf.all.disable_ipv6", "1");
                let _ = iface::sysctl_set("net.ipv6.conf.default.disable_ipv6", "1");
                iface::sysctl_set("net.ipv4.ip_forward", if forwarding { "1" } else { "0" })?;
                iface::sysctl_set("net.ipv4.conf.all.rp_filter", "0")?;
                iface::sysctl_set("net.ipv4.conf.default.rp_filter", "0")?;
                Ok(())
            })?
            .with_context(|| format!("setting up namespace {ns}"))?;
        }
        // Each link once: from the end that is the link's first end.
        for (ni, n) in plan.nodes.iter().enumerate() {
            for i in &n.ifaces {
                if i.peer < ni {
                    continue;
                }
                let peer = &plan.nodes[i.peer];
                let Some(pi) = peer.ifaces.iter().find(|p| p.link == i.link) else {
                    continue;
                };
                stopped()?;
                let (ns_a, ns_b) = (ns_name(run_id, &n.name), ns_name(run_id, &peer.name));
                iface::create_veth_between(&i.ifname, Some(&ns_a), &pi.ifname, Some(&ns_b))
                    .with_context(|| {
                        format!("creating the link {}—{} (veth)", n.name, peer.name)
                    })?;
            }
        }
        for n in &plan.nodes {
            stopped()?;
            let ns = ns_name(run_id, &n.name);
            let notes = netns::run_in(&ns, || configure(n))?
                .with_context(|| format!("configuring the interfaces of {}", n.name))?;
            topo.notes.extend(notes);
        }
        Ok(topo)
    }

    /// An empty topology, built step by step and removed on drop.
    pub fn new() -> Topology {
        Topology {
            namespaces: Vec::new(),
            keep: false,
            notes: Vec::new(),
        }
    }

    /// Creates the namespace `ns` with its loopback up, and owns it. A namespace of
    /// that name left by a run that was killed outright (a fixed name) is removed
    /// first, with its processes.
    pub fn fresh_namespace(&mut self, ns: &str) -> Result<()> {
        remove_namespace(ns).with_context(|| format!("removing the leftover namespace {ns}"))?;
        netns::create(ns).with_context(|| format!("creating namespace {ns}"))?;
        self.namespaces.push(ns.to_string());
        self.up(ns, "lo")
    }

    /// A veth pair: `a_if` in namespace `a_ns`, `b_if` in `b_ns` (both down).
    pub fn veth(&self, a_ns: &str, a_if: &str, b_ns: &str, b_if: &str) -> Result<()> {
        iface::create_veth_between(a_if, Some(a_ns), b_if, Some(b_ns))
            .with_context(|| format!("creating the veth {a_ns}:{a_if}—{b_ns}:{b_if}"))
    }

    /// The address `addr/prefix_len` on `dev` in namespace `ns`.
    pub fn addr(&self, ns: &str, dev: &str, addr: Ipv4Addr, prefix_len: u8) -> Result<()> {
        netns::run_in(ns, || iface::add_addr(dev, addr, prefix_len))?
            .with_context(|| format!("adding {addr}/{prefix_len} to {ns}:{dev}"))
    }

    /// Brings `dev` in namespace `ns` up.
    pub fn up(&self, ns: &str, dev: &str) -> Result<()> {
        netns::run_in(ns, || iface::set_up(dev))?.with_context(|| format!("bringing {ns}:{dev} up"))
    }

    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Leave the namespaces in place (`--keep`); `lockstep lab clean` removes them.
    pub fn keep(&mut self) {
        self.keep = true;
    }

    /// Removes everything now and says what failed.
    pub fn teardown(mut self) -> Result<()> {
        let names = std::mem::take(&mut self.namespaces);
        if self.keep {
            return Ok(());
        }
        let mut errors = Vec::new();
        for ns in names.iter().rev() {
            if let Err(e) = remove_namespace(ns) {
                errors.push(format!("{ns}: {e:#}"));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(anyhow!("could not remove: {}", errors.join("; ")))
        }
    }
}

impl Default for Topology {
    fn default() -> Topology {
        Topology::new()
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        for ns in std::mem::take(&mut self.namespaces).iter().rev() {
            if let Err(e) = remove_namespace(ns) {
                eprintln!("lockstep lab: could not remove namespace {ns}: {e:#} (run `lockstep lab clean`)");
            }
        }
    }
}

/// Interfaces, shaping, addresses, neighbours and routes of one node, inside its
/// namespace. Returns notes about what could not be set.
fn configure(n: &NodePlan) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for i in &n.ifaces {
        iface::set_mac(&i.ifname, mac(i.mac))?;
        match ethtool::set_offloads(&i.ifname, Offloads::ALL_OFF) {
            Ok(_) => {}
            Err(e)
                if matches!(e, ethtool::EthtoolError::NotChangeable { .. })
                    || e.is_unsupported() =>
            {
                notes.push(format!("{}: {}: {e}", n.name, i.ifname));
            }
            Err(e) => return Err(e.into()),
        }
        iface::set_up(&i.ifname)?;
        if i.shape {
            tc::add_tbf(
                &i.ifname,
                i.rate_bps,
                tbf_burst(i.rate_bps),
                TbfLimit::Latency(TBF_LATENCY),
            )
            .with_context(|| format!("shaping {} to {} bit/s", i.ifname, i.rate_bps))?;
        }
        if n.kernel.addresses {
            iface::add_addr(&i.ifname, i.addr, i.prefix_len)?;
        }
    }
    for (dev, ip, m) in &n.kernel.neighbours {
        iface::add_neigh(dev, *ip, mac(*m))?;
    }
    for r in &n.kernel.routes {
        iface::add_route(r.dest.addr, r.dest.len, Some(r.via), Some(&r.dev))?;
    }
    Ok(notes)
}

/// Kills every process in the namespace, waits for them to go, deletes it.
pub fn remove_namespace(ns: &str) -> Result<()> {
    if !netns::exists(ns) {
        return Ok(());
    }
    let deadline = StdInstant::now() + StdDuration::from_secs(3);
    loop {
        let pids = netns::pids(ns).unwrap_or_default();
        if pids.is_empty() {
            break;
        }
        for pid in &pids {
            let _ = proc::signal_pid(*pid, Signal::Kill);
        }
        if StdInstant::now() > deadline {
            return Err(anyhow!(
                "processes {pids:?} in {ns} do not die; the namespace stays"
            ));
        }
        std::thread::sleep(StdDuration::from_millis(20));
    }
    netns::delete(ns)?;
    Ok(())
}

/// Removes every namespace called `ls-*` and its processes; returns their names.
pub fn clean() -> Result<Vec<String>> {
    let names = netns::list(NS_PREFIX)?;
    let mut errors = Vec::new();
    for ns in &names {
        if let Err(e) = remove_namespace(ns) {
            errors.push(format!("{ns}: {e:#}"));
        }
    }
    if !errors.is_empty() {
        return Err(anyhow!("could not remove: {}", errors.join("; ")));
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(ns_name("0a1b2c", "r1"), "ls-0a1b2c-r1");
        let id = new_run_id();
        assert_eq!(id.len(), 6);
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(netns::validate_name(&ns_name(&id, "abcdefghijkl")).is_ok());
    }

    #[test]
    fn tbf_buckets() {
        assert_eq!(tbf_burst(100_000_000), 3028);
        assert_eq!(tbf_burst(1_000_000_000), 6250);
        assert_eq!(tbf_burst(10_000_000_000), 62_500);
    }
}
