//! Memory mapped for the packet rings: a socket's ring shared with the kernel
//! (TPACKET, AF_XDP) or private memory the kernel is told about (an AF_XDP UMEM).
//! One owner type, unmapped on drop; what each ring reads and writes in it is
//! decided by the ring's own status words and indices (`ring`, `xdp`).

use std::io;
use std::os::fd::RawFd;

use crate::sys::last_error;

/// A mapping of `len` bytes at `ptr`.
pub(crate) struct Mmap {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
}

// SAFETY: plain memory owned by this value; which parts the process may touch is
// decided by the rings, not by the thread.
unsafe impl Send for Mmap {}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: exactly what mmap returned; nothing borrows it past its owner
        // (slices handed out live only for a call).
        unsafe {
            libc::munmap(self.ptr.cast(), self.len);
        }
    }
}

impl Mmap {
    /// `len` bytes of `fd` at page offset `pgoff`, shared with the kernel, or
    /// private anonymous memory when `fd` is `None`; populated at once.
    pub(crate) fn new(fd: Option<RawFd>, len: usize, pgoff: libc::off_t) -> io::Result<Mmap> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED | libc::MAP_POPULATE, fd),
            None => (
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
            ),
        };
        // SAFETY: a fresh mapping of the given size; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd,
                pgoff,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(last_error());
        }
        Ok(Mmap {
            ptr: ptr.cast(),
            len,
        })
    }
}
