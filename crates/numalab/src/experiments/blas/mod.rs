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
mod findings;
mod parallel;
mod plan;
mod run;

use crate::machine::Machine;
use crate::measure::blas::{self, NumericCheck, OpenBlasThreads};
use crate::measure::cancel;
use crate::measure::harness::Figure;
use crate::measure::stats::{StopRule, Summary};
use crate::placement::PlacementError;
use crate::serde_util::int_keyed_map;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use findings::{
    contention_finding, finding, per_contention, placement_label, sensitivity, ContentionFinding,
    ContentionGroup, Finding, HopClass, LevelSensitivity, LocalComparison, Scored, Sensitivity,
    CONTENTION_RULE, RULE,
};
pub use parallel::{
    plan_parallel, ContentionClassResult, ParallelClass, ParallelPlacement, ParallelRun,
    ParallelThread, ThreadOperands,
};
use parallel::{range_label, run_parallel_one};
pub use plan::plan;
use run::{fit_n, run_one};

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
    let (openblas, check, mut warnings) = load_openblas(req, &runs)?;
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
    run_serial(m, &runs, n, &req.rule, &mut kernels, &mut warnings, on_step)?;
    run_parallel(
        m,
        &draws,
        n,
        &req.rule,
        &mut kernels,
        &mut warnings,
        on_step,
    )?;
    judge(&mut kernels, measurable);
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

/// Loads OpenBLAS and runs the numerical check when asked: the library's
/// threads, the check, and the warnings about its threads, its core type
/// and placements without contention.
fn load_openblas(
    req: &BlasRequest,
    runs: &[PlannedRun],
) -> Result<(OpenBlasThreads, Option<NumericCheck>, Vec<String>), PlacementError> {
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
    Ok((openblas, check, warnings))
}

/// The warning of a run cancelled part way.
const CANCELLED: &str = "cancelled: the placements not yet run are missing";

/// Runs the serial mode's placements in order, each into its kernel's
/// result, until cancelled.
fn run_serial(
    m: &Machine,
    runs: &[PlannedRun],
    n: usize,
    rule: &StopRule,
    kernels: &mut [KernelResult],
    warnings: &mut Vec<String>,
    on_step: &mut dyn FnMut(),
) -> Result<(), PlacementError> {
    for run in runs {
        if cancel::requested() {
            warnings.push(CANCELLED.into());
            break;
        }
        let p = run_one(m, run, n, rule)?;
        if let Some(k) = kernels.iter_mut().find(|k| k.kernel == run.kernel) {
            k.placements.push(p);
        }
        on_step();
    }
    Ok(())
}

/// Runs the parallel mode's placements class by class, each class into its
/// kernel's result with the spread of its placements, until cancelled (the
/// class in progress is then left out).
fn run_parallel(
    m: &Machine,
    draws: &[(Kernel, Vec<ParallelClass>)],
    n: usize,
    rule: &StopRule,
    kernels: &mut [KernelResult],
    warnings: &mut Vec<String>,
    on_step: &mut dyn FnMut(),
) -> Result<(), PlacementError> {
    for (kernel, classes) in draws {
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
                    warnings.push(CANCELLED.into());
                    return Ok(());
                }
                placements.push(run_parallel_one(m, *kernel, n, run, rule)?);
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
    Ok(())
}

/// Each kernel's sensitivity, over its serial placements or its parallel
/// ones with their contention classes as classes, and (serial) whether a
/// non-local placement of lower contention beat the all-local one.
fn judge(kernels: &mut [KernelResult], measurable: bool) {
    for k in kernels {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;
    use crate::measure::compare::ALPHA;

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
        // --every-case: the study's 4 thread nodes x 4^3 operand nodes.
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
