//! `numalab sweep --scenarios` in the multi-node guests: the classic
//! study's figures by role on the Quartet ring (A = 0, B = 1, C = 3), every
//! case with its threads on their CPUs, its buffers on their nodes and its
//! background where the plan put it; on the ring with the CPU-less node 4,
//! one thread reaching memory there. Timings in the guest mean nothing.

use crate::guest_experiments::{quartet, ring};
use serde_json::Value;

/// Steps run in the Quartet guest.
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    ("scenarios_list", "numalab sweep --scenarios all --list --json"),
    ("scenarios_run", "numalab sweep --scenarios all --size 1M --background-size 1M --rounds 4 --reps 1 --sample-ms 0 --thp off --json"),
];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[(
    "scenarios_ring_run",
    "numalab sweep --scenarios one-thread-hops --size 1M --rounds 4 --reps 1 --sample-ms 0 --thp off --json",
)];

/// Every case of every run: verified, each thread seen only on its CPU.
fn assert_cases_placed(v: &Value) {
    let runs = v["runs"].as_array().unwrap();
    assert!(!runs.is_empty());
    for r in runs {
        for c in r["cases"].as_array().unwrap() {
            assert_eq!(c["verified"], true, "{c}");
            assert_eq!(c["total_s"].as_array().unwrap().len(), 4, "{c}");
            for (t, seen) in c["threads"]
                .as_array()
                .unwrap()
                .iter()
                .zip(c["seen_cpus"].as_array().unwrap())
            {
                assert_eq!(seen, &serde_json::json!([t["cpu"]]), "{c}");
            }
        }
    }
    for b in v["buffers"].as_array().unwrap() {
        let node = b["node"].to_string();
        for when in ["at_start", "at_end"] {
            let pages = b[when]["pages_by_node"].as_object().unwrap();
            assert_eq!(pages.len(), 1, "{b}");
            assert!(pages[&node].as_u64().unwrap() > 0, "{b}");
        }
    }
}

#[test]
fn quartet_scenarios_are_the_study_figures() {
    let list = quartet().json("scenarios_list", 0);
    assert_eq!(list["roles"]["a"], 0);
    assert_eq!(list["roles"]["b"], 1);
    assert_eq!(list["roles"]["c"], 3);
    for s in list["scenarios"].as_array().unwrap() {
        assert_eq!(s["not_applicable"], Value::Null, "{s}");
    }
    let v = quartet().json("scenarios_run", 0);
    assert_eq!(v["verified"], true, "{}", v["warnings"]);
    assert_cases_placed(&v);
    let conditions: Vec<(String, String)> = v["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["scenario"].as_str().unwrap().to_string(),
                r["condition"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want: Vec<(&str, &str)> = vec![
        ("one-thread-hops", "idle"),
        ("crossfire", "idle"),
        ("crossfire-high", "low"),
        ("crossfire-high", "very-high"),
        ("crossfire-full", "very-high"),
        ("two-on-one-node", "idle"),
        ("two-writers-loaded", "low"),
        ("two-writers-loaded", "medium"),
        ("two-writers-loaded", "high"),
        ("two-writers-loaded", "very-high"),
    ];
    let got: Vec<(&str, &str)> = conditions
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    assert_eq!(got, want);
    // The background ran where the plan put it, and nowhere else.
    for r in v["runs"].as_array().unwrap() {
        let planned = list["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == r["scenario"])
            .unwrap();
        match r["background"].as_object() {
            None => assert_eq!(planned["background"], Value::Null),
            Some(bg) => assert_eq!(bg["cpus"], planned["background"]["cpus"], "{r}"),
        }
    }
    // Crossfire's three cases, and (b) judged per condition with a verdict.
    let b: Vec<&Value> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["question"] == "b")
        .collect();
    assert_eq!(b.len(), 5, "4 conditions and the reversal");
    for f in &b {
        assert!(
            ["holds", "does_not_hold", "cannot_tell"].contains(&f["verdict"].as_str().unwrap()),
            "{f}"
        );
    }
    // Every buffer of thread 0 and 1 on each of the 4 nodes.
    assert_eq!(v["buffers"].as_array().unwrap().len(), 8);
}

#[test]
fn ring_scenario_reaches_the_cpuless_node() {
    let v = ring().json("scenarios_ring_run", 0);
    assert_eq!(v["verified"], true, "{}", v["warnings"]);
    assert_cases_placed(&v);
    let cases = v["runs"][0]["cases"].as_array().unwrap();
    let mems: Vec<u64> = cases
        .iter()
        .map(|c| c["threads"][0]["mem"].as_u64().unwrap())
        .collect();
    assert!(mems.contains(&4), "a case on the CPU-less node 4: {mems:?}");
    assert_eq!(cases.len(), 10, "read and write on 5 memory nodes");
}
