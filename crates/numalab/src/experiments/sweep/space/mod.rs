//! The case space of a sweep and the machine's symmetry over it: which
//! cases exist, which of them are the same experiment, and in what order to
//! run them when the budget cannot pay for all.

mod fold;
mod plan;
mod twin;

use super::symmetry::{GroupOrder, NodeSymmetry};
use super::tree::{MachineTree, Path};
use crate::machine::Machine;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

pub use fold::MAX_EXCHANGED_THREADS;
pub(super) use plan::hop_class_count;
pub use plan::{case_counts, coverage_order, plan, CaseCount};
pub use twin::TwinMove;

/// What a foreground thread does to its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Access {
    Read,
    Write,
}

impl Access {
    /// The letter of the placement label.
    pub fn letter(self) -> char {
        match self {
            Access::Read => 'r',
            Access::Write => 'w',
        }
    }

    /// `r`, `w` or `rw` (both, every mix).
    pub fn parse_set(s: &str) -> Result<Vec<Access>, String> {
        match s.trim() {
            "r" | "read" => Ok(vec![Access::Read]),
            "w" | "write" => Ok(vec![Access::Write]),
            "rw" | "both" => Ok(vec![Access::Read, Access::Write]),
            other => Err(format!(
                "unknown access '{other}'; valid: r (read-only), w (write-only), rw (every mix)"
            )),
        }
    }
}

/// A CPU of the sweep with its place in the machine tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SweepCpu {
    os: u32,
    node: u32,
    /// Its path in its node's local tree (concrete indexes).
    path: Path,
    /// Position of the CPU among the node's sweep CPUs: the `core` of the
    /// classic `node.core.{r|w}.memnode` label.
    in_node: u16,
}

/// What an automorphism keeps between two nodes: their distance, the
/// objects above both (as one id), and the memory attributes of the pair.
type PairRelation<'a> = (Option<u64>, u32, Option<&'a Vec<(String, u64)>>);

/// A thread of a case in symmetry coordinates: node, path in the node's
/// local tree (concrete indexes or slots), access, memory node.
type Key = (u32, Path, Access, u32);

/// The space a sweep enumerates, and the machine's symmetry over it.
#[derive(Debug, Clone)]
pub struct SweepSpace {
    /// Sorted by OS index.
    cpus: Vec<SweepCpu>,
    mem_nodes: Vec<u32>,
    accesses: Vec<Access>,
    /// Every node of the machine, sorted: the node symmetry acts on all
    /// of them (an automorphism of the whole machine that keeps the
    /// sweep's CPUs and memory nodes).
    nodes: Vec<u32>,
    /// Node symmetry over `nodes` (indexes into it).
    symmetry: NodeSymmetry,
    /// The machine tree: local trees, paths, objects above the nodes.
    tree: MachineTree,
    hops: HashMap<(u32, u32), u32>,
}

/// One thread of a concrete case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadCase {
    pub cpu: u32,
    pub node: u32,
    /// Position of the CPU among its node's sweep CPUs.
    pub core: u32,
    pub access: Access,
    pub mem: u32,
    /// Hops from the CPU's node to the memory node (None: unknown).
    pub hops: Option<u32>,
}

impl ThreadCase {
    /// The classic label `node.core.{r|w}.memnode`.
    pub fn label(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            self.node,
            self.core,
            self.access.letter(),
            self.mem
        )
    }
}

/// A case to run: its threads and how many cases it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedCase {
    pub threads: Vec<ThreadCase>,
    /// Cases of the full enumeration equivalent to this one (1 with `--every-case`).
    pub class_size: u64,
    /// The class's canonical form (equal for equivalent cases).
    pub class_key: String,
}

