//! `lockstep probe rr` (being written).

use anyhow::Result;
use clap::Subcommand;

#[derive(Subcommand, Debug)]
pub enum RrCmd {
    Server,
    Client,
}

pub fn run(_cmd: RrCmd) -> Result<()> {
    anyhow::bail!("probe rr: not built yet")
}
