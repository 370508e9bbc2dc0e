//! The text `numalab pdm` prints: the model's workload and graph, one row
//! per contention class (range, count or draws, share with its interval
//! when sampled, examples), then the totals.

use crate::experiments::pdm::{PdmResult, Total};

/// The command's text: one row per class, then the totals.
pub fn text(r: &PdmResult) -> String {
    let mut s = String::new();
    let qs = r
        .quantities
        .iter()
        .map(|q| format!("{}:{}×{}", q.name, q.direction.short(), q.weight))
        .collect::<Vec<_>>()
        .join(" ");
    let who = match r.thread_placement.as_str() {
        "one-per-node" => format!("{} thread(s), one per CPU node in every order", r.threads),
        "any" => format!("{} thread(s), each on any CPU node", r.threads),
        _ => format!(
            "{} thread(s) on nodes {}",
            r.threads,
            r.thread_nodes
                .as_deref()
                .unwrap_or_default()
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
    };
    let links = r
        .links
        .iter()
        .map(|l| format!("{}-{}", l[0], l[1]))
        .collect::<Vec<_>>()
        .join(",");
    s +=
        &format!(
        "placement distribution model: {} ({qs}); {who}\n{} nodes, {} CPU nodes, links {} ({})\n\n",
        r.workload,
        r.nodes.len(),
        r.cpu_nodes.len(),
        if links.is_empty() { "none".into() } else { links },
        if r.links_given { "given" } else { "inferred" },
    );
    let ranges: Vec<String> = r
        .classes
        .iter()
        .map(|c| format!("[{}, {})", trim(c.low), trim(c.high)))
        .collect();
    let counts: Vec<String> = r.classes.iter().map(|c| c.count.to_string()).collect();
    let shares: Vec<String> = r
        .classes
        .iter()
        .map(|c| match c.interval {
            Some([lo, hi]) => format!(
                "{:.2}% (95%: {:.2}–{:.2})",
                c.share * 100.0,
                lo * 100.0,
                hi * 100.0
            ),
            // Rare classes of big machines would round to nothing.
            None if c.share > 0.0 && c.share < 1e-6 => format!("{:.2e}%", c.share * 100.0),
            None => format!("{:.4}%", c.share * 100.0),
        })
        .collect();
    let wr = ranges
        .iter()
        .map(|x| x.chars().count())
        .max()
        .unwrap_or(0)
        .max(10);
    let wc = counts.iter().map(|x| x.len()).max().unwrap_or(0).max(5);
    let ws = shares
        .iter()
        .map(|x| x.chars().count())
        .max()
        .unwrap_or(0)
        .max(5);
    let count_head = if r.exact { "count" } else { "drawn" };
    s += &format!(
        "{:<wr$}  {:>wc$}  {:>ws$}  examples\n",
        "contention", count_head, "share"
    );
    for (i, c) in r.classes.iter().enumerate() {
        s += &format!(
            "{:<wr$}  {:>wc$}  {:>ws$}  {}\n",
            ranges[i],
            counts[i],
            shares[i],
            c.examples.first().map_or("", String::as_str)
        );
        for e in c.examples.iter().skip(1) {
            s += &format!("{:<wr$}  {:>wc$}  {:>ws$}  {e}\n", "", "", "");
        }
    }
    let total = match r.total_placements {
        Total::Exact(n) => n.to_string(),
        Total::Approximate(Some(x)) => format!("about {x:.3e}"),
        Total::Approximate(None) => format!("about 10^{:.2}", r.total_placements_log10),
    };
    s += &format!("\ntotal: {total} placements, ");
    if r.exact {
        s += "counted exactly\n";
    } else {
        s += &format!(
            "not exact: {} random placements (seed {}), shares with 95% intervals\n",
            r.samples.unwrap_or(0),
            r.seed.unwrap_or(0)
        );
    }
    for n in &r.notes {
        s += &format!("note: {n}\n");
    }
    s
}

fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The text of `pdm --measure`: GB/s per contention class, then the trend.
pub fn measured_text(r: &crate::experiments::pdm::measure::PdmMeasurement) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nmeasured: {} random placements per class, kernel {}, {} per array, threads pinned to a CPU of their node, arrays bound to theirs",
        r.per_class,
        r.kernel.name(),
        crate::text::format::bytes(r.buffer_bytes)
    );
    let _ = writeln!(
        s,
        "  {:<12} {:>8} {:>12} {:>10} {:>10}  verified",
        "class", "runs", "median GB/s", "min", "max"
    );
    let g = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2}"));
    for c in &r.classes {
        let _ = writeln!(
            s,
            "  {:<12} {:>8} {:>12} {:>10} {:>10}  {}/{}",
            format!("[{}, {})", trim(c.low), trim(c.high)),
            format!("{}/{}", c.placements.len(), c.wanted),
            g(c.median_gbps),
            g(c.min_gbps),
            g(c.max_gbps),
            c.verified,
            c.placements.len()
        );
    }
    let t = &r.trend;
    let _ = writeln!(
        s,
        "bandwidth falls as contention rises: {} ({})\n  rule: {}",
        t.verdict, t.reason, t.rule
    );
    for w in &r.warnings {
        let _ = writeln!(s, "warning: {w}");
    }
    s
}
