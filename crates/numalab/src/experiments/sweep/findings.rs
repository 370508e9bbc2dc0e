//! The classic questions of the ccNUMA studies, answered from a finished
//! sweep: does time grow with hops, is crossfire slower, do two local
//! writers saturate their node, do cases with equal hops take equal time.
//!
//! Every comparison is the rank test of [`crate::measure::compare`] on the
//! cases' samples (pooled over the cases that match a side): "holds",
//! "does not hold" or "cannot tell", never a difference against a fixed
//! percentage. A plain sweep runs its cases one after the other; the
//! scenarios (`--scenarios`) interleave them, which the study's questions
//! (b) and (c) are best answered from.

use super::space::{Access, ThreadCase, TwinMove};
use super::{condition, Background, CaseResult, SweepResult, SweepRun};
use crate::measure::compare::{rank_compare, RankComparison, Verdict, ALPHA, RULE};
use crate::measure::stats::median;
use crate::text::format;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One of the classic questions, answered for one sweep run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// `a`..`d` as in the issue and docs/sweep.md.
    pub question: String,
    pub title: String,
    /// Whether the classic claim holds here; `None` when this sweep cannot
    /// tell (say why in `detail`).
    pub holds: Option<bool>,
    /// The ratio the answer rests on (see `detail` for what over what):
    /// medians of the matching cases' medians.
    pub ratio: Option<f64>,
    pub detail: String,
    /// The verdict of the rank test (`holds` says the same as a boolean).
    #[serde(default = "cannot_tell")]
    pub verdict: Verdict,
    /// The comparison the verdict rests on, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comparison: Option<RankComparison>,
}

fn cannot_tell() -> Verdict {
    Verdict::CannotTell
}

/// `holds` as the boolean of older results: `None` for "cannot tell".
fn holds_of(v: Verdict) -> Option<bool> {
    match v {
        Verdict::Holds => Some(true),
        Verdict::DoesNotHold => Some(false),
        Verdict::CannotTell => None,
    }
}

/// The verdict of "a is larger than b" from the test of "a smaller".
fn larger(c: &RankComparison) -> Verdict {
    match c.a_smaller() {
        Verdict::Holds => Verdict::DoesNotHold,
        Verdict::DoesNotHold => Verdict::Holds,
        Verdict::CannotTell => Verdict::CannotTell,
    }
}

/// The samples of `cases`, pooled (a case read back without samples
/// counts its median once).
fn pooled(run: &SweepRun, cases: &[usize]) -> Vec<f64> {
    cases
        .iter()
        .flat_map(|&i| {
            let c = &run.cases[i];
            if c.samples.is_empty() {
                vec![c.seconds.median]
            } else {
                c.samples.clone()
            }
        })
        .filter(|x| x.is_finite())
        .collect()
}

/// The findings of one run (one thread count set under one background).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Findings {
    /// [`SweepRun::condition`]: `idle`, or [`Background::describe`].
    pub condition: String,
    pub findings: Vec<Finding>,
}

/// Differences smaller than this share are noise on any real machine.
pub const NOISE: f64 = 0.03;

impl Finding {
    /// A question this sweep cannot answer, and why not.
    fn unanswered(question: &str, title: &str, why: &str) -> Self {
        Finding {
            question: question.into(),
            title: title.into(),
            holds: None,
            ratio: None,
            detail: why.into(),
            verdict: Verdict::CannotTell,
            comparison: None,
        }
    }
}

/// Why a question has no matching cases in `run`: the budget stopped
/// before reaching them (some classes were not run), or this sweep's CPUs
/// and memory nodes have none (every class ran). `needs` says what the
/// question needs.
fn no_cases(run: &SweepRun, needs: &str) -> String {
    if run.cases_run < run.classes {
        format!(
            "not measured: the budget reached {} of the {} classes of {} threads and none of them was such a case ({needs}); run `numalab sweep --thread-counts {}`, or `numalab report --full` or a larger `--budget`",
            run.cases_run, run.classes, run.threads, run.threads
        )
    } else {
        format!(
            "this machine has no such case: {needs} (every class of {} threads ran)",
            run.threads
        )
    }
}

fn case_seconds<'a>(cases: impl Iterator<Item = &'a CaseResult>) -> Vec<f64> {
    cases.map(|c| c.seconds.median).collect()
}

fn access_noun(access: Access) -> &'static str {
    match access {
        Access::Read => "reads",
        Access::Write => "writes",
    }
}