impl PlannedCase {
    /// The case's labels joined by spaces.
    pub fn label(&self) -> String {
        self.threads
            .iter()
            .map(|t| t.label())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The hop class: each thread's (access, hops), sorted (thread order does
    /// not matter for it).
    pub fn hop_class(&self) -> String {
        let mut v: Vec<String> = self
            .threads
            .iter()
            .map(|t| {
                format!(
                    "{}{}",
                    t.access.letter(),
                    t.hops.map_or("?".into(), |h| h.to_string())
                )
            })
            .collect();
        v.sort();
        v.join("/")
    }
}

/// Most cases a sweep plan may hold, over all its thread counts (folded
/// classes, or cases with `--every-case`). The shortest case a sweep measures
/// costs about 0.16 s with its set-up, so this is days of measuring
/// without a budget; with a budget, a sweep measures a covering subset of
/// its plan. The plan takes 100 to 500 bytes a case (about 320 MB for the
/// 1.44 million classes of two threads on a 24-node SMT machine, which the
/// default sweep of `numalab report` must still plan there); a larger plan
/// could neither be run nor listed usefully.
pub const MAX_PLANNED_CASES: u64 = 1_500_000;

/// Most symmetry classes a folded plan may hold over all its thread
/// counts: about nine hours of measuring at the shortest case. Folding
/// under a large symmetry group costs a few tens of microseconds a class
/// (every order of the threads is tried), so this also keeps refusing or
/// listing any plan within seconds.
pub const MAX_FOLDED_CLASSES: u64 = 200_000;

/// Set partitions of up to [`MAX_COUNTED_THREADS`] labelled threads are
/// counted exactly; beyond, counts saturate (a plan that large is refused
/// anyway).
const MAX_COUNTED_THREADS: usize = 64;

/// The one line naming a CPU the sweep cannot place.
fn no_node(c: u32) -> String {
    format!("CPU {c} does not exist or belongs to no NUMA node")
}

impl SweepSpace {
    /// The space over `cpus` (foreground CPUs) and `mem_nodes`.
    pub fn new(
        m: &Machine,
        cpus: &IdSet,
        mem_nodes: &IdSet,
        accesses: &[Access],
    ) -> Result<Self, String> {
        if cpus.is_empty() {
            return Err("no CPUs to sweep over".into());
        }
        check_mem_nodes(m, mem_nodes)?;
        let tree = MachineTree::new(m, cpus);
        let nodes = tree.nodes().to_vec();
        let mut placed: Vec<SweepCpu> = Vec::with_capacity(cpus.len());
        let mut count: HashMap<u32, u16> = HashMap::new();
        for c in cpus.iter() {
            let (a, path) = tree.place(c).ok_or_else(|| no_node(c))?;
            let node = nodes[a];
            let k = count.entry(node).or_default();
            placed.push(SweepCpu {
                os: c,
                node,
                path,
                in_node: *k,
            });
            *k += 1;
        }
        let hops = hop_table(m, &nodes);
        let mut space = SweepSpace {
            cpus: placed,
            mem_nodes: mem_nodes.iter().collect(),
            accesses: accesses.to_vec(),
            nodes,
            symmetry: NodeSymmetry::new(None, &[]),
            tree,
            hops,
        };
        space.symmetry = space.node_symmetry(m);
        Ok(space)
    }

    /// What must match for node `a` to stand in for node `b`: its local
    /// tree (CPUs, caches, sweep PUs), its role as a memory node, its
    /// memory's kind, size (as a power of two) and tier, and the memory
    /// attributes it has as a target of CPUs that are not whole nodes.
    fn node_signature(&self, m: &Machine, i: usize) -> String {
        let n = self.nodes[i];
        let node = m.node(n);
        let mut foreign: Vec<(String, u64, usize)> = m
            .memory_attributes
            .iter()
            .filter(|v| v.target == n && v.initiator_nodes.is_empty())
            .map(|v| (v.attribute.clone(), v.value, v.initiator_cpus.len()))
            .collect();
        foreign.sort();
        format!(
            "{:?}|{}|{:?}|{}|{:?}|{:?}",
            self.tree.shape(i),
            self.mem_nodes.contains(&n),
            node.map(|x| (x.cpuless, x.kind, x.subtype.clone())),
            node.map_or(0, |x| memory_scale(x.memory_bytes)),
            node.and_then(|x| x.tier),
            foreign
        )
    }

