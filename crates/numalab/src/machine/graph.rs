//! Derived facts: the interconnect graph inferred from distances, hop counts,
//! and warnings about firmware tables that look wrong.
//!
//! # How links are inferred
//!
//! Firmware distance tables (ACPI SLIT) give one number per pair of nodes, not
//! the wiring. numalab infers the wiring as follows.
//!
//! - Between nodes with CPUs, `a` and `b` are directly linked unless some
//!   third node `c` is strictly nearer to both (`d(a,c) < d(a,b)` and
//!   `d(c,b) < d(a,b)`): the path through `c` then explains the larger
//!   distance (this is the "relative neighbourhood graph"). Every node's
//!   nearest remote nodes are always its neighbours, so on the classic 4-node
//!   ring (10 local / 16 one hop / 22 two hops) the links are exactly the 16s;
//!   unlike "nearest only" the graph is always connected (e.g. two
//!   dual-die packages 10/16/25/32/33 become the chain 0-1-2-3 they are).
//! - A CPU-less node (memory only) does not route traffic: it is a leaf linked
//!   to its nearest CPU node(s); among equally near ones, to those it is
//!   attached to in hwloc's tree when that decides. Hop counts never pass
//!   through a CPU-less node.
//! - Asymmetric tables are symmetrized (the two directions are averaged) for
//!   inference; [`Link::distance`] keeps the table's value from `a` to `b`.
//! - Without any table, several nodes are treated as fully connected, one hop
//!   apart, at the kernel's default remote distance 20.

use super::{Distances, HopMatrix};
use crate::IdSet;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Remote distance assumed when the machine has no distance table (the
/// kernel's default, also used by `Machine::distance`).
pub const DEFAULT_REMOTE_DISTANCE: u64 = 20;

/// A direct link between two nodes of the interconnect graph.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Link {
    pub a: u32,
    pub b: u32,
    pub distance: u64,
}

/// Direct neighbours: nodes at the smallest remote distance from each node,
/// plus the links needed to explain the other distances (see the module
/// documentation). Every node is treated as having CPUs.
pub fn interconnect_graph(distances: &Distances) -> Vec<Link> {
    interconnect_graph_with(distances, &BTreeMap::new())
}

/// [`interconnect_graph`] for a machine with CPU-less nodes: `memory_only`
/// maps each CPU-less node to the CPU nodes it is attached to in hwloc's tree
/// (possibly empty), used to break ties between equally near CPU nodes.
pub fn interconnect_graph_with(
    distances: &Distances,
    memory_only: &BTreeMap<u32, IdSet>,
) -> Vec<Link> {
    let n = distances.nodes.len();
    if n < 2 || distances.matrix.len() != n || distances.matrix.iter().any(|r| r.len() != n) {
        return Vec::new();
    }
    let ids = &distances.nodes;
    let d = &distances.matrix;
    // Doubled symmetric distance (sum of both directions), exact in integers.
    let s = |i: usize, j: usize| u128::from(d[i][j]) + u128::from(d[j][i]);
    let mut cpu: Vec<usize> = (0..n)
        .filter(|&i| !memory_only.contains_key(&ids[i]))
        .collect();
    let mem: Vec<usize> = if cpu.is_empty() {
        cpu = (0..n).collect();
        Vec::new()
    } else {
        (0..n)
            .filter(|&i| memory_only.contains_key(&ids[i]))
            .collect()
    };

    let mut pairs: BTreeSet<(usize, usize)> = BTreeSet::new();
    for (x, &i) in cpu.iter().enumerate() {
        for &j in &cpu[x + 1..] {
            let dij = s(i, j);
            let explained = cpu
                .iter()
                .any(|&k| k != i && k != j && s(i, k) < dij && s(k, j) < dij);
            if !explained {
                pairs.insert((i, j));
            }
        }
    }
    for &m in &mem {
        let Some(best) = cpu.iter().map(|&c| s(m, c)).min() else {
            continue;
        };
        let nearest: Vec<usize> = cpu.iter().copied().filter(|&c| s(m, c) == best).collect();
        let attached = memory_only.get(&ids[m]);
        let preferred: Vec<usize> = nearest
            .iter()
            .copied()
            .filter(|&c| attached.is_some_and(|a| a.contains(ids[c])))
            .collect();
        let chosen = if preferred.is_empty() {
            nearest
        } else {
            preferred
        };
        for c in chosen {
            pairs.insert((m.min(c), m.max(c)));
        }
    }
    let mut links: Vec<Link> = pairs
        .into_iter()
        .map(|(i, j)| {
            let (i, j) = if ids[i] < ids[j] { (i, j) } else { (j, i) };
            Link {
                a: ids[i],
                b: ids[j],
                distance: d[i][j],
            }
        })
        .collect();
    links.sort_by_key(|l| (l.a, l.b));
    links
}

