//! The node file of `lockstep node --config FILE.toml`: a `[node]` table, exactly the
//! serde form of [`NodeConfig`] (what the sans-IO node validates), and a `[live]`
//! table, [`LiveConfig`]: how this process runs it (clock, wait strategy, CPU, batch
//! size, the sender's flows, the receiver's socket).
//!
//! ```toml
//! [node]
//! name = "r1"
//! id = 1
//! role = "core"            # sender | edge | core | receiver
//! mode = "tdp"             # tdp | fifo
//! [node.frame]
//! tf = "1ms"
//! k = 4
//! [[node.ports]]
//! id = 1
//! ifname = "r1a"
//! mac = "02:00:00:00:01:01"
//! addr = "10.0.1.1"
//! prefix_len = 24
//! rate_bps = 1000000000
//! d = 1
//! # ... more ports, routes, neighbours, flows (see lockstep_core::tdp::config)
//!
//! [live]
//! strategy = "hybrid"      # sleep | hybrid | spin
//! clock = "tai"            # tai | realtime | monotonic
//! batch = 32
//! ```
//!
//! Every error names the file, the line and the field: syntax and type errors come
//! with `toml`'s span, which is mapped back to the key path it falls in; the node's
//! own validation names a field path (`flows[2].rows[0].size`) that is looked up in
//! the parsed document to find its line.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddrV4;
use std::ops::Range;
use std::path::{Path, PathBuf};

use lockstep_core::sched::WaitStrategy;
use lockstep_core::tdp::config::{NodeConfig, Role};
use lockstep_core::tdp::node::Node;
use lockstep_core::wire::{min_total_len, HEADER_LEN};
use lockstep_core::{ClockId, Duration};
use serde::{Deserialize, Serialize};
use toml::de::{DeTable, DeValue};

/// Most frames one batch moves (the AF_PACKET layer's limit).
pub const MAX_BATCH: usize = lockstep_core::net::IO_BATCH_MAX;
/// Hop records a sender leaves room for, so routers can record their passage.
pub const HOP_ROOM: usize = 4;
/// Largest UDP payload over IPv4.
const MAX_UDP_PAYLOAD: u32 = 65_507;

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeFile {
    pub node: NodeConfig,
    #[serde(default)]
    pub live: LiveConfig,
}

/// How this process runs the node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveConfig {
    /// How to wait for frame starts (routers: how to wait between packets too).
    #[serde(default = "default_strategy")]
    pub strategy: WaitStrategy,
    /// Clock of the common time reference.
    #[serde(default)]
    pub clock: ClockId,
    /// Starting spin margin of the hybrid strategy (it then adapts).
    #[serde(
        default,
        with = "opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub margin: Option<Duration>,
    /// Keep the hybrid margin where it starts instead of adapting it (on a host with
    /// more busy nodes than CPUs an adaptive margin can grow to most of a frame of
    /// spinning).
    #[serde(default)]
    pub fixed_margin: bool,
    /// Pin the node's thread to this CPU (routers run by one process over several
    /// threads, `lockstep node --threads N`: thread i takes the i-th online CPU
    /// counting from this one, wrapping round; every file must give the same).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// SCHED_FIFO priority (1..99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    /// Hold `/dev/cpu_dma_latency` at 0 while the node runs (the CPUs stay out of deep
    /// idle states, as cyclictest does by default). Default: when `priority` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dma_latency_zero: Option<bool>,
    /// Frames per recvmmsg/sendmmsg (routers) and datagrams per recvmmsg (receiver).
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Routers: after a wake-up that found frames, sleep this long before taking
    /// frames again instead of waking for each arrival (the way a NIC coalesces its
    /// interrupts). Fewer wake-ups per frame under load; a frame can wait up to this
    /// long more in the router. Not within this long of a frame start, where the
    /// router takes each arrival at once. Absent or zero: off.
    #[serde(
        default,
        with = "opt_duration",
        skip_serializing_if = "Option::is_none"
    )]
    pub coalesce: Option<Duration>,
    /// Sender: the flows it sends (packets per frame come from the flow's rows).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<LiveFlow>,
    /// Receiver: where it listens (one socket; flows told apart by the probe's flow id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<SocketAddrV4>,
    /// Receiver: write every packet to `DIR/<name>-packets.csv`.
    #[serde(default)]
    pub samples: bool,
    /// Sender: put the frame mark in DSCP. Default: in TDP mode. Set false when the
    /// first hop is an edge router, which marks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mark: Option<bool>,
    /// Routers and senders: software TX timestamps (per-hop `L_Tx`, `*-tx.csv`).
    #[serde(default = "yes")]
    pub tx_timestamps: bool,
    /// Routers: hand frames straight to the driver (`PACKET_QDISC_BYPASS`); skips any
    /// `tc` shaping on the interface.
    #[serde(default)]
    pub qdisc_bypass: bool,
    /// Names of node ids (`"7" = "R1"`), used to name the receiver's latency
    /// components (`link R1→R2`, `R1 residence`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub names: BTreeMap<String, String>,
    /// How the node moves its packets ([`NodeIo`]): a sender or receiver through the
    /// kernel's UDP stack (`udp`, the default) or as whole frames through a frame
    /// port (`packet`, `ring`, `ring-v2`, `xdp`); a router through a frame port
    /// (default `packet`). `lockstep node --io` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<NodeIo>,
    /// Routers and senders: open the sockets in this network namespace (`ip netns`
    /// name) instead of the process's own — what lets one process run the routers
    /// and senders of several namespaces (`lockstep node --config A --config B`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns: Option<String>,
}

