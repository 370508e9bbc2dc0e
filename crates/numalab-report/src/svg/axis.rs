//! Axes: how values map to positions ([`Scale`]), how ticks are labelled
//! ([`TickFormat`]), and the plan of one axis: its extent, widened to nice
//! ticks where the caller fixed no bound, and which tick labels fit.

use super::escape;
use super::format::format_tick;
use super::frame::{push_line, P, TICK_SIZE};
use super::metrics::widest;
use std::fmt::Write as _;

/// How values map to positions along an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Scale {
    /// Proportional; ticks at 1-2-5 steps.
    #[default]
    Linear,
    /// Logarithmic base 2; ticks at powers of two (non-positive values are
    /// skipped).
    Log2,
    /// Logarithmic base 10; ticks at powers of ten, plus 2 and 5 multiples
    /// when the range spans two decades or less.
    Log10,
}

/// How tick labels (and tooltip values) are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TickFormat {
    /// A plain number, decimals as the tick step needs (10k, 2M above 10000).
    #[default]
    Number,
    /// Rounded to an integer (steps of at least 1 on linear axes).
    Integer,
    /// Binary byte sizes: `512 B`, `4 KiB`, `1 MiB`, `2 GiB`.
    Bytes,
    /// A fraction shown as a percentage: 0.25 is `25%`.
    Percent,
}

/// One axis of a [`line_chart`](super::line_chart). `label` should carry
/// the unit ("working set (bytes)", "bandwidth (GB/s)").
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Axis {
    pub label: String,
    pub scale: Scale,
    /// Fixed lower bound; by default the data (and 0 for a linear y axis),
    /// extended to a nice tick.
    pub min: Option<f64>,
    /// Fixed upper bound; by default the data extended to a nice tick.
    pub max: Option<f64>,
    pub format: TickFormat,
}

impl Axis {
    /// An axis with automatic bounds.
    pub fn new(label: &str, scale: Scale, format: TickFormat) -> Axis {
        Axis {
            label: label.to_string(),
            scale,
            min: None,
            max: None,
            format,
        }
    }
}

/// The resolved extent and ticks of one axis.
#[derive(Debug, Clone)]
pub(super) struct AxisPlan {
    scale: Scale,
    pub(super) lo: f64,
    pub(super) hi: f64,
    /// Tick values, increasing.
    pub(super) ticks: Vec<f64>,
    /// Whether each tick may be labelled first (powers of the base on log
    /// axes, every tick on linear ones).
    pub(super) major: Vec<bool>,
    /// Linear tick step (0 on log axes).
    step: f64,
    format: TickFormat,
}

impl AxisPlan {
    /// Position of `v` as a fraction of the axis length (0 at `lo`).
    pub(super) fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log2 | Scale::Log10 => (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln()),
        }
    }

    /// The label of the tick at `v`.
    pub(super) fn label(&self, v: f64) -> String {
        format_tick(v, self.format, self.step)
    }

    /// The labels of all ticks, in order.
    pub(super) fn labels(&self) -> Vec<String> {
        self.ticks.iter().map(|&v| self.label(v)).collect()
    }
}

/// Whether `v` can be placed on an axis of `scale` (finite, positive on log
/// axes).
pub(super) fn accepts(scale: Scale, v: f64) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// Tick steps worth trying over a linear `range`: 1-2-5 decades around its
/// size, powers of two for bytes (a step of 1000 B reads badly), never
/// below 1 for integers.
fn step_candidates(range: f64, format: TickFormat) -> Vec<f64> {
    let mut candidates = Vec::new();
    if format == TickFormat::Bytes && range >= 16.0 {
        let e = range.log2().floor() as i32;
        for k in (e - 5)..=(e + 1) {
            candidates.push(2f64.powi(k));
        }
    } else {
        let e = range.log10().floor() as i32;
        for k in (e - 2)..=(e + 1) {
            for m in [1.0, 2.0, 5.0] {
                candidates.push(m * 10f64.powi(k));
            }
        }
    }
    if format == TickFormat::Integer {
        candidates.retain(|&s| s >= 1.0);
        if candidates.is_empty() {
            candidates.push(1.0);
        }
    }
    candidates
}

