//! `numalab policies` in the multi-node guest: every cell's placement is
//! real (timings are not, and are never asserted).

use crate::common::{nodes_of, one_line_error};
use crate::guest_experiments::{quartet, ring};
use serde_json::Value;

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    // Threads on all 8 CPUs (scatter: 0,2,4,6,1,3,5,7), one-node = node 2
    // (not the main thread's node 0, so the columns differ). Tiny sizes and
    // few samples: the guest is slow and its timings mean nothing.
    (
        "policies_all",
        "numalab policies --json --size 512K --budget-each 0.05 --warmup 0 --min-reps 2 --node 2",
    ),
    // The one-node column on each of the other nodes.
    (
        "policies_node0",
        "numalab policies --json --size 256K --budget-each 0.05 --warmup 0 --min-reps 2 --policies one-node --workloads single-unpinned,serial-init,numa-aware --node 0",
    ),
    (
        "policies_node1",
        "numalab policies --json --size 256K --budget-each 0.05 --warmup 0 --min-reps 2 --policies one-node --workloads single-unpinned,serial-init,numa-aware --node 1",
    ),
    (
        "policies_node3",
        "numalab policies --json --size 256K --budget-each 0.05 --warmup 0 --min-reps 2 --policies one-node --workloads single-unpinned,serial-init,numa-aware --node 3",
    ),
    // Compact layout: 4 threads fill nodes 0 and 1.
    (
        "policies_compact",
        "numalab policies --json --size 256K --budget-each 0.05 --warmup 0 --min-reps 2 --threads 4 --layout compact --workloads serial-init,numa-aware --policies local,interleave",
    ),
    // Interleave over the accessing nodes: 4 compact threads run on nodes
    // 0 and 1 only, so that column must leave nodes 2 and 3 alone.
    (
        "policies_accessing",
        "numalab policies --json --size 256K --budget-each 0.05 --warmup 0 --min-reps 2 --threads 4 --layout compact --workloads single-pinned,serial-init,numa-aware --policies interleave,interleave-accessing",
    ),
    (
        "policies_text",
        "numalab policies --size 256K --budget-each 0.05 --warmup 0 --min-reps 2 --workloads single-pinned,numa-aware",
    ),
    ("policies_err_node", "numalab policies --node 7"),
];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[(
    "policies_cpuless",
    "numalab policies --json --size 256K --budget-each 0.05 --warmup 0 --min-reps 2 --node 4 --workloads single-pinned,numa-aware",
)];

/// Quartet: CPUs 2n and 2n+1 on node n.
fn quartet_node(cpu: u64) -> u32 {
    (cpu / 2) as u32
}

fn cell<'a>(v: &'a Value, workload: &str, policy: &str) -> &'a Value {
    v["cells"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["workload"] == workload && c["policy"] == policy)
        .unwrap_or_else(|| panic!("no cell {workload}/{policy}"))
}

/// Every worker of a cell with its buffers.
fn workers(c: &Value) -> &Vec<Value> {
    c["run"]["verification"]["workers"]
        .as_array()
        .unwrap_or_else(|| panic!("no run in {c}"))
}

fn buffers(w: &Value) -> &Vec<Value> {
    w["buffers"].as_array().unwrap()
}

fn pages(b: &Value) -> u64 {
    b["bytes"].as_u64().unwrap() / b["page_size"].as_u64().unwrap()
}

/// Asserts that every page of every buffer of the cell is on `node`.
fn all_on(c: &Value, node: u32) {
    for w in workers(c) {
        for b in buffers(w) {
            assert_eq!(
                nodes_of(b),
                vec![(node, pages(b))],
                "{}/{}: {b}",
                c["workload"],
                c["policy"]
            );
        }
    }
}

