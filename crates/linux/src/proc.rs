//! Child processes: the one supervisor of everything lockstep starts and must stop.
//!
//! [`Spec`] says what to start: a program and its arguments, optionally inside a named
//! network namespace ([`Netns`]), standard output and error to files, standard input
//! from `/dev/null`, and — unless told otherwise — a process group of its own, so that
//! stopping it also stops whatever it started.
//!
//! [`Proc`] is one started child: [`Proc::try_wait`], [`Proc::wait`],
//! [`Proc::wait_until`] a deadline, [`Proc::wait_or_stop`] (a stop asked of this
//! process is passed on), and [`Proc::stop`]: SIGTERM, then SIGKILL once a bounded
//! grace period has passed, then reap. Dropping a `Proc` stops it.
//!
//! [`Group`] holds several children, each tagged with a kind of the caller's: it
//! notices which exited ([`Group::poll`]), counts those still running, stops a subset
//! or all of them with their grace periods overlapping, and stops every one still
//! running when dropped (an error, a panic, a run given up after Ctrl-C).
//!
//! A child is only reaped here, and only signalled while it has not been reaped, so the
//! PID (and process group) signalled is always the child's own, never a reused one.
//! The other side of that rule: once a child has exited, processes it started and
//! left behind in its group are not signalled any more.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::cmd;
use crate::netns::{self, NetnsError};
use crate::sys::last_error;

/// How long [`Proc`]'s and [`Group`]'s `Drop` wait after SIGTERM before SIGKILL.
pub const DROP_GRACE: Duration = Duration::from_secs(2);

/// How often a wait for an exit looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// How many non-empty lines of a child's standard error [`Proc::stderr_tail`] shows.
pub const TAIL_LINES: usize = 3;

/// Why starting, waiting for or signalling a child failed.
#[derive(Debug, Error)]
pub enum ProcError {
    #[error(transparent)]
    Netns(#[from] NetnsError),
    #[error("starting {name}: no program given")]
    NoProgram { name: String },
    #[error("creating {}: {source}", .path.display())]
    Log {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("starting {name} ({command}): {source}")]
    Spawn {
        name: String,
        command: String,
        #[source]
        source: io::Error,
    },
    #[error("waiting for {name}: {source}")]
    Wait {
        name: String,
        #[source]
        source: io::Error,
    },
    #[error("sending SIG{} to {target} {pid}: {source}", .signal.name())]
    Signal {
        signal: Signal,
        target: &'static str,
        pid: u32,
        #[source]
        source: io::Error,
    },
}

/// The signals the supervisor sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Asks to stop (the programs lockstep starts then write their results).
    Term,
    /// Stops at once.
    Kill,
}

impl Signal {
    /// `TERM`, `KILL`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "TERM",
            Signal::Kill => "KILL",
        }
    }

    fn number(self) -> libc::c_int {
        match self {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        }
    }
}

/// `kill(2)` of the process `pid`, or of the process group it leads. A PID that is
/// not a positive `pid_t` is refused, and so is group 1 (`kill(-1)` would mean every
/// process): neither can be a child of ours.
fn raw_kill(pid: u32, group: bool, signal: Signal) -> Result<(), ProcError> {
    let err = |source| ProcError::Signal {
        signal,
        target: if group { "process group" } else { "process" },
        pid,
        source,
    };
    let lowest = if group { 2 } else { 1 };
    let id = libc::pid_t::try_from(pid)
        .ok()
        .filter(|p| *p >= lowest)
        .ok_or_else(|| err(io::Error::from_raw_os_error(libc::EINVAL)))?;
    let target = if group { -id } else { id };
    // SAFETY: kill takes no pointers; it only sends a signal.
    if unsafe { libc::kill(target, signal.number()) } == 0 {
        return Ok(());
    }
    Err(err(last_error()))
}

/// Sends `signal` to the process `pid`, which need not be a child of this one (e.g. a
/// leftover of a crashed run found in a namespace).
pub fn signal_pid(pid: u32, signal: Signal) -> Result<(), ProcError> {
    raw_kill(pid, false, signal)
}

