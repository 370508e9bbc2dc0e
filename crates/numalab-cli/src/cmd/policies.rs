//! `numalab policies`: memory policies compared for canonical workloads
//! (single thread unpinned and pinned, independent programs, a threaded
//! program initialized by its main thread, a NUMA-aware one), the classic
//! table with every cell verified, and the advice that follows.

use crate::cmd::bench::{exit_for, size_option, thread_cpus, RESULT_SCHEMA_VERSION};
use crate::cmd::options::{StatOptions, Units};
use crate::output::{load_machine, print_json, CliError, CliResult, Progress};
use numalab::experiments::policies::{
    column_title, default_array_bytes, parse_list, run_policies, Cell, PoliciesRequest,
    PoliciesResult, PolicyColumn, Workload,
};
use numalab::measure::environment::Environment;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::placement::{format_bytes, ListMeaning, ResourceSet, Thp};
use numalab::{IdSet, Machine};
use serde::Serialize;
use std::fmt::Write;

#[derive(clap::Args)]
pub struct Args {
    /// Bandwidth kernel every workload streams (see numalab bench bandwidth --help).
    #[arg(long, value_name = "KERNEL", default_value = "triad")]
    kernel: String,
    /// Threads of the multi-threaded workloads and independent programs (default: every CPU of --cpus).
    #[arg(long, value_name = "N")]
    threads: Option<String>,
    /// CPUs the workloads may use (set grammar; default all allowed); the unpinned thread may run on any of them.
    #[arg(long, value_name = "SET", default_value = "all")]
    cpus: String,
    /// How threads are laid out: scatter (one per node in turn) or compact (fill a node first).
    #[arg(long, value_name = "compact|scatter", default_value = "scatter")]
    threads_policy: String,
    /// Node of the one-node column (default: the node of the first thread's CPU).
    #[arg(long, value_name = "NODE")]
    node: Option<String>,
    /// Bytes of each array of each worker (default: a worker's arrays together twice the last-level cache, at least 16M each).
    #[arg(long, value_name = "SIZE")]
    size: Option<String>,
    /// Transparent huge pages for all data: off (default: page-exact placement, one page size in every column), on, system.
    #[arg(long, value_name = "off|on|system", default_value = "off")]
    thp: String,
    /// Workloads (rows), comma-separated: single-unpinned, single-pinned, independent, serial-init, numa-aware, or all.
    #[arg(long, value_name = "LIST", default_value = "all")]
    workloads: String,
    /// Policies (columns), comma-separated: local, interleave, one-node, or all.
    #[arg(long, value_name = "LIST", default_value = "all")]
    policies: String,
    /// Instruction set: auto, avx512, avx2, sse2, neon, portable.
    #[arg(long, value_name = "ISA", default_value = "auto")]
    isa: String,
    /// gb (1e9 B/s) or gib (2^30 B/s).
    #[arg(long, value_name = "UNITS", default_value = "gb")]
    units: String,
    /// Measurement options; --budget is per cell (default: about 15 s over all cells, 0.25 to 1.5 s each).
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
    result: &'a PoliciesResult,
    environment: Environment,
}

/// The one-node column's node: one allowed node with memory.
fn node_option(m: &Machine, text: Option<&str>, first_cpu: u32) -> Result<u32, CliError> {
    let mem = m.memory_nodes();
    let Some(t) = text else {
        return m
            .node_of_cpu(first_cpu)
            .filter(|n| mem.contains(*n))
            .or_else(|| mem.first())
            .ok_or_else(|| CliError::failed("no allowed node has memory"));
    };
    let s = ResourceSet::parse(m, t, ListMeaning::Nodes)
        .map_err(|e| CliError::usage(format!("--node: {e}")))?;
    match (s.nodes.len(), s.nodes.first()) {
        (1, Some(n)) if mem.contains(n) => Ok(n),
        (1, Some(n)) => Err(CliError::usage(format!(
            "--node {n} has no memory this process may use; nodes with memory: {mem}"
        ))),
        (0, _) => Err(CliError::usage(format!(
            "--node '{t}' names no node; nodes with memory: {mem}"
        ))),
        _ => Err(CliError::usage(format!(
            "--node '{t}' is {} nodes ({}); give one node of {mem}",
            s.nodes.len(),
            s.nodes
        ))),
    }
}

