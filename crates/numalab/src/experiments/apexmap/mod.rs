//! `numalab apexmap`: the Apex-MAP locality map and its simple model.
//!
//! Apex-MAP (Strohmaier and Shan) describes a workload by two numbers: the
//! temporal locality `alpha` and the spatial locality `L`. The buffer of `M`
//! blocks of `L` 8-byte words is accessed one block at a time; the block index
//! is `floor(M * r^(1/alpha))` with `r` uniform in `[0, 1)`: `alpha = 1` is
//! uniform random over the buffer, small `alpha` concentrates the accesses at
//! its start (`P(index < k) = (k / M)^alpha`; at `alpha = 0.001` over 10^6
//! blocks, 98.6% of the accesses go to block 0).
//!
//! How it is measured here:
//! - The block indexes are computed before the timed loop: a stream of `S`
//!   indexes, `S` = the number of units of the buffer (a unit is a 64-byte line,
//!   or a block when blocks are larger), at least 2^16 and at most 2^25. The
//!   `r` are drawn stratified: one uniform draw in each of `S` equal strata
//!   of `[0, 1)`, the strata in a random order. Each `r` is still uniform, so
//!   the index distribution is exactly the power law, and at `alpha = 1` every
//!   unit is visited exactly once per lap of the stream in random order, which
//!   is what the engine's random pointer chase does: `(alpha = 1, L = 1)` and the
//!   chase see the same cache reuse and measure the same latency.
//! - Accesses are dependent: the address of the next block adds
//!   `first word of this block & zero` (`zero` is 0 at run time but opaque to
//!   the compiler) to the next index, so the next block cannot be reached
//!   before this block's first word arrived. At `L = 1` a step is one
//!   dependent load, exactly a pointer chase step (latency). The `L` words of
//!   a block are read with the `read` bandwidth kernel, whose sum goes to a
//!   sink, not into the next address: the block's reads overlap the next
//!   block's first load as far as the core's window allows, so large `L`
//!   gives bandwidth and small `L` is latency plus the kernel's fixed cost.
//! - A sample is a fixed number of steps continuing along the stream; the
//!   statistics engine repeats samples under the point's [`StopRule`].
//!
//! The model (the Apex-MAP study's "latency + bytes / bandwidth for memory
//! and cache", docs/apexmap.md): the levels are the data caches of the machine model (the largest
//! cache of each level) and memory. A cache of `C` bytes is assumed to hold
//! the `floor(C / 8L)` hottest blocks, which are the first ones, so the share
//! of accesses it serves is `F(C) = min(1, floor(C / 8L) / M)^alpha` minus
//! what the smaller levels serve; memory serves the rest. The time of one
//! access is `sum over levels of P(level) * (latency(level) + 8L /
//! bandwidth(level))`. The `P` come from the power law and the cache sizes;
//! the latency and bandwidth of each level are fitted by least squares on
//! the relative error over all points (the model is linear in latency and
//! 1/bandwidth), constrained physically: every latency and 1/bandwidth is
//! non-negative and each deeper level is at least as slow as the one above
//! it (latency not lower, bandwidth not higher). The constraint is exact,
//! not a repair after the fit: each level's latency is written as the
//! latency of the level above plus a non-negative increment (and so its
//! 1/bandwidth), which makes the model linear in the increments with only
//! non-negativity left; that problem is solved by non-negative least squares
//! and the levels are the running sums of the increments. A fit with more
//! parameters (two per level some point depends on) than points is refused
//! with a warning: it would fit noise. The residual of a point is
//! `measured / model - 1`.
//!
//! The published model ([`PublishedModel`]): the Apex-MAP study describes a
//! machine by the latency and bandwidth to the L2 cache and to memory only,
//! in cycles. The same fit with two levels, the L2 (serving every access
//! its capacity holds, the L1's included) and memory, gives it; cycles use
//! the CPU's frequency as the kernel reports it ([`cpu_frequency`]), and
//! where no frequency is known no cycle count is given.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the map after the point in
//! progress: `points` then holds the points measured so far (and the model
//! is fitted to them when there are enough).

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::harness::{pinned_buffer, verification_of, Figure, Verification, WorkerReport};
use crate::measure::kernels::{run_pass, BandwidthKernel, Isa};
use crate::measure::stats::{measure, median, Better, Measurement, StopRule, Summary};
use crate::placement::{check_plan, sys, BufferDemand, MemoryPolicy, PlacementError, Thp};
use crate::random::SplitMix64;
use crate::serde_util::{f64_or_nan, vec_f64_or_nan};
use crate::text::format;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

mod copies;
mod model;
pub use copies::*;
pub use model::*;

