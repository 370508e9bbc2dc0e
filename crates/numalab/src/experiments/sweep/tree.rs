//! The whole machine as a tree, for the sweep's symmetry (docs/sweep.md,
//! "Which cases are the same experiment").
//!
//! Every package, cache (every level and kind), core and PU of the machine
//! model is a set of CPUs; so is every NUMA node with CPUs. hwloc nests its
//! objects, so these sets form a tree (a laminar family: any two are
//! disjoint or one holds the other); objects with the same CPUs are one
//! vertex carrying all their labels. The tree splits at the nodes:
//!
//! - below a node, its *local tree*: the objects inside the node's CPUs,
//!   down to the PUs, each PU marked in or out of the sweep;
//! - above the nodes, the objects spanning several nodes (a package of two
//!   nodes, an L3 over sub-NUMA clusters), each a union of whole nodes.
//!
//! An automorphism of the whole tree that keeps the sweep's CPUs is then a
//! permutation of the nodes that keeps the objects above them (and the
//! distances and memory, which `space/` adds) together with, for every
//! node, an isomorphism of its local tree onto its image's. The local part
//! is an iterated wreath product: at every vertex, children whose subtrees
//! have the same *shape* (canonical form) may be permuted freely. So a PU is
//! addressed by its *path* from the node down, one step per level: (the
//! child's shape, its index among its parent's children of that shape).
//! Renumbering the indexes of a case's paths by first use gives the form no
//! local automorphism can change, and following the same path in another
//! node of the same shape is an isomorphism between them.
//!
//! A family that is not laminar (never from hwloc; a hand-edited file could
//! do it) gives no local symmetry at all: each PU is its own shape, and the
//! caller drops the node symmetry too, which is exact (it folds nothing).

use super::symmetry::GroupOrder;
use crate::machine::Machine;
use crate::IdSet;
use std::collections::{BTreeMap, HashMap};

/// The deepest local tree a path can describe (levels below the node).
/// Machines have six or seven (package, L3, L2, L1, core, PU); a deeper
/// tree (only a crafted file) gets no local symmetry.
pub(super) const MAX_DEPTH: usize = 16;

/// One step of a path: (shape of the child, index among the parent's
/// children of that shape).
pub(super) type Step = (u16, u16);

/// Where a PU sits in its node's local tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Path {
    len: u8,
    steps: [Step; MAX_DEPTH],
}

impl Path {
    pub(super) const EMPTY: Path = Path {
        len: 0,
        steps: [(0, 0); MAX_DEPTH],
    };

    pub(super) fn steps(&self) -> &[Step] {
        &self.steps[..self.len as usize]
    }

    pub(super) fn push(&mut self, s: Step) {
        self.steps[self.len as usize] = s;
        self.len += 1;
    }

    fn pop(&mut self) {
        self.len -= 1;
        self.steps[self.len as usize] = (0, 0);
    }

    pub(super) fn set(&mut self, level: usize, s: Step) {
        self.steps[level] = s;
    }

    /// The path as text: `shape.index` per level, joined by `/`.
    pub(super) fn text(&self) -> String {
        self.steps()
            .iter()
            .map(|(c, i)| format!("{c}.{i}"))
            .collect::<Vec<_>>()
            .join("/")
    }
}

/// One vertex of a local tree.
#[derive(Debug, Clone)]
struct Vertex {
    /// Children grouped by shape, shapes ascending, each group by smallest
    /// CPU: a child's index is its place in its group.
    groups: Vec<(u16, Vec<usize>)>,
    /// The PU, for a leaf.
    cpu: Option<u32>,
    /// Sweep PUs below (or at) this vertex.
    sweep: usize,
    /// Whether this vertex is a core or holds whole cores (its swap moves
    /// cores, not only SMT siblings).
    holds_cores: bool,
}

/// A node's local tree; vertex 0 is the node.
#[derive(Debug, Clone)]
struct LocalTree {
    vertices: Vec<Vertex>,
}

