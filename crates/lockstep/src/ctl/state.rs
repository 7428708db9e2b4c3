//! The controller without HTTP: the network under admission control, the TDP frame
//! allocator and the database, changed together. Every operation takes the wall-clock
//! time as an argument (one-shot expiry is tested with injected time) and answers
//! with an HTTP status and a JSON body, or an [`ApiError`].
//!
//! Order of a change, so that memory and database never disagree:
//! - admit: decide in memory (nothing changes on a rejection), write the row in one
//!   transaction, and undo the admission if the write fails (removal restores every
//!   bound exactly);
//! - remove: delete the row in one transaction, then remove in memory (cannot fail).
//!
//! Start: the network file is analysed, expired one-shots are deleted, and every
//! stored reservation is re-admitted in insertion order. The bounds depend only on
//! the set of flows, so they are the ones the controller had before; each prefix of
//! that order is a subset of a set that was admitted once, and bounds only grow with
//! traffic, so the replay cannot be rejected unless the network file changed. TDP
//! flows are re-allocated at the start frame they were given.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use lockstep_core::Duration;
use lockstep_netcalc::{Admission, FlowBounds, InputError, Network, Reject, Q};
use serde_json::{json, Value};

use super::alloc::{Allocation, Allocator, TdpFlowSpec, TdpNetwork};
use super::api::{
    self, bounds_json, breaking_json, changed_json, check_name, input_field, object, server_json,
    ApiError, Fields, FlowSpec, FLOW_KEYS,
};
use super::store::{Kind, Store, StoreError};

/// Rate and bucket of a standing best-effort reservation the request leaves out:
/// one minimum-size Ethernet frame (84 bytes on the wire) per millisecond — loeser's
/// smallest reservation — and a bucket of one full-size frame on the wire.
pub const STANDING_RATE: &str = "672kbit/s";
pub const STANDING_BURST: &str = "1538B";
/// Longest one-shot reservation (loeser §3.2: "a few hundred milliseconds").
pub const MAX_ONESHOT: Duration = Duration::from_secs(10);
/// Names starting with this are the best-effort reservations'.
pub const BE_PREFIX: &str = "be.";

/// What stops the controller from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("{0}")]
    Network(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("the database holds reservation \"{name}\" (#{seq}) that the network no longer admits: {reason}")]
    Replay {
        name: String,
        seq: i64,
        reason: String,
    },
}

/// One reservation as the controller keeps it.
#[derive(Clone, Debug)]
struct Entry {
    seq: i64,
    kind: Kind,
    spec: Value,
    created_ns: i64,
    expires_ns: Option<i64>,
}

/// A successful answer.
pub type Answer = (u16, Value);

pub struct Controller {
    adm: Admission,
    tdp: Option<Allocator>,
    store: Store,
    entries: BTreeMap<String, Entry>,
    /// Flows defined in the network file (not stored, not removable).
    statics: BTreeSet<String>,
    version: u64,
    /// Most reservations held at once ([`lockstep_core::limits::MAX_RESERVATIONS`]).
    max_reservations: usize,
}

/// What the start found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartReport {
    pub readmitted: usize,
    pub tdp: usize,
    pub expired: usize,
}

impl Controller {
    /// Opens the database and rebuilds the state (see the module docs).
    /// `grid`: round the delay a flow's arrival curve is shifted by at each hop up to
    /// this many seconds (`Admission::set_propagation_grid`: bounds stay valid upper
    /// bounds, numbers stay small); `None`: exact.
    pub fn open(
        network: &Network,
        tdp: Option<TdpNetwork>,
        db: &Path,
        now_ns: i64,
        grid: Option<Q>,
    ) -> Result<(Controller, StartReport), StartError> {
        Self::with_store(network, tdp, Store::open(db)?, now_ns, grid)
    }