/// Largest spatial locality, in 8-byte words per access.
pub const MAX_L: usize = 65536;
/// Default temporal localities.
pub const DEFAULT_ALPHAS: [f64; 5] = [0.001, 0.01, 0.1, 0.5, 1.0];
/// Default spatial localities: powers of 4 from 1 to 65536 words.
pub const DEFAULT_LS: [usize; 9] = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536];
/// From this `L` on (2 KiB blocks), a block is read with the `read`
/// bandwidth kernel; shorter blocks with an inline integer loop, which
/// avoids the kernel's fixed cost of some 50 cycles per call.
pub const KERNEL_MIN_L: usize = 256;
/// Fewest and most indexes in a point's stream.
pub const MIN_STREAM: usize = 1 << 16;
pub const MAX_STREAM: usize = 1 << 25;

/// Checks a temporal locality: in (0, 1].
pub fn check_alpha(a: f64) -> Result<f64, String> {
    if a.is_finite() && a > 0.0 && a <= 1.0 {
        Ok(a)
    } else {
        Err(format!(
            "alpha {a} is not in (0, 1] (1 = uniform random over the buffer, small = concentrated)"
        ))
    }
}

/// Checks a spatial locality: a whole number of words from 1 to [`MAX_L`].
pub fn check_l(l: usize) -> Result<usize, String> {
    if (1..=MAX_L).contains(&l) {
        Ok(l)
    } else {
        Err(format!("L {l} is not a number of words from 1 to {MAX_L}"))
    }
}

/// What to measure.
#[derive(Debug, Clone)]
pub struct ApexRequest {
    pub cpu: u32,
    pub policy: MemoryPolicy,
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    pub alphas: Vec<f64>,
    pub ls: Vec<usize>,
    pub isa: Isa,
    /// Rule of each point (its budget is per point).
    pub rule: StopRule,
    pub seed: u64,
}

/// One (alpha, L) point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApexPoint {
    #[serde(deserialize_with = "f64_or_nan")]
    pub alpha: f64,
    /// Words per access.
    pub l: usize,
    pub block_bytes: u64,
    /// Blocks in the buffer (`M`).
    pub blocks: u64,
    pub stream_len: usize,
    pub steps_per_sample: u64,
    /// ns per access (per block of L words).
    pub ns: Figure,
    /// Program bytes per second of the block reads, 1e9 B/s.
    pub gbps: Figure,
    /// Bytes of the distinct lines (or blocks) the stream touches.
    pub footprint_bytes: u64,
    /// Bytes of the first blocks, which take 99% of the accesses (power law).
    pub hot99_bytes: u64,
    /// Share of the accesses each model level serves (same order as the model's levels).
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub level_share: Vec<f64>,
    /// The fitted model's ns per access; `None` without a fit.
    pub model_ns: Option<f64>,
    /// `ns.median / model_ns - 1`.
    pub residual: Option<f64>,
    pub samples: usize,
    pub stop_reason: crate::measure::stats::StopReason,
    /// Packed or unpacked: each copy's figures, in the order of the
    /// result's `copy_cpus` (`ns`, `gbps` and `samples` of the point are
    /// then the median over copies of each figure and the fewest samples of
    /// a copy); empty for a single map.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub copies: Vec<CopyPoint>,
    /// Packed or unpacked: `(slowest - fastest) / median` of the copies'
    /// median ns: how far the copies disagree at this point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy_spread: Option<f64>,
}

/// One copy's figures at one point.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CopyPoint {
    pub cpu: u32,
    /// ns per access of this copy.
    pub ns: Figure,
    /// 1e9 B/s of this copy's block reads.
    pub gbps: Figure,
    pub samples: usize,
}

/// How many copies of the map run at once, and where (the Cray/NERSC
/// study's packed and unpacked runs of Apex-MAP).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Copies {
    /// One copy on the request's CPU, the rest of the machine idle.
    #[default]
    Single,
    /// One copy on each core of the request's CPU's node (one CPU per core),
    /// all sharing the node's memory controller.
    Packed,
    /// One copy on one core of each node with CPUs (the request's CPU on
    /// its own node), the other cores idle.
    Unpacked,
    /// Unpacked, then packed: the difference map and the prediction of
    /// packed from unpacked ([`run_packing_comparison`]).
    Both,
}

impl Copies {
    pub const NAMES: &'static [&'static str] = &["single", "packed", "unpacked", "both"];

    pub fn name(self) -> &'static str {
        match self {
            Copies::Single => "single",
            Copies::Packed => "packed",
            Copies::Unpacked => "unpacked",
            Copies::Both => "both",
        }
    }

    pub fn parse(text: &str) -> Result<Self, String> {
        match text {
            "single" => Ok(Copies::Single),
            "packed" => Ok(Copies::Packed),
            "unpacked" => Ok(Copies::Unpacked),
            "both" => Ok(Copies::Both),
            _ => Err(format!(
                "'{text}' is not a copies mode; valid: single, packed, unpacked, both"
            )),
        }
    }
}

