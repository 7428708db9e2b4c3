//! The kernel side of an `AF_XDP` port ([`crate::xdp`]): an `XSKMAP` that holds the
//! port's socket, an 18-instruction XDP program that stamps every frame of an
//! interface's receive queue with its receive time and redirects it to the socket of
//! that queue, and the link that attaches the program to the interface — all made
//! with the `bpf(2)` system call, no compiler or library needed.
//!
//! The program, in eBPF assembly: it stamps the frame with the kernel's monotonic
//! time in 16 bytes of XDP metadata in front of it (a magic word, then the time),
//! which the copy into the socket keeps, and redirects it to the socket of its
//! receive queue:
//!
//! ```text
//!  0  r6 = r1                      ; ctx, kept across the calls
//!  1  r2 = -16
//!  2  call bpf_xdp_adjust_meta     ; 16 bytes of metadata (helper 54)
//!  3  if r0 != 0 goto 12           ; no room: redirect unstamped
//!  4  call bpf_ktime_get_ns        ; CLOCK_MONOTONIC (helper 5)
//!  5  r2 = *(u32 *)(r6 + 8)        ; ctx->data_meta
//!  6  r3 = *(u32 *)(r6 + 0)        ; ctx->data
//!  7  r4 = r2
//!  8  r4 += 16
//!  9  if r4 > r3 goto 12           ; the bounds check the verifier wants
//! 10  *(u32 *)(r2 + 0) = MAGIC
//! 11  *(u64 *)(r2 + 8) = r0
//! 12  r2 = *(u32 *)(r6 + 16)       ; ctx->rx_queue_index: the map key
//! 13  r1 = map[XSKMAP]             ; ld_imm64 with a map file descriptor (2 slots)
//! 15  r3 = 2                       ; XDP_PASS: what happens when the queue has no socket
//! 16  call bpf_redirect_map        ; helper 51
//! 17  exit                         ; r0: XDP_REDIRECT, or XDP_PASS
//! ```
//!
//! The link (`BPF_LINK_CREATE`, Linux 5.9) detaches the program when its descriptor
//! is closed, so a router that dies leaves no program on the interface. It is
//! attached in the driver's native mode where the driver has one (veth does), and
//! in the generic mode otherwise.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use thiserror::Error;

use crate::sys::last_error;

// bpf(2) commands, map and program types, from <linux/bpf.h>.
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_KTIME_GET_NS: i32 = 5;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const BPF_FUNC_XDP_ADJUST_META: i32 = 54;
/// The first word of the metadata the program writes (`RXTS`), then 4 bytes of
/// padding, then the receive time (`CLOCK_MONOTONIC`, ns).
pub const META_MAGIC: u32 = 0x5354_5852;
/// Bytes of metadata in front of a stamped frame.
pub const META_LEN: usize = 16;
const XDP_PASS: i32 = 2;
// From <linux/if_link.h>.
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// Why the XDP side of a port could not be set up.
#[derive(Debug, Error)]
pub enum XdpError {
    #[error(
        "{what}: permission denied (needs CAP_BPF, CAP_NET_ADMIN and CAP_NET_RAW: run as root)"
    )]
    Denied { what: &'static str },
    #[error("{what} is not available here: {detail}")]
    Unsupported { what: &'static str, detail: String },
    #[error("{ifname} already has an XDP program attached (another port or tool on it)")]
    Busy { ifname: String },
    #[error("receive queue 0 of {ifname} is taken by another AF_XDP socket")]
    QueueBusy { ifname: String },
    /// `verdict`: the verifier's reason (its log without the instructions and
    /// register states it walked through); `log`: the whole log.
    #[error("the kernel refused the XDP program: {errno}: {verdict}")]
    Refused {
        errno: String,
        verdict: String,
        log: String,
    },
    #[error("{op}: {source}")]
    Io {
        op: &'static str,
        #[source]
        source: io::Error,
    },
}

impl XdpError {
    /// From a failed call `op`: permission and "not here" errors made plain.
    pub(crate) fn from_errno(what: &'static str, e: io::Error) -> XdpError {
        match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => XdpError::Denied { what },
            Some(libc::ENOSYS) => XdpError::Unsupported {
                what,
                detail: "the kernel was built without bpf(2) (CONFIG_BPF_SYSCALL)".into(),
            },
            Some(libc::EOPNOTSUPP) | Some(libc::EAFNOSUPPORT) | Some(libc::EPROTONOSUPPORT) => {
                XdpError::Unsupported {
                    what,
                    detail: format!("{e}"),
                }
            }
            _ => XdpError::Io {
                op: what,
                source: e,
            },
        }
    }
}