/// Asserts round robin: each buffer's pages over exactly `nodes`, counts
/// within one page of each other.
fn interleaved(c: &Value, nodes: &[u32]) {
    for w in workers(c) {
        for b in buffers(w) {
            let got = nodes_of(b);
            let on: Vec<u32> = got.iter().map(|x| x.0).collect();
            assert_eq!(on, nodes, "{}: {b}", c["workload"]);
            let counts: Vec<u64> = got.iter().map(|x| x.1).collect();
            let (lo, hi) = (*counts.iter().min().unwrap(), *counts.iter().max().unwrap());
            assert!(hi - lo <= 1, "{}: uneven {got:?}", c["workload"]);
            assert_eq!(counts.iter().sum::<u64>(), pages(b));
        }
    }
}

/// Pinned workers ran on the CPUs they asked for, in the layout's order.
fn ran_on(c: &Value, cpus: &[u64]) {
    let ws = workers(c);
    assert_eq!(ws.len(), cpus.len(), "{}", c["workload"]);
    for (w, cpu) in ws.iter().zip(cpus) {
        assert_eq!(w["pinned"], true);
        assert_eq!(w["requested_cpu"], *cpu);
        for s in w["seen_cpus"].as_array().unwrap() {
            assert_eq!(s, cpu, "{}: worker seen on {s}, asked {cpu}", c["workload"]);
        }
    }
}

