//! Waiting on several sockets at once (`ppoll`), with a nanosecond timeout: how a
//! user-space router sleeps between frame starts without missing the packets that
//! arrive meanwhile.
//!
//! A socket is reported when it is readable or has an error-queue entry (a transmit
//! timestamp waiting to be taken, `POLLERR`): drain both, or the next wait returns at
//! once again.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use lockstep_core::Duration;

use crate::sys::{last_error, ns_to_timespec};

/// What one descriptor reported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Data to read (`POLLIN`).
    pub readable: bool,
    /// An error-queue entry, e.g. a transmit timestamp (`POLLERR`).
    pub error: bool,
}

/// A reusable `ppoll` set: the descriptor array is allocated once and kept, so waiting
/// allocates nothing once the number of descriptors stays the same.
#[derive(Debug, Default)]
pub struct Poller {
    pfds: Vec<libc::pollfd>,
}

impl Poller {
    pub fn new() -> Poller {
        Poller::default()
    }

    /// Waits until one of `fds` (any iterator of borrowed descriptors, e.g.
    /// `sockets.iter().map(|s| s.as_fd())`, so the caller allocates nothing) is readable or has an error-queue entry, or until
    /// `timeout` has passed (`None`: no limit; zero or negative: just look). Returns
    /// how many descriptors are ready; 0 after a timeout or a signal. Read each one's
    /// state with [`Poller::readiness`], by its index in `fds`.
    pub fn wait<'a>(
        &mut self,
        fds: impl IntoIterator<Item = BorrowedFd<'a>>,
        timeout: Option<Duration>,
    ) -> io::Result<usize> {
        self.pfds.clear();
        self.pfds.extend(fds.into_iter().map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        let ts = timeout.map(|d| ns_to_timespec(d.as_nanos().max(0)));
        let tsp = ts
            .as_ref()
            .map_or(std::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `pfds` holds `len` valid pollfd entries; their descriptors were
        // borrowed for `'a`, and the caller's borrows outlive this call, so they are
        // open; `tsp` is null or points at `ts`; no signal mask.
        let rc = unsafe {
            libc::ppoll(
                self.pfds.as_mut_ptr(),
                self.pfds.len() as libc::nfds_t,
                tsp,
                std::ptr::null(),
            )
        };
        if rc >= 0 {
            return Ok(rc as usize);
        }
        let e = last_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            self.pfds.iter_mut().for_each(|p| p.revents = 0);
            Ok(0)
        } else {
            Err(e)
        }
    }

    /// What descriptor `index` of the last [`Poller::wait`] reported.
    pub fn readiness(&self, index: usize) -> Readiness {
        let r = self.pfds.get(index).map_or(0, |p| p.revents);
        Readiness {
            readable: r & libc::POLLIN != 0,
            error: r & libc::POLLERR != 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udp::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn reports_the_readable_socket_and_times_out() {
        let lo = "127.0.0.1:0".parse().unwrap();
        let a = UdpSocket::bind(lo).unwrap();
        let b = UdpSocket::bind(lo).unwrap();
        let mut p = Poller::new();
        let fds = [a.as_fd(), b.as_fd()];
        assert_eq!(p.wait(fds, Some(Duration::from_micros(100))).unwrap(), 0);
        assert_eq!(p.readiness(0), Readiness::default());
        a.send_to(b"x", b.local_addr().unwrap()).unwrap();
        assert_eq!(p.wait(fds, Some(Duration::from_secs(5))).unwrap(), 1);
        assert_eq!(p.readiness(0), Readiness::default());
        assert_eq!(
            p.readiness(1),
            Readiness {
                readable: true,
                error: false
            }
        );
        assert_eq!(p.readiness(7), Readiness::default());
        // zero timeout: just look
        assert_eq!(p.wait(fds, Some(Duration::ZERO)).unwrap(), 1);
    }
}
