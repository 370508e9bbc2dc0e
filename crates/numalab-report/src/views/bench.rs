//! One measurement (`numalab bench bandwidth|latency`): the figures in
//! program and memory bytes, and the placement proof.

use super::Units;
use numalab::machine::Machine;
use numalab::measure::harness::{
    BandwidthResult, BufferCheck, LatencyResult, Verification, WorkerReport,
};
use numalab::measure::memory_traffic::{label, Source};
use numalab::placement::MemoryPolicy;
use numalab::text::format::bytes as format_bytes;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The text view of a bandwidth result; `memory` says how the arrays were
/// placed (a policy, one per array, or the placement file).
pub fn bandwidth_text(r: &BandwidthResult, memory: &str, u: Units) -> String {
    let mut s = String::new();
    let cpus: Vec<String> = r
        .verification
        .workers
        .iter()
        .map(|w| w.requested_cpu.to_string())
        .collect();
    let _ = writeln!(
        s,
        "{} with {} thread{} on CPU {}, memory {memory}, {} x {} per thread, ISA {}",
        r.kernel.name(),
        r.threads,
        if r.threads == 1 { "" } else { "s" },
        cpus.join(","),
        r.kernel.arrays(),
        format_bytes(r.buffer_bytes),
        r.isa.name()
    );
    let f = |x: f64| format!("{:.2}", u.convert(x));
    let _ = writeln!(
        s,
        "  program bytes  median {} {}  best {}  (min {}, max {}; ±{:.1}% CI; {} samples, {:?})",
        f(r.gbps.median),
        u.label(),
        f(r.gbps.best),
        f(r.gbps.min),
        f(r.gbps.max),
        r.gbps.rel_ci * 100.0,
        r.measurement.samples.len(),
        r.measurement.stop_reason
    );
    let _ = writeln!(
        s,
        "  memory bytes   median {} {}  best {}  ({})",
        f(r.memory_gbps.median),
        u.label(),
        f(r.memory_gbps.best),
        match r.memory_traffic.source {
            Source::Assumed => label(&r.memory_traffic),
            Source::Measured => "assumed: write-allocate counted".to_string(),
        }
    );
    if r.memory_traffic.source == Source::Measured {
        let t = &r.memory_traffic;
        let _ = writeln!(
            s,
            "  memory measured {} {}  ({}; whole machine, over all samples)",
            f(t.gbps.unwrap_or(0.0)),
            u.label(),
            label(t)
        );
    }
    if r.threads > 1 {
        let per: Vec<String> = r
            .verification
            .workers
            .iter()
            .map(|w| {
                let med = numalab::measure::stats::Summary::of(&w.gbps)
                    .map(|s| s.median)
                    .unwrap_or(0.0);
                format!("CPU {} {}", w.requested_cpu, f(med))
            })
            .collect();
        let _ = writeln!(s, "  per thread     {} {}", per.join(", "), u.label());
    }
    s.push_str(&verification_text(&r.verification));
    s.push_str(&arrays_text(&r.verification));
    for w in &r.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}

/// Most workers whose arrays are listed one by one; past it, each array's
/// pages are summed over the workers.
pub const ARRAYS_LISTED_PER_WORKER: usize = 8;

/// Each array's page histogram (kernels of several arrays): per worker up
/// to [`ARRAYS_LISTED_PER_WORKER`] workers, else summed per array.
pub fn arrays_text(v: &Verification) -> String {
    let mut s = String::new();
    let named = |w: &WorkerReport| w.buffers.iter().any(|b| b.array.is_some());
    if !v.workers.iter().any(named) {
        return s;
    }
    let line = |b: &BufferCheck| {
        format!(
            "{} pages {}{}",
            b.policy,
            super::page_shares(&b.pages_by_node),
            if b.verified { "" } else { " NOT VERIFIED" }
        )
    };
    if v.workers.len() <= ARRAYS_LISTED_PER_WORKER {
        for w in &v.workers {
            let mut bufs: Vec<&BufferCheck> = w.buffers.iter().collect();
            bufs.sort_by(|x, y| x.array.cmp(&y.array));
            for b in bufs {
                let _ = writeln!(
                    s,
                    "  CPU {:<4} array {}: {}",
                    w.requested_cpu,
                    b.array.as_deref().unwrap_or("?"),
                    line(b)
                );
            }
        }
        return s;
    }
    let mut sums: BTreeMap<&str, (BTreeMap<u32, u64>, usize)> = BTreeMap::new();
    for w in &v.workers {
        for b in &w.buffers {
            let e = sums.entry(b.array.as_deref().unwrap_or("?")).or_default();
            for (n, p) in &b.pages_by_node {
                *e.0.entry(*n).or_insert(0) += p;
            }
            e.1 += usize::from(!b.verified);
        }
    }
    for (name, (pages, bad)) in sums {
        let _ = writeln!(
            s,
            "  array {name}, all {} workers: pages {}{}",
            v.workers.len(),
            super::page_shares(&pages),
            if bad == 0 {
                String::new()
            } else {
                format!(" ({bad} NOT VERIFIED)")
            }
        );
    }
    s
}

/// "placement verified: ..." or the problems.
pub fn verification_text(v: &Verification) -> String {
    let mut s = String::new();
    if v.verified {
        let mut nodes = std::collections::BTreeMap::<u32, u64>::new();
        for w in &v.workers {
            for b in &w.buffers {
                for (n, p) in &b.pages_by_node {
                    *nodes.entry(*n).or_insert(0) += p * b.page_size as u64;
                }
            }
        }
        let total: u64 = nodes.values().sum();
        let parts: Vec<String> = nodes
            .iter()
            .map(|(n, b)| format!("node {n} {:.0}%", 100.0 * *b as f64 / total.max(1) as f64))
            .collect();
        let _ = writeln!(
            s,
            "  placement verified: threads on their CPUs, pages on {}",
            parts.join(", ")
        );
    } else {
        for p in &v.problems {
            let _ = writeln!(s, "  NOT VERIFIED: {p}");
        }
    }
    s
}

/// The text view of a latency result.
pub fn latency_text(r: &LatencyResult, cpu: u32, policy: &MemoryPolicy, m: &Machine) -> String {
    let mut s = String::new();
    let node = m
        .node_of_cpu(cpu)
        .map(|n| format!(" (node {n})"))
        .unwrap_or_default();
    let _ = writeln!(
        s,
        "{} chase on CPU {cpu}{node}, memory {policy}, {} buffer, {} chain{}",
        r.pattern,
        format_bytes(r.buffer_bytes),
        r.chains,
        if r.chains == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "  latency  median {:.1} ns  best {:.1} ns  (min {:.1}, max {:.1}; ±{:.1}% CI; {} samples, {:?})",
        r.ns.median,
        r.ns.best,
        r.ns.min,
        r.ns.max,
        r.ns.rel_ci * 100.0,
        r.measurement.samples.len(),
        r.measurement.stop_reason
    );
    if r.core_ghz > 0.0 {
        let _ = writeln!(
            s,
            "  cycles   median {:.0}  (core clock {:.2} GHz)",
            r.cycles.median, r.core_ghz
        );
    }
    if r.chains > 1 {
        let _ = writeln!(s, "  per access over all chains: {:.2} ns", r.ns_per_access);
    }
    s.push_str(&verification_text(&r.verification));
    for w in &r.warnings {
        let _ = writeln!(s, "  warning: {w}");
    }
    s
}
