//! Resource-set grammar, memory-policy parsing and thread placement, checked
//! against real machines' topology files; plus placed buffers on this machine.

use numalab::placement::{
    BufferSpec, ListMeaning, MemoryPolicy, PlacedBuffer, Realization, ResourceSet, Thp,
    ThreadPolicy, WeightedImpl,
};
use numalab::{IdSet, Machine};
use proptest::prelude::*;
use std::path::PathBuf;

fn fixture(name: &str) -> Machine {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name);
    Machine::from_xml_file(&p).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn quartet() -> Machine {
    fixture("qemu-quartet-4n2c-ring.xml")
}

fn ids(s: &str) -> IdSet {
    IdSet::parse_list(s).unwrap()
}

fn cpus(m: &Machine, t: &str) -> String {
    ResourceSet::parse(m, t, ListMeaning::Cpus)
        .unwrap_or_else(|e| panic!("{t}: {e}"))
        .cpus
        .to_string()
}

#[test]
fn grammar_terms_and_operations() {
    let m = quartet();
    assert_eq!(cpus(&m, "0-3,7"), "0-3,7");
    assert_eq!(cpus(&m, "all"), "0-7");
    assert_eq!(cpus(&m, "node:1"), "2-3");
    assert_eq!(cpus(&m, "node:1-2"), "2-5");
    assert_eq!(cpus(&m, "socket:3"), "6-7");
    assert_eq!(cpus(&m, "package:0 + node:3"), "0-1,6-7");
    assert_eq!(cpus(&m, "node:0,node:2"), "0-1,4-5");
    assert_eq!(cpus(&m, "node:0,2"), "0-1,4-5");
    assert_eq!(cpus(&m, "all ~ node:0"), "2-7");
    assert_eq!(cpus(&m, "!node:0"), "2-7");
    assert_eq!(cpus(&m, "node:0-2 & 1-4"), "1-4");
    assert_eq!(cpus(&m, "(node:0 + node:1) ~ cpu:2"), "0-1,3");
    assert_eq!(cpus(&m, "core:5"), "5");
    // Removing a core keeps its node's memory when the node still has CPUs.
    let s = ResourceSet::parse(&m, "node:0-1 ~ core:0", ListMeaning::Cpus).unwrap();
    assert_eq!(
        (s.cpus.to_string(), s.nodes.to_string()),
        ("1-3".into(), "0-1".into())
    );
    let s = ResourceSet::parse(&m, "node:0-1 ~ node:0", ListMeaning::Nodes).unwrap();
    assert_eq!(
        (s.cpus.to_string(), s.nodes.to_string()),
        ("2-3".into(), "1".into())
    );
    assert_eq!(cpus(&m, "none + 3"), "3");
    // Sets carry both halves: CPUs bring their nodes, nodes their CPUs.
    let s = ResourceSet::parse(&m, "1,6", ListMeaning::Cpus).unwrap();
    assert_eq!(s.nodes, ids("0,3"));
    let s = ResourceSet::parse(&m, "1-2", ListMeaning::Nodes).unwrap();
    assert_eq!(
        (s.cpus.to_string(), s.nodes.to_string()),
        ("2-5".into(), "1-2".into())
    );
}

#[test]
fn grammar_cpuless_nodes() {
    let m = fixture("qemu-ring4-cpuless-hmat.xml");
    let s = ResourceSet::parse(&m, "node:4", ListMeaning::Cpus).unwrap();
    assert!(s.cpus.is_empty());
    assert_eq!(s.nodes, ids("4"));
    let s = ResourceSet::parse(&m, "!node:0", ListMeaning::Nodes).unwrap();
    assert_eq!(s.nodes, ids("1-4"));
    assert_eq!(s.cpus, ids("1-3"));
}

