//! The case space of a sweep and the machine's symmetry over it: which
//! cases exist, which of them are the same experiment, and in what order to
//! run them when the budget cannot pay for all.

use super::symmetry::{GroupOrder, NodeSymmetry, Orbits};
use super::tree::{MachineTree, Path};
use super::SweepRequest;
use crate::machine::Machine;
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};

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
    /// Cases of the full enumeration equivalent to this one (1 with `--full`).
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
/// classes, or cases with `--full`). The shortest case a sweep measures
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
        let exchanges = if threads <= MAX_EXCHANGED_THREADS {
            (1..=threads as u128).product::<u128>()
        } else {
            1
        };
        let merged = self.symmetry.order().saturating().saturating_mul(exchanges);
        let lower = upper.div_ceil(merged.max(1));
        (lower, upper)
    }

    fn node_index(&self, n: u32) -> usize {
        self.nodes.binary_search(&n).expect("involved node")
    }

    /// Numbers the children taken at every level of the local trees by
    /// first use: the form that no local automorphism (exchanging alike
    /// subtrees: cores, caches, PUs) can change.
    fn slots(case: &[Key]) -> Vec<Key> {
        // Cases have a handful of threads: linear scans beat hashing.
        // (node, level, concrete path above, shape, concrete index, slot)
        type Seen = (u32, usize, Path, u16, u16, u16);
        let mut seen: Vec<Seen> = Vec::with_capacity(case.len() * 4);
        let mut out = Vec::with_capacity(case.len());
        for &(n, path, a, mem) in case {
            let mut slot_path = Path::EMPTY;
            let mut above = Path::EMPTY;
            for (level, &(shape, idx)) in path.steps().iter().enumerate() {
                let same = |e: &&Seen| e.0 == n && e.1 == level && e.3 == shape && e.2 == above;
                let slot = match seen.iter().filter(same).find(|e| e.4 == idx) {
                    Some(e) => e.5,
                    None => {
                        let k = seen.iter().filter(same).count() as u16;
                        seen.push((n, level, above, shape, idx, k));
                        k
                    }
                };
                slot_path.push((shape, slot));
                above.push((shape, idx));
            }
            out.push((n, slot_path, a, mem));
        }
        out
    }

    /// The smallest form of a case under node automorphisms alone: slot
    /// paths and accesses do not move with the nodes (an isomorphism of
    /// two nodes' local trees follows the same paths), so the smallest
    /// form is the slot form with the smallest image of its node sequence
    /// (each thread's CPU node, then its memory node).
    fn canonical_nodes(&self, case: &[Key]) -> Vec<Key> {
        let seq: Vec<usize> = case
            .iter()
            .flat_map(|k| [self.node_index(k.0), self.node_index(k.3)])
            .collect();
        let img = self.symmetry.min_image(&seq);
        let mapped: Vec<Key> = case
            .iter()
            .enumerate()
            .map(|(i, &(_, path, a, _))| {
                (self.nodes[img[2 * i]], path, a, self.nodes[img[2 * i + 1]])
            })
            .collect();
        Self::slots(&mapped)
    }

    /// The canonical form of a case: the smallest form over node
    /// automorphisms and, up to [`MAX_EXCHANGED_THREADS`] threads, every
    /// exchange of threads (two threads doing the same kind of work are
    /// one experiment whichever is called first).
    fn canonical(&self, case: &[Key]) -> Vec<Key> {
        self.canonical_in(case, &exchanges(case.len()))
    }

    /// [`SweepSpace::canonical`] with the thread orders to try given
    /// ([`exchanges`]).
    fn canonical_in(&self, case: &[Key], orders: &[Vec<usize>]) -> Vec<Key> {
        let mut best: Option<Vec<Key>> = None;
        for order in orders {
            let exchanged: Vec<Key> = order.iter().map(|&i| case[i]).collect();
            let form = self.canonical_nodes(&Self::slots(&exchanged));
            if best.as_ref().is_none_or(|b| form < *b) {
                best = Some(form);
            }
        }
        best.unwrap_or_default()
    }

    fn key_of(&self, cpu: &SweepCpu, access: Access, mem: u32) -> Key {
        (cpu.node, cpu.path, access, mem)
    }

    fn sweep_cpu(&self, os: u32) -> Option<&SweepCpu> {
        self.cpus
            .binary_search_by_key(&os, |c| c.os)
            .ok()
            .map(|i| &self.cpus[i])
    }

    fn thread_case(&self, cpu: &SweepCpu, access: Access, mem: u32) -> ThreadCase {
        ThreadCase {
            cpu: cpu.os,
            node: cpu.node,
            core: cpu.in_node as u32,
            access,
            mem,
            hops: self.hops.get(&(cpu.node, mem)).copied(),
        }
    }

    fn class_key(key: &[Key]) -> String {
        key.iter()
            .map(|(n, path, a, mem)| format!("{n}:{}:{}:{mem}", path.text(), a.letter()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every case, each standing for itself (`--full`), in enumeration order.
    /// Refuses more than `limit` cases (and more than [`MAX_PLANNED_CASES`],
    /// whatever the limit: memory goes with the real count).
    pub fn full(&self, threads: usize, limit: u64) -> Result<Vec<PlannedCase>, String> {
        let total = self.total_cases(threads);
        let limit = limit.min(MAX_PLANNED_CASES);
        if total > limit as u128 {
            return Err(format!(
                "{total} cases for {threads} thread(s) is more than the limit of {limit}; fold them (drop --full) or narrow --cpus/--mem-nodes"
            ));
        }
        let orders = exchanges(threads);
        let choices: Vec<(SweepCpu, Access, u32)> = self
            .cpus
            .iter()
            .flat_map(|c| {
                self.mem_nodes
                    .iter()
                    .flat_map(move |&mem| self.accesses.iter().map(move |&a| (*c, a, mem)))
            })
            .collect();
        let mut out = Vec::with_capacity(total as usize);
        let mut idx = vec![0usize; threads];
        loop {
            let picks: Vec<&(SweepCpu, Access, u32)> = idx.iter().map(|&i| &choices[i]).collect();
            let keys: Vec<Key> = picks
                .iter()
                .map(|(c, a, m)| self.key_of(c, *a, *m))
                .collect();
            out.push(PlannedCase {
                threads: picks
                    .iter()
                    .map(|(c, a, m)| self.thread_case(c, *a, *m))
                    .collect(),
                class_size: 1,
                class_key: Self::class_key(&self.canonical_in(&keys, &orders)),
            });
            // Odometer, last thread fastest.
            let mut t = threads;
            loop {
                if t == 0 {
                    return Ok(out);
                }
                t -= 1;
                idx[t] += 1;
                if idx[t] < choices.len() {
                    break;
                }
                idx[t] = 0;
            }
        }
    }

    /// One representative per class of equivalent cases, with class sizes
    /// (which sum to [`SweepSpace::total_cases`]).
    ///
    /// Generated thread by thread with the stabilizer of the prefix: the
    /// next thread takes one CPU node per orbit of the node automorphisms
    /// that fix the prefix's nodes, then one memory node per orbit of those
    /// that also fix its CPU node (and "a core not used yet" stands for all
    /// of them). Each class of thread sequences comes out once, its size the
    /// product of the orbit sizes along the way (orbit-stabilizer); classes
    /// that differ only by an exchange of threads are then merged, sizes
    /// added.
    pub fn folded(&self, threads: usize) -> Vec<PlannedCase> {
        self.folded_at_most(threads, usize::MAX).unwrap_or_default()
    }

    /// [`SweepSpace::folded`], or `None` as soon as there are more than
    /// `limit` classes: what is built never exceeds `limit` cases.
    pub fn folded_at_most(&self, threads: usize, limit: usize) -> Option<Vec<PlannedCase>> {
        let out = self.fold_walk(threads, limit);
        if !self.symmetry.gave_up() {
            return out;
        }
        // A search ran out of steps: its orbits may be too fine for the
        // classes built so far. Fold with core swaps and exchanges only.
        self.symmetry.make_trivial();
        self.fold_walk(threads, limit)
    }

    fn fold_walk(&self, threads: usize, limit: usize) -> Option<Vec<PlannedCase>> {
        let mut walk = Walk {
            threads,
            limit,
            out: Vec::new(),
            index: HashMap::new(),
            orders: exchanges(threads),
            sequences: 0,
        };
        let mut prefix: Vec<Key> = Vec::with_capacity(threads);
        self.orderly(&mut walk, &mut prefix, &[], 1)
            .then_some(walk.out)
    }

    /// Every next-thread choice in slot form after `prefix`.
    fn next_choices(&self, prefix: &[Key]) -> Vec<(Key, u64)> {
        let mut out = Vec::new();
        let mut cpu_nodes: Vec<u32> = self.cpus.iter().map(|c| c.node).collect();
        cpu_nodes.sort_unstable();
        cpu_nodes.dedup();
        for n in cpu_nodes {
            let used: Vec<Path> = prefix.iter().filter(|k| k.0 == n).map(|k| k.1).collect();
            for (path, mult) in self.tree.slot_choices(self.node_index(n), &used) {
                for &a in &self.accesses {
                    for &mem in &self.mem_nodes {
                        out.push(((n, path, a, mem), mult));
                    }
                }
            }
        }
        out
    }

    /// Extends `prefix` (whose nodes, as indexes, are `fixed`) in every
    /// canonical way; false once the walk holds more than its limit (it
    /// then stops).
    fn orderly(&self, walk: &mut Walk, prefix: &mut Vec<Key>, fixed: &[usize], size: u64) -> bool {
        if prefix.len() == walk.threads {
            walk.sequences += 1;
            if walk.sequences > walk.limit.saturating_mul(walk.orders.len()) {
                return false;
            }
            let form = self.canonical_in(prefix, &walk.orders);
            if let Some(&i) = walk.index.get(&form) {
                let c: &mut PlannedCase = &mut walk.out[i];
                c.class_size = c.class_size.saturating_add(size);
                return true;
            }
            if walk.out.len() >= walk.limit {
                return false;
            }
            let key = Self::class_key(&form);
            walk.index.insert(form, walk.out.len());
            walk.out.push(PlannedCase {
                threads: prefix
                    .iter()
                    .map(|&(n, path, a, mem)| {
                        let os = self
                            .tree
                            .cpu_at(self.node_index(n), &path)
                            .expect("a slot path leads to a PU");
                        let cpu = self.sweep_cpu(os).expect("sweep CPU");
                        self.thread_case(cpu, a, mem)
                    })
                    .collect(),
                class_size: size,
                class_key: key,
            });
            return true;
        }
        let around_prefix = self.symmetry.orbits(fixed);
        // Choices come grouped by CPU node: its stabilizer is looked up once.
        let mut last: Option<(usize, Vec<usize>, std::rc::Rc<Orbits>)> = None;
        for (x, mult) in self.next_choices(prefix) {
            let node = self.node_index(x.0);
            if around_prefix.rep(node) != node {
                continue;
            }
            if last.as_ref().is_none_or(|l| l.0 != node) {
                let mut with_node = fixed.to_vec();
                insert_sorted(&mut with_node, node);
                let orbits = self.symmetry.orbits(&with_node);
                last = Some((node, with_node, orbits));
            }
            let (_, with_node, around_node) = last.as_ref().expect("set above");
            let mem = self.node_index(x.3);
            if around_node.rep(mem) != mem {
                continue;
            }
            let images = (around_prefix.size(node) * around_node.size(mem)) as u64;
            let mut with_node = with_node.clone();
            insert_sorted(&mut with_node, mem);
            prefix.push(x);
            let within = self.orderly(walk, prefix, &with_node, size.saturating_mul(images * mult));
            prefix.pop();
            if !within {
                return false;
            }
        }
        true
    }
}

impl SweepSpace {
    /// The placements of one thread and `operands` buffers of distinct
    /// roles (a kernel's operands: never exchanged), folded by the machine's
    /// automorphisms that keep the space's CPUs and memory nodes: the thread
    /// on a CPU of the space, each buffer on a memory node. One entry per
    /// class: (CPU, each operand's memory node, class size); the sizes sum
    /// to CPUs x memory nodes ^ operands. The CPU node comes from the
    /// orbits of the node symmetry, the CPU from its node's local tree, and
    /// each memory node from the orbits of the automorphisms fixing the
    /// nodes before it (orbit-stabilizer, as [`SweepSpace::folded`]).
    pub fn operand_classes(&self, operands: usize) -> Vec<(u32, Vec<u32>, u64)> {
        let out = self.operand_walk(operands);
        if !self.symmetry.gave_up() {
            return out;
        }
        self.symmetry.make_trivial();
        self.operand_walk(operands)
    }

    fn operand_walk(&self, operands: usize) -> Vec<(u32, Vec<u32>, u64)> {
        let mut out = Vec::new();
        let mut cpu_nodes: Vec<u32> = self.cpus.iter().map(|c| c.node).collect();
        cpu_nodes.sort_unstable();
        cpu_nodes.dedup();
        let all = self.symmetry.orbits(&[]);
        for n in cpu_nodes {
            let ni = self.node_index(n);
            if all.rep(ni) != ni {
                continue;
            }
            for (path, mult) in self.tree.slot_choices(ni, &[]) {
                let Some(cpu) = self.tree.cpu_at(ni, &path) else {
                    continue;
                };
                let size = all.size(ni) as u64 * mult;
                let mut mems = Vec::with_capacity(operands);
                self.operand_step(operands, &[ni], size, cpu, &mut mems, &mut out);
            }
        }
        out
    }

    fn operand_step(
        &self,
        operands: usize,
        fixed: &[usize],
        size: u64,
        cpu: u32,
        mems: &mut Vec<u32>,
        out: &mut Vec<(u32, Vec<u32>, u64)>,
    ) {
        if mems.len() == operands {
            out.push((cpu, mems.clone(), size));
            return;
        }
        let orbits = self.symmetry.orbits(fixed);
        for &mem in &self.mem_nodes {
            let mi = self.node_index(mem);
            if orbits.rep(mi) != mi {
                continue;
            }
            let mut next = fixed.to_vec();
            insert_sorted(&mut next, mi);
            mems.push(mem);
            let grown = size.saturating_mul(orbits.size(mi) as u64);
            self.operand_step(operands, &next, grown, cpu, mems, out);
            mems.pop();
        }
    }
}

fn insert_sorted(v: &mut Vec<usize>, x: usize) {
    if let Err(i) = v.binary_search(&x) {
        v.insert(i, x);
    }
}

/// The thread orders canonical forms are taken over: every order of `n`
/// threads up to [`MAX_EXCHANGED_THREADS`], else the given order only.
fn exchanges(n: usize) -> Vec<Vec<usize>> {
    if n > MAX_EXCHANGED_THREADS {
        return vec![(0..n).collect()];
    }
    permutations(n)
}

/// Every order of `n` items (n! of them), as index lists.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new()];
    for k in 0..n {
        out = out
            .into_iter()
            .flat_map(|p: Vec<usize>| {
                (0..=k).map(move |i| {
                    let mut q = p.clone();
                    q.insert(i, k);
                    q
                })
            })
            .collect();
    }
    out
}

/// Up to this many threads, cases that differ by an exchange of threads
/// fold into one class (n! orders are tried per class); beyond, threads
/// keep their labels, which is still exact.
pub const MAX_EXCHANGED_THREADS: usize = 6;

/// A bounded walk of [`SweepSpace::orderly`]: the thread count, the most
/// cases it may hold, the cases so far and where each canonical form is.
struct Walk {
    threads: usize,
    limit: usize,
    out: Vec<PlannedCase>,
    index: HashMap<Vec<Key>, usize>,
    /// Thread orders of the canonical form.
    orders: Vec<Vec<usize>>,
    /// Classes of thread sequences reached: more than `limit` times the
    /// orders means more than `limit` classes.
    sequences: usize,
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

/// How a twin differs from its class's representative.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TwinMove {
    /// Other nodes, by a permutation that keeps every distance: what the
    /// distance table claims is the same experiment.
    NodeSymmetry,
    /// Other cores (or PUs, or caches with their cores) of the same
    /// nodes: an exchange of alike subtrees of the machine tree.
    CoreSwap,
}

impl TwinMove {
    pub fn name(self) -> &'static str {
        match self {
            TwinMove::NodeSymmetry => "node symmetry",
            TwinMove::CoreSwap => "core swap",
        }
    }
}

