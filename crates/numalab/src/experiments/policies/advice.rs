//! The advice that follows from the table's figures: for each workload the
//! policy to use (when the numbers single one out) with its comparisons,
//! then across workloads: pinning, initialization and scaling. A difference
//! counts only when the rank test on the two cells' samples says it holds
//! ([`crate::measure::compare`]: Mann–Whitney U, p < 0.05, with the 95%
//! interval of the ratio); otherwise the advice says it cannot tell. With one
//! memory node every column is the same memory, so nothing is compared.

use super::{Comparison, PolicyColumn, Recommendation, Workload};
use crate::measure::compare::{rank_compare, Verdict, RULE};
use crate::measure::stats::median;
use crate::text::format::percent;

use PolicyColumn as P;
use Workload as W;

/// A cell's bandwidth samples (aggregate GB/s, one per repetition),
/// `None` when it did not run.
type Lookup<'a> = &'a dyn Fn(Workload, PolicyColumn) -> Option<Vec<f64>>;

/// Which of two cells is faster (the higher median bandwidth is named
/// `better`) and whether the rank test on their samples says so: the
/// verdict of "`better` is faster than `worse`".
pub fn compare(a: (&str, &[f64]), b: (&str, &[f64])) -> Comparison {
    let finite_median = |v: &[f64]| median(v.to_vec()).unwrap_or(f64::NAN);
    // a is named first unless b's median is larger (a NaN median, from no
    // samples, keeps the order as given).
    let a_first =
        finite_median(a.1).partial_cmp(&finite_median(b.1)) != Some(std::cmp::Ordering::Less);
    let (better, worse) = if a_first { (a, b) } else { (b, a) };
    let rc = rank_compare(better.1, worse.1);
    let (percent, p_value, ratio_low, ratio_high, verdict) = match &rc {
        Some(rc) => (
            (rc.ratio - 1.0) * 100.0,
            rc.p_value,
            rc.ratio_low,
            rc.ratio_high,
            // "better is faster" is "worse's samples are the smaller".
            match rc.a_smaller() {
                Verdict::Holds => Verdict::DoesNotHold,
                Verdict::DoesNotHold => Verdict::Holds,
                Verdict::CannotTell => Verdict::CannotTell,
            },
        ),
        None => (f64::NAN, f64::NAN, f64::NAN, f64::NAN, Verdict::CannotTell),
    };
    Comparison {
        better: better.0.to_string(),
        worse: worse.0.to_string(),
        percent,
        noise_percent: f64::NAN,
        significant: verdict == Verdict::Holds,
        p_value,
        ratio_low,
        ratio_high,
        rule: RULE.to_string(),
        verdict,
        test: rc,
    }
}

/// The same comparison with no claim: on one memory node the cells being
/// compared are the same memory, so whatever the samples say is noise.
fn no_claim(mut c: Comparison) -> Comparison {
    c.verdict = Verdict::CannotTell;
    c.significant = false;
    c
}

/// The figures behind a verdict, for text: "1.32x (95% CI 1.25–1.40), p = 0.002".
fn figures(c: &Comparison) -> String {
    crate::measure::compare::RankComparison {
        n_a: 0,
        n_b: 0,
        median_a: f64::NAN,
        median_b: f64::NAN,
        ratio: 1.0 + c.percent / 100.0,
        estimate: f64::NAN,
        ratio_low: c.ratio_low,
        ratio_high: c.ratio_high,
        p_value: c.p_value,
    }
    .describe()
}

/// A comparison's difference for text (its `percent` is in percent).
fn by(c: &Comparison) -> String {
    percent(c.percent / 100.0)
}

/// "cannot tell, 1.03x (95% CI 0.97–1.10), p = 0.41": a difference the
/// test does not support, for text.
fn apart(c: &Comparison) -> String {
    format!("{}, {}", c.verdict.words(), figures(c))
}

fn label(w: Workload, p: PolicyColumn) -> String {
    format!("{}/{}", w.name(), p.name())
}

fn policy_words(p: PolicyColumn, node: u32) -> String {
    match p {
        P::Local => "local".into(),
        P::Interleave => "interleave".into(),
        P::InterleaveAccessing => "interleave over the accessing nodes".into(),
        P::OneNode => format!("node {node} only"),
    }
}

/// A policy as the advice for workload `w` names it: for the serial-init
/// program, local is "main-thread first touch".
fn policy_name(w: Workload, p: PolicyColumn, node: u32) -> String {
    match (w, p) {
        (W::SerialInit, P::Local) => "main-thread first touch".to_string(),
        _ => policy_words(p, node),
    }
}

