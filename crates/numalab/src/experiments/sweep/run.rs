//! Running a sweep: the foreground buffers placed once, each case timed with
//! its threads pinned (under its background load when there is one), the
//! cases a budget can pay for, and the checks that make a result trustworthy.

use super::space::{
    coverage_order, hop_class_count, plan, Access, PlannedCase, SweepSpace, ThreadCase,
};
use super::{
    Background, BufferCheckLite, CaseResult, CaseTime, SweepBuffer, SweepProgress, SweepRequest,
    SweepResult, SweepRun, ThreadResult, TwinPair, NORMALIZATION, NORMALIZATION_LOADED,
};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::environment::cache_fit_warning;
use crate::measure::kernels::{run_pass, BandwidthKernel, ByteCount};
use crate::measure::memory_traffic::{self, MemoryTraffic};
use crate::measure::pacing::{PacedLoad, PacedReport, PacedSpec, TrafficMix};
use crate::measure::sample_clock::{Gate, SampleClock};
use crate::measure::stats::{measure, StopRule};
use crate::placement::{
    check_plan, pin_current_thread, sys, BufferDemand, BufferSpec, MemoryPolicy, PlacedBuffer,
    PlacementError,
};
use crate::IdSet;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Per thread of a case: median seconds per pass and the CPUs it was seen on.
pub(super) type ThreadTimes = Vec<(f64, Vec<u32>)>;

/// One thread count's cases: (threads, total cases, planned cases).
type Plan = (usize, u64, Vec<PlannedCase>);

/// Runs a sweep. `progress` gets (done, total, label) after every case.
pub fn run_sweep(
    m: &Machine,
    req: &SweepRequest,
    progress: SweepProgress,
) -> Result<SweepResult, PlacementError> {
    let t_start = Instant::now();
    req.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    let space = SweepSpace::new(m, &req.cpus, &req.mem_nodes, &req.accesses)
        .map_err(PlacementError::Invalid)?;
    let plans = plan(&space, req).map_err(PlacementError::Invalid)?;
    let max_threads = req.threads.iter().copied().max().unwrap_or(1);
    check_buffers_fit(m, req)?;
    let (bufs, buffers) = place_buffers(m, req, space.mem_nodes(), max_threads)?;
    // Cancelled during the set-up: no case may run without its buffers.
    let setup_cut = bufs.len() < max_threads;
    let afford = affordable(req, &plans, t_start.elapsed().as_secs_f64());
    let mut sweep = Sweep {
        m,
        req,
        space: &space,
        twins: afford.twins,
        all_verified: buffers.iter().all(|b| b.at_start.verified),
        bufs,
        buffers,
        rule: afford.rule,
        deadline: req.budget.map(|b| t_start + b),
        progress,
        done: 0,
        total_to_run: (afford.take.iter().sum::<usize>()
            * req.backgrounds.len()
            * if afford.twins { 1 + TWIN_RUNS } else { 1 }) as u64,
        case_seconds_sum: 0.0,
        cases_timed: 0,
        warnings: afford
            .warning
            .into_iter()
            .chain(cache_fit_warning(
                m,
                req.buffer_bytes as u64,
                "each sweep buffer",
            ))
            .collect(),
    };
    let mut runs = Vec::new();
    // Memory-controller counts over all the cases (the whole machine's).
    let counting = memory_traffic::begin();
    'runs: for bg in &req.backgrounds {
        for (p, &k) in plans.iter().zip(&afford.take) {
            if setup_cut || cancel::requested() {
                break 'runs;
            }
            runs.push(sweep.run_plan(bg.as_ref(), p, k)?);
        }
    }
    let memory_traffic = match counting {
        Ok(c) => c.finish(),
        Err(why) => MemoryTraffic::assumed(why),
    };
    normalize(&mut runs);
    if cancel::requested() {
        sweep.warnings.push(cancel::WARNING.to_string());
    }
    sweep.check_buffers_again()?;
    Ok(SweepResult {
        folded: !req.full,
        node_automorphisms: u64::try_from(space.symmetry_order().saturating()).unwrap_or(u64::MAX),
        node_symmetry_order: space.symmetry_order().to_string(),
        machine_symmetry_order: space.machine_symmetry_order().to_string(),
        cpus: space.cpu_ids(),
        mem_nodes: space.mem_nodes().to_vec(),
        accesses: req.accesses.clone(),
        read_kernel: req.read_kernel.name().into(),
        write_kernel: req.write_kernel.name().into(),
        buffer_bytes: req.buffer_bytes as u64,
        budget_s: req.budget.map(|b| b.as_secs_f64()),
        runs,
        buffers: sweep.buffers,
        verified: sweep.all_verified,
        warnings: sweep.warnings,
        elapsed_s: t_start.elapsed().as_secs_f64(),
        memory_traffic,
    })
}

