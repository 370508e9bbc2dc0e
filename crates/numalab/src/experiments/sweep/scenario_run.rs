//! Running the study's scenarios ([`super::scenarios`]) in interleaved
//! rounds, and normalising them as the study did.
//!
//! Every round runs every case of every selected scenario once, at every
//! background level, plus the two baselines: a slow drift of the machine
//! (frequency, a neighbour's load) then touches every case alike, and the
//! rounds are the repetitions the statistical rule compares
//! ([`crate::measure::compare`]). A case's time in a round is the median
//! seconds per pass of each thread over that round's samples; the study's
//! figure is their sum, the total time taken by both threads.
//!
//! Cancellation ends the run after the case in progress; the rounds
//! measured so far are kept.

use super::run::{check_buffer, place_buffers, run_case, start_background, ThreadBuffers};
use super::scenarios::{ScenarioCase, ScenarioPlan, ScenarioSet};
use super::space::PlannedCase;
use super::{check_buffers_fit, Background, Subscription, SweepBuffer, SweepRequest};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::environment::cache_fit_warning;
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::memory_traffic::{self, MemoryTraffic};
use crate::measure::stats::{median, StopRule, Summary};
use crate::placement::{PlacementError, Thp};
use crate::serde_util::{f64_or_nan, vec_f64_or_nan};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// What the normalised figures are relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalize {
    /// The study's rule: one-thread cases over the local read, two-thread
    /// totals over the idle two local readers, loaded cases too.
    Study,
    /// Each scenario and level over its own fastest case (by the slowest
    /// thread's time), as a plain `sweep` normalises.
    Run,
}

impl Normalize {
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "study" => Ok(Normalize::Study),
            "run" => Ok(Normalize::Run),
            o => Err(format!(
                "unknown normalisation '{}'; valid: study (the classic study's baselines), run (each run's fastest case)",
                crate::text::format::excerpt(o, 40)
            )),
        }
    }
}

/// Fewest rounds the rank test can reach p < 0.05 with (4 against 4).
pub const MIN_ROUNDS: usize = 4;

/// How to run the scenarios.
#[derive(Debug, Clone)]
pub struct ScenarioRequest {
    pub set: ScenarioSet,
    pub read_kernel: BandwidthKernel,
    pub write_kernel: BandwidthKernel,
    pub isa: Isa,
    /// Bytes per foreground buffer.
    pub buffer_bytes: usize,
    /// Bytes per background buffer.
    pub background_bytes: usize,
    pub thp: Option<Thp>,
    /// Interleaved rounds (repetitions of every case).
    pub rounds: usize,
    /// Each case in each round (its samples and budget).
    pub rule: StopRule,
    /// Shortest sample, seconds (passes repeat up to it).
    pub min_sample_s: f64,
    pub normalize: Normalize,
    /// Whole run: fewer rounds or shorter cases when it cannot pay for all.
    pub budget: Option<Duration>,
}

/// One case of one run, over the rounds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioCaseResult {
    #[serde(flatten)]
    pub case: ScenarioCase,
    /// Per round, each thread's seconds per pass (median of the round's samples).
    pub rounds: Vec<Vec<f64>>,
    /// Per round, the total time of the threads (the study's figure; one
    /// thread: its time).
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub total_s: Vec<f64>,
    /// Per round, the slowest thread's time (median over the round's samples).
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub makespan_s: Vec<f64>,
    /// Per thread, the median over the rounds.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub thread_s: Vec<f64>,
    /// Median of `total_s`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub total_median_s: f64,
    /// Half-width of the 95% confidence interval of that median over it.
    #[serde(deserialize_with = "f64_or_nan")]
    pub total_rel_ci: f64,
    /// Median of `makespan_s`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub makespan_median_s: f64,
    /// `total_median_s` over the baseline's (`normalize: study`), or the
    /// makespan over the run's fastest (`normalize: run`).
    #[serde(deserialize_with = "f64_or_nan")]
    pub normalized: f64,
    /// The baseline case's labels.
    pub baseline: String,
    /// Bytes/s each background thread achieved, mean over the rounds.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub background_achieved: Vec<f64>,
    /// CPUs each foreground thread was seen on.
    pub seen_cpus: Vec<Vec<u32>>,
    pub verified: bool,
    pub problems: Vec<String>,
    /// What the memory controllers (per package) and the links moved while
    /// the case ran, pooled over its rounds (the whole machine's traffic,
    /// background included); assumed with the reason where the machine
    /// has no such counters.
    #[serde(default)]
    pub memory_traffic: MemoryTraffic,
}