impl Default for LiveConfig {
    fn default() -> Self {
        LiveConfig {
            strategy: default_strategy(),
            clock: ClockId::default(),
            margin: None,
            fixed_margin: false,
            cpu: None,
            priority: None,
            dma_latency_zero: None,
            batch: default_batch(),
            coalesce: None,
            flows: Vec::new(),
            bind: None,
            samples: false,
            mark: None,
            tx_timestamps: true,
            qdisc_bypass: false,
            names: BTreeMap::new(),
            io: None,
            netns: None,
        }
    }
}

impl LiveConfig {
    /// The first field where `other` runs differently from `self` among those that
    /// routers sharing one thread must agree on (`live.clock`, `live.strategy`, …);
    /// `None` when they agree.
    pub fn thread_difference(&self, other: &LiveConfig) -> Option<&'static str> {
        [
            ("live.clock", self.clock == other.clock),
            ("live.strategy", self.strategy == other.strategy),
            ("live.priority", self.priority == other.priority),
            ("live.cpu", self.cpu == other.cpu),
            ("live.coalesce", self.coalesce == other.coalesce),
        ]
        .into_iter()
        .find(|&(_, same)| !same)
        .map(|(field, _)| field)
    }
}

/// How a node moves its packets between the kernel and the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeIo {
    /// The kernel's UDP stack: a UDP socket (senders and receivers only).
    Udp,
    /// Whole frames, `recvmmsg`/`sendmmsg` on a plain `AF_PACKET` socket.
    Packet,
    /// Whole frames, a `TPACKET_V3` receive ring of blocks.
    Ring,
    /// Whole frames, a `TPACKET_V2` receive ring of frame slots.
    RingV2,
    /// Whole frames, an `AF_XDP` socket fed by an XDP program.
    Xdp,
}

