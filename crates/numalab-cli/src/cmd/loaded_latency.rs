//! `numalab loaded-latency`: chase latency while injector threads add
//! traffic, idle to saturation, per traffic mix, with the knee marked.

use crate::args::{
    buffer_size, choice, choice_list, cpuless_hint, one_cpu, List, Output, PinnedBuffer,
    StatOptions, PATTERNS, THP,
};
use crate::output::out;
use crate::output::{
    exit_for, load_machine, print_result, print_warnings, CliError, CliResult, Progress,
};
use numalab::experiments::loaded_latency::{
    default_injectors, measurements, run_loaded_latency, usable_cpus, Ladder, LoadStep,
    LoadedLatencyRequest,
};
use numalab::measure::chase::ChasePattern;
use numalab::measure::harness::default_buffer_bytes;
use numalab::measure::pacing::TrafficMix;
use numalab::placement::{ListMeaning, MemoryPolicy, ResourceSet, Thp};
use numalab::text::parse;
use numalab::{IdSet, Machine};
use numalab_report::views::loaded_latency::text;
use std::time::Duration;

/// Default per-step budget, seconds: five mixes of seven measurements stay
/// under ~20 s on a small machine.
const DEFAULT_STEP_BUDGET: f64 = 0.3;

#[derive(clap::Args)]
pub struct Args {
    /// The chase buffer and the chasing CPU.
    #[command(flatten)]
    buffer: PinnedBuffer,
    /// CPUs of the injector threads, one each (set grammar; default: every other allowed CPU, SMT siblings of the chasing CPU left out when others remain).
    #[arg(long, value_name = "SET")]
    injector_cpus: Option<String>,
    /// Memory policy of the injector buffers (default: bound to the node(s) holding the chase buffer, so both load the same memory controller).
    #[arg(long = "injector-mem", value_name = "POLICY")]
    injector_mem: Option<String>,
    /// Traffic mixes, comma separated: read, R:W (reads:writes with ordinary stores, e.g. 3:1), write-nt.
    #[arg(long, value_name = "LIST", default_value = "read,3:1,2:1,1:1,write-nt", value_parser = choice_list(&["read", "R:W", "write-nt"], mix))]
    mix: List<TrafficMix>,
    /// Load steps as GB/s per injector thread (0.001 to 10000), comma separated; max = unpaced (default: unpaced, then 1/16, 1/8, 1/4, 1/2, 0.71 of its rate).
    #[arg(
        long,
        value_name = "LIST",
        conflicts_with = "delays",
        allow_hyphen_values = true
    )]
    rates: Option<String>,
    /// Load steps as ns of pause after every injector chunk (0 to 1000000000, one second), comma separated (0 = no pause).
    #[arg(long, value_name = "LIST", allow_hyphen_values = true)]
    delays: Option<String>,
    /// Buffer size per injector, 4K to 128T (default: --size when given, else 4x the last-level cache shared among the injectors, at least 64M each).
    #[arg(long, value_name = "SIZE", allow_hyphen_values = true, value_parser = buffer_size())]
    injector_size: Option<usize>,
    /// Chase pattern: random (TLB misses included) or page (random within pages).
    #[arg(long, value_name = "PATTERN", default_value = "random", value_parser = choice(PATTERNS, ChasePattern::parse))]
    pattern: ChasePattern,
    /// Transparent huge pages for the chase buffer: on (fewer TLB misses), off, or the system's setting.
    #[arg(long, value_name = "THP", default_value = "off", value_parser = choice(THP, Thp::parse))]
    thp: Thp,
    /// The older spelling of --thp on.
    #[arg(long, hide = true, conflicts_with = "thp")]
    huge: bool,
    /// Transparent huge pages for the injector buffers.
    #[arg(long, value_name = "THP", default_value = "on", value_parser = choice(THP, Thp::parse))]
    injector_thp: Thp,
    /// Measurement options: --budget is shared among every mix's idle measurement and steps; --budget-each defaults to 0.3 s per step.
    #[command(flatten)]
    stats: StatOptions,
    #[command(flatten)]
    out: Output,
}

/// One `--mix` item, its error naming the valid forms.
fn mix(t: &str) -> Result<TrafficMix, String> {
    TrafficMix::parse(t).map_err(|e| {
        if e.contains("valid:") {
            e
        } else {
            format!("{e}; valid: {}", TrafficMix::CHOICES)
        }
    })
}

/// Parses `--rates` (GB/s per injector, or max) or `--delays` (ns).
fn ladder(rates: Option<&str>, delays: Option<&str>) -> Result<Ladder, CliError> {
    let items = |opt: &str, t: &str| -> Result<Vec<String>, CliError> {
        let v: Vec<String> = t.split(',').map(|s| s.trim().to_string()).collect();
        if v.iter().any(|s| s.is_empty()) {
            return Err(CliError::usage(format!("{opt} '{t}' has an empty entry")));
        }
        Ok(v)
    };
    let mut steps = Vec::new();
    if let Some(t) = rates {
        for s in items("--rates", t)? {
            if s == "max" {
                steps.push(LoadStep::Max);
                continue;
            }
            let bytes_per_second = parse::rate(&s).map_err(|e| {
                CliError::usage(format!(
                    "--rates: {e} per injector thread (or max: unpaced)"
                ))
            })?;
            steps.push(LoadStep::Rate { bytes_per_second });
        }
    } else if let Some(t) = delays {
        for s in items("--delays", t)? {
            let ns = parse::delay_ns(&s).map_err(|e| CliError::usage(format!("--delays: {e}")))?;
            steps.push(LoadStep::Delay { ns_per_chunk: ns });
        }
    } else {
        return Ok(Ladder::Auto);
    }
    let mut steps = numalab::experiments::loaded_latency::idle_to_saturation(&steps);
    steps.dedup();
    Ok(Ladder::Steps(steps))
}