/// One scenario at one condition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioRun {
    /// [`super::Scenario::name`].
    pub scenario: String,
    pub figure: String,
    pub title: String,
    /// `idle`, or the background level.
    pub condition: String,
    pub background: Option<Background>,
    pub cases: Vec<ScenarioCaseResult>,
}

/// The scenarios run on a machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenariosResult {
    /// The plan: roles, every scenario asked for (with why not, where not).
    #[serde(flatten)]
    pub set: ScenarioSet,
    pub normalize: Normalize,
    /// Rounds asked for, and run (fewer when cancelled or out of budget).
    pub rounds_planned: usize,
    pub rounds_run: usize,
    pub read_kernel: String,
    pub write_kernel: String,
    pub buffer_bytes: u64,
    pub background_bytes: u64,
    pub runs: Vec<ScenarioRun>,
    /// The baselines as measured, in every round beside the scenarios.
    pub baselines: BaselineResults,
    /// Each (thread index, memory node) buffer: where its pages were when
    /// placed and when the run ended.
    pub buffers: Vec<SweepBuffer>,
    /// The classic questions answered from the scenarios.
    pub findings: Vec<super::ScenarioFinding>,
    pub verified: bool,
    pub warnings: Vec<String>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
}

impl ScenariosResult {
    /// The run of `scenario` at `condition`.
    pub fn run(&self, scenario: &str, condition: &str) -> Option<&ScenarioRun> {
        self.runs
            .iter()
            .find(|r| r.scenario == scenario && r.condition == condition)
    }
}

/// The two baselines, measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineResults {
    pub one_thread: Option<ScenarioCaseResult>,
    pub two_threads: Option<ScenarioCaseResult>,
}

/// A case being measured: where its rounds go.
#[derive(Clone)]
struct Slot {
    case: PlannedCase,
    rounds: Vec<Vec<f64>>,
    makespan: Vec<f64>,
    achieved: Vec<Vec<f64>>,
    seen: Vec<Vec<u32>>,
    problems: Vec<String>,
    traffic: Option<MemoryTraffic>,
}

impl Slot {
    fn new(c: &ScenarioCase) -> Self {
        Slot {
            case: PlannedCase {
                threads: c.threads.clone(),
                class_size: 1,
                class_key: c.label(),
            },
            rounds: Vec::new(),
            makespan: Vec::new(),
            achieved: Vec::new(),
            seen: vec![Vec::new(); c.threads.len()],
            problems: Vec::new(),
            traffic: None,
        }
    }
}

/// A unit of a round: cases run back to back under one background.
struct Unit {
    /// Index into `set.scenarios`, `None` for the baselines.
    scenario: Option<usize>,
    background: Option<Background>,
    slots: Vec<Slot>,
}

/// The buffers' request: every memory node a case uses, one buffer per
/// thread index there; the background's buffers at its widest.
fn buffer_request(req: &ScenarioRequest, m: &Machine) -> SweepRequest {
    let mut mem = IdSet::new();
    let cases = req
        .set
        .applicable()
        .flat_map(|p| p.cases.iter())
        .chain(req.set.one_thread_baseline.iter())
        .chain(req.set.two_thread_baseline.iter());
    for c in cases {
        for t in &c.threads {
            mem.insert(t.mem);
        }
    }
    let widest = req
        .set
        .applicable()
        .filter_map(|p| p.background.as_ref())
        .max_by_key(|b| b.cpus.len())
        .map(|b| Background {
            level: "widest".into(),
            bytes_per_second: 0.0,
            subscription: Subscription::Full,
            cpus: Some(b.cpus.iter().copied().collect()),
        });
    SweepRequest {
        threads: vec![2],
        cpus: m.allowed_cpus.clone(),
        mem_nodes: mem,
        accesses: Vec::new(),
        read_kernel: req.read_kernel,
        write_kernel: req.write_kernel,
        isa: req.isa,
        buffer_bytes: req.buffer_bytes,
        thp: req.thp,
        full: false,
        budget: None,
        rule: req.rule.clone(),
        backgrounds: vec![widest],
        background_bytes: req.background_bytes,
        full_limit: 1,
        min_sample_s: req.min_sample_s,
        twins: false,
    }
}

