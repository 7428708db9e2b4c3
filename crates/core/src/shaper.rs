//! Token-bucket shaping refilled once per shaping interval (loeser §3).
//!
//! A shaped source keeps a bucket of `b` bytes. Tokens arrive at the rate `r`, but —
//! to keep the timer load of a sender bounded — they are credited only once per
//! **shaping interval** `Ts`: at the boundaries `epoch + k·Ts`, on the first
//! [`TokenBucket::poll`] at or after a boundary, `r · Ts` per boundary passed, capped
//! at `b`. A packet conforms when the bucket holds its size; sending it takes that
//! many tokens. So a source that has emptied its bucket sends its next packet no
//! earlier than the next boundary.
//!
//! # Units and exactness
//!
//! Rates are [`BitRate`] (whole bits per second), sizes are bytes. Tokens are counted
//! in **nanobits** (10⁻⁹ bit): a rate of `r` bit/s earns exactly `r` nanobits per
//! nanosecond, so the credit of an interval, `r · Ts`, is an integer and nothing is
//! ever lost to rounding (a 12 bit/s bucket with `Ts` = 1 s earns 1.5 bytes per
//! interval, exactly). A byte is [`NANOBITS_PER_BYTE`] nanobits.
//!
//! # Bucket size
//!
//! The bucket must hold at least `r · Ts + M` (`M` the largest packet): a greedy
//! source leaves less than `M` in the bucket (else it would send another packet), the
//! next refill adds `r · Ts`, and only if that fits under `b` is no token cut off by
//! the cap, so the source keeps its long-term rate `r`. [`TokenBucket::new`] refuses a
//! smaller bucket and names both numbers.
//!
//! # What the output conforms to
//!
//! Over any closed window `[s, s + Δ]` a once-per-`Ts` bucket lets through at most
//!
//! ```text
//! α(Δ) = b + r·Ts·⌈Δ / Ts⌉
//! ```
//!
//! (the bucket holds at most `b` at `s`, and at most `⌈Δ/Ts⌉` boundaries fall in
//! `(s, s + Δ]`, each adding at most `r·Ts`), and this is tight: a full bucket emptied
//! just before a boundary is followed at the boundary by another `r·Ts`. The staircase
//! lies below the affine curve `(b + r·Ts) + r·Δ` and touches it as `Δ → 0⁺`, so the
//! smallest token bucket the output conforms to is `(r, b + r·Ts)` — **not** `(r, b)`:
//! a delay bound for once-per-`Ts` shaped flows must use the burst
//! [`TokenBucket::affine_burst_nanobits`] (or the staircase
//! [`TokenBucket::envelope_nanobits`]).
//!
//! # Symmetric bursts
//!
//! The worst case for a FIFO port (loeser §4.1, after Oechslin) is every shaped source
//! emptying its full bucket at the same instant and then sending at its rate:
//! [`SymmetricBurst`] is that source — greedy behind its own bucket, starting full at
//! a boundary.
//!
//! # Continuous refill: models of Linux `tbf` and `htb`
//!
//! The kernel's shapers have no `Ts`: they credit `r · Δt` for every nanosecond that
//! passes. [`ContinuousBucket`] is a model of the two qdiscs, not their code: exact
//! nanobit arithmetic where the kernel keeps its tokens as time in its own ticks
//! (tc stores `burst` as `b / r`, which may round away a few bits), and a packet that
//! has to wait leaves exactly when it conforms (the qdisc's hrtimer watchdog, without
//! its slack). The two differ in when a packet conforms ([`Charge`]):
//!
//! - `tbf` ([`Charge::Before`]): only when the tokens cover it; the output conforms to
//!   `(r, b)`;
//! - `htb` with one class, `rate = ceil = r`, `burst = cburst = b` and no hysteresis
//!   ([`Charge::After`]): while the token count is not negative, the packet charged
//!   afterwards, so the bucket goes at most one packet into debt; the output conforms
//!   to `(r, b + M)`.
//!
//! [`Shaper`] puts a FIFO of packets in front of either kind of bucket ([`Bucket`]).

use serde::Serialize;
use thiserror::Error;

use crate::time::Duration;
use crate::units::{BitRate, Size};

/// Nanobits in one byte: 8 bits × 10⁹.
pub const NANOBITS_PER_BYTE: u128 = 8_000_000_000;

/// Why a token bucket cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ShaperError {
    #[error("the shaping rate must be above 0 bit/s")]
    ZeroRate,
    #[error("the shaping interval must be positive, got {0}")]
    NonPositiveInterval(Duration),
    #[error("the largest packet must be at least 1B")]
    ZeroPacket,
    #[error(
        "the bucket ({bucket}) is below the largest packet ({max_packet}): such a packet \
         would never conform"
    )]
    BucketBelowPacket { bucket: Size, max_packet: Size },
    #[error(
        "the bucket ({bucket}) is below r·Ts + M = {rts} + {max_packet} = {need} \
         (rate {rate}, shaping interval {ts}): a source sending {max_packet} packets \
         would lose tokens at every refill and fall short of its rate"
    )]
    BucketTooSmall {
        bucket: Size,
        rate: BitRate,
        ts: Duration,
        /// `r · Ts` in bytes, exact (`"1.5B"`).
        rts: String,
        max_packet: Size,
        /// `r · Ts + M` in bytes, exact.
        need: String,
    },
}

/// `nanobits` as an exact byte count: `"1514B"`, `"1.5B"`. Exact because a nanobit is
/// `1 / (2¹² · 5⁹)` byte, so every value has a terminating decimal expansion.
pub fn exact_bytes(nanobits: u128) -> String {
    let whole = nanobits / NANOBITS_PER_BYTE;
    let mut rem = nanobits % NANOBITS_PER_BYTE;
    if rem == 0 {
        return format!("{whole}B");
    }
    let mut digits = String::new();
    // At most 12 digits: 10¹² is a multiple of 8·10⁹.
    while rem != 0 && digits.len() < 12 {
        rem *= 10;
        let d = rem / NANOBITS_PER_BYTE;
        rem %= NANOBITS_PER_BYTE;
        digits.push(char::from(b'0' + d as u8));
    }
    format!("{whole}.{digits}B")
}

