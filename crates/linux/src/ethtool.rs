//! Interface offloads and interrupt coalescing through the `SIOCETHTOOL` ioctl, so no
//! `ethtool` binary is needed.
//!
//! Why the lab turns offloads off: with transmit checksum offload on, a veth hands
//! frames over with the UDP checksum unfinished (`CHECKSUM_PARTIAL`, which an
//! `AF_PACKET` reader sees as [`crate::packet::FrameMeta::csum_not_ready`]), and with
//! segmentation/receive offloads on, the stack may hand a router one 64 KB "frame"
//! where the wire would carry 45. A user-space router must see, and send, what a real
//! link carries. Coalescing (host tuning) delays receive interrupts by up to `rx-usecs`,
//! which adds straight to `L_Rx`; virtual devices such as veth have none and report
//! [`EthtoolError::Unsupported`].
//!
//! The legacy per-feature commands (`ETHTOOL_S{TX,RX}CSUM`, `SGSO`, `SGRO`, `STSO`)
//! are used: every kernel still maps them onto its feature bits, and they need no
//! feature-name table. A feature a driver cannot change is detected by reading back.

use std::io;
use std::os::fd::AsRawFd;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::iface::{ifreq_for, ioctl_socket, valid_ifname};
use crate::sys::last_error;

// Command numbers from <linux/ethtool.h>.
const ETHTOOL_GCOALESCE: u32 = 0x0e;
const ETHTOOL_SCOALESCE: u32 = 0x0f;
const ETHTOOL_GRXCSUM: u32 = 0x14;
const ETHTOOL_SRXCSUM: u32 = 0x15;
const ETHTOOL_GTXCSUM: u32 = 0x16;
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_GTSO: u32 = 0x1e;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_GGSO: u32 = 0x23;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_GGRO: u32 = 0x2b;
const ETHTOOL_SGRO: u32 = 0x2c;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// Why an ethtool operation failed.
#[derive(Debug, Error)]
pub enum EthtoolError {
    #[error("invalid interface name \"{0}\"")]
    InvalidName(String),
    #[error("no interface \"{0}\" in this network namespace")]
    NotFound(String),
    #[error("{ifname} does not support {what}")]
    Unsupported { ifname: String, what: &'static str },
    #[error("{ifname}: the driver keeps {feature} {} (a fixed feature)", if *.wanted { "off" } else { "on" })]
    NotChangeable {
        ifname: String,
        feature: &'static str,
        wanted: bool,
    },
    #[error("{what} on {ifname}: permission denied (needs CAP_NET_ADMIN: run as root)")]
    Denied { ifname: String, what: &'static str },
    #[error("{what} on {ifname}: {source}")]
    Io {
        ifname: String,
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

impl EthtoolError {
    /// The driver lacks the operation (veth has no interrupt coalescing, for example).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, EthtoolError::Unsupported { .. })
    }

    pub fn is_permission(&self) -> bool {
        matches!(self, EthtoolError::Denied { .. })
    }
}

/// Issues `SIOCETHTOOL` with `data` (a `struct ethtool_*` starting with `cmd`).
fn ethtool_ioctl<T>(ifname: &str, what: &'static str, data: &mut T) -> Result<(), EthtoolError> {
    if !valid_ifname(ifname) {
        return Err(EthtoolError::InvalidName(ifname.to_string()));
    }
    let sock = ioctl_socket().map_err(|source| EthtoolError::Io {
        ifname: ifname.to_string(),
        what: "socket",
        source,
    })?;
    let mut ifr = ifreq_for(ifname);
    ifr.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: `ifr` names the interface and points at `data`, a live, writable
    // ethtool structure of the layout the command in its first word expects.
    let rc = unsafe {
        libc::ioctl(
            sock.as_raw_fd(),
            libc::SIOCETHTOOL as _,
            &mut ifr as *mut libc::ifreq,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let e = last_error();
    let ifname = ifname.to_string();
    Err(match e.raw_os_error() {
        Some(libc::ENODEV) => EthtoolError::NotFound(ifname),
        Some(libc::EOPNOTSUPP) => EthtoolError::Unsupported { ifname, what },
        Some(libc::EPERM) | Some(libc::EACCES) => EthtoolError::Denied { ifname, what },
        _ => EthtoolError::Io {
            ifname,
            what,
            source: e,
        },
    })
}

/// `struct ethtool_value`.
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

fn get_value(ifname: &str, cmd: u32, what: &'static str) -> Result<bool, EthtoolError> {
    let mut v = EthtoolValue { cmd, data: 0 };
    ethtool_ioctl(ifname, what, &mut v)?;
    Ok(v.data != 0)
}

fn set_value(ifname: &str, cmd: u32, what: &'static str, on: bool) -> Result<(), EthtoolError> {
    let mut v = EthtoolValue {
        cmd,
        data: u32::from(on),
    };
    ethtool_ioctl(ifname, what, &mut v)
}

/// The offloads that change what a packet socket sees or sends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offloads {
    /// Transmit checksum offload (`tx-checksumming`).
    pub tx_csum: bool,
    /// Receive checksum offload (`rx-checksumming`).
    pub rx_csum: bool,
    /// Generic segmentation offload (`generic-segmentation-offload`).
    pub gso: bool,
    /// Generic receive offload (`generic-receive-offload`).
    pub gro: bool,
    /// TCP segmentation offload (`tcp-segmentation-offload`).
    pub tso: bool,
}

impl Offloads {
    /// What the lab wants on every link: every frame as on the wire.
    pub const ALL_OFF: Offloads = Offloads {
        tx_csum: false,
        rx_csum: false,
        gso: false,
        gro: false,
        tso: false,
    };
}

/// `struct ethtool_channels`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// How many receive queues the interface uses (`ETHTOOL_GCHANNELS`: receive-only plus
/// combined channels; at least 1). A driver without channels reports
/// [`EthtoolError::Unsupported`].
pub fn rx_queues(ifname: &str) -> Result<u32, EthtoolError> {
    let mut c = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..EthtoolChannels::default()
    };
    ethtool_ioctl(ifname, "ETHTOOL_GCHANNELS", &mut c)?;
    Ok(c.rx_count.saturating_add(c.combined_count).max(1))
}

/// The interface's current offload settings.
pub fn get_offloads(ifname: &str) -> Result<Offloads, EthtoolError> {
    Ok(Offloads {
        tx_csum: get_value(ifname, ETHTOOL_GTXCSUM, "ETHTOOL_GTXCSUM")?,
        rx_csum: get_value(ifname, ETHTOOL_GRXCSUM, "ETHTOOL_GRXCSUM")?,
        gso: get_value(ifname, ETHTOOL_GGSO, "ETHTOOL_GGSO")?,
        gro: get_value(ifname, ETHTOOL_GGRO, "ETHTOOL_GGRO")?,
        tso: get_value(ifname, ETHTOOL_GTSO, "ETHTOOL_GTSO")?,
    })
}

/// Sets the offloads and returns what the interface reports afterwards. A feature the
/// driver does not let change is [`EthtoolError::NotChangeable`].
///
/// Order matters: TSO needs transmit checksumming, so checksumming is switched on
/// first and off last.
pub fn set_offloads(ifname: &str, want: Offloads) -> Result<Offloads, EthtoolError> {
    if want.tx_csum {
        set_value(ifname, ETHTOOL_STXCSUM, "ETHTOOL_STXCSUM", true)?;
    }
    set_value(ifname, ETHTOOL_STSO, "ETHTOOL_STSO", want.tso)?;
    set_value(ifname, ETHTOOL_SGSO, "ETHTOOL_SGSO", want.gso)?;
    set_value(ifname, ETHTOOL_SGRO, "ETHTOOL_SGRO", want.gro)?;
    set_value(ifname, ETHTOOL_SRXCSUM, "ETHTOOL_SRXCSUM", want.rx_csum)?;
    if !want.tx_csum {
        set_value(ifname, ETHTOOL_STXCSUM, "ETHTOOL_STXCSUM", false)?;
    }
    let got = get_offloads(ifname)?;
    for (feature, w, g) in [
        ("tx-checksumming", want.tx_csum, got.tx_csum),
        ("rx-checksumming", want.rx_csum, got.rx_csum),
        ("generic-segmentation-offload", want.gso, got.gso),
        ("generic-receive-offload", want.gro, got.gro),
        ("tcp-segmentation-offload", want.tso, got.tso),
    ] {
        if w != g {
            return Err(EthtoolError::NotChangeable {
                ifname: ifname.to_string(),
                feature,
                wanted: w,
            });
        }
    }
    Ok(got)
}

/// `struct ethtool_coalesce`: the command word and 22 `u32` fields.
const COALESCE_WORDS: usize = 23;
const RX_USECS: usize = 1;
const RX_MAX_FRAMES: usize = 2;
const TX_USECS: usize = 5;
const TX_MAX_FRAMES: usize = 6;
const ADAPTIVE_RX: usize = 10;
const ADAPTIVE_TX: usize = 11;

pub use lockstep_core::audit::Coalesce;

fn get_coalesce_raw(ifname: &str) -> Result<[u32; COALESCE_WORDS], EthtoolError> {
    let mut raw = [0u32; COALESCE_WORDS];
    raw[0] = ETHTOOL_GCOALESCE;
    ethtool_ioctl(ifname, "interrupt coalescing (ETHTOOL_GCOALESCE)", &mut raw)?;
    Ok(raw)
}

/// The interface's interrupt coalescing. Virtual interfaces (veth, loopback) have none:
/// [`EthtoolError::Unsupported`].
pub fn get_coalesce(ifname: &str) -> Result<Coalesce, EthtoolError> {
    let raw = get_coalesce_raw(ifname)?;
    Ok(Coalesce {
        rx_usecs: raw[RX_USECS],
        rx_max_frames: raw[RX_MAX_FRAMES],
        tx_usecs: raw[TX_USECS],
        tx_max_frames: raw[TX_MAX_FRAMES],
        adaptive_rx: raw[ADAPTIVE_RX] != 0,
        adaptive_tx: raw[ADAPTIVE_TX] != 0,
    })
}

/// Sets these coalescing fields (the driver's other ones are kept) and returns what
/// the driver reports afterwards; drivers round or refuse values they cannot do.
pub fn set_coalesce(ifname: &str, c: Coalesce) -> Result<Coalesce, EthtoolError> {
    let mut raw = get_coalesce_raw(ifname)?;
    raw[0] = ETHTOOL_SCOALESCE;
    raw[RX_USECS] = c.rx_usecs;
    raw[RX_MAX_FRAMES] = c.rx_max_frames;
    raw[TX_USECS] = c.tx_usecs;
    raw[TX_MAX_FRAMES] = c.tx_max_frames;
    raw[ADAPTIVE_RX] = u32::from(c.adaptive_rx);
    raw[ADAPTIVE_TX] = u32::from(c.adaptive_tx);
    ethtool_ioctl(ifname, "interrupt coalescing (ETHTOOL_SCOALESCE)", &mut raw)?;
    get_coalesce(ifname)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_no_coalescing_and_bad_names_are_refused() {
        let e = get_coalesce("lo").unwrap_err();
        assert!(e.is_unsupported(), "{e}");
        assert_eq!(
            e.to_string(),
            "lo does not support interrupt coalescing (ETHTOOL_GCOALESCE)"
        );
        assert!(matches!(
            get_offloads("a/b"),
            Err(EthtoolError::InvalidName(_))
        ));
        assert!(matches!(
            get_offloads("lst-nonexist0"),
            Err(EthtoolError::NotFound(_))
        ));
    }

    #[test]
    fn loopback_offloads_are_readable() {
        // Loopback's checksumming is fixed on; reading it needs no privilege.
        let o = get_offloads("lo").unwrap();
        assert!(o.tx_csum);
    }

    #[test]
    fn not_changeable_message() {
        let e = EthtoolError::NotChangeable {
            ifname: "lo".into(),
            feature: "tx-checksumming",
            wanted: false,
        };
        assert_eq!(
            e.to_string(),
            "lo: the driver keeps tx-checksumming on (a fixed feature)"
        );
    }
}