/// Every pair of `nodes` linked at [`DEFAULT_REMOTE_DISTANCE`] (no table).
pub fn fully_connected(nodes: &[u32]) -> Vec<Link> {
    let mut sorted = nodes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut links = Vec::new();
    for (x, &a) in sorted.iter().enumerate() {
        for &b in &sorted[x + 1..] {
            links.push(Link {
                a,
                b,
                distance: DEFAULT_REMOTE_DISTANCE,
            });
        }
    }
    links
}

/// Hop counts by BFS over the links.
pub fn hop_matrix(nodes: &[u32], links: &[Link]) -> HopMatrix {
    hop_matrix_with(nodes, links, &IdSet::new())
}

/// Hop counts by BFS over the links, never passing through a node of
/// `no_transit` (CPU-less nodes: they end paths, they do not route).
pub fn hop_matrix_with(nodes: &[u32], links: &[Link], no_transit: &IdSet) -> HopMatrix {
    let index: BTreeMap<u32, usize> = nodes.iter().enumerate().map(|(i, &n)| (n, i)).collect();
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for l in links {
        if let (Some(&a), Some(&b)) = (index.get(&l.a), index.get(&l.b)) {
            if a != b {
                adj[a].push(b);
                adj[b].push(a);
            }
        }
    }
    let matrix = (0..nodes.len())
        .map(|src| {
            let mut dist: Vec<Option<u32>> = vec![None; nodes.len()];
            dist[src] = Some(0);
            let mut queue = VecDeque::from([src]);
            while let Some(u) = queue.pop_front() {
                if u != src && no_transit.contains(nodes[u]) {
                    continue;
                }
                let du = dist[u].unwrap_or(0);
                for &v in &adj[u] {
                    if dist[v].is_none() {
                        dist[v] = Some(du + 1);
                        queue.push_back(v);
                    }
                }
            }
            dist
        })
        .collect();
    HopMatrix {
        nodes: nodes.to_vec(),
        matrix,
    }
}

