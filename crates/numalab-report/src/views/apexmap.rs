//! The Apex-MAP locality map (`numalab apexmap`): ns per access and GB/s
//! over temporal locality alpha x spatial locality L, the fitted cache and
//! memory model, and where the machine departs from it.

use super::bench::verification_text;
use numalab::experiments::apexmap::{
    ApexPoint, ApexResult, Copies, PackedPrediction, PackingComparison, PublishedModel,
};
use numalab::machine::Machine;
use numalab::placement::Thp;
use numalab::text::format::{bytes as format_bytes, significant};
use std::fmt::Write;

/// A table with alphas as rows and Ls as columns.
fn grid(r: &ApexResult, title: &str, cell: &dyn Fn(&ApexPoint) -> String) -> String {
    grid_of(&r.alphas, &r.ls, title, &|a, l| r.point(a, l).map(cell))
}

/// A table of `alphas` rows and `ls` columns, `-` where `cell` has nothing.
fn grid_of(
    alphas: &[f64],
    ls: &[usize],
    title: &str,
    cell: &dyn Fn(f64, usize) -> Option<String>,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{title}");
    let _ = write!(s, "  {:>9}", "alpha \\ L");
    for l in ls {
        let _ = write!(s, " {l:>8}");
    }
    s.push('\n');
    for &a in alphas {
        let _ = write!(s, "  {a:>9}");
        for &l in ls {
            let c = cell(a, l).unwrap_or_else(|| "-".into());
            let _ = write!(s, " {c:>8}");
        }
        s.push('\n');
    }
    s
}

/// A relative figure as a signed percentage.
fn percent(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.0}%", x * 100.0)
    } else {
        "-".into()
    }
}

