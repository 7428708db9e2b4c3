//! The JSON of the controller's API: requests read field by field (so that every
//! error names the field: unknown keys, wrong types, bad units, missing values), the
//! bounds as exact values, and the error bodies.
//!
//! Errors: HTTP 400 `{"error": "...", "field": "rate"}` for bad input, 401/403 for
//! auth, 404 for an unknown name, 409 `{"error", "field"}` for a name (or TDP id)
//! already taken, 422 `{"rejected": true, "reason": "...", "breaking": {...}}` when
//! admission says no.

use lockstep_netcalc::units::{self, round4, Kind as UnitKind, Shown, Unit};
use lockstep_netcalc::{Analysis, Breaking, Field, Flow, FlowBounds, InputError, ServerBounds, Q};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::alloc::{AllocError, TdpFlowSpec};

/// An answer that is not a success: its HTTP status and JSON body.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub body: Value,
}

impl ApiError {
    pub fn bad_request(field: Option<&str>, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 400,
            body: json!({ "error": message.into(), "field": field }),
        }
    }
    pub fn field(field: &str, message: impl Into<String>) -> ApiError {
        ApiError::bad_request(Some(field), message)
    }
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 404,
            body: json!({ "error": message.into() }),
        }
    }
    pub fn conflict(field: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status: 409,
            body: json!({ "error": message.into(), "field": field }),
        }
    }
    pub fn rejected(reason: impl Into<String>, breaking: Value) -> ApiError {
        ApiError {
            status: 422,
            body: json!({ "rejected": true, "reason": reason.into(), "breaking": breaking }),
        }
    }
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError {
            status: 500,
            body: json!({ "error": message.into() }),
        }
    }
    pub fn message(&self) -> String {
        self.body
            .get("error")
            .or_else(|| self.body.get("reason"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }
}

impl From<AllocError> for ApiError {
    fn from(e: AllocError) -> ApiError {
        match e {
            AllocError::Invalid { field, message } => ApiError::field(&field, message),
            AllocError::Conflict { field, message } => ApiError::conflict(&field, message),
            AllocError::NoRoom { reason, blocked } => {
                ApiError::rejected(reason, json!({ "kind": "frames", "blocked": blocked }))
            }
        }
    }
}

/// A shaped flow as requested (and stored): the values as written, with their units.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FlowSpec {
    pub name: String,
    pub path: Vec<String>,
    pub rate: String,
    pub burst: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peak: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_packet: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
}

impl FlowSpec {
    /// The flow in exact values; the error names the field.
    pub fn to_flow(&self) -> Result<Flow, ApiError> {
        let q = |key: &str, kind: UnitKind, text: &str| {
            units::parse(kind, text).map_err(|e| ApiError::field(key, e.to_string()))
        };
        let opt = |key: &str, kind: UnitKind, text: &Option<String>| {
            text.as_deref().map(|t| q(key, kind, t)).transpose()
        };
        let flow = Flow {
            name: self.name.clone(),
            path: self.path.clone(),
            rate: q("rate", UnitKind::Rate, &self.rate)?,
            burst: q("burst", UnitKind::Data, &self.burst)?,
            peak: opt("peak", UnitKind::Rate, &self.peak)?,
            max_packet: opt("max_packet", UnitKind::Data, &self.max_packet)?,
            deadline: opt("deadline", UnitKind::Time, &self.deadline)?,
        };
        let field = |k: &str| Field::new("flow", None, Some(&self.name)).key(k);
        lockstep_netcalc::model::check_flow_limits(&flow, &field)
            .map_err(|e| ApiError::bad_request(input_field(&e).as_deref(), e.message.clone()))?;
        Ok(flow)
    }
}

