//! One port of a user-space router: the interface its frames come in on and go out of,
//! whatever moves them between the kernel and the process. The router drives every
//! port through [`FramePort`] alone, so the way frames move is chosen once, when the
//! port is opened ([`open`]), and anything that speaks the trait (a wrapper that drops
//! or delays frames on purpose, say) can sit between the router and the kernel.
//! Senders and receivers that move whole frames instead of using the kernel's UDP
//! stack (`live.io`) open the same ports.
//!
//! The ways ([`IoMode`]):
//!
//! - `packet`: a plain `AF_PACKET` socket ([`crate::packet`]): `recvmmsg` copies a
//!   batch of frames into the process's buffers, `sendmmsg` sends a batch.
//! - `ring`: the same socket with a receive ring mapped into the process
//!   ([`crate::ring`], `TPACKET_V3`): the kernel writes frames into blocks of shared
//!   memory and hands a block over when it is full or after 1 ms; the router reads
//!   the frames where they lie, without a system call per batch. Sends stay
//!   `sendmmsg`.
//! - `ring-v2`: a receive ring of fixed frame slots (`TPACKET_V2`), each handed over
//!   the moment it is written: no system call per batch, and no wait for a block to
//!   fill.
//! - `xdp`: an `AF_XDP` socket ([`crate::xdp`]): an XDP program redirects every frame
//!   to it before the network stack sees it; frames are read and written in memory
//!   shared with the kernel, one `sendto` per batch sent. Where the kernel, the
//!   interface or the privileges do not allow it, the port falls back to `packet`
//!   with a note.
//!
//! [`IoChoice::Auto`] takes the frame ring where the kernel has one and a plain socket
//! otherwise, and says why in a note; a forced mode the kernel lacks is an error.
//!
//! TX timestamps are taken on request only ([`FramePort::send`]'s `stamp`): a router
//! stamps its probes and nothing else, so a data frame never costs an error-queue
//! entry.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};

use thiserror::Error;

use crate::packet::{FrameMeta, PacketError, PacketSocket, PacketStats, BATCH_MAX};
use crate::ring::{RingSocket, RingVersion};
use crate::udp::{NetError, RecvMode, TxTimestamp};
use crate::xdp::{XdpError, XdpPort};

/// How a port moves frames between the kernel and the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IoMode {
    /// `recvmmsg`/`sendmmsg` on a plain `AF_PACKET` socket.
    Packet,
    /// A `TPACKET_V3` receive ring of blocks; `sendmmsg` to send.
    Ring,
    /// A `TPACKET_V2` receive ring of frame slots; `sendmmsg` to send.
    RingV2,
    /// An `AF_XDP` socket fed by an XDP program; falls back to `Packet`.
    Xdp,
}

impl IoMode {
    pub const NAMES: &'static [&'static str] = &["packet", "ring", "ring-v2", "xdp"];

    pub fn name(self) -> &'static str {
        match self {
            IoMode::Packet => "packet",
            IoMode::Ring => "ring",
            IoMode::RingV2 => "ring-v2",
            IoMode::Xdp => "xdp",
        }
    }

    pub fn parse(s: &str) -> Option<IoMode> {
        match s {
            "packet" => Some(IoMode::Packet),
            "ring" => Some(IoMode::Ring),
            "ring-v2" => Some(IoMode::RingV2),
            "xdp" => Some(IoMode::Xdp),
            _ => None,
        }
    }
}

impl fmt::Display for IoMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Which mode to open a port in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoChoice {
    /// The best the kernel offers ([`AUTO_ORDER`]), falling back with a note.
    #[default]
    Auto,
    /// Exactly this one: an error when the kernel lacks it (`xdp`: the packet socket
    /// then, with a note).
    Force(IoMode),
}

/// What [`IoChoice::Auto`] tries, best first.
pub const AUTO_ORDER: [IoMode; 2] = [IoMode::RingV2, IoMode::Packet];

