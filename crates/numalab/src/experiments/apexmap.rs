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

/// The CPUs of a packed run: one per core of `cpu`'s node that this
/// process may use (`cpu` itself on its core, the first allowed CPU of each
/// other core: SMT siblings are not separate cores), in CPU order. Refused
/// when that is one copy: packed would then be the single map.
pub fn packed_cpus(m: &Machine, cpu: u32) -> Result<Vec<u32>, PlacementError> {
    let node = m
        .node_of_cpu(cpu)
        .ok_or_else(|| PlacementError::Invalid(format!("CPU {cpu} is on no node")))?;
    let allowed = m.allowed_cpus_of(node);
    let mut cpus: Vec<u32> = if m.cores.is_empty() {
        allowed.iter().collect()
    } else {
        m.cores
            .iter()
            .filter_map(|c| {
                let mine = c.cpus.intersection(&allowed);
                if mine.contains(cpu) {
                    Some(cpu)
                } else {
                    mine.first()
                }
            })
            .collect()
    };
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.len() < 2 {
        return Err(PlacementError::Invalid(format!(
            "--copies packed needs two or more cores of node {node} that this process may use, and it has one (CPU {cpu}): packed would be one copy, the single map (--copies single)"
        )));
    }
    Ok(cpus)
}

/// The CPUs of an unpacked run: one per node with CPUs this process may
/// use (`cpu` on its own node, the first allowed CPU of every other), in
/// node order. With one such node that is one copy, the single map:
/// refused unless `allow_one` (the unpacked half of [`Copies::Both`], where
/// one copy alone on its node is the baseline packing is compared with).
pub fn unpacked_cpus(m: &Machine, cpu: u32, allow_one: bool) -> Result<Vec<u32>, PlacementError> {
    let own = m
        .node_of_cpu(cpu)
        .ok_or_else(|| PlacementError::Invalid(format!("CPU {cpu} is on no node")))?;
    let cpus: Vec<u32> = m
        .cpu_nodes()
        .iter()
        .filter_map(|n| {
            if n == own {
                Some(cpu)
            } else {
                m.allowed_cpus_of(n).first()
            }
        })
        .collect();
    if cpus.len() < 2 && !allow_one {
        return Err(PlacementError::Invalid(format!(
            "--copies unpacked needs two or more nodes with CPUs this process may use, and it has one (node {own}): unpacked would be one copy, the single map (--copies single; --copies both compares it with packed)"
        )));
    }
    Ok(cpus)
}

