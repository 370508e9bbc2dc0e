//! One run of `numalab report`: measures the parts a report is missing,
//! each within its share of the budget, and keeps the document up to date
//! after every part so that an interrupted or failing run loses nothing it
//! measured.
//!
//! Budgeting. A part's time is the sum of its measurements' budgets plus
//! fixed costs nobody sets (placing and faulting buffers, building pointer
//! chases, starting threads). Those costs are calibrated once at the start
//! (one latency cell and one bandwidth cell with a single sample) and then
//! corrected after every part by the ratio of what the fixed costs really
//! were to what was predicted; each part subtracts its predicted fixed
//! costs from its share before dividing the rest among its measurements.
//! The sweeps run last and keep their deadline exactly, absorbing what the
//! earlier parts over- or under-ran.

use crate::experiments::c2c::{pair_count, run_c2c, C2cFigures, C2cRequest};
use crate::experiments::loaded_latency::{
    default_injectors, measurements, run_loaded_latency, Ladder, LoadedLatencyRequest,
    LoadedLatencyResult,
};
use crate::experiments::matrix::{matrix_nodes, run_matrix, MatrixRequest, MatrixResult};
use crate::experiments::policies::{
    default_array_bytes, run_policies, PoliciesRequest, PolicyColumn, Workload,
};
use crate::experiments::scaling::run_scaling_at;
use crate::experiments::sizes::{run_sizes, sweep_sizes, SizesResult};
use crate::experiments::sweep::{
    findings, run_sweep, Access, Background, Subscription, SweepRequest,
};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::chase::ChasePattern;
use crate::measure::environment::{rfc3339_utc, Environment};
use crate::measure::harness::{
    default_buffer_bytes, run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::pacing::{background_rate, TrafficMix};
use crate::measure::stats::StopRule;
use crate::placement::thread_policy::{compact_order, scatter_order};
use crate::placement::{MemoryPolicy, PlacementError, Thp};
use crate::report::plan::{
    applicable, far_node, home_node, next_share, scaling_counts, RESERVE_SECONDS,
};
use crate::report::results::{
    Mode, PartName, PartStatus, Parts, ReportResults, RunRecord, SweepOutcome, REPORT_SCHEMA,
    REPORT_SCHEMA_VERSION,
};
use crate::report::summary::Summary;
use crate::IdSet;
use std::panic::AssertUnwindSafe;
use std::time::{Duration, Instant, SystemTime};

/// Shortest budget a single measurement gets, seconds: below it the
/// statistics have too few samples to mean anything.
const MIN_MEASUREMENT_S: f64 = 0.04;

/// What the front end sees while a report runs.
pub trait Observer {
    /// Calibration (a few tenths of a second) starts.
    fn calibrating(&mut self) {}
    /// A part starts: its position among the parts of this run and its budget.
    fn part_started(&mut self, part: PartName, index: usize, count: usize, budget_s: f64);
    /// What the running part is doing now.
    fn step(&mut self, part: PartName, what: &str);
    /// A part ended (done or not): the document is up to date and should
    /// be saved now.
    fn part_ended(&mut self, doc: &ReportResults, part: PartName);
}

/// A new, empty report of `m`: every selected part pending (or not
/// applicable, or needing the live machine when `m` is a topology file).
#[allow(clippy::too_many_arguments)]
pub fn new_document(
    m: &Machine,
    environment: Option<Environment>,
    mode: Mode,
    budget_s: f64,
    buffer_bytes: usize,
    selected: &[PartName],
) -> ReportResults {
    let mut parts = Parts::all(PartStatus::Pending, None);
    for p in PartName::ALL {
        let (status, reason) = if !selected.contains(&p) {
            (
                PartStatus::NotSelected,
                Some("left out with --parts".to_string()),
            )
        } else if !m.is_live() {
            let file = match &m.source {
                crate::machine::Source::File { path } => path
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                crate::machine::Source::Live => String::new(),
            };
            (
                PartStatus::NeedsMachine,
                Some(format!(
                    "needs the live machine: this report describes the topology file {file}; run `numalab report` on that machine"
                )),
            )
        } else if let Err(why) = applicable(m, p) {
            (PartStatus::NotApplicable, Some(why))
        } else {
            (PartStatus::Pending, None)
        };
        parts.mark(p, status, reason);
    }
    let mut doc = ReportResults {
        schema: REPORT_SCHEMA.into(),
        schema_version: REPORT_SCHEMA_VERSION.into(),
        command: "report".into(),
        numalab_version: env!("CARGO_PKG_VERSION").into(),
        mode,
        budget_s,
        buffer_bytes: buffer_bytes as u64,
        selected_parts: selected.to_vec(),
        complete: false,
        elapsed_s: 0.0,
        runs: Vec::new(),
        machine: m.clone(),
        environment,
        parts,
        summary: Summary::default(),
        verification: Default::default(),
    };
    doc.refresh_status();
    doc.summary = Summary::of(&doc);
    doc
}

/// Parts of `doc` a run on the live machine can measure: selected parts
/// that are missing (pending, interrupted, out of budget or failed).
pub fn parts_to_measure(doc: &ReportResults) -> Vec<PartName> {
    doc.selected_parts
        .iter()
        .copied()
        .filter(|&p| {
            matches!(
                doc.parts.meta(p).status,
                PartStatus::Pending
                    | PartStatus::Interrupted
                    | PartStatus::OutOfBudget
                    | PartStatus::Failed
            )
        })
        .collect()
}

/// The budget of a `--resume` run without `--budget`: the missing parts'
/// share (by weight) of the report's original budget, at least 5 s.
pub fn resume_budget(doc: &ReportResults) -> f64 {
    let weigh = |parts: &mut dyn Iterator<Item = PartName>| -> f64 {
        parts
            .map(|p| crate::report::plan::weight(p, doc.mode))
            .sum()
    };
    let all = weigh(
        &mut doc
            .selected_parts
            .iter()
            .copied()
            .filter(|&p| doc.parts.meta(p).status != PartStatus::NotApplicable),
    );
    let missing = weigh(&mut parts_to_measure(doc).into_iter());
    (doc.budget_s * missing / all.max(1e-9)).max(5.0)
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunOutcome {
    /// Every selected part is done (or not applicable).
    Complete,
    /// Some part is missing (failed, out of budget); the report says why.
    Incomplete,
    /// Stopped by a signal; the report keeps what was measured.
    Interrupted,
}

/// Fixed costs measured at the start, in seconds, and their correction.
#[derive(Debug, Clone)]
struct Costs {
    /// One latency measurement over a `buffer_bytes` buffer with a single
    /// sample: placing and faulting the buffer, building the chase, checking
    /// the pages.
    latency_cell: f64,
    /// One single-thread read measurement with a single sample.
    bandwidth_cell: f64,
    /// Real over predicted fixed costs of the parts run so far.
    factor: f64,
}

/// What a part function hands back besides its result.
struct Spent {
    /// Seconds of measurement budgets the part planned.
    measuring: f64,
    /// Seconds of fixed costs the part predicted.
    fixed: f64,
    note: Option<String>,
}

struct Ctx<'a> {
    m: &'a Machine,
    mode: Mode,
    isa: Isa,
    size: usize,
    costs: Costs,
    obs: &'a mut dyn Observer,
    part: PartName,
}

impl Ctx<'_> {
    fn step(&mut self, what: &str) {
        let p = self.part;
        self.obs.step(p, what);
    }

    /// A stop rule with `seconds` of budget.
    fn rule(&self, seconds: f64) -> StopRule {
        StopRule {
            warmup: 1,
            min_reps: 3,
            max_reps: 1000,
            target_rel_ci: 0.01,
            budget: Duration::from_secs_f64(seconds.max(MIN_MEASUREMENT_S)),
        }
    }

    /// `budget` less `fixed` seconds, shared by `n` measurements.
    fn per_measurement(&self, budget: f64, fixed: f64, n: usize, max: f64) -> f64 {
        ((budget - fixed) / n.max(1) as f64).clamp(MIN_MEASUREMENT_S, max)
    }
}

