//! `numalab scaling`: 1..N threads packed vs spread, and the contention split
//! within one node; with `--copies N -- CMD ARGS...`, N copies (or N threads
//! through `--env VAR`) of an application packed vs spread, timed, and split;
//! with `--mpi N -- CMD ARGS...`, an MPI job of N ranks packed vs unpacked.

use crate::args::{
    array_policies, buffer_size, choice, parsed, size_or_default, thread_count, whole, Output,
    StatOptions, KERNELS, MAX_THREADS,
};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::copies::{
    run_copies, CopiesError, CopiesRequest, MpiLaunch, MAX_COPIES, MAX_REPS,
};
use numalab::experiments::scaling::run_scaling_placed;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab_report::views::scaling;
use std::ffi::OsString;
use std::path::PathBuf;

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
    /// Run N copies of the command after `--` (1 to 1024), each pinned to one CPU with memory
    /// on its node: one alone, packed on one node, spread one per node.
    #[arg(long, value_name = "N", allow_hyphen_values = true, requires = "command", conflicts_with_all = ["max_threads", "size", "mem", "kernel"], value_parser = whole(1, MAX_COPIES))]
    copies: Option<usize>,
    /// Run the command after `--` as an MPI job of N ranks (2 to 1024) through mpirun, packed
    /// (the nodes filled in turn) and unpacked (ranks dealt round-robin over the nodes), each
    /// rank placed and checked by `numalab run --per-rank map:...`, and split the time into
    /// core and contention as the Cray study did.
    #[arg(long, value_name = "N", allow_hyphen_values = true, requires = "command", conflicts_with_all = ["max_threads", "size", "mem", "kernel", "copies", "env"], value_parser = whole(2, MAX_COPIES))]
    mpi: Option<usize>,
    /// With --mpi: the MPI launcher (Open MPI's mpirun options: -np, --bind-to none).
    #[arg(long, value_name = "PATH", default_value = "mpirun", requires = "mpi")]
    mpirun: PathBuf,
    /// With --copies: run one process with this variable set to N (e.g. OMP_NUM_THREADS)
    /// on N CPUs instead of N copies.
    #[arg(long, value_name = "VAR", requires = "copies", value_parser = parsed(env_name))]
    env: Option<String>,
    /// The command and its arguments, after `--` (with --copies).
    #[arg(last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// An environment variable name: letters, digits and `_`, not starting
/// with a digit, at most 128 bytes.
fn env_name(t: &str) -> Result<String, String> {
    let ok = !t.is_empty()
        && t.len() <= 128
        && !t.starts_with(|c: char| c.is_ascii_digit())
        && t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(t.to_string())
    } else {
        Err(format!(
            "'{}' is not a variable name (letters, digits and _, not starting with a digit, e.g. OMP_NUM_THREADS)",
            t.chars().take(40).collect::<String>()
        ))
    }
}

/// Runs of every layout with `--copies`: `--reps` (1 to [`MAX_REPS`], each
/// a whole run of the application), 3 by default; the median is reported.
fn copies_reps(reps: Option<usize>) -> Result<usize, CliError> {
    match reps {
        None => Ok(3),
        Some(n) if n <= MAX_REPS => Ok(n),
        Some(n) => Err(CliError::usage(format!(
            "--reps {n} with --copies: runs of every layout, 1 to {MAX_REPS} (each runs the whole command)"
        ))),
    }
}

/// A folder of the ranks' records that `--mpi` makes and removes.
struct RecordsDir(PathBuf);

impl RecordsDir {
    fn make() -> Result<RecordsDir, CliError> {
        let p = std::env::temp_dir().join(format!(
            "numalab-scaling-mpi-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir(&p).map_err(|e| CliError::failed(format!("{}: {e}", p.display())))?;
        Ok(RecordsDir(p))
    }
}

impl Drop for RecordsDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `--copies N -- CMD` or `--mpi N -- CMD`: the application runs and their
/// split.
fn run_copies_cmd(a: &Args, copies: usize) -> CliResult {
    let m = load_machine(None)?;
    let records = a.mpi.map(|_| RecordsDir::make()).transpose()?;
    let mpi = match &records {
        Some(dir) => Some(MpiLaunch {
            mpirun: a.mpirun.clone().into_os_string(),
            numalab: std::env::current_exe()
                .map_err(|e| CliError::failed(format!("where is numalab itself: {e}")))?,
            records: dir.0.clone(),
            as_root: numalab::sys::process::effective_uid() == 0,
        }),
        None => None,
    };
    let req = CopiesRequest {
        copies,
        env: a.env.clone(),
        reps: copies_reps(a.stats.reps)?,
        command: a.command.clone(),
        output_to_stderr: a.out.json,
        mpi,
    };
    let r = run_copies(&m, &req, &mut |_| {}).map_err(|e| match e {
        CopiesError::Invalid(msg) => CliError::usage(msg),
        CopiesError::Failed(msg) => CliError::failed(msg),
    })?;
    if a.out.json {
        print_result("scaling", &r)?;
    } else {
        out!("{}", scaling::copies_text(&r))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(
        r.layouts
            .iter()
            .filter(|l| l.applicable)
            .all(|l| l.verified),
    ))
}

pub fn run(a: Args) -> CliResult {
    if let Some(n) = a.copies.or(a.mpi) {
        return run_copies_cmd(&a, n);
    }
    if !a.command.is_empty() {
        return Err(CliError::usage(
            "a command after -- needs --copies N (copies of it) or --mpi N (an MPI job of N ranks)",
        ));
    }
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
    let rule = a
        .stats
        .rule((16.0 / (2 * max) as f64).clamp(0.3, 2.0), 2 * max)?;
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
        r.packed
            .iter()
            .chain(&r.spread)
            .chain(&r.alone)
            .all(|p| p.verified),
    ))
}
