//! `numalab topology`: the machine model, as text or JSON (docs/topology-schema.md), and its
//! picture as lstopo draws it (`--svg FILE`).

use crate::output::out;
use crate::output::{
    load_machine, print_versioned_result, refuse_overwriting_input, CliError, CliResult,
};
use numalab_report::files::write_atomically;
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
    /// Also write the machine's picture (packages, NUMA nodes, caches, cores, PUs, CPU-less
    /// memory, devices with their models) as an SVG file, as lstopo draws it.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
}

pub fn run(a: Args) -> CliResult {
    if let Some(svg) = &a.svg {
        let inputs: Vec<(&str, &std::path::Path)> = a
            .topology
            .iter()
            .map(|t| ("--topology", t.as_path()))
            .collect();
        refuse_overwriting_input("--svg", svg, &inputs)?;
        if svg.is_dir() {
            return Err(CliError::usage(format!(
                "--svg {} is a directory; give a file name",
                svg.display()
            )));
        }
    }
    let m = load_machine(a.topology.as_deref())?;
    if let Some(svg) = &a.svg {
        let picture = numalab_report::svg::machine_picture("machine", &m);
        write_atomically(svg, picture.as_bytes())
            .map_err(|e| CliError::failed(format!("--svg: cannot write {}: {e}", svg.display())))?;
    }
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
