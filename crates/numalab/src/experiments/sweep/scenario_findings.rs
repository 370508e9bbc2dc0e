//! The study's questions (b) and (c) answered from its scenarios, each
//! comparison judged by the rank test on the interleaved rounds
//! ([`crate::measure::compare`]): holds, does not hold, or cannot tell.

use super::scenario_run::{ScenarioCaseResult, ScenarioRun, ScenariosResult};
use crate::measure::compare::{rank_compare, RankComparison, Verdict, RULE};
use serde::{Deserialize, Serialize};

/// One answer, for one scenario and condition.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScenarioFinding {
    /// `b` (crossfire) or `c` (two writers on one node), as in docs/sweep.md.
    pub question: String,
    /// The claim as the study makes it.
    pub title: String,
    /// The scenario (or scenarios, joined by `+`) it rests on.
    pub scenario: String,
    /// `idle`, a background level, or `idle to very-high`.
    pub condition: String,
    pub verdict: Verdict,
    /// The cases compared: `a` against `b` (case names).
    pub a: String,
    pub b: String,
    /// `a` against `b` by the rank test; `None` where a case is missing.
    pub comparison: Option<RankComparison>,
    /// The rule the verdict follows.
    pub rule: String,
    pub detail: String,
}

/// The opposite claim's verdict: "a larger" from a test of "a smaller".
fn flip(v: Verdict) -> Verdict {
    match v {
        Verdict::Holds => Verdict::DoesNotHold,
        Verdict::DoesNotHold => Verdict::Holds,
        Verdict::CannotTell => Verdict::CannotTell,
    }
}

fn case<'a>(run: &'a ScenarioRun, name: &str) -> Option<&'a ScenarioCaseResult> {
    run.cases.iter().find(|c| c.case.name == name)
}

/// What a verdict says in a sentence.
fn verdict_words(v: Verdict) -> &'static str {
    match v {
        Verdict::Holds => "holds",
        Verdict::DoesNotHold => "does not hold",
        Verdict::CannotTell => "cannot tell",
    }
}

struct Claim<'a> {
    question: &'a str,
    title: String,
    scenario: String,
    condition: String,
}

impl Claim<'_> {
    /// The finding from `a` against `b` with `verdict` (of the claim), or
    /// "cannot tell" naming what is missing.
    fn judged(
        self,
        a: (&str, Option<&[f64]>),
        b: (&str, Option<&[f64]>),
        verdict: impl Fn(&RankComparison) -> Verdict,
        describe: impl Fn(&RankComparison) -> String,
    ) -> ScenarioFinding {
        let comparison = match (a.1, b.1) {
            (Some(x), Some(y)) => rank_compare(x, y),
            _ => None,
        };
        let (v, detail) = match &comparison {
            Some(c) => (verdict(c), describe(c)),
            None => (
                Verdict::CannotTell,
                format!(
                    "not measured: no rounds of '{}' and '{}' to compare",
                    a.0, b.0
                ),
            ),
        };
        ScenarioFinding {
            question: self.question.into(),
            title: self.title,
            scenario: self.scenario,
            condition: self.condition,
            verdict: v,
            a: a.0.into(),
            b: b.0.into(),
            comparison,
            rule: RULE.into(),
            detail,
        }
    }
}

/// Per round, the total time of `case`.
fn totals(c: Option<&ScenarioCaseResult>) -> Option<&[f64]> {
    c.map(|c| c.total_s.as_slice()).filter(|v| !v.is_empty())
}

