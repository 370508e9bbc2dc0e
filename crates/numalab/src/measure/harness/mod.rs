//! The harness: pinned workers with placed, verified buffers, started
//! together at a barrier, each timing itself; repeated under a [`StopRule`].
//!
//! Aggregate bandwidth is the total bytes of all workers divided by the
//! slowest worker's time (the classic convention: the job is done when the
//! last worker is), or with [`Aggregate::Sum`] the sum of each worker's own
//! rate (independent programs). Per-worker figures are kept.
//!
//! [`run_bandwidth_with`] adds what the canonical workloads of
//! `numalab policies` need: unpinned workers (the scheduler places and may
//! move them; every CPU they are seen on is recorded) and one initializer
//! thread that touches every worker's data before the workers start.

mod bandwidth;
mod latency;

use super::kernels::{BandwidthKernel, ByteCount, Isa};
use super::memory_traffic::MemoryTraffic;
use super::stats::{Better, Measurement, StopRule, Summary};
use crate::machine::Machine;
use crate::placement::{
    sys, ArrayPolicies, MemoryPolicy, PlacedBuffer, PlacementError, Realization, Thp,
};
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

pub use bandwidth::{run_bandwidth, run_bandwidth_with};
pub use latency::{core_ghz, run_latency, LatencyRequest, LatencyResult};
pub(crate) use latency::{pinned_buffer, warm_chase};

/// Shortest time one sample should take: below this, timer resolution and
/// barrier skew dominate.
const MIN_SAMPLE_SECONDS: f64 = 0.02;

/// The seed of every latency chase: the same buffer size and pattern give
/// the same order in every run.
pub(crate) const CHASE_SEED: u64 = 0x5eed_1234;

/// Where one buffer is and whether that is what was asked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BufferCheck {
    /// The kernel array this buffer is (`a`, `b`, `c`: see
    /// [`BandwidthKernel::array_names`]); absent for one-buffer results.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub array: Option<String>,
    pub policy: String,
    pub realization: Realization,
    pub thp: String,
    pub bytes: u64,
    pub page_size: usize,
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
    pub untouched_pages: u64,
    pub expected_nodes: Option<IdSet>,
    /// CPU the thread that first touched the pages ran on.
    pub toucher_cpu: Option<u32>,
    pub verified: bool,
    pub problems: Vec<String>,
}

/// One worker's placement and figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The CPU the worker was pinned to; for an unpinned worker (`pinned`
    /// false), the CPU it started on.
    pub requested_cpu: u32,
    /// CPU seen by the worker at the start and end of the run; for an
    /// unpinned worker, every CPU it was seen on (sorted).
    pub seen_cpus: Vec<u32>,
    pub pinned: bool,
    /// Unpinned workers: how often the worker was seen on another CPU than at
    /// its previous look (looks around each buffer's setup and after each pass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migrations: Option<u64>,
    pub node: Option<u32>,
    pub buffers: Vec<BufferCheck>,
    /// The worker's own bandwidth (program bytes, GB/s) per sample.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub gbps: Vec<f64>,
    pub verified: bool,
}

impl WorkerReport {
    /// A worker pinned to `cpu` with one buffer, seen on the CPU the
    /// calling thread runs on now.
    pub(crate) fn pinned(m: &Machine, cpu: u32, check: BufferCheck) -> Self {
        WorkerReport {
            requested_cpu: cpu,
            seen_cpus: sys::current_cpu().into_iter().collect(),
            pinned: true,
            migrations: None,
            node: m.node_of_cpu(cpu),
            verified: check.verified,
            buffers: vec![check],
            gbps: Vec::new(),
        }
    }
}

/// The placement proof attached to every result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verification {
    pub verified: bool,
    pub workers: Vec<WorkerReport>,
    pub problems: Vec<String>,
}

/// Pages per node of each named array, summed over the workers.
pub type PagesByArray = BTreeMap<String, BTreeMap<u32, u64>>;

impl Verification {
    /// Each named array's pages per node, summed over the workers (empty for
    /// one-array kernels).
    pub fn pages_by_array(&self) -> PagesByArray {
        let mut out = PagesByArray::new();
        for b in self.workers.iter().flat_map(|w| &w.buffers) {
            if let Some(name) = &b.array {
                let e = out.entry(name.clone()).or_default();
                for (n, p) in &b.pages_by_node {
                    *e.entry(*n).or_insert(0) += p;
                }
            }
        }
        out
    }

