//! Token-bucket shaped sources: a traffic pattern (greedy, or constant rate) whose
//! packets leave through one of the core's token buckets, in FIFO order
//! ([`lockstep_core::shaper::Shaper`]):
//!
//! - [`ShaperModel::Lockstep`]: lockstep's own bucket refilled once per `Ts`
//!   ([`TokenBucket`]), its boundaries at the source's start. A greedy source behind it
//!   is the core's [`SymmetricBurst`](lockstep_core::shaper::SymmetricBurst): it
//!   empties its full bucket at the start, then sends what each refill allows — every
//!   source started at the same instant gives the symmetric burst of `probe stream
//!   --shape r,b,Ts --symmetric-burst`.
//! - [`ShaperModel::Tbf`], [`ShaperModel::Htb`]: the core's models of the Linux qdiscs
//!   ([`ContinuousBucket`]), full at the start. A greedy source behind them is `probe
//!   stream --greedy` on a host whose egress qdisc shapes (the socket buffer keeps the
//!   qdisc's queue from overflowing; here nothing is ever dropped before the bucket).
//!
//! The bucket counts each packet's Ethernet frame without FCS, preamble and gap (UDP
//! payload + 42 bytes), as `probe stream` and `tc` on a veth do.

use std::net::SocketAddrV4;

use lockstep_core::shaper::{
    Bucket, Charge, ContinuousBucket, Release, Shaper, ShaperError, ShaperStats, TokenBucket,
};
use lockstep_core::units::{BitRate, Size};
use lockstep_core::Duration;
use serde::Serialize;

/// Bytes of an Ethernet frame beyond its UDP payload: Ethernet header 14, IPv4 20,
/// UDP 8.
pub const FRAME_OVERHEAD: u64 = 42;

/// Which bucket releases a source's packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ShaperModel {
    /// lockstep's bucket `(rate, bucket)` refilled once per `ts`.
    Lockstep {
        rate: BitRate,
        bucket: Size,
        ts: Duration,
    },
    /// Linux `tbf rate r burst b`: continuous refill, a packet goes when the tokens
    /// cover it.
    Tbf { rate: BitRate, bucket: Size },
    /// Linux `htb` (one class, `rate = ceil = r`, `burst = cburst = b`): continuous
    /// refill, a packet goes while the tokens are not negative and is charged after.
    Htb { rate: BitRate, bucket: Size },
}

impl ShaperModel {
    pub fn name(&self) -> &'static str {
        match self {
            ShaperModel::Lockstep { .. } => "lockstep",
            ShaperModel::Tbf { .. } => "tbf",
            ShaperModel::Htb { .. } => "htb",
        }
    }

    /// The bucket, full at `start_ns`, for packets of at most `max_packet` bytes.
    pub fn bucket(&self, max_packet: u64, start_ns: i64) -> Result<AnyBucket, ShaperError> {
        let m = Size(max_packet);
        Ok(match *self {
            ShaperModel::Lockstep { rate, bucket, ts } => {
                AnyBucket::Interval(TokenBucket::new(rate, bucket, ts, m)?.with_epoch(start_ns))
            }
            ShaperModel::Tbf { rate, bucket } => AnyBucket::Continuous(
                ContinuousBucket::new(rate, bucket, m, Charge::Before)?.starting_at(start_ns),
            ),
            ShaperModel::Htb { rate, bucket } => AnyBucket::Continuous(
                ContinuousBucket::new(rate, bucket, m, Charge::After)?.starting_at(start_ns),
            ),
        })
    }
}

/// Either kind of the core's buckets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyBucket {
    Interval(TokenBucket),
    Continuous(ContinuousBucket),
}

impl Bucket for AnyBucket {
    fn next_conforming(&self, now_ns: i64, bytes: u64) -> Option<i64> {
        match self {
            AnyBucket::Interval(b) => b.next_conforming(now_ns, bytes),
            AnyBucket::Continuous(b) => b.next_conforming(now_ns, bytes),
        }
    }
    fn try_send(&mut self, now_ns: i64, bytes: u64) -> bool {
        match self {
            AnyBucket::Interval(b) => b.try_send(now_ns, bytes),
            AnyBucket::Continuous(b) => b.try_send(now_ns, bytes),
        }
    }
}

