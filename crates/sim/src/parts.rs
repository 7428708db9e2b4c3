//! A network cut into parts, each run by an [`Engine`] of its own on a thread of
//! its own, with the same results as the whole network in one engine.
//!
//! Time goes in windows. No frame crosses a link sooner than the link's least delay
//! (the shortest frame's serialisation plus the propagation), so an arrival one part
//! sends to another during a window is due after the window when the window is no
//! longer than the least delay of every link between parts. Each part runs its
//! events of the window, hands what it sent across to the parts of the receiving
//! nodes, and waits at a barrier for the others; then each takes what it was handed
//! and goes on with the next window. A window in which no part has anything to do
//! is skipped.
//!
//! Why the results are the same: a node's state changes only through its own
//! events, and the events of one node come in the same order whichever part runs
//! it, because the order of the events of one instant is their [`Place`] (when they
//! were scheduled, which node scheduled them, how many that node had scheduled
//! before), which no part's progress changes. The deliveries of one receiver reach
//! the measuring in its own order; the measuring keeps nothing across flows that
//! depends on how two receivers' deliveries interleave.
//!
//! Not cut: networks with faults (a fault changes two nodes at one instant, which
//! may run apart) and nodes that share CPUs (one CPU pool for all of them).
//!
//! [`Place`]: crate::queue::Place

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

use lockstep_core::tdp::Delivery;

use crate::engine::{Engine, EngineStats, Kind, Outgoing, SimNode};

/// Why a network runs whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whole {
    /// Fewer than two routers to share out.
    TooSmall,
    /// A link between two parts may deliver a frame at the instant it is sent
    /// (no serialisation, no propagation: the lab's unshaped veths).
    NoLookahead,
}

impl std::fmt::Display for Whole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Whole::TooSmall => "fewer than two routers to share out",
            Whole::NoLookahead => {
                "a link may deliver a frame the instant it is sent (no serialisation and no propagation)"
            }
        })
    }
}

/// The parts of a network and their common clock.
pub struct Parts {
    parts: Vec<Engine>,
    /// The longest window: the least delay of the links between parts.
    window: i64,
    now: i64,
}

/// Which part each node runs in: the routers in their order, in parts of (nearly)
/// the same size (a generated network numbers its routers row by row, so the
/// parts are bands of it), each host with the router it is attached to.
fn assign(nodes: &[SimNode], parts: usize) -> Vec<u32> {
    let routers: Vec<usize> = (0..nodes.len())
        .filter(|&i| matches!(nodes[i].kind, Kind::Router(_)))
        .collect();
    let mut part = vec![u32::MAX; nodes.len()];
    for (k, &i) in routers.iter().enumerate() {
        part[i] = (k * parts / routers.len()) as u32;
    }
    for i in 0..nodes.len() {
        if part[i] == u32::MAX {
            let next = nodes[i].ports.first().map(|p| p.to as usize);
            part[i] = next.and_then(|j| part.get(j).copied()).unwrap_or(u32::MAX);
            if part[i] == u32::MAX {
                part[i] = 0;
            }
        }
    }
    part
}

impl Parts {
    /// Cuts `nodes` (not started; indices as in the whole network) into `parts`
    /// parts started at `start`; gives them back when the network cannot be cut.
    pub fn new(
        mut nodes: Vec<SimNode>,
        start: i64,
        parts: usize,
    ) -> Result<Parts, (Vec<SimNode>, Whole)> {
        let routers = nodes
            .iter()
            .filter(|n| matches!(n.kind, Kind::Router(_)))
            .count();
        let parts = parts.min(routers);
        if parts < 2 {
            return Err((nodes, Whole::TooSmall));
        }
        let part = assign(&nodes, parts);
        let mut local = vec![0u32; nodes.len()];
        let mut count = vec![0u32; parts];
        for (i, &p) in part.iter().enumerate() {
            local[i] = count[p as usize];
            count[p as usize] += 1;
        }
        let mut window = i64::MAX / 4;
        for (i, n) in nodes.iter().enumerate() {
            for port in &n.ports {
                if part.get(port.to as usize).is_some_and(|&q| q != part[i]) {
                    window = window.min(port.link.least_delay_ns());
                }
            }
        }
        if window <= 0 {
            return Err((nodes, Whole::NoLookahead));
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            n.id = i as u32;
            for port in &mut n.ports {
                let to = port.to as usize;
                port.to_part = part.get(to).copied().unwrap_or(0);
                port.to = local.get(to).copied().unwrap_or(0);
            }
        }
        let mut split: Vec<Vec<SimNode>> = (0..parts).map(|_| Vec::new()).collect();
        for (n, &p) in nodes.into_iter().zip(&part) {
            split[p as usize].push(n);
        }
        let parts = split
            .into_iter()
            .enumerate()
            .map(|(p, ns)| Engine::part(ns, start, p as u32))
            .collect();
        Ok(Parts {
            parts,
            window,
            now: start,
        })
    }