/// Where a child's network namespace comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Netns {
    /// The caller's.
    Inherit,
    /// The named namespace, entered with `setns` between `fork` and `exec`
    /// ([`netns::command`]): the child's PID is the program's.
    Enter(String),
    /// `ip netns exec NAME program …` ([`netns::exec_command`]), which also remounts
    /// `/sys` and applies `/etc/netns/NAME`; `ip` execs the program, so the PID is
    /// still the program's.
    Exec(String),
}

/// What to start (see the module notes).
#[derive(Clone, Debug)]
pub struct Spec {
    name: String,
    program: OsString,
    args: Vec<OsString>,
    netns: Netns,
    stdout: Option<PathBuf>,
    stderr: Option<PathBuf>,
    own_group: bool,
}

impl Spec {
    /// `program`, known in messages as `name`, in the caller's namespace, output
    /// inherited, in a process group of its own.
    pub fn new(name: &str, program: impl AsRef<OsStr>) -> Spec {
        Spec {
            name: name.to_string(),
            program: program.as_ref().to_os_string(),
            args: Vec::new(),
            netns: Netns::Inherit,
            stdout: None,
            stderr: None,
            own_group: true,
        }
    }

    /// `argv[0]` with the rest as arguments; an empty `argv` fails at [`Spec::spawn`].
    pub fn from_argv<S: AsRef<OsStr>>(name: &str, argv: &[S]) -> Spec {
        match argv.split_first() {
            Some((program, args)) => Spec::new(name, program).args(args),
            None => Spec::new(name, ""),
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Spec
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// The network namespace to run in.
    pub fn netns(mut self, netns: Netns) -> Spec {
        self.netns = netns;
        self
    }

    /// Standard output to this file (created or truncated).
    pub fn stdout(mut self, path: impl Into<PathBuf>) -> Spec {
        self.stdout = Some(path.into());
        self
    }

    /// Standard error to this file (created or truncated); [`Proc::stderr_tail`]
    /// reads it.
    pub fn stderr(mut self, path: impl Into<PathBuf>) -> Spec {
        self.stderr = Some(path.into());
        self
    }

    /// Leaves the child in the caller's process group, so that a Ctrl-C at the
    /// terminal reaches it as well; [`Proc::stop`] then signals the child alone.
    pub fn in_caller_group(mut self) -> Spec {
        self.own_group = false;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The command line as it would be typed (with `ip netns exec NAME` for
    /// [`Netns::Exec`]).
    pub fn command_line(&self) -> String {
        let mut words: Vec<String> = Vec::new();
        if let Netns::Exec(ns) = &self.netns {
            words.extend(["netns".into(), "exec".into(), ns.clone()]);
            words.push(self.program.to_string_lossy().into_owned());
        }
        words.extend(self.args.iter().map(|a| a.to_string_lossy().into_owned()));
        match &self.netns {
            Netns::Exec(_) => cmd::command_line("ip", &words),
            _ => cmd::command_line(&self.program.to_string_lossy(), &words),
        }
    }

    fn command(&self) -> Result<Command, ProcError> {
        if self.program.is_empty() {
            return Err(ProcError::NoProgram {
                name: self.name.clone(),
            });
        }
        let mut c = match &self.netns {
            Netns::Inherit => Command::new(&self.program),
            Netns::Enter(ns) => netns::command(ns, &self.program)?,
            Netns::Exec(ns) => netns::exec_command(ns, &self.program)?,
        };
        c.args(&self.args).stdin(Stdio::null());
        if let Some(p) = &self.stdout {
            c.stdout(create_log(p)?);
        }
        if let Some(p) = &self.stderr {
            c.stderr(create_log(p)?);
        }
        if self.own_group {
            c.process_group(0);
        }
        Ok(c)
    }

    /// Starts the child.
    pub fn spawn(self) -> Result<Proc, ProcError> {
        let child = self.command()?.spawn().map_err(|source| ProcError::Spawn {
            name: self.name.clone(),
            command: self.command_line(),
            source,
        })?;
        Ok(Proc {
            name: self.name,
            child,
            own_group: self.own_group,
            stderr: self.stderr,
            status: None,
        })
    }
}

fn create_log(path: &Path) -> Result<File, ProcError> {
    File::create(path).map_err(|source| ProcError::Log {
        path: path.to_path_buf(),
        source,
    })
}

/// How a child waited for with [`run_attached`] or [`Proc::wait_or_stop`] ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ended {
    pub status: ExitStatus,
    /// A stop was asked for ([`crate::signal`]) and passed on to it.
    pub stopped: bool,
}

/// Runs `argv` in the foreground — this process group, standard input, output and
/// error inherited, so it can use the terminal — and waits for it. Once a stop is
/// asked for (SIGINT/SIGTERM to this process: a SIGTERM sent to this process alone
/// does not reach the child) it is passed on: SIGTERM, SIGKILL after `grace`.
pub fn run_attached<S: AsRef<OsStr>>(argv: &[S], grace: Duration) -> io::Result<Ended> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "no program given",
        ));
    };
    let mut child = Command::new(program).args(args).spawn()?;
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Ended {
                status,
                stopped: false,
            });
        }
        if crate::signal::stop_requested() {
            break;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    // not reaped yet: the PID is still the child's
    let _ = raw_kill(child.id(), false, Signal::Term);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(Ended {
                status,
                stopped: true,
            });
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    let _ = child.kill();
    Ok(Ended {
        status: child.wait()?,
        stopped: true,
    })
}

