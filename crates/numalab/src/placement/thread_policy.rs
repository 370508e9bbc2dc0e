//! `ThreadPolicy`: which CPU each of N worker threads is pinned to.
//!
//! - `compact` (fill, core-major): fill one node's cores, then the next node;
//!   within a node one PU per core first, SMT siblings after. Best for
//!   threads that share data.
//! - `scatter` (round-robin, node-major): one thread per node in turn, each
//!   node filled in its compact order. Best for threads with independent data.
//! - an explicit CPU list, used in the order written.

use crate::machine::Machine;
use crate::text::format::excerpt;
use crate::IdSet;
use serde::Serialize;

/// Most worker threads anything lays out: 8192, the largest `NR_CPUS`
/// Linux is built with (x86-64 MAXSMP). One thread per CPU of the largest
/// machine is the most a placement experiment needs; beyond it each thread
/// would only add a stack and a buffer.
pub const MAX_THREADS: usize = 8192;

/// How worker threads are laid out over a CPU set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ThreadPolicy {
    Compact,
    Scatter,
    Explicit(Vec<u32>),
}

/// Most threads a layout may hold (`numalab set --threads N
/// --oversubscribe`): eight times the most CPUs a Linux kernel
/// supports (`CONFIG_NR_CPUS` is at most 8192), so oversubscribing stays
/// possible on any machine while a layout (and `numalab set`'s listing of
/// it, about 40 bytes a thread) stays a few megabytes.
pub const MAX_LAYOUT_THREADS: usize = 1 << 16;

pub const THREAD_POLICY_CHOICES: &str =
    "compact (fill), scatter (round-robin), or a CPU list like 0,2,4";

impl ThreadPolicy {
    /// Parses `compact`/`fill`, `scatter`/`round-robin`, or an explicit CPU
    /// list (`0,2,4-5`, kept in the written order, at most [`MAX_THREADS`]
    /// CPUs; a CPU may repeat, which [`ThreadPolicy::assign`] allows only
    /// when oversubscribing).
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.trim() {
            "compact" | "fill" => Ok(Self::Compact),
            "scatter" | "round-robin" | "roundrobin" => Ok(Self::Scatter),
            t if t.starts_with(|c: char| c.is_ascii_digit()) => {
                let mut cpus = Vec::new();
                for item in t.split(',') {
                    if item.trim().is_empty() {
                        return Err(format!(
                            "the CPU list '{}' has an empty entry; write e.g. 0,2,4-5",
                            excerpt(t, 40)
                        ));
                    }
                    let ids = IdSet::parse_list(item)?;
                    if cpus.len() + ids.len() > MAX_THREADS {
                        return Err(format!(
                            "the CPU list '{}' names more than {MAX_THREADS} threads",
                            excerpt(t, 40)
                        ));
                    }
                    cpus.extend(ids.iter());
                }
                Ok(Self::Explicit(cpus))
            }
            t => Err(format!(
                "unknown thread policy '{}'; valid: {THREAD_POLICY_CHOICES}",
                excerpt(t, 40)
            )),
        }
    }

    /// The CPU of each of `n` threads, drawn from `cpus`. More threads than
    /// CPUs, or an explicit list naming a CPU twice, is refused unless
    /// `oversubscribe` (then the order wraps around); more than
    /// [`MAX_LAYOUT_THREADS`] always.
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
        if n > MAX_LAYOUT_THREADS {
            return Err(format!(
                "{n} threads is more than a layout may hold; valid: 1 to {MAX_LAYOUT_THREADS}"
            ));
        }
        let order = match self {
            Self::Compact => compact_order(m, cpus),
            Self::Scatter => scatter_order(m, cpus),
            Self::Explicit(list) => {
                if let Some(bad) = list.iter().find(|c| !cpus.contains(**c)) {
                    return Err(format!(
                        "CPU {bad} of the thread list is not in the usable set {cpus}"
                    ));
                }
                let mut seen = IdSet::new();
                // The whole list, also past the threads that use it: a
                // repeat is a mistake in the layout the user wrote, even
                // where fewer threads than entries would not meet it.
                let twice = list.iter().find(|&&c| !seen.insert(c));
                if let (Some(cpu), false) = (twice, oversubscribe) {
                    return Err(format!(
                        "CPU {cpu} appears twice in the thread list {}: two threads would share it; pass --oversubscribe to share CPUs",
                        excerpt(&list.iter().map(u32::to_string).collect::<Vec<_>>().join(","), 40)
                    ));
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

/// One thread of a [`SetLayout`]: its number, CPU and that CPU's node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThreadSlot {
    pub thread: usize,
    pub cpu: u32,
    pub node: Option<u32>,
}

/// `numalab set`'s result: a resource set's CPUs and nodes, and where each
/// of N threads would run over its CPUs.
#[derive(Debug, Clone, Serialize)]
pub struct SetLayout {
    /// The expression as given.
    pub expression: String,
    pub cpus: IdSet,
    pub nodes: IdSet,
    /// Empty unless threads were laid out.
    pub threads: Vec<ThreadSlot>,
}

impl SetLayout {
    /// The set `cpus`/`nodes` of `expression`, with `threads` (how many,
    /// laid out how, CPUs shared or not) laid over its CPUs.
    pub fn new(
        m: &Machine,
        expression: &str,
        cpus: IdSet,
        nodes: IdSet,
        threads: Option<(usize, &ThreadPolicy, bool)>,
    ) -> Result<Self, String> {
        let threads = match threads {
            None => Vec::new(),
            Some((n, policy, oversubscribe)) => policy
                .assign(m, &cpus, n, oversubscribe)?
                .into_iter()
                .enumerate()
                .map(|(thread, cpu)| ThreadSlot {
                    thread,
                    cpu,
                    node: m.node_of_cpu(cpu),
                })
                .collect(),
        };
        Ok(SetLayout {
            expression: expression.to_string(),
            cpus,
            nodes,
            threads,
        })
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
