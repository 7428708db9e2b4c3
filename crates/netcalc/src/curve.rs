//! Curves of deterministic network calculus and the operations the analyses need.
//!
//! - [`Curve`]: a concave, piecewise-linear, non-decreasing **arrival curve** with
//!   `α(0) = 0` and a jump to `α(0+)` (the burst). Token buckets `r t + b`, T-SPECs
//!   `min(C t + M, r t + b)` and their sums, minimums, time shifts and deconvolutions
//!   by convex service curves all stay in this class.
//! - [`Service`]: a convex, piecewise-linear **service curve** that is zero up to its
//!   latency, then grows with increasing rates. Rate-latency servers `R (t − T)+`,
//!   their min-plus convolutions and the residual (leftover) service curves of FIFO and
//!   arbitrary multiplexing stay in this class.
//!
//! With a concave arrival curve and a convex service curve the delay bound
//! (horizontal deviation) and the backlog bound (vertical deviation) are maxima of
//! concave piecewise-linear functions, so they are found exactly by looking at the
//! breakpoints only. Everything is exact ([`Q`]).
//!
//! Curves are kept canonical (no two collinear pieces), so two curves describing the
//! same function compare equal.

use crate::q::Q;

/// A concave piecewise-linear arrival curve: `α(0) = 0`; for `t > 0` it starts at
/// `pts[0].1 = α(0+)` and runs through the points `pts` (strictly increasing times,
/// `pts[0].0 = 0`) with slope `slopes[i]` after `pts[i]`; the last slope lasts forever.
/// Slopes are non-negative and strictly decreasing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Curve {
    pts: Vec<(Q, Q)>,
    slopes: Vec<Q>,
}

/// One change of slope: at time `t` the slope changes by `delta`.
type Event = (Q, Q);

impl Curve {
    /// `α(t) = 0`.
    pub fn zero() -> Curve {
        Curve {
            pts: vec![(Q::zero(), Q::zero())],
            slopes: vec![Q::zero()],
        }
    }

    /// Token bucket `γ(t) = r t + b` (for `t > 0`). `r, b ≥ 0`.
    pub fn token_bucket(r: Q, b: Q) -> Curve {
        Curve {
            pts: vec![(Q::zero(), b)],
            slopes: vec![r],
        }
    }

    /// T-SPEC `(C, M, r, b)`: `α(t) = min(C t + M, r t + b)`. Requires `0 ≤ r`,
    /// `0 ≤ M ≤ b` and `r ≤ C`; outside that it is the same min, normalised.
    pub fn tspec(c: Q, m: Q, r: Q, b: Q) -> Curve {
        Curve::token_bucket(c, m).min(&Curve::token_bucket(r, b))
    }

    /// Builds a curve from points and slopes that may contain collinear pieces.
    fn normalised(pts: Vec<(Q, Q)>, slopes: Vec<Q>) -> Curve {
        let mut out_p: Vec<(Q, Q)> = Vec::with_capacity(pts.len());
        let mut out_s: Vec<Q> = Vec::with_capacity(slopes.len());
        for (p, s) in pts.into_iter().zip(slopes) {
            if let Some(last) = out_s.last() {
                if *last == s {
                    continue;
                }
            }
            out_p.push(p);
            out_s.push(s);
        }
        Curve {
            pts: out_p,
            slopes: out_s,
        }
    }

    /// The points `(t, α(t))` where the slope changes (the first is `(0, α(0+))`).
    pub fn points(&self) -> &[(Q, Q)] {
        &self.pts
    }
    /// The slope after each point.
    pub fn slopes(&self) -> &[Q] {
        &self.slopes
    }
    /// `α(0+)`: the instantaneous burst.
    pub fn burst(&self) -> &Q {
        &self.pts[0].1
    }
    /// The long-term rate (the last slope).
    pub fn rate(&self) -> &Q {
        self.slopes.last().unwrap_or(&self.pts[0].1)
    }
    /// The slope right after time 0.
    pub fn peak(&self) -> &Q {
        &self.slopes[0]
    }
    /// Whether the curve is a token bucket `r t + b` (one piece).
    pub fn is_token_bucket(&self) -> bool {
        self.pts.len() == 1
    }
    /// The smallest token bucket above the curve: `(rate, b)` with `b` where the last
    /// piece meets the vertical axis.
    pub fn token_bucket_envelope(&self) -> (Q, Q) {
        if self.pts.len() == 1 {
            return (self.slopes[0].clone(), self.pts[0].1.clone());
        }
        let last = self.pts.len() - 1;
        let (t, y) = &self.pts[last];
        let r = &self.slopes[last];
        (r.clone(), y - &(r * t))
    }

    /// Index of the piece containing time `t` (`t ≥ 0`, right-continuous).
    fn piece(&self, t: &Q) -> usize {
        // Last point with time <= t.
        match self.pts.binary_search_by(|(pt, _)| pt.cmp(t)) {
            Ok(i) => i,
            Err(i) => i.saturating_sub(1),
        }
    }

    /// `α(t)` for `t > 0`; at `t = 0` this is `α(0+)` (the right limit).
    pub fn eval(&self, t: &Q) -> Q {
        let i = self.piece(t);
        let (pt, py) = &self.pts[i];
        py + &(&self.slopes[i] * &(t - pt))
    }

    /// The earliest `t ≥ 0` with `α(t) ≥ y`, or `None` if the curve never reaches `y`.
    pub fn inverse(&self, y: &Q) -> Option<Q> {
        if y <= self.burst() {
            return Some(Q::zero());
        }
        // Last point with value < y: the curve crosses y on its piece.
        let i = match self.pts.binary_search_by(|(_, py)| py.cmp(y)) {
            Ok(i) => return Some(self.pts[i].0.clone()),
            Err(i) => i - 1, // y > pts[0].1 so i >= 1
        };
        let s = &self.slopes[i];
        if s.is_zero() {
            return None;
        }
        let (pt, py) = &self.pts[i];
        Some(pt + &((y - py) / s))
    }

