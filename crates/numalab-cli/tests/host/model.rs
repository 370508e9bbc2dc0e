//! `numalab model`: the AMD note's machine predicted from its own
//! parameters (the Quartet topology file and the built-in
//! amd-quartet-2006), cases and the truth table, the calibration from a
//! report of this host, and one-line errors. Only the calibration test
//! measures (a small report).

use crate::common;

use common::{fails, fixture, json, num, numalab, repo_root, scratch, stdout};
use serde_json::Value;

const QUARTET: &str = "qemu-quartet-4n2c-ring.xml";

fn quartet_model(extra: &[&str]) -> Value {
    let q = fixture(QUARTET);
    let mut args = vec![
        "model",
        "--topology",
        &q,
        "--params",
        "amd-quartet-2006",
        "--json",
    ];
    args.extend_from_slice(extra);
    json(&args)
}

/// A predicted case of scenario `scenario` at `condition` named `name`.
fn case<'a>(v: &'a Value, scenario: &str, condition: &str, name: &str) -> &'a Value {
    v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["scenario"] == scenario)
        .unwrap_or_else(|| panic!("no scenario {scenario}"))["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["condition"] == condition && c["name"] == name)
        .unwrap_or_else(|| panic!("no case {name} at {condition} in {scenario}"))
}

#[test]
fn the_study_scenarios_are_predicted_with_their_bottlenecks() {
    let v = quartet_model(&[]);
    assert_eq!(v["command"], "model");
    assert!(v["schema_version"].is_string(), "{v}");
    assert!(v["environment"]["kernel"].is_string(), "the envelope");
    assert_eq!(v["params_from"], "builtin:amd-quartet-2006");
    assert_eq!(v["params"]["in_flight"], 20.0);
    let names: Vec<&str> = v["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
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
    // Fig. 6: crossfire (A writes B, B writes A) is slower than no
    // crossfire, and its busiest resource is the A-B link.
    let cross = case(&v, "crossfire", "idle", "crossfire");
    let apart = case(&v, "crossfire", "idle", "no crossfire");
    assert!(
        num(&cross["normalized"]) > num(&apart["normalized"]) * 1.15,
        "{cross} vs {apart}"
    );
    assert_eq!(cross["labels"], serde_json::json!(["0.0.w.1", "1.0.w.0"]));
    let b = &cross["prediction"]["bottleneck"];
    assert!(b["name"] == "link 0->1" || b["name"] == "link 1->0", "{b}");
    assert!((num(&b["gbps"]) - 3.5).abs() < 0.35, "{b}");
    // Fig. 9: under very high load on every free CPU the order reverses.
    let cross = case(&v, "crossfire-full", "very-high", "crossfire");
    let apart = case(&v, "crossfire-full", "very-high", "no crossfire");
    assert!(
        num(&apart["normalized"]) > num(&cross["normalized"]),
        "{cross} vs {apart}"
    );
    assert_eq!(
        apart["prediction"]["bottleneck"]["name"],
        "node 3's memory controller"
    );
}

#[test]
fn the_text_names_each_case_and_its_busiest_resource() {
    let q = fixture(QUARTET);
    let t = stdout(&[
        "model",
        "--topology",
        &q,
        "--params",
        "amd-quartet-2006",
        "--scenarios",
        "crossfire",
    ]);
    assert!(
        t.starts_with("model: 4-node dual-core Opteron ring (the AMD note's test machine) (builtin:amd-quartet-2006)\n"),
        "{t}"
    );
    assert!(t.contains("\ncrossfire (Fig. 6): crossfire, idle\n"), "{t}");
    let line = t
        .lines()
        .find(|l| l.trim_start().starts_with("crossfire ") && l.contains("0.0.w.1 1.0.w.0"))
        .unwrap_or_else(|| panic!("{t}"));
    assert!(
        line.contains("link 0->1") || line.contains("link 1->0"),
        "{line}"
    );
    assert!(!t.contains("two-writers-loaded"), "{t}");
}

#[test]
fn a_case_under_background_and_the_truth_table_are_predicted() {
    let v = quartet_model(&[
        "--case",
        "0.0.w.0 0.1.w.0",
        "--case",
        "0.0.w.0 0.1.w.1",
        "--background",
        "very-high",
        "--background-cpus",
        "2,4,6",
    ]);
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[0]["condition"], "very-high");
    // Three background readers and two writers: five flows each.
    assert_eq!(cases[0]["prediction"]["flows"].as_array().unwrap().len(), 5);
    // The note's A.5: both local beats one local and one a hop away under
    // very high load, node 1's controller the bottleneck of the second.
    assert!(num(&cases[0]["normalized"]) < num(&cases[1]["normalized"]));
    assert_eq!(
        cases[1]["prediction"]["bottleneck"]["name"],
        "node 1's memory controller"
    );
    let v = quartet_model(&["--truth-table"]);
    let table = v["truth_table"].as_array().unwrap();
    let of = |n: usize| {
        table
            .iter()
            .filter(|c| c["labels"].as_array().unwrap().len() == n)
            .count()
    };
    // The sweep's folded classes on the Quartet: 6 one-thread (2 accesses x
    // 0, 1 hop to a neighbour on either side folded, 2 hops... as sweep
    // folds them) and 108 two-thread classes (docs/sweep.md).
    assert_eq!(of(2), 108, "two-thread classes");
    assert!(of(1) >= 4, "{}", of(1));
    let fastest = table
        .iter()
        .filter(|c| c["labels"].as_array().unwrap().len() == 1)
        .map(|c| num(&c["normalized"]))
        .fold(f64::INFINITY, f64::min);
    assert!((fastest - 1.0).abs() < 1e-12, "{fastest}");
}

