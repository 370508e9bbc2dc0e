//! report.html: one self-contained file (inline CSS and SVG, no script, no
//! network) that opens from disk in any browser, readable in light and dark
//! mode and printable.
//!
//! Layout: the summary (plain sentences, advice, warnings, missing parts),
//! the parts table, the machine (node graph, distances, caches, HMAT,
//! devices), then one section per part: its charts, the table of its
//! numbers and a link to its CSV. Every chart and table has a stable id
//! (`fig-*`, `tab-*`, listed in docs/report.md); a part that is missing
//! has `missing-<part>` instead, saying why.

use crate::experiments::loaded_latency::LoadedLatencyResult;
use crate::experiments::matrix::MatrixResult;
use crate::machine::{Machine, Source};
use crate::placement::format_bytes;
use crate::report::csv::{tables, Table};
use crate::report::results::{PartName, PartStatus, ReportResults, SweepOutcome};
use crate::report::summary::{sentence_case, SummaryLine};
use crate::report::svg::{
    self, bar_chart, escape as esc, heatmap, line_chart, node_graph, Axis, Bar, BarGroup,
    GraphEdge, GraphNode, Heatmap, Marker, PointMark, Scale, Series, TickFormat,
};
use std::collections::BTreeMap;
use std::fmt::Write;

