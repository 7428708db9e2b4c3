//! The pure part of a TDP sender: which frames its flows send in. The live sender
//! (a UDP program in the binary) wakes at each returned frame start, sends the
//! listed packets of every flow, and asks for the next frame:
//!
//! ```text
//! let mut next = schedule.next_at_or_after(now)?;
//! loop {
//!     wait until next.start_ns; send next.entries; next = schedule.after(next.frame)?;
//! }
//! ```

use super::config::NodeConfig;
use super::node::NodeConfigError;
use super::schedule::Entry;
use crate::frame::FrameClock;

/// A frame in which the sender has packets to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendFrame<'a> {
    pub frame: i64,
    /// Start of the frame on the node's clock.
    pub start_ns: i64,
    /// Every flow's reservation in that frame, by flow id.
    pub entries: &'a [Entry],
}

/// The sender's reservations, repeated every cycle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SenderSchedule {
    clock: FrameClock,
    /// Non-empty rows, by slot.
    slots: Vec<(u32, Vec<Entry>)>,
}

impl SenderSchedule {
    /// From a frame clock and `(slot, entry)` pairs; slots beyond the cycle are
    /// ignored (the node configuration rejects them).
    pub fn new(clock: FrameClock, rows: impl IntoIterator<Item = (u32, Entry)>) -> Self {
        let mut slots: Vec<(u32, Vec<Entry>)> = Vec::new();
        for (slot, entry) in rows {
            if slot >= clock.k() {
                continue;
            }
            match slots.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, v)) => v.push(entry),
                None => slots.push((slot, vec![entry])),
            }
        }
        slots.sort_by_key(|(s, _)| *s);
        for (_, v) in &mut slots {
            v.sort_by_key(|e| e.flow);
        }
        SenderSchedule { clock, slots }
    }

    /// The schedule of every flow in a (validated) node configuration.
    pub fn from_config(config: &NodeConfig) -> Result<Self, NodeConfigError> {
        let node = super::node::Node::new(config.clone())?;
        let rows = config.flows.iter().flat_map(|f| {
            f.rows.iter().map(move |r| {
                (
                    r.slot,
                    Entry {
                        flow: f.id,
                        packets: r.packets,
                        size: r.size,
                    },
                )
            })
        });
        Ok(SenderSchedule::new(*node.frame_clock(), rows))
    }

    pub fn frame_clock(&self) -> &FrameClock {
        &self.clock
    }

    /// The first frame starting at or after `now_ns` in which something is sent.
    pub fn next_at_or_after(&self, now_ns: i64) -> Option<SendFrame<'_>> {
        let (f, _) = self.clock.next_frame_start(now_ns)?;
        self.first_from(f)
    }

    /// The first frame after `frame` in which something is sent.
    pub fn after(&self, frame: i64) -> Option<SendFrame<'_>> {
        self.first_from(frame.checked_add(1)?)
    }

    /// The first frame at or after `first` with entries.
    fn first_from(&self, first: i64) -> Option<SendFrame<'_>> {
        let k = i64::from(self.clock.k());
        let start = first.rem_euclid(k) as u32;
        let i = self.slots.partition_point(|(s, _)| *s < start);
        let (slot, entries) = self.slots.get(i).or_else(|| self.slots.first())?;
        let ahead = (i64::from(*slot) - i64::from(start)).rem_euclid(k);
        let frame = first.checked_add(ahead)?;
        Some(SendFrame {
            frame,
            start_ns: self.clock.frame_start(frame)?,
            entries,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn e(flow: u32, packets: u32) -> Entry {
        Entry {
            flow,
            packets,
            size: 100,
        }
    }

    #[test]
    fn next_frames_wrap_over_the_cycle() {
        let clock = FrameClock::new(Duration::from_micros(100), 4).unwrap();
        let s = SenderSchedule::new(clock, [(3, e(2, 1)), (1, e(7, 2)), (1, e(5, 1))]);
        let n = s.next_at_or_after(0).unwrap();
        assert_eq!((n.frame, n.start_ns), (1, 100_000));
        assert_eq!(n.entries, &[e(5, 1), e(7, 2)]);
        // exactly at a frame start: that frame
        assert_eq!(s.next_at_or_after(100_000).unwrap().frame, 1);
        assert_eq!(s.next_at_or_after(100_001).unwrap().frame, 3);
        assert_eq!(s.after(3).unwrap().frame, 5);
        assert_eq!(s.after(5).unwrap().frame, 7);
        assert_eq!(s.after(-2).unwrap().frame, -1); // slot 3 of cycle -1
        let empty = SenderSchedule::new(clock, []);
        assert_eq!(empty.next_at_or_after(0), None);
    }
}
