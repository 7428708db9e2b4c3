//! `lockstep probe timer` (being written).

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct TimerArgs {}

pub fn run(_args: TimerArgs) -> Result<()> {
    anyhow::bail!("probe timer: not built yet")
}
