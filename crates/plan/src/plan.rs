//! From a checked [`Scenario`] and one run (mode, TF) to everything the lab builds:
//! interfaces with their addresses and MACs, routes, static neighbours, each flow's
//! TDP schedule, and each node's `lockstep node` configuration. Pure functions: the
//! same scenario always gives the same plan, and the tests pin it down exactly.
//!
//! # Addresses
//! Link `i` (in file order) gets `10.0.<i+1>.0/24` unless it names its `addresses`;
//! its first end is `.1`, its second `.2`. Beyond 255 links the `n`-th automatic
//! subnet is `10.<n / 256>.<n % 256>.0/24`; automatic subnets skip those that overlap
//! given ones. MACs are `02:4c:53:<link hi>:<link lo>:<end+1>` (`4c:53` = "LS"). The
//! interface towards node `peer` is called `to-<peer>`.
//!
//! # Routes
//! Each router reaches every link subnet by a shortest path through routers (ties go
//! to the link written first). A reserved flow's receiver also gets a host route
//! (`/32`) along the flow's own path at every router it crosses, so flows may take
//! longer paths than the shortest one; two flows to one receiver must agree at every
//! router they share, since IP routes go by destination. With `routing = "flows"`
//! the shortest-path routes are left out: routers get only the flows' host routes
//! (and reach their own links directly).
//!
//! # Schedules
//! A flow's packet sent by its sender in frame `s` crosses link `j` of its path in
//! frame `s + off[j]`, where `off[0] = 0` and `off[j] = off[j-1] + d` of the router
//! between links `j-1` and `j` (the flow's own `d` for non-immediate forwarding, else
//! the incoming link's, else the scenario's). Flows are placed in file order; each
//! gets `n` start frames per cycle, evenly spaced when possible: the first offset `b`
//! such that every start `b + i*k/n` has room for its packets on every link
//! (`(s + off[j]) mod k`). Failing that, each start is placed on its own at the first
//! frame with room. A flow that goes round a ring crosses a link several times: all
//! its packets that land in one frame of a link count there, whichever start and pass
//! they belong to. A flow that cannot be placed is an error naming it. The frames are
//! booked in a [`crate::alloc::FrameBook`], the allocator `lockstep ctl` uses too.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{Ipv4Addr, SocketAddrV4};

use lockstep_core::net::{PortId, Prefix, Route};
use lockstep_core::tdp::schedule::{Entry, Link, PortSchedule};
use lockstep_core::tdp::{
    BestEffortConfig, FlowConfig, FlowRule, FrameConfig, Mode, NeighbourConfig, Node, NodeConfig,
    PortConfig, Role, RowConfig,
};
use lockstep_core::wire::{EthernetAddress, PROTO_UDP};
use lockstep_core::{ClockId, Duration};

use crate::nodefile::{LiveConfig, LiveFlow, NodeFile};

use crate::fault::FaultKind;
use crate::scenario::{
    fmt_bit_rate, FlowRate, FlowSpec, LoadProto, LoadTool, Routing, RunMode, RunSpec, Scenario,
    ScenarioError, Sources, IP_UDP_HEADERS, SENDER_TTL,
};

/// UDP port every receiver listens on (flows are told apart by the probe's flow id).
pub const RECEIVER_PORT: u16 = 5000;
/// Flow `id` is sent from port `FLOW_SRC_PORT_BASE + id`.
pub const FLOW_SRC_PORT_BASE: u16 = 6000;
/// Load `i` (iperf3) uses port `IPERF_PORT_BASE + i`.
pub const IPERF_PORT_BASE: u16 = 5201;
/// Load `i` (lockstep generator) goes to port `SINK_PORT_BASE + i`.
pub const SINK_PORT_BASE: u16 = 7000;

/// The TOML text `lockstep node --config` reads.
pub fn node_file_toml(f: &NodeFile) -> Result<String, toml::ser::Error> {
    toml::to_string(f)
}

/// One veth end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IfacePlan {
    pub ifname: String,
    pub link: usize,
    /// The node at the other end.
    pub peer: usize,
    pub mac: EthernetAddress,
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
    pub peer_mac: EthernetAddress,
    pub peer_addr: Ipv4Addr,
    pub rate_bps: u64,
    /// `tc tbf` at `rate_bps` on this end.
    pub shape: bool,
}

/// A route as the kernel of a namespace gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoute {
    pub dest: Prefix,
    pub via: Ipv4Addr,
    pub dev: String,
}

