//! `lockstep node --config FILE.toml`: one live time-driven node (time-driven forwarding and the latency decomposition), one
//! process per node; or, with several `--config`, the routers and senders of several
//! nodes in one process, a thread running several of them ([`router::thread_of`]: a
//! sender in the thread of the first router listed after it; receivers refused). The file's `[node]` table is the sans-IO node's configuration,
//! `[live]` says how this process runs it ([`config`]).
//!
//! Roles:
//! - `sender` ([`sender`]): UDP sockets, one per flow (or whole frames through a
//!   frame port, `live.io`: [`hostio`]); wakes at the start of each of
//!   its flows' reserved frames and sends probe packets (seq, frame, `t0` = frame
//!   start, `t_wake`, `t_send`, room for 4 hop records), DSCP-marked with the frame
//!   in TDP mode.
//! - `edge` and `core` ([`router`]): a user-space router on AF_PACKET sockets that
//!   drives [`lockstep_core::tdp::node::Node`]; its module docs explain the frame loop.
//! - `receiver` ([`receiver`]): one UDP socket (or a frame port, `live.io`); per-flow statistics and the latency
//!   decomposition ([`lockstep_core::measure::decomp`]).
//!
//! Every node: `--start-at-ns T` (do nothing before T, so all nodes of a lab start
//! together), `--duration D` (from the start; routers and receivers stay on a little
//! longer, [`linger`], for the packets still in flight), stops cleanly on SIGINT/SIGTERM,
//! `--ready-file PATH` (touched once its sockets are open, before it waits for the
//! start), and on exit writes `DIR/<name>.json` with `--output DIR` (the same
//! document on stdout with `--json`):
//!
//! ```text
//! {"name", "role", "mode", "counters", "wakeup", "flows", "warnings",
//!  + "kind": "node", "lockstep", "command", "started_at", "host", "config",
//!    "realtime", "clock", "tf_ns", "k", "start_ns", "stop_ns", "stop_reason", ...}
//! ```
//!
//! `counters` is the router's [`lockstep_core::tdp::NodeCounters`], or the sender's
//! or receiver's own; `wakeup` the frame-timer wake-up latency (routers, senders);
//! `flows` the receiver's per-flow results ([`lockstep_core::measure::decomp::FlowResult`]). Per-packet files:
//! `DIR/<name>-tx.csv` (sender and routers: software TX timestamps per probe, keyed
//! by flow and seq) and `DIR/<name>-packets.csv` (receiver with `samples = true`).
//!
//! With `--controller URL [--name NAME]` the node takes its TDP rows from the
//! admission controller (`lockstep ctl serve`): the table is fetched and merged into
//! `[node]` before the file is checked, then watched (`crate::ctl::sync`); a sender
//! applies a new table between two frames; a router replaces its flows between two
//! frames too (`Node::update_flows`: packets in flight keep their frames; a table
//! that needs longer frame queues than the running ones is refused with a warning).
//!
//! Clock sync: the node reads the kernel's clock discipline (adjtimex). It warns when
//! the estimated error exceeds TF/10 on a synchronised clock; with `--require-sync`
//! it refuses (exit 3) an unsynchronised clock or one whose estimated error exceeds
//! TF/2. In a one-host lab all nodes share one clock: no `--require-sync` there.
//!
//! Exit status (the command line): 0 done, 2 a bad file or option (the message names the
//! file, line and field), 3 the environment (no privilege for raw sockets, a
//! missing interface or clock, an unsynchronised clock with `--require-sync`).

pub use lockstep_plan::nodefile as config;
mod hostio;
mod receiver;
mod router;
mod sender;

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use lockstep_core::sched::Policy;
use lockstep_core::stats::Summary;
use lockstep_core::tdp::config::{Mode, Role};
use lockstep_core::{ClockId, Duration, Instant};
use lockstep_linux::host::HostFacts;
use lockstep_linux::signal::stop_requested;
use lockstep_linux::Waiter;
use serde::Serialize;
use serde_json::{Map, Value};

use crate::cli::parse_duration_positive;
use crate::report::human::{dist_table, kv};
use crate::report::{write_atomic, Tool, SCHEMA_VERSION};
use crate::{EnvError, UsageError};
use config::{NodeFile, NodeIo};