/// Checks the request and measures the map with one copy on each of
/// `cpus` at once (one copy: the single map).
fn run_copies(
    m: &Machine,
    req: &ApexRequest,
    copies: Copies,
    cpus: &[u32],
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<ApexResult, PlacementError> {
    req.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    if req.alphas.is_empty() || req.ls.is_empty() {
        return Err(PlacementError::Invalid(
            "apexmap needs at least one alpha and one L".into(),
        ));
    }
    for &a in &req.alphas {
        check_alpha(a).map_err(PlacementError::Invalid)?;
    }
    for &l in &req.ls {
        check_l(l).map_err(PlacementError::Invalid)?;
    }
    let words = req.buffer_bytes / 8;
    let max_l = req.ls.iter().copied().max().unwrap_or(1);
    if max_l > words {
        return Err(PlacementError::Invalid(format!(
            "L = {max_l} words ({}) does not fit in the {} buffer; use a larger --size or smaller --ls",
            format::bytes(8 * max_l as u64),
            format::bytes(req.buffer_bytes as u64)
        )));
    }
    let min_l = req.ls.iter().copied().min().unwrap_or(1);
    if (words / min_l) as u64 > u32::MAX as u64 + 1 {
        return Err(PlacementError::Invalid(format!(
            "a {} buffer holds more than 2^32 blocks of L = {min_l}: use --size of at most {} or a larger L",
            format::bytes(req.buffer_bytes as u64),
            format::bytes(8 * min_l as u64 * (1 << 32))
        )));
    }
    // Every copy's buffer at once: one phase.
    check_plan(
        m,
        &[cpus
            .iter()
            .map(|&c| BufferDemand::new(req.buffer_bytes, &req.policy, Some(c)))
            .collect()],
        "use a smaller --size",
    )?;
    let start = Instant::now();
    let map = Map::new(m, req);
    let together = Together::new(cpus.len());
    let mut progress = Some(progress);
    let outcomes: Vec<Result<CopyOutcome, PlacementError>> = std::thread::scope(|s| {
        let mut handles = Vec::with_capacity(cpus.len());
        for (i, &cpu) in cpus.iter().enumerate() {
            let (map, together) = (&map, &together);
            let progress = if i == 0 { progress.take() } else { None };
            let what = if cpus.len() == 1 {
                "the apexmap worker".to_string()
            } else {
                format!("the apexmap copy on CPU {cpu}")
            };
            let h = sys::spawn_scoped(s, &what, move || {
                let _guard = AbortOnPanic(&together.meet);
                run_copy(m, map, together, cpu, progress)
            });
            if h.is_err() {
                // The copies started would wait for this one forever.
                together.meet.abort();
            }
            handles.push((what, h));
        }
        handles
            .into_iter()
            .map(|(what, h)| {
                h?.join()
                    .unwrap_or_else(|_| Err(PlacementError::Os(format!("{what} panicked"))))
            })
            .collect()
    });
    let mut done = Vec::with_capacity(outcomes.len());
    let mut errors = Vec::new();
    for o in outcomes {
        match o {
            Ok(c) => done.push(c),
            Err(e) => errors.push(e),
        }
    }
    // The copy that failed, not the others it stopped.
    if let Some(i) = errors.iter().position(|e| !e.to_string().contains(ABORTED)) {
        return Err(errors.swap_remove(i));
    }
    if let Some(e) = errors.pop() {
        return Err(e);
    }
    let several = copies != Copies::Single;
    let mut warnings = Vec::new();
    for c in &done {
        for w in &c.warnings {
            let w = if several {
                format!("copy on CPU {}: {w}", c.cpu)
            } else {
                w.clone()
            };
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }
    let mut points = merge_copies(&done, several);
    let model = match fit_points(&map.levels, &mut points) {
        Ok(mo) => Some(mo),
        Err(e) => {
            warnings.push(format!("multi-level model: {e}"));
            None
        }
    };
    let published_model = match published_model(m, req.cpu, &points, Path::new("/")) {
        Ok(mo) => {
            warnings.extend(mo.unresolved());
            Some(mo)
        }
        Err(e) => {
            warnings.push(format!("published model: {e}"));
            None
        }
    };
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    let verification = verification_of(done.into_iter().map(|c| c.report).collect());
    warnings.extend(verification.warning());
    Ok(ApexResult {
        cpu: req.cpu,
        copies,
        copy_cpus: cpus.to_vec(),
        policy: req.policy.to_string(),
        buffer_bytes: req.buffer_bytes as u64,
        isa: req.isa,
        alphas: map.alphas,
        ls: map.ls,
        points,
        model,
        published_model,
        elapsed_s: start.elapsed().as_secs_f64(),
        warnings,
        verification,
    })
}

/// What a copy ends with: its points, its placement and its warnings.
struct CopyOutcome {
    cpu: u32,
    points: Vec<ApexPoint>,
    report: WorkerReport,
    warnings: Vec<String>,
}

/// The text of the error a copy returns when another copy failed.
const ABORTED: &str = "another apexmap copy failed";

/// One copy on the calling thread, pinned to `cpu`: its buffer placed and
/// checked, then every point in step with the other copies.
fn run_copy(
    m: &Machine,
    map: &Map,
    together: &Together,
    cpu: u32,
    progress: Option<&mut (dyn FnMut(&str) + Send)>,
) -> Result<CopyOutcome, PlacementError> {
    let req = map.req;
    let placed = pinned_buffer(m, cpu, &req.policy, req.buffer_bytes, req.thp, false);
    let (mut buf, check) = match placed {
        Ok(x) => x,
        Err(e) => {
            together.meet.abort();
            return Err(e);
        }
    };
    let mut report = WorkerReport::pinned(m, cpu, check);
    let data = &mut buf.as_f64_mut()[..req.buffer_bytes / 8];
    let mut warnings = Vec::new();
    let points = map.points(data, progress, together, &mut warnings)?;
    report.seen_cpus.extend(sys::current_cpu());
    Ok(CopyOutcome {
        cpu,
        points,
        report,
        warnings,
    })
}

/// The points of the copies merged: with one copy its own points; with
/// several (`several`), each figure the median over copies, `samples` the
/// fewest of a copy, and every copy's figures kept.
fn merge_copies(done: &[CopyOutcome], several: bool) -> Vec<ApexPoint> {
    let Some(first) = done.first() else {
        return Vec::new();
    };
    if !several {
        return first.points.clone();
    }
    (0..first.points.len())
        .map(|k| {
            let mut p = first.points[k].clone();
            let per: Vec<&ApexPoint> = done.iter().filter_map(|c| c.points.get(k)).collect();
            p.copies = done
                .iter()
                .zip(&per)
                .map(|(c, q)| CopyPoint {
                    cpu: c.cpu,
                    ns: q.ns.clone(),
                    gbps: q.gbps.clone(),
                    samples: q.samples,
                })
                .collect();
            p.ns = median_figure(per.iter().map(|q| &q.ns));
            p.gbps = median_figure(per.iter().map(|q| &q.gbps));
            p.samples = per.iter().map(|q| q.samples).min().unwrap_or(0);
            if let Some(q) = per.iter().min_by_key(|q| q.samples) {
                p.stop_reason = q.stop_reason;
            }
            let medians: Vec<f64> = per.iter().map(|q| q.ns.median).collect();
            let (lo, hi) = medians
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                });
            p.copy_spread = (p.ns.median > 0.0 && hi >= lo).then(|| (hi - lo) / p.ns.median);
            p
        })
        .collect()
}

