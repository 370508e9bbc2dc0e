//! `numalab c2c`.

use crate::output::{CliError, CliResult};

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_a: Args) -> CliResult {
    Err(CliError::failed("`numalab c2c` is being built"))
}