impl NodeIo {
    pub const NAMES: &'static [&'static str] = &["udp", "packet", "ring", "ring-v2", "xdp"];

    pub fn name(self) -> &'static str {
        match self {
            NodeIo::Udp => "udp",
            NodeIo::Packet => "packet",
            NodeIo::Ring => "ring",
            NodeIo::RingV2 => "ring-v2",
            NodeIo::Xdp => "xdp",
        }
    }

    pub fn parse(s: &str) -> Option<NodeIo> {
        NodeIo::NAMES.iter().position(|n| *n == s).and_then(|i| {
            [
                NodeIo::Udp,
                NodeIo::Packet,
                NodeIo::Ring,
                NodeIo::RingV2,
                NodeIo::Xdp,
            ]
            .get(i)
            .copied()
        })
    }

    /// The default of a role: the kernel's UDP stack for a sender or receiver, a
    /// plain packet socket for a router.
    pub fn default_for(role: Role) -> NodeIo {
        match role {
            Role::Sender | Role::Receiver => NodeIo::Udp,
            Role::Edge | Role::Core => NodeIo::Packet,
        }
    }

    /// Whether a node of `role` can move its packets this way; else why not.
    pub fn check_role(self, role: Role) -> Result<(), String> {
        if self == NodeIo::Udp && matches!(role, Role::Edge | Role::Core) {
            return Err(format!(
                "\"udp\" is the kernel's UDP stack, for a sender or receiver; a router ({}) moves frames: one of packet, ring, ring-v2, xdp",
                role_name(role)
            ));
        }
        Ok(())
    }
}

impl fmt::Display for NodeIo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One flow a sender sends.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveFlow {
    /// The flow id of `[[node.flows]]` whose rows say when and how many.
    pub flow: u32,
    /// Destination; defaults to the `dst` of the node's flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst: Option<SocketAddrV4>,
    /// Source UDP port (0: any).
    #[serde(default)]
    pub src_port: u16,
    /// UDP payload bytes (a probe packet: at least the 64-byte header; 192 leaves
    /// room for 4 hop records).
    pub size: u32,
    /// Stop this flow after this many packets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
}

fn default_strategy() -> WaitStrategy {
    WaitStrategy::Hybrid
}

fn default_batch() -> usize {
    32
}

fn yes() -> bool {
    true
}

mod opt_duration {
    use lockstep_core::Duration;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.collect_str(d),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        #[derive(Deserialize)]
        struct W(#[serde(with = "lockstep_core::tdp::config::human_duration")] Duration);
        Ok(Some(W::deserialize(d)?.0))
    }
}

/// A node file that cannot be used: where and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub file: PathBuf,
    /// 1-based line and column, when known.
    pub line: Option<usize>,
    pub column: Option<usize>,
    /// Dotted key path (`node.frame.k`, `live.flows[0].size`), when known.
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ", line {line}")?;
            if let Some(col) = self.column {
                write!(f, ", column {col}")?;
            }
        }
        if let Some(field) = &self.field {
            write!(f, ", field {field}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Reads and checks a node file.
pub fn load(path: &Path) -> Result<NodeFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.to_path_buf(),
        line: None,
        column: None,
        field: None,
        message: format!("cannot read it: {e}"),
    })?;
    parse(path, &text)
}

/// Like [`load`], with `merge` applied to the file before it is checked
/// (`--controller`: the controller's scheduling table replaces the rows). An error
/// of `merge` is reported as one of `node.flows`.
pub fn load_merged(
    path: &Path,
    merge: impl FnOnce(&mut NodeFile) -> Result<(), String>,
) -> Result<NodeFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        file: path.to_path_buf(),
        line: None,
        column: None,
        field: None,
        message: format!("cannot read it: {e}"),
    })?;
    parse_merged(path, &text, merge)
}

/// Parses and checks the text of a node file (`path` only names it in errors).
pub fn parse(path: &Path, text: &str) -> Result<NodeFile, ConfigError> {
    parse_merged(path, text, |_| Ok(()))
}