#[derive(Args, Debug)]
pub struct NodeArgs {
    /// The node file: [node] (the node's configuration) and [live] (how to run it).
    /// Given several times, the routers (edge, core) and senders of all the files run
    /// in this one process (`--threads`), each thread waking once per frame for all
    /// its nodes, each opening its sockets in its file's `live.netns`; a sender runs in
    /// the thread of the first router listed after it. Receivers are refused.
    #[arg(long, short = 'c', value_name = "FILE", required = true)]
    pub config: Vec<PathBuf>,
    /// Run for this long after the start (default: until SIGINT/SIGTERM, or a
    /// sender's packet counts).
    #[arg(long, short = 'D', value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub duration: Option<Duration>,
    /// How long a sender sends (default: --duration). With several --config the
    /// routers among them run for --duration, the senders for this.
    #[arg(long, value_name = "DUR", value_parser = parse_duration_positive, allow_hyphen_values = true)]
    pub sender_duration: Option<Duration>,
    /// Write DIR/<name>.json and the per-packet CSV files here.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    /// Print the result document on stdout (human text goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Do nothing before this instant (ns of the node's clock): every node of a lab
    /// starts on the same frame.
    #[arg(long, value_name = "T", allow_hyphen_values = true)]
    pub start_at_ns: Option<i64>,
    /// Touch this file once the sockets are open and the node waits for its start.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,
    /// Touch DIR/<name> for every node once its sockets are open.
    #[arg(long, value_name = "DIR")]
    pub ready_dir: Option<PathBuf>,
    /// With several --config: spread the routers over this many threads (consecutive
    /// routers share one; each thread waits for the frame starts of its own routers
    /// and senders; a sender joins the thread of the first router listed after it).
    /// With `live.cpu = C` in the files, thread i is pinned to the i-th online CPU
    /// counting from C and wrapping round (C = 1 on CPUs 0-3, 3 threads: 1, 2, 3);
    /// more threads than online CPUs, or C not online, is refused (exit 2).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// Refuse to run (exit 3) on an unsynchronised clock or one whose estimated
    /// error exceeds TF/2 (across hosts; not in a one-host lab).
    #[arg(long)]
    pub require_sync: bool,
    /// Take the TDP scheduling table from the admission controller at this URL
    /// (`lockstep ctl serve`): fetched at start and watched for changes, which a
    /// sender applies from the next frame on (see `ctl::sync`).
    #[arg(long, value_name = "URL")]
    pub controller: Option<String>,
    /// This node's name at the controller (default: the node file's name).
    #[arg(long, value_name = "NAME", requires = "controller")]
    pub name: Option<String>,
    /// How the node moves its packets (over the file's `live.io`). Every role:
    /// `packet` (recvmmsg/sendmmsg on a raw socket), `ring` (a receive ring of blocks
    /// shared with the kernel, TPACKET_V3), `ring-v2` (a receive ring of frame slots,
    /// TPACKET_V2), `xdp` (an AF_XDP socket fed by an XDP program on the interface,
    /// before the kernel's stack; copy mode on veth; the fastest). Senders and
    /// receivers also `udp`, the kernel's UDP stack and their default (what the OS
    /// adds to a packet includes it); in a frame mode a sender writes whole frames to
    /// the next hop of its route and a receiver takes the frames to its address from
    /// the interface that has it. Routers default to `packet`, since the interface
    /// may carry the host's own traffic too, which an XDP program would take from the
    /// kernel's stack (`lockstep lab run` gives its routers `xdp`); `udp` is refused
    /// for them. With several --config it is the routers': a sender among them keeps
    /// its file's `live.io`. The mode used is in the result (`io`). A mode the kernel
    /// lacks is an error (exit 3), except `xdp`, which falls back to `packet` with a
    /// note.
    #[arg(long, value_name = "MODE", value_parser = parse_node_io)]
    pub io: Option<NodeIo>,
}

/// The frame port mode of `file.live.io` ([`apply_io`] set it): without one a router
/// uses the packet socket, since on a host of its own the interface may carry the
/// host's traffic too (the lab asks for `xdp` on its veths).
fn io_choice(file: &NodeFile) -> lockstep_linux::port::IoChoice {
    let mode = file.live.io.and_then(frame_mode);
    lockstep_linux::port::IoChoice::Force(mode.unwrap_or(lockstep_linux::port::IoMode::Packet))
}

/// The frame port mode of a node's I/O; `None` for the kernel's UDP stack.
pub(crate) fn frame_mode(io: NodeIo) -> Option<lockstep_linux::port::IoMode> {
    lockstep_linux::port::IoMode::parse(io.name())
}

