//! `numalab bench bandwidth|latency`: one measurement under verified placement.

use crate::cmd::options::{StatOptions, Units};
use crate::cmd::place::{cpuless_hint, parse_one_cpu};
use crate::output::{load_machine, print_json, CliError, CliResult};
use numalab::measure::chase::ChasePattern;
use numalab::measure::environment::Environment;
use numalab::measure::harness::{
    default_buffer_bytes, run_bandwidth, run_latency, BandwidthRequest, BandwidthResult,
    LatencyRequest, LatencyResult, WorkerPlan,
};
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::placement::thread_policy::THREAD_POLICY_CHOICES;
use numalab::placement::{
    format_bytes, parse_size, ListMeaning, MemoryPolicy, ResourceSet, Thp, ThreadPolicy,
};
use numalab::Machine;
use serde::Serialize;
use std::process::ExitCode;

/// Version of the JSON the measuring commands print.
pub const RESULT_SCHEMA_VERSION: &str = "1.0";

#[derive(clap::Subcommand)]
pub enum Bench {
    /// Memory bandwidth of a kernel (read, write, copy, triad...) with pinned threads.
    Bandwidth(BandwidthArgs),
    /// Memory latency by dependent-load pointer chase.
    Latency(LatencyArgs),
}

#[derive(clap::Args)]
pub struct BandwidthArgs {
    /// read, read-prefetch, write, write-nt, copy, scale, add, triad, line-read, line-write, random-read.
    #[arg(long, value_name = "KERNEL", default_value = "read")]
    kernel: String,
    /// Number of threads (default 1).
    #[arg(long, value_name = "N", default_value = "1")]
    threads: String,
    /// CPUs the threads may use (set grammar; default all allowed).
    #[arg(long, value_name = "SET", default_value = "all")]
    cpus: String,
    /// compact (fill a node first), scatter (one per node in turn), or a CPU list.
    #[arg(long, value_name = "POLICY", default_value = "compact")]
    threads_policy: String,
    /// Allow more threads than CPUs.
    #[arg(long)]
    oversubscribe: bool,
    /// Memory policy of every buffer (see numalab place --help); default first-touch by each worker.
    #[arg(long = "mem", value_name = "POLICY", default_value = "first-touch")]
    mem: String,
    /// CPU that first touches every buffer (default: each worker its own).
    #[arg(long, value_name = "CPU")]
    touch_by: Option<String>,
    /// Bytes per buffer (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE")]
    size: Option<String>,
    /// Instruction set: auto, avx512, avx2, sse2, neon, portable.
    #[arg(long, value_name = "ISA", default_value = "auto")]
    isa: String,
    /// Transparent huge pages for the buffers: on, off, system (default on: fewer TLB misses, faster prefault).
    #[arg(long, value_name = "on|off|system", default_value = "on")]
    thp: String,
    /// gb (1e9 B/s) or gib (2^30 B/s).
    #[arg(long, value_name = "UNITS", default_value = "gb")]
    units: String,
    #[command(flatten)]
    stats: StatOptions,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Args)]
pub struct LatencyArgs {
    /// random (whole buffer: TLB misses included), page (random within a page: TLB misses rare), stride.
    #[arg(long, value_name = "PATTERN", default_value = "random")]
    pattern: String,
    /// CPU that chases (default: the first allowed CPU).
    #[arg(long, value_name = "CPU")]
    cpu: Option<String>,
    /// Memory policy of the buffer (default: local to the CPU).
    #[arg(long = "mem", value_name = "POLICY", default_value = "local")]
    mem: String,
    /// Buffer size (default: 4x the last-level cache).
    #[arg(long, value_name = "SIZE")]
    size: Option<String>,
    /// Independent chains followed at once (memory-level parallelism).
    #[arg(long, value_name = "N", default_value = "1")]
    chains: String,
    /// Back the buffer with huge pages (THP; with --hugetlb, hugetlbfs pages).
    #[arg(long)]
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

/// Parses a size option; 0 and absurd sizes are refused.
pub fn size_option(m: &Machine, text: Option<&str>) -> Result<usize, CliError> {
    match text {
        None => Ok(default_buffer_bytes(m)),
        Some(t) => {
            let v = parse_size(t).map_err(CliError::usage)?;
            if v < 4096 {
                return Err(CliError::usage(format!(
                    "--size {t} is too small: at least 4K (one page) per buffer"
                )));
            }
            usize::try_from(v).map_err(|_| CliError::usage(format!("--size {t} is too large")))
        }
    }
}

/// The CPUs of `n` threads over the set `cpus` with the thread policy.
pub fn thread_cpus(
    m: &Machine,
    cpus: &str,
    n: &str,
    policy: &str,
    oversubscribe: bool,
) -> Result<Vec<u32>, CliError> {
    let set = ResourceSet::parse(m, cpus, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("--cpus: {e}")))?;
    if set.cpus.is_empty() {
        return Err(CliError::usage(format!(
            "--cpus '{cpus}' holds no CPU{}; nodes with CPUs: {}",
            cpuless_hint(m, &set),
            m.cpu_nodes()
        )));
    }
    let n: usize = n.trim().parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
        CliError::usage(format!(
            "--threads '{n}' is not a thread count (a whole number >= 1)"
        ))
    })?;
    let p = ThreadPolicy::parse(policy).map_err(|e| {
        CliError::usage(format!(
            "--threads-policy: {e}; valid: {THREAD_POLICY_CHOICES}"
        ))
    })?;
    p.assign(m, &set.cpus, n, oversubscribe)
        .map_err(CliError::usage)
}