/// The injector CPUs: the option's set, or every other allowed CPU (SMT
/// siblings of the chasing CPU left out when other CPUs remain).
fn injector_cpus(m: &Machine, chase: u32, text: Option<&str>) -> Result<Vec<u32>, CliError> {
    let usable = usable_cpus(m);
    let Some(t) = text else {
        let injectors = default_injectors(m, chase);
        if injectors.is_empty() {
            return Err(CliError::usage(format!(
                "loaded-latency needs a CPU to chase and at least one more for injectors, but this process may use only CPU {usable}; run it where 2 or more CPUs are allowed (cgroup cpuset, taskset)"
            )));
        }
        return Ok(injectors);
    };
    let set = ResourceSet::parse(m, t, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("--injector-cpus: {e}")))?;
    if set.cpus.is_empty() {
        return Err(CliError::usage(format!(
            "--injector-cpus '{t}' holds no CPU{}; allowed CPUs: {}",
            cpuless_hint(m, &set),
            m.allowed_cpus
        )));
    }
    if set.cpus.contains(chase) {
        let rest = set.cpus.difference(&IdSet::single(chase));
        let hint = if rest.is_empty() {
            format!("name other CPUs (allowed: {})", m.allowed_cpus)
        } else {
            format!("use --injector-cpus '{rest}' (or '{t} ~ cpu:{chase}')")
        };
        return Err(CliError::usage(format!(
            "--injector-cpus '{t}' includes the chasing CPU {chase}, which needs its CPU to itself; {hint}"
        )));
    }
    let outside = set.cpus.difference(&usable);
    if !outside.is_empty() {
        return Err(CliError::usage(format!(
            "--injector-cpus '{t}': CPU {outside} not allowed for this process (allowed: {usable})"
        )));
    }
    Ok(set.cpus.iter().collect())
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let cpu = match a.buffer.cpu.as_deref() {
        Some(c) => one_cpu(&m, "--cpu", c)?,
        None => usable_cpus(&m)
            .first()
            .ok_or_else(|| CliError::failed("no CPU is allowed for this process"))?,
    };
    let policy = MemoryPolicy::parse(&m, &a.buffer.mem)
        .map_err(|e| CliError::usage(format!("--mem: {e}")))?;
    let injector_policy = a
        .injector_mem
        .as_deref()
        .map(|t| MemoryPolicy::parse(&m, t))
        .transpose()
        .map_err(|e| CliError::usage(format!("--injector-mem: {e}")))?;
    let ladder = ladder(a.rates.as_deref(), a.delays.as_deref())?;
    let pattern = a.pattern;
    if matches!(pattern, ChasePattern::Stride { .. }) {
        return Err(CliError::usage(
            "--pattern stride is prefetched, not a latency; valid: random, page, page:N",
        ));
    }
    let injectors = injector_cpus(&m, cpu, a.injector_cpus.as_deref())?;
    let size = a.buffer.size.unwrap_or_else(|| default_buffer_bytes(&m));
    let injector_size = match (a.injector_size, a.buffer.size) {
        (Some(t), _) => t,
        (None, Some(_)) => size,
        (None, None) => (default_buffer_bytes(&m) / injectors.len())
            .max(64 << 20)
            .next_multiple_of(2 << 20),
    };
    let mut req = LoadedLatencyRequest {
        cpu,
        policy,
        pattern,
        buffer_bytes: size,
        thp: Some(if a.huge { Thp::On } else { a.thp }),
        injector_cpus: injectors,
        injector_policy,
        injector_buffer_bytes: injector_size,
        injector_thp: Some(a.injector_thp),
        mixes: a.mix.0.clone(),
        ladder,
        rule: a.stats.rule(DEFAULT_STEP_BUDGET, 1)?,
        settle: Duration::from_millis(20),
    };
    let count = measurements(&req);
    req.rule = a.stats.rule(DEFAULT_STEP_BUDGET, count)?;
    // A short budget per step: the first sample after a change of load is
    // the warm-up, not a separate wait.
    req.rule.warmup = req.rule.warmup.max(1);
    let progress = Progress::bar(count as u64, "loaded-latency");
    let r = run_loaded_latency(&m, &req, &mut |w| progress.step(w))?;
    progress.finish();
    if a.out.json {
        print_result("loaded-latency", &r)?;
    } else {
        out!("{}", text(&r, &m, a.out.units))?;
        print_warnings(&r.warnings)?;
    }
    Ok(exit_for(r.verification.verified))
}