/// `--io` over `live.io` over the role's default, written into `live.io` (the result
/// document's config shows what was used); a mode the role cannot use is refused.
fn apply_io(io: Option<NodeIo>, file: &mut NodeFile) -> Result<(), UsageError> {
    let role = file.node.role;
    if let Some(io) = io {
        io.check_role(role)
            .map_err(|m| UsageError(format!("--io {io}: {m}")))?;
        file.live.io = Some(io);
    }
    file.live.io.get_or_insert(NodeIo::default_for(role));
    Ok(())
}

/// [`apply_io`] for a node of a group (several `--config`): `--io` is the routers'
/// (how the lab sets their ports); a sender among them keeps its file's `live.io`.
fn group_io(io: Option<NodeIo>, file: &mut NodeFile) -> Result<(), UsageError> {
    if file.node.role == Role::Sender {
        file.live
            .io
            .get_or_insert(NodeIo::default_for(Role::Sender));
        return Ok(());
    }
    apply_io(io, file)
}

/// `--io`: one of the node I/O modes.
pub(crate) fn parse_node_io(s: &str) -> Result<NodeIo, String> {
    NodeIo::parse(s).ok_or_else(|| {
        format!(
            "unknown I/O mode \"{s}\": one of {}",
            NodeIo::NAMES.join(", ")
        )
    })
}

/// `--io`: one of the I/O modes.
pub(crate) fn parse_io(s: &str) -> Result<lockstep_linux::port::IoMode, String> {
    lockstep_linux::port::IoMode::parse(s).ok_or_else(|| {
        format!(
            "unknown I/O mode \"{s}\": one of {}",
            lockstep_linux::port::IoMode::NAMES.join(", ")
        )
    })
}

/// Why a node stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum StopReason {
    Duration,
    Signal,
    /// A sender sent every flow's `count`.
    Count,
}

/// What a role hands back for the result document.
pub(crate) struct Outcome {
    pub counters: Value,
    pub wakeup: Option<Summary>,
    pub flows: Option<Value>,
    /// Further role-specific top-level fields.
    pub extra: Map<String, Value>,
    pub stop: StopReason,
    pub stop_ns: i64,
    /// Lines and distributions for the human summary.
    pub lines: Vec<(&'static str, String)>,
    pub dists: Vec<(String, Summary)>,
}

/// Shared run context of every role.
pub(crate) struct Ctx {
    pub file: NodeFile,
    pub clock: ClockId,
    pub output: Option<PathBuf>,
    pub quiet: bool,
    pub ready_file: Option<PathBuf>,
    pub start_at_ns: Option<i64>,
    pub duration: Option<Duration>,
    pub warnings: Vec<String>,
    pub realtime: Value,
    /// The controller's table watcher (`--controller`).
    pub controller: Option<crate::ctl::sync::Watcher>,
    /// Routers: how the ports move frames (`--io`).
    pub io: lockstep_linux::port::IoChoice,
}

impl Ctx {
    /// A newer scheduling table from the controller merged into the node's
    /// configuration (which it then is), with its version; `None` when none came (or
    /// it cannot be used: a warning says why).
    pub fn schedule_update(&mut self) -> Option<u64> {
        let u = self.controller.as_ref()?.take()?;
        match crate::ctl::sync::apply_checked(&self.file.node, &u.schedule) {
            Ok(cfg) => {
                self.progress(&format!(
                    "schedule version {} from the controller",
                    u.version
                ));
                self.file.node = cfg;
                Some(u.version)
            }
            Err(e) => {
                self.warn(format!(
                    "schedule version {} from the controller not applied: {e}",
                    u.version
                ));
                None
            }
        }
    }

    pub fn progress(&self, text: &str) {
        if !self.quiet {
            eprintln!("{text}");
        }
    }

    pub fn warn(&mut self, w: impl Into<String>) {
        let w = w.into();
        self.progress(&format!("warning: {w}"));
        self.warnings.push(w);
    }

    /// `DIR/<name><suffix>` when `--output` was given.
    pub fn out_file(&self, suffix: &str) -> Option<PathBuf> {
        self.output
            .as_ref()
            .map(|d| d.join(format!("{}{suffix}", self.file.node.name)))
    }

    /// The waiter for frame starts.
    pub fn waiter(&self) -> Waiter {
        let live = &self.file.live;
        let mut w = Waiter::new(self.clock, live.strategy);
        if let Some(m) = live.margin {
            w = w.with_margin(m);
        }
        if live.fixed_margin {
            w = w.with_fixed_margin();
        }
        w
    }