/// One level of the model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelLevel {
    pub name: String,
    /// Capacity in bytes (`None`: memory).
    pub capacity_bytes: Option<u64>,
    /// Fitted latency, ns; `None` when no point depends on this level.
    pub latency_ns: Option<f64>,
    /// Fitted bandwidth, 1e9 B/s; `None` when no point depends on it or the
    /// fit gives its bytes no cost (unbounded).
    pub bandwidth_gbps: Option<f64>,
}

/// The fitted model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApexModel {
    pub method: String,
    pub levels: Vec<ModelLevel>,
    /// Root mean square of the residuals.
    #[serde(deserialize_with = "f64_or_nan")]
    pub rms_residual: f64,
    /// The point whose residual has the largest magnitude.
    pub worst: WorstPoint,
}

/// Where the machine departs most from the model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorstPoint {
    #[serde(deserialize_with = "f64_or_nan")]
    pub alpha: f64,
    pub l: usize,
    /// `measured / model - 1`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub residual: f64,
}

/// One level of the published model, in ns and in cycles.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PublishedLevel {
    /// Capacity in bytes (`None`: memory).
    pub capacity_bytes: Option<u64>,
    pub latency_ns: Option<f64>,
    /// `None` when the frequency is unknown.
    pub latency_cycles: Option<f64>,
    /// `None` when the fit gives its bytes no cost (unbounded).
    pub bandwidth_gbps: Option<f64>,
    pub bytes_per_cycle: Option<f64>,
}

/// The Apex-MAP study's model: latency and bandwidth to the L2 and to
/// memory, in ns and cycles.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PublishedModel {
    pub method: String,
    pub l2: PublishedLevel,
    pub memory: PublishedLevel,
    /// The core clock the cycles are counted in; `None`: unknown, no cycles.
    pub frequency_mhz: Option<f64>,
    /// Where the frequency was read, or "unknown frequency".
    pub frequency_source: String,
    #[serde(deserialize_with = "f64_or_nan")]
    pub rms_residual: f64,
}

/// The outcome of [`run_apexmap`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApexResult {
    /// The request's CPU (with copies, the CPU of the copy on its node).
    pub cpu: u32,
    /// Single, packed or unpacked.
    #[serde(default)]
    pub copies: Copies,
    /// The CPU of each copy, in order (one for a single map).
    #[serde(default)]
    pub copy_cpus: Vec<u32>,
    pub policy: String,
    pub buffer_bytes: u64,
    pub isa: Isa,
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub alphas: Vec<f64>,
    pub ls: Vec<usize>,
    /// Row-major: every L of the first alpha, then the next alpha.
    pub points: Vec<ApexPoint>,
    /// The multi-level fit (every data cache and memory).
    pub model: Option<ApexModel>,
    /// The study's model (L2 and memory only), beside `model`.
    #[serde(default)]
    pub published_model: Option<PublishedModel>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    pub warnings: Vec<String>,
    pub verification: Verification,
}

impl ApexResult {
    /// The point of (alpha, L), if measured.
    pub fn point(&self, alpha: f64, l: usize) -> Option<&ApexPoint> {
        self.points.iter().find(|p| p.alpha == alpha && p.l == l)
    }
}

/// Model levels: the data caches of the machine, smallest first, then memory.
pub fn model_levels(m: &Machine) -> Vec<(String, Option<u64>)> {
    let mut v: Vec<(String, Option<u64>)> = crate::experiments::sizes::cache_marks(m)
        .into_iter()
        .map(|c| (c.name, Some(c.bytes)))
        .collect();
    v.push(("memory".into(), None));
    v
}

/// Share of accesses served by each level for a point (capacities of
/// `levels`, the last being memory).
pub fn level_shares(
    levels: &[(String, Option<u64>)],
    alpha: f64,
    l: usize,
    blocks: u64,
) -> Vec<f64> {
    let mut out = Vec::with_capacity(levels.len());
    let mut below = 0.0;
    for (_, cap) in levels {
        let f = match cap {
            None => 1.0,
            Some(c) => {
                let k = c / (8 * l as u64);
                if k == 0 {
                    0.0
                } else {
                    (k as f64 / blocks.max(1) as f64).min(1.0).powf(alpha)
                }
            }
        };
        let f = f.max(below);
        out.push(f - below);
        below = f;
    }
    out
}

/// Stream length for a point: units of the buffer, within the bounds.
pub fn stream_len(buffer_bytes: usize, l: usize) -> usize {
    (buffer_bytes / (8 * l).max(64)).clamp(MIN_STREAM, MAX_STREAM)
}

/// The block indexes of a point (`seed` picks the draws): element `k` is
/// the power law applied to a uniform draw in stratum `perm[k]` of the
/// `perm.len()` equal strata of [0, 1).
pub fn power_law_stream(alpha: f64, blocks: u64, perm: &[u32], seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    let s = perm.len() as f64;
    let inv = 1.0 / alpha;
    let top = blocks.saturating_sub(1);
    perm.iter()
        .map(|&p| {
            let r = (p as f64 + rng.unit()) / s;
            let x = if alpha == 1.0 { r } else { r.powf(inv) };
            ((blocks as f64 * x) as u64).min(top) as u32
        })
        .collect()
}

