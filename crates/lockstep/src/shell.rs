//! `lockstep completions SHELL` (a completion script on stdout) and `lockstep man`
//! (a man page for the binary and one for every subcommand, generated from the same
//! command-line definitions as `--help`, so they cannot drift).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_complete::Shell;

use crate::commands::Cli;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// The directory the pages go to (created if missing): `lockstep.1`,
    /// `lockstep-probe.1`, `lockstep-probe-timer.1`, …
    #[arg(long, short = 'o', value_name = "DIR", default_value = "man")]
    pub output: PathBuf,
}

/// Writes the completion script for `args.shell` to stdout.
pub fn completions(args: CompletionsArgs) -> Result<()> {
    let mut cmd = Cli::command();
    clap_complete::generate(args.shell, &mut cmd, "lockstep", &mut std::io::stdout());
    Ok(())
}

/// Writes every page into `args.output` and lists them on stdout.
pub fn man(args: ManArgs) -> Result<()> {
    let dir = &args.output;
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--output: cannot create {}", dir.display()))?;
    let mut cmd = Cli::command();
    cmd.build();
    let mut written = Vec::new();
    pages(&cmd, "lockstep", dir, &mut written)?;
    for p in &written {
        println!("{}", p.display());
    }
    Ok(())
}

/// The page of `cmd` (called `name`) and of each of its subcommands, depth first.
fn pages(cmd: &clap::Command, name: &str, dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let page = cmd.clone().name(name.to_string());
    let mut text = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut text)
        .with_context(|| format!("rendering the page of {name}"))?;
    let path = dir.join(format!("{name}.1"));
    crate::report::write_atomic(&path, &text)?;
    out.push(path);
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        pages(sub, &format!("{name}-{}", sub.get_name()), dir, out)?;
    }
    Ok(())
}