    /// Touches the ready file (sockets are open, the node is about to wait).
    pub fn ready(&self) -> Result<()> {
        if let Some(p) = &self.ready_file {
            let mut f = std::fs::File::create(p)
                .with_context(|| format!("--ready-file: cannot create {}", p.display()))?;
            writeln!(f, "{}", std::process::id())?;
        }
        Ok(())
    }

    /// Waits for `--start-at-ns` (if any) and returns the start instant. Returns
    /// `None` when a stop was asked for meanwhile.
    pub fn wait_start(&self, waiter: &Waiter) -> Option<i64> {
        let now = waiter.now().ns;
        let Some(t) = self.start_at_ns.filter(|&t| t > now) else {
            return Some(now);
        };
        // In slices, so SIGTERM is seen while waiting for a far start.
        const SLICE: i64 = 50_000_000;
        loop {
            let now = waiter.now().ns;
            if stop_requested() {
                return None;
            }
            if now >= t {
                return Some(now);
            }
            let to = if t - now > SLICE { now + SLICE } else { t };
            waiter.wait_until(Instant::new(self.clock, to));
        }
    }

    /// The end of the run for a start at `start`: `--duration` after it for a sender;
    /// routers and receivers linger ([`linger`]) so that the packets still in flight
    /// when the senders stop arrive.
    pub fn end_for(&self, start: i64) -> Option<i64> {
        let node = &self.file.node;
        run_end(node.role, &node.frame, start, self.duration)
    }

    /// Applies `live.cpu` / `live.priority` to the calling thread and holds
    /// `/dev/cpu_dma_latency` (`live.dma_latency_zero`) until the state is dropped.
    pub fn apply_rt(&mut self) -> Result<Option<lockstep_linux::RtState>> {
        self.apply_rt_on(self.file.live.cpu)
    }

    /// [`Ctx::apply_rt`] with `cpu` in place of `live.cpu` (a router thread of
    /// several: [`router::run`]).
    pub fn apply_rt_on(&mut self, cpu: Option<usize>) -> Result<Option<lockstep_linux::RtState>> {
        let live = &self.file.live;
        let dma_latency_zero = live.dma_latency_zero.unwrap_or(live.priority.is_some());
        if cpu.is_none() && live.priority.is_none() && !dma_latency_zero {
            return Ok(None);
        }
        let req = lockstep_linux::rt::RtRequest {
            policy: live.priority.map(|_| Policy::Fifo),
            priority: live.priority,
            cpu,
            mlock: live.priority.is_some(),
            dma_latency_zero,
        };
        let state = lockstep_linux::rt::apply(&req)?;
        self.realtime = serde_json::to_value(&state).unwrap_or(Value::Null);
        self.progress(&format!("real-time: {}", state.describe()));
        Ok(Some(state))
    }
}

/// The result document (the result document conventions; the shape the lab reads).
#[derive(Serialize)]
struct NodeDoc<'a> {
    name: &'a str,
    role: Role,
    mode: Mode,
    counters: &'a Value,
    wakeup: &'a Option<Summary>,
    flows: &'a Option<Value>,
    warnings: &'a [String],
    kind: &'static str,
    lockstep: Tool,
    command: Vec<String>,
    started_at: String,
    host: &'a HostFacts,
    config: &'a NodeFile,
    realtime: &'a Value,
    clock: ClockId,
    tf_ns: i64,
    k: u32,
    start_ns: Option<i64>,
    stop_ns: i64,
    stop_reason: StopReason,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

pub fn run(args: NodeArgs) -> Result<()> {
    let [path] = args.config.as_slice() else {
        return run_group(&args);
    };
    let (file, controller) = match &args.controller {
        None => (
            config::load(path).map_err(|e| UsageError(e.to_string()))?,
            None,
        ),
        Some(url) => from_controller(path, url, args.name.as_deref())?,
    };
    let mut file = file;
    apply_io(args.io, &mut file)?;
    let started_at = crate::report::rfc3339_now();
    let clock = file.live.clock;
    lockstep_linux::clock::check(clock).map_err(|e| EnvError(e.to_string()))?;
    let host = lockstep_linux::host::collect();
    let mut warnings = host.warnings();
    check_sync(&host, file.node.frame.tf, args.require_sync, &mut warnings)?;
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--output: cannot create directory {}", dir.display()))
            .map_err(|e| EnvError(format!("{e:#}")))?;
    }
    let io = io_choice(&file);
    let mut ctx = Ctx {
        clock,
        output: args.output.clone(),
        quiet: crate::say::quiet(),
        ready_file: ready_file(&args, &file.node.name),
        start_at_ns: args.start_at_ns,
        duration: match file.node.role {
            Role::Sender => args.sender_duration.or(args.duration),
            _ => args.duration,
        },
        warnings,
        realtime: Value::Null,
        file,
        io,
        controller,
    };
    let waiter = ctx.waiter();
    waiter.check().map_err(|e| EnvError(e.to_string()))?;
    if let Some(t) = args.start_at_ns {
        crate::cli::check_start_at(t, waiter.now().ns)?;
    }
    // Sleeps and ppoll timeouts end when asked, not up to 50 µs later.
    if let Err(e) = lockstep_linux::rt::set_timer_slack(1) {
        ctx.warn(format!("could not set the timer slack to 1 ns: {e}"));
    }
    ctx.progress(&banner(&ctx.file));
    let node = &ctx.file.node;
    let (outcome, start_ns) = match node.role {
        Role::Sender => sender::run(&mut ctx, &waiter)?,
        Role::Receiver => receiver::run(&mut ctx, &waiter)?,
        Role::Edge | Role::Core => {
            let mut ctxs = [ctx];
            let (outcomes, start) = router::run(&mut ctxs, &waiter, 1, &[])?;
            let [ctx] = ctxs;
            let outcome = outcomes
                .into_iter()
                .next()
                .context("the router gave no outcome")?;
            return finish(&args, &ctx, &host, started_at, outcome, start);
        }
    };
    finish(&args, &ctx, &host, started_at, outcome, start_ns)
}