/// Normalises every case as the classic study did ([`NORMALIZATION`]):
/// its threads' total time over the fastest idle case's of the same thread
/// count, so that load shows as values above 1; a thread count run only
/// under load is normalised to its fastest case under load
/// ([`NORMALIZATION_LOADED`]).
pub fn normalize(runs: &mut [SweepRun]) {
    let fastest = |runs: &[SweepRun], threads: usize, idle_only: bool| {
        runs.iter()
            .filter(|r| r.threads == threads && (!idle_only || r.background.is_none()))
            .flat_map(|r| r.cases.iter().map(|c| c.total_seconds))
            .filter(|x| x.is_finite() && *x > 0.0)
            .fold(f64::INFINITY, f64::min)
    };
    let counts: BTreeSet<usize> = runs.iter().map(|r| r.threads).collect();
    for t in counts {
        let idle = fastest(runs, t, true);
        let (base, rule) = if idle.is_finite() {
            (idle, NORMALIZATION)
        } else {
            (fastest(runs, t, false), NORMALIZATION_LOADED)
        };
        for r in runs.iter_mut().filter(|r| r.threads == t) {
            r.normalization = rule.into();
            for c in r.cases.iter_mut() {
                c.normalized = c.total_seconds / base;
            }
        }
    }
}

/// Refuses buffers too small to stream, or more buffers than free memory:
/// one per (thread index, memory node), bound there, alive for the whole
/// sweep, and under each background its threads' local buffers besides.
/// [`run_sweep`] checks it first; a caller that reports the plan before
/// running can check it before that.
pub fn check_buffers_fit(m: &Machine, req: &SweepRequest) -> Result<(), PlacementError> {
    let max_threads = req.threads.iter().copied().max().unwrap_or(1);
    if req.buffer_bytes / 8 < 64 {
        return Err(PlacementError::Invalid(
            "sweep buffers must be at least 512 bytes".into(),
        ));
    }
    let foreground: Vec<BufferDemand> = req
        .mem_nodes
        .iter()
        .flat_map(|node| {
            let bound = MemoryPolicy::Bind {
                nodes: IdSet::single(node),
            };
            std::iter::repeat_n(
                BufferDemand::new(req.buffer_bytes, &bound, None),
                max_threads,
            )
        })
        .collect();
    // An idle sweep (no background at all) has its foreground to check.
    let idle = [None];
    let backgrounds = if req.backgrounds.is_empty() {
        &idle[..]
    } else {
        &req.backgrounds[..]
    };
    let phases: Vec<Vec<BufferDemand>> = backgrounds
        .iter()
        .map(|bg: &Option<Background>| {
            // Which CPUs carry the background changes from case to case:
            // count its buffers on any allowed node, as many as it can have.
            let threads = bg.as_ref().map_or(0, |b| match &b.cpus {
                Some(c) => c.len(),
                None => b.subscription.threads(m.allowed_cpus.len()),
            });
            let local = BufferDemand::new(req.background_bytes, &MemoryPolicy::Local, None);
            foreground
                .iter()
                .cloned()
                .chain(std::iter::repeat_n(local, threads))
                .collect()
        })
        .collect();
    check_plan(
        m,
        &phases,
        "use a smaller --size or --background-size, fewer --thread-counts or fewer --mem-nodes",
    )
}

