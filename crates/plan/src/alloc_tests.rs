use super::*;

const A: LinkId = LinkId(0);
const B: LinkId = LinkId(1);

fn hop(link: LinkId, offset: u64, packet_bits: u128) -> Hop {
    Hop {
        link,
        offset,
        packet_bits,
    }
}

fn req(hops: &[Hop], frames: u32, policy: Policy) -> Request {
    Request {
        hops: hops.to_vec(),
        packets: 1,
        frames,
        start: None,
        policy,
    }
}

/// Two links of 100 bits per frame: a 60-bit packet fills a frame.
fn book(k: u32) -> FrameBook {
    FrameBook::new(k, [100, 100]).unwrap()
}

fn row(b: &FrameBook, link: LinkId) -> Vec<u128> {
    (0..b.k()).map(|s| b.used_bits(link, s)).collect()
}

#[test]
fn spread_start_frames_are_exact() {
    let mut b = book(8);
    let two_hops = [hop(A, 0, 60), hop(B, 2, 60)];
    // base 0: starts 0 and 4; hop B two frames later
    let p = b.place(&req(&two_hops, 2, Policy::Spread)).unwrap();
    assert_eq!(p.starts(), [0, 4]);
    assert_eq!(
        (p.slot(4, 0), p.slot(4, 1), p.slot(4, 2)),
        (Some(4), Some(6), None)
    );
    assert_eq!(row(&b, A), [60, 0, 0, 0, 60, 0, 0, 0]);
    assert_eq!(row(&b, B), [0, 0, 60, 0, 0, 0, 60, 0]);
    // base 0 is full at A: base 1
    let p = b.place(&req(&two_hops, 2, Policy::Spread)).unwrap();
    assert_eq!(p.starts(), [1, 5]);
    // four spaced starts of one base never fit on A (0, 1, 4, 5 taken): each spaced
    // start of base 0 (0, 2, 4, 6) moves forward to the first free frame: 2, 3, 6, 7
    let p = b.place(&req(&[hop(A, 0, 60)], 4, Policy::Spread)).unwrap();
    assert_eq!(p.starts(), [2, 3, 6, 7]);
    assert_eq!(row(&b, A), [60; 8]);
    // spaced starts wrap round the cycle and keep their order: k = 5, n = 2 puts
    // them ⌊5/2⌋ = 2 apart; with frames 1 and 2 booked, bases 0 (0, 2), 1 (1, 3) and
    // 2 (2, 4) fail and base 3 gives 3, 0
    let mut b = book(5);
    b.place(&req(&[hop(A, 1, 60)], 1, Policy::Spread)).unwrap();
    b.place(&req(&[hop(A, 7, 60)], 1, Policy::Spread)).unwrap();
    let p = b.place(&req(&[hop(A, 0, 60)], 2, Policy::Spread)).unwrap();
    assert_eq!(p.starts(), [3, 0]);
    assert_eq!(row(&b, A), [60, 60, 60, 60, 0]);
    // only frame 4 is left: no pair fits; the fallback places the first start (0 → 4)
    // and finds nothing for the second (2 → 3, 4 taken, 0, 1, 2)
    assert_eq!(
        b.place(&req(&[hop(A, 0, 60)], 2, Policy::Spread)),
        Err(AllocError::NoRoom {
            placed: 1,
            blocked: Vec::new()
        })
    );
    assert_eq!(row(&b, A), [60, 60, 60, 60, 0]);
}

#[test]
fn first_fit_takes_the_smallest_frames() {
    let mut b = book(4);
    let one = [hop(A, 0, 60), hop(B, 1, 60)];
    let p = b.place(&req(&one, 1, Policy::FirstFit)).unwrap();
    assert_eq!((p.starts(), p.slot(0, 1)), (&[0][..], Some(1)));
    let p = b.place(&req(&one, 1, Policy::FirstFit)).unwrap();
    assert_eq!(p.starts(), [1]);
    // two starts: the two smallest free ones
    let p = b
        .place(&req(&[hop(A, 0, 60)], 2, Policy::FirstFit))
        .unwrap();
    assert_eq!(p.starts(), [2, 3]);
    // A is full: one explanation per start frame tried
    let e = b.place(&req(&one, 1, Policy::FirstFit)).unwrap_err();
    let AllocError::NoRoom { placed, blocked } = e else {
        panic!("{e:?}")
    };
    assert_eq!(placed, 0);
    assert_eq!(blocked.len(), 4);
    assert_eq!(
        blocked[1],
        Blocked {
            start: 1,
            hop: 0,
            slot: 1,
            free_bits: 40,
            needed_bits: 60
        }
    );
    // B alone: frames 1 and 2 are booked
    let p = b
        .place(&req(&[hop(B, 0, 60)], 1, Policy::FirstFit))
        .unwrap();
    assert_eq!(p.starts(), [0]);
}

