//! Traffic control: giving a lab link the rate of real Ethernet (`tbf`, `htb`), and
//! finding out which qdiscs the running kernel lacks.
//!
//! A veth has no line rate: it moves a frame as fast as the CPU copies it. To make a
//! link behave like 100 Mb/s or 1 Gb/s Ethernet, the sending end gets a token-bucket
//! (`tbf`) or `htb` qdisc through the `tc` command (iproute2).
//!
//! Kernels are often built without the scheduling qdiscs that time-sensitive
//! networking uses (`taprio`, `etf`, `fq`, `netem`); a minimal VM kernel may have only
//! `tbf` and `htb`. [`probe_qdiscs`] tries each kind in a throwaway anonymous network
//! namespace (see [`crate::netns::run_in_fresh`]) and reports what the kernel said, so
//! a command that needs one can refuse with a clear message ([`require_qdisc`])
//! instead of failing halfway through building a lab.

use lockstep_core::Duration;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::cmd::{self, CommandError};
use crate::iface::{self, IfaceError};
use crate::netns::{self, NetnsError};

/// Why a traffic-control operation failed.
#[derive(Debug, Error)]
pub enum TcError {
    #[error("invalid {what} {value}: {why}")]
    InvalidArgument {
        what: &'static str,
        value: String,
        why: String,
    },
    #[error(
        "the kernel has no {kind} qdisc (it needs {config}, or the module sch_{kind}): {detail}"
    )]
    QdiscMissing {
        kind: String,
        config: String,
        detail: String,
    },
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error(transparent)]
    Iface(#[from] IfaceError),
    #[error(transparent)]
    Netns(#[from] NetnsError),
}

/// The qdiscs time-sensitive setups ask for that minimal kernels often lack.
pub const TSN_QDISCS: [&str; 4] = ["taprio", "etf", "fq", "netem"];

/// The kernel configuration option that provides a qdisc.
pub fn config_option(kind: &str) -> String {
    format!("CONFIG_NET_SCH_{}", kind.to_ascii_uppercase())
}

fn check_kind(kind: &str) -> Result<(), TcError> {
    let ok = !kind.is_empty()
        && kind.len() < 16
        && kind
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(TcError::InvalidArgument {
            what: "qdisc kind",
            value: format!("\"{kind}\""),
            why: "1 to 15 of a-z 0-9 _".to_string(),
        })
    }
}

/// Whether `tc`'s standard error says the kernel does not know the qdisc kind.
fn says_unknown_kind(stderr: &str) -> bool {
    stderr.contains("kind is unknown")
        || stderr.contains("Unknown qdisc")
        // Kernels before netlink extended acks answer a missing kind with ENOENT.
        || stderr.contains("RTNETLINK answers: No such file or directory")
}

/// Turns "unknown kind" into [`TcError::QdiscMissing`].
fn classify(e: CommandError, kind: &str) -> TcError {
    match e.stderr() {
        Some(s) if says_unknown_kind(s) => TcError::QdiscMissing {
            kind: kind.to_string(),
            config: config_option(kind),
            detail: s.to_string(),
        },
        _ => TcError::Command(e),
    }
}

/// How a token bucket bounds its queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TbfLimit {
    /// The longest a packet may wait in the queue (`latency`, rounded up to µs).
    Latency(Duration),
    /// The queue's size in bytes (`limit`).
    Bytes(u32),
}

fn check_rate(what: &'static str, bps: u64) -> Result<(), TcError> {
    if bps == 0 {
        return Err(TcError::InvalidArgument {
            what,
            value: "0 b/s".to_string(),
            why: "must be positive".to_string(),
        });
    }
    Ok(())
}

/// The largest frame the interface sends (MTU + Ethernet header): a bucket smaller
/// than that never lets such a frame through.
fn largest_frame(ifname: &str) -> Result<u64, TcError> {
    Ok(u64::from(iface::mtu(ifname)?) + 14)
}

