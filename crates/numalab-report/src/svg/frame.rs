//! The frame every chart shares: the root `<svg>` element with its
//! accessible and visible title, the small chart that says "no data",
//! tooltips, how coordinates are written, legend rows, ids, and the CSS of
//! the classes the charts use.

use super::escape;
use super::metrics::text_w;
use std::fmt::{self, Write as _};

/// CSS rules for the classes the charts use, to inline in the page once.
///
/// Refers only to the custom properties `--fg`, `--muted`, `--bg` and
/// `--s0`..`--s7`, which the page defines (for light and dark mode). Class
/// names: `chart` (root), `chart-title`, `sub`, `tick`, `axis-label`, `axis`,
/// `grid`, `grid-minor`, `s0`..`s7`, `line`, `dashed`, `pt`, `marker`,
/// `marker-label`, `mark`, `mark-label`, `halo`, `legend`, `bar`, `flagged`,
/// `hatch`, `hatch-overlay`, `flag`, `whisker`, `series-legend`, `ref`, `group-rule`, `hm-cell`,
/// `hm-none`, `hm-text`, `hm-sep`, `edge`, `edge-hit`, `edge-label-bg`,
/// `edge-label`, `node`, `cpuless`, `swatch-node`, `node-label`, `nodata`;
/// in bar charts drawn as rows also `bar-label`, `bar-value`, `group-label`,
/// `swatch` and `rows-column` (the tests find elements by them).
pub const CHART_CSS: &str = "\
svg.chart{color:var(--fg);font-family:system-ui,-apple-system,\"Segoe UI\",Roboto,\"Helvetica Neue\",Arial,sans-serif;font-size:12px;display:block;height:auto;overflow:visible}
svg.chart text{fill:var(--fg)}
svg.chart .chart-title{font-size:15px;font-weight:600}
svg.chart .sub{fill:var(--fg);fill-opacity:.72}
svg.chart .tick{font-size:11px;fill:var(--fg);fill-opacity:.85;font-variant-numeric:tabular-nums}
svg.chart .axis-label{font-size:12px;font-weight:500}
svg.chart .axis{stroke:var(--fg);stroke-width:1;fill:none}
svg.chart .grid{stroke:var(--muted);stroke-opacity:.4;stroke-width:1;fill:none}
svg.chart .grid-minor{stroke:var(--muted);stroke-opacity:.18;stroke-width:1;fill:none}
svg.chart .edge{stroke:var(--fg);stroke-opacity:.5;stroke-width:1.5;fill:none}
svg.chart .edge.dense{stroke-opacity:.45;stroke-width:1.2}
svg.chart .s0{stroke:var(--s0);fill:var(--s0)}
svg.chart .s1{stroke:var(--s1);fill:var(--s1)}
svg.chart .s2{stroke:var(--s2);fill:var(--s2)}
svg.chart .s3{stroke:var(--s3);fill:var(--s3)}
svg.chart .s4{stroke:var(--s4);fill:var(--s4)}
svg.chart .s5{stroke:var(--s5);fill:var(--s5)}
svg.chart .s6{stroke:var(--s6);fill:var(--s6)}
svg.chart .s7{stroke:var(--s7);fill:var(--s7)}
svg.chart .line{fill:none;stroke-width:2;stroke-linejoin:round;stroke-linecap:round}
svg.chart .dashed{stroke-dasharray:6 4}
svg.chart .pt{stroke:var(--bg);stroke-width:1}
svg.chart .marker{stroke:var(--fg);stroke-opacity:.55;stroke-width:1;stroke-dasharray:4 3;fill:none}
svg.chart .marker-label{font-size:11px}
svg.chart .mark{fill:var(--bg);stroke:var(--fg);stroke-width:2}
svg.chart .mark-label{font-size:12px;font-weight:600}
svg.chart .halo{paint-order:stroke;stroke:var(--bg);stroke-width:3px;stroke-linejoin:round}
svg.chart .legend{font-size:12px}
svg.chart .bar{stroke:none}
svg.chart .bar.flagged{fill-opacity:.45;stroke:var(--fg);stroke-width:1;stroke-dasharray:3 2}
svg.chart .hatch{stroke:var(--fg);stroke-width:1.5;stroke-opacity:.6}
svg.chart .hatch-overlay{pointer-events:none;stroke:none}
svg.chart .flag{font-weight:700;font-size:11px}
svg.chart .ref{stroke:var(--fg);stroke-width:1.2;stroke-dasharray:6 4;fill:none}
svg.chart .group-rule{stroke:var(--muted);stroke-width:1;fill:none}
svg.chart .bar-value{font-variant-numeric:tabular-nums}
svg.chart .swatch{stroke:none}
svg.chart .whisker{stroke:var(--fg);stroke-width:1.3;fill:none}
svg.chart .hm-cell{stroke:var(--bg);stroke-width:1}
svg.chart .hm-none{fill:var(--muted);fill-opacity:.22;stroke:var(--bg);stroke-width:1}
svg.chart .hm-text{pointer-events:none;font-variant-numeric:tabular-nums}
svg.chart .hm-sep{stroke:var(--fg);stroke-width:2.5;fill:none}
svg.chart .edge-hit{stroke:transparent;stroke-width:10;fill:none}
svg.chart .edge-label-bg{fill:var(--bg);stroke:var(--muted);stroke-width:1}
svg.chart .edge-label{font-size:11px;font-variant-numeric:tabular-nums}
svg.chart .node,svg.chart .swatch-node{fill:var(--bg);stroke:var(--fg);stroke-width:1.5}
svg.chart .cpuless{stroke-dasharray:5 3}
svg.chart .node-label{font-weight:600}
svg.chart .nodata{font-size:14px;fill:var(--fg);fill-opacity:.6}
";

