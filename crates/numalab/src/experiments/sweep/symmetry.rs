//! The node symmetry of a sweep, handled without listing the group.
//!
//! The symmetries are the permutations of the involved nodes that keep every
//! distance and each node's signature (CPU structure, memory kind and role).
//! A flat 8-node distance table has 8! = 40320 of them and a 64-node one
//! 64! (about 10^89), so the group is never listed. Everything the sweep
//! needs comes from *stabilizer orbits*: for a set of fixed nodes, which
//! other nodes an automorphism fixing them can exchange. Each orbit is found
//! by search: colour refinement (with the fixed nodes individualized) gives
//! cells no automorphism can leave, and a backtracking search then proves
//! for members of a cell whether an automorphism maps one to the other; the
//! automorphisms it finds are kept as generators, so most members join an
//! orbit without a search of their own. The group's order is the product
//! of the orbit sizes along a stabilizer chain.
//!
//! A search that runs past its step budget gives up; the symmetry then
//! reports it ([`NodeSymmetry::gave_up`]) and the caller folds core swaps
//! only, which is still exact.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

/// Steps (candidate checks) one automorphism search may take before it
/// gives up. Distance tables of real machines resolve in a few thousand.
const SEARCH_STEPS: u64 = 2_000_000;

/// The orbits of the automorphisms fixing a set of nodes (indexes into the
/// symmetry's node list), with a way back from every node to its orbit's
/// smallest member.
#[derive(Debug)]
pub(super) struct Orbits {
    /// Node -> the smallest node of its orbit.
    rep: Vec<usize>,
    /// Node -> the size of its orbit.
    size: Vec<usize>,
    /// Automorphisms found (each fixes the set), as images of every node.
    gens: Vec<Vec<usize>>,
    /// Node -> (generator, applied inversely?, parent) on the path from the
    /// orbit's smallest member: `node = gen(parent)` (or `gen⁻¹(parent)`).
    tree: Vec<Option<(usize, bool, usize)>>,
}

impl Orbits {
    fn trivial(n: usize) -> Self {
        Orbits {
            rep: (0..n).collect(),
            size: vec![1; n],
            gens: Vec::new(),
            tree: vec![None; n],
        }
    }

    /// The smallest node of `x`'s orbit.
    pub(super) fn rep(&self, x: usize) -> usize {
        self.rep[x]
    }

    /// The size of `x`'s orbit.
    pub(super) fn size(&self, x: usize) -> usize {
        self.size[x]
    }

    /// Maps `seq` by an automorphism (of those fixing the set) that takes
    /// `x` to its orbit's smallest member.
    fn carry_to_rep(&self, mut x: usize, seq: &mut [usize]) {
        while let Some((g, inverse, parent)) = self.tree[x] {
            // x = g(parent) (or g⁻¹(parent)): undo that step on everything.
            let gen = &self.gens[g];
            for s in seq.iter_mut() {
                *s = if inverse {
                    gen[*s]
                } else {
                    gen.iter().position(|&y| y == *s).expect("permutation")
                };
            }
            x = parent;
        }
    }

    /// Builds the orbits of the group the generators span: connected
    /// components of their graph, each with a breadth-first tree from its
    /// smallest node.
    fn from_generators(n: usize, gens: Vec<Vec<usize>>) -> Self {
        let mut rep = vec![usize::MAX; n];
        let mut tree = vec![None; n];
        let mut size = vec![0; n];
        for start in 0..n {
            if rep[start] != usize::MAX {
                continue;
            }
            rep[start] = start;
            let mut members = vec![start];
            let mut i = 0;
            while i < members.len() {
                let x = members[i];
                i += 1;
                for (g, gen) in gens.iter().enumerate() {
                    let forward = gen[x];
                    let back = gen.iter().position(|&y| y == x).expect("permutation");
                    for (y, inverse) in [(forward, false), (back, true)] {
                        if rep[y] == usize::MAX {
                            rep[y] = start;
                            tree[y] = Some((g, inverse, x));
                            members.push(y);
                        }
                    }
                }
            }
            for &x in &members {
                size[x] = members.len();
            }
        }
        Orbits {
            rep,
            size,
            gens,
            tree,
        }
    }
}

