//! What a lockstep router decides per packet, without touching the packet: where it
//! goes ([`route`]), which MAC address reaches the next hop ([`neigh`]), and which
//! reserved flow it belongs to ([`classify`]); [`nexthop`] keeps the route and
//! neighbour tables' recent answers, so a router's next packet of a flow asks one slot.
//!
//! All tables are static (built from the node config) and answer lookups without
//! allocating, so they can sit on the forwarding path.

use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

pub mod classify;
pub mod neigh;
pub mod nexthop;
pub mod route;
pub mod tuple_table;

pub use classify::{Classifier, FiveTuple, Rule};
pub use neigh::{NeighbourError, NeighbourTable};
pub use nexthop::NextHopCache;
pub use route::{Route, RouteError, RouteTable};

/// Longest network namespace name lockstep accepts.
pub const NETNS_NAME_MAX: usize = 64;

/// Most frames one batched packet-socket call moves.
pub const IO_BATCH_MAX: usize = 64;

/// Whether `name` is a network namespace name lockstep accepts: 1 to
/// [`NETNS_NAME_MAX`] characters of `A-Z a-z 0-9 . _ -`, not starting with a dot.
pub fn netns_name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NETNS_NAME_MAX
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// A node's port: an interface of a router, the socket of a host. Serialized as
/// the bare number.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct PortId(pub u16);

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port {}", self.0)
    }
}

/// Why a prefix string or value is not a valid IPv4 prefix. Every message starts
/// with the input, so it reads well inside a config error.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PrefixError {
    #[error("{input:?}: expected an IPv4 prefix like 10.0.1.0/24")]
    Empty { input: String },
    #[error("{input}: bad IPv4 address {addr:?} (expected a prefix like 10.0.1.0/24)")]
    BadAddress { input: String, addr: String },
    #[error("{input}: bad prefix length {len:?} (expected 0 to 32)")]
    BadLength { input: String, len: String },
    #[error("{input}: host bits set; did you mean {suggestion}?")]
    HostBitsSet { input: String, suggestion: Prefix },
}

/// An IPv4 prefix: the network address (host bits zero) and its length.
///
/// Written `10.0.1.0/24`; a bare address means a host route (`/32`). The fields are
/// public for pattern matching and literals; [`Prefix::new`] and parsing check that
/// `len ≤ 32` and the host bits are zero, and [`route::RouteTable::add`] refuses an
/// invalid literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    pub addr: Ipv4Addr,
    pub len: u8,
}

impl Prefix {
    /// `0.0.0.0/0`: every address (a default route).
    pub const ANY: Prefix = Prefix {
        addr: Ipv4Addr::UNSPECIFIED,
        len: 0,
    };

    /// A checked prefix.
    pub fn new(addr: Ipv4Addr, len: u8) -> Result<Prefix, PrefixError> {
        let prefix = Prefix { addr, len };
        prefix.validate()?;
        Ok(prefix)
    }

    /// The prefix of length `len` that contains `addr` (host bits cleared); `len`
    /// above 32 is taken as 32.
    pub fn truncating(addr: Ipv4Addr, len: u8) -> Prefix {
        let len = len.min(32);
        Prefix {
            addr: Ipv4Addr::from(u32::from(addr) & mask(len)),
            len,
        }
    }

    /// The netmask as a `u32`: `len` leading ones (`len > 32` counts as 32).
    pub fn mask(&self) -> u32 {
        mask(self.len)
    }

    /// The network address as a `u32`.
    pub fn network(&self) -> u32 {
        u32::from(self.addr) & self.mask()
    }

    /// Is `ip` inside the prefix? Never panics, even on an unchecked literal.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == self.network()
    }

    /// `len ≤ 32` and no host bit set.
    pub fn validate(&self) -> Result<(), PrefixError> {
        if self.len > 32 {
            return Err(PrefixError::BadLength {
                input: format!("{}/{}", self.addr, self.len),
                len: self.len.to_string(),
            });
        }
        if u32::from(self.addr) & !self.mask() != 0 {
            return Err(PrefixError::HostBitsSet {
                input: self.to_string(),
                suggestion: Prefix::truncating(self.addr, self.len),
            });
        }
        Ok(())
    }
}