/// The request body as a JSON object; malformed JSON (a key given twice included:
/// which one would count?) is a 400 without a field.
pub fn object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let Strict(v) = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(None, format!("malformed JSON: {e}")))?;
    match v {
        Value::Object(m) => Ok(m),
        other => Err(ApiError::bad_request(
            None,
            format!("expected a JSON object, got {}", type_name(&other)),
        )),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Field-by-field reading of a request object.
pub struct Fields<'a> {
    m: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    /// Refuses keys outside `allowed` (the first unknown one, in the body's order).
    pub fn new(m: &'a Map<String, Value>, allowed: &[&str]) -> Result<Fields<'a>, ApiError> {
        if let Some(k) = m.keys().find(|k| !allowed.contains(&k.as_str())) {
            return Err(ApiError::field(
                k,
                format!("unknown field (expected one of {})", allowed.join(", ")),
            ));
        }
        Ok(Fields { m })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.m.get(key).filter(|v| !v.is_null())
    }

    pub fn string(&self, key: &str) -> Result<Option<String>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(ApiError::field(
                key,
                format!("expected a string, got {}", type_name(other)),
            )),
        }
    }

    pub fn required_string(&self, key: &str) -> Result<String, ApiError> {
        self.string(key)?
            .ok_or_else(|| ApiError::field(key, "missing (required)"))
    }

    /// A value with its unit, checked to parse (kept as written).
    pub fn quantity(&self, key: &str, kind: UnitKind) -> Result<Option<String>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => {
                units::parse(kind, s).map_err(|e| ApiError::field(key, e.to_string()))?;
                Ok(Some(s.clone()))
            }
            Some(other) => Err(ApiError::field(
                key,
                format!(
                    "expected a string with its unit ({}), got {}",
                    kind.expected(),
                    type_name(other)
                ),
            )),
        }
    }

    pub fn required_quantity(&self, key: &str, kind: UnitKind) -> Result<String, ApiError> {
        self.quantity(key, kind)?
            .ok_or_else(|| ApiError::field(key, "missing (required)"))
    }

    pub fn strings(&self, key: &str) -> Result<Option<Vec<String>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| match v {
                    Value::String(s) => Ok(s.clone()),
                    other => Err(ApiError::field(
                        &format!("{key}[{i}]"),
                        format!("expected a string, got {}", type_name(other)),
                    )),
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(ApiError::field(
                key,
                format!("expected an array of strings, got {}", type_name(other)),
            )),
        }
    }

    pub fn u32(&self, key: &str) -> Result<Option<u32>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    ApiError::field(
                        key,
                        format!("expected a whole number 0..=4294967295, got {v}"),
                    )
                }),
        }
    }

    pub fn u32s(&self, key: &str) -> Result<Option<Vec<u32>>, ApiError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .ok_or_else(|| {
                            ApiError::field(
                                &format!("{key}[{i}]"),
                                format!("expected a whole number of frames, got {v}"),
                            )
                        })
                })
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            Some(other) => Err(ApiError::field(
                key,
                format!(
                    "expected an array of whole numbers, got {}",
                    type_name(other)
                ),
            )),
        }
    }
}

/// Names of flows and senders: the one name set ([`lockstep_core::names`]).
pub fn check_name(field: &str, name: &str) -> Result<(), ApiError> {
    lockstep_core::names::check(name).map_err(|m| ApiError::field(field, m))
}

pub const FLOW_KEYS: &[&str] = &[
    "name",
    "path",
    "rate",
    "burst",
    "peak",
    "max_packet",
    "deadline",
];

/// Reads a shaped flow from a request object. `defaults` gives rate and burst when
/// the request leaves them out (a standing reservation).
pub fn flow_spec(
    f: &Fields<'_>,
    name: String,
    defaults: Option<(&str, &str)>,
) -> Result<FlowSpec, ApiError> {
    let path = f
        .strings("path")?
        .ok_or_else(|| ApiError::field("path", "missing (required)"))?;
    let (rate, burst) = match defaults {
        None => (
            f.required_quantity("rate", UnitKind::Rate)?,
            f.required_quantity("burst", UnitKind::Data)?,
        ),
        Some((r, b)) => (
            f.quantity("rate", UnitKind::Rate)?
                .unwrap_or_else(|| r.into()),
            f.quantity("burst", UnitKind::Data)?
                .unwrap_or_else(|| b.into()),
        ),
    };
    Ok(FlowSpec {
        name,
        path,
        rate,
        burst,
        peak: f.quantity("peak", UnitKind::Rate)?,
        max_packet: f.quantity("max_packet", UnitKind::Data)?,
        deadline: f.quantity("deadline", UnitKind::Time)?,
    })
}

pub const TDP_KEYS: &[&str] = &["name", "id", "path", "packets", "size", "d"];

/// Reads a TDP flow request.
pub fn tdp_spec(m: &Map<String, Value>) -> Result<TdpFlowSpec, ApiError> {
    let f = Fields::new(m, TDP_KEYS)?;
    let name = f.required_string("name")?;
    check_name("name", &name)?;
    Ok(TdpFlowSpec {
        name,
        id: f.u32("id")?,
        path: f
            .strings("path")?
            .ok_or_else(|| ApiError::field("path", "missing (required)"))?,
        packets: f
            .u32("packets")?
            .ok_or_else(|| ApiError::field("packets", "missing (required)"))?,
        size: f
            .u32("size")?
            .ok_or_else(|| ApiError::field("size", "missing (required)"))?,
        d: f.u32s("d")?
            .ok_or_else(|| ApiError::field("d", "missing (required)"))?,
        start: None,
    })
}

