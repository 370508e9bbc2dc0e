//! Page migration cost (`numalab migrate`): per pair of nodes and method,
//! GB/s and µs per page with their spread, pages verified on the
//! destination, and with `--matrix` a node-pair table per method. Not a
//! report part.

use numalab::experiments::migrate::{MethodResult, MigrateResult};
use numalab::text::format::{bytes as format_bytes, significant};
use std::fmt::Write;

/// The text `numalab migrate` prints.
pub fn text(r: &MigrateResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "migrate {} ({} pages of {}), THP {}{}, {} timed move{} per pair and method",
        format_bytes(r.size_bytes),
        r.pages,
        format_bytes(r.page_size),
        if r.thp { "on" } else { "off" },
        r.thp_system
            .as_deref()
            .map(|m| format!(" (system: {m})"))
            .unwrap_or_default(),
        r.reps,
        if r.reps == 1 { "" } else { "s" }
    );
    if let Some(why) = &r.thp_unavailable {
        let _ = writeln!(s, "no huge pages: {why}");
    }
    for p in &r.pairs {
        let cpu = r
            .measuring_cpus
            .get(&p.from)
            .map(|c| format!(", measured on CPU {c}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "\nnode {} -> node {} (distance {}{cpu})",
            p.from, p.to, p.distance
        );
        let _ = writeln!(
            s,
            "  {:<14} {:>9} {:>9} {:>7} {:>9} {:>15}  verified",
            "method", "GB/s", "best", "spread", "us/page", "pages moved"
        );
        for m in &p.methods {
            let _ = writeln!(s, "{}", row(m));
        }
        for m in &p.methods {
            if let (Some(a), Some(b)) = (m.huge_pages_placed, m.huge_pages_after) {
                if r.thp {
                    let _ = writeln!(
                        s,
                        "  {}: {a} huge pages (2 MiB) when placed, {b} after the move",
                        m.method.name()
                    );
                }
            }
            if m.move_failures > 0 {
                let statuses: Vec<String> = m
                    .failure_statuses
                    .iter()
                    .map(|(k, v)| format!("{k} x{v}"))
                    .collect();
                let _ = writeln!(
                    s,
                    "  {}: {} page moves reported failed{}",
                    m.method.name(),
                    m.move_failures,
                    if statuses.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", statuses.join(", "))
                    }
                );
            }
            for problem in &m.problems {
                let _ = writeln!(s, "  {}: {problem}", m.method.name());
            }
        }
    }
    for mx in &r.matrices {
        let _ = writeln!(
            s,
            "\n{}: median GB/s, rows from node, columns to node",
            mx.method.name()
        );
        let _ = write!(s, "  {:>6}", "from");
        for n in &mx.nodes {
            let _ = write!(s, " {:>8}", n);
        }
        let _ = writeln!(s);
        for (i, row) in mx.gbps.iter().enumerate() {
            let _ = write!(s, "  {:>6}", mx.nodes[i]);
            for cell in row {
                let text = cell.map_or("-".to_string(), |g| significant(g, 3));
                let _ = write!(s, " {text:>8}");
            }
            let _ = writeln!(s);
        }
    }
    let _ = writeln!(
        s,
        "\n{}",
        if r.verified {
            "verified: every page was on the source after the touch, on the destination after every move"
        } else {
            "NOT verified: see the problems above"
        }
    );
    s
}

