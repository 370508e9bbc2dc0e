//! Per-array placement and `pdm --measure` in the Quartet guest (4 nodes in
//! a ring, 2 CPUs each): every array of a kernel has its pages exactly on
//! the node asked for it, from `--mem a=...,b=...,c=...`, from a placement
//! file with one entry per thread, and in every placement `pdm --measure`
//! draws. Timings (TCG) are never asserted.
#![allow(unused_imports)]

use crate::common::one_line_error;
use crate::guest_experiments::quartet_measures as quartet;
use serde_json::Value;
use std::collections::BTreeMap;

/// Short measurements without huge pages, so an 8 MiB array is exactly
/// 2048 pages of 4 KiB.
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "array_triad",
        "numalab bench bandwidth --kernel triad --cpus 0 --mem a=bind:0,b=bind:1,c=bind:3 --size 8M --thp off --budget-each 0.02 --min-reps 2 --warmup 0 --json",
    ),
    (
        "array_file",
        "printf '%s' '[{\"cpu\":0,\"arrays\":{\"a\":\"bind:1\",\"b\":\"bind:2\",\"c\":\"bind:3\"}},{\"cpu\":2,\"arrays\":{\"a\":\"bind:2\",\"b\":\"bind:3\",\"c\":\"bind:0\"}},{\"cpu\":4,\"arrays\":{\"a\":\"bind:3\",\"b\":\"bind:0\",\"c\":\"bind:1\"}},{\"cpu\":6,\"arrays\":{\"a\":\"bind:0\",\"b\":\"bind:1\",\"c\":\"bind:2\"}}]' > /tmp/placement.json && numalab bench bandwidth --kernel add --placement /tmp/placement.json --size 8M --thp off --budget-each 0.02 --min-reps 2 --warmup 0 --json",
    ),
    (
        "array_matrix",
        "numalab matrix --bandwidth --kernel copy --mem b=local --size 4M --budget-each 0.02 --min-reps 2 --warmup 0 --json",
    ),
    (
        "pdm_measure",
        "numalab pdm --kernel copy --measure 1 --size 4M --budget-each 0.02 --json",
    ),
    // 4 MiB arrays (the part's default, 16 MiB, is for real caches): each
    // placement faults 12 arrays in, which TCG does slowly (115 s at 16 MiB
    // and --budget 15).
    (
        "report_pdm_full",
        "numalab report -o /tmp/pdmr --full --parts pdm --size 4M --budget 8 >/dev/null && cat /tmp/pdmr/results.json && echo",
    ),
    (
        "array_err_name",
        "numalab bench bandwidth --kernel copy --mem c=bind:0",
    ),
];

/// Each array's pages by node (`{"a": {"0": 2048}}`), and checks every
/// array verified.
fn arrays(worker: &Value) -> BTreeMap<String, BTreeMap<String, u64>> {
    worker["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            assert_eq!(b["verified"], true, "{b}");
            assert_eq!(b["untouched_pages"], 0, "{b}");
            let pages = b["pages_by_node"]
                .as_object()
                .unwrap()
                .iter()
                .map(|(n, c)| (n.clone(), c.as_u64().unwrap()))
                .collect();
            (b["array"].as_str().unwrap().to_string(), pages)
        })
        .collect()
}

/// `{"a": {"N": pages}, ...}` for arrays each wholly on one node.
fn on(nodes: &[(&str, u32)], pages: u64) -> BTreeMap<String, BTreeMap<String, u64>> {
    nodes
        .iter()
        .map(|(a, n)| {
            (
                a.to_string(),
                [(n.to_string(), pages)].into_iter().collect(),
            )
        })
        .collect()
}

#[test]
fn quartet_triad_arrays_land_on_0_1_and_3() {
    let v = quartet().json("array_triad", 0);
    assert_eq!(v["verification"]["verified"], true);
    let w = &v["verification"]["workers"][0];
    assert_eq!(w["requested_cpu"], 0);
    assert_eq!(arrays(w), on(&[("a", 0), ("b", 1), ("c", 3)], 2048));
}

#[test]
fn quartet_placement_file_puts_each_threads_arrays_where_asked() {
    let v = quartet().json("array_file", 0);
    assert_eq!(v["verification"]["verified"], true);
    let ws = v["verification"]["workers"].as_array().unwrap();
    assert_eq!(ws.len(), 4);
    for (i, w) in ws.iter().enumerate() {
        let i = i as u32;
        assert_eq!(w["requested_cpu"], 2 * i);
        assert_eq!(
            arrays(w),
            on(
                &[("a", (i + 1) % 4), ("b", (i + 2) % 4), ("c", (i + 3) % 4)],
                2048
            ),
            "worker on CPU {}",
            2 * i
        );
    }
}

