//! The exact class counts: groups of equal items placed as multisets, and
//! the dynamic program over load vectors that merges equal partial loads
//! (see the module documentation of `pdm`, "Counting").

use super::model::milli;
use super::{
    Direction, Example, Labelled, Prepared, ThreadPlacement, EXAMPLES_PER_CLASS, MAX_GROUP_OPTIONS,
    MAX_LAYER_BYTES, MAX_THREAD_MULTISETS, MAX_TOTAL_STATES, STATE_CAP,
};
use std::collections::BTreeMap;
use std::time::Instant;

/// A fast hash of a load vector: the loads are small integers, hashed many
/// times, and need no protection against chosen collisions.
fn hash_loads<K: Load>(key: &[K]) -> u64 {
    key.iter().fold(0u64, |h, &k| {
        (h.rotate_left(5) ^ k.into()).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)
    })
}

/// One layer of the DP's states: load vectors of `width` loads stored one
/// after another, numbered in the order they were first reached, and found
/// through an open-addressing table of those numbers. A `HashMap` of boxed
/// vectors spent half of `numalab pdm --kernel triad` on the Quartet ring
/// (3 s, 16.7 million placements) in malloc, free and rehashing.
struct LoadTable<K> {
    width: usize,
    len: usize,
    loads: Vec<K>,
    /// State numbers; `EMPTY` where none. A power of two, at most half full.
    slots: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;

impl<K: Load> LoadTable<K> {
    fn new(width: usize) -> Self {
        LoadTable {
            width,
            len: 0,
            loads: Vec::new(),
            slots: vec![EMPTY; 64],
        }
    }

    /// The loads of state `i`.
    fn get(&self, i: usize) -> &[K] {
        &self.loads[i * self.width..(i + 1) * self.width]
    }

    /// Where `key`'s probe starts in a table of `slots` slots: the hash's
    /// high bits (Fibonacci hashing), as its low bits mix poorly.
    fn start(key: &[K], slots: usize) -> usize {
        let shift = 64 - slots.trailing_zeros();
        (hash_loads(key).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> shift) as usize
    }

    /// The number of `key`'s state, and whether it is new (numbered next).
    fn find_or_insert(&mut self, key: &[K]) -> (usize, bool) {
        if 2 * (self.len + 1) > self.slots.len() {
            self.grow();
        }
        let mask = self.slots.len() - 1;
        let mut at = Self::start(key, self.slots.len());
        loop {
            match self.slots[at] {
                EMPTY => {
                    self.slots[at] = self.len as u32;
                    self.loads.extend_from_slice(key);
                    self.len += 1;
                    return (self.len - 1, true);
                }
                i if self.get(i as usize) == key => return (i as usize, false),
                _ => at = (at + 1) & mask,
            }
        }
    }

