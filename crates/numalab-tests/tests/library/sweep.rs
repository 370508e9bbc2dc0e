//! The placement sweep's enumeration and symmetry folding, over real
//! machines' topologies (no measurement: these run on any host).

use numalab::experiments::sweep::{coverage_order, Access, PlannedCase, SweepSpace, TwinMove};
use numalab::{IdSet, Machine};
use std::collections::BTreeMap;
use std::path::PathBuf;

fn load(name: &str) -> Machine {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name);
    Machine::from_xml_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn set(text: &str) -> IdSet {
    IdSet::parse_list(text).unwrap()
}

const RW: &[Access] = &[Access::Read, Access::Write];

fn sizes_by_key(cases: &[PlannedCase]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for c in cases {
        *out.entry(c.class_key.clone()).or_insert(0) += c.class_size;
    }
    out
}

/// Folding must give exactly the classes (and class sizes) that grouping
/// the full enumeration by canonical form gives.
fn folding_matches_full(space: &SweepSpace, threads: usize) -> usize {
    let folded = space.folded(threads);
    let full = space.full(threads, 1 << 22).unwrap();
    assert_eq!(full.len() as u128, space.total_cases(threads));
    let f = sizes_by_key(&folded);
    assert_eq!(f.len(), folded.len(), "one representative per class");
    assert_eq!(f, sizes_by_key(&full));
    assert_eq!(
        folded.iter().map(|c| c.class_size as u128).sum::<u128>(),
        space.total_cases(threads)
    );
    folded.len()
}

#[test]
fn quartet_two_threads_is_the_classic_4096_and_folds_exactly() {
    let m = load("qemu-quartet-4n2c-ring.xml");
    let space = SweepSpace::new(&m, &set("0-7"), &set("0-3"), RW).unwrap();
    assert_eq!(space.total_cases(2), 4096);
    // The symmetries of a 4-node ring: 4 rotations x 2 reflections.
    assert_eq!(space.automorphism_count(), 8);
    let classes = folding_matches_full(&space, 2);
    assert!(classes < 4096 / 8, "{classes} classes");
    // Every full case has a well-formed label and the ring's hop count.
    for c in space.full(2, 1 << 20).unwrap() {
        for t in &c.threads {
            assert_eq!(t.node, t.cpu / 2);
            assert_eq!(t.core, t.cpu % 2);
            let want = if t.node == t.mem {
                0
            } else if t.node + t.mem == 3 {
                2
            } else {
                1
            };
            assert_eq!(t.hops, Some(want), "{}", t.label());
        }
    }
}

/// Two-thread classes of a machine of `nodes` nodes with 2 CPUs each (CPU
/// `2n + k` is core k of node n), counted by brute force, independently of
/// the folding code: union-find over every case joined to its images under
/// generators of the group: the node permutations `node_gens`, each node's
/// core swap when `core_swap`, and the thread exchange. Returns the class
/// sizes, sorted.
fn brute_force_class_sizes(nodes: u32, node_gens: &[Vec<u32>], core_swap: bool) -> Vec<u64> {
    let per = (nodes * 2 * 2 * nodes) as usize; // CPU x access x memory node
    let thread = |cpu: u32, a: u32, mem: u32| ((cpu * 2 + a) * nodes + mem) as usize;
    let parts = |t: usize| {
        let t = t as u32;
        (t / (2 * nodes), (t / nodes) % 2, t % nodes)
    };
    let mut uf: Vec<usize> = (0..per * per).collect();
    fn find(uf: &mut [usize], mut x: usize) -> usize {
        while uf[x] != x {
            uf[x] = uf[uf[x]];
            x = uf[x];
        }
        x
    }
    for case in 0..per * per {
        let (t0, t1) = (case / per, case % per);
        let mut images = vec![t1 * per + t0];
        for p in node_gens {
            let map = |t: usize| {
                let (cpu, a, mem) = parts(t);
                thread(p[(cpu / 2) as usize] * 2 + cpu % 2, a, p[mem as usize])
            };
            images.push(map(t0) * per + map(t1));
        }
        if core_swap {
            for node in 0..nodes {
                let swap = |t: usize| {
                    let (cpu, a, mem) = parts(t);
                    thread(if cpu / 2 == node { cpu ^ 1 } else { cpu }, a, mem)
                };
                images.push(swap(t0) * per + swap(t1));
            }
        }
        for img in images {
            let (a, b) = (find(&mut uf, case), find(&mut uf, img));
            uf[a] = b;
        }
    }
    let mut sizes: BTreeMap<usize, u64> = BTreeMap::new();
    for x in 0..per * per {
        *sizes.entry(find(&mut uf, x)).or_default() += 1;
    }
    let mut v: Vec<u64> = sizes.into_values().collect();
    v.sort();
    v
}

