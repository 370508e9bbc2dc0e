//! The placement sweep (`numalab sweep`, report part `sweep`): the classic
//! truth table, one case per symmetry class, normalized to the fastest
//! case, idle and under background load, and the classic questions
//! answered from it. The report's runs under background load are the
//! study's scenarios (`scenarios_part.rs`).

//!
//! `mod.rs` is the report part; `text.rs` the command's text; `claims.rs`
//! the questions' claims and the summary's sentences.

mod claims;
mod text;

pub use claims::question_claims;
use claims::{crossfire, writers};
pub use text::{answer, findings_text, list_text, memory_text, plan_text, text};

use crate::claims::Claim;
use crate::csv::{num, opt, yes, Table};
use crate::html::Section;
use crate::model::{CountValue, PartPlan, Work};
use crate::part::{Measured, PartContext, PartInfo, ReportPart};
use crate::plan::max_cpus_per_node;
use crate::plan::PlanEnv;
use crate::summary::SummaryBuilder;
use crate::svg::{bar_chart, Bar, BarGroup};
use numalab::experiments::sweep::{
    case_counts, findings, run_sweep, Access, CaseCount, Findings, SweepRequest, SweepResult,
};
use numalab::machine::Machine;
use numalab::measure::kernels::BandwidthKernel;
use numalab::measure::stats::StopRule;
use numalab::placement::{PlacementError, Thp};
use numalab::text::escape::xml as esc;
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
                // The case's own interval, on the normalized scale (the
                // baseline's uncertainty is not in it).
                interval: Bar::relative_interval(c.normalized, c.seconds.rel_ci),
                series: None,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::check_claim;
    use crate::claims::Basis;
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
            ["Whether two writers saturate a node was not measured within the sweep's budget: it needs two local writers on one node and one writer alone there, on an idle machine; `numalab sweep --thread-counts 1,2` measures it, as does a report with a larger --budget or --full."]
        );
        assert_eq!(s.claims()[0].basis, Basis::Run);
    }
}