#[test]
fn grammar_cache_domains() {
    let m = fixture("64amd64-4s2n4ca2co.xml");
    let l3: Vec<_> = m.caches.iter().filter(|c| c.level == 3).collect();
    assert!(!l3.is_empty());
    let first = ResourceSet::parse(&m, "l3:0", ListMeaning::Cpus).unwrap();
    let mut sorted = l3.clone();
    sorted.sort_by_key(|c| c.logical_index);
    assert_eq!(first.cpus, sorted[0].cpus);
    let err = ResourceSet::parse(&m, "l5:0", ListMeaning::Cpus).unwrap_err();
    assert!(err.contains("no L5 cache"), "{err}");
}

#[test]
fn grammar_errors_name_the_valid_range() {
    let m = quartet();
    let e = |t: &str, k| ResourceSet::parse(&m, t, k).unwrap_err();
    assert!(e("node:9", ListMeaning::Cpus).contains("node 9 does not exist; valid nodes: 0-3"));
    assert!(e("12", ListMeaning::Cpus).contains("CPU 12 does not exist; valid CPUs: 0-7"));
    assert!(e("5", ListMeaning::Nodes).contains("node 5 does not exist; valid nodes: 0-3"));
    assert!(e("package:4", ListMeaning::Cpus).contains("valid packages: 0-3"));
    assert!(e("rack:1", ListMeaning::Cpus).contains("unknown kind 'rack'"));
    assert!(e("node:0 +", ListMeaning::Cpus).contains("expected a set"));
    assert!(e("(node:0", ListMeaning::Cpus).contains("missing ')'"));
    assert!(e("3-1", ListMeaning::Cpus).contains("reversed"));
    assert!(e("", ListMeaning::Cpus).contains("empty set"));
    assert!(e("bogus", ListMeaning::Cpus).contains("unknown word 'bogus'"));
}

#[test]
fn grammar_respects_cgroup_restrictions() {
    let m = fixture("32amd64-4s2n4c-cgroup2.xml");
    assert!(m.restricted);
    let all = ResourceSet::parse(&m, "all", ListMeaning::Nodes).unwrap();
    assert_eq!(all.nodes, m.allowed_nodes);
    assert_eq!(all.nodes.to_string(), "0-5");
    let e = ResourceSet::parse(&m, "7", ListMeaning::Nodes).unwrap_err();
    assert!(
        e.contains("node 7 exists but this process may not use it"),
        "{e}"
    );
    assert!(e.contains("allowed nodes: 0-5"), "{e}");
}

proptest! {
    #[test]
    fn parser_never_panics(text in "[a-z0-9:,+&~!() -]{0,24}") {
        let m = quartet();
        let _ = ResourceSet::parse(&m, &text, ListMeaning::Cpus);
        let _ = ResourceSet::parse(&m, &text, ListMeaning::Nodes);
        let _ = MemoryPolicy::parse(&m, &text);
    }

    #[test]
    fn lists_parse_to_the_same_cpus(set in proptest::collection::btree_set(0u32..8, 1..8)) {
        let m = quartet();
        let s: IdSet = set.iter().copied().collect();
        let parsed = ResourceSet::parse(&m, &s.to_string(), ListMeaning::Cpus).unwrap();
        prop_assert_eq!(parsed.cpus, s);
    }

    #[test]
    fn operators_match_set_algebra(a in 0u32..4, b in 0u32..4) {
        let m = quartet();
        let na = ResourceSet::from_node(&m, a).unwrap();
        let nb = ResourceSet::from_node(&m, b).unwrap();
        let p = |t: String| ResourceSet::parse(&m, &t, ListMeaning::Cpus).unwrap();
        prop_assert_eq!(p(format!("node:{a} + node:{b}")), na.union(&nb));
        prop_assert_eq!(p(format!("node:{a} & node:{b}")), na.intersection(&nb));
        prop_assert_eq!(p(format!("node:{a} ~ node:{b}")), na.difference(&nb));
        prop_assert!(na.intersection(&nb).is_subset(&na));
    }
}