/// A seeded random permutation of `0..n` (the strata order of [`power_law_stream`]).
pub fn random_permutation(n: usize, seed: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n as u32).collect();
    SplitMix64::new(seed).shuffle(&mut v);
    v
}

/// Blocks that take 99% of the accesses: the smallest k with (k/M)^alpha >= 0.99.
pub fn hot99_blocks(alpha: f64, blocks: u64) -> u64 {
    ((blocks as f64 * 0.99f64.powf(1.0 / alpha)).ceil() as u64).clamp(1, blocks.max(1))
}

/// Bytes of the distinct units (lines, or blocks when larger) the stream touches.
fn footprint(stream: &[u32], l: usize, buffer_bytes: usize) -> u64 {
    let unit = (8 * l).max(64);
    let units = buffer_bytes / unit + 1;
    let mut seen = vec![0u64; units.div_ceil(64)];
    let mut count = 0u64;
    for &b in stream {
        let u = b as usize * 8 * l / unit;
        let (w, bit) = (u / 64, 1u64 << (u % 64));
        if seen[w] & bit == 0 {
            seen[w] |= bit;
            count += 1;
        }
    }
    count * unit as u64
}

/// `steps` dependent block reads from `pos` on (wrapping along the stream).
/// The next block's address depends on the first word of the current one;
/// the block itself is read with the `read` kernel, whose result only feeds
/// a sink (so a block's reads overlap the next block's first load, as far as
/// the core's window allows).
#[inline(never)]
fn run_steps(
    buf: &mut [f64],
    stream: &[u32],
    pos: &mut usize,
    steps: u64,
    l: usize,
    isa: Isa,
    zero: u64,
) -> u64 {
    let n = stream.len();
    let mut p = *pos;
    let mut dep = 0u64;
    let mut sink = 0u64;
    if l == 1 {
        for _ in 0..steps {
            let off = stream[p] as usize + dep as usize;
            dep = buf[off].to_bits() & zero;
            p += 1;
            if p == n {
                p = 0;
            }
        }
    } else if l < KERNEL_MIN_L {
        for _ in 0..steps {
            let off = stream[p] as usize * l + dep as usize;
            dep = buf[off].to_bits() & zero;
            let mut s = 0u64;
            for w in &buf[off..off + l] {
                s = s.wrapping_add(w.to_bits());
            }
            sink = sink.wrapping_add(s);
            p += 1;
            if p == n {
                p = 0;
            }
        }
    } else {
        for _ in 0..steps {
            let off = stream[p] as usize * l + dep as usize;
            dep = buf[off].to_bits() & zero;
            let mut blk = [&mut buf[off..off + l]];
            let v = run_pass(BandwidthKernel::Read, isa, &mut blk, 0.0);
            sink = sink.wrapping_add(v.to_bits());
            p += 1;
            if p == n {
                p = 0;
            }
        }
    }
    *pos = p;
    dep ^ sink
}

