//! The network file: every error names the field and its line.

use lockstep_netcalc::{load, parse_network, Multiplexing, Q};

const NET: &str = r#"[[server]]
name = "s0"
rate = "20B/us"
latency = "0.5ms"
buffer = "2MiB"

[[server]]
name = "s1"
rate = "1Gbps"
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

fn err(text: &str) -> String {
    load(text).map(|_| ()).unwrap_err().to_string()
}

#[test]
fn values_are_parsed_exactly() {
    let net = parse_network(NET).unwrap();
    assert_eq!(net.servers[0].rate, Q::int(160_000_000));
    assert_eq!(net.servers[0].latency, Q::ratio(1, 2000).unwrap());
    assert_eq!(net.servers[0].buffer, Some(Q::int(8 << 21)));
    assert_eq!(net.servers[0].multiplexing, Multiplexing::Fifo);
    assert_eq!(net.servers[1].multiplexing, Multiplexing::Arbitrary);
    assert_eq!(net.flows[0].burst, Q::int(200));
    assert_eq!(net.flows[0].deadline, Some(Q::ratio(1, 1000).unwrap()));
    assert!(load(NET).is_ok());
}

#[test]
fn errors_name_line_and_field() {
    assert_eq!(
        err(&NET.replace("\"s1\"]", "\"s9\"]")),
        "line 15: flow[0] \"f0\".path[1]: unknown server \"s9\""
    );
    assert_eq!(
        err(&NET.replace("\"0.5ms\"", "\"0.5\"")),
        "line 4: server[0] \"s0\".latency: expected a duration like 100us, 1.5ms or 1/2ms, got \"0.5\" (the unit is missing)"
    );
    assert_eq!(
        err(&NET.replace("\"arbitrary\"", "\"wfq\"")),
        "line 11: server[1] \"s1\".multiplexing: expected \"fifo\" or \"arbitrary\", got \"wfq\""
    );
    assert_eq!(
        err(&NET.replace("rate = \"1Gbps\"", "rate = 1000")),
        "line 9: server[1] \"s1\".rate: expected a string with its unit (a bit rate like 100Mbit/s or 20B/us), got an integer"
    );
    assert_eq!(
        err(&NET.replace("name = \"f0\"\n", "")),
        "line 13: flow[0].name: missing (required)"
    );
    assert_eq!(
        err(&format!("{NET}\n[links]\nx = 1\n")),
        "line 22: unknown key \"links\" (expected [[server]] and [[flow]] tables)"
    );
    assert_eq!(
        err(&NET.replace("rate = \"40Mbit/s\"", "rate = \"-40Mbit/s\"")),
        "line 16: flow[0] \"f0\".rate: must be above 0, got -40 Mbit/s"
    );
    assert_eq!(
        err(&NET.replace("peak = \"100Mbit/s\"", "peak = \"10Mbit/s\"")),
        "line 18: flow[0] \"f0\".peak: 10 Mbit/s is below the sustained rate 40 Mbit/s"
    );
    assert_eq!(
        err(&NET.replace("max_packet = \"25B\"\n", "")),
        "line 13: flow[0] \"f0\".max_packet: required with a peak rate (the M of the T-SPEC (C, M, r, b))"
    );
    assert_eq!(
        err(&NET.replace("name = \"f0\"", "name = \"f0 ; reboot\"")),
        "line 14: flow[0].name: \"f0 ; reboot\" is not a name (1 to 128 of letters, digits, _ - . :, not starting with . or -)"
    );
    assert_eq!(
        err(&NET.replace("name = \"s1\"", "name = \"s0\"")),
        "line 8: server[1] \"s0\".name: a server named \"s0\" is already defined"
    );
    assert_eq!(
        err(&NET.replace("[\"s0\", \"s1\"]", "[\"s0\", \"s0\"]")),
        "line 15: flow[0] \"f0\".path[1]: server \"s0\" appears twice: a path that loops is a cyclic network (out of scope)"
    );
    assert!(err(
        "[[server]]\nname = \"s0\"\nrate = \"1Mbps\"\nlatency = \"1us\"\nrate = \"2Mbps\"\n"
    )
    .starts_with("line 5: "));
}

