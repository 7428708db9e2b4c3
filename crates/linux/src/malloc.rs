//! The C library's allocator. glibc gives each new thread an allocation arena of its
//! own, and memory freed into one arena is not reused by the others: a program that
//! builds and measures on other threads and then makes a large result on the first
//! one (the simulator) would keep the freed memory of the others as well, about a
//! third more at its peak. Sharing one arena instead costs every allocation a lock
//! (the simulator ran up to a quarter slower); handing the free memory back to the
//! kernel once the other threads are done costs one call.

/// Hands the free memory of every arena back to the kernel (`malloc_trim(0)`).
/// `true` when some was given back; `false` also where the C library is not glibc.
pub fn give_back() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only releases free pages of the allocator's own
        // arenas; it is valid at any time, from any thread.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn free_memory_of_another_thread_can_be_given_back() {
        // a large block allocated and freed on a thread of its own (its arena)
        std::thread::spawn(|| drop(std::hint::black_box(vec![1u8; 64 << 20])))
            .join()
            .expect("thread");
        // whether anything was left to give back depends on the allocator's
        // thresholds; the call must be safe and must not disturb live memory
        let keep = vec![7u8; 1 << 20];
        super::give_back();
        assert!(keep.iter().all(|&b| b == 7));
    }
}
