//! The working-set size sweep (`numalab sizes`, report part `sizes`):
//! bandwidth and latency from L1-sized to DRAM-sized working sets, with the
//! cache boundaries marked.

use super::Units;
use crate::experiments::sizes::{run_sizes, sweep_sizes, SizePoint, SizesResult};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::placement::PlacementError;
use crate::report::csv::{num, yes, Table};
use crate::report::html::Section;
use crate::report::part::{Measured, PartContext, PartInfo, ReportPart};
use crate::report::plan::{fit, home_cpu, home_node, no_cpu_node};
use crate::report::results::Mode;
use crate::report::summary::SummaryBuilder;
use crate::report::svg::{line_chart, Axis, Marker, Scale, Series, TickFormat};
use crate::text::format::bytes as format_bytes;
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
            min_start_s: 0.8,
            ..PartInfo::new("sizes", "Working-set size sweep", "numalab sizes", 14.0)
        }
    }

    /// One size at a time, so that the per-measurement budget follows the
    /// time really spent.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<SizesResult>, PlacementError> {
        let cpu = home_cpu(ctx.m).ok_or_else(no_cpu_node)?;
        let home = home_node(ctx.m).ok_or_else(no_cpu_node)?;
        let sizes = report_sizes(ctx.m, fit(home, 1, ctx.size, 0.6) as u64, ctx.mode);
        let t0 = Instant::now();
        // Fixed cost of one size: three bandwidth kernels and a chase, scaled
        // by the working set (the calibration used `size` bytes).
        let unit = 3.0 * ctx.costs.bandwidth_cell + ctx.costs.latency_cell;
        let fixed_of = |s: u64, size: usize| 0.01 + unit * s as f64 / size as f64;
        let mut factor = ctx.costs.factor;
        let mut out: Option<SizesResult> = None;
        let mut measuring = 0.0;
        let mut fixed_total = 0.0;
        for (i, &s) in sizes.iter().enumerate() {
            if cancel::requested() {
                break;
            }
            let left = budget - t0.elapsed().as_secs_f64();
            let fixed_left: f64 = sizes[i..]
                .iter()
                .map(|&x| fixed_of(x, ctx.size))
                .sum::<f64>()
                * factor;
            let per = ctx.per_measurement(left, fixed_left, 4 * (sizes.len() - i), 2.0);
            let t = Instant::now();
            let rule = ctx.rule(per);
            let r = run_sizes(ctx.m, cpu, &[s], ctx.isa, &rule, &mut |w| ctx.step(w))?;
            let took = t.elapsed().as_secs_f64();
            let predicted = fixed_of(s, ctx.size) * factor;
            let real = (took - 4.0 * per).max(0.0);
            if predicted > 0.005 {
                factor = (factor + factor * (real / predicted).clamp(0.3, 5.0)) / 2.0;
            }
            measuring += 4.0 * per;
            fixed_total += predicted;
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
        Ok(Measured::new(r, measuring, fixed_total))
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
        let read = |p: &SizePoint| p.gbps.first().copied().unwrap_or(f64::NAN);
        s.finding(
            "sizes",
            format!(
                "Reading {} (fits in {}) runs at {:.0} GB/s with {:.1} ns latency; {} ({}) at {:.1} GB/s with {:.0} ns: the cache boundaries are marked in the size sweep.",
                format_bytes(first.bytes),
                first.fits_in,
                read(first),
                first.latency_ns,
                format_bytes(last.bytes),
                if last.fits_in == "memory" { "memory".to_string() } else { format!("fits in {}", last.fits_in) },
                read(last),
                last.latency_ns
            ),
        );
    }
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
/// cache boundary.
pub fn text(r: &SizesResult, units: Units) -> String {
    let mut s = String::new();
    let marks: Vec<String> = r
        .caches
        .iter()
        .map(|c| format!("{} {}", c.name, format_bytes(c.bytes)))
        .collect();
    let _ = writeln!(
        s,
        "working-set sweep on CPU {}, memory local; caches: {}",
        r.cpu,
        marks.join(", ")
    );
    let _ = writeln!(
        s,
        "  {:>10}  {:>6}  {:>9} {:>9} {:>9}  {:>9}",
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
        let g = |i: usize| units.convert(p.gbps.get(i).copied().unwrap_or(f64::NAN));
        let _ = writeln!(
            s,
            "  {:>10}  {:>6}  {:>9.2} {:>9.2} {:>9.2}  {:>9.1}",
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
    let series: Vec<Series> = r
        .kernels
        .iter()
        .enumerate()
        .map(|(i, k)| Series {
            name: k.name().to_string(),
            points: r
                .points
                .iter()
                .filter_map(|p| p.gbps.get(i).map(|g| (p.bytes as f64, *g)))
                .collect(),
            dashed: false,
        })
        .collect();
    let x = Axis::new(
        "working set (bytes, log scale)",
        Scale::Log2,
        TickFormat::Bytes,
    );
    s.html("<div class=\"grid2\"><div>\n");
    s.figure(
        line_chart(
            "fig-sizes-bandwidth",
            &format!("Bandwidth by working-set size (CPU {})", r.cpu),
            &x,
            &Axis::new("bandwidth (GB/s)", Scale::Linear, TickFormat::Number),
            &series,
            &markers,
            &[],
        ),
        "Program bytes per second (GB = 1e9 B), median. Dashed lines: cache sizes; a working set that fits a cache runs at that cache's speed.",
    );
    s.html("</div><div>\n");
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
    s.html("</div></div>\n");
    s.table("sizes", true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

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
