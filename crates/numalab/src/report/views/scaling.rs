//! Packed vs spread scaling (`numalab scaling`, report part `scaling`):
//! bandwidth for 1..N threads, packed on one node's cores first or spread
//! one per node, and the contention split.

use super::Units;
use crate::experiments::scaling::{run_scaling_at, ScalingPoint, ScalingResult};
use crate::machine::Machine;
use crate::measure::kernels::BandwidthKernel;
use crate::placement::thread_policy::{compact_order, scatter_order};
use crate::placement::PlacementError;
use crate::report::csv::{ids, num, yes, Table};
use crate::report::html::Section;
use crate::report::part::{Measured, PartContext, PartInfo, ReportPart};
use crate::report::plan::{fit_all, max_cpus_per_node};
use crate::report::summary::SummaryBuilder;
use crate::report::svg::{line_chart, Axis, Scale, Series, TickFormat};
use crate::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The report part.
pub struct ScalingPart;

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
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<ScalingResult>, PlacementError> {
        let counts = scaling_counts(ctx.m);
        let packed = compact_order(ctx.m, &ctx.m.allowed_cpus);
        let spread = scatter_order(ctx.m, &ctx.m.allowed_cpus);
        // Spread runs only where it differs from packed.
        let points: Vec<usize> = counts
            .iter()
            .flat_map(|&n| {
                let differs = n > 1 && packed[..n] != spread[..n];
                std::iter::once(n).chain(differs.then_some(n))
            })
            .collect();
        let fixed: f64 = points
            .iter()
            .map(|&n| ctx.costs.bandwidth_cell * (1.0 + 0.3 * (n as f64 - 1.0)))
            .sum::<f64>()
            * ctx.costs.factor;
        let per = ctx.per_measurement(budget, fixed, points.len(), 5.0);
        let nodes: Vec<u32> = ctx.m.cpu_nodes().iter().collect();
        let bytes = fit_all(&nodes, max_cpus_per_node(ctx.m), ctx.size, 0.6);
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
        Ok(Measured::new(r, per * points.len() as f64, fixed))
    }

    fn verified(&self, r: &ScalingResult) -> bool {
        r.packed.iter().chain(&r.spread).all(|p| p.verified)
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
        "{} scaling, local memory, {} per buffer",
        r.kernel.name(),
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
    match &r.model {
        Some(mo) => {
            let _ = writeln!(
                s,
                "contention split (packed, fitted on {} and {} threads): core time {:.2} ms per pass, +{:.2} ms per extra thread; {:.0}% of the time at {} threads is contention",
                mo.fitted_on.0,
                mo.fitted_on.1,
                mo.core_seconds * 1e3,
                mo.contention_seconds_per_thread * 1e3,
                mo.contention_share * 100.0,
                mo.fitted_on.1
            );
            let preds: Vec<String> = mo
                .predictions
                .iter()
                .map(|(n, per, tot)| {
                    format!("{n}: {:.2}/{:.2}", units.convert(*per), units.convert(*tot))
                })
                .collect();
            let _ = writeln!(
                s,
                "predicted per-thread/aggregate {u} by thread count: {}",
                preds.join(", ")
            );
        }
        None => {
            let _ = writeln!(
                s,
                "contention split needs at least two thread counts (this machine allows one CPU)"
            );
        }
    }
    s
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
    let lines: [Line; 4] = [
        ("packed, per thread", &r.packed, &per, false),
        ("spread, per thread", &r.spread, &per, false),
        ("packed, all threads", &r.packed, &all, true),
        ("spread, all threads", &r.spread, &all, true),
    ];
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
        "Packed: compact, one node's cores first. Spread: scatter, one thread per node in turn. Each thread streams its own local buffer. Solid: per thread; dashed: all threads together.",
    );
    if let Some(mo) = &r.model {
        s.note(&format!(
            "Contention split (packed, fitted on {} and {} threads): core time {:.2} ms per pass, +{:.2} ms per extra thread; {:.0}% of the time at {} threads is contention.",
            mo.fitted_on.0,
            mo.fitted_on.1,
            mo.core_seconds * 1e3,
            mo.contention_seconds_per_thread * 1e3,
            mo.contention_share * 100.0,
            mo.fitted_on.1
        ));
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
    let Some(one) = r.packed.iter().find(|p| p.threads == 1) else {
        return;
    };
    let single = one.gbps.median;
    s.set_figure("single_thread_gbps", Some(single));
    let Some(n) = compared_count(s.machine, r) else {
        s.finding(
            "scaling",
            format!("One thread alone reads {single:.1} GB/s; with one CPU there is nothing to scale to."),
        );
        return;
    };
    let (Some(p), Some(sp)) = (
        r.packed.iter().find(|x| x.threads == n),
        r.spread.iter().find(|x| x.threads == n),
    ) else {
        return;
    };
    s.set_figure("compared_threads", Some(n as f64));
    s.set_figure("packed_per_thread_gbps", Some(p.per_thread_gbps));
    s.set_figure("spread_per_thread_gbps", Some(sp.per_thread_gbps));
    let text = if p.cpus == sp.cpus {
        format!(
            "With {n} threads on one node each reads {:.1} GB/s, {:.2}x what a lone thread gets ({single:.1} GB/s; {:.1} GB/s together): {}",
            p.per_thread_gbps,
            p.per_thread_gbps / single,
            p.gbps.median,
            if p.per_thread_gbps / single < 0.8 {
                "threads sharing a node's memory controller compete for its bandwidth."
            } else {
                "the node's memory keeps up with them."
            }
        )
    } else {
        format!(
            "With {n} threads packed on one node each reads {:.1} GB/s ({:.2}x a lone thread's {single:.1}); spread over the nodes each reads {:.1} GB/s ({:.2}x).",
            p.per_thread_gbps,
            p.per_thread_gbps / single,
            sp.per_thread_gbps,
            sp.per_thread_gbps / single
        )
    };
    s.finding("scaling", text);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

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
