//! Heatmaps: a labelled matrix of values (node x node latency, CPU x CPU
//! cache-line transfers) coloured with viridis, the "good" end always
//! bright yellow whatever the direction of the metric.

use super::escape;
use super::frame::{
    no_data, open_svg, push_line, push_rotated_title, sanitize_id, tip, P, TITLE_SIZE,
};
use super::metrics::{fit_text, text_w, widest};
use super::palette::{hex, text_on, viridis};
use std::fmt::Write as _;

/// The data of a [`heatmap`]: `values[row][col]`, `None` for a missing cell.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Heatmap {
    pub rows: Vec<String>,
    pub cols: Vec<String>,
    pub values: Vec<Vec<Option<f64>>>,
    /// What the rows are ("CPU node"), drawn rotated at the left.
    pub row_title: String,
    /// What the columns are ("memory node"), drawn above the columns.
    pub col_title: String,
    /// Unit of the values ("ns"), in the legend and tooltips.
    pub unit: String,
    /// Decimals of the in-cell values.
    pub decimals: usize,
    /// Whether high values are the good end (bandwidth) or low ones (latency);
    /// the good end is always the bright (yellow) end of the palette.
    pub higher_is_better: bool,
    /// What the legend says right of its colour bar instead of "higher
    /// (lower) is better", for values with no good end (a share of
    /// accesses); the bright end is then the high one when
    /// `higher_is_better`.
    pub scale_note: Option<String>,
    /// Row indexes where a new group starts (a node boundary), drawn as gaps.
    pub row_groups: Vec<usize>,
    /// Column indexes where a new group starts.
    pub col_groups: Vec<usize>,
}

/// Longest row or column label drawn (px); longer ones are cut with "…".
const LABEL_MAX_W: f64 = 160.0;
/// Baseline of the column title.
const COL_TITLE_Y: f64 = 50.0;

/// A heatmap: one cell per value coloured with viridis, the good end (low
/// values unless `higher_is_better`) bright yellow, the value printed in
/// the cell when cells are at least 18 px and the text fits (tooltips always),
/// `None` as "–" on a neutral cell, row and column labels (thinned when
/// dense), axis titles, group boundaries as gaps, and a colour legend with
/// the minimum, the maximum and the unit. Readable up to 64 x 64 cells.
pub fn heatmap(id: &str, title: &str, h: &Heatmap) -> String {
    let sid = sanitize_id(id);
    if h.rows.is_empty() || h.cols.is_empty() {
        return no_data(&sid, title, "no data");
    }
    let lay = Layout::new(h, title);
    let mut out = String::new();
    open_svg(&mut out, &sid, title, lay.w, lay.total_h);
    if lay.shade.any() {
        lay.push_gradient(&mut out, &sid);
    }
    lay.push_titles(&mut out);
    lay.push_row_labels(&mut out);
    lay.push_col_labels(&mut out);
    lay.push_cells(&mut out);
    lay.push_group_rules(&mut out);
    lay.push_legend(&mut out, &sid);
    out.push_str("</svg>");
    out
}

/// The value of cell (`r`, `c`): `None` when missing or not finite.
fn value(h: &Heatmap, r: usize, c: usize) -> Option<f64> {
    h.values
        .get(r)
        .and_then(|row| row.get(c))
        .copied()
        .flatten()
        .filter(|v| v.is_finite())
}

/// The range of the values and which end of it is good: the colour of a
/// value.
struct Shade {
    /// Lowest value; infinite when no cell has one.
    min: f64,
    max: f64,
    higher_is_better: bool,
}

impl Shade {
    fn of(h: &Heatmap) -> Shade {
        let mut min = f64::INFINITY;
        let mut max = f64::NEG_INFINITY;
        for r in 0..h.rows.len() {
            for c in 0..h.cols.len() {
                if let Some(v) = value(h, r, c) {
                    min = min.min(v);
                    max = max.max(v);
                }
            }
        }
        Shade {
            min,
            max,
            higher_is_better: h.higher_is_better,
        }
    }

    /// Whether any cell has a value.
    fn any(&self) -> bool {
        self.min.is_finite()
    }

