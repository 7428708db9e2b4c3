//! A hint to the CPU: start loading a cache line that is about to be read. It
//! changes no result and no state the program can see; where the target has no
//! prefetch instruction it does nothing. The simulator uses it to overlap the
//! memory latency of the next events' nodes and packets with the current one's work.

/// Starts loading the cache line holding `p` into the first-level cache.
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch reads nothing the program sees and never faults, whatever
    // the address (a line that cannot be loaded is skipped by the CPU).
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