#[derive(Serialize)]
struct Envelope<'a, T: Serialize> {
    schema_version: &'static str,
    command: &'static str,
    #[serde(flatten)]
    result: &'a T,
    environment: Environment,
}

fn bandwidth(a: BandwidthArgs) -> CliResult {
    let m = load_machine(None)?;
    let kernel = BandwidthKernel::parse(&a.kernel).map_err(CliError::usage)?;
    let isa = match a.isa.as_str() {
        "auto" => Isa::detect_best(),
        t => Isa::parse(t).map_err(CliError::usage)?,
    };
    isa.check_available().map_err(CliError::usage)?;
    let units = Units::parse(&a.units)?;
    let cpus = thread_cpus(&m, &a.cpus, &a.threads, &a.threads_policy, a.oversubscribe)?;
    let policy = MemoryPolicy::parse(&m, &a.mem).map_err(CliError::usage)?;
    let touch_by = a
        .touch_by
        .as_deref()
        .map(|c| parse_one_cpu(&m, c))
        .transpose()?;
    let thp = Thp::parse(&a.thp).map_err(CliError::usage)?;
    let req = BandwidthRequest {
        kernel,
        isa,
        workers: cpus
            .iter()
            .map(|&cpu| WorkerPlan {
                cpu,
                policy: policy.clone(),
                toucher: touch_by,
            })
            .collect(),
        buffer_bytes: size_option(&m, a.size.as_deref())?,
        thp: Some(thp),
        rule: a.stats.rule(2.5)?,
    };
    let progress = crate::output::Progress::spinner(&format!("bench bandwidth {}", kernel.name()));
    let r = run_bandwidth(&m, &req)?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "bench bandwidth",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        print!("{}", bandwidth_text(&r, &policy, units));
    }
    Ok(exit_for(r.verification.verified))
}

/// Exit 3 when the placement did not verify (the figures are still printed).
pub fn exit_for(verified: bool) -> ExitCode {
    if verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    }
}

/// The text view of a bandwidth result.
pub fn bandwidth_text(r: &BandwidthResult, policy: &MemoryPolicy, u: Units) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let cpus: Vec<String> = r
        .verification
        .workers
        .iter()
        .map(|w| w.requested_cpu.to_string())
        .collect();
    let _ = writeln!(
        s,
        "{} with {} thread{} on CPU {}, memory {policy}, {} x {} per thread, ISA {}",
        r.kernel.name(),
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        cpus.join(","),
        r.kernel.arrays(),
        format_bytes(r.buffer_bytes),
        r.isa.name()
    );
    let f = |x: f64| format!("{:.2}", u.convert(x));
    let _ = writeln!(
        s,
        "  program bytes  median {} {}  best {}  (min {}, max {}; ±{:.1}% CI; {} samples, {:?})",
        f(r.gbps.median),
        u.label(),
        f(r.gbps.best),
        f(r.gbps.min),
        f(r.gbps.max),
        r.gbps.rel_ci * 100.0,
        r.measurement.samples.len(),
        r.measurement.stop_reason
    );
    let _ = writeln!(
        s,
        "  memory bytes   median {} {}  best {}  (what memory moves: write-allocate included)",
        f(r.memory_gbps.median),
        u.label(),
        f(r.memory_gbps.best)
    );
    if r.threads > 1 {
        let per: Vec<String> = r
            .verification
            .workers
            .iter()
            .map(|w| {
                let med = numalab::measure::stats::Summary::of(&w.gbps)
                    .map(|s| s.median)
                    .unwrap_or(0.0);
                format!("CPU {} {}", w.requested_cpu, f(med))
            })
            .collect();
        let _ = writeln!(s, "  per thread     {} {}", per.join(", "), u.label());
    }
    s.push_str(&verification_text(&r.verification));
    for w in &r.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}

