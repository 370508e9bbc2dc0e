//! `numalab fleet compare A B`: a fleet before and after a change. Per key
//! figure the two medians and, over the nodes in both, a paired sign test
//! (did most nodes move the same way?); per node the verdicts that changed;
//! per setting the values that changed.

use super::{num, Fleet, Verdict};
use serde::Serialize;
use std::collections::HashMap;
use std::fmt::Write;

/// The two-sided p-value under which a figure is said to have moved.
pub const ALPHA: f64 = 0.05;

#[derive(Debug, Clone, Serialize)]
pub struct FigureChange {
    pub name: String,
    pub label: String,
    pub unit: String,
    pub median_a: Option<f64>,
    pub median_b: Option<f64>,
    /// median_b / median_a.
    pub ratio: Option<f64>,
    /// Nodes with the figure in both fleets.
    pub paired_nodes: usize,
    pub higher_in_b: usize,
    pub lower_in_b: usize,
    /// Exact two-sided sign test over the paired nodes (ties left out).
    pub p_value: Option<f64>,
    /// "higher", "lower" or "cannot tell".
    pub verdict: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerdictChange {
    pub node: String,
    pub a: Verdict,
    pub b: Verdict,
    pub reasons_b: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct SettingChange {
    pub node: String,
    pub setting: String,
    pub a: String,
    pub b: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct FleetComparison {
    pub figures: Vec<FigureChange>,
    pub verdicts: Vec<VerdictChange>,
    pub settings: Vec<SettingChange>,
    pub only_in_a: Vec<String>,
    pub only_in_b: Vec<String>,
    pub summary: Vec<String>,
}

/// The exact two-sided sign test: `k` of `n` pairs moved one way.
pub fn sign_test(k: usize, n: usize) -> f64 {
    if n == 0 {
        return 1.0;
    }
    let m = k.min(n - k);
    // P(X <= m), X ~ Binomial(n, 1/2), summed in log space.
    let mut log_p = -(n as f64) * std::f64::consts::LN_2;
    let mut terms = vec![log_p];
    for i in 0..m {
        log_p += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        terms.push(log_p);
    }
    let top = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let tail = top.exp() * terms.iter().map(|t| (t - top).exp()).sum::<f64>();
    (2.0 * tail).min(1.0)
}

pub fn compare(a: &Fleet, b: &Fleet) -> FleetComparison {
    let in_b: HashMap<&str, usize> = b
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let in_a: HashMap<&str, usize> = a
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let pairs: Vec<(usize, usize)> = a
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((i, *in_b.get(n.name.as_str())?)))
        .collect();
    let figures = a
        .figures
        .iter()
        .map(|fa| {
            let fb = b.figures.iter().find(|f| f.name == fa.name);
            let (mut up, mut down) = (0, 0);
            let mut paired = 0;
            for &(i, j) in &pairs {
                let (Some(x), Some(y)) = (
                    a.nodes[i].figures.get(&fa.name),
                    b.nodes[j].figures.get(&fa.name),
                ) else {
                    continue;
                };
                paired += 1;
                if y > x {
                    up += 1;
                } else if y < x {
                    down += 1;
                }
            }
            let p = (up + down > 0).then(|| sign_test(up, up + down));
            let median_a = fa.spread.map(|s| s.median);
            let median_b = fb.and_then(|f| f.spread).map(|s| s.median);
            let verdict = match p {
                Some(p) if p < ALPHA && up > down => "higher",
                Some(p) if p < ALPHA => "lower",
                _ => "cannot tell",
            };
            FigureChange {
                name: fa.name.clone(),
                label: fa.label.clone(),
                unit: fa.unit.clone(),
                median_a,
                median_b,
                ratio: median_a.zip(median_b).map(|(x, y)| y / x),
                paired_nodes: paired,
                higher_in_b: up,
                lower_in_b: down,
                p_value: p,
                verdict: verdict.into(),
            }
        })
        .filter(|f| f.median_a.is_some() || f.median_b.is_some())
        .collect();
    let mut verdicts = Vec::new();
    let mut settings = Vec::new();
    for &(i, j) in &pairs {
        let (x, y) = (&a.nodes[i], &b.nodes[j]);
        if x.verdict != y.verdict {
            verdicts.push(VerdictChange {
                node: x.name.clone(),
                a: x.verdict,
                b: y.verdict,
                reasons_b: y.reasons.clone(),
            });
        }
        for (k, va) in &x.settings {
            match y.settings.get(k) {
                Some(vb) if vb != va => settings.push(SettingChange {
                    node: x.name.clone(),
                    setting: k.clone(),
                    a: va.clone(),
                    b: vb.clone(),
                }),
                _ => {}
            }
        }
    }
    let only = |f: &Fleet, other: &HashMap<&str, usize>| -> Vec<String> {
        f.nodes
            .iter()
            .filter(|n| !other.contains_key(n.name.as_str()))
            .map(|n| n.name.clone())
            .collect()
    };
    let mut c = FleetComparison {
        figures,
        verdicts,
        settings,
        only_in_a: only(a, &in_b),
        only_in_b: only(b, &in_a),
        summary: Vec::new(),
    };
    c.summary = sentences(&c, pairs.len());
    c
}

fn sentences(c: &FleetComparison, paired: usize) -> Vec<String> {
    let mut out = vec![format!(
        "{paired} nodes in both fleets, {} only in the first, {} only in the second.",
        c.only_in_a.len(),
        c.only_in_b.len()
    )];
    for f in c.figures.iter().filter(|f| f.verdict != "cannot tell") {
        out.push(format!(
            "{} is {} in the second fleet: median {} → {} {} on {} of {} nodes (sign test p = {:.2e}).",
            f.label,
            f.verdict,
            f.median_a.map(num).unwrap_or_default(),
            f.median_b.map(num).unwrap_or_default(),
            f.unit,
            if f.verdict == "higher" { f.higher_in_b } else { f.lower_in_b },
            f.paired_nodes,
            f.p_value.unwrap_or(1.0)
        ));
    }
    if c.figures.iter().all(|f| f.verdict == "cannot tell") {
        out.push(format!(
            "No key figure moved on a clear majority of the nodes in both (two-sided sign test, p < {ALPHA})."
        ));
    }
    for v in &c.verdicts {
        out.push(format!(
            "{}: {} → {}{}",
            v.node,
            v.a.word(),
            v.b.word(),
            if v.reasons_b.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.reasons_b.join("; "))
            }
        ));
    }
    out
}