/// The advice that follows from the figures (`fig(workload, policy)` is a
/// cell's aggregate bandwidth, `None` when it did not run).
pub fn recommend(
    fig: &dyn Fn(Workload, PolicyColumn) -> Option<Vec<f64>>,
    threads: usize,
    single_node: bool,
    node: u32,
) -> Vec<Recommendation> {
    let mut out: Vec<Recommendation> = Workload::ALL
        .into_iter()
        .filter_map(|w| workload_advice(fig, w, threads, single_node, node))
        .collect();
    out.extend(pinning(fig));
    if threads > 1 {
        out.extend(initialization(fig, single_node).map(|mut r| {
            if single_node {
                r.comparisons = r.comparisons.into_iter().map(no_claim).collect();
            }
            r
        }));
        out.extend(scaling(fig, threads));
    }
    out
}

/// The advice for one workload, when at least two of its policies ran.
fn workload_advice(
    fig: Lookup,
    w: Workload,
    threads: usize,
    single_node: bool,
    node: u32,
) -> Option<Recommendation> {
    let figs: Vec<(PolicyColumn, Vec<f64>)> = PolicyColumn::ALL
        .into_iter()
        .filter_map(|p| fig(w, p).map(|f| (p, f)))
        .collect();
    if figs.len() < 2 {
        return None;
    }
    let (comparisons, sentences) = classic_comparisons(w, &figs, node);
    if single_node {
        return Some(Recommendation {
            topic: w.name().to_string(),
            best: None,
            text: format!(
                "{}: any policy: {ONE_NODE}, so there is nothing to compare",
                subject(w, threads)
            ),
            comparisons: comparisons.into_iter().map(no_claim).collect(),
        });
    }
    let (fastest, top) = fastest_and_tied(w, &figs);
    let best = (top.len() == 1).then_some(fastest);
    let advice = advice_words(w, best, &top, node);
    Some(Recommendation {
        topic: w.name().to_string(),
        best,
        text: format!(
            "{}: {advice}: {}",
            subject(w, threads),
            sentences.join("; ")
        ),
        comparisons,
    })
}

/// Why a one-memory-node machine has no policy to recommend.
pub const ONE_NODE: &str = "one memory node: local, interleave and bind place the same memory";

/// The program a workload stands for, as the advice names it.
fn subject(w: Workload, threads: usize) -> String {
    match w {
        W::SingleUnpinned => "single-threaded program, unpinned".to_string(),
        W::SinglePinned => "single-threaded program, pinned".to_string(),
        W::Independent => "independent single-threaded programs".to_string(),
        W::SerialInit => format!("{threads}-thread program with serial init"),
        W::NumaAware => format!("NUMA-aware {threads}-thread program"),
    }
}

/// At most two comparisons of a workload's policies, with a sentence each.
/// First the classic question of the workload (local vs interleave; for the
/// serial-init program interleave vs main-thread first touch), then the
/// one-node column against the first; when a column was not run, whichever
/// pair is left.
fn classic_comparisons(
    w: Workload,
    figs: &[(PolicyColumn, Vec<f64>)],
    node: u32,
) -> (Vec<Comparison>, Vec<String>) {
    let (first, second) = match w {
        W::SerialInit => (P::Interleave, P::Local),
        _ => (P::Local, P::Interleave),
    };
    let get = |p: PolicyColumn| figs.iter().find(|f| f.0 == p).map(|f| &f.1);
    let name_of = |p: PolicyColumn| policy_name(w, p, node);
    let pairs = [(first, second), (first, P::OneNode), (second, P::OneNode)];
    let mut comparisons = Vec::new();
    let mut sentences = Vec::new();
    for (a, b) in pairs {
        let (Some(fa), Some(fb)) = (get(a), get(b)) else {
            continue;
        };
        if comparisons.len() == 2 {
            break;
        }
        let c = compare((&label(w, a), fa), (&label(w, b), fb));
        let a_wins = c.better == label(w, a);
        let (win, lose) = if a_wins { (a, b) } else { (b, a) };
        sentences.push(if c.significant {
            format!(
                "{} beats {} by {} (holds: {})",
                name_of(win),
                name_of(lose),
                by(&c),
                figures(&c)
            )
        } else {
            format!(
                "{} faster than {}: {}",
                name_of(win),
                name_of(lose),
                apart(&c)
            )
        });
        comparisons.push(c);
    }
    (comparisons, sentences)
}

