//! `numalab pdm --measure K`: K random placements of each contention class
//! run on the live machine with the STREAM kernel, each thread pinned to a
//! CPU of its node and each of its arrays bound to its node, every page
//! checked; GB/s per class, and whether bandwidth falls as contention rises.
//!
//! The trend is judged on the placements, not on the class medians: the
//! Spearman rank correlation between each placement's contention and its
//! median GB/s, with the two-sided t test of zero correlation at 5%
//! (`t = ρ·√((n−2)/(1−ρ²))` against Student's t with `n−2` degrees of
//! freedom). A significant negative ρ is "holds", a significant positive one
//! "does not hold", anything else "cannot tell".

use super::{draw_by_class, DrawnPlacement, PdmError, PdmRequest};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::harness::{run_bandwidth, BandwidthRequest, Figure, PagesByArray, WorkerPlan};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::{median, t_critical, StopRule};
use crate::placement::thread_policy::compact_order;
use crate::placement::{check_plan, ArrayPolicies, BufferDemand, MemoryPolicy, Thp};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most placements per class `--measure` takes.
pub const MAX_PER_CLASS: usize = 1000;

/// What `--measure` runs.
#[derive(Debug, Clone)]
pub struct MeasureRequest {
    /// The STREAM kernel whose arrays are the model's quantities.
    pub kernel: BandwidthKernel,
    /// Placements per class (the study ran 20).
    pub per_class: usize,
    /// Bytes per array.
    pub buffer_bytes: usize,
    /// Stop rule of each placement.
    pub rule: StopRule,
    pub seed: u64,
}

/// One placement run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeasuredPlacement {
    /// `T0@0:a→1,b→2` as the model writes it.
    pub label: String,
    pub contention: f64,
    /// The CPU each thread ran on.
    pub cpus: Vec<u32>,
    /// Aggregate GB/s (program bytes) of all threads.
    pub gbps: Figure,
    /// Threads on their CPUs and every array's pages on its node.
    pub verified: bool,
    /// Each thread's arrays: pages per node.
    #[serde(deserialize_with = "crate::serde_util::pages_by_array_list")]
    pub pages: Vec<PagesByArray>,
}

/// The placements of one class and their GB/s.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MeasuredClass {
    pub class: u64,
    pub low: f64,
    pub high: f64,
    /// The class's share of all placements.
    pub share: f64,
    pub wanted: usize,
    pub placements: Vec<MeasuredPlacement>,
    /// Median, min and max over the placements' medians (`None` without any).
    pub median_gbps: Option<f64>,
    pub min_gbps: Option<f64>,
    pub max_gbps: Option<f64>,
    /// Placements whose threads and pages were where asked.
    pub verified: usize,
}

/// Whether bandwidth falls as contention rises.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Trend {
    /// `holds`, `does not hold` or `cannot tell`.
    pub verdict: String,
    /// Why, in words.
    pub reason: String,
    /// Spearman's ρ between contention and GB/s over the placements.
    pub rho: Option<f64>,
    pub t: Option<f64>,
    /// The 97.5% quantile of Student's t with `placements − 2` degrees.
    pub t_critical: Option<f64>,
    pub placements: usize,
    pub rule: String,
}

/// The outcome of `pdm --measure`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PdmMeasurement {
    pub kernel: BandwidthKernel,
    pub per_class: usize,
    pub buffer_bytes: u64,
    pub seed: u64,
    pub classes: Vec<MeasuredClass>,
    pub trend: Trend,
    pub warnings: Vec<String>,
}

/// `pdm --json`: the model's counts, and with `--measure` the runs.
#[derive(Serialize)]
pub struct PdmReport<'a> {
    #[serde(flatten)]
    pub model: &'a super::PdmResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured: Option<&'a PdmMeasurement>,
}

/// The rule of [`Trend`], as the result states it.
pub const TREND_RULE: &str = "Spearman's rank correlation rho between each placement's contention and its median GB/s; two-sided t test of rho = 0 at 5% (t = rho*sqrt((n-2)/(1-rho^2)), Student's t with n-2 degrees of freedom): significant and negative = holds, significant and positive = does not hold, otherwise cannot tell";

