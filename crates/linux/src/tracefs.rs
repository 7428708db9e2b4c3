//! The kernel's function tracer, used like `cyclictest -b`: when a probe sees a latency
//! above its threshold it writes a marker into the trace and stops tracing, so the trace
//! buffer ends at the spike and shows what the kernel was doing.
//!
//! A [`TraceSession`] goes further, like `cyclictest -b` with events: it enables the
//! scheduler, interrupt and timer events the kernel offers in a bounded buffer, lets
//! the probe mark and stop the trace at the spike, saves the end of the buffer to a
//! file, and puts everything back as it was (also when dropped on an error path).
//!
//! Nothing here is mounted or changed unless asked ([`try_mount`], [`TraceSession`]).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Where tracefs is mounted by convention (kernel ≥ 4.1).
pub const TRACEFS_MOUNT_POINT: &str = "/sys/kernel/tracing";

/// Why the trace cannot be used.
#[derive(Debug, Error)]
pub enum TraceError {
    #[error("tracefs is not mounted: run `sudo mount -t tracefs nodev {TRACEFS_MOUNT_POINT}`")]
    NotMounted,
    #[error("this kernel has no tracefs (built without CONFIG_TRACING: not listed in /proc/filesystems)")]
    Unsupported,
    #[error("cannot mount tracefs on {TRACEFS_MOUNT_POINT}: permission denied (run as root or with CAP_SYS_ADMIN)")]
    MountDenied,
    #[error("cannot mount tracefs on {TRACEFS_MOUNT_POINT}: {0}")]
    Mount(#[source] io::Error),
    #[error("cannot unmount tracefs from {}: {source}", .path.display())]
    Unmount {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {}: permission denied (run as root)", .0.display())]
    Denied(PathBuf),
    #[error("{} does not exist: this kernel's tracer lacks it", .0.display())]
    Missing(PathBuf),
    #[error("cannot write {}: {source}", .path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl TraceError {
    /// A missing privilege (exit status 3).
    pub fn is_permission(&self) -> bool {
        matches!(self, TraceError::MountDenied | TraceError::Denied(_))
    }

    fn from_io(path: PathBuf, e: io::Error) -> TraceError {
        match e.kind() {
            io::ErrorKind::PermissionDenied => TraceError::Denied(path),
            io::ErrorKind::NotFound => TraceError::Missing(path),
            _ => TraceError::Io { path, source: e },
        }
    }
}

/// Undoes the octal escapes of `/proc/mounts` (`\040` for a space).
fn unescape_mount_field(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' {
            let digits = b.get(i + 1..i + 4).unwrap_or_default();
            if digits.len() == 3 && digits.iter().all(|d| (b'0'..=b'7').contains(d)) {
                let v = digits
                    .iter()
                    .fold(0u32, |acc, d| acc * 8 + u32::from(d - b'0'));
                if let Ok(byte) = u8::try_from(v) {
                    out.push(byte);
                    i += 4;
                    continue;
                }
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Finds the tracing directory in the text of `/proc/mounts`: a tracefs mount, else
/// `tracing/` inside a debugfs mount (the kernel automounts tracefs there).
pub fn find_tracefs(mounts: &str) -> Option<PathBuf> {
    let mut debugfs = None;
    for line in mounts.lines() {
        let mut f = line.split_whitespace();
        let (Some(_dev), Some(dir), Some(fstype)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        match fstype {
            "tracefs" => return Some(PathBuf::from(unescape_mount_field(dir))),
            "debugfs" if debugfs.is_none() => {
                debugfs = Some(PathBuf::from(unescape_mount_field(dir)).join("tracing"))
            }
            _ => {}
        }
    }
    debugfs
}

/// The mounted tracing directory, if any (checks `/proc/mounts`; mounts nothing).
pub fn tracing_dir() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/mounts").ok()?;
    find_tracefs(&mounts).filter(|d| d.join("tracing_on").exists())
}

/// Whether the kernel lists `tracefs` in the text of `/proc/filesystems`.
pub fn filesystems_has_tracefs(filesystems: &str) -> bool {
    filesystems
        .lines()
        .any(|l| l.split_whitespace().last() == Some("tracefs"))
}

/// Mounts tracefs on `/sys/kernel/tracing` unless it is already mounted; returns the
/// tracing directory. Only call this when the user asked for tracing.
pub fn try_mount() -> Result<PathBuf, TraceError> {
    if let Some(dir) = tracing_dir() {
        return Ok(dir);
    }
    let fs = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    if !filesystems_has_tracefs(&fs) {
        return Err(TraceError::Unsupported);
    }
    let source = c"nodev";
    let target = c"/sys/kernel/tracing";
    let fstype = c"tracefs";
    // SAFETY: all three are valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => TraceError::MountDenied,
            Some(libc::ENODEV) => TraceError::Unsupported,
            _ => TraceError::Mount(e),
        });
    }
    Ok(PathBuf::from(TRACEFS_MOUNT_POINT))
}

fn write_file(path: &Path, data: &[u8]) -> Result<(), TraceError> {
    let mut f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(|e| TraceError::from_io(path.to_path_buf(), e))?;
    f.write_all(data)
        .map_err(|e| TraceError::from_io(path.to_path_buf(), e))
}

/// Writes `msg` into the trace (`trace_marker`).
pub fn write_marker(msg: &str) -> Result<(), TraceError> {
    let dir = tracing_dir().ok_or(TraceError::NotMounted)?;
    write_file(&dir.join("trace_marker"), msg.as_bytes())
}

/// Stops tracing (`tracing_on` = 0) so the buffer keeps what led up to now.
pub fn stop_tracing() -> Result<(), TraceError> {
    let dir = tracing_dir().ok_or(TraceError::NotMounted)?;
    write_file(&dir.join("tracing_on"), b"0")
}

/// Starts tracing again (`tracing_on` = 1).
pub fn start_tracing() -> Result<(), TraceError> {
    let dir = tracing_dir().ok_or(TraceError::NotMounted)?;
    write_file(&dir.join("tracing_on"), b"1")
}

/// `trace_marker` and `tracing_on` opened once, for a probe that may hit its threshold
/// at any moment: marking and freezing then costs two `write`s, no `open`.
#[derive(Debug)]
pub struct TraceMarker {
    dir: PathBuf,
    marker: File,
    on: File,
}

impl TraceMarker {
    /// Opens the files in the mounted tracing directory.
    pub fn open() -> Result<TraceMarker, TraceError> {
        let dir = tracing_dir().ok_or(TraceError::NotMounted)?;
        let open = |name: &str| {
            let p = dir.join(name);
            OpenOptions::new()
                .write(true)
                .open(&p)
                .map_err(|e| TraceError::from_io(p, e))
        };
        Ok(TraceMarker {
            marker: open("trace_marker")?,
            on: open("tracing_on")?,
            dir,
        })
    }