/// Median time of the one-thread cases with `access`, per hop count (known
/// hops only), fewest hops first.
fn hop_medians(run: &SweepRun, access: Access) -> Vec<(u32, f64)> {
    hop_cases(run, access)
        .into_iter()
        .filter_map(|(h, v)| {
            median(v.iter().map(|&i| run.cases[i].seconds.median).collect()).map(|m| (h, m))
        })
        .collect()
}

/// The one-thread cases of (a) with `access`, as indexes into `run.cases`
/// by hop count (known hops, finite times), fewest hops first.
pub fn hop_cases(run: &SweepRun, access: Access) -> Vec<(u32, Vec<usize>)> {
    let mut by_hop: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, c) in run.cases.iter().enumerate() {
        let t = &c.threads[0].case;
        if let (true, Some(h), true) = (t.access == access, t.hops, c.seconds.median.is_finite()) {
            by_hop.entry(h).or_default().push(i);
        }
    }
    by_hop.into_iter().collect()
}

/// (a) single thread: does time grow with hop count, for reads and writes?
fn finding_hops(run: Option<&SweepRun>) -> Finding {
    let title = "single thread: time grows with hop count (reads and writes)";
    let Some(run) = run else {
        return Finding::unanswered(
            "a",
            title,
            "no one-thread cases in this sweep (run with --thread-counts 1,2)",
        );
    };
    let mut parts = Vec::new();
    let mut verdicts = Vec::new();
    let mut worst_ratio: Option<f64> = None;
    for access in [Access::Read, Access::Write] {
        let meds = hop_medians(run, access);
        if meds.is_empty() {
            continue;
        }
        if meds.len() < 2 {
            parts.push(format!(
                "{}: only {}-hop cases (one memory node)",
                access_noun(access),
                meds[0].0
            ));
            // One hop count says nothing either way, whatever the other access says.
            verdicts.push(Verdict::CannotTell);
            continue;
        }
        let base = meds[0].1;
        let text: Vec<String> = meds
            .iter()
            .map(|(h, s)| format!("{h} hop{}: {:.2}x", format::s(*h as usize), s / base))
            .collect();
        // Each hop count against the one before: slower, by the rank test.
        let cases = hop_cases(run, access);
        let steps: Vec<Verdict> = cases
            .windows(2)
            .map(|w| {
                rank_compare(&pooled(run, &w[1].1), &pooled(run, &w[0].1))
                    .map_or(Verdict::CannotTell, |c| larger(&c))
            })
            .collect();
        let v = if steps.iter().all(|&v| v == Verdict::Holds) {
            Verdict::Holds
        } else if steps.contains(&Verdict::DoesNotHold) {
            Verdict::DoesNotHold
        } else {
            Verdict::CannotTell
        };
        verdicts.push(v);
        let r = meds.last().map(|x| x.1 / base);
        worst_ratio = match (worst_ratio, r) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        parts.push(format!(
            "{} ({}): {}",
            access_noun(access),
            match v {
                Verdict::Holds => "grows at every hop",
                Verdict::DoesNotHold => "faster at more hops somewhere",
                Verdict::CannotTell => "not told from noise at every hop",
            },
            text.join(", ")
        ));
    }
    let verdict = if verdicts.contains(&Verdict::DoesNotHold) {
        Verdict::DoesNotHold
    } else if !verdicts.is_empty() && verdicts.iter().all(|&v| v == Verdict::Holds) {
        Verdict::Holds
    } else {
        Verdict::CannotTell
    };
    Finding {
        question: "a".into(),
        title: title.into(),
        holds: holds_of(verdict),
        ratio: worst_ratio,
        detail: parts.join("; ") + &format!(" (time relative to the 0-hop median; {RULE})"),
        verdict,
        comparison: None,
    }
}

/// The cases of (b), as indexes into `run.cases`: crossfire (two writers
/// on linked nodes, each writing the other's node) and no crossfire (same
/// hops, one writes the other's node, which writes a third node).
pub fn crossfire_cases(run: &SweepRun) -> (Vec<usize>, Vec<usize>) {
    let two_writers = |c: &CaseResult| {
        c.threads.len() == 2 && c.threads.iter().all(|t| t.case.access == Access::Write)
    };
    let cross = |c: &CaseResult| {
        let (a, b) = (&c.threads[0].case, &c.threads[1].case);
        a.node != b.node && a.mem == b.node && b.mem == a.node && a.hops == Some(1)
    };
    let no_cross = |c: &CaseResult| {
        let (a, b) = (&c.threads[0].case, &c.threads[1].case);
        let one_way =
            |x: &ThreadCase, y: &ThreadCase| x.mem == y.node && y.mem != x.node && y.mem != y.node;
        a.node != b.node
            && a.hops == Some(1)
            && b.hops == Some(1)
            && (one_way(a, b) || one_way(b, a))
    };
    let pick = |f: &dyn Fn(&CaseResult) -> bool| {
        run.cases
            .iter()
            .enumerate()
            .filter(|(_, c)| two_writers(c) && f(c) && c.seconds.median.is_finite())
            .map(|(i, _)| i)
            .collect()
    };
    (pick(&cross), pick(&no_cross))
}

