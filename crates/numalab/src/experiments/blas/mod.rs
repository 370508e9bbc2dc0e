//! `numalab blas`: how sensitive BLAS levels 1 to 3 are to where their
//! operands live (docs/blas.md). Each operand of a kernel gets its own
//! buffer bound to one memory node, first touched by the pinned thread that
//! then calls OpenBLAS ([`crate::measure::blas`]) on it; GFLOPS are compared
//! across placements.
//!
//! Serial mode: one thread on the first allowed CPU of each CPU node runs
//! every placement of its operands over the memory nodes, CPU-less ones
//! included (4^3 x 4 = 256 for three operands on a 4-node machine, as the
//! study's Figure 2), each with its contention in the placement
//! distribution model (the written operand both ways,
//! [`crate::experiments::pdm::streamed`]). They are folded only by real
//! automorphisms of the machine (the sweep's machine tree: a node
//! permutation that keeps distances, memory and the CPUs' structure maps a
//! placement onto one the hardware cannot tell apart); each class is
//! measured once and stands for its members. `full` runs every placement.
//! Hop tuples are not a symmetry: `0/1/1` holds A@0 B@1 C@1 (contention 2)
//! and A@0 B@1 C@2 (contention 1).
//!
//! The finding the study drew from Figure 2, that a non-local placement of
//! lower contention can beat the all-local one for DGEMM, is tested per
//! kernel by [`contention_finding`].
//!
//! Level 1 vectors hold n² elements, the same memory as one n x n matrix
//! (20 MB each at the study's n = 1600): long enough to leave the caches,
//! so level 1 streams memory while level 3 reuses its cache blocks, which
//! is the contrast the study measured.

use crate::experiments::pdm;
use crate::experiments::sweep::{Access, SweepSpace};
use crate::machine::Machine;
use crate::measure::blas::{self, NumericCheck, OpenBlasThreads};
use crate::measure::cancel;
use crate::measure::compare::{holm, rank_compare, RankComparison, ALPHA};
use crate::measure::harness::{check_buffer, BufferCheck, Figure};
use crate::measure::kernels::{run_pass, BandwidthKernel, Isa};
use crate::measure::stats::{measure, Better, StopRule, Summary};
use crate::placement::{
    check_plan, pin_current_thread, BufferDemand, BufferSpec, MemoryPolicy, PlacedBuffer,
    PlacementError,
};
use crate::serde_util::int_keyed_map;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Instant;

/// The study's matrix dimension, the default of `--n`.
pub const DEFAULT_N: usize = 1600;
/// Largest `--n`: n² = 4·10^8 elements stay inside OpenBLAS's 32-bit
/// integers, and a level-3 run is 3 x 3.2 GB.
pub const MAX_N: usize = 20_000;
/// Smallest dimension a default `n` is scaled down to when memory is short.
pub const MIN_SCALED_N: usize = 16;
/// Most placements one run may plan: `full` on a large machine grows as
/// nodes^operands.
pub const MAX_RUNS: usize = 10_000;
/// Shortest sample: one call of a small kernel is repeated until a sample
/// lasts this long, so that the timer's resolution does not matter.
const MIN_SAMPLE_SECONDS: f64 = 1e-3;

/// A measured BLAS kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kernel {
    /// Level 1: y = alpha·x + y (OpenBLAS).
    Daxpy,
    /// Level 1: the STREAM triad a = b + s·c (numalab's triad kernel; no
    /// BLAS routine computes it).
    Triad,
    /// Level 2: y = A·x (OpenBLAS).
    Dgemv,
    /// Level 3: C = A·B (OpenBLAS).
    Dgemm,
}

impl Kernel {
    /// Every kernel, by level.
    pub const ALL: [Kernel; 4] = [Kernel::Daxpy, Kernel::Triad, Kernel::Dgemv, Kernel::Dgemm];
    /// The names [`Kernel::parse`] accepts.
    pub const NAMES: [&'static str; 4] = ["daxpy", "triad", "dgemv", "dgemm"];

    /// The kernel's name.
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// A kernel by name.
    pub fn parse(t: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == t.trim())
            .ok_or_else(|| {
                format!(
                    "unknown BLAS kernel '{}'; valid: {}",
                    t.trim(),
                    Self::NAMES.join(", ")
                )
            })
    }

    /// The BLAS level, 1 to 3.
    pub fn level(self) -> u8 {
        match self {
            Kernel::Daxpy | Kernel::Triad => 1,
            Kernel::Dgemv => 2,
            Kernel::Dgemm => 3,
        }
    }

    /// The operands' names, each in its own buffer; the written one last.
    pub fn operands(self) -> &'static [&'static str] {
        match self {
            Kernel::Daxpy => &["x", "y"],
            Kernel::Triad => &["a", "b", "c"],
            Kernel::Dgemv => &["A", "x", "y"],
            Kernel::Dgemm => &["A", "B", "C"],
        }
    }

    /// Elements of each operand (in [`Kernel::operands`] order) for
    /// dimension `n`.
    pub fn elements(self, n: usize) -> Vec<usize> {
        let nn = n * n;
        match self {
            Kernel::Daxpy => vec![nn; 2],
            Kernel::Triad | Kernel::Dgemm => vec![nn; 3],
            Kernel::Dgemv => vec![nn, n, n],
        }
    }

    /// Floating-point operations of one call: 2n² for the level-1 kernels
    /// (vectors of n² elements), 2n² for dgemv, 2n³ for dgemm.
    pub fn flops(self, n: usize) -> f64 {
        let n = n as f64;
        match self {
            Kernel::Daxpy | Kernel::Triad | Kernel::Dgemv => 2.0 * n * n,
            Kernel::Dgemm => 2.0 * n * n * n,
        }
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct BlasRequest {
    pub kernels: Vec<Kernel>,
    /// Matrix dimension; `None`: [`DEFAULT_N`], scaled down if memory is short.
    pub n: Option<usize>,
    /// The CPU nodes whose first CPU runs a thread; `None`: every CPU node.
    pub cpu_nodes: Option<IdSet>,
    /// Every placement instead of one per hop class.
    pub full: bool,
    /// Stop rule of each placement.
    pub rule: StopRule,
    /// Compare OpenBLAS with the naive implementations first.
    pub check: bool,
    /// Parallel mode: this many random placements per contention class of
    /// the placement distribution model, one thread per CPU node.
    pub parallel: Option<usize>,
    /// Seed of the parallel mode's random placements.
    pub seed: u64,
}

/// One placement to run: a thread's CPU and each operand's memory node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedRun {
    pub kernel: Kernel,
    pub level: u8,
    pub cpu_node: u32,
    pub cpu: u32,
    /// Memory node of each operand, in [`Kernel::operands`] order.
    pub nodes: Vec<u32>,
    /// Hops from the thread's node to each operand's node (`null`: no
    /// path known).
    pub hops: Vec<Option<u32>>,
    /// The hop tuple as text, e.g. `0/1/2`.
    pub class: String,
    /// How many placements the run stands for: its class under the
    /// machine's automorphisms (1 with `full`).
    pub stands_for: u64,
    /// Its largest link or controller load in the placement distribution
    /// model (`None`: the model has no routes on this machine).
    pub contention: Option<f64>,
}

