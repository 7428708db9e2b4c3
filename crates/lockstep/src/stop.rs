//! Ctrl-C and SIGTERM in long computations. The stop flag
//! ([`lockstep_linux::signal`]) is looked at between steps that have something to
//! show (a flow's bound, a slice of simulated time, a port's commands); a computation
//! inside a library call that cannot look at it — reading and planning a big network,
//! one linear program — runs on a thread of its own ([`unless_stopped`]), so the
//! command still stops within [`GRACE`] and prints what it had before.

use std::sync::mpsc;
use std::time::{Duration, Instant};

pub use lockstep_linux::signal::stop_requested;

/// How long after a stop a command waits for a computation to get to a check.
pub const GRACE: Duration = Duration::from_millis(250);

/// How long a child process lockstep passes a stop on to has to write what it
/// measured and exit (they take milliseconds), before SIGKILL.
pub const CHILD_GRACE: Duration = Duration::from_secs(2);

/// How often a wait looks at the stop flag.
const TICK: Duration = Duration::from_millis(20);

/// Why a computation run by [`unless_stopped`] gave no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Cut {
    /// A stop was asked for and the answer had not come [`GRACE`] later.
    #[error("stopped")]
    Stopped,
    /// The thread panicked (its message is already on stderr).
    #[error("failed (see the panic message above)")]
    Panicked,
}

/// Whether the wait for an answer should end: a stop came [`GRACE`] ago.
fn given_up(stopped: &mut Option<Instant>) -> bool {
    stop_requested() && stopped.get_or_insert_with(Instant::now).elapsed() >= GRACE
}

/// Runs `f` on a thread of its own and returns its answer, unless a stop was asked
/// for and the answer has not come [`GRACE`] later (the thread is then left to end
/// with the process: `f` must hold nothing that needs cleaning up).
pub fn unless_stopped<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, Cut> {
    if stop_requested() {
        return Err(Cut::Stopped);
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    let mut stopped = None;
    loop {
        match rx.recv_timeout(TICK) {
            Ok(v) => return Ok(v),
            Err(mpsc::RecvTimeoutError::Disconnected) => return Err(Cut::Panicked),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if given_up(&mut stopped) {
                    return Err(Cut::Stopped);
                }
            }
        }
    }
}

/// [`unless_stopped`] for a computation that has results one by one: `f` passes each
/// to the function it is given as soon as it has it. Every result received, and
/// `Ok` when `f` returned, `Err` when it was cut short.
pub fn collect_unless_stopped<T: Send + 'static>(
    f: impl FnOnce(&dyn Fn(T)) + Send + 'static,
) -> (Vec<T>, Result<(), Cut>) {
    enum Msg<T> {
        Item(T),
        Done,
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let each = |v: T| {
            let _ = tx.send(Msg::Item(v));
        };
        f(&each);
        let _ = tx.send(Msg::Done);
    });
    let mut out = Vec::new();
    let mut stopped = None;
    loop {
        match rx.recv_timeout(TICK) {
            Ok(Msg::Item(v)) => out.push(v),
            Ok(Msg::Done) => return (out, Ok(())),
            Err(mpsc::RecvTimeoutError::Disconnected) => return (out, Err(Cut::Panicked)),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if given_up(&mut stopped) {
            return (out, Err(Cut::Stopped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_come_through_without_a_stop() {
        assert_eq!(unless_stopped(|| 6 * 7), Ok(42));
        let (got, done) = collect_unless_stopped(|each: &dyn Fn(u32)| {
            for i in 0..5 {
                each(i);
            }
        });
        assert_eq!((got, done), (vec![0, 1, 2, 3, 4], Ok(())));
        assert_eq!(
            unless_stopped(|| -> u32 { panic!("on purpose") }),
            Err(Cut::Panicked)
        );
    }
}
