//! Bar charts: grouped bars (normalized sweep times, bandwidth per memory
//! policy) with an optional reference value and flagged (hatched) bars.
//!
//! Every bar keeps a whole label (never cut to "…") and no two labels
//! overlap, whatever the number of bars and groups. Two layouts do that:
//! - columns: vertical bars side by side in about 680 px, each labelled
//!   under its bar (horizontally, at 45° or at 90°, as the bar width
//!   allows) and each group's label wrapped onto up to three lines under
//!   its bars. Used while every label fits so: a few to about fifty bars.
//! - rows: one horizontal bar per row with its label left of it and its
//!   value right of it, under a header naming its group; the rows flow
//!   into as many side-by-side columns as fit about 1100 px, and the chart
//!   grows downwards with the count. Used where columns would have to drop
//!   or cut labels (the 184 classes of a two-thread sweep in 21 hop
//!   classes; several hundred bars).
//!
//! Since each bar is named on the chart itself, with its value beside it
//! in rows, no bar is identified only by its tooltip and no list of the
//! bars under the chart is needed.

use super::axis::{
    plan_axis, push_grid, push_y_label, thin_labels, y_gutter, y_ticks, Axis, AxisPlan, Scale,
    TickFormat,
};
use super::escape;
use super::format::compact;
use super::frame::{
    no_data, open_svg, push_line, push_rotated_title, sanitize_id, tip, P, TICK_SIZE, TITLE_SIZE,
};
use super::metrics::{text_w, widest};
use numalab::text::format::significant;
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
    /// The value's 95% confidence interval (low, high), drawn as a whisker
    /// over the bar and given in its tooltip.
    pub interval: Option<(f64, f64)>,
    /// The colour of the thing the bar is (series `s{series % 8}`), the same
    /// in every group, with a legend under the title; `None`: the group's
    /// colour.
    pub series: Option<usize>,
}

impl Bar {
    /// The interval of a value given as its median's 95% half-width over
    /// the median (`rel_ci`, as figures carry it), on the scale of `value`
    /// (a normalized bar's own case interval); `None` when it is not a
    /// number.
    pub fn relative_interval(value: f64, rel_ci: f64) -> Option<(f64, f64)> {
        (value.is_finite() && rel_ci.is_finite())
            .then_some((value * (1.0 - rel_ci), value * (1.0 + rel_ci)))
    }
}

/// A labelled group of bars; groups are separated by a gap and coloured by
/// their index, mod 8, unless their bars name a series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BarGroup {
    pub label: String,
    pub bars: Vec<Bar>,
}

/// The gap between groups, in bar slots.
const GROUP_GAP: f64 = 0.8;
/// Size of bar labels under columns (px).
const LABEL_SIZE: f64 = 10.0;
/// Size of group labels (px), as the `axis-label` class draws them.
const GROUP_SIZE: f64 = 12.0;
/// How much wider than [`text_w`] estimates text may really be where it
/// sits beside other text: the estimate is of a typical UI font, and
/// wide fonts such as DejaVu Sans (Chromium's default on Linux) run up to
/// about 12% wider on lower-case letters.
const WIDE_FONT: f64 = 1.15;
/// Width the bars of the column layout share (px).
const COLUMNS_W: f64 = 680.0;
/// Narrowest bar slot of the column layout: a label rotated 90° needs a
/// line of 10 px text (about 12 px with ascent and descent) plus a gap.
const MIN_SLOT: f64 = 13.0;
/// Narrowest slot for labels at 45°: neighbours are then `slot × 0.71`
/// apart across their baselines, more than a line of text.
const DIAGONAL_SLOT: f64 = 18.0;
/// Longest bar label drawn rotated (px): longer ones would take more room
/// under the plot than the plot itself; such charts use rows.
const ROTATED_MAX_W: f64 = 130.0;
/// Lines a group label may be wrapped onto under columns.
const MAX_GROUP_LINES: usize = 3;
/// Distance between the baselines of a wrapped group label's lines.
const GROUP_LINE_H: f64 = 15.0;
/// Height of the plot area of the column layout.
const PLOT_H: f64 = 280.0;

/// Height of one bar's row in the row layout, and its text size.
const ROW_H: f64 = 15.0;
const ROW_SIZE: f64 = 11.0;
/// Height of a group's header row in the row layout.
const HEAD_H: f64 = 20.0;
/// Length of the value axis in each column of the row layout.
const ROW_BAR_W: f64 = 200.0;
/// Room between the columns of the row layout, and around them.
const COL_GAP: f64 = 28.0;
const MARGIN: f64 = 12.0;
/// Widest chart of the row layout: what a report page gives a figure.
const ROWS_MAX_W: f64 = 1100.0;
/// Fewest rows worth a column of their own: short lists stay in one.
const MIN_COL_ROWS: usize = 12;
/// What a group header that carries on from the previous column says.
const CONTINUED: &str = " (continued)";

/// How bar labels are drawn under columns, as wide as the bars allow.
#[derive(Debug, Clone, Copy, PartialEq)]
enum BarLabels {
    Horizontal,
    Diagonal,
    Vertical,
}

impl BarLabels {
    /// The most readable way for labels up to `lw` px under slots `slot`
    /// px wide; `None` when no way keeps them whole and apart.
    fn choose(lw: f64, slot: f64) -> Option<BarLabels> {
        if slot < MIN_SLOT {
            None
        } else if lw * WIDE_FONT + 4.0 <= slot {
            Some(BarLabels::Horizontal)
        } else if lw > ROTATED_MAX_W {
            None
        } else if slot >= DIAGONAL_SLOT {
            Some(BarLabels::Diagonal)
        } else {
            Some(BarLabels::Vertical)
        }
    }