    pub fn with_store(
        network: &Network,
        tdp: Option<TdpNetwork>,
        mut store: Store,
        now_ns: i64,
        grid: Option<Q>,
    ) -> Result<(Controller, StartReport), StartError> {
        let adm =
            Admission::with_grid(network, grid).map_err(|e| StartError::Network(field_text(&e)))?;
        let statics = network.flows.iter().map(|f| f.name.clone()).collect();
        let expired = store.delete_expired(now_ns)?.len();
        let version = store.version()?;
        let mut ctl = Controller {
            adm,
            tdp: tdp.map(Allocator::new),
            store,
            entries: BTreeMap::new(),
            statics,
            version,
            max_reservations: lockstep_core::limits::MAX_RESERVATIONS,
        };
        let mut report = StartReport {
            expired,
            ..StartReport::default()
        };
        for r in ctl.store.records()? {
            let fail = |reason: String| StartError::Replay {
                name: r.name.clone(),
                seq: r.seq,
                reason,
            };
            let spec: Value = serde_json::from_str(&r.spec).map_err(|e| fail(e.to_string()))?;
            match r.kind {
                Kind::Tdp => {
                    let s: TdpFlowSpec =
                        serde_json::from_value(spec.clone()).map_err(|e| fail(e.to_string()))?;
                    let al = ctl
                        .tdp
                        .as_mut()
                        .ok_or_else(|| fail("no TDP network given (--tdp)".into()))?;
                    al.allocate(&s).map_err(|e| fail(e.to_string()))?;
                    report.tdp += 1;
                }
                Kind::Flow | Kind::Standing | Kind::Oneshot => {
                    let s: FlowSpec =
                        serde_json::from_value(spec.clone()).map_err(|e| fail(e.to_string()))?;
                    let flow = s.to_flow().map_err(|e| fail(e.message()))?;
                    ctl.adm.admit(flow).map_err(|e| fail(e.reason))?;
                    report.readmitted += 1;
                }
            }
            ctl.entries.insert(
                r.name.clone(),
                Entry {
                    seq: r.seq,
                    kind: r.kind,
                    spec,
                    created_ns: r.created_ns,
                    expires_ns: r.expires_ns,
                },
            );
        }
        Ok((ctl, report))
    }

    /// A smaller limit on the reservations held, for tests.
    #[cfg(test)]
    fn with_max_reservations(mut self, n: usize) -> Controller {
        self.max_reservations = n;
        self
    }

    /// 422 when the controller holds as many reservations as it takes.
    fn room(&self) -> Result<(), ApiError> {
        let (n, max) = (self.entries.len(), self.max_reservations);
        if n < max {
            return Ok(());
        }
        Err(ApiError::rejected(
            format!("the controller holds {n} reservations, the most it takes ({max}): remove one first"),
            json!({ "kind": "limit", "reservations": n, "limit": max }),
        ))
    }

    /// The schedule version: changes with every TDP reservation.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The earliest one-shot expiry.
    pub fn next_expiry(&self) -> Option<i64> {
        self.entries.values().filter_map(|e| e.expires_ns).min()
    }

    /// Removes the one-shot reservations expired at `now_ns` (one transaction).
    pub fn expire(&mut self, now_ns: i64) -> Result<Vec<String>, ApiError> {
        if self.next_expiry().is_none_or(|t| t > now_ns) {
            return Ok(Vec::new());
        }
        let names = self.store.delete_expired(now_ns).map_err(internal)?;
        for n in &names {
            self.adm.remove(n);
            self.entries.remove(n);
        }
        Ok(names)
    }

    fn taken(&self, name: &str) -> Option<ApiError> {
        if self.entries.contains_key(name) || self.statics.contains(name) {
            return Some(ApiError::conflict(
                "name",
                format!("a reservation named \"{name}\" exists"),
            ));
        }
        None
    }

    /// `POST /flows`.
    pub fn add_flow(&mut self, body: &[u8], now_ns: i64) -> Result<Answer, ApiError> {
        let m = object(body)?;
        let f = Fields::new(&m, FLOW_KEYS)?;
        let name = f.required_string("name")?;
        check_name("name", &name)?;
        if name.starts_with(BE_PREFIX) {
            return Err(ApiError::field(
                "name",
                format!(
                    "names starting with \"{BE_PREFIX}\" are kept for best-effort reservations"
                ),
            ));
        }
        let spec = api::flow_spec(&f, name, None)?;
        self.admit(spec, Kind::Flow, now_ns, None)
    }

