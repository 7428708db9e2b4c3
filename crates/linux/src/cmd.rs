//! Running the iproute2 tools (`ip`, `tc`) with their output captured.
//!
//! Creating namespaces, veth pairs, addresses, routes and qdiscs is done through
//! iproute2 rather than raw netlink: it is installed on every Linux machine, its
//! commands are what an operator would type to reproduce or inspect the lab, and its
//! error texts ("Cannot find device", "Specified qdisc kind is unknown") are what we
//! pass on. Every failure carries the full command line and its stderr.
//!
//! A command runs in the network namespace of the calling *thread* (a child process
//! inherits it), so inside [`crate::netns::run_in`] these helpers act on that namespace.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use thiserror::Error;

/// Why an external command failed.
#[derive(Debug, Error)]
pub enum CommandError {
    #[error("`{program}` was not found in PATH, /usr/sbin or /sbin: {hint}")]
    NotFound { program: String, hint: &'static str },
    #[error("cannot run `{command}`: {source}")]
    Spawn {
        command: String,
        #[source]
        source: io::Error,
    },
    #[error("`{command}` failed ({status}): {}", stderr_or_none(.stderr))]
    Failed {
        command: String,
        /// `exit status N` or `killed by signal N`.
        status: String,
        /// The command's standard error, trimmed.
        stderr: String,
    },
}

fn stderr_or_none(s: &str) -> &str {
    if s.is_empty() {
        "no message"
    } else {
        s
    }
}

impl CommandError {
    /// The command's standard error when it ran and failed.
    pub fn stderr(&self) -> Option<&str> {
        match self {
            CommandError::Failed { stderr, .. } => Some(stderr),
            _ => None,
        }
    }

    /// The tool itself is missing (not a failure of what it was asked to do).
    pub fn is_not_found(&self) -> bool {
        matches!(self, CommandError::NotFound { .. })
    }
}

/// Where a tool lives: the first match in `PATH`, then `/usr/sbin` and `/sbin` (which
/// a non-login root shell or a `sudo` without `secure_path` may lack in `PATH`).
pub fn find_program(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Quotes one word for a readable command line in messages (not for a shell).
fn quote(arg: &str) -> String {
    if !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// The command line as it would be typed.
pub fn command_line<S: AsRef<str>>(program: &str, args: &[S]) -> String {
    let mut out = program.to_string();
    for a in args {
        out.push(' ');
        out.push_str(&quote(a.as_ref()));
    }
    out
}

fn hint_for(program: &str) -> &'static str {
    match program {
        "ip" | "tc" => "install iproute2",
        _ => "install it or add its directory to PATH",
    }
}

/// Runs `program args...`, waits for it, and returns its standard output. A non-zero
/// exit is [`CommandError::Failed`] with the trimmed standard error.
pub fn run<S: AsRef<str>>(program: &str, args: &[S]) -> Result<String, CommandError> {
    let exe = find_program(program).ok_or_else(|| CommandError::NotFound {
        program: program.to_string(),
        hint: hint_for(program),
    })?;
    let command = command_line(program, args);
    let out = Command::new(&exe)
        .args(args.iter().map(|a| a.as_ref()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("LC_ALL", "C")
        .output()
        .map_err(|source| CommandError::Spawn {
            command: command.clone(),
            source,
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let status = match (out.status.code(), {
        use std::os::unix::process::ExitStatusExt;
        out.status.signal()
    }) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        (None, None) => "unknown status".to_string(),
    };
    Err(CommandError::Failed {
        command,
        status,
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// Runs `ip args...` (iproute2).
pub fn ip<S: AsRef<str>>(args: &[S]) -> Result<String, CommandError> {
    run("ip", args)
}

/// Runs `tc args...` (iproute2).
pub fn tc<S: AsRef<str>>(args: &[S]) -> Result<String, CommandError> {
    run("tc", args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_are_quoted_only_where_needed() {
        assert_eq!(
            command_line("ip", &["addr", "add", "10.0.0.1/24", "dev", "v0"]),
            "ip addr add 10.0.0.1/24 dev v0"
        );
        assert_eq!(
            command_line("x", &["a b", "", "it's"]),
            r"x 'a b' '' 'it'\''s'"
        );
        assert_eq!(command_line::<&str>("true", &[]), "true");
    }

    #[test]
    fn failures_carry_command_status_and_stderr() {
        let e = run("sh", &["-c", "echo oops >&2; exit 3"]).unwrap_err();
        assert_eq!(e.stderr(), Some("oops"));
        assert_eq!(
            e.to_string(),
            "`sh -c 'echo oops >&2; exit 3'` failed (exit status 3): oops"
        );
        let e = run("sh", &["-c", "exit 1"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "`sh -c 'exit 1'` failed (exit status 1): no message"
        );
        assert_eq!(run("sh", &["-c", "printf hi"]).unwrap(), "hi");
    }

    #[test]
    fn a_missing_tool_says_so() {
        let e = run("lockstep-no-such-tool", &["x"]).unwrap_err();
        assert!(e.is_not_found());
        assert_eq!(
            e.to_string(),
            "`lockstep-no-such-tool` was not found in PATH, /usr/sbin or /sbin: install it or add its directory to PATH"
        );
    }
}
