//! Packet buffers the simulated network is done with, kept for the next frames the
//! hosts build. A frame's bytes live in one buffer from the sender to the receiver
//! (routers forward it as it is); without this each packet would cost a fresh
//! allocation, written into memory nothing touched for a while, and a free at the
//! far end. Taken last in, first out, so a new frame goes into the buffer a
//! receiver has just finished with, still in the cache.

use lockstep_core::tdp::PacketBuf;

/// At most this many idle buffers are kept (a burst does not pin its peak).
const KEEP: usize = 1 << 14;

/// Idle packet buffers.
#[derive(Debug, Default)]
pub struct Spare {
    bufs: Vec<Vec<u8>>,
}

impl Spare {
    /// An empty buffer, reused when there is one.
    pub fn take(&mut self) -> Vec<u8> {
        self.bufs.pop().unwrap_or_default()
    }

    /// A frame nobody needs any more.
    pub fn give(&mut self, buf: PacketBuf) {
        if self.bufs.len() < KEEP {
            let mut v = buf.into_vec();
            v.clear();
            self.bufs.push(v);
        }
    }

    /// Idle buffers held.
    pub fn len(&self) -> usize {
        self.bufs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bufs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_buffer_given_is_the_first_taken_and_comes_back_empty() {
        let mut s = Spare::default();
        assert!(s.take().is_empty());
        let a = PacketBuf::from_vec(vec![1; 10]);
        let b = PacketBuf::from_vec(Vec::with_capacity(999));
        s.give(a);
        s.give(b);
        assert_eq!(s.len(), 2);
        let got = s.take();
        assert!(got.is_empty() && got.capacity() >= 999);
        let got = s.take();
        assert!(got.is_empty() && got.capacity() >= 10);
        assert!(s.is_empty());
    }
}
