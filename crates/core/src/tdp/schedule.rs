//! The scheduling table of one output port (time-driven forwarding): `k` rows, row `i` lists the
//! `(flow, packets)` pairs sent in frame `i mod k`. A row is valid when its bytes on
//! the wire, sent back to back, end before the guard at the end of the frame:
//! `sum(packets * (size + overhead)) * 8 <= (TF - guard) * C`.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::time::Duration;

/// Bytes Ethernet adds to an IP packet on the wire: header 14, FCS 4, preamble and
/// start delimiter 8, inter-frame gap 12.
pub const ETHERNET_OVERHEAD: u32 = 38;

/// One reservation in a row: `packets` packets of at most `size` bytes (IP length).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub flow: u32,
    pub packets: u32,
    pub size: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScheduleError {
    #[error("k (frames per cycle) must be at least 1")]
    ZeroK,
    #[error("row {row} is outside the cycle of {k} frames")]
    RowOutOfRange { row: u32, k: u32 },
    #[error(
        "row {row} needs {needed_bits} bits on the wire but a frame carries {capacity_bits} \
         (TF {tf} minus guard {guard} at {rate_bps} bit/s)"
    )]
    RowOverflow {
        row: u32,
        needed_bits: u128,
        capacity_bits: u128,
        tf: Duration,
        guard: Duration,
        rate_bps: u64,
    },
    #[error("link rate must be positive")]
    ZeroRate,
    #[error("guard {guard} leaves no room in a time-frame of {tf}")]
    GuardTooLong { guard: Duration, tf: Duration },
}

/// The link a port drives: rate and per-packet framing overhead.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    pub rate_bps: u64,
    pub overhead: u32,
}

impl Link {
    pub fn ethernet(rate_bps: u64) -> Self {
        Link {
            rate_bps,
            overhead: ETHERNET_OVERHEAD,
        }
    }

    /// Bits a frame of length `tf` minus `guard` carries at this rate, exactly
    /// (floor). `None` when the guard is not shorter than the frame.
    pub fn frame_capacity_bits(&self, tf: Duration, guard: Duration) -> Option<u128> {
        let usable = tf.as_nanos().checked_sub(guard.as_nanos())?;
        if usable <= 0 {
            return None;
        }
        Some(usable as u128 * self.rate_bps as u128 / 1_000_000_000)
    }

    /// Bits one packet of `size` bytes takes on the wire.
    pub fn packet_bits(&self, size: u32) -> u128 {
        (size as u128 + self.overhead as u128) * 8
    }
}

/// The `k` rows of one output port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortSchedule {
    rows: Vec<Vec<Entry>>,
}

impl PortSchedule {
    pub fn new(k: u32) -> Result<Self, ScheduleError> {
        if k == 0 {
            return Err(ScheduleError::ZeroK);
        }
        Ok(PortSchedule {
            rows: vec![Vec::new(); k as usize],
        })
    }

    pub fn k(&self) -> u32 {
        self.rows.len() as u32
    }

    pub fn add(&mut self, row: u32, entry: Entry) -> Result<(), ScheduleError> {
        let k = self.k();
        let r = self
            .rows
            .get_mut(row as usize)
            .ok_or(ScheduleError::RowOutOfRange { row, k })?;
        r.push(entry);
        Ok(())
    }

    /// The entries of the row for `slot` (`frame mod k`).
    pub fn row(&self, slot: u32) -> &[Entry] {
        self.rows
            .get(slot as usize)
            .map(Vec::as_slice)
            .unwrap_or(&[])
    }

    /// Packets `flow` may send in `slot`.
    pub fn packets_for(&self, slot: u32, flow: u32) -> u32 {
        self.row(slot)
            .iter()
            .filter(|e| e.flow == flow)
            .map(|e| e.packets)
            .sum()
    }

    /// Bits the row for `slot` puts on the wire.
    pub fn row_bits(&self, slot: u32, link: &Link) -> u128 {
        self.row(slot)
            .iter()
            .map(|e| e.packets as u128 * link.packet_bits(e.size))
            .sum()
    }