/// The first progress line of a node.
fn banner(file: &NodeFile) -> String {
    let node = &file.node;
    format!(
        "lockstep node {}: {} ({} mode), TF {} k {}, clock {}, strategy {}{}",
        node.name,
        config::role_name(node.role),
        match node.mode {
            Mode::Tdp => "TDP",
            Mode::Fifo => "FIFO",
        },
        node.frame.tf,
        node.frame.k,
        file.live.clock,
        file.live.strategy,
        file.live
            .netns
            .as_deref()
            .map(|n| format!(", namespace {n}"))
            .unwrap_or_default(),
    )
}

/// The ready file of node `name`: `--ready-dir`/name, else `--ready-file`.
fn ready_file(args: &NodeArgs, name: &str) -> Option<PathBuf> {
    match &args.ready_dir {
        Some(d) => Some(d.join(name)),
        None => args.ready_file.clone(),
    }
}

/// Several `--config`: routers and senders (no receiver), run by `--threads` threads
/// ([`router::run`], [`router::thread_of`]: a sender in the thread of the first
/// router listed after it); a result document per node (with `--json`, one per line).
fn run_group(args: &NodeArgs) -> Result<()> {
    if args.controller.is_some() {
        return Err(UsageError(
            "--controller: takes a single --config (a table is for one node: run the nodes that follow a controller one per process)".into(),
        )
        .into());
    }
    let mut files: Vec<NodeFile> = Vec::with_capacity(args.config.len());
    for path in &args.config {
        let mut file = config::load(path).map_err(|e| UsageError(e.to_string()))?;
        if file.node.role == Role::Receiver {
            return Err(UsageError(format!(
                "{}: node.role: several --config run routers (edge, core) and senders in one process; a receiver cannot join them: it blocks on its socket until a packet comes (run it with a --config of its own)",
                path.display(),
            ))
            .into());
        }
        group_io(args.io, &mut file)?;
        if let Some(other) = files.iter().find(|f| f.node.name == file.node.name) {
            return Err(UsageError(format!(
                "{}: node.name: \"{}\" is given twice (result files are named after nodes)",
                path.display(),
                other.node.name
            ))
            .into());
        }
        if let Some(field) = files
            .first()
            .and_then(|first| first.live.thread_difference(&file.live))
        {
            return Err(UsageError(format!(
                "{}: {field}: differs from {}; nodes sharing a thread share how it waits and runs",
                path.display(),
                args.config[0].display()
            ))
            .into());
        }
        files.push(file);
    }
    let cpus = thread_cpus(args, &files)?;
    let started_at = crate::report::rfc3339_now();
    let clock = files[0].live.clock;
    lockstep_linux::clock::check(clock).map_err(|e| EnvError(e.to_string()))?;
    let host = lockstep_linux::host::collect();
    let mut warnings = host.warnings();
    let tf = files
        .iter()
        .map(|f| f.node.frame.tf)
        .min()
        .unwrap_or(Duration::from_millis(1));
    check_sync(&host, tf, args.require_sync, &mut warnings)?;
    if let Some(dir) = &args.output {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--output: cannot create directory {}", dir.display()))
            .map_err(|e| EnvError(format!("{e:#}")))?;
    }
    let mut ctxs: Vec<Ctx> = files
        .into_iter()
        .map(|file| Ctx {
            io: io_choice(&file),
            clock,
            output: args.output.clone(),
            quiet: crate::say::quiet(),
            ready_file: ready_file(args, &file.node.name),
            start_at_ns: args.start_at_ns,
            duration: match file.node.role {
                Role::Sender => args.sender_duration.or(args.duration),
                _ => args.duration,
            },
            warnings: warnings.clone(),
            realtime: Value::Null,
            file,
            controller: None,
        })
        .collect();
    let waiter = ctxs[0].waiter();
    waiter.check().map_err(|e| EnvError(e.to_string()))?;
    if let Some(t) = args.start_at_ns {
        crate::cli::check_start_at(t, waiter.now().ns)?;
    }
    if let Err(e) = lockstep_linux::rt::set_timer_slack(1) {
        for c in &mut ctxs {
            c.warn(format!("could not set the timer slack to 1 ns: {e}"));
        }
    }
    for c in &ctxs {
        c.progress(&banner(&c.file));
    }
    let (outcomes, start) = router::run(&mut ctxs, &waiter, usize::from(args.threads), &cpus)?;
    for (ctx, outcome) in ctxs.iter().zip(outcomes) {
        finish(args, ctx, &host, started_at.clone(), outcome, start)?;
    }
    Ok(())
}

