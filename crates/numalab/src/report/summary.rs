//! The summary at the top of a report: what the machine is, the key
//! numbers in plain sentences, the placement advice that follows from them,
//! and every warning that can make the numbers (or the machine) wrong.
//!
//! Computed from whatever parts are done, so a partial report still has a
//! summary, and says which questions it cannot answer yet.

use crate::experiments::c2c::C2cResult;
use crate::experiments::loaded_latency::{LoadedLatencyResult, MixCurve};
use crate::experiments::matrix::{Cell, MatrixResult};
use crate::experiments::policies::{PoliciesResult, PolicyColumn, Workload};
use crate::experiments::scaling::ScalingResult;
use crate::experiments::sizes::SizesResult;
use crate::experiments::sweep::{Access, SweepResult};
use crate::machine::{Machine, Source};
use crate::measure::harness::Figure;
use crate::measure::stats::median;
use crate::placement::format_bytes;
use crate::report::results::{PartName, PartStatus, ReportResults, SweepOutcome};
use serde::{Deserialize, Serialize};

/// One sentence of the summary and the question it answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SummaryLine {
    /// `machine`, `latency`, `bandwidth`, `sizes`, `scaling`, `writers`,
    /// `crossfire`, `loaded-latency`, `c2c`, `policies`, `independent-data`,
    /// `shared-data`.
    pub topic: String,
    pub text: String,
}

/// The key numbers, for scripts and `numalab compare` (`None`: not measured
/// or not meaningful on this machine).
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct KeyFigures {
    /// Median local latency over the CPU nodes, ns per dependent load.
    pub local_latency_ns: Option<f64>,
    /// Highest latency from a CPU node to a memory node, ns.
    pub max_latency_ns: Option<f64>,
    /// Smallest and largest remote/local latency ratio.
    pub numa_ratio_min: Option<f64>,
    pub numa_ratio_max: Option<f64>,
    /// One thread reading local memory, GB/s (median over CPU nodes).
    pub local_read_gbps: Option<f64>,
    /// One thread reading remote memory: lowest and highest, GB/s.
    pub remote_read_gbps_min: Option<f64>,
    pub remote_read_gbps_max: Option<f64>,
    /// One thread alone (scaling part), GB/s.
    pub single_thread_gbps: Option<f64>,
    /// Threads compared packed vs spread, and their per-thread GB/s.
    pub compared_threads: Option<usize>,
    pub packed_per_thread_gbps: Option<f64>,
    pub spread_per_thread_gbps: Option<f64>,
    /// Two local writers on one node together over one writer alone (memory bytes).
    pub two_writers_gain: Option<f64>,
    /// Crossfire time over no-crossfire time (finding b).
    pub crossfire_ratio: Option<f64>,
    /// Loaded latency, local node, read mix: idle and at the highest load, ns; the highest load, GB/s.
    pub loaded_idle_ns: Option<f64>,
    pub loaded_max_ns: Option<f64>,
    pub loaded_max_gbps: Option<f64>,
    /// Modified cache line, one way: within a node and across nodes, ns.
    pub c2c_within_node_ns: Option<f64>,
    pub c2c_across_nodes_ns: Option<f64>,
}

/// The summary of a report.
#[derive(Debug, Clone, Serialize, Deserialize, Default, PartialEq)]
pub struct Summary {
    /// NUMA nodes of the machine, CPU-less ones included.
    pub node_count: usize,
    /// The first sentence: what the machine is (it names the node count).
    pub headline: String,
    /// The key facts, in plain sentences.
    pub findings: Vec<SummaryLine>,
    /// The placement advice that follows from them.
    pub advice: Vec<SummaryLine>,
    /// Settings and results that can make the numbers wrong or the machine
    /// slower than it should be (NUMA balancing, THP, cgroup limits,
    /// firmware distances, placements that did not verify).
    pub warnings: Vec<String>,
    /// Parts not in the report and why.
    pub missing: Vec<String>,
    pub key_figures: KeyFigures,
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Smallest and largest median of some cells.
fn min_max<'a>(cells: impl Iterator<Item = &'a Cell<Figure>>) -> (f64, f64) {
    cells.fold((f64::INFINITY, 0.0), |(lo, hi), c| {
        (lo.min(c.value.median), hi.max(c.value.median))
    })
}