fn folded_class_sizes(space: &SweepSpace) -> Vec<u64> {
    let mut v: Vec<u64> = space.folded(2).iter().map(|c| c.class_size).collect();
    v.sort();
    v
}

#[test]
fn quartet_two_threads_fold_into_108_classes_counted_by_brute_force() {
    // The ring is 0-1-3-2-0 (0 and 3, 1 and 2 are two hops apart): a
    // rotation 0->1->3->2->0 and a reflection fixing 0 and 3.
    let gens = [vec![1, 3, 0, 2], vec![0, 2, 1, 3]];
    let sizes = brute_force_class_sizes(4, &gens, true);
    assert_eq!(sizes.len(), 108);
    assert_eq!(sizes.iter().sum::<u64>(), 4096);
    let m = load("qemu-quartet-4n2c-ring.xml");
    let space = SweepSpace::new(&m, &set("0-7"), &set("0-3"), RW).unwrap();
    assert_eq!(folded_class_sizes(&space), sizes);
}

#[test]
fn large_symmetry_groups_are_counted_exactly_without_listing_them() {
    // 8 nodes, flat distance table: 8! node symmetries, once capped at 5000.
    let m = load("16amd64-8n2c.xml");
    let space = SweepSpace::new(&m, &m.allowed_cpus, &m.memory_nodes(), RW).unwrap();
    assert_eq!(space.symmetry_order().to_string(), "40320");
    // With the cores: 8! x 2^8 (each node's two cores, each with its own
    // L1 and 1 MiB L2, are alike subtrees of the node).
    assert_eq!(space.machine_symmetry_order().to_string(), "10321920");
    // One thread: local or remote, read or write (16 CPUs x 8 nodes x 2
    // cases): the core does not matter, its private L2 is like the other's.
    let one = space.folded(1);
    assert_eq!(one.len(), 4);
    assert_eq!(one.iter().map(|c| c.class_size).sum::<u64>(), 256);
    folding_matches_full(&space, 2);
    // Brute force: S8 is generated by a transposition and an 8-cycle, and
    // each node's cores swap: 50 classes (134 with node symmetry alone,
    // when a private last-level cache kept the cores apart).
    let gens = [vec![1, 0, 2, 3, 4, 5, 6, 7], vec![1, 2, 3, 4, 5, 6, 7, 0]];
    let sizes = brute_force_class_sizes(8, &gens, true);
    assert_eq!(sizes.len(), 50);
    assert_eq!(sizes.iter().sum::<u64>(), 65536);
    assert_eq!(brute_force_class_sizes(8, &gens, false).len(), 134);
    assert_eq!(folded_class_sizes(&space), sizes);
}

/// The Quartet as the AMD study's dual-core Opterons were (a private L2
/// per core, no shared cache) and with one L2 shared by both cores of a
/// node: either way the cores of a node are alike, so 108 classes.
#[test]
fn quartet_cores_are_alike_with_private_or_shared_l2() {
    let gens = [vec![1, 3, 0, 2], vec![0, 2, 1, 3]];
    let sizes = brute_force_class_sizes(4, &gens, true);
    assert_eq!(sizes.len(), 108);
    let m = load("qemu-quartet-4n2c-ring.xml");
    // Private L2: drop the shared L3.
    let mut private = m.clone();
    private.caches.retain(|c| c.level < 3);
    assert!(private
        .caches
        .iter()
        .filter(|c| c.level == 2)
        .all(|c| c.cpus.len() == 1));
    // Shared L2: one per node instead of one per core, no L3.
    let mut shared = private.clone();
    let l2 = shared.caches.iter().find(|c| c.level == 2).unwrap().clone();
    shared.caches.retain(|c| c.level < 2);
    for n in 0..4u32 {
        let mut c = l2.clone();
        c.logical_index = n;
        c.cpus = set(&format!("{}-{}", 2 * n, 2 * n + 1));
        shared.caches.push(c);
    }
    for m in [&m, &private, &shared] {
        let space = SweepSpace::new(m, &set("0-7"), &set("0-3"), RW).unwrap();
        assert_eq!(space.machine_symmetry_order().to_string(), "128");
        assert_eq!(folded_class_sizes(&space), sizes);
        folding_matches_full(&space, 2);
    }
}