/// The last [`TAIL_LINES`] non-empty lines of a log file joined by ` | `, for error
/// messages; says so when there are none.
pub fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(TAIL_LINES);
    let t = lines[start..].join(" | ");
    if t.is_empty() {
        format!("(nothing on stderr; see {})", path.display())
    } else {
        t
    }
}

/// A started child (see the module notes). Dropping it stops it ([`DROP_GRACE`]).
#[derive(Debug)]
pub struct Proc {
    name: String,
    child: Child,
    own_group: bool,
    stderr: Option<PathBuf>,
    status: Option<ExitStatus>,
}

impl Proc {
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How it exited, once a wait has seen it.
    pub fn status(&self) -> Option<ExitStatus> {
        self.status
    }

    /// Not seen exited yet (this does not look: see [`Proc::try_wait`]).
    pub fn is_running(&self) -> bool {
        self.status.is_none()
    }

    /// The file its standard error goes to, if any.
    pub fn stderr_path(&self) -> Option<&Path> {
        self.stderr.as_deref()
    }

    /// The end of its standard error ([`log_tail`]).
    pub fn stderr_tail(&self) -> String {
        match &self.stderr {
            Some(p) => log_tail(p),
            None => "(standard error not captured)".to_string(),
        }
    }

    /// Its exit status if it has exited (and reaps it), without blocking.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, ProcError> {
        if self.status.is_none() {
            self.status = self.child.try_wait().map_err(|e| self.wait_error(e))?;
        }
        Ok(self.status)
    }

    /// Waits for it to exit, however long that takes.
    pub fn wait(&mut self) -> Result<ExitStatus, ProcError> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        let s = self.child.wait().map_err(|e| self.wait_error(e))?;
        self.status = Some(s);
        Ok(s)
    }

    /// Waits for it to exit, or, once a stop is asked for ([`crate::signal`]: SIGINT
    /// or SIGTERM to this process, which a child in a group of its own does not get),
    /// stops it as [`Proc::stop`] does with `grace`.
    pub fn wait_or_stop(&mut self, grace: Duration) -> Result<Ended, ProcError> {
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(Ended {
                    status,
                    stopped: false,
                });
            }
            if crate::signal::stop_requested() {
                let status = match self.stop(grace) {
                    Some(s) => s,
                    None => self.wait()?,
                };
                return Ok(Ended {
                    status,
                    stopped: true,
                });
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    /// Waits for it to exit until `deadline`: `None` if it still runs then.
    pub fn wait_until(&mut self, deadline: Instant) -> Result<Option<ExitStatus>, ProcError> {
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(Some(s));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(POLL_INTERVAL.min(deadline - now));
        }
    }

    fn wait_error(&self, source: io::Error) -> ProcError {
        ProcError::Wait {
            name: self.name.clone(),
            source,
        }
    }

    /// Sends `signal` to its process group (or to it alone when it shares the
    /// caller's group). Nothing is sent once it has been seen exited.
    pub fn signal(&mut self, signal: Signal) -> Result<(), ProcError> {
        if self.try_wait()?.is_some() {
            return Ok(());
        }
        raw_kill(self.child.id(), self.own_group, signal)
    }

    /// SIGTERM; SIGKILL if it still runs after `grace`; reaps it. Returns its exit
    /// status (`None` only if waiting failed). Does nothing once it has exited.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Ok(Some(s)) = self.try_wait() {
            return Some(s);
        }
        let _ = self.signal(Signal::Term);
        if let Ok(Some(s)) = self.wait_until(Instant::now() + grace) {
            return Some(s);
        }
        self.kill_and_reap()
    }

    /// SIGKILL at once (no chance to write anything), then reap: what a crash
    /// does to it.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        self.kill_and_reap()
    }

    /// SIGKILL, then reap.
    fn kill_and_reap(&mut self) -> Option<ExitStatus> {
        let _ = self.signal(Signal::Kill);
        self.wait().ok()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(DROP_GRACE);
    }
}

