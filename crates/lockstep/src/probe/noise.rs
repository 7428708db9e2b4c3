//! `lockstep probe noise` (being written).

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct NoiseArgs {}

pub fn run(_args: NoiseArgs) -> Result<()> {
    anyhow::bail!("probe noise: not built yet")
}
