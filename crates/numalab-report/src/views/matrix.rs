//! The latency and bandwidth matrices (`numalab matrix`, report parts
//! `latency-matrix` and `bandwidth-matrix`): every CPU node x every memory
//! node, with NUMA ratios.

use super::Units;
use crate::claims::{Basis, Claim, Derivation, Relation, Threshold};
use crate::csv::{num, opt, yes, Table};
use crate::html::{node_label, Section};
use crate::model::Mode;
use crate::model::{largest_fitting, PartPlan, Work, SAMPLE_S};
use crate::part::{Measured, PartContext, PartInfo, ReportPart, MIN_MEASUREMENT_S};
use crate::plan::max_cpus_per_node;
use crate::plan::PlanEnv;
use crate::summary::{finding, warning, SummaryBuilder};
use crate::svg::{heatmap, Heatmap};
use numalab::experiments::matrix::{
    matrix_nodes, run_matrix, Cell, MatrixPlan, MatrixRequest, MatrixResult,
};
use numalab::idset::IdSet;
use numalab::machine::Machine;
use numalab::measure::chase::ChasePattern;
use numalab::measure::harness::Figure;
use numalab::measure::kernels::BandwidthKernel;
use numalab::placement::PlacementError;
use numalab::text::escape::xml as esc;
use numalab::text::format::bytes as format_bytes;
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
                ..Work::default()
            }
            .count_of("rows", "CPU nodes", r, all_rows.len())
            .count("cells", "cells", cells),
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
    let home = crate::plan::home_node(m);
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
            fixed_arrays: Default::default(),
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
            for w in distance_disagreements(s, r) {
                s.claim(w);
            }
        } else {
            bandwidth_summary(s, r);
        }
    }
}

/// The text `numalab matrix` prints: the classic tables of values and NUMA
/// ratios, and whether every cell verified.
/// `matrix --list`: what the matrix would measure on `machine` ("this
/// machine", "the machine of FILE"), and nothing measured.
pub fn plan_text(p: &MatrixPlan, machine: &str) -> String {
    let ids = |v: &[u32]| v.iter().copied().collect::<IdSet>().to_string();
    let cells = |n: usize| format!("{n} cell{}", if n == 1 { "" } else { "s" });
    let mut s = format!("matrix plan for {machine} (nothing measured)\n");
    let cpuless = if p.cpuless_nodes.is_empty() {
        String::new()
    } else {
        format!(
            "; {} without CPUs: {}",
            p.cpuless_nodes.len(),
            ids(&p.cpuless_nodes)
        )
    };
    let _ = writeln!(
        s,
        "  rows (CPU nodes): {} ({}); columns (memory nodes): {} ({}{cpuless})",
        ids(&p.cpu_nodes),
        p.cpu_nodes.len(),
        ids(&p.mem_nodes),
        p.mem_nodes.len()
    );
    if p.latency_cells > 0 {
        let _ = writeln!(
            s,
            "  latency: {}, a {} chase over {} from one CPU per row",
            cells(p.latency_cells),
            p.pattern,
            format_bytes(p.latency_bytes as u64)
        );
    }
    if p.bandwidth_cells > 0 {
        let kept = if p.fixed_arrays.is_empty() {
            String::new()
        } else {
            let f: Vec<String> = p
                .fixed_arrays
                .iter()
                .map(|(a, pol)| format!("{a}={pol}"))
                .collect();
            format!(" ({} kept in place, the others on the column)", f.join(" "))
        };
        let _ = writeln!(
            s,
            "  bandwidth: {}, {} over {} array(s) of {} per thread{kept}",
            cells(p.bandwidth_cells),
            p.kernel.name(),
            p.arrays.len(),
            format_bytes(p.bandwidth_bytes as u64)
        );
    }
    let _ = writeln!(s, "  row   chase CPU  stream CPUs");
    for r in &p.rows {
        let _ = writeln!(
            s,
            "  {:>3}   {:>9}  {}",
            r.cpu_node,
            r.chase_cpu.map_or("-".to_string(), |c| c.to_string()),
            if r.stream_cpus.is_empty() {
                "-".to_string()
            } else {
                format!("{} ({})", ids(&r.stream_cpus), r.stream_cpus.len())
            }
        );
    }
    let _ = writeln!(
        s,
        "  {:.2} s per cell: {:.1} s of measuring, plus placing and touching each cell's buffers (at most {} at once)",
        p.budget_per_cell_s,
        p.measuring_s,
        format_bytes(p.largest_cell_bytes)
    );
    for w in &p.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}

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
        let fixed = r
            .fixed_arrays
            .as_ref()
            .map(|f| format!("; {f} in every cell, the other arrays on the column"))
            .unwrap_or_default();
        let title = format!(
            "Bandwidth ({} {}, {} thread(s) per node{fixed}):",
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
            scale_note: None,
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

fn is_cpuless(m: &Machine, node: u32) -> bool {
    m.node(node).is_some_and(|n| n.cpuless)
}

/// The cells of a table with their place in it, row by row.
fn cells(t: &[Vec<Cell<Figure>>]) -> impl Iterator<Item = (usize, usize, &Cell<Figure>)> {
    t.iter()
        .enumerate()
        .flat_map(|(i, row)| row.iter().enumerate().map(move |(j, c)| (i, j, c)))
}

/// (median, path of the median) of the cells `keep` selects, in `table`.
fn medians<'a>(
    table: &'a str,
    t: &'a [Vec<Cell<Figure>>],
    keep: impl Fn(&Cell<Figure>) -> bool + 'a,
) -> impl Iterator<Item = (f64, String)> + 'a {
    cells(t)
        .filter(move |(_, _, c)| keep(c))
        .map(move |(i, j, c)| (c.value.median, format!("{table}/{i}/{j}/value/median")))
}

