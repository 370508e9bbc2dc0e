//! Line charts: series of (x, y) points on linear or log axes, with a
//! legend, vertical markers (cache sizes) and emphasised points (a knee).

use super::axis::{
    accepts, plan_axis, push_grid, push_x_ticks, push_y_label, thin_labels, y_gutter, y_ticks,
    Axis, AxisPlan,
};
use super::escape;
use super::format::exact;
use super::frame::{
    flow, no_data, open_svg, push_line, push_rotated_title, sanitize_id, tip, P, TICK_SIZE,
};
use super::metrics::text_w;
use std::fmt::Write as _;

/// One line of a [`line_chart`]; its colour is its index in the slice, mod 8.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub dashed: bool,
}

/// A vertical dashed line across a [`line_chart`] with a label at its top
/// (cache sizes: "L1 48 KiB").
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Marker {
    pub x: f64,
    pub label: String,
}

/// An emphasised point of a [`line_chart`] with a label (a knee).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PointMark {
    pub x: f64,
    pub y: f64,
    pub label: String,
}

/// Width of line charts (viewBox units, px at full size).
const CHART_W: f64 = 760.0;
/// Height of the plot area.
const PLOT_H: f64 = 300.0;
/// Baseline of the first legend row, under the title.
const LEGEND_TOP: f64 = 44.0;
/// Distance of legend rows.
const LEGEND_ROW_H: f64 = 20.0;
/// Distance of marker label rows.
const MARKER_ROW_H: f64 = 15.0;

/// A line chart: one polyline with point circles per series (single-point
/// series show as a circle), nice ticks on both axes, axis labels, a legend
/// of series names, vertical dashed `markers` labelled above the plot and
/// emphasised `marks`. NaN and infinite points (and non-positive ones on log
/// axes) are skipped; without any point left the chart says "no data". A
/// linear y axis starts at 0 unless `y.min` is given.
pub fn line_chart(
    id: &str,
    title: &str,
    x: &Axis,
    y: &Axis,
    series: &[Series],
    markers: &[Marker],
    marks: &[PointMark],
) -> String {
    let sid = sanitize_id(id);
    let Some(data) = Visible::select(x, y, series, markers, marks) else {
        return no_data(&sid, title, "no data");
    };
    let lay = Layout::new(x, y, series, &data);

    let mut out = String::new();
    open_svg(&mut out, &sid, title, lay.w, lay.h);
    // Lines are clipped to the plot (with room for a point's circle):
    // bounds the caller fixed may cut through the data.
    let _ = write!(
        out,
        "<defs><clipPath id=\"{sid}-clip\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
        P(lay.left - 4.0),
        P(lay.top - 4.0),
        P(lay.plot_w + 8.0),
        P(lay.plot_h + 8.0)
    );
    lay.push_grid_and_ticks(&mut out);
    lay.push_axis_titles(&mut out);
    lay.push_markers(&mut out, &data.markers);
    for (i, (s, p)) in series.iter().zip(&data.pts).enumerate() {
        lay.push_series(&mut out, &sid, i, s, p);
    }
    lay.push_marks(&mut out, &data.marks);
    lay.push_legend(&mut out, series);
    out.push_str("</svg>");
    out
}

/// What of the input the axes can show (finite, positive on log axes).
struct Visible<'a> {
    /// The points of each series, in the order of the series.
    pts: Vec<Vec<(f64, f64)>>,
    markers: Vec<&'a Marker>,
    marks: Vec<&'a PointMark>,
}

