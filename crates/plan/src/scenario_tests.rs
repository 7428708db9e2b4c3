use super::*;

pub(crate) const LINE: &str = include_str!("../../../scenarios/line.toml");
pub(crate) const MESH4: &str = include_str!("../../../scenarios/mesh4.toml");
pub(crate) const MESH4_482: &str = include_str!("../../../scenarios/mesh4-482.toml");
pub(crate) const GATEWAY: &str = include_str!("../../../scenarios/gateway.toml");

/// A small valid scenario the error tests edit (line numbers matter: see the tests).
pub(crate) const BASE: &str = r#"[scenario]
name = "t"
tf = "1ms"
k = 4
d = 1

[[node]]
name = "tx"
role = "sender"

[[node]]
name = "r1"
role = "core"

[[node]]
name = "rx"
role = "receiver"

[[link]]
between = ["tx", "r1"]
rate = "100Mbit/s"

[[link]]
between = ["r1", "rx"]
rate = "100Mbit/s"

[[flow]]
name = "f"
path = ["tx", "r1", "rx"]
size = "200B"
"#;

fn err(text: &str) -> String {
    Scenario::parse("t.toml", text).unwrap_err().to_string()
}

/// BASE with `from` replaced by `to` (which must occur exactly once).
fn edit(from: &str, to: &str) -> String {
    assert_eq!(BASE.matches(from).count(), 1, "{from:?}");
    BASE.replacen(from, to, 1)
}

#[test]
fn the_shipped_scenarios_parse() {
    let line = Scenario::parse("line.toml", LINE).unwrap();
    assert_eq!(line.name, "line");
    assert_eq!(line.modes, [RunMode::Fifo, RunMode::Tdp]);
    assert_eq!(line.tfs, [Duration::from_micros(250)]);
    assert_eq!((line.k, line.d), (8, 2));
    assert_eq!(line.nodes.len(), 4);
    assert_eq!(line.flows[0].path, [0, 1, 2, 3]);
    assert_eq!(line.flows[0].links, [0, 1, 2]);
    assert_eq!(line.loads[0].tool, LoadTool::Lockstep);
    assert_eq!(line.loads[0].rate_bps, Some(40_000_000));
    assert!(line
        .links
        .iter()
        .all(|l| l.shape && l.rate_bps == 100_000_000));

    let mesh = Scenario::parse("mesh4.toml", MESH4).unwrap();
    assert_eq!((mesh.k, mesh.d, mesh.flows.len()), (60, 3, 5));
    assert_eq!(mesh.sources, Sources::Asynchronous);
    assert_eq!(mesh.processing, Duration::from_micros(100));
    assert!(mesh.flows.iter().all(|f| f.size == 1002 && f.packets == 1));
    let names: Vec<&str> = mesh.flows.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f1234", "f123", "f234", "f341", "f412"]);

    let gw = Scenario::parse("gateway.toml", GATEWAY).unwrap();
    let tfs: Vec<i64> = gw.tfs.iter().map(|t| t.as_nanos() / 1000).collect();
    assert_eq!(tfs, [500, 400, 250, 200, 100, 50]);
    assert_eq!(gw.strategy, WaitStrategy::Hybrid);
    assert_eq!(gw.flows[0].size, min_flow_size(0));
    let labels: Vec<String> = gw.runs().iter().map(|r| r.label.clone()).collect();
    assert_eq!(labels[0], "TF=500us");
    assert_eq!(gw.runs()[5].dir, "tf-50us");
}

#[test]
fn unknown_keys_name_the_table_and_key() {
    assert_eq!(
        err(&edit("rate = \"100Mbit/s\"\n\n[[link]]\nbetween = [\"r1\"", "rat = \"100Mbit/s\"\n\n[[link]]\nbetween = [\"r1\"")),
        "t.toml:21:1: link[0].rat: unknown field `rat`, expected one of `between`, `rate`, `shape`, `d`, `addresses`"
    );
    assert_eq!(
        err(&edit("k = 4", "k = 4\nbogus = 1")),
        "t.toml:5:1: scenario.bogus: unknown field `bogus`, expected one of `name`, `description`, `tf`, `k`, `d`, `guard`, `processing`, `modes`, `duration`, `sources`, `strategy`, `priority`, `tx_timestamps`, `padding`, `on_slip`, `routers`, `senders`, `source_load`, `source_drift`, `routing`"
    );
    assert_eq!(
        err(&edit("[[flow]]", "[[flows]]")),
        "t.toml:27:3: flows: unknown field `flows`, expected one of `scenario`, `node`, `link`, `flow`, `load`, `fault`"
    );
}