    /// The tracing directory the files belong to.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writes `msg` into the trace.
    pub fn mark(&self, msg: &str) -> Result<(), TraceError> {
        (&self.marker)
            .write_all(msg.as_bytes())
            .map_err(|e| TraceError::from_io(self.dir.join("trace_marker"), e))
    }

    /// Writes `msg` and stops tracing, as `cyclictest -b` does on a threshold breach.
    pub fn mark_and_stop(&self, msg: &str) -> Result<(), TraceError> {
        self.mark(msg)?;
        (&self.on)
            .write_all(b"0")
            .map_err(|e| TraceError::from_io(self.dir.join("tracing_on"), e))
    }
}

/// The events a [`TraceSession`] enables where the kernel has them: who ran, who was
/// woken, every hard and soft interrupt, and the timers behind the wake-ups.
pub const SESSION_EVENTS: [&str; 12] = [
    "sched/sched_switch",
    "sched/sched_wakeup",
    "sched/sched_waking",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
];

/// The trace buffer a session asks for, per CPU (KiB): a few hundred milliseconds of
/// these events on a busy CPU, and a bounded amount of memory.
pub const SESSION_BUFFER_KB: u64 = 2048;

/// What a session changed, as it was before.
#[derive(Debug)]
struct Saved {
    tracing_on: String,
    /// `None` when the size could not be read as a number (it is then left alone).
    buffer_size_kb: Option<u64>,
    /// Each enabled event's `enable` file and its value before.
    events: Vec<(PathBuf, String)>,
    /// tracefs was mounted by the session (it is unmounted again).
    mounted: bool,
}

/// Events enabled in a bounded trace buffer for one run, with the marker files open
/// (see the module docs). [`TraceSession::restore`] (or dropping it) puts tracefs
/// back as it was.
#[derive(Debug)]
pub struct TraceSession {
    dir: PathBuf,
    marker: TraceMarker,
    enabled: Vec<String>,
    saved: Option<Saved>,
}

/// `7 (expanded: 1408)` or `1408`: the buffer size in KiB that is in effect.
pub fn parse_buffer_size_kb(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(rest) = t.split("expanded:").nth(1) {
        return rest.trim().trim_end_matches(')').trim().parse().ok();
    }
    t.parse().ok()
}

fn read_file(path: &Path) -> Result<String, TraceError> {
    std::fs::read_to_string(path).map_err(|e| TraceError::from_io(path.to_path_buf(), e))
}

impl TraceSession {
    /// Mounts tracefs if it is not (root), saves what it changes, sets the buffer to
    /// `buffer_kb` per CPU, clears it, enables those of `events` the kernel has and
    /// turns tracing on. Fails (with everything put back) when tracefs cannot be
    /// mounted or written, or when the kernel has none of the events.
    pub fn start(events: &[&str], buffer_kb: u64) -> Result<TraceSession, TraceError> {
        let mounted = tracing_dir().is_none();
        let dir = try_mount()?;
        let mut session = TraceSession {
            marker: TraceMarker::open()?,
            dir: dir.clone(),
            enabled: Vec::new(),
            saved: Some(Saved {
                tracing_on: read_file(&dir.join("tracing_on"))?.trim().to_string(),
                buffer_size_kb: parse_buffer_size_kb(&read_file(&dir.join("buffer_size_kb"))?),
                events: Vec::new(),
                mounted,
            }),
        };
        session.set_up(events, buffer_kb)?;
        Ok(session)
    }