fn range_text(lo: f64, hi: f64, decimals: usize) -> String {
    if (hi - lo).abs() < 0.5 * 10f64.powi(-(decimals as i32)) {
        format!("{lo:.decimals$}")
    } else {
        format!("{lo:.decimals$}–{hi:.decimals$}")
    }
}

/// The headline: what the machine is, with its node count.
pub fn headline(m: &Machine, hostname: Option<&str>) -> String {
    let nodes = m.nodes.len();
    let cpuless = m.nodes.iter().filter(|n| n.cpuless).count();
    let with_cpus = nodes - cpuless;
    let mem: u64 = m.nodes.iter().map(|n| n.memory_bytes).sum();
    let what = match (&m.source, hostname) {
        (Source::File { path }, _) => format!("The machine of {}", path.display()),
        (Source::Live, Some(h)) if !h.is_empty() => format!("This machine ({h})"),
        (Source::Live, _) => "This machine".to_string(),
    };
    let node_text = if cpuless > 0 {
        format!(
            "{} ({with_cpus} with CPUs, {cpuless} CPU-less)",
            plural(nodes, "NUMA node", "NUMA nodes")
        )
    } else {
        plural(nodes, "NUMA node", "NUMA nodes")
    };
    let llc = m
        .last_level_cache_bytes()
        .map(|b| format!(", {} last-level cache", format_bytes(b)))
        .unwrap_or_default();
    format!(
        "{what} has {node_text}, {}, {}, {}{}, {} of memory{llc}.",
        plural(m.packages.len(), "package", "packages"),
        plural(m.cores.len(), "core", "cores"),
        plural(m.complete_cpus.len(), "CPU", "CPUs"),
        if m.smt > 1 {
            format!(" (SMT {})", m.smt)
        } else {
            String::new()
        },
        format_bytes(mem),
    )
}

fn line(topic: &str, text: String) -> SummaryLine {
    SummaryLine {
        topic: topic.into(),
        text,
    }
}

fn is_cpuless(m: &Machine, node: u32) -> bool {
    m.node(node).is_some_and(|n| n.cpuless)
}

fn local_values(t: &[Vec<Cell<Figure>>]) -> Vec<f64> {
    t.iter()
        .flatten()
        .filter(|c| c.cpu_node == c.mem_node)
        .map(|c| c.value.median)
        .collect()
}

fn remote_cells(t: &[Vec<Cell<Figure>>]) -> Vec<&Cell<Figure>> {
    t.iter()
        .flatten()
        .filter(|c| c.cpu_node != c.mem_node && c.value.median.is_finite())
        .collect()
}

impl Summary {
    /// The summary of whatever `doc` holds so far.
    pub fn of(doc: &ReportResults) -> Summary {
        let m = &doc.machine;
        let mut s = Summary {
            node_count: m.nodes.len(),
            headline: headline(m, doc.environment.as_ref().map(|e| e.hostname.as_str())),
            ..Summary::default()
        };
        let p = &doc.parts;
        if let Some(r) = p.latency_matrix.done() {
            latency(&mut s, m, r, doc.buffer_bytes);
        }
        if let Some(r) = p.bandwidth_matrix.done() {
            bandwidth(&mut s, m, r);
        }
        if let Some(r) = p.sizes.done() {
            sizes(&mut s, r);
        }
        if let Some(r) = p.scaling.done() {
            scaling(&mut s, m, r);
        }
        if let Some(r) = p.sweep.done() {
            writers(&mut s, m, &r.sweep);
            crossfire(&mut s, r);
        }
        if let Some(r) = p.sweep_background.done() {
            background(&mut s, r);
        }
        if let Some(r) = p.loaded_latency_local.done() {
            loaded(&mut s, r, "local", true);
        }
        if let Some(r) = p.loaded_latency_far.done() {
            loaded(&mut s, r, "farthest", false);
        }
        if let Some(r) = p.c2c.done() {
            c2c(&mut s, r);
        }
        if let Some(r) = p.policies.done() {
            policies(&mut s, r);
        }
        advice(&mut s, m, doc);
        warnings(&mut s, doc);
        // Parts missing for the same reason are one line.
        let mut groups: Vec<(String, String, Vec<&str>)> = Vec::new();
        for (n, meta) in doc.missing() {
            let reason = meta.reason.unwrap_or_else(|| "not measured yet".into());
            let status = meta.status.name().to_string();
            match groups
                .iter_mut()
                .find(|(st, r, _)| *st == status && *r == reason)
            {
                Some(g) => g.2.push(n.name()),
                None => groups.push((status, reason, vec![n.name()])),
            }
        }
        for (status, reason, titles) in groups {
            s.missing
                .push(format!("{} ({status}): {reason}", titles.join(", ")));
        }
        s
    }
}