fn latency_summary(s: &mut SummaryBuilder, r: &MatrixResult) {
    let Some(t) = &r.latency else { return };
    let Some((local, local_d)) = s.median_of(medians("latency", t, |c| c.cpu_node == c.mem_node))
    else {
        return;
    };
    s.set_key("local_latency_ns", local, local_d.clone());
    match s.max_of(medians("latency", t, |_| true)) {
        Some((v, d)) => s.set_key("max_latency_ns", v, d),
        None => s.set_figure("max_latency_ns", None),
    }
    let remote = |c: &Cell<Figure>| c.cpu_node != c.mem_node && c.value.median.is_finite();
    let (Some((lo, lo_d)), Some((hi, hi_d))) = (
        s.min_of(medians("latency", t, remote)),
        s.max_of(medians("latency", t, remote)),
    ) else {
        s.claim(
            finding(
                "latency",
                "Memory answers a dependent load in {local} ns (random pointer chase over {bytes}, TLB misses included); with one memory node there is no remote memory to compare.",
            )
            .fig("local", local, "ns", 0, local_d)
            .fig("bytes", s.buffer_bytes as f64, "bytes", 0, Derivation::at("/buffer_bytes")),
        );
        return;
    };
    let ratios = || {
        cells(t)
            .filter(|(_, _, c)| remote(c))
            .filter_map(|(i, j, c)| {
                c.numa_ratio
                    .map(|v| (v, format!("latency/{i}/{j}/numa_ratio")))
            })
    };
    let mut c = finding("latency", "")
        .fig("local", local, "ns", 0, local_d)
        .fig("lo", lo, "ns", 0, lo_d)
        .fig("hi", hi, "ns", 0, hi_d);
    let mut tmpl =
        "Local memory answers a dependent load in {local} ns, remote memory in {range:lo:hi} ns"
            .to_string();
    if let (Some((rmin, rmin_d)), Some((rmax, rmax_d))) = (s.min_of(ratios()), s.max_of(ratios())) {
        s.set_key("numa_ratio_min", rmin, rmin_d.clone());
        s.set_key("numa_ratio_max", rmax, rmax_d.clone());
        c = c
            .fig("rmin", rmin, "x", 2, rmin_d)
            .fig("rmax", rmax, "x", 2, rmax_d);
        tmpl.push_str(": NUMA ratios {range:rmin:rmax}x");
    }
    let worst = cells(t)
        .filter(|(_, _, c)| remote(c))
        .max_by(|a, b| a.2.value.median.total_cmp(&b.2.value.median));
    if let Some((i, j, w)) = worst {
        c = c
            .fig(
                "from",
                w.cpu_node as f64,
                "node",
                0,
                s.at(&format!("latency/{i}/{j}/cpu_node")),
            )
            .fig(
                "to",
                w.mem_node as f64,
                "node",
                0,
                s.at(&format!("latency/{i}/{j}/mem_node")),
            )
            .fig(
                "slowest",
                w.value.median,
                "ns",
                0,
                s.at(&format!("latency/{i}/{j}/value/median")),
            )
            .compare(
                "is_slowest",
                ("slowest", Relation::Within, "hi"),
                Threshold::Share(0.0),
                ("", ""),
            );
        tmpl.push_str(", the slowest from node {from} to node {to}{is_slowest}");
        if is_cpuless(s.machine, w.mem_node) {
            tmpl.push_str(" (CPU-less)");
        }
    }
    tmpl.push('.');
    c.template = tmpl;
    s.claim(c);
}

