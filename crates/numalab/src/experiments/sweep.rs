//! `numalab sweep`: the placement truth table of the classic ccNUMA studies.
//!
//! N foreground threads each stream their own private buffer, read-only or
//! write-only. A *case* puts every thread on a CPU, every buffer on a memory
//! node and gives every thread an access (read or write); the sweep runs
//! every case: `(CPUs x memory nodes x accesses)^N`, 4096 for two threads on
//! a 4-node machine with 2 cores per node.
//!
//! Many cases are the same experiment seen through the machine's symmetry:
//! renaming the nodes by a permutation that keeps every distance (and each
//! node's CPU structure, memory kind and role) and swapping interchangeable
//! cores (same node, same last-level cache) or SMT siblings gives a case the
//! hardware cannot tell apart. The sweep folds such cases into *classes*,
//! runs one representative per class and reports the class size; `--full`
//! runs them all. Folding never enumerates the full space: representatives
//! are generated with cores numbered by first use ("slots") and kept when no
//! node automorphism gives a smaller form, and a class's size is the number
//! of its distinct node images times the number of ways to pick concrete
//! cores and PUs for the slots.
//!
//! Cancellation ([`crate::measure::cancel`]) ends the sweep after the case in
//! progress: `runs` then holds the cases run so far (a run for every thread
//! count and background reached).

use crate::machine::Machine;
use crate::measure::cancel;
use crate::measure::harness::BufferCheck;
use crate::measure::kernels::{run_pass, BandwidthKernel, ByteCount, Isa};
use crate::measure::pacing::{PacedLoad, PacedReport, PacedSpec, TrafficMix};
use crate::measure::stats::{measure, median, StopRule, Summary};
use crate::placement::{
    pin_current_thread, sys, BufferSpec, MemoryPolicy, PlacedBuffer, PlacementError, Thp,
};
use crate::serde_util::{f64_or_nan, int_keyed_map, vec_f64_or_nan};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

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

/// Per thread of a case: median seconds per pass and the CPUs it was seen on.
type ThreadTimes = Vec<(f64, Vec<u32>)>;

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
        let llc_level = m.caches.iter().map(|c| c.level).max();
        let llc_of = |cpu: u32| -> u32 {
            m.caches
                .iter()
                .filter(|c| Some(c.level) == llc_level && c.cpus.contains(cpu))
                .map(|c| c.logical_index)
                .next()
                .unwrap_or(u32::MAX)
        };
        // node -> (llc, pus in core) -> core -> pus
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
        let mut out_cpus = Vec::new();
        let mut groups = BTreeMap::new();
        for (&node, gs) in &shape {
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
                        out_cpus.push(SweepCpu {
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
        out_cpus.sort_by_key(|c| c.os);
        let mut count: HashMap<u32, u16> = HashMap::new();
        for c in out_cpus.iter_mut() {
            let k = count.entry(c.node).or_default();
            c.in_node = *k;
            *k += 1;
        }
        let node_set: BTreeSet<u32> = out_cpus
            .iter()
            .map(|c| c.node)
            .chain(mem_nodes.iter())
            .collect();
        let nodes: Vec<u32> = node_set.into_iter().collect();
        let mut hops = HashMap::new();
        for &a in &nodes {
            for &b in &nodes {
                if let Some(h) = m.hops_between(a, b) {
                    hops.insert((a, b), h);
                }
            }
        }
        let mut space = SweepSpace {
            cpus: out_cpus,
            mem_nodes: mem_nodes.iter().collect(),
            accesses: accesses.to_vec(),
            nodes,
            automorphisms: Vec::new(),
            groups,
            hops,
        };
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

fn nodes_with_memory(m: &Machine) -> IdSet {
    let mut s = IdSet::new();
    for n in &m.nodes {
        if n.memory_bytes > 0 {
            s.insert(n.os_index);
        }
    }
    s
}

/// Background load of a sweep run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Background {
    /// The level as asked (`low`, `2`, ...).
    pub level: String,
    /// Per background thread, bytes/s (program bytes).
    #[serde(deserialize_with = "f64_or_nan")]
    pub bytes_per_second: f64,
    /// How many of the free CPUs carry a background thread.
    pub subscription: Subscription,
    /// Fixed background CPUs instead of a subscription of the free ones.
    pub cpus: Option<IdSet>,
}

/// Share of the CPUs a case leaves free that carry background threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subscription {
    /// About a quarter of the free CPUs (at least one).
    Under,
    /// About three quarters.
    High,
    /// All of them.
    Full,
}

impl Subscription {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "under" => Ok(Subscription::Under),
            "high" => Ok(Subscription::High),
            "full" => Ok(Subscription::Full),
            o => Err(format!(
                "unknown subscription '{o}'; valid: under (a quarter of the free CPUs), high (three quarters), full (all)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Subscription::Under => "under",
            Subscription::High => "high",
            Subscription::Full => "full",
        }
    }

    /// Background threads out of `free` CPUs.
    pub fn threads(self, free: usize) -> usize {
        if free == 0 {
            return 0;
        }
        match self {
            Subscription::Under => free.div_ceil(4),
            Subscription::High => (3 * free).div_ceil(4),
            Subscription::Full => free,
        }
    }
}

/// What to sweep and how.
#[derive(Debug, Clone)]
pub struct SweepRequest {
    /// Thread counts, each a sweep of its own (normalized on its own).
    pub threads: Vec<usize>,
    pub cpus: IdSet,
    pub mem_nodes: IdSet,
    pub accesses: Vec<Access>,
    pub read_kernel: BandwidthKernel,
    pub write_kernel: BandwidthKernel,
    pub isa: Isa,
    /// Bytes per buffer (each thread has one per memory node).
    pub buffer_bytes: usize,
    pub thp: Option<Thp>,
    /// Run every case instead of one per class.
    pub full: bool,
    /// Whole-sweep time budget: run a subset covering every hop class.
    pub budget: Option<Duration>,
    /// Per case (its time budget is set by the sweep when `budget` is given).
    pub rule: StopRule,
    /// Background settings to run the sweep under (`None` = idle), in order.
    pub backgrounds: Vec<Option<Background>>,
    /// Bytes per background buffer.
    pub background_bytes: usize,
    /// Refuse `--full` beyond this many cases.
    pub full_limit: u64,
    /// Shortest sample in seconds (passes are repeated up to it, after a
    /// calibration sample); 0 = one pass per sample, no calibration.
    pub min_sample_s: f64,
}

/// Seconds per pass of a case (its slowest thread), over the samples.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct CaseTime {
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    /// Fastest sample.
    #[serde(deserialize_with = "f64_or_nan")]
    pub best: f64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
    /// Interquartile range over the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub spread: f64,
    /// Half-width of the median's 95% confidence interval over the median.
    #[serde(deserialize_with = "f64_or_nan")]
    pub rel_ci: f64,
    pub samples: usize,
}

