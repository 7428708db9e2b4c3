//! A router port over an `AF_XDP` socket (`--io xdp`): an XDP program on the
//! interface ([`crate::xdp_prog`]) redirects every received frame to the socket
//! before the kernel's network stack sees it, and the socket hands it over in memory
//! shared with the process (the UMEM); frames to send are written into the same
//! memory and one `sendto` hands the batch to the driver.
//!
//! The shared memory: a UMEM of 4,096 chunks of 2 KiB (8 MiB), half of them lent to
//! the kernel for receiving (the fill ring), half kept for sending; four rings of
//! 2,048 entries — fill and completion (chunk addresses), receive and transmit
//! (address and length). Each ring has a producer and a consumer index, each written
//! by one side only: the process reads the other side's index with acquire ordering
//! and publishes its own with release ordering, and touches a chunk only while the
//! rings say it is the process's.
//!
//! The socket is bound without asking for a mode: the kernel takes zero-copy where
//! the driver offers it and copies otherwise (veth: copy mode; the note says which).
//! The port reads receive queue 0; an interface using more receive queues is refused
//! (its other queues' frames would pass to the stack, unseen by the router).
//!
//! Receive times: the XDP program writes the kernel's `CLOCK_MONOTONIC` time into
//! metadata in front of each frame, which the port turns into `CLOCK_REALTIME` (the
//! clock of a packet socket's timestamps) with the offset between the two clocks
//! read at each batch; [`FrameMeta::kernel_rx`] is `None` for a frame without it.
//! What the kernel does not give an `AF_XDP` socket: checksum state
//! ([`FrameMeta::csum_not_ready`] is always false: the lab turns checksum offloads
//! off on its links) and TX timestamps. A frame that asks for a TX
//! timestamp goes out through a send-only packet socket on the same interface, after
//! every frame queued before it has left, so the order holds and the stamp is the
//! packet socket's.
//!
//! Anything missing — no `bpf(2)`, no `AF_XDP`, an interface with another XDP program
//! or several receive queues, too few privileges — is an [`XdpError`]; the port
//! layer ([`crate::port`]) then falls back to the packet socket with a note.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use lockstep_core::{ClockId, Instant};

use crate::iface::Mac;
use crate::packet::{FrameKind, FrameMeta, PacketSocket, PacketStats};
use crate::port::{FramePort, IoMode};
use crate::sockopt::{getsockopt, setsockopt};
use crate::sys::last_error;
use crate::udp::{NetError, TxTimestamp};
pub use crate::xdp_prog::XdpError;
use crate::xdp_prog::{XdpLink, XdpProgram, XskMap, META_LEN, META_MAGIC};

// From <linux/if_xdp.h> and <linux/socket.h>.
const AF_XDP: libc::c_int = 44;
const SOL_XDP: libc::c_int = 283;
const XDP_MMAP_OFFSETS: libc::c_int = 1;
const XDP_RX_RING: libc::c_int = 2;
const XDP_TX_RING: libc::c_int = 3;
const XDP_UMEM_REG: libc::c_int = 4;
const XDP_UMEM_FILL_RING: libc::c_int = 5;
const XDP_UMEM_COMPLETION_RING: libc::c_int = 6;
const XDP_STATISTICS: libc::c_int = 7;
const XDP_OPTIONS: libc::c_int = 8;
const XDP_OPTIONS_ZEROCOPY: u32 = 1;
const XDP_PGOFF_RX_RING: libc::off_t = 0;
const XDP_PGOFF_TX_RING: libc::off_t = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: libc::off_t = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: libc::off_t = 0x1_8000_0000;

/// One UMEM chunk: a frame of a 1500-byte MTU link with room to spare.
const CHUNK: usize = 2048;
/// Entries of each ring, and chunks lent for receiving (the rest are for sending).
const RING: u32 = 2048;
const RX_CHUNKS: usize = RING as usize;
const TX_CHUNKS: usize = RING as usize;
const UMEM_LEN: usize = CHUNK * (RX_CHUNKS + TX_CHUNKS);
/// Attempts at a receive queue another socket still holds.
pub const BUSY_TRIES: u32 = 100;
/// `sendto` calls per send at most: the copy mode sends 32 frames per call.
const KICKS: usize = RING as usize / 32 + 2;

