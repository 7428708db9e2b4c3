//! The TDP frame allocator: which frames of the cycle a flow reserves on every link of
//! its path. The planner ([`crate::plan::schedule`]) books a scenario's flows with it,
//! and `lockstep ctl` admits flows into a running network's schedule with it.
//!
//! A [`FrameBook`] holds the directional links (output ports) of a network, each with
//! the bits one time-frame carries on it (`(TF − guard) × rate`), and how many of them
//! are booked in each of the `k` frames of the cycle. A flow is a [`Request`]: its hops
//! in path order (a link and the frames after the start frame at which the packet
//! crosses it), the bits one packet takes on the wire of each hop, the packets it sends
//! per reserved frame and the frames it reserves per cycle (`n`). Placing it chooses
//! `n` start frames `s`; hop `j` then carries `packets × bits_j` in frame
//! `(s + offset_j) mod k` of its link. A frame has room when what is booked plus what
//! the flow adds is at most the link's capacity. A flow that goes round a ring crosses
//! one link several times: all its passes that land in one frame of one link (of one
//! start frame or of several) are added up before the check.
//!
//! The book is pure arithmetic: it knows links by [`LinkId`] only, and its errors say
//! which hop and which frame; callers word them with their own names.
//!
//! Placement policies ([`Policy`]):
//! - [`Policy::Spread`] (the planner's): the first base `b` in `0, 1, …, k − 1` at which
//!   every one of the evenly spaced starts `b + ⌊i·k/n⌋ mod k` (`i < n`) has room, in
//!   that order; failing that, each spaced start of base 0 in turn moves forward (with
//!   wrap-around) to the first frame not taken yet that has room, and the starts come
//!   back sorted.
//! - [`Policy::FirstFit`] (the controller's): each start in turn the smallest frame not
//!   taken yet that has room (for `n = 1`: the first start frame that fits).
//!
//! A request may give its start instead ([`Request::start`]): its starts are then the
//! spaced starts of that base, and nothing else is tried.
//!
//! The search touches only the hops of the flow: a check of one start frame costs
//! `O(hops)`, and each start frame is checked at most once per request.

use std::collections::HashMap;

/// Most [`Blocked`] explanations a refusal carries (`k` may be large).
pub const MAX_BLOCKED: usize = 32;

/// A directional link of a [`FrameBook`]: the index it was added at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LinkId(pub u32);

impl LinkId {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// One hop of a request: the link the packet leaves on, and in which frame after the
/// start frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub link: LinkId,
    /// Frames after the start frame (any size: taken modulo `k`).
    pub offset: u64,
    /// Bits one packet takes on this link's wire (framing overhead included).
    pub packet_bits: u128,
}

/// How a [`FrameBook`] chooses the start frames of a request (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Evenly spaced starts at the first base that fits, else each start moved forward
    /// on its own.
    #[default]
    Spread,
    /// Each start the smallest frame with room.
    FirstFit,
}

/// A flow to place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// In path order.
    pub hops: Vec<Hop>,
    /// Packets per reserved frame.
    pub packets: u32,
    /// Reserved frames per cycle (`n`), `1..=k`.
    pub frames: u32,
    /// A given base: the starts are `start + ⌊i·k/n⌋ mod k`, or the request is refused.
    pub start: Option<u32>,
    pub policy: Policy,
}

/// Why one start frame does not work: the first hop (in path order) without room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub start: u32,
    /// Index into [`Request::hops`].
    pub hop: usize,
    /// The frame of the cycle (`(start + offset) mod k`) at that hop.
    pub slot: u32,
    /// Bits of that frame of that link not booked yet.
    pub free_bits: u128,
    /// Bits the request puts into that frame of that link (every pass of it there).
    pub needed_bits: u128,
}

/// Why a request was not placed. Nothing was booked.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    #[error("k (frames per cycle) must be at least 1")]
    ZeroK,
    #[error("hop {hop}: link {} is not in the book", link.0)]
    UnknownLink { hop: usize, link: LinkId },
    #[error("{frames} reserved frames per cycle is outside 1..={k}")]
    Frames { frames: u32, k: u32 },
    #[error("start frame {start} is outside the cycle of {k} frames")]
    Start { start: u32, k: u32 },
    /// One reserved frame of the flow is more than a frame of this hop's link carries:
    /// no start frame helps.
    #[error("hop {hop}: {needed_bits} bits are more than a frame carries ({capacity_bits})")]
    TooBig {
        hop: usize,
        needed_bits: u128,
        capacity_bits: u128,
    },
    /// The links are full.
    #[error("no room: {placed} start frame(s) found before the search gave up")]
    NoRoom {
        /// Starts found before giving up (the [`Policy::Spread`] fallback and
        /// [`Policy::FirstFit`] place them one at a time).
        placed: u32,
        /// Start frames found blocked, in the order tried, at most [`MAX_BLOCKED`]
        /// ([`Policy::FirstFit`] and a given start only).
        blocked: Vec<Blocked>,
    },
    /// A release of frames that are not booked.
    #[error("link {} frame {slot}: {bits} bits are not booked", link.0)]
    NotBooked { link: LinkId, slot: u32, bits: u128 },
}