/// Two readers of node 0's memory on node 0 of the 6200-series Opteron
/// (cores in pairs sharing an L2 and an L1i, four pairs under the node's
/// L3): the same PU, the two cores of one pair, or cores of two pairs;
/// counted here from the machine model's L2s.
#[test]
fn cores_sharing_an_l2_inside_a_larger_l3_are_their_own_class() {
    let m = load("64amd64-4s2n4ca2co.xml");
    let node0 = m.node(0).unwrap().cpus.clone();
    let cpus: Vec<u32> = node0.iter().collect();
    let same_l2 = |a: u32, b: u32| {
        m.caches
            .iter()
            .any(|c| c.level == 2 && c.cpus.contains(a) && c.cpus.contains(b))
    };
    let (mut same_pu, mut pair, mut apart) = (0u64, 0u64, 0u64);
    for &a in &cpus {
        for &b in &cpus {
            if a == b {
                same_pu += 1;
            } else if same_l2(a, b) {
                pair += 1;
            } else {
                apart += 1;
            }
        }
    }
    assert_eq!((same_pu, pair, apart), (8, 8, 48));
    let space = SweepSpace::new(&m, &node0, &set("0"), &[Access::Read]).unwrap();
    let mut sizes: Vec<u64> = space.folded(2).iter().map(|c| c.class_size).collect();
    sizes.sort();
    assert_eq!(sizes, vec![same_pu, pair, apart]);
    // On the whole machine the same three classes hold both readers on
    // node 0 reading node 0 (no automorphism moves node 0: node 5 has half
    // the memory of the others, which breaks the distance table's symmetry).
    let space = SweepSpace::new(&m, &m.allowed_cpus, &m.memory_nodes(), &[Access::Read]).unwrap();
    assert_eq!(space.symmetry_order().to_string(), "1");
    let mut local: Vec<u64> = space
        .folded(2)
        .iter()
        .filter(|c| c.threads.iter().all(|t| t.node == 0 && t.mem == 0))
        .map(|c| c.class_size)
        .collect();
    local.sort();
    assert_eq!(local, vec![8, 8, 48]);
}

/// A twin is another case of the same class: by a node symmetry when one
/// moves the case, else by a core swap.
#[test]
fn twins_are_other_members_of_their_class() {
    let m = load("qemu-quartet-4n2c-ring.xml");
    let space = SweepSpace::new(&m, &set("0-7"), &set("0-3"), RW).unwrap();
    let mut moves = BTreeMap::new();
    for c in space.folded(2) {
        let Some((twin, moved)) = space.twin(&c) else {
            assert_eq!(c.class_size, 1, "{}", c.label());
            continue;
        };
        assert_ne!(twin.label(), c.label());
        assert_eq!(
            space.class_of(&twin.threads).unwrap(),
            c.class_key,
            "{}",
            c.label()
        );
        assert_eq!(space.class_of(&c.threads).unwrap(), c.class_key);
        *moves.entry(moved).or_insert(0) += 1;
    }
    // On a ring every case's nodes move under some rotation.
    assert_eq!(moves.len(), 1, "{moves:?}");
    assert_eq!(moves[&TwinMove::NodeSymmetry], 108);
    // Without distances only core swaps are left: 0.0.r.0 has twin 0.1.r.0.
    let mut m = m;
    m.distances = None;
    let space = SweepSpace::new(&m, &set("0-7"), &set("0-3"), RW).unwrap();
    let one = space.folded(1);
    let (twin, moved) = space.twin(&one[0]).unwrap();
    assert_eq!(
        (one[0].label(), twin.label()),
        ("0.0.r.0".into(), "0.1.r.0".into())
    );
    assert_eq!(moved, TwinMove::CoreSwap);
}

#[test]
fn quartet_one_thread_classes_are_the_hop_counts() {
    let m = load("qemu-quartet-4n2c-ring.xml");
    let space = SweepSpace::new(&m, &set("0-7"), &set("0-3"), RW).unwrap();
    let folded = space.folded(1);
    let mut got: Vec<(String, u64)> = folded
        .iter()
        .map(|c| (c.hop_class(), c.class_size))
        .collect();
    got.sort();
    // 8 CPUs x (1 local, 2 one-hop, 1 two-hop nodes), per access.
    assert_eq!(
        got,
        vec![
            ("r0".to_string(), 8),
            ("r1".to_string(), 16),
            ("r2".to_string(), 8),
            ("w0".to_string(), 8),
            ("w1".to_string(), 16),
            ("w2".to_string(), 8),
        ]
    );
    let rep = folded.iter().find(|c| c.hop_class() == "w1").unwrap();
    assert_eq!(rep.label(), "0.0.w.1");
}

#[test]
fn the_cpuless_node_is_a_target_but_never_swapped_with_a_cpu_node() {
    let m = load("qemu-ring4-cpuless-hmat.xml");
    let space = SweepSpace::new(&m, &set("0-3"), &set("0-4"), &[Access::Read]).unwrap();
    assert_eq!(space.total_cases(1), 20);
    folding_matches_full(&space, 1);
    folding_matches_full(&space, 2);
    let folded = space.folded(1);
    // Node 4 hangs off node 0 only (HMAT initiator), so no rotation fixes it:
    // every automorphism keeps node 4 where it is.
    let to4: u64 = folded
        .iter()
        .filter(|c| c.threads[0].mem == 4)
        .map(|c| c.class_size)
        .sum();
    assert_eq!(to4, 4);
}

