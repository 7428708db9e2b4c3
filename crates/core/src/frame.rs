//! The common time reference (SPEC §1).
