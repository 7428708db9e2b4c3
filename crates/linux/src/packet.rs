//! A raw `AF_PACKET` socket bound to one interface: what lockstep's user-space routers
//! read frames from and write frames to, with the kernel's own forwarding switched off.
//!
//! - Every frame of the interface (`ETH_P_ALL`), starting at the Ethernet header.
//! - Frames this host sends on the interface are not reported
//!   (`PACKET_IGNORE_OUTGOING`, plus a check of `sll_pkttype` for kernels older than
//!   4.20), so a router never re-reads what it forwarded.
//! - `PACKET_AUXDATA` reports per frame whether its checksum is unfinished
//!   ([`FrameMeta::csum_not_ready`]: the sender's stack left the L4 checksum to an
//!   offload that a veth never performs — finish it before forwarding, or turn
//!   offloads off with [`crate::ethtool`]) and the VLAN tag a NIC stripped.
//! - Batches: [`PacketSocket::recv_batch`] (`recvmmsg`) and
//!   [`PacketSocket::send_batch`] (`sendmmsg`), up to [`BATCH_MAX`] frames per system
//!   call, no allocation per frame.
//! - Software RX and TX timestamps (`SO_TIMESTAMPING`), `CLOCK_REALTIME` like those of
//!   [`crate::udp`], whose control-message parsers are reused.
//! - Optional `PACKET_QDISC_BYPASS` (straight to the driver, skipping the qdisc: lower
//!   and steadier send latency, but a full driver queue drops instead of queueing) and
//!   promiscuous mode.
//!
//! Opening one needs `CAP_NET_RAW`. The socket belongs to the network namespace of the
//! thread that opened it, for its whole life: open it inside
//! [`crate::netns::run_in`] and move it out to use it from any thread.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use lockstep_core::{ClockId, Instant};
use thiserror::Error;

use crate::iface::{self, IfaceError};
use crate::sockopt::{
    batch_recv_plan, getsockopt, is_timestamping, recv_errqueue, recv_mmsg, set_rcvtimeo,
    setsockopt, CmsgBuf, MsgResult,
};
use crate::sys::last_error;
use crate::udp::{
    control_messages, parse_scm_timestamping, tx_timestamp_from, NetError, RecvMode,
    TimestampConfig, TimestampSupport, TxTimestamp, UdpSocket,
};

/// Most frames one [`PacketSocket::recv_batch`] or `sendmmsg` call moves.
pub const BATCH_MAX: usize = lockstep_core::net::IO_BATCH_MAX;

// From <linux/if_packet.h> and <linux/if_ether.h>; defined here so that any libc 0.2
// release builds this file.
const ETH_P_ALL: u16 = 0x0003;
const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
const PACKET_DROP_MEMBERSHIP: libc::c_int = 2;
const PACKET_MR_PROMISC: u16 = 1;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_AUXDATA: libc::c_int = 8;
const PACKET_TX_TIMESTAMP: libc::c_int = 16;
const PACKET_QDISC_BYPASS: libc::c_int = 20;
const PACKET_IGNORE_OUTGOING: libc::c_int = 23;
const PACKET_HOST: u8 = 0;
const PACKET_BROADCAST: u8 = 1;
const PACKET_MULTICAST: u8 = 2;
const PACKET_OTHERHOST: u8 = 3;
pub(crate) const PACKET_OUTGOING: u8 = 4;
pub(crate) const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
pub(crate) const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
pub(crate) const TP_STATUS_CSUM_VALID: u32 = 1 << 7;
const ETH_P_8021Q: u16 = 0x8100;

/// Room for one frame's control messages: `PACKET_AUXDATA` (40 bytes with its header)
/// and `SCM_TIMESTAMPING` (64), or an extended error and a timestamp on the error
/// queue, with margin.
const CMSG_CAPACITY: usize = 160;

#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct Control([u8; CMSG_CAPACITY]);

/// Why opening a packet socket failed.
#[derive(Debug, Error)]
pub enum PacketError {
    #[error("no interface \"{0}\" in this network namespace")]
    NoInterface(String),
    #[error(transparent)]
    Net(#[from] NetError),
}

impl PacketError {
    pub fn is_permission(&self) -> bool {
        matches!(self, PacketError::Net(e) if e.is_permission())
    }
}

/// How a received frame was addressed (`sll_pkttype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// To this interface's MAC address.
    Host,
    Broadcast,
    Multicast,
    /// To another host's MAC (seen only in promiscuous mode).
    OtherHost,
    /// Any other value the kernel reports.
    Other(u8),
}

impl FrameKind {
    pub(crate) fn from_pkttype(t: u8) -> FrameKind {
        match t {
            PACKET_HOST => FrameKind::Host,
            PACKET_BROADCAST => FrameKind::Broadcast,
            PACKET_MULTICAST => FrameKind::Multicast,
            PACKET_OTHERHOST => FrameKind::OtherHost,
            other => FrameKind::Other(other),
        }
    }
}

/// An 802.1Q tag the NIC took off the frame (the frame bytes no longer contain it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanTag {
    /// Priority (3 bits), drop eligibility (1) and VLAN id (12).
    pub tci: u16,
    /// The tag's EtherType (0x8100, or 0x88a8 for a service tag).
    pub tpid: u16,
}