/// The frames a request was given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    starts: Vec<u32>,
    k: u32,
    /// Per hop: link, offset mod k, bits per reserved frame.
    hops: Vec<(LinkId, u32, u128)>,
}

impl Placement {
    /// The start frames, in the order the policy found them.
    pub fn starts(&self) -> &[u32] {
        &self.starts
    }

    pub fn into_starts(self) -> Vec<u32> {
        self.starts
    }

    /// The frame hop `hop` takes for start frame `start`.
    pub fn slot(&self, start: u32, hop: usize) -> Option<u32> {
        let &(_, off, _) = self.hops.get(hop)?;
        Some(slot_of(start, off, self.k))
    }

    /// Every (link, frame, bits) the placement booked, start by start, hop by hop.
    pub fn bookings(&self) -> impl Iterator<Item = (LinkId, u32, u128)> + '_ {
        self.starts.iter().flat_map(move |&s| {
            self.hops
                .iter()
                .map(move |&(l, off, bits)| (l, slot_of(s, off, self.k), bits))
        })
    }
}

fn slot_of(start: u32, off_mod_k: u32, k: u32) -> u32 {
    ((u64::from(start) + u64::from(off_mod_k)) % u64::from(k)) as u32
}

/// The booked bits of every frame of every directional link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameBook {
    k: u32,
    capacity: Vec<u128>,
    /// Per link: `k` booked-bit counts, empty until the link is first booked.
    used: Vec<Vec<u128>>,
}

/// A request checked against the book, ready to test start frames.
struct Prepared {
    /// Per hop: link index, offset mod k, bits per reserved frame, and the bits of
    /// every hop of the request on the same link in the same frame of one start (this
    /// one included).
    hops: Vec<(usize, u32, u128, u128)>,
    /// Some link carries passes of one start in different frames: the passes of
    /// different starts may then meet in one frame and must be added up.
    interacting: bool,
}

/// Per start frame: not checked yet, has room, no room, taken by this request.
const UNKNOWN: u8 = 0;
const FITS: u8 = 1;
const FULL: u8 = 2;
const TAKEN: u8 = 3;

impl FrameBook {
    /// An empty book of `k` frames per cycle over links with these capacities (bits per
    /// frame), which get the ids `0, 1, …` in order.
    pub fn new(k: u32, capacities: impl IntoIterator<Item = u128>) -> Result<Self, AllocError> {
        if k == 0 {
            return Err(AllocError::ZeroK);
        }
        let capacity: Vec<u128> = capacities.into_iter().collect();
        let used = vec![Vec::new(); capacity.len()];
        Ok(FrameBook { k, capacity, used })
    }

    /// Adds a link of `capacity_bits` per frame.
    pub fn add_link(&mut self, capacity_bits: u128) -> LinkId {
        self.capacity.push(capacity_bits);
        self.used.push(Vec::new());
        LinkId((self.capacity.len() - 1) as u32)
    }

    pub fn k(&self) -> u32 {
        self.k
    }

    pub fn links(&self) -> usize {
        self.capacity.len()
    }

    /// Bits a frame of `link` carries (0 for an unknown link).
    pub fn capacity_bits(&self, link: LinkId) -> u128 {
        self.capacity.get(link.index()).copied().unwrap_or(0)
    }

    /// Bits booked in frame `slot` of `link`.
    pub fn used_bits(&self, link: LinkId, slot: u32) -> u128 {
        self.used
            .get(link.index())
            .and_then(|r| r.get(slot as usize))
            .copied()
            .unwrap_or(0)
    }

    /// Bits still free in frame `slot` of `link`.
    pub fn free_bits(&self, link: LinkId, slot: u32) -> u128 {
        self.capacity_bits(link)
            .saturating_sub(self.used_bits(link, slot))
    }

    /// Checks that every hop's link is in the book and that `packets` packets fit in
    /// one frame of it: the first hop that fails is the error ([`AllocError::TooBig`]
    /// needs no search: no start frame helps).
    pub fn check_hops(&self, hops: &[Hop], packets: u32) -> Result<(), AllocError> {
        for (j, h) in hops.iter().enumerate() {
            let Some(&cap) = self.capacity.get(h.link.index()) else {
                return Err(AllocError::UnknownLink {
                    hop: j,
                    link: h.link,
                });
            };
            let needed = u128::from(packets) * h.packet_bits;
            if needed > cap {
                return Err(AllocError::TooBig {
                    hop: j,
                    needed_bits: needed,
                    capacity_bits: cap,
                });
            }
        }
        Ok(())
    }

