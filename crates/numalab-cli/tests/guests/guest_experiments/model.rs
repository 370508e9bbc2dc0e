//! `numalab model --verify` and `numalab advise --verify` in the Quartet
//! guest: the model calibrated
//! from the guest's own report (guest_report.rs runs it first in the same
//! guest), the crossfire scenario predicted, then run by the engine and
//! compared case by case. Timings in the guest are emulated: the test is
//! of the mechanics (every case predicted, measured, paired; the
//! calibration's fitted figures present), never of the figures.

use crate::guest_experiments::quartet_measures;
use serde_json::Value;

/// Steps run in the Quartet guest of the longest measurements, after its
/// report (/tmp/rep).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "model_calibrated",
        "numalab model --from /tmp/rep/results.json --calibration --scenarios crossfire --json",
    ),
    (
        "model_verify",
        "numalab model --from /tmp/rep/results.json --scenarios crossfire --verify --size 1M --rounds 4 --budget-each 0.05 --json",
    ),
    (
        "advise_verify",
        "numalab advise --threads 8 --sharing shared --data 32M --from /tmp/rep/results.json --verify --rounds 2 --budget-each 0.3 --json",
    ),
];

fn rows(v: &Value) -> &Vec<Value> {
    v["check"]["rows"].as_array().unwrap()
}

#[test]
fn quartet_model_is_calibrated_from_the_guest_report_and_verified() {
    let g = quartet_measures();
    let v = g.json("model_calibrated", 0);
    assert!(
        v["params_from"]
            .as_str()
            .unwrap()
            .starts_with("calibrated:/tmp/rep/results.json"),
        "{}",
        v["params_from"]
    );
    let fitted = v["calibration"]["fitted"].as_array().unwrap();
    assert!(!fitted.is_empty(), "{v}");
    for f in fitted {
        let x = f["value"].as_f64().unwrap();
        assert!(x.is_finite() && x > 0.0, "{f}");
    }
    // The Quartet: four controllers and four links both ways.
    let s = &v["scenarios"][0];
    assert_eq!(s["scenario"], "crossfire");
    let names: Vec<&str> = s["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["local", "crossfire", "no crossfire"]);
    let v = g.json("model_verify", 0);
    let rows = rows(&v);
    assert_eq!(rows.len(), 3, "{}", v["check"]);
    for r in rows {
        assert!(r["predicted"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["measured"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["scenario"], "crossfire");
        assert_eq!(r["condition"], "idle");
    }
    assert_eq!(rows[1]["labels"], "0.0.w.1 1.0.w.0");
    assert!(v["check"]["mean_abs_error"].as_f64().unwrap() >= 0.0);
    assert!(v["check"]["rank_correlation"].is_number() || v["check"]["rank_correlation"].is_null());
}

/// `advise --verify` for eight threads sharing 32 MiB: a placement over
/// the four nodes and the OS default (every page on the main thread's
/// node), both run by pinned workers with their pages checked, measured
/// beside predicted.
#[test]
fn quartet_advise_is_verified_with_the_calibrated_model() {
    let v = quartet_measures().json("advise_verify", 0);
    assert!(
        v["params_from"]
            .as_str()
            .unwrap()
            .starts_with("calibrated:/tmp/rep/results.json"),
        "{}",
        v["params_from"]
    );
    assert_eq!(v["single_node"], false);
    let default = v["default"]["name"].as_str().unwrap();
    assert!(default.contains("node 0"), "{default}");
    let runs = v["check"]["runs"].as_array().unwrap();
    let roles: Vec<&str> = runs.iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert!(
        roles.contains(&"best") && roles.contains(&"default"),
        "{roles:?}"
    );
    for r in runs {
        assert_eq!(r["verified"], true, "{r}");
        assert!(r["measured_gbps"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["cpus"].as_array().unwrap().len(), 8, "{r}");
    }
    assert!(v["check"]["predicted_gain"].as_f64().unwrap() > 0.0);
    assert!(v["check"]["measured_gain"].as_f64().unwrap() > 0.0);
}
