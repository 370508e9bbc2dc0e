//! Core-to-core latency (`numalab c2c`, report part `c2c`): cache-line
//! transfers between every pair of CPUs, as CPU x CPU matrices with node
//! boundaries and a summary per node pair.

use crate::claims::Derivation;
use crate::csv::{opt, yes, Table};
use crate::html::Section;
use crate::model::Mode;
use crate::model::{PartPlan, Work};
use crate::part::{Measured, PartContext, PartInfo, ReportPart};
use crate::plan::PlanEnv;
use crate::summary::{finding, SummaryBuilder};
use crate::svg::{heatmap, Heatmap};
use numalab::experiments::c2c::{
    pair_count, run_c2c, C2cFigures, C2cRequest, C2cResult, CpuMatrix,
};
use numalab::machine::Machine;
use numalab::measure::harness::Figure;
use numalab::measure::stats::StopRule;
use numalab::placement::PlacementError;
use numalab::IdSet;
use std::fmt::Write;
use std::time::Duration;

/// The report part.
pub struct C2cPart;

/// Shortest budget of one pair, seconds (its figures share it).
const MIN_PAIR_S: f64 = 0.02;

/// The CPUs, figures and seconds per pair for `budget` seconds, and the
/// plan: every pair of the usable CPUs when the mode's pair budget fits;
/// else the largest subset (one CPU per node first, then more per node)
/// whose pairs fit, named in the report; at least two CPUs.
fn work(env: &PlanEnv, budget: f64) -> ((Vec<u32>, C2cFigures, f64), PartPlan) {
    let (wanted_pair, figures) = match env.mode {
        Mode::Quick => (
            0.03,
            C2cFigures {
                modified: true,
                clean: false,
                false_sharing: true,
            },
        ),
        Mode::Default => (0.06, C2cFigures::default()),
        Mode::Full => (0.15, C2cFigures::default()),
    };
    let c = env.costs;
    let kinds =
        figures.modified as usize + 2 * figures.clean as usize + 2 * figures.false_sharing as usize;
    // Each figure of a pair starts its two threads and is one measurement.
    let pair_fixed = kinds as f64 * (c.threads(2) + c.factor * c.measurement_s);
    // The CPUs this process may use: the cgroup's, within a taskset mask
    // (a topology file's own allowed CPUs).
    let usable = if env.live {
        numalab::experiments::loaded_latency::usable_cpus(env.m)
    } else {
        env.m.allowed_cpus.clone()
    };
    let cpus = c2c_cpus(env.m, &usable, budget, MIN_PAIR_S + pair_fixed);
    let pairs = pair_count(cpus.len());
    let per = (budget / pairs.max(1) as f64 - pair_fixed).clamp(MIN_PAIR_S, 2.0);
    let all = cpus.len() == usable.len();
    let cut = (!all).then(|| {
        format!(
            "{} of {} CPUs (every pair of all would not fit the budget at {wanted_pair} s per pair): {}",
            cpus.len(),
            usable.len(),
            cpus.iter().copied().collect::<IdSet>()
        )
    });
    let plan = PartPlan {
        predicted_s: pairs as f64 * (per + pair_fixed),
        measuring_s: pairs as f64 * per,
        work: Work {
            measurements: pairs * kinds,
            per_measurement_s: per / kinds.max(1) as f64,
            threads: 2,
            ..Work::default()
        }
        .count_of("cpus", "CPUs", cpus.len(), usable.len())
        .count("pairs", "pairs", pairs),
        cut,
    };
    ((cpus, figures, per), plan)
}

impl ReportPart for C2cPart {
    type Result = C2cResult;

    fn info(&self) -> PartInfo {
        PartInfo {
            key_figures: &["c2c_within_node_ns", "c2c_across_nodes_ns"],
            ..PartInfo::new("c2c", "Core-to-core latency", "numalab c2c", 7.0)
        }
    }

