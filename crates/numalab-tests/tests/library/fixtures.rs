//! The machine model over every hwloc XML fixture in tests/fixtures/topologies.
//!
//! Expected values were read from the XML files themselves (see the comments).

use numalab::machine::{Link, MachineError, MemoryKind};
use numalab::{IdSet, Machine};
use numalab_report::render_topology_text;
use std::path::{Path, PathBuf};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/topologies")
}

fn load(name: &str) -> Machine {
    let path = dir().join(name);
    Machine::from_xml_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn set(text: &str) -> IdSet {
    IdSet::parse_list(text).unwrap()
}

fn ids(m: &Machine) -> Vec<u32> {
    m.nodes.iter().map(|n| n.os_index).collect()
}

fn pairs(links: &[Link]) -> Vec<(u32, u32)> {
    links.iter().map(|l| (l.a, l.b)).collect()
}

fn all_fixtures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .expect("fixtures directory")
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "xml"))
        .collect();
    files.sort();
    files
}

/// The node table rows of the text view: the first word of each row.
fn rendered_node_rows(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| *l != "Nodes")
        .skip(2)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

#[test]
fn every_fixture_loads_consistently() {
    let files = all_fixtures();
    assert!(files.len() >= 25, "found only {} fixtures", files.len());
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let m = Machine::from_xml_file(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(!m.is_live(), "{name}");
        assert_eq!(m.schema_version, "1.1");
        assert!(!m.nodes.is_empty(), "{name}: no node");

        // Nodes keyed by OS index, unique and sorted.
        let node_ids = ids(&m);
        assert!(
            node_ids.windows(2).all(|w| w[0] < w[1]),
            "{name}: node ids not strictly increasing: {node_ids:?}"
        );
        for n in &m.nodes {
            assert!(
                m.complete_nodes.contains(n.os_index),
                "{name}: node {}",
                n.os_index
            );
            assert_eq!(n.cpuless, n.cpus.is_empty(), "{name}: node {}", n.os_index);
            assert_eq!(n.allowed, m.allowed_nodes.contains(n.os_index), "{name}");
            assert!(
                n.cpus.is_subset(&m.complete_cpus),
                "{name}: node {}",
                n.os_index
            );
        }

        // Every PU in exactly one node's CPUs, or in none when its node is
        // not in the file (restricted export) or offline (a package without
        // any node, as in offline-cpu0-node0.xml).
        let every_node_described = m.complete_nodes == m.node_ids();
        for core in &m.cores {
            let package_has_nodes = m
                .packages
                .iter()
                .find(|p| p.logical_index == core.package)
                .is_none_or(|p| !p.nodes.is_empty());
            for cpu in core.cpus.iter() {
                let owners = m.nodes.iter().filter(|n| n.cpus.contains(cpu)).count();
                assert!(owners <= 1, "{name}: CPU {cpu} in {owners} nodes");
                if every_node_described && package_has_nodes {
                    assert_eq!(owners, 1, "{name}: CPU {cpu} in no node");
                }
            }
        }
        assert!(m.smt >= 1, "{name}");

        // Links and hops.
        for l in &m.links {
            assert!(l.a < l.b, "{name}: link {l:?}");
            assert!(
                node_ids.contains(&l.a) && node_ids.contains(&l.b),
                "{name}: {l:?}"
            );
        }
        let mut p = pairs(&m.links);
        p.dedup();
        assert_eq!(p.len(), m.links.len(), "{name}: duplicate links");
        assert_eq!(m.hops.nodes, node_ids, "{name}");
        assert_eq!(m.hops.matrix.len(), node_ids.len(), "{name}");
        for (i, row) in m.hops.matrix.iter().enumerate() {
            assert_eq!(row.len(), node_ids.len(), "{name}");
            assert_eq!(row[i], Some(0), "{name}: hop diagonal");
            for (j, h) in row.iter().enumerate() {
                assert!(
                    h.is_some(),
                    "{name}: {} cannot reach {}",
                    node_ids[i],
                    node_ids[j]
                );
                assert_eq!(*h, m.hops.matrix[j][i], "{name}: hops not symmetric");
            }
        }
        if let Some(d) = &m.distances {
            assert!(
                d.nodes.windows(2).all(|w| w[0] < w[1]),
                "{name}: rows not sorted"
            );
            assert_eq!(d.matrix.len(), d.nodes.len(), "{name}");
        }

        // JSON and text views.
        let json = serde_json::to_value(&m).expect("serializes");
        assert_eq!(json["schema_version"], "1.1");
        let text = render_topology_text(&m);
        assert!(!text.trim().is_empty(), "{name}");
        let rows = rendered_node_rows(&text);
        for id in &node_ids {
            assert!(
                rows.contains(&id.to_string()),
                "{name}: node {id} missing from the text view:\n{text}"
            );
        }
        if m.restricted {
            assert!(text.contains("restricted by a cgroup"), "{name}");
        }

        // Loading is deterministic.
        let again = Machine::from_xml_file(&path).unwrap();
        assert_eq!(
            serde_json::to_string(&again).unwrap(),
            serde_json::to_string(&m).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn quartet_ring() {
    let m = load("qemu-quartet-4n2c-ring.xml");
    assert_eq!(ids(&m), vec![0, 1, 2, 3]);
    let cpus: Vec<String> = m.nodes.iter().map(|n| n.cpus.to_string()).collect();
    assert_eq!(cpus, vec!["0-1", "2-3", "4-5", "6-7"]);
    assert_eq!((m.packages.len(), m.cores.len(), m.smt), (4, 8, 1));
    assert!(!m.restricted);
    let d = m.distances.as_ref().expect("SLIT");
    assert_eq!(d.source, "NUMALatency");
    assert_eq!(
        d.matrix,
        vec![
            vec![10, 16, 16, 22],
            vec![16, 10, 22, 16],
            vec![16, 22, 10, 16],
            vec![22, 16, 16, 10],
        ]
    );
    assert_eq!(pairs(&m.links), vec![(0, 1), (0, 2), (1, 3), (2, 3)]);
    assert!(m.links.iter().all(|l| l.distance == 16));
    assert_eq!(m.hops_between(0, 3), Some(2));
    assert_eq!(m.hops_between(1, 2), Some(2));
    assert_eq!(m.hops_between(0, 1), Some(1));
    assert_eq!(m.hops_between(2, 2), Some(0));
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    let text = render_topology_text(&m);
    assert!(text.contains("ring: 0 ─ 1 ─ 3 ─ 2 ─ 0"), "{text}");
}

#[test]
fn quartet_caches() {
    // qemu-quartet: per core L1d/L1i 64 KiB 2-way, L2 512 KiB 16-way; one
    // 16 MiB 16-way L3 per package; all lines 64 B.
    let m = load("qemu-quartet-4n2c-ring.xml");
    let of = |level: u8, kind: &str| -> Vec<&numalab::machine::Cache> {
        m.caches
            .iter()
            .filter(|c| c.level == level && c.kind == kind)
            .collect()
    };
    let l1d = of(1, "data");
    assert_eq!(l1d.len(), 8);
    assert!(l1d.iter().all(|c| c.size_bytes == 64 << 10
        && c.line_bytes == 64
        && c.associativity == Some(2)
        && c.cpus.len() == 1));
    assert_eq!(of(1, "instruction").len(), 8);
    let l2 = of(2, "unified");
    assert!(l2.len() == 8 && l2.iter().all(|c| c.size_bytes == 512 << 10));
    let l3 = of(3, "unified");
    let shared: Vec<String> = l3.iter().map(|c| c.cpus.to_string()).collect();
    assert_eq!(shared, vec!["0-1", "2-3", "4-5", "6-7"]);
    assert!(l3
        .iter()
        .all(|c| c.size_bytes == 16 << 20 && c.associativity == Some(16)));
    assert_eq!(m.last_level_cache_bytes(), Some(16 << 20));
    let text = render_topology_text(&m);
    assert!(text.contains("L3"), "{text}");
    assert!(text.contains("16 MiB"), "{text}");
}

#[test]
fn cpuless_node_with_hmat() {
    let m = load("qemu-ring4-cpuless-hmat.xml");
    assert_eq!(ids(&m), vec![0, 1, 2, 3, 4]);
    let n4 = m.node(4).unwrap();
    assert!(n4.cpuless && n4.cpus.is_empty());
    assert_eq!(n4.memory_bytes, 526049280);
    assert_eq!(n4.kind, MemoryKind::Unknown);
    assert_eq!(m.node(0).unwrap().cpus, set("0"));
    assert_eq!(m.cpu_nodes(), set("0-3"));
    // Package 0 holds node 0 and the CPU-less node 4 (attached there).
    assert_eq!(m.packages[0].nodes, set("0,4"));

    let value = |attr: &str, target: u32| {
        m.memory_attributes
            .iter()
            .find(|a| a.attribute == attr && a.target == target)
            .unwrap_or_else(|| panic!("{attr} for {target}"))
    };
    let lat4 = value("latency_ns", 4);
    assert_eq!(lat4.value, 250);
    assert_eq!(lat4.initiator_cpus, set("0"));
    assert_eq!(lat4.initiator_nodes, set("0"));
    assert_eq!(value("bandwidth_mib_s", 4).value, 8192);
    assert_eq!(value("latency_ns", 0).value, 90);
    assert_eq!(value("bandwidth_mib_s", 0).value, 20480);
    assert_eq!(value("read_latency_ns", 4).value, 250);
    assert_eq!(value("write_bandwidth_mib_s", 0).value, 20480);

    // Ring 0-1-2-3-0 (16 one hop, 22 two hops); node 4 hangs off node 0 (20).
    assert_eq!(
        pairs(&m.links),
        vec![(0, 1), (0, 3), (0, 4), (1, 2), (2, 3)]
    );
    assert_eq!(m.hops_between(4, 0), Some(1));
    assert_eq!(m.hops_between(4, 1), Some(2));
    assert_eq!(m.hops_between(4, 2), Some(3));
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);

    let text = render_topology_text(&m);
    assert!(text.contains("HMAT"), "{text}");
    assert!(text.contains("250 ns"), "{text}");
    assert!(text.contains("CPU-less"), "{text}");
}

#[test]
fn sparse_node_ids_and_smt4() {
    let m = load("256ppc-8n8s4t.xml");
    assert_eq!(ids(&m), vec![0, 1, 4, 5, 8, 9, 12, 13]);
    assert_eq!(m.smt, 4);
    assert_eq!(m.node(4).unwrap().cpus, set("64-95"));
    let d = m.distances.as_ref().unwrap();
    assert_eq!(d.nodes, vec![0, 1, 4, 5, 8, 9, 12, 13]);
    assert_eq!(d.get(0, 1), Some(20));
    assert_eq!(d.get(4, 5), Some(20));
    assert_eq!(d.get(0, 13), Some(40));
    assert_eq!(m.distance(12, 13), 20);
    // 20 within a pair; every other pair at 40, not explained by any path.
    assert!(m.links.iter().any(|l| (l.a, l.b, l.distance) == (0, 1, 20)));
    assert_eq!(m.hops_between(0, 13), Some(1));
}

#[test]
fn gpu_memory_nodes_with_large_ids() {
    let m = load("nvidiagpunumanodes.xml");
    assert_eq!(ids(&m), vec![0, 8, 250, 251, 252, 253, 254, 255]);
    for id in 250..=255 {
        let n = m.node(id).unwrap();
        assert!(n.cpuless, "node {id}");
        assert_eq!(n.kind, MemoryKind::GpuMemory, "node {id}");
        assert_eq!(n.subtype.as_deref(), Some("GPUMemory"));
    }
    assert_eq!(m.node(0).unwrap().cpus, set("0-15"));
    assert_eq!(m.node(8).unwrap().cpus, set("88-103"));
    assert_eq!(m.node(0).unwrap().kind, MemoryKind::Dram);
    // GPU memory 250-252 sits in package 8, 253-255 in package 0 (hwloc tree);
    // distances are all 80, so the attachment decides.
    for id in 250..=252 {
        assert_eq!(m.hops_between(id, 8), Some(1), "{id}");
        assert_eq!(m.hops_between(id, 0), Some(2), "{id}");
    }
    for id in 253..=255 {
        assert_eq!(m.hops_between(id, 0), Some(1), "{id}");
    }
    // Memory-only nodes do not route: GPU to GPU goes through a CPU node.
    assert_eq!(m.hops_between(250, 251), Some(2));
    assert_eq!(m.hops_between(250, 253), Some(3));
}

#[test]
fn cgroup_restricted_views() {
    // Root: complete_nodeset 0xf, allowed_nodeset 0xc; complete_cpuset 0xffff,
    // allowed_cpuset 0xf. Nodes 0 and 1 are not in the file.
    let m = load("16amd64-4n4c-cgroup-distance-merge.xml");
    assert!(m.restricted);
    assert_eq!(m.allowed_nodes, set("2-3"));
    assert_eq!(m.complete_nodes, set("0-3"));
    assert_eq!(m.allowed_cpus, set("0-3"));
    assert_eq!(m.complete_cpus, set("0-15"));
    assert_eq!(ids(&m), vec![2, 3]);
    assert_eq!(m.node(2).unwrap().cpus, set("8-11"));
    assert!(m.nodes.iter().all(|n| n.allowed && !n.cpuless));
    assert!(m
        .warnings
        .iter()
        .any(|w| w.contains("restricted by a cgroup") && w.contains("nodes 2-3 of 0-3")));

    // cgroup v2 job step: cpuset.mems.effective 0-5 of 0-7, CPUs 0-5 of 0-31.
    let m = load("32amd64-4s2n4c-cgroup2.xml");
    assert!(m.restricted);
    assert_eq!(m.allowed_nodes, set("0-5"));
    assert_eq!(m.complete_nodes, set("0-7"));
    assert_eq!(m.allowed_cpus, set("0-5"));
    assert_eq!(m.complete_cpus, set("0-31"));
    assert_eq!(ids(&m), vec![0, 1, 2, 3, 4, 5]);
    // Nodes 2-5 are allowed memory whose CPUs are not allowed: still not CPU-less.
    let n2 = m.node(2).unwrap();
    assert!(n2.allowed && !n2.cpuless);
    assert_eq!(n2.cpus, set("8-11"));
    assert_eq!(m.node(1).unwrap().cpus, set("4-7"));
    assert!(m
        .warnings
        .iter()
        .any(|w| w.contains("allowed CPUs 0-5 of 0-31, nodes 0-5 of 0-7")));
    let text = render_topology_text(&m);
    assert!(text.contains("restricted by a cgroup"), "{text}");
}

#[test]
fn offline_cpus_and_memoryless_nodes_are_not_a_cgroup() {
    // CPUs 0-3 and 21-23 are offline (no object places them).
    let m = load("offline-cpu0-node0.xml");
    assert!(!m.restricted, "{:?}", m.warnings);
    assert!(m
        .warnings
        .iter()
        .any(|w| w.contains("CPUs 0-3,21-23 are offline")));
    assert_eq!(ids(&m), vec![1]);

    // Nodes 0-4 are in the complete nodeset only (no memory): not a cgroup.
    let m = load("fakememinitiators-1np2c+1npp+gi.xml");
    assert!(!m.restricted, "{:?}", m.warnings);
    assert_eq!(ids(&m), vec![5, 6, 7, 8, 9, 10]);
    assert!(m.node(7).unwrap().cpuless && m.node(10).unwrap().cpuless);
    assert_eq!(m.node(7).unwrap().kind, MemoryKind::Nvm);
    // NVM node 7 is local to the CPUs 0-1,4-5 of nodes 5 and 6.
    let lat7 = m
        .memory_attributes
        .iter()
        .find(|a| a.attribute == "latency_ns" && a.target == 7)
        .unwrap();
    assert_eq!((lat7.value, lat7.initiator_nodes.clone()), (77, set("5-6")));
}

#[test]
fn flat_table_on_eight_sockets_is_reported() {
    let m = load("16amd64-8n2c.xml");
    assert_eq!(m.packages.len(), 8);
    let d = m.distances.as_ref().unwrap();
    assert!(d.matrix.iter().enumerate().all(|(i, r)| r
        .iter()
        .enumerate()
        .all(|(j, v)| *v == if i == j { 10 } else { 20 })));
    assert_eq!(m.links.len(), 28);
    assert!(m.hops.matrix.iter().flatten().all(|h| *h <= Some(1)));
    let flat: Vec<&String> = m.warnings.iter().filter(|w| w.contains("flat")).collect();
    assert_eq!(flat.len(), 1, "{:?}", m.warnings);
    assert!(flat[0].contains("8 packages"), "{}", flat[0]);

    // A two-node table is trivially "flat": no warning.
    let dgx = load("nvidiaDGX2.xml");
    assert!(dgx.warnings.is_empty(), "{:?}", dgx.warnings);
}

#[test]
fn buggy_numa_firmware_is_repaired_to_one_node() {
    // The firmware listed 8 nodes all at distance 10; hwloc merged them into
    // one node holding all 8 CPUs and kept no distance table.
    let m = load("8em64t-2s2ca2c-buggynuma.xml");
    assert_eq!(ids(&m), vec![0]);
    assert_eq!(m.nodes[0].cpus, set("0-7"));
    assert_eq!(m.packages.len(), 2);
    assert!(m.distances.is_none());
    assert!(m.links.is_empty());
    assert_eq!(m.hops.matrix, vec![vec![Some(0)]]);
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
}

#[test]
fn arm_multi_level_distances() {
    // 10 local, 16 die to die, 25/32/33 across packages; the table is
    // symmetric. Die 1 and die 2 are the cross-package link.
    let m = load("128arm-2pa2n8cluster4co.xml");
    let d = m.distances.as_ref().unwrap();
    assert_eq!(
        d.matrix,
        vec![
            vec![10, 16, 32, 33],
            vec![16, 10, 25, 32],
            vec![32, 25, 10, 16],
            vec![33, 32, 16, 10],
        ]
    );
    let levels: std::collections::BTreeSet<u64> = d.matrix.iter().flatten().copied().collect();
    assert_eq!(
        levels.into_iter().collect::<Vec<_>>(),
        vec![10, 16, 25, 32, 33]
    );
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    assert_eq!(pairs(&m.links), vec![(0, 1), (1, 2), (2, 3)]);
    assert_eq!(m.hops_between(0, 2), Some(2));
    assert_eq!(m.hops_between(0, 3), Some(3));
    assert_eq!(m.hops_between(1, 3), Some(2));
    assert!(render_topology_text(&m).contains("chain: 0 ─ 1 ─ 2 ─ 3"));
}

#[test]
fn memory_kinds_and_tiers() {
    // fakeheteromemtiers: subtypes DRAM 0,1; HBM 2,4; NVM 6,8,9. Node 2 is the
    // only node in the locality of CPUs 4-5 besides NVM node 9.
    let m = load("fakeheteromemtiers.xml");
    let kind = |id| m.node(id).unwrap().kind;
    assert_eq!(kind(0), MemoryKind::Dram);
    assert_eq!(kind(1), MemoryKind::Dram);
    assert_eq!(kind(2), MemoryKind::Hbm);
    assert_eq!(kind(4), MemoryKind::Hbm);
    for id in [6, 8, 9] {
        assert_eq!(kind(id), MemoryKind::Nvm);
        assert!(m.node(id).unwrap().cpuless);
    }
    assert_eq!(m.node(0).unwrap().cpus, set("0-1"));
    assert_eq!(m.node(1).unwrap().cpus, set("2-3"));
    assert_eq!(m.node(2).unwrap().cpus, set("4-5"));
    assert!(m.node(4).unwrap().cpuless);

    // KNL SNC-4 hybrid: MCDRAM nodes are HBM, CPU-less, tier 0; DRAM tier 1.
    let knl = load("64intel64-fakeKNL-SNC4-hybrid.xml");
    for id in 4..=7 {
        let n = knl.node(id).unwrap();
        assert_eq!(
            (n.kind, n.cpuless, n.tier),
            (MemoryKind::Hbm, true, Some(0))
        );
        assert_eq!(n.subtype.as_deref(), Some("MCDRAM"));
    }
    for id in 0..=3 {
        let n = knl.node(id).unwrap();
        assert_eq!(
            (n.kind, n.cpuless, n.tier),
            (MemoryKind::Dram, false, Some(1))
        );
    }
    assert_eq!(knl.smt, 4);
    // No SLIT in that file: every node one hop from every other, and said so.
    assert!(knl.distances.is_none());
    assert!(knl.warnings.iter().any(|w| w.contains("no distance table")));
    assert_eq!(knl.hops_between(0, 7), Some(1));
}

#[test]
fn devices_and_their_local_nodes() {
    // 192em64t: eth2 (PCI 0002:03:00.0) below package 4 / node 4; sda below node 1.
    let m = load("192em64t-24n8c2t.xml");
    let dev = |name: &str| m.devices.iter().find(|d| d.name == name).unwrap();
    let eth2 = dev("eth2");
    assert_eq!(eth2.kind, "network");
    assert_eq!(eth2.pci_bus_id.as_deref(), Some("0002:03:00.0"));
    assert_eq!(eth2.local_nodes, set("4"));
    assert_eq!(eth2.local_cpus, m.node(4).unwrap().cpus);
    let sda = dev("sda");
    assert_eq!(
        (sda.kind.as_str(), sda.local_nodes.clone()),
        ("storage", set("1"))
    );
    assert_eq!(dev("ib0").local_nodes, set("6"));

    // DGX-2: NVML devices 0-7 near node 0, 8-15 near node 1.
    let dgx = load("nvidiaDGX2.xml");
    let nvml8 = dgx.devices.iter().find(|d| d.name == "nvml8").unwrap();
    assert_eq!(nvml8.local_nodes, set("1"));
    assert_eq!(nvml8.pci_bus_id.as_deref(), Some("0000:b7:00.0"));
    // hwloc files NVML devices as coprocessors; their GPU model says what
    // they are.
    assert_eq!(
        (
            nvml8.kind.as_str(),
            nvml8.label(),
            nvml8.model.as_deref(),
            nvml8.vendor.as_deref()
        ),
        (
            "gpu",
            "GPU",
            Some("Tesla V100-SXM3-32GB-H"),
            Some("NVIDIA Corporation")
        )
    );
    let dgx_text = render_topology_text(&dgx);
    let line = dgx_text
        .lines()
        .find(|l| l.contains(" nvml8 "))
        .unwrap_or_else(|| panic!("{dgx_text}"));
    assert_eq!(
        line.split_whitespace().collect::<Vec<_>>(),
        [
            "GPU",
            "nvml8",
            "Tesla",
            "V100-SXM3-32GB-H",
            "0000:b7:00.0",
            "node",
            "1"
        ]
    );

    // POWER8: nvml0 is a GPU OS device near node 0.
    let p8 = load("power8gpudistances.xml");
    let gpu = p8.devices.iter().find(|d| d.name == "nvml0").unwrap();
    assert_eq!(
        (gpu.kind.as_str(), gpu.local_nodes.clone()),
        ("gpu", set("0"))
    );

    let text = render_topology_text(&m);
    assert!(text.contains("eth2") && text.contains("node 4"), "{text}");
}

#[test]
fn large_machines_stay_readable() {
    for name in ["256ia64-64n2s2c.xml", "192em64t-24n8c2t.xml"] {
        let m = load(name);
        let text = render_topology_text(&m);
        assert!(text.contains("matrix omitted"), "{name}");
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap();
        assert!(widest <= 140, "{name}: line of {widest} characters");
        assert!(text.lines().count() < m.nodes.len() + 60, "{name}");
    }
}

#[test]
fn missing_file_is_unreadable_and_named() {
    let path = dir().join("no-such-topology.xml");
    let err = Machine::from_xml_file(&path).unwrap_err();
    assert!(matches!(err, MachineError::Unreadable { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-topology.xml"), "{err}");
    let err = Machine::from_xml_file(&dir()).unwrap_err();
    assert!(matches!(err, MachineError::Unreadable { .. }), "{err:?}");
}

fn scratch(name: &str, content: &[u8]) -> PathBuf {
    let d =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    let p = d.join(name);
    std::fs::write(&p, content).unwrap();
    p
}

fn assert_malformed(path: &Path) {
    match Machine::from_xml_file(path) {
        Err(e @ MachineError::Malformed { .. }) => {
            let shown = path.file_name().unwrap().to_string_lossy().to_string();
            assert!(e.to_string().contains(&shown), "{e}");
        }
        other => panic!("{}: expected Malformed, got {other:?}", path.display()),
    }
}

#[test]
fn malformed_files_are_named() {
    let quartet = std::fs::read(dir().join("qemu-quartet-4n2c-ring.xml")).unwrap();
    assert_malformed(&scratch("garbage.xml", b"this is not a topology\n"));
    assert_malformed(&scratch("empty.xml", b""));
    assert_malformed(&scratch("binary.xml", &[0xff, 0xfe, 0x00, 0x01]));
    assert_malformed(&scratch("truncated.xml", &quartet[..quartet.len() / 3]));
    assert_malformed(&scratch(
        "not-hwloc.xml",
        b"<?xml version=\"1.0\"?>\n<html><body>hello</body></html>\n",
    ));
    let v3 = String::from_utf8(quartet).unwrap().replacen(
        "<topology version=\"2.0\">",
        "<topology version=\"3.0\">",
        1,
    );
    let p = scratch("v3.xml", v3.as_bytes());
    assert_malformed(&p);
    let msg = Machine::from_xml_file(&p).unwrap_err().to_string();
    assert!(msg.contains("v3"), "{msg}");
}

#[test]
fn mangled_files_never_panic() {
    // Damage a real file in many ways: every outcome must be Ok or an error.
    // Damage that would make hwloc build an inconsistent tree (a NUMA node
    // whose os_index disagrees with its nodeset, an empty nodeset) is
    // refused by the check before hwloc sees it
    // (tests/topology_xml_props.rs mutates files at random).
    let text = std::fs::read_to_string(dir().join("qemu-ring4-cpuless-hmat.xml")).unwrap();
    let mut variants: Vec<String> = Vec::new();
    for cut in (0..text.len()).step_by(text.len() / 40 + 1) {
        variants.push(text[..cut].to_string());
    }
    for (from, to) in [
        ("cache_associativity=\"16\"", "cache_associativity=\"-7\""),
        ("cache_size=\"16777216\"", "cache_size=\"-1\""),
        (
            "cpuset=\"0x00000001\"",
            "cpuset=\"0xffffffff,,,,,,,,,,,,,,,,,0x1\"",
        ),
        (
            "<indexes length=\"10\">0 1 2 3 4 </indexes>",
            "<indexes length=\"10\">0 1 2 3 </indexes>",
        ),
        ("kind=\"5\"", "kind=\"99\""),
        ("value=\"250\"", "value=\"-250\""),
        ("local_memory=\"526049280\"", "local_memory=\"x\""),
        ("type=\"NUMANode\"", "type=\"Bogus\""),
        (
            "initiator_cpuset=\"0x00000001\"",
            "initiator_cpuset=\"0x0\"",
        ),
        ("osdev_type=\"0\"", "osdev_type=\"77\""),
        (
            "type=\"NUMANode\" os_index=\"0\"",
            "type=\"NUMANode\" os_index=\"3\"",
        ),
        ("nodeset=\"0x00000001\"", "nodeset=\"0x0\""),
    ] {
        variants.push(text.replacen(from, to, 1));
        variants.push(text.replace(from, to));
    }
    for (i, v) in variants.iter().enumerate() {
        let p = scratch(&format!("mangled-{i}.xml"), v.as_bytes());
        if let Ok(m) = Machine::from_xml_file(&p) {
            let _ = render_topology_text(&m);
            let _ = serde_json::to_string(&m).unwrap();
        }
    }
}

#[test]
fn live_machine_loads() {
    let m = Machine::live().expect("live discovery");
    assert!(m.is_live());
    assert!(!m.nodes.is_empty());
    assert!(!m.complete_cpus.is_empty());
    assert!(render_topology_text(&m).contains("this machine (live)"));
}
