//! Ethernet II frames (no 802.1Q tag, no FCS: what an `AF_PACKET` socket hands
//! over and takes).
//!
//! | offset | size | field     |
//! |-------:|-----:|-----------|
//! | 0      | 6    | dst_addr  |
//! | 6      | 6    | src_addr  |
//! | 12     | 2    | ethertype |
//! | 14     | …    | payload   |
//!
//! The payload is everything after the header: a short frame padded to the 60-byte
//! Ethernet minimum keeps its padding here, and the IPv4 total length says where
//! the datagram really ends.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = 14;

/// EtherType values this crate deals with (a namespace for `u16` constants, so that
/// `frame.ethertype() == EtherType::IPV4` reads naturally and unknown values need no
/// catch-all variant).
#[derive(Debug)]
pub enum EtherType {}

impl EtherType {
    pub const IPV4: u16 = 0x0800;
    pub const ARP: u16 = 0x0806;
    /// An 802.1Q tag: not parsed by this crate, the frame is not plain IPv4.
    pub const VLAN: u16 = 0x8100;
    pub const IPV6: u16 = 0x86dd;
}

/// Why bytes are not an Ethernet frame, or a MAC address string does not parse.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EthernetError {
    #[error("truncated Ethernet frame: needed {HEADER_LEN} bytes, got {got}")]
    Truncated { got: usize },
    #[error("buffer too small for an Ethernet header: needed {HEADER_LEN} bytes, got {got}")]
    BufferTooSmall { got: usize },
    #[error("bad MAC address {input:?}: expected six hex bytes like 02:00:00:00:00:01")]
    BadAddress { input: String },
}

/// A MAC address. Displays as `02:00:5e:10:00:01`; parses from that form, with `-`
/// as separator too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    pub const BROADCAST: EthernetAddress = EthernetAddress([0xff; 6]);

    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// The group bit (I/G) of the first octet: broadcast and multicast.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Neither multicast nor broadcast.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// The locally administered bit (U/L) of the first octet, set in the addresses
    /// a lab makes up.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl FromStr for EthernetAddress {
    type Err = EthernetError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || EthernetError::BadAddress {
            input: s.to_string(),
        };
        let sep = if s.contains('-') { '-' } else { ':' };
        let mut out = [0u8; 6];
        let mut parts = s.split(sep);
        for slot in out.iter_mut() {
            let part = parts.next().ok_or_else(bad)?;
            if part.is_empty() || part.len() > 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            *slot = u8::from_str_radix(part, 16).map_err(|_| bad())?;
        }
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(EthernetAddress(out))
    }
}

/// Serialized as the display string, so configs read `mac = "02:00:00:00:00:01"`.
impl Serialize for EthernetAddress {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for EthernetAddress {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

mod field {
    use std::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
}

fn mac_at(data: &[u8], range: std::ops::Range<usize>) -> EthernetAddress {
    let mut mac = [0u8; 6];
    mac.copy_from_slice(&data[range]);
    EthernetAddress(mac)
}

/// A zero-copy view of an Ethernet II frame.
///
/// After [`EthernetFrame::new_checked`] no getter or setter panics.
/// [`EthernetFrame::new_unchecked`] is for buffers the caller sized itself; a field
/// beyond the buffer then panics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wrap a buffer that holds at least the header.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>, EthernetError> {
        let frame = EthernetFrame::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    pub fn check_len(&self) -> Result<(), EthernetError> {
        let got = self.buffer.as_ref().len();
        if got < HEADER_LEN {
            return Err(EthernetError::Truncated { got });
        }
        Ok(())
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The whole frame.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    pub fn dst_addr(&self) -> EthernetAddress {
        mac_at(self.buffer.as_ref(), field::DST)
    }

    pub fn src_addr(&self) -> EthernetAddress {
        mac_at(self.buffer.as_ref(), field::SRC)
    }

    pub fn ethertype(&self) -> u16 {
        let d = self.buffer.as_ref();
        u16::from_be_bytes([d[field::ETHERTYPE.start], d[field::ETHERTYPE.start + 1]])
    }

    /// Everything after the header (including any padding to the Ethernet minimum).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        self.buffer.as_mut()
    }

    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&addr.0);
    }

    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&addr.0);
    }

    pub fn set_ethertype(&mut self, value: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&value.to_be_bytes());
    }

    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// A parsed Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    pub src: EthernetAddress,
    pub dst: EthernetAddress,
    pub ethertype: u16,
}

impl EthernetRepr {
    /// Length of the header [`EthernetRepr::emit`] writes.
    pub const HEADER_LEN: usize = HEADER_LEN;

    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr, EthernetError> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src: frame.src_addr(),
            dst: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes of header: [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Write the header; the payload bytes are left alone. Fails on a buffer shorter
    /// than the header.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        frame: &mut EthernetFrame<T>,
    ) -> Result<(), EthernetError> {
        let got = frame.as_bytes().len();
        if got < HEADER_LEN {
            return Err(EthernetError::BufferTooSmall { got });
        }
        frame.set_dst_addr(self.dst);
        frame.set_src_addr(self.src);
        frame.set_ethertype(self.ethertype);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FRAME: [u8; 18] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef, // payload
    ];