/// A token bucket `(r, b)` refilled once per shaping interval `Ts` (see the module
/// docs). Sans-IO: every call takes the current instant (nanoseconds of any clock, as
/// long as it does not go backwards; an earlier instant simply earns nothing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenBucket {
    rate: BitRate,
    bucket: Size,
    ts: Duration,
    max_packet: Size,
    epoch_ns: i64,
    /// `b` in nanobits.
    cap: u128,
    /// `r · Ts` in nanobits: the credit of one boundary.
    per_interval: u128,
    /// Current tokens, nanobits; never above `cap`.
    tokens: u128,
    /// Index `k` of the last boundary `epoch + k·Ts` credited.
    interval: i128,
}

impl TokenBucket {
    /// A full bucket of `bucket` bytes filled at `rate`, `rate · ts` per boundary,
    /// with boundaries at multiples of `ts` from instant 0 (see
    /// [`TokenBucket::with_epoch`]). Refuses a bucket below `rate · ts + max_packet`.
    pub fn new(
        rate: BitRate,
        bucket: Size,
        ts: Duration,
        max_packet: Size,
    ) -> Result<TokenBucket, ShaperError> {
        if rate.bps() == 0 {
            return Err(ShaperError::ZeroRate);
        }
        if !ts.is_positive() {
            return Err(ShaperError::NonPositiveInterval(ts));
        }
        if max_packet.bytes() == 0 {
            return Err(ShaperError::ZeroPacket);
        }
        // Both fit: u64 bit/s × i64 ns < 2¹²⁷, u64 bytes × 8·10⁹ < 2⁹⁸.
        let per_interval = u128::from(rate.bps()) * ts.as_nanos() as u128;
        let cap = u128::from(bucket.bytes()) * NANOBITS_PER_BYTE;
        let need = per_interval + u128::from(max_packet.bytes()) * NANOBITS_PER_BYTE;
        if cap < need {
            return Err(ShaperError::BucketTooSmall {
                bucket,
                rate,
                ts,
                rts: exact_bytes(per_interval),
                max_packet,
                need: exact_bytes(need),
            });
        }
        Ok(TokenBucket {
            rate,
            bucket,
            ts,
            max_packet,
            epoch_ns: 0,
            cap,
            per_interval,
            tokens: cap,
            interval: 0,
        })
    }

    /// Puts the refill boundaries at `epoch_ns + k·Ts`; the bucket's level is its
    /// level at `epoch_ns` (refills are counted from there).
    pub fn with_epoch(mut self, epoch_ns: i64) -> TokenBucket {
        self.epoch_ns = epoch_ns;
        self.interval = 0;
        self
    }

    /// Starts with no tokens instead of a full bucket.
    pub fn starting_empty(mut self) -> TokenBucket {
        self.tokens = 0;
        self
    }

    pub fn rate(&self) -> BitRate {
        self.rate
    }
    pub fn bucket(&self) -> Size {
        self.bucket
    }
    pub fn interval(&self) -> Duration {
        self.ts
    }
    pub fn max_packet(&self) -> Size {
        self.max_packet
    }
    pub fn epoch_ns(&self) -> i64 {
        self.epoch_ns
    }

    /// Whole bytes of tokens in the bucket as of the last call (rounded down).
    pub fn tokens(&self) -> u64 {
        (self.tokens / NANOBITS_PER_BYTE) as u64
    }

    /// The exact tokens, in nanobits.
    pub fn tokens_nanobits(&self) -> u128 {
        self.tokens
    }

    /// `b` in nanobits.
    pub fn bucket_nanobits(&self) -> u128 {
        self.cap
    }

    /// `r · Ts` in nanobits: what one boundary credits.
    pub fn per_interval_nanobits(&self) -> u128 {
        self.per_interval
    }

    /// Index of the interval containing `now_ns` (`floor((now − epoch) / Ts)`).
    fn index(&self, now_ns: i64) -> i128 {
        (i128::from(now_ns) - i128::from(self.epoch_ns)).div_euclid(i128::from(self.ts.as_nanos()))
    }

    /// The boundary index and tokens the bucket would have at `now_ns`.
    fn peek(&self, now_ns: i64) -> (i128, u128) {
        let k = self.index(now_ns);
        if k <= self.interval {
            return (self.interval, self.tokens);
        }
        let passed = u128::try_from(k - self.interval).unwrap_or(u128::MAX);
        let credit = self.per_interval.saturating_mul(passed);
        (k, self.tokens.saturating_add(credit).min(self.cap))
    }

    /// Credits the boundaries passed up to `now_ns` (`r · Ts` each, capped at `b`).
    /// Returns how many boundaries were passed.
    pub fn poll(&mut self, now_ns: i64) -> u64 {
        let (k, tokens) = self.peek(now_ns);
        let passed = u64::try_from(k - self.interval).unwrap_or(u64::MAX);
        self.interval = k;
        self.tokens = tokens;
        passed
    }

    /// Sends a packet of `bytes` at `now_ns` if it conforms (the bucket, refilled up to
    /// `now_ns`, holds `bytes`): takes the tokens and returns true. Otherwise nothing
    /// changes but the refill, and it returns false.
    pub fn try_send(&mut self, now_ns: i64, bytes: u64) -> bool {
        self.poll(now_ns);
        let need = u128::from(bytes) * NANOBITS_PER_BYTE;
        if self.tokens >= need {
            self.tokens -= need;
            true
        } else {
            false
        }
    }