    /// Books the frames of a request, or says why it cannot (nothing changes then).
    pub fn place(&mut self, req: &Request) -> Result<Placement, AllocError> {
        let k = self.k;
        if req.frames == 0 || req.frames > k {
            return Err(AllocError::Frames {
                frames: req.frames,
                k,
            });
        }
        if let Some(start) = req.start {
            if start >= k {
                return Err(AllocError::Start { start, k });
            }
        }
        self.check_hops(&req.hops, req.packets)?;
        let prep = self.prepare(req);
        let starts = match (req.start, req.policy) {
            (Some(base), _) => self.given(&prep, base, req.frames)?,
            (None, Policy::Spread) => self.spread(&prep, req.frames)?,
            (None, Policy::FirstFit) => self.first_fit(&prep, req.frames)?,
        };
        let placement = Placement {
            starts,
            k,
            hops: prep
                .hops
                .iter()
                .map(|&(l, off, bits, _)| (LinkId(l as u32), off, bits))
                .collect(),
        };
        for (link, slot, bits) in placement.bookings() {
            let row = &mut self.used[link.index()];
            if row.is_empty() {
                *row = vec![0; k as usize];
            }
            row[slot as usize] += bits;
        }
        Ok(placement)
    }

    /// Gives back the frames of a placement this book made. A placement whose frames
    /// are not (all) booked is refused and nothing changes.
    pub fn release(&mut self, p: &Placement) -> Result<(), AllocError> {
        let mut total: HashMap<(LinkId, u32), u128> = HashMap::new();
        for (link, slot, bits) in p.bookings() {
            let t = total.entry((link, slot)).or_insert(0);
            *t += bits;
            if p.k != self.k || *t > self.used_bits(link, slot) {
                return Err(AllocError::NotBooked { link, slot, bits });
            }
        }
        for ((link, slot), bits) in total {
            if bits > 0 {
                // Booked (checked above), so the link's row exists.
                self.used[link.index()][slot as usize] -= bits;
            }
        }
        Ok(())
    }

    fn prepare(&self, req: &Request) -> Prepared {
        let k = u64::from(self.k);
        let mut hops: Vec<(usize, u32, u128, u128)> = req
            .hops
            .iter()
            .map(|h| {
                let bits = u128::from(req.packets) * h.packet_bits;
                (h.link.index(), (h.offset % k) as u32, bits, bits)
            })
            .collect();
        // Hops in (link, frame) order: equal neighbours are passes in one frame.
        let mut order: Vec<usize> = (0..hops.len()).collect();
        order.sort_unstable_by_key(|&j| (hops[j].0, hops[j].1));
        let mut interacting = false;
        let mut i = 0;
        while i < order.len() {
            let (link, off) = (hops[order[i]].0, hops[order[i]].1);
            let mut end = i;
            let mut sum = 0u128;
            while end < order.len() && (hops[order[end]].0, hops[order[end]].1) == (link, off) {
                sum += hops[order[end]].2;
                end += 1;
            }
            for &j in &order[i..end] {
                hops[j].3 = sum;
            }
            if end < order.len() && hops[order[end]].0 == link {
                interacting = true;
            }
            i = end;
        }
        Prepared { hops, interacting }
    }

    /// Whether start frame `start` has room at every hop, with `extra` bits (earlier
    /// starts of the same request) on top of what is booked.
    fn check(
        &self,
        prep: &Prepared,
        start: u32,
        extra: &HashMap<(usize, u32), u128>,
    ) -> Result<(), Blocked> {
        for (j, &(link, off, _, own)) in prep.hops.iter().enumerate() {
            let slot = slot_of(start, off, self.k);
            let mut used = self.used_bits(LinkId(link as u32), slot);
            if !extra.is_empty() {
                used += extra.get(&(link, slot)).copied().unwrap_or(0);
            }
            let free = self.capacity[link].saturating_sub(used);
            if own > free {
                return Err(Blocked {
                    start,
                    hop: j,
                    slot,
                    free_bits: free,
                    needed_bits: own,
                });
            }
        }
        Ok(())
    }