/// What the kernel says about one received frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    /// The frame's length as received, which exceeds the bytes handed over when
    /// [`FrameMeta::truncated`].
    pub len: usize,
    /// Kernel receive time (`CLOCK_REALTIME`), when RX timestamps are on.
    pub kernel_rx: Option<Instant>,
    /// The L4 checksum is not filled in (`TP_STATUS_CSUMNOTREADY`): the checksum field
    /// holds only the pseudo-header sum, as the sender's stack left it for an offload.
    pub csum_not_ready: bool,
    /// The driver or stack already verified the L4 checksum (`TP_STATUS_CSUM_VALID`).
    pub csum_valid: bool,
    /// The frame was longer than the buffer slot; the rest was dropped.
    pub truncated: bool,
    /// A VLAN tag removed from the frame by the NIC.
    pub vlan: Option<VlanTag>,
    pub kind: FrameKind,
}

/// Counters of the socket's receive queue since the last read (`PACKET_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames received, including the dropped ones.
    pub packets: u32,
    /// Frames dropped because the receive buffer was full.
    pub drops: u32,
}

/// `struct tpacket_auxdata`, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuxData {
    pub status: u32,
    /// Original frame length.
    pub len: u32,
    /// Bytes captured.
    pub snaplen: u32,
    pub vlan_tci: u16,
    pub vlan_tpid: u16,
}

/// Parses `struct tpacket_auxdata` (20 bytes).
pub fn parse_auxdata(data: &[u8]) -> Option<AuxData> {
    let u32_at = |o: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(data.get(o..o + 4)?.try_into().ok()?))
    };
    let u16_at = |o: usize| -> Option<u16> {
        Some(u16::from_ne_bytes(data.get(o..o + 2)?.try_into().ok()?))
    };
    Some(AuxData {
        status: u32_at(0)?,
        len: u32_at(4)?,
        snaplen: u32_at(8)?,
        // tp_mac and tp_net (2 × u16) are skipped.
        vlan_tci: u16_at(16)?,
        vlan_tpid: u16_at(18)?,
    })
}

/// Decodes the control messages of one received frame: (software RX timestamp in ns
/// or 0, auxdata).
fn parse_rx_control(control: &[u8]) -> (i64, Option<AuxData>) {
    let mut ts = 0;
    let mut aux = None;
    for (level, kind, data) in control_messages(control) {
        if is_timestamping(level, kind) {
            if let Some(t) = parse_scm_timestamping(data) {
                ts = t[0];
            }
        } else if level == libc::SOL_PACKET && kind == PACKET_AUXDATA {
            aux = parse_auxdata(data);
        }
    }
    (ts, aux)
}

impl VlanTag {
    /// The tag a kernel status word (auxdata or ring header) reports, if any: its
    /// TCI, and its TPID where the kernel gives one (802.1Q otherwise).
    pub(crate) fn from_status(status: u32, tci: u16, tpid: u16) -> Option<VlanTag> {
        (status & TP_STATUS_VLAN_VALID != 0).then_some(VlanTag {
            tci,
            tpid: if status & TP_STATUS_VLAN_TPID_VALID != 0 {
                tpid
            } else {
                ETH_P_8021Q
            },
        })
    }
}

/// Builds the [`FrameMeta`] of a frame of which `captured` bytes were stored.
fn frame_meta(control: &[u8], captured: usize, msg_flags: libc::c_int, pkttype: u8) -> FrameMeta {
    let (ts, aux) = parse_rx_control(control);
    let truncated = msg_flags & libc::MSG_TRUNC != 0;
    let status = aux.map_or(0, |a| a.status);
    let len = aux.map_or(captured, |a| (a.len as usize).max(captured));
    let vlan = aux.and_then(|a| VlanTag::from_status(a.status, a.vlan_tci, a.vlan_tpid));
    FrameMeta {
        len,
        kernel_rx: (ts != 0).then_some(Instant::new(ClockId::Realtime, ts)),
        csum_not_ready: status & TP_STATUS_CSUMNOTREADY != 0,
        csum_valid: status & TP_STATUS_CSUM_VALID != 0,
        truncated,
        vlan,
        kind: FrameKind::from_pkttype(pkttype),
    }
}

/// Extracts a transmit timestamp from the control messages of one error-queue entry of
/// a packet socket (the extended error comes as `SOL_PACKET` / `PACKET_TX_TIMESTAMP`).
pub fn parse_packet_tx_timestamp(control: &[u8]) -> Option<TxTimestamp> {
    tx_timestamp_from(
        control,
        |level, kind| level == libc::SOL_PACKET && kind == PACKET_TX_TIMESTAMP,
        None,
    )
}

/// Per-socket receive scratch space, allocated once so a batch does not clear 10 KB of
/// stack each time (the kernel overwrites what it uses).
struct RecvScratch {
    controls: [Control; BATCH_MAX],
    addrs: [libc::sockaddr_ll; BATCH_MAX],
    results: [MsgResult; BATCH_MAX],
}

/// A raw `AF_PACKET` socket bound to one interface.
pub struct PacketSocket {
    fd: OwnedFd,
    ifindex: u32,
    scratch: Box<RecvScratch>,
    /// The receive timeout set with SO_RCVTIMEO, in ns (0 = none), so that repeated
    /// timed receives do not repeat the setsockopt.
    rcvtimeo_ns: i64,
}

