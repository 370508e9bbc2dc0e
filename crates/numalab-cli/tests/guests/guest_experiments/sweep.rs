//! `numalab sweep` in the multi-node guest: the classic 4096-case truth
//! table of a 4-node ring, its folding, and every case's placement.

use crate::common::one_line_error;
use crate::guest_experiments::{quartet, ring};
use serde_json::Value;
use std::collections::BTreeMap;

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    ("sweep_list_full", "numalab sweep --thread-counts 2 --every-case --list --json"),
    ("sweep_list_folded", "numalab sweep --thread-counts 2 --list --json"),
    ("sweep_list_text", "numalab sweep --list"),
    // Every case of the nodes 0 and 1 CPUs against memory on nodes 0 and 3:
    // all three hop classes, 256 cases (sweep_list_full checks all 4096
    // are planned; running them took 180 s of the guest, verifying the
    // same code 16 times over).
    ("sweep_full_run", "numalab sweep --thread-counts 2 --every-case --cpus node:0,node:1 --mem-nodes 0,3 --size 256K --reps 1 --sample-ms 0 --thp off --json"),
    ("sweep_folded_findings", "numalab sweep --thread-counts 1,2 --size 1M --reps 1 --sample-ms 0 --thp off --json > /tmp/sweep.json; echo rc=$? >&2; cat /tmp/sweep.json"),
    ("sweep_findings_from_file", "numalab sweep --from /tmp/sweep.json --findings"),
    ("sweep_background", "numalab sweep --thread-counts 2 --cpus node:0 --mem-nodes 0-1 --access w --size 1M --background low --subscription full,under --background-size 1M --reps 1 --sample-ms 0 --thp off --json"),
    ("sweep_err_threads", "numalab sweep --thread-counts 9"),
    ("sweep_err_access", "numalab sweep --access x"),
    ("sweep_err_background", "numalab sweep --background huge"),
    ("sweep_err_subscription", "numalab sweep --background low --subscription most"),
    ("sweep_err_full_limit", "numalab sweep --thread-counts 3 --every-case --list"),
    ("sweep_err_kernel", "numalab sweep --read-kernel triad"),
    ("sweep_err_mem_nodes", "numalab sweep --mem-nodes 9"),
];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[
    ("sweep_ring_list", "numalab sweep --thread-counts 1 --list --json"),
    (
        "sweep_ring_run",
        "numalab sweep --thread-counts 1 --access r --size 1M --reps 1 --sample-ms 0 --thp off --json",
    ),
];

/// Quartet: CPU c is on node c / 2; the ring 0-1, 0-2, 1-3, 2-3.
fn quartet_hops(node: u64, mem: u64) -> u64 {
    if node == mem {
        0
    } else if node + mem == 3 {
        2
    } else {
        1
    }
}

fn class_sizes(cases: &[Value]) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for c in cases {
        *out.entry(c["class_key"].as_str().unwrap().to_string())
            .or_insert(0) += c["class_size"].as_u64().unwrap();
    }
    out
}

fn plan_cases(v: &Value) -> &Vec<Value> {
    v["plans"][0]["cases"].as_array().expect("cases")
}

#[test]
fn quartet_sweep_enumerates_the_4096_cases_with_labels_and_hops() {
    let v = quartet().json("sweep_list_full", 0);
    assert_eq!(v["plans"][0]["total_cases"], 4096);
    let cases = plan_cases(&v);
    assert_eq!(cases.len(), 4096);
    let mut labels = std::collections::BTreeSet::new();
    for c in cases {
        let ts = c["threads"].as_array().unwrap();
        assert_eq!(ts.len(), 2);
        let mut label = Vec::new();
        for t in ts {
            let (cpu, node, mem) = (
                t["cpu"].as_u64().unwrap(),
                t["node"].as_u64().unwrap(),
                t["mem"].as_u64().unwrap(),
            );
            assert_eq!(node, cpu / 2);
            assert_eq!(t["core"].as_u64().unwrap(), cpu % 2);
            assert_eq!(t["hops"].as_u64().unwrap(), quartet_hops(node, mem), "{c}");
            let rw = if t["access"] == "read" { "r" } else { "w" };
            label.push(format!("{node}.{}.{rw}.{mem}", cpu % 2));
        }
        assert_eq!(c["labels"], serde_json::json!(label));
        labels.insert(label.join(" "));
    }
    assert_eq!(labels.len(), 4096, "every case once");
    assert!(labels.contains("0.0.w.1 1.0.w.0"), "crossfire is a case");
}

