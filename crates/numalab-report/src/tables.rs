//! The tables of a whole report: the machine's, the parts', the key
//! figures', and every done part's own (through the registry). Parts of
//! one kind (the two sweeps, the two loaded-latency targets) write tables
//! of the same name, merged into one file with a column naming the part.

use crate::csv::{merge_into, opt, yes, Table};
use crate::registry::REPORT;
use crate::results::ReportResults;
use numalab::machine::Machine;

/// The tables of a report, and which tables each group of parts shares.
pub struct ReportTables {
    /// Every table, in the order of the report.
    pub tables: Vec<Table>,
    /// Per table group ([`crate::part::PartInfo::table_group`]): the
    /// names of the tables its parts wrote, in order.
    pub groups: Vec<(&'static str, Vec<String>)>,
}

/// Every table the report has data for, in the order of the report.
pub fn tables(doc: &ReportResults) -> Vec<Table> {
    report_tables(doc).tables
}

/// [`tables`], with the tables of each group of parts named.
pub fn report_tables(doc: &ReportResults) -> ReportTables {
    let m = &doc.machine;
    let mut out = vec![nodes_table(m), distances_table(m), parts_table(doc)];
    let mut groups: Vec<(&'static str, Vec<String>)> = Vec::new();
    for (name, rec) in doc.parts.iter() {
        let Some(r) = rec.done() else { continue };
        let group = REPORT.part(name).info().table_group;
        for t in REPORT.part(name).tables(r, m) {
            if let Some(g) = group {
                let i = match groups.iter().position(|(x, _)| *x == g) {
                    Some(i) => i,
                    None => {
                        groups.push((g, Vec::new()));
                        groups.len() - 1
                    }
                };
                if !groups[i].1.contains(&t.name) {
                    groups[i].1.push(t.name.clone());
                }
            }
            merge_into(&mut out, t);
        }
    }
    out.push(key_figures_table(doc));
    if let Some(t) = doc.model.as_ref().and_then(model_table) {
        out.push(t);
    }
    ReportTables {
        tables: out,
        groups,
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
    for (n, rec) in doc.parts.iter() {
        t.rows.push(vec![
            n.name().into(),
            REPORT.title(n).into(),
            rec.status.name().into(),
            opt(rec.budget_s, 2),
            opt(rec.elapsed_s, 2),
            rec.run.map(|r| r.to_string()).unwrap_or_default(),
            rec.verified.map(yes).unwrap_or_default(),
            rec.reason.clone().unwrap_or_default(),
        ]);
    }
    t
}

/// Every case the model predicted and the report measured.
fn model_table(model: &crate::results::ModelSection) -> Option<Table> {
    let mut t = Table::new(
        "model-check",
        "The contention model calibrated from this report against the measured cases: normalised times (docs/model.md)",
        &["measured in", "scenario", "condition", "case", "threads", "predicted", "measured", "error", "busiest resource (predicted)"],
    );
    for (what, check) in [
        ("sweep", &model.sweep),
        ("sweep-scenarios", &model.scenarios),
    ] {
        for r in check.iter().flat_map(|c| &c.rows) {
            t.rows.push(vec![
                what.to_string(),
                r.scenario.clone(),
                r.condition.clone(),
                r.case.clone(),
                r.labels.clone(),
                format!("{:.4}", r.predicted),
                format!("{:.4}", r.measured),
                format!("{:.4}", r.error),
                r.bottleneck.clone().unwrap_or_default(),
            ]);
        }
    }
    (!t.rows.is_empty()).then_some(t)
}

fn key_figures_table(doc: &ReportResults) -> Table {
    let mut t = Table::new(
        "key-figures",
        "The key numbers of the summary (empty: not measured or not meaningful here)",
        &["figure", "value", "ci95_low", "ci95_high"],
    );
    let number = |v: Option<f64>| match v {
        None => String::new(),
        Some(x) if x.fract() == 0.0 => format!("{x:.0}"),
        Some(x) => format!("{x:.4}"),
    };
    for (k, v) in doc.summary.key_figures.iter() {
        let ci = doc.summary.key_intervals.get(k);
        t.rows.push(vec![
            k.to_string(),
            number(v),
            number(ci.map(|c| c[0])),
            number(ci.map(|c| c[1])),
        ]);
    }
    t
}
