//! The network: rate-latency servers and shaped flows, and the checks that make the
//! analyses well defined (positive rates, bursts not below the packet size, known
//! servers, stability, no cycles).

use std::collections::{HashMap, HashSet};
use std::fmt;

use lockstep_core::limits;

use crate::curve::Curve;
use crate::q::Q;
use crate::units::{Shown, Unit};

/// How a server shares its rate among the flows crossing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Multiplexing {
    /// First in, first out: every bit waits for the bits that arrived before it.
    Fifo,
    /// Any order (blind multiplexing): a flow may be served last. Needs a strict
    /// service curve.
    Arbitrary,
}

impl Multiplexing {
    pub fn name(self) -> &'static str {
        match self {
            Multiplexing::Fifo => "fifo",
            Multiplexing::Arbitrary => "arbitrary",
        }
    }
}

/// A server (a switch output port, a link): rate-latency service `R (t − T)+`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    /// `R`, bit/s.
    pub rate: Q,
    /// `T`, seconds.
    pub latency: Q,
    /// Buffer available to this server's queue, bits.
    pub buffer: Option<Q>,
    pub multiplexing: Multiplexing,
    /// The server's output shaper, when it has one: everything it sends on, all its
    /// flows together, is at most `rate t + burst` in any window of length `t`.
    pub shaper: Option<Shaper>,
}

/// An output shaper `σ(t) = R t + M` (panco's shaping curve is `R t`, `M` = 0): a
/// bound on the aggregate leaving a server, hence on any part of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shaper {
    /// `R`, bit/s.
    pub rate: Q,
    /// `M`, bits (0 allowed).
    pub burst: Q,
}

impl Shaper {
    /// `R t + M` as an arrival curve.
    pub fn curve(&self) -> Curve {
        Curve::token_bucket(self.rate.clone(), self.burst.clone())
    }
}

/// A shaped flow: T-SPEC `(C, M, r, b)` along a path of servers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    pub name: String,
    /// Server names, in the order the flow crosses them.
    pub path: Vec<String>,
    /// Sustained rate `r`, bit/s.
    pub rate: Q,
    /// Bucket `b`, bits.
    pub burst: Q,
    /// Peak (line) rate `C`, bit/s.
    pub peak: Option<Q>,
    /// Largest packet `M`, bits.
    pub max_packet: Option<Q>,
    /// Required end-to-end delay bound, seconds.
    pub deadline: Option<Q>,
}

impl Flow {
    /// The flow's arrival curve at its first server: `min(C t + M, r t + b)` with a
    /// peak rate, `r t + b` without.
    pub fn arrival_curve(&self) -> Curve {
        match (&self.peak, &self.max_packet) {
            (Some(c), Some(m)) => {
                Curve::tspec(c.clone(), m.clone(), self.rate.clone(), self.burst.clone())
            }
            _ => Curve::token_bucket(self.rate.clone(), self.burst.clone()),
        }
    }
}

/// A whole network.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Network {
    pub servers: Vec<Server>,
    pub flows: Vec<Flow>,
}

/// The place of a value in the input: `server[1] "s1".rate`,
/// `flow[2] "f2".path[1]`, `flow[0]` (the whole entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// `"server"` or `"flow"`.
    pub table: &'static str,
    /// Position in the file (the admission API names a new flow without one).
    pub index: Option<usize>,
    pub name: Option<String>,
    pub key: Option<String>,
    /// Element of an array value (`path[1]`).
    pub element: Option<usize>,
}

impl Field {
    pub fn new(table: &'static str, index: Option<usize>, name: Option<&str>) -> Field {
        Field {
            table,
            index,
            name: name.filter(|n| !n.is_empty()).map(str::to_string),
            key: None,
            element: None,
        }
    }
    pub fn key(mut self, key: &str) -> Field {
        self.key = Some(key.to_string());
        self
    }
    pub fn element(mut self, i: usize) -> Field {
        self.element = Some(i);
        self
    }
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.table)?;
        if let Some(i) = self.index {
            write!(f, "[{i}]")?;
        }
        if let Some(n) = &self.name {
            write!(f, " \"{n}\"")?;
        }
        if let Some(k) = &self.key {
            write!(f, ".{k}")?;
        }
        if let Some(e) = self.element {
            write!(f, "[{e}]")?;
        }
        Ok(())
    }
}

