//! The scenario file (`scenarios/*.toml`): a test network, its reserved flows, the
//! best-effort load and the runs to compare, written for humans:
//!
//! ```toml
//! [scenario]
//! name = "line"
//! tf = "1ms"                 # or a sweep: tf = ["500us", "250us", "100us"]
//! k = 10                     # frames per cycle
//! d = 2                      # forwarding delay (frames) at each router, by default
//! modes = ["fifo", "tdp"]    # runs to compare ("kernel": Linux forwards instead)
//! duration = "5s"
//! # optional: guard = "5us", processing = "50us" (checks d), sources =
//! # "asynchronous" (senders on clocks of their own, each further one slower by
//! # source_drift = "100ppm" (the default); source_load = 0.98: they send
//! # that fraction of their reservation), strategy = "sleep" | "hybrid" |
//! # "spin", priority = 50 (SCHED_FIFO), tx_timestamps = false, padding = false,
//! # on_slip = "drop" | "best_effort", routers = "one-process" (default: every router
//! # in one process, a thread per CPU) | "one-thread" | "per-node", senders =
//! # "with-routers" (default: in the routers' process, each in the thread of the
//! # edge router it sends into) | "own-process", routing =
//! # "shortest" (default: every router has a shortest-path route to every link
//! # subnet, plus the flows' host routes) | "flows" (routers know only their own
//! # links and each flow's receiver along the flow's path: for networks of
//! # thousands of routers; no [[load]] then)
//!
//! [[node]]
//! name = "tx"
//! role = "sender"            # sender | edge | core | receiver
//! # optional: strategy, cpu = 1, priority = 50 (this node only), for routers
//! # coalesce = "20us" (after a wake-up that found frames, sleep this long before
//! # taking frames again: fewer wake-ups under load, up to that much more residence),
//! # for senders and receivers io = "udp" (default: the kernel's UDP stack) |
//! # "packet" | "ring" | "ring-v2" | "xdp" (whole frames through a frame port)
//!
//! [[link]]
//! between = ["tx", "r1"]
//! rate = "100Mbit/s"
//! shape = true               # tc tbf on both ends, so the veth behaves like the rate
//! # optional: d = 3 (immediate forwarding delay where this link delivers),
//! # addresses = ["10.9.0.1/24", "10.9.0.2/24"] (default: the n-th link without
//! # addresses gets 10.0.<n>.1 and .2 for n up to 255, then 10.<n / 256>.<n % 256>.1
//! # and .2, skipping subnets that overlap given ones)
//!
//! [[flow]]
//! name = "video"
//! path = ["tx", "r1", "r2", "rx"]
//! size = "1000B"             # IP packet
//! packets = 1                # per reserved frame
//! every = 1                  # one reserved frame every N frames (or rate = "8Mbit/s")
//! # optional: d = [1, 3] (non-immediate: per router), count = 1000, loops = 5 (a
//! # path with a ring, ["tx", "r1", "r2", "r3", "r1", "rx"], goes round it 5 times
//! # before it leaves; routers tell the passes apart by the packet's TTL)
//!
//! [[load]]
//! from = "tx"
//! to = "rx"
//! tool = "iperf3"            # or "lockstep" (probe stream → probe sink)
//! rate = "20Mbit/s"          # "max" with iperf3: as fast as it can
//! # optional: proto = "tcp" (iperf3), size = "64B" (datagram payload)
//! ```
//!
//! [`Scenario::parse`] checks everything that does not depend on the time-frame;
//! [`crate::plan`] checks the rest (schedules, forwarding delays) for every run. Every
//! error is a [`ScenarioError`] that names the file, the line and the field, so a
//! mistake is found before anything is built.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::net::Ipv4Addr;
use std::ops::Range;

use crate::nodefile::NodeIo;
use lockstep_core::net::Prefix;
use lockstep_core::sched::WaitStrategy;
use lockstep_core::tdp::{Role, SlipAction};
use lockstep_core::units::{grammar, BitRate, Kind, PacketRate, Size};
use lockstep_core::wire::probe::{HEADER_LEN, HOP_LEN, MIN_RECORDED_HOPS};
use lockstep_core::{limits, Duration};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;
use toml::Spanned;

/// IPv4 header + UDP header.
pub const IP_UDP_HEADERS: u32 = 28;
/// The largest IP packet a lab link carries (veth default MTU).
pub const MAX_IP_SIZE: u32 = 1500;
/// Longest node name: interfaces are called `to-<peer>` and Linux allows 15 bytes.
pub const NODE_NAME_MAX: usize = 12;

/// A mistake in a scenario file: where it is and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    /// `flow[1].path`, `scenario.k`; empty for a TOML syntax error.
    pub field: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.field.is_empty() {
            write!(f, "{}: ", self.field)?;
        }
        f.write_str(&self.message)
    }
}

/// The source text of a scenario, for turning byte offsets into lines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// As given by the user (shown in errors).
    pub file: String,
    pub text: String,
}

impl Source {
    /// 1-based line and column (characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = offset.min(self.text.len());
        let before = self.text.get(..offset).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map(|i| i + 1).unwrap_or(0);
        let column = before
            .get(line_start..)
            .map(|s| s.chars().count())
            .unwrap_or(0)
            + 1;
        (line, column)
    }

    /// An error at `span` about `field`.
    pub fn error(
        &self,
        span: &Range<usize>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ScenarioError {
        let (line, column) = self.line_col(span.start);
        ScenarioError {
            file: self.file.clone(),
            line,
            column,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Turns a TOML/serde error into a [`ScenarioError`], naming the field from the
    /// table header above the error and the key on its line.
    pub fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        let span = e.span().unwrap_or(0..0);
        let (line, column) = self.line_col(span.start);
        let message = e.message().trim().to_string();
        ScenarioError {
            file: self.file.clone(),
            line,
            column,
            field: self.field_at(line, &message),
            message,
        }
    }

    /// `table[index].key` for a 1-based line: the last `[table]` or `[[table]]` header
    /// at or before it (counting repeated array tables) and the key written on it.
    fn field_at(&self, line: usize, message: &str) -> String {
        let mut table = String::new();
        let mut base = String::new();
        let mut counts: HashMap<String, usize> = HashMap::new();
        let mut key = None;
        let mut on_header = false;
        for (i, raw) in self.text.lines().enumerate() {
            if i + 1 > line {
                break;
            }
            let l = raw.trim();
            on_header = false;
            if let Some(name) = l.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
                let name = name.trim().to_string();
                let n = counts.entry(name.clone()).or_insert(0);
                table = format!("{name}[{n}]");
                base = name;
                *n += 1;
                key = None;
                on_header = i + 1 == line;
            } else if let Some(name) = l.strip_prefix('[').and_then(|r| r.split(']').next()) {
                table = name.trim().to_string();
                base = table.clone();
                key = None;
                on_header = i + 1 == line;
            } else if i + 1 == line {
                key = l
                    .split_once('=')
                    .map(|(k, _)| k.trim().trim_matches('"').to_string())
                    .filter(|k| !k.is_empty() && !k.starts_with('#'));
            }
        }
        // "missing field `role`" / "unknown field `rat`": the message names the key.
        let named = message
            .split('`')
            .nth(1)
            .filter(|_| message.contains("field `"))
            .map(str::to_string);
        if on_header && named.as_deref() == Some(base.as_str()) {
            // an unknown table: the error is about the table itself
            return base;
        }
        let key = named.or(key);
        match (table.is_empty(), key) {
            (true, Some(k)) => k,
            (true, None) => String::new(),
            (false, Some(k)) => format!("{table}.{k}"),
            (false, None) => table,
        }
    }
}