/// "placement verified: ..." or the problems.
pub fn verification_text(v: &numalab::measure::harness::Verification) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    if v.verified {
        let mut nodes = std::collections::BTreeMap::<u32, u64>::new();
        for w in &v.workers {
            for b in &w.buffers {
                for (n, p) in &b.pages_by_node {
                    *nodes.entry(*n).or_insert(0) += p * b.page_size as u64;
                }
            }
        }
        let total: u64 = nodes.values().sum();
        let parts: Vec<String> = nodes
            .iter()
            .map(|(n, b)| format!("node {n} {:.0}%", 100.0 * *b as f64 / total.max(1) as f64))
            .collect();
        let _ = writeln!(
            s,
            "  placement verified: threads on their CPUs, pages on {}",
            parts.join(", ")
        );
    } else {
        for p in &v.problems {
            let _ = writeln!(s, "  NOT VERIFIED: {p}");
        }
    }
    s
}

fn latency(a: LatencyArgs) -> CliResult {
    let m = load_machine(None)?;
    let pattern = ChasePattern::parse(&a.pattern).map_err(CliError::usage)?;
    let cpu = match a.cpu.as_deref() {
        Some(c) => parse_one_cpu(&m, c)?,
        None => m
            .allowed_cpus
            .first()
            .ok_or_else(|| CliError::failed("no CPU is allowed for this process"))?,
    };
    let policy = MemoryPolicy::parse(&m, &a.mem).map_err(CliError::usage)?;
    let chains: usize = a
        .chains
        .trim()
        .parse()
        .ok()
        .filter(|c| (1..=64).contains(c))
        .ok_or_else(|| {
            CliError::usage(format!(
                "--chains '{}' must be a whole number from 1 to 64",
                a.chains
            ))
        })?;
    let req = LatencyRequest {
        cpu,
        policy: policy.clone(),
        pattern,
        chains,
        buffer_bytes: size_option(&m, a.size.as_deref())?,
        thp: Some(if a.huge { Thp::On } else { Thp::Off }),
        hugetlb: a.hugetlb,
        rule: a.stats.rule(2.5)?,
    };
    let progress = crate::output::Progress::spinner("bench latency");
    let r = run_latency(&m, &req)?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "bench latency",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        print!("{}", latency_text(&r, cpu, &policy, &m));
    }
    Ok(exit_for(r.verification.verified))
}

fn latency_text(r: &LatencyResult, cpu: u32, policy: &MemoryPolicy, m: &Machine) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let node = m
        .node_of_cpu(cpu)
        .map(|n| format!(" (node {n})"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{:?} chase on CPU {cpu}{node}, memory {policy}, {} buffer, {} chain{}",
        r.pattern,
        format_bytes(r.buffer_bytes),
        r.chains,
        if r.chains == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "  latency  median {:.1} ns  best {:.1} ns  (min {:.1}, max {:.1}; ±{:.1}% CI; {} samples, {:?})",
        r.ns.median,
        r.ns.best,
        r.ns.min,
        r.ns.max,
        r.ns.rel_ci * 100.0,
        r.measurement.samples.len(),
        r.measurement.stop_reason
    );
    if r.core_ghz > 0.0 {
        let _ = writeln!(
            s,
            "  cycles   median {:.0}  (core clock {:.2} GHz)",
            r.cycles.median, r.core_ghz
        );
    }
    if r.chains > 1 {
        let _ = writeln!(s, "  per access over all chains: {:.2} ns", r.ns_per_access);
    }
    s.push_str(&verification_text(&r.verification));
    for w in &r.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}