fn latency(s: &mut Summary, m: &Machine, r: &MatrixResult, bytes: u64) {
    let Some(t) = &r.latency else { return };
    let Some(local) = median(local_values(t)) else {
        return;
    };
    s.key_figures.local_latency_ns = Some(local);
    s.key_figures.max_latency_ns = t
        .iter()
        .flatten()
        .map(|c| c.value.median)
        .filter(|v| v.is_finite())
        .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v))));
    let remote = remote_cells(t);
    if remote.is_empty() {
        s.findings.push(line(
            "latency",
            format!(
                "Memory answers a dependent load in {local:.0} ns (random pointer chase over {}, TLB misses included); with one memory node there is no remote memory to compare.",
                format_bytes(bytes)
            ),
        ));
        return;
    }
    let ratios: Vec<f64> = remote.iter().filter_map(|c| c.numa_ratio).collect();
    let (lo, hi) = min_max(remote.iter().copied());
    let (rmin, rmax) = (
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
    );
    if !ratios.is_empty() {
        s.key_figures.numa_ratio_min = Some(rmin);
        s.key_figures.numa_ratio_max = Some(rmax);
    }
    let worst = remote
        .iter()
        .max_by(|a, b| a.value.median.total_cmp(&b.value.median))
        .map(|c| {
            format!(
                "node {} to node {}{}",
                c.cpu_node,
                c.mem_node,
                if is_cpuless(m, c.mem_node) {
                    " (CPU-less)"
                } else {
                    ""
                }
            )
        })
        .unwrap_or_default();
    s.findings.push(line(
        "latency",
        format!(
            "Local memory answers a dependent load in {local:.0} ns, remote memory in {} ns: NUMA ratios {}x, the slowest from {worst}.",
            range_text(lo, hi, 0),
            range_text(rmin, rmax, 2)
        ),
    ));
}

fn bandwidth(s: &mut Summary, m: &Machine, r: &MatrixResult) {
    let Some(t) = &r.bandwidth else { return };
    let Some(local) = median(local_values(t)) else {
        return;
    };
    let threads = if r.threads_per_node == "1" {
        "One thread reads".to_string()
    } else {
        "All threads of a node read".to_string()
    };
    s.key_figures.local_read_gbps = Some(local);
    let remote = remote_cells(t);
    if remote.is_empty() {
        s.findings.push(line(
            "bandwidth",
            format!(
                "{threads} {local:.1} GB/s from memory (read kernel, bytes the program reads)."
            ),
        ));
        return;
    }
    let (lo, hi) = min_max(remote.iter().copied());
    s.key_figures.remote_read_gbps_min = Some(lo);
    s.key_figures.remote_read_gbps_max = Some(hi);
    let cpuless: Vec<String> = remote
        .iter()
        .filter(|c| is_cpuless(m, c.mem_node))
        .map(|c| {
            format!(
                "{:.1} GB/s from CPU-less node {}",
                c.value.median, c.mem_node
            )
        })
        .take(2)
        .collect();
    s.findings.push(line(
        "bandwidth",
        format!(
            "{threads} {local:.1} GB/s from local memory and {} GB/s from remote nodes (local is {}x remote){}.",
            range_text(lo, hi, 1),
            range_text(local / hi, local / lo, 2),
            if cpuless.is_empty() {
                String::new()
            } else {
                format!("; {}", cpuless.join(", "))
            }
        ),
    ));
}

fn sizes(s: &mut Summary, r: &SizesResult) {
    let (Some(first), Some(last)) = (r.points.first(), r.points.last()) else {
        return;
    };
    let read =
        |p: &crate::experiments::sizes::SizePoint| p.gbps.first().copied().unwrap_or(f64::NAN);
    s.findings.push(line(
        "sizes",
        format!(
            "Reading {} (fits in {}) runs at {:.0} GB/s with {:.1} ns latency; {} ({}) at {:.1} GB/s with {:.0} ns: the cache boundaries are marked in the size sweep.",
            format_bytes(first.bytes),
            first.fits_in,
            read(first),
            first.latency_ns,
            format_bytes(last.bytes),
            if last.fits_in == "memory" { "memory".to_string() } else { format!("fits in {}", last.fits_in) },
            read(last),
            last.latency_ns
        ),
    ));
}