// ----- raw form (what serde reads) ------------------------------------------------

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    scenario: Spanned<RawScenario>,
    #[serde(default)]
    node: Vec<Spanned<RawNode>>,
    #[serde(default)]
    link: Vec<Spanned<RawLink>>,
    #[serde(default)]
    flow: Vec<Spanned<RawFlow>>,
    #[serde(default)]
    load: Vec<Spanned<RawLoad>>,
    #[serde(default)]
    fault: Vec<Spanned<crate::fault::RawFault>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Spanned<String>,
    #[serde(default)]
    description: Option<String>,
    tf: Spanned<OneOrMany<String>>,
    k: Spanned<i64>,
    #[serde(default)]
    d: Option<Spanned<i64>>,
    #[serde(default)]
    guard: Option<Spanned<String>>,
    #[serde(default)]
    processing: Option<Spanned<String>>,
    #[serde(default)]
    modes: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    duration: Option<Spanned<String>>,
    #[serde(default)]
    sources: Option<Spanned<String>>,
    #[serde(default)]
    strategy: Option<Spanned<String>>,
    #[serde(default)]
    priority: Option<Spanned<i64>>,
    #[serde(default)]
    tx_timestamps: Option<bool>,
    #[serde(default)]
    padding: Option<bool>,
    #[serde(default)]
    on_slip: Option<Spanned<String>>,
    #[serde(default)]
    routers: Option<Spanned<String>>,
    #[serde(default)]
    senders: Option<Spanned<String>>,
    #[serde(default)]
    source_load: Option<Spanned<f64>>,
    #[serde(default)]
    source_drift: Option<Spanned<String>>,
    routing: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNode {
    name: Spanned<String>,
    role: Spanned<String>,
    #[serde(default)]
    strategy: Option<Spanned<String>>,
    #[serde(default)]
    cpu: Option<Spanned<i64>>,
    #[serde(default)]
    priority: Option<Spanned<i64>>,
    #[serde(default)]
    coalesce: Option<Spanned<String>>,
    #[serde(default)]
    io: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    between: Spanned<Vec<Spanned<String>>>,
    rate: Spanned<String>,
    #[serde(default)]
    shape: Option<bool>,
    #[serde(default)]
    d: Option<Spanned<i64>>,
    #[serde(default)]
    addresses: Option<Spanned<Vec<Spanned<String>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    name: Spanned<String>,
    path: Spanned<Vec<Spanned<String>>>,
    size: Spanned<String>,
    #[serde(default)]
    packets: Option<Spanned<i64>>,
    #[serde(default)]
    every: Option<Spanned<i64>>,
    #[serde(default)]
    rate: Option<Spanned<String>>,
    #[serde(default)]
    d: Option<Spanned<OneOrMany<i64>>>,
    #[serde(default)]
    count: Option<Spanned<i64>>,
    #[serde(default)]
    loops: Option<Spanned<i64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLoad {
    from: Spanned<String>,
    to: Spanned<String>,
    #[serde(default)]
    tool: Option<Spanned<String>>,
    #[serde(default)]
    proto: Option<Spanned<String>>,
    #[serde(default)]
    rate: Option<Spanned<String>>,
    #[serde(default)]
    size: Option<Spanned<String>>,
}

/// A value or a list of values (`tf = "250us"` or `tf = ["500us", "250us"]`).
#[derive(Clone, Debug, PartialEq)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<T> OneOrMany<T> {
    fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::One(v) => vec![v],
            OneOrMany::Many(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for OneOrMany<String> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany<String>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of strings")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(OneOrMany::One(v.to_string()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<String>()? {
                    out.push(v);
                }
                Ok(OneOrMany::Many(out))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for OneOrMany<i64> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OneOrMany<i64>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a list of integers")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                Ok(OneOrMany::One(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                i64::try_from(v)
                    .map(OneOrMany::One)
                    .map_err(|_| E::custom("integer out of range"))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = seq.next_element::<i64>()? {
                    out.push(v);
                }
                Ok(OneOrMany::Many(out))
            }
        }
        d.deserialize_any(V)
    }
}

// ----- the checked scenario ---------------------------------------------------------

/// How the routers of a run forward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunMode {
    /// lockstep routers forwarding every packet at once.
    Fifo,
    /// lockstep routers forwarding by time-frame.
    Tdp,
    /// The Linux kernel forwards (routers have addresses and `ip_forward = 1`).
    Kernel,
}

impl RunMode {
    pub fn name(self) -> &'static str {
        match self {
            RunMode::Fifo => "fifo",
            RunMode::Tdp => "tdp",
            RunMode::Kernel => "kernel",
        }
    }

    /// How tables and reports label the mode.
    pub fn label(self) -> &'static str {
        match self {
            RunMode::Fifo => "FIFO",
            RunMode::Tdp => "TDP",
            RunMode::Kernel => "kernel",
        }
    }

    pub fn parse(s: &str) -> Option<RunMode> {
        match s {
            "fifo" => Some(RunMode::Fifo),
            "tdp" => Some(RunMode::Tdp),
            "kernel" => Some(RunMode::Kernel),
            _ => None,
        }
    }
}

/// Whether senders share the routers' frame clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sources {
    /// Senders send at the start of their reserved frames, marked when the first hop
    /// is a core router.
    Synchronous,
    /// Senders run on clocks of their own (a slightly longer TF each, so their phase
    /// drifts through every offset, like baldi2006's RouterTester): the edge router
    /// holds each packet until its flow's frame.
    Asynchronous,
}

/// How a run's routers are run (`scenario.routers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterLayout {
    /// One process, one thread per CPU, the routers spread over them (the default):
    /// one wake-up per frame per thread instead of per router.
    OneProcess,
    /// One process, one thread for every router.
    OneThread,
    /// A process per router (`lockstep node --config R.toml` each).
    PerNode,
}

/// Where a run's senders run (`scenario.senders`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SenderLayout {
    /// A process per sender (`lockstep node --config S.toml` each).
    OwnProcess,
    /// In the routers' process, in the thread of the edge router each sends into,
    /// when the routers share a process and the sender runs the way they do (the same
    /// `LiveConfig::thread_difference` check); otherwise a process of its own. The
    /// default: on `line` its wake-ups were three times earlier at the median and it
    /// skipped a third as many frames (docs/BENCHMARKS.md).
    WithRouters,
}

/// Which routes the routers get (`scenario.routing`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// A shortest-path route to every link subnet, through routers (the default),
    /// plus host routes where a flow's path leaves the shortest one.
    Shortest,
    /// Only a host route to each flow's receiver at every router on the flow's path
    /// (a router reaches its own links without routes): no all-pairs search, so a
    /// network of thousands of routers plans in moments. Loads need `Shortest`.
    Flows,
}

/// A place in the file, for errors found after parsing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub span: Range<usize>,
    pub field: String,
}

