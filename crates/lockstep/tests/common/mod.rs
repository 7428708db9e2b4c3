//! Code shared by several integration tests (each test file that needs it says
//! `mod common;`).

pub mod line_props;