/// Plain-sentence warnings about a distance table that looks wrong.
/// `packages` is the number of processor packages of the machine.
pub fn distance_warnings(distances: &Distances, packages: usize) -> Vec<String> {
    let mut warnings = Vec::new();
    let n = distances.nodes.len();
    let d = &distances.matrix;
    if n < 2 || d.len() != n || d.iter().any(|r| r.len() != n) {
        return warnings;
    }
    let ids = &distances.nodes;
    let src = &distances.source;
    let off: Vec<(usize, usize)> = (0..n)
        .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
        .collect();
    let remote_values: BTreeSet<u64> = off.iter().map(|&(i, j)| d[i][j]).collect();
    let local_values: BTreeSet<u64> = (0..n).map(|i| d[i][i]).collect();

    if remote_values.len() == 1 && remote_values == local_values {
        let v = remote_values.first().copied().unwrap_or(0);
        warnings.push(format!(
            "every entry of the distance table ({src}) is {v}, local and remote alike: \
             the firmware claims remote memory is as near as local memory, which cannot be true; \
             hop counts assume every node is one hop from every other"
        ));
    } else if let Some(&(i, j)) = off.iter().find(|&&(i, j)| d[i][j] <= d[i][i]) {
        warnings.push(format!(
            "the distance table ({src}) puts node {} at distance {} from node {}, \
             not more than its local distance {}: the firmware table looks wrong",
            ids[j], d[i][j], ids[i], d[i][i]
        ));
    }

    let asym: Vec<(usize, usize)> = off
        .iter()
        .copied()
        .filter(|&(i, j)| i < j && d[i][j] != d[j][i])
        .collect();
    if let Some(&(i, j)) = asym.first() {
        warnings.push(format!(
            "the distance table ({src}) is asymmetric ({} pair(s) differ, e.g. {}→{} is {} but {}→{} is {}): \
             links and hops use the average of both directions",
            asym.len(),
            ids[i],
            ids[j],
            d[i][j],
            ids[j],
            ids[i],
            d[j][i]
        ));
    }

    if n > 2 && remote_values.len() == 1 && remote_values != local_values && packages > 2 {
        let v = remote_values.first().copied().unwrap_or(0);
        warnings.push(format!(
            "the distance table ({src}) is flat (every remote node at {v}) across {n} nodes on a \
             machine with {packages} packages: either every package is directly linked to every other, \
             or the firmware hides the real hop counts; hop counts assume the former"
        ));
    }
    warnings
}

/// Links, hops and warnings for a machine.
pub(crate) struct Derived {
    pub links: Vec<Link>,
    pub hops: HopMatrix,
    pub warnings: Vec<String>,
}

