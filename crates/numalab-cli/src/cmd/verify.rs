//! `numalab verify --pid PID`: where a running process's memory and threads are.

use crate::args::parsed;
use crate::output::out;
use crate::output::{print_result, CliResult};
use numalab::placement::ProcessPlacement;
use numalab_report::views::verify::render;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The process to inspect (a positive process id).
    #[arg(long, value_name = "PID", allow_hyphen_values = true, value_parser = parsed(process_id))]
    pid: i32,
    /// List every mapping, also those with no resident page.
    #[arg(long)]
    all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// A process id: a positive number.
fn process_id(t: &str) -> Result<i32, String> {
    t.trim()
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| format!("'{t}' is not a process id (a positive number)"))
}

pub fn run(a: Args) -> CliResult {
    let p = ProcessPlacement::read(a.pid)?;
    if a.json {
        print_result("verify", &p)?;
    } else {
        out!("{}", render(&p, a.all))?;
    }
    Ok(ExitCode::SUCCESS)
}