/// Nice linear ticks over `lo..hi`; the ends not fixed are extended to a
/// multiple of the step. Steps are 1-2-5 decades (powers of two for bytes,
/// at least 1 for integers), 3 to 8 intervals, least extension preferred,
/// then about 5 intervals. Returns the extended ends, the step and the
/// ticks.
fn linear_ticks(
    lo: f64,
    hi: f64,
    fix_lo: bool,
    fix_hi: bool,
    format: TickFormat,
) -> (f64, f64, f64, Vec<f64>) {
    let range = hi - lo;
    let eps = 1e-9;
    let mut best: Option<(f64, f64, f64, f64, Vec<f64>)> = None;
    // Without any step giving 3 to 8 intervals, the one closest to 5.
    let mut fallback: Option<(usize, f64, f64, f64, Vec<f64>)> = None;
    for s in step_candidates(range, format) {
        let nlo = if fix_lo {
            lo
        } else {
            (lo / s + eps).floor() * s
        };
        let nhi = if fix_hi {
            hi
        } else {
            (hi / s - eps).ceil() * s
        };
        let first = (nlo / s - eps).ceil() as i64;
        let last = (nhi / s + eps).floor() as i64;
        if last < first || last - first > 1000 {
            continue;
        }
        let ticks: Vec<f64> = (first..=last).map(|i| i as f64 * s).collect();
        let n = ticks.len();
        let score = (nhi - nlo) / range + 0.02 * (n as f64 - 6.0).abs();
        if (4..=9).contains(&n) {
            if best.as_ref().is_none_or(|b| score < b.0) {
                best = Some((score, nlo, nhi, s, ticks));
            }
        } else {
            let dist = n.abs_diff(6);
            if fallback.as_ref().is_none_or(|f| dist < f.0) {
                fallback = Some((dist, nlo, nhi, s, ticks));
            }
        }
    }
    match (best, fallback) {
        (Some((_, a, b, s, t)), _) => (a, b, s, t),
        (None, Some((_, a, b, s, t))) => (a, b, s, t),
        (None, None) => (lo, hi, range, vec![lo, hi]),
    }
}

/// The 1-2-5 sequence value at or below (`up` false) or above `v`.
fn snap125(v: f64, up: bool) -> f64 {
    let e = v.log10().floor() as i32;
    let mut vals = Vec::new();
    for k in (e - 1)..=(e + 1) {
        for m in [1.0, 2.0, 5.0] {
            vals.push(m * 10f64.powi(k));
        }
    }
    let tol = v * 1e-9;
    if up {
        vals.into_iter()
            .find(|&x| x >= v - tol)
            .unwrap_or(10f64.powi(e + 1))
    } else {
        vals.into_iter()
            .rev()
            .find(|&x| x <= v + tol)
            .unwrap_or(10f64.powi(e))
    }
}

/// Ticks of a log axis over `lo..hi`: powers of the base (major), and for
/// base 10 over at most two decades also 2 and 5 multiples (minor).
fn log_ticks(lo: f64, hi: f64, scale: Scale) -> (Vec<f64>, Vec<bool>) {
    let mut ticks = Vec::new();
    let mut major = Vec::new();
    let tol = 1e-9;
    match scale {
        Scale::Log2 => {
            let a = (lo.log2() - tol).ceil() as i32;
            let b = (hi.log2() + tol).floor() as i32;
            for e in a..=b {
                ticks.push(2f64.powi(e));
                major.push(true);
            }
        }
        _ => {
            let few = (hi / lo).log10() <= 2.0 + tol;
            let a = lo.log10().floor() as i32;
            let b = hi.log10().ceil() as i32;
            for e in a..=b {
                let mults: &[f64] = if few { &[1.0, 2.0, 5.0] } else { &[1.0] };
                for &m in mults {
                    let v = m * 10f64.powi(e);
                    if v >= lo * (1.0 - tol) && v <= hi * (1.0 + tol) {
                        ticks.push(v);
                        major.push(m == 1.0);
                    }
                }
            }
            // No power of ten inside: let every tick be labelled.
            if !major.iter().any(|&m| m) {
                major.iter_mut().for_each(|m| *m = true);
            }
        }
    }
    (ticks, major)
}

