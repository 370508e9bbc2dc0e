//! The advice that follows from the table's figures: for each workload the
//! policy to use (when the numbers single one out) with its comparisons,
//! then across workloads: pinning, initialization and scaling. A difference
//! counts only when it is larger than the noise (see [`compare`]).

use super::{Comparison, PolicyColumn, Recommendation, Workload};
use crate::measure::harness::Figure;
use crate::text::format::percent;

use PolicyColumn as P;
use Workload as W;

/// A cell's aggregate bandwidth, `None` when it did not run.
type Lookup<'a> = &'a dyn Fn(Workload, PolicyColumn) -> Option<Figure>;

/// How much faster `a` is than `b`, and whether that is more than noise.
pub fn compare(a: (&str, &Figure), b: (&str, &Figure)) -> Comparison {
    let percent = (a.1.median / b.1.median - 1.0) * 100.0;
    let ci = |f: &Figure| {
        if f.rel_ci.is_finite() {
            f.rel_ci
        } else {
            1.0
        }
    };
    let noise_percent = (5.0f64).max((ci(a.1) + ci(b.1)) * 100.0);
    let (better, worse, percent) = if percent >= 0.0 {
        (a.0, b.0, percent)
    } else {
        (b.0, a.0, (b.1.median / a.1.median - 1.0) * 100.0)
    };
    Comparison {
        better: better.to_string(),
        worse: worse.to_string(),
        percent,
        noise_percent,
        significant: percent.is_finite() && percent > noise_percent,
    }
}

/// A comparison's difference for text (its `percent` is in percent).
fn by(c: &Comparison) -> String {
    percent(c.percent / 100.0)
}

/// "4.5% apart, noise 5%": a difference within noise, for text.
fn apart(c: &Comparison) -> String {
    format!(
        "{} apart, noise {}",
        by(c),
        percent(c.noise_percent / 100.0)
    )
}

fn label(w: Workload, p: PolicyColumn) -> String {
    format!("{}/{}", w.name(), p.name())
}

fn policy_words(p: PolicyColumn, node: u32) -> String {
    match p {
        P::Local => "local".into(),
        P::Interleave => "interleave".into(),
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
    fig: &dyn Fn(Workload, PolicyColumn) -> Option<Figure>,
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
        out.extend(initialization(fig, single_node));
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
    let figs: Vec<(PolicyColumn, Figure)> = PolicyColumn::ALL
        .into_iter()
        .filter_map(|p| fig(w, p).map(|f| (p, f)))
        .collect();
    if figs.len() < 2 {
        return None;
    }
    let (comparisons, sentences) = classic_comparisons(w, &figs, node);
    let (fastest, top) = fastest_and_tied(w, &figs);
    let best = (!single_node && top.len() == 1).then_some(fastest);
    let advice = advice_words(w, best, &top, single_node, node);
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
    figs: &[(PolicyColumn, Figure)],
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
            format!("{} beats {} by {}", name_of(win), name_of(lose), by(&c))
        } else {
            format!(
                "{} and {} are within noise ({})",
                name_of(win),
                name_of(lose),
                apart(&c)
            )
        });
        comparisons.push(c);
    }
    (comparisons, sentences)
}

