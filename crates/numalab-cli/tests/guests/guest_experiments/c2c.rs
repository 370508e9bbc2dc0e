//! `numalab c2c` in the multi-node guest: every CPU of every node in the
//! matrix, node marks, threads where they were pinned. Timings are not
//! asserted (TCG).
#![allow(unused_imports)]

use crate::common::{nodes_of, one_line_error};
use crate::guest_experiments::{quartet, ring};
use serde_json::{json, Value};

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    ("c2c_all", "numalab c2c --budget-each 0.02 --json"),
    (
        "c2c_text",
        "numalab c2c --cpus node:0,node:3 --figures modified,clean --budget-each 0.02",
    ),
    ("c2c_err_one_cpu", "numalab c2c --cpus 5"),
];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[
    (
        "c2c_ring",
        "numalab c2c --figures modified --budget-each 0.02 --json",
    ),
    ("c2c_err_cpuless", "numalab c2c --cpus node:4"),
];

fn square(v: &Value, n: usize) {
    let rows = v.as_array().expect("matrix rows");
    assert_eq!(rows.len(), n);
    for (i, r) in rows.iter().enumerate() {
        let r = r.as_array().unwrap();
        assert_eq!(r.len(), n);
        for (j, x) in r.iter().enumerate() {
            if i == j {
                assert!(x.is_null(), "diagonal [{i}][{j}] = {x}");
            } else {
                // A number, nothing more: TCG timings mean nothing (a clean
                // round can even come out below the clock's own cost: 0).
                assert!(x.as_f64().is_some_and(|x| x >= 0.0), "[{i}][{j}] = {x}");
            }
        }
    }
}

#[test]
fn quartet_c2c_measures_every_pair_on_every_node() {
    let v = quartet().json("c2c_all", 0);
    assert_eq!(v["command"], "c2c");
    assert_eq!(v["cpus"], json!([0, 1, 2, 3, 4, 5, 6, 7]));
    assert_eq!(v["nodes"], json!([0, 0, 1, 1, 2, 2, 3, 3]));
    assert_eq!(v["pair_count"], 28);
    let mx = &v["matrices"];
    for key in [
        "modified_ns",
        "modified_cycles",
        "clean_ns",
        "clean_cycles",
        "false_sharing_ns",
        "false_sharing_ratio",
    ] {
        if key.ends_with("cycles") && mx[key].is_null() {
            continue; // no clock measured in the guest: no cycle figures
        }
        square(&mx[key], 8);
    }
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 28);
    for p in pairs {
        let (a, b) = (&p["cpus"][0], &p["cpus"][1]);
        assert_eq!(p["verification"]["requested"], json!([a, b]));
        assert_eq!(p["verification"]["seen"], json!([[a], [b]]), "{p}");
        assert_eq!(p["verification"]["verified"], true);
        let node = |c: &Value| c.as_u64().unwrap() / 2;
        assert_eq!(p["nodes"], json!([node(a), node(b)]));
    }
    assert_eq!(v["verification"]["verified"], true);
    // Node pairs: 4 within (1 CPU pair each), 6 across (4 each).
    let ns = v["node_summary"].as_array().unwrap();
    assert_eq!(ns.len(), 10);
    for s in ns {
        let within = s["nodes"][0] == s["nodes"][1];
        assert_eq!(s["pairs"], if within { 1 } else { 4 }, "{s}");
        assert!(s["modified_ns"].is_number(), "{s}");
    }
}

#[test]
fn quartet_c2c_text_marks_node_boundaries() {
    let s = quartet().step("c2c_text");
    assert_eq!(s.rc, 0, "{}", s.err);
    let out = &s.out;
    assert!(out.contains("c2c over CPUs 0-1,6-7"), "{out}");
    let m: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("Modified line, one-way latency (ns)"))
        .take(8)
        .collect();
    assert!(
        m[1].contains("node 0") && m[1].contains("| node 3"),
        "{out}"
    );
    assert!(m[2].contains("CPU") && m[2].contains('|'), "{out}");
    assert!(m[3].trim_start().starts_with("node 0"), "{out}");
    assert!(m[5].contains("---") && m[5].contains('+'), "{out}");
    assert!(m[6].trim_start().starts_with("node 3"), "{out}");
    assert!(out.contains("Clean line (ns per load)"), "{out}");
    assert!(!out.contains("False sharing"), "{out}");
    assert!(out.contains("placement verified"), "{out}");
    one_line_error(quartet().step("c2c_err_one_cpu"), 2, "at least two");
}

#[test]
fn ring_c2c_single_cpu_nodes_have_no_pair_within() {
    let v = ring().json("c2c_ring", 0);
    assert_eq!(v["cpus"], json!([0, 1, 2, 3]));
    assert_eq!(
        v["nodes"],
        json!([0, 1, 2, 3]),
        "the CPU-less node 4 has no CPU to pair"
    );
    square(&v["matrices"]["modified_ns"], 4);
    assert!(
        v["matrices"]["clean_ns"].is_null(),
        "only the figure asked for"
    );
    for s in v["node_summary"].as_array().unwrap() {
        if s["nodes"][0] == s["nodes"][1] {
            assert_eq!(s["pairs"], 0);
            assert!(s["modified_ns"].is_null());
        } else {
            assert_eq!(s["pairs"], 1);
        }
    }
    one_line_error(ring().step("c2c_err_cpuless"), 2, "CPU-less");
}
