//! Two results side by side (`numalab compare`): a table in text or one
//! self-contained HTML page, from a [`Comparison`].

use crate::compare::Comparison;
use numalab::text::escape::xml as escape;
use numalab::text::format::significant_padded;
use std::fmt::Write as _;

fn verdict(s: Option<bool>) -> &'static str {
    match s {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// A value with its unit (`91.40 ns`, `1.250x`), "-" where missing: four
/// significant digits (a second per pass and a GB/s alike).
fn with_unit(x: Option<f64>, unit: Option<&str>) -> String {
    match (x, unit) {
        (None, _) => "-".into(),
        (Some(v), Some("x")) => format!("{}x", significant_padded(v, 4)),
        (Some(v), Some(u)) => format!("{} {u}", significant_padded(v, 4)),
        (Some(v), None) => significant_padded(v, 4),
    }
}

/// A key figure with its unit and, where it has one, its interval's
/// relative half-width (`218.6 ns ±0.9%`).
fn key_value(x: Option<f64>, unit: &str, interval: Option<[f64; 2]>) -> String {
    let v = with_unit(x, Some(unit));
    match (x, interval) {
        (Some(m), Some([lo, hi])) if m != 0.0 => {
            let rel = (m - lo).abs().max((hi - m).abs()) / m.abs() * 100.0;
            format!("{v} ±{rel:.1}%")
        }
        _ => v,
    }
}

/// A key figure row's verdict: its intervals apart or not, or why it is
/// not compared.
fn key_verdict(k: &crate::compare::KeyFigureRow) -> &'static str {
    match (&k.not_comparable, k.beyond_intervals) {
        (Some(_), _) => "not comparable",
        (None, b) => verdict(b),
    }
}

fn ratio(r: Option<f64>) -> String {
    r.map_or("-".into(), |x| format!("{x:.3}"))
}

/// A row's verdict: beyond the spread or not, or why it is not compared.
fn row_verdict(r: &crate::compare::Row) -> String {
    match &r.not_comparable {
        Some(why) => format!("not comparable: {why}"),
        None => verdict(r.significant).to_string(),
    }
}

/// The comparison as text: what differs in how and where the two were
/// measured first (settings, then environment), then a report's key
/// figures with their units, then every figure.
pub fn render_text(c: &Comparison, a_name: &str, b_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "A: {a_name} ({})\nB: {b_name} ({})",
        c.command_a, c.command_b
    );
    for w in &c.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    for (title, diffs) in [
        (
            "configuration differences (figures measured under them are not comparable)",
            &c.configuration_differences,
        ),
        ("environment differences", &c.environment_differences),
    ] {
        if diffs.is_empty() {
            continue;
        }
        let kw = diffs.iter().map(|(k, _, _)| k.len()).max().unwrap_or(0);
        let _ = writeln!(s, "\n{title}:");
        for (k, x, y) in diffs {
            let _ = writeln!(s, "  {k:<kw$}  A: {x}\n  {:<kw$}  B: {y}", "");
        }
    }
    if !c.key_figures.is_empty() {
        let fw = c
            .key_figures
            .iter()
            .map(|k| k.figure.chars().count())
            .max()
            .unwrap_or(6);
        let _ = writeln!(s, "\nkey figures:");
        let _ = writeln!(
            s,
            "  {:<fw$} {:>21} {:>21} {:>8}  beyond 95% intervals",
            "figure", "A", "B", "B/A"
        );
        for k in &c.key_figures {
            let pad = fw - k.figure.chars().count() + k.figure.len();
            let value = |x, i: Option<[f64; 2]>| {
                let t = key_value(x, k.unit, i);
                // `±` is one column and two bytes.
                format!("{:>w$}", t, w = 21 + t.len() - t.chars().count())
            };
            let _ = writeln!(
                s,
                "  {:<pad$} {} {} {:>8}  {}",
                k.figure,
                value(k.a, k.a_interval),
                value(k.b, k.b_interval),
                ratio(k.ratio),
                key_verdict(k)
            );
        }
    }
    let w = c
        .rows
        .iter()
        .map(|r| r.metric.len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        s,
        "\n{:<w$} {:>14} {:>14} {:>8}  beyond spread",
        "metric", "A", "B", "B/A"
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "{:<w$} {:>14} {:>14} {:>8}  {}",
            r.metric,
            with_unit(r.a, r.unit),
            with_unit(r.b, r.unit),
            ratio(r.ratio),
            row_verdict(r)
        );
    }
    let n_sig = c
        .rows
        .iter()
        .filter(|r| r.significant == Some(true))
        .count();
    let n_not = c.rows.iter().filter(|r| r.not_comparable.is_some()).count();
    let _ = writeln!(
        s,
        "\n{} metric(s), {n_sig} differ by more than the measured spread{}",
        c.rows.len(),
        if n_not > 0 {
            format!(", {n_not} not comparable (measured under other settings)")
        } else {
            String::new()
        }
    );
    s
}