fn mask(len: u8) -> u32 {
    match len {
        0 => 0,
        1..=31 => u32::MAX << (32 - u32::from(len)),
        _ => u32::MAX,
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = PrefixError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let input = s.trim();
        if input.is_empty() {
            return Err(PrefixError::Empty {
                input: s.to_string(),
            });
        }
        let (addr_str, len_str) = match input.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (input, None),
        };
        let addr: Ipv4Addr = addr_str.parse().map_err(|_| PrefixError::BadAddress {
            input: input.to_string(),
            addr: addr_str.to_string(),
        })?;
        let len = match len_str {
            None => 32,
            Some(l) => match l.parse::<u8>() {
                // Digits only: `u8::from_str` would also take "+24".
                Ok(len) if len <= 32 && l.bytes().all(|c| c.is_ascii_digit()) => len,
                _ => {
                    return Err(PrefixError::BadLength {
                        input: input.to_string(),
                        len: l.to_string(),
                    })
                }
            },
        };
        let prefix = Prefix { addr, len };
        if u32::from(addr) & !prefix.mask() != 0 {
            return Err(PrefixError::HostBitsSet {
                input: input.to_string(),
                suggestion: Prefix::truncating(addr, len),
            });
        }
        Ok(prefix)
    }
}

/// Serialized as the display string, so configs read `prefix = "10.0.1.0/24"`.
impl Serialize for Prefix {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Prefix {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn p(s: &str) -> Prefix {
        s.parse().unwrap()
    }

    #[test]
    fn parse_and_display() {
        assert_eq!(
            p("10.0.1.0/24"),
            Prefix {
                addr: Ipv4Addr::new(10, 0, 1, 0),
                len: 24
            }
        );
        assert_eq!(p("10.0.1.0/24").to_string(), "10.0.1.0/24");
        assert_eq!(p("0.0.0.0/0"), Prefix::ANY);
        assert_eq!(p("10.0.0.7").len, 32);
        assert_eq!(p(" 10.0.0.7/32 "), p("10.0.0.7"));
        assert_eq!(p("128.0.0.0/1").mask(), 0x8000_0000);
        assert_eq!(p("10.0.0.7").mask(), u32::MAX);
    }

    #[test]
    fn parse_errors_have_clear_messages() {
        let cases = [
            (
                "10.0.0.1/24",
                "10.0.0.1/24: host bits set; did you mean 10.0.0.0/24?",
            ),
            (
                "192.168.1.77/16",
                "192.168.1.77/16: host bits set; did you mean 192.168.0.0/16?",
            ),
            (
                "10.0.0.0/33",
                "10.0.0.0/33: bad prefix length \"33\" (expected 0 to 32)",
            ),
            (
                "10.0.0.0/",
                "10.0.0.0/: bad prefix length \"\" (expected 0 to 32)",
            ),
            (
                "10.0.0.0/+8",
                "10.0.0.0/+8: bad prefix length \"+8\" (expected 0 to 32)",
            ),
            (
                "10.0.300.0/24",
                "10.0.300.0/24: bad IPv4 address \"10.0.300.0\" (expected a prefix like 10.0.1.0/24)",
            ),
            (
                "fe80::/64",
                "fe80::/64: bad IPv4 address \"fe80::\" (expected a prefix like 10.0.1.0/24)",
            ),
            ("", "\"\": expected an IPv4 prefix like 10.0.1.0/24"),
        ];
        for (input, message) in cases {
            let err = input.parse::<Prefix>().unwrap_err();
            assert_eq!(err.to_string(), message, "{input:?}");
        }
        assert_eq!(
            "10.0.0.1/24".parse::<Prefix>(),
            Err(PrefixError::HostBitsSet {
                input: "10.0.0.1/24".into(),
                suggestion: p("10.0.0.0/24")
            })
        );
    }

