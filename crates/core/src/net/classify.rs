//! 5-tuple classification: how an edge router tells which reserved flow an
//! unmarked packet belongs to (time-driven forwarding). Rules are tried in order and the first
//! one that matches wins, like a firewall's rule list, so an operator can put a
//! narrow rule in front of a broad one.
//!
//! Rules that match exactly one 5-tuple (what the planner writes) are found through
//! a table ([`super::tuple_table`]); the others are scanned in order.

use std::fmt;
use std::net::Ipv4Addr;

use serde::de::{self, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use thiserror::Error;

use super::tuple_table::TupleTable;
use super::{Prefix, PrefixError};
use crate::wire::ipv4::{Ipv4Packet, PROTO_TCP, PROTO_UDP};

/// The fields a rule matches on. Ports are 0 for protocols without ports, for
/// non-first fragments and for a transport header cut short.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub proto: u8,
    pub src_port: u16,
    pub dst_port: u16,
}

impl FiveTuple {
    /// Read the tuple of a datagram; the ports of UDP and TCP come from the first
    /// four bytes of the payload. Never panics on a checked packet.
    pub fn from_ipv4<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> FiveTuple {
        let proto = packet.protocol();
        let (mut src_port, mut dst_port) = (0, 0);
        if (proto == PROTO_UDP || proto == PROTO_TCP) && packet.frag_offset() == 0 {
            if let Some(&[a, b, c, d]) = packet.payload().get(..4) {
                src_port = u16::from_be_bytes([a, b]);
                dst_port = u16::from_be_bytes([c, d]);
            }
        }
        FiveTuple {
            src: packet.src_addr(),
            dst: packet.dst_addr(),
            proto,
            src_port,
            dst_port,
        }
    }
}

/// Why a rule cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RuleError {
    #[error("{field}: port range {lo}..{hi} is empty (the first port must not exceed the second)")]
    EmptyPortRange {
        field: &'static str,
        lo: u16,
        hi: u16,
    },
    #[error("{field}: {source}")]
    BadPrefix {
        field: &'static str,
        source: PrefixError,
    },
    /// [`Classifier::try_new`]: which rule is wrong.
    #[error("rule {index} (flow {flow}): {source}")]
    InRule {
        index: usize,
        flow: u32,
        source: Box<RuleError>,
    },
}

/// One classification rule: every field that is present must match; an absent
/// field matches anything. Port ranges are inclusive, `[lo, hi]`; in a config a
/// single port may be written as a bare number.
///
/// ```toml
/// src = "10.0.1.0/24"
/// dst = "10.0.9.2"      # a host (/32)
/// proto = 17
/// dst_ports = [5000, 5009]
/// flow = 3
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<Prefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<Prefix>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<u8>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "port_range"
    )]
    pub src_ports: Option<(u16, u16)>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "port_range"
    )]
    pub dst_ports: Option<(u16, u16)>,
    pub flow: u32,
}

fn in_range(range: Option<(u16, u16)>, port: u16) -> bool {
    match range {
        None => true,
        Some((lo, hi)) => lo <= port && port <= hi,
    }
}

fn matches_prefix(prefix: Option<Prefix>, ip: Ipv4Addr) -> bool {
    match prefix {
        None => true,
        Some(p) => p.contains(ip),
    }
}

impl Rule {
    /// The one 5-tuple this rule matches, when it matches exactly one.
    fn exact_tuple(&self) -> Option<FiveTuple> {
        let host = |p: Option<Prefix>| p.filter(|p| p.len == 32).map(|p| p.addr);
        let single = |r: Option<(u16, u16)>| r.filter(|(a, b)| a == b).map(|(a, _)| a);
        Some(FiveTuple {
            src: host(self.src)?,
            dst: host(self.dst)?,
            proto: self.proto?,
            src_port: single(self.src_ports)?,
            dst_port: single(self.dst_ports)?,
        })
    }

    /// A rule that matches everything and puts it in `flow`.
    pub const fn any(flow: u32) -> Rule {
        Rule {
            src: None,
            dst: None,
            proto: None,
            src_ports: None,
            dst_ports: None,
            flow,
        }
    }