/// Runs the map on the request's CPU; `progress` is called before each point.
pub fn run_apexmap(
    m: &Machine,
    req: &ApexRequest,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<ApexResult, PlacementError> {
    run_copies(m, req, Copies::Single, &[req.cpu], progress)
}

/// Runs the map as `copies` says: single (as [`run_apexmap`]), packed
/// ([`packed_cpus`]) or unpacked ([`unpacked_cpus`]); both is
/// [`run_packing_comparison`]. `progress` is called before each point.
pub fn run_apexmap_copies(
    m: &Machine,
    req: &ApexRequest,
    copies: Copies,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<ApexResult, PlacementError> {
    let cpus = match copies {
        Copies::Single => vec![req.cpu],
        Copies::Packed => packed_cpus(m, req.cpu)?,
        Copies::Unpacked => unpacked_cpus(m, req.cpu, false)?,
        Copies::Both => {
            return Err(PlacementError::Invalid(
                "copies both is two maps: run_packing_comparison".into(),
            ))
        }
    };
    run_copies(m, req, copies, &cpus, progress)
}
/// What every point of a map shares.
pub(super) struct Map<'a> {
    req: &'a ApexRequest,
    /// The request's alphas and Ls, sorted, without duplicates.
    alphas: Vec<f64>,
    ls: Vec<usize>,
    levels: Vec<(String, Option<u64>)>,
    llc: u64,
    /// 0 at run time, opaque to the compiler (see [`run_steps`]).
    zero: u64,
    /// Seconds of one sample: as long as the harness's (20 ms), shorter for
    /// small budgets.
    sample_target: f64,
}

impl<'a> Map<'a> {
    fn new(m: &Machine, req: &'a ApexRequest) -> Self {
        let mut alphas = req.alphas.clone();
        alphas.sort_by(f64::total_cmp);
        alphas.dedup();
        let mut ls = req.ls.clone();
        ls.sort_unstable();
        ls.dedup();
        Map {
            req,
            alphas,
            ls,
            levels: model_levels(m),
            llc: m.last_level_cache_bytes().unwrap_or(32 << 20),
            zero: std::hint::black_box(0u64),
            sample_target: (req.rule.budget.as_secs_f64() / 10.0).clamp(0.001, 0.02),
        }
    }

    /// Every point, L by L (the strata permutation is drawn once per stream
    /// length), until done or cancelled, in step with the other copies
    /// (`together`); in row-major order (every L of the first alpha, then
    /// the next alpha).
    fn points(
        &self,
        data: &mut [f64],
        mut progress: Option<&mut (dyn FnMut(&str) + Send)>,
        together: &Together,
        warnings: &mut Vec<String>,
    ) -> Result<Vec<ApexPoint>, PlacementError> {
        let mut grid: Vec<Option<ApexPoint>> = vec![None; self.alphas.len() * self.ls.len()];
        let mut perm: (usize, Vec<u32>) = (0, Vec::new());
        let mut round = 0usize;
        'points: for (li, &l) in self.ls.iter().enumerate() {
            let slen = stream_len(self.req.buffer_bytes, l);
            if perm.0 != slen {
                perm = (slen, random_permutation(slen, self.req.seed ^ slen as u64));
            }
            // Larger alphas first: each point then starts from caches holding
            // more than it needs, not less.
            for (ai, &alpha) in self.alphas.iter().enumerate().rev() {
                if !together.proceed()? {
                    break 'points;
                }
                if let Some(p) = progress.as_mut() {
                    p(&format!("apexmap alpha {alpha} L {l}"));
                }
                round += 1;
                let point = self.point(data, alpha, l, &perm.1, together, round, warnings)?;
                grid[ai * self.ls.len() + li] = Some(point);
            }
        }
        Ok(grid.into_iter().flatten().collect())
    }

    /// One point: its stream drawn (strata order `perm`), the caches warmed,
    /// the samples sized, then measured under the request's rule, the
    /// `round`th point in step with the other copies.
    #[allow(clippy::too_many_arguments)]
    fn point(
        &self,
        data: &mut [f64],
        alpha: f64,
        l: usize,
        perm: &[u32],
        together: &Together,
        round: usize,
        warnings: &mut Vec<String>,
    ) -> Result<ApexPoint, PlacementError> {
        let req = self.req;
        let blocks = (req.buffer_bytes / 8 / l) as u64;
        let seed = req.seed ^ ((l as u64) << 20) ^ alpha.to_bits();
        let stream = power_law_stream(alpha, blocks, perm, seed);
        let mut pos = 0usize;
        // `k` more steps along the stream.
        let mut go = |k: u64| {
            std::hint::black_box(run_steps(data, &stream, &mut pos, k, l, req.isa, self.zero));
        };
        self.warm_up(&mut go, stream.len(), l);
        let steps = self.steps_per_sample(&mut go);
        // The copies' timed samples start together, and each copy keeps
        // loading its memory until every copy has finished them: no copy is
        // timed while another is idle.
        together.meet.wait()?;
        let meas: Measurement = measure(&req.rule, || {
            let t0 = Instant::now();
            go(steps);
            t0.elapsed().as_secs_f64() * 1e9 / steps as f64
        });
        together.finished.fetch_add(1, Ordering::AcqRel);
        let all = together.meet.parties * round;
        while together.finished.load(Ordering::Acquire) < all {
            if together.meet.aborted() {
                return Err(PlacementError::Os(ABORTED.into()));
            }
            go(steps.div_ceil(4));
        }
        for w in meas.warnings() {
            warnings.push(format!("alpha {alpha} L {l}: {w}"));
        }
        let bytes = (8 * l) as f64;
        let gb: Vec<f64> = meas.samples.iter().map(|ns| bytes / ns).collect();
        let gbps = Summary::of(&gb)
            .map(|s| Figure::of(&s, Better::Higher, 1.0))
            .unwrap_or_else(|| Figure::of(&meas.summary, Better::Higher, 1.0));
        Ok(ApexPoint {
            alpha,
            l,
            block_bytes: 8 * l as u64,
            blocks,
            stream_len: stream.len(),
            steps_per_sample: steps,
            ns: Figure::of(&meas.summary, Better::Lower, 1.0),
            gbps,
            footprint_bytes: footprint(&stream, l, req.buffer_bytes),
            hot99_bytes: hot99_blocks(alpha, blocks) * 8 * l as u64,
            level_share: level_shares(&self.levels, alpha, l, blocks),
            model_ns: None,
            residual: None,
            samples: meas.samples.len(),
            stop_reason: meas.stop_reason,
            copies: Vec::new(),
            copy_spread: None,
        })
    }

    /// Warms the caches up: two LLCs' worth of units (lines, or blocks when
    /// larger) or one lap of the stream, in growing chunks, for at most half
    /// the point's budget.
    fn warm_up(&self, go: &mut impl FnMut(u64), stream_len: usize, l: usize) {
        let unit = (8 * l).max(64);
        let warm_steps = (stream_len as u64).min((2 * self.llc / unit as u64).max(1024));
        let warm_until = Instant::now() + self.req.rule.budget.mul_f64(0.5);
        let mut done = 0u64;
        let mut chunk = 64u64;
        while done < warm_steps && Instant::now() < warm_until && !cancel::requested() {
            let k = chunk.min(warm_steps - done);
            go(k);
            done += k;
            chunk = (chunk * 2).min(1 << 16);
        }
    }

    /// Steps of a sample of about `sample_target` seconds, from a run long
    /// enough to time (2 ms, or 2^30 steps).
    fn steps_per_sample(&self, go: &mut impl FnMut(u64)) -> u64 {
        let mut steps = 16u64;
        let per_step = loop {
            let t0 = Instant::now();
            go(steps);
            let t = t0.elapsed().as_secs_f64();
            if t >= 0.002 || steps >= 1 << 30 {
                break t / steps as f64;
            }
            steps *= 4;
        };
        ((self.sample_target / per_step.max(1e-10)) as u64).clamp(16, 1 << 32)
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpha_and_l_ranges() {
        assert!(check_alpha(1.0).is_ok() && check_alpha(0.001).is_ok());
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(check_alpha(bad).unwrap_err().contains("(0, 1]"));
        }
        assert!(check_l(1).is_ok() && check_l(65536).is_ok());
        assert!(check_l(0).is_err() && check_l(65537).is_err());
    }

    #[test]
    fn uniform_stream_visits_every_line_once_per_lap() {
        // alpha = 1, L = 1: 8 words per line, one index per line.
        let lines = MIN_STREAM;
        let blocks = 8 * lines as u64;
        let perm = random_permutation(lines, 7);
        let s = power_law_stream(1.0, blocks, &perm, 3);
        let mut per_line = vec![0u32; lines];
        for &b in &s {
            per_line[b as usize / 8] += 1;
        }
        assert!(per_line.iter().all(|&c| c == 1));
        assert_eq!(footprint(&s, 1, lines * 64), (lines * 64) as u64);
    }

    #[test]
    fn streams_are_pinned() {
        // A seed's addresses must never change between versions.
        let perm = random_permutation(12, 7);
        assert_eq!(perm, [8, 7, 11, 10, 6, 2, 1, 3, 5, 9, 0, 4]);
        assert_eq!(
            power_law_stream(0.5, 1000, &perm, 3),
            [457, 411, 936, 704, 268, 48, 8, 105, 209, 679, 3, 154]
        );
        let big = random_permutation(MIN_STREAM, 0x5eed ^ MIN_STREAM as u64);
        assert_eq!(big[..6], [23833, 13898, 63281, 44130, 32331, 35393]);
    }

    #[test]
    fn power_law_histogram_matches_the_cdf() {
        let n = 1 << 18;
        let blocks = 1000u64;
        let perm = random_permutation(n, 1);
        for alpha in [0.01, 0.1, 0.5] {
            let s = power_law_stream(alpha, blocks, &perm, 9);
            for k in [1u64, 10, 100, 500] {
                let got = s.iter().filter(|&&b| (b as u64) < k).count() as f64 / n as f64;
                let want = (k as f64 / blocks as f64).powf(alpha);
                assert!(
                    (got - want).abs() < 2e-3,
                    "alpha {alpha} k {k}: {got} vs {want}"
                );
            }
        }
        assert_eq!(hot99_blocks(0.001, 128), 1);
        assert_eq!(hot99_blocks(1.0, 100), 99);
    }

    #[test]
    fn shares_follow_cache_sizes() {
        let levels = vec![
            ("L1".to_string(), Some(32 << 10)),
            ("L2".to_string(), Some(1 << 20)),
            ("memory".to_string(), None),
        ];
        // Uniform over 4 MiB of 8-byte words: L1 1/128, L2 1/4 - 1/128, memory 3/4.
        let sh = level_shares(&levels, 1.0, 1, 1 << 19);
        assert!((sh[0] - 1.0 / 128.0).abs() < 1e-12);
        assert!((sh[1] - (0.25 - 1.0 / 128.0)).abs() < 1e-12);
        assert!((sh[2] - 0.75).abs() < 1e-12);
        // A block larger than L1 never counts as served by it.
        let sh = level_shares(&levels, 0.001, 8192, 64);
        assert_eq!(sh[0], 0.0);
        assert!((sh.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn fit_recovers_a_synthetic_machine() {
        let levels = vec![
            ("L1".to_string(), Some(32 << 10)),
            ("L2".to_string(), Some(1 << 20)),
            ("memory".to_string(), None),
        ];
        let (lat, bw) = ([1.0, 5.0, 90.0], [100.0, 40.0, 10.0]);
        let mut pts = Vec::new();
        for alpha in DEFAULT_ALPHAS {
            for l in DEFAULT_LS {
                let blocks = ((64u64 << 20) / 8 / l as u64).max(1);
                let sh = level_shares(&levels, alpha, l, blocks);
                let bytes = 8.0 * l as f64;
                let t: f64 = (0..3).map(|i| sh[i] * (lat[i] + bytes / bw[i])).sum();
                pts.push((sh, bytes, t));
            }
        }
        let (fl, fi) = fit_model(3, &pts).unwrap();
        assert_monotone(&fl, &fi);
        for i in 0..3 {
            let l = fl[i].unwrap();
            let b = 1.0 / fi[i].unwrap();
            assert!((l - lat[i]).abs() < 0.05 * lat[i] + 0.05, "lat {i}: {l}");
            assert!((b - bw[i]).abs() < 0.05 * bw[i], "bw {i}: {b}");
        }
        assert!(fit_model(3, &pts[..1]).is_err());
    }

    /// Latency non-decreasing and 1/bandwidth non-decreasing with depth.
    fn assert_monotone(lat: &[Option<f64>], inv: &[Option<f64>]) {
        let ok = |v: &[Option<f64>]| {
            let v: Vec<f64> = v.iter().flatten().copied().collect();
            v.iter().all(|x| *x >= 0.0) && v.windows(2).all(|w| w[0] <= w[1] + 1e-12)
        };
        assert!(ok(lat), "latency {lat:?}");
        assert!(ok(inv), "1/bandwidth {inv:?}");
    }

    /// Points of a machine whose "L3" is slower than memory, as a noisy
    /// host can measure it (the L3 at 206 ns and 12 GB/s, memory at 127 ns
    /// and 62 GB/s).
    fn inverted_points() -> Vec<(Vec<f64>, f64, f64)> {
        let levels = vec![
            ("L1".to_string(), Some(32 << 10)),
            ("L2".to_string(), Some(1 << 20)),
            ("L3".to_string(), Some(8 << 20)),
            ("memory".to_string(), None),
        ];
        let (lat, bw) = ([1.0, 5.0, 206.0, 127.0], [100.0, 40.0, 12.0, 62.0]);
        let mut pts = Vec::new();
        for alpha in DEFAULT_ALPHAS {
            for l in DEFAULT_LS {
                let blocks = ((64u64 << 20) / 8 / l as u64).max(1);
                let sh = level_shares(&levels, alpha, l, blocks);
                let bytes = 8.0 * l as f64;
                let t: f64 = (0..4).map(|i| sh[i] * (lat[i] + bytes / bw[i])).sum();
                pts.push((sh, bytes, t));
            }
        }
        pts
    }

    #[test]
    fn fit_keeps_deeper_levels_at_least_as_slow() {
        let pts = inverted_points();
        let (lat, inv) = fit_model(4, &pts).unwrap();
        assert_monotone(&lat, &inv);
        // The violating pair is pooled: the L3 and memory get one latency.
        let (l3, mem) = (lat[2].unwrap(), lat[3].unwrap());
        assert!(l3 <= mem + 1e-9 && mem > 127.0 && l3 < 206.0, "{lat:?}");
        // The levels above are not disturbed.
        assert!((lat[0].unwrap() - 1.0).abs() < 0.5, "{lat:?}");
        assert!((1.0 / inv[1].unwrap() - 40.0).abs() < 4.0, "{inv:?}");
    }

    #[test]
    fn fit_refuses_more_parameters_than_points() {
        let pts = inverted_points();
        // Three points for 8 parameters (4 levels all used by these points).
        let few: Vec<_> = pts.iter().rev().take(3).cloned().collect();
        let used = (0..4).filter(|&i| few.iter().any(|p| p.0[i] > 0.0)).count();
        let e = fit_model(4, &few).unwrap_err();
        assert_eq!(
            e,
            format!(
                "{} parameters (latency and bandwidth of {used} levels) but 3 points: no fit; measure more alphas and Ls",
                2 * used
            )
        );
        // As many points as parameters: fitted.
        let two_levels: Vec<_> = [(vec![1.0, 0.0], 8.0, 2.0), (vec![0.0, 1.0], 8.0, 90.0)]
            .into_iter()
            .chain([
                (vec![0.5, 0.5], 8192.0, 200.0),
                (vec![1.0, 0.0], 8192.0, 100.0),
            ])
            .collect();
        assert!(fit_model(2, &two_levels).is_ok());
        assert!(fit_model(2, &two_levels[..3]).is_err());
    }

    #[test]
    fn meet_lets_all_through_together_and_opens_on_abort() {
        let meet = Meet::new(3);
        let leaders = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..3 {
                s.spawn(|| {
                    for _ in 0..50 {
                        if meet.wait().unwrap() {
                            leaders.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        // One leader per round.
        assert_eq!(leaders.load(Ordering::Relaxed), 50);
        // A party that gives up releases the one waiting, with an error.
        let meet = Meet::new(2);
        std::thread::scope(|s| {
            let waiting = s.spawn(|| meet.wait());
            while meet.state.lock().unwrap().0 == 0 {
                std::thread::yield_now();
            }
            meet.abort();
            let e = waiting.join().unwrap().unwrap_err().to_string();
            assert!(e.contains(ABORTED), "{e}");
        });
        assert!(meet.aborted() && meet.wait().is_err());
    }

    fn point_of(ns: f64, samples: usize) -> ApexPoint {
        let f = |x: f64| Figure {
            median: x,
            best: x * 0.9,
            min: x * 0.8,
            max: x * 1.2,
            spread: 0.1,
            rel_ci: 0.01,
        };
        ApexPoint {
            alpha: 1.0,
            l: 1,
            block_bytes: 8,
            blocks: 1024,
            stream_len: 1024,
            steps_per_sample: 16,
            ns: f(ns),
            gbps: f(8.0 / ns),
            footprint_bytes: 8192,
            hot99_bytes: 8,
            level_share: vec![1.0],
            model_ns: None,
            residual: None,
            samples,
            stop_reason: crate::measure::stats::StopReason::Budget,
            copies: Vec::new(),
            copy_spread: None,
        }
    }

    fn outcome(cpu: u32, ns: f64, samples: usize) -> CopyOutcome {
        CopyOutcome {
            cpu,
            points: vec![point_of(ns, samples)],
            report: WorkerReport {
                requested_cpu: cpu,
                seen_cpus: vec![cpu],
                pinned: true,
                migrations: None,
                node: Some(0),
                buffers: Vec::new(),
                gbps: Vec::new(),
                verified: true,
            },
            warnings: Vec::new(),
        }
    }

    #[test]
    fn copies_merge_into_their_median_with_each_kept() {
        let done = [
            outcome(4, 10.0, 7),
            outcome(2, 30.0, 5),
            outcome(6, 20.0, 9),
        ];
        let p = &merge_copies(&done, true)[0];
        assert_eq!(p.ns.median, 20.0);
        assert_eq!(p.ns.best, 18.0);
        assert_eq!(p.ns.max, 24.0);
        assert_eq!(p.gbps.median, 8.0 / 20.0);
        assert_eq!(p.samples, 5);
        // (slowest - fastest) / median.
        assert_eq!(p.copy_spread, Some(1.0));
        let cpus: Vec<u32> = p.copies.iter().map(|k| k.cpu).collect();
        assert_eq!(cpus, [4, 2, 6]);
        assert_eq!(p.copies[1].ns.median, 30.0);
        assert_eq!(p.copies[1].samples, 5);
        // One copy of the single map: its own point, nothing added.
        let single = &merge_copies(&done[..1], false)[0];
        assert_eq!(single.ns.median, 10.0);
        assert!(single.copies.is_empty() && single.copy_spread.is_none());
    }

    #[test]
    fn copies_modes_parse_and_refuse() {
        for name in Copies::NAMES {
            assert_eq!(Copies::parse(name).unwrap().name(), *name);
        }
        assert_eq!(
            Copies::parse("spread").unwrap_err(),
            "'spread' is not a copies mode; valid: single, packed, unpacked, both"
        );
    }

    #[test]
    fn frequency_comes_from_the_kernel_or_is_unknown() {
        let root = std::env::temp_dir().join(format!("numalab-apexfreq-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("proc")).unwrap();
        assert_eq!(cpu_frequency(&root, 1), None);
        std::fs::write(
            root.join("proc/cpuinfo"),
            "processor\t: 0\ncpu MHz\t\t: 2400.000\n\nprocessor\t: 1\ncpu MHz\t\t: 3100.5\n\n",
        )
        .unwrap();
        assert_eq!(
            cpu_frequency(&root, 1),
            Some((3100.5, "/proc/cpuinfo cpu MHz of processor 1".into()))
        );
        assert_eq!(cpu_frequency(&root, 2), None);
        let freq = root.join("sys/devices/system/cpu/cpu1/cpufreq");
        std::fs::create_dir_all(&freq).unwrap();
        std::fs::write(freq.join("base_frequency"), "2000000\n").unwrap();
        assert_eq!(
            cpu_frequency(&root, 1),
            Some((
                2000.0,
                "/sys/devices/system/cpu/cpu1/cpufreq/base_frequency".into()
            ))
        );
        let _ = std::fs::remove_dir_all(&root);
    }
}
