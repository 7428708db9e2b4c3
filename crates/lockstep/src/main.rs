//! `lockstep`: one binary, many subcommands. This file is the edge: it parses the
//! command line, runs the subcommand and turns errors into exit statuses
//! (0 ok, 1 a requested check failed, 2 usage or input error, 3 environment problem).
//!
//! System calls, child processes and `unsafe` code live in `lockstep-linux`, never here.

#![forbid(unsafe_code)]

mod calc;
mod cli;
mod commands;
mod ctl;
mod demo;
mod export;
/// The damaged inputs the fuzz targets' deterministic twins share (one copy for
/// every twin in this crate).
#[cfg(test)]
#[path = "../../../fuzz/smoke/inputs.rs"]
mod fuzz_inputs;
mod gates;
mod host;
mod lab;
mod node;
mod probe;
mod report;
mod saved;
mod say;
mod shell;
mod sim;
mod stop;

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::Parser;

/// Bad input from the user: exit status 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The environment lacks something (privilege, kernel feature): exit status 3.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct EnvError(pub String);

/// The run completed but a requested check failed: exit status 1.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CheckFailed(pub String);

/// SIGINT/SIGTERM stopped a command before its work was done; what it had is printed
/// and written, marked interrupted: exit status 3. (Commands that run until stopped —
/// probes, nodes, the controller — end normally on a stop instead.)
#[derive(Debug, thiserror::Error)]
#[error("interrupted by SIGINT/SIGTERM: {0}")]
pub struct Interrupted(pub String);

fn main() -> ExitCode {
    let cli = match commands::Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_error(e),
    };
    say::set_quiet(cli.quiet);
    if let Err(e) = lockstep_linux::signal::install_stop_handler() {
        eprintln!("lockstep: warning: cannot catch Ctrl-C and SIGTERM ({e}): a stop ends the process without its results");
    }
    let result = match cli.command {
        commands::Command::Probe(cmd) => probe::run(cmd),
        commands::Command::Node(args) => node::run(args),
        commands::Command::Lab(cmd) => lab::run(cmd),
        commands::Command::Sim(cmd) => sim::run(cmd),
        commands::Command::Demo(args) => demo::run(args),
        commands::Command::Export(args) => export::run(args),
        commands::Command::Calc(args) => calc::run(args),
        commands::Command::Ctl(cmd) => ctl::run(cmd),
        commands::Command::Host(cmd) => host::run(cmd),
        commands::Command::Report(args) => saved::report::run(args),
        commands::Command::Compare(args) => saved::compare::run(args),
        commands::Command::Completions(args) => shell::completions(args),
        commands::Command::Man(args) => shell::man(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lockstep: {}", error_line(&e));
            ExitCode::from(exit_status(&e))
        }
    }
}

/// The error and its causes on one line, `outer: inner: …`, each said once: a
/// library error whose message already ends with its cause's text (most say what
/// went wrong below them) does not get it again.
fn error_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.ends_with(&text) || line.contains(&format!("{text}: ")) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

fn exit_status(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<CheckFailed>().is_some() {
        1
    } else if e.downcast_ref::<UsageError>().is_some()
        || e.downcast_ref::<saved::doc::SavedError>().is_some()
    {
        2
    } else if e.downcast_ref::<EnvError>().is_some() || e.downcast_ref::<Interrupted>().is_some() {
        3
    } else if let Some(rt) = e.downcast_ref::<lockstep_linux::rt::RtError>() {
        if rt.is_permission() {
            3
        } else {
            2
        }
    } else {
        3
    }
}

/// Invalid values are reported as `--interval: expected a duration like 100us, 1.5ms or 1/2ms, got "abc"`;
/// everything else as clap formats it. Usage errors exit with 2, help/version with 0.
fn clap_error(e: clap::Error) -> ExitCode {
    if e.kind() == ErrorKind::ValueValidation {
        let arg = match e.get(ContextKind::InvalidArg) {
            Some(ContextValue::String(s)) => s.split_whitespace().next().unwrap_or(s).to_string(),
            _ => String::from("argument"),
        };
        let reason = std::error::Error::source(&e)
            .map(|s| s.to_string())
            .unwrap_or_else(|| e.to_string());
        eprintln!("lockstep: {arg}: {reason}");
        return ExitCode::from(2);
    }
    let code = if e.use_stderr() { 2 } else { 0 };
    let _ = e.print();
    ExitCode::from(code)
}

#[cfg(test)]
mod edge_tests {
    use super::error_line;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot bind 10.0.0.1:5: {source}")]
    struct Bind {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        let io = std::io::Error::from_raw_os_error(99);
        let text = io.to_string();
        let e = anyhow::Error::new(Bind { source: io }).context("--bind 10.0.0.1:5");
        assert_eq!(
            error_line(&e),
            format!("--bind 10.0.0.1:5: cannot bind 10.0.0.1:5: {text}")
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_line(&plain), "outer: inner");
    }
}