    /// The room labels up to `lw` px wide take under the plot.
    fn height(self, lw: f64) -> f64 {
        match self {
            BarLabels::Horizontal => 16.0,
            BarLabels::Diagonal => lw * WIDE_FONT * 0.71 + 18.0,
            BarLabels::Vertical => lw * WIDE_FONT + 12.0,
        }
    }
}

/// Grouped bars, every bar named by a whole label on the chart: vertical
/// bars labelled under them while labels fit so, else one row per bar
/// with its label and value, grouped under headers and flowing into
/// side-by-side columns (see the module documentation). Tooltips always
/// carry group, label, exact value and the bar's tooltip. Flagged bars are
/// hatched, outlined and marked "!". `reference` draws a dashed line (1.0
/// for normalized times). The value axis is linear from 0 (or the lowest
/// negative value). Non-finite values draw no bar, only "n/a".
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
    // The axis holds the whiskers too.
    values.extend(
        groups
            .iter()
            .flat_map(|g| &g.bars)
            .filter_map(|b| b.interval)
            .flat_map(|(lo, hi)| [lo, hi])
            .filter(|v| v.is_finite()),
    );
    let axis = Axis::new(y_label, Scale::Linear, TickFormat::Number);
    let yp = plan_axis(&axis, &values, true);
    let mut out = String::new();
    match Columns::new(title, &groups, yp.clone(), reference) {
        Some(lay) => lay.draw(&mut out, &sid, title, y_label, &groups, reference),
        None => Rows::new(title, y_label, &groups, yp, reference)
            .draw(&mut out, &sid, title, y_label, &groups, reference),
    }
    out
}

/// The hatch pattern of flagged bars and the note saying what it means,
/// under the title.
fn push_flag_defs(out: &mut String, sid: &str) {
    let _ = write!(
        out,
        "<defs><pattern id=\"{sid}-hatch\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
         <line class=\"hatch\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\"/></pattern></defs>\
         <text class=\"sub\" x=\"12\" y=\"44\" style=\"font-size:11px\">hatched with “!”: flagged (see the bar’s tooltip)</text>"
    );
}

/// A bar's tooltip: group, label, exact value, the bar's own text.
fn bar_tooltip(g: &BarGroup, b: &Bar) -> String {
    let mut tooltip = format!("{} · {}: {}", g.label, b.label, b.value);
    if !b.tooltip.is_empty() {
        tooltip.push('\n');
        tooltip.push_str(&b.tooltip);
    }
    if let Some((lo, hi)) = b.interval {
        tooltip.push_str(&format!(
            "\n95% interval {}–{}",
            significant(lo, 4),
            significant(hi, 4)
        ));
    }
    if b.flagged {
        tooltip.push_str("\n(flagged)");
    }
    tooltip
}

/// The series legend under the title: each series' swatch and the label of
/// its first bar, in series order.
fn push_series_legend(out: &mut String, groups: &[&BarGroup], x0: f64, y: f64) {
    let mut seen: Vec<(usize, &str)> = Vec::new();
    for b in groups.iter().flat_map(|g| &g.bars) {
        if let Some(k) = b.series {
            if !seen.iter().any(|(s, _)| *s == k) {
                seen.push((k, &b.label));
            }
        }
    }
    seen.sort_by_key(|(k, _)| *k);
    out.push_str("<g class=\"legend series-legend\">");
    let mut x = x0;
    for (k, label) in seen {
        let _ = write!(
            out,
            "<rect class=\"swatch s{}\" x=\"{}\" y=\"{}\" width=\"10\" height=\"10\"/>\
             <text class=\"legend\" x=\"{}\" y=\"{}\">{}</text>",
            k % 8,
            P(x),
            P(y - 9.0),
            P(x + 14.0),
            P(y),
            escape(label)
        );
        x += 14.0 + text_w(label, 12.0) * WIDE_FONT + 14.0;
    }
    out.push_str("</g>");
}

/// A whisker from `a` to `b` (pixels along the value axis) at `c` across
/// it: vertical in columns, horizontal in rows.
fn push_whisker(out: &mut String, vertical: bool, c: f64, a: f64, b: f64) {
    let cap = 4.0;
    let d = if vertical {
        format!(
            "M{} {}V{}M{} {}H{}M{} {}H{}",
            P(c),
            P(a),
            P(b),
            P(c - cap),
            P(a),
            P(c + cap),
            P(c - cap),
            P(b),
            P(c + cap)
        )
    } else {
        format!(
            "M{} {}H{}M{} {}V{}M{} {}V{}",
            P(a),
            P(c),
            P(b),
            P(a),
            P(c - cap),
            P(c + cap),
            P(b),
            P(c - cap),
            P(c + cap)
        )
    };
    let _ = write!(out, "<path class=\"whisker\" d=\"{d}\"/>");
}

/// The rectangle of bar `b` of group `gi` at (`x`, `y`), `w` by `h`, with
/// its tooltip, hatched over when flagged.
fn push_bar_rect(out: &mut String, sid: &str, gi: usize, b: &Bar, tooltip: &str, rect: [f64; 4]) {
    let [x, y, w, h] = rect;
    let bar = format!(
        "x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"",
        P(x),
        P(y),
        P(w),
        P(h)
    );
    let flagged = if b.flagged { " flagged" } else { "" };
    let _ = write!(
        out,
        "<rect class=\"bar s{}{flagged}\" {bar}>{}</rect>",
        b.series.unwrap_or(gi) % 8,
        tip(tooltip)
    );
    if b.flagged {
        // The hatch lies over the bar's colour, which it lets through.
        let _ = write!(
            out,
            "<rect class=\"hatch-overlay\" {bar} fill=\"url(#{sid}-hatch)\"/>"
        );
    }
}