/// The fastest policy (highest median), and the policies tied with it
/// (itself included, in column order): those the test cannot tell it is
/// faster than. The fastest is the best only when it is alone at the top.
fn fastest_and_tied(
    w: Workload,
    figs: &[(PolicyColumn, Vec<f64>)],
) -> (PolicyColumn, Vec<PolicyColumn>) {
    let med = |v: &[f64]| median(v.to_vec()).unwrap_or(f64::NAN);
    let (best_p, best_f) = figs
        .iter()
        .max_by(|x, y| med(&x.1).total_cmp(&med(&y.1)))
        .map(|(p, f)| (*p, f.clone()))
        .expect("two figures");
    let top = figs
        .iter()
        .filter(|(p, f)| {
            *p == best_p || !compare((&label(w, best_p), &best_f), (&label(w, *p), f)).significant
        })
        .map(|(p, _)| *p)
        .collect();
    (best_p, top)
}

/// What to do, in words: the best policy, or when several are tied, the
/// default when it is among them, else all of them.
fn advice_words(
    w: Workload,
    best: Option<PolicyColumn>,
    top: &[PolicyColumn],
    node: u32,
) -> String {
    let tied = || {
        top.iter()
            .map(|p| policy_name(w, *p, node))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    match (best, w) {
        (Some(P::Local), W::SerialInit) => {
            "keep first touch (the main thread's node copes at this thread count)".into()
        }
        (Some(P::Local), _) => "keep local".into(),
        (Some(P::Interleave), W::SerialInit) => {
            "interleave (or better, initialize in parallel)".into()
        }
        (Some(P::Interleave), _) => {
            "interleave (against the classic advice: check the verification, rerun with a larger --budget)".into()
        }
        (Some(P::InterleaveAccessing), _) => {
            "interleave over the nodes the threads run on".into()
        }
        (Some(P::OneNode), _) => format!("bind to node {node}"),
        (None, W::SerialInit) if top.contains(&P::Local) => {
            "no clear winner; initializing in parallel is the real fix".into()
        }
        (None, W::SerialInit) => format!(
            "{} (the test cannot tell them apart; each ahead of main-thread first touch), or better, initialize in parallel",
            tied()
        ),
        (None, _) if top.contains(&P::Local) => "no clear winner: keep local (the default)".into(),
        (None, _) => format!("{} (the test cannot tell them apart; each ahead of local)", tied()),
    }
}

/// Advice across workloads: cell `a` compared with cell `b` (when both
/// ran), worded by `what(comparison, a_wins)`.
fn cross(
    fig: Lookup,
    topic: &str,
    a: (Workload, PolicyColumn),
    b: (Workload, PolicyColumn),
    what: impl Fn(&Comparison, bool) -> String,
) -> Option<Recommendation> {
    let (fa, fb) = (fig(a.0, a.1)?, fig(b.0, b.1)?);
    let (fa, fb) = (fa.as_slice(), fb.as_slice());
    let c = compare((&label(a.0, a.1), fa), (&label(b.0, b.1), fb));
    let a_wins = c.better == label(a.0, a.1);
    Some(Recommendation {
        topic: topic.into(),
        best: None,
        text: what(&c, a_wins),
        comparisons: vec![c],
    })
}

/// Pinned vs unpinned single thread, both local.
fn pinning(fig: Lookup) -> Option<Recommendation> {
    cross(
        fig,
        "pinning",
        (W::SinglePinned, P::Local),
        (W::SingleUnpinned, P::Local),
        |c, pinned_wins| {
            if !c.significant {
                format!(
                    "pinning a single thread: no measurable effect ({})",
                    apart(c)
                )
            } else if pinned_wins {
                format!(
                    "pinning a single thread pays: +{} over letting the scheduler place it (holds: {})",
                    by(c),
                    figures(c)
                )
            } else {
                format!(
                    "the unpinned thread was {} faster than the pinned one (holds: {}; the scheduler found a quieter CPU)",
                    by(c),
                    figures(c)
                )
            }
        },
    )
}

/// NUMA-aware vs main-thread initialization, both first touch.
fn initialization(fig: Lookup, single_node: bool) -> Option<Recommendation> {
    cross(
        fig,
        "initialization",
        (W::NumaAware, P::Local),
        (W::SerialInit, P::Local),
        |c, aware_wins| {
            if single_node {
                format!(
                    "initializing in parallel vs from the main thread (first touch): {ONE_NODE}, so there is nothing to compare"
                )
            } else if !c.significant {
                format!(
                    "initializing in parallel vs from the main thread (first touch): no measurable difference ({})",
                    apart(c)
                )
            } else if aware_wins {
                format!(
                    "let each thread initialize its own data: NUMA-aware first touch beats main-thread first touch by {} (holds: {})",
                    by(c),
                    figures(c)
                )
            } else {
                format!(
                    "main-thread initialization beat NUMA-aware initialization by {} (holds: {})",
                    by(c),
                    figures(c)
                )
            }
        },
    )
}

/// The NUMA-aware program's threads against one pinned thread.
fn scaling(fig: Lookup, threads: usize) -> Option<Recommendation> {
    let (one, all) = (
        median(fig(W::SinglePinned, P::Local)?)?,
        median(fig(W::NumaAware, P::Local)?)?,
    );
    let ratio = all / one;
    Some(Recommendation {
        topic: "scaling".into(),
        best: None,
        text: format!(
            "{threads} NUMA-aware threads reach {ratio:.2} times one pinned thread's bandwidth ({:.0}% of linear)",
            100.0 * ratio / threads as f64
        ),
        comparisons: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ten samples spread evenly over ±`spread` around `median`.
    fn spread_samples(median: f64, spread: f64) -> Vec<f64> {
        (0..10)
            .map(|k| median * (1.0 + spread * (k as f64 - 4.5) / 4.5))
            .collect()
    }

    fn f(median: f64) -> Vec<f64> {
        spread_samples(median, 0.03)
    }

    #[test]
    fn comparisons_follow_the_rank_test() {
        let c = compare(("a", &f(12.0)), ("b", &f(10.0)));
        assert_eq!((c.better.as_str(), c.worse.as_str()), ("a", "b"));
        assert!((c.percent - 20.0).abs() < 1e-9 && c.significant);
        assert_eq!(c.verdict, Verdict::Holds);
        // Ten against ten without overlap: 2/C(20,10) = 1.08e-5.
        assert!((c.p_value - 2.0 / 184_756.0).abs() < 1e-12, "{}", c.p_value);
        assert!(c.ratio_low <= 1.2 && 1.2 <= c.ratio_high, "{c:?}");
        assert_eq!(c.rule, RULE);
        // Reversed: the faster one is named first.
        let c = compare(("a", &f(10.0)), ("b", &f(12.0)));
        assert_eq!(c.better, "b");
        assert_eq!(c.verdict, Verdict::Holds);
        assert!((c.percent - 20.0).abs() < 1e-9);
        // Samples that overlap: the medians differ by 2% but the test cannot tell.
        let c = compare(
            ("a", &spread_samples(10.2, 0.2)),
            ("b", &spread_samples(10.0, 0.2)),
        );
        assert_eq!(c.verdict, Verdict::CannotTell, "{c:?}");
        assert!(!c.significant && c.p_value > 0.05);
        // One sample each can never be a claim, however far apart.
        let c = compare(("a", &[20.0]), ("b", &[10.0]));
        assert_eq!(c.verdict, Verdict::CannotTell);
        assert!(c.ratio_low.is_nan());
        // No samples (a cell read back without its run): no claim either.
        let c = compare(("a", &[]), ("b", &[10.0]));
        assert_eq!(c.verdict, Verdict::CannotTell);
    }

    #[test]
    fn comparisons_read_back_from_json_without_the_new_fields() {
        let old =
            r#"{"better":"a","worse":"b","percent":20.0,"noise_percent":5.0,"significant":true}"#;
        let c: Comparison = serde_json::from_str(old).unwrap();
        assert_eq!(c.verdict, Verdict::CannotTell);
        assert!(c.p_value.is_nan() && c.rule.is_empty() && c.significant);
        let new = compare(("a", &f(12.0)), ("b", &f(10.0)));
        let back: Comparison = serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(back.verdict, Verdict::Holds);
        assert_eq!(back.p_value, new.p_value);
    }

    fn table(
        cells: &[(Workload, PolicyColumn, f64)],
    ) -> impl Fn(Workload, PolicyColumn) -> Option<Vec<f64>> + '_ {
        move |w, p| cells.iter().find(|c| c.0 == w && c.1 == p).map(|c| f(c.2))
    }

    #[test]
    fn classic_numbers_give_the_classic_advice() {
        use PolicyColumn as P;
        use Workload as W;
        let cells = [
            (W::SinglePinned, P::Local, 10.0),
            (W::SinglePinned, P::Interleave, 7.0),
            (W::SinglePinned, P::OneNode, 10.1),
            (W::SingleUnpinned, P::Local, 8.0),
            (W::SingleUnpinned, P::Interleave, 7.0),
            (W::Independent, P::Local, 40.0),
            (W::Independent, P::Interleave, 25.0),
            (W::Independent, P::OneNode, 11.0),
            (W::SerialInit, P::Local, 11.0),
            (W::SerialInit, P::Interleave, 25.0),
            (W::SerialInit, P::OneNode, 11.0),
            (W::NumaAware, P::Local, 39.0),
            (W::NumaAware, P::Interleave, 25.0),
            (W::NumaAware, P::OneNode, 11.0),
        ];
        let r = recommend(&table(&cells), 8, false, 0);
        let text = |topic: &str| {
            r.iter()
                .find(|x| x.topic == topic)
                .unwrap_or_else(|| panic!("{topic} missing: {r:?}"))
        };
        let ind = text("independent");
        assert_eq!(ind.best, Some(P::Local));
        assert!(ind.text.contains("keep local"), "{}", ind.text);
        assert!(
            ind.text.contains("local beats interleave by 60%"),
            "{}",
            ind.text
        );
        let ser = text("serial-init");
        assert_eq!(ser.best, Some(P::Interleave));
        assert!(
            ser.text
                .contains("interleave beats main-thread first touch by 127%"),
            "{}",
            ser.text
        );
        let aware = text("numa-aware");
        assert!(
            aware.text.contains("local beats interleave by 56%"),
            "{}",
            aware.text
        );
        // Pinned single thread: local and node 0 tie, so no single winner,
        // and the default is kept.
        let pinned = text("single-pinned");
        assert_eq!(pinned.best, None);
        assert!(
            pinned.text.contains("keep local (the default)"),
            "{}",
            pinned.text
        );
        assert!(
            pinned
                .text
                .contains("faster than local: cannot tell, 1.01x (95% CI"),
            "{}",
            pinned.text
        );
        assert!(ind.text.contains("(holds: 1.60x (95% CI"), "{}", ind.text);
        assert!(text("pinning").text.contains("pays: +25%"));
        assert!(text("initialization")
            .text
            .contains("beats main-thread first touch by 255%"));
        assert!(text("scaling").text.contains("3.90 times"));
    }

    #[test]
    fn one_node_machines_get_no_winner() {
        use PolicyColumn as P;
        use Workload as W;
        let cells = [
            (W::NumaAware, P::Local, 10.0),
            (W::NumaAware, P::Interleave, 8.0),
            (W::NumaAware, P::OneNode, 10.1),
        ];
        let r = recommend(&table(&cells), 2, true, 0);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].best, None);
        assert_eq!(
            r[0].text,
            "NUMA-aware 2-thread program: any policy: one memory node: local, interleave and bind place the same memory, so there is nothing to compare"
        );
        // The figures are kept, but none is a claim, not even local against
        // interleave, whose samples do not overlap.
        assert_eq!(r[0].comparisons.len(), 2);
        assert!(r[0].comparisons[0].p_value < 0.05, "{:?}", r[0].comparisons);
        assert!(r[0]
            .comparisons
            .iter()
            .all(|c| c.verdict == Verdict::CannotTell && !c.significant));
        // Initialization is about where pages go: no claim on one node either.
        let cells = [
            (W::SerialInit, P::Local, 5.0),
            (W::NumaAware, P::Local, 10.0),
        ];
        let r = recommend(&table(&cells), 2, true, 0);
        let init = r.iter().find(|x| x.topic == "initialization").unwrap();
        assert!(!init.text.contains("beat"), "{}", init.text);
        assert!(init.text.contains("nothing to compare"), "{}", init.text);
        assert_eq!(init.comparisons[0].verdict, Verdict::CannotTell);
    }

    #[test]
    fn advice_uses_whichever_columns_ran() {
        use PolicyColumn as P;
        use Workload as W;
        let cells = [
            (W::SerialInit, P::Local, 10.0),
            (W::SerialInit, P::OneNode, 20.0),
        ];
        let r = recommend(&table(&cells), 4, false, 3);
        assert_eq!(r.len(), 1, "{r:?}");
        assert_eq!(r[0].best, Some(P::OneNode));
        assert_eq!(r[0].comparisons.len(), 1);
        assert!(
            r[0].text
                .contains("node 3 only beats main-thread first touch by 100%"),
            "{}",
            r[0].text
        );
        // Two columns tied ahead of local: both named, no single winner.
        let cells = [
            (W::SinglePinned, P::Local, 10.0),
            (W::SinglePinned, P::Interleave, 20.0),
            (W::SinglePinned, P::OneNode, 20.2),
        ];
        let r = recommend(&table(&cells), 4, false, 3);
        assert_eq!(r[0].best, None);
        assert!(
            r[0].text.contains(
                "interleave or node 3 only (the test cannot tell them apart; each ahead of local)"
            ),
            "{}",
            r[0].text
        );
        // A single column gives nothing to compare.
        assert!(recommend(&table(&cells[..1]), 4, false, 3).is_empty());
    }
}
