//! `numalab set EXPR`: evaluate a resource-set expression (docs/resource-sets.md)
//! and, with `--threads N`, lay N threads out over it with a thread policy.
//! Needs no hardware: works on `--topology FILE` too.

use crate::args::{thread_count, ThreadLayout};
use crate::output::outln;
use crate::output::{load_machine, print_result, CliError, CliResult};
use numalab::placement::thread_policy::MAX_LAYOUT_THREADS;
use numalab::placement::{ListMeaning, ResourceSet};
use numalab::IdSet;
use serde::Serialize;
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

#[derive(Serialize)]
struct ThreadSlot {
    thread: usize,
    cpu: u32,
    node: Option<u32>,
}

#[derive(Serialize)]
struct SetResult {
    expression: String,
    cpus: IdSet,
    nodes: IdSet,
    threads: Vec<ThreadSlot>,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(a.topology.as_deref())?;
    let meaning = if a.nodes {
        ListMeaning::Nodes
    } else {
        ListMeaning::Cpus
    };
    let set = ResourceSet::parse(&m, &a.expr, meaning).map_err(CliError::usage)?;
    let mut threads = Vec::new();
    if let Some(n) = a.threads {
        let cpus = a
            .layout
            .layout
            .assign(&m, &set.cpus, n, a.oversubscribe)
            .map_err(CliError::usage)?;
        threads = cpus
            .into_iter()
            .enumerate()
            .map(|(i, cpu)| ThreadSlot {
                thread: i,
                cpu,
                node: m.node_of_cpu(cpu),
            })
            .collect();
    }
    let r = SetResult {
        expression: a.expr.clone(),
        cpus: set.cpus,
        nodes: set.nodes,
        threads,
    };
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
