//! docs/FORMATS.md cannot drift from the code: every key a file parser accepts and
//! every field a result document carries must be written there.
//!
//! **TOML keys.** Each table of each file format is fed to its own parser with one
//! key the parser cannot know, `zzz_unknown = 1`. The parsers refuse unknown keys and
//! say which ones they take (serde's `deny_unknown_fields`: "unknown field
//! `zzz_unknown`, expected one of `a`, `b`, …"; the network file's and the export
//! rows' own checks word it their way), so the keys come from the parsers
//! themselves, not from a list kept here. Each key must appear as `` `key` `` inside
//! the section of FORMATS.md that documents that table: from the table's heading to
//! the next heading of the same or a higher level.
//!
//! **JSON fields.** The binary runs a few cheap commands that need no root (probes on
//! loopback, the simulator, calc, export, host audit, a sender and a receiver node,
//! the demo without its live part) and every object key of every document is looked
//! up as `` `key` `` in the section "The result document". Keys that are data rather
//! than field names are skipped, with their values still walked: the keys of an
//! object that has any key not made of `a-z`, `0-9` and `_` starting with a letter or
//! `_` (percentiles such as `"99.9"`, flow ids such as `"3"`), and the keys of the
//! objects named in [`DATA_MAPS`] (node names, boot parameters). The node document's
//! `config` is the node file as read, so its keys are looked up in "Node file".

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Objects whose keys are names from the input or the host, not fields.
const DATA_MAPS: &[&str] = &[
    // sim run: per router, by node name
    "node_events",
    // host facts: the latency-relevant parameters of /proc/cmdline, by name
    "boot_params",
];

/// The headings of the sections the test looks keys up in.
const RESULT_SECTION: &str = "## The result document";
const NODE_SECTION: &str = "## Node file";

fn doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/FORMATS.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of the section under the heading line `heading` (exact, without
/// trailing spaces), up to the next heading of the same or a higher level. Lines
/// inside ``` fences are never headings (TOML comments start with `#`).
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let level = heading.chars().take_while(|&c| c == '#').count();
    assert!(level > 0, "{heading:?} is not a heading");
    let mut fenced = false;
    let mut start = None;
    let mut offset = 0;
    for line in doc.split_inclusive('\n') {
        let here = offset;
        offset += line.len();
        let t = line.trim_end();
        if t.starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced || !t.starts_with('#') {
            continue;
        }
        let l = t.chars().take_while(|&c| c == '#').count();
        if !t[l..].starts_with(' ') {
            continue;
        }
        match start {
            None if t == heading => start = Some(here + line.len()),
            Some(s) if l <= level => return &doc[s..here],
            _ => {}
        }
    }
    match start {
        Some(s) => &doc[s..],
        None => panic!("docs/FORMATS.md has no heading {heading:?}"),
    }
}

fn documented(section: &str, key: &str) -> bool {
    section.contains(&format!("`{key}`"))
}

// ----- TOML keys ---------------------------------------------------------------------

/// Which parser reads a probe.
#[derive(Clone, Copy)]
enum Parser {
    /// `lockstep_plan::scenario::Scenario::parse` (a TDP scenario).
    Scenario,
    /// `lockstep_plan::nodefile::parse`.
    Node,
    /// `lockstep_netcalc::parse_network`.
    Network,
    /// The binary: these arguments, `{file}` replaced by the probe's file (its
    /// message on stderr).
    Binary(&'static [&'static str]),
}

struct Probe {
    /// The heading of the section that documents the table.
    heading: &'static str,
    parser: Parser,
    /// A file whose table in question holds `zzz_unknown = 1`.
    text: &'static str,
}

const LAB_PLAN: Parser = Parser::Binary(&["lab", "plan", "{file}"]);
const EXPORT: Parser = Parser::Binary(&["export", "{file}"]);
const CTL_SERVE: Parser = Parser::Binary(&[
    "ctl",
    "serve",
    "--tdp",
    "{file}",
    "--network",
    "{net}",
    "--db",
    "{db}",
    "--listen",
    "127.0.0.1:0",
]);