impl SweepSpace {
    /// The class key of any concrete case of this space (None when a CPU
    /// or memory node is not in it): equal keys, same experiment.
    pub fn class_of(&self, threads: &[ThreadCase]) -> Option<String> {
        let keys: Vec<Key> = threads
            .iter()
            .map(|t| {
                let cpu = self.sweep_cpu(t.cpu)?;
                self.mem_nodes
                    .contains(&t.mem)
                    .then(|| self.key_of(cpu, t.access, t.mem))
            })
            .collect::<Option<_>>()?;
        Some(Self::class_key(&self.canonical(&keys)))
    }

    /// Another member of `case`'s class, to test the symmetry the folding
    /// assumed: its image under a node automorphism that moves it when
    /// there is one (each thread at the same path of its image node's local
    /// tree), else the same case with the first thread's subtree (its
    /// core, or the cache holding it, or its PU) exchanged with an alike
    /// one no thread uses; every thread inside moves along. None when the
    /// class has no other member either way.
    pub fn twin(&self, case: &PlannedCase) -> Option<(PlannedCase, TwinMove)> {
        let places: Vec<(usize, Path)> = case
            .threads
            .iter()
            .map(|t| self.tree.place(t.cpu))
            .collect::<Option<_>>()?;
        let seq: Vec<usize> = case
            .threads
            .iter()
            .flat_map(|t| [self.node_index(t.node), self.node_index(t.mem)])
            .collect();
        let build = |cpus: Vec<u32>, nodes: &[usize]| -> Option<PlannedCase> {
            let threads = case
                .threads
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let cpu = self.sweep_cpu(cpus[i])?;
                    Some(self.thread_case(cpu, t.access, self.nodes[nodes[2 * i + 1]]))
                })
                .collect::<Option<Vec<_>>>()?;
            Some(PlannedCase {
                threads,
                class_size: case.class_size,
                class_key: case.class_key.clone(),
            })
        };
        if let Some(img) = self.symmetry.moved_image(&seq) {
            let cpus: Option<Vec<u32>> = places
                .iter()
                .enumerate()
                .map(|(i, (_, path))| self.tree.cpu_at(img[2 * i], path))
                .collect();
            if let Some(t) = cpus.and_then(|cpus| build(cpus, &img)) {
                return Some((t, TwinMove::NodeSymmetry));
            }
        }
        let node = places[0].0;
        let inside: Vec<usize> = (0..places.len()).filter(|&i| places[i].0 == node).collect();
        let paths: Vec<Path> = inside.iter().map(|&i| places[i].1).collect();
        let moved = self.tree.swapped(node, &paths)?;
        let mut cpus: Vec<u32> = case.threads.iter().map(|t| t.cpu).collect();
        for (k, &i) in inside.iter().enumerate() {
            cpus[i] = self.tree.cpu_at(node, &moved[k])?;
        }
        build(cpus, &seq).map(|t| (t, TwinMove::CoreSwap))
    }
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