    fn events(&self) -> impl Iterator<Item = Event> + '_ {
        self.pts
            .iter()
            .zip(self.slopes.iter())
            .skip(1)
            .zip(self.slopes.iter())
            .map(|(((t, _), s), prev)| (t.clone(), s - prev))
    }

    /// Rebuilds a curve from its value at 0+, its first slope and slope changes sorted
    /// by time (equal times allowed).
    fn from_events(y0: Q, s0: Q, events: Vec<Event>) -> Curve {
        let mut pts = vec![(Q::zero(), y0)];
        let mut slopes = vec![s0];
        for (t, d) in events {
            if d.is_zero() {
                continue;
            }
            let last = pts.len() - 1;
            if pts[last].0 == t {
                let s = &slopes[last] + &d;
                slopes[last] = s;
                continue;
            }
            let (pt, py) = &pts[last];
            let y = py + &(&slopes[last] * &(&t - pt));
            let s = &slopes[last] + &d;
            pts.push((t, y));
            slopes.push(s);
        }
        Curve::normalised(pts, slopes)
    }

    /// Pointwise sum of arrival curves (the aggregate of several flows).
    pub fn sum<'a>(curves: impl IntoIterator<Item = &'a Curve>) -> Curve {
        let mut y0 = Q::zero();
        let mut s0 = Q::zero();
        let mut events: Vec<Event> = Vec::new();
        for c in curves {
            y0 = &y0 + c.burst();
            s0 = &s0 + c.peak();
            events.extend(c.events());
        }
        events.sort_by(|a, b| a.0.cmp(&b.0));
        Curve::from_events(y0, s0, events)
    }

    /// `self + other`.
    pub fn add(&self, other: &Curve) -> Curve {
        Curve::sum([self, other])
    }

    /// `self − other` where `other` is one of the curves summed into `self` (the cross
    /// traffic of a flow: aggregate minus the flow). The result is concave because it
    /// is the sum of the remaining curves.
    pub fn minus(&self, other: &Curve) -> Curve {
        let mine: Vec<Event> = self.events().collect();
        let theirs: Vec<Event> = other.events().map(|(t, d)| (t, -d)).collect();
        let mut merged = Vec::with_capacity(mine.len() + theirs.len());
        let (mut i, mut j) = (0, 0);
        while i < mine.len() || j < theirs.len() {
            let take_mine = match (mine.get(i), theirs.get(j)) {
                (Some(a), Some(b)) => a.0 <= b.0,
                (Some(_), None) => true,
                _ => false,
            };
            if take_mine {
                merged.push(mine[i].clone());
                i += 1;
            } else {
                merged.push(theirs[j].clone());
                j += 1;
            }
        }
        Curve::from_events(
            self.burst() - other.burst(),
            self.peak() - other.peak(),
            merged,
        )
    }

    /// Pointwise minimum of two concave curves (still concave): a flow constrained by
    /// both.
    pub fn min(&self, other: &Curve) -> Curve {
        // Lower envelope on t ≥ 0 of the affine pieces of both curves (each concave
        // curve is the minimum of its pieces' lines).
        let mut lines: Vec<(Q, Q)> = Vec::new(); // (slope, intercept)
        for c in [self, other] {
            for ((t, y), s) in c.pts.iter().zip(c.slopes.iter()) {
                lines.push((s.clone(), y - &(s * t)));
            }
        }
        Curve::envelope(lines)
    }

    /// Lower envelope over `t ≥ 0` of lines `y = s t + c`.
    fn envelope(mut lines: Vec<(Q, Q)>) -> Curve {
        // At t = 0 the smallest intercept wins (ties: smallest slope); then slopes
        // decrease along the envelope.
        lines.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        lines.dedup_by(|later, earlier| later.0 == earlier.0); // keep smallest intercept per slope
        let Some(first) = lines
            .iter()
            .min_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)))
            .cloned()
        else {
            return Curve::zero();
        };
        let mut pts = vec![(Q::zero(), first.1.clone())];
        let mut slopes = vec![first.0.clone()];
        let mut cur = first;
        let mut t = Q::zero();
        loop {
            // The next line to take over: the earliest crossing after t among lines
            // with a smaller slope.
            let mut best: Option<(Q, &(Q, Q))> = None;
            for l in lines.iter().filter(|l| l.0 < cur.0) {
                // cur.0 t + cur.1 = l.0 t + l.1  →  t = (l.1 − cur.1) / (cur.0 − l.0)
                let x = (&l.1 - &cur.1) / (&cur.0 - &l.0);
                let x = if x < t { t.clone() } else { x };
                let better = match &best {
                    None => true,
                    Some((bx, bl)) => x < *bx || (x == *bx && l.0 < bl.0),
                };
                if better {
                    best = Some((x, l));
                }
            }
            let Some((x, l)) = best else { break };
            let l = l.clone();
            let y = &l.0 * &x + &l.1;
            if x == t {
                let last = pts.len() - 1;
                pts[last].1 = y;
                slopes[last] = l.0.clone();
            } else {
                pts.push((x.clone(), y));
                slopes.push(l.0.clone());
            }
            t = x;
            cur = l;
        }
        Curve::normalised(pts, slopes)
    }

    /// `α(t + d)` for `t > 0`: the arrival curve of a flow's output after a server that
    /// delays every bit by at most `d` (total flow analysis through a FIFO server).
    pub fn shift(&self, d: &Q) -> Curve {
        let mut out = Curve::scratch();
        self.shift_into(d, &mut out);
        out
    }

    /// A curve with no points, only to be written into by [`Curve::shift_into`].
    pub(crate) fn scratch() -> Curve {
        Curve {
            pts: Vec::new(),
            slopes: Vec::new(),
        }
    }

    /// [`Curve::shift`] written into `out`, reusing its buffers (whatever it held
    /// before is replaced).
    pub(crate) fn shift_into(&self, d: &Q, out: &mut Curve) {
        out.pts.clear();
        out.slopes.clear();
        if !d.is_positive() {
            out.pts.extend_from_slice(&self.pts);
            out.slopes.extend_from_slice(&self.slopes);
            return;
        }
        let i = self.piece(d);
        let (pt, py) = &self.pts[i];
        let at_d = if pt.is_zero() {
            py + &(&self.slopes[i] * d)
        } else {
            py + &(&self.slopes[i] * &(d - pt))
        };
        out.pts.push((Q::zero(), at_d));
        out.slopes.push(self.slopes[i].clone());
        for k in i + 1..self.pts.len() {
            let (t, y) = &self.pts[k];
            out.pts.push((t - d, y.clone()));
            out.slopes.push(self.slopes[k].clone());
        }
        // Still canonical: the slopes are a tail of this curve's (strictly
        // decreasing) and the later points stay after 0, so no normalisation.
    }

    /// The first point from which the slope is at most `rate`, as an index.
    fn first_slope_at_most(&self, rate: &Q) -> Option<usize> {
        // Slopes decrease: binary search for the first index with slope <= rate.
        let i = self.slopes.partition_point(|s| s > rate);
        (i < self.slopes.len()).then_some(i)
    }

    /// `sup_{0 ≤ u ≤ len} α(t + u) − rate·u`: deconvolution by one finite piece of a
    /// convex service curve.
    fn deconv_piece(&self, len: &Q, rate: &Q) -> Curve {
        let k = self.first_slope_at_most(rate);
        let tr = match k {
            Some(k) => self.pts[k].0.clone(),
            None => {
                // Steeper than `rate` everywhere: the best u is always `len`.
                let shifted = self.shift(len);
                return shifted.add_const(&-(rate * len));
            }
        };
        if tr.is_zero() {
            return self.clone();
        }
        let yr = self.eval(&tr);
        let mut pts = Vec::new();
        let mut slopes = Vec::new();
        if &tr > len {
            // t in [0, tr − len): α(t + len) − rate·len.
            let start = &tr - len;
            let first = self.shift(len);
            let off = -(rate * len);
            for (p, s) in first.pts.iter().zip(first.slopes.iter()) {
                if p.0 >= start {
                    break;
                }
                pts.push((p.0.clone(), &p.1 + &off));
                slopes.push(s.clone());
            }
            pts.push((start, &yr - &(rate * len)));
        } else {
            pts.push((Q::zero(), &yr - &(rate * &tr)));
        }
        slopes.push(rate.clone());
        // From tr on: α itself.
        let k = k.unwrap_or(0);
        for idx in k..self.pts.len() {
            pts.push(self.pts[idx].clone());
            slopes.push(self.slopes[idx].clone());
        }
        Curve::normalised(pts, slopes)
    }

    fn add_const(&self, c: &Q) -> Curve {
        Curve {
            pts: self.pts.iter().map(|(t, y)| (t.clone(), y + c)).collect(),
            slopes: self.slopes.clone(),
        }
    }

    /// `sup_{u ≥ 0} α(t + u) − rate·u`; `None` if the curve grows faster than `rate`.
    fn deconv_rate(&self, rate: &Q) -> Option<Curve> {
        let k = self.first_slope_at_most(rate)?;
        if k == 0 {
            return Some(self.clone());
        }
        let (tr, yr) = &self.pts[k];
        let mut pts = vec![(Q::zero(), yr - &(rate * tr))];
        let mut slopes = vec![rate.clone()];
        pts.extend(self.pts[k..].iter().cloned());
        slopes.extend(self.slopes[k..].iter().cloned());
        Some(Curve::normalised(pts, slopes))
    }

    /// The output arrival curve `α ⊘ β` of a flow with arrival curve `α` served with
    /// service curve `β`; `None` if `α`'s long-term rate exceeds `β`'s.
    pub fn deconvolve(&self, beta: &Service) -> Option<Curve> {
        let mut a = self.shift(&beta.latency);
        for (len, rate) in &beta.segs {
            a = a.deconv_piece(len, rate);
        }
        a.deconv_rate(&beta.rate)
    }
}

