//! The placement sweep (`numalab sweep`, report part `sweep`): the classic
//! truth table, one case per symmetry class, normalized to the fastest
//! case, idle and under background load, and the classic questions
//! answered from it. The report's runs under background load are the
//! study's scenarios (`scenarios_part.rs`).

use crate::claims::{Basis, Claim, ClaimKind, Derivation, RankRule, Relation, Threshold};
use crate::csv::{num, opt, yes, Table};
use crate::html::Section;
use crate::model::{CountValue, PartPlan, Work};
use crate::part::{Measured, PartContext, PartInfo, ReportPart};
use crate::plan::max_cpus_per_node;
use crate::plan::PlanEnv;
use crate::summary::{finding, SummaryBuilder};
use crate::svg::{bar_chart, Bar, BarGroup};
use numalab::experiments::sweep::{
    case_counts, compared_classes, crossfire_cases, findings, hop_cases, run_sweep,
    two_writer_cases, widest_class, Access, CaseCount, CaseResult, Findings, PlannedCase,
    SweepRequest, SweepResult, SweepRun, FINDING_NOISE,
};
use numalab::machine::Machine;
use numalab::measure::kernels::BandwidthKernel;
use numalab::measure::memory_traffic::{label, MemoryTraffic, Source};
use numalab::measure::stats::StopRule;
use numalab::placement::{PlacementError, Thp};
use numalab::text::escape::xml as esc;
use numalab::text::format::bytes as format_bytes;
use numalab::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

/// A placement sweep and the classic questions answered from it (a report
/// part's result).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepOutcome {
    pub sweep: SweepResult,
    pub findings: Vec<Findings>,
}

/// The sweep part: the folded sweep on an idle machine.
pub struct SweepPart;

/// The folded sweep on an idle machine.
pub const IDLE: SweepPart = SweepPart;

/// Shortest budget of one sweep case and its overhead (calibration and
/// warm-up sample), seconds, as the sweep's own budget rule counts them.
const MIN_CASE_S: f64 = 0.1;
const CASE_OVERHEAD_S: f64 = 0.06;

impl SweepPart {
    /// The request for `budget` seconds and its plan. The sweep keeps its
    /// deadline itself: it runs every class when they fit, and otherwise
    /// as many as fit, every hop class first; its smallest form is one case
    /// per thread count and background.
    fn work(&self, env: &PlanEnv, budget: f64) -> Result<(SweepRequest, PartPlan), PlacementError> {
        let m = env.m;
        let cpus = m.allowed_cpus.clone();
        let threads = if cpus.len() >= 2 { vec![1, 2] } else { vec![1] };
        let backgrounds = vec![None];
        let mem_list: Vec<u32> = m.memory_nodes().iter().collect();
        // Each memory node holds one buffer per foreground thread, and each
        // node's CPUs may carry a background thread with a local buffer.
        let max_threads = threads.iter().max().copied().unwrap_or(1);
        let per_node = max_cpus_per_node(m);
        let bytes = env.fit_all(&mem_list, max_threads + per_node, env.size, 0.6);
        let mem: IdSet = mem_list.iter().copied().collect();
        let req = SweepRequest {
            threads,
            cpus: cpus.clone(),
            mem_nodes: mem,
            accesses: vec![Access::Read, Access::Write],
            read_kernel: BandwidthKernel::LineRead,
            write_kernel: BandwidthKernel::LineWrite,
            isa: numalab::measure::kernels::Isa::detect_best(),
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
            twins: true,
        };
        let counts = cached_case_counts(m, &req).map_err(PlacementError::Invalid)?;
        let levels = req.backgrounds.len();
        let planned: u64 = counts.iter().map(|c| c.planned as u64).sum::<u64>() * levels as u64;
        let fewest: u64 = counts.iter().map(|c| c.hop_classes as u64).sum::<u64>() * levels as u64;
        let total: u64 = counts.iter().map(|c| c.total).sum::<u64>() * levels as u64;
        let c = env.costs;
        // Set-up: every memory node's buffers for the foreground threads.
        let setup = c.place((bytes * mem_list.len() * max_threads) as f64, 1);
        let case = |per: f64| c.factor * CASE_OVERHEAD_S + per;
        // The sweep runs at least one case of each thread count, whatever
        // its deadline; every hop class once it has the time.
        let first_cases = (counts.len() * levels) as u64;
        let smallest = setup + first_cases as f64 * case(MIN_CASE_S);
        let longest = setup + planned as f64 * case(2.0);
        let predicted = budget.clamp(smallest, longest.max(smallest));
        let cases =
            (((predicted - setup) / case(MIN_CASE_S)).floor() as u64).clamp(first_cases, planned);
        let per = ((predicted - setup) / cases.max(1) as f64 - case(0.0)).clamp(MIN_CASE_S, 2.0);
        let cut = if cases >= planned {
            None
        } else if cases >= fewest {
            Some(format!(
                "{cases} of {planned} symmetry classes ({total} cases), every hop class kept: all would not fit the budget"
            ))
        } else {
            Some(format!(
                "{cases} of {planned} symmetry classes ({total} cases): not every hop class fits the budget ({fewest} needed), the most distinct first"
            ))
        };
        let plan = PartPlan {
            predicted_s: predicted,
            measuring_s: per * cases as f64,
            work: Work {
                measurements: cases as usize,
                per_measurement_s: per,
                threads: max_threads,
                buffer_bytes: bytes as u64,
                ..Work::default()
            }
            .with(
                "classes",
                CountValue::Of(cases, planned),
                if cases == planned {
                    format!("{cases} cases")
                } else {
                    format!("{cases} cases of {planned}")
                },
            ),
            cut,
        };
        Ok((req, plan))
    }
}

