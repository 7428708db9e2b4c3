//! A UDP socket with what latency measurement needs and `std::net::UdpSocket` lacks:
//! DSCP marking, busy polling, kernel and hardware timestamps (`SO_TIMESTAMPING`) on
//! receive and transmit, and a receive that either polls or blocks with a timeout, so
//! a receiver never sleeps past the end of its run.
//!
//! The hot path (`send_to`, `send`, `recv`, `poll_tx_timestamp`) allocates nothing: the
//! control-message buffer lives on the stack and errors carry raw OS error numbers.
//!
//! Kernel timestamps are `CLOCK_REALTIME` (convert them with
//! [`ClockMap`](crate::clock::ClockMap)). Hardware timestamps are the NIC's PTP clock,
//! which linuxptp keeps on TAI; they are tagged with [`UdpSocket::hardware_clock`]
//! (default TAI).

use std::ffi::CStr;
use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use lockstep_core::{ClockId, Duration, Instant};
use serde::{Deserialize, Serialize};

use crate::sockopt::{
    batch_recv_plan, getsockopt, is_timestamping, recv_errqueue, recv_mmsg, send_with_txtime,
    set_rcvtimeo, setsockopt, CmsgBuf, MsgResult, CMSG_CAPACITY, SCM_TSTAMP_SND, SO_TXTIME,
};
pub use crate::sockopt::{NetError, RecvMode, Transient};
use crate::sys::{last_error, ns_to_timespec};

fn io_err(op: &'static str) -> NetError {
    NetError::Io {
        op,
        source: last_error(),
    }
}

/// Which timestamps to ask the kernel for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimestampConfig {
    /// Time the kernel hands each sent datagram to the driver (`L_Tx` of the latency decomposition).
    pub tx_software: bool,
    /// Time the kernel received each datagram from the driver (`delta` and `L_Rx` of the latency decomposition).
    pub rx_software: bool,
    /// NIC timestamps on both paths, where the interface supports them.
    pub hardware: bool,
}

impl TimestampConfig {
    /// Software timestamps both ways.
    pub const SOFTWARE: TimestampConfig = TimestampConfig {
        tx_software: true,
        rx_software: true,
        hardware: false,
    };
}

/// What [`UdpSocket::enable_timestamping`] got.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimestampSupport {
    pub tx_software: bool,
    pub rx_software: bool,
    pub tx_hardware: bool,
    pub rx_hardware: bool,
    /// The interface hardware timestamping was set up on.
    pub interface: Option<String>,
    /// What was asked for but is not active, and why.
    pub notes: Vec<String>,
}

/// One received datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvInfo {
    /// Bytes placed in the buffer.
    pub len: usize,
    pub from: SocketAddr,
    /// Kernel receive time (`CLOCK_REALTIME`), when RX software timestamps are on.
    pub kernel_rx: Option<Instant>,
    /// NIC receive time, when RX hardware timestamps are on and the NIC gave one.
    pub hw_rx: Option<Instant>,
    /// The datagram was longer than the buffer; the rest was dropped.
    pub truncated: bool,
}

/// A transmit timestamp from the error queue. Software and hardware stamps of the same
/// datagram usually arrive as two separate entries with the same `id`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxTimestamp {
    /// Which datagram: 0 for the first one sent after timestamping was enabled, then +1
    /// per datagram (`SOF_TIMESTAMPING_OPT_ID`).
    pub id: u32,
    /// When the kernel handed it to the driver (`CLOCK_REALTIME`).
    pub software: Option<Instant>,
    /// When the NIC sent it.
    pub hardware: Option<Instant>,
}

/// Most datagrams [`UdpSocket::recv_batch`] takes in one call.
pub const RECV_BATCH_MAX: usize = 32;

/// A UDP socket (IPv4 or IPv6) that owns its file descriptor.
#[derive(Debug)]
pub struct UdpSocket {
    fd: OwnedFd,
    v6: bool,
    hw_clock: ClockId,
    /// The receive timeout currently set with SO_RCVTIMEO, in ns (0 = none), so that a
    /// repeated timed receive does not repeat the setsockopt.
    rcvtimeo_ns: AtomicI64,
    /// Datagrams a qdisc dropped for their launch time (`SO_TXTIME` errors met while
    /// draining the error queue).
    txtime_errors: AtomicU64,
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for UdpSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// A socket address in the kernel's layout.
#[repr(C)]
union RawAddr {
    v4: libc::sockaddr_in,
    v6: libc::sockaddr_in6,
    storage: libc::sockaddr_storage,
}

impl RawAddr {
    fn zeroed() -> RawAddr {
        // SAFETY: every field is plain old data for which all-zero is valid.
        unsafe { std::mem::zeroed() }
    }

    fn encode(addr: &SocketAddr) -> (RawAddr, libc::socklen_t) {
        let mut raw = RawAddr::zeroed();
        match addr {
            SocketAddr::V4(a) => {
                raw.v4 = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: a.port().to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_ne_bytes(a.ip().octets()),
                    },
                    sin_zero: [0; 8],
                };
                (raw, size_of::<libc::sockaddr_in>() as libc::socklen_t)
            }
            SocketAddr::V6(a) => {
                raw.v6 = libc::sockaddr_in6 {
                    sin6_family: libc::AF_INET6 as libc::sa_family_t,
                    sin6_port: a.port().to_be(),
                    sin6_flowinfo: a.flowinfo(),
                    sin6_addr: libc::in6_addr {
                        s6_addr: a.ip().octets(),
                    },
                    sin6_scope_id: a.scope_id(),
                };
                (raw, size_of::<libc::sockaddr_in6>() as libc::socklen_t)
            }
        }
    }

    fn decode(&self, len: libc::socklen_t) -> Option<SocketAddr> {
        let len = len as usize;
        // SAFETY: all union fields are plain old data, so any bytes are a valid value of
        // each; the family field is at the same offset in all of them.
        let family = unsafe { self.storage.ss_family } as libc::c_int;
        match family {
            libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
                // SAFETY: as above.
                let a = unsafe { self.v4 };
                Some(SocketAddr::V4(SocketAddrV4::new(
                    Ipv4Addr::from(a.sin_addr.s_addr.to_ne_bytes()),
                    u16::from_be(a.sin_port),
                )))
            }
            libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
                // SAFETY: as above.
                let a = unsafe { self.v6 };
                Some(SocketAddr::V6(SocketAddrV6::new(
                    Ipv6Addr::from(a.sin6_addr.s6_addr),
                    u16::from_be(a.sin6_port),
                    a.sin6_flowinfo,
                    a.sin6_scope_id,
                )))
            }
            _ => None,
        }
    }
}

fn io_err_with(op: &'static str) -> impl Fn(io::Error) -> NetError {
    move |source| NetError::Io { op, source }
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    setsockopt(fd, level, name, &value)
}

fn getsockopt_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    getsockopt(fd, level, name, 0)
}

/// Walks the control messages of a received message: yields `(level, type, data)`.
/// Pure byte parsing in the kernel's `cmsghdr` layout (`size_t` length, two ints),
/// robust against lengths that run past the buffer.
pub fn control_messages(control: &[u8]) -> impl Iterator<Item = (i32, i32, &[u8])> {
    const W: usize = size_of::<usize>();
    let align = |n: usize| n.div_ceil(W) * W;
    let header = align(W + 8);
    let mut rest = control;
    std::iter::from_fn(move || {
        let len_bytes: [u8; W] = rest.get(..W)?.try_into().ok()?;
        let len = usize::from_ne_bytes(len_bytes);
        let level = i32::from_ne_bytes(rest.get(W..W + 4)?.try_into().ok()?);
        let kind = i32::from_ne_bytes(rest.get(W + 4..W + 8)?.try_into().ok()?);
        if len < header {
            return None;
        }
        let data = rest.get(header..len)?;
        rest = rest.get(align(len)..).unwrap_or_default();
        Some((level, kind, data))
    })
}