#[test]
fn a_given_start_is_kept_or_refused() {
    let mut b = book(8);
    let mut r = req(&[hop(A, 0, 60), hop(B, 3, 60)], 2, Policy::FirstFit);
    r.start = Some(5);
    let p = b.place(&r).unwrap();
    // 5 and 5 + 8/2 = 9 → 1
    assert_eq!(p.starts(), [5, 1]);
    // B at start + 3: frames 0 and 4
    assert_eq!(row(&b, B), [60, 0, 0, 0, 60, 0, 0, 0]);
    r.hops = vec![hop(B, 0, 60)];
    r.frames = 1;
    r.start = Some(4);
    assert_eq!(
        b.place(&r).unwrap_err(),
        AllocError::NoRoom {
            placed: 0,
            blocked: vec![Blocked {
                start: 4,
                hop: 0,
                slot: 4,
                free_bits: 40,
                needed_bits: 60
            }]
        }
    );
    r.start = Some(8);
    assert_eq!(
        b.place(&r).unwrap_err(),
        AllocError::Start { start: 8, k: 8 }
    );
}

#[test]
fn a_full_link_refuses_and_nothing_changes() {
    let mut b = book(2);
    // more than one frame carries: no search
    let e = b
        .place(&Request {
            packets: 2,
            ..req(&[hop(A, 0, 10), hop(B, 0, 60)], 1, Policy::Spread)
        })
        .unwrap_err();
    assert_eq!(
        e,
        AllocError::TooBig {
            hop: 1,
            needed_bits: 120,
            capacity_bits: 100
        }
    );
    b.place(&req(&[hop(A, 0, 60)], 2, Policy::Spread)).unwrap();
    let before = b.clone();
    for policy in [Policy::Spread, Policy::FirstFit] {
        let e = b
            .place(&req(&[hop(B, 0, 60), hop(A, 1, 41)], 1, policy))
            .unwrap_err();
        assert!(matches!(e, AllocError::NoRoom { placed: 0, .. }), "{e:?}");
    }
    assert_eq!(b, before);
    // 40 bits still fit
    b.place(&req(&[hop(B, 0, 60), hop(A, 1, 40)], 2, Policy::Spread))
        .unwrap();
    assert_eq!(row(&b, A), [100, 100]);
}