impl<'a> Visible<'a> {
    /// The visible input, or `None` when no point is left to draw.
    fn select(
        x: &Axis,
        y: &Axis,
        series: &[Series],
        markers: &'a [Marker],
        marks: &'a [PointMark],
    ) -> Option<Visible<'a>> {
        let ok = |p: &(f64, f64)| accepts(x.scale, p.0) && accepts(y.scale, p.1);
        let pts: Vec<Vec<(f64, f64)>> = series
            .iter()
            .map(|s| s.points.iter().copied().filter(ok).collect())
            .collect();
        if pts.iter().all(|p| p.is_empty()) {
            return None;
        }
        Some(Visible {
            pts,
            markers: markers.iter().filter(|m| accepts(x.scale, m.x)).collect(),
            marks: marks.iter().filter(|m| ok(&(m.x, m.y))).collect(),
        })
    }
}

/// A marker's label as placed above the plot.
struct MarkerLabel {
    /// Index into the visible markers.
    marker: usize,
    /// The marker's x position.
    x: f64,
    /// Whether the label ends at the line (no room right of it).
    end: bool,
    /// Label row, 0 the highest.
    row: usize,
}

/// Where everything of a line chart goes.
struct Layout<'a> {
    x: &'a Axis,
    y: &'a Axis,
    xp: AxisPlan,
    yp: AxisPlan,
    xlabels: Vec<String>,
    ylabels: Vec<String>,
    w: f64,
    h: f64,
    left: f64,
    right: f64,
    plot_w: f64,
    top: f64,
    bottom: f64,
    plot_h: f64,
    /// Position of each series' legend item.
    legend: Vec<(f64, f64)>,
    markers: Vec<MarkerLabel>,
    marker_rows: f64,
    /// Radius of the point circles.
    point_r: f64,
}

impl<'a> Layout<'a> {
    fn new(x: &'a Axis, y: &'a Axis, series: &[Series], data: &Visible) -> Layout<'a> {
        // Markers and marks widen the axes too: a cache size beyond the
        // data still gets its line.
        let mut xs: Vec<f64> = data.pts.iter().flatten().map(|p| p.0).collect();
        xs.extend(data.markers.iter().map(|m| m.x));
        xs.extend(data.marks.iter().map(|m| m.x));
        let mut ys: Vec<f64> = data.pts.iter().flatten().map(|p| p.1).collect();
        ys.extend(data.marks.iter().map(|m| m.y));
        let xp = plan_axis(x, &xs, false);
        let yp = plan_axis(y, &ys, true);

        // Horizontal: the y labels on the left, half of the last x label
        // (centred on its tick) on the right.
        let w = CHART_W;
        let ylabels = yp.labels();
        let xlabels = xp.labels();
        let last_xw = xlabels.last().map_or(0.0, |s| text_w(s, TICK_SIZE));
        let left = y_gutter(&ylabels);
        let right = w - (last_xw / 2.0 + 8.0).max(20.0);
        let plot_w = right - left;

