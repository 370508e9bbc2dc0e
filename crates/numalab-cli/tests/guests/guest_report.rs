//! `numalab report` measured inside the multi-node QEMU guests: the Quartet
//! (4 nodes in a ring, 2 CPUs each) and the ring with a CPU-less node 4.
//! The report directory comes back over the serial console (tar, gzip,
//! base64); the tests check its placement proofs against the machine, its
//! schema, and render report.html in headless Chromium on the host.
//! Timings inside the guest mean nothing and are never asserted. The
//! report's steps run last in the experiments' guests (one boot each).

use crate::common;

use common::report::{
    assert_emulated, assert_matrix_placed, assert_valid, out_dir, page_nodes, render_and_check,
    results, statuses, REPORT_IDS,
};
use common::Guest;
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The steps this file adds to the ring guest and the Quartet guest of the
/// longest measurements (guest_experiments.rs), last: the report (quick,
/// with 16 MiB buffers, smaller than a real machine needs: TCG faults pages
/// slowly, 196 s for the Quartet's at 32 MiB; and a budget that
/// cuts the parts to what the emulated CPUs can pay for), then the folder
/// packed.
///
/// The Quartet's budget keeps every hop class of the sweep and the scaling's
/// first thread counts (60 s cuts them: 2 of 114 symmetry classes); the
/// ring's tests ask for less.
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "report_quick",
        "numalab report --quick --size 16M --budget 120 -o /tmp/rep",
    ),
    ("report_pack", "cd /tmp && tar czf - rep | base64"),
];
pub const RING_STEPS: &[(&str, &str)] = &[
    (
        "report_quick",
        "numalab report --quick --size 16M --budget 60 -o /tmp/rep",
    ),
    ("report_pack", "cd /tmp && tar czf - rep | base64"),
];

/// The page's ids under TCG: the emulation box, and the findings list only
/// where some finding does not rest on timings (the Quartet has none); no
/// key-figures table (timings of the emulator, withheld).
fn emulated_ids() -> Vec<&'static str> {
    REPORT_IDS
        .iter()
        .copied()
        .filter(|i| *i != "summary-findings" && *i != "tab-key-figures")
        .chain(["summary-emulated"])
        .collect()
}

