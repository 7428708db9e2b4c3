//! Command-line behaviour of `lockstep probe stream`, `sink` and `rr`: usage errors
//! exit with status 2 and a message naming the option; runs against nobody complete
//! and count what happened. No timing values are asserted.

use std::net::UdpSocket;
use std::process::{Command, Output};

use serde_json::Value;

fn lockstep(args: &[&str]) -> Output {
    let mut v: Vec<&str> = args.to_vec();
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        v.push("--no-mlock");
    }
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(&v)
        .output()
        .expect("the lockstep binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn usage_error(args: &[&str], expected: &[&str]) {
    let o = lockstep(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    for e in expected {
        assert!(err.contains(e), "{args:?}: stderr lacks \"{e}\":\n{err}");
    }
    assert!(o.stdout.is_empty(), "{args:?}: nothing on stdout");
}

/// A port nobody listens on (bound, read, released).
fn closed_port() -> String {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    format!("127.0.0.1:{}", s.local_addr().expect("addr").port())
}

#[test]
fn bad_rate_says_what_a_rate_looks_like() {
    usage_error(
        &["probe", "stream", "--to", "127.0.0.1:9", "--rate", "fast"],
        &["--rate: expected a packet rate like 100000pps"],
    );
}

#[test]
fn missing_to_is_named() {
    usage_error(&["probe", "stream", "--count", "5"], &["--to"]);
    usage_error(&["probe", "rr", "client", "--count", "5"], &["--to"]);
    usage_error(&["probe", "sink", "--count", "5"], &["--bind"]);
    usage_error(&["probe", "rr", "server"], &["--bind"]);
}

#[test]
fn bad_addresses_are_explained() {
    usage_error(
        &["probe", "stream", "--to", "nowhere"],
        &["--to: expected ADDR:PORT like 127.0.0.1:9000"],
    );
    usage_error(
        &["probe", "sink", "--bind", "127.0.0.1"],
        &["--bind: expected ADDR:PORT"],
    );
    usage_error(
        &["probe", "rr", "client", "--to", "1.2.3.4:99999"],
        &["--to: expected ADDR:PORT"],
    );
}

#[test]
fn sizes_below_the_header_name_the_minimum() {
    usage_error(
        &["probe", "stream", "--to", "127.0.0.1:9", "--size", "32B"],
        &["--size", "32B", "minimum of 64B"],
    );
    usage_error(
        &[
            "probe",
            "rr",
            "client",
            "--to",
            "127.0.0.1:9",
            "--size",
            "64B",
        ],
        &["--size", "64B", "minimum of 96B"],
    );
    usage_error(
        &["probe", "stream", "--to", "127.0.0.1:9", "--size", "70000B"],
        &["--size", "65507B"],
    );
}

#[test]
fn other_values_are_checked() {
    usage_error(
        &[
            "probe",
            "stream",
            "--to",
            "127.0.0.1:9",
            "--rate",
            "10pps",
            "--period",
            "1ms",
        ],
        &["--period"],
    );
    usage_error(
        &["probe", "stream", "--to", "127.0.0.1:9", "--preset", "ntsc"],
        &["st2022-6"],
    );
    usage_error(
        &["probe", "stream", "--to", "127.0.0.1:9", "--dscp", "64"],
        &["--dscp: expected a DSCP value"],
    );
    usage_error(
        &[
            "probe",
            "sink",
            "--bind",
            "127.0.0.1:9",
            "--idle-timeout",
            "soon",
        ],
        &["--idle-timeout: expected a positive duration like 2s, or off"],
    );
    usage_error(
        &[
            "probe",
            "rr",
            "client",
            "--to",
            "127.0.0.1:9",
            "--random-interval",
            "5ms..1ms",
        ],
        &["--random-interval: the minimum 5ms is above the maximum 1ms"],
    );
    usage_error(
        &[
            "probe",
            "rr",
            "client",
            "--to",
            "127.0.0.1:9",
            "--interval",
            "1ms",
            "--random-interval",
            "1ms..2ms",
        ],
        &["--random-interval"],
    );
}

#[test]
fn stream_to_nobody_completes_and_counts_refusals() {
    let to = closed_port();
    let o = lockstep(&[
        "probe", "stream", "--to", &to, "--count", "20", "--rate", "1000pps", "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let r = &doc["results"];
    let sent = r["sent"].as_u64().unwrap();
    let refused = r["send_errors"]["refused"].as_u64().unwrap();
    // ICMP port unreachable turns every other send into ECONNREFUSED: never fatal, and
    // every slot is either sent or counted.
    assert_eq!(sent + refused, 20, "{r}");
    assert!(refused > 0, "{r}");
}

#[test]
fn stream_takes_a_bit_rate_in_whole_frames() {
    let to = closed_port();
    let o = lockstep(&[
        "probe", "stream", "--to", &to, "--count", "3", "--rate", "10Mbit/s", "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    // a 64-byte payload is a 106-byte frame over IPv4: 848 bits every 84.8 us
    assert_eq!(doc["config"]["period_ns"], 84_800, "{}", doc["config"]);
    usage_error(
        &[
            "probe",
            "stream",
            "--to",
            "127.0.0.1:9",
            "--rate",
            "1Tbit/s",
        ],
        &["--rate: 1000Gbit/s in 106B frames is a packet every 1ns, above the limit of 100 Mpps"],
    );
}

#[test]
fn rr_client_without_server_counts_losses_warns_and_exits_3() {
    let to = closed_port();
    let o = lockstep(&[
        "probe",
        "rr",
        "client",
        "--to",
        &to,
        "--count",
        "4",
        "--timeout",
        "20ms",
        "--json",
    ]);
    // nothing answered: the document is still printed, and the exit status says the
    // environment failed (no server there)
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("none of the"), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let r = &doc["results"];
    let sent = r["sent"].as_u64().unwrap();
    let errors = r["send_errors"]["total"].as_u64().unwrap();
    assert_eq!(sent + errors, 4, "{r}");
    assert_eq!(r["lost"].as_u64(), Some(sent), "{r}");
    assert_eq!(r["answered"].as_u64(), Some(0));
    assert_eq!(r["rtt"]["count"].as_u64(), Some(0));
    let warnings = doc["warnings"].to_string();
    assert!(warnings.contains("no response came back"), "{warnings}");
}

#[test]
fn sink_duration_ends_a_silent_run() {
    let bind = closed_port();
    let o = lockstep(&[
        "probe",
        "sink",
        "--bind",
        &bind,
        "--duration",
        "100ms",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(doc["results"]["stop_reason"], "duration");
    assert_eq!(doc["results"]["probes"].as_u64(), Some(0));
    assert!(doc["warnings"]
        .to_string()
        .contains("no probe packet arrived"));
}

#[test]
fn a_negative_duration_is_named_not_taken_for_an_option() {
    usage_error(
        &["probe", "timer", "--interval", "-1ms"],
        &["--interval", "expected a positive duration", "-1ms"],
    );
    usage_error(
        &[
            "probe",
            "rr",
            "client",
            "--to",
            "127.0.0.1:9",
            "--timeout",
            "-5ms",
        ],
        &["--timeout", "expected a positive duration"],
    );
}