/// Probes whose table comes after a valid one (a table's missing required keys are
/// reported before a later table is read).
const JITTER_BASELINE: &str =
    "[scenario]\nkind = \"jitter\"\nname = \"x\"\nperiod = \"1ms\"\n[baseline]\nzzz_unknown = 1\n";
const JITTER_VARIANT: &str = "[scenario]\nkind = \"jitter\"\nname = \"x\"\nperiod = \"1ms\"\n\
                              [[variant]]\nname = \"v\"\nzzz_unknown = 1\n";
const SHAPED_TOP: &str = "zzz_unknown = 1\n[scenario]\nkind = \"shaped-switch\"\nname = \"x\"\n\
                          port_rate = \"100Mbit/s\"\nts = [\"1ms\"]\n\
                          rates = [\"1Mbit/s\", \"1Mbit/s\", \"1Mbit/s\"]\n";
const TDP_NODE: &str = "tf = \"250us\"\nk = 4\n[[node]]\nzzz_unknown = 1\n";
const TDP_PORT: &str =
    "tf = \"250us\"\nk = 4\n[[node]]\nname = \"a\"\n[[node.ports]]\nzzz_unknown = 1\n";

const PROBES: &[Probe] = &[
    // the TDP scenario
    Probe {
        heading: "### TDP scenario: the tables",
        parser: Parser::Scenario,
        text: "zzz_unknown = 1\n",
    },
    Probe {
        heading: "### TDP scenario: `[scenario]`",
        parser: Parser::Scenario,
        text: "[scenario]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### TDP scenario: `[[node]]`",
        parser: Parser::Scenario,
        text: "[[node]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### TDP scenario: `[[link]]`",
        parser: Parser::Scenario,
        text: "[[link]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### TDP scenario: `[[flow]]`",
        parser: Parser::Scenario,
        text: "[[flow]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### TDP scenario: `[[load]]`",
        parser: Parser::Scenario,
        text: "[[load]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### TDP scenario: `[[fault]]`",
        parser: Parser::Scenario,
        text: "[[fault]]\nzzz_unknown = 1\n",
    },
    // the other kinds of scenario
    Probe {
        heading: "### Jitter scenario (`kind = \"jitter\"`)",
        parser: LAB_PLAN,
        text: "zzz_unknown = 1\n[scenario]\nkind = \"jitter\"\nname = \"x\"\nperiod = \"1ms\"\n",
    },
    Probe {
        heading: "#### jitter: `[scenario]`",
        parser: LAB_PLAN,
        text: "[scenario]\nkind = \"jitter\"\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "#### jitter: `[baseline]` and `[[variant]]`",
        parser: LAB_PLAN,
        text: JITTER_BASELINE,
    },
    Probe {
        heading: "#### jitter: `[baseline]` and `[[variant]]`",
        parser: LAB_PLAN,
        text: JITTER_VARIANT,
    },
    Probe {
        heading: "### rt-service scenario (`kind = \"rt-service\"`)",
        parser: LAB_PLAN,
        text: "zzz_unknown = 1\n[scenario]\nkind = \"rt-service\"\nname = \"x\"\n",
    },
    Probe {
        heading: "### rt-service scenario (`kind = \"rt-service\"`)",
        parser: LAB_PLAN,
        text: "[scenario]\nkind = \"rt-service\"\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### shaped-switch scenario (`kind = \"shaped-switch\"`)",
        parser: LAB_PLAN,
        text: SHAPED_TOP,
    },
    Probe {
        heading: "### shaped-switch scenario (`kind = \"shaped-switch\"`)",
        parser: LAB_PLAN,
        text: "[scenario]\nkind = \"shaped-switch\"\nzzz_unknown = 1\n",
    },
    // the node file
    Probe {
        heading: "### Node file: the tables",
        parser: Parser::Node,
        text: "zzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[node]`",
        parser: Parser::Node,
        text: "[node]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[node.frame]`",
        parser: Parser::Node,
        text: "[node.frame]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[[node.ports]]`",
        parser: Parser::Node,
        text: "[[node.ports]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[[node.routes]]`",
        parser: Parser::Node,
        text: "[[node.routes]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[[node.neighbours]]`",
        parser: Parser::Node,
        text: "[[node.neighbours]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[[node.flows]]`",
        parser: Parser::Node,
        text: "[[node.flows]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[node.flows.rule]`",
        parser: Parser::Node,
        text: "[[node.flows]]\n[node.flows.rule]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[[node.flows.rows]]`",
        parser: Parser::Node,
        text: "[[node.flows]]\n[[node.flows.rows]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[node.best_effort]`",
        parser: Parser::Node,
        text: "[node.best_effort]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[live]`",
        parser: Parser::Node,
        text: "[live]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### `[[live.flows]]`",
        parser: Parser::Node,
        text: "[[live.flows]]\nzzz_unknown = 1\n",
    },
    // the network file of calc
    Probe {
        heading: "## Network file (`lockstep calc`)",
        parser: Parser::Network,
        text: "zzz_unknown = 1\n",
    },
    Probe {
        heading: "### Network: `[[server]]`",
        parser: Parser::Network,
        text: "[[server]]\nname = \"s\"\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### Network: `[[flow]]`",
        parser: Parser::Network,
        text: "[[flow]]\nname = \"f\"\nzzz_unknown = 1\n",
    },
    // the export file
    Probe {
        heading: "## Export file (`lockstep export`)",
        parser: EXPORT,
        text: "zzz_unknown = 1\n",
    },
    Probe {
        heading: "### Export: `[[flow]]`",
        parser: EXPORT,
        text: "[[flow]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### Export: `[flow.match]`",
        parser: EXPORT,
        text: "[[flow]]\nname = \"c\"\n[flow.match]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### Export: `[[port]]`",
        parser: EXPORT,
        text: "[[port]]\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "### Export: `[[port]]`",
        parser: EXPORT,
        text: "[[port]]\ndev = \"eth1\"\ntf = \"250us\"\nk = 4\nrows = [{ slot = 0, zzz_unknown = 1 }]\n",
    },
    // the controller's TDP network
    Probe {
        heading: "## Controller TDP file (`lockstep ctl serve --tdp`)",
        parser: CTL_SERVE,
        text: "tf = \"250us\"\nk = 4\nzzz_unknown = 1\n",
    },
    Probe {
        heading: "## Controller TDP file (`lockstep ctl serve --tdp`)",
        parser: CTL_SERVE,
        text: TDP_NODE,
    },
    Probe {
        heading: "## Controller TDP file (`lockstep ctl serve --tdp`)",
        parser: CTL_SERVE,
        text: TDP_PORT,
    },
];