/// The report the guest ran, unpacked on the host.
fn run(g: &'static Guest, machine: &str) -> (&'static Guest, PathBuf) {
    let dir = out_dir().join(format!("guest-{machine}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pack = g.step("report_pack");
    assert_eq!(pack.rc, 0, "pack: {}", pack.err);
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("base64 -d | tar xzf - -C '{}'", dir.display()))
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(pack.out.as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "unpacking the guest's report"
    );
    (g, dir.join("rep"))
}

/// The report ran to the end and every part is done: the whole report.
fn complete(g: &Guest, dir: &Path, what: &str) -> Value {
    let s = g.step("report_quick");
    assert_eq!(
        s.rc, 0,
        "{what}: report exit code\nstdout:\n{}\nstderr:\n{}",
        s.out, s.err
    );
    assert!(s.out.starts_with("numalab report: complete"), "{}", s.out);
    let doc = results(dir);
    assert_valid(&doc, what);
    for (part, status) in statuses(&doc) {
        // The guest's report is --quick: full-only parts are not in it.
        let full_only = part == "blas" && doc["mode"] != "full";
        assert_eq!(
            status,
            if full_only { "not-applicable" } else { "done" },
            "{what}: {part}: {}",
            doc["parts"][&part]["reason"]
        );
    }
    assert_eq!(doc["complete"], true);
    assert_eq!(
        doc["verification"]["verified"], true,
        "{}",
        doc["verification"]
    );
    doc
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

#[test]
fn quartet_report_measures_every_node_pair_where_it_says() {
    let (g, dir) = &run(crate::guest_experiments::quartet_measures(), "quartet");
    let doc = complete(g, dir, "quartet");
    let p = &doc["parts"];
    assert_eq!(doc["machine"]["nodes"].as_array().unwrap().len(), 4);
    let nodes = [0, 1, 2, 3];
    assert_matrix_placed(&doc, "latency-matrix", "latency", &nodes, &nodes);
    assert_matrix_placed(&doc, "bandwidth-matrix", "bandwidth", &nodes, &nodes);
    // Loaded latency from CPU 0: local is node 0, the farthest node 3 (22).
    let local = &p["loaded-latency-local"]["result"];
    let far = &p["loaded-latency-far"]["result"];
    assert_eq!(local["chase"]["cpu"], 0);
    assert_eq!(page_nodes(&local["chase"]["pages_by_node"]), vec![0]);
    assert_eq!(page_nodes(&far["chase"]["pages_by_node"]), vec![3]);
    assert_eq!(u32s(&far["injectors"]["cpus"]), vec![1, 2, 3, 4, 5, 6, 7]);
    for w in far["verification"]["workers"].as_array().unwrap() {
        for b in w["buffers"].as_array().unwrap() {
            assert_eq!(page_nodes(&b["pages_by_node"]), vec![3], "injector {w}");
        }
    }
    // Core-to-core over every CPU, grouped by node; or, where the budget
    // cut it (the emulated CPUs are slow), over fewer CPUs that the part
    // names, each on a node of its own while there are nodes left.
    let c2c = &p["c2c"]["result"];
    let cpus = u32s(&c2c["cpus"]);
    let k = cpus.len();
    assert!(k >= 2, "c2c CPUs {cpus:?}");
    let nodes: Vec<u32> = cpus.iter().map(|c| c / 2).collect();
    assert_eq!(u32s(&c2c["nodes"]), nodes);
    assert_eq!(c2c["pair_count"], k * (k - 1) / 2);
    if k < 8 {
        let reason = p["c2c"]["reason"].as_str().unwrap();
        let named: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
        assert!(
            reason.starts_with(&format!(
                "{k} of 8 CPUs (every pair of all would not fit the budget"
            )) && reason.ends_with(&format!(": {}", named.join(","))),
            "{reason}"
        );
        let mut distinct = nodes.clone();
        distinct.dedup();
        assert_eq!(distinct.len(), k.min(4), "c2c CPUs {cpus:?}");
    } else {
        assert_eq!(cpus, (0..8).collect::<Vec<_>>());
    }
    // Packed fills node 0 first, spread takes one CPU per node.
    // Whichever thread counts the budget kept, n packed threads take the
    // first n CPUs (node 0's two, then node 1's...).
    let sc = &p["scaling"]["result"];
    let packed = sc["packed"].as_array().unwrap();
    assert!(packed.len() >= 2, "{packed:?}");
    for point in packed {
        let cpus = u32s(&point["cpus"]);
        assert_eq!(cpus, (0..cpus.len() as u32).collect::<Vec<_>>());
    }
    // Whichever thread counts the budget kept: up to four threads spread
    // over as many nodes, five and more on every node.
    let spread = sc["spread"].as_array().unwrap();
    assert!(spread.len() >= 2, "{spread:?}");
    for point in spread {
        let cpus = u32s(&point["cpus"]);
        let mut nodes: Vec<u32> = cpus.iter().map(|c| c / 2).collect();
        nodes.sort_unstable();
        nodes.dedup();
        assert_eq!(nodes.len(), cpus.len().min(4), "spread CPUs {cpus:?}");
    }
    // The sweep: every hop class of one thread, every buffer on its node.
    let sw = &p["sweep"]["result"]["sweep"];
    assert_eq!(sw["node_automorphisms"], 8);
    let one = sw["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["threads"] == 1)
        .unwrap();
    let classes: std::collections::BTreeSet<&str> = one["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["hop_class"].as_str().unwrap())
        .collect();
    for c in ["r0", "r1", "r2", "w0", "w1", "w2"] {
        assert!(classes.contains(c), "hop class {c} missing: {classes:?}");
    }
    for b in sw["buffers"].as_array().unwrap() {
        let node = b["node"].as_u64().unwrap() as u32;
        assert_eq!(page_nodes(&b["at_end"]["pages_by_node"]), vec![node]);
    }
    // The study's scenarios by role: A = 0, B = 1 (linked), C = 3 (one
    // hop from B, two from A); crossfire first, its cases named as the
    // study names them, every buffer on its node.
    let sc = &p["sweep-scenarios"]["result"];
    let roles = &sc["measured"]["roles"];
    assert_eq!(
        (&roles["a"], &roles["b"], &roles["c"]),
        (&0.into(), &1.into(), &3.into())
    );
    assert_eq!(sc["priority"][0], "crossfire", "{sc}");
    let runs = sc["measured"]["runs"].as_array().unwrap();
    let cross = runs
        .iter()
        .find(|r| r["scenario"] == "crossfire")
        .unwrap_or_else(|| panic!("crossfire did not run: {sc}"));
    let case_roles: Vec<Vec<&str>> = cross["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            c["roles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(
        case_roles,
        [
            ["A.0.w.A", "B.0.w.B"],
            ["A.0.w.B", "B.0.w.A"],
            ["A.0.w.B", "B.0.w.C"]
        ]
    );
    assert_eq!(
        cross["cases"][2]["labels"],
        serde_json::json!(["0.0.w.1", "1.0.w.3"])
    );
    let rounds = sc["measured"]["rounds_run"].as_u64().unwrap() as usize;
    assert!(rounds >= 4, "{rounds}");
    for r in runs {
        for c in r["cases"].as_array().unwrap() {
            assert_eq!(c["verified"], true, "{c}");
            assert_eq!(c["total_s"].as_array().unwrap().len(), rounds, "{c}");
            assert!(c["normalized"].as_f64().unwrap() > 0.0, "{c}");
        }
    }
    for b in sc["measured"]["buffers"].as_array().unwrap() {
        let node = b["node"].as_u64().unwrap() as u32;
        assert_eq!(page_nodes(&b["at_end"]["pages_by_node"]), vec![node]);
    }
    // Findings (b) by the rank test, idle at least.
    let f = sc["measured"]["findings"].as_array().unwrap();
    assert!(
        f.iter().any(|x| x["question"] == "b"
            && x["condition"] == "idle"
            && x["comparison"].is_object()),
        "{f:?}"
    );
    // Policies: the quick table's workloads are cut last to first
    // (single-pinned, numa-aware, serial-init) when the budget is short, and
    // the part names the cut; every workload kept has every policy column.
    // Main-thread first touch puts every page on node 0, interleave on all
    // four nodes, each thread of a NUMA-aware program on its own node.
    let pol = &p["policies"];
    let cells = pol["result"]["cells"].as_array().unwrap();
    let ran = crate::common::report::policies_workloads_kept(pol);
    let cell = |w: &str, pol: &str| {
        cells
            .iter()
            .find(|c| c["workload"] == w && c["policy"] == pol)
            .unwrap_or_else(|| panic!("{w}/{pol}"))
    };
    let expect: [(&str, &str, &[u32]); 4] = [
        ("single-pinned", "interleave", &[0, 1, 2, 3]),
        ("numa-aware", "local", &[0, 1, 2, 3]),
        ("serial-init", "local", &[0]),
        ("serial-init", "interleave", &[0, 1, 2, 3]),
    ];
    for (w, policy, nodes) in expect {
        if ran.contains(&w) {
            assert_eq!(
                page_nodes(&cell(w, policy)["pages_by_node"]),
                nodes,
                "{w}/{policy}"
            );
        }
    }
    // The summary names the nodes and answers the multi-node questions.
    let s = &doc["summary"];
    assert_eq!(s["node_count"], 4);
    assert!(s["headline"]
        .as_str()
        .unwrap()
        .contains("has 4 NUMA nodes,"));
    // Measured under TCG: the timing findings are claims, withheld.
    let findings = assert_emulated(&doc);
    let topics: Vec<&str> = findings
        .iter()
        .map(|f| f["topic"].as_str().unwrap())
        .collect();
    for t in [
        "latency",
        "bandwidth",
        "scaling",
        "writers",
        "crossfire",
        "loaded-latency",
        "c2c",
    ] {
        assert!(topics.contains(&t), "no {t} sentence: {topics:?}");
    }
    let lat = findings.iter().find(|f| f["topic"] == "latency").unwrap()["text"]
        .as_str()
        .unwrap();
    assert!(lat.contains("NUMA ratios"), "{lat}");
    let k = &s["key_figures"];
    assert!(k["numa_ratio_max"].as_f64().unwrap() > 0.0);
    assert!(k["c2c_across_nodes_ns"].as_f64().unwrap() > 0.0);
    // Two threads (a node's CPUs) where the budget kept that count; else
    // the first count of two or more it kept (under a loaded host the
    // scaling part kept 1, 3 and 8 once, and compared 3).
    let counts: Vec<u64> = doc["parts"]["scaling"]["result"]["packed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["threads"].as_u64().unwrap())
        .filter(|&n| n >= 2)
        .collect();
    let want = if counts.contains(&2) { 2 } else { counts[0] };
    assert_eq!(k["compared_threads"], want, "packed counts {counts:?}");
    // The CSVs hold every cell.
    let csv = std::fs::read_to_string(dir.join("latency-matrix.csv")).unwrap();
    assert_eq!(csv.lines().count(), 17);

    // The page, in a real browser.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // The farthest memory's chart names the node its pages are on (3), not
    // the chase CPU's node (0).
    assert!(
        html.contains("Loaded latency, farthest memory (node 3) from CPU 0"),
        "farthest-node chart title"
    );
    let r = render_and_check(dir, "report-guest-quartet", &emulated_ids(), "4 NUMA nodes");
    assert!(
        r.text_of("summary-emulated")
            .is_some_and(|t| t.contains("Emulated CPU.")),
        "no emulation banner in the page"
    );
    // Only the --full-only BLAS part stays out of a default report.
    assert!(
        !r.element_ids
            .iter()
            .any(|i| i.starts_with("missing-") && i != "missing-blas"),
        "a part is missing: {:?}",
        r.element_ids
    );
    // The ring's four links (distance 16); 0-3 and 1-2 are two hops, no link.
    let graph = r.text_of("fig-node-graph").unwrap_or_default();
    for link in [
        "node 0 – node 1: 16",
        "node 0 – node 2: 16",
        "node 1 – node 3: 16",
        "node 2 – node 3: 16",
    ] {
        assert!(graph.contains(link), "node graph lacks '{link}': {graph}");
    }
    for not in ["node 0 – node 3", "node 1 – node 2"] {
        assert!(!graph.contains(not), "node graph has '{not}': {graph}");
    }
}

#[test]
fn ring_report_includes_the_cpuless_node() {
    let (g, dir) = &run(crate::guest_experiments::ring(), "ring4-cpuless");
    let doc = complete(g, dir, "ring4-cpuless");
    let p = &doc["parts"];
    assert_matrix_placed(
        &doc,
        "latency-matrix",
        "latency",
        &[0, 1, 2, 3],
        &[0, 1, 2, 3, 4],
    );
    assert_matrix_placed(
        &doc,
        "bandwidth-matrix",
        "bandwidth",
        &[0, 1, 2, 3],
        &[0, 1, 2, 3, 4],
    );
    // The farthest node from 0 is 2 (22), not the CPU-less 4 (20).
    let far = &p["loaded-latency-far"]["result"];
    assert_eq!(page_nodes(&far["chase"]["pages_by_node"]), vec![2]);
    assert_eq!(
        u32s(&p["sweep"]["result"]["sweep"]["mem_nodes"]),
        vec![0, 1, 2, 3, 4]
    );
    let headline = doc["summary"]["headline"].as_str().unwrap();
    assert!(
        headline.contains("5 NUMA nodes (4 with CPUs, 1 CPU-less)"),
        "{headline}"
    );
    let findings = assert_emulated(&doc);
    // Each CPU-less node named once in the bandwidth sentence.
    let bw = findings.iter().find(|f| f["topic"] == "bandwidth").unwrap()["text"]
        .as_str()
        .unwrap();
    assert_eq!(bw.matches("CPU-less node 4").count(), 1, "{bw}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("Loaded latency, farthest memory (node 2) from CPU 0"));
    let csv = std::fs::read_to_string(dir.join("latency-matrix.csv")).unwrap();
    let cpuless_rows = csv.lines().filter(|l| l.contains(",4,yes,")).count();
    assert_eq!(cpuless_rows, 4, "{csv}");
    let r = render_and_check(
        dir,
        "report-guest-ring4-cpuless",
        &[&emulated_ids()[..], &["tab-hmat"]].concat(),
        "5 NUMA nodes (4 with CPUs, 1 CPU-less)",
    );
    let heat = r.text_of("fig-latency-heatmap").unwrap_or_default();
    assert!(heat.contains("node 4 (CPU-less)"), "{heat}");
}