    fn set_up(&mut self, events: &[&str], buffer_kb: u64) -> Result<(), TraceError> {
        write_file(&self.dir.join("tracing_on"), b"0")?;
        if self
            .saved
            .as_ref()
            .is_some_and(|s| s.buffer_size_kb.is_some())
        {
            write_file(
                &self.dir.join("buffer_size_kb"),
                buffer_kb.to_string().as_bytes(),
            )?;
        }
        // opening `trace` for writing with truncation clears the buffer
        File::create(self.dir.join("trace"))
            .map_err(|e| TraceError::from_io(self.dir.join("trace"), e))?;
        for &ev in events {
            let path = self.dir.join("events").join(ev).join("enable");
            let Ok(before) = std::fs::read_to_string(&path) else {
                continue; // this kernel lacks the event
            };
            if let Some(s) = self.saved.as_mut() {
                s.events.push((path.clone(), before.trim().to_string()));
            }
            write_file(&path, b"1")?;
            self.enabled.push(ev.to_string());
        }
        if self.enabled.is_empty() {
            return Err(TraceError::Missing(
                self.dir.join("events").join(events.join(", ")),
            ));
        }
        write_file(&self.dir.join("tracing_on"), b"1")
    }

    /// The events enabled (`group/name`).
    pub fn events(&self) -> &[String] {
        &self.enabled
    }

    /// The marker files: write the marker and stop tracing at the spike.
    pub fn marker(&self) -> &TraceMarker {
        &self.marker
    }

    /// Writes the trace buffer to `file`, whole or not at all: its header lines and at
    /// most the last `keep_bytes` of events (whole lines), which end at the marker when
    /// the trace was stopped there. Returns the bytes written.
    pub fn save(&self, file: &Path, keep_bytes: usize) -> Result<usize, TraceError> {
        let text = read_file(&self.dir.join("trace"))?;
        let body_at = text
            .match_indices('\n')
            .map(|(i, _)| i + 1)
            .find(|&i| !text[i..].starts_with('#'))
            .unwrap_or(text.len());
        let (header, body) = text.split_at(body_at);
        let tail = match body.len().checked_sub(keep_bytes) {
            Some(cut) if cut > 0 => {
                let from = body[cut..].find('\n').map_or(body.len(), |i| cut + i + 1);
                &body[from..]
            }
            _ => body,
        };
        let out = [header.as_bytes(), tail.as_bytes()].concat();
        crate::durable::write_atomic(file, &out).map_err(|e| TraceError::Io {
            path: file.to_path_buf(),
            source: e.source,
        })?;
        Ok(out.len())
    }