fn class_label(hops: &[Option<u32>]) -> String {
    hops.iter()
        .map(|h| h.map_or("?".to_string(), |h| h.to_string()))
        .collect::<Vec<_>>()
        .join("/")
}

/// Every CPU node's thread CPU: the first allowed CPU of each node asked for.
fn thread_cpus(m: &Machine, only: Option<&IdSet>) -> Result<Vec<(u32, u32)>, PlacementError> {
    let cpu_nodes = m.cpu_nodes();
    let nodes: Vec<u32> = match only {
        Some(set) => {
            if let Some(bad) = set.iter().find(|n| !cpu_nodes.contains(*n)) {
                return Err(PlacementError::Invalid(format!(
                    "--node {bad} is not a node with CPUs this process may use; CPU nodes: {cpu_nodes}"
                )));
            }
            set.iter().collect()
        }
        None => cpu_nodes.iter().collect(),
    };
    nodes
        .into_iter()
        .map(|node| {
            m.allowed_cpus_of(node)
                .first()
                .map(|cpu| (node, cpu))
                .ok_or_else(|| PlacementError::Invalid(format!("node {node} has no allowed CPU")))
        })
        .collect()
}

/// Every placement the serial mode would run, in run order: per kernel,
/// per CPU node, one per class of placements under the machine's
/// automorphisms (or all of them with `full`), each with its contention.
pub fn plan(m: &Machine, req: &BlasRequest) -> Result<Vec<PlannedRun>, PlacementError> {
    let threads = thread_cpus(m, req.cpu_nodes.as_ref())?;
    let memory: Vec<u32> = m.memory_nodes().iter().collect();
    if memory.is_empty() {
        return Err(PlacementError::Invalid(
            "this machine has no node with memory".into(),
        ));
    }
    // Both are built once: each is quadratic in nodes (or worse) and a
    // plan prices hundreds of placements.
    let links = pdm::Contention::of(m).ok();
    let space = match req.full {
        true => None,
        false => Some(operand_space(m, &threads)?),
    };
    let mut runs = Vec::new();
    for &kernel in &req.kernels {
        let q = kernel.operands().len();
        let total = memory.len().saturating_pow(q as u32);
        if req.full {
            if runs
                .len()
                .saturating_add(total.saturating_mul(threads.len()))
                > MAX_RUNS
            {
                return Err(too_many());
            }
            for &(cpu_node, cpu) in &threads {
                for i in 0..total {
                    let mut rest = i;
                    let mut nodes = vec![0; q];
                    for slot in nodes.iter_mut().rev() {
                        *slot = memory[rest % memory.len()];
                        rest /= memory.len();
                    }
                    runs.push(run_of(m, links.as_ref(), kernel, cpu_node, cpu, nodes, 1));
                }
            }
            continue;
        }
        let Some(space) = &space else { continue };
        // Node automorphisms merge at most their number of placements: a
        // plan past the cap is refused before it is folded.
        let least = (total.saturating_mul(threads.len()) as u128)
            .div_ceil(space.symmetry_order().saturating().max(1));
        if runs.len() as u128 + least > MAX_RUNS as u128 {
            return Err(too_many());
        }
        let mut classes = space.operand_classes(q);
        classes.sort_by_key(|(cpu, nodes, _)| (*cpu, nodes.clone()));
        if runs.len().saturating_add(classes.len()) > MAX_RUNS {
            return Err(too_many());
        }
        for (cpu, nodes, size) in classes {
            let cpu_node = m.node_of_cpu(cpu).unwrap_or(u32::MAX);
            runs.push(run_of(
                m,
                links.as_ref(),
                kernel,
                cpu_node,
                cpu,
                nodes,
                size,
            ));
        }
    }
    Ok(runs)
}

/// The machine's symmetry over the serial mode's thread CPUs and every
/// memory node.
fn operand_space(m: &Machine, threads: &[(u32, u32)]) -> Result<SweepSpace, PlacementError> {
    let cpus: IdSet = threads.iter().map(|t| t.1).collect();
    SweepSpace::new(m, &cpus, &m.memory_nodes(), &[Access::Read]).map_err(PlacementError::Invalid)
}

fn too_many() -> PlacementError {
    PlacementError::Invalid(format!(
        "more than {MAX_RUNS} placements to run; leave out --full, or pick one --node or fewer --kernels"
    ))
}

fn run_of(
    m: &Machine,
    links: Option<&pdm::Contention>,
    kernel: Kernel,
    cpu_node: u32,
    cpu: u32,
    nodes: Vec<u32>,
    stands_for: u64,
) -> PlannedRun {
    let hops: Vec<Option<u32>> = nodes.iter().map(|&v| m.hops_between(cpu_node, v)).collect();
    let contention = links.and_then(|l| {
        l.of_placement(
            &pdm::streamed(nodes.len()),
            &[cpu_node],
            std::slice::from_ref(&nodes),
        )
        .ok()
    });
    PlannedRun {
        kernel,
        level: kernel.level(),
        cpu_node,
        cpu,
        class: class_label(&hops),
        nodes,
        hops,
        stands_for,
        contention,
    }
}

/// Where one operand lives.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OperandPlacement {
    pub name: String,
    pub node: u32,
    pub hops: Option<u32>,
    pub bytes: u64,
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
    pub verified: bool,
    pub problems: Vec<String>,
}

