//! The pieces of numalab's self-contained HTML pages (inline CSS and SVG,
//! no script, no network; readable in light and dark mode, printable):
//! the page's head and styles, tables with their CSV links (in words and
//! units on the page: `readable.rs`; raw in the CSV files), figures, the
//! machine's section (`machine.rs`: node graph, distances, caches, HMAT,
//! devices) and [`Section`], where a part's view writes its charts and
//! tables. report.html itself is put together in [`crate::page`].

pub(crate) mod machine;
pub(crate) mod readable;

use crate::csv::Table;
use crate::svg;
use numalab::machine::Machine;
use numalab::text::escape::xml as esc;
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

pub(crate) fn find<'t>(tabs: &'t [Table], name: &str) -> Option<&'t Table> {
    tabs.iter().find(|t| t.name == name)
}

/// "Raw numbers: <link to the table's CSV>" after a chart or table.
pub(crate) fn csv_link(h: &mut String, t: &Table) {
    let _ = writeln!(
        h,
        "<p class=\"note\">Raw numbers: <a href=\"{}\">{}</a> ({}).</p>",
        esc(&t.file_name()),
        esc(&t.file_name()),
        rows(t.rows.len())
    );
}

pub(crate) fn rows(n: usize) -> String {
    numalab::text::format::plural(n, "row", "rows")
}

/// A table as HTML with id `tab-<name>`, in a `<details>` when `collapsed`.
pub(crate) fn table_html(h: &mut String, t: &Table, collapsed: bool) {
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
    // In words, with units; the CSV file keeps the raw names and values.
    for c in &t.header {
        let _ = write!(
            h,
            "<th title=\"{}\">{}</th>",
            esc(c),
            esc(&readable::header(c))
        );
    }
    h.push_str("</tr>\n");
    for r in &t.rows {
        h.push_str("<tr>");
        for (i, c) in r.iter().enumerate() {
            let numeric = c.parse::<f64>().is_ok() || c.is_empty();
            let column = t.header.get(i).map_or("", String::as_str);
            let _ = write!(
                h,
                "<td{}>{}</td>",
                if numeric { "" } else { " class=\"l\"" },
                esc(&readable::cell(column, c))
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

pub(crate) fn figure(h: &mut String, svg: String, caption: &str) {
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
    /// A section writing into `h`, whose tables (shown with
    /// [`Section::table`]) are `tables`.
    pub(crate) fn new(h: &'a mut String, tables: &'a [Table], machine: &'a Machine) -> Self {
        Section { h, tables, machine }
    }

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
