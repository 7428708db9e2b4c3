//! The client subcommands (`lockstep ctl add|remove|list|show|schedule`): one HTTP
//! request each, the answer as a table (or the server's JSON with `--json`).
//!
//! Exit status: 0 done, 1 the controller rejected the flow (HTTP 422), 2 bad input
//! (HTTP 400, 401, 403, 404, 409 or a bad option), 3 the controller cannot be
//! reached or failed (HTTP 5xx).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration as StdDuration;

use anyhow::Result;
use clap::Args;
use serde_json::{json, Value};

use crate::{CheckFailed, EnvError, UsageError};

/// Where the controller is, and how to prove the right to change it.
#[derive(Args, Debug, Clone)]
pub struct ServerArgs {
    /// The controller's URL.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:7878")]
    pub server: String,
    /// A file holding the bearer token (needed for changes when the server has one).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Print the server's JSON answer on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct AddArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The flow's name.
    #[arg(long)]
    pub name: String,
    /// Servers the flow crosses, in order: `s0,s1,s2`.
    #[arg(long, value_name = "S0,S1,..", value_delimiter = ',', required = true)]
    pub path: Vec<String>,
    /// Sustained rate r (`40Mbit/s`).
    #[arg(long)]
    pub rate: String,
    /// Bucket b (`25B`).
    #[arg(long)]
    pub burst: String,
    /// Peak rate C (needs --max-packet).
    #[arg(long)]
    pub peak: Option<String>,
    /// Largest packet M (`1514B`).
    #[arg(long)]
    pub max_packet: Option<String>,
    /// End-to-end delay the flow needs (`1ms`).
    #[arg(long)]
    pub deadline: Option<String>,
}

#[derive(Args, Debug)]
pub struct NameArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The flow's name.
    pub name: String,
}

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    pub server: ServerArgs,
}

#[derive(Args, Debug)]
pub struct ScheduleArgs {
    #[command(flatten)]
    pub server: ServerArgs,
    /// The node whose scheduling table to print.
    pub node: String,
}

struct Client {
    agent: ureq::Agent,
    base: String,
    token: Option<String>,
}

impl Client {
    fn new(a: &ServerArgs) -> Result<Client> {
        let token = match &a.token_file {
            None => None,
            Some(p) => Some(read_token(p).map_err(UsageError)?),
        };
        if !(a.server.starts_with("http://") || a.server.starts_with("https://")) {
            return Err(UsageError(format!(
                "--server: expected a URL like http://127.0.0.1:7878, got \"{}\"",
                a.server
            ))
            .into());
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(StdDuration::from_secs(5)))
            .timeout_global(Some(StdDuration::from_secs(30)))
            .build()
            .into();
        Ok(Client {
            agent,
            base: a.server.trim_end_matches('/').to_string(),
            token,
        })
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a request; `(status, body)`. Unreachable: exit 3. The request runs on a
    /// thread of its own so that Ctrl-C/SIGTERM ends the wait for a slow or silent
    /// controller at once (exit 3; a change may or may not have been made then).
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> Result<(u16, Value)> {
        let (agent, url, base) = (self.agent.clone(), self.url(path), self.base.clone());
        let auth = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let (method_name, body) = (method.to_string(), body.cloned());
        let answer = crate::stop::unless_stopped(move || -> Result<(u16, Value)> {
            let res = match (method_name.as_str(), &body) {
                ("POST", Some(b)) => {
                    let mut r = agent.post(&url);
                    if let Some(a) = &auth {
                        r = r.header("Authorization", a);
                    }
                    r.send_json(b)
                }
                ("DELETE", _) => {
                    let mut r = agent.delete(&url);
                    if let Some(a) = &auth {
                        r = r.header("Authorization", a);
                    }
                    r.call()
                }
                _ => agent.get(&url).call(),
            };
            let mut res = res.map_err(|e| {
                EnvError(format!(
                    "cannot reach the controller at {base}: {e} (is `lockstep ctl serve` running there?)"
                ))
            })?;
            let status = res.status().as_u16();
            let text = res
                .body_mut()
                .read_to_string()
                .map_err(|e| EnvError(format!("{url}: reading the answer: {e}")))?;
            let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
            Ok((status, v))
        });
        match answer {
            Ok(a) => a,
            Err(crate::stop::Cut::Stopped) => {
                let change = if method == "GET" {
                    "nothing was changed"
                } else {
                    "the change may or may not have been made"
                };
                Err(crate::Interrupted(format!(
                    "while waiting for the controller at {} ({method} {path}): {change}",
                    self.base
                ))
                .into())
            }
            Err(e) => Err(anyhow::anyhow!("{method} {path}: {e}")),
        }
    }
}

/// The token: the file's first line, trimmed.
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta =
        std::fs::metadata(path).map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let mode = meta.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(format!(
            "--token-file {}: others can write it (mode {:o}): chmod 600 it",
            path.display(),
            mode & 0o777
        ));
    }
    if mode & 0o044 != 0 {
        eprintln!(
            "lockstep: warning: --token-file {}: others can read the token (mode {:o}): chmod 600 it",
            path.display(),
            mode & 0o777
        );
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
    let t = text.lines().next().unwrap_or("").trim().to_string();
    if t.is_empty() {
        return Err(format!(
            "--token-file {}: the file is empty",
            path.display()
        ));
    }
    Ok(t)
}