    /// The symmetry of the nodes: permutations that keep each pair's
    /// distance, the objects above both (a package of two nodes, an L3
    /// over sub-NUMA clusters) and their memory attributes, each node's
    /// signature, and the labelled node sets (the objects above the
    /// nodes, memory attributes of several initiator nodes). Without
    /// distances, or with objects that do not nest, only the identity is
    /// safe.
    fn node_symmetry(&self, m: &Machine) -> NodeSymmetry {
        let n = self.nodes.len();
        let sig: Vec<String> = (0..n).map(|i| self.node_signature(m, i)).collect();
        // Memory attributes of one initiator node: a pair relation; of
        // several: a labelled set (with the target) besides.
        let mut pair_attrs: HashMap<(usize, usize), Vec<(String, u64)>> = HashMap::new();
        let mut sets: Vec<(u32, Vec<usize>)> = self.tree.upper_sets().to_vec();
        let mut set_labels: HashMap<(String, u64, usize), u32> = HashMap::new();
        let top = sets.iter().map(|s| s.0).max().unwrap_or(0) + 1;
        for v in &m.memory_attributes {
            let Ok(t) = self.nodes.binary_search(&v.target) else {
                continue;
            };
            let inits: Vec<usize> = v
                .initiator_nodes
                .iter()
                .filter_map(|x| self.nodes.binary_search(&x).ok())
                .collect();
            for &a in &inits {
                pair_attrs
                    .entry((a, t))
                    .or_default()
                    .push((v.attribute.clone(), v.value));
            }
            if inits.len() > 1 {
                let next = top + set_labels.len() as u32;
                let label = *set_labels
                    .entry((v.attribute.clone(), v.value, inits.len()))
                    .or_insert(next);
                let mut members = inits.clone();
                members.push(t);
                sets.push((label, members));
            }
        }
        for v in pair_attrs.values_mut() {
            v.sort();
        }
        let trivial = m.distances.is_none() || !self.tree.laminar;
        let dist = (!trivial).then(|| {
            let d = m.distances.as_ref().expect("checked");
            let mut ids: HashMap<PairRelation, u64> = HashMap::new();
            (0..n)
                .map(|a| {
                    (0..n)
                        .map(|b| {
                            let key = (
                                d.get(self.nodes[a], self.nodes[b]),
                                self.tree.upper(a, b),
                                pair_attrs.get(&(a, b)),
                            );
                            let next = ids.len() as u64;
                            Some(*ids.entry(key).or_insert(next))
                        })
                        .collect()
                })
                .collect()
        });
        NodeSymmetry::with_sets(dist, &sig, sets)
    }

    /// The order of the node symmetry group (1 = no node symmetry),
    /// exactly, however large.
    pub fn symmetry_order(&self) -> &GroupOrder {
        self.symmetry.order()
    }

    /// The order of the whole machine's automorphisms that keep the
    /// sweep's CPUs and memory nodes: the node symmetry times the local
    /// trees' own (cores, caches and PUs of a node exchanged), exactly.
    pub fn machine_symmetry_order(&self) -> GroupOrder {
        let mut order = self.symmetry.order().clone();
        self.tree.local_order(&mut order);
        order
    }

    /// Whether the machine's objects nest as a tree (always, from hwloc);
    /// when they do not, nothing is folded.
    pub fn tree_is_laminar(&self) -> bool {
        self.tree.laminar
    }

    /// [`SweepSpace::symmetry_order`] as a number, saturating at
    /// `u128::MAX`.
    pub fn automorphism_count(&self) -> u128 {
        self.symmetry.order().saturating()
    }