/// The cases a sweep would run for each thread count, in order, without
/// running them: (threads, total cases, planned cases).
///
/// Refuses, before building anything, a plan of more than
/// [`MAX_PLANNED_CASES`] cases over all thread counts (or, with `--full`,
/// more than `req.full_limit` for one thread count), saying how many it
/// would hold and what to narrow. Folded classes are counted without
/// enumerating ([`SweepSpace::class_bounds`]); only when the bounds straddle
/// the limit are they enumerated, and then never more than the limit.
pub fn plan(
    space: &SweepSpace,
    req: &SweepRequest,
) -> Result<Vec<(usize, u64, Vec<PlannedCase>)>, String> {
    let mut out = Vec::new();
    let mut planned: u64 = 0;
    for &t in &req.threads {
        let left = MAX_PLANNED_CASES - planned;
        let total = space.total_cases(t);
        let cases = if req.full {
            if total > left as u128 && left < req.full_limit {
                return Err(too_many(
                    space,
                    t,
                    &format!("{} cases", count(total)),
                    planned,
                ));
            }
            space.full(t, req.full_limit)?
        } else {
            folded_within(space, t, left, planned)?
        };
        let total = u64::try_from(total).map_err(|_| {
            format!(
                "{t} thread(s): {} cases, more than a sweep can count (2^64); use fewer --threads or a smaller --cpus or --mem-nodes set",
                count(total)
            )
        })?;
        planned += cases.len() as u64;
        out.push((t, total, cases));
    }
    Ok(out)
}

