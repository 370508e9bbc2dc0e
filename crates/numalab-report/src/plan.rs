//! The budget of a report and the nodes and CPUs its parts measure from:
//! the default budget of each mode for a machine, the home and far nodes,
//! and buffers fitted to a node's free memory. How the budget is shared
//! among the parts is [`super::budget`].

use crate::model::{Costs, Mode};
use numalab::machine::Machine;
use numalab::placement::PlacementError;

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

/// Bytes per buffer so that `count` buffers of at most `wanted` bytes fit
/// in `share` of what node `node` can give now (2 MiB multiples, at least
/// 2 MiB): a report must never push a node into the OOM killer, and small
/// nodes (a 512 MiB guest node, an HBM or CXL tier) get smaller buffers.
/// What a node can give is the capacity check's figure
/// ([`numalab::placement::node_memory::NodeMemory::allocatable`]: page cache
/// counted, hot-added memory included, the cgroup's limit applied), so the
/// report sizes its buffers as the check will judge them; a node without
/// figures is not limited here.
pub fn fit(node: u32, count: usize, wanted: usize, share: f64) -> usize {
    const STEP: usize = 2 << 20;
    let memory = numalab::placement::node_memory::NodeMemory::capture_for_capacity();
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

/// Whether the part's chasing or streaming CPU exists: an allowed CPU on
/// the first allowed node with CPUs (a cgroup may allow CPUs only on nodes
/// it does not allow memory from).
pub fn needs_home_cpu(m: &Machine) -> Result<(), String> {
    match home_cpu(m) {
        Some(_) => Ok(()),
        None => Err(format!(
            "needs an allowed CPU on an allowed node: CPUs {} are allowed, but none is on nodes {}",
            m.allowed_cpus, m.allowed_nodes
        )),
    }
}

/// The error of a part that needs a CPU node and finds none allowed.
pub fn no_cpu_node() -> PlacementError {
    PlacementError::Invalid("no allowed node has CPUs".into())
}

/// What a plan runs on: the machine, the mode, the wanted buffer size and
/// the costs; `live` when buffers must fit in the machine's free memory now
/// (a topology file, or a simulation, uses the nodes' memory instead).
pub struct PlanEnv<'a> {
    pub m: &'a Machine,
    pub mode: Mode,
    /// Bytes per buffer of the memory-bound measurements, before fitting.
    pub size: usize,
    pub costs: &'a Costs,
    pub live: bool,
}

impl PlanEnv<'_> {
    /// Runs `f` with the environment a part's applicability is judged in:
    /// the default mode, the reference costs, a machine file's memory.
    pub fn for_applicability<R>(m: &Machine, f: impl FnOnce(&PlanEnv) -> R) -> R {
        let costs = Costs::reference();
        f(&PlanEnv {
            m,
            mode: Mode::Default,
            size: 2 << 20,
            costs: &costs,
            live: false,
        })
    }

    /// Bytes per buffer so that `count` buffers fit in `share` of node
    /// `node`'s memory: free memory now on a live machine
    /// ([`fit`]), the node's memory otherwise.
    pub fn fit(&self, node: u32, count: usize, wanted: usize, share: f64) -> usize {
        if self.live {
            return fit(node, count, wanted, share);
        }
        const STEP: usize = 2 << 20;
        let memory = self.m.node(node).map_or(u64::MAX, |n| n.memory_bytes) as f64;
        let cap = (memory * share / count.max(1) as f64).min(usize::MAX as f64) as usize;
        wanted.min(cap / STEP * STEP).max(STEP)
    }

    /// [`PlanEnv::fit`] on every node of `nodes`: the smallest.
    pub fn fit_all(&self, nodes: &[u32], count: usize, wanted: usize, share: f64) -> usize {
        nodes
            .iter()
            .map(|&n| self.fit(n, count, wanted, share))
            .min()
            .unwrap_or(wanted)
    }

    /// The last-level cache in bytes (32 MiB when the machine does not say).
    pub fn llc(&self) -> f64 {
        self.m.last_level_cache_bytes().unwrap_or(32 << 20) as f64
    }

    /// The smallest buffer a memory-bound measurement may shrink to: twice
    /// the last-level cache, at least 16 MiB, in 2 MiB steps, and never
    /// more than `bytes` (a small node keeps the buffer it can hold).
    pub fn min_memory_bytes(&self, bytes: usize) -> usize {
        let rule = ((2.0 * self.llc()) as usize)
            .max(16 << 20)
            .next_multiple_of(2 << 20);
        rule.min(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use crate::part::PartName;
    use crate::registry::REPORT;

    fn part(name: &str) -> PartName {
        REPORT.find(name).unwrap()
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
    fn far_node_is_the_farthest_by_distance() {
        let far = REPORT.part(part("loaded-latency-far"));
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
}