/// (b) per crossfire run, and whether the idle answer reverses under load.
fn crossfire(r: &ScenariosResult) -> Vec<ScenarioFinding> {
    let mut out = Vec::new();
    let runs: Vec<&ScenarioRun> = r
        .runs
        .iter()
        .filter(|x| x.scenario.starts_with("crossfire"))
        .collect();
    for run in &runs {
        let cond = run.condition();
        let f = Claim {
            question: "b",
            title:
                "two writers: crossfire (each writes the other's node) is slower than no crossfire"
                    .into(),
            scenario: run.scenario.clone(),
            condition: cond.clone(),
        }
        .judged(
            ("crossfire", totals(case(run, "crossfire"))),
            ("no crossfire", totals(case(run, "no crossfire"))),
            |c| flip(c.a_smaller()),
            |c| {
                format!(
                    "crossfire takes {} the total time of no crossfire, {}",
                    c.describe(),
                    cond
                )
            },
        );
        out.push(f);
    }
    // The study's reversal: slower idle, faster under very-high load with
    // full subscription.
    let idle = out.iter().find(|f| f.condition == "idle");
    let loaded: Vec<&ScenarioFinding> = out.iter().filter(|f| f.condition != "idle").collect();
    if let (Some(idle), false) = (idle, loaded.is_empty()) {
        let reversed: Vec<&str> = loaded
            .iter()
            .filter(|f| f.verdict == Verdict::DoesNotHold)
            .map(|f| f.condition.as_str())
            .collect();
        let (verdict, detail) = match idle.verdict {
            Verdict::Holds if !reversed.is_empty() => (
                Verdict::Holds,
                format!(
                    "crossfire is slower idle and faster under {}",
                    reversed.join(", ")
                ),
            ),
            Verdict::Holds if loaded.iter().all(|f| f.verdict == Verdict::Holds) => (
                Verdict::DoesNotHold,
                "crossfire stays slower under every load measured".to_string(),
            ),
            Verdict::Holds => (
                Verdict::CannotTell,
                "crossfire is slower idle; under load the difference is inside the noise"
                    .to_string(),
            ),
            v => (
                Verdict::CannotTell,
                format!(
                    "the idle comparison itself {}: nothing to reverse",
                    verdict_words(v)
                ),
            ),
        };
        out.push(ScenarioFinding {
            question: "b".into(),
            title: "crossfire under load: the idle result reverses".into(),
            scenario: "crossfire+crossfire-high+crossfire-full".into(),
            condition: format!(
                "idle to {}",
                loaded.last().map_or("", |f| f.condition.as_str())
            ),
            verdict,
            a: "crossfire".into(),
            b: "no crossfire".into(),
            comparison: None,
            rule: RULE.into(),
            detail,
        });
    }
    out
}

impl ScenarioRun {
    /// The condition its findings name: `idle`, or the background level
    /// and subscription.
    pub fn condition(&self) -> String {
        match &self.background {
            None => "idle".into(),
            Some(b) => format!("{} ({})", b.level, self.subscription_words()),
        }
    }

    /// How the background of this run was placed, in words.
    pub fn subscription_words(&self) -> &'static str {
        match self.scenario.as_str() {
            "crossfire-high" => "high subscription",
            "crossfire-full" => "full subscription",
            _ => "one per other node",
        }
    }
}

/// The two-writer cases of a one-node run: (hops of the second buffer, case).
fn writer_cases(run: &ScenarioRun) -> Vec<(u32, &ScenarioCaseResult)> {
    let mut v: Vec<(u32, &ScenarioCaseResult)> = run
        .cases
        .iter()
        .filter(|c| c.case.name.starts_with("two writers"))
        .filter_map(|c| c.case.threads.get(1).and_then(|t| t.hops).map(|h| (h, c)))
        .collect();
    v.sort_by_key(|x| x.0);
    v
}

