//! Static IPv4 routes and longest-prefix match.
//!
//! The table keeps one sorted array per prefix length present, longest first. A
//! lookup masks the destination with each length in turn and binary-searches that
//! array; the first hit is the longest match. So it costs one probe per distinct
//! prefix length (a handful in a lab: /32 hosts, /24 links, a default route), never
//! allocates, and its result does not depend on the order routes were added.
//!
//! A route may also name the TTL a packet arrives with ([`Route::ttl`]): such a route
//! wins over the plain route for the same prefix when the TTL matches. That is how a
//! flow goes round a ring of routers several times before it leaves (routing on
//! destination and hop count): the same router sends it on round the ring while its
//! TTL is high and out of the ring on its last visit.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::{PortId, Prefix, PrefixError};

/// Where packets for `prefix` go: out of `port`, to `next_hop` (a router on that
/// link) or, when `None`, straight to the destination (directly connected).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub prefix: Prefix,
    pub port: PortId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_hop: Option<Ipv4Addr>,
    /// Only for packets arriving with exactly this TTL (before the router
    /// decrements it); `None`: any TTL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u8>,
}

impl Route {
    /// The address whose MAC the frame must carry: the next hop, or `dst` itself
    /// on a directly connected route.
    pub fn gateway_for(&self, dst: Ipv4Addr) -> Ipv4Addr {
        self.next_hop.unwrap_or(dst)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RouteError {
    /// A route for exactly this prefix (and TTL) is already in the table (two routes
    /// for the same prefix would make the choice depend on their order).
    #[error("duplicate route for {0}{suffix}", suffix = ttl_suffix(*.1))]
    Duplicate(Prefix, Option<u8>),
    /// The route's prefix is not a valid prefix (a literal with `len > 32` or host
    /// bits set).
    #[error("bad route prefix: {0}")]
    BadPrefix(#[from] PrefixError),
}

fn ttl_suffix(ttl: Option<u8>) -> String {
    ttl.map(|t| format!(" at TTL {t}")).unwrap_or_default()
}

/// The routes of one prefix length, sorted by (network address, TTL key).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Level {
    len: u8,
    mask: u32,
    routes: Vec<(Key, Route)>,
}

/// Sort key of a route: its network, then its TTL (a plain route sorts after every
/// TTL-specific one of the same network).
type Key = (u32, u16);

const ANY_TTL: u16 = 0x100;

fn ttl_key(ttl: Option<u8>) -> u16 {
    ttl.map(u16::from).unwrap_or(ANY_TTL)
}

/// A longest-prefix-match routing table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RouteTable {
    /// Longest prefix length first.
    levels: Vec<Level>,
    count: usize,
    /// Some route names a TTL (lookups then probe twice per level).
    by_ttl: bool,
}

impl RouteTable {
    pub fn new() -> RouteTable {
        RouteTable::default()
    }

    /// Build a table from routes, stopping at the first error.
    pub fn from_routes<I: IntoIterator<Item = Route>>(routes: I) -> Result<RouteTable, RouteError> {
        let mut table = RouteTable::new();
        for route in routes {
            table.add(route)?;
        }
        Ok(table)
    }

    /// Add a route. Fails on an invalid prefix or when a route for the same prefix
    /// exists ([`RouteError::Duplicate`]); the table is unchanged then.
    pub fn add(&mut self, route: Route) -> Result<(), RouteError> {
        route.prefix.validate()?;
        let len = route.prefix.len;
        let at = match self.levels.binary_search_by(|l| len.cmp(&l.len)) {
            Ok(at) => at,
            Err(at) => {
                self.levels.insert(
                    at,
                    Level {
                        len,
                        mask: route.prefix.mask(),
                        routes: Vec::new(),
                    },
                );
                at
            }
        };
        let level = &mut self.levels[at];
        let key = (route.prefix.network(), ttl_key(route.ttl));
        match level.routes.binary_search_by_key(&key, |&(k, _)| k) {
            Ok(_) => Err(RouteError::Duplicate(route.prefix, route.ttl)),
            Err(pos) => {
                level.routes.insert(pos, (key, route));
                self.count += 1;
                self.by_ttl |= route.ttl.is_some();
                Ok(())
            }
        }
    }