    /// `POST /best-effort/{sender}/standing`.
    pub fn add_standing(
        &mut self,
        sender: &str,
        body: &[u8],
        now_ns: i64,
    ) -> Result<Answer, ApiError> {
        check_name("sender", sender)?;
        let m = object(body)?;
        let keys: Vec<&str> = FLOW_KEYS.iter().copied().filter(|k| *k != "name").collect();
        let f = Fields::new(&m, &keys)?;
        let name = format!("{BE_PREFIX}{sender}.standing");
        let spec = api::flow_spec(&f, name, Some((STANDING_RATE, STANDING_BURST)))?;
        self.admit(spec, Kind::Standing, now_ns, None)
    }

    /// `POST /best-effort/{sender}/oneshot`: a flow that expires after `duration`.
    pub fn add_oneshot(
        &mut self,
        sender: &str,
        body: &[u8],
        now_ns: i64,
    ) -> Result<Answer, ApiError> {
        check_name("sender", sender)?;
        let m = object(body)?;
        let mut keys: Vec<&str> = FLOW_KEYS.iter().copied().filter(|k| *k != "name").collect();
        keys.push("duration");
        let f = Fields::new(&m, &keys)?;
        let text = f.required_string("duration")?;
        let d = Duration::parse(&text).map_err(|e| ApiError::field("duration", e.to_string()))?;
        if !d.is_positive() || d > MAX_ONESHOT {
            return Err(ApiError::field(
                "duration",
                format!("{d} is outside (0, {MAX_ONESHOT}]: a one-shot reservation is short"),
            ));
        }
        let seq = self.store_next_seq()?;
        let name = format!("{BE_PREFIX}{sender}.oneshot.{seq}");
        let spec = api::flow_spec(&f, name, None)?;
        self.admit(
            spec,
            Kind::Oneshot,
            now_ns,
            Some(now_ns.saturating_add(d.as_nanos())),
        )
    }

    fn store_next_seq(&self) -> Result<i64, ApiError> {
        self.store.next_seq().map_err(internal)
    }

    fn admit(
        &mut self,
        spec: FlowSpec,
        kind: Kind,
        now_ns: i64,
        expires_ns: Option<i64>,
    ) -> Result<Answer, ApiError> {
        let flow = spec.to_flow()?;
        if let Some(e) = self.taken(&spec.name) {
            return Err(e);
        }
        self.room()?;
        let ok = self.adm.admit(flow).map_err(reject)?;
        let spec_json = serde_json::to_value(&spec).map_err(|e| internal(e.to_string()))?;
        let text = spec_json.to_string();
        let seq = match self
            .store
            .insert(&spec.name, kind, &text, now_ns, expires_ns, false)
        {
            Ok(seq) => seq,
            Err(e) => {
                self.adm.remove(&spec.name);
                return Err(internal(e));
            }
        };
        self.entries.insert(
            spec.name.clone(),
            Entry {
                seq,
                kind,
                spec: spec_json,
                created_ns: now_ns,
                expires_ns,
            },
        );
        let mut body = json!({
            "admitted": true,
            "flow": self.view(&ok.bounds),
            "changed": ok.changed.iter().map(changed_json).collect::<Vec<_>>(),
            "servers_touched": ok.servers_touched,
            "flows_touched": ok.flows_touched,
        });
        if let Some(t) = expires_ns {
            body["expires_in_ns"] = json!(t.saturating_sub(now_ns));
        }
        Ok((201, body))
    }

    /// One flow with its request and bounds.
    fn view(&self, b: &FlowBounds) -> Value {
        let e = self.entries.get(&*b.name);
        let mut v = json!({
            "name": &*b.name,
            "kind": e.map(|e| e.kind.name()).unwrap_or("static"),
            "path": &*b.path,
            "bounds": bounds_json(b),
        });
        if let Some(e) = e {
            for k in ["rate", "burst", "peak", "max_packet", "deadline"] {
                if let Some(x) = e.spec.get(k) {
                    v[k] = x.clone();
                }
            }
            v["seq"] = json!(e.seq);
            v["created_ns"] = json!(e.created_ns);
            v["expires_ns"] = json!(e.expires_ns);
        }
        v
    }

