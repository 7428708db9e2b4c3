//! The controller's database: one SQLite file (embedded, nothing to install).
//!
//! One table of reservations, in insertion order (`seq`, never reused), each row the
//! request that created it (`spec`, JSON with the units as written) so that a
//! restart re-admits exactly the same flows in the same order and gets the same
//! exact bounds; one table of counters (`meta`: the schedule version).
//!
//! Every change is one transaction: a reservation and the schedule version it bumps
//! are written together or not at all. The journal is a write-ahead log with
//! `synchronous = FULL`: a commit is on disk before the controller answers, and a
//! process killed at any point (`kill -9`) leaves the last committed state.

use std::path::Path;

use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};

/// What a reservation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A shaped flow (T-SPEC, path, deadline), admitted by network calculus.
    Flow,
    /// A best-effort sender's small standing reservation.
    Standing,
    /// A best-effort one-shot reservation: a flow that expires.
    Oneshot,
    /// A TDP flow: frames on each hop.
    Tdp,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Flow => "flow",
            Kind::Standing => "standing",
            Kind::Oneshot => "oneshot",
            Kind::Tdp => "tdp",
        }
    }
    fn parse(s: &str) -> Option<Kind> {
        Some(match s {
            "flow" => Kind::Flow,
            "standing" => Kind::Standing,
            "oneshot" => Kind::Oneshot,
            "tdp" => Kind::Tdp,
            _ => return None,
        })
    }
}

/// One stored reservation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub seq: i64,
    pub name: String,
    pub kind: Kind,
    /// The request (JSON).
    pub spec: String,
    /// Wall-clock (CLOCK_REALTIME) ns when it was made.
    pub created_ns: i64,
    /// One-shot reservations: when they expire (wall-clock ns).
    pub expires_ns: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {path}: {source}")]
    Open {
        path: String,
        source: rusqlite::Error,
    },
    #[error("database {path}: cannot make it private to its owner: {source}")]
    Private {
        path: String,
        source: std::io::Error,
    },
    #[error("database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("database: reservation {seq} has an unknown kind \"{kind}\"")]
    BadKind { seq: i64, kind: String },
    #[error("database: a reservation named \"{0}\" exists")]
    Duplicate(String),
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS reservation (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL UNIQUE,
    kind       TEXT NOT NULL,
    spec       TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    expires_ns INTEGER
);
CREATE INDEX IF NOT EXISTS reservation_expiry ON reservation (expires_ns)
    WHERE expires_ns IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
);
INSERT OR IGNORE INTO meta (key, value) VALUES ('schedule_version', 0);
";

/// Makes the database file (created if missing) and any journal beside it readable
/// and writable by the owner only: SQLite creates its WAL and shared-memory files
/// with the database's permissions.
fn private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)?;
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let p = Path::new(&p);
        if let Ok(meta) = std::fs::metadata(p) {
            if meta.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))?;
            }
        }
    }
    Ok(())
}

/// The open database.
pub struct Store {
    conn: Connection,
}

