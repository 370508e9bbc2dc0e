//! What the measured placements say: GFLOPS by hop class and by
//! contention, each kernel's sensitivity to placement, whether a non-local
//! placement of lower contention beats the all-local one, and whether
//! level 1 > level 2 > level 3 in sensitivity.

use super::{Kernel, KernelResult, PlacementResult};
use crate::measure::compare::{holm, rank_compare, RankComparison, ALPHA};
use crate::measure::harness::Figure;
use crate::measure::stats::Summary;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// GFLOPS of the placements of one hop class.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HopClass {
    pub class: String,
    pub hops: Vec<Option<u32>>,
    /// Measured placements in it (one per CPU node when folded).
    pub placements: usize,
    pub stands_for: u64,
    /// Median over its placements of their median GFLOPS.
    pub median_gflops: f64,
    pub min_gflops: f64,
    pub max_gflops: f64,
}

/// How much a kernel's speed depends on its placement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sensitivity {
    /// Highest and lowest median GFLOPS over the placements.
    pub best: f64,
    pub worst: f64,
    /// worst / best (1: no effect of placement).
    pub ratio: f64,
    /// best / worst: the sensitivity the finding compares.
    pub sensitivity: f64,
    /// Relative uncertainty of `sensitivity`: the relative half-widths of
    /// the 95% confidence intervals of the best and worst medians, summed
    /// (half the relative spread where an interval is undefined).
    pub noise: f64,
    /// Class of the best and the worst placement.
    pub best_class: String,
    pub worst_class: String,
    /// False on a machine with one memory node: every placement is local.
    pub measurable: bool,
    pub per_hop_class: Vec<HopClass>,
    /// The serial placements by contention, lowest first (the study's
    /// Figure 2 order).
    #[serde(default)]
    pub per_contention: Vec<ContentionGroup>,
}

/// GFLOPS of the serial placements of one contention value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContentionGroup {
    pub contention: f64,
    /// Measured placements with it.
    pub placements: usize,
    /// Placements they stand for.
    pub stands_for: u64,
    pub median_gflops: f64,
    pub min_gflops: f64,
    pub max_gflops: f64,
}

/// Whether a non-local placement of lower contention beats the all-local
/// one (the study's reading of its Figure 2 for DGEMM), by [`CONTENTION_RULE`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContentionFinding {
    /// `holds`, `does not hold` or `cannot tell` with the reason.
    pub verdict: String,
    pub holds: Option<bool>,
    pub rule: String,
    /// Each all-local placement compared, with the placements of lower
    /// contention on the same CPU.
    pub comparisons: Vec<LocalComparison>,
}

/// One non-local placement of lower contention against the all-local one
/// on the same CPU.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LocalComparison {
    pub cpu_node: u32,
    pub local_contention: f64,
    pub local_gflops: f64,
    /// The non-local placement: `A@0 B@1 C@2`.
    pub placement: String,
    pub contention: f64,
    pub gflops: f64,
    /// Its samples against the local one's (ratio non-local / local).
    pub comparison: RankComparison,
    /// Holm-adjusted p-value over all comparisons of the kernel.
    pub p_adjusted: f64,
}

/// The rule of [`ContentionFinding`].
pub const CONTENTION_RULE: &str = "per CPU node, every non-local placement whose contention is below the all-local placement's is compared with it by a Mann–Whitney U test on their GFLOPS samples, p-values adjusted by Holm over all those comparisons of the kernel; 'holds' when one is faster than local at adjusted p < 0.05, 'does not hold' when every one is slower at adjusted p < 0.05, else 'cannot tell'";

/// Whether level 1 > level 2 > level 3 in sensitivity, by [`RULE`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// `holds`, `does not hold`, `cannot tell (inside the noise)` or
    /// `cannot be measured here (...)`.
    pub verdict: String,
    pub holds: Option<bool>,
    pub rule: String,
    /// Per level: the most sensitive kernel run, its sensitivity and noise.
    pub levels: Vec<LevelSensitivity>,
}

/// The sensitivity a level is judged by.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LevelSensitivity {
    pub level: u8,
    pub kernel: Kernel,
    pub sensitivity: f64,
    pub noise: f64,
}

/// The statistical rule of the finding.
pub const RULE: &str = "level i is more sensitive than level j when s_i > s_j * (1 + u_i + u_j), \
    where s = best / worst median GFLOPS over the placements and u its noise (the relative \
    half-widths of the 95% confidence intervals of the best and worst medians, summed); \
    'holds' needs level 1 > level 2 and level 2 > level 3 by this rule, 'does not hold' \
    means a higher level was more sensitive by it, anything else is inside the noise";

