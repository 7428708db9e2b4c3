//! The network file (TOML):
//!
//! ```toml
//! [[server]]
//! name = "s0"
//! rate = "160Mbit/s"     # or "20B/us"
//! latency = "20us"
//! buffer = "2MB"          # optional
//! multiplexing = "fifo"   # or "arbitrary"; default fifo
//! shaper = { rate = "160Mbit/s", burst = "0B" }  # optional output shaper R t + M
//!                         # (burst optional, default 0: panco's R t)
//!
//! [[flow]]
//! name = "f0"
//! path = ["s0", "s1", "s2"]
//! rate = "40Mbit/s"       # sustained rate r
//! burst = "25B"           # bucket b
//! peak = "100Mbit/s"      # optional peak rate C (needs max_packet)
//! max_packet = "1514B"    # optional M
//! deadline = "1ms"        # optional: checked, reported
//! ```
//!
//! Every error names the field (`flow[2] "f2".path[1]: unknown server "s9"`) and the
//! line it is on: the TOML is walked by hand with its spans rather than deserialised,
//! so unknown keys, missing fields, wrong types and bad units all point at the text.

use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

use crate::admission::Admission;
use crate::model::{Field, Flow, InputError, Multiplexing, Network, Server, Shaper};
use crate::q::Q;
use crate::units::{self, Kind};

const SERVER_KEYS: &[&str] = &[
    "name",
    "rate",
    "latency",
    "buffer",
    "multiplexing",
    "shaper",
];
const SHAPER_KEYS: &[&str] = &["rate", "burst"];
const FLOW_KEYS: &[&str] = &[
    "name",
    "path",
    "rate",
    "burst",
    "peak",
    "max_packet",
    "deadline",
];

/// 1-based line and column of byte `offset`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let col = before.get(start..).map_or(0, |s| s.chars().count()) + 1;
    (line, col)
}

struct Ctx<'t> {
    text: &'t str,
}

impl Ctx<'_> {
    fn err(
        &self,
        span: Option<Range<usize>>,
        field: Option<Field>,
        message: impl Into<String>,
    ) -> InputError {
        let (line, column) = match span {
            Some(s) => {
                let (l, c) = line_col(self.text, s.start);
                (Some(l), Some(c))
            }
            None => (None, None),
        };
        InputError {
            field: field.map(Box::new),
            message: message.into(),
            line,
            column,
        }
    }
}

/// Parses the text of a network file (no validation beyond types and units).
pub fn parse_network(text: &str) -> Result<Network, InputError> {
    let ctx = Ctx { text };
    let doc = DeTable::parse(text)
        .map_err(|e| ctx.err(e.span(), None, e.message().trim().to_string()))?;
    let root = doc.get_ref();
    for (k, _) in root.iter() {
        let key = k.get_ref();
        if key != "server" && key != "flow" {
            return Err(ctx.err(
                Some(k.span()),
                None,
                format!("unknown key \"{key}\" (expected [[server]] and [[flow]] tables)"),
            ));
        }
    }
    let server_tables = tables(&ctx, root, "server")?;
    let flow_tables = tables(&ctx, root, "flow")?;
    crate::model::check_size(server_tables.len(), flow_tables.len())?;
    let servers = server_tables
        .into_iter()
        .enumerate()
        .map(|(i, (span, t))| server(&ctx, i, span, t))
        .collect::<Result<Vec<_>, _>>()?;
    let flows = flow_tables
        .into_iter()
        .enumerate()
        .map(|(i, (span, t))| flow(&ctx, i, span, t))
        .collect::<Result<Vec<_>, _>>()?;
    let net = Network { servers, flows };
    crate::model::check_limits(&net).map_err(|e| locate(text, e))?;
    Ok(net)
}

/// Parses and validates a network file: the admission state with every bound.
/// Parses a network that may be cyclic and checks it ([`crate::model::check_cyclic`]),
/// errors located in `text`.
pub fn parse_cyclic(text: &str) -> Result<Network, InputError> {
    let net = parse_network(text)?;
    crate::model::check_cyclic(&net).map_err(|e| locate(text, e))?;
    Ok(net)
}

pub fn load(text: &str) -> Result<Admission, InputError> {
    let net = parse_network(text)?;
    Admission::new(&net).map_err(|e| locate(text, e))
}

