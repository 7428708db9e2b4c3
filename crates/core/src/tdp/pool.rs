//! Reusable packet buffers, so a forwarding node allocates nothing per packet once
//! it has warmed up: a received frame is copied into a buffer from the pool, the
//! buffer travels through the queues to [`crate::tdp::node::Transmit`], and the
//! driver hands it back with [`crate::tdp::node::Node::recycle`] after sending.

use std::ops::{Deref, DerefMut};

/// Room a fresh buffer gets: a full Ethernet frame with an 802.1Q tag, rounded up.
pub const BUF_CAPACITY: usize = 2048;

/// One packet's bytes (an Ethernet frame without FCS).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PacketBuf {
    data: Vec<u8>,
}

impl PacketBuf {
    /// Wraps bytes (e.g. a frame a test or simulator built).
    pub fn from_vec(data: Vec<u8>) -> Self {
        PacketBuf { data }
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.data
    }

    pub fn as_slice(&self) -> &[u8] {
        &self.data
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

impl Deref for PacketBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.data
    }
}

impl DerefMut for PacketBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl AsRef<[u8]> for PacketBuf {
    fn as_ref(&self) -> &[u8] {
        &self.data
    }
}

impl AsMut<[u8]> for PacketBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

/// A free list of buffers. It keeps at most `max_free` idle buffers so a burst does
/// not pin its peak memory forever.
#[derive(Debug)]
pub(crate) struct Pool {
    free: Vec<Vec<u8>>,
    max_free: usize,
    allocated: u64,
}

impl Pool {
    pub(crate) fn new(max_free: usize) -> Self {
        Pool {
            // grows with use: a node that never holds many packets (most of a
            // large simulated network's routers) keeps a short list
            free: Vec::new(),
            max_free,
            allocated: 0,
        }
    }

    /// A buffer holding a copy of `bytes`.
    pub(crate) fn copy_of(&mut self, bytes: &[u8]) -> PacketBuf {
        let mut data = self.free.pop().unwrap_or_else(|| {
            self.allocated += 1;
            Vec::with_capacity(BUF_CAPACITY.max(bytes.len()))
        });
        data.clear();
        data.extend_from_slice(bytes);
        PacketBuf { data }
    }

    pub(crate) fn put(&mut self, buf: PacketBuf) {
        if self.free.len() < self.max_free && buf.data.capacity() >= BUF_CAPACITY {
            self.free.push(buf.data);
        }
    }

    /// Buffers this pool has allocated so far (constant in a warmed-up steady state).
    pub(crate) fn allocated(&self) -> u64 {
        self.allocated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_reused() {
        let mut pool = Pool::new(4);
        let a = pool.copy_of(&[1, 2, 3]);
        assert_eq!(a.as_slice(), &[1, 2, 3]);
        pool.put(a);
        let b = pool.copy_of(&[9; 100]);
        assert_eq!(b.len(), 100);
        assert_eq!(pool.allocated(), 1);
        // a foreign small buffer is not kept
        pool.put(PacketBuf::from_vec(vec![0; 3]));
        pool.put(b);
        assert_eq!(pool.free.len(), 1);
    }
}