/// The order of a symmetry group, exactly, however large.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOrder {
    /// Base-10^9 limbs, least significant first.
    limbs: Vec<u64>,
}

impl GroupOrder {
    pub(super) fn one() -> Self {
        GroupOrder { limbs: vec![1] }
    }

    pub(super) fn times(&mut self, k: usize) {
        let mut carry = 0u64;
        for l in self.limbs.iter_mut() {
            let v = *l * k as u64 + carry;
            *l = v % 1_000_000_000;
            carry = v / 1_000_000_000;
        }
        while carry > 0 {
            self.limbs.push(carry % 1_000_000_000);
            carry /= 1_000_000_000;
        }
    }

    /// The order, saturating at `u128::MAX`.
    pub fn saturating(&self) -> u128 {
        self.limbs.iter().rev().fold(0u128, |acc, &l| {
            acc.saturating_mul(1_000_000_000).saturating_add(l as u128)
        })
    }
}

impl std::fmt::Display for GroupOrder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut it = self.limbs.iter().rev();
        if let Some(top) = it.next() {
            write!(f, "{top}")?;
        }
        for l in it {
            write!(f, "{l:09}")?;
        }
        Ok(())
    }
}

/// The automorphisms of a node set with distances and signatures.
#[derive(Debug)]
pub(super) struct NodeSymmetry {
    n: usize,
    /// `dist[i][j]`: distance from node i to node j (None: unknown).
    dist: Vec<Vec<Option<u64>>>,
    /// Signature class of every node (with its self-distance).
    base: Vec<u32>,
    /// No symmetry to look for (no distances), or a search gave up.
    trivial: Cell<bool>,
    gave_up: Cell<bool>,
    /// Labelled node sets every automorphism maps onto sets of the same
    /// label (members sorted).
    sets: Vec<(u32, Vec<usize>)>,
    /// `shared[i][j]`: an id of the labels of the sets holding both i and
    /// j. An automorphism keeps it, so the search checks it at every step
    /// instead of finding out only at the end that a map breaks a set
    /// (which made it exhaust millions of maps on a 64-node machine).
    shared: Vec<Vec<u32>>,
    /// Stabilizer orbits by sorted fixed set.
    orbits: RefCell<HashMap<Vec<usize>, Rc<Orbits>>>,
    /// Smallest images of node sequences.
    images: RefCell<HashMap<Vec<usize>, Vec<usize>>>,
    order: GroupOrder,
}

impl Clone for NodeSymmetry {
    fn clone(&self) -> Self {
        NodeSymmetry {
            n: self.n,
            dist: self.dist.clone(),
            base: self.base.clone(),
            trivial: self.trivial.clone(),
            gave_up: self.gave_up.clone(),
            sets: self.sets.clone(),
            shared: self.shared.clone(),
            orbits: RefCell::new(HashMap::new()),
            images: RefCell::new(HashMap::new()),
            order: self.order.clone(),
        }
    }
}

impl NodeSymmetry {
    /// The symmetry of `n` nodes with distances `dist` (None: no distance
    /// table, so only the identity is safe) and signatures `sig` (nodes
    /// with different signatures never exchange).
    pub(super) fn new(dist: Option<Vec<Vec<Option<u64>>>>, sig: &[String]) -> Self {
        Self::with_sets(dist, sig, Vec::new())
    }