/// Size of the chart title (px).
pub(super) const TITLE_SIZE: f64 = 15.0;
/// Size of tick labels (px).
pub(super) const TICK_SIZE: f64 = 11.0;

/// The caller's id restricted to `[A-Za-z0-9_-]`, so that derived ids work
/// in `url(#...)` references.
pub(super) fn sanitize_id(id: &str) -> String {
    let s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "chart".to_string()
    } else {
        s
    }
}

/// A coordinate, rounded to 0.1 without trailing zeros: short markup, and
/// no `NaN` or `inf` in it whatever the layout computed.
pub(super) struct P(pub(super) f64);

impl fmt::Display for P {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.0.is_finite() {
            return f.write_str("0");
        }
        let v = (self.0 * 10.0).round() / 10.0;
        if v == v.trunc() {
            write!(f, "{}", v as i64)
        } else {
            write!(f, "{v:.1}")
        }
    }
}

/// Opens the root element and writes the accessible and the visible title.
pub(super) fn open_svg(out: &mut String, sid: &str, title: &str, w: f64, h: f64) {
    let t = escape(title);
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"{sid}\" class=\"chart\" \
         viewBox=\"0 0 {w} {h}\" width=\"100%\" style=\"max-width:{w}px\" role=\"img\" \
         aria-labelledby=\"{sid}-title\" font-family=\"system-ui, sans-serif\" font-size=\"12\">\
         <title id=\"{sid}-title\">{t}</title>\
         <text class=\"chart-title\" x=\"12\" y=\"24\">{t}</text>",
        w = P(w),
        h = P(h),
    );
}

/// A chart with only its title and a message ("no data").
pub(super) fn no_data(sid: &str, title: &str, msg: &str) -> String {
    let w = (text_w(title, TITLE_SIZE) + 40.0).max(360.0);
    let mut out = String::new();
    open_svg(&mut out, sid, title, w, 110.0);
    let _ = write!(
        out,
        "<text class=\"nodata\" x=\"{}\" y=\"72\" text-anchor=\"middle\">{}</text></svg>",
        P(w / 2.0),
        escape(msg)
    );
    out
}

/// A `<title>` element (tooltip).
pub(super) fn tip(s: &str) -> String {
    format!("<title>{}</title>", escape(s))
}

/// A `<line>` of `class` from (`x1`, `y1`) to (`x2`, `y2`).
pub(super) fn push_line(out: &mut String, class: &str, [x1, y1, x2, y2]: [f64; 4]) {
    let _ = write!(
        out,
        "<line class=\"{class}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>",
        P(x1),
        P(y1),
        P(x2),
        P(y2)
    );
}

/// Text rotated to read upwards, centred on (`x`, `y`): the title of a
/// vertical axis or of a heatmap's rows.
pub(super) fn push_rotated_title(out: &mut String, x: f64, y: f64, text: &str) {
    let _ = write!(
        out,
        "<text class=\"axis-label\" transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        P(x),
        P(y),
        escape(text)
    );
}

/// Positions of legend items of the given widths, laid left to right from
/// (`x0`, `y0`) in rows `row_h` apart. An item that would pass `right`
/// starts a new row, unless it is the first of its row (a lone item too
/// wide still has to go somewhere). Returns the positions and the number
/// of rows used.
pub(super) fn flow(
    widths: impl IntoIterator<Item = f64>,
    x0: f64,
    y0: f64,
    row_h: f64,
    right: f64,
) -> (Vec<(f64, f64)>, usize) {
    let mut at = Vec::new();
    let (mut x, mut y, mut rows) = (x0, y0, 0);
    for iw in widths {
        if x + iw > right && x > x0 {
            x = x0;
            y += row_h;
            rows += 1;
        }
        at.push((x, y));
        x += iw;
    }
    if !at.is_empty() {
        rows += 1;
    }
    (at, rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_covers_the_five_characters_and_drops_controls() {
        assert_eq!(
            escape("<a href=\"x\">'&'</a>\u{0}\u{7}\n"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;\n"
        );
        assert_eq!(sanitize_id("fig 1<x>"), "fig_1_x_");
        assert_eq!(sanitize_id(""), "chart");
    }

    #[test]
    fn chart_css_uses_only_custom_properties() {
        assert!(!CHART_CSS.contains('#'));
        for class in [
            ".axis", ".grid", ".s0", ".s7", ".line", ".bar", ".hm-cell", ".edge", ".node",
            ".cpuless",
        ] {
            assert!(CHART_CSS.contains(class), "{class}");
        }
        for prop in ["var(--fg)", "var(--muted)", "var(--bg)", "var(--s7)"] {
            assert!(CHART_CSS.contains(prop), "{prop}");
        }
        assert_eq!(
            CHART_CSS.matches('{').count(),
            CHART_CSS.matches('}').count()
        );
    }
}