/// Relative half-width of a median's uncertainty: its confidence interval,
/// or half its spread where the interval is undefined (few samples).
fn uncertainty(f: &Figure) -> f64 {
    if f.rel_ci.is_finite() {
        f.rel_ci
    } else if f.spread.is_finite() {
        f.spread / 2.0
    } else {
        f64::INFINITY
    }
}

/// One measured placement as the sensitivity sees it.
pub struct Scored<'a> {
    /// Its class: the hop tuple (serial) or the contention range (parallel).
    pub class: String,
    pub hops: Vec<Option<u32>>,
    pub stands_for: u64,
    /// Its contention (serial placements).
    pub contention: Option<f64>,
    pub gflops: &'a Figure,
}

impl<'a> From<&'a PlacementResult> for Scored<'a> {
    fn from(p: &'a PlacementResult) -> Self {
        Scored {
            class: p.class.clone(),
            hops: p.hops.clone(),
            stands_for: p.stands_for,
            contention: p.contention,
            gflops: &p.gflops,
        }
    }
}

/// Contention values are sums of shares of equal-path splits: grouped at
/// a millionth.
fn contention_key(c: f64) -> i64 {
    (c * 1e6).round() as i64
}

/// The serial placements of a kernel grouped by contention, lowest first.
pub fn per_contention(placements: &[Scored]) -> Vec<ContentionGroup> {
    let mut groups: BTreeMap<i64, Vec<&Scored>> = BTreeMap::new();
    for p in placements {
        if let Some(c) = p.contention {
            if p.gflops.median.is_finite() && p.gflops.median > 0.0 {
                groups.entry(contention_key(c)).or_default().push(p);
            }
        }
    }
    groups
        .into_values()
        .map(|ps| {
            let medians: Vec<f64> = ps.iter().map(|p| p.gflops.median).collect();
            let s = Summary::of(&medians);
            ContentionGroup {
                contention: ps[0].contention.unwrap_or(f64::NAN),
                placements: ps.len(),
                stands_for: ps.iter().map(|p| p.stands_for).sum(),
                median_gflops: s.as_ref().map_or(f64::NAN, |s| s.median),
                min_gflops: s.as_ref().map_or(f64::NAN, |s| s.min),
                max_gflops: s.as_ref().map_or(f64::NAN, |s| s.max),
            }
        })
        .collect()
}

