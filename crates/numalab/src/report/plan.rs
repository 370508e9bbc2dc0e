//! How a report spends its time: the default budget of each mode for a
//! machine, each part's share of it, and which parts a machine can have.
//!
//! The budget is shared out part by part as the report runs: a part gets
//! its weight's share of what is left, so a part that overran shrinks the
//! later ones and one that finished early gives them more. The sweeps run
//! last because they keep a deadline exactly.

use crate::machine::Machine;
use crate::report::results::{Mode, PartName};

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
    let w = match p {
        PartName::LatencyMatrix => 9.0,
        PartName::BandwidthMatrix => 7.0,
        PartName::Sizes => 14.0,
        PartName::Scaling => 9.0,
        PartName::C2c => 7.0,
        PartName::LoadedLatencyLocal => 9.0,
        PartName::LoadedLatencyFar => 9.0,
        PartName::Policies => 14.0,
        PartName::Sweep => 12.0,
        PartName::SweepBackground => 10.0,
    };
    // A quick report has little time: the fixed costs of the sizes (one
    // chase per size) and of the policy cells need a larger share.
    match (mode, p) {
        (Mode::Quick, PartName::Sizes | PartName::Policies) => w * 1.2,
        _ => w,
    }
}

/// Whether the machine can have the part; `Err` says why not.
pub fn applicable(m: &Machine, p: PartName) -> Result<(), String> {
    let cpus = m.allowed_cpus.len();
    match p {
        PartName::C2c if cpus < 2 => Err(format!(
            "needs two CPUs to pass a cache line between; this process may use only CPU {}",
            m.allowed_cpus
        )),
        PartName::LoadedLatencyLocal | PartName::LoadedLatencyFar if cpus < 2 => Err(format!(
            "needs one CPU to chase and another to inject traffic; this process may use only CPU {}",
            m.allowed_cpus
        )),
        PartName::LoadedLatencyFar => match far_node(m) {
            Some(_) => Ok(()),
            None => Err(
                "one memory node: the farthest node is the local one (see loaded-latency-local)"
                    .into(),
            ),
        },
        _ => Ok(()),
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

/// CPUs for the core-to-core matrix when every pair does not fit in
/// `budget_s` at `min_pair_s` each: up to `per_node` CPUs of each node, on
/// distinct cores first. Returns every allowed CPU when all pairs fit.
pub fn c2c_cpus(m: &Machine, budget_s: f64, min_pair_s: f64) -> Vec<u32> {
    let all: Vec<u32> = m.allowed_cpus.iter().collect();
    let pairs = |n: usize| n * n.saturating_sub(1) / 2;
    if pairs(all.len()) as f64 * min_pair_s <= budget_s {
        return all;
    }
    let nodes: Vec<u32> = m.cpu_nodes().iter().collect();
    // CPUs of each node, one per core first, then the cores' siblings.
    let per_node_order: Vec<Vec<u32>> = nodes
        .iter()
        .map(|&n| {
            let cpus = m.allowed_cpus_of(n);
            let mut firsts = Vec::new();
            let mut rest = Vec::new();
            for core in &m.cores {
                let mine: Vec<u32> = core.cpus.intersection(&cpus).iter().collect();
                if let Some((f, r)) = mine.split_first() {
                    firsts.push(*f);
                    rest.extend_from_slice(r);
                }
            }
            // CPUs no core claims (topology files without cores).
            for c in cpus.iter() {
                if !firsts.contains(&c) && !rest.contains(&c) {
                    firsts.push(c);
                }
            }
            firsts.extend(rest);
            firsts
        })
        .collect();
    let mut best: Vec<u32> = Vec::new();
    for k in 1.. {
        let pick: Vec<u32> = per_node_order
            .iter()
            .flat_map(|v| v.iter().take(k).copied())
            .collect();
        let grew = pick.len() > best.len();
        if pick.len() >= 2 && pairs(pick.len()) as f64 * min_pair_s > budget_s {
            break;
        }
        best = pick;
        if !grew {
            break;
        }
    }
    if best.len() < 2 {
        // Not even one CPU per node fits: the first two nodes' first CPUs.
        best = per_node_order
            .iter()
            .filter_map(|v| v.first().copied())
            .take(2)
            .collect();
        if best.len() < 2 {
            best = all.into_iter().take(2).collect();
        }
    }
    best.sort_unstable();
    best
}

/// Thread counts of the scaling part: every count up to 8, beyond that
/// powers of two, the CPUs of one node and multiples of it, and the total.
pub fn scaling_counts(m: &Machine) -> Vec<usize> {
    let n = m.allowed_cpus.len();
    if n <= 8 {
        return (1..=n).collect();
    }
    let mut v: Vec<usize> = (0..).map(|k| 1usize << k).take_while(|&c| c <= n).collect();
    let per_node = m
        .cpu_nodes()
        .first()
        .map(|x| m.allowed_cpus_of(x).len())
        .unwrap_or(0);
    if per_node > 0 {
        v.extend((1..).map(|k| k * per_node).take_while(|&c| c <= n));
    }
    v.push(n);
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::fixture;

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
        let parts = PartName::ALL;
        let s = shares(&parts, Mode::Default, 80.0);
        let sum: f64 = s.iter().map(|x| x.1).sum();
        assert!((sum - 80.0).abs() < 1e-9, "{sum}");
        assert!(s.iter().all(|x| x.1 > 0.0));
        // The last part gets all that is left.
        assert_eq!(
            next_share(PartName::SweepBackground, &[], Mode::Default, 7.5),
            7.5
        );
        let first = next_share(
            PartName::LatencyMatrix,
            &PartName::ALL[1..],
            Mode::Default,
            100.0,
        );
        assert!((first - 9.0).abs() < 1e-9, "{first}");
    }

    #[test]
    fn far_node_is_the_farthest_by_distance() {
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        assert_eq!(home_node(&q), Some(0));
        assert_eq!(far_node(&q), Some(3));
        let ring = fixture("qemu-ring4-cpuless-hmat.xml");
        // Node 2 is 22 away, the CPU-less node 4 is 20.
        assert_eq!(far_node(&ring), Some(2));
        assert!(applicable(&ring, PartName::LoadedLatencyFar).is_ok());
        let one = fixture("offline-cpu0-node0.xml");
        if one.memory_nodes().len() == 1 {
            assert_eq!(far_node(&one), None);
            assert!(applicable(&one, PartName::LoadedLatencyFar)
                .unwrap_err()
                .contains("one memory node"));
        }
    }

    #[test]
    fn c2c_subset_fits_the_budget_and_covers_every_node() {
        let m = fixture("16amd64-8n2c.xml");
        let all = c2c_cpus(&m, 1000.0, 0.05);
        assert_eq!(all.len(), 16);
        // 120 pairs x 0.05 s = 6 s: does not fit in 2 s.
        let some = c2c_cpus(&m, 2.0, 0.05);
        let pairs = some.len() * (some.len() - 1) / 2;
        assert!(pairs as f64 * 0.05 <= 2.0, "{some:?}");
        let nodes: std::collections::BTreeSet<u32> =
            some.iter().filter_map(|&c| m.node_of_cpu(c)).collect();
        assert_eq!(nodes.len(), 8, "one CPU of every node: {some:?}");
        // Nothing fits: still two CPUs on two nodes.
        let two = c2c_cpus(&m, 0.0, 0.05);
        assert_eq!(two.len(), 2);
        assert_ne!(m.node_of_cpu(two[0]), m.node_of_cpu(two[1]));
    }

    #[test]
    fn scaling_counts_stay_few_on_large_machines() {
        let m = fixture("192em64t-24n8c2t.xml");
        let v = scaling_counts(&m);
        assert_eq!(v.first(), Some(&1));
        assert_eq!(v.last(), Some(&m.allowed_cpus.len()));
        assert!(v.len() < 40, "{v:?}");
        assert!(v.windows(2).all(|w| w[0] < w[1]));
        let q = fixture("qemu-quartet-4n2c-ring.xml");
        assert_eq!(scaling_counts(&q), (1..=8).collect::<Vec<_>>());
    }
}