use crate::mmap::Mmap as Region;

impl Region {
    /// `len` bytes of `fd` at `pgoff` (shared), or anonymous memory (`fd` -1).
    fn map(
        fd: RawFd,
        len: usize,
        pgoff: libc::off_t,
        what: &'static str,
    ) -> Result<Region, XdpError> {
        Region::new((fd >= 0).then_some(fd), len, pgoff).map_err(|e| XdpError::from_errno(what, e))
    }

    /// The receive time the XDP program put in front of the frame at `addr`
    /// (`CLOCK_MONOTONIC` ns), if it did; the mark is cleared, so a chunk lent again
    /// never shows an old frame's time.
    fn take_stamp(&mut self, addr: u64) -> Option<i64> {
        let a = usize::try_from(addr).ok()?;
        if a % CHUNK < META_LEN || a > self.len {
            return None;
        }
        let m = a - META_LEN;
        // SAFETY: the 16 bytes before the frame lie inside its chunk (checked: the
        // frame starts at least 16 bytes into it) and so inside the region; the
        // chunk is the process's until it goes back to the fill ring. Unaligned
        // accesses: the kernel places the frame, not us.
        unsafe {
            let p = self.ptr.add(m);
            if p.cast::<u32>().read_unaligned() != META_MAGIC {
                return None;
            }
            p.cast::<u32>().write_unaligned(0);
            i64::try_from(p.add(8).cast::<u64>().read_unaligned()).ok()
        }
    }

    /// `len` bytes at `addr`, when inside the region.
    fn bytes(&self, addr: u64, len: u32) -> Option<&[u8]> {
        let start = usize::try_from(addr).ok()?;
        if start.checked_add(len as usize)? > self.len {
            return None;
        }
        // SAFETY: in bounds (checked); the caller owns the chunk (the receive ring
        // handed it over and it goes back to the fill ring only after this slice's
        // last use, which ends with the caller's borrow).
        Some(unsafe { std::slice::from_raw_parts(self.ptr.add(start), len as usize) })
    }
}

/// `struct xdp_ring_offset`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct RingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

/// `struct xdp_mmap_offsets`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct MmapOffsets {
    rx: RingOffset,
    tx: RingOffset,
    fr: RingOffset,
    cr: RingOffset,
}

/// `struct xdp_umem_reg`.
#[repr(C)]
struct UmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

/// `struct sockaddr_xdp`.
#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct XdpStatistics {
    rx_dropped: u64,
    rx_invalid_descs: u64,
    tx_invalid_descs: u64,
    rx_ring_full: u64,
    rx_fill_ring_empty_descs: u64,
    tx_ring_empty_descs: u64,
}

impl XdpStatistics {
    /// Frames the kernel dropped on the way to this socket: for want of a chunk
    /// (`rx_dropped`) or of room in the receive ring (`rx_ring_full`). An empty fill
    /// ring is not added: a frame dropped for it is counted in `rx_dropped` and
    /// again in `rx_fill_ring_empty_descs` (measured on veth, kernel 6.18: the sum
    /// of all three was 1,830,302 for 915,133 frames sent and never received).
    fn rx_lost(&self) -> u64 {
        self.rx_dropped.wrapping_add(self.rx_ring_full)
    }
}

/// One of the four rings: entries of `entry` bytes (8: a chunk address; 16: address,
/// length, options) and the two indexes, mapped from the socket.
struct Ring {
    map: Region,
    producer: usize,
    consumer: usize,
    desc: usize,
    size: u32,
    entry: usize,
    /// The process's own index: the producer of fill and TX, the consumer of
    /// receive and completion.
    local: u32,
}

impl Ring {
    fn map(
        fd: RawFd,
        off: &RingOffset,
        entry: usize,
        pgoff: libc::off_t,
        what: &'static str,
    ) -> Result<Ring, XdpError> {
        let bad = || XdpError::Io {
            op: what,
            source: io::Error::from_raw_os_error(libc::EINVAL),
        };
        let idx = |v: u64| usize::try_from(v).ok().filter(|o| o % 4 == 0);
        let (Some(producer), Some(consumer), Some(desc)) =
            (idx(off.producer), idx(off.consumer), idx(off.desc))
        else {
            return Err(bad());
        };
        let len = desc + RING as usize * entry;
        if producer.max(consumer) + 4 > len || desc % 8 != 0 {
            return Err(bad());
        }
        let map = Region::map(fd, len, pgoff, what)?;
        // A fresh ring's indexes are both 0.
        Ok(Ring {
            map,
            producer,
            consumer,
            desc,
            size: RING,
            entry,
            local: 0,
        })
    }

