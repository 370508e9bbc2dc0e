//! The raw numbers of a report as tables: one CSV file per table in the
//! report directory, and the same tables under the charts of report.html.
//!
//! Tables are "long": one row per measured value with the keys that name
//! it, so that spreadsheets and data frames read them without reshaping.
//! The machine, the parts and the key figures have their tables here; each
//! part's view makes its own ([`crate::part::ReportPart::tables`]).
//! Parts of one kind (the two sweeps, the two loaded-latency targets) write
//! tables of the same name, merged into one file with a column naming the
//! part.

use crate::results::ReportResults;
use numalab::machine::Machine;
use numalab::text::format::fixed;

/// One table of a report.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// File stem and element-id stem, e.g. `latency-matrix`.
    pub name: String,
    /// What the table holds, with units.
    pub title: String,
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table.
    pub fn new(name: &str, title: &str, header: &[&str]) -> Self {
        Table {
            name: name.into(),
            title: title.into(),
            header: header.iter().map(|s| s.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// `name.csv`.
    pub fn file_name(&self) -> String {
        format!("{}.csv", self.name)
    }

    /// RFC 4180 text: comma separated, fields with commas, quotes or line
    /// breaks quoted, quotes doubled, CRLF line ends.
    pub fn to_csv(&self) -> String {
        let mut s = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let fields: Vec<String> = row.iter().map(|f| quote(f)).collect();
            s.push_str(&fields.join(","));
            s.push_str("\r\n");
        }
        s
    }
}

fn quote(f: &str) -> String {
    if f.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", f.replace('"', "\"\""))
    } else {
        f.to_string()
    }
}

/// A number for a table: fixed decimals, empty when not finite.
pub fn num(v: f64, decimals: usize) -> String {
    fixed(v, decimals)
}

/// An optional number for a table: empty when absent.
pub fn opt(v: Option<f64>, decimals: usize) -> String {
    v.map(|x| num(x, decimals)).unwrap_or_default()
}

