//! Chart primitives for the self-contained HTML report (`numalab report`):
//! pure functions that return inline SVG markup, with no JavaScript, no
//! network and no dependencies beyond std.
//!
//! Charts:
//! - [`line_chart`]: series of (x, y) points on linear or log axes, with a
//!   legend, vertical markers (cache sizes) and emphasised points (a knee);
//! - [`heatmap`]: a labelled matrix of values (node x node latency, CPU x CPU
//!   cache-line transfers) coloured with the perceptual viridis palette, the
//!   "good" end always bright yellow whatever the direction of the metric;
//! - [`bar_chart`]: grouped vertical bars (normalized sweep times) with an
//!   optional horizontal reference line and flagged (hatched) bars;
//! - [`node_graph`]: NUMA nodes on a circle with labelled distance edges,
//!   CPU-less memory nodes drawn as dashed hexagons.
//!
//! Style contract. The page that embeds the charts defines the custom
//! properties `--fg` (text and axes), `--muted` (grid lines, secondary marks),
//! `--bg` (background) and `--s0` .. `--s7` (series colours) for light and
//! dark mode, and inlines [`CHART_CSS`], which maps the classes used here
//! (`axis`, `grid`, `s0`..`s7`, ...) onto those properties. The charts never
//! hard-code a colour for text, axes or backgrounds; only heatmap cells carry
//! inline colours (their own background, with black or white text chosen for
//! contrast).
//!
//! Every chart is one root `<svg>` with the caller's `id` (characters other
//! than `[A-Za-z0-9_-]` are replaced by `_`), a `viewBox`, `width="100%"`, a
//! maximum width, `role="img"` and `aria-labelledby` naming its `<title>`; the
//! title is also drawn above the plot. Every data mark has a `<title>` child
//! (a tooltip) with its exact value, all text is XML-escaped, and the output is
//! well-formed XML. Empty input gives a small chart that says "no data".

use std::fmt::{self, Write as _};

/// CSS rules for the classes the charts use, to inline in the page once.
///
/// Refers only to the custom properties `--fg`, `--muted`, `--bg` and
/// `--s0`..`--s7`, which the page defines (for light and dark mode). Class
/// names: `chart` (root), `chart-title`, `sub`, `tick`, `axis-label`, `axis`,
/// `grid`, `grid-minor`, `s0`..`s7`, `line`, `dashed`, `pt`, `marker`,
/// `marker-label`, `mark`, `mark-label`, `halo`, `legend`, `bar`, `flagged`,
/// `hatch`, `hatch-overlay`, `flag`, `ref`, `group-rule`, `hm-cell`,
/// `hm-none`, `hm-text`, `hm-sep`, `edge`, `edge-hit`, `edge-label-bg`,
/// `edge-label`, `node`, `cpuless`, `swatch-node`, `node-label`, `nodata`.
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

/// One axis of a [`line_chart`]. `label` should carry the unit
/// ("working set (bytes)", "bandwidth (GB/s)").
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
    /// Row indexes where a new group starts (a node boundary), drawn as gaps.
    pub row_groups: Vec<usize>,
    /// Column indexes where a new group starts.
    pub col_groups: Vec<usize>,
}

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

/// A node of a [`node_graph`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GraphNode {
    pub id: u32,
    /// First line ("node 0").
    pub label: String,
    /// Second, smaller line ("8 CPUs, 16 GiB").
    pub detail: String,
    /// A memory-only node: dashed hexagon instead of a rounded box.
    pub cpuless: bool,
}

/// An edge between the nodes with ids `a` and `b`, `label` at its midpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GraphEdge {
    pub a: u32,
    pub b: u32,
    pub label: String,
}

// ---------------------------------------------------------------------------
// Text and number helpers

/// Escapes text for XML content and attribute values (`& < > " '`), dropping
/// the control characters XML 1.0 does not allow.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => {}
            c => out.push(c),
        }
    }
    out
}

/// The caller's id restricted to `[A-Za-z0-9_-]`, so that derived ids work
/// in `url(#...)` references.
fn sanitize_id(id: &str) -> String {
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

/// Approximate advance width of `s` in a sans-serif UI font of `size` px.
fn text_w(s: &str, size: f64) -> f64 {
    let em: f64 = s
        .chars()
        .map(|c| match c {
            'i' | 'l' | 'j' | '.' | ',' | ':' | ';' | '\'' | '|' | '!' | 'I' | '(' | ')' | '['
            | ']' | 'f' | 't' | 'r' => 0.33,
            ' ' => 0.3,
            'm' | 'w' | 'M' | 'W' | '@' | '%' => 0.9,
            'A'..='Z' => 0.68,
            '0'..='9' => 0.58,
            c if c.is_ascii() => 0.56,
            _ => 0.75,
        })
        .sum();
    em * size
}

/// `s` cut (with "…") to at most `max_w` px at `size` px.
fn fit_text(s: &str, size: f64, max_w: f64) -> String {
    if text_w(s, size) <= max_w {
        return s.to_string();
    }
    let mut out = String::new();
    for c in s.chars() {
        let mut next = out.clone();
        next.push(c);
        if text_w(&next, size) + text_w("…", size) > max_w {
            break;
        }
        out = next;
    }
    out.push('…');
    out
}

/// A coordinate, rounded to 0.1 without trailing zeros.
struct P(f64);

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

/// Removes trailing zeros (and a trailing point) of a decimal number.
fn trim_zeros(s: String) -> String {
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".to_string()
        } else {
            t.to_string()
        }
    } else {
        s
    }
}

/// A number with at most `max_dec` decimals, trailing zeros removed, and
/// k/M/G suffixes from 10000 on.
fn compact(v: f64, max_dec: usize) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let dec = if suffix.is_empty() { max_dec } else { 2 };
    format!("{}{suffix}", trim_zeros(format!("{scaled:.dec$}")))
}

/// Binary byte size: `512 B`, `48 KiB`, `1.5 MiB`, `2 GiB`.
pub fn format_bytes(v: f64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut x = v;
    let mut k = 0;
    while x.abs() >= 1024.0 && k + 1 < UNITS.len() {
        x /= 1024.0;
        k += 1;
    }
    format!("{} {}", trim_zeros(format!("{x:.2}")), UNITS[k])
}

/// A fraction as a percentage with at most `dec` decimals.
fn format_percent(v: f64, dec: usize) -> String {
    format!("{}%", trim_zeros(format!("{:.dec$}", v * 100.0)))
}

/// Decimals needed to tell ticks `step` apart.
fn step_decimals(step: f64) -> usize {
    if step <= 0.0 || !step.is_finite() || step >= 1.0 {
        0
    } else {
        ((-step.log10()).ceil().max(0.0) as usize).min(9)
    }
}

/// A tick label. `step` is the linear tick step (0 on log axes, where each
/// value is written with its own precision).
fn format_tick(v: f64, format: TickFormat, step: f64) -> String {
    match format {
        TickFormat::Number => {
            if step > 0.0 {
                compact(v, step_decimals(step))
            } else {
                compact(v, 6)
            }
        }
        TickFormat::Integer => format!("{}", v.round() as i64),
        TickFormat::Bytes => format_bytes(v),
        TickFormat::Percent => {
            let dec = if step > 0.0 {
                step_decimals(step * 100.0)
            } else {
                4
            };
            format_percent(v, dec)
        }
    }
}

/// A value written exactly (Rust's shortest round-trip form), with the
/// formatted form too when the format changes it.
fn exact(v: f64, format: TickFormat) -> String {
    match format {
        TickFormat::Number | TickFormat::Integer => format!("{v}"),
        TickFormat::Bytes => {
            let pretty = format_bytes(v);
            let raw = format!("{v} B");
            if pretty == raw {
                raw
            } else {
                format!("{pretty} ({raw})")
            }
        }
        TickFormat::Percent => format!("{} ({v})", format_percent(v, 4)),
    }
}

// ---------------------------------------------------------------------------
// Scales and ticks

/// The resolved extent and ticks of one axis.
#[derive(Debug, Clone)]
struct AxisPlan {
    scale: Scale,
    lo: f64,
    hi: f64,
    /// Tick values, increasing.
    ticks: Vec<f64>,
    /// Whether each tick may be labelled first (powers of the base on log
    /// axes, every tick on linear ones).
    major: Vec<bool>,
    /// Linear tick step (0 on log axes).
    step: f64,
    format: TickFormat,
}

impl AxisPlan {
    /// Position of `v` as a fraction of the axis length (0 at `lo`).
    fn frac(&self, v: f64) -> f64 {
        match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log2 | Scale::Log10 => (v.ln() - self.lo.ln()) / (self.hi.ln() - self.lo.ln()),
        }
    }

    fn label(&self, v: f64) -> String {
        format_tick(v, self.format, self.step)
    }
}

/// Whether `v` can be placed on an axis of `scale` (finite, positive on log
/// axes).
fn accepts(scale: Scale, v: f64) -> bool {
    v.is_finite() && (scale == Scale::Linear || v > 0.0)
}