/// (b) crossfire vs no crossfire, two writers, same hop counts.
/// `mem_nodes`: the sweep's memory nodes (with fewer than two no budget
/// could reach such a case).
fn finding_crossfire(run: Option<&SweepRun>, mem_nodes: &[u32]) -> Finding {
    let title = "two writers: crossfire (each writes the other's node) is slower than no crossfire (same hops, other links)";
    let none = |why: &str| Finding::unanswered("b", title, why);
    if let [only] = mem_nodes {
        return none(&format!(
            "this sweep has one memory node (node {only}): crossfire needs two writers on linked nodes"
        ));
    }
    let Some(run) = run else {
        return none("no two-thread cases in this sweep");
    };
    let (cross, no_cross) = crossfire_cases(run);
    let secs = |v: &[usize]| case_seconds(v.iter().map(|&i| &run.cases[i]));
    let test = rank_compare(&pooled(run, &cross), &pooled(run, &no_cross));
    match (median(secs(&cross)), median(secs(&no_cross)), test) {
        (Some(x), Some(n), Some(c)) => {
            let verdict = larger(&c);
            Finding {
                question: "b".into(),
                title: title.into(),
                holds: holds_of(verdict),
                ratio: Some(x / n),
                detail: format!(
                    "crossfire takes {:.2}x the time of no crossfire (medians over the matching cases; the classic idle result is > 1); samples {}, {RULE}",
                    x / n,
                    c.describe()
                ),
                verdict,
                comparison: Some(c),
            }
        }
        _ => none(&no_cases(
            run,
            "two writers on linked nodes, and a third node one hop from one of them",
        )),
    }
}

/// The cases of (c), as indexes into `run.cases`: two writers on two CPUs
/// of one node with both buffers local, and with one buffer one hop away.
pub fn two_writer_cases(run: &SweepRun) -> (Vec<usize>, Vec<usize>) {
    let same_node = |c: &CaseResult| {
        c.threads.len() == 2
            && c.threads.iter().all(|t| t.case.access == Access::Write)
            && c.threads[0].case.node == c.threads[1].case.node
            && c.threads[0].case.cpu != c.threads[1].case.cpu
            && c.seconds.median.is_finite()
    };
    let hops = |c: &CaseResult| {
        let mut h: Vec<Option<u32>> = c.threads.iter().map(|t| t.case.hops).collect();
        h.sort();
        h
    };
    let pick = |want: Vec<Option<u32>>| {
        run.cases
            .iter()
            .enumerate()
            .filter(|(_, c)| same_node(c) && hops(c) == want)
            .map(|(i, _)| i)
            .collect()
    };
    (pick(vec![Some(0), Some(0)]), pick(vec![Some(0), Some(1)]))
}

/// Two writers on two CPUs of one node, one buffer local and the other
/// `hops` away (indexes into `run.cases`).
pub fn two_writer_cases_at(run: &SweepRun, hops: u32) -> Vec<usize> {
    let (_, one) = two_writer_cases(run);
    if hops == 1 {
        return one;
    }
    run.cases
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            let mut h: Vec<Option<u32>> = c.threads.iter().map(|t| t.case.hops).collect();
            h.sort();
            c.threads.len() == 2
                && c.threads.iter().all(|t| t.case.access == Access::Write)
                && c.threads[0].case.node == c.threads[1].case.node
                && c.threads[0].case.cpu != c.threads[1].case.cpu
                && c.seconds.median.is_finite()
                && h == vec![Some(0), Some(hops)]
        })
        .map(|(i, _)| i)
        .collect()
}

