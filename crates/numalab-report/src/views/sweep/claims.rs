//! The sweep's claims: the classic questions answered, the two-writer
//! and crossfire sentences of the summary.

use super::*;
use crate::claims::{Basis, Claim, ClaimKind, Derivation, Lacks, RankRule, Relation, Threshold};
use crate::summary::{finding, SummaryBuilder};
use numalab::experiments::sweep::{
    compared_classes, crossfire_cases, hop_cases, two_writer_cases, widest_class, Access,
    CaseResult, SweepResult, SweepRun, FINDING_NOISE,
};

/// The answers of the classic questions as claims (`detail`: sentences of
/// the sweep's section), one per question and condition, in order. The
/// ratio each answer rests on is re-derived from the cases it compares,
/// and the verdict re-judged by the findings' rule (3% noise; 6% spread
/// within a hop class).
pub fn question_claims(s: &SweepOutcome, base: &str) -> Vec<Claim> {
    let secs = |ri: usize, v: &[usize]| median_seconds(s, base, ri, v);
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
            let samples = |ri: usize, v: &[usize]| sample_paths(s, base, ri, v);
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
                        ratio = hop_ratio(s, base, ri);
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

/// The median of cases `v` of run `ri`, seconds, with where each is.
fn median_seconds(
    s: &SweepOutcome,
    base: &str,
    ri: usize,
    v: &[usize],
) -> Option<(f64, Derivation)> {
    let run = &s.sweep.runs[ri];
    let vals: Vec<f64> = v.iter().map(|&i| run.cases[i].seconds.median).collect();
    let m = numalab::measure::stats::median(vals)?;
    let of = v
        .iter()
        .map(|&i| Derivation::at(format!("{base}/sweep/runs/{ri}/cases/{i}/seconds/median")))
        .collect();
    Some((m, Derivation::Median { of }))
}

/// Where the samples of cases `v` of run `ri` are (a case without samples,
/// from before they were kept: its median).
fn sample_paths(s: &SweepOutcome, base: &str, ri: usize, v: &[usize]) -> Vec<String> {
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
}

/// Question (a) from run `ri`: the farthest hop class over the nearest,
/// the larger of reads' and writes'.
fn hop_ratio(s: &SweepOutcome, base: &str, ri: usize) -> Option<(f64, Derivation)> {
    let mut each = Vec::new();
    for access in [Access::Read, Access::Write] {
        let h = hop_cases(&s.sweep.runs[ri], access);
        if h.len() >= 2 {
            if let (Some(first), Some(last)) = (
                median_seconds(s, base, ri, &h[0].1),
                median_seconds(s, base, ri, &h[h.len() - 1].1),
            ) {
                each.push((last.0 / first.0, Derivation::ratio(last.1, first.1)));
            }
        }
    }
    if each.is_empty() {
        return None;
    }
    let v = each.iter().map(|e| e.0).fold(f64::NEG_INFINITY, f64::max);
    Some((
        v,
        Derivation::Max {
            of: each.into_iter().map(|e| e.1).collect(),
        },
    ))
}

/// Two writers on one node vs one writer alone, from the idle sweep:
/// memory bytes moved per second together.
pub(super) fn writers(s: &mut SummaryBuilder, r: &SweepResult) {
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
            "Whether two writers saturate a node was not measured within the sweep's budget: it needs two local writers on one node and one writer alone there, on an idle machine; `numalab sweep --thread-counts 1,2` measures it, as does a report with a larger --budget or --full.",
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
                .fact("cpus", &r.cpus, s.path("sweep/cpus"))
                .not_answerable("whether two writers saturate a node", Lacks::TwoCpusOnANode),
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

pub(super) fn crossfire(s: &mut SummaryBuilder, r: &SweepOutcome) {
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
            s.set_key(
                "crossfire_ratio",
                x / n,
                Derivation::ratio(xd.clone(), nd.clone()),
            );
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
        _ => {
            let c = Claim::new(
                ClaimKind::Finding,
                "crossfire",
                Basis::Run,
                "Crossfire (two threads each writing the other's node): whether it hurts cannot be told: {why}.",
            )
            .fact("why", &f.detail, s.path(&format!("findings/{fi}/findings/{k}/detail")));
            // One memory node: no budget reaches a crossfire case, the
            // summary lists it with the other questions that need a second
            // node (the sweep's section still answers (b) with why).
            let c = match r.sweep.mem_nodes.as_slice() {
                [_] => c
                    .fact("mem_nodes", &r.sweep.mem_nodes, s.path("sweep/mem_nodes"))
                    .not_answerable("crossfire", Lacks::SecondMemoryNode),
                _ => c,
            };
            s.claim(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::check_claim;
    use numalab::experiments::sweep::test_cases::{case, two_threads};

    /// A sweep over `mem_nodes` with `runs`, idle.
    fn sweep_of(mem_nodes: Vec<u32>, runs: Vec<SweepRun>) -> SweepOutcome {
        let sweep = SweepResult {
            folded: true,
            node_automorphisms: 1,
            node_symmetry_order: "1".into(),
            machine_symmetry_order: "2".into(),
            cpus: vec![0, 1],
            mem_nodes,
            accesses: vec![Access::Write],
            read_kernel: "read".into(),
            write_kernel: "write".into(),
            buffer_bytes: 64 << 20,
            budget_s: None,
            runs,
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

    fn crossfire_claims(r: &SweepOutcome) -> Vec<Claim> {
        let m = crate::fixture("qemu-quartet-4n2c-ring.xml");
        let mut s = SummaryBuilder::for_tests(&m, "/parts/sweep/result");
        crossfire(&mut s, r);
        s.claims().to_vec()
    }

    #[test]
    fn crossfire_on_one_memory_node_is_not_answerable_here() {
        let local = case(&[(0, 0, 0, 0), (0, 1, 0, 0)], 1.0);
        let r = sweep_of(vec![0], vec![two_threads(vec![local], 20)]);
        let c = crossfire_claims(&r);
        assert_eq!(c.len(), 1, "{c:#?}");
        let q = c[0].not_answerable.as_ref().expect("marked");
        assert_eq!(
            (q.question.as_str(), q.lacks),
            ("crossfire", Lacks::SecondMemoryNode)
        );
        assert_eq!(
            c[0].text,
            "Crossfire (two threads each writing the other's node): whether it hurts cannot be told: this sweep has one memory node (node 0): crossfire needs two writers on linked nodes."
        );
        // The one memory node is a fact the checker reads back.
        let doc = serde_json::json!({
            "parts": {"sweep": {"result": serde_json::to_value(&r).unwrap()}}
        });
        assert_eq!(check_claim(&c[0], &doc), Vec::<String>::new());
        assert!(c[0].facts.iter().any(|f| f.name == "mem_nodes"));
    }

    #[test]
    fn crossfire_without_its_cases_on_several_nodes_stays_a_sentence() {
        // Four memory nodes, but only local pairs ran: the budget, not the
        // machine, left (b) open.
        let local = case(&[(0, 0, 0, 0), (0, 1, 0, 0)], 1.0);
        let r = sweep_of(vec![0, 1, 2, 3], vec![two_threads(vec![local], 20)]);
        let c = crossfire_claims(&r);
        assert_eq!(c.len(), 1, "{c:#?}");
        assert_eq!(c[0].not_answerable, None, "{}", c[0].text);
        assert!(c[0].text.contains("cannot be told"), "{}", c[0].text);
    }

    #[test]
    fn two_writers_without_two_cpus_on_a_node_are_not_answerable_here() {
        // One CPU per node: no node holds two writers.
        let m = crate::fixture("qemu-ring4-cpuless-hmat.xml");
        assert!(m
            .cpu_nodes()
            .iter()
            .all(|n| m.allowed_cpus_of(n).len() == 1));
        let mut one = two_threads(vec![case(&[(0, 0, 0, 0)], 1.0)], 4);
        one.threads = 1;
        let two = two_threads(vec![case(&[(0, 0, 1, 1), (1, 1, 0, 1)], 1.0)], 20);
        let r = sweep_of(vec![0, 1], vec![one, two]);
        let mut s = SummaryBuilder::for_tests(&m, "/parts/sweep/result");
        writers(&mut s, &r.sweep);
        let c = s.claims();
        assert_eq!(c.len(), 1, "{c:#?}");
        assert_eq!(
            c[0].not_answerable.as_ref().map(|q| q.lacks),
            Some(Lacks::TwoCpusOnANode),
            "{}",
            c[0].text
        );
    }
}