    /// The earliest instant at or after `now_ns` at which a packet of `bytes` conforms:
    /// `now_ns` itself, or the first refill boundary by which enough tokens will have
    /// come in (assuming nothing else is sent meanwhile). `None` when it never will:
    /// `bytes` is larger than the bucket (or the instant is beyond the clock's range).
    /// An instant before the last boundary already credited (the bucket was polled
    /// later) is answered with that boundary: the tokens were not there before it.
    pub fn next_conforming(&self, now_ns: i64, bytes: u64) -> Option<i64> {
        let need = u128::from(bytes) * NANOBITS_PER_BYTE;
        if need > self.cap {
            return None;
        }
        let (k, tokens) = self.peek(now_ns);
        if tokens >= need {
            // The tokens are those credited up to boundary `k`: an earlier instant (a
            // packet that waited while the bucket was polled past a boundary) only
            // conforms from that boundary on.
            // (Interval 0 is the initial level: there since ever.)
            let since = match k {
                0 => i128::MIN,
                k => i128::from(self.epoch_ns)
                    .saturating_add(k.saturating_mul(i128::from(self.ts.as_nanos()))),
            };
            return i64::try_from(i128::from(now_ns).max(since)).ok();
        }
        let deficit = need - tokens;
        // per_interval > 0: `new` refuses a zero rate and a non-positive interval.
        let n = deficit.div_ceil(self.per_interval.max(1));
        let boundary = k.checked_add(i128::try_from(n).ok()?)?;
        let at = i128::from(self.epoch_ns)
            .checked_add(boundary.checked_mul(i128::from(self.ts.as_nanos()))?)?;
        i64::try_from(at).ok()
    }

    /// The most the bucket lets through in any closed window of length `window`:
    /// `b + r·Ts·⌈window / Ts⌉`, in nanobits (0 for a negative window). Tight.
    pub fn envelope_nanobits(&self, window: Duration) -> u128 {
        if window.is_negative() {
            return 0;
        }
        let intervals = (window.as_nanos() as u128).div_ceil(self.ts.as_nanos() as u128);
        self.cap
            .saturating_add(self.per_interval.saturating_mul(intervals))
    }

    /// The burst `b + r·Ts` of the smallest token bucket `(r, b + r·Ts)` the output
    /// conforms to, in nanobits (see the module docs: the `Ts` batching adds `r·Ts`).
    pub fn affine_burst_nanobits(&self) -> u128 {
        self.cap.saturating_add(self.per_interval)
    }
}

/// A token bucket a [`Shaper`] can put a FIFO of packets in front of: the
/// once-per-`Ts` [`TokenBucket`] or the continuously refilled [`ContinuousBucket`].
pub trait Bucket {
    /// The earliest instant at or after `now_ns` at which a packet of `bytes` conforms,
    /// assuming nothing else is sent meanwhile; `None` if it never will.
    fn next_conforming(&self, now_ns: i64, bytes: u64) -> Option<i64>;
    /// Sends a packet of `bytes` at `now_ns` if it conforms (taking its tokens).
    fn try_send(&mut self, now_ns: i64, bytes: u64) -> bool;
}

impl Bucket for TokenBucket {
    fn next_conforming(&self, now_ns: i64, bytes: u64) -> Option<i64> {
        TokenBucket::next_conforming(self, now_ns, bytes)
    }
    fn try_send(&mut self, now_ns: i64, bytes: u64) -> bool {
        TokenBucket::try_send(self, now_ns, bytes)
    }
}

/// When a [`ContinuousBucket`] lets a packet go (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Charge {
    /// The tokens must cover the packet before it goes: Linux `tbf`.
    Before,
    /// The token count must not be negative; the packet is charged after it went, so
    /// the bucket may owe one packet: Linux `htb` (one class, no hysteresis).
    After,
}

/// A token bucket `(r, b)` refilled continuously, `r · Δt` for every nanosecond: a
/// model of the Linux `tbf` and `htb` qdiscs (see the module docs), with the same
/// sans-IO interface and nanobit arithmetic as [`TokenBucket`]. It starts full at
/// instant 0 (see [`ContinuousBucket::starting_at`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuousBucket {
    rate: BitRate,
    bucket: Size,
    max_packet: Size,
    charge: Charge,
    /// `b` in nanobits.
    cap: u128,
    /// Current tokens, nanobits; never above `cap`, negative only with
    /// [`Charge::After`] (at least `−max_packet` for packets up to `max_packet`).
    tokens: i128,
    /// The instant `tokens` was last brought up to date.
    last_ns: i64,
}

impl ContinuousBucket {
    /// A full bucket of `bucket` bytes refilled at `rate`. The bucket must hold the
    /// largest packet `max_packet` (else, with tbf, that packet never goes).
    pub fn new(
        rate: BitRate,
        bucket: Size,
        max_packet: Size,
        charge: Charge,
    ) -> Result<ContinuousBucket, ShaperError> {
        if rate.bps() == 0 {
            return Err(ShaperError::ZeroRate);
        }
        if max_packet.bytes() == 0 {
            return Err(ShaperError::ZeroPacket);
        }
        if bucket.bytes() < max_packet.bytes() {
            return Err(ShaperError::BucketBelowPacket { bucket, max_packet });
        }
        let cap = u128::from(bucket.bytes()) * NANOBITS_PER_BYTE;
        Ok(ContinuousBucket {
            rate,
            bucket,
            max_packet,
            charge,
            cap,
            tokens: cap as i128,
            last_ns: 0,
        })
    }

    /// Linux `tbf`: `rate r burst b`.
    pub fn tbf(rate: BitRate, bucket: Size, max_packet: Size) -> Result<Self, ShaperError> {
        ContinuousBucket::new(rate, bucket, max_packet, Charge::Before)
    }

    /// Linux `htb`, one class: `rate r ceil r burst b cburst b`.
    pub fn htb(rate: BitRate, bucket: Size, max_packet: Size) -> Result<Self, ShaperError> {
        ContinuousBucket::new(rate, bucket, max_packet, Charge::After)
    }

    /// The bucket is full at `start_ns` (and earns nothing before).
    pub fn starting_at(mut self, start_ns: i64) -> ContinuousBucket {
        self.last_ns = start_ns;
        self
    }

    /// Starts with no tokens instead of a full bucket.
    pub fn starting_empty(mut self) -> ContinuousBucket {
        self.tokens = 0;
        self
    }

    pub fn rate(&self) -> BitRate {
        self.rate
    }
    pub fn bucket(&self) -> Size {
        self.bucket
    }
    pub fn max_packet(&self) -> Size {
        self.max_packet
    }
    pub fn charge(&self) -> Charge {
        self.charge
    }

