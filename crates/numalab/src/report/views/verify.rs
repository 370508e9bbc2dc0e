//! Where a running process's memory and threads are (`numalab verify`, and
//! `numalab run --verify` at the command's exit).

use crate::placement::ProcessPlacement;
use crate::text::format::bytes as format_bytes;
use std::fmt::Write;

/// The text view, shared with `numalab run --verify`.
pub fn render(p: &ProcessPlacement, all: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "process {} ({})", p.pid, p.command);
    if let Some(pol) = &p.process_policy {
        let _ = writeln!(s, "memory policy: {pol}");
    }
    let total: u64 = p.bytes_by_node.values().sum();
    let _ = writeln!(
        s,
        "resident memory by node ({} in all):",
        format_bytes(total)
    );
    for (n, b) in &p.bytes_by_node {
        let _ = writeln!(
            s,
            "  node {n:>3}  {:>10}  {:>5.1}%",
            format_bytes(*b),
            100.0 * *b as f64 / total.max(1) as f64
        );
    }
    let private: u64 = p.private_bytes_by_node.values().sum();
    let _ = writeln!(
        s,
        "  of which allocated by the process (anon, heap, stack; follows its policy): {}",
        p.private_bytes_by_node
            .iter()
            .map(|(n, b)| format!(
                "node {n} {} ({:.1}%)",
                format_bytes(*b),
                100.0 * *b as f64 / private.max(1) as f64
            ))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(s, "threads:");
    for t in &p.threads {
        let _ = writeln!(
            s,
            "  {:>7} {:<16} last on CPU {:<4} allowed CPUs {{{}}} nodes {{{}}}",
            t.tid,
            t.name,
            t.last_cpu.map(|c| c.to_string()).unwrap_or("?".into()),
            t.cpus_allowed,
            t.mems_allowed
        );
    }
    let _ = writeln!(
        s,
        "mappings{}:",
        if all { "" } else { " with resident pages" }
    );
    for m in p.mappings.iter().filter(|m| all || m.pages_total > 0) {
        let nodes: Vec<String> = m
            .pages_by_node
            .iter()
            .map(|(n, c)| format!("N{n}={c}"))
            .collect();
        let _ = writeln!(
            s,
            "  {:>14} {:<18} {:>8} pages  {:<24} {}",
            m.address,
            m.policy,
            m.pages_total,
            nodes.join(" "),
            m.name
        );
    }
    s
}