    /// The warning of a result whose placement did not verify.
    pub(crate) fn warning(&self) -> Option<String> {
        (!self.verified).then(|| format!("placement did not verify: {}", self.problems.join("; ")))
    }
}

/// One worker of a bandwidth run: its CPU and its arrays' memory policies.
#[derive(Debug, Clone)]
pub struct WorkerPlan {
    pub cpu: u32,
    /// One policy for every array, or one per array (`a=bind:0,b=bind:1`).
    pub policy: ArrayPolicies,
    /// CPU of the thread that first touches the buffers; `None` = the worker itself.
    pub toucher: Option<u32>,
}

impl WorkerPlan {
    /// One worker on each CPU, all with `policy`, each touching its own
    /// buffers.
    pub fn on_each(cpus: &[u32], policy: &MemoryPolicy) -> Vec<WorkerPlan> {
        cpus.iter()
            .map(|&cpu| WorkerPlan {
                cpu,
                policy: policy.clone().into(),
                toucher: None,
            })
            .collect()
    }
}

/// A bandwidth measurement request.
#[derive(Debug, Clone)]
pub struct BandwidthRequest {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    pub workers: Vec<WorkerPlan>,
    /// Bytes per buffer (each worker has `kernel.arrays()` buffers).
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    pub rule: StopRule,
}

/// How the workers' figures add up to the aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Aggregate {
    /// All workers' bytes over the slowest worker's time: one program, done
    /// when its last thread is.
    #[default]
    Slowest,
    /// The sum of each worker's own rate: independent programs, each at its
    /// own pace.
    Sum,
}

/// What a run does beyond pinned workers touching their own buffers.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Workers are not pinned: each may run on any CPU of this set (the
    /// scheduler chooses and may move it), touches its own buffers wherever it
    /// runs, and records every CPU it is seen on. First-touch and local pages
    /// are expected on the nodes of the CPUs it was seen on while touching.
    /// `WorkerPlan::cpu` and `toucher` are ignored.
    pub unpinned: Option<IdSet>,
    /// One thread pinned to this CPU allocates, touches and initializes every
    /// worker's buffers, one after another, before the workers start (a
    /// program whose main thread initializes all data). Overrides
    /// `WorkerPlan::toucher`.
    pub initializer: Option<u32>,
    pub aggregate: Aggregate,
}

/// Figures of one quantity: median and best plus the full summary (`null`
/// in JSON, NaN here, without data).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Figure {
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub best: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub min: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub spread: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub rel_ci: f64,
}

impl Figure {
    /// Figures of a summary in the direction `better`, scaled by `scale`.
    pub fn of(s: &Summary, better: Better, scale: f64) -> Self {
        Self {
            median: s.median * scale,
            best: s.best(better) * scale,
            min: s.min * scale,
            max: s.max * scale,
            spread: s.spread,
            rel_ci: s.rel_ci,
        }
    }
}

/// The outcome of a bandwidth run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BandwidthResult {
    pub kernel: BandwidthKernel,
    pub isa: Isa,
    pub threads: usize,
    pub buffer_bytes: u64,
    pub passes_per_sample: usize,
    pub aggregate: Aggregate,
    /// Bytes of one pass of all workers, counted both ways.
    pub bytes_per_pass: ByteCount,
    /// Program bytes (STREAM convention) per second, 1e9 B/s.
    pub gbps: Figure,
    /// Bytes the memory system moves (write-allocate included), 1e9 B/s:
    /// assumed from the kernel's loop, not counted.
    pub memory_gbps: Figure,
    /// Memory bytes counted by the memory controllers over all samples
    /// (warm-up included), or why they are assumed.
    #[serde(default)]
    pub memory_traffic: MemoryTraffic,
    pub measurement: Measurement,
    pub warnings: Vec<String>,
    pub verification: Verification,
}