    /// Where `v` lies on the palette: 1 at the good end, 0 at the bad one,
    /// the middle when all values are equal.
    fn goodness(&self, v: f64) -> f64 {
        if self.max > self.min {
            let t = (v - self.min) / (self.max - self.min);
            if self.higher_is_better {
                t
            } else {
                1.0 - t
            }
        } else {
            0.5
        }
    }

    fn colour(&self, v: f64) -> [u8; 3] {
        viridis(self.goodness(v))
    }
}

/// Where everything of a heatmap goes.
struct Layout<'a> {
    h: &'a Heatmap,
    shade: Shade,
    /// Cell width and height.
    cw: f64,
    ch: f64,
    labels: Labels,
    map_left: f64,
    map_top: f64,
    map_w: f64,
    map_h: f64,
    /// " ns", or empty without a unit.
    unit: String,
    /// Top of the colour legend.
    legend_y: f64,
    /// Whether every cell shows the same value: the legend says so
    /// instead of drawing a scale.
    one_value: bool,
    /// Length of the legend's colour bar.
    bar_w: f64,
    /// "lower is better" or "higher is better", right of the bar.
    note: String,
    note_x: f64,
    w: f64,
    total_h: f64,
}

/// How row and column labels fit their cells.
struct Labels {
    /// Their size: smaller on small cells.
    size: f64,
    /// Width of the widest row label (up to the cut).
    row_w: f64,
    /// Every how many rows (columns) a label fits.
    row_k: usize,
    col_k: usize,
    /// Whether column labels are rotated to read upwards.
    rotated: bool,
    /// The height the column labels take above the map.
    col_h: f64,
}

impl Labels {
    /// Row labels are thinned to fit the cell height. Column labels are
    /// horizontal when they fit the cell width (short ones, such as CPU
    /// numbers, thinned until they do); longer ones are rotated and thinned
    /// to the cell width.
    fn fit(h: &Heatmap, cw: f64, ch: f64) -> Labels {
        let size = if ch >= 12.0 && cw >= 12.0 { 11.0 } else { 9.5 };
        let row_w = widest(&h.rows, size).min(LABEL_MAX_W);
        let row_k = ((size + 2.0) / ch).ceil().max(1.0) as usize;
        let col_w = widest(&h.cols, size).min(LABEL_MAX_W);
        let max_chars = h.cols.iter().map(|s| s.chars().count()).max().unwrap_or(0);
        let k_h = ((col_w + 4.0) / cw).ceil().max(1.0) as usize;
        let rotated = k_h > 1 && max_chars > 4;
        let col_k = if rotated {
            ((size + 2.0) / cw).ceil().max(1.0) as usize
        } else {
            k_h
        };
        let col_h = if rotated { col_w + 8.0 } else { size + 6.0 };
        Labels {
            size,
            row_w,
            row_k,
            col_k,
            rotated,
            col_h,
        }
    }
}