/// Scratch files of this test, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("lockstep-formats-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.0.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child killed when dropped.
struct Kid(Option<Child>);

impl Kid {
    fn spawn(args: &[&str]) -> Kid {
        let child = Command::new(env!("CARGO_BIN_EXE_lockstep"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the lockstep binary runs");
        Kid(Some(child))
    }

    /// Waits for the child to end by itself (killed after `limit`), reading its
    /// output meanwhile (a document larger than a pipe's buffer would block it).
    fn finish(mut self, limit: Duration, what: &str) -> Output {
        let mut child = self.0.take().unwrap();
        let drain = |r: Option<Box<dyn Read + Send>>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                if let Some(mut r) = r {
                    let _ = r.read_to_end(&mut buf);
                }
                buf
            })
        };
        let stdout = drain(
            child
                .stdout
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let stderr = drain(
            child
                .stderr
                .take()
                .map(|r| Box::new(r) as Box<dyn Read + Send>),
        );
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > limit {
                let _ = child.kill();
                let _ = child.wait();
                let err = stderr.join().unwrap();
                panic!(
                    "{what}: did not end within {limit:?}; stderr:\n{}",
                    String::from_utf8_lossy(&err)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        Output {
            status,
            stdout: stdout.join().unwrap(),
            stderr: stderr.join().unwrap(),
        }
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The message a parser gives for a probe.
fn message(p: &Probe, scratch: &Scratch) -> String {
    match p.parser {
        Parser::Scenario => match lockstep_plan::scenario::Scenario::parse("probe.toml", p.text) {
            Ok(_) => panic!("the scenario parser took {:?}", p.text),
            Err(e) => e.to_string(),
        },
        Parser::Node => match lockstep_plan::nodefile::parse(Path::new("probe.toml"), p.text) {
            Ok(_) => panic!("the node file parser took {:?}", p.text),
            Err(e) => e.to_string(),
        },
        Parser::Network => match lockstep_netcalc::parse_network(p.text) {
            Ok(_) => panic!("the network parser took {:?}", p.text),
            Err(e) => e.to_string(),
        },
        Parser::Binary(template) => {
            let file = scratch.file("probe.toml", p.text);
            let net = scratch.file(
                "net.toml",
                "[[server]]\nname = \"s\"\nrate = \"100Mbit/s\"\nlatency = \"10us\"\n",
            );
            let db = scratch.path("probe.db");
            let args: Vec<String> = template
                .iter()
                .map(|a| {
                    a.replace("{file}", &file)
                        .replace("{net}", &net)
                        .replace("{db}", &db)
                })
                .collect();
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = Kid::spawn(&args).finish(Duration::from_secs(20), &args.join(" "));
            assert_ne!(
                out.status.code(),
                Some(0),
                "lockstep {} took {:?}",
                args.join(" "),
                p.text
            );
            String::from_utf8_lossy(&out.stderr).into_owned()
        }
    }
}

/// The keys a refusal names: the backquoted words after the last "expected" (serde),
/// or the words after "expected" / "has" (the network file's and the export rows' own
/// messages), without the filler words.
fn keys_in(message: &str) -> Vec<String> {
    let tail = ["expected", " has "]
        .iter()
        .filter_map(|m| message.rfind(m).map(|i| &message[i + m.len()..]))
        .min_by_key(|t| t.len())
        .unwrap_or_else(|| panic!("no list of keys in {message:?}"));
    let tail = tail.lines().next().unwrap_or("");
    let words: Vec<String> = if tail.contains('`') {
        tail.split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect()
    } else {
        tail.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| !w.is_empty())
            .filter(|w| !matches!(*w, "one" | "of" | "or" | "and" | "tables" | "a"))
            .map(str::to_string)
            .collect()
    };
    words
}

#[test]
fn every_toml_key_is_documented() {
    let doc = doc();
    let scratch = Scratch::new("toml");
    let mut missing = Vec::new();
    let mut checked = 0;
    for p in PROBES {
        let msg = message(p, &scratch);
        assert!(
            msg.contains("zzz_unknown") && msg.contains("unknown"),
            "{:?} was not refused for its unknown key: {msg}",
            p.text
        );
        let keys = keys_in(&msg);
        assert!(
            !keys.is_empty() && !keys.iter().any(|k| k == "zzz_unknown"),
            "no list of keys in {msg:?} (probe {:?})",
            p.text
        );
        let sec = section(&doc, p.heading);
        for k in keys {
            checked += 1;
            if !documented(sec, &k) {
                missing.push(format!("`{k}` under {:?}", p.heading));
            }
        }
    }
    eprintln!("{checked} TOML keys checked in {} tables", PROBES.len());
    assert!(
        missing.is_empty(),
        "docs/FORMATS.md does not document these keys in their table's section:\n  {}",
        missing.join("\n  ")
    );
}

// ----- JSON fields ---------------------------------------------------------------------

fn is_field_name(k: &str) -> bool {
    let mut c = k.chars();
    matches!(c.next(), Some('a'..='z' | '_')) && c.all(|c| matches!(c, 'a'..='z' | '0'..='9' | '_'))
}

/// Every field name under `v` with the path where it was first seen (`name` is the
/// key `v` is under).
fn fields(v: &Value, name: &str, path: &str, out: &mut BTreeMap<String, String>) {
    match v {
        Value::Object(m) => {
            let data = DATA_MAPS.contains(&name) || !m.keys().all(|k| is_field_name(k));
            for (k, x) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if !data {
                    out.entry(k.clone()).or_insert_with(|| p.clone());
                }
                fields(x, k, &p, out);
            }
        }
        Value::Array(a) => {
            for x in a {
                fields(x, name, &format!("{path}[]"), out);
            }
        }
        _ => {}
    }
}

fn lockstep(args: &[&str]) -> Output {
    Kid::spawn(args).finish(Duration::from_secs(60), &args.join(" "))
}

/// The JSON document a command printed (exit status 0, or 1 for a failed check).
fn json_of(out: Output, what: &str) -> Value {
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1)),
        "{what}: exit status {code:?}; stderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: stdout is not one JSON document ({e}); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn run(args: &[&str]) -> (String, Value) {
    let what = args.join(" ");
    (what.clone(), json_of(lockstep(args), &what))
}