/// A service curve that is 0 on `[0, latency]`, jumps to `jump ≥ 0` right after the
/// latency, then grows convexly: pieces `(duration, rate)` with strictly increasing
/// rates (the first may be 0: a flat stretch), then `rate` forever (above every
/// piece's). Without a jump this is a convex curve; rate-latency `R (t − T)+` is the
/// simplest. The jump comes from the FIFO residual service (the cross traffic that
/// arrived more than θ before cannot delay the flow), see [`Service::fifo_residual`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Service {
    latency: Q,
    jump: Q,
    segs: Vec<(Q, Q)>,
    rate: Q,
}

impl Service {
    /// Rate-latency `β(t) = R (t − T)+`. `R > 0`, `T ≥ 0`.
    pub fn rate_latency(rate: Q, latency: Q) -> Service {
        Service {
            latency,
            jump: Q::zero(),
            segs: Vec::new(),
            rate,
        }
    }
    pub fn latency(&self) -> &Q {
        &self.latency
    }
    /// `β(latency+)`.
    pub fn jump(&self) -> &Q {
        &self.jump
    }
    /// The long-term rate.
    pub fn rate(&self) -> &Q {
        &self.rate
    }
    /// The finite pieces `(duration, rate)` after the latency.
    pub fn pieces(&self) -> &[(Q, Q)] {
        &self.segs
    }
    /// Whether the curve is rate-latency.
    pub fn is_rate_latency(&self) -> bool {
        self.segs.is_empty() && self.jump.is_zero()
    }

    /// `β(t)`.
    pub fn eval(&self, t: &Q) -> Q {
        if t <= &self.latency {
            return Q::zero();
        }
        let mut at = self.latency.clone();
        let mut y = self.jump.clone();
        for (len, rate) in &self.segs {
            let end = &at + len;
            if t <= &end {
                return &y + &(rate * &(t - &at));
            }
            y = &y + &(rate * len);
            at = end;
        }
        &y + &(&self.rate * &(t - &at))
    }

    /// `inf{t : β(t) > y}` for `y ≥ 0`: when a bit that needs `y` of service is
    /// surely served (the right limit of the pseudo-inverse, which is what a delay
    /// bound needs).
    pub fn inverse(&self, y: &Q) -> Q {
        if y < &self.jump {
            return self.latency.clone();
        }
        let z = y - &self.jump;
        let mut at = self.latency.clone();
        let mut acc = Q::zero();
        for (len, rate) in &self.segs {
            let top = &acc + &(rate * len);
            if z < top {
                return &at + &((&z - &acc) / rate);
            }
            acc = top;
            at = &at + len;
        }
        &at + &((&z - &acc) / &self.rate)
    }