    /// OS indexes of the sweep's CPUs, in order.
    pub(super) fn cpu_ids(&self) -> Vec<u32> {
        self.cpus.iter().map(|c| c.os).collect()
    }

    /// The memory nodes buffers are bound to, in order.
    pub(super) fn mem_nodes(&self) -> &[u32] {
        &self.mem_nodes
    }

    /// Cases of the full enumeration for `threads` threads (`u128::MAX`
    /// when even that cannot hold them).
    pub fn total_cases(&self, threads: usize) -> u128 {
        let per = (self.cpus.len() * self.mem_nodes.len() * self.accesses.len()) as u128;
        u32::try_from(threads)
            .ok()
            .and_then(|t| per.checked_pow(t))
            .unwrap_or(u128::MAX)
    }

    /// Bounds on the number of classes [`SweepSpace::folded`] gives for
    /// `threads` threads, computed without enumerating: (at least, at
    /// most), saturating at `u128::MAX`.
    ///
    /// The upper bound counts cases up to core and PU swaps alone, which is
    /// exact without node symmetry: per thread an access and a memory node,
    /// and for the CPUs, the ways to spread the labelled threads over the
    /// groups of interchangeable cores, each group holding its threads in
    /// cores numbered by first use and PUs numbered by first use in each
    /// core. Node automorphisms and thread exchanges merge at most their
    /// number of those into one class, which gives the lower bound.
    pub fn class_bounds(&self, threads: usize) -> (u128, u128) {
        let per_thread = (self.accesses.len() * self.mem_nodes.len()) as u128;
        let choices = u32::try_from(threads)
            .ok()
            .and_then(|t| per_thread.checked_pow(t))
            .unwrap_or(u128::MAX);
        let upper = if threads > MAX_COUNTED_THREADS {
            u128::MAX
        } else {
            self.tree.slot_forms(threads, &binomials(threads))[threads]
        }
        .saturating_mul(choices);
        let merged = self
            .symmetry
            .order()
            .saturating()
            .saturating_mul(fold::thread_orders(threads));
        let lower = upper.div_ceil(merged.max(1));
        (lower, upper)
    }

    /// Whether every orbit search so far finished within its steps (when
    /// one gave up, folding falls back to core swaps and the counts of
    /// the fuller symmetry bound it from below only).
    fn symmetry_held(&self) -> bool {
        !self.symmetry.gave_up()
    }