/// What the kernel of a node's namespace is told.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KernelSetup {
    /// Interfaces get their IPv4 addresses (hosts, and routers in kernel mode; a
    /// lockstep router's kernel must stay out of the way: no address, no ARP replies,
    /// no ICMP).
    pub addresses: bool,
    /// `net.ipv4.ip_forward`.
    pub forwarding: bool,
    pub routes: Vec<KernelRoute>,
    /// Static neighbours: (interface, address, MAC).
    pub neighbours: Vec<(String, Ipv4Addr, EthernetAddress)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct NodePlan {
    pub name: String,
    pub role: Role,
    pub id: u32,
    pub ifaces: Vec<IfacePlan>,
    pub kernel: KernelSetup,
    /// The `lockstep node` file, `None` where no node process runs (a kernel-mode
    /// router, a host without flows).
    pub config: Option<NodeFile>,
    /// An asynchronous host's own clock: a sender's (its node file carries it as
    /// a longer frame, rounded to the nanosecond), and a receiver's, which reads
    /// the time on the clock of the sender of its first flow. The simulator runs
    /// these nodes on it; the lab has one clock for all and only the longer frame.
    pub async_clock: Option<AsyncClock>,
}

/// How an asynchronous sender's clock differs from the routers'.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncClock {
    /// The routers' frame.
    pub tf: Duration,
    /// How much slower the sender's clock runs, in parts per billion.
    pub slow_ppb: i64,
}

/// The clocks of the asynchronous hosts by node: the n-th sender's, and a
/// receiver's, which is the clock of the sender of its first flow (one traffic
/// generator sends and receives a flow, so its latencies are true delays).
fn async_clocks(s: &Scenario, run: &RunSpec) -> HashMap<usize, AsyncClock> {
    let mut out = HashMap::new();
    if s.sources != Sources::Asynchronous {
        return out;
    }
    let senders = (0..s.nodes.len()).filter(|&n| s.nodes[n].role == Role::Sender);
    for (i, n) in senders.enumerate() {
        let slow_ppb = slow_ppb(s, i as u32 + 1);
        out.insert(
            n,
            AsyncClock {
                tf: run.tf,
                slow_ppb,
            },
        );
    }
    for f in &s.flows {
        if let Some(&a) = out.get(&f.sender()) {
            out.entry(f.receiver()).or_insert(a);
        }
    }
    out
}

/// How much slower the `ordinal`-th asynchronous sender's clock runs (ppb).
fn slow_ppb(s: &Scenario, ordinal: u32) -> i64 {
    let load = i64::from(s.source_load_ppm.clamp(1, 1_000_000));
    let from_load = 10i64.pow(15) / load - 1_000_000_000;
    from_load + i64::from(s.source_drift_ppb) * i64::from(ordinal)
}

/// The token bucket the lab gives a shaped link's `tc tbf`: at least two full
/// frames (tbf refuses less than one), or 50 us worth at high rates so the kernel's
/// timer can keep up.
pub fn tbf_burst(rate_bps: u64) -> u32 {
    let fifty_us = rate_bps / 8 / 20_000;
    (fifty_us.max(3028)).min(u64::from(u32::MAX)) as u32
}

/// How long a shaped link may queue (beyond that tbf drops, like a full switch port).
pub const TBF_LATENCY: Duration = Duration::from_millis(100);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowPlan {
    pub id: u32,
    pub name: String,
    /// Frames (slots of the cycle) in which the sender sends.
    pub starts: Vec<u32>,
    /// Per link of the path: frames after the sender's.
    pub offsets: Vec<u32>,
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    /// Node names along the path.
    pub path: Vec<String>,
    pub packets: u32,
    pub size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadPlan {
    pub index: usize,
    pub from: usize,
    pub to: usize,
    pub tool: LoadTool,
    pub proto: LoadProto,
    pub rate_bps: Option<u64>,
    pub size: Option<u32>,
    /// Where the load goes (the server or sink listens there).
    pub dst: SocketAddrV4,
}

/// Everything one run builds.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub run: RunSpec,
    pub k: u32,
    /// How long a router may take to queue a packet (the scenario's allowance).
    pub processing: Duration,
    pub nodes: Vec<NodePlan>,
    pub flows: Vec<FlowPlan>,
    pub loads: Vec<LoadPlan>,
    /// Faults the run injects on purpose.
    pub faults: Vec<crate::fault::Fault>,
}

