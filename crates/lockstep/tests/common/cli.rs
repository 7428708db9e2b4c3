//! Running the `lockstep` binary from a test, on the shipped scenario files.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The path of a file in scenarios/.
pub fn scenario(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
        .display()
        .to_string()
}

/// `lockstep ARGS`, its status and output.
pub fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}
