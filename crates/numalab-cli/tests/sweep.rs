//! `numalab sweep` on this host (one node, two CPUs): the folded truth
//! table, the whole-sweep budget, findings from a saved result, errors.

mod common;

use common::numalab;

use serde_json::Value;
use std::sync::Mutex;

/// Timed runs one at a time: they share two CPUs.
static SERIAL: Mutex<()> = Mutex::new(());

fn json(args: &[&str]) -> Value {
    let (rc, out, err) = numalab(args);
    assert_eq!(rc, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}\n{out}"))
}

fn one_line_error(args: &[&str], needle: &str) {
    let (rc, _, err) = numalab(args);
    assert_eq!(rc, 2, "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("numalab: "), "{err}");
    assert!(err.contains(needle), "'{needle}' in {err}");
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn folded_sweep_on_this_host() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let v = json(&[
        "sweep",
        "--threads",
        "1,2",
        "--size",
        "16M",
        "--case-budget",
        "0.2",
        "--json",
    ]);
    assert_eq!(v["command"], "sweep");
    assert_eq!(v["verified"], true, "{}", v["warnings"]);
    assert!(v["environment"]["kernel"].is_string());
    let n = cpus() as u64;
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    // One node: every case is 0 hops; cases = (CPUs x 1 node x 2 accesses)^threads.
    assert_eq!(runs[0]["total_cases"], 2 * n);
    assert_eq!(runs[1]["total_cases"], (2 * n) * (2 * n));
    for r in runs {
        let cases = r["cases"].as_array().unwrap();
        assert_eq!(r["cases_run"], r["classes"]);
        let sizes: u64 = cases
            .iter()
            .map(|c| c["class_size"].as_u64().unwrap())
            .sum();
        assert_eq!(sizes, r["total_cases"].as_u64().unwrap());
        let mut min = f64::INFINITY;
        for c in cases {
            assert_eq!(c["verified"], true, "{c}");
            let norm = c["normalized"].as_f64().unwrap();
            assert!(norm >= 1.0 - 1e-9, "{c}");
            min = min.min(norm);
            for t in c["threads"].as_array().unwrap() {
                assert_eq!(t["hops"], 0);
                assert_eq!(t["mem"], 0);
                assert_eq!(t["seen_cpus"], serde_json::json!([t["cpu"]]));
                assert!(t["memory_gbps"].as_f64().unwrap() > 0.1, "{t}");
                let label = t["label"].as_str().unwrap();
                assert!(label.starts_with("0.") && label.ends_with(".0"), "{label}");
            }
        }
        assert!((min - 1.0).abs() < 1e-9);
    }
    // Two threads on one CPU take turns: marked so that (d) compares like with like.
    let shared = runs[1]["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["sharing"] == "cpu")
        .count();
    assert_eq!(shared, 4, "r/r, r/w, w/r, w/w on one CPU");
    // On one node the hop questions cannot be asked, and the sweep says so.
    let f = v["findings"][0]["findings"].as_array().unwrap();
    assert_eq!(v["findings"][0]["condition"], "idle");
    for x in &f[..3] {
        assert!(x["holds"].is_null(), "{x}");
    }
    assert!(f[0]["detail"].as_str().unwrap().contains("one memory node"));
    assert!(f[3]["ratio"].as_f64().unwrap() >= 1.0);
    for b in v["buffers"].as_array().unwrap() {
        assert_eq!(b["at_end"]["pages_by_node"]["0"], 16 << 20 >> 12, "{b}");
    }
}

#[test]
fn the_budget_picks_cases_covering_every_hop_class_and_is_kept() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let t = std::time::Instant::now();
    let v = json(&[
        "sweep",
        "--threads",
        "2",
        "--size",
        "16M",
        "--budget",
        "1",
        "--json",
    ]);
    let wall = t.elapsed().as_secs_f64();
    let r = &v["runs"][0];
    assert!(
        r["cases_run"].as_u64().unwrap() < r["classes"].as_u64().unwrap(),
        "{r}"
    );
    assert_eq!(r["hop_classes_run"], r["hop_classes"]);
    assert!(
        v["warnings"][0].as_str().unwrap().contains("--budget 1s"),
        "{}",
        v["warnings"]
    );
    let elapsed = v["elapsed_s"].as_f64().unwrap();
    assert!(elapsed <= 1.1, "sweep took {elapsed} s for --budget 1");
    // Start-up and output around the sweep itself stay small.
    assert!(wall < 3.0, "{wall}");
    // A budget the sweep can afford runs every class and stays within it.
    let v = json(&[
        "sweep",
        "--threads",
        "2",
        "--size",
        "16M",
        "--budget",
        "4",
        "--json",
    ]);
    let r = &v["runs"][0];
    assert_eq!(r["cases_run"], r["classes"]);
    let elapsed = v["elapsed_s"].as_f64().unwrap();
    assert!(elapsed <= 4.4, "sweep took {elapsed} s for --budget 4");
}

#[test]
fn findings_from_a_saved_result_and_the_list() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rc, out, err) = numalab(&[
        "sweep",
        "--threads",
        "2",
        "--access",
        "w",
        "--size",
        "8M",
        "--reps",
        "1",
        "--json",
    ]);
    assert_eq!(rc, 0, "{err}");
    let dir = std::env::temp_dir().join(format!("numalab-sweep-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("sweep.json");
    std::fs::write(&file, &out).unwrap();
    let (rc, text, err) = numalab(&["sweep", "--from", file.to_str().unwrap(), "--findings"]);
    assert_eq!(rc, 0, "{err}");
    assert!(text.contains("findings, idle:"), "{text}");
    assert!(
        text.contains("(d) cases with the same hop counts"),
        "{text}"
    );
    let (rc, text, _) = numalab(&["sweep", "--from", file.to_str().unwrap()]);
    assert_eq!(rc, 0);
    assert!(text.contains("labels (node.core.r|w.mem)"), "{text}");
    assert!(text.contains("0.0.w.0"), "{text}");
    // A result of another command is refused.
    std::fs::write(&file, r#"{"schema_version":"1.0","command":"matrix"}"#).unwrap();
    one_line_error(
        &["sweep", "--from", file.to_str().unwrap()],
        "not a `numalab sweep --json` result (its command is 'matrix')",
    );
    std::fs::remove_dir_all(&dir).ok();
    let (rc, text, _) = numalab(&["sweep", "--list"]);
    assert_eq!(rc, 0);
    let n = cpus();
    assert!(
        text.contains(&format!("2 thread(s): {} cases", (2 * n) * (2 * n))),
        "{text}"
    );
}

#[test]
fn bad_sweep_options_get_one_line_errors() {
    one_line_error(&["sweep", "--threads", "0"], "from 1 to 8");
    one_line_error(&["sweep", "--access", "rw2"], "valid: r (read-only)");
    one_line_error(
        &["sweep", "--subscription", "most", "--background", "low"],
        "valid: under",
    );
    one_line_error(&["sweep", "--background", "lots"], "--background");
    one_line_error(
        &["sweep", "--budget", "-3"],
        "--budget '-3' is not a positive number",
    );
    one_line_error(&["sweep", "--reps", "0"], "--reps '0'");
    one_line_error(&["sweep", "--sample-ms", "x"], "--sample-ms 'x'");
    one_line_error(&["sweep", "--write-kernel", "copy"], "one-array kernel");
    one_line_error(&["sweep", "--mem-nodes", "5"], "--mem-nodes");
    one_line_error(
        &["sweep", "--from", "/no/such/file.json"],
        "--from /no/such/file.json",
    );
    one_line_error(&["sweep", "--size", "1K"], "too small");
}

#[test]
fn background_threads_run_on_the_free_cpu_at_the_asked_rate() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if cpus() < 2 {
        eprintln!("skipped: background load needs a CPU the foreground thread leaves free");
        return;
    }
    let v = json(&[
        "sweep",
        "--threads",
        "1",
        "--cpus",
        "0",
        "--access",
        "r",
        "--size",
        "16M",
        "--background",
        "none,1",
        "--background-size",
        "16M",
        "--case-budget",
        "0.3",
        "--json",
    ]);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(runs[0]["background"].is_null());
    assert_eq!(runs[1]["background"]["bytes_per_second"], 1e9);
    let c = &runs[1]["cases"][0];
    assert_eq!(c["verified"], true, "{c}");
    let bg = c["background_cpus"].as_array().unwrap();
    assert!(!bg.is_empty() && !bg.contains(&serde_json::json!(0)), "{c}");
    // Pacing accuracy itself is tested to 10% in the engine's pacing tests;
    // here the sweep must record what the threads achieved while the case ran.
    for r in c["background_achieved"].as_array().unwrap() {
        let r = r.as_f64().unwrap();
        assert!((0.6e9..1.3e9).contains(&r), "achieved {r} B/s for 1 GB/s");
    }
    assert_eq!(
        v["findings"][1]["condition"],
        "background 1 (1.00 GB/s per thread), full subscription"
    );
}

#[test]
fn the_plan_of_a_machine_from_a_topology_file() {
    let quartet = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml"
    );
    let (rc, text, err) = numalab(&["sweep", "--list", "--topology", quartet]);
    assert_eq!(rc, 0, "{err}");
    assert!(
        text.contains("2 thread(s): 4096 cases (8 CPUs x 4 memory nodes x 2 access(es), per thread), 184 classes under 8 node symmetries"),
        "{text}"
    );
    assert!(
        text.contains("0.0.w.1 1.0.w.0"),
        "crossfire is listed: {text}"
    );
    one_line_error(
        &["sweep", "--topology", quartet],
        "--topology only goes with --list",
    );
}