/// Each field of the figures, the median over them.
fn median_figure<'a>(figs: impl Iterator<Item = &'a Figure> + Clone) -> Figure {
    let med = |f: fn(&Figure) -> f64| median(figs.clone().map(f).collect()).unwrap_or(f64::NAN);
    Figure {
        median: med(|f| f.median),
        best: med(|f| f.best),
        min: med(|f| f.min),
        max: med(|f| f.max),
        spread: med(|f| f.spread),
        rel_ci: med(|f| f.rel_ci),
    }
}

/// A barrier that a failed or panicking copy can open for everyone (the
/// others would wait for it forever at a `std::sync::Barrier`).
struct Meet {
    /// Arrived in this round, the round, and whether it was opened.
    state: Mutex<(usize, u64, bool)>,
    met: Condvar,
    parties: usize,
}

impl Meet {
    fn new(parties: usize) -> Self {
        Meet {
            state: Mutex::new((0, 0, false)),
            met: Condvar::new(),
            parties,
        }
    }

    /// Waits for every party: `Ok(true)` for the last to arrive (one per
    /// round), an error once a party opened the meet.
    fn wait(&self) -> Result<bool, PlacementError> {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if g.2 {
            return Err(PlacementError::Os(ABORTED.into()));
        }
        let round = g.1;
        g.0 += 1;
        if g.0 == self.parties {
            g.0 = 0;
            g.1 += 1;
            self.met.notify_all();
            return Ok(true);
        }
        while g.1 == round && !g.2 {
            g = self.met.wait(g).unwrap_or_else(|p| p.into_inner());
        }
        if g.1 == round {
            Err(PlacementError::Os(ABORTED.into()))
        } else {
            Ok(false)
        }
    }

    /// Lets everyone through with an error, now and later.
    fn abort(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).2 = true;
        self.met.notify_all();
    }

    fn aborted(&self) -> bool {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).2
    }
}

/// Opens the meet when the copy's thread unwinds.
struct AbortOnPanic<'a>(&'a Meet);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort();
        }
    }
}

/// How the copies keep in step: they start each point's timed samples
/// together, and each keeps loading its memory until every copy has
/// finished the point's samples; whether to stop (cancellation) is decided
/// once for all of them.
struct Together {
    meet: Meet,
    /// Copies done with their timed samples, summed over the points.
    finished: AtomicUsize,
    stop: AtomicBool,
}

