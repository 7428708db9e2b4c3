//! `lockstep host apply` / `restore`: run-time tuning that can be undone exactly.
//!
//! [`apply`] computes the changes (`lockstep_core::audit::plan`), reads each setting's
//! current value, saves them all to a state file *before* changing anything, then
//! makes the changes one by one. A change the kernel refuses (an IRQ whose affinity
//! is fixed, a governor the driver lacks) is reported and the rest go on. A setting
//! whose current value cannot be read is not changed: it could not be restored.
//! [`restore`] writes every saved value back and checks it reads back byte for byte;
//! it refuses a state saved during another boot (the reboot already reset them).
//! Nothing here touches the boot command line.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use lockstep_core::audit::plan::{self, Change, PlanError, Request};
use lockstep_core::audit::{Coalesce, Snapshot};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::ethtool;

/// Where the state goes unless `--state` says otherwise (tmpfs: gone at reboot, like
/// the settings it records).
pub const DEFAULT_STATE: &str = "/run/lockstep/host-state.json";

/// Layout version of the state file.
const STATE_VERSION: u32 = 1;

/// Why apply or restore failed.
#[derive(Debug, Error)]
pub enum TuneError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("changing host settings needs root (run with sudo)")]
    NotRoot,
    #[error("a saved state already exists at {0}: run `lockstep host restore` first (applying again would record the tuned values as the originals)")]
    StateExists(PathBuf),
    #[error("no saved state at {0}: nothing to restore (`lockstep host apply` saves one)")]
    NoState(PathBuf),
    #[error("{path}: not a lockstep host state file: {reason}")]
    BadState { path: PathBuf, reason: String },
    #[error("{path} was saved during another boot (boot id {saved}, now {now}): the reboot already reset those settings; delete the file")]
    OtherBoot {
        path: PathBuf,
        saved: String,
        now: String,
    },
    #[error("cannot read the boot id (/proc/sys/kernel/random/boot_id): {0}")]
    BootId(#[source] io::Error),
    #[error("cannot write the state file {path}: {source}")]
    StateWrite {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl TuneError {
    /// Bad input (exit 2) rather than an environment problem (exit 3).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            TuneError::Plan(_)
                | TuneError::StateExists(_)
                | TuneError::NoState(_)
                | TuneError::BadState { .. }
                | TuneError::OtherBoot { .. }
        )
    }
}

/// The value a setting had before.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Previous {
    /// The file's exact text.
    File {
        text: String,
    },
    Coalesce {
        value: Coalesce,
    },
}

/// Where a change stands.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", content = "reason", rename_all = "snake_case")]
pub enum Status {
    /// Saved, not yet attempted (a crash here leaves it to restore, which is harmless).
    Pending,
    Applied,
    /// The kernel or driver refused it; nothing changed.
    Refused(String),
    /// The current value could not be read, so it was not changed.
    Skipped(String),
}

/// One setting: what was asked, what it was, what happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub change: Change,
    pub previous: Option<Previous>,
    pub status: Status,
}

/// The state file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub version: u32,
    pub boot_id: String,
    pub request: Request,
    pub entries: Vec<Entry>,
}

impl State {
    pub fn applied(&self) -> impl Iterator<Item = &Entry> {
        self.entries
            .iter()
            .filter(|e| matches!(e.status, Status::Applied | Status::Pending))
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn write_state(path: &Path, state: &State) -> Result<(), TuneError> {
    let err = |source| TuneError::StateWrite {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(err)?;
    }
    let json = serde_json::to_string_pretty(state).map_err(|e| err(io::Error::other(e)))?;
    // Whole or not at all, and on the disk before anything is changed: the state is
    // what puts the host back after a crash.
    crate::durable::write_atomic(path, (json + "\n").as_bytes()).map_err(|e| err(e.source))
}

/// Reads the previous value a change would overwrite.
fn previous(change: &Change) -> Result<Previous, String> {
    match change {
        Change::File { path, .. } => fs::read_to_string(path)
            .map(|text| Previous::File { text })
            .map_err(|e| format!("cannot read {path}: {e}")),
        Change::Coalesce { nic, .. } => ethtool::get_coalesce(nic)
            .map(|value| Previous::Coalesce { value })
            .map_err(|e| e.to_string()),
    }
}

fn write_file(path: &str, text: &str) -> Result<(), String> {
    // procfs/sysfs files take one write; no O_CREAT for files that must exist.
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| e.to_string())?;
    io::Write::write_all(&mut f, text.as_bytes()).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) => {
            "the kernel refused it (EPERM: fixed by the kernel, e.g. a managed or per-CPU interrupt)"
                .to_string()
        }
        Some(libc::EIO) => "the kernel refused it (EIO)".to_string(),
        Some(libc::EINVAL) => "the kernel refused the value (EINVAL)".to_string(),
        _ => e.to_string(),
    })
}

fn make(change: &Change) -> Result<(), String> {
    match change {
        Change::File { path, value, .. } => write_file(path, value),
        Change::Coalesce { nic, value } => ethtool::set_coalesce(nic, *value)
            .map(|_| ())
            .map_err(|e| e.to_string()),
    }
}

