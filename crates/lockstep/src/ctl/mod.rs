//! `lockstep ctl`: the admission controller (loeser §3.2) and its client.
//!
//! `lockstep ctl serve --db PATH --listen ADDR --network NETWORK.toml [--tdp TDP.toml]
//! [--token-file FILE]` holds a network of rate-latency servers (the `lockstep calc`
//! file) under admission control and, with `--tdp`, the TDP network's scheduling
//! tables. It admits a shaped flow only if its bound, every admitted flow's bound and
//! every buffer hold ([`lockstep_netcalc::Admission`], incremental); keeps best-effort
//! senders' standing reservations and their one-shot reservations, which expire;
//! allocates frames to TDP flows ([`alloc`]); and serves each node its scheduling
//! table. Reservations live in SQLite ([`store`]): every change is one transaction,
//! and a restart (after a crash too) re-admits them in insertion order, with the same
//! bounds ([`state`]). HTTP/JSON ([`server`], [`api`]); the API is in
//! `docs/CONTROLLER.md`.
//!
//! The TDP network (`--tdp FILE`): the time reference and every node's output ports
//! with their link rates; a hop of a TDP flow is `node/port`:
//!
//! ```toml
//! tf = "250us"
//! k = 4
//! guard = "5us"          # optional
//! [[node]]
//! name = "s0"
//! ports = [{ id = 1, rate = "100Mbit/s" }]
//! [[node]]
//! name = "r1"
//! ports = [{ id = 1, rate = "100Mbit/s" }, { id = 2, rate = "100Mbit/s" }]
//! ```
//!
//! Nodes (`lockstep node --controller URL --name NAME`) fetch their table at start
//! and watch it for changes ([`sync`]).
//!
//! Client subcommands ([`client`]): `add`, `remove`, `list`, `show`, `schedule NODE`;
//! exit 1 on a rejection, 2 on bad input, 3 when the controller cannot be reached.

pub mod alloc;
pub mod api;
pub mod client;
pub mod server;
pub mod state;
pub mod store;
pub mod sync;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};

use crate::{EnvError, UsageError};

#[derive(Subcommand, Debug)]
pub enum CtlCmd {
    /// Run the admission controller: HTTP/JSON API, reservations in SQLite.
    Serve(ServeArgs),
    /// Ask the controller to admit a shaped flow (exit 1 if it is rejected).
    Add(client::AddArgs),
    /// Remove a flow.
    Remove(client::NameArgs),
    /// List the flows with their bounds.
    List(client::ListArgs),
    /// One flow: its request and its exact bounds.
    Show(client::NameArgs),
    /// A node's TDP scheduling table.
    Schedule(client::ScheduleArgs),
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The database file (created if missing).
    #[arg(long, value_name = "PATH")]
    pub db: PathBuf,
    /// Where to listen (port 0 picks a free port; the address is printed).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:7878")]
    pub listen: SocketAddr,
    /// The network: [[server]] tables as for `lockstep calc` ([[flow]] tables there
    /// are fixed reservations).
    #[arg(long, value_name = "NETWORK.toml")]
    pub network: PathBuf,
    /// The TDP network (time reference, nodes and ports) for frame allocation.
    #[arg(long, value_name = "TDP.toml")]
    pub tdp: Option<PathBuf>,
    /// Changes need `Authorization: Bearer <the file's first line>`.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Round the delay each hop passes on to the next up to this step (e.g. 1ps):
    /// every bound stays a valid upper bound, larger by at most the flows' rates times
    /// one step per hop, and deep networks admit several times faster. Default:
    /// exact.
    #[arg(long, value_name = "DUR", value_parser = parse_grid)]
    pub grid: Option<lockstep_netcalc::Q>,
    /// Close a connection whose request headers have not arrived within this time of
    /// it opening or of the previous answer (also how long an idle connection stays
    /// open).
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_timeout)]
    pub header_timeout: std::time::Duration,
    /// Answer 408 and close the connection when a request body has not arrived
    /// within this time of its headers.
    #[arg(long, value_name = "DUR", default_value = "10s", value_parser = parse_timeout)]
    pub body_timeout: std::time::Duration,
}