/// Measures the parts `doc` is missing on the live machine `m`, within
/// `budget_s` seconds, saving through `obs` after every part.
pub fn run(
    m: &Machine,
    doc: &mut ReportResults,
    budget_s: f64,
    isa: Isa,
    command_line: Vec<String>,
    obs: &mut dyn Observer,
) -> RunOutcome {
    let t0 = Instant::now();
    let todo = parts_to_measure(doc);
    let run_no = doc.runs.len() as u32 + 1;
    let env_now = Environment::capture();
    let environment_changes = match &doc.environment {
        Some(first) if run_no > 1 => environment_changes(first, &env_now),
        _ => Vec::new(),
    };
    if doc.environment.is_none() {
        doc.environment = Some(env_now);
    }
    doc.runs.push(RunRecord {
        run: run_no,
        resumed: run_no > 1,
        command_line,
        started_utc: rfc3339_utc(SystemTime::now()),
        finished_utc: None,
        budget_s,
        elapsed_s: 0.0,
        outcome: "running".into(),
        measured: Vec::new(),
        environment_changes,
    });
    for &p in &todo {
        doc.parts.mark(p, PartStatus::Pending, None);
    }
    let size = doc.buffer_bytes as usize;
    let mut costs = None;
    if !todo.is_empty() && !cancel::requested() {
        obs.calibrating();
        let home = home_node(m).unwrap_or(0);
        costs = Some(calibrate(m, fit(home, 1, size, 0.6), isa));
    }
    let mut costs = costs.unwrap_or(Costs {
        latency_cell: 0.3,
        bandwidth_cell: 0.1,
        factor: 1.0,
    });
    let mut interrupted = false;
    for (i, &p) in todo.iter().enumerate() {
        if cancel::requested() {
            interrupted = true;
            doc.parts.mark(
                p,
                PartStatus::Interrupted,
                Some("not started: the report was interrupted (Ctrl-C or SIGTERM) before this part; `numalab report --resume` measures it".into()),
            );
            continue;
        }
        let left = budget_s - t0.elapsed().as_secs_f64() - RESERVE_SECONDS;
        let share = next_share(p, &todo[i + 1..], doc.mode, left);
        if share < min_start(p) {
            doc.parts.mark(
                p,
                PartStatus::OutOfBudget,
                Some(format!(
                    "not started: {:.1} s of the {budget_s:.0} s budget were left for it and it needs at least {:.1} s; rerun with --resume (and --budget) to measure it",
                    share.max(0.0),
                    min_start(p)
                )),
            );
            obs.part_ended(doc, p);
            continue;
        }
        obs.part_started(p, i, todo.len(), share);
        doc.parts
            .start(p, share, run_no, rfc3339_utc(SystemTime::now()));
        let t_part = Instant::now();
        let mut ctx = Ctx {
            m,
            mode: doc.mode,
            isa,
            size,
            costs: costs.clone(),
            obs: &mut *obs,
            part: p,
        };
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
            measure_part(&mut ctx, p, share, &mut doc.parts)
        }));
        let elapsed = t_part.elapsed().as_secs_f64();
        match outcome {
            _ if cancel::requested() => {
                interrupted = true;
                doc.parts.mark(
                    p,
                    PartStatus::Interrupted,
                    Some(format!(
                        "interrupted (Ctrl-C or SIGTERM) after {elapsed:.1} s of this part; what it had measured was dropped; `numalab report --resume` measures it again"
                    )),
                );
            }
            Ok(Ok(spent)) => {
                let real_fixed = (elapsed - spent.measuring).max(0.0);
                if spent.fixed > 0.01 {
                    let ratio = (real_fixed / spent.fixed).clamp(0.3, 5.0);
                    costs.factor = (costs.factor + ratio) / 2.0;
                }
                doc.parts.set_reason(p, spent.note);
                if let Some(r) = doc.runs.last_mut() {
                    r.measured.push(p);
                }
            }
            Ok(Err(e)) => {
                doc.parts
                    .mark(p, PartStatus::Failed, Some(format!("failed: {e}")));
            }
            Err(panic) => {
                let msg = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown".into());
                doc.parts.mark(
                    p,
                    PartStatus::Failed,
                    Some(format!(
                        "failed: internal error: {msg} (please report this)"
                    )),
                );
            }
        }
        doc.parts.set_elapsed(p, elapsed);
        finish_document(doc, t0, false);
        obs.part_ended(doc, p);
    }
    finish_document(doc, t0, true);
    let outcome = if interrupted {
        RunOutcome::Interrupted
    } else if doc.complete {
        RunOutcome::Complete
    } else {
        RunOutcome::Incomplete
    };
    if let Some(r) = doc.runs.last_mut() {
        r.outcome = match outcome {
            RunOutcome::Complete => "complete",
            RunOutcome::Incomplete => "incomplete",
            RunOutcome::Interrupted => "interrupted",
        }
        .into();
    }
    outcome
}

