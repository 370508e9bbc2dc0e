//! Bar charts: grouped vertical bars (normalized sweep times) with an
//! optional horizontal reference line and flagged (hatched) bars.

use super::axis::{
    plan_axis, push_grid, push_y_label, y_gutter, y_ticks, Axis, AxisPlan, Scale, TickFormat,
};
use super::escape;
use super::format::compact;
use super::frame::{
    no_data, open_svg, push_line, push_rotated_title, sanitize_id, tip, P, TICK_SIZE, TITLE_SIZE,
};
use super::metrics::{fit_text, text_w};
use std::fmt::Write as _;

/// One bar of a [`bar_chart`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// Extra tooltip text (what the bar is, how it was measured).
    pub tooltip: String,
    /// Drawn hatched with a dashed outline and a "!" (placement not verified).
    pub flagged: bool,
}

/// A labelled group of bars; groups are separated by a gap and coloured by
/// their index, mod 8.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

/// The gap between groups, in bar slots.
const GROUP_GAP: f64 = 0.8;
/// Size of bar labels (px).
const LABEL_SIZE: f64 = 10.0;
/// Longest bar label drawn (px); longer ones are cut with "…".
const LABEL_MAX_W: f64 = 110.0;
/// Height of the plot area.
const PLOT_H: f64 = 280.0;

/// How bar labels are drawn under the bars: as wide bars allow, down to
/// none at all (the tooltips still name every bar).
#[derive(Debug, Clone, Copy, PartialEq)]
enum BarLabels {
    Horizontal,
    Diagonal,
    Vertical,
    Hidden,
}

impl BarLabels {
    /// The most readable way for labels up to `lw` px under slots `slot`
    /// px wide.
    fn choose(lw: f64, slot: f64) -> BarLabels {
        if lw + 3.0 <= slot {
            BarLabels::Horizontal
        } else if slot >= 16.0 {
            BarLabels::Diagonal
        } else if slot >= 11.0 {
            BarLabels::Vertical
        } else {
            BarLabels::Hidden
        }
    }

    /// The room labels up to `lw` px wide take under the plot.
    fn height(self, lw: f64) -> f64 {
        match self {
            BarLabels::Horizontal => 16.0,
            BarLabels::Diagonal => lw * 0.71 + 16.0,
            BarLabels::Vertical => lw + 12.0,
            BarLabels::Hidden => 4.0,
        }
    }
}

/// Grouped vertical bars: groups separated by a gap and labelled under
/// their bars, bar labels horizontal, rotated or (for very narrow bars)
/// left out; tooltips always carry group, label, exact value and the bar's
/// tooltip. Flagged bars are hatched, outlined and marked "!". `reference`
/// draws a horizontal dashed line (1.0 for normalized times). The y axis is
/// linear from 0 (or the lowest negative value). Readable with ~200 bars.
/// Non-finite values draw no bar, only "n/a" (when there is room).
pub fn bar_chart(
    id: &str,
    title: &str,
    y_label: &str,
    groups: &[BarGroup],
    reference: Option<f64>,
) -> String {
    let sid = sanitize_id(id);
    let groups: Vec<&BarGroup> = groups.iter().filter(|g| !g.bars.is_empty()).collect();
    let mut values: Vec<f64> = groups
        .iter()
        .flat_map(|g| g.bars.iter().map(|b| b.value))
        .filter(|v| v.is_finite())
        .collect();
    if values.is_empty() {
        return no_data(&sid, title, "no data");
    }
    let reference = reference.filter(|v| v.is_finite());
    values.extend(reference);
    let axis = Axis::new(y_label, Scale::Linear, TickFormat::Number);
    let yp = plan_axis(&axis, &values, true);
    let lay = Layout::new(title, &groups, yp, reference);

    let mut out = String::new();
    open_svg(&mut out, &sid, title, lay.w, lay.h);
    if lay.any_flag {
        let _ = write!(
            out,
            "<defs><pattern id=\"{sid}-hatch\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
             <line class=\"hatch\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\"/></pattern></defs>\
             <text class=\"sub\" x=\"12\" y=\"44\" style=\"font-size:11px\">hatched with “!”: flagged (see the bar’s tooltip)</text>"
        );
    }
    lay.push_axis(&mut out, y_label);
    // Bars left to right, each group followed by its gap.
    let mut x = lay.left;
    for (gi, g) in groups.iter().enumerate() {
        x = lay.push_group(&mut out, &sid, gi, g, x);
    }
    if let Some(r) = reference {
        lay.push_reference(&mut out, r);
    }
    out.push_str("</svg>");
    out
}