/// When a source has packets for its shaper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Pattern {
    /// Backlogged: the next packet is ready as soon as the previous one has left.
    Greedy,
    /// One packet every `period_ns` from the start.
    Cbr { period_ns: i64 },
}

/// A source of equal UDP datagrams behind a token bucket.
#[derive(Clone, Debug)]
pub struct ShapedSource {
    pub src_port: u16,
    pub dst: SocketAddrV4,
    /// The UDP payload (the same bytes every time).
    pub payload: Vec<u8>,
    pub model: ShaperModel,
    pub pattern: Pattern,
    start_ns: i64,
    /// Bytes the bucket counts per packet (payload + [`FRAME_OVERHEAD`]).
    frame: u64,
    shaper: Shaper<AnyBucket>,
    /// The next packet's release, `None` when it never conforms.
    next: Option<Release>,
    /// Packets handed to the shaper (constant rate: the next one's index).
    offered: u64,
    /// Datagrams sent.
    pub sent: u64,
}

impl ShapedSource {
    /// A source starting at `start_ns` (its bucket full then; lockstep's boundaries
    /// at `start_ns + k·Ts`).
    pub fn new(
        src_port: u16,
        dst: SocketAddrV4,
        payload: Vec<u8>,
        model: ShaperModel,
        pattern: Pattern,
        start_ns: i64,
    ) -> Result<ShapedSource, ShaperError> {
        let frame = payload.len() as u64 + FRAME_OVERHEAD;
        let shaper = Shaper::new(model.bucket(frame, start_ns)?);
        let mut s = ShapedSource {
            src_port,
            dst,
            payload,
            model,
            pattern,
            start_ns,
            frame,
            shaper,
            next: None,
            offered: 0,
            sent: 0,
        };
        s.plan_next();
        Ok(s)
    }

    /// When the next packet is ready for the shaper.
    fn ready(&self) -> i64 {
        match self.pattern {
            Pattern::Greedy => self
                .shaper
                .last_release()
                .map_or(self.start_ns, |l| l.max(self.start_ns)),
            Pattern::Cbr { period_ns } => self.start_ns.saturating_add(
                i64::try_from(self.offered)
                    .unwrap_or(i64::MAX)
                    .saturating_mul(period_ns.max(1)),
            ),
        }
    }

    fn plan_next(&mut self) {
        self.next = self.shaper.plan(self.ready(), self.frame);
    }

    /// Bytes the bucket counts per packet.
    pub fn frame_bytes(&self) -> u64 {
        self.frame
    }

    /// When the next packet may leave.
    pub fn poll_timeout(&self) -> Option<i64> {
        self.next.map(|r| r.at_ns)
    }

    /// Sends the next packet if it may leave at `now_ns` (the caller frames and
    /// sends [`ShapedSource::payload`]); call until false.
    pub fn poll_send(&mut self, now_ns: i64) -> bool {
        let Some(r) = self.next.filter(|r| r.at_ns <= now_ns) else {
            return false;
        };
        if !self.shaper.send(r, now_ns, self.frame) {
            return false;
        }
        self.sent += 1;
        self.offered += 1;
        self.plan_next();
        true
    }

    /// The shaper's counts: packets sent, and which waited for tokens and how long.
    pub fn stats(&self) -> ShaperStats {
        self.shaper.stats()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use lockstep_core::shaper::SymmetricBurst;

    use super::*;

    const MS: i64 = 1_000_000;

    fn dst() -> SocketAddrV4 {
        SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 7000)
    }

    /// Release instants until `end`, sending each at its instant.
    fn releases(s: &mut ShapedSource, end: i64) -> Vec<i64> {
        let mut out = Vec::new();
        while let Some(t) = s.poll_timeout().filter(|&t| t <= end) {
            assert!(s.poll_send(t));
            out.push(t);
        }
        out
    }

