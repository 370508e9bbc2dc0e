//! The report as plain text: the summary the terminal shows at the end of
//! `numalab report`, and DIR/report.txt, which adds every part's text view
//! (what the part's own command prints), for terminals, mail and diffs.

use crate::registry::REPORT;
use crate::results::ReportResults;
use std::fmt::Write;

/// The first line: whether the report is complete, and how long it took.
pub fn status_line(doc: &ReportResults) -> String {
    let state = if !doc.machine.is_live() {
        "the machine model of a topology file (nothing measured)".to_string()
    } else if doc.complete {
        "complete".to_string()
    } else {
        format!("incomplete ({} part(s) missing)", doc.missing().len())
    };
    let took = doc
        .runs
        .last()
        .map(|r| format!(" in {:.1} s (budget {:.0} s)", r.elapsed_s, r.budget_s))
        .unwrap_or_default();
    format!("numalab report: {state}{took}")
}

/// The status line, the headline, the key-figures table, the findings,
/// advice, warnings and what is missing.
pub fn summary(doc: &ReportResults) -> String {
    let s = &doc.summary;
    let mut out = String::new();
    let _ = writeln!(out, "{}", status_line(doc));
    if let Some(b) = &s.banner {
        let _ = writeln!(out, "EMULATED CPU: {b}");
    }
    let _ = writeln!(out, "{}", s.headline);
    let keys = crate::key_table::rows(doc);
    if !keys.is_empty() {
        let _ = writeln!(out, "key figures:");
        let width = keys
            .iter()
            .map(|r| r.figure.chars().count())
            .max()
            .unwrap_or(0);
        for r in &keys {
            let line = format!("  {:<width$}  {}", r.figure, r.value);
            match &r.interval {
                Some(i) => {
                    let _ = writeln!(out, "{line}  (95% CI {i})");
                }
                None => {
                    let _ = writeln!(out, "{line}");
                }
            }
        }
        if let Some(note) = crate::key_table::interval_note(doc) {
            let _ = writeln!(out, "  {note}");
        }
    }
    for f in &s.findings {
        let _ = writeln!(out, "  - {}", f.text);
    }
    if !s.advice.is_empty() {
        let _ = writeln!(out, "advice:");
        for f in &s.advice {
            let _ = writeln!(out, "  - {}", f.text);
        }
    }
    for w in &s.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for w in &s.missing {
        let _ = writeln!(out, "missing: {w}");
    }
    if !s.withheld.is_empty() {
        let _ = writeln!(
            out,
            "withheld: {} timing statement(s) (emulated CPU; in results.json summary.withheld)",
            s.withheld.len()
        );
    }
    out
}

/// The whole report: the summary, then each part done, under its title,
/// as its command prints it.
pub fn render(doc: &ReportResults) -> String {
    let mut out = summary(doc);
    for (name, rec) in doc.parts.iter() {
        let Some(r) = rec.done() else { continue };
        let title = REPORT.part(name).info().title;
        let _ = writeln!(out, "\n== {title} ({name}) ==\n");
        out.push_str(&REPORT.part(name).text(r, &doc.machine));
    }
    if let Some(model) = &doc.model {
        let _ = writeln!(out, "\n== {} (model) ==\n", crate::predicted::TITLE);
        out.push_str(&crate::predicted::text(model));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::results::{Mode, PartStatus};
    use crate::session::new_document;

    /// A new quick report of the Quartet topology file, every part selected.
    fn quick_quartet() -> ReportResults {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        new_document(
            &REPORT,
            &m,
            None,
            Mode::Quick,
            60.0,
            64 << 20,
            &REPORT.all(),
        )
    }

    #[test]
    fn the_text_report_has_the_summary_and_each_done_part() {
        let mut doc = quick_quartet();
        let t = render(&doc);
        assert!(
            t.starts_with("numalab report: the machine model of a topology file"),
            "{t}"
        );
        assert!(t.contains("4 NUMA nodes"), "{t}");
        assert!(!t.contains("=="), "no part is done: {t}");
        let sizes = REPORT.find("sizes").unwrap();
        let result = REPORT
            .part(sizes)
            .decode(serde_json::json!({
                "cpu": 0, "kernels": ["read", "write", "copy"], "pattern": "random",
                "caches": [{"name": "L1", "bytes": 32768}],
                "points": [
                    {"bytes": 16384, "fits_in": "L1", "gbps": [100.0, 50.0, 60.0], "latency_ns": 1.2, "verified": true},
                    {"bytes": 1048576, "fits_in": "memory", "gbps": [10.0, 5.0, 6.0], "latency_ns": 90.0, "verified": true}
                ],
                "warnings": []
            }))
            .unwrap();
        let rec = doc.parts.get_mut(sizes);
        rec.status = PartStatus::Done;
        rec.result = Some(result);
        let t = render(&doc);
        assert!(
            t.contains("\n== Working-set size sweep (sizes) ==\n"),
            "{t}"
        );
        assert!(t.contains("working-set sweep on CPU 0"), "{t}");
        assert!(t.contains("-- L1 boundary"), "{t}");
    }

    #[test]
    fn the_key_figures_follow_the_headline_unless_the_cpu_is_emulated() {
        let mut doc = quick_quartet();
        assert!(!summary(&doc).contains("key figures:"));
        doc.summary.key_figures.set("local_latency_ns", Some(88.6));
        doc.summary
            .key_figures
            .set("c2c_across_nodes_ns", Some(140.2));
        let t = summary(&doc);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[2], "key figures:", "{t}");
        assert!(
            lines[3].starts_with("  Idle latency, local memory") && lines[3].ends_with("  89 ns"),
            "{t}"
        );
        assert!(
            lines[4].starts_with("  Core-to-core latency, across nodes")
                && lines[4].ends_with("  140 ns"),
            "{t}"
        );
        doc.summary.banner = Some("TCG".into());
        assert!(!summary(&doc).contains("key figures:"));
    }
}
