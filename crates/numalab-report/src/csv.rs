//! Tables of raw numbers: one CSV file per table in the report directory,
//! and the same tables under the charts of report.html ([`Table`], and the
//! cell formats every view uses).
//!
//! Tables are "long": one row per measured value with the keys that name
//! it, so that spreadsheets and data frames read them without reshaping.
//! Each part's view makes its own ([`crate::part::ReportPart::tables`]);
//! the report's own (machine, parts, key figures) are in [`crate::tables`].

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
