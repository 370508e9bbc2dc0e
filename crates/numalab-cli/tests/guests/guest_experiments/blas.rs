//! `numalab blas` in the Quartet guest (4 nodes in a ring, 2 CPUs each):
//! every operand of every placement, serial and parallel, has its pages on
//! the node its placement names, and the study's 4 x 4^3 = 256 DGEMM
//! placements (its Figure 2) run unfolded, each with its contention. Timings inside the guest (TCG) mean nothing and are
//! never asserted. Runs in the Quartet guest guest_experiments.rs boots.

#![allow(unused_imports)]

use crate::common::{one_line_error, Guest};
use crate::guest_experiments::quartet_measures as quartet;
use serde_json::Value;
use std::collections::BTreeSet;

/// Steps run in the Quartet guest (short measurements: the guest checks
/// placement, not speed).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "blas_serial",
        "numalab blas --n 64 --budget-each 0.01 --min-reps 2 --warmup 0 --json",
    ),
    (
        "blas_full",
        "numalab blas --n 32 --kernels dgemm --every-case --budget-each 0.005 --min-reps 2 --warmup 0 --json",
    ),
    // daxpy alone: counting dgemv's 4^12 x 4! parallel placements took
    // 100 of this step's 111 s under TCG (2 s natively), and the counts are
    // the host's to check (host/blas.rs, on the Quartet's topology file);
    // the guest checks where each thread's operands land.
    (
        "blas_parallel",
        "numalab blas --n 64 --kernels daxpy --parallel 1 --budget-each 0.01 --min-reps 2 --warmup 0 --json",
    ),
    ("blas_err_node", "numalab blas --node 9 --list"),
];

/// Hops between two nodes of the Quartet's ring (0-1-3-2-0): 0 on the same
/// node, 2 to the opposite one, else 1.
fn ring_hops(a: u64, b: u64) -> u64 {
    let pos = |n: u64| [0u64, 1, 3, 2].iter().position(|&x| x == n).unwrap() as i64;
    let d = (pos(a) - pos(b)).rem_euclid(4);
    d.min(4 - d) as u64
}

/// Every operand wholly on its node, verified; returns the nodes in order.
fn operand_nodes(operands: &Value, cpu_node: u64, what: &str) -> Vec<u64> {
    operands
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let node = o["node"].as_u64().unwrap();
            let pages = o["pages_by_node"].as_object().unwrap();
            assert_eq!(
                pages.keys().cloned().collect::<Vec<_>>(),
                vec![node.to_string()],
                "{what}: {o}"
            );
            assert_eq!(o["verified"], true, "{what}: {o}");
            assert_eq!(o["hops"], ring_hops(cpu_node, node), "{what}: {o}");
            node
        })
        .collect()
}

#[test]
fn quartet_blas_serial_puts_every_operand_on_its_node() {
    let v = quartet().json("blas_serial", 0);
    assert_eq!(v["command"], "blas");
    assert_eq!(v["mode"], "serial");
    assert_eq!(v["verified"], true);
    assert_eq!(v["n"], 64);
    assert_eq!(v["openblas"]["num_threads_after"], 1);
    assert_eq!(v["memory_nodes"], serde_json::json!([0, 1, 2, 3]));
    for k in v["kernels"].as_array().unwrap() {
        let name = k["kernel"].as_str().unwrap();
        let q = k["operands"].as_array().unwrap().len() as u32;
        let ps = k["placements"].as_array().unwrap();
        // One placement per class under the ring's 8 automorphisms, a
        // thread on node 0 standing for all four: (4^q + 2^q) / 2.
        assert_eq!(ps.len(), (4usize.pow(q) + 2usize.pow(q)) / 2, "{name}");
        for p in ps {
            let cpu_node = p["cpu_node"].as_u64().unwrap();
            assert_eq!(cpu_node, 0, "{name}");
            operand_nodes(&p["operands"], cpu_node, name);
            assert!(p["contention"].as_f64().unwrap() >= 1.0, "{p}");
        }
        let stands: u64 = ps.iter().map(|p| p["stands_for"].as_u64().unwrap()).sum();
        assert_eq!(stands, 4 * 4u64.pow(q), "{name}");
        assert_eq!(k["sensitivity"]["measurable"], true);
    }
    let verdict = v["finding"]["verdict"].as_str().unwrap();
    assert!(
        ["holds", "does not hold", "cannot tell (inside the noise)"].contains(&verdict),
        "{verdict}"
    );
}

