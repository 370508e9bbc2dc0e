//! `numalab fleet` on this machine: the step's plumbing through a stand-in
//! `srun` (the real Slurm cluster's tests are in tests/cluster), and
//! summarize, check and compare on fleets made from a real report.

use crate::common::report::results;
use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// A stand-in for srun: runs the step's task once per name of
/// FAKE_SRUN_NODES, one after the other, with SLURMD_NODENAME set, as
/// srun does on each node; a node named `gone` is never started (an
/// unreachable node), and on a node named `bad` the node's report
/// directory is a file (a broken node), so its report fails.
const FAKE_SRUN: &str = r#"#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != sh ]; do shift; done
shift 2   # sh -c
script=$1; shift
for n in $FAKE_SRUN_NODES; do
    [ "$n" = gone ] && continue
    if [ "$n" = bad ]; then mkdir -p "$2/nodes" && : > "$2/nodes/bad"; fi
    SLURMD_NODENAME=$n sh -c "$script" "$@"
done
exit 0
"#;

fn fake_srun(dir: &Path) -> String {
    let p = dir.join("srun");
    std::fs::write(&p, FAKE_SRUN).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&p)
        .status()
        .unwrap();
    p.to_string_lossy().into_owned()
}

fn node<'a>(f: &'a Value, name: &str) -> &'a Value {
    f["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("node {name} in {f}"))
}

#[test]
fn a_fleet_report_gathers_every_node_and_names_the_failed_and_the_unreached() {
    let _turn = turn();
    let d = scratch("fleet-report");
    let srun = fake_srun(&d);
    let out = d.join("fleet");
    let r = Run::new(&[
        "fleet",
        "report",
        "-o",
        out.to_str().unwrap(),
        "--parts",
        "latency-matrix",
        "--size",
        "64M",
        "--node-budget",
        "2",
        "--srun",
        &srun,
        "--nodelist",
        "h[1-2],bad,gone",
        "--json",
    ])
    .env("FAKE_SRUN_NODES", "h1 h2 bad gone")
    .run();
    assert_eq!(r.rc, 3, "some node does not conform; stderr: {}", r.err);
    let mut v = parse_json(&r.out, "fleet report --json");
    open_envelope(&mut v, "fleet");
    assert_eq!(v["schema"], "numalab-fleet");
    assert_eq!(
        (v["nodes_total"].as_u64(), v["reported"].as_u64()),
        (Some(4), Some(2)),
        "nodes: {}\nstderr: {}",
        v["nodes"],
        r.err
    );
    for h in ["h1", "h2"] {
        let n = node(&v, h);
        assert_eq!(n["verdict"], "conforms", "{n}");
        assert_eq!(n["status"], "reported");
        // The same machine twice: every setting equal.
        assert_eq!(n["settings"]["numa_nodes"], "1", "{n}");
        // --size reached every node's report (without it each node sizes
        // its buffers from its cache: 1.88 GiB on a VM that reports a
        // 480 MiB L3, where the fake srun's nodes, run one after another,
        // outlasted the 128 s timeout under load).
        let doc = results(&out.join("nodes").join(h));
        assert_eq!(doc["buffer_bytes"], 64 << 20, "{h}");
        assert!(out.join("logs").join(format!("{h}.exit_status")).is_file());
    }
    let bad = node(&v, "bad");
    assert_eq!(bad["verdict"], "failed");
    let why = bad["reason"].as_str().unwrap();
    assert!(
        why.starts_with("numalab report exited with status "),
        "{why}"
    );
    assert!(why.contains(": numalab: "), "{why}");
    let gone = node(&v, "gone");
    assert_eq!(gone["verdict"], "failed");
    assert_eq!(
        gone["reason"],
        "never started: no log arrived from it (srun exited 0)"
    );
    for f in ["fleet.json", "fleet.html", "fleet.txt", "fleet.csv"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    let html = std::fs::read_to_string(out.join("fleet.html")).unwrap();
    assert!(html.contains("<td>bad</td><td>failed</td>"), "{html}");
    assert!(r.err.contains("fleet: 2 of 4 nodes reported;"), "{}", r.err);
    // Again into the same directory: refused without --force.
    let again = Run::new(&[
        "fleet",
        "report",
        "-o",
        out.to_str().unwrap(),
        "--srun",
        &srun,
    ])
    .run();
    assert_one_line_error(
        "again",
        again.rc,
        &again.err,
        2,
        "already holds a fleet: give --force",
    );
}

/// A node's results.json with its local read bandwidth and THP setting
/// replaced.
fn edited(base: &Value, gbps: f64, thp: &str) -> String {
    let mut v = base.clone();
    v["summary"]["key_figures"]["local_read_gbps"] = gbps.into();
    v["environment"]["thp_enabled"] = thp.into();
    v.to_string()
}

fn write_fleet(dir: &Path, nodes: &[(&str, String)]) {
    for (n, text) in nodes {
        let d = dir.join("nodes").join(n);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("results.json"), text).unwrap();
    }
}