impl<'a> Layout<'a> {
    fn new(h: &'a Heatmap, title: &str) -> Layout<'a> {
        let (nr, nc) = (h.rows.len(), h.cols.len());
        let shade = Shade::of(h);
        // Cells: up to 96 x 34 px, the map at most 640 px either way, but
        // never under 6 px (a 64 x 64 map stays readable by its tooltips).
        let cw = (640.0 / nc as f64).clamp(6.0, 96.0);
        let ch = cw.min(34.0).min(640.0 / nr as f64).max(6.0);
        let labels = Labels::fit(h, cw, ch);

        let has_row_title = !h.row_title.is_empty();
        let map_left = 12.0 + if has_row_title { 20.0 } else { 0.0 } + labels.row_w + 8.0;
        let map_top = COL_TITLE_Y + 8.0 + labels.col_h;
        let map_w = cw * nc as f64;
        let map_h = ch * nr as f64;
        let legend_y = map_top + map_h + 18.0;
        let unit = unit_suffix(h);

        // One label when every cell has the same value; otherwise the bar is
        // wide enough for both ends' labels.
        let fmt = |v: f64| format_value(h, v);
        let one_value = shade.any() && fmt(shade.min) == fmt(shade.max);
        let ends_w = if one_value {
            0.0
        } else {
            text_w(&format!("{}{unit}", fmt(shade.min)), 11.0)
                + text_w(&format!("{}{unit}", fmt(shade.max)), 11.0)
                + 14.0
        };
        let bar_w = map_w.clamp(120.0, 240.0).max(ends_w);
        let note = match (&h.scale_note, h.higher_is_better) {
            (Some(n), _) => n.clone(),
            (None, true) => "higher is better".to_string(),
            (None, false) => "lower is better".to_string(),
        };
        let note_x = map_left + bar_w + 10.0;
        let w = (map_left + map_w + 16.0)
            .max(note_x + text_w(&note, 11.0) + 16.0)
            .max(text_w(title, TITLE_SIZE) + 28.0)
            .max(map_left + text_w(&h.col_title, 12.0) + 16.0);
        Layout {
            h,
            shade,
            cw,
            ch,
            labels,
            map_left,
            map_top,
            map_w,
            map_h,
            unit,
            legend_y,
            one_value,
            bar_w,
            note,
            note_x,
            w,
            total_h: legend_y + 42.0,
        }
    }

    /// The legend's gradient, sampled from the same colour mapping as the
    /// cells (so it runs yellow to purple when lower is better).
    fn push_gradient(&self, out: &mut String, sid: &str) {
        let _ = write!(
            out,
            "<defs><linearGradient id=\"{sid}-grad\" x1=\"0\" y1=\"0\" x2=\"1\" y2=\"0\">"
        );
        let (min, max) = (self.shade.min, self.shade.max);
        for k in 0..=10 {
            let f = k as f64 / 10.0;
            let v = min + (max - min) * f;
            let _ = write!(
                out,
                "<stop offset=\"{f}\" stop-color=\"{}\"/>",
                hex(self.shade.colour(v))
            );
        }
        out.push_str("</linearGradient></defs>");
    }

    /// The column title centred above the map (or clear of its left edge
    /// when longer than the map), the row title rotated left of it.
    fn push_titles(&self, out: &mut String) {
        let h = self.h;
        if !h.col_title.is_empty() {
            let _ = write!(
                out,
                "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                P((self.map_left + self.map_w / 2.0)
                    .max(self.map_left + text_w(&h.col_title, 12.0) / 2.0)),
                P(COL_TITLE_Y),
                escape(&h.col_title)
            );
        }
        if !h.row_title.is_empty() {
            push_rotated_title(out, 22.0, self.map_top + self.map_h / 2.0, &h.row_title);
        }
    }

    /// Row labels right-aligned left of the map; group starts are always
    /// labelled.
    fn push_row_labels(&self, out: &mut String) {
        let (h, size) = (self.h, self.labels.size);
        out.push_str("<g class=\"row-labels\">");
        let sel = labelled(h.rows.len(), self.labels.row_k, &h.row_groups);
        for (r, name) in h.rows.iter().enumerate().filter(|&(r, _)| sel[r]) {
            let _ = write!(
                out,
                "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"{size}\" style=\"font-size:{size}px\">{}</text>",
                P(self.map_left - 6.0),
                P(self.map_top + self.ch * (r as f64 + 0.5) + size * 0.35),
                escape(&fit_text(name, size, LABEL_MAX_W))
            );
        }
        out.push_str("</g>");
    }

    /// Column labels above the map, horizontal or rotated; group starts are
    /// always labelled.
    fn push_col_labels(&self, out: &mut String) {
        let (h, size) = (self.h, self.labels.size);
        out.push_str("<g class=\"col-labels\">");
        let sel = labelled(h.cols.len(), self.labels.col_k, &h.col_groups);
        for (c, name) in h.cols.iter().enumerate().filter(|&(c, _)| sel[c]) {
            let x = self.map_left + self.cw * (c as f64 + 0.5);
            let name = escape(&fit_text(name, size, LABEL_MAX_W));
            if self.labels.rotated {
                let _ = write!(
                    out,
                    "<text class=\"tick\" transform=\"translate({} {}) rotate(-90)\" font-size=\"{size}\" style=\"font-size:{size}px\">{name}</text>",
                    P(x + size * 0.35),
                    P(self.map_top - 5.0)
                );
            } else {
                let _ = write!(
                    out,
                    "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{size}\" style=\"font-size:{size}px\">{name}</text>",
                    P(x),
                    P(self.map_top - 6.0)
                );
            }
        }
        out.push_str("</g>");
    }

