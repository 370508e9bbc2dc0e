//! The machine section of report.html: the node graph, an overview, the
//! nodes, the machine's picture, distances and hops, caches, HMAT
//! attributes, devices, and firmware data that looks wrong.

use super::{csv_link, figure, find, node_label};
use crate::csv::Table;
use crate::svg::{heatmap, node_graph, GraphEdge, GraphNode, Heatmap};
use numalab::machine::{Machine, Source};
use numalab::text::escape::xml as esc;
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The whole section.
pub(crate) fn section(h: &mut String, m: &Machine, tabs: &[Table]) {
    h.push_str("<section id=\"sec-machine\">\n<h2>The machine</h2>\n");
    let source = match &m.source {
        Source::Live => "the live machine (hwloc)".to_string(),
        Source::File { path } => format!("the topology file {}", path.display()),
    };
    let _ = writeln!(
        h,
        "<p class=\"note\">Model of {}{}.</p>",
        esc(&source),
        if m.restricted {
            format!(
                "; this process may use CPUs {} and nodes {} (cgroup)",
                m.allowed_cpus, m.allowed_nodes
            )
        } else {
            String::new()
        }
    );
    h.push_str("<div class=\"grid2\"><div>\n");
    graph(h, m);
    h.push_str("</div><div>\n");
    overview(h, m);
    nodes(h, m);
    if let Some(t) = find(tabs, "machine-nodes") {
        csv_link(h, t);
    }
    h.push_str("</div></div>\n");
    picture(h, m);
    distances(h, m);
    caches(h, m);
    hmat(h, m);
    devices(h, m);
    if !m.warnings.is_empty() {
        h.push_str("<div class=\"warn\"><strong>Firmware data that looks wrong</strong><ul>\n");
        for w in &m.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul></div>\n");
    }
    h.push_str("</section>\n");
}

/// The node graph: links inferred from the firmware distances.
fn graph(h: &mut String, m: &Machine) {
    let nodes: Vec<GraphNode> = m
        .nodes
        .iter()
        .map(|n| GraphNode {
            id: n.os_index,
            label: format!("node {}", n.os_index),
            detail: if n.cpuless {
                format!("CPU-less · {}", format_bytes(n.memory_bytes))
            } else {
                format!("CPUs {} · {}", n.cpus, format_bytes(n.memory_bytes))
            },
            cpuless: n.cpuless,
        })
        .collect();
    let edges: Vec<GraphEdge> = m
        .links
        .iter()
        .map(|l| GraphEdge {
            a: l.a,
            b: l.b,
            label: l.distance.to_string(),
        })
        .collect();
    figure(
        h,
        node_graph(
            "fig-node-graph",
            "Nodes and links (labels: firmware distance)",
            &nodes,
            &edges,
        ),
        "Direct links inferred from the firmware distance table; a path over more links is more hops. CPU-less memory nodes are drawn dashed.",
    );
}

/// A two-column table of what the machine has.
fn overview(h: &mut String, m: &Machine) {
    let mem: u64 = m.nodes.iter().map(|n| n.memory_bytes).sum();
    let mut rows: Vec<(String, String)> = vec![
        ("NUMA nodes".into(), m.nodes.len().to_string()),
        (
            "CPU-less nodes".into(),
            m.nodes.iter().filter(|n| n.cpuless).count().to_string(),
        ),
        ("packages".into(), m.packages.len().to_string()),
        ("cores".into(), m.cores.len().to_string()),
        (
            "CPUs (PUs)".into(),
            format!("{} (SMT {})", m.complete_cpus.len(), m.smt),
        ),
        ("memory".into(), format_bytes(mem)),
        ("allowed CPUs".into(), m.allowed_cpus.to_string()),
        ("allowed nodes".into(), m.allowed_nodes.to_string()),
    ];
    if let Some(llc) = m.last_level_cache_bytes() {
        rows.push(("last-level cache".into(), format_bytes(llc)));
    }
    h.push_str("<table id=\"tab-machine\">\n");
    for (k, v) in rows {
        let _ = writeln!(
            h,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            esc(&k),
            esc(&v)
        );
    }
    h.push_str("</table>\n");
}

/// One row per node: CPUs, memory, kind, tier.
fn nodes(h: &mut String, m: &Machine) {
    let _ = write!(h, "<table id=\"tab-nodes\">\n<tr><th>node</th><th class=\"l\">CPUs</th><th>memory</th><th class=\"l\">kind</th><th>tier</th></tr>\n");
    for n in &m.nodes {
        let kind = serde_json::to_value(n.kind)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"l\">{}</td><td>{}</td><td class=\"l\">{}{}</td><td>{}</td></tr>",
            n.os_index,
            if n.cpuless { "none (CPU-less)".to_string() } else { n.cpus.to_string() },
            format_bytes(n.memory_bytes),
            esc(&kind),
            n.subtype.as_deref().map(|s| format!(" ({})", esc(s))).unwrap_or_default(),
            n.tier.map(|t| t.to_string()).unwrap_or_default()
        );
    }
    h.push_str("</table>\n");
}

