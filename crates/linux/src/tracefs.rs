//! The kernel's function tracer, used like `cyclictest -b`: when a probe sees a latency
//! above its threshold it writes a marker into the trace and stops tracing, so the trace
//! buffer ends at the spike and shows what the kernel was doing.
//!
//! Nothing here is mounted or changed unless asked ([`try_mount`]).

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
