//! `numalab bench bandwidth|latency`: one measurement under verified placement.

use crate::args::{
    array_policies, buffer_size, choice, cpu_or_first, isa, memory_policy, one_cpu,
    size_or_default, thread_count, thread_cpus, whole, Output, PinnedBuffer, StatOptions,
    ThreadLayout, ISAS, KERNELS, MAX_THREADS, PATTERNS, THP,
};
use crate::output::out;
use crate::output::{exit_for, load_machine, print_result, CliError, CliResult, Progress};
use numalab::input::{read_text, InputKind};
use numalab::measure::chase::ChasePattern;
use numalab::measure::environment::cache_fit_warning;
use numalab::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::placement::Thp;
use numalab::placement::{parse_placement_file, ArrayPolicies};
use numalab_report::views::bench::{bandwidth_text, latency_text};

#[derive(clap::Subcommand)]
pub enum Bench {
    /// Memory bandwidth of a kernel (read, write, copy, triad...) with pinned threads.
    Bandwidth(BandwidthArgs),
    /// Memory latency by dependent-load pointer chase.
    Latency(LatencyArgs),
}

#[derive(clap::Args)]
pub struct BandwidthArgs {
    /// The kernel every thread streams.
    #[arg(long, value_name = "KERNEL", default_value = "read", value_parser = choice(KERNELS, BandwidthKernel::parse))]
    kernel: BandwidthKernel,
    /// Number of threads, 1 to 8192.
    #[arg(long, value_name = "N", default_value = "1", allow_hyphen_values = true, value_parser = thread_count(MAX_THREADS))]
    threads: usize,
    /// CPUs the threads may use (set grammar; default all allowed).
    #[arg(long, value_name = "SET", default_value = "all")]
    cpus: String,
    #[command(flatten)]
    layout: ThreadLayout,
    /// Allow more threads than CPUs.
    #[arg(long)]
    oversubscribe: bool,
    /// Memory policy of every buffer (see numalab place --help), or one per array:
    /// a=bind:0,b=bind:1,c=interleave:all (arrays: read a, b; written b for copy/scale, c for
    /// add/triad); arrays not named are first-touch by each worker.
    #[arg(long = "mem", value_name = "POLICY", default_value = "first-touch")]
    mem: String,
    /// Per-thread, per-array placement from a JSON file: [{"cpu": 0, "arrays": {"a": "bind:1"}}, ...],
    /// one entry per thread (replaces --threads, --cpus and --layout; --mem is the
    /// policy of arrays an entry does not name).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["threads", "cpus", "layout", "oversubscribe"])]
    placement: Option<std::path::PathBuf>,
    /// CPU that first touches every buffer (default: each worker its own).
    #[arg(long, value_name = "CPU")]
    touch_by: Option<String>,
    /// Bytes per buffer, 4K to 128T (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    size: Option<usize>,
    /// Instruction set (auto: the widest this CPU runs).
    #[arg(long, value_name = "ISA", default_value = "auto", value_parser = choice(ISAS, isa))]
    isa: Isa,
    /// Transparent huge pages for the buffers (on: fewer TLB misses, faster prefault).
    #[arg(long, value_name = "THP", default_value = "on", value_parser = choice(THP, Thp::parse))]
    thp: Thp,
    #[command(flatten)]
    stats: StatOptions,
    #[command(flatten)]
    out: Output,
}

