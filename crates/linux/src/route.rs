//! Where the kernel would send a datagram, and to whom first: what a host that writes
//! whole frames itself ([`crate::port`]) needs in place of the kernel's UDP stack —
//! the interface the route to the destination leaves by, the next hop on it (the
//! gateway, or the destination on its own link) and that hop's MAC address from the
//! neighbour table. Read with iproute2 (`ip -j route get`, `ip -j neigh show`), so the
//! answer is the kernel's own, in the namespace of the calling thread.
//!
//! A next hop not in the neighbour table yet is resolved the way the kernel would on
//! a first datagram: one empty UDP datagram to the next hop's discard port makes the
//! kernel ask for it (ARP), and the table is read again until the answer is there,
//! for at most [`RESOLVE_WAIT`].

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use serde::Deserialize;
use thiserror::Error;

use crate::cmd::{self, CommandError};
use crate::iface::{parse_mac, Mac};
use crate::udp::{NetError, UdpSocket};

/// How long a next hop may take to answer ARP (the kernel asks three times, a second
/// apart).
pub const RESOLVE_WAIT: Duration = Duration::from_secs(3);
/// The discard service: where the datagram that makes the kernel ask goes.
const DISCARD_PORT: u16 = 9;

/// Why the way to a destination could not be found.
#[derive(Debug, Error)]
pub enum RouteError {
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("no route to {dst}: {why}")]
    NoRoute { dst: Ipv4Addr, why: String },
    #[error("{dst} is an address of this host: no frame leaves for it")]
    Local { dst: Ipv4Addr },
    #[error("`{command}` printed what was not expected: {why}")]
    Output { command: String, why: String },
    #[error("cannot make the kernel resolve {via} (next hop to {dst}): {source}")]
    Trigger {
        dst: Ipv4Addr,
        via: Ipv4Addr,
        #[source]
        source: NetError,
    },
    #[error("the next hop {via} to {dst} on {ifname} did not answer ARP within {}s (is it up, and on that link?)", RESOLVE_WAIT.as_secs())]
    Unresolved {
        dst: Ipv4Addr,
        via: Ipv4Addr,
        ifname: String,
    },
    #[error("no interface of this network namespace has the address {0}")]
    NoAddress(Ipv4Addr),
}

/// The route the kernel picks to a destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// The interface it leaves by.
    pub ifname: String,
    /// The gateway, or `None` when the destination is on the interface's link.
    pub gateway: Option<Ipv4Addr>,
    /// The source address the kernel would use.
    pub prefsrc: Option<Ipv4Addr>,
}

impl Route {
    /// The host the frame goes to first.
    pub fn via(&self, dst: Ipv4Addr) -> Ipv4Addr {
        self.gateway.unwrap_or(dst)
    }
}

/// The route and the next hop's MAC address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NextHop {
    pub route: Route,
    pub via: Ipv4Addr,
    pub mac: Mac,
}