/// The classes of `threads` threads when they fit in `left` more cases.
fn folded_within(
    space: &SweepSpace,
    threads: usize,
    left: u64,
    planned: u64,
) -> Result<Vec<PlannedCase>, String> {
    let (lower, upper) = space.class_bounds(threads);
    let total = count(space.total_cases(threads));
    let left = left.min(MAX_FOLDED_CLASSES.saturating_sub(planned));
    let too_many = |space: &SweepSpace, threads: usize, what: &str, planned: u64| {
        refused(space, threads, what, planned, MAX_FOLDED_CLASSES, "classes")
    };
    if lower > left as u128 {
        let classes = if lower == upper {
            format!("{total} cases fold into {} classes", count(lower))
        } else {
            format!(
                "{total} cases fold into at least {} classes (at most {})",
                count(lower),
                count(upper)
            )
        };
        return Err(too_many(space, threads, &classes, planned));
    }
    space.folded_at_most(threads, left as usize).ok_or_else(|| {
        let classes = format!("{total} cases fold into more than {left} classes");
        too_many(space, threads, &classes, planned)
    })
}

/// The one line refusing a plan too large to build: what it would hold, the
/// limit, and what to narrow.
fn too_many(space: &SweepSpace, threads: usize, what: &str, planned: u64) -> String {
    refused(space, threads, what, planned, MAX_PLANNED_CASES, "cases")
}