/// Nice linear ticks over `lo..hi`; the ends not fixed are extended to a
/// multiple of the step. Steps are 1-2-5 decades (powers of two for bytes,
/// at least 1 for integers), 3 to 8 intervals, least extension preferred,
/// then about 5 intervals.
fn linear_ticks(
    lo: f64,
    hi: f64,
    fix_lo: bool,
    fix_hi: bool,
    format: TickFormat,
) -> (f64, f64, f64, Vec<f64>) {
    let range = hi - lo;
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
    let eps = 1e-9;
    let mut best: Option<(f64, f64, f64, f64, Vec<f64>)> = None;
    let mut fallback: Option<(usize, f64, f64, f64, Vec<f64>)> = None;
    for s in candidates {
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

/// Resolves an axis over `values` (those the scale cannot show are
/// ignored). `zero_based`: a linear axis without `min` starts at 0 (or below
/// for negative data).
fn plan_axis(axis: &Axis, values: &[f64], zero_based: bool) -> AxisPlan {
    let scale = axis.scale;
    let vals: Vec<f64> = values
        .iter()
        .copied()
        .filter(|&v| accepts(scale, v))
        .collect();
    let dmin = vals.iter().copied().fold(f64::INFINITY, f64::min);
    let dmax = vals.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let given_min = axis.min.filter(|&v| accepts(scale, v));
    let given_max = axis.max.filter(|&v| accepts(scale, v));
    match scale {
        Scale::Linear => {
            let (mut lo, mut hi) = if vals.is_empty() {
                (0.0, 1.0)
            } else {
                (dmin, dmax)
            };
            if zero_based {
                lo = lo.min(0.0);
                hi = hi.max(0.0);
            }
            if let Some(m) = given_min {
                lo = m;
            }
            if let Some(m) = given_max {
                hi = m;
            }
            if hi <= lo {
                if given_max.is_some() && given_min.is_none() {
                    lo = hi - hi.abs().max(1.0);
                } else if lo == 0.0 {
                    hi = 1.0;
                } else {
                    hi = lo + lo.abs().max(1.0) * 0.5;
                    if given_min.is_none() {
                        lo -= lo.abs().max(1.0) * 0.5;
                    }
                }
            }
            let (lo, hi, step, ticks) = linear_ticks(
                lo,
                hi,
                given_min.is_some(),
                given_max.is_some(),
                axis.format,
            );
            let major = vec![true; ticks.len()];
            AxisPlan {
                scale,
                lo,
                hi,
                ticks,
                major,
                step,
                format: axis.format,
            }
        }
        Scale::Log2 | Scale::Log10 => {
            let (mut lo, mut hi) = if vals.is_empty() {
                (1.0, if scale == Scale::Log2 { 16.0 } else { 100.0 })
            } else {
                (dmin, dmax)
            };
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
            lo = given_min.unwrap_or_else(|| snap(lo, false));
            hi = given_max.unwrap_or_else(|| snap(hi, true));
            if hi <= lo {
                if given_max.is_some() && given_min.is_none() {
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
    }
}

/// Chooses which ticks get a label so that labels do not overlap: all of
/// them if they fit, else the major ones, else every k-th major one.
/// `pos` are pixel positions (increasing or decreasing), `need(i)` the room
/// tick `i`'s label needs along the axis.
fn thin_labels(pos: &[f64], major: &[bool], need: impl Fn(usize) -> f64) -> Vec<bool> {
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

// ---------------------------------------------------------------------------
// Shared SVG pieces

const TITLE_SIZE: f64 = 15.0;
const TICK_SIZE: f64 = 11.0;

/// Opens the root element and writes the accessible and the visible title.
fn open_svg(out: &mut String, sid: &str, title: &str, w: f64, h: f64) {
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
fn no_data(sid: &str, title: &str, msg: &str) -> String {
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
fn tip(s: &str) -> String {
    format!("<title>{}</title>", escape(s))
}

// ---------------------------------------------------------------------------
// Line chart

/// Width of line charts and bar charts (viewBox units, px at full size).
const CHART_W: f64 = 760.0;

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
    let ok = |p: &(f64, f64)| accepts(x.scale, p.0) && accepts(y.scale, p.1);
    let pts: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| s.points.iter().copied().filter(ok).collect())
        .collect();
    if pts.iter().all(|p| p.is_empty()) {
        return no_data(&sid, title, "no data");
    }
    let markers: Vec<&Marker> = markers.iter().filter(|m| accepts(x.scale, m.x)).collect();
    let marks: Vec<&PointMark> = marks.iter().filter(|m| ok(&(m.x, m.y))).collect();

    let mut xs: Vec<f64> = pts.iter().flatten().map(|p| p.0).collect();
    xs.extend(markers.iter().map(|m| m.x));
    xs.extend(marks.iter().map(|m| m.x));
    let mut ys: Vec<f64> = pts.iter().flatten().map(|p| p.1).collect();
    ys.extend(marks.iter().map(|m| m.y));
    let xp = plan_axis(x, &xs, false);
    let yp = plan_axis(y, &ys, true);

    // Horizontal layout.
    let w = CHART_W;
    let ylabels: Vec<String> = yp.ticks.iter().map(|&v| yp.label(v)).collect();
    let ylab_w = ylabels
        .iter()
        .map(|s| text_w(s, TICK_SIZE))
        .fold(0.0, f64::max);
    let xlabels: Vec<String> = xp.ticks.iter().map(|&v| xp.label(v)).collect();
    let last_xw = xlabels.last().map_or(0.0, |s| text_w(s, TICK_SIZE));
    let left = (ylab_w + 40.0).max(56.0);
    let right = w - (last_xw / 2.0 + 8.0).max(20.0);
    let plot_w = right - left;

    // Legend rows under the title.
    let mut legend: Vec<(usize, f64, f64)> = Vec::new(); // (series, x, row)
    let (mut cx, mut row) = (left, 0.0);
    for (i, s) in series.iter().enumerate() {
        let iw = 30.0 + text_w(&s.name, 12.0) + 18.0;
        if cx + iw > w - 10.0 && cx > left {
            cx = left;
            row += 1.0;
        }
        legend.push((i, cx, row));
        cx += iw;
    }
    let legend_rows = if series.is_empty() { 0.0 } else { row + 1.0 };
    let legend_top = 44.0;

    // Marker labels in rows above the plot, placed so they do not overlap.
    let xpos = |v: f64| left + xp.frac(v) * plot_w;
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut placed: Vec<(usize, f64, bool, usize)> = Vec::new(); // (marker, x, anchor end, row)
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
        placed.push((i, mx, end, r));
    }
    let marker_rows = rows.len() as f64;
    let top = legend_top + legend_rows * 20.0 + marker_rows * 15.0 + 8.0;
    let plot_h = 300.0;
    let bottom = top + plot_h;
    let h = bottom + 52.0;
    let ypos = |v: f64| bottom - yp.frac(v) * plot_h;

    let mut out = String::new();
    open_svg(&mut out, &sid, title, w, h);
    let _ = write!(
        out,
        "<defs><clipPath id=\"{sid}-clip\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
        P(left - 4.0),
        P(top - 4.0),
        P(plot_w + 8.0),
        P(plot_h + 8.0)
    );

    // Grid and ticks.
    let xpx: Vec<f64> = xp.ticks.iter().map(|&v| xpos(v)).collect();
    let xshow = thin_labels(&xpx, &xp.major, |i| text_w(&xlabels[i], TICK_SIZE));
    let ypx: Vec<f64> = yp.ticks.iter().map(|&v| ypos(v)).collect();
    let yshow = thin_labels(&ypx, &yp.major, |_| TICK_SIZE + 2.0);
    out.push_str("<g class=\"grid-lines\">");
    for (i, &px) in xpx.iter().enumerate() {
        let class = if xshow[i] { "grid" } else { "grid-minor" };
        let _ = write!(
            out,
            "<line class=\"{class}\" x1=\"{p}\" y1=\"{}\" x2=\"{p}\" y2=\"{}\"/>",
            P(top),
            P(bottom),
            p = P(px)
        );
    }
    for (i, &py) in ypx.iter().enumerate() {
        let class = if yshow[i] { "grid" } else { "grid-minor" };
        let _ = write!(
            out,
            "<line class=\"{class}\" x1=\"{}\" y1=\"{p}\" x2=\"{}\" y2=\"{p}\"/>",
            P(left),
            P(right),
            p = P(py)
        );
    }
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
    for (i, &px) in xpx.iter().enumerate() {
        if xshow[i] {
            let _ = write!(
                out,
                "<line class=\"axis\" x1=\"{p}\" y1=\"{b}\" x2=\"{p}\" y2=\"{}\"/>\
                 <text class=\"tick\" x=\"{p}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                P(bottom + 4.0),
                P(bottom + 17.0),
                escape(&xlabels[i]),
                p = P(px),
                b = P(bottom)
            );
        }
    }
    out.push_str("</g><g class=\"y-ticks\">");
    for (i, &py) in ypx.iter().enumerate() {
        if yshow[i] {
            let _ = write!(
                out,
                "<line class=\"axis\" x1=\"{}\" y1=\"{p}\" x2=\"{l}\" y2=\"{p}\"/>\
                 <text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                P(left - 4.0),
                P(left - 7.0),
                P(py + 4.0),
                escape(&ylabels[i]),
                p = P(py),
                l = P(left)
            );
        }
    }
    out.push_str("</g>");
    let _ = write!(
        out,
        "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\
         <text class=\"axis-label\" transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        P(left + plot_w / 2.0),
        P(bottom + 40.0),
        escape(&x.label),
        P(top + plot_h / 2.0),
        escape(&y.label)
    );

    // Markers.
    for &(i, mx, end, r) in &placed {
        let m = markers[i];
        let ly = top - 8.0 - (marker_rows - 1.0 - r as f64) * 15.0;
        let (lx, anchor) = if end {
            (mx - 4.0, "end")
        } else {
            (mx + 4.0, "start")
        };
        let _ = write!(
            out,
            "<g class=\"marker-g\">{}<line class=\"marker\" x1=\"{p}\" y1=\"{}\" x2=\"{p}\" y2=\"{}\"/>\
             <text class=\"marker-label\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text></g>",
            tip(&format!("{}\n{}: {}", m.label, x.label, exact(m.x, x.format))),
            P(ly - 9.0),
            P(bottom),
            P(lx),
            P(ly),
            escape(&m.label),
            p = P(mx)
        );
    }

    // Series.
    let r = if pts.iter().map(Vec::len).max().unwrap_or(0) > 80 {
        1.8
    } else {
        2.8
    };
    for (i, (s, p)) in series.iter().zip(&pts).enumerate() {
        let c = i % 8;
        let dashed = if s.dashed { " dashed" } else { "" };
        let _ = write!(out, "<g class=\"series\">");
        if p.len() > 1 {
            let mut d = String::new();
            for (k, &(a, b)) in p.iter().enumerate() {
                let _ = write!(
                    d,
                    "{}{} {}",
                    if k == 0 { "M" } else { "L" },
                    P(xpos(a)),
                    P(ypos(b))
                );
            }
            let _ = write!(
                out,
                "<path class=\"line s{c}{dashed}\" fill=\"none\" clip-path=\"url(#{sid}-clip)\" d=\"{d}\">{}</path>",
                tip(&s.name)
            );
        }
        for &(a, b) in p {
            let (px, py) = (xpos(a), ypos(b));
            if px < left - 0.5 || px > right + 0.5 || py < top - 0.5 || py > bottom + 0.5 {
                continue;
            }
            let _ = write!(
                out,
                "<circle class=\"pt s{c}\" cx=\"{}\" cy=\"{}\" r=\"{}\">{}</circle>",
                P(px),
                P(py),
                // A lone point has no line to show it: draw it larger.
                P(if p.len() == 1 { 4.5 } else { r }),
                tip(&format!(
                    "{}\n{}: {}\n{}: {}",
                    s.name,
                    x.label,
                    exact(a, x.format),
                    y.label,
                    exact(b, y.format)
                ))
            );
        }
        out.push_str("</g>");
    }

    // Emphasised points.
    for m in &marks {
        let (px, py) = (xpos(m.x), ypos(m.y));
        let lw = text_w(&m.label, 12.0);
        let (lx, anchor) = if px + 9.0 + lw > w - 4.0 {
            (px - 9.0, "end")
        } else {
            (px + 9.0, "start")
        };
        let ly = if py - 9.0 < top + 10.0 {
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
            tip(&format!(
                "{}\n{}: {}\n{}: {}",
                m.label,
                x.label,
                exact(m.x, x.format),
                y.label,
                exact(m.y, y.format)
            )),
            P(lx),
            P(ly),
            escape(&m.label)
        );
    }

    // Legend.
    out.push_str("<g class=\"legend\">");
    for &(i, lx, row) in &legend {
        let s = &series[i];
        let ly = legend_top + row * 20.0;
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
    out.push_str("</g></svg>");
    out
}

// ---------------------------------------------------------------------------
// Heatmap

/// Viridis (matplotlib), 11 stops from 0 (dark purple) to 1 (yellow).
const VIRIDIS: [[u8; 3]; 11] = [
    [0x44, 0x01, 0x54],
    [0x48, 0x24, 0x75],
    [0x41, 0x44, 0x87],
    [0x35, 0x5f, 0x8d],
    [0x2a, 0x78, 0x8e],
    [0x21, 0x91, 0x8c],
    [0x22, 0xa8, 0x84],
    [0x44, 0xbf, 0x70],
    [0x7a, 0xd1, 0x51],
    [0xbd, 0xdf, 0x26],
    [0xfd, 0xe7, 0x25],
];

/// Viridis at `t` in 0..=1, interpolated between stops.
fn viridis(t: f64) -> [u8; 3] {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let x = t * (VIRIDIS.len() - 1) as f64;
    let i = (x.floor() as usize).min(VIRIDIS.len() - 2);
    let f = x - i as f64;
    let mut c = [0u8; 3];
    for k in 0..3 {
        let a = VIRIDIS[i][k] as f64;
        let b = VIRIDIS[i + 1][k] as f64;
        c[k] = (a + (b - a) * f).round() as u8;
    }
    c
}

fn hex(c: [u8; 3]) -> String {
    format!("#{:02x}{:02x}{:02x}", c[0], c[1], c[2])
}

/// WCAG relative luminance of an sRGB colour.
fn luminance(c: [u8; 3]) -> f64 {
    let lin = |v: u8| {
        let s = v as f64 / 255.0;
        if s <= 0.04045 {
            s / 12.92
        } else {
            ((s + 0.055) / 1.055).powf(2.4)
        }
    };
    0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2])
}

/// Text colour with the better contrast on `bg`: near-black or white.
fn text_on(bg: [u8; 3]) -> &'static str {
    let l = luminance(bg);
    let dark = (l + 0.05) / (luminance([0x11, 0x11, 0x11]) + 0.05);
    let light = 1.05 / (l + 0.05);
    if dark >= light {
        "#111111"
    } else {
        "#ffffff"
    }
}

/// A heatmap: one cell per value coloured with viridis, the good end (low
/// values unless `higher_is_better`) bright yellow, the value printed in
/// the cell when cells are at least 18 px and the text fits (tooltips always),
/// `None` as "–" on a neutral cell, row and column labels (thinned when
/// dense), axis titles, group boundaries as gaps, and a colour legend with
/// the minimum, the maximum and the unit. Readable up to 64 x 64 cells.
pub fn heatmap(id: &str, title: &str, h: &Heatmap) -> String {
    let sid = sanitize_id(id);
    let (nr, nc) = (h.rows.len(), h.cols.len());
    let cell = |r: usize, c: usize| -> Option<f64> {
        h.values
            .get(r)
            .and_then(|row| row.get(c))
            .copied()
            .flatten()
            .filter(|v| v.is_finite())
    };
    if nr == 0 || nc == 0 {
        return no_data(&sid, title, "no data");
    }
    let mut vmin = f64::INFINITY;
    let mut vmax = f64::NEG_INFINITY;
    for r in 0..nr {
        for c in 0..nc {
            if let Some(v) = cell(r, c) {
                vmin = vmin.min(v);
                vmax = vmax.max(v);
            }
        }
    }
    let have = vmin.is_finite();
    let good_t = |v: f64| -> f64 {
        if vmax > vmin {
            let t = (v - vmin) / (vmax - vmin);
            if h.higher_is_better {
                t
            } else {
                1.0 - t
            }
        } else {
            0.5
        }
    };

    // Cell geometry.
    let cw = (640.0 / nc as f64).clamp(6.0, 96.0);
    let ch = cw.min(34.0).min(640.0 / nr as f64).max(6.0);
    let label_size = if ch >= 12.0 && cw >= 12.0 { 11.0 } else { 9.5 };
    let fmt = |v: f64| format!("{:.*}", h.decimals, v);

    // Row labels (thinned to fit the cell height).
    let row_w = h
        .rows
        .iter()
        .map(|s| text_w(s, label_size))
        .fold(0.0, f64::max)
        .min(160.0);
    let row_k = ((label_size + 2.0) / ch).ceil().max(1.0) as usize;
    // Column labels: horizontal when they fit (or short ones thinned),
    // otherwise rotated.
    let col_w = h
        .cols
        .iter()
        .map(|s| text_w(s, label_size))
        .fold(0.0, f64::max)
        .min(160.0);
    let max_chars = h.cols.iter().map(|s| s.chars().count()).max().unwrap_or(0);
    let k_h = ((col_w + 4.0) / cw).ceil().max(1.0) as usize;
    let rotated = k_h > 1 && max_chars > 4;
    let col_k = if rotated {
        ((label_size + 2.0) / cw).ceil().max(1.0) as usize
    } else {
        k_h
    };
    let col_label_h = if rotated {
        col_w + 8.0
    } else {
        label_size + 6.0
    };

    let has_row_title = !h.row_title.is_empty();
    let map_left = 12.0 + if has_row_title { 20.0 } else { 0.0 } + row_w + 8.0;
    let col_title_y = 50.0;
    let map_top = col_title_y + 8.0 + col_label_h;
    let map_w = cw * nc as f64;
    let map_h = ch * nr as f64;
    let map_bottom = map_top + map_h;
    let legend_y = map_bottom + 18.0;
    let unit_text = if h.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", h.unit)
    };
    // One label when every cell has the same value; otherwise the bar is
    // wide enough for both ends' labels.
    let one_value = have && fmt(vmin) == fmt(vmax);
    let ends_w = if one_value {
        0.0
    } else {
        text_w(&format!("{}{unit_text}", fmt(vmin)), 11.0)
            + text_w(&format!("{}{unit_text}", fmt(vmax)), 11.0)
            + 14.0
    };
    let bar_w = map_w.clamp(120.0, 240.0).max(ends_w);
    let note = if h.higher_is_better {
        "higher is better"
    } else {
        "lower is better"
    };
    let note_x = map_left + bar_w + 10.0;
    let w = (map_left + map_w + 16.0)
        .max(note_x + text_w(note, 11.0) + 16.0)
        .max(text_w(title, TITLE_SIZE) + 28.0)
        .max(map_left + text_w(&h.col_title, 12.0) + 16.0);
    let total_h = legend_y + 42.0;

    let mut out = String::new();
    open_svg(&mut out, &sid, title, w, total_h);
    if have {
        let _ = write!(
            out,
            "<defs><linearGradient id=\"{sid}-grad\" x1=\"0\" y1=\"0\" x2=\"1\" y2=\"0\">"
        );
        for k in 0..=10 {
            let f = k as f64 / 10.0;
            let v = vmin + (vmax - vmin) * f;
            let _ = write!(
                out,
                "<stop offset=\"{f}\" stop-color=\"{}\"/>",
                hex(viridis(good_t(v)))
            );
        }
        out.push_str("</linearGradient></defs>");
    }

    // Titles.
    if !h.col_title.is_empty() {
        let _ = write!(
            out,
            "<text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            P((map_left + map_w / 2.0).max(map_left + text_w(&h.col_title, 12.0) / 2.0)),
            P(col_title_y),
            escape(&h.col_title)
        );
    }
    if has_row_title {
        let _ = write!(
            out,
            "<text class=\"axis-label\" transform=\"translate(22 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
            P(map_top + map_h / 2.0),
            escape(&h.row_title)
        );
    }
    // Labels; group starts are always labelled.
    out.push_str("<g class=\"row-labels\">");
    let row_sel = labelled(nr, row_k, &h.row_groups);
    for (r, name) in h.rows.iter().enumerate() {
        if !row_sel[r] {
            continue;
        }
        let _ = write!(
            out,
            "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"{label_size}\" style=\"font-size:{label_size}px\">{}</text>",
            P(map_left - 6.0),
            P(map_top + ch * (r as f64 + 0.5) + label_size * 0.35),
            escape(&fit_text(name, label_size, 160.0))
        );
    }
    out.push_str("</g><g class=\"col-labels\">");
    let col_sel = labelled(nc, col_k, &h.col_groups);
    for (c, name) in h.cols.iter().enumerate() {
        if !col_sel[c] {
            continue;
        }
        let x = map_left + cw * (c as f64 + 0.5);
        let name = escape(&fit_text(name, label_size, 160.0));
        if rotated {
            let _ = write!(
                out,
                "<text class=\"tick\" transform=\"translate({} {}) rotate(-90)\" font-size=\"{label_size}\" style=\"font-size:{label_size}px\">{name}</text>",
                P(x + label_size * 0.35),
                P(map_top - 5.0)
            );
        } else {
            let _ = write!(
                out,
                "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{label_size}\" style=\"font-size:{label_size}px\">{name}</text>",
                P(x),
                P(map_top - 6.0)
            );
        }
    }
    out.push_str("</g>");

    // Cells.
    let show_text = cw >= 18.0 && ch >= 18.0;
    let base_size = (ch * 0.42).clamp(8.0, 12.0);
    out.push_str("<g class=\"cells\">");
    for r in 0..nr {
        for c in 0..nc {
            let (x, y) = (map_left + cw * c as f64, map_top + ch * r as f64);
            let where_ = format!(
                "{}: {}\n{}: {}",
                if h.row_title.is_empty() {
                    "row"
                } else {
                    &h.row_title
                },
                h.rows[r],
                if h.col_title.is_empty() {
                    "column"
                } else {
                    &h.col_title
                },
                h.cols[c]
            );
            let (text, text_fill) = match cell(r, c) {
                Some(v) => {
                    let col = viridis(good_t(v));
                    let unit = if h.unit.is_empty() {
                        String::new()
                    } else {
                        format!(" {}", h.unit)
                    };
                    let _ = write!(
                        out,
                        "<rect class=\"hm-cell\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\">{}</rect>",
                        P(x),
                        P(y),
                        P(cw),
                        P(ch),
                        hex(col),
                        tip(&format!("{where_}\n{v}{unit}"))
                    );
                    (fmt(v), Some(text_on(col)))
                }
                None => {
                    let _ = write!(
                        out,
                        "<rect class=\"hm-none\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">{}</rect>",
                        P(x),
                        P(y),
                        P(cw),
                        P(ch),
                        tip(&format!("{where_}\nno value"))
                    );
                    ("–".to_string(), None)
                }
            };
            if show_text {
                let mut size = base_size;
                while size > 8.0 && text_w(&text, size) > cw - 4.0 {
                    size -= 0.5;
                }
                if text_w(&text, size) <= cw - 3.0 {
                    let style = match text_fill {
                        Some(f) => format!("fill:{f};font-size:{size}px"),
                        None => format!("font-size:{size}px"),
                    };
                    let _ = write!(
                        out,
                        "<text class=\"hm-text\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"{size}\" style=\"{style}\">{}</text>",
                        P(x + cw / 2.0),
                        P(y + ch / 2.0 + size * 0.36),
                        escape(&text)
                    );
                }
            }
        }
    }
    out.push_str("</g><g class=\"groups\">");
    for &g in h.row_groups.iter().filter(|&&g| g > 0 && g < nr) {
        let y = map_top + ch * g as f64;
        let _ = write!(
            out,
            "<line class=\"hm-sep\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\"/>",
            P(map_left - 4.0),
            P(map_left + map_w),
            y = P(y)
        );
    }
    for &g in h.col_groups.iter().filter(|&&g| g > 0 && g < nc) {
        let x = map_left + cw * g as f64;
        let _ = write!(
            out,
            "<line class=\"hm-sep\" x1=\"{x}\" y1=\"{}\" x2=\"{x}\" y2=\"{}\"/>",
            P(map_top - 4.0),
            P(map_bottom),
            x = P(x)
        );
    }
    out.push_str("</g>");

    // Legend.
    let unit = if h.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", h.unit)
    };
    if one_value {
        let _ = write!(
            out,
            "<g class=\"hm-legend\"><text class=\"tick\" x=\"{}\" y=\"{}\">{}</text></g>",
            P(map_left),
            P(legend_y + 10.0),
            escape(&format!(
                "{}{unit} in {}",
                fmt(vmin),
                if nr * nc == 1 {
                    "the only cell"
                } else {
                    "every cell"
                }
            ))
        );
    } else if have {
        let _ = write!(
            out,
            "<g class=\"hm-legend\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"10\" fill=\"url(#{sid}-grad)\">{}</rect>\
             <text class=\"tick\" x=\"{}\" y=\"{}\">{}</text>\
             <text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\
             <text class=\"sub\" x=\"{}\" y=\"{}\" style=\"font-size:11px\">{}</text></g>",
            P(map_left),
            P(legend_y),
            P(bar_w),
            tip(&format!("min {vmin}{unit}, max {vmax}{unit}, {note}")),
            P(map_left),
            P(legend_y + 24.0),
            escape(&format!("{}{unit}", fmt(vmin))),
            P(map_left + bar_w),
            P(legend_y + 24.0),
            escape(&format!("{}{unit}", fmt(vmax))),
            P(note_x),
            P(legend_y + 9.0),
            note
        );
    } else {
        let _ = write!(
            out,
            "<text class=\"sub\" x=\"{}\" y=\"{}\">no values</text>",
            P(map_left),
            P(legend_y + 10.0)
        );
    }
    out.push_str("</svg>");
    out
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

// ---------------------------------------------------------------------------
// Bar chart

/// How bar labels are drawn under the bars.
#[derive(Debug, Clone, Copy, PartialEq)]
enum BarLabels {
    Horizontal,
    Diagonal,
    Vertical,
    Hidden,
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
    let n: usize = groups.iter().map(|g| g.bars.len()).sum();
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
    let any_flag = groups.iter().any(|g| g.bars.iter().any(|b| b.flagged));

    // Horizontal layout.
    let gap = 0.8;
    let slots = n as f64 + gap * (groups.len() as f64 - 1.0);
    let slot = (680.0 / slots).min(60.0);
    let bar_w = if slot >= 6.0 {
        slot * 0.78
    } else {
        slot * 0.86
    };
    let font = 10.0;
    let label_max = 110.0;
    let lw = groups
        .iter()
        .flat_map(|g| g.bars.iter())
        .map(|b| text_w(&b.label, font))
        .fold(0.0, f64::max)
        .min(label_max);
    let mode = if lw + 3.0 <= slot {
        BarLabels::Horizontal
    } else if slot >= 16.0 {
        BarLabels::Diagonal
    } else if slot >= 11.0 {
        BarLabels::Vertical
    } else {
        BarLabels::Hidden
    };
    let label_h = match mode {
        BarLabels::Horizontal => 16.0,
        BarLabels::Diagonal => lw * 0.71 + 16.0,
        BarLabels::Vertical => lw + 12.0,
        BarLabels::Hidden => 4.0,
    };
    let ylabels: Vec<String> = yp.ticks.iter().map(|&v| yp.label(v)).collect();
    let ylab_w = ylabels
        .iter()
        .map(|s| text_w(s, TICK_SIZE))
        .fold(0.0, f64::max);
    let mut left = (ylab_w + 40.0).max(56.0);
    if mode == BarLabels::Diagonal {
        left = left.max(lw * 0.71 - slot / 2.0 + 12.0);
    }
    let plot_w = slot * slots;
    let ref_label = reference.map(|r| compact(r, 3));
    let right_margin = ref_label
        .as_ref()
        .map_or(16.0, |s| text_w(s, TICK_SIZE) + 14.0);
    let right = left + plot_w;
    let w = (right + right_margin).max(text_w(title, TITLE_SIZE) + 28.0);
    let top = if any_flag { 62.0 } else { 44.0 };
    let plot_h = 280.0;
    let bottom = top + plot_h;
    let group_y = bottom + label_h + 14.0;
    let h = group_y + 14.0;
    let ypos = |v: f64| bottom - yp.frac(v) * plot_h;

    let mut out = String::new();
    open_svg(&mut out, &sid, title, w, h);
    if any_flag {
        let _ = write!(
            out,
            "<defs><pattern id=\"{sid}-hatch\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
             <line class=\"hatch\" x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\"/></pattern></defs>\
             <text class=\"sub\" x=\"12\" y=\"44\" style=\"font-size:11px\">hatched with “!”: flagged (see the bar’s tooltip)</text>"
        );
    }

    // Grid, axis, ticks.
    let ypx: Vec<f64> = yp.ticks.iter().map(|&v| ypos(v)).collect();
    let yshow = thin_labels(&ypx, &yp.major, |_| TICK_SIZE + 2.0);
    out.push_str("<g class=\"grid-lines\">");
    for (i, &py) in ypx.iter().enumerate() {
        let _ = write!(
            out,
            "<line class=\"{}\" x1=\"{}\" y1=\"{p}\" x2=\"{}\" y2=\"{p}\"/>",
            if yshow[i] { "grid" } else { "grid-minor" },
            P(left),
            P(right),
            p = P(py)
        );
    }
    out.push_str("</g><g class=\"y-ticks\">");
    for (i, &py) in ypx.iter().enumerate() {
        if yshow[i] {
            let _ = write!(
                out,
                "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>",
                P(left - 7.0),
                P(py + 4.0),
                escape(&ylabels[i])
            );
        }
    }
    let zero = ypos(0.0_f64.clamp(yp.lo, yp.hi));
    let _ = write!(
        out,
        "</g><path class=\"axis\" fill=\"none\" d=\"M{l} {t}V{b}\"/><line class=\"axis\" x1=\"{l}\" y1=\"{z}\" x2=\"{r}\" y2=\"{z}\"/>\
         <text class=\"axis-label\" transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}</text>",
        P(top + plot_h / 2.0),
        escape(y_label),
        l = P(left),
        t = P(top),
        b = P(bottom),
        r = P(right),
        z = P(zero)
    );

    // Bars.
    let mut x = left;
    for (gi, g) in groups.iter().enumerate() {
        let gx0 = x;
        out.push_str("<g class=\"bar-group\">");
        for b in &g.bars {
            let cx = x + slot / 2.0;
            x += slot;
            let mut tooltip = format!("{} · {}: {}", g.label, b.label, b.value);
            if !b.tooltip.is_empty() {
                tooltip.push('\n');
                tooltip.push_str(&b.tooltip);
            }
            if b.flagged {
                tooltip.push_str("\n(flagged)");
            }
            if b.value.is_finite() {
                let v = b.value.clamp(yp.lo, yp.hi);
                let (y0, y1) = (ypos(v).min(zero), ypos(v).max(zero));
                let flagged = if b.flagged { " flagged" } else { "" };
                let _ = write!(
                    out,
                    "<rect class=\"bar s{}{flagged}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\">{}</rect>",
                    gi % 8,
                    P(cx - bar_w / 2.0),
                    P(y0),
                    P(bar_w),
                    P(y1 - y0),
                    tip(&tooltip)
                );
                if b.flagged {
                    let _ = write!(
                        out,
                        "<rect class=\"hatch-overlay\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#{sid}-hatch)\"/>",
                        P(cx - bar_w / 2.0),
                        P(y0),
                        P(bar_w),
                        P(y1 - y0)
                    );
                    {
                        let _ = write!(
                            out,
                            "<text class=\"flag\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">!</text>",
                            P(cx),
                            P(y0 - 3.0)
                        );
                    }
                }
            } else if slot >= 12.0 {
                // No value (failed or skipped case): say so where the bar would be.
                let _ = write!(
                    out,
                    "<text class=\"tick\" transform=\"translate({} {}) rotate(-90)\" style=\"font-size:{font}px\">n/a{}</text>",
                    P(cx + 3.5),
                    P(zero - 4.0),
                    tip(&tooltip)
                );
            }
            let label = escape(&fit_text(&b.label, font, label_max));
            match mode {
                BarLabels::Horizontal => {
                    let _ = write!(
                        out,
                        "<text class=\"tick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" style=\"font-size:{font}px\">{label}</text>",
                        P(cx),
                        P(bottom + 14.0)
                    );
                }
                BarLabels::Diagonal => {
                    let _ = write!(
                        out,
                        "<text class=\"tick\" transform=\"translate({} {}) rotate(-45)\" text-anchor=\"end\" style=\"font-size:{font}px\">{label}</text>",
                        P(cx + 3.0),
                        P(bottom + 10.0)
                    );
                }
                BarLabels::Vertical => {
                    let _ = write!(
                        out,
                        "<text class=\"tick\" transform=\"translate({} {}) rotate(-90)\" text-anchor=\"end\" style=\"font-size:{font}px\">{label}</text>",
                        P(cx + 3.5),
                        P(bottom + 6.0)
                    );
                }
                BarLabels::Hidden => {}
            }
        }
        let gx1 = x;
        let gw = gx1 - gx0;
        let _ = write!(
            out,
            "<line class=\"group-rule\" x1=\"{}\" y1=\"{gy}\" x2=\"{}\" y2=\"{gy}\"/>\
             <text class=\"axis-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text></g>",
            P(gx0 + 1.0),
            P(gx1 - 1.0),
            P((gx0 + gx1) / 2.0),
            P(group_y + 4.0),
            tip(&g.label),
            escape(&fit_text(&g.label, 12.0, gw + slot * gap - 4.0)),
            gy = P(group_y - 10.0)
        );
        x += slot * gap;
    }

    if let (Some(r), Some(label)) = (reference, ref_label) {
        if (yp.lo..=yp.hi).contains(&r) {
            let py = ypos(r);
            let _ = write!(
                out,
                "<g class=\"ref-g\">{}<line class=\"ref\" x1=\"{}\" y1=\"{p}\" x2=\"{}\" y2=\"{p}\"/>\
                 <text class=\"tick\" x=\"{}\" y=\"{}\">{}</text></g>",
                tip(&format!("reference: {r}")),
                P(left),
                P(right + 4.0),
                P(right + 7.0),
                P(py + 4.0),
                escape(&label),
                p = P(py)
            );
        }
    }
    out.push_str("</svg>");
    out
}

// ---------------------------------------------------------------------------
// Node graph

/// Nodes on a circle (one centred, two side by side, more on an ellipse
/// starting top left), CPU nodes as rounded boxes and CPU-less ones as
/// dashed hexagons (with a legend when any is present), edges as lines with
/// their label on a small box near the midpoint, moved along the edge to
/// avoid other labels and nodes. Dense graphs (more than twice as many edges
/// as nodes, as a full distance mesh of 8 or 16 nodes) colour their edges by
/// label (up to 8 distinct labels, with a legend) and label only the edges
/// around the circle; every edge keeps its tooltip. Edges naming unknown
/// nodes and self-loops are skipped.
/// Crossings of chords between points on a circle: `slot[i]` is node i's
/// position around it.
fn crossings(slot: &[usize], edges: &[(usize, usize)]) -> usize {
    let between = |x: usize, a: usize, b: usize| {
        let (lo, hi) = (a.min(b), a.max(b));
        x > lo && x < hi
    };
    let mut count = 0;
    for (k, &(a, b)) in edges.iter().enumerate() {
        for &(c, d) in &edges[k + 1..] {
            let (sa, sb, sc, sd) = (slot[a], slot[b], slot[c], slot[d]);
            if sa == sc || sa == sd || sb == sc || sb == sd {
                continue;
            }
            if between(sc, sa, sb) != between(sd, sa, sb) {
                count += 1;
            }
        }
    }
    count
}

/// The slot of each of `n` nodes around a circle with the fewest crossing
/// edges, node 0 at the top and ties kept in node order; tried
/// exhaustively up to 8 nodes, node order beyond.
fn circle_order(n: usize, edges: &[(usize, usize)]) -> Vec<usize> {
    let identity: Vec<usize> = (0..n).collect();
    if n <= 3 || n > 8 || edges.is_empty() {
        return identity;
    }
    let mut best = identity.clone();
    let mut best_x = crossings(&best, edges);
    // Permutations of slots 1..n in lexicographic order (node 0 stays first).
    let mut order: Vec<usize> = (1..n).collect();
    loop {
        let mut slot = vec![0; n];
        for (pos, &node) in order.iter().enumerate() {
            slot[node] = pos + 1;
        }
        let x = crossings(&slot, edges);
        if x < best_x {
            best_x = x;
            best = slot;
            if x == 0 {
                break;
            }
        }
        // Next permutation.
        let Some(i) = (0..order.len().saturating_sub(1))
            .rev()
            .find(|&i| order[i] < order[i + 1])
        else {
            break;
        };
        let j = (i + 1..order.len())
            .rev()
            .find(|&j| order[j] > order[i])
            .unwrap_or(i);
        order.swap(i, j);
        order[i + 1..].reverse();
    }
    best
}

pub fn node_graph(id: &str, title: &str, nodes: &[GraphNode], edges: &[GraphEdge]) -> String {
    let sid = sanitize_id(id);
    if nodes.is_empty() {
        return no_data(&sid, title, "no nodes");
    }
    let n = nodes.len();
    let label_size = 12.0;
    let detail_size = 10.5;
    let max_box = 150.0;
    let index_of = |id: u32| nodes.iter().position(|nd| nd.id == id);
    let edges: Vec<(usize, usize, &GraphEdge)> = edges
        .iter()
        .filter_map(|e| match (index_of(e.a), index_of(e.b)) {
            (Some(i), Some(j)) if i != j => Some((i, j, e)),
            _ => None,
        })
        .collect();

    // Box sizes.
    let sizes: Vec<(f64, f64)> = nodes
        .iter()
        .map(|nd| {
            let tw = text_w(&nd.label, label_size)
                .max(text_w(&nd.detail, detail_size))
                .min(max_box - 20.0);
            let extra = if nd.cpuless { 22.0 } else { 0.0 };
            let bw = (tw + 20.0 + extra).max(64.0);
            let bh = if nd.detail.is_empty() { 28.0 } else { 42.0 };
            (bw, bh)
        })
        .collect();

    // Positions on an ellipse around the origin, in the order around it
    // with the fewest crossing links (a ring is drawn as a ring), radius
    // grown until no two boxes come closer than a margin.
    let slot = circle_order(n, &edges.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>());
    let angle = |i: usize| {
        -std::f64::consts::FRAC_PI_2 - std::f64::consts::PI / n as f64
            + 2.0 * std::f64::consts::PI * i as f64 / n as f64
    };
    let aspect = 1.45;
    let place = |r: f64| -> Vec<(f64, f64)> {
        if n == 1 {
            return vec![(0.0, 0.0)];
        }
        (0..n)
            .map(|i| {
                let a = angle(slot[i]);
                (r * aspect * a.cos(), r * a.sin())
            })
            .collect()
    };
    let clear = |pos: &[(f64, f64)]| {
        for i in 0..n {
            for j in (i + 1)..n {
                let dx = (pos[i].0 - pos[j].0).abs() - (sizes[i].0 + sizes[j].0) / 2.0;
                let dy = (pos[i].1 - pos[j].1).abs() - (sizes[i].1 + sizes[j].1) / 2.0;
                if dx < 36.0 && dy < 30.0 {
                    return false;
                }
            }
        }
        true
    };
    let mut radius = match n {
        1 => 0.0,
        2 => 110.0,
        _ => 95.0,
    };
    let mut pos = place(radius);
    while n > 1 && !clear(&pos) && radius < 2000.0 {
        radius += 5.0;
        pos = place(radius);
    }

    // Dense graphs: edge colour classes by label.
    let dense = edges.len() > 2 * n;
    let mut classes: Vec<&str> = Vec::new();
    for (_, _, e) in &edges {
        if !e.label.is_empty() && !classes.contains(&e.label.as_str()) {
            classes.push(&e.label);
        }
    }
    if classes.iter().all(|c| c.trim().parse::<f64>().is_ok()) {
        classes.sort_by(|a, b| {
            let (x, y) = (a.trim().parse::<f64>(), b.trim().parse::<f64>());
            x.unwrap_or(0.0).total_cmp(&y.unwrap_or(0.0))
        });
    }
    let coloured = dense && (2..=8).contains(&classes.len());
    let class_of = |label: &str| classes.iter().position(|c| *c == label);

    // Legend items: (kind, text); kinds 0 node box, 1 hexagon, 2+k edge class k.
    let any_cpuless = nodes.iter().any(|nd| nd.cpuless);
    let mut legend: Vec<(usize, String)> = Vec::new();
    if any_cpuless {
        legend.push((0, "node with CPUs".to_string()));
        legend.push((1, "CPU-less memory node".to_string()));
    }
    if coloured {
        for (k, c) in classes.iter().enumerate() {
            legend.push((2 + k, (*c).to_string()));
        }
    }
    let legend_item_w =
        |kind: usize, text: &str| (if kind < 2 { 36.0 } else { 28.0 }) + text_w(text, 11.0) + 16.0;

    // Bounding box and translation into the view.
    let minx = (0..n)
        .map(|i| pos[i].0 - sizes[i].0 / 2.0)
        .fold(f64::INFINITY, f64::min);
    let maxx = (0..n)
        .map(|i| pos[i].0 + sizes[i].0 / 2.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let miny = (0..n)
        .map(|i| pos[i].1 - sizes[i].1 / 2.0)
        .fold(f64::INFINITY, f64::min);
    let maxy = (0..n)
        .map(|i| pos[i].1 + sizes[i].1 / 2.0)
        .fold(f64::NEG_INFINITY, f64::max);
    let w = (maxx - minx + 48.0)
        .max(text_w(title, TITLE_SIZE) + 28.0)
        .max(if any_cpuless { 330.0 } else { 0.0 })
        .max(240.0);
    let top = 48.0;
    let ox = w / 2.0 - (minx + maxx) / 2.0;
    let oy = top - miny;
    let graph_bottom = maxy + oy;
    // Lay the legend out in rows.
    let mut legend_at: Vec<(f64, f64)> = Vec::new();
    let (mut lx, mut ly) = (14.0, graph_bottom + 26.0);
    for (kind, text) in &legend {
        let iw = legend_item_w(*kind, text);
        if lx + iw > w - 8.0 && lx > 14.0 {
            lx = 14.0;
            ly += 20.0;
        }
        legend_at.push((lx, ly));
        lx += iw;
    }
    let mut h = if legend.is_empty() {
        graph_bottom + 18.0
    } else {
        ly + 14.0
    };
    let note = if dense {
        let text = if coloured {
            "edges coloured by label; labels of inner edges in their tooltips"
        } else {
            "labels of inner edges in their tooltips"
        };
        h += 18.0;
        Some((text, h - 12.0))
    } else {
        None
    };
    let at: Vec<(f64, f64)> = pos.iter().map(|&(x, y)| (x + ox, y + oy)).collect();

    let mut out = String::new();
    open_svg(&mut out, &sid, title, w, h);

    // Edges first, under the nodes; labels on top of every edge line.
    type Rect = (f64, f64, f64, f64);
    let overlaps = |a: &Rect, b: &Rect| a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3;
    let node_rects: Vec<Rect> = (0..n)
        .map(|i| {
            (
                at[i].0 - sizes[i].0 / 2.0 - 2.0,
                at[i].1 - sizes[i].1 / 2.0 - 2.0,
                at[i].0 + sizes[i].0 / 2.0 + 2.0,
                at[i].1 + sizes[i].1 / 2.0 + 2.0,
            )
        })
        .collect();
    let mut label_rects: Vec<Rect> = Vec::new();
    let mut labels = String::new();
    out.push_str("<g class=\"edges\">");
    for &(i, j, e) in &edges {
        let (a, b) = (at[i], at[j]);
        let tooltip = format!("{} – {}: {}", nodes[i].label, nodes[j].label, e.label);
        let colour = if coloured {
            class_of(&e.label).map_or(String::new(), |k| format!(" s{k}"))
        } else {
            String::new()
        };
        let _ = write!(
            out,
            "<g class=\"edge-g\">{}<line class=\"edge-hit\" x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\"/>\
             <line class=\"edge{colour}{}\" x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\"/></g>",
            tip(&tooltip),
            if dense { " dense" } else { "" },
            x1 = P(a.0),
            y1 = P(a.1),
            x2 = P(b.0),
            y2 = P(b.1)
        );
        let around = i.abs_diff(j) == 1 || i.abs_diff(j) == n - 1;
        if e.label.is_empty() || (dense && !around) {
            continue;
        }
        let text = fit_text(&e.label, 11.0, 120.0);
        let bw = text_w(&text, 11.0) + 10.0;
        let bh = 16.0;
        for t in [0.5, 0.42, 0.58, 0.34, 0.66, 0.27, 0.73] {
            let (cx, cy) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
            let rect = (
                cx - bw / 2.0 - 1.0,
                cy - bh / 2.0 - 1.0,
                cx + bw / 2.0 + 1.0,
                cy + bh / 2.0 + 1.0,
            );
            if node_rects.iter().any(|r| overlaps(r, &rect))
                || label_rects.iter().any(|r| overlaps(r, &rect))
            {
                continue;
            }
            label_rects.push(rect);
            let _ = write!(
                labels,
                "<g class=\"edge-label-g\">{}<rect class=\"edge-label-bg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"3\"/>\
                 <text class=\"edge-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
                tip(&tooltip),
                P(cx - bw / 2.0),
                P(cy - bh / 2.0),
                P(bw),
                P(bh),
                P(cx),
                P(cy + 4.0),
                escape(&text)
            );
            break;
        }
    }
    out.push_str("</g><g class=\"edge-labels\">");
    out.push_str(&labels);
    out.push_str("</g><g class=\"nodes\">");
    for (i, nd) in nodes.iter().enumerate() {
        let (cx, cy) = at[i];
        let (bw, bh) = sizes[i];
        let mut tooltip = nd.label.clone();
        if !nd.detail.is_empty() {
            tooltip.push('\n');
            tooltip.push_str(&nd.detail);
        }
        if nd.cpuless {
            tooltip.push_str("\nCPU-less memory node");
        }
        out.push_str("<g class=\"node-g\">");
        if nd.cpuless {
            let _ = write!(
                out,
                "<polygon class=\"node cpuless\" points=\"{}\">{}</polygon>",
                hexagon(cx, cy, bw, bh),
                tip(&tooltip)
            );
        } else {
            let _ = write!(
                out,
                "<rect class=\"node\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"7\">{}</rect>",
                P(cx - bw / 2.0),
                P(cy - bh / 2.0),
                P(bw),
                P(bh),
                tip(&tooltip)
            );
        }
        let inner = bw - if nd.cpuless { 30.0 } else { 12.0 };
        let ly = if nd.detail.is_empty() {
            cy + 4.5
        } else {
            cy - 3.0
        };
        let _ = write!(
            out,
            "<text class=\"node-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" pointer-events=\"none\">{}</text>",
            P(cx),
            P(ly),
            escape(&fit_text(&nd.label, label_size, inner))
        );
        if !nd.detail.is_empty() {
            let _ = write!(
                out,
                "<text class=\"sub\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" pointer-events=\"none\" style=\"font-size:{detail_size}px\">{}</text>",
                P(cx),
                P(cy + 12.0),
                escape(&fit_text(&nd.detail, detail_size, inner))
            );
        }
        out.push_str("</g>");
    }
    out.push_str("</g><g class=\"graph-legend\">");
    for ((kind, text), &(lx, ly)) in legend.iter().zip(&legend_at) {
        let (swatch, text_x) = match kind {
            0 => (
                format!(
                    "<rect class=\"swatch-node\" x=\"{}\" y=\"{}\" width=\"28\" height=\"14\" rx=\"4\"/>",
                    P(lx),
                    P(ly - 11.0)
                ),
                lx + 34.0,
            ),
            1 => (
                format!(
                    "<polygon class=\"swatch-node cpuless\" points=\"{}\"/>",
                    hexagon(lx + 14.0, ly - 4.0, 28.0, 14.0)
                ),
                lx + 34.0,
            ),
            k => (
                format!(
                    "<line class=\"edge s{}\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" style=\"stroke-width:3;stroke-opacity:1\"/>",
                    k - 2,
                    P(lx),
                    P(lx + 22.0),
                    y = P(ly - 4.0)
                ),
                lx + 28.0,
            ),
        };
        let _ = write!(
            out,
            "{swatch}<text class=\"sub\" x=\"{}\" y=\"{}\" style=\"font-size:11px\">{}</text>",
            P(text_x),
            P(ly),
            escape(text)
        );
    }
    out.push_str("</g>");
    if let Some((text, y)) = note {
        let _ = write!(
            out,
            "<text class=\"sub\" x=\"14\" y=\"{}\" style=\"font-size:11px\">{text}</text>",
            P(y)
        );
    }
    out.push_str("</svg>");
    out
}

/// Points of a hexagon with flat top and bottom, pointed left and right,
/// bounded by `w` x `h` around (`cx`, `cy`).
fn hexagon(cx: f64, cy: f64, w: f64, h: f64) -> String {
    let (hw, hh) = (w / 2.0, h / 2.0);
    let inset = (h / 2.0).min(hw * 0.4);
    let pts = [
        (cx - hw, cy),
        (cx - hw + inset, cy - hh),
        (cx + hw - inset, cy - hh),
        (cx + hw, cy),
        (cx + hw - inset, cy + hh),
        (cx - hw + inset, cy + hh),
    ];
    pts.iter()
        .map(|&(x, y)| format!("{},{}", P(x), P(y)))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One element of a parsed document.
    #[derive(Debug)]
    struct El {
        name: String,
        attrs: Vec<(String, String)>,
        /// Direct text content, entities decoded.
        text: String,
        children: Vec<usize>,
    }

    impl El {
        fn attr(&self, name: &str) -> Option<&str> {
            self.attrs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        }
        fn num(&self, name: &str) -> f64 {
            self.attr(name)
                .unwrap_or_else(|| panic!("no {name} on {self:?}"))
                .parse()
                .unwrap()
        }
        fn has_class(&self, c: &str) -> bool {
            self.attr("class")
                .is_some_and(|v| v.split_whitespace().any(|t| t == c))
        }
    }

    /// Decodes the five predefined entities and character references,
    /// rejecting a bare `&` or an unknown entity.
    fn decode(s: &str) -> Result<String, String> {
        let mut out = String::new();
        let mut rest = s;
        while let Some(i) = rest.find('&') {
            out.push_str(&rest[..i]);
            let after = &rest[i + 1..];
            let end = after
                .find(';')
                .filter(|&e| e <= 10)
                .ok_or_else(|| format!("bare & in {s:?}"))?;
            let ent = &after[..end];
            let c = match ent {
                "amp" => '&',
                "lt" => '<',
                "gt" => '>',
                "quot" => '"',
                "apos" => '\'',
                _ if ent.starts_with("#x") => u32::from_str_radix(&ent[2..], 16)
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("bad reference &{ent};"))?,
                _ if ent.starts_with('#') => ent[1..]
                    .parse::<u32>()
                    .ok()
                    .and_then(char::from_u32)
                    .ok_or_else(|| format!("bad reference &{ent};"))?,
                _ => return Err(format!("unknown entity &{ent};")),
            };
            out.push(c);
            rest = &after[end + 1..];
        }
        out.push_str(rest);
        if out
            .chars()
            .any(|c| (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r'))
        {
            return Err(format!("control character in {s:?}"));
        }
        Ok(out)
    }

    fn is_name_char(c: char, first: bool) -> bool {
        c.is_ascii_alphabetic()
            || c == '_'
            || c == ':'
            || (!first && (c.is_ascii_digit() || c == '-' || c == '.'))
    }

    /// A small well-formedness checker and parser: one root element, tags
    /// balanced, names valid, attributes quoted, unique and free of `<`, no
    /// raw `&` anywhere, no text outside the root.
    fn parse(xml: &str) -> Result<Vec<El>, String> {
        let mut els: Vec<El> = Vec::new();
        let mut stack: Vec<usize> = Vec::new();
        let mut root_seen = false;
        let b: Vec<char> = xml.chars().collect();
        let mut i = 0;
        let name_at = |i: &mut usize| -> Result<String, String> {
            let start = *i;
            while *i < b.len() && is_name_char(b[*i], *i == start) {
                *i += 1;
            }
            if *i == start {
                return Err(format!("expected a name at {start}"));
            }
            Ok(b[start..*i].iter().collect())
        };
        while i < b.len() {
            if b[i] == '<' {
                let rest: String = b[i..(i + 4).min(b.len())].iter().collect();
                if rest.starts_with("<!--") {
                    let s: String = b[i..].iter().collect();
                    let end = s.find("-->").ok_or("unclosed comment")?;
                    if s[4..end].contains("--") {
                        return Err("-- in comment".into());
                    }
                    i += end + 3;
                    continue;
                }
                if rest.starts_with("</") {
                    i += 2;
                    let name = name_at(&mut i)?;
                    while i < b.len() && b[i].is_whitespace() {
                        i += 1;
                    }
                    if i >= b.len() || b[i] != '>' {
                        return Err(format!("bad end tag </{name}"));
                    }
                    i += 1;
                    let open = stack.pop().ok_or(format!("unmatched </{name}>"))?;
                    if els[open].name != name {
                        return Err(format!("<{}> closed by </{name}>", els[open].name));
                    }
                    continue;
                }
                i += 1;
                let name = name_at(&mut i)?;
                if stack.is_empty() {
                    if root_seen {
                        return Err("a second root element".into());
                    }
                    root_seen = true;
                }
                let mut attrs: Vec<(String, String)> = Vec::new();
                let self_closing;
                loop {
                    let ws = i < b.len() && b[i].is_whitespace();
                    while i < b.len() && b[i].is_whitespace() {
                        i += 1;
                    }
                    if i >= b.len() {
                        return Err(format!("unclosed <{name}"));
                    }
                    if b[i] == '>' {
                        i += 1;
                        self_closing = false;
                        break;
                    }
                    if b[i] == '/' {
                        if b.get(i + 1) != Some(&'>') {
                            return Err(format!("stray / in <{name}"));
                        }
                        i += 2;
                        self_closing = true;
                        break;
                    }
                    if !ws {
                        return Err(format!("no space before an attribute of <{name}"));
                    }
                    let an = name_at(&mut i)?;
                    while i < b.len() && b[i].is_whitespace() {
                        i += 1;
                    }
                    if b.get(i) != Some(&'=') {
                        return Err(format!("attribute {an} of <{name}> without ="));
                    }
                    i += 1;
                    while i < b.len() && b[i].is_whitespace() {
                        i += 1;
                    }
                    let q = *b.get(i).ok_or("eof")?;
                    if q != '"' && q != '\'' {
                        return Err(format!("attribute {an} of <{name}> not quoted"));
                    }
                    i += 1;
                    let start = i;
                    while i < b.len() && b[i] != q {
                        if b[i] == '<' {
                            return Err(format!("< in attribute {an} of <{name}>"));
                        }
                        i += 1;
                    }
                    if i >= b.len() {
                        return Err(format!("unterminated attribute {an}"));
                    }
                    let raw: String = b[start..i].iter().collect();
                    i += 1;
                    if attrs.iter().any(|(k, _)| *k == an) {
                        return Err(format!("duplicate attribute {an} on <{name}>"));
                    }
                    attrs.push((an, decode(&raw)?));
                }
                let idx = els.len();
                if let Some(&p) = stack.last() {
                    els[p].children.push(idx);
                }
                els.push(El {
                    name,
                    attrs,
                    text: String::new(),
                    children: Vec::new(),
                });
                if !self_closing {
                    stack.push(idx);
                }
            } else {
                let start = i;
                while i < b.len() && b[i] != '<' {
                    i += 1;
                }
                let raw: String = b[start..i].iter().collect();
                let text = decode(&raw)?;
                match stack.last() {
                    Some(&p) => els[p].text.push_str(&text),
                    None if text.trim().is_empty() => {}
                    None => return Err(format!("text outside the root: {text:?}")),
                }
            }
        }
        if let Some(&open) = stack.last() {
            return Err(format!("<{}> not closed", els[open].name));
        }
        if !root_seen {
            return Err("no root element".into());
        }
        Ok(els)
    }

    fn doc(xml: &str) -> Vec<El> {
        parse(xml).unwrap_or_else(|e| panic!("not well-formed: {e}\n{xml}"))
    }

    /// The text of element `i`'s `<title>` child.
    fn title_of(els: &[El], i: usize) -> Option<String> {
        els[i]
            .children
            .iter()
            .find(|&&c| els[c].name == "title")
            .map(|&c| els[c].text.clone())
    }

    fn find<'a>(els: &'a [El], name: &str, class: &str) -> Vec<(usize, &'a El)> {
        els.iter()
            .enumerate()
            .filter(|(_, e)| e.name == name && (class.is_empty() || e.has_class(class)))
            .collect()
    }

    /// Root element requirements of the style contract.
    fn check_root(els: &[El], id: &str, title: &str) {
        let root = &els[0];
        assert_eq!(root.name, "svg");
        assert_eq!(root.attr("id"), Some(id));
        assert_eq!(root.attr("role"), Some("img"));
        assert_eq!(root.attr("width"), Some("100%"));
        assert!(root.attr("viewBox").is_some());
        assert!(root.attr("style").unwrap().contains("max-width:"));
        let labelled = root.attr("aria-labelledby").unwrap();
        let t = els
            .iter()
            .find(|e| e.attr("id") == Some(labelled))
            .expect("aria-labelledby target");
        assert_eq!(t.name, "title");
        assert_eq!(t.text, title);
        assert!(root.children.contains(&1), "title is a child of the root");
        // The title is visible too.
        assert!(find(els, "text", "chart-title")
            .iter()
            .any(|(_, e)| e.text == title));
    }

    /// No hard-coded colour outside heatmap cells.
    fn check_no_literal_colours(svg: &str) {
        for bad in [
            "fill=\"#",
            "stroke=\"#",
            "fill:#",
            "stroke:#",
            "black",
            "white",
        ] {
            assert!(!svg.contains(bad), "hard-coded colour {bad}");
        }
    }

    const HOSTILE: &str = "a<b & c>\"d\" 'e' &amp; \u{1}";
    const HOSTILE_CLEAN: &str = "a<b & c>\"d\" 'e' &amp; ";

    fn bytes_axis() -> Axis {
        Axis::new("working set (bytes)", Scale::Log2, TickFormat::Bytes)
    }

    fn gbs_axis() -> Axis {
        Axis::new("bandwidth (GB/s)", Scale::Linear, TickFormat::Number)
    }

    fn sample_heatmap(higher_is_better: bool) -> Heatmap {
        Heatmap {
            rows: vec!["node 0".into(), "node 1".into()],
            cols: vec!["m0".into(), "m1".into(), "m2".into()],
            values: vec![
                vec![Some(90.25), Some(140.0), None],
                vec![Some(141.5), Some(250.0), Some(180.0)],
            ],
            row_title: "CPU node".into(),
            col_title: "memory node".into(),
            unit: "ns".into(),
            decimals: 1,
            higher_is_better,
            row_groups: vec![],
            col_groups: vec![],
        }
    }

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

    fn graph_nodes(n: usize, cpuless: Option<usize>) -> Vec<GraphNode> {
        (0..n)
            .map(|i| GraphNode {
                id: i as u32,
                label: format!("node {i}"),
                detail: "8 CPUs, 16 GiB".into(),
                cpuless: Some(i) == cpuless,
            })
            .collect()
    }

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
    fn checker_rejects_malformed_markup() {
        assert!(parse("<svg><g></svg>").is_err());
        assert!(parse("<svg a=b/>").is_err());
        assert!(parse("<svg a=\"1\" a=\"2\"/>").is_err());
        assert!(parse("<svg>a & b</svg>").is_err());
        assert!(parse("<svg>a &foo; b</svg>").is_err());
        assert!(parse("<svg a=\"<\"/>").is_err());
        assert!(parse("<svg/><svg/>").is_err());
        assert!(parse("<svg a=\"1\"b=\"2\"/>").is_err());
        assert!(parse("<svg><t>x &lt; &#39;</t></svg>").is_ok());
    }

    #[test]
    fn every_chart_is_well_formed_with_hostile_text() {
        let h = HOSTILE;
        let x = Axis::new(h, Scale::Log2, TickFormat::Bytes);
        let y = Axis::new(h, Scale::Linear, TickFormat::Percent);
        let line = line_chart(
            "id<&>",
            h,
            &x,
            &y,
            &[Series {
                name: h.into(),
                points: vec![(4096.0, 0.5), (8192.0, 0.75)],
                dashed: true,
            }],
            &[Marker {
                x: 6000.0,
                label: h.into(),
            }],
            &[PointMark {
                x: 4096.0,
                y: 0.5,
                label: h.into(),
            }],
        );
        let mut hm = sample_heatmap(false);
        hm.rows = vec![h.into(), h.into()];
        hm.cols = vec![h.into(), h.into(), h.into()];
        hm.row_title = h.into();
        hm.col_title = h.into();
        hm.unit = h.into();
        let heat = heatmap("id<&>", h, &hm);
        let bars = bar_chart(
            "id<&>",
            h,
            h,
            &[BarGroup {
                label: h.into(),
                bars: vec![Bar {
                    label: h.into(),
                    value: 1.5,
                    tooltip: h.into(),
                    flagged: true,
                }],
            }],
            Some(1.0),
        );
        let nodes = vec![
            GraphNode {
                id: 0,
                label: h.into(),
                detail: h.into(),
                cpuless: false,
            },
            GraphNode {
                id: 1,
                label: h.into(),
                detail: h.into(),
                cpuless: true,
            },
        ];
        let graph = node_graph(
            "id<&>",
            h,
            &nodes,
            &[GraphEdge {
                a: 0,
                b: 1,
                label: h.into(),
            }],
        );
        let empty_line = line_chart("e", h, &x, &y, &[], &[], &[]);
        let empty_heat = heatmap("e", h, &Heatmap::default());
        let empty_bars = bar_chart("e", h, h, &[], None);
        let empty_graph = node_graph("e", h, &[], &[]);
        for (svg, id) in [
            (&line, "id___"),
            (&heat, "id___"),
            (&bars, "id___"),
            (&graph, "id___"),
            (&empty_line, "e"),
            (&empty_heat, "e"),
            (&empty_bars, "e"),
            (&empty_graph, "e"),
        ] {
            let els = doc(svg);
            check_root(&els, id, HOSTILE_CLEAN);
            assert!(!svg.contains("NaN") && !svg.contains("inf"));
        }
        for svg in [&line, &bars, &graph, &empty_line] {
            check_no_literal_colours(svg);
        }
        // The hostile text survives as text, in labels and tooltips.
        let els = doc(&line);
        assert!(find(&els, "text", "axis-label")
            .iter()
            .all(|(_, e)| e.text == HOSTILE_CLEAN));
        assert!(find(&els, "text", "marker-label")
            .iter()
            .any(|(_, e)| e.text == HOSTILE_CLEAN));
        for svg in [&empty_line, &empty_heat, &empty_bars] {
            assert!(doc(svg).iter().any(|e| e.text == "no data"));
        }
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

    #[test]
    fn rings_are_drawn_without_crossings() {
        // The Quartet: 0-1, 0-2, 1-3, 2-3; in node order 0-2 and 1-3 cross.
        let ring = [(0, 1), (0, 2), (1, 3), (2, 3)];
        assert_eq!(crossings(&[0, 1, 2, 3], &ring), 1);
        let slot = circle_order(4, &ring);
        assert_eq!(crossings(&slot, &ring), 0);
        assert_eq!(slot[0], 0);
        // Already a ring in node order: kept as it is.
        let plain = [(0, 1), (1, 2), (2, 3), (3, 0)];
        assert_eq!(circle_order(4, &plain), vec![0, 1, 2, 3]);
        // An 8-node cube-like graph ends with no more crossings than node order.
        let cube = [
            (0, 1),
            (1, 3),
            (3, 2),
            (2, 0),
            (4, 5),
            (5, 7),
            (7, 6),
            (6, 4),
            (0, 4),
            (1, 5),
            (2, 6),
            (3, 7),
        ];
        let s = circle_order(8, &cube);
        assert!(crossings(&s, &cube) <= crossings(&(0..8).collect::<Vec<_>>(), &cube));
    }

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
        let root_w: f64 = els[0]
            .attr("viewBox")
            .unwrap()
            .split(' ')
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        assert!(root_w <= 800.0);
    }

    #[test]
    fn node_graph_nodes_edges_labels_and_cpuless_style() {
        let nodes = graph_nodes(4, Some(3));
        let edges: Vec<GraphEdge> = (0..4)
            .map(|i| GraphEdge {
                a: i,
                b: (i + 1) % 4,
                label: if i % 2 == 0 { "16".into() } else { "22".into() },
            })
            .chain([GraphEdge {
                a: 0,
                b: 9,
                label: "unknown".into(),
            }])
            .collect();
        let svg = node_graph("g4", "Four nodes", &nodes, &edges);
        check_no_literal_colours(&svg);
        let els = doc(&svg);
        let shapes: Vec<_> = els
            .iter()
            .enumerate()
            .filter(|(_, e)| e.has_class("node"))
            .collect();
        assert_eq!(shapes.len(), 4);
        let cpuless: Vec<_> = shapes
            .iter()
            .filter(|(_, e)| e.has_class("cpuless"))
            .collect();
        assert_eq!(cpuless.len(), 1);
        assert_eq!(cpuless[0].1.name, "polygon");
        assert!(title_of(&els, cpuless[0].0).unwrap().contains("node 3"));
        assert!(shapes
            .iter()
            .filter(|(_, e)| !e.has_class("cpuless"))
            .all(|(_, e)| e.name == "rect"));
        assert_eq!(find(&els, "line", "edge").len(), 4);
        let labels: Vec<&str> = find(&els, "text", "edge-label")
            .iter()
            .map(|(_, e)| e.text.as_str())
            .collect();
        assert_eq!(labels, ["16", "22", "16", "22"]);
        for i in 0..4 {
            let name = format!("node {i}");
            assert!(find(&els, "text", "node-label")
                .iter()
                .any(|(_, e)| e.text == name));
        }
        // Legend explains the CPU-less shape.
        assert!(els.iter().any(|e| e.text == "CPU-less memory node"));
        assert!(find(&els, "polygon", "swatch-node")[0]
            .1
            .has_class("cpuless"));
        // Edge tooltips.
        let edge_groups = find(&els, "g", "edge-g");
        assert_eq!(edge_groups.len(), 4);
        assert_eq!(
            title_of(&els, edge_groups[0].0).unwrap(),
            "node 0 – node 1: 16"
        );
    }

    #[test]
    fn node_graph_layouts_for_small_and_large_counts() {
        // One node: centred in the view.
        let els = doc(&node_graph("g1", "One", &graph_nodes(1, None), &[]));
        let w: f64 = els[0]
            .attr("viewBox")
            .unwrap()
            .split(' ')
            .nth(2)
            .unwrap()
            .parse()
            .unwrap();
        let r = find(&els, "rect", "node")[0].1;
        assert!((r.num("x") + r.num("width") / 2.0 - w / 2.0).abs() < 0.2);
        // Two nodes: side by side.
        let e = [GraphEdge {
            a: 0,
            b: 1,
            label: "21".into(),
        }];
        let els = doc(&node_graph("g2", "Two", &graph_nodes(2, None), &e));
        let r = find(&els, "rect", "node");
        assert_eq!(r[0].1.num("y"), r[1].1.num("y"));
        assert!(r[1].1.num("x") > r[0].1.num("x") + r[0].1.num("width"));
        // Full meshes of 5, 8 and 16 nodes: no two node boxes overlap, and
        // edge labels never overlap each other.
        for (n, cpuless) in [(5, Some(4)), (8, None), (16, None)] {
            let mut edges = Vec::new();
            for a in 0..n as u32 {
                for b in (a + 1)..n as u32 {
                    edges.push(GraphEdge {
                        a,
                        b,
                        label: (10 + (a ^ b) % 4 * 5).to_string(),
                    });
                }
            }
            let els = doc(&node_graph("g", "Mesh", &graph_nodes(n, cpuless), &edges));
            assert_eq!(
                find(&els, "line", "edge")
                    .iter()
                    .filter(|(_, e)| e.attr("style").is_none())
                    .count(),
                edges.len()
            );
            let boxes: Vec<(f64, f64, f64, f64)> = find(&els, "rect", "node")
                .iter()
                .map(|(_, e)| (e.num("x"), e.num("y"), e.num("width"), e.num("height")))
                .collect();
            assert_eq!(boxes.len(), n - cpuless.map_or(0, |_| 1));
            let disjoint = |a: &(f64, f64, f64, f64), b: &(f64, f64, f64, f64)| {
                a.0 + a.2 <= b.0 || b.0 + b.2 <= a.0 || a.1 + a.3 <= b.1 || b.1 + b.3 <= a.1
            };
            for i in 0..boxes.len() {
                for j in (i + 1)..boxes.len() {
                    assert!(
                        disjoint(&boxes[i], &boxes[j]),
                        "{n} nodes: boxes {i} and {j}"
                    );
                }
            }
            let labels: Vec<(f64, f64, f64, f64)> = find(&els, "rect", "edge-label-bg")
                .iter()
                .map(|(_, e)| (e.num("x"), e.num("y"), e.num("width"), e.num("height")))
                .collect();
            assert!(!labels.is_empty());
            for i in 0..labels.len() {
                for j in (i + 1)..labels.len() {
                    assert!(
                        disjoint(&labels[i], &labels[j]),
                        "{n} nodes: labels {i} and {j}"
                    );
                }
            }
        }
    }
}