    #[test]
    fn getters_read_the_documented_layout() {
        let f = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(f.dst_addr(), EthernetAddress([2, 0, 0, 0, 0, 2]));
        assert_eq!(f.src_addr(), EthernetAddress([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        let repr = EthernetRepr::parse(&f).unwrap();
        assert_eq!(
            repr,
            EthernetRepr {
                src: EthernetAddress([2, 0, 0, 0, 0, 1]),
                dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
                ethertype: 0x0800
            }
        );
    }

    #[test]
    fn emit_writes_the_header_and_leaves_the_payload() {
        let repr = EthernetRepr {
            src: EthernetAddress([2, 0, 0, 0, 0, 1]),
            dst: EthernetAddress([2, 0, 0, 0, 0, 2]),
            ethertype: EtherType::IPV4,
        };
        let mut buf = [0u8; 18];
        buf[14..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]))
            .unwrap();
        assert_eq!(buf, FRAME);
        let mut short = [0u8; 13];
        assert_eq!(
            repr.emit(&mut EthernetFrame::new_unchecked(&mut short[..])),
            Err(EthernetError::BufferTooSmall { got: 13 })
        );
    }

    #[test]
    fn setters_and_payload_mut() {
        let mut buf = FRAME;
        let mut f = EthernetFrame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(EthernetAddress::BROADCAST);
        f.set_src_addr(EthernetAddress([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]));
        f.set_ethertype(EtherType::ARP);
        f.payload_mut()[0] = 0x11;
        assert!(f.dst_addr().is_broadcast());
        assert_eq!(
            &f.as_bytes()[..15],
            &[
                0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x08, 0x06,
                0x11
            ]
        );
        let inner = f.into_inner();
        assert_eq!(inner.len(), 18);
    }

    #[test]
    fn every_truncation_is_rejected() {
        for n in 0..HEADER_LEN {
            assert_eq!(
                EthernetFrame::new_checked(&FRAME[..n]),
                Err(EthernetError::Truncated { got: n })
            );
        }
        let header_only = EthernetFrame::new_checked(&FRAME[..HEADER_LEN]).unwrap();
        assert_eq!(header_only.payload(), &[] as &[u8]);
    }

    #[test]
    fn address_display_and_parse() {
        let mac = EthernetAddress([0x02, 0x00, 0x5e, 0x10, 0xab, 0x01]);
        assert_eq!(mac.to_string(), "02:00:5e:10:ab:01");
        assert_eq!("02:00:5e:10:ab:01".parse::<EthernetAddress>(), Ok(mac));
        assert_eq!("02-00-5E-10-AB-01".parse::<EthernetAddress>(), Ok(mac));
        assert_eq!("2:0:5e:10:ab:1".parse::<EthernetAddress>(), Ok(mac));
        for bad in [
            "",
            "02:00:5e:10:ab",
            "02:00:5e:10:ab:01:02",
            "02:00:5e:10:ab:1g",
            "02:00:5e:10:ab:",
            "002:00:5e:10:ab:01",
            "02:00-5e:10:ab:01",
            "+2:00:5e:10:ab:01",
        ] {
            assert_eq!(
                bad.parse::<EthernetAddress>(),
                Err(EthernetError::BadAddress {
                    input: bad.to_string()
                }),
                "{bad:?}"
            );
        }
        assert_eq!(
            "zz".parse::<EthernetAddress>().unwrap_err().to_string(),
            "bad MAC address \"zz\": expected six hex bytes like 02:00:00:00:00:01"
        );
    }

    #[test]
    fn address_classes() {
        assert!(EthernetAddress::BROADCAST.is_multicast());
        assert!(EthernetAddress([0x01, 0, 0x5e, 0, 0, 1]).is_multicast());
        assert!(EthernetAddress([0x02, 0, 0, 0, 0, 1]).is_unicast());
        assert!(EthernetAddress([0x02, 0, 0, 0, 0, 1]).is_local());
        assert!(!EthernetAddress([0x00, 0x1b, 0x21, 0, 0, 1]).is_local());
    }

    #[test]
    fn address_serde_is_the_display_string() {
        let mac = EthernetAddress([2, 0, 0, 0, 0, 0x1f]);
        let json = serde_json::to_string(&mac).unwrap();
        assert_eq!(json, "\"02:00:00:00:00:1f\"");
        assert_eq!(serde_json::from_str::<EthernetAddress>(&json).unwrap(), mac);
        let err = serde_json::from_str::<EthernetAddress>("\"02:00\"").unwrap_err();
        assert!(
            err.to_string().contains("bad MAC address \"02:00\""),
            "{err}"
        );
    }

    proptest! {
        #[test]
        fn repr_round_trips(src in any::<[u8; 6]>(), dst in any::<[u8; 6]>(), ethertype in any::<u16>(),
                            payload in prop::collection::vec(any::<u8>(), 0..64)) {
            let repr = EthernetRepr { src: EthernetAddress(src), dst: EthernetAddress(dst), ethertype };
            let mut buf = vec![0u8; HEADER_LEN + payload.len()];
            buf[HEADER_LEN..].copy_from_slice(&payload);
            repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..])).unwrap();
            let f = EthernetFrame::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(EthernetRepr::parse(&f).unwrap(), repr);
            prop_assert_eq!(f.payload(), &payload[..]);
        }

        #[test]
        fn address_string_round_trips(mac in any::<[u8; 6]>()) {
            let mac = EthernetAddress(mac);
            prop_assert_eq!(mac.to_string().parse::<EthernetAddress>(), Ok(mac));
        }

        #[test]
        fn address_parse_never_panics(s in "[0-9a-fA-F:\\-]{0,20}|\\PC{0,20}") {
            let _ = s.parse::<EthernetAddress>();
        }

        #[test]
        fn fuzz_smoke_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(f) = EthernetFrame::new_checked(&data[..]) {
                let _ = (f.dst_addr(), f.src_addr(), f.ethertype(), f.payload());
                prop_assert!(EthernetRepr::parse(&f).is_ok());
            } else {
                prop_assert!(data.len() < HEADER_LEN);
            }
        }
    }
}