/// [`case_counts`] of the last few requests: planning a sweep on a big
/// machine builds every class (hundreds of MB on 24 nodes), and the budget
/// planner asks for the same counts many times.
fn cached_case_counts(m: &Machine, req: &SweepRequest) -> Result<Vec<CaseCount>, String> {
    use std::sync::Mutex;
    type Counted = (String, Result<Vec<CaseCount>, String>);
    static CACHE: Mutex<Vec<Counted>> = Mutex::new(Vec::new());
    let distances: Vec<u64> = req
        .mem_nodes
        .iter()
        .flat_map(|a| req.mem_nodes.iter().map(move |b| (a, b)))
        .map(|(a, b)| m.distance(a, b))
        .collect();
    let node_cpus: Vec<String> = req
        .mem_nodes
        .iter()
        .map(|n| m.allowed_cpus_of(n).to_string())
        .collect();
    let key = format!(
        "{}|{}|{:?}|{:?}|{:?}|{}",
        req.cpus,
        req.mem_nodes,
        req.threads,
        distances,
        node_cpus,
        m.cores.len()
    );
    if let Ok(cache) = CACHE.lock() {
        if let Some((_, v)) = cache.iter().find(|(k, _)| *k == key) {
            return v.clone();
        }
    }
    let v = case_counts(m, req);
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= 8 {
            drop(cache.remove(0));
        }
        cache.push((key, v.clone()));
    }
    v
}

impl ReportPart for SweepPart {
    type Result = SweepOutcome;

    fn info(&self) -> PartInfo {
        PartInfo {
            key_figures: &["two_writers_gain", "crossfire_ratio"],
            aliases: &["sweeps"],
            keeps_deadline: true,
            table_group: Some("sweep"),
            ..PartInfo::new("sweep", "Placement sweep, idle", "numalab sweep", 12.0)
        }
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        match self.work(env, budget) {
            Ok((_, plan)) => plan,
            // Not applicable here: nothing to plan.
            Err(_) => PartPlan::none(),
        }
    }

    /// Not where even its plan is too large (tens of nodes with SMT: more
    /// classes than a sweep may plan).
    fn applicable(&self, m: &Machine) -> Result<(), String> {
        PlanEnv::for_applicability(m, |env| self.work(env, 0.0).map(|_| ())).map_err(|e| match e {
            PlacementError::Invalid(why) => format!("the sweep cannot be planned here: {why}"),
            other => other.to_string(),
        })
    }

    /// One and two threads (one with a single CPU) over every allowed CPU
    /// and memory node, reads and writes, within a deadline of `budget`.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<SweepOutcome>, PlacementError> {
        let (mut req, plan) = self.work(&ctx.env(), budget)?;
        req.isa = ctx.isa;
        req.budget = Some(Duration::from_secs_f64(budget));
        let r = run_sweep(ctx.m, &req, &mut |_, _, w| ctx.step(w))?;
        let f = findings(&r);
        let outcome = SweepOutcome {
            sweep: r,
            findings: f,
        };
        // The sweep keeps its own deadline: nothing to learn about fixed costs.
        Ok(Measured::new(outcome, plan.predicted_s, 0.0))
    }

    fn verified(&self, r: &SweepOutcome) -> bool {
        r.sweep.verified
    }

    fn text(&self, r: &SweepOutcome, _m: &Machine) -> String {
        // The answers as the summary's claims say them.
        let base = format!("/parts/{}/result", self.info().name);
        let mut claims = question_claims(r, &base).into_iter();
        let mut s = text(&r.sweep);
        for set in &r.findings {
            let _ = writeln!(s, "\nfindings, {}:", set.condition);
            for c in claims.by_ref().take(set.findings.len()) {
                let _ = writeln!(s, "  {}", c.text);
            }
        }
        s
    }

    fn tables(&self, r: &SweepOutcome, _m: &Machine) -> Vec<Table> {
        let part = self.info().name;
        let s = r;
        let mut rules: Vec<&str> = s
            .sweep
            .runs
            .iter()
            .map(|r| r.normalization.as_str())
            .collect();
        rules.dedup();
        let title = format!(
            "Placement sweep: one representative case per symmetry class; normalized: {}",
            rules.join("; ")
        );
        let mut t = Table::new(
            "sweep",
            &title,
            &[
                "part",
                "condition",
                "threads",
                "labels",
                "hop_class",
                "class_size",
                "sharing",
                "normalized",
                "total_seconds_per_pass",
                "seconds_per_pass",
                "rel_ci",
                "memory_gbps",
                "verified",
            ],
        );
        let mut f = Table::new(
            "sweep-findings",
            "The classic questions answered from the sweeps",
            &[
                "part",
                "condition",
                "question",
                "title",
                "answer",
                "ratio",
                "detail",
            ],
        );
        for run in &s.sweep.runs {
            let cond = run.condition();
            for c in &run.cases {
                t.rows.push(vec![
                    part.into(),
                    cond.clone(),
                    run.threads.to_string(),
                    c.labels.join(" "),
                    c.hop_class.clone(),
                    c.class_size.to_string(),
                    c.sharing.clone(),
                    num(c.normalized, 4),
                    num(c.total_seconds, 6),
                    num(c.seconds.median, 6),
                    num(c.seconds.rel_ci, 4),
                    num(c.threads.iter().map(|t| t.memory_gbps).sum(), 3),
                    yes(c.verified),
                ]);
            }
        }
        for set in &s.findings {
            for x in &set.findings {
                f.rows.push(vec![
                    part.into(),
                    set.condition.clone(),
                    x.question.clone(),
                    x.title.clone(),
                    answer(x.holds).into(),
                    opt(x.ratio, 3),
                    x.detail.clone(),
                ]);
            }
        }
        vec![t, f]
    }

    fn html(&self, r: &SweepOutcome, s: &mut Section) {
        chart(s, "fig-sweep", r, "Idle machine");
        let base = format!("/parts/{}/result", self.info().name);
        s.html(&findings_html(r, &question_claims(r, &base)));
    }

    fn summarize(&self, r: &SweepOutcome, s: &mut SummaryBuilder) {
        for c in question_claims(r, s.base()) {
            s.claim(c);
        }
        writers(s, &r.sweep);
        crossfire(s, r);
    }
}

