//! `numalab sizes` with several threads in the multi-node guest: spread
//! threads land on different nodes and every size's buffers are on the
//! node the policy binds them to. Timings are not asserted (TCG).

use crate::common::one_line_error;
use crate::guest_experiments::quartet;

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "sizes_spread_remote",
        "numalab sizes --threads 2 --layout scatter --mem bind:3 --max-size 256K --budget-each 0.05 --min-reps 2 --json",
    ),
    ("sizes_err_threads", "numalab sizes --threads 9"),
];

#[test]
fn quartet_sizes_spread_threads_on_two_nodes_memory_on_node_3() {
    let v = quartet().json("sizes_spread_remote", 0);
    assert_eq!(v["command"], "sizes");
    assert_eq!(v["threads"], 2);
    assert_eq!(v["layout"], "scatter");
    assert_eq!(v["memory"], "bind:3");
    // Node n holds CPUs 2n and 2n+1: spread puts one thread on node 0, one on node 1.
    let cpus: Vec<u64> = v["cpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert_eq!(cpus.len(), 2);
    assert_ne!(cpus[0] / 2, cpus[1] / 2, "{cpus:?}");
    let points = v["points"].as_array().unwrap();
    assert!(!points.is_empty());
    for p in points {
        let by_node = p["bytes_by_node"].as_object().unwrap();
        assert_eq!(by_node.keys().collect::<Vec<_>>(), vec!["3"], "{p}");
        let bytes = p["bytes"].as_u64().unwrap();
        assert!(by_node["3"].as_u64().unwrap() >= 7 * bytes, "{p}");
        assert_eq!(p["per_core_gbps"].as_array().unwrap().len(), 3);
        assert_eq!(p["verified"], true);
    }
    one_line_error(
        quartet().step("sizes_err_threads"),
        2,
        "9 threads asked but only 8 CPUs are allowed",
    );
}
