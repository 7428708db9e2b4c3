//! Socket plumbing shared by the UDP and packet sockets: typed `setsockopt` /
//! `getsockopt`, the aligned control-message buffer, and reading one entry of a
//! socket's error queue (where transmit timestamps arrive); the sockets' error type
//! ([`NetError`]) and how a receive waits ([`RecvMode`]).

use std::io;
use std::mem::size_of;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use lockstep_core::Duration;
use thiserror::Error;

/// Why a socket operation failed.
#[derive(Debug, Error)]
pub enum NetError {
    #[error("cannot bind {addr}: permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)")]
    BindDenied { addr: SocketAddr },
    #[error("cannot bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("{addr} is an IPv6 address but the socket is IPv4 (bind to [::]:0 to reach both)")]
    Family { addr: SocketAddr },
    #[error("invalid DSCP {0}: must be 0..=63")]
    InvalidDscp(u8),
    #[error("invalid interface name \"{0}\": at most 15 bytes, no NUL")]
    InvalidInterface(String),
    #[error("{feature} is not supported here: {detail}")]
    Unsupported {
        feature: &'static str,
        detail: &'static str,
    },
    #[error("{what}: permission denied ({hint})")]
    Denied {
        what: &'static str,
        hint: &'static str,
    },
    #[error("{op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

impl NetError {
    /// A missing privilege (exit status 3).
    pub fn is_permission(&self) -> bool {
        matches!(self, NetError::BindDenied { .. } | NetError::Denied { .. })
    }

    /// The kernel or driver lacks the feature (exit status 3 when it was required).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, NetError::Unsupported { .. })
    }

    /// The OS error number behind the failure, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            NetError::Bind { source, .. } | NetError::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    /// The passing condition behind a failed send or receive, if it is one.
    pub fn transient(&self) -> Option<Transient> {
        match self.raw_os_error()? {
            libc::ENOBUFS => Some(Transient::NoBuffers),
            // EWOULDBLOCK is the same number on Linux
            libc::EAGAIN => Some(Transient::WouldBlock),
            libc::ECONNREFUSED => Some(Transient::Refused),
            libc::ENETDOWN => Some(Transient::LinkDown),
            _ => None,
        }
    }
}

/// Failures of a send or receive that a probe counts and goes on after
/// ([`NetError::transient`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transient {
    /// ENOBUFS: a full device queue or socket buffer.
    NoBuffers,
    /// EAGAIN / EWOULDBLOCK: the socket could not take or give a datagram right now.
    WouldBlock,
    /// ECONNREFUSED: an ICMP port unreachable came back to a connected socket (nobody
    /// listening there, or not yet).
    Refused,
    /// ENETDOWN: the interface is down (a cable pulled, `ip link set … down`); it
    /// may come back.
    LinkDown,
}

/// How a receive waits ([`crate::udp::UdpSocket::recv`], the batch receives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvMode {
    /// Return at once: `Ok(None)` when nothing is queued.
    Poll,
    /// Block until a datagram arrives, or until `timeout` (then `Ok(None)`). The timeout
    /// is rounded up to the kernel tick (1–10 ms): it is for waking up to check the end
    /// of a run, not for timing.
    Block { timeout: Option<Duration> },
}

use crate::sys::last_error;

/// Room for the control messages of one message: `SCM_TIMESTAMPING` (64 bytes),
/// `PACKET_AUXDATA` (40) or an extended error with its offender address (64), with
/// margin.
pub(crate) const CMSG_CAPACITY: usize = 256;

/// A control-message buffer aligned like `cmsghdr`.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
pub(crate) struct CmsgBuf(pub(crate) [u8; CMSG_CAPACITY]);

impl CmsgBuf {
    pub(crate) const fn new() -> Self {
        CmsgBuf([0; CMSG_CAPACITY])
    }
}

/// `SO_TIMESTAMPING_NEW`, the 64-bit-time variant 32-bit systems may report.
pub(crate) const SCM_TIMESTAMPING_NEW: libc::c_int = 65;
/// `ee_info` of a transmit timestamp taken when the driver got the packet.
pub(crate) const SCM_TSTAMP_SND: u32 = 0;

