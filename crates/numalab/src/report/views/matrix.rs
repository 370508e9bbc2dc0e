//! The latency and bandwidth matrices (`numalab matrix`, report parts
//! `latency-matrix` and `bandwidth-matrix`): every CPU node x every memory
//! node, with NUMA ratios.

use super::Units;
use crate::experiments::matrix::{matrix_nodes, run_matrix, Cell, MatrixRequest, MatrixResult};
use crate::machine::Machine;
use crate::measure::chase::ChasePattern;
use crate::measure::harness::Figure;
use crate::measure::kernels::BandwidthKernel;
use crate::measure::stats::median;
use crate::placement::PlacementError;
use crate::report::budget::{largest_fitting, PartPlan, PlanEnv, Work, SAMPLE_S};
use crate::report::csv::{num, opt, yes, Table};
use crate::report::html::{node_label, Section};
use crate::report::part::{Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S};
use crate::report::plan::max_cpus_per_node;
use crate::report::results::Mode;
use crate::report::summary::SummaryBuilder;
use crate::report::svg::{heatmap, Heatmap};
use crate::text::escape::xml as esc;
use crate::text::format::bytes as format_bytes;
use std::fmt::Write;

/// A matrix part: latency (`latency` true) or bandwidth.
pub struct MatrixPart {
    latency: bool,
}

/// Latency from every CPU node to every memory node.
pub const LATENCY_MATRIX: MatrixPart = MatrixPart { latency: true };
/// Read bandwidth from every CPU node to every memory node.
pub const BANDWIDTH_MATRIX: MatrixPart = MatrixPart { latency: false };

/// What a matrix part measures for a budget.
struct MatrixWork {
    /// CPU nodes measured (ascending), all of them unless `sampled`.
    rows: Vec<u32>,
    sampled: bool,
    bytes: usize,
    per: f64,
    all_threads: bool,
}

/// CPU nodes up to which a matrix always measures every row.
const MAX_FULL_ROWS: usize = 8;

/// Longest budget of one cell, seconds.
const MAX_CELL_S: f64 = 5.0;