/// The hop class of (d) with the largest spread: its name, and its fastest
/// and slowest case (indexes into `run.cases`). Threads taking turns on
/// one CPU (or sharing a core) are another experiment: their cases form
/// classes of their own.
pub fn widest_class(run: &SweepRun) -> Option<(String, usize, usize)> {
    let mut worst: Option<(f64, String, usize, usize)> = None;
    for (class, v) in hop_groups(run) {
        // The fastest and slowest of different experiments: a case and its
        // thread-swapped twin are the same one.
        let mut best: Option<(f64, usize, usize)> = None;
        for &(i, ti) in &v {
            for &(j, tj) in &v {
                if tj > ti && experiment(&run.cases[i]) != experiment(&run.cases[j]) {
                    let r = tj / ti;
                    if best.is_none_or(|b| r > b.0) {
                        best = Some((r, i, j));
                    }
                }
            }
        }
        if let Some((r, lo, hi)) = best {
            if worst.as_ref().is_none_or(|w| r > w.0) {
                worst = Some((r, class, lo, hi));
            }
        }
    }
    worst.map(|(_, class, lo, hi)| (class, lo, hi))
}

/// The cases of each hop class (threads sharing a CPU or a core in classes
/// of their own), with their median times.
fn hop_groups(run: &SweepRun) -> BTreeMap<String, Vec<(usize, f64)>> {
    let mut by: BTreeMap<String, Vec<(usize, f64)>> = BTreeMap::new();
    for (i, c) in run.cases.iter().enumerate() {
        if c.seconds.median.is_finite() {
            let key = match c.sharing.as_str() {
                "none" => c.hop_class.clone(),
                s => format!("{} (sharing a {s})", c.hop_class),
            };
            by.entry(key).or_default().push((i, c.seconds.median));
        }
    }
    by
}

/// How many hop classes hold two different experiments: what (d) picks
/// its widest class from.
pub fn compared_classes(run: &SweepRun) -> usize {
    hop_groups(run)
        .values()
        .filter(|v| {
            v.iter().any(|&(i, _)| {
                v.iter()
                    .any(|&(j, _)| experiment(&run.cases[i]) != experiment(&run.cases[j]))
            })
        })
        .count()
}

/// A case with its threads' order forgotten: two labelled threads doing
/// the same work are one experiment.
fn experiment(c: &CaseResult) -> Vec<(u32, Access, u32)> {
    let mut v: Vec<(u32, Access, u32)> = c
        .threads
        .iter()
        .map(|t| (t.case.cpu, t.case.access, t.case.mem))
        .collect();
    v.sort();
    v
}

/// (c) two writers on one node: both local vs one buffer one hop away.
fn finding_two_local_writers(run: Option<&SweepRun>) -> Finding {
    let title = "two writers on one node: moving one buffer one hop away beats keeping both local";
    let none = |why: &str| Finding::unanswered("c", title, why);
    let Some(run) = run else {
        return none("no two-thread cases in this sweep");
    };
    let (local, moved) = two_writer_cases(run);
    let secs = |v: &[usize]| case_seconds(v.iter().map(|&i| &run.cases[i]));
    let test = rank_compare(&pooled(run, &moved), &pooled(run, &local));
    // The study's second comparison: the buffer two hops away (or the
    // farthest the machine has).
    let farthest = (2..=8)
        .rev()
        .map(|h| (h, two_writer_cases_at(run, h)))
        .find(|(_, v)| !v.is_empty());
    let far_text = farthest
        .and_then(|(h, v)| {
            let c = rank_compare(&pooled(run, &v), &pooled(run, &local))?;
            Some(format!(
                "; 0-{h} hops against 0-0: {} ({})",
                c.describe(),
                match c.a_smaller() {
                    Verdict::Holds => "faster",
                    Verdict::DoesNotHold => "slower",
                    Verdict::CannotTell => "cannot tell",
                }
            ))
        })
        .unwrap_or_default();
    match (median(secs(&local)), median(secs(&moved)), test) {
        (Some(l), Some(mv), Some(c)) => {
            let verdict = c.a_smaller();
            Finding {
                question: "c".into(),
                title: title.into(),
                holds: holds_of(verdict),
                ratio: Some(mv / l),
                detail: format!(
                    "0-hop/1-hop takes {:.2}x the time of 0-hop/0-hop (< 1: the node's controller saturates with two local writers); samples {}{far_text}; {RULE}",
                    mv / l,
                    c.describe()
                ),
                verdict,
                comparison: Some(c),
            }
        }
        (None, _, _) => none(&no_cases(
            run,
            "two writers on two CPUs of one node, both local",
        )),
        _ => none(&no_cases(
            run,
            "two writers on one node, one of them writing a memory node one hop away",
        )),
    }
}