#[test]
fn quartet_matrix_reads_each_column_while_writing_locally() {
    let v = quartet().json("array_matrix", 0);
    assert_eq!(v["fixed_arrays"], "b=local");
    let rows = v["bandwidth"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    for row in rows {
        for cell in row.as_array().unwrap() {
            let (cpu, mem) = (
                cell["cpu_node"].as_u64().unwrap(),
                cell["mem_node"].as_u64().unwrap(),
            );
            let w = &cell["verification"]["workers"][0];
            let a = arrays(w);
            // THP may back the arrays with 2 MiB pages: check nodes only.
            let nodes = |name: &str| a[name].keys().cloned().collect::<Vec<_>>();
            assert_eq!(nodes("a"), vec![mem.to_string()], "a follows column {mem}");
            assert_eq!(nodes("b"), vec![cpu.to_string()], "b stays on row {cpu}");
        }
    }
}

/// `T0@0:a→1,b→2 T1@1:...` as (thread node, {array: node}) per thread.
fn parse_label(label: &str) -> Vec<(u32, BTreeMap<String, String>)> {
    label
        .split(' ')
        .map(|t| {
            let (head, qs) = t.split_once(':').unwrap();
            let node: u32 = head.split_once('@').unwrap().1.parse().unwrap();
            let arrays = qs
                .split(',')
                .map(|q| {
                    let (a, n) = q.split_once('→').unwrap();
                    (a.to_string(), n.to_string())
                })
                .collect();
            (node, arrays)
        })
        .collect()
}

#[test]
fn quartet_pdm_measure_runs_every_class_with_its_arrays_where_drawn() {
    let v = quartet().json("pdm_measure", 0);
    let m = &v["measured"];
    let classes = m["classes"].as_array().unwrap();
    // Copy, one thread per node on the ring: the count's classes, each run once.
    assert_eq!(classes.len(), v["classes"].as_array().unwrap().len());
    for c in classes {
        assert_eq!(c["placements"].as_array().unwrap().len(), 1, "{c}");
        assert_eq!(
            parse_label(c["placements"][0]["label"].as_str().unwrap()).len(),
            4
        );
    }
    check_measured(m);
    assert!(
        ["holds", "does not hold", "cannot tell"]
            .contains(&m["trend"]["verdict"].as_str().unwrap()),
        "{}",
        m["trend"]
    );
}

/// Every measured placement verified, each thread's arrays on the nodes
/// its label names. A class too rare for the uniform draws to meet (the
/// triad's all-on-one-node class is 96 of 402653184 placements) may run
/// fewer placements than wanted, or none, and a warning says so.
fn check_measured(m: &Value) {
    let classes = m["classes"].as_array().unwrap();
    assert!(classes.len() >= 2, "{classes:?}");
    let warnings = m["warnings"].to_string();
    for c in classes {
        let ps = c["placements"].as_array().unwrap();
        if c["share"].as_f64().unwrap() >= 1e-5 {
            assert!(!ps.is_empty(), "{c}");
        }
        if (ps.len() as u64) < c["wanted"].as_u64().unwrap() {
            let (lo, hi) = (c["low"].as_f64().unwrap(), c["high"].as_f64().unwrap());
            let range = format!("class [{lo}, {hi}): {} of", ps.len());
            assert!(warnings.contains(&range), "{range} not in {warnings}");
        }
        assert_eq!(c["verified"].as_u64(), Some(ps.len() as u64), "{c}");
        for p in ps {
            let threads = parse_label(p["label"].as_str().unwrap());
            for (t, (node, want)) in threads.iter().enumerate() {
                assert_eq!(p["cpus"][t], 2 * node, "{p}");
                let got: BTreeMap<String, String> = p["pages"][t]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(a, pages)| {
                        let nodes: Vec<&String> = pages.as_object().unwrap().keys().collect();
                        assert_eq!(nodes.len(), 1, "array {a} of thread {t}: {p}");
                        (a.clone(), nodes[0].clone())
                    })
                    .collect();
                assert_eq!(&got, want, "thread {t} of {}", p["label"]);
            }
        }
    }
}

#[test]
fn quartet_full_report_measures_the_triads_classes() {
    let doc = quartet().json("report_pdm_full", 0);
    crate::common::report::assert_valid(&doc, "quartet report --full --parts pdm");
    let r = &doc["parts"]["pdm"]["result"];
    assert_eq!(r["workloads"][1]["total_placements"], "402653184");
    assert!(r.get("not_measured").is_none(), "{r}");
    let m = &r["measured"];
    assert_eq!(m["kernel"], "triad");
    check_measured(m);
}

#[test]
fn quartet_unknown_array_is_one_line() {
    one_line_error(
        quartet().step("array_err_name"),
        2,
        "--mem: kernel copy has no array 'c' (its arrays: a, b)",
    );
}
