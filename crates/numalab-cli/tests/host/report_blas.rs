//! The report part `blas` on this machine: it runs only with `--full`
//! (results.json, its tables, its claim and its section), and without
//! `--full` it is listed as not applicable with the reason, even when asked
//! for with `--parts`. Timings are never asserted.

use crate::common;

use common::report::{assert_valid, render_and_check, results};
use common::{numalab, scratch, turn};
use serde_json::Value;
use std::path::Path;

/// Memory nodes of this machine, as `numalab topology --json` lists them.
fn memory_nodes() -> usize {
    common::json(&["topology", "--json"])["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["memory_bytes"].as_u64().unwrap_or(0) > 0)
        .count()
}

/// How the summary names this machine's node count.
fn nodes_text() -> String {
    let nodes = common::json(&["topology", "--json"])["nodes"]
        .as_array()
        .unwrap()
        .len();
    if nodes == 1 {
        "1 NUMA node,".to_string()
    } else {
        format!("{nodes} NUMA nodes")
    }
}

fn csv_rows(dir: &Path, name: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    text.split("\r\n")
        .filter(|l| !l.is_empty())
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

#[test]
fn full_report_measures_blas_with_its_tables_claim_and_section() {
    let _turn = turn();
    let dir = scratch("report-blas-full");
    let r = numalab(&[
        "report",
        "--full",
        "--parts",
        "blas",
        "--size",
        "64M",
        "--budget",
        "20",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(r.rc, 0, "stdout:\n{}\nstderr:\n{}", r.out, r.err);
    let doc = results(&dir);
    assert_valid(&doc, "--full --parts blas");
    assert_eq!(doc["mode"], "full");
    assert_eq!(doc["complete"], true);
    let part = &doc["parts"]["blas"];
    assert_eq!(part["status"], "done", "{part}");
    assert_eq!(part["verified"], true, "{part}");
    let res = &part["result"];
    assert_eq!(res["mode"], "serial");
    let kernels: Vec<&str> = res["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["kernel"].as_str().unwrap())
        .collect();
    assert_eq!(kernels, ["daxpy", "triad", "dgemv", "dgemm"]);
    assert_eq!(res["check"]["checked"], true, "{}", res["check"]);
    // The plan's placements are the ones measured, one row each in blas.csv.
    let placements: usize = res["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["placements"].as_array().unwrap().len())
        .sum();
    assert_eq!(
        part["plan"]["work"]["measurements"].as_u64(),
        Some(placements as u64)
    );
    let rows = csv_rows(&dir, "blas.csv");
    assert_eq!(
        rows[0],
        [
            "level",
            "kernel",
            "cpu_node",
            "hops_class",
            "operand_nodes",
            "stands_for",
            "contention",
            "gflops_median",
            "verified"
        ]
    );
    assert_eq!(rows.len(), 1 + placements);
    assert!(rows[1..].iter().all(|r| r[8] == "yes"), "{rows:?}");
    if memory_nodes() == 1 {
        // Every placement is local: one per kernel.
        assert_eq!(placements, 4);
        assert!(rows.iter().any(|r| r[1] == "dgemm" && r[3] == "0/0/0"));
        assert!(res["finding"]["verdict"]
            .as_str()
            .unwrap()
            .starts_with("cannot be measured here"));
    }
    let levels = csv_rows(&dir, "blas-levels.csv");
    assert_eq!(levels.len(), 1 + 4, "{levels:?}");
    // The claim states the finding's verdict and each level's figure.
    let claim: &Value = doc["summary"]["claims"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["topic"] == "blas")
        .expect("a blas claim");
    let text = claim["text"].as_str().unwrap();
    assert!(
        text.contains(res["finding"]["verdict"].as_str().unwrap()),
        "{text}"
    );
    // One figure per level where placement can matter; none where every
    // placement is local.
    let figures = if memory_nodes() == 1 { 0 } else { 3 };
    assert_eq!(
        claim["figures"].as_array().map_or(0, |f| f.len()),
        figures,
        "{claim}"
    );
    render_and_check(
        &dir,
        "report-blas",
        &["sec-blas", "tab-blas", "tab-blas-levels"],
        &nodes_text(),
    );
}

#[test]
fn without_full_blas_is_not_applicable_even_when_asked_for() {
    let dir = scratch("report-blas-default");
    let r = numalab(&[
        "report",
        "--parts",
        "blas",
        "--budget",
        "5",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(r.rc, 0, "stdout:\n{}\nstderr:\n{}", r.out, r.err);
    let doc = results(&dir);
    assert_valid(&doc, "--parts blas without --full");
    let part = &doc["parts"]["blas"];
    assert_eq!(part["status"], "not-applicable", "{part}");
    assert_eq!(part["reason"], "runs with --full", "{part}");
    assert!(part["result"].is_null());
    assert!(!dir.join("blas.csv").exists());
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("id=\"missing-blas\""), "no missing-blas");
    assert!(html.contains("runs with --full"));
}
