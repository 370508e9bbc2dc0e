//! `numalab scaling --copies N -- CMD`: copies of an application pinned
//! packed vs spread on this host (one node, two CPUs), their exit status
//! checked, and the refusals.

use crate::common;

use common::{allowed_cpus, fails, fails_rc, json, turn};
use serde_json::Value;

fn layout<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layout"] == name)
        .unwrap_or_else(|| panic!("no layout {name}: {v}"))
}

#[test]
fn two_copies_of_true_run_pinned_on_node_0_and_spread_is_not_applicable() {
    let _t = turn();
    let cpus = allowed_cpus();
    if cpus.len() < 2 {
        numalab_testkit::skip(format!(
            "two copies need 2 allowed CPUs; this process may use {cpus:?}"
        ));
        return;
    }
    let v = json(&[
        "scaling", "--copies", "2", "--reps", "2", "--json", "--", "true",
    ]);
    assert_eq!(v["command"], "scaling");
    assert_eq!(v["mode"], "copies");
    assert_eq!(v["copies"], 2);
    let packed = layout(&v, "packed");
    assert_eq!(packed["applicable"], true);
    assert_eq!(packed["verified"], true, "{packed}");
    assert_eq!(packed["processes"], 2);
    assert_eq!(packed["per_node"], 2);
    let want: Vec<Value> = cpus[..2].iter().map(|&c| serde_json::json!([c])).collect();
    assert_eq!(packed["cpus"].as_array().unwrap(), &want, "{packed}");
    assert_eq!(packed["nodes"], serde_json::json!([[0], [0]]));
    assert_eq!(packed["memory"], serde_json::json!(["bind:0", "bind:0"]));
    let runs = packed["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for r in runs {
        let copies = r["copies"].as_array().unwrap();
        assert_eq!(copies.len(), 2);
        for c in copies {
            assert_eq!(c["cpus_seen"], c["cpus"], "{c}");
            assert!(c["pid"].as_i64().unwrap() > 0);
        }
    }
    let one = layout(&v, "one");
    assert_eq!(one["processes"], 1);
    assert_eq!(one["runs"].as_array().unwrap().len(), 2);
    let spread = layout(&v, "spread");
    assert_eq!(spread["applicable"], false);
    assert_eq!(
        spread["note"],
        "spread: not applicable: needs 2 nodes with CPUs, this machine has 1"
    );
    assert!(spread["runs"].as_array().unwrap().is_empty());
    // The split exists or says why (times of `true` are noise either way).
    assert!(v["model"].is_object() || v["model_note"].is_string(), "{v}");
}

#[test]
fn threads_mode_sets_the_variable_for_one_process() {
    let _t = turn();
    if allowed_cpus().len() < 2 {
        numalab_testkit::skip("two threads need 2 allowed CPUs");
        return;
    }
    // The copy fails unless the variable is 2 in the packed run.
    let v = json(&[
        "scaling",
        "--copies",
        "2",
        "--env",
        "NUMALAB_T",
        "--reps",
        "1",
        "--json",
        "--",
        "sh",
        "-c",
        "test \"$NUMALAB_T\" -ge 1 && grep Cpus_allowed_list /proc/self/status",
    ]);
    assert_eq!(v["mode"], "threads");
    assert_eq!(v["env"], "NUMALAB_T");
    let packed = layout(&v, "packed");
    assert_eq!(packed["processes"], 1);
    assert_eq!(packed["width"], 2);
    assert_eq!(packed["cpus"][0].as_array().unwrap().len(), 2);
    assert_eq!(packed["verified"], true);
    assert_eq!(packed["memory"], serde_json::json!(["local"]));
}

#[test]
fn a_failing_copy_is_an_error_naming_it() {
    let _t = turn();
    fails_rc(
        &["scaling", "--copies", "1", "--reps", "1", "--", "false"],
        1,
        "copy 1 of 1 (packed, CPUs",
    );
    fails_rc(
        &["scaling", "--copies", "1", "--reps", "1", "--", "false"],
        1,
        "of 'false' exited with 1",
    );
    fails_rc(
        &[
            "scaling",
            "--copies",
            "1",
            "--",
            "/nonexistent/numalab-prog",
        ],
        1,
        "/nonexistent/numalab-prog",
    );
}

#[test]
fn bad_copies_input_is_refused() {
    fails(&["scaling", "--copies", "0", "--", "true"], "--copies");
    fails(&["scaling", "--copies", "5000", "--", "true"], "--copies");
    let n = (allowed_cpus().len() + 1).to_string();
    fails(
        &["scaling", "--copies", &n, "--", "true"],
        "CPUs are allowed",
    );
    fails(
        &["scaling", "--copies", "1", "--env", "1BAD", "--", "true"],
        "is not a variable name",
    );
    fails(
        &["scaling", "--copies", "1", "--reps", "0", "--", "true"],
        "--reps",
    );
    fails(&["scaling", "--copies", "1"], "CMD");
    fails(
        &["scaling", "--copies", "1", "--size", "8M", "--", "true"],
        "--size",
    );
    fails(&["scaling", "--env", "X", "--", "true"], "--copies");
}
