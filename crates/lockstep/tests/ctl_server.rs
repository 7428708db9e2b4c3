//! `lockstep ctl serve` against real requests on loopback: auth, admission until a
//! rejection, restart and `kill -9` with the same database, one-shot expiry, TDP
//! frames and schedules, malformed input, concurrent writers, the client
//! subcommands' exit statuses, and clients that connect and then stall (header and
//! body timeouts, a stop with such clients connected).
//!
//! Each test runs its own server (port 0, its own database directory); a guard kills
//! it. Waits are bounded loops that assert a state, never a duration.

use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

mod common;

use common::ctl::{CtlDir, CtlServer};
use std::ffi::OsString;

const BIN: &str = env!("CARGO_BIN_EXE_lockstep");

const NETWORK: &str = r#"
[[server]]
name = "s0"
rate = "100Mbit/s"
latency = "10us"
buffer = "30kB"

[[server]]
name = "s1"
rate = "100Mbit/s"
latency = "10us"
"#;

/// TF 250 µs at 100 Mb/s: 25 000 bits a frame, a 1002-byte packet is 8320 bits.
const TDP: &str = r#"
tf = "250us"
k = 4
[[node]]
name = "s0"
ports = [{ id = 1, rate = "100Mbit/s" }]
[[node]]
name = "r1"
ports = [{ id = 1, rate = "100Mbit/s" }, { id = 2, rate = "100Mbit/s" }]
[[node]]
name = "r2"
ports = [{ id = 1, rate = "100Mbit/s" }]
"#;

const TOKEN: &str = "s3cret-token";

fn temp_dir(name: &str) -> CtlDir {
    let token = format!("{TOKEN}\n");
    let files = [
        ("net.toml", NETWORK),
        ("tdp.toml", TDP),
        ("token", token.as_str()),
    ];
    CtlDir::new(name, &files)
}

/// A running server ([`CtlServer`]) on the directory's files.
type Server = CtlServer;

trait Start {
    fn start(dir: &CtlDir, token: bool) -> Server;
    fn start_with(dir: &CtlDir, token: bool, extra: &[&str]) -> Server;
    fn kill9(self);
}

impl Start for CtlServer {
    fn start(dir: &CtlDir, token: bool) -> Server {
        Server::start_with(dir, token, &[])
    }

    /// With more options for `ctl serve`.
    fn start_with(dir: &CtlDir, token: bool, extra: &[&str]) -> Server {
        let mut args: Vec<OsString> = vec!["--db".into(), dir.path("ctl.db").into()];
        args.extend(["--network".into(), dir.path("net.toml").into()]);
        args.extend(["--tdp".into(), dir.path("tdp.toml").into()]);
        if token {
            args.extend(["--token-file".into(), dir.path("token").into()]);
        }
        args.extend(extra.iter().map(OsString::from));
        CtlServer::spawn(&args)
    }

    /// `kill -9`: no chance to clean up.
    fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(60)))
        .build()
        .into()
}