/// A `union bpf_attr`, zeroed, with fields set by byte offset.
#[repr(C, align(8))]
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }

    fn u32(mut self, off: usize, v: u32) -> Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }

    fn u64(mut self, off: usize, v: u64) -> Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

/// `bpf(cmd, attr)`: the returned number (a descriptor for the creating commands).
fn bpf(cmd: libc::c_long, attr: &mut Attr) -> io::Result<RawFd> {
    // SAFETY: `attr` is a writable, 8-aligned 128-byte `bpf_attr` whose unused bytes
    // are zero (the kernel checks); pointers inside it point at live buffers of the
    // caller for the length of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.0.as_mut_ptr(),
            attr.0.len() as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(last_error());
    }
    RawFd::try_from(r).map_err(|_| io::Error::from_raw_os_error(libc::EOVERFLOW))
}

/// `bpf` for a command that makes a descriptor.
fn bpf_fd(cmd: libc::c_long, attr: &mut Attr) -> io::Result<OwnedFd> {
    let fd = bpf(cmd, attr)?;
    // SAFETY: the kernel just made `fd` for this process; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// An `XSKMAP`: receive queue number → `AF_XDP` socket.
#[derive(Debug)]
pub struct XskMap {
    fd: OwnedFd,
}

impl XskMap {
    /// A map for queues `0..entries`.
    pub fn create(entries: u32) -> Result<XskMap, XdpError> {
        let mut a = Attr::new()
            .u32(0, BPF_MAP_TYPE_XSKMAP)
            .u32(4, 4)
            .u32(8, 4)
            .u32(12, entries.max(1));
        let fd = bpf_fd(BPF_MAP_CREATE, &mut a).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => XdpError::Unsupported {
                what: "an XSKMAP",
                detail: "the kernel was built without AF_XDP (CONFIG_XDP_SOCKETS)".into(),
            },
            _ => XdpError::from_errno("bpf(BPF_MAP_CREATE, XSKMAP)", e),
        })?;
        Ok(XskMap { fd })
    }

    /// Puts the socket `sock` in the map for receive queue `queue`.
    pub fn insert(&self, queue: u32, sock: RawFd) -> Result<(), XdpError> {
        let key = queue;
        let value = u32::try_from(sock).map_err(|_| XdpError::Io {
            op: "bpf(BPF_MAP_UPDATE_ELEM)",
            source: io::Error::from_raw_os_error(libc::EBADF),
        })?;
        let mut a = Attr::new()
            .u32(0, self.fd.as_raw_fd() as u32)
            .u64(8, &key as *const u32 as u64)
            .u64(16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a)
            .map(|_| ())
            .map_err(|e| XdpError::from_errno("bpf(BPF_MAP_UPDATE_ELEM, XSKMAP)", e))
    }
}

/// One eBPF instruction: opcode, destination and source registers, offset, immediate.
fn insn(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = op;
    b[1] = (src << 4) | (dst & 0x0f);
    b[2..4].copy_from_slice(&off.to_ne_bytes());
    b[4..8].copy_from_slice(&imm.to_ne_bytes());
    b
}