pub fn render_text(c: &FleetComparison) -> String {
    let mut s = String::new();
    for l in &c.summary {
        let _ = writeln!(s, "{l}");
    }
    let _ = writeln!(
        s,
        "\n{:<80} {:<5} {:>9} {:>9} {:>7} {:>11} {:>9}  verdict",
        "Key figure", "unit", "median A", "median B", "B/A", "up/down", "p"
    );
    for f in &c.figures {
        let _ = writeln!(
            s,
            "{:<80} {:<5} {:>9} {:>9} {:>7} {:>11} {:>9}  {}",
            f.label,
            f.unit,
            f.median_a.map(num).unwrap_or_else(|| "-".into()),
            f.median_b.map(num).unwrap_or_else(|| "-".into()),
            f.ratio
                .map(|r| format!("{r:.3}"))
                .unwrap_or_else(|| "-".into()),
            format!("{}/{}", f.higher_in_b, f.lower_in_b),
            f.p_value
                .map(|p| format!("{p:.2e}"))
                .unwrap_or_else(|| "-".into()),
            f.verdict
        );
    }
    if !c.settings.is_empty() {
        let _ = writeln!(s, "\nSettings that changed:");
        for x in c.settings.iter().take(200) {
            let _ = writeln!(s, "  {} {}: {} → {}", x.node, x.setting, x.a, x.b);
        }
        if c.settings.len() > 200 {
            let _ = writeln!(
                s,
                "  ... {} more (--json lists all)",
                c.settings.len() - 200
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_test_matches_the_binomial() {
        // 10 of 10 the same way: 2 / 1024.
        assert!((sign_test(10, 10) - 2.0 / 1024.0).abs() < 1e-12);
        // 8 of 10: 2 × (1 + 10 + 45) / 1024.
        assert!((sign_test(8, 10) - 112.0 / 1024.0).abs() < 1e-12);
        assert_eq!(sign_test(5, 10), 1.0);
        assert_eq!(sign_test(0, 0), 1.0);
        // Large n does not overflow: 6,000 of 10,000 is far below 1e-50.
        assert!(sign_test(6000, 10_000) < 1e-50);
        assert!(sign_test(5000, 10_000) > 0.99);
    }
}