/// (c) per condition: both local against one buffer 1 hop and farthest
/// away; then whether the advantage shrinks as the load rises.
fn two_writers(r: &ScenariosResult) -> Vec<ScenarioFinding> {
    let mut out = Vec::new();
    let runs: Vec<&ScenarioRun> = r
        .runs
        .iter()
        .filter(|x| x.scenario == "two-on-one-node" || x.scenario == "two-writers-loaded")
        .collect();
    for run in &runs {
        let cases = writer_cases(run);
        let local = cases.iter().find(|x| x.0 == 0).map(|x| x.1);
        let mut hops: Vec<u32> = cases.iter().map(|x| x.0).filter(|&h| h > 0).collect();
        hops.dedup();
        // One hop and the farthest: the study's 0-1 and 0-2.
        let wanted: Vec<u32> = match (hops.first(), hops.last()) {
            (Some(&a), Some(&b)) if a != b => vec![a, b],
            (Some(&a), _) => vec![a],
            _ => Vec::new(),
        };
        if wanted.is_empty() && local.is_some() {
            out.push(ScenarioFinding {
                question: "c".into(),
                title: "two writers on one node: moving one buffer away beats keeping both local".into(),
                scenario: run.scenario.clone(),
                condition: run.condition(),
                verdict: Verdict::CannotTell,
                a: String::new(),
                b: local.map_or(String::new(), |c| c.case.name.clone()),
                comparison: None,
                rule: RULE.into(),
                detail: "this machine has no memory node away from node A: only both buffers local (0-0) exists".into(),
            });
        }
        for h in wanted {
            let moved = cases.iter().find(|x| x.0 == h).map(|x| x.1);
            let name = moved.map_or(String::new(), |c| c.case.name.clone());
            let cond = run.condition();
            out.push(
                Claim {
                    question: "c",
                    title: format!(
                        "two writers on one node: moving one buffer {} away beats keeping both local",
                        if h == 1 { "1 hop".to_string() } else { format!("{h} hops") }
                    ),
                    scenario: run.scenario.clone(),
                    condition: cond.clone(),
                }
                .judged(
                    (&name, totals(moved)),
                    (local.map_or("", |c| c.case.name.as_str()), totals(local)),
                    |c| c.a_smaller(),
                    |c| format!("0-{h} hops takes {} the total time of 0-0, {}", c.describe(), cond),
                ),
            );
        }
    }
    // As load rises: the per-round ratio (moved over local, measured in the
    // same round) idle against the highest level.
    let ratios = |run: &ScenarioRun| -> Option<Vec<f64>> {
        let cases = writer_cases(run);
        let local = cases.iter().find(|x| x.0 == 0)?.1;
        let moved = cases.iter().find(|x| x.0 == 1)?.1;
        let v: Vec<f64> = moved
            .total_s
            .iter()
            .zip(&local.total_s)
            .map(|(m, l)| m / l)
            .collect();
        (!v.is_empty()).then_some(v)
    };
    let idle = runs.iter().find(|x| x.scenario == "two-on-one-node");
    let top = runs.iter().rfind(|x| x.scenario == "two-writers-loaded");
    if let (Some(idle), Some(top)) = (idle, top) {
        let level = top
            .background
            .as_ref()
            .map_or(String::new(), |b| b.level.clone());
        let idle_v = out
            .iter()
            .find(|f| f.scenario == "two-on-one-node" && f.title.contains(" 1 hop "))
            .map(|f| f.verdict);
        let top_v = out
            .iter()
            .rfind(|f| f.scenario == "two-writers-loaded" && f.title.contains(" 1 hop "))
            .map(|f| f.verdict);
        let mut f = Claim {
            question: "c",
            title: "two writers on one node: the advantage of moving a buffer one hop away shrinks as background load rises".into(),
            scenario: "two-on-one-node+two-writers-loaded".into(),
            condition: format!("idle to {level}"),
        }
        .judged(
            ("idle", ratios(idle).as_deref()),
            (&level, ratios(top).as_deref()),
            |c| c.a_smaller(),
            |c| {
                format!(
                    "the 0-1/0-0 ratio idle is {} the ratio at {level}",
                    c.describe()
                )
            },
        );
        if idle_v == Some(Verdict::Holds) && top_v == Some(Verdict::DoesNotHold) {
            f.detail.push_str(&format!(
                "; it reverses: at {level} keeping both local is faster"
            ));
        }
        out.push(f);
    }
    out
}

