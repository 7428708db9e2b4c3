//! Small helpers shared by the feature files: errno, timespec conversions, cpu lists.

use std::io;

/// The `errno` of the last failed call, as an `io::Error`.
pub(crate) fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// Nanoseconds since the epoch of a clock from a kernel `timespec`.
/// (`time_t` and `c_long` are 32 bits on some targets: the casts are not always no-ops.)
#[inline]
#[allow(clippy::unnecessary_cast)]
pub(crate) fn timespec_to_ns(ts: &libc::timespec) -> i64 {
    (ts.tv_sec as i64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as i64)
}

/// A kernel `timespec` for `ns` nanoseconds. Negative values round toward minus
/// infinity so that `tv_nsec` stays in `0..1e9`, as the kernel requires.
#[inline]
pub(crate) fn ns_to_timespec(ns: i64) -> libc::timespec {
    libc::timespec {
        tv_sec: ns.div_euclid(1_000_000_000) as libc::time_t,
        tv_nsec: ns.rem_euclid(1_000_000_000) as libc::c_long,
    }
}

/// Formats CPU numbers the way the kernel's cpulist files do: `0-3,6,8-9`.
pub(crate) fn format_cpulist(cpus: &[usize]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            end += 1;
            i += 1;
        }
        if !out.is_empty() {
            out.push(',');
        }
        if start == end {
            out.push_str(&start.to_string());
        } else {
            out.push_str(&format!("{start}-{end}"));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(clippy::unnecessary_cast)]
    fn timespec_round_trip_including_negative() {
        for ns in [
            0,
            1,
            999_999_999,
            1_000_000_000,
            -1,
            -1_000_000_001,
            1_700_000_000_123_456_789,
        ] {
            let ts = ns_to_timespec(ns);
            assert!((0..1_000_000_000).contains(&(ts.tv_nsec as i64)));
            assert_eq!(timespec_to_ns(&ts), ns);
        }
    }

    #[test]
    fn cpulist_formatting() {
        assert_eq!(format_cpulist(&[]), "");
        assert_eq!(format_cpulist(&[0]), "0");
        assert_eq!(format_cpulist(&[0, 1]), "0-1");
        assert_eq!(format_cpulist(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
    }
}
