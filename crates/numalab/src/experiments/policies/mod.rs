//! `numalab policies`: memory policies compared for canonical workloads, the
//! classic "platform x application type" table, with every cell's placement
//! verified and a recommendation for this machine derived from the numbers.
//!
//! Workloads (rows), each streaming a bandwidth kernel over its data:
//! 1. one thread, unpinned: the scheduler chooses its CPU and may move it;
//!    every CPU it is seen on is recorded;
//! 2. one thread, pinned to the first CPU of the layout;
//! 3. independent single-threaded programs: one pinned worker per CPU of the
//!    layout, each initializing its own data; the aggregate is the sum of
//!    each program's own rate (nobody waits for anybody);
//! 4. a threaded program whose main thread initializes all the data: one
//!    thread pinned to the first CPU touches and writes every worker's part
//!    before the workers start (first touch puts every page on its node: the
//!    classic mistake);
//! 5. a NUMA-aware threaded program: each thread initializes its own part.
//!
//! The threaded programs (4, 5) are timed as one job: all bytes over the
//! slowest thread's time. Each worker of 3-5 has the same data size as the
//! single thread, so rows compare like for like. A threaded program's data is
//! one part per thread, each part its own mapping: page placement (first
//! touch, interleave, bind) works page by page, so this is the same placement
//! as slices of one shared array.
//!
//! Policies (columns): local (the OS default, first touch), interleave page
//! by page over every memory node, everything bound to one node. Every cell
//! is checked: each buffer's page histogram against what the policy should
//! give (toucher's node, even round robin, the bound node), who touched the
//! data, and where the workers ran.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the run after the cell in
//! progress: `cells` then holds the cells run so far.

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::harness::{
    run_bandwidth_with, Aggregate, BandwidthRequest, BandwidthResult, Figure, RunOptions,
    WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::{StopRule, Summary};
use crate::placement::{format_bytes, sys, MemoryPolicy, PlacementError, Thp};
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A canonical workload: a row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    SingleUnpinned,
    SinglePinned,
    Independent,
    SerialInit,
    NumaAware,
}

impl Workload {
    pub const ALL: [Workload; 5] = [
        Self::SingleUnpinned,
        Self::SinglePinned,
        Self::Independent,
        Self::SerialInit,
        Self::NumaAware,
    ];

    /// The workload's name (also its serde name), e.g. "serial-init".
    pub fn name(self) -> &'static str {
        match self {
            Self::SingleUnpinned => "single-unpinned",
            Self::SinglePinned => "single-pinned",
            Self::Independent => "independent",
            Self::SerialInit => "serial-init",
            Self::NumaAware => "numa-aware",
        }
    }

    /// Row title for `threads` threads.
    pub fn title(self, threads: usize) -> String {
        match self {
            Self::SingleUnpinned => "1 thread, unpinned".into(),
            Self::SinglePinned => "1 thread, pinned".into(),
            Self::Independent => format!(
                "{threads} independent program{}",
                if threads == 1 { "" } else { "s" }
            ),
            Self::SerialInit => format!("{threads} threads, main thread inits"),
            Self::NumaAware => format!("{threads} threads, NUMA-aware"),
        }
    }

    /// What the workload is, in one sentence.
    pub fn description(self) -> &'static str {
        match self {
            Self::SingleUnpinned => "one thread with no affinity (the scheduler places and may move it), initializing its own data",
            Self::SinglePinned => "one thread pinned to the first CPU, initializing its own data",
            Self::Independent => "independent single-threaded programs, one per CPU, each with its own data which it initializes itself; aggregate = sum of their rates",
            Self::SerialInit => "one multi-threaded program whose main thread (pinned to the first CPU) initializes all the data before the threads start; aggregate = all bytes / slowest thread",
            Self::NumaAware => "one multi-threaded program in which each thread initializes its own part of the data; aggregate = all bytes / slowest thread",
        }
    }

    /// Whether the workload uses every thread of the layout.
    pub fn threaded(self) -> bool {
        !matches!(self, Self::SingleUnpinned | Self::SinglePinned)
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        let t = text.trim();
        Self::ALL
            .into_iter()
            .find(|w| w.name() == t)
            .or(match t {
                "unpinned" => Some(Self::SingleUnpinned),
                "pinned" | "single" => Some(Self::SinglePinned),
                "main-init" | "main-thread-init" => Some(Self::SerialInit),
                _ => None,
            })
            .ok_or_else(|| {
                format!(
                    "unknown workload '{t}'; valid: {}, all",
                    Self::ALL.map(|w| w.name()).join(", ")
                )
            })
    }
}

/// A memory policy column of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PolicyColumn {
    /// The OS default: first touch (MPOL_DEFAULT).
    Local,
    /// Page-by-page round robin over every memory node.
    Interleave,
    /// Every page bound to one node.
    OneNode,
}