    /// How many parts run at once.
    pub fn len(&self) -> usize {
        self.parts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    pub fn now(&self) -> i64 {
        self.now
    }

    /// Every node, part by part.
    pub fn nodes(&self) -> impl Iterator<Item = &SimNode> {
        self.parts.iter().flat_map(|e| e.nodes.iter())
    }

    /// The counts of all parts (the most events waiting: the sum of each part's
    /// most).
    pub fn stats(&self) -> EngineStats {
        let mut s = EngineStats::default();
        for e in &self.parts {
            s.add(&e.stats());
        }
        s
    }

    /// Ends the traffic in every part.
    pub fn stop_sources(&mut self) {
        for e in &mut self.parts {
            e.stop_sources();
        }
    }

    /// Runs every event due up to `until`, each part on a thread of its own (the
    /// first on this one); deliveries reach `on_delivery` on this thread, each
    /// receiver's in its order.
    pub fn run_until(&mut self, until: i64, on_delivery: &mut impl FnMut(usize, &Delivery)) {
        if until < self.now {
            return;
        }
        let n = self.parts.len();
        let shared = Shared {
            barrier: SpinBarrier::new(n),
            mail: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            delivered: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            next: [0, 1].map(|_| (0..n).map(|_| AtomicI64::new(i64::MAX)).collect()),
        };
        let (window, from) = (self.window, self.now);
        let (first, rest) = self.parts.split_at_mut(1);
        std::thread::scope(|s| {
            for e in rest.iter_mut() {
                let shared = &shared;
                s.spawn(move || {
                    let me = e.part as usize;
                    run_windows(e, shared, from, until, window, |d| {
                        if let Ok(mut v) = shared.delivered[me].lock() {
                            v.append(d);
                        }
                    });
                });
            }
            run_windows(&mut first[0], &shared, from, until, window, |d| {
                for (i, x) in d.drain(..) {
                    on_delivery(i, &x);
                }
                take_delivered(&shared, on_delivery);
            });
        });
        // what the other parts delivered in their last window
        take_delivered(&shared, on_delivery);
        self.now = until;
    }

    /// The whole network again, its nodes in their order, with the counts of all
    /// parts (to read what the run left in its nodes).
    pub fn join(self) -> Engine {
        let stats = self.stats();
        let now = self.now;
        // the far ends by their index in the whole network again
        let global: Vec<Vec<u32>> = self
            .parts
            .iter()
            .map(|e| e.nodes.iter().map(|n| n.id).collect())
            .collect();
        let mut nodes: Vec<SimNode> = self.parts.into_iter().flat_map(|e| e.nodes).collect();
        nodes.sort_by_key(|n| n.id);
        for n in &mut nodes {
            for port in &mut n.ports {
                let id = global
                    .get(port.to_part as usize)
                    .and_then(|v| v.get(port.to as usize));
                port.to = id.copied().unwrap_or(port.to);
                port.to_part = 0;
            }
        }
        Engine::finished(nodes, now, stats)
    }
}

/// What the parts share while they run.
struct Shared {
    barrier: SpinBarrier,
    /// Arrivals handed to each part.
    mail: Vec<Mutex<Vec<Outgoing>>>,
    /// Deliveries of each part not yet measured.
    delivered: Vec<Mutex<Vec<(usize, Delivery)>>>,
    /// Each part's earliest event after its window (what it queued and what it
    /// handed over), for skipping windows with nothing to do: one set for even
    /// windows, one for odd ones (a part writes a set again two windows later,
    /// after a barrier every part passes only once it has read it).
    next: [Vec<AtomicI64>; 2],
}

/// What the parts after the first delivered and handed over so far, to `deliver`
/// (each part's in its order).
fn take_delivered(shared: &Shared, deliver: &mut impl FnMut(usize, &Delivery)) {
    for other in &shared.delivered[1..] {
        let taken = other.lock().map(|mut v| std::mem::take(&mut *v));
        for (i, x) in taken.unwrap_or_default() {
            deliver(i, &x);
        }
    }
}

/// Marks the barrier failed when its part's thread unwinds from a panic.
struct FailGuard<'a>(&'a SpinBarrier);