    /// The exact tokens as of the last call, in nanobits (negative: debt).
    pub fn tokens_nanobits(&self) -> i128 {
        self.tokens
    }

    /// `b` in nanobits.
    pub fn bucket_nanobits(&self) -> u128 {
        self.cap
    }

    /// The tokens the bucket would have at `now_ns` (nothing is earned before the
    /// last instant it was brought up to date).
    fn peek(&self, now_ns: i64) -> i128 {
        if now_ns <= self.last_ns {
            return self.tokens;
        }
        let dt = (i128::from(now_ns) - i128::from(self.last_ns)) as u128;
        let credit = u128::from(self.rate.bps()).saturating_mul(dt);
        let cap = self.cap as i128;
        // tokens ≤ cap, so only the credit up to cap − tokens matters
        let room = (cap - self.tokens) as u128;
        self.tokens + credit.min(room) as i128
    }

    /// Brings the tokens up to `now_ns`.
    pub fn poll(&mut self, now_ns: i64) {
        self.tokens = self.peek(now_ns);
        self.last_ns = self.last_ns.max(now_ns);
    }

    /// The tokens a packet of `bytes` needs before it may go: the packet itself
    /// (tbf), or none (htb: only no debt).
    fn need(&self, bytes: u64) -> i128 {
        match self.charge {
            Charge::Before => (u128::from(bytes) * NANOBITS_PER_BYTE) as i128,
            Charge::After => 0,
        }
    }

    /// Sends a packet of `bytes` at `now_ns` if it conforms: takes its tokens (htb:
    /// possibly into debt) and returns true; otherwise only refills.
    pub fn try_send(&mut self, now_ns: i64, bytes: u64) -> bool {
        self.poll(now_ns);
        if self.tokens < self.need(bytes) {
            return false;
        }
        self.tokens -= (u128::from(bytes) * NANOBITS_PER_BYTE) as i128;
        true
    }

    /// The earliest instant at or after `now_ns` at which a packet of `bytes`
    /// conforms (nothing else sent meanwhile); `None` when it never does (tbf: larger
    /// than the bucket). An instant before the last one the bucket was brought up to
    /// date is answered from that one: its tokens are known only from then.
    pub fn next_conforming(&self, now_ns: i64, bytes: u64) -> Option<i64> {
        let need = self.need(bytes);
        if need > self.cap as i128 {
            return None;
        }
        let from = now_ns.max(self.last_ns);
        let tokens = self.peek(from);
        if tokens >= need {
            return Some(from);
        }
        let deficit = (need - tokens) as u128;
        let wait = deficit.div_ceil(u128::from(self.rate.bps()));
        i64::try_from(i128::from(from).checked_add(i128::try_from(wait).ok()?)?).ok()
    }

    /// The burst of the smallest token bucket `(r, ·)` the output conforms to, in
    /// nanobits: `b` (tbf), `b + M` (htb: one packet of debt).
    pub fn affine_burst_nanobits(&self) -> u128 {
        match self.charge {
            Charge::Before => self.cap,
            Charge::After => self
                .cap
                .saturating_add(u128::from(self.max_packet.bytes()) * NANOBITS_PER_BYTE),
        }
    }
}

impl Bucket for ContinuousBucket {
    fn next_conforming(&self, now_ns: i64, bytes: u64) -> Option<i64> {
        ContinuousBucket::next_conforming(self, now_ns, bytes)
    }
    fn try_send(&mut self, now_ns: i64, bytes: u64) -> bool {
        ContinuousBucket::try_send(self, now_ns, bytes)
    }
}

/// When a packet may leave: it was ready at `ready_ns` and conforms at `at_ns`
/// (`at_ns − ready_ns` is the time it waits for tokens, or behind earlier packets that
/// did).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub ready_ns: i64,
    pub at_ns: i64,
}

impl Release {
    pub fn wait_ns(&self) -> i64 {
        self.at_ns.saturating_sub(self.ready_ns)
    }
}

/// What a [`Shaper`] did over a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ShaperStats {
    /// Packets sent.
    pub sent: u64,
    pub sent_bytes: u64,
    /// Packets that waited (for tokens, or behind packets that did).
    pub delayed: u64,
    /// The longest such wait.
    pub max_wait_ns: i64,
    /// The sum of the waits (saturating).
    pub total_wait_ns: i64,
    /// Sends refused because the packet did not conform at the instant given.
    pub refused: u64,
}

/// A token bucket in front of a FIFO of packets: each packet leaves at the first
/// instant that it is ready, the packet before it has left, and it conforms. Counts
/// who waited and how long. The bucket is lockstep's once-per-`Ts` [`TokenBucket`]
/// unless said otherwise ([`Bucket`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shaper<B = TokenBucket> {
    bucket: B,
    /// Release instant of the previous packet (FIFO: the next never leaves before).
    last_release: Option<i64>,
    stats: ShaperStats,
}

impl<B: Bucket> Shaper<B> {
    pub fn new(bucket: B) -> Shaper<B> {
        Shaper {
            bucket,
            last_release: None,
            stats: ShaperStats::default(),
        }
    }

    pub fn bucket(&self) -> &B {
        &self.bucket
    }

    pub fn stats(&self) -> ShaperStats {
        self.stats
    }

    /// When the last packet sent was released (`None` before the first).
    pub fn last_release(&self) -> Option<i64> {
        self.last_release
    }

    /// When a packet of `bytes`, ready at `ready_ns`, may leave; `None` if it never
    /// conforms (larger than the bucket).
    pub fn plan(&self, ready_ns: i64, bytes: u64) -> Option<Release> {
        let head = self.last_release.map_or(ready_ns, |l| l.max(ready_ns));
        let at = self.bucket.next_conforming(head, bytes)?;
        Some(Release {
            ready_ns,
            at_ns: at,
        })
    }