#[test]
fn looping_passes_in_one_frame_are_summed() {
    // A flow crosses A twice, k frames apart: both passes land in one frame.
    let lap = [hop(A, 0, 60), hop(B, 1, 10), hop(A, 4, 60)];
    let mut b = book(4);
    let e = b.place(&req(&lap, 1, Policy::FirstFit)).unwrap_err();
    let AllocError::NoRoom { blocked, .. } = e else {
        panic!("{e:?}")
    };
    assert_eq!(
        (blocked[0].hop, blocked[0].free_bits, blocked[0].needed_bits),
        (0, 100, 120)
    );
    let mut b = FrameBook::new(4, [120, 100]).unwrap();
    let p = b.place(&req(&lap, 1, Policy::FirstFit)).unwrap();
    assert_eq!(p.starts(), [0]);
    assert_eq!(row(&b, A), [120, 0, 0, 0]);

    // Passes of different starts meet: A at start and start + 2, two starts 2 apart.
    let mut b = book(4);
    let ring = [hop(A, 0, 60), hop(A, 2, 60)];
    let p = b.place(&req(&ring, 2, Policy::Spread)).unwrap();
    // every spaced pair (b, b + 2) puts both passes of both starts in frames b and
    // b + 2 (120 bits): the starts move forward on their own, 0 then 3
    assert_eq!(p.starts(), [0, 3]);
    assert_eq!(row(&b, A), [60, 60, 60, 60]);
    // one more pass anywhere does not fit
    let e = b.place(&req(&[hop(A, 0, 60)], 1, Policy::Spread));
    assert!(matches!(e, Err(AllocError::NoRoom { .. })), "{e:?}");

    // Every frame a start, two passes each: frame s holds the first pass of start s
    // and the second of start s − 1.
    let mut b = book(4);
    let e = b
        .place(&req(&[hop(A, 0, 60), hop(A, 1, 60)], 4, Policy::Spread))
        .unwrap_err();
    assert_eq!(
        e,
        AllocError::NoRoom {
            placed: 2,
            blocked: Vec::new()
        }
    );
    let mut r = req(&[hop(A, 0, 60), hop(A, 1, 60)], 2, Policy::FirstFit);
    r.start = Some(1);
    // starts 1 and 3: frames 1, 2 and 3, 0: no two passes meet
    assert_eq!(b.place(&r).unwrap().starts(), [1, 3]);
    let mut b = book(4);
    r.hops = vec![hop(A, 0, 60), hop(A, 2, 60)];
    let e = b.place(&r).unwrap_err();
    assert_eq!(
        e,
        AllocError::NoRoom {
            placed: 0,
            // start 1 puts a pass in frames 1 and 3; start 3's first pass meets it
            blocked: vec![Blocked {
                start: 3,
                hop: 0,
                slot: 3,
                free_bits: 100,
                needed_bits: 120
            }]
        }
    );
}

#[test]
fn release_gives_the_frames_back_once() {
    let mut b = book(4);
    let r = req(
        &[hop(A, 0, 60), hop(B, 1, 30), hop(A, 4, 20)],
        2,
        Policy::Spread,
    );
    let p = b.place(&r).unwrap();
    let q = b.place(&r).unwrap();
    assert_eq!((p.starts(), q.starts()), (&[0, 2][..], &[1, 3][..]));
    assert_eq!(row(&b, A), [80; 4]);
    assert_eq!(
        p.bookings().collect::<Vec<_>>(),
        [
            (A, 0, 60),
            (B, 1, 30),
            (A, 0, 20),
            (A, 2, 60),
            (B, 3, 30),
            (A, 2, 20)
        ]
    );
    b.release(&p).unwrap();
    assert_eq!(row(&b, A), [0, 80, 0, 80]);
    assert_eq!(row(&b, B), [30, 0, 30, 0]);
    assert_eq!(
        b.release(&p),
        Err(AllocError::NotBooked {
            link: A,
            slot: 0,
            bits: 60
        })
    );
    b.release(&q).unwrap();
    assert_eq!(b, book(4).tap_links());
}

impl FrameBook {
    /// The same book after both links were booked once (rows allocated, all zero).
    fn tap_links(mut self) -> FrameBook {
        for l in &mut self.used {
            *l = vec![0; self.k as usize];
        }
        self
    }
}

#[test]
fn bad_requests() {
    assert_eq!(FrameBook::new(0, [1]), Err(AllocError::ZeroK));
    let mut b = book(4);
    assert_eq!(b.add_link(7), LinkId(2));
    assert_eq!((b.links(), b.capacity_bits(LinkId(2))), (3, 7));
    assert_eq!(
        b.place(&req(&[hop(A, 0, 1)], 5, Policy::Spread)),
        Err(AllocError::Frames { frames: 5, k: 4 })
    );
    assert_eq!(
        b.place(&req(&[hop(A, 0, 1)], 0, Policy::Spread)),
        Err(AllocError::Frames { frames: 0, k: 4 })
    );
    assert_eq!(
        b.place(&req(
            &[hop(A, 0, 1), hop(LinkId(9), 1, 1)],
            1,
            Policy::Spread
        )),
        Err(AllocError::UnknownLink {
            hop: 1,
            link: LinkId(9)
        })
    );
    // no hops: nothing to book, the first starts fit
    assert_eq!(
        b.place(&req(&[], 2, Policy::Spread)).unwrap().starts(),
        [0, 2]
    );
}