/// Parses `struct scm_timestamping` (three timespecs: software, legacy, hardware) into
/// nanoseconds; zero means "not taken". Accepts 64-bit and 32-bit timespecs.
pub fn parse_scm_timestamping(data: &[u8]) -> Option<[i64; 3]> {
    let mut out = [0i64; 3];
    if data.len() >= 48 {
        for (i, slot) in out.iter_mut().enumerate() {
            let sec = i64::from_ne_bytes(data.get(i * 16..i * 16 + 8)?.try_into().ok()?);
            let nsec = i64::from_ne_bytes(data.get(i * 16 + 8..i * 16 + 16)?.try_into().ok()?);
            *slot = sec.saturating_mul(1_000_000_000).saturating_add(nsec);
        }
    } else if data.len() >= 24 {
        for (i, slot) in out.iter_mut().enumerate() {
            let sec = i32::from_ne_bytes(data.get(i * 8..i * 8 + 4)?.try_into().ok()?) as i64;
            let nsec = i32::from_ne_bytes(data.get(i * 8 + 4..i * 8 + 8)?.try_into().ok()?) as i64;
            *slot = sec * 1_000_000_000 + nsec;
        }
    } else {
        return None;
    }
    Some(out)
}

/// The fields of `struct sock_extended_err` lockstep uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtendedErr {
    pub errno: u32,
    pub origin: u8,
    pub info: u32,
    pub data: u32,
}

/// Parses `struct sock_extended_err` (16 bytes, then the offender address).
pub fn parse_extended_err(data: &[u8]) -> Option<ExtendedErr> {
    Some(ExtendedErr {
        errno: u32::from_ne_bytes(data.get(0..4)?.try_into().ok()?),
        origin: *data.get(4)?,
        info: u32::from_ne_bytes(data.get(8..12)?.try_into().ok()?),
        data: u32::from_ne_bytes(data.get(12..16)?.try_into().ok()?),
    })
}

/// `SO_EE_ORIGIN_TXTIME`: an error-queue entry about a launch time (the libc crate
/// lacks it).
const SO_EE_ORIGIN_TXTIME: u8 = 6;

/// Whether one error-queue entry reports a datagram dropped for its launch time.
pub fn is_txtime_error(control: &[u8]) -> bool {
    control_messages(control).any(|(level, kind, data)| {
        is_recverr(level, kind)
            && parse_extended_err(data).is_some_and(|e| e.origin == SO_EE_ORIGIN_TXTIME)
    })
}

fn is_recverr(level: i32, kind: i32) -> bool {
    (level == libc::SOL_IP && kind == libc::IP_RECVERR)
        || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
}

fn nonzero(clock: ClockId, ns: i64) -> Option<Instant> {
    (ns != 0).then_some(Instant::new(clock, ns))
}

impl UdpSocket {
    fn new(v6: bool) -> Result<UdpSocket, NetError> {
        let family = if v6 { libc::AF_INET6 } else { libc::AF_INET };
        // SAFETY: plain socket(2) call; the returned fd is checked below.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io_err("socket"));
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(UdpSocket {
            fd,
            v6,
            hw_clock: ClockId::Tai,
            rcvtimeo_ns: AtomicI64::new(0),
            txtime_errors: AtomicU64::new(0),
        })
    }

    /// A socket bound to `addr` (port 0 picks a free port). An IPv6 socket also reaches
    /// IPv4 peers (as v4-mapped addresses) unless the host sets `bindv6only`.
    pub fn bind(addr: SocketAddr) -> Result<UdpSocket, NetError> {
        let sock = UdpSocket::new(addr.is_ipv6())?;
        let (raw, len) = RawAddr::encode(&addr);
        // SAFETY: `raw` holds a sockaddr of `len` bytes.
        let rc = unsafe { libc::bind(sock.fd.as_raw_fd(), (&raw as *const RawAddr).cast(), len) };
        if rc != 0 {
            let e = last_error();
            return Err(match e.raw_os_error() {
                Some(libc::EACCES) | Some(libc::EPERM) => NetError::BindDenied { addr },
                _ => NetError::Bind { addr, source: e },
            });
        }
        Ok(sock)
    }

    /// Maps `addr` to this socket's family (IPv4 peers of an IPv6 socket become
    /// v4-mapped).
    fn peer(&self, addr: SocketAddr) -> Result<SocketAddr, NetError> {
        match (self.v6, addr) {
            (true, SocketAddr::V4(a)) => Ok(SocketAddr::V6(SocketAddrV6::new(
                a.ip().to_ipv6_mapped(),
                a.port(),
                0,
                0,
            ))),
            (false, SocketAddr::V6(_)) => Err(NetError::Family { addr }),
            _ => Ok(addr),
        }
    }