/// The fastest policy, and the policies tied with it (itself included, in
/// column order): those it does not beat by more than noise. The fastest is
/// the best only when it is alone at the top.
fn fastest_and_tied(
    w: Workload,
    figs: &[(PolicyColumn, Figure)],
) -> (PolicyColumn, Vec<PolicyColumn>) {
    let (best_p, best_f) = figs
        .iter()
        .max_by(|x, y| x.1.median.total_cmp(&y.1.median))
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
    single_node: bool,
    node: u32,
) -> String {
    let tied = || {
        top.iter()
            .map(|p| policy_name(w, *p, node))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    match (best, w) {
        _ if single_node => {
            "any policy (one memory node: the policies are the same memory, so any difference here is noise)".to_string()
        }
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
        (Some(P::OneNode), _) => format!("bind to node {node}"),
        (None, W::SerialInit) if top.contains(&P::Local) => {
            "no clear winner; initializing in parallel is the real fix".into()
        }
        (None, W::SerialInit) => format!(
            "{} (tied, both ahead of main-thread first touch), or better, initialize in parallel",
            tied()
        ),
        (None, _) if top.contains(&P::Local) => "no clear winner: keep local (the default)".into(),
        (None, _) => format!("{} (tied, both ahead of local)", tied()),
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
    let c = compare((&label(a.0, a.1), &fa), (&label(b.0, b.1), &fb));
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
                    "pinning a single thread pays: +{} over letting the scheduler place it",
                    by(c)
                )
            } else {
                format!(
                    "the unpinned thread was {} faster than the pinned one (the scheduler found a quieter CPU)",
                    by(c)
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
            let caveat = if single_node {
                " (one memory node: every page is on it either way, so this is noise)"
            } else {
                ""
            };
            if !c.significant {
                format!(
                    "initializing in parallel vs from the main thread (first touch): no measurable difference ({}){}",
                    apart(c),
                    if single_node { ": every page is on the one node either way" } else { "" }
                )
            } else if aware_wins {
                format!(
                    "let each thread initialize its own data: NUMA-aware first touch beats main-thread first touch by {}{caveat}",
                    by(c)
                )
            } else {
                format!(
                    "main-thread initialization beat NUMA-aware initialization by {}{caveat}",
                    by(c)
                )
            }
        },
    )
}

/// The NUMA-aware program's threads against one pinned thread.
fn scaling(fig: Lookup, threads: usize) -> Option<Recommendation> {
    let (one, all) = (
        fig(W::SinglePinned, P::Local)?,
        fig(W::NumaAware, P::Local)?,
    );
    let ratio = all.median / one.median;
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

    fn f(median: f64, rel_ci: f64) -> Figure {
        Figure {
            median,
            best: median,
            min: median,
            max: median,
            spread: 0.0,
            rel_ci,
        }
    }

    #[test]
    fn comparisons_separate_noise_from_differences() {
        let c = compare(("a", &f(12.0, 0.01)), ("b", &f(10.0, 0.01)));
        assert_eq!((c.better.as_str(), c.worse.as_str()), ("a", "b"));
        assert!((c.percent - 20.0).abs() < 1e-9 && c.significant);
        assert_eq!(c.noise_percent, 5.0);
        // Reversed: the faster one is named first.
        let c = compare(("a", &f(10.0, 0.01)), ("b", &f(12.0, 0.01)));
        assert_eq!(c.better, "b");
        assert!((c.percent - 20.0).abs() < 1e-9);
        // Wide confidence intervals swallow the difference.
        let c = compare(("a", &f(12.0, 0.15)), ("b", &f(10.0, 0.1)));
        assert!((c.noise_percent - 25.0).abs() < 1e-9 && !c.significant);
        // No interval at all counts as 100% noise.
        let c = compare(("a", &f(12.0, f64::NAN)), ("b", &f(10.0, 0.0)));
        assert!(!c.significant);
    }

    fn table(
        cells: &[(Workload, PolicyColumn, f64)],
    ) -> impl Fn(Workload, PolicyColumn) -> Option<Figure> + '_ {
        move |w, p| {
            cells
                .iter()
                .find(|c| c.0 == w && c.1 == p)
                .map(|c| f(c.2, 0.01))
        }
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
        assert!(pinned.text.contains("within noise"), "{}", pinned.text);
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
        assert!(
            r[0].text.contains("any policy (one memory node"),
            "{}",
            r[0].text
        );
        assert!(r[0].text.contains("is noise)"), "{}", r[0].text);
        assert!(
            r[0].text.contains("local beats interleave by 25%"),
            "{}",
            r[0].text
        );
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
            r[0].text
                .contains("interleave or node 3 only (tied, both ahead of local)"),
            "{}",
            r[0].text
        );
        // A single column gives nothing to compare.
        assert!(recommend(&table(&cells[..1]), 4, false, 3).is_empty());
    }
}