    /// `GET /flows`: every shaped flow (static, admitted, best effort) in admission order.
    pub fn list(&self) -> Answer {
        let snap = self.adm.snapshot();
        let flows: Vec<Value> = snap.flows.iter().map(|f| self.view(f)).collect();
        (200, json!({ "count": flows.len(), "flows": flows }))
    }

    /// `GET /flows/{name}`.
    pub fn show(&self, name: &str) -> Result<Answer, ApiError> {
        let b = self
            .adm
            .bounds(name)
            .ok_or_else(|| ApiError::not_found(format!("no flow named \"{name}\"")))?;
        Ok((200, self.view(&b)))
    }

    /// `DELETE /flows/{name}` (and the best-effort reservations by name).
    pub fn remove(&mut self, name: &str) -> Result<Answer, ApiError> {
        if self.statics.contains(name) {
            return Err(ApiError::conflict(
                "name",
                format!("\"{name}\" is defined in the network file: it cannot be removed"),
            ));
        }
        match self.entries.get(name).map(|e| e.kind) {
            None => return Err(ApiError::not_found(format!("no flow named \"{name}\""))),
            Some(Kind::Tdp) => {
                return Err(ApiError::not_found(format!(
                    "\"{name}\" is a TDP flow: DELETE /tdp/flows/{name}"
                )))
            }
            Some(_) => {}
        }
        if !self.store.delete(name, false).map_err(internal)? {
            return Err(ApiError::internal(format!(
                "\"{name}\" is not in the database"
            )));
        }
        self.entries.remove(name);
        let r = self
            .adm
            .remove(name)
            .ok_or_else(|| ApiError::internal(format!("\"{name}\" was not admitted")))?;
        Ok((
            200,
            json!({
                "removed": { "name": &*r.removed.name, "bounds": bounds_json(&r.removed) },
                "changed": r.changed.iter().map(changed_json).collect::<Vec<_>>(),
            }),
        ))
    }

    /// `DELETE /best-effort/{sender}/standing`.
    pub fn remove_standing(&mut self, sender: &str) -> Result<Answer, ApiError> {
        check_name("sender", sender)?;
        self.remove(&format!("{BE_PREFIX}{sender}.standing"))
    }