/// Runs `mr.per_class` drawn placements of each class of `req` on the live
/// machine `m`. `progress` hears of each placement before it runs. Stops
/// between placements when cancelled, keeping what was measured.
pub fn measure_classes(
    m: &Machine,
    req: &PdmRequest,
    mr: &MeasureRequest,
    progress: &mut dyn FnMut(&str),
) -> Result<PdmMeasurement, PdmError> {
    check_request(req, mr)?;
    let draws = draw_by_class(m, req, mr.per_class, mr.seed)?;
    let cpus_of = node_cpus(m);
    // Every drawn placement must fit where it puts its arrays (a class of
    // high contention piles them on one node), before anything runs.
    for p in draws.iter().flat_map(|d| &d.placements) {
        let demands: Vec<BufferDemand> = p
            .memory
            .iter()
            .flatten()
            .map(|&n| BufferDemand::new(mr.buffer_bytes, &MemoryPolicy::on_node(n), None))
            .collect();
        check_plan(m, &[demands], "use a smaller --size")
            .map_err(|e| PdmError::Failed(format!("placement {}: {e}", p.label)))?;
    }
    let mut warnings = Vec::new();
    let mut classes = Vec::new();
    let total: usize = draws.iter().map(|d| d.placements.len()).sum();
    let mut done = 0usize;
    for d in draws {
        let examples = d.placements.iter().filter(|p| !p.drawn).count();
        if d.placements.len() < d.wanted || examples > 0 {
            warnings.push(format!(
                "class [{}, {}): {} of {} placements, {examples} of them the exact count's examples rather than random draws ({:.2e}% of all placements: {} uniform draws met it too rarely)",
                d.low,
                d.high,
                d.placements.len(),
                d.wanted,
                d.share * 100.0,
                super::MAX_DRAWS
            ));
        }
        let mut placements = Vec::new();
        for p in &d.placements {
            if cancel::requested() {
                break;
            }
            done += 1;
            progress(&format!("placement {done}/{total}: {}", p.label));
            let (placement, said) = measure_placement(m, req, mr, &cpus_of, p)?;
            warnings.extend(said);
            placements.push(placement);
        }
        let meds: Vec<f64> = placements
            .iter()
            .map(|p| p.gbps.median)
            .filter(|x| x.is_finite())
            .collect();
        classes.push(MeasuredClass {
            class: d.class,
            low: d.low,
            high: d.high,
            share: d.share,
            wanted: d.wanted,
            verified: placements.iter().filter(|p| p.verified).count(),
            median_gbps: median(meds.clone()),
            min_gbps: meds.iter().copied().reduce(f64::min),
            max_gbps: meds.iter().copied().reduce(f64::max),
            placements,
        });
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    let points: Vec<(f64, f64)> = classes
        .iter()
        .flat_map(|c| &c.placements)
        .filter(|p| p.gbps.median.is_finite())
        .map(|p| (p.contention, p.gbps.median))
        .collect();
    let measured_classes = classes.iter().filter(|c| !c.placements.is_empty()).count();
    Ok(PdmMeasurement {
        kernel: mr.kernel,
        per_class: mr.per_class,
        buffer_bytes: mr.buffer_bytes as u64,
        seed: mr.seed,
        classes,
        trend: trend(&points, measured_classes),
        warnings,
    })
}

/// A `--measure` request that can run: the kernel's arrays are the
/// quantities, and a sane count per class.
fn check_request(req: &PdmRequest, mr: &MeasureRequest) -> Result<(), PdmError> {
    let names = mr.kernel.array_names();
    let mut quantity_names: Vec<&str> = req.quantities.iter().map(|q| q.name.as_str()).collect();
    quantity_names.sort_unstable();
    let mut kernel_names = names.to_vec();
    kernel_names.sort_unstable();
    if quantity_names != kernel_names {
        return Err(PdmError::Invalid(format!(
            "--measure runs a STREAM kernel: its quantities must be the arrays of {} ({}); give --kernel instead of --quantities",
            mr.kernel.name(),
            kernel_names.join(", ")
        )));
    }
    if mr.per_class == 0 || mr.per_class > MAX_PER_CLASS {
        return Err(PdmError::Invalid(format!(
            "--measure {}: placements per class (valid: 1 to {MAX_PER_CLASS})",
            mr.per_class
        )));
    }
    Ok(())
}

/// Runs drawn placement `p` with the arrays bound where it puts them: what
/// it measured, and its warnings.
fn measure_placement(
    m: &Machine,
    req: &PdmRequest,
    mr: &MeasureRequest,
    cpus_of: &BTreeMap<u32, Vec<u32>>,
    p: &DrawnPlacement,
) -> Result<(MeasuredPlacement, Vec<String>), PdmError> {
    let cpus = thread_cpus(cpus_of, &p.thread_nodes)?;
    let workers: Vec<WorkerPlan> = cpus
        .iter()
        .zip(&p.memory)
        .map(|(&cpu, nodes)| WorkerPlan {
            cpu,
            policy: ArrayPolicies {
                default: MemoryPolicy::FirstTouch,
                arrays: req
                    .quantities
                    .iter()
                    .zip(nodes)
                    .map(|(q, &n)| (q.name.clone(), MemoryPolicy::on_node(n)))
                    .collect(),
            },
            toucher: None,
        })
        .collect();
    let r = run_bandwidth(
        m,
        &BandwidthRequest {
            kernel: mr.kernel,
            isa: Isa::detect_best(),
            workers,
            buffer_bytes: mr.buffer_bytes,
            thp: Some(Thp::On),
            rule: mr.rule.clone(),
        },
    )
    .map_err(|e| PdmError::Failed(format!("placement {}: {e}", p.label)))?;
    let said = r
        .warnings
        .iter()
        .map(|w| format!("{}: {w}", p.label))
        .collect();
    let pages = r
        .verification
        .workers
        .iter()
        .map(|w| {
            w.buffers
                .iter()
                .filter_map(|b| Some((b.array.clone()?, b.pages_by_node.clone())))
                .collect()
        })
        .collect();
    Ok((
        MeasuredPlacement {
            label: p.label.clone(),
            contention: p.contention,
            cpus,
            gbps: r.gbps,
            verified: r.verification.verified,
            pages,
        },
        said,
    ))
}

/// Allowed CPUs of each node, in compact order.
fn node_cpus(m: &Machine) -> BTreeMap<u32, Vec<u32>> {
    m.nodes
        .iter()
        .map(|n| {
            let allowed = m.allowed_cpus_of(n.os_index);
            (n.os_index, compact_order(m, &allowed))
        })
        .collect()
}

/// A CPU for each thread: the k-th thread of a node on the node's k-th CPU.
fn thread_cpus(cpus_of: &BTreeMap<u32, Vec<u32>>, nodes: &[u32]) -> Result<Vec<u32>, PdmError> {
    let mut used: BTreeMap<u32, usize> = BTreeMap::new();
    nodes
        .iter()
        .map(|&n| {
            let k = used.entry(n).or_insert(0);
            let cpus = cpus_of.get(&n).map(Vec::as_slice).unwrap_or(&[]);
            let cpu = cpus.get(*k).copied().ok_or_else(|| {
                PdmError::Failed(format!(
                    "node {n} has {} allowed CPU(s) for {} threads of a placement",
                    cpus.len(),
                    nodes.iter().filter(|&&x| x == n).count()
                ))
            })?;
            *k += 1;
            Ok(cpu)
        })
        .collect()
}

/// Average ranks (1-based), ties sharing their mean rank.
fn ranks(v: &[f64]) -> Vec<f64> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by(|&a, &b| v[a].total_cmp(&v[b]));
    let mut r = vec![0.0; v.len()];
    let mut i = 0;
    while i < idx.len() {
        let mut j = i;
        while j + 1 < idx.len() && v[idx[j + 1]] == v[idx[i]] {
            j += 1;
        }
        let mean = (i + j) as f64 / 2.0 + 1.0;
        for &k in &idx[i..=j] {
            r[k] = mean;
        }
        i = j + 1;
    }
    r
}

