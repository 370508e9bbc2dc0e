//! The parallel mode: one thread per CPU node, placements drawn per
//! contention class of the placement distribution model, all threads
//! calling the kernel together.

use super::plan::too_many;
use super::run::{call, calls_for, operand_slices, place_operands, time_one_call};
use super::{BlasRequest, Kernel, OperandPlacement, MAX_RUNS};
use crate::machine::Machine;
use crate::measure::harness::Figure;
use crate::measure::sample_clock::Gate;
use crate::measure::stats::{measure, Better, StopRule};
use crate::placement::PlacementError;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

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
pub(super) fn range_label(low: f64, high: f64) -> String {
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
            time_limit: None,
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

/// One thread's setup: where its operands are, and the seconds of one
/// call (for sizing samples).
type Setup = Result<(Vec<OperandPlacement>, f64), PlacementError>;

/// What the threads of a parallel placement and the measuring thread share.
struct Shared {
    /// A gate, not a barrier: a thread the system refuses opens it, and the
    /// ones that started leave before the sampling barriers.
    ready: Gate,
    refused: AtomicBool,
    start: Barrier,
    end: Barrier,
    stop: AtomicBool,
    call_failed: AtomicBool,
    calls: AtomicU64,
    setups: Mutex<Vec<Option<Setup>>>,
}

impl Shared {
    /// For `t` threads and the measuring thread.
    fn new(t: usize) -> Self {
        Shared {
            ready: Gate::new(t + 1),
            refused: AtomicBool::new(false),
            start: Barrier::new(t + 1),
            end: Barrier::new(t + 1),
            stop: AtomicBool::new(false),
            call_failed: AtomicBool::new(false),
            calls: AtomicU64::new(1),
            setups: Mutex::new((0..t).map(|_| None).collect()),
        }
    }
}

/// Places every thread's operands from that thread, then measures all
/// threads calling the kernel together: a sample starts them at one
/// barrier and ends when the last one reaches the next.
pub(super) fn run_parallel_one(
    m: &Machine,
    kernel: Kernel,
    n: usize,
    run: &ParallelRun,
    rule: &StopRule,
) -> Result<ParallelPlacement, PlacementError> {
    let shared = Shared::new(run.threads.len());
    std::thread::scope(|s| {
        for (i, th) in run.threads.iter().enumerate() {
            let sh = &shared;
            let started = crate::placement::sys::spawn_scoped(s, "a BLAS thread", move || {
                parallel_thread(m, kernel, n, th, i, sh)
            });
            if let Err(e) = started {
                shared.refused.store(true, Ordering::Release);
                shared.ready.open();
                return Err(e);
            }
        }
        shared.ready.wait();
        let result = measure_together(kernel, n, run, rule, &shared);
        shared.stop.store(true, Ordering::Release);
        shared.start.wait();
        result
    })
}

/// Thread `i` of a parallel placement: places its operands and times one
/// call, reports that, then calls the kernel between the start and end
/// barriers of every sample until stopped.
fn parallel_thread(
    m: &Machine,
    kernel: Kernel,
    n: usize,
    th: &ParallelThread,
    i: usize,
    sh: &Shared,
) {
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
    if let Ok(mut v) = sh.setups.lock() {
        v[i] = Some(setup);
    }
    sh.ready.wait();
    if sh.refused.load(Ordering::Acquire) {
        return;
    }
    let mut flip = true;
    loop {
        sh.start.wait();
        if sh.stop.load(Ordering::Acquire) {
            break;
        }
        if let Some(bufs) = kept.as_mut() {
            let mut ops = operand_slices(bufs, kernel, n);
            for _ in 0..sh.calls.load(Ordering::Acquire) {
                if call(kernel, n, &mut ops, flip).is_err() {
                    sh.call_failed.store(true, Ordering::Release);
                }
                flip = !flip;
            }
            std::hint::black_box(&ops);
        }
        sh.end.wait();
    }
}

/// The measuring thread's part once every thread is set up: their setups
/// (or the first failure), then samples of all threads calling together.
fn measure_together(
    kernel: Kernel,
    n: usize,
    run: &ParallelRun,
    rule: &StopRule,
    sh: &Shared,
) -> Result<ParallelPlacement, PlacementError> {
    let t = run.threads.len();
    let flops = kernel.flops(n);
    let taken: Vec<Option<Setup>> = sh
        .setups
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
    match failure {
        Some(e) => Err(e),
        None => {
            let per_sample = calls_for(slowest);
            sh.calls.store(per_sample, Ordering::Release);
            let mt = measure(rule, || {
                let t0 = Instant::now();
                sh.start.wait();
                sh.end.wait();
                if sh.call_failed.load(Ordering::Acquire) {
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
    }
}