#[derive(clap::Args)]
pub struct LatencyArgs {
    /// random (whole buffer: TLB misses included), page (random within a page: TLB misses rare), stride.
    #[arg(long, value_name = "PATTERN", default_value = "random", value_parser = choice(PATTERNS, ChasePattern::parse))]
    pattern: ChasePattern,
    #[command(flatten)]
    buffer: PinnedBuffer,
    /// Independent chains followed at once (memory-level parallelism), 1 to 64.
    #[arg(long, value_name = "N", default_value = "1", allow_hyphen_values = true, value_parser = whole(1, 64))]
    chains: usize,
    /// Transparent huge pages for the chase buffer: on (fewer TLB misses), off, or the system's setting.
    #[arg(long, value_name = "THP", default_value = "off", value_parser = choice(THP, Thp::parse))]
    thp: Thp,
    /// The older spelling of --thp on.
    #[arg(long, hide = true, conflicts_with = "thp")]
    huge: bool,
    /// Use hugetlbfs 2 MiB pages (reserved in /proc/sys/vm/nr_hugepages).
    #[arg(long)]
    hugetlb: bool,
    #[command(flatten)]
    stats: StatOptions,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(b: Bench) -> CliResult {
    match b {
        Bench::Bandwidth(a) => bandwidth(a),
        Bench::Latency(a) => latency(a),
    }
}

fn bandwidth(a: BandwidthArgs) -> CliResult {
    let m = load_machine(None)?;
    let names = a.kernel.array_names();
    let policy = array_policies(&m, "--mem", &a.mem, a.kernel)?;
    let touch_by = a
        .touch_by
        .as_deref()
        .map(|c| one_cpu(&m, "--touch-by", c))
        .transpose()?;
    let plans: Vec<(u32, ArrayPolicies)> = match &a.placement {
        Some(path) => {
            let opt = format!("--placement {}", path.display());
            let text = read_text(path, InputKind::PlacementJson)
                .map_err(|e| CliError::usage(format!("--placement: {e}")))?;
            parse_placement_file(&m, &text, a.kernel.name(), names, &policy.default)
                .map_err(|e| CliError::usage(format!("{opt}: {e}")))?
                .into_iter()
                .map(|t| (t.cpu, t.arrays))
                .collect()
        }
        None => thread_cpus(&m, &a.cpus, a.threads, &a.layout.layout, a.oversubscribe)?
            .into_iter()
            .map(|cpu| (cpu, policy.clone()))
            .collect(),
    };
    let req = BandwidthRequest {
        kernel: a.kernel,
        isa: a.isa,
        workers: plans
            .into_iter()
            .map(|(cpu, policy)| WorkerPlan {
                cpu,
                policy,
                toucher: touch_by,
            })
            .collect(),
        buffer_bytes: size_or_default(&m, a.size),
        thp: Some(a.thp),
        rule: a.stats.rule(2.5, 1)?,
    };
    let progress = Progress::spinner(&format!("bench bandwidth {}", a.kernel.name()));
    let mut r = run_bandwidth(&m, &req)?;
    progress.finish();
    let data = req.buffer_bytes as u64 * a.kernel.arrays() as u64 * req.workers.len() as u64;
    r.warnings.extend(cache_fit_warning(
        &m,
        data,
        "data (all arrays of all threads)",
    ));
    if a.out.json {
        print_result("bench bandwidth", &r)?;
    } else {
        let shown = match &a.placement {
            Some(p) => format!("from {}", p.display()),
            None => policy.to_string(),
        };
        out!("{}", bandwidth_text(&r, &shown, a.out.units))?;
    }
    Ok(exit_for(r.verification.verified))
}

fn latency(a: LatencyArgs) -> CliResult {
    let m = load_machine(None)?;
    let cpu = cpu_or_first(&m, a.buffer.cpu.as_deref())?;
    let policy = memory_policy(&m, "--mem", &a.buffer.mem)?;
    let req = LatencyRequest {
        cpu,
        policy: policy.clone(),
        pattern: a.pattern,
        chains: a.chains,
        buffer_bytes: size_or_default(&m, a.buffer.size),
        thp: Some(if a.huge { Thp::On } else { a.thp }),
        hugetlb: a.hugetlb,
        rule: a.stats.rule(2.5, 1)?,
    };
    let progress = Progress::spinner("bench latency");
    let r = run_latency(&m, &req)?;
    progress.finish();
    if a.json {
        print_result("bench latency", &r)?;
    } else {
        out!("{}", latency_text(&r, cpu, &policy, &m))?;
    }
    Ok(exit_for(r.verification.verified))
}