    /// Every cell, with its value printed in it when cells are large
    /// enough to read it.
    fn push_cells(&self, out: &mut String) {
        let text_size =
            (self.cw >= 18.0 && self.ch >= 18.0).then(|| (self.ch * 0.42).clamp(8.0, 12.0));
        out.push_str("<g class=\"cells\">");
        for r in 0..self.h.rows.len() {
            for c in 0..self.h.cols.len() {
                self.push_cell(out, r, c, text_size);
            }
        }
        out.push_str("</g>");
    }

    /// Cell (`r`, `c`): a coloured rectangle (neutral when missing) whose
    /// tooltip says where it is and its exact value, then its text.
    fn push_cell(&self, out: &mut String, r: usize, c: usize, text_size: Option<f64>) {
        let (x, y) = (
            self.map_left + self.cw * c as f64,
            self.map_top + self.ch * r as f64,
        );
        let place = self.place(r, c);
        let (cw, ch) = (P(self.cw), P(self.ch));
        let (text, fill) = match value(self.h, r, c) {
            Some(v) => {
                let col = self.shade.colour(v);
                let _ = write!(
                    out,
                    "<rect class=\"hm-cell\" x=\"{}\" y=\"{}\" width=\"{cw}\" height=\"{ch}\" fill=\"{}\">{}</rect>",
                    P(x),
                    P(y),
                    hex(col),
                    tip(&format!("{place}\n{v}{}", self.unit))
                );
                (format_value(self.h, v), Some(text_on(col)))
            }
            None => {
                let _ = write!(
                    out,
                    "<rect class=\"hm-none\" x=\"{}\" y=\"{}\" width=\"{cw}\" height=\"{ch}\">{}</rect>",
                    P(x),
                    P(y),
                    tip(&format!("{place}\nno value"))
                );
                ("–".to_string(), None)
            }
        };
        if let Some(size) = text_size {
            self.push_cell_text(out, &text, fill, (x, y), size);
        }
    }

    /// "CPU node: node 0\nmemory node: m1" for a cell's tooltip.
    fn place(&self, r: usize, c: usize) -> String {
        let h = self.h;
        let or = |title: &'a str, default: &'a str| if title.is_empty() { default } else { title };
        format!(
            "{}: {}\n{}: {}",
            or(&h.row_title, "row"),
            h.rows[r],
            or(&h.col_title, "column"),
            h.cols[c]
        )
    }

    /// A cell's text centred in the cell at (`x`, `y`), shrunk from `size`
    /// down to 8 px to fit, and left out when it still does not; coloured
    /// for contrast with the cell (`fill`), or as the page's text on a
    /// missing cell.
    fn push_cell_text(
        &self,
        out: &mut String,
        text: &str,
        fill: Option<&str>,
        (x, y): (f64, f64),
        size: f64,
    ) {
        let cw = self.cw;
        let mut size = size;
        while size > 8.0 && text_w(text, size) > cw - 4.0 {
            size -= 0.5;
        }
        if text_w(text, size) > cw - 3.0 {
            return;
        }
        let style = match fill {
            Some(f) => format!("fill:{f};font-size:{size}px"),
            None => format!("font-size:{size}px"),
        };
        let _ = write!(
            out,
            "<text class=\"hm-text\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{size}\" style=\"{style}\">{}</text>",
            P(x + cw / 2.0),
            P(y + self.ch / 2.0 + size * 0.36),
            escape(text)
        );
    }