/// Updates the run record, totals, status and summary of `doc`.
fn finish_document(doc: &mut ReportResults, t0: Instant, finished: bool) {
    let elapsed = t0.elapsed().as_secs_f64();
    if let Some(r) = doc.runs.last_mut() {
        r.elapsed_s = elapsed;
        if finished {
            r.finished_utc = Some(rfc3339_utc(SystemTime::now()));
        }
    }
    doc.elapsed_s = doc.runs.iter().map(|r| r.elapsed_s).sum();
    doc.refresh_status();
    doc.summary = Summary::of(doc);
}

/// Seconds below which a part is not started (its fixed costs alone take
/// about that long on a small machine).
fn min_start(p: PartName) -> f64 {
    match p {
        PartName::Sweep | PartName::SweepBackground => 0.8,
        PartName::Sizes | PartName::Policies => 0.8,
        _ => 0.4,
    }
}

/// Environment fields that differ between two captures, as sentences.
fn environment_changes(a: &Environment, b: &Environment) -> Vec<String> {
    let va = serde_json::to_value(a).unwrap_or_default();
    let vb = serde_json::to_value(b).unwrap_or_default();
    let mut out = Vec::new();
    for &key in crate::report::compare::ENV_KEYS.iter().chain(&["cgroup"]) {
        if va.get(key) != vb.get(key) {
            out.push(format!(
                "{key}: {} then, {} in this run",
                va.get(key).map(|v| v.to_string()).unwrap_or("-".into()),
                vb.get(key).map(|v| v.to_string()).unwrap_or("-".into())
            ));
        }
    }
    out
}