/// Whether an idle scenario of `req` runs a case with `c`'s labels: then
/// that case is the baseline, not measured twice.
fn in_idle_scenario(req: &ScenarioRequest, c: &ScenarioCase) -> bool {
    req.set
        .applicable()
        .filter(|p| p.background.is_none())
        .any(|p| p.cases.iter().any(|x| x.labels == c.labels))
}

fn units(req: &ScenarioRequest) -> Vec<Unit> {
    let mut out = vec![Unit {
        scenario: None,
        background: None,
        slots: req
            .set
            .one_thread_baseline
            .iter()
            .chain(req.set.two_thread_baseline.iter())
            .filter(|c| !in_idle_scenario(req, c))
            .map(Slot::new)
            .collect(),
    }];
    for (i, p) in req.set.scenarios.iter().enumerate() {
        if p.not_applicable.is_some() {
            continue;
        }
        let slots = || p.cases.iter().map(Slot::new).collect();
        match &p.background {
            None => out.push(Unit {
                scenario: Some(i),
                background: None,
                slots: slots(),
            }),
            Some(bg) => {
                for (level, &rate) in bg.levels.iter().zip(&bg.bytes_per_second) {
                    out.push(Unit {
                        scenario: Some(i),
                        background: Some(Background {
                            level: level.clone(),
                            bytes_per_second: rate,
                            subscription: Subscription::Full,
                            cpus: Some(bg.cpus.iter().copied().collect()),
                        }),
                        slots: slots(),
                    })
                }
            }
        }
    }
    out
}

/// Seconds a background start costs, about (threads and their buffers).
pub const BACKGROUND_START_S: f64 = 0.15;
/// Seconds a case costs beyond its rule's budget (calibration, warm-up).
pub const CASE_OVERHEAD_S: f64 = 0.06;
/// Shortest case budget worth measuring.
pub const MIN_CASE_S: f64 = 0.05;

/// Rounds and case rule that fit `budget`: the rounds asked for with
/// shorter cases first, then fewer rounds (never below [`MIN_ROUNDS`]).
fn fit_budget(
    req: &ScenarioRequest,
    units: &[Unit],
    warnings: &mut Vec<String>,
) -> (usize, StopRule) {
    let mut rule = req.rule.clone();
    let Some(b) = req.budget else {
        return (req.rounds, rule);
    };
    let cases: usize = units.iter().map(|u| u.slots.len()).sum();
    let starts = units.iter().filter(|u| u.background.is_some()).count();
    let fixed = starts as f64 * BACKGROUND_START_S + cases as f64 * CASE_OVERHEAD_S;
    let per_round = b.as_secs_f64() / req.rounds.max(1) as f64;
    let per_case = (per_round - fixed) / cases.max(1) as f64;
    if per_case >= MIN_CASE_S {
        rule.budget = rule.budget.min(Duration::from_secs_f64(per_case));
        return (req.rounds, rule);
    }
    rule.budget = Duration::from_secs_f64(MIN_CASE_S);
    let round_s = fixed + cases as f64 * MIN_CASE_S;
    let rounds = ((b.as_secs_f64() / round_s).floor() as usize).clamp(1, req.rounds);
    if rounds < MIN_ROUNDS {
        warnings.push(format!(
            "--budget {:.0}s pays for {rounds} round(s) of the {} cases (about {:.1} s each): fewer than {MIN_ROUNDS}, so no comparison can be told from noise; give about {:.0} s",
            b.as_secs_f64(),
            cases,
            round_s,
            round_s * MIN_ROUNDS as f64
        ));
    } else if rounds < req.rounds {
        warnings.push(format!(
            "--budget {:.0}s: {rounds} of {} rounds, each case {:.2} s",
            b.as_secs_f64(),
            req.rounds,
            MIN_CASE_S
        ));
    }
    (rounds, rule)
}

