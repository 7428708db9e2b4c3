//! The probes' habits users bring from cyclictest and oslat: the timer's text
//! histogram, one measuring thread per CPU (`--cpus`). Only structure and counts are
//! asserted, never timing values (the machine is shared).

use std::process::{Command, Output};

use serde_json::Value;

fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is one JSON document ({e}): {}\nstderr: {}",
            stdout(o),
            stderr(o)
        )
    })
}

/// The counts of the histogram lines after `heading` (`  [from, to)  count  ###`).
fn histogram_counts(text: &str, heading: &str) -> Vec<u64> {
    text.lines()
        .skip_while(|l| !l.starts_with(heading))
        .skip(1)
        .take_while(|l| l.starts_with("  ["))
        .map(|l| {
            let after = l.split(')').nth(1).unwrap_or_default();
            let mut f = after.split_whitespace();
            let count = f.next().and_then(|c| c.parse().ok()).unwrap_or(0);
            assert!(
                f.next().is_some_and(|bar| bar.chars().all(|c| c == '#')),
                "{l}"
            );
            count
        })
        .collect()
}

#[test]
fn timer_text_ends_with_a_histogram_of_every_wakeup() {
    let o = lockstep(&[
        "probe",
        "timer",
        "-i",
        "1ms",
        "-l",
        "50",
        "--no-mlock",
        "-q",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = stdout(&o);
    let counts = histogram_counts(&text, "latency histogram");
    assert!(!counts.is_empty(), "{text}");
    assert_eq!(counts.iter().sum::<u64>(), 50, "{text}");
    let help = stdout(&lockstep(&["probe", "timer", "--help"]));
    assert!(help.contains("latency histogram"), "{help}");
}

/// `0-1` on a host with two CPUs or more this process may use, else `0`.
fn cpu_list() -> (&'static str, usize) {
    match std::thread::available_parallelism().map(|n| n.get()) {
        Ok(n) if n >= 2 => ("0-1", 2),
        _ => ("0", 1),
    }
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "lockstep-probe-habits-{name}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

#[test]
fn timer_cpus_measures_on_each_cpu_and_merges() {
    let (list, n) = cpu_list();
    let dir = scratch("timer-cpus");
    let out = dir.display().to_string();
    let o = lockstep(&[
        "probe",
        "timer",
        "--cpus",
        list,
        "-i",
        "1ms",
        "-l",
        "20",
        "--no-mlock",
        "--json",
        "--output",
        &out,
        "--samples",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&o);
    let r = &doc["results"];
    let per = r["per_cpu"].as_array().expect("per_cpu");
    assert_eq!(per.len(), n, "{r}");
    for (i, p) in per.iter().enumerate() {
        assert_eq!(p["cpu"].as_u64(), Some(i as u64), "{p}");
        assert_eq!(p["samples"].as_u64(), Some(20), "{p}");
        assert_eq!(p["latency"]["count"].as_u64(), Some(20), "{p}");
        assert_eq!(p["realtime"]["cpu"].as_u64(), Some(i as u64), "{p}");
        assert!(p["tid"].as_i64().is_some_and(|t| t > 0), "{p}");
        let csv = dir.join(format!("samples.cpu{i}.csv"));
        let rows = std::fs::read_to_string(&csv).expect("a sample file per CPU");
        assert_eq!(rows.lines().count(), 21, "{}", csv.display());
    }
    assert_eq!(r["samples"].as_u64(), Some(20 * n as u64), "{r}");
    assert_eq!(r["latency"]["count"].as_u64(), Some(20 * n as u64));
    assert_eq!(doc["realtime"]["cpus"].as_array().map(Vec::len), Some(n));
    assert!(doc["realtime"]["cpu"].is_null());
    // the text (on stderr beside --json, unless -q): cyclictest's line per thread,
    // then the merged one
    let text = stderr(&o);
    for i in 0..n {
        assert!(text.contains(&format!("T:{i:>2} (")), "{text}");
    }
    assert!(text.contains("T:all ("), "{text}");
    let counts = histogram_counts(&text, "latency histogram");
    assert_eq!(counts.iter().sum::<u64>(), 20 * n as u64, "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn noise_cpus_measures_on_each_cpu_and_merges() {
    let (list, n) = cpu_list();
    let o = lockstep(&[
        "probe",
        "noise",
        "--cpus",
        list,
        "--period",
        "1ms",
        "-l",
        "30",
        "--no-mlock",
        "-q",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&o);
    let r = &doc["results"];
    let per = r["per_cpu"].as_array().expect("per_cpu");
    assert_eq!(per.len(), n, "{r}");
    for p in per {
        assert_eq!(p["ticks"].as_u64(), Some(30), "{p}");
        assert_eq!(p["deviation"]["count"].as_u64(), Some(29), "{p}");
    }
    assert_eq!(r["ticks"].as_u64(), Some(30 * n as u64), "{r}");
    assert_eq!(r["deviation"]["count"].as_u64(), Some(29 * n as u64), "{r}");
    let o = lockstep(&[
        "probe",
        "noise",
        "--cpus",
        list,
        "-l",
        "1000",
        "--no-mlock",
        "-q",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let r = &json(&o)["results"];
    assert_eq!(r["reads"].as_u64(), Some(1000 * n as u64), "{r}");
    assert_eq!(r["per_cpu"].as_array().map(Vec::len), Some(n));
}

#[test]
fn cpus_and_cpu_together_or_a_bad_list_are_usage_errors() {
    for probe in ["timer", "noise"] {
        let o = lockstep(&["probe", probe, "--cpus", "0", "--cpu", "0", "-l", "1"]);
        assert_eq!(o.status.code(), Some(2), "{probe}: {}", stderr(&o));
        assert!(stderr(&o).contains("--cpu"), "{}", stderr(&o));
        for bad in ["", "3-1", "x", "0-70000"] {
            let o = lockstep(&["probe", probe, "--cpus", bad, "-l", "1"]);
            assert_eq!(
                o.status.code(),
                Some(2),
                "{probe} --cpus {bad:?}: {}",
                stderr(&o)
            );
            assert!(stderr(&o).contains("--cpus"), "{}", stderr(&o));
        }
    }
    // a CPU that is not online: refused before measuring
    let o = lockstep(&[
        "probe",
        "timer",
        "--cpus",
        "0,4095",
        "-l",
        "1",
        "--no-mlock",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("CPU 4095"), "{}", stderr(&o));
}

/// A UDP socket on loopback for a stream to send to, and how many datagrams it got.
fn receiver() -> (std::net::UdpSocket, String) {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.set_read_timeout(Some(std::time::Duration::from_millis(200)))
        .expect("timeout");
    let to = s.local_addr().expect("addr").to_string();
    (s, to)
}

fn drain(s: &std::net::UdpSocket) -> u64 {
    let mut buf = [0u8; 2048];
    let mut n = 0;
    while s.recv(&mut buf).is_ok() {
        n += 1;
    }
    n
}

#[test]
fn stream_priority_class_marks_the_socket_and_the_stream_runs() {
    let (rx, to) = receiver();
    let o = lockstep(&[
        "probe",
        "stream",
        "--to",
        &to,
        "--priority-class",
        "3",
        "-l",
        "20",
        "--no-mlock",
        "-q",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc = json(&o);
    assert_eq!(
        doc["config"]["priority_class"].as_u64(),
        Some(3),
        "{}",
        doc["config"]
    );
    assert!(doc["config"]["txtime"].is_null());
    assert_eq!(doc["results"]["sent"].as_u64(), Some(20));
    assert_eq!(drain(&rx), 20);
    let o = lockstep(&[
        "probe",
        "stream",
        "--to",
        &to,
        "--priority-class",
        "16",
        "-l",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--priority-class"), "{}", stderr(&o));
}

#[test]
fn stream_txtime_runs_only_where_an_etf_qdisc_launches_the_packets() {
    let (rx, to) = receiver();
    let o = lockstep(&[
        "probe",
        "stream",
        "--to",
        &to,
        "--txtime",
        "-l",
        "20",
        "--no-mlock",
        "-q",
        "--json",
    ]);
    let err = stderr(&o);
    match o.status.code() {
        // the usual case: no etf qdisc on lo (or none in this kernel), or no privilege
        Some(3) => {
            assert!(err.contains("--txtime: "), "{err}");
            assert!(
                err.contains("need an etf qdisc on lo") || err.contains("CAP_NET_ADMIN"),
                "{err}"
            );
            assert_eq!(drain(&rx), 0, "nothing is sent when --txtime is refused");
        }
        Some(0) => {
            let doc = json(&o);
            assert_eq!(doc["config"]["txtime"]["lead_ns"].as_i64(), Some(500_000));
            assert_eq!(doc["results"]["sent"].as_u64(), Some(20));
        }
        other => panic!("--txtime exited with {other:?}: {err}"),
    }
}

#[test]
fn every_probe_help_says_how_it_waits_by_default() {
    let help = |args: &[&str]| {
        let mut a = vec!["probe"];
        a.extend_from_slice(args);
        a.push("--help");
        let o = lockstep(&a);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        // clap wraps long help at the terminal's width: compare words, not lines
        stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ")
    };
    for p in [&["timer"][..], &["stream"], &["rr", "client"]] {
        let h = help(p);
        assert!(h.contains("the default of every probe"), "{p:?}: {h}");
        assert!(h.contains("[default: sleep]"), "{p:?}: {h}");
    }
    for p in [&["sink"][..], &["rr", "server"], &["rr", "client"]] {
        let h = help(p);
        assert!(
            h.contains("Blocking (sleeping until a packet comes) is the default"),
            "{p:?}: {h}"
        );
    }
    assert!(help(&["noise"]).contains("never sleeps"));
}

#[test]
fn timer_cpus_stop_together_at_the_first_crossing() {
    let (list, n) = cpu_list();
    let o = lockstep(&[
        "probe",
        "timer",
        "--cpus",
        list,
        "-i",
        "1ms",
        "-D",
        "5s",
        "--threshold",
        "1ns",
        "--no-mlock",
        "-q",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc = json(&o);
    let r = &doc["results"];
    assert_eq!(r["stopped_by"], "threshold", "{r}");
    assert!(r["threshold"]["latency_ns"].as_i64().is_some(), "{r}");
    assert_eq!(doc["check_failed"], true);
    let per = r["per_cpu"].as_array().expect("per_cpu");
    assert_eq!(per.len(), n);
    // the crossing thread stops at once, the others at their next wake-up
    for p in per {
        assert_eq!(p["stopped_by"], "threshold", "{p}");
        assert!(p["samples"].as_u64().is_some_and(|s| s <= 1), "{p}");
    }
}