const PAGE_CSS: &str = r#"
:root { color-scheme: light dark;
  --fg:#1d1d1f; --bg:#ffffff; --muted:#6e6e73; --panel:#f5f5f7; --line:#d2d2d7;
  --accent:#0a66c2; --warn-bg:#fff4e5; --warn-fg:#7a4100; --bad:#b3261e; --ok:#1b7f3b;
  --s0:#1f77b4; --s1:#d62728; --s2:#2ca02c; --s3:#9467bd; --s4:#ff7f0e; --s5:#17becf; --s6:#8c564b; --s7:#e377c2; }
@media (prefers-color-scheme: dark) { :root {
  --fg:#e8e8ea; --bg:#161618; --muted:#9a9aa0; --panel:#222226; --line:#3a3a40;
  --accent:#6cb4ff; --warn-bg:#3a2a10; --warn-fg:#ffd28a; --bad:#ff8a80; --ok:#7ee2a0;
  --s0:#5fa8ff; --s1:#ff6b6b; --s2:#5ad17a; --s3:#c59bff; --s4:#ffb04d; --s5:#4fd8e6; --s6:#d9a07a; --s7:#ff9bd6; } }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--fg);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 1.7em; margin: 0 0 4px; }
h2 { font-size: 1.3em; margin: 40px 0 8px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05em; margin: 22px 0 6px; }
p.meta, .note { color: var(--muted); font-size: .9em; }
a { color: var(--accent); }
.panel { background: var(--panel); border-radius: 8px; padding: 14px 18px; }
#summary .headline { font-size: 1.1em; font-weight: 600; margin-top: 0; }
#summary li { margin: 4px 0; }
.warn { background: var(--warn-bg); color: var(--warn-fg); border-radius: 8px; padding: 10px 16px; margin: 12px 0; }
.warn ul { margin: 4px 0; padding-left: 20px; }
.missing { border: 1px dashed var(--line); border-radius: 8px; padding: 10px 14px; color: var(--muted); }
.status-done { color: var(--ok); font-weight: 600; }
.status-bad { color: var(--bad); font-weight: 600; }
table { border-collapse: collapse; margin: 8px 0 4px; font-size: .88em; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 10px; text-align: right; vertical-align: top; }
th { background: var(--panel); font-weight: 600; }
td.l, th.l { text-align: left; }
.scroll { overflow-x: auto; max-width: 100%; }
figure.chart { margin: 14px 0 4px; }
figure.chart svg { display: block; }
figcaption { color: var(--muted); font-size: .88em; margin-top: 2px; }
details { margin: 6px 0 14px; }
details > summary { cursor: pointer; color: var(--accent); }
.grid2 { display: grid; grid-template-columns: repeat(auto-fit, minmax(420px, 1fr)); gap: 12px 28px; }
code { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: .92em; }
@media print { details { display: block; } details > summary { display: none; } h2 { break-after: avoid; } figure { break-inside: avoid; } }
"#;

/// The whole page.
pub fn render(doc: &ReportResults) -> String {
    let tabs: BTreeMap<String, Table> = tables(doc)
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect();
    let mut h = String::with_capacity(1 << 20);
    let host = doc
        .environment
        .as_ref()
        .map(|e| e.hostname.clone())
        .unwrap_or_default();
    let title = match &doc.machine.source {
        Source::File { path } => format!(
            "numalab report: {}",
            path.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string())
        ),
        Source::Live if !host.is_empty() => format!("numalab report: {host}"),
        Source::Live => "numalab report".to_string(),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"numalab {}\">\n<title>{}</title>\n<style>{PAGE_CSS}{}</style>\n</head>\n<body>\n<main>\n",
        esc(&doc.numalab_version),
        esc(&title),
        svg::CHART_CSS
    );
    header(&mut h, doc, &title);
    summary(&mut h, doc);
    parts(&mut h, doc, &tabs);
    machine(&mut h, &doc.machine, &tabs);
    let p = &doc.parts;
    section(&mut h, doc, PartName::LatencyMatrix, |h| {
        if let Some(r) = p.latency_matrix.done() {
            matrix(h, &doc.machine, r, true, &tabs);
        }
    });
    section(&mut h, doc, PartName::BandwidthMatrix, |h| {
        if let Some(r) = p.bandwidth_matrix.done() {
            matrix(h, &doc.machine, r, false, &tabs);
        }
    });
    section(&mut h, doc, PartName::Sizes, |h| {
        if let Some(r) = p.sizes.done() {
            sizes(h, r, &tabs);
        }
    });
    section(&mut h, doc, PartName::Scaling, |h| {
        if let Some(r) = p.scaling.done() {
            scaling(h, r, &tabs);
        }
    });
    // The two sweeps share one section and one table.
    sweeps(&mut h, doc, &tabs);
    loaded_sections(&mut h, doc, &tabs);
    section(&mut h, doc, PartName::C2c, |h| {
        if let Some(r) = p.c2c.done() {
            c2c(h, r, &tabs);
        }
    });
    section(&mut h, doc, PartName::Policies, |h| {
        if let Some(r) = p.policies.done() {
            policies(h, r, &tabs);
        }
    });
    environment(&mut h, doc);
    let _ = write!(
        h,
        "<p class=\"note\">Made by numalab {} (results schema {} {}). Every number is in <a href=\"results.json\">results.json</a> and the CSV files beside this page.</p>\n</main>\n</body>\n</html>\n",
        esc(&doc.numalab_version),
        esc(&doc.schema),
        esc(&doc.schema_version)
    );
    h
}

fn header(h: &mut String, doc: &ReportResults, title: &str) {
    let env = doc.environment.as_ref();
    let when = doc
        .runs
        .first()
        .map(|r| r.started_utc.clone())
        .unwrap_or_default();
    let runs = if doc.runs.len() > 1 {
        format!(", {} runs (resumed)", doc.runs.len())
    } else {
        String::new()
    };
    if !doc.machine.is_live() {
        let _ = write!(
            h,
            "<h1>{}</h1>\n<p class=\"meta\">The machine model of a topology file: nothing measured · numalab {}</p>\n",
            esc(title),
            esc(&doc.numalab_version)
        );
        return;
    }
    let _ = write!(
        h,
        "<h1>{}</h1>\n<p class=\"meta\">{}{} · {} report, budget {:.0} s, measured {:.1} s{runs} · {} per memory buffer{}</p>\n",
        esc(title),
        esc(&when),
        env.map(|e| format!(" · {} · Linux {}", esc(&e.cpu_model), esc(&e.kernel)))
            .unwrap_or_default(),
        doc.mode.name(),
        doc.budget_s,
        doc.elapsed_s,
        format_bytes(doc.buffer_bytes),
        if doc.complete {
            String::new()
        } else {
            " · <strong>incomplete</strong>".into()
        }
    );
}

fn summary(h: &mut String, doc: &ReportResults) {
    let s = &doc.summary;
    let _ = write!(
        h,
        "<section id=\"summary\" class=\"panel\">\n<p class=\"headline\" id=\"summary-headline\">{}</p>\n",
        esc(&s.headline)
    );
    let mut sentences = |heading: &str, id: &str, lines: &[SummaryLine]| {
        if lines.is_empty() {
            return;
        }
        let _ = writeln!(h, "{heading}<ul id=\"{id}\">");
        for f in lines {
            let _ = writeln!(
                h,
                "<li data-topic=\"{}\">{}</li>",
                esc(&f.topic),
                esc(&f.text)
            );
        }
        h.push_str("</ul>\n");
    };
    sentences("", "summary-findings", &s.findings);
    sentences(
        "<h3>Placement advice for this machine</h3>\n",
        "summary-advice",
        &s.advice,
    );
    if !s.warnings.is_empty() {
        h.push_str("<div class=\"warn\" id=\"summary-warnings\"><strong>Warnings</strong><ul>\n");
        for w in &s.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul></div>\n");
    }
    if !s.missing.is_empty() {
        let hint = if doc.machine.is_live() {
            " <code>numalab report -o DIR --resume</code> measures what can be measured."
        } else {
            ""
        };
        let _ = writeln!(
            h,
            "<div class=\"warn\" id=\"summary-missing\"><strong>Not in this report</strong>{hint}<ul>"
        );
        for w in &s.missing {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul></div>\n");
    }
    h.push_str("</section>\n");
}

fn status_cell(status: PartStatus) -> String {
    let class = match status {
        PartStatus::Done => "status-done",
        PartStatus::NotApplicable | PartStatus::NotSelected => "",
        _ => "status-bad",
    };
    format!("<td class=\"l {class}\">{}</td>", status.name())
}

fn parts(h: &mut String, doc: &ReportResults, tabs: &BTreeMap<String, Table>) {
    h.push_str("<h2 id=\"parts\">Parts of this report</h2>\n<div class=\"scroll\"><table id=\"tab-parts\">\n<tr><th class=\"l\">part</th><th class=\"l\">status</th><th>budget s</th><th>took s</th><th>run</th><th class=\"l\">placement</th><th class=\"l\">note</th></tr>\n");
    for p in PartName::ALL {
        let m = doc.parts.meta(p);
        let _ = writeln!(
            h,
            "<tr><td class=\"l\"><a href=\"#sec-{}\">{}</a></td>{}<td>{}</td><td>{}</td><td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            p.name(),
            esc(p.title()),
            status_cell(m.status),
            m.budget_s.map(|x| format!("{x:.1}")).unwrap_or_default(),
            m.elapsed_s.map(|x| format!("{x:.1}")).unwrap_or_default(),
            m.run.map(|x| x.to_string()).unwrap_or_default(),
            match m.verified {
                Some(true) => "verified".to_string(),
                Some(false) => "<span class=\"status-bad\">NOT verified</span>".to_string(),
                None => String::new(),
            },
            esc(m.reason.as_deref().unwrap_or(""))
        );
    }
    h.push_str("</table></div>\n");
    csv_link(h, tabs, "parts");
}

/// "Raw numbers: <link to the table's CSV>" after a chart or table.
fn csv_link(h: &mut String, tabs: &BTreeMap<String, Table>, name: &str) {
    if let Some(t) = tabs.get(name) {
        csv_link_to(h, t);
    }
}

fn csv_link_to(h: &mut String, t: &Table) {
    let _ = writeln!(
        h,
        "<p class=\"note\">Raw numbers: <a href=\"{}\">{}</a> ({}).</p>",
        esc(&t.file_name()),
        esc(&t.file_name()),
        rows(t.rows.len())
    );
}

fn rows(n: usize) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
}

/// A table as HTML, in a `<details>` when `collapsed`.
fn table_html(h: &mut String, t: &Table, id: &str, collapsed: bool) {
    if collapsed {
        let _ = writeln!(
            h,
            "<details><summary>The numbers ({}; also <a href=\"{}\">{}</a>)</summary>",
            rows(t.rows.len()),
            esc(&t.file_name()),
            esc(&t.file_name())
        );
    }
    let _ = write!(
        h,
        "<div class=\"scroll\"><table id=\"{id}\" aria-label=\"{}\">\n<tr>",
        esc(&t.title)
    );
    for c in &t.header {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("</tr>\n");
    for r in &t.rows {
        h.push_str("<tr>");
        for c in r {
            let numeric = c.parse::<f64>().is_ok() || c.is_empty();
            let _ = write!(
                h,
                "<td{}>{}</td>",
                if numeric { "" } else { " class=\"l\"" },
                esc(c)
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
    if collapsed {
        h.push_str("</details>\n");
    } else {
        csv_link_to(h, t);
    }
}

fn figure(h: &mut String, svg: String, caption: &str) {
    let _ = write!(
        h,
        "<figure class=\"chart\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n",
        esc(caption)
    );
}

/// A part's section: its heading, then `body` when done, or why it is missing.
fn section(h: &mut String, doc: &ReportResults, p: PartName, body: impl FnOnce(&mut String)) {
    let meta = doc.parts.meta(p);
    if meta.status == PartStatus::NotSelected {
        return;
    }
    let _ = write!(
        h,
        "<section id=\"sec-{}\">\n<h2>{}</h2>\n",
        p.name(),
        esc(p.title())
    );
    if meta.status == PartStatus::Done {
        let _ = writeln!(
            h,
            "<p class=\"note\">Measured in {:.1} s (budget {:.1} s){}; the same as <code>{}</code>{}.</p>",
            meta.elapsed_s.unwrap_or(0.0),
            meta.budget_s.unwrap_or(0.0),
            meta.run
                .filter(|&r| r > 1)
                .map(|r| format!(" in run {r}"))
                .unwrap_or_default(),
            esc(p.command()),
            meta.reason
                .as_deref()
                .map(|r| format!("; {}", esc(r)))
                .unwrap_or_default()
        );
        body(h);
    } else {
        missing(h, p, meta.status, meta.reason.as_deref());
    }
    h.push_str("</section>\n");
}

fn missing(h: &mut String, p: PartName, status: PartStatus, reason: Option<&str>) {
    let _ = writeln!(
        h,
        "<p class=\"missing\" id=\"missing-{}\">Not in this report ({}): {}</p>",
        p.name(),
        status.name(),
        esc(reason.unwrap_or("not measured yet"))
    );
}

fn node_label(m: &Machine, n: u32) -> String {
    if m.node(n).is_some_and(|x| x.cpuless) {
        format!("node {n} (CPU-less)")
    } else {
        format!("node {n}")
    }
}

fn machine(h: &mut String, m: &Machine, tabs: &BTreeMap<String, Table>) {
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
    // The node graph: links inferred from the firmware distances.
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
    h.push_str("</div><div>\n");
    // Overview table.
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
    // Nodes.
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
    csv_link(h, tabs, "machine-nodes");
    h.push_str("</div></div>\n");
    // Distances and hops as a matrix, and as a heatmap.
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
                .map(|x| format!(" ({x} hop{})", if x == 1 { "" } else { "s" }))
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
    if let Some(d) = &m.distances {
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
                    row_groups: Vec::new(),
                    col_groups: Vec::new(),
                },
            ),
            "What the firmware says; the latency matrix below says what the hardware does.",
        );
    }
    // Caches.
    h.push_str("<h3>Caches</h3>\n<table id=\"tab-caches\">\n<tr><th class=\"l\">cache</th><th>size</th><th>instances</th><th>line</th><th>ways</th><th class=\"l\">shared by</th></tr>\n");
    let mut seen: Vec<(u8, String)> = Vec::new();
    for c in &m.caches {
        let key = (c.level, c.kind.clone());
        if seen.contains(&key) {
            continue;
        }
        seen.push(key);
        let same: Vec<&crate::machine::Cache> = m
            .caches
            .iter()
            .filter(|x| x.level == c.level && x.kind == c.kind)
            .collect();
        let kind = match c.kind.as_str() {
            "data" => "d",
            "instruction" => "i",
            _ => "",
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"l\">L{}{kind}</td><td>{}</td><td>{}</td><td>{} B</td><td>{}</td><td class=\"l\">{}</td></tr>",
            c.level,
            format_bytes(c.size_bytes),
            same.len(),
            c.line_bytes,
            c.associativity.map(|a| a.to_string()).unwrap_or_default(),
            if c.cpus.len() == 1 { "1 CPU each".to_string() } else { format!("{} CPUs (first: {})", c.cpus.len(), c.cpus) }
        );
    }
    h.push_str("</table>\n");
    if !m.memory_attributes.is_empty() {
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
    if !m.devices.is_empty() {
        h.push_str("<h3>Devices</h3>\n<table id=\"tab-devices\">\n<tr><th class=\"l\">kind</th><th class=\"l\">name</th><th class=\"l\">PCI</th><th class=\"l\">local nodes</th></tr>\n");
        for d in &m.devices {
            let _ = writeln!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
                esc(&d.kind),
                esc(&d.name),
                esc(d.pci_bus_id.as_deref().unwrap_or("")),
                d.local_nodes
            );
        }
        h.push_str("</table>\n");
    }
    if !m.warnings.is_empty() {
        h.push_str("<div class=\"warn\"><strong>Firmware data that looks wrong</strong><ul>\n");
        for w in &m.warnings {
            let _ = writeln!(h, "<li>{}</li>", esc(w));
        }
        h.push_str("</ul></div>\n");
    }
    h.push_str("</section>\n");
}

fn matrix(
    h: &mut String,
    m: &Machine,
    r: &MatrixResult,
    latency: bool,
    tabs: &BTreeMap<String, Table>,
) {
    let Some(t) = (if latency { &r.latency } else { &r.bandwidth }) else {
        return;
    };
    let rows: Vec<String> = r.cpu_nodes.iter().map(|&n| node_label(m, n)).collect();
    let cols: Vec<String> = r.mem_nodes.iter().map(|&n| node_label(m, n)).collect();
    let values: Vec<Vec<Option<f64>>> = t
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| Some(c.value.median).filter(|v| v.is_finite()))
                .collect()
        })
        .collect();
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
    figure(
        h,
        heatmap(
            id,
            &title,
            &Heatmap {
                rows,
                cols,
                values,
                row_title: "CPU node".into(),
                col_title: "memory node".into(),
                unit: unit.into(),
                decimals: if latency { 0 } else { 1 },
                higher_is_better: !latency,
                row_groups: Vec::new(),
                col_groups: Vec::new(),
            },
        ),
        caption,
    );
    // The classic table: value and NUMA ratio per cell.
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
    csv_link(
        h,
        tabs,
        if latency {
            "latency-matrix"
        } else {
            "bandwidth-matrix"
        },
    );
}

