//! `numalab sizes`: bandwidth and latency from L1-sized to DRAM-sized working sets.

use crate::args::{
    choice, cpu_or_first, memory_policy, size, size_or_default, thread_count, Output, StatOptions,
    MAX_THREADS,
};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::sizes::{run_sizes_with, sweep_sizes, SizesLayout, SizesSetup};
use numalab::measure::kernels::Isa;
use numalab::text::format::bytes as format_bytes;
use numalab_report::views::sizes;

#[derive(clap::Args)]
pub struct Args {
    /// CPU to run on with one thread (default: the first allowed CPU).
    #[arg(long, value_name = "CPU", conflicts_with_all = ["threads", "layout"])]
    cpu: Option<String>,
    /// Threads streaming at once, each its own working set, 1 to the allowed CPUs
    /// (default 1); bandwidth is then also shown per core (aggregate / N).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = thread_count(MAX_THREADS))]
    threads: Option<usize>,
    /// How threads are laid out over the CPUs: compact (fill a node first) or scatter (one per node in turn) [default: compact].
    #[arg(long, value_name = "LAYOUT", value_parser = choice(SizesLayout::NAMES, SizesLayout::parse))]
    layout: Option<SizesLayout>,
    /// Memory policy of every buffer (e.g. bind:1 for a remote curve); default local to each thread.
    #[arg(long = "mem", value_name = "POLICY", default_value = "local")]
    mem: String,
    /// Largest working set, 1 byte to 128T (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = size(1, "a working set of at least one byte"))]
    max_size: Option<usize>,
    #[command(flatten)]
    stats: StatOptions,
    #[command(flatten)]
    out: Output,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let memory = memory_policy(&m, "--mem", &a.mem)?;
    let setup = match (a.threads, a.layout) {
        (None, None) => SizesSetup {
            memory,
            ..SizesSetup::one(cpu_or_first(&m, a.cpu.as_deref())?)
        },
        (threads, layout) => {
            let layout = layout.unwrap_or(SizesLayout::Compact);
            let n = threads.unwrap_or(1);
            SizesSetup {
                cpus: layout
                    .cpus(&m, n)
                    .map_err(|e| CliError::usage(format!("--threads: {e}")))?,
                layout: Some(layout),
                memory,
            }
        }
    };
    let max = size_or_default(&m, a.max_size) as u64;
    let sizes = sweep_sizes(&m, max);
    if sizes.is_empty() {
        return Err(CliError::usage(format!(
            "--max-size {} is smaller than the smallest size of the sweep",
            format_bytes(max)
        )));
    }
    // About 25 s for the whole sweep by default: four measurements per size.
    let measurements = 4 * sizes.len();
    let mut rule = a
        .stats
        .rule((25.0 / measurements as f64).clamp(0.1, 1.0), measurements)?;
    if !a.stats.budget_given() {
        rule.min_reps = rule.min_reps.min(3);
    }
    let progress = Progress::bar(4 * sizes.len() as u64, "sizes");
    let r = run_sizes_with(&m, &setup, &sizes, Isa::detect_best(), &rule, &mut |w| {
        progress.step(w)
    })?;
    progress.finish();
    if a.out.json {
        print_result("sizes", &r)?;
    } else {
        out!("{}", sizes::text(&r, a.out.units))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.points.iter().all(|p| p.verified)))
}
