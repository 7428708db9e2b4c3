//! RFC 3550 §6.4.1 inter-arrival jitter.
//!
//! For consecutive packets i, j (in arrival order) with send times S and receive times
//! R, `D(i,j) = (R_j - R_i) - (S_j - S_i)`: how much the spacing changed in transit.
//! The estimate is the running average `J += (|D| - J) / 16`. The two clocks need not
//! agree: a constant offset between them cancels in `D`. It is reported because RTP
//! tools (and users comparing with them) quote it; the max − min jitter of a
//! [`Histogram`](super::Histogram) is the stricter figure.

/// Running RFC 3550 jitter estimate, in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rfc3550Jitter {
    /// Transit time `R - S` of the previous packet.
    prev_transit: Option<i128>,
    jitter: f64,
    updates: u64,
}

impl Rfc3550Jitter {
    pub fn new() -> Self {
        Self::default()
    }

    /// Feed the send and receive timestamps of the next packet, in arrival order. The
    /// first packet only sets the reference.
    pub fn update(&mut self, send_ns: i64, recv_ns: i64) {
        // i128: the difference of two arbitrary i64 differences cannot overflow.
        let transit = recv_ns as i128 - send_ns as i128;
        if let Some(prev) = self.prev_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter += (d - self.jitter) / 16.0;
            self.updates += 1;
        }
        self.prev_transit = Some(transit);
    }

    /// Current estimate (0 until two packets have been seen).
    pub fn value_ns(&self) -> f64 {
        self.jitter
    }

    /// Number of `D` values folded in (packets seen − 1, once any arrived).
    pub fn updates(&self) -> u64 {
        self.updates
    }

    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed() {
        let mut j = Rfc3550Jitter::new();
        // Transit times 1000, 1016, 1016, 984 with a 10 ms send spacing.
        j.update(0, 1_000);
        assert_eq!(j.value_ns(), 0.0);
        assert_eq!(j.updates(), 0);
        // D = (11_016 - 1_000) - (10_000 - 0) = 16 -> J = 0 + (16 - 0)/16 = 1
        j.update(10_000, 11_016);
        assert_eq!(j.value_ns(), 1.0);
        // D = 0 -> J = 1 + (0 - 1)/16 = 0.9375
        j.update(20_000, 21_016);
        assert_eq!(j.value_ns(), 0.9375);
        // D = 984 - 1016 = -32 -> |D| = 32 -> J = 0.9375 + (32 - 0.9375)/16 = 2.87890625
        j.update(30_000, 30_984);
        assert_eq!(j.value_ns(), 2.878_906_25);
        assert_eq!(j.updates(), 3);
    }

    #[test]
    fn clock_offset_cancels() {
        // Same arrivals, receiver clock 5 s behind the sender's: identical estimate.
        let sends = [0i64, 1_000, 2_000, 3_000, 4_000];
        let recvs = [500i64, 1_700, 2_400, 3_900, 4_450];
        let mut a = Rfc3550Jitter::new();
        let mut b = Rfc3550Jitter::new();
        for (&s, &r) in sends.iter().zip(&recvs) {
            a.update(s, r);
            b.update(s, r - 5_000_000_000);
        }
        assert_eq!(a.value_ns(), b.value_ns());
        // |D| = 200, 300, 500, 450.
        let mut expect = 0.0f64;
        for d in [200.0, 300.0, 500.0, 450.0] {
            expect += (d - expect) / 16.0;
        }
        assert_eq!(a.value_ns(), expect);
    }

    #[test]
    fn extremes_do_not_overflow() {
        let mut j = Rfc3550Jitter::new();
        j.update(i64::MIN, i64::MAX);
        j.update(i64::MAX, i64::MIN);
        // |D| = 2 * (2^64 - 1) exactly representable as f64 after rounding: 2^65.
        assert_eq!(j.value_ns(), 2f64.powi(65) / 16.0);
        j.reset();
        assert_eq!(j, Rfc3550Jitter::new());
    }
}
