//! The working-set size sweep (`numalab sizes`, report part `sizes`):
//! bandwidth and latency from L1-sized to DRAM-sized working sets, with the
//! cache boundaries marked.

use super::matrix::halvings;
use super::Units;
use crate::csv::{num, yes, Table};
use crate::html::Section;
use crate::model::Mode;
use crate::model::{largest_fitting, spread, Costs, PartPlan, Work, SAMPLE_S};
use crate::part::{Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S};
use crate::plan::PlanEnv;
use crate::plan::{home_cpu, home_node, needs_home_cpu, no_cpu_node};
use crate::summary::{finding, SummaryBuilder};
use crate::svg::{line_chart, Axis, Marker, Scale, Series, TickFormat};
use numalab::experiments::sizes::{run_sizes, sweep_sizes, SizePoint, SizesResult};
use numalab::machine::Machine;
use numalab::measure::cancel;
use numalab::placement::PlacementError;
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;
use std::time::Instant;

/// The report part.
pub struct SizesPart;

impl ReportPart for SizesPart {
    type Result = SizesResult;

    fn info(&self) -> PartInfo {
        PartInfo {
            // A quick report has little time: the fixed costs of the sizes
            // (one chase per size) need a larger share.
            quick_weight: 14.0 * 1.2,
            ..PartInfo::new("sizes", "Working-set size sweep", "numalab sizes", 14.0)
        }
    }

    fn applicable(&self, m: &Machine) -> Result<(), String> {
        needs_home_cpu(m)
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        work(env, budget).1
    }

    /// One size at a time, so that the per-measurement budget follows the
    /// time really spent.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<SizesResult>, PlacementError> {
        let cpu = home_cpu(ctx.m).ok_or_else(no_cpu_node)?;
        let (sizes, plan) = work(&ctx.env(), budget);
        let t0 = Instant::now();
        let costs = ctx.costs.clone();
        let llc = ctx.env().llc();
        let mut out: Option<SizesResult> = None;
        let mut measuring = 0.0;
        for (i, &s) in sizes.iter().enumerate() {
            if cancel::requested() {
                break;
            }
            // The sizes left share what is left, less their fixed costs.
            let left = budget - t0.elapsed().as_secs_f64();
            let fixed_left: f64 = sizes[i..]
                .iter()
                .map(|&x| {
                    size_cost(&costs, x, MIN_MEASUREMENT_S, llc) - MEASUREMENTS * MIN_MEASUREMENT_S
                })
                .sum();
            let per = ctx.per_measurement(
                left,
                fixed_left,
                MEASUREMENTS as usize * (sizes.len() - i),
                2.0,
            );
            let rule = ctx.rule(per);
            let r = run_sizes(ctx.m, cpu, &[s], ctx.isa, &rule, &mut |w| ctx.step(w))?;
            measuring += MEASUREMENTS * per;
            match &mut out {
                None => out = Some(r),
                Some(o) => {
                    o.points.extend(r.points);
                    o.warnings.extend(r.warnings);
                }
            }
        }
        let r =
            out.ok_or_else(|| PlacementError::Invalid("no working-set size to measure".into()))?;
        Ok(Measured::new(r, measuring, plan.fixed_s()).with_note(plan.cut))
    }

    fn verified(&self, r: &SizesResult) -> bool {
        r.points.iter().all(|p| p.verified)
    }

    fn text(&self, r: &SizesResult, _m: &Machine) -> String {
        text(r, Units::Gb)
    }

    fn tables(&self, r: &SizesResult, _m: &Machine) -> Vec<Table> {
        let mut t = Table::new(
            "sizes",
            "Working-set sweep: bandwidth (GB/s, program bytes) and latency (ns) by size",
            &[
                "bytes",
                "fits_in",
                "read_gbps",
                "write_gbps",
                "copy_gbps",
                "latency_ns",
                "verified",
            ],
        );
        for pt in &r.points {
            let g = |i: usize| pt.gbps.get(i).map(|v| num(*v, 2)).unwrap_or_default();
            t.rows.push(vec![
                pt.bytes.to_string(),
                pt.fits_in.clone(),
                g(0),
                g(1),
                g(2),
                num(pt.latency_ns, 2),
                yes(pt.verified),
            ]);
        }
        vec![t]
    }

    fn html(&self, r: &SizesResult, s: &mut Section) {
        html(r, s);
    }

    fn summarize(&self, r: &SizesResult, s: &mut SummaryBuilder) {
        let (Some(first), Some(last)) = (r.points.first(), r.points.last()) else {
            return;
        };
        let last_i = r.points.len() - 1;
        let at = |i: usize, f: &str| s.at(&format!("points/{i}/{f}"));
        let read = |p: &SizePoint| p.gbps.first().copied().unwrap_or(f64::NAN);
        s.claim(
            finding(
                "sizes",
                format!(
                    "Reading {{b0}} (fits in {{f0}}) runs at {{g0}} GB/s with {{l0}} ns latency; {{b1}} ({}) at {{g1}} GB/s with {{l1}} ns: the cache boundaries are marked in the size sweep.",
                    if last.fits_in == "memory" { "{f1}" } else { "fits in {f1}" }
                ),
            )
            .fig("b0", first.bytes as f64, "bytes", 0, at(0, "bytes"))
            .fact("f0", &first.fits_in, s.path("points/0/fits_in"))
            .fig("g0", read(first), "GB/s", 0, at(0, "gbps/0"))
            .fig("l0", first.latency_ns, "ns", 1, at(0, "latency_ns"))
            .fig("b1", last.bytes as f64, "bytes", 0, at(last_i, "bytes"))
            .fact("f1", &last.fits_in, s.path(&format!("points/{last_i}/fits_in")))
            .fig("g1", read(last), "GB/s", 1, at(last_i, "gbps/0"))
            .fig("l1", last.latency_ns, "ns", 0, at(last_i, "latency_ns")),
        );
    }
}