/// Saves the current values and applies the plan. Returns the state as saved (with
/// each entry's outcome); when nothing could be applied no state file is left.
pub fn apply(s: &Snapshot, req: &Request, state_path: &Path) -> Result<State, TuneError> {
    let changes = plan::plan(s, req)?;
    if !is_root() {
        return Err(TuneError::NotRoot);
    }
    if state_path.exists() {
        return Err(TuneError::StateExists(state_path.to_path_buf()));
    }
    let boot_id = crate::audit::boot_id().map_err(TuneError::BootId)?;
    let entries = changes
        .into_iter()
        .map(|change| match previous(&change) {
            Ok(p) => Entry {
                change,
                previous: Some(p),
                status: Status::Pending,
            },
            Err(why) => Entry {
                change,
                previous: None,
                status: Status::Skipped(format!("{why}: it could not be restored")),
            },
        })
        .collect();
    let mut state = State {
        version: STATE_VERSION,
        boot_id,
        request: req.clone(),
        entries,
    };
    write_state(state_path, &state)?;
    for e in &mut state.entries {
        if e.status == Status::Pending {
            e.status = match make(&e.change) {
                Ok(()) => Status::Applied,
                Err(why) => Status::Refused(why),
            };
        }
    }
    if state.applied().next().is_some() {
        write_state(state_path, &state)?;
    } else {
        let _ = fs::remove_file(state_path);
    }
    Ok(state)
}

/// One restored setting and whether it reads back exactly as saved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    pub what: String,
    pub result: Result<(), String>,
}

/// Reads a state file, checking it belongs to this boot.
pub fn load_state(state_path: &Path) -> Result<State, TuneError> {
    let text = match fs::read_to_string(state_path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(TuneError::NoState(state_path.to_path_buf()))
        }
        Err(e) => {
            return Err(TuneError::BadState {
                path: state_path.to_path_buf(),
                reason: e.to_string(),
            })
        }
    };
    let state: State = serde_json::from_str(&text).map_err(|e| TuneError::BadState {
        path: state_path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if state.version != STATE_VERSION {
        return Err(TuneError::BadState {
            path: state_path.to_path_buf(),
            reason: format!(
                "layout version {} (this lockstep writes {STATE_VERSION})",
                state.version
            ),
        });
    }
    let now = crate::audit::boot_id().map_err(TuneError::BootId)?;
    if now != state.boot_id {
        return Err(TuneError::OtherBoot {
            path: state_path.to_path_buf(),
            saved: state.boot_id,
            now,
        });
    }
    Ok(state)
}

/// Puts back every saved value (last change first). The state file is removed when
/// all read back as saved, and kept (for another try) otherwise.
pub fn restore(state_path: &Path) -> Result<Vec<Restored>, TuneError> {
    let state = load_state(state_path)?;
    if !is_root() {
        return Err(TuneError::NotRoot);
    }
    let mut out = Vec::new();
    for e in state.applied().collect::<Vec<_>>().into_iter().rev() {
        let what = e.change.what();
        let result = match (&e.change, &e.previous) {
            (Change::File { path, .. }, Some(Previous::File { text })) => write_file(path, text)
                .and_then(|()| match fs::read_to_string(path) {
                    Ok(now) if &now == text => Ok(()),
                    Ok(now) => Err(format!(
                        "{path} reads {:?} after restoring {:?}",
                        now.trim_end(),
                        text.trim_end()
                    )),
                    Err(err) => Err(format!("cannot read {path} back: {err}")),
                }),
            (Change::Coalesce { nic, .. }, Some(Previous::Coalesce { value })) => {
                match ethtool::set_coalesce(nic, *value) {
                    Ok(got) if got == *value => Ok(()),
                    Ok(got) => Err(format!(
                        "{nic} coalescing reads {} after restoring {}",
                        got.describe(),
                        value.describe()
                    )),
                    Err(err) => Err(err.to_string()),
                }
            }
            _ => Err("the state file has no previous value for it".to_string()),
        };
        out.push(Restored { what, result });
    }
    if out.iter().all(|r| r.result.is_ok()) {
        fs::remove_file(state_path).map_err(|source| TuneError::StateWrite {
            path: state_path.to_path_buf(),
            source,
        })?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("lockstep-tune-{name}-{}.json", std::process::id()))
    }

    #[test]
    fn restore_without_state_or_from_another_boot() {
        let p = tmp("none");
        let _ = fs::remove_file(&p);
        let e = restore(&p).unwrap_err();
        assert!(e.is_usage());
        assert_eq!(
            e.to_string(),
            format!(
                "no saved state at {}: nothing to restore (`lockstep host apply` saves one)",
                p.display()
            )
        );
        let other = State {
            version: STATE_VERSION,
            boot_id: "00000000-0000-0000-0000-000000000000".into(),
            request: Request {
                rt_cpus: vec![1],
                nic: None,
                nic_irqs: Default::default(),
            },
            entries: vec![],
        };
        write_state(&p, &other).unwrap();
        let e = restore(&p).unwrap_err();
        fs::remove_file(&p).unwrap();
        assert!(matches!(e, TuneError::OtherBoot { .. }), "{e}");
        assert!(
            e.to_string().contains(
                "was saved during another boot (boot id 00000000-0000-0000-0000-000000000000, now "
            ),
            "{e}"
        );
        fs::write(&p, "{not json").unwrap();
        let e = restore(&p).unwrap_err();
        fs::remove_file(&p).unwrap();
        assert!(matches!(e, TuneError::BadState { .. }), "{e}");
    }
}