/// What fixes an axis's extent before it is widened to nice ticks: the
/// range of the data (none without data) and the bounds the caller gave
/// (those the scale can show).
struct Extent {
    data: Option<(f64, f64)>,
    min: Option<f64>,
    max: Option<f64>,
}

/// Resolves an axis over `values` (those the scale cannot show are
/// ignored). `zero_based`: a linear axis without `min` starts at 0 (or below
/// for negative data).
pub(super) fn plan_axis(axis: &Axis, values: &[f64], zero_based: bool) -> AxisPlan {
    let scale = axis.scale;
    let vals: Vec<f64> = values
        .iter()
        .copied()
        .filter(|&v| accepts(scale, v))
        .collect();
    let dmin = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let dmax = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let extent = Extent {
        data: (!vals.is_empty()).then_some((dmin, dmax)),
        min: axis.min.filter(|&v| accepts(scale, v)),
        max: axis.max.filter(|&v| accepts(scale, v)),
    };
    match scale {
        Scale::Linear => plan_linear(axis, &extent, zero_based),
        Scale::Log2 | Scale::Log10 => plan_log(axis, &extent),
    }
}

/// A linear axis: the data (with 0 when `zero_based`), the caller's bounds
/// over it, an empty or inverted range opened up, then nice ticks.
fn plan_linear(axis: &Axis, e: &Extent, zero_based: bool) -> AxisPlan {
    let (mut lo, mut hi) = e.data.unwrap_or((0.0, 1.0));
    if zero_based {
        lo = lo.min(0.0);
        hi = hi.max(0.0);
    }
    if let Some(m) = e.min {
        lo = m;
    }
    if let Some(m) = e.max {
        hi = m;
    }
    if hi <= lo {
        // One value, or bounds that contradict the data: open the range on
        // the side the caller left free.
        if e.max.is_some() && e.min.is_none() {
            lo = hi - hi.abs().max(1.0);
        } else if lo == 0.0 {
            hi = 1.0;
        } else {
            hi = lo + lo.abs().max(1.0) * 0.5;
            if e.min.is_none() {
                lo -= lo.abs().max(1.0) * 0.5;
            }
        }
    }
    let (lo, hi, step, ticks) = linear_ticks(lo, hi, e.min.is_some(), e.max.is_some(), axis.format);
    let major = vec![true; ticks.len()];
    AxisPlan {
        scale: axis.scale,
        lo,
        hi,
        ticks,
        major,
        step,
        format: axis.format,
    }
}

/// A log axis: the data's ends snapped outwards to nice values unless the
/// caller fixed them, an empty or inverted range doubled.
fn plan_log(axis: &Axis, e: &Extent) -> AxisPlan {
    let scale = axis.scale;
    let (lo, hi) = e
        .data
        .unwrap_or((1.0, if scale == Scale::Log2 { 16.0 } else { 100.0 }));
    // Over more than two decades, base 10 ends on powers of ten;
    // over fewer, on the 1-2-5 sequence.
    let wide = hi / lo > 100.0;
    // A nice bound at or beyond `v`: down for the low end, up for the high.
    let snap = |v: f64, up: bool| {
        let round = |x: f64| (if up { x.ceil() } else { x.floor() }) as i32;
        if scale == Scale::Log2 {
            2f64.powi(round(v.log2()))
        } else if wide {
            10f64.powi(round(v.log10()))
        } else {
            snap125(v, up)
        }
    };
    let mut lo = e.min.unwrap_or_else(|| snap(lo, false));
    let mut hi = e.max.unwrap_or_else(|| snap(hi, true));
    if hi <= lo {
        if e.max.is_some() && e.min.is_none() {
            lo = hi / 2.0;
        } else {
            hi = lo * 2.0;
        }
    }
    let (ticks, major) = log_ticks(lo, hi, scale);
    AxisPlan {
        scale,
        lo,
        hi,
        ticks,
        major,
        step: 0.0,
        format: axis.format,
    }
}

