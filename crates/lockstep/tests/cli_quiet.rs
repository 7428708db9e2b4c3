//! `-q`/`--quiet`, before or after the subcommand: stderr holds nothing but an error;
//! the result still goes to stdout (the table, or with --json the document alone).

use std::path::Path;
use std::process::{Command, Output};

fn lockstep(args: &[&str]) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .current_dir(root)
        .output()
        .expect("lockstep runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn a_quiet_simulation_prints_the_document_alone() {
    let dir = std::env::temp_dir().join(format!("lockstep-quiet-sim-{}", std::process::id()));
    let d = dir.to_str().expect("utf-8 path");
    let loud = lockstep(&[
        "sim",
        "run",
        "scenarios/line.toml",
        "-D",
        "20ms",
        "--json",
        "-o",
        d,
    ]);
    assert_eq!(loud.status.code(), Some(0), "{}", text(&loud.stderr));
    assert!(
        !loud.stderr.is_empty(),
        "without -q the table goes to stderr"
    );
    for args in [
        &[
            "-q",
            "sim",
            "run",
            "scenarios/line.toml",
            "-D",
            "20ms",
            "--json",
            "-o",
            d,
        ][..],
        &[
            "sim",
            "run",
            "scenarios/line.toml",
            "-D",
            "20ms",
            "--json",
            "-o",
            d,
            "--quiet",
        ][..],
    ] {
        let quiet = lockstep(args);
        assert_eq!(quiet.status.code(), Some(0), "{args:?}");
        assert_eq!(text(&quiet.stderr), "", "{args:?}");
        let doc: serde_json::Value =
            serde_json::from_slice(&quiet.stdout).expect("JSON alone on stdout");
        assert!(doc.get("results").is_some(), "{args:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn quiet_keeps_the_table_on_stdout_and_the_error_on_stderr() {
    let calc = lockstep(&["calc", "examples/loeser-fast-ethernet.toml", "-q"]);
    assert_eq!(calc.status.code(), Some(0), "{}", text(&calc.stderr));
    assert!(!calc.stdout.is_empty());
    assert_eq!(text(&calc.stderr), "");
    let json = lockstep(&["calc", "examples/loeser-fast-ethernet.toml", "--json", "-q"]);
    assert_eq!(text(&json.stderr), "");
    let bad = lockstep(&["-q", "calc", "no-such-network.toml"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).starts_with("lockstep: "),
        "{}",
        text(&bad.stderr)
    );
}

#[test]
fn a_quiet_timer_probe_says_nothing_on_stderr() {
    let out = lockstep(&[
        "probe",
        "timer",
        "--interval",
        "1ms",
        "--duration",
        "20ms",
        "--no-mlock",
        "--json",
        "-q",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), "");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    assert!(doc.get("results").is_some());
}