    /// [`NodeSymmetry::new`] whose automorphisms also map every set of
    /// `sets` onto a set of the same label.
    pub(super) fn with_sets(
        dist: Option<Vec<Vec<Option<u64>>>>,
        sig: &[String],
        mut sets: Vec<(u32, Vec<usize>)>,
    ) -> Self {
        let n = sig.len();
        for s in sets.iter_mut() {
            s.1.sort_unstable();
        }
        sets.sort();
        sets.dedup();
        let trivial = dist.is_none();
        let dist = dist.unwrap_or_else(|| vec![vec![None; n]; n]);
        let keys: Vec<(&String, Option<u64>)> = (0..n).map(|i| (&sig[i], dist[i][i])).collect();
        let base = ids(&keys);
        let shared = shared_labels(n, &sets);
        let mut s = NodeSymmetry {
            n,
            dist,
            base,
            trivial: Cell::new(trivial),
            gave_up: Cell::new(false),
            sets,
            shared,
            orbits: RefCell::new(HashMap::new()),
            images: RefCell::new(HashMap::new()),
            order: GroupOrder::one(),
        };
        s.order = s.chain_order();
        s
    }

    /// The group's order along a stabilizer chain: fix the first node that
    /// still moves, multiply by its orbit's size, repeat.
    fn chain_order(&self) -> GroupOrder {
        let mut order = GroupOrder::one();
        let mut fixed: Vec<usize> = Vec::new();
        loop {
            let orb = self.orbits(&fixed);
            if self.gave_up.get() {
                return GroupOrder::one();
            }
            let Some(b) = (0..self.n).find(|&x| orb.size(x) > 1) else {
                return order;
            };
            order.times(orb.size(b));
            fixed.push(b);
            fixed.sort_unstable();
        }
    }

    /// The group's order (1 when a search gave up: folding then uses none).
    pub(super) fn order(&self) -> &GroupOrder {
        &self.order
    }

    /// Whether a search ran out of steps since the symmetry was built (the
    /// orbits handed out may then be too fine; fold with none instead).
    pub(super) fn gave_up(&self) -> bool {
        self.gave_up.get()
    }

    /// Drops every symmetry: folding then uses core swaps only.
    pub(super) fn make_trivial(&self) {
        self.trivial.set(true);
        self.orbits.borrow_mut().clear();
        self.images.borrow_mut().clear();
    }

    /// The orbits of the automorphisms fixing every node of `fixed`.
    pub(super) fn orbits(&self, fixed: &[usize]) -> Rc<Orbits> {
        let mut key = fixed.to_vec();
        key.sort_unstable();
        key.dedup();
        if let Some(o) = self.orbits.borrow().get(&key) {
            return o.clone();
        }
        let o = Rc::new(if self.trivial.get() {
            Orbits::trivial(self.n)
        } else {
            match self.search_orbits(&key) {
                Some(o) => o,
                None => {
                    self.gave_up.set(true);
                    Orbits::trivial(self.n)
                }
            }
        });
        self.orbits.borrow_mut().insert(key, o.clone());
        o
    }

    /// Orbits by search; None when a search gave up.
    fn search_orbits(&self, fixed: &[usize]) -> Option<Orbits> {
        let colour = self.refine(fixed);
        let mut cells: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (x, &c) in colour.iter().enumerate() {
            cells.entry(c).or_default().push(x);
        }
        let mut uf: Vec<usize> = (0..self.n).collect();
        let mut gens: Vec<Vec<usize>> = Vec::new();
        for cell in cells.values().filter(|c| c.len() > 1) {
            let mut reps: Vec<usize> = vec![cell[0]];
            for &x in &cell[1..] {
                let mut joined = false;
                for &r in &reps {
                    if find(&mut uf, r) == find(&mut uf, x) {
                        joined = true;
                        break;
                    }
                    if let Some(g) = self.search(&colour, fixed, r, x)? {
                        for (a, &b) in g.iter().enumerate() {
                            let (ra, rb) = (find(&mut uf, a), find(&mut uf, b));
                            uf[ra] = rb;
                        }
                        gens.push(g);
                        joined = true;
                        break;
                    }
                }
                if !joined {
                    reps.push(x);
                }
            }
        }
        Some(Orbits::from_generators(self.n, gens))
    }