/// The thread count packed vs spread is compared at: the CPUs of one node
/// (packed then fills exactly one node), at least 2.
fn compared_count(m: &Machine, r: &ScalingResult) -> Option<usize> {
    let per_node = m
        .cpu_nodes()
        .first()
        .map(|n| m.allowed_cpus_of(n).len())
        .unwrap_or(0)
        .max(2);
    let counts: Vec<usize> = r
        .packed
        .iter()
        .map(|p| p.threads)
        .filter(|&n| n >= 2)
        .collect();
    counts
        .iter()
        .copied()
        .filter(|&n| n <= per_node)
        .max()
        .or_else(|| counts.first().copied())
}

fn scaling(s: &mut Summary, m: &Machine, r: &ScalingResult) {
    let Some(one) = r.packed.iter().find(|p| p.threads == 1) else {
        return;
    };
    let single = one.gbps.median;
    s.key_figures.single_thread_gbps = Some(single);
    let Some(n) = compared_count(m, r) else {
        s.findings.push(line(
            "scaling",
            format!("One thread alone reads {single:.1} GB/s; with one CPU there is nothing to scale to."),
        ));
        return;
    };
    let (Some(p), Some(sp)) = (
        r.packed.iter().find(|x| x.threads == n),
        r.spread.iter().find(|x| x.threads == n),
    ) else {
        return;
    };
    s.key_figures.compared_threads = Some(n);
    s.key_figures.packed_per_thread_gbps = Some(p.per_thread_gbps);
    s.key_figures.spread_per_thread_gbps = Some(sp.per_thread_gbps);
    let same = p.cpus == sp.cpus;
    if same {
        s.findings.push(line(
            "scaling",
            format!(
                "With {n} threads on one node each reads {:.1} GB/s, {:.2}x what a lone thread gets ({single:.1} GB/s; {:.1} GB/s together): {}",
                p.per_thread_gbps,
                p.per_thread_gbps / single,
                p.gbps.median,
                if p.per_thread_gbps / single < 0.8 {
                    "threads sharing a node's memory controller compete for its bandwidth."
                } else {
                    "the node's memory keeps up with them."
                }
            ),
        ));
    } else {
        s.findings.push(line(
            "scaling",
            format!(
                "With {n} threads packed on one node each reads {:.1} GB/s ({:.2}x a lone thread's {single:.1}); spread over the nodes each reads {:.1} GB/s ({:.2}x).",
                p.per_thread_gbps,
                p.per_thread_gbps / single,
                sp.per_thread_gbps,
                sp.per_thread_gbps / single
            ),
        ));
    }
}

/// Two writers on one node vs one writer alone, from the idle sweep:
/// memory bytes moved per second together.
fn writers(s: &mut Summary, m: &Machine, r: &SweepResult) {
    let idle = |t: usize| {
        r.runs
            .iter()
            .find(|x| x.threads == t && x.background.is_none())
    };
    let (Some(r1), Some(r2)) = (idle(1), idle(2)) else {
        return;
    };
    let local_write = |c: &crate::experiments::sweep::CaseResult| {
        c.threads
            .iter()
            .all(|t| t.case.access == Access::Write && t.case.mem == t.case.node)
    };
    let mut best: Option<(f64, f64, u32)> = None;
    for c2 in r2
        .cases
        .iter()
        .filter(|c| local_write(c) && c.sharing == "none")
    {
        let node = c2.threads[0].case.node;
        if c2.threads.iter().any(|t| t.case.node != node) {
            continue;
        }
        let together: f64 = c2.threads.iter().map(|t| t.memory_gbps).sum();
        let alone = r1
            .cases
            .iter()
            .filter(|c| local_write(c) && c.threads[0].case.node == node)
            .map(|c| c.threads[0].memory_gbps)
            .fold(0.0, f64::max);
        if alone > 0.0 {
            best = Some((together, alone, node));
            break;
        }
    }
    let Some((together, alone, node)) = best else {
        if m.cpu_nodes().iter().all(|n| m.allowed_cpus_of(n).len() < 2) {
            s.findings.push(line(
                "writers",
                "Whether two writers saturate a node cannot be told here: no node has two CPUs this process may use.".into(),
            ));
        }
        return;
    };
    let gain = together / alone;
    s.key_figures.two_writers_gain = Some(gain);
    s.findings.push(line(
        "writers",
        format!(
            "Two threads writing their own local buffers on node {node} move {together:.1} GB/s of memory traffic together, {gain:.2}x one writer alone ({alone:.1} GB/s): {}",
            match (gain < 1.3, m.cpu_nodes().len() > 1) {
                (true, true) => "two writers saturate the node's memory; on an idle machine a second writer's data may be better one hop away.",
                (true, false) => "two writers saturate the node's memory.",
                _ => "two writers do not saturate the node's memory.",
            }
        ),
    ));
}

