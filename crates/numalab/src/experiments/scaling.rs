//! `numalab scaling`: aggregate and per-thread bandwidth for 1..N threads,
//! packed (compact: one node first) vs spread (scatter: one per node in
//! turn), and the contention split of the classic studies.
//!
//! Contention split ([`crate::experiments::extrapolate`]), as the
//! Cray/NERSC study made it: within ONE node, from one thread and two
//! threads on that node's cores (the packed layout's first two points when
//! they share a node), `T(k) = core + k * C` per pass. The one-core time is
//! the mean of each core of the pair run alone, as the study ran its
//! single-core reference, so that a pair whose cores differ (a busier
//! core, a cache or frequency domain of its own) is not judged by its
//! first core only. Fitting across nodes
//! would dilute the contention a core sees, so spread points never enter
//! it. The split then projects the time per pass (and the per-core
//! bandwidth `bytes / T`) to more cores per node and to a memory system
//! with twice the bandwidth.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the run after the thread
//! count in progress: `packed` and `spread` then hold the counts run so far
//! (`spread` possibly one shorter).

use crate::experiments::extrapolate::{CoreContention, TimedPoint};
use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::harness::{run_bandwidth, BandwidthRequest, Figure, PagesByArray, WorkerPlan};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::thread_policy::{compact_order, scatter_order};
use crate::placement::{
    check_plan, ArrayPolicies, BufferDemand, MemoryPolicy, PlacementError, Thp,
};
use crate::serde_util::f64_or_nan;
use crate::text::format::plural;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One thread count under one layout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScalingPoint {
    pub threads: usize,
    pub cpus: Vec<u32>,
    /// The NUMA nodes of `cpus`, ascending (results before this field have
    /// none).
    #[serde(default)]
    pub nodes: Vec<u32>,
    /// Aggregate GB/s (program bytes).
    pub gbps: Figure,
    /// Aggregate divided by threads.
    #[serde(deserialize_with = "f64_or_nan")]
    pub per_thread_gbps: f64,
    /// Seconds one thread takes for one pass over its buffers (slowest thread).
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds_per_pass: f64,
    pub verified: bool,
    /// Kernels of several arrays: each array's pages per node, summed over
    /// the threads.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        deserialize_with = "crate::serde_util::pages_by_array"
    )]
    pub pages_by_array: PagesByArray,
}

/// The core + contention split within one node and its projections.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ScalingModel {
    /// Where the split was fitted: one node, its CPUs, 1 and 2 threads.
    pub fitted_on: FittedOn,
    /// Seconds per pass in the core.
    #[serde(deserialize_with = "f64_or_nan")]
    pub core_seconds: f64,
    /// Seconds per pass of contention at one core per node.
    #[serde(deserialize_with = "f64_or_nan")]
    pub contention_seconds: f64,
    /// Share of the time with both fitted threads busy that is contention.
    #[serde(deserialize_with = "f64_or_nan")]
    pub contention_share: f64,
    /// Projections by cores per node and bandwidth ratio.
    pub predictions: Vec<ScalingPrediction>,
}

/// The packed points the split was fitted on.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FittedOn {
    pub node: u32,
    pub cpus: Vec<u32>,
    /// Threads at each fitted point (1 and 2).
    pub threads: Vec<usize>,
    /// Each core of the pair run alone: the one-core time of the split is
    /// their mean (results before this field fitted the first core only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alone: Vec<AloneRun>,
}

/// One core of the fitted pair running the kernel alone.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct AloneRun {
    pub cpu: u32,
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds_per_pass: f64,
}

/// One projection: seconds per pass and the per-core bandwidth that means.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ScalingPrediction {
    pub cores: usize,
    #[serde(deserialize_with = "f64_or_nan")]
    pub bandwidth_ratio: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds: f64,
    /// Bytes one core moves per pass over `seconds`, in GB/s.
    #[serde(deserialize_with = "f64_or_nan")]
    pub per_core_gbps: f64,
}

/// Bandwidth ratios every projection is made at: this memory system, and
/// one with twice its bandwidth.
pub const PROJECTED_RATIOS: [f64; 2] = [1.0, 2.0];