#[derive(Deserialize)]
struct RouteJson {
    #[serde(default)]
    dev: Option<String>,
    #[serde(default)]
    gateway: Option<String>,
    #[serde(default)]
    prefsrc: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

/// `ip -j route get DST [from SRC]`.
pub fn route_get(dst: Ipv4Addr, from: Option<Ipv4Addr>) -> Result<Route, RouteError> {
    let mut args = vec![
        "-j".to_string(),
        "route".into(),
        "get".into(),
        dst.to_string(),
    ];
    if let Some(src) = from {
        args.extend(["from".into(), src.to_string()]);
    }
    let out = cmd::ip(&args).map_err(|e| match e.stderr() {
        Some(why) if !why.is_empty() => RouteError::NoRoute {
            dst,
            why: why.to_string(),
        },
        _ => RouteError::Command(e),
    })?;
    parse_route(&out, dst).map_err(|why| match why {
        RouteParse::Local => RouteError::Local { dst },
        RouteParse::Bad(why) => RouteError::Output {
            command: cmd::command_line("ip", &args),
            why,
        },
    })
}

/// Why `ip -j route get`'s output gave no route.
#[derive(Debug, PartialEq, Eq)]
pub enum RouteParse {
    /// The destination is local (`type local`, or out of `lo`).
    Local,
    Bad(String),
}

/// The route in `ip -j route get`'s output.
pub fn parse_route(json: &str, dst: Ipv4Addr) -> Result<Route, RouteParse> {
    let routes: Vec<RouteJson> =
        serde_json::from_str(json).map_err(|e| RouteParse::Bad(e.to_string()))?;
    let r = routes
        .into_iter()
        .next()
        .ok_or_else(|| RouteParse::Bad(format!("no route to {dst} listed")))?;
    let ifname = r.dev.ok_or_else(|| RouteParse::Bad("no \"dev\"".into()))?;
    if r.kind.as_deref() == Some("local") || ifname == "lo" {
        return Err(RouteParse::Local);
    }
    let addr = |s: Option<String>, what: &str| -> Result<Option<Ipv4Addr>, RouteParse> {
        s.map(|s| {
            s.parse()
                .map_err(|_| RouteParse::Bad(format!("{what} \"{s}\" is not an IPv4 address")))
        })
        .transpose()
    };
    Ok(Route {
        gateway: addr(r.gateway, "gateway")?,
        prefsrc: addr(r.prefsrc, "prefsrc")?,
        ifname,
    })
}

#[derive(Deserialize)]
struct NeighJson {
    #[serde(default)]
    lladdr: Option<String>,
    #[serde(default)]
    state: Vec<String>,
}

/// The MAC address in `ip -j neigh show`'s output, when the entry has a usable one
/// (not `INCOMPLETE` or `FAILED`).
pub fn parse_neigh(json: &str) -> Result<Option<Mac>, String> {
    let entries: Vec<NeighJson> = serde_json::from_str(json).map_err(|e| e.to_string())?;
    Ok(entries.into_iter().find_map(|n| {
        let dead = n.state.iter().any(|s| s == "INCOMPLETE" || s == "FAILED");
        if dead {
            return None;
        }
        n.lladdr.as_deref().and_then(parse_mac)
    }))
}

/// The neighbour table's MAC for `addr` on `ifname`, if it has one.
pub fn neighbour(ifname: &str, addr: Ipv4Addr) -> Result<Option<Mac>, RouteError> {
    let args = [
        "-j",
        "neigh",
        "show",
        "to",
        &addr.to_string(),
        "dev",
        ifname,
    ];
    let out = cmd::ip(&args)?;
    parse_neigh(&out).map_err(|why| RouteError::Output {
        command: cmd::command_line("ip", &args),
        why,
    })
}

/// The route to `dst` (from `from`, the source address to send with) and the next
/// hop's MAC, asking the next hop (ARP) when the table does not have it yet.
pub fn resolve(dst: Ipv4Addr, from: Option<Ipv4Addr>) -> Result<NextHop, RouteError> {
    let route = route_get(dst, from)?;
    let via = route.via(dst);
    if let Some(mac) = neighbour(&route.ifname, via)? {
        return Ok(NextHop { route, via, mac });
    }
    let trigger = |source| RouteError::Trigger { dst, via, source };
    let sock = UdpSocket::bind(SocketAddr::V4(SocketAddrV4::new(
        from.unwrap_or(Ipv4Addr::UNSPECIFIED),
        0,
    )))
    .map_err(trigger)?;
    sock.send_to(&[], SocketAddr::V4(SocketAddrV4::new(via, DISCARD_PORT)))
        .map_err(trigger)?;
    let until = Instant::now() + RESOLVE_WAIT;
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
        if let Some(mac) = neighbour(&route.ifname, via)? {
            return Ok(NextHop { route, via, mac });
        }
    }
    Err(RouteError::Unresolved {
        dst,
        via,
        ifname: route.ifname,
    })
}

#[derive(Deserialize)]
struct AddrJson {
    ifname: String,
    #[serde(default)]
    addr_info: Vec<AddrInfo>,
}

#[derive(Deserialize)]
struct AddrInfo {
    #[serde(default)]
    local: Option<String>,
}

/// The interface with `addr` in `ip -j -4 addr show`'s output.
pub fn parse_addr_owner(json: &str, addr: Ipv4Addr) -> Result<Option<String>, String> {
    let ifs: Vec<AddrJson> = serde_json::from_str(json).map_err(|e| e.to_string())?;
    let want = addr.to_string();
    Ok(ifs
        .into_iter()
        .find(|i| {
            i.addr_info
                .iter()
                .any(|a| a.local.as_deref() == Some(&want))
        })
        .map(|i| i.ifname))
}