/// What a sweep will run, one line per thread count: the cases of the
/// full enumeration and, folded, the classes under the machine tree's
/// `machine` automorphisms (of which `nodes` move the nodes) and thread
/// exchange.
pub fn plan_text(
    req: &SweepRequest,
    plans: &[(usize, u64, Vec<PlannedCase>)],
    nodes: &str,
    machine: &str,
) -> String {
    let mut s = String::new();
    for (t, total, cases) in plans {
        let _ = writeln!(
            s,
            "sweep: {t} thread(s): {total} cases ({} CPUs x {} memory nodes x {} access(es), per thread){}",
            req.cpus.len(),
            req.mem_nodes.len(),
            req.accesses.len(),
            if req.full {
                String::new()
            } else {
                format!(
                    ", {} classes under the machine tree's {machine} automorphism{} ({nodes} of the nodes) and thread exchange",
                    cases.len(),
                    if machine == "1" { "" } else { "s" },
                )
            }
        );
    }
    s
}

/// The cases of a plan (`sweep --list`): label, hop class and class size.
pub fn list_text(plans: &[(usize, u64, Vec<PlannedCase>)]) -> String {
    let mut s = String::new();
    for (t, _, cases) in plans {
        let _ = writeln!(
            s,
            "\n{t} thread(s): {:<28} {:>6} {:>10}",
            "case", "hops", "class size"
        );
        for c in cases {
            let _ = writeln!(
                s,
                "  {:<36} {:>6} {:>10}",
                c.label(),
                c.hop_class(),
                c.class_size
            );
        }
    }
    s
}

/// The answer to a classic question: `holds`, `does not hold` or `cannot tell`.
pub fn answer(holds: Option<bool>) -> &'static str {
    match holds {
        Some(true) => "holds",
        Some(false) => "does not hold",
        None => "cannot tell",
    }
}

/// The exact symmetry order of a result (older results have the number
/// only).
fn symmetry_order(r: &SweepResult) -> String {
    if r.node_symmetry_order.is_empty() {
        r.node_automorphisms.to_string()
    } else {
        r.node_symmetry_order.clone()
    }
}

/// The truth table of every run, fastest case first.
/// What the "mem GB/s" column is: assumed (with why nothing was counted),
/// or assumed per thread beside what the memory controllers measured over
/// all the cases.
pub fn memory_text(t: &MemoryTraffic) -> String {
    match t.source {
        Source::Assumed => format!("mem GB/s {}", label(t)),
        Source::Measured => format!(
            "mem GB/s per thread assumed (write-allocate counted); over all cases, whole machine: {:.2} GB/s {}",
            t.gbps.unwrap_or(0.0),
            label(t)
        ),
    }
}

