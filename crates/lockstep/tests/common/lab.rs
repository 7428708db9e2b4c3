//! What the namespace-lab tests share: whether this machine can run them, and the
//! network namespaces a run left.

use std::process::Command;

/// Whether a lab test can run here (root, and iproute2's `ip` and `tc`); if not,
/// says why on stderr, naming `test`, so the test can skip.
pub fn can_run(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipping {test}: needs root (network namespaces, raw sockets)");
        return false;
    }
    for tool in ["ip", "tc"] {
        if lockstep_linux::cmd::find_program(tool).is_none() {
            eprintln!("skipping {test}: `{tool}` (iproute2) is not installed");
            return false;
        }
    }
    true
}

/// The network namespaces whose names start with `prefix` (none if `ip` fails).
pub fn namespaces(prefix: &str) -> Vec<String> {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect()
}
