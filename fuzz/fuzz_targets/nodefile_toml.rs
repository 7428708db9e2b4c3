//! Fuzz the node file (`lockstep node --config FILE.toml`): arbitrary text must never
//! panic `nodefile::parse`, and a file that parses must serialize
//! (`plan::node_file_toml`) into text that parses back to the same file.
//!
//! The stable, deterministic twin that runs in `cargo test` is
//! crates/plan/tests/fuzz_smoke.rs.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use lockstep_plan::nodefile;
use lockstep_plan::plan::node_file_toml;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(file) = nodefile::parse(Path::new("node.toml"), text) else {
        return;
    };
    let toml = node_file_toml(&file).expect("a parsed node file serializes");
    let again = match nodefile::parse(Path::new("node.toml"), &toml) {
        Ok(f) => f,
        Err(e) => panic!("a parsed node file, written out, no longer parses: {e}\n{toml}"),
    };
    // (a NaN would make the file unequal to itself)
    if file == file {
        assert_eq!(again, file, "round trip changed the node file\n{toml}");
    }
});