fn sizes(
    h: &mut String,
    r: &crate::experiments::sizes::SizesResult,
    tabs: &BTreeMap<String, Table>,
) {
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
    h.push_str("<div class=\"grid2\"><div>\n");
    figure(
        h,
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
    h.push_str("</div><div>\n");
    let lat = Series {
        name: "random chase".into(),
        points: r
            .points
            .iter()
            .map(|p| (p.bytes as f64, p.latency_ns))
            .collect(),
        dashed: false,
    };
    figure(
        h,
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
    h.push_str("</div></div>\n");
    if let Some(t) = tabs.get("sizes") {
        table_html(h, t, "tab-sizes", true);
    }
}

fn scaling(
    h: &mut String,
    r: &crate::experiments::scaling::ScalingResult,
    tabs: &BTreeMap<String, Table>,
) {
    let per = |pts: &[crate::experiments::scaling::ScalingPoint]| -> Vec<(f64, f64)> {
        pts.iter()
            .map(|p| (p.threads as f64, p.per_thread_gbps))
            .collect()
    };
    let agg = |pts: &[crate::experiments::scaling::ScalingPoint]| -> Vec<(f64, f64)> {
        pts.iter()
            .map(|p| (p.threads as f64, p.gbps.median))
            .collect()
    };
    let series = vec![
        Series {
            name: "packed, per thread".into(),
            points: per(&r.packed),
            dashed: false,
        },
        Series {
            name: "spread, per thread".into(),
            points: per(&r.spread),
            dashed: false,
        },
        Series {
            name: "packed, all threads".into(),
            points: agg(&r.packed),
            dashed: true,
        },
        Series {
            name: "spread, all threads".into(),
            points: agg(&r.spread),
            dashed: true,
        },
    ];
    figure(
        h,
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
        let _ = writeln!(
            h,
            "<p class=\"note\">Contention split (packed, fitted on {} and {} threads): core time {:.2} ms per pass, +{:.2} ms per extra thread; {:.0}% of the time at {} threads is contention.</p>",
            mo.fitted_on.0,
            mo.fitted_on.1,
            mo.core_seconds * 1e3,
            mo.contention_seconds_per_thread * 1e3,
            mo.contention_share * 100.0,
            mo.fitted_on.1
        );
    }
    if let Some(t) = tabs.get("scaling") {
        table_html(h, t, "tab-scaling", false);
    }
}

/// Bars of one sweep part, one chart per run (thread count, background):
/// grouped by hop class, each bar a case's time normalized to the fastest
/// case of its thread count, in a container with the part's id.
fn sweep_chart(h: &mut String, id: &str, s: &SweepOutcome, title: &str) {
    let _ = writeln!(h, "<div id=\"{id}\">");
    for run in &s.sweep.runs {
        let cond = match &run.background {
            None => String::new(),
            Some(b) => format!(", background {}", b.level),
        };
        let mut by_class: BTreeMap<String, Vec<Bar>> = BTreeMap::new();
        for c in &run.cases {
            by_class.entry(c.hop_class.clone()).or_default().push(Bar {
                label: c.labels.join(" "),
                value: c.normalized,
                tooltip: format!(
                    "{}: {:.2}x the fastest, {:.2} ms per pass, class of {} case{}{}{}",
                    c.labels.join(" "),
                    c.normalized,
                    c.seconds.median * 1e3,
                    c.class_size,
                    if c.class_size == 1 { "" } else { "s" },
                    match c.sharing.as_str() {
                        "cpu" => "; both threads on one CPU",
                        "core" => "; SMT siblings",
                        _ => "",
                    },
                    if c.verified {
                        ""
                    } else {
                        "; placement NOT verified"
                    }
                ),
                flagged: !c.verified,
            });
        }
        let groups: Vec<BarGroup> = by_class
            .into_iter()
            .map(|(class, mut bars)| {
                bars.sort_by(|a, b| a.value.total_cmp(&b.value));
                BarGroup { label: class, bars }
            })
            .collect();
        let threads = format!(
            "{} thread{}",
            run.threads,
            if run.threads == 1 { "" } else { "s" }
        );
        figure(
            h,
            bar_chart(
                &format!("{id}-{}t", run.threads),
                &format!("{title}: {threads}{cond}"),
                "time / fastest case (x)",
                &groups,
                Some(1.0),
            ),
            &format!(
                "{} of {} symmetry classes ({} cases in all), one bar per class, grouped by hop class (r/w and hops of each thread: w0/w1 = one writer local, one a hop away). 1.0 = the fastest case; higher is slower. Labels: node.core.r|w.memory-node per thread.",
                run.cases_run, run.classes, run.total_cases
            ),
        );
    }
    h.push_str("</div>\n");
}

fn sweeps(h: &mut String, doc: &ReportResults, tabs: &BTreeMap<String, Table>) {
    for (p, id, title) in [
        (PartName::Sweep, "fig-sweep", "Idle machine"),
        (
            PartName::SweepBackground,
            "fig-sweep-background",
            "Under background load",
        ),
    ] {
        let last = p == PartName::SweepBackground;
        section(h, doc, p, |h| {
            let s = if last {
                doc.parts.sweep_background.done()
            } else {
                doc.parts.sweep.done()
            };
            if let Some(s) = s {
                sweep_chart(h, id, s, title);
                findings_list(h, s);
            }
        });
    }
    // One table for both sweeps, after them.
    if let Some(t) = tabs.get("sweep") {
        h.push_str("<section id=\"sec-sweep-tables\">\n");
        table_html(h, t, "tab-sweep", true);
        if let Some(f) = tabs.get("sweep-findings") {
            table_html(h, f, "tab-sweep-findings", true);
        }
        h.push_str("</section>\n");
    }
}

fn findings_list(h: &mut String, s: &SweepOutcome) {
    for set in &s.findings {
        let _ = writeln!(h, "<h3>Findings, {}</h3>\n<ul>", esc(&set.condition));
        for f in &set.findings {
            let _ = writeln!(
                h,
                "<li>({}) {}: <strong>{}</strong>{} — {}</li>",
                esc(&f.question),
                esc(&f.title),
                match f.holds {
                    Some(true) => "holds",
                    Some(false) => "does not hold",
                    None => "cannot tell",
                },
                f.ratio.map(|r| format!(" ({r:.2}x)")).unwrap_or_default(),
                esc(&f.detail)
            );
        }
        h.push_str("</ul>\n");
    }
}

fn loaded_chart(h: &mut String, id: &str, r: &LoadedLatencyResult, which: &str) {
    let series: Vec<Series> = r
        .mixes
        .iter()
        .map(|c| Series {
            name: format!("{} ({})", c.mix.name(), c.description),
            points: std::iter::once(&c.idle)
                .chain(&c.steps)
                .map(|p| (p.injected_gbps, p.latency_ns.median))
                .collect(),
            dashed: false,
        })
        .collect();
    let marks: Vec<PointMark> = r
        .mixes
        .iter()
        .filter_map(|c| {
            Some(PointMark {
                x: c.knee_injected_gbps?,
                y: c.knee_latency_ns?,
                label: format!("knee ({})", c.mix.name()),
            })
        })
        .collect();
    let node = r
        .chase
        .node
        .map(|n| format!("node {n}"))
        .unwrap_or_default();
    figure(
        h,
        line_chart(
            id,
            &format!(
                "Loaded latency, {which} memory ({node}) from CPU {}",
                r.chase.cpu
            ),
            &Axis::new("injected bandwidth (GB/s, program bytes)", Scale::Linear, TickFormat::Number),
            &Axis::new("latency (ns per load)", Scale::Linear, TickFormat::Number),
            &series,
            &[],
            &marks,
        ),
        &format!(
            "A pointer chase on CPU {} while {} injector thread{} on CPU{} {} load the same memory at rising rates, from idle to unpaced. The knee is where queueing starts.",
            r.chase.cpu,
            r.injectors.cpus.len(),
            if r.injectors.cpus.len() == 1 { "" } else { "s" },
            if r.injectors.cpus.len() == 1 { "" } else { "s" },
            r.injectors
                .cpus
                .iter()
                .copied()
                .collect::<crate::IdSet>()
        ),
    );
}

fn loaded_sections(h: &mut String, doc: &ReportResults, tabs: &BTreeMap<String, Table>) {
    let p = &doc.parts;
    section(h, doc, PartName::LoadedLatencyLocal, |h| {
        if let Some(r) = p.loaded_latency_local.done() {
            loaded_chart(h, "fig-loaded-latency-local", r, "local");
        }
    });
    section(h, doc, PartName::LoadedLatencyFar, |h| {
        if let Some(r) = p.loaded_latency_far.done() {
            loaded_chart(h, "fig-loaded-latency-far", r, "farthest");
        }
    });
    if let Some(t) = tabs.get("loaded-latency") {
        h.push_str("<section id=\"sec-loaded-latency-tables\">\n");
        table_html(h, t, "tab-loaded-latency", true);
        h.push_str("</section>\n");
    }
}

fn c2c(h: &mut String, r: &crate::experiments::c2c::C2cResult, tabs: &BTreeMap<String, Table>) {
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
    figure(
        h,
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
                row_groups: groups.clone(),
                col_groups: groups,
            },
        ),
        "Ping-pong of a written flag between two pinned threads, round trip / 2, median. Thick lines separate nodes; the diagonal (a CPU with itself) is not measured.",
    );
    if let Some(t) = tabs.get("c2c-nodes") {
        table_html(h, t, "tab-c2c-nodes", false);
    }
    if let Some(t) = tabs.get("c2c") {
        table_html(h, t, "tab-c2c", true);
    }
}