    /// Sets the default destination (and filters what is received to that peer).
    pub fn connect(&self, addr: SocketAddr) -> Result<(), NetError> {
        let addr = self.peer(addr)?;
        let (raw, len) = RawAddr::encode(&addr);
        // SAFETY: `raw` holds a sockaddr of `len` bytes.
        let rc =
            unsafe { libc::connect(self.fd.as_raw_fd(), (&raw as *const RawAddr).cast(), len) };
        if rc != 0 {
            return Err(io_err("connect"));
        }
        Ok(())
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> Result<SocketAddr, NetError> {
        let mut raw = RawAddr::zeroed();
        let mut len = size_of::<RawAddr>() as libc::socklen_t;
        // SAFETY: `raw` is writable for `len` bytes.
        let rc = unsafe {
            libc::getsockname(
                self.fd.as_raw_fd(),
                (&mut raw as *mut RawAddr).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io_err("getsockname"));
        }
        raw.decode(len).ok_or(NetError::Unsupported {
            feature: "getsockname",
            detail: "the kernel returned an address of an unknown family",
        })
    }

    /// The connected peer.
    pub fn peer_addr(&self) -> Result<SocketAddr, NetError> {
        let mut raw = RawAddr::zeroed();
        let mut len = size_of::<RawAddr>() as libc::socklen_t;
        // SAFETY: `raw` is writable for `len` bytes.
        let rc = unsafe {
            libc::getpeername(
                self.fd.as_raw_fd(),
                (&mut raw as *mut RawAddr).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(io_err("getpeername"));
        }
        raw.decode(len).ok_or(NetError::Unsupported {
            feature: "getpeername",
            detail: "the kernel returned an address of an unknown family",
        })
    }

    /// Whether this is an IPv6 socket.
    pub fn is_ipv6(&self) -> bool {
        self.v6
    }

    /// Marks outgoing datagrams with a DSCP code point (`IP_TOS` / `IPV6_TCLASS` =
    /// `dscp << 2`, ECN bits zero).
    pub fn set_dscp(&self, dscp: u8) -> Result<(), NetError> {
        if dscp > 63 {
            return Err(NetError::InvalidDscp(dscp));
        }
        let tos = libc::c_int::from(dscp) << 2;
        let fd = self.fd.as_raw_fd();
        if self.v6 {
            setsockopt_int(fd, libc::IPPROTO_IPV6, libc::IPV6_TCLASS, tos).map_err(|source| {
                NetError::Io {
                    op: "setsockopt(IPV6_TCLASS)",
                    source,
                }
            })?;
            // IPv4 peers of a dual-stack socket use IP_TOS; not every kernel accepts it
            // on an IPv6 socket, and then only IPv6 traffic is marked.
            let _ = setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos);
        } else {
            setsockopt_int(fd, libc::IPPROTO_IP, libc::IP_TOS, tos).map_err(|source| {
                NetError::Io {
                    op: "setsockopt(IP_TOS)",
                    source,
                }
            })?;
        }
        Ok(())
    }

    /// The DSCP code point outgoing datagrams carry (read back from the kernel).
    pub fn dscp(&self) -> Result<u8, NetError> {
        let (level, name, op) = if self.v6 {
            (
                libc::IPPROTO_IPV6,
                libc::IPV6_TCLASS,
                "getsockopt(IPV6_TCLASS)",
            )
        } else {
            (libc::IPPROTO_IP, libc::IP_TOS, "getsockopt(IP_TOS)")
        };
        let v = getsockopt_int(self.fd.as_raw_fd(), level, name)
            .map_err(|source| NetError::Io { op, source })?;
        Ok(((v >> 2) & 0x3f) as u8)
    }

    /// Puts outgoing datagrams in traffic class `prio` (`SO_PRIORITY`), which a
    /// taprio or mqprio qdisc maps to a queue and its gate. Classes 0..=6 are open to
    /// anyone, higher ones need CAP_NET_ADMIN.
    pub fn set_priority(&self, prio: u32) -> Result<(), NetError> {
        let v = libc::c_int::try_from(prio).unwrap_or(libc::c_int::MAX);
        setsockopt_int(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PRIORITY, v).map_err(
            |source| match source.raw_os_error() {
                Some(libc::EPERM) => NetError::Denied {
                    what: "setsockopt(SO_PRIORITY) above 6",
                    hint: "run as root or with CAP_NET_ADMIN",
                },
                _ => NetError::Io {
                    op: "setsockopt(SO_PRIORITY)",
                    source,
                },
            },
        )
    }

    /// The traffic class outgoing datagrams get (`SO_PRIORITY`, read back).
    pub fn priority(&self) -> Result<u32, NetError> {
        let v = getsockopt_int(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PRIORITY)
            .map_err(io_err_with("getsockopt(SO_PRIORITY)"))?;
        Ok(u32::try_from(v).unwrap_or(0))
    }

    /// Lets each datagram carry its launch time on CLOCK_TAI (`SO_TXTIME`, errors
    /// reported on the error queue), for an etf qdisc (or taprio in txtime-assist
    /// mode) to hold it until then; send with [`UdpSocket::send_at`]. Anyone but
    /// CLOCK_MONOTONIC users needs CAP_NET_ADMIN.
    pub fn enable_txtime(&self) -> Result<(), NetError> {
        let v = libc::sock_txtime {
            clockid: libc::CLOCK_TAI,
            flags: libc::SOF_TXTIME_REPORT_ERRORS,
        };
        setsockopt(self.fd.as_raw_fd(), libc::SOL_SOCKET, SO_TXTIME, &v).map_err(|source| {
            match source.raw_os_error() {
                Some(libc::EPERM) => NetError::Denied {
                    what: "setsockopt(SO_TXTIME) on CLOCK_TAI",
                    hint: "run as root or with CAP_NET_ADMIN",
                },
                Some(libc::ENOPROTOOPT) | Some(libc::EINVAL) => NetError::Unsupported {
                    feature: "SO_TXTIME",
                    detail: "the kernel does not know the option (it needs Linux 4.19 or later)",
                },
                _ => NetError::Io {
                    op: "setsockopt(SO_TXTIME)",
                    source,
                },
            }
        })
    }

    /// Whether `SO_TXTIME` is on (read back).
    pub fn txtime_enabled(&self) -> Result<bool, NetError> {
        let v = getsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_TXTIME,
            libc::sock_txtime {
                clockid: -1,
                flags: 0,
            },
        )
        .map_err(io_err_with("getsockopt(SO_TXTIME)"))?;
        Ok(v.clockid == libc::CLOCK_TAI)
    }

    /// Sends one datagram to the connected peer with its launch time `txtime_ns`
    /// (CLOCK_TAI) in an `SCM_TXTIME` control message ([`UdpSocket::enable_txtime`]).
    #[inline]
    pub fn send_at(&self, buf: &[u8], txtime_ns: i64) -> Result<usize, NetError> {
        let t = u64::try_from(txtime_ns).unwrap_or(0);
        send_with_txtime(self.fd.as_raw_fd(), buf, t).map_err(|source| NetError::Io {
            op: "sendmsg(SCM_TXTIME)",
            source,
        })
    }

    /// Busy-polls the device queue for up to `us` microseconds on a blocking receive
    /// (`SO_BUSY_POLL`) instead of sleeping until the interrupt. Takes effect only with
    /// drivers that support NAPI busy polling.
    pub fn set_busy_poll(&self, us: u32) -> Result<(), NetError> {
        let v = libc::c_int::try_from(us).unwrap_or(libc::c_int::MAX);
        match setsockopt_int(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_BUSY_POLL, v) {
            Ok(()) => Ok(()),
            Err(e) => Err(match e.raw_os_error() {
                Some(libc::ENOPROTOOPT) => NetError::Unsupported {
                    feature: "SO_BUSY_POLL",
                    detail: "the kernel was built without CONFIG_NET_RX_BUSY_POLL",
                },
                Some(libc::EPERM) => NetError::Denied {
                    what: "SO_BUSY_POLL",
                    hint: "raising it needs CAP_NET_ADMIN: run as root, or set sysctl net.core.busy_read",
                },
                _ => NetError::Io {
                    op: "setsockopt(SO_BUSY_POLL)",
                    source: e,
                },
            }),
        }
    }

    fn set_buffer(
        &self,
        bytes: usize,
        force: libc::c_int,
        plain: libc::c_int,
        op: &'static str,
    ) -> Result<usize, NetError> {
        let fd = self.fd.as_raw_fd();
        // The kernel doubles the value (bookkeeping overhead); ask for half of i32::MAX at most.
        let v = libc::c_int::try_from(bytes)
            .unwrap_or(libc::c_int::MAX / 2)
            .min(libc::c_int::MAX / 2);
        // The FORCE variant ignores net.core.[rw]mem_max but needs CAP_NET_ADMIN.
        if setsockopt_int(fd, libc::SOL_SOCKET, force, v).is_err() {
            setsockopt_int(fd, libc::SOL_SOCKET, plain, v)
                .map_err(|source| NetError::Io { op, source })?;
        }
        let got = getsockopt_int(fd, libc::SOL_SOCKET, plain)
            .map_err(|source| NetError::Io { op, source })?;
        Ok(usize::try_from(got).unwrap_or(0))
    }

    /// Sets the receive buffer; returns the size the kernel actually uses (it doubles the
    /// request, and without privilege caps it at `net.core.rmem_max`).
    pub fn set_recv_buffer(&self, bytes: usize) -> Result<usize, NetError> {
        self.set_buffer(
            bytes,
            libc::SO_RCVBUFFORCE,
            libc::SO_RCVBUF,
            "setsockopt(SO_RCVBUF)",
        )
    }

    /// Sets the send buffer; returns the size the kernel actually uses.
    pub fn set_send_buffer(&self, bytes: usize) -> Result<usize, NetError> {
        self.set_buffer(
            bytes,
            libc::SO_SNDBUFFORCE,
            libc::SO_SNDBUF,
            "setsockopt(SO_SNDBUF)",
        )
    }

