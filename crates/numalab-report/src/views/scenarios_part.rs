//! The report part `sweep-scenarios`: the classic two-thread study's
//! figures (`numalab sweep --scenarios`, `experiments/sweep/scenarios.rs`)
//! run within the report's budget, judged by the rank test and charted as
//! the study drew them: one bar chart per scenario, bars named by the
//! study's roles and hops, normalised to the study's baselines, a dashed
//! line at 1.0.
//!
//! **What runs.** As many of the scenarios this machine can have as the
//! budget pays for, added in [`PRIORITY`] order, each with at least
//! [`MIN_ROUNDS`] interleaved rounds; never fewer than one scenario. With
//! the scenarios all in, more rounds (up to [`max_rounds`]) and then
//! longer cases. `--full` runs every scenario, with more rounds. A
//! scenario this machine cannot have is shown with its reason; one the
//! budget left out is named as such.

use crate::claims::{Basis, Claim, ClaimKind, Derivation, Lacks, RankRule};
use crate::csv::{num, yes, Table};
use crate::html::Section;
use crate::model::Mode;
use crate::model::{largest_fitting, CountValue, PartPlan, Work};
use crate::part::{Measured, PartContext, PartInfo, ReportPart};
use crate::plan::max_cpus_per_node;
use crate::plan::PlanEnv;
use crate::summary::SummaryBuilder;
use crate::svg::{bar_chart, Bar, BarGroup};
use numalab::experiments::sweep::{
    plan_scenarios, run_scenarios, Normalize, Scenario, ScenarioCaseResult, ScenarioFinding,
    ScenarioPlan, ScenarioRequest, ScenarioSet, ScenariosResult, MIN_ROUNDS,
    SCENARIO_BACKGROUND_START_S, SCENARIO_CASE_OVERHEAD_S, SCENARIO_MIN_CASE_S,
};
use numalab::machine::Machine;
use numalab::measure::compare::Verdict;
use numalab::measure::kernels::{BandwidthKernel, Isa};
use numalab::measure::stats::StopRule;
use numalab::placement::{PlacementError, Thp};
use numalab::text::escape::xml as esc;
use numalab::IdSet;
use serde::{Deserialize, Serialize};
use std::fmt::Write;
use std::time::Duration;

/// The order scenarios are added in as the budget allows. The idle pairs
/// come first: crossfire (Fig. 6) and two threads on one node (Fig.
/// 10-11) answer questions (b) and (c), and every loaded finding is judged
/// against them ("the idle result reverses", "the advantage shrinks").
/// Then the loaded runs that can reverse them: full subscription at very
/// high load (Fig. 9, the study's reversal and what one background run of
/// a report should show), the one-node writers under rising load (Fig.
/// 12-15), high subscription (Fig. 7-8). One thread over 0, 1 and 2 hops
/// (Fig. 3-5) comes last: the idle sweep and the matrices of the report
/// already measure it.
pub const PRIORITY: [Scenario; 6] = [
    Scenario::Crossfire,
    Scenario::TwoOnOneNode,
    Scenario::CrossfireFull,
    Scenario::TwoWritersLoaded,
    Scenario::CrossfireHigh,
    Scenario::OneThreadHops,
];

/// Longest budget of one case in one round, seconds (the command's
/// default): beyond it more rounds say more than longer cases.
const MAX_CASE_S: f64 = 0.3;

/// Most rounds a report of `mode` runs: [`MIN_ROUNDS`] in `--quick`, the
/// command's default 6, and 10 in `--full`.
pub fn max_rounds(mode: Mode) -> usize {
    match mode {
        Mode::Quick => MIN_ROUNDS,
        Mode::Default => 6,
        Mode::Full => 10,
    }
}

/// The part: the study's scenarios under the report's budget.
pub struct ScenariosPart;

/// The scenarios run by the report, and which the budget left out.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenariosOutcome {
    /// The scenarios this machine can have, in the order the part adds
    /// them ([`PRIORITY`]).
    pub priority: Vec<Scenario>,
    /// Those of them the budget left out.
    pub left_out: Vec<Scenario>,
    /// What ran: every scenario's plan (with the reason where this machine
    /// cannot have it), the cases normalised as the study did, the
    /// findings.
    pub measured: ScenariosResult,
}

/// What one round of a set of scenarios runs.
struct Shape {
    /// Cases measured per round (each scenario's cases at each level, and
    /// the baselines no idle scenario measures).
    cases: usize,
    /// Background starts per round (one per loaded level).
    starts: usize,
    /// Most background threads at once.
    widest: usize,
    /// Memory nodes holding the foreground's buffers.
    mem_nodes: usize,
}

impl Shape {
    fn of(set: &ScenarioSet) -> Shape {
        let idle: Vec<&Vec<String>> = set
            .applicable()
            .filter(|p| p.background.is_none())
            .flat_map(|p| p.cases.iter().map(|c| &c.labels))
            .collect();
        let baselines: Vec<_> = set
            .one_thread_baseline
            .iter()
            .chain(set.two_thread_baseline.iter())
            .collect();
        let mut mem = IdSet::new();
        let mut sh = Shape {
            cases: baselines
                .iter()
                .filter(|c| !idle.contains(&&c.labels))
                .count(),
            starts: 0,
            widest: 0,
            mem_nodes: 0,
        };
        for c in &baselines {
            for t in &c.threads {
                mem.insert(t.mem);
            }
        }
        for p in set.applicable() {
            let levels = p.background.as_ref().map_or(1, |b| b.levels.len());
            sh.cases += p.cases.len() * levels;
            if let Some(b) = &p.background {
                sh.starts += b.levels.len();
                sh.widest = sh.widest.max(b.cpus.len());
            }
            for t in p.cases.iter().flat_map(|c| c.threads.iter()) {
                mem.insert(t.mem);
            }
        }
        sh.mem_nodes = mem.len();
        sh
    }
}

