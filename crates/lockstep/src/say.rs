//! What a command says on stderr besides its result and its error: progress,
//! notes, warnings, where it wrote its files and, with `--json`, the human table.
//! `-q`/`--quiet` (before or after the subcommand) silences all of it: stdout then
//! holds the result alone — the table, or with `--json` the document — and stderr
//! an error, if there is one, and nothing else.

use std::sync::atomic::{AtomicBool, Ordering};

static QUIET: AtomicBool = AtomicBool::new(false);

/// Set once, from the command line, before the command runs.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether `-q` was given.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `eprintln!` unless `-q` was given.
macro_rules! say {
    ($($arg:tt)*) => {
        if !$crate::say::quiet() {
            eprintln!($($arg)*);
        }
    };
}

/// `eprint!` unless `-q` was given.
macro_rules! say_part {
    ($($arg:tt)*) => {
        if !$crate::say::quiet() {
            eprint!($($arg)*);
        }
    };
}

pub(crate) use {say, say_part};