/// Turns a non-success answer into the exit status it means.
fn check(status: u16, body: &Value, json: bool) -> Result<()> {
    if (200..300).contains(&status) {
        return Ok(());
    }
    if json {
        println!("{}", serde_json::to_string_pretty(body)?);
    }
    let text = |k: &str| {
        body.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match status {
        422 => {
            let mut msg = format!("rejected: {}", text("reason"));
            if let Some(b) = body.get("breaking") {
                let _ = write!(msg, "\n  breaking: {}", breaking_text(b));
            }
            Err(CheckFailed(msg).into())
        }
        400 | 401 | 403 | 404 | 409 => {
            let msg = match body.get("field").and_then(Value::as_str) {
                Some(f) => format!("{f}: {}", text("error")),
                None => match text("error") {
                    e if e.is_empty() => format!("HTTP {status}: {body}"),
                    e => e,
                },
            };
            Err(UsageError(format!("HTTP {status}: {msg}")).into())
        }
        _ => Err(EnvError(format!("the controller failed (HTTP {status}): {body}")).into()),
    }
}

fn breaking_text(b: &Value) -> String {
    let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("?").to_string();
    let v = |k: &str| shown(&b[k]);
    match b.get("kind").and_then(Value::as_str) {
        Some("flow") => format!(
            "flow {} (bound {} > deadline {})",
            s("flow"),
            v("bound"),
            v("deadline")
        ),
        Some("port") => format!(
            "port {} (backlog {} > buffer {})",
            s("server"),
            v("backlog"),
            v("buffer")
        ),
        Some("stability") => format!(
            "port {} (load {} > rate {})",
            s("server"),
            v("load"),
            v("rate")
        ),
        Some("frames") => format!(
            "{} start frames tried",
            b["blocked"].as_array().map_or(0, Vec::len)
        ),
        _ => b.to_string(),
    }
}

/// `{"exact", "unit", "value"}` → `80.4167 us`.
fn shown(v: &Value) -> String {
    match (
        v.get("value").and_then(Value::as_f64),
        v.get("unit").and_then(Value::as_str),
    ) {
        (Some(x), Some(u)) => format!("{} {u}", lockstep_netcalc::units::format_float(x)),
        _ => "-".into(),
    }
}

fn print_json(v: &Value) -> Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            let w = widths.get(c).copied().unwrap_or(0);
            let _ = write!(line, "{cell:<w$}  ");
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn flow_line(f: &Value) -> String {
    let b = &f["bounds"];
    format!(
        "bound {} ({}; TFA {}, SFA {}), deadline {}",
        shown(&b["bound"]),
        b["best"].as_str().unwrap_or("?").to_uppercase(),
        shown(&b["tfa"]),
        shown(&b["sfa"]),
        match b["meets_deadline"].as_bool() {
            Some(true) => format!("{} met", shown(&b["deadline"])),
            Some(false) => format!("{} MISSED", shown(&b["deadline"])),
            None => "-".into(),
        }
    )
}

pub fn add(a: AddArgs) -> Result<()> {
    let c = Client::new(&a.server)?;
    let mut body = json!({
        "name": a.name, "path": a.path, "rate": a.rate, "burst": a.burst,
    });
    for (k, v) in [
        ("peak", &a.peak),
        ("max_packet", &a.max_packet),
        ("deadline", &a.deadline),
    ] {
        if let Some(v) = v {
            body[k] = json!(v);
        }
    }
    let (status, v) = c.call("POST", "/flows", Some(&body))?;
    check(status, &v, a.server.json)?;
    if a.server.json {
        return print_json(&v);
    }
    let mut out = format!("admitted {}: {}\n", a.name, flow_line(&v["flow"]));
    if let Some(ch) = v["changed"].as_array().filter(|c| !c.is_empty()) {
        out.push_str("bounds that changed:\n");
        for f in ch {
            let _ = writeln!(
                out,
                "  {}: {}",
                f["name"].as_str().unwrap_or("?"),
                flow_line(f)
            );
        }
    }
    print!("{out}");
    Ok(())
}

pub fn remove(a: NameArgs) -> Result<()> {
    let c = Client::new(&a.server)?;
    let (status, v) = c.call("DELETE", &format!("/flows/{}", encode(&a.name)), None)?;
    check(status, &v, a.server.json)?;
    if a.server.json {
        return print_json(&v);
    }
    let mut out = format!("removed {}\n", a.name);
    if let Some(ch) = v["changed"].as_array().filter(|c| !c.is_empty()) {
        out.push_str("bounds that changed:\n");
        for f in ch {
            let _ = writeln!(
                out,
                "  {}: {}",
                f["name"].as_str().unwrap_or("?"),
                flow_line(f)
            );
        }
    }
    print!("{out}");
    Ok(())
}

pub fn list(a: ListArgs) -> Result<()> {
    let c = Client::new(&a.server)?;
    let (status, v) = c.call("GET", "/flows", None)?;
    check(status, &v, a.server.json)?;
    if a.server.json {
        return print_json(&v);
    }
    let mut rows = vec![vec![
        "flow".to_string(),
        "kind".into(),
        "path".into(),
        "rate".into(),
        "burst".into(),
        "TFA".into(),
        "SFA".into(),
        "deadline".into(),
        "verdict".into(),
    ]];
    for f in v["flows"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let s = |k: &str| f[k].as_str().unwrap_or("-").to_string();
        let b = &f["bounds"];
        let best = b["best"].as_str().unwrap_or("");
        let mark = |a: &str| if a == best { "*" } else { "" };
        rows.push(vec![
            s("name"),
            s("kind"),
            f["path"]
                .as_array()
                .map(|p| {
                    p.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(">")
                })
                .unwrap_or_default(),
            s("rate"),
            s("burst"),
            format!("{}{}", shown(&b["tfa"]), mark("tfa")),
            format!("{}{}", shown(&b["sfa"]), mark("sfa")),
            shown(&b["deadline"]),
            match b["meets_deadline"].as_bool() {
                Some(true) => "ok".into(),
                Some(false) => "LATE".into(),
                None => "-".into(),
            },
        ]);
    }
    print!(
        "{} flows (* best bound)\n{}",
        v["count"].as_u64().unwrap_or(0),
        table(&rows)
    );
    Ok(())
}

pub fn show(a: NameArgs) -> Result<()> {
    let c = Client::new(&a.server)?;
    let (status, v) = c.call("GET", &format!("/flows/{}", encode(&a.name)), None)?;
    check(status, &v, a.server.json)?;
    if a.server.json {
        return print_json(&v);
    }
    let s = |k: &str| v[k].as_str().unwrap_or("-").to_string();
    let b = &v["bounds"];
    let exact = |k: &str| {
        format!(
            "{} (exact {} {})",
            shown(&b[k]),
            b[k]["exact"].as_str().unwrap_or("?"),
            b[k]["unit"].as_str().unwrap_or("")
        )
    };
    let hops: Vec<String> = b["tfa_per_hop"]
        .as_array()
        .map(|h| h.iter().map(shown).collect())
        .unwrap_or_default();
    let rows = vec![
        vec!["flow".to_string(), s("name")],
        vec!["kind".into(), s("kind")],
        vec![
            "path".into(),
            v["path"]
                .as_array()
                .map(|p| {
                    p.iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(" > ")
                })
                .unwrap_or_default(),
        ],
        vec!["rate".into(), s("rate")],
        vec!["burst".into(), s("burst")],
        vec!["peak".into(), s("peak")],
        vec!["max packet".into(), s("max_packet")],
        vec!["deadline".into(), s("deadline")],
        vec!["TFA".into(), exact("tfa")],
        vec!["TFA per hop".into(), hops.join(", ")],
        vec!["SFA".into(), exact("sfa")],
        vec![
            "bound".into(),
            format!(
                "{} ({})",
                shown(&b["bound"]),
                b["best"].as_str().unwrap_or("?").to_uppercase()
            ),
        ],
        vec!["meets deadline".into(), b["meets_deadline"].to_string()],
    ];
    print!("{}", table(&rows));
    Ok(())
}

pub fn schedule(a: ScheduleArgs) -> Result<()> {
    let c = Client::new(&a.server)?;
    let (status, v) = c.call("GET", &format!("/nodes/{}/schedule", encode(&a.node)), None)?;
    check(status, &v, a.server.json)?;
    if a.server.json {
        return print_json(&v);
    }
    let mut out = format!(
        "node {}: schedule version {}, TF {}, k {}\n",
        a.node,
        v["version"],
        v["tf"].as_str().unwrap_or("?"),
        v["k"]
    );
    let mut rows = vec![vec![
        "port".to_string(),
        "frame".into(),
        "flows (packets x size)".into(),
        "used bits".into(),
        "free bits".into(),
    ]];
    for p in v["ports"].as_array().map(Vec::as_slice).unwrap_or(&[]) {
        let prows = p["rows"].as_array().map(Vec::as_slice).unwrap_or(&[]);
        if prows.is_empty() {
            rows.push(vec![
                p["port"].to_string(),
                "-".into(),
                "(nothing reserved)".into(),
                "0".into(),
                p["capacity_bits"].to_string(),
            ]);
        }
        for r in prows {
            let entries: Vec<String> = r["entries"]
                .as_array()
                .map(|e| {
                    e.iter()
                        .map(|e| {
                            format!(
                                "{}#{} {}x{}B",
                                e["flow"].as_str().unwrap_or("?"),
                                e["id"],
                                e["packets"],
                                e["size"]
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            rows.push(vec![
                p["port"].to_string(),
                r["slot"].to_string(),
                entries.join(", "),
                r["used_bits"].to_string(),
                r["free_bits"].to_string(),
            ]);
        }
    }
    out.push_str(&table(&rows));
    print!("{out}");
    Ok(())
}

/// Percent-encodes a path segment (names are plain, but a user may type anything).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b':') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_exit_codes() {
        let code = |s: u16, b: Value| -> u8 {
            match check(s, &b, false) {
                Ok(()) => 0,
                Err(e) if e.downcast_ref::<CheckFailed>().is_some() => 1,
                Err(e) if e.downcast_ref::<UsageError>().is_some() => 2,
                Err(_) => 3,
            }
        };
        assert_eq!(code(201, json!({})), 0);
        assert_eq!(code(422, json!({"rejected": true, "reason": "x"})), 1);
        for s in [400, 401, 403, 404, 409] {
            assert_eq!(code(s, json!({"error": "x"})), 2);
        }
        assert_eq!(code(500, json!({})), 3);
        let e = check(400, &json!({"error": "bad", "field": "rate"}), false).unwrap_err();
        assert_eq!(e.to_string(), "HTTP 400: rate: bad");
    }

    #[test]
    fn encoding() {
        assert_eq!(encode("f1.a:b"), "f1.a:b");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
    }
}
