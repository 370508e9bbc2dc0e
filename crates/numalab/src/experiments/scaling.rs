//! `numalab scaling`: aggregate and per-thread bandwidth for 1..N threads,
//! packed (compact: one node first) vs spread (scatter: one per node in
//! turn), and the contention split of the classic studies.
//!
//! Contention model: each thread streams the same amount of data, so a
//! thread's time is its core time plus a contention time that grows with
//! the number of threads sharing the memory system:
//! `T(n) = T_core + (n - 1) * T_c`. Two thread counts give both parts:
//! `T_core = T(1)`, `T_c = (T(n2) - T(1)) / (n2 - 1)`. The model then
//! predicts `T(n)` (and the per-thread bandwidth `bytes / T(n)`) for core
//! counts nobody ran.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the run after the thread
//! count in progress: `packed` and `spread` then hold the counts run so far
//! (`spread` possibly one shorter).

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::harness::{run_bandwidth, BandwidthRequest, Figure, PagesByArray, WorkerPlan};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::thread_policy::{compact_order, scatter_order};
use crate::placement::{
    check_plan, ArrayPolicies, BufferDemand, MemoryPolicy, PlacementError, Thp,
};
use crate::serde_util::{f64_or_nan, NanF64};
use crate::text::format::plural;
use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;

/// One thread count under one layout.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ScalingPoint {
    pub threads: usize,
    pub cpus: Vec<u32>,
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

/// The contention split and its predictions.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ContentionModel {
    /// Thread counts the model was fitted on.
    pub fitted_on: (usize, usize),
    #[serde(deserialize_with = "f64_or_nan")]
    pub core_seconds: f64,
    /// Extra seconds per pass for each additional thread.
    #[serde(deserialize_with = "f64_or_nan")]
    pub contention_seconds_per_thread: f64,
    /// Share of the time at the larger fitted count that is contention.
    #[serde(deserialize_with = "f64_or_nan")]
    pub contention_share: f64,
    /// (threads, predicted per-thread GB/s, predicted aggregate GB/s).
    #[serde(deserialize_with = "de_predictions")]
    pub predictions: Vec<(usize, f64, f64)>,
}

/// `predictions` with `null` (non-finite) figures read back as NaN.
fn de_predictions<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(usize, f64, f64)>, D::Error> {
    let v = Vec::<(usize, NanF64, NanF64)>::deserialize(d)?;
    Ok(v.into_iter().map(|(n, a, b)| (n, a.0, b.0)).collect())
}

impl ContentionModel {
    /// Fits `T(n) = core + (n-1)*c` from two (threads, seconds) points and
    /// predicts for `predict_for`, given the bytes one thread moves per pass.
    pub fn fit(
        a: (usize, f64),
        b: (usize, f64),
        bytes_per_thread: f64,
        predict_for: &[usize],
    ) -> Option<Self> {
        let ((n1, t1), (n2, t2)) = if a.0 <= b.0 { (a, b) } else { (b, a) };
        if n1 == n2 || t1 <= 0.0 || t2 <= 0.0 {
            return None;
        }
        let c = ((t2 - t1) / (n2 - n1) as f64).max(0.0);
        let core = (t1 - (n1 - 1) as f64 * c).max(f64::MIN_POSITIVE);
        let at = |n: usize| core + (n - 1) as f64 * c;
        let predictions = predict_for
            .iter()
            .map(|&n| {
                let per = bytes_per_thread / at(n) / 1e9;
                (n, per, per * n as f64)
            })
            .collect();
        Some(Self {
            fitted_on: (n1, n2),
            core_seconds: core,
            contention_seconds_per_thread: c,
            contention_share: ((n2 - 1) as f64 * c) / at(n2),
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
    /// Fitted on the packed layout (threads sharing one node's memory first).
    pub model: Option<ContentionModel>,
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
    let model = fit_packed(m, kernel, buffer_bytes, &packed, max);
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
        model,
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
        Ok(ScalingPoint {
            threads: n,
            cpus,
            per_thread_gbps: r.gbps.median / n as f64,
            seconds_per_pass: per_thread_bytes * n as f64 / (r.gbps.median * 1e9),
            gbps: r.gbps,
            verified: r.verification.verified,
            pages_by_array: r.verification.pages_by_array(),
        })
    }
}

/// The contention model of the packed layout, fitted on its smallest and
/// largest thread counts, predicting powers of two up to four times the
/// machine's CPUs; `None` with fewer than two counts run.
fn fit_packed(
    m: &Machine,
    kernel: BandwidthKernel,
    buffer_bytes: usize,
    packed: &[ScalingPoint],
    max: usize,
) -> Option<ContentionModel> {
    let [first, .., last] = packed else {
        return None;
    };
    let bytes_per_thread = kernel.bytes_per_pass(buffer_bytes / 8).program as f64;
    let top = m.allowed_cpus.len().max(max);
    let mut targets: Vec<usize> = vec![1, 2, 4, 8, 16, 32, 64]
        .into_iter()
        .filter(|&t| t <= top.max(2) * 4)
        .collect();
    targets.dedup();
    ContentionModel::fit(
        (first.threads, first.seconds_per_pass),
        (last.threads, last.seconds_per_pass),
        bytes_per_thread,
        &targets,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contention_split_recovers_a_linear_model() {
        // core 1.0 s, +0.5 s per extra thread, 10 GB per thread per pass.
        let m = ContentionModel::fit((1, 1.0), (3, 2.0), 10e9, &[1, 2, 5]).unwrap();
        assert!((m.core_seconds - 1.0).abs() < 1e-12);
        assert!((m.contention_seconds_per_thread - 0.5).abs() < 1e-12);
        assert!((m.contention_share - 0.5).abs() < 1e-12);
        assert_eq!(m.predictions[0].0, 1);
        assert!((m.predictions[0].1 - 10.0).abs() < 1e-9);
        // 2 threads: T = 1.5 s -> 6.67 GB/s per thread, 13.3 aggregate.
        assert!((m.predictions[1].1 - 10.0 / 1.5).abs() < 1e-9);
        assert!((m.predictions[1].2 - 20.0 / 1.5).abs() < 1e-9);
        // 5 threads: T = 3 s.
        assert!((m.predictions[2].1 - 10.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn no_contention_when_time_does_not_grow() {
        let m = ContentionModel::fit((2, 1.0), (1, 1.0), 1e9, &[4]).unwrap();
        assert_eq!(m.contention_seconds_per_thread, 0.0);
        assert_eq!(m.fitted_on, (1, 2));
        assert!((m.predictions[0].2 - 4.0).abs() < 1e-9);
        assert!(ContentionModel::fit((1, 1.0), (1, 2.0), 1e9, &[2]).is_none());
    }
}
