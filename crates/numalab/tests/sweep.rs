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
    // One thread: local or remote, read or write, on either core of its
    // node (each has its own last-level cache, so the cores are two
    // groups); 16 CPUs x 8 nodes x 2 cases.
    let one = space.folded(1);
    assert_eq!(one.len(), 8);
    assert_eq!(one.iter().map(|c| c.class_size).sum::<u64>(), 256);
    folding_matches_full(&space, 2);
    // Brute force: S8 is generated by a transposition and an 8-cycle; the
    // two cores of a node have their own caches, so no core swap.
    let gens = [vec![1, 0, 2, 3, 4, 5, 6, 7], vec![1, 2, 3, 4, 5, 6, 7, 0]];
    let sizes = brute_force_class_sizes(8, &gens, false);
    assert_eq!(sizes.iter().sum::<u64>(), 65536);
    assert_eq!(folded_class_sizes(&space), sizes);
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