/// One latency and one bandwidth cell with a single sample each: the fixed
/// costs every later measurement of that kind pays.
fn calibrate(m: &Machine, size: usize, isa: Isa) -> Costs {
    let one = StopRule {
        warmup: 0,
        min_reps: 1,
        max_reps: 1,
        target_rel_ci: 1.0,
        budget: Duration::ZERO,
    };
    let cpu = home_cpu(m).unwrap_or(0);
    let t = Instant::now();
    let lat = run_latency(
        m,
        &LatencyRequest {
            cpu,
            policy: MemoryPolicy::Local,
            pattern: ChasePattern::Random,
            chains: 1,
            buffer_bytes: size,
            thp: Some(Thp::Off),
            hugetlb: false,
            rule: one.clone(),
        },
    );
    let latency_cell = if lat.is_ok() {
        t.elapsed().as_secs_f64()
    } else {
        0.3
    };
    let t = Instant::now();
    let bw = run_bandwidth(
        m,
        &BandwidthRequest {
            kernel: BandwidthKernel::Read,
            isa,
            workers: vec![WorkerPlan {
                cpu,
                policy: MemoryPolicy::Local,
                toucher: None,
            }],
            buffer_bytes: size,
            thp: Some(Thp::On),
            rule: one,
        },
    );
    let bandwidth_cell = if bw.is_ok() {
        t.elapsed().as_secs_f64()
    } else {
        0.1
    };
    Costs {
        latency_cell,
        bandwidth_cell,
        factor: 1.0,
    }
}

/// Bytes per buffer so that `count` buffers of at most `wanted` bytes fit
/// in `share` of node `node`'s free memory now (2 MiB multiples, at least
/// 2 MiB): a report must never push a node into the OOM killer, and small
/// nodes (a 512 MiB guest node, an HBM or CXL tier) get smaller buffers.
fn fit(node: u32, count: usize, wanted: usize, share: f64) -> usize {
    const STEP: usize = 2 << 20;
    let free = crate::placement::sys::node_free_bytes(node).unwrap_or(u64::MAX) as f64;
    let cap = (free * share / count.max(1) as f64).min(usize::MAX as f64) as usize;
    wanted.min(cap / STEP * STEP).max(STEP)
}

/// [`fit`] on every node of `nodes`: the smallest.
fn fit_all(nodes: &[u32], count: usize, wanted: usize, share: f64) -> usize {
    nodes
        .iter()
        .map(|&n| fit(n, count, wanted, share))
        .min()
        .unwrap_or(wanted)
}

/// The most allowed CPUs any node has.
fn max_cpus_per_node(m: &Machine) -> usize {
    m.cpu_nodes()
        .iter()
        .map(|n| m.allowed_cpus_of(n).len())
        .max()
        .unwrap_or(1)
}

/// The first allowed CPU of the home node.
fn home_cpu(m: &Machine) -> Option<u32> {
    let n = home_node(m)?;
    m.allowed_cpus_of(n).first()
}

/// Runs part `p` within `budget` seconds and stores its result in `parts`.
fn measure_part(
    ctx: &mut Ctx,
    p: PartName,
    budget: f64,
    parts: &mut Parts,
) -> Result<Spent, PlacementError> {
    macro_rules! store {
        ($field:ident, $value:expr, $verified:expr, $spent:expr) => {{
            let v = $value;
            parts.$field.verified = Some($verified(&v));
            parts.$field.result = Some(v);
            parts.$field.status = PartStatus::Done;
            Ok($spent)
        }};
    }
    match p {
        PartName::LatencyMatrix => {
            let (r, s) = matrix(ctx, budget, true)?;
            store!(latency_matrix, r, |r: &MatrixResult| r.verified, s)
        }
        PartName::BandwidthMatrix => {
            let (r, s) = matrix(ctx, budget, false)?;
            store!(bandwidth_matrix, r, |r: &MatrixResult| r.verified, s)
        }
        PartName::Sizes => {
            let (r, s) = sizes(ctx, budget)?;
            store!(
                sizes,
                r,
                |r: &SizesResult| r.points.iter().all(|p| p.verified),
                s
            )
        }
        PartName::Scaling => {
            let (r, s) = scaling(ctx, budget)?;
            store!(
                scaling,
                r,
                |r: &crate::experiments::scaling::ScalingResult| r
                    .packed
                    .iter()
                    .chain(&r.spread)
                    .all(|p| p.verified),
                s
            )
        }
        PartName::C2c => {
            let (r, s) = c2c(ctx, budget)?;
            store!(
                c2c,
                r,
                |r: &crate::experiments::c2c::C2cResult| r.verification.verified,
                s
            )
        }
        PartName::LoadedLatencyLocal => {
            let node = home_node(ctx.m).ok_or_else(no_cpu_node)?;
            let (r, s) = loaded_latency(ctx, budget, node)?;
            store!(
                loaded_latency_local,
                r,
                |r: &LoadedLatencyResult| r.verification.verified,
                s
            )
        }
        PartName::LoadedLatencyFar => {
            let node = far_node(ctx.m).ok_or_else(|| {
                PlacementError::Invalid("this machine has no remote memory node".into())
            })?;
            let (r, s) = loaded_latency(ctx, budget, node)?;
            store!(
                loaded_latency_far,
                r,
                |r: &LoadedLatencyResult| r.verification.verified,
                s
            )
        }
        PartName::Policies => {
            let (r, s) = policies(ctx, budget)?;
            store!(
                policies,
                r,
                |r: &crate::experiments::policies::PoliciesResult| r.verified,
                s
            )
        }
        PartName::Sweep => {
            let (r, s) = sweep(ctx, budget, false)?;
            store!(sweep, r, |r: &SweepOutcome| r.sweep.verified, s)
        }
        PartName::SweepBackground => {
            let (r, s) = sweep(ctx, budget, true)?;
            store!(sweep_background, r, |r: &SweepOutcome| r.sweep.verified, s)
        }
    }
}