/// Measurements per size: three bandwidth kernels and a chase.
const MEASUREMENTS: f64 = 4.0;

/// Predicted seconds of one size of `bytes` with `per` seconds per
/// measurement: each kernel places its arrays (the working set) and
/// passes over them, and the chase is built and warmed over it.
fn size_cost(c: &Costs, bytes: u64, per: f64, llc: f64) -> f64 {
    let b = bytes as f64;
    3.0 * (c.place(b, 1) + c.threads(1) + c.measurement(per, c.bandwidth_sample(b, 1)))
        + c.place(b, 1)
        + c.chase(b, llc)
        + c.measurement(per, SAMPLE_S)
}

/// The sizes measured in `budget` seconds and the plan: the mode's sizes
/// up to the fitted buffer when they fit; else shorter measurements, then
/// a smaller largest size (down to twice the last-level cache), then fewer
/// sizes (at least four, both ends kept).
fn work(env: &PlanEnv, budget: f64) -> (Vec<u64>, PartPlan) {
    let home = home_node(env.m).unwrap_or(0);
    let full_max = env.fit(home, 1, env.size, 0.6);
    let min_max = env.min_memory_bytes(full_max);
    let byte_levels = halvings(min_max, full_max);
    let at_max = |max: usize| report_sizes(env.m, max as u64, env.mode);
    let smallest = at_max(min_max);
    let fewest = smallest.len().min(4);
    // Levels: 4..=all sizes at the smallest largest size, then larger ones.
    let counts = smallest.len() - fewest + 1;
    let levels = counts + byte_levels.len() - 1;
    let sizes_at = |l: usize| -> Vec<u64> {
        if l < counts {
            let n = fewest + l;
            spread(smallest.len(), n)
                .into_iter()
                .map(|i| smallest[i])
                .collect()
        } else {
            at_max(byte_levels[l + 1 - counts])
        }
    };
    let llc = env.llc();
    let cost = |v: &[u64], per: f64| {
        v.iter()
            .map(|&s| size_cost(env.costs, s, per, llc))
            .sum::<f64>()
    };
    let l = largest_fitting(levels, budget, |l| cost(&sizes_at(l), MIN_MEASUREMENT_S));
    let sizes = sizes_at(l);
    let n = MEASUREMENTS as usize * sizes.len();
    let fixed = cost(&sizes, MIN_MEASUREMENT_S) - n as f64 * MIN_MEASUREMENT_S;
    let per = ((budget - fixed) / n.max(1) as f64).clamp(MIN_MEASUREMENT_S, 2.0);
    let full = at_max(full_max);
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let cut = (sizes.len() < full.len() || (largest as usize) < full_max).then(|| {
        format!(
            "{} of {} sizes, the largest {} (the full sweep would not fit the budget)",
            sizes.len(),
            full.len(),
            format_bytes(largest)
        )
    });
    let plan = PartPlan {
        predicted_s: cost(&sizes, per),
        measuring_s: per * n as f64,
        work: Work {
            measurements: n,
            per_measurement_s: per,
            threads: 1,
            buffer_bytes: largest,
            ..Work::default()
        }
        .count_of("sizes", "sizes", sizes.len(), full.len()),
        cut,
    };
    (sizes, plan)
}

