//! Page tables in words a reader uses: the CSV files keep their column
//! names and raw values (scripts read them), while the tables on the page
//! name each column in words with its unit (`read_gbps`: "read (GB/s)",
//! `rel_ci`: "95% CI (±%)") and show values as a person reads them
//! (a relative interval as ±1.2%, `true` as yes, a byte count as 128 MiB,
//! pages by node as "node 0: 33,792", long decimals to four significant
//! digits).

use numalab::text::format::{bytes, grouped, significant};

/// Units named by a column's last word, with what the column is then
/// called (the rest of its name).
const UNITS: &[(&str, &str)] = &[
    ("gbps", "GB/s"),
    ("gflops", "GFLOP/s"),
    ("ns", "ns"),
    ("us", "µs"),
    ("ms", "ms"),
    ("s", "s"),
    ("pct", "%"),
    ("percent", "%"),
];

/// Words a column name is made of that read better otherwise.
const WORDS: &[(&str, &str)] = &[
    ("cpu", "CPU"),
    ("cpus", "CPUs"),
    ("mem", "memory"),
    ("c2c", "core to core"),
    ("pdm", "PDM"),
    ("blas", "BLAS"),
    ("numa", "NUMA"),
];

/// The column `name` in words, with its unit.
pub fn header(name: &str) -> String {
    match name {
        "rel_ci" => return "95% CI (±%)".into(),
        "bytes" => return "size".into(),
        "pages_by_node" => return "pages by node".into(),
        "memory_bytes" => return "memory".into(),
        _ => {}
    }
    let mut words: Vec<&str> = name.split('_').filter(|w| !w.is_empty()).collect();
    let unit = match words
        .last()
        .and_then(|w| UNITS.iter().find(|(u, _)| u == w))
    {
        Some((_, unit)) if words.len() > 1 || *unit != "s" => {
            words.pop();
            Some(*unit)
        }
        _ => None,
    };
    let text: Vec<String> = words
        .iter()
        .map(|w| {
            WORDS
                .iter()
                .find(|(k, _)| k == w)
                .map_or_else(|| w.to_string(), |(_, v)| v.to_string())
        })
        .collect();
    let text = text.join(" ");
    match unit {
        Some(u) if text.is_empty() => format!("({u})"),
        Some(u) => format!("{text} ({u})"),
        None => text,
    }
}

/// The value `v` of column `name` as the page shows it.
pub fn cell(name: &str, v: &str) -> String {
    match v {
        "true" => return "yes".into(),
        "false" => return "no".into(),
        _ => {}
    }
    if name == "rel_ci" {
        if let Ok(x) = v.parse::<f64>() {
            return format!("±{}%", significant(x * 100.0, 2));
        }
    }
    if name == "bytes" || name.ends_with("_bytes") {
        if let Ok(x) = v.parse::<u64>() {
            return bytes(x);
        }
    }
    if name.contains("by_node") && v.contains(':') {
        // "0:33792 1:100" as "node 0: 33,792, node 1: 100".
        let parts: Option<Vec<String>> = v
            .split_whitespace()
            .map(|p| {
                let (n, c) = p.split_once(':')?;
                let c: u64 = c.parse().ok()?;
                Some(format!("node {n}: {}", grouped(c)))
            })
            .collect();
        if let Some(parts) = parts {
            return parts.join(", ");
        }
    }
    match v.parse::<f64>() {
        // Long decimals to four significant digits; whole numbers and
        // ids as they are.
        Ok(x) if x.is_finite() && v.contains('.') && v.len() > 6 => significant(x, 4),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_read_as_words_with_units() {
        for (name, want) in [
            ("read_gbps", "read (GB/s)"),
            ("gbps", "(GB/s)"),
            ("modified_ns", "modified (ns)"),
            ("elapsed_s", "elapsed (s)"),
            ("best_gflops", "best (GFLOP/s)"),
            ("rel_ci", "95% CI (±%)"),
            ("cpu_node", "CPU node"),
            ("mem_nodes", "memory nodes"),
            ("hop_class", "hop class"),
            ("pages_by_node", "pages by node"),
            ("s", "s"),
            ("verified", "verified"),
        ] {
            assert_eq!(header(name), want, "{name}");
        }
    }

    #[test]
    fn values_read_as_a_person_reads_them() {
        assert_eq!(cell("rel_ci", "0.01234"), "±1.2%");
        assert_eq!(cell("verified", "true"), "yes");
        assert_eq!(cell("exact", "false"), "no");
        assert_eq!(cell("bytes", "134217728"), "128 MiB");
        assert_eq!(
            cell("pages_by_node", "0:33792 1:100"),
            "node 0: 33,792, node 1: 100"
        );
        assert_eq!(cell("gbps", "12.345678"), "12.35");
        assert_eq!(cell("gbps", "12.3"), "12.3");
        assert_eq!(cell("cpu", "17"), "17");
        assert_eq!(cell("labels", "A.0.w.B"), "A.0.w.B");
        // Not what it claims to be: shown as it is.
        assert_eq!(cell("pages_by_node", "0:x"), "0:x");
    }
}