pub fn text(r: &SweepResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "placement sweep: kernels {} / {}, {} per buffer, {} node symmetr{}{}{}",
        r.read_kernel,
        r.write_kernel,
        format_bytes(r.buffer_bytes),
        symmetry_order(r),
        if r.node_automorphisms == 1 {
            "y"
        } else {
            "ies"
        },
        if r.machine_symmetry_order.is_empty() {
            String::new()
        } else {
            format!(" ({} of the whole machine tree)", r.machine_symmetry_order)
        },
        if r.folded {
            ", folded"
        } else {
            ", every case (--full)"
        }
    );
    let _ = writeln!(s, "{}", memory_text(&r.memory_traffic));
    for run in &r.runs {
        let cond = run.condition();
        let _ = writeln!(
            s,
            "\n{} thread(s), {cond}: {} of {} classes run ({} cases in all; {} of {} hop classes), {:.1} s",
            run.threads,
            run.cases_run,
            run.classes,
            run.total_cases,
            run.hop_classes_run,
            run.hop_classes,
            run.elapsed_s
        );
        let _ = writeln!(
            s,
            "  norm: {}; ms/pass: the slowest thread's",
            run.normalization
        );
        let width = run
            .cases
            .iter()
            .map(|c| c.labels.join(" ").len())
            .max()
            .unwrap_or(0)
            .max(26);
        let _ = writeln!(
            s,
            "  {:<width$} {:>9} {:>7} {:>6} {:>10} {:>9}  verified",
            "labels (node.core.r|w.mem)", "hops", "class", "norm", "ms/pass", "mem GB/s",
        );
        let mut order: Vec<&CaseResult> = run.cases.iter().collect();
        order.sort_by(|a, b| a.normalized.total_cmp(&b.normalized));
        for c in order {
            let gbps: f64 = c.threads.iter().map(|t| t.memory_gbps).sum();
            let bg = if c.background_achieved.is_empty() {
                String::new()
            } else {
                format!(
                    "  bg {:.2} GB/s x{}",
                    c.background_achieved.iter().sum::<f64>()
                        / c.background_achieved.len() as f64
                        / 1e9,
                    c.background_achieved.len()
                )
            };
            // Threads taking turns on one CPU, or SMT siblings, are marked.
            let share = match c.sharing.as_str() {
                "cpu" => "  (one CPU)",
                "core" => "  (SMT siblings)",
                _ => "",
            };
            let _ = writeln!(
                s,
                "  {:<width$} {:>9} {:>7} {:>6.2} {:>10.2} {:>9.2}  {}{bg}{share}",
                c.labels.join(" "),
                c.hop_class,
                c.class_size,
                c.normalized,
                c.seconds.median * 1e3,
                gbps,
                if c.verified {
                    "yes".to_string()
                } else {
                    format!("NO: {}", c.problems.join("; "))
                },
            );
        }
        twins_text(&mut s, run);
    }
    let bad: Vec<String> = r
        .buffers
        .iter()
        .filter(|b| !b.at_start.verified || !b.at_end.verified)
        .map(|b| format!("thread {} node {}", b.thread, b.node))
        .collect();
    let _ = writeln!(
        s,
        "\nbuffers: {} ({} per thread), {}",
        r.buffers.len(),
        r.mem_nodes.len(),
        if bad.is_empty() {
            "every page on its node at the start and at the end".to_string()
        } else {
            format!("NOT where asked: {}", bad.join(", "))
        }
    );
    s
}

/// The classes measured at two members: both members' median ms per pass
/// and the rank test's ratio of the twin to the representative.
fn twins_text(s: &mut String, run: &SweepRun) {
    if run.twins.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "  twins (a second member of {} class(es), interleaved runs; finding e):",
        run.twins.len()
    );
    for t in &run.twins {
        let ms =
            |v: &[f64]| numalab::measure::stats::median(v.to_vec()).map_or(f64::NAN, |m| m * 1e3);
        let test = t.test.as_ref().map_or_else(
            || "no rank test in this result".to_string(),
            |c| c.describe(),
        );
        let _ = writeln!(
            s,
            "    {} ({:.2} ms) vs {} ({:.2} ms), {}: {test}{}",
            t.labels.join(" "),
            ms(&t.samples),
            t.twin_labels.join(" "),
            ms(&t.twin_samples),
            t.moved_by.name(),
            if t.verified { "" } else { "  NOT verified" }
        );
    }
}