/// `all` with only the applicable scenarios of `chosen` (the others this
/// machine cannot have stay, with their reasons), and only the baselines
/// those need.
fn selected(all: &ScenarioSet, chosen: &[Scenario]) -> ScenarioSet {
    let mut set = all.clone();
    set.scenarios
        .retain(|p| p.not_applicable.is_some() || chosen.contains(&p.name));
    let one = set.applicable().any(|p| p.threads == 1);
    let two = set.applicable().any(|p| p.threads == 2);
    if !one {
        set.one_thread_baseline = None;
    }
    if !two {
        set.two_thread_baseline = None;
    }
    set
}

/// The plan of the part for `budget` seconds: the request, the scenarios
/// left out, and the plan.
struct Planned {
    req: ScenarioRequest,
    priority: Vec<Scenario>,
    left_out: Vec<Scenario>,
    plan: PartPlan,
}

impl ScenariosPart {
    /// What runs for `budget` seconds (see the module documentation), and
    /// what that costs: buffers placed once, then per round every case
    /// (its overhead and its measurement) and every background start.
    fn work(&self, env: &PlanEnv, budget: f64) -> Result<Planned, PlacementError> {
        let m = env.m;
        let all = plan_scenarios(m, &Scenario::ALL);
        let priority: Vec<Scenario> = PRIORITY
            .iter()
            .copied()
            .filter(|s| all.applicable().any(|p| p.name == *s))
            .collect();
        if priority.is_empty() {
            return Err(PlacementError::Invalid(format!(
                "no scenario of the study can run here ({})",
                all.not_applicable_reasons()
            )));
        }
        let n = priority.len();
        let mem_list: Vec<u32> = m.memory_nodes().iter().collect();
        // Each memory node holds the two foreground threads' buffers, and a
        // node's CPUs may each carry a background thread's local buffer.
        let bytes = env.fit_all(&mem_list, 2 + max_cpus_per_node(m), env.size, 0.6);
        // A background thread reads at a set rate: its buffer only has to
        // be larger than the caches, and is placed at every level's start.
        let bg_bytes = env.min_memory_bytes(bytes);
        let c = env.costs;
        let sample = c.bandwidth_sample(bytes as f64, 2);
        // The runner budgets its own overheads at face value when it fits
        // its rounds into the deadline: predict them no smaller, or it
        // would cut rounds the plan promised.
        let overhead = c.factor.max(1.0);
        let shapes: Vec<Shape> = (0..=n)
            .map(|k| Shape::of(&selected(&all, &priority[..k])))
            .collect();
        let setup = |sh: &Shape| c.place((bytes * 2 * sh.mem_nodes) as f64, 2);
        let start = |sh: &Shape| {
            overhead * SCENARIO_BACKGROUND_START_S
                + c.place((bg_bytes * sh.widest) as f64, sh.widest)
                + c.threads(sh.widest)
        };
        let round_fixed = |sh: &Shape| {
            sh.starts as f64 * start(sh)
                + sh.cases as f64
                    * (overhead * SCENARIO_CASE_OVERHEAD_S + c.factor * c.measurement_s)
        };
        let cost = |(k, rounds): (usize, usize), per: f64| {
            let sh = &shapes[k];
            setup(sh)
                + rounds as f64
                    * (sh.starts as f64 * start(sh)
                        + sh.cases as f64
                            * (overhead * SCENARIO_CASE_OVERHEAD_S + c.measurement(per, sample)))
        };
        let top = max_rounds(env.mode);
        let forms = forms(env.mode, n);
        let i = largest_fitting(forms.len(), budget, |i| cost(forms[i], SCENARIO_MIN_CASE_S));
        let (k, rounds) = forms[i];
        let sh = &shapes[k];
        let per = (((budget - setup(sh)) / rounds as f64 - round_fixed(sh))
            / sh.cases.max(1) as f64)
            .clamp(SCENARIO_MIN_CASE_S, MAX_CASE_S);
        let predicted = cost((k, rounds), per);
        let left_out: Vec<Scenario> = priority[k..].to_vec();
        let cut = cut_text(&priority, k, rounds, top);
        let req = ScenarioRequest {
            set: selected(&all, &priority[..k]),
            read_kernel: BandwidthKernel::LineRead,
            write_kernel: BandwidthKernel::LineWrite,
            isa: Isa::detect_best(),
            buffer_bytes: bytes,
            background_bytes: bg_bytes,
            thp: Some(Thp::On),
            rounds,
            rule: StopRule {
                warmup: 1,
                min_reps: 3,
                max_reps: 5,
                target_rel_ci: 0.02,
                budget: Duration::from_secs_f64(per),
            },
            min_sample_s: crate::model::SAMPLE_S,
            normalize: Normalize::Study,
            // The runner keeps the deadline: it starts a round only when
            // one fits what is left. Never below the smallest form, which
            // runs whatever the budget.
            budget: Some(Duration::from_secs_f64(budget.max(predicted))),
        };
        let plan = PartPlan {
            predicted_s: predicted,
            measuring_s: per * (rounds * sh.cases) as f64,
            work: Work {
                measurements: rounds * sh.cases,
                per_measurement_s: per,
                threads: 2 + sh.widest,
                buffer_bytes: bytes as u64,
                ..Work::default()
            }
            .count_of("scenarios", "scenarios", k, n)
            .with(
                "rounds",
                CountValue::One(rounds as u64),
                numalab::text::format::plural(rounds, "round", "rounds"),
            ),
            cut,
        };
        Ok(Planned {
            req,
            priority,
            left_out,
            plan,
        })
    }
}

/// The forms of the part, in increasing cost, as (scenarios, rounds):
/// scenarios one by one at the fewest rounds, then more rounds; `--full`
/// has every one of the `n` scenarios from the start.
fn forms(mode: Mode, n: usize) -> Vec<(usize, usize)> {
    let top = max_rounds(mode);
    if mode == Mode::Full {
        (MIN_ROUNDS..=top).map(|r| (n, r)).collect()
    } else {
        (1..=n)
            .map(|k| (k, MIN_ROUNDS))
            .chain((MIN_ROUNDS + 1..=top).map(|r| (n, r)))
            .collect()
    }
}

