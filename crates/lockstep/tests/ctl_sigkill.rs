//! `lockstep ctl serve` killed with SIGKILL while 20 clients ask for reservations at
//! once, then started again on the same database. Each client sends a fixed mix of
//! requests in a loop: shaped flows (admitted until the network is full, then 422),
//! shaped flows whose deadline no network meets (422), malformed shaped flows (400),
//! TDP flows (201) and TDP flows with a forwarding delay outside the cycle (400).
//! After the restart:
//!
//! - every reservation whose admission was answered 2xx is there;
//! - no reservation that was answered 4xx is there;
//! - whatever else is there had its request cut off by the kill (at most one per
//!   client);
//! - the stored set is admissible: the restart re-admits it (the server starts), every
//!   port fits its buffer and every flow meets its deadline, and the database holds
//!   exactly the reservations listed.
//!
//! Each run has its own database directory and port (port 0: the server prints the
//! one it took). Loops are bounded in count, waits in time (generous guards, no timing
//! asserted). The figures of each run are printed (`--nocapture` shows them).

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

mod common;

use common::ctl::{CtlDir, CtlServer};
use std::ffi::OsString;

/// Two 1 Gbit/s servers: about 200 flows of 1 Mbit/s with a 1500-byte bucket fit the
/// buffer of s0 (the 300 kB of backlog it allows); the admissions after those are
/// rejected.
const NETWORK: &str = r#"
[[server]]
name = "s0"
rate = "1Gbit/s"
latency = "10us"
buffer = "300kB"

[[server]]
name = "s1"
rate = "1Gbit/s"
latency = "10us"
"#;

/// TF 1 ms at 1 Gbit/s: 10^6 bits a frame, 64 frames a cycle; a 200-byte packet takes
/// 1904 bits, so every TDP request of the run finds frames.
const TDP: &str = r#"
tf = "1ms"
k = 64
[[node]]
name = "h"
ports = [{ id = 1, rate = "1Gbit/s" }]
[[node]]
name = "r"
ports = [{ id = 1, rate = "1Gbit/s" }]
"#;

/// Concurrent clients.
const CLIENTS: usize = 20;
/// Requests each client sends at most.
const PER_CLIENT: usize = 400;
/// Answers received before the kill.
const KILL_AFTER: usize = 400;
/// Guard on every wait (a hang fails the test instead of blocking it).
const GUARD: Duration = Duration::from_secs(120);

fn temp_dir() -> CtlDir {
    CtlDir::new("sigkill", &[("net.toml", NETWORK), ("tdp.toml", TDP)])
}

/// `ctl serve` on the directory's database and files.
fn start(dir: &CtlDir) -> CtlServer {
    let mut args: Vec<OsString> = vec!["--db".into(), dir.path("ctl.db").into()];
    args.extend(["--network".into(), dir.path("net.toml").into()]);
    args.extend(["--tdp".into(), dir.path("tdp.toml").into()]);
    CtlServer::spawn(&args)
}

/// SIGKILL (what `Child::kill` sends): no chance to clean up.
fn sigkill(mut server: CtlServer) {
    server.child.kill().unwrap();
    let status = server.child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(GUARD))
        .build()
        .into()
}

fn get(url: &str) -> Value {
    let mut r = agent().get(url).call().unwrap();
    assert_eq!(r.status().as_u16(), 200, "GET {url}");
    serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
}

/// What a client asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ask {
    /// A shaped flow the network takes while it has room (201, then 422).
    Flow,
    /// A shaped flow with a deadline no path meets (422).
    TightDeadline,
    /// A shaped flow whose bucket cannot hold its packet (400).
    Malformed,
    /// A TDP flow (201).
    Tdp,
    /// A TDP flow with a forwarding delay outside the cycle (400).
    BadTdp,
}

/// Request `i` of client `t`: its name, what it is, the path and the body.
fn request(t: usize, i: usize) -> (String, Ask, &'static str, Value) {
    let ask = match i % 10 {
        0..=4 => Ask::Flow,
        5 => Ask::TightDeadline,
        6 => Ask::Malformed,
        7 | 8 => Ask::Tdp,
        _ => Ask::BadTdp,
    };
    let name = format!("c{t}-{i}");
    let flow = |burst: &str, deadline: &str| {
        json!({"name": name, "path": ["s0", "s1"], "rate": "1Mbit/s", "burst": burst,
               "max_packet": "1500B", "deadline": deadline})
    };
    let tdp = |last_d: u32| json!({"name": name, "path": ["h/1", "r/1"], "packets": 1, "size": 200, "d": [0, last_d]});
    let (path, body) = match ask {
        Ask::Flow => ("/flows", flow("1500B", "50ms")),
        Ask::TightDeadline => ("/flows", flow("1500B", "1us")),
        Ask::Malformed => ("/flows", flow("100B", "50ms")),
        Ask::Tdp => ("/tdp/flows", tdp(1)),
        Ask::BadTdp => ("/tdp/flows", tdp(64)),
    };
    (name, ask, path, body)
}

/// One answer a client got, or `None` for a request cut off by the kill.
#[derive(Clone, Debug)]
struct Answer {
    name: String,
    ask: Ask,
    status: Option<u16>,
}

/// The figures of one run.
#[derive(Debug)]
struct Figures {
    acknowledged: usize,
    rejected: usize,
    cut_off: usize,
    present: usize,
}