#[test]
fn eight_nodes_two_cores_fold_exactly() {
    let m = load("16amd64-8n2c.xml");
    let cpus = m.allowed_cpus.clone();
    let nodes = m.node_ids();
    let space = SweepSpace::new(&m, &cpus, &nodes, RW).unwrap();
    assert_eq!(space.total_cases(1), 16 * 8 * 2);
    folding_matches_full(&space, 1);
    folding_matches_full(&space, 2);
}

#[test]
fn smt_machines_fold_without_enumerating_everything() {
    // 24 nodes x 8 cores x 2 threads: (384 x 24 x 2)^2 = 339 million cases.
    let m = load("192em64t-24n8c2t.xml");
    let space = SweepSpace::new(&m, &m.allowed_cpus, &m.node_ids(), RW).unwrap();
    let total = space.total_cases(2);
    assert_eq!(total, (384u128 * 24 * 2).pow(2));
    let t = std::time::Instant::now();
    let folded = space.folded(2);
    assert_eq!(
        folded.iter().map(|c| c.class_size as u128).sum::<u128>(),
        total
    );
    assert!(t.elapsed().as_secs() < 60, "{:?}", t.elapsed());
    // SMT siblings are their own kind of case: same core, different PU.
    let cpus: Vec<u32> = folded[0].threads.iter().map(|t| t.cpu).collect();
    assert_eq!(cpus.len(), 2);
    // And a one-thread sweep of one node's CPUs (8 cores x 2 PUs) folds them
    // into one class.
    let node0 = m.node(0).unwrap().cpus.clone();
    assert_eq!(node0.len(), 16);
    let space = SweepSpace::new(&m, &node0, &set("0"), &[Access::Read]).unwrap();
    let f = space.folded(1);
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].class_size, 16);
    // Two threads there: same PU, SMT siblings, or two cores.
    let mut f: Vec<u64> = space.folded(2).iter().map(|c| c.class_size).collect();
    f.sort();
    assert_eq!(f, vec![16, 16, 16 * 14]);
}

#[test]
fn without_distances_no_node_symmetry_is_assumed() {
    let mut m = load("qemu-quartet-4n2c-ring.xml");
    m.distances = None;
    let space = SweepSpace::new(&m, &set("0-7"), &set("0-3"), RW).unwrap();
    assert_eq!(space.automorphism_count(), 1);
    folding_matches_full(&space, 1);
    // Only core swaps fold now: 2 cores per node.
    assert_eq!(space.folded(1).len(), 4 * 4 * 2);
}

#[test]
fn coverage_order_visits_every_hop_class_first() {
    let m = load("qemu-quartet-4n2c-ring.xml");
    let space = SweepSpace::new(&m, &set("0-7"), &set("0-3"), RW).unwrap();
    let cases = space.folded(2);
    let order = coverage_order(&cases);
    assert_eq!(order.len(), cases.len());
    let mut seen = std::collections::BTreeSet::new();
    let classes: std::collections::BTreeSet<String> = cases.iter().map(|c| c.hop_class()).collect();
    for &i in order.iter().take(classes.len()) {
        seen.insert(cases[i].hop_class());
    }
    assert_eq!(seen, classes);
}

#[test]
fn bad_spaces_are_refused_with_the_valid_choices() {
    let m = load("qemu-ring4-cpuless-hmat.xml");
    let e = SweepSpace::new(&m, &set("0-3"), &set("7"), RW).unwrap_err();
    assert!(e.contains("memory node 7 does not exist"), "{e}");
    assert!(e.contains("0-4"), "{e}");
    let e = SweepSpace::new(&m, &IdSet::new(), &set("0"), RW).unwrap_err();
    assert!(e.contains("no CPUs"), "{e}");
    let space = SweepSpace::new(&m, &set("0-3"), &set("0-4"), RW).unwrap();
    let e = space.full(3, 1000).unwrap_err();
    assert!(e.contains("more than the limit of 1000"), "{e}");
}

// ---------------------------------------------------------------------
// The machine tree's automorphisms, by brute force.
//
// Independent of the folding code: automorphisms are found by plain
// backtracking over the machine model's objects (packages, caches of every
// level and kind, cores, PUs, nodes with their CPUs, distances, memory
// kinds, sizes, tiers and attributes): for every point (node, then CPU) in
// turn and every possible image of it, the first automorphism that fixes
// the points before it and maps it there. Those form a strong generating
// set: the group's order is the product of the images found per point, and
// cases are grouped by union-find over the generators and thread exchange.

/// The whole machine's automorphisms that keep the sweep's CPUs and memory
/// nodes, as generators: CPUs are the nodes' CPUs in order (`cpus`), nodes
/// the machine's in order.
struct Group {
    cpus: Vec<u32>,
    nodes: Vec<u32>,
    /// (CPU image, node image) per generator.
    gens: Vec<(Vec<usize>, Vec<usize>)>,
    /// The group's order, when it fits.
    order: Option<u128>,
}