/// The findings as a table: question, answer, ratio, detail.
pub fn findings_text(f: &[Findings]) -> String {
    let mut s = String::new();
    for set in f {
        let _ = writeln!(s, "\nfindings, {}:", set.condition);
        for x in &set.findings {
            let answer = answer(x.holds);
            let _ = writeln!(
                s,
                "  ({}) {}\n      {answer}{}: {}",
                x.question,
                x.title,
                x.ratio.map_or(String::new(), |r| format!(" ({r:.2}x)")),
                x.detail
            );
        }
    }
    s
}
/// Bars of one sweep part, one chart per run (thread count, background):
/// grouped by hop class, each bar a case's time normalized to the fastest
/// case of its thread count, in a container with the part's id.
fn chart(sec: &mut Section, id: &str, s: &SweepOutcome, title: &str) {
    sec.html(&format!("<div id=\"{id}\">\n"));
    for run in &s.sweep.runs {
        let cond = run
            .background
            .as_ref()
            .map(|b| format!(", {}", b.short()))
            .unwrap_or_default();
        let mut by_class: BTreeMap<String, Vec<Bar>> = BTreeMap::new();
        for c in &run.cases {
            by_class.entry(c.hop_class.clone()).or_default().push(Bar {
                label: c.labels.join(" "),
                value: c.normalized,
                tooltip: format!(
                    "{}: {:.2}x the baseline's total time, {:.2} ms per pass (slowest thread), class of {} case{}{}{}",
                    c.labels.join(" "),
                    c.normalized,
                    c.seconds.median * 1e3,
                    c.class_size,
                    if c.class_size == 1 { "" } else { "s" },
                    match c.sharing.as_str() {
                        "cpu" => "; both threads on one CPU",
                        "core" => "; SMT siblings",
                        _ => "",
                    },
                    if c.verified {
                        ""
                    } else {
                        "; placement NOT verified"
                    }
                ),
                flagged: !c.verified,
            });
        }
        let groups: Vec<BarGroup> = by_class
            .into_iter()
            .map(|(class, mut bars)| {
                bars.sort_by(|a, b| a.value.total_cmp(&b.value));
                BarGroup { label: class, bars }
            })
            .collect();
        let threads = format!(
            "{} thread{}",
            run.threads,
            if run.threads == 1 { "" } else { "s" }
        );
        sec.figure(
            bar_chart(
                &format!("{id}-{}t", run.threads),
                &format!("{title}: {threads}{cond}"),
                "total time / baseline (x)",
                &groups,
                Some(1.0),
            ),
            &format!(
                "{} of {} symmetry classes ({} cases in all), one bar per class, grouped by hop class (r/w and hops of each thread: w0/w1 = one writer local, one a hop away). Normalized: {}; 1.0 = that baseline, higher is slower. Labels: node.core.r|w.memory-node per thread.",
                run.cases_run, run.classes, run.total_cases, run.normalization
            ),
        );
    }
    sec.html("</div>\n");
}

/// The classic questions' answers, one list per condition, each line
/// rendered from its claim (`claims`: [`question_claims`], in order).
fn findings_html(s: &SweepOutcome, claims: &[Claim]) -> String {
    let mut h = String::new();
    let mut lines = claims.iter();
    for set in &s.findings {
        let _ = writeln!(h, "<h3>Findings, {}</h3>\n<ul>", esc(&set.condition));
        for _ in &set.findings {
            if let Some(c) = lines.next() {
                let _ = writeln!(h, "<li>{}</li>", esc(&c.text));
            }
        }
        h.push_str("</ul>\n");
    }
    h
}