/// Input that cannot be analysed: which field and why, and where in the file when the
/// network came from one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputError {
    /// The offending field, when one can be named (boxed: errors stay small).
    pub field: Option<Box<Field>>,
    pub message: String,
    /// 1-based line and column in the TOML text.
    pub line: Option<usize>,
    pub column: Option<usize>,
}

impl InputError {
    pub fn at(field: Field, message: impl Into<String>) -> InputError {
        InputError {
            field: Some(Box::new(field)),
            message: message.into(),
            line: None,
            column: None,
        }
    }
    pub fn general(message: impl Into<String>) -> InputError {
        InputError {
            field: None,
            message: message.into(),
            line: None,
            column: None,
        }
    }
}

impl fmt::Display for InputError {
    /// `line 12: flow[2] "f2".path[1]: unknown server "s9"`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(l) = self.line {
            write!(f, "line {l}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for InputError {}

pub(crate) fn rate_text(r: &Q) -> String {
    Shown::new(r, Unit::Mbps).to_string()
}

/// The limits of a network's values (`lockstep_core::limits`): the largest rate, data,
/// packet, latency and deadline, in base units.
fn max_rate() -> Q {
    Q::int(limits::MAX_BIT_RATE_BPS as i64)
}
fn max_data() -> Q {
    Q::int(8 * limits::MAX_DATA_BYTES as i64)
}
fn max_packet() -> Q {
    Q::int(8 * limits::MAX_PACKET_BYTES as i64)
}
fn seconds(d: lockstep_core::Duration) -> Q {
    Q::ratio(i128::from(d.as_nanos()), 1_000_000_000).unwrap_or_default()
}

/// `value` (in `unit`'s base) at most `max`, or the error for `field`.
fn at_most(value: &Q, max: &Q, unit: Unit, limit: &str, field: Field) -> Result<(), InputError> {
    if value > max {
        return Err(InputError::at(
            field,
            format!("{} is above the limit of {limit}", Shown::new(value, unit)),
        ));
    }
    Ok(())
}

/// Checks that a network has at most [`limits::MAX_NETWORK_SERVERS`] servers and
/// [`limits::MAX_NETWORK_FLOWS`] flows.
pub fn check_size(servers: usize, flows: usize) -> Result<(), InputError> {
    if servers > limits::MAX_NETWORK_SERVERS {
        return Err(InputError::at(
            Field::new("server", None, None),
            format!(
                "{servers} servers is above the limit of {}",
                limits::MAX_NETWORK_SERVERS
            ),
        ));
    }
    if flows > limits::MAX_NETWORK_FLOWS {
        return Err(InputError::at(
            Field::new("flow", None, None),
            format!(
                "{flows} flows is above the limit of {}",
                limits::MAX_NETWORK_FLOWS
            ),
        ));
    }
    Ok(())
}

/// The limits of a server's values as a user gives them (a network file, a request):
/// rate at most 1 Tbit/s, latency at most 1 s, buffer at most 1 TB, a shaper's rate
/// at most 1 Tbit/s and its burst at most 1 TB. The analyses themselves take any
/// value.
pub fn check_server_limits(s: &Server, field: &dyn Fn(&str) -> Field) -> Result<(), InputError> {
    let rate_limit = limits::MAX_BIT_RATE_TEXT;
    at_most(&s.rate, &max_rate(), Unit::Mbps, rate_limit, field("rate"))?;
    let latency = seconds(limits::MAX_SERVER_LATENCY);
    at_most(&s.latency, &latency, Unit::Us, "1 s", field("latency"))?;
    if let Some(b) = &s.buffer {
        at_most(b, &max_data(), Unit::Bytes, "1 TB", field("buffer"))?;
    }
    if let Some(sh) = &s.shaper {
        let r = field("shaper.rate");
        at_most(&sh.rate, &max_rate(), Unit::Mbps, rate_limit, r)?;
        at_most(
            &sh.burst,
            &max_data(),
            Unit::Bytes,
            "1 TB",
            field("shaper.burst"),
        )?;
    }
    Ok(())
}

/// The limits of a flow's values as a user gives them: rate and peak at most
/// 1 Tbit/s, burst at most 1 TB, max_packet at most 65535 B, deadline at most 7 days.
pub fn check_flow_limits(f: &Flow, field: &dyn Fn(&str) -> Field) -> Result<(), InputError> {
    let rate_limit = limits::MAX_BIT_RATE_TEXT;
    at_most(&f.rate, &max_rate(), Unit::Mbps, rate_limit, field("rate"))?;
    at_most(&f.burst, &max_data(), Unit::Bytes, "1 TB", field("burst"))?;
    if let Some(c) = &f.peak {
        at_most(c, &max_rate(), Unit::Mbps, rate_limit, field("peak"))?;
    }
    if let Some(m) = &f.max_packet {
        at_most(
            m,
            &max_packet(),
            Unit::Bytes,
            "65535 B",
            field("max_packet"),
        )?;
    }
    if let Some(d) = &f.deadline {
        let week = seconds(limits::MAX_DURATION);
        at_most(
            d,
            &week,
            Unit::Us,
            limits::MAX_DURATION_TEXT,
            field("deadline"),
        )?;
    }
    Ok(())
}

/// [`check_size`], [`check_server_limits`] and [`check_flow_limits`] for a whole
/// network, the errors naming each entry by its place.
pub fn check_limits(net: &Network) -> Result<(), InputError> {
    check_size(net.servers.len(), net.flows.len())?;
    for (i, s) in net.servers.iter().enumerate() {
        check_server_limits(s, &|k| Field::new("server", Some(i), Some(&s.name)).key(k))?;
    }
    for (i, f) in net.flows.iter().enumerate() {
        check_flow_limits(f, &|k| Field::new("flow", Some(i), Some(&f.name)).key(k))?;
    }
    Ok(())
}

/// Checks one server on its own.
pub(crate) fn check_server(s: &Server, field: &dyn Fn(&str) -> Field) -> Result<(), InputError> {
    if s.name.is_empty() {
        return Err(InputError::at(field("name"), "must not be empty"));
    }
    if !s.rate.is_positive() {
        return Err(InputError::at(
            field("rate"),
            format!("must be above 0, got {}", rate_text(&s.rate)),
        ));
    }
    if s.latency.is_negative() {
        return Err(InputError::at(field("latency"), "must not be negative"));
    }
    if let Some(b) = &s.buffer {
        if !b.is_positive() {
            return Err(InputError::at(field("buffer"), "must be above 0"));
        }
    }
    if let Some(sh) = &s.shaper {
        if !sh.rate.is_positive() {
            return Err(InputError::at(
                field("shaper.rate"),
                format!("must be above 0, got {}", rate_text(&sh.rate)),
            ));
        }
        if sh.burst.is_negative() {
            return Err(InputError::at(
                field("shaper.burst"),
                "must not be negative",
            ));
        }
    }
    Ok(())
}

/// Checks one flow on its own and resolves its path to server indices.
pub(crate) fn check_flow(
    f: &Flow,
    servers: &HashMap<String, usize>,
    field: &dyn Fn(&str) -> Field,
) -> Result<Vec<usize>, InputError> {
    check_flow_path(f, servers, field, false)
}

/// [`check_flow`], with paths that visit a server more than once allowed when
/// `loops` (a cyclic network, which only the fixed points of the TFA and the LP
/// analyse).
pub(crate) fn check_flow_path(
    f: &Flow,
    servers: &HashMap<String, usize>,
    field: &dyn Fn(&str) -> Field,
    loops: bool,
) -> Result<Vec<usize>, InputError> {
    if f.name.is_empty() {
        return Err(InputError::at(field("name"), "must not be empty"));
    }
    if f.path.is_empty() {
        return Err(InputError::at(
            field("path"),
            "must name at least one server",
        ));
    }
    let mut path = Vec::with_capacity(f.path.len());
    let mut seen = HashSet::new();
    for (i, s) in f.path.iter().enumerate() {
        let Some(&idx) = servers.get(s) else {
            return Err(InputError::at(
                field("path").element(i),
                format!("unknown server \"{s}\""),
            ));
        };
        if !seen.insert(idx) && !loops {
            return Err(InputError::at(
                field("path").element(i),
                format!("server \"{s}\" appears twice: a path that loops is a cyclic network (out of scope)"),
            ));
        }
        path.push(idx);
    }
    if !f.rate.is_positive() {
        return Err(InputError::at(
            field("rate"),
            format!("must be above 0, got {}", rate_text(&f.rate)),
        ));
    }
    if !f.burst.is_positive() {
        return Err(InputError::at(field("burst"), "must be above 0"));
    }
    if let Some(c) = &f.peak {
        if !c.is_positive() {
            return Err(InputError::at(
                field("peak"),
                format!("must be above 0, got {}", rate_text(c)),
            ));
        }
        if c < &f.rate {
            return Err(InputError::at(
                field("peak"),
                format!(
                    "{} is below the sustained rate {}",
                    rate_text(c),
                    rate_text(&f.rate)
                ),
            ));
        }
        if f.max_packet.is_none() {
            return Err(InputError::at(
                field("max_packet"),
                "required with a peak rate (the M of the T-SPEC (C, M, r, b))",
            ));
        }
    }
    if let Some(m) = &f.max_packet {
        if !m.is_positive() {
            return Err(InputError::at(field("max_packet"), "must be above 0"));
        }
        if &f.burst < m {
            return Err(InputError::at(
                field("burst"),
                format!(
                    "{} is below max_packet {}: the bucket must hold a whole packet",
                    Shown::new(&f.burst, Unit::Bytes),
                    Shown::new(m, Unit::Bytes)
                ),
            ));
        }
    }
    if let Some(d) = &f.deadline {
        if !d.is_positive() {
            return Err(InputError::at(field("deadline"), "must be above 0"));
        }
    }
    Ok(path)
}

/// The message for a server whose flows need more than its rate.
pub(crate) fn overload_message(server: &Server, load: &Q, flows: &[(&str, &Q)]) -> String {
    let list: Vec<String> = flows
        .iter()
        .map(|(n, r)| format!("{n} {}", rate_text(r)))
        .collect();
    format!(
        "the flows through \"{}\" need {} in sum, more than its rate {} (unstable): {}",
        server.name,
        rate_text(load),
        rate_text(&server.rate),
        list.join(", ")
    )
}

/// `s1 → s2 → s1 (out of scope)`.
pub(crate) fn cycle_message(names: &[String]) -> String {
    format!("cyclic network: {} (out of scope)", names.join(" → "))
}

/// Checks every server on its own and that names are unique; the servers by name.
pub(crate) fn check_servers(servers: &[Server]) -> Result<HashMap<String, usize>, InputError> {
    let mut index = HashMap::new();
    for (i, s) in servers.iter().enumerate() {
        let field = |k: &str| Field::new("server", Some(i), Some(&s.name)).key(k);
        check_server(s, &field)?;
        if index.insert(s.name.clone(), i).is_some() {
            return Err(InputError::at(
                field("name"),
                format!("a server named \"{}\" is already defined", s.name),
            ));
        }
    }
    Ok(index)
}

/// Checks a network that may be cyclic: every server and flow as [`check_flow`]
/// does (paths may loop), unique names, and each server's load — every visit of a
/// flow counts — within its rate. What the cycle check of the feed-forward analyses
/// leaves out.
pub fn check_cyclic(net: &Network) -> Result<(), InputError> {
    let index = check_servers(&net.servers)?;
    let mut load = vec![Q::zero(); net.servers.len()];
    let mut members: Vec<Vec<(&str, &Q)>> = vec![Vec::new(); net.servers.len()];
    let mut names = HashSet::new();
    for (i, f) in net.flows.iter().enumerate() {
        let field = |k: &str| Field::new("flow", Some(i), Some(&f.name)).key(k);
        let path = check_flow_path(f, &index, &field, true)?;
        if !names.insert(f.name.as_str()) {
            return Err(InputError::at(
                field("name"),
                format!("a flow named \"{}\" is already defined", f.name),
            ));
        }
        for s in path {
            load[s] = load[s].add_ref(&f.rate);
            members[s].push((f.name.as_str(), &f.rate));
        }
    }
    for (j, s) in net.servers.iter().enumerate() {
        if load[j] > s.rate {
            return Err(InputError::at(
                Field::new("server", Some(j), Some(&s.name)).key("rate"),
                overload_message(s, &load[j], &members[j]),
            ));
        }
    }
    Ok(())
}