    fn applicable(&self, m: &Machine) -> Result<(), String> {
        if m.allowed_cpus.len() < 2 {
            return Err(format!(
                "needs two CPUs to pass a cache line between; this process may use only CPU {}",
                m.allowed_cpus
            ));
        }
        Ok(())
    }

    fn plan(&self, env: &PlanEnv, budget: f64) -> PartPlan {
        work(env, budget).1
    }

    /// Every pair of CPUs, or a subset of CPUs when every pair does not fit.
    fn run(
        &self,
        ctx: &mut PartContext,
        budget: f64,
    ) -> Result<Measured<C2cResult>, PlacementError> {
        let ((cpus, figures, per), plan) = work(&ctx.env(), budget);
        let req = C2cRequest {
            cpus,
            figures,
            rule: StopRule {
                warmup: 1,
                min_reps: 3,
                max_reps: 1000,
                target_rel_ci: 0.01,
                budget: Duration::from_secs_f64(per),
            },
        };
        let r = run_c2c(ctx.m, &req, &mut |w| ctx.step(w))?;
        Ok(Measured::new(r, plan.measuring_s, plan.fixed_s()).with_note(plan.cut))
    }

    fn verified(&self, r: &C2cResult) -> bool {
        r.verification.verified
    }

    fn text(&self, r: &C2cResult, _m: &Machine) -> String {
        text(r)
    }

    fn tables(&self, r: &C2cResult, _m: &Machine) -> Vec<Table> {
        let mut t = Table::new(
            "c2c",
            "Core-to-core: one-way latency of a modified line, clean-line loads and false sharing (ns) per pair of CPUs",
            &[
                "cpu_a",
                "cpu_b",
                "node_a",
                "node_b",
                "modified_ns",
                "clean_a_from_b_ns",
                "clean_b_from_a_ns",
                "false_sharing_ns",
                "separate_lines_ns",
                "false_sharing_ratio",
                "verified",
            ],
        );
        let med = |f: &Option<Figure>| opt(f.as_ref().map(|x| x.median), 2);
        for pr in &r.pairs {
            t.rows.push(vec![
                pr.cpus[0].to_string(),
                pr.cpus[1].to_string(),
                pr.nodes[0].to_string(),
                pr.nodes[1].to_string(),
                med(&pr.modified_ns),
                med(&pr.clean_ab_ns),
                med(&pr.clean_ba_ns),
                opt(
                    pr.false_sharing.as_ref().map(|f| f.shared_line_ns.median),
                    2,
                ),
                opt(
                    pr.false_sharing
                        .as_ref()
                        .map(|f| f.separate_lines_ns.median),
                    2,
                ),
                opt(pr.false_sharing.as_ref().map(|f| f.ratio), 3),
                yes(pr.verification.verified),
            ]);
        }

        let mut n = Table::new(
            "c2c-nodes",
            "Core-to-core by node pair: medians over the CPU pairs (ns)",
            &[
                "node_a",
                "node_b",
                "pairs",
                "modified_ns",
                "clean_ns",
                "false_sharing_ns",
                "false_sharing_ratio",
            ],
        );
        for s in &r.node_summary {
            n.rows.push(vec![
                s.nodes[0].to_string(),
                s.nodes[1].to_string(),
                s.pairs.to_string(),
                opt(s.modified_ns, 2),
                opt(s.clean_ns, 2),
                opt(s.false_sharing_ns, 2),
                opt(s.false_sharing_ratio, 3),
            ]);
        }
        vec![t, n]
    }

    fn html(&self, r: &C2cResult, s: &mut Section) {
        html(r, s);
    }

    fn summarize(&self, r: &C2cResult, s: &mut SummaryBuilder) {
        summarize(r, s);
    }
}