/// The program's instructions, with the map descriptor `map_fd` in its `ld_imm64`.
pub(crate) fn program(map_fd: i32) -> Vec<u8> {
    let meta = -(META_LEN as i32);
    [
        insn(0xbf, 6, 1, 0, 0),                        // mov64 r6, r1
        insn(0xb7, 2, 0, 0, meta),                     // mov64 r2, -16
        insn(0x85, 0, 0, 0, BPF_FUNC_XDP_ADJUST_META), // call
        insn(0x55, 0, 0, 8, 0),                        // jne r0, 0, +8
        insn(0x85, 0, 0, 0, BPF_FUNC_KTIME_GET_NS),    // call
        insn(0x61, 2, 6, 8, 0),                        // ldxw r2, [r6 + 8]
        insn(0x61, 3, 6, 0, 0),                        // ldxw r3, [r6 + 0]
        insn(0xbf, 4, 2, 0, 0),                        // mov64 r4, r2
        insn(0x07, 4, 0, 0, META_LEN as i32),          // add64 r4, 16
        insn(0x2d, 4, 3, 2, 0),                        // jgt r4, r3, +2
        insn(0x62, 2, 0, 0, META_MAGIC as i32),        // stw [r2 + 0], MAGIC
        insn(0x7b, 2, 0, 8, 0),                        // stxdw [r2 + 8], r0
        insn(0x61, 2, 6, 16, 0),                       // ldxw r2, [r6 + 16]
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),   // ld_imm64 r1, map
        insn(0x00, 0, 0, 0, 0),                        // (its upper half)
        insn(0xb7, 3, 0, 0, XDP_PASS),                 // mov64 r3, XDP_PASS
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),    // call
        insn(0x95, 0, 0, 0, 0),                        // exit
    ]
    .concat()
}

/// The loaded XDP program.
#[derive(Debug)]
pub struct XdpProgram {
    fd: OwnedFd,
}

/// What the verifier says is wrong, from its log: the lines that are neither an
/// instruction it walked (`12: (85) call ...`), a register state (`R1=ctx()`) nor
/// its closing statistics (`processed 3 insns ...`); the log's last line when
/// nothing else is left.
fn verdict(log: &str) -> String {
    let walked = |l: &str| {
        let l = l.trim();
        let numbered = l
            .split_once(':')
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        numbered || l.starts_with('R') && l.contains('=') || l.starts_with("processed ")
    };
    let said: Vec<&str> = log
        .lines()
        .filter(|l| !l.trim().is_empty() && !walked(l))
        .collect();
    if said.is_empty() {
        log.lines().last().unwrap_or("").trim().to_string()
    } else {
        said.join("; ")
    }
}

impl XdpProgram {
    /// Loads the redirect program for `map`.
    pub fn load(map: &XskMap) -> Result<XdpProgram, XdpError> {
        let code = program(map.fd.as_raw_fd());
        let license = CString::from(c"GPL");
        let mut log = vec![0u8; 16 * 1024];
        let mut a = Attr::new()
            .u32(0, BPF_PROG_TYPE_XDP)
            .u32(4, (code.len() / 8) as u32)
            .u64(8, code.as_ptr() as u64)
            .u64(16, license.as_ptr() as u64)
            .u32(24, 1)
            .u32(28, log.len() as u32)
            .u64(32, log.as_mut_ptr() as u64)
            .u32(68, BPF_XDP);
        a.0[48..56].copy_from_slice(b"lockstep");
        let fd = bpf_fd(BPF_PROG_LOAD, &mut a).map_err(|e| match e.raw_os_error() {
            Some(libc::EINVAL) | Some(libc::EACCES) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                XdpError::Refused {
                    errno: e.to_string(),
                    verdict: verdict(&text),
                    log: text.trim().to_string(),
                }
            }
            _ => XdpError::from_errno("bpf(BPF_PROG_LOAD, XDP)", e),
        })?;
        Ok(XdpProgram { fd })
    }
}

/// The program attached to an interface; detached when dropped.
#[derive(Debug)]
pub struct XdpLink {
    _fd: OwnedFd,
    /// Attached in the driver (native XDP), not in the generic path.
    pub native: bool,
}