/// The interface of this namespace that has `addr`.
pub fn interface_with(addr: Ipv4Addr) -> Result<String, RouteError> {
    let args = ["-j", "-4", "addr", "show"];
    let out = cmd::ip(&args)?;
    parse_addr_owner(&out, addr)
        .map_err(|why| RouteError::Output {
            command: cmd::command_line("ip", &args),
            why,
        })?
        .ok_or(RouteError::NoAddress(addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

    #[test]
    fn a_route_through_a_gateway() {
        let out = r#"[{"dst":"10.0.2.2","gateway":"10.0.1.1","dev":"s0","prefsrc":"10.0.1.2","flags":[],"uid":0,"cache":[]}]"#;
        let r = parse_route(out, DST).unwrap();
        assert_eq!(r.ifname, "s0");
        assert_eq!(r.gateway, Some(Ipv4Addr::new(10, 0, 1, 1)));
        assert_eq!(r.prefsrc, Some(Ipv4Addr::new(10, 0, 1, 2)));
        assert_eq!(r.via(DST), Ipv4Addr::new(10, 0, 1, 1));
    }

    #[test]
    fn a_route_on_the_link_goes_to_the_destination() {
        let out =
            r#"[{"dst":"10.0.2.2","dev":"d0","prefsrc":"10.0.2.1","flags":[],"uid":0,"cache":[]}]"#;
        let r = parse_route(out, DST).unwrap();
        assert_eq!((r.gateway, r.via(DST)), (None, DST));
    }

    #[test]
    fn local_and_odd_routes_are_refused() {
        let local = r#"[{"type":"local","dst":"10.0.2.2","dev":"lo","prefsrc":"10.0.2.2","flags":[],"uid":0,"cache":["local"]}]"#;
        assert_eq!(parse_route(local, DST), Err(RouteParse::Local));
        assert!(matches!(parse_route("[]", DST), Err(RouteParse::Bad(_))));
        assert!(matches!(
            parse_route("not json", DST),
            Err(RouteParse::Bad(_))
        ));
        let bad = r#"[{"dev":"s0","gateway":"fe80::1"}]"#;
        assert!(matches!(parse_route(bad, DST), Err(RouteParse::Bad(m)) if m.contains("gateway")));
    }

    #[test]
    fn a_neighbour_counts_only_with_a_usable_address() {
        let ok =
            r#"[{"dst":"10.0.1.1","dev":"s0","lladdr":"02:fc:00:00:00:05","state":["STALE"]}]"#;
        assert_eq!(parse_neigh(ok), Ok(Some([2, 0xfc, 0, 0, 0, 5])));
        let perm =
            r#"[{"dst":"10.0.1.1","dev":"s0","lladdr":"02:00:00:00:00:01","state":["PERMANENT"]}]"#;
        assert_eq!(parse_neigh(perm), Ok(Some([2, 0, 0, 0, 0, 1])));
        let waiting = r#"[{"dst":"10.0.1.1","dev":"s0","state":["INCOMPLETE"]}]"#;
        assert_eq!(parse_neigh(waiting), Ok(None));
        let failed =
            r#"[{"dst":"10.0.1.1","dev":"s0","lladdr":"02:00:00:00:00:01","state":["FAILED"]}]"#;
        assert_eq!(parse_neigh(failed), Ok(None));
        assert_eq!(parse_neigh("[]"), Ok(None));
        assert!(parse_neigh("{").is_err());
    }

    #[test]
    fn the_interface_of_an_address() {
        let out = r#"[{"ifindex":1,"ifname":"lo","addr_info":[{"family":"inet","local":"127.0.0.1","prefixlen":8}]},
            {"ifindex":5,"ifname":"d0","addr_info":[{"family":"inet","local":"10.0.2.2","prefixlen":24}]}]"#;
        assert_eq!(parse_addr_owner(out, DST), Ok(Some("d0".into())));
        assert_eq!(parse_addr_owner(out, Ipv4Addr::new(10, 9, 9, 9)), Ok(None));
    }
}