    /// The route with the longest prefix containing `dst` for a packet arriving
    /// with `ttl`: in each prefix length a route for exactly that TTL first, then a
    /// plain one.
    pub fn lookup(&self, dst: Ipv4Addr, ttl: u8) -> Option<&Route> {
        let dst = u32::from(dst);
        self.levels.iter().find_map(|level| {
            let net = dst & level.mask;
            let find = |t: u16| {
                level
                    .routes
                    .binary_search_by_key(&(net, t), |&(k, _)| k)
                    .ok()
                    .map(|i| &level.routes[i].1)
            };
            if self.by_ttl {
                find(u16::from(ttl)).or_else(|| find(ANY_TTL))
            } else {
                find(ANY_TTL)
            }
        })
    }

    /// The plain route (any TTL) for exactly `prefix`, if any.
    pub fn get(&self, prefix: &Prefix) -> Option<&Route> {
        self.get_at(prefix, None)
    }

    /// The route for exactly `prefix` and `ttl`, if any.
    pub fn get_at(&self, prefix: &Prefix, ttl: Option<u8>) -> Option<&Route> {
        let level = self.levels.iter().find(|l| l.len == prefix.len)?;
        let i = level
            .routes
            .binary_search_by_key(&(prefix.network(), ttl_key(ttl)), |&(k, _)| k)
            .ok()?;
        Some(&level.routes[i].1)
    }

