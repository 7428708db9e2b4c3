//! # lockstep-linux — every system call lockstep makes
//!
//! The sans-IO core (`lockstep-core`) never touches the operating system; this crate is
//! the only place that does. Each file owns one feature, detects what the running kernel
//! lacks, and says so plainly in a typed error (or, where a fallback exists, in a note
//! next to the result) instead of failing silently.
//!
//! - [`clock`]: reading `CLOCK_TAI` / `CLOCK_REALTIME` / `CLOCK_MONOTONIC`, their
//!   resolution, the kernel's TAI offset, and [`clock::ClockMap`], which converts the
//!   kernel's socket timestamps (always `CLOCK_REALTIME`) into the clock of a run.
//! - [`wait`]: [`wait::Waiter`], waiting for an absolute instant by sleeping, spinning
//!   or both (`--strategy`); never returns before the deadline unless a stop
//!   was asked for (Ctrl-C).
//! - [`rt`]: real-time setup of the time-critical thread: scheduling policy and
//!   priority, CPU affinity, `mlockall`, holding `/dev/cpu_dma_latency`; errors that
//!   explain how to get the missing privilege.
//! - [`udp`]: a UDP socket with DSCP marking, busy polling, kernel/hardware RX and TX
//!   timestamps (`SO_TIMESTAMPING`), polling and timed blocking receive, batch receive
//!   (`recvmmsg`), no allocation per packet.
//! - [`host`]: host facts recorded with every result (the result document): kernel, RT, CPU,
//!   isolation, governor, clock source, clock sync state; read-only, no root needed.
//! - [`audit`]: reads the host (`/proc`, `/sys`, adjtimex, coalescing, who holds
//!   `/dev/cpu_dma_latency`) into the snapshot the audit judges; fixtures capture/load.
//! - [`tune`]: `lockstep host apply`/`restore`: run-time tuning saved to a state file
//!   first and put back byte for byte.
//! - [`hugepages`]: transparent huge pages behind the heap's large mappings, where
//!   the kernel gives them only on request (a big simulation's tables).
//! - [`rusage`]: CPU time used by the process or thread (`getrusage`), for the CPU
//!   cost of shaping.
//! - [`signal`]: Ctrl-C / SIGTERM as a stop flag a run checks between samples.
//! - [`lockfile`]: an exclusive lock on a file for a process's life (one controller
//!   per database), naming the holder.
//! - [`tracefs`]: finding or mounting tracefs, writing trace markers and freezing the
//!   trace when a threshold is crossed (like `cyclictest -b`).
//! - [`packet`]: AF_PACKET raw sockets for the user-space router: batched
//!   `recvmmsg`/`sendmmsg`, unfinished-checksum and VLAN reports (PACKET_AUXDATA),
//!   timestamps, outgoing frames ignored.
//! - [`port`]: one router port behind one trait ([`port::FramePort`]), opened as a
//!   plain packet socket or a receive ring (`--io`), TX timestamps on request only.
//! - [`ring`]: a packet socket with a receive ring mapped into the process
//!   (`TPACKET_V3` blocks or `TPACKET_V2` frame slots), frames read where they lie.
//! - [`xdp`]: an `AF_XDP` socket as a router port (`--io xdp`): UMEM, the four rings,
//!   copy or zero-copy, falling back to the packet socket where it is missing;
//!   [`xdp_prog`]: the `XSKMAP`, the redirect program as raw eBPF, its link.
//! - [`route`]: the kernel's route to a destination and the next hop's MAC address
//!   (resolved by ARP when the neighbour table lacks it), for a host that writes
//!   whole frames.
//! - [`poll`]: waiting on several sockets at once (`ppoll`, nanosecond timeout).
//! - [`ethtool`]: offloads and interrupt coalescing through the SIOCETHTOOL ioctl (no
//!   `ethtool` binary needed).
//! - [`netns`]: named network namespaces, running code or processes inside them, and a
//!   guard that always deletes them.
//! - [`iface`]: interfaces (index, MAC, MTU, up/down, veth pairs, addresses, routes,
//!   static neighbours) and per-namespace sysctls.
//! - [`tc`]: tbf/htb shaping and detection of the qdiscs a kernel lacks (taprio, etf,
//!   fq, netem).
//! - [`cmd`]: running `ip` and `tc` with their stderr in typed errors.
//! - [`durable`]: result files written whole or not at all (temporary file, `fsync`,
//!   rename).
//! - [`proc`]: the one supervisor of child processes: started in a namespace, in a
//!   process group of their own, output to files; stopped with SIGTERM, then SIGKILL
//!   after a grace period, and always on drop.
//! - [`rps`]: Receive Packet Steering, where an interface's receive work runs.
//!
//! Unsafe code is confined to small blocks around `libc` calls, each with a
//! `// SAFETY:` comment.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod audit;
pub mod clock;
pub mod cmd;
pub mod durable;
pub mod ethtool;
pub mod host;
pub mod hugepages;
pub mod iface;
pub mod lockfile;
pub mod malloc;
pub mod netns;
pub mod packet;
pub mod poll;
pub mod port;
pub mod proc;
pub mod ring;
pub mod route;
pub mod rps;
pub mod rt;
pub mod rusage;
pub mod signal;
pub mod tc;
pub mod throttle;
pub mod tracefs;
pub mod tune;
pub mod udp;
pub mod wait;
pub mod xdp;
pub mod xdp_prog;

mod mmap;
mod sockopt;
mod sys;

pub use clock::{now, ClockMap};
pub use host::HostFacts;
pub use rt::{RtError, RtRequest, RtState};
pub use udp::{NetError, RecvInfo, RecvMode, TimestampConfig, TimestampSupport, UdpSocket};
pub use wait::Waiter;