#[test]
fn policies_parse_and_print() {
    let m = quartet();
    let p = |t: &str| MemoryPolicy::parse(&m, t).unwrap_or_else(|e| panic!("{t}: {e}"));
    assert_eq!(p("first-touch"), MemoryPolicy::FirstTouch);
    assert_eq!(p("bind:1-2"), MemoryPolicy::Bind { nodes: ids("1-2") });
    assert_eq!(p("bind:package:3"), MemoryPolicy::Bind { nodes: ids("3") });
    assert_eq!(
        p("interleave:all@4"),
        MemoryPolicy::Interleave {
            nodes: ids("0-3"),
            chunk_pages: 4
        }
    );
    assert_eq!(
        p("weighted:1=1,0=3"),
        MemoryPolicy::Weighted {
            weights: vec![(0, 3), (1, 1)],
            chunk_pages: 1
        }
    );
    assert_eq!(p("remote"), MemoryPolicy::Remote { far: false });
    assert_eq!(p("interleave:0-3@8").to_string(), "interleave:0-3@8");
    assert_eq!(p("weighted:0=3,1=1").to_string(), "weighted:0=3,1=1");
    let e = |t: &str| MemoryPolicy::parse(&m, t).unwrap_err();
    assert!(e("bind").contains("needs nodes"));
    assert!(e("bind:9").contains("node 9 does not exist; valid nodes: 0-3"));
    assert!(e("interleave:0-1@0").contains("@PAGES"));
    assert!(e("weighted:0=0").contains("from 1 to 255"));
    assert!(e("weighted:0=1,0=2").contains("two weights"));
    assert!(e("weighted:0").contains("NODE=WEIGHT"));
    assert!(e("remote:middle").contains("remote:far"));
    assert!(e("local:1").contains("takes no argument"));
    assert!(e("numa").contains("valid: first-touch, local, bind:NODES"));
}

#[test]
fn remote_near_and_far_follow_distances() {
    let m = quartet();
    use numalab::placement::remote_node;
    assert_eq!(remote_node(&m, 0, true), Ok(3));
    assert_eq!(remote_node(&m, 0, false), Ok(1));
    assert_eq!(remote_node(&m, 3, false), Ok(1));
    assert_eq!(remote_node(&m, 1, true), Ok(2));
    let r = MemoryPolicy::Remote { far: true }
        .realize(&m, Some(0), WeightedImpl::Auto)
        .unwrap();
    assert!(matches!(r, Realization::Kernel { nodes, .. } if nodes == ids("3")));
    let one = fixture("offline-cpu0-node0.xml");
    assert_eq!(one.node_ids(), ids("1"), "the only node is OS node 1");
    assert!(remote_node(&one, 1, false)
        .unwrap_err()
        .contains("needs a second memory node"));
}

#[test]
fn interleave_stride_and_weights_become_chunk_patterns() {
    let m = quartet();
    let r = MemoryPolicy::parse(&m, "interleave:0-2@4")
        .unwrap()
        .realize(&m, None, WeightedImpl::Auto)
        .unwrap();
    assert_eq!(
        r,
        Realization::Chunks {
            pattern: vec![(0, 4), (1, 4), (2, 4)]
        }
    );
    let r = MemoryPolicy::parse(&m, "weighted:0=3,1=1@2")
        .unwrap()
        .realize(&m, None, WeightedImpl::Emulate)
        .unwrap();
    assert_eq!(
        r,
        Realization::Chunks {
            pattern: vec![(0, 6), (1, 2)]
        }
    );
}

