//! Named network namespaces: creating, entering, listing and deleting them.
//!
//! Namespaces are created and deleted with `ip netns add` / `ip netns del`. That is
//! the iproute2 convention (a bind mount of the namespace on `/var/run/netns/NAME`),
//! so every namespace the lab builds can also be inspected by hand with
//! `ip netns exec NAME ...`, and a crashed run's leftovers are visible to
//! `ip netns list` and removable by `lockstep lab clean` ([`list`] + [`delete`]).
//!
//! Entering a namespace is per thread: [`run_in`] runs a closure on a fresh thread
//! that has `setns(2)`'d into the namespace and joins it, so the caller's own thread
//! never changes namespace. Everything created on that thread (sockets, child
//! processes, `ip`/`tc` commands of [`crate::iface`] and [`crate::tc`]) belongs to the
//! namespace; a socket keeps its namespace after the thread ends. `/sys` is *not*
//! remounted (that would need a private mount namespace), so code in the closure
//! must use ioctls/netlink rather than `/sys/class/net` — [`crate::iface`] does.
//! `/proc/sys/net` follows the thread's namespace and can be used.
//!
//! Child processes: [`command`] sets the namespace between `fork` and `exec` (no
//! `/sys` remount, the child's PID is the program's); [`exec_command`] goes through
//! `ip netns exec`, which also remounts `/sys` and applies `/etc/netns/NAME`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

use thiserror::Error;

use crate::cmd::{self, CommandError};
use crate::sys::last_error;

/// Where iproute2 keeps named namespaces.
pub const NETNS_DIR: &str = "/var/run/netns";

/// Longest namespace name accepted (iproute2 has no limit; this keeps names sane).
pub const NAME_MAX: usize = lockstep_core::net::NETNS_NAME_MAX;

/// Why a namespace operation failed.
#[derive(Debug, Error)]
pub enum NetnsError {
    #[error("invalid network namespace name \"{0}\": use 1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.'")]
    InvalidName(String),
    #[error("network namespace \"{0}\" does not exist (no /var/run/netns/{0})")]
    NotFound(String),
    #[error("network namespace \"{0}\" already exists")]
    AlreadyExists(String),
    #[error("{what}: permission denied (network namespaces need CAP_SYS_ADMIN: run as root)")]
    Denied { what: String },
    #[error(transparent)]
    Command(#[from] CommandError),
    #[error("{op}: {source}")]
    Io {
        op: String,
        #[source]
        source: io::Error,
    },
}

impl NetnsError {
    /// A missing privilege.
    pub fn is_permission(&self) -> bool {
        matches!(self, NetnsError::Denied { .. })
    }
}

/// Checks a namespace name: 1 to [`NAME_MAX`] characters of `A-Z a-z 0-9 . _ -`, not
/// starting with `.` (so never `.`/`..` and never a path).
pub fn validate_name(name: &str) -> Result<(), NetnsError> {
    if lockstep_core::net::netns_name_ok(name) {
        Ok(())
    } else {
        Err(NetnsError::InvalidName(name.to_string()))
    }
}

/// The file the namespace is bound to.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(name)
}

/// Whether a namespace of that name exists.
pub fn exists(name: &str) -> bool {
    validate_name(name).is_ok() && path(name).exists()
}

/// Serialises `ip netns add` within this process: the first one on a host makes
/// `/var/run/netns` a shared mount, and two doing that at once stack two mounts.
static CREATE_LOCK: Mutex<()> = Mutex::new(());

fn map_command(e: CommandError, what: String) -> NetnsError {
    match e.stderr() {
        Some(s) if s.contains("Operation not permitted") || s.contains("Permission denied") => {
            NetnsError::Denied { what }
        }
        _ => NetnsError::Command(e),
    }
}

/// Creates the namespace `name` (`ip netns add`). Its loopback is down, as in any new
/// namespace.
pub fn create(name: &str) -> Result<(), NetnsError> {
    validate_name(name)?;
    let _lock = CREATE_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    if path(name).exists() {
        return Err(NetnsError::AlreadyExists(name.to_string()));
    }
    cmd::ip(&["netns", "add", name])
        .map(drop)
        .map_err(|e| map_command(e, format!("ip netns add {name}")))
}

/// Deletes the namespace `name` (`ip netns del`). Interfaces in it are destroyed once
/// nothing uses the namespace any more: processes still running in it (see [`pids`])
/// and sockets created in it keep it, and its interfaces, alive.
pub fn delete(name: &str) -> Result<(), NetnsError> {
    validate_name(name)?;
    if !path(name).exists() {
        return Err(NetnsError::NotFound(name.to_string()));
    }
    cmd::ip(&["netns", "del", name])
        .map(drop)
        .map_err(|e| map_command(e, format!("ip netns del {name}")))
}