fn finding_text(holds: Option<bool>) -> &'static str {
    match holds {
        Some(true) => "holds",
        Some(false) => "does not hold",
        None => "cannot tell",
    }
}

fn crossfire(s: &mut Summary, r: &SweepOutcome) {
    let Some(f) = r
        .findings
        .iter()
        .find(|f| f.condition == "idle")
        .and_then(|set| set.findings.iter().find(|x| x.question == "b"))
    else {
        return;
    };
    if f.holds.is_some() {
        s.key_figures.crossfire_ratio = f.ratio;
    }
    let verdict = match f.holds {
        Some(true) => "crossfire hurts".to_string(),
        Some(false) => "crossfire does not hurt here".to_string(),
        None => "whether crossfire hurts cannot be told here".to_string(),
    };
    s.findings.push(line(
        "crossfire",
        format!(
            "Crossfire (two threads each writing the other's node): {verdict}: {}.",
            f.detail.trim_end_matches('.')
        ),
    ));
}

fn background(s: &mut Summary, r: &SweepOutcome) {
    for set in &r.findings {
        let answered: Vec<String> = set
            .findings
            .iter()
            .filter(|f| f.holds.is_some())
            .map(|f| format!("({}) {}: {}", f.question, f.title, finding_text(f.holds)))
            .collect();
        if answered.is_empty() {
            continue;
        }
        s.findings.push(line(
            "background",
            format!("Under {}: {}.", set.condition, answered.join("; ")),
        ));
    }
}

fn read_curve(r: &LoadedLatencyResult) -> Option<&MixCurve> {
    r.mixes
        .iter()
        .find(|c| c.mix == crate::measure::pacing::TrafficMix::Read)
        .or_else(|| r.mixes.first())
}

/// The memory node(s) holding a loaded-latency chase buffer, from its
/// page histogram ("node 3", "nodes 0,1").
pub fn chase_memory(r: &LoadedLatencyResult) -> String {
    let nodes: crate::IdSet = r
        .chase
        .pages_by_node
        .iter()
        .filter(|(_, &p)| p > 0)
        .map(|(&n, _)| n)
        .collect();
    match nodes.len() {
        0 => "no node (untouched)".into(),
        1 => format!("node {nodes}"),
        _ => format!("nodes {nodes}"),
    }
}

fn loaded(s: &mut Summary, r: &LoadedLatencyResult, which: &str, key: bool) {
    let Some(c) = read_curve(r) else { return };
    let idle = c.idle.latency_ns.median;
    let top = c
        .steps
        .iter()
        .max_by(|a, b| a.injected_gbps.total_cmp(&b.injected_gbps));
    let Some(top) = top else { return };
    if key {
        s.key_figures.loaded_idle_ns = Some(idle);
        s.key_figures.loaded_max_ns = Some(top.latency_ns.median);
        s.key_figures.loaded_max_gbps = Some(top.injected_gbps);
    }
    let node = format!(" ({})", chase_memory(r));
    let knee = match (c.knee_injected_gbps, c.knee_latency_ns) {
        (Some(g), Some(l)) => format!("; the knee is at {g:.1} GB/s ({l:.0} ns)"),
        _ => "; no knee: the injectors could not load the memory enough to show one".into(),
    };
    s.findings.push(line(
        "loaded-latency",
        format!(
            "Under load, the latency of {which} memory{node} from CPU {} goes from {idle:.0} ns idle to {:.0} ns with {:.1} GB/s injected by {} ({} mix){knee}.",
            r.chase.cpu,
            top.latency_ns.median,
            top.injected_gbps,
            plural(r.injectors.cpus.len(), "thread", "threads"),
            c.mix.name()
        ),
    ));
}