impl ScalingModel {
    /// Splits the packed points `one` (1 thread) and `two` (2 threads, on
    /// the same node) with [`CoreContention::fit`] and projects to
    /// `cores` per node at [`PROJECTED_RATIOS`]; the error says why there
    /// is no split. `others_alone` are 1-thread runs on the pair's other
    /// core: the one-core time is the mean over every core of the pair run
    /// alone (`one` among them).
    pub fn fit(
        node: u32,
        one: &ScalingPoint,
        others_alone: &[&ScalingPoint],
        two: &ScalingPoint,
        bytes_per_thread: f64,
        cores: &[usize],
    ) -> Result<Self, String> {
        let alone: Vec<AloneRun> = std::iter::once(one)
            .chain(others_alone.iter().copied())
            .filter_map(|p| {
                Some(AloneRun {
                    cpu: *p.cpus.first()?,
                    seconds_per_pass: p.seconds_per_pass,
                })
            })
            .collect();
        let one_core = alone.iter().map(|a| a.seconds_per_pass).sum::<f64>() / alone.len() as f64;
        let split = CoreContention::fit(&[
            TimedPoint {
                cores: one.threads,
                seconds: one_core,
                per_core_bandwidth: None,
            },
            TimedPoint {
                cores: two.threads,
                seconds: two.seconds_per_pass,
                per_core_bandwidth: None,
            },
        ])?;
        let predictions = cores
            .iter()
            .flat_map(|&k| PROJECTED_RATIOS.map(|r| split.predict(k, r)))
            .map(|p| ScalingPrediction {
                cores: p.cores,
                bandwidth_ratio: p.bandwidth_ratio,
                seconds: p.seconds,
                per_core_gbps: bytes_per_thread / p.seconds / 1e9,
            })
            .collect();
        Ok(Self {
            fitted_on: FittedOn {
                node,
                cpus: two.cpus.clone(),
                threads: vec![one.threads, two.threads],
                alone,
            },
            core_seconds: split.core_seconds,
            contention_seconds: split.contention_seconds,
            contention_share: split.contention_share(two.threads),
            predictions,
        })
    }
}

/// The outcome of [`run_scaling`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScalingResult {
    pub kernel: BandwidthKernel,
    pub buffer_bytes: u64,
    /// Where every thread's arrays were placed, when not local to it:
    /// a policy, or one per array (`a=bind:0 b=local`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<String>,
    pub packed: Vec<ScalingPoint>,
    pub spread: Vec<ScalingPoint>,
    /// The split's single-core reference on the pair's second core: one
    /// thread alone on the second CPU of the 2-thread packed point, when
    /// both lie on one node ([`pair_reference_cpu`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alone: Vec<ScalingPoint>,
    /// The core + contention split within one node (packed, 1 and 2 threads).
    #[serde(default)]
    pub model: Option<ScalingModel>,
    /// Why there is no split, when `model` is `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_note: Option<String>,
    pub warnings: Vec<String>,
}

/// Runs 1..=max_threads threads packed and spread over the allowed CPUs.
#[allow(clippy::too_many_arguments)]
pub fn run_scaling(
    m: &Machine,
    kernel: BandwidthKernel,
    isa: Isa,
    buffer_bytes: usize,
    max_threads: usize,
    rule: &StopRule,
    progress: &mut dyn FnMut(&str),
) -> Result<ScalingResult, PlacementError> {
    let counts: Vec<usize> = (1..=max_threads).collect();
    run_scaling_at(m, kernel, isa, buffer_bytes, &counts, rule, progress)
}

/// [`run_scaling`] at these thread counts only (sorted, duplicates and
/// counts beyond the allowed CPUs dropped): a large machine measured at
/// 1, 2, 4, ... and at multiples of a node's CPUs instead of every count.
#[allow(clippy::too_many_arguments)]
pub fn run_scaling_at(
    m: &Machine,
    kernel: BandwidthKernel,
    isa: Isa,
    buffer_bytes: usize,
    counts: &[usize],
    rule: &StopRule,
    progress: &mut dyn FnMut(&str),
) -> Result<ScalingResult, PlacementError> {
    let local = ArrayPolicies::from(MemoryPolicy::Local);
    run_scaling_placed(m, kernel, isa, buffer_bytes, counts, &local, rule, progress)
}

