//! Two results side by side (`numalab compare`): a table in text or one
//! self-contained HTML page, from a [`Comparison`].

use crate::compare::Comparison;
use numalab::text::escape::xml as escape;
use numalab::text::format::significant_padded;
use std::fmt::Write as _;

/// Four significant digits (a second per pass and a GB/s alike).
fn num(x: Option<f64>) -> String {
    x.map_or_else(|| "-".into(), |v| significant_padded(v, 4))
}

fn verdict(s: Option<bool>) -> &'static str {
    match s {
        Some(true) => "yes",
        Some(false) => "no",
        None => "-",
    }
}

/// The comparison as a text table.
pub fn render_text(c: &Comparison, a_name: &str, b_name: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "A: {a_name} ({})\nB: {b_name} ({})",
        c.command_a, c.command_b
    );
    if !c.environment_differences.is_empty() {
        let _ = writeln!(s, "\nenvironment differences:");
        for (k, x, y) in &c.environment_differences {
            let _ = writeln!(s, "  {k:<16} A: {x}\n  {:<16} B: {y}", "");
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
        "\n{:<w$} {:>12} {:>12} {:>8}  beyond spread",
        "metric", "A", "B", "B/A"
    );
    for r in &c.rows {
        let _ = writeln!(
            s,
            "{:<w$} {:>12} {:>12} {:>8}  {}",
            r.metric,
            num(r.a),
            num(r.b),
            r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
            verdict(r.significant)
        );
    }
    let n_sig = c
        .rows
        .iter()
        .filter(|r| r.significant == Some(true))
        .count();
    let _ = writeln!(
        s,
        "\n{} metric(s), {n_sig} differ by more than the measured spread",
        c.rows.len()
    );
    s
}

/// The comparison as one self-contained HTML page (inline CSS, light and
/// dark mode).
pub fn render_html(c: &Comparison, a_name: &str, b_name: &str) -> String {
    let mut rows = String::new();
    for r in &c.rows {
        let class = match (r.significant, r.ratio) {
            (Some(true), Some(x)) if x > 1.0 => " class=\"up\"",
            (Some(true), _) => " class=\"down\"",
            _ => "",
        };
        rows.push_str(&format!(
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(&r.metric),
            num(r.a),
            num(r.b),
            r.ratio.map_or("-".into(), |x| format!("{x:.3}")),
            verdict(r.significant)
        ));
    }
    let mut env = String::new();
    for (k, x, y) in &c.environment_differences {
        env.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            escape(k),
            escape(x),
            escape(y)
        ));
    }
    let warnings: String = c
        .warnings
        .iter()
        .map(|w| format!("<p class=\"warn\">{}</p>\n", escape(w)))
        .collect();
    format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>numalab compare</title>
<style>
:root {{ color-scheme: light dark; --fg:#1a1a1a; --bg:#fff; --line:#ddd; --up:#1b7f3b; --down:#b3261e; }}
@media (prefers-color-scheme: dark) {{ :root {{ --fg:#e6e6e6; --bg:#161616; --line:#333; --up:#6fdc8c; --down:#ff8a80; }} }}
body {{ font: 14px/1.4 system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 2em; }}
table {{ border-collapse: collapse; }} td, th {{ border-bottom: 1px solid var(--line); padding: .25em .8em; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; font-family: ui-monospace, monospace; }}
tr.up td {{ color: var(--up); }} tr.down td {{ color: var(--down); }} .warn {{ color: var(--down); }}
</style></head><body>
<h1>numalab compare</h1>
<p>A: {a} ({ca})<br>B: {b} ({cb})</p>
{warnings}<h2>Environment differences</h2>
<table id="table-environment"><tr><th>field</th><th>A</th><th>B</th></tr>
{env}</table>
<h2>Metrics</h2>
<p>B/A per figure (medians); "beyond spread": the difference exceeds the two 95% confidence half-widths added.</p>
<table id="table-metrics"><tr><th>metric</th><th>A</th><th>B</th><th>B/A</th><th>beyond spread</th></tr>
{rows}</table>
</body></html>
"#,
        a = escape(a_name),
        b = escape(b_name),
        ca = escape(&c.command_a),
        cb = escape(&c.command_b),
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
        assert_eq!(num(Some(0.000123456)), "0.0001235");
        assert_eq!(num(Some(100.0)), "100.0");
        assert_eq!(num(Some(12345.6)), "12346");
        assert_eq!(num(None), "-");
    }
}
