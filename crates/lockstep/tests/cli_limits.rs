//! Every number an option takes has a limit: a value beyond it exits 2 with a message
//! naming the option, the value and the limit, before anything runs (README, "Limits").
//! The files' limits are tested next to their parsers; here each file kind is tested
//! once end to end (exit 2, the file and the field named).

use std::path::PathBuf;
use std::process::{Command, Output};

fn lockstep(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The command exits 2 and its only line on stderr is `lockstep: {message}`.
fn refused(args: &[&str], message: &str) {
    let o = lockstep(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert_eq!(
        stderr(&o).trim_end(),
        format!("lockstep: {message}"),
        "{args:?}"
    );
}

/// The command exits 2 and stderr holds `message`.
fn refused_with(args: &[&str], message: &str) {
    let o = lockstep(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(message), "{args:?}: {err}");
}

fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-cli-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write the file");
    p
}

fn scenario(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
        .display()
        .to_string()
}

#[test]
fn durations_and_counts() {
    refused(
        &["probe", "timer", "--duration", "604801s"],
        "--duration: 604801s is above the limit of 7 days (604800s)",
    );
    refused(
        &["probe", "timer", "--count", "1000000000001"],
        "--count: 1000000000001 is above the limit of 1000000000000",
    );
    refused(
        &["probe", "timer", "--threshold", "10081min"],
        "--threshold: 604860s is above the limit of 7 days (604800s)",
    );
    refused(
        &["probe", "timer", "--margin", "8000000s"],
        "--margin: 8000000s is above the limit of 7 days (604800s)",
    );
    refused(
        &[
            "probe",
            "rr",
            "client",
            "--to",
            "127.0.0.1:9",
            "--timeout",
            "604801s",
        ],
        "--timeout: 604801s is above the limit of 7 days (604800s)",
    );
    refused(
        &["probe", "timer", "--cpu", "65537"],
        "--cpu: CPU 65537 is above the limit of 65536",
    );
}

#[test]
fn probe_intervals_and_rates() {
    refused(
        &["probe", "timer", "--interval", "999ns"],
        "--interval: 999ns is below the limit of 1us",
    );
    refused(
        &["probe", "noise", "--period", "500ns"],
        "--period: 500ns is below the limit of 1us",
    );
    refused(
        &[
            "probe",
            "rr",
            "client",
            "--to",
            "127.0.0.1:9",
            "--interval",
            "999ns",
        ],
        "--interval: 999ns is below the limit of 1us",
    );
    refused(
        &["probe", "stream", "--to", "127.0.0.1:9", "--period", "9ns"],
        "--period: 9ns is below the limit of 10ns (100 Mpps)",
    );
    refused(
        &[
            "probe",
            "stream",
            "--to",
            "127.0.0.1:9",
            "--rate",
            "100000001pps",
        ],
        "--rate: 100000001pps is above the limit of 100 Mpps",
    );
    refused(
        &[
            "probe",
            "stream",
            "--to",
            "127.0.0.1:9",
            "--max-behind",
            "1000000000001",
        ],
        "--max-behind: 1000000000001 is above the limit of 1000000000000",
    );
    refused(
        &[
            "probe",
            "stream",
            "--to",
            "127.0.0.1:9",
            "--shape",
            "2Tbit/s,10kB",
        ],
        "--shape: rate: 2Tbit/s is above the limit of 1 Tbit/s",
    );
}

/// `--max-spikes` sizes a list kept in memory: 10^14 aborted on the allocation.
#[test]
fn noise_keeps_at_most_a_million_spikes() {
    refused(
        &[
            "probe",
            "noise",
            "--period",
            "1ms",
            "--max-spikes",
            "1000001",
        ],
        "--max-spikes: 1000001 is above the limit of 1000000",
    );
    refused(
        &[
            "probe",
            "noise",
            "--period",
            "1ms",
            "--max-spikes",
            "100000000000000",
        ],
        "--max-spikes: 100000000000000 is above the limit of 1000000",
    );
}

/// A start this far ahead would wait for centuries; the check needs the clock, so it
/// comes after the options are read, still before a packet is sent.
#[test]
fn a_start_at_most_seven_days_ahead() {
    let o = lockstep(&[
        "probe",
        "stream",
        "--to",
        "127.0.0.1:9",
        "--count",
        "1",
        "--no-mlock",
        "--quiet",
        "--start-at-ns",
        "9000000000000000000",
    ]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("lockstep: --start-at-ns 9000000000000000000 is ")
            && err.contains("from now, above the limit of 7 days (604800s)"),
        "{err}"
    );
}

#[test]
fn simulated_time_and_models() {
    let mesh = scenario("mesh4.toml");
    refused(
        &["sim", "run", &mesh, "--duration", "86401s"],
        "--duration: 86401s is above the limit of 1 day (86400s)",
    );
    refused(
        &["sim", "run", &mesh, "--processing", "1001ms"],
        "--processing: 1.001s is above the limit of 1s",
    );
    refused(
        &["sim", "run", &mesh, "--propagation", "2s"],
        "--propagation: 2s is above the limit of 1s",
    );
    refused(
        &["sim", "run", &mesh, "--cpus", "1025"],
        "--cpus: 1025 is not in 1..=1024",
    );
    refused(
        &["sim", "run", &mesh, "--host", "fixed:11s"],
        "--host: fixed:11s is above the limit of 10s",
    );
    refused(
        &["demo", "--no-live", "--duration", "86401s"],
        "--duration: 86401s is above the limit of 1 day (86400s)",
    );
}

#[test]
fn time_frames() {
    let line = scenario("line.toml");
    refused(
        &["lab", "plan", &line, "--tf", "500ns"],
        &format!(
            "{line}:12:6: scenario.tf: --tf 500ns: a time-frame of 500ns is below the limit of 1us"
        ),
    );
    refused(
        &["sim", "run", &line, "--tf", "11s"],
        &format!(
            "{line}:12:6: scenario.tf: --tf 11s: a time-frame of 11s is above the limit of 10s"
        ),
    );
}

#[test]
fn generated_networks() {
    let out = scratch("gen.toml", "");
    let out = out.to_str().unwrap();
    let gen = |extra: &[&'static str]| -> Vec<String> {
        let mut v = vec![
            "sim",
            "gen",
            "--topology",
            "grid",
            "--routers",
            "9",
            "--flows",
            "2",
            "--output",
            out,
        ];
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect()
    };
    let refused = |args: &[String], message: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refused(&args, message)
    };
    refused(&gen(&["--k", "100001"]), "--k: 100001 is not in 2..=100000");
    refused(
        &gen(&["--k", "4", "--d", "4"]),
        "--d: forwarding delay 4 is not below --k 4 (frames per cycle)",
    );
    refused(
        &gen(&["--link-rate", "1000001Mbit/s"]),
        "--link-rate: 1000001Mbit/s is above the limit of 1 Tbit/s",
    );
    refused(
        &gen(&["--mbit", "1000001"]),
        "--mbit: 1000001Mbit/s is above the limit of 1 Tbit/s",
    );
    refused(
        &gen(&["--tf", "500ns"]),
        "--tf: a time-frame of 500ns is below the limit of 1us",
    );
    refused(
        &gen(&["--duration", "86401s"]),
        "--duration: 86401s is above the limit of 1 day (86400s)",
    );
    let gen = |extra: &[&str]| -> Vec<String> {
        let mut v = vec!["sim", "gen", "--output", out];
        v.extend_from_slice(extra);
        v.into_iter().map(String::from).collect()
    };
    refused(
        &gen(&["--topology", "ring", "--routers", "200000", "--flows", "5001"]),
        "--flows: 5001 flows in 200000 routers: routers × flows is 1000200000, above the limit of 1000000000",
    );
    refused(
        &gen(&["--topology", "fat-tree", "--routers", "20000", "--flows", "10"]),
        "--routers: a fat-tree of at most 20000 routers has 1000188 links, above the limit of 1000000",
    );
}