impl Together {
    fn new(copies: usize) -> Self {
        Together {
            meet: Meet::new(copies),
            finished: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        }
    }

    /// Whether to measure the next point: one copy reads the cancellation
    /// request for all, so that they all stop at the same point.
    fn proceed(&self) -> Result<bool, PlacementError> {
        if self.meet.wait()? {
            self.stop.store(cancel::requested(), Ordering::Release);
        }
        self.meet.wait()?;
        Ok(!self.stop.load(Ordering::Acquire))
    }
}

/// What every point of a map shares.
struct Map<'a> {
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

/// Fits the model to the points (filling their `model_ns` and
/// `residual`), or says why it cannot.
fn fit_points(
    levels: &[(String, Option<u64>)],
    points: &mut [ApexPoint],
) -> Result<ApexModel, String> {
    let data: Vec<(Vec<f64>, f64, f64)> = points
        .iter()
        .map(|p| (p.level_share.clone(), (8 * p.l) as f64, p.ns.median))
        .collect();
    let (lat, inv_bw) = fit_model(levels.len(), &data)?;
    let mut worst = (0.0f64, 0.0, 0);
    let mut ss = 0.0;
    for p in points.iter_mut() {
        let model: f64 = p
            .level_share
            .iter()
            .enumerate()
            .map(|(i, s)| s * (lat[i].unwrap_or(0.0) + (8 * p.l) as f64 * inv_bw[i].unwrap_or(0.0)))
            .sum();
        if model > 0.0 {
            let r = p.ns.median / model - 1.0;
            p.model_ns = Some(model);
            p.residual = Some(r);
            ss += r * r;
            if r.abs() > worst.0.abs() {
                worst = (r, p.alpha, p.l);
            }
        }
    }
    Ok(ApexModel {
        method: "shares of each level from the power law and the machine's cache sizes; latency and 1/bandwidth of each level by least squares on the relative error, each deeper level constrained to be at least as slow (non-negative increments from the level above)".into(),
        levels: levels
            .iter()
            .enumerate()
            .map(|(i, (name, cap))| ModelLevel {
                name: name.clone(),
                capacity_bytes: *cap,
                latency_ns: lat[i],
                bandwidth_gbps: inv_bw[i].and_then(|x| (x > 0.0).then(|| 1.0 / x)),
            })
            .collect(),
        rms_residual: (ss / points.len().max(1) as f64).sqrt(),
        worst: WorstPoint {
            alpha: worst.1,
            l: worst.2,
            residual: worst.0,
        },
    })
}

/// Latency (ns) and inverse bandwidth (ns per byte) of `n` levels from
/// points `(shares, bytes per access, measured ns)`, minimizing the squared
/// relative error with both non-negative and non-decreasing from one level
/// to the next deeper one. `None` for a parameter no point depends on. An
/// error naming the counts when there are fewer points than parameters (two
/// per level some point depends on), or fewer than two points.
///
/// The order constraint is built in: with `d_j >= 0` the increment of
/// latency from level `j-1` to `j`, `latency_i = sum_{j<=i} d_j`, and the
/// time of a point `sum_i s_i latency_i = sum_j d_j T_j` with `T_j = sum_{i>=j}
/// s_i` the share served at level `j` or deeper; likewise for 1/bandwidth.
/// So the constrained fit is a non-negative least squares in the increments
/// on the tail shares, and the levels are the increments' running sums.
#[allow(clippy::type_complexity)]
pub fn fit_model(
    n: usize,
    points: &[(Vec<f64>, f64, f64)],
) -> Result<(Vec<Option<f64>>, Vec<Option<f64>>), String> {
    let pts: Vec<&(Vec<f64>, f64, f64)> = points
        .iter()
        .filter(|p| p.2.is_finite() && p.2 > 0.0)
        .collect();
    let used: Vec<bool> = (0..n)
        .map(|i| pts.iter().any(|p| p.0.get(i).is_some_and(|s| *s > 0.0)))
        .collect();
    let parameters = 2 * used.iter().filter(|u| **u).count();
    if pts.len() < 2 || pts.len() < parameters {
        return Err(format!(
            "{parameters} parameters (latency and bandwidth of {} levels) but {} {}: no fit; measure more alphas and Ls",
            parameters / 2,
            pts.len(),
            if pts.len() == 1 { "point" } else { "points" }
        ));
    }
    let k = 2 * n;
    // Rows: [tail shares..., bytes * tail shares...] / measured; target 1.
    let rows: Vec<Vec<f64>> = pts
        .iter()
        .map(|(sh, bytes, t)| {
            let tail: Vec<f64> = (0..n)
                .map(|j| sh.iter().skip(j).take(n - j).sum::<f64>())
                .collect();
            let mut r = Vec::with_capacity(k);
            r.extend(tail.iter().map(|s| s / t));
            r.extend(tail.iter().map(|s| s * bytes / t));
            r
        })
        .collect();
    let x = nnls(&rows, k);
    let levels = |part: &[f64]| -> Vec<Option<f64>> {
        let mut sum = 0.0;
        part.iter()
            .zip(&used)
            .map(|(d, u)| {
                sum += d;
                u.then_some(sum)
            })
            .collect()
    };
    Ok((levels(&x[..n]), levels(&x[n..])))
}

