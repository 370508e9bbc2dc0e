//! Lane charts: labelled rows of segments along one linear axis, each
//! segment coloured by its series (a thread's spans on nodes over time, a
//! region's pages by node).

use super::axis::{plan_axis, push_grid, push_x_ticks, thin_labels, Axis, AxisPlan};
use super::escape;
use super::frame::{flow, no_data, open_svg, push_line, sanitize_id, tip, P, TICK_SIZE};
use super::metrics::{fit_text, text_w, widest};
use std::fmt::Write as _;

/// One row of a [`lane_chart`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Lane {
    pub label: String,
    pub segments: Vec<Segment>,
}

/// A stretch `from..to` of a [`Lane`], in the axis's units.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Segment {
    pub from: f64,
    pub to: f64,
    /// Its colour, `s0`..`s7` (the index mod 8); `None`: neutral (a value
    /// not known).
    pub series: Option<usize>,
    /// Its tooltip.
    pub tooltip: String,
}

/// A legend entry of a [`lane_chart`]: a swatch of `series` (neutral when
/// `None`) and its name.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LaneKey {
    pub label: String,
    pub series: Option<usize>,
}

/// Width of lane charts (viewBox units, px at full size).
const CHART_W: f64 = 760.0;
/// Longest lane label drawn (px); longer ones are cut with "…".
const LABEL_MAX_W: f64 = 200.0;
/// Baseline of the first legend row, under the title.
const LEGEND_TOP: f64 = 44.0;
const LEGEND_ROW_H: f64 = 20.0;
/// Narrowest segment drawn (px): a stretch of one instant stays visible.
const MIN_SEGMENT_W: f64 = 1.5;

/// A lane chart: one outlined row per lane with its label on the left,
/// each segment a rectangle of its series' colour with its tooltip, the
/// legend's swatches above, and a linear x axis with nice ticks under the
/// lanes (from 0 unless `x.min` is given). Segments not finite are
/// skipped; without lanes the chart says "no data". Rows are thinner when
/// there are many lanes; every segment keeps at least 1.5 px.
pub fn lane_chart(id: &str, title: &str, x: &Axis, lanes: &[Lane], keys: &[LaneKey]) -> String {
    let sid = sanitize_id(id);
    if lanes.is_empty() {
        return no_data(&sid, title, "no data");
    }
    let lay = Layout::new(x, lanes, keys);
    let mut out = String::new();
    open_svg(&mut out, &sid, title, CHART_W, lay.h);
    lay.push_legend(&mut out, keys);
    lay.push_axis(&mut out);
    out.push_str("<g class=\"lanes\">");
    for (i, lane) in lanes.iter().enumerate() {
        lay.push_lane(&mut out, i, lane);
    }
    out.push_str("</g></svg>");
    out
}

struct Layout<'a> {
    x: &'a Axis,
    xp: AxisPlan,
    xlabels: Vec<String>,
    legend: Vec<(f64, f64)>,
    label_size: f64,
    left: f64,
    right: f64,
    top: f64,
    lane_h: f64,
    gap: f64,
    bottom: f64,
    h: f64,
}