fn bandwidth_summary(s: &mut SummaryBuilder, r: &MatrixResult) {
    let Some(t) = &r.bandwidth else { return };
    let Some((local, local_d)) = s.median_of(medians("bandwidth", t, |c| c.cpu_node == c.mem_node))
    else {
        return;
    };
    let threads = if r.threads_per_node == "1" {
        "One thread reads"
    } else {
        "All threads of a node read"
    };
    s.set_key("local_read_gbps", local, local_d.clone());
    let remote = |c: &Cell<Figure>| c.cpu_node != c.mem_node && c.value.median.is_finite();
    let (Some((lo, lo_d)), Some((hi, hi_d))) = (
        s.min_of(medians("bandwidth", t, remote)),
        s.max_of(medians("bandwidth", t, remote)),
    ) else {
        s.claim(
            finding(
                "bandwidth",
                format!(
                    "{threads} {{local}} GB/s from memory (read kernel, bytes the program reads)."
                ),
            )
            .fig("local", local, "GB/s", 1, local_d),
        );
        return;
    };
    s.set_key("remote_read_gbps_min", lo, lo_d.clone());
    s.set_key("remote_read_gbps_max", hi, hi_d.clone());
    let mut c = finding("bandwidth", "")
        .fig("local", local, "GB/s", 1, local_d.clone())
        .fig("lo", lo, "GB/s", 1, lo_d.clone())
        .fig("hi", hi, "GB/s", 1, hi_d.clone())
        .fig(
            "qlo",
            local / hi,
            "x",
            2,
            Derivation::ratio(local_d.clone(), hi_d),
        )
        .fig("qhi", local / lo, "x", 2, Derivation::ratio(local_d, lo_d));
    let mut tmpl = format!(
        "{threads} {{local}} GB/s from local memory and {{range:lo:hi}} GB/s from remote nodes (local is {{range:qlo:qhi}}x remote)"
    );
    // Each CPU-less node once, with the range of what the CPU nodes read
    // from it.
    let cpuless: std::collections::BTreeSet<u32> = cells(t)
        .filter(|(_, _, c)| remote(c) && is_cpuless(s.machine, c.mem_node))
        .map(|(_, _, c)| c.mem_node)
        .collect();
    let mut parts = Vec::new();
    for (k, node) in cpuless.iter().take(2).enumerate() {
        let from = |c: &Cell<Figure>| remote(c) && c.mem_node == *node;
        let (Some((a, ad)), Some((b, bd))) = (
            s.min_of(medians("bandwidth", t, from)),
            s.max_of(medians("bandwidth", t, from)),
        ) else {
            continue;
        };
        let col = cells(t)
            .find(|(_, _, c)| from(c))
            .map(|(i, j, _)| format!("bandwidth/{i}/{j}/mem_node"))
            .unwrap_or_default();
        c = c
            .fig(&format!("c{k}"), *node as f64, "node", 0, s.at(&col))
            .fig(&format!("c{k}lo"), a, "GB/s", 1, ad)
            .fig(&format!("c{k}hi"), b, "GB/s", 1, bd);
        parts.push(format!(
            "{{range:c{k}lo:c{k}hi}} GB/s from CPU-less node {{c{k}}}"
        ));
    }
    if !parts.is_empty() {
        tmpl.push_str("; ");
        tmpl.push_str(&parts.join(", "));
    }
    tmpl.push('.');
    c.template = tmpl;
    s.claim(c);
}

