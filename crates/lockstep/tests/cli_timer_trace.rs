//! `probe timer --threshold … --trace FILE`: the kernel's events in a bounded buffer,
//! the end of the trace saved at the first late wake-up, tracefs put back as it was.
//! Needs root (it mounts tracefs and writes its files); skipped otherwise.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use lockstep_linux::tracefs::SESSION_EVENTS as EVENTS;
use serde_json::Value;

const TRACEFS: &str = "/sys/kernel/tracing";

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

fn mounted() -> bool {
    std::fs::read_to_string("/proc/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split_whitespace().nth(1) == Some(TRACEFS))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(TRACEFS).join(rel))
        .unwrap_or_else(|e| format!("unreadable: {e}"))
        .trim()
        .to_string()
}

/// What a trace session changes: tracing_on, the buffer size in effect, each event's
/// enable value.
fn state() -> Vec<(String, String)> {
    let kb = read("buffer_size_kb");
    let kb = kb
        .split("expanded:")
        .nth(1)
        .map_or(kb.clone(), |s| s.trim().trim_end_matches(')').to_string());
    let mut v = vec![
        ("tracing_on".to_string(), read("tracing_on")),
        ("buffer_size_kb".to_string(), kb),
    ];
    for e in EVENTS {
        v.push((e.to_string(), read(&format!("events/{e}/enable"))));
    }
    v
}

/// Writes the buffer size in effect back to tracefs. Some kernels keep the ring
/// buffer in pages of 4080 data bytes and round a size written to whole pages
/// (6.18: `1408` reads back as `1410`), and a buffer not yet used reads as
/// `7 (expanded: 1408)`, a state no write returns to. A session restores the size
/// by writing it, so what it can put back is the size as the kernel rounds it;
/// writing it once here makes `before` that size (writing a rounded size again
/// keeps it).
fn settle_buffer_size() {
    let (_, kb) = state().swap_remove(1);
    let _ = std::fs::write(Path::new(TRACEFS).join("buffer_size_kb"), kb);
}

fn run(file: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args([
            "probe",
            "timer",
            "-i",
            "1ms",
            "-D",
            "2s",
            "--threshold",
            "1ns",
        ])
        .arg("--trace")
        .arg(file)
        .args(["-q", "--json"])
        .output()
        .expect("the lockstep binary runs")
}

fn trace_file(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lockstep-trace-{name}-{}.txt", std::process::id()))
}

/// Runs to the first late wake-up and checks the saved trace and the document.
fn check_run(file: &Path) {
    let o = run(file);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "the threshold is crossed: {err}");
    let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    let t = &doc["results"]["trace"];
    let text = std::fs::read_to_string(file).expect("the trace file is written");
    assert!(!text.is_empty());
    let marker = t["marker"].as_str().expect("a marker");
    assert!(
        text.contains(&format!("tracing_mark_write: {marker}")),
        "{text}"
    );
    assert_eq!(t["tracing_stopped"], Value::Bool(true), "{t}");
    assert_eq!(t["file"].as_str(), file.to_str());
    assert_eq!(t["saved_bytes"].as_u64(), Some(text.len() as u64));
    assert!(t["events"].as_array().is_some_and(|e| !e.is_empty()), "{t}");
}

#[test]
fn threshold_with_trace_saves_the_trace_and_puts_tracefs_back() {
    if !is_root() {
        eprintln!("skipped: --trace needs root");
        return;
    }
    let was_mounted = mounted();
    // the state before can only be read with tracefs mounted
    if !was_mounted {
        let ok = Command::new("mount")
            .args(["-t", "tracefs", "nodev", TRACEFS])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("skipped: tracefs cannot be mounted here");
            return;
        }
    }
    let file = trace_file("mounted");
    settle_buffer_size();
    let before = state();
    check_run(&file);
    assert_eq!(state(), before, "tracefs is back as it was");
    let _ = std::fs::remove_file(&file);
    // an error after the trace started (a CPU that is not there) puts it back too
    let o = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args([
            "probe",
            "timer",
            "--cpu",
            "4095",
            "--threshold",
            "1ns",
            "--trace",
        ])
        .arg(&file)
        .output()
        .expect("the lockstep binary runs");
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(state(), before, "tracefs is back as it was after an error");
    assert!(!file.exists(), "no trace is saved without a crossing");
    if !was_mounted {
        let _ = Command::new("umount").arg(TRACEFS).status();
        // tracefs not mounted: the run mounts it and unmounts it again
        let file = trace_file("unmounted");
        check_run(&file);
        assert!(!mounted(), "the run unmounts the tracefs it mounted");
        let _ = std::fs::remove_file(&file);
    }
}

#[test]
fn trace_needs_a_threshold() {
    let o = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["probe", "timer", "-l", "1", "--trace"])
        .arg(trace_file("no-threshold"))
        .output()
        .expect("the lockstep binary runs");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--threshold"));
}