/// Least squares of `rows · x = 1` with `x >= 0`, by coordinate descent on
/// the normal equations with columns scaled to unit norm (convex: it
/// converges; columns that are all zero stay 0).
fn nnls(rows: &[Vec<f64>], k: usize) -> Vec<f64> {
    let norm: Vec<f64> = (0..k)
        .map(|j| rows.iter().map(|r| r[j] * r[j]).sum::<f64>().sqrt())
        .collect();
    let mut g = vec![vec![0.0; k]; k];
    let mut h = vec![0.0; k];
    for r in rows {
        for i in 0..k {
            if norm[i] == 0.0 {
                continue;
            }
            let ri = r[i] / norm[i];
            h[i] += ri;
            for j in 0..k {
                if norm[j] > 0.0 {
                    g[i][j] += ri * r[j] / norm[j];
                }
            }
        }
    }
    let mut x = vec![0.0; k];
    for _ in 0..200_000 {
        let mut change = 0.0f64;
        for i in 0..k {
            if g[i][i] <= 0.0 {
                continue;
            }
            let grad: f64 = (0..k).map(|j| g[i][j] * x[j]).sum::<f64>() - h[i];
            let new = (x[i] - grad / g[i][i]).max(0.0);
            change = change.max((new - x[i]).abs());
            x[i] = new;
        }
        if change < 1e-13 {
            break;
        }
    }
    (0..k)
        .map(|j| if norm[j] > 0.0 { x[j] / norm[j] } else { 0.0 })
        .collect()
}

/// The study's model from measured points: the fit of two levels, the L2
/// cache and memory, in ns and in cycles of the CPU's frequency as read
/// under `root` (`/` live).
pub fn published_model(
    m: &Machine,
    cpu: u32,
    points: &[ApexPoint],
    root: &Path,
) -> Result<PublishedModel, String> {
    let l2 = m
        .data_cache_bytes(2)
        .ok_or("the machine model has no L2 cache")?;
    let levels = vec![("L2".to_string(), Some(l2)), ("memory".to_string(), None)];
    let data: Vec<(Vec<f64>, f64, f64)> = points
        .iter()
        .map(|p| {
            (
                level_shares(&levels, p.alpha, p.l, p.blocks),
                (8 * p.l) as f64,
                p.ns.median,
            )
        })
        .collect();
    let (lat, inv_bw) = fit_model(2, &data)?;
    let mut ss = 0.0;
    for (sh, bytes, t) in &data {
        let model: f64 = (0..2)
            .map(|i| sh[i] * (lat[i].unwrap_or(0.0) + bytes * inv_bw[i].unwrap_or(0.0)))
            .sum();
        if model > 0.0 {
            ss += (t / model - 1.0).powi(2);
        }
    }
    let (mhz, source) = match cpu_frequency(root, cpu) {
        Some((f, src)) => (Some(f), src),
        None => (None, "unknown frequency".to_string()),
    };
    let level = |i: usize, cap: Option<u64>| {
        let gbps = inv_bw[i].and_then(|x| (x > 0.0).then(|| 1.0 / x));
        PublishedLevel {
            capacity_bytes: cap,
            latency_ns: lat[i],
            // ns x cycles per ns (MHz / 1000); bytes per ns / cycles per ns.
            latency_cycles: lat[i].zip(mhz).map(|(ns, f)| ns * f / 1000.0),
            bandwidth_gbps: gbps,
            bytes_per_cycle: gbps.zip(mhz).map(|(g, f)| g * 1000.0 / f),
        }
    };
    Ok(PublishedModel {
        method: "Apex-MAP's model: latency + 8L / bandwidth for the L2 (every access its capacity holds under the power law) and memory; fitted as the multi-level model, with two levels".into(),
        l2: level(0, Some(l2)),
        memory: level(1, None),
        frequency_mhz: mhz,
        frequency_source: source,
        rms_residual: (ss / data.len().max(1) as f64).sqrt(),
    })
}