/// The `tc` arguments of [`add_tbf`].
pub fn tbf_args(
    ifname: &str,
    rate_bps: u64,
    burst_bytes: u32,
    limit: TbfLimit,
) -> Result<Vec<String>, TcError> {
    check_rate("tbf rate", rate_bps)?;
    let mut a: Vec<String> = ["qdisc", "replace", "dev", ifname, "root", "tbf", "rate"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    a.push(format!("{rate_bps}bit"));
    a.push("burst".to_string());
    a.push(format!("{burst_bytes}b"));
    match limit {
        TbfLimit::Latency(d) => {
            if d <= Duration::ZERO {
                return Err(TcError::InvalidArgument {
                    what: "tbf latency",
                    value: format!("{} ns", d.as_nanos()),
                    why: "must be positive".to_string(),
                });
            }
            a.push("latency".to_string());
            a.push(format!("{}us", d.as_nanos().saturating_add(999) / 1000));
        }
        TbfLimit::Bytes(n) => {
            if n == 0 {
                return Err(TcError::InvalidArgument {
                    what: "tbf limit",
                    value: "0 B".to_string(),
                    why: "must be positive".to_string(),
                });
            }
            a.push("limit".to_string());
            a.push(format!("{n}b"));
        }
    }
    Ok(a)
}

/// Makes `ifname` send at most `rate_bps` bits per second (`tc qdisc replace dev
/// IFNAME root tbf ...`). `burst_bytes` is the bucket: at least one full frame
/// (MTU + 14), or every full-size frame would be dropped — refused here.
pub fn add_tbf(
    ifname: &str,
    rate_bps: u64,
    burst_bytes: u32,
    limit: TbfLimit,
) -> Result<(), TcError> {
    let args = tbf_args(ifname, rate_bps, burst_bytes, limit)?;
    let frame = largest_frame(ifname)?;
    if u64::from(burst_bytes) < frame {
        return Err(TcError::InvalidArgument {
            what: "tbf burst",
            value: format!("{burst_bytes} B"),
            why: format!("smaller than one full frame on {ifname} ({frame} B: MTU + 14), which would never be sent"),
        });
    }
    cmd::tc(&args).map_err(|e| classify(e, "tbf"))?;
    Ok(())
}

/// Makes `ifname` send at most `rate_bps` (borrowing up to `ceil_bps`, default the
/// rate) with one `htb` class that all traffic goes to.
pub fn add_htb_rate(ifname: &str, rate_bps: u64, ceil_bps: Option<u64>) -> Result<(), TcError> {
    check_rate("htb rate", rate_bps)?;
    let ceil = ceil_bps.unwrap_or(rate_bps);
    check_rate("htb ceil", ceil)?;
    if ceil < rate_bps {
        return Err(TcError::InvalidArgument {
            what: "htb ceil",
            value: format!("{ceil} b/s"),
            why: format!("below the rate ({rate_bps} b/s)"),
        });
    }
    let _ = largest_frame(ifname)?;
    cmd::tc(&[
        "qdisc", "replace", "dev", ifname, "root", "handle", "1:", "htb", "default", "1",
    ])
    .map_err(|e| classify(e, "htb"))?;
    cmd::tc(&[
        "class",
        "replace",
        "dev",
        ifname,
        "parent",
        "1:",
        "classid",
        "1:1",
        "htb",
        "rate",
        &format!("{rate_bps}bit"),
        "ceil",
        &format!("{ceil}bit"),
    ])?;
    Ok(())
}

/// Removes the root qdisc, back to the interface's default. Nothing configured is
/// not an error.
pub fn clear(ifname: &str) -> Result<(), TcError> {
    let _ = largest_frame(ifname)?; // NotFound for a missing interface
    match cmd::tc(&["qdisc", "del", "dev", ifname, "root"]) {
        Ok(_) => Ok(()),
        Err(e)
            if e.stderr().is_some_and(|s| {
                s.contains("handle of zero") || s.contains("No such file or directory")
            }) =>
        {
            Ok(())
        }
        Err(e) => Err(e.into()),
    }
}

/// `tc qdisc show dev IFNAME` as printed.
pub fn show(ifname: &str) -> Result<String, TcError> {
    Ok(cmd::tc(&["qdisc", "show", "dev", ifname])?)
}

/// The kind of the interface's root qdisc (`noqueue` for an unconfigured veth that is
/// up); `None` when none is attached (an interface that is down and was never
/// configured prints nothing).
pub fn root_kind(ifname: &str) -> Result<Option<String>, TcError> {
    let out = cmd::tc(&["qdisc", "show", "dev", ifname, "root"])?;
    if out.trim().is_empty() {
        return Ok(None);
    }
    parse_root_kind(&out).map(Some).ok_or_else(|| {
        TcError::Command(CommandError::Failed {
            command: format!("tc qdisc show dev {ifname} root"),
            status: "unexpected output".to_string(),
            stderr: out.trim().to_string(),
        })
    })
}

/// Whether the interface's qdiscs launch packets at their `SO_TXTIME`: an etf qdisc
/// anywhere in its tree, or taprio in txtime-assist mode.
pub fn honours_txtime(ifname: &str) -> Result<bool, TcError> {
    Ok(parse_honours_txtime(&show(ifname)?))
}

/// [`honours_txtime`] on the text of `tc qdisc show dev IFNAME`.
pub fn parse_honours_txtime(out: &str) -> bool {
    out.lines().any(|l| {
        let mut w = l.split_whitespace();
        let kind = (w.next() == Some("qdisc")).then(|| w.next()).flatten();
        match kind {
            Some("etf") => true,
            Some("taprio") => l.contains("txtime delay") || l.contains("flags 0x1"),
            _ => false,
        }
    })
}

/// The kind in the first line of `tc qdisc show`: `qdisc KIND HANDLE: ...`.
pub fn parse_root_kind(out: &str) -> Option<String> {
    let mut words = out.lines().next()?.split_whitespace();
    (words.next()? == "qdisc").then_some(())?;
    words.next().map(str::to_string)
}

/// `tc -n NETNS ARGS...`: the arguments of a `tc` command run in the named network
/// namespace (`ip netns` name) instead of the caller's.
pub fn in_netns_args<S: AsRef<str>>(netns: &str, args: &[S]) -> Vec<String> {
    let mut a = vec!["-n".to_string(), netns.to_string()];
    a.extend(args.iter().map(|s| s.as_ref().to_string()));
    a
}

/// Runs one `tc` command (the arguments after `tc`) in the named network namespace;
/// an unknown `kind` becomes [`TcError::QdiscMissing`].
pub fn run_in_netns<S: AsRef<str>>(netns: &str, kind: &str, args: &[S]) -> Result<(), TcError> {
    check_kind(kind)?;
    cmd::tc(&in_netns_args(netns, args)).map_err(|e| classify(e, kind))?;
    Ok(())
}

/// The counters of a qdisc (`tc -s qdisc show`): what it sent, dropped, and how often
/// a packet had to wait for tokens (`overlimits`, for tbf and htb).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscStats {
    pub sent_bytes: u64,
    pub sent_packets: u64,
    pub dropped: u64,
    pub overlimits: u64,
}