pub fn run(a: Args) -> CliResult {
    let m = load_machine(None)?;
    let kernel =
        BandwidthKernel::parse(&a.kernel).map_err(|e| CliError::usage(format!("--kernel: {e}")))?;
    let isa = match a.isa.as_str() {
        "auto" => Isa::detect_best(),
        t => Isa::parse(t).map_err(CliError::usage)?,
    };
    isa.check_available().map_err(CliError::usage)?;
    let units = Units::parse(&a.units)?;
    let thp = Thp::parse(&a.thp).map_err(|e| CliError::usage(format!("--thp: {e}")))?;
    if !matches!(
        a.threads_policy.trim(),
        "compact" | "scatter" | "fill" | "round-robin"
    ) {
        return Err(CliError::usage(format!(
            "--threads-policy '{}'; valid: scatter (one thread per node in turn), compact (fill a node first)",
            a.threads_policy
        )));
    }
    let set = ResourceSet::parse(&m, &a.cpus, ListMeaning::Cpus)
        .map_err(|e| CliError::usage(format!("--cpus: {e}")))?;
    if let Some(v) = a
        .threads
        .as_deref()
        .and_then(|t| t.trim().parse::<usize>().ok())
    {
        if v > set.cpus.len() {
            return Err(CliError::usage(format!(
                "--threads {v} but --cpus holds {} CPU{} ({}): one thread per CPU",
                set.cpus.len(),
                if set.cpus.len() == 1 { "" } else { "s" },
                set.cpus
            )));
        }
    }
    let n = a
        .threads
        .clone()
        .unwrap_or_else(|| set.cpus.len().max(1).to_string());
    let cpus = thread_cpus(&m, &a.cpus, &n, &a.threads_policy, false)?;
    let node = node_option(&m, a.node.as_deref(), cpus[0])?;
    let workloads = parse_list(&a.workloads, &Workload::ALL, Workload::parse)
        .map_err(|e| CliError::usage(format!("--workloads: {e}")))?;
    let policies = parse_list(&a.policies, &PolicyColumn::ALL, PolicyColumn::parse)
        .map_err(|e| CliError::usage(format!("--policies: {e}")))?;
    let buffer_bytes = match a.size.as_deref() {
        None => default_array_bytes(&m, kernel),
        t => size_option(&m, t)?,
    };
    let cells = workloads.len() * policies.len();
    let mut rule = a.stats.rule(1.0)?;
    if a.stats.budget.is_none() {
        rule.budget = std::time::Duration::from_secs_f64((15.0 / cells as f64).clamp(0.25, 1.5));
    }
    let req = PoliciesRequest {
        kernel,
        isa,
        cpus,
        thread_policy: a.threads_policy.trim().to_string(),
        unpinned_cpus: set.cpus.clone(),
        node,
        buffer_bytes,
        thp,
        rule,
        workloads,
        policies,
    };
    let progress = Progress::bar(cells as u64, "policies");
    let r = run_policies(&m, &req, &mut |w| progress.step(w))?;
    progress.finish();
    if a.json {
        print_json(&Envelope {
            schema_version: RESULT_SCHEMA_VERSION,
            command: "policies",
            result: &r,
            environment: Environment::capture(),
        })?;
    } else {
        print!("{}", text(&m, &r, units));
        crate::output::print_warnings(&r.warnings);
    }
    Ok(exit_for(r.verified))
}

/// "n0 25% n1 75% (local 50%)": each node's share of the pages, and the
/// share on the node of the worker that streams them.
fn shares(c: &Cell) -> String {
    let total: u64 = c.pages_by_node.values().sum();
    if total == 0 {
        return "-".into();
    }
    let nodes = c
        .pages_by_node
        .iter()
        .map(|(n, p)| format!("n{n} {:.0}%", 100.0 * *p as f64 / total as f64))
        .collect::<Vec<_>>()
        .join(" ");
    match c.local_percent {
        Some(l) => format!("{nodes} (local {l:.0}%)"),
        None => nodes,
    }
}

fn cpu_list(cpus: impl IntoIterator<Item = u32>) -> String {
    cpus.into_iter().collect::<IdSet>().to_string()
}

/// Rows of cells as an aligned table.
fn grid(s: &mut String, head: &[String], rows: &[Vec<String>]) {
    let cols = head.len();
    let width: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in std::iter::once(head).chain(rows.iter().map(|r| r.as_slice())) {
        let line: Vec<String> = r
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(s, "  {}", line.join("   ").trim_end());
    }
}

