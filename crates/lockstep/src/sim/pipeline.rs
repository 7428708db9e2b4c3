//! The simulation's measuring on a thread of its own. The event loop hands each
//! delivered probe over in batches; one consumer measures them in the order they
//! came, so the results are the same as measuring in the loop, and the loop does
//! not wait for the histograms, the fault checks and the packet files. Where no
//! second thread can be started the measuring runs in the loop, as before.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

use lockstep_core::tdp::Delivery;

/// Deliveries per batch.
const BATCH: usize = 256;
/// Full batches the loop may be ahead of the measuring by (it waits beyond).
const AHEAD: usize = 8;

/// What measures the deliveries: each one with the index of its receiver's node.
pub trait Measure: Send {
    fn add(&mut self, node: usize, d: &Delivery);
}

type Batch = Vec<(usize, Delivery)>;

/// The event loop's end of the pipeline.
pub enum Deliveries<'m, M> {
    /// Batches for the measuring thread: the one being filled, where full ones go
    /// and where emptied ones come back.
    Thread {
        batch: Batch,
        full: SyncSender<Batch>,
        empty: Receiver<Batch>,
    },
    /// The measuring itself, in the loop.
    Inline(&'m mut M),
}

impl<M: Measure> Deliveries<'_, M> {
    /// A delivery of the receiver at node `node`.
    pub fn push(&mut self, node: usize, d: &Delivery) {
        match self {
            Deliveries::Inline(m) => m.add(node, d),
            Deliveries::Thread { batch, .. } => {
                batch.push((node, *d));
                if batch.len() >= BATCH {
                    self.flush();
                }
            }
        }
    }

    fn flush(&mut self) {
        let Deliveries::Thread { batch, full, empty } = self else {
            return;
        };
        if batch.is_empty() {
            return;
        }
        let next = empty
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(BATCH));
        // (the consumer only stops once this end is dropped, or by a panic that
        // the join below passes on)
        let _ = full.send(std::mem::replace(batch, next));
    }
}

/// Runs `body` with a [`Deliveries`] whose every delivery `measure` takes, on a
/// second thread; returns what `body` returned and the measure, once it has taken
/// every delivery.
pub fn pipelined<M: Measure, R>(
    measure: M,
    body: impl FnOnce(&mut Deliveries<'_, M>) -> R,
) -> (R, M) {
    std::thread::scope(|s| {
        let (full_tx, full_rx) = sync_channel::<Batch>(AHEAD);
        let (empty_tx, empty_rx) = channel::<Batch>();
        let (hand_tx, hand_rx) = channel::<M>();
        let spawned = std::thread::Builder::new()
            .name("sim-measure".into())
            .spawn_scoped(s, move || consume(hand_rx, full_rx, empty_tx));
        let handed = match spawned {
            Ok(h) => hand_tx.send(measure).map(|()| h).map_err(|back| back.0),
            Err(_) => Err(measure),
        };
        let handle = match handed {
            Ok(h) => h,
            Err(back) => return inline(back, body),
        };
        let mut d = Deliveries::Thread {
            batch: Vec::with_capacity(BATCH),
            full: full_tx,
            empty: empty_rx,
        };
        let r = body(&mut d);
        d.flush();
        drop(d);
        match handle.join() {
            Ok(Some(m)) => (r, m),
            Ok(None) => unreachable!("the measure was handed to the thread"),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// [`pipelined`] without a second thread: each delivery measured as it comes.
fn inline<M: Measure, R>(mut measure: M, body: impl FnOnce(&mut Deliveries<'_, M>) -> R) -> (R, M) {
    let r = body(&mut Deliveries::Inline(&mut measure));
    (r, measure)
}

/// The measuring thread: takes the measure, then every batch until the loop's end
/// is dropped, handing the emptied batches back.
fn consume<M: Measure>(
    hand: Receiver<M>,
    full: Receiver<Batch>,
    empty: Sender<Batch>,
) -> Option<M> {
    let mut m = hand.recv().ok()?;
    for mut batch in full {
        for (node, d) in batch.drain(..) {
            m.add(node, &d);
        }
        let _ = empty.send(batch);
    }
    Some(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_core::wire::probe::ProbeRepr;

    /// Records what it is given, in order.
    #[derive(Default)]
    struct Log(Vec<(usize, u64)>);

    impl Measure for Log {
        fn add(&mut self, node: usize, d: &Delivery) {
            self.0.push((node, d.probe.seq));
        }
    }

    fn delivery(seq: u64) -> Delivery {
        Delivery {
            probe: ProbeRepr {
                seq,
                ..ProbeRepr::default()
            },
            kernel_rx_ns: None,
            app_rx_ns: seq as i64,
        }
    }

    #[test]
    fn the_measure_takes_every_delivery_in_order_and_the_body_result_comes_back() {
        // more than a few batches, and a last one that is not full
        let n = BATCH * (AHEAD + 3) + 17;
        let (r, log) = pipelined(Log::default(), |out| {
            for s in 0..n as u64 {
                out.push((s % 5) as usize, &delivery(s));
            }
            "done"
        });
        assert_eq!(r, "done");
        let want: Vec<(usize, u64)> = (0..n as u64).map(|s| ((s % 5) as usize, s)).collect();
        assert_eq!(log.0, want);
    }

    #[test]
    fn without_a_thread_the_measure_takes_the_same_deliveries() {
        let (r, log) = inline(Log::default(), |out| {
            for s in 0..(BATCH + 3) as u64 {
                out.push(1, &delivery(s));
            }
            7
        });
        assert_eq!(r, 7);
        assert_eq!(
            log.0,
            (0..(BATCH + 3) as u64).map(|s| (1, s)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_body_that_delivers_nothing_leaves_the_measure_as_it_was() {
        let ((), log) = pipelined(Log(vec![(9, 9)]), |_| ());
        assert_eq!(log.0, vec![(9, 9)]);
    }

    struct Fails;

    impl Measure for Fails {
        fn add(&mut self, _: usize, _: &Delivery) {
            panic!("measure failed");
        }
    }

    #[test]
    #[should_panic(expected = "measure failed")]
    fn a_panic_while_measuring_reaches_the_caller() {
        let _ = pipelined(Fails, |out| {
            for s in 0..(BATCH * 2) as u64 {
                out.push(0, &delivery(s));
            }
        });
    }
}