/// The machine tree of a sweep.
#[derive(Debug, Clone)]
pub(super) struct MachineTree {
    /// Every node of the machine (OS indexes, sorted).
    nodes: Vec<u32>,
    /// Per node: its local tree, `None` when it has no CPUs.
    locals: Vec<Option<LocalTree>>,
    /// Per node: its local tree's shape.
    shapes: Vec<Option<u16>>,
    /// Every CPU of a node: (node index, path).
    places: HashMap<u32, (usize, Path)>,
    /// `upper[a][b]`: the labels of the objects above the nodes that hold
    /// both nodes' CPUs, smallest first, as one id (0: none).
    upper: Vec<Vec<u32>>,
    /// The objects above the nodes: (label id, node indexes).
    upper_sets: Vec<(u32, Vec<usize>)>,
    /// Whether the objects nest (else no local symmetry, and the caller
    /// must use no node symmetry either).
    pub(super) laminar: bool,
}

/// A vertex being built: its CPUs and labels.
struct Proto {
    cpus: IdSet,
    labels: Vec<String>,
}

impl MachineTree {
    /// The tree of `m`, PUs in `sweep` marked.
    pub(super) fn new(m: &Machine, sweep: &IdSet) -> Self {
        let nodes: Vec<u32> = {
            let mut v: Vec<u32> = m.nodes.iter().map(|n| n.os_index).collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let node_cpus: Vec<IdSet> = nodes
            .iter()
            .map(|&n| m.node(n).map(|x| x.cpus.clone()).unwrap_or_default())
            .collect();
        let universe = node_cpus.iter().fold(IdSet::new(), |acc, c| acc.union(c));
        let (protos, laminar) = match protos(m, &node_cpus, &universe, sweep) {
            Some(p) => (p, true),
            None => (flat_protos(&node_cpus, &universe, sweep), false),
        };
        let built = build(&nodes, &node_cpus, &protos);
        match built {
            Some(t) => MachineTree { laminar, ..t },
            // Deeper than a path holds: no local symmetry.
            None => {
                let flat = flat_protos(&node_cpus, &universe, sweep);
                let t = build(&nodes, &node_cpus, &flat).expect("two levels");
                MachineTree {
                    laminar: false,
                    ..t
                }
            }
        }
    }

    /// The nodes, in index order.
    pub(super) fn nodes(&self) -> &[u32] {
        &self.nodes
    }

    /// A node's local shape (`None`: no CPUs).
    pub(super) fn shape(&self, node: usize) -> Option<u16> {
        self.shapes[node]
    }

    /// The objects above nodes `a` and `b` (as one id; `a == b`: above `a`).
    pub(super) fn upper(&self, a: usize, b: usize) -> u32 {
        self.upper[a][b]
    }

    /// The objects above the nodes as labelled node sets.
    pub(super) fn upper_sets(&self) -> &[(u32, Vec<usize>)] {
        &self.upper_sets
    }

    /// Where `cpu` sits: (node index, path); `None` for a CPU of no node.
    pub(super) fn place(&self, cpu: u32) -> Option<(usize, Path)> {
        self.places.get(&cpu).copied()
    }

    /// The CPU at `path` of `node` (indexes are concrete), if any.
    pub(super) fn cpu_at(&self, node: usize, path: &Path) -> Option<u32> {
        let t = self.locals[node].as_ref()?;
        let mut v = 0usize;
        for &(shape, idx) in path.steps() {
            let (_, kids) = t.vertices[v].groups.iter().find(|g| g.0 == shape)?;
            v = *kids.get(idx as usize)?;
        }
        t.vertices[v].cpu
    }

    /// The order of the local automorphisms: at every vertex of every
    /// node, the factorial of each group of same-shaped children.
    pub(super) fn local_order(&self, order: &mut GroupOrder) {
        for t in self.locals.iter().flatten() {
            for v in &t.vertices {
                for (_, kids) in &v.groups {
                    for k in 2..=kids.len() {
                        order.times(k);
                    }
                }
            }
        }
    }

    /// The next thread's choices in `node` given the paths (in slot form)
    /// of the threads already there: per sweep PU reachable by a slot
    /// path (an index already used, or the next unused one, at every
    /// level), the path and how many concrete PUs it stands for (the
    /// unused children of its shape where it takes a new index, all of
    /// them below that).
    pub(super) fn slot_choices(&self, node: usize, used: &[Path]) -> Vec<(Path, u64)> {
        let mut out = Vec::new();
        if let Some(t) = &self.locals[node] {
            let refs: Vec<&Path> = used.iter().collect();
            let mut cur = Path::EMPTY;
            slots_below(t, 0, 0, &mut cur, &refs, 1, &mut out);
        }
        out
    }

    /// Ways to put `threads` labelled threads on the sweep PUs up to the
    /// local automorphisms, for every thread count up to `threads`, over
    /// all nodes together (saturating).
    pub(super) fn slot_forms(&self, threads: usize, binom: &[Vec<u128>]) -> Vec<u128> {
        let mut ways = vec![0u128; threads + 1];
        ways[0] = 1;
        for t in self.locals.iter().flatten() {
            let f = forms(t, 0, threads, binom);
            ways = convolve(&ways, &f, binom);
        }
        ways
    }

    /// Another concrete path of `node` for the threads at `paths` (all in
    /// `node`): the first thread's subtree at the deepest level that holds
    /// whole cores (else any level) swapped with a sibling of the same
    /// shape no thread uses; every thread inside it moves along. `None`
    /// when no such sibling exists.
    pub(super) fn swapped(&self, node: usize, paths: &[Path]) -> Option<Vec<Path>> {
        let t = self.locals[node].as_ref()?;
        let first = paths.first()?;
        // Vertices along the first path, and for each level a free sibling.
        let mut v = 0usize;
        let mut options: Vec<(usize, u16, bool)> = Vec::new();
        for (level, &(shape, idx)) in first.steps().iter().enumerate() {
            let (_, kids) = t.vertices[v].groups.iter().find(|g| g.0 == shape)?;
            let prefix = &first.steps()[..level];
            let free = (0..kids.len() as u16).find(|&j| {
                j != idx
                    && t.vertices[kids[j as usize]].sweep > 0
                    && !paths.iter().any(|p| {
                        p.steps().len() > level
                            && &p.steps()[..level] == prefix
                            && p.steps()[level] == (shape, j)
                    })
            });
            let child = kids[idx as usize];
            if let Some(j) = free {
                options.push((level, j, t.vertices[child].holds_cores));
            }
            v = child;
        }
        let &(level, j, _) = options
            .iter()
            .rev()
            .find(|o| o.2)
            .or_else(|| options.last())?;
        let prefix: Vec<Step> = first.steps()[..=level].to_vec();
        Some(
            paths
                .iter()
                .map(|p| {
                    let mut q = *p;
                    if p.steps().len() > level && p.steps()[..=level] == prefix[..] {
                        q.set(level, (prefix[level].0, j));
                    }
                    q
                })
                .collect(),
        )
    }
}

/// Every object of the machine as a vertex (objects with the same CPUs
/// merged), or `None` when they do not nest.
fn protos(m: &Machine, node_cpus: &[IdSet], universe: &IdSet, sweep: &IdSet) -> Option<Vec<Proto>> {
    let mut by_cpus: HashMap<IdSet, usize> = HashMap::new();
    let mut out: Vec<Proto> = Vec::new();
    let mut add = |cpus: IdSet, label: String| {
        let cpus = cpus.intersection(universe);
        if cpus.is_empty() {
            return;
        }
        let i = *by_cpus.entry(cpus.clone()).or_insert_with(|| {
            out.push(Proto {
                cpus,
                labels: Vec::new(),
            });
            out.len() - 1
        });
        out[i].labels.push(label);
    };
    for c in node_cpus {
        add(c.clone(), "node".into());
    }
    for p in &m.packages {
        add(p.cpus.clone(), "package".into());
    }
    for c in &m.caches {
        add(
            c.cpus.clone(),
            format!(
                "L{}{} {} B line {} ways {:?}",
                c.level,
                c.kind.chars().next().unwrap_or('?'),
                c.size_bytes,
                c.line_bytes,
                c.associativity
            ),
        );
    }
    for c in &m.cores {
        add(c.cpus.clone(), "core".into());
    }
    for cpu in universe.iter() {
        let mark = if sweep.contains(cpu) { "pu+" } else { "pu-" };
        add(IdSet::single(cpu), mark.into());
    }
    for p in out.iter_mut() {
        p.labels.sort();
    }
    // Laminar: along every CPU, the sets holding it nest.
    let mut chains: HashMap<u32, Vec<usize>> = HashMap::new();
    for (i, p) in out.iter().enumerate() {
        for c in p.cpus.iter() {
            chains.entry(c).or_default().push(i);
        }
    }
    for chain in chains.values_mut() {
        chain.sort_by_key(|&i| out[i].cpus.len());
        if chain
            .windows(2)
            .any(|w| !out[w[0]].cpus.is_subset(&out[w[1]].cpus))
        {
            return None;
        }
    }
    Some(out)
}

/// Each node a root with its PUs as leaves, every PU its own shape: no
/// local symmetry.
fn flat_protos(node_cpus: &[IdSet], universe: &IdSet, sweep: &IdSet) -> Vec<Proto> {
    let mut out: Vec<Proto> = node_cpus
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| Proto {
            cpus: c.clone(),
            labels: vec!["node".into()],
        })
        .collect();
    for cpu in universe.iter() {
        if node_cpus.iter().any(|c| c.len() == 1 && c.contains(cpu)) {
            // The node is this one PU: it is the leaf.
            if let Some(p) = out.iter_mut().find(|p| p.cpus == IdSet::single(cpu)) {
                p.labels.push(format!("cpu {cpu} {}", sweep.contains(cpu)));
            }
            continue;
        }
        out.push(Proto {
            cpus: IdSet::single(cpu),
            labels: vec![format!("cpu {cpu} {}", sweep.contains(cpu))],
        });
    }
    out
}