fn log2_round(b: u64) -> i64 {
    if b == 0 {
        i64::MIN
    } else {
        (b as f64).log2().round() as i64
    }
}

/// What a CPU shares with each CPU of its node, and whether each is swept.
type CpuProfile = Vec<(Vec<String>, bool)>;

/// What must be kept, per point pair and per point.
struct Rules<'a> {
    m: &'a Machine,
    nodes: Vec<u32>,
    cpus: Vec<u32>,
    node_of: Vec<usize>,
    node_attrs: Vec<String>,
    in_sweep: Vec<bool>,
    /// Each CPU's profile, as an id.
    profile: Vec<usize>,
    /// The labels of the objects holding both CPUs, per pair, as an id.
    shared: Vec<Vec<usize>>,
    objects: Vec<(String, Vec<usize>)>,
    object_set: std::collections::HashSet<(String, Vec<usize>)>,
    attrs: Vec<Attr>,
    /// Those of initiator nodes only.
    node_attrs_kept: Vec<Attr>,
}

/// A memory attribute: (name, value, initiator nodes, initiator CPUs, target).
type Attr = (String, u64, Vec<usize>, Vec<usize>, usize);

impl<'a> Rules<'a> {
    fn new(m: &'a Machine, sweep: &IdSet, mems: &IdSet) -> Self {
        let nodes: Vec<u32> = m.nodes.iter().map(|n| n.os_index).collect();
        let cpus: Vec<u32> = m.nodes.iter().flat_map(|n| n.cpus.iter()).collect();
        let node_of: Vec<usize> = cpus
            .iter()
            .map(|&c| m.nodes.iter().position(|n| n.cpus.contains(c)).unwrap())
            .collect();
        let node_of_cpu = |k: usize| node_of[k];
        let index = |c: u32| cpus.iter().position(|&x| x == c);
        let mut objects: Vec<(String, Vec<usize>)> = Vec::new();
        let mut add = |label: String, set: &IdSet| {
            let mut v: Vec<usize> = set.iter().filter_map(index).collect();
            v.sort();
            if !v.is_empty() {
                objects.push((label, v));
            }
        };
        for p in &m.packages {
            add("package".into(), &p.cpus);
        }
        for c in &m.caches {
            let label = format!(
                "L{} {} {} {} {:?}",
                c.level, c.kind, c.size_bytes, c.line_bytes, c.associativity
            );
            add(label, &c.cpus);
        }
        for c in &m.cores {
            add("core".into(), &c.cpus);
        }
        let n = cpus.len();
        let mut shared = vec![vec![Vec::<String>::new(); n]; n];
        for (label, set) in &objects {
            for &a in set {
                for &b in set {
                    shared[a][b].push(label.clone());
                }
            }
        }
        for row in shared.iter_mut() {
            for v in row.iter_mut() {
                v.sort();
            }
        }
        let in_sweep: Vec<bool> = cpus.iter().map(|&c| sweep.contains(c)).collect();
        // Each CPU's profile (what it shares with each CPU of its node, and
        // whether each is swept) and each node's multiset of profiles:
        // necessary conditions that keep the search from trying every
        // order of the cores of two nodes that cannot match.
        let profile: Vec<CpuProfile> = (0..n)
            .map(|k| {
                let mut v: CpuProfile = (0..n)
                    .filter(|&j| node_of_cpu(j) == node_of_cpu(k))
                    .map(|j| (shared[k][j].clone(), in_sweep[j]))
                    .collect();
                v.sort();
                v
            })
            .collect();
        let node_profiles: Vec<Vec<&CpuProfile>> = (0..m.nodes.len())
            .map(|a| {
                let mut v: Vec<&CpuProfile> = (0..n)
                    .filter(|&k| node_of_cpu(k) == a)
                    .map(|k| &profile[k])
                    .collect();
                v.sort();
                v
            })
            .collect();
        let node_attrs = m
            .nodes
            .iter()
            .enumerate()
            .map(|(a, x)| {
                format!(
                    "{} {:?} {:?} {} {:?} {} {:?}",
                    x.cpuless,
                    x.kind,
                    x.subtype,
                    log2_round(x.memory_bytes),
                    x.tier,
                    mems.contains(x.os_index),
                    node_profiles[a]
                )
            })
            .collect();
        let profile_ids: Vec<usize> = {
            let mut all: Vec<&CpuProfile> = profile.iter().collect();
            all.sort();
            all.dedup();
            profile
                .iter()
                .map(|p| all.binary_search(&p).unwrap())
                .collect()
        };
        let shared: Vec<Vec<usize>> = {
            let mut all: Vec<&Vec<String>> = shared.iter().flatten().collect();
            all.sort();
            all.dedup();
            shared
                .iter()
                .map(|row| row.iter().map(|v| all.binary_search(&v).unwrap()).collect())
                .collect()
        };
        let mut r = Rules {
            m,
            object_set: objects.iter().cloned().collect(),
            objects,
            nodes,
            cpus,
            node_of,
            node_attrs,
            in_sweep,
            profile: profile_ids,
            shared,
            attrs: Vec::new(),
            node_attrs_kept: Vec::new(),
        };
        let (ni, ci): (Vec<usize>, Vec<usize>) = ((0..r.nodes.len()).collect(), (0..n).collect());
        r.attrs = r.attrs_under(&ni, Some(&ci));
        r.node_attrs_kept = r.attrs_under(&ni, None);
        r
    }

