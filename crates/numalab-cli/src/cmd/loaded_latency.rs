//! `numalab loaded-latency`.

use crate::output::{CliError, CliResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> CliResult {
    Err(CliError::failed("`numalab loaded-latency` is being built"))
}