#[test]
fn bad_input_is_one_line_naming_the_choices() {
    let q = fixture(QUARTET);
    fails(
        &["model", "--topology", &q],
        "the model needs parameters: give --from RESULTS.json (a numalab report of this machine) or --params FILE|NAME (built in: amd-quartet-2006)",
    );
    fails(
        &["model", "--topology", &q, "--params", "opteron"],
        "--params 'opteron' is neither a file nor a built-in set; built in: amd-quartet-2006",
    );
    fails(
        &[
            "model",
            "--topology",
            &q,
            "--params",
            "amd-quartet-2006",
            "--case",
            "0.0.x.1",
        ],
        "--case: '0.0.x.1' is not a thread label; valid: node.core.r|w.memnode, e.g. 0.0.w.1",
    );
    fails(
        &[
            "model",
            "--topology",
            &q,
            "--params",
            "amd-quartet-2006",
            "--case",
            "0.5.r.1",
        ],
        "--case 0.5.r.1: node 0 has 2 allowed CPU(s) (cores 0 to 1)",
    );
    fails(
        &["model", "--topology", &q, "--params", "amd-quartet-2006", "--case", "0.0.r.1", "--background", "loud"],
        "--background: unknown background level 'loud'; valid: low (0.5 GB/s), medium (1), high (2), very-high (4)",
    );
    // A parameter file with a negative capacity.
    let dir = scratch("model_bad_params");
    let p = dir.join("p.json");
    let shipped =
        std::fs::read_to_string(repo_root().join("docs/models/amd-quartet-2006.json")).unwrap();
    let text = shipped.replace("\"link_gbps\": 4.0", "\"link_gbps\": -4.0");
    assert_ne!(text, shipped);
    std::fs::write(&p, text).unwrap();
    fails(
        &["model", "--topology", &q, "--params", p.to_str().unwrap()],
        "link_gbps is -4; valid: a rate above 0 and at most 1000000 GB/s",
    );
    std::fs::write(&p, "{\"schema\": 3}").unwrap();
    fails(
        &["model", "--topology", &q, "--params", p.to_str().unwrap()],
        "not a model parameter file",
    );
    // --verify measures: never on a topology file.
    let r = numalab(&[
        "model",
        "--topology",
        &q,
        "--params",
        "amd-quartet-2006",
        "--verify",
    ]);
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(r.err.contains("--topology"), "{}", r.err);
}