/// One measured placement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlacementResult {
    pub cpu_node: u32,
    pub cpu: u32,
    pub operands: Vec<OperandPlacement>,
    pub hops: Vec<Option<u32>>,
    pub class: String,
    pub stands_for: u64,
    /// Its contention in the placement distribution model.
    #[serde(default)]
    pub contention: Option<f64>,
    /// GFLOPS (1e9 floating-point operations per second) of the samples.
    pub gflops: Figure,
    /// Every sample's GFLOPS, in the order taken: what the contention
    /// finding's rank tests compare.
    #[serde(default)]
    pub gflops_samples: Vec<f64>,
    /// Calls of the kernel per sample (small kernels are repeated).
    pub calls_per_sample: u64,
    pub samples: usize,
    pub verified: bool,
}

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

/// One kernel's placements and sensitivity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KernelResult {
    pub kernel: Kernel,
    pub level: u8,
    pub n: usize,
    pub operands: Vec<String>,
    /// Elements of each operand.
    pub elements: Vec<usize>,
    pub flops_per_call: f64,
    /// Serial mode's placements (empty in parallel mode).
    pub placements: Vec<PlacementResult>,
    /// Serial mode: whether a non-local placement of lower contention beat
    /// the all-local one.
    #[serde(default)]
    pub contention_finding: Option<ContentionFinding>,
    /// Parallel mode's contention classes (empty in serial mode).
    #[serde(default)]
    pub contention_classes: Vec<ContentionClassResult>,
    /// Over the serial placements, or the parallel ones with their
    /// contention classes as classes.
    pub sensitivity: Option<Sensitivity>,
}

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

/// The outcome of `numalab blas`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BlasResult {
    pub mode: String,
    pub full: bool,
    pub n: usize,
    pub n_requested: usize,
    /// Why `n` is below `n_requested`, if it is.
    pub scaled_down: Option<String>,
    pub memory_nodes: IdSet,
    pub cpu_nodes: IdSet,
    pub openblas: OpenBlasThreads,
    /// The numerical check (`--check`).
    pub check: Option<NumericCheck>,
    pub kernels: Vec<KernelResult>,
    pub finding: Finding,
    pub verified: bool,
    pub warnings: Vec<String>,
}

/// The buffers of every kernel with all its operands (of `copies`
/// threads) on one memory node, node by node: the largest demand any
/// placement makes of one node.
fn worst_demands(
    m: &Machine,
    kernels: &[Kernel],
    n: usize,
    cpu: u32,
    copies: usize,
) -> Vec<Vec<BufferDemand>> {
    let mut phases = Vec::new();
    for &k in kernels {
        for v in m.memory_nodes().iter() {
            let policy = MemoryPolicy::Bind {
                nodes: IdSet::single(v),
            };
            phases.push(
                std::iter::repeat_n(k.elements(n), copies)
                    .flatten()
                    .map(|e| BufferDemand::new(e * 8, &policy, Some(cpu)))
                    .collect(),
            );
        }
    }
    phases
}

/// The dimension to run: the asked one, or the default halved until every
/// placement fits the nodes' free memory.
fn fit_n(
    m: &Machine,
    req: &BlasRequest,
    cpu: u32,
    copies: usize,
) -> Result<(usize, Option<String>), PlacementError> {
    let advice = "use a smaller --n";
    let start = req.n.unwrap_or(DEFAULT_N);
    if req.n.is_some() {
        check_plan(
            m,
            &worst_demands(m, &req.kernels, start, cpu, copies),
            advice,
        )?;
        return Ok((start, None));
    }
    let mut n = start;
    loop {
        match check_plan(m, &worst_demands(m, &req.kernels, n, cpu, copies), advice) {
            Ok(()) if n == start => return Ok((n, None)),
            Ok(()) => {
                return Ok((
                    n,
                    Some(format!(
                        "n scaled down from {start} to {n}: the operands of n = {start} do not fit the free memory of every node"
                    )),
                ))
            }
            Err(PlacementError::Capacity(e)) if n / 2 < MIN_SCALED_N => {
                return Err(PlacementError::Capacity(e))
            }
            Err(PlacementError::Capacity(_)) => n /= 2,
            Err(e) => return Err(e),
        }
    }
}

/// An operand's pages as f64s. The mapping is page-aligned, so the cast
/// has no prefix.
fn doubles(buf: &mut PlacedBuffer) -> &mut [f64] {
    buf.as_f64_mut()
}

/// Calls the kernel once on its operands (in [`Kernel::operands`] order).
fn call(
    kernel: Kernel,
    n: usize,
    ops: &mut [&mut [f64]],
    flip: bool,
) -> Result<(), PlacementError> {
    let dim = |e: blas::BlasError| PlacementError::Invalid(e.0);
    match (kernel, ops) {
        (Kernel::Daxpy, [x, y]) => {
            // Alternating signs keep y bounded over any number of calls.
            let alpha = if flip { -1e-3 } else { 1e-3 };
            blas::daxpy(alpha, x, y).map_err(dim)
        }
        (Kernel::Triad, [a, b, c]) => {
            // c = a + s·b, as `bench bandwidth` and `pdm` name the triad's arrays.
            run_pass(
                BandwidthKernel::Triad,
                Isa::detect_best(),
                &mut [&mut **c, &mut **a, &mut **b],
                3.0,
            );
            Ok(())
        }
        (Kernel::Dgemv, [a, x, y]) => blas::dgemv(n, n, 1.0, a, x, 0.0, y).map_err(dim),
        (Kernel::Dgemm, [a, b, c]) => blas::dgemm(n, n, n, 1.0, a, b, 0.0, c).map_err(dim),
        _ => Err(PlacementError::Invalid(format!(
            "kernel {} given the wrong number of operands",
            kernel.name()
        ))),
    }
}

/// Places the operands of `run` from a thread pinned to its CPU, checks
/// their pages and measures the kernel on them.
fn run_one(
    m: &Machine,
    run: &PlannedRun,
    n: usize,
    rule: &StopRule,
) -> Result<PlacementResult, PlacementError> {
    std::thread::scope(|s| {
        crate::placement::sys::spawn_scoped(s, "the measuring thread", || {
            run_pinned(m, run, n, rule)
        })?
        .join()
        .unwrap_or_else(|_| Err(PlacementError::Os("the measuring thread panicked".into())))
    })
}