/// The tree from nested vertices: local trees with shapes, paths, and the
/// relation of the objects above the nodes. `None` when a local tree is
/// deeper than [`MAX_DEPTH`].
fn build(nodes: &[u32], node_cpus: &[IdSet], protos: &[Proto]) -> Option<MachineTree> {
    let n = nodes.len();
    let index: HashMap<&IdSet, usize> = protos
        .iter()
        .enumerate()
        .map(|(i, p)| (&p.cpus, i))
        .collect();
    // Each vertex's parent: the smallest other vertex holding it.
    let mut order: Vec<usize> = (0..protos.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(protos[i].cpus.len()));
    let mut chain_of: HashMap<u32, Vec<usize>> = HashMap::new();
    for &i in &order {
        for c in protos[i].cpus.iter() {
            chain_of.entry(c).or_default().push(i);
        }
    }
    // chain_of[c]: vertices holding c, largest first. CPUs of no node
    // (none from hwloc) get no place: the space refuses them as sweep CPUs.
    let mut shapes_of: HashMap<(Vec<String>, Vec<u16>), u16> = HashMap::new();
    let mut locals: Vec<Option<LocalTree>> = vec![None; n];
    let mut shapes: Vec<Option<u16>> = vec![None; n];
    let mut places: HashMap<u32, (usize, Path)> = HashMap::new();
    for a in 0..n {
        if node_cpus[a].is_empty() {
            continue;
        }
        let root = *index.get(&node_cpus[a])?;
        // The vertices inside the node, by protos index.
        let mut inside: Vec<usize> = order
            .iter()
            .copied()
            .filter(|&i| protos[i].cpus.is_subset(&node_cpus[a]))
            .collect();
        inside.sort_by_key(|&i| {
            (
                std::cmp::Reverse(protos[i].cpus.len()),
                protos[i].cpus.first(),
            )
        });
        let local: HashMap<usize, usize> =
            inside.iter().enumerate().map(|(k, &i)| (i, k)).collect();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); inside.len()];
        for (k, &i) in inside.iter().enumerate() {
            if i == root {
                continue;
            }
            let c = protos[i].cpus.first()?;
            let chain = &chain_of[&c];
            let pos = chain.iter().position(|&x| x == i)?;
            let parent = *chain.get(pos.checked_sub(1)?)?;
            children[local[&parent]].push(k);
        }
        // Shapes bottom-up (smaller sets first).
        let mut shape = vec![0u16; inside.len()];
        let mut sweep = vec![0usize; inside.len()];
        let mut cores = vec![false; inside.len()];
        for k in (0..inside.len()).rev() {
            let p = &protos[inside[k]];
            let mut kid_shapes: Vec<u16> = children[k].iter().map(|&c| shape[c]).collect();
            kid_shapes.sort_unstable();
            let next = shapes_of.len() as u16;
            shape[k] = *shapes_of
                .entry((p.labels.clone(), kid_shapes))
                .or_insert(next);
            sweep[k] = if children[k].is_empty() {
                usize::from(p.labels.iter().any(|l| l == "pu+"))
            } else {
                children[k].iter().map(|&c| sweep[c]).sum()
            };
            cores[k] =
                p.labels.iter().any(|l| l == "core") || children[k].iter().any(|&c| cores[c]);
        }
        if shapes_of.len() > u16::MAX as usize {
            return None;
        }
        let vertices: Vec<Vertex> = (0..inside.len())
            .map(|k| {
                let mut groups: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
                for &c in &children[k] {
                    groups.entry(shape[c]).or_default().push(c);
                }
                for kids in groups.values_mut() {
                    kids.sort_by_key(|&c| protos[inside[c]].cpus.first());
                }
                let p = &protos[inside[k]];
                Vertex {
                    groups: groups.into_iter().collect(),
                    cpu: (children[k].is_empty() && p.cpus.len() == 1)
                        .then(|| p.cpus.first())
                        .flatten(),
                    sweep: sweep[k],
                    holds_cores: cores[k],
                }
            })
            .collect();
        let tree = LocalTree { vertices };
        leaf_places(&tree, a, &mut places)?;
        shapes[a] = Some(shape[0]);
        locals[a] = Some(tree);
    }
    let (upper, upper_sets) = above_nodes(node_cpus, protos);
    Some(MachineTree {
        nodes: nodes.to_vec(),
        locals,
        shapes,
        places,
        upper,
        upper_sets,
        laminar: true,
    })
}

