//! The case space of a sweep and the machine's symmetry over it: which
//! cases exist, which of them are the same experiment, and in what order to
//! run them when the budget cannot pay for all.

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

/// A CPU of the sweep with its place in the machine's symmetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SweepCpu {
    os: u32,
    node: u32,
    /// Interchangeable-core group inside the node (same LLC, same PU count).
    group: u16,
    /// Core index inside the group.
    core: u16,
    /// PU index inside the core.
    pu: u16,
    /// Position of the CPU among the node's sweep CPUs: the `core` of the
    /// classic `node.core.{r|w}.memnode` label.
    in_node: u16,
}

/// A thread of a case in symmetry coordinates: node, group, core, PU,
/// access, memory node. Cores and PUs are concrete indexes or slots.
type Key = (u32, u16, u16, u16, Access, u32);

/// A node's cores grouped by (last-level cache, PUs per core), each core
/// its PU list.
type CoreGroups = BTreeMap<(u32, usize), Vec<Vec<u32>>>;

/// The space a sweep enumerates, and the machine's symmetry over it.
#[derive(Debug, Clone)]
pub struct SweepSpace {
    cpus: Vec<SweepCpu>,
    mem_nodes: Vec<u32>,
    accesses: Vec<Access>,
    /// Every node involved (CPU nodes and memory nodes), sorted.
    nodes: Vec<u32>,
    /// Node automorphisms: `perm[i]` is the image of `nodes[i]`.
    automorphisms: Vec<Vec<u32>>,
    /// (node, group) -> cores, each the sorted CPU list of the core.
    groups: BTreeMap<(u32, u16), Vec<Vec<u32>>>,
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

/// Backtracking over node permutations that keep distances and signatures.
struct AutomorphismSearch<'a> {
    nodes: &'a [u32],
    sig: &'a [String],
    dist: &'a crate::machine::Distances,
    perm: Vec<usize>,
    used: Vec<bool>,
    out: Vec<Vec<u32>>,
}

impl AutomorphismSearch<'_> {
    fn extend(&mut self, i: usize) {
        let n = self.nodes.len();
        if self.out.len() > MAX_AUTOMORPHISMS {
            return;
        }
        if i == n {
            self.out
                .push(self.perm.iter().map(|&j| self.nodes[j]).collect());
            return;
        }
        let nodes = self.nodes;
        let d = |a: usize, b: usize| self.dist.get(nodes[a], nodes[b]);
        for j in 0..n {
            if self.used[j] || self.sig[i] != self.sig[j] {
                continue;
            }
            let ok = (0..i).all(|k| d(k, i) == d(self.perm[k], j) && d(i, k) == d(j, self.perm[k]))
                && d(i, i) == d(j, j);
            if !ok {
                continue;
            }
            self.used[j] = true;
            self.perm.push(j);
            self.extend(i + 1);
            self.perm.pop();
            self.used[j] = false;
        }
    }
}

