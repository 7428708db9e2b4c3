//! Writing a result file so that a crash, a kill or a full disk never leaves half of
//! it: the bytes go to a temporary file beside the target (`NAME.PID.tmp`), which is
//! flushed to the disk (`fsync`) and then renamed over the target; the directory is
//! flushed too, so the rename itself survives a power cut. A reader sees the old file
//! or the new one, never a mixture.

use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// Why a file was not written; the target is then as it was before.
#[derive(Debug, thiserror::Error)]
#[error("cannot {what} {path}: {source}")]
pub struct WriteError {
    /// What failed: "write", "flush", "rename to".
    pub what: &'static str,
    pub path: String,
    #[source]
    pub source: std::io::Error,
}

/// The temporary name `path`'s bytes are written under before the rename.
fn temporary(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// Writes `bytes` to `path` atomically and durably (see the module's header).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), WriteError> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] for bytes `fill` writes as it makes them (a document too large
/// to hold in memory twice).
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), WriteError> {
    let tmp = temporary(path);
    let fail = |what, p: &Path| {
        let path = p.display().to_string();
        move |source| WriteError { what, path, source }
    };
    let written = File::create(&tmp)
        .and_then(|f| {
            let mut w = BufWriter::new(f);
            fill(&mut w)?;
            w.into_inner().map_err(io::IntoInnerError::into_error)
        })
        .map_err(fail("write", &tmp))
        .and_then(|f| f.sync_all().map_err(fail("flush", &tmp)))
        .and_then(|()| fs::rename(&tmp, path).map_err(fail("rename to", path)));
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written?;
    sync_parent(path);
    Ok(())
}

/// Flushes the directory entry of `path`: without this the rename may be lost in a
/// power cut. Best effort: some file systems refuse to sync a directory.
fn sync_parent(path: &Path) {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("lockstep-durable-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("scratch directory");
        d
    }

    #[test]
    fn the_new_bytes_replace_the_old_and_no_temporary_file_is_left() {
        let d = scratch("replace");
        let p = d.join("summary.json");
        fs::write(&p, b"old").expect("old file");
        write_atomic(&p, b"new").expect("written");
        assert_eq!(fs::read(&p).expect("read back"), b"new");
        let names: Vec<_> = fs::read_dir(&d)
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("summary.json")]);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_failed_write_names_the_file_and_leaves_the_target_as_it_was() {
        let d = scratch("fail");
        let p = d.join("missing-dir").join("out.txt");
        let e = write_atomic(&p, b"x").expect_err("no such directory");
        assert_eq!(e.what, "write");
        assert!(e.to_string().starts_with("cannot write "), "{e}");
        assert!(e.to_string().contains("out.txt."), "{e}");
        assert!(!p.exists());
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn a_streamed_write_that_fails_leaves_the_target_as_it_was() {
        let d = scratch("stream");
        let p = d.join("summary.json");
        fs::write(&p, b"old").expect("old file");
        let e = write_atomic_with(&p, |w| {
            w.write_all(b"half")?;
            Err(io::Error::other("the document could not be made"))
        })
        .expect_err("fill failed");
        assert!(
            e.to_string().contains("the document could not be made"),
            "{e}"
        );
        assert_eq!(fs::read(&p).expect("read back"), b"old");
        write_atomic_with(&p, |w| w.write_all(b"new")).expect("written");
        assert_eq!(fs::read(&p).expect("read back"), b"new");
        assert_eq!(fs::read_dir(&d).expect("dir").count(), 1);
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn the_temporary_file_sits_beside_the_target() {
        assert_eq!(
            temporary(Path::new("a.json")),
            PathBuf::from(format!("a.json.{}.tmp", std::process::id()))
        );
    }
}
