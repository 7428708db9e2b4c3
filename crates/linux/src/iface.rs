//! Network interfaces: lookup (index, MAC, MTU, state) and the lab's setup steps
//! (veth pairs, moving into namespaces, addresses, routes, static neighbours, sysctls).
//!
//! Everything acts on the network namespace of the calling thread: lookups and state
//! changes are ioctls on a socket created on this thread, setup steps run `ip` as a
//! child of this thread, and sysctls are written under `/proc/sys`, which follows the
//! thread's namespace. Wrap calls in [`crate::netns::run_in`] to act inside a
//! namespace. Nothing reads `/sys/class/net`, which would show the namespace `/sys`
//! was mounted in rather than the thread's.

use std::io;
use std::mem::size_of;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::PathBuf;

use thiserror::Error;

use crate::cmd::{self, CommandError};
use crate::sys::last_error;

/// An Ethernet MAC address.
pub type Mac = [u8; 6];

/// Why an interface operation failed.
#[derive(Debug, Error)]
pub enum IfaceError {
    #[error("invalid interface name \"{0}\": 1 to 15 bytes, not . or .., no '/', ':', whitespace or NUL")]
    InvalidName(String),
    #[error("no interface \"{0}\" in this network namespace")]
    NotFound(String),
    #[error("invalid sysctl key \"{0}\": dotted (net.ipv4.ip_forward) or slashed (net/ipv4/conf/v0.1/forwarding), no empty, . or .. parts")]
    InvalidSysctl(String),
    #[error("invalid {what} {value}: {why}")]
    InvalidArgument {
        what: &'static str,
        value: String,
        why: &'static str,
    },
    #[error("{op} on {ifname}: permission denied (needs CAP_NET_ADMIN: run as root)")]
    Denied { op: &'static str, ifname: String },
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("{op} on {ifname}: {source}")]
    Io {
        op: &'static str,
        ifname: String,
        #[source]
        source: io::Error,
    },
    #[error("sysctl {key} ({path}): {source}")]
    Sysctl {
        key: String,
        path: String,
        #[source]
        source: io::Error,
    },
}

impl IfaceError {
    /// A missing privilege.
    pub fn is_permission(&self) -> bool {
        match self {
            IfaceError::Denied { .. } => true,
            IfaceError::Sysctl { source, .. } => source.kind() == io::ErrorKind::PermissionDenied,
            IfaceError::Command(e) => e
                .stderr()
                .is_some_and(|s| s.contains("Operation not permitted")),
            _ => false,
        }
    }
}

/// Whether the kernel would accept `name` as an interface name (`dev_valid_name`).
pub fn valid_ifname(name: &str) -> bool {
    lockstep_core::names::valid_ifname(name)
}

fn check_name(name: &str) -> Result<(), IfaceError> {
    if valid_ifname(name) {
        Ok(())
    } else {
        Err(IfaceError::InvalidName(name.to_string()))
    }
}

/// An `ifreq` naming `name` (checked by the caller with [`valid_ifname`]).
pub(crate) fn ifreq_for(name: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    ifr
}

/// A datagram socket for interface ioctls, in the calling thread's namespace.
pub(crate) fn ioctl_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Issues an interface ioctl; `ifr` carries the name in and the answer out.
fn if_ioctl(
    name: &str,
    request: libc::c_ulong,
    op: &'static str,
    ifr: &mut libc::ifreq,
) -> Result<(), IfaceError> {
    let sock = ioctl_socket().map_err(|source| IfaceError::Io {
        op: "socket",
        ifname: name.to_string(),
        source,
    })?;
    // SAFETY: `ifr` is a valid, writable ifreq naming the interface; every request used
    // here reads and writes only the ifreq itself.
    let rc = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, ifr as *mut libc::ifreq) };
    if rc == 0 {
        return Ok(());
    }
    let e = last_error();
    Err(match e.raw_os_error() {
        Some(libc::ENODEV) => IfaceError::NotFound(name.to_string()),
        Some(libc::EPERM) | Some(libc::EACCES) => IfaceError::Denied {
            op,
            ifname: name.to_string(),
        },
        _ => IfaceError::Io {
            op,
            ifname: name.to_string(),
            source: e,
        },
    })
}

/// The interface's index (what `AF_PACKET` sockets and routes refer to).
pub fn ifindex(name: &str) -> Result<u32, IfaceError> {
    check_name(name)?;
    let mut ifr = ifreq_for(name);
    if_ioctl(name, libc::SIOCGIFINDEX, "SIOCGIFINDEX", &mut ifr)?;
    // SAFETY: SIOCGIFINDEX filled in the index member.
    let idx = unsafe { ifr.ifr_ifru.ifru_ifindex };
    u32::try_from(idx).map_err(|_| IfaceError::NotFound(name.to_string()))
}

