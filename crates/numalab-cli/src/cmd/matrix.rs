//! `numalab matrix`: latency and bandwidth from every CPU node to every
//! memory node, CPU-less nodes included, as the classic table.

use crate::cmd::bench::{exit_for, size_option, RESULT_SCHEMA_VERSION};
use crate::cmd::options::{StatOptions, Units};
use crate::output::{load_machine, print_json, CliError, CliResult, Progress};
use numalab::experiments::matrix::{
    cell_count, render_table, run_matrix, MatrixRequest, MatrixResult,
};
use numalab::measure::chase::ChasePattern;
use numalab::measure::environment::Environment;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use serde::Serialize;

#[derive(clap::Args)]
pub struct Args {
    /// Measure latency (default: both latency and bandwidth).
    #[arg(long)]
    latency: bool,
    /// Measure bandwidth (default: both).
    #[arg(long)]
    bandwidth: bool,
    /// Threads per CPU node for bandwidth: 1 or all.
    #[arg(long, value_name = "1|all", default_value = "1")]
    threads_per_node: String,
    /// Bandwidth kernel.
    #[arg(long, value_name = "KERNEL", default_value = "read")]
    kernel: String,
    /// Chase pattern for latency: random, page, stride.
    #[arg(long, value_name = "PATTERN", default_value = "random")]
    pattern: String,
    /// Buffer size per cell (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE")]
    size: Option<String>,
    /// gb (1e9 B/s) or gib.
    #[arg(long, value_name = "UNITS", default_value = "gb")]
    units: String,
    #[command(flatten)]
    stats: StatOptions,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Envelope<'a> {
    schema_version: &'static str,
    command: &'static str,
    #[serde(flatten)]
    result: &'a MatrixResult,
    environment: Environment,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let (lat, bw) = match (a.latency, a.bandwidth) {
        (false, false) => (true, true),
        x => x,
    };
    let all = match a.threads_per_node.as_str() {
        "1" => false,
        "all" => true,
        t => {
            return Err(CliError::usage(format!(
                "--threads-per-node '{t}'; valid: 1, all"
            )))
        }
    };
    let units = Units::parse(&a.units)?;
    let size = size_option(&m, a.size.as_deref())?;
    let mut req = MatrixRequest {
        latency: lat,
        bandwidth: bw,
        all_threads_per_node: all,
        kernel: BandwidthKernel::parse(&a.kernel).map_err(CliError::usage)?,
        isa: Isa::detect_best(),
        pattern: ChasePattern::parse(&a.pattern).map_err(CliError::usage)?,
        latency_bytes: size,
        bandwidth_bytes: size,
        rule: a.stats.rule(1.0)?,
    };
    let cells = cell_count(&m, &req).max(1);
    // The default budget is for the whole matrix: about 12 s in all.
    if a.stats.budget.is_none() {
        req.rule.budget = std::time::Duration::from_secs_f64((12.0 / cells as f64).clamp(0.2, 1.5));
    }
    let progress = Progress::bar(cells as u64, "matrix");
    let r = run_matrix(&m, &req, &mut |what| progress.step(what))?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "matrix",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        if let Some(t) = &r.latency {
            print!(
                "{}",
                render_table(
                    &format!("Latency (ns per load, {:?} chase):", r.pattern),
                    &r.mem_nodes,
                    t,
                    &|v| format!("{v:.1}")
                )
            );
            println!("NUMA ratio (latency / local latency):");
            print_ratios(&r.mem_nodes, t);
        }
        if let Some(t) = &r.bandwidth {
            let title = format!(
                "Bandwidth ({} {}, {} thread(s) per node):",
                r.kernel.name(),
                units.label(),
                r.threads_per_node
            );
            print!(
                "{}",
                render_table(&title, &r.mem_nodes, t, &|v| format!(
                    "{:.2}",
                    units.convert(v)
                ))
            );
            println!("NUMA ratio (local bandwidth / bandwidth):");
            print_ratios(&r.mem_nodes, t);
        }
        if r.verified {
            println!("placement verified in every cell");
        } else {
            println!("NOT VERIFIED in some cells: see --json");
        }
        crate::output::print_warnings(&r.warnings);
    }
    Ok(exit_for(r.verified))
}

fn print_ratios<T>(cols: &[u32], t: &[Vec<numalab::experiments::matrix::Cell<T>>]) {
    print!("  {:>10}", "CPU node");
    for c in cols {
        print!(" {:>10}", format!("mem {c}"));
    }
    println!();
    for row in t {
        print!("  {:>10}", row.first().map(|c| c.cpu_node).unwrap_or(0));
        for c in row {
            print!(
                " {:>10}",
                c.numa_ratio
                    .map(|r| format!("{r:.2}"))
                    .unwrap_or("-".into())
            );
        }
        println!();
    }
}