    /// Does the tuple satisfy every present field? (An empty port range matches
    /// nothing; [`Rule::validate`] reports it.)
    pub fn matches(&self, t: &FiveTuple) -> bool {
        matches_prefix(self.src, t.src)
            && matches_prefix(self.dst, t.dst)
            && self.proto.is_none_or(|p| p == t.proto)
            && in_range(self.src_ports, t.src_port)
            && in_range(self.dst_ports, t.dst_port)
    }

    /// Prefixes valid, port ranges not empty.
    pub fn validate(&self) -> Result<(), RuleError> {
        for (field, prefix) in [("src", self.src), ("dst", self.dst)] {
            if let Some(p) = prefix {
                p.validate()
                    .map_err(|source| RuleError::BadPrefix { field, source })?;
            }
        }
        for (field, range) in [("src_ports", self.src_ports), ("dst_ports", self.dst_ports)] {
            if let Some((lo, hi)) = range {
                if lo > hi {
                    return Err(RuleError::EmptyPortRange { field, lo, hi });
                }
            }
        }
        Ok(())
    }
}

/// `[lo, hi]` with `lo ≤ hi`, or a bare port. Refusing an empty range here puts the
/// error on the config line that wrote it.
fn port_range<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<(u16, u16)>, D::Error> {
    struct RangeVisitor;

    impl<'de> Visitor<'de> for RangeVisitor {
        type Value = (u16, u16);

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a port or an inclusive port range [first, last]")
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<(u16, u16), E> {
            let port = u16::try_from(v)
                .map_err(|_| E::custom(format!("port {v} is out of range (0 to 65535)")))?;
            Ok((port, port))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<(u16, u16), E> {
            match u64::try_from(v) {
                Ok(v) => self.visit_u64(v),
                Err(_) => Err(E::custom(format!("port {v} is out of range (0 to 65535)"))),
            }
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(u16, u16), A::Error> {
            let lo: u16 = seq
                .next_element()?
                .ok_or_else(|| de::Error::invalid_length(0, &self))?;
            let hi: u16 = seq
                .next_element()?
                .ok_or_else(|| de::Error::invalid_length(1, &self))?;
            if seq.next_element::<de::IgnoredAny>()?.is_some() {
                return Err(de::Error::invalid_length(3, &self));
            }
            if lo > hi {
                return Err(de::Error::custom(format!(
                    "port range [{lo}, {hi}] is empty (the first port must not exceed the second)"
                )));
            }
            Ok((lo, hi))
        }
    }

    deserializer.deserialize_any(RangeVisitor).map(Some)
}

/// An ordered rule list; the first matching rule gives the flow. Rules that match
/// exactly one 5-tuple (host addresses, a protocol, single ports — what the lab's
/// planner writes) are also kept in a hash map, so a router with many flows finds
/// one in constant time; the others are scanned in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Classifier {
    rules: Vec<Rule>,
    /// Exact rules: tuple → index of the first such rule (looked up for every
    /// packet).
    exact: TupleTable,
    /// Indices of the rules that are not exact, in order.
    others: Vec<usize>,
}

impl Classifier {
    /// Take the rules as they are (an invalid rule simply never matches what it
    /// cannot express; [`Classifier::try_new`] refuses it instead).
    pub fn new(rules: Vec<Rule>) -> Classifier {
        let mut exact = Vec::new();
        let mut others = Vec::new();
        for (i, r) in rules.iter().enumerate() {
            // (an index beyond the table's reach is scanned like a wider rule)
            match r.exact_tuple() {
                Some(t) if i <= TupleTable::MAX_RULE => exact.push((t, i as u32)),
                _ => others.push(i),
            }
        }
        Classifier {
            rules,
            exact: TupleTable::new(exact),
            others,
        }
    }

    /// Like [`Classifier::new`], after [`Rule::validate`] on every rule.
    pub fn try_new(rules: Vec<Rule>) -> Result<Classifier, RuleError> {
        for (index, rule) in rules.iter().enumerate() {
            rule.validate().map_err(|source| RuleError::InRule {
                index,
                flow: rule.flow,
                source: Box::new(source),
            })?;
        }
        Ok(Classifier::new(rules))
    }

    /// The flow of the first rule that matches, if any.
    pub fn classify(&self, tuple: &FiveTuple) -> Option<u32> {
        self.first_match(tuple).map(|i| self.rules[i].flow)
    }

    /// The index (in [`Classifier::rules`]) of the first rule that matches, if any.
    pub fn first_match(&self, tuple: &FiveTuple) -> Option<usize> {
        let hit = self.exact.get(tuple);
        let limit = hit.unwrap_or(usize::MAX);
        self.others
            .iter()
            .copied()
            .take_while(|&i| i < limit)
            .find(|&i| self.rules[i].matches(tuple))
            .or(hit)
    }

    /// Asks for the memory [`Classifier::first_match`] of `tuple` reads first (a
    /// hint: nothing changes).
    #[inline]
    pub fn prefetch(&self, tuple: &FiveTuple) {
        self.exact.prefetch(tuple);
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ipv4::{Ipv4Repr, PROTO_ICMP};
    use proptest::prelude::*;

    #[test]
    fn exact_rules_keep_first_match_order() {
        let exact = |flow, sp| Rule {
            src: prefix("10.0.0.1/32"),
            dst: prefix("10.0.0.2/32"),
            proto: Some(PROTO_UDP),
            src_ports: Some((sp, sp)),
            dst_ports: Some((5000, 5000)),
            flow,
        };
        let wide = Rule {
            src: prefix("10.0.0.0/24"),
            dst: None,
            proto: None,
            src_ports: None,
            dst_ports: None,
            flow: 9,
        };
        let t = tuple([10, 0, 0, 1], [10, 0, 0, 2], PROTO_UDP, 6000, 5000);
        // the exact rule comes first: it wins; behind a wider rule it loses
        let c = Classifier::new(vec![exact(1, 6000), wide, exact(2, 6000)]);
        assert_eq!(c.classify(&t), Some(1));
        let c = Classifier::new(vec![wide, exact(1, 6000)]);
        assert_eq!(c.classify(&t), Some(9));
        let c = Classifier::new(vec![exact(1, 6001), exact(3, 6000)]);
        assert_eq!(c.classify(&t), Some(3));
        assert_eq!(
            c.classify(&tuple([10, 0, 0, 1], [10, 0, 0, 3], PROTO_UDP, 6000, 5000)),
            None
        );
    }

    fn tuple(src: [u8; 4], dst: [u8; 4], proto: u8, sp: u16, dp: u16) -> FiveTuple {
        FiveTuple {
            src: Ipv4Addr::from(src),
            dst: Ipv4Addr::from(dst),
            proto,
            src_port: sp,
            dst_port: dp,
        }
    }

    fn prefix(s: &str) -> Option<Prefix> {
        Some(s.parse().unwrap())
    }

    fn packet(proto: u8, payload: &[u8]) -> Vec<u8> {
        let repr = Ipv4Repr {
            src: Ipv4Addr::new(10, 0, 1, 2),
            dst: Ipv4Addr::new(10, 0, 9, 2),
            protocol: proto,
            dscp: 0,
            ecn: 0,
            ttl: 64,
            payload_len: payload.len(),
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        buf[20..].copy_from_slice(payload);
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]))
            .unwrap();
        buf
    }

    #[test]
    fn five_tuple_from_udp_tcp_and_others() {
        let udp = packet(PROTO_UDP, &[0x13, 0x88, 0x00, 0x09, 0, 8, 0, 0]);
        let t = FiveTuple::from_ipv4(&Ipv4Packet::new_checked(&udp[..]).unwrap());
        assert_eq!(t, tuple([10, 0, 1, 2], [10, 0, 9, 2], PROTO_UDP, 5000, 9));
        let tcp = packet(PROTO_TCP, &[0x00, 0x50, 0xc0, 0x00]);
        let t = FiveTuple::from_ipv4(&Ipv4Packet::new_checked(&tcp[..]).unwrap());
        assert_eq!((t.proto, t.src_port, t.dst_port), (PROTO_TCP, 80, 0xc000));
        let icmp = packet(PROTO_ICMP, &[8, 0, 0xf7, 0xff]);
        let t = FiveTuple::from_ipv4(&Ipv4Packet::new_checked(&icmp[..]).unwrap());
        assert_eq!((t.src_port, t.dst_port), (0, 0));
        let cut = packet(PROTO_UDP, &[0x13, 0x88, 0x00]);
        let t = FiveTuple::from_ipv4(&Ipv4Packet::new_checked(&cut[..]).unwrap());
        assert_eq!((t.src_port, t.dst_port), (0, 0));
        let mut fragment = packet(PROTO_UDP, &[0x13, 0x88, 0x00, 0x09]);
        Ipv4Packet::new_unchecked(&mut fragment[..]).set_frag_offset(1480);
        let t = FiveTuple::from_ipv4(&Ipv4Packet::new_checked(&fragment[..]).unwrap());
        assert_eq!((t.src_port, t.dst_port), (0, 0));
    }

    #[test]
    fn first_match_wins() {
        let classifier = Classifier::new(vec![
            // Narrow: one port of one host.
            Rule {
                dst: prefix("10.0.9.2/32"),
                proto: Some(PROTO_UDP),
                dst_ports: Some((5000, 5000)),
                ..Rule::any(1)
            },
            // Broad: the whole subnet, UDP.
            Rule {
                dst: prefix("10.0.9.0/24"),
                proto: Some(PROTO_UDP),
                ..Rule::any(2)
            },
            // Shadowed by rule 1 for UDP; catches TCP to the same port.
            Rule {
                dst_ports: Some((5000, 5000)),
                ..Rule::any(3)
            },
            Rule {
                src: prefix("10.0.1.0/24"),
                src_ports: Some((6000, 6999)),
                ..Rule::any(4)
            },
        ]);
        let c = |t| classifier.classify(&t);
        assert_eq!(c(tuple([10, 0, 1, 2], [10, 0, 9, 2], 17, 1, 5000)), Some(1));
        assert_eq!(c(tuple([10, 0, 1, 2], [10, 0, 9, 3], 17, 1, 5000)), Some(2));
        assert_eq!(c(tuple([10, 0, 1, 2], [10, 0, 9, 2], 17, 1, 5001)), Some(2));
        assert_eq!(c(tuple([10, 0, 1, 2], [10, 0, 9, 2], 6, 1, 5000)), Some(3));
        assert_eq!(c(tuple([10, 0, 1, 2], [10, 0, 8, 1], 6, 6000, 1)), Some(4));
        assert_eq!(c(tuple([10, 0, 1, 2], [10, 0, 8, 1], 6, 6999, 1)), Some(4));
        assert_eq!(c(tuple([10, 0, 1, 2], [10, 0, 8, 1], 6, 7000, 1)), None);
        assert_eq!(c(tuple([10, 0, 2, 2], [10, 0, 8, 1], 6, 6000, 1)), None);
        assert_eq!(
            Classifier::default().classify(&tuple([0; 4], [0; 4], 0, 0, 0)),
            None
        );
        assert_eq!(classifier.rules().len(), 4);
    }

    #[test]
    fn validation() {
        let empty = Rule {
            dst_ports: Some((10, 9)),
            ..Rule::any(7)
        };
        assert_eq!(
            empty.validate().unwrap_err().to_string(),
            "dst_ports: port range 10..9 is empty (the first port must not exceed the second)"
        );
        assert!(!empty.matches(&tuple([0; 4], [0; 4], 17, 9, 9)));
        let host_bits = Rule {
            src: Some(Prefix {
                addr: Ipv4Addr::new(10, 0, 0, 1),
                len: 8,
            }),
            ..Rule::any(7)
        };
        assert_eq!(
            host_bits.validate().unwrap_err().to_string(),
            "src: 10.0.0.1/8: host bits set; did you mean 10.0.0.0/8?"
        );
        let err = Classifier::try_new(vec![Rule::any(1), empty]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "rule 1 (flow 7): dst_ports: port range 10..9 is empty (the first port must not exceed the second)"
        );
        assert!(Classifier::try_new(vec![Rule::any(1)]).is_ok());
    }

    #[test]
    fn serde_form() {
        let json = r#"{"src":"10.0.1.0/24","dst":"10.0.9.2","proto":17,"dst_ports":[5000,5009],"src_ports":7,"flow":3}"#;
        let rule: Rule = serde_json::from_str(json).unwrap();
        assert_eq!(
            rule,
            Rule {
                src: prefix("10.0.1.0/24"),
                dst: prefix("10.0.9.2/32"),
                proto: Some(17),
                src_ports: Some((7, 7)),
                dst_ports: Some((5000, 5009)),
                flow: 3,
            }
        );
        let back: Rule = serde_json::from_str(&serde_json::to_string(&rule).unwrap()).unwrap();
        assert_eq!(back, rule);
        assert_eq!(
            serde_json::from_str::<Rule>(r#"{"flow":1}"#).unwrap(),
            Rule::any(1)
        );
        for (bad, needle) in [
            (
                r#"{"dst_ports":[10,9],"flow":1}"#,
                "port range [10, 9] is empty",
            ),
            (r#"{"dst_ports":[1,2,3],"flow":1}"#, "invalid length 3"),
            (r#"{"dst_ports":[1],"flow":1}"#, "invalid length 1"),
            (
                r#"{"dst_ports":70000,"flow":1}"#,
                "port 70000 is out of range",
            ),
            (r#"{"dst_ports":-1,"flow":1}"#, "port -1 is out of range"),
            (
                r#"{"dst":"10.0.9.1/24","flow":1}"#,
                "did you mean 10.0.9.0/24?",
            ),
            (r#"{"dport":5000,"flow":1}"#, "unknown field `dport`"),
            (r#"{"proto":17}"#, "missing field `flow`"),
        ] {
            let err = serde_json::from_str::<Rule>(bad).unwrap_err().to_string();
            assert!(err.contains(needle), "{bad}: {err}");
        }
    }

    fn arb_rule() -> impl Strategy<Value = Rule> {
        let prefix = (0u32..4, 0u8..=32).prop_map(|(a, len)| {
            Prefix::truncating(Ipv4Addr::from(0x0a00_0000 | (a << 6)), len.min(32))
        });
        let range = (0u16..8, 0u16..8).prop_map(|(a, b)| (a.min(b), a.max(b)));
        (
            prop::option::of(prefix.clone()),
            prop::option::of(prefix),
            prop::option::of(prop_oneof![Just(PROTO_UDP), Just(PROTO_TCP)]),
            prop::option::of(range.clone()),
            prop::option::of(range),
            0u32..100,
        )
            .prop_map(|(src, dst, proto, src_ports, dst_ports, flow)| Rule {
                src,
                dst,
                proto,
                src_ports,
                dst_ports,
                flow,
            })
    }

    proptest! {
        #[test]
        fn classify_is_the_first_matching_rule(
            rules in prop::collection::vec(arb_rule(), 0..12),
            probes in prop::collection::vec((0u32..256, 0u32..256, prop_oneof![Just(PROTO_UDP), Just(PROTO_TCP)], 0u16..8, 0u16..8), 1..30),
        ) {
            let classifier = Classifier::try_new(rules.clone()).unwrap();
            for (s, d, proto, sp, dp) in probes {
                let t = FiveTuple {
                    src: Ipv4Addr::from(0x0a00_0000 | s),
                    dst: Ipv4Addr::from(0x0a00_0000 | d),
                    proto,
                    src_port: sp,
                    dst_port: dp,
                };
                // Model: field-by-field, written out independently of `matches`.
                let model = rules.iter().find(|r| {
                    r.src.is_none_or(|p| u32::from(t.src) & p.mask() == u32::from(p.addr))
                        && r.dst.is_none_or(|p| u32::from(t.dst) & p.mask() == u32::from(p.addr))
                        && r.proto.is_none_or(|p| p == t.proto)
                        && r.src_ports.is_none_or(|(lo, hi)| (lo..=hi).contains(&t.src_port))
                        && r.dst_ports.is_none_or(|(lo, hi)| (lo..=hi).contains(&t.dst_port))
                }).map(|r| r.flow);
                prop_assert_eq!(classifier.classify(&t), model);
            }
        }

        #[test]
        fn from_ipv4_never_panics(data in prop::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(p) = Ipv4Packet::new_checked(&data[..]) {
                let _ = FiveTuple::from_ipv4(&p);
            }
        }
    }
}
