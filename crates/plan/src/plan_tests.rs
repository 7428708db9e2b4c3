use super::*;
use crate::scenario::tests::{GATEWAY, LINE, MESH4, MESH4_482};

fn parse(text: &str) -> Scenario {
    Scenario::parse("t.toml", text).unwrap()
}

fn run(s: &Scenario, mode: RunMode) -> Plan {
    let spec = s.runs().into_iter().find(|r| r.mode == mode).unwrap();
    plan(s, &spec).unwrap()
}

fn ip(s: &str) -> Ipv4Addr {
    s.parse().unwrap()
}

fn mac(s: &str) -> EthernetAddress {
    s.parse().unwrap()
}

fn ifaces(p: &Plan, node: &str) -> Vec<String> {
    p.node(node)
        .unwrap()
        .ifaces
        .iter()
        .map(|i| {
            format!(
                "{} {} {}/{} -> {} {}",
                i.ifname, i.mac, i.addr, i.prefix_len, i.peer_addr, i.peer_mac
            )
        })
        .collect()
}

fn routes(p: &Plan, node: &str) -> Vec<String> {
    let c = p.node(node).unwrap().config.as_ref().unwrap();
    c.node
        .routes
        .iter()
        .map(|r| format!("{} {} via {}", r.prefix, r.port.0, r.next_hop.unwrap()))
        .collect()
}

#[test]
fn line_addresses_macs_and_routes() {
    let s = parse(LINE);
    let p = run(&s, RunMode::Tdp);
    assert_eq!(
        ifaces(&p, "tx"),
        ["to-r1 02:4c:53:00:00:01 10.0.1.1/24 -> 10.0.1.2 02:4c:53:00:00:02"]
    );
    assert_eq!(
        ifaces(&p, "r1"),
        [
            "to-tx 02:4c:53:00:00:02 10.0.1.2/24 -> 10.0.1.1 02:4c:53:00:00:01",
            "to-r2 02:4c:53:00:01:01 10.0.2.1/24 -> 10.0.2.2 02:4c:53:00:01:02"
        ]
    );
    assert_eq!(
        ifaces(&p, "r2"),
        [
            "to-r1 02:4c:53:00:01:02 10.0.2.2/24 -> 10.0.2.1 02:4c:53:00:01:01",
            "to-rx 02:4c:53:00:02:01 10.0.3.1/24 -> 10.0.3.2 02:4c:53:00:02:02"
        ]
    );
    assert_eq!(
        ifaces(&p, "rx"),
        ["to-r2 02:4c:53:00:02:02 10.0.3.2/24 -> 10.0.3.1 02:4c:53:00:02:01"]
    );
    assert_eq!(routes(&p, "r1"), ["10.0.3.0/24 1 via 10.0.2.2"]);
    assert_eq!(routes(&p, "r2"), ["10.0.1.0/24 0 via 10.0.2.1"]);
    assert_eq!(routes(&p, "tx"), ["0.0.0.0/0 0 via 10.0.1.2"]);

    // the hosts' kernels route through their router and know its MAC; the
    // routers' kernels get nothing (the user-space router owns the interfaces)
    let tx = &p.node("tx").unwrap().kernel;
    assert!(tx.addresses && !tx.forwarding);
    assert_eq!(
        tx.routes,
        [KernelRoute {
            dest: "0.0.0.0/0".parse().unwrap(),
            via: ip("10.0.1.2"),
            dev: "to-r1".into()
        }]
    );
    assert_eq!(
        tx.neighbours,
        [(
            "to-r1".to_string(),
            ip("10.0.1.2"),
            mac("02:4c:53:00:00:02")
        )]
    );
    let r1 = &p.node("r1").unwrap().kernel;
    assert_eq!(r1, &KernelSetup::default());
}