fn c2c(s: &mut Summary, r: &C2cResult) {
    let within = median(
        r.node_summary
            .iter()
            .filter(|n| n.nodes[0] == n.nodes[1])
            .filter_map(|n| n.modified_ns)
            .collect(),
    );
    let across = median(
        r.node_summary
            .iter()
            .filter(|n| n.nodes[0] != n.nodes[1])
            .filter_map(|n| n.modified_ns)
            .collect(),
    );
    s.key_figures.c2c_within_node_ns = within;
    s.key_figures.c2c_across_nodes_ns = across;
    let fs = median(
        r.node_summary
            .iter()
            .filter_map(|n| n.false_sharing_ratio)
            .collect(),
    )
    .map(|x| {
        format!("; false sharing makes atomic increments {x:.1}x slower than on separate lines")
    })
    .unwrap_or_default();
    let text = match (within, across) {
        (Some(w), Some(a)) => format!(
            "A modified cache line moves between cores in {w:.0} ns within a node and {a:.0} ns across nodes ({:.1}x){fs}.",
            a / w
        ),
        (Some(w), None) => format!("A modified cache line moves between cores in {w:.0} ns within the node{fs}."),
        (None, Some(a)) => format!("A modified cache line moves between cores of different nodes in {a:.0} ns{fs}."),
        (None, None) => return,
    };
    s.findings.push(line("c2c", text));
}

fn policies(s: &mut Summary, r: &PoliciesResult) {
    if r.single_node {
        // Every policy puts every page on the one node: the comparison
        // only checks the machinery, its differences are noise.
        s.advice.push(line(
            "policies",
            "Memory policies: with one memory node, local, interleave and bind all put every page on it; the policy comparison differs only by noise here.".into(),
        ));
        return;
    }
    for rec in &r.recommendations {
        s.advice.push(line("policies", sentence_case(&rec.text)));
    }
}

/// `t` with its first letter upper case (the experiments' notes and
/// advice start lower case, as clauses).
pub fn sentence_case(t: &str) -> String {
    let mut c = t.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect::<String>(),
        None => String::new(),
    }
}

fn gbps_of(r: &PoliciesResult, w: Workload, p: PolicyColumn) -> Option<f64> {
    r.cell(w, p).and_then(|c| c.gbps.as_ref()).map(|g| g.median)
}

/// Advice for threads with independent data and threads sharing data.
fn advice(s: &mut Summary, m: &Machine, doc: &ReportResults) {
    let k = s.key_figures.clone();
    let multi = m.cpu_nodes().len() > 1;
    let indep = match (
        multi,
        k.compared_threads,
        k.packed_per_thread_gbps,
        k.spread_per_thread_gbps,
    ) {
        (true, Some(n), Some(p), Some(sp)) if sp > p * 1.05 => Some(format!(
            "Threads with independent data: spread them one per node first, then fill each node's second core (scatter, node-major), each with its own first-touched data: at {n} threads each got {sp:.1} GB/s spread vs {p:.1} packed."
        )),
        (true, Some(n), Some(p), Some(sp)) => Some(format!(
            "Threads with independent data: packing them on one node was not slower here ({p:.1} vs {sp:.1} GB/s per thread at {n} threads spread), so keep them where their data is; let each thread first-touch its own data."
        )),
        (false, Some(n), Some(p), _) => Some(format!(
            "Threads with independent data: with one node there is nothing to spread over; let each thread first-touch its own data and pin it. {n} threads share the node's bandwidth ({p:.1} GB/s each{}).",
            k.single_thread_gbps
                .map(|x| format!(" vs {x:.1} alone"))
                .unwrap_or_default()
        )),
        _ => None,
    };
    if let Some(t) = indep {
        s.advice.push(line("independent-data", t));
    }
    let shared_cache = m
        .caches
        .iter()
        .filter(|c| c.kind != "instruction" && c.cpus.len() > 1)
        .max_by_key(|c| (c.level, c.size_bytes))
        .map(|c| {
            format!(
                "the L{}: {}, CPUs {}",
                c.level,
                format_bytes(c.size_bytes),
                c.cpus
            )
        });
    let mut shared = match (k.c2c_within_node_ns, k.c2c_across_nodes_ns) {
        (Some(w), Some(a)) => format!(
            "Threads sharing data: fill one node's cores first (compact, core-major), within one shared cache: a written line moves in {w:.0} ns within a node but {a:.0} ns across nodes."
        ),
        (Some(w), None) => format!(
            "Threads sharing data: keep them on cores that share a cache{}; a written line moves between cores in {w:.0} ns.",
            shared_cache
                .as_deref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        ),
        _ => "Threads sharing data: fill one node's cores first (compact, core-major), within one shared cache.".to_string(),
    };
    if let Some(pol) = doc.parts.policies.done() {
        if let (Some(i), Some(l)) = (
            gbps_of(pol, Workload::SerialInit, PolicyColumn::Interleave),
            gbps_of(pol, Workload::SerialInit, PolicyColumn::Local),
        ) {
            if !pol.single_node {
                shared.push_str(&format!(
                    " When threads on three or more nodes share data, or the program initializes it from one thread, interleave it: the program whose main thread initialized the data got {i:.1} GB/s interleaved vs {l:.1} with first touch."
                ));
            }
        }
    }
    s.advice.push(line("shared-data", shared));
}