    /// Sends the packet `release` was planned for, at `now_ns`: takes its tokens and
    /// counts its wait. Returns false (and counts a refusal) if it does not conform at
    /// `now_ns` — e.g. `now_ns` is before `release.at_ns`.
    pub fn send(&mut self, release: Release, now_ns: i64, bytes: u64) -> bool {
        if !self.bucket.try_send(now_ns, bytes) {
            self.stats.refused += 1;
            return false;
        }
        self.last_release = Some(
            self.last_release
                .map_or(release.at_ns, |l| l.max(release.at_ns)),
        );
        let s = &mut self.stats;
        s.sent += 1;
        s.sent_bytes = s.sent_bytes.saturating_add(bytes);
        let wait = release.wait_ns();
        if wait > 0 {
            s.delayed += 1;
            s.max_wait_ns = s.max_wait_ns.max(wait);
            s.total_wait_ns = s.total_wait_ns.saturating_add(wait);
        }
        true
    }
}

/// A symmetric-burst source (loeser §4.1): it starts at `start_ns` with a full bucket,
/// empties it at once (`⌊b / packet⌋` packets back to back), then sends every packet
/// as soon as the bucket allows — `r·Ts` per boundary, the boundaries at
/// `start_ns + k·Ts`. Every source of a test started at the same instant gives the
/// worst case for the port they share.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymmetricBurst {
    shaper: Shaper,
    start_ns: i64,
    packet: u64,
}

impl SymmetricBurst {
    /// A source of `packet_bytes` packets behind `(rate, bucket, ts)`, starting at
    /// `start_ns`. The bucket must hold `rate · ts + packet_bytes`.
    pub fn new(
        rate: BitRate,
        bucket: Size,
        ts: Duration,
        packet_bytes: u64,
        start_ns: i64,
    ) -> Result<SymmetricBurst, ShaperError> {
        let bucket = TokenBucket::new(rate, bucket, ts, Size(packet_bytes))?.with_epoch(start_ns);
        Ok(SymmetricBurst {
            shaper: Shaper::new(bucket),
            start_ns,
            packet: packet_bytes,
        })
    }

    /// Packets in the opening burst: `⌊b / packet⌋`.
    pub fn burst_packets(&self) -> u64 {
        self.shaper.bucket().bucket().bytes() / self.packet
    }

    pub fn packet_bytes(&self) -> u64 {
        self.packet
    }

    pub fn start_ns(&self) -> i64 {
        self.start_ns
    }

    /// When the next packet leaves. It is ready when the one before it has left (or
    /// at the start), so its wait is the time it spends waiting for a refill.
    pub fn next(&self) -> Option<Release> {
        let ready = self
            .shaper
            .last_release()
            .map_or(self.start_ns, |l| l.max(self.start_ns));
        self.shaper.plan(ready, self.packet)
    }

    /// The packet of `release` left at `now_ns` (see [`Shaper::send`]).
    pub fn sent(&mut self, release: Release, now_ns: i64) -> bool {
        self.shaper.send(release, now_ns, self.packet)
    }

    pub fn shaper(&self) -> &Shaper {
        &self.shaper
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: i64 = 1_000_000;
    const NB: u128 = NANOBITS_PER_BYTE;

    /// 80 kbit/s = 10 B/ms, Ts = 10 ms: 100 B per boundary; M = 50 B, so b ≥ 150 B.
    fn hand_bucket(b: u64) -> Result<TokenBucket, ShaperError> {
        TokenBucket::new(
            BitRate(80_000),
            Size(b),
            Duration::from_millis(10),
            Size(50),
        )
    }

    #[test]
    fn the_bucket_must_hold_one_interval_plus_a_packet() {
        assert!(hand_bucket(150).is_ok());
        let e = hand_bucket(149).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the bucket (149B) is below r·Ts + M = 100B + 50B = 150B (rate 80kbit/s, \
             shaping interval 10ms): a source sending 50B packets would lose tokens at \
             every refill and fall short of its rate"
        );
        // r·Ts is not always a whole number of bytes: printed exactly.
        let e = TokenBucket::new(BitRate(12), Size(2), Duration::SECOND, Size(1)).unwrap_err();
        assert_eq!(
            e,
            ShaperError::BucketTooSmall {
                bucket: Size(2),
                rate: BitRate(12),
                ts: Duration::SECOND,
                rts: "1.5B".into(),
                max_packet: Size(1),
                need: "2.5B".into(),
            }
        );
        // loeser Table 3: b = r·Ts + 1514 B.
        for (rate, ts, b) in [
            (40_000_000, Duration::from_millis(10), 51_514),
            (32_000_000, Duration::from_millis(1), 5_514),
            (20_000_000, Duration::from_micros(100), 1_764),
        ] {
            let ok = TokenBucket::new(BitRate(rate), Size(b), ts, Size(1514));
            assert!(ok.is_ok(), "{rate} {ts}");
            let short = TokenBucket::new(BitRate(rate), Size(b - 1), ts, Size(1514));
            assert!(short.is_err(), "{rate} {ts}");
        }
        assert_eq!(
            TokenBucket::new(BitRate(0), Size(10), Duration::SECOND, Size(1)).unwrap_err(),
            ShaperError::ZeroRate
        );
        assert_eq!(
            TokenBucket::new(BitRate(1), Size(10), Duration::ZERO, Size(1))
                .unwrap_err()
                .to_string(),
            "the shaping interval must be positive, got 0ns"
        );
        assert_eq!(
            TokenBucket::new(BitRate(1), Size(10), Duration::SECOND, Size(0)).unwrap_err(),
            ShaperError::ZeroPacket
        );
    }

    #[test]
    fn exact_byte_strings() {
        assert_eq!(exact_bytes(0), "0B");
        assert_eq!(exact_bytes(1514 * NB), "1514B");
        assert_eq!(exact_bytes(NB / 2), "0.5B");
        assert_eq!(exact_bytes(1), "0.000000000125B");
        assert_eq!(exact_bytes(3 * NB + 3), "3.000000000375B");
    }

