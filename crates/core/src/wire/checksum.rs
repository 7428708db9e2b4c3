//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! The checksum of a region is the ones' complement of the ones'-complement sum of
//! its big-endian 16-bit words: `!fold(ones_complement_sum(data, 0))`. A receiver
//! verifies by summing the region *including* the checksum field: a correct packet
//! folds to `0xffff`.
//!
//! A router that rewrites one header word (TTL, DSCP) does not sum the header again:
//! RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, adjusts the old checksum from the old
//! and new value of the word ([`update16`]). It keeps a checksum that was wrong
//! before the rewrite wrong afterwards, so corruption upstream is still caught
//! downstream.
//!
//! ```
//! use lockstep_core::wire::checksum::{fold, ones_complement_sum};
//! // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
//! let sum = ones_complement_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7], 0);
//! assert_eq!(fold(sum), 0xddf2);
//! assert_eq!(!fold(sum), 0x220d); // the checksum that goes on the wire
//! ```

use std::net::Ipv4Addr;

/// Ones'-complement sum of `data` read as big-endian 16-bit words, added to
/// `initial` (a previous partial sum, e.g. of a pseudo-header, or 0).
///
/// An odd trailing byte counts as the high byte of a last word padded with zero
/// (RFC 1071), so when a region is summed in pieces, only the last piece may have
/// odd length. The result is partially folded (at most `0x1_fffe`): pass it on as
/// `initial` or [`fold`] it. No overflow whatever the length of `data`.
pub fn ones_complement_sum(data: &[u8], initial: u32) -> u32 {
    // 32-bit big-endian words: since 2^16 ≡ 1 (mod 2^16 - 1), summing (hi << 16 | lo)
    // is the same as summing hi and lo, at half the additions. A u64 cannot
    // overflow for any slice that fits in memory.
    let mut sum = u64::from(initial);
    let mut words = data.chunks_exact(4);
    for w in words.by_ref() {
        sum += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    match *words.remainder() {
        [a, b, c] => sum += (u64::from(a) << 8 | u64::from(b)) + (u64::from(c) << 8),
        [a, b] => sum += u64::from(a) << 8 | u64::from(b),
        [a] => sum += u64::from(a) << 8,
        _ => {}
    }
    // Fold to 32 bits and then to at most 17 bits; `fold` finishes the job.
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = sum as u32;
    (sum & 0xffff) + (sum >> 16)
}

/// Fold a ones'-complement sum into 16 bits with end-around carry. This is the sum,
/// not yet complemented: the checksum field holds `!fold(sum)`.
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum of `data` alone: `!fold(ones_complement_sum(data, 0))`.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(ones_complement_sum(data, 0))
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word covered by
/// `old_checksum` changed from `old` to `new`: `~(~HC + ~m + m')`.
///
/// Equals a full recomputation (RFC 1624 §3 explains why eqn. 2 did not), and keeps
/// a mismatch that was there before.
pub fn update16(old_checksum: u16, old: u16, new: u16) -> u16 {
    let sum = u32::from(!old_checksum) + u32::from(!old) + u32::from(new);
    !fold(sum)
}

/// [`update16`] for a run of words: bytes `old` of the covered region became `new`
/// (same length; the run starts at an even offset of the region, so its words line
/// up with the region's words; an odd length counts its last byte as a high byte).
/// How a router adjusts a UDP checksum after appending a hop record to a probe.
/// Returns `old_checksum` unchanged when the lengths differ.
pub fn update_bytes(old_checksum: u16, old: &[u8], new: &[u8]) -> u16 {
    if old.len() != new.len() {
        return old_checksum;
    }
    let not_old = !fold(ones_complement_sum(old, 0));
    let sum = ones_complement_sum(new, u32::from(!old_checksum) + u32::from(not_old));
    !fold(sum)
}

/// What a change did to the bytes a checksum covers, as the ones'-complement sums of
/// the changed runs before (`old`) and after (`new`); every run starts at an even
/// offset of the covered region. [`SumChange::apply`] is RFC 1624 eqn. 3 for the
/// whole change at once: how a router adjusts a UDP checksum after appending a hop
/// record to a probe, summing a few dozen bytes instead of the datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SumChange {
    pub old: u32,
    pub new: u32,
}