/// Every leaf's path in node `a`'s local tree, into `places`; `None` when
/// a path is deeper than [`MAX_DEPTH`].
fn leaf_places(tree: &LocalTree, a: usize, places: &mut HashMap<u32, (usize, Path)>) -> Option<()> {
    let mut stack: Vec<(usize, Path)> = vec![(0, Path::EMPTY)];
    while let Some((v, path)) = stack.pop() {
        let vx = &tree.vertices[v];
        if let Some(cpu) = vx.cpu {
            places.insert(cpu, (a, path));
            continue;
        }
        for (s, kids) in &vx.groups {
            for (j, &c) in kids.iter().enumerate() {
                if path.len as usize >= MAX_DEPTH {
                    return None;
                }
                let mut p = path;
                p.push((*s, j as u16));
                stack.push((c, p));
            }
        }
    }
    Some(())
}

/// The objects above the nodes: vertices holding CPUs of two nodes or
/// more, each a union of whole nodes (laminar). Returns, for every pair of
/// nodes, the id of the chain of such objects holding both, and each
/// object's label id with the nodes it holds.
#[allow(clippy::type_complexity)]
fn above_nodes(node_cpus: &[IdSet], protos: &[Proto]) -> (Vec<Vec<u32>>, Vec<(u32, Vec<usize>)>) {
    let n = node_cpus.len();
    let mut label_ids: HashMap<Vec<String>, u32> = HashMap::new();
    let mut above: Vec<(usize, u32, Vec<usize>)> = Vec::new();
    for (i, p) in protos.iter().enumerate() {
        let holds: Vec<usize> = (0..n)
            .filter(|&a| !node_cpus[a].is_empty() && node_cpus[a].is_subset(&p.cpus))
            .collect();
        let inside_one = (0..n).any(|a| p.cpus.is_subset(&node_cpus[a]));
        if inside_one || holds.is_empty() {
            continue;
        }
        let next = label_ids.len() as u32 + 1;
        let id = *label_ids.entry(p.labels.clone()).or_insert(next);
        above.push((i, id, holds));
    }
    above.sort_by_key(|x| protos[x.0].cpus.len());
    let mut chain_ids: HashMap<Vec<u32>, u32> = HashMap::new();
    chain_ids.insert(Vec::new(), 0);
    let upper: Vec<Vec<u32>> = (0..n)
        .map(|a| {
            (0..n)
                .map(|b| {
                    let chain: Vec<u32> = above
                        .iter()
                        .filter(|x| x.2.contains(&a) && x.2.contains(&b))
                        .map(|x| x.1)
                        .collect();
                    let next = chain_ids.len() as u32;
                    *chain_ids.entry(chain).or_insert(next)
                })
                .collect()
        })
        .collect();
    (upper, above.into_iter().map(|x| (x.1, x.2)).collect())
}