/// Runs the applicable scenarios of `req.set`.
pub fn run_scenarios(
    m: &Machine,
    req: &ScenarioRequest,
    progress: &mut dyn FnMut(u64, u64, &str),
) -> Result<ScenariosResult, PlacementError> {
    let t_start = Instant::now();
    req.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    let breq = buffer_request(req, m);
    check_buffers_fit(m, &breq)?;
    let mem: Vec<u32> = breq.mem_nodes.iter().collect();
    let (mut bufs, mut buffers) = place_buffers(m, &breq, &mem, 2)?;
    let mut warnings: Vec<String> =
        cache_fit_warning(m, req.buffer_bytes as u64, "each scenario buffer")
            .into_iter()
            .collect();
    let mut verified = buffers.iter().all(|b| b.at_start.verified);
    for b in buffers.iter().filter(|b| !b.at_start.verified) {
        warnings.push(format!(
            "buffer of thread {} on node {}: {}",
            b.thread,
            b.node,
            b.at_start.problems.join("; ")
        ));
    }
    let mut units = units(req);
    let (rounds, rule) = fit_budget(req, &units, &mut warnings);
    let deadline = req.budget.map(|b| t_start + b);
    let per_round: u64 = units.iter().map(|u| u.slots.len() as u64).sum();
    let total = per_round * rounds as u64;
    let mut done = 0;
    let mut rounds_run = 0;
    let mut round_s = 0.0f64;
    'rounds: for _ in 0..rounds {
        if bufs.len() < 2 || cancel::requested() {
            break;
        }
        // Only whole rounds keep the comparison balanced: start one only
        // when it fits what is left. The first MIN_ROUNDS always run (when
        // planned): fewer cannot tell a case from noise, so stopping there
        // would throw away what was measured; a loaded machine overruns
        // the budget instead.
        if let Some(d) = deadline {
            let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
            if rounds_run >= MIN_ROUNDS.min(rounds) && left < round_s {
                warnings.push(format!("budget spent: {rounds_run} of {rounds} rounds ran"));
                break;
            }
        }
        let t_round = Instant::now();
        for u in units.iter_mut() {
            run_unit(m, &breq, u, &mut bufs, &rule, &mut |label| {
                done += 1;
                progress(done, total, label);
            })?;
            if cancel::requested() {
                // A partial round is kept: its cases have one more value.
                rounds_run += 1;
                break 'rounds;
            }
        }
        rounds_run += 1;
        round_s = t_round.elapsed().as_secs_f64();
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    // Pages can move while the scenarios run (NUMA balancing, migration).
    for b in buffers.iter_mut() {
        if let Some(buf) = bufs.get(b.thread).and_then(|t| t.by_node.get(&b.node)) {
            b.at_end = check_buffer(b.node, buf)?;
            if b.at_end.pages_by_node != b.at_start.pages_by_node {
                warnings.push(format!(
                    "the buffer of thread {} on node {} moved during the run",
                    b.thread, b.node
                ));
                verified = false;
            }
        }
    }
    let mut result = assemble(req, units, rounds, rounds_run, &breq);
    verified &= result.verified;
    result.verified = verified;
    result.warnings.splice(0..0, warnings);
    result.buffers = buffers;
    result.findings = super::scenario_findings(&result);
    result.elapsed_s = t_start.elapsed().as_secs_f64();
    Ok(result)
}