#[test]
fn missing_fields_and_wrong_types() {
    assert_eq!(
        err(&edit("name = \"r1\"\nrole = \"core\"", "name = \"r1\"")),
        "t.toml:11:1: node[1].role: missing field `role`"
    );
    assert_eq!(
        err(&edit("tf = \"1ms\"", "tf = 5")),
        "t.toml:3:6: scenario.tf: invalid type: integer `5`, expected a string or a list of strings"
    );
    assert_eq!(
        err(&edit("size = \"200B\"\n", "")),
        "t.toml:27:1: flow[0].size: missing field `size`"
    );
    assert_eq!(
        err("[scenario]\nname = \"t\"\ntf = \"1ms\"\nk = 4\n"),
        "t.toml:1:1: node: a scenario needs [[node]] tables"
    );
    assert_eq!(
        err("[scenario\n"),
        "t.toml:1:10: scenario: unclosed table, expected `]`"
    );
}

#[test]
fn names_are_from_the_one_safe_set() {
    // a scenario's name becomes a result directory's: no way out of it
    let e = err(&edit("name = \"t\"", "name = \"../../x\""));
    assert!(
        e.starts_with("t.toml:2:8: scenario.name: \"../../x\" is not a name"),
        "{e}"
    );
    let e = err(&edit("name = \"f\"", "name = \"f\\nrm -rf /\""));
    assert!(
        e.contains("flow[0].name: \"f\\nrm -rf /\" is not a name"),
        "{e}"
    );
}

#[test]
fn bad_values_name_the_field() {
    assert_eq!(
        err(&edit("k = 4", "k = 0")),
        "t.toml:4:5: scenario.k: k = 0: a time-cycle needs at least one frame"
    );
    assert_eq!(
        err(&edit("k = 4", "k = 1")),
        "t.toml:4:5: scenario.k: k = 1: a TDP router needs k >= 2 (forwarding delays lie in [1, k))"
    );
    assert_eq!(
        err(&edit("d = 1", "d = 0")),
        "t.toml:5:5: scenario.d: forwarding delay 0: a packet must be in its output queue by the end of the frame before it leaves (time-driven forwarding, rule 1), so d is at least 1"
    );
    assert_eq!(
        err(&edit("d = 1", "d = 4")),
        "t.toml:5:5: scenario.d: forwarding delay 4 is not below k = 4 (frames per cycle)"
    );
    assert_eq!(
        err(&edit("tf = \"1ms\"", "tf = \"1 fortnight\"")),
        "t.toml:3:6: scenario.tf: expected a duration like 100us, 1.5ms or 1/2ms, got \"1 fortnight\" (unknown unit \"fortnight\")"
    );
    assert_eq!(
        err(&edit(
            "rate = \"100Mbit/s\"\n\n[[link]]\nbetween = [\"r1\"",
            "rate = \"fast\"\n\n[[link]]\nbetween = [\"r1\""
        )),
        "t.toml:21:8: link[0].rate: expected a bit rate like 100Mbit/s or 20B/us, got \"fast\""
    );
    assert_eq!(
        err(&edit("role = \"receiver\"", "role = \"sink\"")),
        "t.toml:17:8: node[2].role: expected sender, edge, core or receiver, got \"sink\""
    );
    assert_eq!(
        err(&edit("size = \"200B\"", "size = \"100B\"")),
        "t.toml:30:8: flow[0].size: 100B is too small: a probe with room for the hop records of 1 router(s) needs 124B of IP packet (IP+UDP 28, probe header 64, 32 per router)"
    );
    assert_eq!(
        err(&edit("size = \"200B\"", "size = \"200B\"\nevery = 3")),
        "t.toml:31:9: flow[0].every: every = 3 does not divide k = 4: reservations repeat every cycle"
    );
}

#[test]
fn unknown_nodes_and_duplicates() {
    assert_eq!(
        err(&edit(
            "between = [\"r1\", \"rx\"]",
            "between = [\"r1\", \"ry\"]"
        )),
        "t.toml:24:18: link[1].between[1]: unknown node \"ry\" (no [[node]] has this name)"
    );
    assert_eq!(
        err(&edit(
            "path = [\"tx\", \"r1\", \"rx\"]",
            "path = [\"tx\", \"r9\", \"rx\"]"
        )),
        "t.toml:29:15: flow[0].path[1]: unknown node \"r9\" (no [[node]] has this name)"
    );
    assert_eq!(
        err(&edit("name = \"rx\"", "name = \"r1\"")),
        "t.toml:16:8: node[2].name: node \"r1\" is already defined (line 12)"
    );
    assert_eq!(
        err(&edit(
            "between = [\"r1\", \"rx\"]",
            "between = [\"r1\", \"tx\"]"
        )),
        "t.toml:24:11: link[1].between: r1 and tx are already linked (link[0], line 20)"
    );
}

