//! One run of `numalab report`: measures the parts a report is missing,
//! each within its share of the budget ([`super::budget`]), and keeps the
//! document up to date after every part so that an interrupted or failing
//! run loses nothing it measured.
//!
//! The session knows parts only through [`crate::part::Part`]: before
//! each part it re-plans the parts left from the time really left and the
//! costs learnt so far ([`allocate`]), runs the part with a [`PartContext`],
//! and stores what it returns with its plan. Every selected, applicable part
//! runs in some form; only a signal stops one. The sweeps run last (they are
//! last in the registry) and keep their deadline exactly, absorbing what the
//! earlier parts over- or under-ran.

use crate::budget::{
    allocate, corrected_factor, look_bytes_for, look_cost_s, looks_fit, plan_part, LOOK_SHARE,
};
use crate::model::drift::{DriftProbe, Unwatched};
use crate::model::{Costs, Measured, Mode, PartName, REPORT_SCHEMA, REPORT_SCHEMA_VERSION};
use crate::part::{PartContext, PartResult, Progress};
use crate::plan::{PlanEnv, RESERVE_SECONDS};
use crate::registry::Registry;
use crate::results::{PartStatus, Parts, ReportResults, RunRecord};
use crate::summarize::summarize;
use crate::summary::Summary;
use numalab::machine::{Machine, Source};
use numalab::measure::cancel;
use numalab::measure::environment::{rfc3339_utc, Environment};
use numalab::measure::kernels::Isa;
use std::panic::AssertUnwindSafe;
use std::time::{Instant, SystemTime};

/// What the front end sees while a report runs (and, through
/// [`Progress`], what the running part is doing).
pub trait Observer: Progress {
    /// Calibration (a few tenths of a second) starts.
    fn calibrating(&mut self) {}
    /// A part starts: its position among the parts of this run and its budget.
    fn part_started(&mut self, part: PartName, index: usize, count: usize, budget_s: f64);
    /// A part ended (done or not): the document is up to date and should
    /// be saved now.
    fn part_ended(&mut self, doc: &ReportResults, part: PartName);
}

/// A new, empty report of `m` with the parts of `reg`: every selected part
/// pending (or not applicable, or needing the live machine when `m` is a
/// topology file).
pub fn new_document(
    reg: &Registry,
    m: &Machine,
    environment: Option<Environment>,
    mode: Mode,
    budget_s: f64,
    buffer_bytes: usize,
    selected: &[PartName],
) -> ReportResults {
    let mut parts = Parts::all(PartStatus::Pending, None);
    for p in reg.all() {
        let (status, reason) = initial_status(reg, m, mode, p, selected);
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
        model: None,
        drift: Default::default(),
    };
    doc.refresh_status();
    doc.summary = summarize(&doc);
    doc
}

/// A part's status in a new report, and why.
fn initial_status(
    reg: &Registry,
    m: &Machine,
    mode: Mode,
    p: PartName,
    selected: &[PartName],
) -> (PartStatus, Option<String>) {
    if !selected.contains(&p) {
        return (
            PartStatus::NotSelected,
            Some("left out with --parts".to_string()),
        );
    }
    if let Source::File { path } = &m.source {
        let file = path
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        return (
            PartStatus::NeedsMachine,
            Some(format!(
                "needs the live machine: this report describes the topology file {file}; run `numalab report` on that machine"
            )),
        );
    }
    match reg.available(p, m, mode) {
        Err(why) => (PartStatus::NotApplicable, Some(why)),
        Ok(()) => (PartStatus::Pending, None),
    }
}