fn no_cpu_node() -> PlacementError {
    PlacementError::Invalid("no allowed node has CPUs".into())
}

/// The latency (`latency` true) or bandwidth matrix.
fn matrix(
    ctx: &mut Ctx,
    budget: f64,
    latency: bool,
) -> Result<(MatrixResult, Spent), PlacementError> {
    let (rows, cols) = matrix_nodes(ctx.m);
    let cells = rows.len() * cols.len();
    let all_threads = !latency && ctx.mode == Mode::Full;
    let threads_per_cell = if all_threads {
        max_cpus_per_node(ctx.m)
    } else {
        1
    };
    let per_cell_fixed = if latency {
        ctx.costs.latency_cell
    } else {
        ctx.costs.bandwidth_cell * (1.0 + 0.3 * (threads_per_cell as f64 - 1.0))
    } * ctx.costs.factor;
    let fixed = per_cell_fixed * cells as f64;
    let per = ctx.per_measurement(budget, fixed, cells, 5.0);
    let bytes = fit_all(&cols, threads_per_cell, ctx.size, 0.6);
    let req = MatrixRequest {
        latency,
        bandwidth: !latency,
        all_threads_per_node: all_threads,
        kernel: BandwidthKernel::Read,
        isa: ctx.isa,
        pattern: ChasePattern::Random,
        latency_bytes: bytes,
        bandwidth_bytes: bytes,
        rule: ctx.rule(per),
    };
    let r = run_matrix(ctx.m, &req, &mut |w| ctx.step(w))?;
    Ok((
        r,
        Spent {
            measuring: per * cells as f64,
            fixed,
            note: None,
        },
    ))
}

/// Sizes of the sweep for a mode: every size of `sweep_sizes` (two per
/// octave) for --full, one per octave by default, about seven for --quick;
/// the smallest and the largest always.
pub fn report_sizes(m: &Machine, max_bytes: u64, mode: Mode) -> Vec<u64> {
    let all = sweep_sizes(m, max_bytes);
    let keep = match mode {
        Mode::Full => return all,
        Mode::Default => all.len().div_ceil(2),
        Mode::Quick => 7,
    };
    if all.len() <= keep {
        return all;
    }
    let mut out: Vec<u64> = (0..keep)
        .map(|i| all[(i * (all.len() - 1) + (keep - 1) / 2) / (keep - 1).max(1)])
        .collect();
    out.dedup();
    out
}

/// The working-set sweep, one size at a time so that the per-measurement
/// budget follows the time really spent.
fn sizes(ctx: &mut Ctx, budget: f64) -> Result<(SizesResult, Spent), PlacementError> {
    let cpu = home_cpu(ctx.m).ok_or_else(no_cpu_node)?;
    let home = home_node(ctx.m).ok_or_else(no_cpu_node)?;
    let sizes = report_sizes(ctx.m, fit(home, 1, ctx.size, 0.6) as u64, ctx.mode);
    let t0 = Instant::now();
    // Fixed cost of one size: three bandwidth kernels and a chase, scaled
    // by the working set (the calibration used `size` bytes).
    let unit = 3.0 * ctx.costs.bandwidth_cell + ctx.costs.latency_cell;
    let fixed_of = |s: u64, size: usize| 0.01 + unit * s as f64 / size as f64;
    let mut factor = ctx.costs.factor;
    let mut out: Option<SizesResult> = None;
    let mut measuring = 0.0;
    let mut fixed_total = 0.0;
    for (i, &s) in sizes.iter().enumerate() {
        if cancel::requested() {
            break;
        }
        let left = budget - t0.elapsed().as_secs_f64();
        let fixed_left: f64 = sizes[i..]
            .iter()
            .map(|&x| fixed_of(x, ctx.size))
            .sum::<f64>()
            * factor;
        let per = ctx.per_measurement(left, fixed_left, 4 * (sizes.len() - i), 2.0);
        let t = Instant::now();
        let r = run_sizes(ctx.m, cpu, &[s], ctx.isa, &ctx.rule(per), &mut |w| {
            ctx.obs.step(PartName::Sizes, w)
        })?;
        let took = t.elapsed().as_secs_f64();
        let predicted = fixed_of(s, ctx.size) * factor;
        let real = (took - 4.0 * per).max(0.0);
        if predicted > 0.005 {
            factor = (factor + factor * (real / predicted).clamp(0.3, 5.0)) / 2.0;
        }
        measuring += 4.0 * per;
        fixed_total += predicted;
        match &mut out {
            None => out = Some(r),
            Some(o) => {
                o.points.extend(r.points);
                o.warnings.extend(r.warnings);
            }
        }
    }
    let r = out.ok_or_else(|| PlacementError::Invalid("no working-set size to measure".into()))?;
    Ok((
        r,
        Spent {
            measuring,
            fixed: fixed_total,
            note: None,
        },
    ))
}