/// Runs one unit's cases once each, under its background.
fn run_unit(
    m: &Machine,
    breq: &SweepRequest,
    u: &mut Unit,
    bufs: &mut [ThreadBuffers],
    rule: &StopRule,
    step: &mut dyn FnMut(&str),
) -> Result<(), PlacementError> {
    let Some(probe) = u.slots.first().map(|s| &s.case) else {
        return Ok(());
    };
    let (load, bg_cpus) = start_background(m, breq, u.background.as_ref(), probe)?;
    for s in u.slots.iter_mut() {
        if cancel::requested() {
            break;
        }
        let mark = load.as_ref().map(|l| l.mark());
        let counting = memory_traffic::begin();
        let (time, per, _) = run_case(breq, &s.case, bufs, rule)?;
        let traffic = match counting {
            Ok(c) => c.finish(),
            Err(why) => MemoryTraffic::assumed(why),
        };
        match s.traffic.as_mut() {
            Some(t) => t.pool(traffic),
            None => s.traffic = Some(traffic),
        }
        if let (Some(l), Some(mk)) = (&load, &mark) {
            s.achieved.push(l.rates_since(mk));
        }
        s.makespan.push(time.median);
        s.rounds.push(per.iter().map(|(t, _)| *t).collect());
        for (i, ((_, seen), t)) in per.iter().zip(&s.case.threads).enumerate() {
            for &c in seen {
                if !s.seen[i].contains(&c) {
                    s.seen[i].push(c);
                }
            }
            if seen.is_empty() || seen.iter().any(|&c| c != t.cpu) {
                let p = format!(
                    "thread {} asked for CPU {} ran on {seen:?}",
                    t.label(),
                    t.cpu
                );
                if !s.problems.contains(&p) {
                    s.problems.push(p);
                }
            }
        }
        step(&s.case.label());
    }
    if let Some(l) = load {
        if !l.workers().iter().all(|w| w.verified) {
            let p = format!("background on CPUs {bg_cpus:?} did not verify");
            for s in u.slots.iter_mut() {
                if !s.problems.contains(&p) {
                    s.problems.push(p.clone());
                }
            }
        }
        drop(l.stop());
    }
    Ok(())
}

fn case_result(case: &ScenarioCase, s: Slot, baseline: (&str, f64)) -> ScenarioCaseResult {
    let total_s: Vec<f64> = s.rounds.iter().map(|r| r.iter().sum()).collect();
    let threads = case.threads.len();
    let thread_s = (0..threads)
        .map(|i| {
            median(s.rounds.iter().filter_map(|r| r.get(i).copied()).collect()).unwrap_or(f64::NAN)
        })
        .collect();
    let summary = Summary::of(&total_s);
    let total_median_s = summary.as_ref().map_or(f64::NAN, |x| x.median);
    let achieved = if s.achieved.is_empty() {
        Vec::new()
    } else {
        let k = s.achieved.iter().map(|v| v.len()).max().unwrap_or(0);
        (0..k)
            .map(|i| {
                let v: Vec<f64> = s
                    .achieved
                    .iter()
                    .filter_map(|r| r.get(i).copied())
                    .collect();
                v.iter().sum::<f64>() / v.len().max(1) as f64
            })
            .collect()
    };
    ScenarioCaseResult {
        case: case.clone(),
        total_rel_ci: summary.as_ref().map_or(f64::NAN, |x| x.rel_ci),
        makespan_median_s: median(s.makespan.clone()).unwrap_or(f64::NAN),
        normalized: total_median_s / baseline.1,
        baseline: baseline.0.to_string(),
        total_median_s,
        total_s,
        makespan_s: s.makespan,
        thread_s,
        rounds: s.rounds,
        background_achieved: achieved,
        seen_cpus: s.seen,
        verified: s.problems.is_empty(),
        problems: s.problems,
        memory_traffic: s.traffic.unwrap_or_default(),
    }
}

