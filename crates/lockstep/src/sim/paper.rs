//! The published figures a scenario reproduces, to print next to ours:
//! baldi2006 Tables I and II (maximum end-to-end delay jitter per flow, FIFO and TDP,
//! on the four-router mesh at 1002- and 482-byte IP packets).

/// Per flow: (name, FIFO jitter, TDP jitter), in microseconds.
pub type Table = &'static [(&'static str, u32, u32)];

/// baldi2006 Table I: 1002-byte IP packets, 6.4 Mb/s per flow, 5 loops, d = 3.
pub const BALDI_TABLE_I: Table = &[
    ("f1234", 3100, 180),
    ("f123", 1970, 320),
    ("f234", 2270, 340),
    ("f341", 2270, 360),
    ("f412", 2310, 440),
];

/// baldi2006 Table II: 482-byte IP packets, 3.2 Mb/s per flow, 5–15 loops, d = 4.
pub const BALDI_TABLE_II: Table = &[
    ("f1234", 3580, 150),
    ("f123", 4540, 460),
    ("f234", 4050, 400),
    ("f341", 5100, 450),
    ("f412", 3980, 420),
];

/// The table a scenario (by its name) reproduces, with its caption.
pub fn table_for(scenario: &str) -> Option<(&'static str, Table)> {
    match scenario {
        "mesh4" => Some(("baldi2006 Table I (1002-byte IP packets)", BALDI_TABLE_I)),
        "mesh4-482" => Some(("baldi2006 Table II (482-byte IP packets)", BALDI_TABLE_II)),
        _ => None,
    }
}

/// The paper's (FIFO, TDP) jitter of a flow, in ns.
pub fn figures(table: Table, flow: &str) -> Option<(i64, i64)> {
    table
        .iter()
        .find(|(n, _, _)| *n == flow)
        .map(|&(_, f, t)| (i64::from(f) * 1000, i64::from(t) * 1000))
}