/// Places a kernel's operands on `nodes` from the calling thread, pinned
/// to `cpu` of `cpu_node`, and checks their pages.
fn place_operands(
    m: &Machine,
    kernel: Kernel,
    n: usize,
    cpu: u32,
    cpu_node: u32,
    nodes: &[u32],
) -> Result<(Vec<PlacedBuffer>, Vec<OperandPlacement>), PlacementError> {
    pin_current_thread(cpu)?;
    let mut bufs = Vec::new();
    let mut operands = Vec::new();
    for ((name, &node), &elements) in kernel.operands().iter().zip(nodes).zip(&kernel.elements(n)) {
        let policy = MemoryPolicy::Bind {
            nodes: IdSet::single(node),
        };
        let spec = BufferSpec {
            size: elements * 8,
            policy: policy.clone(),
            thp: None,
            hugetlb: false,
            toucher: Some(cpu),
            weighted: Default::default(),
        };
        let mut buf = PlacedBuffer::new(m, &spec)?;
        // Values that keep every kernel finite; written after the prefault,
        // so the pages stay where the toucher put them.
        for (i, v) in doubles(&mut buf).iter_mut().enumerate() {
            *v = 1.0 + (i % 7) as f64 * 0.125;
        }
        let c: BufferCheck = check_buffer(m, &policy, &buf, Some(cpu_node))?;
        operands.push(OperandPlacement {
            name: name.to_string(),
            node,
            hops: m.hops_between(cpu_node, node),
            bytes: c.bytes,
            pages_by_node: c.pages_by_node,
            verified: c.verified,
            problems: c.problems,
        });
        bufs.push(buf);
    }
    Ok((bufs, operands))
}

/// The operands as the kernel's slices (buffers are rounded up to whole
/// pages).
fn operand_slices(bufs: &mut [PlacedBuffer], kernel: Kernel, n: usize) -> Vec<&mut [f64]> {
    bufs.iter_mut()
        .zip(kernel.elements(n))
        .map(|(b, e)| &mut doubles(b)[..e])
        .collect()
}

/// Times one call; returns its seconds (for sizing samples).
fn time_one_call(kernel: Kernel, n: usize, ops: &mut [&mut [f64]]) -> Result<f64, PlacementError> {
    let t = Instant::now();
    call(kernel, n, ops, false)?;
    Ok(t.elapsed().as_secs_f64().max(1e-9))
}

/// Calls per sample: small kernels are repeated so that a sample lasts at
/// least MIN_SAMPLE_SECONDS.
fn calls_for(once: f64) -> u64 {
    ((MIN_SAMPLE_SECONDS / once).ceil() as u64).clamp(1, 1_000_000)
}

fn run_pinned(
    m: &Machine,
    run: &PlannedRun,
    n: usize,
    rule: &StopRule,
) -> Result<PlacementResult, PlacementError> {
    let kernel = run.kernel;
    let (mut bufs, operands) = place_operands(m, kernel, n, run.cpu, run.cpu_node, &run.nodes)?;
    let mut ops = operand_slices(&mut bufs, kernel, n);
    let calls = calls_for(time_one_call(kernel, n, &mut ops)?);
    let flops = kernel.flops(n);
    let mut failed = None;
    let mut flip = true;
    let mt = measure(rule, || {
        let t = Instant::now();
        for _ in 0..calls {
            if let Err(e) = call(kernel, n, &mut ops, flip) {
                failed = Some(e);
                return f64::NAN;
            }
            flip = !flip;
        }
        std::hint::black_box(&ops);
        calls as f64 * flops / t.elapsed().as_secs_f64() / 1e9
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let verified = operands.iter().all(|o| o.verified);
    Ok(PlacementResult {
        cpu_node: run.cpu_node,
        cpu: run.cpu,
        operands,
        hops: run.hops.clone(),
        class: run.class.clone(),
        stands_for: run.stands_for,
        contention: run.contention,
        gflops: Figure::of(&mt.summary, Better::Higher, 1.0),
        gflops_samples: mt.samples.clone(),
        calls_per_sample: calls,
        samples: mt.summary.n,
        verified,
    })
}

/// One thread of a parallel placement: its CPU and its operands' nodes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParallelThread {
    pub cpu_node: u32,
    pub cpu: u32,
    /// Memory node of each operand, in [`Kernel::operands`] order.
    pub nodes: Vec<u32>,
}

/// One drawn placement of the parallel mode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParallelRun {
    /// As `numalab pdm` writes it: `T0@0:a→1,b→2 ...` (quantities a, b, c
    /// are the operands in [`Kernel::operands`] order).
    pub label: String,
    /// The placement's largest link or controller load in the model.
    pub contention: f64,
    pub threads: Vec<ParallelThread>,
}

/// The placements drawn from one contention class of the model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParallelClass {
    pub class: u64,
    pub low: f64,
    pub high: f64,
    /// The class's share of all placements.
    pub share: f64,
    /// Placements asked for; `runs` holds fewer when the class is rare or
    /// has fewer distinct placements (repeats are run once).
    pub wanted: usize,
    pub runs: Vec<ParallelRun>,
}

/// Where one thread's operands went in a measured parallel placement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadOperands {
    pub cpu_node: u32,
    pub cpu: u32,
    pub operands: Vec<OperandPlacement>,
}

/// One measured parallel placement: GFLOPS of all threads together.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ParallelPlacement {
    pub label: String,
    pub contention: f64,
    pub threads: Vec<ThreadOperands>,
    pub gflops: Figure,
    pub calls_per_sample: u64,
    pub samples: usize,
    pub verified: bool,
}

/// One contention class measured: its placements and their spread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContentionClassResult {
    pub class: u64,
    pub low: f64,
    pub high: f64,
    pub share: f64,
    pub wanted: usize,
    pub placements: Vec<ParallelPlacement>,
    /// Median, min and max over the placements of their median GFLOPS.
    pub median_gflops: f64,
    pub min_gflops: f64,
    pub max_gflops: f64,
}

/// `[low, high)` of a contention class, its name as a class.
fn range_label(low: f64, high: f64) -> String {
    format!("[{low}, {high})")
}