    /// Sends and receives only through interface `ifname` (`SO_BINDTODEVICE`).
    pub fn bind_device(&self, ifname: &str) -> Result<(), NetError> {
        if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains('\0') {
            return Err(NetError::InvalidInterface(ifname.to_string()));
        }
        // SAFETY: `ifname` is valid for its length; the kernel copies at most that.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                ifname.as_ptr().cast(),
                ifname.len() as libc::socklen_t,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let e = last_error();
        Err(match e.raw_os_error() {
            Some(libc::EPERM) => NetError::Denied {
                what: "SO_BINDTODEVICE",
                hint: "needs CAP_NET_RAW before Linux 5.7: run as root",
            },
            _ => NetError::Io {
                op: "setsockopt(SO_BINDTODEVICE)",
                source: e,
            },
        })
    }

    /// The interface the socket is tied to: `SO_BINDTODEVICE`, else the interface that
    /// owns the bound address. `None` for a wildcard address.
    pub fn interface(&self) -> Option<String> {
        let mut name = [0u8; libc::IFNAMSIZ];
        let mut len = name.len() as libc::socklen_t;
        // SAFETY: `name` is writable for `len` bytes.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_BINDTODEVICE,
                name.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc == 0 && len > 0 {
            if let Ok(s) = CStr::from_bytes_until_nul(&name) {
                let s = s.to_string_lossy();
                if !s.is_empty() {
                    return Some(s.into_owned());
                }
            }
        }
        let local = self.local_addr().ok()?;
        interface_with_address(local)
    }

    /// Which clock hardware timestamps are tagged with (the NIC's PTP clock runs on TAI
    /// under linuxptp, the default; some setups keep it on UTC).
    pub fn set_hardware_clock(&mut self, clock: ClockId) {
        self.hw_clock = clock;
    }

    pub fn hardware_clock(&self) -> ClockId {
        self.hw_clock
    }

    /// Turns on `SO_TIMESTAMPING` as asked. Transmit timestamps carry an id
    /// (`OPT_ID`, counting datagrams from 0) and no payload (`OPT_TSONLY`). Hardware
    /// timestamps need the interface set up with `SIOCSHWTSTAMP` (done here, needs
    /// CAP_NET_ADMIN); when that is impossible the result says why in `notes` and the
    /// socket uses software timestamps only.
    pub fn enable_timestamping(&self, cfg: TimestampConfig) -> Result<TimestampSupport, NetError> {
        let mut support = TimestampSupport::default();
        let mut flags: libc::c_uint = 0;
        let want_tx = cfg.tx_software || cfg.hardware;
        if cfg.tx_software {
            flags |= libc::SOF_TIMESTAMPING_TX_SOFTWARE;
        }
        if cfg.rx_software {
            flags |= libc::SOF_TIMESTAMPING_RX_SOFTWARE;
        }
        if cfg.tx_software || cfg.rx_software {
            flags |= libc::SOF_TIMESTAMPING_SOFTWARE;
        }
        let (mut hw_tx, mut hw_rx) = (false, false);
        if cfg.hardware {
            match self.interface() {
                None => support.notes.push(
                    "hardware timestamps need an interface: the socket is bound to a wildcard address (bind to the interface's address or use bind_device); using software timestamps".to_string(),
                ),
                Some(ifname) => {
                    match enable_hw_on_interface(self.fd.as_raw_fd(), &ifname) {
                        Ok((tx, rx, note)) => {
                            hw_tx = tx;
                            hw_rx = rx;
                            support.notes.extend(note);
                        }
                        Err(note) => support.notes.push(note),
                    }
                    support.interface = Some(ifname);
                }
            }
            if hw_tx || hw_rx {
                flags |= libc::SOF_TIMESTAMPING_RAW_HARDWARE;
            }
            if hw_tx {
                flags |= libc::SOF_TIMESTAMPING_TX_HARDWARE;
            }
            if hw_rx {
                flags |= libc::SOF_TIMESTAMPING_RX_HARDWARE;
            }
        }
        if want_tx {
            flags |= libc::SOF_TIMESTAMPING_OPT_ID | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        }
        let fd = self.fd.as_raw_fd();
        let set = |flags: libc::c_uint| {
            setsockopt_int(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPING,
                flags as libc::c_int,
            )
        };
        if let Err(e) = set(flags) {
            match e.raw_os_error() {
                // Before Linux 4.0 OPT_TSONLY is unknown: transmit timestamps then come
                // with a copy of the packet, which poll_tx_timestamp ignores.
                Some(libc::EINVAL) if flags & libc::SOF_TIMESTAMPING_OPT_TSONLY != 0 => {
                    flags &= !libc::SOF_TIMESTAMPING_OPT_TSONLY;
                    set(flags).map_err(|source| NetError::Io {
                        op: "setsockopt(SO_TIMESTAMPING)",
                        source,
                    })?;
                    support.notes.push("the kernel lacks SOF_TIMESTAMPING_OPT_TSONLY (Linux < 4.0): transmit timestamps carry the packet".to_string());
                }
                Some(libc::ENOPROTOOPT) => {
                    return Err(NetError::Unsupported {
                        feature: "SO_TIMESTAMPING",
                        detail: "the kernel does not know this socket option (Linux < 2.6.30)",
                    })
                }
                _ => {
                    return Err(NetError::Io {
                        op: "setsockopt(SO_TIMESTAMPING)",
                        source: e,
                    })
                }
            }
        }
        // Read back what the kernel kept (it stores the flags as given; a mismatch
        // means a kernel that silently dropped some).
        let kept = getsockopt_timestamping(fd).unwrap_or(flags);
        support.tx_software = cfg.tx_software && kept & libc::SOF_TIMESTAMPING_TX_SOFTWARE != 0;
        support.rx_software = cfg.rx_software && kept & libc::SOF_TIMESTAMPING_RX_SOFTWARE != 0;
        support.tx_hardware = hw_tx && kept & libc::SOF_TIMESTAMPING_TX_HARDWARE != 0;
        support.rx_hardware = hw_rx && kept & libc::SOF_TIMESTAMPING_RAW_HARDWARE != 0;
        if want_tx && kept & libc::SOF_TIMESTAMPING_OPT_ID == 0 {
            support.notes.push("the kernel did not keep SOF_TIMESTAMPING_OPT_ID: transmit timestamps cannot be matched to datagrams".to_string());
        }
        if support.rx_software && !await_rx_timestamping() {
            support.notes.push("could not confirm that the kernel stamps received packets yet (no loopback to test on): the first datagrams may lack kernel_rx".to_string());
        }
        Ok(support)
    }