impl PolicyColumn {
    pub const ALL: [PolicyColumn; 3] = [Self::Local, Self::Interleave, Self::OneNode];

    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Interleave => "interleave",
            Self::OneNode => "one-node",
        }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "local" | "first-touch" | "default" => Ok(Self::Local),
            "interleave" => Ok(Self::Interleave),
            "one-node" | "bind" | "node" => Ok(Self::OneNode),
            t => Err(format!(
                "unknown policy '{t}'; valid: local, interleave, one-node, all"
            )),
        }
    }
}

/// Parses a comma-separated list of names (or `all`), keeping `ALL`'s order.
pub fn parse_list<T: Copy + Ord>(
    text: &str,
    all: &[T],
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    if text.trim() == "all" {
        return Ok(all.to_vec());
    }
    let mut out = Vec::new();
    for item in text.split(',') {
        if item.trim().is_empty() {
            return Err(format!("empty name in the list '{text}'"));
        }
        let v = parse(item)?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    out.sort();
    Ok(out)
}

/// What to run.
#[derive(Debug, Clone)]
pub struct PoliciesRequest {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    /// CPUs of the threaded workloads' threads, in layout order. The first is
    /// the pinned single thread's CPU and the main thread's.
    pub cpus: Vec<u32>,
    /// How `cpus` was laid out (for the record), e.g. "scatter".
    pub thread_policy: String,
    /// CPUs the unpinned thread may run on.
    pub unpinned_cpus: IdSet,
    /// The node of the one-node column.
    pub node: u32,
    /// Bytes of each array of each worker.
    pub buffer_bytes: usize,
    pub thp: Thp,
    pub rule: StopRule,
    pub workloads: Vec<Workload>,
    pub policies: Vec<PolicyColumn>,
}

/// Default bytes per array: one worker's arrays together at least twice the
/// last-level cache (never below 16 MiB per array), rounded to 2 MiB.
pub fn default_array_bytes(m: &Machine, kernel: BandwidthKernel) -> usize {
    let llc = m.last_level_cache_bytes().unwrap_or(32 << 20) as usize;
    (2 * llc / kernel.arrays())
        .max(16 << 20)
        .next_multiple_of(2 << 20)
}

/// A row of the table as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkloadInfo {
    pub name: Workload,
    pub title: String,
    /// [`Workload::description`] when run; as read back when deserialized.
    pub description: String,
    pub threads: usize,
    pub aggregate: Aggregate,
}

/// A column of the table as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PolicyInfo {
    pub name: PolicyColumn,
    pub title: String,
    /// The memory policy every buffer gets (`numalab place` syntax).
    pub memory_policy: String,
}

/// One workload under one policy.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cell {
    pub workload: Workload,
    pub policy: PolicyColumn,
    pub memory_policy: String,
    pub threads: usize,
    /// Each worker's CPU; `None` for the unpinned worker.
    pub requested_cpus: Vec<Option<u32>>,
    /// Every CPU each worker was seen on.
    pub seen_cpus: Vec<Vec<u32>>,
    /// How often the unpinned worker was seen on another CPU than before.
    pub migrations: Option<u64>,
    /// CPUs of the threads that first touched the data.
    pub toucher_cpus: Vec<u32>,
    pub aggregate: Aggregate,
    /// Aggregate bandwidth (program bytes), 1e9 B/s; absent when the cell could not run.
    pub gbps: Option<Figure>,
    /// Aggregate bandwidth in bytes memory moves (write-allocate included).
    pub memory_gbps: Option<Figure>,
    /// Median of each worker's own rate, in worker order.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub worker_gbps: Vec<f64>,
    /// Pages of all the cell's data, per node.
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
    /// Share of the data (percent) on the node of the worker that streams
    /// it (for the unpinned worker: on a node it was seen running on).
    pub local_percent: Option<f64>,
    pub page_size: usize,
    /// Where the pages should be, in words.
    pub expected: String,
    pub verified: bool,
    pub problems: Vec<String>,
    /// The run: samples, stop reason, per-worker buffers and page histograms.
    pub run: Option<BandwidthResult>,
    pub warnings: Vec<String>,
}

/// Two cells compared: how much faster `better` is than `worse`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Comparison {
    /// "workload/policy".
    pub better: String,
    pub worse: String,
    /// `(better / worse - 1) * 100`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub percent: f64,
    /// Differences up to this many percent are noise: 5%, or the two medians'
    /// confidence half-widths added, whichever is larger.
    #[serde(deserialize_with = "f64_or_nan")]
    pub noise_percent: f64,
    pub significant: bool,
}

/// One piece of advice for this machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recommendation {
    /// A workload name, or "pinning", "initialization", "scaling".
    pub topic: String,
    /// The policy to use, when the numbers single one out.
    pub best: Option<PolicyColumn>,
    pub text: String,
    pub comparisons: Vec<Comparison>,
}

