//! A link direction: one output port's FIFO queue with a byte limit (tail drop)
//! and its wire. A frame handed to it at `t` starts when the wire is free, takes
//! `bits / rate` to serialise, and arrives `propagation` after its last bit.
//!
//! What a frame costs on the wire is a choice, stated in every result:
//! [`Framing::Ethernet`] counts what a real Ethernet port sends per frame (IP packet
//! plus 38 bytes: header 14, FCS 4, preamble 8, inter-frame gap 12 — the same
//! accounting the TDP schedules use); [`Framing::Tbf`] counts what Linux `tc tbf`
//! counts on the lab's veth links (IP packet plus the 14-byte Ethernet header).
//!
//! How a frame leaves is a second choice ([`Discipline`]): serialised at the link
//! rate (a real port), or the way the lab's links send it — a veth hands a frame
//! over at once, and a shaped one waits in `tc tbf` only until its bucket holds the
//! frame's bytes (a bucket of `burst` bytes filling at the link rate).

/// Bytes a frame costs beyond its IP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Header, FCS, preamble and inter-frame gap: 38 bytes.
    Ethernet,
    /// The Ethernet header only: 14 bytes (what `tc tbf` shapes on a veth).
    Tbf,
}

impl Framing {
    pub fn overhead(self) -> u32 {
        match self {
            Framing::Ethernet => 38,
            Framing::Tbf => 14,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Framing::Ethernet => "ethernet",
            Framing::Tbf => "tbf",
        }
    }
}

/// How a link direction sends what it is handed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Discipline {
    /// One frame after the other at the link rate.
    Serial,
    /// A token bucket of this many bytes at the link rate (Linux `tc tbf`), no
    /// serialisation.
    Tbf { burst: u64 },
    /// Handed over at once (an unshaped veth).
    Instant,
}

/// Smallest IP packet Ethernet carries (shorter ones are padded).
const MIN_IP_LEN: u64 = 46;

/// One direction of a link.
#[derive(Clone, Debug)]
pub struct LinkDir {
    pub rate_bps: u64,
    pub propagation_ns: i64,
    /// Bytes the queue holds (the frame on the wire included).
    pub limit_bytes: u64,
    pub overhead: u32,
    pub discipline: Discipline,
    /// When the wire is done with everything queued (the last departure, for a
    /// token bucket).
    busy_until: i64,
    /// Token bucket: when the bucket would be full again after what left.
    full_at: i64,
    pub sent: u64,
    pub dropped: u64,
    /// The link is down (a fault): it carries nothing.
    pub down: bool,
}

impl LinkDir {
    pub fn new(rate_bps: u64, propagation_ns: i64, limit_bytes: u64, framing: Framing) -> LinkDir {
        LinkDir {
            rate_bps: rate_bps.max(1),
            propagation_ns,
            limit_bytes,
            overhead: framing.overhead(),
            discipline: Discipline::Serial,
            busy_until: i64::MIN,
            full_at: i64::MIN,
            sent: 0,
            dropped: 0,
            down: false,
        }
    }

    fn wire_bytes(&self, frame_len: usize) -> u64 {
        let ip = (frame_len as u64).saturating_sub(14).max(MIN_IP_LEN);
        ip + u64::from(self.overhead)
    }

    fn ns_for(&self, bytes: u64) -> i64 {
        // 64-bit arithmetic while it cannot overflow (any frame), 128-bit beyond
        if let Some(x) = bytes.checked_mul(8_000_000_000) {
            return i64::try_from(x.div_ceil(self.rate_bps)).unwrap_or(i64::MAX);
        }
        let ns = (u128::from(bytes) * 8 * 1_000_000_000).div_ceil(u128::from(self.rate_bps));
        i64::try_from(ns).unwrap_or(i64::MAX)
    }

    /// How long a frame of `frame_len` bytes (Ethernet header included) takes to
    /// serialise.
    pub fn transmit_ns(&self, frame_len: usize) -> i64 {
        self.ns_for(self.wire_bytes(frame_len))
    }

    /// The same link sending by `d`.
    pub fn with_discipline(self, d: Discipline) -> LinkDir {
        LinkDir {
            discipline: d,
            ..self
        }
    }

    /// Bytes the rate still owes at `now`: queued or on the wire (serial), or
    /// waiting for tokens (token bucket: what the bucket lacks beyond its depth).
    pub fn backlog_bytes(&self, now: i64) -> u64 {
        let (until, depth) = match self.discipline {
            Discipline::Serial => (self.busy_until, 0),
            Discipline::Tbf { burst } => (self.full_at, burst),
            Discipline::Instant => return 0,
        };
        if until <= now {
            return 0;
        }
        let ns = (until - now) as u64;
        // 64-bit while it cannot overflow (a backlog of seconds), 128-bit beyond
        let bytes = match ns.checked_mul(self.rate_bps) {
            Some(bits_e9) => bits_e9 / 8_000_000_000,
            None => (u128::from(ns) * u128::from(self.rate_bps) / 8_000_000_000) as u64,
        };
        bytes.saturating_sub(depth)
    }