    /// Sends one datagram to `dest`; returns the bytes sent.
    #[inline]
    pub fn send_to(&self, buf: &[u8], dest: SocketAddr) -> Result<usize, NetError> {
        let dest = self.peer(dest)?;
        let (raw, len) = RawAddr::encode(&dest);
        loop {
            // SAFETY: `buf` is valid for its length; `raw` holds a sockaddr of `len` bytes.
            let n = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    buf.as_ptr().cast(),
                    buf.len(),
                    0,
                    (&raw as *const RawAddr).cast(),
                    len,
                )
            };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = last_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(NetError::Io {
                    op: "sendto",
                    source: e,
                });
            }
        }
    }

    /// Sends one datagram to the connected peer.
    #[inline]
    pub fn send(&self, buf: &[u8]) -> Result<usize, NetError> {
        loop {
            // SAFETY: `buf` is valid for its length.
            let n = unsafe { libc::send(self.fd.as_raw_fd(), buf.as_ptr().cast(), buf.len(), 0) };
            if n >= 0 {
                return Ok(n as usize);
            }
            let e = last_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                return Err(NetError::Io {
                    op: "send",
                    source: e,
                });
            }
        }
    }

    fn set_rcvtimeo(&self, ns: i64) -> Result<(), NetError> {
        if self.rcvtimeo_ns.load(Ordering::Relaxed) != ns {
            set_rcvtimeo(self.fd.as_raw_fd(), ns)?;
            self.rcvtimeo_ns.store(ns, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Receives one datagram into `buf`, with its kernel/hardware receive timestamps.
    /// `Ok(None)` means nothing arrived (poll mode, or the timeout passed, or a signal
    /// interrupted a timed wait).
    pub fn recv(&self, buf: &mut [u8], mode: RecvMode) -> Result<Option<RecvInfo>, NetError> {
        match mode {
            RecvMode::Poll => self.recv_once(buf, libc::MSG_DONTWAIT, false),
            RecvMode::Block { timeout: Some(d) } if d <= Duration::ZERO => {
                self.recv_once(buf, libc::MSG_DONTWAIT, false)
            }
            RecvMode::Block { timeout: Some(d) } => {
                // Round up to whole microseconds (timeval) so the wait is never shorter.
                let ns = d.as_nanos().saturating_add(999) / 1_000 * 1_000;
                self.set_rcvtimeo(ns)?;
                self.recv_once(buf, 0, false)
            }
            RecvMode::Block { timeout: None } => {
                self.set_rcvtimeo(0)?;
                self.recv_once(buf, 0, true)
            }
        }
    }

    #[inline]
    fn recv_once(
        &self,
        buf: &mut [u8],
        flags: libc::c_int,
        retry_eintr: bool,
    ) -> Result<Option<RecvInfo>, NetError> {
        let mut addr = RawAddr::zeroed();
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let mut control = CmsgBuf([0; CMSG_CAPACITY]);
        loop {
            // SAFETY: msghdr is plain old data (with private padding on some targets);
            // all-zero is valid.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = (&mut addr as *mut RawAddr).cast();
            msg.msg_namelen = size_of::<RawAddr>() as libc::socklen_t;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.0.as_mut_ptr().cast();
            msg.msg_controllen = CMSG_CAPACITY as _;
            // SAFETY: every pointer in `msg` refers to a live, writable buffer of the
            // stated size (`addr`, `iov` → `buf`, `control`).
            let n = unsafe { libc::recvmsg(self.fd.as_raw_fd(), &mut msg, flags) };
            if n < 0 {
                let e = last_error();
                match e.raw_os_error() {
                    Some(libc::EAGAIN) => return Ok(None),
                    Some(libc::EINTR) if retry_eintr => continue,
                    Some(libc::EINTR) => return Ok(None),
                    _ => {
                        return Err(NetError::Io {
                            op: "recvmsg",
                            source: e,
                        })
                    }
                }
            }
            let m = MsgResult {
                len: n as usize,
                flags: msg.msg_flags,
                namelen: msg.msg_namelen,
                controllen: (msg.msg_controllen as usize).min(CMSG_CAPACITY),
            };
            return Ok(Some(self.describe_received(&addr, m, &control, buf.len())));
        }
    }

    /// Builds the [`RecvInfo`] of a datagram of `n` bytes that `recvmsg` put in a buffer
    /// of `cap` bytes.
    #[inline]
    #[allow(clippy::unnecessary_cast)] // msg_controllen is socklen_t on musl
    fn describe_received(
        &self,
        addr: &RawAddr,
        m: MsgResult,
        control: &CmsgBuf,
        cap: usize,
    ) -> RecvInfo {
        let (mut kernel_rx, mut hw_rx) = (None, None);
        for (level, kind, data) in
            control_messages(control.0.get(..m.controllen).unwrap_or_default())
        {
            if is_timestamping(level, kind) {
                if let Some(ts) = parse_scm_timestamping(data) {
                    kernel_rx = nonzero(ClockId::Realtime, ts[0]);
                    hw_rx = nonzero(self.hw_clock, ts[2]);
                }
            }
        }
        let from = addr
            .decode(m.namelen)
            .unwrap_or(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)));
        RecvInfo {
            len: m.len.min(cap),
            from,
            kernel_rx,
            hw_rx,
            truncated: m.flags & libc::MSG_TRUNC != 0,
        }
    }

    /// Receives up to [`RECV_BATCH_MAX`] datagrams with one `recvmmsg` call. `buf` is cut
    /// into slots of `slot` bytes (one datagram each); `each` is called with the bytes
    /// and the [`RecvInfo`] of every datagram received, in order. Returns how many there
    /// were (0: nothing, as `Ok(None)` for [`UdpSocket::recv`]). A blocking mode waits for
    /// the first datagram only, then takes whatever else is already queued.
    pub fn recv_batch(
        &self,
        buf: &mut [u8],
        slot: usize,
        mode: RecvMode,
        mut each: impl FnMut(&[u8], RecvInfo),
    ) -> Result<usize, NetError> {
        let (flags, timeout) = batch_recv_plan(mode);
        if let Some(ns) = timeout {
            self.set_rcvtimeo(ns)?;
        }
        let mut addrs: [RawAddr; RECV_BATCH_MAX] = std::array::from_fn(|_| RawAddr::zeroed());
        let mut controls = [CmsgBuf::new(); RECV_BATCH_MAX];
        let mut results = [MsgResult::default(); RECV_BATCH_MAX];
        let n = recv_mmsg(
            self.fd.as_raw_fd(),
            buf,
            slot,
            &mut addrs,
            &mut controls,
            flags,
            &mut results,
        )?;
        for i in 0..n {
            let info = self.describe_received(&addrs[i], results[i], &controls[i], slot);
            let start = i * slot;
            let data = buf.get(start..start + info.len).unwrap_or_default();
            each(data, info);
        }
        Ok(n)
    }

    /// Takes the next transmit timestamp from the error queue, without blocking.
    /// `Ok(None)` when none is queued (yet: the kernel queues it after the driver took
    /// the packet). Entries that are not transmit timestamps are skipped.
    pub fn poll_tx_timestamp(&self) -> Result<Option<TxTimestamp>, NetError> {
        let mut data = [0u8; 64];
        let mut control = CmsgBuf::new();
        while let Some(len) = recv_errqueue(self.fd.as_raw_fd(), &mut data, &mut control)? {
            let control = control.0.get(..len).unwrap_or_default();
            if let Some(ts) = parse_tx_timestamp(control, self.hw_clock) {
                return Ok(Some(ts));
            }
            if is_txtime_error(control) {
                self.txtime_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        Ok(None)
    }

    /// Datagrams a qdisc (etf) dropped because of their launch time — past, or too far
    /// ahead — as reported on the error queue so far ([`UdpSocket::enable_txtime`]
    /// asks for the reports; [`UdpSocket::poll_tx_timestamp`] counts them).
    pub fn txtime_errors(&self) -> u64 {
        self.txtime_errors.load(Ordering::Relaxed)
    }
}

/// Extracts a transmit timestamp from the control messages of one error-queue entry.
pub fn parse_tx_timestamp(control: &[u8], hw_clock: ClockId) -> Option<TxTimestamp> {
    tx_timestamp_from(control, is_recverr, Some(hw_clock))
}

/// A transmit timestamp from one error-queue entry whose extended error arrives in
/// the control message `is_err` recognises (`IP_RECVERR` for UDP, `PACKET_TX_TIMESTAMP`
/// for packet sockets); hardware stamps are read only when `hw_clock` is given.
pub(crate) fn tx_timestamp_from(
    control: &[u8],
    is_err: impl Fn(i32, i32) -> bool,
    hw_clock: Option<ClockId>,
) -> Option<TxTimestamp> {
    let mut stamps = None;
    let mut err = None;
    for (level, kind, data) in control_messages(control) {
        if is_timestamping(level, kind) {
            stamps = parse_scm_timestamping(data);
        } else if is_err(level, kind) {
            err = parse_extended_err(data);
        }
    }
    let err = err?;
    if err.errno != libc::ENOMSG as u32
        || err.origin != libc::SO_EE_ORIGIN_TIMESTAMPING
        || err.info != SCM_TSTAMP_SND
    {
        return None;
    }
    let ts = stamps?;
    Some(TxTimestamp {
        id: err.data,
        software: nonzero(ClockId::Realtime, ts[0]),
        hardware: hw_clock.and_then(|c| nonzero(c, ts[2])),
    })
}

fn getsockopt_timestamping(fd: RawFd) -> Option<libc::c_uint> {
    // Newer kernels return `struct so_timestamping { int flags; int bind_phc; }`.
    let mut v = [0 as libc::c_int; 2];
    let mut len = size_of::<[libc::c_int; 2]>() as libc::socklen_t;
    // SAFETY: `v` is writable for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            v.as_mut_ptr().cast(),
            &mut len,
        )
    };
    (rc == 0).then_some(v[0] as libc::c_uint)
}