impl Store {
    /// Opens (creating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        private(path).map_err(|source| StoreError::Private {
            path: path.display().to_string(),
            source,
        })?;
        let conn = Connection::open(path).map_err(open_err)?;
        Self::init(conn).map_err(|e| match e {
            StoreError::Sql(source) => open_err(source),
            other => other,
        })
    }

    /// An in-memory database (tests).
    #[cfg(test)]
    pub fn memory() -> Result<Store, StoreError> {
        Self::init(Connection::open_in_memory()?)
    }

    fn init(conn: Connection) -> Result<Store, StoreError> {
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store { conn })
    }

    /// Every reservation in insertion order.
    pub fn records(&self) -> Result<Vec<Record>, StoreError> {
        let mut st = self.conn.prepare(
            "SELECT seq, name, kind, spec, created_ns, expires_ns FROM reservation ORDER BY seq",
        )?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, i64>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, name, kind, spec, created_ns, expires_ns) = row?;
            let kind = Kind::parse(&kind).ok_or(StoreError::BadKind { seq, kind })?;
            out.push(Record {
                seq,
                name,
                kind,
                spec,
                created_ns,
                expires_ns,
            });
        }
        Ok(out)
    }

    pub fn count(&self) -> Result<u64, StoreError> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM reservation", [], |r| r.get(0))?;
        Ok(n.max(0) as u64)
    }

    /// The schedule version (bumped by every change of a TDP reservation).
    pub fn version(&self) -> Result<u64, StoreError> {
        let v: i64 = self.conn.query_row(
            "SELECT value FROM meta WHERE key = 'schedule_version'",
            [],
            |r| r.get(0),
        )?;
        Ok(v.max(0) as u64)
    }

    /// Stores a reservation (and bumps the schedule version when `bump`), in one
    /// transaction. Returns its sequence number.
    pub fn insert(
        &mut self,
        name: &str,
        kind: Kind,
        spec: &str,
        created_ns: i64,
        expires_ns: Option<i64>,
        bump: bool,
    ) -> Result<i64, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        if bump {
            bump_version(&tx)?;
        }
        let exists: Option<i64> = tx
            .query_row("SELECT seq FROM reservation WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?;
        if exists.is_some() {
            // Dropping the transaction rolls the version back too.
            return Err(StoreError::Duplicate(name.to_string()));
        }
        tx.execute(
            "INSERT INTO reservation (name, kind, spec, created_ns, expires_ns) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![name, kind.name(), spec, created_ns, expires_ns],
        )?;
        let seq = tx.last_insert_rowid();
        tx.commit()?;
        Ok(seq)
    }

    /// Deletes a reservation (bumping the version when `bump`) in one transaction;
    /// false when there was none of that name (nothing changes then).
    pub fn delete(&mut self, name: &str, bump: bool) -> Result<bool, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let n = tx.execute("DELETE FROM reservation WHERE name = ?1", [name])?;
        if n == 0 {
            return Ok(false);
        }
        if bump {
            bump_version(&tx)?;
        }
        tx.commit()?;
        Ok(true)
    }

    /// Deletes every reservation expired at `now_ns` (`expires_ns <= now_ns`) in one
    /// transaction; returns their names in insertion order.
    pub fn delete_expired(&mut self, now_ns: i64) -> Result<Vec<String>, StoreError> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let names = {
            let mut st = tx.prepare(
                "SELECT name FROM reservation WHERE expires_ns IS NOT NULL AND expires_ns <= ?1 ORDER BY seq",
            )?;
            let names = st
                .query_map([now_ns], |r| r.get::<_, String>(0))?
                .collect::<Result<Vec<_>, _>>()?;
            names
        };
        if names.is_empty() {
            return Ok(names);
        }
        tx.execute(
            "DELETE FROM reservation WHERE expires_ns IS NOT NULL AND expires_ns <= ?1",
            [now_ns],
        )?;
        tx.commit()?;
        Ok(names)
    }

    /// The sequence number the next insert gets (never one used before, even by a
    /// row deleted since).
    pub fn next_seq(&self) -> Result<i64, StoreError> {
        let last: Option<i64> = self
            .conn
            .query_row(
                "SELECT seq FROM sqlite_sequence WHERE name = 'reservation'",
                [],
                |r| r.get(0),
            )
            .optional()?;
        Ok(last.unwrap_or(0) + 1)
    }

    /// The earliest expiry of any reservation.
    #[cfg(test)]
    pub fn next_expiry(&self) -> Result<Option<i64>, StoreError> {
        Ok(self.conn.query_row(
            "SELECT MIN(expires_ns) FROM reservation WHERE expires_ns IS NOT NULL",
            [],
            |r| r.get::<_, Option<i64>>(0),
        )?)
    }
}

