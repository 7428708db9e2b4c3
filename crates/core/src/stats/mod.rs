//! Statistics every measurement reports (SPEC §6).
