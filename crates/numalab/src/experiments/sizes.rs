//! `numalab sizes`: the Membench sweep. Bandwidth (read, write, copy) and
//! chase latency from L1-sized to DRAM-sized working sets, with the cache
//! boundaries of the machine model marked.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the sweep after the
//! measurement in progress; only sizes measured completely are kept.

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::chase::ChasePattern;
use crate::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::{check_plan, BufferDemand, MemoryPolicy, PlacementError, Thp};
use crate::serde_util::{f64_or_nan, vec_f64_or_nan};
use serde::{Deserialize, Serialize};

/// The kernels of the sweep.
pub const SIZE_KERNELS: [BandwidthKernel; 3] = [
    BandwidthKernel::Read,
    BandwidthKernel::Write,
    BandwidthKernel::Copy,
];

/// A cache boundary to mark on the size axis.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CacheMark {
    pub name: String,
    /// Capacity one thread sees: the cache size (a shared cache is not
    /// divided: the sweep runs one thread).
    pub bytes: u64,
}

/// One working-set size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizePoint {
    /// Working set: all arrays of a kernel together are this large.
    pub bytes: u64,
    /// The smallest cache level this working set fits in, or "memory".
    pub fits_in: String,
    /// GB/s (program bytes) per kernel, in the order of `kernels`.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub gbps: Vec<f64>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub latency_ns: f64,
    pub verified: bool,
}

/// The outcome of [`run_sizes`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizesResult {
    pub cpu: u32,
    pub kernels: Vec<BandwidthKernel>,
    pub pattern: ChasePattern,
    pub caches: Vec<CacheMark>,
    pub points: Vec<SizePoint>,
    pub warnings: Vec<String>,
}

/// Data/unified cache levels of the machine, smallest first.
pub fn cache_marks(m: &Machine) -> Vec<CacheMark> {
    m.data_cache_levels()
        .into_iter()
        .filter_map(|l| {
            Some(CacheMark {
                name: format!("L{l}"),
                bytes: m.data_cache_bytes(l)?,
            })
        })
        .collect()
}

/// Sizes from half the L1 to `max_bytes`, two per octave (x1, x1.5).
pub fn sweep_sizes(m: &Machine, max_bytes: u64) -> Vec<u64> {
    let marks = cache_marks(m);
    let start = marks
        .first()
        .map(|c| c.bytes / 2)
        .unwrap_or(16 << 10)
        .max(8 << 10);
    let mut v = Vec::new();
    let mut s = start.next_power_of_two();
    while s <= max_bytes {
        v.push(s);
        let mid = s + s / 2;
        if mid <= max_bytes {
            v.push(mid);
        }
        s *= 2;
    }
    v
}

fn fits_in(marks: &[CacheMark], bytes: u64) -> String {
    marks
        .iter()
        .find(|c| bytes <= c.bytes)
        .map(|c| c.name.clone())
        .unwrap_or_else(|| "memory".into())
}

/// Runs the sweep on one CPU with memory local to it.
pub fn run_sizes(
    m: &Machine,
    cpu: u32,
    sizes: &[u64],
    isa: Isa,
    rule: &StopRule,
    progress: &mut dyn FnMut(&str),
) -> Result<SizesResult, PlacementError> {
    // One size is measured at a time, with all its bytes at once (the chase,
    // or a kernel's arrays together): the largest must fit.
    let largest = sizes.iter().copied().max().unwrap_or(0);
    check_plan(
        m,
        &[vec![BufferDemand::new(
            largest as usize,
            &MemoryPolicy::Local,
            Some(cpu),
        )]],
        "use a smaller --max-size",
    )?;
    let marks = cache_marks(m);
    let mut points = Vec::new();
    let mut warnings = Vec::new();
    'sizes: for &bytes in sizes {
        let mut gbps = Vec::new();
        let mut verified = true;
        for k in SIZE_KERNELS {
            if cancel::requested() {
                break 'sizes;
            }
            progress(&format!(
                "{} {}",
                k.name(),
                crate::text::format::bytes(bytes)
            ));
            // Each of the kernel's arrays gets an equal share of the working set.
            let per = (bytes as usize / k.arrays())
                .max(4096)
                .next_multiple_of(4096);
            let r = run_bandwidth(
                m,
                &BandwidthRequest {
                    kernel: k,
                    isa,
                    workers: vec![WorkerPlan {
                        cpu,
                        policy: MemoryPolicy::Local.into(),
                        toucher: None,
                    }],
                    buffer_bytes: per,
                    thp: Some(Thp::On),
                    rule: rule.clone(),
                },
            )?;
            verified &= r.verification.verified;
            warnings.extend(
                r.warnings
                    .iter()
                    .map(|w| format!("{} at {bytes} B: {w}", k.name())),
            );
            gbps.push(r.gbps.median);
        }
        if cancel::requested() {
            break;
        }
        progress(&format!("latency {}", crate::text::format::bytes(bytes)));
        let l = run_latency(
            m,
            &LatencyRequest {
                cpu,
                policy: MemoryPolicy::Local,
                pattern: ChasePattern::Random,
                chains: 1,
                buffer_bytes: (bytes as usize).max(8192).next_multiple_of(4096),
                thp: Some(Thp::On),
                hugetlb: false,
                rule: rule.clone(),
            },
        )?;
        if cancel::requested() {
            break;
        }
        verified &= l.verification.verified;
        points.push(SizePoint {
            bytes,
            fits_in: fits_in(&marks, bytes),
            gbps,
            latency_ns: l.ns.median,
            verified,
        });
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    Ok(SizesResult {
        cpu,
        kernels: SIZE_KERNELS.to_vec(),
        pattern: ChasePattern::Random,
        caches: marks,
        points,
        warnings,
    })
}