impl PublishedModel {
    /// A warning for each latency the fit put at its bound, 0 ns: the
    /// non-negative fit found no latency those points can resolve (on a
    /// noisy machine, a few ns of L2 latency drown in the long blocks'
    /// microseconds), so the figure is no measurement of it.
    pub fn unresolved(&self) -> Vec<String> {
        [("L2", &self.l2), ("memory", &self.memory)]
            .into_iter()
            .filter(|(_, level)| level.latency_ns == Some(0.0))
            .map(|(name, _)| {
                format!(
                    "published model: the {name} latency fits at its bound, 0 ns: these points do not resolve it; measure more small Ls (--ls) or a longer --budget"
                )
            })
            .collect()
    }
}

/// Packed against unpacked at one point (the study's Figure 7c).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackingRatio {
    #[serde(deserialize_with = "f64_or_nan")]
    pub alpha: f64,
    pub l: usize,
    /// Median over copies, ns per access.
    #[serde(deserialize_with = "f64_or_nan")]
    pub unpacked_ns: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub packed_ns: f64,
    /// `packed_ns / unpacked_ns`: above 1 where packing costs.
    #[serde(deserialize_with = "f64_or_nan")]
    pub ratio: f64,
}

/// The predicted packed time of one point and how the measurement departs
/// from it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PredictedPoint {
    #[serde(deserialize_with = "f64_or_nan")]
    pub alpha: f64,
    pub l: usize,
    #[serde(deserialize_with = "f64_or_nan")]
    pub predicted_ns: f64,
    /// The packed map's median over copies.
    #[serde(deserialize_with = "f64_or_nan")]
    pub measured_ns: f64,
    /// `measured_ns / predicted_ns - 1`.
    #[serde(deserialize_with = "f64_or_nan")]
    pub residual: f64,
}

/// The packed map predicted from the unpacked map's published model (L2
/// and memory) with the memory bandwidth divided among the copies that
/// share a memory controller, as the Cray/NERSC study halved it for two
/// cores per socket.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackedPrediction {
    pub method: String,
    /// Copies that share one node's memory (its controller): the divisor
    /// of the memory bandwidth.
    pub sharing: u32,
    /// The unpacked model's memory bandwidth, 1e9 B/s (`None`: unbounded).
    pub memory_bandwidth_gbps: Option<f64>,
    /// What each packed copy is predicted to get: the above / `sharing`.
    pub shared_memory_bandwidth_gbps: Option<f64>,
    pub points: Vec<PredictedPoint>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub rms_residual: f64,
    pub worst: WorstPoint,
}

/// `numalab apexmap --copies both`: unpacked then packed, the ratio of the
/// two at every point and the prediction of packed from unpacked.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PackingComparison {
    /// Always [`Copies::Both`].
    pub copies: Copies,
    pub unpacked: ApexResult,
    pub packed: ApexResult,
    /// Every point measured in both maps, row-major as `points`.
    pub difference: Vec<PackingRatio>,
    pub prediction: Option<PackedPrediction>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    /// Each map's warnings (marked `unpacked: ` or `packed: `) and the
    /// comparison's own.
    pub warnings: Vec<String>,
    /// Both maps' copies: the unpacked ones first.
    pub verification: Verification,
}