/// The answers of the classic questions as claims (`detail`: sentences of
/// the sweep's section), one per question and condition, in order. The
/// ratio each answer rests on is re-derived from the cases it compares,
/// and the verdict re-judged by the findings' rule (3% noise; 6% spread
/// within a hop class).
pub fn question_claims(s: &SweepOutcome, base: &str) -> Vec<Claim> {
    let at = |p: String| Derivation::at(format!("{base}/{p}"));
    let secs = |ri: usize, v: &[usize]| -> Option<(f64, Derivation)> {
        let run = &s.sweep.runs[ri];
        let vals: Vec<f64> = v.iter().map(|&i| run.cases[i].seconds.median).collect();
        let m = numalab::measure::stats::median(vals)?;
        let of = v
            .iter()
            .map(|&i| at(format!("sweep/runs/{ri}/cases/{i}/seconds/median")))
            .collect();
        Some((m, Derivation::Median { of }))
    };
    let mut out = Vec::new();
    for (fi, set) in s.findings.iter().enumerate() {
        let run_of = |pick: &dyn Fn(&SweepRun) -> bool| {
            s.sweep
                .runs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.condition() == set.condition && pick(r))
                .max_by_key(|(_, r)| r.threads)
                .map(|(i, _)| i)
        };
        for (k, f) in set.findings.iter().enumerate() {
            let path = |x: &str| format!("{base}/findings/{fi}/findings/{k}/{x}");
            let mut c = Claim::new(ClaimKind::Detail, "sweep-question", Basis::Timing, "")
                .fact("q", &f.question, path("question"))
                .fact("title", &f.title, path("title"))
                .fact("h", f.holds, path("holds"))
                .fact("detail", &f.detail, path("detail"));
            if f.holds.is_none() && f.ratio.is_none() {
                // An unanswered question rests on what ran, not on times.
                c.basis = Basis::Run;
            }
            // The ratio and the verdict, re-derived from the cases.
            let mut ratio: Option<(f64, Derivation)> = None;
            // The verdict is the rank test's on the cases' samples
            // (measure::compare): the claim names the samples, so that the
            // checker reruns the test; (a) and (e) sum up many tests, their
            // verdicts stay facts with the widest test's p-value.
            let samples = |ri: usize, v: &[usize]| -> Vec<String> {
                let run = &s.sweep.runs[ri];
                v.iter()
                    .map(|&i| {
                        let leaf = if run.cases[i].samples.is_empty() {
                            "seconds/median"
                        } else {
                            "samples"
                        };
                        format!("{base}/sweep/runs/{ri}/cases/{i}/{leaf}")
                    })
                    .collect()
            };
            let ranked =
                |c: Claim, a: Vec<String>, b: Vec<String>, rule: RankRule| match &f.comparison {
                    Some(x) => c.ranked_as("test", (a, b), rule, x, path("verdict")),
                    None => c,
                };
            let stated = |c: Claim| match &f.comparison {
                Some(x) => c.fact("p", x.p_value, path("comparison/p_value")).fact(
                    "verdict",
                    f.verdict,
                    path("verdict"),
                ),
                None => c,
            };
            match f.question.as_str() {
                "a" => {
                    if let Some(ri) = run_of(&|r| r.threads == 1) {
                        let mut each = Vec::new();
                        for access in [Access::Read, Access::Write] {
                            let h = hop_cases(&s.sweep.runs[ri], access);
                            if h.len() >= 2 {
                                if let (Some(first), Some(last)) =
                                    (secs(ri, &h[0].1), secs(ri, &h[h.len() - 1].1))
                                {
                                    each.push((
                                        last.0 / first.0,
                                        Derivation::ratio(last.1, first.1),
                                    ));
                                }
                            }
                        }
                        if !each.is_empty() {
                            let v = each.iter().map(|e| e.0).fold(f64::NEG_INFINITY, f64::max);
                            ratio = Some((
                                v,
                                Derivation::Max {
                                    of: each.into_iter().map(|e| e.1).collect(),
                                },
                            ));
                        }
                    }
                }
                "b" | "c" => {
                    if let Some(ri) = run_of(&|r| r.threads == 2) {
                        let run = &s.sweep.runs[ri];
                        let (x, y, rule) = if f.question == "b" {
                            let (a, b) = crossfire_cases(run);
                            (a, b, RankRule::Larger)
                        } else {
                            let (local, moved) = two_writer_cases(run);
                            (moved, local, RankRule::Smaller)
                        };
                        if let (Some(xs), Some(ys)) = (secs(ri, &x), secs(ri, &y)) {
                            ratio =
                                Some((xs.0 / ys.0, Derivation::ratio(xs.1.clone(), ys.1.clone())));
                            c = c.fig("x", xs.0, "s", 9, xs.1).fig("y", ys.0, "s", 9, ys.1);
                            c = ranked(c, samples(ri, &x), samples(ri, &y), rule);
                        }
                    }
                }
                "e" => {
                    // Twins' rank test (Hodges–Lehmann ratio of samples):
                    // stated with its p-value, never re-derived from medians.
                    c = stated(c);
                }
                "d" => {
                    if let Some(ri) = run_of(&|_| true) {
                        let run = &s.sweep.runs[ri];
                        if let Some((_, lo, hi)) = widest_class(run) {
                            let one = |i: usize| secs(ri, &[i]);
                            if let (Some(x), Some(y)) = (one(hi), one(lo)) {
                                ratio =
                                    Some((x.0 / y.0, Derivation::ratio(x.1.clone(), y.1.clone())));
                                c = c.fig("x", x.0, "s", 9, x.1).fig("y", y.0, "s", 9, y.1);
                                let rule = RankRule::EqualWithin {
                                    margin: 2.0 * FINDING_NOISE,
                                    corrected_for: compared_classes(run).max(1),
                                };
                                c = ranked(c, samples(ri, &[hi]), samples(ri, &[lo]), rule);
                            }
                        }
                    }
                }
                _ => c = stated(c),
            }
            c.template = match (&ratio, f.ratio) {
                (Some((v, d)), Some(_)) => {
                    c = c.fig("ratio", *v, "x", 2, d.clone());
                    "({q}) {title}: {?h} ({ratio}x) — {detail}".into()
                }
                _ => "({q}) {title}: {?h} — {detail}".into(),
            };
            if !c.rank_tests.is_empty() {
                // The words come from the test the checker reruns.
                c.template = c.template.replace("{?h}", "{test}");
            }
            out.push(c.render());
        }
    }
    out
}