/// Parts of `doc` a run on the live machine can measure: selected parts
/// that are missing (pending, interrupted, out of budget or failed).
pub fn parts_to_measure(doc: &ReportResults) -> Vec<PartName> {
    doc.selected_parts
        .iter()
        .copied()
        .filter(|&p| {
            matches!(
                doc.parts.get(p).status,
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
pub fn resume_budget(reg: &Registry, doc: &ReportResults) -> f64 {
    let weigh = |parts: &mut dyn Iterator<Item = PartName>| -> f64 {
        parts.map(|p| reg.part(p).info().weight_in(doc.mode)).sum()
    };
    let all = weigh(
        &mut doc
            .selected_parts
            .iter()
            .copied()
            .filter(|&p| doc.parts.get(p).status != PartStatus::NotApplicable),
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

impl RunOutcome {
    fn name(self) -> &'static str {
        match self {
            RunOutcome::Complete => "complete",
            RunOutcome::Incomplete => "incomplete",
            RunOutcome::Interrupted => "interrupted",
        }
    }
}

/// How one run measures.
pub struct RunSettings {
    /// Seconds the run may take, counted from `started`.
    pub budget_s: f64,
    /// When the run began (before the costs were probed).
    pub started: Instant,
    /// The operations' costs it plans with (from
    /// [`crate::budget::probe`]).
    pub costs: Costs,
    pub isa: Isa,
    /// The command line, recorded in the run's record.
    pub command_line: Vec<String>,
    /// What the run could not keep, recorded in the run's record.
    pub warnings: Vec<String>,
}

/// Measures the parts `doc` is missing on the live machine `m` with the
/// parts of `reg`, as `settings` say, saving through `obs` after every part.
pub fn run(
    reg: &Registry,
    m: &Machine,
    doc: &mut ReportResults,
    settings: RunSettings,
    obs: &mut dyn Observer,
) -> RunOutcome {
    let RunSettings {
        budget_s,
        started: t0,
        costs,
        isa,
        command_line,
        warnings,
    } = settings;
    let todo = parts_to_measure(doc);
    let run_no = start_run(doc, budget_s, command_line);
    if let Some(r) = doc.runs.last_mut() {
        r.costs = Some(costs.clone());
        r.warnings = warnings;
    }
    for &p in &todo {
        doc.parts.mark(p, PartStatus::Pending, None);
    }
    let mut costs = costs;
    let mut interrupted = false;
    let mut looks = DriftLooks::default();
    if !todo.is_empty() && m.is_live() {
        let predicted = look_cost_s(m, &costs, look_bytes_for(m, doc.buffer_bytes));
        // The first look's real time decides the others: the costs probed
        // on small buffers can miss what large ones cost (a last-level
        // cache larger than the probe's buffer).
        let verdict = looks_fit(predicted, budget_s, false).and_then(|()| {
            probe_drift(m, isa, doc, run_no, t0, None, &mut looks);
            looks_fit(looks.took_s, budget_s, true)
        });
        if let Err(why) = verdict {
            looks.off = true;
            doc.drift.unwatched.push(Unwatched { run: run_no, why });
        }
    }
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
        // Re-planned from the time really left and the costs learnt so
        // far, less the last look's (as long as the first).
        let left = budget_s - t0.elapsed().as_secs_f64() - RESERVE_SECONDS - looks.last_look_s();
        let env = PlanEnv {
            m,
            mode: doc.mode,
            size: doc.buffer_bytes as usize,
            costs: &costs,
            live: m.is_live(),
        };
        let share = allocate(reg, &env, &todo[i..], left)
            .first()
            .map_or(0.0, |x| x.1);
        let plan = plan_part(reg, &env, p, share);
        obs.part_started(p, i, todo.len(), share);
        doc.parts
            .start(p, share, run_no, rfc3339_utc(SystemTime::now()));
        doc.parts.get_mut(p).plan = Some(plan);
        let ctx = PartContext {
            m,
            mode: doc.mode,
            isa,
            size: doc.buffer_bytes as usize,
            costs: costs.clone(),
            obs: &mut *obs,
            part: p,
        };
        interrupted |= run_part(reg, doc, p, share, ctx, &mut costs);
        let last = i + 1 == todo.len();
        if !looks.off && (last || looks.due(budget_s)) {
            probe_drift(m, isa, doc, run_no, t0, Some(p), &mut looks);
        }
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
        r.outcome = outcome.name().into();
    }
    outcome
}

/// Seconds of parts between two looks at the host's speed: a look (four
/// short measurements: a chase, one thread reading, two reading together
/// on buffers of 4x the last-level cache, and a modified line passed
/// between two CPUs) took 0.6-1 s on a host with a 32 MiB cache, 14 s on
/// one with 480 MiB (its chase's warm-up alone 6 s), and parts shorter
/// than this drift little apart. [`LOOK_SHARE`] bounds their sum.
const PROBE_GAP_S: f64 = 5.0;

/// Where a look costs more than a fifth of [`PROBE_GAP_S`], the parts
/// between two looks last at least this many times the last look: on an
/// emulated CPU a look faults its buffers at a twentieth of the speed
/// (16-20 s a look in the Quartet guest, whose 11 parts measured 98 s of
/// a report that took 300 s), and looking after every part would spend
/// more of the run watching the host than measuring it.
const PROBE_GAP_LOOKS: f64 = 5.0;

/// When the report last looked at the host's speed, how long that look
/// took, and how long all its looks took; `off` when this run does not
/// look ([`looks_fit`]).
#[derive(Debug, Default)]
struct DriftLooks {
    last: Option<Instant>,
    took_s: f64,
    spent_s: f64,
    off: bool,
}

impl DriftLooks {
    /// Whether enough parts ran since the last look for another, and the
    /// looks' share of `budget_s` holds it and the last one.
    fn due(&self, budget_s: f64) -> bool {
        self.last
            .is_some_and(|t| t.elapsed().as_secs_f64() >= self.gap_s())
            && self.spent_s + 2.0 * self.took_s <= LOOK_SHARE * budget_s
    }

    /// The time to keep for the look after the last part: as long as the
    /// last look took (0 when the run does not look).
    fn last_look_s(&self) -> f64 {
        if self.off || self.last.is_none() {
            0.0
        } else {
            self.took_s
        }
    }

    /// Seconds of parts the next look waits for.
    fn gap_s(&self) -> f64 {
        PROBE_GAP_S.max(PROBE_GAP_LOOKS * self.took_s)
    }
}

/// Looks at the host's speed now ([`numalab::measure::probe::probe_speed`])
/// and adds it to the document's drift probes; on the live machine only,
/// and not once a signal asked the report to stop.
fn probe_drift(
    m: &Machine,
    isa: Isa,
    doc: &mut ReportResults,
    run: u32,
    t0: Instant,
    after: Option<PartName>,
    looks: &mut DriftLooks,
) {
    let Some(cpu) = m.allowed_cpus.first() else {
        return;
    };
    if !m.is_live() || cancel::requested() {
        return;
    }
    let bytes = look_bytes_for(m, doc.buffer_bytes);
    let each = std::time::Duration::from_secs_f64(crate::budget::LOOK_MEASUREMENT_S);
    let started = Instant::now();
    let speed = numalab::measure::probe::probe_speed(m, cpu, isa, bytes, each);
    looks.last = Some(Instant::now());
    looks.took_s = started.elapsed().as_secs_f64();
    looks.spent_s += looks.took_s;
    doc.drift.probes.push(DriftProbe {
        run,
        at_s: t0.elapsed().as_secs_f64(),
        after: after.map(|p| p.name().to_string()),
        latency_ns: speed.latency_ns,
        read_gbps: speed.read_gbps,
        pair_read_gbps: speed.pair_read_gbps,
        pair_c2c_ns: speed.pair_c2c_ns,
    });
    doc.drift.refresh();
}

/// Records a new run of the report; returns its number.
fn start_run(doc: &mut ReportResults, budget_s: f64, command_line: Vec<String>) -> u32 {
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
        costs: None,
        warnings: Vec::new(),
    });
    run_no
}

/// Runs one part within `share` seconds and records how it ended (done,
/// failed, interrupted); corrects `costs` by what its fixed costs really
/// were. Returns whether a signal interrupted it.
fn run_part(
    reg: &Registry,
    doc: &mut ReportResults,
    p: PartName,
    share: f64,
    mut ctx: PartContext,
    costs: &mut Costs,
) -> bool {
    let t_part = Instant::now();
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| reg.part(p).run(&mut ctx, share)));
    let elapsed = t_part.elapsed().as_secs_f64();
    let mut interrupted = false;
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
        Ok(Ok(measured)) => {
            costs.factor = corrected_factor(
                costs.factor,
                measured.measuring_s,
                measured.fixed_s,
                elapsed,
            );
            store(reg, doc, p, measured);
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
    doc.parts.get_mut(p).elapsed_s = Some(elapsed);
    interrupted
}

/// Stores a done part's result, its verification and note.
fn store(reg: &Registry, doc: &mut ReportResults, p: PartName, measured: Measured<PartResult>) {
    let rec = doc.parts.get_mut(p);
    rec.verified = Some(reg.part(p).verified(&measured.result));
    rec.result = Some(measured.result);
    rec.status = PartStatus::Done;
    rec.reason = measured.note;
    if let Some(r) = doc.runs.last_mut() {
        r.measured.push(p);
    }
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
    doc.model = crate::predicted::model_section(doc);
    doc.summary = summarize(doc);
}

/// Environment fields that differ between two captures, as sentences.
fn environment_changes(a: &Environment, b: &Environment) -> Vec<String> {
    let va = serde_json::to_value(a).unwrap_or_default();
    let vb = serde_json::to_value(b).unwrap_or_default();
    let mut out = Vec::new();
    for &key in crate::compare::ENV_KEYS.iter().chain(&["cgroup"]) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::registry::REPORT;

    fn part(name: &str) -> PartName {
        REPORT.find(name).unwrap()
    }

    #[test]
    fn a_dear_look_at_the_host_waits_for_five_times_its_cost_of_parts() {
        let looks = |took_s: f64| DriftLooks {
            last: Some(Instant::now()),
            took_s,
            spent_s: took_s,
            off: false,
        };
        assert!(!DriftLooks::default().due(100.0), "no first look yet");
        assert!(!looks(0.8).due(100.0), "a look just taken");
        // A look of under a second: every 5 s of parts, as before.
        assert_eq!(looks(0.8).gap_s(), 5.0);
        // A look of 17 s (the Quartet guest): 85 s of parts between looks.
        assert_eq!(looks(17.0).gap_s(), 85.0);
        // Long enough after the last look, a look is due while the looks
        // so far, it and the last stay within a quarter of the budget.
        let mut l = looks(1.0);
        l.last = Some(Instant::now() - std::time::Duration::from_secs(6));
        assert!(l.due(12.0), "1 + 2 x 1 s of a 12 s budget's 3 s");
        assert!(!l.due(11.0), "3 s over a quarter of 11 s");
        l.spent_s = 5.0;
        assert!(!l.due(24.0), "5 + 2 s over 6 s");
        // The last look's time is kept from the parts only while looking.
        assert_eq!(l.last_look_s(), 1.0);
        l.off = true;
        assert_eq!(l.last_look_s(), 0.0);
        assert_eq!(DriftLooks::default().last_look_s(), 0.0);
    }

    /// Three looks within a quarter of the budget, or a sentence that says
    /// what a look costs and the budget that holds three.
    #[test]
    fn a_run_looks_at_the_host_only_when_three_looks_fit_a_quarter_of_its_budget() {
        assert_eq!(looks_fit(0.8, 10.0, false), Ok(()));
        assert_eq!(looks_fit(2.0, 24.0, true), Ok(()));
        assert_eq!(
            looks_fit(7.8, 4.0, false),
            Err("a look at the host's speed would take about 7.8 s here, and the 3 that estimate a drift more than a quarter of the 4 s budget (--budget 94 or more, or a smaller --size, gives them)".into())
        );
        assert_eq!(
            looks_fit(14.0, 80.0, true),
            Err("its one look at the host's speed took 14.0 s, and the 3 that estimate a drift more than a quarter of the 80 s budget (--budget 168 or more, or a smaller --size, gives them)".into())
        );
    }

    /// A look's predicted time grows with its buffers and, through the
    /// chase's warm-up, with the last-level cache (up to twice it).
    #[test]
    fn a_look_costs_its_buffers_faults_and_chase_and_four_measurements() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let llc = m.last_level_cache_bytes().unwrap() as f64;
        let c = Costs::reference();
        let small = look_cost_s(&m, &c, 64 << 20);
        let big = look_cost_s(&m, &c, 1 << 30);
        // The floor: four measurements of 0.1 s and their fixed costs.
        assert!(small > 0.4 && small < big, "{small} {big}");
        let b = (1u64 << 30) as f64;
        let by_hand = 2.0 * c.place(b, 1)
            + c.place(2.0 * b, 2)
            + c.chase(b, llc)
            + 2.0 * c.measurement(0.1, c.bandwidth_sample(b, 1))
            + c.measurement(0.1, c.bandwidth_sample(b, 2))
            + c.measurement(0.1, 0.0);
        assert!((big - by_hand).abs() < 1e-12, "{big} {by_hand}");
        // Slower costs, a slower look.
        let tcg = Costs::preset("tcg").unwrap();
        assert!(look_cost_s(&m, &tcg, 64 << 20) > 10.0 * small);
    }

    #[test]
    fn resume_budget_is_the_missing_parts_share() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let all = REPORT.all();
        let mut doc = new_document(&REPORT, &m, None, Mode::Default, 100.0, 64 << 20, &all);
        for &p in &all {
            // As on the live machine, where full-only parts are not
            // applicable outside --full.
            let status = match REPORT.available(p, &m, Mode::Default) {
                Ok(()) => PartStatus::Pending,
                Err(_) => PartStatus::NotApplicable,
            };
            doc.parts.mark(p, status, None);
        }
        assert!((resume_budget(&REPORT, &doc) - 100.0).abs() < 1e-9);
        // Everything but the sweeps done: their weights' share.
        let sweeps = all.len() - 2;
        for p in &all[..sweeps] {
            doc.parts.mark(*p, PartStatus::Done, None);
        }
        let weight = |ps: &[PartName]| -> f64 {
            ps.iter()
                .map(|&p| REPORT.part(p).info().weight_in(Mode::Default))
                .sum()
        };
        let share = 100.0 * weight(&all[sweeps..]) / weight(&all);
        assert!(share > 20.0 && share < 23.0, "{share}");
        assert!(
            (resume_budget(&REPORT, &doc) - share).abs() < 1e-9,
            "{}",
            resume_budget(&REPORT, &doc)
        );
        // Never below 5 s.
        doc.parts.mark(part("sweep"), PartStatus::Done, None);
        doc.budget_s = 10.0;
        assert_eq!(resume_budget(&REPORT, &doc), 5.0);
    }

    #[test]
    fn a_topology_file_report_needs_the_machine() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let doc = new_document(
            &REPORT,
            &m,
            None,
            Mode::Default,
            240.0,
            64 << 20,
            &REPORT.all(),
        );
        for (p, s) in doc.parts.statuses() {
            assert_eq!(s, PartStatus::NeedsMachine, "{p:?}");
        }
        assert!(!doc.complete);
        assert!(parts_to_measure(&doc).is_empty());
        let why = doc.parts.get(part("sizes")).reason.clone().unwrap();
        assert!(why.contains("qemu-ring4-cpuless-hmat.xml"), "{why}");
        assert_eq!(doc.summary.node_count, 5);
    }

    #[test]
    fn full_only_parts_run_with_full_and_say_so_otherwise() {
        let mut m = fixture("qemu-quartet-4n2c-ring.xml");
        m.source = Source::Live;
        let blas = part("blas");
        for mode in [Mode::Quick, Mode::Default] {
            // Asked for by name or not, outside --full it is not applicable.
            for selected in [REPORT.all(), vec![blas]] {
                let doc = new_document(&REPORT, &m, None, mode, 60.0, 64 << 20, &selected);
                let r = doc.parts.get(blas);
                assert_eq!(r.status, PartStatus::NotApplicable, "{mode:?}");
                assert_eq!(r.reason.as_deref(), Some("runs with --full"));
                assert!(!parts_to_measure(&doc).contains(&blas));
            }
        }
        let doc = new_document(&REPORT, &m, None, Mode::Full, 60.0, 64 << 20, &[blas]);
        assert_eq!(doc.parts.get(blas).status, PartStatus::Pending);
        assert_eq!(parts_to_measure(&doc), vec![blas]);
    }

    #[test]
    fn parts_left_out_are_not_selected() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let doc = new_document(
            &REPORT,
            &m,
            None,
            Mode::Quick,
            60.0,
            64 << 20,
            &[part("c2c")],
        );
        assert_eq!(doc.parts.get(part("c2c")).status, PartStatus::NeedsMachine);
        let s = doc.parts.get(part("sizes"));
        assert_eq!(s.status, PartStatus::NotSelected);
        assert_eq!(s.reason.as_deref(), Some("left out with --parts"));
    }
}