/// The packed time of each of `packed`'s points predicted from `model` (the
/// unpacked map's published model) with its memory bandwidth divided by
/// `sharing`: `P(L2) (lat_L2 + 8L / bw_L2) + P(mem) (lat_mem + 8L sharing /
/// bw_mem)`, the shares those of the model's L2 capacity; latencies and the
/// L2 bandwidth unchanged (each core has its own L2). A level the fit left
/// without a latency or bandwidth costs nothing of it, as in the fit.
pub fn predict_packed(
    model: &PublishedModel,
    sharing: u32,
    packed: &[ApexPoint],
) -> Result<PackedPrediction, String> {
    let l2 = model
        .l2
        .capacity_bytes
        .ok_or("the published model has no L2 capacity")?;
    if sharing == 0 {
        return Err("no copy shares the memory".into());
    }
    let levels = vec![("L2".to_string(), Some(l2)), ("memory".to_string(), None)];
    let inv = |lv: &PublishedLevel| lv.bandwidth_gbps.map(|g| 1.0 / g).unwrap_or(0.0);
    let (lat2, inv2) = (model.l2.latency_ns.unwrap_or(0.0), inv(&model.l2));
    let (latm, invm) = (
        model.memory.latency_ns.unwrap_or(0.0),
        inv(&model.memory) * sharing as f64,
    );
    let mut ss = 0.0;
    let mut n = 0usize;
    let mut worst = WorstPoint {
        alpha: f64::NAN,
        l: 0,
        residual: 0.0,
    };
    let points: Vec<PredictedPoint> = packed
        .iter()
        .map(|p| {
            let sh = level_shares(&levels, p.alpha, p.l, p.blocks);
            let bytes = (8 * p.l) as f64;
            let predicted = sh[0] * (lat2 + bytes * inv2) + sh[1] * (latm + bytes * invm);
            let residual = if predicted > 0.0 {
                p.ns.median / predicted - 1.0
            } else {
                f64::NAN
            };
            if residual.is_finite() {
                ss += residual * residual;
                n += 1;
                if residual.abs() > worst.residual.abs() || worst.alpha.is_nan() {
                    worst = WorstPoint {
                        alpha: p.alpha,
                        l: p.l,
                        residual,
                    };
                }
            }
            PredictedPoint {
                alpha: p.alpha,
                l: p.l,
                predicted_ns: predicted,
                measured_ns: p.ns.median,
                residual,
            }
        })
        .collect();
    Ok(PackedPrediction {
        method: format!(
            "the unpacked map's published model (L2 and memory) with the memory bandwidth divided by the {sharing} copies that share one node's memory controller (the study halved it for two cores per socket); latencies and the L2 bandwidth unchanged"
        ),
        sharing,
        memory_bandwidth_gbps: model.memory.bandwidth_gbps,
        shared_memory_bandwidth_gbps: model.memory.bandwidth_gbps.map(|g| g / sharing as f64),
        points,
        rms_residual: if n > 0 {
            (ss / n as f64).sqrt()
        } else {
            f64::NAN
        },
        worst,
    })
}

/// The ratio `packed / unpacked` of every point both maps measured, in
/// `packed`'s order.
pub fn packing_ratios(unpacked: &ApexResult, packed: &ApexResult) -> Vec<PackingRatio> {
    packed
        .points
        .iter()
        .filter_map(|p| {
            let u = unpacked.point(p.alpha, p.l)?;
            Some(PackingRatio {
                alpha: p.alpha,
                l: p.l,
                unpacked_ns: u.ns.median,
                packed_ns: p.ns.median,
                ratio: p.ns.median / u.ns.median,
            })
        })
        .collect()
}

/// Copies of `cpus` on the node with the most of them: how many share one
/// memory controller.
pub fn copies_sharing_a_node(m: &Machine, cpus: &[u32]) -> u32 {
    let mut per = std::collections::BTreeMap::<Option<u32>, u32>::new();
    for &c in cpus {
        *per.entry(m.node_of_cpu(c)).or_insert(0) += 1;
    }
    per.into_values().max().unwrap_or(0)
}