/// One run: clients, SIGKILL after [`KILL_AFTER`] answers, restart, checks.
fn run_once() -> Figures {
    let dir = temp_dir();
    let server = start(&dir);
    let url = server.url.clone();
    let (tx, rx) = mpsc::channel::<Answer>();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|t| {
            let tx = tx.clone();
            let url = url.clone();
            std::thread::spawn(move || {
                let a = agent();
                for i in 0..PER_CLIENT {
                    let (name, ask, path, body) = request(t, i);
                    let status = match a
                        .post(format!("{url}{path}"))
                        .header("Content-Type", "application/json")
                        .send(body.to_string())
                    {
                        Ok(mut r) => {
                            // the whole answer, so that 2xx means the server wrote it
                            let _ = r.body_mut().read_to_string();
                            Some(r.status().as_u16())
                        }
                        Err(_) => None,
                    };
                    let cut = status.is_none();
                    if tx.send(Answer { name, ask, status }).is_err() || cut {
                        return; // the server is gone: this client stops
                    }
                }
            })
        })
        .collect();
    drop(tx);
    let mut answers = Vec::new();
    while answers.len() < KILL_AFTER {
        match rx.recv_timeout(GUARD) {
            Ok(a) => answers.push(a),
            Err(e) => panic!("{} answers, then {e}", answers.len()),
        }
    }
    sigkill(server);
    for c in clients {
        c.join().unwrap();
    }
    answers.extend(rx.try_iter());

    let mut acked = BTreeSet::new();
    let mut rejected = BTreeSet::new();
    let mut cut = BTreeSet::new();
    let mut seen = std::collections::BTreeMap::<Ask, BTreeSet<u16>>::new();
    for a in &answers {
        match a.status {
            None => {
                cut.insert(a.name.clone());
            }
            Some(s) => {
                seen.entry(a.ask).or_default().insert(s);
                let expected: &[u16] = match a.ask {
                    Ask::Flow => &[201, 422],
                    Ask::TightDeadline => &[422],
                    Ask::Malformed | Ask::BadTdp => &[400],
                    Ask::Tdp => &[201],
                };
                assert!(expected.contains(&s), "{a:?}: expected one of {expected:?}");
                if (200..300).contains(&s) {
                    acked.insert(a.name.clone());
                } else {
                    rejected.insert(a.name.clone());
                }
            }
        }
    }
    assert!(cut.len() <= CLIENTS, "{} requests cut off", cut.len());
    // the mix did what it is for: admissions and both kinds of rejection (the kill comes
    // about when the network is full, so shaped admissions are still being committed)
    assert_eq!(seen.get(&Ask::TightDeadline), Some(&BTreeSet::from([422])));
    assert_eq!(seen.get(&Ask::Malformed), Some(&BTreeSet::from([400])));
    assert_eq!(seen.get(&Ask::BadTdp), Some(&BTreeSet::from([400])));
    assert_eq!(seen.get(&Ask::Tdp), Some(&BTreeSet::from([201])));
    assert!(
        seen.get(&Ask::Flow).is_some_and(|s| s.contains(&201)),
        "{seen:?}"
    );

    // The restart re-admits every stored reservation (it refuses to start otherwise).
    let server = start(&dir);
    let flows = get(&format!("{}/flows", server.url));
    let tdp = get(&format!("{}/tdp/flows", server.url));
    let mut present = BTreeSet::new();
    for f in flows["flows"].as_array().unwrap() {
        assert_eq!(f["bounds"]["meets_deadline"], true, "{f}");
        present.insert(f["name"].as_str().unwrap().to_string());
    }
    for f in tdp["flows"].as_array().unwrap() {
        present.insert(f["name"].as_str().unwrap().to_string());
    }
    let missing: Vec<_> = acked.difference(&present).collect();
    assert!(
        missing.is_empty(),
        "acknowledged, missing after the restart: {missing:?}"
    );
    let back: Vec<_> = rejected.intersection(&present).collect();
    assert!(
        back.is_empty(),
        "rejected, present after the restart: {back:?}"
    );
    let unexplained: Vec<_> = present
        .iter()
        .filter(|n| !acked.contains(*n) && !cut.contains(*n))
        .collect();
    assert!(
        unexplained.is_empty(),
        "present, never acknowledged nor cut off: {unexplained:?}"
    );
    let net = get(&format!("{}/network", server.url));
    // a server with a buffer fits it (`fits` is null for one without)
    for s in net["servers"].as_array().unwrap() {
        let with_buffer = !s["buffer"].is_null();
        assert_eq!(
            s["fits"],
            if with_buffer {
                json!(true)
            } else {
                Value::Null
            },
            "{s}"
        );
    }
    assert_eq!(net["reservations"], present.len(), "{net}");
    assert_eq!(net["stored_reservations"], present.len(), "{net}");
    let db = rusqlite::Connection::open_with_flags(
        dir.path("ctl.db"),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let rows: i64 = db
        .query_row("SELECT COUNT(*) FROM reservation", [], |r| r.get(0))
        .unwrap();
    assert_eq!(rows, present.len() as i64);
    Figures {
        acknowledged: acked.len(),
        rejected: rejected.len(),
        cut_off: cut.len(),
        present: present.len(),
    }
}

#[test]
fn sigkill_under_20_clients_keeps_every_acknowledged_reservation_and_no_rejected_one() {
    let f = run_once();
    eprintln!(
        "ctl SIGKILL: {} answers before the kill: {} acknowledged, {} rejected, {} cut off; {} present after the restart",
        f.acknowledged + f.rejected,
        f.acknowledged,
        f.rejected,
        f.cut_off,
        f.present
    );
    assert!(f.acknowledged > 0 && f.present >= f.acknowledged);
}
