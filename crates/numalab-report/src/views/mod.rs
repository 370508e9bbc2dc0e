//! Views: how every result is shown, one file per experiment. A view
//! writes the text a command prints, and, for the experiments that are
//! parts of `numalab report`, the part itself ([`ReportPart`]): how it runs
//! within its budget, its CSV tables, its section of report.html and its
//! sentences, key figures and advice in the summary. A command's text and
//! its report section therefore come from the same file.
//!
//! This file is also the registry of report parts: [`PARTS`], in run order.
//! Adding a part is its experiment (`experiments/`), its view file here and
//! one line in [`PARTS`] (see ARCHITECTURE.md).
//!
//! [`ReportPart`]: crate::part::ReportPart

pub mod apexmap;
pub mod bench;
pub mod blas;
pub mod c2c;
pub mod compare;
pub mod counters;
pub mod extrapolate;
pub mod loaded_latency;
pub mod matrix;
pub mod migrate;
pub mod model;
pub mod pdm;
pub mod place;
pub mod plan;
pub mod policies;
pub mod profile;
pub mod profile_compare;
pub mod profile_html;
pub mod profile_merge;
pub mod scaling;
pub mod scenarios;
pub mod scenarios_part;
pub mod sizes;
pub mod sweep;
pub mod topology;
pub mod verify;

use crate::part::Part;

/// Every part of `numalab report`, in the order the parts run and appear.
/// The study's scenarios and the sweep come last: they keep their deadline
/// exactly, so they absorb what earlier parts over- or under-ran.
pub static PARTS: &[&dyn Part] = &[
    &matrix::LATENCY_MATRIX,
    &matrix::BANDWIDTH_MATRIX,
    &sizes::SizesPart,
    &scaling::ScalingPart,
    &c2c::C2cPart,
    &loaded_latency::LOCAL,
    &loaded_latency::FAR,
    &policies::PoliciesPart,
    &pdm::PdmPart,
    &blas::BlasPart,
    &scenarios_part::ScenariosPart,
    &sweep::IDLE,
];

/// Bandwidth units of the text views: decimal GB/s (1e9 B/s, the STREAM
/// and likwid convention) or GiB/s (2^30 B/s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Units {
    #[default]
    Gb,
    Gib,
}

impl Units {
    /// The names [`Units::parse`] accepts.
    pub const NAMES: &'static [&'static str] = &["gb", "gib"];

    pub fn parse(t: &str) -> Result<Self, String> {
        match t {
            "gb" | "GB" => Ok(Self::Gb),
            "gib" | "GiB" => Ok(Self::Gib),
            _ => Err(format!(
                "unknown unit '{t}'; valid: gb (1e9 B/s), gib (2^30 B/s)"
            )),
        }
    }

    /// Converts a figure in GB/s (1e9) to these units.
    pub fn convert(self, gb: f64) -> f64 {
        match self {
            Self::Gb => gb,
            Self::Gib => gb * 1e9 / (1u64 << 30) as f64,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Self::Gb => "GB/s",
            Self::Gib => "GiB/s",
        }
    }
}

/// `Err` with why a part that compares memory nodes says nothing where
/// the process may use only one (`what`: what would happen there); the
/// report lists it as not applicable and gives its time to the others.
pub fn one_memory_node(m: &numalab::machine::Machine, what: &str) -> Result<(), String> {
    let nodes = m.memory_nodes();
    if nodes.len() >= 2 {
        return Ok(());
    }
    Err(format!(
        "one memory node ({}): {what}; it compares two or more",
        match nodes.first() {
            Some(n) => format!("node {n}"),
            None => "none allowed".into(),
        }
    ))
}

/// Rows of cells as aligned columns (left-aligned, three spaces apart),
/// each line indented by two spaces.
pub fn grid(head: &[String], rows: &[Vec<String>]) -> String {
    use std::fmt::Write;
    let cols = head.len();
    let width: Vec<usize> = (0..cols)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .chain([head[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut s = String::new();
    for r in std::iter::once(head).chain(rows.iter().map(|r| r.as_slice())) {
        let line: Vec<String> = r
            .iter()
            .zip(&width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(s, "  {}", line.join("   ").trim_end());
    }
    s
}

/// `node 1 100%` or `node 0 50%, node 1 50%`.
pub(crate) fn page_shares(pages: &std::collections::BTreeMap<u32, u64>) -> String {
    let total: u64 = pages.values().sum();
    if total == 0 {
        return "none touched".to_string();
    }
    pages
        .iter()
        .map(|(n, p)| format!("node {n} {:.0}%", 100.0 * *p as f64 / total as f64))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::REPORT;

    #[test]
    fn parts_that_compare_nodes_are_left_out_with_one_memory_node() {
        let mut m = crate::fixture("qemu-quartet-4n2c-ring.xml");
        let part = |name: &str| REPORT.find(name).unwrap();
        for name in ["policies", "pdm"] {
            assert_eq!(REPORT.part(part(name)).applicable(&m), Ok(()), "{name}");
        }
        // The process may use node 2 only (a cpuset), the others stay.
        for n in m.nodes.iter_mut() {
            n.allowed = n.os_index == 2;
        }
        assert_eq!(
            REPORT.part(part("policies")).applicable(&m),
            Err("one memory node (node 2): every policy places the pages on it; it compares two or more".into())
        );
        assert_eq!(
            REPORT.part(part("pdm")).applicable(&m),
            Err("one memory node (node 2): every placement of the arrays is on it; it compares two or more".into())
        );
    }

    #[test]
    fn part_names_are_unique_and_weights_positive() {
        let mut names: Vec<&str> = PARTS.iter().map(|p| p.info().name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PARTS.len(), "duplicate part name");
        for p in PARTS {
            let i = p.info();
            assert!(i.weight > 0.0 && i.quick_weight > 0.0, "{}", i.name);
            assert!(
                i.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}",
                i.name
            );
        }
        // Parts of a table group are next to each other (the page shows
        // the group's tables after its last part).
        let groups: Vec<Option<&str>> = PARTS.iter().map(|p| p.info().table_group).collect();
        for (i, g) in groups.iter().enumerate() {
            if let Some(g) = g {
                let last = groups.iter().rposition(|x| x == &Some(*g)).unwrap();
                assert!(groups[i..=last].iter().all(|x| x == &Some(*g)), "{g}");
            }
        }
    }

    #[test]
    fn units_convert_and_parse() {
        assert_eq!(Units::parse("gib").unwrap(), Units::Gib);
        assert!(Units::parse("mb").unwrap_err().contains("valid: gb"));
        assert!((Units::Gib.convert(1.073741824) - 1.0).abs() < 1e-12);
        assert_eq!(Units::Gb.label(), "GB/s");
        assert_eq!(
            grid(
                &["a".into(), "bb".into()],
                &[vec!["ccc".into(), "d".into()]]
            ),
            "  a     bb\n  ccc   d\n"
        );
    }
}