/// The counters of the root qdisc in `tc -s qdisc show dev DEV` output: the first
/// ` Sent B bytes P pkt (dropped D, overlimits O requeues R)` line.
pub fn parse_qdisc_stats(out: &str) -> Option<QdiscStats> {
    let line = out.lines().find(|l| l.trim_start().starts_with("Sent "))?;
    let words: Vec<&str> = line
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .filter(|w| !w.is_empty())
        .collect();
    let after = |key: &str| -> Option<u64> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1)?.parse().ok()
    };
    let before = |key: &str| -> Option<u64> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i.checked_sub(1)?)?.parse().ok()
    };
    Some(QdiscStats {
        sent_bytes: before("bytes")?,
        sent_packets: before("pkt")?,
        dropped: after("dropped")?,
        overlimits: after("overlimits")?,
    })
}

/// The counters of `dev`'s root qdisc in the named network namespace.
pub fn root_stats_in_netns(netns: &str, dev: &str) -> Result<Option<QdiscStats>, TcError> {
    let out = cmd::tc(&in_netns_args(
        netns,
        &["-s", "qdisc", "show", "dev", dev, "root"],
    ))?;
    Ok(parse_qdisc_stats(&out))
}

/// What [`probe_qdiscs`] found out about one qdisc kind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscProbe {
    pub kind: String,
    /// The kernel knows the kind (it may still refuse some parameters or devices).
    pub available: bool,
    /// What happened: "added", or the kernel's message.
    pub detail: String,
}

