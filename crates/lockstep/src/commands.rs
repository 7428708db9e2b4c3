//! The command-line tree: one subcommand per room of the binary (`main` dispatches).

use clap::{Parser, Subcommand};

use crate::probe::ProbeCmd;

#[derive(Parser, Debug)]
#[command(
    name = "lockstep",
    version,
    about = "Deterministic packet delivery on commodity Linux: time-driven forwarding, \
             shaping and admission, and probes that measure what the OS adds to every packet.",
    propagate_version = true
)]
pub struct Cli {
    /// Say nothing on stderr but an error: no progress, notes or warnings (they stay
    /// in the result document), and with --json no table. The result still goes to
    /// stdout.
    #[arg(long, short = 'q', global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Measure what the OS adds: timer wake-ups, OS noise, packet streams, request/response.
    #[command(subcommand)]
    Probe(ProbeCmd),
    /// Run one time-driven node (sender, edge, core router or receiver) from a config file.
    Node(crate::node::NodeArgs),
    /// Build a test network in namespaces, run a scenario, collect results and a report.
    #[command(subcommand)]
    Lab(crate::lab::LabCmd),
    /// The lab's scenarios in virtual time: the same routers, senders and receivers
    /// driven by a simulated clock over modelled links and hosts (`run`), and a
    /// generator of large networks (`gen`).
    #[command(subcommand)]
    Sim(crate::sim::SimCmd),
    /// Run the mesh4 scenario (baldi2006: FIFO vs TDP on a full 100 Mb/s mesh) three
    /// ways — simulated on an ideal host, simulated with this host's measured
    /// wake-ups, and live in namespaces at a time scale this host can keep — and print
    /// one table with the paper's figures, verdicts and every outlier's cause.
    Demo(crate::demo::DemoArgs),
    /// Print (or --apply) the tc commands for shaped flows (tbf/htb) and TDP port
    /// schedules (taprio + etf).
    ///
    /// The taprio and etf qdiscs expect their senders to set a traffic class and
    /// launch times: `lockstep probe stream --priority-class N --txtime` is such a
    /// sender (SO_PRIORITY, and SO_TXTIME on CLOCK_TAI with a launch time per packet).
    Export(crate::export::ExportArgs),
    /// Delay and backlog bounds of a network of servers and shaped flows (network
    /// calculus, exact): TFA and SFA per flow, backlog per server.
    Calc(crate::calc::CalcArgs),
    /// The admission controller (`serve`: HTTP/JSON, reservations in SQLite) and its
    /// client (`add`, `remove`, `list`, `show`, `schedule NODE`).
    #[command(subcommand)]
    Ctl(crate::ctl::CtlCmd),
    /// What on this host adds latency (`audit`), and the run-time tuning that can be
    /// undone (`apply`, `restore`, `hold-latency`).
    #[command(subcommand)]
    Host(crate::host::HostCmd),
    /// Make report.html and the summary of a saved run again from its directory
    /// (`lab run`, `sim run`, `probe … --output`): from summary.json alone.
    Report(crate::saved::report::ReportArgs),
    /// Two saved runs of the same kind side by side: per run and flow each figure,
    /// the ratio B/A and the better one (`--json`, `--html FILE`).
    Compare(crate::saved::compare::CompareArgs),
    /// A shell completion script on stdout (bash, zsh, fish, elvish, powershell), e.g.
    /// `lockstep completions bash > ~/.local/share/bash-completion/completions/lockstep`.
    Completions(crate::shell::CompletionsArgs),
    /// Man pages for lockstep and every subcommand into a directory (`-o DIR`, default
    /// `man`), e.g. `lockstep man -o /usr/local/share/man/man1`.
    Man(crate::shell::ManArgs),
}