    /// `GET /network`.
    pub fn network(&self) -> Answer {
        let stored = self.stored().ok();
        let snap = self.adm.snapshot();
        let tdp = self.tdp.as_ref().map(|a| {
            let n = a.network();
            json!({
                "tf": n.tf.to_string(), "tf_ns": n.tf.as_nanos(), "k": n.k,
                "guard_ns": n.guard.as_nanos(),
                "nodes": n.nodes.iter().map(|nd| json!({
                    "name": nd.name,
                    "ports": nd.ports.iter().map(|p| json!({"id": p.id, "rate": p.rate.to_string()})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "flows": a.len(),
            })
        });
        (
            200,
            json!({
                "servers": snap.servers.iter().map(server_json).collect::<Vec<_>>(),
                "flows": snap.flows.len(),
                "tdp": tdp,
                "version": self.version,
                "reservations": self.entries.len(),
                "stored_reservations": stored,
            }),
        )
    }

    fn allocator(&mut self) -> Result<&mut Allocator, ApiError> {
        self.tdp.as_mut().ok_or_else(no_tdp)
    }

    /// `POST /tdp/flows`.
    pub fn add_tdp(&mut self, body: &[u8], now_ns: i64) -> Result<Answer, ApiError> {
        let m = object(body)?;
        let spec = api::tdp_spec(&m)?;
        self.allocator()?;
        if let Some(e) = self.taken(&spec.name) {
            return Err(e);
        }
        self.room()?;
        let alloc = self.allocator()?.allocate(&spec)?;
        let stored = TdpFlowSpec {
            id: Some(alloc.id),
            start: Some(alloc.start),
            ..spec
        };
        let spec_json = serde_json::to_value(&stored).map_err(|e| internal(e.to_string()))?;
        let seq = match self.store.insert(
            &alloc.name,
            Kind::Tdp,
            &spec_json.to_string(),
            now_ns,
            None,
            true,
        ) {
            Ok(seq) => seq,
            Err(e) => {
                self.allocator()?.release(&alloc.name);
                return Err(internal(e));
            }
        };
        self.version += 1;
        self.entries.insert(
            alloc.name.clone(),
            Entry {
                seq,
                kind: Kind::Tdp,
                spec: spec_json,
                created_ns: now_ns,
                expires_ns: None,
            },
        );
        Ok((
            201,
            json!({ "allocated": true, "flow": alloc_json(&alloc), "version": self.version }),
        ))
    }

    /// `DELETE /tdp/flows/{name}`.
    pub fn remove_tdp(&mut self, name: &str) -> Result<Answer, ApiError> {
        let al = self.tdp.as_ref().ok_or_else(no_tdp)?;
        if al.get(name).is_none() {
            return Err(ApiError::not_found(format!("no TDP flow named \"{name}\"")));
        }
        if !self.store.delete(name, true).map_err(internal)? {
            return Err(ApiError::internal(format!(
                "\"{name}\" is not in the database"
            )));
        }
        self.version += 1;
        self.entries.remove(name);
        let alloc = self
            .allocator()?
            .release(name)
            .ok_or_else(|| ApiError::internal("released twice"))?;
        Ok((
            200,
            json!({ "released": alloc_json(&alloc), "version": self.version }),
        ))
    }

    /// `GET /tdp/flows`.
    pub fn list_tdp(&self) -> Result<Answer, ApiError> {
        let al = self.tdp.as_ref().ok_or_else(no_tdp)?;
        let flows: Vec<Value> = al.flows().map(alloc_json).collect();
        Ok((
            200,
            json!({ "count": flows.len(), "flows": flows, "version": self.version }),
        ))
    }

    /// `GET /tdp/flows/{name}`.
    pub fn show_tdp(&self, name: &str) -> Result<Answer, ApiError> {
        let al = self.tdp.as_ref().ok_or_else(no_tdp)?;
        let a = al
            .get(name)
            .ok_or_else(|| ApiError::not_found(format!("no TDP flow named \"{name}\"")))?;
        Ok((200, alloc_json(a)))
    }

    /// `GET /nodes/{name}/schedule`.
    pub fn schedule(&self, node: &str) -> Result<Answer, ApiError> {
        let al = self.tdp.as_ref().ok_or_else(no_tdp)?;
        let s = al
            .schedule(node)
            .ok_or_else(|| ApiError::not_found(format!("no node named \"{node}\"")))?;
        let mut v = serde_json::to_value(&s).map_err(|e| internal(e.to_string()))?;
        v["version"] = json!(self.version);
        v["tf"] = json!(al.network().tf.to_string());
        Ok((200, v))
    }

    /// Rows in the database (tests compare it with what the API says).
    pub fn stored(&self) -> Result<u64, ApiError> {
        self.store.count().map_err(internal)
    }
}

fn alloc_json(a: &Allocation) -> Value {
    serde_json::to_value(a).unwrap_or(Value::Null)
}

fn no_tdp() -> ApiError {
    ApiError::not_found("this controller has no TDP network (start it with --tdp FILE)")
}

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::internal(e.to_string())
}

fn field_text(e: &InputError) -> String {
    e.to_string()
}

/// A rejection from admission: bad input is a 400 naming the request's field,
/// everything else a 422 with what would break.
fn reject(r: Reject) -> ApiError {
    match &r.breaking {
        lockstep_netcalc::Breaking::Invalid(e) => {
            ApiError::bad_request(input_field(e).as_deref(), e.message.clone())
        }
        b => ApiError::rejected(r.reason.clone(), breaking_json(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_netcalc::parse_network;

    const NET: &str = r#"
[[server]]
name = "s0"
rate = "100Mbit/s"
latency = "10us"
buffer = "20kB"
[[server]]
name = "s1"
rate = "100Mbit/s"
latency = "10us"
"#;

    fn ctl(store: Store, now: i64) -> Controller {
        let net = parse_network(NET).unwrap();
        Controller::with_store(&net, None, store, now, None)
            .unwrap()
            .0
    }

    fn flow(name: &str, rate: &str, deadline: &str) -> Vec<u8> {
        format!(r#"{{"name":"{name}","path":["s0","s1"],"rate":"{rate}","burst":"1500B","deadline":"{deadline}"}}"#).into_bytes()
    }

    #[test]
    fn a_grid_keeps_bounds_valid_and_no_smaller() {
        let net = parse_network(NET).unwrap();
        let exact_q = |v: &Value| v["exact"].as_str().unwrap().to_string();
        let mut exact = ctl(Store::memory().unwrap(), 0);
        // 1 ns: coarse enough that a carried delay of a third of a nanosecond rounds
        let grid = Q::ratio(1, 1_000_000_000);
        let mut grid = Controller::with_store(&net, None, Store::memory().unwrap(), 0, grid)
            .unwrap()
            .0;
        let body = |n: &str| {
            format!(r#"{{"name":"{n}","path":["s0","s1"],"rate":"3Mbit/s","burst":"1001B"}}"#)
                .into_bytes()
        };
        for n in ["a", "b", "c"] {
            let (_, e) = exact.add_flow(&body(n), 1).unwrap();
            let (_, g) = grid.add_flow(&body(n), 1).unwrap();
            for analysis in ["tfa", "sfa"] {
                let (e, g) = (
                    &e["flow"]["bounds"][analysis],
                    &g["flow"]["bounds"][analysis],
                );
                assert!(
                    g["value"].as_f64().unwrap() >= e["value"].as_f64().unwrap(),
                    "{n} {analysis}: grid {} below exact {}",
                    exact_q(g),
                    exact_q(e)
                );
            }
        }
    }

    #[test]
    fn the_reservations_held_have_a_limit() {
        let mut c = ctl(Store::memory().unwrap(), 0).with_max_reservations(2);
        c.add_flow(&flow("f1", "1Mbit/s", "1ms"), 1).unwrap();
        c.add_flow(&flow("f2", "1Mbit/s", "1ms"), 2).unwrap();
        let e = c.add_flow(&flow("f3", "1Mbit/s", "1ms"), 3).unwrap_err();
        assert_eq!(e.status, 422);
        assert_eq!(
            e.message(),
            "the controller holds 2 reservations, the most it takes (2): remove one first"
        );
        assert_eq!(
            e.body["breaking"],
            json!({ "kind": "limit", "reservations": 2, "limit": 2 })
        );
        // a name already taken is still a conflict, not the limit
        let e = c.add_flow(&flow("f1", "1Mbit/s", "1ms"), 4).unwrap_err();
        assert_eq!(e.status, 409);
        c.remove("f1").unwrap();
        assert_eq!(c.add_flow(&flow("f3", "1Mbit/s", "1ms"), 5).unwrap().0, 201);
        assert_eq!(c.max_reservations, 2);
        assert_eq!(
            ctl(Store::memory().unwrap(), 0).max_reservations,
            lockstep_core::limits::MAX_RESERVATIONS
        );
    }

    #[test]
    fn values_above_their_limits_are_bad_requests() {
        let mut c = ctl(Store::memory().unwrap(), 0);
        let e = c.add_flow(&flow("f1", "2000Gbit/s", "1ms"), 1).unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(e.body["field"], "rate");
        assert_eq!(e.message(), "2000000 Mbit/s is above the limit of 1 Tbit/s");
        let e = c.add_flow(&flow("f1", "1Mbit/s", "1/7ps"), 1).unwrap_err();
        assert_eq!(e.status, 400);
        assert_eq!(e.body["field"], "deadline");
        assert_eq!(
            e.message(),
            "expected a duration like 100us, 1.5ms or 1/2ms, got \"1/7ps\" (finer than 1/1000000000000 s: a value's denominator is at most 10^12)"
        );
    }

    #[test]
    fn admit_reject_remove() {
        let mut c = ctl(Store::memory().unwrap(), 0);
        let (st, v) = c.add_flow(&flow("f1", "30Mbit/s", "1ms"), 5).unwrap();
        assert_eq!(st, 201);
        assert_eq!(v["flow"]["kind"], "flow");
        assert_eq!(v["flow"]["rate"], "30Mbit/s");
        assert_eq!(v["flow"]["created_ns"], 5);
        // 1500 B at 100 Mbit/s = 120 us, + 10 us, twice (TFA): SFA pays the burst once.
        assert_eq!(v["flow"]["bounds"]["sfa"]["exact"], "140");
        let e = c.add_flow(&flow("f1", "1Mbit/s", "1ms"), 6).unwrap_err();
        assert_eq!((e.status, e.body["field"].clone()), (409, json!("name")));
        // A tight deadline for the newcomer: 422 naming the flow.
        let e = c.add_flow(&flow("f2", "30Mbit/s", "100us"), 7).unwrap_err();
        assert_eq!(e.status, 422);
        assert_eq!(e.body["breaking"]["kind"], "flow");
        assert_eq!(e.body["breaking"]["flow"], "f2");
        // Overload: stability at s0.
        let e = c.add_flow(&flow("f3", "80Mbit/s", "10ms"), 7).unwrap_err();
        assert_eq!(e.body["breaking"]["kind"], "stability");
        assert_eq!(e.body["breaking"]["server"], "s0");
        // Unknown server: a 400 naming path[1].
        let e = c
            .add_flow(
                br#"{"name":"f4","path":["s0","s9"],"rate":"1Mbit/s","burst":"100B"}"#,
                7,
            )
            .unwrap_err();
        assert_eq!((e.status, e.body["field"].clone()), (400, json!("path[1]")));
        assert_eq!(c.stored().unwrap(), 1);
        let (_, v) = c.remove("f1").unwrap();
        assert_eq!(v["removed"]["name"], "f1");
        assert_eq!(c.remove("f1").unwrap_err().status, 404);
        assert_eq!(c.stored().unwrap(), 0);
        assert_eq!(c.list().1["count"], 0);
    }

    #[test]
    fn oneshot_expiry_with_injected_time() {
        let mut c = ctl(Store::memory().unwrap(), 0);
        let body = br#"{"path":["s0"],"rate":"10Mbit/s","burst":"1500B","duration":"300ms"}"#;
        let (st, v) = c.add_oneshot("h1", body, 1_000).unwrap();
        assert_eq!(st, 201);
        let name = v["flow"]["name"].as_str().unwrap().to_string();
        assert_eq!(name, "be.h1.oneshot.1");
        assert_eq!(v["flow"]["expires_ns"], 300_001_000i64);
        assert_eq!(v["expires_in_ns"], 300_000_000i64);
        c.add_standing("h1", br#"{"path":["s0"]}"#, 1_000).unwrap();
        assert_eq!(c.next_expiry(), Some(300_001_000));
        assert!(c.expire(300_000_999).unwrap().is_empty());
        assert_eq!(c.show(&name).unwrap().0, 200);
        assert_eq!(c.expire(300_001_000).unwrap(), vec![name.clone()]);
        assert_eq!(c.show(&name).unwrap_err().status, 404);
        assert_eq!(c.next_expiry(), None);
        assert_eq!(c.stored().unwrap(), 1);
        // The next one-shot gets a new number (sequence numbers are never reused).
        let (_, v) = c.add_oneshot("h1", body, 2_000).unwrap();
        assert_eq!(v["flow"]["name"], "be.h1.oneshot.3");
        // The standing reservation has the defaults and cannot be made twice.
        let (_, s) = c.show("be.h1.standing").unwrap();
        assert_eq!(
            (s["rate"].clone(), s["burst"].clone()),
            (json!(STANDING_RATE), json!(STANDING_BURST))
        );
        assert_eq!(
            c.add_standing("h1", br#"{"path":["s0"]}"#, 3)
                .unwrap_err()
                .status,
            409
        );
        assert_eq!(c.remove_standing("h1").unwrap().0, 200);
        // Bad durations.
        for (d, f) in [
            ("0ms", "duration"),
            ("11s", "duration"),
            ("soon", "duration"),
        ] {
            let b =
                format!(r#"{{"path":["s0"],"rate":"1Mbit/s","burst":"1500B","duration":"{d}"}}"#);
            let e = c.add_oneshot("h1", b.as_bytes(), 0).unwrap_err();
            assert_eq!((e.status, e.body["field"].clone()), (400, json!(f)), "{d}");
        }
        let e = c.add_flow(&flow("be.x", "1Mbit/s", "1ms"), 0).unwrap_err();
        assert_eq!(e.body["field"], "name");
    }

    #[test]
    fn a_reopened_store_gives_the_same_bounds_and_drops_expired_oneshots() {
        let dir = std::env::temp_dir().join(format!("lockstep-state-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let db = dir.join("ctl.db");
        let before = {
            let mut c = ctl(Store::open(&db).unwrap(), 0);
            c.add_flow(&flow("a", "20Mbit/s", "1ms"), 1).unwrap();
            c.add_flow(&flow("b", "20Mbit/s", "1ms"), 2).unwrap();
            c.add_flow(&flow("c", "20Mbit/s", "1ms"), 3).unwrap();
            c.remove("a").unwrap();
            c.add_oneshot(
                "h",
                br#"{"path":["s1"],"rate":"1Mbit/s","burst":"1500B","duration":"100ms"}"#,
                4,
            )
            .unwrap();
            c.list().1
        };
        // Reopened before the one-shot expires: everything, the same.
        let c = ctl(Store::open(&db).unwrap(), 5);
        assert_eq!(c.list().1, before);
        drop(c);
        // After: the one-shot is gone, the rest unchanged.
        let net = parse_network(NET).unwrap();
        let (c, rep) = Controller::open(&net, None, &db, 200_000_000, None).unwrap();
        assert_eq!(
            rep,
            StartReport {
                readmitted: 2,
                tdp: 0,
                expired: 1
            }
        );
        let flows = c.list().1["flows"].clone();
        let names: Vec<&str> = flows
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, vec!["b", "c"]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn tdp_through_the_controller() {
        let net = parse_network(NET).unwrap();
        let tdp = TdpNetwork::parse(
            "tf = \"250us\"\nk = 4\n[[node]]\nname = \"s0\"\nports = [{ id = 1, rate = \"100Mbit/s\" }]\n[[node]]\nname = \"r1\"\nports = [{ id = 2, rate = \"100Mbit/s\" }]\n",
        )
        .unwrap();
        let (mut c, _) =
            Controller::with_store(&net, Some(tdp), Store::memory().unwrap(), 0, None).unwrap();
        assert_eq!(c.version(), 0);
        let body = br#"{"name":"t1","path":["s0/1","r1/2"],"packets":3,"size":1002,"d":[0,1]}"#;
        let (st, v) = c.add_tdp(body, 0).unwrap();
        assert_eq!(
            (st, v["flow"]["start"].clone(), v["version"].clone()),
            (201, json!(0), json!(1))
        );
        let body2 = br#"{"name":"t2","path":["s0/1","r1/2"],"packets":1,"size":1002,"d":[0,1]}"#;
        let (_, v) = c.add_tdp(body2, 0).unwrap();
        assert_eq!(v["flow"]["start"], 1);
        let (_, s) = c.schedule("r1").unwrap();
        assert_eq!(s["version"], 2);
        assert_eq!(s["flows"][0]["rows"][0]["slot"], 1);
        assert_eq!(s["flows"][1]["rows"][0]["slot"], 2);
        assert_eq!(c.schedule("zz").unwrap_err().status, 404);
        assert_eq!(c.add_tdp(body, 0).unwrap_err().status, 409);
        assert_eq!(c.remove("t1").unwrap_err().status, 404);
        c.remove_tdp("t1").unwrap();
        assert_eq!(c.version(), 3);
        assert_eq!(c.list_tdp().unwrap().1["count"], 1);
    }
}
