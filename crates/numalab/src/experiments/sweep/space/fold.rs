//! Canonical forms of cases and the walks that fold them: the full
//! enumeration (`--every-case`), one representative per class of equivalent
//! cases, and a kernel's operand placements.

use super::super::symmetry::Orbits;
use super::super::tree::Path;
use super::{Access, Key, PlannedCase, SweepCpu, SweepSpace, ThreadCase, MAX_PLANNED_CASES};
use std::collections::HashMap;

impl SweepSpace {
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
    pub(super) fn canonical(&self, case: &[Key]) -> Vec<Key> {
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

    pub(super) fn key_of(&self, cpu: &SweepCpu, access: Access, mem: u32) -> Key {
        (cpu.node, cpu.path, access, mem)
    }

    pub(super) fn sweep_cpu(&self, os: u32) -> Option<&SweepCpu> {
        self.cpus
            .binary_search_by_key(&os, |c| c.os)
            .ok()
            .map(|i| &self.cpus[i])
    }

    pub(super) fn thread_case(&self, cpu: &SweepCpu, access: Access, mem: u32) -> ThreadCase {
        ThreadCase {
            cpu: cpu.os,
            node: cpu.node,
            core: cpu.in_node as u32,
            access,
            mem,
            hops: self.hops.get(&(cpu.node, mem)).copied(),
        }
    }

    pub(super) fn class_key(key: &[Key]) -> String {
        key.iter()
            .map(|(n, path, a, mem)| format!("{n}:{}:{}:{mem}", path.text(), a.letter()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Every case, each standing for itself (`--every-case`), in enumeration order.
    /// Refuses more than `limit` cases (and more than [`MAX_PLANNED_CASES`],
    /// whatever the limit: memory goes with the real count).
    pub fn full(&self, threads: usize, limit: u64) -> Result<Vec<PlannedCase>, String> {
        let total = self.total_cases(threads);
        let limit = limit.min(MAX_PLANNED_CASES);
        if total > limit as u128 {
            return Err(format!(
                "{total} cases for {threads} thread(s) is more than the limit of {limit}; fold them (drop --every-case) or narrow --cpus/--mem-nodes"
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
        for (x, images, with_next) in self.canonical_next(prefix, fixed) {
            prefix.push(x);
            let within = self.orderly(walk, prefix, &with_next, size.saturating_mul(images));
            prefix.pop();
            if !within {
                return false;
            }
        }
        true
    }

    /// The next threads after `prefix` (whose nodes, as indexes, are
    /// `fixed`), one per class of the automorphisms that fix the prefix:
    /// each with the cases it stands for (orbit sizes times the cores it
    /// represents) and the nodes fixed once it is placed.
    fn canonical_next(&self, prefix: &[Key], fixed: &[usize]) -> Vec<(Key, u64, Vec<usize>)> {
        let around_prefix = self.symmetry.orbits(fixed);
        let mut out = Vec::new();
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
            out.push((x, images.saturating_mul(mult), with_node));
        }
        out
    }

    /// Classes of thread *sequences* (threads keep their labels) under the
    /// node automorphisms and core swaps: what [`SweepSpace::folded`]'s walk
    /// reaches before it merges exchanges of threads, so the folded classes
    /// number at least this over the thread orders tried and at most this.
    /// Counted by the same walk without building the last thread's cases
    /// (a few thousand prefixes where the classes run to millions); `None`
    /// as soon as there are more than `cap`.
    pub fn sequence_classes(&self, threads: usize, cap: u128) -> Option<u128> {
        let mut total = 0u128;
        let mut prefix = Vec::with_capacity(threads);
        self.count_walk(threads, &mut prefix, &[], cap, &mut total)
            .then_some(total)
    }

    fn count_walk(
        &self,
        threads: usize,
        prefix: &mut Vec<Key>,
        fixed: &[usize],
        cap: u128,
        total: &mut u128,
    ) -> bool {
        if prefix.len() == threads {
            *total += 1;
            return *total <= cap;
        }
        let next = self.canonical_next(prefix, fixed);
        if prefix.len() + 1 == threads {
            *total = total.saturating_add(next.len() as u128);
            return *total <= cap;
        }
        for (x, _, with_next) in next {
            prefix.push(x);
            let within = self.count_walk(threads, prefix, &with_next, cap, total);
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

/// How many thread orders [`exchanges`] tries for `n` threads: the most
/// thread-sequence classes one folded class merges.
pub(super) fn thread_orders(n: usize) -> u128 {
    if n > MAX_EXCHANGED_THREADS {
        1
    } else {
        (1..=n as u128).product()
    }
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