/// Buffers of one thread index, one per memory node.
pub(super) struct ThreadBuffers {
    pub(super) by_node: BTreeMap<u32, PlacedBuffer>,
}

/// One buffer per (thread index, memory node), placed and checked once: a
/// case only picks which buffers its threads stream. Stops early (fewer
/// thread indexes than asked) when cancelled.
pub(super) fn place_buffers(
    m: &Machine,
    req: &SweepRequest,
    mem_nodes: &[u32],
    max_threads: usize,
) -> Result<(Vec<ThreadBuffers>, Vec<SweepBuffer>), PlacementError> {
    let mut bufs: Vec<ThreadBuffers> = Vec::new();
    let mut buffers = Vec::new();
    for t in 0..max_threads {
        // Thread by thread, so that `bufs` and `buffers` stay in step.
        if cancel::requested() {
            break;
        }
        let mut by_node = BTreeMap::new();
        for &node in mem_nodes {
            let spec = BufferSpec {
                size: req.buffer_bytes,
                policy: MemoryPolicy::Bind {
                    nodes: IdSet::single(node),
                },
                thp: req.thp,
                hugetlb: false,
                toucher: Some(toucher_for(m, node, &req.cpus)),
                weighted: Default::default(),
            };
            let mut b = PlacedBuffer::new(m, &spec)?;
            as_f64(&mut b).fill(1.0);
            let c = check_buffer(node, &b)?;
            buffers.push(SweepBuffer {
                thread: t,
                node,
                at_start: c.clone(),
                at_end: c,
            });
            by_node.insert(node, b);
        }
        bufs.push(ThreadBuffers { by_node });
    }
    Ok((bufs, buffers))
}

fn as_f64(buf: &mut PlacedBuffer) -> &mut [f64] {
    buf.as_f64_mut()
}

/// Where the pages of a buffer bound to `node` are, and what is wrong.
pub(super) fn check_buffer(
    node: u32,
    buf: &PlacedBuffer,
) -> Result<BufferCheckLite, PlacementError> {
    let h = buf.histogram()?;
    let mut problems = Vec::new();
    if h.untouched_pages > 0 {
        problems.push(format!("{} pages never touched", h.untouched_pages));
    }
    let out = h.pages_outside(&IdSet::single(node));
    if out > 0 {
        problems.push(format!(
            "{out} of {} pages not on node {node}",
            h.pages_total
        ));
    }
    Ok(BufferCheckLite {
        pages_by_node: h.pages_by_node.clone(),
        untouched_pages: h.untouched_pages,
        verified: problems.is_empty(),
        problems,
    })
}

/// A CPU to touch buffers bound to `node` from: one of the node's sweep CPUs
/// when it has some (first touch is strict under bind anyway).
fn toucher_for(m: &Machine, node: u32, cpus: &IdSet) -> u32 {
    m.node(node)
        .and_then(|n| n.cpus.intersection(cpus).first())
        .or_else(|| cpus.first())
        .unwrap_or(0)
}

/// What a budget affords: how many of each plan's cases to run (the first
/// ones in coverage order) and the stop rule of each case.
struct Affordable {
    rule: StopRule,
    take: Vec<usize>,
    /// Whether twins run (each costs three more case runs).
    twins: bool,
    warning: Option<String>,
}

/// Case runs a twin pair adds: the twin, the representative again, the
/// twin again (interleaved with the representative's first run).
const TWIN_RUNS: usize = 3;

