//! `numalab verify --pid PID`: where a running process's memory and threads are.

use crate::output::{print_json, CliError, CliResult};
use numalab::placement::ProcessPlacement;
use numalab::report::views::verify::render;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The process to inspect.
    #[arg(long, value_name = "PID")]
    pid: String,
    /// List every mapping, also those with no resident page.
    #[arg(long)]
    all: bool,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> CliResult {
    let pid: i32 = a
        .pid
        .trim()
        .parse()
        .ok()
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            CliError::usage(format!(
                "--pid '{}' is not a process id (a positive number)",
                a.pid
            ))
        })?;
    let p = ProcessPlacement::read(pid)?;
    if a.json {
        print_json(&p)?;
    } else {
        print!("{}", render(&p, a.all));
    }
    Ok(ExitCode::SUCCESS)
}