impl BandwidthResult {
    /// Pools a later run of the same cell into this one (interleaved
    /// rounds): its samples join these, the figures are those of the pooled
    /// samples, and its placement problems and warnings are kept, marked
    /// with `round`.
    pub fn absorb(&mut self, later: BandwidthResult, round: usize) {
        let scale = if self.gbps.median > 0.0 {
            self.memory_gbps.median / self.gbps.median
        } else {
            1.0
        };
        let m = &mut self.measurement;
        m.samples.extend(later.measurement.samples);
        m.warmup_samples.extend(later.measurement.warmup_samples);
        m.elapsed_s += later.measurement.elapsed_s;
        m.non_finite += later.measurement.non_finite;
        if let Some(s) = Summary::of(&m.samples) {
            m.summary = s;
        }
        self.gbps = Figure::of(&m.summary, Better::Higher, 1.0);
        self.memory_gbps = Figure::of(&m.summary, Better::Higher, scale);
        self.memory_traffic.pool(later.memory_traffic);
        for w in later.warnings {
            if !self.warnings.contains(&w) {
                self.warnings.push(w);
            }
        }
        let v = &mut self.verification;
        v.verified &= later.verification.verified;
        v.problems.extend(
            later
                .verification
                .problems
                .into_iter()
                .map(|p| format!("round {round}: {p}")),
        );
    }
}

pub(crate) fn check_buffer(
    m: &Machine,
    policy: &MemoryPolicy,
    buf: &PlacedBuffer,
    toucher_node: Option<u32>,
) -> Result<BufferCheck, PlacementError> {
    check_buffer_against(policy, buf, policy.nodes_expected(m, toucher_node))
}

/// Checks a buffer's pages against an explicit set of expected nodes.
fn check_buffer_against(
    policy: &MemoryPolicy,
    buf: &PlacedBuffer,
    expected: Option<IdSet>,
) -> Result<BufferCheck, PlacementError> {
    let h = buf.histogram()?;
    let mut problems = Vec::new();
    if h.untouched_pages > 0 {
        problems.push(format!("{} pages never touched", h.untouched_pages));
    }
    if let (Some(e), false) = (&expected, matches!(policy, MemoryPolicy::Preferred { .. })) {
        let out = h.pages_outside(e);
        if out > 0 {
            problems.push(format!(
                "{out} of {} pages outside the requested nodes {{{e}}}",
                h.pages_total
            ));
        }
    }
    Ok(BufferCheck {
        array: None,
        policy: policy.to_string(),
        realization: buf.realization().clone(),
        thp: buf.thp().describe(),
        bytes: buf.len() as u64,
        page_size: h.page_size,
        pages_by_node: h.pages_by_node.clone(),
        untouched_pages: h.untouched_pages,
        expected_nodes: expected,
        toucher_cpu: buf.toucher_cpu(),
        verified: problems.is_empty(),
        problems,
    })
}

/// A buffer's check with its array's name, for kernels of several arrays.
fn named(mut c: BufferCheck, kernel: BandwidthKernel, name: &str) -> BufferCheck {
    if kernel.arrays() > 1 {
        c.array = Some(name.to_string());
    }
    c
}

/// Views a placed buffer as f64s (it is page aligned).
fn as_f64(buf: &mut PlacedBuffer) -> &mut [f64] {
    buf.as_f64_mut()
}

pub(crate) fn verification_of(workers: Vec<WorkerReport>) -> Verification {
    let mut problems = Vec::new();
    for w in &workers {
        if w.pinned && w.seen_cpus.iter().any(|c| *c != w.requested_cpu) {
            problems.push(format!(
                "worker pinned to CPU {} was seen on CPU(s) {:?}",
                w.requested_cpu, w.seen_cpus
            ));
        }
        let who = if w.pinned {
            format!("worker on CPU {}", w.requested_cpu)
        } else {
            format!("unpinned worker (seen on CPUs {:?})", w.seen_cpus)
        };
        for b in &w.buffers {
            for p in &b.problems {
                problems.push(format!("{who}: {p}"));
            }
        }
    }
    Verification {
        verified: problems.is_empty(),
        workers,
        problems,
    }
}

/// Default buffer size: at least 4x the last-level cache (from the machine
/// model), never below 64 MiB; rounded to 2 MiB so THP can back it.
pub fn default_buffer_bytes(m: &Machine) -> usize {
    let llc = m.last_level_cache_bytes().unwrap_or(32 << 20) as usize;
    (4 * llc).max(64 << 20).next_multiple_of(2 << 20)
}

/// Convenience for time budgets given in seconds.
pub fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}