    fn node_index(&self, n: u32) -> usize {
        self.nodes.binary_search(&n).expect("involved node")
    }
}

/// A node's memory size on a scale of powers of two (rounded): nodes of
/// 8 GiB and of 8 GiB less what the firmware keeps are alike, 8 and 16
/// GiB are not.
fn memory_scale(bytes: u64) -> i64 {
    if bytes == 0 {
        return i64::MIN;
    }
    (bytes as f64).log2().round() as i64
}

/// Pascal's triangle up to `n`, saturating.
fn binomials(n: usize) -> Vec<Vec<u128>> {
    let mut c = vec![vec![0u128; n + 1]; n + 1];
    for k in 0..=n {
        c[k][0] = 1;
        for i in 1..=k {
            c[k][i] = c[k - 1][i - 1].saturating_add(c[k - 1][i]);
        }
    }
    c
}

/// Refuses an empty set and nodes that do not exist or have no memory.
fn check_mem_nodes(m: &Machine, mem_nodes: &IdSet) -> Result<(), String> {
    if mem_nodes.is_empty() {
        return Err("no memory nodes to sweep over".into());
    }
    for n in mem_nodes.iter() {
        match m.node(n) {
            None => {
                return Err(format!(
                    "memory node {n} does not exist; nodes: {}",
                    m.node_ids()
                ))
            }
            Some(node) if node.memory_bytes == 0 => {
                return Err(format!(
                    "node {n} has no memory; nodes with memory: {}",
                    nodes_with_memory(m)
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Hops between every pair of `nodes` the machine knows a path for.
fn hop_table(m: &Machine, nodes: &[u32]) -> HashMap<(u32, u32), u32> {
    let mut hops = HashMap::new();
    for &a in nodes {
        for &b in nodes {
            if let Some(h) = m.hops_between(a, b) {
                hops.insert((a, b), h);
            }
        }
    }
    hops
}

fn nodes_with_memory(m: &Machine) -> IdSet {
    let mut s = IdSet::new();
    for n in &m.nodes {
        if n.memory_bytes > 0 {
            s.insert(n.os_index);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::super::SweepRequest;
    use super::*;
    use crate::machine::fixture;
    use crate::measure::kernels::{BandwidthKernel, Isa};
    use crate::measure::stats::StopRule;

    const RW: &[Access] = &[Access::Read, Access::Write];

    /// The space of every allowed CPU and memory node of a fixture.
    fn whole(name: &str) -> SweepSpace {
        let m = fixture(name);
        SweepSpace::new(&m, &m.allowed_cpus, &m.memory_nodes(), RW).unwrap()
    }

    fn request(space: &SweepSpace, threads: &[usize], full: bool, full_limit: u64) -> SweepRequest {
        SweepRequest {
            threads: threads.to_vec(),
            cpus: space.cpu_ids().into_iter().collect(),
            mem_nodes: space.mem_nodes().iter().copied().collect(),
            accesses: RW.to_vec(),
            read_kernel: BandwidthKernel::LineRead,
            write_kernel: BandwidthKernel::LineWrite,
            isa: Isa::Portable,
            buffer_bytes: 1 << 20,
            thp: None,
            full,
            budget: None,
            rule: StopRule::default(),
            backgrounds: vec![None],
            background_bytes: 1 << 20,
            full_limit,
            min_sample_s: 0.0,
            twins: false,
        }
    }

    #[test]
    fn class_bounds_hold_the_folded_count_and_are_exact_without_node_symmetry() {
        // Plain cores, SMT pairs, several core groups per node, node
        // symmetries of 2 and 8.
        let spaces = [
            ("qemu-quartet-4n2c-ring.xml", 3),
            ("8intel64-4n2t-memattrs.xml", 2),
            ("8em64t-2s2ca2c-buggynuma.xml", 4),
            ("power8gpudistances.xml", 2),
            ("fakeheteromemtiers.xml", 2),
            ("16amd64-8n2c.xml", 2),
        ];
        for (name, most) in spaces {
            let s = whole(name);
            for t in 1..=most {
                let folded = s.folded(t).len() as u128;
                let (lower, upper) = s.class_bounds(t);
                assert!(
                    lower <= folded && folded <= upper,
                    "{name}, {t} threads: {lower} <= {folded} <= {upper}"
                );
                if s.automorphism_count() == 1 && t == 1 {
                    assert_eq!((lower, upper), (folded, folded), "{name}, {t} threads");
                }
            }
        }
    }

    #[test]
    fn sequence_classes_bound_the_folded_count_and_stop_at_their_cap() {
        for (name, most) in [
            ("qemu-quartet-4n2c-ring.xml", 3),
            ("8em64t-2s2ca2c-buggynuma.xml", 3),
            ("256ppc-8n8s4t.xml", 2),
        ] {
            let s = whole(name);
            for t in 1..=most {
                let folded = s.folded(t).len() as u128;
                let seq = s.sequence_classes(t, u128::MAX).unwrap();
                let orders = fold::thread_orders(t);
                assert!(
                    seq.div_ceil(orders) <= folded && folded <= seq,
                    "{name}, {t} threads: {seq}/{orders} <= {folded} <= {seq}"
                );
                if t == 1 {
                    assert_eq!(seq, folded, "{name}: one thread has no exchanges");
                }
                assert_eq!(s.sequence_classes(t, seq), Some(seq));
                assert_eq!(s.sequence_classes(t, seq - 1), None, "{name}, {t} threads");
            }
        }
    }

    #[test]
    fn the_24_node_smt_machine_is_counted_without_enumerating() {
        let s = whole("192em64t-24n8c2t.xml");
        // Its distance table's symmetry, once beyond the listing cap.
        assert_eq!(s.symmetry_order().to_string(), "65536");
        assert_eq!(s.class_bounds(1), (1, 1152));
        assert_eq!(s.folded(1).len(), 34);
        assert_eq!(
            s.folded(1)
                .iter()
                .map(|c| c.class_size as u128)
                .sum::<u128>(),
            s.total_cases(1)
        );
        // 24 groups of 8 cores x 2 PUs: two threads share a group 24 x 3
        // ways (one PU twice, two PUs of a core, two cores) or not, 24 x 23;
        // times (2 accesses x 24 nodes)^2; at most 65536 x 2 of those merge.
        assert_eq!(s.class_bounds(2), (11, 1_437_696));
        assert_eq!(s.folded(2).len(), 5717);
        assert_eq!(s.class_bounds(3).1, 1_921_646_592);
        // Counts of any thread count saturate instead of overflowing.
        assert_eq!(s.class_bounds(1000).1, u128::MAX);
        assert_eq!(s.total_cases(1000), u128::MAX);
    }

    #[test]
    fn a_bounded_walk_stops_at_its_limit() {
        let s = whole("qemu-quartet-4n2c-ring.xml");
        let all = s.folded(2);
        assert_eq!(all.len(), 108);
        assert!(s.folded_at_most(2, 107).is_none());
        assert_eq!(s.folded_at_most(2, 108).unwrap(), all);
    }

    #[test]
    fn a_plan_too_large_is_refused_with_its_estimate_before_it_is_built() {
        // Node symmetry folds the 8-node POWER machine by at most 384 and
        // thread exchange by 5! for five threads; its SMT4 cores and
        // their caches fold inside the nodes: two threads fit, five do not.
        let s = whole("256ppc-8n8s4t.xml");
        assert_eq!(s.symmetry_order().to_string(), "384");
        assert_eq!(s.class_bounds(2), (27, 20480));
        assert_eq!(s.folded(2).len(), 169);
        let e = plan(&s, &request(&s, &[1, 5], false, 100_000)).unwrap_err();
        assert_eq!(e, "sweep plan too large: 5 thread(s) on 256 CPUs x 8 memory nodes x 2 access(es): 1152921504606846976 cases fold into at least 4155529 classes (at most 191486754816) besides the 6 of the thread counts before, more than the 200000 classes a sweep may plan; use fewer --thread-counts, a smaller --cpus or --mem-nodes set, or one --access");
        // A full plan never trusts its limit for memory: the cap holds.
        let s = whole("256ia64-64n2s2c.xml");
        let e = plan(&s, &request(&s, &[2], true, u64::MAX)).unwrap_err();
        assert!(e.contains("1073741824 cases, more than the 1500000"), "{e}");
        let e = s.full(2, u64::MAX).unwrap_err();
        assert!(e.contains("more than the limit of 1500000"), "{e}");
        // The 64-node machine's symmetry (about 9.3 x 10^24 node
        // automorphisms, its sockets and cores inside the nodes) folds two
        // threads into 1791 classes of its 2^30 cases.
        let p = plan(&s, &request(&s, &[1, 2], false, 100_000)).unwrap();
        assert_eq!((p[0].1, p[0].2.len()), (32768, 14));
        assert_eq!((p[1].1, p[1].2.len()), (1 << 30, 1791));
        assert_eq!(
            p[1].2.iter().map(|c| c.class_size).sum::<u64>(),
            1 << 30,
            "class sizes add up to every case"
        );
    }
}
