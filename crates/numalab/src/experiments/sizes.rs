//! `numalab sizes`: the Membench sweep. Bandwidth (read, write, copy) and
//! chase latency from L1-sized to DRAM-sized working sets, with the cache
//! boundaries of the machine model marked.
//!
//! With several threads ([`SizesSetup`]), as Membench was run with several
//! cores busy: `N` pinned threads, compact (one node's CPUs first, as
//! `scaling`'s compact order) or scatter (one per node in turn), each
//! streaming its own working set of the size; the bandwidth is reported as
//! the aggregate and per core (aggregate / N). The latency stays one chase
//! from the first CPU, the others idle: it is the unloaded latency of the
//! working set, where the memory policy puts it. Every buffer of a size is
//! placed by one memory policy, and each size carries the bytes its
//! buffers have on each node, read back from the kernel.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the sweep after the
//! measurement in progress; only sizes measured completely are kept.

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::chase::ChasePattern;
use crate::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, Verification, WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::thread_policy::{compact_order, scatter_order};
use crate::placement::{check_plan, BufferDemand, MemoryPolicy, PlacementError, Thp};
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The kernels of the sweep.
pub const SIZE_KERNELS: [BandwidthKernel; 3] = [
    BandwidthKernel::Read,
    BandwidthKernel::Write,
    BandwidthKernel::Copy,
];

/// How the threads of a sweep are laid over the allowed CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SizesLayout {
    /// One node's CPUs first, then the next node's (the compact order).
    #[serde(alias = "packed")]
    Compact,
    /// One CPU of each node in turn (the scatter order).
    #[serde(alias = "spread")]
    Scatter,
}

impl SizesLayout {
    /// The layouts' names, as `--layout` takes them (the words of every
    /// command's `--layout`; results before 2026-12 said packed and spread).
    pub const NAMES: &'static [&'static str] = &["compact", "scatter"];

    /// The name `--layout` takes and the JSON holds.
    pub fn name(self) -> &'static str {
        match self {
            Self::Compact => "compact",
            Self::Scatter => "scatter",
        }
    }

    /// Parses a layout name; an unknown one gives an error listing the valid ones.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "compact" => Ok(Self::Compact),
            "scatter" => Ok(Self::Scatter),
            _ => Err(format!(
                "unknown layout '{s}'; valid: {}",
                Self::NAMES.join(", ")
            )),
        }
    }

    /// The first `threads` allowed CPUs in this layout's order, or an error
    /// naming how many CPUs are allowed.
    pub fn cpus(self, m: &Machine, threads: usize) -> Result<Vec<u32>, String> {
        let order = match self {
            Self::Compact => compact_order(m, &m.allowed_cpus),
            Self::Scatter => scatter_order(m, &m.allowed_cpus),
        };
        if threads == 0 || threads > order.len() {
            return Err(format!(
                "{threads} threads asked but only {} CPUs are allowed ({}): give 1 to {}",
                order.len(),
                m.allowed_cpus,
                order.len()
            ));
        }
        Ok(order[..threads].to_vec())
    }
}

/// Where a sweep runs: its threads' CPUs and the memory policy of every
/// buffer.
#[derive(Debug, Clone)]
pub struct SizesSetup {
    /// One streaming thread per CPU; the chase runs on the first.
    pub cpus: Vec<u32>,
    /// How `cpus` were chosen (`None`: one CPU named by the user).
    pub layout: Option<SizesLayout>,
    pub memory: MemoryPolicy,
}

impl SizesSetup {
    /// One thread on `cpu`, memory local to it: the classic sweep.
    pub fn one(cpu: u32) -> Self {
        SizesSetup {
            cpus: vec![cpu],
            layout: None,
            memory: MemoryPolicy::Local,
        }
    }
}

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
    /// GB/s (program bytes) per kernel, in the order of `kernels`: all
    /// threads together.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub gbps: Vec<f64>,
    /// `gbps` divided by the number of threads: the bandwidth one core gets
    /// while the others stream too.
    #[serde(default, deserialize_with = "vec_f64_or_nan")]
    pub per_core_gbps: Vec<f64>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub latency_ns: f64,
    /// Bytes on each node of every buffer measured at this size (each
    /// kernel's arrays of every thread, and the chase), from the kernel's
    /// page table.
    #[serde(default, deserialize_with = "int_keyed_map")]
    pub bytes_by_node: BTreeMap<u32, u64>,
    pub verified: bool,
}

/// The outcome of [`run_sizes`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizesResult {
    /// The first thread's CPU, where the chase runs.
    pub cpu: u32,
    /// Streaming threads, one per CPU of `cpus`.
    #[serde(default = "one")]
    pub threads: usize,
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// How the CPUs were chosen; absent when one CPU was named.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<SizesLayout>,
    /// The memory policy of every buffer.
    #[serde(default = "local")]
    pub memory: String,
    pub kernels: Vec<BandwidthKernel>,
    pub pattern: ChasePattern,
    pub caches: Vec<CacheMark>,
    pub points: Vec<SizePoint>,
    pub warnings: Vec<String>,
}