impl CaseTime {
    fn of(s: &Summary) -> Self {
        CaseTime {
            median: s.median,
            best: s.min,
            max: s.max,
            spread: s.spread,
            rel_ci: s.rel_ci,
            samples: s.n,
        }
    }
}

/// One foreground thread's outcome in a case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ThreadResult {
    #[serde(flatten)]
    pub case: ThreadCase,
    pub label: String,
    /// Seconds per pass over its buffer (median over samples).
    #[serde(deserialize_with = "f64_or_nan")]
    pub seconds: f64,
    /// Program bytes per second / 1e9 (median): for the line kernels one
    /// word per 64-byte line.
    #[serde(deserialize_with = "f64_or_nan")]
    pub gbps: f64,
    /// Bytes memory moves per second / 1e9: whole lines, write-allocate
    /// included for ordinary stores.
    #[serde(deserialize_with = "f64_or_nan")]
    pub memory_gbps: f64,
    /// CPUs the thread was seen on.
    pub seen_cpus: Vec<u32>,
    pub verified: bool,
}

/// One case's outcome.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub labels: Vec<String>,
    pub hop_class: String,
    /// Threads sharing hardware: `cpu` (time-shared), `core` (SMT), `none`.
    pub sharing: String,
    pub class_size: u64,
    pub class_key: String,
    /// Seconds per pass of the slowest thread: the case's time.
    pub seconds: CaseTime,
    /// `seconds.median` over the fastest case of the same thread count.
    #[serde(deserialize_with = "f64_or_nan")]
    pub normalized: f64,
    pub threads: Vec<ThreadResult>,
    /// Background achieved, bytes/s per background thread, while this case ran.
    #[serde(deserialize_with = "vec_f64_or_nan")]
    pub background_achieved: Vec<f64>,
    pub background_cpus: Vec<u32>,
    /// Threads on their CPUs, buffers on their nodes (and background verified).
    pub verified: bool,
    pub problems: Vec<String>,
}

/// The cases of one thread count under one background setting.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepRun {
    pub threads: usize,
    pub background: Option<Background>,
    /// Cases of the full enumeration.
    pub total_cases: u64,
    /// Classes of equivalent cases (= total with `--full`).
    pub classes: u64,
    /// Cases run (fewer than `classes` under `--budget`).
    pub cases_run: u64,
    /// Hop classes present in the space and how many of them were run.
    pub hop_classes: u64,
    pub hop_classes_run: u64,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
    pub cases: Vec<CaseResult>,
}

/// A finished sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepResult {
    pub folded: bool,
    pub node_automorphisms: u64,
    pub cpus: Vec<u32>,
    pub mem_nodes: Vec<u32>,
    pub accesses: Vec<Access>,
    pub read_kernel: String,
    pub write_kernel: String,
    pub buffer_bytes: u64,
    pub budget_s: Option<f64>,
    pub runs: Vec<SweepRun>,
    /// Each (thread index, memory node) buffer: where its pages were when
    /// allocated and when the sweep ended.
    pub buffers: Vec<SweepBuffer>,
    pub verified: bool,
    pub warnings: Vec<String>,
    #[serde(deserialize_with = "f64_or_nan")]
    pub elapsed_s: f64,
}