#[test]
fn controller_grid() {
    refused(
        &[
            "ctl",
            "serve",
            "--db",
            "/nonexistent/ctl.db",
            "--network",
            "/nonexistent/net.toml",
            "--grid",
            "2s",
        ],
        "--grid: a step of \"2s\" is above the limit of 1s",
    );
}

#[test]
fn files_name_the_field() {
    let net = scratch(
        "net.toml",
        "[[server]]\nname = \"s0\"\nrate = \"2000Gbit/s\"\nlatency = \"10us\"\n",
    );
    let net = net.display().to_string();
    refused(
        &["calc", &net],
        &format!("{net}:3: server[0] \"s0\".rate: 2000000 Mbit/s is above the limit of 1 Tbit/s"),
    );
    let plan = scratch(
        "export.toml",
        "[[flow]]\nname = \"c\"\ndev = \"vc\"\nrate = \"40Mbit/s\"\nburst = \"5GB\"\n",
    );
    let plan = plan.display().to_string();
    refused(
        &["export", &plan],
        &format!("{plan}:5: flow[0] \"c\".burst: 5000000000B is above the limit of 4294967295B"),
    );
    let text = std::fs::read_to_string(scenario("line.toml"))
        .unwrap()
        .replacen("k = 8 ", "k = 100001 ", 1);
    let big = scratch("line-k.toml", &text);
    let big = big.display().to_string();
    refused_with(
        &["lab", "plan", &big],
        "scenario.k: k = 100001 is above the limit of 100000 frames per cycle",
    );
}