/// Sizes of the sweep for a mode: every size of `sweep_sizes` (two per
/// octave) for --full, one per octave by default, about seven for --quick;
/// the smallest and the largest always.
pub fn report_sizes(m: &Machine, max_bytes: u64, mode: Mode) -> Vec<u64> {
    let all = sweep_sizes(m, max_bytes);
    let keep = match mode {
        Mode::Full => return all,
        Mode::Default => all.len().div_ceil(2),
        Mode::Quick => 7,
    };
    if all.len() <= keep {
        return all;
    }
    let mut out: Vec<u64> = (0..keep)
        .map(|i| all[(i * (all.len() - 1) + (keep - 1) / 2) / (keep - 1).max(1)])
        .collect();
    out.dedup();
    out
}

/// The text `numalab sizes` prints: one line per size, a rule at each
/// cache boundary. With several threads the bandwidth is per core
/// (aggregate / threads); with memory not local, or several threads, the
/// nodes every size's buffers were found on are listed.
pub fn text(r: &SizesResult, units: Units) -> String {
    let mut s = String::new();
    let marks: Vec<String> = r
        .caches
        .iter()
        .map(|c| format!("{} {}", c.name, format_bytes(c.bytes)))
        .collect();
    let many = r.threads > 1;
    let show_nodes = many || r.memory != "local";
    let _ = writeln!(
        s,
        "working-set sweep on {}, memory {}; caches: {}",
        where_it_runs(r),
        r.memory,
        marks.join(", ")
    );
    if many {
        let _ = writeln!(
            s,
            "bandwidth per core (aggregate / {}) while all {} threads stream their own working set; latency from CPU {} alone",
            r.threads, r.threads, r.cpu
        );
    }
    let nodes_head = if show_nodes { "  memory on" } else { "" };
    let _ = writeln!(
        s,
        "  {:>10}  {:>6}  {:>9} {:>9} {:>9}  {:>9}{nodes_head}",
        "size", "fits", "read", "write", "copy", "latency"
    );
    let _ = writeln!(
        s,
        "  {:>10}  {:>6}  {:>9} {:>9} {:>9}  {:>9}",
        "",
        "in",
        units.label(),
        units.label(),
        units.label(),
        "ns"
    );
    let mut last = String::new();
    for p in &r.points {
        if p.fits_in != last && !last.is_empty() {
            let _ = writeln!(s, "  {:-<62}", format!("-- {last} boundary "));
        }
        last = p.fits_in.clone();
        let shown = if many { &p.per_core_gbps } else { &p.gbps };
        let g = |i: usize| units.convert(shown.get(i).copied().unwrap_or(f64::NAN));
        let nodes = if show_nodes {
            format!("  {}", nodes_text(p))
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "  {:>10}  {:>6}  {:>9.2} {:>9.2} {:>9.2}  {:>9.1}{nodes}",
            format_bytes(p.bytes),
            p.fits_in,
            g(0),
            g(1),
            g(2),
            p.latency_ns
        );
    }
    s
}

