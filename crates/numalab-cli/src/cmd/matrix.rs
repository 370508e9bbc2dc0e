//! `numalab matrix`: latency and bandwidth from every CPU node to every
//! memory node, CPU-less nodes included, as the classic table.

use crate::args::{
    array_policies, buffer_size, choice, size_or_default, Output, StatOptions, KERNELS, PATTERNS,
};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::matrix::{
    cell_count, default_cell_budget_s, plan, run_matrix, MatrixRequest,
};
use numalab::measure::chase::ChasePattern;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab_report::views::matrix;

#[derive(clap::Args)]
pub struct Args {
    /// Measure latency (default: both latency and bandwidth).
    #[arg(long)]
    latency: bool,
    /// Measure bandwidth (default: both).
    #[arg(long)]
    bandwidth: bool,
    /// Threads per CPU node for bandwidth: 1 or all.
    #[arg(long, value_name = "1|all", default_value = "1", action = clap::ArgAction::Set, value_parser = choice(&["1", "all"], threads_per_node))]
    threads_per_node: bool,
    /// Bandwidth kernel.
    #[arg(long, value_name = "KERNEL", default_value = "read", value_parser = choice(KERNELS, BandwidthKernel::parse))]
    kernel: BandwidthKernel,
    /// Chase pattern for latency.
    #[arg(long, value_name = "PATTERN", default_value = "random", value_parser = choice(PATTERNS, ChasePattern::parse))]
    pattern: ChasePattern,
    /// Buffer size per cell, 4K to 128T (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    size: Option<usize>,
    /// Bandwidth: arrays kept in place in every cell while the others follow the column, e.g.
    /// --kernel copy --mem b=local (read each column, write locally); default: none kept, every
    /// array follows the column.
    #[arg(long = "mem", value_name = "ARRAY=POLICY,...")]
    mem: Option<String>,
    /// Print the plan (rows, columns, the CPUs of each row, buffers, cells
    /// and the measuring time) and measure nothing.
    #[arg(long)]
    list: bool,
    /// With --list: plan for the machine of this hwloc XML file instead of
    /// the live one.
    #[arg(long, value_name = "FILE", requires = "list")]
    topology: Option<std::path::PathBuf>,
    #[command(flatten)]
    stats: StatOptions,
    #[command(flatten)]
    out: Output,
}

/// `--threads-per-node`: whether every CPU of a node runs (`all`).
fn threads_per_node(t: &str) -> Result<bool, String> {
    match t {
        "1" => Ok(false),
        "all" => Ok(true),
        t => Err(format!("'{t}'; valid: 1, all")),
    }
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(a.topology.as_deref())?;
    let (lat, bw) = match (a.latency, a.bandwidth) {
        (false, false) => (true, true),
        x => x,
    };
    let size = size_or_default(&m, a.size);
    let fixed_arrays = match &a.mem {
        None => Default::default(),
        Some(text) => {
            let p = array_policies(&m, "--mem", text, a.kernel)?;
            if p.arrays.is_empty() {
                return Err(CliError::usage(format!(
                    "--mem: the matrix binds arrays to each column; name the arrays to keep in place instead, e.g. {}=local (arrays of {}: {})",
                    a.kernel.array_names()[0],
                    a.kernel.name(),
                    sorted(a.kernel.array_names()).join(", ")
                )));
            }
            if p.arrays.len() == a.kernel.arrays() {
                return Err(CliError::usage(format!(
                    "--mem: every array of {} is kept in place, so no cell would read its column; leave at least one out",
                    a.kernel.name()
                )));
            }
            p.arrays
        }
    };
    let mut req = MatrixRequest {
        rows: None,
        latency: lat,
        bandwidth: bw,
        all_threads_per_node: a.threads_per_node,
        kernel: a.kernel,
        isa: Isa::detect_best(),
        pattern: a.pattern,
        latency_bytes: size,
        bandwidth_bytes: size,
        rule: a.stats.rule(1.0, 1)?,
        fixed_arrays,
    };
    let cells = cell_count(&m, &req).max(1);
    // The default budget is for the whole matrix, shared by its cells.
    req.rule = a.stats.rule(default_cell_budget_s(cells), cells)?;
    if a.list {
        let p = plan(&m, &req)?;
        if a.out.json {
            print_result("matrix", &serde_json::json!({ "plan": p }))?;
        } else {
            let machine = match &a.topology {
                Some(f) => format!("the machine of {}", f.display()),
                None => "this machine".to_string(),
            };
            out!("{}", matrix::plan_text(&p, &machine))?;
        }
        return Ok(exit_for(true));
    }
    let progress = Progress::bar(cells as u64, "matrix");
    let r = run_matrix(&m, &req, &mut |what| progress.step(what))?;
    progress.finish();
    if a.out.json {
        print_result("matrix", &r)?;
    } else {
        out!("{}", matrix::text(&r, a.out.units))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verified))
}

/// Array names in alphabetical order, for messages.
fn sorted(names: &[&'static str]) -> Vec<&'static str> {
    let mut v = names.to_vec();
    v.sort_unstable();
    v
}