    /// Puts back what [`TraceSession::start`] changed: each event's enable value, the
    /// buffer size, `tracing_on`, and unmounts tracefs if the session mounted it.
    /// Every step is tried; the first failure is returned. Only the first call acts.
    pub fn restore(&mut self) -> Result<(), TraceError> {
        let Some(saved) = self.saved.take() else {
            return Ok(());
        };
        let mut first_err = None;
        let mut note = |r: Result<(), TraceError>| {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        };
        note(write_file(&self.dir.join("tracing_on"), b"0"));
        for (path, before) in saved.events.iter().rev() {
            // `X` (mixed, for a group) cannot be written back: such events were off
            let v = if before == "1" { "1" } else { "0" };
            note(write_file(path, v.as_bytes()));
        }
        // The size is put back by writing it: a kernel that rounds sizes to whole
        // ring-buffer pages reads back the rounded size (6.18: 1408 → 1410), and a
        // buffer that had never been used (`7 (expanded: 1408)`) stays allocated.
        if let Some(kb) = saved.buffer_size_kb {
            note(write_file(
                &self.dir.join("buffer_size_kb"),
                kb.to_string().as_bytes(),
            ));
        }
        note(write_file(
            &self.dir.join("tracing_on"),
            saved.tracing_on.as_bytes(),
        ));
        if saved.mounted {
            note(unmount(&self.dir));
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for TraceSession {
    fn drop(&mut self) {
        let _ = self.restore();
    }
}

/// Unmounts the tracefs the session mounted.
fn unmount(dir: &Path) -> Result<(), TraceError> {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| TraceError::Missing(dir.to_path_buf()))?;
    // SAFETY: `c` is a valid NUL-terminated path.
    let rc = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    if rc == 0 {
        Ok(())
    } else {
        Err(TraceError::Unmount {
            path: dir.to_path_buf(),
            source: io::Error::last_os_error(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_tracefs_or_debugfs() {
        let plain = "proc /proc proc rw 0 0\nsysfs /sys sysfs rw 0 0\n";
        assert_eq!(find_tracefs(plain), None);
        let tracefs = "debugfs /sys/kernel/debug debugfs rw 0 0\ntracefs /sys/kernel/tracing tracefs rw,nosuid 0 0\n";
        assert_eq!(
            find_tracefs(tracefs),
            Some(PathBuf::from("/sys/kernel/tracing"))
        );
        let debugfs = "none /sys/kernel/debug debugfs rw 0 0\n";
        assert_eq!(
            find_tracefs(debugfs),
            Some(PathBuf::from("/sys/kernel/debug/tracing"))
        );
        let escaped = "nodev /mnt/my\\040trace tracefs rw 0 0\n";
        assert_eq!(find_tracefs(escaped), Some(PathBuf::from("/mnt/my trace")));
        assert_eq!(find_tracefs("garbage\n\n"), None);
    }

    #[test]
    fn unescapes_only_valid_octal() {
        assert_eq!(unescape_mount_field("a\\040b"), "a b");
        assert_eq!(unescape_mount_field("a\\\\b"), "a\\\\b");
        assert_eq!(unescape_mount_field("end\\04"), "end\\04");
        assert_eq!(unescape_mount_field("x\\777"), "x\\777");
    }

    #[test]
    fn buffer_size_as_in_effect() {
        assert_eq!(parse_buffer_size_kb("7 (expanded: 1408)\n"), Some(1408));
        assert_eq!(parse_buffer_size_kb("2048\n"), Some(2048));
        assert_eq!(parse_buffer_size_kb("X\n"), None);
    }

    #[test]
    fn filesystems_listing() {
        assert!(filesystems_has_tracefs(
            "nodev\tsysfs\nnodev\ttracefs\n\text4\n"
        ));
        assert!(!filesystems_has_tracefs("nodev\tsysfs\n\text4\n"));
    }

    #[test]
    fn not_mounted_is_said_plainly() {
        if tracing_dir().is_some() {
            eprintln!("skipped: tracefs is mounted here");
            return;
        }
        let e = write_marker("x").unwrap_err();
        assert_eq!(
            e.to_string(),
            "tracefs is not mounted: run `sudo mount -t tracefs nodev /sys/kernel/tracing`"
        );
        assert!(matches!(stop_tracing(), Err(TraceError::NotMounted)));
        assert!(!e.is_permission());
    }

    /// Mounts tracefs (a system change), so it only runs on request:
    /// `cargo test -p lockstep-linux -- --ignored tracefs`.
    #[test]
    #[ignore]
    fn mount_mark_and_stop() {
        let dir = try_mount().unwrap();
        let m = TraceMarker::open().unwrap();
        assert_eq!(m.dir(), dir.as_path());
        start_tracing().unwrap();
        write_marker("lockstep test marker").unwrap();
        m.mark_and_stop("lockstep threshold").unwrap();
        let on = std::fs::read_to_string(dir.join("tracing_on")).unwrap();
        assert_eq!(on.trim(), "0");
        start_tracing().unwrap();
    }
}
