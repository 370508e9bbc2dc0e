//! `numalab policies`: memory policies compared for canonical workloads
//! (single thread unpinned and pinned, independent programs, a threaded
//! program initialized by its main thread, a NUMA-aware one), the classic
//! table with every cell verified, and the advice that follows.

use crate::args::{
    buffer_size, choice, isa, thread_count, thread_cpus, List, Output, StatOptions, ThreadLayout,
    ISAS, KERNELS, MAX_THREADS, THP,
};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::policies::{
    default_array_bytes, parse_list, run_policies, PoliciesRequest, PolicyColumn, Workload,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::placement::{ListMeaning, ResourceSet, Thp, ThreadPolicy};
use numalab::Machine;
use numalab_report::views::policies::text;

#[derive(clap::Args)]
// The classic workloads spread their threads over the nodes by default, and
// lay them out themselves: no CPU list.
#[command(mut_arg("layout", |a| a
    .default_value("scatter")
    .value_parser(choice(&["scatter", "compact"], ThreadPolicy::parse))))]
pub struct Args {
    /// Bandwidth kernel every workload streams.
    #[arg(long, value_name = "KERNEL", default_value = "triad", value_parser = choice(KERNELS, BandwidthKernel::parse))]
    kernel: BandwidthKernel,
    /// Threads of the multi-threaded workloads and independent programs, 1 to 8192 (default: every CPU of --cpus).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = thread_count(MAX_THREADS))]
    threads: Option<usize>,
    /// CPUs the workloads may use (set grammar; default all allowed); the unpinned thread may run on any of them.
    #[arg(long, value_name = "SET", default_value = "all")]
    cpus: String,
    #[command(flatten)]
    layout: ThreadLayout,
    /// Node of the one-node column (default: the node of the first thread's CPU).
    #[arg(long, value_name = "NODE")]
    node: Option<String>,
    /// Bytes of each array of each worker, 4K to 128T (default: a worker's arrays together four times the last-level cache, at least 16M each).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    size: Option<usize>,
    /// Transparent huge pages for all data (off: page-exact placement, one page size in every column).
    #[arg(long, value_name = "THP", default_value = "off", value_parser = choice(THP, Thp::parse))]
    thp: Thp,
    /// Workloads (rows), comma-separated, or all.
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = choice(&["single-unpinned", "single-pinned", "independent", "serial-init", "numa-aware", "all"], workloads))]
    workloads: List<Workload>,
    /// Policies (columns), comma-separated, or all: interleave-accessing interleaves over the nodes the threads run on only.
    #[arg(long, value_name = "LIST", default_value = "all", value_parser = choice(&["local", "interleave", "interleave-accessing", "one-node", "all"], columns))]
    policies: List<PolicyColumn>,
    /// Instruction set (auto: the widest this CPU runs).
    #[arg(long, value_name = "ISA", default_value = "auto", value_parser = choice(ISAS, isa))]
    isa: Isa,
    /// Measurement options: --budget is shared among the cells; --budget-each is per cell (default: about 15 s over all cells, 0.25 to 1.5 s each).
    #[command(flatten)]
    stats: StatOptions,
    #[command(flatten)]
    out: Output,
}

fn workloads(t: &str) -> Result<List<Workload>, String> {
    parse_list(t, &Workload::ALL, Workload::parse).map(List)
}

fn columns(t: &str) -> Result<List<PolicyColumn>, String> {
    parse_list(t, &PolicyColumn::ALL, PolicyColumn::parse).map(List)
}

/// `--layout`: scatter or compact only (the workloads lay threads out
/// themselves, so a CPU list is not a choice here).
fn workload_layout(p: &ThreadPolicy) -> Result<ThreadPolicy, CliError> {
    match p {
        ThreadPolicy::Explicit(_) => Err(CliError::usage(
            "--layout: the workloads place their threads, so no CPU list; valid: scatter (one thread per node in turn), compact (fill a node first)",
        )),
        p => Ok(p.clone()),
    }
}

/// The one-node column's node: one allowed node with memory.
fn node_option(m: &Machine, text: Option<&str>, first_cpu: u32) -> Result<u32, CliError> {
    let mem = m.memory_nodes();
    let Some(t) = text else {
        return m
            .node_of_cpu(first_cpu)
            .filter(|n| mem.contains(*n))
            .or_else(|| mem.first())
            .ok_or_else(|| CliError::failed("no allowed node has memory"));
    };
    let s = ResourceSet::parse(m, t, ListMeaning::Nodes)
        .map_err(|e| CliError::usage(format!("--node: {e}")))?;
    match (s.nodes.len(), s.nodes.first()) {
        (1, Some(n)) if mem.contains(n) => Ok(n),
        (1, Some(n)) => Err(CliError::usage(format!(
            "--node {n} has no memory this process may use; nodes with memory: {mem}"
        ))),
        (0, _) => Err(CliError::usage(format!(
            "--node '{t}' names no node; nodes with memory: {mem}"
        ))),
        _ => Err(CliError::usage(format!(
            "--node '{t}' is {} nodes ({}); give one node of {mem}",
            s.nodes.len(),
            s.nodes
        ))),
    }
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let set = ResourceSet::parse(&m, &a.cpus, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("--cpus: {e}")))?;
    if let Some(v) = a.threads {
        if v > set.cpus.len() {
            return Err(CliError::usage(format!(
                "--threads {v} but --cpus holds {} CPU{} ({}): one thread per CPU",
                set.cpus.len(),
                if set.cpus.len() == 1 { "" } else { "s" },
                set.cpus
            )));
        }
    }
    let n = a.threads.unwrap_or_else(|| set.cpus.len().max(1));
    let layout = workload_layout(&a.layout.layout)?;
    let cpus = thread_cpus(&m, &a.cpus, n, &layout, false)?;
    let node = node_option(&m, a.node.as_deref(), cpus[0])?;
    let (workloads, policies) = (a.workloads.0.clone(), a.policies.0.clone());
    let buffer_bytes = a.size.unwrap_or_else(|| default_array_bytes(&m, a.kernel));
    let cells = workloads.len() * policies.len();
    let rule = a
        .stats
        .rule((15.0 / cells as f64).clamp(0.25, 1.5), cells)?;
    let req = PoliciesRequest {
        kernel: a.kernel,
        isa: a.isa,
        cpus,
        thread_policy: match layout {
            ThreadPolicy::Compact => "compact".into(),
            _ => "scatter".into(),
        },
        unpinned_cpus: set.cpus.clone(),
        node,
        buffer_bytes,
        thp: a.thp,
        rule,
        workloads,
        policies,
    };
    let progress = Progress::bar(cells as u64, "policies");
    let r = run_policies(&m, &req, &mut |w| progress.step(w))?;
    progress.finish();
    if a.out.json {
        print_result("policies", &r)?;
    } else {
        out!("{}", text(&m, &r, a.out.units))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verified))
}
