//! The sans-IO receiver: the state machine behind `lockstep node` in the receiver
//! role and behind every simulated receiver. The driver hands it each datagram's
//! UDP payload with the kernel's and the application's receive times
//! ([`Receiver::handle_packet`]); the receiver accounts for it per flow (statistics
//! and the latency decomposition, [`crate::measure::decomp`]) and, when asked to
//! keep records, hands every measured probe out as a typed [`Delivery`]
//! ([`Receiver::poll_event`]) for the run's per-packet results.
//!
//! The times it is given are [`Instant`]s of one clock, the clock of the first
//! (checked in debug builds). A [`Delivery`] is a record for the run's files: its
//! times are `i64` nanoseconds of that clock, like the probe's own.

use std::collections::VecDeque;

use crate::measure::decomp::{Accounts, Outcome};
use crate::time::{Instant, LearnedClock};
use crate::wire::ProbeRepr;

/// A probe packet that reached its receiver: the probe's own record (flow,
/// sequence number, frame, sender times, one hop record per router it crossed)
/// plus the receiver's times.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivery {
    pub probe: ProbeRepr,
    /// Kernel RX timestamp, when the driver has one.
    pub kernel_rx_ns: Option<i64>,
    /// When the application got it.
    pub app_rx_ns: i64,
}

impl Delivery {
    /// True end-to-end latency `L = app_rx − t0` (the sending frame travels with
    /// the packet, so a packet a frame late is seen as late).
    pub fn latency_ns(&self) -> i64 {
        self.app_rx_ns.saturating_sub(self.probe.t0_ns)
    }
}

/// The receiver state machine.
#[derive(Debug, Default)]
pub struct Receiver {
    accounts: Accounts,
    keep: bool,
    /// Per-flow statistics and decomposition (else only the intake counts).
    per_flow: bool,
    deliveries: VecDeque<Delivery>,
    /// The clock of the instants the receiver is given.
    clock_id: LearnedClock,
}

impl Receiver {
    /// `keep_records`: hand every measured probe out through [`Receiver::poll_event`].
    pub fn new(keep_records: bool) -> Receiver {
        Receiver {
            accounts: Accounts::new(),
            keep: keep_records,
            per_flow: true,
            deliveries: VecDeque::new(),
            clock_id: LearnedClock::default(),
        }
    }

    /// Hands every probe out through [`Receiver::poll_event`] and keeps no per-flow
    /// statistics of its own (the intake counters only): for a driver that measures
    /// the deliveries itself, like the simulator, where thousands of receivers would
    /// otherwise each hold a full set of histograms per flow.
    pub fn records_only() -> Receiver {
        Receiver {
            accounts: Accounts::new(),
            keep: true,
            per_flow: false,
            deliveries: VecDeque::new(),
            clock_id: LearnedClock::default(),
        }
    }

    /// One datagram's UDP payload, taken by the application at `now` (the
    /// kernel's receive time `kernel_rx` when known).
    pub fn handle_packet(
        &mut self,
        now: Instant,
        kernel_rx: Option<Instant>,
        payload: &[u8],
    ) -> Outcome {
        let now = self.clock_id.ns(now, "receiver");
        let kernel_rx = kernel_rx.map(|k| self.clock_id.ns(k, "receiver"));
        let out = if self.per_flow {
            self.accounts.handle(now, kernel_rx, payload)
        } else {
            self.accounts.screen(payload)
        };
        if let (true, Outcome::Probe(p)) = (self.keep, &out) {
            self.deliveries.push_back(Delivery {
                probe: *p,
                kernel_rx_ns: kernel_rx,
                app_rx_ns: now,
            });
        }
        out
    }

    /// The next delivered probe, in arrival order.
    pub fn poll_event(&mut self) -> Option<Delivery> {
        self.deliveries.pop_front()
    }

    /// A receiver never needs a timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// The per-flow accounts.
    pub fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    pub fn accounts_mut(&mut self) -> &mut Accounts {
        &mut self.accounts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tdp::host::probe_buffer;
    use crate::ClockId;

    fn tai(ns: i64) -> Instant {
        Instant::new(ClockId::Tai, ns)
    }

    #[test]
    fn records_only_hands_probes_out_without_per_flow_accounts() {
        let probe = probe_buffer(7, 200).unwrap();
        let mut full = Receiver::new(true);
        let mut lean = Receiver::records_only();
        for r in [&mut full, &mut lean] {
            assert!(matches!(
                r.handle_packet(tai(1_000), Some(tai(900)), &probe),
                Outcome::Probe(_)
            ));
            assert!(matches!(
                r.handle_packet(tai(2_000), None, b"not a probe"),
                Outcome::Foreign
            ));
            let d = r.poll_event().unwrap();
            assert_eq!(
                (d.probe.flow_id, d.app_rx_ns, d.kernel_rx_ns),
                (7, 1_000, Some(900))
            );
            assert_eq!(r.poll_event(), None);
            let c = &r.accounts().counters().intake;
            assert_eq!((c.datagrams, c.probes, c.foreign), (2, 1, 1));
        }
        let names = std::collections::BTreeMap::new();
        assert_eq!(full.accounts().report(&names, "rx").len(), 1);
        assert!(lean.accounts().report(&names, "rx").is_empty());
    }
}