    /// Colour refinement: the signature classes with `fixed` individualized,
    /// split until every node of a class sees the same multiset of
    /// (distance to, distance from, colour) over the others. No
    /// automorphism fixing `fixed` moves a node out of its class.
    fn refine(&self, fixed: &[usize]) -> Vec<u32> {
        let mut colour: Vec<u32> = self.base.clone();
        let top = colour.iter().copied().max().unwrap_or(0) + 1;
        for (k, &p) in fixed.iter().enumerate() {
            colour[p] = top + k as u32;
        }
        colour = ids(&colour);
        loop {
            let classes = count_distinct(&colour);
            let sigs: Vec<(u32, Vec<Seen>)> = (0..self.n)
                .map(|v| {
                    let mut seen: Vec<Seen> = (0..self.n)
                        .filter(|&u| u != v)
                        .map(|u| {
                            (
                                self.dist[v][u],
                                self.dist[u][v],
                                self.shared[v][u],
                                colour[u],
                            )
                        })
                        .collect();
                    seen.sort_unstable();
                    (colour[v], seen)
                })
                .collect();
            let next = ids(&sigs);
            if count_distinct(&next) == classes {
                return colour;
            }
            colour = next;
        }
    }

    /// An automorphism that fixes `fixed`, maps `r` to `x` and keeps
    /// `colour`: Some(Some(images)), Some(None) when none exists, None when
    /// the search ran out of steps.
    fn search(
        &self,
        colour: &[u32],
        fixed: &[usize],
        r: usize,
        x: usize,
    ) -> Option<Option<Vec<usize>>> {
        let mut class_size: HashMap<u32, usize> = HashMap::new();
        for &c in colour {
            *class_size.entry(c).or_default() += 1;
        }
        let mut order: Vec<usize> = fixed.to_vec();
        order.push(r);
        let mut rest: Vec<usize> = (0..self.n).filter(|v| !order.contains(v)).collect();
        // Small cells first: they admit the fewest candidates.
        rest.sort_by_key(|&v| (class_size[&colour[v]], v));
        order.extend(rest);
        let mut dfs = Dfs {
            sym: self,
            colour,
            order: &order,
            image: vec![usize::MAX; self.n],
            used: vec![false; self.n],
            steps: 0,
        };
        for &p in fixed {
            dfs.image[p] = p;
            dfs.used[p] = true;
        }
        if !dfs.fits(fixed.len(), x) {
            return Some(None);
        }
        dfs.image[r] = x;
        dfs.used[x] = true;
        match dfs.extend(fixed.len() + 1) {
            Err(()) => None,
            Ok(true) => Some(Some(dfs.image)),
            Ok(false) => Some(None),
        }
    }

    /// The smallest image of a node sequence under the group
    /// (lexicographically): the first node goes to its orbit's smallest
    /// member, the second to the smallest member of its orbit under what
    /// fixes the first, and so on.
    pub(super) fn min_image(&self, seq: &[usize]) -> Vec<usize> {
        if self.trivial.get() || self.order == GroupOrder::one() {
            return seq.to_vec();
        }
        if let Some(img) = self.images.borrow().get(seq) {
            return img.clone();
        }
        let mut cur = seq.to_vec();
        let mut fixed: Vec<usize> = Vec::new();
        for i in 0..cur.len() {
            let orb = self.orbits(&fixed);
            let x = cur[i];
            if orb.rep(x) != x {
                orb.carry_to_rep(x, &mut cur);
            }
            if !fixed.contains(&cur[i]) {
                fixed.push(cur[i]);
                fixed.sort_unstable();
            }
        }
        self.images.borrow_mut().insert(seq.to_vec(), cur.clone());
        cur
    }
}

