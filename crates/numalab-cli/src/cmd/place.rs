//! `numalab place`: allocate a buffer with a memory policy, touch it from a
//! pinned thread, and show where every page landed.

use crate::output::{load_machine, print_json, CliError, CliResult};
use numalab::placement::{
    format_bytes, parse_size, write_from_workers, BufferCheck, BufferSpec, ListMeaning,
    MemoryPolicy, PageHistogram, PlacedBuffer, Realization, ResourceSet, Thp, WeightedImpl,
    WorkerCheck,
};
use numalab::{IdSet, Machine};
use serde::Serialize;
use std::process::ExitCode;

/// Version of the JSON `numalab place --json` prints.
pub const PLACE_SCHEMA_VERSION: &str = "1.0";

#[derive(clap::Args)]
pub struct Args {
    /// Buffer size, e.g. 64M, 1G (binary units).
    #[arg(long, value_name = "SIZE")]
    size: String,
    /// Memory policy: first-touch, local, bind:NODES, preferred:NODE,
    /// interleave:NODES[@PAGES], weighted:N=W,...[@PAGES], remote[:near|:far].
    #[arg(long = "mem", value_name = "POLICY", default_value = "first-touch")]
    mem: String,
    /// CPU of the thread that first touches every page (default: wherever numalab runs).
    #[arg(long, value_name = "CPU")]
    cpu: Option<String>,
    /// Transparent huge pages for this buffer: on, off or system
    /// (default: off for interleave/weighted, system otherwise).
    #[arg(long, value_name = "on|off|system")]
    thp: Option<String>,
    /// Back the buffer with hugetlbfs 2 MiB pages (reserved in /proc/sys/vm/nr_hugepages).
    #[arg(long)]
    hugetlb: bool,
    /// Weighted interleave by the kernel (Linux >= 6.9), by exact chunk-wise emulation, or auto.
    #[arg(long, value_name = "auto|kernel|emulate", default_value = "auto")]
    weighted_impl: String,
    /// After the prefault, threads pinned to these CPUs each write their slice of the
    /// buffer, as a parallel program's workers would (shows what first touch did).
    #[arg(long, value_name = "CPUS")]
    workers: Option<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct PlaceResult<'a> {
    schema_version: &'static str,
    size_bytes: u64,
    policy: String,
    realization: &'a Realization,
    thp: Thp,
    hugetlb: bool,
    toucher_cpu: Option<u32>,
    toucher_node: Option<u32>,
    page_size: usize,
    pages_total: u64,
    pages_by_node: &'a std::collections::BTreeMap<u32, u64>,
    untouched_pages: u64,
    run_lengths: &'a numalab::placement::RunLengths,
    expected_nodes: Option<IdSet>,
    workers: Vec<WorkerCheck>,
    verified: bool,
    problems: Vec<String>,
    notes: &'a [String],
}

/// Parses a single CPU written by the user, with the set grammar's checks.
pub fn parse_one_cpu(m: &Machine, text: &str) -> Result<u32, CliError> {
    let s = ResourceSet::parse(m, text, ListMeaning::Cpus).map_err(CliError::usage)?;
    match (s.cpus.len(), s.cpus.first()) {
        (1, Some(c)) => Ok(c),
        (0, _) => Err(CliError::usage(format!(
            "'{text}' holds no CPU{}; CPUs: {}",
            cpuless_hint(m, &s),
            m.allowed_cpus
        ))),
        _ => Err(CliError::usage(format!(
            "'{text}' is {} CPUs ({}); give one CPU",
            s.cpus.len(),
            s.cpus
        ))),
    }
}