/// Shares what is left of `req.budget` after the set-up over the cases:
/// every case gets its share when that is long enough to measure, else
/// fewer cases run, each at the shortest useful length.
fn affordable(req: &SweepRequest, plans: &[Plan], setup_s: f64) -> Affordable {
    let total_planned: usize =
        plans.iter().map(|p| p.2.len()).sum::<usize>() * req.backgrounds.len();
    // Classes of more than one case may have a twin.
    let twinnable: usize = plans
        .iter()
        .map(|p| p.2.iter().filter(|c| c.class_size > 1).count())
        .sum::<usize>()
        * req.backgrounds.len();
    let twins = req.twins && !req.full && twinnable > 0;
    let mut out = Affordable {
        rule: req.rule.clone(),
        take: plans.iter().map(|p| p.2.len()).collect(),
        twins,
        warning: None,
    };
    let Some(b) = req.budget else {
        return out;
    };
    let avail = (b.as_secs_f64() - setup_s).max(0.0);
    // A case costs its budget plus about one calibration and a warm-up
    // sample, and background start-up when there is one.
    let per_case_overhead = 0.06
        + if req.backgrounds.iter().any(|x| x.is_some()) {
            0.1
        } else {
            0.0
        };
    let min_case = 0.1;
    if twins {
        let share = avail / (total_planned + TWIN_RUNS * twinnable).max(1) as f64;
        if share >= min_case + per_case_overhead {
            out.rule.budget = Duration::from_secs_f64(
                (share - per_case_overhead).min(req.rule.budget.as_secs_f64()),
            );
            return out;
        }
        out.twins = false;
    }
    let share = avail / total_planned.max(1) as f64;
    if share >= min_case + per_case_overhead {
        out.rule.budget =
            Duration::from_secs_f64((share - per_case_overhead).min(req.rule.budget.as_secs_f64()));
        if twins {
            out.warning = Some(format!(
                "--budget {:.0}s pays for one member per class: no twin measured, so the symmetry the folding assumes is not tested (finding e); about {:.0}s would measure twins",
                b.as_secs_f64(),
                setup_s + (total_planned + TWIN_RUNS * twinnable) as f64 * (min_case + per_case_overhead)
            ));
        }
        return out;
    }
    out.rule.budget = Duration::from_secs_f64(min_case);
    let affordable = (avail / (min_case + per_case_overhead)).floor() as usize;
    // Every run covers its hop classes (its cases are ordered so that the
    // first ones do); what is left is shared over thread counts and
    // backgrounds in proportion to their case counts.
    let frac = affordable as f64 / total_planned as f64;
    for (t, p) in out.take.iter_mut().zip(plans) {
        *t = ((p.2.len() as f64 * frac).floor() as usize)
            .max(hop_class_count(&p.2))
            .max(1)
            .min(p.2.len());
    }
    out.warning = Some(format!(
        "--budget {:.0}s: running {} of {} cases, chosen to cover every hop class first",
        b.as_secs_f64(),
        out.take.iter().sum::<usize>() * req.backgrounds.len(),
        total_planned
    ));
    out
}

/// A sweep in progress: its buffers, the rule each case runs under, and
/// the tallies the result and the progress report need.
struct Sweep<'a, 'p> {
    m: &'a Machine,
    req: &'a SweepRequest,
    space: &'a SweepSpace,
    twins: bool,
    bufs: Vec<ThreadBuffers>,
    buffers: Vec<SweepBuffer>,
    rule: StopRule,
    deadline: Option<Instant>,
    progress: SweepProgress<'p>,
    done: u64,
    total_to_run: u64,
    /// Wall time of the cases run so far (background start-up included),
    /// to predict whether the next one still fits the budget.
    case_seconds_sum: f64,
    cases_timed: usize,
    all_verified: bool,
    warnings: Vec<String>,
}

