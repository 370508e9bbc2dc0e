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
            "--budget-each",
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

/// A report's results.json in miniature, as `report` writes it: settings
/// at the top and per part, key figures, the environment and the machine.
fn report(mode: &str, buffer: u64, local_ns: f64, thp: &str) -> Value {
    json!({"schema": "numalab-report", "schema_version": "1.1", "command": "report",
        "mode": mode, "budget_s": 80.0, "buffer_bytes": buffer,
        "environment": {"kernel": "6.1.0", "thp_enabled": thp, "timestamp_utc": format!("{mode}")},
        "machine": {"nodes": [{"os_index": 0, "memory_bytes": 1u64 << 34}], "distances": null},
        "summary": {"key_figures": {"local_latency_ns": local_ns, "local_read_gbps": 12.0},
                    "key_intervals": {"local_latency_ns": [local_ns - 1.0, local_ns + 1.0]}},
        "parts": {"latency-matrix": {"budget_s": 10.0, "result": {
            "latency": [[{"cpu_node": 0, "mem_node": 0, "latency_ns": fig(local_ns, 0.01)}]]}}}})
}

#[test]
fn reports_list_what_differs_first_then_key_figures_and_mark_the_incomparable() {
    let d = dir("reports");
    let (pa, pb, pc) = (d.join("a.json"), d.join("b.json"), d.join("c.json"));
    std::fs::write(&pa, report("default", 1 << 30, 90.0, "always").to_string()).unwrap();
    std::fs::write(&pb, report("default", 1 << 30, 99.0, "never").to_string()).unwrap();
    std::fs::write(&pc, report("quick", 128 << 20, 99.0, "always").to_string()).unwrap();
    let (a, b, c) = (
        pa.to_str().unwrap(),
        pb.to_str().unwrap(),
        pc.to_str().unwrap(),
    );
    // Same settings, THP changed: the environment first, the key figures
    // with units, every figure compared.
    let text = stdout(&["compare", a, b]);
    let at = |needle: &str| {
        text.find(needle)
            .unwrap_or_else(|| panic!("no '{needle}' in {text}"))
    };
    assert!(
        at("environment differences:") < at("key figures:"),
        "{text}"
    );
    assert!(at("key figures:") < at("\nmetric "), "{text}");
    assert!(!text.contains("configuration differences"), "{text}");
    assert!(!text.contains("timestamp_utc"), "{text}");
    let key = text
        .lines()
        .find(|l| l.contains("Idle latency, local memory"))
        .unwrap();
    // Each side's interval, and 89-91 ns against 98-100 ns: apart.
    assert!(
        key.contains("90.00 ns ±1.1%")
            && key.contains("99.00 ns ±1.0%")
            && key.contains("1.100")
            && key.ends_with("yes"),
        "{key}"
    );
    let read = text
        .lines()
        .find(|l| l.contains("Read bandwidth, local memory"))
        .unwrap();
    // No interval: no verdict.
    assert!(
        read.contains("12.00 GB/s") && read.contains("1.000") && read.ends_with("-"),
        "{read}"
    );
    let v = run_json(&["compare", a, b, "--json"]);
    assert_eq!(v["key_figures"][0]["a_interval"], json!([89.0, 91.0]));
    assert_eq!(v["key_figures"][0]["beyond_intervals"], true);
    assert!(v["key_figures"][1]["beyond_intervals"].is_null());
    // Quick against default: another mode and buffer, listed first; no
    // ratio and no verdict, each figure says why.
    let v = run_json(&["compare", a, c, "--json"]);
    assert_eq!(
        v["configuration_differences"],
        json!([
            ["mode", "default", "quick"],
            ["buffer_bytes", "1073741824", "134217728"]
        ])
    );
    let row = &v["rows"][0];
    assert_eq!(row["unit"], "ns");
    assert!(
        row["ratio"].is_null() && row["significant"].is_null(),
        "{row}"
    );
    assert_eq!(
        row["not_comparable"],
        "mode default vs quick, buffer_bytes 1073741824 vs 134217728"
    );
    assert!(v["key_figures"][0]["ratio"].is_null());
    assert_eq!(v["key_figures"][0]["unit"], "ns");
    let text = stdout(&["compare", a, c]);
    assert!(
        text.contains("1 not comparable (measured under other settings)"),
        "{text}"
    );
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

/// A profile.json made by hand in the current schema: `regions` regions,
/// region `i` with `remote` of its 100 samples remote.
fn profile(regions: usize, remote: impl Fn(usize) -> u64) -> Value {
    let regions: Vec<Value> = (0..regions)
        .map(|i| {
            let r = remote(i);
            json!({"kind": "heap", "site": format!("alloc_{i} app.c:{i}"), "sampled": true,
                "object": null, "thread": null, "stack": [format!("alloc_{i} app.c:{i}")],
                "allocations": 1, "bytes": 1 << 20, "first_address": 4096 * (i + 1),
                "samples": 100, "reads": 100, "writes": 0, "unknown_access": 0,
                "accesses": {"0": {"0": 100 - r, "1": r}}, "remote_share": r as f64 / 100.0,
                "distance_ratio": null, "pages_by_node": {"0": 128, "1": 128},
                "threads": {"7": 100}, "first_touch": null, "pages_over_time": []})
        })
        .collect();
    json!({"schema_version": numalab::profile::SCHEMA_VERSION, "command": ["./app"],
        "pid": 1, "rate": 1000, "min_bytes": 65536, "page_size": 4096, "pages_armed": 0,
        "samples": 100 * regions.len(), "cost": null, "sampled_for_s": null,
        "unattributed": 0, "remote_share": null, "regions": regions, "threads": [],
        "diagnoses": [], "warnings": []})
}

/// Two profiles made by hand (no profiler needed), read straight into the
/// profile's struct, compared region by region; a profile of a schema this
/// numalab does not read is refused with its version, and a profile beside
/// a result is refused.
#[test]
fn two_profiles_made_by_hand() {
    let d = dir("profiles");
    let (pa, pb) = (d.join("a.json"), d.join("b.json"));
    // Region 0 goes from 0 to 90 remote samples of 100; the others stay.
    std::fs::write(&pa, profile(500, |_| 0).to_string()).unwrap();
    std::fs::write(
        &pb,
        profile(500, |i| if i == 0 { 90 } else { 0 }).to_string(),
    )
    .unwrap();
    let (a, b) = (pa.to_str().unwrap(), pb.to_str().unwrap());
    let v = run_json(&["compare", a, b, "--json"]);
    let regions = v["regions"].as_array().unwrap();
    assert_eq!(regions.len(), 200, "the most sampled 200 of 500");
    let changed: Vec<&str> = regions
        .iter()
        .filter(|r| r["remote"]["changed"] == true)
        .map(|r| r["site"].as_str().unwrap())
        .collect();
    assert_eq!(changed, ["alloc_0 app.c:0"], "{v}");
    assert!(v["warnings"].to_string().contains("500 regions"), "{v}");
    let text = stdout(&["compare", a, b, "--significant"]);
    assert!(text.contains("alloc_0 app.c:0"), "{text}");
    assert!(!text.contains("alloc_1 app.c:1"), "{text}");
    // Another major schema: refused by its version, before it is parsed
    // (its regions are no regions).
    let old = d.join("old.json");
    std::fs::write(
        &old,
        json!({"schema_version": "0.1", "pages_armed": 0, "regions": [1, 2]}).to_string(),
    )
    .unwrap();
    fails(
        &["compare", a, old.to_str().unwrap()],
        "old.json is a profile of schema 0.1; this numalab reads schemas 1.x to 2.x",
    );
    let result = d.join("r.json");
    std::fs::write(&result, r#"{"schema_version":"1.0","command":"topology"}"#).unwrap();
    fails(
        &["compare", result.to_str().unwrap(), a],
        "a.json is a profile and ",
    );
    std::fs::remove_dir_all(&d).ok();
}

/// A result of many runs, a few of them named alike: every run is its own
/// metric, and only the runs named alike carry their index.
#[test]
fn many_runs_a_few_named_alike() {
    let d = dir("many");
    let result = |shift: f64| {
        let runs: Vec<Value> = (0..20_000)
            .map(|i| {
                let threads = if i % 5000 == 1 { i - 1 } else { i };
                json!({"threads": threads, "gbps": fig(10.0 + shift, 0.001)})
            })
            .collect();
        json!({"schema_version": "1.0", "command": "sweep", "sweep": {"runs": runs}})
    };
    let (pa, pb) = (d.join("a.json"), d.join("b.json"));
    std::fs::write(&pa, result(0.0).to_string()).unwrap();
    std::fs::write(&pb, result(1.0).to_string()).unwrap();
    let v = run_json(&[
        "compare",
        pa.to_str().unwrap(),
        pb.to_str().unwrap(),
        "--json",
    ]);
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 20_000);
    let indexed: Vec<&str> = rows
        .iter()
        .map(|r| r["metric"].as_str().unwrap())
        .filter(|m| m.contains('#'))
        .collect();
    assert_eq!(
        indexed,
        [
            "sweep.runs[threads=0#0].gbps",
            "sweep.runs[threads=0#1].gbps",
            "sweep.runs[threads=10000#10000].gbps",
            "sweep.runs[threads=10000#10001].gbps",
            "sweep.runs[threads=15000#15000].gbps",
            "sweep.runs[threads=15000#15001].gbps",
            "sweep.runs[threads=5000#5000].gbps",
            "sweep.runs[threads=5000#5001].gbps",
        ]
    );
    assert!(
        rows.iter().all(|r| r["significant"] == true),
        "1.0 apart, CI 1%"
    );
    std::fs::remove_dir_all(&d).ok();
}