fn warnings(s: &mut Summary, doc: &ReportResults) {
    let m = &doc.machine;
    if let Some(env) = &doc.environment {
        if env.numa_balancing == Some(true) {
            s.warnings.push(
                "Automatic NUMA balancing is on (/proc/sys/kernel/numa_balancing): the kernel migrates pages behind programs' backs; numalab checks pages at the start and end of each measurement, but production placements may move."
                    .into(),
            );
        }
        if env.thp_enabled.as_deref() == Some("always") {
            s.warnings.push(
                "Transparent huge pages are set to 'always': page-granular placement (interleave, striping) becomes 2 MiB runs in large buffers unless a program turns THP off for them."
                    .into(),
            );
        }
        if let Some(max) = &env.cgroup.memory_max {
            if max != "max" {
                s.warnings.push(format!(
                    "The cgroup limits this process's memory to {max} bytes."
                ));
            }
        }
        for w in &env.warnings {
            if !s.warnings.contains(w) {
                s.warnings.push(w.clone());
            }
        }
    }
    if m.restricted {
        s.warnings.push(format!(
            "A cgroup (cpuset) restricts this process to CPUs {} and memory nodes {} of the {} CPUs and nodes {} the machine has; the report covers only what it may use.",
            m.allowed_cpus, m.allowed_nodes, m.complete_cpus.len(), m.complete_nodes
        ));
    }
    for w in &m.warnings {
        s.warnings.push(format!("Firmware: {w}"));
    }
    if let Some(r) = doc.parts.latency_matrix.done() {
        s.warnings.extend(distance_disagreements(m, r));
    }
    for p in &doc.verification.problems {
        s.warnings.push(format!("Placement did not verify: {p}."));
    }
    let failed: Vec<&str> = PartName::ALL
        .iter()
        .filter(|&&n| doc.parts.meta(n).status == PartStatus::Failed)
        .map(|n| n.name())
        .collect();
    if !failed.is_empty() {
        s.warnings.push(format!(
            "Part{} {} failed (see the parts table for why).",
            if failed.len() == 1 { "" } else { "s" },
            failed.join(", ")
        ));
    }
}

/// Where the measured latency contradicts the firmware's distance order: a
/// node the firmware calls farther measured clearly faster.
pub fn distance_disagreements(m: &Machine, r: &MatrixResult) -> Vec<String> {
    let Some(t) = &r.latency else {
        return Vec::new();
    };
    if m.distances.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for row in t {
        for a in row {
            for b in row {
                let (da, db) = (
                    m.distance(a.cpu_node, a.mem_node),
                    m.distance(b.cpu_node, b.mem_node),
                );
                if da < db && a.value.median > 1.15 * b.value.median {
                    out.push(format!(
                        "Firmware distances disagree with the measured latency: from node {} the firmware puts node {} nearer ({da}) than node {} ({db}), but it measured {:.0} ns vs {:.0} ns.",
                        a.cpu_node, a.mem_node, b.mem_node, a.value.median, b.value.median
                    ));
                }
            }
        }
    }
    out.truncate(4);
    out
}
