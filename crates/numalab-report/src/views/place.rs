//! A placed buffer (`numalab place`): how it was placed, where every page
//! landed, and whether that is what the policy asked for.

use numalab::placement::{PlaceResult, Realization};
use numalab::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The text `numalab place` prints: how the buffer was placed, its pages
/// per node with a bar, run lengths, where the workers ran, and the check.
pub fn text(r: &PlaceResult) -> String {
    let mut s = String::new();
    let mech = match &r.realization {
        Realization::Kernel { mode, .. } => format!("kernel {}", mode.kernel_name()),
        Realization::KernelWeighted { .. } => "kernel weighted interleave".into(),
        Realization::Chunks { pattern } => {
            let p: Vec<String> = pattern.iter().map(|(n, k)| format!("{k}p@{n}")).collect();
            format!("chunk-wise bind, repeating {}", p.join(" "))
        }
    };
    let _ = writeln!(
        s,
        "placed {} with {} ({mech}), THP {}{}, page size {}",
        format_bytes(r.size_bytes),
        r.policy,
        r.thp.describe(),
        if r.hugetlb { ", hugetlbfs" } else { "" },
        format_bytes(r.page_size as u64)
    );
    if let Some(c) = r.toucher_cpu {
        let _ = writeln!(
            s,
            "touched by CPU {c}{}",
            r.toucher_node
                .map(|n| format!(" (node {n})"))
                .unwrap_or_default()
        );
    }
    let _ = writeln!(
        s,
        "pages: {} total, {} untouched",
        r.pages_total, r.untouched_pages
    );
    let _ = writeln!(s, "  node       pages   share");
    let touched: u64 = r.pages_by_node.values().sum();
    for (n, c) in &r.pages_by_node {
        let share = 100.0 * *c as f64 / touched.max(1) as f64;
        let _ = writeln!(s, "  {n:>4} {c:>11} {share:>6.1}%  {}", bar(share));
    }
    let rl = &r.run_lengths;
    let _ = writeln!(
        s,
        "run lengths (pages on one node in a row): {} runs, min {}, max {}, mean {:.1}, most common {}",
        rl.runs, rl.min, rl.max, rl.mean, rl.mode
    );
    for w in &r.workers {
        let _ = writeln!(
            s,
            "worker pinned to CPU {} ran on CPU {}",
            w.requested_cpu,
            w.seen_cpu.map(|c| c.to_string()).unwrap_or("?".into())
        );
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    if r.verified {
        match &r.expected_nodes {
            Some(e) => {
                let _ = writeln!(
                    s,
                    "verified: pages are where {} puts them (nodes {{{e}}})",
                    r.policy
                );
            }
            None => {
                let _ = writeln!(s, "verified: every page is touched");
            }
        }
    } else {
        for p in &r.problems {
            let _ = writeln!(s, "NOT VERIFIED: {p}");
        }
    }
    s
}

/// A bar of `#`, one per 2.5%.
fn bar(pct: f64) -> String {
    "#".repeat((pct / 2.5).round() as usize)
}
