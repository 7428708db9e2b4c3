//! Raw per-sample CSV, streamed to disk as the run goes (never held in memory) and
//! flushed often so a crash loses at most the last few rows; and the reader of these
//! files (sample, TX and per-packet files: a header, then rows of integers). Both
//! go through the `csv` crate.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

const FLUSH_EVERY: u64 = 4096;

pub struct SampleWriter {
    path: PathBuf,
    out: csv::Writer<File>,
    rows: u64,
}

impl SampleWriter {
    pub fn create(path: &Path, header: &[&str]) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("--samples: cannot create {}", dir.display()))?;
        }
        let file = File::create(path)
            .with_context(|| format!("--samples: cannot create {}", path.display()))?;
        let mut out = csv::WriterBuilder::new()
            .buffer_capacity(1 << 16)
            .from_writer(file);
        out.write_record(header)?;
        Ok(SampleWriter {
            path: path.to_path_buf(),
            out,
            rows: 0,
        })
    }

    /// Writes one row of integers (empty cell for `None`).
    pub fn row(&mut self, cells: &[Option<i64>]) -> Result<()> {
        let mut digits = itoa::Buffer::new();
        for c in cells {
            match c {
                Some(v) => self.out.write_field(digits.format(*v))?,
                None => self.out.write_field([])?,
            }
        }
        self.out.write_record(None::<&[u8]>)?;
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

/// Column positions from a CSV header.
#[derive(Clone, Debug, Default)]
pub struct Columns(HashMap<String, usize>);

impl Columns {
    fn of(header: &csv::StringRecord) -> Columns {
        Columns(
            header
                .iter()
                .enumerate()
                .map(|(i, c)| (c.to_string(), i))
                .collect(),
        )
    }

    pub fn get(&self, name: &str) -> Option<usize> {
        self.0.get(name).copied()
    }
}

/// The rows of a file of integers, after its header. A short row (a torn last
/// line) reads as far as it goes; an empty or malformed cell is `None`.
pub struct IntRows<R> {
    reader: csv::Reader<R>,
    record: csv::ByteRecord,
}

impl<R: Read> IntRows<R> {
    /// The header's columns and the rows; `None` for an input without a header.
    pub fn open(input: R) -> Option<(Columns, IntRows<R>)> {
        let mut reader = csv::ReaderBuilder::new()
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(input);
        let header = reader.headers().ok().filter(|h| !h.is_empty())?;
        let columns = Columns::of(header);
        let record = csv::ByteRecord::new();
        Some((columns, IntRows { reader, record }))
    }

    /// The next row's cells into `out`; false at the end (or where the input can no
    /// longer be read).
    pub fn next_row(&mut self, out: &mut Vec<Option<i64>>) -> bool {
        if !matches!(self.reader.read_byte_record(&mut self.record), Ok(true)) {
            return false;
        }
        out.clear();
        out.extend(self.record.iter().map(int));
        true
    }
}

/// A cell as an integer, if it is one.
fn int(cell: &[u8]) -> Option<i64> {
    std::str::from_utf8(cell).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows_of(text: &str) -> Option<(Columns, Vec<Vec<Option<i64>>>)> {
        let (cols, mut rows) = IntRows::open(text.as_bytes())?;
        let (mut row, mut all) = (Vec::new(), Vec::new());
        while rows.next_row(&mut row) {
            all.push(row.clone());
        }
        Some((cols, all))
    }

    #[test]
    fn written_rows_read_back_by_column_name() {
        let path =
            std::env::temp_dir().join(format!("lockstep-samples-{}.csv", std::process::id()));
        let mut w = SampleWriter::create(&path, &["flow", "seq", "tx_kernel"]).expect("create");
        w.row(&[Some(4), None, Some(-7)]).expect("row");
        w.row(&[Some(i64::MAX), Some(0), None]).expect("row");
        w.finish().expect("finish");
        let text = std::fs::read_to_string(&path).expect("read");
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            text,
            format!("flow,seq,tx_kernel\n4,,-7\n{},0,\n", i64::MAX)
        );
        let (cols, rows) = rows_of(&text).expect("a header");
        assert_eq!(
            (cols.get("flow"), cols.get("tx_kernel"), cols.get("nope")),
            (Some(0), Some(2), None)
        );
        assert_eq!(
            rows,
            [
                vec![Some(4), None, Some(-7)],
                vec![Some(i64::MAX), Some(0), None]
            ]
        );
    }

    #[test]
    fn a_torn_last_line_and_malformed_cells_read_as_far_as_they_go() {
        let (_, rows) = rows_of("flow,seq,x\n4,,oops\n5").expect("a header");
        assert_eq!(rows, [vec![Some(4), None, None], vec![Some(5)]]);
        assert!(rows_of("").is_none());
    }
}
