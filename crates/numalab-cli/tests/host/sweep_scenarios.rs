//! `numalab sweep --scenarios` on this host (one node, two CPUs) and on
//! topology files: the study's figures planned by role, what a one-node
//! machine cannot have, the study's normalisation, and errors.

use crate::common;

use common::{fails, fixture, json, turn};
use serde_json::Value;

/// `sweep --scenarios ARGS...` as a short run: 4 rounds, one pass per
/// sample, no THP, JSON.
fn short_run(args: &[&str]) -> Value {
    let mut all = vec!["sweep", "--scenarios"];
    all.extend_from_slice(args);
    all.extend([
        "--rounds",
        "4",
        "--sample-ms",
        "0",
        "--thp",
        "off",
        "--json",
    ]);
    json(&all)
}

fn scenario<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

fn labels(s: &Value) -> Vec<String> {
    s["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
                .join(" + ")
        })
        .collect()
}

#[test]
fn the_quartet_plan_names_the_study_cpu_sets() {
    let q = fixture("qemu-quartet-4n2c-ring.xml");
    let v = json(&[
        "sweep",
        "--scenarios",
        "all",
        "--list",
        "--json",
        "--topology",
        &q,
    ]);
    assert_eq!(v["command"], "sweep --list --scenarios");
    assert_eq!(v["roles"]["a"], 0);
    assert_eq!(v["roles"]["b"], 1);
    assert_eq!(v["roles"]["c"], 3);
    let names: Vec<&str> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "one-thread-hops",
            "crossfire",
            "crossfire-high",
            "crossfire-full",
            "two-on-one-node",
            "two-writers-loaded"
        ]
    );
    let one = scenario(&v, "one-thread-hops");
    assert_eq!(one["figure"], "Fig. 3-5");
    assert_eq!(
        labels(one),
        ["0.0.r.0", "0.0.r.1", "0.0.r.2", "0.0.r.3", "0.0.w.0", "0.0.w.1", "0.0.w.2", "0.0.w.3"]
    );
    let cross = scenario(&v, "crossfire");
    assert_eq!(
        labels(cross),
        [
            "0.0.w.0 + 1.0.w.1",
            "0.0.w.1 + 1.0.w.0",
            "0.0.w.1 + 1.0.w.3"
        ]
    );
    assert_eq!(
        cross["cases"][1]["roles"],
        serde_json::json!(["A.0.w.B", "B.0.w.A"])
    );
    assert_eq!(
        cross["cases"][2]["roles"],
        serde_json::json!(["A.0.w.B", "B.0.w.C"])
    );
    assert_eq!(cross["background"], Value::Null);
    assert_eq!(cross["subscription"], "idle");
    let high = scenario(&v, "crossfire-high");
    assert_eq!(high["background"]["cpus"], serde_json::json!([1, 3, 4, 6]));
    assert_eq!(
        high["background"]["levels"],
        serde_json::json!(["low", "very-high"])
    );
    assert_eq!(high["subscription"], "high");
    let full = scenario(&v, "crossfire-full");
    assert_eq!(
        full["background"]["cpus"],
        serde_json::json!([1, 3, 4, 5, 6, 7])
    );
    assert_eq!(full["subscription"], "full");
    let two = scenario(&v, "two-on-one-node");
    assert_eq!(labels(two).len(), 8);
    assert_eq!(labels(two)[7], "0.0.w.0 + 0.1.w.3");
    let loaded = scenario(&v, "two-writers-loaded");
    assert_eq!(loaded["background"]["cpus"], serde_json::json!([2, 4, 6]));
    assert_eq!(
        loaded["background"]["levels"],
        serde_json::json!(["low", "medium", "high", "very-high"])
    );
    // Two-thread cases are normalised to two idle local readers on different nodes.
    assert_eq!(two["baseline"], "0.0.r.0 1.0.r.1");
    assert_eq!(one["baseline"], "0.0.r.0");
}