/// CPUs for the core-to-core matrix when every pair does not fit in
/// `budget_s` at `min_pair_s` each: up to `per_node` CPUs of each node, on
/// distinct cores first, among the `usable` CPUs (the cgroup's within the
/// taskset mask). Returns every usable CPU when all pairs fit.
pub fn c2c_cpus(m: &Machine, usable: &IdSet, budget_s: f64, min_pair_s: f64) -> Vec<u32> {
    let all: Vec<u32> = usable.iter().collect();
    let pairs = |n: usize| n * n.saturating_sub(1) / 2;
    if pairs(all.len()) as f64 * min_pair_s <= budget_s {
        return all;
    }
    let nodes: Vec<u32> = m.cpu_nodes().iter().collect();
    // CPUs of each node, one per core first, then the cores' siblings.
    let per_node_order: Vec<Vec<u32>> = nodes
        .iter()
        .map(|&n| {
            let cpus = m.allowed_cpus_of(n).intersection(usable);
            let mut firsts = Vec::new();
            let mut rest = Vec::new();
            for core in &m.cores {
                let mine: Vec<u32> = core.cpus.intersection(&cpus).iter().collect();
                if let Some((f, r)) = mine.split_first() {
                    firsts.push(*f);
                    rest.extend_from_slice(r);
                }
            }
            // CPUs no core claims (topology files without cores).
            for c in cpus.iter() {
                if !firsts.contains(&c) && !rest.contains(&c) {
                    firsts.push(c);
                }
            }
            firsts.extend(rest);
            firsts
        })
        .collect();
    let mut best: Vec<u32> = Vec::new();
    for k in 1.. {
        let pick: Vec<u32> = per_node_order
            .iter()
            .flat_map(|v| v.iter().take(k).copied())
            .collect();
        let grew = pick.len() > best.len();
        if pick.len() >= 2 && pairs(pick.len()) as f64 * min_pair_s > budget_s {
            break;
        }
        best = pick;
        if !grew {
            break;
        }
    }
    if best.len() < 2 {
        // Not even one CPU per node fits: the first CPU of as many nodes as
        // fit, spread over the nodes (the first and the last kept).
        let firsts: Vec<u32> = per_node_order
            .iter()
            .filter_map(|v| v.first().copied())
            .collect();
        let n = (2..=firsts.len())
            .take_while(|&n| pairs(n) as f64 * min_pair_s <= budget_s)
            .last()
            .unwrap_or(2);
        best = crate::model::spread(firsts.len(), n)
            .into_iter()
            .map(|i| firsts[i])
            .collect();
        if best.len() < 2 {
            best = all.into_iter().take(2).collect();
        }
    }
    best.sort_unstable();
    best
}