    fn grow(&mut self) {
        let n = 2 * self.slots.len();
        let mut slots = vec![EMPTY; n];
        for i in 0..self.len {
            let mut at = Self::start(self.get(i), n);
            while slots[at] != EMPTY {
                at = (at + 1) & (n - 1);
            }
            slots[at] = i as u32;
        }
        self.slots = slots;
    }
}

/// The integer type of one load in the DP's keys.
trait Load: Copy + Eq + Default + Into<u64> + TryFrom<u64> + std::ops::Add<Output = Self> {}
impl Load for u16 {}
impl Load for u32 {}
impl Load for u64 {}

/// Items of equal thread node, weight and direction, placed together.
struct Group {
    /// (thread, quantity) of each item.
    items: Vec<(usize, usize)>,
    /// Each multiset of memory nodes: nodes in item order, count, dense loads.
    options: Vec<(Vec<usize>, u128, Vec<u64>)>,
}

/// Per class: placements and up to three examples (one option per group).
type ClassCounts = BTreeMap<u64, (u128, Vec<Vec<usize>>)>;

struct Dp {
    classes: ClassCounts,
    largest: usize,
    states: usize,
}

fn multisets(v: usize, g: usize) -> usize {
    // C(v+g-1, g), saturating.
    let mut r: u128 = 1;
    for i in 0..g as u128 {
        r = r * (v as u128 + i) / (i + 1);
        if r > u128::from(u32::MAX) {
            return usize::MAX;
        }
    }
    r as usize
}

pub(super) fn factorial(n: usize) -> u128 {
    (1..=n as u128).product()
}

/// Every non-decreasing sequence of length `g` over `0..v`, with its count
/// of orderings.
fn each_multiset(v: usize, g: usize) -> Vec<(Vec<usize>, u128)> {
    let mut out = Vec::new();
    let mut cur = vec![0usize; g];
    loop {
        let mut mult = factorial(g);
        let mut run = 1usize;
        for i in 1..=g {
            if i < g && cur[i] == cur[i - 1] {
                run += 1;
            } else {
                mult /= factorial(run);
                run = 1;
            }
        }
        out.push((cur.clone(), mult));
        // Next non-decreasing sequence.
        let Some(i) = (0..g).rev().find(|&i| cur[i] + 1 < v) else {
            return out;
        };
        let x = cur[i] + 1;
        cur[i..].iter_mut().for_each(|c| *c = x);
    }
}

impl Prepared<'_> {
    fn groups(&self, thread_nodes: &[usize]) -> Vec<Group> {
        let v = self.model.nodes.len();
        let r = self.model.resources();
        let mut keyed: BTreeMap<(usize, u64, Direction), Vec<(usize, usize)>> = BTreeMap::new();
        for (t, &c) in thread_nodes.iter().enumerate() {
            for (q, qty) in self.quantities.iter().enumerate() {
                keyed
                    .entry((c, milli(qty.weight), qty.direction))
                    .or_default()
                    .push((t, q));
            }
        }
        let mut groups = Vec::new();
        for ((c, w, dir), items) in keyed {
            let per_node: Vec<Vec<(usize, u64)>> = (0..v)
                .map(|m| self.model.contribution(c, m, w, dir))
                .collect();
            let mut size = items.len();
            while size > 1 && multisets(v, size) > MAX_GROUP_OPTIONS {
                size -= 1;
            }
            for chunk in items.chunks(size) {
                let options = each_multiset(v, chunk.len())
                    .into_iter()
                    .map(|(ms, mult)| {
                        let mut dense = vec![0u64; r];
                        for &m in &ms {
                            for &(res, a) in &per_node[m] {
                                dense[res] += a / self.unit;
                            }
                        }
                        (ms, mult, dense)
                    })
                    .collect();
                groups.push(Group {
                    items: chunk.to_vec(),
                    options,
                });
            }
        }
        groups
    }

    /// The exact class counts of one thread layout, or `None` past the caps.
    /// `None` also past `deadline`.
    fn dp(&self, groups: &[Group], state_budget: usize, deadline: Option<Instant>) -> Option<Dp> {
        let bound: u64 = groups
            .iter()
            .map(|g| {
                g.options
                    .iter()
                    .flat_map(|o| o.2.iter())
                    .copied()
                    .max()
                    .unwrap_or(0)
            })
            .sum();
        if bound <= u64::from(u16::MAX) {
            self.dp_with::<u16>(groups, state_budget, deadline)
        } else if bound <= u64::from(u32::MAX) {
            self.dp_with::<u32>(groups, state_budget, deadline)
        } else {
            self.dp_with::<u64>(groups, state_budget, deadline)
        }
    }