#[test]
fn quartet_blas_full_runs_the_studys_256_dgemm_placements_by_contention() {
    let v = quartet().json("blas_full", 0);
    assert_eq!(v["verified"], true);
    let k = &v["kernels"][0];
    let ps = k["placements"].as_array().unwrap();
    assert_eq!(ps.len(), 256);
    let mut by_contention: std::collections::BTreeMap<u64, u64> = Default::default();
    let distinct: BTreeSet<Vec<u64>> = ps
        .iter()
        .map(|p| {
            let cpu_node = p["cpu_node"].as_u64().unwrap();
            let nodes = operand_nodes(&p["operands"], cpu_node, "dgemm");
            let c = p["contention"].as_f64().unwrap();
            // Seen from node 0: the study's best case and its hop twin.
            if cpu_node == 0 && nodes == [0, 1, 2] {
                assert_eq!(c, 1.0);
            }
            if cpu_node == 0 && nodes == [0, 1, 1] {
                assert_eq!(c, 2.0);
            }
            if nodes.iter().all(|&n| n == cpu_node) {
                assert_eq!(c, 3.0, "all local: one controller serves A, B and C");
            }
            *by_contention
                .entry((c * 1000.0).round() as u64)
                .or_default() += 1;
            let mut key = vec![cpu_node];
            key.extend(nodes);
            key
        })
        .collect();
    assert_eq!(distinct.len(), 256, "every placement once");
    // The Figure 2 order: groups by contention, lowest first, covering
    // every placement.
    let groups = k["sensitivity"]["per_contention"].as_array().unwrap();
    let values: Vec<f64> = groups
        .iter()
        .map(|g| g["contention"].as_f64().unwrap())
        .collect();
    assert!(values.windows(2).all(|w| w[0] < w[1]), "{values:?}");
    assert_eq!(
        groups
            .iter()
            .map(|g| g["placements"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        by_contention.values().copied().collect::<Vec<_>>()
    );
    assert_eq!(values.first(), Some(&1.0));
    let verdict = k["contention_finding"]["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("holds")
            || verdict.starts_with("does not hold")
            || verdict.starts_with("cannot tell"),
        "{verdict}"
    );
    assert!(!v["openblas"]["core"].as_str().unwrap().is_empty());
}

#[test]
fn quartet_blas_parallel_puts_each_threads_operands_on_their_nodes() {
    let v = quartet().json("blas_parallel", 0);
    assert_eq!(v["mode"], "parallel");
    assert_eq!(v["verified"], true);
    for k in v["kernels"].as_array().unwrap() {
        let classes = k["contention_classes"].as_array().unwrap();
        assert!(classes.len() > 1, "{k}");
        for c in classes {
            for p in c["placements"].as_array().unwrap() {
                let ts = p["threads"].as_array().unwrap();
                assert_eq!(ts.len(), 4, "one thread per CPU node");
                let nodes: BTreeSet<u64> =
                    ts.iter().map(|t| t["cpu_node"].as_u64().unwrap()).collect();
                assert_eq!(nodes.len(), 4);
                for t in ts {
                    let cpu_node = t["cpu_node"].as_u64().unwrap();
                    operand_nodes(&t["operands"], cpu_node, "parallel");
                }
            }
        }
    }
}

#[test]
fn quartet_blas_unknown_node_is_one_line() {
    one_line_error(
        quartet().step("blas_err_node"),
        2,
        "--node 9 is not a node with CPUs this process may use; CPU nodes: 0-3",
    );
}