    fn dist(&self, a: usize, b: usize) -> Option<u64> {
        self.m
            .distances
            .as_ref()
            .and_then(|d| d.get(self.nodes[a], self.nodes[b]))
    }

    /// The memory attributes mapped by `pi` and, when known, `sigma`.
    fn attrs_under(&self, pi: &[usize], sigma: Option<&[usize]>) -> Vec<Attr> {
        let mut v: Vec<Attr> = self
            .m
            .memory_attributes
            .iter()
            .map(|v| {
                let node = |x: u32| pi[self.nodes.iter().position(|&y| y == x).unwrap()];
                // Initiator CPUs that are not whole nodes: the nodes they
                // touch (a necessary condition on `pi` alone), and the
                // CPUs themselves once `sigma` is known.
                let mut inits: Vec<usize> = if v.initiator_nodes.is_empty() {
                    (0..self.nodes.len())
                        .filter(|&a| self.m.nodes[a].cpus.intersects(&v.initiator_cpus))
                        .map(|a| pi[a])
                        .collect()
                } else {
                    v.initiator_nodes.iter().map(node).collect()
                };
                inits.sort();
                let mut init_cpus: Vec<usize> = match sigma {
                    Some(sigma) if v.initiator_nodes.is_empty() => v
                        .initiator_cpus
                        .iter()
                        .filter_map(|c| self.cpus.iter().position(|&x| x == c))
                        .map(|c| sigma[c])
                        .collect(),
                    _ => Vec::new(),
                };
                init_cpus.sort();
                (
                    v.attribute.clone(),
                    v.value,
                    inits,
                    init_cpus,
                    node(v.target),
                )
            })
            .collect();
        v.sort();
        v
    }

    /// Node `k` may go to `w` given the images of the nodes before it.
    fn node_ok(&self, img: &[usize], k: usize, w: usize) -> bool {
        // Without a distance table only the identity is safe.
        if self.m.distances.is_none() && k != w {
            return false;
        }
        self.node_attrs[k] == self.node_attrs[w]
            && self.dist(k, k) == self.dist(w, w)
            && (0..k).all(|j| {
                self.dist(j, k) == self.dist(img[j], w) && self.dist(k, j) == self.dist(w, img[j])
            })
    }

    /// CPU `k` may go to `w` given the node images and the CPUs before it.
    fn cpu_ok(&self, pi: &[usize], img: &[usize], k: usize, w: usize) -> bool {
        self.node_of[w] == pi[self.node_of[k]]
            && self.in_sweep[k] == self.in_sweep[w]
            && self.profile[k] == self.profile[w]
            && (0..k).all(|j| self.shared[j][k] == self.shared[img[j]][w])
    }

    /// Whether a complete map keeps every object and memory attribute.
    fn keeps_all(&self, pi: &[usize], sigma: &[usize]) -> bool {
        self.objects.iter().all(|(label, set)| {
            let mut img: Vec<usize> = set.iter().map(|&c| sigma[c]).collect();
            img.sort();
            self.object_set.contains(&(label.clone(), img))
        }) && self.attrs_under(pi, Some(sigma)) == self.attrs
    }

    /// The first automorphism whose images begin with `node_prefix` (and,
    /// when it covers every node, `cpu_prefix`).
    fn first(
        &self,
        node_prefix: &[usize],
        cpu_prefix: &[usize],
    ) -> Option<(Vec<usize>, Vec<usize>)> {
        let nn = self.nodes.len();
        let mut pi = node_prefix.to_vec();
        self.extend_nodes(&mut pi, cpu_prefix, nn)
    }

    fn extend_nodes(
        &self,
        pi: &mut Vec<usize>,
        cpu_prefix: &[usize],
        nn: usize,
    ) -> Option<(Vec<usize>, Vec<usize>)> {
        if pi.len() == nn {
            if self.attrs_under(pi, None) != self.node_attrs_kept {
                return None;
            }
            let mut sigma = cpu_prefix.to_vec();
            return self.extend_cpus(pi, &mut sigma).map(|s| (s, pi.clone()));
        }
        let k = pi.len();
        for w in 0..nn {
            if pi.contains(&w) || !self.node_ok(pi, k, w) {
                continue;
            }
            pi.push(w);
            if let Some(found) = self.extend_nodes(pi, cpu_prefix, nn) {
                return Some(found);
            }
            pi.pop();
        }
        None
    }