fn one() -> usize {
    1
}

fn local() -> String {
    MemoryPolicy::Local.to_string()
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
    run_sizes_with(m, &SizesSetup::one(cpu), sizes, isa, rule, progress)
}

/// Runs the sweep with a thread streaming on each CPU of `setup`, every
/// buffer placed by its memory policy.
pub fn run_sizes_with(
    m: &Machine,
    setup: &SizesSetup,
    sizes: &[u64],
    isa: Isa,
    rule: &StopRule,
    progress: &mut dyn FnMut(&str),
) -> Result<SizesResult, PlacementError> {
    let Some(&cpu) = setup.cpus.first() else {
        return Err(PlacementError::Invalid("a size sweep needs a CPU".into()));
    };
    let threads = setup.cpus.len();
    // One size is measured at a time, with all its bytes at once (every
    // thread's arrays of a kernel together, or the chase): the largest must
    // fit, once per thread.
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let demands: Vec<BufferDemand> = setup
        .cpus
        .iter()
        .map(|&c| BufferDemand::new(largest as usize, &setup.memory, Some(c)))
        .collect();
    check_plan(m, &[demands], "use a smaller --max-size or fewer --threads")?;
    let marks = cache_marks(m);
    let mut points = Vec::new();
    let mut warnings = Vec::new();
    'sizes: for &bytes in sizes {
        let mut gbps = Vec::new();
        let mut verified = true;
        let mut bytes_by_node = BTreeMap::new();
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
                    workers: WorkerPlan::on_each(&setup.cpus, &setup.memory),
                    buffer_bytes: per,
                    thp: Some(Thp::On),
                    rule: rule.clone(),
                },
            )?;
            verified &= r.verification.verified;
            add_bytes_by_node(&mut bytes_by_node, &r.verification);
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
                policy: setup.memory.clone(),
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
        add_bytes_by_node(&mut bytes_by_node, &l.verification);
        points.push(SizePoint {
            bytes,
            fits_in: fits_in(&marks, bytes),
            per_core_gbps: gbps.iter().map(|g| g / threads as f64).collect(),
            gbps,
            latency_ns: l.ns.median,
            bytes_by_node,
            verified,
        });
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    Ok(SizesResult {
        cpu,
        threads,
        cpus: setup.cpus.clone(),
        layout: setup.layout,
        memory: setup.memory.to_string(),
        kernels: SIZE_KERNELS.to_vec(),
        pattern: ChasePattern::Random,
        caches: marks,
        points,
        warnings,
    })
}

/// Adds the bytes every buffer of a run has on each node.
fn add_bytes_by_node(into: &mut BTreeMap<u32, u64>, v: &Verification) {
    for b in v.workers.iter().flat_map(|w| &w.buffers) {
        for (&node, &pages) in &b.pages_by_node {
            *into.entry(node).or_insert(0) += pages * b.page_size as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::fixture;

    #[test]
    fn layouts_pick_one_node_first_or_one_per_node() {
        // The Quartet: 4 nodes of 2 CPUs, node n holds CPUs 2n and 2n+1.
        let m = fixture("qemu-quartet-4n2c-ring.xml");
        let node = |c: &u32| m.node_of_cpu(*c).unwrap();
        let packed = SizesLayout::Compact.cpus(&m, 2).unwrap();
        assert_eq!(packed.iter().map(node).collect::<Vec<_>>(), [0, 0]);
        let spread = SizesLayout::Scatter.cpus(&m, 4).unwrap();
        assert_eq!(spread.iter().map(node).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(SizesLayout::Compact.cpus(&m, 8).unwrap().len(), 8);
        let e = SizesLayout::Scatter.cpus(&m, 9).unwrap_err();
        assert!(e.contains("9 threads asked but only 8 CPUs"), "{e}");
        assert!(SizesLayout::Compact.cpus(&m, 0).is_err());
    }

    #[test]
    fn layout_names_round_trip() {
        for name in SizesLayout::NAMES {
            assert_eq!(SizesLayout::parse(name).unwrap().name(), *name);
        }
        let e = SizesLayout::parse("diagonal").unwrap_err();
        assert_eq!(e, "unknown layout 'diagonal'; valid: compact, scatter");
        // Results written before the layouts took the words of every
        // command's --layout still read.
        let old: SizesLayout = serde_json::from_str("\"spread\"").unwrap();
        assert_eq!(old, SizesLayout::Scatter);
    }

    #[test]
    fn results_without_the_thread_fields_still_read() {
        let old = r#"{"cpu": 3, "kernels": ["read"], "pattern": "random", "caches": [],
            "points": [{"bytes": 4096, "fits_in": "L1", "gbps": [1.0], "latency_ns": 2.0,
            "verified": true}], "warnings": []}"#;
        let r: SizesResult = serde_json::from_str(old).unwrap();
        assert_eq!((r.threads, r.memory.as_str(), r.layout), (1, "local", None));
        assert!(r.points[0].bytes_by_node.is_empty());
    }
}