    /// A thick rule at each group boundary inside the map, reaching a
    /// little into the labels.
    fn push_group_rules(&self, out: &mut String) {
        let (h, left, top) = (self.h, self.map_left, self.map_top);
        let inner = |groups: &'a [usize], n: usize| groups.iter().filter(move |&&g| g > 0 && g < n);
        out.push_str("<g class=\"groups\">");
        for &g in inner(&h.row_groups, h.rows.len()) {
            let y = top + self.ch * g as f64;
            push_line(out, "hm-sep", [left - 4.0, y, left + self.map_w, y]);
        }
        for &g in inner(&h.col_groups, h.cols.len()) {
            let x = left + self.cw * g as f64;
            push_line(out, "hm-sep", [x, top - 4.0, x, top + self.map_h]);
        }
        out.push_str("</g>");
    }

    /// The colour bar with the lowest and highest value and which end is
    /// good; a sentence instead when all cells are equal or none has a
    /// value.
    fn push_legend(&self, out: &mut String, sid: &str) {
        let (left, y, unit) = (self.map_left, self.legend_y, &self.unit);
        let (min, max) = (self.shade.min, self.shade.max);
        let fmt = |v: f64| format_value(self.h, v);
        if self.one_value {
            let cells = if self.h.rows.len() * self.h.cols.len() == 1 {
                "the only cell"
            } else {
                "every cell"
            };
            let _ = write!(
                out,
                "<g class=\"hm-legend\"><text class=\"tick\" x=\"{}\" y=\"{}\">{}</text></g>",
                P(left),
                P(y + 10.0),
                escape(&format!("{}{unit} in {cells}", fmt(min)))
            );
        } else if self.shade.any() {
            let _ = write!(
                out,
                "<g class=\"hm-legend\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"10\" fill=\"url(#{sid}-grad)\">{}</rect>\
                 <text class=\"tick\" x=\"{}\" y=\"{}\">{}</text>\
                 <text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
                 <text class=\"sub\" x=\"{}\" y=\"{}\" style=\"font-size:11px\">{}</text></g>",
                P(left),
                P(y),
                P(self.bar_w),
                tip(&format!("min {min}{unit}, max {max}{unit}, {}", self.note)),
                P(left),
                P(y + 24.0),
                escape(&format!("{}{unit}", fmt(min))),
                P(left + self.bar_w),
                P(y + 24.0),
                escape(&format!("{}{unit}", fmt(max))),
                P(self.note_x),
                P(y + 9.0),
                escape(&self.note)
            );
        } else {
            let _ = write!(
                out,
                "<text class=\"sub\" x=\"{}\" y=\"{}\">no values</text>",
                P(left),
                P(y + 10.0)
            );
        }
    }
}

/// A value as printed in cells and the legend: `decimals` decimals.
fn format_value(h: &Heatmap, v: f64) -> String {
    format!("{:.*}", h.decimals, v)
}

/// The unit as appended to a value: " ns", or nothing.
fn unit_suffix(h: &Heatmap) -> String {
    if h.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", h.unit)
    }
}

/// Which of `n` row (or column) labels to draw when only every `k`-th fits:
/// group starts first (at least `k` apart), then every `k`-th index that is
/// at least `k` away from a chosen group start.
fn labelled(n: usize, k: usize, groups: &[usize]) -> Vec<bool> {
    let mut sel = vec![false; n];
    if k <= 1 {
        return vec![true; n];
    }
    let mut starts: Vec<usize> = groups.iter().copied().filter(|&g| g < n).collect();
    starts.push(0);
    starts.sort_unstable();
    starts.dedup();
    let mut chosen: Vec<usize> = Vec::new();
    for g in starts {
        if chosen.last().is_none_or(|&p| g - p >= k) {
            chosen.push(g);
            sel[g] = true;
        }
    }
    for i in (0..n).step_by(k) {
        if chosen.iter().all(|&g| g.abs_diff(i) >= k) {
            sel[i] = true;
        }
    }
    sel
}

#[cfg(test)]
mod tests {
    use super::super::test_support::*;
    use super::*;