/// Derives the graph for `nodes` (OS indexes, sorted) from the distance table
/// when there is one. `memory_only` maps CPU-less nodes to the CPU nodes they
/// attach to.
pub(crate) fn derive(
    nodes: &[u32],
    distances: Option<&Distances>,
    memory_only: &BTreeMap<u32, IdSet>,
    packages: usize,
) -> Derived {
    let no_transit: IdSet = memory_only.keys().copied().collect();
    let mut warnings = Vec::new();
    let links = match distances {
        _ if nodes.len() < 2 => Vec::new(),
        None => {
            warnings.push(format!(
                "the machine has {} NUMA nodes but no distance table (SLIT): \
                 every remote node is treated as one hop away, at distance {}",
                nodes.len(),
                DEFAULT_REMOTE_DISTANCE
            ));
            fully_connected(nodes)
        }
        Some(d) => {
            warnings.extend(distance_warnings(d, packages));
            let mut links = interconnect_graph_with(d, memory_only);
            let missing: Vec<u32> = nodes
                .iter()
                .copied()
                .filter(|n| !d.nodes.contains(n))
                .collect();
            if !missing.is_empty() {
                let list: IdSet = missing.iter().copied().collect();
                warnings.push(format!(
                    "node(s) {list} are missing from the distance table ({}): \
                     treated as one hop from every other node",
                    d.source
                ));
                for &m in &missing {
                    for &o in nodes {
                        if o != m && !(missing.contains(&o) && o < m) {
                            links.push(Link {
                                a: m.min(o),
                                b: m.max(o),
                                distance: DEFAULT_REMOTE_DISTANCE,
                            });
                        }
                    }
                }
                links.sort_by_key(|l| (l.a, l.b));
                links.dedup_by_key(|l| (l.a, l.b));
            }
            links
        }
    };
    let hops = hop_matrix_with(nodes, &links, &no_transit);
    Derived {
        links,
        hops,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(nodes: &[u32], rows: &[&[u64]]) -> Distances {
        Distances {
            nodes: nodes.to_vec(),
            matrix: rows.iter().map(|r| r.to_vec()).collect(),
            source: "test".to_string(),
        }
    }

    fn pairs(links: &[Link]) -> Vec<(u32, u32)> {
        links.iter().map(|l| (l.a, l.b)).collect()
    }

    fn quartet() -> Distances {
        table(
            &[0, 1, 2, 3],
            &[
                &[10, 16, 16, 22],
                &[16, 10, 22, 16],
                &[16, 22, 10, 16],
                &[22, 16, 16, 10],
            ],
        )
    }

    #[test]
    fn ring_of_four() {
        let d = quartet();
        let links = interconnect_graph(&d);
        assert_eq!(pairs(&links), vec![(0, 1), (0, 2), (1, 3), (2, 3)]);
        assert!(links.iter().all(|l| l.distance == 16));
        let hops = hop_matrix(&d.nodes, &links);
        assert_eq!(hops.get(0, 3), Some(2));
        assert_eq!(hops.get(1, 2), Some(2));
        assert_eq!(hops.get(0, 1), Some(1));
        for n in 0..4 {
            assert_eq!(hops.get(n, n), Some(0));
        }
        assert!(distance_warnings(&d, 4).is_empty());
    }

    #[test]
    fn cpuless_node_hangs_off_its_nearest_node() {
        // qemu-ring4-cpuless-hmat: ring 0-1-2-3-0 plus memory-only node 4 near 0.
        let d = table(
            &[0, 1, 2, 3, 4],
            &[
                &[10, 16, 22, 16, 20],
                &[16, 10, 16, 22, 26],
                &[22, 16, 10, 16, 32],
                &[16, 22, 16, 10, 26],
                &[20, 26, 32, 26, 10],
            ],
        );
        let mem = BTreeMap::from([(4, IdSet::single(0))]);
        let links = interconnect_graph_with(&d, &mem);
        assert_eq!(pairs(&links), vec![(0, 1), (0, 3), (0, 4), (1, 2), (2, 3)]);
        let hops = hop_matrix_with(&d.nodes, &links, &IdSet::single(4));
        assert_eq!(hops.get(0, 4), Some(1));
        assert_eq!(hops.get(1, 4), Some(2));
        assert_eq!(hops.get(2, 4), Some(3));
        assert_eq!(hops.get(0, 2), Some(2));
    }

    #[test]
    fn memory_nodes_do_not_route() {
        // Two CPU nodes both nearest to a memory node, and far from each other.
        let d = table(&[0, 1, 9], &[&[10, 40, 20], &[40, 10, 20], &[20, 20, 10]]);
        let mem = BTreeMap::from([(9, IdSet::new())]);
        let links = interconnect_graph_with(&d, &mem);
        assert_eq!(pairs(&links), vec![(0, 1), (0, 9), (1, 9)]);
        let hops = hop_matrix_with(&d.nodes, &links, &IdSet::single(9));
        assert_eq!(hops.get(0, 1), Some(1));
        // Without the 0-1 link, 0 cannot reach 1 through memory node 9.
        let only_mem: Vec<Link> = links.into_iter().filter(|l| l.b == 9).collect();
        let hops = hop_matrix_with(&d.nodes, &only_mem, &IdSet::single(9));
        assert_eq!(hops.get(0, 1), None);
        assert_eq!(hops.get(0, 9), Some(1));
    }

    #[test]
    fn memory_node_ties_broken_by_attachment() {
        let d = table(&[0, 8, 250], &[&[10, 40, 80], &[40, 10, 80], &[80, 80, 10]]);
        let mem = BTreeMap::from([(250, IdSet::single(8))]);
        assert_eq!(
            pairs(&interconnect_graph_with(&d, &mem)),
            vec![(0, 8), (8, 250)]
        );
        let unattached = BTreeMap::from([(250, IdSet::new())]);
        assert_eq!(
            pairs(&interconnect_graph_with(&d, &unattached)),
            vec![(0, 8), (0, 250), (8, 250)]
        );
    }

    #[test]
    fn two_dual_die_packages_form_a_chain() {
        // 128arm-2pa2n8cluster4co: 10/16/25/32/33.
        let d = table(
            &[0, 1, 2, 3],
            &[
                &[10, 16, 32, 33],
                &[16, 10, 25, 32],
                &[32, 25, 10, 16],
                &[33, 32, 16, 10],
            ],
        );
        let links = interconnect_graph(&d);
        assert_eq!(pairs(&links), vec![(0, 1), (1, 2), (2, 3)]);
        let hops = hop_matrix(&d.nodes, &links);
        assert_eq!(hops.get(0, 3), Some(3));
        assert_eq!(hops.get(0, 2), Some(2));
    }

    #[test]
    fn flat_and_bogus_tables() {
        let flat = table(
            &[0, 1, 2, 3],
            &[
                &[10, 20, 20, 20],
                &[20, 10, 20, 20],
                &[20, 20, 10, 20],
                &[20, 20, 20, 10],
            ],
        );
        assert_eq!(interconnect_graph(&flat).len(), 6);
        let w = distance_warnings(&flat, 4);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("flat"), "{w:?}");
        assert!(distance_warnings(&flat, 2).is_empty());

        let bogus = table(&[0, 1, 2], &[&[10, 10, 10], &[10, 10, 10], &[10, 10, 10]]);
        assert_eq!(interconnect_graph(&bogus).len(), 3);
        let w = distance_warnings(&bogus, 4);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("cannot be true"));
    }

    #[test]
    fn asymmetric_table_is_reported_and_averaged() {
        let d = table(
            &[0, 1, 2, 3],
            &[
                &[10, 16, 16, 22],
                &[18, 10, 22, 16],
                &[16, 22, 10, 16],
                &[22, 16, 16, 10],
            ],
        );
        let w = distance_warnings(&d, 4);
        assert_eq!(w.len(), 1);
        assert!(
            w[0].contains("asymmetric") && w[0].contains("0→1 is 16"),
            "{w:?}"
        );
        let links = interconnect_graph(&d);
        assert_eq!(pairs(&links), vec![(0, 1), (0, 2), (1, 3), (2, 3)]);
        assert_eq!(links[0].distance, 16);
    }

    #[test]
    fn sparse_ids_and_unsorted_rows() {
        let d = table(&[4, 0], &[&[10, 20], &[20, 10]]);
        assert_eq!(pairs(&interconnect_graph(&d)), vec![(0, 4)]);
    }

    #[test]
    fn derive_without_table() {
        let one = derive(&[0], None, &BTreeMap::new(), 1);
        assert!(one.links.is_empty() && one.warnings.is_empty());
        assert_eq!(one.hops.matrix, vec![vec![Some(0)]]);

        let four = derive(&[0, 1, 2, 3], None, &BTreeMap::new(), 4);
        assert_eq!(four.links.len(), 6);
        assert_eq!(four.warnings.len(), 1);
        assert!(four.warnings[0].contains("no distance table"));
        assert_eq!(four.hops.get(0, 3), Some(1));
    }

    #[test]
    fn derive_with_nodes_missing_from_table() {
        let d = table(&[0, 1], &[&[10, 20], &[20, 10]]);
        let got = derive(&[0, 1, 2], Some(&d), &BTreeMap::new(), 2);
        assert_eq!(pairs(&got.links), vec![(0, 1), (0, 2), (1, 2)]);
        assert!(got.warnings.iter().any(|w| w.contains("missing")));
    }

    #[test]
    fn malformed_tables_do_not_panic() {
        let ragged = Distances {
            nodes: vec![0, 1],
            matrix: vec![vec![10, 20], vec![20]],
            source: "x".into(),
        };
        assert!(interconnect_graph(&ragged).is_empty());
        assert!(distance_warnings(&ragged, 2).is_empty());
        let empty = table(&[], &[]);
        assert!(interconnect_graph(&empty).is_empty());
        assert!(hop_matrix(&[], &[]).matrix.is_empty());
    }
}