fn row(m: &MethodResult) -> String {
    let fig = |v: Option<f64>| v.map_or("-".to_string(), |x| significant(x, 3));
    let spread = m
        .gbps
        .as_ref()
        .map_or("-".to_string(), |g| format!("{:.0}%", g.spread * 100.0));
    format!(
        "  {:<14} {:>9} {:>9} {:>7} {:>9} {:>15}  {}",
        m.method.name(),
        fig(m.gbps.as_ref().map(|g| g.median)),
        fig(m.best_gbps),
        spread,
        fig(m.us_per_page.as_ref().map(|u| u.median)),
        format!("{}/{}", m.pages_moved, m.pages),
        if m.verified { "yes" } else { "NO" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab::experiments::migrate::{Method, MethodMatrix, PairResult};
    use numalab::measure::stats::Summary;
    use std::collections::BTreeMap;

    fn method(method: Method, gbps: &[f64], verified: bool) -> MethodResult {
        let s = Summary::of(gbps);
        MethodResult {
            method,
            pages: 2048,
            placed_pages_by_node: BTreeMap::from([(0, 2048)]),
            pages_by_node: BTreeMap::from([(3, if verified { 2048 } else { 2000 })]),
            pages_moved: if verified { 2048 } else { 2000 },
            pages_not_moved: if verified { 0 } else { 48 },
            move_failures: if verified { 0 } else { 48 },
            failure_statuses: if verified {
                BTreeMap::new()
            } else {
                BTreeMap::from([("EBUSY".to_string(), 48)])
            },
            back_moves_incomplete: 0,
            huge_pages_placed: Some(4),
            huge_pages_after: Some(3),
            cpu_seen: Some(0),
            seconds: vec![0.01; gbps.len()],
            best_gbps: s.as_ref().map(|s| s.max),
            us_per_page: Summary::of(&[2.0]),
            gbps: s,
            verified,
            problems: if verified {
                vec![]
            } else {
                vec!["a move left 48 of 2048 pages off node 3".into()]
            },
        }
    }

    fn result(verified: bool) -> MigrateResult {
        MigrateResult {
            size_bytes: 8 << 20,
            page_size: 4096,
            pages: 2048,
            thp: true,
            thp_system: Some("madvise".into()),
            thp_unavailable: None,
            methods: vec![Method::MovePages, Method::Mbind],
            reps: 3,
            measuring_cpus: BTreeMap::from([(0, 0)]),
            matrix: true,
            pairs: vec![PairResult {
                from: 0,
                to: 3,
                distance: 22,
                methods: vec![
                    method(Method::MovePages, &[1.0, 1.5, 2.0], true),
                    method(Method::Mbind, &[3.0], verified),
                ],
            }],
            matrices: vec![MethodMatrix {
                method: Method::Mbind,
                nodes: vec![0, 3],
                gbps: vec![vec![None, Some(3.0)], vec![None, None]],
            }],
            verified,
            warnings: vec![],
        }
    }

    #[test]
    fn text_has_figures_huge_pages_and_the_matrix() {
        let t = text(&result(true));
        assert!(t.starts_with("migrate 8 MiB (2048 pages of 4 KiB), THP on (system: madvise), 3 timed moves per pair and method\n"), "{t}");
        assert!(
            t.contains("node 0 -> node 3 (distance 22, measured on CPU 0)"),
            "{t}"
        );
        let mp = t
            .lines()
            .find(|l| l.trim_start().starts_with("move_pages "))
            .unwrap();
        let cols: Vec<&str> = mp.split_whitespace().collect();
        assert_eq!(
            cols,
            ["move_pages", "1.5", "2", "67%", "2", "2048/2048", "yes"]
        );
        assert!(
            t.contains("move_pages: 4 huge pages (2 MiB) when placed, 3 after the move"),
            "{t}"
        );
        assert!(
            t.contains("mbind: median GB/s, rows from node, columns to node"),
            "{t}"
        );
        assert!(t.contains("       0        -        3\n"), "{t}");
        assert!(t.ends_with("verified: every page was on the source after the touch, on the destination after every move\n"), "{t}");
    }

    #[test]
    fn text_names_pages_left_behind() {
        let t = text(&result(false));
        assert!(
            t.contains("mbind: 48 page moves reported failed (EBUSY x48)"),
            "{t}"
        );
        assert!(
            t.contains("mbind: a move left 48 of 2048 pages off node 3"),
            "{t}"
        );
        let row = t
            .lines()
            .find(|l| l.trim_start().starts_with("mbind "))
            .unwrap();
        assert!(row.ends_with("2000/2048  NO"), "{row}");
        assert!(t.ends_with("NOT verified: see the problems above\n"));
    }
}