    /// The breakpoints `(t, β(t+))`, starting with `(latency, jump)`.
    pub fn breakpoints(&self) -> Vec<(Q, Q)> {
        let mut out = vec![(self.latency.clone(), self.jump.clone())];
        let mut at = self.latency.clone();
        let mut acc = self.jump.clone();
        for (len, rate) in &self.segs {
            at = &at + len;
            acc = &acc + &(rate * len);
            out.push((at.clone(), acc.clone()));
        }
        out
    }

    /// Min-plus convolution `β1 ⊗ β2`: the service of two servers in sequence. The
    /// convex parts convolve exactly (pieces sorted by rate, cut at the smaller
    /// long-term rate: `β_{min R, T1 + T2}` for rate-latency curves); of two jumps the
    /// smaller is kept, a lower bound of the exact result.
    pub fn convolve(&self, other: &Service) -> Service {
        let rate = self.rate.clone().min(other.rate.clone());
        let mut segs: Vec<(Q, Q)> = self
            .segs
            .iter()
            .chain(other.segs.iter())
            .filter(|(_, r)| r < &rate)
            .cloned()
            .collect();
        segs.sort_by(|a, b| a.1.cmp(&b.1));
        Service {
            latency: &self.latency + &other.latency,
            jump: self.jump.clone().min(other.jump.clone()),
            segs,
            rate,
        }
        .normalised()
    }

    fn normalised(mut self) -> Service {
        // Merge equal-rate neighbours, drop a last piece at the final rate, turn a
        // leading flat piece without a jump into latency.
        let mut merged: Vec<(Q, Q)> = Vec::with_capacity(self.segs.len());
        for (len, r) in self.segs.drain(..) {
            if !len.is_positive() {
                continue;
            }
            match merged.last_mut() {
                Some(last) if last.1 == r => last.0 = &last.0 + &len,
                _ => merged.push((len, r)),
            }
        }
        while merged.last().is_some_and(|l| l.1 == self.rate) {
            merged.pop();
        }
        if self.jump.is_zero() && merged.first().is_some_and(|f| f.1.is_zero()) {
            let (len, _) = merged.remove(0);
            self.latency = &self.latency + &len;
        }
        self.segs = merged;
        self
    }

    /// The lower non-decreasing closure of `max(0, φ(s))` placed after `offset`, where
    /// `φ(s) = R s + k − a(s)` for `s > 0` (right limit at 0), `a` concave: 0 up to
    /// `offset`, then `inf_{u ≥ s} max(0, φ(u))`. `φ` is convex, so this is a jump to
    /// its minimum (when positive), flat until the minimum, then `φ`; or, when the
    /// minimum is negative, 0 until `φ`'s last zero, then `φ`. `None` when `a` grows
    /// at least as fast as `R` forever (nothing left).
    fn closure_after(rate: &Q, k: &Q, a: &Curve, offset: &Q) -> Option<Service> {
        if a.rate() >= rate {
            return None;
        }
        // First point from which a's slope is at most R: φ's minimum.
        let first = a.slopes.partition_point(|s| s > rate);
        let phi = |idx: usize| -> Q {
            let (t, y) = &a.pts[idx];
            &(&(rate * t) + k) - y
        };
        let mut idx = first;
        let m = phi(idx);
        let (start, jump) = if !m.is_negative() {
            (a.pts[idx].0.clone(), m)
        } else {
            // Walk up the increasing part to φ's zero.
            let mut v = m;
            loop {
                let sigma = rate - &a.slopes[idx];
                let next = a.pts.get(idx + 1).map(|p| p.0.clone());
                if sigma.is_positive() {
                    let cross = &a.pts[idx].0 + &((-&v) / &sigma);
                    match &next {
                        Some(n) if &cross > n => {}
                        _ => break (cross, Q::zero()),
                    }
                }
                match next {
                    Some(_) => {
                        idx += 1;
                        v = phi(idx);
                    }
                    // Unreachable: the last slope is below R.
                    None => break (a.pts[idx].0.clone(), Q::zero()),
                }
            }
        };
        let mut segs = Vec::new();
        let flat = &start - &Q::zero();
        let flat_len = if jump.is_positive() { flat } else { Q::zero() };
        // With a positive minimum the curve is flat from 0 to the minimum.
        if flat_len.is_positive() {
            segs.push((flat_len, Q::zero()));
        }
        let mut at = start.clone();
        let mut p = a.piece(&start);
        while p + 1 < a.pts.len() {
            let end = &a.pts[p + 1].0;
            let len = end - &at;
            if len.is_positive() {
                segs.push((len, rate - &a.slopes[p]));
            }
            at = end.clone();
            p += 1;
        }
        let last_rate = rate - &a.slopes[p];
        let latency = if jump.is_positive() {
            offset.clone()
        } else {
            offset + &start
        };
        Some(
            Service {
                latency,
                jump,
                segs,
                rate: last_rate,
            }
            .normalised(),
        )
    }

    /// Residual service curve of a flow at a server that serves its aggregate with
    /// `R (t − T)+` under **arbitrary (blind) multiplexing**, the other flows having
    /// arrival curve `cross`: `[β − α_cross]+`, made non-decreasing (Le Boudec & Thiran,
    /// Thm 6.2.1; needs a strict service curve). For a token bucket `(r, b)` of cross
    /// traffic this is `(R − r) (t − (R T + b)/(R − r))+`.
    pub fn arbitrary_residual(rate: &Q, latency: &Q, cross: &Curve) -> Option<Service> {
        // For t ≥ T: R (t − T) − a(t) = R s + (−R T)·0 ... with s = t: write it as
        // φ(t) = R t − R T − a(t), offset 0, and clamp to t ≥ T (φ(T) = −a(T) ≤ 0, so
        // the closure is 0 up to T anyway).
        let k = -(rate * latency);
        let s = Service::closure_after(rate, &k, cross, &Q::zero())?;
        // φ ≤ 0 on [0, T] because a ≥ 0; a jump cannot occur unless a(0+) = 0 and
        // T = 0, where it is 0.
        Some(s)
    }

    /// Residual service curve under **FIFO** multiplexing for one θ ≥ T: the lower
    /// non-decreasing closure of `β_θ(t) = [β(t) − α_cross(t − θ)]+ 1{t > θ}`
    /// (Le Boudec & Thiran, Prop 6.2.1: a FIFO server offers `β_θ` to a flow for every
    /// θ; the closure is below it and non-decreasing). With `φ(s) = R (s + θ − T) −
    /// α_cross(s)` it is 0 up to θ, then the closure of `max(0, φ)`.
    pub fn fifo_residual_theta(rate: &Q, latency: &Q, cross: &Curve, theta: &Q) -> Option<Service> {
        let k = rate * &(theta - latency);
        Service::closure_after(rate, &k, cross, theta)
    }