#[test]
fn every_value_has_a_limit() {
    assert_eq!(
        err(&NET.replace("rate = \"1Gbps\"", "rate = \"1000.001Gbps\"")),
        "line 9: server[1] \"s1\".rate: 1000001 Mbit/s is above the limit of 1 Tbit/s"
    );
    assert!(load(&NET.replace("rate = \"1Gbps\"", "rate = \"1000Gbps\"")).is_ok());
    assert_eq!(
        err(&NET.replace("latency = \"20us\"", "latency = \"1.5s\"")),
        "line 10: server[1] \"s1\".latency: 1500000 us is above the limit of 1 s"
    );
    assert_eq!(
        err(&NET.replace("buffer = \"2MiB\"", "buffer = \"1000000000001B\"")),
        "line 5: server[0] \"s0\".buffer: 1000000000001 B is above the limit of 1 TB"
    );
    assert_eq!(
        err(&NET.replace("rate = \"40Mbit/s\"", "rate = \"2000Gbit/s\"")),
        "line 16: flow[0] \"f0\".rate: 2000000 Mbit/s is above the limit of 1 Tbit/s"
    );
    assert_eq!(
        err(&NET.replace("peak = \"100Mbit/s\"", "peak = \"2000Gbit/s\"")),
        "line 18: flow[0] \"f0\".peak: 2000000 Mbit/s is above the limit of 1 Tbit/s"
    );
    assert_eq!(
        err(&NET
            .replace("burst = \"25B\"", "burst = \"1000000000001B\"")
            .replace("peak = \"100Mbit/s\"\n", "")
            .replace("max_packet = \"25B\"\n", "")),
        "line 17: flow[0] \"f0\".burst: 1000000000001 B is above the limit of 1 TB"
    );
    assert_eq!(
        err(&NET
            .replace("burst = \"25B\"", "burst = \"70000B\"")
            .replace("max_packet = \"25B\"", "max_packet = \"65536B\"")),
        "line 19: flow[0] \"f0\".max_packet: 65536 B is above the limit of 65535 B"
    );
    assert_eq!(
        err(&NET.replace("deadline = \"1ms\"", "deadline = \"604801s\"")),
        "line 20: flow[0] \"f0\".deadline: 604801000000 us is above the limit of 7 days (604800s)"
    );
    assert_eq!(
        err(&NET.replace("latency = \"20us\"", "latency = \"1/7ps\"")),
        "line 10: server[1] \"s1\".latency: expected a duration like 100us, 1.5ms or 1/2ms, got \"1/7ps\" (finer than 1/1000000000000 s: a value's denominator is at most 10^12)"
    );
}

#[test]
fn a_network_has_at_most_100000_servers_and_flows() {
    assert_eq!(
        lockstep_netcalc::model::check_size(100_001, 0)
            .unwrap_err()
            .to_string(),
        "server: 100001 servers is above the limit of 100000"
    );
    assert_eq!(
        lockstep_netcalc::model::check_size(1, 100_001)
            .unwrap_err()
            .to_string(),
        "flow: 100001 flows is above the limit of 100000"
    );
    assert!(lockstep_netcalc::model::check_size(100_000, 100_000).is_ok());
}

#[test]
fn shaper_is_parsed_and_its_errors_name_line_and_field() {
    use lockstep_netcalc::Shaper;
    let shaped = NET.replace(
        "buffer = \"2MiB\"\n",
        "buffer = \"2MiB\"\nshaper = { rate = \"160Mbit/s\", burst = \"1500B\" }\n",
    );
    let net = parse_network(&shaped).unwrap();
    assert_eq!(
        net.servers[0].shaper,
        Some(Shaper {
            rate: Q::int(160_000_000),
            burst: Q::int(12_000),
        })
    );
    assert_eq!(net.servers[1].shaper, None);
    assert!(load(&shaped).is_ok());
    // burst left out: panco's R t
    let rt = NET.replace("buffer = \"2MiB\"\n", "shaper = { rate = \"1Gbps\" }\n");
    let net = parse_network(&rt).unwrap();
    assert_eq!(
        net.servers[0].shaper,
        Some(Shaper {
            rate: Q::int(1_000_000_000),
            burst: Q::zero(),
        })
    );
    let bad = |from: &str, to: &str| err(&shaped.replace(from, to));
    let cases = [
        (
            "shaper = { rate = \"160Mbit/s\", burst = \"1500B\" }",
            "shaper = \"160Mbit/s\"",
        ),
        ("rate = \"160Mbit/s\", burst", "rate = \"160\", burst"),
        ("rate = \"160Mbit/s\", burst", "rate = \"0Mbit/s\", burst"),
        ("rate = \"160Mbit/s\", burst", "rate = \"2Tbit/s\", burst"),
        ("rate = \"160Mbit/s\", burst", "burst"),
        ("burst = \"1500B\"", "burst = 1500"),
        ("burst = \"1500B\"", "burst = \"2TB\""),
        ("burst = \"1500B\"", "bucket = \"1500B\""),
    ];
    let got: Vec<String> = cases.iter().map(|(f, t)| bad(f, t)).collect();
    let expected = [
        "line 6: server[0] \"s0\".shaper: expected a table such as { rate = \"10Mbit/s\", burst = \"0B\" }, got a string",
        "line 6: server[0] \"s0\".shaper.rate: expected a bit rate like 100Mbit/s or 20B/us, got \"160\" (the unit is missing)",
        "line 6: server[0] \"s0\".shaper.rate: must be above 0, got 0 Mbit/s",
        "line 6: server[0] \"s0\".shaper.rate: 2000000 Mbit/s is above the limit of 1 Tbit/s",
        "line 6: server[0] \"s0\".shaper.rate: missing (required)",
        "line 6: server[0] \"s0\".shaper.burst: expected a string with its unit (a size like 1514B, 2MB or 12000bit), got an integer",
        "line 6: server[0] \"s0\".shaper.burst: 2000000000000 B is above the limit of 1 TB",
        "line 6: server[0] \"s0\".shaper.bucket: unknown key (expected one of rate, burst)",
    ];
    for (g, e) in got.iter().zip(expected) {
        assert_eq!(g, e);
    }
}