/// The interface's MAC address.
pub fn mac(name: &str) -> Result<Mac, IfaceError> {
    check_name(name)?;
    let mut ifr = ifreq_for(name);
    if_ioctl(name, libc::SIOCGIFHWADDR, "SIOCGIFHWADDR", &mut ifr)?;
    // SAFETY: SIOCGIFHWADDR filled in the hardware-address member.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    let mut out = [0u8; 6];
    for (o, &b) in out.iter_mut().zip(sa.sa_data.iter()) {
        *o = b as u8;
    }
    Ok(out)
}

/// Sets the interface's MAC address. Most drivers want the interface down for this;
/// veth accepts it while up.
pub fn set_mac(name: &str, mac: Mac) -> Result<(), IfaceError> {
    check_name(name)?;
    let mut ifr = ifreq_for(name);
    let mut sa: libc::sockaddr = {
        // SAFETY: sockaddr is plain old data; all-zero is valid.
        unsafe { std::mem::zeroed() }
    };
    sa.sa_family = libc::ARPHRD_ETHER;
    for (d, &b) in sa.sa_data.iter_mut().zip(mac.iter()) {
        *d = b as libc::c_char;
    }
    ifr.ifr_ifru.ifru_hwaddr = sa;
    if_ioctl(name, libc::SIOCSIFHWADDR, "SIOCSIFHWADDR", &mut ifr)
}

/// The interface's MTU (bytes of IP packet, not counting the Ethernet header).
pub fn mtu(name: &str) -> Result<u32, IfaceError> {
    check_name(name)?;
    let mut ifr = ifreq_for(name);
    if_ioctl(name, libc::SIOCGIFMTU, "SIOCGIFMTU", &mut ifr)?;
    // SAFETY: SIOCGIFMTU filled in the mtu member.
    let m = unsafe { ifr.ifr_ifru.ifru_mtu };
    Ok(u32::try_from(m).unwrap_or(0))
}

/// Sets the interface's MTU.
pub fn set_mtu(name: &str, mtu: u32) -> Result<(), IfaceError> {
    check_name(name)?;
    let v = libc::c_int::try_from(mtu).map_err(|_| IfaceError::InvalidArgument {
        what: "MTU",
        value: mtu.to_string(),
        why: "too large",
    })?;
    let mut ifr = ifreq_for(name);
    ifr.ifr_ifru.ifru_mtu = v;
    if_ioctl(name, libc::SIOCSIFMTU, "SIOCSIFMTU", &mut ifr)
}

fn flags(name: &str) -> Result<libc::c_short, IfaceError> {
    let mut ifr = ifreq_for(name);
    if_ioctl(name, libc::SIOCGIFFLAGS, "SIOCGIFFLAGS", &mut ifr)?;
    // SAFETY: SIOCGIFFLAGS filled in the flags member.
    Ok(unsafe { ifr.ifr_ifru.ifru_flags })
}

fn set_flag(name: &str, flag: libc::c_int, on: bool) -> Result<(), IfaceError> {
    check_name(name)?;
    let f = flags(name)?;
    let flag = flag as libc::c_short;
    let want = if on { f | flag } else { f & !flag };
    if want == f {
        return Ok(());
    }
    let mut ifr = ifreq_for(name);
    ifr.ifr_ifru.ifru_flags = want;
    if_ioctl(name, libc::SIOCSIFFLAGS, "SIOCSIFFLAGS", &mut ifr)
}

/// Whether the interface is administratively up (`IFF_UP`).
pub fn is_up(name: &str) -> Result<bool, IfaceError> {
    check_name(name)?;
    Ok(flags(name)? & libc::IFF_UP as libc::c_short != 0)
}

/// Brings the interface up.
pub fn set_up(name: &str) -> Result<(), IfaceError> {
    set_flag(name, libc::IFF_UP, true)
}

/// Takes the interface down.
pub fn set_down(name: &str) -> Result<(), IfaceError> {
    set_flag(name, libc::IFF_UP, false)
}

