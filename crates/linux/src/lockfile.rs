//! An exclusive lock on a file, held for a process's life (`flock`, released by the
//! kernel when the process ends, even by SIGKILL): one writer per database. The
//! holder's PID is written into the lock file so a second process can name it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why the lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{path} is locked by another process ({holder}): one at a time")]
    Held { path: String, holder: String },
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A held lock; dropping it releases it.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
    path: PathBuf,
}

impl FileLock {
    /// Takes the lock on `path` (created 0600 if missing) without waiting.
    pub fn try_exclusive(path: &Path) -> Result<FileLock, LockError> {
        let shown = path.display().to_string();
        let io = |source| LockError::Io {
            path: shown.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor this function owns; no memory is passed.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                let pid = pid.trim();
                let holder = if pid.is_empty() {
                    "its PID is not recorded".to_string()
                } else {
                    format!("PID {pid}")
                };
                return Err(LockError::Held {
                    path: shown,
                    holder,
                });
            }
            return Err(io(err));
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        writeln!(file, "{}", std::process::id()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(FileLock {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_naming_the_holder_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("lockstep-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("db.lock");
        let first = FileLock::try_exclusive(&p).unwrap();
        // flock locks belong to the open file description: a second open in the same
        // process is refused too
        match FileLock::try_exclusive(&p) {
            Err(LockError::Held { holder, .. }) => {
                assert_eq!(holder, format!("PID {}", std::process::id()))
            }
            other => panic!("{other:?}"),
        }
        drop(first);
        let again = FileLock::try_exclusive(&p).unwrap();
        assert_eq!(again.path(), p.as_path());
        drop(again);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