/// Adds the line of the field an error names.
pub fn locate(text: &str, mut e: InputError) -> InputError {
    if e.line.is_some() {
        return e;
    }
    let Some(field) = &e.field else { return e };
    let Ok(doc) = DeTable::parse(text) else {
        return e;
    };
    if let Some(span) = span_of(doc.get_ref(), field) {
        let (l, c) = line_col(text, span.start);
        e.line = Some(l);
        e.column = Some(c);
    }
    e
}

fn span_of(root: &DeTable<'_>, field: &Field) -> Option<Range<usize>> {
    let arr = match root.get(field.table)?.get_ref() {
        DeValue::Array(a) => a,
        _ => return None,
    };
    let entry = arr.get(field.index?)?;
    let DeValue::Table(t) = entry.get_ref() else {
        return Some(entry.span());
    };
    let Some(key) = &field.key else {
        return Some(entry.span());
    };
    // `shaper.rate`: the key inside the server's shaper table
    let (t, key) = match key.split_once('.') {
        Some((outer, inner)) => match t.get(outer).map(|v| (v.span(), v.get_ref())) {
            Some((_, DeValue::Table(sub))) => (sub, inner),
            Some((span, _)) => return Some(span),
            None => return Some(entry.span()),
        },
        None => (t, key.as_str()),
    };
    let Some((k, v)) = t.get_key_value(key) else {
        return Some(entry.span());
    };
    if let (Some(i), DeValue::Array(items)) = (field.element, v.get_ref()) {
        if let Some(item) = items.get(i) {
            return Some(item.span());
        }
    }
    let ks = k.span();
    Some(if ks.is_empty() { v.span() } else { ks })
}

type Entry<'a, 'i> = (Range<usize>, &'a DeTable<'i>);