fn free_port() -> u16 {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().port()
}

fn scenario(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name)
        .display()
        .to_string()
}

const CYCLIC: &str = "[[server]]\nname = \"a\"\nrate = \"100Mbit/s\"\nlatency = \"10us\"\n\n\
[[server]]\nname = \"b\"\nrate = \"100Mbit/s\"\nlatency = \"10us\"\nbuffer = \"1MB\"\n\n\
[[flow]]\nname = \"f1\"\npath = [\"a\", \"b\"]\nrate = \"10Mbit/s\"\nburst = \"1514B\"\n\n\
[[flow]]\nname = \"f2\"\npath = [\"b\", \"a\"]\nrate = \"10Mbit/s\"\nburst = \"1514B\"\ndeadline = \"1ms\"\n";

const EXPORT_FILE: &str =
    "[[flow]]\nname = \"c\"\ndev = \"eth0\"\nrate = \"40Mbit/s\"\nburst = \"51514B\"\n\
match = { src = \"10.0.0.3\", dst = \"10.0.0.2\", proto = \"udp\", dport = 9000 }\n\n\
[[flow]]\nname = \"d\"\ndev = \"eth0\"\nrate = \"20Mbit/s\"\nburst = \"51514B\"\n\n\
[[port]]\ndev = \"eth1\"\ntf = \"250us\"\nk = 4\nrows = [0, 2]\n";