impl Sweep<'_, '_> {
    /// The first `k` cases of one thread count (in coverage order) under one
    /// background, normalized to the fastest of them.
    fn run_plan(
        &mut self,
        bg: Option<&Background>,
        (threads, total, cases): &Plan,
        k: usize,
    ) -> Result<SweepRun, PlacementError> {
        let t_run = Instant::now();
        let mut results: Vec<CaseResult> = Vec::new();
        let mut twins: Vec<TwinPair> = Vec::new();
        // Coverage order runs one case of each hop class first: those run
        // even past the deadline, as the budget's warning promises.
        let cover = hop_class_count(cases).min(k);
        for &i in coverage_order(cases).iter().take(k) {
            if cancel::requested() || self.out_of_time(results.len(), cover, k, *threads) {
                break;
            }
            let first = self.run_one(bg, &cases[i])?;
            if self.twins {
                if let Some(pair) = self.run_twin(bg, &cases[i], &first)? {
                    twins.push(pair);
                }
            }
            results.push(first);
        }
        let run_hops: BTreeSet<&str> = results.iter().map(|r| r.hop_class.as_str()).collect();
        Ok(SweepRun {
            threads: *threads,
            background: bg.cloned(),
            total_cases: *total,
            classes: cases.len() as u64,
            cases_run: results.len() as u64,
            hop_classes: hop_class_count(cases) as u64,
            hop_classes_run: run_hops.len() as u64,
            elapsed_s: t_run.elapsed().as_secs_f64(),
            normalization: NORMALIZATION.into(),
            cases: results,
            twins,
        })
    }

    /// Measures a second member of `case`'s class, interleaved with the
    /// representative (its first run is `first`): twin, representative,
    /// twin. None when the class has no other member, or time ran out.
    fn run_twin(
        &mut self,
        bg: Option<&Background>,
        case: &PlannedCase,
        first: &CaseResult,
    ) -> Result<Option<TwinPair>, PlacementError> {
        let Some((twin, moved_by)) = self.space.twin(case) else {
            return Ok(None);
        };
        let mut samples = first.samples.clone();
        let mut twin_samples = Vec::new();
        let mut verified = first.verified;
        for (c, into) in [(&twin, 0), (case, 1), (&twin, 0)] {
            if cancel::requested() || self.past_deadline() {
                return Ok(None);
            }
            let r = self.run_one(bg, c)?;
            verified &= r.verified;
            if into == 0 {
                twin_samples.extend(r.samples);
            } else {
                samples.extend(r.samples);
            }
        }
        let test = crate::measure::compare::rank_compare(&twin_samples, &samples);
        Ok(Some(TwinPair {
            test,
            class_key: case.class_key.clone(),
            hop_class: case.hop_class(),
            moved_by,
            labels: case.threads.iter().map(|t| t.label()).collect(),
            twin_labels: twin.threads.iter().map(|t| t.label()).collect(),
            samples,
            twin_samples,
            verified,
        }))
    }