#[test]
fn duplicate_and_overlapping_addresses() {
    let a = edit(
        "between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"",
        "between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"\naddresses = [\"10.9.0.1/24\", \"10.9.0.1/24\"]",
    );
    assert_eq!(
        err(&a),
        "t.toml:26:29: link[1].addresses[1]: duplicate address 10.9.0.1: also r1's end of link[1]"
    );
    let b = edit(
        "between = [\"tx\", \"r1\"]\nrate = \"100Mbit/s\"",
        "between = [\"tx\", \"r1\"]\nrate = \"100Mbit/s\"\naddresses = [\"10.9.0.1/24\", \"10.9.0.2/24\"]",
    )
    .replacen(
        "between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"",
        "between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"\naddresses = [\"10.9.0.3/24\", \"10.9.0.4/24\"]",
        1,
    );
    assert_eq!(
        err(&b),
        "t.toml:27:13: link[1].addresses: subnet 10.9.0.0/24 overlaps 10.9.0.0/24 of link[0]: routes would be ambiguous"
    );
    // explicit subnets are skipped by the automatic ones
    let c = edit(
        "between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"",
        "between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"\naddresses = [\"10.0.1.1/24\", \"10.0.1.9/24\"]",
    );
    let s = Scenario::parse("t.toml", &c).unwrap();
    assert_eq!(
        s.links[0].addrs,
        [Ipv4Addr::new(10, 0, 2, 1), Ipv4Addr::new(10, 0, 2, 2)]
    );
    assert_eq!(
        s.links[1].addrs,
        [Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 1, 9)]
    );
}

#[test]
fn paths_must_be_connected_and_well_formed() {
    let extra = BASE.replacen(
        "[[link]]\nbetween = [\"tx\", \"r1\"]",
        "[[node]]\nname = \"r2\"\nrole = \"core\"\n\n[[link]]\nbetween = [\"r2\", \"r1\"]\nrate = \"1Gbit/s\"\n\n[[link]]\nbetween = [\"tx\", \"r1\"]",
        1,
    );
    let not_connected = extra.replacen(
        "path = [\"tx\", \"r1\", \"rx\"]",
        "path = [\"tx\", \"r1\", \"r2\", \"rx\"]",
        1,
    );
    assert_eq!(
        err(&not_connected),
        "t.toml:37:27: flow[0].path[3]: the path is not connected: no [[link]] between \"r2\" and \"rx\""
    );
    assert_eq!(
        err(&edit(
            "path = [\"tx\", \"r1\", \"rx\"]",
            "path = [\"r1\", \"rx\"]"
        )),
        "t.toml:29:9: flow[0].path[0]: a path starts at a sender, but \"r1\" is a core router"
    );
    assert_eq!(
        err(&edit(
            "path = [\"tx\", \"r1\", \"rx\"]",
            "path = [\"tx\", \"r1\"]"
        )),
        "t.toml:29:15: flow[0].path[1]: a path ends at a receiver, but \"r1\" is a core router"
    );
    assert_eq!(
        err(&edit(
            "path = [\"tx\", \"r1\", \"rx\"]",
            "path = [\"tx\", \"r1\", \"r1\", \"rx\"]"
        )),
        "t.toml:29:21: flow[0].path[2]: \"r1\" appears twice in the path (a path that comes back to a router is a ring: give loops = n to go round it n times)"
    );
    // a sender with two links
    let two = BASE.replacen(
        "[[flow]]",
        "[[link]]\nbetween = [\"tx\", \"rx\"]\nrate = \"1Gbit/s\"\n\n[[flow]]",
        1,
    );
    assert_eq!(
        err(&two),
        "t.toml:8:8: node[0].name: sender \"tx\" has 2 links; a sender or receiver has exactly one"
    );
}

#[test]
fn loads_are_checked() {
    let with_load = |load: &str| format!("{BASE}\n[[load]]\n{load}\n");
    assert_eq!(
        err(&with_load("from = \"r1\"\nto = \"rx\"\nrate = \"1Mbit/s\"")),
        "t.toml:33:8: load[0].from: load runs between hosts (senders, receivers); \"r1\" is a router"
    );
    assert_eq!(
        err(&with_load("from = \"tx\"\nto = \"rx\"\nrate = \"max\"")),
        "t.toml:35:8: load[0].rate: the lockstep generator needs a rate (rate = \"max\" is for iperf3)"
    );
    assert_eq!(
        err(&with_load("from = \"tx\"\nto = \"rx\"\nproto = \"tcp\"\nrate = \"1Mbit/s\"")),
        "t.toml:35:9: load[0].proto: the lockstep generator sends UDP; use tool = \"iperf3\" for TCP"
    );
    let ok = Scenario::parse(
        "t.toml",
        &with_load("from = \"tx\"\nto = \"rx\"\ntool = \"iperf3\"\nrate = \"max\"\nsize = \"64B\""),
    )
    .unwrap();
    assert_eq!(ok.loads[0].rate_bps, None);
    assert_eq!(ok.loads[0].size, Some(64));
}

#[test]
fn bit_rates_are_exact() {
    assert_eq!(parse_bit_rate("100Mbit/s"), Ok(100_000_000));
    assert_eq!(parse_bit_rate("1.5Gbit/s"), Ok(1_500_000_000));
    assert_eq!(parse_bit_rate("64kbps"), Ok(64_000));
    assert_eq!(
        parse_bit_rate("0Mbit/s"),
        Err("a bit rate must be above 0, got \"0Mbit/s\"".into())
    );
    assert_eq!(
        parse_bit_rate("1.0000001bit/s"),
        Err("1.0000001bit/s is not a whole number of bit/s".into())
    );
    assert_eq!(parse_bit_rate("1/8B/us"), Ok(1_000_000));
    assert!(parse_bit_rate("Mbit/s").is_err());
    assert_eq!(fmt_bit_rate(100_000_000), "100Mbit/s");
    assert_eq!(fmt_bit_rate(1_500_000), "1500kbit/s");
    assert_eq!(fmt_bit_rate(999), "999bit/s");
}

#[test]
fn every_number_has_a_limit() {
    assert_eq!(
        err(&edit("k = 4", "k = 100001")),
        "t.toml:4:5: scenario.k: k = 100001 is above the limit of 100000 frames per cycle"
    );
    assert_eq!(
        err(&edit("tf = \"1ms\"", "tf = \"999ns\"")),
        "t.toml:3:6: scenario.tf: a time-frame of 999ns is below the limit of 1us"
    );
    assert_eq!(
        err(&edit("tf = \"1ms\"", "tf = [\"1ms\", \"11s\"]")),
        "t.toml:3:6: scenario.tf: a time-frame of 11s is above the limit of 10s"
    );
    let many: Vec<String> = (1..=65).map(|i| format!("\"{i}ms\"")).collect();
    assert_eq!(
        err(&edit(
            "tf = \"1ms\"",
            &format!("tf = [{}]", many.join(", "))
        )),
        "t.toml:3:6: scenario.tf: 65 time-frames is above the limit of 64 (each is a run per mode)"
    );
    assert_eq!(
        err(&edit("d = 1", "d = 1\nduration = \"86401s\"")),
        "t.toml:6:12: scenario.duration: 86401s is above the limit of 1 day (86400s)"
    );
    assert!(Scenario::parse("t.toml", &edit("d = 1", "d = 1\nduration = \"1440min\"")).is_ok());
    assert_eq!(
        err(&edit("d = 1", "d = 1\nprocessing = \"1.5s\"")),
        "t.toml:6:14: scenario.processing: 1.5s is above the limit of 1s"
    );
    assert_eq!(
        err(&edit(
            "rate = \"100Mbit/s\"\n\n[[link]]\nbetween = [\"r1\"",
            "rate = \"1000.001Gbit/s\"\n\n[[link]]\nbetween = [\"r1\""
        )),
        "t.toml:21:8: link[0].rate: 1000.001Gbit/s is above the limit of 1 Tbit/s"
    );
    assert_eq!(parse_bit_rate("1000Gbit/s"), Ok(1_000_000_000_000));
    assert_eq!(
        err(&edit(
            "size = \"200B\"",
            "size = \"200B\"\nrate = \"100000001pps\""
        )),
        "t.toml:31:8: flow[0].rate: 100000001pps is above the limit of 100 Mpps"
    );
    assert_eq!(
        err(&edit(
            "size = \"200B\"",
            "size = \"200B\"\ncount = 1000000000001"
        )),
        "t.toml:31:9: flow[0].count: 1000000000001 is above the limit of 1000000000000"
    );
    assert_eq!(
        err(&edit("role = \"core\"", "role = \"core\"\ncpu = 65537")),
        "t.toml:14:7: node[1].cpu: CPU 65537 is above the limit of 65536"
    );
    let s = Scenario::parse("t.toml", BASE).unwrap();
    assert_eq!(
        s.clone()
            .with_overrides(Some(Duration::from_nanos(500)), None)
            .unwrap_err()
            .to_string(),
        "t.toml:3:6: scenario.tf: --tf 500ns: a time-frame of 500ns is below the limit of 1us"
    );
    let slow = Scenario::parse("t.toml", &edit("tf = \"1ms\"", "tf = \"60ms\"")).unwrap();
    assert_eq!(
        slow.scaled(200).unwrap_err().to_string(),
        "t.toml:3:6: scenario.tf: time scale 200: a time-frame of 12s is above the limit of 10s"
    );
}

#[test]
fn the_tables_of_a_scenario_are_counted() {
    assert_eq!(table_counts(1_000_000, 2_000_000, 1_000_000), Ok(()));
    assert_eq!(
        table_counts(1_000_001, 0, 0),
        Err((
            "node",
            "1000001 [[node]] tables is above the limit of 1000000".into()
        ))
    );
    assert_eq!(
        table_counts(2, 2_000_001, 0),
        Err((
            "link",
            "2000001 [[link]] tables is above the limit of 2000000".into()
        ))
    );
    assert_eq!(
        table_counts(2, 1, 1_000_001),
        Err((
            "flow",
            "1000001 [[flow]] tables is above the limit of 1000000".into()
        ))
    );
}

#[test]
fn command_line_overrides_are_checked_too() {
    let s = Scenario::parse("t.toml", BASE).unwrap();
    let o = s
        .clone()
        .with_overrides(
            Some(Duration::from_micros(100)),
            Some(vec![RunMode::Fifo, RunMode::Tdp]),
        )
        .unwrap();
    assert_eq!(o.tfs, [Duration::from_micros(100)]);
    let labels: Vec<String> = o
        .runs()
        .iter()
        .map(|r| format!("{} {}", r.label, r.dir))
        .collect();
    assert_eq!(labels, ["FIFO fifo", "TDP tdp"]);
    // at 10 us a 200-byte packet (1904 bits) fits a 100 Mb/s frame of 1000 bits no more
    assert_eq!(
        s.with_overrides(Some(Duration::from_micros(10)), None).unwrap_err().to_string(),
        "t.toml:28:8: flow[0].packets: 1 packet(s) of 200B take 1904 bits on the wire but a frame of 10us at 100Mbit/s carries 1000 (link tx→r1)"
    );
}

#[test]
fn asynchronous_sources_need_an_edge_first() {
    assert_eq!(
        err(&edit("d = 1", "d = 1\nsources = \"asynchronous\"")),
        "t.toml:30:15: flow[0].path[1]: with asynchronous sources the first router must be an edge (it holds each packet until its frame), but \"r1\" is core"
    );
}

#[test]
fn router_layout_and_source_load_are_checked() {
    assert_eq!(
        Scenario::parse("t.toml", BASE).unwrap().routers,
        RouterLayout::OneProcess
    );
    let s = Scenario::parse("t.toml", &edit("d = 1", "d = 1\nrouters = \"per-node\"")).unwrap();
    assert_eq!(s.routers, RouterLayout::PerNode);
    assert_eq!(
        Scenario::parse("t.toml", BASE).unwrap().senders,
        SenderLayout::WithRouters
    );
    let s = Scenario::parse(
        "t.toml",
        &edit("d = 1", "d = 1\nsenders = \"with-routers\""),
    )
    .unwrap();
    assert_eq!(s.senders, SenderLayout::WithRouters);
    let s = Scenario::parse("t.toml", &edit("d = 1", "d = 1\nsenders = \"own-process\"")).unwrap();
    assert_eq!(s.senders, SenderLayout::OwnProcess);
    assert_eq!(
        err(&edit("d = 1", "d = 1\nsenders = \"with-router\"")),
        "t.toml:6:11: scenario.senders: expected own-process or with-routers, got \"with-router\""
    );
    assert_eq!(
        err(&edit("d = 1", "d = 1\nrouters = \"many\"")),
        "t.toml:6:11: scenario.routers: expected one-process, one-thread or per-node, got \"many\""
    );
    assert_eq!(
        err(&edit("d = 1", "d = 1\nsource_load = 1.5")),
        "t.toml:6:15: scenario.source_load: expected a fraction of the reservation in (0, 1], got 1.5"
    );
    assert_eq!(
        err(&edit("d = 1", "d = 1\nsource_load = 0.9")),
        "t.toml:6:15: scenario.source_load: only asynchronous sources send less than their reservation (sources = \"asynchronous\")"
    );
    let m = Scenario::parse("mesh4.toml", MESH4).unwrap();
    assert_eq!((m.source_load_ppm, m.source_drift_ppb), (1_000_000, 50));
    let asy = |extra: &str| {
        edit(
            "d = 1",
            &format!("d = 1\nsources = \"asynchronous\"\n{extra}"),
        )
    };
    assert_eq!(
        err(&asy("source_drift = \"3 s\"")),
        "t.toml:7:16: scenario.source_drift: expected a drift like \"100ppm\" or \"50ppb\", got \"3 s\""
    );
    assert_eq!(
        err(&edit("d = 1", "d = 1\nsource_drift = \"1ppm\"")),
        "t.toml:6:16: scenario.source_drift: only asynchronous sources have clocks of their own (sources = \"asynchronous\")"
    );
}

/// BASE with a ring r1 → r2 → r1 (the path goes back over the link it came by).
fn ring(extra: &str) -> String {
    let two = BASE
        .replace(
            "[[node]]\nname = \"rx\"",
            "[[node]]\nname = \"r2\"\nrole = \"core\"\n\n[[node]]\nname = \"rx\"",
        )
        .replace(
            "[[flow]]",
            "[[link]]\nbetween = [\"r1\", \"r2\"]\nrate = \"100Mbit/s\"\n\n[[flow]]",
        );
    two.replace(
        "path = [\"tx\", \"r1\", \"rx\"]",
        &format!("path = [\"tx\", \"r1\", \"r2\", \"r1\", \"rx\"]\n{extra}"),
    )
    .replace("size = \"200B\"", "size = \"400B\"")
}

#[test]
fn loops_unroll_the_ring() {
    let s = Scenario::parse("t.toml", &ring("loops = 3")).unwrap();
    let f = &s.flows[0];
    let name = |n: &usize| s.nodes[*n].name.as_str();
    let path: Vec<&str> = f.path.iter().map(name).collect();
    assert_eq!(path, ["tx", "r1", "r2", "r1", "r2", "r1", "r2", "r1", "rx"]);
    assert_eq!(f.links.len(), f.path.len() - 1);
    assert_eq!((f.loops, f.routers().len()), (3, 7));
    let once = Scenario::parse("t.toml", &ring("loops = 1")).unwrap();
    assert_eq!(once.flows[0].path.len(), 5);
    let shipped = Scenario::parse("mesh4.toml", MESH4).unwrap();
    let routers: Vec<usize> = shipped.flows.iter().map(|f| f.routers().len()).collect();
    assert_eq!(routers, [21, 16, 16, 16, 16]);
}

#[test]
fn loops_errors_say_what_a_ring_is() {
    assert_eq!(
        err(&ring("")),
        "t.toml:37:27: flow[0].path[3]: \"r1\" appears twice in the path (a path that comes back to a router is a ring: give loops = n to go round it n times)"
    );
    assert_eq!(
        err(&ring("loops = 0")),
        "t.toml:38:9: flow[0].loops: loops must be 1..1000, got 0"
    );
    assert_eq!(
        err(&edit("size = \"200B\"", "size = \"200B\"\nloops = 2")),
        "t.toml:31:9: flow[0].loops: loops needs a ring in the path: a router met twice, as in [\"s\", \"r1\", \"r2\", \"r3\", \"r1\", \"d\"]"
    );
    assert_eq!(
        err(&ring("loops = 40")),
        "t.toml:37:8: flow[0].path: the path crosses 81 routers; a packet sent with TTL 64 is dropped after 62"
    );
    assert_eq!(
        err(&ring("loops = 2\nd = [1, 1, 1, 1, 1]")),
        "t.toml:39:5: flow[0].d: a looping flow meets its routers several times: give d as one number"
    );
}

#[test]
fn routing_is_shortest_or_flows() {
    assert_eq!(
        Scenario::parse("t.toml", BASE).unwrap().routing,
        Routing::Shortest
    );
    for (text, want) in [("shortest", Routing::Shortest), ("flows", Routing::Flows)] {
        let s = Scenario::parse(
            "t.toml",
            &edit("d = 1", &format!("d = 1\nrouting = \"{text}\"")),
        )
        .unwrap();
        assert_eq!(s.routing, want);
    }
    assert_eq!(
        err(&edit("d = 1", "d = 1\nrouting = \"ospf\"")),
        "t.toml:6:11: scenario.routing: expected shortest or flows, got \"ospf\""
    );
    assert_eq!(
        err(&edit("d = 1", "d = 1\nrouting = 3")),
        "t.toml:6:11: scenario.routing: invalid type: integer `3`, expected a string"
    );
    // a load needs routes to every host
    let flows_load = format!(
        "{}\n[[load]]\nfrom = \"tx\"\nto = \"rx\"\nrate = \"1Mbit/s\"\n",
        edit("d = 1", "d = 1\nrouting = \"flows\"")
    );
    assert_eq!(
        err(&flows_load),
        "t.toml:35:6: load[0].to: with routing = \"flows\" the routers know only the flows' receivers: a load needs routing = \"shortest\""
    );
}

/// One router `r` with a sender and `hosts` receivers, a flow to the first one;
/// `first_link` is added to the first link's table.
pub(crate) fn star(hosts: usize, first_link: &str) -> String {
    let mut s = String::from("[scenario]\nname = \"star\"\ntf = \"1ms\"\nk = 4\n\n[[node]]\nname = \"r\"\nrole = \"edge\"\n\n[[node]]\nname = \"tx\"\nrole = \"sender\"\n");
    for h in 0..hosts {
        s.push_str(&format!(
            "\n[[node]]\nname = \"h{h}\"\nrole = \"receiver\"\n"
        ));
    }
    s.push_str(&format!(
        "\n[[link]]\nbetween = [\"tx\", \"r\"]\nrate = \"100Mbit/s\"\n{first_link}\n"
    ));
    for h in 0..hosts {
        s.push_str(&format!(
            "\n[[link]]\nbetween = [\"r\", \"h{h}\"]\nrate = \"100Mbit/s\"\n"
        ));
    }
    s.push_str("\n[[flow]]\nname = \"f\"\npath = [\"tx\", \"r\", \"h0\"]\nsize = \"200B\"\n");
    s
}

#[test]
fn automatic_addresses_go_on_beyond_255_links() {
    let s = Scenario::parse("t.toml", &star(299, "")).unwrap();
    assert_eq!(s.links.len(), 300);
    let first = |l: usize| s.links[l].addrs;
    // the first 255 as always: 10.0.<n>.0/24
    assert_eq!(
        first(0),
        [Ipv4Addr::new(10, 0, 1, 1), Ipv4Addr::new(10, 0, 1, 2)]
    );
    assert_eq!(first(254)[0], Ipv4Addr::new(10, 0, 255, 1));
    // then 10.<n / 256>.<n % 256>.0/24
    assert_eq!(
        first(255),
        [Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(10, 1, 0, 2)]
    );
    assert_eq!(first(299)[1], Ipv4Addr::new(10, 1, 44, 2));
    let subnets: std::collections::HashSet<Prefix> = s.links.iter().map(LinkSpec::subnet).collect();
    assert_eq!(subnets.len(), 300);
    assert!(s.links.iter().all(|l| l.prefix_len == 24));
    assert_eq!(s.links_of(0).len(), 300);
    assert_eq!(s.links_of(2), [1]);

    // automatic subnets step over a given one that covers many of them
    let s = Scenario::parse(
        "t.toml",
        &star(299, "addresses = [\"10.1.0.1/16\", \"10.1.0.2/16\"]"),
    )
    .unwrap();
    assert_eq!(s.links[0].subnet().to_string(), "10.1.0.0/16");
    assert_eq!(s.links[1].addrs[0], Ipv4Addr::new(10, 0, 1, 1));
    assert_eq!(s.links[255].addrs[0], Ipv4Addr::new(10, 0, 255, 1));
    assert_eq!(s.links[256].addrs[0], Ipv4Addr::new(10, 2, 0, 1));
    assert_eq!(s.links[299].addrs[0], Ipv4Addr::new(10, 2, 43, 1));
}

#[test]
fn given_subnets_must_not_contain_each_other() {
    let with = |a: &str, b: &str| {
        edit(
            "between = [\"tx\", \"r1\"]\nrate = \"100Mbit/s\"",
            &format!("between = [\"tx\", \"r1\"]\nrate = \"100Mbit/s\"\naddresses = {a}"),
        )
        .replacen(
            "between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"",
            &format!("between = [\"r1\", \"rx\"]\nrate = \"100Mbit/s\"\naddresses = {b}"),
            1,
        )
    };
    // the second inside the first
    assert_eq!(
        err(&with(
            "[\"10.9.0.1/16\", \"10.9.0.2/16\"]",
            "[\"10.9.3.1/24\", \"10.9.3.2/24\"]"
        )),
        "t.toml:27:13: link[1].addresses: subnet 10.9.3.0/24 overlaps 10.9.0.0/16 of link[0]: routes would be ambiguous"
    );
    // the second around the first
    assert_eq!(
        err(&with(
            "[\"10.9.3.1/24\", \"10.9.3.2/24\"]",
            "[\"10.9.0.1/16\", \"10.9.0.2/16\"]"
        )),
        "t.toml:27:13: link[1].addresses: subnet 10.9.0.0/16 overlaps 10.9.3.0/24 of link[0]: routes would be ambiguous"
    );
    // side by side
    let s = Scenario::parse(
        "t.toml",
        &with(
            "[\"10.9.0.1/30\", \"10.9.0.2/30\"]",
            "[\"10.9.0.5/30\", \"10.9.0.6/30\"]",
        ),
    )
    .unwrap();
    assert_eq!(s.links[1].subnet().to_string(), "10.9.0.4/30");
}

#[test]
fn a_scaled_scenario_keeps_its_frames_and_slows_everything_by_the_factor() {
    let s = Scenario::parse("mesh4.toml", MESH4).unwrap();
    let x = s.clone().scaled(20).unwrap();
    assert_eq!(x.tfs, [Duration::from_millis(5)]);
    assert_eq!(x.processing, Duration::from_millis(2));
    assert!(x.links.iter().all(|l| l.rate_bps == 5_000_000));
    assert!(x
        .flows
        .iter()
        .all(|f| f.rate == FlowRate::Packets(PacketRate { milli_pps: 40_000 })));
    assert!(x.description.ends_with("time scaled x20"));
    assert_eq!((s.time_scale, x.time_scale), (1, 20));
    for (a, b) in s.runs().iter().zip(x.runs()) {
        let (pa, pb) = (
            crate::plan::plan(&s, a).unwrap(),
            crate::plan::plan(&x, &b).unwrap(),
        );
        let frames = |p: &crate::plan::Plan| -> Vec<(Vec<u32>, Vec<u32>)> {
            p.flows
                .iter()
                .map(|f| (f.starts.clone(), f.offsets.clone()))
                .collect()
        };
        assert_eq!(frames(&pa), frames(&pb), "{}", a.label);
    }
    assert_eq!(s.clone().scaled(1).unwrap().tfs, s.tfs);
}

#[test]
fn a_rate_the_scale_does_not_divide_is_refused_at_its_link() {
    let text = BASE.replace("rate = \"100Mbit/s\"", "rate = \"100000001bit/s\"");
    let s = Scenario::parse("t.toml", &text).unwrap();
    let e = s.scaled(2).unwrap_err().to_string();
    assert!(
        e.contains("100000001 bit/s cannot be divided by the time scale 2"),
        "{e}"
    );
}

#[test]
fn a_router_may_coalesce_and_the_plan_carries_it() {
    let text = edit("role = \"core\"", "role = \"core\"\ncoalesce = \"20us\"");
    let s = Scenario::parse("t.toml", &text).unwrap();
    assert_eq!(s.nodes[1].coalesce, Some(Duration::from_micros(20)));
    let runs = s.runs();
    let p = crate::plan::plan(&s, &runs[0]).unwrap();
    let r1 = p.node("r1").unwrap().config.as_ref().unwrap();
    assert_eq!(r1.live.coalesce, Some(Duration::from_micros(20)));
    assert_eq!(
        err(&edit(
            "role = \"sender\"",
            "role = \"sender\"\ncoalesce = \"20us\""
        )),
        format!(
            "t.toml:10:12: node[0].coalesce: {}",
            crate::nodefile::NOT_ROUTER
        )
    );
    let edge = edit("role = \"core\"", "role = \"edge\"\ncoalesce = \"20us\"");
    assert!(Scenario::parse("t.toml", &edge).is_ok());
    assert_eq!(
        err(&edit(
            "role = \"core\"",
            "role = \"core\"\ncoalesce = \"5ms\""
        )),
        "t.toml:14:12: node[1].coalesce: 5ms is outside 0..=1ms"
    );
}

#[test]
fn hosts_may_move_frames_and_the_plan_carries_it() {
    let text = edit("role = \"sender\"", "role = \"sender\"\nio = \"xdp\"");
    let s = Scenario::parse("t.toml", &text).unwrap();
    assert_eq!(s.nodes[0].io, Some(crate::nodefile::NodeIo::Xdp));
    let runs = s.runs();
    let p = crate::plan::plan(&s, &runs[0]).unwrap();
    let tx = p.node("tx").unwrap().config.as_ref().unwrap();
    assert_eq!(tx.live.io, Some(crate::nodefile::NodeIo::Xdp));
    // without it, the node file leaves the choice to the node (udp for hosts)
    let plain = Scenario::parse("t.toml", BASE).unwrap();
    let p = crate::plan::plan(&plain, &plain.runs()[0]).unwrap();
    assert_eq!(p.node("tx").unwrap().config.as_ref().unwrap().live.io, None);
    let rx = edit("role = \"receiver\"", "role = \"receiver\"\nio = \"ring\"");
    assert!(Scenario::parse("t.toml", &rx).is_ok());
    assert_eq!(
        err(&edit(
            "role = \"sender\"",
            "role = \"sender\"\nio = \"dpdk\""
        )),
        "t.toml:10:6: node[0].io: expected one of udp, packet, ring, ring-v2, xdp, got \"dpdk\""
    );
    assert_eq!(
        err(&edit("role = \"core\"", "role = \"core\"\nio = \"xdp\"")),
        "t.toml:14:6: node[1].io: a router's ports move frames as `lab run --io` says (xdp by default): io is for senders and receivers"
    );
}