/// The parallel mode's placements: per kernel, up to `parallel` distinct
/// random placements of each contention class of the placement
/// distribution model (one thread per CPU node; operands read, the
/// written one both ways; weights 1).
pub fn plan_parallel(
    m: &Machine,
    req: &BlasRequest,
) -> Result<Vec<(Kernel, Vec<ParallelClass>)>, PlacementError> {
    use crate::experiments::pdm::{self, PdmError, PdmRequest, ThreadPlacement};
    let per_class = req.parallel.unwrap_or(20);
    let pdm_err = |e: PdmError| match e {
        PdmError::Invalid(x) => PlacementError::Invalid(x),
        PdmError::Failed(x) => PlacementError::Os(x),
    };
    let mut out = Vec::new();
    let mut total = 0usize;
    for &kernel in &req.kernels {
        let preq = PdmRequest {
            workload: kernel.name().to_string(),
            quantities: pdm::streamed(kernel.operands().len()),
            threads: ThreadPlacement::OnePerNode,
            links: None,
            class_width: 1.0,
            samples: None,
            seed: req.seed,
        };
        let draws = pdm::draw_by_class(m, &preq, per_class, req.seed).map_err(pdm_err)?;
        let mut classes = Vec::new();
        for d in draws {
            let mut runs: Vec<ParallelRun> = Vec::new();
            for p in d.placements {
                if runs.iter().any(|r| r.label == p.label) {
                    continue;
                }
                let threads = p
                    .thread_nodes
                    .iter()
                    .zip(&p.memory)
                    .map(|(&node, nodes)| {
                        let cpu = m.allowed_cpus_of(node).first().ok_or_else(|| {
                            PlacementError::Invalid(format!("node {node} has no allowed CPU"))
                        })?;
                        Ok(ParallelThread {
                            cpu_node: node,
                            cpu,
                            nodes: nodes.clone(),
                        })
                    })
                    .collect::<Result<Vec<_>, PlacementError>>()?;
                runs.push(ParallelRun {
                    label: p.label,
                    contention: p.contention,
                    threads,
                });
            }
            total += runs.len();
            if total > MAX_RUNS {
                return Err(too_many());
            }
            classes.push(ParallelClass {
                class: d.class,
                low: d.low,
                high: d.high,
                share: d.share,
                wanted: d.wanted,
                runs,
            });
        }
        out.push((kernel, classes));
    }
    Ok(out)
}

/// Places every thread's operands from that thread, then measures all
/// threads calling the kernel together: a sample starts them at one
/// barrier and ends when the last one reaches the next.
fn run_parallel_one(
    m: &Machine,
    kernel: Kernel,
    n: usize,
    run: &ParallelRun,
    rule: &StopRule,
) -> Result<ParallelPlacement, PlacementError> {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Barrier, Mutex};
    let t = run.threads.len();
    // A gate, not a barrier: a thread the system refuses opens it, and the
    // ones that started leave before the sampling barriers.
    let ready = crate::measure::sample_clock::Gate::new(t + 1);
    let refused = AtomicBool::new(false);
    let start = Barrier::new(t + 1);
    let end = Barrier::new(t + 1);
    let stop = AtomicBool::new(false);
    let call_failed = AtomicBool::new(false);
    let calls = AtomicU64::new(1);
    type Setup = Result<(Vec<OperandPlacement>, f64), PlacementError>;
    let setups: Mutex<Vec<Option<Setup>>> = Mutex::new((0..t).map(|_| None).collect());
    let flops = kernel.flops(n);
    std::thread::scope(|s| {
        for (i, th) in run.threads.iter().enumerate() {
            let (ready, start, end, stop, call_failed, calls, setups, refused) = (
                &ready,
                &start,
                &end,
                &stop,
                &call_failed,
                &calls,
                &setups,
                &refused,
            );
            let started = crate::placement::sys::spawn_scoped(s, "a BLAS thread", move || {
                let placed = place_operands(m, kernel, n, th.cpu, th.cpu_node, &th.nodes);
                let mut kept = None;
                let setup = placed.and_then(|(bufs, operands)| {
                    let mut bufs = bufs;
                    let once = {
                        let mut ops = operand_slices(&mut bufs, kernel, n);
                        time_one_call(kernel, n, &mut ops)?
                    };
                    kept = Some(bufs);
                    Ok((operands, once))
                });
                if let Ok(mut v) = setups.lock() {
                    v[i] = Some(setup);
                }
                ready.wait();
                if refused.load(Ordering::Acquire) {
                    return;
                }
                let mut flip = true;
                loop {
                    start.wait();
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    if let Some(bufs) = kept.as_mut() {
                        let mut ops = operand_slices(bufs, kernel, n);
                        for _ in 0..calls.load(Ordering::Acquire) {
                            if call(kernel, n, &mut ops, flip).is_err() {
                                call_failed.store(true, Ordering::Release);
                            }
                            flip = !flip;
                        }
                        std::hint::black_box(&ops);
                    }
                    end.wait();
                }
            });
            if let Err(e) = started {
                refused.store(true, Ordering::Release);
                ready.open();
                return Err(e);
            }
        }
        ready.wait();
        let taken: Vec<Option<Setup>> = setups
            .lock()
            .map(|mut v| std::mem::take(&mut *v))
            .unwrap_or_default();
        let mut threads = Vec::new();
        let mut slowest: f64 = 0.0;
        let mut failure = None;
        for (th, setup) in run.threads.iter().zip(taken) {
            match setup {
                Some(Ok((operands, once))) => {
                    slowest = slowest.max(once);
                    threads.push(ThreadOperands {
                        cpu_node: th.cpu_node,
                        cpu: th.cpu,
                        operands,
                    });
                }
                Some(Err(e)) => failure = failure.or(Some(e)),
                None => {
                    failure = failure.or(Some(PlacementError::Os(
                        "a thread reported no setup".into(),
                    )))
                }
            }
        }
        let result = match failure {
            Some(e) => Err(e),
            None => {
                let per_sample = calls_for(slowest);
                calls.store(per_sample, Ordering::Release);
                let mt = measure(rule, || {
                    let t0 = Instant::now();
                    start.wait();
                    end.wait();
                    if call_failed.load(Ordering::Acquire) {
                        return f64::NAN;
                    }
                    t as f64 * per_sample as f64 * flops / t0.elapsed().as_secs_f64() / 1e9
                });
                let verified = threads.iter().flat_map(|t| &t.operands).all(|o| o.verified);
                Ok(ParallelPlacement {
                    label: run.label.clone(),
                    contention: run.contention,
                    threads,
                    gflops: Figure::of(&mt.summary, Better::Higher, 1.0),
                    calls_per_sample: per_sample,
                    samples: mt.summary.n,
                    verified,
                })
            }
        };
        stop.store(true, Ordering::Release);
        start.wait();
        result
    })
}

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

