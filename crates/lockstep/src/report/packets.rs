//! The per-packet file, `<receiver>-packets.csv`: one row per probe a receiver got,
//! written by the live receiver (`lockstep node`) and by `lockstep sim run
//! --packets`, read back by the lab's results and by `lockstep sim compare`.
//!
//! Columns: `flow, seq, frame, t0, t_wake, t_send, kernel_rx, app_rx, latency`, then
//! for each of up to [`HOPS`] hop records `hN_node, hN_rx_kernel, hN_rx_app,
//! hN_tx_app, hN_slipped` (empty when absent; `hN_slipped` is 1 when that hop slipped
//! the packet). Columns are found by name when read, so a file
//! with fewer hop columns (an older receiver's) still reads.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Result;
use lockstep_core::tdp::Delivery;
use lockstep_core::wire::{HopKind, HopRecord, ProbeRepr, MAX_HOPS, NOT_FILLED};

use super::samples::{Columns, IntRows};
use super::SampleWriter;

/// Hop records a row holds: every one a probe can carry.
pub const HOPS: usize = MAX_HOPS;

/// The columns before the hop records.
const FIXED: [&str; 9] = [
    "flow",
    "seq",
    "frame",
    "t0",
    "t_wake",
    "t_send",
    "kernel_rx",
    "app_rx",
    "latency",
];

/// The columns of each hop record.
const HOP_FIELDS: [&str; 5] = ["node", "rx_kernel", "rx_app", "tx_app", "slipped"];

/// The header, in order.
pub fn header() -> Vec<String> {
    let mut h: Vec<String> = FIXED.iter().map(|s| s.to_string()).collect();
    for n in 1..=HOPS {
        for f in HOP_FIELDS {
            h.push(format!("h{n}_{f}"));
        }
    }
    h
}

/// Writes deliveries, one row each, streamed to disk.
pub struct PacketWriter {
    out: SampleWriter,
    row: Vec<Option<i64>>,
}

impl PacketWriter {
    pub fn create(path: &Path) -> Result<PacketWriter> {
        let h = header();
        let cols: Vec<&str> = h.iter().map(String::as_str).collect();
        Ok(PacketWriter::over(SampleWriter::create(path, &cols)?))
    }

    /// A writer over a sample file already made with [`header`].
    pub fn over(out: SampleWriter) -> PacketWriter {
        PacketWriter {
            out,
            row: vec![None; FIXED.len() + HOP_FIELDS.len() * HOPS],
        }
    }

    pub fn write(&mut self, d: &Delivery) -> Result<()> {
        let p = &d.probe;
        let row = &mut self.row;
        row.iter_mut().for_each(|c| *c = None);
        row[0] = Some(i64::from(p.flow_id));
        row[1] = i64::try_from(p.seq).ok();
        row[2] = Some(p.frame);
        row[3] = Some(p.t0_ns);
        row[4] = Some(p.t_wake_ns);
        row[5] = Some(p.t_send_ns);
        row[6] = d.kernel_rx_ns;
        row[7] = Some(d.app_rx_ns);
        row[8] = Some(d.latency_ns());
        for (i, h) in p.hops().iter().take(HOPS).enumerate() {
            let at = FIXED.len() + HOP_FIELDS.len() * i;
            row[at] = Some(i64::from(h.node));
            row[at + 1] = Some(h.rx_kernel_ns);
            row[at + 2] = Some(h.rx_app_ns);
            row[at + 3] = Some(h.tx_app_ns);
            row[at + 4] = Some(i64::from(h.slipped));
        }
        self.out.row(row)
    }

    pub fn finish(self) -> Result<PathBuf> {
        self.out.finish()
    }
}

/// Where each column is, from a header line.
struct Layout {
    fixed: [Option<usize>; 8],
    hops: Vec<[Option<usize>; 5]>,
}

impl Layout {
    fn of(c: &Columns) -> Layout {
        let fixed = std::array::from_fn(|i| c.get(FIXED[i]));
        let hops = (1..)
            .map_while(|h| {
                let node = c.get(&format!("h{h}_node"))?;
                Some([
                    Some(node),
                    c.get(&format!("h{h}_rx_kernel")),
                    c.get(&format!("h{h}_rx_app")),
                    c.get(&format!("h{h}_tx_app")),
                    c.get(&format!("h{h}_slipped")),
                ])
            })
            .take(MAX_HOPS)
            .collect();
        Layout { fixed, hops }
    }

