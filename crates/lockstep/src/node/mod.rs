//! `lockstep node --config node.toml` (being written): one live time-driven node.

use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
pub struct NodeArgs {}

pub fn run(_args: NodeArgs) -> Result<()> {
    anyhow::bail!("lockstep node: not built yet")
}