fn parse_merged(
    path: &Path,
    text: &str,
    merge: impl FnOnce(&mut NodeFile) -> Result<(), String>,
) -> Result<NodeFile, ConfigError> {
    let located = |span: Option<Range<usize>>, field: Option<String>, message: String| {
        let (line, column) = match &span {
            Some(s) => {
                let (l, c) = line_col(text, s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        ConfigError {
            file: path.to_path_buf(),
            line,
            column,
            field,
            message,
        }
    };
    let doc = DeTable::parse(text).map_err(|e| located(e.span(), None, e.message().to_string()))?;
    let file: NodeFile = toml::from_str(text).map_err(|e| {
        let field = e
            .span()
            .and_then(|s| path_at(doc.get_ref(), s.start))
            .filter(|p| !p.is_empty());
        located(e.span(), field, e.message().to_string())
    })?;
    let mut file = file;
    merge(&mut file).map_err(|m| located(None, Some("node.flows".into()), m))?;
    // Fields named by a path: find where they are written (or the nearest enclosing
    // part that is).
    let at_field = |field: String, message: String| {
        let span = span_of(doc.get_ref(), &field);
        located(span, Some(field), message)
    };
    if let Err(e) = Node::new(file.node.clone()) {
        return Err(at_field(format!("node.{}", e.field), e.message));
    }
    if let Err((field, message)) = check_live(&file) {
        return Err(at_field(field, message));
    }
    Ok(file)
}

/// Why only a router coalesces.
pub const NOT_ROUTER: &str = "only a router (edge or core) takes frames in batches to coalesce";

/// The longest a router may hold off taking frames after a busy wake-up.
pub const MAX_COALESCE: Duration = Duration(1_000_000);

/// A `coalesce` lies in 0..=[`MAX_COALESCE`], and only a router (`role`) sets one
/// above zero; else what is wrong.
pub fn check_coalesce(c: Duration, role: Role) -> Result<(), String> {
    if c < Duration::ZERO || c > MAX_COALESCE {
        return Err(format!("{c} is outside 0..={MAX_COALESCE}"));
    }
    if c > Duration::ZERO && !matches!(role, Role::Edge | Role::Core) {
        return Err(NOT_ROUTER.to_string());
    }
    Ok(())
}

/// Checks of `[live]` against `[node]`: a field path and a message.
fn check_live(file: &NodeFile) -> Result<(), (String, String)> {
    let (node, live) = (&file.node, &file.live);
    let err = |f: &str, m: String| Err((format!("live.{f}"), m));
    if live.batch == 0 || live.batch > MAX_BATCH {
        return err(
            "batch",
            format!("{} is outside 1..={MAX_BATCH}", live.batch),
        );
    }
    if let Some(Err(m)) = live.coalesce.map(|c| check_coalesce(c, node.role)) {
        return err("coalesce", m);
    }
    if let Some(Err(m)) = live.io.map(|io| io.check_role(node.role)) {
        return err("io", m);
    }
    if let Some(p) = live.priority {
        if !(1..=99).contains(&p) {
            return err(
                "priority",
                format!("{p} is not a real-time priority (1..=99)"),
            );
        }
    }
    if let Some(m) = live.margin {
        if m.is_negative() {
            return err("margin", format!("{m} is negative"));
        }
        if let Err(message) = lockstep_core::limits::delay(m) {
            return err("margin", message);
        }
    }
    if let Some(cpu) = live.cpu {
        if let Err(message) = lockstep_core::limits::cpu(cpu as u64) {
            return err("cpu", message);
        }
    }
    if let Some(ns) = &live.netns {
        if !lockstep_core::net::netns_name_ok(ns) {
            return err(
                "netns",
                format!("invalid network namespace name \"{ns}\": use 1 to 64 of A-Z a-z 0-9 . _ -, not starting with '.'"),
            );
        }
        if node.role == Role::Receiver {
            return err(
                "netns",
                format!(
                    "only a router or a sender opens its sockets in another namespace; this node is a {} (run it with `ip netns exec`)",
                    role_name(node.role)
                ),
            );
        }
    }
    if node.role != Role::Sender && !live.flows.is_empty() {
        return err(
            "flows",
            format!(
                "only a sender sends flows; this node is a {}",
                role_name(node.role)
            ),
        );
    }
    match node.role {
        Role::Sender => check_sender(file),
        Role::Receiver => {
            if live.bind.is_none() {
                return err(
                    "bind",
                    "a receiver needs the address to listen on (bind = \"10.0.2.2:7000\")".into(),
                );
            }
            Ok(())
        }
        Role::Edge | Role::Core => Ok(()),
    }
}

fn check_sender(file: &NodeFile) -> Result<(), (String, String)> {
    let (node, live) = (&file.node, &file.live);
    if live.flows.is_empty() {
        return Err((
            "live.flows".into(),
            "a sender needs at least one [[live.flows]] entry".into(),
        ));
    }
    for (i, lf) in live.flows.iter().enumerate() {
        let field = |f: &str| format!("live.flows[{i}].{f}");
        if live.flows[..i].iter().any(|o| o.flow == lf.flow) {
            return Err((field("flow"), format!("flow {} is listed twice", lf.flow)));
        }
        let Some(nf) = node.flows.iter().find(|f| f.id == lf.flow) else {
            return Err((
                field("flow"),
                format!("no [[node.flows]] entry with id = {}", lf.flow),
            ));
        };
        if nf.rows.is_empty() {
            return Err((
                field("flow"),
                format!(
                    "flow {} has no rows in [node]: it would never send",
                    lf.flow
                ),
            ));
        }
        if let Some(n) = lf.count {
            if let Err(message) = lockstep_core::limits::count(n) {
                return Err((field("count"), message));
            }
        }
        if lf.dst.or(nf.dst).is_none() {
            return Err((
                field("dst"),
                format!("no destination for flow {} (here or in [node])", lf.flow),
            ));
        }
        if (lf.size as usize) < HEADER_LEN || lf.size > MAX_UDP_PAYLOAD {
            return Err((
                field("size"),
                format!(
                    "{} B is not a probe payload size ({HEADER_LEN} to {MAX_UDP_PAYLOAD} B; {} B leaves room for {HOP_ROOM} hop records)",
                    lf.size,
                    min_total_len(HOP_ROOM)
                ),
            ));
        }
        let ip_len = lf.size + 28;
        if let Some(row) = nf.rows.iter().find(|r| r.size < ip_len) {
            return Err((
                field("size"),
                format!(
                    "{} B of payload make {ip_len}-byte IP packets, larger than the {}-byte packets reserved in slot {} of flow {}",
                    lf.size, row.size, row.slot, lf.flow
                ),
            ));
        }
    }
    if let Some(nf) = node
        .flows
        .iter()
        .find(|f| !f.rows.is_empty() && !live.flows.iter().any(|l| l.flow == f.id))
    {
        return Err((
            "live.flows".into(),
            format!(
                "flow {} has rows in [node] but no [[live.flows]] entry (its destination, size)",
                nf.id
            ),
        ));
    }
    Ok(())
}

pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Sender => "sender",
        Role::Edge => "edge",
        Role::Core => "core",
        Role::Receiver => "receiver",
    }
}

/// 1-based line and column (in characters) of byte `offset` of `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before.get(line_start..).map_or(0, |s| s.chars().count()) + 1;
    (line, column)
}