/// The slot paths below vertex `v` at `depth` (see
/// [`MachineTree::slot_choices`]); `used` are the paths through `cur`.
fn slots_below(
    t: &LocalTree,
    v: usize,
    depth: usize,
    cur: &mut Path,
    used: &[&Path],
    mult: u64,
    out: &mut Vec<(Path, u64)>,
) {
    let vx = &t.vertices[v];
    if vx.cpu.is_some() {
        out.push((*cur, mult));
        return;
    }
    for (shape, kids) in &vx.groups {
        if t.vertices[kids[0]].sweep == 0 {
            continue;
        }
        let taken = used
            .iter()
            .filter(|p| p.steps()[depth].0 == *shape)
            .map(|p| p.steps()[depth].1 + 1)
            .max()
            .unwrap_or(0);
        for j in 0..=taken {
            if j as usize >= kids.len() {
                break;
            }
            let m = if j == taken {
                (kids.len() - taken as usize) as u64
            } else {
                1
            };
            let below: Vec<&Path> = used
                .iter()
                .copied()
                .filter(|p| p.steps()[depth] == (*shape, j))
                .collect();
            cur.push((*shape, j));
            slots_below(
                t,
                kids[j as usize],
                depth + 1,
                cur,
                &below,
                mult.saturating_mul(m),
                out,
            );
            cur.pop();
        }
    }
}