/// The names of the existing namespaces that start with `prefix`, sorted.
pub fn list(prefix: &str) -> Result<Vec<String>, NetnsError> {
    let dir = match std::fs::read_dir(NETNS_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(NetnsError::Io {
                op: format!("reading {NETNS_DIR}"),
                source,
            })
        }
    };
    let mut names = Vec::new();
    for entry in dir {
        let entry = entry.map_err(|source| NetnsError::Io {
            op: format!("reading {NETNS_DIR}"),
            source,
        })?;
        if let Some(n) = entry.file_name().to_str() {
            if n.starts_with(prefix) {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    Ok(names)
}

/// The processes running in the namespace (`ip netns pids`), for killing leftovers
/// before [`delete`].
pub fn pids(name: &str) -> Result<Vec<u32>, NetnsError> {
    validate_name(name)?;
    if !path(name).exists() {
        return Err(NetnsError::NotFound(name.to_string()));
    }
    let out = cmd::ip(&["netns", "pids", name])
        .map_err(|e| map_command(e, format!("ip netns pids {name}")))?;
    Ok(out
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect())
}

/// Opens the namespace file (for `setns`).
fn open(name: &str) -> Result<OwnedFd, NetnsError> {
    validate_name(name)?;
    let p = path(name);
    let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| NetnsError::InvalidName(name.to_string()))?;
    // SAFETY: `c` is a NUL-terminated path; the returned fd is checked.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        let e = last_error();
        return Err(match e.raw_os_error() {
            Some(libc::ENOENT) => NetnsError::NotFound(name.to_string()),
            Some(libc::EACCES) | Some(libc::EPERM) => NetnsError::Denied {
                what: format!("opening {}", p.display()),
            },
            _ => NetnsError::Io {
                op: format!("opening {}", p.display()),
                source: e,
            },
        });
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setns(fd: &OwnedFd, name: &str) -> Result<(), NetnsError> {
    // SAFETY: `fd` is an open namespace file; setns only changes this thread.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } == 0 {
        return Ok(());
    }
    let e = last_error();
    Err(match e.raw_os_error() {
        Some(libc::EPERM) => NetnsError::Denied {
            what: format!("setns into {name}"),
        },
        Some(libc::EINVAL) => NetnsError::Io {
            op: format!("setns into {name} ({NETNS_DIR}/{name} is not a network namespace)"),
            source: e,
        },
        _ => NetnsError::Io {
            op: format!("setns into {name}"),
            source: e,
        },
    })
}

/// Runs `f` on a new thread that is in `enter`'s namespace, waits for it and returns
/// its value. A panic in `f` is resumed on the caller's thread.
fn run_on_thread<T, F, E>(label: String, enter: E, f: F) -> Result<T, NetnsError>
where
    T: Send,
    F: FnOnce() -> T + Send,
    E: FnOnce() -> Result<(), NetnsError> + Send,
{
    std::thread::scope(|s| {
        let handle = std::thread::Builder::new()
            .name(label)
            .spawn_scoped(s, move || {
                enter()?;
                Ok(f())
            })
            .map_err(|source| NetnsError::Io {
                op: "spawning a thread".to_string(),
                source,
            })?;
        match handle.join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

/// An id of the calling thread's network namespace (the inode of
/// `/proc/thread-self/ns/net`): equal for two threads in the same one.
pub fn current_id() -> std::io::Result<u64> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata("/proc/thread-self/ns/net")?.ino())
}

/// Runs `f` inside the namespace `name`, on a thread of its own that is joined before
/// this returns (see the module notes for what that thread sees).
pub fn run_in<T, F>(name: &str, f: F) -> Result<T, NetnsError>
where
    T: Send,
    F: FnOnce() -> T + Send,
{
    let fd = open(name)?;
    let label = format!("netns {name}");
    let label = label.get(..15).unwrap_or(&label).to_string();
    run_on_thread(label, move || setns(&fd, name), f)
}

/// Runs `f` in a brand-new anonymous namespace (`unshare(CLONE_NEWNET)` on a thread of
/// its own). The namespace, and anything `f` creates in it that it does not return,
/// disappears when the thread and its children are gone: nothing can be left behind,
/// even if this process is killed. Used to try things out (e.g. whether a qdisc
/// exists) without touching the caller's namespace.
pub fn run_in_fresh<T, F>(f: F) -> Result<T, NetnsError>
where
    T: Send,
    F: FnOnce() -> T + Send,
{
    let enter = || {
        // SAFETY: unshare only changes the calling thread's namespace.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } == 0 {
            return Ok(());
        }
        let e = last_error();
        Err(match e.raw_os_error() {
            Some(libc::EPERM) => NetnsError::Denied {
                what: "unshare(CLONE_NEWNET)".to_string(),
            },
            _ => NetnsError::Io {
                op: "unshare(CLONE_NEWNET)".to_string(),
                source: e,
            },
        })
    };
    run_on_thread("netns fresh".to_string(), enter, f)
}

/// A command that runs `program` inside the namespace `name`: the child enters it with
/// `setns` right before `exec`. The spawned child's PID is the program's own.
pub fn command(name: &str, program: impl AsRef<OsStr>) -> Result<Command, NetnsError> {
    let fd = open(name)?;
    let mut c = Command::new(program);
    // SAFETY: the hook runs in the forked child before exec and only makes the
    // setns(2) system call (async-signal-safe) on a descriptor the closure owns; it
    // allocates nothing (the error is a raw OS error number).
    unsafe {
        c.pre_exec(move || {
            if libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) == 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        });
    }
    Ok(c)
}

