//! A node's side of the controller: `lockstep node --controller URL --name NAME`
//! fetches its scheduling table at start ([`fetch`]), merges it into its `[node]`
//! configuration ([`apply`]) and watches for changes ([`Watcher`]: a thread that
//! long-polls `GET /nodes/{name}/schedule?after=V`, and retries every second while
//! the controller cannot be reached). The node takes a new table from the watcher
//! between two frames, so a change applies from a frame boundary on.
//!
//! Merging: the controller owns the reservations. Each flow of the table sets the
//! rows, output port and (past the first hop) forwarding delay `d` of the node's
//! `[[node.flows]]` entry with the same id, or is added as a new entry (without a
//! classifier rule or destination: an edge or sender needs those from its file);
//! every other flow of the file loses its rows.

use std::sync::mpsc;
use std::time::Duration as StdDuration;

use lockstep_core::net::PortId;
use lockstep_core::tdp::config::{FlowConfig, NodeConfig, RowConfig};

use super::alloc::NodeSchedule;

/// Longest a long poll waits on the server.
const POLL_WAIT: &str = "10s";
/// Pause after a failed request.
const RETRY: StdDuration = StdDuration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The controller cannot be reached or failed.
    #[error("controller {url}: {message}")]
    Unreachable { url: String, message: String },
    /// It answered, but not with a table this node can use.
    #[error("controller {url}: {message}")]
    Refused { url: String, message: String },
}

fn agent(timeout: StdDuration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_connect(Some(StdDuration::from_secs(5)))
        .timeout_global(Some(timeout))
        .build()
        .into()
}

/// One request for the node's table; with `after`, a long poll that answers once
/// the version passes it (or after the server's wait, with the same version).
pub fn fetch(base: &str, node: &str, after: Option<u64>) -> Result<(u64, NodeSchedule), SyncError> {
    let base = base.trim_end_matches('/');
    let url = match after {
        None => format!("{base}/nodes/{node}/schedule"),
        Some(v) => format!("{base}/nodes/{node}/schedule?after={v}&wait={POLL_WAIT}"),
    };
    let unreachable = |message: String| SyncError::Unreachable {
        url: url.clone(),
        message,
    };
    let mut res = agent(StdDuration::from_secs(30))
        .get(&url)
        .call()
        .map_err(|e| unreachable(e.to_string()))?;
    let status = res.status().as_u16();
    let text = res
        .body_mut()
        .read_to_string()
        .map_err(|e| unreachable(e.to_string()))?;
    if status >= 500 {
        return Err(unreachable(format!("HTTP {status}: {text}")));
    }
    if status != 200 {
        return Err(SyncError::Refused {
            url,
            message: format!("HTTP {status}: {text}"),
        });
    }
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| SyncError::Refused {
        url: url.clone(),
        message: format!("not a schedule: {e}"),
    })?;
    let version = v["version"].as_u64().unwrap_or(0);
    let sched: NodeSchedule = serde_json::from_value(v).map_err(|e| SyncError::Refused {
        url: url.clone(),
        message: format!("not a schedule: {e}"),
    })?;
    Ok((version, sched))
}

/// [`apply`], then the node's own validation (`node.flows[2].rows[0].slot: ...`).
pub fn apply_checked(node: &NodeConfig, sched: &NodeSchedule) -> Result<NodeConfig, String> {
    let out = apply(node, sched)?;
    lockstep_core::tdp::Node::new(out.clone())
        .map_err(|e| format!("node.{}: {}", e.field, e.message))?;
    Ok(out)
}

/// The node's configuration with the controller's table merged in (see the module
/// docs). The time reference must be the node's own.
pub fn apply(node: &NodeConfig, sched: &NodeSchedule) -> Result<NodeConfig, String> {
    if sched.k != node.frame.k || sched.tf_ns != node.frame.tf.as_nanos() {
        return Err(format!(
            "the controller's TDP network has TF {} ns and k {}, this node TF {} ns and k {}",
            sched.tf_ns,
            sched.k,
            node.frame.tf.as_nanos(),
            node.frame.k
        ));
    }
    let mut out = node.clone();
    for f in &mut out.flows {
        f.rows.clear();
    }
    for sf in &sched.flows {
        let rows: Vec<RowConfig> = sf
            .rows
            .iter()
            .map(|r| RowConfig {
                slot: r.slot,
                packets: r.packets,
                size: r.size,
            })
            .collect();
        match out.flows.iter_mut().find(|f| f.id == sf.id) {
            Some(f) => {
                f.out_port = PortId(sf.out_port);
                f.rows = rows;
                if sf.d.is_some() {
                    f.d = sf.d;
                }
            }
            None => out.flows.push(FlowConfig {
                id: sf.id,
                rule: None,
                out_port: PortId(sf.out_port),
                d: sf.d,
                rows,
                police: true,
                dst: None,
            }),
        }
    }
    Ok(out)
}