/// The outcome of [`run_policies`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PoliciesResult {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    pub threads: usize,
    pub thread_policy: String,
    pub cpus: Vec<u32>,
    /// The main thread's CPU (and the pinned single thread's).
    pub main_cpu: u32,
    pub unpinned_cpus: IdSet,
    /// The one-node column's node.
    pub node: u32,
    pub interleave_nodes: IdSet,
    /// One memory node only: the three policies are the same memory.
    pub single_node: bool,
    /// Bytes of each array of each worker.
    pub buffer_bytes: u64,
    pub arrays: usize,
    pub thp: Thp,
    pub rule: StopRule,
    pub workloads: Vec<WorkloadInfo>,
    pub policies: Vec<PolicyInfo>,
    pub cells: Vec<Cell>,
    pub recommendations: Vec<Recommendation>,
    pub notes: Vec<String>,
    pub verified: bool,
    pub warnings: Vec<String>,
}

impl PoliciesResult {
    /// The cell of a workload under a policy, if it was run.
    pub fn cell(&self, w: Workload, p: PolicyColumn) -> Option<&Cell> {
        self.cells.iter().find(|c| c.workload == w && c.policy == p)
    }
}

/// Context shared by the cells.
struct Plan<'a> {
    m: &'a Machine,
    req: &'a PoliciesRequest,
    interleave: IdSet,
}

impl Plan<'_> {
    fn memory_policy(&self, p: PolicyColumn) -> MemoryPolicy {
        match p {
            PolicyColumn::Local => MemoryPolicy::FirstTouch,
            PolicyColumn::Interleave => MemoryPolicy::Interleave {
                nodes: self.interleave.clone(),
                chunk_pages: 1,
            },
            PolicyColumn::OneNode => MemoryPolicy::Bind {
                nodes: IdSet::single(self.req.node),
            },
        }
    }

    fn workers(&self, w: Workload) -> Vec<u32> {
        if w.threaded() {
            self.req.cpus.clone()
        } else {
            self.req.cpus[..1].to_vec()
        }
    }

    fn expected(&self, w: Workload, p: PolicyColumn) -> String {
        let main = self.req.cpus[0];
        match p {
            PolicyColumn::Local => match w {
                Workload::SingleUnpinned => {
                    "first touch: on the node(s) the unpinned thread ran on while touching".into()
                }
                Workload::SerialInit => format!(
                    "first touch by the main thread: every page on node {} (CPU {main})",
                    self.m
                        .node_of_cpu(main)
                        .map_or("?".into(), |n| n.to_string())
                ),
                _ => "first touch: each worker's pages on its own node".into(),
            },
            PolicyColumn::Interleave => format!(
                "round robin page by page: each buffer's pages evenly over nodes {}",
                self.interleave
            ),
            PolicyColumn::OneNode => format!("every page on node {}", self.req.node),
        }
    }
}

/// Bytes free on `node` that a strict placement may take (the margin of
/// `PlacedBuffer`'s own check).
fn usable_on_node(node: u32) -> u64 {
    let free = sys::node_free_bytes(node).unwrap_or(0);
    free.saturating_sub((free / 20).max(32 << 20))
}