/// The readable view.
pub fn text(m: &Machine, r: &PoliciesResult, u: Units) -> String {
    let mut s = String::new();
    let main_node = m
        .node_of_cpu(r.main_cpu)
        .map_or("?".into(), |n| n.to_string());
    let _ = writeln!(
        s,
        "policies: {} over {} x {} per worker (THP {}, ISA {}); {} thread{} laid out {} on CPUs {}; main thread on CPU {} (node {main_node}); the unpinned thread may run on CPUs {}",
        r.kernel.name(),
        r.arrays,
        format_bytes(r.buffer_bytes),
        r.thp.describe(),
        r.isa.name(),
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        r.thread_policy,
        r.cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(","),
        r.main_cpu,
        r.unpinned_cpus
    );
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    let mut head = vec!["workload".to_string()];
    head.extend(
        r.policies
            .iter()
            .map(|p| column_title(p.name, &r.interleave_nodes, r.node)),
    );
    let row_of = |w: Workload, f: &dyn Fn(&Cell) -> String| -> Vec<String> {
        let mut row = vec![w.title(r.threads)];
        for p in &r.policies {
            row.push(r.cell(w, p.name).map_or("-".into(), f));
        }
        row
    };
    let _ = writeln!(
        s,
        "\naggregate bandwidth, {} (median ±half its 95% confidence interval; ! = placement not verified)",
        u.label()
    );
    let rows: Vec<Vec<String>> = r
        .workloads
        .iter()
        .map(|w| {
            row_of(w.name, &|c| match &c.gbps {
                Some(g) => format!(
                    "{:.2} ±{:.1}%{}",
                    u.convert(g.median),
                    g.rel_ci * 100.0,
                    if c.verified { "" } else { " !" }
                ),
                None => "not run !".into(),
            })
        })
        .collect();
    grid(&mut s, &head, &rows);
    let _ = writeln!(
        s,
        "\nwhere the pages are: share of the data per node (and on the node of the worker that streams it)"
    );
    let rows: Vec<Vec<String>> = r
        .workloads
        .iter()
        .map(|w| row_of(w.name, &|c| shares(c)))
        .collect();
    grid(&mut s, &head, &rows);
    let _ = writeln!(
        s,
        "\nworkers (CPUs they ran on, CPUs that first touched the data)"
    );
    for w in &r.workloads {
        let cells: Vec<&Cell> = r
            .cells
            .iter()
            .filter(|c| c.workload == w.name && c.run.is_some())
            .collect();
        let toucher_set: IdSet = cells
            .iter()
            .flat_map(|c| c.toucher_cpus.iter().copied())
            .collect();
        let touchers = format!(
            "CPU{} {toucher_set}",
            if toucher_set.len() == 1 { "" } else { "s" }
        );
        let ran = if w.name == Workload::SingleUnpinned {
            let per: Vec<String> = cells
                .iter()
                .map(|c| {
                    format!(
                        "{} ({})",
                        cpu_list(c.seen_cpus.iter().flatten().copied()),
                        c.policy.name()
                    )
                })
                .collect();
            let moved: u64 = cells.iter().filter_map(|c| c.migrations).sum();
            format!(
                "unpinned over CPUs {}: seen on CPUs {}; moved {moved} time{} in all",
                r.unpinned_cpus,
                per.join(", "),
                if moved == 1 { "" } else { "s" }
            )
        } else {
            let cpus = if w.threads == 1 {
                vec![r.main_cpu]
            } else {
                r.cpus.clone()
            };
            let all_there = cells.iter().all(|c| {
                c.seen_cpus
                    .iter()
                    .zip(&c.requested_cpus)
                    .all(|(seen, want)| seen.iter().all(|s| Some(*s) == *want))
            });
            format!(
                "pinned to CPU{} {}{}",
                if cpus.len() == 1 { "" } else { "s" },
                cpus.iter()
                    .map(|c| c.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
                if all_there {
                    " (seen there)"
                } else {
                    " (NOT always seen there)"
                }
            )
        };
        let who = match w.name {
            Workload::SerialInit => {
                format!("all data first touched by the main thread on {touchers}")
            }
            Workload::SingleUnpinned => format!("data first touched on {touchers}"),
            _ if w.threads == 1 => format!("data first touched on {touchers}"),
            _ => format!("each worker first touched its own data ({touchers})"),
        };
        let _ = writeln!(s, "  {}: {ran}; {who}", w.title);
    }
    let bad: Vec<&Cell> = r.cells.iter().filter(|c| !c.verified).collect();
    if !bad.is_empty() {
        let _ = writeln!(s, "\nNOT VERIFIED");
        for c in bad {
            let more = c.problems.len().saturating_sub(3);
            let _ = writeln!(
                s,
                "  {} / {} (expected {}): {}{}",
                c.workload.name(),
                c.policy.name(),
                c.expected,
                c.problems
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; "),
                if more > 0 {
                    format!("; and {more} more (--json lists them)")
                } else {
                    String::new()
                }
            );
        }
    } else {
        let _ = writeln!(
            s,
            "\nplacement verified in every cell: pages where each policy puts them, data touched by the intended threads, pinned workers on their CPUs"
        );
    }
    if !r.recommendations.is_empty() {
        let _ = writeln!(s, "\nrecommendation for this machine");
        for rec in &r.recommendations {
            let _ = writeln!(s, "  - {}", rec.text);
        }
    }
    s
}