/// Chooses which ticks get a label so that labels do not overlap: all of
/// them if they fit, else the major ones, else every k-th major one.
/// `pos` are pixel positions (increasing or decreasing), `need(i)` the room
/// tick `i`'s label needs along the axis.
pub(super) fn thin_labels(pos: &[f64], major: &[bool], need: impl Fn(usize) -> f64) -> Vec<bool> {
    let fits = |sel: &[usize]| {
        sel.windows(2).all(|w| {
            let (a, b) = (w[0], w[1]);
            (pos[b] - pos[a]).abs() >= (need(a) + need(b)) / 2.0 + 6.0
        })
    };
    let all: Vec<usize> = (0..pos.len()).collect();
    if fits(&all) {
        return vec![true; pos.len()];
    }
    let majors: Vec<usize> = all.iter().copied().filter(|&i| major[i]).collect();
    let mut k = 1;
    loop {
        let sel: Vec<usize> = majors.iter().copied().step_by(k).collect();
        if sel.len() <= 2 || fits(&sel) {
            let mut out = vec![false; pos.len()];
            for i in sel {
                out[i] = true;
            }
            return out;
        }
        k += 1;
    }
}

// Drawing a vertical axis, shared by the line and bar charts.

/// The room left of the plot: the widest y tick label plus the rotated
/// axis title.
pub(super) fn y_gutter(labels: &[String]) -> f64 {
    (widest(labels, TICK_SIZE) + 40.0).max(56.0)
}

/// Pixel rows of `plan`'s ticks (through `ypos`) and which of them get a
/// label: one line of tick text each, so they need its height apart.
pub(super) fn y_ticks(plan: &AxisPlan, ypos: impl Fn(f64) -> f64) -> (Vec<f64>, Vec<bool>) {
    let ypx: Vec<f64> = plan.ticks.iter().map(|&v| ypos(v)).collect();
    let shown = thin_labels(&ypx, &plan.major, |_| TICK_SIZE + 2.0);
    (ypx, shown)
}

/// The marks and labels of a horizontal axis's shown ticks, under
/// `bottom`: a short line and the label centred below it.
pub(super) fn push_x_ticks(
    out: &mut String,
    xpx: &[f64],
    shown: &[bool],
    labels: &[String],
    bottom: f64,
) {
    for (i, &px) in xpx.iter().enumerate().filter(|&(i, _)| shown[i]) {
        push_line(out, "axis", [px, bottom, px, bottom + 4.0]);
        let _ = write!(
            out,
            "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            P(px),
            P(bottom + 17.0),
            escape(&labels[i])
        );
    }
}

/// Grid lines at the tick positions `px`, each from `ends(p)` (x1, y1, x2,
/// y2); a fainter line where the tick's label was thinned out, so that the
/// labelled lines carry the eye.
pub(super) fn push_grid(
    out: &mut String,
    px: &[f64],
    shown: &[bool],
    ends: impl Fn(f64) -> [f64; 4],
) {
    for (&p, &shown) in px.iter().zip(shown) {
        let class = if shown { "grid" } else { "grid-minor" };
        push_line(out, class, ends(p));
    }
}

/// A y tick label, right-aligned left of the axis at `left`, on row `py`.
pub(super) fn push_y_label(out: &mut String, left: f64, py: f64, label: &str) {
    let _ = write!(
        out,
        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
        P(left - 7.0),
        P(py + 4.0),
        escape(label)
    );
}

