//! Node graphs: NUMA nodes on a circle with labelled distance edges,
//! CPU-less memory nodes drawn as dashed hexagons.

use super::escape;
use super::frame::{flow, no_data, open_svg, sanitize_id, tip, P, TITLE_SIZE};
use super::metrics::{fit_text, text_w};
use std::f64::consts::{FRAC_PI_2, PI};
use std::fmt::Write as _;

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

/// Size of node labels (px).
const LABEL_SIZE: f64 = 12.0;
/// Size of node details (px).
const DETAIL_SIZE: f64 = 10.5;
/// Widest node box (px); longer texts are cut with "…".
const MAX_BOX: f64 = 150.0;
/// Top of the graph, under the title.
const TOP: f64 = 48.0;
/// Left end of legend rows.
const LEGEND_X: f64 = 14.0;

/// An edge between known nodes: their indexes and the edge.
type Edge<'a> = (usize, usize, &'a GraphEdge);
/// A rectangle as (left, top, right, bottom).
type Rect = (f64, f64, f64, f64);

/// Nodes on a circle (one centred, two side by side, more on an ellipse
/// starting top left), CPU nodes as rounded boxes and CPU-less ones as
/// dashed hexagons (with a legend when any is present), edges as lines with
/// their label on a small box near the midpoint, moved along the edge to
/// avoid other labels and nodes. Dense graphs (more than twice as many edges
/// as nodes, as a full distance mesh of 8 or 16 nodes) colour their edges by
/// label (up to 8 distinct labels, with a legend) and label only the edges
/// around the circle; every edge keeps its tooltip. Edges naming unknown
/// nodes and self-loops are skipped.
pub fn node_graph(id: &str, title: &str, nodes: &[GraphNode], edges: &[GraphEdge]) -> String {
    let sid = sanitize_id(id);
    if nodes.is_empty() {
        return no_data(&sid, title, "no nodes");
    }
    let index_of = |id: u32| nodes.iter().position(|nd| nd.id == id);
    let edges: Vec<Edge> = edges
        .iter()
        .filter_map(|e| match (index_of(e.a), index_of(e.b)) {
            (Some(i), Some(j)) if i != j => Some((i, j, e)),
            _ => None,
        })
        .collect();
    let sizes: Vec<(f64, f64)> = nodes.iter().map(box_size).collect();
    let pos = place_nodes(&sizes, &edges);
    let classes = EdgeClasses::of(&edges, nodes.len());
    let legend = legend_items(nodes, &classes);
    let lay = Layout::new(title, &pos, &sizes, &legend, &classes);

    let mut out = String::new();
    open_svg(&mut out, &sid, title, lay.w, lay.h);
    push_edges(&mut out, nodes, &edges, &lay, &classes);
    out.push_str("<g class=\"nodes\">");
    for (i, nd) in nodes.iter().enumerate() {
        push_node(&mut out, nd, lay.at[i], sizes[i]);
    }
    out.push_str("</g>");
    push_legend(&mut out, &legend, &lay.legend_at);
    if let Some((text, y)) = lay.note {
        let _ = write!(
            out,
            "<text class=\"sub\" x=\"14\" y=\"{}\" style=\"font-size:11px\">{text}</text>",
            P(y)
        );
    }
    out.push_str("</svg>");
    out
}

/// A node's box: wide enough for its label and detail (more for the
/// hexagon's points), one or two lines high.
fn box_size(nd: &GraphNode) -> (f64, f64) {
    let tw = text_w(&nd.label, LABEL_SIZE)
        .max(text_w(&nd.detail, DETAIL_SIZE))
        .min(MAX_BOX - 20.0);
    let extra = if nd.cpuless { 22.0 } else { 0.0 };
    let bw = (tw + 20.0 + extra).max(64.0);
    let bh = if nd.detail.is_empty() { 28.0 } else { 42.0 };
    (bw, bh)
}

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
        if !next_permutation(&mut order) {
            break;
        }
    }
    best
}

/// Steps `v` to its next permutation in lexicographic order; false after
/// the last one.
fn next_permutation(v: &mut [usize]) -> bool {
    let Some(i) = (0..v.len().saturating_sub(1))
        .rev()
        .find(|&i| v[i] < v[i + 1])
    else {
        return false;
    };
    let j = (i + 1..v.len()).rev().find(|&j| v[j] > v[i]).unwrap_or(i);
    v.swap(i, j);
    v[i + 1..].reverse();
    true
}