/// A foreground buffer of the sweep.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepBuffer {
    pub thread: usize,
    pub node: u32,
    pub at_start: BufferCheckLite,
    pub at_end: BufferCheckLite,
}

/// The part of a [`BufferCheck`] a sweep keeps (and can read back).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct BufferCheckLite {
    #[serde(deserialize_with = "int_keyed_map")]
    pub pages_by_node: BTreeMap<u32, u64>,
    pub untouched_pages: u64,
    pub verified: bool,
    pub problems: Vec<String>,
}

impl From<&BufferCheck> for BufferCheckLite {
    fn from(c: &BufferCheck) -> Self {
        BufferCheckLite {
            pages_by_node: c.pages_by_node.clone(),
            untouched_pages: c.untouched_pages,
            verified: c.verified,
            problems: c.problems.clone(),
        }
    }
}

/// Progress of a sweep: (done, total, what).
pub type SweepProgress<'a> = &'a mut dyn FnMut(u64, u64, &str);

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

/// Buffers of one thread index, one per memory node.
struct ThreadBuffers {
    by_node: BTreeMap<u32, PlacedBuffer>,
}

fn as_f64(buf: &mut PlacedBuffer) -> &mut [f64] {
    // SAFETY: page-aligned, initialized memory owned by `buf`; any bit pattern is a valid f64.
    let (pre, mid, _) = unsafe { buf.as_mut_slice().align_to_mut::<f64>() };
    debug_assert!(pre.is_empty());
    mid
}

fn check(m: &Machine, node: u32, buf: &PlacedBuffer) -> Result<BufferCheckLite, PlacementError> {
    let h = buf.histogram()?;
    let mut problems = Vec::new();
    if h.untouched_pages > 0 {
        problems.push(format!("{} pages never touched", h.untouched_pages));
    }
    let out = h.pages_outside(&IdSet::single(node));
    if out > 0 {
        problems.push(format!(
            "{out} of {} pages not on node {node}",
            h.pages_total
        ));
    }
    let _ = m;
    Ok(BufferCheckLite {
        pages_by_node: h.pages_by_node.clone(),
        untouched_pages: h.untouched_pages,
        verified: problems.is_empty(),
        problems,
    })
}

/// A CPU to touch buffers bound to `node` from: one of the node's sweep CPUs
/// when it has some (first touch is strict under bind anyway).
fn toucher_for(m: &Machine, node: u32, cpus: &IdSet) -> u32 {
    m.node(node)
        .and_then(|n| n.cpus.intersection(cpus).first())
        .or_else(|| cpus.first())
        .unwrap_or(0)
}

/// Times one case: its threads pinned, started together, each timing its
/// passes; the sample is the slowest thread's seconds per pass.
fn run_case(
    req: &SweepRequest,
    case: &PlannedCase,
    bufs: &mut [ThreadBuffers],
    rule: &StopRule,
) -> Result<(CaseTime, ThreadTimes), PlacementError> {
    let n = case.threads.len();
    let start = Barrier::new(n + 1);
    let done = Barrier::new(n + 1);
    let stop = AtomicBool::new(false);
    let passes = AtomicUsize::new(1);
    let times: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    let failed: std::sync::Mutex<Option<PlacementError>> = std::sync::Mutex::new(None);
    let mut slots: Vec<Option<&mut PlacedBuffer>> = Vec::with_capacity(n);
    for (i, b) in bufs.iter_mut().enumerate().take(n) {
        slots.push(b.by_node.get_mut(&case.threads[i].mem));
    }
    let mut per_thread: Vec<Vec<f64>> = vec![Vec::new(); n];
    let mut seen: Vec<Vec<u32>> = vec![Vec::new(); n];
    let seen_m = std::sync::Mutex::new(vec![Vec::<u32>::new(); n]);
    let meas = std::thread::scope(|s| {
        for (i, slot) in slots.into_iter().enumerate() {
            let t = case.threads[i];
            let (start, done, stop, passes, times, failed, seen_m) =
                (&start, &done, &stop, &passes, &times, &failed, &seen_m);
            s.spawn(move || {
                let kernel = kernel_of(req, t.access);
                let ok = match (pin_current_thread(t.cpu), slot) {
                    (Ok(()), Some(b)) => Some(b),
                    (Err(e), _) => {
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                        None
                    }
                    (_, None) => {
                        *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(
                            PlacementError::Invalid(format!("no buffer on node {}", t.mem)),
                        );
                        None
                    }
                };
                let mut slice = ok.map(as_f64);
                loop {
                    start.wait();
                    if stop.load(Ordering::Acquire) {
                        break;
                    }
                    let k = passes.load(Ordering::Acquire);
                    let t0 = Instant::now();
                    if let Some(sl) = slice.as_deref_mut() {
                        let mut sink = 0.0;
                        for _ in 0..k {
                            sink += run_pass(kernel, req.isa, &mut [&mut *sl], 1.0);
                        }
                        std::hint::black_box(sink);
                    }
                    times[i].store(
                        (t0.elapsed().as_secs_f64() / k as f64).to_bits(),
                        Ordering::Release,
                    );
                    if let Some(c) = sys::current_cpu() {
                        let mut g = seen_m.lock().unwrap_or_else(|p| p.into_inner());
                        if !g[i].contains(&c) {
                            g[i].push(c);
                        }
                    }
                    done.wait();
                }
            });
        }
        let mut sample = |record: bool| -> f64 {
            start.wait();
            done.wait();
            let ts: Vec<f64> = times
                .iter()
                .map(|t| f64::from_bits(t.load(Ordering::Acquire)))
                .collect();
            if record {
                for (w, t) in ts.iter().enumerate() {
                    per_thread[w].push(*t);
                }
            }
            ts.iter().cloned().fold(0.0, f64::max)
        };
        // Calibrate: samples long enough that barrier skew does not count.
        if req.min_sample_s > 0.0 {
            let one = sample(false).max(1e-7);
            let k = (req.min_sample_s / one).ceil().clamp(1.0, 1e6) as usize;
            passes.store(k, Ordering::Release);
        }
        let meas = if failed.lock().unwrap_or_else(|p| p.into_inner()).is_some() {
            None
        } else {
            Some(measure(rule, || sample(true)))
        };
        stop.store(true, Ordering::Release);
        start.wait();
        meas
    });
    if let Some(e) = failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let meas = meas.ok_or_else(|| PlacementError::Os("case did not run".into()))?;
    for (w, v) in per_thread.iter_mut().enumerate() {
        v.drain(..meas.warmup_samples.len().min(v.len()));
        seen[w] = seen_m.lock().unwrap_or_else(|p| p.into_inner())[w].clone();
    }
    let fig = CaseTime::of(&meas.summary);
    let threads = per_thread
        .into_iter()
        .zip(seen)
        .map(|(mut v, s)| {
            v.sort_by(f64::total_cmp);
            (v.get(v.len() / 2).copied().unwrap_or(f64::NAN), s)
        })
        .collect();
    Ok((fig, threads))
}