/// Runs every requested workload under every requested policy.
pub fn run_policies(
    m: &Machine,
    req: &PoliciesRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<PoliciesResult, PlacementError> {
    if req.cpus.is_empty() {
        return Err(PlacementError::Invalid("no CPU to run on".into()));
    }
    if req.workloads.is_empty() || req.policies.is_empty() {
        return Err(PlacementError::Invalid(
            "no workload or no policy to run".into(),
        ));
    }
    let interleave = m.memory_nodes();
    if interleave.is_empty() {
        return Err(PlacementError::Invalid("no allowed node has memory".into()));
    }
    if !m.allowed_nodes.contains(req.node) {
        return Err(PlacementError::Invalid(format!(
            "node {} is not an allowed node ({})",
            req.node, m.allowed_nodes
        )));
    }
    let plan = Plan {
        m,
        req,
        interleave: interleave.clone(),
    };
    let arrays = req.kernel.arrays();
    let mut cells = Vec::new();
    'cells: for &w in &req.workloads {
        for &p in &req.policies {
            if cancel::requested() {
                break 'cells;
            }
            progress(&format!("{} / {}", w.name(), p.name()));
            cells.push(run_cell(&plan, w, p)?);
        }
    }
    let threads = req.cpus.len();
    let single_node = interleave.len() == 1;
    let main_node = m.node_of_cpu(req.cpus[0]);
    let mut notes = Vec::new();
    if single_node {
        notes.push(format!(
            "this machine has one memory node (node {interleave}): local, interleave and one-node all put every page there, so the comparison is degenerate; it still runs (a baseline, and a check of the machinery), and differences between policies are noise"
        ));
    }
    if threads == 1 {
        notes.push(
            "one thread: the threaded workloads run a single thread here (give --threads or --cpus to compare more)".into(),
        );
    }
    if m.node(req.node).is_some_and(|n| n.cpuless) {
        notes.push(format!(
            "node {} has no CPUs: the one-node column is every thread's data on CPU-less memory",
            req.node
        ));
    } else if !single_node && main_node != Some(req.node) {
        notes.push(format!(
            "one-node is node {} while the main thread runs on node {}: its single-thread cells are remote",
            req.node,
            main_node.map_or("?".into(), |n| n.to_string())
        ));
    }
    let lookup = |w: Workload, p: PolicyColumn| {
        cells
            .iter()
            .find(|c| c.workload == w && c.policy == p)
            .and_then(|c| c.gbps.clone())
    };
    let recommendations = recommend(&lookup, threads, single_node, req.node);
    let mut warnings = Vec::new();
    for c in &cells {
        for w in &c.warnings {
            warnings.push(format!("{} / {}: {w}", c.workload.name(), c.policy.name()));
        }
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    Ok(PoliciesResult {
        kernel: req.kernel,
        isa: req.isa,
        threads,
        thread_policy: req.thread_policy.clone(),
        cpus: req.cpus.clone(),
        main_cpu: req.cpus[0],
        unpinned_cpus: req.unpinned_cpus.clone(),
        node: req.node,
        interleave_nodes: interleave,
        single_node,
        buffer_bytes: req.buffer_bytes as u64,
        arrays,
        thp: req.thp,
        rule: req.rule.clone(),
        workloads: req
            .workloads
            .iter()
            .map(|&w| WorkloadInfo {
                name: w,
                title: w.title(threads),
                description: w.description().into(),
                threads: if w.threaded() { threads } else { 1 },
                aggregate: aggregate_of(w),
            })
            .collect(),
        policies: req
            .policies
            .iter()
            .map(|&p| PolicyInfo {
                name: p,
                title: column_title(p, &plan.interleave, req.node),
                memory_policy: plan.memory_policy(p).to_string(),
            })
            .collect(),
        verified: cells.iter().all(|c| c.verified),
        cells,
        recommendations,
        notes,
        warnings,
    })
}

/// Column heading: "local (first touch)", "interleave 0-3", "one node 2".
pub fn column_title(p: PolicyColumn, interleave: &IdSet, node: u32) -> String {
    match p {
        PolicyColumn::Local => "local (first touch)".into(),
        PolicyColumn::Interleave => format!("interleave {interleave}"),
        PolicyColumn::OneNode => format!("one node ({node})"),
    }
}

fn aggregate_of(w: Workload) -> Aggregate {
    match w {
        Workload::Independent => Aggregate::Sum,
        _ => Aggregate::Slowest,
    }
}

fn run_cell(plan: &Plan, w: Workload, p: PolicyColumn) -> Result<Cell, PlacementError> {
    let (m, req) = (plan.m, plan.req);
    let policy = plan.memory_policy(p);
    let cpus = plan.workers(w);
    let main = req.cpus[0];
    let unpinned = w == Workload::SingleUnpinned;
    let mut cell = Cell {
        workload: w,
        policy: p,
        memory_policy: policy.to_string(),
        threads: cpus.len(),
        requested_cpus: if unpinned {
            vec![None]
        } else {
            cpus.iter().map(|&c| Some(c)).collect()
        },
        seen_cpus: Vec::new(),
        migrations: None,
        toucher_cpus: Vec::new(),
        aggregate: aggregate_of(w),
        gbps: None,
        memory_gbps: None,
        worker_gbps: Vec::new(),
        pages_by_node: BTreeMap::new(),
        local_percent: None,
        page_size: sys::page_size(),
        expected: plan.expected(w, p),
        verified: false,
        problems: Vec::new(),
        run: None,
        warnings: Vec::new(),
    };
    let bytes = req.buffer_bytes as u64 * (req.kernel.arrays() * cpus.len()) as u64;
    if p == PolicyColumn::OneNode && m.is_live() && bytes > usable_on_node(req.node) {
        cell.problems.push(format!(
            "not run: {} of data do not fit on node {} ({} usable there); use a smaller --size, fewer --threads or another --node",
            format_bytes(bytes),
            req.node,
            format_bytes(usable_on_node(req.node))
        ));
        return Ok(cell);
    }
    let breq = BandwidthRequest {
        kernel: req.kernel,
        isa: req.isa,
        workers: cpus
            .iter()
            .map(|&cpu| WorkerPlan {
                cpu,
                policy: policy.clone(),
                toucher: None,
            })
            .collect(),
        buffer_bytes: req.buffer_bytes,
        thp: Some(req.thp),
        rule: req.rule.clone(),
    };
    let opts = RunOptions {
        unpinned: unpinned.then(|| req.unpinned_cpus.clone()),
        initializer: (w == Workload::SerialInit).then_some(main),
        aggregate: aggregate_of(w),
    };
    let r = match run_bandwidth_with(m, &breq, &opts) {
        Ok(r) => r,
        Err(PlacementError::Capacity(msg)) => {
            cell.problems.push(format!("not run: {msg}"));
            return Ok(cell);
        }
        Err(e) => return Err(e),
    };
    let mut problems = r.verification.problems.clone();
    let mut touchers = IdSet::new();
    let granule = match req.thp {
        // A transparent huge page lands on one node as a whole.
        Thp::On | Thp::System => ((2u64 << 20) / cell.page_size as u64).max(1),
        Thp::Off => 1,
    };
    let (mut local_pages, mut all_pages) = (0u64, 0u64);
    for (i, wr) in r.verification.workers.iter().enumerate() {
        let seen: IdSet = wr.seen_cpus.iter().copied().collect();
        let home: IdSet = if wr.pinned {
            m.node_of_cpu(wr.requested_cpu).into_iter().collect()
        } else {
            seen.iter().filter_map(|c| m.node_of_cpu(c)).collect()
        };
        cell.seen_cpus.push(seen.iter().collect());
        if wr.migrations.is_some() {
            cell.migrations = wr.migrations;
        }
        cell.worker_gbps
            .push(Summary::of(&wr.gbps).map_or(0.0, |s| s.median));
        for (j, b) in wr.buffers.iter().enumerate() {
            for (n, k) in &b.pages_by_node {
                *cell.pages_by_node.entry(*n).or_insert(0) += k;
                all_pages += k;
                if home.contains(*n) {
                    local_pages += k;
                }
            }
            cell.page_size = b.page_size;
            if let Some(t) = b.toucher_cpu {
                touchers.insert(t);
            }
            let who = format!("worker {i} buffer {j}");
            // Who touched the data.
            let want_toucher = match w {
                Workload::SerialInit => Some(main),
                Workload::SingleUnpinned => None,
                _ => Some(wr.requested_cpu),
            };
            if let (Some(want), Some(got)) = (want_toucher, b.toucher_cpu) {
                if want != got {
                    problems.push(format!("{who}: first touched on CPU {got}, not CPU {want}"));
                }
            }
            if p == PolicyColumn::Interleave {
                if let Some(msg) = uneven(&b.pages_by_node, &plan.interleave, granule) {
                    problems.push(format!("{who}: {msg}"));
                }
            }
        }
    }
    cell.toucher_cpus = touchers.iter().collect();
    if all_pages > 0 {
        cell.local_percent = Some(100.0 * local_pages as f64 / all_pages as f64);
    }
    cell.gbps = Some(r.gbps.clone());
    cell.memory_gbps = Some(r.memory_gbps.clone());
    cell.warnings = r
        .warnings
        .iter()
        .filter(|w| !w.starts_with("placement did not verify"))
        .cloned()
        .collect();
    cell.verified = problems.is_empty();
    cell.problems = problems;
    cell.run = Some(r);
    Ok(cell)
}

/// Whether an interleaved buffer's pages are spread evenly over `nodes`:
/// round robin gives every node the same count within one granule (a page,
/// or a huge page's worth of pages with THP).
pub fn uneven(pages: &BTreeMap<u32, u64>, nodes: &IdSet, granule: u64) -> Option<String> {
    let counts: Vec<u64> = nodes
        .iter()
        .map(|n| pages.get(&n).copied().unwrap_or(0))
        .collect();
    let (lo, hi) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    (hi - lo > granule).then(|| {
        let parts: Vec<String> = nodes
            .iter()
            .zip(&counts)
            .map(|(n, c)| format!("{n}:{c}"))
            .collect();
        format!(
            "interleave is uneven: pages per node {} differ by {} (round robin allows {granule})",
            parts.join(" "),
            hi - lo
        )
    })
}

/// How much faster `a` is than `b`, and whether that is more than noise.
pub fn compare(a: (&str, &Figure), b: (&str, &Figure)) -> Comparison {
    let percent = (a.1.median / b.1.median - 1.0) * 100.0;
    let ci = |f: &Figure| {
        if f.rel_ci.is_finite() {
            f.rel_ci
        } else {
            1.0
        }
    };
    let noise_percent = (5.0f64).max((ci(a.1) + ci(b.1)) * 100.0);
    let (better, worse, percent) = if percent >= 0.0 {
        (a.0, b.0, percent)
    } else {
        (b.0, a.0, (b.1.median / a.1.median - 1.0) * 100.0)
    };
    Comparison {
        better: better.to_string(),
        worse: worse.to_string(),
        percent,
        noise_percent,
        significant: percent.is_finite() && percent > noise_percent,
    }
}

fn pct(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.1}%")
    } else {
        format!("{x:.0}%")
    }
}