/// `(status, body)` of a request; `token` adds the bearer header.
fn req(
    s: &Server,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> (u16, Value) {
    let a = agent();
    let url = format!("{}{path}", s.url);
    let auth = token.map(|t| format!("Bearer {t}"));
    let res = match method {
        "GET" => a.get(&url).call(),
        "DELETE" => {
            let mut r = a.delete(&url);
            if let Some(h) = &auth {
                r = r.header("Authorization", h);
            }
            r.call()
        }
        _ => {
            let mut r = a.post(&url).header("Content-Type", "application/json");
            if let Some(h) = &auth {
                r = r.header("Authorization", h);
            }
            r.send(body.unwrap_or(""))
        }
    };
    let mut res = res.unwrap();
    let status = res.status().as_u16();
    let text = res.body_mut().read_to_string().unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn get(s: &Server, path: &str) -> (u16, Value) {
    req(s, "GET", path, None, None)
}

fn post(s: &Server, path: &str, body: &str) -> (u16, Value) {
    req(s, "POST", path, Some(body), Some(TOKEN))
}

fn flow(name: &str, rate: &str, deadline: &str) -> String {
    json!({"name": name, "path": ["s0", "s1"], "rate": rate, "burst": "1500B", "deadline": deadline})
        .to_string()
}

fn names(list: &Value) -> Vec<String> {
    list["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

/// Rows in the database file, read beside the running server (WAL allows it).
fn db_rows(dir: &CtlDir) -> i64 {
    let c = rusqlite::Connection::open_with_flags(
        dir.path("ctl.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    c.query_row("SELECT COUNT(*) FROM reservation", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn changes_need_the_token_reads_do_not() {
    let dir = temp_dir("auth");
    let s = Server::start(&dir, true);
    let body = flow("f1", "10Mbit/s", "5ms");
    let (st, v) = req(&s, "POST", "/flows", Some(&body), None);
    assert_eq!(st, 401, "{v}");
    assert!(v["error"].as_str().unwrap().contains("Bearer"));
    let (st, _) = req(&s, "POST", "/flows", Some(&body), Some("wrong"));
    assert_eq!(st, 403);
    assert_eq!(get(&s, "/flows").1["count"], 0);
    let (st, v) = req(&s, "POST", "/flows", Some(&body), Some(TOKEN));
    assert_eq!(st, 201, "{v}");
    let (st, v) = get(&s, "/flows");
    assert_eq!((st, names(&v)), (200, vec!["f1".to_string()]));
    assert_eq!(req(&s, "DELETE", "/flows/f1", None, None).0, 401);
    assert_eq!(req(&s, "DELETE", "/flows/f1", None, Some("nope")).0, 403);
    assert_eq!(req(&s, "DELETE", "/flows/f1", None, Some(TOKEN)).0, 200);
    assert_eq!(req(&s, "DELETE", "/flows/f1", None, Some(TOKEN)).0, 404);
    assert_eq!(get(&s, "/flows/f1").0, 404);
    assert_eq!(get(&s, "/no/such/endpoint").0, 404);
}

#[test]
fn admit_until_rejected_then_kill_9_and_restart_with_the_same_bounds() {
    let dir = temp_dir("restart");
    let s = Server::start(&dir, true);
    let mut admitted = Vec::new();
    let mut rejection = None;
    for i in 0..30 {
        let name = format!("f{i}");
        let (st, v) = post(&s, "/flows", &flow(&name, "10Mbit/s", "1500us"));
        match st {
            201 => {
                assert_eq!(v["flow"]["name"], name.as_str());
                assert!(v["flow"]["bounds"]["bound"]["exact"].is_string());
                admitted.push(name);
            }
            422 => {
                rejection = Some(v);
                break;
            }
            other => panic!("HTTP {other}: {v}"),
        }
    }
    let rej = rejection.expect("a flow is rejected before 30");
    assert_eq!(rej["rejected"], true);
    // The rejection names what would break: a flow's deadline (the newcomer's or an
    // admitted one's) or a port.
    let b = &rej["breaking"];
    match b["kind"].as_str().unwrap() {
        "flow" => assert!(b["flow"].as_str().unwrap().starts_with('f'), "{rej}"),
        "port" | "stability" => assert_eq!(b["server"], "s0", "{rej}"),
        other => panic!("{other}: {rej}"),
    }
    assert!(admitted.len() >= 2, "{admitted:?}");
    let before = get(&s, "/flows").1;
    let net_before = get(&s, "/network").1;
    assert_eq!(names(&before), admitted);
    s.kill9();

    let s = Server::start(&dir, true);
    let after = get(&s, "/flows").1;
    assert_eq!(after, before, "every admitted flow, the same exact bounds");
    let net_after = get(&s, "/network").1;
    assert_eq!(net_after["servers"], net_before["servers"]);
    // The state goes on from there: the rejected flow is still rejected.
    let (st, v) = post(&s, "/flows", &flow("again", "10Mbit/s", "1500us"));
    assert_eq!(st, 422, "{v}");
}

#[test]
fn kill_9_mid_run_keeps_the_last_committed_state() {
    let dir = temp_dir("crash");
    let s = Server::start(&dir, false);
    let url = s.url.clone();
    let (tx, rx) = mpsc::channel::<(String, u16)>();
    let mut workers = Vec::new();
    for t in 0..4 {
        let tx = tx.clone();
        let url = url.clone();
        workers.push(std::thread::spawn(move || {
            let a = agent();
            for i in 0..200 {
                let name = format!("w{t}-{i}");
                // Each admission is followed by its removal half of the time, so the
                // state keeps changing.
                let body =
                    json!({"name": name, "path": ["s0"], "rate": "1Mbit/s", "burst": "100B"});
                let r = a
                    .post(format!("{url}/flows"))
                    .header("Content-Type", "application/json")
                    .send(body.to_string());
                let st = match r {
                    Ok(r) => r.status().as_u16(),
                    Err(_) => return, // the server is gone
                };
                if tx.send((name.clone(), st)).is_err() {
                    return;
                }
                if i % 2 == 1 && st == 201 {
                    match a.delete(format!("{url}/flows/{name}")).call() {
                        Ok(r) => {
                            let _ = tx.send((format!("-{name}"), r.status().as_u16()));
                        }
                        Err(_) => {
                            // cut off by the kill: the removal may have committed
                            let _ = tx.send((format!("?{name}"), 0));
                            return;
                        }
                    }
                }
            }
        }));
    }
    drop(tx);
    // Let some requests be answered, then kill the server in the middle.
    let mut answers = Vec::new();
    while answers.len() < 40 {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => answers.push(a),
            Err(_) => break,
        }
    }
    s.kill9();
    for w in workers {
        w.join().unwrap();
    }
    answers.extend(rx.try_iter());
    // What the server acknowledged is committed: an acknowledged admission is there
    // unless a removal followed (acknowledged, or cut off by the kill: then it may or
    // may not have committed); nothing else is there except flows whose admission was
    // cut off by the kill.
    let mut must: std::collections::BTreeSet<String> = Default::default();
    let mut maybe_removed: std::collections::BTreeSet<String> = Default::default();
    for (name, st) in &answers {
        if let Some(n) = name.strip_prefix('?') {
            maybe_removed.insert(n.to_string());
        } else if let Some(n) = name.strip_prefix('-') {
            if *st == 200 {
                must.remove(n);
            }
        } else if *st == 201 {
            must.insert(name.clone());
        }
    }
    let s = Server::start(&dir, false);
    let list = get(&s, "/flows").1;
    let got: std::collections::BTreeSet<String> = names(&list).into_iter().collect();
    for n in &must {
        // an admission whose removal was in flight when the server died may be gone
        assert!(
            got.contains(n) || maybe_removed.contains(n),
            "{n} was acknowledged but is missing"
        );
    }
    for n in got.difference(&must) {
        // At most one request per worker was in flight when the server died.
        assert!(n.starts_with('w'), "{n}");
    }
    assert!(
        got.len() <= must.len() + 4,
        "{} vs {}",
        got.len(),
        must.len()
    );
    assert_eq!(db_rows(&dir), got.len() as i64);
}

#[test]
fn a_oneshot_reservation_expires() {
    let dir = temp_dir("oneshot");
    let s = Server::start(&dir, true);
    let (st, v) = post(&s, "/best-effort/h1/standing", r#"{"path": ["s0"]}"#);
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["flow"]["name"], "be.h1.standing");
    assert_eq!(v["flow"]["kind"], "standing");
    let (st, v) = post(
        &s,
        "/best-effort/h1/oneshot",
        r#"{"path": ["s0", "s1"], "rate": "20Mbit/s", "burst": "3000B", "duration": "200ms"}"#,
    );
    assert_eq!(st, 201, "{v}");
    let name = v["flow"]["name"].as_str().unwrap().to_string();
    assert!(name.starts_with("be.h1.oneshot."), "{name}");
    assert_eq!(v["expires_in_ns"], 200_000_000);
    assert_eq!(v["flow"]["kind"], "oneshot");
    // Poll (bounded) until it is gone.
    let mut gone = false;
    for _ in 0..2000 {
        if get(&s, &format!("/flows/{name}")).0 == 404 {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(gone, "the one-shot reservation never expired");
    let list = get(&s, "/flows").1;
    assert_eq!(names(&list), vec!["be.h1.standing".to_string()]);
    assert_eq!(db_rows(&dir), 1);
    // The server load went back: s1 carries nothing.
    let net = get(&s, "/network").1;
    assert_eq!(net["servers"][1]["flows"], 0);
    assert_eq!(net["servers"][1]["load"]["exact"], "0");
    // Errors name the field.
    let (st, v) = post(
        &s,
        "/best-effort/h1/oneshot",
        r#"{"path": ["s0"], "rate": "1Mbit/s", "burst": "1500B"}"#,
    );
    assert_eq!((st, v["field"].clone()), (400, json!("duration")));
    let (st, v) = post(&s, "/best-effort/h1/standing", r#"{"path": ["s0"]}"#);
    assert_eq!((st, v["field"].clone()), (409, json!("name")));
    let (st, _) = req(&s, "DELETE", "/best-effort/h1/standing", None, Some(TOKEN));
    assert_eq!(st, 200);
    assert_eq!(db_rows(&dir), 0);
}

#[test]
fn tdp_frames_and_node_schedules() {
    let dir = temp_dir("tdp");
    let s = Server::start(&dir, true);
    let tdp = |name: &str, packets: u32, path: &[&str], d: &[u32]| {
        json!({"name": name, "path": path, "packets": packets, "size": 1002, "d": d}).to_string()
    };
    let path = ["s0/1", "r1/2", "r2/1"];
    // d = 0, 1, 2: a flow is sent by s0 in frame start, by r1 in start + 1, by r2 in
    // start + 3 (mod 4).
    let (st, a) = post(&s, "/tdp/flows", &tdp("a", 3, &path, &[0, 1, 2]));
    assert_eq!(st, 201, "{a}");
    assert_eq!(a["flow"]["start"], 0);
    assert_eq!(a["flow"]["id"], 1);
    assert_eq!(a["version"], 1);
    let slots = |v: &Value| -> Vec<u64> {
        v["flow"]["hops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["slot"].as_u64().unwrap())
            .collect()
    };
    assert_eq!(slots(&a), vec![0, 1, 3]);
    let (_, b) = post(&s, "/tdp/flows", &tdp("b", 1, &path, &[0, 1, 2]));
    assert_eq!(
        (b["flow"]["start"].clone(), slots(&b)),
        (json!(1), vec![1, 2, 0])
    );
    let (_, c) = post(&s, "/tdp/flows", &tdp("c", 2, &path, &[0, 1, 2]));
    assert_eq!(
        (c["flow"]["start"].clone(), slots(&c)),
        (json!(1), vec![1, 2, 0])
    );
    // Fill s0's other two frames, then a flow through s0 has no room anywhere.
    post(&s, "/tdp/flows", &tdp("d", 3, &["s0/1"], &[0]));
    post(&s, "/tdp/flows", &tdp("e", 3, &["s0/1"], &[0]));
    let (st, v) = post(&s, "/tdp/flows", &tdp("f", 1, &path, &[0, 1, 2]));
    assert_eq!(st, 422, "{v}");
    assert_eq!(v["breaking"]["kind"], "frames");
    assert_eq!(
        v["breaking"]["blocked"][0],
        json!({"start": 0, "hop": 0, "port": "s0/1", "frame": 0, "free_bits": 40, "needed_bits": 8320})
    );
    assert_eq!(v["breaking"]["blocked"].as_array().unwrap().len(), 4);
    // r2's table, exactly.
    let (st, r2) = get(&s, "/nodes/r2/schedule");
    assert_eq!(st, 200);
    assert_eq!(r2["version"], 5);
    assert_eq!(
        r2["ports"],
        json!([{"port": 1, "rate_bps": 100_000_000, "capacity_bits": 25_000, "rows": [
            {"slot": 0, "entries": [
                {"flow": "b", "id": 2, "packets": 1, "size": 1002},
                {"flow": "c", "id": 3, "packets": 2, "size": 1002}],
             "used_bits": 24_960, "free_bits": 40},
            {"slot": 3, "entries": [{"flow": "a", "id": 1, "packets": 3, "size": 1002}],
             "used_bits": 24_960, "free_bits": 40}]}])
    );
    assert_eq!(
        r2["flows"],
        json!([
            {"name": "a", "id": 1, "out_port": 1, "d": 2, "rows": [{"slot": 3, "packets": 3, "size": 1002}]},
            {"name": "b", "id": 2, "out_port": 1, "d": 2, "rows": [{"slot": 0, "packets": 1, "size": 1002}]},
            {"name": "c", "id": 3, "out_port": 1, "d": 2, "rows": [{"slot": 0, "packets": 2, "size": 1002}]}
        ])
    );
    assert_eq!(
        (r2["k"].clone(), r2["tf_ns"].clone(), r2["tf"].clone()),
        (json!(4), json!(250_000), json!("250us"))
    );
    // The sender's table has no d.
    let s0 = get(&s, "/nodes/s0/schedule").1;
    assert_eq!(s0["flows"][0]["d"], Value::Null);
    assert_eq!(get(&s, "/nodes/zz/schedule").0, 404);
    // A long poll answers once the version passes the one it names.
    let url = s.url.clone();
    let poll = std::thread::spawn(move || {
        let mut r = agent()
            .get(format!("{url}/nodes/r2/schedule?after=5&wait=30s"))
            .call()
            .unwrap();
        serde_json::from_str::<Value>(&r.body_mut().read_to_string().unwrap()).unwrap()
    });
    let (st, rel) = req(&s, "DELETE", "/tdp/flows/b", None, Some(TOKEN));
    assert_eq!(st, 200, "{rel}");
    assert_eq!(rel["version"], 6);
    let polled = poll.join().unwrap();
    assert_eq!(polled["version"], 6);
    assert_eq!(polled["flows"].as_array().unwrap().len(), 2);
    // An answer without waiting when already newer.
    assert_eq!(get(&s, "/nodes/r2/schedule?after=1").1["version"], 6);
    // b's frames are free again: a 1-packet flow takes start 1 now.
    let (_, g) = post(&s, "/tdp/flows", &tdp("g", 1, &path, &[0, 1, 2]));
    assert_eq!(
        (g["flow"]["start"].clone(), g["flow"]["id"].clone()),
        (json!(1), json!(2))
    );
    // Bad requests name the field; a name taken is 409.
    let (st, v) = post(&s, "/tdp/flows", &tdp("h", 1, &["s0/9"], &[0]));
    assert_eq!((st, v["field"].clone()), (400, json!("path[0]")));
    let (st, v) = post(&s, "/tdp/flows", &tdp("h", 1, &["s0/1", "r1/2"], &[0, 0]));
    assert_eq!((st, v["field"].clone()), (400, json!("d[1]")));
    let (st, v) = post(&s, "/tdp/flows", &tdp("a", 1, &["s0/1"], &[0]));
    assert_eq!((st, v["field"].clone()), (409, json!("name")));
    // After a restart the flows keep their frames and the version goes on.
    let before = get(&s, "/tdp/flows").1;
    drop(s);
    let s = Server::start(&dir, true);
    assert_eq!(get(&s, "/tdp/flows").1, before);
    assert_eq!(get(&s, "/nodes/r2/schedule").1["version"], 7);
}

#[test]
fn malformed_requests_are_400_naming_the_field() {
    let dir = temp_dir("malformed");
    let s = Server::start(&dir, false);
    // a key given twice: which would count?
    let (code, body) = post(
        &s,
        "/flows",
        r#"{"name": "f", "name": "g", "path": ["s0"], "rate": "1Mbit/s", "burst": "25B"}"#,
    );
    assert_eq!(code, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("\"name\" is given twice"),
        "{body}"
    );
    // too large a body: 413, in JSON like every other error
    let (code, body) = post(
        &s,
        "/flows",
        &format!("{{\"name\": \"{}\"}}", "x".repeat(100_000)),
    );
    assert_eq!(code, 413, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("larger than 64 KiB"),
        "{body}"
    );
    let cases = [
        (
            r#"{"name": "f", "path": ["s0"], "rate": 40, "burst": "25B"}"#,
            json!("rate"),
        ),
        (
            r#"{"name": "f", "path": ["s0"], "rate": "40Mbit", "burst": "25B"}"#,
            json!("rate"),
        ),
        (
            r#"{"name": "f", "path": ["s0"], "rate": "40Mbit/s", "burst": "25b"}"#,
            json!("burst"),
        ),
        (
            r#"{"name": "f", "path": ["s0"], "rate": "40Mbit/s", "burst": "25B", "colour": "red"}"#,
            json!("colour"),
        ),
        (
            r#"{"name": "f", "path": ["s0", "s9"], "rate": "40Mbit/s", "burst": "25B"}"#,
            json!("path[1]"),
        ),
        (
            r#"{"name": "f", "path": ["s0"], "rate": "0Mbit/s", "burst": "25B"}"#,
            json!("rate"),
        ),
        (
            r#"{"name": "f", "path": ["s0"], "rate": "1Mbit/s", "burst": "25B", "max_packet": "1514B"}"#,
            json!("burst"),
        ),
        (
            r#"{"name": "f", "path": ["s0"], "rate": "1Mbit/s", "burst": "25B", "deadline": "soon"}"#,
            json!("deadline"),
        ),
        (
            r#"{"name": "f g", "path": ["s0"], "rate": "1Mbit/s", "burst": "25B"}"#,
            json!("name"),
        ),
        (
            r#"{"name": "f", "path": ["s0"], "rate": "1Mbit/s"}"#,
            json!("burst"),
        ),
        (r#"{"name": "f", "path": ["s0"], "rate": "#, Value::Null),
        (r#"[1, 2]"#, Value::Null),
    ];
    for (body, field) in cases {
        let (st, v) = post(&s, "/flows", body);
        assert_eq!(st, 400, "{body}: {v}");
        assert_eq!(v["field"], field, "{body}: {v}");
        assert!(!v["error"].as_str().unwrap().is_empty());
    }
    let (_, v) = post(
        &s,
        "/flows",
        r#"{"name": "f", "path": ["s0"], "rate": "40Mbit", "burst": "25B"}"#,
    );
    assert_eq!(
        v["error"],
        "expected a bit rate like 100Mbit/s or 20B/us, got \"40Mbit\" (\"Mbit\" is a unit of data)"
    );
    assert_eq!(get(&s, "/flows").1["count"], 0);
    assert_eq!(db_rows(&dir), 0);
}

#[test]
fn concurrent_posts_leave_a_consistent_state() {
    let dir = temp_dir("concurrent");
    let s = Server::start(&dir, true);
    let url = s.url.clone();
    let workers: Vec<_> = (0..8)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || {
                let a = agent();
                let mut ok = Vec::new();
                for i in 0..10 {
                    let name = format!("c{t}-{i}");
                    let body = json!({"name": name, "path": ["s0", "s1"], "rate": "1500kbit/s", "burst": "300B", "deadline": "2ms"});
                    let mut r = a
                        .post(format!("{url}/flows"))
                        .header("Authorization", format!("Bearer {TOKEN}"))
                        .send_json(&body)
                        .unwrap();
                    let st = r.status().as_u16();
                    let _ = r.body_mut().read_to_string();
                    assert!(st == 201 || st == 422, "HTTP {st}");
                    if st == 201 {
                        ok.push(name);
                    }
                }
                ok
            })
        })
        .collect();
    let mut admitted: Vec<String> = workers
        .into_iter()
        .flat_map(|w| w.join().unwrap())
        .collect();
    admitted.sort();
    assert!(!admitted.is_empty());
    assert!(admitted.len() < 80, "the network cannot carry all 80");
    let list = get(&s, "/flows").1;
    let mut listed = names(&list);
    listed.sort();
    assert_eq!(listed, admitted);
    assert_eq!(db_rows(&dir), admitted.len() as i64);
    let net = get(&s, "/network").1;
    assert_eq!(net["stored_reservations"], admitted.len());
    assert_eq!(net["servers"][0]["flows"], admitted.len());
}

fn ctl(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).arg("ctl").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn client_subcommands_and_their_exit_statuses() {
    let dir = temp_dir("client");
    let s = Server::start(&dir, true);
    let token = dir.path("token");
    let token = token.to_str().unwrap();
    let add = |name: &str, rate: &str, deadline: &str| {
        ctl(&[
            "add",
            "--server",
            &s.url,
            "--token-file",
            token,
            "--name",
            name,
            "--path",
            "s0,s1",
            "--rate",
            rate,
            "--burst",
            "1500B",
            "--deadline",
            deadline,
        ])
    };
    let (code, out, err) = add("f1", "30Mbit/s", "1ms");
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.starts_with("admitted f1: bound 140 us (SFA; TFA "),
        "{out}"
    );
    // A deadline nobody can meet: rejected, exit 1.
    let (code, _, err) = add("f2", "1Mbit/s", "50us");
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("rejected: flow \"f2\""), "{err}");
    assert!(err.contains("breaking: flow f2"), "{err}");
    // Bad input: exit 2, naming the field.
    let (code, _, err) = add("f3", "30Mbit", "1ms");
    assert_eq!(code, 2);
    assert!(err.contains("HTTP 400: rate: expected a bit rate"), "{err}");
    let (code, _, err) = add("f1", "1Mbit/s", "1ms");
    assert_eq!(code, 2);
    assert!(err.contains("HTTP 409"), "{err}");
    // Without the token: exit 2.
    let (code, _, err) = ctl(&[
        "add", "--server", &s.url, "--name", "f4", "--path", "s0", "--rate", "1Mbit/s", "--burst",
        "1500B",
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("HTTP 401"), "{err}");
    // list, show, --json.
    let (code, out, _) = ctl(&["list", "--server", &s.url]);
    assert_eq!(code, 0);
    assert!(out.starts_with("1 flows (* best bound)\n"), "{out}");
    assert!(out.contains("f1"), "{out}");
    let (code, out, _) = ctl(&["show", "--server", &s.url, "f1"]);
    assert_eq!(code, 0);
    assert!(out.contains("SFA") && out.contains("exact 140 us"), "{out}");
    let (code, out, _) = ctl(&["show", "--server", &s.url, "--json", "f1"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["bounds"]["sfa"]["exact"], "140");
    let (code, _, _) = ctl(&["show", "--server", &s.url, "nope"]);
    assert_eq!(code, 2);
    // schedule of a node.
    post(
        &s,
        "/tdp/flows",
        r#"{"name": "t", "path": ["s0/1", "r1/2"], "packets": 2, "size": 500, "d": [0, 1]}"#,
    );
    let (code, out, _) = ctl(&["schedule", "--server", &s.url, "r1"]);
    assert_eq!(code, 0);
    assert!(
        out.starts_with("node r1: schedule version 1, TF 250us, k 4\n"),
        "{out}"
    );
    assert!(out.contains("t#1 2x500B"), "{out}");
    // remove.
    let (code, out, _) = ctl(&["remove", "--server", &s.url, "--token-file", token, "f1"]);
    assert_eq!((code, out.as_str()), (0, "removed f1\n"));
    // Unreachable: exit 3 with a clear message.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, _, err) = ctl(&["list", "--server", &format!("http://127.0.0.1:{port}")]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("cannot reach the controller at http://127.0.0.1:"),
        "{err}"
    );
}

#[test]
fn bad_start_options() {
    let dir = temp_dir("badstart");
    std::fs::write(
        dir.path("bad.toml"),
        "[[server]]\nname = \"s0\"\nrate = \"fast\"\nlatency = \"1us\"\n",
    )
    .unwrap();
    let out = Command::new(BIN)
        .args(["ctl", "serve", "--listen", "127.0.0.1:0", "--db"])
        .arg(dir.path("x.db"))
        .arg("--network")
        .arg(dir.path("bad.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.toml:3: server[0] \"s0\".rate"), "{err}");
    for opt in ["--header-timeout", "--body-timeout"] {
        let out = Command::new(BIN)
            .args(["ctl", "serve", "--listen", "127.0.0.1:0", opt, "0s", "--db"])
            .arg(dir.path("x.db"))
            .arg("--network")
            .arg(dir.path("net.toml"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{opt}: expected a positive duration")),
            "{err}"
        );
    }
}

#[test]
fn one_server_per_database_and_its_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("onedb");
    let s = Server::start(&dir, false);
    let serve_again = |token: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.args(["ctl", "serve", "--listen", "127.0.0.1:0", "--db"])
            .arg(dir.path("ctl.db"))
            .arg("--network")
            .arg(dir.path("net.toml"));
        if let Some(t) = token {
            cmd.arg("--token-file").arg(dir.path(t));
        }
        cmd.stdin(Stdio::null()).output().unwrap()
    };
    // a second controller on the same database would admit what the first already
    // has: it exits 3 naming the holder
    let out = serve_again(None);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is locked by another process (PID ") && err.contains("ctl.db"),
        "{err}"
    );
    for f in ["ctl.db", "ctl.db-wal", "ctl.db.lock"] {
        if let Ok(m) = std::fs::metadata(dir.path(f)) {
            assert_eq!(m.permissions().mode() & 0o777, 0o600, "{f}");
        }
    }
    s.kill9();
    // a token anyone may rewrite is refused, before the database is touched
    std::fs::write(dir.path("open-token"), "t\n").unwrap();
    std::fs::set_permissions(
        dir.path("open-token"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let out = serve_again(Some("open-token"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("others can write it (mode 666)"), "{err}");
}

#[test]
fn sigterm_answers_a_long_poll_and_stops() {
    let dir = temp_dir("stop");
    let mut s = Server::start(&dir, false);
    let version = get(&s, "/nodes/r2/schedule").1["version"].as_u64().unwrap();
    let url = format!("{}/nodes/r2/schedule?after={version}&wait=30s", s.url);
    let poll = std::thread::spawn(move || {
        let t0 = std::time::Instant::now();
        let r = agent().get(&url).call().map(|r| r.status().as_u16());
        (r.ok(), t0.elapsed())
    });
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's PID.
    let rc = unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let t0 = std::time::Instant::now();
    // bounded: the server's grace is 1.5 s; give it far more before calling it hung
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > Duration::from_secs(20) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stopped_after = t0.elapsed();
    assert!(status.is_some(), "still running 20 s after SIGTERM");
    let (answer, waited) = poll.join().unwrap();
    eprintln!(
        "stopped {stopped_after:?} after SIGTERM; the long poll was answered after {waited:?}"
    );
    // the long poll got its answer (the current schedule), not a dropped connection
    assert_eq!(answer, Some(200));
}

/// The server's `host:port`.
fn addr(s: &Server) -> String {
    s.url.trim_start_matches("http://").to_string()
}

/// Reads what the server sends until it closes the connection or `guard` passes:
/// the text, and whether it closed.
fn read_until_closed(sock: &mut std::net::TcpStream, guard: Duration) -> (String, bool) {
    use std::io::Read;
    let t0 = std::time::Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        let left = guard.saturating_sub(t0.elapsed());
        if left.is_zero() {
            break false;
        }
        sock.set_read_timeout(Some(left)).unwrap();
        match sock.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                break false
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            // reset: closed too
            Err(_) => break true,
        }
    };
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

/// Clients that hold a connection without finishing a request: one that sends
/// nothing, one that stops inside the headers, one that stops inside the body.
fn stuck_clients(s: &Server) -> Vec<std::net::TcpStream> {
    use std::io::Write;
    let a = addr(s);
    let silent = std::net::TcpStream::connect(&a).unwrap();
    let mut headers = std::net::TcpStream::connect(&a).unwrap();
    headers
        .write_all(b"GET /network HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    let mut body = std::net::TcpStream::connect(&a).unwrap();
    body.write_all(
        b"POST /flows HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\":",
    )
    .unwrap();
    vec![silent, headers, body]
}

#[test]
fn a_connection_that_sends_nothing_or_idles_is_closed_after_the_header_timeout() {
    use std::io::Write;
    let dir = temp_dir("headertimeout");
    let s = Server::start_with(&dir, false, &["--header-timeout", "300ms"]);
    // connected, sends nothing, never closes
    let mut silent = std::net::TcpStream::connect(addr(&s)).unwrap();
    // one request answered, then idle on a kept-alive connection
    let mut idle = std::net::TcpStream::connect(addr(&s)).unwrap();
    idle.write_all(b"GET /network HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    // guard: far above the 300 ms timeout, only there so a hang fails the test
    let (text, closed) = read_until_closed(&mut silent, Duration::from_secs(5));
    assert!(
        closed,
        "a silent client was still connected 5 s later: {text:?}"
    );
    assert!(!text.contains(" 200 "), "{text}");
    let (text, closed) = read_until_closed(&mut idle, Duration::from_secs(5));
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(
        closed,
        "an idle kept-alive connection was still open 5 s later"
    );
    // the server is still there
    assert_eq!(get(&s, "/network").0, 200);
}

#[test]
fn a_body_that_does_not_arrive_in_time_is_answered_408_and_closed() {
    use std::io::Write;
    let dir = temp_dir("bodytimeout");
    let s = Server::start_with(&dir, false, &["--body-timeout", "300ms"]);
    let mut sock = std::net::TcpStream::connect(addr(&s)).unwrap();
    // Content-Length 100, then only 10 bytes
    sock.write_all(
        b"POST /flows HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"name\": ",
    )
    .unwrap();
    let (text, closed) = read_until_closed(&mut sock, Duration::from_secs(5));
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(
        text.contains("\"error\":\"the request body did not arrive within 300ms\""),
        "{text}"
    );
    assert!(closed, "the connection was still open 5 s later");
    assert_eq!(get(&s, "/flows").0, 200);
    assert!(names(&get(&s, "/flows").1).is_empty());
}

#[test]
fn requests_are_answered_while_clients_hold_connections_half_open() {
    let dir = temp_dir("halfopen");
    let s = Server::start(&dir, false);
    let _stuck = stuck_clients(&s);
    assert_eq!(get(&s, "/network").0, 200);
    let (code, body) = req(
        &s,
        "POST",
        "/flows",
        Some(&flow("f1", "1Mbit/s", "5ms")),
        None,
    );
    assert_eq!(code, 201, "{body}");
    assert_eq!(names(&get(&s, "/flows").1), ["f1"]);
}

#[test]
fn sigterm_stops_the_server_whatever_half_open_clients_do() {
    let dir = temp_dir("stophalfopen");
    // default timeouts (10 s): the stuck clients are still connected at the stop
    let mut s = Server::start(&dir, false);
    let mut stuck = stuck_clients(&s);
    assert_eq!(get(&s, "/network").0, 200);
    // SAFETY: kill(2) on our own child's PID.
    let rc = unsafe { libc::kill(s.child.id() as i32, libc::SIGTERM) };
    assert_eq!(rc, 0);
    let t0 = std::time::Instant::now();
    // the grace is 1.5 s; 5 s is only the guard against a hang
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break Some(st);
        }
        if t0.elapsed() > Duration::from_secs(5) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    eprintln!("stopped {:?} after SIGTERM", t0.elapsed());
    assert!(status.is_some(), "still running 5 s after SIGTERM");
    assert_eq!(status.unwrap().code(), Some(0));
    for c in &mut stuck {
        let (_, closed) = read_until_closed(c, Duration::from_secs(5));
        assert!(closed);
    }
}