    fn index(&self, off: usize) -> &AtomicU32 {
        // SAFETY: `off` is 4-aligned and 4 bytes inside the mapping (checked when it
        // was mapped); the kernel writes its index concurrently, so both are only
        // ever accessed atomically.
        unsafe { &*self.map.ptr.add(off).cast::<AtomicU32>() }
    }

    /// Consumer side: entries the kernel has produced and the process not taken.
    fn ready(&self) -> u32 {
        let p = self.index(self.producer).load(Ordering::Acquire);
        p.wrapping_sub(self.local).min(self.size)
    }

    /// Consumer side: the first `n` ready entries are done with.
    fn release(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.index(self.consumer)
            .store(self.local, Ordering::Release);
    }

    /// Producer side: free entries.
    fn room(&self) -> u32 {
        let c = self.index(self.consumer).load(Ordering::Acquire);
        self.size.saturating_sub(self.local.wrapping_sub(c))
    }

    /// Producer side: produced entries the kernel has not consumed yet.
    fn unconsumed(&self) -> u32 {
        self.size - self.room()
    }

    /// Producer side: the next `n` entries are written.
    fn submit(&mut self, n: u32) {
        self.local = self.local.wrapping_add(n);
        self.index(self.producer)
            .store(self.local, Ordering::Release);
    }

    /// The entry `i` after the process's index.
    fn slot(&self, i: u32) -> *mut u8 {
        let at = (self.local.wrapping_add(i) & (self.size - 1)) as usize;
        // SAFETY: `at < size`, and the mapping holds `size` entries from `desc`.
        unsafe { self.map.ptr.add(self.desc + at * self.entry) }
    }

    /// Reads the address (and, in a 16-byte entry, the length) of entry `i`.
    fn read(&self, i: u32) -> (u64, u32) {
        let p = self.slot(i);
        // SAFETY: the entry is inside the mapping (`slot`) and 8-aligned (`desc` and
        // the entry size are); the process owns it (before its index, after the
        // kernel's, seen with acquire ordering).
        unsafe {
            let addr = p.cast::<u64>().read();
            let len = if self.entry == 16 {
                p.add(8).cast::<u32>().read()
            } else {
                0
            };
            (addr, len)
        }
    }

    /// Writes entry `i`: an address, and in a 16-byte entry its length.
    fn write(&mut self, i: u32, addr: u64, len: u32) {
        let p = self.slot(i);
        // SAFETY: as in `read`: inside the mapping, aligned, and the process's to
        // write (free: the kernel consumed it, seen with acquire ordering in `room`).
        unsafe {
            p.cast::<u64>().write(addr);
            if self.entry == 16 {
                p.add(8).cast::<u32>().write(len);
                p.add(12).cast::<u32>().write(0);
            }
        }
    }
}

/// An `AF_XDP` port on one interface (receive queue 0).
pub struct XdpPort {
    // Dropped first: the program leaves the interface before the socket closes.
    _link: XdpLink,
    _prog: XdpProgram,
    _map: XskMap,
    rx: Ring,
    tx: Ring,
    fill: Ring,
    comp: Ring,
    umem: Region,
    fd: OwnedFd,
    /// Chunks free for sending.
    free_tx: Vec<u64>,
    /// The send-only packet socket for frames that ask for a TX timestamp.
    stamped: Option<PacketSocket>,
    ifindex: u32,
    mac: Mac,
    /// Frames handed out, and the kernel's drop counters, at the last `take_stats`.
    received: u64,
    lost: u64,
}

impl std::fmt::Debug for XdpPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XdpPort")
            .field("ifindex", &self.ifindex)
            .finish_non_exhaustive()
    }
}

