//! report.html: the summary (plain sentences, advice, warnings, missing
//! parts), the key figures, the parts table, the machine, then one section
//! per part in run order, each written by the part's view into a
//! [`Section`]. Tables that the parts of one group share (the sweeps, the
//! loaded-latency targets) follow the group's last part. Every chart and
//! table has a stable id (`fig-*`, `tab-*`, listed in docs/report.md); a
//! part that is missing has `missing-<part>` instead, saying why.

use crate::csv::Table;
use crate::html::{close_page, csv_link, find, machine, open_page, table_html, Section};
use crate::model::PartName;
use crate::registry::REPORT;
use crate::results::{PartRecord, PartStatus, ReportResults};
use crate::summary::SummaryLine;
use crate::tables::report_tables;
use numalab::machine::Source;
use numalab::text::escape::xml as esc;
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

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
        if let Some(g) = REPORT.part(name).info().table_group {
            let last = all[i + 1..]
                .iter()
                .all(|&(n, _)| REPORT.part(n).info().table_group != Some(g));
            if last {
                group_tables(&mut h, g, &tabs.groups, &tabs.tables);
            }
        }
    }
    model_section(&mut h, doc, &tabs.tables);
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
        h.push_str("<table id=\"tab-key-figures\" class=\"key-figures\">\n<caption>Key figures</caption>\n<thead><tr><th class=\"l\">figure</th><th>value</th><th title=\"the 95% interval: the measurement's own, from its repetitions, widened by the host's drift over the report (see under the table)\">95% CI</th></tr></thead>\n<tbody>\n");
        for r in &keys {
            let _ = writeln!(
                h,
                "<tr data-keys=\"{}\"><td class=\"l\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.keys.join(" ")),
                esc(&r.figure),
                esc(&r.value),
                esc(r.interval.as_deref().unwrap_or(""))
            );
        }
        h.push_str("</tbody></table>\n");
        if let Some(note) = crate::key_table::interval_note(doc) {
            let _ = writeln!(
                h,
                "<p id=\"key-intervals\" class=\"note\">{}</p>",
                esc(&note)
            );
        }
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

/// How far a part ran past its budget, as a share of it, when it overran
/// by more than 10% and half a second (a part plans to end within its
/// budget; the planner's estimate is not exact).
fn overrun(budget_s: Option<f64>, elapsed_s: Option<f64>) -> Option<f64> {
    let (b, e) = (budget_s?, elapsed_s?);
    (b > 0.0 && e > b * 1.1 && e - b > 0.5).then(|| e / b - 1.0)
}

/// The "took s" cell: the seconds, flagged where the part overran.
fn took_cell(budget_s: Option<f64>, elapsed_s: Option<f64>) -> String {
    let took = elapsed_s.map(|x| format!("{x:.1}")).unwrap_or_default();
    match overrun(budget_s, elapsed_s) {
        Some(o) => format!(
            "<td class=\"status-bad overran\" title=\"ran {:.0}% past its budget\">{took} (over by {:.0}%)</td>",
            o * 100.0,
            o * 100.0
        ),
        None => format!("<td>{took}</td>"),
    }
}

/// Whether a part has a row in the parts table and a section: not when it
/// needs the live machine (a topology file's report), which the summary's
/// "Not in this report" already says in one line for all such parts.
fn shown(rec: &PartRecord) -> bool {
    rec.status != PartStatus::NeedsMachine
}