    /// The FIFO residual with `θ = T + α_cross(0+)/R`, the largest θ without a jump
    /// (it dominates every smaller θ). For token-bucket cross traffic `(r, b)` this is
    /// the classic `β_{R − r, T + b/R}`; a T-SPEC's peak rate makes it start earlier.
    pub fn fifo_residual(rate: &Q, latency: &Q, cross: &Curve) -> Option<Service> {
        let theta = latency + &(cross.burst() / rate);
        Service::fifo_residual_theta(rate, latency, cross, &theta)
    }

    /// The classic FIFO residual for token-bucket cross traffic (Le Boudec & Thiran,
    /// Cor 6.2.3): `β_{R − r, T + b/R}` with `(r, b)` the token-bucket envelope of
    /// `cross` (the member of the family with `θ = T + b/R`). This is the one the
    /// separated flow analysis uses: it only shrinks when cross traffic grows, so a
    /// flow's bound never falls when another flow is admitted (choosing θ per
    /// configuration, e.g. to exploit the cross traffic's peak rate, can give smaller
    /// bounds but loses that property, and then removing a flow could break another
    /// flow's deadline). `None` when the cross traffic takes the whole rate.
    pub fn fifo_residual_token_bucket(rate: &Q, latency: &Q, cross: &Curve) -> Option<Service> {
        let (r, b) = cross.token_bucket_envelope();
        Service::fifo_residual_token_bucket_of(rate, latency, &r, &b)
    }

    /// [`Service::fifo_residual_token_bucket`] from the cross traffic's token bucket
    /// `(r, b)` itself.
    pub fn fifo_residual_token_bucket_of(rate: &Q, latency: &Q, r: &Q, b: &Q) -> Option<Service> {
        let left = rate - r;
        if !left.is_positive() {
            return None;
        }
        Some(Service::rate_latency(left, latency + &(b / rate)))
    }
}

/// What a FIFO server with service `R (t − T)+` needs of the sum of its members'
/// arrival curves, found without building that sum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FifoAggregate {
    /// Token-bucket envelope of each member (`(r_k, b_k)`, in the order given).
    pub envelopes: Vec<(Q, Q)>,
    /// Their sums: the aggregate's envelope `(Σ r_k, Σ b_k)`.
    pub rate: Q,
    pub burst: Q,
    /// `h(Σα, β)`, equal to [`delay_bound`] of the sum.
    pub delay: Q,
    /// `v(Σα, β)`, equal to [`backlog_bound`] of the sum.
    pub backlog: Q,
}

/// [`FifoAggregate`] of `curves` against `R (t − T)+`; `None` when unbounded (the
/// long-term rates add up to more than `R`).
///
/// Both deviations of a concave curve against a rate-latency curve peak at the first
/// time `t*` from which the sum's slope is at most `R` (see
/// [`delay_bound_rate_latency`]). The sum's slope only changes at the members'
/// breakpoints, so `t*` is found by walking those in time order adding up slope
/// changes (rates: cheap), and the sum is evaluated only at `t*` (and at `T`): the
/// values are exactly those of the built curve.
pub fn fifo_aggregate(curves: &[&Curve], rate: &Q, latency: &Q) -> Option<FifoAggregate> {
    let mut envelopes = Vec::with_capacity(curves.len());
    let (mut agg_r, mut agg_b) = (Q::zero(), Q::zero());
    for curve in curves {
        let env = curve.token_bucket_envelope();
        agg_r = &agg_r + &env.0;
        agg_b = &agg_b + &env.1;
        envelopes.push(env);
    }
    let (delay, backlog) = fifo_deviations(curves, rate, latency, &agg_r, &agg_b)?;
    Some(FifoAggregate {
        envelopes,
        rate: agg_r,
        burst: agg_b,
        delay,
        backlog,
    })
}

/// `h(Σα, β)` and `v(Σα, β)` of [`fifo_aggregate`] when the sums of the members'
/// token-bucket envelopes, `agg_r = Σ r_k` and `agg_b = Σ b_k`, are known already
/// (the admission keeps them up to date in closed form); `None` when unbounded.
pub fn fifo_deviations(
    curves: &[&Curve],
    rate: &Q,
    latency: &Q,
    agg_r: &Q,
    agg_b: &Q,
) -> Option<(Q, Q)> {
    if agg_r > rate {
        return None;
    }
    let t_star = first_time_slope_at_most(curves, rate)?;
    // Σ α_k(t): members already in their last piece at t (every token bucket) are
    // on their envelope, whose sum is known; only the others are evaluated.
    let sum_at = |t: &Q| -> Q {
        let mut y = agg_b + &(agg_r * t);
        for curve in curves {
            let last = &curve.pts[curve.pts.len() - 1].0;
            if last > t {
                let (r, b) = curve.token_bucket_envelope();
                y = &y + &(&curve.eval(t) - &(&b + &(&r * t)));
            }
        }
        y
    };
    let y_star = sum_at(&t_star);
    let delay = (latency + &(&y_star / rate) - &t_star).max(Q::zero());
    let backlog = if &t_star > latency {
        &y_star - &(rate * &(&t_star - latency))
    } else {
        sum_at(latency)
    }
    .max(Q::zero());
    Some((delay, backlog))
}

/// The first time from which the sum of `curves` has a slope of at most `rate`
/// (`None` if never): the members' slope changes walked in time order.
fn first_time_slope_at_most(curves: &[&Curve], rate: &Q) -> Option<Q> {
    let mut slope = Q::zero();
    let mut events: Vec<(&Q, usize, usize)> = Vec::new();
    for (c, curve) in curves.iter().enumerate() {
        slope = &slope + curve.peak();
        for k in 1..curve.pts.len() {
            events.push((&curve.pts[k].0, c, k));
        }
    }
    if &slope <= rate {
        return Some(Q::zero());
    }
    events.sort_by(|a, b| a.0.cmp(b.0));
    let mut i = 0;
    loop {
        // Every event is a slope change of one member; all those at one time first.
        let (t, _, _) = *events.get(i)?;
        while let Some(&(u, c, k)) = events.get(i) {
            if u != t {
                break;
            }
            let curve = curves[c];
            slope = &(&slope + &curve.slopes[k]) - &curve.slopes[k - 1];
            i += 1;
        }
        if &slope <= rate {
            return Some(t.clone());
        }
    }
}