    fn extend_cpus(&self, pi: &[usize], sigma: &mut Vec<usize>) -> Option<Vec<usize>> {
        let n = self.cpus.len();
        if sigma.len() == n {
            return self.keeps_all(pi, sigma).then(|| sigma.clone());
        }
        let k = sigma.len();
        for w in 0..n {
            if sigma.contains(&w) || !self.cpu_ok(pi, sigma, k, w) {
                continue;
            }
            sigma.push(w);
            if let Some(found) = self.extend_cpus(pi, sigma) {
                return Some(found);
            }
            sigma.pop();
        }
        None
    }
}

fn brute_group(m: &Machine, sweep: &IdSet, mems: &IdSet) -> Group {
    let r = Rules::new(m, sweep, mems);
    let (nn, n) = (r.nodes.len(), r.cpus.len());
    let mut gens = Vec::new();
    let mut order: Option<u128> = Some(1);
    // Nodes: fix 0..k, move k.
    for k in 0..nn {
        let prefix: Vec<usize> = (0..k).collect();
        let mut images = 0u128;
        for w in 0..nn {
            let mut p = prefix.clone();
            p.push(w);
            if (prefix.contains(&w)) || !r.node_ok(&prefix, k, w) {
                continue;
            }
            if let Some(g) = r.first(&p, &[]) {
                images += 1;
                if w != k {
                    gens.push(g);
                }
            }
        }
        order = order.and_then(|o| o.checked_mul(images));
    }
    // CPUs: every node fixed, CPUs 0..k fixed, move k.
    let ident: Vec<usize> = (0..nn).collect();
    for k in 0..n {
        let prefix: Vec<usize> = (0..k).collect();
        let mut images = 0u128;
        for w in 0..n {
            if prefix.contains(&w) || !r.cpu_ok(&ident, &prefix, k, w) {
                continue;
            }
            let mut p = prefix.clone();
            p.push(w);
            if let Some(g) = r.first(&ident, &p) {
                images += 1;
                if w != k {
                    gens.push(g);
                }
            }
        }
        order = order.and_then(|o| o.checked_mul(images));
    }
    Group {
        cpus: r.cpus.clone(),
        nodes: r.nodes.clone(),
        gens,
        order,
    }
}

/// The classes of `threads`-thread cases under `g` and thread exchange, by
/// union-find: (class of each case in enumeration order, class sizes).
fn brute_classes(
    g: &Group,
    sweep: &[u32],
    mems: &[u32],
    accesses: &[Access],
    threads: usize,
) -> (Vec<usize>, Vec<u64>) {
    let ci = |c: u32| g.cpus.iter().position(|&x| x == c).unwrap();
    let ni = |x: u32| g.nodes.iter().position(|&y| y == x).unwrap();
    let mut choices: Vec<(usize, usize, usize)> = Vec::new();
    for &c in sweep {
        for &mem in mems {
            for a in accesses {
                choices.push((ci(c), *a as usize, ni(mem)));
            }
        }
    }
    let index: BTreeMap<(usize, usize, usize), usize> =
        choices.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    // Each generator as a map of one thread's choices.
    let maps: Vec<Vec<usize>> = g
        .gens
        .iter()
        .map(|(sigma, pi)| {
            choices
                .iter()
                .map(|&(c, a, mem)| index[&(sigma[c], a, pi[mem])])
                .collect()
        })
        .collect();
    let per = choices.len();
    let total = per.pow(threads as u32);
    let decode = |mut i: usize| {
        let mut case = vec![0usize; threads];
        for slot in case.iter_mut().rev() {
            *slot = i % per;
            i /= per;
        }
        case
    };
    let encode = |case: &[usize]| case.iter().fold(0usize, |acc, &t| acc * per + t);
    let mut uf: Vec<usize> = (0..total).collect();
    fn find(uf: &mut [usize], mut x: usize) -> usize {
        while uf[x] != x {
            uf[x] = uf[uf[x]];
            x = uf[x];
        }
        x
    }
    for i in 0..total {
        let case = decode(i);
        let mut images = Vec::new();
        if threads > 1 {
            let mut swapped = case.clone();
            swapped.swap(0, 1);
            images.push(encode(&swapped));
            let mut rotated = case.clone();
            rotated.rotate_left(1);
            images.push(encode(&rotated));
        }
        for map in &maps {
            images.push(case.iter().fold(0usize, |acc, &t| acc * per + map[t]));
        }
        for j in images {
            let (a, b) = (find(&mut uf, i), find(&mut uf, j));
            uf[a] = b;
        }
    }
    let mut ids: BTreeMap<usize, usize> = BTreeMap::new();
    let mut class_of = Vec::with_capacity(total);
    for i in 0..total {
        let root = find(&mut uf, i);
        let next = ids.len();
        class_of.push(*ids.entry(root).or_insert(next));
    }
    let mut sizes = vec![0u64; ids.len()];
    for &c in &class_of {
        sizes[c] += 1;
    }
    (class_of, sizes)
}