/// `text` in lines no wider than `max_w` px at `size` px, broken at spaces;
/// `None` when a word is wider or it takes more than `max_lines` lines.
fn wrap(text: &str, size: f64, max_w: f64, max_lines: usize) -> Option<Vec<String>> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split_whitespace() {
        if text_w(word, size) > max_w {
            return None;
        }
        match lines.last_mut() {
            Some(line) if text_w(&format!("{line} {word}"), size) <= max_w => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    (lines.len() <= max_lines).then_some(lines)
}

/// Where everything of the column layout goes.
struct Columns {
    yp: AxisPlan,
    /// Width of one bar's slot, and of the bar in it.
    slot: f64,
    bar_w: f64,
    labels: BarLabels,
    /// Each group's label, wrapped to the room under its bars.
    group_lines: Vec<Vec<String>>,
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
    /// Baseline of the group labels' first line.
    group_y: f64,
}

impl Columns {
    /// The layout, or `None` when some bar or group label would not fit
    /// whole under its bars.
    fn new(
        title: &str,
        groups: &[&BarGroup],
        yp: AxisPlan,
        reference: Option<f64>,
    ) -> Option<Columns> {
        let n: usize = groups.iter().map(|g| g.bars.len()).sum();
        // Slots share about 680 px, up to 60 px each; narrow bars fill
        // more of their slot so that they stay visible.
        let slots = n as f64 + GROUP_GAP * (groups.len() as f64 - 1.0);
        let slot = (COLUMNS_W / slots).min(60.0);
        let bar_w = slot * 0.78;
        let lw = widest(
            groups.iter().flat_map(|g| &g.bars).map(|b| &b.label),
            LABEL_SIZE,
        );
        let labels = BarLabels::choose(lw, slot)?;
        // A group's label may use its bars' width and half the gap on
        // each side; a label in a wide font must still stop short of it.
        let group_lines = groups
            .iter()
            .map(|g| {
                let room = (g.bars.len() as f64 + GROUP_GAP) * slot - 6.0;
                wrap(&g.label, GROUP_SIZE, room / WIDE_FONT, MAX_GROUP_LINES)
            })
            .collect::<Option<Vec<_>>>()?;
        let mut left = y_gutter(&yp.labels());
        if labels == BarLabels::Diagonal {
            // The first label leans left past its bar.
            left = left.max(lw * WIDE_FONT * 0.71 - slot / 2.0 + 12.0);
        }
        let plot_w = slot * slots;
        let ref_label = reference.map(|r| compact(r, 3));
        // The last group's label may reach half a gap past the plot.
        let right_margin = ref_label
            .as_ref()
            .map_or(16.0, |s| text_w(s, TICK_SIZE) * WIDE_FONT + 14.0)
            .max(slot * GROUP_GAP / 2.0 + 4.0);
        let right = left + plot_w;
        let w = (right + right_margin).max(text_w(title, TITLE_SIZE) * WIDE_FONT + 28.0);
        let any_flag = groups.iter().any(|g| g.bars.iter().any(|b| b.flagged));
        let legend = groups
            .iter()
            .any(|g| g.bars.iter().any(|b| b.series.is_some()));
        // A note about flagged bars and the series legend go under the title.
        let top = 44.0 + if any_flag { 18.0 } else { 0.0 } + if legend { 20.0 } else { 0.0 };
        let plot_h = PLOT_H;
        let bottom = top + plot_h;
        let group_y = bottom + labels.height(lw) + 14.0;
        let lines = group_lines.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let zero = bottom - yp.frac(0.0_f64.clamp(yp.lo, yp.hi)) * plot_h;
        Some(Columns {
            yp,
            slot,
            bar_w,
            labels,
            group_lines,
            any_flag,
            ref_label,
            w,
            h: group_y + (lines - 1) as f64 * GROUP_LINE_H + 14.0,
            left,
            right,
            top,
            bottom,
            plot_h,
            zero,
            group_y,
        })
    }

    fn draw(
        &self,
        out: &mut String,
        sid: &str,
        title: &str,
        y_label: &str,
        groups: &[&BarGroup],
        reference: Option<f64>,
    ) {
        open_svg(out, sid, title, self.w, self.h);
        if self.any_flag {
            push_flag_defs(out, sid);
        }
        if groups
            .iter()
            .any(|g| g.bars.iter().any(|b| b.series.is_some()))
        {
            push_series_legend(out, groups, self.left, self.top - 14.0);
        }
        self.push_axis(out, y_label);
        // Bars left to right, each group followed by its gap.
        let mut x = self.left;
        for (gi, g) in groups.iter().enumerate() {
            x = self.push_group(out, sid, gi, g, x);
        }
        if let Some(r) = reference {
            self.push_reference(out, r);
        }
        out.push_str("</svg>");
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
        let rule_y = self.group_y - 10.0;
        push_line(out, "group-rule", [gx0 + 1.0, rule_y, gx1 - 1.0, rule_y]);
        for (i, line) in self.group_lines[gi].iter().enumerate() {
            let _ = write!(
                out,
                "<text class=\"axis-label group-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>",
                P((gx0 + gx1) / 2.0),
                P(self.group_y + 4.0 + i as f64 * GROUP_LINE_H),
                tip(&g.label),
                escape(line),
            );
        }
        out.push_str("</g>");
        x + slot * GROUP_GAP
    }

    /// Bar `b` of group `gi` centred on `cx`, from zero to its value (cut at
    /// the axis ends), coloured by its group; hatched and marked "!" when
    /// flagged; "n/a" instead when it has no value.
    fn push_bar(&self, out: &mut String, sid: &str, gi: usize, g: &BarGroup, b: &Bar, cx: f64) {
        let tooltip = bar_tooltip(g, b);
        if !b.value.is_finite() {
            // No value (failed or skipped case): say so where the bar would be.
            let _ = write!(
                out,
                "<text class=\"tick\" transform=\"translate({} {}) rotate(-90)\" style=\"font-size:{LABEL_SIZE}px\">n/a{}</text>",
                P(cx + 3.5),
                P(self.zero - 4.0),
                tip(&tooltip)
            );
            return;
        }
        let v = b.value.clamp(self.yp.lo, self.yp.hi);
        let (y0, y1) = (self.ypos(v).min(self.zero), self.ypos(v).max(self.zero));
        let x = cx - self.bar_w / 2.0;
        push_bar_rect(out, sid, gi, b, &tooltip, [x, y0, self.bar_w, y1 - y0]);
        if let Some((lo, hi)) = b.interval.filter(|(l, h)| l.is_finite() && h.is_finite()) {
            let (lo, hi) = (
                lo.clamp(self.yp.lo, self.yp.hi),
                hi.clamp(self.yp.lo, self.yp.hi),
            );
            push_whisker(out, true, cx, self.ypos(lo), self.ypos(hi));
        }
        if b.flagged {
            let _ = write!(
                out,
                "<text class=\"flag\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">!</text>",
                P(cx),
                P(y0 - 3.0)
            );
        }
    }

    /// Bar `b`'s label under the plot at `cx`, drawn as the layout chose.
    fn push_bar_label(&self, out: &mut String, b: &Bar, cx: f64) {
        let label = escape(&b.label);
        let (tx, ty, angle) = match self.labels {
            BarLabels::Horizontal => {
                let _ = write!(
                    out,
                    "<text class=\"tick bar-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" style=\"font-size:{LABEL_SIZE}px\">{label}</text>",
                    P(cx),
                    P(self.bottom + 14.0)
                );
                return;
            }
            BarLabels::Diagonal => (cx + 3.0, self.bottom + 10.0, -45),
            BarLabels::Vertical => (cx + 3.5, self.bottom + 6.0, -90),
        };
        let _ = write!(
            out,
            "<text class=\"tick bar-label\" transform=\"translate({} {}) rotate({angle})\" text-anchor=\"end\" style=\"font-size:{LABEL_SIZE}px\">{label}</text>",
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

/// One row of the row layout: a group's header (`continued` when the
/// group began in the previous column), or one bar.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Row {
    Head { group: usize, continued: bool },
    Bar { group: usize, bar: usize },
}

impl Row {
    fn height(self) -> f64 {
        match self {
            Row::Head { .. } => HEAD_H,
            Row::Bar { .. } => ROW_H,
        }
    }
}

/// The text beside a bar of the row layout: its value to three
/// significant digits, or "n/a".
fn value_text(v: f64) -> String {
    if v.is_finite() {
        significant(v, 3)
    } else {
        "n/a".into()
    }
}

/// Where everything of the row layout goes.
struct Rows {
    yp: AxisPlan,
    any_flag: bool,
    /// Left edge of the first column.
    margin: f64,
    /// Bar labels end here, right-aligned, from a column's left edge.
    label_w: f64,
    /// Width of one column, and its rows, top to bottom.
    col_w: f64,
    cols: Vec<Vec<Row>>,
    /// Baselines of the value axis title and of the tick labels.
    title_y: f64,
    tick_y: f64,
    /// Top of the first row.
    top: f64,
    ref_label: Option<String>,
    w: f64,
    h: f64,
}

impl Rows {
    fn new(
        title: &str,
        y_label: &str,
        groups: &[&BarGroup],
        yp: AxisPlan,
        reference: Option<f64>,
    ) -> Rows {
        let bars = || groups.iter().flat_map(|g| &g.bars);
        let any_flag = bars().any(|b| b.flagged);
        let label_w = widest(bars().map(|b| &b.label), ROW_SIZE) * WIDE_FONT;
        let value_w = widest(bars().map(|b| value_text(b.value)), ROW_SIZE) * WIDE_FONT
            + if any_flag { 10.0 } else { 0.0 };
        let tick_w = widest(yp.labels(), TICK_SIZE) * WIDE_FONT;
        let head_w = widest(
            groups.iter().map(|g| format!("{}{CONTINUED}", g.label)),
            GROUP_SIZE,
        ) * WIDE_FONT
            + 14.0;
        // The lowest tick's label is centred on the start of the bars.
        let margin = MARGIN.max(tick_w / 2.0 + 4.0 - label_w - 8.0);
        let col_w = (label_w + 8.0 + ROW_BAR_W + (value_w + 4.0).max(tick_w / 2.0)).max(head_w);
        let mut rows = Vec::new();
        for (gi, g) in groups.iter().enumerate() {
            rows.push(Row::Head {
                group: gi,
                continued: false,
            });
            rows.extend((0..g.bars.len()).map(|bar| Row::Bar { group: gi, bar }));
        }
        let fit = ((ROWS_MAX_W - 2.0 * margin + COL_GAP) / (col_w + COL_GAP)).floor();
        let k = (fit.max(1.0) as usize).min(rows.len().div_ceil(MIN_COL_ROWS).max(1));
        let cols = split_rows(&rows, k);
        let title_y = if any_flag { 64.0 } else { 46.0 };
        let tick_y = title_y + 20.0;
        let top = tick_y + 8.0;
        let longest = cols
            .iter()
            .map(|c| c.iter().map(|r| r.height()).sum::<f64>())
            .fold(0.0, f64::max);
        let ref_label = reference.map(|r| compact(r, 3));
        let h = top + longest + if ref_label.is_some() { 26.0 } else { 10.0 };
        let k = cols.len() as f64;
        let w = (2.0 * margin + k * col_w + (k - 1.0) * COL_GAP)
            .max(text_w(title, TITLE_SIZE) * WIDE_FONT + 28.0)
            .max(text_w(y_label, GROUP_SIZE) * WIDE_FONT + 24.0);
        Rows {
            yp,
            any_flag,
            margin,
            label_w,
            col_w,
            cols,
            title_y,
            tick_y,
            top,
            ref_label,
            w,
            h,
        }
    }

    fn draw(
        &self,
        out: &mut String,
        sid: &str,
        title: &str,
        y_label: &str,
        groups: &[&BarGroup],
        reference: Option<f64>,
    ) {
        open_svg(out, sid, title, self.w, self.h);
        if self.any_flag {
            push_flag_defs(out, sid);
        }
        let _ = write!(
            out,
            "<text class=\"axis-label\" x=\"{}\" y=\"{}\">{}</text>",
            P(MARGIN),
            P(self.title_y),
            escape(y_label)
        );
        for (c, rows) in self.cols.iter().enumerate() {
            let x0 = self.margin + c as f64 * (self.col_w + COL_GAP);
            self.push_column(out, sid, x0, rows, groups, reference);
        }
        out.push_str("</svg>");
    }

    /// One column from its left edge `x0`: its value axis on top, grid
    /// and reference line through it, then its rows.
    fn push_column(
        &self,
        out: &mut String,
        sid: &str,
        x0: f64,
        rows: &[Row],
        groups: &[&BarGroup],
        reference: Option<f64>,
    ) {
        let bx = x0 + self.label_w + 8.0;
        let xpos = |v: f64| bx + self.yp.frac(v.clamp(self.yp.lo, self.yp.hi)) * ROW_BAR_W;
        let bottom = self.top + rows.iter().map(|r| r.height()).sum::<f64>();
        let (grid_top, zero) = (self.top - 4.0, xpos(0.0));
        let xpx: Vec<f64> = self.yp.ticks.iter().map(|&v| xpos(v)).collect();
        let labels = self.yp.labels();
        let shown = thin_labels(&xpx, &self.yp.major, |i| {
            text_w(&labels[i], TICK_SIZE) * WIDE_FONT
        });
        out.push_str("<g class=\"rows-column\"><g class=\"grid-lines\">");
        push_grid(out, &xpx, &shown, |p| [p, grid_top, p, bottom]);
        out.push_str("</g><g class=\"x-ticks\">");
        for (i, &px) in xpx.iter().enumerate().filter(|&(i, _)| shown[i]) {
            let _ = write!(
                out,
                "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                P(px),
                P(self.tick_y),
                escape(&labels[i])
            );
        }
        out.push_str("</g>");
        push_line(out, "axis", [zero, grid_top, zero, bottom]);
        let mut y = self.top;
        for &row in rows {
            match row {
                Row::Head { group, continued } => {
                    let g = groups[group];
                    let _ = write!(
                        out,
                        "<rect class=\"swatch s{}\" x=\"{}\" y=\"{}\" width=\"9\" height=\"9\"/>\
                         <text class=\"axis-label group-label\" x=\"{}\" y=\"{}\">{}{}{}</text>",
                        group % 8,
                        P(x0),
                        P(y + HEAD_H - 13.0),
                        P(x0 + 13.0),
                        P(y + HEAD_H - 5.0),
                        tip(&g.label),
                        escape(&g.label),
                        if continued { CONTINUED } else { "" }
                    );
                }
                Row::Bar { group, bar } => {
                    self.push_row(out, sid, group, groups[group], bar, x0, y, &xpos);
                }
            }
            y += row.height();
        }
        if let (Some(r), Some(label)) = (reference, &self.ref_label) {
            if (self.yp.lo..=self.yp.hi).contains(&r) {
                let px = xpos(r);
                let _ = write!(
                    out,
                    "<g class=\"ref-g\">{}<line class=\"ref\" x1=\"{p}\" y1=\"{}\" x2=\"{p}\" y2=\"{}\"/>\
                     <text class=\"tick\" x=\"{p}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
                    tip(&format!("reference: {r}")),
                    P(grid_top),
                    P(bottom + 2.0),
                    P(bottom + 15.0),
                    escape(label),
                    p = P(px)
                );
            }
        }
        out.push_str("</g>");
    }

    /// Bar `bi` of group `gi` in the row at `y` of the column at `x0`: its
    /// label right-aligned before the bars, the bar from zero, its value
    /// after the bar's end.
    #[allow(clippy::too_many_arguments)]
    fn push_row(
        &self,
        out: &mut String,
        sid: &str,
        gi: usize,
        g: &BarGroup,
        bi: usize,
        x0: f64,
        y: f64,
        xpos: &impl Fn(f64) -> f64,
    ) {
        let b = &g.bars[bi];
        let base = y + ROW_H - 4.0;
        let _ = write!(
            out,
            "<text class=\"tick bar-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\" style=\"font-size:{ROW_SIZE}px\">{}</text>",
            P(x0 + self.label_w),
            P(base),
            escape(&b.label)
        );
        let zero = xpos(0.0);
        let mut end = zero;
        if b.value.is_finite() {
            let px = xpos(b.value);
            let (x1, x2) = (px.min(zero), px.max(zero));
            push_bar_rect(
                out,
                sid,
                gi,
                b,
                &bar_tooltip(g, b),
                [x1, y + 2.5, x2 - x1, ROW_H - 5.0],
            );
            end = x2;
            if let Some((lo, hi)) = b.interval.filter(|(l, h)| l.is_finite() && h.is_finite()) {
                push_whisker(out, false, y + ROW_H / 2.0, xpos(lo), xpos(hi));
                end = end.max(xpos(hi));
            }
        }
        let value = value_text(b.value);
        let _ = write!(
            out,
            "<text class=\"tick bar-value\" x=\"{}\" y=\"{}\" style=\"font-size:{ROW_SIZE}px\">{}</text>",
            P(end + 4.0),
            P(base),
            escape(&value)
        );
        if b.flagged {
            let _ = write!(
                out,
                "<text class=\"flag\" x=\"{}\" y=\"{}\">!</text>",
                P(end + 6.0 + text_w(&value, ROW_SIZE) * WIDE_FONT),
                P(base)
            );
        }
    }
}

/// Bars a group's header keeps with it in its column: a header with only
/// a bar or two under it, the rest of its group in the next column, reads
/// as a group of its own.
const KEEP_WITH_HEAD: usize = 3;

/// `rows` in `k` columns of about equal height, a group's header never
/// parted from its first bars; a column that starts inside a group starts
/// with the group's header again, marked continued.
fn split_rows(rows: &[Row], k: usize) -> Vec<Vec<Row>> {
    let total: f64 = rows.iter().map(|r| r.height()).sum();
    let target = total / k as f64;
    let mut cols: Vec<Vec<Row>> = vec![Vec::new()];
    let mut h = 0.0;
    for (i, &row) in rows.iter().enumerate() {
        let need = match row {
            Row::Head { .. } => {
                let first_bars = rows[i + 1..]
                    .iter()
                    .take(KEEP_WITH_HEAD)
                    .take_while(|r| matches!(r, Row::Bar { .. }))
                    .count();
                HEAD_H + ROW_H * first_bars as f64
            }
            Row::Bar { .. } => ROW_H,
        };
        if cols.len() < k && h > 0.0 && h + need > target + ROW_H / 2.0 {
            cols.push(Vec::new());
            h = 0.0;
            if let Row::Bar { group, .. } = row {
                cols.last_mut().unwrap().push(Row::Head {
                    group,
                    continued: true,
                });
                h += HEAD_H;
            }
        }
        cols.last_mut().unwrap().push(row);
        h += row.height();
    }
    cols
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
            interval: None,
            series: None,
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

    /// The size of `e`'s text as the page's CSS draws it.
    fn font_size(e: &El) -> f64 {
        if let Some(px) = e.attr("style").and_then(|s| {
            s.split("font-size:")
                .nth(1)
                .and_then(|r| r.split("px").next())
        }) {
            return px.parse().unwrap();
        }
        [
            ("chart-title", 15.0),
            ("tick", 11.0),
            ("flag", 11.0),
            ("nodata", 14.0),
        ]
        .iter()
        .find(|(c, _)| e.has_class(c))
        .map_or(12.0, |&(_, s)| s)
    }

    /// Each `<text>` with the four corners of its box: the estimated width
    /// (in a wide font), ascent and descent of a UI font, placed by its
    /// anchor and turned by its transform.
    fn text_boxes(els: &[El]) -> Vec<(String, [(f64, f64); 4])> {
        find(els, "text", "")
            .into_iter()
            .map(|(_, e)| {
                let size = font_size(e);
                let w = text_w(&e.text, size) * WIDE_FONT;
                let (x0, x1) = match e.attr("text-anchor") {
                    Some("middle") => (-w / 2.0, w / 2.0),
                    Some("end") => (-w, 0.0),
                    _ => (0.0, w),
                };
                let (y0, y1) = (-0.95 * size, 0.25 * size);
                let (ox, oy, angle) = match e.attr("transform") {
                    Some(t) => {
                        let nums: Vec<f64> = t
                            .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
                            .filter(|s| !s.is_empty())
                            .map(|s| s.parse().unwrap())
                            .collect();
                        (nums[0], nums[1], nums.get(2).copied().unwrap_or(0.0))
                    }
                    None => (e.num("x"), e.num("y"), 0.0),
                };
                let (sin, cos) = angle.to_radians().sin_cos();
                let turn = |x: f64, y: f64| (ox + x * cos - y * sin, oy + x * sin + y * cos);
                let corners = [turn(x0, y0), turn(x1, y0), turn(x1, y1), turn(x0, y1)];
                (e.text.clone(), corners)
            })
            .collect()
    }

    /// Whether two convex boxes overlap by more than half a pixel
    /// (separating axes: the edges of either box).
    fn overlap(a: &[(f64, f64); 4], b: &[(f64, f64); 4]) -> bool {
        let axes = [(a[0], a[1]), (a[1], a[2]), (b[0], b[1]), (b[1], b[2])];
        axes.iter().all(|&(p, q)| {
            let (dx, dy) = (q.0 - p.0, q.1 - p.1);
            let len = dx.hypot(dy);
            if len == 0.0 {
                return true;
            }
            let (nx, ny) = (-dy / len, dx / len);
            let span = |bx: &[(f64, f64); 4]| {
                bx.iter()
                    .map(|&(x, y)| x * nx + y * ny)
                    .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
                        (lo.min(v), hi.max(v))
                    })
            };
            let ((alo, ahi), (blo, bhi)) = (span(a), span(b));
            ahi.min(bhi) - alo.max(blo) > 0.5
        })
    }

    /// What "readable" means, asserted on a drawn chart of `groups`: no
    /// text cut, no two texts overlapping, every text inside the chart,
    /// every bar named by a visible label of its own, every group named.
    fn check_readable(svg: &str, groups: &[BarGroup]) {
        let els = doc(svg);
        let texts = find(&els, "text", "");
        assert!(
            texts.iter().all(|(_, e)| !e.text.contains('…')),
            "a text is cut"
        );
        let boxes = text_boxes(&els);
        for (i, (ta, a)) in boxes.iter().enumerate() {
            for (tb, b) in &boxes[i + 1..] {
                assert!(!overlap(a, b), "{ta:?} overlaps {tb:?}: {a:?} {b:?}");
            }
        }
        let view: Vec<f64> = els[0]
            .attr("viewBox")
            .unwrap()
            .split(' ')
            .map(|s| s.parse().unwrap())
            .collect();
        for (t, corners) in &boxes {
            for &(x, y) in corners {
                assert!(
                    (-0.5..=view[2] + 0.5).contains(&x) && (-0.5..=view[3] + 0.5).contains(&y),
                    "{t:?} leaves the chart ({x}, {y}) of {view:?}"
                );
            }
        }
        let mut shown: Vec<&str> = find(&els, "text", "bar-label")
            .iter()
            .map(|(_, e)| e.text.as_str())
            .collect();
        let mut wanted: Vec<&str> = groups
            .iter()
            .flat_map(|g| &g.bars)
            .map(|b| b.label.as_str())
            .collect();
        shown.sort_unstable();
        wanted.sort_unstable();
        assert_eq!(shown, wanted, "every bar has a visible label of its own");
        let group_texts: Vec<String> = find(&els, "text", "group-label")
            .iter()
            .map(|(_, e)| e.text.trim_end_matches(CONTINUED).to_string())
            .collect();
        for g in groups {
            // A wrapped label's lines follow each other.
            let named = (1..=MAX_GROUP_LINES)
                .any(|k| group_texts.windows(k).any(|w| w.join(" ") == g.label));
            assert!(named, "group {:?} not named in {group_texts:?}", g.label);
        }
    }

    /// `n` bars with long two-thread labels spread over up to 21 hop
    /// classes, as a sweep of a big machine draws them; one flagged and one
    /// without a value when there are ten or more.
    fn sweep_like(n: usize) -> Vec<BarGroup> {
        let items = ["r0", "r1", "r2", "w0", "w1", "w2"];
        let mut classes = Vec::new();
        for (i, a) in items.iter().enumerate() {
            for b in &items[i..] {
                classes.push(format!("{a}/{b}"));
            }
        }
        let k = classes.len().min(n);
        let mut groups: Vec<BarGroup> = classes[..k]
            .iter()
            .map(|c| BarGroup {
                label: c.clone(),
                bars: Vec::new(),
            })
            .collect();
        for i in 0..n {
            let label = format!(
                "{}.{}.w.{} {}.{}.r.{}",
                10 + i % 7,
                i % 13,
                11 + i % 5,
                12 + i % 3,
                i / 13,
                i % 16
            );
            let value = 1.0 + (i % 17) as f64 * 0.13;
            groups[i % k]
                .bars
                .push(bar(&label, value, n >= 10 && i == 3));
        }
        if n >= 10 {
            groups[1].bars[0].value = f64::NAN;
        }
        groups
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
        check_readable(&svg, &sample_groups());
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
        // Group labels under the bars, whole.
        for g in ["0 hops", "1 hop", "2 hops"] {
            assert!(find(&els, "text", "axis-label")
                .iter()
                .any(|(_, e)| e.text == g));
        }
    }

    #[test]
    fn intervals_are_whiskers_and_series_colour_the_thing_compared() {
        // Two workloads, three policies each: coloured by policy, with a
        // legend; each bar's 95% interval a whisker spanning it.
        let groups: Vec<BarGroup> = ["copy", "triad"]
            .iter()
            .map(|w| BarGroup {
                label: w.to_string(),
                bars: ["local", "interleave", "node 1"]
                    .iter()
                    .enumerate()
                    .map(|(k, p)| Bar {
                        label: p.to_string(),
                        value: 10.0 + k as f64,
                        tooltip: String::new(),
                        flagged: false,
                        interval: Some((9.0 + k as f64, 12.0 + k as f64)),
                        series: Some(k),
                    })
                    .collect(),
            })
            .collect();
        for rows in [false, true] {
            // Many groups force the row layout.
            let many: Vec<BarGroup> = if rows {
                (0..40)
                    .map(|i| BarGroup {
                        label: format!("workload {i}"),
                        ..groups[i % 2].clone()
                    })
                    .collect()
            } else {
                groups.clone()
            };
            let svg = bar_chart("p", "Policies", "GB/s", &many, None);
            check_no_literal_colours(&svg);
            let els = doc(&svg);
            let bars = find(&els, "rect", "bar");
            let whiskers = find(&els, "path", "whisker");
            assert_eq!(whiskers.len(), bars.len(), "rows {rows}");
            let t = title_of(&els, bars[1].0).unwrap();
            assert!(t.contains("95% interval 10–13"), "{t}");
            if rows {
                continue;
            }
            // Policy k has colour k in both groups.
            for (i, (_, b)) in bars.iter().enumerate() {
                assert!(b.has_class(&format!("s{}", i % 3)), "bar {i}");
            }
            let legend: Vec<String> = find(&els, "text", "legend")
                .iter()
                .map(|(_, e)| e.text.clone())
                .collect();
            assert_eq!(legend, ["local", "interleave", "node 1"]);
            // A whisker spans its interval: from 9 to 12 for a bar of 10,
            // so it reaches above the bar's top.
            let (bar, w) = (bars[0].1, whiskers[0].1);
            let d = w.attr("d").unwrap();
            let nums: Vec<f64> = d
                .split(|c: char| c.is_ascii_alphabetic() || c == ' ')
                .filter_map(|t| t.parse().ok())
                .collect();
            let (top, low) = (nums[2], nums[1]);
            assert!(
                top < bar.num("y") && low > bar.num("y"),
                "{d} vs bar at {}",
                bar.num("y")
            );
        }
    }

    #[test]
    fn any_bar_count_keeps_every_label_whole_and_apart() {
        for n in [1, 10, 111, 184, 400] {
            let groups = sweep_like(n);
            let svg = bar_chart(
                "sweep",
                "Idle machine: 2 threads",
                "time / fastest case (x)",
                &groups,
                Some(1.0),
            );
            check_readable(&svg, &groups);
            let els = doc(&svg);
            let drawn = find(&els, "rect", "bar").len();
            let finite = groups
                .iter()
                .flat_map(|g| &g.bars)
                .filter(|b| b.value.is_finite())
                .count();
            assert_eq!(drawn, finite, "{n} bars");
            // Few bars stand as columns; many flow into rows of columns
            // no wider than a report page gives a figure.
            let rows = !find(&els, "g", "rows-column").is_empty();
            assert_eq!(rows, n > 100, "{n} bars");
            assert!(view_width(&els) <= ROWS_MAX_W, "{n} bars");
            if rows {
                // Every bar's value is written beside it, "n/a" for none.
                let values = find(&els, "text", "bar-value");
                assert_eq!(values.len(), n);
                assert_eq!(values.iter().filter(|(_, e)| e.text == "n/a").count(), 1);
                assert!(find(&els, "g", "rows-column").len() >= 2, "{n} bars");
            }
        }
    }

    #[test]
    fn long_group_labels_wrap_under_their_bars() {
        let titles = [
            "1 thread, unpinned",
            "1 thread, pinned",
            "64 independent programs",
            "64 threads, main thread inits",
            "64 threads, NUMA-aware",
        ];
        let groups: Vec<BarGroup> = titles
            .iter()
            .map(|t| BarGroup {
                label: t.to_string(),
                bars: ["local", "interleave", "node 3"]
                    .iter()
                    .enumerate()
                    .map(|(i, p)| bar(p, 10.0 + i as f64 * 7.5, false))
                    .collect(),
            })
            .collect();
        let svg = bar_chart(
            "fig-policies",
            "Aggregate line-read bandwidth per workload and memory policy",
            "bandwidth (GB/s)",
            &groups,
            None,
        );
        check_readable(&svg, &groups);
        let els = doc(&svg);
        // Still the columns of today, with the long titles on two lines.
        assert!(find(&els, "g", "rows-column").is_empty());
        let lines = find(&els, "text", "group-label");
        assert!(lines.len() > titles.len(), "{}", lines.len());
        assert!(lines.iter().any(|(_, e)| e.text == "64 threads, main"));
    }

    #[test]
    fn many_bars_flow_into_rows_with_their_values() {
        let groups: Vec<BarGroup> = (0..4)
            .map(|g| BarGroup {
                label: format!("{g} hops"),
                bars: (0..50)
                    .map(|i| bar(&format!("{g}.{i}.r.{}", i % 4), 1.0 + g as f64 * 0.4, false))
                    .collect(),
            })
            .collect();
        let svg = bar_chart("many", "Many", "time (x fastest)", &groups, Some(1.0));
        check_readable(&svg, &groups);
        let els = doc(&svg);
        let with_tip = find(&els, "rect", "bar");
        assert_eq!(with_tip.len(), 200);
        assert!(with_tip.iter().all(|(i, _)| title_of(&els, *i).is_some()));
        // One bar per row: in each column the bars go down without
        // overlapping, each as long as its value.
        let ys: Vec<(f64, f64)> = with_tip
            .iter()
            .map(|(_, e)| (e.num("y"), e.num("height")))
            .collect();
        let ends: Vec<f64> = with_tip
            .iter()
            .map(|(_, e)| e.num("x") + e.num("width"))
            .collect();
        let mut down = 0;
        for (w, e) in ys.windows(2).zip(ends.windows(2)) {
            if w[1].0 > w[0].0 {
                assert!(w[0].0 + w[0].1 <= w[1].0);
                down += 1;
                assert!(e[1] >= e[0] - 0.05, "values rise from group to group");
            }
        }
        assert!(down >= 190, "{down}");
        assert!(els.iter().any(|e| e.text == "0.1.r.1"));
        assert!(els.iter().any(|e| e.text == "1.4"));
        assert_eq!(
            find(&els, "line", "ref").len(),
            find(&els, "g", "rows-column").len()
        );
        assert!(view_width(&els) <= ROWS_MAX_W);
    }

    #[test]
    fn rows_split_into_balanced_columns_repeating_headers() {
        let head = |group, continued| Row::Head { group, continued };
        let mut rows = vec![head(0, false)];
        rows.extend((0..30).map(|bar| Row::Bar { group: 0, bar }));
        rows.push(head(1, false));
        rows.extend((0..9).map(|bar| Row::Bar { group: 1, bar }));
        let cols = split_rows(&rows, 3);
        assert_eq!(cols.len(), 3);
        let bars: usize = cols
            .iter()
            .map(|c| c.iter().filter(|r| matches!(r, Row::Bar { .. })).count())
            .sum();
        assert_eq!(bars, 39);
        for c in &cols {
            // Every column starts with a header, and no header is left
            // with fewer than three of its bars under it.
            assert!(matches!(c[0], Row::Head { .. }), "{c:?}");
            for (i, r) in c.iter().enumerate() {
                if matches!(r, Row::Head { .. }) {
                    assert!(c[i + 1..].len() >= 3, "{c:?}");
                    assert!(c[i + 1..i + 4].iter().all(|r| matches!(r, Row::Bar { .. })));
                }
            }
            let h: f64 = c.iter().map(|r| r.height()).sum();
            assert!((150.0..=250.0).contains(&h), "{h}");
        }
        assert_eq!(cols[1][0], head(0, true));
        assert_eq!(split_rows(&rows, 1).len(), 1);
        // A header that would get a single bar before the break moves to
        // the next column with its group.
        let mut rows = Vec::new();
        for (group, n) in [12, 10, 6].into_iter().enumerate() {
            rows.push(head(group, false));
            rows.extend((0..n).map(|bar| Row::Bar { group, bar }));
        }
        let cols = split_rows(&rows, 2);
        assert_eq!(cols[0].len(), 13);
        assert_eq!(cols[1][0], head(1, false));
    }
}