/// A newer table, fetched in the background.
pub struct Update {
    pub version: u64,
    pub schedule: NodeSchedule,
}

/// Watches the controller for a newer table of one node.
pub struct Watcher {
    rx: mpsc::Receiver<Update>,
}

impl Watcher {
    /// Starts the watching thread from `version` on. It ends with the process, or at
    /// the first newer table after the watcher was dropped.
    pub fn spawn(base: String, node: String, version: u64) -> Watcher {
        let (tx, rx) = mpsc::channel();
        let _ = std::thread::Builder::new()
            .name("ctl-watch".into())
            .spawn(move || {
                let mut have = version;
                loop {
                    match fetch(&base, &node, Some(have)) {
                        Ok((v, schedule)) if v > have => {
                            have = v;
                            if tx
                                .send(Update {
                                    version: v,
                                    schedule,
                                })
                                .is_err()
                            {
                                return;
                            }
                        }
                        Ok(_) => {}
                        Err(_) => std::thread::sleep(RETRY),
                    }
                }
            });
        Watcher { rx }
    }

    /// The newest table received since the last call, if any (never blocks).
    pub fn take(&self) -> Option<Update> {
        self.rx.try_iter().last()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctl::alloc::{Allocator, TdpFlowSpec, TdpNetwork};

    const NODE: &str = r#"
name = "r1"
id = 1
role = "core"
[frame]
tf = "250us"
k = 4
[[ports]]
id = 1
ifname = "a"
mac = "02:00:00:00:01:01"
addr = "10.0.1.1"
prefix_len = 24
rate_bps = 100000000
padding = false
[[ports]]
id = 2
ifname = "b"
mac = "02:00:00:00:02:01"
addr = "10.0.2.1"
prefix_len = 24
rate_bps = 100000000
padding = false
[[flows]]
id = 7
out_port = 1
rows = [{ slot = 0, packets = 1, size = 100 }]
rule = { dst = "10.0.2.0/24" }
"#;

    #[test]
    fn the_table_replaces_the_rows() {
        let node: NodeConfig = toml::from_str(NODE).unwrap();
        let net = TdpNetwork::parse(
            "tf = \"250us\"\nk = 4\n[[node]]\nname = \"s0\"\nports = [{ id = 1, rate = \"100Mbit/s\" }]\n[[node]]\nname = \"r1\"\nports = [{ id = 2, rate = \"100Mbit/s\" }]\n",
        )
        .unwrap();
        let mut al = Allocator::new(net);
        let spec = |name: &str, id: Option<u32>| TdpFlowSpec {
            name: name.into(),
            id,
            path: vec!["s0/1".into(), "r1/2".into()],
            packets: 2,
            size: 500,
            d: vec![0, 2],
            start: None,
        };
        al.allocate(&spec("x", Some(7))).unwrap();
        al.allocate(&spec("y", Some(9))).unwrap();
        let out = apply(&node, &al.schedule("r1").unwrap()).unwrap();
        assert_eq!(out.flows.len(), 2);
        // Flow 7 keeps its rule, moves to port 2 with the controller's row.
        assert_eq!(out.flows[0].id, 7);
        assert_eq!(out.flows[0].rule, node.flows[0].rule);
        assert_eq!(out.flows[0].out_port, PortId(2));
        assert_eq!(out.flows[0].d, Some(2));
        assert_eq!(
            out.flows[0].rows,
            vec![RowConfig {
                slot: 2,
                packets: 2,
                size: 500
            }]
        );
        assert_eq!(out.flows[1].id, 9);
        assert_eq!(out.flows[1].rows[0].slot, 2);
        // The node accepts it.
        lockstep_core::tdp::Node::new(out).unwrap();
        // Without reservations, the file's rows go.
        al.release("x");
        al.release("y");
        let out = apply(&node, &al.schedule("r1").unwrap()).unwrap();
        assert!(out.flows[0].rows.is_empty());
        // Another time reference is refused.
        let mut other = node.clone();
        other.frame.k = 8;
        let e = apply(&other, &al.schedule("r1").unwrap()).unwrap_err();
        assert_eq!(
            e,
            "the controller's TDP network has TF 250000 ns and k 4, this node TF 250000 ns and k 8"
        );
    }
}