/// What [`XdpPort::open`] says about how it opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XdpModes {
    /// The kernel gave zero-copy (not the copy mode).
    pub zerocopy: bool,
    /// The XDP program runs in the driver (not in the generic path).
    pub native: bool,
}

fn sockopt_err(op: &'static str) -> impl FnOnce(io::Error) -> XdpError {
    move |e| XdpError::from_errno(op, e)
}

/// A fresh `AF_XDP` socket.
fn xdp_socket() -> Result<OwnedFd, XdpError> {
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = last_error();
        return Err(match e.raw_os_error() {
            Some(libc::EAFNOSUPPORT) => XdpError::Unsupported {
                what: "AF_XDP",
                detail: "the kernel was built without AF_XDP (CONFIG_XDP_SOCKETS)".into(),
            },
            _ => XdpError::from_errno("socket(AF_XDP)", e),
        });
    }
    // SAFETY: a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The socket's UMEM and four rings, set up and mapped.
fn set_up_rings(fd: RawFd) -> Result<(Region, [Ring; 4]), XdpError> {
    let umem = Region::map(-1, UMEM_LEN, 0, "mmap(UMEM)")?;
    let reg = UmemReg {
        addr: umem.ptr as u64,
        len: UMEM_LEN as u64,
        chunk_size: CHUNK as u32,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(fd, SOL_XDP, XDP_UMEM_REG, &reg).map_err(sockopt_err("setsockopt(XDP_UMEM_REG)"))?;
    for (name, op) in [
        (XDP_UMEM_FILL_RING, "setsockopt(XDP_UMEM_FILL_RING)"),
        (
            XDP_UMEM_COMPLETION_RING,
            "setsockopt(XDP_UMEM_COMPLETION_RING)",
        ),
        (XDP_RX_RING, "setsockopt(XDP_RX_RING)"),
        (XDP_TX_RING, "setsockopt(XDP_TX_RING)"),
    ] {
        setsockopt(fd, SOL_XDP, name, &RING).map_err(sockopt_err(op))?;
    }
    let off: MmapOffsets = getsockopt(fd, SOL_XDP, XDP_MMAP_OFFSETS, MmapOffsets::default())
        .map_err(sockopt_err("getsockopt(XDP_MMAP_OFFSETS)"))?;
    let rx = Ring::map(
        fd,
        &off.rx,
        16,
        XDP_PGOFF_RX_RING,
        "mmap(AF_XDP receive ring)",
    )?;
    let tx = Ring::map(
        fd,
        &off.tx,
        16,
        XDP_PGOFF_TX_RING,
        "mmap(AF_XDP transmit ring)",
    )?;
    let fill = Ring::map(
        fd,
        &off.fr,
        8,
        XDP_UMEM_PGOFF_FILL_RING,
        "mmap(AF_XDP fill ring)",
    )?;
    let comp = Ring::map(
        fd,
        &off.cr,
        8,
        XDP_UMEM_PGOFF_COMPLETION_RING,
        "mmap(AF_XDP completion ring)",
    )?;
    Ok((umem, [rx, tx, fill, comp]))
}

/// Binds `fd` to queue 0 of `ifindex`, letting the kernel choose copy or zero-copy;
/// whether it chose zero-copy.
fn bind(fd: RawFd, ifindex: u32, ifname: &str) -> Result<bool, XdpError> {
    let sxdp = SockaddrXdp {
        family: AF_XDP as u16,
        flags: 0,
        ifindex,
        queue_id: 0,
        shared_umem_fd: 0,
    };
    // SAFETY: `sxdp` is a valid sockaddr_xdp and its size is passed.
    let rc = unsafe {
        libc::bind(
            fd,
            (&sxdp as *const SockaddrXdp).cast(),
            std::mem::size_of::<SockaddrXdp>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        let e = last_error();
        return Err(match e.raw_os_error() {
            Some(libc::EBUSY) => XdpError::QueueBusy {
                ifname: ifname.into(),
            },
            _ => XdpError::from_errno("bind(AF_XDP)", e),
        });
    }
    let opts: u32 = getsockopt(fd, SOL_XDP, XDP_OPTIONS, 0u32).unwrap_or(0);
    Ok(opts & XDP_OPTIONS_ZEROCOPY != 0)
}

/// Refuses an interface that spreads its frames over several receive queues.
fn check_queues(ifname: &str) -> Result<(), XdpError> {
    match crate::ethtool::rx_queues(ifname) {
        Ok(n) if n > 1 => Err(XdpError::Unsupported {
            what: "an AF_XDP port",
            detail: format!("{ifname} uses {n} receive queues; an xdp port reads queue 0 only"),
        }),
        _ => Ok(()),
    }
}

impl XdpPort {
    /// Opens a port on `ifname` (index `ifindex`) of the calling thread's namespace;
    /// with `tx_timestamps`, frames that ask get a TX timestamp (through a packet
    /// socket).
    ///
    /// A socket closed on the queue (a router that just stopped) keeps it for a
    /// moment (the kernel releases it in the background): a taken queue is tried
    /// again, for up to [`BUSY_TRIES`] × 5 ms.
    pub fn open(
        ifname: &str,
        ifindex: u32,
        tx_timestamps: bool,
    ) -> Result<(XdpPort, XdpModes), XdpError> {
        check_queues(ifname)?;
        let mut tries = 1;
        loop {
            match XdpPort::open_once(ifname, ifindex, tx_timestamps) {
                Err(XdpError::QueueBusy { .. }) if tries < BUSY_TRIES => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                r => return r,
            }
        }
    }

    fn open_once(
        ifname: &str,
        ifindex: u32,
        tx_timestamps: bool,
    ) -> Result<(XdpPort, XdpModes), XdpError> {
        let fd = xdp_socket()?;
        let (umem, [rx, tx, mut fill, comp]) = set_up_rings(fd.as_raw_fd())?;
        // Lend the first half of the chunks to the kernel for receiving.
        let n = fill.room().min(RX_CHUNKS as u32);
        for i in 0..n {
            fill.write(i, u64::from(i) * CHUNK as u64, 0);
        }
        fill.submit(n);
        let zerocopy = bind(fd.as_raw_fd(), ifindex, ifname)?;
        let map = XskMap::create(1)?;
        map.insert(0, fd.as_raw_fd())?;
        let prog = XdpProgram::load(&map)?;
        let link = XdpLink::attach(&prog, ifindex, ifname)?;
        let native = link.native;
        let stamped = if tx_timestamps {
            Some(stamping_socket(ifindex)?)
        } else {
            None
        };
        let port = XdpPort {
            _link: link,
            _prog: prog,
            _map: map,
            rx,
            tx,
            fill,
            comp,
            umem,
            fd,
            free_tx: (RX_CHUNKS..RX_CHUNKS + TX_CHUNKS)
                .map(|c| (c * CHUNK) as u64)
                .collect(),
            stamped,
            ifindex,
            mac: crate::iface::mac(ifname).unwrap_or_default(),
            received: 0,
            lost: 0,
        };
        Ok((port, XdpModes { zerocopy, native }))
    }

    /// Hands up to `max` received frames to `each` and lends their chunks back to
    /// the kernel; returns how many. Never waits.
    pub fn recv_frames(&mut self, max: usize, each: &mut dyn FnMut(&[u8], FrameMeta)) -> usize {
        if self.tx.unconsumed() > 0 {
            // frames a busy device left in the transmit ring
            let _ = self.kick();
        }
        let want = u32::try_from(max).unwrap_or(u32::MAX);
        let n = self.rx.ready().min(want).min(self.fill.room());
        if n == 0 {
            return 0;
        }
        let to_realtime = realtime_offset();
        let mut handed = 0;
        for i in 0..n {
            let (addr, len) = self.rx.read(i);
            let stamp = self.umem.take_stamp(addr);
            if let Some(data) = self.umem.bytes(addr, len) {
                let mut m = meta(data, &self.mac);
                m.kernel_rx = stamp.map(|t| Instant::new(ClockId::Realtime, t + to_realtime));
                each(data, m);
                handed += 1;
            }
            self.fill.write(i, addr & !(CHUNK as u64 - 1), 0);
        }
        self.rx.release(n);
        self.fill.submit(n);
        self.received += handed as u64;
        handed
    }

    /// Takes the chunks the kernel has sent back onto the free list.
    fn reclaim(&mut self) {
        let n = self.comp.ready();
        for i in 0..n {
            let (addr, _) = self.comp.read(i);
            self.free_tx.push(addr & !(CHUNK as u64 - 1));
        }
        self.comp.release(n);
    }

    /// Copies `frames` into free chunks and the transmit ring, in order; how many
    /// fitted (a frame longer than a chunk stops it too).
    fn queue(&mut self, frames: &[&[u8]]) -> usize {
        self.reclaim();
        let mut n = 0u32;
        let room = self.tx.room();
        for f in frames {
            if n >= room || f.len() > CHUNK {
                break;
            }
            let Some(addr) = self.free_tx.pop() else {
                break;
            };
            // SAFETY: `addr` is a free sending chunk (the process's: never lent to
            // the fill ring, back from the completion ring or never sent), inside
            // the UMEM, and the frame fits it (checked).
            unsafe {
                let dst = self.umem.ptr.add(addr as usize);
                std::ptr::copy_nonoverlapping(f.as_ptr(), dst, f.len());
            }
            self.tx.write(n, addr, f.len() as u32);
            n += 1;
        }
        self.tx.submit(n);
        n as usize
    }

    /// Has the kernel send what is in the transmit ring (`sendto`), until the ring is
    /// empty or the device takes no more.
    fn kick(&mut self) -> Result<(), NetError> {
        for _ in 0..KICKS {
            if self.tx.unconsumed() == 0 {
                break;
            }
            self.reclaim();
            // SAFETY: a kick without data: the kernel reads the transmit ring.
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                continue;
            }
            let e = last_error();
            match e.raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                Some(libc::EBUSY) | Some(libc::ENOBUFS) => break,
                _ => {
                    return Err(NetError::Io {
                        op: "sendto(AF_XDP)",
                        source: e,
                    })
                }
            }
        }
        self.reclaim();
        Ok(())
    }

    /// Sends `frames` in order; the stamped ones through the packet socket.
    fn send_frames(&mut self, frames: &[&[u8]], stamp: &[bool]) -> Result<usize, NetError> {
        let stamped = |i: usize| stamp.get(i).copied().unwrap_or(false);
        let mut sent = 0;
        while sent < frames.len() {
            if stamped(sent) && self.stamped.is_some() {
                self.kick()?;
                let sock = self.stamped.as_ref();
                match sock.map(|s| s.send_batch_stamped(&frames[sent..=sent], &[true])) {
                    Some(Ok(1)) => sent += 1,
                    Some(Err(e)) if sent == 0 => return Err(e),
                    _ => break,
                }
                continue;
            }
            let end = (sent..frames.len())
                .find(|&i| stamped(i) && self.stamped.is_some())
                .unwrap_or(frames.len());
            let q = self.queue(&frames[sent..end]);
            sent += q;
            if sent < end {
                break;
            }
        }
        match self.kick() {
            Err(e) if sent == 0 => Err(e),
            _ => Ok(sent),
        }
    }

    fn stats(&self) -> Result<XdpStatistics, NetError> {
        getsockopt(
            self.fd.as_raw_fd(),
            SOL_XDP,
            XDP_STATISTICS,
            XdpStatistics::default(),
        )
        .map_err(|source| NetError::Io {
            op: "getsockopt(XDP_STATISTICS)",
            source,
        })
    }
}