/// Where everything of a bar chart goes.
struct Layout {
    yp: AxisPlan,
    /// Width of one bar's slot, and of the bar in it.
    slot: f64,
    bar_w: f64,
    labels: BarLabels,
    /// Whether any bar is flagged (a hatch pattern and a note).
    any_flag: bool,
    /// The reference line's label, right of the plot.
    ref_label: Option<String>,
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    plot_h: f64,
    /// The y position of 0 (or of the axis end nearest to it).
    zero: f64,
    /// Baseline of the group labels.
    group_y: f64,
}

impl Layout {
    fn new(title: &str, groups: &[&BarGroup], yp: AxisPlan, reference: Option<f64>) -> Layout {
        let n: usize = groups.iter().map(|g| g.bars.len()).sum();
        // Slots share about 680 px, up to 60 px each; narrow bars fill
        // more of their slot so that they stay visible.
        let slots = n as f64 + GROUP_GAP * (groups.len() as f64 - 1.0);
        let slot = (680.0 / slots).min(60.0);
        let bar_w = if slot >= 6.0 {
            slot * 0.78
        } else {
            slot * 0.86
        };
        let lw = groups
            .iter()
            .flat_map(|g| g.bars.iter())
            .map(|b| text_w(&b.label, LABEL_SIZE))
            .fold(0.0, f64::max)
            .min(LABEL_MAX_W);
        let labels = BarLabels::choose(lw, slot);
        let mut left = y_gutter(&yp.labels());
        if labels == BarLabels::Diagonal {
            // The first label leans left past its bar.
            left = left.max(lw * 0.71 - slot / 2.0 + 12.0);
        }
        let plot_w = slot * slots;
        let ref_label = reference.map(|r| compact(r, 3));
        let right_margin = ref_label
            .as_ref()
            .map_or(16.0, |s| text_w(s, TICK_SIZE) + 14.0);
        let right = left + plot_w;
        let w = (right + right_margin).max(text_w(title, TITLE_SIZE) + 28.0);
        let any_flag = groups.iter().any(|g| g.bars.iter().any(|b| b.flagged));
        // A note about flagged bars goes under the title.
        let top = if any_flag { 62.0 } else { 44.0 };
        let plot_h = PLOT_H;
        let bottom = top + plot_h;
        let group_y = bottom + labels.height(lw) + 14.0;
        let zero = bottom - yp.frac(0.0_f64.clamp(yp.lo, yp.hi)) * plot_h;
        Layout {
            yp,
            slot,
            bar_w,
            labels,
            any_flag,
            ref_label,
            w,
            h: group_y + 14.0,
            left,
            right,
            top,
            bottom,
            plot_h,
            zero,
            group_y,
        }
    }

    fn ypos(&self, v: f64) -> f64 {
        self.bottom - self.yp.frac(v) * self.plot_h
    }

    /// Grid, y tick labels, the y axis and the zero line, and the y title.
    fn push_axis(&self, out: &mut String, y_label: &str) {
        let (ypx, yshow) = y_ticks(&self.yp, |v| self.ypos(v));
        out.push_str("<g class=\"grid-lines\">");
        let (left, right) = (self.left, self.right);
        push_grid(out, &ypx, &yshow, |p| [left, p, right, p]);
        out.push_str("</g><g class=\"y-ticks\">");
        let labels = self.yp.labels();
        for (i, &py) in ypx.iter().enumerate().filter(|&(i, _)| yshow[i]) {
            push_y_label(out, self.left, py, &labels[i]);
        }
        let _ = write!(
            out,
            "</g><path class=\"axis\" fill=\"none\" d=\"M{} {}V{}\"/>",
            P(left),
            P(self.top),
            P(self.bottom),
        );
        push_line(out, "axis", [left, self.zero, right, self.zero]);
        push_rotated_title(out, 14.0, self.top + self.plot_h / 2.0, y_label);
    }