/// Packed vs spread scaling of the read kernel with local memory.
fn scaling(
    ctx: &mut Ctx,
    budget: f64,
) -> Result<(crate::experiments::scaling::ScalingResult, Spent), PlacementError> {
    let counts = scaling_counts(ctx.m);
    let packed = compact_order(ctx.m, &ctx.m.allowed_cpus);
    let spread = scatter_order(ctx.m, &ctx.m.allowed_cpus);
    // Spread runs only where it differs from packed.
    let points: Vec<usize> = counts
        .iter()
        .flat_map(|&n| {
            let differs = n > 1 && packed[..n] != spread[..n];
            std::iter::once(n).chain(differs.then_some(n))
        })
        .collect();
    let fixed: f64 = points
        .iter()
        .map(|&n| ctx.costs.bandwidth_cell * (1.0 + 0.3 * (n as f64 - 1.0)))
        .sum::<f64>()
        * ctx.costs.factor;
    let per = ctx.per_measurement(budget, fixed, points.len(), 5.0);
    let nodes: Vec<u32> = ctx.m.cpu_nodes().iter().collect();
    let bytes = fit_all(&nodes, max_cpus_per_node(ctx.m), ctx.size, 0.6);
    let r = run_scaling_at(
        ctx.m,
        BandwidthKernel::Read,
        ctx.isa,
        bytes,
        &counts,
        &ctx.rule(per),
        &mut |w| ctx.obs.step(PartName::Scaling, w),
    )?;
    Ok((
        r,
        Spent {
            measuring: per * points.len() as f64,
            fixed,
            note: None,
        },
    ))
}

/// The core-to-core matrix over every CPU, or a subset when every pair
/// does not fit.
fn c2c(
    ctx: &mut Ctx,
    budget: f64,
) -> Result<(crate::experiments::c2c::C2cResult, Spent), PlacementError> {
    let (min_pair, figures) = match ctx.mode {
        Mode::Quick => (
            0.03,
            C2cFigures {
                modified: true,
                clean: false,
                false_sharing: true,
            },
        ),
        Mode::Default => (0.06, C2cFigures::default()),
        Mode::Full => (0.15, C2cFigures::default()),
    };
    let per_pair_fixed = 0.008 * ctx.costs.factor;
    let cpus = crate::report::plan::c2c_cpus(ctx.m, budget, min_pair + per_pair_fixed);
    let pairs = pair_count(cpus.len());
    let per = (budget / pairs.max(1) as f64 - per_pair_fixed).clamp(0.02, 2.0);
    let all = cpus.len() == ctx.m.allowed_cpus.len();
    let note = (!all).then(|| {
        format!(
            "{} of {} CPUs (every pair of all would not fit the budget at {min_pair} s per pair): {}",
            cpus.len(),
            ctx.m.allowed_cpus.len(),
            cpus.iter().copied().collect::<IdSet>()
        )
    });
    let req = C2cRequest {
        cpus,
        figures,
        rule: StopRule {
            warmup: 1,
            min_reps: 3,
            max_reps: 1000,
            target_rel_ci: 0.01,
            budget: Duration::from_secs_f64(per),
        },
    };
    let r = run_c2c(ctx.m, &req, &mut |w| ctx.obs.step(PartName::C2c, w))?;
    Ok((
        r,
        Spent {
            measuring: per * pairs as f64,
            fixed: per_pair_fixed * pairs as f64,
            note,
        },
    ))
}