/// Why a port could not be opened.
#[derive(Debug, Error)]
pub enum PortError {
    #[error(transparent)]
    Packet(#[from] PacketError),
    /// The mode was forced and the kernel does not have it.
    #[error("--io {mode}: {source}")]
    ModeUnavailable {
        mode: IoMode,
        #[source]
        source: NetError,
    },
    /// No `AF_XDP` port here (the kernel, the interface or the privileges).
    #[error("--io xdp: {0}")]
    XdpUnavailable(#[source] XdpError),
}

impl PortError {
    pub fn is_permission(&self) -> bool {
        match self {
            PortError::Packet(e) => e.is_permission(),
            PortError::ModeUnavailable { source, .. } => source.is_permission(),
            PortError::XdpUnavailable(_) => false,
        }
    }
}

/// How a port's socket is set up.
#[derive(Clone, Copy, Debug)]
pub struct PortSetup {
    /// Receive and send buffer sizes asked for (bytes; the kernel may give less).
    pub buffer: usize,
    /// Hand frames straight to the driver (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
    /// Kernel RX timestamps on every frame.
    pub rx_timestamps: bool,
    /// TX timestamps for the frames sent with a request ([`FramePort::send`]).
    pub tx_timestamps: bool,
    /// Take no frame until [`FramePort::start`] (packet socket and rings; an
    /// `AF_XDP` port takes frames from its opening): what a router opening several
    /// ports while its neighbours already send needs, so that frames arriving while
    /// it sets up (a ring's allocation takes milliseconds) are not handed to it
    /// later than they can leave.
    pub until_start: bool,
}

impl Default for PortSetup {
    fn default() -> PortSetup {
        PortSetup {
            buffer: 4 << 20,
            qdisc_bypass: false,
            rx_timestamps: true,
            tx_timestamps: false,
            until_start: false,
        }
    }
}

/// One router port: frames in, frames out, TX timestamps of the frames that asked.
pub trait FramePort: AsFd + Send {
    /// How this port moves frames.
    fn mode(&self) -> IoMode;

    /// The interface index the port is bound to.
    fn ifindex(&self) -> u32;

    /// Hands up to `max` received frames to `each`, in order, without waiting;
    /// returns how many. The slice lives only for the call (it may be the kernel's
    /// shared memory, given back right after).
    fn recv(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(&[u8], FrameMeta),
    ) -> Result<usize, NetError>;

    /// Sends `frames` in order; frame `i` gets a TX timestamp when `stamp[i]` (missing
    /// entries: no). Returns how many of the first frames left: fewer when the device
    /// queue filled (the next one was refused; the rest not tried). An error only when
    /// none left.
    fn send(&mut self, frames: &[&[u8]], stamp: &[bool]) -> Result<usize, NetError>;

    /// Hands queued TX timestamps to `each` (ids count the stamped frames from 0);
    /// returns how many error-queue entries were taken (fewer than [`BATCH_MAX`]:
    /// the queue is empty now).
    fn tx_timestamps(&mut self, each: &mut dyn FnMut(TxTimestamp)) -> Result<usize, NetError>;

    /// Frames received and dropped for want of room since the last call.
    fn take_stats(&mut self) -> Result<PacketStats, NetError>;

    /// Takes the socket's pending error (`ENETDOWN` after the interface went down):
    /// call it when a wait reports an error on the port and the error queue is
    /// empty, or the next wait reports it again at once.
    fn take_error(&mut self) -> Result<Option<NetError>, NetError>;

    /// Starts taking frames, for a port opened with [`PortSetup::until_start`]
    /// (frames that arrived before are not handed out); on any other port nothing
    /// changes.
    fn start(&mut self) -> Result<(), NetError> {
        Ok(())
    }
}

/// A plain packet socket as a port: `recvmmsg` into its own slots.
pub struct PacketPort {
    sock: PacketSocket,
    buf: Vec<u8>,
}

/// Receive slot per frame: any frame of a 1500-byte MTU link, VLAN tag included.
pub const SLOT: usize = 2048;

impl PacketPort {
    pub fn new(sock: PacketSocket) -> PacketPort {
        PacketPort {
            sock,
            buf: vec![0u8; SLOT * BATCH_MAX],
        }
    }

    pub fn socket(&self) -> &PacketSocket {
        &self.sock
    }
}

impl AsFd for PacketPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl FramePort for PacketPort {
    fn mode(&self) -> IoMode {
        IoMode::Packet
    }

    fn ifindex(&self) -> u32 {
        self.sock.ifindex()
    }

    fn recv(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(&[u8], FrameMeta),
    ) -> Result<usize, NetError> {
        let n = max.clamp(1, BATCH_MAX);
        let buf = self.buf.get_mut(..n * SLOT).unwrap_or_default();
        self.sock
            .recv_batch(buf, SLOT, RecvMode::Poll, |d, m| each(d, m))
    }

    fn send(&mut self, frames: &[&[u8]], stamp: &[bool]) -> Result<usize, NetError> {
        self.sock.send_batch_stamped(frames, stamp)
    }

    fn tx_timestamps(&mut self, each: &mut dyn FnMut(TxTimestamp)) -> Result<usize, NetError> {
        self.sock.poll_tx_timestamps(each)
    }

    fn take_stats(&mut self) -> Result<PacketStats, NetError> {
        self.sock.take_stats()
    }

    fn take_error(&mut self) -> Result<Option<NetError>, NetError> {
        self.sock.take_error()
    }

    fn start(&mut self) -> Result<(), NetError> {
        self.sock.start_receiving()
    }
}

/// A port opened, and what is worth saying about how.
pub struct OpenedPort {
    pub port: Box<dyn FramePort>,
    pub notes: Vec<String>,
}

impl fmt::Debug for OpenedPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenedPort")
            .field("mode", &self.port.mode())
            .field("notes", &self.notes)
            .finish()
    }
}