/// Background CPUs for a case: fixed ones, or a subscription of the CPUs the
/// case leaves free, spread over nodes (one per node in turn).
fn background_cpus(m: &Machine, bg: &Background, case: &PlannedCase, allowed: &IdSet) -> Vec<u32> {
    let busy: IdSet = {
        let mut s = IdSet::new();
        for t in &case.threads {
            s.insert(t.cpu);
        }
        s
    };
    if let Some(c) = &bg.cpus {
        return c.difference(&busy).iter().collect();
    }
    let free = allowed.difference(&busy);
    let order = crate::placement::thread_policy::scatter_order(m, &free);
    let k = bg.subscription.threads(order.len());
    order.into_iter().take(k).collect()
}

/// Runs a sweep. `progress` gets (done, total, label) after every case.
pub fn run_sweep(
    m: &Machine,
    req: &SweepRequest,
    progress: SweepProgress,
) -> Result<SweepResult, PlacementError> {
    let t_start = Instant::now();
    req.isa
        .check_available()
        .map_err(PlacementError::Unsupported)?;
    let space = SweepSpace::new(m, &req.cpus, &req.mem_nodes, &req.accesses)
        .map_err(PlacementError::Invalid)?;
    let plans = plan(&space, req).map_err(PlacementError::Invalid)?;
    let max_threads = req.threads.iter().copied().max().unwrap_or(1);
    let elems = req.buffer_bytes / 8;
    if elems < 64 {
        return Err(PlacementError::Invalid(
            "sweep buffers must be at least 512 bytes".into(),
        ));
    }
    let total_bytes = (req.buffer_bytes as u64) * (max_threads * space.mem_nodes.len()) as u64;
    if total_bytes > crate::placement::usable_free_bytes(m) {
        return Err(PlacementError::Capacity(format!(
            "{max_threads} thread(s) x {} memory node(s) x {} = {} of buffers do not fit in the {} free; use a smaller --size",
            space.mem_nodes.len(),
            crate::placement::format_bytes(req.buffer_bytes as u64),
            crate::placement::format_bytes(total_bytes),
            crate::placement::format_bytes(crate::placement::usable_free_bytes(m))
        )));
    }
    // One buffer per (thread index, memory node), placed and checked once:
    // a case only picks which buffers its threads stream.
    let mut bufs: Vec<ThreadBuffers> = Vec::new();
    let mut buffers = Vec::new();
    for t in 0..max_threads {
        // Thread by thread, so that `bufs` and `buffers` stay in step.
        if cancel::requested() {
            break;
        }
        let mut by_node = BTreeMap::new();
        for &node in &space.mem_nodes {
            let spec = BufferSpec {
                size: req.buffer_bytes,
                policy: MemoryPolicy::Bind {
                    nodes: IdSet::single(node),
                },
                thp: req.thp,
                hugetlb: false,
                toucher: Some(toucher_for(m, node, &req.cpus)),
                weighted: Default::default(),
            };
            let mut b = PlacedBuffer::new(m, &spec)?;
            as_f64(&mut b).fill(1.0);
            let c = check(m, node, &b)?;
            buffers.push(SweepBuffer {
                thread: t,
                node,
                at_start: c.clone(),
                at_end: c,
            });
            by_node.insert(node, b);
        }
        bufs.push(ThreadBuffers { by_node });
    }
    // Cancelled during the set-up: no case may run without its buffers.
    let setup_cut = bufs.len() < max_threads;
    let setup_s = t_start.elapsed().as_secs_f64();

    // How many cases fit the budget, and how long each may take.
    let total_planned: usize =
        plans.iter().map(|p| p.2.len()).sum::<usize>() * req.backgrounds.len();
    let mut rule = req.rule.clone();
    let mut take: Vec<usize> = plans.iter().map(|p| p.2.len()).collect();
    let mut warnings = Vec::new();
    if let Some(b) = req.budget {
        let avail = (b.as_secs_f64() - setup_s).max(0.0);
        // A case costs its budget plus about one calibration and a warm-up
        // sample, and background start-up when there is one.
        let per_case_overhead = 0.06
            + if req.backgrounds.iter().any(|x| x.is_some()) {
                0.1
            } else {
                0.0
            };
        let min_case = 0.1;
        let share = avail / total_planned.max(1) as f64;
        if share >= min_case + per_case_overhead {
            rule.budget = Duration::from_secs_f64(
                (share - per_case_overhead).min(req.rule.budget.as_secs_f64()),
            );
        } else {
            rule.budget = Duration::from_secs_f64(min_case);
            let affordable = (avail / (min_case + per_case_overhead)).floor() as usize;
            // Share what fits over thread counts and backgrounds in
            // proportion to their case counts.
            // Every run covers its hop classes (its cases are ordered so
            // that the first ones do); the rest is shared in proportion.
            let frac = affordable as f64 / total_planned as f64;
            for (t, p) in take.iter_mut().zip(&plans) {
                let classes: BTreeSet<String> = p.2.iter().map(|c| c.hop_class()).collect();
                *t = ((p.2.len() as f64 * frac).floor() as usize)
                    .max(classes.len())
                    .max(1)
                    .min(p.2.len());
            }
            warnings.push(format!(
                "--budget {:.0}s: running {} of {} cases, chosen to cover every hop class first",
                b.as_secs_f64(),
                take.iter().sum::<usize>() * req.backgrounds.len(),
                total_planned
            ));
        }
    }
    let total_to_run: u64 = (take.iter().sum::<usize>() * req.backgrounds.len()) as u64;
    let mut done = 0u64;
    let mut runs = Vec::new();
    let mut all_verified = buffers.iter().all(|b| b.at_start.verified);
    let deadline = req.budget.map(|b| t_start + b);
    let mut case_seconds_sum = 0.0;
    let mut cases_timed = 0usize;
    'runs: for bg in &req.backgrounds {
        for ((threads, total, cases), &k) in plans.iter().zip(&take) {
            if setup_cut || cancel::requested() {
                break 'runs;
            }
            let t_run = Instant::now();
            let order = coverage_order(cases);
            let hop_classes: BTreeSet<String> = cases.iter().map(|c| c.hop_class()).collect();
            let mut results: Vec<CaseResult> = Vec::new();
            for &i in order.iter().take(k) {
                if cancel::requested() {
                    break;
                }
                if let Some(d) = deadline {
                    // Stop when the next case, as long as the cases so far
                    // took on average, would not end in time.
                    let left = d.saturating_duration_since(Instant::now()).as_secs_f64();
                    let expect = if cases_timed > 0 {
                        case_seconds_sum / cases_timed as f64
                    } else {
                        rule.budget.as_secs_f64()
                    };
                    if left < expect && !results.is_empty() {
                        warnings.push(format!(
                            "budget spent: {} of {} planned cases of {threads} thread(s) ran",
                            results.len(),
                            k
                        ));
                        break;
                    }
                }
                let case = &cases[i];
                let t_case = Instant::now();
                let (load, bg_cpus) = match bg {
                    Some(bg) => {
                        let cpus = background_cpus(m, bg, case, &m.allowed_cpus);
                        if cpus.is_empty() {
                            (None, cpus)
                        } else {
                            let spec = PacedSpec {
                                cpus: cpus.clone(),
                                bytes_per_second: Some(bg.bytes_per_second),
                                mix: TrafficMix::Read,
                                buffer_bytes: req.background_bytes,
                                policy: MemoryPolicy::Local,
                                thp: req.thp,
                            };
                            (Some(PacedLoad::start(m, &spec)?), cpus)
                        }
                    }
                    None => (None, Vec::new()),
                };
                let mark = load.as_ref().map(|l| l.mark());
                let outcome = run_case(req, case, &mut bufs, &rule);
                let achieved = match (&load, &mark) {
                    (Some(l), Some(mk)) => l.rates_since(mk),
                    _ => Vec::new(),
                };
                let bg_ok = load
                    .as_ref()
                    .is_none_or(|l| l.workers().iter().all(|w| w.verified));
                let _report: Option<PacedReport> = load.map(|l| l.stop());
                let (fig, per) = outcome?;
                let mut problems = Vec::new();
                let threads_out: Vec<ThreadResult> = case
                    .threads
                    .iter()
                    .zip(per)
                    .map(|(t, (secs, seen))| {
                        let ok = !seen.is_empty() && seen.iter().all(|&c| c == t.cpu);
                        if !ok {
                            problems.push(format!(
                                "thread {} asked for CPU {} ran on {:?}",
                                t.label(),
                                t.cpu,
                                seen
                            ));
                        }
                        ThreadResult {
                            case: *t,
                            label: t.label(),
                            seconds: secs,
                            gbps: bytes_per_pass(kernel_of(req, t.access), req.buffer_bytes).program
                                as f64
                                / secs
                                / 1e9,
                            memory_gbps: bytes_per_pass(kernel_of(req, t.access), req.buffer_bytes)
                                .memory as f64
                                / secs
                                / 1e9,
                            seen_cpus: seen,
                            verified: ok,
                        }
                    })
                    .collect();
                for (ti, t) in case.threads.iter().enumerate() {
                    if let Some(b) = buffers.iter().find(|b| b.thread == ti && b.node == t.mem) {
                        if !b.at_start.verified {
                            problems.push(format!(
                                "buffer of thread {ti} on node {}: {}",
                                t.mem,
                                b.at_start.problems.join("; ")
                            ));
                        }
                    }
                }
                if !bg_ok {
                    problems.push("background placement did not verify".into());
                }
                let verified = problems.is_empty();
                all_verified &= verified;
                results.push(CaseResult {
                    labels: case.threads.iter().map(|t| t.label()).collect(),
                    hop_class: case.hop_class(),
                    sharing: sharing(m, case).into(),
                    class_size: case.class_size,
                    class_key: case.class_key.clone(),
                    seconds: fig,
                    normalized: f64::NAN,
                    threads: threads_out,
                    background_achieved: achieved,
                    background_cpus: bg_cpus,
                    verified,
                    problems,
                });
                done += 1;
                case_seconds_sum += t_case.elapsed().as_secs_f64();
                cases_timed += 1;
                progress(done, total_to_run, &case.label());
            }
            let fastest = results
                .iter()
                .map(|r| r.seconds.median)
                .filter(|x| x.is_finite() && *x > 0.0)
                .fold(f64::INFINITY, f64::min);
            for r in results.iter_mut() {
                r.normalized = r.seconds.median / fastest;
            }
            let run_hops: BTreeSet<&str> = results.iter().map(|r| r.hop_class.as_str()).collect();
            runs.push(SweepRun {
                threads: *threads,
                background: bg.clone(),
                total_cases: *total,
                classes: cases.len() as u64,
                cases_run: results.len() as u64,
                hop_classes: hop_classes.len() as u64,
                hop_classes_run: run_hops.len() as u64,
                elapsed_s: t_run.elapsed().as_secs_f64(),
                cases: results,
            });
        }
    }
    if cancel::requested() {
        warnings.push(cancel::WARNING.to_string());
    }
    // Pages can move while a sweep runs (NUMA balancing, migration): check again.
    for b in buffers.iter_mut() {
        if let Some(buf) = bufs[b.thread].by_node.get(&b.node) {
            b.at_end = check(m, b.node, buf)?;
            if b.at_end.pages_by_node != b.at_start.pages_by_node {
                warnings.push(format!(
                    "the buffer of thread {} on node {} moved during the sweep",
                    b.thread, b.node
                ));
                all_verified = false;
            }
        }
    }
    Ok(SweepResult {
        folded: !req.full,
        node_automorphisms: space.automorphism_count() as u64,
        cpus: space.cpus.iter().map(|c| c.os).collect(),
        mem_nodes: space.mem_nodes.clone(),
        accesses: req.accesses.clone(),
        read_kernel: req.read_kernel.name().into(),
        write_kernel: req.write_kernel.name().into(),
        buffer_bytes: req.buffer_bytes as u64,
        budget_s: req.budget.map(|b| b.as_secs_f64()),
        runs,
        buffers,
        verified: all_verified,
        warnings,
        elapsed_s: t_start.elapsed().as_secs_f64(),
    })
}