    /// Whether the deadline, if any, has passed.
    fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }

    /// Whether the next case, as long as the cases so far took on average,
    /// would end after the deadline (never before a run's first `cover`
    /// cases, nor before its first).
    fn out_of_time(&mut self, ran: usize, cover: usize, k: usize, threads: usize) -> bool {
        let Some(d) = self.deadline else {
            return false;
        };
        let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
        let expect = if self.cases_timed > 0 {
            self.case_seconds_sum / self.cases_timed as f64
        } else {
            self.rule.budget.as_secs_f64()
        };
        if left < expect && ran > 0 && ran >= cover {
            self.warnings.push(format!(
                "budget spent: {ran} of {k} planned cases of {threads} thread(s) ran"
            ));
            return true;
        }
        false
    }

    /// Times one case under its background load and reports progress.
    fn run_one(
        &mut self,
        bg: Option<&Background>,
        case: &PlannedCase,
    ) -> Result<CaseResult, PlacementError> {
        let t_case = Instant::now();
        let (load, cpus) = start_background(self.m, self.req, bg, case)?;
        let mark = load.as_ref().map(|l| l.mark());
        let outcome = run_case(self.req, case, &mut self.bufs, &self.rule);
        let achieved = match (&load, &mark) {
            (Some(l), Some(mk)) => l.rates_since(mk),
            _ => Vec::new(),
        };
        let verified = load
            .as_ref()
            .is_none_or(|l| l.workers().iter().all(|w| w.verified));
        let _report: Option<PacedReport> = load.map(|l| l.stop());
        let (time, per, samples) = outcome?;
        let seen = BackgroundSeen {
            cpus,
            achieved,
            verified,
        };
        let mut result = self.case_result(case, time, per, seen);
        result.samples = samples;
        self.all_verified &= result.verified;
        self.done += 1;
        self.case_seconds_sum += t_case.elapsed().as_secs_f64();
        self.cases_timed += 1;
        (self.progress)(self.done, self.total_to_run, &case.label());
        Ok(result)
    }

    /// A case's result with every placement problem found: threads off their
    /// CPUs, buffers off their nodes, background not where it was put.
    fn case_result(
        &self,
        case: &PlannedCase,
        time: CaseTime,
        per: ThreadTimes,
        bg: BackgroundSeen,
    ) -> CaseResult {
        let mut problems = Vec::new();
        let threads = thread_results(self.req, case, per, &mut problems);
        for (ti, t) in case.threads.iter().enumerate() {
            let buffer = self
                .buffers
                .iter()
                .find(|b| b.thread == ti && b.node == t.mem);
            if let Some(b) = buffer.filter(|b| !b.at_start.verified) {
                problems.push(format!(
                    "buffer of thread {ti} on node {}: {}",
                    t.mem,
                    b.at_start.problems.join("; ")
                ));
            }
        }
        if !bg.verified {
            problems.push("background placement did not verify".into());
        }
        CaseResult {
            labels: case.threads.iter().map(|t| t.label()).collect(),
            hop_class: case.hop_class(),
            sharing: sharing(self.m, case).into(),
            class_size: case.class_size,
            class_key: case.class_key.clone(),
            seconds: time,
            samples: Vec::new(),
            total_seconds: threads.iter().map(|t| t.seconds).sum(),
            normalized: f64::NAN,
            threads,
            background_achieved: bg.achieved,
            background_cpus: bg.cpus,
            verified: problems.is_empty(),
            problems,
        }
    }

    /// Pages can move while a sweep runs (NUMA balancing, migration): checks
    /// every buffer again and warns about those that moved.
    fn check_buffers_again(&mut self) -> Result<(), PlacementError> {
        for b in self.buffers.iter_mut() {
            if let Some(buf) = self.bufs[b.thread].by_node.get(&b.node) {
                b.at_end = check_buffer(b.node, buf)?;
                if b.at_end.pages_by_node != b.at_start.pages_by_node {
                    self.warnings.push(format!(
                        "the buffer of thread {} on node {} moved during the sweep",
                        b.thread, b.node
                    ));
                    self.all_verified = false;
                }
            }
        }
        Ok(())
    }
}

/// Each thread's result; a thread seen off its CPU adds a problem.
fn thread_results(
    req: &SweepRequest,
    case: &PlannedCase,
    per: ThreadTimes,
    problems: &mut Vec<String>,
) -> Vec<ThreadResult> {
    case.threads
        .iter()
        .zip(per)
        .map(|(t, (secs, seen))| {
            let ok = !seen.is_empty() && seen.iter().all(|&c| c == t.cpu);
            if !ok {
                problems.push(format!(
                    "thread {} asked for CPU {} ran on {:?}",
                    t.label(),
                    t.cpu,
                    seen
                ));
            }
            let bytes = bytes_per_pass(kernel_of(req, t.access), req.buffer_bytes);
            ThreadResult {
                case: *t,
                label: t.label(),
                seconds: secs,
                gbps: bytes.program as f64 / secs / 1e9,
                memory_gbps: bytes.memory as f64 / secs / 1e9,
                seen_cpus: seen,
                verified: ok,
            }
        })
        .collect()
}

/// The background load while a case ran.
struct BackgroundSeen {
    cpus: Vec<u32>,
    /// Bytes/s per background thread.
    achieved: Vec<f64>,
    verified: bool,
}