    /// When a frame of `bytes` handed over at `now` leaves.
    fn depart(&mut self, now: i64, bytes: u64) -> i64 {
        match self.discipline {
            Discipline::Serial => {
                let end = now.max(self.busy_until).saturating_add(self.ns_for(bytes));
                self.busy_until = end;
                end
            }
            Discipline::Tbf { burst } => {
                // the bucket holds `bytes` once it lacks no more than `burst − bytes`
                let room = self.ns_for(burst.saturating_sub(bytes));
                let t = now
                    .max(self.busy_until)
                    .max(self.full_at.saturating_sub(room));
                self.full_at = self.full_at.max(t).saturating_add(self.ns_for(bytes));
                self.busy_until = t;
                t
            }
            Discipline::Instant => now,
        }
    }

    /// The least time from handing a frame over to its arrival at the far end:
    /// the shortest frame's serialisation and the propagation (a token bucket or
    /// an unshaped veth may send at once: the propagation alone).
    pub fn least_delay_ns(&self) -> i64 {
        let wire = match self.discipline {
            Discipline::Serial => self.transmit_ns(0),
            Discipline::Tbf { .. } | Discipline::Instant => 0,
        };
        wire.saturating_add(self.propagation_ns.max(0))
    }

    /// Hands a frame of `frame_len` bytes (Ethernet header included) to the port
    /// at `now`: its arrival time at the far end, or `None` when the queue is full.
    pub fn send(&mut self, now: i64, frame_len: usize) -> Option<i64> {
        let bytes = self.wire_bytes(frame_len);
        let queues = self.discipline != Discipline::Instant;
        if queues && self.backlog_bytes(now) + bytes > self.limit_bytes {
            self.dropped += 1;
            return None;
        }
        let end = self.depart(now, bytes);
        self.sent += 1;
        Some(end.saturating_add(self.propagation_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_serialise_back_to_back_and_drop_at_the_limit() {
        // 100 Mbit/s: a 1002-byte IP packet (1016-byte frame) is 1040 wire bytes, 83.2 us
        let mut l = LinkDir::new(100_000_000, 1_000, 2 * 1040, Framing::Ethernet);
        assert_eq!(l.send(0, 1016), Some(83_200 + 1_000));
        assert_eq!(l.send(0, 1016), Some(166_400 + 1_000));
        assert_eq!(l.send(0, 1016), None);
        assert_eq!(l.backlog_bytes(83_200), 1040);
        assert_eq!(l.send(83_200, 1016), Some(249_600 + 1_000));
        assert_eq!((l.sent, l.dropped), (3, 1));
        // tbf accounting: 1016 bytes, 81.28 us
        let mut t = LinkDir::new(100_000_000, 0, 1 << 20, Framing::Tbf);
        assert_eq!(t.transmit_ns(1016), 81_280);
        assert_eq!(t.send(5, 1016), Some(5 + 81_280));
        // short frames are padded to 46 bytes of IP
        let mut s = LinkDir::new(100_000_000, 0, 1 << 20, Framing::Ethernet);
        assert_eq!(s.send(0, 42), Some((46 + 38) * 80));
        // no frame arrives sooner than the shortest one, sent on an idle wire
        assert_eq!(s.least_delay_ns(), (46 + 38) * 80);
        assert_eq!(l.least_delay_ns(), (46 + 38) * 80 + 1_000);
    }

    #[test]
    fn a_token_bucket_sends_at_once_while_it_holds_the_bytes() {
        // 100 Mbit/s (80 ns a byte), a bucket of 3028 bytes, 1016-byte frames of
        // 1016 bytes each (tbf counts the Ethernet header only): two leave at once,
        // the third when the bucket has refilled 1016 − (3028 − 2·1016) = 20 bytes
        let tbf = Discipline::Tbf { burst: 3028 };
        let mut l = LinkDir::new(100_000_000, 0, 1 << 20, Framing::Tbf).with_discipline(tbf);
        assert_eq!(l.send(0, 1016), Some(0));
        assert_eq!(l.send(0, 1016), Some(0));
        assert_eq!(l.send(0, 1016), Some(20 * 80));
        // a fourth must wait for a whole frame's worth more
        assert_eq!(l.send(0, 1016), Some(20 * 80 + 1016 * 80));
        assert_eq!(l.backlog_bytes(0), 4 * 1016 - 3028);
        // after a quiet spell the bucket is full again
        assert_eq!(l.send(10_000_000, 1016), Some(10_000_000));
        let mut v =
            LinkDir::new(100_000_000, 500, 0, Framing::Tbf).with_discipline(Discipline::Instant);
        assert_eq!(v.send(7, 1016), Some(507));
        assert_eq!((v.least_delay_ns(), l.least_delay_ns()), (500, 0));
    }
}