    /// Every route, longest prefixes first, then by network address.
    pub fn iter(&self) -> impl Iterator<Item = &Route> {
        self.levels
            .iter()
            .flat_map(|level| level.routes.iter().map(|(_, r)| r))
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn route(prefix: &str, port: u16, next_hop: Option<[u8; 4]>) -> Route {
        Route {
            prefix: prefix.parse().unwrap(),
            port: PortId(port),
            next_hop: next_hop.map(Ipv4Addr::from),
            ttl: None,
        }
    }

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    #[test]
    fn longest_prefix_wins_whatever_the_insertion_order() {
        let routes = [
            route("0.0.0.0/0", 0, Some([10, 0, 0, 254])),
            route("10.0.0.0/8", 1, Some([10, 0, 0, 1])),
            route("10.1.0.0/16", 2, Some([10, 1, 0, 1])),
            route("10.1.2.0/24", 3, None),
            route("10.1.2.3/32", 4, None),
        ];
        for order in [[0, 1, 2, 3, 4], [4, 3, 2, 1, 0], [2, 4, 0, 3, 1]] {
            let table = RouteTable::from_routes(order.iter().map(|&i| routes[i])).unwrap();
            assert_eq!(table.len(), 5);
            let port = |s: &str| table.lookup(ip(s), 64).map(|r| r.port.0);
            assert_eq!(port("10.1.2.3"), Some(4));
            assert_eq!(port("10.1.2.4"), Some(3));
            assert_eq!(port("10.1.3.4"), Some(2));
            assert_eq!(port("10.2.0.0"), Some(1));
            assert_eq!(port("192.168.0.1"), Some(0));
        }
    }

    #[test]
    fn no_route_without_a_default() {
        let table = RouteTable::from_routes([route("10.0.0.0/24", 1, None)]).unwrap();
        assert_eq!(table.lookup(ip("10.0.1.1"), 64), None);
        assert!(RouteTable::new().lookup(ip("10.0.0.1"), 64).is_none());
        assert!(RouteTable::new().is_empty());
    }

    #[test]
    fn gateway_is_the_next_hop_or_the_destination() {
        let via = route("10.0.1.0/24", 1, Some([10, 0, 0, 2]));
        let direct = route("10.0.0.0/24", 2, None);
        assert_eq!(via.gateway_for(ip("10.0.1.9")), ip("10.0.0.2"));
        assert_eq!(direct.gateway_for(ip("10.0.0.9")), ip("10.0.0.9"));
    }

    #[test]
    fn duplicate_prefix_is_an_error_and_changes_nothing() {
        let mut table = RouteTable::new();
        table.add(route("10.0.1.0/24", 1, None)).unwrap();
        let err = table.add(route("10.0.1.0/24", 2, Some([10, 0, 0, 9])));
        assert_eq!(
            err,
            Err(RouteError::Duplicate("10.0.1.0/24".parse().unwrap(), None))
        );
        assert_eq!(
            err.unwrap_err().to_string(),
            "duplicate route for 10.0.1.0/24"
        );
        assert_eq!(table.len(), 1);
        assert_eq!(table.lookup(ip("10.0.1.5"), 64).unwrap().port, PortId(1));
        // Same address, other length: not a duplicate.
        table.add(route("10.0.1.0/25", 3, None)).unwrap();
        assert_eq!(table.lookup(ip("10.0.1.5"), 64).unwrap().port, PortId(3));
        assert_eq!(table.lookup(ip("10.0.1.200"), 64).unwrap().port, PortId(1));
    }

    #[test]
    fn invalid_literal_prefixes_are_refused() {
        let mut table = RouteTable::new();
        let bad = Route {
            prefix: Prefix {
                addr: ip("10.0.1.1"),
                len: 24,
            },
            port: PortId(1),
            next_hop: None,
            ttl: None,
        };
        assert_eq!(
            table.add(bad).unwrap_err().to_string(),
            "bad route prefix: 10.0.1.1/24: host bits set; did you mean 10.0.1.0/24?"
        );
        let too_long = Route {
            prefix: Prefix {
                addr: ip("10.0.1.1"),
                len: 33,
            },
            ..bad
        };
        assert!(matches!(table.add(too_long), Err(RouteError::BadPrefix(_))));
        assert!(table.is_empty());
    }

    #[test]
    fn a_ttl_route_wins_for_its_ttl_only() {
        let ring = route("10.9.0.1/32", 1, Some([10, 0, 0, 2]));
        let out = Route {
            ttl: Some(44),
            ..route("10.9.0.1/32", 2, None)
        };
        let mut table = RouteTable::from_routes([ring, out]).unwrap();
        assert_eq!(table.len(), 2);
        assert_eq!(table.lookup(ip("10.9.0.1"), 64).unwrap().port, PortId(1));
        assert_eq!(table.lookup(ip("10.9.0.1"), 45).unwrap().port, PortId(1));
        assert_eq!(table.lookup(ip("10.9.0.1"), 44).unwrap().port, PortId(2));
        // a TTL route of a longer prefix beats a plain shorter one; of another
        // TTL it does not match at all
        table.add(route("10.9.0.0/24", 3, None)).unwrap();
        assert_eq!(table.lookup(ip("10.9.0.7"), 44).unwrap().port, PortId(3));
        assert_eq!(
            table.get(&"10.9.0.1/32".parse().unwrap()).unwrap().port,
            PortId(1)
        );
        let at = table.get_at(&"10.9.0.1/32".parse().unwrap(), Some(44));
        assert_eq!(at.unwrap().port, PortId(2));
        let dup = table
            .add(Route {
                port: PortId(5),
                ..out
            })
            .unwrap_err();
        assert_eq!(dup.to_string(), "duplicate route for 10.9.0.1/32 at TTL 44");
        let json = serde_json::to_string(&out).unwrap();
        assert_eq!(json, r#"{"prefix":"10.9.0.1/32","port":2,"ttl":44}"#);
    }

    #[test]
    fn get_and_iter() {
        let table = RouteTable::from_routes([
            route("10.0.0.0/8", 1, None),
            route("10.2.0.0/16", 2, None),
            route("10.1.0.0/16", 3, None),
        ])
        .unwrap();
        assert_eq!(
            table.get(&"10.1.0.0/16".parse().unwrap()).unwrap().port,
            PortId(3)
        );
        assert!(table.get(&"10.3.0.0/16".parse().unwrap()).is_none());
        let order: Vec<String> = table.iter().map(|r| r.prefix.to_string()).collect();
        assert_eq!(order, ["10.1.0.0/16", "10.2.0.0/16", "10.0.0.0/8"]);
    }

    #[test]
    fn serde_form() {
        let r = route("10.0.1.0/24", 2, Some([10, 0, 0, 2]));
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(
            json,
            r#"{"prefix":"10.0.1.0/24","port":2,"next_hop":"10.0.0.2"}"#
        );
        assert_eq!(serde_json::from_str::<Route>(&json).unwrap(), r);
        let direct: Route = serde_json::from_str(r#"{"prefix":"10.0.0.0/24","port":1}"#).unwrap();
        assert_eq!(direct.next_hop, None);
        assert!(serde_json::from_str::<Route>(
            r#"{"prefix":"10.0.0.0/24","port":1,"via":"1.2.3.4"}"#
        )
        .is_err());
    }

    /// Random routes drawn from a small address space (so prefixes nest and
    /// lookups hit), deduplicated by prefix, the first occurrence kept.
    fn arb_routes() -> impl Strategy<Value = Vec<Route>> {
        prop::collection::vec((any::<u32>(), 0u8..=32, any::<u16>()), 0..40).prop_map(|raw| {
            let mut out: Vec<Route> = Vec::new();
            for (addr, len, port) in raw {
                // Top byte from {10, 11}, so prefixes overlap often.
                let addr = (addr & 0x01ff_ffff) | 0x0a00_0000;
                let prefix = Prefix::truncating(Ipv4Addr::from(addr), len);
                if out.iter().all(|r| r.prefix != prefix) {
                    out.push(Route {
                        prefix,
                        port: PortId(port),
                        next_hop: None,
                        ttl: None,
                    });
                }
            }
            out
        })
    }

    proptest! {
        #[test]
        fn lookup_matches_a_brute_force_model(
            routes in arb_routes(),
            probes in prop::collection::vec(any::<u32>(), 1..40),
        ) {
            let table = RouteTable::from_routes(routes.iter().copied()).unwrap();
            prop_assert_eq!(table.len(), routes.len());
            // Probe the routes' own networks and neighbours as well as random
            // addresses (mostly inside 10/7).
            let mut addrs: Vec<u32> = probes.iter().map(|a| (a & 0x01ff_ffff) | 0x0a00_0000).collect();
            addrs.extend(probes.iter().copied());
            for r in &routes {
                let n = r.prefix.network();
                addrs.extend([n, n.wrapping_sub(1), n | !r.prefix.mask(), (n | !r.prefix.mask()).wrapping_add(1)]);
            }
            for a in addrs {
                let dst = Ipv4Addr::from(a);
                let model = routes
                    .iter()
                    .filter(|r| r.prefix.contains(dst))
                    .max_by_key(|r| r.prefix.len);
                prop_assert_eq!(table.lookup(dst, 64), model, "dst {}", dst);
            }
        }

        #[test]
        fn every_duplicate_is_refused(routes in arb_routes(), pick in any::<prop::sample::Index>(), port in any::<u16>()) {
            prop_assume!(!routes.is_empty());
            let mut table = RouteTable::from_routes(routes.iter().copied()).unwrap();
            let dup = Route { port: PortId(port), ..routes[pick.index(routes.len())] };
            prop_assert_eq!(table.add(dup), Err(RouteError::Duplicate(dup.prefix, None)));
            prop_assert_eq!(table.len(), routes.len());
        }
    }
}