/// The send-only packet socket for timestamped frames.
fn stamping_socket(ifindex: u32) -> Result<PacketSocket, XdpError> {
    let sock = PacketSocket::bind_send_only(ifindex).map_err(|e| XdpError::Unsupported {
        what: "TX timestamps on an AF_XDP port",
        detail: e.to_string(),
    })?;
    let _ = sock.set_qdisc_bypass(true);
    sock.enable_tx_timestamps_on_request(false)
        .map_err(|e| XdpError::Unsupported {
            what: "TX timestamps on an AF_XDP port",
            detail: e.to_string(),
        })?;
    Ok(sock)
}

/// `CLOCK_REALTIME` minus `CLOCK_MONOTONIC` now: what turns the program's receive
/// times into the clock of the kernel's socket timestamps.
fn realtime_offset() -> i64 {
    let mono = crate::clock::now(ClockId::Monotonic).ns;
    let real = crate::clock::now(ClockId::Realtime).ns;
    real - mono
}

/// What can be said of a frame from an `AF_XDP` socket: its length and, from its
/// destination MAC, who it is for.
fn meta(data: &[u8], own: &Mac) -> FrameMeta {
    let kind = match data.get(..6) {
        Some(d) if d == own => FrameKind::Host,
        Some(d) if d.iter().all(|&b| b == 0xff) => FrameKind::Broadcast,
        Some(d) if d[0] & 1 == 1 => FrameKind::Multicast,
        _ => FrameKind::OtherHost,
    };
    FrameMeta {
        len: data.len(),
        kernel_rx: None,
        csum_not_ready: false,
        csum_valid: false,
        truncated: false,
        vlan: None,
        kind,
    }
}