proptest::proptest! {
    /// Random requests on random links, placed and released in any order: no frame of
    /// any link is ever booked beyond its capacity, the book holds exactly what the
    /// live placements put in it, and first fit of one frame takes the smallest start
    /// at which every pass (summed per frame) has room.
    #[test]
    fn no_frame_is_ever_booked_beyond_its_capacity(
        k in 1u32..10,
        caps in proptest::collection::vec(50u128..300, 1..4),
        ops in proptest::collection::vec(
            (
                proptest::collection::vec((0u32..4, 0u64..25, 10u128..130), 0..6),
                1u32..4,
                1u32..12,
                proptest::option::of(0u32..12),
                proptest::bool::ANY,
                0usize..8,
            ),
            1..30,
        )
    ) {
        let mut b = FrameBook::new(k, caps.iter().copied()).unwrap();
        let links = caps.len() as u32;
        let mut live: Vec<(Request, Placement)> = Vec::new();
        for (hops, packets, frames, start, first_fit, release) in ops {
            if release == 0 && !live.is_empty() {
                let (_, p) = live.remove(live.len() / 2);
                proptest::prop_assert_eq!(b.release(&p), Ok(()));
            } else {
                let r = Request {
                    hops: hops.iter().map(|&(l, o, bits)| hop(LinkId(l % links), o, bits)).collect(),
                    packets,
                    frames: 1 + (frames - 1) % k,
                    start: start.map(|s| s % k),
                    policy: if first_fit { Policy::FirstFit } else { Policy::Spread },
                };
                // What each start frame alone would add, summed per (link, frame).
                let fits_alone = |s: u32| {
                    let mut mine: HashMap<(LinkId, u32), u128> = HashMap::new();
                    r.hops.iter().all(|h| {
                        let slot = ((u64::from(s) + h.offset) % u64::from(k)) as u32;
                        let m = mine.entry((h.link, slot)).or_insert(0);
                        *m += u128::from(packets) * h.packet_bits;
                        *m <= b.free_bits(h.link, slot)
                    })
                };
                let smallest = (0..k).find(|&s| fits_alone(s));
                let any_too_big = r.hops.iter().any(|h| u128::from(packets) * h.packet_bits > b.capacity_bits(h.link));
                let before = b.clone();
                match b.place(&r) {
                    Ok(p) => {
                        proptest::prop_assert!(!any_too_big);
                        let mut starts = p.starts().to_vec();
                        proptest::prop_assert_eq!(starts.len() as u32, r.frames);
                        starts.sort_unstable();
                        starts.dedup();
                        proptest::prop_assert_eq!(starts.len() as u32, r.frames);
                        if r.policy == Policy::FirstFit && r.frames == 1 && r.start.is_none() {
                            proptest::prop_assert_eq!(Some(p.starts()[0]), smallest);
                        }
                        if let Some(s) = r.start {
                            proptest::prop_assert_eq!(p.starts()[0], s);
                        }
                        live.push((r, p));
                    }
                    Err(AllocError::TooBig { .. }) => proptest::prop_assert!(any_too_big),
                    Err(AllocError::NoRoom { .. }) => {
                        proptest::prop_assert!(!any_too_big);
                        if r.policy == Policy::FirstFit && r.frames == 1 && r.start.is_none() {
                            proptest::prop_assert_eq!(smallest, None);
                        }
                        proptest::prop_assert_eq!(&b, &before);
                    }
                    Err(e) => proptest::prop_assert!(false, "{e}"),
                }
            }
            // The book against the live placements, computed from the requests.
            let mut expect: HashMap<(LinkId, u32), u128> = HashMap::new();
            for (r, p) in &live {
                for &s in p.starts() {
                    for h in &r.hops {
                        let slot = ((u64::from(s) + h.offset) % u64::from(k)) as u32;
                        *expect.entry((h.link, slot)).or_insert(0) += u128::from(r.packets) * h.packet_bits;
                    }
                }
            }
            for l in 0..links {
                for slot in 0..k {
                    let used = b.used_bits(LinkId(l), slot);
                    proptest::prop_assert!(used <= b.capacity_bits(LinkId(l)), "link {l} frame {slot}: {used}");
                    proptest::prop_assert_eq!(used, expect.get(&(LinkId(l), slot)).copied().unwrap_or(0));
                }
            }
        }
    }
}