impl Loc {
    fn new<T>(s: &Spanned<T>, field: impl Into<String>) -> Loc {
        Loc {
            span: s.span(),
            field: field.into(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeSpec {
    pub name: String,
    pub role: Role,
    pub strategy: Option<WaitStrategy>,
    pub cpu: Option<usize>,
    pub priority: Option<i32>,
    /// Routers: how long to hold off taking frames after a busy wake-up.
    pub coalesce: Option<Duration>,
    /// Senders and receivers: how they move their packets (none: the kernel's UDP
    /// stack). The routers' mode is the lab's `--io`.
    pub io: Option<NodeIo>,
    pub loc: Loc,
}

/// A `[[node]]`'s `io`: a sender's or receiver's way of moving its packets (a
/// router's is the lab's `--io`).
fn host_io(v: &Spanned<String>, role: Role) -> Result<NodeIo, String> {
    if matches!(role, Role::Edge | Role::Core) {
        return Err(
            "a router's ports move frames as `lab run --io` says (xdp by default): io is for senders and receivers"
                .to_string(),
        );
    }
    NodeIo::parse(v.get_ref()).ok_or_else(|| {
        format!(
            "expected one of {}, got \"{}\"",
            NodeIo::NAMES.join(", "),
            v.get_ref()
        )
    })
}

impl NodeSpec {
    pub fn is_router(&self) -> bool {
        matches!(self.role, Role::Edge | Role::Core)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSpec {
    /// Node indices of the two ends, in the order written.
    pub ends: [usize; 2],
    pub rate_bps: u64,
    /// Shape both ends to `rate_bps` with `tc tbf`.
    pub shape: bool,
    /// Immediate forwarding delay at the router(s) this link delivers to.
    pub d: Option<u32>,
    /// The two ends' addresses (same order as `ends`) and the prefix length.
    pub addrs: [Ipv4Addr; 2],
    pub prefix_len: u8,
    pub loc: Loc,
    pub d_loc: Option<Loc>,
    pub rate_loc: Loc,
}

impl LinkSpec {
    /// The end (0 or 1) that is node `n`.
    pub fn end_of(&self, n: usize) -> Option<usize> {
        self.ends.iter().position(|&e| e == n)
    }

    pub fn other(&self, n: usize) -> Option<usize> {
        match self.end_of(n)? {
            0 => Some(self.ends[1]),
            _ => Some(self.ends[0]),
        }
    }

    pub fn subnet(&self) -> Prefix {
        Prefix::truncating(self.addrs[0], self.prefix_len)
    }
}

/// How often a flow has a reserved frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowRate {
    /// One reserved frame every N frames.
    Every(u32),
    /// At least this many bits per second of IP packets.
    Bits(u64),
    /// At least this many packets per second.
    Packets(PacketRate),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    pub name: String,
    /// 1-based, in file order: the probe's flow id.
    pub id: u32,
    /// Node indices, sender first, receiver last.
    pub path: Vec<usize>,
    /// Link indices between consecutive path nodes.
    pub links: Vec<usize>,
    /// IP packet size.
    pub size: u32,
    pub packets: u32,
    pub rate: FlowRate,
    /// Non-immediate forwarding: `d` at each router of the path, in order.
    pub d: Option<Vec<u32>>,
    pub count: Option<u64>,
    /// Times the path's ring is gone round (1: no ring). `path` and `links` are
    /// unrolled: a router on the ring appears once per pass.
    pub loops: u32,
    pub loc: Loc,
    pub path_loc: Loc,
    pub packets_loc: Loc,
    pub rate_loc: Loc,
    pub d_loc: Option<Loc>,
}

impl FlowSpec {
    /// Routers on the path (everything but the two ends).
    pub fn routers(&self) -> &[usize] {
        let n = self.path.len();
        self.path.get(1..n.saturating_sub(1)).unwrap_or(&[])
    }

    /// Whether the path meets a router more than once (a ring, gone round
    /// `loops` times): routers must then route it on its TTL.
    pub fn has_ring(&self) -> bool {
        let r = self.routers();
        r.iter().enumerate().any(|(i, x)| r[..i].contains(x))
    }

    pub fn sender(&self) -> usize {
        self.path.first().copied().unwrap_or(0)
    }

    pub fn receiver(&self) -> usize {
        self.path.last().copied().unwrap_or(0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadTool {
    /// `lockstep probe stream` → `lockstep probe sink` (UDP).
    Lockstep,
    /// `iperf3 -c` → `iperf3 -s`.
    Iperf3,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadProto {
    Udp,
    Tcp,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadSpec {
    pub from: usize,
    pub to: usize,
    pub tool: LoadTool,
    pub proto: LoadProto,
    /// Bits per second of payload; `None`: as fast as possible (iperf3 `-b 0`).
    pub rate_bps: Option<u64>,
    /// Datagram payload (UDP) or write size (TCP); `None`: the tool's default.
    pub size: Option<u32>,
    pub loc: Loc,
}

/// A checked scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    pub source: Source,
    pub name: String,
    pub description: String,
    pub tfs: Vec<Duration>,
    pub k: u32,
    /// Forwarding delay at a router unless a link or flow says otherwise.
    pub d: u32,
    pub guard: Duration,
    /// Time a router may take to queue a packet; a forwarding delay must cover the
    /// upstream frame's transmission plus this.
    pub processing: Duration,
    pub modes: Vec<RunMode>,
    pub duration: Duration,
    pub sources: Sources,
    /// Asynchronous sources send this fraction of their flow's reservation (their
    /// clock runs slower by its inverse), in parts per million: 1 000 000 = exactly
    /// the reserved rate.
    pub source_load_ppm: u32,
    /// Asynchronous sources: the n-th sender's clock runs slower than the routers'
    /// by n times this, in parts per billion (on top of `source_load_ppm`).
    pub source_drift_ppb: u32,
    pub strategy: WaitStrategy,
    /// SCHED_FIFO priority of every node process unless a node says otherwise.
    pub priority: Option<i32>,
    /// Routers and senders take software TX timestamps of every probe (the kernel
    /// part of each hop; costs a system call per packet).
    pub tx_timestamps: bool,
    pub padding: bool,
    /// What a router does with a reserved packet that missed its frame.
    pub on_slip: SlipAction,
    /// How the routers of a run are run.
    pub routers: RouterLayout,
    /// Where the senders of a run run.
    pub senders: SenderLayout,
    pub routing: Routing,
    pub nodes: Vec<NodeSpec>,
    pub links: Vec<LinkSpec>,
    pub flows: Vec<FlowSpec>,
    pub loads: Vec<LoadSpec>,
    /// Faults injected on purpose (`[[fault]]`), and where each is written.
    pub faults: Vec<crate::fault::Fault>,
    pub fault_locs: Vec<Loc>,
    pub tf_loc: Loc,
    pub k_loc: Loc,
    pub d_loc: Loc,
    /// 1 as written; `s` after [`Scenario::scaled`] (times `s`, rates divided by `s`).
    pub time_scale: u32,
    /// Per node: its links, in file order.
    node_links: Vec<Vec<usize>>,
}

/// Whether `text` is written in a packet-rate unit (`pps`, `kpps`, `Mpps`, `/s`).
fn is_packet_rate(text: &str) -> bool {
    grammar::split(text)
        .is_some_and(|(_, unit)| grammar::unit_scale(Kind::PacketRate, unit).is_some())
}

/// Parses a bit rate in the one unit grammar ([`BitRate`]'s): `100Mbit/s`,
/// `1Gbit/s`, `512kbit/s`, `100Mbps`, `20B/us`; exact (`1.5Mbit/s` is 1 500 000, a
/// value that is not a whole number of bit/s is refused), above 0 and at most
/// 1 Tbit/s.
pub fn parse_bit_rate(s: &str) -> Result<u64, String> {
    s.parse::<BitRate>()
        .map(BitRate::bps)
        .map_err(|e| e.to_string())
}

/// `100000000` → `100Mbit/s`.
pub fn fmt_bit_rate(bps: u64) -> String {
    for (scale, unit) in [
        (1_000_000_000, "Gbit/s"),
        (1_000_000, "Mbit/s"),
        (1_000, "kbit/s"),
    ] {
        if bps >= scale && bps.is_multiple_of(scale) {
            return format!("{}{unit}", bps / scale);
        }
    }
    if bps >= 1_000_000 {
        return format!("{:.3}Mbit/s", bps as f64 / 1e6);
    }
    format!("{bps}bit/s")
}

fn valid_node_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= NODE_NAME_MAX
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Smallest IP packet that carries a probe with room for `routers` hop records.
pub fn min_flow_size(routers: usize) -> u32 {
    IP_UDP_HEADERS + (HEADER_LEN + routers * HOP_LEN) as u32
}

/// How much slower each further asynchronous sender's clock runs: 100 ppm.
pub const DEFAULT_SOURCE_DRIFT_PPB: u32 = 100_000;

/// A clock drift: `"100ppm"`, `"0.05ppm"`, `"50ppb"` (0 to 10 000 ppm).
fn parse_drift_ppb(text: &str) -> Result<u32, String> {
    let t = text.trim();
    let (num, scale) = if let Some(n) = t.strip_suffix("ppm") {
        (n, 1000.0)
    } else if let Some(n) = t.strip_suffix("ppb") {
        (n, 1.0)
    } else {
        return Err(format!(
            "expected a drift like \"100ppm\" or \"50ppb\", got \"{text}\""
        ));
    };
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("\"{text}\": \"{}\" is not a number", num.trim()))?;
    let ppb = (x * scale).round();
    if !(0.0..=1e7).contains(&ppb) {
        return Err(format!("drift {text} is outside 0 to 10000ppm"));
    }
    Ok(ppb as u32)
}

/// The numbers of `[[node]]`, `[[link]]` and `[[flow]]` tables against their limits:
/// the first table over its limit and the message.
fn table_counts(nodes: usize, links: usize, flows: usize) -> Result<(), (&'static str, String)> {
    for (table, n, max) in [
        ("node", nodes, limits::MAX_SCENARIO_NODES),
        ("link", links, limits::MAX_SCENARIO_LINKS),
        ("flow", flows, limits::MAX_SCENARIO_FLOWS),
    ] {
        if n > max {
            return Err((
                table,
                format!("{n} [[{table}]] tables is above the limit of {max}"),
            ));
        }
    }
    Ok(())
}

/// The TTL senders give their packets; routers route a looping flow on it.
pub const SENDER_TTL: u8 = 64;
/// Most routers a path may cross: the last one must still see a TTL above 1.
pub const MAX_ROUTERS: usize = SENDER_TTL as usize - 2;

/// `loops` of flow `i` (1 when absent), checked against its ring.
fn flow_loops(
    c: &Checker<'_>,
    fl: &RawFlow,
    ring: Option<(usize, usize)>,
    i: usize,
) -> Result<u32, ScenarioError> {
    let Some(v) = &fl.loops else { return Ok(1) };
    let field = format!("flow[{i}].loops");
    let n = *v.get_ref();
    if !(1..=1000).contains(&n) {
        return Err(c.err(v, &field, format!("loops must be 1..1000, got {n}")));
    }
    if ring.is_none() {
        return Err(c.err(
            v,
            &field,
            "loops needs a ring in the path: a router met twice, as in [\"s\", \"r1\", \"r2\", \"r3\", \"r1\", \"d\"]",
        ));
    }
    Ok(n as u32)
}

/// The path with its ring `path[a..b]` (`path[b] == path[a]`) gone round `loops`
/// times, and the links along it.
fn unroll(
    path: &[usize],
    links: &[usize],
    a: usize,
    b: usize,
    loops: u32,
) -> (Vec<usize>, Vec<usize>) {
    let mut p = path[..a].to_vec();
    let mut l = links[..a].to_vec();
    for _ in 0..loops {
        p.extend_from_slice(&path[a..b]);
        l.extend_from_slice(&links[a..b]);
    }
    p.extend_from_slice(&path[b..]);
    l.extend_from_slice(&links[b..]);
    (p, l)
}

struct Checker<'a> {
    src: &'a Source,
}

impl Checker<'_> {
    fn err<T>(&self, s: &Spanned<T>, field: &str, msg: impl Into<String>) -> ScenarioError {
        self.src.error(&s.span(), field, msg)
    }

    fn duration(&self, s: &Spanned<String>, field: &str) -> Result<Duration, ScenarioError> {
        Duration::parse(s.get_ref()).map_err(|e| self.err(s, field, e.to_string()))
    }

    fn positive_duration(
        &self,
        s: &Spanned<String>,
        field: &str,
    ) -> Result<Duration, ScenarioError> {
        let d = self.duration(s, field)?;
        if !d.is_positive() {
            return Err(self.err(
                s,
                field,
                format!("must be positive, got \"{}\"", s.get_ref()),
            ));
        }
        Ok(d)
    }

    fn forwarding_delay(
        &self,
        v: i64,
        k: u32,
        s: &Range<usize>,
        field: &str,
    ) -> Result<u32, ScenarioError> {
        if v < 1 {
            return Err(self.src.error(
                s,
                field,
                format!(
                    "forwarding delay {v}: a packet must be in its output queue by the end of \
                     the frame before it leaves (time-driven forwarding, rule 1), so d is at least 1"
                ),
            ));
        }
        if v >= i64::from(k) {
            return Err(self.src.error(
                s,
                field,
                format!("forwarding delay {v} is not below k = {k} (frames per cycle)"),
            ));
        }
        Ok(v as u32)
    }
}

impl Scenario {
    /// Parses and checks a scenario. `file` is how errors name it.
    pub fn parse(file: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let src = Source {
            file: file.to_string(),
            text: text.to_string(),
        };
        let raw: RawFile = toml::from_str(text).map_err(|e| src.toml_error(&e))?;
        let c = Checker { src: &src };
        let RawFile {
            scenario: sc,
            node: raw_nodes,
            link: raw_links,
            flow: raw_flows,
            load: raw_loads,
            fault: raw_faults,
        } = raw;
        let sc_span = sc.span();
        let sc = sc.into_inner();

        // [scenario]
        let name = sc.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(c.err(&sc.name, "scenario.name", "must not be empty"));
        }
        // the name goes into result directory names
        if let Err(m) = lockstep_core::names::check(&name) {
            return Err(c.err(&sc.name, "scenario.name", m));
        }
        let tf_loc = Loc::new(&sc.tf, "scenario.tf");
        let tf_texts = sc.tf.get_ref().clone().into_vec();
        if tf_texts.is_empty() {
            return Err(c.err(&sc.tf, "scenario.tf", "give at least one time-frame length"));
        }
        if tf_texts.len() > limits::MAX_TFS {
            return Err(c.err(
                &sc.tf,
                "scenario.tf",
                format!(
                    "{} time-frames is above the limit of {} (each is a run per mode)",
                    tf_texts.len(),
                    limits::MAX_TFS
                ),
            ));
        }
        let mut tfs = Vec::new();
        for t in &tf_texts {
            let d = Duration::parse(t).map_err(|e| c.err(&sc.tf, "scenario.tf", e.to_string()))?;
            if !d.is_positive() {
                return Err(c.err(
                    &sc.tf,
                    "scenario.tf",
                    format!("a time-frame must be positive, got \"{t}\""),
                ));
            }
            limits::tf(d).map_err(|m| c.err(&sc.tf, "scenario.tf", m))?;
            if tfs.contains(&d) {
                return Err(c.err(&sc.tf, "scenario.tf", format!("{d} is listed twice")));
            }
            tfs.push(d);
        }
        let k_loc = Loc::new(&sc.k, "scenario.k");
        let k = match *sc.k.get_ref() {
            v if v < 1 => {
                return Err(c.err(
                    &sc.k,
                    "scenario.k",
                    format!("k = {v}: a time-cycle needs at least one frame"),
                ))
            }
            v if v > i64::from(limits::MAX_K) => {
                return Err(c.err(
                    &sc.k,
                    "scenario.k",
                    format!(
                        "k = {v} is above the limit of {} frames per cycle",
                        limits::MAX_K
                    ),
                ))
            }
            v => v as u32,
        };
        let d_loc = match &sc.d {
            Some(d) => Loc::new(d, "scenario.d"),
            None => Loc {
                span: sc_span.clone(),
                field: "scenario.d".to_string(),
            },
        };
        let guard = match &sc.guard {
            Some(g) => {
                let v = c.duration(g, "scenario.guard")?;
                if v.is_negative() {
                    return Err(c.err(g, "scenario.guard", "must not be negative"));
                }
                if let Some(tf) = tfs.iter().find(|tf| v >= **tf) {
                    return Err(c.err(
                        g,
                        "scenario.guard",
                        format!("guard {v} leaves no room in a time-frame of {tf}"),
                    ));
                }
                v
            }
            None => Duration::ZERO,
        };
        let processing = match &sc.processing {
            Some(p) => {
                let v = c.duration(p, "scenario.processing")?;
                if v.is_negative() {
                    return Err(c.err(p, "scenario.processing", "must not be negative"));
                }
                limits::delay(v).map_err(|m| c.err(p, "scenario.processing", m))?;
                v
            }
            None => Duration::ZERO,
        };
        let mut modes = Vec::new();
        match &sc.modes {
            None => modes.push(RunMode::Tdp),
            Some(list) => {
                if list.get_ref().is_empty() {
                    return Err(c.err(
                        list,
                        "scenario.modes",
                        "give at least one of fifo, tdp, kernel",
                    ));
                }
                for (i, m) in list.get_ref().iter().enumerate() {
                    let field = format!("scenario.modes[{i}]");
                    let mode = RunMode::parse(m.get_ref()).ok_or_else(|| {
                        c.err(
                            m,
                            &field,
                            format!("expected fifo, tdp or kernel, got \"{}\"", m.get_ref()),
                        )
                    })?;
                    if modes.contains(&mode) {
                        return Err(c.err(m, &field, format!("{} is listed twice", mode.name())));
                    }
                    modes.push(mode);
                }
            }
        }
        let duration = match &sc.duration {
            Some(d) => {
                let v = c.positive_duration(d, "scenario.duration")?;
                limits::sim_duration(v).map_err(|m| c.err(d, "scenario.duration", m))?;
                v
            }
            None => Duration::from_secs(10),
        };
        let sources = match &sc.sources {
            None => Sources::Synchronous,
            Some(s) => match s.get_ref().as_str() {
                "synchronous" => Sources::Synchronous,
                "asynchronous" => Sources::Asynchronous,
                other => {
                    return Err(c.err(
                        s,
                        "scenario.sources",
                        format!("expected synchronous or asynchronous, got \"{other}\""),
                    ))
                }
            },
        };
        let source_load = match &sc.source_load {
            None => 1_000_000,
            Some(v) => {
                let x = *v.get_ref();
                if !(x > 0.0 && x <= 1.0) {
                    return Err(c.err(
                        v,
                        "scenario.source_load",
                        format!("expected a fraction of the reservation in (0, 1], got {x}"),
                    ));
                }
                if sources != Sources::Asynchronous {
                    return Err(c.err(
                        v,
                        "scenario.source_load",
                        "only asynchronous sources send less than their reservation (sources = \"asynchronous\")".to_string(),
                    ));
                }
                (x * 1e6).round().max(1.0) as u32
            }
        };
        let source_drift = match &sc.source_drift {
            None => DEFAULT_SOURCE_DRIFT_PPB,
            Some(v) => {
                if sources != Sources::Asynchronous {
                    return Err(c.err(
                        v,
                        "scenario.source_drift",
                        "only asynchronous sources have clocks of their own (sources = \"asynchronous\")",
                    ));
                }
                parse_drift_ppb(v.get_ref()).map_err(|e| c.err(v, "scenario.source_drift", e))?
            }
        };
        let routers = match &sc.routers {
            None => RouterLayout::OneProcess,
            Some(v) => match v.get_ref().as_str() {
                "one-process" => RouterLayout::OneProcess,
                "one-thread" => RouterLayout::OneThread,
                "per-node" => RouterLayout::PerNode,
                other => {
                    return Err(c.err(
                        v,
                        "scenario.routers",
                        format!("expected one-process, one-thread or per-node, got \"{other}\""),
                    ))
                }
            },
        };
        let senders = match &sc.senders {
            None => SenderLayout::WithRouters,
            Some(v) => match v.get_ref().as_str() {
                "own-process" => SenderLayout::OwnProcess,
                "with-routers" => SenderLayout::WithRouters,
                other => {
                    return Err(c.err(
                        v,
                        "scenario.senders",
                        format!("expected own-process or with-routers, got \"{other}\""),
                    ))
                }
            },
        };
        let routing = match &sc.routing {
            None => Routing::Shortest,
            Some(v) => match v.get_ref().as_str() {
                "shortest" => Routing::Shortest,
                "flows" => Routing::Flows,
                other => {
                    return Err(c.err(
                        v,
                        "scenario.routing",
                        format!("expected shortest or flows, got \"{other}\""),
                    ))
                }
            },
        };
        let strategy = match &sc.strategy {
            None => WaitStrategy::Sleep,
            Some(s) => s
                .get_ref()
                .parse()
                .map_err(|e: String| c.err(s, "scenario.strategy", e))?,
        };

        let priority = match &sc.priority {
            None => None,
            Some(v) if (1..=99).contains(v.get_ref()) => Some(*v.get_ref() as i32),
            Some(v) => {
                return Err(c.err(
                    v,
                    "scenario.priority",
                    format!("real-time priority {} is outside 1..99", v.get_ref()),
                ))
            }
        };

        let on_slip = match &sc.on_slip {
            None => SlipAction::BestEffort,
            Some(v) => match v.get_ref().as_str() {
                "best_effort" => SlipAction::BestEffort,
                "drop" => SlipAction::Drop,
                other => {
                    return Err(c.err(
                        v,
                        "scenario.on_slip",
                        format!("expected best_effort or drop, got \"{other}\""),
                    ))
                }
            },
        };

        if let Err((table, m)) = table_counts(raw_nodes.len(), raw_links.len(), raw_flows.len()) {
            return Err(src.error(&(0..0), table, m));
        }

        // [[node]]
        let mut nodes: Vec<NodeSpec> = Vec::new();
        let mut by_name: HashMap<String, usize> = HashMap::new();
        for (i, n) in raw_nodes.iter().enumerate() {
            let n = n.get_ref();
            let f = |x: &str| format!("node[{i}].{x}");
            let name = n.name.get_ref().clone();
            if !valid_node_name(&name) {
                return Err(c.err(
                    &n.name,
                    &f("name"),
                    format!(
                        "\"{name}\": use 1 to {NODE_NAME_MAX} of A-Z a-z 0-9 _ - \
                         (interfaces are named to-<node>, at most 15 bytes)"
                    ),
                ));
            }
            if let Some(&j) = by_name.get(&name) {
                let (line, _) = src.line_col(nodes[j].loc.span.start);
                return Err(c.err(
                    &n.name,
                    &f("name"),
                    format!("node \"{name}\" is already defined (line {line})"),
                ));
            }
            let role = match n.role.get_ref().as_str() {
                "sender" => Role::Sender,
                "receiver" => Role::Receiver,
                "edge" => Role::Edge,
                "core" => Role::Core,
                other => {
                    return Err(c.err(
                        &n.role,
                        &f("role"),
                        format!("expected sender, edge, core or receiver, got \"{other}\""),
                    ))
                }
            };
            let strategy = match &n.strategy {
                None => None,
                Some(s) => Some(
                    s.get_ref()
                        .parse()
                        .map_err(|e: String| c.err(s, &f("strategy"), e))?,
                ),
            };
            let cpu = match &n.cpu {
                None => None,
                Some(v) if *v.get_ref() >= 0 => {
                    limits::cpu(*v.get_ref() as u64).map_err(|m| c.err(v, &f("cpu"), m))?;
                    Some(*v.get_ref() as usize)
                }
                Some(v) => return Err(c.err(v, &f("cpu"), "a CPU number is not negative")),
            };
            let priority = match &n.priority {
                None => None,
                Some(v) if (1..=99).contains(v.get_ref()) => Some(*v.get_ref() as i32),
                Some(v) => {
                    return Err(c.err(
                        v,
                        &f("priority"),
                        format!("real-time priority {} is outside 1..99", v.get_ref()),
                    ))
                }
            };
            let coalesce = match &n.coalesce {
                None => None,
                Some(v) => {
                    let d = c.duration(v, &f("coalesce"))?;
                    crate::nodefile::check_coalesce(d, role)
                        .map_err(|m| c.err(v, &f("coalesce"), m))?;
                    Some(d)
                }
            };
            let io = match &n.io {
                None => None,
                Some(v) => Some(host_io(v, role).map_err(|m| c.err(v, &f("io"), m))?),
            };
            by_name.insert(name.clone(), nodes.len());
            nodes.push(NodeSpec {
                name,
                role,
                strategy,
                cpu,
                priority,
                coalesce,
                io,
                loc: Loc::new(&n.name, f("name")),
            });
        }
        if nodes.is_empty() {
            return Err(src.error(&(0..0), "node", "a scenario needs [[node]] tables"));
        }
        let node_ref = |s: &Spanned<String>, field: &str| -> Result<usize, ScenarioError> {
            by_name.get(s.get_ref()).copied().ok_or_else(|| {
                c.err(
                    s,
                    field,
                    format!(
                        "unknown node \"{}\" (no [[node]] has this name)",
                        s.get_ref()
                    ),
                )
            })
        };
        let has_tdp_router = nodes.iter().any(NodeSpec::is_router) && modes.contains(&RunMode::Tdp);
        if has_tdp_router && k < 2 {
            return Err(c.err(
                &sc.k,
                "scenario.k",
                format!("k = {k}: a TDP router needs k >= 2 (forwarding delays lie in [1, k))"),
            ));
        }
        let d = match &sc.d {
            Some(v) => c.forwarding_delay(*v.get_ref(), k, &v.span(), "scenario.d")?,
            None if k >= 2 => 1,
            None => 1,
        };

        // [[link]]
        let mut links: Vec<LinkSpec> = Vec::new();
        let mut explicit: Vec<Option<([Ipv4Addr; 2], u8)>> = Vec::new();
        let mut taken: HashMap<Ipv4Addr, String> = HashMap::new();
        // (lower node, higher node) → link
        let mut link_index: HashMap<(usize, usize), usize> = HashMap::new();
        for (i, l) in raw_links.iter().enumerate() {
            let l = l.get_ref();
            let f = |x: &str| format!("link[{i}].{x}");
            let between = l.between.get_ref();
            if between.len() != 2 {
                return Err(c.err(
                    &l.between,
                    &f("between"),
                    format!("a link joins exactly 2 nodes, got {}", between.len()),
                ));
            }
            let a = node_ref(&between[0], &f("between[0]"))?;
            let b = node_ref(&between[1], &f("between[1]"))?;
            if a == b {
                return Err(c.err(
                    &l.between,
                    &f("between"),
                    "a link joins two different nodes",
                ));
            }
            if let Some(&j) = link_index.get(&(a.min(b), a.max(b))) {
                let (line, _) = src.line_col(links[j].loc.span.start);
                return Err(c.err(
                    &l.between,
                    &f("between"),
                    format!(
                        "{} and {} are already linked (link[{j}], line {line})",
                        nodes[a].name, nodes[b].name
                    ),
                ));
            }
            let rate_bps =
                parse_bit_rate(l.rate.get_ref()).map_err(|e| c.err(&l.rate, &f("rate"), e))?;
            let d_link = match &l.d {
                Some(v) => Some(c.forwarding_delay(*v.get_ref(), k, &v.span(), &f("d"))?),
                None => None,
            };
            let mut addrs = None;
            if let Some(list) = &l.addresses {
                let v = list.get_ref();
                if v.len() != 2 {
                    return Err(c.err(
                        list,
                        &f("addresses"),
                        format!("give one address per end (2), got {}", v.len()),
                    ));
                }
                let mut parsed = [Ipv4Addr::UNSPECIFIED; 2];
                let mut len = 0;
                for (e, s) in v.iter().enumerate() {
                    let field = f(&format!("addresses[{e}]"));
                    let (ip, plen) = s
                        .get_ref()
                        .split_once('/')
                        .and_then(|(ip, p)| Some((ip.parse::<Ipv4Addr>().ok()?, p.parse::<u8>().ok()?)))
                        .ok_or_else(|| {
                            c.err(s, &field, format!("expected an address with its prefix like 10.0.1.1/24, got \"{}\"", s.get_ref()))
                        })?;
                    if !(8..=30).contains(&plen) {
                        return Err(c.err(
                            s,
                            &field,
                            format!("prefix length {plen} is outside 8..30"),
                        ));
                    }
                    if e == 1 && plen != len {
                        return Err(c.err(
                            s,
                            &field,
                            format!("both ends need the same prefix length ({len})"),
                        ));
                    }
                    len = plen;
                    let p = Prefix::truncating(ip, plen);
                    let host = u32::from(ip) & !p.mask();
                    if host == 0 || host == !p.mask() {
                        return Err(c.err(
                            s,
                            &field,
                            format!("{ip} is the network or broadcast address of {p}"),
                        ));
                    }
                    if let Some(other) = taken.get(&ip) {
                        return Err(c.err(
                            s,
                            &field,
                            format!("duplicate address {ip}: also {other}"),
                        ));
                    }
                    parsed[e] = ip;
                    taken.insert(
                        ip,
                        format!(
                            "{}'s end of link[{i}]",
                            nodes[if e == 0 { a } else { b }].name
                        ),
                    );
                }
                if Prefix::truncating(parsed[0], len) != Prefix::truncating(parsed[1], len) {
                    return Err(c.err(
                        list,
                        &f("addresses"),
                        format!(
                            "{} and {} are not in one /{len} subnet",
                            parsed[0], parsed[1]
                        ),
                    ));
                }
                addrs = Some((parsed, len));
            }
            explicit.push(addrs);
            link_index.insert((a.min(b), a.max(b)), links.len());
            links.push(LinkSpec {
                ends: [a, b],
                rate_bps,
                shape: l.shape.unwrap_or(false),
                d: d_link,
                addrs: [Ipv4Addr::UNSPECIFIED; 2],
                prefix_len: 24,
                loc: Loc::new(&l.between, f("between")),
                d_loc: l.d.as_ref().map(|v| Loc::new(v, f("d"))),
                rate_loc: Loc::new(&l.rate, f("rate")),
            });
        }
        // Explicit subnets must not overlap; the others get 10.0.<n>.0/24, then
        // 10.<n / 256>.<n % 256>.0/24.
        let mut subnets = Subnets::default();
        for (i, e) in explicit.iter().enumerate() {
            if let Some((ips, len)) = e {
                let p = Prefix::truncating(ips[0], *len);
                if let Some((q, j)) = subnets.first_overlap(p) {
                    let l = &raw_links[i];
                    let span = l
                        .get_ref()
                        .addresses
                        .as_ref()
                        .map(|a| a.span())
                        .unwrap_or(l.span());
                    return Err(src.error(
                        &span,
                        format!("link[{i}].addresses"),
                        format!("subnet {p} overlaps {q} of link[{j}]: routes would be ambiguous"),
                    ));
                }
                subnets.insert(p, i);
                links[i].addrs = *ips;
                links[i].prefix_len = *len;
            }
        }
        let mut next_net: u32 = 1;
        for (i, e) in explicit.iter().enumerate() {
            if e.is_some() {
                continue;
            }
            loop {
                if next_net > AUTO_SUBNETS {
                    return Err(src.error(
                        &links[i].loc.span,
                        format!("link[{i}]"),
                        format!("more than {AUTO_SUBNETS} links need automatic addresses"),
                    ));
                }
                let p = auto_subnet(next_net);
                next_net += 1;
                if subnets.first_overlap(p).is_some() {
                    continue;
                }
                let base = u32::from(p.addr);
                links[i].addrs = [Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2)];
                links[i].prefix_len = 24;
                break;
            }
        }
        // Each node's links, in file order.
        let mut node_links: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
        for (li, l) in links.iter().enumerate() {
            for &e in &l.ends {
                node_links[e].push(li);
            }
        }
        // Hosts have exactly one link; routers at least one.
        for (n, spec) in nodes.iter().enumerate() {
            let count = node_links[n].len();
            let span = spec.loc.span.clone();
            let field = spec.loc.field.clone();
            if !spec.is_router() && count != 1 {
                return Err(src.error(
                    &span,
                    field,
                    format!(
                        "{} \"{}\" has {count} links; a sender or receiver has exactly one",
                        role_name(spec.role),
                        spec.name
                    ),
                ));
            }
            if spec.is_router() && count == 0 {
                return Err(src.error(
                    &span,
                    field,
                    format!("router \"{}\" has no link", spec.name),
                ));
            }
        }
        let link_between = |a: usize, b: usize| link_index.get(&(a.min(b), a.max(b))).copied();

        // [[flow]]
        let mut flows: Vec<FlowSpec> = Vec::new();
        for (i, fl) in raw_flows.iter().enumerate() {
            let fl_span = fl.span();
            let fl = fl.get_ref();
            let f = |x: &str| format!("flow[{i}].{x}");
            let name = fl.name.get_ref().trim().to_string();
            if name.is_empty() {
                return Err(c.err(&fl.name, &f("name"), "must not be empty"));
            }
            if let Err(m) = lockstep_core::names::check(&name) {
                return Err(c.err(&fl.name, &f("name"), m));
            }
            if let Some(o) = flows.iter().find(|o| o.name == name) {
                let (line, _) = src.line_col(o.loc.span.start);
                return Err(c.err(
                    &fl.name,
                    &f("name"),
                    format!("flow \"{name}\" is already defined (line {line})"),
                ));
            }
            let raw_path = fl.path.get_ref();
            if raw_path.len() < 2 {
                return Err(c.err(
                    &fl.path,
                    &f("path"),
                    "a path runs from a sender to a receiver: at least 2 nodes",
                ));
            }
            let mut path = Vec::new();
            let mut ring = None;
            for (j, s) in raw_path.iter().enumerate() {
                let n = node_ref(s, &f(&format!("path[{j}]")))?;
                if let Some(at) = path.iter().position(|&m| m == n) {
                    if ring.is_some() || fl.loops.is_none() || at == 0 {
                        let why = if fl.loops.is_none() {
                            " (a path that comes back to a router is a ring: give loops = n to go round it n times)"
                        } else {
                            " (a looping flow has one ring: one router, met twice)"
                        };
                        return Err(c.err(
                            s,
                            &f(&format!("path[{j}]")),
                            format!("\"{}\" appears twice in the path{why}", s.get_ref()),
                        ));
                    }
                    ring = Some((at, j));
                }
                path.push(n);
            }
            let last = path.len() - 1;
            for (j, &n) in path.iter().enumerate() {
                let s = &raw_path[j];
                let field = f(&format!("path[{j}]"));
                let role = nodes[n].role;
                let ok = match j {
                    0 => role == Role::Sender,
                    j if j == last => role == Role::Receiver,
                    _ => nodes[n].is_router(),
                };
                if !ok {
                    let want = match j {
                        0 => "a path starts at a sender",
                        j if j == last => "a path ends at a receiver",
                        _ => "the middle of a path is routers (edge or core)",
                    };
                    return Err(c.err(
                        s,
                        &field,
                        format!("{want}, but \"{}\" is a {}", nodes[n].name, role_name(role)),
                    ));
                }
            }
            let mut flow_links = Vec::new();
            for j in 1..path.len() {
                match link_between(path[j - 1], path[j]) {
                    Some(l) => flow_links.push(l),
                    None => {
                        return Err(c.err(
                            &raw_path[j],
                            &f(&format!("path[{j}]")),
                            format!(
                                "the path is not connected: no [[link]] between \"{}\" and \"{}\"",
                                nodes[path[j - 1]].name,
                                nodes[path[j]].name
                            ),
                        ))
                    }
                }
            }
            let loops = flow_loops(&c, fl, ring, i)?;
            if let Some((a, b)) = ring {
                (path, flow_links) = unroll(&path, &flow_links, a, b, loops);
            }
            let routers = path.len() - 2;
            if routers > MAX_ROUTERS {
                return Err(c.err(
                    &fl.path,
                    &f("path"),
                    format!("the path crosses {routers} routers; a packet sent with TTL {SENDER_TTL} is dropped after {MAX_ROUTERS}"),
                ));
            }
            let size = fl
                .size
                .get_ref()
                .parse::<Size>()
                .map_err(|e| c.err(&fl.size, &f("size"), e.to_string()))?
                .bytes();
            let recorded = routers.min(MIN_RECORDED_HOPS);
            let min = min_flow_size(recorded);
            if size < u64::from(min) {
                return Err(c.err(
                    &fl.size,
                    &f("size"),
                    format!(
                        "{size}B is too small: a probe with room for the hop records of {recorded} router(s) needs {min}B of IP packet (IP+UDP {IP_UDP_HEADERS}, probe header {HEADER_LEN}, {HOP_LEN} per router)"
                    ),
                ));
            }
            if size > u64::from(MAX_IP_SIZE) {
                return Err(c.err(
                    &fl.size,
                    &f("size"),
                    format!("{size}B is larger than the links' MTU ({MAX_IP_SIZE}B)"),
                ));
            }
            let size = size as u32;
            let packets_loc = match &fl.packets {
                Some(p) => Loc::new(p, f("packets")),
                None => Loc {
                    span: fl.name.span(),
                    field: f("packets"),
                },
            };
            let packets = match &fl.packets {
                None => 1,
                Some(p) if *p.get_ref() >= 1 && *p.get_ref() <= 10_000 => *p.get_ref() as u32,
                Some(p) => {
                    return Err(c.err(
                        p,
                        &f("packets"),
                        format!("packets per frame must be 1..10000, got {}", p.get_ref()),
                    ))
                }
            };
            let (rate, rate_loc) = match (&fl.every, &fl.rate) {
                (Some(e), Some(_)) => {
                    return Err(c.err(e, &f("every"), "give either every or rate, not both"))
                }
                (Some(e), None) => {
                    let v = *e.get_ref();
                    if v < 1 {
                        return Err(c.err(
                            e,
                            &f("every"),
                            format!("every = {v}: a flow needs a frame at least once per cycle"),
                        ));
                    }
                    if v > i64::from(k) || k % (v as u32) != 0 {
                        return Err(c.err(e, &f("every"), format!("every = {v} does not divide k = {k}: reservations repeat every cycle")));
                    }
                    (FlowRate::Every(v as u32), Loc::new(e, f("every")))
                }
                (None, Some(r)) => {
                    let text = r.get_ref();
                    let rate = if is_packet_rate(text) {
                        FlowRate::Packets(
                            text.parse::<PacketRate>()
                                .map_err(|e| c.err(r, &f("rate"), e.to_string()))?,
                        )
                    } else {
                        FlowRate::Bits(parse_bit_rate(text).map_err(|e| c.err(r, &f("rate"), e))?)
                    };
                    (rate, Loc::new(r, f("rate")))
                }
                (None, None) => (
                    FlowRate::Every(1),
                    Loc {
                        span: fl.name.span(),
                        field: f("every"),
                    },
                ),
            };
            let (d_flow, d_loc) = match &fl.d {
                None => (None, None),
                Some(v) => {
                    let field = f("d");
                    let list = match v.get_ref() {
                        OneOrMany::One(x) => vec![*x; routers],
                        OneOrMany::Many(_) if loops > 1 => {
                            return Err(c.err(
                                v,
                                &field,
                                "a looping flow meets its routers several times: give d as one number",
                            ));
                        }
                        OneOrMany::Many(xs) => {
                            if xs.len() != routers {
                                return Err(c.err(
                                    v,
                                    &field,
                                    format!("give one forwarding delay per router on the path ({routers}), got {}", xs.len()),
                                ));
                            }
                            xs.clone()
                        }
                    };
                    if routers == 0 {
                        return Err(c.err(
                            v,
                            &field,
                            "the path crosses no router: there is no forwarding delay to set",
                        ));
                    }
                    let mut out = Vec::new();
                    for x in list {
                        out.push(c.forwarding_delay(x, k, &v.span(), &field)?);
                    }
                    (Some(out), Some(Loc::new(v, field)))
                }
            };
            let count = match &fl.count {
                None => None,
                Some(v) if *v.get_ref() >= 1 => {
                    limits::count(*v.get_ref() as u64).map_err(|m| c.err(v, &f("count"), m))?;
                    Some(*v.get_ref() as u64)
                }
                Some(v) => return Err(c.err(v, &f("count"), "count must be at least 1")),
            };
            if sources == Sources::Asynchronous {
                if let Some(&first) = path.get(1) {
                    if nodes[first].role == Role::Core {
                        return Err(c.err(
                            &raw_path[1],
                            &f("path[1]"),
                            format!(
                                "with asynchronous sources the first router must be an edge (it holds each packet until its frame), but \"{}\" is core",
                                nodes[first].name
                            ),
                        ));
                    }
                }
            }
            flows.push(FlowSpec {
                name,
                id: i as u32 + 1,
                path,
                links: flow_links,
                size,
                packets,
                rate,
                d: d_flow,
                count,
                loops,
                loc: Loc {
                    span: fl_span,
                    field: format!("flow[{i}]"),
                },
                path_loc: Loc::new(&fl.path, f("path")),
                packets_loc,
                rate_loc,
                d_loc,
            });
        }

        // [[load]]
        let mut loads = Vec::new();
        for (i, ld) in raw_loads.iter().enumerate() {
            let ld_span = ld.span();
            let ld = ld.get_ref();
            let f = |x: &str| format!("load[{i}].{x}");
            let from = node_ref(&ld.from, &f("from"))?;
            let to = node_ref(&ld.to, &f("to"))?;
            for (n, s, field) in [(from, &ld.from, "from"), (to, &ld.to, "to")] {
                if nodes[n].is_router() {
                    return Err(c.err(
                        s,
                        &f(field),
                        format!(
                            "load runs between hosts (senders, receivers); \"{}\" is a router",
                            nodes[n].name
                        ),
                    ));
                }
            }
            if from == to {
                return Err(c.err(&ld.to, &f("to"), "load goes from one host to another"));
            }
            if !connected(&nodes, &links, &node_links, from, to) {
                return Err(c.err(
                    &ld.to,
                    &f("to"),
                    format!(
                        "\"{}\" and \"{}\" are not connected through routers",
                        nodes[from].name, nodes[to].name
                    ),
                ));
            }
            if routing == Routing::Flows {
                return Err(c.err(
                    &ld.to,
                    &f("to"),
                    "with routing = \"flows\" the routers know only the flows' receivers: a load needs routing = \"shortest\"",
                ));
            }
            let tool = match ld.tool.as_ref().map(|t| t.get_ref().as_str()) {
                None | Some("lockstep") => LoadTool::Lockstep,
                Some("iperf3") => LoadTool::Iperf3,
                Some(other) => {
                    let t = ld
                        .tool
                        .as_ref()
                        .map(|t| t.span())
                        .unwrap_or(ld_span.clone());
                    return Err(src.error(
                        &t,
                        f("tool"),
                        format!("expected lockstep or iperf3, got \"{other}\""),
                    ));
                }
            };
            let proto = match &ld.proto {
                None => LoadProto::Udp,
                Some(p) => match p.get_ref().as_str() {
                    "udp" => LoadProto::Udp,
                    "tcp" if tool == LoadTool::Iperf3 => LoadProto::Tcp,
                    "tcp" => {
                        return Err(c.err(
                            p,
                            &f("proto"),
                            "the lockstep generator sends UDP; use tool = \"iperf3\" for TCP",
                        ))
                    }
                    other => {
                        return Err(c.err(
                            p,
                            &f("proto"),
                            format!("expected udp or tcp, got \"{other}\""),
                        ))
                    }
                },
            };
            let rate_bps = match &ld.rate {
                Some(r) if r.get_ref() == "max" => {
                    if tool == LoadTool::Lockstep {
                        return Err(c.err(
                            r,
                            &f("rate"),
                            "the lockstep generator needs a rate (rate = \"max\" is for iperf3)",
                        ));
                    }
                    None
                }
                Some(r) => Some(parse_bit_rate(r.get_ref()).map_err(|e| c.err(r, &f("rate"), e))?),
                None => {
                    return Err(src.error(
                        &ld_span,
                        f("rate"),
                        "missing field `rate` (a bit rate like 20Mbit/s, or \"max\" for iperf3)",
                    ))
                }
            };
            let size = match &ld.size {
                None => None,
                Some(s) => {
                    let v = s
                        .get_ref()
                        .parse::<Size>()
                        .map_err(|e| c.err(s, &f("size"), e.to_string()))?
                        .bytes();
                    let min = match tool {
                        LoadTool::Lockstep => HEADER_LEN as u64,
                        LoadTool::Iperf3 => 16,
                    };
                    if v < min || v > u64::from(MAX_IP_SIZE - IP_UDP_HEADERS) {
                        return Err(c.err(
                            s,
                            &f("size"),
                            format!(
                                "payload {v}B is outside {min}..{}B",
                                MAX_IP_SIZE - IP_UDP_HEADERS
                            ),
                        ));
                    }
                    Some(v as u32)
                }
            };
            loads.push(LoadSpec {
                from,
                to,
                tool,
                proto,
                rate_bps,
                size,
                loc: Loc {
                    span: ld_span,
                    field: format!("load[{i}]"),
                },
            });
        }

        let longest_tf = tfs.iter().copied().max().unwrap_or(Duration::ZERO);
        let fault_cx = crate::fault::Context {
            src: &src,
            nodes: &nodes,
            links: &links,
            loads: loads.len(),
            duration,
            longest_cycle: Duration(longest_tf.as_nanos().saturating_mul(i64::from(k))),
        };
        let (faults, fault_locs) = crate::fault::check(&fault_cx, &raw_faults)?;
        let scenario = Scenario {
            source: src.clone(),
            name,
            description: sc.description.unwrap_or_default(),
            tfs,
            k,
            d,
            guard,
            processing,
            modes,
            duration,
            sources,
            source_load_ppm: source_load,
            source_drift_ppb: source_drift,
            strategy,
            priority,
            tx_timestamps: sc.tx_timestamps.unwrap_or(true),
            padding: sc.padding.unwrap_or(true),
            on_slip,
            routers,
            senders,
            routing,
            nodes,
            links,
            flows,
            loads,
            faults,
            fault_locs,
            tf_loc,
            k_loc,
            d_loc,
            node_links,
            time_scale: 1,
        };
        // Everything that depends on the time-frame: schedules, delays, routes.
        for run in scenario.runs() {
            crate::plan::plan(&scenario, &run)?;
        }
        Ok(scenario)
    }

    /// The links of node `n`, in file order.
    pub fn links_of(&self, n: usize) -> &[usize] {
        self.node_links.get(n).map_or(&[], Vec::as_slice)
    }

    /// An error at a remembered place.
    pub fn error_at(&self, loc: &Loc, message: impl Into<String>) -> ScenarioError {
        self.source.error(&loc.span, loc.field.clone(), message)
    }

    /// The runs: every mode for every TF, in file order (TF outer).
    pub fn runs(&self) -> Vec<RunSpec> {
        let mut out = Vec::new();
        for &tf in &self.tfs {
            for &mode in &self.modes {
                out.push(RunSpec::new(
                    mode,
                    tf,
                    self.modes.len() > 1,
                    self.tfs.len() > 1,
                ));
            }
        }
        out
    }

    /// Overrides from the command line (`--tf`, `--modes`); checked like the file.
    pub fn with_overrides(
        mut self,
        tf: Option<Duration>,
        modes: Option<Vec<RunMode>>,
    ) -> Result<Scenario, ScenarioError> {
        // runs of the file's own (mode, TF) were planned when it was parsed
        let checked: Vec<(RunMode, Duration)> =
            self.runs().iter().map(|r| (r.mode, r.tf)).collect();
        if let Some(tf) = tf {
            if let Err(m) = limits::tf(tf) {
                return Err(self.error_at(&self.tf_loc.clone(), format!("--tf {tf}: {m}")));
            }
            if self.guard >= tf {
                return Err(self.error_at(
                    &self.tf_loc.clone(),
                    format!("--tf {tf}: the guard {} leaves no room", self.guard),
                ));
            }
            self.tfs = vec![tf];
            let two_cycles = 2 * tf.as_nanos().saturating_mul(i64::from(self.k));
            for (f, loc) in self.faults.iter().zip(&self.fault_locs) {
                if let Some((_, end)) = f.outage() {
                    if end.as_nanos() + two_cycles > self.duration.as_nanos() {
                        let m = format!(
                            "--tf {tf}: the run ({}) ends before two cycles after this {} ends",
                            self.duration,
                            f.name()
                        );
                        return Err(self.error_at(loc, m));
                    }
                }
            }
        }
        if let Some(m) = modes {
            self.modes = m;
        }
        for run in self.runs() {
            if !checked.contains(&(run.mode, run.tf)) {
                crate::plan::plan(&self, &run)?;
            }
        }
        Ok(self)
    }
}

/// Time scales a scenario may be run at (`Scenario::scaled`): each divides every
/// link rate of the shipped scenarios exactly.
pub const TIME_SCALES: [u32; 8] = [1, 2, 5, 10, 20, 50, 100, 200];

impl Scenario {
    /// The same experiment `s` times slower (time dilation): TF, guard and the
    /// processing allowance times `s`, every link, flow and load rate divided by `s`.
    /// Packet sizes, frames per cycle, forwarding delays in frames and clock drifts
    /// are unchanged, so what happens frame by frame is the same while a host's
    /// stalls shrink against the frame. Checked like the file (every run planned).
    pub fn scaled(mut self, s: u32) -> Result<Scenario, ScenarioError> {
        if s <= 1 {
            return Ok(self);
        }
        let k = i64::from(s);
        let f = u64::from(s);
        for i in 0..self.tfs.len() {
            let tf = Duration(self.tfs[i].as_nanos() * k);
            if let Err(m) = limits::tf(tf) {
                return Err(self.error_at(&self.tf_loc, format!("time scale {s}: {m}")));
            }
            self.tfs[i] = tf;
        }
        self.guard = Duration(self.guard.as_nanos() * k);
        self.processing = Duration(self.processing.as_nanos() * k);
        for i in 0..self.links.len() {
            let r = self.links[i].rate_bps;
            if !r.is_multiple_of(f) {
                let why = format!("{r} bit/s cannot be divided by the time scale {s}");
                return Err(self.error_at(&self.links[i].rate_loc, why));
            }
            self.links[i].rate_bps = r / f;
        }
        for fl in &mut self.flows {
            fl.rate = match fl.rate {
                FlowRate::Every(n) => FlowRate::Every(n),
                FlowRate::Bits(b) => FlowRate::Bits(b / f),
                FlowRate::Packets(p) => FlowRate::Packets(PacketRate {
                    milli_pps: p.milli_pps / f,
                }),
            };
        }
        for l in &mut self.loads {
            l.rate_bps = l.rate_bps.map(|r| r / f);
        }
        self.faults = self.faults.iter().map(|x| x.scaled(k)).collect();
        if !self.description.is_empty() {
            self.description = format!("{} — time scaled x{s}", self.description);
        }
        self.time_scale = self.time_scale.saturating_mul(s);
        for run in self.runs() {
            crate::plan::plan(&self, &run)?;
        }
        Ok(self)
    }
}

/// One run of a scenario: a mode at a TF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSpec {
    pub mode: RunMode,
    pub tf: Duration,
    /// `FIFO`, `TDP`, `TF=250us`, `TDP TF=250us`.
    pub label: String,
    /// Directory name: `fifo`, `tdp`, `tf-250us`, `tdp-tf-250us`.
    pub dir: String,
}

impl RunSpec {
    pub fn new(mode: RunMode, tf: Duration, many_modes: bool, many_tfs: bool) -> RunSpec {
        let (label, dir) = match (many_modes, many_tfs) {
            (_, false) => (mode.label().to_string(), mode.name().to_string()),
            (false, true) => (format!("TF={tf}"), format!("tf-{tf}")),
            (true, true) => (
                format!("{} TF={tf}", mode.label()),
                format!("{}-tf-{tf}", mode.name()),
            ),
        };
        RunSpec {
            mode,
            tf,
            label,
            dir: dir.replace('.', "_"),
        }
    }
}

pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Sender => "sender",
        Role::Receiver => "receiver",
        Role::Edge => "edge router",
        Role::Core => "core router",
    }
}

fn overlaps(a: Prefix, b: Prefix) -> bool {
    let len = a.len.min(b.len);
    Prefix::truncating(a.addr, len) == Prefix::truncating(b.addr, len)
}

/// Whether `a` reaches `b` with only routers in between.
fn connected(
    nodes: &[NodeSpec],
    links: &[LinkSpec],
    node_links: &[Vec<usize>],
    a: usize,
    b: usize,
) -> bool {
    let mut seen = vec![false; nodes.len()];
    seen[a] = true;
    let mut queue = VecDeque::from([a]);
    while let Some(n) = queue.pop_front() {
        for &l in &node_links[n] {
            let Some(m) = links[l].other(n) else { continue };
            if m == b {
                return true;
            }
            if nodes[m].is_router() && !seen[m] {
                seen[m] = true;
                queue.push_back(m);
            }
        }
    }
    false
}

/// Automatic /24 subnets: `10.0.1.0/24` to `10.255.255.0/24`.
const AUTO_SUBNETS: u32 = 0xffff;

/// The `n`-th automatic subnet (1-based): `10.0.<n>.0/24` up to 255, then
/// `10.<n / 256>.<n % 256>.0/24`.
fn auto_subnet(n: u32) -> Prefix {
    Prefix::truncating(Ipv4Addr::from(0x0a00_0000 | (n << 8)), 24)
}

/// The explicitly addressed subnets (which never overlap each other), for overlap
/// checks without comparing every pair.
#[derive(Default)]
struct Subnets {
    /// Network address → (subnet, link).
    by_addr: BTreeMap<u32, (Prefix, usize)>,
    /// Prefix lengths in use.
    lens: BTreeSet<u8>,
}

impl Subnets {
    fn insert(&mut self, p: Prefix, link: usize) {
        self.by_addr.insert(p.network(), (p, link));
        self.lens.insert(p.len);
    }

    /// The subnet of the first link (in file order) that overlaps `p`. A subnet
    /// overlaps `p` if its network address lies in `p` or if it contains `p`'s.
    fn first_overlap(&self, p: Prefix) -> Option<(Prefix, usize)> {
        let start = p.network();
        let end = start | !p.mask();
        let inside = self.by_addr.range(start..=end).map(|(_, &v)| v);
        let around = self
            .lens
            .range(..p.len)
            .filter_map(|&len| self.by_addr.get(&Prefix::truncating(p.addr, len).network()))
            .copied()
            .filter(|&(q, _)| overlaps(p, q));
        inside.chain(around).min_by_key(|&(_, j)| j)
    }
}

#[cfg(test)]
#[path = "scenario_tests.rs"]
pub(crate) mod tests;
