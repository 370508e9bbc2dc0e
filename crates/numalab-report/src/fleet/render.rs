//! A fleet as text (fleet.txt and the terminal), a page (fleet.html) and a
//! table with a row per node (fleet.csv).

use super::{num, Fleet, NodeVerdict, Verdict};
use crate::csv::Table;
use numalab::text::escape::xml;
use std::fmt::Write;

/// The most nodes the text and the page list one by one: every node that
/// does not conform comes first, and fleet.csv has them all.
pub const NODES_LISTED: usize = 2000;

/// Nodes in the order they are shown: those that do not conform first
/// (failed, outliers worst first, undecided), then the rest in name order.
fn shown(f: &Fleet) -> Vec<&NodeVerdict> {
    let rank = |v: Verdict| match v {
        Verdict::Failed => 0,
        Verdict::Outlier => 1,
        Verdict::Undecided => 2,
        Verdict::Conforms => 3,
    };
    let mut v: Vec<&NodeVerdict> = f.nodes.iter().collect();
    v.sort_by(|a, b| {
        rank(a.verdict)
            .cmp(&rank(b.verdict))
            .then(b.severity.total_cmp(&a.severity))
    });
    v
}

pub fn render_text(f: &Fleet) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "Fleet of {} nodes", f.nodes_total);
    for l in &f.summary {
        let _ = writeln!(s, "  {l}");
    }
    let _ = writeln!(s, "\nJudged {}.", f.rule.text);
    let _ = writeln!(
        s,
        "\n{:<80} {:<5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>8}",
        "Key figure", "unit", "nodes", "median", "MAD", "min", "max", "outliers"
    );
    for x in &f.figures {
        let Some(sp) = x.spread else { continue };
        let _ = writeln!(
            s,
            "{:<80} {:<5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>8}",
            x.label,
            x.unit,
            sp.n,
            num(sp.median),
            num(sp.mad),
            num(sp.min),
            num(sp.max),
            x.outliers.len()
        );
    }
    let differing: Vec<_> = f.settings.iter().filter(|x| x.differs()).collect();
    if !differing.is_empty() {
        let _ = writeln!(s, "\nSettings that differ between nodes:");
        for x in differing {
            let _ = writeln!(s, "  {}:", x.what);
            for v in &x.values {
                let more = v.count.saturating_sub(v.nodes.len());
                let _ = writeln!(
                    s,
                    "    {:<30} {:>6} node(s): {}{}",
                    v.value,
                    v.count,
                    v.nodes.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                );
            }
        }
    }
    let _ = writeln!(s, "\nNodes:");
    for n in shown(f).into_iter().take(NODES_LISTED) {
        let _ = writeln!(
            s,
            "  {:<24} {:<10} {}",
            n.name,
            n.verdict.word(),
            n.reasons.join("; ")
        );
    }
    if f.nodes.len() > NODES_LISTED {
        let _ = writeln!(
            s,
            "  ... {} more conforming nodes (fleet.csv lists every node)",
            f.nodes.len() - NODES_LISTED
        );
    }
    s
}

/// fleet.csv: one row per node, its verdict, reasons, settings and figures.
pub fn render_csv(f: &Fleet) -> String {
    let mut header: Vec<String> = vec!["node".into(), "verdict".into(), "reasons".into()];
    header.extend(super::SETTINGS.iter().map(|s| s.name.to_string()));
    header.extend(f.figures.iter().map(|x| x.name.clone()));
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut t = Table::new("fleet", "one row per node", &header);
    for n in &f.nodes {
        let mut row: Vec<String> = vec![
            n.name.clone(),
            n.verdict.word().into(),
            n.reasons.join("; "),
        ];
        row.extend(
            super::SETTINGS
                .iter()
                .map(|s| n.settings.get(s.name).cloned().unwrap_or_default()),
        );
        row.extend(f.figures.iter().map(|x| {
            n.figures
                .get(&x.name)
                .map(|v| v.to_string())
                .unwrap_or_default()
        }));
        t.rows.push(row);
    }
    t.to_csv()
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}td.n{text-align:right;font-variant-numeric:tabular-nums}tr.outlier td{background:#fde8e8}tr.failed td{background:#eee}tr.undecided td{background:#fff6d8}p.rule{color:#444}";

/// fleet.html: self-contained.
pub fn render_html(f: &Fleet) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>numalab fleet: {} nodes</title><style>{STYLE}</style></head><body><h1>Fleet of {} nodes</h1><ul id=\"summary\">",
        f.nodes_total, f.nodes_total
    );
    for l in &f.summary {
        let _ = write!(h, "<li>{}</li>", xml(l));
    }
    let _ = write!(
        h,
        "</ul><p class=\"rule\">Judged {}.</p>",
        xml(&f.rule.text)
    );
    h.push_str("<h2>Key figures</h2><table id=\"figures\"><tr><th>figure</th><th>unit</th><th>nodes</th><th>median</th><th>MAD</th><th>min</th><th>max</th><th>outliers</th></tr>");
    for x in &f.figures {
        let Some(sp) = x.spread else { continue };
        let outliers = x
            .outliers
            .iter()
            .take(20)
            .map(|o| format!("{} ({}, z {:+.1})", o.node, num(o.value), o.z))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            xml(&x.label),
            xml(&x.unit),
            sp.n,
            num(sp.median),
            num(sp.mad),
            num(sp.min),
            num(sp.max),
            xml(&outliers)
        );
    }
    h.push_str("</table><h2>Settings</h2><table id=\"settings\"><tr><th>setting</th><th>values (nodes)</th></tr>");
    for s in &f.settings {
        let values = s
            .values
            .iter()
            .map(|v| {
                let names = if s.differs() {
                    format!(": {}", v.nodes.join(", "))
                } else {
                    String::new()
                };
                format!("<b>{}</b> on {}{}", xml(&v.value), v.count, xml(&names))
            })
            .collect::<Vec<_>>()
            .join("<br>");
        let _ = write!(
            h,
            "<tr{}><td>{}</td><td>{}</td></tr>",
            if s.differs() {
                " class=\"undecided\""
            } else {
                ""
            },
            xml(&s.what),
            values
        );
    }
    h.push_str(
        "</table><h2>Nodes</h2><table id=\"nodes\"><tr><th>node</th><th>verdict</th><th>why</th>",
    );
    for x in &f.figures {
        if x.spread.is_some() {
            let _ = write!(h, "<th>{} ({})</th>", xml(&x.label), xml(&x.unit));
        }
    }
    h.push_str("</tr>");
    for n in shown(f).into_iter().take(NODES_LISTED) {
        let _ = write!(
            h,
            "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td>",
            n.verdict.word(),
            xml(&n.name),
            n.verdict.word(),
            xml(&n.reasons.join("; "))
        );
        for x in f.figures.iter().filter(|x| x.spread.is_some()) {
            let v = n.figures.get(&x.name).map(|v| num(*v)).unwrap_or_default();
            let _ = write!(h, "<td class=\"n\">{v}</td>");
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    if f.nodes.len() > NODES_LISTED {
        let _ = write!(
            h,
            "<p>{} more conforming nodes are in fleet.csv and fleet.json.</p>",
            f.nodes.len() - NODES_LISTED
        );
    }
    h.push_str("</body></html>\n");
    h
}