const NODE_FRAME: &str = "[node.frame]\ntf = \"2ms\"\nk = 4\n\n[[node.ports]]\nid = 1\n\
ifname = \"lo\"\nmac = \"02:00:00:00:00:01\"\naddr = \"127.0.0.1\"\nprefix_len = 8\n\
rate_bps = 1000000000\n\n";

/// The documents of every command this test runs, by command line.
fn documents(scratch: &Scratch) -> Vec<(String, Value)> {
    let dir = |n: &str| scratch.path(n);
    std::thread::scope(|s| {
        // host-independent commands, and short probes that need no peer
        let simple = s.spawn(|| {
            let cyclic = scratch.file("cyclic.toml", CYCLIC);
            let export = scratch.file("export.toml", EXPORT_FILE);
            let example = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../examples/loeser-fast-ethernet.toml")
                .display()
                .to_string();
            let calc_scenario = scenario("faults/link-down.toml");
            vec![
                run(&[
                    "probe",
                    "timer",
                    "--interval",
                    "1ms",
                    "-D",
                    "1s",
                    "--no-mlock",
                    "--strategy",
                    "hybrid",
                    "--threshold",
                    "1ns",
                    "--json",
                ]),
                run(&["probe", "noise", "-D", "300ms", "--no-mlock", "--json"]),
                // one thread per CPU: per-CPU results beside the merged ones
                run(&[
                    "probe",
                    "timer",
                    "--cpus",
                    "0",
                    "-l",
                    "5",
                    "--no-mlock",
                    "--json",
                ]),
                run(&[
                    "probe",
                    "noise",
                    "--cpus",
                    "0",
                    "-l",
                    "1000",
                    "--no-mlock",
                    "--json",
                ]),
                run(&[
                    "probe",
                    "noise",
                    "--period",
                    "1ms",
                    "-D",
                    "300ms",
                    "--no-mlock",
                    "--json",
                ]),
                run(&["host", "audit", "--json"]),
                run(&["calc", &example, "--json"]),
                run(&["calc", &cyclic, "--json"]),
                run(&["calc", &calc_scenario, "--json"]),
                run(&["export", &export, "--json"]),
            ]
        });
        // a shaped stream into a sink on loopback
        let stream = s.spawn(|| {
            let to = format!("127.0.0.1:{}", free_port());
            let sink = Kid::spawn(&[
                "probe",
                "sink",
                "--bind",
                &to,
                "-D",
                "5s",
                "--idle-timeout",
                "300ms",
                "--no-mlock",
                "--json",
                "-q",
            ]);
            std::thread::sleep(Duration::from_millis(300));
            let stream = run(&[
                "probe",
                "stream",
                "--to",
                &to,
                "--rate",
                "1000pps",
                "--shape",
                "8Mbit/s,2000B",
                "-D",
                "500ms",
                "--no-mlock",
                "--json",
                "-q",
            ]);
            let sink = json_of(
                sink.finish(Duration::from_secs(20), "probe sink"),
                "probe sink",
            );
            vec![stream, ("probe sink".to_string(), sink)]
        });
        // request/response on loopback, with a gate that fails
        let rr = s.spawn(|| {
            let at = format!("127.0.0.1:{}", free_port());
            let server = Kid::spawn(&[
                "probe",
                "rr",
                "server",
                "--bind",
                &at,
                "-D",
                "1500ms",
                "--no-mlock",
                "--json",
                "-q",
            ]);
            std::thread::sleep(Duration::from_millis(300));
            let client = run(&[
                "probe",
                "rr",
                "client",
                "--to",
                &at,
                "--interval",
                "1ms",
                "-D",
                "500ms",
                "--fail-above",
                "p50=1ns",
                "--max-loss",
                "0",
                "--no-mlock",
                "--json",
                "-q",
            ]);
            let server = json_of(
                server.finish(Duration::from_secs(20), "probe rr server"),
                "probe rr server",
            );
            vec![client, ("probe rr server".to_string(), server)]
        });
        // the simulator: a TDP scenario, one with a fault, a shaped-switch scenario;
        // then two saved runs compared
        let sim = s.spawn(|| {
            let mut docs = vec![
                run(&[
                    "sim",
                    "run",
                    &scenario("line.toml"),
                    "-D",
                    "1s",
                    "--json",
                    "-q",
                    "-o",
                    &dir("sim-line"),
                ]),
                run(&[
                    "sim",
                    "run",
                    &scenario("faults/link-down.toml"),
                    "--json",
                    "-q",
                    "-o",
                    &dir("sim-fault"),
                ]),
                run(&[
                    "sim",
                    "run",
                    &scenario("shaped-switch.toml"),
                    "-D",
                    "200ms",
                    "--json",
                    "-q",
                    "-o",
                    &dir("sim-shaped"),
                ]),
            ];
            let line = dir("sim-line");
            docs.push(run(&["compare", &line, &line, "--json"]));
            docs
        });
        // a sender and a receiver node on loopback
        let node = s.spawn(|| {
            let port = free_port();
            let rx = scratch.file(
                "rx.toml",
                &format!(
                    "[node]\nname = \"rx\"\nid = 2\nrole = \"receiver\"\n{NODE_FRAME}\
                     [live]\nbind = \"127.0.0.1:{port}\"\nstrategy = \"sleep\"\n"
                ),
            );
            let tx = scratch.file(
                "tx.toml",
                &format!(
                    "[node]\nname = \"tx\"\nid = 1\nrole = \"sender\"\n{NODE_FRAME}\
                     [[node.flows]]\nid = 3\nout_port = 1\nrows = [{{ slot = 0, packets = 2, size = 300 }}]\n\n\
                     [live]\nstrategy = \"sleep\"\n\n\
                     [[live.flows]]\nflow = 3\ndst = \"127.0.0.1:{port}\"\nsize = 192\ncount = 20\n"
                ),
            );
            let ready = dir("rx.ready");
            let receiver = Kid::spawn(&[
                "node", "-q", "--json", "--config", &rx, "-D", "1500ms", "--ready-file", &ready,
            ]);
            let start = Instant::now();
            while !Path::new(&ready).exists() {
                assert!(start.elapsed() < Duration::from_secs(10), "receiver not ready");
                std::thread::sleep(Duration::from_millis(10));
            }
            let sender = run(&["node", "-q", "--json", "--config", &tx]);
            let receiver = json_of(
                receiver.finish(Duration::from_secs(20), "node (receiver)"),
                "node (receiver)",
            );
            vec![sender, ("node (receiver)".to_string(), receiver)]
        });
        // the demo, simulated parts only
        let demo = s.spawn(|| {
            vec![run(&[
                "demo",
                "--no-live",
                "-D",
                "500ms",
                "--json",
                "-q",
                "-o",
                &dir("demo"),
            ])]
        });
        [simple, stream, rr, sim, node, demo]
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    })
}

