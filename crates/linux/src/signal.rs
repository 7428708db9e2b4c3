//! Ctrl-C and SIGTERM as a flag: a run checks it between samples, stops cleanly and
//! still prints and writes its results (like cyclictest does on ^C).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_sig: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Installs handlers for SIGINT and SIGTERM that set the stop flag. A second Ctrl-C
/// while stopping falls back to the default action (the process ends).
pub fn install_stop_handler() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction with a handler that only stores to an atomic, which is
        // async-signal-safe; SA_RESETHAND restores the default after the first signal.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            act.sa_flags = libc::SA_RESETHAND;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
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