/// (d) are all cases of a hop class equal? The largest spread within one.
fn finding_equal_hops(run: Option<&SweepRun>) -> Finding {
    let title = "cases with the same hop counts take the same time";
    let Some(run) = run else {
        return Finding::unanswered("d", title, "no cases");
    };
    match widest_class(run) {
        Some((class, lo, hi)) => {
            let classes = compared_classes(run).max(1);
            let (lo_c, hi_c) = (&run.cases[lo], &run.cases[hi]);
            let r = hi_c.seconds.median / lo_c.seconds.median;
            let test = rank_compare(&pooled(run, &[hi]), &pooled(run, &[lo]));
            // The widest of several classes: its p-value is corrected for
            // how many classes it was picked from (Bonferroni).
            let verdict =
                test.as_ref()
                    .map_or(Verdict::CannotTell, |c| match c.equal_within(2.0 * NOISE) {
                        Verdict::DoesNotHold if c.p_value * classes as f64 >= ALPHA => {
                            Verdict::CannotTell
                        }
                        v => v,
                    });
            Finding {
                question: "d".into(),
                title: title.into(),
                holds: holds_of(verdict),
                ratio: Some(r),
                detail: format!(
                    "largest spread within a hop class: {:.2}x in class {class} ({} fastest, {} slowest), over {} threads; samples {}, equal within {:.0}%, p corrected for {classes} classes; a case and its thread-swapped twin are one experiment and are not compared; {RULE}",
                    r,
                    lo_c.labels.join(" "),
                    hi_c.labels.join(" "),
                    run.threads,
                    test.as_ref().map_or("not comparable".into(), |c| c.describe()),
                    200.0 * NOISE
                ),
                verdict,
                comparison: test,
            }
        }
        None => Finding::unanswered("d", title, "every hop class has a single case here"),
    }
}

/// A class measured at two members: labels of both, their samples, and
/// how the second was obtained.
struct MemberPair<'a> {
    hop_class: &'a str,
    moved_by: &'a str,
    labels: String,
    twin_labels: String,
    samples: Vec<f64>,
    twin_samples: Vec<f64>,
}

/// Every class of `runs` measured at two members: the twins, and with
/// `--every-case` the fastest and slowest member of each class.
fn member_pairs<'a>(runs: &[&'a SweepRun]) -> Vec<MemberPair<'a>> {
    let mut out = Vec::new();
    for run in runs {
        for t in &run.twins {
            out.push(MemberPair {
                hop_class: &t.hop_class,
                moved_by: t.moved_by.name(),
                labels: t.labels.join(" "),
                twin_labels: t.twin_labels.join(" "),
                samples: t.samples.clone(),
                twin_samples: t.twin_samples.clone(),
            });
        }
        let mut by_class: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, c) in run.cases.iter().enumerate() {
            if c.class_size == 1 && !c.class_key.is_empty() {
                by_class.entry(&c.class_key).or_default().push(i);
            }
        }
        for members in by_class.values().filter(|m| m.len() > 1) {
            let time = |&i: &usize| run.cases[i].seconds.median;
            let lo = *members
                .iter()
                .min_by(|a, b| time(a).total_cmp(&time(b)))
                .expect("member");
            let hi = *members
                .iter()
                .max_by(|a, b| time(a).total_cmp(&time(b)))
                .expect("member");
            out.push(MemberPair {
                hop_class: &run.cases[lo].hop_class,
                moved_by: "every member (--every-case)",
                labels: run.cases[lo].labels.join(" "),
                twin_labels: run.cases[hi].labels.join(" "),
                samples: pooled(run, &[lo]),
                twin_samples: pooled(run, &[hi]),
            });
        }
    }
    out
}