/// Folding gives exactly the brute force's partition: the same classes
/// (every case's class key is one-to-one with its brute-force class) and
/// the same class sizes. Returns the number of classes.
fn matches_brute_force(
    space: &SweepSpace,
    g: &Group,
    sweep: &[u32],
    mems: &[u32],
    accesses: &[Access],
    threads: usize,
) -> usize {
    let (brute, sizes) = brute_classes(g, sweep, mems, accesses, threads);
    let full = space.full(threads, 1 << 22).unwrap();
    assert_eq!(full.len(), brute.len());
    let mut pair: BTreeMap<usize, String> = BTreeMap::new();
    let mut back: BTreeMap<String, usize> = BTreeMap::new();
    for (case, &b) in full.iter().zip(&brute) {
        let key = &case.class_key;
        assert_eq!(
            pair.entry(b).or_insert(key.clone()),
            key,
            "{}",
            case.label()
        );
        assert_eq!(*back.entry(key.clone()).or_insert(b), b, "{}", case.label());
    }
    let mut want = sizes.clone();
    want.sort();
    let mut got: Vec<u64> = space.folded(threads).iter().map(|c| c.class_size).collect();
    got.sort();
    assert_eq!(got, want, "{threads} thread(s)");
    sizes.len()
}

#[test]
fn every_fixture_small_enough_folds_as_the_brute_force_group_says() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/topologies");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".xml"))
        .collect();
    names.sort();
    let mut checked = Vec::new();
    for name in &names {
        let m = load(name);
        let (cpus, mems) = (m.allowed_cpus.clone(), m.memory_nodes());
        let space = match SweepSpace::new(&m, &cpus, &mems, RW) {
            Ok(s) => s,
            Err(e) => {
                println!("{name}: no sweep ({e})");
                continue;
            }
        };
        // Backtracking is quadratic in the CPUs per search: feasible up to
        // a hundred or so.
        let all_cpus: usize = m.nodes.iter().map(|n| n.cpus.len()).sum();
        let (sweep, mem_list): (Vec<u32>, Vec<u32>) =
            (cpus.iter().collect(), mems.iter().collect());
        if all_cpus > 96 {
            println!("{name}: {all_cpus} CPUs, too many for brute force");
            continue;
        }
        let t = std::time::Instant::now();
        let g = brute_group(&m, &cpus, &mems);
        if let Some(order) = g.order {
            assert_eq!(
                space.machine_symmetry_order().to_string(),
                order.to_string(),
                "{name}"
            );
        }
        let one = matches_brute_force(&space, &g, &sweep, &mem_list, RW, 1);
        // Two readers over the whole machine when that is at most 100,000
        // cases, else over the CPUs of its first two nodes with CPUs (the
        // group then keeps that smaller set).
        let (cpus2, g2) = if (sweep.len() * mem_list.len()).pow(2) <= 100_000 {
            (cpus.clone(), g)
        } else {
            let two_nodes = m
                .nodes
                .iter()
                .filter(|n| !n.cpus.intersection(&cpus).is_empty())
                .take(2)
                .fold(IdSet::new(), |acc, n| {
                    acc.union(&n.cpus.intersection(&cpus))
                });
            let g2 = brute_group(&m, &two_nodes, &mems);
            (two_nodes, g2)
        };
        let reads = SweepSpace::new(&m, &cpus2, &mems, &[Access::Read]).unwrap();
        if let Some(order) = g2.order {
            assert_eq!(
                reads.machine_symmetry_order().to_string(),
                order.to_string(),
                "{name}"
            );
        }
        let sweep2: Vec<u32> = cpus2.iter().collect();
        let two = matches_brute_force(&reads, &g2, &sweep2, &mem_list, &[Access::Read], 2);
        println!(
            "{name}: order {}, {one} one-thread classes; on CPUs {cpus2}: {two} two-reader classes ({:.2} s)",
            space.machine_symmetry_order(),
            t.elapsed().as_secs_f64()
        );
        checked.push(name.clone());
    }
    for want in [
        "qemu-quartet-4n2c-ring.xml",
        "qemu-ring4-cpuless-hmat.xml",
        "16amd64-8n2c.xml",
        "64amd64-4s2n4ca2co.xml",
        "8intel64-4n2t-memattrs.xml",
        "8em64t-2s2ca2c-buggynuma.xml",
    ] {
        assert!(
            checked.iter().any(|c| c == want),
            "{want} not checked: {checked:?}"
        );
    }
}
