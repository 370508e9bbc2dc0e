//! `numalab scaling --copies` in the Quartet guest: copies of a command that
//! reports its own CPU mask and memory policy, packed on node 0 and spread
//! over two nodes, so where each copy ran is proven by the copy itself as
//! well as by the result.

use crate::guest_experiments::quartet;
use serde_json::Value;
use std::collections::BTreeSet;

/// Each copy writes its allowed CPUs, its task policy (the first policy
/// numa_maps prints) and the thread variable; with --json that output goes
/// to stderr.
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "scaling_copies_2",
        concat!(
            "numalab scaling --copies 2 --reps 1 --json -- ",
            "sh -c 'grep Cpus_allowed_list /proc/self/status; echo policy=$(grep -o -E \"bind:[0-9]+|local|default\" /proc/self/numa_maps | head -n 1); echo T=${OMP_NUM_THREADS:-none}'"
        ),
    ),
    (
        "scaling_threads_2",
        concat!(
            "numalab scaling --copies 2 --env OMP_NUM_THREADS --reps 1 --json -- ",
            "sh -c 'grep Cpus_allowed_list /proc/self/status; echo policy=$(grep -o -E \"bind:[0-9]+|local|default\" /proc/self/numa_maps | head -n 1); echo T=${OMP_NUM_THREADS:-none}'"
        ),
    ),
    ("scaling_copies_5", "numalab scaling --copies 5 --reps 1 --json -- true"),
];

/// Quartet: CPU c is on node c / 2.
fn node(cpu: u64) -> u64 {
    cpu / 2
}

fn layout<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layout"] == name)
        .unwrap_or_else(|| panic!("no layout {name}: {v}"))
}

/// The single CPU of each process of a layout, from the kernel's read-back.
fn seen_cpus(l: &Value) -> Vec<u64> {
    l["runs"][0]["copies"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let s = c["cpus_seen"].as_array().unwrap();
            assert_eq!(s, c["cpus"].as_array().unwrap(), "{c}");
            assert_eq!(s.len(), 1, "{c}");
            s[0].as_u64().unwrap()
        })
        .collect()
}

/// Values of `key=` (or `key:\t`) lines of the copies' output.
fn reported(err: &str, key: &str) -> BTreeSet<String> {
    err.lines()
        .filter_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
        .collect()
}

#[test]
fn quartet_copies_pack_on_node_0_and_spread_over_two_nodes() {
    let g = quartet();
    let v = g.json("scaling_copies_2", 0);
    let packed = layout(&v, "packed");
    assert_eq!(packed["verified"], true, "{packed}");
    assert_eq!(seen_cpus(packed), [0, 1]);
    assert_eq!(packed["memory"], serde_json::json!(["bind:0", "bind:0"]));
    let spread = layout(&v, "spread");
    assert_eq!(spread["applicable"], true, "{spread}");
    assert_eq!(spread["verified"], true, "{spread}");
    let s = seen_cpus(spread);
    assert_ne!(node(s[0]), node(s[1]), "spread copies on CPUs {s:?}");
    let want_mem: Vec<String> = s.iter().map(|&c| format!("bind:{}", node(c))).collect();
    assert_eq!(spread["memory"], serde_json::json!(want_mem));
    // What the copies saw themselves: every CPU above, and every binding.
    let err = &g.step("scaling_copies_2").err;
    let cpus = reported(err, "Cpus_allowed_list:");
    let mut want: BTreeSet<String> = ["0", "1"].map(String::from).into();
    want.extend(s.iter().map(u64::to_string));
    assert_eq!(cpus, want, "stderr: {err}");
    let policies = reported(err, "policy=");
    let mut want: BTreeSet<String> = ["bind:0".to_string()].into();
    want.extend(s.iter().map(|&c| format!("bind:{}", node(c))));
    assert_eq!(policies, want, "stderr: {err}");
    assert_eq!(reported(err, "T="), ["none".to_string()].into());
}

#[test]
fn quartet_threads_mode_runs_one_process_with_the_variable_set() {
    let g = quartet();
    let v = g.json("scaling_threads_2", 0);
    assert_eq!(v["mode"], "threads");
    let packed = layout(&v, "packed");
    assert_eq!(packed["cpus"], serde_json::json!([[0, 1]]));
    assert_eq!(packed["verified"], true);
    let spread = layout(&v, "spread");
    let cpus: Vec<u64> = spread["cpus"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .collect();
    assert_eq!(cpus.len(), 2);
    assert_ne!(node(cpus[0]), node(cpus[1]), "{spread}");
    let err = &g.step("scaling_threads_2").err;
    // One thread alone, then two packed and two spread.
    assert_eq!(
        reported(err, "T="),
        ["1".to_string(), "2".to_string()].into(),
        "stderr: {err}"
    );
    assert_eq!(
        reported(err, "policy="),
        ["local".to_string()].into(),
        "stderr: {err}"
    );
}

#[test]
fn quartet_five_copies_cannot_spread_over_four_nodes() {
    let v = quartet().json("scaling_copies_5", 0);
    let spread = layout(&v, "spread");
    assert_eq!(spread["applicable"], false);
    assert_eq!(
        spread["note"],
        "spread: not applicable: needs 5 nodes with CPUs, this machine has 4"
    );
    let packed = layout(&v, "packed");
    assert_eq!(packed["verified"], true);
    assert_eq!(packed["processes"], 5);
    assert!(packed["note"]
        .as_str()
        .unwrap()
        .contains("packed spans several nodes"));
    assert!(v["model"].is_null());
    assert_eq!(
        v["model_note"],
        "the split needs the packed copies on one node, and they span several"
    );
}