/// Unpacked, then packed, on the request's CPU's node (both refused before
/// anything is measured when packed would be one copy; unpacked may be one
/// copy, alone on the only node: the baseline packing is compared with);
/// then the ratio map and the prediction of packed from unpacked.
/// `progress` is called before each point of both maps.
pub fn run_packing_comparison(
    m: &Machine,
    req: &ApexRequest,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<PackingComparison, PlacementError> {
    let start = Instant::now();
    let packed_on = packed_cpus(m, req.cpu)?;
    let unpacked_on = unpacked_cpus(m, req.cpu, true)?;
    let unpacked = run_copies(m, req, Copies::Unpacked, &unpacked_on, progress)?;
    let packed = run_copies(m, req, Copies::Packed, &packed_on, progress)?;
    let difference = packing_ratios(&unpacked, &packed);
    let mut warnings: Vec<String> = unpacked
        .warnings
        .iter()
        .map(|w| format!("unpacked: {w}"))
        .chain(packed.warnings.iter().map(|w| format!("packed: {w}")))
        .collect();
    let sharing = copies_sharing_a_node(m, &packed_on);
    let prediction = match &unpacked.published_model {
        None => {
            warnings.push(
                "prediction: the unpacked map has no published model (see its warnings)".into(),
            );
            None
        }
        Some(model) => match predict_packed(model, sharing, &packed.points) {
            Ok(p) => Some(p),
            Err(e) => {
                warnings.push(format!("prediction: {e}"));
                None
            }
        },
    };
    let mut workers = unpacked.verification.workers.clone();
    workers.extend(packed.verification.workers.iter().cloned());
    let problems: Vec<String> = unpacked
        .verification
        .problems
        .iter()
        .map(|p| format!("unpacked: {p}"))
        .chain(
            packed
                .verification
                .problems
                .iter()
                .map(|p| format!("packed: {p}")),
        )
        .collect();
    Ok(PackingComparison {
        copies: Copies::Both,
        difference,
        prediction,
        elapsed_s: start.elapsed().as_secs_f64(),
        warnings,
        verification: Verification {
            verified: problems.is_empty(),
            workers,
            problems,
        },
        unpacked,
        packed,
    })
}

/// The core clock of `cpu` in MHz and where it was read, under `root`: the
/// nominal frequency from cpufreq (`base_frequency`), else `cpu MHz` of
/// /proc/cpuinfo, else the hardware maximum from cpufreq
/// (`cpuinfo_max_freq`); `None` when none is there (never a guess).
pub fn cpu_frequency(root: &Path, cpu: u32) -> Option<(f64, String)> {
    let fs = crate::placement::sysroot::SysRoot::new(root);
    let khz = |name: &str| -> Option<(f64, String)> {
        let rel = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq/{name}");
        let v = fs.read(&rel)?.parse::<f64>().ok()?;
        (v.is_finite() && v > 0.0).then(|| (v / 1000.0, format!("/{rel}")))
    };
    khz("base_frequency")
        .or_else(|| {
            let mhz = cpuinfo_mhz(&fs.read("proc/cpuinfo")?, cpu)?;
            Some((mhz, format!("/proc/cpuinfo cpu MHz of processor {cpu}")))
        })
        .or_else(|| khz("cpuinfo_max_freq"))
}

/// `cpu MHz` of processor `cpu` in the text of /proc/cpuinfo.
fn cpuinfo_mhz(text: &str, cpu: u32) -> Option<f64> {
    text.split("\n\n").find_map(|block| {
        let field = |name: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == name).then(|| v.trim())
            })
        };
        if field("processor")?.parse::<u32>().ok()? != cpu {
            return None;
        }
        let v = field("cpu MHz")?.parse::<f64>().ok()?;
        (v.is_finite() && v > 0.0).then_some(v)
    })
}

/// Default per-point budget so that the default grid takes about 20 s of
/// measuring: 0.4 s.
pub const DEFAULT_POINT_BUDGET: Duration = Duration::from_millis(400);

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