    #[test]
    fn hand_timeline() {
        let mut b = hand_bucket(200).unwrap();
        assert_eq!(b.tokens(), 200);
        // t = 0: 120 B go, 80 B left; 100 B do not conform.
        assert!(b.try_send(0, 120));
        assert_eq!(b.tokens(), 80);
        assert!(!b.try_send(0, 100));
        assert_eq!(b.tokens(), 80);
        // The next boundary (10 ms) brings 180 B; 200 B need two boundaries (the
        // second is capped at 200 B); 201 B never fit.
        assert_eq!(b.next_conforming(0, 80), Some(0));
        assert_eq!(b.next_conforming(0, 100), Some(10 * MS));
        assert_eq!(b.next_conforming(0, 200), Some(20 * MS));
        assert_eq!(b.next_conforming(0, 201), None);
        // Nothing comes in between boundaries.
        assert!(!b.try_send(10 * MS - 1, 100));
        assert_eq!(b.tokens(), 80);
        assert!(b.try_send(10 * MS, 100));
        assert_eq!(b.tokens(), 80);
        // 35 ms: the boundaries at 20 and 30 ms add 200 B, capped at 200 B.
        assert_eq!(b.poll(35 * MS), 2);
        assert_eq!(b.tokens(), 200);
        // Asked about an earlier instant, the bucket answers from the boundary that
        // brought its tokens (30 ms), not before.
        assert_eq!(b.next_conforming(MS, 100), Some(30 * MS));
        assert_eq!(b.next_conforming(31 * MS, 100), Some(31 * MS));
        // Time going backwards earns nothing and does not undo anything.
        assert_eq!(b.poll(MS), 0);
        assert!(b.try_send(MS, 150));
        assert_eq!(b.tokens(), 50);
        assert_eq!(b.next_conforming(MS, 60), Some(40 * MS));
        assert_eq!(b.poll(39 * MS), 0);
        assert_eq!(b.poll(40 * MS), 1);
        assert_eq!(b.tokens(), 150);
    }

    #[test]
    fn fractional_credit_is_carried_not_lost() {
        // 12 bit/s, Ts = 1 s: 1.5 B per boundary.
        let mut b = TokenBucket::new(BitRate(12), Size(3), Duration::SECOND, Size(1))
            .unwrap()
            .starting_empty();
        let s = 1_000_000_000;
        assert_eq!(b.next_conforming(0, 1), Some(s));
        b.poll(s);
        assert_eq!((b.tokens(), b.tokens_nanobits()), (1, 12_000_000_000));
        assert!(b.try_send(s, 1));
        assert!(!b.try_send(s, 1));
        // 0.5 B left + 1.5 B = 2 B.
        assert!(b.try_send(2 * s, 2));
        assert_eq!(b.tokens_nanobits(), 0);
        // Over any number of intervals a greedy 1-byte source gets exactly 1.5 B each.
        let mut sent = 0u64;
        for k in 3..=102 {
            while b.try_send(k * s, 1) {
                sent += 1;
            }
        }
        assert_eq!(sent, 150);
    }

    #[test]
    fn epoch_moves_the_boundaries() {
        let mut b = hand_bucket(200).unwrap().with_epoch(3 * MS);
        assert!(b.try_send(3 * MS, 200));
        assert_eq!(b.next_conforming(3 * MS, 50), Some(13 * MS));
        assert!(!b.try_send(10 * MS, 50));
        assert!(b.try_send(13 * MS, 100));
        // Before the epoch: interval −1, nothing is credited.
        let mut early = hand_bucket(200)
            .unwrap()
            .with_epoch(3 * MS)
            .starting_empty();
        assert_eq!(early.poll(-100 * MS), 0);
        assert_eq!(early.next_conforming(-100 * MS, 50), Some(13 * MS));
    }

    #[test]
    fn envelope_is_a_staircase_and_tight() {
        let b = hand_bucket(200).unwrap();
        let nb = |bytes: u128| bytes * NB;
        assert_eq!(b.envelope_nanobits(Duration(-1)), 0);
        assert_eq!(b.envelope_nanobits(Duration::ZERO), nb(200));
        assert_eq!(b.envelope_nanobits(Duration(1)), nb(300));
        assert_eq!(b.envelope_nanobits(Duration::from_millis(10)), nb(300));
        assert_eq!(b.envelope_nanobits(Duration(10 * MS + 1)), nb(400));
        assert_eq!(b.affine_burst_nanobits(), nb(300));
        // Reached: a full bucket emptied 1 ns before a boundary, then the boundary's
        // credit: 300 B within 1 ns — more than (r, b) = (10 B/ms, 200 B) allows.
        let mut g = b.clone();
        let mut sent = 0u128;
        while g.try_send(10 * MS - 1, 1) {
            sent += 1;
        }
        while g.try_send(10 * MS, 1) {
            sent += 1;
        }
        assert_eq!(nb(sent), b.envelope_nanobits(Duration(1)));
    }

    #[test]
    fn shaper_counts_who_waited() {
        // Packets of 50 B ready every 2 ms behind the hand bucket (200 B, 100 B / 10 ms).
        let mut sh = Shaper::new(hand_bucket(200).unwrap());
        let mut releases = Vec::new();
        for i in 0..8 {
            let ready = i * 2 * MS;
            let r = sh.plan(ready, 50).unwrap();
            assert!(sh.send(r, r.at_ns, 50));
            releases.push(r.at_ns / MS);
        }
        // 4 from the full bucket, then 2 per boundary; the packet ready at 12 ms waits
        // for 20 ms and the one ready at 14 ms leaves behind it.
        assert_eq!(releases, vec![0, 2, 4, 6, 10, 10, 20, 20]);
        assert_eq!(
            sh.stats(),
            ShaperStats {
                sent: 8,
                sent_bytes: 400,
                delayed: 3,
                max_wait_ns: 8 * MS,
                total_wait_ns: (2 + 8 + 6) * MS,
                refused: 0,
            }
        );
        // Sending before the release instant is refused and counted.
        let r = sh.plan(16 * MS, 50).unwrap();
        assert_eq!(r.at_ns, 30 * MS);
        assert!(!sh.send(r, 29 * MS, 50));
        assert_eq!(sh.stats().refused, 1);
        assert!(sh.plan(0, 201).is_none());
    }