/// `f[k]`: ways to put k labelled threads on the sweep PUs below `v` up to
/// its automorphisms. A leaf holds any number of threads (they share the
/// PU) if it is a sweep PU, none otherwise; a vertex combines its shape
/// groups as labelled products, and a group of `c` alike children holds
/// its threads as a set partition into at most `c` blocks, one block per
/// child used.
fn forms(t: &LocalTree, v: usize, threads: usize, binom: &[Vec<u128>]) -> Vec<u128> {
    let vx = &t.vertices[v];
    if vx.cpu.is_some() {
        return (0..=threads)
            .map(|k| u128::from(k == 0 || vx.sweep > 0))
            .collect();
    }
    let mut ways = vec![0u128; threads + 1];
    ways[0] = 1;
    for (_, kids) in &vx.groups {
        if t.vertices[kids[0]].sweep == 0 {
            continue;
        }
        let child = forms(t, kids[0], threads, binom);
        // blocks[k][j]: k threads in exactly j used children.
        let c = kids.len();
        let mut blocks = vec![vec![0u128; threads + 1]; threads + 1];
        blocks[0][0] = 1;
        for k in 1..=threads {
            for j in 1..=k.min(c) {
                let mut sum = 0u128;
                for b in 1..=k {
                    let term = binom[k - 1][b - 1]
                        .saturating_mul(child[b])
                        .saturating_mul(blocks[k - b][j - 1]);
                    sum = sum.saturating_add(term);
                }
                blocks[k][j] = sum;
            }
        }
        let group: Vec<u128> = blocks
            .iter()
            .map(|row| row.iter().copied().fold(0u128, u128::saturating_add))
            .collect();
        ways = convolve(&ways, &group, binom);
    }
    ways
}

/// The labelled product of two thread-count series: choose which threads
/// go to each side.
fn convolve(a: &[u128], b: &[u128], binom: &[Vec<u128>]) -> Vec<u128> {
    (0..a.len())
        .map(|k| {
            (0..=k).fold(0u128, |sum, i| {
                sum.saturating_add(binom[k][i].saturating_mul(a[i]).saturating_mul(b[k - i]))
            })
        })
        .collect()
}