    #[test]
    fn a_greedy_lockstep_source_is_the_cores_symmetric_burst() {
        // 40 Mbit/s, Ts = 1 ms, b = r·Ts + M with 1514-byte frames
        let (rate, ts) = (BitRate(40_000_000), Duration::from_millis(1));
        let bucket = Size(5_000 + 1514);
        let start = 5 * MS;
        let model = ShaperModel::Lockstep { rate, bucket, ts };
        let mut s =
            ShapedSource::new(9, dst(), vec![0; 1472], model, Pattern::Greedy, start).unwrap();
        assert_eq!(s.frame_bytes(), 1514);
        let got = releases(&mut s, start + 20 * MS);
        let mut core = SymmetricBurst::new(rate, bucket, ts, 1514, start).unwrap();
        let mut want = Vec::new();
        while let Some(r) = core.next().filter(|r| r.at_ns <= start + 20 * MS) {
            assert!(core.sent(r, r.at_ns));
            want.push(r.at_ns);
        }
        assert_eq!(got, want);
        // the opening burst: ⌊6514 / 1514⌋ = 4 packets at the start
        assert_eq!(&got[..5], &[start, start, start, start, start + MS]);
        assert_eq!(s.sent, got.len() as u64);
    }

    #[test]
    fn tbf_and_htb_sources_release_at_the_rate_after_their_burst() {
        // 80 kbit/s = 10 B/ms; 58-byte payloads are 100-byte frames; b = 300 B
        let rate = BitRate(80_000);
        let bucket = Size(300);
        let tbf = ShaperModel::Tbf { rate, bucket };
        let mut s = ShapedSource::new(9, dst(), vec![0; 58], tbf, Pattern::Greedy, 0).unwrap();
        // three at once, then one per 10 ms
        assert_eq!(
            releases(&mut s, 30 * MS),
            vec![0, 0, 0, 10 * MS, 20 * MS, 30 * MS]
        );
        let htb = ShaperModel::Htb { rate, bucket };
        let mut s = ShapedSource::new(9, dst(), vec![0; 58], htb, Pattern::Greedy, 0).unwrap();
        // four at once (the fourth into debt), then one per 10 ms once out of debt
        assert_eq!(
            releases(&mut s, 30 * MS),
            vec![0, 0, 0, 0, 10 * MS, 20 * MS, 30 * MS]
        );
        assert_eq!(s.stats().sent, 7);
    }

    #[test]
    fn a_constant_rate_source_waits_only_for_tokens() {
        // one 100-byte frame every 5 ms (20 B/ms offered) behind 10 B/ms, b = 200 B
        let tbf = ShaperModel::Tbf {
            rate: BitRate(80_000),
            bucket: Size(200),
        };
        let cbr = Pattern::Cbr { period_ns: 5 * MS };
        let mut s = ShapedSource::new(9, dst(), vec![0; 58], tbf, cbr, MS).unwrap();
        let got: Vec<i64> = releases(&mut s, 41 * MS).iter().map(|t| t / MS).collect();
        // 200 B at 1 ms; the bucket lasts three packets (−100 +50 per 5 ms), then one
        // per 10 ms, each packet behind the one before
        assert_eq!(got, vec![1, 6, 11, 21, 31, 41]);
        assert!(s.stats().delayed > 0);
        // a late wake-up sends what has become due, in order
        let mut late = ShapedSource::new(9, dst(), vec![0; 58], tbf, cbr, MS).unwrap();
        let mut n = 0;
        while late.poll_send(12 * MS) {
            n += 1;
        }
        // at 12 ms: the bucket is full (200 B): the packets of 1 and 6 ms go, the
        // one of 11 ms waits for 100 B more
        assert_eq!(n, 2);
        assert_eq!(late.poll_timeout(), Some(22 * MS));
    }

    #[test]
    fn a_packet_larger_than_the_bucket_is_refused_up_front() {
        let tbf = ShaperModel::Tbf {
            rate: BitRate(80_000),
            bucket: Size(100),
        };
        assert!(matches!(
            ShapedSource::new(9, dst(), vec![0; 100], tbf, Pattern::Greedy, 0),
            Err(ShaperError::BucketBelowPacket { .. })
        ));
    }
}