#[test]
fn line_schedule_and_node_files() {
    let s = parse(LINE);
    let p = run(&s, RunMode::Tdp);
    let f = &p.flows[0];
    assert_eq!(f.starts, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(f.offsets, [0, 2, 4]);
    assert_eq!(
        (f.src.to_string(), f.dst.to_string()),
        ("10.0.1.1:6001".into(), "10.0.3.2:5000".into())
    );

    let tx = p.node("tx").unwrap().config.as_ref().unwrap();
    assert_eq!(tx.node.mode, Mode::Tdp);
    assert_eq!(tx.node.frame.tf, Duration::from_micros(250));
    let slots: Vec<u32> = tx.node.flows[0].rows.iter().map(|r| r.slot).collect();
    assert_eq!(slots, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(tx.node.flows[0].dst, Some("10.0.3.2:5000".parse().unwrap()));
    assert_eq!(
        tx.live.flows,
        [LiveFlow {
            flow: 1,
            dst: Some("10.0.3.2:5000".parse().unwrap()),
            src_port: 6001,
            size: 172,
            count: None
        }]
    );
    // r1 is an edge: the sender leaves marking to it
    assert_eq!(tx.live.mark, Some(false));

    let r1 = p.node("r1").unwrap().config.as_ref().unwrap();
    let fl = &r1.node.flows[0];
    assert_eq!(fl.out_port, PortId(1));
    assert_eq!(fl.d, None);
    let slots: Vec<u32> = fl.rows.iter().map(|r| r.slot).collect();
    assert_eq!(slots, [2, 3, 4, 5, 6, 7, 0, 1]);
    assert_eq!(
        fl.rows[0],
        RowConfig {
            slot: 2,
            packets: 1,
            size: 200
        }
    );
    let rule = fl.rule.as_ref().unwrap();
    assert_eq!(rule.src, Some("10.0.1.1/32".parse().unwrap()));
    assert_eq!(rule.dst, Some("10.0.3.2/32".parse().unwrap()));
    assert_eq!(
        (rule.proto, rule.src_ports, rule.dst_ports),
        (Some(17), Some((6001, 6001)), Some((5000, 5000)))
    );
    let ports: Vec<(Option<u32>, Option<bool>)> =
        r1.node.ports.iter().map(|p| (p.d, p.padding)).collect();
    assert_eq!(ports, [(Some(2), Some(false)), (Some(2), None)]);

    let r2 = p.node("r2").unwrap().config.as_ref().unwrap();
    let slots: Vec<u32> = r2.node.flows[0].rows.iter().map(|r| r.slot).collect();
    assert_eq!(slots, [4, 5, 6, 7, 0, 1, 2, 3]);
    let ports: Vec<(Option<u32>, Option<bool>)> =
        r2.node.ports.iter().map(|p| (p.d, p.padding)).collect();
    // no reserved packet goes r2 → r1: no padding there either
    assert_eq!(ports, [(Some(2), Some(false)), (None, Some(false))]);
    assert_eq!(r2.live.names.get("2").map(String::as_str), None);

    let rx = p.node("rx").unwrap().config.as_ref().unwrap();
    assert_eq!(rx.live.bind, Some("10.0.3.2:5000".parse().unwrap()));
    assert!(rx.live.samples);
    assert_eq!(rx.live.names.get("2").map(String::as_str), Some("r1"));
    assert_eq!(rx.live.names.get("3").map(String::as_str), Some("r2"));

    // every node file survives its TOML round trip
    for n in &p.nodes {
        let c = n.config.as_ref().unwrap();
        let text = node_file_toml(c).unwrap();
        let back: NodeFile = toml::from_str(&text).unwrap();
        assert_eq!(&back, c, "{}", n.name);
    }
}

#[test]
fn fifo_and_kernel_modes() {
    let mut s = parse(LINE);
    s.modes = vec![RunMode::Fifo, RunMode::Kernel];
    let fifo = run(&s, RunMode::Fifo);
    for n in &fifo.nodes {
        assert_eq!(
            n.config.as_ref().unwrap().node.mode,
            Mode::Fifo,
            "{}",
            n.name
        );
    }
    let k = run(&s, RunMode::Kernel);
    let r1 = k.node("r1").unwrap();
    assert!(r1.config.is_none());
    assert!(r1.kernel.addresses && r1.kernel.forwarding);
    assert_eq!(
        r1.kernel.routes,
        [KernelRoute {
            dest: "10.0.3.0/24".parse().unwrap(),
            via: ip("10.0.2.2"),
            dev: "to-r2".into()
        }]
    );
    assert_eq!(r1.kernel.neighbours.len(), 2);
    assert_eq!(
        k.node("tx").unwrap().config.as_ref().unwrap().node.mode,
        Mode::Fifo
    );
}

#[test]
fn mesh4_loops_fill_the_ring_and_route_on_the_ttl() {
    let s = parse(MESH4);
    let p = run(&s, RunMode::Tdp);
    // 12 frames of 60 per flow, five apart
    let every5: Vec<u32> = (0..12).map(|i| i * 5).collect();
    for f in &p.flows {
        assert_eq!(f.starts, every5, "{}", f.name);
    }
    // f1234: in at r1, 5 times round r1→r2→r3→r4→r1, out at r1: 22 links, 3 frames apart
    let f1234 = &p.flows[0];
    assert_eq!(f1234.offsets, (0..22).map(|j| 3 * j).collect::<Vec<u32>>());
    assert_eq!(p.flows[1].offsets.len(), 17); // f123: 1 + 3 x 5 + 1
                                              // r1 sends f1234 on round the ring while its TTL is above 44 (its 21st router)
    let r1 = routes(&p, "r1");
    let d1234 = p.flows[0].dst.ip().to_string();
    let ttl_routes: Vec<String> = p
        .node("r1")
        .unwrap()
        .config
        .as_ref()
        .unwrap()
        .node
        .routes
        .iter()
        .filter(|r| r.prefix.addr.to_string() == d1234)
        .map(|r| format!("{:?} {}", r.ttl, r.port.0))
        .collect();
    assert_eq!(
        ttl_routes,
        [
            "Some(44) 4",
            "Some(48) 0",
            "Some(52) 0",
            "Some(56) 0",
            "Some(60) 0",
            "Some(64) 0"
        ],
        "{r1:?}"
    );
    // every ring link carries three 1020-byte frames in every one of the 60 frames,
    // every diagonal one (5 passes of one flow)
    let (_, sched) = schedule(&s, Duration::from_micros(250)).unwrap();
    let link = Link::ethernet(100_000_000);
    let node = |n: &str| s.nodes.iter().position(|x| x.name == n).unwrap();
    let link_of = |a: &str, b: &str| {
        let (a, b) = (node(a), node(b));
        let l = s
            .links
            .iter()
            .position(|l| l.end_of(a).is_some() && l.end_of(b).is_some());
        (l.unwrap(), a)
    };
    let rows = |a: &str, b: &str| -> Vec<u128> {
        let key = link_of(a, b);
        (0..60)
            .map(|slot| sched[&key].row_bits(slot, &link))
            .collect()
    };
    for (a, b) in [("r1", "r2"), ("r2", "r3"), ("r3", "r4"), ("r4", "r1")] {
        assert_eq!(rows(a, b), vec![24_960; 60], "{a}→{b}");
    }
    for (a, b) in [("r1", "r3"), ("r3", "r1"), ("r2", "r4"), ("r4", "r2")] {
        assert_eq!(rows(a, b), vec![8_320; 60], "{a}→{b}");
    }
    assert_eq!(rows("r1", "r4"), vec![0; 60]);
    // asynchronous sources: the n-th sender 50 ppb slower, its receiver on its clock;
    // the live sender's frame is longer by less than a nanosecond (250 us)
    let slow: Vec<(i64, i64)> = ["s1234", "s123", "s234", "s341", "s412"]
        .iter()
        .map(|n| {
            let rx = n.replacen('s', "d", 1);
            let clock = |n: &str| p.node(n).unwrap().async_clock.unwrap().slow_ppb;
            (clock(n), clock(&rx))
        })
        .collect();
    assert_eq!(
        slow,
        [(50, 50), (100, 100), (150, 150), (200, 200), (250, 250)]
    );
    let s1 = p.node("s1234").unwrap().config.as_ref().unwrap();
    assert_eq!(s1.node.frame.tf.as_nanos(), 250_000);
    assert_eq!(s1.live.mark, Some(false));
    assert!(p.node("r1").unwrap().async_clock.is_none());
}

#[test]
fn mesh4_482_books_six_packets_in_every_ring_frame() {
    let s = parse(MESH4_482);
    let loops: Vec<u32> = s.flows.iter().map(|f| f.loops).collect();
    assert_eq!(loops, [5, 10, 15, 10, 15]);
    let (starts, sched) = schedule(&s, Duration::from_micros(250)).unwrap();
    assert!(starts.iter().all(|st| st.len() == 12));
    let link = Link::ethernet(100_000_000);
    let r1 = s.nodes.iter().position(|x| x.name == "r1").unwrap();
    let r2 = s.nodes.iter().position(|x| x.name == "r2").unwrap();
    let l = s
        .links
        .iter()
        .position(|l| l.end_of(r1).is_some() && l.end_of(r2).is_some())
        .unwrap();
    let bits: Vec<u128> = (0..60)
        .map(|t| sched[&(l, r1)].row_bits(t, &link))
        .collect();
    assert_eq!(bits, vec![6 * 520 * 8; 60]);
    assert!(run(&s, RunMode::Tdp).nodes.len() == 14);
}

/// A flow round the ring r1 → r2 → r1 twice crosses r1→r2 one and three frames after
/// its start; with starts two frames apart the second start's passes land in the
/// first start's frames.
const PING_PONG: &str = r#"[scenario]
name = "ping-pong"
tf = "250us"
k = 4
d = 1
modes = ["tdp"]
duration = "1s"

[[node]]
name = "s"
role = "sender"
[[node]]
name = "r1"
role = "edge"
[[node]]
name = "r2"
role = "edge"
[[node]]
name = "d"
role = "receiver"

[[link]]
between = ["s", "r1"]
rate = "100Mbit/s"
[[link]]
between = ["r1", "r2"]
rate = "100Mbit/s"
[[link]]
between = ["r1", "d"]
rate = "100Mbit/s"

[[flow]]
name = "f"
path = ["s", "r1", "r2", "r1", "d"]
loops = 2
size = "1002B"
packets = 2
every = 2
"#;

#[test]
fn passes_of_different_starts_are_summed_too() {
    let s = parse(PING_PONG);
    let (starts, sched) = schedule(&s, Duration::from_micros(250)).unwrap();
    // starts 0 and 2 would put 2 x 16 640 bits in frames 1 and 3 of r1→r2 (a frame
    // carries 25 000): the second start moves on to 3, whose passes take 0 and 2
    assert_eq!(starts, [vec![0, 3]]);
    let r1 = s.nodes.iter().position(|x| x.name == "r1").unwrap();
    let link = Link::ethernet(100_000_000);
    let bits: Vec<u128> = (0..4).map(|t| sched[&(1, r1)].row_bits(t, &link)).collect();
    assert_eq!(bits, [16_640; 4]);
    // a start every frame: each frame of r1→r2 would carry two passes; two starts fit
    let e = Scenario::parse("t.toml", &PING_PONG.replace("every = 2", "every = 1"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("flow \"f\" does not fit: it needs 4 frame(s) per cycle of 4 with 2 packet(s) of 1002B on every link of its path, but only 2 start frame(s) have room"),
        "{e}"
    );
}

#[test]
fn the_kernel_cannot_route_a_looping_flow() {
    let text = MESH4.replace("modes = [\"fifo\", \"tdp\"]", "modes = [\"kernel\"]");
    let e = Scenario::parse("t.toml", &text).unwrap_err().to_string();
    assert!(
        e.contains("flow \"f1234\" loops 5 times round its ring, which needs routing on the TTL"),
        "{e}"
    );
}

#[test]
fn gateway_sender_marks_and_sweeps() {
    let s = parse(GATEWAY);
    let runs = s.runs();
    assert_eq!(runs.len(), 6);
    let p = plan(&s, &runs[5]).unwrap();
    let tx = p.node("tx").unwrap().config.as_ref().unwrap();
    assert_eq!(tx.node.frame.tf, Duration::from_micros(50));
    assert_eq!(tx.live.mark, None);
    assert_eq!(tx.live.strategy, lockstep_core::sched::WaitStrategy::Hybrid);
    assert_eq!(tx.live.flows[0].size, 64);
}

const CONTENDED: &str = r#"[scenario]
name = "c"
tf = "250us"
k = 4
d = 1

[[node]]
name = "a"
role = "sender"

[[node]]
name = "b"
role = "sender"

[[node]]
name = "r"
role = "core"

[[node]]
name = "z"
role = "receiver"

[[link]]
between = ["a", "r"]
rate = "100Mbit/s"

[[link]]
between = ["b", "r"]
rate = "100Mbit/s"

[[link]]
between = ["r", "z"]
rate = "100Mbit/s"

[[flow]]
name = "f1"
path = ["a", "r", "z"]
size = "1000B"
packets = 2
every = 2

[[flow]]
name = "f2"
path = ["b", "r", "z"]
size = "1000B"
packets = 2
rate = "32Mbit/s"
"#;

#[test]
fn contending_flows_are_staggered_or_refused() {
    let s = parse(CONTENDED);
    let p = run(&s, RunMode::Tdp);
    // 2 x 1000 B = 16 608 bits; two such rows do not share a 25 000-bit frame on r→z
    assert_eq!(p.flows[0].starts, [0, 2]);
    assert_eq!(p.flows[1].starts, [1, 3]);
    let r = p.node("r").unwrap().config.as_ref().unwrap();
    let f2: Vec<u32> = r.node.flows[1].rows.iter().map(|r| r.slot).collect();
    assert_eq!(f2, [2, 0]);
    // a third flow finds no frame
    let third = format!(
        "{CONTENDED}\n[[flow]]\nname = \"f3\"\npath = [\"a\", \"r\", \"z\"]\nsize = \"1000B\"\npacket = 1\n"
    );
    assert!(Scenario::parse("t.toml", &third).is_err());
    let third = format!("{CONTENDED}\n[[flow]]\nname = \"f3\"\npath = [\"a\", \"r\", \"z\"]\nsize = \"1000B\"\npackets = 2\n");
    assert_eq!(
        Scenario::parse("t.toml", &third).unwrap_err().to_string(),
        "t.toml:49:1: flow[2]: flow \"f3\" does not fit: it needs 4 frame(s) per cycle of 4 with 2 packet(s) of 1000B on every link of its path, but only 0 start frame(s) have room at TF 250us (the links are full)"
    );
    // the rate that needs more than every frame
    let fast = CONTENDED.replace("rate = \"32Mbit/s\"", "rate = \"200Mbit/s\"");
    assert_eq!(
        Scenario::parse("t.toml", &fast).unwrap_err().to_string(),
        "t.toml:47:8: flow[1].rate: 200Mbit/s needs 13 reserved frames per cycle of 4 at TF 250us with 2 packet(s) of 1000B each: raise packets"
    );
}

#[test]
fn non_immediate_delays_and_too_small_ones() {
    let s = parse(&LINE.replace("every = 1 ", "d = [1, 3]\nevery = 1 "));
    let p = run(&s, RunMode::Tdp);
    assert_eq!(p.flows[0].offsets, [0, 1, 4]);
    let d_at = |n: &str| p.node(n).unwrap().config.as_ref().unwrap().node.flows[0].d;
    assert_eq!((d_at("r1"), d_at("r2")), (Some(1), Some(3)));
    // a full upstream row (3 x 1002 B = 249.6 us at 100 Mb/s) plus 100 us of processing
    // does not fit in d = 1 frame of 250 us
    let full = LINE
        .replace("size = \"200B\" ", "size = \"1002B\"")
        .replace("packets = 1 ", "packets = 3")
        .replace("k = 8 ", "k = 8\nprocessing = \"100us\"")
        .replace("rate = \"40Mbit/s\"", "rate = \"1Mbit/s\"");
    let e = Scenario::parse("t.toml", &full.replace("d = 2 ", "d = 1"))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "t.toml:15:5: scenario.d: forwarding delay 1 at r1 is too small for hop tx→r1 at TF 250us: the last packet of the upstream frame may arrive 249.6us after the frame starts, plus 100us processing, so d must be at least 2"
    );
    assert!(Scenario::parse("t.toml", &full).is_ok());
}

const CONFLICT: &str = r#"[scenario]
name = "c"
tf = "1ms"
k = 4
d = 1

[[node]]
name = "a"
role = "sender"

[[node]]
name = "b"
role = "sender"

[[node]]
name = "r1"
role = "core"

[[node]]
name = "r2"
role = "core"

[[node]]
name = "r3"
role = "core"

[[node]]
name = "z"
role = "receiver"

[[link]]
between = ["a", "r1"]
rate = "1Gbit/s"

[[link]]
between = ["b", "r1"]
rate = "1Gbit/s"

[[link]]
between = ["r1", "r2"]
rate = "1Gbit/s"

[[link]]
between = ["r1", "r3"]
rate = "1Gbit/s"

[[link]]
between = ["r2", "r3"]
rate = "1Gbit/s"

[[link]]
between = ["r3", "z"]
rate = "1Gbit/s"

[[flow]]
name = "long"
path = ["a", "r1", "r2", "r3", "z"]
size = "500B"

[[flow]]
name = "short"
path = ["b", "r1", "r3", "z"]
size = "500B"
"#;

#[test]
fn flows_to_one_receiver_must_agree_on_routes() {
    assert_eq!(
        Scenario::parse("t.toml", CONFLICT).unwrap_err().to_string(),
        "t.toml:62:8: flow[1].path: flow \"short\" leaves r1 towards r3 but flow \"long\" (line 55) to the same receiver leaves it towards r2: routes go by destination, so flows to one receiver must agree at every router they share"
    );
}

#[test]
fn flows_routing_gives_routers_only_the_flows_host_routes() {
    let text = MESH4.replacen("[scenario]\n", "[scenario]\nrouting = \"flows\"\n", 1);
    let s = parse(&text);
    assert_eq!(s.routing, crate::scenario::Routing::Flows);
    let p = run(&s, RunMode::Tdp);
    // r3 has host routes only, one per pass of a flow through it (on the pass's
    // TTL): f1234, f234, f341 on to r4, f123 back to r1 over the diagonal, and f341
    // out to its receiver on its last pass; no subnet routes
    let r3 = routes(&p, "r3");
    assert_eq!(r3.len(), 21);
    let mut kinds = r3.clone();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "10.0.8.2/32 1 via 10.0.3.2",
            "10.0.10.2/32 2 via 10.0.5.1",
            "10.0.12.2/32 1 via 10.0.3.2",
            "10.0.14.2/32 4 via 10.0.14.2",
            "10.0.14.2/32 1 via 10.0.3.2"
        ]
    );
    // every router on a flow's path has a host route to its receiver out of the next
    // link, unless the receiver is on that link
    for (f, fs) in p.flows.iter().zip(&s.flows) {
        for (j, name) in f.path.iter().enumerate().skip(1) {
            let next = &f.path[j + 1];
            if j + 2 == f.path.len() {
                break;
            }
            let node = p.node(name).unwrap();
            let port = node
                .ifaces
                .iter()
                .position(|i| i.link == fs.links[j])
                .unwrap();
            let want = format!(
                "{}/32 {port} via {}",
                f.dst.ip(),
                p.node(next)
                    .unwrap()
                    .ifaces
                    .iter()
                    .find(|i| i.link == fs.links[j])
                    .unwrap()
                    .addr
            );
            assert!(routes(&p, name).contains(&want), "{name}: {want}");
        }
    }
    for r in ["r1", "r2", "r3", "r4"] {
        assert!(routes(&p, r).iter().all(|r| r.contains("/32 ")), "{r}");
    }
    // the rest of the plan is the same as with shortest-path routes
    let shortest = run(&parse(MESH4), RunMode::Tdp);
    assert_eq!(p.flows, shortest.flows);
    for (a, b) in p.nodes.iter().zip(&shortest.nodes) {
        assert_eq!(a.ifaces, b.ifaces);
        let (Some(a), Some(b)) = (&a.config, &b.config) else {
            continue;
        };
        assert_eq!(a.node.flows, b.node.flows);
        assert_eq!(a.node.ports, b.node.ports);
    }
}

#[test]
fn many_links_get_distinct_addresses_and_macs() {
    let s = parse(&crate::scenario::tests::star(299, ""));
    let p = run(&s, RunMode::Tdp);
    let r = p.node("r").unwrap();
    assert_eq!(r.ifaces.len(), 300);
    let addrs: std::collections::HashSet<Ipv4Addr> = r.ifaces.iter().map(|i| i.addr).collect();
    let macs: std::collections::HashSet<EthernetAddress> = r.ifaces.iter().map(|i| i.mac).collect();
    assert_eq!((addrs.len(), macs.len()), (300, 300));
    // the last link, the 300th automatic subnet: 10.1.44.0/24
    assert_eq!(
        ifaces(&p, "h298"),
        ["to-r 02:4c:53:01:2b:02 10.1.44.2/24 -> 10.1.44.1 02:4c:53:01:2b:01"]
    );
    assert_eq!(p.node("h298").unwrap().ifaces[0].link, 299);
}
