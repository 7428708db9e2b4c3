//! `lockstep lab …` and `lockstep demo` (being written).

use anyhow::Result;
use clap::{Args, Subcommand};

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Remove what a crashed run left behind.
    Clean,
}

#[derive(Args, Debug)]
pub struct DemoArgs {}

pub fn run(_cmd: LabCmd) -> Result<()> {
    anyhow::bail!("lockstep lab: not built yet")
}

pub fn demo(_args: DemoArgs) -> Result<()> {
    anyhow::bail!("lockstep demo: not built yet")
}
