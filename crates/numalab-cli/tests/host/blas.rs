//! `numalab blas` on this host: the serial and parallel runs complete with
//! a small n and budget and report every placement with its operands'
//! pages verified; the plan on the Quartet fixture (folded and full); bad
//! input refused in one line. Speeds are never asserted.

use crate::common;

use common::{assert_one_line_error, fails, fixture, json, num, numalab, stdout, turn, Run};
use serde_json::Value;

const QUARTET: &str = "qemu-quartet-4n2c-ring.xml";

/// Every operand of a placement sits wholly on its node, verified.
fn assert_operands_on_their_nodes(operands: &Value, what: &str) {
    for o in operands.as_array().unwrap() {
        let node = o["node"].as_u64().unwrap().to_string();
        let pages = o["pages_by_node"].as_object().unwrap();
        assert_eq!(pages.keys().collect::<Vec<_>>(), vec![&node], "{what}: {o}");
        assert!(pages[&node].as_u64().unwrap() > 0, "{what}: {o}");
        assert_eq!(o["verified"], true, "{what}: {o}");
        assert_eq!(o["problems"].as_array().unwrap().len(), 0, "{what}: {o}");
    }
}

#[test]
fn serial_run_reports_every_placement_verified_and_the_numerical_check() {
    let _t = turn();
    let v = json(&[
        "blas",
        "--n",
        "48",
        "--budget-each",
        "0.02",
        "--check",
        "--json",
    ]);
    assert_eq!(v["command"], "blas");
    assert_eq!(v["mode"], "serial");
    assert_eq!(v["n"], 48);
    assert_eq!(v["n_requested"], 48);
    assert!(v["scaled_down"].is_null());
    assert_eq!(v["verified"], true);
    assert_eq!(v["openblas"]["num_threads_after"], 1);
    assert!(
        v["openblas"]["config"]
            .as_str()
            .unwrap()
            .contains("OpenBLAS"),
        "{}",
        v["openblas"]
    );
    assert_eq!(v["check"]["checked"], true);
    assert!(num(&v["check"]["max_rel_error"]) <= 1e-12);
    assert_eq!(v["check"]["sizes"].as_array().unwrap().len(), 64);

    let memory_nodes = v["memory_nodes"].as_array().unwrap().len();
    let planned = json(&["blas", "--list", "--json"]);
    let kernels = v["kernels"].as_array().unwrap();
    let names: Vec<&str> = kernels
        .iter()
        .map(|k| k["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["daxpy", "triad", "dgemv", "dgemm"]);
    let mut runs = 0;
    for k in kernels {
        let name = k["kernel"].as_str().unwrap();
        let ps = k["placements"].as_array().unwrap();
        runs += ps.len();
        if memory_nodes == 1 {
            assert_eq!(ps.len(), 1, "{name}: one memory node, one placement");
            assert!(ps[0]["hops"].as_array().unwrap().iter().all(|h| *h == 0));
            assert_eq!(ps[0]["stands_for"], 1);
        }
        let operands = k["operands"].as_array().unwrap().len();
        for p in ps {
            assert_eq!(p["operands"].as_array().unwrap().len(), operands);
            assert_operands_on_their_nodes(&p["operands"], name);
            assert!(num(&p["gflops"]["median"]) > 0.0, "{name}: {p}");
            assert!(p["samples"].as_u64().unwrap() >= 2, "{name}: {p}");
        }
        let s = &k["sensitivity"];
        assert!(num(&s["best"]) >= num(&s["worst"]), "{s}");
        assert_eq!(s["measurable"], memory_nodes > 1);
    }
    assert_eq!(runs, planned["placements"].as_array().unwrap().len());
    // Vectors of n² elements for level 1, n x n matrices for dgemm.
    assert_eq!(kernels[0]["elements"], serde_json::json!([2304, 2304]));
    assert_eq!(kernels[2]["elements"], serde_json::json!([2304, 48, 48]));
    assert_eq!(num(&kernels[3]["flops_per_call"]), 2.0 * 48f64.powi(3));

    let f = &v["finding"];
    assert!(f["rule"]
        .as_str()
        .unwrap()
        .contains("s_i > s_j * (1 + u_i + u_j)"));
    assert_eq!(f["levels"].as_array().unwrap().len(), 3);
    if memory_nodes == 1 {
        assert_eq!(
            f["verdict"],
            "cannot be measured here (one memory node: every placement is local)"
        );
        assert!(f["holds"].is_null());
    }
}

#[test]
fn text_names_the_openblas_threads_and_the_finding() {
    let _t = turn();
    let out = stdout(&[
        "blas",
        "--levels",
        "1",
        "--kernels",
        "daxpy",
        "--n",
        "32",
        "--budget-each",
        "0.02",
    ]);
    assert!(
        out.starts_with("BLAS placement sensitivity, serial mode, n = 32"),
        "{out}"
    );
    assert!(
        out.contains("openblas_set_num_threads(1) before the first BLAS call -> 1 thread(s)"),
        "{out}"
    );
    assert!(
        out.contains("\ndaxpy (level 1), operands x, y of 1024, 1024 elements\n"),
        "{out}"
    );
    assert!(!out.contains("dgemm"), "{out}");
    assert!(
        out.contains("x@0 y@0") || !out.contains("memory nodes 0,"),
        "{out}"
    );
    assert!(out.contains("verified"), "{out}");
    assert!(
        out.contains("level 1 > level 2 > level 3 in sensitivity: "),
        "{out}"
    );
}

#[test]
fn parallel_run_measures_each_contention_class_with_its_pages_verified() {
    let _t = turn();
    let v = json(&[
        "blas",
        "--parallel",
        "2",
        "--kernels",
        "daxpy,dgemm",
        "--n",
        "32",
        "--budget-each",
        "0.02",
        "--json",
    ]);
    assert_eq!(v["mode"], "parallel");
    assert_eq!(v["verified"], true);
    let threads = v["cpu_nodes"].as_array().unwrap().len();
    for k in v["kernels"].as_array().unwrap() {
        assert_eq!(k["placements"].as_array().unwrap().len(), 0);
        let classes = k["contention_classes"].as_array().unwrap();
        assert!(!classes.is_empty(), "{k}");
        let shares: f64 = classes.iter().map(|c| num(&c["share"])).sum();
        assert!((shares - 1.0).abs() < 1e-6, "shares sum to {shares}");
        for c in classes {
            let ps = c["placements"].as_array().unwrap();
            assert!((1..=2).contains(&ps.len()), "{c}");
            for p in ps {
                let ts = p["threads"].as_array().unwrap();
                assert_eq!(ts.len(), threads, "one thread per CPU node");
                for t in ts {
                    assert_operands_on_their_nodes(&t["operands"], "parallel");
                }
                assert!(num(&p["gflops"]["median"]) > 0.0, "{p}");
            }
        }
    }
}

#[test]
fn quartet_plan_folds_by_the_rings_automorphisms_and_full_lists_every_placement() {
    let q = fixture(QUARTET);
    let v = json(&["blas", "--list", "--topology", &q, "--json"]);
    let runs = v["placements"].as_array().unwrap();
    // The ring's 8 automorphisms move every node onto node 0: 4 x 4^q
    // placements fold into (4^q + 2^q) / 2 classes of a thread on node 0
    // (the reflection through node 0 fixes the 2^q on nodes 0 and 3):
    // daxpy 10, triad, dgemv and dgemm 36.
    assert_eq!(runs.len(), 10 + 36 + 36 + 36);
    assert!(runs.iter().all(|r| r["cpu_node"] == 0), "{v}");
    let dgemm: Vec<&Value> = runs.iter().filter(|r| r["kernel"] == "dgemm").collect();
    assert_eq!(dgemm.len(), 36);
    let stands: u64 = dgemm
        .iter()
        .map(|r| r["stands_for"].as_u64().unwrap())
        .sum();
    assert_eq!(stands, 256, "the classes stand for all 4 x 4^3 placements");
    // Each with its contention: A@0 B@1 C@1 and A@0 B@1 C@2 (hop tuple
    // 0/1/1 both) are two classes, of contention 2 and 1.
    let at = |nodes: [u64; 3]| {
        dgemm
            .iter()
            .find(|r| r["nodes"] == serde_json::json!(nodes))
            .unwrap_or_else(|| panic!("{nodes:?} not run"))
    };
    assert_eq!(at([0, 1, 1])["contention"], 2.0);
    assert_eq!(at([0, 1, 2])["contention"], 1.0);
    assert_eq!(at([0, 1, 1])["class"], "0/1/1");
    assert_eq!(at([0, 1, 2])["class"], "0/1/1");
    let full = json(&[
        "blas",
        "--list",
        "--topology",
        &q,
        "--every-case",
        "--kernels",
        "dgemm",
        "--node",
        "2",
        "--json",
    ]);
    let full = full["placements"].as_array().unwrap();
    assert_eq!(full.len(), 64);
    assert!(full
        .iter()
        .all(|r| r["cpu_node"] == 2 && r["stands_for"] == 1));
    let text = stdout(&[
        "blas",
        "--list",
        "--topology",
        &q,
        "--kernels",
        "daxpy",
        "--node",
        "0",
    ]);
    assert!(text.starts_with("10 placement(s) to run:\n"), "{text}");
    assert!(
        text.contains("  daxpy     0    0  2/2            1          2  x@3 y@3\n"),
        "{text}"
    );
}

#[test]
fn quartet_parallel_plan_draws_distinct_placements_per_contention_class() {
    let q = fixture(QUARTET);
    let v = json(&[
        "blas",
        "--list",
        "--topology",
        &q,
        "--parallel",
        "3",
        "--kernels",
        "dgemv",
        "--json",
    ]);
    let kernels = v["parallel"].as_array().unwrap();
    assert_eq!(kernels.len(), 1);
    assert_eq!(kernels[0][0], "dgemv");
    let classes = kernels[0][1].as_array().unwrap();
    assert!(classes.len() > 1, "{v}");
    let shares: f64 = classes.iter().map(|c| num(&c["share"])).sum();
    assert!((shares - 1.0).abs() < 1e-9, "shares sum to {shares}");
    for c in classes {
        let runs = c["runs"].as_array().unwrap();
        assert!(runs.len() <= 3, "{c}");
        // A class too rare for uniform draws to meet may stay empty.
        if num(&c["share"]) > 0.01 {
            assert!(!runs.is_empty(), "{c}");
        }
        let labels: std::collections::BTreeSet<&str> =
            runs.iter().map(|r| r["label"].as_str().unwrap()).collect();
        assert_eq!(labels.len(), runs.len(), "distinct placements: {c}");
        for r in runs {
            let threads = r["threads"].as_array().unwrap();
            assert_eq!(threads.len(), 4);
            for t in threads {
                assert_eq!(t["nodes"].as_array().unwrap().len(), 3, "A, x, y");
            }
            let contention = num(&r["contention"]);
            assert!(
                contention >= num(&c["low"]) && contention < num(&c["high"]),
                "{r}"
            );
        }
    }
}

#[test]
fn bad_input_is_one_line_exit_2() {
    fails(
        &["blas", "--n", "0"],
        "--n '0' is not a whole number from 1 to 20000",
    );
    fails(&["blas", "--n", "20001"], "from 1 to 20000");
    fails(
        &["blas", "--levels", "4"],
        "unknown BLAS level '4'; valid: 1, 2, 3",
    );
    fails(
        &["blas", "--kernels", "sgemm"],
        "unknown BLAS kernel 'sgemm'; valid: daxpy, triad, dgemv, dgemm",
    );
    fails(
        &["blas", "--levels", "3", "--kernels", "daxpy"],
        "select no kernel together",
    );
    fails(
        &["blas", "--parallel", "0"],
        "--parallel '0' is not a whole number from 1 to 1000",
    );
    fails(&["blas", "--parallel", "1001"], "from 1 to 1000");
    fails(
        &["blas", "--parallel", "2", "--every-case"],
        "cannot be used with",
    );
    fails(
        &["blas", "--node", "4095", "--list"],
        "--node 4095 is not a node with CPUs",
    );
    fails(&["blas", "--topology", "x.xml"], "--list");
    fails(&["blas", "--budget-each", "0"], "--budget");
    fails(&["blas", "--seed", "3"], "--parallel");
    fails(
        &["blas", "--parallel", "1", "--node", "0"],
        "cannot be used with",
    );
    let big = fixture("256ia64-64n2s2c.xml");
    fails(
        &["blas", "--list", "--every-case", "--topology", &big],
        "more than 10000 placements to run",
    );
}

/// OpenBLAS is loaded by `blas` when it first needs it, not linked: other
/// commands never map it (nor start its thread pool), and where it cannot
/// be loaded `blas` says so in one line before anything is placed
/// (NUMALAB_OPENBLAS names a library that is not there).
#[test]
fn openblas_is_loaded_by_blas_only_and_a_missing_one_is_one_line() {
    // `numalab run`'s command reads its parent's (numalab's) mappings.
    let r = numalab(&[
        "run",
        "--",
        "sh",
        "-c",
        "grep -q libhwloc /proc/$PPID/maps && echo hwloc; grep -c libopenblas /proc/$PPID/maps",
    ]);
    let said: Vec<&str> = r.out.lines().collect();
    assert_eq!(said, ["hwloc", "0"], "numalab's mappings: {r:?}");
    let r = Run::new(&["blas", "--levels", "1"])
        .env("NUMALAB_OPENBLAS", "/nonexistent/libopenblas.so.0")
        .run();
    assert_one_line_error(
        "blas with NUMALAB_OPENBLAS=/nonexistent/libopenblas.so.0",
        r.rc,
        &r.err,
        1,
        "OpenBLAS cannot be loaded (/nonexistent/libopenblas.so.0: cannot open shared object file",
    );
    assert!(r.err.contains("NUMALAB_OPENBLAS names it"), "{}", r.err);
    assert_eq!(r.out, "");
}
