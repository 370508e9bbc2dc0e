//! `numalab policies` end to end on this machine (one node, two CPUs here:
//! the comparison is degenerate but must run, verify and say so). Runs are
//! short and take turns; bandwidth is only asserted positive.

use crate::common;

use common::{allowed_cpus, fails, fails_rc, json, stdout, turn};

#[test]
fn policies_runs_here_with_every_cell_verified_on_node_0() {
    let _turn = turn();
    let cpus = allowed_cpus();
    let v = json(&[
        "policies",
        "--json",
        "--size",
        "8M",
        "--budget-each",
        "0.2",
        "--min-reps",
        "3",
    ]);
    assert_eq!(v["schema_version"], "1.7");
    assert_eq!(v["command"], "policies");
    assert_eq!(v["kernel"], "triad");
    assert_eq!(v["buffer_bytes"], 8 << 20);
    assert_eq!(v["threads"], cpus.len(), "default: every allowed CPU");
    assert_eq!(v["thread_policy"], "scatter");
    assert_eq!(v["single_node"], true);
    assert_eq!(v["node"], 0);
    assert_eq!(v["rule"]["budget"], 0.2);
    assert_eq!(v["rounds"], 2);
    let notes = v["notes"].to_string();
    assert!(notes.contains("degenerate"), "{notes}");
    let names = |key: &str| -> Vec<String> {
        v[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names("workloads"),
        [
            "single-unpinned",
            "single-pinned",
            "independent",
            "serial-init",
            "numa-aware"
        ]
    );
    assert_eq!(
        names("policies"),
        ["local", "interleave", "interleave-accessing", "one-node"]
    );
    // The accessing nodes are the threads' nodes: node 0, the only one here.
    assert_eq!(v["accessing_nodes"], serde_json::json!([0]));
    assert_eq!(v["policies"][2]["memory_policy"], "interleave:0");
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 20);
    for c in cells {
        let what = format!("{}/{}", c["workload"], c["policy"]);
        let g = &c["gbps"];
        assert!(g["median"].as_f64().unwrap() > 0.0, "{what}");
        assert!(g["spread"].as_f64().unwrap() >= 0.0, "{what}");
        // Triad: memory moves 32 bytes for the program's 24.
        let ratio = c["memory_gbps"]["median"].as_f64().unwrap() / g["median"].as_f64().unwrap();
        assert!((ratio - 32.0 / 24.0).abs() < 1e-9, "{what}: {ratio}");
        assert_eq!(c["verified"], true, "{what}: {}", c["problems"]);
        assert!(c["problems"].as_array().unwrap().is_empty());
        // Two interleaved rounds, pooled: at least two samples each, and
        // the median is that of the pooled samples.
        let samples: Vec<f64> = c["run"]["measurement"]["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert!(samples.len() >= 4, "{what}: {samples:?}");
        let mut sorted = samples.clone();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        assert!(
            (g["median"].as_f64().unwrap() - median).abs() <= 1e-9 * median,
            "{what}"
        );
        let threads = if c["workload"].as_str().unwrap().starts_with("single") {
            1
        } else {
            cpus.len()
        };
        assert_eq!(c["threads"], threads, "{what}");
        // Every page of the cell's data on node 0: 3 arrays x 8 MiB per worker.
        let pages = (3 * 2048 * threads) as u64;
        assert_eq!(
            c["pages_by_node"],
            serde_json::json!({"0": pages}),
            "{what}"
        );
        assert_eq!(c["local_percent"], 100.0, "{what}");
        let run = &c["run"];
        assert!(run["measurement"]["samples"].as_array().unwrap().len() >= 2);
        let workers = run["verification"]["workers"].as_array().unwrap();
        assert_eq!(workers.len(), threads);
        for w in workers {
            for b in w["buffers"].as_array().unwrap() {
                assert_eq!(b["pages_by_node"], serde_json::json!({"0": 2048}), "{what}");
                assert_eq!(b["verified"], true);
            }
        }
    }
    let cell = |w: &str, p: &str| {
        cells
            .iter()
            .find(|c| c["workload"] == w && c["policy"] == p)
            .unwrap()
    };
    // The main thread initializes everything: one toucher, the main CPU.
    let main = v["main_cpu"].as_u64().unwrap();
    assert_eq!(main, v["cpus"][0].as_u64().unwrap());
    for p in ["local", "interleave", "interleave-accessing", "one-node"] {
        let serial = cell("serial-init", p);
        assert_eq!(serial["toucher_cpus"], serde_json::json!([main]), "{p}");
        // Workers still ran on their own CPUs.
        assert_eq!(
            serial["seen_cpus"],
            serde_json::json!(cpus.iter().map(|c| vec![*c]).collect::<Vec<_>>())
        );
    }
    // NUMA-aware and independent workers touch their own data.
    for w in ["numa-aware", "independent"] {
        assert_eq!(cell(w, "local")["toucher_cpus"], serde_json::json!(cpus));
    }
    assert_eq!(cell("independent", "local")["aggregate"], "sum");
    assert_eq!(cell("serial-init", "local")["aggregate"], "slowest");
    // The pinned thread is on the first CPU; the unpinned one anywhere allowed.
    assert_eq!(
        cell("single-pinned", "local")["seen_cpus"],
        serde_json::json!([[main]])
    );
    let free = cell("single-unpinned", "local");
    assert_eq!(free["requested_cpus"], serde_json::json!([null]));
    for c in free["seen_cpus"][0].as_array().unwrap() {
        assert!(cpus.contains(&c.as_u64().unwrap()));
    }
    assert!(free["migrations"].is_u64());
    // Advice per workload, and the one-node caveat.
    let recs = v["recommendations"].as_array().unwrap();
    for topic in [
        "single-pinned",
        "independent",
        "serial-init",
        "numa-aware",
        "pinning",
    ] {
        let r = recs
            .iter()
            .find(|r| r["topic"] == topic)
            .unwrap_or_else(|| panic!("no {topic} advice: {recs:?}"));
        assert!(!r["text"].as_str().unwrap().is_empty());
    }
    let serial = recs.iter().find(|r| r["topic"] == "serial-init").unwrap();
    assert!(serial["text"]
        .as_str()
        .unwrap()
        .contains("any policy: one memory node: local, interleave and bind place the same memory"));
    assert!(serial["best"].is_null());
    for key in ["kernel", "cpu_model", "numa_balancing", "command_line"] {
        assert!(v["environment"].get(key).is_some(), "environment.{key}");
    }
}

#[test]
fn policies_text_is_a_table_with_advice() {
    let _turn = turn();
    let out = stdout(&[
        "policies",
        "--size",
        "4M",
        "--budget-each",
        "0.1",
        "--min-reps",
        "2",
        "--workloads",
        "serial-init,single-pinned",
        "--policies",
        "interleave,local",
    ]);
    for needle in [
        "policies: triad over 3 x 4 MiB per worker (THP off",
        "note: this machine has one memory node",
        "aggregate bandwidth, GB/s",
        "local (first touch)   interleave 0",
        "1 thread, pinned",
        "threads, main thread inits",
        "where the pages are",
        "n0 100% (local 100%)",
        "all data first touched by the main thread on CPU",
        "placement verified in every cell",
        "recommendation for this machine",
    ] {
        assert!(out.contains(needle), "'{needle}' in:\n{out}");
    }
    assert!(!out.contains("one node ("), "column not asked for:\n{out}");
    // Rows in table order, whatever order they were asked in.
    assert!(out.find("1 thread, pinned").unwrap() < out.find("main thread inits").unwrap());
}

#[test]
fn a_table_that_cannot_fit_is_refused_before_any_cell_runs() {
    let _turn = turn();
    // 1 TiB per array fits nowhere: one line, exit 1, no table of cells
    // that did not run.
    for policies in ["one-node,local", "one-node", "interleave"] {
        fails_rc(
            &[
                "policies",
                "--json",
                "--size",
                "1T",
                "--kernel",
                "read",
                "--workloads",
                "single-pinned",
                "--policies",
                policies,
            ],
            1,
            "1 TiB) do not fit in this machine",
        );
    }
}

#[test]
fn bad_options_are_one_line_errors() {
    let _turn = turn();
    let cases: &[(&[&str], &str)] = &[
        (&["policies", "--kernel", "bogus"], "unknown kernel 'bogus'"),
        (&["policies", "--threads", "0"], "--threads '0'"),
        (
            &["policies", "--threads", "999"],
            "--threads 999 but --cpus holds",
        ),
        (
            &["policies", "--layout", "spread"],
            "unknown thread policy 'spread'",
        ),
        (&["policies", "--node", "7"], "--node"),
        (&["policies", "--node", "0-1"], "--node"),
        (&["policies", "--size", "1"], "too small"),
        (
            &["policies", "--workloads", "bogus"],
            "valid: single-unpinned",
        ),
        (
            &["policies", "--policies", "preferred"],
            "valid: local, interleave, interleave-accessing, one-node, all",
        ),
        (&["policies", "--policies", "local,"], "--policies"),
        (&["policies", "--thp", "maybe"], "--thp"),
        (&["policies", "--cpus", "99"], "--cpus"),
        (&["policies", "--budget", "-1"], "--budget"),
        (&["policies", "--units", "mb"], "unknown unit"),
        (&["policies", "--frobnicate"], "--frobnicate"),
    ];
    for (args, needle) in cases {
        fails(args, needle);
    }
}

/// One memory node: every column is the same memory, so the advice makes
/// no better/worse claim, whatever the samples say. The unpinned workload
/// is left out: pinning is about CPUs, not memory, and stays a real test.
#[test]
fn one_memory_node_makes_no_claim() {
    let _turn = turn();
    let args = [
        "policies",
        "--size",
        "4M",
        "--budget-each",
        "0.1",
        "--min-reps",
        "3",
        "--workloads",
        "single-pinned,serial-init,numa-aware",
    ];
    let mut with_json = args.to_vec();
    with_json.push("--json");
    let v = json(&with_json);
    assert_eq!(v["single_node"], true);
    let recs = v["recommendations"].as_array().unwrap();
    let mut compared = 0;
    for r in recs {
        let text = r["text"].as_str().unwrap();
        assert!(!text.contains("beat") && !text.contains("faster"), "{text}");
        assert!(r["best"].is_null(), "{r}");
        for c in r["comparisons"].as_array().unwrap() {
            compared += 1;
            assert_eq!(c["verdict"], "cannot_tell", "{c}");
            assert_eq!(c["significant"], false, "{c}");
            assert!(
                c["rule"].as_str().unwrap().starts_with("Mann–Whitney U"),
                "{c}"
            );
            // The test still ran: its p-value is there, between 0 and 1.
            let p = c["p_value"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&p), "{c}");
        }
        if r["topic"] != "scaling" {
            assert!(text.contains("nothing to compare"), "{text}");
        }
    }
    // Three workloads with two comparisons each, and initialization.
    assert_eq!(compared, 7, "{recs:?}");
    let out = stdout(&args);
    assert!(!out.contains("beat"), "{out}");
    assert!(
        out.contains("one memory node: local, interleave and bind place the same memory"),
        "{out}"
    );
    assert!(out.contains("interleave accessing 0"), "{out}");
}
