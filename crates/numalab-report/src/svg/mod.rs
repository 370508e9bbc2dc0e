//! Chart primitives for the self-contained HTML report (`numalab report`):
//! pure functions that return inline SVG markup, with no JavaScript, no
//! network and no dependencies beyond std.
//!
//! Charts:
//! - [`line_chart`]: series of (x, y) points on linear or log axes, with a
//!   legend, vertical markers (cache sizes) and emphasised points (a knee);
//! - [`heatmap()`]: a labelled matrix of values (node x node latency, CPU x CPU
//!   cache-line transfers) coloured with the perceptual viridis palette, the
//!   "good" end always bright yellow whatever the direction of the metric;
//! - [`bar_chart`]: grouped bars (normalized sweep times) with an optional
//!   reference line and flagged (hatched) bars: vertical while every label
//!   fits under its bar, else one labelled row per bar in side-by-side
//!   columns, so that no label is ever cut or dropped;
//! - [`node_graph`]: NUMA nodes on a circle with labelled distance edges,
//!   CPU-less memory nodes drawn as dashed hexagons;
//! - [`lane_chart`]: labelled rows of coloured segments along one axis (a
//!   profiled thread's time on each node, a region's pages by node);
//! - [`machine_picture`]: the machine as lstopo draws it (packages, nodes,
//!   caches, cores, PUs, CPU-less memory, devices), with its own style, as
//!   `numalab topology --svg` writes it.
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
//!
//! Inside: `frame` writes what every chart shares (the root element and
//! its titles, tooltips, coordinates, legend rows, ids, [`CHART_CSS`]),
//! `metrics` estimates text widths, `axis` plans axes and their ticks,
//! `format` writes tick labels and exact values, `palette` colours heatmap
//! cells, and `line`, `heatmap`, `bar`, `graph` and `lanes` each draw one kind of
//! chart: a layout computed first, then drawn piece by piece.

mod axis;
mod bar;
mod format;
mod frame;
mod graph;
mod heatmap;
mod lanes;
mod line;
mod machine;
mod metrics;
mod palette;
#[cfg(test)]
mod test_support;

pub use axis::{Axis, Scale, TickFormat};
pub use bar::{bar_chart, Bar, BarGroup};
pub use frame::CHART_CSS;
pub use graph::{node_graph, GraphEdge, GraphNode};
pub use heatmap::{heatmap, Heatmap};
pub use lanes::{lane_chart, Lane, LaneKey, Segment};
pub use line::{line_chart, Marker, PointMark, Series};
pub use machine::machine_picture;
/// Escapes text for XML content and attribute values: the crate's one
/// escaping rule, under the name the report pages use.
pub use numalab::text::escape::xml as escape;
/// A byte size in binary units (`4 KiB`, `1.5 MiB`), as on byte axes: the
/// crate's one rounding rule, under its old name here.
pub use numalab::text::format::bytes_f64 as format_bytes;

#[cfg(test)]
mod tests {
    use super::test_support::*;
    use super::*;

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
                    interval: Some((1.0, 2.0)),
                    series: None,
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
}
