//! `ThreadPolicy`: which CPU each of N worker threads is pinned to.
//!
//! - `compact` (fill, core-major): fill one node's cores, then the next node;
//!   within a node one PU per core first, SMT siblings after. Best for
//!   threads that share data.
//! - `scatter` (round-robin, node-major): one thread per node in turn, each
//!   node filled in its compact order. Best for threads with independent data.
//! - an explicit CPU list, used in the order written.

use crate::machine::Machine;
use crate::IdSet;
use serde::Serialize;

/// How worker threads are laid out over a CPU set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadPolicy {
    Compact,
    Scatter,
    Explicit(Vec<u32>),
}

/// Most threads a layout may hold: eight times the most CPUs a Linux kernel
/// supports (`CONFIG_NR_CPUS` is at most 8192), so oversubscribing stays
/// possible on any machine while a layout (and `numalab set`'s listing of
/// it, about 40 bytes a thread) stays a few megabytes.
pub const MAX_THREADS: usize = 1 << 16;

pub const THREAD_POLICY_CHOICES: &str =
    "compact (fill), scatter (round-robin), or a CPU list like 0,2,4";

impl ThreadPolicy {
    /// Parses `compact`/`fill`, `scatter`/`round-robin`, or an explicit CPU
    /// list (`0,2,4-5`, kept in the written order).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "compact" | "fill" => Ok(Self::Compact),
            "scatter" | "round-robin" | "roundrobin" => Ok(Self::Scatter),
            t if t.starts_with(|c: char| c.is_ascii_digit()) => {
                let mut cpus = Vec::new();
                for item in t.split(',') {
                    for c in IdSet::parse_list(item)?.iter() {
                        cpus.push(c);
                    }
                }
                Ok(Self::Explicit(cpus))
            }
            t => Err(format!(
                "unknown thread policy '{t}'; valid: {THREAD_POLICY_CHOICES}"
            )),
        }
    }

    /// The CPU of each of `n` threads, drawn from `cpus`. More threads than
    /// CPUs is refused unless `oversubscribe` (then the order wraps around);
    /// more than [`MAX_THREADS`] always.
    pub fn assign(
        &self,
        m: &Machine,
        cpus: &IdSet,
        n: usize,
        oversubscribe: bool,
    ) -> Result<Vec<u32>, String> {
        if n == 0 {
            return Err("the number of threads must be at least 1".into());
        }
        if n > MAX_THREADS {
            return Err(format!(
                "{n} threads is more than a layout may hold; valid: 1 to {MAX_THREADS}"
            ));
        }
        let order = match self {
            Self::Compact => compact_order(m, cpus),
            Self::Scatter => scatter_order(m, cpus),
            Self::Explicit(list) => {
                if let Some(bad) = list.iter().find(|c| !cpus.contains(**c)) {
                    return Err(format!("CPU {bad} is not in the usable set {cpus}"));
                }
                list.clone()
            }
        };
        if order.is_empty() {
            return Err(format!("no usable CPU in {{{cpus}}}"));
        }
        if n > order.len() && !oversubscribe {
            return Err(format!(
                "{n} threads but only {} CPUs ({}) : pass --oversubscribe to share CPUs",
                order.len(),
                order.iter().copied().collect::<IdSet>()
            ));
        }
        Ok(order.iter().copied().cycle().take(n).collect())
    }
}

/// Each node's CPUs of `cpus` in compact order: one PU per core first, then
/// the remaining SMT siblings; nodes in OS order. CPUs outside any node
/// (machines without NUMA information) form one group at the end.
fn per_node_compact(m: &Machine, cpus: &IdSet) -> Vec<Vec<u32>> {
    let mut groups: Vec<Vec<u32>> = Vec::new();
    let mut seen = IdSet::new();
    for node in &m.nodes {
        let mine = node.cpus.intersection(cpus);
        if mine.is_empty() {
            continue;
        }
        seen = seen.union(&mine);
        groups.push(smt_last(m, &mine));
    }
    let rest = cpus.difference(&seen);
    if !rest.is_empty() {
        groups.push(smt_last(m, &rest));
    }
    groups
}

fn smt_last(m: &Machine, cpus: &IdSet) -> Vec<u32> {
    // Rank of each PU inside its core (0 for the first hardware thread).
    let rank = |cpu: u32| -> usize {
        m.cores
            .iter()
            .find(|c| c.cpus.contains(cpu))
            .map(|c| c.cpus.iter().position(|x| x == cpu).unwrap_or(0))
            .unwrap_or(0)
    };
    let mut v: Vec<u32> = cpus.iter().collect();
    v.sort_by_key(|&c| (rank(c), c));
    v
}

/// Core-major: node by node.
pub fn compact_order(m: &Machine, cpus: &IdSet) -> Vec<u32> {
    per_node_compact(m, cpus).concat()
}

/// Node-major: one CPU from each node in turn.
pub fn scatter_order(m: &Machine, cpus: &IdSet) -> Vec<u32> {
    let groups = per_node_compact(m, cpus);
    let longest = groups.iter().map(Vec::len).max().unwrap_or(0);
    (0..longest)
        .flat_map(|i| groups.iter().filter_map(move |g| g.get(i).copied()))
        .collect()
}