        // Vertical: the legend rows and the marker label rows push the plot
        // down.
        let widths = series.iter().map(|s| 30.0 + text_w(&s.name, 12.0) + 18.0);
        let (legend, legend_rows) = flow(widths, left, LEGEND_TOP, LEGEND_ROW_H, w - 10.0);
        let xpos = |v: f64| left + xp.frac(v) * plot_w;
        let (markers, marker_rows) = place_marker_labels(&data.markers, xpos, left, right, w);
        let marker_rows = marker_rows as f64;
        let top = LEGEND_TOP + legend_rows as f64 * LEGEND_ROW_H + marker_rows * MARKER_ROW_H + 8.0;
        let plot_h = PLOT_H;
        let bottom = top + plot_h;
        // Smaller points on dense series, so that the line stays visible
        // between them.
        let densest = data.pts.iter().map(Vec::len).max().unwrap_or(0);
        Layout {
            x,
            y,
            xp,
            yp,
            xlabels,
            ylabels,
            w,
            h: bottom + 52.0,
            left,
            right,
            plot_w,
            top,
            bottom,
            plot_h,
            legend,
            markers,
            marker_rows,
            point_r: if densest > 80 { 1.8 } else { 2.8 },
        }
    }

    fn xpos(&self, v: f64) -> f64 {
        self.left + self.xp.frac(v) * self.plot_w
    }

    fn ypos(&self, v: f64) -> f64 {
        self.bottom - self.yp.frac(v) * self.plot_h
    }

    /// Grid lines at every tick (fainter where the label was thinned out),
    /// the axes, and the tick marks with their labels.
    fn push_grid_and_ticks(&self, out: &mut String) {
        let xpx: Vec<f64> = self.xp.ticks.iter().map(|&v| self.xpos(v)).collect();
        let xshow = thin_labels(&xpx, &self.xp.major, |i| {
            text_w(&self.xlabels[i], TICK_SIZE)
        });
        let (ypx, yshow) = y_ticks(&self.yp, |v| self.ypos(v));
        let (top, bottom, left, right) = (self.top, self.bottom, self.left, self.right);
        out.push_str("<g class=\"grid-lines\">");
        push_grid(out, &xpx, &xshow, |p| [p, top, p, bottom]);
        push_grid(out, &ypx, &yshow, |p| [left, p, right, p]);
        out.push_str("</g>");
        let _ = write!(
            out,
            "<path class=\"axis\" fill=\"none\" d=\"M{l} {t}V{b}H{r}\"/>",
            l = P(left),
            t = P(top),
            b = P(bottom),
            r = P(right)
        );
        out.push_str("<g class=\"x-ticks\">");
        push_x_ticks(out, &xpx, &xshow, &self.xlabels, bottom);
        out.push_str("</g><g class=\"y-ticks\">");
        for (i, &py) in ypx.iter().enumerate().filter(|&(i, _)| yshow[i]) {
            push_line(out, "axis", [left - 4.0, py, left, py]);
            push_y_label(out, left, py, &self.ylabels[i]);
        }
        out.push_str("</g>");
    }

    /// The x axis title under the plot, the y axis title rotated left of it.
    fn push_axis_titles(&self, out: &mut String) {
        let (x, y) = (self.x, self.y);
        let _ = write!(
            out,
            "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            P(self.left + self.plot_w / 2.0),
            P(self.bottom + 40.0),
            escape(&x.label),
        );
        push_rotated_title(out, 14.0, self.top + self.plot_h / 2.0, &y.label);
    }

    /// The markers' dashed lines across the plot, each from its label's
    /// row down to the x axis.
    fn push_markers(&self, out: &mut String, markers: &[&Marker]) {
        let x = self.x;
        for ml in &self.markers {
            let m = markers[ml.marker];
            let ly = self.top - 8.0 - (self.marker_rows - 1.0 - ml.row as f64) * MARKER_ROW_H;
            let (lx, anchor) = if ml.end {
                (ml.x - 4.0, "end")
            } else {
                (ml.x + 4.0, "start")
            };
            let _ = write!(
                out,
                "<g class=\"marker-g\">{}<line class=\"marker\" x1=\"{p}\" y1=\"{}\" x2=\"{p}\" y2=\"{}\"/>\
                 <text class=\"marker-label\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text></g>",
                tip(&format!("{}\n{}: {}", m.label, x.label, exact(m.x, x.format))),
                P(ly - 9.0),
                P(self.bottom),
                P(lx),
                P(ly),
                escape(&m.label),
                p = P(ml.x)
            );
        }
    }

    /// Series `i`: its line (clipped to the plot, for bounds the caller
    /// fixed inside the data) and a circle with a tooltip per point inside
    /// the plot.
    fn push_series(&self, out: &mut String, sid: &str, i: usize, s: &Series, pts: &[(f64, f64)]) {
        let c = i % 8;
        let dashed = if s.dashed { " dashed" } else { "" };
        out.push_str("<g class=\"series\">");
        if pts.len() > 1 {
            let mut d = String::new();
            for (k, &(a, b)) in pts.iter().enumerate() {
                let cmd = if k == 0 { "M" } else { "L" };
                let _ = write!(d, "{cmd}{} {}", P(self.xpos(a)), P(self.ypos(b)));
            }
            let _ = write!(
                out,
                "<path class=\"line s{c}{dashed}\" fill=\"none\" clip-path=\"url(#{sid}-clip)\" d=\"{d}\">{}</path>",
                tip(&s.name)
            );
        }
        // A lone point has no line to show it: draw it larger.
        let r = if pts.len() == 1 { 4.5 } else { self.point_r };
        for &(a, b) in pts {
            let (px, py) = (self.xpos(a), self.ypos(b));
            if !self.inside(px, py) {
                continue;
            }
            let _ = write!(
                out,
                "<circle class=\"pt s{c}\" cx=\"{}\" cy=\"{}\" r=\"{}\">{}</circle>",
                P(px),
                P(py),
                P(r),
                tip(&self.point_tip(&s.name, a, b))
            );
        }
        out.push_str("</g>");
    }

    /// Whether (`px`, `py`) is on the plot (with half a pixel to spare).
    fn inside(&self, px: f64, py: f64) -> bool {
        !(px < self.left - 0.5
            || px > self.right + 0.5
            || py < self.top - 0.5
            || py > self.bottom + 0.5)
    }

    /// Emphasised points: a ring and a haloed label beside it, moved to
    /// the left near the right edge and below near the top.
    fn push_marks(&self, out: &mut String, marks: &[&PointMark]) {
        for m in marks {
            let (px, py) = (self.xpos(m.x), self.ypos(m.y));
            let lw = text_w(&m.label, 12.0);
            let (lx, anchor) = if px + 9.0 + lw > self.w - 4.0 {
                (px - 9.0, "end")
            } else {
                (px + 9.0, "start")
            };
            let ly = if py - 9.0 < self.top + 10.0 {
                py + 18.0
            } else {
                py - 9.0
            };
            let _ = write!(
                out,
                "<g class=\"mark-g\"><circle class=\"mark\" cx=\"{}\" cy=\"{}\" r=\"5.5\">{}</circle>\
                 <text class=\"mark-label halo\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text></g>",
                P(px),
                P(py),
                tip(&self.point_tip(&m.label, m.x, m.y)),
                P(lx),
                P(ly),
                escape(&m.label)
            );
        }
    }

    /// One swatch (a short line with a point, dashed like the series) and
    /// name per series.
    fn push_legend(&self, out: &mut String, series: &[Series]) {
        out.push_str("<g class=\"legend\">");
        for (i, (s, &(lx, ly))) in series.iter().zip(&self.legend).enumerate() {
            let dashed = if s.dashed { " dashed" } else { "" };
            let _ = write!(
                out,
                "<path class=\"line s{c}{dashed}\" fill=\"none\" d=\"M{} {y}H{}\"/>\
                 <circle class=\"pt s{c}\" cx=\"{}\" cy=\"{y}\" r=\"2.8\"/>\
                 <text x=\"{}\" y=\"{}\">{}</text>",
                P(lx),
                P(lx + 24.0),
                P(lx + 12.0),
                P(lx + 30.0),
                P(ly + 4.0),
                escape(&s.name),
                c = i % 8,
                y = P(ly)
            );
        }
        out.push_str("</g>");
    }

    /// The tooltip of a point: what it is, then both coordinates exactly.
    fn point_tip(&self, name: &str, a: f64, b: f64) -> String {
        let (x, y) = (self.x, self.y);
        format!(
            "{name}\n{}: {}\n{}: {}",
            x.label,
            exact(a, x.format),
            y.label,
            exact(b, y.format)
        )
    }
}