    fn dp_with<K: Load>(
        &self,
        groups: &[Group],
        state_budget: usize,
        deadline: Option<Instant>,
    ) -> Option<Dp> {
        let r = self.model.resources();
        let cap = STATE_CAP.min(MAX_LAYER_BYTES / (r * std::mem::size_of::<K>() + 48).max(1));
        let conv = |x: u64| K::try_from(x).ok();
        let options: Vec<Vec<(u128, Vec<K>)>> = groups
            .iter()
            .map(|g| {
                g.options
                    .iter()
                    .map(|(_, mult, d)| {
                        Some((
                            *mult,
                            d.iter().map(|&x| conv(x)).collect::<Option<Vec<K>>>()?,
                        ))
                    })
                    .collect::<Option<Vec<_>>>()
            })
            .collect::<Option<_>>()?;
        let mut cur: LoadTable<K> = LoadTable::new(r);
        cur.find_or_insert(&vec![K::default(); r]);
        let mut counts: Vec<u128> = vec![1];
        let mut back: Vec<Vec<(u32, u32)>> = Vec::new();
        let mut largest = 1usize;
        let mut states = 1usize;
        let mut key = vec![K::default(); r];
        let (last, rest) = options.split_last()?;
        for opts in rest {
            let mut next: LoadTable<K> = LoadTable::new(r);
            let mut next_counts: Vec<u128> = Vec::new();
            let mut next_back: Vec<(u32, u32)> = Vec::new();
            for (idx, &n) in counts.iter().enumerate() {
                // The clock is read once every 4096 states of a layer.
                if idx % 4096 == 4095 && deadline.is_some_and(|d| Instant::now() >= d) {
                    return None;
                }
                let load = cur.get(idx);
                for (oi, (mult, add)) in opts.iter().enumerate() {
                    for ((k, &l), &a) in key.iter_mut().zip(load.iter()).zip(add) {
                        *k = l + a;
                    }
                    let c = n.checked_mul(*mult)?;
                    let (j, new) = next.find_or_insert(&key);
                    if new {
                        if next_counts.len() >= cap {
                            return None;
                        }
                        next_counts.push(c);
                        next_back.push((idx as u32, oi as u32));
                    } else {
                        let slot = &mut next_counts[j];
                        *slot = slot.checked_add(c)?;
                    }
                }
            }
            largest = largest.max(next_counts.len());
            states += next_counts.len();
            if states > state_budget {
                return None;
            }
            back.push(next_back);
            cur = next;
            counts = next_counts;
        }
        // The last group only decides each placement's maximum: its layer is
        // never stored (it would be the largest), only folded into classes.
        // Deterministic examples: the first states reached, in order.
        let mut classes = ClassCounts::new();
        for (idx, &n) in counts.iter().enumerate() {
            if idx % 4096 == 4095 && deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            let load = cur.get(idx);
            for (oi, (mult, add)) in last.iter().enumerate() {
                let max = load
                    .iter()
                    .zip(add)
                    .map(|(&l, &a)| (l + a).into())
                    .max()
                    .unwrap_or(0);
                let entry = classes.entry(self.class_of(max)).or_insert((0, Vec::new()));
                entry.0 = entry.0.checked_add(n.checked_mul(*mult)?)?;
                if entry.1.len() < EXAMPLES_PER_CLASS {
                    let mut choice = vec![0usize; back.len() + 1];
                    choice[back.len()] = oi;
                    let mut at = idx as u32;
                    for (layer, b) in back.iter().enumerate().rev() {
                        let (parent, o) = b[at as usize];
                        choice[layer] = o as usize;
                        at = parent;
                    }
                    entry.1.push(choice);
                }
            }
        }
        Some(Dp {
            classes,
            largest,
            states,
        })
    }

    fn decode(&self, thread_nodes: &[usize], groups: &[Group], choice: &[usize]) -> Example {
        let mut memory = vec![vec![0usize; self.quantities.len()]; thread_nodes.len()];
        for (g, &oi) in groups.iter().zip(choice) {
            for (&(t, q), &m) in g.items.iter().zip(&g.options[oi].0) {
                memory[t][q] = m;
            }
        }
        self.example(thread_nodes, memory)
    }
}

pub(super) fn exact_count(
    p: &Prepared,
    threads: &ThreadPlacement,
    fixed: Option<&[usize]>,
    cpu_vertices: &[usize],
    deadline: Option<Instant>,
) -> Option<(Labelled, usize)> {
    let mut out = Labelled::new();
    let mut largest = 0;
    let mut budget = MAX_TOTAL_STATES;
    let mut add = |layout: &[usize], weight: u128, budget: &mut usize| -> Option<()> {
        let groups = p.groups(layout);
        let dp = p.dp(&groups, *budget, deadline)?;
        *budget = budget.saturating_sub(dp.states);
        largest = largest.max(dp.largest);
        for (k, (n, examples)) in dp.classes {
            let e = out.entry(k).or_insert((0, Vec::new()));
            e.0 = e.0.checked_add(n.checked_mul(weight)?)?;
            for ch in examples {
                if e.1.len() < EXAMPLES_PER_CLASS {
                    e.1.push(p.decode(layout, &groups, &ch));
                }
            }
        }
        Some(())
    };
    match threads {
        ThreadPlacement::OnePerNode => {
            add(cpu_vertices, factorial(cpu_vertices.len()), &mut budget)?;
        }
        ThreadPlacement::Fixed(_) => add(fixed?, 1, &mut budget)?,
        ThreadPlacement::Any(n) => {
            if multisets(cpu_vertices.len(), *n) > MAX_THREAD_MULTISETS {
                return None;
            }
            for (ms, mult) in each_multiset(cpu_vertices.len(), *n) {
                let layout: Vec<usize> = ms.iter().map(|&i| cpu_vertices[i]).collect();
                add(&layout, mult, &mut budget)?;
            }
        }
    }
    Some((out, largest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multisets_count_every_ordering() {
        for (v, g) in [(4, 2), (3, 3), (5, 1), (2, 4)] {
            let ms = each_multiset(v, g);
            assert_eq!(ms.len(), multisets(v, g));
            let total: u128 = ms.iter().map(|x| x.1).sum();
            assert_eq!(total, (v as u128).pow(g as u32));
        }
    }
}
