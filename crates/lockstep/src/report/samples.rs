//! Raw per-sample CSV, streamed to disk as the run goes (never held in memory) and
//! flushed often so a crash loses at most the last few rows.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

const FLUSH_EVERY: u64 = 4096;

pub struct SampleWriter {
    path: PathBuf,
    out: BufWriter<File>,
    rows: u64,
    line: String,
}

impl SampleWriter {
    pub fn create(path: &Path, header: &[&str]) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--samples: cannot create {}", dir.display()))?;
        }
        let file = File::create(path)
            .with_context(|| format!("--samples: cannot create {}", path.display()))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        writeln!(out, "{}", header.join(","))?;
        Ok(SampleWriter {
            path: path.to_path_buf(),
            out,
            rows: 0,
            line: String::with_capacity(128),
        })
    }

    /// Writes one row of integers (empty cell for `None`).
    pub fn row(&mut self, cells: &[Option<i64>]) -> Result<()> {
        use std::fmt::Write as _;
        self.line.clear();
        for (i, c) in cells.iter().enumerate() {
            if i > 0 {
                self.line.push(',');
            }
            if let Some(v) = c {
                let _ = write!(self.line, "{v}");
            }
        }
        self.line.push('\n');
        self.out.write_all(self.line.as_bytes())?;
        self.rows += 1;
        if self.rows.is_multiple_of(FLUSH_EVERY) {
            self.out.flush()?;
        }
        Ok(())
    }

    pub fn finish(mut self) -> Result<PathBuf> {
        self.out
            .flush()
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        Ok(self.path.clone())
    }
}

impl Drop for SampleWriter {
    fn drop(&mut self) {
        let _ = self.out.flush();
    }
}

/// Column positions from a CSV header line.
#[derive(Clone, Debug, Default)]
pub struct Columns(HashMap<String, usize>);

impl Columns {
    pub fn parse(header: &str) -> Columns {
        Columns(
            header
                .split(',')
                .enumerate()
                .map(|(i, c)| (c.trim().to_string(), i))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<usize> {
        self.0.get(name).copied()
    }
}

/// Splits a data line into integers (empty or malformed cells are `None`).
pub fn parse_row(line: &str, out: &mut Vec<Option<i64>>) {
    out.clear();
    out.extend(line.split(',').map(|c| c.trim().parse().ok()));
}
