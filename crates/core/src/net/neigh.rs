//! The static neighbour table: the MAC address of each IPv4 neighbour, from the
//! node config. A lockstep router never sends ARP: a lab knows every address up
//! front, and an ARP exchange in the middle of a measurement would be noise.
//!
//! Kept as a sorted array: a lookup is a binary search, without allocation.

use std::net::Ipv4Addr;

use thiserror::Error;

use crate::wire::ethernet::EthernetAddress;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NeighbourError {
    /// The address is already mapped to another MAC.
    #[error("neighbour {ip} is given two MAC addresses: {existing} and {new}")]
    Conflict {
        ip: Ipv4Addr,
        existing: EthernetAddress,
        new: EthernetAddress,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NeighbourTable {
    /// Sorted by address, one entry per address.
    entries: Vec<(Ipv4Addr, EthernetAddress)>,
}

impl NeighbourTable {
    pub fn new() -> NeighbourTable {
        NeighbourTable::default()
    }

    /// Map `ip` to `mac`, replacing an earlier mapping; returns the MAC it replaced
    /// (like a map's `insert`). Use [`NeighbourTable::try_add`] to refuse a
    /// conflicting MAC instead.
    pub fn add(&mut self, ip: Ipv4Addr, mac: EthernetAddress) -> Option<EthernetAddress> {
        match self.entries.binary_search_by_key(&ip, |&(a, _)| a) {
            Ok(i) => Some(std::mem::replace(&mut self.entries[i].1, mac)),
            Err(i) => {
                self.entries.insert(i, (ip, mac));
                None
            }
        }
    }

    /// Map `ip` to `mac` unless it is already mapped to another MAC
    /// ([`NeighbourError::Conflict`], table unchanged). Adding the same pair twice is
    /// fine.
    pub fn try_add(&mut self, ip: Ipv4Addr, mac: EthernetAddress) -> Result<(), NeighbourError> {
        match self.lookup(ip) {
            Some(existing) if existing != mac => Err(NeighbourError::Conflict {
                ip,
                existing,
                new: mac,
            }),
            _ => {
                self.add(ip, mac);
                Ok(())
            }
        }
    }

    /// The MAC address of `ip`, if known.
    pub fn lookup(&self, ip: Ipv4Addr) -> Option<EthernetAddress> {
        self.entries
            .binary_search_by_key(&ip, |&(a, _)| a)
            .ok()
            .map(|i| self.entries[i].1)
    }

    /// Every entry, by address.
    pub fn iter(&self) -> impl Iterator<Item = (Ipv4Addr, EthernetAddress)> + '_ {
        self.entries.iter().copied()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn mac(last: u8) -> EthernetAddress {
        EthernetAddress([2, 0, 0, 0, 0, last])
    }

    #[test]
    fn add_and_lookup() {
        let mut t = NeighbourTable::new();
        assert!(t.is_empty());
        assert_eq!(t.add(Ipv4Addr::new(10, 0, 0, 2), mac(2)), None);
        assert_eq!(t.add(Ipv4Addr::new(10, 0, 0, 1), mac(7)), None);
        assert_eq!(t.add(Ipv4Addr::new(10, 0, 0, 1), mac(1)), Some(mac(7)));
        t.try_add(Ipv4Addr::new(10, 0, 0, 1), mac(1)).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t.lookup(Ipv4Addr::new(10, 0, 0, 1)), Some(mac(1)));
        assert_eq!(t.lookup(Ipv4Addr::new(10, 0, 0, 2)), Some(mac(2)));
        assert_eq!(t.lookup(Ipv4Addr::new(10, 0, 0, 3)), None);
        let all: Vec<_> = t.iter().collect();
        assert_eq!(
            all,
            [
                (Ipv4Addr::new(10, 0, 0, 1), mac(1)),
                (Ipv4Addr::new(10, 0, 0, 2), mac(2))
            ]
        );
    }

    #[test]
    fn conflicting_mac_is_an_error() {
        let mut t = NeighbourTable::new();
        t.try_add(Ipv4Addr::new(10, 0, 0, 1), mac(1)).unwrap();
        let err = t.try_add(Ipv4Addr::new(10, 0, 0, 1), mac(9)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "neighbour 10.0.0.1 is given two MAC addresses: 02:00:00:00:00:01 and 02:00:00:00:00:09"
        );
        assert_eq!(t.lookup(Ipv4Addr::new(10, 0, 0, 1)), Some(mac(1)));
    }

    proptest! {
        #[test]
        fn behaves_like_a_map(ops in prop::collection::vec((0u32..64, any::<u8>(), any::<bool>()), 0..80),
                              probes in prop::collection::vec(0u32..80, 0..40)) {
            let mut t = NeighbourTable::new();
            let mut model: BTreeMap<Ipv4Addr, EthernetAddress> = BTreeMap::new();
            for (a, m, strict) in ops {
                let ip = Ipv4Addr::from(0x0a00_0000 | a);
                if strict {
                    let result = t.try_add(ip, mac(m));
                    match model.get(&ip) {
                        Some(&existing) if existing != mac(m) => prop_assert!(result.is_err()),
                        _ => {
                            prop_assert!(result.is_ok());
                            model.insert(ip, mac(m));
                        }
                    }
                } else {
                    prop_assert_eq!(t.add(ip, mac(m)), model.insert(ip, mac(m)));
                }
            }
            prop_assert_eq!(t.len(), model.len());
            for a in probes {
                let ip = Ipv4Addr::from(0x0a00_0000 | a);
                prop_assert_eq!(t.lookup(ip), model.get(&ip).copied());
            }
        }
    }
}