/// Rows for the marker labels above the plot: each label goes right of its
/// line (left of it near the right edge) into the first row where it keeps
/// 8 px from every other label, left to right by x. Markers outside the
/// plot get no label. Returns the labels and the number of rows.
fn place_marker_labels(
    markers: &[&Marker],
    xpos: impl Fn(f64) -> f64,
    left: f64,
    right: f64,
    w: f64,
) -> (Vec<MarkerLabel>, usize) {
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut placed = Vec::new();
    let mut order: Vec<usize> = (0..markers.len()).collect();
    order.sort_by(|&a, &b| markers[a].x.total_cmp(&markers[b].x));
    for &i in &order {
        let mx = xpos(markers[i].x);
        if !(left - 0.5..=right + 0.5).contains(&mx) {
            continue;
        }
        let lw = text_w(&markers[i].label, 11.0);
        let end = mx + 4.0 + lw > w - 4.0;
        let (a, b) = if end {
            (mx - 4.0 - lw, mx)
        } else {
            (mx, mx + 4.0 + lw)
        };
        let r = rows
            .iter()
            .position(|occ| occ.iter().all(|&(s, e)| b + 8.0 <= s || a >= e + 8.0))
            .unwrap_or_else(|| {
                rows.push(Vec::new());
                rows.len() - 1
            });
        rows[r].push((a, b));
        placed.push(MarkerLabel {
            marker: i,
            x: mx,
            end,
            row: r,
        });
    }
    (placed, rows.len())
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    /// Tick labels of a rendered axis group with their positions.
    fn ticks_in(els: &[El], group: &str, coord: &str) -> Vec<(String, f64)> {
        let g = els
            .iter()
            .find(|e| e.name == "g" && e.has_class(group))
            .unwrap();
        g.children
            .iter()
            .filter(|&&c| els[c].name == "text")
            .map(|&c| (els[c].text.clone(), els[c].num(coord)))
            .collect()
    }

    #[test]
    fn rendered_ticks_are_labelled_and_monotonic() {
        let kib: f64 = 1024.0;
        let mib = kib * kib;
        let mut points = Vec::new();
        let mut s = 32.0 * kib;
        while s <= 128.0 * mib {
            points.push((s, 100.0 / (1.0 + s.log2())));
            s *= 2.0;
        }
        let svg = line_chart(
            "sizes",
            "Bandwidth vs size",
            &bytes_axis(),
            &gbs_axis(),
            &[Series {
                name: "read".into(),
                points,
                dashed: false,
            }],
            &[],
            &[],
        );
        let els = doc(&svg);
        let xt = ticks_in(&els, "x-ticks", "x");
        assert_eq!(xt.first().unwrap().0, "32 KiB");
        assert_eq!(xt.last().unwrap().0, "128 MiB");
        assert!(xt.windows(2).all(|w| w[1].1 > w[0].1));
        let yt = ticks_in(&els, "y-ticks", "y");
        assert_eq!(yt.first().unwrap().0, "0");
        let values: Vec<f64> = yt.iter().map(|(t, _)| t.parse().unwrap()).collect();
        assert!(values.windows(2).all(|w| w[1] > w[0]));
        assert!(yt.windows(2).all(|w| w[1].1 < w[0].1), "y grows upwards");
    }

    #[test]
    fn line_chart_draws_markers_legend_marks_and_skips_nan() {
        let kib: f64 = 1024.0;
        let mib = kib * kib;
        let svg = line_chart(
            "sizes",
            "Sizes",
            &bytes_axis(),
            &gbs_axis(),
            &[
                Series {
                    name: "read".into(),
                    points: vec![
                        (32.0 * kib, 180.0),
                        (f64::NAN, 10.0),
                        (64.0 * kib, f64::INFINITY),
                        (-1.0, 5.0),
                        (2.0 * mib, 40.0),
                        (128.0 * mib, 14.0),
                    ],
                    dashed: false,
                },
                Series {
                    name: "copy".into(),
                    points: vec![(1.0 * mib, 70.0)],
                    dashed: true,
                },
            ],
            &[
                Marker {
                    x: 48.0 * kib,
                    label: "L1 48 KiB".into(),
                },
                Marker {
                    x: mib,
                    label: "L2 1 MiB".into(),
                },
                Marker {
                    x: 32.0 * mib,
                    label: "L3 32 MiB".into(),
                },
            ],
            &[PointMark {
                x: 2.0 * mib,
                y: 40.0,
                label: "knee".into(),
            }],
        );
        let els = doc(&svg);
        assert!(!svg.contains("NaN"));
        // Valid points only: 3 for read, 1 for copy.
        let pts: Vec<_> = find(&els, "circle", "pt")
            .into_iter()
            .filter(|(i, _)| title_of(&els, *i).is_some())
            .collect();
        assert_eq!(pts.len(), 4);
        let tips: Vec<String> = pts
            .iter()
            .map(|(i, _)| title_of(&els, *i).unwrap())
            .collect();
        assert!(tips[0].contains("32 KiB (32768 B)") && tips[0].contains("180"));
        assert_eq!(
            find(&els, "path", "line").len(),
            1 + 2,
            "one line + 2 legend swatches"
        );
        assert!(
            find(&els, "path", "dashed").len() == 1,
            "copy has a single point: only its legend swatch"
        );

        // Markers sit on the positions of equal ticks, in order.
        let xt = ticks_in(&els, "x-ticks", "x");
        let tick_x = |label: &str| xt.iter().find(|(t, _)| t == label).map(|t| t.1);
        let markers = find(&els, "line", "marker");
        assert_eq!(markers.len(), 3);
        let mx: Vec<f64> = markers.iter().map(|(_, e)| e.num("x1")).collect();
        assert!(mx.windows(2).all(|w| w[1] > w[0]));
        if let Some(x) = tick_x("1 MiB") {
            assert!((mx[1] - x).abs() < 0.2);
        }
        let x32k = tick_x("32 KiB").unwrap();
        let x128m = tick_x("128 MiB").unwrap();
        let expect = |v: f64| x32k + (x128m - x32k) * (v / (32.0 * kib)).log2() / 12.0;
        assert!((mx[0] - expect(48.0 * kib)).abs() < 0.2);
        assert!((mx[2] - expect(32.0 * mib)).abs() < 0.2);
        let labels: Vec<String> = find(&els, "text", "marker-label")
            .iter()
            .map(|(_, e)| e.text.clone())
            .collect();
        assert_eq!(labels, ["L1 48 KiB", "L2 1 MiB", "L3 32 MiB"]);

        // Legend names and the knee.
        let legend = els
            .iter()
            .find(|e| e.name == "g" && e.has_class("legend"))
            .unwrap();
        let names: Vec<&str> = legend
            .children
            .iter()
            .filter(|&&c| els[c].name == "text")
            .map(|&c| els[c].text.as_str())
            .collect();
        assert_eq!(names, ["read", "copy"]);
        let knee = find(&els, "text", "mark-label");
        assert_eq!(knee.len(), 1);
        assert_eq!(knee[0].1.text, "knee");
        let mark = find(&els, "circle", "mark");
        assert_eq!(mark.len(), 1);
        assert!(title_of(&els, mark[0].0).unwrap().contains("knee"));
        // The knee is drawn on the read point it marks.
        let read2m = pts
            .iter()
            .find(|(i, _)| title_of(&els, *i).unwrap().contains("2 MiB"))
            .unwrap();
        assert_eq!(read2m.1.num("cx"), mark[0].1.num("cx"));
        assert_eq!(read2m.1.num("cy"), mark[0].1.num("cy"));

        // Only invalid points: no data.
        let none = line_chart(
            "n",
            "Nothing",
            &gbs_axis(),
            &gbs_axis(),
            &[Series {
                name: "x".into(),
                points: vec![(f64::NAN, 1.0)],
                dashed: false,
            }],
            &[],
            &[],
        );
        assert!(doc(&none).iter().any(|e| e.text == "no data"));
    }
}
