//! Packed vs spread scaling (`numalab scaling`, report part `scaling`):
//! bandwidth for 1..N threads, packed on one node's cores first or spread
//! one per node, and the contention split.

use super::matrix::halvings;
use super::Units;
use crate::claims::{Derivation, Relation, Threshold};
use crate::csv::{ids, num, yes, Table};
use crate::html::Section;
use crate::model::{largest_fitting, spread, PartPlan, Work};
use crate::part::{Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S};
use crate::plan::max_cpus_per_node;
use crate::plan::PlanEnv;
use crate::summary::{finding, SummaryBuilder};
use crate::svg::{line_chart, Axis, Scale, Series, TickFormat};
use numalab::experiments::copies::CopiesResult;
use numalab::experiments::scaling::{
    pair_reference_cpu, run_scaling_at, ScalingModel, ScalingPoint, ScalingResult,
};
use numalab::machine::Machine;
use numalab::measure::kernels::BandwidthKernel;
use numalab::placement::thread_policy::{compact_order, scatter_order};
use numalab::placement::PlacementError;
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The report part.
pub struct ScalingPart;

/// The thread counts, bytes per thread and seconds per measurement of the
/// scaling curve for `budget` seconds, and the plan: every count of
/// [`scaling_counts`] at the fitted buffer when that fits; else shorter
/// measurements, then smaller buffers (down to twice the last-level
/// cache), then fewer counts (1 and all CPUs always, at least three).
fn work(env: &PlanEnv, budget: f64) -> ((Vec<usize>, usize, f64), PartPlan) {
    let m = env.m;
    let all = scaling_counts(m);
    let packed = compact_order(m, &m.allowed_cpus);
    let spread_cpus = scatter_order(m, &m.allowed_cpus);
    let per_node = max_cpus_per_node(m).max(1);
    let nodes: Vec<u32> = m.cpu_nodes().iter().collect();
    let full_bytes = env.fit_all(&nodes, per_node, env.size, 0.6);
    let min_bytes = env.min_memory_bytes(full_bytes);
    let byte_levels = halvings(min_bytes, full_bytes);
    let c = env.costs;
    // One point: n threads, each placing and passing over its buffer; the
    // packed run puts up to a node's CPUs on one memory node. Spread runs
    // only where it differs from packed.
    let point = |n: usize, bytes: usize, per: f64| -> f64 {
        let b = bytes as f64;
        let one = c.place(b * n as f64, n)
            + c.threads(n)
            + c.measurement(per, c.bandwidth_sample(b, n.min(per_node)));
        let differs = n > 1 && packed.get(..n) != spread_cpus.get(..n);
        one * if differs { 2.0 } else { 1.0 }
    };
    let fewest = all.len().min(3);
    let counts_levels = all.len() - fewest + 1;
    let levels = counts_levels + byte_levels.len() - 1;
    let at = |l: usize| -> (Vec<usize>, usize) {
        if l < counts_levels {
            let v = spread(all.len(), fewest + l)
                .into_iter()
                .map(|i| all[i])
                .collect();
            (v, min_bytes)
        } else {
            (all.clone(), byte_levels[l + 1 - counts_levels])
        }
    };
    // The split's single-core reference on the pair's second CPU adds a
    // one-thread point where the counts give a pair on one node.
    let reference = |v: &[usize]| usize::from(pair_reference_cpu(m, &packed, v).is_some());
    let cost = |v: &[usize], bytes: usize, per: f64| {
        v.iter().map(|&n| point(n, bytes, per)).sum::<f64>()
            + reference(v) as f64 * point(1, bytes, per)
    };
    let l = largest_fitting(levels, budget, |l| {
        let (v, b) = at(l);
        cost(&v, b, MIN_MEASUREMENT_S)
    });
    let (counts, bytes) = at(l);
    let measurements: usize = counts
        .iter()
        .map(|&n| {
            if n > 1 && packed.get(..n) != spread_cpus.get(..n) {
                2
            } else {
                1
            }
        })
        .sum::<usize>()
        + reference(&counts);
    let fixed = cost(&counts, bytes, MIN_MEASUREMENT_S) - measurements as f64 * MIN_MEASUREMENT_S;
    let per = ((budget - fixed) / measurements.max(1) as f64).clamp(MIN_MEASUREMENT_S, 5.0);
    let mut cut = Vec::new();
    if counts.len() < all.len() {
        cut.push(format!(
            "{} of {} thread counts ({})",
            counts.len(),
            all.len(),
            counts
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if bytes < full_bytes {
        cut.push(format!(
            "{} per thread instead of {}",
            format_bytes(bytes as u64),
            format_bytes(full_bytes as u64)
        ));
    }
    let plan = PartPlan {
        predicted_s: cost(&counts, bytes, per),
        measuring_s: per * measurements as f64,
        work: Work {
            measurements,
            per_measurement_s: per,
            threads: counts.iter().copied().max().unwrap_or(1),
            buffer_bytes: bytes as u64,
            ..Work::default()
        }
        .count_of("points", "thread counts", counts.len(), all.len()),
        cut: (!cut.is_empty()).then(|| {
            format!(
                "{}: the full curve would not fit the budget",
                cut.join("; ")
            )
        }),
    };
    ((counts, bytes, per), plan)
}

impl ReportPart for ScalingPart {
    type Result = ScalingResult;

    fn info(&self) -> PartInfo {
        PartInfo {
            key_figures: &[
                "single_thread_gbps",
                "compared_threads",
                "packed_per_thread_gbps",
                "spread_per_thread_gbps",
            ],
            ..PartInfo::new(
                "scaling",
                "Packed vs spread scaling",
                "numalab scaling",
                9.0,
            )
        }
    }

    /// The read kernel with local memory, at [`scaling_counts`] threads.
    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        work(env, budget).1
    }

    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<ScalingResult>, PlacementError> {
        let ((counts, bytes, per), plan) = work(&ctx.env(), budget);
        let rule = ctx.rule(per);
        let r = run_scaling_at(
            ctx.m,
            BandwidthKernel::Read,
            ctx.isa,
            bytes,
            &counts,
            &rule,
            &mut |w| ctx.step(w),
        )?;
        Ok(Measured::new(r, plan.measuring_s, plan.fixed_s()).with_note(plan.cut))
    }

    fn verified(&self, r: &ScalingResult) -> bool {
        r.packed
            .iter()
            .chain(&r.spread)
            .chain(&r.alone)
            .all(|p| p.verified)
    }

    fn text(&self, r: &ScalingResult, _m: &Machine) -> String {
        text(r, Units::Gb)
    }

    fn tables(&self, r: &ScalingResult, _m: &Machine) -> Vec<Table> {
        let mut t = Table::new(
            "scaling",
            "Packed vs spread: aggregate and per-thread read bandwidth (GB/s) by thread count",
            &[
                "layout",
                "threads",
                "cpus",
                "gbps",
                "rel_ci",
                "per_thread_gbps",
                "verified",
            ],
        );
        for (layout, pts) in [("packed", &r.packed), ("spread", &r.spread)] {
            for pt in pts {
                t.rows.push(vec![
                    layout.into(),
                    pt.threads.to_string(),
                    ids(pt.cpus.iter().copied()),
                    num(pt.gbps.median, 3),
                    num(pt.gbps.rel_ci, 4),
                    num(pt.per_thread_gbps, 3),
                    yes(pt.verified),
                ]);
            }
        }
        vec![t]
    }

    fn html(&self, r: &ScalingResult, s: &mut Section) {
        html(r, s);
    }

    fn summarize(&self, r: &ScalingResult, s: &mut SummaryBuilder) {
        summarize(r, s);
    }
}

/// Thread counts of the scaling part: every count up to 8, beyond that
/// powers of two, the CPUs of one node and multiples of it, and the total.
pub fn scaling_counts(m: &Machine) -> Vec<usize> {
    let n = m.allowed_cpus.len();
    if n <= 8 {
        return (1..=n).collect();
    }
    let mut v: Vec<usize> = (0..).map(|k| 1usize << k).take_while(|&c| c <= n).collect();
    let per_node = m
        .cpu_nodes()
        .first()
        .map(|x| m.allowed_cpus_of(x).len())
        .unwrap_or(0);
    if per_node > 0 {
        v.extend((1..).map(|k| k * per_node).take_while(|&c| c <= n));
    }
    v.push(n);
    v.sort_unstable();
    v.dedup();
    v
}

/// The text `numalab scaling` prints: a row per thread count, then the
/// contention split and its predictions.
pub fn text(r: &ScalingResult, units: Units) -> String {
    let mut s = String::new();
    let u = units.label();
    let _ = writeln!(
        s,
        "{} scaling, {} memory, {} per buffer",
        r.kernel.name(),
        r.memory.as_deref().unwrap_or("local"),
        format_bytes(r.buffer_bytes)
    );
    let _ = writeln!(
        s,
        "  {:>7}  {:>14} {:>14}  {:>14} {:>14}",
        "threads", "packed total", "per thread", "spread total", "per thread"
    );
    for (p, sp) in r.packed.iter().zip(&r.spread) {
        let _ = writeln!(
            s,
            "  {:>7}  {:>9.2} {u:<5}{:>9.2} {u:<5}  {:>9.2} {u:<5}{:>9.2} {u:<5}",
            p.threads,
            units.convert(p.gbps.median),
            units.convert(p.per_thread_gbps),
            units.convert(sp.gbps.median),
            units.convert(sp.per_thread_gbps)
        );
    }
    for (layout, points) in [("packed", &r.packed), ("spread", &r.spread)] {
        if let Some(p) = points.last().filter(|p| !p.pages_by_array.is_empty()) {
            let arrays: Vec<String> = p
                .pages_by_array
                .iter()
                .map(|(name, pages)| format!("{name} on {}", super::page_shares(pages)))
                .collect();
            let _ = writeln!(
                s,
                "  pages at {} threads {layout}: {}",
                p.threads,
                arrays.join("; ")
            );
        }
    }
    match &r.model {
        Some(mo) => {
            let _ = writeln!(s, "{}", model_sentence(mo));
            let _ = writeln!(
                s,
                "  {:>15}  {:>18}  {:>18}",
                "cores per node",
                "ms per pass",
                format!("per core {u}")
            );
            let _ = writeln!(
                s,
                "  {:>15}  {:>8} {:>9}  {:>8} {:>9}",
                "", "x1 bw", "x2 bw", "x1 bw", "x2 bw"
            );
            let mut cores: Vec<usize> = mo.predictions.iter().map(|p| p.cores).collect();
            cores.dedup();
            for k in cores {
                let at = |ratio: f64| {
                    mo.predictions
                        .iter()
                        .find(|p| p.cores == k && p.bandwidth_ratio == ratio)
                };
                let (Some(a), Some(b)) = (at(1.0), at(2.0)) else {
                    continue;
                };
                let _ = writeln!(
                    s,
                    "  {k:>15}  {:>8.3} {:>9.3}  {:>8.2} {:>9.2}",
                    a.seconds * 1e3,
                    b.seconds * 1e3,
                    units.convert(a.per_core_gbps),
                    units.convert(b.per_core_gbps)
                );
            }
        }
        None => {
            let _ = writeln!(
                s,
                "no contention split: {}",
                r.model_note.as_deref().unwrap_or("not fitted")
            );
        }
    }
    s
}

/// The split in one sentence, as the study wrote it.
fn model_sentence(mo: &ScalingModel) -> String {
    let two = mo.fitted_on.threads.last().copied().unwrap_or(2);
    // The one-core time: each core of the pair alone, as the study ran it.
    let alone = match mo.fitted_on.alone.as_slice() {
        [] | [_] => String::new(),
        runs => format!(
            "; one core: the mean of each core alone ({})",
            runs.iter()
                .map(|a| format!("CPU {} {:.3} ms", a.cpu, a.seconds_per_pass * 1e3))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        "core + contention split within node {} (packed, 1 and {two} threads on CPUs {}{alone}): T(k) = {:.3} ms core + k x {:.3} ms contention per pass; {:.0}% of the time with {two} threads is contention; projections scale only the contention term by the bandwidth ratio",
        mo.fitted_on.node,
        mo.fitted_on.cpus.iter().copied().collect::<numalab::IdSet>(),
        mo.core_seconds * 1e3,
        mo.contention_seconds * 1e3,
        mo.contention_share * 100.0,
    )
}

/// Whether packed and spread ran every thread count on the same CPUs (as on
/// a machine of one node), so that their curves are one.
fn same_placements(packed: &[ScalingPoint], spread: &[ScalingPoint]) -> bool {
    !packed.is_empty()
        && packed.len() == spread.len()
        && packed
            .iter()
            .zip(spread)
            .all(|(p, q)| p.threads == q.threads && p.cpus == q.cpus)
}

/// Per-thread and aggregate bandwidth by thread count, packed and spread,
/// then the contention split and the table.
fn html(r: &ScalingResult, s: &mut Section) {
    // Solid: per thread; dashed: all threads together.
    let per = |p: &ScalingPoint| p.per_thread_gbps;
    let all = |p: &ScalingPoint| p.gbps.median;
    type Line<'a> = (
        &'a str,
        &'a [ScalingPoint],
        &'a dyn Fn(&ScalingPoint) -> f64,
        bool,
    );
    // Where packed and spread put every thread count on the same CPUs (one
    // node), their lines would lie on each other: one line each, named so.
    let same = same_placements(&r.packed, &r.spread);
    let lines: Vec<Line> = if same {
        vec![
            ("packed = spread, per thread", &r.packed, &per, false),
            ("packed = spread, all threads", &r.packed, &all, true),
        ]
    } else {
        vec![
            ("packed, per thread", &r.packed, &per, false),
            ("spread, per thread", &r.spread, &per, false),
            ("packed, all threads", &r.packed, &all, true),
            ("spread, all threads", &r.spread, &all, true),
        ]
    };
    let series: Vec<Series> = lines
        .into_iter()
        .map(|(name, pts, value, dashed)| Series {
            name: name.into(),
            points: pts.iter().map(|p| (p.threads as f64, value(p))).collect(),
            dashed,
        })
        .collect();
    s.figure(
        line_chart(
            "fig-scaling",
            &format!("{} bandwidth by thread count, packed vs spread", r.kernel.name()),
            &Axis::new("threads", Scale::Linear, TickFormat::Integer),
            &Axis::new("bandwidth (GB/s)", Scale::Linear, TickFormat::Number),
            &series,
            &[],
            &[],
        ),
        if same {
            "Packed (compact) and spread (scatter) place every thread count on the same CPUs here (one memory node), so each is one line. Each thread streams its own local buffer. Solid: per thread; dashed: all threads together."
        } else {
            "Packed: compact, one node's cores first. Spread: scatter, one thread per node in turn. Each thread streams its own local buffer. Solid: per thread; dashed: all threads together."
        },
    );
    match (&r.model, &r.model_note) {
        (Some(mo), _) => s.note(&model_sentence(mo)),
        (None, Some(why)) => s.note(&format!("No contention split: {why}.")),
        (None, None) => {}
    }
    s.table("scaling", false);
}

/// The thread count packed vs spread is compared at: the CPUs of one node
/// (packed then fills exactly one node), at least 2.
fn compared_count(m: &Machine, r: &ScalingResult) -> Option<usize> {
    let per_node = m
        .cpu_nodes()
        .first()
        .map(|n| m.allowed_cpus_of(n).len())
        .unwrap_or(0)
        .max(2);
    let counts: Vec<usize> = r
        .packed
        .iter()
        .map(|p| p.threads)
        .filter(|&n| n >= 2)
        .collect();
    counts
        .iter()
        .copied()
        .filter(|&n| n <= per_node)
        .max()
        .or_else(|| counts.first().copied())
}

fn summarize(r: &ScalingResult, s: &mut SummaryBuilder) {
    let Some(oi) = r.packed.iter().position(|p| p.threads == 1) else {
        return;
    };
    let single = r.packed[oi].gbps.median;
    let single_d = s.at(&format!("packed/{oi}/gbps/median"));
    s.set_key("single_thread_gbps", single, single_d.clone());
    let Some(n) = compared_count(s.machine, r) else {
        s.claim(
            finding(
                "scaling",
                "One thread alone reads {single} GB/s; with one CPU there is nothing to scale to.",
            )
            .fig("single", single, "GB/s", 1, single_d),
        );
        return;
    };
    let (Some(pi), Some(si)) = (
        r.packed.iter().position(|x| x.threads == n),
        r.spread.iter().position(|x| x.threads == n),
    ) else {
        return;
    };
    let (p, sp) = (&r.packed[pi], &r.spread[si]);
    // Per thread is the whole run's median over its threads: derived so,
    // the figure carries that median's interval.
    let per_thread = |layout: &str, i: usize, threads: usize| Derivation::Scale {
        of: Box::new(s.at(&format!("{layout}/{i}/gbps/median"))),
        by: 1.0 / threads.max(1) as f64,
    };
    let p_d = per_thread("packed", pi, p.threads);
    let sp_d = per_thread("spread", si, sp.threads);
    s.set_key(
        "compared_threads",
        n as f64,
        s.at(&format!("packed/{pi}/threads")),
    );
    s.set_key("packed_per_thread_gbps", p.per_thread_gbps, p_d.clone());
    s.set_key("spread_per_thread_gbps", sp.per_thread_gbps, sp_d.clone());
    let c = finding("scaling", "")
        .fig(
            "n",
            n as f64,
            "count",
            0,
            s.at(&format!("packed/{pi}/threads")),
        )
        .fig("single", single, "GB/s", 1, single_d.clone())
        .fig("p", p.per_thread_gbps, "GB/s", 1, p_d.clone())
        .fig(
            "pr",
            p.per_thread_gbps / single,
            "x",
            2,
            Derivation::ratio(p_d.clone(), single_d.clone()),
        );
    let c = if p.cpus == sp.cpus {
        // The rule: below 0.8 of a lone thread's bandwidth, they compete.
        let mut c = c
            .fig(
                "all",
                p.gbps.median,
                "GB/s",
                1,
                s.at(&format!("packed/{pi}/gbps/median")),
            )
            .fig("keep_up", 0.8, "x", 2, Derivation::Const { value: 0.8 })
            .compare(
                "compete",
                ("pr", Relation::Less, "keep_up"),
                Threshold::Share(0.0),
                (
                    "threads sharing a node's memory controller compete for its bandwidth.",
                    "the node's memory keeps up with them.",
                ),
            );
        c.template = "With {n} threads on one node each reads {p} GB/s, {pr}x what one thread gets alone in the same sweep ({single} GB/s; {all} GB/s together): {compete}".into();
        c
    } else {
        let mut c = c
            .fig("sp", sp.per_thread_gbps, "GB/s", 1, sp_d.clone())
            .fig(
                "sr",
                sp.per_thread_gbps / single,
                "x",
                2,
                Derivation::ratio(sp_d, single_d),
            );
        c.template = "With {n} threads packed on one node each reads {p} GB/s ({pr}x a lone thread's {single}); spread over the nodes each reads {sp} GB/s ({sr}x).".into();
        c
    };
    s.claim(c);
}

/// The text `numalab scaling --copies N` prints: per layout where the
/// copies ran and their median times, then the split and projections.
pub fn copies_text(r: &CopiesResult) -> String {
    let mut s = String::new();
    let mpi = r.mode == "mpi";
    let what = match &r.env {
        Some(var) => format!("1 process, {var}={}", r.copies),
        None if mpi => format!("an MPI job of {} ranks", r.copies),
        None => format!("{} copies", r.copies),
    };
    let _ = writeln!(
        s,
        "{what} of '{}', median of {} repetitions",
        r.argv.join(" "),
        r.reps
    );
    for l in &r.layouts {
        if !l.applicable {
            let _ = writeln!(s, "  {:<7} {}", l.layout, l.note.as_deref().unwrap_or(""));
            continue;
        }
        let cpus: Vec<String> = l
            .cpus
            .iter()
            .zip(&l.nodes)
            .zip(&l.memory)
            .map(|((c, n), mem)| format!("CPUs {c} (node {n}, {mem})"))
            .collect();
        let copy: Vec<String> = l.copy_seconds.iter().map(|t| format!("{t:.3}")).collect();
        // Under MPI every rank's time is the job's (they end together).
        let per_copy = if mpi {
            format!("{} ranks a node at most", l.per_node)
        } else {
            format!("per copy {} s", copy.join(", "))
        };
        let _ = writeln!(
            s,
            "  {:<7} wall {} s; {per_copy}; {}{}",
            l.layout,
            l.wall_seconds
                .map(|w| format!("{w:.3}"))
                .unwrap_or_else(|| "-".into()),
            cpus.join("; "),
            if l.verified {
                ""
            } else {
                " [pinning NOT verified]"
            }
        );
        if let Some(n) = &l.note {
            let _ = writeln!(s, "          {n}");
        }
    }
    match &r.model {
        Some(fit) => s.push_str(&super::extrapolate::text(fit, &r.predictions)),
        None => {
            let _ = writeln!(
                s,
                "no contention split: {}",
                r.model_note.as_deref().unwrap_or("not fitted")
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn packed_and_spread_on_the_same_cpus_are_one_curve() {
        let point = |threads: usize, cpus: &[u32]| -> ScalingPoint {
            serde_json::from_value(serde_json::json!({
                "threads": threads, "cpus": cpus, "nodes": [0],
                "gbps": {"median": 10.0, "best": 10.0, "min": 10.0, "max": 10.0,
                         "spread": 0.0, "rel_ci": 0.01},
                "per_thread_gbps": 10.0 / threads as f64,
                "seconds_per_pass": 0.01, "verified": true
            }))
            .unwrap()
        };
        // One node: both layouts fill CPUs 0 then 1.
        let one = [point(1, &[0]), point(2, &[0, 1])];
        assert!(same_placements(&one, &one.clone()));
        // Two nodes: spread's second thread goes to the other node.
        let spread = [point(1, &[0]), point(2, &[0, 2])];
        assert!(!same_placements(&one, &spread));
        assert!(!same_placements(&one, &one[..1]));
        assert!(!same_placements(&[], &[]));
    }

    #[test]
    fn scaling_counts_stay_few_on_large_machines() {
        let m = fixture("192em64t-24n8c2t.xml");
        let v = scaling_counts(&m);
        assert_eq!(v.first(), Some(&1));
        assert_eq!(v.last(), Some(&m.allowed_cpus.len()));
        assert!(v.len() < 40, "{v:?}");
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        assert_eq!(scaling_counts(&q), (1..=8).collect::<Vec<_>>());
    }
}