#[test]
fn summarize_check_and_compare_judge_nodes_of_a_real_report() {
    let _turn = turn();
    let d = scratch("fleet-judge");
    let one = d.join("one");
    let r = numalab(&[
        "report",
        "--parts",
        "latency-matrix",
        "--size",
        "64M",
        "--budget",
        "2",
        "-o",
        one.to_str().unwrap(),
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let base = results(&one);
    let before = d.join("before");
    let after = d.join("after");
    let fleet = |gbps: [f64; 4], thp: [&str; 4]| -> Vec<(&'static str, String)> {
        ["n1", "n2", "n3", "n4"]
            .into_iter()
            .zip(gbps.iter().zip(thp))
            .map(|(n, (g, t))| (n, edited(&base, *g, t)))
            .collect()
    };
    write_fleet(&before, &fleet([20.0, 20.4, 10.0, 20.2], ["madvise"; 4]));
    write_fleet(
        &after,
        &fleet(
            [22.0, 22.4, 22.1, 22.2],
            ["madvise", "madvise", "madvise", "never"],
        ),
    );
    // summarize: n3's halved bandwidth is the one outlier; it writes fleet.*.
    let s = numalab(&["fleet", "summarize", before.to_str().unwrap()]);
    assert_eq!(s.rc, 3, "{}", s.err);
    assert!(
        s.out
            .contains("  n3 outlier: Read bandwidth, local memory: 10.0 GB/s, modified z -"),
        "{}",
        s.out
    );
    assert!(s
        .out
        .contains("4 of 4 nodes reported: 3 conform, 1 outlier, 0 undecided, 0 failed."));
    assert!(before.join("fleet.json").is_file());
    // check: against n1's report; n4's THP differs, n3 is 50% below.
    let baseline = before.join("nodes/n1/results.json");
    let mut c = json_rc(
        &[
            "fleet",
            "check",
            after.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
            "--json",
        ],
        3,
    );
    open_envelope(&mut c, "fleet");
    assert_eq!(
        node(&c, "n4")["reasons"],
        serde_json::json!([
            "transparent huge pages: never, the baseline madvise",
            "Read bandwidth, local memory: 22.2 GB/s, 11% above the baseline's 20.0 (tolerance 10%)"
        ])
    );
    assert_eq!(
        node(&c, "n1")["verdict"],
        "outlier",
        "22 GB/s is 10% above 20"
    );
    let loose = json_rc(
        &[
            "fleet",
            "check",
            after.to_str().unwrap(),
            "--baseline",
            baseline.to_str().unwrap(),
            "--tolerance",
            "15",
            "--json",
        ],
        3,
    );
    assert_eq!(node(&loose, "n1")["verdict"], "conforms");
    assert!(!after.join("fleet.json").exists(), "check writes nothing");
    // compare: every node's bandwidth rose; n3 and n4 changed verdicts.
    let cmp = stdout(&[
        "fleet",
        "compare",
        before.join("fleet.json").to_str().unwrap(),
        after.to_str().unwrap(),
    ]);
    // 4 of 4 nodes up is p = 2/16: not enough nodes to say it moved.
    assert!(
        cmp.contains("No key figure moved on a clear majority of the nodes in both (two-sided sign test, p < 0.05)."),
        "{cmp}"
    );
    let row = cmp
        .lines()
        .find(|l| l.starts_with("Read bandwidth, local memory "))
        .unwrap_or_else(|| panic!("{cmp}"));
    let cells: Vec<&str> = row.split_whitespace().rev().take(6).collect();
    assert_eq!(
        cells,
        ["tell", "cannot", "1.25e-1", "4/0", "1.102", "22.1"],
        "{row}"
    );
    assert!(cmp.contains("n4 thp_enabled: madvise → never"), "{cmp}");
    assert!(cmp.contains("n3: outlier → conforms"), "{cmp}");
}

#[test]
fn bad_fleet_input_is_refused_in_one_line() {
    let d = scratch("fleet-bad");
    let dir = d.to_str().unwrap();
    fails(
        &["fleet", "report", "-o", dir, "--nodelist", "cn[1-"],
        "--nodelist: host list 'cn[1-': a '[' is not closed",
    );
    fails(
        &["fleet", "report", "-o", dir, "--parts", "nosuch"],
        "--parts: ",
    );
    fails(
        &["fleet", "report", "-o", dir, "--size", "10K"],
        "--size 10K is too small: at least 1 MiB",
    );
    std::fs::write(d.join("mine.txt"), "x").unwrap();
    fails(
        &["fleet", "report", "-o", dir],
        "holds mine.txt, which numalab fleet did not write",
    );
    let empty = d.join("empty");
    fails_rc(
        &[
            "fleet",
            "report",
            "-o",
            empty.to_str().unwrap(),
            "--srun",
            "/nonexistent/srun",
        ],
        1,
        "/nonexistent/srun not found: numalab fleet report runs on a Slurm cluster",
    );
    fails(
        &["fleet", "summarize", "/nonexistent/fleet"],
        "is not a directory (a fleet directory holds nodes/NAME/results.json",
    );
    fails(
        &[
            "fleet",
            "compare",
            d.join("mine.txt").to_str().unwrap(),
            dir,
        ],
        "does not read: ",
    );
    std::fs::write(d.join("other.json"), "{\"schema\": \"x\"}").unwrap();
    fails(
        &[
            "fleet",
            "compare",
            d.join("other.json").to_str().unwrap(),
            dir,
        ],
        "is not a fleet (no \"schema\": \"numalab-fleet\")",
    );
    fails(
        &[
            "fleet",
            "check",
            dir,
            "--baseline",
            d.join("other.json").to_str().unwrap(),
        ],
        "a baseline is a node's results.json or a fleet.json",
    );
}

/// Like [`FAKE_SRUN`], the tasks side by side, each in its own process
/// group, and SIGTERM handed on to them as srun hands it to its tasks.
const FAKE_SRUN_FORWARDING: &str = r#"#!/bin/sh
while [ $# -gt 0 ] && [ "$1" != sh ]; do shift; done
shift 2
script=$1; shift
pids=""
for n in $FAKE_SRUN_NODES; do
    SLURMD_NODENAME=$n setsid sh -c "$script" "$@" &
    pids="$pids $!"
done
trap 'for p in $pids; do kill -TERM -$p; done' TERM
wait
wait
exit 0
"#;

#[test]
fn a_stop_signal_stops_every_node_and_the_fleet_keeps_what_arrived() {
    let _turn = turn();
    let d = scratch("fleet-interrupt");
    let srun = d.join("srun");
    std::fs::write(&srun, FAKE_SRUN_FORWARDING).unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&srun)
        .status()
        .unwrap();
    let out = d.join("fleet");
    // The whole report, its parts planned to fill a minute.
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args([
            "fleet",
            "report",
            "-o",
            out.to_str().unwrap(),
            "--size",
            "64M",
            "--node-budget",
            "60",
            "--srun",
            srun.to_str().unwrap(),
            "--nodelist",
            "i1,i2",
        ])
        .env("FAKE_SRUN_NODES", "i1 i2")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once both reports are measuring (their logs name a part), SIGTERM
    // (what Ctrl-C does too: SIGINT may be ignored here, as in a test run
    // started in the background, and numalab leaves an ignored signal so).
    let started = std::time::Instant::now();
    let measuring = |n: &str| {
        std::fs::read_to_string(out.join("logs").join(format!("{n}.log")))
            .is_ok_and(|l| l.contains("report: [2/"))
    };
    while !(measuring("i1") && measuring("i2")) {
        assert!(
            started.elapsed().as_secs() < 240,
            "the reports never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    std::thread::sleep(std::time::Duration::from_secs(2));
    let signalled = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let r = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(143), "{err}");
    // The reports' budget is a minute; stopped, they end with their part.
    assert!(
        signalled.elapsed().as_secs() < 40,
        "stopped, not run to its budget: {:?}",
        signalled.elapsed()
    );
    assert!(
        err.contains("fleet: stopping every node's report (each keeps what it measured)"),
        "{err}"
    );
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("fleet.json")).unwrap()).unwrap();
    assert_eq!(v["nodes_total"], 2);
    for n in ["i1", "i2"] {
        let node = node(&v, n);
        // Each report kept what it measured: results.json, marked incomplete.
        assert_eq!(node["status"], "reported", "{node}");
        assert_eq!(node["complete"], false, "{node}");
        let status =
            std::fs::read_to_string(out.join("logs").join(format!("{n}.exit_status"))).unwrap();
        assert_eq!(status.trim(), "143", "the report ended by SIGTERM");
    }
}