/// The key path (`node.frame.k`, `live.flows[0].size`) of the innermost key or value
/// that contains byte `pos`. Every entry is searched, not only those whose span
/// contains `pos`: a table opened by a `[header]` spans just its header.
fn path_at(table: &DeTable<'_>, pos: usize) -> Option<String> {
    fn in_value(v: &toml::Spanned<DeValue<'_>>, pos: usize) -> Option<String> {
        match v.get_ref() {
            DeValue::Table(t) => in_table(t, pos),
            DeValue::Array(a) => a.iter().enumerate().find_map(|(i, e)| {
                in_value(e, pos).map(|rest| match rest.is_empty() {
                    true => format!("[{i}]"),
                    false => format!("[{i}].{rest}"),
                })
            }),
            _ => v.span().contains(&pos).then(String::new),
        }
    }
    fn in_table(t: &DeTable<'_>, pos: usize) -> Option<String> {
        t.iter().find_map(|(k, v)| {
            if k.span().contains(&pos) {
                return Some(k.get_ref().to_string());
            }
            let rest = in_value(v, pos)?;
            Some(match rest {
                r if r.is_empty() => k.get_ref().to_string(),
                r if r.starts_with('[') => format!("{}{r}", k.get_ref()),
                r => format!("{}.{r}", k.get_ref()),
            })
        })
    }
    in_table(table, pos)
}