/// Delay bound: the horizontal deviation `h(α, β) = sup_t inf{d ≥ 0 : α(t) ≤ β(t + d)}`
/// between a concave arrival curve and a service curve of this module; `None` when
/// unbounded (the arrival rate exceeds the service rate).
pub fn delay_bound(alpha: &Curve, beta: &Service) -> Option<Q> {
    if beta.is_rate_latency() {
        return delay_bound_rate_latency(alpha, &beta.rate, &beta.latency);
    }
    delay_bound_general(alpha, beta)
}

/// [`delay_bound`] against `R (t − T)+`: `d(t) = T + α(t)/R − t` is concave, so its
/// maximum is at the first breakpoint of `α` from which `α`'s slope is at most `R`
/// (the same value the general search finds, with one division instead of one per
/// breakpoint).
pub fn delay_bound_rate_latency(alpha: &Curve, rate: &Q, latency: &Q) -> Option<Q> {
    Some((latency + &delay_offset_rate_latency(alpha, rate)?).max(Q::zero()))
}

/// The part of [`delay_bound_rate_latency`] that does not depend on the latency:
/// the bound is `max(0, T + offset)` with `offset = α(t)/R − t` at that breakpoint.
pub fn delay_offset_rate_latency(alpha: &Curve, rate: &Q) -> Option<Q> {
    let k = alpha.first_slope_at_most(rate)?;
    let (t, y) = &alpha.pts[k];
    Some(&(y / rate) - t)
}

fn delay_bound_general(alpha: &Curve, beta: &Service) -> Option<Q> {
    if alpha.rate() > beta.rate() {
        return None;
    }
    // d(t) = β⁻¹(α(t)) − t is linear between the candidates: 0+, the breakpoints of
    // α, and the times α reaches the value of a breakpoint of β.
    let d = |t: &Q, y: &Q| &beta.inverse(y) - t;
    let mut best = d(&Q::zero(), alpha.burst());
    for (t, y) in alpha.points().iter().skip(1) {
        best = best.max(d(t, y));
    }
    for (_, y) in beta.breakpoints() {
        if &y >= alpha.burst() {
            if let Some(t) = alpha.inverse(&y) {
                best = best.max(d(&t, &y));
            }
        }
    }
    Some(best.max(Q::zero()))
}

/// Backlog bound: the vertical deviation `v(α, β) = sup_t α(t) − β(t)`; `None` when
/// unbounded.
pub fn backlog_bound(alpha: &Curve, beta: &Service) -> Option<Q> {
    if beta.is_rate_latency() {
        return backlog_bound_rate_latency(alpha, &beta.rate, &beta.latency);
    }
    backlog_bound_general(alpha, beta)
}

/// [`backlog_bound`] against `R (t − T)+`: `α(t) − β(t)` grows up to `T`, and after
/// `T` it is concave with its maximum at the first breakpoint where `α`'s slope is at
/// most `R`, or at `T` itself when that breakpoint comes earlier.
pub fn backlog_bound_rate_latency(alpha: &Curve, rate: &Q, latency: &Q) -> Option<Q> {
    let k = alpha.first_slope_at_most(rate)?;
    let (t, y) = &alpha.pts[k];
    let v = if t > latency {
        y - &(rate * &(t - latency))
    } else {
        alpha.eval(latency)
    };
    Some(v.max(Q::zero()))
}

