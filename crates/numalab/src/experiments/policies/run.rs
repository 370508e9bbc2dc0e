//! Running the table: every requested workload under every requested
//! policy, each cell's placement checked against what its policy should
//! give (the toucher's node, even round robin, the bound node).

use super::advice::recommend;
use super::{
    column_title, Cell, PoliciesRequest, PoliciesResult, PolicyColumn, PolicyInfo, Workload,
    WorkloadInfo,
};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::environment::cache_fit_warning;
use crate::measure::harness::{
    run_bandwidth_with, Aggregate, BandwidthRequest, BandwidthResult, BufferCheck, RunOptions,
    WorkerPlan, WorkerReport,
};
use crate::measure::stats::StopRule;
use crate::measure::stats::Summary;
use crate::placement::{check_plan, sys, BufferDemand, MemoryPolicy, PlacementError, Thp};
use crate::IdSet;
use std::collections::BTreeMap;

/// Context shared by the cells.
struct Plan<'a> {
    m: &'a Machine,
    req: &'a PoliciesRequest,
    /// The interleave column's nodes: every allowed node with memory.
    interleave: IdSet,
    /// The interleave-accessing column's nodes for the threaded workloads:
    /// the memory nodes of their CPUs.
    accessing: IdSet,
}

impl Plan<'_> {
    /// The memory nodes of `cpus`' nodes; every memory node when none of
    /// those nodes has memory (CPUs on memoryless nodes access remote
    /// memory whatever the policy).
    fn memory_nodes_of(&self, cpus: impl IntoIterator<Item = u32>) -> IdSet {
        let nodes: IdSet = cpus
            .into_iter()
            .filter_map(|c| self.m.node_of_cpu(c))
            .filter(|n| self.interleave.contains(*n))
            .collect();
        if nodes.is_empty() {
            self.interleave.clone()
        } else {
            nodes
        }
    }

    /// The nodes a workload's threads run on (the unpinned thread: the
    /// nodes of every CPU it may run on), with memory.
    fn accessing_nodes(&self, w: Workload) -> IdSet {
        match w {
            Workload::SingleUnpinned => self.memory_nodes_of(self.req.unpinned_cpus.iter()),
            _ => self.memory_nodes_of(self.workers(w)),
        }
    }

    fn memory_policy(&self, w: Workload, p: PolicyColumn) -> MemoryPolicy {
        match p {
            PolicyColumn::Local => MemoryPolicy::FirstTouch,
            PolicyColumn::Interleave => MemoryPolicy::Interleave {
                nodes: self.interleave.clone(),
                chunk_pages: 1,
            },
            PolicyColumn::InterleaveAccessing => MemoryPolicy::Interleave {
                nodes: self.accessing_nodes(w),
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
            PolicyColumn::InterleaveAccessing => format!(
                "round robin page by page over the accessing nodes: each buffer's pages evenly over nodes {}",
                self.accessing_nodes(w)
            ),
            PolicyColumn::OneNode => format!("every page on node {}", self.req.node),
        }
    }

    /// A cell before its run: what was asked, nothing measured, not verified.
    fn empty_cell(
        &self,
        w: Workload,
        p: PolicyColumn,
        policy: &MemoryPolicy,
        cpus: &[u32],
    ) -> Cell {
        Cell {
            workload: w,
            policy: p,
            memory_policy: policy.to_string(),
            threads: cpus.len(),
            requested_cpus: if w == Workload::SingleUnpinned {
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
            expected: self.expected(w, p),
            verified: false,
            problems: Vec::new(),
            run: None,
            warnings: Vec::new(),
        }
    }

    /// The buffers of a cell: every worker's arrays, first touched by the
    /// worker (by the main thread for serial-init; wherever it runs for the
    /// unpinned workload).
    fn buffers(&self, w: Workload, p: PolicyColumn) -> Vec<BufferDemand> {
        let policy = self.memory_policy(w, p);
        let req = self.req;
        let toucher = |cpu: u32| match w {
            Workload::SingleUnpinned => None,
            Workload::SerialInit => Some(req.cpus[0]),
            _ => Some(cpu),
        };
        self.workers(w)
            .into_iter()
            .flat_map(|cpu| {
                std::iter::repeat_n(
                    BufferDemand::new(req.buffer_bytes, &policy, toucher(cpu)),
                    req.kernel.arrays(),
                )
            })
            .collect()
    }

    /// The harness run of a cell: one worker per CPU with the column's
    /// policy, unpinned for the unpinned workload, with the main thread as
    /// initializer for the serial-init one.
    fn bandwidth_request(
        &self,
        w: Workload,
        policy: &MemoryPolicy,
        cpus: &[u32],
    ) -> (BandwidthRequest, RunOptions) {
        let req = self.req;
        let breq = BandwidthRequest {
            kernel: req.kernel,
            isa: req.isa,
            workers: WorkerPlan::on_each(cpus, policy),
            buffer_bytes: req.buffer_bytes,
            thp: Some(req.thp),
            rule: req.rule.clone(),
        };
        let opts = RunOptions {
            unpinned: (w == Workload::SingleUnpinned).then(|| req.unpinned_cpus.clone()),
            initializer: (w == Workload::SerialInit).then_some(req.cpus[0]),
            aggregate: aggregate_of(w),
        };
        (breq, opts)
    }

    /// The nodes a worker's data is local to: its CPU's node when pinned,
    /// else the nodes of every CPU it was seen on.
    fn home_nodes(&self, wr: &WorkerReport) -> IdSet {
        if wr.pinned {
            self.m.node_of_cpu(wr.requested_cpu).into_iter().collect()
        } else {
            wr.seen_cpus
                .iter()
                .filter_map(|&c| self.m.node_of_cpu(c))
                .collect()
        }
    }
}

/// Runs every requested workload under every requested policy.
pub fn run_policies(
    m: &Machine,
    req: &PoliciesRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<PoliciesResult, PlacementError> {
    let interleave = check_request(m, req)?;
    let mut plan = Plan {
        m,
        req,
        interleave,
        accessing: IdSet::new(),
    };
    plan.accessing = plan.memory_nodes_of(req.cpus.iter().copied());
    // Every cell's data must fit before the first cell runs: a table with
    // cells that could not run answers nothing.
    let phases: Vec<Vec<BufferDemand>> = req
        .workloads
        .iter()
        .flat_map(|&w| req.policies.iter().map(move |&p| (w, p)))
        .map(|(w, p)| plan.buffers(w, p))
        .collect();
    check_plan(
        m,
        &phases,
        "use a smaller --size, fewer --threads or another --node",
    )?;
    let cells = run_cells(&plan, progress)?;
    let threads = req.cpus.len();
    let single_node = plan.interleave.len() == 1;
    let notes = notes(&plan);
    let lookup = |w: Workload, p: PolicyColumn| {
        cells
            .iter()
            .find(|c| c.workload == w && c.policy == p)
            .and_then(|c| c.run.as_ref())
            .map(|r| r.measurement.samples.clone())
    };
    let recommendations = recommend(&lookup, threads, single_node, req.node);
    let mut warnings = warnings(&cells);
    let data = req.buffer_bytes as u64 * req.kernel.arrays() as u64;
    warnings.extend(cache_fit_warning(m, data, "one worker's data"));
    Ok(PoliciesResult {
        rounds: ROUNDS,
        kernel: req.kernel,
        isa: req.isa,
        threads,
        thread_policy: req.thread_policy.clone(),
        cpus: req.cpus.clone(),
        main_cpu: req.cpus[0],
        unpinned_cpus: req.unpinned_cpus.clone(),
        node: req.node,
        interleave_nodes: plan.interleave.clone(),
        accessing_nodes: plan.accessing.clone(),
        single_node,
        buffer_bytes: req.buffer_bytes as u64,
        arrays: req.kernel.arrays(),
        thp: req.thp,
        rule: req.rule.clone(),
        workloads: workload_infos(req),
        policies: policy_infos(&plan),
        verified: cells.iter().all(|c| c.verified),
        cells,
        recommendations,
        notes,
        warnings,
    })
}

/// Refuses a request that cannot run, before anything is measured; returns
/// the interleave column's nodes.
fn check_request(m: &Machine, req: &PoliciesRequest) -> Result<IdSet, PlacementError> {
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
    Ok(interleave)
}

/// Rounds every cell runs in: every cell once in table order, then every
/// cell again, so that the policies compared in a row are measured
/// interleaved (drift over the table reaches every column alike) and their
/// samples pooled.
pub const ROUNDS: usize = 2;

/// The rule of one round: the request's budget and repetitions shared
/// over [`ROUNDS`] (at least two samples a round).
fn round_rule(rule: &StopRule) -> StopRule {
    let share = |n: usize| n.div_ceil(ROUNDS).max(2);
    StopRule {
        warmup: rule.warmup,
        min_reps: share(rule.min_reps),
        max_reps: share(rule.max_reps).max(share(rule.min_reps)),
        target_rel_ci: rule.target_rel_ci,
        budget: rule.budget / ROUNDS as u32,
    }
}

/// The cells in table order (workloads, then policies), in [`ROUNDS`]
/// rounds, until all ran or a cancel came: a cell in progress finishes, no
/// new one starts, and a cell keeps the rounds it finished.
fn run_cells(plan: &Plan, progress: &mut dyn FnMut(&str)) -> Result<Vec<Cell>, PlacementError> {
    let mut req = plan.req.clone();
    req.rule = round_rule(&plan.req.rule);
    let round_plan = Plan {
        m: plan.m,
        req: &req,
        interleave: plan.interleave.clone(),
        accessing: plan.accessing.clone(),
    };
    let mut cells: Vec<Cell> = Vec::new();
    for round in 1..=ROUNDS {
        let mut i = 0;
        for &w in &plan.req.workloads {
            for &p in &plan.req.policies {
                if cancel::requested() {
                    return Ok(cells);
                }
                progress(&format!(
                    "{} / {} (round {round} of {ROUNDS})",
                    w.name(),
                    p.name()
                ));
                let cell = run_cell(&round_plan, w, p)?;
                match cells.get_mut(i) {
                    Some(first) => merge_round(first, cell, round),
                    None => cells.push(cell),
                }
                i += 1;
            }
        }
    }
    Ok(cells)
}

/// Pools a later round of a cell into its first: samples and figures, and
/// every placement problem of either round.
fn merge_round(cell: &mut Cell, later: Cell, round: usize) {
    if let (Some(run), Some(more)) = (cell.run.as_mut(), later.run) {
        run.absorb(more, round);
        cell.gbps = Some(run.gbps.clone());
        cell.memory_gbps = Some(run.memory_gbps.clone());
    }
    cell.verified &= later.verified;
    cell.problems.extend(
        later
            .problems
            .into_iter()
            .map(|p| format!("round {round}: {p}")),
    );
}

/// What the reader of the table should know about this machine and
/// request: a degenerate one-node machine, one thread, a remote or CPU-less
/// one-node column.
fn notes(plan: &Plan) -> Vec<String> {
    let (m, req) = (plan.m, plan.req);
    let single_node = plan.interleave.len() == 1;
    let main_node = m.node_of_cpu(req.cpus[0]);
    let mut notes = Vec::new();
    if single_node {
        notes.push(format!(
            "this machine has one memory node (node {}): local, interleave and one-node all put every page there, so the comparison is degenerate; it still runs (a baseline, and a check of the machinery), and differences between policies are noise",
            plan.interleave
        ));
    }
    if req.cpus.len() == 1 {
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
    if req.policies.contains(&PolicyColumn::InterleaveAccessing) && !single_node {
        notes.push(format!(
            "interleave-accessing spreads each workload's pages over the nodes its threads run on (nodes {} for the threaded workloads) rather than over every node: for a one-thread workload that is its own node, the same memory as local",
            plan.accessing
        ));
    }
    notes
}

/// The cells' warnings, each named by its cell, and the cancel warning.
fn warnings(cells: &[Cell]) -> Vec<String> {
    let mut warnings = Vec::new();
    for c in cells {
        for w in &c.warnings {
            warnings.push(format!("{} / {}: {w}", c.workload.name(), c.policy.name()));
        }
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    warnings
}

/// The rows as run.
fn workload_infos(req: &PoliciesRequest) -> Vec<WorkloadInfo> {
    let threads = req.cpus.len();
    req.workloads
        .iter()
        .map(|&w| WorkloadInfo {
            name: w,
            title: w.title(threads),
            description: w.description().into(),
            threads: if w.threaded() { threads } else { 1 },
            aggregate: aggregate_of(w),
        })
        .collect()
}

/// The columns as run.
fn policy_infos(plan: &Plan) -> Vec<PolicyInfo> {
    plan.req
        .policies
        .iter()
        .map(|&p| PolicyInfo {
            name: p,
            title: column_title(p, &plan.interleave, &plan.accessing, plan.req.node),
            // The threaded workloads' policy; the one-thread rows' is their own node.
            memory_policy: plan.memory_policy(Workload::NumaAware, p).to_string(),
        })
        .collect()
}

fn aggregate_of(w: Workload) -> Aggregate {
    match w {
        Workload::Independent => Aggregate::Sum,
        _ => Aggregate::Slowest,
    }
}

/// Runs one cell; a placement error ends the whole table (the capacity of
/// every cell was checked before the first ran).
fn run_cell(plan: &Plan, w: Workload, p: PolicyColumn) -> Result<Cell, PlacementError> {
    let policy = plan.memory_policy(w, p);
    let cpus = plan.workers(w);
    let mut cell = plan.empty_cell(w, p, &policy, &cpus);
    let (breq, opts) = plan.bandwidth_request(w, &policy, &cpus);
    let r = run_bandwidth_with(plan.m, &breq, &opts)?;
    record_run(plan, &mut cell, r);
    Ok(cell)
}

/// Fills a cell from its run: where each worker ran and how fast, where
/// the pages are and how many are local to their worker, who touched them,
/// and every departure from what the cell's policy should give.
fn record_run(plan: &Plan, cell: &mut Cell, r: BandwidthResult) {
    let mut problems = r.verification.problems.clone();
    let mut touchers = IdSet::new();
    let granule = match plan.req.thp {
        // A transparent huge page lands on one node as a whole.
        Thp::On | Thp::System => ((2u64 << 20) / cell.page_size as u64).max(1),
        Thp::Off => 1,
    };
    let (mut local_pages, mut all_pages) = (0u64, 0u64);
    for (i, wr) in r.verification.workers.iter().enumerate() {
        let home = plan.home_nodes(wr);
        let seen: IdSet = wr.seen_cpus.iter().copied().collect();
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
            for msg in buffer_problems(plan, cell, wr, b, granule) {
                problems.push(format!("worker {i} buffer {j}: {msg}"));
            }
        }
    }
    cell.toucher_cpus = touchers.iter().collect();
    if all_pages > 0 {
        cell.local_percent = Some(100.0 * local_pages as f64 / all_pages as f64);
    }
    cell.gbps = Some(r.gbps.clone());
    cell.memory_gbps = Some(r.memory_gbps.clone());
    // The cell reports its own placement problems; the harness's summary
    // of them would say the same twice.
    cell.warnings = r
        .warnings
        .iter()
        .filter(|w| !w.starts_with("placement did not verify"))
        .cloned()
        .collect();
    cell.verified = problems.is_empty();
    cell.problems = problems;
    cell.run = Some(r);
}

/// What the cell's workload and policy say about one buffer that the
/// harness does not check: who touched it first, and (interleave) whether
/// its pages are spread evenly.
fn buffer_problems(
    plan: &Plan,
    cell: &Cell,
    wr: &WorkerReport,
    b: &BufferCheck,
    granule: u64,
) -> Vec<String> {
    let mut problems = Vec::new();
    let want_toucher = match cell.workload {
        Workload::SerialInit => Some(plan.req.cpus[0]),
        Workload::SingleUnpinned => None,
        _ => Some(wr.requested_cpu),
    };
    if let (Some(want), Some(got)) = (want_toucher, b.toucher_cpu) {
        if want != got {
            problems.push(format!("first touched on CPU {got}, not CPU {want}"));
        }
    }
    match cell.policy {
        PolicyColumn::Interleave => {
            problems.extend(uneven(&b.pages_by_node, &plan.interleave, granule));
        }
        PolicyColumn::InterleaveAccessing => {
            let nodes = plan.accessing_nodes(cell.workload);
            problems.extend(uneven(&b.pages_by_node, &nodes, granule));
        }
        _ => {}
    }
    problems
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