/// The placement's operands as `A@0 B@1 C@2`.
pub fn placement_label(p: &PlacementResult) -> String {
    p.operands
        .iter()
        .map(|o| format!("{}@{}", o.name, o.node))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a non-local placement of lower contention beats the all-local
/// one on the same CPU ([`CONTENTION_RULE`]); `None` when no placement is
/// all-local or none has contention values.
pub fn contention_finding(placements: &[PlacementResult]) -> Option<ContentionFinding> {
    let mut found: Vec<(LocalComparison, f64)> = Vec::new();
    let mut locals = 0;
    for local in placements
        .iter()
        .filter(|p| p.operands.iter().all(|o| o.node == p.cpu_node))
    {
        let Some(lc) = local.contention else {
            continue;
        };
        locals += 1;
        for p in placements.iter().filter(|p| {
            p.cpu == local.cpu
                && p.operands.iter().any(|o| o.node != p.cpu_node)
                && p.contention.is_some_and(|c| c < lc - 1e-9)
        }) {
            if let Some(cmp) = rank_compare(&p.gflops_samples, &local.gflops_samples) {
                let p_value = cmp.p_value;
                found.push((
                    LocalComparison {
                        cpu_node: local.cpu_node,
                        local_contention: lc,
                        local_gflops: local.gflops.median,
                        placement: placement_label(p),
                        contention: p.contention.unwrap_or(f64::NAN),
                        gflops: p.gflops.median,
                        comparison: cmp,
                        p_adjusted: f64::NAN,
                    },
                    p_value,
                ));
            }
        }
    }
    if locals == 0 {
        return None;
    }
    let adjusted = holm(&found.iter().map(|f| f.1).collect::<Vec<_>>());
    let mut comparisons: Vec<LocalComparison> = found
        .into_iter()
        .zip(adjusted)
        .map(|((mut c, _), p)| {
            c.p_adjusted = p;
            c
        })
        .collect();
    // Fastest relative to local first.
    comparisons.sort_by(|a, b| b.comparison.ratio.total_cmp(&a.comparison.ratio));
    let faster = comparisons
        .iter()
        .find(|c| c.p_adjusted < ALPHA && c.comparison.ratio > 1.0);
    let all_slower = !comparisons.is_empty()
        && comparisons
            .iter()
            .all(|c| c.p_adjusted < ALPHA && c.comparison.ratio < 1.0);
    let (verdict, holds) = if let Some(c) = faster {
        (
            format!(
                "holds: {} (contention {}) beats all-local (contention {}) on node {}: {}",
                c.placement,
                c.contention,
                c.local_contention,
                c.cpu_node,
                c.comparison.describe()
            ),
            Some(true),
        )
    } else if all_slower {
        (
            "does not hold: every placement of lower contention is slower than all-local".into(),
            Some(false),
        )
    } else if comparisons.is_empty() {
        (
            "cannot tell (no non-local placement of lower contention than all-local was measured with samples)".into(),
            None,
        )
    } else {
        ("cannot tell (inside the noise)".into(), None)
    };
    Some(ContentionFinding {
        verdict,
        holds,
        rule: CONTENTION_RULE.into(),
        comparisons,
    })
}

/// Best, worst and per-class figures of a kernel's placements.
pub fn sensitivity(placements: &[Scored], measurable: bool) -> Option<Sensitivity> {
    let ok: Vec<&Scored> = placements
        .iter()
        .filter(|p| p.gflops.median.is_finite() && p.gflops.median > 0.0)
        .collect();
    let by = |a: &&&Scored, b: &&&Scored| a.gflops.median.total_cmp(&b.gflops.median);
    let best = *ok.iter().max_by(by)?;
    let worst = *ok.iter().min_by(by)?;
    let mut classes: BTreeMap<String, Vec<&Scored>> = BTreeMap::new();
    for p in &ok {
        classes.entry(p.class.clone()).or_default().push(p);
    }
    let per_contention = per_contention(placements);
    let per_hop_class = classes
        .into_iter()
        .map(|(class, ps)| {
            let medians: Vec<f64> = ps.iter().map(|p| p.gflops.median).collect();
            let s = Summary::of(&medians);
            HopClass {
                class,
                hops: ps[0].hops.clone(),
                placements: ps.len(),
                stands_for: ps.iter().map(|p| p.stands_for).sum(),
                median_gflops: s.as_ref().map_or(f64::NAN, |s| s.median),
                min_gflops: s.as_ref().map_or(f64::NAN, |s| s.min),
                max_gflops: s.as_ref().map_or(f64::NAN, |s| s.max),
            }
        })
        .collect();
    Some(Sensitivity {
        best: best.gflops.median,
        worst: worst.gflops.median,
        ratio: worst.gflops.median / best.gflops.median,
        sensitivity: best.gflops.median / worst.gflops.median,
        noise: uncertainty(best.gflops) + uncertainty(worst.gflops),
        best_class: best.class.clone(),
        worst_class: worst.class.clone(),
        measurable,
        per_hop_class,
        per_contention,
    })
}

/// The finding over the kernels' sensitivities (see [`RULE`]).
pub fn finding(kernels: &[KernelResult], memory_nodes: usize) -> Finding {
    let mut levels: Vec<LevelSensitivity> = Vec::new();
    for level in 1..=3u8 {
        let most = kernels
            .iter()
            .filter(|k| k.level == level)
            .filter_map(|k| k.sensitivity.as_ref().map(|s| (k.kernel, s)))
            .max_by(|a, b| a.1.sensitivity.total_cmp(&b.1.sensitivity));
        if let Some((kernel, s)) = most {
            levels.push(LevelSensitivity {
                level,
                kernel,
                sensitivity: s.sensitivity,
                noise: s.noise,
            });
        }
    }
    let (verdict, holds) = if memory_nodes < 2 {
        (
            "cannot be measured here (one memory node: every placement is local)".to_string(),
            None,
        )
    } else if levels.len() < 3 {
        (
            "cannot tell (levels 1, 2 and 3 were not all run)".to_string(),
            None,
        )
    } else {
        let more = |i: &LevelSensitivity, j: &LevelSensitivity| {
            i.sensitivity > j.sensitivity * (1.0 + i.noise + j.noise)
        };
        let (l1, l2, l3) = (&levels[0], &levels[1], &levels[2]);
        if more(l1, l2) && more(l2, l3) {
            ("holds".to_string(), Some(true))
        } else if more(l2, l1) || more(l3, l2) || more(l3, l1) {
            ("does not hold".to_string(), Some(false))
        } else {
            ("cannot tell (inside the noise)".to_string(), None)
        }
    };
    Finding {
        verdict,
        holds,
        rule: RULE.to_string(),
        levels,
    }
}