/// Starts a case's background load, if it has one and any CPU is left for
/// it: the load and its CPUs.
pub(super) fn start_background(
    m: &Machine,
    req: &SweepRequest,
    bg: Option<&Background>,
    case: &PlannedCase,
) -> Result<(Option<PacedLoad>, Vec<u32>), PlacementError> {
    let Some(bg) = bg else {
        return Ok((None, Vec::new()));
    };
    let cpus = background_cpus(m, bg, case, &m.allowed_cpus);
    if cpus.is_empty() {
        return Ok((None, cpus));
    }
    let spec = PacedSpec {
        cpus: cpus.clone(),
        bytes_per_second: Some(bg.bytes_per_second),
        mix: TrafficMix::Read,
        buffer_bytes: req.background_bytes,
        policy: MemoryPolicy::Local,
        thp: req.thp,
    };
    Ok((Some(PacedLoad::start(m, &spec)?), cpus))
}

/// Background CPUs for a case: fixed ones, or a subscription of the CPUs the
/// case leaves free, spread over nodes (one per node in turn).
fn background_cpus(m: &Machine, bg: &Background, case: &PlannedCase, allowed: &IdSet) -> Vec<u32> {
    let busy: IdSet = case.threads.iter().map(|t| t.cpu).collect();
    if let Some(c) = &bg.cpus {
        return c.difference(&busy).iter().collect();
    }
    let free = allowed.difference(&busy);
    let order = crate::placement::thread_policy::scatter_order(m, &free);
    let k = bg.subscription.threads(order.len());
    order.into_iter().take(k).collect()
}

/// What a case's timing thread and its foreground threads share.
struct CaseSync {
    /// The samples: passes per sample (raised by the calibration), and per
    /// thread its seconds per pass in the last sample.
    clock: SampleClock,
    failed: Mutex<Option<PlacementError>>,
    /// Per thread: the CPUs it was seen on.
    seen: Mutex<Vec<Vec<u32>>>,
}

impl CaseSync {
    fn new(threads: usize) -> Self {
        CaseSync {
            clock: SampleClock::new(threads),
            failed: Mutex::new(None),
            seen: Mutex::new(vec![Vec::new(); threads]),
        }
    }