/// (e) Members of a symmetry class take the same time: the folding's
/// assumption, tested on the classes measured at two members. A class
/// whose members differ beyond the rank test's rule (p corrected for the
/// number of classes) shows the machine is less symmetric than its
/// distance table.
fn finding_symmetry(runs: &[&SweepRun]) -> Finding {
    let title = "members of a symmetry class take the same time";
    let pairs = member_pairs(runs);
    if pairs.is_empty() {
        let why = if runs
            .iter()
            .any(|r| r.cases.iter().any(|c| c.class_size > 1))
        {
            "no class was measured at two members (the budget paid for one member per class, or --no-twins; give more --budget or use --every-case)"
        } else {
            "every class has a single member here"
        };
        return Finding::unanswered("e", title, why);
    }
    let m = pairs.len();
    let mut differ: Vec<String> = Vec::new();
    // Which symmetry the differing classes contradict.
    let mut differ_by: Vec<&str> = Vec::new();
    let mut equal = 0usize;
    let mut widest: Option<(f64, usize, RankComparison)> = None;
    for (i, p) in pairs.iter().enumerate() {
        let Some(c) = rank_compare(&p.twin_samples, &p.samples) else {
            continue;
        };
        let v = match c.equal_within(2.0 * NOISE) {
            Verdict::DoesNotHold if c.p_value * m as f64 >= ALPHA => Verdict::CannotTell,
            v => v,
        };
        match v {
            Verdict::Holds => equal += 1,
            Verdict::DoesNotHold => {
                differ_by.push(p.moved_by);
                differ.push(format!(
                    "{} vs {} ({}, hop class {}): {}",
                    p.labels,
                    p.twin_labels,
                    p.moved_by,
                    p.hop_class,
                    c.describe()
                ))
            }
            Verdict::CannotTell => {}
        }
        let spread = c.ratio.max(1.0 / c.ratio);
        if widest.as_ref().is_none_or(|w| spread > w.0) {
            widest = Some((spread, i, c));
        }
    }
    let verdict = if !differ.is_empty() {
        Verdict::DoesNotHold
    } else if equal == m {
        Verdict::Holds
    } else {
        Verdict::CannotTell
    };
    let summary = match verdict {
        Verdict::DoesNotHold => {
            let mut what = Vec::new();
            if differ_by.iter().any(|b| *b != TwinMove::CoreSwap.name()) {
                what.push("this machine is less symmetric than its distance table");
            }
            if differ_by.contains(&TwinMove::CoreSwap.name()) {
                what.push("cores the topology makes alike (same node and cache) are not");
            }
            format!(
                "{}: {} of {m} classes measured at two members differ: {}",
                what.join("; "),
                differ.len(),
                differ.join("; ")
            )
        }
        Verdict::Holds => format!("all {m} classes measured at two members are equal within {:.0}%", 200.0 * NOISE),
        Verdict::CannotTell => format!(
            "{equal} of {m} classes measured at two members are equal within {:.0}%, the others inside the noise",
            200.0 * NOISE
        ),
    };
    let (ratio, comparison, widest_text) = match widest {
        Some((_, i, c)) => (
            Some(c.ratio),
            Some(c.clone()),
            format!(
                "; widest: {} vs {} ({}), {}",
                pairs[i].labels,
                pairs[i].twin_labels,
                pairs[i].moved_by,
                c.describe()
            ),
        ),
        None => (None, None, String::new()),
    };
    Finding {
        question: "e".into(),
        title: title.into(),
        holds: holds_of(verdict),
        ratio,
        detail: format!(
            "{summary}{widest_text}; interleaved runs (representative, twin, representative, twin), p corrected for {m} classes; {RULE}"
        ),
        verdict,
        comparison,
    }
}

/// Mines a finished sweep for the classic questions, per background setting.
pub fn findings(r: &SweepResult) -> Vec<Findings> {
    let mut conditions: Vec<Option<Background>> = Vec::new();
    for run in &r.runs {
        if !conditions.contains(&run.background) {
            conditions.push(run.background.clone());
        }
    }
    conditions
        .into_iter()
        .map(|bg| {
            let runs: Vec<&SweepRun> = r.runs.iter().filter(|x| x.background == bg).collect();
            let one = runs.iter().copied().find(|x| x.threads == 1);
            let two = runs.iter().copied().find(|x| x.threads == 2);
            let most = runs.iter().copied().max_by_key(|x| x.threads);
            Findings {
                condition: condition(bg.as_ref()),
                findings: vec![
                    finding_hops(one),
                    finding_crossfire(two, &r.mem_nodes),
                    finding_two_local_writers(two),
                    finding_equal_hops(most),
                    finding_symmetry(&runs),
                ],
            }
        })
        .collect()
}

/// Synthetic sweep runs for the tests of the findings and of the views
/// that state them, here and in numalab-report (compiled always, as
/// `placement::node_memory::test_tree`).
#[doc(hidden)]
pub mod test_cases {
    use super::*;
    use crate::experiments::sweep::{CaseTime, ThreadResult};