impl Drop for FailGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.failed.store(true, Ordering::Relaxed);
        }
    }
}

/// A barrier for threads that meet every few microseconds: they spin a while
/// before they yield (a sleeping wait costs more than most windows take).
struct SpinBarrier {
    n: usize,
    arrived: AtomicUsize,
    generation: AtomicUsize,
    /// A part's thread ended in a panic: the others must not wait for it.
    failed: AtomicBool,
}

impl SpinBarrier {
    fn new(n: usize) -> SpinBarrier {
        SpinBarrier {
            n,
            arrived: AtomicUsize::new(0),
            generation: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
        }
    }

    fn wait(&self) {
        let g = self.generation.load(Ordering::Acquire);
        if self.arrived.fetch_add(1, Ordering::AcqRel) + 1 == self.n {
            self.arrived.store(0, Ordering::Relaxed);
            self.generation.fetch_add(1, Ordering::Release);
            return;
        }
        let mut spins = 0u32;
        while self.generation.load(Ordering::Acquire) == g {
            // (a bug in one part ends the run in all of them instead of hanging it)
            assert!(
                !self.failed.load(Ordering::Relaxed),
                "another part of the simulated network failed"
            );
            if spins < 2_000 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// One part's windows from `from` to `until`: its events, its hand-overs, the
/// barrier; `deliver` takes each window's deliveries (emptying the vector).
fn run_windows(
    e: &mut Engine,
    shared: &Shared,
    from: i64,
    until: i64,
    window: i64,
    mut deliver: impl FnMut(&mut Vec<(usize, Delivery)>),
) {
    let me = e.part as usize;
    let _failing = FailGuard(&shared.barrier);
    let mut delivered = Vec::new();
    let mut start = from;
    let mut parity = 0;
    loop {
        let end = start.saturating_add(window - 1).min(until);
        e.run_until(end, &mut |i, d| delivered.push((i, *d)));
        let mut sent_at = i64::MAX;
        for o in e.outbox.drain(..) {
            sent_at = sent_at.min(o.at);
            if let Some(Ok(mut m)) = shared.mail.get(o.part as usize).map(|m| m.lock()) {
                m.push(o);
            }
        }
        let own = e.next_event_at().unwrap_or(i64::MAX);
        shared.next[parity][me].store(own.min(sent_at), Ordering::SeqCst);
        shared.barrier.wait();
        if let Ok(mut m) = shared.mail[me].lock() {
            for o in m.drain(..) {
                e.take(o);
            }
        }
        deliver(&mut delivered);
        if end >= until {
            break;
        }
        let next = shared.next[parity]
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .min()
            .unwrap_or(i64::MAX);
        parity = 1 - parity;
        start = (end + 1).max(next.min(until));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nobody_passes_the_barrier_before_everybody_reached_it() {
        let b = SpinBarrier::new(3);
        let reached = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for round in 1..=200 {
                        reached.fetch_add(1, Ordering::SeqCst);
                        b.wait();
                        assert!(reached.load(Ordering::SeqCst) >= 3 * round);
                        b.wait();
                    }
                });
            }
        });
        assert_eq!(reached.load(Ordering::SeqCst), 600);
    }

    #[test]
    fn a_failed_part_ends_the_wait_of_the_others() {
        let b = SpinBarrier::new(2);
        let (failed, waiter_failed) = std::thread::scope(|s| {
            let failing = s.spawn(|| {
                let _guard = FailGuard(&b);
                panic!("a bug in one part");
            });
            let waiting = s.spawn(|| b.wait());
            (failing.join().is_err(), waiting.join().is_err())
        });
        assert!(failed && waiter_failed);
    }
}