/// Waits until the kernel stamps received packets.
///
/// The first socket on a host to ask for RX timestamps makes the kernel switch them on
/// through a deferred work item, so datagrams arriving in the next moments carry no
/// timestamp. This sends probe datagrams between two throw-away loopback sockets until
/// one arrives stamped (bounded to about 150 ms per loopback). Returns false when that cannot be
/// confirmed (e.g. loopback down in a fresh network namespace).
fn await_rx_timestamping() -> bool {
    // The switch is global, so any loopback works: IPv4 first, IPv6 if that is absent.
    let v4 = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    let v6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0));
    probe_rx_timestamping(v4) || probe_rx_timestamping(v6)
}

fn probe_rx_timestamping(lo: SocketAddr) -> bool {
    let pair = UdpSocket::bind(lo).and_then(|rx| {
        let tx = UdpSocket::bind(lo)?;
        let flags = libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE;
        setsockopt_int(
            rx.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            flags as libc::c_int,
        )
        .map_err(|source| NetError::Io {
            op: "setsockopt(SO_TIMESTAMPING)",
            source,
        })?;
        let dest = rx.local_addr()?;
        Ok((rx, tx, dest))
    });
    let Ok((rx, tx, dest)) = pair else {
        return false;
    };
    let mut buf = [0u8; 8];
    for _ in 0..100 {
        if tx.send_to(b"ts", dest).is_err() {
            return false;
        }
        if !wait_readable(rx.as_fd(), Some(Duration::from_millis(1))).unwrap_or(false) {
            continue;
        }
        while let Ok(Some(info)) = rx.recv(&mut buf, RecvMode::Poll) {
            if info.kernel_rx.is_some() {
                return true;
            }
        }
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
    false
}

/// Issues SIOCGHWTSTAMP / SIOCSHWTSTAMP on `ifname`.
fn hwtstamp_ioctl(
    fd: RawFd,
    ifname: &str,
    request: libc::c_ulong,
    cfg: &mut libc::hwtstamp_config,
) -> io::Result<()> {
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    let name = ifname.as_bytes();
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    for (dst, &src) in ifr.ifr_name.iter_mut().zip(name) {
        *dst = src as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (cfg as *mut libc::hwtstamp_config).cast();
    // SAFETY: `ifr` names the interface and points at `cfg`, which lives across the call
    // and is the structure these requests read and write.
    let rc = unsafe { libc::ioctl(fd, request as _, &mut ifr) };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

/// Turns on NIC timestamping for all packets. Returns (tx on, rx on, note) or a note
/// explaining why not.
fn enable_hw_on_interface(fd: RawFd, ifname: &str) -> Result<(bool, bool, Option<String>), String> {
    let on = libc::HWTSTAMP_TX_ON as libc::c_int;
    let all = libc::HWTSTAMP_FILTER_ALL as libc::c_int;
    let mut cfg = libc::hwtstamp_config {
        flags: 0,
        tx_type: 0,
        rx_filter: 0,
    };
    let current_ok = hwtstamp_ioctl(fd, ifname, libc::SIOCGHWTSTAMP, &mut cfg).is_ok();
    if !(current_ok && cfg.tx_type == on && cfg.rx_filter == all) {
        cfg = libc::hwtstamp_config {
            flags: 0,
            tx_type: on,
            rx_filter: all,
        };
        if let Err(e) = hwtstamp_ioctl(fd, ifname, libc::SIOCSHWTSTAMP, &mut cfg) {
            let why = match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => {
                    "setting it up needs CAP_NET_ADMIN (run as root)".to_string()
                }
                Some(libc::EOPNOTSUPP)
                | Some(libc::EINVAL)
                | Some(libc::ERANGE)
                | Some(libc::ENOTTY) => {
                    "the driver does not support hardware timestamping".to_string()
                }
                _ => format!("SIOCSHWTSTAMP failed: {e}"),
            };
            return Err(format!(
                "no hardware timestamps on {ifname}: {why}; using software timestamps"
            ));
        }
    }
    let tx = cfg.tx_type == on;
    let rx = cfg.rx_filter == all;
    let note = (!tx || !rx).then(|| {
        format!(
            "{ifname} timestamps in hardware only partly (tx_type {}, rx_filter {}): the rest falls back to software",
            cfg.tx_type, cfg.rx_filter
        )
    });
    Ok((tx, rx, note))
}

/// The name of the interface that has `addr`'s IP address (`getifaddrs`).
fn interface_with_address(addr: SocketAddr) -> Option<String> {
    if addr.ip().is_unspecified() {
        return None;
    }
    let ip = match addr {
        SocketAddr::V6(a) => a
            .ip()
            .to_ipv4_mapped()
            .map_or(std::net::IpAddr::V6(*a.ip()), std::net::IpAddr::V4),
        SocketAddr::V4(a) => std::net::IpAddr::V4(*a.ip()),
    };
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; the list is freed below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = head;
    while !cur.is_null() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        if !ifa.ifa_addr.is_null() && !ifa.ifa_name.is_null() {
            // SAFETY: ifa_addr points at a sockaddr whose family says its real size; we
            // copy at most the size of that family's struct.
            let family = unsafe { (*ifa.ifa_addr).sa_family } as libc::c_int;
            let this = match family {
                libc::AF_INET => {
                    // SAFETY: family is AF_INET, so this is a sockaddr_in.
                    let a = unsafe {
                        std::ptr::read_unaligned(ifa.ifa_addr.cast::<libc::sockaddr_in>())
                    };
                    Some(std::net::IpAddr::V4(Ipv4Addr::from(
                        a.sin_addr.s_addr.to_ne_bytes(),
                    )))
                }
                libc::AF_INET6 => {
                    // SAFETY: family is AF_INET6, so this is a sockaddr_in6.
                    let a = unsafe {
                        std::ptr::read_unaligned(ifa.ifa_addr.cast::<libc::sockaddr_in6>())
                    };
                    Some(std::net::IpAddr::V6(Ipv6Addr::from(a.sin6_addr.s6_addr)))
                }
                _ => None,
            };
            if this == Some(ip) {
                // SAFETY: ifa_name is a NUL-terminated string owned by the list.
                found = Some(
                    unsafe { CStr::from_ptr(ifa.ifa_name) }
                        .to_string_lossy()
                        .into_owned(),
                );
                break;
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(head) };
    found
}

/// Waits until `fd` is readable or `timeout` passes (`ppoll`, nanosecond timeout).
/// Returns whether it is readable. For callers multiplexing several sockets.
///
/// A pending error-queue entry (a transmit timestamp not yet taken) also ends the wait,
/// with `false`: drain those with [`UdpSocket::poll_tx_timestamp`] first, or this returns
/// at once again.
pub fn wait_readable(fd: BorrowedFd<'_>, timeout: Option<Duration>) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = timeout.map(|d| ns_to_timespec(d.as_nanos().max(0)));
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfd` is one valid pollfd; `tsp` is null or points at `ts`; no sigmask.
    let rc = unsafe { libc::ppoll(&mut pfd, 1, tsp, std::ptr::null()) };
    match rc {
        0 => Ok(false),
        n if n > 0 => Ok(pfd.revents & libc::POLLIN != 0),
        _ => {
            let e = last_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                Ok(false)
            } else {
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lo() -> SocketAddr {
        "127.0.0.1:0".parse().unwrap()
    }

    #[test]
    fn hundred_datagrams_with_rx_and_tx_timestamps() {
        let rx = UdpSocket::bind(lo()).unwrap();
        let tx = UdpSocket::bind(lo()).unwrap();
        let rs = rx
            .enable_timestamping(TimestampConfig {
                tx_software: false,
                rx_software: true,
                hardware: false,
            })
            .unwrap();
        assert!(rs.rx_software && !rs.tx_software, "{rs:?}");
        let ts = tx.enable_timestamping(TimestampConfig::SOFTWARE).unwrap();
        assert!(ts.tx_software && ts.rx_software, "{ts:?}");
        assert!(ts.notes.is_empty(), "{ts:?}");
        let dest = rx.local_addr().unwrap();
        let from = tx.local_addr().unwrap();
        for i in 0..100u32 {
            let n = tx.send_to(&i.to_be_bytes(), dest).unwrap();
            assert_eq!(n, 4);
        }
        let mut buf = [0u8; 64];
        for i in 0..100u32 {
            let info = rx
                .recv(
                    &mut buf,
                    RecvMode::Block {
                        timeout: Some(Duration::from_secs(5)),
                    },
                )
                .unwrap()
                .expect("datagram within 5 s");
            assert_eq!(info.len, 4);
            assert_eq!(&buf[..4], &i.to_be_bytes());
            assert_eq!(info.from, from);
            assert!(!info.truncated);
            assert_eq!(info.kernel_rx.unwrap().clock, ClockId::Realtime);
            assert_eq!(info.hw_rx, None);
        }
        assert_eq!(rx.recv(&mut buf, RecvMode::Poll).unwrap(), None);

        let mut ids = Vec::new();
        let start = std::time::Instant::now();
        while ids.len() < 100 && start.elapsed() < std::time::Duration::from_secs(5) {
            match tx.poll_tx_timestamp().unwrap() {
                Some(t) => {
                    assert_eq!(t.software.unwrap().clock, ClockId::Realtime);
                    assert_eq!(t.hardware, None);
                    ids.push(t.id);
                }
                None => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
        ids.sort_unstable();
        assert_eq!(ids, (0..100).collect::<Vec<u32>>());
        assert_eq!(tx.poll_tx_timestamp().unwrap(), None);
    }

    #[test]
    fn batch_receive_keeps_order_and_timestamps() {
        let rx = UdpSocket::bind(lo()).unwrap();
        let tx = UdpSocket::bind(lo()).unwrap();
        assert!(
            rx.enable_timestamping(TimestampConfig::SOFTWARE)
                .unwrap()
                .rx_software
        );
        let dest = rx.local_addr().unwrap();
        let mut buf = vec![0u8; 16 * 40];
        assert_eq!(
            rx.recv_batch(&mut buf, 16, RecvMode::Poll, |_, _| {})
                .unwrap(),
            0
        );
        for i in 0..40u8 {
            tx.send_to(&[i; 3], dest).unwrap();
        }
        let mut got = Vec::new();
        let start = std::time::Instant::now();
        while got.len() < 40 && start.elapsed() < std::time::Duration::from_secs(5) {
            let mode = RecvMode::Block {
                timeout: Some(Duration::from_millis(100)),
            };
            let n = rx
                .recv_batch(&mut buf, 16, mode, |data, info| {
                    assert_eq!(info.len, 3);
                    assert!(info.kernel_rx.is_some());
                    assert!(!info.truncated);
                    got.push(data[0]);
                })
                .unwrap();
            assert!(n <= RECV_BATCH_MAX);
        }
        assert_eq!(got, (0..40).collect::<Vec<u8>>());
        tx.send_to(&[9; 20], dest).unwrap();
        assert!(wait_readable(rx.as_fd(), Some(Duration::from_secs(5))).unwrap());
        let n = rx
            .recv_batch(&mut buf, 16, RecvMode::Poll, |data, info| {
                assert!(info.truncated);
                assert_eq!(data, &[9u8; 16][..]);
            })
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(
            rx.recv_batch(&mut buf, 0, RecvMode::Poll, |_, _| {})
                .unwrap(),
            0
        );
    }

    #[test]
    fn dscp_is_read_back() {
        let s = UdpSocket::bind(lo()).unwrap();
        assert_eq!(s.dscp().unwrap(), 0);
        s.set_dscp(46).unwrap();
        assert_eq!(s.dscp().unwrap(), 46);
        let raw = getsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_TOS).unwrap();
        assert_eq!(raw, 46 << 2);
        assert_eq!(
            s.set_dscp(64).unwrap_err().to_string(),
            "invalid DSCP 64: must be 0..=63"
        );
        let s6 = UdpSocket::bind("[::1]:0".parse().unwrap()).unwrap();
        s6.set_dscp(0x0c).unwrap();
        assert_eq!(s6.dscp().unwrap(), 0x0c);
        let raw = getsockopt_int(s6.as_raw_fd(), libc::IPPROTO_IPV6, libc::IPV6_TCLASS).unwrap();
        assert_eq!(raw, 0x0c << 2);
    }

    #[test]
    fn priority_class_is_read_back() {
        let s = UdpSocket::bind(lo()).unwrap();
        assert_eq!(s.priority().unwrap(), 0);
        s.set_priority(3).unwrap();
        assert_eq!(s.priority().unwrap(), 3);
        let raw = getsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_PRIORITY).unwrap();
        assert_eq!(raw, 3);
    }

    #[test]
    fn txtime_is_on_or_refused_with_a_reason() {
        let rx = UdpSocket::bind(lo()).unwrap();
        let s = UdpSocket::bind(lo()).unwrap();
        s.connect(rx.local_addr().unwrap()).unwrap();
        assert!(!s.txtime_enabled().unwrap_or(false));
        match s.enable_txtime() {
            Ok(()) => {
                assert!(s.txtime_enabled().unwrap());
                // A launch time without a qdisc that honours it: the datagram is
                // still sent (nothing holds it back here).
                let now = crate::clock::now(ClockId::Tai).ns;
                assert_eq!(s.send_at(&[7u8; 32], now + 1_000_000).unwrap(), 32);
            }
            Err(e) => {
                eprintln!("SO_TXTIME refused here: {e}");
                assert!(e.is_permission() || e.is_unsupported(), "{e}");
            }
        }
    }

    #[test]
    fn empty_socket_poll_and_timeout_return_none() {
        let s = UdpSocket::bind(lo()).unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(s.recv(&mut buf, RecvMode::Poll).unwrap(), None);
        let t = Some(Duration::from_millis(1));
        assert_eq!(
            s.recv(&mut buf, RecvMode::Block { timeout: t }).unwrap(),
            None
        );
        assert_eq!(
            s.recv(
                &mut buf,
                RecvMode::Block {
                    timeout: Some(Duration::ZERO)
                }
            )
            .unwrap(),
            None
        );
        assert!(!wait_readable(s.as_fd(), Some(Duration::from_micros(100))).unwrap());
    }

    #[test]
    fn truncation_and_connected_send() {
        let rx = UdpSocket::bind(lo()).unwrap();
        let tx = UdpSocket::bind(lo()).unwrap();
        tx.connect(rx.local_addr().unwrap()).unwrap();
        assert_eq!(tx.peer_addr().unwrap(), rx.local_addr().unwrap());
        assert_eq!(tx.send(&[7u8; 100]).unwrap(), 100);
        assert!(wait_readable(rx.as_fd(), Some(Duration::from_secs(5))).unwrap());
        let mut small = [0u8; 10];
        let info = rx.recv(&mut small, RecvMode::Poll).unwrap().unwrap();
        assert_eq!(info.len, 10);
        assert!(info.truncated);
        assert_eq!(info.kernel_rx, None);
        assert_eq!(small, [7u8; 10]);
    }

    #[test]
    fn dual_stack_socket_reaches_ipv4() {
        let rx = UdpSocket::bind(lo()).unwrap();
        let tx = UdpSocket::bind("[::]:0".parse().unwrap()).unwrap();
        tx.send_to(b"hi", rx.local_addr().unwrap()).unwrap();
        let mut buf = [0u8; 8];
        let info = rx
            .recv(
                &mut buf,
                RecvMode::Block {
                    timeout: Some(Duration::from_secs(5)),
                },
            )
            .unwrap()
            .unwrap();
        assert_eq!(&buf[..info.len], b"hi");
        let v4only = UdpSocket::bind(lo()).unwrap();
        assert!(matches!(
            v4only.send_to(b"x", "[::1]:9".parse().unwrap()),
            Err(NetError::Family { .. })
        ));
    }

    #[test]
    fn hardware_on_loopback_falls_back_with_a_note() {
        let s = UdpSocket::bind(lo()).unwrap();
        assert_eq!(s.interface().as_deref(), Some("lo"));
        let sup = s
            .enable_timestamping(TimestampConfig {
                tx_software: true,
                rx_software: true,
                hardware: true,
            })
            .unwrap();
        assert!(sup.tx_software && sup.rx_software);
        assert!(!sup.tx_hardware && !sup.rx_hardware);
        assert_eq!(sup.interface.as_deref(), Some("lo"));
        assert_eq!(sup.notes.len(), 1, "{:?}", sup.notes);
        assert!(
            sup.notes[0].starts_with("no hardware timestamps on lo: "),
            "{:?}",
            sup.notes
        );

        let wild = UdpSocket::bind("0.0.0.0:0".parse().unwrap()).unwrap();
        assert_eq!(wild.interface(), None);
        let sup = wild
            .enable_timestamping(TimestampConfig {
                hardware: true,
                ..Default::default()
            })
            .unwrap();
        assert!(sup.notes[0].starts_with("hardware timestamps need an interface"));
    }

    #[test]
    fn socket_options() {
        let s = UdpSocket::bind(lo()).unwrap();
        match s.set_busy_poll(50) {
            Ok(()) => assert_eq!(
                getsockopt_int(s.as_raw_fd(), libc::SOL_SOCKET, libc::SO_BUSY_POLL).unwrap(),
                50
            ),
            Err(e) => assert!(e.is_unsupported() || e.is_permission(), "{e}"),
        }
        let got = s.set_recv_buffer(1 << 20).unwrap();
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(got, 2 << 20);
        } else {
            assert!(got > 0);
        }
        assert!(s.set_send_buffer(1 << 16).unwrap() > 0);
        assert!(matches!(
            s.bind_device("a-name-much-too-long"),
            Err(NetError::InvalidInterface(_))
        ));
    }

    #[test]
    fn control_message_parsing() {
        const W: usize = size_of::<usize>();
        fn cmsg(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
            let header = (W + 8).div_ceil(W) * W;
            let len = header + data.len();
            let mut v = len.to_ne_bytes().to_vec();
            v.extend(level.to_ne_bytes());
            v.extend(kind.to_ne_bytes());
            v.resize(header, 0);
            v.extend(data);
            v.resize(len.div_ceil(W) * W, 0);
            v
        }
        let mut ts = Vec::new();
        for (s, ns) in [(1_700_000_000i64, 5i64), (0, 0), (37, 1)] {
            ts.extend(s.to_ne_bytes());
            ts.extend(ns.to_ne_bytes());
        }
        let mut ee = Vec::new();
        ee.extend((libc::ENOMSG as u32).to_ne_bytes());
        ee.extend([libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 0, 0]);
        ee.extend(SCM_TSTAMP_SND.to_ne_bytes());
        ee.extend(41u32.to_ne_bytes());
        ee.extend([0u8; 16]); // offender address
        let mut control = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &ts);
        control.extend(cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee));
        let msgs: Vec<_> = control_messages(&control).collect();
        assert_eq!(msgs.len(), 2);
        assert_eq!(
            parse_scm_timestamping(msgs[0].2),
            Some([1_700_000_000_000_000_005, 0, 37_000_000_001])
        );
        let t = parse_tx_timestamp(&control, ClockId::Tai).unwrap();
        assert_eq!(
            t,
            TxTimestamp {
                id: 41,
                software: Some(Instant::new(ClockId::Realtime, 1_700_000_000_000_000_005)),
                hardware: Some(Instant::new(ClockId::Tai, 37_000_000_001)),
            }
        );
        // A truncated buffer or a bogus length never panics and yields nothing past it.
        assert_eq!(control_messages(&control[..10]).count(), 0);
        let mut bogus = control.clone();
        bogus[..W].copy_from_slice(&usize::MAX.to_ne_bytes());
        assert_eq!(control_messages(&bogus).count(), 0);
        bogus[..W].copy_from_slice(&3usize.to_ne_bytes());
        assert_eq!(control_messages(&bogus).count(), 0);
        // An ICMP error is not a timestamp.
        let mut icmp = ee.clone();
        icmp[4] = libc::SO_EE_ORIGIN_ICMP;
        let mut c2 = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &ts);
        c2.extend(cmsg(libc::SOL_IP, libc::IP_RECVERR, &icmp));
        assert_eq!(parse_tx_timestamp(&c2, ClockId::Tai), None);
        assert!(!is_txtime_error(&c2) && !is_txtime_error(&control));
        // A datagram an etf qdisc dropped for its launch time (ECANCELED, origin 6).
        let mut late = ee.clone();
        late[..4].copy_from_slice(&(libc::ECANCELED as u32).to_ne_bytes());
        late[4] = SO_EE_ORIGIN_TXTIME;
        let c3 = cmsg(libc::SOL_IP, libc::IP_RECVERR, &late);
        assert!(is_txtime_error(&c3));
        assert_eq!(parse_tx_timestamp(&c3, ClockId::Tai), None);
        assert_eq!(parse_scm_timestamping(&[0u8; 10]), None);
        assert_eq!(parse_extended_err(&[0u8; 15]), None);
    }

    proptest::proptest! {
        #[test]
        fn control_parsing_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = control_messages(&bytes).count();
            let _ = parse_tx_timestamp(&bytes, ClockId::Tai);
        }
    }
}