/// [`run_scaling_at`] with every thread's arrays placed by `arrays` (one
/// policy, or one per array) instead of local to each thread.
#[allow(clippy::too_many_arguments)]
pub fn run_scaling_placed(
    m: &Machine,
    kernel: BandwidthKernel,
    isa: Isa,
    buffer_bytes: usize,
    counts: &[usize],
    arrays: &ArrayPolicies,
    rule: &StopRule,
    progress: &mut dyn FnMut(&str),
) -> Result<ScalingResult, PlacementError> {
    let packed_order = compact_order(m, &m.allowed_cpus);
    let spread_order = scatter_order(m, &m.allowed_cpus);
    let mut counts: Vec<usize> = counts
        .iter()
        .copied()
        .filter(|&n| n >= 1 && n <= packed_order.len())
        .collect();
    counts.sort_unstable();
    counts.dedup();
    let Some(&max) = counts.last() else {
        return Err(PlacementError::Invalid("no allowed CPU".into()));
    };
    // One phase per point: each thread's arrays, where `arrays` puts them.
    let phases: Vec<Vec<BufferDemand>> = counts
        .iter()
        .flat_map(|&n| [&packed_order[..n], &spread_order[..n]])
        .map(|cpus| {
            cpus.iter()
                .flat_map(|&cpu| {
                    kernel.array_names().iter().map(move |name| {
                        BufferDemand::new(buffer_bytes, arrays.of(name), Some(cpu))
                    })
                })
                .collect()
        })
        .collect();
    check_plan(m, &phases, "use a smaller --size or fewer threads")?;
    let mut run = Points {
        m,
        kernel,
        isa,
        buffer_bytes,
        arrays,
        rule,
        progress,
        warnings: Vec::new(),
    };
    let mut packed = Vec::new();
    let mut spread = Vec::new();
    let mut alone = Vec::new();
    for &n in &counts {
        if cancel::requested() {
            break;
        }
        packed.push(run.point(&packed_order, n, "packed")?);
        // With one node, or one thread, spread is the same placement.
        if cancel::requested() && n > 1 {
            break;
        }
        if n == 1 || packed_order[..n] == spread_order[..n] {
            let same = packed.last().cloned();
            spread.extend(same);
        } else {
            spread.push(run.point(&spread_order, n, "spread")?);
        }
    }
    if let Some(cpu) = pair_reference_cpu(m, &packed_order, &counts) {
        if !cancel::requested() {
            alone.push(run.point(&[cpu], 1, &format!("alone, CPU {cpu},"))?);
        }
    }
    let (model, model_note) = match fit_packed(m, kernel, buffer_bytes, &packed, &alone, max) {
        Ok(model) => (Some(model), None),
        Err(why) => (None, Some(why)),
    };
    let mut warnings = run.warnings;
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    let local = arrays.is_uniform() && arrays.default == MemoryPolicy::Local;
    Ok(ScalingResult {
        kernel,
        buffer_bytes: buffer_bytes as u64,
        memory: (!local).then(|| arrays.to_string()),
        packed,
        spread,
        alone,
        model,
        model_note,
        warnings,
    })
}

/// The measurements of a scaling run: what every point shares, and the
/// warnings of the points run so far.
struct Points<'a> {
    m: &'a Machine,
    kernel: BandwidthKernel,
    isa: Isa,
    buffer_bytes: usize,
    arrays: &'a ArrayPolicies,
    rule: &'a StopRule,
    progress: &'a mut dyn FnMut(&str),
    warnings: Vec<String>,
}

impl Points<'_> {
    /// The first `n` CPUs of `order` streaming their local buffers.
    fn point(
        &mut self,
        order: &[u32],
        n: usize,
        layout: &str,
    ) -> Result<ScalingPoint, PlacementError> {
        (self.progress)(&format!("{layout} {}", plural(n, "thread", "threads")));
        let cpus: Vec<u32> = order[..n].to_vec();
        let r = run_bandwidth(
            self.m,
            &BandwidthRequest {
                kernel: self.kernel,
                isa: self.isa,
                workers: cpus
                    .iter()
                    .map(|&cpu| WorkerPlan {
                        cpu,
                        policy: self.arrays.clone(),
                        toucher: None,
                    })
                    .collect(),
                buffer_bytes: self.buffer_bytes,
                thp: Some(Thp::On),
                rule: self.rule.clone(),
            },
        )?;
        self.warnings
            .extend(r.warnings.iter().map(|w| format!("{layout} {n}: {w}")));
        let per_thread_bytes = r.bytes_per_pass.program as f64 / n as f64;
        let mut nodes: Vec<u32> = cpus.iter().filter_map(|&c| self.m.node_of_cpu(c)).collect();
        nodes.sort_unstable();
        nodes.dedup();
        Ok(ScalingPoint {
            threads: n,
            cpus,
            nodes,
            per_thread_gbps: r.gbps.median / n as f64,
            seconds_per_pass: per_thread_bytes * n as f64 / (r.gbps.median * 1e9),
            gbps: r.gbps,
            verified: r.verification.verified,
            pages_by_array: r.verification.pages_by_array(),
        })
    }
}