    /// A two-writer case: (node, cpu, mem, hops) per thread, in seconds.
    pub fn case(threads: &[(u32, u32, u32, u32)], seconds: f64) -> CaseResult {
        let threads: Vec<ThreadResult> = threads
            .iter()
            .map(|&(node, cpu, mem, hops)| ThreadResult {
                case: ThreadCase {
                    cpu,
                    node,
                    core: cpu,
                    access: Access::Write,
                    mem,
                    hops: Some(hops),
                },
                label: format!("{node}.{cpu}.w.{mem}"),
                seconds,
                gbps: 1.0,
                memory_gbps: 2.0,
                seen_cpus: vec![cpu],
                verified: true,
            })
            .collect();
        CaseResult {
            labels: threads.iter().map(|t| t.label.clone()).collect(),
            hop_class: String::new(),
            sharing: "none".into(),
            class_size: 1,
            class_key: String::new(),
            samples: [0.99, 1.01, 1.0, 0.98, 1.02, 1.005]
                .iter()
                .map(|f| f * seconds)
                .collect(),
            seconds: CaseTime {
                median: seconds,
                best: seconds,
                max: seconds,
                spread: 0.0,
                rel_ci: 0.01,
                samples: 3,
            },
            total_seconds: seconds * threads.len() as f64,
            normalized: 1.0,
            threads,
            background_achieved: Vec::new(),
            background_cpus: Vec::new(),
            verified: true,
            problems: Vec::new(),
        }
    }