impl std::fmt::Debug for PacketSocket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketSocket")
            .field("fd", &self.fd)
            .field("ifindex", &self.ifindex)
            .finish_non_exhaustive()
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn io_err(op: &'static str) -> NetError {
    NetError::Io {
        op,
        source: last_error(),
    }
}

fn zeroed_sockaddr_ll() -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
    unsafe { std::mem::zeroed() }
}

/// The index of interface `ifname` of the calling thread's namespace, as a packet
/// socket's error.
pub(crate) fn ifindex_of(ifname: &str) -> Result<u32, PacketError> {
    iface::ifindex(ifname).map_err(|e| match e {
        IfaceError::NotFound(n) => PacketError::NoInterface(n),
        IfaceError::InvalidName(n) => PacketError::Net(NetError::InvalidInterface(n)),
        other => PacketError::Net(NetError::Io {
            op: "looking up the interface index",
            source: io::Error::other(other.to_string()),
        }),
    })
}

/// One `SO_TIMESTAMPING` control message asking for the software TX timestamp of
/// the message it goes with: `cmsghdr` (16 bytes on 64-bit Linux, 12 on 32-bit) and
/// a `u32`, padded to the header's alignment.
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct StampCmsg([u8; STAMP_CMSG_SPACE]);

/// `CMSG_SPACE(4)`: the header, then 4 bytes rounded up to `size_t`.
const STAMP_CMSG_SPACE: usize =
    size_of::<libc::cmsghdr>() + 4usize.div_ceil(size_of::<usize>()) * size_of::<usize>();

impl StampCmsg {
    fn new() -> StampCmsg {
        let mut b = StampCmsg([0u8; STAMP_CMSG_SPACE]);
        let hdr = size_of::<libc::cmsghdr>();
        // SAFETY: cmsghdr is plain old data; all-zero is valid.
        let mut c: libc::cmsghdr = unsafe { std::mem::zeroed() };
        // CMSG_LEN(4): the header and the data, without the trailing padding.
        c.cmsg_len = (hdr + 4) as _;
        c.cmsg_level = libc::SOL_SOCKET;
        c.cmsg_type = libc::SO_TIMESTAMPING;
        // SAFETY: the buffer is 8-byte aligned (as cmsghdr needs at most) and holds
        // the header plus 4 bytes (STAMP_CMSG_SPACE); both writes stay inside it.
        unsafe {
            let h = b.0.as_mut_ptr().cast::<libc::cmsghdr>();
            h.write(c);
            b.0.as_mut_ptr()
                .add(hdr)
                .cast::<u32>()
                .write_unaligned(libc::SOF_TIMESTAMPING_TX_SOFTWARE);
        }
        b
    }
}