#[cfg(test)]
mod tests {
    use super::super::format_bytes;
    use super::super::test_support::bytes_axis;
    use super::*;

    #[test]
    fn linear_ticks_take_nice_steps() {
        let y = Axis::new("y (ns)", Scale::Linear, TickFormat::Number);
        let p = plan_axis(&y, &[3.0, 97.0], true);
        assert_eq!(p.ticks, vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        assert_eq!((p.lo, p.hi), (0.0, 100.0));
        let labels: Vec<String> = p.ticks.iter().map(|&v| p.label(v)).collect();
        assert_eq!(labels, ["0", "20", "40", "60", "80", "100"]);

        let p = plan_axis(&y, &[1.0, 16.0], true);
        assert_eq!(
            p.ticks,
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0]
        );

        let p = plan_axis(&y, &[1.0, 2.51], true);
        let labels: Vec<String> = p.ticks.iter().map(|&v| p.label(v)).collect();
        assert_eq!(labels, ["0", "0.5", "1", "1.5", "2", "2.5", "3"]);

        let p = plan_axis(&y, &[0.2, 1.2], true);
        let labels: Vec<String> = p.ticks.iter().map(|&v| p.label(v)).collect();
        assert_eq!(labels, ["0", "0.2", "0.4", "0.6", "0.8", "1", "1.2"]);

        // A given minimum is kept; integers never get fractional steps.
        let mut y2 = Axis::new("latency (ns)", Scale::Linear, TickFormat::Integer);
        y2.min = Some(100.0);
        let p = plan_axis(&y2, &[120.0, 400.0], true);
        assert_eq!(p.lo, 100.0);
        assert_eq!(
            p.ticks,
            vec![100.0, 150.0, 200.0, 250.0, 300.0, 350.0, 400.0]
        );
        let p = plan_axis(
            &Axis::new("threads", Scale::Linear, TickFormat::Integer),
            &[0.0, 3.0],
            true,
        );
        assert_eq!(p.ticks, vec![0.0, 1.0, 2.0, 3.0]);

        let pct = Axis::new("share (%)", Scale::Linear, TickFormat::Percent);
        let p = plan_axis(&pct, &[0.0, 1.0], true);
        let labels: Vec<String> = p.ticks.iter().map(|&v| p.label(v)).collect();
        assert_eq!(labels, ["0%", "20%", "40%", "60%", "80%", "100%"]);
    }

    #[test]
    fn log_ticks_are_powers() {
        let kib: f64 = 1024.0;
        let mib = kib * kib;
        let p = plan_axis(
            &bytes_axis(),
            &[32.0 * kib, 100.0 * kib, 128.0 * mib],
            false,
        );
        assert_eq!(p.ticks.len(), 13);
        assert_eq!(p.ticks[0], 32.0 * kib);
        assert_eq!(p.ticks[12], 128.0 * mib);
        let labels: Vec<String> = p.ticks.iter().map(|&v| p.label(v)).collect();
        assert_eq!(labels[0], "32 KiB");
        assert_eq!(labels[5], "1 MiB");
        assert_eq!(labels[12], "128 MiB");

        let p = plan_axis(
            &Axis::new("latency (ns)", Scale::Log10, TickFormat::Number),
            &[100.0, 400.0],
            true,
        );
        assert_eq!(p.ticks, vec![100.0, 200.0, 500.0]);
        let p = plan_axis(
            &Axis::new("ops", Scale::Log10, TickFormat::Number),
            &[3.0, 2e6],
            true,
        );
        assert_eq!(p.ticks.first(), Some(&1.0));
        assert_eq!(p.ticks.last(), Some(&1e7));
        assert_eq!(p.label(1e7), "10M");
        assert_eq!(format_bytes(512.0), "512 B");
        assert_eq!(format_bytes(4096.0), "4 KiB");
        assert_eq!(format_bytes(1.5 * mib), "1.5 MiB");
        assert_eq!(format_bytes(2.0 * mib * kib), "2 GiB");
    }
}