impl NodeSymmetry {
    /// The image of `seq` under an automorphism that moves it, if one is
    /// at hand: a generator of the whole group's orbits, then of the
    /// stabilizers of its first nodes (which move the rest).
    pub(super) fn moved_image(&self, seq: &[usize]) -> Option<Vec<usize>> {
        if self.trivial.get() || self.order == GroupOrder::one() {
            return None;
        }
        let mut fixed: Vec<usize> = Vec::new();
        for i in 0..=seq.len() {
            let orb = self.orbits(&fixed);
            for g in &orb.gens {
                let img: Vec<usize> = seq.iter().map(|&x| g[x]).collect();
                if img != seq {
                    return Some(img);
                }
            }
            if let Some(&x) = seq.get(i) {
                if !fixed.contains(&x) {
                    fixed.push(x);
                    fixed.sort_unstable();
                }
            }
        }
        None
    }
}

/// What a node sees of another in colour refinement: the distance to it,
/// the distance from it, its colour.
type Seen = (Option<u64>, Option<u64>, u32, u32);

/// The depth-first search of one automorphism.
struct Dfs<'a> {
    sym: &'a NodeSymmetry,
    colour: &'a [u32],
    order: &'a [usize],
    image: Vec<usize>,
    used: Vec<bool>,
    steps: u64,
}

impl Dfs<'_> {
    /// Whether `order[pos]` may go to `w` given the nodes mapped before it.
    fn fits(&self, pos: usize, w: usize) -> bool {
        let v = self.order[pos];
        let d = &self.sym.dist;
        let s = &self.sym.shared;
        self.colour[v] == self.colour[w]
            && d[v][v] == d[w][w]
            && s[v][v] == s[w][w]
            && self.order[..pos].iter().all(|&u| {
                let iu = self.image[u];
                d[v][u] == d[w][iu] && d[u][v] == d[iu][w] && s[v][u] == s[w][iu]
            })
    }

    /// Whether the complete map keeps every labelled set.
    fn keeps_sets(&self) -> bool {
        let sets = &self.sym.sets;
        sets.iter().all(|(label, members)| {
            let mut img: Vec<usize> = members.iter().map(|&x| self.image[x]).collect();
            img.sort_unstable();
            sets.binary_search(&(*label, img)).is_ok()
        })
    }

    /// Maps `order[pos..]`; Err when out of steps.
    fn extend(&mut self, pos: usize) -> Result<bool, ()> {
        if pos == self.order.len() {
            return Ok(self.keeps_sets());
        }
        let v = self.order[pos];
        for w in 0..self.sym.n {
            if self.used[w] || self.colour[w] != self.colour[v] {
                continue;
            }
            self.steps += 1;
            if self.steps > SEARCH_STEPS {
                return Err(());
            }
            if !self.fits(pos, w) {
                continue;
            }
            self.image[v] = w;
            self.used[w] = true;
            if self.extend(pos + 1)? {
                return Ok(true);
            }
            self.used[w] = false;
            self.image[v] = usize::MAX;
        }
        Ok(false)
    }
}

/// Ids of the sorted labels of the sets holding both nodes, per pair.
fn shared_labels(n: usize, sets: &[(u32, Vec<usize>)]) -> Vec<Vec<u32>> {
    let mut labels: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); n]; n];
    for (label, members) in sets {
        for &a in members {
            for &b in members {
                labels[a][b].push(*label);
            }
        }
    }
    let flat: Vec<Vec<u32>> = labels
        .into_iter()
        .flatten()
        .map(|mut l| {
            l.sort_unstable();
            l
        })
        .collect();
    ids(&flat).chunks(n.max(1)).map(|c| c.to_vec()).collect()
}

fn find(uf: &mut [usize], mut x: usize) -> usize {
    while uf[x] != x {
        uf[x] = uf[uf[x]];
        x = uf[x];
    }
    x
}

/// Dense ids for values, in the values' order (equal values, equal ids).
fn ids<T: Ord>(values: &[T]) -> Vec<u32> {
    let sorted: BTreeMap<&T, u32> = {
        let mut m: BTreeMap<&T, u32> = values.iter().map(|v| (v, 0)).collect();
        for (i, v) in m.values_mut().enumerate() {
            *v = i as u32;
        }
        m
    };
    values.iter().map(|v| sorted[v]).collect()
}