    fn fail(&self, e: PlacementError) {
        *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    fn has_failed(&self) -> bool {
        self.failed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// One sample: every thread runs its passes. Returns the slowest
    /// thread's seconds per pass; `record` gets each thread's.
    fn sample(&self, record: Option<&mut [Vec<f64>]>) -> f64 {
        let ts = self.clock.sample();
        if let Some(per_thread) = record {
            for (w, t) in ts.iter().enumerate() {
                per_thread[w].push(*t);
            }
        }
        ts.iter().cloned().fold(0.0, f64::max)
    }
}

/// Times one case: its threads pinned, started together, each timing its
/// passes; the sample is the slowest thread's seconds per pass.
pub(super) fn run_case(
    req: &SweepRequest,
    case: &PlannedCase,
    bufs: &mut [ThreadBuffers],
    rule: &StopRule,
) -> Result<(CaseTime, ThreadTimes, Vec<f64>), PlacementError> {
    let n = case.threads.len();
    let sync = CaseSync::new(n);
    let mut slots: Vec<Option<&mut PlacedBuffer>> = Vec::with_capacity(n);
    for (i, b) in bufs.iter_mut().enumerate().take(n) {
        slots.push(b.by_node.get_mut(&case.threads[i].mem));
    }
    let mut per_thread: Vec<Vec<f64>> = vec![Vec::new(); n];
    // The threads meet at the gate before the clock's first barrier: a
    // thread the system refuses opens it, and the ones that started leave
    // without sampling (a `Barrier` would wait for the missing one).
    let gate = Gate::new(n + 1);
    let refused = AtomicBool::new(false);
    let meas = std::thread::scope(|s| {
        for (i, slot) in slots.into_iter().enumerate() {
            let (sync, t, gate, refused) = (&sync, case.threads[i], &gate, &refused);
            let started = crate::placement::sys::spawn_scoped(s, "a case thread", move || {
                gate.wait();
                if !refused.load(Ordering::Acquire) {
                    case_thread(req, sync, i, t, slot);
                }
            });
            if let Err(e) = started {
                sync.fail(e);
                refused.store(true, Ordering::Release);
                gate.open();
                return None;
            }
        }
        gate.wait();
        // Calibrate: samples long enough that barrier skew does not count.
        if req.min_sample_s > 0.0 {
            let one = sync.sample(None).max(1e-7);
            let k = (req.min_sample_s / one).ceil().clamp(1.0, 1e6) as usize;
            sync.clock.set_passes(k);
        }
        let meas = if sync.has_failed() {
            None
        } else {
            Some(measure(rule, || {
                sync.sample(Some(per_thread.as_mut_slice()))
            }))
        };
        sync.clock.stop();
        meas
    });
    if let Some(e) = sync.failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let meas = meas.ok_or_else(|| PlacementError::Os("case did not run".into()))?;
    let seen = sync.seen.into_inner().unwrap_or_else(|p| p.into_inner());
    let threads = per_thread
        .into_iter()
        .zip(seen)
        .map(|(mut v, s)| {
            v.drain(..meas.warmup_samples.len().min(v.len()));
            (crate::measure::stats::median(v).unwrap_or(f64::NAN), s)
        })
        .collect();
    Ok((CaseTime::of(&meas.summary), threads, meas.samples))
}

/// A foreground thread of a case: pins itself, then runs its passes each
/// time the timing thread starts a sample, until told to stop. A thread that
/// cannot pin or has no buffer records why and runs empty samples, so that
/// the barriers still meet.
fn case_thread(
    req: &SweepRequest,
    sync: &CaseSync,
    i: usize,
    t: ThreadCase,
    slot: Option<&mut PlacedBuffer>,
) {
    let kernel = kernel_of(req, t.access);
    let ok = match (pin_current_thread(t.cpu), slot) {
        (Ok(()), Some(b)) => Some(b),
        (Err(e), _) => {
            sync.fail(e);
            None
        }
        (_, None) => {
            sync.fail(PlacementError::Invalid(format!(
                "no buffer on node {}",
                t.mem
            )));
            None
        }
    };
    let mut slice = ok.map(as_f64);
    while let Some(k) = sync.clock.next() {
        let t0 = Instant::now();
        if let Some(sl) = slice.as_deref_mut() {
            let mut sink = 0.0;
            for _ in 0..k {
                sink += run_pass(kernel, req.isa, &mut [&mut *sl], 1.0);
            }
            std::hint::black_box(sink);
        }
        let seconds = t0.elapsed().as_secs_f64() / k as f64;
        if let Some(c) = sys::current_cpu() {
            let mut g = sync.seen.lock().unwrap_or_else(|p| p.into_inner());
            if !g[i].contains(&c) {
                g[i].push(c);
            }
        }
        sync.clock.finish(i, seconds);
    }
}

fn kernel_of(req: &SweepRequest, a: Access) -> BandwidthKernel {
    match a {
        Access::Read => req.read_kernel,
        Access::Write => req.write_kernel,
    }
}

/// How the threads of a case share hardware: `cpu` (two on one CPU: they
/// take turns), `core` (SMT siblings), `none`.
fn sharing(m: &Machine, case: &PlannedCase) -> &'static str {
    let cpus: Vec<u32> = case.threads.iter().map(|t| t.cpu).collect();
    for (i, a) in cpus.iter().enumerate() {
        if cpus[i + 1..].contains(a) {
            return "cpu";
        }
    }
    let core_of = |c: u32| m.cores.iter().position(|k| k.cpus.contains(c));
    for (i, a) in cpus.iter().enumerate() {
        if cpus[i + 1..]
            .iter()
            .any(|b| core_of(*a).is_some() && core_of(*a) == core_of(*b))
        {
            return "core";
        }
    }
    "none"
}

/// Bytes one pass of a sweep thread moves.
pub fn bytes_per_pass(kernel: BandwidthKernel, buffer_bytes: usize) -> ByteCount {
    kernel.bytes_per_pass(buffer_bytes / 8)
}