fn kernel_of(req: &SweepRequest, a: Access) -> BandwidthKernel {
    match a {
        Access::Read => req.read_kernel,
        Access::Write => req.write_kernel,
    }
}

/// How the threads of a case share hardware: `cpu` (two on one CPU: they
/// take turns), `core` (SMT siblings), `none`.
fn sharing(m: &Machine, case: &PlannedCase) -> &'static str {
    let cpus: Vec<u32> = case.threads.iter().map(|t| t.cpu).collect();
    for (i, a) in cpus.iter().enumerate() {
        if cpus[i + 1..].contains(a) {
            return "cpu";
        }
    }
    let core_of = |c: u32| m.cores.iter().position(|k| k.cpus.contains(c));
    for (i, a) in cpus.iter().enumerate() {
        if cpus[i + 1..]
            .iter()
            .any(|b| core_of(*a).is_some() && core_of(*a) == core_of(*b))
        {
            return "core";
        }
    }
    "none"
}

/// Bytes one pass of a sweep thread moves.
pub fn bytes_per_pass(kernel: BandwidthKernel, buffer_bytes: usize) -> ByteCount {
    kernel.bytes_per_pass(buffer_bytes / 8)
}

/// One of the classic questions, answered for one sweep run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    /// `a`..`d` as in the issue and docs/sweep.md.
    pub question: String,
    pub title: String,
    /// Whether the classic claim holds here; `None` when this sweep cannot
    /// tell (say why in `detail`).
    pub holds: Option<bool>,
    /// The ratio the answer rests on (see `detail` for what over what).
    pub ratio: Option<f64>,
    pub detail: String,
}

