//! Code shared by several integration tests (each test file that needs it says
//! `mod common;`).

// each test file uses a part of this
#![allow(dead_code)]

pub mod cli;
pub mod ctl;
pub mod lab;
pub mod line_props;
