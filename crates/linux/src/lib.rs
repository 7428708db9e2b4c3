//! # lockstep-linux — every system call lockstep makes
