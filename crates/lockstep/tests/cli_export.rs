//! `lockstep export`: exact command lines for hand-made plans and a node file, bad input
//! naming the field (exit 2), `--json`, and, as root, `--apply` of htb/tbf on a veth in
//! a throwaway namespace and the plain refusal on a kernel without taprio (exit 3).

use std::path::PathBuf;
use std::process::{Command, Output};

use lockstep_linux::netns::NetnsGuard;
use lockstep_linux::{cmd, iface, tc};
use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_lockstep")
}

fn lockstep(args: &[&str]) -> Output {
    Command::new(bin())
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A scratch directory for this test process.
fn scratch(name: &str, content: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lockstep-export-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let p = dir.join(name);
    std::fs::write(&p, content).expect("write plan");
    p
}

fn tc_lines(stdout: &str) -> Vec<&str> {
    stdout.lines().filter(|l| l.starts_with("tc ")).collect()
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

const PLAN: &str = r#"
# loeser Fig. 4: C shapes its one flow; E sends a reserved flow and best effort.
[[flow]]
name = "c"
dev = "vc"
rate = "40Mbit/s"
burst = "51514B"

[[flow]]
name = "e-rt"
dev = "ve"
rate = "20Mbit/s"
burst = "26514B"
match = { src = "10.0.0.5", dst = "10.0.0.2/32", proto = "udp", dport = 9000 }

[[flow]]
name = "e-be"
dev = "ve"
rate = "8Mbit/s"
burst = "3028B"
latency = "10ms"

[[port]]
dev = "vt"
tf = "250us"
k = 4
rows = [0, 2]
reserved_prio = 5
"#;

#[test]
fn a_plan_prints_exact_commands() {
    let f = scratch("plan.toml", PLAN);
    let o = lockstep(&["export", f.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert_eq!(
        tc_lines(&out),
        [
            "tc qdisc add dev vc root tbf rate 40000000bit burst 51514b latency 50000us",
            "tc qdisc add dev ve root handle 1: htb default 2",
            "tc class add dev ve parent 1: classid 1:1 htb rate 20000000bit ceil 20000000bit burst 26514b cburst 26514b",
            "tc class add dev ve parent 1: classid 1:2 htb rate 8000000bit ceil 8000000bit burst 3028b cburst 3028b",
            "tc filter add dev ve parent 1: protocol ip prio 1 u32 match ip src 10.0.0.5/32 match ip dst 10.0.0.2/32 match ip protocol 17 0xff match ip dport 9000 0xffff flowid 1:1",
            "tc qdisc add dev vt parent root handle 100: taprio num_tc 2 map 0 0 0 0 0 1 0 0 0 0 0 0 0 0 0 0 queues 1@0 1@1 base-time 0 sched-entry S 02 250000 sched-entry S 01 250000 sched-entry S 02 250000 sched-entry S 01 250000 clockid CLOCK_TAI",
        ]
    );
    // Every command comes after the comment that explains it.
    let lines: Vec<&str> = out.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("tc ") {
            assert!(i > 0 && lines[i - 1].starts_with("# "), "{l}");
        }
    }
    assert!(out.contains("#   default 2: unclassified traffic goes to class 1:2 (flow \"e-be\", which has no match)\n"));
    assert!(out.contains(
        "#   sched-entry S 02 250000: frame 0 has reservations: only the reserved gate is open\n"
    ));

    // txtime-assist adds etf under the reserved queue.
    let o = lockstep(&["export", f.to_str().expect("utf-8"), "--txtime-assist"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let l = tc_lines(&out);
    assert!(
        l[5].ends_with("clockid CLOCK_TAI flags 0x1 txtime-delay 200000"),
        "{}",
        l[5]
    );
    assert_eq!(
        l[6],
        "tc qdisc replace dev vt parent 100:2 etf clockid CLOCK_TAI delta 200000 skip_sock_check"
    );
}

#[test]
fn output_writes_the_script_into_a_file_instead() {
    let f = scratch("out.toml", PLAN);
    let printed = lockstep(&["export", f.to_str().expect("utf-8")]);
    let target = f.with_extension("sh");
    let o = lockstep(&[
        "export",
        f.to_str().expect("utf-8"),
        "--output",
        target.to_str().expect("utf-8"),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty(), "nothing printed");
    let written = std::fs::read(&target).expect("the script was written");
    assert_eq!(written, printed.stdout, "the same script as printed");
    let _ = std::fs::remove_file(&target);
}

#[test]
fn json_lists_the_commands() {
    let f = scratch("json.toml", PLAN);
    let o = lockstep(&["export", f.to_str().expect("utf-8"), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let doc: Value = serde_json::from_slice(&o.stdout).expect("one JSON document");
    assert_eq!(doc["kind"], "export");
    let devs = doc["devices"].as_array().expect("devices");
    assert_eq!(devs.len(), 3);
    assert_eq!(devs[0]["dev"], "vc");
    assert_eq!(devs[0]["root"], "tbf");
    assert_eq!(devs[1]["qdiscs"], serde_json::json!(["htb"]));
    assert_eq!(devs[2]["root"], "taprio");
    let c = &devs[0]["commands"][0];
    assert_eq!(
        c["line"],
        "tc qdisc add dev vc root tbf rate 40000000bit burst 51514b latency 50000us"
    );
    assert_eq!(c["argv"][0], "qdisc");
    assert!(c["comment"][0]
        .as_str()
        .expect("comment")
        .starts_with("tbf shapes"));
    assert_eq!(doc["plan"]["flows"][1]["matcher"]["dport"], 9000);
    assert_eq!(doc["apply"], Value::Null);
}

#[test]
fn a_node_file_gives_its_port_schedules() {
    let node = r#"
[node]
name = "s"
id = 9
role = "sender"
[node.frame]
tf = "1ms"
k = 4
[[node.ports]]
id = 1
ifname = "s0"
mac = "02:00:00:00:01:02"
addr = "10.0.1.2"
prefix_len = 24
rate_bps = 1000000000
[[node.flows]]
id = 5
out_port = 1
rows = [{ slot = 1, packets = 2, size = 300 }]

[live]
[[live.flows]]
flow = 5
dst = "10.0.2.2:7000"
size = 200
"#;
    let f = scratch("node.toml", node);
    let o = lockstep(&["export", f.to_str().expect("utf-8"), "--reserved-prio", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        tc_lines(&text(&o.stdout)),
        ["tc qdisc add dev s0 parent root handle 100: taprio num_tc 2 map 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 queues 1@0 1@1 base-time 0 sched-entry S 01 1000000 sched-entry S 02 1000000 sched-entry S 01 1000000 sched-entry S 01 1000000 clockid CLOCK_TAI"]
    );
    // The node file's own checks still apply, naming its file, line and field.
    let broken = scratch("broken-node.toml", &node.replace("k = 4", "k = 0"));
    let o = lockstep(&["export", broken.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("field node.frame.k"),
        "{}",
        text(&o.stderr)
    );
    let o = lockstep(&[
        "export",
        f.to_str().expect("utf-8"),
        "--reserved-prio",
        "16",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--reserved-prio"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn bad_input_names_the_field() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "rate = \"40Mbit/s\"",
            "rate = \"40Mbps/s\"",
            ":6: flow[0] \"c\".rate: expected a bit rate like 100Mbit/s",
        ),
        (
            "burst = \"51514B\"",
            "burst = \"1000B\"",
            ":7: flow[0] \"c\".burst: 1000B is below the largest packet (1514B",
        ),
        (
            "dport = 9000",
            "dport = 90000",
            ":14: flow[1] \"e-rt\".match.dport: expected a port 0..65535, got 90000",
        ),
        (
            "rows = [0, 2]",
            "rows = [0, 4]",
            ":27: port[0].rows[1]: frame 4 is not in 0..4 (k = 4)",
        ),
        (
            "reserved_prio = 5",
            "reserved_prio = 99",
            ":28: port[0].reserved_prio: 99 is not an skb priority 0..15",
        ),
        (
            "tf = \"250us\"",
            "tf = \"250\"",
            ":25: port[0].tf: expected a duration like 100us",
        ),
        (
            "latency = \"10ms\"",
            "latency = \"10ms\"\nlimit = \"1kB\"",
            ":22: flow[2] \"e-be\".limit: give latency or limit, not both",
        ),
    ];
    for (i, (from, to, want)) in cases.iter().enumerate() {
        let plan = PLAN.replacen(from, to, 1);
        assert_ne!(plan, PLAN, "{from}");
        let f = scratch(&format!("bad{i}.toml"), &plan);
        let o = lockstep(&["export", f.to_str().expect("utf-8")]);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{to}: {err}");
        assert!(o.stdout.is_empty(), "{to}: nothing printed");
        let expected = format!("lockstep: {}{want}", f.display());
        assert!(
            err.starts_with(&expected),
            "{to}:\n{err}\nwanted {expected}"
        );
    }
    let o = lockstep(&["export", "/nonexistent/plan.toml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("/nonexistent/plan.toml: cannot read it"));
}

/// A namespace with a veth pair `ex0`/`ex1`, both up.
fn veth_netns(tag: &str) -> NetnsGuard {
    let name = format!("lst-export-{tag}-{}", std::process::id());
    let ns = NetnsGuard::create(&name).expect("create namespace");
    ns.run(|| -> Result<(), iface::IfaceError> {
        iface::create_veth("ex0", "ex1")?;
        iface::set_up("ex0")?;
        iface::set_up("ex1")
    })
    .expect("enter namespace")
    .expect("veth pair");
    ns
}

fn run_in(ns: &NetnsGuard, args: &[&str]) -> Output {
    ns.command(bin())
        .expect("command in namespace")
        .args(args)
        .output()
        .expect("the lockstep binary runs")
}

fn tc_in(ns: &NetnsGuard, args: &'static [&'static str]) -> String {
    ns.run(move || cmd::tc(args))
        .expect("enter namespace")
        .expect("tc runs")
}

#[test]
fn apply_sets_htb_and_tbf_on_a_veth() {
    if !is_root() {
        eprintln!("skipped: --apply needs root (network namespaces, tc)");
        return;
    }
    let plan = r#"
[[flow]]
name = "rt"
dev = "ex0"
rate = "20Mbit/s"
burst = "4014B"
match = { dst = "10.9.0.2", proto = "udp", dport = 9000 }

[[flow]]
name = "be"
dev = "ex0"
rate = "10Mbit/s"
burst = "3028B"

[[flow]]
name = "c"
dev = "ex1"
rate = "40Mbit/s"
burst = "51514B"
"#;
    let f = scratch("apply.toml", plan);
    let ns = veth_netns("apply");
    let args = ["export", f.to_str().expect("utf-8"), "--apply"];
    let o = run_in(&ns, &args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        "lockstep export: applied 5 commands on ex0, ex1\n"
    );
    let classes = tc_in(&ns, &["class", "show", "dev", "ex0"]);
    assert!(
        classes.contains("class htb 1:1 root prio 0 rate 20Mbit ceil 20Mbit"),
        "{classes}"
    );
    assert!(
        classes.contains("class htb 1:2 root prio 0 rate 10Mbit ceil 10Mbit"),
        "{classes}"
    );
    let qdiscs = tc_in(&ns, &["qdisc", "show"]);
    assert!(qdiscs.contains("qdisc htb 1: dev ex0 root"), "{qdiscs}");
    assert!(qdiscs.contains("default 0x2"), "{qdiscs}");
    assert!(qdiscs.contains("qdisc tbf"), "{qdiscs}");
    assert!(qdiscs.contains("rate 40Mbit"), "{qdiscs}");
    let filters = tc_in(&ns, &["filter", "show", "dev", "ex0"]);
    assert!(filters.contains("flowid 1:1"), "{filters}");
    // 10.9.0.2 and UDP port 9000 (0x2328) in the u32 keys.
    assert!(
        filters.contains("match 0a090002/ffffffff at 16"),
        "{filters}"
    );
    assert!(
        filters.contains("match 00002328/0000ffff at 20"),
        "{filters}"
    );
    // Applying again replaces what is there (the root qdiscs are cleared first).
    let o = run_in(&ns, &args);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    // A device that does not exist: nothing applied, nothing left.
    let missing = scratch(
        "missing.toml",
        &plan.replace("dev = \"ex1\"", "dev = \"nope0\""),
    );
    let o = run_in(
        &ns,
        &["export", missing.to_str().expect("utf-8"), "--apply"],
    );
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("device nope0"),
        "{}",
        text(&o.stderr)
    );
    ns.delete().expect("delete namespace");
}

#[test]
fn apply_refuses_what_the_kernel_lacks() {
    if !is_root() {
        let f = scratch("noroot.toml", PLAN);
        let o = lockstep(&["export", f.to_str().expect("utf-8"), "--apply"]);
        assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
        assert!(text(&o.stderr).contains("applied none of them"));
        return;
    }
    if tc::qdisc_available("taprio").expect("probe taprio") {
        eprintln!("skipped: this kernel has taprio");
        return;
    }
    let port = "[[port]]\ndev = \"ex0\"\ntf = \"1ms\"\nk = 2\nrows = [1]\n";
    let f = scratch("taprio.toml", port);
    let ns = veth_netns("taprio");
    let o = run_in(&ns, &["export", f.to_str().expect("utf-8"), "--apply"]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stderr),
        "lockstep: this kernel has no taprio (CONFIG_NET_SCH_TAPRIO): printed the commands, applied none of them\n"
    );
    // The commands are still printed, and nothing was touched.
    assert_eq!(tc_lines(&text(&o.stdout)).len(), 1);
    let qdiscs = tc_in(&ns, &["qdisc", "show", "dev", "ex0"]);
    assert!(!qdiscs.contains("taprio"), "{qdiscs}");
    if !tc::qdisc_available("etf").expect("probe etf") {
        let o = run_in(
            &ns,
            &[
                "export",
                f.to_str().expect("utf-8"),
                "--apply",
                "--txtime-assist",
                "--json",
            ],
        );
        assert_eq!(o.status.code(), Some(3));
        assert_eq!(
            text(&o.stderr),
            "lockstep: this kernel has no taprio (CONFIG_NET_SCH_TAPRIO), no etf (CONFIG_NET_SCH_ETF): printed the commands, applied none of them\n"
        );
        let doc: Value = serde_json::from_slice(&o.stdout).expect("JSON");
        assert_eq!(
            doc["apply"]["missing"],
            serde_json::json!(["taprio", "etf"])
        );
        assert_eq!(doc["apply"]["applied"], 0);
        assert_eq!(doc["apply"]["total"], 2);
    }
    ns.delete().expect("delete namespace");
}