/// The CPU of each thread of `--threads` when the files give `live.cpu`
/// (they all give the same, `run_group` checked): thread `i` takes the `i`-th
/// online CPU from it ([`lockstep_core::sched::thread_cpus`]); none without.
fn thread_cpus(args: &NodeArgs, files: &[NodeFile]) -> Result<Vec<usize>> {
    let Some(base) = files.first().and_then(|f| f.live.cpu) else {
        return Ok(Vec::new());
    };
    let is_router: Vec<bool> = files.iter().map(|f| f.node.role != Role::Sender).collect();
    let threads = router::thread_of(&is_router, usize::from(args.threads))
        .last()
        .map_or(1, |&t| t + 1);
    let online = lockstep_linux::host::online_cpus();
    lockstep_core::sched::thread_cpus(base, threads, &online).map_err(|e| {
        let path = args.config.first().map(|p| p.display().to_string());
        UsageError(format!(
            "{}: live.cpu: --threads {} ({threads} router threads from CPU {base}): {e}",
            path.unwrap_or_default(),
            args.threads
        ))
        .into()
    })
}

/// `--controller`: the node file with the controller's table merged in before it is
/// checked (exit 3 when the controller cannot be reached, 2 when its table does not
/// fit the node), and the watcher for changes.
fn from_controller(
    path: &std::path::Path,
    url: &str,
    name: Option<&str>,
) -> Result<(NodeFile, Option<crate::ctl::sync::Watcher>)> {
    use crate::ctl::sync::{apply, fetch, SyncError, Watcher};
    let mut unreachable = None;
    let mut got = None;
    let file = config::load_merged(path, |file| {
        let name = name.unwrap_or(&file.node.name).to_string();
        let (version, sched) = fetch(url, &name, None).map_err(|e| {
            let text = format!("--controller: {e}");
            if matches!(e, SyncError::Unreachable { .. }) {
                unreachable = Some(text.clone());
            }
            text
        })?;
        file.node = apply(&file.node, &sched).map_err(|e| {
            format!("--controller {url}: table of \"{name}\" (version {version}): {e}")
        })?;
        if file.node.role == Role::Sender {
            // A sender sends only the flows its [live] section gives a destination.
            let live = &file.live.flows;
            file.node
                .flows
                .retain(|f| f.rows.is_empty() || live.iter().any(|l| l.flow == f.id));
        }
        got = Some((name, version, sched.flows.len()));
        Ok(())
    });
    let file = match (file, unreachable) {
        (Ok(f), _) => f,
        (Err(_), Some(text)) => return Err(EnvError(text).into()),
        (Err(e), None) => return Err(UsageError(e.to_string()).into()),
    };
    let (name, version, flows) = got.unwrap_or_default();
    crate::say::say!(
        "lockstep node {}: scheduling table version {version} from {url} ({flows} flows)",
        file.node.name
    );
    let watcher = Watcher::spawn(url.to_string(), name, version);
    Ok((file, Some(watcher)))
}