#[test]
fn one_node_runs_what_it_can_and_says_why_not_the_rest() {
    let _turn = turn();
    let v = short_run(&["all", "--size", "1M", "--reps", "2"]);
    assert_eq!(v["command"], "sweep");
    assert_eq!(v["verified"], true, "{}", v["warnings"]);
    assert_eq!(v["normalize"], "study");
    assert_eq!(v["rounds_run"], 4);
    assert_eq!(
        scenario(&v, "crossfire")["not_applicable"],
        "needs two nodes with CPUs one hop apart (A and B); this machine has none"
    );
    let runs = v["runs"].as_array().unwrap();
    let names: Vec<&str> = runs
        .iter()
        .map(|r| r["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["one-thread-hops", "two-on-one-node"]);
    for r in runs {
        for c in r["cases"].as_array().unwrap() {
            assert_eq!(c["verified"], true, "{c}");
            assert_eq!(c["total_s"].as_array().unwrap().len(), 4, "{c}");
            // The study's figure: the total of the threads' times, per round.
            for (round, total) in c["rounds"]
                .as_array()
                .unwrap()
                .iter()
                .zip(c["total_s"].as_array().unwrap())
            {
                let sum: f64 = round
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_f64().unwrap())
                    .sum();
                assert!(
                    (sum - total.as_f64().unwrap()).abs() <= 1e-12 * sum.max(1.0),
                    "{c}"
                );
            }
            for (t, seen) in c["threads"]
                .as_array()
                .unwrap()
                .iter()
                .zip(c["seen_cpus"].as_array().unwrap())
            {
                assert_eq!(seen, &serde_json::json!([t["cpu"]]), "{c}");
            }
            // Each case's memory-controller traffic: per package where the
            // machine has the PMUs, else why not (this project's hosts have
            // no PMU at all: no zeros printed).
            let t = &c["memory_traffic"];
            if common::memory_controller_pmus() {
                assert_eq!(t["source"], "measured", "{t}");
                let packages = t["per_package"].as_array().unwrap();
                assert!(!packages.is_empty(), "{t}");
                let sum: u64 = packages.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
                assert_eq!(sum, t["bytes"].as_u64().unwrap(), "{t}");
            } else {
                assert_eq!(t["source"], "assumed", "{t}");
                assert_eq!(
                    t["reason"],
                    "not available on this machine: no uncore_imc, amd_umc or amd_df PMU"
                );
                assert_eq!(t["per_package"], serde_json::json!([]));
                assert_eq!(t["links"], serde_json::json!([]));
                assert!(t["read_gbps"].is_null(), "{t}");
            }
        }
    }
    // The local read is its own baseline; the two-thread baseline is two
    // local readers on node 0 (no second node), named in every case.
    let one = &runs[0]["cases"][0];
    assert_eq!(one["labels"], serde_json::json!(["0.0.r.0"]));
    assert_eq!(one["normalized"], 1.0);
    let two = &runs[1]["cases"];
    assert_eq!(two[0]["labels"], serde_json::json!(["0.0.r.0", "0.1.r.0"]));
    assert_eq!(two[1]["baseline"], "0.0.r.0 0.1.r.0");
    let t = two[1]["total_median_s"].as_f64().unwrap();
    let b = v["baselines"]["two_threads"]["total_median_s"]
        .as_f64()
        .unwrap();
    assert!((two[1]["normalized"].as_f64().unwrap() - t / b).abs() < 1e-9);
    // One memory node: (c) cannot be told, and says why.
    let c = &v["findings"][0];
    assert_eq!(c["question"], "c");
    assert_eq!(c["verdict"], "cannot_tell");
    assert_eq!(
        c["detail"],
        "this machine has no memory node away from node A: only both buffers local (0-0) exists"
    );
    // Every buffer stayed on node 0.
    for b in v["buffers"].as_array().unwrap() {
        assert_eq!(b["at_end"]["verified"], true, "{b}");
    }
}

#[test]
fn run_normalisation_is_per_run() {
    let _turn = turn();
    let v = short_run(&[
        "two-on-one-node",
        "--normalize",
        "run",
        "--size",
        "1M",
        "--reps",
        "1",
    ]);
    assert_eq!(v["normalize"], "run");
    let cases = v["runs"][0]["cases"].as_array().unwrap();
    let best = cases
        .iter()
        .map(|c| c["normalized"].as_f64().unwrap())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(best, 1.0);
}

#[test]
fn bad_scenario_options_are_refused_in_one_line() {
    fails(
        &["sweep", "--scenarios", "fig6"],
        "unknown scenario 'fig6'; valid: all, one-thread-hops, crossfire, crossfire-high, crossfire-full, two-on-one-node, two-writers-loaded",
    );
    fails(
        &["sweep", "--scenarios", "crossfire,crossfire"],
        "scenario 'crossfire' is named twice",
    );
    fails(
        &["sweep", "--scenarios", "all", "--thread-counts", "2"],
        "cannot be used with",
    );
    fails(&["sweep", "--normalize", "run"], "--scenarios");
    fails(
        &["sweep", "--scenarios", "all", "--normalize", "best"],
        "study",
    );
    fails(&["sweep", "--scenarios", "all", "--rounds", "2"], "4");
    common::fails_rc(
        &["sweep", "--scenarios", "crossfire"],
        1,
        "no scenario asked for can run on this machine (crossfire: needs two nodes with CPUs one hop apart (A and B); this machine has none)",
    );
}

/// The study needs arrays far larger than the caches: a sweep whose
/// buffers are below 4x the last-level cache says so (this host: 32 MiB L3
/// or whatever it has; the warning names it).
#[test]
fn a_sweep_in_cache_is_warned_about() {
    let _turn = turn();
    let v = json(&[
        "sweep",
        "--thread-counts",
        "1",
        "--access",
        "w",
        "--size",
        "64K",
        "--reps",
        "1",
        "--sample-ms",
        "0",
        "--thp",
        "off",
        "--json",
    ]);
    let w: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(
        w.iter().any(
            |x| x.starts_with("each sweep buffer 64 KiB is below 4× the ")
                && x.ends_with(" last-level cache: figures may come from cache, not memory")
        ),
        "{w:?}"
    );
    let v = short_run(&["one-thread-hops", "--size", "64K", "--reps", "1"]);
    assert!(
        v["warnings"][0]
            .as_str()
            .unwrap()
            .starts_with("each scenario buffer 64 KiB is below 4× the "),
        "{}",
        v["warnings"]
    );
}