/// Loaded latency from the home node's first CPU to memory on `node`, with
/// every other usable CPU injecting traffic into the same node.
fn loaded_latency(
    ctx: &mut Ctx,
    budget: f64,
    node: u32,
) -> Result<(LoadedLatencyResult, Spent), PlacementError> {
    let cpu = home_cpu(ctx.m).ok_or_else(no_cpu_node)?;
    let injectors = default_injectors(ctx.m, cpu);
    if injectors.is_empty() {
        return Err(PlacementError::Invalid(
            "no CPU left for injector threads".into(),
        ));
    }
    let mixes: Vec<TrafficMix> = match ctx.mode {
        Mode::Quick => vec![TrafficMix::Read],
        Mode::Default => vec![
            TrafficMix::Read,
            TrafficMix::ReadWrite {
                reads: 2,
                writes: 1,
            },
            TrafficMix::WriteNt,
        ],
        Mode::Full => TrafficMix::CLASSIC.to_vec(),
    };
    // The chase and every injector buffer are on `node`: together they
    // take at most 60% of its free memory.
    let chase_bytes = fit(node, 1, ctx.size, 0.2);
    let injector_bytes = fit(
        node,
        injectors.len(),
        (ctx.size / injectors.len())
            .max(ctx.size.min(64 << 20))
            .next_multiple_of(2 << 20),
        0.4,
    );
    let mut req = LoadedLatencyRequest {
        cpu,
        policy: MemoryPolicy::Bind {
            nodes: IdSet::single(node),
        },
        pattern: ChasePattern::Random,
        buffer_bytes: chase_bytes,
        thp: Some(Thp::Off),
        injector_cpus: injectors.clone(),
        injector_policy: None,
        injector_buffer_bytes: injector_bytes,
        injector_thp: Some(Thp::On),
        mixes,
        ladder: Ladder::Auto,
        rule: ctx.rule(0.1),
        settle: Duration::from_millis(20),
    };
    let n = measurements(&req);
    let fixed = (ctx.costs.latency_cell
        + ctx.costs.bandwidth_cell
            * injectors.len() as f64
            * (injector_bytes as f64 / ctx.size as f64)
            * 0.5
        + n as f64 * 0.03)
        * ctx.costs.factor;
    let per = ctx.per_measurement(budget, fixed, n, 2.0);
    req.rule = ctx.rule(per);
    let part = ctx.part;
    let r = run_loaded_latency(ctx.m, &req, &mut |w| ctx.obs.step(part, w))?;
    Ok((
        r,
        Spent {
            measuring: per * n as f64,
            fixed,
            note: None,
        },
    ))
}

/// The policy comparison: every workload under local, interleave and one node.
fn policies(
    ctx: &mut Ctx,
    budget: f64,
) -> Result<(crate::experiments::policies::PoliciesResult, Spent), PlacementError> {
    let cpus = scatter_order(ctx.m, &ctx.m.allowed_cpus);
    let main = *cpus.first().ok_or_else(no_cpu_node)?;
    let node = ctx
        .m
        .node_of_cpu(main)
        .filter(|&n| ctx.m.memory_nodes().contains(n))
        .or_else(|| ctx.m.memory_nodes().first())
        .ok_or_else(|| PlacementError::Invalid("no allowed node has memory".into()))?;
    let kernel = BandwidthKernel::Triad;
    let wanted = if ctx.size == default_buffer_bytes(ctx.m) {
        default_array_bytes(ctx.m, kernel)
    } else {
        (ctx.size / 6).max(2 << 20).next_multiple_of(2 << 20)
    };
    // The one-node column (and main-thread first touch) put every thread's
    // arrays on one node.
    let array = fit(node, cpus.len() * kernel.arrays(), wanted, 0.6);
    let workloads = match ctx.mode {
        Mode::Quick => vec![
            Workload::SinglePinned,
            Workload::SerialInit,
            Workload::NumaAware,
        ],
        _ => Workload::ALL.to_vec(),
    };
    let cells = workloads.len() * PolicyColumn::ALL.len();
    let threads = cpus.len() as f64;
    let per_cell_fixed = 0.01
        + ctx.costs.bandwidth_cell
            * (3.0 * array as f64 / ctx.size as f64)
            * (1.0 + 0.5 * (threads - 1.0));
    let fixed = per_cell_fixed * cells as f64 * ctx.costs.factor;
    let per = ctx.per_measurement(budget, fixed, cells, 3.0);
    let req = PoliciesRequest {
        kernel,
        isa: ctx.isa,
        cpus: cpus.clone(),
        thread_policy: "scatter".into(),
        unpinned_cpus: ctx.m.allowed_cpus.clone(),
        node,
        buffer_bytes: array,
        thp: Thp::Off,
        rule: ctx.rule(per),
        workloads,
        policies: PolicyColumn::ALL.to_vec(),
    };
    let r = run_policies(ctx.m, &req, &mut |w| ctx.obs.step(PartName::Policies, w))?;
    Ok((
        r,
        Spent {
            measuring: per * cells as f64,
            fixed,
            note: None,
        },
    ))
}

