//! `numalab extrapolate`: the Cray/NERSC core + contention split from run
//! times, its projections, and refusals of input the model cannot take.

use crate::common;

use common::{fails, json, num, stdout};

fn close(v: &serde_json::Value, want: f64) -> bool {
    (num(v) - want).abs() < 1e-9
}

#[test]
fn the_studys_160_and_230_seconds_give_90_plus_70() {
    let v = json(&[
        "extrapolate",
        "--times",
        "160,230",
        "--to",
        "1,2,4",
        "--bandwidth-ratio",
        "1,2",
        "--json",
    ]);
    assert_eq!(v["command"], "extrapolate");
    assert!(close(&v["core_seconds"], 90.0), "{v}");
    assert!(close(&v["contention_seconds"], 70.0), "{v}");
    assert_eq!(v["method"], "exact");
    let preds = v["predictions"].as_array().unwrap();
    assert_eq!(preds.len(), 6, "{v}");
    let at = |k: u64, r: f64| {
        preds
            .iter()
            .find(|p| p["cores"] == k && num(&p["bandwidth_ratio"]) == r)
            .unwrap_or_else(|| panic!("no prediction at {k} cores, ratio {r}: {v}"))["seconds"]
            .clone()
    };
    assert!(close(&at(4, 1.0), 370.0));
    assert!(close(&at(2, 2.0), 160.0));
    assert!(close(&at(1, 1.0), 160.0));
    assert!(close(&at(4, 2.0), 230.0));
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1]["cores"], 2);
}

#[test]
fn text_names_the_split_and_the_default_projections() {
    let t = stdout(&["extrapolate", "--times", "160s,230s"]);
    assert!(t.contains("core 90.000 s + contention 70.000 s"), "{t}");
    // Default projections: 1, 2, 4, 8 cores at the measured bandwidth.
    assert!(t.contains("370.000") && t.contains("650.000"), "{t}");
}

#[test]
fn measured_bandwidths_and_least_squares() {
    let v = json(&[
        "extrapolate",
        "--times",
        "100,110",
        "--bandwidth",
        "10,8",
        "--to",
        "4",
        "--json",
    ]);
    assert!(close(&v["contention_seconds"], 40.0), "{v}");
    assert!(close(&v["predictions"][0]["seconds"], 160.0), "{v}");
    let v = json(&[
        "extrapolate",
        "--times",
        "160,230,370",
        "--cores",
        "1,2,4",
        "--json",
    ]);
    assert_eq!(v["method"], "least_squares");
    assert!(close(&v["core_seconds"], 90.0), "{v}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    fails(
        &["extrapolate", "--times", "100,250"],
        "contention grows faster than the bandwidth model allows",
    );
    fails(
        &["extrapolate", "--times", "100,90"],
        "no contention to split off",
    );
    fails(
        &["extrapolate", "--times", "100,120", "--cores", "2,2"],
        "--cores",
    );
    fails(
        &["extrapolate", "--times", "0,120"],
        "--times '0' is not a positive number of seconds",
    );
    fails(&["extrapolate", "--times", "-5,120"], "--times");
    fails(
        &["extrapolate", "--times", "100"],
        "2 to 64 timed runs, got 1",
    );
    fails(
        &["extrapolate", "--times", "100,120", "--cores", "1,2,4"],
        "--times has 2 entries and --cores 3",
    );
    fails(
        &["extrapolate", "--times", "100,120", "--bandwidth", "5"],
        "--bandwidth has 1 entries and --times 2",
    );
    fails(
        &[
            "extrapolate",
            "--times",
            "100,120",
            "--bandwidth-ratio",
            "0",
        ],
        "is not a bandwidth ratio",
    );
    fails(
        &["extrapolate", "--times", "100,120", "--to", "0"],
        "is not a core count (a whole number from 1 to 65536)",
    );
    let many = (1..=65)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",");
    fails(
        &["extrapolate", "--times", "100,120", "--to", &many],
        "has 65 entries: give 1 to 64",
    );
    fails(&["extrapolate"], "--times");
}