fn tables<'a, 'i>(
    ctx: &Ctx<'_>,
    root: &'a DeTable<'i>,
    name: &str,
) -> Result<Vec<Entry<'a, 'i>>, InputError> {
    let Some((k, v)) = root.get_key_value(name) else {
        return Ok(Vec::new());
    };
    let DeValue::Array(items) = v.get_ref() else {
        return Err(ctx.err(
            Some(k.span()),
            None,
            format!("\"{name}\" must be an array of tables: write [[{name}]]"),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(i, item)| match item.get_ref() {
            DeValue::Table(t) => Ok((item.span(), t)),
            _ => Err(ctx.err(
                Some(item.span()),
                Some(Field::new(
                    if name == "server" { "server" } else { "flow" },
                    Some(i),
                    None,
                )),
                "must be a table",
            )),
        })
        .collect()
}

struct Reader<'c, 'a, 'i> {
    ctx: &'c Ctx<'c>,
    table: &'static str,
    index: usize,
    span: Range<usize>,
    t: &'a DeTable<'i>,
    name: Option<String>,
    /// Prepended to every key: `shaper.` inside a server's shaper table.
    prefix: &'static str,
}

impl Reader<'_, '_, '_> {
    fn field(&self, key: &str) -> Field {
        Field::new(self.table, Some(self.index), self.name.as_deref())
            .key(&format!("{}{key}", self.prefix))
    }

    fn check_keys(&self, allowed: &[&str]) -> Result<(), InputError> {
        for (k, _) in self.t.iter() {
            let key = k.get_ref();
            if !allowed.contains(&key.as_ref()) {
                return Err(self.ctx.err(
                    Some(k.span()),
                    Some(self.field(key)),
                    format!("unknown key (expected one of {})", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }

    fn get(&self, key: &str) -> Option<&Spanned<DeValue<'_>>> {
        self.t.get(key)
    }

    fn missing(&self, key: &str) -> InputError {
        self.ctx.err(
            Some(self.span.clone()),
            Some(self.field(key)),
            "missing (required)",
        )
    }

    fn string(&self, key: &str) -> Result<Option<(String, Range<usize>)>, InputError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.get_ref() {
            DeValue::String(s) => Ok(Some((s.to_string(), v.span()))),
            other => Err(self.ctx.err(
                Some(v.span()),
                Some(self.field(key)),
                format!("expected a string, got {}", type_name(other)),
            )),
        }
    }

    fn quantity(&self, key: &str, kind: Kind) -> Result<Option<Q>, InputError> {
        let Some(v) = self.get(key) else {
            return Ok(None);
        };
        match v.get_ref() {
            DeValue::String(s) => units::parse(kind, s).map(Some).map_err(|e| {
                self.ctx
                    .err(Some(v.span()), Some(self.field(key)), e.to_string())
            }),
            other => Err(self.ctx.err(
                Some(v.span()),
                Some(self.field(key)),
                format!(
                    "expected a string with its unit ({}), got {}",
                    kind.expected(),
                    type_name(other)
                ),
            )),
        }
    }

    fn required(&self, key: &str, kind: Kind) -> Result<Q, InputError> {
        self.quantity(key, kind)?.ok_or_else(|| self.missing(key))
    }
}

fn type_name(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

fn reader<'c, 'a, 'i>(
    ctx: &'c Ctx<'c>,
    table: &'static str,
    index: usize,
    span: Range<usize>,
    t: &'a DeTable<'i>,
) -> Result<Reader<'c, 'a, 'i>, InputError> {
    let mut r = Reader {
        ctx,
        table,
        index,
        span,
        t,
        name: None,
        prefix: "",
    };
    let name = r.string("name")?.ok_or_else(|| r.missing("name"))?;
    if let Err(m) = lockstep_core::names::check(&name.0) {
        return Err(ctx.err(Some(name.1), Some(r.field("name")), m));
    }
    r.name = Some(name.0);
    Ok(r)
}

fn server(
    ctx: &Ctx<'_>,
    i: usize,
    span: Range<usize>,
    t: &DeTable<'_>,
) -> Result<Server, InputError> {
    let r = reader(ctx, "server", i, span, t)?;
    r.check_keys(SERVER_KEYS)?;
    let multiplexing = match r.string("multiplexing")? {
        None => Multiplexing::Fifo,
        Some((m, span)) => match m.as_str() {
            "fifo" | "FIFO" => Multiplexing::Fifo,
            "arbitrary" | "blind" => Multiplexing::Arbitrary,
            other => {
                return Err(ctx.err(
                    Some(span),
                    Some(r.field("multiplexing")),
                    format!("expected \"fifo\" or \"arbitrary\", got \"{other}\""),
                ))
            }
        },
    };
    Ok(Server {
        name: r.name.clone().unwrap_or_default(),
        rate: r.required("rate", Kind::Rate)?,
        latency: r.required("latency", Kind::Time)?,
        buffer: r.quantity("buffer", Kind::Data)?,
        multiplexing,
        shaper: shaper(&r)?,
    })
}

/// A server's `shaper = { rate = "…", burst = "…" }` (burst optional, 0 when left
/// out).
fn shaper(r: &Reader<'_, '_, '_>) -> Result<Option<Shaper>, InputError> {
    let Some(v) = r.get("shaper") else {
        return Ok(None);
    };
    let DeValue::Table(t) = v.get_ref() else {
        return Err(r.ctx.err(
            Some(v.span()),
            Some(r.field("shaper")),
            format!(
                "expected a table such as {{ rate = \"10Mbit/s\", burst = \"0B\" }}, got {}",
                type_name(v.get_ref())
            ),
        ));
    };
    let sub = Reader {
        ctx: r.ctx,
        table: r.table,
        index: r.index,
        span: v.span(),
        t,
        name: r.name.clone(),
        prefix: "shaper.",
    };
    sub.check_keys(SHAPER_KEYS)?;
    Ok(Some(Shaper {
        rate: sub.required("rate", Kind::Rate)?,
        burst: sub.quantity("burst", Kind::Data)?.unwrap_or_default(),
    }))
}

fn flow(ctx: &Ctx<'_>, i: usize, span: Range<usize>, t: &DeTable<'_>) -> Result<Flow, InputError> {
    let r = reader(ctx, "flow", i, span, t)?;
    r.check_keys(FLOW_KEYS)?;
    let path = match r.get("path") {
        None => return Err(r.missing("path")),
        Some(v) => match v.get_ref() {
            DeValue::Array(items) => items
                .iter()
                .enumerate()
                .map(|(k, item)| match item.get_ref() {
                    DeValue::String(s) => Ok(s.to_string()),
                    other => Err(ctx.err(
                        Some(item.span()),
                        Some(r.field("path").element(k)),
                        format!(
                            "expected a server name (a string), got {}",
                            type_name(other)
                        ),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()?,
            other => {
                return Err(ctx.err(
                    Some(v.span()),
                    Some(r.field("path")),
                    format!(
                        "expected an array of server names, got {}",
                        type_name(other)
                    ),
                ))
            }
        },
    };
    Ok(Flow {
        name: r.name.clone().unwrap_or_default(),
        path,
        rate: r.required("rate", Kind::Rate)?,
        burst: r.required("burst", Kind::Data)?,
        peak: r.quantity("peak", Kind::Rate)?,
        max_packet: r.quantity("max_packet", Kind::Data)?,
        deadline: r.quantity("deadline", Kind::Time)?,
    })
}