/// Rows of a (field, A, B) table.
fn difference_rows(diffs: &[(String, String, String)]) -> String {
    diffs
        .iter()
        .map(|(k, x, y)| {
            format!(
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                escape(k),
                escape(x),
                escape(y)
            )
        })
        .collect()
}

/// The comparison as one self-contained HTML page (inline CSS, light and
/// dark mode), in the text's order.
pub fn render_html(c: &Comparison, a_name: &str, b_name: &str) -> String {
    let mut rows = String::new();
    for r in &c.rows {
        let class = match (&r.not_comparable, r.significant, r.ratio) {
            (Some(_), _, _) => " class=\"nc\"",
            (None, Some(true), Some(x)) if x > 1.0 => " class=\"up\"",
            (None, Some(true), _) => " class=\"down\"",
            _ => "",
        };
        rows.push_str(&format!(
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&r.metric),
            escape(&with_unit(r.a, r.unit)),
            escape(&with_unit(r.b, r.unit)),
            ratio(r.ratio),
            escape(&row_verdict(r))
        ));
    }
    let mut keys = String::new();
    for k in &c.key_figures {
        keys.push_str(&format!(
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            if k.not_comparable.is_some() {
                " class=\"nc\""
            } else {
                ""
            },
            escape(&k.figure),
            escape(&key_value(k.a, k.unit, k.a_interval)),
            escape(&key_value(k.b, k.unit, k.b_interval)),
            ratio(k.ratio),
            key_verdict(k)
        ));
    }
    let keys = if keys.is_empty() {
        String::new()
    } else {
        format!(
            "<h2>Key figures</h2>\n<table id=\"table-key-figures\"><tr><th>figure</th><th>A</th><th>B</th><th>B/A</th><th>beyond 95% intervals</th></tr>\n{keys}</table>\n"
        )
    };
    let warnings: String = c
        .warnings
        .iter()
        .map(|w| format!("<p class=\"warn\">{}</p>\n", escape(w)))
        .collect();
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>numalab compare</title>
<style>
:root {{ color-scheme: light dark; --fg:#1a1a1a; --bg:#fff; --line:#ddd; --up:#1b7f3b; --down:#b3261e; --nc:#777; }}
@media (prefers-color-scheme: dark) {{ :root {{ --fg:#e6e6e6; --bg:#161616; --line:#333; --up:#6fdc8c; --down:#ff8a80; --nc:#999; }} }}
body {{ font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 2em; }}
table {{ border-collapse: collapse; }} td, th {{ border-bottom: 1px solid var(--line); padding: .25em .8em; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; font-family: ui-monospace, monospace; }}
tr.up td {{ color: var(--up); }} tr.down td {{ color: var(--down); }} tr.nc td {{ color: var(--nc); font-style: italic; }} .warn {{ color: var(--down); }}
</style></head><body>
<h1>numalab compare</h1>
<p>A: {a} ({ca})<br>B: {b} ({cb})</p>
{warnings}<h2>Configuration differences</h2>
<p>Figures measured under settings that differ are marked not comparable, not compared.</p>
<table id="table-configuration"><tr><th>setting</th><th>A</th><th>B</th></tr>
{config}</table>
<h2>Environment differences</h2>
<table id="table-environment"><tr><th>field</th><th>A</th><th>B</th></tr>
{env}</table>
{keys}<h2>Metrics</h2>
<p>B/A per figure (medians); "beyond spread": the difference exceeds the two 95% confidence half-widths added.</p>
<table id="table-metrics"><tr><th>metric</th><th>A</th><th>B</th><th>B/A</th><th>beyond spread</th></tr>
{rows}</table>
</body></html>
"#,
        a = escape(a_name),
        b = escape(b_name),
        ca = escape(&c.command_a),
        cb = escape(&c.command_b),
        config = difference_rows(&c.configuration_differences),
        env = difference_rows(&c.environment_differences),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::compare;
    use serde_json::json;

    #[test]
    fn both_views_show_each_figure_and_escape_names() {
        let fig = |m: f64| json!({"median": m, "best": m, "min": m, "max": m, "spread": 0.0, "rel_ci": 0.01});
        let a = json!({"command": "bench bandwidth", "gbps": fig(10.0)});
        let b = json!({"command": "bench bandwidth", "gbps": fig(12.5)});
        let c = compare(&a, &b);
        let t = render_text(&c, "a.json", "b.json");
        assert!(t.contains("gbps"), "{t}");
        assert!(t.contains("12.50") || t.contains("12.5"), "{t}");
        assert!(t.contains("1.250"), "ratio: {t}");
        let h = render_html(&c, "<script>'x'</script>", "b.json");
        assert!(!h.contains("<script>"), "{h}");
        assert!(h.contains("&lt;script&gt;&#39;x&#39;"), "{h}");
        assert_eq!(with_unit(Some(0.000123456), None), "0.0001235");
        assert_eq!(with_unit(Some(100.0), Some("ns")), "100.0 ns");
        assert_eq!(with_unit(Some(12345.6), Some("GB/s")), "12346 GB/s");
        assert_eq!(with_unit(Some(1.25), Some("x")), "1.250x");
        assert_eq!(with_unit(None, Some("ns")), "-");
    }

    #[test]
    fn key_figures_show_their_intervals_and_whether_they_lie_apart() {
        assert_eq!(
            key_value(Some(90.0), "ns", Some([88.2, 91.8])),
            "90.00 ns ±2.0%"
        );
        assert_eq!(key_value(Some(90.0), "ns", None), "90.00 ns");
        let row = |beyond, nc: Option<&str>| crate::compare::KeyFigureRow {
            key: "local_latency_ns".into(),
            figure: "Idle latency".into(),
            unit: "ns",
            a: Some(90.0),
            b: Some(99.0),
            ratio: Some(1.1),
            a_interval: Some([88.2, 91.8]),
            b_interval: Some([97.0, 101.0]),
            beyond_intervals: beyond,
            not_comparable: nc.map(str::to_string),
        };
        assert_eq!(key_verdict(&row(Some(true), None)), "yes");
        assert_eq!(key_verdict(&row(Some(false), None)), "no");
        assert_eq!(key_verdict(&row(None, Some("mode"))), "not comparable");
        let c = Comparison {
            command_a: "report".into(),
            command_b: "report".into(),
            key_figures: vec![row(Some(true), None)],
            rows: Vec::new(),
            configuration_differences: Vec::new(),
            environment_differences: Vec::new(),
            warnings: Vec::new(),
        };
        let text = render_text(&c, "a.json", "b.json");
        let line = text.lines().find(|l| l.contains("Idle latency")).unwrap();
        assert!(
            line.contains("90.00 ns ±2.0%")
                && line.contains("99.00 ns ±2.0%")
                && line.ends_with("yes"),
            "{text}"
        );
        assert!(text.contains("beyond 95% intervals"), "{text}");
    }
}
