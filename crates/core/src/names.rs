//! The one character set for every name a user gives lockstep — scenarios, flows,
//! network servers, exported flows, controller flows and senders: 1 to
//! [`NAME_MAX`] of ASCII letters, digits and `_ - . :`, not starting with `.` or
//! `-`. Names end up in file and directory names, shell scripts, tc commands and
//! JSON; this set is safe in all of them (no `/`, no spaces or newlines, no quotes,
//! nothing a shell expands). Node names are stricter still (they become interface
//! names).

/// Longest name, in bytes.
pub const NAME_MAX: usize = 128;

/// Whether `name` is in the set.
pub fn is_valid(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= NAME_MAX
        && !name.starts_with(['.', '-'])
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':'))
}

/// `Ok` for a valid name; else the message every parser gives:
/// `"a b" is not a name (1 to 128 of letters, digits, _ - . :, not starting with . or -)`.
pub fn check(name: &str) -> Result<(), String> {
    if is_valid(name) {
        return Ok(());
    }
    Err(format!(
        "{} is not a name (1 to {NAME_MAX} of letters, digits, _ - . :, not starting with . or -)",
        quoted(name)
    ))
}

/// The name in quotes with anything unprintable escaped, for messages (so a
/// newline in a bad name cannot break an error line).
fn quoted(name: &str) -> String {
    let shown: String = name.chars().take(NAME_MAX + 8).collect();
    format!("{shown:?}")
}

/// Longest interface name the kernel takes, in bytes (`IFNAMSIZ` − 1).
pub const IFNAME_MAX: usize = 15;

/// Whether the kernel would accept `name` as an interface name (its
/// `dev_valid_name`: 1 to 15 bytes, not `.` or `..`, no `/`, `:`, NUL or space).
pub fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= IFNAME_MAX
        && name != "."
        && name != ".."
        && !name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_set() {
        for ok in [
            "f0",
            "A-probe-Ts10ms",
            "fifo.s0",
            "a:b_c",
            &"x".repeat(NAME_MAX),
        ] {
            assert!(is_valid(ok), "{ok}");
        }
        for bad in [
            "",
            "../../x",
            "a/b",
            "a b",
            "a\nrm -rf /",
            ".hidden",
            "-rf",
            "$(id)",
            "a'b",
            "é",
            &"x".repeat(NAME_MAX + 1),
        ] {
            assert!(!is_valid(bad), "{bad:?}");
        }
        assert_eq!(
            check("a\nb").unwrap_err(),
            "\"a\\nb\" is not a name (1 to 128 of letters, digits, _ - . :, not starting with . or -)"
        );
    }
}
