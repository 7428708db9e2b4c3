//! The C library's allocator. glibc gives each new thread an allocation arena of its
//! own; memory freed into one arena is not reused by the others. A program that
//! measures on a second thread and then builds a large result on the first (the
//! simulator) would hold the freed measuring memory apart from the result's, about a
//! third more at its peak; one arena for every thread avoids that.

/// Makes every thread allocate from the one arena (`mallopt(M_ARENA_MAX, 1)`).
/// Call before starting threads. `false` where the C library is not glibc or
/// refused it (threads then keep arenas of their own: more memory, same results).
pub fn one_arena() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets an allocator parameter; M_ARENA_MAX with 1 is a
        // documented setting, valid at any time.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 1) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn glibc_takes_one_arena() {
        if cfg!(all(target_os = "linux", target_env = "gnu")) {
            assert!(super::one_arena());
        }
    }
}
