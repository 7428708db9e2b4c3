//! The kernel's CPU-list syntax: `0-3,6,8-9`, and the stride form `0-7:2/4`.

/// Largest CPU number accepted in a cpulist (guards against absurd ranges).
pub const MAX_CPU: usize = 1 << 16;

/// Parses a CPU list (empty, whitespace or `(null)` = none), sorted without duplicates.
pub fn parse(text: &str) -> Result<Vec<usize>, String> {
    let text = text.trim();
    // Every CPU named is marked in a table of CPUs 0..=the largest named, so that a
    // list that names a CPU or a range many times costs its length, not a sort per
    // part (a 4 kB list repeating 0-65536 took seconds under the audit_text fuzz
    // target), and holds each CPU once.
    let mut seen: Vec<bool> = Vec::new();
    if text.is_empty() || text == "(null)" {
        return Ok(Vec::new());
    }
    let bad = |part: &str| format!("malformed cpu list \"{text}\" at \"{part}\"");
    let num = |s: &str, part: &str| -> Result<usize, String> {
        let v: usize = s.trim().parse().map_err(|_| bad(part))?;
        if v > MAX_CPU {
            return Err(format!("cpu {v} out of range in \"{text}\""));
        }
        Ok(v)
    };
    for part in text.split(',') {
        let (range, stride) = match part.split_once(':') {
            Some((r, s)) => (r, Some(s)),
            None => (part, None),
        };
        let (start, end) = match range.split_once('-') {
            Some((a, b)) => (num(a, part)?, num(b, part)?),
            None => {
                let v = num(range, part)?;
                (v, v)
            }
        };
        if end < start {
            return Err(bad(part));
        }
        let (used, group) = match stride {
            None => (1, 1),
            Some(s) => {
                let (u, g) = s.split_once('/').ok_or_else(|| bad(part))?;
                let (u, g) = (num(u, part)?, num(g, part)?);
                if u == 0 || g == 0 || u > g {
                    return Err(bad(part));
                }
                (u, g)
            }
        };
        if seen.len() <= end {
            seen.resize(end + 1, false);
        }
        if used == group {
            if let Some(cpus) = seen.get_mut(start..=end) {
                cpus.fill(true);
            }
            continue;
        }
        // the first `used` CPUs of every `group`, from `start`
        let mut first = start;
        while first <= end {
            let last = first.saturating_add(used - 1).min(end);
            if let Some(cpus) = seen.get_mut(first..=last) {
                cpus.fill(true);
            }
            first = match first.checked_add(group) {
                Some(f) => f,
                None => break,
            };
        }
    }
    Ok(seen
        .iter()
        .enumerate()
        .filter_map(|(cpu, &on)| on.then_some(cpu))
        .collect())
}

/// Formats CPUs as the kernel does: `0-3,6,8-9` (empty for none).
pub fn format(cpus: &[usize]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_kernel_forms() {
        assert_eq!(parse("0-3,6,8-9\n").unwrap(), vec![0, 1, 2, 3, 6, 8, 9]);
        assert_eq!(parse("\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse("(null)\n").unwrap(), Vec::<usize>::new());
        assert_eq!(parse("0-7:2/4").unwrap(), vec![0, 1, 4, 5]);
        assert_eq!(parse("3,1,1").unwrap(), vec![1, 3]);
        assert!(parse("3-1").is_err());
        assert!(parse("a").is_err());
        assert!(parse("1,,2").is_err());
        assert!(parse("0-99999999999").is_err());
        assert_eq!(
            parse("0-65537").unwrap_err(),
            "cpu 65537 out of range in \"0-65537\""
        );
    }

    #[test]
    fn a_repeated_range_is_kept_once() {
        let text = ["0-65536"; 8].join(",");
        let cpus = parse(&text).unwrap();
        assert_eq!(cpus.len(), 65_537);
        assert!(cpus.capacity() < 4 * 65_537, "{}", cpus.capacity());
    }

    #[test]
    fn a_long_list_of_repeats_parses_in_one_pass() {
        // found by the audit_text fuzz target: a range then a CPU named thousands of
        // times sorted the whole list again for every part (over a minute for the
        // audit of one 4 kB input)
        let text = format!("0-65536,{}", vec!["1"; 2000].join(","));
        assert_eq!(parse(&text).unwrap(), (0..=65_536).collect::<Vec<_>>());
        let text = vec!["0-65536:1/3"; 500].join(",");
        let cpus = parse(&text).unwrap();
        assert_eq!(cpus.len(), 21_846);
        assert!(cpus.iter().all(|c| c % 3 == 0));
        assert_eq!(parse("9,2-4:2/3,0-8:1/4,7").unwrap(), [0, 2, 3, 4, 7, 8, 9]);
    }

    #[test]
    fn formats_round_trip() {
        assert_eq!(format(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format(&[]), "");
        assert_eq!(format(&[5, 1]), "1,5");
        for s in ["0", "0-1", "1,3,5-7"] {
            assert_eq!(format(&parse(s).unwrap()), s);
        }
    }
}