fn count_distinct(v: &[u32]) -> usize {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.dedup();
    s.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(n: usize) -> NodeSymmetry {
        let d = (0..n)
            .map(|i| (0..n).map(|j| Some(if i == j { 10 } else { 20 })).collect())
            .collect();
        NodeSymmetry::new(Some(d), &vec![String::new(); n])
    }

    #[test]
    fn a_flat_table_has_the_full_symmetric_group() {
        assert_eq!(flat(8).order().to_string(), "40320");
        assert_eq!(
            flat(30).order().to_string(),
            "265252859812191058636308480000000"
        );
        // 64! does not fit in u128: exact text, saturated number.
        let big = flat(64);
        assert_eq!(big.order().to_string().len(), 90);
        assert!(big
            .order()
            .to_string()
            .starts_with("126886932185884164103433389335161"));
        assert_eq!(big.order().saturating(), u128::MAX);
        assert!(!big.gave_up());
    }

    #[test]
    fn a_ring_has_its_dihedral_group_and_min_images() {
        // 6 nodes in a ring: distance 10 + 10 x (ring steps).
        let n = 6;
        let d: Vec<Vec<Option<u64>>> = (0..n)
            .map(|i: usize| {
                (0..n)
                    .map(|j: usize| {
                        let k = (i as i64 - j as i64).rem_euclid(n as i64) as u64;
                        Some(10 + 10 * k.min(n as u64 - k))
                    })
                    .collect()
            })
            .collect();
        let s = NodeSymmetry::new(Some(d), &vec![String::new(); n]);
        assert_eq!(s.order().to_string(), "12");
        // (3, 4): a neighbour pair goes to (0, 1); (3, 5): two steps, (0, 2).
        assert_eq!(s.min_image(&[3, 4]), vec![0, 1]);
        assert_eq!(s.min_image(&[3, 5]), vec![0, 2]);
        assert_eq!(s.min_image(&[5, 2, 4]), vec![0, 3, 1]);
        // Fixing 0, the orbits are {1, 5}, {2, 4}, {3}.
        let o = s.orbits(&[0]);
        assert_eq!((o.rep(5), o.size(5)), (1, 2));
        assert_eq!((o.rep(4), o.size(4)), (2, 2));
        assert_eq!((o.rep(3), o.size(3)), (3, 1));
        // A twin of (0, 1): another neighbour pair.
        let twin = s.moved_image(&[0, 1]).unwrap();
        assert_ne!(twin, vec![0, 1]);
        assert_eq!(s.min_image(&twin), vec![0, 1]);
    }

    #[test]
    fn signatures_and_asymmetric_distances_break_symmetry() {
        let mut d = vec![vec![Some(20); 4]; 4];
        for (i, row) in d.iter_mut().enumerate() {
            row[i] = Some(10);
        }
        let sig = vec![
            "cpu".to_string(),
            "cpu".into(),
            "cpu".into(),
            "cpuless".into(),
        ];
        assert_eq!(
            NodeSymmetry::new(Some(d.clone()), &sig).order().to_string(),
            "6"
        );
        // One direction of one link slower: 0 -> 1 differs from 1 -> 0.
        d[0][1] = Some(21);
        // Nodes 0 and 1 are now told apart; 2 and 3 still exchange.
        let s = NodeSymmetry::new(Some(d), &vec![String::new(); 4]);
        assert_eq!(s.order().to_string(), "2");
        assert_eq!(s.min_image(&[3, 2]), vec![2, 3]);
        assert_eq!(s.min_image(&[1, 0]), vec![1, 0]);
        // No table: the identity only.
        let s = NodeSymmetry::new(None, &vec![String::new(); 4]);
        assert_eq!(s.order().to_string(), "1");
    }
}