impl Plan {
    pub fn node(&self, name: &str) -> Option<&NodePlan> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// The MAC of end `end` (0 or 1) of link `link`.
pub fn mac_for(link: usize, end: usize) -> EthernetAddress {
    EthernetAddress([
        0x02,
        0x4c,
        0x53,
        (link >> 8) as u8,
        link as u8,
        end as u8 + 1,
    ])
}

/// The interface name of the end at `node` of a link towards `peer`.
pub fn ifname_towards(peer: &str) -> String {
    format!("to-{peer}")
}

fn host_prefix(a: Ipv4Addr) -> Prefix {
    Prefix::truncating(a, 32)
}

/// The address node `n` has on link `l`.
fn addr_on(s: &Scenario, l: usize, n: usize) -> Ipv4Addr {
    let link = &s.links[l];
    link.end_of(n)
        .map(|e| link.addrs[e])
        .unwrap_or(Ipv4Addr::UNSPECIFIED)
}

/// The only link of a host.
fn host_link(s: &Scenario, n: usize) -> Option<usize> {
    s.links_of(n).first().copied()
}

/// The address a flow is received on.
pub fn flow_dst(s: &Scenario, f: &FlowSpec) -> SocketAddrV4 {
    let r = f.receiver();
    let ip = host_link(s, r)
        .map(|l| addr_on(s, l, r))
        .unwrap_or(Ipv4Addr::UNSPECIFIED);
    SocketAddrV4::new(ip, RECEIVER_PORT)
}

pub fn flow_src(s: &Scenario, f: &FlowSpec) -> SocketAddrV4 {
    let n = f.sender();
    let ip = host_link(s, n)
        .map(|l| addr_on(s, l, n))
        .unwrap_or(Ipv4Addr::UNSPECIFIED);
    SocketAddrV4::new(ip, FLOW_SRC_PORT_BASE.saturating_add(f.id as u16))
}

/// Per router: destination prefix → link to leave on (and the next node).
type RouteMap = BTreeMap<Prefix, (usize, usize)>;
/// Per router: (destination, arrival TTL) → link to leave on (and the next node).
type TtlRouteMap = BTreeMap<(Prefix, u8), (usize, usize)>;

/// Shortest-path routes to every link subnet (unless `routing = "flows"`), then the
/// flows' host routes (keyed by TTL too where a flow meets a router more than once).
fn routes(s: &Scenario) -> Result<(Vec<RouteMap>, Vec<TtlRouteMap>), ScenarioError> {
    let n = s.nodes.len();
    let mut by_ttl: Vec<TtlRouteMap> = vec![BTreeMap::new(); n];
    let mut out: Vec<RouteMap> = vec![BTreeMap::new(); n];
    if s.routing == Routing::Shortest {
        shortest_routes(s, &mut out);
    }
    // Host routes along each flow's path, where it leaves the shortest one; a
    // router a looping flow meets several times routes it on its arrival TTL.
    let mut host: BTreeMap<(usize, Prefix), (usize, usize, usize)> = BTreeMap::new();
    for (fi, f) in s.flows.iter().enumerate() {
        let dst = host_prefix(*flow_dst(s, f).ip());
        let routers = f.routers();
        let ring = f.has_ring();
        for (j, &r) in routers.iter().enumerate() {
            let (Some(&out_link), Some(&next)) = (f.links.get(j + 1), f.path.get(j + 2)) else {
                continue;
            };
            if ring && routers.iter().filter(|&&x| x == r).count() > 1 {
                let ttl = SENDER_TTL - j as u8;
                by_ttl[r].insert((dst, ttl), (out_link, next));
                continue;
            }
            match host.get(&(r, dst)) {
                None => {
                    host.insert((r, dst), (out_link, next, fi));
                }
                Some(&(ol, on, other)) if (ol, on) != (out_link, next) => {
                    let of = &s.flows[other];
                    let (line, _) = s.source.line_col(of.loc.span.start);
                    return Err(s.error_at(
                        &f.path_loc,
                        format!(
                            "flow \"{}\" leaves {} towards {} but flow \"{}\" (line {line}) to the same receiver leaves it towards {}: routes go by destination, so flows to one receiver must agree at every router they share",
                            f.name, s.nodes[r].name, s.nodes[next].name, of.name, s.nodes[on].name,
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    for ((r, dst), (link, next, _)) in host {
        if s.links[link].end_of(next).is_some() && s.nodes[next].role == Role::Receiver {
            continue; // connected
        }
        let via_subnet = longest_match(&out[r], dst.addr);
        if via_subnet != Some((link, next)) {
            out[r].insert(dst, (link, next));
        }
    }
    Ok((out, by_ttl))
}

/// Every router's route to every link subnet it is not on: a shortest path through
/// routers, ties going to the link written first.
fn shortest_routes(s: &Scenario, out: &mut [RouteMap]) {
    let n = s.nodes.len();
    // BFS through routers: (distance, first link) of every node reached.
    let mut first: Vec<Option<(u32, usize)>> = vec![None; n];
    let mut queue = VecDeque::new();
    for r in 0..n {
        if !s.nodes[r].is_router() {
            continue;
        }
        first.fill(None);
        first[r] = Some((0, usize::MAX));
        queue.clear();
        queue.push_back(r);
        while let Some(u) = queue.pop_front() {
            let Some((du, fu)) = first[u] else { continue };
            for &li in s.links_of(u) {
                let Some(v) = s.links[li].other(u) else {
                    continue;
                };
                if first[v].is_some() {
                    continue;
                }
                let f = if u == r { li } else { fu };
                first[v] = Some((du + 1, f));
                if s.nodes[v].is_router() {
                    queue.push_back(v);
                }
            }
        }
        for l in &s.links {
            if l.end_of(r).is_some() {
                continue; // connected
            }
            let best = l
                .ends
                .iter()
                .filter_map(|&e| first[e])
                .min_by_key(|&(d, f)| (d, f));
            if let Some((_, f)) = best {
                if let Some(next) = s.links[f].other(r) {
                    out[r].insert(l.subnet(), (f, next));
                }
            }
        }
    }
}

/// The route a router's table has for `addr`: its longest prefix containing it.
fn longest_match(routes: &RouteMap, addr: Ipv4Addr) -> Option<(usize, usize)> {
    (0..=32u8)
        .rev()
        .find_map(|len| routes.get(&Prefix::truncating(addr, len)).copied())
}

/// Reserved frames per cycle of a flow at `tf`.
fn frames_per_cycle(s: &Scenario, f: &FlowSpec, tf: Duration) -> Result<u32, ScenarioError> {
    let k = u128::from(s.k);
    let tf_ns = tf.as_nanos().max(1) as u128;
    let packets = u128::from(f.packets);
    let n = match f.rate {
        FlowRate::Every(e) => return Ok(s.k / e.max(1)),
        FlowRate::Bits(bps) => {
            let bits_per_frame = u128::from(f.size) * 8 * packets;
            (u128::from(bps) * tf_ns * k).div_ceil(bits_per_frame * 1_000_000_000)
        }
        FlowRate::Packets(r) => {
            (u128::from(r.milli_pps) * tf_ns * k).div_ceil(1000 * packets * 1_000_000_000)
        }
    };
    if n > k {
        let what = match f.rate {
            FlowRate::Bits(b) => fmt_bit_rate(b),
            FlowRate::Packets(r) => r.to_string(),
            FlowRate::Every(_) => String::new(),
        };
        return Err(s.error_at(
            &f.rate_loc,
            format!(
                "{what} needs {n} reserved frames per cycle of {k} at TF {tf} with {} packet(s) of {}B each: raise packets",
                f.packets, f.size
            ),
        ));
    }
    Ok(n.max(1) as u32)
}

/// `d` at router position `j` (1-based in the path) and where it is written.
fn delay_at(s: &Scenario, f: &FlowSpec, j: usize) -> (u32, crate::scenario::Loc) {
    if let (Some(d), Some(loc)) = (&f.d, &f.d_loc) {
        if let Some(&v) = d.get(j - 1) {
            return (v, loc.clone());
        }
    }
    if let Some(&l) = f.links.get(j - 1) {
        let link = &s.links[l];
        if let (Some(d), Some(loc)) = (link.d, &link.d_loc) {
            return (d, loc.clone());
        }
    }
    (s.d, s.d_loc.clone())
}

/// Frames after the sender's at which each link of the path carries the packet.
pub fn offsets(s: &Scenario, f: &FlowSpec) -> Vec<u32> {
    let mut off = vec![0u32];
    for j in 1..f.links.len() {
        let prev = off[j - 1];
        off.push(prev + delay_at(s, f, j).0);
    }
    off
}

/// Every flow's start frames at `tf`, in flow order, and each directional link's
/// schedule (`(link, from node)`).
pub type Schedules = HashMap<(usize, usize), PortSchedule>;

pub fn schedule(s: &Scenario, tf: Duration) -> Result<(Vec<Vec<u32>>, Schedules), ScenarioError> {
    let all = schedule_starts(s, tf)?;
    let k = s.k;
    let mut scheds: Schedules = HashMap::new();
    for (li, l) in s.links.iter().enumerate() {
        for &e in &l.ends {
            let ps = PortSchedule::new(k).map_err(|e| s.error_at(&s.k_loc, e.to_string()))?;
            scheds.insert((li, e), ps);
        }
    }
    for (f, starts) in s.flows.iter().zip(&all) {
        let off = offsets(s, f);
        for &st in starts {
            for (j, (&l, &o)) in f.links.iter().zip(&off).enumerate() {
                if let Some(ps) = scheds.get_mut(&(l, f.path[j])) {
                    let _ = ps.add(
                        (st + o) % k,
                        Entry {
                            flow: f.id,
                            packets: f.packets,
                            size: f.size,
                        },
                    );
                }
            }
        }
    }
    Ok((all, scheds))
}

/// Every flow's start frames at `tf`, in flow order: [`schedule`] without the
/// per-link tables. The frames are booked in a [`crate::alloc::FrameBook`].
pub fn schedule_starts(s: &Scenario, tf: Duration) -> Result<Vec<Vec<u32>>, ScenarioError> {
    use crate::alloc::{AllocError, FrameBook, Hop, LinkId, Policy, Request};
    let k = s.k;
    let cap = |li: usize| {
        Link::ethernet(s.links[li].rate_bps)
            .frame_capacity_bits(tf, s.guard)
            .unwrap_or(0)
    };
    // The frame book's link `2 l + e` is link `l` leaving its end `e`.
    let mut book = FrameBook::new(k, (0..s.links.len()).flat_map(|li| [cap(li); 2]))
        .map_err(|e| s.error_at(&s.k_loc, e.to_string()))?;
    let link_id =
        |l: usize, from: usize| LinkId((2 * l + s.links[l].end_of(from).unwrap_or(0)) as u32);
    let bug = |f: &FlowSpec, e: AllocError| {
        s.error_at(
            &f.loc,
            format!("flow \"{}\": {e}: this is a bug in the planner", f.name),
        )
    };
    let mut all = Vec::new();
    for f in &s.flows {
        let off = offsets(s, f);
        let hops: Vec<(usize, usize)> = f
            .links
            .iter()
            .enumerate()
            .map(|(j, &l)| (l, f.path[j]))
            .collect();
        let packet_bits = Link::ethernet(1).packet_bits(f.size);
        let request_hops: Vec<Hop> = hops
            .iter()
            .zip(&off)
            .map(|(&(l, from), &o)| Hop {
                link: link_id(l, from),
                offset: u64::from(o),
                packet_bits,
            })
            .collect();
        match book.check_hops(&request_hops, f.packets) {
            Ok(()) => {}
            Err(AllocError::TooBig {
                hop,
                needed_bits,
                capacity_bits,
            }) => {
                let (l, from) = hops[hop];
                let to = s.links[l].other(from).unwrap_or(from);
                return Err(s.error_at(
                    &f.packets_loc,
                    format!(
                        "{} packet(s) of {}B take {needed_bits} bits on the wire but a frame of {tf} at {} carries {capacity_bits} (link {}→{})",
                        f.packets,
                        f.size,
                        fmt_bit_rate(s.links[l].rate_bps),
                        s.nodes[from].name,
                        s.nodes[to].name
                    ),
                ));
            }
            Err(e) => return Err(bug(f, e)),
        }
        let n = frames_per_cycle(s, f, tf)?;
        let request = Request {
            hops: request_hops,
            packets: f.packets,
            frames: n,
            start: None,
            policy: Policy::Spread,
        };
        let starts = match book.place(&request) {
            Ok(p) => p.into_starts(),
            Err(AllocError::NoRoom { placed, .. }) => {
                return Err(s.error_at(
                    &f.loc,
                    format!(
                        "flow \"{}\" does not fit: it needs {n} frame(s) per cycle of {k} with {} packet(s) of {}B on every link of its path, but only {placed} start frame(s) have room at TF {tf} (the links are full)",
                        f.name, f.packets, f.size,
                    ),
                ))
            }
            Err(e) => return Err(bug(f, e)),
        };
        all.push(starts);
    }
    // Each router's d must cover the upstream frame's transmission and processing.
    for (f, starts) in s.flows.iter().zip(&all) {
        let off = offsets(s, f);
        for j in 1..f.links.len() {
            let (d, loc) = delay_at(s, f, j);
            let up = f.links[j - 1];
            let from = f.path[j - 1];
            let worst_bits = starts
                .iter()
                .map(|&st| book.used_bits(link_id(up, from), (st + off[j - 1]) % k))
                .max()
                .unwrap_or(0);
            let row_ns =
                (worst_bits * 1_000_000_000).div_ceil(u128::from(s.links[up].rate_bps.max(1)));
            let need_ns = row_ns + s.processing.as_nanos().max(0) as u128;
            let tf_ns = tf.as_nanos().max(1) as u128;
            let d_min = need_ns.div_ceil(tf_ns).max(1);
            if u128::from(d) < d_min {
                return Err(s.error_at(
                    &loc,
                    format!(
                        "forwarding delay {d} at {} is too small for hop {}→{} at TF {tf}: the last packet of the upstream frame may arrive {} after the frame starts, plus {} processing, so d must be at least {d_min}",
                        s.nodes[f.path[j]].name,
                        s.nodes[from].name,
                        s.nodes[f.path[j]].name,
                        Duration(row_ns as i64),
                        s.processing,
                    ),
                ));
            }
        }
    }
    Ok(all)
}

/// Which flows each node sends, receives and forwards.
struct FlowIndex {
    /// Per node: the flows it sends, in file order.
    sends: Vec<Vec<usize>>,
    /// Per node: the flows it receives, in file order.
    receives: Vec<Vec<usize>>,
    /// Per node: (flow, the node's first position in the flow's path), in file order.
    crosses: Vec<Vec<(usize, usize)>>,
    /// Per link: whether some flow crosses it leaving each end (`ends` order).
    carries: Vec<[bool; 2]>,
}

impl FlowIndex {
    fn new(s: &Scenario) -> FlowIndex {
        let n = s.nodes.len();
        let mut ix = FlowIndex {
            sends: vec![Vec::new(); n],
            receives: vec![Vec::new(); n],
            crosses: vec![Vec::new(); n],
            carries: vec![[false; 2]; s.links.len()],
        };
        for (fi, f) in s.flows.iter().enumerate() {
            if f.path.is_empty() {
                continue;
            }
            ix.sends[f.sender()].push(fi);
            ix.receives[f.receiver()].push(fi);
            for (j, &node) in f.path.iter().enumerate() {
                let seen = ix.crosses[node].last().is_some_and(|&(g, _)| g == fi);
                if !seen {
                    ix.crosses[node].push((fi, j));
                }
            }
            for (&l, &from) in f.links.iter().zip(&f.path) {
                if let Some(e) = s.links[l].end_of(from) {
                    ix.carries[l][e] = true;
                }
            }
        }
        ix
    }

    /// Whether some flow crosses link `l` leaving node `from`.
    fn carries_reserved(&self, s: &Scenario, l: usize, from: usize) -> bool {
        s.links[l].end_of(from).is_some_and(|e| self.carries[l][e])
    }
}

/// Linux routes on the destination only: a flow that goes round a ring cannot be
/// forwarded by the kernel.
fn refuse_loops_in_kernel_mode(s: &Scenario, run: &RunSpec) -> Result<(), ScenarioError> {
    if run.mode != RunMode::Kernel {
        return Ok(());
    }
    match s.flows.iter().find(|f| f.has_ring()) {
        None => Ok(()),
        Some(f) => Err(s.error_at(
            &f.path_loc,
            format!(
                "flow \"{}\" loops {} times round its ring, which needs routing on the TTL; the kernel routes on the destination only, so the kernel mode cannot run it",
                f.name, f.loops
            ),
        )),
    }
}

/// The plan of one run. Every node file it makes is accepted by [`Node::new`].
pub fn plan(s: &Scenario, run: &RunSpec) -> Result<Plan, ScenarioError> {
    let k = s.k;
    refuse_loops_in_kernel_mode(s, run)?;
    let (routes, ttl_routes) = routes(s)?;
    let (starts, _) = schedule(s, run.tf)?;
    let is_host = |n: usize| !s.nodes[n].is_router();
    let index = FlowIndex::new(s);

    let mut flows = Vec::new();
    for (f, st) in s.flows.iter().zip(&starts) {
        flows.push(FlowPlan {
            id: f.id,
            name: f.name.clone(),
            starts: st.clone(),
            offsets: offsets(s, f),
            src: flow_src(s, f),
            dst: flow_dst(s, f),
            path: f.path.iter().map(|&n| s.nodes[n].name.clone()).collect(),
            packets: f.packets,
            size: f.size,
        });
    }

    let mut loads = Vec::new();
    for (i, l) in s.loads.iter().enumerate() {
        let to_ip = host_link(s, l.to)
            .map(|li| addr_on(s, li, l.to))
            .unwrap_or(Ipv4Addr::UNSPECIFIED);
        let port = match l.tool {
            LoadTool::Iperf3 => IPERF_PORT_BASE,
            LoadTool::Lockstep => SINK_PORT_BASE,
        }
        .saturating_add(i as u16);
        loads.push(LoadPlan {
            index: i,
            from: l.from,
            to: l.to,
            tool: l.tool,
            proto: l.proto,
            rate_bps: l.rate_bps,
            size: l.size,
            dst: SocketAddrV4::new(to_ip, port),
        });
    }

    let clocks = async_clocks(s, run);
    let mut nodes = Vec::new();
    for (ni, spec) in s.nodes.iter().enumerate() {
        let mut ifaces = Vec::new();
        for &li in s.links_of(ni) {
            let l = &s.links[li];
            let Some(end) = l.end_of(ni) else { continue };
            let peer = l.ends[1 - end];
            ifaces.push(IfacePlan {
                ifname: ifname_towards(&s.nodes[peer].name),
                link: li,
                peer,
                mac: mac_for(li, end),
                addr: l.addrs[end],
                prefix_len: l.prefix_len,
                peer_mac: mac_for(li, 1 - end),
                peer_addr: l.addrs[1 - end],
                rate_bps: l.rate_bps,
                shape: l.shape,
            });
        }
        let port_of_link = |li: usize| {
            ifaces
                .iter()
                .position(|i| i.link == li)
                .map(|p| PortId(p as u16))
        };
        let router = spec.is_router();
        let kernel_router = router && run.mode == RunMode::Kernel;

        // The kernel's part.
        let mut kernel = KernelSetup {
            addresses: !router || kernel_router,
            forwarding: kernel_router,
            ..KernelSetup::default()
        };
        if !router {
            if let Some(i) = ifaces.first() {
                kernel.routes.push(KernelRoute {
                    dest: Prefix::truncating(Ipv4Addr::UNSPECIFIED, 0),
                    via: i.peer_addr,
                    dev: i.ifname.clone(),
                });
                kernel
                    .neighbours
                    .push((i.ifname.clone(), i.peer_addr, i.peer_mac));
            }
        } else if kernel_router {
            for (prefix, &(li, _)) in &routes[ni] {
                if let Some(i) = ifaces.iter().find(|i| i.link == li) {
                    kernel.routes.push(KernelRoute {
                        dest: *prefix,
                        via: i.peer_addr,
                        dev: i.ifname.clone(),
                    });
                }
            }
            for i in &ifaces {
                kernel
                    .neighbours
                    .push((i.ifname.clone(), i.peer_addr, i.peer_mac));
            }
        }

        // The lockstep node's part.
        let mut tf = run.tf;
        let mut node_flows = Vec::new();
        let mut live_flows = Vec::new();
        let mut bind = None;
        let mut mark = None;
        match spec.role {
            Role::Sender => {
                for &fi in &index.sends[ni] {
                    let (f, fp) = (&s.flows[fi], &flows[fi]);
                    node_flows.push(FlowConfig {
                        id: f.id,
                        rule: None,
                        out_port: PortId(0),
                        d: None,
                        rows: fp
                            .starts
                            .iter()
                            .map(|&slot| RowConfig {
                                slot,
                                packets: f.packets,
                                size: f.size,
                            })
                            .collect(),
                        police: true,
                        dst: Some(fp.dst),
                    });
                    live_flows.push(LiveFlow {
                        flow: f.id,
                        dst: Some(fp.dst),
                        src_port: fp.src.port(),
                        size: f.size - IP_UDP_HEADERS,
                        count: f.count,
                    });
                }
                // The first router marks if it is an edge (or the senders are not
                // in step with the routers at all).
                let first_edge = ifaces
                    .first()
                    .is_some_and(|i| s.nodes[i.peer].role == Role::Edge);
                if first_edge || s.sources == Sources::Asynchronous {
                    mark = Some(false);
                }
                if let Some(a) = clocks.get(&ni) {
                    // The live sender gets its clock as a longer frame (to the
                    // nanosecond).
                    tf = Duration(
                        (i128::from(run.tf.as_nanos()) * (1_000_000_000 + i128::from(a.slow_ppb))
                            / 1_000_000_000) as i64,
                    );
                }
            }
            Role::Receiver => {
                for f in index.receives[ni].iter().map(|&fi| &s.flows[fi]) {
                    node_flows.push(FlowConfig {
                        id: f.id,
                        rule: None,
                        out_port: PortId(0),
                        d: None,
                        rows: Vec::new(),
                        police: true,
                        dst: None,
                    });
                }
                if let Some(i) = ifaces.first() {
                    bind = Some(SocketAddrV4::new(i.addr, RECEIVER_PORT));
                }
            }
            Role::Edge | Role::Core => {
                for &(fi, j) in &index.crosses[ni] {
                    let (f, fp) = (&s.flows[fi], &flows[fi]);
                    let Some(&out_link) = f.links.get(j) else {
                        continue;
                    };
                    let Some(out_port) = port_of_link(out_link) else {
                        continue;
                    };
                    let off = fp.offsets.get(j).copied().unwrap_or(0);
                    node_flows.push(FlowConfig {
                        id: f.id,
                        rule: Some(FlowRule {
                            src: Some(host_prefix(*fp.src.ip())),
                            dst: Some(host_prefix(*fp.dst.ip())),
                            proto: Some(PROTO_UDP),
                            src_ports: Some((fp.src.port(), fp.src.port())),
                            dst_ports: Some((fp.dst.port(), fp.dst.port())),
                        }),
                        out_port,
                        d: f.d.as_ref().and_then(|d| d.get(j - 1).copied()),
                        rows: fp
                            .starts
                            .iter()
                            .map(|&st| RowConfig {
                                slot: (st + off) % k,
                                packets: f.packets,
                                size: f.size,
                            })
                            .collect(),
                        police: true,
                        dst: None,
                    });
                }
            }
        }
        let has_process = match spec.role {
            Role::Edge | Role::Core => !kernel_router,
            _ => !node_flows.is_empty(),
        };
        let config = if has_process {
            let ports = ifaces
                .iter()
                .enumerate()
                .map(|(p, i)| {
                    let peer_router = s.nodes[i.peer].is_router();
                    let d = if router && (peer_router || s.nodes[i.peer].role == Role::Sender) {
                        Some(s.links[i.link].d.unwrap_or(s.d))
                    } else {
                        None
                    };
                    PortConfig {
                        id: PortId(p as u16),
                        ifname: i.ifname.clone(),
                        mac: i.mac,
                        addr: i.addr,
                        prefix_len: i.prefix_len,
                        rate_bps: i.rate_bps,
                        neighbour_mac: Some(i.peer_mac),
                        neighbour_addr: Some(i.peer_addr),
                        d,
                        // Padding keeps a neighbour's frame tracker in step, so
                        // only where reserved packets go to a router; a host would
                        // answer it with ICMP.
                        padding: if router
                            && (is_host(i.peer) || !index.carries_reserved(s, i.link, ni))
                        {
                            Some(false)
                        } else {
                            None
                        },
                    }
                })
                .collect();
            let node_routes = if router {
                let plain = routes[ni].iter().map(|(p, &v)| (*p, None, v));
                let keyed = ttl_routes[ni].iter().map(|(&(p, t), &v)| (p, Some(t), v));
                plain
                    .chain(keyed)
                    .filter_map(|(prefix, ttl, (li, _))| {
                        let i = ifaces.iter().find(|i| i.link == li)?;
                        Some(Route {
                            prefix,
                            port: port_of_link(li)?,
                            next_hop: Some(i.peer_addr),
                            ttl,
                        })
                    })
                    .collect()
            } else {
                ifaces
                    .first()
                    .map(|i| Route {
                        prefix: Prefix::truncating(Ipv4Addr::UNSPECIFIED, 0),
                        port: PortId(0),
                        next_hop: Some(i.peer_addr),
                        ttl: None,
                    })
                    .into_iter()
                    .collect()
            };
            let node = NodeConfig {
                name: spec.name.clone(),
                id: ni as u32 + 1,
                role: spec.role,
                mode: if run.mode == RunMode::Tdp {
                    Mode::Tdp
                } else {
                    Mode::Fifo
                },
                frame: FrameConfig {
                    tf,
                    k,
                    epoch_ns: 0,
                    offset: Duration::ZERO,
                    guard: s.guard,
                    lead: 1,
                },
                ports,
                routes: node_routes,
                neighbours: Vec::<NeighbourConfig>::new(),
                flows: node_flows,
                best_effort: BestEffortConfig::default(),
                padding: s.padding,
                on_slip: s.on_slip,
            };
            if let Err(e) = Node::new(node.clone()) {
                return Err(s.error_at(
                    &spec.loc,
                    format!("the generated node configuration is refused ({e}); this is a bug in the lab"),
                ));
            }
            let strategy = spec.strategy.unwrap_or(s.strategy);
            Some(NodeFile {
                node,
                live: LiveConfig {
                    strategy,
                    clock: ClockId::Tai,
                    cpu: spec.cpu,
                    priority: spec.priority.or(s.priority),
                    coalesce: spec.coalesce,
                    io: spec.io,
                    flows: live_flows,
                    samples: bind.is_some(),
                    // the nodes its flows' packets cross (hop records name them)
                    names: if spec.role == Role::Receiver {
                        index.receives[ni]
                            .iter()
                            .flat_map(|&fi| &s.flows[fi].path)
                            .map(|&i| ((i + 1).to_string(), s.nodes[i].name.clone()))
                            .collect()
                    } else {
                        BTreeMap::new()
                    },
                    bind,
                    mark,
                    tx_timestamps: s.tx_timestamps,
                    // A router whose links are all unshaped hands its frames straight
                    // to the veth (no qdisc to pass: one lock and enqueue less per
                    // frame); a tbf on a port must see every frame.
                    qdisc_bypass: router && !ifaces.is_empty() && ifaces.iter().all(|i| !i.shape),
                    ..LiveConfig::default()
                },
            })
        } else {
            None
        };
        nodes.push(NodePlan {
            name: spec.name.clone(),
            role: spec.role,
            id: ni as u32 + 1,
            ifaces,
            kernel,
            config,
            async_clock: clocks.get(&ni).copied(),
        });
    }
    offset_clocks(s, &mut nodes);
    Ok(Plan {
        run: run.clone(),
        k,
        processing: s.processing,
        nodes,
        flows,
        loads,
        faults: s.faults.clone(),
    })
}

/// A clock-offset fault is the router's own configuration: its node file says how
/// far its clock reads from true time, in the lab and the simulator alike.
fn offset_clocks(s: &Scenario, nodes: &mut [NodePlan]) {
    for f in &s.faults {
        if let FaultKind::ClockOffset { node, offset } = &f.kind {
            let file = nodes.iter_mut().find(|n| &n.name == node);
            if let Some(c) = file.and_then(|n| n.config.as_mut()) {
                c.node.frame.offset = *offset;
            }
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