/// The interfaces of this namespace whose names start with `prefix`, as
/// `(index, name)` sorted by name (for cleaning up leftovers).
pub fn list(prefix: &str) -> Result<Vec<(u32, String)>, IfaceError> {
    // SAFETY: if_nameindex returns a list we free below, or null on failure.
    let head = unsafe { libc::if_nameindex() };
    if head.is_null() {
        return Err(IfaceError::Io {
            op: "if_nameindex",
            ifname: String::new(),
            source: last_error(),
        });
    }
    let mut out = Vec::new();
    let mut cur = head;
    loop {
        // SAFETY: `cur` is within the array, which ends with an all-zero entry.
        let e = unsafe { &*cur };
        if e.if_index == 0 || e.if_name.is_null() {
            break;
        }
        // SAFETY: if_name is a NUL-terminated string owned by the list.
        let n = unsafe { std::ffi::CStr::from_ptr(e.if_name) }.to_string_lossy();
        if n.starts_with(prefix) {
            out.push((e.if_index, n.into_owned()));
        }
        // SAFETY: the entry was not the terminator, so the next one exists.
        cur = unsafe { cur.add(1) };
    }
    // SAFETY: `head` came from if_nameindex and is freed once.
    unsafe { libc::if_freenameindex(head) };
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// Creates a veth pair `a` — `b` in this namespace (both ends down).
pub fn create_veth(a: &str, b: &str) -> Result<(), IfaceError> {
    create_veth_between(a, None, b, None)
}

/// Creates a veth pair with each end directly in a namespace (`None`: this one).
/// Creating the ends where they belong, in one step, means no half-built pair is ever
/// visible in the caller's namespace.
pub fn create_veth_between(
    a: &str,
    ns_a: Option<&str>,
    b: &str,
    ns_b: Option<&str>,
) -> Result<(), IfaceError> {
    check_name(a)?;
    check_name(b)?;
    let mut args = vec!["link", "add", a];
    if let Some(ns) = ns_a {
        args.extend(["netns", ns]);
    }
    args.extend(["type", "veth", "peer", "name", b]);
    if let Some(ns) = ns_b {
        args.extend(["netns", ns]);
    }
    cmd::ip(&args)?;
    Ok(())
}

/// Deletes an interface (for a veth, both ends go).
pub fn delete_link(name: &str) -> Result<(), IfaceError> {
    check_name(name)?;
    cmd::ip(&["link", "del", "dev", name])?;
    Ok(())
}

/// Moves the interface into the namespace `ns` (it goes down and loses its addresses).
pub fn move_to_netns(name: &str, ns: &str) -> Result<(), IfaceError> {
    check_name(name)?;
    cmd::ip(&["link", "set", "dev", name, "netns", ns])?;
    Ok(())
}

fn check_prefix(prefix_len: u8) -> Result<(), IfaceError> {
    if prefix_len > 32 {
        return Err(IfaceError::InvalidArgument {
            what: "IPv4 prefix length",
            value: prefix_len.to_string(),
            why: "must be 0..=32",
        });
    }
    Ok(())
}

/// Adds an IPv4 address with its prefix (`ip addr add A/P dev NAME`).
pub fn add_addr(name: &str, addr: Ipv4Addr, prefix_len: u8) -> Result<(), IfaceError> {
    check_name(name)?;
    check_prefix(prefix_len)?;
    cmd::ip(&["addr", "add", &format!("{addr}/{prefix_len}"), "dev", name])?;
    Ok(())
}

/// Adds or replaces the route to `dest/prefix_len`, through the gateway `via` and/or
/// out of `dev` (at least one of them).
pub fn add_route(
    dest: Ipv4Addr,
    prefix_len: u8,
    via: Option<Ipv4Addr>,
    dev: Option<&str>,
) -> Result<(), IfaceError> {
    check_prefix(prefix_len)?;
    if via.is_none() && dev.is_none() {
        return Err(IfaceError::InvalidArgument {
            what: "route to",
            value: format!("{dest}/{prefix_len}"),
            why: "needs a gateway (via) or an interface (dev)",
        });
    }
    let mut args = vec![
        "route".to_string(),
        "replace".to_string(),
        format!("{dest}/{prefix_len}"),
    ];
    if let Some(v) = via {
        args.extend(["via".to_string(), v.to_string()]);
    }
    if let Some(d) = dev {
        check_name(d)?;
        args.extend(["dev".to_string(), d.to_string()]);
    }
    cmd::ip(&args)?;
    Ok(())
}

/// Formats a MAC the usual way: `02:00:00:00:00:01`.
pub fn format_mac(mac: &Mac) -> String {
    let mut s = String::with_capacity(17);
    for (i, b) in mac.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Parses `aa:bb:cc:dd:ee:ff` (or with `-`); `None` when malformed.
pub fn parse_mac(s: &str) -> Option<Mac> {
    let mut out = [0u8; 6];
    let mut parts = s.split([':', '-']);
    for o in out.iter_mut() {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *o = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// Adds or replaces a permanent neighbour (static ARP) entry, so traffic to `addr` out
/// of `name` goes to `mac` without ARP.
pub fn add_neigh(name: &str, addr: Ipv4Addr, mac: Mac) -> Result<(), IfaceError> {
    check_name(name)?;
    cmd::ip(&[
        "neigh",
        "replace",
        &addr.to_string(),
        "lladdr",
        &format_mac(&mac),
        "dev",
        name,
        "nud",
        "permanent",
    ])?;
    Ok(())
}

/// The `/proc/sys` file of a sysctl key. Dotted keys (`net.ipv4.ip_forward`) map dots
/// to slashes; keys with a slash are taken as a path (for interface names with dots).
pub fn sysctl_path(key: &str) -> Result<PathBuf, IfaceError> {
    let bad = || IfaceError::InvalidSysctl(key.to_string());
    let sep = if key.contains('/') { '/' } else { '.' };
    let mut path = PathBuf::from("/proc/sys");
    for part in key.split(sep) {
        if part.is_empty() || part == "." || part == ".." || part.contains('\0') {
            return Err(bad());
        }
        path.push(part);
    }
    Ok(path)
}

/// Sets a sysctl in the calling thread's namespace (`net.*` keys are per namespace).
pub fn sysctl_set(key: &str, value: &str) -> Result<(), IfaceError> {
    let path = sysctl_path(key)?;
    std::fs::write(&path, value.as_bytes()).map_err(|source| IfaceError::Sysctl {
        key: key.to_string(),
        path: path.display().to_string(),
        source,
    })
}

/// Reads a sysctl (trimmed).
pub fn sysctl_get(key: &str) -> Result<String, IfaceError> {
    let path = sysctl_path(key)?;
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|source| IfaceError::Sysctl {
            key: key.to_string(),
            path: path.display().to_string(),
            source,
        })
}

// The layout `ifreq_for` relies on: the name is the first IFNAMSIZ bytes.
const _: () = assert!(size_of::<libc::ifreq>() >= libc::IFNAMSIZ + 16);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_names_follow_the_kernel_rules() {
        for ok in ["lo", "veth0", "lst-3f2a-12a", "a.b", "x123456789abcde"] {
            assert!(valid_ifname(ok), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a:b",
            "a b",
            "a\0",
            "x123456789abcdef",
        ] {
            assert!(!valid_ifname(bad), "{bad:?}");
        }
        assert_eq!(
            ifindex("a/b").unwrap_err().to_string(),
            "invalid interface name \"a/b\": 1 to 15 bytes, not . or .., no '/', ':', whitespace or NUL"
        );
    }

    #[test]
    fn loopback_lookups() {
        let idx = ifindex("lo").unwrap();
        assert!(idx >= 1);
        assert_eq!(mac("lo").unwrap(), [0; 6]);
        assert!(mtu("lo").unwrap() >= 1500);
        assert!(list("lo").unwrap().contains(&(idx, "lo".to_string())));
        assert!(matches!(
            ifindex("lst-nonexist0"),
            Err(IfaceError::NotFound(n)) if n == "lst-nonexist0"
        ));
        assert_eq!(
            mtu("lst-nonexist0").unwrap_err().to_string(),
            "no interface \"lst-nonexist0\" in this network namespace"
        );
    }

    #[test]
    fn macs_format_and_parse() {
        let m = [0x02, 0, 0xab, 0xcd, 0xef, 0x01];
        assert_eq!(format_mac(&m), "02:00:ab:cd:ef:01");
        assert_eq!(parse_mac("02:00:ab:cd:ef:01"), Some(m));
        assert_eq!(parse_mac("02-00-AB-CD-EF-01"), Some(m));
        for bad in [
            "",
            "02:00:ab:cd:ef",
            "02:00:ab:cd:ef:01:02",
            "2:00:ab:cd:ef:01",
            "zz:00:ab:cd:ef:01",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
    }

    #[test]
    fn sysctl_keys_map_to_proc_sys() {
        assert_eq!(
            sysctl_path("net.ipv4.ip_forward").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/ip_forward")
        );
        assert_eq!(
            sysctl_path("net/ipv4/conf/v0.1/forwarding").unwrap(),
            PathBuf::from("/proc/sys/net/ipv4/conf/v0.1/forwarding")
        );
        for bad in ["", "net..ipv4", "net/../etc", "net.ipv4.", "/net/ipv4"] {
            assert!(
                matches!(sysctl_path(bad), Err(IfaceError::InvalidSysctl(_))),
                "{bad}"
            );
        }
        let v = sysctl_get("net.ipv4.ip_forward").unwrap();
        assert!(v == "0" || v == "1", "{v}");
    }

    #[test]
    fn invalid_route_and_prefix_are_refused_before_running_ip() {
        let a = Ipv4Addr::new(10, 0, 0, 0);
        assert_eq!(
            add_route(a, 24, None, None).unwrap_err().to_string(),
            "invalid route to 10.0.0.0/24: needs a gateway (via) or an interface (dev)"
        );
        assert_eq!(
            add_addr("lo", a, 33).unwrap_err().to_string(),
            "invalid IPv4 prefix length 33: must be 0..=32"
        );
    }
}