    #[test]
    fn new_and_validate_check_literals() {
        assert_eq!(
            Prefix::new(Ipv4Addr::new(10, 1, 0, 0), 16),
            Ok(p("10.1.0.0/16"))
        );
        assert_eq!(
            Prefix::new(Ipv4Addr::new(10, 1, 0, 1), 16)
                .unwrap_err()
                .to_string(),
            "10.1.0.1/16: host bits set; did you mean 10.1.0.0/16?"
        );
        let long = Prefix {
            addr: Ipv4Addr::new(10, 0, 0, 0),
            len: 40,
        };
        assert_eq!(
            long.validate().unwrap_err().to_string(),
            "10.0.0.0/40: bad prefix length \"40\" (expected 0 to 32)"
        );
        // contains never panics, even on a literal that validate refuses.
        assert!(long.contains(Ipv4Addr::new(10, 0, 0, 0)));
        assert!(!long.contains(Ipv4Addr::new(10, 0, 0, 1)));
    }

    #[test]
    fn contains() {
        let net = p("10.0.1.0/24");
        assert!(net.contains(Ipv4Addr::new(10, 0, 1, 0)));
        assert!(net.contains(Ipv4Addr::new(10, 0, 1, 255)));
        assert!(!net.contains(Ipv4Addr::new(10, 0, 2, 0)));
        assert!(!net.contains(Ipv4Addr::new(10, 0, 0, 255)));
        assert!(Prefix::ANY.contains(Ipv4Addr::new(255, 255, 255, 255)));
        assert!(p("10.0.0.7").contains(Ipv4Addr::new(10, 0, 0, 7)));
        assert!(!p("10.0.0.7").contains(Ipv4Addr::new(10, 0, 0, 6)));
    }

    #[test]
    fn serde_is_the_display_string() {
        assert_eq!(
            serde_json::to_string(&p("10.0.1.0/24")).unwrap(),
            "\"10.0.1.0/24\""
        );
        assert_eq!(
            serde_json::from_str::<Prefix>("\"10.0.1.0/24\"").unwrap(),
            p("10.0.1.0/24")
        );
        let err = serde_json::from_str::<Prefix>("\"10.0.1.1/24\"").unwrap_err();
        assert!(
            err.to_string()
                .contains("10.0.1.1/24: host bits set; did you mean 10.0.1.0/24?"),
            "{err}"
        );
        assert_eq!(serde_json::to_string(&PortId(3)).unwrap(), "3");
        assert_eq!(serde_json::from_str::<PortId>("3").unwrap(), PortId(3));
        assert_eq!(PortId(3).to_string(), "port 3");
    }

    proptest! {
        #[test]
        fn display_parse_round_trip(addr in any::<u32>(), len in 0u8..=32) {
            let prefix = Prefix::truncating(Ipv4Addr::from(addr), len);
            prop_assert_eq!(prefix.to_string().parse::<Prefix>(), Ok(prefix));
            prop_assert!(prefix.contains(Ipv4Addr::from(addr)));
        }

        #[test]
        fn parse_never_panics(s in "[0-9./ ]{0,24}|\\PC{0,24}") {
            if let Ok(prefix) = s.parse::<Prefix>() {
                prop_assert!(prefix.validate().is_ok());
            }
        }

        #[test]
        fn contains_matches_a_bitwise_model(addr in any::<u32>(), len in 0u8..=32, ip in any::<u32>()) {
            let prefix = Prefix::truncating(Ipv4Addr::from(addr), len);
            let same_top_bits = (0..u32::from(len)).all(|bit| {
                let b = 31 - bit;
                (addr >> b) & 1 == (ip >> b) & 1
            });
            prop_assert_eq!(prefix.contains(Ipv4Addr::from(ip)), same_top_bits);
        }
    }
}