    /// Checks every row against the frame capacity; the first overflowing row is the error.
    pub fn validate(
        &self,
        tf: Duration,
        guard: Duration,
        link: &Link,
    ) -> Result<(), ScheduleError> {
        if link.rate_bps == 0 {
            return Err(ScheduleError::ZeroRate);
        }
        let capacity_bits = link
            .frame_capacity_bits(tf, guard)
            .ok_or(ScheduleError::GuardTooLong { guard, tf })?;
        for row in 0..self.k() {
            let needed_bits = self.row_bits(row, link);
            if needed_bits > capacity_bits {
                return Err(ScheduleError::RowOverflow {
                    row,
                    needed_bits,
                    capacity_bits,
                    tf,
                    guard,
                    rate_bps: link.rate_bps,
                });
            }
        }
        Ok(())
    }

    /// Bits left in the row for `slot` (what best effort may use, and what admission
    /// may still reserve).
    pub fn spare_bits(&self, slot: u32, tf: Duration, guard: Duration, link: &Link) -> u128 {
        link.frame_capacity_bits(tf, guard)
            .unwrap_or(0)
            .saturating_sub(self.row_bits(slot, link))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TF: Duration = Duration::from_micros(250);

    #[test]
    fn frame_capacity_is_exact() {
        // 250 us at 100 Mb/s = 25 000 bits; a 5 us guard leaves 24 500.
        let link = Link::ethernet(100_000_000);
        assert_eq!(link.frame_capacity_bits(TF, Duration::ZERO), Some(25_000));
        assert_eq!(
            link.frame_capacity_bits(TF, Duration::from_micros(5)),
            Some(24_500)
        );
        assert_eq!(link.frame_capacity_bits(TF, TF), None);
        // a 1002-byte IP packet takes (1002 + 38) * 8 = 8320 bits
        assert_eq!(link.packet_bits(1002), 8_320);
    }

    #[test]
    fn a_full_row_fits_and_one_more_packet_overflows() {
        let link = Link::ethernet(100_000_000);
        let mut s = PortSchedule::new(4).unwrap();
        s.add(
            1,
            Entry {
                flow: 7,
                packets: 3,
                size: 1002,
            },
        )
        .unwrap(); // 24 960 bits
        assert_eq!(s.validate(TF, Duration::ZERO, &link), Ok(()));
        assert_eq!(s.spare_bits(1, TF, Duration::ZERO, &link), 40);
        assert_eq!(s.spare_bits(0, TF, Duration::ZERO, &link), 25_000);
        let err = s.validate(TF, Duration::from_micros(1), &link).unwrap_err();
        assert_eq!(
            err,
            ScheduleError::RowOverflow {
                row: 1,
                needed_bits: 24_960,
                capacity_bits: 24_900,
                tf: TF,
                guard: Duration::from_micros(1),
                rate_bps: 100_000_000
            }
        );
        assert_eq!(
            err.to_string(),
            "row 1 needs 24960 bits on the wire but a frame carries 24900 (TF 250us minus guard 1us at 100000000 bit/s)"
        );
    }

    #[test]
    fn rows_and_lookups() {
        let mut s = PortSchedule::new(3).unwrap();
        s.add(
            2,
            Entry {
                flow: 1,
                packets: 2,
                size: 100,
            },
        )
        .unwrap();
        s.add(
            2,
            Entry {
                flow: 1,
                packets: 1,
                size: 100,
            },
        )
        .unwrap();
        assert_eq!(s.packets_for(2, 1), 3);
        assert_eq!(s.packets_for(1, 1), 0);
        assert_eq!(s.row(9), &[]);
        assert_eq!(
            s.add(
                3,
                Entry {
                    flow: 1,
                    packets: 1,
                    size: 1
                }
            ),
            Err(ScheduleError::RowOutOfRange { row: 3, k: 3 })
        );
        assert_eq!(PortSchedule::new(0), Err(ScheduleError::ZeroK));
    }
}