    #[test]
    fn symmetric_burst_hand_timeline() {
        let mut src = SymmetricBurst::new(
            BitRate(80_000),
            Size(200),
            Duration::from_millis(10),
            50,
            5 * MS,
        )
        .unwrap();
        assert_eq!(src.burst_packets(), 4);
        let mut times = Vec::new();
        for _ in 0..10 {
            let r = src.next().unwrap();
            assert!(src.sent(r, r.at_ns));
            times.push(r.at_ns / MS);
        }
        assert_eq!(times, vec![5, 5, 5, 5, 15, 15, 25, 25, 35, 35]);
        // Three packets waited, 10 ms each (the first of each refill).
        let st = src.shaper().stats();
        assert_eq!(
            (
                st.sent,
                st.sent_bytes,
                st.delayed,
                st.max_wait_ns,
                st.total_wait_ns
            ),
            (10, 500, 3, 10 * MS, 30 * MS)
        );
        // A late sender does not gain anything: 3 boundaries passed, bucket capped.
        let r = src.next().unwrap();
        assert_eq!(r.at_ns, 45 * MS);
        assert!(src.sent(r, 75 * MS));
        // At 75 ms: 100 B at 45, +100 at 55, +100 at 65 (cap 200), +100 at 75 (cap
        // 200) − 50 sent = 150 B left: three more packets at once, released at 75 ms
        // (the boundary that brought their tokens), not at 45.
        let mut got = Vec::new();
        for _ in 0..3 {
            let r = src.next().unwrap();
            got.push((r.ready_ns / MS, r.at_ns / MS));
            assert!(src.sent(r, 75 * MS));
        }
        assert_eq!(got, vec![(45, 75), (75, 75), (75, 75)]);
        assert_eq!(src.next().unwrap().at_ns, 85 * MS);
        assert!(
            SymmetricBurst::new(BitRate(80_000), Size(149), Duration::from_millis(10), 50, 0)
                .is_err()
        );
    }

    /// 80 kbit/s = 10 B/ms, continuous refill; M = 50 B.
    fn kernel(charge: Charge, b: u64) -> ContinuousBucket {
        ContinuousBucket::new(BitRate(80_000), Size(b), Size(50), charge).unwrap()
    }

    #[test]
    fn a_continuous_bucket_must_hold_a_packet() {
        assert_eq!(
            ContinuousBucket::tbf(BitRate(0), Size(10), Size(1)).unwrap_err(),
            ShaperError::ZeroRate
        );
        assert_eq!(
            ContinuousBucket::tbf(BitRate(1), Size(10), Size(0)).unwrap_err(),
            ShaperError::ZeroPacket
        );
        assert_eq!(
            ContinuousBucket::htb(BitRate(1), Size(49), Size(50))
                .unwrap_err()
                .to_string(),
            "the bucket (49B) is below the largest packet (50B): such a packet would never \
             conform"
        );
        let b = ContinuousBucket::tbf(BitRate(1), Size(50), Size(50)).unwrap();
        assert_eq!(
            (b.bucket(), b.max_packet(), b.charge()),
            (Size(50), Size(50), Charge::Before)
        );
    }

    #[test]
    fn tbf_refills_continuously_and_needs_the_whole_packet() {
        let mut b = kernel(Charge::Before, 100);
        assert!(b.try_send(0, 60));
        assert!(!b.try_send(0, 50));
        // 40 B left, 10 B/ms: 50 B at 1 ms, not a nanosecond before
        assert_eq!(b.next_conforming(0, 50), Some(MS));
        assert!(!b.try_send(MS - 1, 50));
        assert!(b.try_send(MS, 50));
        assert_eq!(b.tokens_nanobits(), 0);
        // no boundaries: 5 B come in half a millisecond
        assert_eq!(b.next_conforming(MS, 5), Some(MS + MS / 2));
        // capped at b
        b.poll(1000 * MS);
        assert_eq!(b.tokens_nanobits(), 100 * NB as i128);
        assert_eq!(b.next_conforming(1000 * MS, 101), None);
        // an earlier instant is answered from the last update
        assert_eq!(b.next_conforming(5 * MS, 10), Some(1000 * MS));
        assert_eq!(b.affine_burst_nanobits(), 100 * NB);
        // 12 bit/s: 1.5 B a second, nothing lost to rounding
        let mut slow = ContinuousBucket::tbf(BitRate(12), Size(3), Size(1))
            .unwrap()
            .starting_empty()
            .starting_at(7);
        assert_eq!(slow.next_conforming(0, 1), Some(7 + 666_666_667));
        let mut sent = 0u64;
        for k in 1..=100 {
            while slow.try_send(7 + k * 1_000_000_000, 1) {
                sent += 1;
            }
        }
        assert_eq!(sent, 150);
    }

    #[test]
    fn htb_sends_while_not_in_debt_and_charges_after() {
        let mut b = kernel(Charge::After, 100);
        assert!(b.try_send(0, 50));
        assert!(b.try_send(0, 50));
        // 0 tokens is not debt: a third packet goes, b + M in no time
        assert!(b.try_send(0, 50));
        assert_eq!(b.tokens_nanobits(), -50 * NB as i128);
        assert!(!b.try_send(0, 1));
        // out of debt after 5 ms
        assert_eq!(b.next_conforming(0, 50), Some(5 * MS));
        assert!(!b.try_send(5 * MS - 1, 50));
        assert!(b.try_send(5 * MS, 50));
        assert_eq!(b.affine_burst_nanobits(), 150 * NB);
        // a packet of any size goes when the bucket is not in debt
        let big = kernel(Charge::After, 100);
        assert_eq!(big.next_conforming(0, 1000), Some(0));
    }

    #[test]
    fn a_shaper_in_front_of_tbf() {
        // 50 B packets ready every 2 ms behind tbf (10 B/ms, b = 100 B)
        let mut sh = Shaper::new(kernel(Charge::Before, 100));
        let mut releases = Vec::new();
        for i in 0..6 {
            let r = sh.plan(i * 2 * MS, 50).unwrap();
            assert!(sh.send(r, r.at_ns, 50));
            releases.push(r.at_ns / MS);
        }
        assert_eq!(releases, vec![0, 2, 5, 10, 15, 20]);
        assert_eq!(sh.stats().delayed, 4);
        assert_eq!(sh.bucket().charge(), Charge::Before);
    }