#[test]
fn quartet_sweep_folding_reproduces_the_full_class_sizes() {
    let full = quartet().json("sweep_list_full", 0);
    let folded = quartet().json("sweep_list_folded", 0);
    assert_eq!(folded["plans"][0]["node_automorphisms"], 8);
    let f = plan_cases(&folded);
    assert!(f.len() < 4096 / 8, "{} classes", f.len());
    let sizes = class_sizes(f);
    assert_eq!(sizes.len(), f.len(), "one representative per class");
    assert_eq!(sizes.values().sum::<u64>(), 4096);
    assert_eq!(sizes, class_sizes(plan_cases(&full)));
    let text = &quartet().step("sweep_list_text").out;
    assert!(text.contains("2 thread(s): 4096 cases"), "{text}");
    assert!(text.contains("1 thread(s): 64 cases"), "{text}");
}

fn assert_run_verified(run: &Value, hops: impl Fn(u64, u64) -> u64) {
    for c in run["cases"].as_array().unwrap() {
        assert_eq!(c["verified"], true, "{c}");
        for t in c["threads"].as_array().unwrap() {
            assert_eq!(t["seen_cpus"], serde_json::json!([t["cpu"]]), "{c}");
            assert_eq!(
                t["hops"].as_u64().unwrap(),
                hops(t["node"].as_u64().unwrap(), t["mem"].as_u64().unwrap())
            );
        }
    }
}

fn assert_buffers_on_their_nodes(v: &Value, per_thread_nodes: usize, threads: usize) {
    let bufs = v["buffers"].as_array().unwrap();
    assert_eq!(bufs.len(), per_thread_nodes * threads);
    for b in bufs {
        let node = b["node"].to_string();
        for when in ["at_start", "at_end"] {
            let pages = b[when]["pages_by_node"].as_object().unwrap();
            assert_eq!(pages.len(), 1, "{b}");
            assert!(pages[&node].as_u64().unwrap() > 0, "{b}");
            assert_eq!(b[when]["untouched_pages"], 0);
        }
    }
}

#[test]
fn quartet_sweep_full_run_verifies_every_case() {
    let v = quartet().json("sweep_full_run", 0);
    assert_eq!(v["verified"], true);
    assert_eq!(v["folded"], false);
    let run = &v["runs"][0];
    // (4 CPUs x 2 memory nodes x 2 accesses)^2 threads.
    assert_eq!(run["total_cases"], 256);
    assert_eq!(run["cases_run"], 256);
    let cases = run["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 256);
    assert_run_verified(run, quartet_hops);
    let hops: std::collections::BTreeSet<u64> = cases
        .iter()
        .flat_map(|c| c["threads"].as_array().unwrap().iter())
        .map(|t| t["hops"].as_u64().unwrap())
        .collect();
    assert_eq!(hops, [0, 1, 2].into(), "every hop class");
    for c in cases {
        for t in c["threads"].as_array().unwrap() {
            assert!(t["cpu"].as_u64().unwrap() < 4, "{c}");
            assert!([0, 3].contains(&t["mem"].as_u64().unwrap()), "{c}");
        }
    }
    assert_buffers_on_their_nodes(&v, 2, 2);
    // Normalized to the fastest case: the fastest is 1.
    let min = run["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["normalized"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert!((min - 1.0).abs() < 1e-9, "{min}");
}

#[test]
fn quartet_sweep_folded_run_and_findings() {
    let s = quartet().step("sweep_folded_findings");
    assert!(s.err.contains("rc=0"), "{}", s.err);
    let v: Value = serde_json::from_str(&s.out).unwrap();
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["threads"], 1);
    assert_eq!(runs[0]["classes"], 6);
    assert_eq!(runs[1]["total_cases"], 4096);
    let sizes: u64 = runs[1]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["class_size"].as_u64().unwrap())
        .sum();
    assert_eq!(sizes, 4096);
    for r in runs {
        assert_eq!(r["cases_run"], r["classes"]);
        assert_run_verified(r, quartet_hops);
    }
    assert_buffers_on_their_nodes(&v, 4, 2);
    // Every class of the ring has a twin by a rotation or reflection of the
    // nodes, measured interleaved with its representative (two runs each).
    let twins = runs[1]["twins"].as_array().unwrap();
    assert_eq!(twins.len(), 108);
    for t in twins {
        assert_eq!(t["moved_by"], "node-symmetry", "{t}");
        assert_ne!(t["labels"], t["twin_labels"], "{t}");
        assert_eq!(t["verified"], true, "{t}");
        assert_eq!(t["samples"].as_array().unwrap().len(), 2, "{t}");
        assert_eq!(t["twin_samples"].as_array().unwrap().len(), 2, "{t}");
    }
    // On a 4-node ring every classic question can be asked (timings in
    // the guest mean nothing, so only that they were answered, by the rank
    // test, is checked: one sample per case may well be "cannot tell").
    let f = v["findings"][0]["findings"].as_array().unwrap();
    let qs: Vec<&str> = f.iter().map(|x| x["question"].as_str().unwrap()).collect();
    assert_eq!(qs, ["a", "b", "c", "d", "e"]);
    for x in f {
        let holds = match x["verdict"].as_str().unwrap() {
            "holds" => Value::Bool(true),
            "does_not_hold" => Value::Bool(false),
            "cannot_tell" => Value::Null,
            other => panic!("verdict {other}: {x}"),
        };
        assert_eq!(x["holds"], holds, "{x}");
        assert!(x["ratio"].as_f64().unwrap() > 0.0, "{x}");
        assert!(
            x["detail"].as_str().unwrap().contains("Mann–Whitney U"),
            "{x}"
        );
    }
    let text = &quartet().step("sweep_findings_from_file").out;
    assert!(text.contains("findings, idle:"), "{text}");
    assert!(text.contains("(b) two writers: crossfire"), "{text}");
}