fn check_sync(
    host: &HostFacts,
    tf: Duration,
    require: bool,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let s = &host.sync;
    let tf_ns = tf.as_nanos();
    if !s.synchronized {
        if require {
            return Err(EnvError(format!(
                "--require-sync: the kernel clock is not synchronized (adjtimex state {}): run ptp4l + phc2sys or chronyd first, or leave out --require-sync on a single host",
                s.state
            ))
            .into());
        }
        return Ok(());
    }
    if require && s.esterror_ns > tf_ns / 2 {
        return Err(EnvError(format!(
            "--require-sync: the clock's estimated error ({} ns) exceeds half the time-frame ({tf}): frames would not line up across hosts",
            s.esterror_ns
        ))
        .into());
    }
    if s.esterror_ns > tf_ns / 10 {
        warnings.push(format!(
            "the clock's estimated error ({} ns) exceeds a tenth of the time-frame ({tf})",
            s.esterror_ns
        ));
    }
    Ok(())
}

fn finish(
    args: &NodeArgs,
    ctx: &Ctx,
    host: &HostFacts,
    started_at: String,
    o: Outcome,
    start_ns: Option<i64>,
) -> Result<()> {
    let node = &ctx.file.node;
    let doc = NodeDoc {
        name: &node.name,
        role: node.role,
        mode: node.mode,
        counters: &o.counters,
        wakeup: &o.wakeup,
        flows: &o.flows,
        warnings: &ctx.warnings,
        kind: "node",
        lockstep: Tool {
            version: env!("CARGO_PKG_VERSION"),
            schema: SCHEMA_VERSION,
        },
        command: std::env::args().collect(),
        started_at,
        host,
        config: &ctx.file,
        realtime: &ctx.realtime,
        clock: ctx.clock,
        tf_ns: node.frame.tf.as_nanos(),
        k: node.frame.k,
        start_ns,
        stop_ns: o.stop_ns,
        stop_reason: o.stop,
        extra: &o.extra,
    };
    let text = serde_json::to_string_pretty(&doc)?;
    if let Some(path) = ctx.out_file(".json") {
        write_atomic(&path, text.as_bytes())?;
    }
    let mut human = kv(&o.lines);
    if args.config.len() > 1 {
        human.insert_str(0, &format!("{}:\n", node.name));
    }
    if !o.dists.is_empty() {
        let rows: Vec<(&str, &Summary)> = o.dists.iter().map(|(n, s)| (n.as_str(), s)).collect();
        human.push_str(&dist_table(&rows));
    }
    if args.json {
        crate::say::say_part!("{human}");
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())?;
        out.write_all(b"\n")?;
    } else {
        print!("{human}");
    }
    Ok(())
}

/// The end of a node's run that starts at `start` and lasts `duration` (none: until a
/// signal), [`linger`] included for routers and receivers.
fn run_end(
    role: Role,
    frame: &lockstep_core::tdp::config::FrameConfig,
    start: i64,
    duration: Option<Duration>,
) -> Option<i64> {
    let extra = match role {
        Role::Sender => 0,
        _ => linger(frame).as_nanos(),
    };
    duration.map(|d| start.saturating_add(d.as_nanos()).saturating_add(extra))
}

/// How long routers and receivers run past `--duration`: two time-cycles (`2 k TF`)
/// and at least 200 ms, so the last packets a sender sent still cross the path (a hop
/// holds a packet for less than a cycle).
pub(crate) fn linger(f: &lockstep_core::tdp::config::FrameConfig) -> Duration {
    let cycles =
        f.tf.as_nanos()
            .saturating_mul(i64::from(f.k))
            .saturating_mul(2);
    Duration(cycles.max(200_000_000))
}

/// Maps a kernel timestamp (`CLOCK_REALTIME` ns) onto the node's clock.
#[inline]
pub(crate) fn to_node_clock(map: &lockstep_linux::ClockMap, t: Instant) -> i64 {
    crate::probe::stream::to_run_clock(map, t)
}