/// Node centres on an ellipse around the origin, in the order around it
/// with the fewest crossing edges (a ring is drawn as a ring), the radius
/// grown until no two boxes come closer than a margin.
fn place_nodes(sizes: &[(f64, f64)], edges: &[Edge]) -> Vec<(f64, f64)> {
    let n = sizes.len();
    let slot = circle_order(n, &edges.iter().map(|e| (e.0, e.1)).collect::<Vec<_>>());
    // Start top left of the top, so that two nodes sit side by side.
    let angle = |i: usize| -FRAC_PI_2 - PI / n as f64 + 2.0 * PI * i as f64 / n as f64;
    // Wider than high: boxes are wider than high too.
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
    pos
}

/// How edges are told apart: a dense graph (a full mesh) labels only the
/// edges around the circle, and colours edges by label when there are few
/// distinct labels.
struct EdgeClasses<'a> {
    dense: bool,
    /// Whether edges are coloured by label.
    coloured: bool,
    /// The distinct non-empty labels, numerically sorted when all are
    /// numbers (distances), else in order of appearance.
    labels: Vec<&'a str>,
}

impl<'a> EdgeClasses<'a> {
    fn of(edges: &[Edge<'a>], n: usize) -> EdgeClasses<'a> {
        let dense = edges.len() > 2 * n;
        let mut labels: Vec<&str> = Vec::new();
        for (_, _, e) in edges {
            if !e.label.is_empty() && !labels.contains(&e.label.as_str()) {
                labels.push(&e.label);
            }
        }
        if labels.iter().all(|c| c.trim().parse::<f64>().is_ok()) {
            labels.sort_by(|a, b| {
                let (x, y) = (a.trim().parse::<f64>(), b.trim().parse::<f64>());
                x.unwrap_or(0.0).total_cmp(&y.unwrap_or(0.0))
            });
        }
        EdgeClasses {
            dense,
            coloured: dense && (2..=8).contains(&labels.len()),
            labels,
        }
    }

    /// The colour class (` s<k>`) of an edge with `label`, when coloured.
    fn class_of(&self, label: &str) -> String {
        if !self.coloured {
            return String::new();
        }
        self.labels
            .iter()
            .position(|c| *c == label)
            .map_or(String::new(), |k| format!(" s{k}"))
    }
}

/// What a legend item shows.
enum Swatch {
    /// A node box: "node with CPUs".
    Node,
    /// A dashed hexagon: "CPU-less memory node".
    Cpuless,
    /// An edge in colour class k.
    Edge(usize),
}

/// The legend: the two node shapes when any node is CPU-less, the edge
/// colours when edges are coloured.
fn legend_items(nodes: &[GraphNode], classes: &EdgeClasses) -> Vec<(Swatch, String)> {
    let mut legend = Vec::new();
    if nodes.iter().any(|nd| nd.cpuless) {
        legend.push((Swatch::Node, "node with CPUs".to_string()));
        legend.push((Swatch::Cpuless, "CPU-less memory node".to_string()));
    }
    if classes.coloured {
        for (k, c) in classes.labels.iter().enumerate() {
            legend.push((Swatch::Edge(k), (*c).to_string()));
        }
    }
    legend
}

/// Where everything of a node graph goes.
struct Layout {
    w: f64,
    h: f64,
    /// Node centres in the view.
    at: Vec<(f64, f64)>,
    /// Node boxes with a 2 px margin, for keeping edge labels off them.
    node_rects: Vec<Rect>,
    legend_at: Vec<(f64, f64)>,
    /// The note under a dense graph and its baseline.
    note: Option<(&'static str, f64)>,
}

impl Layout {
    /// The view around the placed nodes (`pos`, boxes `sizes`), wide
    /// enough for the title and the legend, with the legend rows and the
    /// note under the graph.
    fn new(
        title: &str,
        pos: &[(f64, f64)],
        sizes: &[(f64, f64)],
        legend: &[(Swatch, String)],
        classes: &EdgeClasses,
    ) -> Layout {
        let n = pos.len();
        let (minx, miny, maxx, maxy) = bounds(pos, sizes);
        // The legend's node shapes need room even under a single node.
        let any_cpuless = legend.iter().any(|(s, _)| matches!(s, Swatch::Cpuless));
        let w = (maxx - minx + 48.0)
            .max(text_w(title, TITLE_SIZE) + 28.0)
            .max(if any_cpuless { 330.0 } else { 0.0 })
            .max(240.0);
        let ox = w / 2.0 - (minx + maxx) / 2.0;
        let oy = TOP - miny;
        let graph_bottom = maxy + oy;
        let widths = legend.iter().map(|(s, text)| legend_item_w(s, text));
        let (legend_at, _) = flow(widths, LEGEND_X, graph_bottom + 26.0, 20.0, w - 8.0);
        let mut h = legend_at
            .last()
            .map_or(graph_bottom + 18.0, |&(_, ly)| ly + 14.0);
        let note = classes.dense.then(|| {
            let text = if classes.coloured {
                "edges coloured by label; labels of inner edges in their tooltips"
            } else {
                "labels of inner edges in their tooltips"
            };
            h += 18.0;
            (text, h - 12.0)
        });
        let at: Vec<(f64, f64)> = pos.iter().map(|&(x, y)| (x + ox, y + oy)).collect();
        let node_rects = (0..n)
            .map(|i| {
                (
                    at[i].0 - sizes[i].0 / 2.0 - 2.0,
                    at[i].1 - sizes[i].1 / 2.0 - 2.0,
                    at[i].0 + sizes[i].0 / 2.0 + 2.0,
                    at[i].1 + sizes[i].1 / 2.0 + 2.0,
                )
            })
            .collect();
        Layout {
            w,
            h,
            at,
            node_rects,
            legend_at,
            note,
        }
    }
}

/// The smallest rectangle around the boxes of `sizes` centred on `pos`.
fn bounds(pos: &[(f64, f64)], sizes: &[(f64, f64)]) -> Rect {
    let mut b: Rect = (
        f64::INFINITY,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NEG_INFINITY,
    );
    for (&(x, y), &(w, h)) in pos.iter().zip(sizes) {
        b = (
            b.0.min(x - w / 2.0),
            b.1.min(y - h / 2.0),
            b.2.max(x + w / 2.0),
            b.3.max(y + h / 2.0),
        );
    }
    b
}

/// Width of a legend item: its swatch, its text and a gap.
fn legend_item_w(swatch: &Swatch, text: &str) -> f64 {
    let swatch_w = match swatch {
        Swatch::Node | Swatch::Cpuless => 36.0,
        Swatch::Edge(_) => 28.0,
    };
    swatch_w + text_w(text, 11.0) + 16.0
}

/// The edges under the nodes, then the edge labels above every edge line
/// (each placed clear of the nodes and of the labels placed before it).
fn push_edges(
    out: &mut String,
    nodes: &[GraphNode],
    edges: &[Edge],
    lay: &Layout,
    classes: &EdgeClasses,
) {
    let n = nodes.len();
    let mut label_rects: Vec<Rect> = Vec::new();
    let mut labels = String::new();
    out.push_str("<g class=\"edges\">");
    for &(i, j, e) in edges {
        let (a, b) = (lay.at[i], lay.at[j]);
        let tooltip = format!("{} – {}: {}", nodes[i].label, nodes[j].label, e.label);
        let _ = write!(
            out,
            "<g class=\"edge-g\">{}<line class=\"edge-hit\" x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\"/>\
             <line class=\"edge{}{}\" x1=\"{x1}\" y1=\"{y1}\" x2=\"{x2}\" y2=\"{y2}\"/></g>",
            tip(&tooltip),
            classes.class_of(&e.label),
            if classes.dense { " dense" } else { "" },
            x1 = P(a.0),
            y1 = P(a.1),
            x2 = P(b.0),
            y2 = P(b.1)
        );
        // In a mesh, the edges inside the circle are too many to label.
        let around = i.abs_diff(j) == 1 || i.abs_diff(j) == n - 1;
        if e.label.is_empty() || (classes.dense && !around) {
            continue;
        }
        let text = fit_text(&e.label, 11.0, 120.0);
        let size = (text_w(&text, 11.0) + 10.0, 16.0);
        if let Some((centre, rect)) = place_edge_label(a, b, size, &lay.node_rects, &label_rects) {
            label_rects.push(rect);
            push_edge_label(&mut labels, &tooltip, &text, centre, size);
        }
    }
    out.push_str("</g><g class=\"edge-labels\">");
    out.push_str(&labels);
    out.push_str("</g>");
}

/// The first point along the edge from `a` to `b` (its middle, then
/// alternately further out towards both ends) where a label box of `size`
/// overlaps no node and no label placed before: the centre and the box
/// with a 1 px margin. None when the edge has no room left.
fn place_edge_label(
    a: (f64, f64),
    b: (f64, f64),
    (bw, bh): (f64, f64),
    nodes: &[Rect],
    labels: &[Rect],
) -> Option<((f64, f64), Rect)> {
    let overlaps = |a: &Rect, b: &Rect| a.0 < b.2 && b.0 < a.2 && a.1 < b.3 && b.1 < a.3;
    for t in [0.5, 0.42, 0.58, 0.34, 0.66, 0.27, 0.73] {
        let (cx, cy) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
        let rect = (
            cx - bw / 2.0 - 1.0,
            cy - bh / 2.0 - 1.0,
            cx + bw / 2.0 + 1.0,
            cy + bh / 2.0 + 1.0,
        );
        if !nodes.iter().chain(labels).any(|r| overlaps(r, &rect)) {
            return Some(((cx, cy), rect));
        }
    }
    None
}

/// An edge label: `text` on a small box of `size` centred on `centre`,
/// with the edge's tooltip.
fn push_edge_label(
    out: &mut String,
    tooltip: &str,
    text: &str,
    (cx, cy): (f64, f64),
    (bw, bh): (f64, f64),
) {
    let _ = write!(
        out,
        "<g class=\"edge-label-g\">{}<rect class=\"edge-label-bg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"3\"/>\
         <text class=\"edge-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text></g>",
        tip(tooltip),
        P(cx - bw / 2.0),
        P(cy - bh / 2.0),
        P(bw),
        P(bh),
        P(cx),
        P(cy + 4.0),
        escape(text)
    );
}

/// Node `nd` centred on (`cx`, `cy`) in a box of `bw` x `bh`: a rounded
/// box, or a dashed hexagon when CPU-less, with its label and detail.
fn push_node(out: &mut String, nd: &GraphNode, (cx, cy): (f64, f64), (bw, bh): (f64, f64)) {
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
    // The hexagon's points leave less room for text.
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
        escape(&fit_text(&nd.label, LABEL_SIZE, inner))
    );
    if !nd.detail.is_empty() {
        let _ = write!(
            out,
            "<text class=\"sub\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" pointer-events=\"none\" style=\"font-size:{DETAIL_SIZE}px\">{}</text>",
            P(cx),
            P(cy + 12.0),
            escape(&fit_text(&nd.detail, DETAIL_SIZE, inner))
        );
    }
    out.push_str("</g>");
}

/// The legend items at their positions: a swatch and its text each.
fn push_legend(out: &mut String, legend: &[(Swatch, String)], at: &[(f64, f64)]) {
    out.push_str("<g class=\"graph-legend\">");
    for ((swatch, text), &(lx, ly)) in legend.iter().zip(at) {
        let text_x = match swatch {
            Swatch::Node => {
                let _ = write!(
                    out,
                    "<rect class=\"swatch-node\" x=\"{}\" y=\"{}\" width=\"28\" height=\"14\" rx=\"4\"/>",
                    P(lx),
                    P(ly - 11.0)
                );
                lx + 34.0
            }
            Swatch::Cpuless => {
                let _ = write!(
                    out,
                    "<polygon class=\"swatch-node cpuless\" points=\"{}\"/>",
                    hexagon(lx + 14.0, ly - 4.0, 28.0, 14.0)
                );
                lx + 34.0
            }
            Swatch::Edge(k) => {
                let _ = write!(
                    out,
                    "<line class=\"edge s{k}\" x1=\"{}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" style=\"stroke-width:3;stroke-opacity:1\"/>",
                    P(lx),
                    P(lx + 22.0),
                    y = P(ly - 4.0)
                );
                lx + 28.0
            }
        };
        let _ = write!(
            out,
            "<text class=\"sub\" x=\"{}\" y=\"{}\" style=\"font-size:11px\">{}</text>",
            P(text_x),
            P(ly),
            escape(text)
        );
    }
    out.push_str("</g>");
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
    use super::super::test_support::*;
    use super::*;

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
        let w = view_width(&els);
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
