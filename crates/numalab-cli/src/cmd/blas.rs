//! `numalab blas`: placement sensitivity of BLAS levels 1 to 3 with
//! OpenBLAS, each operand on its own node (docs/blas.md).

use crate::args::{choice_list, whole, List, StatOptions};
use crate::output::{
    exit_for, load_machine, out, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::blas::{self, BlasRequest, Kernel, DEFAULT_N, MAX_N};
use numalab::IdSet;
use numalab_report::views::blas::{parallel_plan_text, plan_text, text};
use std::path::PathBuf;

/// Default time per placement, in seconds.
const DEFAULT_BUDGET: f64 = 0.5;

fn level(t: &str) -> Result<u8, String> {
    match t {
        "1" => Ok(1),
        "2" => Ok(2),
        "3" => Ok(3),
        _ => Err(format!("unknown BLAS level '{t}'; valid: 1, 2, 3")),
    }
}

#[derive(clap::Args)]
#[command(
    after_help = "Level 1: daxpy (y = a*x + y) and triad (a = b + s*c), vectors of n^2 elements; level 2: dgemv (y = A*x); level 3: dgemm (C = A*B), n x n matrices. Each operand lives on its own memory node, first touched by the pinned thread; OpenBLAS runs on that thread only (openblas_set_num_threads(1)). --budget is the whole command's time, shared among the placements; --budget-each the time per placement (default 0.5 s). See docs/blas.md."
)]
pub struct Args {
    /// BLAS levels to run, e.g. 1,3 (default all).
    #[arg(long, value_name = "LIST", value_parser = choice_list(&["1", "2", "3"], level))]
    levels: Option<List<u8>>,
    /// Kernels to run: daxpy, triad, dgemv, dgemm (default all of the levels).
    #[arg(long, value_name = "LIST", value_parser = choice_list(&Kernel::NAMES, Kernel::parse))]
    kernels: Option<List<Kernel>>,
    /// Matrix dimension, 1 to 20000 (default 1600, scaled down if memory is short).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = whole(1, MAX_N))]
    n: Option<usize>,
    /// Run the thread on this CPU node only (default: each CPU node in turn).
    #[arg(long, value_name = "NODE", allow_hyphen_values = true, value_parser = whole(0, u16::MAX as usize))]
    node: Option<usize>,
    /// Run every case (placement) instead of one per class of the
    /// machine's automorphisms (4 x 4^3 = 256 for dgemm on 4 nodes).
    #[arg(long)]
    every_case: bool,
    /// Parallel mode: one thread per CPU node, each with its own operands,
    /// K random placements per contention class of the placement
    /// distribution model (1 to 1000; the study used 20).
    #[arg(long, value_name = "K", allow_hyphen_values = true, value_parser = whole(1, 1000), conflicts_with_all = ["every_case", "node"])]
    parallel: Option<usize>,
    /// Seed of the parallel mode's random placements.
    #[arg(long, value_name = "N", default_value = "1", value_parser = whole(0, usize::MAX), requires = "parallel")]
    seed: usize,
    /// Compare OpenBLAS with a naive implementation (n = 1..64) first.
    #[arg(long)]
    check: bool,
    /// Print the placements that would run, without measuring.
    #[arg(long)]
    list: bool,
    /// Read this hwloc XML topology file instead of the live machine (with --list).
    #[arg(long, value_name = "FILE", requires = "list")]
    topology: Option<PathBuf>,
    #[command(flatten)]
    stats: StatOptions,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// The kernels of the asked levels and kernel names, in level order.
fn kernels(a: &Args) -> Result<Vec<Kernel>, CliError> {
    let picked: Vec<Kernel> = Kernel::ALL
        .into_iter()
        .filter(|k| a.levels.as_ref().is_none_or(|l| l.0.contains(&k.level())))
        .filter(|k| a.kernels.as_ref().is_none_or(|l| l.0.contains(k)))
        .collect();
    if picked.is_empty() {
        return Err(CliError::usage(
            "--levels and --kernels select no kernel together; level 1: daxpy, triad; level 2: dgemv; level 3: dgemm",
        ));
    }
    Ok(picked)
}

pub fn run(a: Args) -> CliResult {
    let kernels = kernels(&a)?;
    let m = load_machine(a.topology.as_deref())?;
    let mut req = BlasRequest {
        kernels,
        n: a.n,
        cpu_nodes: a.node.map(|n| IdSet::single(n as u32)),
        full: a.every_case,
        rule: a.stats.rule(DEFAULT_BUDGET, 1)?,
        check: a.check,
        parallel: a.parallel,
        seed: a.seed as u64,
    };
    let count = if a.parallel.is_some() {
        let draws = blas::plan_parallel(&m, &req)?;
        if a.list {
            if a.json {
                print_result("blas", &serde_json::json!({ "parallel": draws }))?;
            } else {
                out!("{}", parallel_plan_text(&draws))?;
            }
            return Ok(exit_for(true));
        }
        draws
            .iter()
            .flat_map(|(_, cs)| cs)
            .map(|c| c.runs.len())
            .sum::<usize>()
    } else {
        let runs = blas::plan(&m, &req)?;
        if a.list {
            if a.json {
                print_result("blas", &serde_json::json!({ "placements": runs }))?;
            } else {
                out!("{}", plan_text(&runs))?;
            }
            return Ok(exit_for(true));
        }
        runs.len()
    };
    req.rule = a.stats.rule(DEFAULT_BUDGET, count)?;
    let progress = Progress::bar(
        count as u64,
        &format!(
            "blas: {count} placement(s), n = {}, {:.2} s each",
            a.n.unwrap_or(DEFAULT_N),
            req.rule.budget.as_secs_f64()
        ),
    );
    let r = blas::run_blas(&m, &req, &mut || progress.step("placement"))?;
    progress.finish();
    if a.json {
        print_result("blas", &r)?;
    } else {
        out!("{}", text(&r))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verified))
}
