//! How a report spends its time: the default budget of each mode for a
//! machine, each part's share of it, and which parts a machine can have.
//!
//! The budget is shared out part by part as the report runs: a part gets
//! its weight's share of what is left, so a part that overran shrinks the
//! later ones and one that finished early gives them more. The sweeps run
//! last because they keep a deadline exactly.
//!
//! A part's time is the sum of its measurements' budgets plus fixed costs
//! nobody sets (placing and faulting buffers, building pointer chases,
//! starting threads). Those costs are calibrated once at the start
//! ([`calibrate`]: one latency cell and one bandwidth cell with a single
//! sample) and corrected after every part ([`corrected_factor`]); each part
//! subtracts its predicted fixed costs from its share before dividing the
//! rest among its measurements.

use crate::machine::Machine;
use crate::measure::chase::ChasePattern;
use crate::measure::harness::{
    run_bandwidth, run_latency, BandwidthRequest, LatencyRequest, WorkerPlan,
};
use crate::measure::kernels::{BandwidthKernel, Isa};
use crate::measure::stats::StopRule;
use crate::placement::{MemoryPolicy, PlacementError, Thp};
use crate::report::part::{Costs, PartName};
use crate::report::results::Mode;
use std::time::{Duration, Instant};

/// Seconds a default report may take on a one-node machine.
const BASE_SECONDS: f64 = 80.0;
/// Extra seconds per memory node beyond the first (a two-socket server gets
/// about two minutes).
const PER_NODE_SECONDS: f64 = 40.0;
/// Longest default budget, however large the machine.
const MAX_DEFAULT_SECONDS: f64 = 300.0;
/// Seconds kept at the end for writing results.json, the CSVs and the HTML.
pub const RESERVE_SECONDS: f64 = 0.3;

/// The default budget of a mode on a machine, seconds: 80 s for one node,
/// 40 s more per further memory node (at most 300 s); a third of that for
/// `--quick`, four times for `--full`.
pub fn default_budget(m: &Machine, mode: Mode) -> f64 {
    let nodes = m.memory_nodes().len().max(1) as f64;
    let base = (BASE_SECONDS + PER_NODE_SECONDS * (nodes - 1.0)).min(MAX_DEFAULT_SECONDS);
    match mode {
        Mode::Quick => base / 3.0,
        Mode::Default => base,
        Mode::Full => base * 4.0,
    }
}

/// A part's weight: its share of the budget relative to the others.
pub fn weight(p: PartName, mode: Mode) -> f64 {
    p.part().info().weight_in(mode)
}

/// The first allowed CPU node: the chasing CPU's node in the loaded-latency
/// parts, the reference for "local" and "farthest".
pub fn home_node(m: &Machine) -> Option<u32> {
    m.cpu_nodes().first()
}

/// The memory node farthest from [`home_node`] by firmware distance (ties:
/// more hops, then the higher index), when it is not the home node itself.
/// CPU-less nodes count: a far memory tier is what this part is for.
pub fn far_node(m: &Machine) -> Option<u32> {
    let home = home_node(m)?;
    m.memory_nodes()
        .iter()
        .filter(|&n| n != home)
        .max_by_key(|&n| (m.distance(home, n), m.hops_between(home, n).unwrap_or(0), n))
}

/// Every part's share of `seconds`, for the parts in `parts`, by weight.
pub fn shares(parts: &[PartName], mode: Mode, seconds: f64) -> Vec<(PartName, f64)> {
    let total: f64 = parts.iter().map(|&p| weight(p, mode)).sum();
    parts
        .iter()
        .map(|&p| (p, seconds * weight(p, mode) / total.max(f64::MIN_POSITIVE)))
        .collect()
}

/// The share of what is left for the next part: `left` seconds over the
/// parts still to run (`next` first), by weight.
pub fn next_share(next: PartName, rest: &[PartName], mode: Mode, left: f64) -> f64 {
    let total: f64 = weight(next, mode) + rest.iter().map(|&p| weight(p, mode)).sum::<f64>();
    (left * weight(next, mode) / total).max(0.0)
}

/// One latency and one bandwidth cell with a single sample each: the fixed
/// costs every later measurement of that kind pays. A report measures them
/// once at the start; each part then predicts its fixed costs from them, and
/// the session corrects [`Costs::factor`] after every part by the ratio of
/// what the fixed costs really were to what was predicted.
pub fn calibrate(m: &Machine, size: usize, isa: Isa) -> Costs {
    let one = StopRule {
        warmup: 0,
        min_reps: 1,
        max_reps: 1,
        target_rel_ci: 1.0,
        budget: Duration::ZERO,
    };
    let cpu = home_cpu(m).unwrap_or(0);
    let t = Instant::now();
    let lat = run_latency(
        m,
        &LatencyRequest {
            cpu,
            policy: MemoryPolicy::Local,
            pattern: ChasePattern::Random,
            chains: 1,
            buffer_bytes: size,
            thp: Some(Thp::Off),
            hugetlb: false,
            rule: one.clone(),
        },
    );
    let latency_cell = if lat.is_ok() {
        t.elapsed().as_secs_f64()
    } else {
        0.3
    };
    let t = Instant::now();
    let bw = run_bandwidth(
        m,
        &BandwidthRequest {
            kernel: BandwidthKernel::Read,
            isa,
            workers: vec![WorkerPlan {
                cpu,
                policy: MemoryPolicy::Local,
                toucher: None,
            }],
            buffer_bytes: size,
            thp: Some(Thp::On),
            rule: one,
        },
    );
    let bandwidth_cell = if bw.is_ok() {
        t.elapsed().as_secs_f64()
    } else {
        0.1
    };
    Costs {
        latency_cell,
        bandwidth_cell,
        factor: 1.0,
    }
}