    /// Whether all `starts` together have room: only needed when the passes of
    /// different starts can meet in one frame.
    fn check_together(&self, prep: &Prepared, starts: &[u32]) -> Result<(), Blocked> {
        if !prep.interacting || starts.len() < 2 {
            return Ok(());
        }
        let mut mine: HashMap<(usize, u32), u128> = HashMap::new();
        for &start in starts {
            for (j, &(link, off, bits, _)) in prep.hops.iter().enumerate() {
                let slot = slot_of(start, off, self.k);
                let m = mine.entry((link, slot)).or_insert(0);
                *m += bits;
                let free = self.free_bits(LinkId(link as u32), slot);
                if *m > free {
                    return Err(Blocked {
                        start,
                        hop: j,
                        slot,
                        free_bits: free,
                        needed_bits: *m,
                    });
                }
            }
        }
        Ok(())
    }

    /// Adds the passes of `start` to `extra` (for requests whose starts interact).
    fn take(&self, prep: &Prepared, start: u32, extra: &mut HashMap<(usize, u32), u128>) {
        if prep.interacting {
            for &(link, off, bits, _) in &prep.hops {
                *extra
                    .entry((link, slot_of(start, off, self.k)))
                    .or_insert(0) += bits;
            }
        }
    }

    fn spaced(&self, base: u32, n: u32) -> impl Iterator<Item = u32> {
        let k = u64::from(self.k);
        (0..u64::from(n)).map(move |i| ((u64::from(base) + i * k / u64::from(n)) % k) as u32)
    }

    fn given(&self, prep: &Prepared, base: u32, n: u32) -> Result<Vec<u32>, AllocError> {
        let none = HashMap::new();
        let starts: Vec<u32> = self.spaced(base, n).collect();
        let refuse = |b: Blocked| AllocError::NoRoom {
            placed: 0,
            blocked: vec![b],
        };
        for &s in &starts {
            self.check(prep, s, &none).map_err(refuse)?;
        }
        self.check_together(prep, &starts).map_err(refuse)?;
        Ok(starts)
    }

    fn spread(&self, prep: &Prepared, n: u32) -> Result<Vec<u32>, AllocError> {
        let k = self.k;
        let none = HashMap::new();
        let mut state = vec![UNKNOWN; k as usize];
        let mut fits = |s: u32, extra: &HashMap<(usize, u32), u128>| -> bool {
            let st = &mut state[s as usize];
            if *st == UNKNOWN {
                *st = match self.check(prep, s, &none) {
                    Ok(()) => FITS,
                    Err(_) => FULL,
                };
            }
            *st == FITS && (extra.is_empty() || self.check(prep, s, extra).is_ok())
        };
        let mut cand = Vec::with_capacity(n as usize);
        for base in 0..k {
            cand.clear();
            cand.extend(self.spaced(base, n));
            if cand.iter().all(|&s| fits(s, &none)) && self.check_together(prep, &cand).is_ok() {
                return Ok(cand);
            }
        }
        // Each spaced start of base 0 moves forward on its own.
        let mut chosen: Vec<u32> = Vec::with_capacity(n as usize);
        let mut extra = HashMap::new();
        let mut taken = vec![false; k as usize];
        for want in self.spaced(0, n) {
            let found = (0..k)
                .map(|t| ((u64::from(want) + u64::from(t)) % u64::from(k)) as u32)
                .find(|&s| !taken[s as usize] && fits(s, &extra));
            let Some(s) = found else {
                return Err(AllocError::NoRoom {
                    placed: chosen.len() as u32,
                    blocked: Vec::new(),
                });
            };
            taken[s as usize] = true;
            self.take(prep, s, &mut extra);
            chosen.push(s);
        }
        chosen.sort_unstable();
        Ok(chosen)
    }

    fn first_fit(&self, prep: &Prepared, n: u32) -> Result<Vec<u32>, AllocError> {
        let k = self.k;
        let none = HashMap::new();
        let mut state = vec![UNKNOWN; k as usize];
        let mut blocked = Vec::new();
        let mut chosen: Vec<u32> = Vec::with_capacity(n as usize);
        let mut extra = HashMap::new();
        for _ in 0..n {
            let mut found = None;
            for s in 0..k {
                let st = &mut state[s as usize];
                if *st == UNKNOWN {
                    *st = match self.check(prep, s, &none) {
                        Ok(()) => FITS,
                        Err(b) => {
                            if blocked.len() < MAX_BLOCKED {
                                blocked.push(b);
                            }
                            FULL
                        }
                    };
                }
                if *st == FITS && (extra.is_empty() || self.check(prep, s, &extra).is_ok()) {
                    found = Some(s);
                    break;
                }
            }
            let Some(s) = found else {
                return Err(AllocError::NoRoom {
                    placed: chosen.len() as u32,
                    blocked,
                });
            };
            state[s as usize] = TAKEN;
            self.take(prep, s, &mut extra);
            chosen.push(s);
        }
        Ok(chosen)
    }
}

#[cfg(test)]
#[path = "alloc_tests.rs"]
mod tests;
