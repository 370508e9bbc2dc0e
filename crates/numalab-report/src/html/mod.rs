//! report.html: one self-contained file (inline CSS and SVG, no script, no
//! network) that opens from disk in any browser, readable in light and dark
//! mode and printable.
//!
//! Layout: the summary (plain sentences, advice, warnings, missing parts),
//! the parts table, the machine (`machine.rs`: node graph, distances, caches,
//! HMAT, devices), then one section per part in run order: the part's view
//! writes its charts and tables into a [`Section`]. Tables that the parts of
//! one group share (the sweeps, the loaded-latency targets) follow the
//! group's last part. Every chart and table has a stable id (`fig-*`,
//! `tab-*`, listed in docs/report.md); a part that is missing has
//! `missing-<part>` instead, saying why.

mod machine;

use crate::csv::{report_tables, Table};
use crate::part::PartName;
use crate::results::{PartRecord, PartStatus, ReportResults};
use crate::summary::SummaryLine;
use crate::svg;
use numalab::machine::{Machine, Source};
use numalab::text::escape::xml as esc;
use numalab::text::format::bytes as format_bytes;
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
    let tabs = report_tables(doc);
    let mut h = String::with_capacity(1 << 20);
    let title = page_title(doc);
    open_page(&mut h, &title, &doc.numalab_version);
    header(&mut h, doc, &title);
    summary(&mut h, doc);
    parts(&mut h, doc, &tabs.tables);
    machine::section(&mut h, &doc.machine, &tabs.tables);
    let all: Vec<(PartName, &PartRecord)> = doc.parts.iter().collect();
    for (i, &(name, rec)) in all.iter().enumerate() {
        part_section(&mut h, doc, name, rec, &tabs.tables);
        // Tables the parts of a group share follow the group's last part.
        if let Some(g) = name.part().info().table_group {
            let last = all[i + 1..]
                .iter()
                .all(|(n, _)| n.part().info().table_group != Some(g));
            if last {
                group_tables(&mut h, g, &tabs.groups, &tabs.tables);
            }
        }
    }
    environment(&mut h, doc);
    let _ = writeln!(
        h,
        "<p class=\"note\">Made by numalab {} (results schema {} {}). Every number is in <a href=\"results.json\">results.json</a> and the CSV files beside this page.</p>",
        esc(&doc.numalab_version),
        esc(&doc.schema),
        esc(&doc.schema_version)
    );
    close_page(&mut h);
    h
}

/// Opens a self-contained page: its head with `title`, the page's styles
/// and the charts' ([`svg::CHART_CSS`]), then its body's `<main>`; text
/// in it is escaped here. [`close_page`] closes it.
pub(crate) fn open_page(h: &mut String, title: &str, numalab_version: &str) {
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"generator\" content=\"numalab {}\">\n<title>{}</title>\n<style>{PAGE_CSS}{}</style>\n</head>\n<body>\n<main>\n",
        esc(numalab_version),
        esc(title),
        svg::CHART_CSS
    );
}

/// Closes what [`open_page`] opened.
pub(crate) fn close_page(h: &mut String) {
    h.push_str("</main>\n</body>\n</html>\n");
}

/// `numalab report: HOST` (or the topology file's name).
fn page_title(doc: &ReportResults) -> String {
    let host = doc
        .environment
        .as_ref()
        .map(|e| e.hostname.clone())
        .unwrap_or_default();
    match &doc.machine.source {
        Source::File { path } => format!(
            "numalab report: {}",
            path.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string())
        ),
        Source::Live if !host.is_empty() => format!("numalab report: {host}"),
        Source::Live => "numalab report".to_string(),
    }
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
    if let Some(b) = &s.banner {
        let _ = writeln!(
            h,
            "<div class=\"warn\" id=\"summary-emulated\"><strong>Emulated CPU.</strong> {}{}</div>",
            esc(b),
            if s.withheld.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} timing statement{} withheld; in results.json <code>summary.withheld</code>.)",
                    s.withheld.len(),
                    if s.withheld.len() == 1 { "" } else { "s" }
                )
            }
        );
    }
    let keys = crate::key_table::rows(doc);
    if !keys.is_empty() {
        h.push_str("<table id=\"tab-key-figures\" class=\"key-figures\">\n<caption>Key figures</caption>\n<thead><tr><th class=\"l\">figure</th><th>value</th></tr></thead>\n<tbody>\n");
        for r in &keys {
            let _ = writeln!(
                h,
                "<tr data-keys=\"{}\"><td class=\"l\">{}</td><td>{}</td></tr>",
                esc(&r.keys.join(" ")),
                esc(&r.figure),
                esc(&r.value)
            );
        }
        h.push_str("</tbody></table>\n");
    }
    let mut sentences = |heading: &str, id: &str, lines: &[SummaryLine]| {
        if lines.is_empty() {
            return;
        }
        let _ = writeln!(h, "{heading}<ul id=\"{id}\">");
        for f in lines {
            // Where the sentence's numbers come from, on hover.
            let sources = s
                .claims
                .iter()
                .find(|c| c.text == f.text)
                .map(|c| c.sources())
                .filter(|t| !t.is_empty())
                .map(|t| format!(" title=\"{}\"", esc(&t)))
                .unwrap_or_default();
            let _ = writeln!(
                h,
                "<li data-topic=\"{}\"{sources}>{}</li>",
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

fn parts(h: &mut String, doc: &ReportResults, tabs: &[Table]) {
    h.push_str("<h2 id=\"parts\">Parts of this report</h2>\n<div class=\"scroll\"><table id=\"tab-parts\">\n<tr><th class=\"l\">part</th><th class=\"l\">status</th><th>budget s</th><th>took s</th><th>run</th><th class=\"l\">placement</th><th class=\"l\">note</th></tr>\n");
    for (p, m) in doc.parts.iter() {
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
    if let Some(t) = find(tabs, "parts") {
        csv_link(h, t);
    }
}

fn find<'t>(tabs: &'t [Table], name: &str) -> Option<&'t Table> {
    tabs.iter().find(|t| t.name == name)
}

/// "Raw numbers: <link to the table's CSV>" after a chart or table.
fn csv_link(h: &mut String, t: &Table) {
    let _ = writeln!(
        h,
        "<p class=\"note\">Raw numbers: <a href=\"{}\">{}</a> ({}).</p>",
        esc(&t.file_name()),
        esc(&t.file_name()),
        rows(t.rows.len())
    );
}

fn rows(n: usize) -> String {
    numalab::text::format::plural(n, "row", "rows")
}

/// A table as HTML with id `tab-<name>`, in a `<details>` when `collapsed`.
fn table_html(h: &mut String, t: &Table, collapsed: bool) {
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
        "<div class=\"scroll\"><table id=\"tab-{}\" aria-label=\"{}\">\n<tr>",
        esc(&t.name),
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
        csv_link(h, t);
    }
}

fn figure(h: &mut String, svg: String, caption: &str) {
    let _ = write!(
        h,
        "<figure class=\"chart\">\n{svg}\n<figcaption>{}</figcaption>\n</figure>\n",
        esc(caption)
    );
}

/// `node 4 (CPU-less)` or `node 0`: how charts and tables name a node.
pub fn node_label(m: &Machine, n: u32) -> String {
    if m.node(n).is_some_and(|x| x.cpuless) {
        format!("node {n} (CPU-less)")
    } else {
        format!("node {n}")
    }
}

/// Where a part's view writes its part of the page: charts, tables of the
/// report (by name), notes, and HTML of its own.
pub struct Section<'a> {
    h: &'a mut String,
    tables: &'a [Table],
    /// The machine of the report.
    pub machine: &'a Machine,
}

