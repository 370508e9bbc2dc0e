//! `numalab apexmap` in the multi-node guest: a remote placement (and the
//! CPU-less node) whose pages are all where they were asked. Timings are not
//! asserted (TCG).
#![allow(unused_imports)]

use crate::common::{nodes_of, one_line_error};
use crate::guest_experiments::{quartet, ring};
use serde_json::{json, Value};

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "apexmap_remote",
        "numalab apexmap --cpu 0 --mem bind:3 --size 8M --alphas 0.01,1 --ls 1,1024 --budget-each 0.2 --json",
    ),
    ("apexmap_err_alpha", "numalab apexmap --alphas 0.1,2"),
    (
        "apexmap_unpacked",
        "numalab apexmap --copies unpacked --size 2M --alphas 1 --ls 1,64 --budget-each 0.1 --json",
    ),
    (
        "apexmap_both",
        "numalab apexmap --copies both --size 2M --alphas 0.01,1 --ls 1,64 --budget-each 0.1 --json",
    ),
];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[(
    "apexmap_cpuless",
    "numalab apexmap --cpu 2 --mem bind:4 --size 8M --alphas 1 --ls 1,64 --budget-each 0.1 --json",
)];

/// (node, bytes) of the apexmap buffer, and checks the worker's CPU.
fn buffer_nodes(v: &Value, cpu: u64) -> Vec<(String, u64)> {
    worker_nodes(&v["verification"]["workers"][0], cpu)
}

/// (node, bytes) of one worker's buffer, and checks the worker's CPU.
fn worker_nodes(w: &Value, cpu: u64) -> Vec<(String, u64)> {
    assert_eq!(w["requested_cpu"], cpu);
    assert!(
        w["seen_cpus"].as_array().unwrap().iter().all(|c| *c == cpu),
        "{w}"
    );
    let b = &w["buffers"][0];
    assert_eq!(b["untouched_pages"], 0);
    let page = b["page_size"].as_u64().unwrap();
    b["pages_by_node"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, n)| (k.clone(), n.as_u64().unwrap() * page))
        .collect()
}

#[test]
fn quartet_apexmap_remote_buffer_is_all_on_node_3() {
    let v = quartet().json("apexmap_remote", 0);
    assert_eq!(v["command"], "apexmap");
    assert_eq!(v["cpu"], 0);
    assert_eq!(v["policy"], "bind:3");
    assert_eq!(v["buffer_bytes"], 8 << 20);
    assert_eq!(v["alphas"], json!([0.01, 1.0]));
    assert_eq!(v["ls"], json!([1, 1024]));
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), 4);
    for p in pts {
        for key in ["ns", "gbps"] {
            assert!(p[key]["median"].as_f64().is_some_and(|x| x > 0.0), "{p}");
        }
        for key in [
            "blocks",
            "stream_len",
            "footprint_bytes",
            "hot99_bytes",
            "samples",
        ] {
            assert!(p[key].as_u64().is_some_and(|x| x > 0), "{key}: {p}");
        }
    }
    // Four points: the multi-level model only when it has at most four
    // parameters, else refused with a warning naming the counts.
    if v["model"].is_null() {
        let warnings = v["warnings"].as_array().unwrap();
        assert!(
            warnings.iter().any(|w| w
                .as_str()
                .unwrap()
                .contains("parameters (latency and bandwidth of")),
            "{warnings:?}"
        );
    } else {
        let levels = v["model"]["levels"].as_array().unwrap();
        assert_eq!(levels.last().unwrap()["name"], "memory");
        for p in pts {
            assert!(p["residual"].is_number(), "{p}");
        }
    }
    assert_eq!(buffer_nodes(&v, 0), vec![("3".to_string(), 8 << 20)]);
    assert_eq!(v["verification"]["verified"], true);
    assert!(v["environment"].is_object());
    one_line_error(quartet().step("apexmap_err_alpha"), 2, "(0, 1]");
}

#[test]
fn ring_apexmap_on_the_cpuless_node() {
    let v = ring().json("apexmap_cpuless", 0);
    assert_eq!(v["points"].as_array().unwrap().len(), 2);
    assert_eq!(buffer_nodes(&v, 2), vec![("4".to_string(), 8 << 20)]);
    assert_eq!(v["verification"]["verified"], true);
}

/// Checks a copies map: its mode, one copy per CPU of `cpus` in order,
/// every copy on its CPU with its 2 MiB all on that CPU's node (node =
/// CPU / 2 here), `points` points each with every copy's figures.
fn check_copies(v: &Value, mode: &str, cpus: &[u64], points: usize) {
    assert_eq!(v["copies"], mode);
    assert_eq!(v["copy_cpus"], json!(cpus));
    assert_eq!(v["buffer_bytes"], 2 << 20);
    let workers = v["verification"]["workers"].as_array().unwrap();
    assert_eq!(workers.len(), cpus.len(), "{mode}");
    for (w, &cpu) in workers.iter().zip(cpus) {
        assert_eq!(
            worker_nodes(w, cpu),
            vec![((cpu / 2).to_string(), 2 << 20)],
            "{mode}: copy on CPU {cpu}"
        );
    }
    assert_eq!(v["verification"]["verified"], true, "{mode}");
    let pts = v["points"].as_array().unwrap();
    assert_eq!(pts.len(), points, "{mode}");
    for p in pts {
        let on: Vec<u64> = p["copies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["cpu"].as_u64().unwrap())
            .collect();
        assert_eq!(on, cpus, "{mode}: {p}");
        assert!(p["copy_spread"].is_number(), "{mode}: {p}");
    }
}

#[test]
fn quartet_apexmap_unpacked_runs_one_copy_per_node_on_its_memory() {
    let v = quartet().json("apexmap_unpacked", 0);
    assert_eq!(v["command"], "apexmap");
    check_copies(&v, "unpacked", &[0, 2, 4, 6], 2);
}

#[test]
fn quartet_apexmap_both_packs_two_copies_on_node_0() {
    let v = quartet().json("apexmap_both", 0);
    assert_eq!(v["copies"], "both");
    check_copies(&v["unpacked"], "unpacked", &[0, 2, 4, 6], 4);
    check_copies(&v["packed"], "packed", &[0, 1], 4);
    assert_eq!(v["verification"]["workers"].as_array().unwrap().len(), 6);
    assert_eq!(v["verification"]["verified"], true);
    let d = v["difference"].as_array().unwrap();
    assert_eq!(d.len(), 4);
    for x in d {
        assert!(x["ratio"].is_number(), "{x}");
    }
    // Without an L2 in the guest's machine model (or a published model)
    // there is no prediction, and the warnings say why.
    if v["prediction"].is_null() {
        let warnings = v["warnings"].as_array().unwrap();
        assert!(
            warnings.iter().any(|w| w
                .as_str()
                .unwrap()
                .starts_with("prediction: the unpacked map has no published model")),
            "{warnings:?}"
        );
    } else {
        assert_eq!(v["prediction"]["sharing"], 2);
        assert_eq!(v["prediction"]["points"].as_array().unwrap().len(), 4);
    }
}