/// The text `numalab c2c` prints: every figure's CPU x CPU matrix, the
/// summary per node pair, and whether every thread ran on its CPU.
pub fn text(r: &C2cResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} pair{} in {:.1} s; core clock {}; rows and columns are CPUs grouped by node; the diagonal (a CPU with itself) is not measured",
        r.pair_count,
        if r.pair_count == 1 { "" } else { "s" },
        r.elapsed_s,
        if r.core_ghz > 0.0 {
            format!("{:.2} GHz", r.core_ghz)
        } else {
            "unknown (no cycle figures)".into()
        }
    );
    let mx = &r.matrices;
    let mut show = |title: &str, m: &Option<CpuMatrix>, f: &dyn Fn(f64) -> String| {
        if let Some(m) = m {
            s.push('\n');
            s.push_str(&render_matrix(title, &r.cpus, &r.nodes, m, f));
        }
    };
    let ns = |v: f64| format!("{v:.1}");
    let cyc = |v: f64| format!("{v:.0}");
    show(
        "Modified line, one-way latency (ns): ping-pong of a flag, round trip / 2",
        &mx.modified_ns,
        &ns,
    );
    show(
        "Modified line, one-way latency (cycles)",
        &mx.modified_cycles,
        &cyc,
    );
    show(
        "Clean line (ns per load): row = reader, column = the CPU holding the line clean",
        &mx.clean_ns,
        &ns,
    );
    show("Clean line (cycles per load)", &mx.clean_cycles, &cyc);
    show(
        "False sharing (ns per atomic increment, both threads writing their own word of one line)",
        &mx.false_sharing_ns,
        &ns,
    );
    if let Some(m) = &mx.false_sharing_ratio {
        let v: Vec<f64> = r
            .pairs
            .iter()
            .filter_map(|p| p.false_sharing.as_ref().map(|f| f.separate_lines_ns.median))
            .collect();
        let sep = numalab::measure::stats::median(v).unwrap_or(f64::NAN);
        s.push('\n');
        s.push_str(&render_matrix(
            &format!(
                "False sharing slowdown (one line / separate lines; separate lines: median {sep:.1} ns per increment)"
            ),
            &r.cpus,
            &r.nodes,
            m,
            &|v| format!("{v:.1}x"),
        ));
    }
    let _ = writeln!(s, "\nPer node pair (medians over the CPU pairs):");
    let _ = writeln!(
        s,
        "  {:>7} {:>6}  {:>12} {:>7}  {:>9} {:>7}  {:>14} {:>8}",
        "nodes",
        "pairs",
        "modified ns",
        "cycles",
        "clean ns",
        "cycles",
        "false-shar. ns",
        "slowdown"
    );
    let o = |v: Option<f64>, d: usize| v.map(|x| format!("{x:.d$}")).unwrap_or("-".into());
    for n in &r.node_summary {
        let _ = writeln!(
            s,
            "  {:>7} {:>6}  {:>12} {:>7}  {:>9} {:>7}  {:>14} {:>8}",
            if n.nodes[0] == n.nodes[1] {
                format!("{}", n.nodes[0])
            } else {
                format!("{}-{}", n.nodes[0], n.nodes[1])
            },
            n.pairs,
            o(n.modified_ns, 1),
            o(n.modified_cycles, 0),
            o(n.clean_ns, 1),
            o(n.clean_cycles, 0),
            o(n.false_sharing_ns, 1),
            n.false_sharing_ratio
                .map(|x| format!("{x:.1}x"))
                .unwrap_or("-".into())
        );
    }
    if r.verification.verified {
        let _ = writeln!(s, "placement verified: every thread ran on its CPU");
    } else {
        for p in &r.verification.problems {
            let _ = writeln!(s, "NOT VERIFIED: {p}");
        }
    }
    s
}

