//! Transparent huge pages for a large working set. A simulated network of ten
//! thousand routers spreads gigabytes of small tables over the heap and reads them
//! in no particular order: with 4 KiB pages nearly every packet-hop also misses the
//! processor's address-translation cache. Where the kernel hands out huge pages only
//! on request (`transparent_hugepage/enabled` says `madvise`, Debian's default), the
//! heap's large anonymous mappings are asked for them (`MADV_HUGEPAGE`) and folded
//! into them at once (`MADV_COLLAPSE`, Linux 6.1) instead of waiting for the kernel's
//! background scanner. Nothing is changed where the kernel already uses them for
//! everything (`always`) or is told never to (`never`).

use std::fs;

/// What the kernel allows, from `/sys/kernel/mm/transparent_hugepage/enabled`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    Always,
    Madvise,
    Never,
    /// No such file (a kernel without transparent huge pages) or an unknown value.
    Unavailable,
}

/// What [`back_heap`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backed {
    /// Bytes now marked for huge pages.
    pub marked: u64,
    /// Bytes the kernel folded into huge pages at once (`0` where `MADV_COLLAPSE`
    /// is missing: the background scanner does it later).
    pub collapsed: u64,
}

const HUGE: u64 = 2 << 20;
/// Mappings smaller than this are not worth a call.
const MIN_MAPPING: u64 = 8 * HUGE;
/// Below this much heap, the translation cache's misses cost less than folding the
/// pages does (about 3 s per GiB on a small virtual machine).
const MIN_HEAP: u64 = 512 << 20;
const MADV_COLLAPSE: libc::c_int = 25;

/// The kernel's policy (the value in brackets).
pub fn policy() -> Policy {
    match fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled") {
        Ok(s) => parse_policy(&s),
        Err(_) => Policy::Unavailable,
    }
}

fn parse_policy(s: &str) -> Policy {
    let chosen = s.split('[').nth(1).and_then(|r| r.split(']').next());
    match chosen {
        Some("always") => Policy::Always,
        Some("madvise") => Policy::Madvise,
        Some("never") => Policy::Never,
        _ => Policy::Unavailable,
    }
}

/// Asks for huge pages behind the process's large anonymous read-write mappings
/// (the heap and the allocator's arenas) when the policy is `madvise` and they
/// hold at least 512 MiB; a no-op otherwise. Only a hint: a mapping the kernel
/// refuses is left as it was.
pub fn back_heap() -> Backed {
    back_heap_over(MIN_HEAP)
}

/// [`back_heap`] when the mappings hold at least `min_heap` bytes.
fn back_heap_over(min_heap: u64) -> Backed {
    if policy() != Policy::Madvise {
        return Backed::default();
    }
    let Ok(maps) = fs::read_to_string("/proc/self/maps") else {
        return Backed::default();
    };
    let ranges: Vec<(u64, u64)> = anonymous_rw(&maps)
        .into_iter()
        .map(|(start, end)| (start.next_multiple_of(HUGE), end / HUGE * HUGE))
        .filter(|&(a, b)| b > a && b - a >= MIN_MAPPING)
        .collect();
    if ranges.iter().map(|(a, b)| b - a).sum::<u64>() < min_heap {
        return Backed::default();
    }
    let mut done = Backed::default();
    for (a, b) in ranges {
        let len = (b - a) as usize;
        let ptr = a as usize as *mut libc::c_void;
        // SAFETY: [a, b) lies inside a mapping of this process; both advices change
        // only how its pages are backed, never their contents.
        unsafe {
            if libc::madvise(ptr, len, libc::MADV_HUGEPAGE) != 0 {
                continue;
            }
            done.marked += b - a;
            if libc::madvise(ptr, len, MADV_COLLAPSE) == 0 {
                done.collapsed += b - a;
            }
        }
    }
    done
}

/// The `[start, end)` of each private anonymous read-write mapping (no file, or the
/// heap) in a `/proc/PID/maps` text.
fn anonymous_rw(maps: &str) -> Vec<(u64, u64)> {
    maps.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            let path = f.nth(3);
            if !perms.starts_with("rw") || !perms.ends_with('p') {
                return None;
            }
            if path.is_some_and(|p| p != "[heap]") {
                return None;
            }
            let (s, e) = range.split_once('-')?;
            Some((
                u64::from_str_radix(s, 16).ok()?,
                u64::from_str_radix(e, 16).ok()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_is_the_bracketed_word() {
        assert_eq!(parse_policy("always [madvise] never\n"), Policy::Madvise);
        assert_eq!(parse_policy("[always] madvise never\n"), Policy::Always);
        assert_eq!(parse_policy("always madvise [never]\n"), Policy::Never);
        assert_eq!(parse_policy("garbage"), Policy::Unavailable);
    }

    #[test]
    fn only_private_anonymous_writable_mappings_are_taken() {
        let maps = "\
55d0c0000000-55d0c0100000 r-xp 00000000 fd:01 123 /usr/bin/lockstep
55d0c2000000-55d0d2000000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0004000000 rw-p 00000000 00:00 0 
7f0004000000-7f0008000000 ---p 00000000 00:00 0 
7f0010000000-7f0010200000 rw-s 00000000 00:05 9 /dev/shm/x
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]
";
        assert_eq!(
            anonymous_rw(maps),
            vec![
                (0x55d0c2000000, 0x55d0d2000000),
                (0x7f0000000000, 0x7f0004000000)
            ]
        );
    }

    #[test]
    fn backing_the_heap_leaves_its_contents_alone() {
        let keep = vec![7u8; 64 << 20];
        let done = back_heap_over(0);
        assert!(done.collapsed <= done.marked);
        assert!(keep.iter().all(|&b| b == 7));
    }
}