/// Several children, each tagged with a kind `K` of the caller's (see the module
/// notes). Dropping the group stops every child still running ([`DROP_GRACE`]).
#[derive(Debug)]
pub struct Group<K: Copy + PartialEq> {
    members: Vec<(K, Proc)>,
}

impl<K: Copy + PartialEq> Default for Group<K> {
    fn default() -> Self {
        Group {
            members: Vec::new(),
        }
    }
}

impl<K: Copy + PartialEq> Group<K> {
    pub fn new() -> Group<K> {
        Group::default()
    }

    /// Starts `spec` as a member of kind `kind`.
    pub fn spawn(&mut self, kind: K, spec: Spec) -> Result<&mut Proc, ProcError> {
        self.push(kind, spec.spawn()?);
        Ok(self.last_mut())
    }

    /// Adds a child started elsewhere.
    pub fn push(&mut self, kind: K, proc: Proc) {
        self.members.push((kind, proc));
    }

    fn last_mut(&mut self) -> &mut Proc {
        let i = self.members.len() - 1;
        &mut self.members[i].1
    }

    /// Takes the member called `name` out of the group (the caller owns it now).
    pub fn take(&mut self, name: &str) -> Option<Proc> {
        let i = self.members.iter().position(|(_, p)| p.name == name)?;
        Some(self.members.remove(i).1)
    }