    #[test]
    fn heatmap_cells_values_tooltips_and_direction() {
        let svg = heatmap("lat", "Latency", &sample_heatmap(false));
        let els = doc(&svg);
        let cells = find(&els, "rect", "hm-cell");
        let none = find(&els, "rect", "hm-none");
        assert_eq!(cells.len() + none.len(), 6);
        assert_eq!(none.len(), 1);
        let texts: Vec<String> = find(&els, "text", "hm-text")
            .iter()
            .map(|(_, e)| e.text.clone())
            .collect();
        assert_eq!(texts, ["90.2", "140.0", "–", "141.5", "250.0", "180.0"]);
        for (i, _) in &cells {
            let t = title_of(&els, *i).unwrap();
            assert!(
                t.contains("CPU node: node") && t.contains("memory node: m") && t.ends_with(" ns")
            );
        }
        assert!(title_of(&els, cells[0].0).unwrap().contains("90.25 ns"));
        assert!(title_of(&els, none[0].0).is_some());
        // Legend with min, max and unit.
        assert!(els.iter().any(|e| e.text == "90.2 ns"));
        assert!(els.iter().any(|e| e.text == "250.0 ns"));
        assert!(els.iter().any(|e| e.text == "lower is better"));

        let fill_of = |els: &[El], v: &str| {
            let (i, _) = find(els, "rect", "hm-cell")
                .into_iter()
                .find(|(i, _)| title_of(els, *i).unwrap().ends_with(&format!("\n{v} ns")))
                .unwrap();
            els[i].attr("fill").unwrap().to_string()
        };
        // Lower is better: the minimum gets the good (yellow) end.
        assert_eq!(fill_of(&els, "90.25"), "#fde725");
        assert_eq!(fill_of(&els, "250"), "#440154");
        let flipped = doc(&heatmap("bw", "Bandwidth", &sample_heatmap(true)));
        assert_eq!(fill_of(&flipped, "90.25"), "#440154");
        assert_eq!(fill_of(&flipped, "250"), "#fde725");
        // Text contrast: dark on yellow, light on purple.
        let text_fill = |els: &[El], v: &str| {
            find(els, "text", "hm-text")
                .into_iter()
                .find(|(_, e)| e.text == v)
                .unwrap()
                .1
                .attr("style")
                .unwrap()
                .to_string()
        };
        assert!(text_fill(&els, "90.2").contains("fill:#111111"));
        assert!(text_fill(&els, "250.0").contains("fill:#ffffff"));
    }

    #[test]
    fn large_heatmap_drops_cell_text_but_keeps_tooltips() {
        let n = 64;
        let h = Heatmap {
            rows: (0..n).map(|i| i.to_string()).collect(),
            cols: (0..n).map(|i| i.to_string()).collect(),
            values: (0..n)
                .map(|i| {
                    (0..n)
                        .map(|j| (i != j).then_some((i * j % 97) as f64))
                        .collect()
                })
                .collect(),
            row_title: "reader CPU".into(),
            col_title: "owner CPU".into(),
            unit: "ns".into(),
            decimals: 0,
            higher_is_better: false,
            scale_note: None,
            row_groups: vec![16, 32, 48],
            col_groups: vec![16, 32, 48],
        };
        let els = doc(&heatmap("c2c", "c2c", &h));
        let cells: Vec<_> = find(&els, "rect", "hm-cell")
            .into_iter()
            .chain(find(&els, "rect", "hm-none"))
            .collect();
        assert_eq!(cells.len(), n * n);
        assert!(cells.iter().all(|(i, _)| title_of(&els, *i).is_some()));
        assert!(find(&els, "text", "hm-text").is_empty());
        assert_eq!(find(&els, "line", "hm-sep").len(), 6);
        // Labels are thinned but group starts are labelled, and none overlap.
        let rows: Vec<f64> = els
            .iter()
            .find(|e| e.name == "g" && e.has_class("row-labels"))
            .map(|g| g.children.iter().map(|&c| els[c].num("y")).collect())
            .unwrap();
        assert!(rows.len() < n && rows.len() >= n / 3);
        assert!(rows.windows(2).all(|w| w[1] - w[0] >= 11.0));
        let small = doc(&heatmap("s", "s", &sample_heatmap(false)));
        assert_eq!(find(&small, "text", "hm-text").len(), 6);
    }
}