    pub fn two_threads(cases: Vec<CaseResult>, classes: u64) -> SweepRun {
        SweepRun {
            threads: 2,
            background: None,
            total_cases: 64,
            classes,
            cases_run: cases.len() as u64,
            hop_classes: 4,
            hop_classes_run: 4,
            elapsed_s: 1.0,
            normalization: crate::experiments::sweep::NORMALIZATION.into(),
            cases,
            twins: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_cases::{case, two_threads};
    use super::*;

    /// Two local writers on node 0 only: (b) and (c) have no cases.
    fn local_only() -> Vec<CaseResult> {
        vec![case(&[(0, 0, 0, 0), (0, 1, 0, 0)], 1.0)]
    }

    #[test]
    fn crossfire_on_one_memory_node_names_the_node_not_the_budget() {
        // 1 of 20 classes ran, but no budget could reach a crossfire case.
        let run = two_threads(local_only(), 20);
        let b = finding_crossfire(Some(&run), &[0]);
        assert_eq!(b.holds, None);
        assert_eq!(
            b.detail,
            "this sweep has one memory node (node 0): crossfire needs two writers on linked nodes"
        );
    }

    #[test]
    fn unanswered_questions_say_the_budget_stopped_short() {
        // 1 of 20 classes ran on a 4-node machine: the cases exist but were not measured.
        let run = two_threads(local_only(), 20);
        let b = finding_crossfire(Some(&run), &[0, 1, 2, 3]);
        assert_eq!(b.holds, None);
        assert!(
            b.detail
                .starts_with("not measured: the budget reached 1 of the 20 classes of 2 threads"),
            "{}",
            b.detail
        );
        assert!(
            b.detail.contains("numalab sweep --thread-counts 2"),
            "{}",
            b.detail
        );
        assert!(!b.detail.contains("one-node"), "{}", b.detail);
        let c = finding_two_local_writers(Some(&run));
        assert_eq!(c.holds, None);
        assert!(
            c.detail.starts_with("not measured: the budget reached"),
            "{}",
            c.detail
        );
    }

    #[test]
    fn unanswered_questions_say_the_machine_has_no_such_case() {
        // Every class ran: the machine (one memory node) has no such case.
        let run = two_threads(local_only(), 1);
        let c = finding_two_local_writers(Some(&run));
        assert_eq!(
            c.detail,
            "this machine has no such case: two writers on one node, one of them writing a memory node one hop away (every class of 2 threads ran)"
        );
        let b = finding_crossfire(Some(&run), &[0, 1, 2, 3]);
        assert!(
            b.detail
                .starts_with("this machine has no such case: two writers on linked nodes"),
            "{}",
            b.detail
        );
    }

    #[test]
    fn crossfire_is_judged_from_its_cases() {
        let run = two_threads(
            vec![
                case(&[(0, 0, 1, 1), (1, 2, 0, 1)], 1.2),
                case(&[(0, 0, 1, 1), (1, 2, 2, 1)], 1.0),
                case(&[(0, 0, 0, 0), (0, 1, 1, 1)], 0.9),
                case(&[(0, 0, 0, 0), (0, 1, 0, 0)], 1.0),
            ],
            4,
        );
        assert_eq!(crossfire_cases(&run), (vec![0], vec![1]));
        let b = finding_crossfire(Some(&run), &[0, 1, 2, 3]);
        assert_eq!(b.holds, Some(true));
        assert!((b.ratio.unwrap() - 1.2).abs() < 1e-9);
        let c = finding_two_local_writers(Some(&run));
        assert_eq!(c.holds, Some(true), "{}", c.detail);
    }

    #[test]
    fn equal_hops_never_compares_a_case_with_its_thread_swapped_twin() {
        // 0.0.w.1 + 1.0.w.0 and its twin with the threads' labels swapped:
        // one experiment, 1.78x apart by noise; a third case of the same
        // hop class is the only real comparison.
        let mut twin = case(&[(1, 2, 0, 1), (0, 0, 1, 1)], 1.78);
        twin.hop_class = "w1 w1".into();
        let mut first = case(&[(0, 0, 1, 1), (1, 2, 0, 1)], 1.0);
        first.hop_class = "w1 w1".into();
        let run = two_threads(vec![first.clone(), twin.clone()], 2);
        assert_eq!(widest_class(&run), None);
        assert_eq!(finding_equal_hops(Some(&run)).holds, None);
        let mut other = case(&[(0, 0, 2, 1), (1, 2, 3, 1)], 1.01);
        other.hop_class = "w1 w1".into();
        let run = two_threads(vec![first, twin, other], 3);
        let (_, lo, hi) = widest_class(&run).unwrap();
        assert_eq!((lo, hi), (2, 1), "the twin against the third case");
    }

    #[test]
    fn equal_hops_inside_the_noise_holds_and_a_real_gap_does_not() {
        let mk = |secs: f64, mem: u32| {
            let mut c = case(&[(0, 0, mem, 1), (1, 2, 0, 1)], secs);
            c.hop_class = "w1 w1".into();
            c
        };
        let same = two_threads(vec![mk(1.0, 1), mk(1.001, 2)], 2);
        let d = finding_equal_hops(Some(&same));
        assert_eq!(d.verdict, Verdict::Holds, "{}", d.detail);
        let apart = two_threads(vec![mk(1.0, 1), mk(1.5, 2)], 2);
        let d = finding_equal_hops(Some(&apart));
        assert_eq!(d.verdict, Verdict::DoesNotHold, "{}", d.detail);
        assert_eq!(d.holds, Some(false));
        assert!(
            d.detail.contains("p corrected for 1 classes"),
            "{}",
            d.detail
        );
    }

    fn twin(moved_by: TwinMove, rep: &[f64], twin: &[f64]) -> super::super::TwinPair {
        super::super::TwinPair {
            class_key: "k".into(),
            hop_class: "w1/w1".into(),
            moved_by,
            labels: vec!["0.0.w.1".into(), "1.0.w.0".into()],
            twin_labels: vec!["2.0.w.3".into(), "3.0.w.2".into()],
            samples: rep.to_vec(),
            twin_samples: twin.to_vec(),
            verified: true,
            test: rank_compare(twin, rep),
        }
    }

    /// Finding (e): twins equal, twins apart beyond the rule, twins in the
    /// noise, and no twins at all.
    #[test]
    fn twins_test_the_symmetry_the_folding_assumed() {
        let even = [1.0, 1.01, 0.99, 1.0, 1.005, 0.995, 1.0, 1.002];
        let slow: Vec<f64> = even.iter().map(|x| x * 1.4).collect();
        let with = |pairs: Vec<super::super::TwinPair>| {
            let mut run = two_threads(local_only(), 2);
            run.twins = pairs;
            finding_symmetry(&[&run])
        };
        let f = with(vec![
            twin(TwinMove::NodeSymmetry, &even, &slow),
            twin(TwinMove::NodeSymmetry, &even, &even),
        ]);
        assert_eq!(f.question, "e");
        assert_eq!(f.verdict, Verdict::DoesNotHold, "{}", f.detail);
        assert!(
            f.detail.starts_with(
                "this machine is less symmetric than its distance table: 1 of 2 classes"
            ),
            "{}",
            f.detail
        );
        assert!(f.detail.contains("2.0.w.3 3.0.w.2"), "{}", f.detail);
        // A core swap contradicts the cores, not the distance table.
        let f = with(vec![twin(TwinMove::CoreSwap, &even, &slow)]);
        assert!(
            f.detail.starts_with("cores the topology makes alike"),
            "{}",
            f.detail
        );
        let f = with(vec![twin(TwinMove::NodeSymmetry, &even, &even)]);
        assert_eq!(f.verdict, Verdict::Holds, "{}", f.detail);
        // Two samples a side can never reach p < 0.05: cannot tell.
        let f = with(vec![twin(TwinMove::NodeSymmetry, &[1.0, 1.1], &[2.0, 2.2])]);
        assert_eq!(f.verdict, Verdict::CannotTell, "{}", f.detail);
        let f = with(Vec::new());
        assert_eq!(f.verdict, Verdict::CannotTell);
        assert!(f.detail.contains("single member"), "{}", f.detail);
    }
}
