//! `numalab scaling`: 1..N threads packed vs spread, and the contention split.

use crate::args::{
    array_policies, buffer_size, choice, size_or_default, thread_count, Output, StatOptions,
    KERNELS, MAX_THREADS,
};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::scaling::run_scaling_placed;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::report::views::scaling;

#[derive(clap::Args)]
pub struct Args {
    /// Bandwidth kernel.
    #[arg(long, value_name = "KERNEL", default_value = "read", value_parser = choice(KERNELS, BandwidthKernel::parse))]
    kernel: BandwidthKernel,
    /// Largest thread count, 1 to 8192 (default: every allowed CPU).
    #[arg(long, value_name = "N", allow_hyphen_values = true, value_parser = thread_count(MAX_THREADS))]
    max_threads: Option<usize>,
    /// Bytes per buffer, 4K to 128T (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    size: Option<usize>,
    /// Memory policy of every thread's arrays, or one per array (a=bind:0,b=local; arrays not
    /// named are first-touch by their thread); default local to each thread.
    #[arg(long = "mem", value_name = "POLICY", default_value = "local")]
    mem: String,
    #[command(flatten)]
    stats: StatOptions,
    #[command(flatten)]
    out: Output,
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let n_cpus = m.allowed_cpus.len();
    let max = a.max_threads.unwrap_or(n_cpus);
    if max > n_cpus {
        return Err(CliError::usage(format!(
            "--max-threads {max} but only {n_cpus} CPUs are allowed ({})",
            m.allowed_cpus
        )));
    }
    let size = size_or_default(&m, a.size);
    let arrays = array_policies(&m, "--mem", &a.mem, a.kernel)?;
    let mut rule = a.stats.rule(1.0)?;
    if a.stats.budget.is_none() {
        rule.budget = std::time::Duration::from_secs_f64((16.0 / (2 * max) as f64).clamp(0.3, 2.0));
    }
    let progress = Progress::bar(2 * max as u64, "scaling");
    let counts: Vec<usize> = (1..=max).collect();
    let r = run_scaling_placed(
        &m,
        a.kernel,
        Isa::detect_best(),
        size,
        &counts,
        &arrays,
        &rule,
        &mut |w| progress.step(w),
    )?;
    progress.finish();
    if a.out.json {
        print_result("scaling", &r)?;
    } else {
        out!("{}", scaling::text(&r, a.out.units))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(
        r.packed.iter().chain(&r.spread).all(|p| p.verified),
    ))
}