/// Spearman's ρ: Pearson's correlation of the ranks; `None` when either
/// side is constant.
pub fn spearman(points: &[(f64, f64)]) -> Option<f64> {
    let x = ranks(&points.iter().map(|p| p.0).collect::<Vec<_>>());
    let y = ranks(&points.iter().map(|p| p.1).collect::<Vec<_>>());
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(&y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    (sxx > 0.0 && syy > 0.0).then(|| sxy / (sxx * syy).sqrt())
}

/// Judges the trend of GB/s against contention over `points`.
fn trend(points: &[(f64, f64)], classes: usize) -> Trend {
    let n = points.len();
    let mut t = Trend {
        verdict: "cannot tell".into(),
        reason: String::new(),
        rho: None,
        t: None,
        t_critical: None,
        placements: n,
        rule: TREND_RULE.into(),
    };
    if classes < 2 {
        t.reason = format!(
            "{classes} contention class measured: a trend needs at least two (a one-node machine has a single class)"
        );
        return t;
    }
    if n < 4 {
        t.reason = format!("{n} placements measured: the test needs at least four");
        return t;
    }
    let Some(rho) = spearman(points) else {
        t.reason = "every placement gave the same bandwidth or contention".into();
        return t;
    };
    let df = n - 2;
    let stat = if rho.abs() >= 1.0 {
        f64::INFINITY * rho.signum()
    } else {
        rho * (df as f64 / (1.0 - rho * rho)).sqrt()
    };
    let crit = t_critical(df);
    t.rho = Some(rho);
    t.t = Some(stat).filter(|x| x.is_finite());
    t.t_critical = Some(crit);
    if stat.abs() <= crit {
        t.reason = format!(
            "rho {rho:.2} over {n} placements is not significant (|t| {:.2} <= {crit:.2})",
            stat.abs()
        );
    } else if rho < 0.0 {
        t.verdict = "holds".into();
        t.reason = format!(
            "rho {rho:.2} over {n} placements: bandwidth falls as contention rises (|t| {:.2} > {crit:.2})",
            stat.abs()
        );
    } else {
        t.verdict = "does not hold".into();
        t.reason = format!(
            "rho {rho:.2} over {n} placements: bandwidth rises with contention (t {stat:.2} > {crit:.2})"
        );
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spearman_uses_ranks_and_shares_ties() {
        assert_eq!(ranks(&[3.0, 1.0, 3.0, 2.0]), vec![3.5, 1.0, 3.5, 2.0]);
        let falling = [(1.0, 9.0), (2.0, 7.0), (3.0, 4.0), (4.0, 1.0)];
        assert!((spearman(&falling).unwrap() + 1.0).abs() < 1e-12);
        // Monotone but not linear: still a perfect rank correlation.
        let curved = [(1.0, 1.0), (2.0, 4.0), (3.0, 9.0), (4.0, 100.0)];
        assert!((spearman(&curved).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(spearman(&[(1.0, 2.0), (2.0, 2.0), (3.0, 2.0)]), None);
    }

    #[test]
    fn the_trend_needs_two_classes_and_a_significant_rho() {
        let one = trend(&[(2.0, 5.0); 10], 1);
        assert_eq!(one.verdict, "cannot tell");
        assert!(
            one.reason.starts_with("1 contention class measured"),
            "{}",
            one.reason
        );
        // 20 placements whose bandwidth falls with contention, some noise.
        let pts: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                (
                    (i / 5) as f64 + 1.0,
                    40.0 - (i / 5) as f64 * 5.0 + (i % 5) as f64 * 0.3,
                )
            })
            .collect();
        let down = trend(&pts, 4);
        assert_eq!(down.verdict, "holds", "{}", down.reason);
        assert!(down.rho.unwrap() < -0.9);
        assert_eq!(down.t_critical, Some(t_critical(18)));
        let up: Vec<(f64, f64)> = pts.iter().map(|&(c, g)| (c, 80.0 - g)).collect();
        assert_eq!(trend(&up, 4).verdict, "does not hold");
        // Alternating bandwidth: no trend.
        let flat: Vec<(f64, f64)> = (0..20)
            .map(|i| ((i / 5) as f64, if i % 2 == 0 { 10.0 } else { 11.0 }))
            .collect();
        let f = trend(&flat, 4);
        assert_eq!(f.verdict, "cannot tell");
        assert!(f.reason.contains("is not significant"), "{}", f.reason);
    }

    #[test]
    fn threads_of_one_node_take_its_cpus_in_turn() {
        let cpus: BTreeMap<u32, Vec<u32>> = [(0, vec![0, 1]), (1, vec![2, 3]), (4, vec![])]
            .into_iter()
            .collect();
        assert_eq!(thread_cpus(&cpus, &[1, 0, 1]).unwrap(), vec![2, 0, 3]);
        assert_eq!(
            thread_cpus(&cpus, &[0, 0, 0]).unwrap_err().to_string(),
            "node 0 has 2 allowed CPU(s) for 3 threads of a placement"
        );
    }
}