/// The text view of a CPU x CPU matrix: node labels, CPU ids, separator
/// lines between nodes, "-" on the diagonal and for missing values.
pub fn render_matrix(
    title: &str,
    cpus: &[u32],
    nodes: &[u32],
    rows: &CpuMatrix,
    fmt_value: &dyn Fn(f64) -> String,
) -> String {
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            r.iter()
                .map(|v| v.map(fmt_value).unwrap_or_else(|| "-".into()))
                .collect()
        })
        .collect();
    let w = cells
        .iter()
        .flatten()
        .map(|s| s.len())
        .chain(cpus.iter().map(|c| c.to_string().len()))
        .max()
        .unwrap_or(1)
        .max(3);
    // Left margin: "node N" then the CPU id.
    let node_w = nodes
        .iter()
        .map(|n| format!("node {n}").len())
        .max()
        .unwrap_or(6);
    let cpu_w = cpus
        .iter()
        .map(|c| c.to_string().len())
        .max()
        .unwrap_or(1)
        .max(3);
    let margin = 2 + node_w + 1 + cpu_w;
    let boundary = |j: usize| j > 0 && nodes[j] != nodes[j - 1];
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    // Node labels over the column groups.
    let mut line = " ".repeat(margin);
    let mut j = 0;
    while j < cpus.len() {
        let k = (j..cpus.len())
            .take_while(|&x| nodes[x] == nodes[j])
            .count();
        let width = k * (w + 1);
        if boundary(j) {
            line.push_str(" |");
        }
        let label = format!("node {}", nodes[j]);
        let _ = write!(line, " {:<width$}", label, width = width.saturating_sub(1));
        j += k;
    }
    let _ = writeln!(s, "{}", line.trim_end());
    let mut line = format!("  {:>node_w$} {:>cpu_w$}", "", "CPU");
    for (j, c) in cpus.iter().enumerate() {
        if boundary(j) {
            line.push_str(" |");
        }
        let _ = write!(line, " {c:>w$}");
    }
    let _ = writeln!(s, "{line}");
    let rule_len = line.len();
    for (i, row) in cells.iter().enumerate() {
        if boundary(i) {
            let mut sep = String::from("  ");
            sep.push_str(&"-".repeat(rule_len - 2));
            // Crosses where the column separators are.
            let mut bytes: Vec<u8> = sep.into_bytes();
            for (pos, ch) in line.char_indices() {
                if ch == '|' && pos < bytes.len() {
                    bytes[pos] = b'+';
                }
            }
            let _ = writeln!(s, "{}", String::from_utf8_lossy(&bytes));
        }
        let label = if i == 0 || boundary(i) {
            format!("node {}", nodes[i])
        } else {
            String::new()
        };
        let _ = write!(s, "  {label:>node_w$} {:>cpu_w$}", cpus[i]);
        for (j, v) in row.iter().enumerate() {
            if boundary(j) {
                s.push_str(" |");
            }
            let _ = write!(s, " {v:>w$}");
        }
        s.push('\n');
    }
    s
}
fn html(r: &C2cResult, s: &mut Section) {
    let (title, values, unit) = match (&r.matrices.modified_ns, &r.matrices.false_sharing_ns) {
        (Some(m), _) => (
            "Modified cache line, one-way latency between CPUs",
            m.clone(),
            "ns",
        ),
        (None, Some(m)) => ("False sharing: ns per atomic increment", m.clone(), "ns"),
        (None, None) => (
            "Clean line loads between CPUs",
            r.matrices.clean_ns.clone().unwrap_or_default(),
            "ns",
        ),
    };
    let labels: Vec<String> = r.cpus.iter().map(|c| format!("CPU {c}")).collect();
    let groups: Vec<usize> = (1..r.nodes.len())
        .filter(|&i| r.nodes[i] != r.nodes[i - 1])
        .collect();
    s.figure(
        heatmap(
            "fig-c2c",
            title,
            &Heatmap {
                rows: labels.clone(),
                cols: labels,
                values,
                row_title: "CPU".into(),
                col_title: "CPU".into(),
                unit: unit.into(),
                decimals: 0,
                higher_is_better: false,
                scale_note: None,
                row_groups: groups.clone(),
                col_groups: groups,
            },
        ),
        "Ping-pong of a written flag between two pinned threads, round trip / 2, median. Thick lines separate nodes; the diagonal (a CPU with itself) is not measured.",
    );
    s.table("c2c-nodes", false);
    s.table("c2c", true);
}