/// Where the copies ran: "CPU 0 (node 0)" or "2 copies packed on CPUs 0,
/// 1 (node 0)".
fn placement(r: &ApexResult, m: &Machine) -> String {
    let nodes = |cpus: &[u32]| {
        let mut n: Vec<u32> = cpus.iter().filter_map(|&c| m.node_of_cpu(c)).collect();
        n.sort_unstable();
        n.dedup();
        match n.len() {
            0 => String::new(),
            1 => format!(" (node {})", n[0]),
            _ => format!(
                " (nodes {})",
                n.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    if r.copies == Copies::Single || r.copy_cpus.is_empty() {
        return format!("CPU {}{}", r.cpu, nodes(&[r.cpu]));
    }
    let n = r.copy_cpus.len();
    format!(
        "{n} cop{} {} on CPU{} {}{}",
        if n == 1 { "y" } else { "ies" },
        r.copies.name(),
        if n == 1 { "" } else { "s" },
        r.copy_cpus
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        nodes(&r.copy_cpus)
    )
}

/// Three significant digits, `-` when not finite.
fn sig3(v: f64) -> String {
    significant(v, 3)
}

/// The text `numalab apexmap` prints: the setup, ns per access and GB/s per
/// (alpha, L) point, the fitted model and its residuals, and the placement
/// proof. `thp` is the huge-page setting the buffer was asked with.
pub fn text(r: &ApexResult, m: &Machine, thp: Thp) -> String {
    let mut s = String::new();
    let several = r.copies != Copies::Single;
    let _ = writeln!(
        s,
        "Apex-MAP on {}, memory {}, {} buffer{} (THP {}), ISA {}: {} alphas x {} Ls in {:.1} s",
        placement(r, m),
        r.policy,
        format_bytes(r.buffer_bytes),
        if several { " per copy" } else { "" },
        thp.describe(),
        r.isa.name(),
        r.alphas.len(),
        r.ls.len(),
        r.elapsed_s
    );
    s.push_str(&grid(
        r,
        "ns per access (rows: temporal locality alpha; columns: L, 8-byte words per access)",
        &|p| sig3(p.ns.median),
    ));
    s.push_str(&grid(r, "GB/s (8L bytes per access)", &|p| {
        sig3(p.gbps.median)
    }));
    if several && r.copy_cpus.len() > 1 {
        s.push_str(&grid(
            r,
            "Spread between copies: (slowest - fastest) / median ns (the figures above are medians over copies)",
            &|p| p.copy_spread.map(|x| format!("{:.0}%", x * 100.0)).unwrap_or("-".into()),
        ));
    }
    if let Some(mo) = &r.model {
        let _ = writeln!(
            s,
            "Multi-level model: time per access = sum over levels of P(level) x (latency + 8L / bandwidth); P from the power law and the cache sizes, latency and bandwidth fitted (least squares, relative error, each deeper level at least as slow)"
        );
        let _ = writeln!(
            s,
            "  {:>8} {:>10} {:>12} {:>12}",
            "level", "capacity", "latency ns", "GB/s"
        );
        for lv in &mo.levels {
            let _ = writeln!(
                s,
                "  {:>8} {:>10} {:>12} {:>12}",
                lv.name,
                lv.capacity_bytes.map(format_bytes).unwrap_or("-".into()),
                lv.latency_ns.map(sig3).unwrap_or("-".into()),
                lv.bandwidth_gbps.map(sig3).unwrap_or("-".into())
            );
        }
        s.push_str(&grid(
            r,
            "Residual (measured / model - 1): where the machine departs from the model",
            &|p| {
                p.residual
                    .map(|x| format!("{:+.0}%", x * 100.0))
                    .unwrap_or("-".into())
            },
        ));
        let _ = writeln!(
            s,
            "  rms residual {:.0}%, largest {:+.0}% at alpha {} L {}",
            mo.rms_residual * 100.0,
            mo.worst.residual * 100.0,
            mo.worst.alpha,
            mo.worst.l
        );
    }
    if let Some(pm) = &r.published_model {
        s.push_str(&published_text(pm));
    }
    s.push_str(&verification_text(&r.verification));
    s
}

/// The text of `numalab apexmap --copies both`: the unpacked map, the
/// packed map, their ratio (the study's Figure 7c) and the prediction of
/// packed from unpacked with its residuals, then both maps' placement.
pub fn comparison_text(c: &PackingComparison, m: &Machine, thp: Thp) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Packed against unpacked (the Cray/NERSC study's Apex-MAP runs) in {:.1} s",
        c.elapsed_s
    );
    s.push_str("== Unpacked\n");
    s.push_str(&text(&c.unpacked, m, thp));
    s.push_str("== Packed\n");
    s.push_str(&text(&c.packed, m, thp));
    s.push_str("== Difference\n");
    let (alphas, ls) = (&c.packed.alphas, &c.packed.ls);
    s.push_str(&grid_of(
        alphas,
        ls,
        "Packed / unpacked ns per access (above 1: packing costs; medians over copies)",
        &|a, l| {
            c.difference
                .iter()
                .find(|d| d.alpha == a && d.l == l)
                .map(|d| format!("{:.2}", d.ratio))
        },
    ));
    if let Some(p) = &c.prediction {
        s.push_str(&prediction_text(p, alphas, ls));
    }
    s
}

/// The prediction of the packed map: the rule, predicted ns, residuals.
fn prediction_text(p: &PackedPrediction, alphas: &[f64], ls: &[usize]) -> String {
    let mut s = String::new();
    let gb = |g: Option<f64>| g.map(sig3).unwrap_or("unbounded".into());
    let _ = writeln!(
        s,
        "Prediction of packed: the unpacked published model (L2 + memory) with memory bandwidth / {} ({} copies share one node's memory controller): {} -> {} GB/s per copy",
        p.sharing,
        p.sharing,
        gb(p.memory_bandwidth_gbps),
        gb(p.shared_memory_bandwidth_gbps)
    );
    let at = |a: f64, l: usize| p.points.iter().find(|q| q.alpha == a && q.l == l);
    s.push_str(&grid_of(
        alphas,
        ls,
        "Predicted packed ns per access",
        &|a, l| at(a, l).map(|q| sig3(q.predicted_ns)),
    ));
    s.push_str(&grid_of(
        alphas,
        ls,
        "Residual of the prediction (measured packed / predicted - 1)",
        &|a, l| at(a, l).map(|q| percent(q.residual)),
    ));
    let _ = writeln!(
        s,
        "  rms residual {}, largest {} at alpha {} L {}",
        percent(p.rms_residual).trim_start_matches('+'),
        percent(p.worst.residual),
        p.worst.alpha,
        p.worst.l
    );
    s
}

/// The study's model: L2 and memory, in ns and cycles (or why no cycles).
fn published_text(pm: &PublishedModel) -> String {
    let mut s = String::new();
    let clock = match pm.frequency_mhz {
        Some(f) => format!("cycles at {f:.0} MHz ({})", pm.frequency_source),
        None => "cycles: unknown frequency".to_string(),
    };
    let _ = writeln!(
        s,
        "Published model (Apex-MAP: latency and bandwidth to the L2 and to memory only; {clock}), rms residual {:.0}%",
        pm.rms_residual * 100.0
    );
    let _ = writeln!(
        s,
        "  {:>8} {:>10} {:>12} {:>10} {:>12} {:>10}",
        "level", "capacity", "latency ns", "cycles", "GB/s", "B/cycle"
    );
    let opt = |v: Option<f64>| v.map(sig3).unwrap_or("-".into());
    for (name, lv) in [("L2", &pm.l2), ("memory", &pm.memory)] {
        let _ = writeln!(
            s,
            "  {:>8} {:>10} {:>12} {:>10} {:>12} {:>10}",
            name,
            lv.capacity_bytes.map(format_bytes).unwrap_or("-".into()),
            opt(lv.latency_ns),
            opt(lv.latency_cycles),
            opt(lv.bandwidth_gbps),
            opt(lv.bytes_per_cycle)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab::experiments::apexmap::PublishedLevel;

    fn level(ns: f64, gbps: f64, mhz: Option<f64>) -> PublishedLevel {
        PublishedLevel {
            capacity_bytes: None,
            latency_ns: Some(ns),
            latency_cycles: mhz.map(|f| ns * f / 1000.0),
            bandwidth_gbps: Some(gbps),
            bytes_per_cycle: mhz.map(|f| gbps * 1000.0 / f),
        }
    }

    #[test]
    fn published_model_says_when_cycles_are_unknown() {
        let mut pm = PublishedModel {
            method: String::new(),
            l2: level(4.0, 100.0, None),
            memory: level(90.0, 10.0, None),
            frequency_mhz: None,
            frequency_source: "unknown frequency".into(),
            rms_residual: 0.1,
        };
        let t = published_text(&pm);
        assert!(t.contains("cycles: unknown frequency"), "{t}");
        assert!(t.contains("rms residual 10%"), "{t}");
        pm.frequency_mhz = Some(2000.0);
        pm.frequency_source = "/proc/cpuinfo cpu MHz of processor 0".into();
        pm.memory = level(90.0, 10.0, Some(2000.0));
        let t = published_text(&pm);
        assert!(t.contains("cycles at 2000 MHz (/proc/cpuinfo"), "{t}");
        // 90 ns at 2 GHz: 180 cycles; 10 GB/s: 5 bytes per cycle.
        let mem = t
            .lines()
            .find(|l| l.trim_start().starts_with("memory"))
            .unwrap();
        let cols: Vec<&str> = mem.split_whitespace().collect();
        assert_eq!(cols[3], "180", "{mem}");
        assert_eq!(cols[5], "5", "{mem}");
        assert!(pm.unresolved().is_empty());
        pm.l2 = level(0.0, 100.0, None);
        assert_eq!(
            pm.unresolved(),
            vec!["published model: the L2 latency fits at its bound, 0 ns: these points do not resolve it; measure more small Ls (--ls) or a longer --budget"]
        );
    }
}