#[test]
fn every_json_field_is_documented() {
    let doc = doc();
    let results = section(&doc, RESULT_SECTION);
    let node_file = section(&doc, NODE_SECTION);
    let scratch = Scratch::new("json");
    let docs = documents(&scratch);
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut node_config: BTreeMap<String, String> = BTreeMap::new();
    for (what, v) in &docs {
        let node = v["kind"] == "node";
        let mut here = BTreeMap::new();
        match v {
            Value::Object(m) if node => {
                for (k, x) in m {
                    here.entry(k.clone()).or_insert_with(|| k.clone());
                    if k == "config" {
                        fields(x, k, k, &mut node_config);
                    } else {
                        fields(x, k, k, &mut here);
                    }
                }
            }
            _ => fields(v, "", "", &mut here),
        }
        assert!(
            here.contains_key("kind"),
            "{what}: no `kind` in its document"
        );
        for (k, p) in here {
            seen.entry(k).or_insert_with(|| format!("{p} ({what})"));
        }
    }
    let mut missing: Vec<String> = seen
        .iter()
        .filter(|(k, _)| !documented(results, k))
        .map(|(k, p)| format!("`{k}` (at {p})"))
        .collect();
    missing.extend(
        node_config
            .iter()
            .filter(|(k, _)| !documented(node_file, k))
            .map(|(k, p)| format!("`{k}` (node document, {p}: under {NODE_SECTION:?})")),
    );
    eprintln!(
        "{} documents, {} field names checked (and {} of the node document's config)",
        docs.len(),
        seen.len(),
        node_config.len()
    );
    assert!(
        missing.is_empty(),
        "docs/FORMATS.md does not document these result-document fields under {RESULT_SECTION:?}:\n  {}",
        missing.join("\n  ")
    );
}
