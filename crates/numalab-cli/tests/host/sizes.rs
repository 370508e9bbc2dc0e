//! `numalab sizes` with several threads and a memory policy on this host:
//! the workers' CPUs, per-core figures, where every size's buffers are, and
//! one-line errors. Timings are not asserted.

use crate::common;

use common::{allowed_cpus, fails, json, num as f, stdout, turn};
use serde_json::Value;

/// A short sweep up to 256 KiB with `extra` options.
fn short(extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "sizes",
        "--max-size",
        "256K",
        "--budget-each",
        "0.05",
        "--min-reps",
        "2",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn run_json(args: &[String]) -> Value {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    json(&a)
}

#[test]
fn two_packed_threads_report_per_core_bandwidth_with_pages_on_node_0() {
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        numalab_testkit::skip(format!("needs 2 allowed CPUs, this process has {cpus:?}"));
        return;
    }
    let _turn = turn();
    let v = run_json(&short(&["--threads", "2", "--layout", "compact", "--json"]));
    assert_eq!(v["command"], "sizes");
    assert_eq!(v["threads"], 2);
    assert_eq!(v["layout"], "compact");
    assert_eq!(v["memory"], "local");
    // Packed on one node: its first two CPUs, the first of them the chase's.
    assert_eq!(v["cpus"], serde_json::json!([cpus[0], cpus[1]]));
    assert_eq!(v["cpu"], cpus[0]);
    let points = v["points"].as_array().unwrap();
    assert!(points.len() >= 3, "{}", points.len());
    for p in points {
        let agg = p["gbps"].as_array().unwrap();
        let per = p["per_core_gbps"].as_array().unwrap();
        assert_eq!(agg.len(), 3);
        assert_eq!(per.len(), 3);
        for (a, c) in agg.iter().zip(per) {
            assert!((f(c) - f(a) / 2.0).abs() <= 1e-9 * f(a).max(1.0), "{p}");
        }
        // Three kernels' working sets for each of two threads, plus the chase.
        let bytes = p["bytes"].as_u64().unwrap();
        let by_node = p["bytes_by_node"].as_object().unwrap();
        assert_eq!(by_node.keys().collect::<Vec<_>>(), vec!["0"], "{p}");
        assert!(by_node["0"].as_u64().unwrap() >= 7 * bytes, "{p}");
        assert_eq!(p["verified"], true);
    }
}

#[test]
fn two_threads_text_shows_per_core_figures_and_nodes() {
    if allowed_cpus().len() < 2 {
        numalab_testkit::skip("needs 2 allowed CPUs");
        return;
    }
    let _turn = turn();
    let a = short(&["--threads", "2", "--mem", "bind:0"]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = stdout(&a);
    for needle in [
        "on 2 CPUs compact",
        "memory bind:0",
        "bandwidth per core (aggregate / 2)",
        "memory on",
        "node 0",
    ] {
        assert!(out.contains(needle), "'{needle}' in {out}");
    }
}

#[test]
fn one_thread_keeps_the_classic_fields() {
    let _turn = turn();
    let v = run_json(&short(&["--json"]));
    assert_eq!(v["threads"], 1);
    assert!(v.get("layout").is_none(), "{v}");
    assert_eq!(v["cpus"], serde_json::json!([v["cpu"]]));
    for p in v["points"].as_array().unwrap() {
        assert_eq!(p["gbps"], p["per_core_gbps"]);
    }
}

#[test]
fn bad_threads_layout_and_memory_get_one_line_errors() {
    let n = allowed_cpus().len();
    let over = (n + 1).to_string();
    fails(
        &["sizes", "--threads", &over],
        &format!("{over} threads asked but only {n} CPUs are allowed"),
    );
    fails(&["sizes", "--threads", "0"], "--threads");
    fails(
        &["sizes", "--layout", "diagonal"],
        "unknown layout 'diagonal'; valid: compact, scatter",
    );
    fails(&["sizes", "--mem", "bind:99"], "--mem");
    fails(&["sizes", "--mem", "sideways"], "--mem");
    fails(&["sizes", "--cpu", "0", "--threads", "1"], "--cpu");
}