/// What the budget cut from the study (the first `k` of `priority` run,
/// `rounds` of `top`), when it cut something.
fn cut_text(priority: &[Scenario], k: usize, rounds: usize, top: usize) -> Option<String> {
    let left_out = &priority[k..];
    if !left_out.is_empty() {
        Some(format!(
            "{k} of {} scenarios ({}), {rounds} rounds: the budget leaves out {}",
            priority.len(),
            join_names(&priority[..k]),
            join_names(left_out)
        ))
    } else if rounds < top {
        Some(format!(
            "every scenario, {rounds} of {top} rounds: more would not fit the budget"
        ))
    } else {
        None
    }
}

fn join_names(v: &[Scenario]) -> String {
    v.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
}

impl ReportPart for ScenariosPart {
    type Result = ScenariosOutcome;

    fn info(&self) -> PartInfo {
        PartInfo {
            aliases: &["sweeps"],
            keeps_deadline: true,
            ..PartInfo::new(
                "sweep-scenarios",
                "The classic study's scenarios",
                "numalab sweep --scenarios all",
                10.0,
            )
        }
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        match self.work(env, budget) {
            Ok(p) => p.plan,
            // Not applicable here: nothing to plan.
            Err(_) => PartPlan::none(),
        }
    }

    /// Not where no scenario of the study can run (no node with both
    /// CPUs and memory).
    fn applicable(&self, m: &Machine) -> Result<(), String> {
        PlanEnv::for_applicability(m, |env| self.work(env, 0.0).map(|_| ())).map_err(|e| match e {
            PlacementError::Invalid(why) => why,
            other => other.to_string(),
        })
    }

    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<ScenariosOutcome>, PlacementError> {
        let Planned {
            mut req,
            priority,
            left_out,
            plan,
        } = self.work(&ctx.env(), budget)?;
        req.isa = ctx.isa;
        let m = ctx.m;
        let measured = run_scenarios(m, &req, &mut |_, _, label| ctx.step(label))?;
        let outcome = ScenariosOutcome {
            priority,
            left_out,
            measured,
        };
        // The runner keeps its own deadline: nothing to learn about fixed
        // costs.
        Ok(Measured::new(outcome, plan.predicted_s, 0.0).with_note(plan.cut.clone()))
    }

    fn verified(&self, r: &ScenariosOutcome) -> bool {
        r.measured.verified
    }

    fn text(&self, r: &ScenariosOutcome, _m: &Machine) -> String {
        let mut s = super::scenarios::plan_text(&r.measured.set);
        s.push('\n');
        s.push_str(&super::scenarios::text(&r.measured));
        if !r.left_out.is_empty() {
            let _ = writeln!(s, "\nleft out by the budget: {}", join_names(&r.left_out));
        }
        s
    }

    fn tables(&self, r: &ScenariosOutcome, _m: &Machine) -> Vec<Table> {
        vec![plan_table(r), cases_table(r), findings_table(r)]
    }

    fn html(&self, r: &ScenariosOutcome, s: &mut Section) {
        charts(s, r);
        let claims = finding_claims(r, "/parts/sweep-scenarios/result", ClaimKind::Detail);
        if !claims.is_empty() {
            let mut h = String::from("<h3>Findings</h3>\n<ul>\n");
            for c in &claims {
                let _ = writeln!(h, "<li>{}</li>", esc(&c.text));
            }
            if let Some(f) = r.measured.findings.first() {
                let _ = writeln!(h, "</ul>\n<p class=\"note\">Rule: {}.</p>", esc(&f.rule));
            } else {
                h.push_str("</ul>\n");
            }
            s.html(&h);
        }
        s.table("scenario-plan", false);
        s.table("scenarios", true);
        s.table("scenario-findings", true);
    }

    fn summarize(&self, r: &ScenariosOutcome, s: &mut SummaryBuilder) {
        // The idle answers and how load changes them go to the summary's
        // findings; each level's own answer is a sentence of the part's
        // section (`detail`), kept with the claims so the checker sees it.
        let all = finding_claims(r, s.base(), ClaimKind::Finding);
        for (f, mut c) in r.measured.findings.iter().zip(all) {
            if !(f.condition == "idle" || f.condition.starts_with("idle to")) {
                c.kind = ClaimKind::Detail;
            }
            s.claim(c);
        }
    }
}

/// Each finding as a claim of `kind`: the question, the claim, the
/// condition, the rank test's verdict and its figures (ratio, p), every
/// one read from the result at `base`.
pub fn finding_claims(r: &ScenariosOutcome, base: &str, kind: ClaimKind) -> Vec<Claim> {
    r.measured
        .findings
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let at = format!("{base}/measured/findings/{i}");
            let c = rank_test(finding_claim(f, &at, kind), r, f, base, &at);
            no_memory_away(c, r, f, base).render()
        })
        .collect()
}

/// (c) where its run has no buffer away from node A: every two-thread
/// case keeps both buffers local (0-0), so this machine has no memory node
/// to move a buffer to and the question cannot be answered here, however
/// long it runs. Such a claim is marked so (the summary lists it in one
/// line with the other questions this machine lacks a second memory node
/// for) and states the hops of the cases it rests on. A "cannot tell"
/// from noise has its comparison and is never marked.
fn no_memory_away(c: Claim, r: &ScenariosOutcome, f: &ScenarioFinding, base: &str) -> Claim {
    if f.question != "c" || f.verdict != Verdict::CannotTell || f.comparison.is_some() {
        return c;
    }
    let Some((ri, run)) = r
        .measured
        .runs
        .iter()
        .enumerate()
        .find(|(_, x)| x.scenario == f.scenario && x.condition() == f.condition)
    else {
        return c;
    };
    let pairs: Vec<(usize, &ScenarioCaseResult)> = run
        .cases
        .iter()
        .enumerate()
        .filter(|(_, x)| x.case.threads.len() == 2)
        .collect();
    let local = |x: &ScenarioCaseResult| x.case.threads.iter().all(|t| t.hops == Some(0));
    if pairs.is_empty() || !pairs.iter().all(|(_, x)| local(x)) {
        return c;
    }
    let mut c = c.not_answerable("classic scenario (c)", Lacks::SecondMemoryNode);
    for (ci, x) in pairs {
        for (ti, t) in x.case.threads.iter().enumerate() {
            c = c.fact(
                &format!("hops_{ci}_{ti}"),
                t.hops,
                format!("{base}/measured/runs/{ri}/cases/{ci}/threads/{ti}/hops"),
            );
        }
    }
    c
}

