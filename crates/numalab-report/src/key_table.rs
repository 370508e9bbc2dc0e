//! The key-figures table the summary leads with, on the terminal, in
//! report.txt and on the page, as Intel MLC leads with its matrices: one
//! row per headline quantity, each named by what was measured (threads,
//! kernel, which part), from the summary's key figures
//! ([`crate::summary::KeyFigures`]). Rows whose figures were not
//! measured are left out; a report with none (a topology file's, or
//! nothing done yet) has no table. On an emulated CPU the figures are
//! timings of the emulator, and the table is withheld with the summary's
//! other timing statements.

use crate::model::key_figures::{folded, Shape, ROWS};
use crate::registry::REPORT;
use crate::results::ReportResults;
use crate::summary::KeyFigures;
use numalab::experiments::matrix::MatrixResult;
use numalab::text::format::fixed;
use std::collections::BTreeMap;

/// One row: what the figure is, its value with its unit, and the key
/// figures it shows (results.json `summary.key_figures`).
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRow {
    pub figure: String,
    pub value: String,
    /// Its 95% interval as a relative half-width (`±0.9%`; the larger side
    /// where it is not symmetric), or as its ends where it spans more than
    /// a factor of two either way (`4–1234 ns`), where the measurements
    /// have one.
    pub interval: Option<String>,
    pub keys: Vec<&'static str>,
}

/// `±x%` of the interval `[lo, hi]` around `v`: one decimal below 10%.
/// An interval reaching past twice `v` or below half of it is given by its
/// ends in `unit` (`4–1234 ns`): "±999%" reads like a bug, and a lower end
/// of "-900%" means nothing for a positive quantity.
fn half_width(v: f64, [lo, hi]: [f64; 2], unit: &str, decimals: usize) -> Option<String> {
    if v == 0.0 || !v.is_finite() {
        return None;
    }
    if v > 0.0 && (hi > 2.0 * v || lo < 0.5 * v) {
        let end = |x: f64| {
            // Enough digits that the ends differ from the value and zero.
            let d = if x.abs() < 10.0 {
                decimals.max(1)
            } else {
                decimals
            };
            fixed(x, d)
        };
        return Some(with_unit(&format!("{}–{}", end(lo), end(hi)), unit));
    }
    let rel = ((v - lo).abs().max((hi - v).abs()) / v.abs()) * 100.0;
    Some(if rel < 10.0 {
        format!("±{rel:.1}%")
    } else {
        format!("±{rel:.0}%")
    })
}

/// `v` with its unit: ratios as `1.25x`, the rest as `91 ns`.
fn number(v: f64, unit: &str, decimals: usize) -> String {
    with_unit(&fixed(v, decimals), unit)
}

fn with_unit(text: &str, unit: &str) -> String {
    let sep = if unit == "x" { "" } else { " " };
    format!("{text}{sep}{unit}")
}

/// The rows of `figures` that were measured, with the bandwidth matrix's
/// threads per node and the scaling's thread count in their names where
/// the report has them.
pub fn rows_of(
    figures: &KeyFigures,
    intervals: &BTreeMap<String, [f64; 2]>,
    matrix_threads: Option<&str>,
) -> Vec<KeyRow> {
    let mut out = Vec::new();
    for spec in ROWS {
        if matches!(spec.shape, Shape::One(k) if folded(k, |x| figures.get(x), matrix_threads)) {
            continue;
        }
        let (value, keys) = match spec.shape {
            Shape::One(k) => match figures.get(k) {
                Some(v) => (number(v, spec.unit, spec.decimals), vec![k]),
                None => continue,
            },
            Shape::Range(lo, hi) => match (figures.get(lo), figures.get(hi)) {
                (Some(a), Some(b)) => {
                    let (a_s, b_s) = (
                        number(a, spec.unit, spec.decimals),
                        number(b, spec.unit, spec.decimals),
                    );
                    let text = if a_s == b_s {
                        a_s
                    } else {
                        let (a, b) = (fixed(a, spec.decimals), fixed(b, spec.decimals));
                        with_unit(&format!("{a}–{b}"), spec.unit)
                    };
                    (text, vec![lo, hi])
                }
                _ => continue,
            },
        };
        let mut figure = spec.figure.to_string();
        match keys[0] {
            "local_read_gbps" | "remote_read_gbps_min" => {
                let who = match matrix_threads {
                    Some("1") => "one thread per node".to_string(),
                    Some("all") => "all threads of a node".to_string(),
                    Some(n) => format!("{n} threads per node"),
                    None => "bandwidth matrix".to_string(),
                };
                figure.push_str(&format!(" (read kernel, {who})"));
            }
            "packed_per_thread_gbps" | "spread_per_thread_gbps" => {
                if let Some(n) = figures.get("compared_threads") {
                    figure.push_str(&format!(", {n:.0} threads"));
                }
            }
            _ => {}
        }
        // A range's ends are two measurements: no one interval.
        let interval = match keys[..] {
            [k] => figures
                .get(k)
                .zip(intervals.get(k))
                .and_then(|(v, i)| half_width(v, *i, spec.unit, spec.decimals)),
            _ => None,
        };
        out.push(KeyRow {
            figure,
            value,
            interval,
            keys,
        });
    }
    out
}