/// `--from-machine` and `--to-machine` read per-core bandwidths from a
/// machine's `numalab scaling --json` (this host's, measured here, with
/// its per-thread figures set to known values) or from a report's
/// results.json: the study's 160 s and 230 s at 10 and 5 GB/s per core,
/// projected to a machine with 20 and 15, give 125 s at one core, 90 +
/// 70 x 10/15 s at two, and 90 + 70 x 10/7.5 s at four (the two-core
/// aggregate, 30 GB/s, shared by four).
#[test]
fn another_machine_from_its_scaling_result() {
    let d = common::scratch("extrapolate-machines");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let scaling = json(&["scaling", "--size", "4M", "--budget-each", "0.05", "--json"]);
    let packed = scaling["packed"].as_array().unwrap();
    // The points say their nodes: this host's first two CPUs share node 0.
    assert_eq!(packed[0]["nodes"], serde_json::json!([0]));
    if packed.len() < 2 || packed[1]["nodes"] != serde_json::json!([0]) {
        numalab_testkit::skip("this machine has no two CPUs on its first node");
        return;
    }
    let write = |name: &str, gbps: [f64; 2], as_report: bool| {
        let mut s = scaling.clone();
        for (i, g) in gbps.iter().enumerate() {
            s["packed"][i]["per_thread_gbps"] = serde_json::json!(g);
        }
        let doc = if as_report {
            serde_json::json!({"parts": {"scaling": {"result": s}}})
        } else {
            s
        };
        let p = d.join(name);
        std::fs::write(&p, doc.to_string()).unwrap();
        p.to_string_lossy().into_owned()
    };
    let here = write("here.json", [10.0, 5.0], false);
    let there = write("results.json", [20.0, 15.0], true);
    let v = json(&[
        "extrapolate",
        "--times",
        "160,230",
        "--from-machine",
        &here,
        "--to-machine",
        &there,
        "--to",
        "1,2,4",
        "--json",
    ]);
    assert!(close(&v["core_seconds"], 90.0), "{v}");
    assert!(close(&v["contention_seconds"], 70.0), "{v}");
    assert!(close(&v["runs"][0]["per_core_bandwidth"], 10.0), "{v}");
    assert!(close(&v["runs"][1]["per_core_bandwidth"], 5.0), "{v}");
    let to = &v["to_machine"];
    assert_eq!(to["file"], there.as_str());
    assert_eq!(
        to["per_core_gbps"],
        serde_json::json!([{"cores": 1, "gbps": 20.0}, {"cores": 2, "gbps": 15.0}])
    );
    let p = to["predictions"].as_array().unwrap();
    let got: Vec<(u64, f64, f64)> = p
        .iter()
        .map(|x| {
            (
                x["cores"].as_u64().unwrap(),
                num(&x["bandwidth_ratio"]),
                num(&x["seconds"]),
            )
        })
        .collect();
    let want = [
        (1, 2.0, 125.0),
        (2, 3.0, 90.0 + 70.0 * 10.0 / 15.0),
        (4, 3.0, 90.0 + 70.0 * 10.0 / 7.5),
    ];
    assert_eq!(got.len(), 3, "{got:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(
            g.0 == w.0 && (g.1 - w.1).abs() < 1e-9 && (g.2 - w.2).abs() < 1e-9,
            "{got:?}"
        );
    }
    // The text prints the target's table after the split's.
    let t = stdout(&[
        "extrapolate",
        "--times",
        "160,230",
        "--bandwidth",
        "10,5",
        "--to-machine",
        &there,
        "--to",
        "4",
    ]);
    assert!(t.contains(&format!("on {there}")), "{t}");
    assert!(t.contains("x3.000") && t.contains("183.333"), "{t}");
    // Refusals, one line each.
    fails(
        &["extrapolate", "--times", "160,230", "--to-machine", &there],
        "--to-machine needs this system's per-core bandwidth",
    );
    fails(
        &[
            "extrapolate",
            "--times",
            "160,230",
            "--bandwidth",
            "10,5",
            "--from-machine",
            &here,
        ],
        "cannot be used with",
    );
    let sizes = d.join("sizes.json");
    std::fs::write(&sizes, r#"{"command": "sizes"}"#).unwrap();
    fails(
        &[
            "extrapolate",
            "--times",
            "160,230",
            "--from-machine",
            sizes.to_str().unwrap(),
        ],
        "holds no scaling measurement",
    );
    // A result from before the points named their nodes.
    let mut old = scaling.clone();
    for p in old["packed"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("nodes");
    }
    let old_p = d.join("old.json");
    std::fs::write(&old_p, old.to_string()).unwrap();
    fails(
        &[
            "extrapolate",
            "--times",
            "160,230",
            "--from-machine",
            old_p.to_str().unwrap(),
        ],
        "do not name their nodes",
    );
    fails(
        &[
            "extrapolate",
            "--times",
            "160,230",
            "--from-machine",
            "/dev/zero",
        ],
        "character device",
    );
}
