//! `numalab`: the command-line front end. Each subcommand lives in
//! `cmd/<name>.rs`; the engine is the `numalab` library crate.

// System calls that need `unsafe` go through the engine's `numalab::sys`;
// the one exception is the ELF constructor of `output.rs`.
#![deny(unsafe_code)]

mod args;
mod cmd;
mod launch_args;
mod output;
mod sampling_args;

use clap::{Parser, Subcommand};
use nix::sys::signal::Signal;
use output::errln;
use std::process::ExitCode;

/// numalab: describe a NUMA machine, place threads and memory on it on
/// purpose, and prove where they landed.
#[derive(Parser)]
#[command(name = "numalab", version, about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Measure bandwidth or latency under verified placement.
    #[command(subcommand)]
    Bench(cmd::bench::Bench),
    /// Latency and bandwidth from every CPU node to every memory node.
    Matrix(cmd::matrix::Args),
    /// How fast pages move between memory nodes: move_pages, mbind, migrate_pages.
    Migrate(cmd::migrate::Args),
    /// Bandwidth and latency from L1-sized to DRAM-sized working sets.
    Sizes(cmd::sizes::Args),
    /// Bandwidth for 1..N threads, packed vs spread, and the contention split.
    Scaling(cmd::scaling::Args),
    /// The core + contention split of run times (Cray/NERSC), projected to more cores and bandwidth.
    Extrapolate(cmd::extrapolate::Args),
    /// The placement truth table: every thread x CPU x memory node x read/write case.
    Sweep(cmd::sweep::Args),
    /// Chase latency while injector threads add traffic, idle to saturation.
    LoadedLatency(cmd::loaded_latency::Args),
    /// Cache-line transfer latency between every pair of CPUs.
    C2c(cmd::c2c::Args),
    /// The Apex-MAP locality map: temporal x spatial locality, with the simple model's fit.
    Apexmap(cmd::apexmap::Args),
    /// The placement distribution model: placements of a kernel's arrays counted by link contention.
    Pdm(cmd::pdm::Args),
    /// Placement sensitivity of BLAS levels 1-3 (OpenBLAS), each operand on its own node.
    Blas(cmd::blas::Args),
    /// Memory and thread policies compared for canonical workloads, with advice.
    Policies(cmd::policies::Args),
    /// Predict placements nobody ran: times, link and controller loads, the bottleneck (a calibrated contention model).
    Model(cmd::model::Args),
    /// The placement to use for a workload of a given shape, with its predicted gain and the command lines.
    Advise(cmd::advise::Args),
    /// The full characterization of this machine as one self-contained HTML report.
    Report(cmd::report::Args),
    /// Two results side by side: per metric both values, the ratio, and whether it exceeds the spread.
    Compare(cmd::compare::Args),
    /// Every node of a Slurm allocation reported and judged as one fleet: medians, outliers, differing settings.
    #[command(subcommand)]
    Fleet(cmd::fleet::FleetCommand),
    /// Show the machine: nodes, CPUs, memory, caches, distances, hops, HMAT, devices.
    Topology(cmd::topology::Args),
    /// Allocate a buffer with a memory policy, touch it from a pinned thread, show where its pages landed.
    Place(cmd::place::Args),
    /// Evaluate a CPU/node set expression; lay threads out over it.
    Set(cmd::set::Args),
    /// Show where a running process's memory and threads are.
    Verify(cmd::verify::Args),
    /// Run a command with CPU and memory placement (numactl-compatible options).
    Run(cmd::run::Args),
    /// Run a command and sample which of its data is accessed from which node (no PMU needed).
    Profile(Box<cmd::profile::Args>),
}

/// The (sub)command the arguments name, as far as they name one:
/// `numalab bench bandwidth` for `numalab bench bandwidth --reps 3`.
fn command_path() -> String {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut path = vec!["numalab".to_string()];
    for arg in std::env::args_os().skip(1) {
        let Some(word) = arg.to_str() else { break };
        match cmd.find_subcommand(word) {
            Some(sub) => {
                path.push(sub.get_name().to_string());
                cmd = sub.clone();
            }
            None => break,
        }
    }
    path.join(" ")
}

fn main() -> ExitCode {
    // `numalab ... | head` must end quietly when the reader goes away, as
    // other command-line tools do, not as a failed write.
    numalab::sys::process::default_signal_action(Signal::SIGPIPE);
    // A bug must still end in one line, not a backtrace.
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_default();
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        errln!(
            "numalab: internal error{at}: {} (please report this)",
            msg.replace('\n', " ")
        );
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return output::clap_error(e, &command_path()),
    };
    // What a numalab killed by SIGKILL left changed comes back first.
    numalab::placement::settings::replay_journal()
        .iter()
        .for_each(|w| errln!("numalab: warning: {w}"));
    // Every command but `run` and `profile` prints its result: with
    // standard output closed it would measure for nothing. `run` and
    // `profile` print nothing there: it is the program's.
    if !matches!(cli.command, Command::Run(_) | Command::Profile(_)) {
        if let Err(e) = output::require_stdout() {
            errln!("numalab: {e}");
            return ExitCode::from(e.code);
        }
    }
    let result = match cli.command {
        Command::Bench(b) => cmd::bench::run(b),
        Command::Matrix(a) => cmd::matrix::run(a),
        Command::Migrate(a) => cmd::migrate::run(a),
        Command::Sizes(a) => cmd::sizes::run(a),
        Command::Scaling(a) => cmd::scaling::run(a),
        Command::Extrapolate(a) => cmd::extrapolate::run(a),
        Command::Sweep(a) => cmd::sweep::run(a),
        Command::LoadedLatency(a) => cmd::loaded_latency::run(a),
        Command::C2c(a) => cmd::c2c::run(a),
        Command::Apexmap(a) => cmd::apexmap::run(a),
        Command::Pdm(a) => cmd::pdm::run(a),
        Command::Model(a) => cmd::model::run(a),
        Command::Advise(a) => cmd::advise::run(a),
        Command::Blas(a) => cmd::blas::run(a),
        Command::Policies(a) => cmd::policies::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Compare(a) => cmd::compare::run(a),
        Command::Fleet(f) => cmd::fleet::run(f),
        Command::Topology(a) => cmd::topology::run(a),
        Command::Place(a) => cmd::place::run(a),
        Command::Set(a) => cmd::set::run(a),
        Command::Verify(a) => cmd::verify::run(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Profile(a) => cmd::profile::run(*a),
    };
    // What is still buffered must reach its file before the exit code says
    // it did; a command's own error outranks a failed flush after it.
    let flushed = output::flush_stdout();
    match result.and_then(|code| flushed.map(|()| code)) {
        Ok(code) => code,
        Err(e) => {
            errln!("numalab: {e}");
            ExitCode::from(e.code)
        }
    }
}
