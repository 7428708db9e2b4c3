//! Ctrl-C and SIGTERM as a flag: a run checks it between samples, stops cleanly and
//! still prints and writes its results (like cyclictest does on ^C). The handlers are
//! signal-hook's: they only store to an atomic (async-signal-safe) and chain with any
//! other handler of the same signal.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::flag;

static STOP: LazyLock<Arc<AtomicBool>> = LazyLock::new(|| Arc::new(AtomicBool::new(false)));

/// Installs handlers for SIGINT and SIGTERM that set the stop flag. A second one while
/// stopping ends the process at once, with the status a shell gives a process the
/// signal killed (130 for SIGINT, 143 for SIGTERM).
pub fn install_stop_handler() -> io::Result<()> {
    for sig in [SIGINT, SIGTERM] {
        // The order matters: the shutdown is registered first, so the first signal
        // finds the flag clear and only sets it.
        flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&STOP))?;
        flag::register(sig, Arc::clone(&STOP))?;
    }
    Ok(())
}

/// Whether a stop was asked for.
#[inline]
pub fn stop_requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// Asks for a stop from inside the program (e.g. a threshold was crossed).
pub fn request_stop() {
    STOP.store(true, Ordering::SeqCst);
}