/// The table of a report: empty where nothing was measured, or where the
/// CPU is emulated (the summary's banner says so).
pub fn rows(doc: &ReportResults) -> Vec<KeyRow> {
    if doc.summary.banner.is_some() {
        return Vec::new();
    }
    let threads = REPORT
        .find("bandwidth-matrix")
        .and_then(|p| doc.parts.get(p).done())
        .and_then(|r| r.get::<MatrixResult>())
        .map(|m| m.threads_per_node.clone());
    rows_of(
        &doc.summary.key_figures,
        &doc.summary.key_intervals,
        threads.as_deref(),
    )
}

/// What the table's intervals hold, in one sentence under it: the
/// measurements' own intervals widened by the host's drift over the
/// report ([`crate::model::drift`]), or why they are not. `None` without
/// a table or without probes (a report from before them).
pub fn interval_note(doc: &ReportResults) -> Option<String> {
    let d = &doc.drift;
    if d.is_empty() || rows(doc).iter().all(|r| r.interval.is_none()) {
        return None;
    }
    let kinds: Vec<String> = d
        .estimates()
        .into_iter()
        .map(|(kind, e)| {
            let what = kind.text().label;
            let p = e.rel_half_width * 100.0;
            if p < 10.0 {
                format!("{what} ±{p:.1}%")
            } else if p < 100.0 {
                format!("{what} ±{p:.0}%")
            } else {
                // "±999%" reads as a bug: say the factor.
                format!(
                    "{what} a factor of {:.1} either way",
                    1.0 + e.rel_half_width
                )
            }
        })
        .collect();
    // Why a run did not watch, where one did not: "too few" alone would
    // not say that a larger budget gives the looks.
    let unwatched = match d.unwatched.last() {
        Some(u) if doc.runs.len() > 1 => format!(": in run {}, {}", u.run, u.why),
        Some(u) => format!(": {}", u.why),
        None => String::new(),
    };
    if d.probes.is_empty() {
        return Some(format!(
            "95% intervals: each measurement's own, from its repetitions, without the host's drift{unwatched}."
        ));
    }
    Some(if kinds.is_empty() {
        format!(
            "95% intervals: each measurement's own, from its repetitions; {} look{} at the host's speed between the parts, too few (3 at least) to add how far it drifts{unwatched}.",
            d.probes.len(),
            numalab::text::format::s(d.probes.len())
        )
    } else {
        format!(
            "95% intervals: each measurement's own, from its repetitions, widened by how far the host's speed drifted over the report ({} looks between the parts: {}), so that another run at another moment falls within them.",
            d.probes.len(),
            kinds.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_figures_make_rows_in_order_with_what_they_are() {
        let mut k = KeyFigures::default();
        k.set("local_latency_ns", Some(91.4));
        k.set("numa_ratio_min", Some(1.5));
        k.set("numa_ratio_max", Some(2.25));
        k.set("local_read_gbps", Some(12.34));
        // Only one end of a range: no row.
        k.set("remote_read_gbps_min", Some(8.0));
        k.set("remote_read_gbps_max", None);
        k.set("compared_threads", Some(4.0));
        k.set("packed_per_thread_gbps", Some(3.04));
        k.set("c2c_within_node_ns", None);
        let rows = rows_of(&k, &BTreeMap::new(), Some("1"));
        let table: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.figure.as_str(), r.value.as_str()))
            .collect();
        assert_eq!(
            table,
            [
                (
                    "Idle latency, local memory (random pointer chase, latency matrix)",
                    "91 ns"
                ),
                ("NUMA ratio, remote over local latency", "1.50–2.25x"),
                (
                    "Read bandwidth, local memory (read kernel, one thread per node)",
                    "12.3 GB/s"
                ),
                (
                    "Per-thread bandwidth, threads packed, 4 threads",
                    "3.0 GB/s"
                ),
            ]
        );
        assert_eq!(rows[1].keys, ["numa_ratio_min", "numa_ratio_max"]);
        // A range whose ends agree is one value; nothing measured, no rows.
        // One memory node: no NUMA ratio, no second latency row.
        let mut one = KeyFigures::default();
        one.set("local_latency_ns", Some(458.0));
        one.set("max_latency_ns", Some(458.0));
        assert_eq!(rows_of(&one, &BTreeMap::new(), None).len(), 1);
        k.set("max_latency_ns", Some(140.0));
        assert_eq!(rows_of(&k, &BTreeMap::new(), None)[1].value, "140 ns");
        let mut same = KeyFigures::default();
        same.set("numa_ratio_min", Some(1.2));
        same.set("numa_ratio_max", Some(1.2));
        assert_eq!(rows_of(&same, &BTreeMap::new(), None)[0].value, "1.20x");
        assert!(rows_of(&KeyFigures::default(), &BTreeMap::new(), None).is_empty());
    }

    #[test]
    fn a_quantity_measured_by_two_parts_is_one_row() {
        let mut k = KeyFigures::default();
        k.set("local_latency_ns", Some(171.0));
        k.set("loaded_idle_ns", Some(170.0));
        k.set("local_read_gbps", Some(28.9));
        k.set("single_thread_gbps", Some(26.0));
        let figures = |rows: Vec<KeyRow>| -> Vec<&'static str> {
            rows.iter().flat_map(|r| r.keys.clone()).collect()
        };
        assert_eq!(
            figures(rows_of(&k, &BTreeMap::new(), Some("1"))),
            ["local_latency_ns", "local_read_gbps"]
        );
        // All threads of a node read in the matrix: the lone thread is its
        // own figure.
        assert_eq!(
            figures(rows_of(&k, &BTreeMap::new(), Some("all"))),
            ["local_latency_ns", "local_read_gbps", "single_thread_gbps"]
        );
        // Without the latency matrix the loaded run's idle is the only one.
        let mut l = KeyFigures::default();
        l.set("loaded_idle_ns", Some(170.0));
        assert_eq!(
            figures(rows_of(&l, &BTreeMap::new(), None)),
            ["loaded_idle_ns"]
        );
    }

    #[test]
    fn a_figure_with_an_interval_shows_its_half_width() {
        let mut k = KeyFigures::default();
        k.set("local_latency_ns", Some(200.0));
        k.set("numa_ratio_min", Some(1.5));
        k.set("numa_ratio_max", Some(2.0));
        k.set("local_read_gbps", Some(30.0));
        let intervals = BTreeMap::from([
            ("local_latency_ns".to_string(), [198.0, 201.0]),
            ("numa_ratio_min".to_string(), [1.4, 1.6]),
            // Not symmetric: the larger side, 40%.
            ("local_read_gbps".to_string(), [18.0, 31.0]),
        ]);
        let rows = rows_of(&k, &intervals, Some("1"));
        let shown: Vec<Option<&str>> = rows.iter().map(|r| r.interval.as_deref()).collect();
        // The ratio is a range of two figures: no one interval.
        assert_eq!(shown, [Some("±1.0%"), None, Some("±40%")]);
        assert_eq!(half_width(0.0, [0.0, 1.0], "ns", 0), None);
        // Past twice the value or below half of it: the ends, not "±970%".
        assert_eq!(
            half_width(161.6, [21.16, 1734.0], "ns", 0).as_deref(),
            Some("21–1734 ns")
        );
        assert_eq!(
            half_width(30.0, [14.0, 40.0], "GB/s", 1).as_deref(),
            Some("14.0–40.0 GB/s")
        );
        assert_eq!(
            half_width(12.0, [5.2, 13.0], "ns", 0).as_deref(),
            Some("5.2–13 ns")
        );
        // Just within: still a half-width.
        assert_eq!(
            half_width(100.0, [51.0, 199.0], "ns", 0).as_deref(),
            Some("±99%")
        );
    }
}