/// [`too_many`] against `limit` `unit` (cases, or folded classes).
fn refused(
    space: &SweepSpace,
    threads: usize,
    what: &str,
    planned: u64,
    limit: u64,
    unit: &str,
) -> String {
    let others = if planned > 0 {
        format!(" besides the {planned} of the thread counts before")
    } else {
        String::new()
    };
    format!(
        "sweep plan too large: {threads} thread(s) on {} CPUs x {} memory nodes x {} access(es): {what}{others}, more than the {limit} {unit} a sweep may plan; use fewer --threads, a smaller --cpus or --mem-nodes set, or one --access",
        space.cpus.len(),
        space.mem_nodes.len(),
        space.accesses.len()
    )
}

/// A count for a message; the saturated maximum is said as a bound.
fn count(n: u128) -> String {
    if n == u128::MAX {
        "more than 10^38".into()
    } else {
        n.to_string()
    }
}

/// How many hop classes `cases` cover.
/// What a sweep would run, counted without running it: per thread count,
/// the cases there are, the cases planned (one per symmetry class, or
/// all with `full`) and the hop classes among them (the fewest cases a
/// budget-cut sweep still runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaseCount {
    pub threads: usize,
    pub total: u64,
    pub planned: usize,
    pub hop_classes: usize,
}