fn parts(h: &mut String, doc: &ReportResults, tabs: &[Table]) {
    if !doc.parts.iter().any(|(_, m)| shown(m)) {
        return;
    }
    h.push_str("<h2 id=\"parts\">Parts of this report</h2>\n<div class=\"scroll\"><table id=\"tab-parts\">\n<tr><th class=\"l\">part</th><th class=\"l\">status</th><th>budget s</th><th>took s</th><th>run</th><th class=\"l\">placement</th><th class=\"l\">note</th></tr>\n");
    for (p, m) in doc.parts.iter().filter(|(_, m)| shown(m)) {
        let _ = writeln!(
            h,
            "<tr><td class=\"l\"><a href=\"#sec-{}\">{}</a></td>{}<td>{}</td>{}<td>{}</td><td class=\"l\">{}</td><td class=\"l\">{}</td></tr>",
            p.name(),
            esc(REPORT.title(p)),
            status_cell(m.status),
            m.budget_s.map(|x| format!("{x:.1}")).unwrap_or_default(),
            took_cell(m.budget_s, m.elapsed_s),
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

/// A part's section: its heading and note, then its view when done, or why
/// it is missing.
fn part_section(
    h: &mut String,
    doc: &ReportResults,
    p: PartName,
    rec: &PartRecord,
    tabs: &[Table],
) {
    if rec.status == PartStatus::NotSelected || !shown(rec) {
        return;
    }
    let info = REPORT.part(p).info();
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
                "<p class=\"note\">Measured in {:.1} s (budget {:.1} s{}){}; the same as <code>{}</code>{}.</p>",
                rec.elapsed_s.unwrap_or(0.0),
                rec.budget_s.unwrap_or(0.0),
                overrun(rec.budget_s, rec.elapsed_s)
                    .map(|o| format!(
                        ", <span class=\"status-bad\">overran by {:.0}%</span>",
                        o * 100.0
                    ))
                    .unwrap_or_default(),
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
            let mut s = Section::new(&mut *h, tabs, &doc.machine);
            REPORT.part(p).html(r, &mut s);
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

/// The model's predicted vs measured view, when the report has one.
fn model_section(h: &mut String, doc: &ReportResults, tabs: &[Table]) {
    let Some(model) = &doc.model else { return };
    let _ = writeln!(
        h,
        "<section id=\"sec-model\">\n<h2>{}</h2>",
        esc(crate::predicted::TITLE)
    );
    let _ = writeln!(
        h,
        "<p class=\"note\">The model of <code>numalab model --from results.json</code> (docs/model.md): memory controllers and links with capacities fitted from this report, threads sharing them as a closed queueing network. Each measured case is predicted without being fitted to it.</p>"
    );
    let _ = writeln!(h, "<pre>{}</pre>", esc(&crate::predicted::text(model)));
    if let Some(t) = find(tabs, "model-check") {
        table_html(h, t, true);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topology_file_names_what_needs_the_machine_once() {
        let m = crate::fixture("qemu-quartet-4n2c-ring.xml");
        let mut doc = crate::session::new_document(
            &REPORT,
            &m,
            None,
            crate::results::Mode::Quick,
            10.0,
            64 << 20,
            &REPORT.all(),
        );
        doc.summary = crate::summarize::summarize(&doc);
        let h = render(&doc);
        let why = "needs the live machine: this report describes the topology file qemu-quartet-4n2c-ring.xml";
        assert_eq!(h.matches(why).count(), 1, "{h}");
        assert!(h.contains("id=\"summary-missing\""), "{h}");
        assert!(h.contains("<section id=\"sec-machine\">"), "{h}");
        for gone in [
            "<section id=\"sec-latency-matrix\">",
            "id=\"tab-parts\"",
            "missing-sweep",
        ] {
            assert!(!h.contains(gone), "{gone}");
        }
    }

    #[test]
    fn parts_that_overran_their_budget_are_flagged() {
        // Within 10% or half a second: not an overrun.
        assert_eq!(overrun(Some(10.0), Some(10.9)), None);
        assert_eq!(overrun(Some(2.0), Some(2.4)), None);
        assert_eq!(overrun(None, Some(30.0)), None);
        assert_eq!(overrun(Some(10.0), None), None);
        let o = overrun(Some(10.0), Some(14.0)).unwrap();
        assert!((o - 0.4).abs() < 1e-9);
        assert_eq!(took_cell(Some(10.0), Some(10.2)), "<td>10.2</td>");
        assert_eq!(
            took_cell(Some(10.0), Some(14.0)),
            "<td class=\"status-bad overran\" title=\"ran 40% past its budget\">14.0 (over by 40%)</td>"
        );
    }
}
