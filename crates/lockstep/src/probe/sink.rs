//! `lockstep probe sink` (being written).

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct SinkArgs {}

pub fn run(_args: SinkArgs) -> Result<()> {
    anyhow::bail!("probe sink: not built yet")
}