/// `yes` or `no`.
pub fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// A list of ids as a cell: `0 1 2`.
pub fn ids(v: impl IntoIterator<Item = u32>) -> String {
    v.into_iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Adds `t` to `out`, or appends its rows to the table of the same name
/// already there (parts of one kind share a table).
pub fn merge_into(out: &mut Vec<Table>, t: Table) {
    match out.iter_mut().find(|x| x.name == t.name) {
        Some(x) => {
            debug_assert_eq!(
                x.header, t.header,
                "table {} merged with another header",
                t.name
            );
            x.rows.extend(t.rows);
        }
        None => out.push(t),
    }
}

/// The tables of a report, and which tables each group of parts shares.
pub struct ReportTables {
    /// Every table, in the order of the report.
    pub tables: Vec<Table>,
    /// Per table group ([`crate::part::PartInfo::table_group`]): the
    /// names of the tables its parts wrote, in order.
    pub groups: Vec<(&'static str, Vec<String>)>,
}

/// Every table the report has data for, in the order of the report.
pub fn tables(doc: &ReportResults) -> Vec<Table> {
    report_tables(doc).tables
}

/// [`tables`], with the tables of each group of parts named.
pub fn report_tables(doc: &ReportResults) -> ReportTables {
    let m = &doc.machine;
    let mut out = vec![nodes_table(m), distances_table(m), parts_table(doc)];
    let mut groups: Vec<(&'static str, Vec<String>)> = Vec::new();
    for (name, rec) in doc.parts.iter() {
        let Some(r) = rec.done() else { continue };
        let group = name.part().info().table_group;
        for t in name.part().tables(r, m) {
            if let Some(g) = group {
                let i = match groups.iter().position(|(x, _)| *x == g) {
                    Some(i) => i,
                    None => {
                        groups.push((g, Vec::new()));
                        groups.len() - 1
                    }
                };
                if !groups[i].1.contains(&t.name) {
                    groups[i].1.push(t.name.clone());
                }
            }
            merge_into(&mut out, t);
        }
    }
    out.push(key_figures_table(doc));
    ReportTables {
        tables: out,
        groups,
    }
}

fn nodes_table(m: &Machine) -> Table {
    let mut t = Table::new(
        "machine-nodes",
        "NUMA nodes: CPUs, memory (bytes), kind, memory tier, whether this process may use it",
        &[
            "node",
            "cpus",
            "cpu_count",
            "memory_bytes",
            "cpuless",
            "kind",
            "subtype",
            "tier",
            "allowed",
        ],
    );
    for n in &m.nodes {
        t.rows.push(vec![
            n.os_index.to_string(),
            n.cpus.to_string(),
            n.cpus.len().to_string(),
            n.memory_bytes.to_string(),
            yes(n.cpuless),
            serde_json::to_value(n.kind)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default(),
            n.subtype.clone().unwrap_or_default(),
            n.tier.map(|x| x.to_string()).unwrap_or_default(),
            yes(n.allowed),
        ]);
    }
    t
}

fn distances_table(m: &Machine) -> Table {
    let mut t = Table::new(
        "distances",
        "Firmware distances (SLIT, 10 = local) and hops of the interconnect graph inferred from them",
        &["from_node", "to_node", "distance", "hops"],
    );
    let ids: Vec<u32> = m.nodes.iter().map(|n| n.os_index).collect();
    for &a in &ids {
        for &b in &ids {
            t.rows.push(vec![
                a.to_string(),
                b.to_string(),
                m.distances
                    .as_ref()
                    .and_then(|d| d.get(a, b))
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
                m.hops_between(a, b)
                    .map(|h| h.to_string())
                    .unwrap_or_default(),
            ]);
        }
    }
    t
}

fn parts_table(doc: &ReportResults) -> Table {
    let mut t = Table::new(
        "parts",
        "The parts of the report: status, budget and time (s), which run measured them, whether placement verified",
        &[
            "part", "title", "status", "budget_s", "elapsed_s", "run", "verified", "reason",
        ],
    );
    for (n, rec) in doc.parts.iter() {
        t.rows.push(vec![
            n.name().into(),
            n.title().into(),
            rec.status.name().into(),
            opt(rec.budget_s, 2),
            opt(rec.elapsed_s, 2),
            rec.run.map(|r| r.to_string()).unwrap_or_default(),
            rec.verified.map(yes).unwrap_or_default(),
            rec.reason.clone().unwrap_or_default(),
        ]);
    }
    t
}

fn key_figures_table(doc: &ReportResults) -> Table {
    let mut t = Table::new(
        "key-figures",
        "The key numbers of the summary (empty: not measured or not meaningful here)",
        &["figure", "value"],
    );
    for (k, v) in doc.summary.key_figures.iter() {
        t.rows.push(vec![
            k.to_string(),
            match v {
                None => String::new(),
                Some(x) if x.fract() == 0.0 => format!("{x:.0}"),
                Some(x) => format!("{x:.4}"),
            },
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_it() {
        let mut t = Table::new("x", "t", &["a", "b"]);
        t.rows.push(vec!["1,5".into(), "say \"hi\"".into()]);
        t.rows.push(vec!["plain".into(), "two\nlines".into()]);
        assert_eq!(
            t.to_csv(),
            "a,b\r\n\"1,5\",\"say \"\"hi\"\"\"\r\nplain,\"two\nlines\"\r\n"
        );
        assert_eq!(t.file_name(), "x.csv");
        assert_eq!(num(f64::NAN, 2), "");
        assert_eq!(num(1.23456, 2), "1.23");
    }

    #[test]
    fn tables_of_one_name_merge() {
        let mut out = Vec::new();
        let mut a = Table::new("sweep", "t", &["part", "v"]);
        a.rows.push(vec!["sweep".into(), "1".into()]);
        let mut b = Table::new("sweep", "t", &["part", "v"]);
        b.rows.push(vec!["second-part".into(), "2".into()]);
        merge_into(&mut out, a);
        merge_into(&mut out, Table::new("other", "o", &["x"]));
        merge_into(&mut out, b);
        assert_eq!(out.len(), 2);
        assert_eq!(
            out[0].rows,
            vec![
                vec!["sweep".to_string(), "1".into()],
                vec!["second-part".into(), "2".into()]
            ]
        );
        assert_eq!(ids([3, 1]), "3 1");
    }
}