fn policies(
    h: &mut String,
    r: &crate::experiments::policies::PoliciesResult,
    tabs: &BTreeMap<String, Table>,
) {
    let groups: Vec<BarGroup> = r
        .workloads
        .iter()
        .map(|w| BarGroup {
            label: w.title.clone(),
            bars: r
                .policies
                .iter()
                .filter_map(|p| {
                    let c = r.cell(w.name, p.name)?;
                    let g = c.gbps.as_ref()?;
                    Some(Bar {
                        label: p.name.name().to_string(),
                        value: g.median,
                        tooltip: format!(
                            "{} / {}: {:.2} GB/s ±{:.1}%{}{}",
                            w.title,
                            p.title,
                            g.median,
                            g.rel_ci * 100.0,
                            c.local_percent
                                .map(|l| format!(", {l:.0}% of the pages local"))
                                .unwrap_or_default(),
                            if c.verified {
                                ""
                            } else {
                                "; placement NOT verified"
                            }
                        ),
                        flagged: !c.verified,
                    })
                })
                .collect(),
        })
        .collect();
    figure(
        h,
        bar_chart(
            "fig-policies",
            &format!(
                "Aggregate {} bandwidth per workload and memory policy",
                r.kernel.name()
            ),
            "bandwidth (GB/s)",
            &groups,
            None,
        ),
        "Bars in each group: local (first touch), interleave over every memory node, one node. Higher is better.",
    );
    for n in &r.notes {
        let _ = writeln!(
            h,
            "<p class=\"note\">{}.</p>",
            esc(sentence_case(n).trim_end_matches('.'))
        );
    }
    if let Some(t) = tabs.get("policies") {
        table_html(h, t, "tab-policies", false);
    }
}