impl AsFd for XdpPort {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl FramePort for XdpPort {
    fn mode(&self) -> IoMode {
        IoMode::Xdp
    }

    fn ifindex(&self) -> u32 {
        self.ifindex
    }

    fn recv(
        &mut self,
        max: usize,
        each: &mut dyn FnMut(&[u8], FrameMeta),
    ) -> Result<usize, NetError> {
        Ok(self.recv_frames(max.max(1), each))
    }

    fn send(&mut self, frames: &[&[u8]], stamp: &[bool]) -> Result<usize, NetError> {
        self.send_frames(frames, stamp)
    }

    fn tx_timestamps(&mut self, each: &mut dyn FnMut(TxTimestamp)) -> Result<usize, NetError> {
        match &mut self.stamped {
            Some(s) => s.poll_tx_timestamps(each),
            None => Ok(0),
        }
    }

    fn take_stats(&mut self) -> Result<PacketStats, NetError> {
        let lost = self.stats()?.rx_lost();
        let drops = lost.wrapping_sub(self.lost);
        self.lost = lost;
        let packets = std::mem::take(&mut self.received).wrapping_add(drops);
        Ok(PacketStats {
            packets: u32::try_from(packets).unwrap_or(u32::MAX),
            drops: u32::try_from(drops).unwrap_or(u32::MAX),
        })
    }