/// The request's key an admission input error is about (`path[1]`, `rate`).
pub fn input_field(e: &InputError) -> Option<String> {
    let f = e.field.as_ref()?;
    let key = f.key.clone()?;
    Some(match f.element {
        Some(i) => format!("{key}[{i}]"),
        None => key,
    })
}

/// A bound in a result document: `{"exact": "965/12", "unit": "us", "value": 80.4167}`.
pub fn bound(q: &Q, unit: Unit) -> Value {
    let s = Shown::new(q, unit);
    json!({ "exact": s.exact.to_string(), "unit": unit.name(), "value": round4(s.value()) })
}

fn opt_bound(q: Option<&Q>, unit: Unit) -> Value {
    q.map(|q| bound(q, unit)).unwrap_or(Value::Null)
}

/// A flow's bounds.
pub fn bounds_json(f: &FlowBounds) -> Value {
    json!({
        "tfa": bound(&f.tfa, Unit::Us),
        "tfa_per_hop": f.tfa_hops.iter().map(|d| bound(d, Unit::Us)).collect::<Vec<_>>(),
        "sfa": bound(&f.sfa, Unit::Us),
        "best": match f.best() { Analysis::Tfa => "tfa", Analysis::Sfa => "sfa" },
        "bound": bound(f.bound(), Unit::Us),
        "deadline": opt_bound(f.deadline.as_ref(), Unit::Us),
        "meets_deadline": f.meets_deadline(),
    })
}

/// `{"name", "bounds"}` of a flow whose bounds changed.
pub fn changed_json(f: &FlowBounds) -> Value {
    json!({ "name": &*f.name, "bounds": bounds_json(f) })
}

pub fn server_json(s: &ServerBounds) -> Value {
    json!({
        "name": s.name,
        "multiplexing": s.multiplexing.name(),
        "rate": bound(&s.rate, Unit::Mbps),
        "latency": bound(&s.latency, Unit::Us),
        "buffer": opt_bound(s.buffer.as_ref(), Unit::Bytes),
        "flows": s.flows,
        "load": bound(&s.load, Unit::Mbps),
        "backlog": bound(&s.backlog, Unit::Bytes),
        "fits": s.fits(),
        "fifo_delay": opt_bound(s.fifo_delay.as_ref(), Unit::Us),
    })
}

/// What would break, for a 422 body.
pub fn breaking_json(b: &Breaking) -> Value {
    match b {
        Breaking::Flow {
            name,
            bound: d,
            deadline,
        } => json!({
            "kind": "flow", "flow": name,
            "bound": bound(d, Unit::Us), "deadline": bound(deadline, Unit::Us),
        }),
        Breaking::Port {
            server,
            backlog,
            buffer,
        } => json!({
            "kind": "port", "server": server,
            "backlog": bound(backlog, Unit::Bytes), "buffer": bound(buffer, Unit::Bytes),
        }),
        Breaking::Stability { server, load, rate } => json!({
            "kind": "stability", "server": server,
            "load": bound(load, Unit::Mbps), "rate": bound(rate, Unit::Mbps),
        }),
        Breaking::Cycle { servers } => json!({ "kind": "cycle", "servers": servers }),
        Breaking::Invalid(e) => {
            json!({ "kind": "invalid", "field": input_field(e), "error": e.message })
        }
    }
}

