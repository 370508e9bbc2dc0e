//! `numalab topology`: the machine model, as text or JSON (docs/topology-schema.md).

use crate::output::out;
use crate::output::{load_machine, print_versioned_result, CliResult};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Read this hwloc XML topology file instead of the live machine.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Print the versioned JSON schema instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(a.topology.as_deref())?;
    if a.json {
        print_versioned_result("topology", &m)?;
    } else {
        out!(
            "{}",
            numalab_report::views::topology::render_topology_text(&m)
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