/// " (node 4 is CPU-less: memory only)" when the set named CPU-less nodes.
pub fn cpuless_hint(m: &Machine, s: &ResourceSet) -> String {
    let cpuless: IdSet = s
        .nodes
        .iter()
        .filter(|n| m.node(*n).is_some_and(|x| x.cpuless))
        .collect();
    if cpuless.is_empty() {
        String::new()
    } else {
        format!(
            " (node {cpuless} {} CPU-less: memory only)",
            if cpuless.len() > 1 { "are" } else { "is" }
        )
    }
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let size = parse_size(&a.size).map_err(CliError::usage)?;
    let policy = MemoryPolicy::parse(&m, &a.mem).map_err(CliError::usage)?;
    let cpu = a.cpu.as_deref().map(|c| parse_one_cpu(&m, c)).transpose()?;
    let thp = a
        .thp
        .as_deref()
        .map(Thp::parse)
        .transpose()
        .map_err(CliError::usage)?;
    let weighted = WeightedImpl::parse(&a.weighted_impl).map_err(CliError::usage)?;
    let workers: Vec<u32> = match a.workers.as_deref() {
        None => Vec::new(),
        Some(t) => {
            let s = ResourceSet::parse(&m, t, ListMeaning::Cpus).map_err(CliError::usage)?;
            if s.cpus.is_empty() {
                return Err(CliError::usage(format!(
                    "--workers '{t}' holds no CPU{}",
                    cpuless_hint(&m, &s)
                )));
            }
            s.cpus.iter().collect()
        }
    };
    let spec = BufferSpec {
        size: usize::try_from(size).map_err(|_| CliError::usage("size too large"))?,
        policy: policy.clone(),
        thp,
        hugetlb: a.hugetlb,
        toucher: cpu,
        weighted,
    };
    let mut buf = PlacedBuffer::new(&m, &spec)?;
    // A worker that cannot be pinned is a failure to carry out the request (1).
    let worker_checks =
        write_from_workers(&mut buf, &workers).map_err(|e| CliError::failed(e.to_string()))?;
    let hist = buf.histogram()?;

    let toucher_cpu = cpu.or(buf.toucher_cpu());
    let toucher_node = toucher_cpu.and_then(|c| m.node_of_cpu(c));
    let expected = policy.nodes_expected(&m, toucher_node);
    let problems = BufferCheck {
        policy: &policy,
        expected_nodes: expected.as_ref(),
        requested_cpu: cpu,
        seen_cpu: buf.toucher_cpu(),
        workers: &worker_checks,
    }
    .problems(&hist);
    let result = PlaceResult {
        schema_version: PLACE_SCHEMA_VERSION,
        size_bytes: buf.len() as u64,
        policy: policy.to_string(),
        realization: buf.realization(),
        thp: buf.thp(),
        hugetlb: a.hugetlb,
        toucher_cpu,
        toucher_node,
        page_size: hist.page_size,
        pages_total: hist.pages_total,
        pages_by_node: &hist.pages_by_node,
        untouched_pages: hist.untouched_pages,
        run_lengths: &hist.run_lengths,
        expected_nodes: expected.clone(),
        verified: problems.is_empty(),
        problems,
        workers: worker_checks,
        notes: buf.notes(),
    };
    if a.json {
        print_json(&result)?;
    } else {
        print_text(&result, &hist);
    }
    Ok(if result.verified {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}

fn print_text(r: &PlaceResult, hist: &PageHistogram) {
    let mech = match r.realization {
        Realization::Kernel { mode, .. } => format!("kernel {}", mode.kernel_name()),
        Realization::KernelWeighted { .. } => "kernel weighted interleave".into(),
        Realization::Chunks { pattern } => {
            let p: Vec<String> = pattern.iter().map(|(n, k)| format!("{k}p@{n}")).collect();
            format!("chunk-wise bind, repeating {}", p.join(" "))
        }
    };
    println!(
        "placed {} with {} ({mech}), THP {}{}, page size {}",
        format_bytes(r.size_bytes),
        r.policy,
        r.thp.describe(),
        if r.hugetlb { ", hugetlbfs" } else { "" },
        format_bytes(r.page_size as u64)
    );
    if let Some(c) = r.toucher_cpu {
        println!(
            "touched by CPU {c}{}",
            r.toucher_node
                .map(|n| format!(" (node {n})"))
                .unwrap_or_default()
        );
    }
    println!(
        "pages: {} total, {} untouched",
        r.pages_total, r.untouched_pages
    );
    println!("  node       pages   share");
    let touched: u64 = hist.pages_by_node.values().sum();
    for (n, c) in &hist.pages_by_node {
        let share = 100.0 * *c as f64 / touched.max(1) as f64;
        println!("  {n:>4} {c:>11} {share:>6.1}%  {}", bar(share));
    }
    let rl = &hist.run_lengths;
    println!(
        "run lengths (pages on one node in a row): {} runs, min {}, max {}, mean {:.1}, most common {}",
        rl.runs, rl.min, rl.max, rl.mean, rl.mode
    );
    for w in &r.workers {
        println!(
            "worker pinned to CPU {} ran on CPU {}",
            w.requested_cpu,
            w.seen_cpu.map(|c| c.to_string()).unwrap_or("?".into())
        );
    }
    for n in r.notes {
        println!("note: {n}");
    }
    if r.verified {
        match &r.expected_nodes {
            Some(e) => println!(
                "verified: pages are where {} puts them (nodes {{{e}}})",
                r.policy
            ),
            None => println!("verified: every page is touched"),
        }
    } else {
        for p in &r.problems {
            println!("NOT VERIFIED: {p}");
        }
    }
}

fn bar(pct: f64) -> String {
    "#".repeat((pct / 2.5).round() as usize)
}