/// The folded placement sweep, idle or under background load, with a
/// deadline of `budget` seconds.
fn sweep(
    ctx: &mut Ctx,
    budget: f64,
    background: bool,
) -> Result<(SweepOutcome, Spent), PlacementError> {
    let cpus = ctx.m.allowed_cpus.clone();
    let threads = if cpus.len() >= 2 { vec![1, 2] } else { vec![1] };
    let backgrounds = if background {
        let levels: &[&str] = match ctx.mode {
            Mode::Full => &["low", "medium", "high", "very-high"],
            _ => &["high"],
        };
        levels
            .iter()
            .map(|&l| {
                Ok(Some(Background {
                    level: l.into(),
                    bytes_per_second: background_rate(l).map_err(PlacementError::Invalid)?,
                    subscription: Subscription::Full,
                    cpus: None,
                }))
            })
            .collect::<Result<Vec<_>, PlacementError>>()?
    } else {
        vec![None]
    };
    let mem_list: Vec<u32> = ctx.m.memory_nodes().iter().collect();
    // Each memory node holds one buffer per foreground thread, and each
    // node's CPUs may carry a background thread with a local buffer.
    let bytes = fit_all(
        &mem_list,
        threads.iter().max().copied().unwrap_or(1) + max_cpus_per_node(ctx.m),
        ctx.size,
        0.6,
    );
    let mem: IdSet = mem_list.into_iter().collect();
    let req = SweepRequest {
        threads,
        cpus,
        mem_nodes: mem,
        accesses: vec![Access::Read, Access::Write],
        read_kernel: BandwidthKernel::LineRead,
        write_kernel: BandwidthKernel::LineWrite,
        isa: ctx.isa,
        buffer_bytes: bytes,
        thp: Some(Thp::On),
        full: false,
        budget: Some(Duration::from_secs_f64(budget)),
        rule: StopRule {
            warmup: 1,
            min_reps: 3,
            max_reps: 50,
            target_rel_ci: 0.01,
            budget: Duration::from_secs_f64(2.0),
        },
        backgrounds,
        background_bytes: bytes,
        full_limit: 100_000,
        min_sample_s: 0.02,
    };
    let part = ctx.part;
    let r = run_sweep(ctx.m, &req, &mut |_, _, w| ctx.obs.step(part, w))?;
    let f = findings(&r);
    Ok((
        SweepOutcome {
            sweep: r,
            findings: f,
        },
        // The sweep keeps its own deadline: nothing to learn from it.
        Spent {
            measuring: budget,
            fixed: 0.0,
            note: None,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    #[test]
    fn report_sizes_keep_both_ends() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let all = sweep_sizes(&m, 128 << 20);
        for mode in [Mode::Quick, Mode::Default, Mode::Full] {
            let v = report_sizes(&m, 128 << 20, mode);
            assert_eq!(v.first(), all.first(), "{mode:?}");
            assert_eq!(v.last(), all.last(), "{mode:?}");
            assert!(v.windows(2).all(|w| w[0] < w[1]), "{mode:?} {v:?}");
        }
        assert_eq!(report_sizes(&m, 128 << 20, Mode::Full), all);
        assert_eq!(report_sizes(&m, 128 << 20, Mode::Quick).len(), 7);
        assert_eq!(
            report_sizes(&m, 128 << 20, Mode::Default).len(),
            all.len().div_ceil(2)
        );
    }

    #[test]
    fn resume_budget_is_the_missing_parts_share() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut doc = new_document(&m, None, Mode::Default, 100.0, 64 << 20, &PartName::ALL);
        for p in PartName::ALL {
            doc.parts.mark(p, PartStatus::Pending, None);
        }
        assert!((resume_budget(&doc) - 100.0).abs() < 1e-9);
        // Everything but the sweeps done: their weights' share (22 of 100).
        for p in &PartName::ALL[..8] {
            doc.parts.mark(*p, PartStatus::Done, None);
        }
        assert!(
            (resume_budget(&doc) - 22.0).abs() < 1e-9,
            "{}",
            resume_budget(&doc)
        );
        // Never below 5 s.
        doc.parts.mark(PartName::Sweep, PartStatus::Done, None);
        doc.budget_s = 10.0;
        assert_eq!(resume_budget(&doc), 5.0);
    }

    #[test]
    fn a_topology_file_report_needs_the_machine() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let doc = new_document(&m, None, Mode::Default, 240.0, 64 << 20, &PartName::ALL);
        for (p, s) in doc.parts.statuses() {
            assert_eq!(s, PartStatus::NeedsMachine, "{p:?}");
        }
        assert!(!doc.complete);
        assert!(parts_to_measure(&doc).is_empty());
        let why = doc.parts.meta(PartName::Sizes).reason.unwrap();
        assert!(why.contains("qemu-ring4-cpuless-hmat.xml"), "{why}");
        assert_eq!(doc.summary.node_count, 5);
    }
}
