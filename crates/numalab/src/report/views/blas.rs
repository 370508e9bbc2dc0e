//! The text `numalab blas` prints: how OpenBLAS was kept to one thread,
//! then per kernel one row per placement (CPU node, hop class, operands'
//! nodes, GFLOPS, pages verified), its sensitivity and per-hop-class
//! figures, then the level finding with its rule; and the `--list` plan.

use crate::experiments::blas::{BlasResult, Kernel, ParallelClass, PlannedRun};
use std::fmt::Write;

/// GFLOPS with three significant figures, `-` without data.
fn gf(x: f64) -> String {
    if !x.is_finite() {
        "-".into()
    } else if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// The operands of a placement as `name@node` words.
fn operand_nodes(names: &[&str], nodes: &[u32]) -> String {
    names
        .iter()
        .zip(nodes)
        .map(|(n, v)| format!("{n}@{v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command's text.
pub fn text(r: &BlasResult) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "BLAS placement sensitivity, {} mode, n = {}{}; memory nodes {}, threads on CPU nodes {}",
        r.mode,
        r.n,
        match (r.mode.as_str(), r.full) {
            ("parallel", _) => ", one thread per CPU node, random placements per contention class",
            (_, true) => ", every placement",
            _ => ", one placement per hop class",
        },
        r.memory_nodes,
        r.cpu_nodes
    );
    if let Some(why) = &r.scaled_down {
        let _ = writeln!(s, "{why}");
    }
    let _ = writeln!(
        s,
        "OpenBLAS: {}; {} -> {} thread(s)",
        r.openblas.config, r.openblas.method, r.openblas.num_threads_after
    );
    if let Some(c) = &r.check {
        let _ = writeln!(
            s,
            "numerical check: {} (n = 1..{}, max relative error {:.1e}, bound {:.0e})",
            if c.checked { "passed" } else { "FAILED" },
            c.sizes.iter().max().copied().unwrap_or(0),
            c.max_rel_error,
            c.bound
        );
    }
    for k in &r.kernels {
        let names: Vec<&str> = k.operands.iter().map(|s| s.as_str()).collect();
        let _ = writeln!(
            s,
            "\n{} (level {}), operands {} of {} elements",
            k.kernel.name(),
            k.level,
            names.join(", "),
            k.elements
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if !k.placements.is_empty() {
            let _ = writeln!(
                s,
                "  {:>4}  {:<9} {:>6}  {:<24} {:>9} {:>7}  pages",
                "node", "hops", "stands", "operands", "GFLOPS", "±CI"
            );
        }
        for p in &k.placements {
            let nodes: Vec<u32> = p.operands.iter().map(|o| o.node).collect();
            let _ = writeln!(
                s,
                "  {:>4}  {:<9} {:>6}  {:<24} {:>9} {:>6.1}%  {}",
                p.cpu_node,
                p.class,
                p.stands_for,
                operand_nodes(&names, &nodes),
                gf(p.gflops.median),
                p.gflops.rel_ci * 100.0,
                if p.verified {
                    "verified"
                } else {
                    "NOT verified"
                }
            );
        }
        for c in &k.contention_classes {
            let _ = writeln!(
                s,
                "  contention [{}, {}) ({:.2}% of placements): {} placement(s), median {} GFLOPS (min {}, max {}){}",
                c.low,
                c.high,
                c.share * 100.0,
                c.placements.len(),
                gf(c.median_gflops),
                gf(c.min_gflops),
                gf(c.max_gflops),
                if c.placements.iter().all(|p| p.verified) {
                    ", pages verified"
                } else {
                    ", pages NOT verified"
                }
            );
        }
        if let Some(sens) = &k.sensitivity {
            let _ = writeln!(
                s,
                "  best {} GFLOPS ({}), worst {} ({}): worst/best {:.3}, noise ±{:.1}%",
                gf(sens.best),
                sens.best_class,
                gf(sens.worst),
                sens.worst_class,
                sens.ratio,
                sens.noise * 100.0
            );
            if sens.per_hop_class.len() > 1 {
                let per: Vec<String> = sens
                    .per_hop_class
                    .iter()
                    .map(|c| format!("{} {}", c.class, gf(c.median_gflops)))
                    .collect();
                let _ = writeln!(
                    s,
                    "  median GFLOPS per {} class: {}",
                    if k.placements.is_empty() {
                        "contention"
                    } else {
                        "hop"
                    },
                    per.join(", ")
                );
            }
        }
    }
    let f = &r.finding;
    let _ = writeln!(
        s,
        "\nlevel 1 > level 2 > level 3 in sensitivity: {}",
        f.verdict
    );
    for l in &f.levels {
        let _ = writeln!(
            s,
            "  level {} ({}): best/worst {:.3} ± {:.1}%",
            l.level,
            l.kernel.name(),
            l.sensitivity,
            l.noise * 100.0
        );
    }
    let _ = writeln!(s, "rule: {}", f.rule);
    s
}

/// The `--list` text: the placements a run would measure.
pub fn plan_text(runs: &[PlannedRun]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} placement(s) to run:\n  {:<6} {:>4} {:>4}  {:<9} {:>6}  operands",
        runs.len(),
        "kernel",
        "node",
        "cpu",
        "hops",
        "stands"
    );
    for r in runs {
        let _ = writeln!(
            s,
            "  {:<6} {:>4} {:>4}  {:<9} {:>6}  {}",
            r.kernel.name(),
            r.cpu_node,
            r.cpu,
            r.class,
            r.stands_for,
            operand_nodes(r.kernel.operands(), &r.nodes)
        );
    }
    s
}

/// The `--list --parallel` text: per kernel and contention class, the
/// drawn placements.
pub fn parallel_plan_text(draws: &[(Kernel, Vec<ParallelClass>)]) -> String {
    let mut s = String::new();
    for (k, classes) in draws {
        let names: Vec<String> = k
            .operands()
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{}={o}", (b'a' + i as u8) as char))
            .collect();
        let _ = writeln!(
            s,
            "{} (level {}), quantities {}:",
            k.name(),
            k.level(),
            names.join(" ")
        );
        for c in classes {
            let _ = writeln!(
                s,
                "  contention [{}, {}): {:.2}% of placements, {} of {} drawn",
                c.low,
                c.high,
                c.share * 100.0,
                c.runs.len(),
                c.wanted
            );
            for r in &c.runs {
                let _ = writeln!(s, "    {}", r.label);
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::blas::{plan, BlasRequest, Kernel};
    use crate::measure::stats::StopRule;
    use crate::report::fixture;

    #[test]
    fn plan_text_lists_every_run_with_its_operand_nodes() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let req = BlasRequest {
            kernels: vec![Kernel::Daxpy],
            n: Some(8),
            cpu_nodes: Some(crate::IdSet::single(0)),
            full: false,
            rule: StopRule::default(),
            check: false,
            parallel: None,
            seed: 1,
        };
        let t = plan_text(&plan(&m, &req).unwrap());
        assert!(t.starts_with("9 placement(s) to run:\n"), "{t}");
        assert_eq!(t.lines().count(), 2 + 9, "{t}");
        assert!(
            t.contains("daxpy     0    0  0/0            1  x@0 y@0"),
            "{t}"
        );
        assert!(
            t.contains("daxpy     0    0  1/2            2  x@1 y@3"),
            "{t}"
        );
    }
}
