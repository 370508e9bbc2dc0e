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