/// Writes `DIR/<name><suffix>` CSV with `header`, when `--output` was given.
pub(crate) fn csv(
    ctx: &Ctx,
    suffix: &str,
    header: &[&str],
) -> Result<Option<crate::report::SampleWriter>> {
    match ctx.out_file(suffix) {
        Some(p) => Ok(Some(crate::report::SampleWriter::create(&p, header)?)),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockstep_linux::host::SyncFacts;

    /// The node file the lab plans for mesh4's sender s1234.
    fn sender_file() -> NodeFile {
        let s = lockstep_plan::scenario::Scenario::parse("mesh4.toml", crate::lab::MESH4).unwrap();
        let p = lockstep_plan::plan::plan(&s, &s.runs()[0]).unwrap();
        p.node("s1234").unwrap().config.clone().unwrap()
    }

    /// `--io` of a process running several nodes sets the routers' ports: a sender
    /// among them keeps its own `live.io` (by default the kernel's UDP stack), while
    /// on its own it takes `--io`.
    #[test]
    fn io_of_a_group_is_the_routers() {
        let mut plain = sender_file();
        group_io(Some(NodeIo::Xdp), &mut plain).unwrap();
        assert_eq!(plain.live.io, Some(NodeIo::Udp));
        let mut own = sender_file();
        own.live.io = Some(NodeIo::Packet);
        group_io(Some(NodeIo::Xdp), &mut own).unwrap();
        assert_eq!(own.live.io, Some(NodeIo::Packet));
        let mut alone = sender_file();
        apply_io(Some(NodeIo::Xdp), &mut alone).unwrap();
        assert_eq!(alone.live.io, Some(NodeIo::Xdp));
    }

    fn host(synchronized: bool, esterror_ns: i64) -> HostFacts {
        HostFacts {
            sync: SyncFacts {
                synchronized,
                state: if synchronized {
                    "TIME_OK"
                } else {
                    "TIME_ERROR"
                }
                .into(),
                esterror_ns,
                ..SyncFacts::default()
            },
            ..HostFacts::default()
        }
    }

    #[test]
    fn clock_sync_is_checked_against_the_frame() {
        let tf = Duration::from_micros(100);
        let mut w = Vec::new();
        // unsynchronised: fine on one host, refused with --require-sync
        check_sync(&host(false, 0), tf, false, &mut w).unwrap();
        let e = check_sync(&host(false, 0), tf, true, &mut w).unwrap_err();
        assert!(e.downcast_ref::<EnvError>().is_some());
        assert!(e
            .to_string()
            .contains("not synchronized (adjtimex state TIME_ERROR)"));
        assert!(w.is_empty());
        // synchronised: a warning above TF/10, a refusal above TF/2 when required
        check_sync(&host(true, 10_000), tf, true, &mut w).unwrap();
        assert!(w.is_empty());
        check_sync(&host(true, 10_001), tf, true, &mut w).unwrap();
        assert_eq!(
            w,
            ["the clock's estimated error (10001 ns) exceeds a tenth of the time-frame (100us)"]
        );
        assert!(check_sync(&host(true, 50_001), tf, true, &mut w).is_err());
        check_sync(&host(true, 50_001), tf, false, &mut w).unwrap();
    }

    #[test]
    fn a_sender_in_the_routers_thread_ends_before_them() {
        let f = lockstep_core::tdp::config::FrameConfig {
            tf: Duration::from_millis(1),
            k: 4,
            epoch_ns: 0,
            offset: Duration::ZERO,
            guard: Duration::ZERO,
            lead: 1,
        };
        let end = |role: Role, start: i64, d: Option<Duration>| run_end(role, &f, start, d);
        // the lab: routers run the duration and the drain, senders the duration
        let d = Duration::from_secs(5);
        let drain = Duration::from_millis(508);
        let s_end = end(Role::Sender, 1_000, Some(d));
        let r_end = end(Role::Core, 1_000, Some(d + drain));
        assert_eq!(s_end, Some(1_000 + 5_000_000_000));
        // the router lingers 200 ms past its duration (and its drain)
        assert_eq!(r_end, Some(1_000 + 5_508_000_000 + 200_000_000));
        // the same --duration for both: the sender still stops first, no linger
        assert!(end(Role::Sender, 0, Some(d)) < end(Role::Edge, 0, Some(d)));
        assert_eq!(end(Role::Sender, 0, None), None);
    }

    #[test]
    fn linger_is_two_cycles_or_200ms() {
        let mut f = lockstep_core::tdp::config::FrameConfig {
            tf: Duration::from_millis(1),
            k: 4,
            epoch_ns: 0,
            offset: Duration::ZERO,
            guard: Duration::ZERO,
            lead: 1,
        };
        assert_eq!(linger(&f), Duration::from_millis(200));
        f.k = 200;
        assert_eq!(linger(&f), Duration::from_millis(400));
    }
}