fn environment(h: &mut String, doc: &ReportResults) {
    h.push_str(
        "<section id=\"sec-environment\">\n<h2>Environment</h2>\n<table id=\"tab-environment\">\n",
    );
    let mut row = |k: &str, v: String| {
        let _ = writeln!(
            h,
            "<tr><th class=\"l\">{}</th><td class=\"l\">{}</td></tr>",
            esc(k),
            esc(&v)
        );
    };
    match &doc.environment {
        None => row(
            "measured",
            "nothing: this report describes a topology file".into(),
        ),
        Some(e) => {
            row("host", e.hostname.clone());
            row("CPU", format!("{} ({})", e.cpu_model, e.cpu_vendor));
            row("kernel", format!("{} {}", e.kernel, e.kernel_version));
            row(
                "transparent huge pages",
                format!(
                    "{} (defrag {})",
                    e.thp_enabled.as_deref().unwrap_or("unknown"),
                    e.thp_defrag.as_deref().unwrap_or("unknown")
                ),
            );
            row(
                "automatic NUMA balancing",
                match e.numa_balancing {
                    Some(true) => "on".into(),
                    Some(false) => "off".into(),
                    None => "unknown".into(),
                },
            );
            row(
                "frequency governor",
                e.governor.clone().unwrap_or("unknown".into()),
            );
            row(
                "SMT",
                match e.smt_active {
                    Some(true) => "active".into(),
                    Some(false) => "off".into(),
                    None => "unknown".into(),
                },
            );
            row(
                "cgroup",
                format!(
                    "v{} {} · cpuset.cpus {} · cpuset.mems {} · memory.max {}",
                    e.cgroup
                        .version
                        .map(|v| v.to_string())
                        .unwrap_or("?".into()),
                    e.cgroup.path.as_deref().unwrap_or(""),
                    e.cgroup.cpuset_cpus.as_deref().unwrap_or("-"),
                    e.cgroup.cpuset_mems.as_deref().unwrap_or("-"),
                    e.cgroup.memory_max.as_deref().unwrap_or("-")
                ),
            );
            row(
                "versions",
                format!("numalab {}, hwloc {}", e.numalab_version, e.hwloc_version),
            );
        }
    }
    for r in &doc.runs {
        row(
            &format!("run {}", r.run),
            format!(
                "{} → {} · {} · {:.1} s of {:.0} s budget · {}{}",
                r.started_utc,
                r.finished_utc.as_deref().unwrap_or("(running)"),
                r.outcome,
                r.elapsed_s,
                r.budget_s,
                r.command_line.join(" "),
                if r.environment_changes.is_empty() {
                    String::new()
                } else {
                    format!(
                        " · changed since run 1: {}",
                        r.environment_changes.join("; ")
                    )
                }
            ),
        );
    }
    h.push_str("</table>\n</section>\n");
}