#[test]
fn policies_runs_on_every_node_and_places_every_cell_as_asked() {
    let v = quartet().json("policies_all", 0);
    assert_eq!(v["command"], "policies");
    assert_eq!(v["threads"], 8);
    let scatter: Vec<u64> = vec![0, 2, 4, 6, 1, 3, 5, 7];
    assert_eq!(v["cpus"], serde_json::json!(scatter));
    assert_eq!(v["interleave_nodes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["node"], 2);
    assert_eq!(v["single_node"], false);
    assert_eq!(v["cells"].as_array().unwrap().len(), 20);
    assert_eq!(v["accessing_nodes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["verified"], true, "{:?}", v["cells"]);
    for c in v["cells"].as_array().unwrap() {
        assert_eq!(c["verified"], true, "{c}");
        assert!(c["gbps"]["median"].as_f64().unwrap() > 0.0);
    }
    // The classic mistake: the main thread (CPU 0, node 0) touches all data.
    let serial = cell(&v, "serial-init", "local");
    all_on(serial, 0);
    assert_eq!(serial["toucher_cpus"], serde_json::json!([0]));
    ran_on(serial, &scatter);
    for w in workers(serial) {
        for b in buffers(w) {
            assert_eq!(b["toucher_cpu"], 0);
        }
    }
    // NUMA-aware and independent programs: each worker's pages on its own node.
    for wl in ["numa-aware", "independent"] {
        let c = cell(&v, wl, "local");
        ran_on(c, &scatter);
        for w in workers(c) {
            let cpu = w["requested_cpu"].as_u64().unwrap();
            for b in buffers(w) {
                assert_eq!(nodes_of(b), vec![(quartet_node(cpu), pages(b))], "{wl}");
                assert_eq!(b["toucher_cpu"], cpu);
            }
        }
    }
    // Only the NUMA-aware and independent programs stream local data; with
    // the main thread's first touch, only the 2 workers of node 0 do.
    let local = |w: &str, p: &str| cell(&v, w, p)["local_percent"].as_f64().unwrap();
    assert_eq!(local("numa-aware", "local"), 100.0);
    assert_eq!(local("independent", "local"), 100.0);
    assert_eq!(local("serial-init", "local"), 25.0);
    assert_eq!(local("numa-aware", "interleave"), 25.0);
    assert_eq!(local("numa-aware", "one-node"), 25.0);
    assert_eq!(local("single-pinned", "one-node"), 0.0);
    // Interleave: every buffer evenly over nodes 0-3, whatever the workload.
    for wl in [
        "single-unpinned",
        "single-pinned",
        "independent",
        "serial-init",
        "numa-aware",
    ] {
        interleaved(cell(&v, wl, "interleave"), &[0, 1, 2, 3]);
        all_on(cell(&v, wl, "one-node"), 2);
    }
    // Interleave over the accessing nodes: the threaded workloads' 8 CPUs
    // cover every node; the unpinned thread may run anywhere; the pinned
    // thread's own node is node 0, the same memory as local.
    for wl in [
        "single-unpinned",
        "independent",
        "serial-init",
        "numa-aware",
    ] {
        interleaved(cell(&v, wl, "interleave-accessing"), &[0, 1, 2, 3]);
    }
    all_on(cell(&v, "single-pinned", "interleave-accessing"), 0);
    // The pinned single thread runs on the first CPU, its data local.
    let pinned = cell(&v, "single-pinned", "local");
    ran_on(pinned, &[0]);
    all_on(pinned, 0);
    ran_on(cell(&v, "single-pinned", "one-node"), &[0]);
    // The unpinned thread: its CPUs are recorded, and its first-touch pages
    // are on the nodes of the CPUs it ran on.
    let free = cell(&v, "single-unpinned", "local");
    let w = &workers(free)[0];
    assert_eq!(w["pinned"], false);
    let seen: Vec<u64> = w["seen_cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert!(!seen.is_empty() && seen.iter().all(|c| *c < 8), "{seen:?}");
    assert!(w["migrations"].is_u64());
    assert_eq!(free["requested_cpus"], serde_json::json!([null]));
    for b in buffers(w) {
        for (node, _) in nodes_of(b) {
            assert!(
                seen.iter().any(|c| quartet_node(*c) == node),
                "page on node {node}, thread seen on {seen:?}"
            );
        }
    }
    // Independent programs add up their rates; threaded programs wait for
    // the slowest thread.
    assert_eq!(cell(&v, "independent", "local")["aggregate"], "sum");
    assert_eq!(cell(&v, "numa-aware", "local")["aggregate"], "slowest");
    // A recommendation per workload, and no one-node note on four nodes.
    let topics: Vec<&str> = v["recommendations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["topic"].as_str().unwrap())
        .collect();
    for t in ["single-pinned", "independent", "serial-init", "numa-aware"] {
        assert!(topics.contains(&t), "{topics:?}");
    }
    let notes = v["notes"].to_string();
    assert!(!notes.contains("degenerate"), "{notes}");
    assert!(notes.contains("one-node is node 2"), "{notes}");
}

#[test]
fn policies_binds_to_each_chosen_node() {
    for (step, node) in [
        ("policies_node0", 0),
        ("policies_node1", 1),
        ("policies_node3", 3),
    ] {
        let v = quartet().json(step, 0);
        assert_eq!(v["node"], node);
        let cells = v["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 3, "{step}");
        for c in cells {
            assert_eq!(c["policy"], "one-node");
            assert_eq!(c["memory_policy"], format!("bind:{node}"));
            assert_eq!(c["verified"], true, "{step}: {c}");
            all_on(c, node);
        }
        ran_on(
            cell(&v, "numa-aware", "one-node"),
            &[0, 2, 4, 6, 1, 3, 5, 7],
        );
    }
}

#[test]
fn policies_compact_layout_fills_nodes_in_turn() {
    let v = quartet().json("policies_compact", 0);
    assert_eq!(v["cpus"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["thread_policy"], "compact");
    assert_eq!(v["cells"].as_array().unwrap().len(), 4);
    let aware = cell(&v, "numa-aware", "local");
    ran_on(aware, &[0, 1, 2, 3]);
    let nodes: Vec<Vec<(u32, u64)>> = workers(aware)
        .iter()
        .map(|w| nodes_of(&buffers(w)[0]))
        .collect();
    let p = pages(&buffers(&workers(aware)[0])[0]);
    assert_eq!(
        nodes,
        vec![vec![(0, p)], vec![(0, p)], vec![(1, p)], vec![(1, p)]]
    );
    all_on(cell(&v, "serial-init", "local"), 0);
    interleaved(cell(&v, "serial-init", "interleave"), &[0, 1, 2, 3]);
}

#[test]
fn policies_interleaves_over_exactly_the_accessing_nodes() {
    let v = quartet().json("policies_accessing", 0);
    assert_eq!(v["cpus"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["accessing_nodes"], serde_json::json!([0, 1]));
    assert_eq!(v["interleave_nodes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(v["cells"].as_array().unwrap().len(), 6);
    assert_eq!(v["verified"], true, "{:?}", v["cells"]);
    for wl in ["serial-init", "numa-aware"] {
        let c = cell(&v, wl, "interleave-accessing");
        assert_eq!(c["memory_policy"], "interleave:0-1", "{wl}");
        assert_eq!(c["verified"], true, "{c}");
        // Every buffer's pages on exactly nodes 0 and 1, evenly.
        interleaved(c, &[0, 1]);
        ran_on(c, &[0, 1, 2, 3]);
        interleaved(cell(&v, wl, "interleave"), &[0, 1, 2, 3]);
    }
    // One pinned thread on CPU 0: its accessing node is node 0 alone.
    let pinned = cell(&v, "single-pinned", "interleave-accessing");
    assert_eq!(pinned["memory_policy"], "interleave:0");
    all_on(pinned, 0);
    assert!(
        v["notes"]
            .to_string()
            .contains("interleave-accessing spreads"),
        "{}",
        v["notes"]
    );
    // Four nodes: comparisons are rank tests, each with its verdict.
    for r in v["recommendations"].as_array().unwrap() {
        for c in r["comparisons"].as_array().unwrap() {
            let verdict = c["verdict"].as_str().unwrap();
            assert!(
                ["holds", "does_not_hold", "cannot_tell"].contains(&verdict),
                "{c}"
            );
            assert_eq!(c["significant"], verdict == "holds", "{c}");
        }
    }
}

#[test]
fn policies_text_and_errors() {
    let s = quartet().step("policies_text");
    assert_eq!(s.rc, 0, "{}", s.err);
    for needle in [
        "interleave 0-3",
        "one node (0)",
        "1 thread, pinned",
        "8 threads, NUMA-aware",
        "n0 25% n1 25% n2 25% n3 25%",
        "placement verified in every cell",
        "recommendation for this machine",
    ] {
        assert!(s.out.contains(needle), "'{needle}' in:\n{}", s.out);
    }
    assert!(!s.out.contains("degenerate"), "{}", s.out);
    one_line_error(quartet().step("policies_err_node"), 2, "--node");
}

#[test]
fn policies_interleaves_over_and_binds_to_the_cpuless_node() {
    let v = ring().json("policies_cpuless", 0);
    assert_eq!(v["interleave_nodes"], serde_json::json!([0, 1, 2, 3, 4]));
    assert_eq!(v["node"], 4);
    assert_eq!(v["verified"], true, "{:?}", v["cells"]);
    all_on(cell(&v, "numa-aware", "one-node"), 4);
    all_on(cell(&v, "single-pinned", "one-node"), 4);
    interleaved(cell(&v, "numa-aware", "interleave"), &[0, 1, 2, 3, 4]);
    // The CPU-less node runs no thread, so it is not an accessing node.
    assert_eq!(v["accessing_nodes"], serde_json::json!([0, 1, 2, 3]));
    interleaved(
        cell(&v, "numa-aware", "interleave-accessing"),
        &[0, 1, 2, 3],
    );
    // Ring4: CPU n on node n; NUMA-aware threads keep their data local.
    let aware = cell(&v, "numa-aware", "local");
    for w in workers(aware) {
        let cpu = w["requested_cpu"].as_u64().unwrap() as u32;
        for b in buffers(w) {
            assert_eq!(nodes_of(b), vec![(cpu, pages(b))]);
        }
    }
    assert!(v["notes"].to_string().contains("node 4 has no CPUs"));
}