impl<'a> Section<'a> {
    /// A section of a page other than the report (no report tables).
    pub(crate) fn standalone(h: &'a mut String, machine: &'a Machine) -> Self {
        Section {
            h,
            tables: &[],
            machine,
        }
    }

    /// A section writing into `h`, for a view's own tests.
    #[cfg(test)]
    pub(crate) fn for_tests(h: &'a mut String, tables: &'a [Table], machine: &'a Machine) -> Self {
        Section { h, tables, machine }
    }

    /// A chart (an SVG from [`crate::svg`]) with its caption.
    pub fn figure(&mut self, svg: String, caption: &str) {
        figure(self.h, svg, caption);
    }

    /// The report's table `name` (id `tab-<name>`), open with a link to its
    /// CSV, or collapsed; nothing when the report has no such table.
    pub fn table(&mut self, name: &str, collapsed: bool) {
        if let Some(t) = find(self.tables, name) {
            table_html(self.h, t, collapsed);
        }
    }

    /// The link to table `name`'s CSV file.
    pub fn csv_link(&mut self, name: &str) {
        if let Some(t) = find(self.tables, name) {
            csv_link(self.h, t);
        }
    }

    /// A note in small print (text, escaped here).
    pub fn note(&mut self, text: &str) {
        let _ = writeln!(self.h, "<p class=\"note\">{}</p>", esc(text));
    }

    /// HTML the view built itself (text in it must be escaped with
    /// [`numalab::text::escape::xml`]).
    pub fn html(&mut self, html: &str) {
        self.h.push_str(html);
    }
}

/// A part's section: its heading and note, then its view when done, or why
/// it is missing.
fn part_section(
    h: &mut String,
    doc: &ReportResults,
    p: PartName,
    rec: &PartRecord,
    tabs: &[Table],
) {
    if rec.status == PartStatus::NotSelected {
        return;
    }
    let info = p.part().info();
    let _ = write!(
        h,
        "<section id=\"sec-{}\">\n<h2>{}</h2>\n",
        p.name(),
        esc(info.title)
    );
    match rec.done() {
        Some(r) => {
            let _ = writeln!(
                h,
                "<p class=\"note\">Measured in {:.1} s (budget {:.1} s){}; the same as <code>{}</code>{}.</p>",
                rec.elapsed_s.unwrap_or(0.0),
                rec.budget_s.unwrap_or(0.0),
                rec.run
                    .filter(|&r| r > 1)
                    .map(|r| format!(" in run {r}"))
                    .unwrap_or_default(),
                esc(info.command),
                rec.reason
                    .as_deref()
                    .map(|r| format!("; {}", esc(r)))
                    .unwrap_or_default()
            );
            let mut s = Section {
                h: &mut *h,
                tables: tabs,
                machine: &doc.machine,
            };
            p.part().html(r, &mut s);
        }
        None => {
            let _ = writeln!(
                h,
                "<p class=\"missing\" id=\"missing-{}\">Not in this report ({}): {}</p>",
                p.name(),
                rec.status.name(),
                esc(rec.reason.as_deref().unwrap_or("not measured yet"))
            );
        }
    }
    h.push_str("</section>\n");
}

/// The tables a group of parts shares, collapsed, in `sec-<group>-tables`.
fn group_tables(h: &mut String, group: &str, groups: &[(&str, Vec<String>)], tabs: &[Table]) {
    let Some((_, names)) = groups.iter().find(|(g, _)| *g == group) else {
        return;
    };
    if names.is_empty() {
        return;
    }
    let _ = writeln!(h, "<section id=\"sec-{group}-tables\">");
    for n in names {
        if let Some(t) = find(tabs, n) {
            table_html(h, t, true);
        }
    }
    h.push_str("</section>\n");
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