impl MatrixPart {
    /// The work for `budget` seconds: every cell at the fitted buffer size
    /// when that fits; else shorter measurements, then smaller buffers
    /// (down to twice the last-level cache), then, on machines with more
    /// than eight CPU nodes, fewer of them as rows (the home node and one of
    /// each distance pattern first).
    fn work(&self, env: &PlanEnv, budget: f64) -> (MatrixWork, PartPlan) {
        let (all_rows, cols) = matrix_nodes(env.m);
        let order = row_order(env.m, &all_rows);
        // --full measures bandwidth with every CPU of a node.
        let all_threads = !self.latency && env.mode == Mode::Full;
        let threads = if all_threads {
            max_cpus_per_node(env.m)
        } else {
            1
        };
        let full_bytes = env.fit_all(&cols, threads, env.size, 0.6);
        let min_bytes = env.min_memory_bytes(full_bytes);
        let c = env.costs;
        let llc = env.llc();
        let cell_fixed = |bytes: usize, per: f64| -> f64 {
            let b = bytes as f64;
            if self.latency {
                c.place(b, 1) + c.chase(b, llc) + c.measurement(per, SAMPLE_S)
            } else {
                c.place(b * threads as f64, threads)
                    + c.threads(threads)
                    + c.measurement(per, c.bandwidth_sample(b, threads))
            }
        };
        let byte_levels = halvings(min_bytes, full_bytes);
        // Rows are sampled only on machines with tens of CPU nodes: up to
        // eight, the whole matrix is the smallest form.
        let min_rows = if order.len() <= MAX_FULL_ROWS {
            order.len().max(1)
        } else {
            1
        };
        // Levels: rows min_rows..=all at the smallest buffer, then bigger
        // buffers with every row.
        let row_levels = order.len().max(1) - min_rows + 1;
        let levels = row_levels + byte_levels.len() - 1;
        let at = |l: usize| -> (usize, usize) {
            if l < row_levels {
                (min_rows + l, min_bytes)
            } else {
                (order.len(), byte_levels[l + 1 - row_levels])
            }
        };
        let cost = |l: usize, per: f64| {
            let (r, b) = at(l);
            (r * cols.len()) as f64 * cell_fixed(b, per)
        };
        let l = largest_fitting(levels, budget, |l| cost(l, MIN_MEASUREMENT_S));
        let (r, bytes) = at(l);
        let cells = (r * cols.len()).max(1);
        let fixed_each = cell_fixed(bytes, MIN_MEASUREMENT_S) - MIN_MEASUREMENT_S;
        let per = ((budget / cells as f64) - fixed_each).clamp(MIN_MEASUREMENT_S, MAX_CELL_S);
        let mut rows: Vec<u32> = order[..r.min(order.len())].to_vec();
        rows.sort_unstable();
        let predicted = cells as f64 * cell_fixed(bytes, per);
        let mut cut = Vec::new();
        if r < all_rows.len() {
            cut.push(format!(
                "rows from {} of {} CPU nodes ({}): every row would not fit the budget",
                r,
                all_rows.len(),
                rows.iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if bytes < full_bytes {
            cut.push(format!(
                "{} buffers instead of {}",
                format_bytes(bytes as u64),
                format_bytes(full_bytes as u64)
            ));
        }
        let plan = PartPlan {
            predicted_s: predicted,
            measuring_s: per * cells as f64,
            work: Work {
                measurements: cells,
                per_measurement_s: per,
                threads,
                buffer_bytes: bytes as u64,
                cells: Some(cells),
                rows: Some((r, all_rows.len())),
                ..Work::default()
            },
            cut: (!cut.is_empty()).then(|| cut.join("; ")),
        };
        let w = MatrixWork {
            sampled: r < all_rows.len(),
            rows,
            bytes,
            per,
            all_threads,
        };
        (w, plan)
    }
}

/// CPU nodes in the order a sampled matrix takes them as rows: the home
/// node, then one node of each distance pattern not seen yet (its
/// distances to every node, sorted), then the rest in order.
fn row_order(m: &Machine, rows: &[u32]) -> Vec<u32> {
    let home = crate::report::plan::home_node(m);
    let mut order: Vec<u32> = home.filter(|h| rows.contains(h)).into_iter().collect();
    let pattern = |r: u32| {
        let mut d: Vec<u64> = m.memory_nodes().iter().map(|c| m.distance(r, c)).collect();
        d.sort_unstable();
        d
    };
    let mut seen: Vec<Vec<u64>> = order.iter().map(|&r| pattern(r)).collect();
    for &r in rows {
        let p = pattern(r);
        if !order.contains(&r) && !seen.contains(&p) {
            order.push(r);
            seen.push(p);
        }
    }
    for &r in rows {
        if !order.contains(&r) {
            order.push(r);
        }
    }
    order
}

/// Buffer sizes from `min` to `max` (both kept), doubling, in 2 MiB steps.
pub(crate) fn halvings(min: usize, max: usize) -> Vec<usize> {
    let mut v = vec![max];
    let mut b = max;
    while b / 2 > min {
        b = (b / 2).next_multiple_of(2 << 20);
        v.push(b);
    }
    if min < max {
        v.push(min);
    }
    v.reverse();
    v.dedup();
    v
}

impl ReportPart for MatrixPart {
    type Result = MatrixResult;

    fn info(&self) -> PartInfo {
        if self.latency {
            PartInfo {
                aliases: &["matrix"],
                key_figures: &[
                    "local_latency_ns",
                    "max_latency_ns",
                    "numa_ratio_min",
                    "numa_ratio_max",
                ],
                ..PartInfo::new(
                    "latency-matrix",
                    "Latency matrix",
                    "numalab matrix --latency",
                    9.0,
                )
            }
        } else {
            PartInfo {
                aliases: &["matrix"],
                key_figures: &[
                    "local_read_gbps",
                    "remote_read_gbps_min",
                    "remote_read_gbps_max",
                ],
                ..PartInfo::new(
                    "bandwidth-matrix",
                    "Bandwidth matrix",
                    "numalab matrix --bandwidth",
                    7.0,
                )
            }
        }
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        self.work(env, budget).1
    }

    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<MatrixResult>, PlacementError> {
        let (w, plan) = self.work(&ctx.env(), budget);
        let req = MatrixRequest {
            latency: self.latency,
            bandwidth: !self.latency,
            all_threads_per_node: w.all_threads,
            kernel: BandwidthKernel::Read,
            isa: ctx.isa,
            pattern: ChasePattern::Random,
            latency_bytes: w.bytes,
            bandwidth_bytes: w.bytes,
            rule: ctx.rule(w.per),
            rows: w.sampled.then(|| w.rows.clone()),
        };
        let r = run_matrix(ctx.m, &req, &mut |x| ctx.step(x))?;
        Ok(Measured::new(r, plan.measuring_s, plan.fixed_s()).with_note(plan.cut))
    }

    fn verified(&self, r: &MatrixResult) -> bool {
        r.verified
    }

    fn text(&self, r: &MatrixResult, _m: &Machine) -> String {
        text(r, Units::Gb)
    }

    fn tables(&self, r: &MatrixResult, m: &Machine) -> Vec<Table> {
        vec![table(m, r, self.latency)]
    }

    fn html(&self, r: &MatrixResult, s: &mut Section) {
        html(s, r, self.latency);
    }

    fn summarize(&self, r: &MatrixResult, s: &mut SummaryBuilder) {
        if self.latency {
            latency_summary(s, r);
            for w in distance_disagreements(s.machine, r) {
                s.warn(w);
            }
        } else {
            bandwidth_summary(s, r);
        }
    }
}

/// The text `numalab matrix` prints: the classic tables of values and NUMA
/// ratios, and whether every cell verified.
pub fn text(r: &MatrixResult, units: Units) -> String {
    let mut s = String::new();
    if let Some(t) = &r.latency {
        s.push_str(&value_table(
            &format!("Latency (ns per load, {} chase):", r.pattern),
            &r.mem_nodes,
            t,
            &|v| format!("{v:.1}"),
        ));
        s.push_str("NUMA ratio (latency / local latency):\n");
        s.push_str(&ratio_table(&r.mem_nodes, t));
    }
    if let Some(t) = &r.bandwidth {
        let title = format!(
            "Bandwidth ({} {}, {} thread(s) per node):",
            r.kernel.name(),
            units.label(),
            r.threads_per_node
        );
        s.push_str(&value_table(&title, &r.mem_nodes, t, &|v| {
            format!("{:.2}", units.convert(v))
        }));
        s.push_str("NUMA ratio (local bandwidth / bandwidth):\n");
        s.push_str(&ratio_table(&r.mem_nodes, t));
    }
    s.push_str(if r.verified {
        "placement verified in every cell\n"
    } else {
        "NOT VERIFIED in some cells: see --json\n"
    });
    s
}

/// The classic table: rows are thread nodes, columns memory nodes.
fn value_table(
    title: &str,
    cols: &[u32],
    table: &[Vec<Cell<Figure>>],
    fmt_value: &dyn Fn(f64) -> String,
) -> String {
    grid_of(Some(title), cols, table, &|c| fmt_value(c.value.median))
}

/// The NUMA ratio of every cell (`-` where there is none).
fn ratio_table(cols: &[u32], table: &[Vec<Cell<Figure>>]) -> String {
    grid_of(None, cols, table, &|c| {
        c.numa_ratio
            .map(|r| format!("{r:.2}"))
            .unwrap_or("-".into())
    })
}

fn grid_of(
    title: Option<&str>,
    cols: &[u32],
    table: &[Vec<Cell<Figure>>],
    cell: &dyn Fn(&Cell<Figure>) -> String,
) -> String {
    let mut s = String::new();
    if let Some(t) = title {
        let _ = writeln!(s, "{t}");
    }
    let _ = write!(s, "  {:>10}", "CPU node");
    for c in cols {
        let _ = write!(s, " {:>10}", format!("mem {c}"));
    }
    let _ = writeln!(s);
    for row in table {
        let _ = write!(s, "  {:>10}", row.first().map(|c| c.cpu_node).unwrap_or(0));
        for c in row {
            let _ = write!(s, " {:>10}", cell(c));
        }
        let _ = writeln!(s);
    }
    s
}

/// One row per cell, with the value's statistics, ratio, hops and distance.
fn table(m: &Machine, r: &MatrixResult, latency: bool) -> Table {
    let (name, title, unit) = if latency {
        (
            "latency-matrix",
            "Latency (ns per dependent load, random chase) from every CPU node to every memory node",
            "ns",
        )
    } else {
        (
            "bandwidth-matrix",
            "Read bandwidth (GB/s, program bytes) from every CPU node to every memory node",
            "gbps",
        )
    };
    let cols: Vec<String> = [
        "cpu_node",
        "mem_node",
        "mem_node_cpuless",
        &format!("median_{unit}"),
        &format!("best_{unit}"),
        &format!("min_{unit}"),
        &format!("max_{unit}"),
        "rel_ci",
        "numa_ratio",
        "hops",
        "distance",
        "verified",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut t = Table {
        name: name.into(),
        title: title.into(),
        header: cols,
        rows: Vec::new(),
    };
    let cells = if latency { &r.latency } else { &r.bandwidth };
    let d = if latency { 2 } else { 3 };
    for c in cells.iter().flatten().flatten() {
        t.rows.push(vec![
            c.cpu_node.to_string(),
            c.mem_node.to_string(),
            yes(m.node(c.mem_node).is_some_and(|n| n.cpuless)),
            num(c.value.median, d),
            num(c.value.best, d),
            num(c.value.min, d),
            num(c.value.max, d),
            num(c.value.rel_ci, 4),
            opt(c.numa_ratio, 3),
            m.hops_between(c.cpu_node, c.mem_node)
                .map(|h| h.to_string())
                .unwrap_or_default(),
            m.distance(c.cpu_node, c.mem_node).to_string(),
            yes(c.verification.verified),
        ]);
    }
    t
}

/// The heatmap, then the classic table with NUMA ratios.
fn html(s: &mut Section, r: &MatrixResult, latency: bool) {
    let Some(t) = (if latency { &r.latency } else { &r.bandwidth }) else {
        return;
    };
    let m = s.machine;
    let (id, title, unit, caption) = if latency {
        (
            "fig-latency-heatmap",
            format!(
                "Latency from each CPU node to each memory node ({} chase)",
                r.pattern
            ),
            "ns per load",
            "Dependent loads (pointer chase, random over the buffer: TLB misses included), median ns. Lower is better.",
        )
    } else {
        (
            "fig-bandwidth-heatmap",
            format!(
                "Read bandwidth from each CPU node to each memory node ({} thread{} per node)",
                r.threads_per_node,
                if r.threads_per_node == "1" { "" } else { "s" }
            ),
            "GB/s",
            "Bytes the program reads per second (1 GB = 1e9 B), median. Higher is better.",
        )
    };
    let chart = heatmap(
        id,
        &title,
        &Heatmap {
            rows: r.cpu_nodes.iter().map(|&n| node_label(m, n)).collect(),
            cols: r.mem_nodes.iter().map(|&n| node_label(m, n)).collect(),
            values: t
                .iter()
                .map(|row| {
                    row.iter()
                        .map(|c| Some(c.value.median).filter(|v| v.is_finite()))
                        .collect()
                })
                .collect(),
            row_title: "CPU node".into(),
            col_title: "memory node".into(),
            unit: unit.into(),
            decimals: if latency { 0 } else { 1 },
            higher_is_better: !latency,
            row_groups: Vec::new(),
            col_groups: Vec::new(),
        },
    );
    s.figure(chart, caption);
    s.html(&classic_table_html(m, r, t, latency));
    s.csv_link(if latency {
        "latency-matrix"
    } else {
        "bandwidth-matrix"
    });
}

/// The classic table as HTML: value and NUMA ratio per cell, with a note.
fn classic_table_html(
    m: &Machine,
    r: &MatrixResult,
    t: &[Vec<Cell<Figure>>],
    latency: bool,
) -> String {
    let mut h = String::new();
    let tid = if latency {
        "tab-latency-matrix"
    } else {
        "tab-bandwidth-matrix"
    };
    let _ = write!(
        h,
        "<div class=\"scroll\"><table id=\"{tid}\">\n<tr><th class=\"l\">CPU node \\ memory</th>"
    );
    for &c in &r.mem_nodes {
        let _ = write!(h, "<th>{}</th>", esc(&node_label(m, c)));
    }
    h.push_str("</tr>\n");
    for row in t {
        let _ = write!(
            h,
            "<tr><th class=\"l\">node {}</th>",
            row.first().map(|c| c.cpu_node).unwrap_or(0)
        );
        for c in row {
            let _ = write!(
                h,
                "<td title=\"95% CI ±{:.1}%, min {:.2}, max {:.2}\">{}{}{}</td>",
                c.value.rel_ci * 100.0,
                c.value.min,
                c.value.max,
                if latency {
                    format!("{:.1} ns", c.value.median)
                } else {
                    format!("{:.2} GB/s", c.value.median)
                },
                c.numa_ratio
                    .filter(|_| c.cpu_node != c.mem_node)
                    .map(|x| format!(" <span class=\"note\">({x:.2}x)</span>"))
                    .unwrap_or_default(),
                if c.verification.verified {
                    ""
                } else {
                    " <span class=\"status-bad\">!</span>"
                }
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\">In brackets: the NUMA ratio ({}). ! = placement did not verify.{}</p>",
        if latency {
            "latency / the CPU node's local latency"
        } else {
            "local bandwidth / this bandwidth"
        },
        if r.verified {
            " Every cell verified: the thread ran on its CPU and every page was on the memory node asked for."
        } else {
            ""
        }
    );
    h
}

/// Smallest and largest median of some cells.
fn min_max<'a>(cells: impl Iterator<Item = &'a Cell<Figure>>) -> (f64, f64) {
    cells.fold((f64::INFINITY, 0.0), |(lo, hi), c| {
        (lo.min(c.value.median), hi.max(c.value.median))
    })
}

/// `lo–hi` with `decimals`, or one number when both round the same.
fn range_text(lo: f64, hi: f64, decimals: usize) -> String {
    if (hi - lo).abs() < 0.5 * 10f64.powi(-(decimals as i32)) {
        format!("{lo:.decimals$}")
    } else {
        format!("{lo:.decimals$}–{hi:.decimals$}")
    }
}

fn is_cpuless(m: &Machine, node: u32) -> bool {
    m.node(node).is_some_and(|n| n.cpuless)
}

fn local_values(t: &[Vec<Cell<Figure>>]) -> Vec<f64> {
    t.iter()
        .flatten()
        .filter(|c| c.cpu_node == c.mem_node)
        .map(|c| c.value.median)
        .collect()
}

fn remote_cells(t: &[Vec<Cell<Figure>>]) -> Vec<&Cell<Figure>> {
    t.iter()
        .flatten()
        .filter(|c| c.cpu_node != c.mem_node && c.value.median.is_finite())
        .collect()
}

fn latency_summary(s: &mut SummaryBuilder, r: &MatrixResult) {
    let Some(t) = &r.latency else { return };
    let Some(local) = median(local_values(t)) else {
        return;
    };
    s.set_figure("local_latency_ns", Some(local));
    s.set_figure(
        "max_latency_ns",
        t.iter()
            .flatten()
            .map(|c| c.value.median)
            .filter(|v| v.is_finite())
            .fold(None, |a: Option<f64>, v| Some(a.map_or(v, |a| a.max(v)))),
    );
    let remote = remote_cells(t);
    if remote.is_empty() {
        s.finding(
            "latency",
            format!(
                "Memory answers a dependent load in {local:.0} ns (random pointer chase over {}, TLB misses included); with one memory node there is no remote memory to compare.",
                format_bytes(s.buffer_bytes)
            ),
        );
        return;
    }
    let ratios: Vec<f64> = remote.iter().filter_map(|c| c.numa_ratio).collect();
    let (lo, hi) = min_max(remote.iter().copied());
    let (rmin, rmax) = (
        ratios.iter().copied().fold(f64::INFINITY, f64::min),
        ratios.iter().copied().fold(0.0, f64::max),
    );
    if !ratios.is_empty() {
        s.set_figure("numa_ratio_min", Some(rmin));
        s.set_figure("numa_ratio_max", Some(rmax));
    }
    let m = s.machine;
    let worst = remote
        .iter()
        .max_by(|a, b| a.value.median.total_cmp(&b.value.median))
        .map(|c| {
            format!(
                "node {} to node {}{}",
                c.cpu_node,
                c.mem_node,
                if is_cpuless(m, c.mem_node) {
                    " (CPU-less)"
                } else {
                    ""
                }
            )
        })
        .unwrap_or_default();
    s.finding(
        "latency",
        format!(
            "Local memory answers a dependent load in {local:.0} ns, remote memory in {} ns: NUMA ratios {}x, the slowest from {worst}.",
            range_text(lo, hi, 0),
            range_text(rmin, rmax, 2)
        ),
    );
}

fn bandwidth_summary(s: &mut SummaryBuilder, r: &MatrixResult) {
    let Some(t) = &r.bandwidth else { return };
    let Some(local) = median(local_values(t)) else {
        return;
    };
    let threads = if r.threads_per_node == "1" {
        "One thread reads"
    } else {
        "All threads of a node read"
    };
    s.set_figure("local_read_gbps", Some(local));
    let remote = remote_cells(t);
    if remote.is_empty() {
        s.finding(
            "bandwidth",
            format!(
                "{threads} {local:.1} GB/s from memory (read kernel, bytes the program reads)."
            ),
        );
        return;
    }
    let (lo, hi) = min_max(remote.iter().copied());
    s.set_figure("remote_read_gbps_min", Some(lo));
    s.set_figure("remote_read_gbps_max", Some(hi));
    let m = s.machine;
    let cpuless: Vec<String> = remote
        .iter()
        .filter(|c| is_cpuless(m, c.mem_node))
        .map(|c| {
            format!(
                "{:.1} GB/s from CPU-less node {}",
                c.value.median, c.mem_node
            )
        })
        .take(2)
        .collect();
    s.finding(
        "bandwidth",
        format!(
            "{threads} {local:.1} GB/s from local memory and {} GB/s from remote nodes (local is {}x remote){}.",
            range_text(lo, hi, 1),
            range_text(local / hi, local / lo, 2),
            if cpuless.is_empty() {
                String::new()
            } else {
                format!("; {}", cpuless.join(", "))
            }
        ),
    );
}

/// Where the measured latency contradicts the firmware's distance order: a
/// node the firmware calls farther measured clearly faster.
pub fn distance_disagreements(m: &Machine, r: &MatrixResult) -> Vec<String> {
    let Some(t) = &r.latency else {
        return Vec::new();
    };
    if m.distances.is_none() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for row in t {
        for a in row {
            for b in row {
                let (da, db) = (
                    m.distance(a.cpu_node, a.mem_node),
                    m.distance(b.cpu_node, b.mem_node),
                );
                if da < db && a.value.median > 1.15 * b.value.median {
                    out.push(format!(
                        "Firmware distances disagree with the measured latency: from node {} the firmware puts node {} nearer ({da}) than node {} ({db}), but it measured {:.0} ns vs {:.0} ns.",
                        a.cpu_node, a.mem_node, b.mem_node, a.value.median, b.value.median
                    ));
                }
            }
        }
    }
    out.truncate(4);
    out
}
