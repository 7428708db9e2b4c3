//! Receive Packet Steering: which CPUs do an interface's receive work.
//!
//! A veth has no interrupt line: its receive processing runs where RPS (the
//! `rps_cpus` mask of the receiving side's queue) sends it, or else on the CPU that
//! transmitted. The mask is a file under `/sys/class/net`, and `/sys` shows the
//! interfaces of the namespace it was *mounted* in, not of the calling thread (see
//! [`crate::netns`]): so the file is written by a shell started with
//! `ip netns exec NAME`, which mounts a `/sys` of the namespace for it.

use thiserror::Error;

use crate::cmd::{self, CommandError};
use crate::iface::valid_ifname;
use crate::netns::{self, NetnsError};

/// Why the steering could not be set.
#[derive(Debug, Error)]
pub enum RpsError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("invalid interface name \"{0}\"")]
    InvalidName(String),
    #[error("could not write {path} in {ns} (a kernel without RPS?): {source}")]
    Write {
        path: String,
        ns: String,
        #[source]
        source: CommandError,
    },
}

/// The `rps_cpus` file of `dev`'s first receive queue.
pub fn mask_path(dev: &str) -> String {
    format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus")
}

/// The mask as the kernel reads it: hexadecimal, one bit per CPU (0 = off).
pub fn format_mask(mask: u64) -> String {
    format!("{mask:x}")
}

/// Steers the receive processing of `dev` in namespace `ns` to the CPUs of `mask`
/// (bit N = CPU N; 0 turns RPS off). Needs root.
pub fn set_cpus(ns: &str, dev: &str, mask: u64) -> Result<(), RpsError> {
    netns::validate_name(ns)?;
    if !valid_ifname(dev) {
        return Err(RpsError::InvalidName(dev.to_string()));
    }
    let path = mask_path(dev);
    // the mask and the path are the shell's arguments, never part of its script
    let script = r#"echo "$1" > "$2""#;
    let mask_hex = format_mask(mask);
    let args = [
        "netns", "exec", ns, "sh", "-c", script, "sh", &mask_hex, &path,
    ];
    cmd::ip(&args).map(drop).map_err(|source| RpsError::Write {
        path,
        ns: ns.to_string(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_masks() {
        assert_eq!(
            mask_path("eth0"),
            "/sys/class/net/eth0/queues/rx-0/rps_cpus"
        );
        assert_eq!(format_mask(0), "0");
        assert_eq!(format_mask(1 << 3), "8");
        assert_eq!(format_mask(0b1010_0000), "a0");
    }

    #[test]
    fn names_are_checked_before_anything_runs() {
        assert!(matches!(
            set_cpus("a/b", "eth0", 1),
            Err(RpsError::Netns(NetnsError::InvalidName(_)))
        ));
        assert!(matches!(
            set_cpus("lst-x", "eth0; reboot", 1),
            Err(RpsError::InvalidName(_))
        ));
    }
}