/// A command that runs `program` through `ip netns exec name program`, which also
/// remounts `/sys` for the namespace (for tools that read `/sys/class/net`).
pub fn exec_command(name: &str, program: impl AsRef<OsStr>) -> Result<Command, NetnsError> {
    validate_name(name)?;
    if !path(name).exists() {
        return Err(NetnsError::NotFound(name.to_string()));
    }
    let ip = cmd::find_program("ip").ok_or(CommandError::NotFound {
        program: "ip".to_string(),
        hint: "install iproute2",
    })?;
    let mut c = Command::new(ip);
    c.args(["netns", "exec", name]).arg(program);
    Ok(c)
}

/// A namespace that is deleted when the guard is dropped — also while unwinding from a
/// panic — so a failed test or lab run leaves nothing behind.
#[derive(Debug)]
pub struct NetnsGuard {
    name: String,
    armed: bool,
}

impl NetnsGuard {
    /// Creates the namespace `name` and guards it.
    pub fn create(name: &str) -> Result<NetnsGuard, NetnsError> {
        create(name)?;
        Ok(NetnsGuard {
            name: name.to_string(),
            armed: true,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// [`run_in`] this namespace.
    pub fn run<T, F>(&self, f: F) -> Result<T, NetnsError>
    where
        T: Send,
        F: FnOnce() -> T + Send,
    {
        run_in(&self.name, f)
    }

    /// [`command`] in this namespace.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Result<Command, NetnsError> {
        command(&self.name, program)
    }

    /// Deletes the namespace now and reports failure (dropping can only print it).
    pub fn delete(mut self) -> Result<(), NetnsError> {
        self.armed = false;
        delete(&self.name)
    }

    /// Keeps the namespace: the guard no longer deletes it.
    pub fn into_name(mut self) -> String {
        self.armed = false;
        std::mem::take(&mut self.name)
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        match delete(&self.name) {
            Ok(()) | Err(NetnsError::NotFound(_)) => {}
            // Drop cannot return the error; a leftover must not go unnoticed.
            Err(e) => eprintln!(
                "lockstep: could not delete network namespace {}: {e}",
                self.name
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for ok in ["lst-1a2b-0", "a", "A.b_c-9", &"x".repeat(64)] {
            validate_name(ok).unwrap();
        }
        for bad in ["", ".", "..", ".hidden", "a/b", "a b", "ä", &"x".repeat(65)] {
            assert!(
                matches!(validate_name(bad), Err(NetnsError::InvalidName(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            validate_name("a/b").unwrap_err().to_string(),
            "invalid network namespace name \"a/b\": use 1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.'"
        );
        assert!(!exists("../etc"));
        assert_eq!(path("x"), PathBuf::from("/var/run/netns/x"));
    }

    #[test]
    fn missing_namespace_is_not_found() {
        let name = "lst-never-created-x";
        assert!(!exists(name));
        assert!(matches!(delete(name), Err(NetnsError::NotFound(_))));
        assert!(matches!(run_in(name, || ()), Err(NetnsError::NotFound(_))));
        assert!(matches!(
            command(name, "true"),
            Err(NetnsError::NotFound(_))
        ));
        assert_eq!(
            delete(name).unwrap_err().to_string(),
            "network namespace \"lst-never-created-x\" does not exist (no /var/run/netns/lst-never-created-x)"
        );
        assert!(list("lst-never-created-").unwrap().is_empty());
    }
}