/// The result from the units' rounds, normalised as asked.
fn assemble(
    req: &ScenarioRequest,
    mut units: Vec<Unit>,
    rounds: usize,
    rounds_run: usize,
    breq: &SweepRequest,
) -> ScenariosResult {
    let base_unit = units.remove(0);
    let mut base_slots = base_unit.slots.into_iter();
    // A baseline an idle scenario measured is taken from it; the others
    // were measured on their own, in the same rounds.
    let mut measured = |c: &ScenarioCase| {
        if in_idle_scenario(req, c) {
            return None;
        }
        base_slots.next().map(|s| {
            let r = case_result(c, s, (&c.label(), 1.0));
            let med = r.total_median_s;
            r.with_norm(med)
        })
    };
    let one_own = req.set.one_thread_baseline.as_ref().and_then(&mut measured);
    let two_own = req.set.two_thread_baseline.as_ref().and_then(&mut measured);
    let idle_case = |c: &ScenarioCase| -> Option<ScenarioCaseResult> {
        units
            .iter()
            .filter(|u| u.background.is_none())
            .find_map(|u| {
                let p = &req.set.scenarios[u.scenario?];
                p.cases.iter().zip(&u.slots).find_map(|(pc, s)| {
                    (pc.labels == c.labels).then(|| {
                        let r = case_result(c, s.clone(), (&c.label(), 1.0));
                        let med = r.total_median_s;
                        r.with_norm(med)
                    })
                })
            })
    };
    let one = one_own.or_else(|| req.set.one_thread_baseline.as_ref().and_then(idle_case));
    let two = two_own.or_else(|| req.set.two_thread_baseline.as_ref().and_then(idle_case));
    let base_of = |p: &ScenarioPlan| {
        let b = if p.threads == 1 { &one } else { &two };
        b.as_ref().map_or((String::new(), f64::NAN), |b| {
            (b.case.label(), b.total_median_s)
        })
    };
    let mut runs = Vec::new();
    for u in units {
        let Some(i) = u.scenario else { continue };
        let p = &req.set.scenarios[i];
        let (label, value) = base_of(p);
        let mut cases: Vec<ScenarioCaseResult> = p
            .cases
            .iter()
            .zip(u.slots)
            .map(|(c, s)| case_result(c, s, (&label, value)))
            .collect();
        if req.normalize == Normalize::Run {
            // Today's sweep rule: the slowest thread, over the run's fastest case.
            let fastest = cases
                .iter()
                .map(|c| c.makespan_median_s)
                .filter(|x| x.is_finite() && *x > 0.0)
                .fold(f64::INFINITY, f64::min);
            let fastest_label = cases
                .iter()
                .find(|c| c.makespan_median_s == fastest)
                .map(|c| c.case.label())
                .unwrap_or_default();
            for c in cases.iter_mut() {
                c.normalized = c.makespan_median_s / fastest;
                c.baseline = fastest_label.clone();
            }
        }
        runs.push(ScenarioRun {
            scenario: p.name.name().into(),
            figure: p.figure.clone(),
            title: p.title.clone(),
            condition: u
                .background
                .as_ref()
                .map_or("idle".into(), |b| b.level.clone()),
            background: u.background,
            cases,
        });
    }
    let all_cases = runs
        .iter()
        .flat_map(|r| r.cases.iter())
        .chain(one.iter())
        .chain(two.iter());
    let mut warnings = Vec::new();
    let mut verified = true;
    for c in all_cases {
        if !c.verified {
            verified = false;
            warnings.push(format!("{}: {}", c.case.label(), c.problems.join("; ")));
        }
    }
    ScenariosResult {
        set: req.set.clone(),
        normalize: req.normalize,
        rounds_planned: rounds,
        rounds_run,
        read_kernel: req.read_kernel.name().into(),
        write_kernel: req.write_kernel.name().into(),
        buffer_bytes: breq.buffer_bytes as u64,
        background_bytes: breq.background_bytes as u64,
        runs,
        baselines: BaselineResults {
            one_thread: one,
            two_threads: two,
        },
        buffers: Vec::new(),
        findings: Vec::new(),
        verified,
        warnings,
        elapsed_s: f64::NAN,
    }
}

impl ScenarioCaseResult {
    /// Normalised over `baseline` seconds.
    fn with_norm(mut self, baseline: f64) -> Self {
        self.normalized = self.total_median_s / baseline;
        self
    }
}