pub fn run(cmd: CtlCmd) -> Result<()> {
    match cmd {
        CtlCmd::Serve(a) => serve(a),
        CtlCmd::Add(a) => client::add(a),
        CtlCmd::Remove(a) => client::remove(a),
        CtlCmd::List(a) => client::list(a),
        CtlCmd::Show(a) => client::show(a),
        CtlCmd::Schedule(a) => client::schedule(a),
    }
}

/// `--header-timeout`, `--body-timeout`: a positive duration.
fn parse_timeout(text: &str) -> Result<std::time::Duration, String> {
    let d = crate::cli::parse_duration_positive(text)?;
    Ok(std::time::Duration::from_nanos(d.as_nanos() as u64))
}

/// `--grid`: a positive time, exactly (`1ps`, `0.5ns`), in seconds.
fn parse_grid(text: &str) -> Result<lockstep_netcalc::Q, String> {
    let q = lockstep_netcalc::units::time(text).map_err(|e| e.to_string())?;
    if !q.is_positive() {
        return Err(format!("expected a positive step like 1ps, got \"{text}\""));
    }
    if q > lockstep_netcalc::Q::one() {
        return Err(format!("a step of \"{text}\" is above the limit of 1s"));
    }
    Ok(q)
}

fn serve(a: ServeArgs) -> Result<()> {
    let file = a.network.display().to_string();
    let text = std::fs::read_to_string(&a.network)
        .map_err(|e| UsageError(format!("--network {file}: cannot read it: {e}")))?;
    // `load` validates with the line of the offending field.
    lockstep_netcalc::load(&text).map_err(|e| {
        UsageError(match e.line {
            Some(l) => format!("{file}:{l}: {}", field_message(&e)),
            None => format!("{file}: {}", field_message(&e)),
        })
    })?;
    let network =
        lockstep_netcalc::parse_network(&text).map_err(|e| UsageError(format!("{file}: {e}")))?;
    let tdp = match &a.tdp {
        None => None,
        Some(p) => {
            let t = std::fs::read_to_string(p)
                .map_err(|e| UsageError(format!("--tdp {}: cannot read it: {e}", p.display())))?;
            Some(
                alloc::TdpNetwork::parse(&t)
                    .map_err(|e| UsageError(format!("{}: {e}", p.display())))?,
            )
        }
    };
    let token = match &a.token_file {
        None => None,
        Some(p) => Some(client::read_token(p).map_err(UsageError)?),
    };
    // one controller per database: a second would admit what the first already has
    let mut lock_path = a.db.as_os_str().to_owned();
    lock_path.push(".lock");
    let _lock = lockstep_linux::lockfile::FileLock::try_exclusive(std::path::Path::new(&lock_path))
        .map_err(|e| EnvError(format!("--db {}: {e}", a.db.display())))?;
    let grid = a.grid.clone();
    let (ctl, rep) = state::Controller::open(&network, tdp, &a.db, server::now_ns(), grid)
        .map_err(|e| match e {
            state::StartError::Store(e) => anyhow::Error::from(EnvError(e.to_string())),
            other => UsageError(other.to_string()).into(),
        })?;
    eprintln!(
        "lockstep ctl: network {file}: {} servers, {} fixed flows; database {}: {} flows re-admitted, {} TDP flows re-allocated, {} expired one-shots removed; schedule version {}{}",
        network.servers.len(),
        network.flows.len(),
        a.db.display(),
        rep.readmitted,
        rep.tdp,
        rep.expired,
        ctl.version(),
        if token.is_some() { "; changes need the token" } else { "" },
    );
    let timeouts = server::Timeouts {
        header: a.header_timeout,
        body: a.body_timeout,
    };
    server::serve(ctl, a.listen, token, timeouts, |addr| {
        eprintln!("lockstep ctl: listening on http://{addr}");
    })
    .map_err(|e| EnvError(format!("--listen {}: {e}", a.listen)))?;
    eprintln!("lockstep ctl: stopped");
    Ok(())
}

fn field_message(e: &lockstep_netcalc::InputError) -> String {
    match &e.field {
        Some(f) => format!("{f}: {}", e.message),
        None => e.message.clone(),
    }
}
