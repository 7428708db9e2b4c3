//! Inputs for the fuzz targets' deterministic twins in `cargo test`: random bytes,
//! and valid examples damaged the way a fuzzer damages them (truncated, bytes
//! flipped, a line given twice — so a key or a table twice —, a number made huge,
//! syntax inserted). Each twin includes this file with `#[path]` and runs it under
//! proptest with a fixed seed ([`config`]), so every run feeds the same inputs.

#![allow(dead_code)]

use proptest::prelude::*;

/// A fixed seed: the same cases on every run.
pub fn config(cases: u32) -> proptest::test_runner::Config {
    proptest::test_runner::Config {
        cases,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x10c4_57e9),
        failure_persistence: None,
        ..proptest::test_runner::Config::default()
    }
}

/// Numbers that overflow, or sit at an edge, of every integer and float type.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "4294967296",
    "9223372036854775808",
    "-9223372036854775809",
    "18446744073709551616",
    "340282366920938463463374607431768211456",
    "99999999999999999999999999999999999999999999999999",
    "0.0000000000000000000000000000001",
    "1e309",
    "nan",
    "inf",
    "-0",
    "1_000",
];

/// Syntax a fuzzer would splice in (TOML, JSON, units).
const FRAGMENTS: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "=",
    "\"",
    "'",
    ",",
    ":",
    "\n",
    "#",
    "[[flow]]\n",
    "[node]\n",
    "\u{0}",
    "é",
    "µ",
    "/",
    ".",
    "-",
    "_",
    "\\u0000",
    "\"\"\"",
    "null",
    "true",
    "[]",
    "{}",
];

/// One way of damaging a text; positions are taken modulo its length.
#[derive(Clone, Debug)]
pub enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    DuplicateLine(usize),
    DeleteLine(usize),
    HugeNumber(usize, usize),
    Insert(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let at = any::<usize>();
    prop_oneof![
        at.prop_map(Mutation::Truncate),
        (at, any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        at.prop_map(Mutation::DuplicateLine),
        at.prop_map(Mutation::DeleteLine),
        (at, 0..NUMBERS.len()).prop_map(|(i, n)| Mutation::HugeNumber(i, n)),
        (at, 0..FRAGMENTS.len()).prop_map(|(i, f)| Mutation::Insert(i, f)),
    ]
}

fn lines(text: &[u8]) -> Vec<&[u8]> {
    text.split_inclusive(|&b| b == b'\n').collect()
}

/// `text` with `m` applied.
pub fn apply(text: &[u8], m: &Mutation) -> Vec<u8> {
    let mut t = text.to_vec();
    let at = |i: usize, len: usize| if len == 0 { 0 } else { i % len };
    match *m {
        Mutation::Truncate(i) => t.truncate(at(i, t.len() + 1)),
        Mutation::Flip(i, b) => {
            if !t.is_empty() {
                let i = at(i, t.len());
                t[i] ^= b | 1;
            }
        }
        Mutation::DuplicateLine(i) | Mutation::DeleteLine(i) => {
            let mut ls = lines(text);
            if !ls.is_empty() {
                let i = at(i, ls.len());
                if matches!(m, Mutation::DuplicateLine(_)) {
                    ls.insert(i, ls[i]);
                } else {
                    ls.remove(i);
                }
            }
            t = ls.concat();
        }
        Mutation::HugeNumber(i, n) => {
            // the run of digits at or after position i, else the end
            let start = (at(i, t.len() + 1)..t.len())
                .find(|&j| t[j].is_ascii_digit())
                .unwrap_or(t.len());
            let end = (start..t.len())
                .find(|&j| !t[j].is_ascii_digit())
                .unwrap_or(t.len());
            t.splice(start..end, NUMBERS[n].bytes());
        }
        Mutation::Insert(i, f) => {
            let i = at(i, t.len() + 1);
            t.splice(i..i, FRAGMENTS[f].bytes());
        }
    }
    t
}

/// Random bytes (half of them), or one of `seeds` with one to four mutations.
pub fn input(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    assert!(!seeds.is_empty(), "no seed");
    let n = seeds.len();
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..512),
        (0..n, proptest::collection::vec(mutation(), 1..5))
            .prop_map(move |(s, ms)| { ms.iter().fold(seeds[s].clone(), |t, m| apply(&t, m)) }),
    ]
}

/// `input` as text (invalid UTF-8 replaced), what the TOML and unit parsers take.
pub fn text(seeds: Vec<Vec<u8>>) -> impl Strategy<Value = String> {
    input(seeds).prop_map(|b| String::from_utf8_lossy(&b).into_owned())
}