/// Two writers on one node vs one writer alone, from the idle sweep:
/// memory bytes moved per second together.
fn writers(s: &mut SummaryBuilder, r: &SweepResult) {
    let m = s.machine;
    let idle = |t: usize| {
        r.runs
            .iter()
            .position(|x| x.threads == t && x.background.is_none())
    };
    // The case exists wherever a node has two usable CPUs: when it was
    // not measured, the sentence says so instead of nothing.
    let not_measured = |s: &mut SummaryBuilder| {
        s.claim(Claim::new(
            ClaimKind::Finding,
            "writers",
            Basis::Run,
            "Whether two writers saturate a node was not measured within the sweep's budget: it needs two local writers on one node and one writer alone there, on an idle machine; `numalab sweep --threads 1,2` measures it, as does a report with a larger --budget or --full.",
        ))
    };
    let two_cpus = m
        .cpu_nodes()
        .iter()
        .any(|n| m.allowed_cpus_of(n).len() >= 2);
    let (Some(i1), Some(i2)) = (idle(1), idle(2)) else {
        if two_cpus {
            not_measured(s);
        }
        return;
    };
    let (r1, r2) = (&r.runs[i1], &r.runs[i2]);
    let local_write = |c: &CaseResult| {
        c.threads
            .iter()
            .all(|t| t.case.access == Access::Write && t.case.mem == t.case.node)
    };
    let gbps = |ri: usize, ci: usize, t: usize| {
        s.at(&format!(
            "sweep/runs/{ri}/cases/{ci}/threads/{t}/memory_gbps"
        ))
    };
    let mut best = None;
    for (ci, c2) in r2
        .cases
        .iter()
        .enumerate()
        .filter(|(_, c)| local_write(c) && c.sharing == "none")
    {
        let node = c2.threads[0].case.node;
        if c2.threads.iter().any(|t| t.case.node != node) {
            continue;
        }
        let alone: Vec<(usize, f64)> = r1
            .cases
            .iter()
            .enumerate()
            .filter(|(_, c)| local_write(c) && c.threads[0].case.node == node)
            .map(|(i, c)| (i, c.threads[0].memory_gbps))
            .collect();
        if alone.iter().any(|(_, g)| *g > 0.0) {
            best = Some((ci, node, alone));
            break;
        }
    }
    let Some((ci, node, alone)) = best else {
        if two_cpus {
            not_measured(s);
        } else {
            s.claim(
                Claim::new(
                    ClaimKind::Finding,
                    "writers",
                    Basis::Topology,
                    "Whether two writers saturate a node cannot be told here: no node has two CPUs this process may use (the sweep's CPUs: {cpus}).",
                )
                .fact("cpus", &r.cpus, s.path("sweep/cpus")),
            );
        }
        return;
    };
    let c2 = &r2.cases[ci];
    let together: f64 = c2.threads.iter().map(|t| t.memory_gbps).sum();
    let together_d = Derivation::Sum {
        of: (0..c2.threads.len()).map(|t| gbps(i2, ci, t)).collect(),
    };
    let (alone, alone_d) = (
        alone.iter().map(|(_, g)| *g).fold(0.0, f64::max),
        Derivation::Max {
            of: alone.iter().map(|(i, _)| gbps(i1, *i, 0)).collect(),
        },
    );
    let gain = together / alone;
    let gain_d = Derivation::ratio(together_d.clone(), alone_d.clone());
    s.set_key("two_writers_gain", gain, gain_d.clone());
    let saturate = if m.cpu_nodes().len() > 1 {
        "two writers saturate the node's memory; on an idle machine a second writer's data may be better one hop away."
    } else {
        "two writers saturate the node's memory."
    };
    s.claim(
        finding(
            "writers",
            "Two threads writing their own local buffers on node {node} move {together} GB/s of memory traffic together, {gain}x one writer alone ({alone} GB/s): {verdict}",
        )
        .fig("node", node as f64, "node", 0, s.at(&format!("sweep/runs/{i2}/cases/{ci}/threads/0/node")))
        .fig("together", together, "GB/s", 1, together_d)
        .fig("alone", alone, "GB/s", 1, alone_d)
        .fig("gain", gain, "x", 2, gain_d)
        .fig("rule", 1.3, "x", 1, Derivation::Const { value: 1.3 })
        .compare(
            "verdict",
            ("gain", Relation::Less, "rule"),
            Threshold::Share(0.0),
            (saturate, "two writers do not saturate the node's memory."),
        ),
    );
}