impl<'a> Layout<'a> {
    fn new(x: &'a Axis, lanes: &[Lane], keys: &[LaneKey]) -> Layout<'a> {
        let values: Vec<f64> = lanes
            .iter()
            .flat_map(|l| &l.segments)
            .flat_map(|s| [s.from, s.to])
            .filter(|v| v.is_finite())
            .collect();
        let xp = plan_axis(x, &values, true);
        let xlabels = xp.labels();
        let (lane_h, gap, label_size) = match lanes.len() {
            0..=8 => (22.0, 6.0, 11.0),
            9..=24 => (14.0, 4.0, 11.0),
            _ => (9.0, 3.0, 9.5),
        };
        let label_w = widest(lanes.iter().map(|l| &l.label), label_size).min(LABEL_MAX_W);
        let left = (label_w + 20.0).max(40.0);
        let last_xw = xlabels.last().map_or(0.0, |s| text_w(s, TICK_SIZE));
        let right = CHART_W - (last_xw / 2.0 + 8.0).max(16.0);
        let widths = keys.iter().map(|k| 18.0 + text_w(&k.label, 12.0) + 16.0);
        let (legend, rows) = flow(widths, left, LEGEND_TOP, LEGEND_ROW_H, CHART_W - 10.0);
        let top = LEGEND_TOP + rows as f64 * LEGEND_ROW_H + 4.0;
        let bottom = top + lanes.len() as f64 * (lane_h + gap) - gap;
        Layout {
            x,
            xp,
            xlabels,
            legend,
            label_size,
            left,
            right,
            top,
            lane_h,
            gap,
            bottom,
            h: bottom + 48.0,
        }
    }

    fn xpos(&self, v: f64) -> f64 {
        self.left + self.xp.frac(v).clamp(0.0, 1.0) * (self.right - self.left)
    }

    /// A swatch and name per key, left to right under the title.
    fn push_legend(&self, out: &mut String, keys: &[LaneKey]) {
        out.push_str("<g class=\"legend\">");
        for (k, &(lx, ly)) in keys.iter().zip(&self.legend) {
            let _ = write!(
                out,
                "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"12\" height=\"10\"/><text x=\"{}\" y=\"{}\">{}</text>",
                class_of(k.series, "swatch"),
                P(lx),
                P(ly - 6.0),
                P(lx + 18.0),
                P(ly + 4.0),
                escape(&k.label)
            );
        }
        out.push_str("</g>");
    }

    /// Vertical grid lines at the ticks across the lanes, the x axis under
    /// them with its labelled ticks, and its title.
    fn push_axis(&self, out: &mut String) {
        let xpx: Vec<f64> = self.xp.ticks.iter().map(|&v| self.xpos(v)).collect();
        let shown = thin_labels(&xpx, &self.xp.major, |i| {
            text_w(&self.xlabels[i], TICK_SIZE)
        });
        let (top, bottom) = (self.top, self.bottom + 2.0);
        out.push_str("<g class=\"grid-lines\">");
        push_grid(out, &xpx, &shown, |p| [p, top, p, bottom]);
        out.push_str("</g>");
        push_line(out, "axis", [self.left, bottom, self.right, bottom]);
        out.push_str("<g class=\"x-ticks\">");
        push_x_ticks(out, &xpx, &shown, &self.xlabels, bottom);
        let _ = write!(
            out,
            "</g><text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            P((self.left + self.right) / 2.0),
            P(bottom + 38.0),
            escape(&self.x.label)
        );
    }

    /// Lane `i`: its label, its outline, its segments.
    fn push_lane(&self, out: &mut String, i: usize, lane: &Lane) {
        let y = self.top + i as f64 * (self.lane_h + self.gap);
        let size = self.label_size;
        let _ = write!(
            out,
            "<g class=\"lane\"><text class=\"tick lane-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\" style=\"font-size:{size}px\">{}</text>",
            P(self.left - 8.0),
            P(y + self.lane_h / 2.0 + size * 0.35),
            escape(&fit_text(&lane.label, size, LABEL_MAX_W))
        );
        let _ = write!(
            out,
            "<rect class=\"grid\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/>",
            P(self.left),
            P(y),
            P(self.right - self.left),
            P(self.lane_h)
        );
        for s in lane
            .segments
            .iter()
            .filter(|s| s.from.is_finite() && s.to.is_finite())
        {
            let (a, b) = (self.xpos(s.from.min(s.to)), self.xpos(s.from.max(s.to)));
            let w = (b - a).max(MIN_SEGMENT_W);
            let _ = write!(
                out,
                "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">{}</rect>",
                class_of(s.series, "bar segment"),
                P(a.min(self.right - w)),
                P(y),
                P(w),
                P(self.lane_h),
                tip(&s.tooltip)
            );
        }
        out.push_str("</g>");
    }
}

/// `base sN` for series N, or the neutral `base hm-none`.
fn class_of(series: Option<usize>, base: &str) -> String {
    match series {
        Some(n) => format!("{base} s{}", n % 8),
        None => format!("{base} hm-none"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::super::{Scale, TickFormat};
    use super::*;

    fn seg(from: f64, to: f64, series: Option<usize>, tooltip: &str) -> Segment {
        Segment {
            from,
            to,
            series,
            tooltip: tooltip.into(),
        }
    }

    #[test]
    fn segments_sit_on_the_axis_with_their_colours_and_tooltips() {
        let x = Axis::new("time (s)", Scale::Linear, TickFormat::Number);
        let lanes = vec![
            Lane {
                label: HOSTILE.into(),
                segments: vec![
                    seg(0.0, 5.0, Some(0), "first"),
                    seg(5.0, 10.0, Some(9), "second"),
                ],
            },
            Lane {
                label: "thread 2".into(),
                segments: vec![
                    seg(2.5, 2.5, None, HOSTILE),
                    seg(f64::NAN, 1.0, Some(0), "x"),
                ],
            },
        ];
        let keys = [
            LaneKey {
                label: "node 0".into(),
                series: Some(0),
            },
            LaneKey {
                label: "unknown".into(),
                series: None,
            },
        ];
        let svg = lane_chart("lanes<1>", HOSTILE, &x, &lanes, &keys);
        let els = doc(&svg);
        check_root(&els, "lanes_1_", HOSTILE_CLEAN);
        check_no_literal_colours(&svg);
        let segs = find(&els, "rect", "segment");
        assert_eq!(segs.len(), 3, "the NaN segment is skipped");
        let (a, b, c) = (segs[0].1, segs[1].1, segs[2].1);
        assert!(a.has_class("s0") && b.has_class("s1") && c.has_class("hm-none"));
        // Two halves of one axis from 0 to 10: equal widths, end to end.
        assert_eq!(a.num("width"), b.num("width"));
        assert!((a.num("x") + a.num("width") - b.num("x")).abs() < 0.2);
        // An instant keeps a visible width, halfway along.
        assert_eq!(c.num("width"), MIN_SEGMENT_W);
        assert!((c.num("x") - (a.num("x") + a.num("width") / 2.0)).abs() < 0.2);
        assert_eq!(title_of(&els, segs[0].0).as_deref(), Some("first"));
        assert_eq!(title_of(&els, segs[2].0).as_deref(), Some(HOSTILE_CLEAN));
        let labels: Vec<&str> = find(&els, "text", "lane-label")
            .iter()
            .map(|(_, e)| e.text.as_str())
            .collect();
        assert_eq!(labels, [HOSTILE_CLEAN, "thread 2"]);
        assert!(els.iter().any(|e| e.text == "unknown"));
        assert!(els.iter().any(|e| e.text == "10"), "the axis ends at 10");
        assert!(doc(&lane_chart("e", "e", &x, &[], &keys))
            .iter()
            .any(|e| e.text == "no data"));
    }
}