    fn take_error(&mut self) -> Result<Option<NetError>, NetError> {
        let v: libc::c_int = getsockopt(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR, 0)
            .map_err(|source| NetError::Io {
            op: "getsockopt(SO_ERROR)",
            source,
        })?;
        if v != 0 {
            return Ok(Some(NetError::Io {
                op: "socket error",
                source: io::Error::from_raw_os_error(v),
            }));
        }
        match &self.stamped {
            Some(s) => s.take_error(),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_dropped_for_want_of_a_chunk_is_lost_once() {
        let s = XdpStatistics {
            rx_dropped: 7,
            rx_ring_full: 3,
            rx_fill_ring_empty_descs: 7,
            ..XdpStatistics::default()
        };
        assert_eq!(s.rx_lost(), 10);
    }

    #[test]
    fn kernel_structures_have_their_kernel_sizes() {
        assert_eq!(std::mem::size_of::<RingOffset>(), 32);
        assert_eq!(std::mem::size_of::<MmapOffsets>(), 128);
        assert_eq!(std::mem::size_of::<UmemReg>(), 32);
        assert_eq!(std::mem::size_of::<SockaddrXdp>(), 16);
        assert_eq!(std::mem::size_of::<XdpStatistics>(), 48);
    }

    #[test]
    fn a_frame_is_classified_by_its_destination() {
        let own = [2, 0, 0, 0, 0, 1];
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&own);
        assert_eq!(meta(&f, &own).kind, FrameKind::Host);
        f[..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(meta(&f, &own).kind, FrameKind::Broadcast);
        f[..6].copy_from_slice(&[0x01, 0, 0x5e, 0, 0, 1]);
        assert_eq!(meta(&f, &own).kind, FrameKind::Multicast);
        f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        assert_eq!(meta(&f, &own).kind, FrameKind::OtherHost);
        let m = meta(&f, &own);
        assert_eq!((m.len, m.kernel_rx, m.csum_not_ready), (60, None, false));
        assert_eq!(meta(&[1, 2], &own).kind, FrameKind::OtherHost);
    }
}