/// Binds packet socket `raw` to interface `index` for `protocol` (0: keep the
/// socket's protocol; a socket made with 0 then receives nothing).
fn bind_ll(raw: RawFd, index: libc::c_int, protocol: u16) -> std::io::Result<()> {
    let mut sll = zeroed_sockaddr_ll();
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = protocol.to_be();
    sll.sll_ifindex = index;
    // SAFETY: `sll` is a valid sockaddr_ll and its size is passed.
    let rc = unsafe {
        libc::bind(
            raw,
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(last_error());
    }
    Ok(())
}

/// `struct packet_mreq`.
#[repr(C)]
struct PacketMreq {
    mr_ifindex: libc::c_int,
    mr_type: u16,
    mr_alen: u16,
    mr_address: [u8; 8],
}

impl PacketSocket {
    /// Opens a packet socket on the interface `ifname` of the calling thread's
    /// namespace.
    pub fn bind(ifname: &str) -> Result<PacketSocket, PacketError> {
        PacketSocket::bind_index(ifindex_of(ifname)?)
    }

    /// Opens a packet socket on the interface with index `ifindex`.
    pub fn bind_index(ifindex: u32) -> Result<PacketSocket, PacketError> {
        PacketSocket::bind_index_with(ifindex, |_| Ok(()))
    }

    /// Opens one on the interface with index `ifindex` that takes no frame until
    /// [`PacketSocket::start_receiving`].
    pub fn bind_index_idle(ifindex: u32) -> Result<PacketSocket, PacketError> {
        PacketSocket::bind_index_idle_with(ifindex, |_| Ok(()))
    }

    /// Like [`PacketSocket::bind_index`], with `setup` run on the descriptor after it
    /// is made and before it is bound: while it receives nothing yet (what a receive
    /// ring must be set up in, so no frame lands on the plain queue first).
    pub(crate) fn bind_index_with(
        ifindex: u32,
        setup: impl FnOnce(RawFd) -> Result<(), NetError>,
    ) -> Result<PacketSocket, PacketError> {
        PacketSocket::bind_proto(ifindex, ETH_P_ALL, setup)
    }

    /// A socket on the interface with index `ifindex` that only sends: bound with
    /// protocol 0, it receives nothing (what an `AF_XDP` port sends its timestamped
    /// frames through).
    pub(crate) fn bind_send_only(ifindex: u32) -> Result<PacketSocket, PacketError> {
        PacketSocket::bind_proto(ifindex, 0, |_| Ok(()))
    }

    /// Like [`PacketSocket::bind_index_with`], but the socket takes no frame until
    /// [`PacketSocket::start_receiving`]: bound to the interface with protocol 0, it
    /// can be set up (a receive ring allocated and mapped, options set) while frames
    /// that arrive meanwhile are left to the kernel instead of waiting in the socket.
    pub(crate) fn bind_index_idle_with(
        ifindex: u32,
        setup: impl FnOnce(RawFd) -> Result<(), NetError>,
    ) -> Result<PacketSocket, PacketError> {
        PacketSocket::bind_proto(ifindex, 0, setup)
    }

    /// Starts taking every frame of the interface (binds the socket again, for
    /// `ETH_P_ALL`): frames that arrived before are not in the socket. On a socket
    /// that already receives, nothing changes.
    pub fn start_receiving(&self) -> Result<(), NetError> {
        // (the index fitted a c_int when the socket was bound)
        let index = libc::c_int::try_from(self.ifindex).unwrap_or(libc::c_int::MAX);
        bind_ll(self.fd.as_raw_fd(), index, ETH_P_ALL).map_err(|source| NetError::Io {
            op: "bind(AF_PACKET, ETH_P_ALL)",
            source,
        })
    }

    fn bind_proto(
        ifindex: u32,
        protocol: u16,
        setup: impl FnOnce(RawFd) -> Result<(), NetError>,
    ) -> Result<PacketSocket, PacketError> {
        let index = libc::c_int::try_from(ifindex)
            .ok()
            .filter(|&i| i > 0)
            .ok_or_else(|| PacketError::NoInterface(format!("index {ifindex}")))?;
        // Protocol 0: the socket receives nothing until bind() names the protocol and
        // the interface, so no frame of another interface slips in between.
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            let e = last_error();
            return Err(match e.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => NetError::Denied {
                    what: "AF_PACKET socket",
                    hint: "raw sockets need CAP_NET_RAW: run as root",
                },
                Some(libc::EAFNOSUPPORT) => NetError::Unsupported {
                    feature: "AF_PACKET",
                    detail: "the kernel was built without CONFIG_PACKET",
                },
                _ => NetError::Io {
                    op: "socket(AF_PACKET)",
                    source: e,
                },
            }
            .into());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let raw = fd.as_raw_fd();
        let on: libc::c_int = 1;
        setsockopt(raw, libc::SOL_PACKET, PACKET_AUXDATA, &on).map_err(|source| NetError::Io {
            op: "setsockopt(PACKET_AUXDATA)",
            source,
        })?;
        // Linux ≥ 4.20; older kernels are covered by the sll_pkttype check on receive.
        let _ = setsockopt(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, &on);
        setup(raw)?;
        bind_ll(raw, index, protocol).map_err(|e| match e.raw_os_error() {
            Some(libc::ENODEV) => PacketError::NoInterface(format!("index {ifindex}")),
            _ => NetError::Io {
                op: "bind(AF_PACKET)",
                source: e,
            }
            .into(),
        })?;
        Ok(PacketSocket {
            fd,
            ifindex,
            scratch: Box::new(RecvScratch {
                controls: [Control([0; CMSG_CAPACITY]); BATCH_MAX],
                addrs: [zeroed_sockaddr_ll(); BATCH_MAX],
                results: [MsgResult::default(); BATCH_MAX],
            }),
            rcvtimeo_ns: 0,
        })
    }

    /// A second handle on the same socket (`dup`), e.g. to receive on one thread and
    /// send on another. Both handles share one receive timeout: receive on only one
    /// of them with [`RecvMode::Block`] timeouts, or timeouts may be stale.
    pub fn try_clone(&self) -> Result<PacketSocket, NetError> {
        let fd = self
            .fd
            .try_clone()
            .map_err(|source| NetError::Io { op: "dup", source })?;
        Ok(PacketSocket {
            fd,
            ifindex: self.ifindex,
            scratch: Box::new(RecvScratch {
                controls: [Control([0; CMSG_CAPACITY]); BATCH_MAX],
                addrs: [zeroed_sockaddr_ll(); BATCH_MAX],
                results: [MsgResult::default(); BATCH_MAX],
            }),
            // Unknown to this handle: the first timed receive sets it.
            rcvtimeo_ns: -1,
        })
    }

    /// The index of the interface the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Hands frames straight to the driver, skipping the interface's qdisc
    /// (`PACKET_QDISC_BYPASS`, Linux ≥ 3.14). Also skips any `tc` shaping on it.
    pub fn set_qdisc_bypass(&self, on: bool) -> Result<(), NetError> {
        let v = libc::c_int::from(on);
        setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_QDISC_BYPASS,
            &v,
        )
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOPROTOOPT) => NetError::Unsupported {
                feature: "PACKET_QDISC_BYPASS",
                detail: "the kernel is older than 3.14",
            },
            _ => NetError::Io {
                op: "setsockopt(PACKET_QDISC_BYPASS)",
                source: e,
            },
        })
    }

    /// Receives frames addressed to other MACs too. Undone when the socket closes.
    pub fn set_promiscuous(&self, on: bool) -> Result<(), NetError> {
        let mreq = PacketMreq {
            mr_ifindex: self.ifindex as libc::c_int,
            mr_type: PACKET_MR_PROMISC,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        let (name, op) = if on {
            (PACKET_ADD_MEMBERSHIP, "setsockopt(PACKET_ADD_MEMBERSHIP)")
        } else {
            (PACKET_DROP_MEMBERSHIP, "setsockopt(PACKET_DROP_MEMBERSHIP)")
        };
        setsockopt(self.fd.as_raw_fd(), libc::SOL_PACKET, name, &mreq)
            .map_err(|source| NetError::Io { op, source })
    }

    /// Makes sends fail with "queue full" instead of waiting for buffer space (receives
    /// follow [`RecvMode`] either way).
    pub fn set_nonblocking(&self, on: bool) -> Result<(), NetError> {
        let fd = self.fd.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 {
            return Err(io_err("fcntl(F_GETFL)"));
        }
        let want = if on {
            flags | libc::O_NONBLOCK
        } else {
            flags & !libc::O_NONBLOCK
        };
        // SAFETY: as above.
        if want != flags && unsafe { libc::fcntl(fd, libc::F_SETFL, want) } < 0 {
            return Err(io_err("fcntl(F_SETFL)"));
        }
        Ok(())
    }

    fn set_buffer(
        &self,
        bytes: usize,
        force: libc::c_int,
        plain: libc::c_int,
    ) -> Result<usize, NetError> {
        let fd = self.fd.as_raw_fd();
        let op = "setsockopt(SO_RCVBUF/SO_SNDBUF)";
        let v = libc::c_int::try_from(bytes)
            .unwrap_or(libc::c_int::MAX / 2)
            .min(libc::c_int::MAX / 2);
        // The FORCE variant ignores net.core.[rw]mem_max but needs CAP_NET_ADMIN.
        if setsockopt(fd, libc::SOL_SOCKET, force, &v).is_err() {
            setsockopt(fd, libc::SOL_SOCKET, plain, &v)
                .map_err(|source| NetError::Io { op, source })?;
        }
        let got: libc::c_int = getsockopt(fd, libc::SOL_SOCKET, plain, 0)
            .map_err(|source| NetError::Io { op, source })?;
        Ok(usize::try_from(got).unwrap_or(0))
    }

    /// Sets the receive buffer; returns the size the kernel uses (twice the request).
    pub fn set_recv_buffer(&self, bytes: usize) -> Result<usize, NetError> {
        self.set_buffer(bytes, libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    }

    /// Sets the send buffer; returns the size the kernel uses.
    pub fn set_send_buffer(&self, bytes: usize) -> Result<usize, NetError> {
        self.set_buffer(bytes, libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    }

    /// The socket's pending error, taken (`SO_ERROR`): `ENETDOWN` after its interface
    /// went down, say. A plain receive reports it once and clears it; a socket read
    /// only through a receive ring must take it, or every `ppoll` reports it again.
    pub fn take_error(&self) -> Result<Option<NetError>, NetError> {
        let v: libc::c_int = getsockopt(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR, 0)
            .map_err(|source| NetError::Io {
            op: "getsockopt(SO_ERROR)",
            source,
        })?;
        Ok((v != 0).then(|| NetError::Io {
            op: "socket error",
            source: io::Error::from_raw_os_error(v),
        }))
    }

    /// Frames received and dropped (receive buffer full) since the last call.
    pub fn take_stats(&self) -> Result<PacketStats, NetError> {
        let v: [u32; 2] = getsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            [0; 2],
        )
        .map_err(|source| NetError::Io {
            op: "getsockopt(PACKET_STATISTICS)",
            source,
        })?;
        Ok(PacketStats {
            packets: v[0],
            drops: v[1],
        })
    }

    /// Turns on software timestamps (`SO_TIMESTAMPING`): receive times in
    /// [`FrameMeta::kernel_rx`], transmit times from
    /// [`PacketSocket::poll_tx_timestamp`] with ids counting sent frames from 0.
    /// Hardware timestamps are not set up on packet sockets; asking for them adds a
    /// note.
    pub fn enable_timestamping(&self, cfg: TimestampConfig) -> Result<TimestampSupport, NetError> {
        let mut support = TimestampSupport::default();
        if cfg.hardware {
            support.notes.push(
                "hardware timestamps are not set up on packet sockets; using software timestamps"
                    .to_string(),
            );
        }
        let mut flags: libc::c_uint = 0;
        if cfg.tx_software {
            flags |= libc::SOF_TIMESTAMPING_TX_SOFTWARE
                | libc::SOF_TIMESTAMPING_OPT_ID
                | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        }
        if cfg.rx_software {
            flags |= libc::SOF_TIMESTAMPING_RX_SOFTWARE;
        }
        if flags != 0 {
            flags |= libc::SOF_TIMESTAMPING_SOFTWARE;
        }
        self.set_timestamping(flags, &mut support)?;
        support.tx_software = cfg.tx_software;
        Ok(support)
    }

    /// Sets `SO_TIMESTAMPING` to `flags`; `support` learns whether receive times
    /// come (with a note when the kernel does not confirm them).
    fn set_timestamping(
        &self,
        flags: libc::c_uint,
        support: &mut TimestampSupport,
    ) -> Result<(), NetError> {
        let v = flags as libc::c_int;
        setsockopt(
            self.fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            &v,
        )
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ENOPROTOOPT) => NetError::Unsupported {
                feature: "SO_TIMESTAMPING",
                detail: "the kernel does not know this socket option",
            },
            _ => NetError::Io {
                op: "setsockopt(SO_TIMESTAMPING)",
                source: e,
            },
        })?;
        support.rx_software = flags & libc::SOF_TIMESTAMPING_RX_SOFTWARE != 0;
        if support.rx_software {
            if let Some(note) = confirm_rx_timestamping() {
                support.notes.push(note);
            }
        }
        Ok(())
    }

    fn set_rcvtimeo(&mut self, ns: i64) -> Result<(), NetError> {
        if self.rcvtimeo_ns != ns {
            set_rcvtimeo(self.fd.as_raw_fd(), ns)?;
            self.rcvtimeo_ns = ns;
        }
        Ok(())
    }

    /// Receives up to [`BATCH_MAX`] frames with one `recvmmsg` call. `buf` is cut into
    /// slots of `slot` bytes (one frame each; 1514 holds any frame of a 1500-byte MTU
    /// link, and a longer one is cut and flagged [`FrameMeta::truncated`]); `each` is
    /// called with every frame received, in order. Returns how many frames were
    /// reported; 0 means nothing arrived (poll mode, timeout, signal) or only this
    /// host's outgoing frames did. A blocking mode waits for the first frame only,
    /// then takes whatever else is already queued.
    #[allow(clippy::unnecessary_cast)] // msg_controllen is socklen_t on musl
    pub fn recv_batch(
        &mut self,
        buf: &mut [u8],
        slot: usize,
        mode: RecvMode,
        mut each: impl FnMut(&[u8], FrameMeta),
    ) -> Result<usize, NetError> {
        let (flags, timeout) = batch_recv_plan(mode);
        if let Some(ns) = timeout {
            self.set_rcvtimeo(ns)?;
        }
        let scratch = &mut *self.scratch;
        let n = recv_mmsg(
            self.fd.as_raw_fd(),
            buf,
            slot,
            &mut scratch.addrs,
            &mut scratch.controls,
            flags,
            &mut scratch.results,
        )?;
        let mut reported = 0;
        for (i, m) in scratch.results.iter().enumerate().take(n) {
            let pkttype = scratch.addrs[i].sll_pkttype;
            if pkttype == PACKET_OUTGOING {
                continue;
            }
            let captured = m.len.min(slot);
            let control = scratch.controls[i]
                .0
                .get(..m.controllen)
                .unwrap_or_default();
            let meta = frame_meta(control, captured, m.flags, pkttype);
            let start = i * slot;
            let data = buf.get(start..start + captured).unwrap_or_default();
            each(data, meta);
            reported += 1;
        }
        Ok(reported)
    }

    /// Receives one frame into `buf`; `Ok(None)` when none arrived (see
    /// [`PacketSocket::recv_batch`]).
    pub fn recv(&mut self, buf: &mut [u8], mode: RecvMode) -> Result<Option<FrameMeta>, NetError> {
        let mut got = None;
        let slot = buf.len();
        self.recv_batch(buf, slot, mode, |_, meta| got = Some(meta))?;
        Ok(got)
    }

    /// Sends one complete Ethernet frame (destination MAC first) out of the interface.
    /// `Ok(false)`: not sent, the queue is full (`EAGAIN` on a non-blocking socket, or
    /// `ENOBUFS` when the qdisc or, with bypass, the driver dropped it).
    pub fn send(&self, frame: &[u8]) -> Result<bool, NetError> {
        loop {
            // SAFETY: `frame` is valid for its length; the socket is bound, so no
            // destination address is needed.
            let n =
                unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
            if n >= 0 {
                return Ok(true);
            }
            let e = last_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) | Some(libc::ENOBUFS) => return Ok(false),
                _ => {
                    return Err(NetError::Io {
                        op: "send(AF_PACKET)",
                        source: e,
                    })
                }
            }
        }
    }

    /// Sends frames with `sendmmsg`, [`BATCH_MAX`] per call, in order. Returns how many
    /// of the first frames were sent; fewer than `frames.len()` when the queue filled
    /// (the rest were not sent: retry them later). An error is returned only when
    /// nothing at all was sent.
    pub fn send_batch(&self, frames: &[&[u8]]) -> Result<usize, NetError> {
        self.send_batch_stamped(frames, &[])
    }

    /// Like [`PacketSocket::send_batch`], asking for the software TX timestamp of
    /// frame `i` alone where `stamp[i]` is true (a control message on that message;
    /// missing entries are false). With timestamps turned on by
    /// [`PacketSocket::enable_tx_timestamps_on_request`] only those frames get one,
    /// and their ids count them alone, from 0: the error queue holds nothing for the
    /// others.
    #[allow(clippy::unnecessary_cast)] // msg_controllen is socklen_t on musl
    pub fn send_batch_stamped(&self, frames: &[&[u8]], stamp: &[bool]) -> Result<usize, NetError> {
        let mut sent = 0;
        let mut stamp_cmsg = StampCmsg::new();
        for (c, chunk) in frames.chunks(BATCH_MAX).enumerate() {
            let mut iovs: [libc::iovec; BATCH_MAX] = std::array::from_fn(|_| libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            });
            // SAFETY: mmsghdr is plain old data; all-zero is valid.
            let mut msgs: [libc::mmsghdr; BATCH_MAX] = unsafe { std::mem::zeroed() };
            for (i, f) in chunk.iter().enumerate() {
                // The kernel only reads through iov_base on send.
                iovs[i] = libc::iovec {
                    iov_base: f.as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                };
                msgs[i].msg_hdr.msg_iov = &mut iovs[i];
                msgs[i].msg_hdr.msg_iovlen = 1;
                if stamp.get(c * BATCH_MAX + i).copied().unwrap_or(false) {
                    // The kernel only reads the control message on send; one buffer
                    // serves every stamped message.
                    msgs[i].msg_hdr.msg_control = stamp_cmsg.0.as_mut_ptr().cast();
                    msgs[i].msg_hdr.msg_controllen = STAMP_CMSG_SPACE as _;
                }
            }
            let mut off = 0;
            while off < chunk.len() {
                // SAFETY: entries off..chunk.len() of `msgs` point at iovecs that point at
                // the caller's frames, all alive across the call.
                let n = unsafe {
                    libc::sendmmsg(
                        self.fd.as_raw_fd(),
                        msgs.as_mut_ptr().add(off),
                        (chunk.len() - off) as libc::c_uint,
                        0,
                    )
                };
                if n > 0 {
                    off += n as usize;
                    sent += n as usize;
                    continue;
                }
                if n == 0 {
                    return Ok(sent);
                }
                let e = last_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) => return Ok(sent),
                    _ if sent > 0 => return Ok(sent),
                    _ => {
                        return Err(NetError::Io {
                            op: "sendmmsg(AF_PACKET)",
                            source: e,
                        })
                    }
                }
            }
        }
        Ok(sent)
    }

    /// Turns on software RX timestamps (when `rx_software`) and TX timestamps on
    /// request: only a frame sent with its own request
    /// ([`PacketSocket::send_batch_stamped`]) gets one, identified by a counter of such
    /// frames from 0 (`SOF_TIMESTAMPING_OPT_ID`), so a router that times its probes
    /// never reads the error queue for its data frames.
    pub fn enable_tx_timestamps_on_request(
        &self,
        rx_software: bool,
    ) -> Result<TimestampSupport, NetError> {
        let mut flags = libc::SOF_TIMESTAMPING_SOFTWARE
            | libc::SOF_TIMESTAMPING_OPT_ID
            | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        if rx_software {
            flags |= libc::SOF_TIMESTAMPING_RX_SOFTWARE;
        }
        let mut support = TimestampSupport {
            tx_software: true,
            ..TimestampSupport::default()
        };
        self.set_timestamping(flags, &mut support)?;
        Ok(support)
    }

    /// Takes the next transmit timestamp from the error queue, without blocking;
    /// `Ok(None)` when none is queued (yet: it is queued once the driver took the
    /// frame).
    pub fn poll_tx_timestamp(&self) -> Result<Option<TxTimestamp>, NetError> {
        let mut data = [0u8; 64];
        let mut control = CmsgBuf::new();
        while let Some(len) = recv_errqueue(self.fd.as_raw_fd(), &mut data, &mut control)? {
            if let Some(ts) = parse_packet_tx_timestamp(control.0.get(..len).unwrap_or_default()) {
                return Ok(Some(ts));
            }
        }
        Ok(None)
    }

    /// Takes up to [`BATCH_MAX`] error-queue entries with one `recvmmsg` call and calls
    /// `each` with every TX timestamp among them, in order (other entries are skipped).
    /// Returns how many entries were taken: 0 means the queue was empty. One call per
    /// batch instead of one `recvmsg` per sent frame, which a router forwarding small
    /// frames cannot afford.
    pub fn poll_tx_timestamps(
        &mut self,
        mut each: impl FnMut(TxTimestamp),
    ) -> Result<usize, NetError> {
        // With SOF_TIMESTAMPING_OPT_TSONLY an entry carries no payload; a small slot
        // (cut and flagged if not) keeps the batch's data buffer on the stack.
        const DATA_SLOT: usize = 64;
        let mut data = [0u8; DATA_SLOT * BATCH_MAX];
        let scratch = &mut *self.scratch;
        let n = recv_mmsg(
            self.fd.as_raw_fd(),
            &mut data,
            DATA_SLOT,
            &mut scratch.addrs,
            &mut scratch.controls,
            libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            &mut scratch.results,
        )?;
        for (i, m) in scratch.results.iter().enumerate().take(n) {
            let control = scratch.controls[i]
                .0
                .get(..m.controllen)
                .unwrap_or_default();
            if let Some(ts) = parse_packet_tx_timestamp(control) {
                each(ts);
            }
        }
        Ok(n)
    }
}