    /// Group `gi`'s bars from `x` on, with its rule and label under them.
    /// Returns where the next group starts.
    fn push_group(&self, out: &mut String, sid: &str, gi: usize, g: &BarGroup, x: f64) -> f64 {
        let (slot, gx0) = (self.slot, x);
        let mut x = x;
        out.push_str("<g class=\"bar-group\">");
        for b in &g.bars {
            let cx = x + slot / 2.0;
            x += slot;
            self.push_bar(out, sid, gi, g, b, cx);
            self.push_bar_label(out, b, cx);
        }
        let gx1 = x;
        let gw = gx1 - gx0;
        let rule_y = self.group_y - 10.0;
        push_line(out, "group-rule", [gx0 + 1.0, rule_y, gx1 - 1.0, rule_y]);
        let _ = write!(
            out,
            "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text></g>",
            P((gx0 + gx1) / 2.0),
            P(self.group_y + 4.0),
            tip(&g.label),
            escape(&fit_text(&g.label, 12.0, gw + slot * GROUP_GAP - 4.0)),
        );
        x + slot * GROUP_GAP
    }

    /// Bar `b` of group `gi` centred on `cx`, from zero to its value (cut at
    /// the axis ends), coloured by its group; hatched and marked "!" when
    /// flagged; "n/a" instead when it has no value.
    fn push_bar(&self, out: &mut String, sid: &str, gi: usize, g: &BarGroup, b: &Bar, cx: f64) {
        let mut tooltip = format!("{} · {}: {}", g.label, b.label, b.value);
        if !b.tooltip.is_empty() {
            tooltip.push('\n');
            tooltip.push_str(&b.tooltip);
        }
        if b.flagged {
            tooltip.push_str("\n(flagged)");
        }
        if !b.value.is_finite() {
            if self.slot >= 12.0 {
                // No value (failed or skipped case): say so where the bar would be.
                let _ = write!(
                    out,
                    "<text class=\"tick\" transform=\"translate({} {}) rotate(-90)\" style=\"font-size:{LABEL_SIZE}px\">n/a{}</text>",
                    P(cx + 3.5),
                    P(self.zero - 4.0),
                    tip(&tooltip)
                );
            }
            return;
        }
        let v = b.value.clamp(self.yp.lo, self.yp.hi);
        let (y0, y1) = (self.ypos(v).min(self.zero), self.ypos(v).max(self.zero));
        let bar = format!(
            "x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"",
            P(cx - self.bar_w / 2.0),
            P(y0),
            P(self.bar_w),
            P(y1 - y0)
        );
        let flagged = if b.flagged { " flagged" } else { "" };
        let _ = write!(
            out,
            "<rect class=\"bar s{}{flagged}\" {bar}>{}</rect>",
            gi % 8,
            tip(&tooltip)
        );
        if b.flagged {
            // The hatch lies over the bar's colour, which it lets through.
            let _ = write!(
                out,
                "<rect class=\"hatch-overlay\" {bar} fill=\"url(#{sid}-hatch)\"/>\
                 <text class=\"flag\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">!</text>",
                P(cx),
                P(y0 - 3.0)
            );
        }
    }

    /// Bar `b`'s label under the plot at `cx`, drawn as the layout chose.
    fn push_bar_label(&self, out: &mut String, b: &Bar, cx: f64) {
        let (transform, anchor) = match self.labels {
            BarLabels::Horizontal => {
                let label = escape(&fit_text(&b.label, LABEL_SIZE, LABEL_MAX_W));
                let _ = write!(
                    out,
                    "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" style=\"font-size:{LABEL_SIZE}px\">{label}</text>",
                    P(cx),
                    P(self.bottom + 14.0)
                );
                return;
            }
            BarLabels::Diagonal => ((cx + 3.0, self.bottom + 10.0, -45), "end"),
            BarLabels::Vertical => ((cx + 3.5, self.bottom + 6.0, -90), "end"),
            BarLabels::Hidden => return,
        };
        let (tx, ty, angle) = transform;
        let label = escape(&fit_text(&b.label, LABEL_SIZE, LABEL_MAX_W));
        let _ = write!(
            out,
            "<text class=\"tick\" transform=\"translate({} {}) rotate({angle})\" text-anchor=\"{anchor}\" style=\"font-size:{LABEL_SIZE}px\">{label}</text>",
            P(tx),
            P(ty)
        );
    }

