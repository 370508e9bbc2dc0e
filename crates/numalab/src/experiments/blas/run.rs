//! Measuring one placement: the operands placed from the pinned thread,
//! their pages checked, the kernel timed on them; and the dimension that
//! fits every placement in free memory.

use super::{
    BlasRequest, Kernel, OperandPlacement, PlacementResult, PlannedRun, DEFAULT_N,
    MIN_SAMPLE_SECONDS, MIN_SCALED_N,
};
use crate::machine::Machine;
use crate::measure::blas;
use crate::measure::harness::{check_buffer, BufferCheck, Figure};
use crate::measure::kernels::{run_pass, BandwidthKernel, Isa};
use crate::measure::stats::{measure, Better, StopRule};
use crate::placement::{
    check_plan, pin_current_thread, BufferDemand, BufferSpec, MemoryPolicy, PlacedBuffer,
    PlacementError,
};
use crate::IdSet;
use std::time::Instant;

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
pub(super) fn fit_n(
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
pub(super) fn call(
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
pub(super) fn run_one(
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
pub(super) fn place_operands(
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
pub(super) fn operand_slices(
    bufs: &mut [PlacedBuffer],
    kernel: Kernel,
    n: usize,
) -> Vec<&mut [f64]> {
    bufs.iter_mut()
        .zip(kernel.elements(n))
        .map(|(b, e)| &mut doubles(b)[..e])
        .collect()
}

/// Times one call; returns its seconds (for sizing samples).
pub(super) fn time_one_call(
    kernel: Kernel,
    n: usize,
    ops: &mut [&mut [f64]],
) -> Result<f64, PlacementError> {
    let t = Instant::now();
    call(kernel, n, ops, false)?;
    Ok(t.elapsed().as_secs_f64().max(1e-9))
}

/// Calls per sample: small kernels are repeated so that a sample lasts at
/// least MIN_SAMPLE_SECONDS.
pub(super) fn calls_for(once: f64) -> u64 {
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