/// The costs assumed when nothing was calibrated (no part to run).
pub fn default_costs() -> Costs {
    Costs {
        latency_cell: 0.3,
        bandwidth_cell: 0.1,
        factor: 1.0,
    }
}

/// The correction of [`Costs::factor`] after a part that planned
/// `measuring` seconds of measurement, predicted `fixed` seconds of fixed
/// costs and took `elapsed` seconds in all: the mean of the old factor and
/// the real-over-predicted ratio (bounded, so one odd part cannot derail
/// the rest).
pub fn corrected_factor(old: f64, measuring: f64, fixed: f64, elapsed: f64) -> f64 {
    if fixed <= 0.01 {
        return old;
    }
    let real_fixed = (elapsed - measuring).max(0.0);
    let ratio = (real_fixed / fixed).clamp(0.3, 5.0);
    (old + ratio) / 2.0
}

/// Bytes per buffer so that `count` buffers of at most `wanted` bytes fit
/// in `share` of what node `node` can give now (2 MiB multiples, at least
/// 2 MiB): a report must never push a node into the OOM killer, and small
/// nodes (a 512 MiB guest node, an HBM or CXL tier) get smaller buffers.
/// What a node can give is the capacity check's figure
/// ([`crate::placement::node_memory::NodeMemory::allocatable`]: page cache
/// counted, hot-added memory included, the cgroup's limit applied), so the
/// report sizes its buffers as the check will judge them; a node without
/// figures is not limited here.
pub fn fit(node: u32, count: usize, wanted: usize, share: f64) -> usize {
    const STEP: usize = 2 << 20;
    let memory = crate::placement::node_memory::NodeMemory::capture_for_capacity();
    let free = if memory.nodes.contains_key(&node) {
        memory.allocatable(node) as f64
    } else {
        u64::MAX as f64
    };
    let cap = (free * share / count.max(1) as f64).min(usize::MAX as f64) as usize;
    wanted.min(cap / STEP * STEP).max(STEP)
}

/// [`fit`] on every node of `nodes`: the smallest.
pub fn fit_all(nodes: &[u32], count: usize, wanted: usize, share: f64) -> usize {
    nodes
        .iter()
        .map(|&n| fit(n, count, wanted, share))
        .min()
        .unwrap_or(wanted)
}

/// The most allowed CPUs any node has.
pub fn max_cpus_per_node(m: &Machine) -> usize {
    m.cpu_nodes()
        .iter()
        .map(|n| m.allowed_cpus_of(n).len())
        .max()
        .unwrap_or(1)
}

/// The first allowed CPU of the home node.
pub fn home_cpu(m: &Machine) -> Option<u32> {
    let n = home_node(m)?;
    m.allowed_cpus_of(n).first()
}

/// The error of a part that needs a CPU node and finds none allowed.
pub fn no_cpu_node() -> PlacementError {
    PlacementError::Invalid("no allowed node has CPUs".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

    fn part(name: &str) -> PartName {
        PartName::find(name).unwrap()
    }

    #[test]
    fn default_budgets_follow_the_machine() {
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        assert_eq!(default_budget(&q, Mode::Default), 200.0);
        assert_eq!(default_budget(&q, Mode::Quick), 200.0 / 3.0);
        assert_eq!(default_budget(&q, Mode::Full), 800.0);
        let ring = fixture("qemu-ring4-cpuless-hmat.xml");
        // Five memory nodes, the CPU-less one included.
        assert_eq!(default_budget(&ring, Mode::Default), 240.0);
    }

    #[test]
    fn shares_add_up_to_the_budget() {
        let parts = PartName::all();
        let s = shares(&parts, Mode::Default, 80.0);
        let sum: f64 = s.iter().map(|x| x.1).sum();
        assert!((sum - 80.0).abs() < 1e-9, "{sum}");
        assert!(s.iter().all(|x| x.1 > 0.0));
        // The last part gets all that is left.
        assert_eq!(
            next_share(part("sweep-background"), &[], Mode::Default, 7.5),
            7.5
        );
        let first = next_share(parts[0], &parts[1..], Mode::Default, 100.0);
        assert!((first - 9.0).abs() < 1e-9, "{first}");
        // A quick report gives the sizes and the policies more.
        assert!(weight(part("sizes"), Mode::Quick) > weight(part("sizes"), Mode::Default));
    }

    #[test]
    fn far_node_is_the_farthest_by_distance() {
        let far = part("loaded-latency-far").part();
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        assert_eq!(home_node(&q), Some(0));
        assert_eq!(far_node(&q), Some(3));
        let ring = fixture("qemu-ring4-cpuless-hmat.xml");
        // Node 2 is 22 away, the CPU-less node 4 is 20.
        assert_eq!(far_node(&ring), Some(2));
        assert!(far.applicable(&ring).is_ok());
        let one = fixture("offline-cpu0-node0.xml");
        if one.memory_nodes().len() == 1 {
            assert_eq!(far_node(&one), None);
            assert!(far
                .applicable(&one)
                .unwrap_err()
                .contains("one memory node"));
        }
    }

    #[test]
    fn the_factor_follows_real_fixed_costs_within_bounds() {
        // 2 s planned measuring, 1 s fixed predicted, 4 s taken: fixed was
        // 2 s, twice the prediction.
        assert!((corrected_factor(1.0, 2.0, 1.0, 4.0) - 1.5).abs() < 1e-12);
        // Wildly off: bounded at 5x.
        assert!((corrected_factor(1.0, 0.0, 0.1, 100.0) - 3.0).abs() < 1e-12);
        // Nothing predicted: nothing learnt.
        assert_eq!(corrected_factor(1.7, 1.0, 0.0, 9.0), 1.7);
    }
}