/// One step of a field path.
#[derive(Debug, PartialEq, Eq)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `flows[2].rows[0].size` → `flows`, 2, `rows`, 0, `size`.
fn steps(path: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !key.is_empty() {
            out.push(Step::Key(key));
        }
        while let Some(inner) = rest.strip_prefix('[') {
            let Some(end) = inner.find(']') else { break };
            if let Ok(i) = inner[..end].parse() {
                out.push(Step::Index(i));
            }
            rest = &inner[end + 1..];
        }
    }
    out
}

/// Where the field `path` is written: the span of its key (or array element), or of
/// the deepest part of the path the file contains.
fn span_of(table: &DeTable<'_>, path: &str) -> Option<Range<usize>> {
    let mut span = None;
    let mut table = Some(table);
    let mut array: Option<&[toml::Spanned<DeValue<'_>>]> = None;
    for step in steps(path) {
        let value = match (step, table, array) {
            (Step::Key(k), Some(t), _) => match t.get(k) {
                Some(v) => {
                    let key_span = t.get_key_value(k).map(|(k, _)| k.span());
                    span = key_span.filter(|s| !s.is_empty()).or(Some(v.span()));
                    v
                }
                None => break,
            },
            (Step::Index(i), _, Some(a)) => match a.get(i) {
                Some(v) => {
                    span = Some(v.span());
                    v
                }
                None => break,
            },
            _ => break,
        };
        table = None;
        array = None;
        match value.get_ref() {
            DeValue::Table(t) => table = Some(t),
            DeValue::Array(a) => array = Some(a),
            _ => {}
        }
    }
    span
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTER: &str = r#"
[node]
name = "r1"
id = 1
role = "core"

[node.frame]
tf = "1ms"
k = 4

[[node.ports]]
id = 1
ifname = "r1a"
mac = "02:00:00:00:01:01"
addr = "10.0.1.1"
prefix_len = 24
rate_bps = 1000000000
neighbour_addr = "10.0.1.2"
neighbour_mac = "02:00:00:00:01:02"
d = 1

[[node.ports]]
id = 2
ifname = "r1b"
mac = "02:00:00:00:02:01"
addr = "10.0.2.1"
prefix_len = 24
rate_bps = 1000000000
neighbour_addr = "10.0.2.2"
neighbour_mac = "02:00:00:00:02:02"

[live]
strategy = "spin"
batch = 16
"#;

    fn p(text: &str) -> Result<NodeFile, ConfigError> {
        parse(Path::new("node.toml"), text)
    }

    #[test]
    fn a_router_file_reads() {
        let f = p(ROUTER).unwrap();
        assert_eq!(f.node.name, "r1");
        assert_eq!(f.node.ports.len(), 2);
        assert_eq!(f.live.strategy, WaitStrategy::Spin);
        assert_eq!(f.live.batch, 16);
        assert_eq!(f.live.clock, ClockId::Tai);
        assert!(f.live.tx_timestamps);
        // without [live]: the defaults
        let cut = ROUTER.split("[live]").next().unwrap();
        assert_eq!(p(cut).unwrap().live, LiveConfig::default());
        assert_eq!(f.live.dma_latency_zero, None);
        let off = p(&format!("{ROUTER}dma_latency_zero = false\n")).unwrap();
        assert_eq!(off.live.dma_latency_zero, Some(false));
    }

    #[test]
    fn a_typo_names_file_line_and_field() {
        let text = ROUTER.replace("strategy = \"spin\"", "stategy = \"spin\"");
        let e = p(&text).unwrap_err();
        assert_eq!(e.line, Some(33));
        assert_eq!(e.column, Some(1));
        assert_eq!(e.field.as_deref(), Some("live.stategy"));
        assert!(
            e.to_string().starts_with(
                "node.toml, line 33, column 1, field live.stategy: unknown field `stategy`"
            ),
            "{e}"
        );
        // in an array of tables
        let text = ROUTER.replace(
            "rate_bps = 1000000000\nneighbour_addr = \"10.0.2.2\"",
            "rate_bps = 1000000000\nneighbour_adr = \"10.0.2.2\"",
        );
        let e = p(&text).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("node.ports[1].neighbour_adr"));
        assert_eq!(e.line, Some(29));
    }

    #[test]
    fn a_wrong_type_names_the_field() {
        let e = p(&ROUTER.replace("k = 4", "k = \"four\"")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("node.frame.k"));
        assert_eq!(e.line, Some(9));
        let e = p(&ROUTER.replace("tf = \"1ms\"", "tf = \"1 fortnight\"")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("node.frame.tf"));
        assert_eq!(e.line, Some(8));
    }

    #[test]
    fn the_nodes_own_checks_name_line_and_field() {
        let e = p(&ROUTER.replace("k = 4", "k = 0")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("node.frame.k"));
        assert_eq!(e.line, Some(9));
        assert_eq!(e.message, "must be at least 1");
        let e = p(&ROUTER.replace("d = 1", "d = 9")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("node.ports[0].d"));
        assert_eq!(e.line, Some(20));
        // a missing field: the enclosing table's line
        let e = p(&ROUTER.replace("k = 4\n", "")).unwrap_err();
        assert!(e.message.contains("missing field `k`"), "{e}");
        assert_eq!(e.line, Some(7));
    }

    #[test]
    fn a_router_coalesces_up_to_a_millisecond() {
        let f = p(&ROUTER.replace("batch = 16", "batch = 16\ncoalesce = \"20us\"")).unwrap();
        assert_eq!(f.live.coalesce, Some(Duration::from_micros(20)));
        assert_eq!(p(ROUTER).unwrap().live.coalesce, None);
        let e = p(&ROUTER.replace("batch = 16", "batch = 16\ncoalesce = \"2ms\"")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.coalesce"));
        assert_eq!(e.line, Some(35));
        assert_eq!(e.message, "2ms is outside 0..=1ms");
        let e = p(&ROUTER.replace("batch = 16", "batch = 16\ncoalesce = \"-1us\"")).unwrap_err();
        assert_eq!(e.message, "-1us is outside 0..=1ms");
        let edge = ROUTER.replace("role = \"core\"", "role = \"edge\"");
        let f = p(&edge.replace("batch = 16", "batch = 16\ncoalesce = \"20us\"")).unwrap();
        assert_eq!(f.live.coalesce, Some(Duration::from_micros(20)));
    }

    #[test]
    fn syntax_errors_have_a_line() {
        let e = p(&ROUTER.replace("batch = 16", "batch = ")).unwrap_err();
        assert_eq!(e.line, Some(34));
    }

    #[test]
    fn live_checks() {
        let e = p(&ROUTER.replace("batch = 16", "batch = 65")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.batch"));
        assert_eq!(e.line, Some(34));
        let e = p(&ROUTER.replace("batch = 16", "batch = 16\npriority = 100")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.priority"));
        let recv = ROUTER
            .replace("role = \"core\"", "role = \"receiver\"")
            .replace("\nd = 1\n", "\n");
        let e = p(&recv).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.bind"));
        assert!(p(&recv.replace("batch = 16", "batch = 16\nbind = \"10.0.2.2:7000\"")).is_ok());
    }

    #[test]
    fn io_is_checked_against_the_role() {
        let recv = ROUTER
            .replace("role = \"core\"", "role = \"receiver\"")
            .replace("\nd = 1\n", "\n")
            .replace("batch = 16", "batch = 16\nbind = \"10.0.2.2:7000\"");
        assert_eq!(p(&recv).unwrap().live.io, None);
        for (text, io) in [
            ("udp", NodeIo::Udp),
            ("xdp", NodeIo::Xdp),
            ("ring-v2", NodeIo::RingV2),
        ] {
            let f =
                p(&recv.replace("batch = 16", &format!("batch = 16\nio = \"{text}\""))).unwrap();
            assert_eq!(f.live.io, Some(io));
            assert_eq!(NodeIo::parse(text), Some(io));
            assert_eq!(io.name(), text);
        }
        let f = p(&ROUTER.replace("batch = 16", "batch = 16\nio = \"xdp\"")).unwrap();
        assert_eq!(f.live.io, Some(NodeIo::Xdp));
        // a router does not use the kernel's UDP stack
        let e = p(&ROUTER.replace("batch = 16", "batch = 16\nio = \"udp\"")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.io"));
        assert_eq!(e.line, Some(35));
        assert!(e.message.contains("a router (core) moves frames"), "{e}");
        // an unknown mode names the field and what was expected
        let e = p(&recv.replace("batch = 16", "batch = 16\nio = \"dpdk\"")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.io"));
        assert!(e.message.contains("expected one of `udp`, `packet`"), "{e}");
        assert_eq!(NodeIo::parse("dpdk"), None);
        assert_eq!(NodeIo::default_for(Role::Sender), NodeIo::Udp);
        assert_eq!(NodeIo::default_for(Role::Core), NodeIo::Packet);
    }

    const SENDER: &str = r#"
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

    #[test]
    fn sender_checks() {
        let f = p(SENDER).unwrap();
        assert_eq!(f.live.flows[0].dst, Some("10.0.2.2:7000".parse().unwrap()));
        assert_eq!(f.live.flows[0].src_port, 0);
        let e = p(&SENDER.replace("size = 200", "size = 300")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.flows[0].size"));
        assert_eq!(e.line, Some(25));
        assert!(e.message.contains("328-byte IP packets"), "{e}");
        let e = p(&SENDER.replace("size = 200", "size = 20")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.flows[0].size"));
        let e = p(&SENDER.replace("flow = 5", "flow = 6")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.flows[0].flow"));
        let e = p(&SENDER.replace("dst = \"10.0.2.2:7000\"\n", "")).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.flows[0].dst"));
        let e = p(SENDER.split("[[live.flows]]").next().unwrap()).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("live.flows"));
    }

    #[test]
    fn every_number_has_a_limit() {
        let msg = |text: &str| p(text).unwrap_err().to_string();
        assert_eq!(
            msg(&ROUTER.replace("k = 4", "k = 100001")),
            "node.toml, line 9, column 1, field node.frame.k: k = 100001 is above the limit of 100000 frames per cycle"
        );
        assert_eq!(
            msg(&ROUTER.replace("tf = \"1ms\"", "tf = \"500ns\"")),
            "node.toml, line 8, column 1, field node.frame.tf: a time-frame of 500ns is below the limit of 1us"
        );
        assert_eq!(
            msg(&ROUTER.replacen("rate_bps = 1000000000", "rate_bps = 1000000000001", 1)),
            "node.toml, line 17, column 1, field node.ports[0].rate_bps: 1000000000001 bit/s is above the limit of 1 Tbit/s"
        );
        assert_eq!(
            msg(&ROUTER.replace("[live]", "[node.best_effort]\nqueue = 1000001\n\n[live]")),
            "node.toml, line 33, column 1, field node.best_effort.queue: 1000001 packets is above the limit of 1000000"
        );
        assert_eq!(
            msg(&ROUTER.replace("batch = 16", "batch = 16\nmargin = \"2s\"")),
            "node.toml, line 35, column 1, field live.margin: 2s is above the limit of 1s"
        );
        assert_eq!(
            msg(&ROUTER.replace("batch = 16", "batch = 16\ncpu = 65537")),
            "node.toml, line 35, column 1, field live.cpu: CPU 65537 is above the limit of 65536"
        );
        assert_eq!(
            msg(&SENDER.replace("size = 200", "size = 200\ncount = 1000000000001")),
            "node.toml, line 26, column 1, field live.flows[0].count: 1000000000001 is above the limit of 1000000000000"
        );
    }

    #[test]
    fn paths() {
        assert_eq!(
            steps("node.flows[2].rows[0].size"),
            vec![
                Step::Key("node"),
                Step::Key("flows"),
                Step::Index(2),
                Step::Key("rows"),
                Step::Index(0),
                Step::Key("size")
            ]
        );
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("", 9), (1, 1));
    }
}
