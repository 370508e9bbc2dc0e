//! The raw numbers of a report as tables: one CSV file per table in the
//! report directory, and the same tables under the charts of report.html.
//!
//! Tables are "long": one row per measured value with the keys that name
//! it, so that spreadsheets and data frames read them without reshaping.

use crate::experiments::loaded_latency::LoadedLatencyResult;
use crate::experiments::matrix::MatrixResult;
use crate::machine::Machine;
use crate::measure::harness::Figure;
use crate::report::results::{PartName, ReportResults, SweepOutcome};

/// One table of a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// File stem and element-id stem, e.g. `latency-matrix`.
    pub name: String,
    /// What the table holds, with units.
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    fn new(name: &str, title: &str, header: &[&str]) -> Self {
        Table {
            name: name.into(),
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// `name.csv`.
    pub fn file_name(&self) -> String {
        format!("{}.csv", self.name)
    }

    /// RFC 4180 text: comma separated, fields with commas, quotes or line
    /// breaks quoted, quotes doubled, CRLF line ends.
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let fields: Vec<String> = row.iter().map(|f| quote(f)).collect();
            s.push_str(&fields.join(","));
            s.push_str("\r\n");
        }
        s
    }
}

fn quote(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// A number for a table: fixed decimals, empty when not finite.
pub fn num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        String::new()
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| num(x, decimals)).unwrap_or_default()
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// Every table the report has data for, in the order of the report.
pub fn tables(doc: &ReportResults) -> Vec<Table> {
    let m = &doc.machine;
    let mut out = vec![nodes_table(m), distances_table(m), parts_table(doc)];
    let p = &doc.parts;
    if let Some(r) = p.latency_matrix.done() {
        out.push(matrix_table(m, r, true));
    }
    if let Some(r) = p.bandwidth_matrix.done() {
        out.push(matrix_table(m, r, false));
    }
    if let Some(r) = p.sizes.done() {
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
        out.push(t);
    }
    if let Some(r) = p.scaling.done() {
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
                    pt.cpus
                        .iter()
                        .map(|c| c.to_string())
                        .collect::<Vec<_>>()
                        .join(" "),
                    num(pt.gbps.median, 3),
                    num(pt.gbps.rel_ci, 4),
                    num(pt.per_thread_gbps, 3),
                    yes(pt.verified),
                ]);
            }
        }
        out.push(t);
    }
    let sweeps: Vec<(&str, &SweepOutcome)> = [
        ("sweep", p.sweep.done()),
        ("sweep-background", p.sweep_background.done()),
    ]
    .into_iter()
    .filter_map(|(n, s)| s.map(|s| (n, s)))
    .collect();
    if !sweeps.is_empty() {
        let mut t = Table::new(
            "sweep",
            "Placement sweep: one representative case per symmetry class; time per pass normalized to the fastest case of the same thread count",
            &[
                "part",
                "condition",
                "threads",
                "labels",
                "hop_class",
                "class_size",
                "sharing",
                "normalized",
                "seconds_per_pass",
                "rel_ci",
                "memory_gbps",
                "verified",
            ],
        );
        let mut f = Table::new(
            "sweep-findings",
            "The classic questions answered from the sweeps",
            &[
                "part",
                "condition",
                "question",
                "title",
                "answer",
                "ratio",
                "detail",
            ],
        );
        for (part, s) in &sweeps {
            for run in &s.sweep.runs {
                let cond = condition(run);
                for c in &run.cases {
                    t.rows.push(vec![
                        part.to_string(),
                        cond.clone(),
                        run.threads.to_string(),
                        c.labels.join(" "),
                        c.hop_class.clone(),
                        c.class_size.to_string(),
                        c.sharing.clone(),
                        num(c.normalized, 4),
                        num(c.seconds.median, 6),
                        num(c.seconds.rel_ci, 4),
                        num(c.threads.iter().map(|t| t.memory_gbps).sum(), 3),
                        yes(c.verified),
                    ]);
                }
            }
            for set in &s.findings {
                for x in &set.findings {
                    f.rows.push(vec![
                        part.to_string(),
                        set.condition.clone(),
                        x.question.clone(),
                        x.title.clone(),
                        match x.holds {
                            Some(true) => "holds",
                            Some(false) => "does not hold",
                            None => "cannot tell",
                        }
                        .into(),
                        opt(x.ratio, 3),
                        x.detail.clone(),
                    ]);
                }
            }
        }
        out.push(t);
        out.push(f);
    }
    let loaded: Vec<(&str, &LoadedLatencyResult)> = [
        ("local", p.loaded_latency_local.done()),
        ("farthest", p.loaded_latency_far.done()),
    ]
    .into_iter()
    .filter_map(|(n, r)| r.map(|r| (n, r)))
    .collect();
    if !loaded.is_empty() {
        let mut t = Table::new(
            "loaded-latency",
            "Loaded latency: chase latency (ns) vs injected bandwidth (GB/s, program and memory bytes)",
            &[
                "target",
                "cpu",
                "mem_nodes",
                "mix",
                "step",
                "injected_gbps",
                "injected_memory_gbps",
                "latency_ns",
                "ci_low_ns",
                "ci_high_ns",
                "vs_idle",
                "knee",
            ],
        );
        for (target, r) in loaded {
            for c in &r.mixes {
                for pt in std::iter::once(&c.idle).chain(&c.steps) {
                    t.rows.push(vec![
                        target.into(),
                        r.chase.cpu.to_string(),
                        r.chase
                            .pages_by_node
                            .iter()
                            .filter(|(_, &p)| p > 0)
                            .map(|(n, _)| n.to_string())
                            .collect::<Vec<_>>()
                            .join(" "),
                        c.mix.name(),
                        pt.step.clone(),
                        num(pt.injected_gbps, 3),
                        num(pt.injected_memory_gbps, 3),
                        num(pt.latency_ns.median, 2),
                        num(pt.ci_low_ns, 2),
                        num(pt.ci_high_ns, 2),
                        num(pt.vs_idle, 3),
                        yes(pt.knee),
                    ]);
                }
            }
        }
        out.push(t);
    }
    if let Some(r) = p.c2c.done() {
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
        out.push(t);
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
        out.push(n);
    }
    if let Some(r) = p.policies.done() {
        let mut t = Table::new(
            "policies",
            "Policy comparison: aggregate bandwidth (GB/s, program bytes) per workload and memory policy, and where the pages were",
            &[
                "workload",
                "policy",
                "memory_policy",
                "threads",
                "gbps",
                "rel_ci",
                "local_percent",
                "pages_by_node",
                "verified",
            ],
        );
        for c in &r.cells {
            t.rows.push(vec![
                c.workload.name().into(),
                c.policy.name().into(),
                c.memory_policy.clone(),
                c.threads.to_string(),
                opt(c.gbps.as_ref().map(|g| g.median), 3),
                opt(c.gbps.as_ref().map(|g| g.rel_ci), 4),
                opt(c.local_percent, 1),
                c.pages_by_node
                    .iter()
                    .map(|(n, p)| format!("{n}:{p}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                yes(c.verified),
            ]);
        }
        out.push(t);
    }
    out.push(key_figures_table(doc));
    out
}

fn condition(run: &crate::experiments::sweep::SweepRun) -> String {
    match &run.background {
        None => "idle".into(),
        Some(b) => format!(
            "background {} ({:.2} GB/s per thread, {} subscription)",
            b.level,
            b.bytes_per_second / 1e9,
            b.subscription.name()
        ),
    }
}

fn nodes_table(m: &Machine) -> Table {
    let mut t = Table::new(
        "machine-nodes",
        "NUMA nodes: CPUs, memory (bytes), kind, memory tier, whether this process may use it",
        &[
            "node",
            "cpus",
            "cpu_count",
            "memory_bytes",
            "cpuless",
            "kind",
            "subtype",
            "tier",
            "allowed",
        ],
    );
    for n in &m.nodes {
        t.rows.push(vec![
            n.os_index.to_string(),
            n.cpus.to_string(),
            n.cpus.len().to_string(),
            n.memory_bytes.to_string(),
            yes(n.cpuless),
            serde_json::to_value(n.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            n.subtype.clone().unwrap_or_default(),
            n.tier.map(|x| x.to_string()).unwrap_or_default(),
            yes(n.allowed),
        ]);
    }
    t
}

fn distances_table(m: &Machine) -> Table {
    let mut t = Table::new(
        "distances",
        "Firmware distances (SLIT, 10 = local) and hops of the interconnect graph inferred from them",
        &["from_node", "to_node", "distance", "hops"],
    );
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.os_index).collect();
    for &a in &ids {
        for &b in &ids {
            t.rows.push(vec![
                a.to_string(),
                b.to_string(),
                m.distances
                    .as_ref()
                    .and_then(|d| d.get(a, b))
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
                m.hops_between(a, b)
                    .map(|h| h.to_string())
                    .unwrap_or_default(),
            ]);
        }
    }
    t
}

fn parts_table(doc: &ReportResults) -> Table {
    let mut t = Table::new(
        "parts",
        "The parts of the report: status, budget and time (s), which run measured them, whether placement verified",
        &[
            "part", "title", "status", "budget_s", "elapsed_s", "run", "verified", "reason",
        ],
    );
    for n in PartName::ALL {
        let meta = doc.parts.meta(n);
        t.rows.push(vec![
            n.name().into(),
            n.title().into(),
            meta.status.name().into(),
            opt(meta.budget_s, 2),
            opt(meta.elapsed_s, 2),
            meta.run.map(|r| r.to_string()).unwrap_or_default(),
            meta.verified.map(yes).unwrap_or_default(),
            meta.reason.unwrap_or_default(),
        ]);
    }
    t
}

fn matrix_table(m: &Machine, r: &MatrixResult, latency: bool) -> Table {
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
    let table = if latency { &r.latency } else { &r.bandwidth };
    for c in table.iter().flatten().flatten() {
        let d = if latency { 2 } else { 3 };
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

fn key_figures_table(doc: &ReportResults) -> Table {
    let mut t = Table::new(
        "key-figures",
        "The key numbers of the summary (empty: not measured or not meaningful here)",
        &["figure", "value"],
    );
    if let Ok(serde_json::Value::Object(o)) = serde_json::to_value(&doc.summary.key_figures) {
        for (k, v) in o {
            t.rows.push(vec![
                k,
                match v {
                    serde_json::Value::Null => String::new(),
                    serde_json::Value::Number(n) => n
                        .as_f64()
                        .map(|x| {
                            if x.fract() == 0.0 {
                                format!("{x:.0}")
                            } else {
                                format!("{x:.4}")
                            }
                        })
                        .unwrap_or_default(),
                    other => other.to_string(),
                },
            ]);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_it() {
        let mut t = Table::new("x", "t", &["a", "b"]);
        t.rows.push(vec!["1,5".into(), "say \"hi\"".into()]);
        t.rows.push(vec!["plain".into(), "two\nlines".into()]);
        assert_eq!(
            t.to_csv(),
            "a,b\r\n\"1,5\",\"say \"\"hi\"\"\"\r\nplain,\"two\nlines\"\r\n"
        );
        assert_eq!(t.file_name(), "x.csv");
        assert_eq!(num(f64::NAN, 2), "");
        assert_eq!(num(1.23456, 2), "1.23");
    }
}