/// Where the measured latency contradicts the firmware's distance order: a
/// node the firmware calls farther measured clearly faster (by more than
/// 15%).
pub fn distance_disagreements(s: &SummaryBuilder, r: &MatrixResult) -> Vec<Claim> {
    let m = s.machine;
    let Some(t) = &r.latency else {
        return Vec::new();
    };
    let Some(dist_nodes) = m.distances.as_ref().map(|d| d.nodes.clone()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, row) in t.iter().enumerate() {
        for (ja, a) in row.iter().enumerate() {
            for (jb, b) in row.iter().enumerate() {
                let (da, db) = (
                    m.distance(a.cpu_node, a.mem_node),
                    m.distance(b.cpu_node, b.mem_node),
                );
                if da < db && a.value.median > 1.15 * b.value.median {
                    let at = |j: usize, f: &str| s.at(&format!("latency/{i}/{j}/{f}"));
                    let dist = |x: u32, y: u32| {
                        let pos = |n: u32| dist_nodes.iter().position(|&d| d == n);
                        match (pos(x), pos(y)) {
                            (Some(k), Some(l)) => {
                                Derivation::at(format!("/machine/distances/matrix/{k}/{l}"))
                            }
                            _ => Derivation::at("/machine/distances/matrix/none"),
                        }
                    };
                    out.push(
                        warning(
                            "firmware",
                            Basis::Timing,
                            "Firmware distances disagree with the measured latency: from node {from} the firmware puts node {na} nearer ({da}) than node {nb} ({db}), but it measured {la} ns vs {lb} ns{slower}.",
                        )
                        .fig("from", a.cpu_node as f64, "node", 0, at(ja, "cpu_node"))
                        .fig("na", a.mem_node as f64, "node", 0, at(ja, "mem_node"))
                        .fig("nb", b.mem_node as f64, "node", 0, at(jb, "mem_node"))
                        .fig("da", da as f64, "count", 0, dist(a.cpu_node, a.mem_node))
                        .fig("db", db as f64, "count", 0, dist(b.cpu_node, b.mem_node))
                        .fig("la", a.value.median, "ns", 0, at(ja, "value/median"))
                        .fig("lb", b.value.median, "ns", 0, at(jb, "value/median"))
                        .compare("slower", ("la", Relation::Greater, "lb"), Threshold::Share(0.15), ("", " (NOT clearly slower)")),
                    );
                }
            }
        }
    }
    out.truncate(4);
    out
}

#[cfg(test)]
pub(crate) mod claim_tests {
    use super::*;
    use crate::claims::check_claim;
    use crate::fixture;
    use serde_json::{json, Value};

    /// A bandwidth matrix of the CPU-less ring (CPU nodes 0-3, memory
    /// nodes 0-4): 2.0 GB/s local, 1.8 remote, 1.5 + 0.1 x row from node 4.
    pub(crate) fn ring_bandwidth() -> MatrixResult {
        let cell = |r: u32, c: u32| {
            let v = match (r, c) {
                (_, 4) => 1.5 + 0.1 * r as f64,
                (r, c) if r == c => 2.0,
                _ => 1.8,
            };
            json!({"cpu_node": r, "mem_node": c, "numa_ratio": 2.0 / v,
                   "value": {"best": v, "max": v, "median": v, "min": v, "rel_ci": 0.01, "spread": 0.0},
                   "verification": {"problems": [], "verified": true, "workers": []}})
        };
        let rows: Vec<Value> = (0..4)
            .map(|r| Value::Array((0..5).map(|c| cell(r, c)).collect()))
            .collect();
        serde_json::from_value(json!({
            "cpu_nodes": [0, 1, 2, 3], "mem_nodes": [0, 1, 2, 3, 4], "threads_per_node": "1",
            "latency": null, "bandwidth": rows, "kernel": "read", "pattern": "random",
            "verified": true, "warnings": []
        }))
        .unwrap()
    }

    #[test]
    fn each_cpuless_node_is_named_once_with_its_range() {
        let m = fixture("qemu-ring4-cpuless-hmat.xml");
        let r = ring_bandwidth();
        let mut b = SummaryBuilder::for_tests(&m, "/parts/bandwidth-matrix/result");
        bandwidth_summary(&mut b, &r);
        let c = &b.claims()[0];
        assert_eq!(c.text.matches("CPU-less node 4").count(), 1, "{}", c.text);
        assert_eq!(
            c.text,
            "One thread reads 2.0 GB/s from local memory and 1.5–1.8 GB/s from remote nodes (local is 1.11–1.33x remote); 1.5–1.8 GB/s from CPU-less node 4."
        );
        let doc = json!({"parts": {"bandwidth-matrix": {"result": r}}});
        assert_eq!(check_claim(c, &doc), Vec::<String>::new());
    }
}