/// The CPU the split's single-core reference also runs on: the second CPU
/// of the packed order, when 1 and 2 threads are among `counts` and the
/// first two packed CPUs share a node (the pair the split is fitted on).
pub fn pair_reference_cpu(m: &Machine, packed_order: &[u32], counts: &[usize]) -> Option<u32> {
    if !(counts.contains(&1) && counts.contains(&2)) {
        return None;
    }
    let (&first, &second) = (packed_order.first()?, packed_order.get(1)?);
    let node = m.node_of_cpu(first)?;
    (m.node_of_cpu(second) == Some(node)).then_some(second)
}

/// The split of the packed layout within its first node: its 1- and
/// 2-thread points, which must both lie on that node, with the pair's
/// second core alone (`alone`, when it was run), projected to 1, 2, 4, ...
/// up to four times the largest count run; why not, otherwise.
fn fit_packed(
    m: &Machine,
    kernel: BandwidthKernel,
    buffer_bytes: usize,
    packed: &[ScalingPoint],
    alone: &[ScalingPoint],
    max: usize,
) -> Result<ScalingModel, String> {
    let first_node = packed
        .first()
        .and_then(|p| p.cpus.first())
        .and_then(|&c| m.node_of_cpu(c));
    let Some(node) = first_node else {
        return Err("no packed point was run".into());
    };
    let on_node = m.allowed_cpus_of(node).len();
    if on_node < 2 {
        return Err(format!(
            "the split needs 2 threads on one node, and node {node} (the first packed) has {on_node} allowed CPU"
        ));
    }
    let point = |n: usize| packed.iter().find(|p| p.threads == n);
    let (Some(one), Some(two)) = (point(1), point(2)) else {
        return Err(
            "the split needs the 1- and 2-thread packed points, and they were not both run".into(),
        );
    };
    if two.cpus.iter().any(|&c| m.node_of_cpu(c) != Some(node)) {
        return Err(format!(
            "the 2-thread packed point ran on CPUs {:?}, not all on node {node}",
            two.cpus
        ));
    }
    let bytes_per_thread = kernel.bytes_per_pass(buffer_bytes / 8).program as f64;
    let top = m.allowed_cpus.len().max(max).max(2) * 4;
    let cores: Vec<usize> = (0..)
        .map(|k| 1usize << k)
        .take_while(|&c| c <= top)
        .collect();
    let second: Vec<&ScalingPoint> = alone
        .iter()
        .filter(|p| p.cpus.len() == 1 && two.cpus.get(1) == p.cpus.first())
        .collect();
    ScalingModel::fit(node, one, &second, two, bytes_per_thread, &cores)
        .map_err(|e| format!("no split within node {node}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(threads: usize, cpus: Vec<u32>, seconds: f64) -> ScalingPoint {
        ScalingPoint {
            threads,
            cpus,
            nodes: Vec::new(),
            gbps: Figure {
                median: 1.0,
                best: 1.0,
                min: 1.0,
                max: 1.0,
                spread: 0.0,
                rel_ci: 0.0,
            },
            per_thread_gbps: 0.0,
            seconds_per_pass: seconds,
            verified: true,
            pages_by_array: PagesByArray::new(),
        }
    }

    #[test]
    fn the_split_within_one_node_follows_the_study() {
        // 160 s alone, 230 s with two threads: 90 s core + 70 s contention.
        let m = ScalingModel::fit(
            0,
            &point(1, vec![0], 160.0),
            &[],
            &point(2, vec![0, 1], 230.0),
            1.6e11,
            &[1, 2, 4],
        )
        .unwrap();
        assert!((m.core_seconds - 90.0).abs() < 1e-9, "{m:?}");
        assert!((m.contention_seconds - 70.0).abs() < 1e-9, "{m:?}");
        assert_eq!(m.fitted_on.threads, vec![1, 2]);
        assert_eq!(m.fitted_on.cpus, vec![0, 1]);
        let at = |k: usize, r: f64| {
            m.predictions
                .iter()
                .find(|p| p.cores == k && p.bandwidth_ratio == r)
                .unwrap()
        };
        assert!((at(4, 1.0).seconds - 370.0).abs() < 1e-9);
        assert!((at(2, 2.0).seconds - 160.0).abs() < 1e-9);
        assert!((at(1, 1.0).per_core_gbps - 1.0).abs() < 1e-9);
        assert_eq!(m.predictions.len(), 6);
    }

    #[test]
    fn the_first_node_of_the_quartet_fits_and_a_one_cpu_node_says_why() {
        let q = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let order = crate::placement::thread_policy::compact_order(&q, &q.allowed_cpus);
        let packed = [
            point(1, order[..1].to_vec(), 1.0),
            point(2, order[..2].to_vec(), 1.5),
        ];
        let m = fit_packed(&q, BandwidthKernel::Read, 1 << 20, &packed, &[], 2).unwrap();
        assert_eq!(m.fitted_on.node, 0);
        assert!((m.core_seconds - 0.5).abs() < 1e-9);
        // Two threads on two nodes are not a split within one node.
        let across = [point(1, vec![0], 1.0), point(2, vec![0, 2], 1.5)];
        let e = fit_packed(&q, BandwidthKernel::Read, 1 << 20, &across, &[], 2).unwrap_err();
        assert!(e.contains("not all on node 0"), "{e}");
        let e = fit_packed(&q, BandwidthKernel::Read, 1 << 20, &packed[..1], &[], 1).unwrap_err();
        assert!(e.contains("1- and 2-thread packed points"), "{e}");
    }

    /// The study's single-core reference ran on each core of the pair
    /// alone: with the first core at 150 s and the second at 170 s alone,
    /// the one-core time is their mean, 160 s, and 230 s with both busy
    /// splits into 90 s core and 70 s contention, as the study's figures.
    /// A run on some other CPU is not the pair's and is left out.
    #[test]
    fn the_one_core_time_is_the_mean_of_each_core_of_the_pair_alone() {
        let q = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let order = crate::placement::thread_policy::compact_order(&q, &q.allowed_cpus);
        let (a, b) = (order[0], order[1]);
        let packed = [point(1, vec![a], 150.0), point(2, vec![a, b], 230.0)];
        let alone = [point(1, vec![b], 170.0), point(1, vec![order[2]], 500.0)];
        let m = fit_packed(&q, BandwidthKernel::Read, 1 << 20, &packed, &alone, 2).unwrap();
        assert!((m.core_seconds - 90.0).abs() < 1e-9, "{m:?}");
        assert!((m.contention_seconds - 70.0).abs() < 1e-9, "{m:?}");
        let runs: Vec<(u32, f64)> = m
            .fitted_on
            .alone
            .iter()
            .map(|r| (r.cpu, r.seconds_per_pass))
            .collect();
        assert_eq!(runs, vec![(a, 150.0), (b, 170.0)]);
        // Without the second core's run, the first core alone decides.
        let m = fit_packed(&q, BandwidthKernel::Read, 1 << 20, &packed, &[], 2).unwrap();
        assert!((m.core_seconds - 70.0).abs() < 1e-9, "{m:?}");
        assert_eq!(m.fitted_on.alone.len(), 1);
    }

    /// The reference runs on the packed order's second CPU when it shares
    /// the first one's node and both 1 and 2 threads are measured.
    #[test]
    fn the_pair_reference_is_the_second_packed_cpu_on_the_first_node() {
        let q = crate::machine::fixture("qemu-quartet-4n2c-ring.xml");
        let order = crate::placement::thread_policy::compact_order(&q, &q.allowed_cpus);
        assert_eq!(pair_reference_cpu(&q, &order, &[1, 2, 4]), Some(order[1]));
        assert_eq!(q.node_of_cpu(order[1]), q.node_of_cpu(order[0]));
        assert_eq!(pair_reference_cpu(&q, &order, &[1, 4]), None);
        assert_eq!(pair_reference_cpu(&q, &order, &[2, 4]), None);
        // The first two CPUs on two nodes: no pair within a node.
        let across = [order[0], order[2]];
        assert_eq!(pair_reference_cpu(&q, &across, &[1, 2]), None);
    }
}