    /// The dashed reference line across the plot with its value at the
    /// right, when the value is on the axis.
    fn push_reference(&self, out: &mut String, r: f64) {
        let Some(label) = &self.ref_label else {
            return;
        };
        if !(self.yp.lo..=self.yp.hi).contains(&r) {
            return;
        }
        let py = self.ypos(r);
        let _ = write!(
            out,
            "<g class=\"ref-g\">{}<line class=\"ref\" x1=\"{}\" y1=\"{p}\" x2=\"{}\" y2=\"{p}\"/>\
             <text class=\"tick\" x=\"{}\" y=\"{}\">{}</text></g>",
            tip(&format!("reference: {r}")),
            P(self.left),
            P(self.right + 4.0),
            P(self.right + 7.0),
            P(py + 4.0),
            escape(label),
            p = P(py)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    fn bar(label: &str, value: f64, flagged: bool) -> Bar {
        Bar {
            label: label.into(),
            value,
            tooltip: format!("case {label}"),
            flagged,
        }
    }

    fn sample_groups() -> Vec<BarGroup> {
        vec![
            BarGroup {
                label: "0 hops".into(),
                bars: vec![bar("0.0.r.0", 1.0, false), bar("0.0.w.0", 1.1, false)],
            },
            BarGroup {
                label: "1 hop".into(),
                bars: vec![
                    bar("0.0.r.1", 1.5, false),
                    bar("0.0.w.1", 1.6, true),
                    bar("1.0.r.0", 1.45, false),
                ],
            },
            BarGroup {
                label: "2 hops".into(),
                bars: vec![bar("0.0.r.2", 2.1, false), bar("0.0.w.2", 2.4, false)],
            },
        ]
    }

    #[test]
    fn bar_chart_bars_tooltips_and_reference() {
        let svg = bar_chart(
            "sweep",
            "Sweep",
            "time (x fastest)",
            &sample_groups(),
            Some(1.0),
        );
        check_no_literal_colours(&svg);
        let els = doc(&svg);
        let bars = find(&els, "rect", "bar");
        assert_eq!(bars.len(), 7);
        for (i, _) in &bars {
            let t = title_of(&els, *i).unwrap();
            assert!(t.contains("case "), "{t}");
        }
        assert!(title_of(&els, bars[3].0)
            .unwrap()
            .contains("1 hop · 0.0.w.1: 1.6"));
        // Colour by group.
        assert!(
            bars[0].1.has_class("s0") && bars[2].1.has_class("s1") && bars[6].1.has_class("s2")
        );
        let flagged = find(&els, "rect", "flagged");
        assert_eq!(flagged.len(), 1);
        assert!(find(&els, "text", "flag")
            .iter()
            .any(|(_, e)| e.text == "!"));
        // The reference line is at the height of the bar worth exactly 1.0,
        // and at half the height of the bar worth 2.0 were there one.
        let refs = find(&els, "line", "ref");
        assert_eq!(refs.len(), 1);
        let ry = refs[0].1.num("y1");
        assert_eq!(ry, refs[0].1.num("y2"));
        let one = bars[0].1;
        assert_eq!(one.num("y"), ry);
        let base = one.num("y") + one.num("height");
        let b24 = bars[6].1;
        assert!(((base - b24.num("y")) / (base - ry) - 2.4).abs() < 0.01);
        // Group labels under the bars.
        for g in ["0 hops", "1 hop", "2 hops"] {
            assert!(find(&els, "text", "axis-label")
                .iter()
                .any(|(_, e)| e.text == g));
        }
    }

    #[test]
    fn bar_chart_stays_readable_with_many_bars() {
        let groups: Vec<BarGroup> = (0..4)
            .map(|g| BarGroup {
                label: format!("{g} hops"),
                bars: (0..50)
                    .map(|i| bar(&format!("{g}.{i}.r.{}", i % 4), 1.0 + g as f64 * 0.4, false))
                    .collect(),
            })
            .collect();
        let els = doc(&bar_chart(
            "many",
            "Many",
            "time (x fastest)",
            &groups,
            Some(1.0),
        ));
        let bars = find(&els, "rect", "bar");
        assert_eq!(bars.len(), 200);
        assert!(bars.iter().all(|(i, _)| title_of(&els, *i).is_some()));
        // Bars do not overlap and labels were dropped.
        let xs: Vec<(f64, f64)> = bars
            .iter()
            .map(|(_, e)| (e.num("x"), e.num("width")))
            .collect();
        assert!(xs.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0 + 0.05));
        assert!(!els.iter().any(|e| e.text == "0.1.r.1"));
        let root_w = view_width(&els);
        assert!(root_w <= 800.0);
    }
}