/// Every finding the scenarios of `r` support.
pub fn scenario_findings(r: &ScenariosResult) -> Vec<ScenarioFinding> {
    let mut v = crossfire(r);
    v.extend(two_writers(r));
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::sweep::{
        plan_scenarios, BaselineResults, Normalize, Scenario, ScenarioCase,
    };
    use crate::machine::fixture;

    /// A measured case: its per-round totals (one thread each, for brevity).
    fn measured(case: &ScenarioCase, totals: &[f64]) -> ScenarioCaseResult {
        ScenarioCaseResult {
            case: case.clone(),
            rounds: totals.iter().map(|t| vec![*t]).collect(),
            total_s: totals.to_vec(),
            makespan_s: totals.to_vec(),
            thread_s: vec![totals[0]],
            total_median_s: totals[0],
            total_rel_ci: 0.01,
            makespan_median_s: totals[0],
            normalized: 1.0,
            baseline: String::new(),
            background_achieved: Vec::new(),
            seen_cpus: Vec::new(),
            verified: true,
            problems: Vec::new(),
            memory_traffic: Default::default(),
        }
    }

    /// The Quartet's scenarios with each case's rounds from `time(name, level)`.
    fn result(time: impl Fn(&str, &str) -> Vec<f64>) -> ScenariosResult {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let set = plan_scenarios(&m, &Scenario::ALL);
        let mut runs = Vec::new();
        for p in set.applicable() {
            let levels: Vec<Option<String>> = match &p.background {
                None => vec![None],
                Some(b) => b.levels.iter().cloned().map(Some).collect(),
            };
            for level in levels {
                let cond = level.clone().unwrap_or_else(|| "idle".into());
                runs.push(ScenarioRun {
                    scenario: p.name.name().into(),
                    figure: p.figure.clone(),
                    title: p.title.clone(),
                    condition: cond.clone(),
                    background: level.map(|l| super::super::Background {
                        level: l,
                        bytes_per_second: 1e9,
                        subscription: super::super::Subscription::Full,
                        cpus: None,
                    }),
                    cases: p
                        .cases
                        .iter()
                        .map(|c| measured(c, &time(&c.name, &cond)))
                        .collect(),
                });
            }
        }
        ScenariosResult {
            set,
            normalize: Normalize::Study,
            rounds_planned: 6,
            rounds_run: 6,
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
        }
    }

    fn around(x: f64) -> Vec<f64> {
        [0.99, 1.01, 1.0, 0.98, 1.02, 1.005]
            .iter()
            .map(|f| f * x)
            .collect()
    }

    #[test]
    fn crossfire_holds_idle_and_reverses_at_full_load() {
        let r = result(|name, cond| match (name, cond) {
            ("crossfire", "idle") => around(1.3),
            ("crossfire", "very-high") => around(0.8),
            _ => around(1.0),
        });
        let f = scenario_findings(&r);
        let b: Vec<(&str, &str, Verdict)> = f
            .iter()
            .filter(|x| x.question == "b")
            .map(|x| (x.scenario.as_str(), x.condition.as_str(), x.verdict))
            .collect();
        assert_eq!(
            b,
            vec![
                ("crossfire", "idle", Verdict::Holds),
                (
                    "crossfire-high",
                    "low (high subscription)",
                    Verdict::CannotTell
                ),
                (
                    "crossfire-high",
                    "very-high (high subscription)",
                    Verdict::DoesNotHold
                ),
                (
                    "crossfire-full",
                    "very-high (full subscription)",
                    Verdict::DoesNotHold
                ),
                (
                    "crossfire+crossfire-high+crossfire-full",
                    "idle to very-high (full subscription)",
                    Verdict::Holds
                ),
            ]
        );
        let rev = f.iter().find(|x| x.title.contains("reverses")).unwrap();
        assert_eq!(
            rev.detail,
            "crossfire is slower idle and faster under very-high (high subscription), very-high (full subscription)"
        );
        let idle = &f[0];
        let c = idle.comparison.as_ref().unwrap();
        assert!((c.ratio - 1.3).abs() < 0.02, "{c:?}");
        assert!(c.p_value < 0.05);
    }

    #[test]
    fn two_writers_compare_one_and_two_hops_and_follow_the_load() {
        // Idle: moving a buffer away helps (0.8); under very-high load it hurts.
        let r = result(|name, cond| {
            let moved = name.starts_with("two writers") && !name.ends_with("0 hops");
            match (moved, cond) {
                (true, "idle") => around(0.8),
                (true, "very-high") => around(1.2),
                _ => around(1.0),
            }
        });
        let f = scenario_findings(&r);
        let c: Vec<(&str, &str, Verdict)> = f
            .iter()
            .filter(|x| x.question == "c")
            .map(|x| (x.title.as_str(), x.condition.as_str(), x.verdict))
            .collect();
        let one = "two writers on one node: moving one buffer 1 hop away beats keeping both local";
        let two = "two writers on one node: moving one buffer 2 hops away beats keeping both local";
        assert_eq!(c[0], (one, "idle", Verdict::Holds));
        assert_eq!(c[1], (two, "idle", Verdict::Holds));
        assert_eq!(c[2], (one, "low (one per other node)", Verdict::CannotTell));
        assert_eq!(c[8].1, "very-high (one per other node)");
        assert_eq!(c[8].2, Verdict::DoesNotHold);
        let trend = f.last().unwrap();
        assert_eq!(trend.verdict, Verdict::Holds, "{}", trend.detail);
        assert!(
            trend
                .detail
                .ends_with("; it reverses: at very-high keeping both local is faster"),
            "{}",
            trend.detail
        );
    }

    #[test]
    fn noise_gives_cannot_tell() {
        let r = result(|_, _| around(1.0));
        for f in scenario_findings(&r) {
            assert_eq!(
                f.verdict,
                Verdict::CannotTell,
                "{} {}: {}",
                f.title,
                f.condition,
                f.detail
            );
        }
    }
}