#[test]
fn thread_placement_compact_and_scatter() {
    let m = quartet();
    let all = m.allowed_cpus.clone();
    assert_eq!(
        ThreadPolicy::Compact.assign(&m, &all, 5, false).unwrap(),
        vec![0, 1, 2, 3, 4]
    );
    assert_eq!(
        ThreadPolicy::Scatter.assign(&m, &all, 6, false).unwrap(),
        vec![0, 2, 4, 6, 1, 3]
    );
    let e = ThreadPolicy::Compact
        .assign(&m, &all, 9, false)
        .unwrap_err();
    assert!(e.contains("9 threads but only 8 CPUs"), "{e}");
    assert_eq!(
        ThreadPolicy::Scatter
            .assign(&m, &ids("2-5"), 3, false)
            .unwrap(),
        vec![2, 4, 3]
    );
    assert_eq!(
        ThreadPolicy::Compact
            .assign(&m, &ids("0-1"), 3, true)
            .unwrap(),
        vec![0, 1, 0]
    );
    let ex = ThreadPolicy::parse("6,1,3").unwrap();
    assert_eq!(ex.assign(&m, &all, 3, false).unwrap(), vec![6, 1, 3]);
    assert!(ThreadPolicy::parse("zigzag")
        .unwrap_err()
        .contains("valid: compact"));
}

#[test]
fn thread_placement_puts_smt_siblings_last() {
    let m = fixture("256ppc-8n8s4t.xml");
    assert_eq!(m.smt, 4);
    let node0 = &m.nodes[0];
    let order = ThreadPolicy::Compact
        .assign(&m, &node0.cpus, node0.cpus.len(), false)
        .unwrap();
    // One hardware thread of every core of node 0 before any second thread.
    let cores = m
        .cores
        .iter()
        .filter(|c| c.cpus.is_subset(&node0.cpus))
        .count();
    let first: Vec<u32> = order[..cores].to_vec();
    for c in m.cores.iter().filter(|c| c.cpus.is_subset(&node0.cpus)) {
        assert_eq!(
            first.iter().filter(|x| c.cpus.contains(**x)).count(),
            1,
            "core {:?}",
            c.cpus
        );
    }
}

fn live_spec(policy: MemoryPolicy, size: usize) -> BufferSpec {
    BufferSpec {
        size,
        policy,
        thp: Some(Thp::Off),
        hugetlb: false,
        toucher: Some(0),
        weighted: WeightedImpl::Auto,
    }
}

#[test]
fn placed_buffer_on_this_machine_is_verified_page_by_page() {
    let m = Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let node = m.node_of_cpu(cpu).unwrap();
    let mut spec = live_spec(MemoryPolicy::Local, (8 << 20) + 100);
    spec.toucher = Some(cpu);
    let b = PlacedBuffer::new(&m, &spec).unwrap();
    assert_eq!(b.len(), (8 << 20) + 4096, "rounded to whole pages");
    assert_eq!(b.toucher_cpu(), Some(cpu));
    let h = b.histogram().unwrap();
    assert_eq!(h.pages_total, 2049);
    assert_eq!(h.untouched_pages, 0);
    assert_eq!(h.pages_by_node.get(&node), Some(&2049));
    assert_eq!(h.run_lengths.runs, 1);
    assert!(b.notes()[0].contains("rounded up"));
}

#[test]
fn strict_bind_beyond_free_memory_is_refused_cleanly() {
    let m = Machine::live().unwrap();
    let node = m.allowed_nodes.first().unwrap();
    // Twice the node's memory, or the whole machine's where that is more:
    // the model's node size is read once, and memory added since (a VM's
    // balloon, hot-plugged DIMMs) would make twice a stale size fit.
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let kb = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            kb.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(0, |kb| kb * 1024);
    let huge = (m.node(node).unwrap().memory_bytes.max(total) * 2) as usize;
    let e = PlacedBuffer::new(
        &m,
        &live_spec(
            MemoryPolicy::Bind {
                nodes: IdSet::single(node),
            },
            huge,
        ),
    )
    .unwrap_err();
    assert!(e.to_string().contains("cannot fit"), "{e}");
}

#[test]
fn placing_on_a_topology_file_is_refused() {
    let m = quartet();
    let e = PlacedBuffer::new(&m, &live_spec(MemoryPolicy::FirstTouch, 4096)).unwrap_err();
    assert!(e.to_string().contains("needs the live machine"), "{e}");
}
