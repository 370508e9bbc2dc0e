//! `numalab set EXPR`: evaluate a resource-set expression (docs/resource-sets.md)
//! and, with `--threads N`, lay N threads out over it with a thread policy.
//! Needs no hardware: works on `--topology FILE` too.

use crate::args::{thread_count, ThreadLayout};
use crate::output::outln;
use crate::output::{load_machine, print_result, CliError, CliResult};
use numalab::placement::thread_policy::SetLayout;
use numalab::placement::thread_policy::MAX_LAYOUT_THREADS;
use numalab::placement::{ListMeaning, ResourceSet};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The set, e.g. 'node:0-1 ~ core:0', 'l3:0', '!node:0', '0-3,7'.
    #[arg(value_name = "EXPR")]
    expr: String,
    /// Bare numbers in EXPR are nodes (default: CPUs).
    #[arg(long)]
    nodes: bool,
    /// Lay this many threads out over the set's CPUs (1 to 65536: eight times the most CPUs
    /// Linux supports, so that --oversubscribe stays bounded).
    #[arg(long, value_name = "N", value_parser = thread_count(MAX_LAYOUT_THREADS))]
    threads: Option<usize>,
    #[command(flatten)]
    layout: ThreadLayout,
    /// Allow more threads than CPUs (they then share CPUs).
    #[arg(long)]
    oversubscribe: bool,
    /// Read this hwloc XML topology file instead of the live machine.
    #[arg(long, value_name = "FILE")]
    topology: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(a.topology.as_deref())?;
    let meaning = if a.nodes {
        ListMeaning::Nodes
    } else {
        ListMeaning::Cpus
    };
    let set = ResourceSet::parse(&m, &a.expr, meaning).map_err(CliError::usage)?;
    let threads = a.threads.map(|n| (n, &a.layout.layout, a.oversubscribe));
    let r = SetLayout::new(&m, &a.expr, set.cpus, set.nodes, threads).map_err(CliError::usage)?;
    if a.json {
        print_result("set", &r)?;
    } else {
        outln!("cpus  {{{}}} ({})", r.cpus, r.cpus.len())?;
        outln!("nodes {{{}}} ({})", r.nodes, r.nodes.len())?;
        for t in &r.threads {
            let node = t.node.map(|n| format!(" (node {n})")).unwrap_or_default();
            outln!("thread {:>3} -> CPU {}{node}", t.thread, t.cpu)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