/// The findings of one run (one thread count set under one background).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Findings {
    /// `idle`, or the background level and subscription.
    pub condition: String,
    pub findings: Vec<Finding>,
}

/// Differences smaller than this share are noise on any real machine.
const NOISE: f64 = 0.03;

fn condition_name(bg: &Option<Background>) -> String {
    match bg {
        None => "idle".into(),
        Some(b) => format!(
            "background {} ({:.2} GB/s per thread), {}",
            b.level,
            b.bytes_per_second / 1e9,
            b.cpus.as_ref().map_or(
                format!("{} subscription", b.subscription.name()),
                |c| format!("on CPUs {c}")
            )
        ),
    }
}

fn case_seconds<'a>(cases: impl Iterator<Item = &'a CaseResult>) -> Vec<f64> {
    cases.map(|c| c.seconds.median).collect()
}

/// (a) single thread: does time grow with hop count, for reads and writes?
fn finding_hops(run: Option<&SweepRun>) -> Finding {
    let title = "single thread: time grows with hop count (reads and writes)".to_string();
    let Some(run) = run else {
        return Finding {
            question: "a".into(),
            title,
            holds: None,
            ratio: None,
            detail: "no one-thread cases in this sweep (run with --threads 1,2)".into(),
        };
    };
    let mut parts = Vec::new();
    let mut holds = Some(true);
    let mut worst_ratio: Option<f64> = None;
    for access in [Access::Read, Access::Write] {
        let mut by_hop: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for c in &run.cases {
            let t = &c.threads[0].case;
            if let (true, Some(h)) = (t.access == access, t.hops) {
                by_hop.entry(h).or_default().push(c.seconds.median);
            }
        }
        let meds: Vec<(u32, f64)> = by_hop
            .into_iter()
            .filter_map(|(h, v)| median(v).map(|m| (h, m)))
            .collect();
        if meds.is_empty() {
            continue;
        }
        if meds.len() < 2 {
            parts.push(format!(
                "{}: only {}-hop cases (one memory node)",
                if access == Access::Read {
                    "reads"
                } else {
                    "writes"
                },
                meds[0].0
            ));
            holds = None;
            continue;
        }
        let base = meds[0].1;
        let text: Vec<String> = meds
            .iter()
            .map(|(h, s)| {
                format!(
                    "{h} hop{}: {:.2}x",
                    if *h == 1 { "" } else { "s" },
                    s / base
                )
            })
            .collect();
        let grows = meds.windows(2).all(|w| w[1].1 > w[0].1 * (1.0 + NOISE));
        if !grows && holds.is_some() {
            holds = Some(false);
        }
        let r = meds.last().map(|x| x.1 / base);
        worst_ratio = match (worst_ratio, r) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        parts.push(format!(
            "{} ({}): {}",
            if access == Access::Read {
                "reads"
            } else {
                "writes"
            },
            if grows {
                "grows"
            } else {
                "does not grow at every hop"
            },
            text.join(", ")
        ));
    }
    Finding {
        question: "a".into(),
        title,
        holds,
        ratio: worst_ratio,
        detail: parts.join("; ") + " (time relative to the 0-hop median)",
    }
}

