//! Every wait gives way to Ctrl-C / SIGTERM: a run asked to stop prints what it has
//! and exits instead of finishing a long sleep; `--duration` ends a run even when its
//! first wake-up would come later.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn start(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the lockstep binary runs")
}

/// Sends SIGINT after `after`, then waits (bounded) for the exit; the output and
/// how long the stop took.
fn interrupt(mut child: Child, after: Duration) -> (Option<i32>, String, Duration) {
    std::thread::sleep(after);
    // SAFETY: kill(2) on our own child's PID.
    let rc = unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert_eq!(rc, 0);
    let t0 = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if t0.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("still running 20 s after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let took = t0.elapsed();
    let out = child.wait_with_output().expect("output");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text, took)
}

/// Starts `args` and interrupts it once it runs: a SIGINT that arrives before the
/// handler is installed ends the process by signal, so that is retried with a later
/// signal (bounded).
fn run_and_interrupt(args: &[&str]) -> (Option<i32>, String, Duration) {
    let mut last = None;
    for after_ms in [400, 1500, 4000] {
        let r = interrupt(start(args), Duration::from_millis(after_ms));
        if r.0.is_some() {
            return r;
        }
        last = Some(r);
    }
    last.expect("tried")
}

#[test]
fn ctrl_c_ends_a_long_timer_wait_with_the_results() {
    let (code, text, took) = run_and_interrupt(&[
        "probe",
        "timer",
        "--interval",
        "10s",
        "-D",
        "60s",
        "--no-mlock",
    ]);
    eprintln!("stopped {took:?} after SIGINT");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("stopped by: signal"), "{text}");
}

#[test]
fn ctrl_c_ends_a_wait_for_a_far_start() {
    let (code, text, took) = run_and_interrupt(&[
        "probe",
        "stream",
        "--to",
        "127.0.0.1:9",
        "--rate",
        "100pps",
        "--start-at-ns",
        "9000000000000000000",
        "-D",
        "1s",
        "--no-mlock",
    ]);
    eprintln!("stopped {took:?} after SIGINT");
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("sent: 0"), "{text}");
}

#[test]
fn the_duration_ends_a_run_before_its_first_wake_up() {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args([
            "probe",
            "timer",
            "--interval",
            "10s",
            "-D",
            "0.3s",
            "--no-mlock",
        ])
        .output()
        .expect("runs");
    eprintln!("took {:?}", t0.elapsed());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(text.contains("stopped by: duration"), "{text}");
}