/// Makes sure the kernel stamps received frames before the first one arrives.
///
/// The first socket on a host to ask for RX timestamps switches them on through
/// deferred work, and the switch is global. [`UdpSocket::enable_timestamping`] waits
/// for it with loopback datagrams; a lab namespace's loopback is usually down, so
/// when that cannot confirm it, the same is tried in a throwaway namespace with its
/// loopback up. Returns a note when neither worked.
fn confirm_rx_timestamping() -> Option<String> {
    fn try_here() -> bool {
        let lo = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        let cfg = TimestampConfig {
            rx_software: true,
            ..TimestampConfig::default()
        };
        UdpSocket::bind(lo)
            .and_then(|s| s.enable_timestamping(cfg))
            .is_ok_and(|sup| sup.notes.is_empty())
    }
    if try_here() {
        return None;
    }
    let fresh = crate::netns::run_in_fresh(|| iface::set_up("lo").is_ok() && try_here());
    if fresh.unwrap_or(false) {
        return None;
    }
    Some("could not confirm that the kernel stamps received frames yet (no usable loopback): the first frames may lack kernel_rx".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sockopt::SCM_TSTAMP_SND;

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

    fn auxdata(status: u32, len: u32, tci: u16, tpid: u16) -> Vec<u8> {
        let mut a = Vec::new();
        a.extend(status.to_ne_bytes());
        a.extend(len.to_ne_bytes());
        a.extend(len.to_ne_bytes()); // snaplen
        a.extend(0u16.to_ne_bytes()); // mac
        a.extend(14u16.to_ne_bytes()); // net
        a.extend(tci.to_ne_bytes());
        a.extend(tpid.to_ne_bytes());
        a
    }

    fn timestamping(sw_ns: i64) -> Vec<u8> {
        let mut ts = Vec::new();
        for (s, ns) in [
            (sw_ns / 1_000_000_000, sw_ns % 1_000_000_000),
            (0, 0),
            (0, 0),
        ] {
            ts.extend(s.to_ne_bytes());
            ts.extend(ns.to_ne_bytes());
        }
        ts
    }

    #[test]
    fn auxdata_and_timestamp_become_frame_meta() {
        let mut c = cmsg(
            libc::SOL_PACKET,
            PACKET_AUXDATA,
            &auxdata(
                TP_STATUS_CSUMNOTREADY | TP_STATUS_VLAN_VALID,
                1514,
                0x2005,
                0,
            ),
        );
        c.extend(cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPING,
            &timestamping(1_700_000_000_123_456_789),
        ));
        let m = frame_meta(&c, 100, libc::MSG_TRUNC, PACKET_HOST);
        assert_eq!(
            m,
            FrameMeta {
                len: 1514,
                kernel_rx: Some(Instant::new(ClockId::Realtime, 1_700_000_000_123_456_789)),
                csum_not_ready: true,
                csum_valid: false,
                truncated: true,
                vlan: Some(VlanTag {
                    tci: 0x2005,
                    tpid: 0x8100
                }),
                kind: FrameKind::Host,
            }
        );
        let c = cmsg(
            libc::SOL_PACKET,
            PACKET_AUXDATA,
            &auxdata(
                TP_STATUS_CSUM_VALID | TP_STATUS_VLAN_VALID | TP_STATUS_VLAN_TPID_VALID,
                60,
                7,
                0x88a8,
            ),
        );
        let m = frame_meta(&c, 60, 0, PACKET_BROADCAST);
        assert!(m.csum_valid && !m.csum_not_ready && !m.truncated);
        assert_eq!(
            m.vlan,
            Some(VlanTag {
                tci: 7,
                tpid: 0x88a8
            })
        );
        assert_eq!(m.kind, FrameKind::Broadcast);
        assert_eq!(m.kernel_rx, None);
        // No control messages at all: the captured length stands.
        let m = frame_meta(&[], 42, 0, 9);
        assert_eq!((m.len, m.vlan, m.kind), (42, None, FrameKind::Other(9)));
        assert_eq!(parse_auxdata(&[0; 19]), None);
    }

    #[test]
    fn packet_tx_timestamp_is_recognised() {
        let mut ee = Vec::new();
        ee.extend((libc::ENOMSG as u32).to_ne_bytes());
        ee.extend([libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 0, 0]);
        ee.extend(SCM_TSTAMP_SND.to_ne_bytes());
        ee.extend(17u32.to_ne_bytes());
        let mut c = cmsg(
            libc::SOL_SOCKET,
            libc::SCM_TIMESTAMPING,
            &timestamping(5_000_000_001),
        );
        c.extend(cmsg(libc::SOL_PACKET, PACKET_TX_TIMESTAMP, &ee));
        assert_eq!(
            parse_packet_tx_timestamp(&c),
            Some(TxTimestamp {
                id: 17,
                software: Some(Instant::new(ClockId::Realtime, 5_000_000_001)),
                hardware: None,
            })
        );
        // The IP-level error of a UDP socket is not a packet socket's timestamp.
        let mut c2 = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &timestamping(1));
        c2.extend(cmsg(libc::SOL_IP, libc::IP_RECVERR, &ee));
        assert_eq!(parse_packet_tx_timestamp(&c2), None);
        let mut other = ee.clone();
        other[4] = libc::SO_EE_ORIGIN_ICMP;
        let mut c3 = cmsg(libc::SOL_SOCKET, libc::SCM_TIMESTAMPING, &timestamping(1));
        c3.extend(cmsg(libc::SOL_PACKET, PACKET_TX_TIMESTAMP, &other));
        assert_eq!(parse_packet_tx_timestamp(&c3), None);
    }

    #[test]
    fn bind_to_a_missing_interface_is_a_clear_error() {
        let e = PacketSocket::bind("lst-nonexist0").unwrap_err();
        assert_eq!(
            e.to_string(),
            "no interface \"lst-nonexist0\" in this network namespace"
        );
        assert!(matches!(
            PacketSocket::bind("a/b"),
            Err(PacketError::Net(NetError::InvalidInterface(_)))
        ));
        assert!(matches!(
            PacketSocket::bind_index(0),
            Err(PacketError::NoInterface(_))
        ));
    }

    proptest::proptest! {
        #[test]
        fn control_parsing_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..300)) {
            let _ = frame_meta(&bytes, 10, 0, 0);
            let _ = parse_packet_tx_timestamp(&bytes);
            let _ = parse_auxdata(&bytes);
        }
    }
}