fn writers(run: &SweepRun) -> impl Iterator<Item = &CaseResult> {
    run.cases.iter().filter(|c| {
        c.threads.len() == 2 && c.threads.iter().all(|t| t.case.access == Access::Write)
    })
}

/// (b) crossfire vs no crossfire, two writers, same hop counts.
fn finding_crossfire(run: Option<&SweepRun>) -> Finding {
    let title = "two writers: crossfire (each writes the other's node) is slower than no crossfire (same hops, other links)".to_string();
    let none = |detail: &str| Finding {
        question: "b".into(),
        title: title.clone(),
        holds: None,
        ratio: None,
        detail: detail.into(),
    };
    let Some(run) = run else {
        return none("no two-thread cases in this sweep");
    };
    let cross: Vec<f64> = case_seconds(writers(run).filter(|c| {
        let (a, b) = (&c.threads[0].case, &c.threads[1].case);
        a.node != b.node && a.mem == b.node && b.mem == a.node && a.hops == Some(1)
    }));
    let no_cross: Vec<f64> = case_seconds(writers(run).filter(|c| {
        let (a, b) = (&c.threads[0].case, &c.threads[1].case);
        let one_way =
            |x: &ThreadCase, y: &ThreadCase| x.mem == y.node && y.mem != x.node && y.mem != y.node;
        a.node != b.node
            && a.hops == Some(1)
            && b.hops == Some(1)
            && (one_way(a, b) || one_way(b, a))
    }));
    match (median(cross), median(no_cross)) {
        (Some(x), Some(n)) => Finding {
            question: "b".into(),
            title,
            holds: Some(x > n * (1.0 + NOISE)),
            ratio: Some(x / n),
            detail: format!(
                "crossfire takes {:.2}x the time of no crossfire (medians over the matching cases; the classic idle result is > 1)",
                x / n
            ),
        },
        _ => none("needs two writers on linked nodes and a third node one hop from one of them (3+ nodes, write cases)"),
    }
}