/// What `--io xdp` tries, best first.
const XDP_ORDER: [IoMode; 2] = [IoMode::Xdp, IoMode::Packet];

/// Opens a port on `ifname` of the calling thread's namespace in the mode `choice`
/// says, set up as `setup` says.
pub fn open(ifname: &str, choice: IoChoice, setup: &PortSetup) -> Result<OpenedPort, PortError> {
    let ifindex = crate::packet::ifindex_of(ifname)?;
    let mut notes = Vec::new();
    let order: &[IoMode] = match &choice {
        IoChoice::Auto => &AUTO_ORDER,
        IoChoice::Force(IoMode::Xdp) => &XDP_ORDER,
        IoChoice::Force(m) => std::slice::from_ref(m),
    };
    let mut last = None;
    for &mode in order {
        match open_mode(ifname, ifindex, mode, setup, &mut notes) {
            Ok(port) => {
                if let Some(e) = last.take() {
                    notes.insert(0, fallback_note(ifname, &e, mode));
                }
                return Ok(OpenedPort { port, notes });
            }
            Err(e) if order.len() > 1 && e.is_unavailable() => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| PortError::Packet(PacketError::NoInterface(ifname.into()))))
}

impl PortError {
    /// The mode is missing here (not for want of privileges, except AF_XDP's, which
    /// the packet socket may still have).
    fn is_unavailable(&self) -> bool {
        match self {
            PortError::ModeUnavailable { source, .. } => !source.is_permission(),
            PortError::XdpUnavailable(_) => true,
            PortError::Packet(_) => false,
        }
    }
}

fn fallback_note(ifname: &str, e: &PortError, used: IoMode) -> String {
    let (mode, why) = match e {
        PortError::ModeUnavailable { mode, source } => (*mode, source.to_string()),
        PortError::XdpUnavailable(x) => (IoMode::Xdp, x.to_string()),
        PortError::Packet(p) => (used, p.to_string()),
    };
    format!("{ifname}: the {mode} mode is not available here ({why}): using {used}")
}

fn open_mode(
    ifname: &str,
    ifindex: u32,
    mode: IoMode,
    setup: &PortSetup,
    notes: &mut Vec<String>,
) -> Result<Box<dyn FramePort>, PortError> {
    Ok(match mode {
        IoMode::Packet => {
            let sock = if setup.until_start {
                PacketSocket::bind_index_idle(ifindex)?
            } else {
                PacketSocket::bind_index(ifindex)?
            };
            set_up(ifname, &sock, setup, notes);
            Box::new(PacketPort::new(sock))
        }
        IoMode::Ring | IoMode::RingV2 => {
            let v = if mode == IoMode::Ring {
                RingVersion::V3
            } else {
                RingVersion::V2
            };
            let ring = if setup.until_start {
                RingSocket::bind_index_idle(ifindex, v)
            } else {
                RingSocket::bind_index(ifindex, v)
            };
            let ring = ring.map_err(|e| match e {
                PacketError::Net(source) if source.is_unsupported() => {
                    PortError::ModeUnavailable { mode, source }
                }
                other => PortError::Packet(other),
            })?;
            set_up(ifname, ring.socket(), setup, notes);
            Box::new(ring)
        }
        IoMode::Xdp => {
            let (port, how) = XdpPort::open(ifname, ifindex, setup.tx_timestamps)
                .map_err(PortError::XdpUnavailable)?;
            notes.push(format!(
                "{ifname}: AF_XDP in {} mode, XDP program {}",
                if how.zerocopy { "zero-copy" } else { "copy" },
                if how.native {
                    "in the driver"
                } else {
                    "generic (no driver support)"
                },
            ));
            Box::new(port)
        }
    })
}

/// Buffers, bypass and timestamps; what does not work becomes a note.
fn set_up(ifname: &str, sock: &PacketSocket, setup: &PortSetup, notes: &mut Vec<String>) {
    let _ = sock.set_recv_buffer(setup.buffer);
    let _ = sock.set_send_buffer(setup.buffer);
    if setup.qdisc_bypass {
        if let Err(e) = sock.set_qdisc_bypass(true) {
            notes.push(format!("{ifname}: qdisc bypass unavailable: {e}"));
        }
    }
    if !setup.rx_timestamps && !setup.tx_timestamps {
        return;
    }
    let r = if setup.tx_timestamps {
        sock.enable_tx_timestamps_on_request(setup.rx_timestamps)
    } else {
        sock.enable_timestamping(crate::udp::TimestampConfig {
            rx_software: true,
            ..Default::default()
        })
    };
    match r {
        Ok(s) => notes.extend(s.notes.into_iter().map(|n| format!("{ifname}: {n}"))),
        Err(e) => notes.push(format!(
            "{ifname}: software timestamps unavailable ({e}): hop records carry no kernel RX time"
        )),
    }
}