/// Parameters valid enough for the kernel to get past "which qdisc is this".
fn probe_args(kind: &str) -> &'static [&'static str] {
    match kind {
        "taprio" => &[
            "num_tc",
            "1",
            "map",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "0",
            "queues",
            "1@0",
            "base-time",
            "0",
            "sched-entry",
            "S",
            "01",
            "1000000",
            "clockid",
            "CLOCK_TAI",
        ],
        "mqprio" => &[
            "num_tc", "1", "map", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0", "0",
            "0", "0", "0", "queues", "1@0", "hw", "0",
        ],
        "etf" => &["clockid", "CLOCK_TAI", "delta", "300000"],
        "netem" => &["delay", "1ms"],
        "tbf" => &["rate", "1mbit", "burst", "32kb", "latency", "50ms"],
        _ => &[],
    }
}

/// Tries each qdisc kind on a device in a throwaway namespace: a multi-queue veth
/// (taprio and mqprio need several queues), or loopback where veth is missing.
pub fn probe_qdiscs(kinds: &[&str]) -> Result<Vec<QdiscProbe>, TcError> {
    for k in kinds {
        check_kind(k)?;
    }
    netns::run_in_fresh(|| -> Result<Vec<QdiscProbe>, TcError> {
        let dev = match cmd::ip(&[
            "link",
            "add",
            "probe0",
            "numtxqueues",
            "8",
            "numrxqueues",
            "8",
            "type",
            "veth",
            "peer",
            "name",
            "probe1",
        ]) {
            Ok(_) => "probe0",
            Err(e) if e.is_not_found() => return Err(e.into()),
            Err(_) => "lo",
        };
        let mut out = Vec::with_capacity(kinds.len());
        for &kind in kinds {
            let mut args = vec!["qdisc", "add", "dev", dev, "root", kind];
            args.extend_from_slice(probe_args(kind));
            let probe = match cmd::tc(&args) {
                Ok(_) => {
                    let _ = cmd::tc(&["qdisc", "del", "dev", dev, "root"]);
                    QdiscProbe {
                        kind: kind.to_string(),
                        available: true,
                        detail: "added".to_string(),
                    }
                }
                Err(e) if e.is_not_found() => return Err(e.into()),
                Err(e) => {
                    let msg = e.stderr().unwrap_or_default().to_string();
                    QdiscProbe {
                        kind: kind.to_string(),
                        available: !says_unknown_kind(&msg),
                        detail: msg,
                    }
                }
            };
            out.push(probe);
        }
        Ok(out)
    })?
}

/// Whether the kernel has the qdisc `kind`.
pub fn qdisc_available(kind: &str) -> Result<bool, TcError> {
    let probes = probe_qdiscs(&[kind])?;
    Ok(probes.first().is_some_and(|p| p.available))
}