/// "CPU 0", or "2 CPUs compact (0, 1)".
fn where_it_runs(r: &SizesResult) -> String {
    if r.threads <= 1 {
        return format!("CPU {}", r.cpu);
    }
    let cpus: Vec<String> = r.cpus.iter().map(u32::to_string).collect();
    format!(
        "{} CPUs {}({})",
        r.threads,
        r.layout
            .map(|l| format!("{} ", l.name()))
            .unwrap_or_default(),
        cpus.join(", ")
    )
}

/// The nodes a size's buffers are on, with their share when several:
/// "node 3", "node 0 60%, node 1 40%".
fn nodes_text(p: &SizePoint) -> String {
    let total: u64 = p.bytes_by_node.values().sum();
    if p.bytes_by_node.len() == 1 {
        return p
            .bytes_by_node
            .keys()
            .map(|n| format!("node {n}"))
            .collect();
    }
    let parts: Vec<String> = p
        .bytes_by_node
        .iter()
        .map(|(n, b)| format!("node {n} {:.0}%", 100.0 * *b as f64 / total.max(1) as f64))
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// Bandwidth and latency by size, side by side, cache sizes marked; the
/// table collapsed.
fn html(r: &SizesResult, s: &mut Section) {
    let markers: Vec<Marker> = r
        .caches
        .iter()
        .map(|c| Marker {
            x: c.bytes as f64,
            label: format!("{} {}", c.name, format_bytes(c.bytes)),
        })
        .collect();
    let many = r.threads > 1;
    let series: Vec<Series> = r
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| Series {
            name: k.name().to_string(),
            points: r
                .points
                .iter()
                .filter_map(|p| {
                    let v = if many { &p.per_core_gbps } else { &p.gbps };
                    v.get(i).map(|g| (p.bytes as f64, *g))
                })
                .collect(),
            dashed: false,
        })
        .collect();
    let x = Axis::new(
        "working set (bytes, log scale)",
        Scale::Log2,
        TickFormat::Bytes,
    );
    // One chart a row, each at its own width: two side by side in the
    // page's 1124 px shrank each to 72% (12 px ticks drawn at 8.6 px).
    s.figure(
        line_chart(
            "fig-sizes-bandwidth",
            &format!("Bandwidth by working-set size ({})", where_it_runs(r)),
            &x,
            &Axis::new(
                if many {
                    "bandwidth per core (GB/s)"
                } else {
                    "bandwidth (GB/s)"
                },
                Scale::Linear,
                TickFormat::Number,
            ),
            &series,
            &markers,
            &[],
        ),
        "Program bytes per second (GB = 1e9 B), median. Dashed lines: cache sizes; a working set that fits a cache runs at that cache's speed.",
    );
    let lat = Series {
        name: "random chase".into(),
        points: r
            .points
            .iter()
            .map(|p| (p.bytes as f64, p.latency_ns))
            .collect(),
        dashed: false,
    };
    s.figure(
        line_chart(
            "fig-sizes-latency",
            &format!("Latency by working-set size (CPU {})", r.cpu),
            &x,
            &Axis::new(
                "latency (ns per load, log scale)",
                Scale::Log10,
                TickFormat::Number,
            ),
            &[lat],
            &markers,
            &[],
        ),
        "Dependent loads over a random cycle of the working set, median ns.",
    );
    s.table("sizes", true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn report_sizes_keep_both_ends() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let all = sweep_sizes(&m, 128 << 20);
        for mode in [Mode::Quick, Mode::Default, Mode::Full] {
            let v = report_sizes(&m, 128 << 20, mode);
            assert_eq!(v.first(), all.first(), "{mode:?}");
            assert_eq!(v.last(), all.last(), "{mode:?}");
            assert!(v.windows(2).all(|w| w[0] < w[1]), "{mode:?} {v:?}");
        }
        assert_eq!(report_sizes(&m, 128 << 20, Mode::Full), all);
        assert_eq!(report_sizes(&m, 128 << 20, Mode::Quick).len(), 7);
        assert_eq!(
            report_sizes(&m, 128 << 20, Mode::Default).len(),
            all.len().div_ceil(2)
        );
    }
}
