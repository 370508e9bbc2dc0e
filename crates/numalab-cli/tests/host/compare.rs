//! `numalab compare` on results measured here and on hand-made ones.

use crate::common;

use common::{fails, json as run_json, scratch, stdout};

use serde_json::{json, Value};

/// A scratch directory of one test (tests run in parallel).
fn dir(test: &str) -> std::path::PathBuf {
    scratch(&format!("compare-{test}"))
}

fn fig(m: f64, ci: f64) -> Value {
    json!({"median": m, "best": m, "min": m, "max": m, "spread": 0.01, "rel_ci": ci})
}

#[test]
fn two_bandwidth_runs_side_by_side() {
    let d = dir("bench");
    let (a, b) = (d.join("one.json"), d.join("two.json"));
    for (file, threads) in [(&a, "1"), (&b, "2")] {
        let out = stdout(&[
            "bench",
            "bandwidth",
            "--kernel",
            "read",
            "--size",
            "16M",
            "--threads",
            threads,
            "--budget",
            "0.3",
            "--json",
        ]);
        std::fs::write(file, out).unwrap();
    }
    let html = d.join("c.html");
    let v = run_json(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
        "--json",
    ]);
    let metrics: Vec<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["metric"].as_str().unwrap())
        .collect();
    assert_eq!(metrics, ["gbps", "memory_gbps"]);
    for r in v["rows"].as_array().unwrap() {
        let (x, y) = (r["a"].as_f64().unwrap(), r["b"].as_f64().unwrap());
        assert!((r["ratio"].as_f64().unwrap() - y / x).abs() < 1e-9);
        assert!(r["significant"].is_boolean());
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("id=\"table-metrics\"") && page.contains("<td>gbps</td>"));
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn what_differs_beyond_the_spread_and_the_environment() {
    let d = dir("made");
    let a = json!({"schema_version": "1.0", "command": "matrix",
        "environment": {"kernel": "6.1.0", "numa_balancing": false},
        "latency": [[{"cpu_node": 0, "mem_node": 1, "value": fig(100.0, 0.01)}]],
        "bandwidth": [[{"cpu_node": 0, "mem_node": 1, "value": fig(10.0, 0.2)}]]});
    let b = json!({"schema_version": "1.0", "command": "matrix",
        "environment": {"kernel": "6.12.0", "numa_balancing": false},
        "latency": [[{"cpu_node": 0, "mem_node": 1, "value": fig(130.0, 0.01)}]],
        "bandwidth": [[{"cpu_node": 0, "mem_node": 1, "value": fig(11.0, 0.2)}]]});
    let (pa, pb) = (d.join("a.json"), d.join("b.json"));
    std::fs::write(&pa, a.to_string()).unwrap();
    std::fs::write(&pb, b.to_string()).unwrap();
    let text = stdout(&["compare", pa.to_str().unwrap(), pb.to_str().unwrap()]);
    assert!(text.contains("kernel"), "{text}");
    assert!(text.contains("6.1.0") && text.contains("6.12.0"), "{text}");
    let line = |m: &str| text.lines().find(|l| l.starts_with(m)).unwrap().to_string();
    let lat = line("latency[cpu_node=0,mem_node=1].value");
    assert!(
        lat.contains("100.0") && lat.contains("130.0") && lat.contains("1.300"),
        "{lat}"
    );
    assert!(lat.trim_end().ends_with("yes"), "{lat}");
    assert!(line("bandwidth[cpu_node=0,mem_node=1].value")
        .trim_end()
        .ends_with("no"));
    assert!(text.contains("2 metric(s), 1 differ"), "{text}");
    let text = stdout(&[
        "compare",
        pa.to_str().unwrap(),
        pb.to_str().unwrap(),
        "--significant",
    ]);
    assert!(!text.contains("bandwidth["), "{text}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn bad_inputs_are_one_line_errors() {
    let d = dir("bad");
    let not_json = d.join("x.txt");
    std::fs::write(&not_json, "hello").unwrap();
    let no_schema = d.join("y.json");
    std::fs::write(&no_schema, "{}").unwrap();
    let empty = d.join("z.json");
    std::fs::write(&empty, r#"{"schema_version":"1.0","command":"topology"}"#).unwrap();
    for (args, needle) in [
        (
            vec!["compare", "/no/such.json", "/no/such.json"],
            "cannot read /no/such.json",
        ),
        (
            vec![
                "compare",
                not_json.to_str().unwrap(),
                not_json.to_str().unwrap(),
            ],
            "is not JSON",
        ),
        (
            vec![
                "compare",
                no_schema.to_str().unwrap(),
                no_schema.to_str().unwrap(),
            ],
            "no schema_version",
        ),
        (
            vec!["compare", empty.to_str().unwrap(), empty.to_str().unwrap()],
            "hold no figures to compare",
        ),
    ] {
        fails(&args, needle);
    }
    std::fs::remove_dir_all(&d).ok();
}