fn backlog_bound_general(alpha: &Curve, beta: &Service) -> Option<Q> {
    if alpha.rate() > beta.rate() {
        return None;
    }
    let v = |t: &Q| &alpha.eval(t) - &beta.eval(t);
    let mut best = alpha.burst().clone();
    for (t, _) in alpha.points().iter().skip(1) {
        best = best.max(v(t));
    }
    for (t, _) in beta.breakpoints() {
        best = best.max(v(&t));
    }
    Some(best.max(Q::zero()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i128, d: i128) -> Q {
        Q::ratio(n, d).unwrap()
    }
    fn i(n: i64) -> Q {
        Q::int(n)
    }

    #[test]
    fn tspec_has_its_inflection_point() {
        // min(10t + 2, 1t + 20): 10t + 2 = t + 20 at t = 2, value 22.
        let a = Curve::tspec(i(10), i(2), i(1), i(20));
        assert_eq!(a.points(), &[(i(0), i(2)), (i(2), i(22))]);
        assert_eq!(a.slopes(), &[i(10), i(1)]);
        assert_eq!(a.eval(&i(1)), i(12));
        assert_eq!(a.eval(&i(4)), i(24));
        assert_eq!(a.inverse(&i(12)), Some(i(1)));
        assert_eq!(a.inverse(&i(24)), Some(i(4)));
        assert_eq!(a.inverse(&i(1)), Some(i(0)));
        // b = M: a token bucket.
        assert!(Curve::tspec(i(10), i(5), i(1), i(5)).is_token_bucket());
        assert_eq!(a.token_bucket_envelope(), (i(1), i(20)));
    }

    #[test]
    fn sum_and_minus() {
        let a = Curve::tspec(i(10), i(2), i(1), i(20)); // break at 2
        let b = Curve::tspec(i(10), i(1), i(2), i(9)); // 10t+1 = 2t+9 at t = 1, value 11
        let s = a.add(&b);
        // 0+: 3, slope 20 to t=1 (23), slope 12 to t=2 (35), then 3.
        assert_eq!(s.points(), &[(i(0), i(3)), (i(1), i(23)), (i(2), i(35))]);
        assert_eq!(s.slopes(), &[i(20), i(12), i(3)]);
        assert_eq!(s.minus(&b), a);
        assert_eq!(s.minus(&a), b);
        assert_eq!(s.minus(&a).minus(&b), Curve::zero());
        assert_eq!(Curve::sum([&a, &b, &Curve::zero()]), s);
    }

    #[test]
    fn shift_and_deconvolution() {
        let a = Curve::tspec(i(10), i(2), i(1), i(20));
        // α(t + 1) = min(10t + 12, t + 21): break at t = 1.
        assert_eq!(a.shift(&i(1)), Curve::tspec(i(10), i(12), i(1), i(21)));
        // Past the inflection point: a token bucket (1, 20 + 3).
        assert_eq!(a.shift(&i(3)), Curve::token_bucket(i(1), i(23)));
        // α ⊘ β_{R=4,T=1}: slope drops to <= 4 at t = 2 (value 22); for t + 1 >= 2 it
        // is α(t + 1); before, the line of slope 4 through (1, 22): 18 + 4t.
        // So min(4t + 18, t + 21): break at t = 1.
        let out = a.deconvolve(&Service::rate_latency(i(4), i(1))).unwrap();
        assert_eq!(out, Curve::tspec(i(4), i(18), i(1), i(21)));
        // A server slower than the flow's long-term rate: unbounded.
        assert_eq!(a.deconvolve(&Service::rate_latency(q(1, 2), i(0))), None);
        // Token bucket through rate-latency: (r, b + r T).
        let tb = Curve::token_bucket(i(2), i(5));
        assert_eq!(
            tb.deconvolve(&Service::rate_latency(i(10), i(3))).unwrap(),
            Curve::token_bucket(i(2), i(11))
        );
    }

    #[test]
    fn deconvolution_by_a_convex_piece() {
        // α = min(10t + 2, t + 20) (break at 2, value 22); β: latency 0, 1 time unit
        // at rate 4, then rate 8.
        // ⊘ piece (1, 4): slope <= 4 from t_r = 2: t >= 2: α; t in [1, 2): 22 − 4(2 − t);
        // t < 1: α(t + 1) − 4 = 10t + 8.
        // then ⊘ rate 8: slope <= 8 from t = 1 (value 18): 10 + 8t before... the curve
        // after the piece is: 0+: 8, slope 10 to t=1 (18), slope 4 to t=2 (22), slope 1.
        // ⊘ 8: first slope <= 8 at t=1 (18): line 8t + 10 until 1, then as before.
        let a = Curve::tspec(i(10), i(2), i(1), i(20));
        let beta = Service {
            latency: i(0),
            jump: i(0),
            segs: vec![(i(1), i(4))],
            rate: i(8),
        };
        let out = a.deconvolve(&beta).unwrap();
        assert_eq!(out.points(), &[(i(0), i(10)), (i(1), i(18)), (i(2), i(22))]);
        assert_eq!(out.slopes(), &[i(8), i(4), i(1)]);
    }

    #[test]
    fn min_of_curves() {
        let a = Curve::token_bucket(i(10), i(2));
        let b = Curve::token_bucket(i(1), i(20));
        assert_eq!(a.min(&b), Curve::tspec(i(10), i(2), i(1), i(20)));
        // A dominated line disappears.
        let c = Curve::token_bucket(i(5), i(30));
        assert_eq!(a.min(&b).min(&c), a.min(&b));
        // Same burst, smaller slope wins at once.
        assert_eq!(
            a.min(&Curve::token_bucket(i(1), i(2))),
            Curve::token_bucket(i(1), i(2))
        );
    }

    #[test]
    fn delay_and_backlog_of_a_rate_latency_server() {
        // Token bucket (r=1, b=10) into R=5, T=2: delay T + b/R = 4, backlog b + rT = 12.
        let tb = Curve::token_bucket(i(1), i(10));
        let beta = Service::rate_latency(i(5), i(2));
        assert_eq!(delay_bound(&tb, &beta), Some(i(4)));
        assert_eq!(backlog_bound(&tb, &beta), Some(i(12)));
        // With a peak rate C=10, M=2: α = min(10t + 2, t + 10), break at 8/9, value
        // 98/9. The delay peaks at the break: β⁻¹(98/9) − 8/9 = 2 + 98/45 − 8/9 =
        // (90 + 98 − 40)/45 = 148/45. Backlog peaks at T = 2 (past the break):
        // α(2) = 12.
        let ts = Curve::tspec(i(10), i(2), i(1), i(10));
        assert_eq!(delay_bound(&ts, &beta), Some(q(148, 45)));
        assert_eq!(backlog_bound(&ts, &beta), Some(i(12)));
        // Unstable.
        assert_eq!(delay_bound(&Curve::token_bucket(i(6), i(1)), &beta), None);
        // Zero traffic: no delay at all beyond... the latency is the bound for an
        // infinitesimal bit.
        assert_eq!(delay_bound(&Curve::zero(), &beta), Some(i(2)));
    }

    #[test]
    fn rate_latency_shortcuts_equal_the_general_search() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..2000 {
            let n = rng.gen_range(0..6);
            let curves: Vec<Curve> = (0..n)
                .map(|_| {
                    let r = i(rng.gen_range(0..20));
                    let m = q(rng.gen_range(0..50), rng.gen_range(1..4));
                    let c = &r + &i(rng.gen_range(0..40));
                    let b = &m + &q(rng.gen_range(0..100), rng.gen_range(1..7));
                    Curve::tspec(c, m, r, b)
                })
                .collect();
            let a = Curve::sum(curves.iter());
            let rate = i(rng.gen_range(1..120));
            let lat = q(rng.gen_range(0..30), rng.gen_range(1..5));
            let beta = Service::rate_latency(rate.clone(), lat.clone());
            assert_eq!(
                delay_bound_rate_latency(&a, &rate, &lat),
                delay_bound_general(&a, &beta),
                "{a:?} {beta:?}"
            );
            assert_eq!(
                backlog_bound_rate_latency(&a, &rate, &lat),
                backlog_bound_general(&a, &beta),
                "{a:?} {beta:?}"
            );
        }
    }

    #[test]
    fn fifo_aggregate_equals_the_built_sum() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for _ in 0..2000 {
            let n = rng.gen_range(0..7);
            let curves: Vec<Curve> = (0..n)
                .map(|_| {
                    let r = i(rng.gen_range(0..6));
                    let m = q(rng.gen_range(0..50), rng.gen_range(1..4));
                    let c = &r + &i(rng.gen_range(0..40));
                    let b = &m + &q(rng.gen_range(0..100), rng.gen_range(1..7));
                    let a = Curve::tspec(c, m, r, b);
                    // Some already moved downstream.
                    match rng.gen_range(0..3) {
                        0 => a.shift(&q(rng.gen_range(0..20), rng.gen_range(1..9))),
                        _ => a,
                    }
                })
                .collect();
            let refs: Vec<&Curve> = curves.iter().collect();
            let rate = i(rng.gen_range(1..60));
            let lat = q(rng.gen_range(0..30), rng.gen_range(1..5));
            let sum = Curve::sum(curves.iter());
            let beta = Service::rate_latency(rate.clone(), lat.clone());
            let got = fifo_aggregate(&refs, &rate, &lat);
            match delay_bound_general(&sum, &beta) {
                None => assert_eq!(got, None),
                Some(d) => {
                    let got = got.unwrap();
                    assert_eq!(got.delay, d);
                    assert_eq!(Some(got.backlog), backlog_bound_general(&sum, &beta));
                    assert_eq!((got.rate, got.burst), sum.token_bucket_envelope());
                }
            }
        }
    }

    #[test]
    fn convolution_of_servers() {
        let a = Service::rate_latency(i(5), i(2));
        let b = Service::rate_latency(i(3), i(1));
        assert_eq!(a.convolve(&b), Service::rate_latency(i(3), i(3)));
        let c = Service {
            latency: i(1),
            jump: i(0),
            segs: vec![(i(2), i(1)), (i(1), i(4))],
            rate: i(6),
        };
        // Pieces sorted by rate, cut at min(6, 5) = 5: (2, 1), (1, 4), then 5.
        let ac = a.convolve(&c);
        assert_eq!(ac.latency(), &i(3));
        assert_eq!(ac.pieces(), &[(i(2), i(1)), (i(1), i(4))]);
        assert_eq!(ac.rate(), &i(5));
        // Cut at 3: only the rate-1 piece survives.
        let bc = b.convolve(&c);
        assert_eq!(bc.pieces(), &[(i(2), i(1))]);
        assert_eq!(bc.rate(), &i(3));
        assert_eq!(c.eval(&i(4)), i(2 + 4));
        assert_eq!(c.inverse(&i(6)), i(4));
        assert_eq!(c.inverse(&i(0)), i(1));
    }

    #[test]
    fn residual_service_curves() {
        let (r, t) = (i(10), i(1));
        let cross = Curve::token_bucket(i(4), i(20));
        // Arbitrary: (R − r)(t − (R T + b)/(R − r))+ = 6 (t − 30/6)+ = 6 (t − 5)+.
        assert_eq!(
            Service::arbitrary_residual(&r, &t, &cross).unwrap(),
            Service::rate_latency(i(6), i(5))
        );
        // FIFO: β_{R − r, T + b/R} = 6 (t − 3)+.
        assert_eq!(
            Service::fifo_residual(&r, &t, &cross).unwrap(),
            Service::rate_latency(i(6), i(3))
        );
        // Nothing crossing: the server itself.
        assert_eq!(
            Service::fifo_residual(&r, &t, &Curve::zero()).unwrap(),
            Service::rate_latency(r.clone(), t.clone())
        );
        assert_eq!(
            Service::arbitrary_residual(&r, &t, &Curve::zero()).unwrap(),
            Service::rate_latency(r.clone(), t.clone())
        );
        // Cross traffic with a peak rate: min(20 s + 2, 4 s + 20), break at s = 9/8
        // (value 24.5). FIFO: θ = 1 + 2/10 = 6/5; f(s) = 10 s − (α(s) − 2):
        // s < 9/8: −10 s (negative); s ≥ 9/8: 10 s − 22.5 − 4 (s − 9/8) = 6 s − 18;
        // zero at s = 3 → latency 6/5 + 3 = 21/5, then rate 6.
        let peaky = Curve::tspec(i(20), i(2), i(4), i(20));
        assert_eq!(
            Service::fifo_residual(&r, &t, &peaky).unwrap(),
            Service::rate_latency(i(6), q(21, 5))
        );
        // Arbitrary: f(t) = 10(t − 1) − α(t): at t = 1: −22 (α(1) = 22);
        // on [1, 9/8] slope −10; after: 10 t − 10 − 24.5 − 4(t − 9/8) = 6t − 30;
        // zero at 5 → 6 (t − 5)+ (the peak does not help blind multiplexing here).
        assert_eq!(
            Service::arbitrary_residual(&r, &t, &peaky).unwrap(),
            Service::rate_latency(i(6), i(5))
        );
        // Cross traffic slower than R at first: residual with two rates.
        // cross = min(2 s + 1, 1 s + 3)... slopes 2 then 1, break at s = 2 (value 5).
        // FIFO with R = 10, T = 0: θ = 1/10; f(s) = 10 s − (α(s) − 1):
        // s ≤ 2: 8 s; after: 10 s − (s + 2) = 9 s − 2. Latency 1/10, rate 8 for 2,
        // then 9.
        let slow = Curve::tspec(i(2), i(1), i(1), i(3));
        let res = Service::fifo_residual(&r, &i(0), &slow).unwrap();
        assert_eq!(res.latency(), &q(1, 10));
        assert_eq!(res.pieces(), &[(i(2), i(8))]);
        assert_eq!(res.rate(), &i(9));
        // The token-bucket closed form ignores the cross traffic's peak:
        // envelope (4, 20) → 6 (t − 3)+.
        assert_eq!(
            Service::fifo_residual_token_bucket(&r, &t, &peaky).unwrap(),
            Service::rate_latency(i(6), i(3))
        );
        // θ = T + b/R = 3 on the T-SPEC itself: φ(s) = 10 s + 20 − α(s) = 18 − 10 s
        // until 9/8 (6.75), then 6 s: its minimum 6.75 is the jump, flat for 9/8,
        // then rate 6: better than the closed form, which it lies above.
        let th = Service::fifo_residual_theta(&r, &t, &peaky, &i(3)).unwrap();
        assert_eq!(th.latency(), &i(3));
        assert_eq!(th.jump(), &q(27, 4));
        assert_eq!(th.pieces(), &[(q(9, 8), i(0))]);
        assert_eq!(th.rate(), &i(6));
        // Saturated: no residual.
        assert_eq!(
            Service::fifo_residual(&r, &t, &Curve::token_bucket(i(10), i(1))),
            None
        );
    }
}
