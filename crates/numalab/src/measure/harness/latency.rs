//! A latency run: a pointer chase on one pinned CPU over a placed buffer,
//! and the core clock its cycles are counted at.

use super::{
    check_buffer, verification_of, BufferCheck, Figure, Verification, WorkerReport, CHASE_SEED,
    MIN_SAMPLE_SECONDS,
};
use crate::machine::Machine;
use crate::measure::chase::{Chase, ChasePattern};
use crate::measure::stats::{measure, Better, Measurement, StopRule};
use crate::placement::{
    check_plan, pin_current_thread, BufferDemand, BufferSpec, MemoryPolicy, PlacedBuffer,
    PlacementError, Thp,
};
use crate::serde_util::f64_or_nan;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A latency measurement request.
#[derive(Debug, Clone)]
pub struct LatencyRequest {
    pub cpu: u32,
    pub policy: MemoryPolicy,
    pub pattern: ChasePattern,
    pub chains: usize,
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    pub hugetlb: bool,
    pub rule: StopRule,
}

/// The outcome of a latency run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LatencyResult {
    pub pattern: ChasePattern,
    pub chains: usize,
    pub buffer_bytes: u64,
    pub steps_per_sample: u64,
    /// Nanoseconds per dependent load (each chain advances once per step).
    pub ns: Figure,
    /// Core cycles per dependent load, at the core clock measured alongside.
    pub cycles: Figure,
    #[serde(deserialize_with = "f64_or_nan")]
    pub core_ghz: f64,
    /// Nanoseconds per load over all chains (throughput view, `ns / chains`).
    #[serde(deserialize_with = "f64_or_nan")]
    pub ns_per_access: f64,
    pub measurement: Measurement,
    pub warnings: Vec<String>,
    pub verification: Verification,
}

/// Runs a pointer chase on one pinned CPU over a placed buffer.
pub fn run_latency(m: &Machine, req: &LatencyRequest) -> Result<LatencyResult, PlacementError> {
    std::thread::scope(|s| {
        crate::placement::sys::spawn_scoped(s, "the latency worker", || run_latency_pinned(m, req))?
            .join()
            .map_err(|_| PlacementError::Os("the latency worker panicked".into()))?
    })
}

fn run_latency_pinned(m: &Machine, req: &LatencyRequest) -> Result<LatencyResult, PlacementError> {
    let buffer = BufferDemand::new(req.buffer_bytes, &req.policy, Some(req.cpu));
    check_plan(
        m,
        &[vec![buffer.hugetlb(req.hugetlb)]],
        "use a smaller --size",
    )?;
    let (mut buf, check) = pinned_buffer(
        m,
        req.cpu,
        &req.policy,
        req.buffer_bytes,
        req.thp,
        req.hugetlb,
    )?;
    let buffer_bytes = buf.len() as u64;
    let mut chase = Chase::build(buf.as_mut_slice(), req.pattern, req.chains, CHASE_SEED)
        .map_err(PlacementError::Invalid)?;
    let ghz = core_ghz();
    let steps = warm_chase(m, &mut chase, MIN_SAMPLE_SECONDS);
    let meas = measure(&req.rule, || {
        let r = chase.run(steps);
        std::hint::black_box(r.sum);
        r.elapsed.as_secs_f64() * 1e9 / steps as f64
    });
    let verification = verification_of(vec![WorkerReport::pinned(m, req.cpu, check)]);
    let mut warnings = meas.warnings();
    warnings.extend(verification.warning());
    let ns = Figure::of(&meas.summary, Better::Lower, 1.0);
    Ok(LatencyResult {
        pattern: req.pattern,
        chains: chase.chains(),
        buffer_bytes,
        steps_per_sample: steps,
        ns_per_access: ns.median / chase.chains() as f64,
        cycles: Figure::of(&meas.summary, Better::Lower, ghz),
        core_ghz: ghz,
        ns,
        measurement: meas,
        warnings,
        verification,
    })
}

/// Pins the calling thread to `cpu` and makes a buffer of `size` bytes for
/// it with `policy`, first touched there, its pages checked (first-touch
/// policies expect the node of `cpu`).
pub(crate) fn pinned_buffer(
    m: &Machine,
    cpu: u32,
    policy: &MemoryPolicy,
    size: usize,
    thp: Option<Thp>,
    hugetlb: bool,
) -> Result<(PlacedBuffer, BufferCheck), PlacementError> {
    pin_current_thread(cpu)?;
    let spec = BufferSpec {
        size,
        policy: policy.clone(),
        thp,
        hugetlb,
        toucher: Some(cpu),
        weighted: Default::default(),
    };
    let buf = PlacedBuffer::new(m, &spec)?;
    let check = check_buffer(m, policy, &buf, m.node_of_cpu(cpu))?;
    Ok((buf, check))
}

/// Warms a chase up and sizes its samples in one go; returns the steps of
/// a sample of about `sample_seconds` (at least 1000). Building the chase
/// wrote every line, so the last-written ones sit in the caches: chase
/// twice the LLC's worth of lines (or one full lap, at least 10,000 steps)
/// first, so samples see the steady state.
pub(crate) fn warm_chase(m: &Machine, chase: &mut Chase, sample_seconds: f64) -> u64 {
    let llc_lines = m.last_level_cache_bytes().unwrap_or(32 << 20) / 64;
    let warm = (chase.lines_per_chain() as u64)
        .min(2 * llc_lines)
        .max(10_000);
    let probe = chase.run(warm);
    std::hint::black_box(probe.sum);
    let per_step = probe.elapsed.as_secs_f64() / warm as f64;
    ((sample_seconds / per_step.max(1e-10)) as u64).clamp(1000, 1 << 32)
}

/// The core clock in GHz, from a chain of dependent integer operations of
/// known latency; 0 when it cannot be measured. x86-64 uses `imul` (3 cycles
/// on every core since Core 2 and on Zen): plain `add reg, imm` chains are
/// folded at rename by recent Intel cores and would overstate the clock.
pub fn core_ghz() -> f64 {
    // Many short runs (~1 ms each), the fastest kept: on a busy machine a
    // long run is rarely free of preemption or steal time, a short one often is.
    let mut best = f64::MAX;
    for _ in 0..60 {
        let t = Instant::now();
        let cycles = crate::sys::kernels::dependent_cycles(50_000);
        let s = t.elapsed().as_secs_f64();
        if cycles > 0 {
            best = best.min(s / cycles as f64);
        }
    }
    if best == f64::MAX || best <= 0.0 {
        0.0
    } else {
        1e-9 / best
    }
}