    /// A row → a delivery; `None` without a flow and a sequence number.
    fn delivery(&self, row: &[Option<i64>]) -> Option<Delivery> {
        let cell = |i: Option<usize>| i.and_then(|i| row.get(i).copied().flatten());
        let get = |i: usize| cell(self.fixed[i]);
        let mut probe = ProbeRepr {
            flow_id: u32::try_from(get(0)?).ok()?,
            seq: u64::try_from(get(1)?).ok()?,
            frame: get(2).unwrap_or(0),
            t0_ns: get(3).unwrap_or(NOT_FILLED),
            t_wake_ns: get(4).unwrap_or(NOT_FILLED),
            t_send_ns: get(5).unwrap_or(NOT_FILLED),
            ..ProbeRepr::default()
        };
        for hc in &self.hops {
            let Some(node) = cell(hc[0]).and_then(|n| u32::try_from(n).ok()) else {
                break;
            };
            probe.hops[usize::from(probe.hop_count)] = HopRecord {
                node,
                kind: HopKind::Router,
                rx_kernel_ns: cell(hc[1]).unwrap_or(NOT_FILLED),
                rx_app_ns: cell(hc[2]).unwrap_or(NOT_FILLED),
                tx_app_ns: cell(hc[3]).unwrap_or(NOT_FILLED),
                slipped: cell(hc[4]).is_some_and(|v| v != 0),
            };
            probe.hop_count += 1;
        }
        Some(Delivery {
            probe,
            kernel_rx_ns: get(6).filter(|&x| x != NOT_FILLED),
            app_rx_ns: get(7).unwrap_or(NOT_FILLED),
        })
    }
}

/// Every delivery of a per-packet file, in file order; rows without a flow and a
/// sequence number (a torn last line) are skipped. An empty input gives none.
pub fn read(text: impl Read) -> impl Iterator<Item = Delivery> {
    let mut file = IntRows::open(text).map(|(c, rows)| (Layout::of(&c), rows));
    let mut row = Vec::new();
    std::iter::from_fn(move || {
        let (layout, rows) = file.as_mut()?;
        while rows.next_row(&mut row) {
            if let Some(d) = layout.delivery(&row) {
                return Some(d);
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivery(hops: usize) -> Delivery {
        let mut probe = ProbeRepr {
            flow_id: 7,
            seq: 41,
            frame: 4000,
            t0_ns: 1_000,
            t_wake_ns: 1_100,
            t_send_ns: 1_200,
            ..ProbeRepr::default()
        };
        for i in 0..hops {
            let at = 10_000 * (i as i64 + 1);
            probe.hops[i] = HopRecord {
                node: i as u32 + 1,
                kind: HopKind::Router,
                rx_kernel_ns: at,
                rx_app_ns: at + 10,
                tx_app_ns: at + 500,
                slipped: i % 2 == 1,
            };
            probe.hop_count += 1;
        }
        Delivery {
            probe,
            kernel_rx_ns: Some(99_000),
            app_rx_ns: 99_100,
        }
    }

    #[test]
    fn rows_read_back_as_the_deliveries_written() {
        let dir = std::env::temp_dir().join(format!("lockstep-packets-{}", std::process::id()));
        let path = dir.join("rx-packets.csv");
        let mut w = PacketWriter::create(&path).unwrap();
        let written: Vec<Delivery> = [0, 1, 4, HOPS].iter().map(|&h| delivery(h)).collect();
        for d in &written {
            w.write(d).unwrap();
        }
        w.finish().unwrap();
        let text = std::fs::read(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let read: Vec<Delivery> = read(&text[..]).collect();
        assert_eq!(read, written);
    }

    #[test]
    fn an_older_file_with_four_hop_columns_and_a_torn_line_reads() {
        let mut four: Vec<String> = FIXED.iter().map(|s| s.to_string()).collect();
        for n in 1..=4 {
            four.extend(["node", "rx_kernel", "rx_app", "tx_app"].map(|f| format!("h{n}_{f}")));
        }
        let four = four.join(",");
        let text = format!("{four}\n7,41,4000,1000,1100,1200,,99100,98100,1,10,20,30\n7");
        let got: Vec<Delivery> = read(text.as_bytes()).collect();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].probe.seq, got[0].probe.hop_count), (41, 1));
        assert_eq!(got[0].probe.hops[0].tx_app_ns, 30);
        assert_eq!(got[0].kernel_rx_ns, None);
        assert_eq!(read(&b""[..]).count(), 0);
    }
}