    /// One step of a random workload: advance the clock, then try a packet.
    fn steps() -> impl Strategy<Value = Vec<(i64, u64)>> {
        prop::collection::vec((0i64..25 * MS, 1u64..=60), 1..150)
    }

    proptest! {
        #[test]
        fn tokens_never_exceed_the_bucket(
            extra in 0u64..200,
            ts_us in 1i64..20_000,
            rate in 1u64..10_000_000,
            steps in steps(),
        ) {
            let ts = Duration::from_micros(ts_us);
            let min = (u128::from(rate) * ts.as_nanos() as u128).div_ceil(NB) as u64 + 60;
            let mut b = TokenBucket::new(BitRate(rate), Size(min + extra), ts, Size(60)).unwrap();
            let mut now = 0i64;
            for (dt, bytes) in steps {
                now += dt;
                b.try_send(now, bytes);
                prop_assert!(b.tokens_nanobits() <= b.bucket_nanobits());
                prop_assert!(b.tokens() <= b.bucket().bytes());
            }
        }

        /// Over every closed window [t_i, t_j] the bytes sent stay within
        /// b + r·Ts·⌈Δ/Ts⌉; a packet goes exactly when `next_conforming` says, and
        /// not one nanosecond before.
        #[test]
        fn output_stays_under_the_staircase_and_nothing_leaves_early(
            extra in 0u64..200,
            ts_us in 1i64..20_000,
            rate in 1u64..10_000_000,
            epoch in -5 * MS..5 * MS,
            steps in steps(),
        ) {
            let ts = Duration::from_micros(ts_us);
            let min = (u128::from(rate) * ts.as_nanos() as u128).div_ceil(NB) as u64 + 60;
            let mut b = TokenBucket::new(BitRate(rate), Size(min + extra), ts, Size(60))
                .unwrap()
                .with_epoch(epoch);
            let mut now = 0i64;
            let mut sent: Vec<(i64, u64)> = Vec::new();
            for (dt, bytes) in steps {
                now += dt;
                let when = b.next_conforming(now, bytes);
                let before = b.clone();
                let ok = b.try_send(now, bytes);
                prop_assert_eq!(ok, when == Some(now));
                if let Some(at) = when.filter(|&at| at > now) {
                    let mut early = before.clone();
                    prop_assert!(!early.try_send(at - 1, bytes));
                    let mut on_time = before;
                    prop_assert!(on_time.try_send(at, bytes));
                }
                if ok {
                    sent.push((now, bytes));
                }
            }
            for i in 0..sent.len() {
                let mut total = 0u128;
                for j in i..sent.len() {
                    total += u128::from(sent[j].1);
                    let window = Duration(sent[j].0 - sent[i].0);
                    prop_assert!(
                        total * NB <= b.envelope_nanobits(window),
                        "{} B in {} exceeds {}", total, window,
                        exact_bytes(b.envelope_nanobits(window))
                    );
                }
            }
        }

        /// tbf's output stays within (r, b), htb's within (r, b + M), over every
        /// closed window; a packet goes exactly when `next_conforming` says.
        #[test]
        fn continuous_output_stays_under_its_token_bucket(
            extra in 0u64..200,
            rate in 1u64..10_000_000,
            htb in any::<bool>(),
            steps in steps(),
        ) {
            let charge = if htb { Charge::After } else { Charge::Before };
            let mut b = ContinuousBucket::new(BitRate(rate), Size(60 + extra), Size(60), charge)
                .unwrap()
                .starting_at(3);
            let mut now = 0i64;
            let mut sent: Vec<(i64, u64)> = Vec::new();
            for (dt, bytes) in steps {
                now += dt;
                let when = b.next_conforming(now, bytes);
                let before = b.clone();
                let ok = b.try_send(now, bytes);
                prop_assert_eq!(ok, when == Some(now.max(3)));
                if let Some(at) = when.filter(|&at| at > now.max(3)) {
                    let mut early = before.clone();
                    prop_assert!(!early.try_send(at - 1, bytes));
                    let mut on_time = before;
                    prop_assert!(on_time.try_send(at, bytes));
                }
                if ok {
                    sent.push((now, bytes));
                }
            }
            for i in 0..sent.len() {
                let mut total = 0u128;
                for j in i..sent.len() {
                    total += u128::from(sent[j].1);
                    let window = (sent[j].0 - sent[i].0) as u128;
                    let allowed = b.affine_burst_nanobits() + u128::from(rate) * window;
                    prop_assert!(total * NB <= allowed, "{} B in {} ns", total, window);
                }
            }
        }

        /// With b ≥ r·Ts + M a greedy source never loses a token to the cap after
        /// its start: by boundary n it has sent more than b + n·r·Ts − M.
        #[test]
        fn a_greedy_source_keeps_its_rate(
            extra in 0u64..100,
            ts_us in 1i64..2_000,
            rate in 8_000u64..100_000_000,
            packet in 1u64..1515,
            intervals in 1i64..200,
        ) {
            let ts = Duration::from_micros(ts_us);
            let min = (u128::from(rate) * ts.as_nanos() as u128).div_ceil(NB) as u64 + packet;
            let mut src = SymmetricBurst::new(BitRate(rate), Size(min + extra), ts, packet, 0).unwrap();
            let end = intervals * ts.as_nanos();
            loop {
                let r = src.next().unwrap();
                if r.at_ns > end {
                    break;
                }
                prop_assert!(src.sent(r, r.at_ns));
            }
            let b = src.shaper().bucket();
            let sent = u128::from(src.shaper().stats().sent_bytes) * NB;
            let earned = b.bucket_nanobits() + b.per_interval_nanobits() * intervals as u128;
            prop_assert!(sent <= earned);
            prop_assert!(sent + u128::from(packet) * NB > earned);
        }
    }
}
