//! `lockstep probe stream` (being written).

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct StreamArgs {}

pub fn run(_args: StreamArgs) -> Result<()> {
    anyhow::bail!("probe stream: not built yet")
}