impl XdpLink {
    /// Attaches `prog` to the interface `ifindex` (`ifname` names it in errors):
    /// native mode, else generic.
    pub fn attach(prog: &XdpProgram, ifindex: u32, ifname: &str) -> Result<XdpLink, XdpError> {
        match link(prog, ifindex, XDP_FLAGS_DRV_MODE) {
            Ok(fd) => Ok(XdpLink {
                _fd: fd,
                native: true,
            }),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EOPNOTSUPP) | Some(libc::EINVAL)
                ) =>
            {
                let fd =
                    link(prog, ifindex, XDP_FLAGS_SKB_MODE).map_err(|e| link_error(e, ifname))?;
                Ok(XdpLink {
                    _fd: fd,
                    native: false,
                })
            }
            Err(e) => Err(link_error(e, ifname)),
        }
    }
}

fn link(prog: &XdpProgram, ifindex: u32, flags: u32) -> io::Result<OwnedFd> {
    let mut a = Attr::new()
        .u32(0, prog.fd.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, flags);
    bpf_fd(BPF_LINK_CREATE, &mut a)
}

fn link_error(e: io::Error, ifname: &str) -> XdpError {
    match e.raw_os_error() {
        Some(libc::EBUSY) | Some(libc::EEXIST) => XdpError::Busy {
            ifname: ifname.into(),
        },
        Some(libc::EINVAL) => XdpError::Unsupported {
            what: "attaching an XDP program",
            detail: format!("{ifname}: {e} (bpf links for XDP need Linux 5.9)"),
        },
        _ => XdpError::from_errno("bpf(BPF_LINK_CREATE, XDP)", e),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_verdict_is_what_the_verifier_says_beyond_its_walk() {
        let log =
            "0: R1=ctx() R10=fp0\n0: (bf) r6 = r1                       ; R1=ctx() R6=ctx()\n\
                   1: (b7) r2 = -16                      ; R2=-16\n\
                   2: (85) call bpf_xdp_adjust_meta#54\n\
                   program of this type cannot use helper bpf_xdp_adjust_meta#54\n\
                   processed 3 insns (limit 1000000) max_states_per_insn 0 total_states 0\n";
        assert_eq!(
            super::verdict(log),
            "program of this type cannot use helper bpf_xdp_adjust_meta#54"
        );
        assert_eq!(super::verdict("processed 3 insns\n"), "processed 3 insns");
        assert_eq!(super::verdict(""), "");
    }

    use super::*;

    #[test]
    fn the_program_stamps_then_redirects_with_the_map_in_its_wide_load() {
        let p = program(7);
        assert_eq!(p.len(), 18 * 8);
        let at = |i: usize| &p[i * 8..i * 8 + 8];
        assert_eq!(at(0), &[0xbf, 0x16, 0, 0, 0, 0, 0, 0]);
        assert_eq!(at(1), &[0xb7, 0x02, 0, 0, 0xf0, 0xff, 0xff, 0xff]);
        assert_eq!(at(2), &[0x85, 0, 0, 0, 54, 0, 0, 0]);
        // both jumps land on instruction 12
        assert_eq!(at(3), &[0x55, 0x00, 8, 0, 0, 0, 0, 0]);
        assert_eq!(at(9), &[0x2d, 0x34, 2, 0, 0, 0, 0, 0]);
        assert_eq!(at(12), &[0x61, 0x62, 16, 0, 0, 0, 0, 0]);
        // ld_imm64 r1 with src = BPF_PSEUDO_MAP_FD and the descriptor
        assert_eq!(at(13), &[0x18, 0x11, 0, 0, 7, 0, 0, 0]);
        assert_eq!(at(14), &[0; 8]);
        assert_eq!(at(15), &[0xb7, 0x03, 0, 0, 2, 0, 0, 0]);
        assert_eq!(at(16), &[0x85, 0, 0, 0, 51, 0, 0, 0]);
        assert_eq!(at(17), &[0x95, 0, 0, 0, 0, 0, 0, 0]);
    }
}