/// (c) two writers on one node: both local vs one buffer one hop away.
fn finding_two_local_writers(run: Option<&SweepRun>) -> Finding {
    let title = "two writers on one node: moving one buffer one hop away beats keeping both local"
        .to_string();
    let none = |detail: &str| Finding {
        question: "c".into(),
        title: title.clone(),
        holds: None,
        ratio: None,
        detail: detail.into(),
    };
    let Some(run) = run else {
        return none("no two-thread cases in this sweep");
    };
    let same_node = |c: &&CaseResult| {
        let (a, b) = (&c.threads[0].case, &c.threads[1].case);
        a.node == b.node && a.cpu != b.cpu
    };
    let local: Vec<f64> = case_seconds(
        writers(run)
            .filter(same_node)
            .filter(|c| c.threads.iter().all(|t| t.case.hops == Some(0))),
    );
    let moved: Vec<f64> = case_seconds(writers(run).filter(same_node).filter(|c| {
        let mut h: Vec<Option<u32>> = c.threads.iter().map(|t| t.case.hops).collect();
        h.sort();
        h == vec![Some(0), Some(1)]
    }));
    match (median(local), median(moved)) {
        (Some(l), Some(mv)) => Finding {
            question: "c".into(),
            title,
            holds: Some(mv < l * (1.0 - NOISE)),
            ratio: Some(mv / l),
            detail: format!(
                "0-hop/1-hop takes {:.2}x the time of 0-hop/0-hop (< 1: the node's controller saturates with two local writers)",
                mv / l
            ),
        },
        (None, _) => none("needs two CPUs on one node (write cases)"),
        (_, None) => none("needs a second memory node one hop away (one-node machine)"),
    }
}

/// (d) are all cases of a hop class equal? The largest spread within one.
fn finding_equal_hops(run: Option<&SweepRun>) -> Finding {
    let title = "cases with the same hop counts take the same time".to_string();
    let Some(run) = run else {
        return Finding {
            question: "d".into(),
            title,
            holds: None,
            ratio: None,
            detail: "no cases".into(),
        };
    };
    // Threads taking turns on one CPU (or sharing a core) are another
    // experiment: compare like with like.
    let mut by: BTreeMap<String, Vec<(&CaseResult, f64)>> = BTreeMap::new();
    for c in &run.cases {
        if c.seconds.median.is_finite() {
            let key = match c.sharing.as_str() {
                "none" => c.hop_class.clone(),
                s => format!("{} (sharing a {s})", c.hop_class),
            };
            by.entry(key).or_default().push((c, c.seconds.median));
        }
    }
    let mut worst: Option<(f64, &String, &CaseResult, &CaseResult)> = None;
    for (class, v) in &by {
        if v.len() < 2 {
            continue;
        }
        let lo = v.iter().min_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        let hi = v.iter().max_by(|a, b| a.1.total_cmp(&b.1)).unwrap();
        let r = hi.1 / lo.1;
        if worst.is_none_or(|w| r > w.0) {
            worst = Some((r, class, lo.0, hi.0));
        }
    }
    match worst {
        Some((r, class, lo, hi)) => Finding {
            question: "d".into(),
            title,
            holds: Some(r <= 1.0 + 2.0 * NOISE),
            ratio: Some(r),
            detail: format!(
                "largest spread within a hop class: {:.2}x in class {class} ({} fastest, {} slowest), over {} threads",
                r,
                lo.labels.join(" "),
                hi.labels.join(" "),
                run.threads
            ),
        },
        None => Finding {
            question: "d".into(),
            title,
            holds: None,
            ratio: None,
            detail: "every hop class has a single case here".into(),
        },
    }
}

/// Mines a finished sweep for the classic questions, per background setting.
pub fn findings(r: &SweepResult) -> Vec<Findings> {
    let mut conditions: Vec<Option<Background>> = Vec::new();
    for run in &r.runs {
        if !conditions.contains(&run.background) {
            conditions.push(run.background.clone());
        }
    }
    conditions
        .into_iter()
        .map(|bg| {
            let runs: Vec<&SweepRun> = r.runs.iter().filter(|x| x.background == bg).collect();
            let one = runs.iter().copied().find(|x| x.threads == 1);
            let two = runs.iter().copied().find(|x| x.threads == 2);
            let most = runs.iter().copied().max_by_key(|x| x.threads);
            Findings {
                condition: condition_name(&bg),
                findings: vec![
                    finding_hops(one),
                    finding_crossfire(two),
                    finding_two_local_writers(two),
                    finding_equal_hops(most),
                ],
            }
        })
        .collect()
}