#[test]
fn quartet_sweep_background_runs_on_the_free_cpus() {
    let v = quartet().json("sweep_background", 0);
    let runs = v["runs"].as_array().unwrap();
    // full and under subscription, each a run of its own.
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["background"]["subscription"], "full");
    assert_eq!(runs[1]["background"]["subscription"], "under");
    assert_eq!(runs[0]["background"]["bytes_per_second"], 0.5e9);
    for (r, free_share) in runs.iter().zip([1.0, 0.25]) {
        for c in r["cases"].as_array().unwrap() {
            assert_eq!(c["verified"], true, "{c}");
            let fg: Vec<u64> = c["threads"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["cpu"].as_u64().unwrap())
                .collect();
            let bg: Vec<u64> = c["background_cpus"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            let free = 8 - if fg[0] == fg[1] { 1 } else { 2 };
            let want = (free as f64 * free_share).ceil() as usize;
            assert_eq!(bg.len(), want, "{c}");
            assert!(bg.iter().all(|b| !fg.contains(b)), "{c}");
            assert_eq!(c["background_achieved"].as_array().unwrap().len(), want);
        }
    }
}

#[test]
fn quartet_sweep_bad_input_gets_one_line_errors() {
    let g = quartet();
    one_line_error(g.step("sweep_err_threads"), 2, "from 1 to 8");
    one_line_error(g.step("sweep_err_access"), 2, "valid: r (read-only), w");
    one_line_error(g.step("sweep_err_background"), 2, "--background");
    one_line_error(g.step("sweep_err_subscription"), 2, "valid: under");
    one_line_error(g.step("sweep_err_full_limit"), 2, "262144 cases");
    one_line_error(g.step("sweep_err_kernel"), 2, "one-array kernel");
    one_line_error(g.step("sweep_err_mem_nodes"), 2, "--mem-nodes");
}

#[test]
fn ring_sweep_targets_the_cpuless_node() {
    let v = ring().json("sweep_ring_list", 0);
    // 4 CPUs x 5 memory nodes x 2 accesses.
    assert_eq!(v["plans"][0]["total_cases"], 40);
    let cases = plan_cases(&v);
    assert!(cases
        .iter()
        .any(|c| c["threads"][0]["mem"] == 4 && c["threads"][0]["cpu"] == 0));
    let v = ring().json("sweep_ring_run", 0);
    assert_eq!(v["verified"], true);
    assert_eq!(v["mem_nodes"], serde_json::json!([0, 1, 2, 3, 4]));
    assert_buffers_on_their_nodes(&v, 5, 1);
    let run = &v["runs"][0];
    let to4: Vec<&Value> = run["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["threads"][0]["mem"] == 4)
        .collect();
    assert!(!to4.is_empty());
    for c in to4 {
        assert_eq!(c["verified"], true);
    }
}
