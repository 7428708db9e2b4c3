//! `lockstep calc`: the loeser example prints its bounds (exact values), `--json` is
//! the result document, failed checks exit 1 and bad input exits 2 naming the file,
//! the line and the field.

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/loeser-fast-ethernet.toml")
}

fn calc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .arg("calc")
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

/// Writes a network file into a fresh temporary directory.
fn network(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-cli-calc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write network");
    p
}

const TWO_HOPS: &str = r#"[[server]]
name = "s0"
rate = "160Mbit/s"
latency = "20us"
buffer = "2MB"

[[server]]
name = "s1"
rate = "20B/us"
latency = "20us"
multiplexing = "arbitrary"

[[flow]]
name = "f0"
path = ["s0", "s1"]
rate = "40Mbit/s"
burst = "25B"
peak = "100Mbit/s"
max_packet = "25B"
deadline = "1ms"
"#;

#[test]
fn the_loeser_example_prints_its_bounds() {
    let o = calc(&[example().to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    // Hand computation (the FIFO port analysis, Eq. 6) for Ts = 10 ms with A's probe flow:
    // C = 12.5 B/us, Σb = 51514 + 41514 + 26514 + 64 = 119606 B, Σr = 11.564 B/us,
    // g_max = 50000 / 7.5 = 20000/3 us; t_switch = 119606/12.5 − (20000/3)(1 − 11.564/12.5)
    // + 45 = 9568.48 − 499.2 + 45 = 9114.28 us = 227857/25.
    assert!(out.contains("A-probe-Ts10ms"), "{out}");
    assert!(out.contains("*9114.28 us (227857/25)"), "{out}");
    assert!(out.contains("*1283.56 us (32089/25)"), "{out}");
    assert!(out.contains("*500.488 us (62561/125)"), "{out}");
    // Backlog (Eq. 4): 119606 − (20000/3)(12.5 − 11.564) + 12.5·45 = 113928.5 B.
    assert!(out.contains("113928.5 B (227857/2)"), "{out}");
    assert!(out.contains("fits"), "{out}");
    assert!(!out.contains("LATE"), "{out}");
}

#[test]
fn json_is_the_spec_document_with_exact_bounds() {
    let o = calc(&[example().to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(doc["kind"], "calc");
    assert!(doc["host"].is_object());
    assert!(doc["command"].is_array());
    let flows = doc["results"]["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 12);
    let a = flows
        .iter()
        .find(|f| f["name"] == "A-probe-Ts10ms")
        .unwrap();
    assert_eq!(a["tfa"]["exact"], "227857/25");
    assert_eq!(a["tfa"]["unit"], "us");
    assert_eq!(a["tfa"]["value"], 9114.28);
    assert_eq!(a["best"], "tfa");
    assert_eq!(a["deadline"]["exact"], "9277");
    assert_eq!(a["meets_deadline"], true);
    let s = &doc["results"]["servers"][0];
    assert_eq!(s["backlog"]["exact"], "227857/2");
    assert_eq!(s["backlog"]["unit"], "B");
    assert_eq!(s["fits"], true);
    assert_eq!(s["spec4"]["t_switch"]["exact"], "227857/25");
    assert_eq!(doc["results"]["summary"]["late_flows"], 0);
    assert_eq!(doc["check_failed"], false);
    // The table went to stderr.
    assert!(stderr(&o).contains("A-probe-Ts10ms"));
}

#[test]
fn two_hops_under_fifo_then_arbitrary_multiplexing() {
    let p = network("two-hops.toml", TWO_HOPS);
    let o = calc(&[p.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &doc["results"]["flows"][0];
    assert_eq!(f["lp"], Value::Null);
    // Alone on both servers (160 Mbit/s = 20 B/us, T = 20 us): T-SPEC (C = 12.5 B/us,
    // M = b = 25 B) is a token bucket (5 B/us, 25 B). Hop 1: 20 + 25/20 = 21.25 us.
    // It leaves hop 1 as α ⊘ β = (5, 25 + 5·20) = (5, 125), so hop 2 waits at most
    // 20 + 125/20 = 26.25 us. TFA = 47.5 us = 95/2. SFA: β_{20, 40}: 40 + 25/20 =
    // 41.25 us = 165/4.
    assert_eq!(f["tfa"]["exact"], "95/2");
    assert_eq!(f["tfa_per_hop"][0]["exact"], "85/4");
    assert_eq!(f["pmoo"], Value::Null);
    assert!(f["no_bound"]["pmoo"]
        .as_str()
        .unwrap()
        .contains("s0 is FIFO"));
    assert_eq!(f["sfa"]["exact"], "165/4");
    assert_eq!(f["best"], "sfa");
    assert_eq!(doc["results"]["servers"][1]["multiplexing"], "arbitrary");
    assert_eq!(doc["results"]["servers"][1]["fifo_delay"], Value::Null);
}

#[test]
fn one_column_per_method_and_their_run_times() {
    let p = network(
        "arb.toml",
        &TWO_HOPS.replace("buffer = \"2MB\"", "multiplexing = \"arbitrary\""),
    );
    let o = calc(&[p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("TFA") && out.contains("SFA") && out.contains("PMOO") && out.contains("LP"),
        "{out}"
    );
    assert!(out.contains("run time: TFA "), "{out}");
    // Alone on two arbitrary servers, PMOO is the SFA: β_{20, 40}, 41.25 us.
    assert!(out.contains("41.25 us (165/4)"), "{out}");
    let o = calc(&[p.to_str().unwrap(), "--method", "pmoo", "--json"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &doc["results"]["flows"][0];
    assert_eq!(f["pmoo"]["exact"], "165/4");
    assert_eq!(f["best"], "pmoo");
    assert!(f.get("tfa").is_none());
    assert!(doc["results"]["method_time_us"]["pmoo"].is_number());
    let o = calc(&[p.to_str().unwrap(), "--method", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    // the LP covers FIFO paths only, and says so
    let o = calc(&[p.to_str().unwrap(), "--method", "lp", "--json"]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let why = doc["results"]["flows"][0]["no_bound"]["lp"]
        .as_str()
        .unwrap();
    assert!(why.contains("not FIFO"), "{why}");
    // several files: one table each, an array of documents
    let o = calc(&[p.to_str().unwrap(), example().to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let docs: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(docs.as_array().map(Vec::len), Some(2));
}

#[test]
fn a_missed_deadline_exits_1_with_the_document() {
    let p = network(
        "late.toml",
        &TWO_HOPS.replace("deadline = \"1ms\"", "deadline = \"40us\""),
    );
    let o = calc(&[p.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["check_failed"], true);
    assert_eq!(doc["results"]["flows"][0]["meets_deadline"], false);
    assert!(
        stderr(&o).contains("deadline missed by f0"),
        "{}",
        stderr(&o)
    );
    let o = calc(&[p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("LATE"));
}

#[test]
fn a_small_buffer_exits_1() {
    let p = network(
        "buffer.toml",
        &TWO_HOPS.replace("buffer = \"2MB\"", "buffer = \"100B\""),
    );
    let o = calc(&[p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stdout(&o).contains("OVERFLOW"));
    assert!(
        stderr(&o).contains("buffer too small at s0"),
        "{}",
        stderr(&o)
    );
}

fn bad(name: &str, text: &str) -> String {
    let p = network(name, text);
    let o = calc(&[p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(o.stdout.is_empty());
    stderr(&o).replace(p.to_str().unwrap(), "FILE")
}

#[test]
fn bad_input_exits_2_naming_file_line_and_field() {
    assert_eq!(
        bad("unit.toml", &TWO_HOPS.replace("rate = \"40Mbit/s\"", "rate = \"40Mbit\"")),
        "lockstep: FILE:16: flow[0] \"f0\".rate: expected a bit rate like 100Mbit/s or 20B/us, got \"40Mbit\" (\"Mbit\" is a unit of data)\n"
    );
    assert_eq!(
        bad(
            "path.toml",
            &TWO_HOPS.replace("path = [\"s0\", \"s1\"]", "path = [\"s0\", \"s9\"]")
        ),
        "lockstep: FILE:15: flow[0] \"f0\".path[1]: unknown server \"s9\"\n"
    );
    assert_eq!(
        bad(
            "zero.toml",
            &TWO_HOPS.replace("rate = \"20B/us\"", "rate = \"0B/us\"")
        ),
        "lockstep: FILE:9: server[1] \"s1\".rate: must be above 0, got 0 Mbit/s\n"
    );
    assert_eq!(
        bad("burst.toml", &TWO_HOPS.replace("burst = \"25B\"", "burst = \"20B\"")),
        "lockstep: FILE:17: flow[0] \"f0\".burst: 20 B is below max_packet 25 B: the bucket must hold a whole packet\n"
    );
    assert_eq!(
        bad("key.toml", &TWO_HOPS.replace("latency = \"20us\"\nbuffer", "latncy = \"20us\"\nbuffer")),
        "lockstep: FILE:4: server[0] \"s0\".latncy: unknown key (expected one of name, rate, latency, buffer, multiplexing, shaper)\n"
    );
    assert_eq!(
        bad("missing.toml", &TWO_HOPS.replace("burst = \"25B\"\n", "")),
        "lockstep: FILE:13: flow[0] \"f0\".burst: missing (required)\n"
    );
    let overload = format!(
        "{TWO_HOPS}\n[[flow]]\nname = \"f1\"\npath = [\"s1\"]\nrate = \"130Mbit/s\"\nburst = \"1500B\"\n"
    );
    assert_eq!(
        bad("overload.toml", &overload),
        "lockstep: FILE:9: server[1] \"s1\".rate: the flows through \"s1\" need 170 Mbit/s in sum, more than its rate 160 Mbit/s (unstable): f0 40 Mbit/s, f1 130 Mbit/s\n"
    );
    let e = bad("syntax.toml", "[[server]\nname = \"s0\"\n");
    assert!(e.starts_with("lockstep: FILE:1: "), "{e}");
}

#[test]
fn a_cyclic_network_gets_the_fixed_points_of_the_tfa_and_the_lp() {
    let ring = r#"[[server]]
name = "s0"
rate = "20Mbit/s"
latency = "20us"

[[server]]
name = "s1"
rate = "20Mbit/s"
latency = "20us"

[[flow]]
name = "f0"
path = ["s0", "s1"]
rate = "5Mbit/s"
burst = "25bit"

[[flow]]
name = "f1"
path = ["s1", "s0"]
rate = "5Mbit/s"
burst = "25bit"
"#;
    // D0 = 20 + (25 + 25 + 5 D1)/20 = D1: 30 us at each, 60 us end to end
    let p = network("ring.toml", ring);
    let o = calc(&[p.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["results"]["flows"][0]["tfa"]["exact"], "60");
    // the LP fixed point (cut at s1 -> s0) is below it for both flows
    assert_eq!(doc["results"]["flows"][0]["best"], "lp");
    assert_eq!(doc["results"]["flows"][1]["best"], "lp");
    assert_eq!(doc["results"]["servers"], Value::Array(vec![]));
    // a loop is a cycle too; an overload counts every visit
    let looped = ring.replace(
        "path = [\"s1\", \"s0\"]",
        "path = [\"s1\", \"s0\", \"s1\", \"s0\"]",
    );
    let o = calc(&[network("loop.toml", &looped).to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let heavy = looped.replace("rate = \"5Mbit/s\"", "rate = \"9Mbit/s\"");
    let e = bad("heavy.toml", &heavy);
    assert!(e.contains("need 27 Mbit/s in sum"), "{e}");
}

/// A ring of four 20 Mbit/s servers, each crossed by four flows of `rate`.
fn ring_of_four(rate: &str) -> String {
    let mut text = String::new();
    for s in 0..4 {
        text +=
            &format!("[[server]]\nname = \"s{s}\"\nrate = \"20Mbit/s\"\nlatency = \"20us\"\n\n");
    }
    for f in 0..4 {
        let path: Vec<String> = (0..4).map(|h| format!("\"s{}\"", (f + h) % 4)).collect();
        text += &format!(
            "[[flow]]\nname = \"f{f}\"\npath = [{}]\nrate = \"{rate}\"\nburst = \"25B\"\n\n",
            path.join(", ")
        );
    }
    text
}

#[test]
fn a_diverging_ring_says_why_and_at_what_scale_it_converges() {
    // server s gets from the server d hops before it the bursts of the 4 − d flows
    // that crossed that one first, grown by its delay: D = c + A D with A circulant,
    // rows (0, 3, 2, 1)·r/R. At r = 4 Mbit/s, ρ(A) = 6·4/20 = 6/5: the fixed point
    // converges exactly below 5/6 of the rates, 83.3 % to 0.1 %
    let o = calc(&[
        network("ring4.toml", &ring_of_four("4Mbit/s"))
            .to_str()
            .unwrap(),
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let why = &doc["results"]["divergence"];
    assert_eq!(why["utilisation"]["exact"], "4/5", "{why}");
    assert_eq!(why["converging_scale"]["exact"], "833/1000", "{why}");
    assert_eq!(why["bursts"], "kept", "{why}");
    let text = stderr(&o);
    assert!(
        text.contains("run at up to 80 % (s0, s1, s2, s3: 4 flow crossings each); with every flow at ≤ 83.3 % of its rate"),
        "{text}"
    );
    // at 3 Mbit/s (ρ = 9/10) it converges: nothing to explain
    let o = calc(&[
        network("ring3.toml", &ring_of_four("3Mbit/s"))
            .to_str()
            .unwrap(),
        "--json",
    ]);
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(doc["results"]["divergence"].is_null(), "{doc}");
    assert!(
        doc["results"]["flows"][0]["tfa"]["value"].is_number(),
        "{doc}"
    );
}

#[test]
fn a_missing_file_exits_2() {
    let o = calc(&["/nonexistent/network.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/network.toml: cannot read it"));
}

#[test]
fn a_scenario_is_read_as_its_fifo_network() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
    // mesh4's flows loop five times around the ring: only the TFA's fixed point
    // applies, and it diverges (said plainly, not an error)
    let o = calc(&[dir.join("mesh4.toml").to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &doc["results"]["flows"][0];
    assert_eq!(f["name"], "f1234");
    assert!(f["no_bound"]["tfa"]
        .as_str()
        .unwrap()
        .contains("fixed point diverges"));
    assert!(f["no_bound"]["sfa"]
        .as_str()
        .unwrap()
        .contains("cyclic network"));
    assert!(stderr(&o).contains("the network is cyclic"));
    // why, in numbers: the ring links carry 15 crossings of 12 frames of 8320 bits
    // (1002 B of IP and Ethernet's 38 B) per 15 ms: 99.84 Mbit/s of 100
    let why = &doc["results"]["divergence"];
    assert_eq!(why["utilisation"]["exact"], "624/625", "{why}");
    assert_eq!(why["busiest_servers"].as_array().unwrap().len(), 4, "{why}");
    assert_eq!(why["busiest_servers"][0]["crossings"], 15, "{why}");
    // the line-shaped fixed point converges at 42.9 % of every rate, not at 43 %
    assert_eq!(why["converging_scale"]["exact"], "429/1000", "{why}");
    assert!(why["scaled_tfa"][0]["tfa"]["value"].is_number(), "{why}");
    let o = calc(&[dir.join("mesh4.toml").to_str().unwrap(), "--method", "tfa"]);
    let text = stdout(&o);
    assert!(
        text.contains("run at up to 99.84 % (r1→r2, r2→r3, r3→r4, r4→r1: 15 flow crossings each)"),
        "{text}"
    );
    assert!(
        text.contains("with every flow at ≤ 42.9 % of its rate (bursts as they are; to 0.1 %)"),
        "{text}"
    );
    assert!(
        text.contains(
            "flows at 42.9 % of their rates, bursts as they are (a scaled network, not this one)"
        ),
        "{text}"
    );
    // gateway: one flow through one router, bounded
    let o = calc(&[dir.join("gateway.toml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("tx→rx"), "{}", stdout(&o));
    // a scenario kind without flows is refused, naming the file
    let o = calc(&[dir.join("shaped-switch.toml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("shaped-switch.toml"), "{}", stderr(&o));
}

#[test]
fn output_writes_the_document_and_the_tables() {
    let dir = std::env::temp_dir().join(format!("lockstep-calc-out-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ex = example();
    let o = calc(&[ex.to_str().unwrap(), "--output", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let text = std::fs::read_to_string(dir.join("summary.txt")).unwrap();
    assert_eq!(text, stdout(&o), "the tables as printed");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(doc["kind"], "calc");
    let _ = std::fs::remove_dir_all(&dir);
}