/// The rank test a finding's verdict comes from, on the rounds' total
/// times of the two cases it compares, so that the checker reruns it: (b)
/// says crossfire is the larger, (c) that the moved buffer is the smaller.
/// The answer of how load changes (c) compares per-round ratios, which no
/// path holds: its verdict stays a fact.
fn rank_test(c: Claim, r: &ScenariosOutcome, f: &ScenarioFinding, base: &str, at: &str) -> Claim {
    let rule = match f.question.as_str() {
        "b" => RankRule::Larger,
        "c" => RankRule::Smaller,
        _ => return c,
    };
    let runs = &r.measured.runs;
    let Some((ri, run)) = runs
        .iter()
        .enumerate()
        .find(|(_, x)| x.scenario == f.scenario && x.condition() == f.condition)
    else {
        return c;
    };
    let case = |name: &str| {
        run.cases
            .iter()
            .position(|x| x.case.name == name)
            .map(|ci| vec![format!("{base}/measured/runs/{ri}/cases/{ci}/total_s")])
    };
    match (case(&f.a), case(&f.b), &f.comparison) {
        (Some(a), Some(b), Some(x)) => {
            let mut c = c.ranked_as("test", (a, b), rule, x, format!("{at}/verdict"));
            // The words come from the test the checker reruns.
            c.template = c.template.replace("{?verdict}", "{test}");
            c
        }
        _ => c,
    }
}

fn finding_claim(f: &ScenarioFinding, at: &str, kind: ClaimKind) -> Claim {
    let path = |x: &str| format!("{at}/{x}");
    // Every answer rests on timings: its own comparison, or the verdicts
    // of the comparisons it sums up (under an emulated CPU it is withheld).
    let mut c = Claim::new(kind, "scenarios", Basis::Timing, "")
        .fact("q", &f.question, path("question"))
        .fact("title", &f.title, path("title"))
        .fact("condition", &f.condition, path("condition"))
        .fact("verdict", f.verdict, path("verdict"))
        .fact("detail", &f.detail, path("detail"));
    let why = match (&f.comparison, f.verdict) {
        (Some(x), _) => {
            c = c
                .fig(
                    "ratio",
                    x.ratio,
                    "x",
                    2,
                    Derivation::at(path("comparison/ratio")),
                )
                .fig(
                    "p",
                    x.p_value,
                    "p",
                    3,
                    Derivation::at(path("comparison/p_value")),
                );
            if f.verdict == Verdict::CannotTell {
                " (p = {p}: the difference is inside the noise)"
            } else {
                ""
            }
        }
        _ => "",
    };
    c.template = format!(
        "Classic scenario ({{q}}) {{title}}, {{condition}}: {{?verdict}} — {{detail}}{why}."
    );
    c
}

/// `0 hops`, `1 hop` for one thread; `0-1 hops` for two.
fn hops_label(c: &ScenarioCaseResult) -> String {
    let hops: Vec<Option<u32>> = c.case.threads.iter().map(|t| t.hops).collect();
    let word = |h: Option<u32>| h.map_or("?".to_string(), |h| h.to_string());
    match hops.as_slice() {
        [Some(1)] => "1 hop".into(),
        [one] => format!("{} hops", word(*one)),
        many => format!(
            "{} hops",
            many.iter().map(|h| word(*h)).collect::<Vec<_>>().join("-")
        ),
    }
}

/// A bar's label: the study's roles and the hops of each thread's memory,
/// `A.0.w.B + B.0.w.A (1-1 hops)`.
fn bar_label(c: &ScenarioCaseResult) -> String {
    format!("{} ({})", c.case.roles.join(" + "), hops_label(c))
}

/// One chart per scenario, in the study's figure order, in the container
/// `fig-scenarios`; a scenario that did not run says why.
fn charts(sec: &mut Section, r: &ScenariosOutcome) {
    let res = &r.measured;
    sec.html("<div id=\"fig-scenarios\">\n");
    if let Some(roles) = &res.set.roles {
        let node = |n: Option<u32>| n.map_or("none".to_string(), |n| format!("node {n}"));
        sec.note(&format!(
            "The study's roles here: A = node {}, B = {} (one hop from A), C = {} (one hop from B, not A). Labels: role.core.r|w.memory role per thread, then the hops of each thread's memory.",
            roles.a,
            node(roles.b),
            node(roles.c)
        ));
    }
    for p in &res.set.scenarios {
        let id = format!("fig-scenarios-{}", p.name.name());
        if let Some(why) = &p.not_applicable {
            sec.html(&format!(
                "<p class=\"missing\" id=\"{id}\">{} ({}): not applicable here: {}</p>\n",
                esc(p.name.name()),
                esc(&p.figure),
                esc(why)
            ));
            continue;
        }
        let runs: Vec<_> = res
            .runs
            .iter()
            .filter(|x| x.scenario == p.name.name())
            .collect();
        let groups: Vec<BarGroup> = runs
            .iter()
            .map(|run| BarGroup {
                label: run
                    .background
                    .as_ref()
                    .map_or_else(|| "idle".to_string(), |b| b.describe()),
                bars: run
                    .cases
                    .iter()
                    .map(|c| Bar {
                        label: bar_label(c),
                        value: c.normalized,
                        tooltip: format!(
                            "{}: {} · total of both threads {:.3} ms ±{:.1}% over {} rounds",
                            c.case.name,
                            c.case.labels.join(" "),
                            c.total_median_s * 1e3,
                            c.total_rel_ci * 100.0,
                            c.total_s.len()
                        ),
                        flagged: !c.verified,
                        // The total's own interval, on the normalized scale.
                        interval: Bar::relative_interval(c.normalized, c.total_rel_ci),
                        series: None,
                    })
                    .collect(),
            })
            .collect();
        let baseline = runs
            .iter()
            .flat_map(|x| x.cases.first())
            .map(|c| c.baseline.clone())
            .next()
            .unwrap_or_else(|| p.baseline.clone());
        sec.figure(
            bar_chart(
                &id,
                &format!("{}: {}", p.figure, p.title),
                "time / baseline (x)",
                &groups,
                Some(1.0),
            ),
            &format!(
                "{}. {} 1.0 (dashed) = the baseline {baseline}; higher is slower.{}",
                p.title,
                if p.threads == 1 {
                    "One thread's time over the fastest one-thread case, a local read."
                } else {
                    "The total time of both threads over the fastest idle two-thread case, two local readers (under load too, as the study did, so load shows as bars above 1)."
                },
                if p.background.is_some() {
                    " One group per background level."
                } else {
                    ""
                }
            ),
        );
    }
    for name in &r.left_out {
        sec.html(&format!(
            "<p class=\"missing\" id=\"fig-scenarios-{0}\">{0}: left out, the budget did not pay for it (give a larger --budget or --full).</p>\n",
            esc(name.name())
        ));
    }
    sec.html("</div>\n");
}

