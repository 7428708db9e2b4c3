//! `lockstep node` refuses bad node files and missing interfaces with the command-line
//! exit statuses and messages that say where the problem is. No root needed.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A scratch directory of this test, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "lsn-{:x}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const CORE: &str = r#"[node]
name = "r1"
id = 1
role = "core"

[node.frame]
tf = "1ms"
k = 4

[[node.ports]]
id = 1
ifname = "lsn-noexist0"
mac = "02:00:00:00:01:01"
addr = "10.0.1.1"
prefix_len = 24
rate_bps = 1000000000
padding = false
d = 1

[live]
strategy = "sleep"
"#;

fn node(config: &PathBuf) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockstep"))
        .args(["node", "-q", "--duration", "100ms", "--config"])
        .arg(config)
        .output()
        .unwrap()
}

#[test]
fn a_typo_is_exit_2_naming_file_line_and_field() {
    let dir = Scratch::new();
    let path = dir.0.join("node.toml");
    std::fs::write(&path, CORE.replace("strategy =", "stategy =")).unwrap();
    let out = node(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}, line 21, column 1, field live.stategy: unknown field `stategy`",
            path.display()
        )),
        "{err}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn the_nodes_own_checks_are_exit_2_too() {
    let dir = Scratch::new();
    let path = dir.0.join("r.toml");
    std::fs::write(&path, CORE.replace("d = 1", "d = 4")).unwrap();
    let out = node(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}, line 18, column 1, field node.ports[0].d: forwarding delay 4 is outside [1, k = 4)",
            path.display()
        )),
        "{err}"
    );
    // a file that is not there
    let out = node(&dir.0.join("missing.toml"));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("missing.toml: cannot read it"));
}

#[test]
fn a_missing_interface_or_privilege_is_exit_3() {
    let dir = Scratch::new();
    let path = dir.0.join("r.toml");
    std::fs::write(&path, CORE).unwrap();
    let out = node(&path);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    // as root: the interface is missing; otherwise the raw socket is refused
    assert!(err.contains("node.ports[0]"), "{err}");
    assert!(
        err.contains("no interface \"lsn-noexist0\"") || err.contains("CAP_NET_RAW"),
        "{err}"
    );
}

/// A sender of one flow into port 1 of [`CORE`]'s subnet.
const SENDER: &str = r#"[node]
name = "tx"
id = 2
role = "sender"

[node.frame]
tf = "1ms"
k = 4

[[node.ports]]
id = 1
ifname = "lsn-noexist1"
mac = "02:00:00:00:01:02"
addr = "10.0.1.2"
prefix_len = 24
rate_bps = 1000000000

[[node.flows]]
id = 1
out_port = 1
rows = [{ slot = 1, packets = 1, size = 256 }]

[live]
strategy = "sleep"

[[live.flows]]
flow = 1
dst = "10.0.2.2:7000"
size = 200
"#;

fn nodes(configs: &[&PathBuf], extra: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_lockstep"));
    c.args(["node", "-q", "--duration", "100ms"]).args(extra);
    for p in configs {
        c.arg("--config").arg(p);
    }
    c.output().unwrap()
}

#[test]
fn several_configs_run_routers_and_senders_only() {
    let dir = Scratch::new();
    let r1 = dir.0.join("r1.toml");
    let r2 = dir.0.join("r2.toml");
    let rx = dir.0.join("rx.toml");
    std::fs::write(&r1, CORE).unwrap();
    std::fs::write(&r2, CORE.replace("name = \"r1\"", "name = \"r2\"")).unwrap();
    std::fs::write(
        &rx,
        CORE.replace("role = \"core\"", "role = \"receiver\"")
            .replace("strategy = \"sleep\"", "bind = \"10.0.1.1:7000\""),
    )
    .unwrap();
    // a receiver among them
    let out = nodes(&[&r1, &rx], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: node.role: several --config run routers (edge, core) and senders in one process; a receiver cannot join them: it blocks on its socket until a packet comes (run it with a --config of its own)",
            rx.display()
        )),
        "{err}"
    );
    // a sender that would wait differently from the routers it joins
    let tx = dir.0.join("tx.toml");
    std::fs::write(&tx, SENDER.replace("\"sleep\"", "\"spin\"")).unwrap();
    let out = nodes(&[&tx, &r1], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: live.strategy: differs from {}; nodes sharing a thread share how it waits and runs",
            r1.display(),
            tx.display()
        )),
        "{err}"
    );
    // the same node twice
    let out = nodes(&[&r1, &r1], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("node.name: \"r1\" is given twice"), "{err}");
    // routers that would wait differently
    std::fs::write(
        &r2,
        CORE.replace("name = \"r1\"", "name = \"r2\"")
            .replace("\"sleep\"", "\"spin\""),
    )
    .unwrap();
    let out = nodes(&[&r1, &r2], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}: live.strategy: differs from {}",
            r2.display(),
            r1.display()
        )),
        "{err}"
    );
    // the controller's table is for one node
    let out = nodes(&[&r1, &r2], &["--controller", "http://127.0.0.1:9"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--controller: takes a single --config"),
        "{err}"
    );
}

#[test]
fn a_namespace_is_checked() {
    let dir = Scratch::new();
    let r1 = dir.0.join("r1.toml");
    // not a name `ip netns` can have
    std::fs::write(&r1, format!("{CORE}netns = \"a/b\"\n")).unwrap();
    let out = nodes(&[&r1], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("field live.netns"), "{err}");
    // only routers open sockets elsewhere
    std::fs::write(
        &r1,
        CORE.replace("role = \"core\"", "role = \"receiver\"")
            .replace(
                "strategy = \"sleep\"",
                "bind = \"10.0.1.1:7000\"\nnetns = \"lsn-x\"",
            ),
    )
    .unwrap();
    let out = nodes(&[&r1], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(
            "only a router or a sender opens its sockets in another namespace; this node is a receiver"
        ),
        "{err}"
    );
    // a sender opens its sockets in its namespace too (one that does not exist:
    // the environment, exit 3, named)
    std::fs::write(
        &r1,
        SENDER.replace("strategy = \"sleep\"", "netns = \"lsn-noexist-ns\""),
    )
    .unwrap();
    let out = nodes(&[&r1], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("live.netns") && err.contains("lsn-noexist-ns"),
        "{err}"
    );
    // a namespace that does not exist: the environment (exit 3), named
    std::fs::write(&r1, format!("{CORE}netns = \"lsn-noexist-ns\"\n")).unwrap();
    let out = nodes(&[&r1], &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("live.netns") && err.contains("lsn-noexist-ns"),
        "{err}"
    );
}