    /// The members in the order they were added.
    pub fn iter(&self) -> impl Iterator<Item = (K, &Proc)> {
        self.members.iter().map(|(k, p)| (*k, p))
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Looks at every member not yet seen exited; returns those that have exited
    /// since the last look, in the order they were added. A member whose status
    /// cannot be read is left as running.
    pub fn poll(&mut self) -> Vec<(K, &Proc)> {
        let mut ended = Vec::new();
        for (i, (_, p)) in self.members.iter_mut().enumerate() {
            if p.is_running() && matches!(p.try_wait(), Ok(Some(_))) {
                ended.push(i);
            }
        }
        ended
            .into_iter()
            .map(|i| (self.members[i].0, &self.members[i].1))
            .collect()
    }

    /// How many members of a kind `which` accepts have not been seen exited.
    pub fn running(&self, which: impl Fn(K) -> bool) -> usize {
        self.members
            .iter()
            .filter(|(k, p)| which(*k) && p.is_running())
            .count()
    }

    /// The first member (in the order added) of a kind `which` accepts that has been
    /// seen exited.
    pub fn first_exited(&self, which: impl Fn(K) -> bool) -> Option<&Proc> {
        self.members
            .iter()
            .find(|(k, p)| which(*k) && !p.is_running())
            .map(|(_, p)| p)
    }

    /// Polls until every member of a kind `which` accepts has exited or `deadline`
    /// passes; returns whether they all did.
    pub fn wait_until(&mut self, which: impl Fn(K) -> bool, deadline: Instant) -> bool {
        loop {
            self.poll();
            if self.running(&which) == 0 {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep(POLL_INTERVAL.min(deadline - now));
        }
    }

    /// SIGTERM to every running member of a kind `which` accepts, all at once; after
    /// `grace`, SIGKILL to those still running; reaps them.
    pub fn stop(&mut self, which: impl Fn(K) -> bool, grace: Duration) {
        for (k, p) in &mut self.members {
            if which(*k) && p.is_running() {
                let _ = p.signal(Signal::Term);
            }
        }
        if self.wait_until(&which, Instant::now() + grace) {
            return;
        }
        for (k, p) in &mut self.members {
            if which(*k) && p.is_running() {
                p.kill_and_reap();
            }
        }
    }
}

impl<K: Copy + PartialEq> Drop for Group<K> {
    fn drop(&mut self) {
        if self.running(|_| true) > 0 {
            self.stop(|_| true, DROP_GRACE);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    /// A scratch directory of this test process.
    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lockstep-proc-{}-{test}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn sh(name: &str, script: &str) -> Spec {
        Spec::new(name, "sh").args(["-c", script])
    }

    /// Whether `pid` has gone (no /proc entry) or is a zombie nobody has reaped yet.
    fn is_dead(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            // "pid (comm) S ...": the state follows the last ')'
            Ok(stat) => stat
                .rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        }
    }

    /// Polls `f` up to `tries` times, 10 ms apart.
    fn eventually(tries: u32, mut f: impl FnMut() -> bool) -> bool {
        for _ in 0..tries {
            if f() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        f()
    }

    /// Waits (bounded) until `path` holds a line, and returns it.
    fn first_line(path: &Path) -> String {
        let mut line = String::new();
        eventually(1000, || {
            line = std::fs::read_to_string(path).unwrap_or_default();
            line.ends_with('\n')
        });
        line.trim().to_string()
    }

    #[test]
    fn a_stopped_sleep_is_gone() {
        let mut p = Spec::new("sleep", "sleep").args(["5"]).spawn().unwrap();
        let pid = p.pid();
        assert_eq!(p.try_wait().unwrap(), None);
        assert!(p.is_running());
        let st = p.stop(Duration::from_secs(5)).unwrap();
        assert_eq!(st.signal(), Some(libc::SIGTERM));
        assert!(!p.is_running());
        assert!(eventually(500, || is_dead(pid)));
        // stopping again changes nothing
        assert_eq!(p.stop(Duration::ZERO), Some(st));
    }

    #[test]
    fn an_exit_status_is_reported() {
        let mut p = sh("three", "exit 3").spawn().unwrap();
        let st = p
            .wait_until(Instant::now() + Duration::from_secs(30))
            .unwrap();
        assert_eq!(st.and_then(|s| s.code()), Some(3));
        assert_eq!(p.wait().unwrap().code(), Some(3));
        assert_eq!(p.status().and_then(|s| s.code()), Some(3));
    }

    #[test]
    fn a_deadline_that_passes_returns_none() {
        let mut p = Spec::new("sleep", "sleep").args(["30"]).spawn().unwrap();
        assert_eq!(p.wait_until(Instant::now()).unwrap(), None);
        assert!(p.is_running());
    }

    #[test]
    fn a_child_ignoring_sigterm_is_killed() {
        let dir = scratch("ignore");
        let out = dir.join("ready");
        let mut p = sh("stubborn", "trap '' TERM; echo ready; exec sleep 30")
            .stdout(&out)
            .spawn()
            .unwrap();
        assert_eq!(first_line(&out), "ready");
        let st = p.stop(Duration::from_millis(100)).unwrap();
        assert_eq!(st.signal(), Some(libc::SIGKILL));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn drop_kills_the_group_including_a_grandchild() {
        let dir = scratch("grandchild");
        let out = dir.join("pid");
        let p = sh("parent", "sleep 30 & echo $!; wait")
            .stdout(&out)
            .spawn()
            .unwrap();
        let parent = p.pid();
        let grandchild: u32 = first_line(&out).parse().unwrap();
        assert!(!is_dead(grandchild));
        drop(p);
        assert!(is_dead(parent));
        assert!(eventually(500, || is_dead(grandchild)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn in_the_caller_group_only_the_child_is_signalled() {
        let mut p = Spec::new("sleep", "sleep")
            .args(["30"])
            .in_caller_group()
            .spawn()
            .unwrap();
        let st = p.stop(Duration::from_secs(5)).unwrap();
        assert_eq!(st.signal(), Some(libc::SIGTERM));
    }

    #[test]
    fn a_group_reports_who_exited_and_stops_by_kind() {
        let dir = scratch("group");
        let mut g: Group<u8> = Group::new();
        g.spawn(0, Spec::new("a", "sleep").args(["30"])).unwrap();
        g.spawn(
            0,
            sh("b", "echo one >&2; echo >&2; echo two >&2; exit 3").stderr(dir.join("b.err")),
        )
        .unwrap();
        let c = g
            .spawn(1, Spec::new("c", "sleep").args(["30"]))
            .unwrap()
            .pid();
        let mut ended = Vec::new();
        eventually(3000, || {
            ended.extend(g.poll().iter().map(|(k, p)| (*k, p.name().to_string())));
            !ended.is_empty()
        });
        assert_eq!(ended, [(0, "b".to_string())]);
        assert!(g.poll().is_empty());
        let b = g.first_exited(|k| k == 0).unwrap();
        assert_eq!(b.status().and_then(|s| s.code()), Some(3));
        assert_eq!(b.stderr_tail(), "one | two");
        assert_eq!(g.running(|k| k == 0), 1);
        assert_eq!(g.running(|_| true), 2);
        g.stop(|k| k == 0, Duration::from_secs(5));
        assert_eq!(g.running(|k| k == 0), 0);
        assert_eq!(g.running(|k| k == 1), 1);
        assert!(!g.wait_until(|k| k == 1, Instant::now()));
        assert_eq!(g.len(), 3);
        drop(g);
        assert!(is_dead(c));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn log_tails() {
        let dir = scratch("tail");
        let f = dir.join("x.err");
        std::fs::write(&f, "a\n\nb\n  \nc\nd\n").unwrap();
        assert_eq!(log_tail(&f), "b | c | d");
        std::fs::write(&f, "").unwrap();
        assert_eq!(
            log_tail(&f),
            format!("(nothing on stderr; see {})", f.display())
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn failures_to_start_say_what() {
        let e = Spec::new("x", "/nonexistent/lockstep-prog")
            .args(["a b"])
            .spawn()
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "starting x (/nonexistent/lockstep-prog 'a b'): No such file or directory (os error 2)"
        );
        let e = Spec::from_argv::<&str>("y", &[]).spawn().unwrap_err();
        assert_eq!(e.to_string(), "starting y: no program given");
        let e = Spec::new("z", "true")
            .netns(Netns::Enter("lst-never-created-p".into()))
            .spawn()
            .unwrap_err();
        assert!(matches!(e, ProcError::Netns(NetnsError::NotFound(_))));
        let e = Spec::new("z", "true")
            .stderr("/nonexistent/dir/z.err")
            .spawn()
            .unwrap_err();
        assert!(matches!(e, ProcError::Log { .. }), "{e}");
    }

    #[test]
    fn command_lines_show_the_namespace() {
        let s = Spec::from_argv("s", &["probe", "sink", "--bind", "10.0.0.1:9"]);
        assert_eq!(s.command_line(), "probe sink --bind 10.0.0.1:9");
        let s = s.netns(Netns::Exec("ns-b".into()));
        assert_eq!(
            s.command_line(),
            "ip netns exec ns-b probe sink --bind 10.0.0.1:9"
        );
    }

    #[test]
    fn nonsense_pids_are_not_signalled() {
        for pid in [0, u32::MAX] {
            let e = signal_pid(pid, Signal::Term).unwrap_err();
            assert!(matches!(e, ProcError::Signal { .. }), "{e}");
        }
        assert!(raw_kill(1, true, Signal::Term).is_err());
    }
}