fn summarize(r: &C2cResult, s: &mut SummaryBuilder) {
    // The median over the pairs within (or across) nodes, each pair's own
    // measurement with its interval: the key figure carries one.
    let modified = |same: bool| {
        s.median_of(r.pairs.iter().enumerate().filter_map(|(i, p)| {
            (same == (p.nodes[0] == p.nodes[1]))
                .then_some(p.modified_ns.as_ref())
                .flatten()
                .map(|f| (f.median, format!("pairs/{i}/modified_ns/median")))
        }))
    };
    let (within, across) = (modified(true), modified(false));
    for (key, f) in [
        ("c2c_within_node_ns", &within),
        ("c2c_across_nodes_ns", &across),
    ] {
        match f {
            Some((v, d)) => s.set_key(key, *v, d.clone()),
            None => s.set_figure(key, None),
        }
    }
    let fs = s.median_of(r.node_summary.iter().enumerate().filter_map(|(i, n)| {
        n.false_sharing_ratio
            .map(|v| (v, format!("node_summary/{i}/false_sharing_ratio")))
    }));
    let fs_text = if fs.is_some() {
        "; false sharing makes atomic increments {fs}x slower than on separate lines"
    } else {
        ""
    };
    let mut c = match (&within, &across) {
        (Some((w, wd)), Some((a, ad))) => finding(
            "c2c",
            format!("A modified cache line moves between cores in {{w}} ns within a node and {{a}} ns across nodes ({{r}}x){fs_text}."),
        )
        .fig("w", *w, "ns", 0, wd.clone())
        .fig("a", *a, "ns", 0, ad.clone())
        .fig("r", a / w, "x", 1, Derivation::ratio(ad.clone(), wd.clone())),
        (Some((w, wd)), None) => finding(
            "c2c",
            format!("A modified cache line moves between cores in {{w}} ns within the node{fs_text}."),
        )
        .fig("w", *w, "ns", 0, wd.clone()),
        (None, Some((a, ad))) => finding(
            "c2c",
            format!("A modified cache line moves between cores of different nodes in {{a}} ns{fs_text}."),
        )
        .fig("a", *a, "ns", 0, ad.clone()),
        (None, None) => return,
    };
    if let Some((x, d)) = fs {
        c = c.fig("fs", x, "x", 1, d);
    }
    s.claim(c);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn c2c_subset_fits_the_budget_and_covers_every_node() {
        let m = fixture("16amd64-8n2c.xml");
        let all = c2c_cpus(&m, &m.allowed_cpus, 1000.0, 0.05);
        assert_eq!(all.len(), 16);
        // 120 pairs x 0.05 s = 6 s: does not fit in 2 s.
        let some = c2c_cpus(&m, &m.allowed_cpus, 2.0, 0.05);
        let pairs = some.len() * (some.len() - 1) / 2;
        assert!(pairs as f64 * 0.05 <= 2.0, "{some:?}");
        let nodes: std::collections::BTreeSet<u32> =
            some.iter().filter_map(|&c| m.node_of_cpu(c)).collect();
        assert_eq!(nodes.len(), 8, "one CPU of every node: {some:?}");
        // Nothing fits: still two CPUs on two nodes.
        let two = c2c_cpus(&m, &m.allowed_cpus, 0.0, 0.05);
        assert_eq!(two.len(), 2);
        assert_ne!(m.node_of_cpu(two[0]), m.node_of_cpu(two[1]));
        // A taskset mask of CPUs 2-5 (nodes 1 and 2): nothing outside it.
        let mask = IdSet::parse_list("2-5").unwrap();
        assert_eq!(c2c_cpus(&m, &mask, 1000.0, 0.05), vec![2, 3, 4, 5]);
        let within = c2c_cpus(&m, &mask, 0.0, 0.05);
        assert_eq!(within.len(), 2);
        assert!(within.iter().all(|c| mask.contains(*c)), "{within:?}");
    }

    #[test]
    fn matrix_text_marks_nodes() {
        let rows = vec![
            vec![None, Some(50.0), Some(120.0), Some(121.0)],
            vec![Some(50.0), None, Some(119.0), Some(118.0)],
            vec![Some(120.0), Some(119.0), None, Some(51.0)],
            vec![Some(121.0), Some(118.0), Some(51.0), None],
        ];
        let t = render_matrix("T", &[0, 1, 2, 3], &[0, 0, 1, 1], &rows, &|v| {
            format!("{v:.0}")
        });
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "T");
        assert!(
            lines[1].contains("node 0") && lines[1].contains("node 1"),
            "{t}"
        );
        assert!(lines[2].contains("CPU") && lines[2].contains('|'), "{t}");
        // Header, 2 rows, separator, 2 rows.
        assert!(lines[3].contains("node 0") && lines[3].contains('-'), "{t}");
        assert!(lines[5].contains("---") && lines[5].contains('+'), "{t}");
        assert!(
            lines[6].contains("node 1") && lines[6].contains("120"),
            "{t}"
        );
        assert_eq!(lines.len(), 8, "{t}");
    }
}