fn label(w: Workload, p: PolicyColumn) -> String {
    format!("{}/{}", w.name(), p.name())
}

fn policy_words(p: PolicyColumn, node: u32) -> String {
    match p {
        PolicyColumn::Local => "local".into(),
        PolicyColumn::Interleave => "interleave".into(),
        PolicyColumn::OneNode => format!("node {node} only"),
    }
}

/// The advice that follows from the figures (`fig(workload, policy)` is a
/// cell's aggregate bandwidth, `None` when it did not run).
pub fn recommend(
    fig: &dyn Fn(Workload, PolicyColumn) -> Option<Figure>,
    threads: usize,
    single_node: bool,
    node: u32,
) -> Vec<Recommendation> {
    use PolicyColumn as P;
    use Workload as W;
    let mut out = Vec::new();
    for w in Workload::ALL {
        let figs: Vec<(PolicyColumn, Figure)> = PolicyColumn::ALL
            .into_iter()
            .filter_map(|p| fig(w, p).map(|f| (p, f)))
            .collect();
        if figs.len() < 2 {
            continue;
        }
        let subject = match w {
            W::SingleUnpinned => "single-threaded program, unpinned".to_string(),
            W::SinglePinned => "single-threaded program, pinned".to_string(),
            W::Independent => "independent single-threaded programs".to_string(),
            W::SerialInit => format!("{threads}-thread program with serial init"),
            W::NumaAware => format!("NUMA-aware {threads}-thread program"),
        };
        // The classic question of each workload: local vs interleave, and
        // for the serial-init program interleave vs main-thread first touch.
        let (first, second) = match w {
            W::SerialInit => (P::Interleave, P::Local),
            _ => (P::Local, P::Interleave),
        };
        let name_of = |p: PolicyColumn| match (w, p) {
            (W::SerialInit, P::Local) => "main-thread first touch".to_string(),
            _ => policy_words(p, node),
        };
        let mut comparisons = Vec::new();
        let get = |p: PolicyColumn| figs.iter().find(|f| f.0 == p).map(|f| &f.1);
        // The classic pair and the one-node column against the first; when
        // a column was not run, whichever pair is left.
        let pairs = [(first, second), (first, P::OneNode), (second, P::OneNode)];
        let mut sentences = Vec::new();
        for (a, b) in pairs {
            let (Some(fa), Some(fb)) = (get(a), get(b)) else {
                continue;
            };
            if comparisons.len() == 2 {
                break;
            }
            let c = compare((&label(w, a), fa), (&label(w, b), fb));
            let a_wins = c.better == label(w, a);
            let (win, lose) = if a_wins { (a, b) } else { (b, a) };
            sentences.push(if c.significant {
                format!(
                    "{} beats {} by {}",
                    name_of(win),
                    name_of(lose),
                    pct(c.percent)
                )
            } else {
                format!(
                    "{} and {} are within noise ({} apart, noise {})",
                    name_of(win),
                    name_of(lose),
                    pct(c.percent),
                    pct(c.noise_percent)
                )
            });
            comparisons.push(c);
        }
        // The best policy: the fastest cell when it beats every other one by
        // more than noise. Otherwise the policies tied with the fastest: the
        // default when it is among them, else all of them.
        let (best_p, best_f) = figs
            .iter()
            .max_by(|x, y| x.1.median.total_cmp(&y.1.median))
            .map(|(p, f)| (*p, f.clone()))
            .expect("two figures");
        let top: Vec<PolicyColumn> = figs
            .iter()
            .filter(|(p, f)| {
                *p == best_p
                    || !compare((&label(w, best_p), &best_f), (&label(w, *p), f)).significant
            })
            .map(|(p, _)| *p)
            .collect();
        let best = (!single_node && top.len() == 1).then_some(best_p);
        let tied = || {
            top.iter()
                .map(|p| name_of(*p))
                .collect::<Vec<_>>()
                .join(" or ")
        };
        let advice = match (best, w) {
            _ if single_node => {
                "any policy (one memory node: the policies are the same memory, so any difference here is noise)".to_string()
            }
            (Some(P::Local), W::SerialInit) => {
                "keep first touch (the main thread's node copes at this thread count)".into()
            }
            (Some(P::Local), _) => "keep local".into(),
            (Some(P::Interleave), W::SerialInit) => {
                "interleave (or better, initialize in parallel)".into()
            }
            (Some(P::Interleave), _) => {
                "interleave (against the classic advice: check the verification, rerun with a larger --budget)".into()
            }
            (Some(P::OneNode), _) => format!("bind to node {node}"),
            (None, W::SerialInit) if top.contains(&P::Local) => {
                "no clear winner; initializing in parallel is the real fix".into()
            }
            (None, W::SerialInit) => format!(
                "{} (tied, both ahead of main-thread first touch), or better, initialize in parallel",
                tied()
            ),
            (None, _) if top.contains(&P::Local) => {
                "no clear winner: keep local (the default)".into()
            }
            (None, _) => format!("{} (tied, both ahead of local)", tied()),
        };
        out.push(Recommendation {
            topic: w.name().to_string(),
            best,
            text: format!("{subject}: {advice}: {}", sentences.join("; ")),
            comparisons,
        });
    }
    // Across workloads.
    let cross = |topic: &str,
                 a: (Workload, PolicyColumn),
                 b: (Workload, PolicyColumn),
                 what: &dyn Fn(&Comparison, bool) -> String,
                 out: &mut Vec<Recommendation>| {
        if let (Some(fa), Some(fb)) = (fig(a.0, a.1), fig(b.0, b.1)) {
            let c = compare((&label(a.0, a.1), &fa), (&label(b.0, b.1), &fb));
            let a_wins = c.better == label(a.0, a.1);
            out.push(Recommendation {
                topic: topic.into(),
                best: None,
                text: what(&c, a_wins),
                comparisons: vec![c],
            });
        }
    };
    cross(
        "pinning",
        (W::SinglePinned, P::Local),
        (W::SingleUnpinned, P::Local),
        &|c, pinned_wins| {
            if !c.significant {
                format!(
                    "pinning a single thread: no measurable effect ({} apart, noise {})",
                    pct(c.percent),
                    pct(c.noise_percent)
                )
            } else if pinned_wins {
                format!(
                    "pinning a single thread pays: +{} over letting the scheduler place it",
                    pct(c.percent)
                )
            } else {
                format!(
                    "the unpinned thread was {} faster than the pinned one (the scheduler found a quieter CPU)",
                    pct(c.percent)
                )
            }
        },
        &mut out,
    );
    if threads > 1 {
        cross(
            "initialization",
            (W::NumaAware, P::Local),
            (W::SerialInit, P::Local),
            &|c, aware_wins| {
                let caveat = if single_node {
                    " (one memory node: every page is on it either way, so this is noise)"
                } else {
                    ""
                };
                if !c.significant {
                    format!(
                        "initializing in parallel vs from the main thread (first touch): no measurable difference ({} apart, noise {}){}",
                        pct(c.percent),
                        pct(c.noise_percent),
                        if single_node { ": every page is on the one node either way" } else { "" }
                    )
                } else if aware_wins {
                    format!(
                        "let each thread initialize its own data: NUMA-aware first touch beats main-thread first touch by {}{caveat}",
                        pct(c.percent)
                    )
                } else {
                    format!(
                        "main-thread initialization beat NUMA-aware initialization by {}{caveat}",
                        pct(c.percent)
                    )
                }
            },
            &mut out,
        );
        if let (Some(one), Some(all)) =
            (fig(W::SinglePinned, P::Local), fig(W::NumaAware, P::Local))
        {
            let ratio = all.median / one.median;
            out.push(Recommendation {
                topic: "scaling".into(),
                best: None,
                text: format!(
                    "{threads} NUMA-aware threads reach {ratio:.2} times one pinned thread's bandwidth ({:.0}% of linear)",
                    100.0 * ratio / threads as f64
                ),
                comparisons: Vec::new(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(median: f64, rel_ci: f64) -> Figure {
        Figure {
            median,
            best: median,
            min: median,
            max: median,
            spread: 0.0,
            rel_ci,
        }
    }

    #[test]
    fn comparisons_separate_noise_from_differences() {
        let c = compare(("a", &f(12.0, 0.01)), ("b", &f(10.0, 0.01)));
        assert_eq!((c.better.as_str(), c.worse.as_str()), ("a", "b"));
        assert!((c.percent - 20.0).abs() < 1e-9 && c.significant);
        assert_eq!(c.noise_percent, 5.0);
        // Reversed: the faster one is named first.
        let c = compare(("a", &f(10.0, 0.01)), ("b", &f(12.0, 0.01)));
        assert_eq!(c.better, "b");
        assert!((c.percent - 20.0).abs() < 1e-9);
        // Wide confidence intervals swallow the difference.
        let c = compare(("a", &f(12.0, 0.15)), ("b", &f(10.0, 0.1)));
        assert!((c.noise_percent - 25.0).abs() < 1e-9 && !c.significant);
        // No interval at all counts as 100% noise.
        let c = compare(("a", &f(12.0, f64::NAN)), ("b", &f(10.0, 0.0)));
        assert!(!c.significant);
    }

    #[test]
    fn interleave_evenness() {
        let nodes: IdSet = [0, 1, 2, 3].into_iter().collect();
        let even: BTreeMap<u32, u64> = [(0, 257), (1, 256), (2, 256), (3, 256)].into();
        assert_eq!(uneven(&even, &nodes, 1), None);
        let skewed: BTreeMap<u32, u64> = [(0, 300), (1, 256), (2, 256), (3, 212)].into();
        let msg = uneven(&skewed, &nodes, 1).unwrap();
        assert!(
            msg.contains("0:300 1:256 2:256 3:212") && msg.contains("by 88"),
            "{msg}"
        );
        // A node that got nothing is uneven too.
        let missing: BTreeMap<u32, u64> = [(0, 512), (1, 512)].into();
        assert!(uneven(&missing, &nodes, 1).is_some());
        assert_eq!(uneven(&skewed, &nodes, 512), None);
    }

    fn table(
        cells: &[(Workload, PolicyColumn, f64)],
    ) -> impl Fn(Workload, PolicyColumn) -> Option<Figure> + '_ {
        move |w, p| {
            cells
                .iter()
                .find(|c| c.0 == w && c.1 == p)
                .map(|c| f(c.2, 0.01))
        }
    }

    #[test]
    fn classic_numbers_give_the_classic_advice() {
        use PolicyColumn as P;
        use Workload as W;
        let cells = [
            (W::SinglePinned, P::Local, 10.0),
            (W::SinglePinned, P::Interleave, 7.0),
            (W::SinglePinned, P::OneNode, 10.1),
            (W::SingleUnpinned, P::Local, 8.0),
            (W::SingleUnpinned, P::Interleave, 7.0),
            (W::Independent, P::Local, 40.0),
            (W::Independent, P::Interleave, 25.0),
            (W::Independent, P::OneNode, 11.0),
            (W::SerialInit, P::Local, 11.0),
            (W::SerialInit, P::Interleave, 25.0),
            (W::SerialInit, P::OneNode, 11.0),
            (W::NumaAware, P::Local, 39.0),
            (W::NumaAware, P::Interleave, 25.0),
            (W::NumaAware, P::OneNode, 11.0),
        ];
        let r = recommend(&table(&cells), 8, false, 0);
        let text = |topic: &str| {
            r.iter()
                .find(|x| x.topic == topic)
                .unwrap_or_else(|| panic!("{topic} missing: {r:?}"))
        };
        let ind = text("independent");
        assert_eq!(ind.best, Some(P::Local));
        assert!(ind.text.contains("keep local"), "{}", ind.text);
        assert!(
            ind.text.contains("local beats interleave by 60%"),
            "{}",
            ind.text
        );
        let ser = text("serial-init");
        assert_eq!(ser.best, Some(P::Interleave));
        assert!(
            ser.text
                .contains("interleave beats main-thread first touch by 127%"),
            "{}",
            ser.text
        );
        let aware = text("numa-aware");
        assert!(
            aware.text.contains("local beats interleave by 56%"),
            "{}",
            aware.text
        );
        // Pinned single thread: local and node 0 tie, so no single winner,
        // and the default is kept.
        let pinned = text("single-pinned");
        assert_eq!(pinned.best, None);
        assert!(
            pinned.text.contains("keep local (the default)"),
            "{}",
            pinned.text
        );
        assert!(pinned.text.contains("within noise"), "{}", pinned.text);
        assert!(text("pinning").text.contains("pays: +25%"));
        assert!(text("initialization")
            .text
            .contains("beats main-thread first touch by 255%"));
        assert!(text("scaling").text.contains("3.90 times"));
    }

    #[test]
    fn one_node_machines_get_no_winner() {
        use PolicyColumn as P;
        use Workload as W;
        let cells = [
            (W::NumaAware, P::Local, 10.0),
            (W::NumaAware, P::Interleave, 8.0),
            (W::NumaAware, P::OneNode, 10.1),
        ];
        let r = recommend(&table(&cells), 2, true, 0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].best, None);
        assert!(
            r[0].text.contains("any policy (one memory node"),
            "{}",
            r[0].text
        );
        assert!(r[0].text.contains("is noise)"), "{}", r[0].text);
        assert!(
            r[0].text.contains("local beats interleave by 25%"),
            "{}",
            r[0].text
        );
    }

    #[test]
    fn advice_uses_whichever_columns_ran() {
        use PolicyColumn as P;
        use Workload as W;
        let cells = [
            (W::SerialInit, P::Local, 10.0),
            (W::SerialInit, P::OneNode, 20.0),
        ];
        let r = recommend(&table(&cells), 4, false, 3);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].best, Some(P::OneNode));
        assert_eq!(r[0].comparisons.len(), 1);
        assert!(
            r[0].text
                .contains("node 3 only beats main-thread first touch by 100%"),
            "{}",
            r[0].text
        );
        // Two columns tied ahead of local: both named, no single winner.
        let cells = [
            (W::SinglePinned, P::Local, 10.0),
            (W::SinglePinned, P::Interleave, 20.0),
            (W::SinglePinned, P::OneNode, 20.2),
        ];
        let r = recommend(&table(&cells), 4, false, 3);
        assert_eq!(r[0].best, None);
        assert!(
            r[0].text
                .contains("interleave or node 3 only (tied, both ahead of local)"),
            "{}",
            r[0].text
        );
        // A single column gives nothing to compare.
        assert!(recommend(&table(&cells[..1]), 4, false, 3).is_empty());
    }

    #[test]
    fn names_parse_and_lists_keep_table_order() {
        let l = parse_list(
            "numa-aware,single-pinned,numa-aware",
            &Workload::ALL,
            Workload::parse,
        )
        .unwrap();
        assert_eq!(l, vec![Workload::SinglePinned, Workload::NumaAware]);
        assert_eq!(
            parse_list("all", &PolicyColumn::ALL, PolicyColumn::parse).unwrap(),
            PolicyColumn::ALL.to_vec()
        );
        assert!(Workload::parse("bogus")
            .unwrap_err()
            .contains("valid: single-unpinned"));
        assert!(parse_list("local,", &PolicyColumn::ALL, PolicyColumn::parse).is_err());
        assert_eq!(PolicyColumn::parse("bind").unwrap(), PolicyColumn::OneNode);
    }
}