impl SumChange {
    /// The checksum after the change, from the one before it.
    pub fn apply(self, old_checksum: u16) -> u16 {
        let sum = u32::from(!old_checksum) + u32::from(!fold(self.old)) + u32::from(fold(self.new));
        !fold(sum)
    }
}

/// The ones'-complement sum of the IPv4 pseudo-header that UDP and TCP checksums
/// cover (RFC 768): source, destination, zero, protocol, transport length.
pub fn pseudo_header_sum(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u32 {
    let s = src.octets();
    let d = dst.octets();
    let words = [
        u16::from_be_bytes([s[0], s[1]]),
        u16::from_be_bytes([s[2], s[3]]),
        u16::from_be_bytes([d[0], d[1]]),
        u16::from_be_bytes([d[2], d[3]]),
        u16::from(protocol),
        length,
    ];
    words.iter().map(|&w| u32::from(w)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The textbook definition, one 16-bit word at a time with end-around carry
    /// after every addition: the model the fast sum is checked against.
    fn model_sum(data: &[u8]) -> u16 {
        let mut sum: u32 = 0;
        for pair in data.chunks(2) {
            let word = match *pair {
                [a, b] => u16::from_be_bytes([a, b]),
                [a] => u16::from_be_bytes([a, 0]),
                _ => 0,
            };
            sum += u32::from(word);
            if sum > 0xffff {
                sum = (sum & 0xffff) + 1;
            }
        }
        sum as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 numerical example.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(ones_complement_sum(&data, 0)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
        // Byte-order independence (RFC 1071 §2B): swapped bytes give a swapped sum.
        let swapped = [0x01, 0x00, 0x03, 0xf2, 0xf5, 0xf4, 0xf7, 0xf6];
        assert_eq!(fold(ones_complement_sum(&swapped, 0)), 0xf2dd);
    }

    #[test]
    fn fold_end_around_carry() {
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xffff), 0xffff);
        assert_eq!(fold(0x0001_fffe), 0xffff);
        assert_eq!(fold(0x0002_0003), 0x0005);
        assert_eq!(fold(u32::MAX), 0xffff);
    }

    #[test]
    fn odd_lengths_pad_with_a_zero_low_byte() {
        assert_eq!(fold(ones_complement_sum(&[0xab], 0)), 0xab00);
        assert_eq!(fold(ones_complement_sum(&[0x12, 0x34, 0xab], 0)), 0xbd34);
        assert_eq!(
            fold(ones_complement_sum(&[0x12, 0x34, 0x56, 0x78, 0xab], 0)),
            // 0x1234 + 0x5678 + 0xab00 = 0x113ac → 0x13ad
            0x13ad
        );
        assert_eq!(ones_complement_sum(&[], 7), 7);
    }

    #[test]
    fn no_overflow_on_long_all_ones_input() {
        // 1 MiB of 0xff: every partial sum is ones'-complement zero (0xffff).
        let data = vec![0xff; 1 << 20];
        assert_eq!(fold(ones_complement_sum(&data, 0xffff_ffff)), 0xffff);
    }

    #[test]
    fn known_ipv4_header_checksum() {
        // A hand-made header: 45 00 0073 0000 4000 40 11 [b861] c0a8 0001 c0a8 00c7
        // (192.168.0.1 → 192.168.0.199, UDP, TTL 64, DF, total length 115).
        let mut header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&header), 0xb861);
        header[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(fold(ones_complement_sum(&header, 0)), 0xffff);
        // TTL 64 → 63: word 8 goes 0x4011 → 0x3f11; RFC 1624's example style.
        let updated = update16(0xb861, 0x4011, 0x3f11);
        header[8] = 0x3f;
        header[10..12].copy_from_slice(&[0, 0]);
        assert_eq!(updated, checksum(&header));
        assert_eq!(updated, 0xb961);
    }

    #[test]
    fn rfc1624_section4_example() {
        // RFC 1624 §4: HC = 0xdd2f, m = 0x5555 → m' = 0x3285 gives HC' = 0x0000.
        assert_eq!(update16(0xdd2f, 0x5555, 0x3285), 0x0000);
    }

    #[test]
    fn pseudo_header_sum_of_known_addresses() {
        let sum = pseudo_header_sum(
            Ipv4Addr::new(192, 168, 0, 1),
            Ipv4Addr::new(192, 168, 0, 199),
            17,
            0x5f,
        );
        assert_eq!(sum, 0xc0a8 + 0x0001 + 0xc0a8 + 0x00c7 + 0x11 + 0x5f);
    }

    proptest! {
        #[test]
        fn fast_sum_equals_the_word_by_word_model(
            data in prop::collection::vec(any::<u8>(), 0..300),
        ) {
            let fast = fold(ones_complement_sum(&data, 0));
            let model = model_sum(&data);
            // 0x0000 and 0xffff are the two zeros of ones' complement; the model
            // only yields 0x0000 for all-zero data, and so does the fast sum.
            prop_assert_eq!(fast, model);
        }

        #[test]
        fn summing_in_even_pieces_equals_summing_at_once(
            data in prop::collection::vec(any::<u8>(), 0..300),
            cut in any::<prop::sample::Index>(),
        ) {
            let at = cut.index(data.len() + 1) & !1;
            let whole = fold(ones_complement_sum(&data, 0));
            let pieces = fold(ones_complement_sum(&data[at..], ones_complement_sum(&data[..at], 0)));
            prop_assert_eq!(whole, pieces);
        }

        #[test]
        fn update16_equals_recomputation(
            mut words in prop::collection::vec(any::<u16>(), 2..40),
            index in any::<prop::sample::Index>(),
            new in any::<u16>(),
        ) {
            // Word 0 holds the checksum; another word changes.
            let i = 1 + index.index(words.len() - 1);
            let bytes = |w: &[u16]| w.iter().flat_map(|x| x.to_be_bytes()).collect::<Vec<u8>>();
            words[0] = 0;
            let hc = checksum(&bytes(&words));
            let old = words[i];
            words[i] = new;
            let full = checksum(&bytes(&words));
            let incremental = update16(hc, old, new);
            // Both must verify; RFC 1624 eqn. 3 also gives the same representation
            // unless the covered words are all zero apart from the checksum.
            words[0] = incremental;
            prop_assert_eq!(fold(ones_complement_sum(&bytes(&words), 0)), 0xffff);
            if words[1..].iter().any(|&w| w != 0) {
                prop_assert_eq!(incremental, full);
            }
        }

        #[test]
        fn update_bytes_equals_recomputation(
            mut data in prop::collection::vec(any::<u8>(), 2..200),
            start in any::<prop::sample::Index>(),
            new in prop::collection::vec(any::<u8>(), 0..40),
        ) {
            let region_len = data.len();
            let at = start.index(region_len) & !1;
            let n = new.len().min(region_len - at);
            let hc = checksum(&data);
            let old = data[at..at + n].to_vec();
            data[at..at + n].copy_from_slice(&new[..n]);
            let incremental = update_bytes(hc, &old, &new[..n]);
            let full = checksum(&data);
            // Verification: data plus the checksum (as an extra word) folds to 0xffff.
            let mut with = data.clone();
            if with.len() % 2 == 1 {
                with.push(0);
            }
            with.extend_from_slice(&incremental.to_be_bytes());
            prop_assert_eq!(fold(ones_complement_sum(&with, 0)), 0xffff);
            if data.iter().any(|&b| b != 0) {
                prop_assert_eq!(incremental, full);
            }
        }
    }
}