/// Whether a control message carries `SCM_TIMESTAMPING`.
pub(crate) fn is_timestamping(level: i32, kind: i32) -> bool {
    level == libc::SOL_SOCKET && (kind == libc::SCM_TIMESTAMPING || kind == SCM_TIMESTAMPING_NEW)
}

pub(crate) fn setsockopt<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` is a live value whose size is passed; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(last_error())
    }
}

pub(crate) fn getsockopt<T: Copy>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    init: T,
) -> io::Result<T> {
    let mut value = init;
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is writable for `len` bytes.
    let rc = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut T).cast(), &mut len) };
    if rc == 0 {
        Ok(value)
    } else {
        Err(last_error())
    }
}

/// `SO_TXTIME` / `SCM_TXTIME` (the generic value; the libc crate lacks it).
pub(crate) const SO_TXTIME: libc::c_int = 61;

/// Sends `buf` on a connected socket with a launch time: one `SCM_TXTIME` control
/// message carrying `txtime_ns` (on the clock `SO_TXTIME` named).
#[allow(clippy::unnecessary_cast)] // msg_controllen is socklen_t on musl
pub(crate) fn send_with_txtime(fd: RawFd, buf: &[u8], txtime_ns: u64) -> io::Result<usize> {
    let mut control = CmsgBuf::new();
    let mut iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain old data; all-zero is valid.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE only computes a size.
    let space = unsafe { libc::CMSG_SPACE(size_of::<u64>() as u32) } as usize;
    msg.msg_controllen = space as _;
    // SAFETY: the control buffer is aligned for cmsghdr and holds `space` bytes
    // (CMSG_CAPACITY is larger), so the first header and its 8 data bytes fit in it.
    unsafe {
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = SO_TXTIME;
        (*cmsg).cmsg_len = libc::CMSG_LEN(size_of::<u64>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u64>(), txtime_ns);
    }
    loop {
        // SAFETY: `msg` points at `iov` (valid for `buf`) and the control buffer, all
        // alive for the call; the kernel only reads them.
        let n = unsafe { libc::sendmsg(fd, &msg, 0) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = last_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

/// Reads one entry of the socket's error queue without blocking. Returns the length
/// of the control data written into `control`, or `None` when the queue is empty.
#[allow(clippy::unnecessary_cast)] // msg_controllen is socklen_t on musl
pub(crate) fn recv_errqueue(
    fd: RawFd,
    data: &mut [u8],
    control: &mut CmsgBuf,
) -> Result<Option<usize>, NetError> {
    loop {
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr().cast(),
            iov_len: data.len(),
        };
        // SAFETY: msghdr is plain old data; all-zero is valid.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = CMSG_CAPACITY as _;
        // SAFETY: the pointers in `msg` refer to live, writable buffers of the stated
        // sizes (`iov` → `data`, `control`); no address buffer is given.
        let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        if n < 0 {
            let e = last_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => return Ok(None),
                Some(libc::EINTR) => continue,
                _ => {
                    return Err(NetError::Io {
                        op: "recvmsg(MSG_ERRQUEUE)",
                        source: e,
                    })
                }
            }
        }
        return Ok(Some((msg.msg_controllen as usize).min(CMSG_CAPACITY)));
    }
}

/// What `recvmmsg` reported for one message.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct MsgResult {
    /// Bytes of the message (may exceed the slot when truncated).
    pub len: usize,
    pub flags: libc::c_int,
    pub namelen: libc::socklen_t,
    /// Bytes of control data written.
    pub controllen: usize,
}

impl MsgResult {
    #[allow(clippy::unnecessary_cast)] // msg_controllen is socklen_t on musl
    fn of(m: &libc::mmsghdr, control_cap: usize) -> Self {
        MsgResult {
            len: m.msg_len as usize,
            flags: m.msg_hdr.msg_flags,
            namelen: m.msg_hdr.msg_namelen,
            controllen: (m.msg_hdr.msg_controllen as usize).min(control_cap),
        }
    }
}

/// One `recvmmsg` call: `buf` is cut into slots of `slot` bytes, message `i` goes to
/// slot `i` with its source address in `addrs[i]` and its control messages in
/// `controls[i]` (any plain-old-data buffer type aligned for `cmsghdr`). Returns how
/// many messages arrived, their facts in `results`; `Ok(0)` when none (EAGAIN, EINTR).
pub(crate) fn recv_mmsg<A, C, const N: usize>(
    fd: RawFd,
    buf: &mut [u8],
    slot: usize,
    addrs: &mut [A; N],
    controls: &mut [C; N],
    flags: libc::c_int,
    results: &mut [MsgResult; N],
) -> Result<usize, NetError> {
    if slot == 0 {
        return Ok(0);
    }
    let count = (buf.len() / slot).min(N);
    if count == 0 {
        return Ok(0);
    }
    let mut iovs: [libc::iovec; N] = std::array::from_fn(|_| libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    });
    // SAFETY: mmsghdr is plain old data; all-zero is valid.
    let mut msgs: [libc::mmsghdr; N] = unsafe { std::mem::zeroed() };
    for (i, chunk) in buf.chunks_exact_mut(slot).take(count).enumerate() {
        iovs[i] = libc::iovec {
            iov_base: chunk.as_mut_ptr().cast(),
            iov_len: slot,
        };
        let h = &mut msgs[i].msg_hdr;
        h.msg_name = (&mut addrs[i] as *mut A).cast();
        h.msg_namelen = size_of::<A>() as libc::socklen_t;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        h.msg_control = (&mut controls[i] as *mut C).cast();
        h.msg_controllen = size_of::<C>() as _;
    }
    // SAFETY: the first `count` entries of `msgs` point at live, writable buffers of the
    // stated sizes (addresses, control buffers, disjoint slots of `buf`); no timeout
    // pointer (its semantics are broken, see recvmmsg(2) BUGS).
    let n = unsafe {
        libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            count as libc::c_uint,
            flags as _,
            std::ptr::null_mut(),
        )
    };
    if n < 0 {
        let e = last_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(0),
            _ => Err(NetError::Io {
                op: "recvmmsg",
                source: e,
            }),
        };
    }
    let n = (n as usize).min(count);
    for (r, m) in results.iter_mut().zip(msgs.iter()).take(n) {
        *r = MsgResult::of(m, size_of::<C>());
    }
    Ok(n)
}

/// How a batch receive in `mode` is made: the `recvmmsg` flags, and the
/// `SO_RCVTIMEO` (ns, 0 = wait forever) a blocking wait needs first, if any. A timeout
/// is rounded up to whole µs (a `timeval`), so the wait is never shorter.
pub(crate) fn batch_recv_plan(mode: RecvMode) -> (libc::c_int, Option<i64>) {
    match mode {
        RecvMode::Poll => (libc::MSG_DONTWAIT, None),
        RecvMode::Block { timeout: Some(d) } if d.as_nanos() <= 0 => (libc::MSG_DONTWAIT, None),
        RecvMode::Block { timeout: Some(d) } => (
            libc::MSG_WAITFORONE,
            Some(d.as_nanos().saturating_add(999) / 1_000 * 1_000),
        ),
        RecvMode::Block { timeout: None } => (libc::MSG_WAITFORONE, Some(0)),
    }
}

/// Sets `SO_RCVTIMEO` to `ns` nanoseconds (0: no timeout).
pub(crate) fn set_rcvtimeo(fd: RawFd, ns: i64) -> Result<(), NetError> {
    let tv = libc::timeval {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_usec: ((ns % 1_000_000_000) / 1_000) as libc::suseconds_t,
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv).map_err(|source| NetError::Io {
        op: "setsockopt(SO_RCVTIMEO)",
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(errno: i32) -> NetError {
        NetError::Io {
            op: "sendto",
            source: io::Error::from_raw_os_error(errno),
        }
    }

    #[test]
    fn transient_failures_are_classified() {
        assert_eq!(io(libc::ENOBUFS).transient(), Some(Transient::NoBuffers));
        assert_eq!(io(libc::EAGAIN).transient(), Some(Transient::WouldBlock));
        assert_eq!(
            io(libc::EWOULDBLOCK).transient(),
            Some(Transient::WouldBlock)
        );
        assert_eq!(io(libc::ECONNREFUSED).transient(), Some(Transient::Refused));
        assert_eq!(io(libc::EPERM).transient(), None);
        assert_eq!(NetError::InvalidDscp(64).transient(), None);
    }
}