/// Every scenario: ran, left out by the budget, or not applicable and why.
fn plan_table(r: &ScenariosOutcome) -> Table {
    let mut t = Table::new(
        "scenario-plan",
        "The classic study's scenarios on this machine: run, left out by the budget, or not applicable (with the reason)",
        &[
            "scenario",
            "figure",
            "title",
            "status",
            "reason",
            "cases",
            "levels",
            "background_cpus",
            "subscription",
            "baseline",
        ],
    );
    let row = |p: &ScenarioPlan, status: &str, reason: &str| {
        let bg = p.background.as_ref();
        vec![
            p.name.name().to_string(),
            p.figure.clone(),
            p.title.clone(),
            status.to_string(),
            reason.to_string(),
            p.cases.len().to_string(),
            bg.map_or(String::new(), |b| b.levels.join(" ")),
            bg.map_or(String::new(), |b| {
                b.cpus.iter().copied().collect::<IdSet>().to_string()
            }),
            p.subscription.clone(),
            p.baseline.clone(),
        ]
    };
    for p in &r.measured.set.scenarios {
        match &p.not_applicable {
            Some(why) => t.rows.push(row(p, "not applicable", why)),
            None => t.rows.push(row(p, "run", "")),
        }
    }
    for s in &r.left_out {
        t.rows.push(vec![
            s.name().to_string(),
            s.figure().to_string(),
            s.title().to_string(),
            "left out".to_string(),
            "the budget did not pay for it".to_string(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
            String::new(),
        ]);
    }
    t
}

/// One row per case of every run, and the baselines.
fn cases_table(r: &ScenariosOutcome) -> Table {
    let mut t = Table::new(
        "scenarios",
        "The classic study's scenarios: per case and condition, the total time of the threads (median over the rounds) normalised as the study did",
        &[
            "scenario",
            "figure",
            "condition",
            "case",
            "roles",
            "labels",
            "hops",
            "normalized",
            "baseline",
            "total_median_s",
            "total_rel_ci",
            "makespan_median_s",
            "thread_s",
            "rounds",
            "verified",
        ],
    );
    let res = &r.measured;
    let mut row = |scenario: &str, figure: &str, cond: &str, c: &ScenarioCaseResult| {
        t.rows.push(vec![
            scenario.to_string(),
            figure.to_string(),
            cond.to_string(),
            c.case.name.clone(),
            c.case.roles.join(" + "),
            c.case.labels.join(" "),
            hops_label(c),
            num(c.normalized, 4),
            c.baseline.clone(),
            num(c.total_median_s, 6),
            num(c.total_rel_ci, 4),
            num(c.makespan_median_s, 6),
            c.thread_s
                .iter()
                .map(|x| num(*x, 6))
                .collect::<Vec<_>>()
                .join(" "),
            c.total_s.len().to_string(),
            yes(c.verified),
        ]);
    };
    for b in [&res.baselines.one_thread, &res.baselines.two_threads]
        .into_iter()
        .flatten()
    {
        row("baseline", "", "idle", b);
    }
    for run in &res.runs {
        for c in &run.cases {
            row(&run.scenario, &run.figure, &run.condition, c);
        }
    }
    t
}

/// The findings with their rank tests.
fn findings_table(r: &ScenariosOutcome) -> Table {
    let mut t = Table::new(
        "scenario-findings",
        "The study's questions (b) and (c) answered from the scenarios: rank test on the interleaved rounds (ratio a/b of total times, 95% CI, p)",
        &[
            "question",
            "title",
            "scenario",
            "condition",
            "verdict",
            "a",
            "b",
            "ratio",
            "ratio_low",
            "ratio_high",
            "p_value",
            "detail",
        ],
    );
    for f in &r.measured.findings {
        let x = f.comparison.as_ref();
        let n = |v: Option<f64>, d: usize| {
            v.filter(|v| v.is_finite())
                .map_or(String::new(), |v| num(v, d))
        };
        t.rows.push(vec![
            f.question.clone(),
            f.title.clone(),
            f.scenario.clone(),
            f.condition.clone(),
            f.verdict.words().to_string(),
            f.a.clone(),
            f.b.clone(),
            n(x.map(|x| x.ratio), 4),
            n(x.map(|x| x.ratio_low), 4),
            n(x.map(|x| x.ratio_high), 4),
            n(x.map(|x| x.p_value), 4),
            f.detail.clone(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scenarios result of `runs` over `set`, `rounds` rounds, with its
    /// findings drawn.
    fn result_of(set: ScenarioSet, runs: Vec<ScenarioRun>, rounds: usize) -> ScenariosResult {
        let mut res = ScenariosResult {
            set,
            normalize: Normalize::Study,
            rounds_planned: rounds,
            rounds_run: rounds,
            read_kernel: "line-read".into(),
            write_kernel: "line-write".into(),
            buffer_bytes: 1 << 20,
            background_bytes: 1 << 20,
            runs,
            baselines: BaselineResults {
                one_thread: None,
                two_threads: None,
            },
            buffers: Vec::new(),
            findings: Vec::new(),
            verified: true,
            warnings: Vec::new(),
            elapsed_s: 1.0,
        };
        res.findings = scenario_findings(&res);
        res
    }
    use crate::claims::check_claim;
    use crate::fixture;
    use crate::model::Costs;
    use numalab::experiments::sweep::{
        scenario_findings, BaselineResults, ScenarioCase, ScenarioRun,
    };

    fn env<'a>(m: &'a Machine, mode: Mode, costs: &'a Costs) -> PlanEnv<'a> {
        PlanEnv {
            m,
            mode,
            size: 64 << 20,
            costs,
            live: false,
        }
    }

    fn names(set: &ScenarioSet) -> Vec<&'static str> {
        set.applicable().map(|p| p.name.name()).collect()
    }

    #[test]
    fn the_quartet_adds_scenarios_by_priority_as_the_budget_grows() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let costs = Costs::reference();
        let e = env(&m, Mode::Default, &costs);
        // No budget: the smallest form, crossfire alone at the fewest rounds.
        let small = ScenariosPart.work(&e, 0.0).unwrap();
        assert_eq!(names(&small.req.set), vec!["crossfire"]);
        assert_eq!(small.req.rounds, MIN_ROUNDS);
        assert_eq!(small.priority.len(), 6);
        assert_eq!(small.left_out.len(), 5);
        assert_eq!(small.left_out[0], Scenario::TwoOnOneNode);
        let cut = small.plan.cut.as_deref().unwrap();
        assert!(cut.starts_with("1 of 6 scenarios (crossfire), 4 rounds: the budget leaves out two-on-one-node, crossfire-full"), "{cut}");
        // Only the two-thread baseline: no one-thread scenario runs.
        assert!(small.req.set.one_thread_baseline.is_none());
        assert_eq!(
            small.req.set.two_thread_baseline.as_ref().unwrap().roles,
            vec!["A.0.r.A", "B.0.r.B"]
        );
        // Crossfire's 3 cases and the baseline, 4 rounds.
        assert_eq!(small.plan.work.measurements, 4 * 4);
        assert_eq!(small.plan.work.get("scenarios"), Some(CountValue::Of(1, 6)));
        // Room for two: the idle one-node pair joins.
        let two = ScenariosPart
            .work(&e, small.plan.predicted_s * 3.0)
            .unwrap();
        assert!(names(&two.req.set).len() >= 2, "{:?}", names(&two.req.set));
        assert_eq!(names(&two.req.set)[..2], ["crossfire", "two-on-one-node"]);
        // Plenty: every scenario, the default's 6 rounds, no cut.
        let big = ScenariosPart.work(&e, 10_000.0).unwrap();
        assert_eq!(names(&big.req.set).len(), 6);
        assert_eq!(big.req.rounds, 6);
        assert!(big.plan.cut.is_none());
        assert!(big.left_out.is_empty());
        assert_eq!(big.req.rule.budget, Duration::from_secs_f64(MAX_CASE_S));
        // Every plan keeps its budget above the smallest form.
        for b in [1.0, 2.0, 5.0, 20.0, 60.0, 200.0] {
            let p = ScenariosPart.work(&e, small.plan.predicted_s * b).unwrap();
            assert!(p.plan.predicted_s <= small.plan.predicted_s * b * 1.0001);
            assert!(p.req.rounds >= MIN_ROUNDS);
        }
        // --full: every scenario from the start, more rounds when paid for.
        let f = env(&m, Mode::Full, &costs);
        let full = ScenariosPart.work(&f, 0.0).unwrap();
        assert_eq!(names(&full.req.set).len(), 6);
        assert_eq!(full.req.rounds, MIN_ROUNDS);
        assert_eq!(ScenariosPart.work(&f, 10_000.0).unwrap().req.rounds, 10);
        // The plan's loaded scenarios keep the study's CPU sets.
        let high = big
            .req
            .set
            .scenarios
            .iter()
            .find(|p| p.name == Scenario::CrossfireHigh)
            .unwrap();
        assert_eq!(high.background.as_ref().unwrap().cpus, vec![1, 3, 4, 6]);
    }

    #[test]
    fn a_one_node_machine_runs_what_it_can_and_says_why_not_the_rest() {
        let m = fixture("8em64t-2s2ca2c-buggynuma.xml");
        let costs = Costs::reference();
        let e = env(&m, Mode::Default, &costs);
        let p = ScenariosPart.work(&e, 10_000.0).unwrap();
        assert_eq!(
            p.priority,
            vec![Scenario::TwoOnOneNode, Scenario::OneThreadHops]
        );
        assert_eq!(
            names(&p.req.set),
            vec!["one-thread-hops", "two-on-one-node"]
        );
        // The crossfire scenarios stay in the set, not applicable, with the reason.
        let why: Vec<(&str, &str)> = p
            .req
            .set
            .scenarios
            .iter()
            .filter_map(|s| Some((s.name.name(), s.not_applicable.as_deref()?)))
            .collect();
        assert_eq!(why.len(), 4, "{why:?}");
        assert_eq!(
            why[0],
            (
                "crossfire",
                "needs two nodes with CPUs one hop apart (A and B); this machine has none"
            )
        );
        // The smallest form: the one-node pair alone.
        let small = ScenariosPart.work(&e, 0.0).unwrap();
        assert_eq!(names(&small.req.set), vec!["two-on-one-node"]);
        assert!(ScenariosPart.applicable(&m).is_ok());
    }

    /// A measured case: one value per round.
    fn measured(case: &ScenarioCase, totals: &[f64], base: f64) -> ScenarioCaseResult {
        let med = numalab::measure::stats::median(totals.to_vec()).unwrap();
        ScenarioCaseResult {
            case: case.clone(),
            rounds: totals.iter().map(|t| vec![t / 2.0, t / 2.0]).collect(),
            total_s: totals.to_vec(),
            makespan_s: totals.iter().map(|t| t / 2.0).collect(),
            thread_s: vec![med / 2.0, med / 2.0],
            total_median_s: med,
            total_rel_ci: 0.01,
            makespan_median_s: med / 2.0,
            normalized: med / base,
            baseline: "0.0.r.0 1.0.r.1".into(),
            background_achieved: Vec::new(),
            seen_cpus: Vec::new(),
            verified: true,
            problems: Vec::new(),
            memory_traffic: Default::default(),
        }
    }

    /// The Quartet's crossfire scenarios, idle slower under crossfire and
    /// faster at very high load, as the study found.
    fn quartet_outcome() -> ScenariosOutcome {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let all = plan_scenarios(&m, &Scenario::ALL);
        let chosen = [Scenario::Crossfire, Scenario::CrossfireFull];
        let set = selected(&all, &chosen);
        let around = |x: f64| -> Vec<f64> {
            [0.99, 1.01, 1.0, 0.98, 1.02, 1.005]
                .iter()
                .map(|f| f * x)
                .collect()
        };
        let mut runs = Vec::new();
        for p in set.applicable() {
            let level = p.background.as_ref().map(|b| b.levels[0].clone());
            runs.push(ScenarioRun {
                scenario: p.name.name().into(),
                figure: p.figure.clone(),
                title: p.title.clone(),
                condition: level.clone().unwrap_or_else(|| "idle".into()),
                background: level.map(|l| numalab::experiments::sweep::Background {
                    level: l,
                    bytes_per_second: 4e9,
                    subscription: numalab::experiments::sweep::Subscription::Full,
                    cpus: Some(
                        p.background
                            .as_ref()
                            .unwrap()
                            .cpus
                            .iter()
                            .copied()
                            .collect(),
                    ),
                }),
                cases: p
                    .cases
                    .iter()
                    .map(|c| {
                        let t = match (c.name.as_str(), p.background.is_some()) {
                            ("crossfire", false) => 1.3,
                            ("crossfire", true) => 1.6,
                            (_, true) => 2.0,
                            _ => 1.0,
                        };
                        measured(c, &around(t), 0.9)
                    })
                    .collect(),
            });
        }
        let res = result_of(set, runs, 6);
        ScenariosOutcome {
            priority: PRIORITY.to_vec(),
            left_out: vec![
                Scenario::TwoOnOneNode,
                Scenario::TwoWritersLoaded,
                Scenario::CrossfireHigh,
                Scenario::OneThreadHops,
            ],
            measured: res,
        }
    }

    #[test]
    fn findings_become_claims_the_checker_re_derives() {
        let r = quartet_outcome();
        let base = "/parts/sweep-scenarios/result";
        let doc = serde_json::json!({
            "parts": {"sweep-scenarios": {"result": serde_json::to_value(&r).unwrap()}}
        });
        let claims = finding_claims(&r, base, ClaimKind::Finding);
        assert_eq!(claims.len(), 3, "{claims:#?}");
        for c in &claims {
            assert!(
                check_claim(c, &doc).is_empty(),
                "{:?}",
                check_claim(c, &doc)
            );
        }
        assert!(
            claims[0].text.starts_with("Classic scenario (b) two writers: crossfire (each writes the other's node) is slower than no crossfire, idle: holds — crossfire takes 1.30x"),
            "{}",
            claims[0].text
        );
        assert!(
            claims[1]
                .text
                .contains("very-high (full subscription): does not hold — crossfire takes 0.80x"),
            "{}",
            claims[1].text
        );
        assert!(claims[2].text.contains("the idle result reverses, idle to very-high (full subscription): holds — crossfire is slower idle and faster under very-high"), "{}", claims[2].text);
        // (b)'s verdicts are rank tests on the rounds' totals, rerun by the
        // checker; the reversal compares two verdicts and stays a fact.
        let tests: Vec<usize> = claims.iter().map(|c| c.rank_tests.len()).collect();
        assert_eq!(tests, [1, 1, 0]);
        let t = &claims[0].rank_tests[0];
        for p in [&t.a[0], &t.b[0]] {
            assert!(
                p.starts_with(&format!("{base}/measured/runs/")) && p.ends_with("/total_s"),
                "{t:?}"
            );
        }
        assert_ne!(t.a, t.b);
        // Rounds that no longer differ: the sentence's "holds" fails.
        let mut same = doc.clone();
        let b_rounds = same.pointer(&t.b[0]).unwrap().clone();
        *same.pointer_mut(&t.a[0]).unwrap() = b_rounds;
        let bad = check_claim(&claims[0], &same);
        assert!(
            bad.iter()
                .any(|e| e.contains("rank test test:")
                    && e.contains("the samples give 'cannot tell'")),
            "{bad:?}"
        );
        // A claim whose verdict does not match the data fails the check.
        let mut wrong = claims[0].clone();
        wrong.facts[3].value = serde_json::json!("does_not_hold");
        assert!(!check_claim(&wrong.render(), &doc).is_empty());
        // The summary keeps the idle answer and the reversal.
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut s = SummaryBuilder::for_tests(&m, base);
        ScenariosPart.summarize(&r, &mut s);
        let kept: Vec<&str> = s
            .claims()
            .iter()
            .filter(|c| c.kind == ClaimKind::Finding)
            .map(|c| c.text.as_str())
            .collect();
        assert_eq!(kept.len(), 2, "{kept:#?}");
        // The loaded level's answer is the section's, kept for the checker.
        let details: Vec<&str> = s
            .claims()
            .iter()
            .filter(|c| c.kind == ClaimKind::Detail)
            .map(|c| c.text.as_str())
            .collect();
        assert_eq!(details.len(), 1, "{details:#?}");
        assert!(details[0].contains("very-high (full subscription): does not hold"));
        assert!(kept[1].contains("the idle result reverses"), "{}", kept[1]);
    }

    /// The one-node pair on a one-node machine: both buffers local only.
    fn one_node_outcome() -> ScenariosOutcome {
        let m = fixture("8em64t-2s2ca2c-buggynuma.xml");
        let all = plan_scenarios(&m, &Scenario::ALL);
        let set = selected(&all, &[Scenario::TwoOnOneNode]);
        let runs = set
            .applicable()
            .map(|p| ScenarioRun {
                scenario: p.name.name().into(),
                figure: p.figure.clone(),
                title: p.title.clone(),
                condition: "idle".into(),
                background: None,
                cases: p
                    .cases
                    .iter()
                    .map(|c| measured(c, &[1.0, 1.01, 0.99, 1.0], 1.0))
                    .collect(),
            })
            .collect();
        let res = result_of(set, runs, 4);
        ScenariosOutcome {
            priority: PRIORITY.to_vec(),
            left_out: Vec::new(),
            measured: res,
        }
    }

    #[test]
    fn one_memory_node_marks_c_not_answerable_and_the_section_says_why() {
        let r = one_node_outcome();
        let base = "/parts/sweep-scenarios/result";
        let doc = serde_json::json!({
            "parts": {"sweep-scenarios": {"result": serde_json::to_value(&r).unwrap()}}
        });
        let claims = finding_claims(&r, base, ClaimKind::Finding);
        assert_eq!(claims.len(), 1, "{claims:#?}");
        let c = &claims[0];
        assert_eq!(
            c.text,
            "Classic scenario (c) two writers on one node: moving one buffer away beats keeping both local, idle: cannot tell — this machine has no memory node away from node A: only both buffers local (0-0) exists."
        );
        let q = c.not_answerable.as_ref().expect("marked");
        assert_eq!(
            (q.question.as_str(), q.lacks),
            ("classic scenario (c)", Lacks::SecondMemoryNode)
        );
        // The hops it rests on (every pair's buffers local) re-derive.
        assert!(
            c.facts.iter().any(|f| f.name.starts_with("hops_")),
            "{c:#?}"
        );
        assert_eq!(check_claim(c, &doc), Vec::<String>::new());
        // The part's section still gives the sentence.
        let m = fixture("8em64t-2s2ca2c-buggynuma.xml");
        let mut h = String::new();
        let tables = ScenariosPart.tables(&r, &m);
        let mut s = Section::for_tests(&mut h, &tables, &m);
        ScenariosPart.html(&r, &mut s);
        assert!(
            h.contains("<li>Classic scenario (c) two writers on one node: moving one buffer away beats keeping both local, idle: cannot tell — this machine has no memory node away from node A"),
            "{h}"
        );
        // The summary's builder gets it as a marked finding (summarize
        // folds such findings into one line).
        let mut b = SummaryBuilder::for_tests(&m, base);
        ScenariosPart.summarize(&r, &mut b);
        assert!(b
            .claims()
            .iter()
            .all(|c| c.kind == ClaimKind::Finding && c.not_answerable.is_some()));
    }

    #[test]
    fn noise_is_cannot_tell_with_its_reason() {
        let mut r = quartet_outcome();
        for run in r.measured.runs.iter_mut() {
            for c in run.cases.iter_mut() {
                c.total_s = [0.99, 1.01, 1.0, 0.98, 1.02, 1.005].to_vec();
            }
        }
        r.measured.findings = scenario_findings(&r.measured);
        let claims = finding_claims(&r, "/x", ClaimKind::Detail);
        let first = &claims[0];
        assert!(
            first.text.contains(": cannot tell — ")
                && first.text.contains(": the difference is inside the noise)"),
            "{}",
            first.text
        );
        // Noise is an answer of this machine: no claim is marked as one it
        // cannot answer.
        assert!(claims.iter().all(|c| c.not_answerable.is_none()));
    }

    #[test]
    fn charts_have_the_study_labels_and_a_dashed_one() {
        let r = quartet_outcome();
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut h = String::new();
        let tables = ScenariosPart.tables(&r, &m);
        let mut s = Section::for_tests(&mut h, &tables, &m);
        ScenariosPart.html(&r, &mut s);
        assert!(h.contains("id=\"fig-scenarios\""));
        // The findings list has each answer's sentence.
        assert!(
            h.contains("<li>Classic scenario (b) two writers: crossfire"),
            "{h}"
        );
        assert!(h.contains("id=\"fig-scenarios-crossfire\""), "{h}");
        assert!(h.contains("id=\"fig-scenarios-crossfire-full\""));
        // The left-out scenarios are named, not hidden.
        assert!(h.contains("id=\"fig-scenarios-two-on-one-node\""));
        assert!(h.contains("two-on-one-node: left out"));
        for label in [
            "A.0.w.A + B.0.w.B (0-0 hops)",
            "A.0.w.B + B.0.w.A (1-1 hops)",
            "A.0.w.B + B.0.w.C (1-1 hops)",
        ] {
            assert!(h.contains(label), "{label}");
        }
        assert_eq!(
            h.matches("class=\"ref\"").count(),
            2,
            "one dashed 1.0 per chart"
        );
        assert!(h.contains("background very-high"));
        // The tables: the plan with the left-out ones, a row per case.
        assert_eq!(tables[0].rows.len(), 6);
        assert!(tables[0].rows.iter().any(|r| r[3] == "left out"));
        assert_eq!(tables[1].rows.len(), 6);
        assert_eq!(tables[1].rows[1][4], "A.0.w.B + B.0.w.A");
        assert_eq!(tables[2].rows[0][4], "holds");
    }

    #[test]
    fn the_outcome_reads_back() {
        let r = quartet_outcome();
        let v = serde_json::to_value(&r).unwrap();
        let back: ScenariosOutcome = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), v);
    }
}