/// The [`CaseCount`]s of `req` on `m`.
pub fn case_counts(m: &Machine, req: &SweepRequest) -> Result<Vec<CaseCount>, String> {
    let space = SweepSpace::new(m, &req.cpus, &req.mem_nodes, &req.accesses)?;
    Ok(plan(&space, req)?
        .into_iter()
        .map(|(threads, total, cases)| CaseCount {
            threads,
            total,
            planned: cases.len(),
            hop_classes: hop_class_count(&cases).max(1),
        })
        .collect())
}

pub(super) fn hop_class_count(cases: &[PlannedCase]) -> usize {
    cases
        .iter()
        .map(|c| c.hop_class())
        .collect::<BTreeSet<String>>()
        .len()
}

/// Orders cases so that any prefix covers as many hop classes as possible:
/// round robin over hop classes, largest classes first inside each.
pub fn coverage_order(cases: &[PlannedCase]) -> Vec<usize> {
    let mut by_hop: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, c) in cases.iter().enumerate() {
        by_hop.entry(c.hop_class()).or_default().push(i);
    }
    for v in by_hop.values_mut() {
        v.sort_by_key(|&i| std::cmp::Reverse(cases[i].class_size));
    }
    let mut out = Vec::with_capacity(cases.len());
    let mut round = 0;
    while out.len() < cases.len() {
        for v in by_hop.values() {
            if let Some(&i) = v.get(round) {
                out.push(i);
            }
        }
        round += 1;
    }
    out
}

#[cfg(test)]
mod tests {
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
        assert_eq!(e, "sweep plan too large: 5 thread(s) on 256 CPUs x 8 memory nodes x 2 access(es): 1152921504606846976 cases fold into at least 4155529 classes (at most 191486754816) besides the 6 of the thread counts before, more than the 200000 classes a sweep may plan; use fewer --threads, a smaller --cpus or --mem-nodes set, or one --access");
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