/// A JSON value read refusing an object that gives a key twice (serde_json's own
/// `Value` keeps the last silently).
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "\"{key}\" is given twice"
                )));
            }
            let Strict(v) = map.next_value()?;
            out.insert(key, v);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_given_twice_is_refused() {
        let e = object(br#"{"name": "a", "rate": "1Mbit/s", "name": "b"}"#).unwrap_err();
        assert_eq!(e.status, 400);
        assert!(
            e.body["error"]
                .as_str()
                .unwrap()
                .contains("\"name\" is given twice"),
            "{}",
            e.body
        );
        let nested = object(br#"{"m": {"x": 1, "x": 2}}"#).unwrap_err();
        assert!(nested.body["error"]
            .as_str()
            .unwrap()
            .contains("\"x\" is given twice"));
        let ok = object(br#"{"a": [1, 2.5, true, null, {"b": "c"}]}"#).unwrap();
        assert_eq!(ok["a"][1], 2.5);
        assert_eq!(ok["a"][4]["b"], "c");
    }

    fn read(body: &str) -> Result<FlowSpec, ApiError> {
        let m = object(body.as_bytes())?;
        let f = Fields::new(&m, FLOW_KEYS)?;
        let name = f.required_string("name")?;
        flow_spec(&f, name, None)
    }

    fn field_of(e: ApiError) -> (u16, Value) {
        (e.status, e.body["field"].clone())
    }

    #[test]
    fn a_flow_request_reads_exactly() {
        let s = read(
            r#"{"name":"f1","path":["s0","s1"],"rate":"40Mbit/s","burst":"25B","deadline":"1ms"}"#,
        )
        .unwrap();
        let f = s.to_flow().unwrap();
        assert_eq!(f.rate, Q::int(40_000_000));
        assert_eq!(f.burst, Q::int(200));
        assert_eq!(f.deadline, Q::ratio(1, 1000));
        assert_eq!(f.peak, None);
        // stored and read back: the same text
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<FlowSpec>(&text).unwrap(), s);
    }

    #[test]
    fn every_error_names_its_field() {
        let e = |b: &str| field_of(read(b).unwrap_err());
        assert_eq!(
            e(r#"{"name":"f","path":["s0"],"rate":40,"burst":"25B"}"#),
            (400, json!("rate"))
        );
        assert_eq!(
            e(r#"{"name":"f","path":["s0"],"rate":"40Mbit","burst":"25B"}"#),
            (400, json!("rate"))
        );
        assert_eq!(
            e(r#"{"name":"f","path":["s0"],"rate":"40Mbit/s","burst":"25b"}"#),
            (400, json!("burst"))
        );
        assert_eq!(
            e(r#"{"name":"f","path":["s0"],"rate":"40Mbit/s","burst":"25B","rat":1}"#),
            (400, json!("rat"))
        );
        assert_eq!(
            e(r#"{"name":"f","path":["s0", 3],"rate":"40Mbit/s","burst":"25B"}"#),
            (400, json!("path[1]"))
        );
        assert_eq!(
            e(r#"{"name":"f","rate":"40Mbit/s","burst":"25B"}"#),
            (400, json!("path"))
        );
        assert_eq!(
            e(r#"{"name":"f","path":"s0","rate":"40Mbit/s","burst":"25B"}"#),
            (400, json!("path"))
        );
        assert_eq!(
            e(r#"{"path":["s0"],"rate":"40Mbit/s","burst":"25B"}"#),
            (400, json!("name"))
        );
        assert_eq!(
            e(r#"{"name":"f","path":["s0"],"rate":"40Mbit/s","burst":"25B","deadline":"1"}"#),
            (400, json!("deadline"))
        );
        let err = read(r#"{"name": "f", "path": ["#).unwrap_err();
        assert_eq!(err.status, 400);
        assert_eq!(err.body["field"], Value::Null);
        assert!(
            err.message().starts_with("malformed JSON: EOF"),
            "{}",
            err.message()
        );
        let err = read("[1]").unwrap_err();
        assert_eq!(err.message(), "expected a JSON object, got an array");
        let m = read(r#"{"name":"f","path":["s0"],"rate":"40Mbit","burst":"25B"}"#).unwrap_err();
        assert_eq!(
            m.message(),
            "expected a bit rate like 100Mbit/s or 20B/us, got \"40Mbit\" (\"Mbit\" is a unit of data)"
        );
    }

    #[test]
    fn names() {
        assert!(check_name("name", "f-1.a:b_c").is_ok());
        assert_eq!(
            field_of(check_name("name", "a b").unwrap_err()),
            (400, json!("name"))
        );
        assert!(check_name("name", "").is_err());
        assert!(check_name("name", &"x".repeat(129)).is_err());
    }

    #[test]
    fn tdp_requests() {
        let m = object(br#"{"name":"t","path":["s0/1"],"packets":2,"size":1000,"d":[0]}"#).unwrap();
        let s = tdp_spec(&m).unwrap();
        assert_eq!(
            (s.packets, s.size, s.d.clone(), s.id),
            (2, 1000, vec![0], None)
        );
        let m =
            object(br#"{"name":"t","path":["s0/1"],"packets":-2,"size":1000,"d":[0]}"#).unwrap();
        assert_eq!(field_of(tdp_spec(&m).unwrap_err()), (400, json!("packets")));
        let m =
            object(br#"{"name":"t","path":["s0/1"],"packets":2,"size":1000,"d":[0.5]}"#).unwrap();
        assert_eq!(field_of(tdp_spec(&m).unwrap_err()), (400, json!("d[0]")));
        let m =
            object(br#"{"name":"t","path":["s0/1"],"packets":2,"size":1000,"d":[0],"start":1}"#)
                .unwrap();
        assert_eq!(field_of(tdp_spec(&m).unwrap_err()), (400, json!("start")));
    }
}

#[cfg(test)]
#[path = "api_fuzz_smoke.rs"]
mod fuzz_smoke;