/// Runs the serial mode (every planned placement, in order) or, with
/// `parallel`, the parallel mode. `on_step` is called after each placement
/// (for progress).
pub fn run_blas(
    m: &Machine,
    req: &BlasRequest,
    on_step: &mut dyn FnMut(),
) -> Result<BlasResult, PlacementError> {
    let (runs, draws) = match req.parallel {
        None => (plan(m, req)?, Vec::new()),
        Some(_) => (Vec::new(), plan_parallel(m, req)?),
    };
    let threads = if req.parallel.is_some() {
        m.cpu_nodes().len().max(1)
    } else {
        1
    };
    let first_cpu = runs
        .first()
        .map(|r| r.cpu)
        .or_else(|| m.allowed_cpus.first())
        .unwrap_or(0);
    let (n, scaled_down) = fit_n(m, req, first_cpu, threads)?;
    // OpenBLAS is loaded here, before anything is placed: a machine
    // without it gets one line naming the package.
    let openblas = blas::single_threaded()
        .map_err(|e| PlacementError::Unsupported(e.0))?
        .clone();
    let mut warnings = Vec::new();
    if openblas.num_threads_after != 1 {
        warnings.push(format!(
            "OpenBLAS reports {} threads after openblas_set_num_threads(1): its threads may run outside the placement",
            openblas.num_threads_after
        ));
    }
    warnings.extend(openblas.core_warning.clone());
    if runs.iter().any(|r| r.contention.is_none()) {
        warnings.push(
            "the placement distribution model has no routes on this machine (no links inferred): placements carry no contention".into(),
        );
    }
    let check = if req.check {
        let sizes: Vec<usize> = (1..=blas::CHECK_MAX_N).collect();
        let c = blas::check_numerics(&sizes, 1);
        if let Some(f) = &c.failure {
            return Err(PlacementError::Os(format!(
                "OpenBLAS disagrees with the naive implementation: {f}"
            )));
        }
        Some(c)
    } else {
        None
    };
    let memory_nodes = m.memory_nodes();
    let measurable = memory_nodes.len() > 1;
    if !measurable {
        warnings.push(
            "one memory node: every placement is local, so placement sensitivity cannot be measured here".into(),
        );
    }
    let mut kernels: Vec<KernelResult> = req
        .kernels
        .iter()
        .map(|&k| KernelResult {
            kernel: k,
            level: k.level(),
            n,
            operands: k.operands().iter().map(|s| s.to_string()).collect(),
            elements: k.elements(n),
            flops_per_call: k.flops(n),
            placements: Vec::new(),
            contention_finding: None,
            contention_classes: Vec::new(),
            sensitivity: None,
        })
        .collect();
    let cancelled = "cancelled: the placements not yet run are missing";
    'serial: for run in &runs {
        if cancel::requested() {
            warnings.push(cancelled.into());
            break 'serial;
        }
        let p = run_one(m, run, n, &req.rule)?;
        if let Some(k) = kernels.iter_mut().find(|k| k.kernel == run.kernel) {
            k.placements.push(p);
        }
        on_step();
    }
    'parallel: for (kernel, classes) in &draws {
        let Some(k) = kernels.iter_mut().find(|k| k.kernel == *kernel) else {
            continue;
        };
        for c in classes {
            if c.runs.is_empty() {
                warnings.push(format!(
                    "{}: contention class [{}, {}) ({:.2e}% of placements) was too rare to draw; it is reported without placements",
                    kernel.name(),
                    c.low,
                    c.high,
                    c.share * 100.0
                ));
            }
            let mut placements = Vec::new();
            for run in &c.runs {
                if cancel::requested() {
                    warnings.push(cancelled.into());
                    break 'parallel;
                }
                placements.push(run_parallel_one(m, *kernel, n, run, &req.rule)?);
                on_step();
            }
            let medians: Vec<f64> = placements
                .iter()
                .map(|p| p.gflops.median)
                .filter(|x| x.is_finite())
                .collect();
            let s = Summary::of(&medians);
            k.contention_classes.push(ContentionClassResult {
                class: c.class,
                low: c.low,
                high: c.high,
                share: c.share,
                wanted: c.wanted,
                placements,
                median_gflops: s.as_ref().map_or(f64::NAN, |s| s.median),
                min_gflops: s.as_ref().map_or(f64::NAN, |s| s.min),
                max_gflops: s.as_ref().map_or(f64::NAN, |s| s.max),
            });
        }
    }
    for k in &mut kernels {
        let mut scored: Vec<Scored> = k.placements.iter().map(Scored::from).collect();
        for c in &k.contention_classes {
            scored.extend(c.placements.iter().map(|p| Scored {
                class: range_label(c.low, c.high),
                hops: Vec::new(),
                stands_for: 1,
                contention: None,
                gflops: &p.gflops,
            }));
        }
        k.sensitivity = sensitivity(&scored, measurable);
        if measurable && !k.placements.is_empty() {
            k.contention_finding = contention_finding(&k.placements);
        }
    }
    let verified = kernels.iter().all(|k| {
        k.placements.iter().all(|p| p.verified)
            && k.contention_classes
                .iter()
                .flat_map(|c| &c.placements)
                .all(|p| p.verified)
    });
    let cpu_nodes = if req.parallel.is_some() {
        m.cpu_nodes()
    } else {
        runs.iter().map(|r| r.cpu_node).collect()
    };
    Ok(BlasResult {
        mode: if req.parallel.is_some() {
            "parallel".into()
        } else {
            "serial".into()
        },
        full: req.full,
        n,
        n_requested: req.n.unwrap_or(DEFAULT_N),
        scaled_down,
        cpu_nodes,
        finding: finding(&kernels, memory_nodes.len()),
        memory_nodes,
        openblas,
        check,
        kernels,
        verified,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    fn req(kernels: Vec<Kernel>, full: bool) -> BlasRequest {
        BlasRequest {
            kernels,
            n: Some(64),
            cpu_nodes: None,
            full,
            rule: StopRule::default(),
            check: false,
            parallel: None,
            seed: 1,
        }
    }

    /// The ring's automorphisms (the dihedral group of the square 0-1-3-2,
    /// order 8) as node maps, written out here rather than taken from the
    /// sweep's symmetry code.
    fn ring_symmetries() -> Vec<[u32; 4]> {
        let rotate = [1, 3, 0, 2];
        let reflect = [0, 2, 1, 3];
        let mut group: Vec<[u32; 4]> = vec![[0, 1, 2, 3]];
        while let Some(g) = group.iter().find_map(|g| {
            [rotate, reflect]
                .iter()
                .map(|h| {
                    [
                        h[g[0] as usize],
                        h[g[1] as usize],
                        h[g[2] as usize],
                        h[g[3] as usize],
                    ]
                })
                .find(|x| !group.contains(x))
        }) {
            group.push(g);
        }
        group
    }

    #[test]
    fn quartet_ring_folds_serial_placements_by_its_automorphisms_only() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        assert_eq!(m.memory_nodes().len(), 4);
        assert_eq!(m.cpu_nodes().len(), 4);
        let folded = plan(&m, &req(vec![Kernel::Dgemm, Kernel::Daxpy], false)).unwrap();
        let full = plan(&m, &req(vec![Kernel::Dgemm, Kernel::Daxpy], true)).unwrap();
        // --full: the study's 4 thread nodes x 4^3 operand nodes.
        assert_eq!(full.len(), 4 * 64 + 4 * 16);
        assert!(full
            .iter()
            .all(|r| r.stands_for == 1 && r.contention.is_some()));
        // Brute force: orbits of (thread node, operand nodes) under the
        // ring's 8 symmetries.
        let group = ring_symmetries();
        assert_eq!(group.len(), 8);
        let orbit_sizes = |q: usize| {
            let mut seen: BTreeMap<Vec<u32>, u64> = BTreeMap::new();
            for i in 0..4usize.pow(q as u32 + 1) {
                let p: Vec<u32> = (0..=q)
                    .map(|k| (i / 4usize.pow(k as u32) % 4) as u32)
                    .collect();
                let rep = group
                    .iter()
                    .map(|g| p.iter().map(|&x| g[x as usize]).collect::<Vec<u32>>())
                    .min()
                    .unwrap();
                *seen.entry(rep).or_default() += 1;
            }
            let mut sizes: Vec<u64> = seen.into_values().collect();
            sizes.sort();
            sizes
        };
        for (kernel, q) in [(Kernel::Dgemm, 3), (Kernel::Daxpy, 2)] {
            let runs: Vec<_> = folded.iter().filter(|r| r.kernel == kernel).collect();
            let mut sizes: Vec<u64> = runs.iter().map(|r| r.stands_for).collect();
            sizes.sort();
            assert_eq!(sizes, orbit_sizes(q), "{kernel:?}");
            assert_eq!(sizes.iter().sum::<u64>(), 4 * 4u64.pow(q as u32));
        }
        assert_eq!(
            folded.iter().filter(|r| r.kernel == Kernel::Dgemm).count(),
            36
        );
        assert_eq!(
            folded.iter().filter(|r| r.kernel == Kernel::Daxpy).count(),
            10
        );
        // Every member of a class has the contention of the run standing
        // for it (the model is symmetric too), and every full placement's
        // class is run.
        let key = |r: &PlannedRun| {
            let p: Vec<u32> = std::iter::once(r.cpu_node)
                .chain(r.nodes.iter().copied())
                .collect();
            group
                .iter()
                .map(|g| p.iter().map(|&x| g[x as usize]).collect::<Vec<u32>>())
                .min()
                .unwrap()
        };
        for f in &full {
            let rep = folded
                .iter()
                .find(|r| r.kernel == f.kernel && key(r) == key(f))
                .unwrap_or_else(|| panic!("no class runs {:?} {:?}", f.cpu_node, f.nodes));
            assert_eq!(
                rep.contention, f.contention,
                "{:?} {:?}",
                f.cpu_node, f.nodes
            );
            assert_eq!(rep.class, f.class, "automorphisms keep hop counts");
        }
        // Hop tuples are not a symmetry: 0/1/1 holds A@0 B@1 C@1
        // (contention 2: the link 1->0 carries B and C's read-for-ownership)
        // and A@0 B@1 C@2 (contention 1), the study's best DGEMM case.
        let at = |nodes: [u32; 3]| {
            full.iter()
                .find(|r| r.kernel == Kernel::Dgemm && r.cpu_node == 0 && r.nodes == nodes)
                .unwrap()
        };
        assert_eq!(at([0, 1, 1]).class, "0/1/1");
        assert_eq!(at([0, 1, 2]).class, "0/1/1");
        assert_eq!(at([0, 1, 1]).contention, Some(2.0));
        assert_eq!(at([0, 1, 2]).contention, Some(1.0));
        assert_eq!(at([0, 0, 0]).contention, Some(3.0));
        let folded_011: Vec<_> = folded
            .iter()
            .filter(|r| r.kernel == Kernel::Dgemm && r.class == "0/1/1")
            .collect();
        assert_eq!(
            folded_011.len(),
            2,
            "A@0 B@1 C@1 and A@0 B@1 C@2 are two classes"
        );
    }

    #[test]
    fn one_node_asked_and_unknown_nodes_refused() {
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let mut r = req(vec![Kernel::Dgemv], false);
        r.cpu_nodes = Some(IdSet::single(2));
        let p = plan(&m, &r).unwrap();
        // 64 placements of node 2's thread, folded by the reflection of
        // the ring through node 2 (swapping 0 and 3, fixing the 2^3
        // placements on nodes 1 and 2): (64 + 8) / 2 = 36 classes.
        assert_eq!(p.len(), 36);
        assert_eq!(p.iter().map(|r| r.stands_for).sum::<u64>(), 64);
        assert!(p
            .iter()
            .all(|r| r.cpu_node == 2 && m.node_of_cpu(r.cpu) == Some(2)));
        r.cpu_nodes = Some(IdSet::single(9));
        let e = plan(&m, &r).unwrap_err().to_string();
        assert_eq!(
            e,
            "--node 9 is not a node with CPUs this process may use; CPU nodes: 0-3"
        );
    }

    fn placed(class: &str, median: f64, rel_ci: f64) -> PlacementResult {
        PlacementResult {
            cpu_node: 0,
            cpu: 0,
            operands: vec![],
            hops: vec![],
            class: class.into(),
            stands_for: 1,
            contention: None,
            gflops: Figure {
                median,
                best: median,
                min: median,
                max: median,
                spread: 0.0,
                rel_ci,
            },
            gflops_samples: vec![],
            calls_per_sample: 1,
            samples: 5,
            verified: true,
        }
    }

    fn kernel(k: Kernel, placements: Vec<PlacementResult>) -> KernelResult {
        KernelResult {
            kernel: k,
            level: k.level(),
            n: 1,
            operands: vec![],
            elements: vec![],
            flops_per_call: 1.0,
            contention_finding: None,
            contention_classes: vec![],
            sensitivity: sensitivity(
                &placements.iter().map(Scored::from).collect::<Vec<_>>(),
                true,
            ),
            placements,
        }
    }

    /// A serial placement of thread node 0 with operands on `nodes`,
    /// its contention and samples.
    fn serial(nodes: [u32; 3], contention: f64, samples: &[f64]) -> PlacementResult {
        let mut p = placed(
            "x",
            crate::measure::stats::median(samples.to_vec()).unwrap(),
            0.01,
        );
        p.operands = ["A", "B", "C"]
            .iter()
            .zip(nodes)
            .map(|(name, node)| OperandPlacement {
                name: name.to_string(),
                node,
                hops: None,
                bytes: 0,
                pages_by_node: BTreeMap::new(),
                verified: true,
                problems: vec![],
            })
            .collect();
        p.contention = Some(contention);
        p.gflops_samples = samples.to_vec();
        p
    }

    #[test]
    fn contention_finding_compares_lower_contention_placements_with_all_local() {
        let local: Vec<f64> = (0..8).map(|i| 10.0 + 0.01 * i as f64).collect();
        let faster: Vec<f64> = local.iter().map(|x| x * 1.2).collect();
        let slower: Vec<f64> = local.iter().map(|x| x * 0.8).collect();
        // A@0 B@1 C@2 (contention 1) against A@0 B@0 C@0 (3); A@0 B@1 C@1
        // (2) slower; a placement of higher contention is never compared.
        let ps = vec![
            serial([0, 0, 0], 3.0, &local),
            serial([0, 1, 2], 1.0, &faster),
            serial([0, 1, 1], 2.0, &slower),
            serial([3, 3, 3], 3.5, &faster),
        ];
        let f = contention_finding(&ps).unwrap();
        assert_eq!(f.holds, Some(true), "{}", f.verdict);
        assert!(
            f.verdict.starts_with(
                "holds: A@0 B@1 C@2 (contention 1) beats all-local (contention 3) on node 0"
            ),
            "{}",
            f.verdict
        );
        assert_eq!(f.comparisons.len(), 2);
        assert!(f.comparisons.iter().all(|c| c.p_adjusted < ALPHA));
        // Every lower-contention placement slower: does not hold.
        let ps = vec![
            serial([0, 0, 0], 3.0, &local),
            serial([0, 1, 2], 1.0, &slower),
        ];
        let f = contention_finding(&ps).unwrap();
        assert_eq!(f.holds, Some(false), "{}", f.verdict);
        // Indistinguishable samples: cannot tell.
        let mixed: Vec<f64> = local.iter().rev().map(|x| x + 0.005).collect();
        let ps = vec![
            serial([0, 0, 0], 3.0, &local),
            serial([0, 1, 2], 1.0, &mixed),
        ];
        let f = contention_finding(&ps).unwrap();
        assert_eq!(f.holds, None);
        assert_eq!(f.verdict, "cannot tell (inside the noise)");
        // No all-local placement measured: no finding.
        assert!(contention_finding(&[serial([0, 1, 2], 1.0, &local)]).is_none());
    }

    #[test]
    fn serial_placements_group_by_contention_lowest_first() {
        let ps = [
            serial([0, 0, 0], 3.0, &[9.0]),
            serial([0, 1, 2], 1.0, &[12.0]),
            serial([0, 1, 1], 2.0, &[10.0]),
            serial([0, 2, 2], 2.0, &[11.0]),
            serial([0, 1, 3], 1.0 + 1e-12, &[13.0]),
        ];
        let scored: Vec<Scored> = ps.iter().map(Scored::from).collect();
        let groups = per_contention(&scored);
        let got: Vec<(f64, usize, f64)> = groups
            .iter()
            .map(|g| (g.contention, g.placements, g.median_gflops))
            .collect();
        assert_eq!(got, vec![(1.0, 2, 12.5), (2.0, 2, 10.5), (3.0, 1, 9.0)]);
    }

    #[test]
    fn finding_holds_only_outside_the_noise() {
        let ks = |s1: f64, s2: f64, s3: f64, ci: f64| {
            vec![
                kernel(
                    Kernel::Daxpy,
                    vec![placed("0/0", 10.0, ci), placed("1/1", 10.0 / s1, ci)],
                ),
                kernel(
                    Kernel::Dgemv,
                    vec![placed("0/0/0", 10.0, ci), placed("1/1/1", 10.0 / s2, ci)],
                ),
                kernel(
                    Kernel::Dgemm,
                    vec![placed("0/0/0", 10.0, ci), placed("2/2/2", 10.0 / s3, ci)],
                ),
            ]
        };
        let f = finding(&ks(2.0, 1.5, 1.1, 0.01), 4);
        assert_eq!(f.verdict, "holds");
        assert_eq!(f.holds, Some(true));
        assert!((f.levels[0].sensitivity - 2.0).abs() < 1e-12);
        assert!((f.levels[0].noise - 0.02).abs() < 1e-12);
        // 2.0 vs 1.5 with 20% noise each side: inside the noise.
        let f = finding(&ks(2.0, 1.5, 1.1, 0.1), 4);
        assert_eq!(f.verdict, "cannot tell (inside the noise)");
        assert_eq!(f.holds, None);
        let f = finding(&ks(1.1, 1.5, 1.0, 0.01), 4);
        assert_eq!(f.verdict, "does not hold");
        assert_eq!(f.holds, Some(false));
        let f = finding(&ks(2.0, 1.5, 1.1, 0.01), 1);
        assert!(
            f.verdict
                .starts_with("cannot be measured here (one memory node"),
            "{}",
            f.verdict
        );
        let s = ks(2.0, 1.5, 1.1, 0.01)[2].sensitivity.clone().unwrap();
        assert_eq!(
            (s.best_class.as_str(), s.worst_class.as_str()),
            ("0/0/0", "2/2/2")
        );
        assert!((s.ratio - 1.0 / 1.1).abs() < 1e-12);
        assert_eq!(s.per_hop_class.len(), 2);
    }

    #[test]
    fn kernel_names_round_trip_and_unknown_is_refused() {
        for k in Kernel::ALL {
            assert_eq!(Kernel::parse(k.name()), Ok(k));
        }
        assert_eq!(
            Kernel::parse("sgemm").unwrap_err(),
            "unknown BLAS kernel 'sgemm'; valid: daxpy, triad, dgemv, dgemm"
        );
        assert_eq!(Kernel::Dgemm.flops(10), 2000.0);
        assert_eq!(Kernel::Dgemv.elements(10), vec![100, 10, 10]);
    }
}
