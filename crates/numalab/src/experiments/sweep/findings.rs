//! The classic questions of the ccNUMA studies, answered from a finished
//! sweep: does time grow with hops, is crossfire slower, do two local
//! writers saturate their node, do cases with equal hops take equal time.

use super::space::{Access, ThreadCase};
use super::{condition, Background, CaseResult, SweepResult, SweepRun};
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
    /// The ratio the answer rests on (see `detail` for what over what).
    pub ratio: Option<f64>,
    pub detail: String,
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
            "not measured: the budget reached {} of the {} classes of {} threads and none of them was such a case ({needs}); run `numalab sweep --threads {}`, or `numalab report --full` or a larger `--budget`",
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
            "no one-thread cases in this sweep (run with --threads 1,2)",
        );
    };
    let mut parts = Vec::new();
    let mut holds = Some(true);
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
            holds = None;
            continue;
        }
        let base = meds[0].1;
        let text: Vec<String> = meds
            .iter()
            .map(|(h, s)| format!("{h} hop{}: {:.2}x", format::s(*h as usize), s / base))
            .collect();
        let grows = meds.windows(2).all(|w| w[1].1 > w[0].1 * (1.0 + NOISE));
        if !grows && holds.is_some() {
            holds = Some(false);
        }
        let r = meds.last().map(|x| x.1 / base);
        worst_ratio = match (worst_ratio, r) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        parts.push(format!(
            "{} ({}): {}",
            access_noun(access),
            if grows {
                "grows"
            } else {
                "does not grow at every hop"
            },
            text.join(", ")
        ));
    }
    Finding {
        question: "a".into(),
        title: title.into(),
        holds,
        ratio: worst_ratio,
        detail: parts.join("; ") + " (time relative to the 0-hop median)",
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
fn finding_crossfire(run: Option<&SweepRun>) -> Finding {
    let title = "two writers: crossfire (each writes the other's node) is slower than no crossfire (same hops, other links)";
    let none = |why: &str| Finding::unanswered("b", title, why);
    let Some(run) = run else {
        return none("no two-thread cases in this sweep");
    };
    let (cross, no_cross) = crossfire_cases(run);
    let secs = |v: &[usize]| case_seconds(v.iter().map(|&i| &run.cases[i]));
    let (cross, no_cross) = (secs(&cross), secs(&no_cross));
    match (median(cross), median(no_cross)) {
        (Some(x), Some(n)) => Finding {
            question: "b".into(),
            title: title.into(),
            holds: Some(x > n * (1.0 + NOISE)),
            ratio: Some(x / n),
            detail: format!(
                "crossfire takes {:.2}x the time of no crossfire (medians over the matching cases; the classic idle result is > 1)",
                x / n
            ),
        },
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

/// The hop class of (d) with the largest spread: its name, and its fastest
/// and slowest case (indexes into `run.cases`). Threads taking turns on
/// one CPU (or sharing a core) are another experiment: their cases form
/// classes of their own.
pub fn widest_class(run: &SweepRun) -> Option<(String, usize, usize)> {
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
    let mut worst: Option<(f64, String, usize, usize)> = None;
    for (class, v) in by {
        if v.len() < 2 {
            continue;
        }
        let lo = v.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        let hi = v.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        let r = hi.1 / lo.1;
        if worst.as_ref().is_none_or(|w| r > w.0) {
            worst = Some((r, class, lo.0, hi.0));
        }
    }
    worst.map(|(_, class, lo, hi)| (class, lo, hi))
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
    let (local, moved) = (secs(&local), secs(&moved));
    match (median(local), median(moved)) {
        (Some(l), Some(mv)) => Finding {
            question: "c".into(),
            title: title.into(),
            holds: Some(mv < l * (1.0 - NOISE)),
            ratio: Some(mv / l),
            detail: format!(
                "0-hop/1-hop takes {:.2}x the time of 0-hop/0-hop (< 1: the node's controller saturates with two local writers)",
                mv / l
            ),
        },
        (None, _) => none(&no_cases(run, "two writers on two CPUs of one node, both local")),
        (_, None) => none(&no_cases(
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
            let (lo, hi) = (&run.cases[lo], &run.cases[hi]);
            let r = hi.seconds.median / lo.seconds.median;
            Finding {
            question: "d".into(),
            title: title.into(),
            holds: Some(r <= 1.0 + 2.0 * NOISE),
            ratio: Some(r),
            detail: format!(
                "largest spread within a hop class: {:.2}x in class {class} ({} fastest, {} slowest), over {} threads",
                r,
                lo.labels.join(" "),
                hi.labels.join(" "),
                run.threads
            ),
            }
        }
        None => Finding::unanswered("d", title, "every hop class has a single case here"),
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
                    finding_crossfire(two),
                    finding_two_local_writers(two),
                    finding_equal_hops(most),
                ],
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::sweep::{CaseTime, ThreadResult};

    /// A two-writer case: (node, cpu, mem, hops) per thread, in seconds.
    fn case(threads: &[(u32, u32, u32, u32)], seconds: f64) -> CaseResult {
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
            seconds: CaseTime {
                median: seconds,
                best: seconds,
                max: seconds,
                spread: 0.0,
                rel_ci: 0.01,
                samples: 3,
            },
            normalized: 1.0,
            threads,
            background_achieved: Vec::new(),
            background_cpus: Vec::new(),
            verified: true,
            problems: Vec::new(),
        }
    }

    fn two_threads(cases: Vec<CaseResult>, classes: u64) -> SweepRun {
        SweepRun {
            threads: 2,
            background: None,
            total_cases: 64,
            classes,
            cases_run: cases.len() as u64,
            hop_classes: 4,
            hop_classes_run: 4,
            elapsed_s: 1.0,
            cases,
        }
    }

    /// Two local writers on node 0 only: (b) and (c) have no cases.
    fn local_only() -> Vec<CaseResult> {
        vec![case(&[(0, 0, 0, 0), (0, 1, 0, 0)], 1.0)]
    }

    #[test]
    fn unanswered_questions_say_the_budget_stopped_short() {
        // 1 of 20 classes ran on a 4-node machine: the cases exist but were not measured.
        let run = two_threads(local_only(), 20);
        let b = finding_crossfire(Some(&run));
        assert_eq!(b.holds, None);
        assert!(
            b.detail
                .starts_with("not measured: the budget reached 1 of the 20 classes of 2 threads"),
            "{}",
            b.detail
        );
        assert!(
            b.detail.contains("numalab sweep --threads 2"),
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
        let b = finding_crossfire(Some(&run));
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
        let b = finding_crossfire(Some(&run));
        assert_eq!(b.holds, Some(true));
        assert!((b.ratio.unwrap() - 1.2).abs() < 1e-9);
        let c = finding_two_local_writers(Some(&run));
        assert_eq!(c.holds, Some(true), "{}", c.detail);
    }
}