/// `Ok` when the kernel has the qdisc `kind`, else [`TcError::QdiscMissing`] naming
/// the kernel option that provides it.
pub fn require_qdisc(kind: &str) -> Result<(), TcError> {
    let probes = probe_qdiscs(&[kind])?;
    match probes.into_iter().next() {
        Some(p) if p.available => Ok(()),
        Some(p) => Err(TcError::QdiscMissing {
            config: config_option(kind),
            kind: p.kind,
            detail: p.detail,
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn txtime_needs_etf_or_taprio_txtime_assist() {
        assert!(!parse_honours_txtime("qdisc noqueue 0: root refcnt 2\n"));
        assert!(!parse_honours_txtime(""));
        assert!(parse_honours_txtime(
            "qdisc mqprio 8001: root tc 2 map 0 1\nqdisc etf 8002: parent 8001:1 clockid TAI delta 300000 offload off deadline_mode off skip_sock_check off\n"
        ));
        assert!(!parse_honours_txtime(
            "qdisc taprio 8001: root refcnt 9 tc 2 map 0 1 queues offset 0 count 1 flags 0x0\n"
        ));
        assert!(parse_honours_txtime(
            "qdisc taprio 8001: root refcnt 9 tc 2 map 0 1 flags 0x1 txtime delay 200000\n"
        ));
    }

    #[test]
    fn tbf_arguments() {
        let a = tbf_args(
            "v0",
            100_000_000,
            3028,
            TbfLimit::Latency(Duration::from_nanos(1_500)),
        )
        .unwrap();
        assert_eq!(
            a.join(" "),
            "qdisc replace dev v0 root tbf rate 100000000bit burst 3028b latency 2us"
        );
        let a = tbf_args("v0", 1_000_000_000, 1514, TbfLimit::Bytes(30_000)).unwrap();
        assert_eq!(
            a.join(" "),
            "qdisc replace dev v0 root tbf rate 1000000000bit burst 1514b limit 30000b"
        );
        assert_eq!(
            tbf_args("v0", 0, 1514, TbfLimit::Bytes(1))
                .unwrap_err()
                .to_string(),
            "invalid tbf rate 0 b/s: must be positive"
        );
        assert!(tbf_args("v0", 1, 1514, TbfLimit::Bytes(0)).is_err());
        assert!(tbf_args("v0", 1, 1514, TbfLimit::Latency(Duration::ZERO)).is_err());
    }

    #[test]
    fn commands_in_a_namespace_and_qdisc_counters() {
        assert_eq!(
            in_netns_args("ls-shp-c", &["qdisc", "add", "dev", "eth0", "root", "tbf"]).join(" "),
            "-n ls-shp-c qdisc add dev eth0 root tbf"
        );
        let tbf = "qdisc tbf 8001: root refcnt 2 rate 40Mbit burst 6514b lat 50ms \n \
                   Sent 2546754 bytes 1683 pkt (dropped 3, overlimits 1630 requeues 0) \n \
                   backlog 0b 0p requeues 0\n";
        assert_eq!(
            parse_qdisc_stats(tbf),
            Some(QdiscStats {
                sent_bytes: 2_546_754,
                sent_packets: 1683,
                dropped: 3,
                overlimits: 1630,
            })
        );
        assert_eq!(parse_qdisc_stats("qdisc noqueue 0: root refcnt 2\n"), None);
        assert!(run_in_netns("x", "Tbf", &["qdisc"]).is_err());
    }

    #[test]
    fn burst_below_one_frame_is_refused() {
        let e = add_tbf("lo", 1_000_000, 100, TbfLimit::Bytes(10_000)).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid tbf burst 100 B: smaller than one full frame on lo ("),
            "{e}"
        );
    }

    #[test]
    fn root_kind_parsing_and_kind_names() {
        assert_eq!(
            parse_root_kind("qdisc tbf 8001: root refcnt 2 rate 100Mbit burst 3028b lat 50ms\n"),
            Some("tbf".to_string())
        );
        assert_eq!(
            parse_root_kind("qdisc noqueue 0: root refcnt 2 \n"),
            Some("noqueue".to_string())
        );
        assert_eq!(parse_root_kind(""), None);
        assert_eq!(parse_root_kind("class htb 1:1"), None);
        assert_eq!(config_option("fq_codel"), "CONFIG_NET_SCH_FQ_CODEL");
        assert!(check_kind("taprio").is_ok());
        for bad in ["", "Tbf", "a b", "x; rm", "abcdefghijklmnop"] {
            assert!(check_kind(bad).is_err(), "{bad}");
        }
        assert!(says_unknown_kind("Error: Specified qdisc kind is unknown."));
        assert!(says_unknown_kind(
            "RTNETLINK answers: No such file or directory"
        ));
        assert!(!says_unknown_kind("Error: Multi-queue device is required."));
        let e = TcError::QdiscMissing {
            kind: "taprio".into(),
            config: config_option("taprio"),
            detail: "Error: Specified qdisc kind is unknown.".into(),
        };
        assert_eq!(
            e.to_string(),
            "the kernel has no taprio qdisc (it needs CONFIG_NET_SCH_TAPRIO, or the module sch_taprio): Error: Specified qdisc kind is unknown."
        );
    }
}