/// Beyond this many node automorphisms the sweep folds core swaps only.
const MAX_AUTOMORPHISMS: usize = 5000;

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
        let (cpus, groups) = number_cpus(&core_shape(m, cpus)?);
        let nodes: Vec<u32> = cpus
            .iter()
            .map(|c| c.node)
            .chain(mem_nodes.iter())
            .collect::<BTreeSet<u32>>()
            .into_iter()
            .collect();
        let hops = hop_table(m, &nodes);
        let mut space = SweepSpace {
            cpus,
            mem_nodes: mem_nodes.iter().collect(),
            accesses: accesses.to_vec(),
            nodes,
            automorphisms: Vec::new(),
            groups,
            hops,
        };
        // The signatures the search compares need the groups built above.
        space.automorphisms = space.node_automorphisms(m);
        Ok(space)
    }

    /// What must match for node `a` to stand in for node `b`.
    fn node_signature(&self, m: &Machine, n: u32) -> String {
        let node = m.node(n);
        let shapes: Vec<(usize, usize)> = self
            .groups
            .range((n, 0)..=(n, u16::MAX))
            .map(|(_, cores)| (cores.len(), cores[0].len()))
            .collect();
        format!(
            "{:?}|{}|{:?}|{}",
            shapes,
            self.mem_nodes.contains(&n),
            node.map(|x| (x.cpuless, x.kind, x.subtype.clone())),
            node.map_or(0, |x| x.memory_bytes >> 30)
        )
    }

    /// Permutations of the involved nodes that keep distances (and each
    /// node's signature). Without distances only the identity is safe.
    fn node_automorphisms(&self, m: &Machine) -> Vec<Vec<u32>> {
        let n = self.nodes.len();
        let identity = self.nodes.clone();
        let Some(d) = &m.distances else {
            return vec![identity];
        };
        let sig: Vec<String> = self
            .nodes
            .iter()
            .map(|&x| self.node_signature(m, x))
            .collect();
        let mut search = AutomorphismSearch {
            nodes: &self.nodes,
            sig: &sig,
            dist: d,
            perm: Vec::with_capacity(n),
            used: vec![false; n],
            out: Vec::new(),
        };
        search.extend(0);
        let out = search.out;
        // Too many to use (or none): fold core swaps only, which is still exact.
        if out.is_empty() || out.len() > MAX_AUTOMORPHISMS {
            return vec![identity];
        }
        out
    }

    /// Number of node automorphisms found (1 = no node symmetry).
    pub fn automorphism_count(&self) -> usize {
        self.automorphisms.len()
    }

    /// OS indexes of the sweep's CPUs, in order.
    pub(super) fn cpu_ids(&self) -> Vec<u32> {
        self.cpus.iter().map(|c| c.os).collect()
    }

    /// The memory nodes buffers are bound to, in order.
    pub(super) fn mem_nodes(&self) -> &[u32] {
        &self.mem_nodes
    }

    /// Cases of the full enumeration for `threads` threads.
    pub fn total_cases(&self, threads: usize) -> u128 {
        let per = (self.cpus.len() * self.mem_nodes.len() * self.accesses.len()) as u128;
        per.pow(threads as u32)
    }

    fn map_node(&self, perm: &[u32], n: u32) -> u32 {
        match self.nodes.binary_search(&n) {
            Ok(i) => perm[i],
            Err(_) => n,
        }
    }

    /// Relabels a case by a node permutation, then numbers cores and PUs by
    /// first use: the form that core and PU swaps cannot change.
    fn relabel(&self, case: &[Key], perm: &[u32]) -> Vec<Key> {
        // Cases have a handful of threads: linear scans beat hashing.
        let mut cores: Vec<((u32, u16, u16), u16)> = Vec::with_capacity(case.len());
        let mut pus: Vec<((u32, u16, u16, u16), u16)> = Vec::with_capacity(case.len());
        let mut out = Vec::with_capacity(case.len());
        for &(n, g, c, p, a, mem) in case {
            let n2 = self.map_node(perm, n);
            let cs = match cores.iter().find(|x| x.0 == (n2, g, c)) {
                Some(x) => x.1,
                None => {
                    let k = cores.iter().filter(|x| x.0 .0 == n2 && x.0 .1 == g).count() as u16;
                    cores.push(((n2, g, c), k));
                    k
                }
            };
            let ps = match pus.iter().find(|x| x.0 == (n2, g, cs, p)) {
                Some(x) => x.1,
                None => {
                    let k = pus
                        .iter()
                        .filter(|x| x.0 .0 == n2 && x.0 .1 == g && x.0 .2 == cs)
                        .count() as u16;
                    pus.push(((n2, g, cs, p), k));
                    k
                }
            };
            out.push((n2, g, cs, ps, a, self.map_node(perm, mem)));
        }
        out
    }

    /// The canonical form of a case: the smallest relabeling over all node
    /// automorphisms.
    fn canonical(&self, case: &[Key]) -> Vec<Key> {
        self.automorphisms
            .iter()
            .map(|p| self.relabel(case, p))
            .min()
            .unwrap_or_default()
    }

    fn key_of(&self, cpu: &SweepCpu, access: Access, mem: u32) -> Key {
        (cpu.node, cpu.group, cpu.core, cpu.pu, access, mem)
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
            .map(|(n, g, c, p, a, mem)| format!("{n}:{g}:{c}:{p}:{}:{mem}", a.letter()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every case, each standing for itself (`--full`), in enumeration order.
    /// Refuses more than `limit` cases.
    pub fn full(&self, threads: usize, limit: u64) -> Result<Vec<PlannedCase>, String> {
        let total = self.total_cases(threads);
        if total > limit as u128 {
            return Err(format!(
                "{total} cases for {threads} thread(s) is more than the limit of {limit}; fold them (drop --full) or narrow --cpus/--mem-nodes"
            ));
        }
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
                class_key: Self::class_key(&self.canonical(&keys)),
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
    /// next thread takes one choice per orbit of the node automorphisms that
    /// fix the prefix (and "a core not used yet" stands for all of them), so
    /// each class comes out once and its size is the product of the orbit
    /// sizes along the way (orbit-stabilizer).
    pub fn folded(&self, threads: usize) -> Vec<PlannedCase> {
        let mut out = Vec::new();
        let all: Vec<usize> = (0..self.automorphisms.len()).collect();
        let mut prefix: Vec<Key> = Vec::with_capacity(threads);
        self.orderly(threads, &mut prefix, &all, 1, &mut out);
        out
    }

    /// Every next-thread choice in slot form after `prefix`.
    fn next_choices(&self, prefix: &[Key]) -> Vec<(Key, u64)> {
        let mut out = Vec::new();
        for (&(n, g), cores) in &self.groups {
            let used_cores = prefix
                .iter()
                .filter(|k| k.0 == n && k.1 == g)
                .map(|k| k.2 + 1)
                .max()
                .unwrap_or(0);
            for c in 0..(used_cores + 1).min(cores.len() as u16) {
                // A new core stands for every core of the group not used yet.
                let core_mult = if c == used_cores {
                    cores.len() as u64 - used_cores as u64
                } else {
                    1
                };
                let used_pus = prefix
                    .iter()
                    .filter(|k| k.0 == n && k.1 == g && k.2 == c)
                    .map(|k| k.3 + 1)
                    .max()
                    .unwrap_or(0);
                for p in 0..(used_pus + 1).min(cores[0].len() as u16) {
                    let pu_mult = if p == used_pus {
                        cores[0].len() as u64 - used_pus as u64
                    } else {
                        1
                    };
                    for &a in &self.accesses {
                        for &mem in &self.mem_nodes {
                            out.push(((n, g, c, p, a, mem), core_mult * pu_mult));
                        }
                    }
                }
            }
        }
        out
    }

    fn orderly(
        &self,
        threads: usize,
        prefix: &mut Vec<Key>,
        stabilizer: &[usize],
        size: u64,
        out: &mut Vec<PlannedCase>,
    ) {
        if prefix.len() == threads {
            out.push(PlannedCase {
                threads: prefix
                    .iter()
                    .map(|&(n, g, c, p, a, mem)| {
                        let os = self.groups[&(n, g)][c as usize][p as usize];
                        let cpu = self.cpus.iter().find(|x| x.os == os).expect("sweep CPU");
                        self.thread_case(cpu, a, mem)
                    })
                    .collect(),
                class_size: size,
                class_key: Self::class_key(&self.canonical(prefix)),
            });
            return;
        }
        for (x, mult) in self.next_choices(prefix) {
            prefix.push(x);
            // The images of x under the prefix's stabilizer (the prefix itself
            // is fixed by each of them, so only the last entry moves).
            let mut images: Vec<Key> = Vec::with_capacity(stabilizer.len());
            let mut keep = true;
            for &i in stabilizer {
                let img = *self
                    .relabel(prefix, &self.automorphisms[i])
                    .last()
                    .expect("thread");
                if img < x {
                    keep = false;
                    break;
                }
                images.push(img);
            }
            if keep {
                images.sort();
                images.dedup();
                let next: Vec<usize> = stabilizer
                    .iter()
                    .copied()
                    .filter(|&i| self.relabel(prefix, &self.automorphisms[i]) == *prefix)
                    .collect();
                self.orderly(
                    threads,
                    prefix,
                    &next,
                    size.saturating_mul(images.len() as u64 * mult),
                    out,
                );
            }
            prefix.pop();
        }
    }
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

/// The sweep CPUs by node, then by (last-level cache, PUs per core): only
/// cores alike in both can stand in for each other.
fn core_shape(m: &Machine, cpus: &IdSet) -> Result<BTreeMap<u32, CoreGroups>, String> {
    let llc_level = m.caches.iter().map(|c| c.level).max();
    let llc_of = |cpu: u32| -> u32 {
        m.caches
            .iter()
            .filter(|c| Some(c.level) == llc_level && c.cpus.contains(cpu))
            .map(|c| c.logical_index)
            .next()
            .unwrap_or(u32::MAX)
    };
    let mut shape: BTreeMap<u32, CoreGroups> = BTreeMap::new();
    let mut seen = IdSet::new();
    for core in &m.cores {
        let pus: Vec<u32> = core.cpus.intersection(cpus).iter().collect();
        if pus.is_empty() {
            continue;
        }
        let node = m
            .node_of_cpu(pus[0])
            .ok_or_else(|| format!("CPU {} belongs to no NUMA node", pus[0]))?;
        for &p in &pus {
            seen.insert(p);
        }
        shape
            .entry(node)
            .or_default()
            .entry((llc_of(pus[0]), pus.len()))
            .or_default()
            .push(pus);
    }
    // CPUs hwloc put in no core (should not happen) count as one-PU cores.
    for c in cpus.difference(&seen).iter() {
        let node = m
            .node_of_cpu(c)
            .ok_or_else(|| format!("CPU {c} does not exist or belongs to no NUMA node"))?;
        shape
            .entry(node)
            .or_default()
            .entry((llc_of(c), 1))
            .or_default()
            .push(vec![c]);
    }
    Ok(shape)
}

/// Every sweep CPU with its symmetry coordinates (sorted by OS index), and
/// each (node, group)'s cores.
type NumberedCpus = (Vec<SweepCpu>, BTreeMap<(u32, u16), Vec<Vec<u32>>>);

/// Numbers groups, cores and PUs inside each node, and each CPU's position
/// among its node's CPUs (the label's core).
fn number_cpus(shape: &BTreeMap<u32, CoreGroups>) -> NumberedCpus {
    let mut cpus = Vec::new();
    let mut groups = BTreeMap::new();
    for (&node, gs) in shape {
        // Groups ordered by shape so that node automorphisms can map
        // group i to group i.
        let mut gv: Vec<Vec<Vec<u32>>> = gs.values().cloned().collect();
        for g in gv.iter_mut() {
            g.sort();
        }
        gv.sort_by_key(|g| (g.len(), g[0].len(), g[0][0]));
        for (gi, cores) in gv.into_iter().enumerate() {
            for (ci, pus) in cores.iter().enumerate() {
                for (pi, &os) in pus.iter().enumerate() {
                    cpus.push(SweepCpu {
                        os,
                        node,
                        group: gi as u16,
                        core: ci as u16,
                        pu: pi as u16,
                        in_node: 0,
                    });
                }
            }
            groups.insert((node, gi as u16), cores);
        }
    }
    cpus.sort_by_key(|c| c.os);
    let mut count: HashMap<u32, u16> = HashMap::new();
    for c in cpus.iter_mut() {
        let k = count.entry(c.node).or_default();
        c.in_node = *k;
        *k += 1;
    }
    (cpus, groups)
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
pub fn plan(
    space: &SweepSpace,
    req: &SweepRequest,
) -> Result<Vec<(usize, u64, Vec<PlannedCase>)>, String> {
    let mut out = Vec::new();
    for &t in &req.threads {
        let total = space.total_cases(t);
        let total = u64::try_from(total).map_err(|_| format!("{total} cases: too many"))?;
        let cases = if req.full {
            space.full(t, req.full_limit)?
        } else {
            space.folded(t)
        };
        out.push((t, total, cases));
    }
    Ok(out)
}

/// How many hop classes `cases` cover.
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