/// Distances and hops as a matrix, and the distances as a heatmap.
fn distances(h: &mut String, m: &Machine) {
    h.push_str("<h3>Distances and hops</h3>\n");
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.os_index).collect();
    let _ = write!(
        h,
        "<div class=\"scroll\"><table id=\"tab-distances\">\n<tr><th class=\"l\">from \\ to</th>"
    );
    for &b in &ids {
        let _ = write!(h, "<th>{}</th>", esc(&node_label(m, b)));
    }
    h.push_str("</tr>\n");
    for &a in &ids {
        let _ = write!(h, "<tr><th class=\"l\">{}</th>", esc(&node_label(m, a)));
        for &b in &ids {
            let d = m
                .distances
                .as_ref()
                .and_then(|d| d.get(a, b))
                .map(|d| d.to_string())
                .unwrap_or("–".into());
            let hops = m
                .hops_between(a, b)
                .map(|x| format!(" ({x} hop{})", numalab::text::format::s(x as usize)))
                .unwrap_or_default();
            let _ = write!(h, "<td>{d}{hops}</td>");
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
    let _ = writeln!(
        h,
        "<p class=\"note\">Firmware distances ({}; 10 = local). Raw numbers: <a href=\"distances.csv\">distances.csv</a>.</p>",
        esc(m.distances.as_ref().map(|d| d.source.as_str()).unwrap_or("none: the firmware gave no table, the kernel assumes 10 local / 20 remote"))
    );
    let Some(d) = &m.distances else { return };
    let labels: Vec<String> = d.nodes.iter().map(|&n| node_label(m, n)).collect();
    figure(
        h,
        heatmap(
            "fig-distance-heatmap",
            "Firmware distance (SLIT, 10 = local) between nodes",
            &Heatmap {
                rows: labels.clone(),
                cols: labels,
                values: d
                    .matrix
                    .iter()
                    .map(|r| r.iter().map(|&v| Some(v as f64)).collect())
                    .collect(),
                row_title: "from node".into(),
                col_title: "to node".into(),
                unit: String::new(),
                decimals: 0,
                higher_is_better: false,
                scale_note: None,
                row_groups: Vec::new(),
                col_groups: Vec::new(),
            },
        ),
        "What the firmware says; the latency matrix below says what the hardware does.",
    );
}

/// One row per cache level and kind.
fn caches(h: &mut String, m: &Machine) {
    h.push_str("<h3>Caches</h3>\n<table id=\"tab-caches\">\n<tr><th class=\"l\">cache</th><th>size</th><th>instances</th><th>line</th><th>ways</th><th class=\"l\">shared by</th></tr>\n");
    let mut seen: Vec<(u8, String)> = Vec::new();
    for c in &m.caches {
        let key = (c.level, c.kind.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let same = m
            .caches
            .iter()
            .filter(|x| x.level == c.level && x.kind == c.kind)
            .count();
        let kind = match c.kind.as_str() {
            "data" => "d",
            "instruction" => "i",
            _ => "",
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">L{}{kind}</td><td>{}</td><td>{same}</td><td>{} B</td><td>{}</td><td class=\"l\">{}</td></tr>",
            c.level,
            format_bytes(c.size_bytes),
            c.line_bytes,
            c.associativity.map(|a| a.to_string()).unwrap_or_default(),
            if c.cpus.len() == 1 { "1 CPU each".to_string() } else { format!("{} CPUs (first: {})", c.cpus.len(), c.cpus) }
        );
    }
    h.push_str("</table>\n");
}

/// HMAT memory attributes, when the firmware gives them.
fn hmat(h: &mut String, m: &Machine) {
    if m.memory_attributes.is_empty() {
        return;
    }
    h.push_str("<h3>Memory attributes (HMAT)</h3>\n<table id=\"tab-hmat\">\n<tr><th class=\"l\">attribute</th><th class=\"l\">initiator</th><th>target node</th><th>value</th></tr>\n");
    for a in &m.memory_attributes {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&a.attribute),
            if a.initiator_nodes.is_empty() {
                format!("CPUs {}", a.initiator_cpus)
            } else {
                format!("node {}", a.initiator_nodes)
            },
            a.target,
            a.value
        );
    }
    h.push_str("</table>\n");
}

/// The machine as lstopo draws it: packages, nodes, caches, cores, PUs,
/// CPU-less memory and devices with their models (`topology --svg` writes
/// the same picture).
fn picture(h: &mut String, m: &Machine) {
    h.push_str("<h3>Picture</h3>\n<div class=\"picture\" style=\"overflow-x:auto\">\n");
    h.push_str(&crate::svg::machine_picture("machine-picture", m));
    h.push_str("</div>\n");
}

/// PCI devices and their local nodes.
fn devices(h: &mut String, m: &Machine) {
    if m.devices.is_empty() {
        return;
    }
    h.push_str("<h3>Devices</h3>\n<table id=\"tab-devices\">\n<tr><th class=\"l\">kind</th><th class=\"l\">name</th><th class=\"l\">model</th><th class=\"l\">PCI</th><th class=\"l\">local nodes</th></tr>\n");
    for d in &m.devices {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            esc(d.label()),
            esc(&d.name),
            esc(d.model.as_deref().unwrap_or("")),
            esc(d.pci_bus_id.as_deref().unwrap_or("")),
            d.local_nodes
        );
    }
    h.push_str("</table>\n");
}