fn bump_version(tx: &rusqlite::Transaction<'_>) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE meta SET value = value + 1 WHERE key = 'schedule_version'",
        [],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &Store) -> Vec<String> {
        s.records().unwrap().into_iter().map(|r| r.name).collect()
    }

    #[test]
    fn records_keep_insertion_order_and_seq_is_never_reused() {
        let mut s = Store::memory().unwrap();
        assert_eq!(s.insert("b", Kind::Flow, "{}", 1, None, false).unwrap(), 1);
        assert_eq!(s.insert("a", Kind::Tdp, "{}", 2, None, true).unwrap(), 2);
        assert!(s.delete("a", true).unwrap());
        assert_eq!(
            s.insert("c", Kind::Oneshot, "{}", 3, Some(10), false)
                .unwrap(),
            3
        );
        assert_eq!(names(&s), vec!["b", "c"]);
        let r = &s.records().unwrap()[1];
        assert_eq!(
            (r.kind, r.created_ns, r.expires_ns),
            (Kind::Oneshot, 3, Some(10))
        );
        assert_eq!(s.version().unwrap(), 2);
        assert_eq!(s.count().unwrap(), 2);
    }

    #[test]
    fn a_failed_insert_changes_nothing() {
        let mut s = Store::memory().unwrap();
        s.insert("a", Kind::Tdp, "{}", 1, None, true).unwrap();
        assert_eq!(s.version().unwrap(), 1);
        // The version bump ran inside the transaction before the duplicate was seen:
        // it is rolled back with it.
        let e = s
            .insert("a", Kind::Tdp, "{\"x\":1}", 2, None, true)
            .unwrap_err();
        assert!(matches!(e, StoreError::Duplicate(ref n) if n == "a"), "{e}");
        assert_eq!(s.version().unwrap(), 1);
        assert_eq!(s.records().unwrap()[0].spec, "{}");
        // Deleting what is not there changes nothing either.
        assert!(!s.delete("zz", true).unwrap());
        assert_eq!(s.version().unwrap(), 1);
    }

    #[test]
    fn expired_rows_go_in_one_transaction() {
        let mut s = Store::memory().unwrap();
        s.insert("keep", Kind::Standing, "{}", 0, None, false)
            .unwrap();
        s.insert("o1", Kind::Oneshot, "{}", 0, Some(300), false)
            .unwrap();
        s.insert("o2", Kind::Oneshot, "{}", 0, Some(100), false)
            .unwrap();
        s.insert("o3", Kind::Oneshot, "{}", 0, Some(500), false)
            .unwrap();
        assert_eq!(s.next_expiry().unwrap(), Some(100));
        assert!(s.delete_expired(99).unwrap().is_empty());
        assert_eq!(s.delete_expired(300).unwrap(), vec!["o1", "o2"]);
        assert_eq!(names(&s), vec!["keep", "o3"]);
        assert_eq!(s.next_expiry().unwrap(), Some(500));
        assert_eq!(s.delete_expired(i64::MAX).unwrap(), vec!["o3"]);
        assert_eq!(s.next_expiry().unwrap(), None);
    }

    #[test]
    fn a_reopened_file_has_every_committed_row() {
        let dir = std::env::temp_dir().join(format!("lockstep-store-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.db");
        {
            let mut s = Store::open(&path).unwrap();
            s.insert("a", Kind::Flow, "{\"rate\":\"40Mbit/s\"}", 1, None, false)
                .unwrap();
            s.insert("t", Kind::Tdp, "{}", 2, None, true).unwrap();
            // An uncommitted transaction is lost with the connection.
            let tx = s.conn.transaction().unwrap();
            tx.execute(
                "INSERT INTO reservation (name, kind, spec, created_ns) VALUES ('lost', 'flow', '{}', 3)",
                [],
            )
            .unwrap();
            std::mem::forget(tx);
        }
        let s = Store::open(&path).unwrap();
        assert_eq!(names(&s), vec!["a", "t"]);
        assert_eq!(s.records().unwrap()[0].spec, "{\"rate\":\"40Mbit/s\"}");
        assert_eq!(s.version().unwrap(), 1);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