fn crossfire(s: &mut SummaryBuilder, r: &SweepOutcome) {
    let Some((fi, k, f)) = r.findings.iter().enumerate().find_map(|(fi, set)| {
        (set.condition == "idle")
            .then(|| {
                set.findings
                    .iter()
                    .enumerate()
                    .find(|(_, x)| x.question == "b")
            })
            .flatten()
            .map(|(k, x)| (fi, k, x))
    }) else {
        return;
    };
    let two = r
        .sweep
        .runs
        .iter()
        .position(|x| x.threads == 2 && x.background.is_none());
    let (cross, no_cross) = two
        .map(|ri| crossfire_cases(&r.sweep.runs[ri]))
        .unwrap_or_default();
    let secs = |ri: usize, v: &[usize]| {
        s.median_of(v.iter().map(|&ci| {
            (
                r.sweep.runs[ri].cases[ci].seconds.median,
                format!("sweep/runs/{ri}/cases/{ci}/seconds/median"),
            )
        }))
    };
    let measured = two.and_then(|ri| Some((secs(ri, &cross)?, secs(ri, &no_cross)?)));
    match (f.holds, measured) {
        (Some(_), Some(((x, xd), (n, nd)))) => {
            s.set_key("crossfire_ratio", x / n, Derivation::ratio(xd.clone(), nd.clone()));
            s.claim(
                finding(
                    "crossfire",
                    "Crossfire (two threads each writing the other's node): {verdict}: crossfire takes {ratio}x the time of no crossfire (medians of {nx} crossfire and {nn} no-crossfire cases; the classic idle result is > 1, by more than 3% here).",
                )
                .fig("x", x, "s", 6, xd.clone())
                .fig("n", n, "s", 6, nd.clone())
                .fig("ratio", x / n, "x", 2, Derivation::ratio(xd, nd))
                .fig("nx", cross.len() as f64, "count", 0, Derivation::Const { value: cross.len() as f64 })
                .fig("nn", no_cross.len() as f64, "count", 0, Derivation::Const { value: no_cross.len() as f64 })
                .compare(
                    "verdict",
                    ("x", Relation::Greater, "n"),
                    Threshold::Share(0.03),
                    ("crossfire hurts", "crossfire does not hurt here"),
                ),
            );
        }
        _ => s.claim(
            Claim::new(
                ClaimKind::Finding,
                "crossfire",
                Basis::Run,
                "Crossfire (two threads each writing the other's node): whether it hurts cannot be told: {why}.",
            )
            .fact("why", &f.detail, s.path(&format!("findings/{fi}/findings/{k}/detail"))),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::check_claim;
    use numalab::experiments::sweep::test_cases::{case, two_threads};
    use numalab::measure::compare::Verdict;

    /// Two writers on a ring: crossfire 1.3 s against no crossfire 1.0 s,
    /// both local 1.0 s against one buffer a hop away 0.8 s.
    fn ring_sweep() -> SweepOutcome {
        let cases = vec![
            case(&[(0, 0, 1, 1), (1, 2, 0, 1)], 1.3),
            case(&[(0, 0, 1, 1), (1, 2, 3, 1)], 1.0),
            case(&[(0, 0, 0, 0), (0, 1, 0, 0)], 1.0),
            case(&[(0, 0, 0, 0), (0, 1, 1, 1)], 0.8),
        ];
        let sweep = SweepResult {
            folded: true,
            node_automorphisms: 8,
            node_symmetry_order: "8".into(),
            machine_symmetry_order: "128".into(),
            cpus: (0..8).collect(),
            mem_nodes: (0..4).collect(),
            accesses: vec![Access::Write],
            read_kernel: "read".into(),
            write_kernel: "write".into(),
            buffer_bytes: 64 << 20,
            budget_s: None,
            runs: vec![two_threads(cases, 4)],
            buffers: Vec::new(),
            verified: true,
            warnings: Vec::new(),
            elapsed_s: 1.0,
            memory_traffic: Default::default(),
        };
        SweepOutcome {
            findings: findings(&sweep),
            sweep,
        }
    }

    #[test]
    fn crossfire_and_two_writer_verdicts_are_rank_tests_the_checker_reruns() {
        let r = ring_sweep();
        let base = "/parts/sweep/result";
        let doc = serde_json::json!({
            "parts": {"sweep": {"result": serde_json::to_value(&r).unwrap()}}
        });
        let claims = question_claims(&r, base);
        let by_q = |q: &str| {
            claims
                .iter()
                .find(|c| c.facts[0].value == q)
                .unwrap_or_else(|| panic!("no ({q}) in {claims:#?}"))
        };
        for c in &claims {
            assert_eq!(check_claim(c, &doc), Vec::<String>::new(), "{}", c.text);
        }
        let (b, c) = (by_q("b"), by_q("c"));
        assert_eq!(b.verdict("test"), Some(Verdict::Holds), "{}", b.text);
        assert!(b.text.contains(": holds (1.30x)"), "{}", b.text);
        assert_eq!(c.verdict("test"), Some(Verdict::Holds), "{}", c.text);
        assert!(c.text.contains(": holds (0.80x)"), "{}", c.text);
        assert_eq!(
            b.rank_tests[0].a,
            [format!("{base}/sweep/runs/0/cases/0/samples")]
        );
        // Crossfire's samples no longer slower: (b)'s "holds" fails, both
        // in the sentence and in the verdict the sweep recorded.
        let mut same = doc.clone();
        let no_cross = same
            .pointer(&format!("{base}/sweep/runs/0/cases/1/samples"))
            .unwrap()
            .clone();
        *same
            .pointer_mut(&format!("{base}/sweep/runs/0/cases/0/samples"))
            .unwrap() = no_cross;
        let bad = check_claim(b, &same);
        assert!(
            bad.iter()
                .any(|e| e.contains("rank test test:")
                    && e.contains("the samples give 'cannot tell'")),
            "{bad:?}"
        );
        // A case kept without samples counts its median once.
        let mut r2 = ring_sweep();
        r2.sweep.runs[0].cases[0].samples.clear();
        let claims2 = question_claims(&r2, base);
        let b2 = claims2.iter().find(|c| c.facts[0].value == "b").unwrap();
        assert_eq!(
            b2.rank_tests[0].a,
            [format!("{base}/sweep/runs/0/cases/0/seconds/median")]
        );
    }

    #[test]
    fn two_writers_not_measured_says_so_and_how_to_measure_it() {
        // Only two-thread cases ran: no writer alone to compare with.
        let r = ring_sweep();
        let m = crate::fixture("qemu-quartet-4n2c-ring.xml");
        let mut s = SummaryBuilder::for_tests(&m, "/parts/sweep/result");
        writers(&mut s, &r.sweep);
        let texts: Vec<&str> = s.claims().iter().map(|c| c.text.as_str()).collect();
        assert_eq!(
            texts,
            ["Whether two writers saturate a node was not measured within the sweep's budget: it needs two local writers on one node and one writer alone there, on an idle machine; `numalab sweep --threads 1,2` measures it, as does a report with a larger --budget or --full."]
        );
        assert_eq!(s.claims()[0].basis, Basis::Run);
    }
}
