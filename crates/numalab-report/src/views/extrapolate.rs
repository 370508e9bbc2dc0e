//! Text of `numalab extrapolate`: the core + contention split and its
//! projections ([`numalab::experiments::extrapolate`]).

use numalab::experiments::extrapolate::{CoreContention, FitMethod, Prediction};
use numalab::text::format::plural;
use std::fmt::Write;

/// The split, how it was fitted, and one row per projection.
pub fn text(fit: &CoreContention, predictions: &[Prediction]) -> String {
    let mut s = String::new();
    let runs: Vec<String> = fit
        .points
        .iter()
        .map(|p| match p.per_core_bandwidth {
            Some(b) => format!(
                "{} s at {} ({b} GB/s per core)",
                secs(p.seconds),
                plural(p.cores, "core", "cores")
            ),
            None => format!(
                "{} s at {}",
                secs(p.seconds),
                plural(p.cores, "core", "cores")
            ),
        })
        .collect();
    let _ = writeln!(s, "runs: {}", runs.join(", "));
    let how = match fit.method {
        FitMethod::Exact => "solved exactly from two runs".to_string(),
        FitMethod::LeastSquares => format!(
            "least squares over {} runs, largest residual {:.3} s",
            fit.points.len(),
            fit.max_residual_seconds
        ),
    };
    let bw = if fit.points.iter().any(|p| p.per_core_bandwidth.is_some()) {
        "measured per-core bandwidths"
    } else {
        "per-core bandwidth 1/k of one core's"
    };
    let _ = writeln!(
        s,
        "core {} s + contention {} s x B(1)/B(k) ({how}; {bw})",
        secs(fit.core_seconds),
        secs(fit.contention_seconds)
    );
    let _ = writeln!(
        s,
        "  {:>14}  {:>15}  {:>12}  {:>11}",
        "cores per node", "bandwidth ratio", "seconds", "contention"
    );
    for p in predictions {
        let _ = writeln!(
            s,
            "  {:>14}  {:>15}  {:>12}  {:>10.0}%",
            p.cores,
            format!("x{}", p.bandwidth_ratio),
            secs(p.seconds),
            (p.seconds - fit.core_seconds) / p.seconds * 100.0
        );
    }
    s
}

/// The projections to another machine (`--to-machine`): per row its
/// per-core bandwidth there, the ratio to this system's at that count, and
/// the projected time.
pub fn to_machine_text(
    fit: &CoreContention,
    name: &str,
    target: &numalab::experiments::extrapolate::PerCoreBandwidth,
    predictions: &[Prediction],
) -> String {
    let mut s = String::new();
    let measured: Vec<String> = target
        .points
        .iter()
        .map(|p| format!("{:.2} at {}", p.gbps, p.cores))
        .collect();
    let _ = writeln!(
        s,
        "on {name} (per-core GB/s by cores on one node, from its scaling: {}):",
        measured.join(", ")
    );
    let _ = writeln!(
        s,
        "  {:>14}  {:>14}  {:>15}  {:>12}  {:>11}",
        "cores per node", "GB/s per core", "bandwidth ratio", "seconds", "contention"
    );
    for p in predictions {
        let _ = writeln!(
            s,
            "  {:>14}  {:>14.2}  {:>15}  {:>12}  {:>10.0}%",
            p.cores,
            target.at(p.cores.max(1)),
            format!("x{:.3}", p.bandwidth_ratio),
            secs(p.seconds),
            (p.seconds - fit.core_seconds) / p.seconds * 100.0
        );
    }
    s
}

/// Seconds with 3 decimals, 6 below one second (an application's short
/// runs and a bandwidth kernel's passes are fractions of a second).
fn secs(x: f64) -> String {
    if x.abs() >= 1.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.6}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use numalab::experiments::extrapolate::TimedPoint;

    #[test]
    fn the_studys_split_reads_90_plus_70_and_370_at_4_cores() {
        let pt = |cores, seconds| TimedPoint {
            cores,
            seconds,
            per_core_bandwidth: None,
        };
        let f = CoreContention::fit(&[pt(1, 160.0), pt(2, 230.0)]).unwrap();
        let t = text(&f, &[f.predict(4, 1.0), f.predict(2, 2.0)]);
        assert!(t.contains("core 90.000 s + contention 70.000 s"), "{t}");
        assert!(t.contains("solved exactly from two runs"), "{t}");
        assert!(
            t.contains("             4               x1       370.000"),
            "{t}"
        );
        assert!(t.contains("x2       160.000"), "{t}");
    }
}
