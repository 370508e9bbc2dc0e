//! `numalab report` on this machine: a real quick report (schema, parts,
//! placement proof, CSVs, the page in headless Chromium), Ctrl-C and
//! `--resume`, `--parts`, reports of topology files, `compare` on two
//! reports, and one-line errors. Timings are never asserted (the machines
//! are shared); budget compliance is measured by bench/report.sh.

use crate::common;

use common::report::{
    assert_matrix_placed, assert_valid, out_dir, page_nodes, render_and_check, results,
    schema_errors, statuses, REPORT_IDS,
};
use common::{fails, fixture, json, numalab, stdout, turn, Ran};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

// Measuring and rendering (Chromium is CPU-heavy) take turns
// (common::turn): two reports at once on a 2-core machine would each
// measure the other. Take the turn after `quick_report()`, which takes it
// itself.

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let d = out_dir().join(test);
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// This machine's model, as `numalab topology --json` gives it.
fn machine() -> Value {
    json(&["topology", "--json"])
}

/// One quick report of this machine, shared by the tests that read it.
fn quick_report() -> &'static (PathBuf, Ran) {
    static R: OnceLock<(PathBuf, Ran)> = OnceLock::new();
    R.get_or_init(|| {
        let _turn = turn();
        let d = scratch("quick");
        let r = numalab(&["report", "--quick", "-o", d.to_str().unwrap()]);
        (d, r)
    })
}

/// The quick report's directory, once it completed (exit code 0).
fn quick_report_done() -> &'static Path {
    let (dir, r) = quick_report();
    assert_eq!(r.rc, 0, "stdout:\n{}\nstderr:\n{}", r.out, r.err);
    dir
}

#[test]
fn quick_report_of_this_machine_is_complete_and_verified() {
    let dir = quick_report_done();
    let out = &quick_report().1.out;
    assert!(out.starts_with("numalab report: complete in "), "{out}");
    let doc = results(dir);
    assert_valid(&doc, "quick report");
    let m = machine();
    let nodes = m["nodes"].as_array().unwrap().len();
    assert_eq!(doc["summary"]["node_count"], nodes);
    let one = if nodes == 1 {
        "1 NUMA node,".to_string()
    } else {
        format!("{nodes} NUMA nodes")
    };
    let headline = doc["summary"]["headline"].as_str().unwrap();
    assert!(headline.contains(&one), "{headline}");
    assert!(out.contains(headline), "stdout names the machine: {out}");
    assert_eq!(doc["complete"], true);
    assert_eq!(
        doc["verification"]["verified"], true,
        "{}",
        doc["verification"]
    );
    assert_eq!(doc["mode"], "quick");
    // A virtual machine says so among the warnings, and names its
    // hypervisor; bare metal says nothing of the kind.
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let in_vm = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "hypervisor"));
    let caveats: Vec<&str> = doc["summary"]["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .filter(|w| w.starts_with("Measured in a virtual machine ("))
        .collect();
    let hv = &doc["environment"]["hypervisor"];
    if in_vm && doc["environment"]["emulated_cpu"].is_null() {
        let name = hv.as_str().expect("a VM without environment.hypervisor");
        assert_eq!(caveats.len(), 1, "{caveats:?}");
        assert!(caveats[0].contains(&format!("({name})")), "{caveats:?}");
    } else {
        assert!(hv.is_null() && caveats.is_empty(), "{hv} {caveats:?}");
    }
    // Every part done, but those that compare memory nodes on a one-node
    // machine and the full-only part.
    let node_parts = ["loaded-latency-far", "policies", "pdm"];
    for (part, status) in statuses(&doc) {
        let want = if (node_parts.contains(&part.as_str()) && nodes == 1) || part == "blas" {
            "not-applicable"
        } else {
            "done"
        };
        assert_eq!(status, want, "part {part}: {}", doc["parts"][&part]);
    }
    assert_eq!(doc["parts"]["blas"]["reason"], "runs with --full");
    if nodes == 1 {
        let why = doc["parts"]["loaded-latency-far"]["reason"]
            .as_str()
            .unwrap();
        assert!(why.contains("one memory node"), "{why}");
    }
    // The matrices: every CPU node x every memory node, pages where asked.
    let cpu_nodes: Vec<u32> = m["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["cpuless"] == false)
        .map(|n| n["os_index"].as_u64().unwrap() as u32)
        .collect();
    let mem_nodes: Vec<u32> = m["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["os_index"].as_u64().unwrap() as u32)
        .collect();
    assert_matrix_placed(&doc, "latency-matrix", "latency", &cpu_nodes, &mem_nodes);
    assert_matrix_placed(
        &doc,
        "bandwidth-matrix",
        "bandwidth",
        &cpu_nodes,
        &mem_nodes,
    );
    let lat = doc["parts"]["latency-matrix"]["result"]["latency"][0][0]["value"]["median"]
        .as_f64()
        .unwrap();
    assert!((20.0..2000.0).contains(&lat), "memory latency {lat} ns");
    // c2c over every allowed CPU; the sweep's buffers stayed on their nodes.
    let p = &doc["parts"];
    assert_eq!(p["c2c"]["result"]["cpus"], m["allowed_cpus"]);
    for b in p["sweep"]["result"]["sweep"]["buffers"].as_array().unwrap() {
        let node = b["node"].as_u64().unwrap() as u32;
        assert_eq!(page_nodes(&b["at_start"]["pages_by_node"]), vec![node]);
        assert_eq!(page_nodes(&b["at_end"]["pages_by_node"]), vec![node]);
    }
    let runs = p["sweep"]["result"]["sweep"]["runs"].as_array().unwrap();
    let threads: Vec<u64> = runs
        .iter()
        .map(|r| r["threads"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, vec![1, 2]);
    // The study's scenarios: at least the first this machine can have,
    // every case normalised to a baseline.
    let sc = &p["sweep-scenarios"]["result"];
    let first = &sc["priority"][0];
    let ran: Vec<&Value> = sc["measured"]["runs"].as_array().unwrap().iter().collect();
    assert!(ran.iter().any(|r| r["scenario"] == *first), "{sc}");
    for c in ran.iter().flat_map(|r| r["cases"].as_array().unwrap()) {
        let x = c["normalized"].as_f64().unwrap();
        assert!(x.is_finite() && x > 0.0, "{c}");
        assert!(c["total_s"].as_array().unwrap().len() >= 4, "{c}");
    }
    // Scaling 1..N threads packed and spread, the sizes from L1 to memory.
    let n = m["allowed_cpus"].as_array().unwrap().len();
    let packed = p["scaling"]["result"]["packed"].as_array().unwrap();
    assert_eq!(packed.len(), n.min(8));
    let pts = p["sizes"]["result"]["points"].as_array().unwrap();
    // Quick: seven sizes, unless this machine's measured costs left the
    // budget short; then fewer, still reaching memory, and the part says so
    // (a slow shared machine kept 6 of 7 once).
    assert!(
        (4..=7).contains(&pts.len()),
        "quick: four to seven sizes, got {}",
        pts.len()
    );
    if pts.len() < 7 {
        let reason = p["sizes"]["reason"].as_str().unwrap_or_default();
        let want = format!("{} of 7 sizes", pts.len());
        assert!(
            reason.contains(&want),
            "a cut sweep names its cut: {reason:?}"
        );
    }
    let bytes: Vec<u64> = pts.iter().map(|x| x["bytes"].as_u64().unwrap()).collect();
    assert!(bytes.windows(2).all(|w| w[0] < w[1]), "{bytes:?}");
    assert_eq!(pts.last().unwrap()["fits_in"], "memory");
    // Loaded latency: chase pages on the home node, injectors on every other CPU.
    let ll = &p["loaded-latency-local"]["result"];
    assert_eq!(
        page_nodes(&ll["chase"]["pages_by_node"]),
        vec![cpu_nodes[0]]
    );
    assert_eq!(ll["injectors"]["cpus"].as_array().unwrap().len(), n - 1);
    // The policy comparison ran each quick workload it kept under every
    // policy: 4 (local, interleave, interleave over the accessing nodes,
    // one node) for each; the budget cuts workloads last to first and says
    // so (a clean run here, the host loaded by other work, kept 1 of 3).
    // With one memory node every policy places the same pages: the part
    // (and pdm's, whose placements are all on that node) is left out and
    // says why.
    if mem_nodes.len() == 1 {
        for part in ["policies", "pdm"] {
            assert_eq!(p[part]["status"], "not-applicable", "{}", p[part]);
            let why = p[part]["reason"].as_str().unwrap_or_default();
            assert!(
                why.starts_with(&format!("one memory node (node {})", mem_nodes[0])),
                "{part}: {why}"
            );
        }
    } else {
        let cells = p["policies"]["result"]["cells"].as_array().unwrap();
        let ran = common::report::policies_workloads_kept(&p["policies"]);
        assert_eq!(cells.len(), 4 * ran.len(), "{ran:?}");
        assert!(cells.iter().all(|c| c["verified"] == true));
    }
    // The quick budget of this machine, and the time taken, are recorded
    // (bench/report.sh measures how well the budget is kept).
    let quick = numalab_report::plan::default_budget(
        &numalab::Machine::live().unwrap(),
        numalab_report::results::Mode::Quick,
    );
    // The default, unless the smallest forms of the parts need longer with
    // the costs probed at the start (a loaded host once needed 31 s of the
    // 27): then it is raised to that, and the run's warning says so.
    let budget = doc["budget_s"].as_f64().unwrap();
    if budget != quick {
        let warned = doc["runs"][0]["warnings"].to_string();
        assert!(
            budget > quick
                && warned.contains(&format!(
                    "the default budget ({quick:.0} s) was raised to {budget:.0} s"
                )),
            "budget {budget} s, the quick default {quick} s, warnings {warned}"
        );
    }
    assert_eq!(doc["runs"][0]["budget_s"], doc["budget_s"]);
    assert!(doc["elapsed_s"].as_f64().unwrap() > 0.0);
    assert_eq!(doc["runs"].as_array().unwrap().len(), 1);
    assert_eq!(doc["runs"][0]["outcome"], "complete");
    // One CSV per table, numbers in them.
    for f in [
        "machine-nodes.csv",
        "distances.csv",
        "parts.csv",
        "latency-matrix.csv",
        "bandwidth-matrix.csv",
        "sizes.csv",
        "scaling.csv",
        "sweep.csv",
        "sweep-findings.csv",
        "scenario-plan.csv",
        "scenarios.csv",
        "scenario-findings.csv",
        "loaded-latency.csv",
        "c2c.csv",
        "c2c-nodes.csv",
        "key-figures.csv",
    ] {
        assert!(dir.join(f).is_file(), "{f} missing");
    }
    assert_eq!(
        dir.join("policies.csv").is_file(),
        mem_nodes.len() > 1,
        "policies.csv with {} memory node(s)",
        mem_nodes.len()
    );
    let csv = std::fs::read_to_string(dir.join("latency-matrix.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(lines[0].starts_with("cpu_node,mem_node,mem_node_cpuless,median_ns,"));
    assert_eq!(lines.len(), 1 + cpu_nodes.len() * mem_nodes.len());
    let median: f64 = lines[1].split(',').nth(3).unwrap().parse().unwrap();
    assert!((median - lat).abs() < 0.01, "{median} vs {lat}");
    let parts_csv = std::fs::read_to_string(dir.join("parts.csv")).unwrap();
    // A header and one row per part.
    let parts = doc["parts"].as_object().unwrap().len();
    assert_eq!(parts_csv.lines().count(), 1 + parts, "{parts_csv}");
}

/// The study's scenarios alone, on this machine: every scenario it can
/// have runs with the study's roles and a value per round; the others are
/// listed with why not.
/// The scenarios part of the shared quick report (a report of this part
/// alone measured the same for another 50 s).
/// The report calibrates the contention model from its own parts and
/// predicts the sweep's classes it measured (results.json's `model`, the
/// text's and the page's section, a finding); `numalab model --from` on
/// the same file fits the same parameters and predicts the report's
/// scaling. What is asserted is the mechanics, never how close the
/// predictions come (bench/model-scaling.sh measures that).
#[test]
fn the_report_calibrates_the_model_and_predicts_what_it_measured() {
    let dir = quick_report_done();
    let doc = results(dir);
    let model = &doc["model"];
    assert!(model["not_available"].is_null(), "{model}");
    let fitted: Vec<&str> = model["calibration"]["fitted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    for name in [
        "read.controller_gbps",
        "write.controller_gbps",
        "controller_gbps",
        "in_flight",
    ] {
        assert!(fitted.contains(&name), "{name} not in {fitted:?}");
    }
    let rows = model["sweep"]["rows"].as_array().unwrap();
    assert!(!rows.is_empty(), "{model}");
    for r in rows {
        assert!(r["predicted"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["measured"].as_f64().unwrap() > 0.0, "{r}");
        let labels = r["labels"].as_str().unwrap();
        assert!(
            !labels.is_empty() && labels.split(' ').all(|l| l.split('.').count() == 4),
            "{r}"
        );
        assert!(
            r["bottleneck"]
                .as_str()
                .unwrap()
                .contains("memory controller"),
            "{r}"
        );
    }
    // Every idle class of one thread count is normalised to its fastest.
    let ones: Vec<f64> = rows
        .iter()
        .filter(|r| r["scenario"] == "sweep, 1 thread(s)" && r["condition"] == "idle")
        .map(|r| r["predicted"].as_f64().unwrap())
        .collect();
    assert!(ones.iter().any(|&p| (p - 1.0).abs() < 1e-9), "{ones:?}");
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(
        text.contains("\n== Predicted vs measured: the contention model (model) ==\n"),
        "{text}"
    );
    let page = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(page.contains("id=\"sec-model\"") && page.contains("id=\"tab-model-check\""));
    assert!(dir.join("model-check.csv").is_file());
    if let Some(rho) = model["sweep"]["rank_correlation"].as_f64() {
        let finding = doc["summary"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["topic"] == "model")
            .unwrap_or_else(|| panic!("no model finding: {}", doc["summary"]));
        let t = finding["text"].as_str().unwrap();
        assert!(
            t.starts_with(&format!(
                "The contention model, calibrated from this report, ranks the {} measured sweep classes with a rank correlation of {rho:.2}",
                rows.len()
            )),
            "{t}"
        );
    }
    // The command fits the same parameters from the same file.
    let file = dir.join("results.json");
    let v = json(&[
        "model",
        "--from",
        file.to_str().unwrap(),
        "--calibration",
        "--json",
    ]);
    // The same parameters; the command's source names the file it read.
    let mut from_file = v["params"].clone();
    let mut in_report = model["calibration"]["params"].clone();
    for p in [&mut from_file, &mut in_report] {
        p.as_object_mut().unwrap().remove("source");
    }
    assert_eq!(from_file, in_report);
    let scaling = v["calibration"]["scaling"].as_array().unwrap();
    assert!(!scaling.is_empty(), "{v}");
    assert_eq!(scaling[0]["threads"], 1);
    for s in scaling {
        assert!(s["predicted_gbps"].as_f64().unwrap() > 0.0, "{s}");
    }
}

#[test]
fn the_study_scenarios_run_by_role_with_real_values() {
    let dir = quick_report_done();
    let doc = results(dir);
    assert_valid(&doc, "scenarios report");
    let part = &doc["parts"]["sweep-scenarios"];
    assert_eq!(part["status"], "done", "{part}");
    assert_eq!(part["verified"], true, "{part}");
    let sc = &part["result"];
    let m = &sc["measured"];
    let runs = m["runs"].as_array().unwrap();
    let run = |name: &str| {
        runs.iter()
            .find(|r| r["scenario"] == name)
            .unwrap_or_else(|| panic!("no run of {name}: {sc}"))
    };
    let roles = |r: &Value| -> Vec<String> {
        r["cases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let v: Vec<&str> = c["roles"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap())
                    .collect();
                v.join(" + ")
            })
            .collect()
    };
    // Every case: a positive total per round, normalised; pages stayed.
    let rounds = m["rounds_run"].as_u64().unwrap() as usize;
    assert!(rounds >= 4, "{rounds} rounds");
    for c in runs.iter().flat_map(|r| r["cases"].as_array().unwrap()) {
        assert_eq!(c["verified"], true, "{c}");
        let n = c["normalized"].as_f64().unwrap();
        assert!(n.is_finite() && n > 0.0, "{c}");
        let totals = c["total_s"].as_array().unwrap();
        assert_eq!(totals.len(), rounds, "{c}");
        assert!(totals.iter().all(|t| t.as_f64().unwrap() > 0.0), "{c}");
    }
    for b in m["buffers"].as_array().unwrap() {
        let node = b["node"].as_u64().unwrap() as u32;
        assert_eq!(page_nodes(&b["at_end"]["pages_by_node"]), vec![node]);
    }
    let nodes = doc["machine"]["nodes"].as_array().unwrap().len();
    let cpus = doc["machine"]["allowed_cpus"].as_array().unwrap().len();
    if nodes == 1 && cpus >= 2 {
        // One node: the one-node pair, then the one thread. The budget,
        // sized from costs probed at the start, keeps both on an idle host
        // and may leave the second out on a loaded one (a clean run here
        // did): the part then names what it left out.
        assert_eq!(
            sc["priority"],
            serde_json::json!(["two-on-one-node", "one-thread-hops"])
        );
        let kept_one = match sc["left_out"].as_array().unwrap().as_slice() {
            [] => true,
            [only] if only == "one-thread-hops" => {
                let reason = part["reason"].as_str().unwrap_or_default();
                assert!(
                    reason.contains("1 of 2 scenarios") && reason.contains("the budget leaves out"),
                    "a cut names its cut: {part}"
                );
                false
            }
            other => panic!("left out {other:?}: {part}"),
        };
        let two = run("two-on-one-node");
        assert_eq!(roles(two), ["A.0.r.A + A.1.r.A", "A.0.w.A + A.1.w.A"]);
        if kept_one {
            let one = run("one-thread-hops");
            assert_eq!(roles(one), ["A.0.r.A", "A.0.w.A"]);
            // The baselines are measured cases: the local read.
            assert_eq!(one["cases"][0]["normalized"], 1.0);
        } else {
            assert!(runs.iter().all(|r| r["scenario"] != "one-thread-hops"));
        }
        // The two local readers (on A's two cores here) are their own
        // baseline.
        assert_eq!(two["cases"][0]["normalized"], 1.0);
        assert_eq!(
            two["cases"][1]["baseline"],
            two["cases"][0]["labels"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        );
        // The crossfire scenarios are listed, not applicable, with why.
        let na: Vec<&Value> = m["scenarios"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| !s["not_applicable"].is_null())
            .collect();
        assert_eq!(na.len(), 4, "{na:?}");
        for s in &na {
            let why = s["not_applicable"].as_str().unwrap();
            assert!(why.starts_with("needs "), "{s}");
        }
        // (c) cannot be told on one node: the summary names it in one line
        // with the other questions that need a second memory node (the
        // sweep's crossfire when the sweep ran), not a sentence each.
        let f = &m["findings"][0];
        assert_eq!(f["verdict"], "cannot_tell", "{f}");
        let said: Vec<&str> = doc["summary"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["text"].as_str().unwrap())
            .collect();
        assert!(
            said.iter()
                .all(|t| !t.starts_with("Classic scenario (c)") && !t.starts_with("Crossfire")),
            "{said:?}"
        );
        let line = if doc["parts"]["sweep"]["status"] == "done" {
            "Not answerable on one memory node: classic scenario (c), crossfire (they need a second memory node)."
        } else {
            "Not answerable on one memory node: classic scenario (c) (it needs a second memory node)."
        };
        assert_eq!(
            said.iter()
                .filter(|t| t.starts_with("Not answerable"))
                .collect::<Vec<_>>(),
            [&line],
            "{said:?}"
        );
        // The part's own section still answers (c) with why.
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        let section = html
            .split("<section id=\"sec-sweep-scenarios\">")
            .nth(1)
            .and_then(|x| x.split("</section>").next())
            .expect("the scenarios' section");
        assert!(
            section
                .contains("idle: cannot tell — this machine has no memory node away from node A"),
            "{section}"
        );
        let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
        assert_eq!(text.matches(line).count(), 1, "{text}");
    } else {
        // Several nodes: crossfire first.
        assert_eq!(sc["priority"][0], "crossfire", "{sc}");
        assert_eq!(roles(run("crossfire"))[1], "A.0.w.B + B.0.w.A");
    }
    // The tables: every scenario in the plan, a row per case.
    let plan = std::fs::read_to_string(dir.join("scenario-plan.csv")).unwrap();
    assert_eq!(plan.lines().count(), 1 + 6, "{plan}");
    let cases = std::fs::read_to_string(dir.join("scenarios.csv")).unwrap();
    let rows: usize = runs
        .iter()
        .map(|r| r["cases"].as_array().unwrap().len())
        .sum();
    assert!(cases.lines().count() > rows, "{cases}");
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(
        text.contains("scenarios of the classic two-thread study"),
        "{text}"
    );
    // Memory-controller and link traffic: counted per package, or one
    // line saying why not (no PMU on this project's hosts).
    if !common::memory_controller_pmus() {
        assert!(
            text.contains("memory-controller and link traffic: not measured: not available on this machine: no uncore_imc, amd_umc or amd_df PMU\n"),
            "{text}"
        );
        assert!(!text.contains("memory controllers, GB/s"), "{text}");
    }
}

#[test]
fn report_html_renders_in_chromium_with_every_chart_and_table() {
    let dir = quick_report_done();
    let _turn = turn();
    let doc = results(dir);
    let nodes = doc["machine"]["nodes"].as_array().unwrap().len();
    let nodes_text = if nodes == 1 {
        "1 NUMA node".to_string()
    } else {
        format!("{nodes} NUMA nodes")
    };
    // Every chart and table of a complete report, but what this machine
    // cannot have: a far node's curve, a distance heatmap without a table.
    let mut ids: Vec<&str> = REPORT_IDS.to_vec();
    if doc["parts"]["loaded-latency-far"]["status"] == "not-applicable" {
        ids.retain(|i| *i != "fig-loaded-latency-far");
        ids.push("missing-loaded-latency-far");
    }
    if doc["machine"]["distances"].is_null() {
        ids.retain(|i| *i != "fig-distance-heatmap");
    }
    if doc["parts"]["policies"]["status"] == "not-applicable" {
        ids.retain(|i| !i.ends_with("-policies"));
        ids.push("missing-policies");
    }
    let r = render_and_check(dir, "report-host", &ids, &nodes_text);
    // Charts carry their units; the page's title names the host.
    let lat = r.text_of("fig-latency-heatmap").unwrap_or_default();
    assert!(lat.contains("ns"), "{lat}");
    // The summary leads with the key figures: the local idle latency the
    // latency matrix measured, and the local read bandwidth with its
    // threads named.
    let keys = r.text_of("tab-key-figures").unwrap_or_default();
    let local = doc["summary"]["key_figures"]["local_latency_ns"]
        .as_f64()
        .unwrap();
    assert!(
        keys.contains("Idle latency, local memory")
            && keys.contains(&format!("{local:.0} ns"))
            && keys.contains("Read bandwidth, local memory (read kernel, "),
        "{keys}"
    );
    // Its 95% interval (the latency matrix's own, carried to the figure)
    // holds the value and is shown beside it.
    let ci: Vec<f64> = doc["summary"]["key_intervals"]["local_latency_ns"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_f64()).collect())
        .unwrap_or_default();
    assert!(
        ci.len() == 2 && ci[0] <= local && local <= ci[1] && ci[0] < ci[1],
        "{ci:?} around {local}"
    );
    let half = ((local - ci[0]).max(ci[1] - local) / local) * 100.0;
    // Past twice the value or below half of it (a host whose latency
    // drifts that much over the report), the interval's ends instead.
    let end = |x: f64| {
        if x < 10.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.0}")
        }
    };
    let shown = if ci[1] > 2.0 * local || ci[0] < 0.5 * local {
        format!("{}–{} ns", end(ci[0]), end(ci[1]))
    } else if half < 10.0 {
        format!("±{half:.1}%")
    } else {
        format!("±{half:.0}%")
    };
    assert!(keys.contains(&shown), "{shown} not in {keys}");
    let txt = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    let head: Vec<&str> = txt.lines().take(4).collect();
    assert_eq!(head[2], "key figures:", "{txt}");
    assert!(
        head[3].contains("Idle latency, local memory")
            && head[3].ends_with(&format!("(95% CI {shown})")),
        "{txt}"
    );
    // The host's speed was looked at before the first part and after the
    // last (and between parts at least 5 s apart), where three looks fit
    // in a quarter of the budget: every look measured latency, one
    // thread's read and two threads' (two CPUs here). Where they did not
    // (a 480 MiB last-level cache makes 1.9 GiB buffers and a look of
    // 8-14 s, past a quarter of the quick report's 27 s), the run said
    // why, and took at most its first look (host/report_looks.rs looks
    // with small buffers).
    let probes = doc["drift"]["probes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let unwatched = doc["drift"]["unwatched"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if unwatched.is_empty() {
        assert!(probes.len() >= 2, "{}", doc["drift"]);
        assert!(
            probes.last().unwrap()["after"].is_string(),
            "{}",
            doc["drift"]
        );
    } else {
        assert_eq!(unwatched.len(), 1, "{}", doc["drift"]);
        assert!(probes.len() <= 1, "{}", doc["drift"]);
        let why = unwatched[0]["why"].as_str().unwrap();
        let budget = doc["budget_s"].as_f64().unwrap();
        assert!(
            why.contains(&format!(
                "the 3 that estimate a drift more than a quarter of the {budget:.0} s budget (--budget "
            )),
            "{why}"
        );
    }
    if let Some(first) = probes.first() {
        assert!(first["after"].is_null(), "{}", doc["drift"]);
    }
    for p in &probes {
        for k in ["latency_ns", "read_gbps", "pair_read_gbps"] {
            assert!(p[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {p}");
        }
    }
    // Core-to-core latency is the median of the pairs' own medians, so it
    // carries an interval too (widened by the two-CPU looks).
    let c2c = doc["summary"]["key_figures"]["c2c_within_node_ns"]
        .as_f64()
        .unwrap();
    let c2c_ci = &doc["summary"]["key_intervals"]["c2c_within_node_ns"];
    assert!(
        c2c_ci[0].as_f64().is_some_and(|lo| lo <= c2c)
            && c2c_ci[1].as_f64().is_some_and(|hi| hi >= c2c),
        "{c2c_ci} around {c2c}"
    );
    for p in &probes {
        assert!(p["pair_c2c_ns"].as_f64().is_some_and(|v| v > 0.0), "{p}");
    }
    // What the intervals hold is said under the table, and by the drift's
    // own numbers where there were enough looks to estimate it, or why
    // the host was not watched.
    let note = r.text_of("key-intervals").unwrap_or_default();
    assert!(
        note.starts_with("95% intervals: each measurement's own"),
        "{note}"
    );
    if let Some(u) = unwatched.first() {
        let why = u["why"].as_str().unwrap();
        assert!(note.ends_with(&format!(": {why}.")), "{note}");
    }
    match doc["drift"]["latency"]["rel_half_width"].as_f64() {
        Some(h) => {
            // As key_table::interval_note says it: a drift of 100% or
            // more as a factor (a clean-clone run on a loaded host saw
            // latency drift ±117%, said "a factor of 2.2 either way").
            let pct = if h * 100.0 < 10.0 {
                format!("latency ±{:.1}%", h * 100.0)
            } else if h * 100.0 < 100.0 {
                format!("latency ±{:.0}%", h * 100.0)
            } else {
                format!("latency a factor of {:.1} either way", 1.0 + h)
            };
            assert!(note.contains(&pct), "{pct} not in {note}");
        }
        None if probes.is_empty() => {
            assert!(note.contains("without the host's drift: "), "{note}")
        }
        None => assert!(note.contains("too few (3 at least)"), "{note}"),
    }
    // One memory node: packed and spread place every count on the same
    // CPUs, drawn as one line each, not four lines of which two show.
    let scaling = r.text_of("fig-scaling").unwrap_or_default();
    if nodes == 1 {
        assert!(
            scaling.contains("packed = spread, per thread")
                && !scaling.contains("packed, per thread"),
            "{scaling}"
        );
    } else {
        assert!(scaling.contains("spread, per thread"), "{scaling}");
    }
    let sizes = r.text_of("fig-sizes-bandwidth").unwrap_or_default();
    assert!(sizes.contains("GB/s") && sizes.contains("KiB"), "{sizes}");
    // The size charts at their full width (760 px, ticks at their 12 px),
    // one a row: side by side they shrank to 548 px.
    let probe = r#"["fig-sizes-bandwidth", "fig-sizes-latency"].map(id => {
        const svg = document.getElementById(id);
        return { id, width: svg.getBoundingClientRect().width };
    })"#;
    let sized = common::browser::render(
        &dir.join("report.html"),
        &common::browser::RenderOptions {
            probe: Some(probe.to_string()),
            ..common::browser::RenderOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for c in sized.probe.as_array().expect("the probe's charts") {
        assert!(c["width"].as_f64().unwrap() >= 750.0, "{c}");
    }
    assert!(r.title.starts_with("numalab report: "), "{}", r.title);
    // Every CSV link in the page points at a file that exists.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    // Intervals that were measured are drawn: a bar chart's bars carry
    // whiskers.
    let mut charts = 0;
    for id in ["fig-sweep", "fig-scenarios", "fig-policies", "fig-blas"] {
        let Some(start) = html.find(&format!("id=\"{id}\"")) else {
            continue;
        };
        let chart = &html[start..];
        let chart = &chart[..chart.find("</svg>").unwrap_or(chart.len())];
        let bars = chart.matches("class=\"bar ").count();
        if bars > 0 {
            charts += 1;
            let whiskers = chart.matches("class=\"whisker\"").count();
            assert!(whiskers > 0, "{id}: {bars} bars, no whisker");
        }
    }
    assert!(charts > 0, "no bar chart in the report");
    for link in html.split("href=\"").skip(1) {
        let target = link.split('"').next().unwrap();
        if target.starts_with('#') {
            continue;
        }
        assert!(
            dir.join(target).is_file(),
            "report.html links to {target}, which is not in {}",
            dir.display()
        );
    }
    assert!(!html.contains("<script"), "no script in the report");
}

/// Waits until at least `n` parts of DIR/results.json are done; panics if
/// the report ends first.
fn wait_for_parts(dir: &Path, n: usize, child: &mut std::process::Child) {
    loop {
        if let Ok(text) = std::fs::read_to_string(dir.join("results.json")) {
            if let Ok(doc) = serde_json::from_str::<Value>(&text) {
                let done = statuses(&doc).iter().filter(|(_, s)| s == "done").count();
                if done >= n {
                    return;
                }
            }
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the report ended ({status}) before {n} parts were done");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn ctrl_c_keeps_what_was_measured_and_resume_measures_only_the_rest() {
    let _turn = turn();
    let dir = scratch("interrupted");
    let mut report = Command::new(env!("CARGO_BIN_EXE_numalab"));
    // Parts that end within a second (c2c, and pdm where there are two
    // memory nodes), then one that runs for seconds (sweep) for the signal
    // to land in. The whole quick
    // report took two minutes here, and the resume as long again.
    report
        .args([
            "report",
            "--quick",
            "--parts",
            "c2c,pdm,sweep",
            "--size",
            "64M",
            "--budget",
            "20",
            "-o",
            dir.to_str().unwrap(),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SIGINT at its default action, as at a terminal: the suite may run
    // with it ignored (a background shell's job), which numalab keeps.
    // SAFETY: signal is async-signal-safe, between fork and exec.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut report, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    // pdm is not applicable with one memory node (every placement on it):
    // then c2c alone ends before the signal.
    let quick_parts = if numalab::Machine::live().unwrap().memory_nodes().len() > 1 {
        2
    } else {
        1
    };
    let mut child = report.spawn().unwrap();
    wait_for_parts(&dir, quick_parts, &mut child);
    // SAFETY: signalling our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGINT);
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "stderr: {err}");
    assert!(
        err.contains("numalab: interrupted after") && err.contains("--resume"),
        "{err}"
    );
    let before = results(&dir);
    assert_valid(&before, "interrupted report");
    assert_eq!(before["complete"], false);
    assert_eq!(before["runs"][0]["outcome"], "interrupted");
    let st = statuses(&before);
    let done: Vec<String> = st
        .iter()
        .filter(|(_, s)| s == "done")
        .map(|(p, _)| p.clone())
        .collect();
    let interrupted: Vec<String> = st
        .iter()
        .filter(|(_, s)| s == "interrupted")
        .map(|(p, _)| p.clone())
        .collect();
    assert!(done.len() >= quick_parts, "{st:?}");
    assert!(!interrupted.is_empty(), "{st:?}");
    for p in &interrupted {
        let why = before["parts"][p]["reason"].as_str().unwrap();
        assert!(
            why.contains("interrupted") && why.contains("--resume"),
            "{p}: {why}"
        );
        assert!(before["parts"][p]["result"].is_null());
    }
    // The page says what is missing and why.
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    for p in &interrupted {
        assert!(html.contains(&format!("id=\"missing-{p}\"")), "{p}");
    }
    assert!(html.contains("id=\"summary-missing\""));
    // The summary names every missing part (parts missing for the same
    // reason share a line).
    let missing = before["summary"]["missing"].to_string();
    for p in &interrupted {
        assert!(missing.contains(p.as_str()), "{p} not in {missing}");
    }

    let r = numalab(&["report", "-o", dir.to_str().unwrap(), "--resume"]);
    assert_eq!(r.rc, 0, "stdout:\n{}\nstderr:\n{}", r.out, r.err);
    assert!(r.err.contains("report: resuming"), "{}", r.err);
    let after = results(&dir);
    assert_valid(&after, "resumed report");
    assert_eq!(after["complete"], true, "{:?}", statuses(&after));
    let runs = after["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1]["resumed"], true);
    // Finished parts are untouched; only the missing ones were measured.
    for p in &done {
        assert_eq!(
            after["parts"][p], before["parts"][p],
            "part {p} was measured again"
        );
        assert_eq!(after["parts"][p]["run"], 1);
    }
    let measured: Vec<String> = runs[1]["measured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    for p in &measured {
        assert!(!done.contains(p), "{p} measured twice");
        assert_eq!(after["parts"][p]["run"], 2);
    }
    for p in &interrupted {
        assert!(measured.contains(p), "{p} not measured by --resume");
    }
    // Resuming a complete report measures nothing.
    let out = stdout(&["report", "-o", dir.to_str().unwrap(), "--resume"]);
    assert!(out.contains("nothing to resume"), "{out}");
    assert_eq!(results(&dir)["runs"].as_array().unwrap().len(), 2);
}

#[test]
fn parts_selection_and_compare_of_two_reports() {
    let a = quick_report_done();
    let _turn = turn();
    let b = {
        let b = scratch("matrices");
        let r = numalab(&[
            "report",
            "--parts",
            "matrix",
            "--size",
            "64M",
            "--budget",
            "4",
            "-o",
            b.to_str().unwrap(),
        ]);
        assert_eq!(r.rc, 0, "stdout:\n{}\nstderr:\n{}", r.out, r.err);
        b
    };
    let doc = results(&b);
    assert_valid(&doc, "--parts matrix");
    assert_eq!(doc["complete"], true);
    for (part, status) in statuses(&doc) {
        let want = if part.ends_with("-matrix") {
            "done"
        } else {
            "not-selected"
        };
        assert_eq!(status, want, "{part}");
    }
    let html = std::fs::read_to_string(b.join("report.html")).unwrap();
    assert!(html.contains("id=\"fig-latency-heatmap\""));
    assert!(
        !html.contains("id=\"sec-sizes\""),
        "unselected parts have no section"
    );

    let page = b.join("compare.html");
    let c = json(&[
        "compare",
        a.join("results.json").to_str().unwrap(),
        b.join("results.json").to_str().unwrap(),
        "--html",
        page.to_str().unwrap(),
        "--json",
    ]);
    let rows = c["rows"].as_array().unwrap();
    let lat = rows
        .iter()
        .find(|r| {
            r["metric"]
                .as_str()
                .unwrap()
                .starts_with("parts.latency-matrix.result.latency[cpu_node=0,mem_node=0].value")
        })
        .unwrap_or_else(|| panic!("no latency metric in {c}"));
    // Both measured it, but in another mode (quick against default): the
    // settings are listed first and the figure is marked not comparable
    // instead of compared.
    assert!(
        lat["a"].as_f64().is_some() && lat["b"].as_f64().is_some(),
        "{lat}"
    );
    assert!(
        lat["ratio"].is_null() && lat["significant"].is_null(),
        "{lat}"
    );
    assert!(
        lat["not_comparable"]
            .as_str()
            .is_some_and(|w| w.contains("mode quick vs default")),
        "{lat}"
    );
    assert!(
        c["configuration_differences"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d[0] == "mode" && d[1] == "quick" && d[2] == "default"),
        "{c}"
    );
    // Parts only one report has are one-sided rows.
    let sizes = rows
        .iter()
        .find(|r| r["metric"].as_str().unwrap().starts_with("parts.scaling."))
        .expect("a scaling metric");
    assert!(sizes["b"].is_null() && sizes["ratio"].is_null());
    let page = std::fs::read_to_string(page).unwrap();
    assert!(page.contains("parts.latency-matrix.result.latency"));
}

#[test]
fn topology_file_reports_describe_the_machine_and_name_what_needs_it() {
    let _turn = turn();
    for (file, nodes_text, extra) in [
        (
            "qemu-quartet-4n2c-ring.xml",
            "4 NUMA nodes",
            &["fig-distance-heatmap"][..],
        ),
        (
            "qemu-ring4-cpuless-hmat.xml",
            "5 NUMA nodes (4 with CPUs, 1 CPU-less)",
            &["fig-distance-heatmap", "tab-hmat"][..],
        ),
        (
            "16amd64-8n2c.xml",
            "8 NUMA nodes",
            &["fig-distance-heatmap"][..],
        ),
        ("nvidiaDGX2.xml", "2 NUMA nodes", &["tab-devices"][..]),
    ] {
        let dir = scratch(&format!("topology-{}", file.trim_end_matches(".xml")));
        let out = stdout(&[
            "report",
            "--topology",
            &fixture(file),
            "-o",
            dir.to_str().unwrap(),
        ]);
        assert!(out.contains(nodes_text), "{file}: {out}");
        let doc = results(&dir);
        assert_valid(&doc, file);
        assert!(doc["environment"].is_null());
        assert_eq!(doc["machine"]["source"]["kind"], "file");
        for (part, status) in statuses(&doc) {
            assert_eq!(status, "needs-machine", "{file} {part}");
            let why = doc["parts"][&part]["reason"].as_str().unwrap();
            assert!(why.contains(file) && why.contains("live machine"), "{why}");
        }
        let mut ids = vec![
            "summary",
            "fig-node-graph",
            "tab-distances",
            "tab-machine",
            "tab-caches",
            "summary-missing",
        ];
        ids.extend_from_slice(extra);
        let r = render_and_check(
            &dir,
            &format!("report-topology-{}", file.trim_end_matches(".xml")),
            &ids,
            nodes_text,
        );
        // What needs the live machine is one line of the summary, naming
        // every part: no row of the parts table, no empty section each.
        let missing = r.text_of("summary-missing").unwrap();
        let why = format!(
            "needs the live machine: this report describes the topology file {file}; run `numalab report` on that machine"
        );
        assert!(
            missing.contains(&format!("latency-matrix, bandwidth-matrix, sizes, scaling, c2c, loaded-latency-local, loaded-latency-far, policies, pdm, blas, sweep-scenarios, sweep (needs-machine): {why}")),
            "{missing}"
        );
        let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
        assert_eq!(html.matches(&why).count(), 1, "{file}: {html}");
        for gone in [
            "<section id=\"sec-latency-matrix\">",
            "<section id=\"sec-sweep-scenarios\">",
            "id=\"missing-latency-matrix\"",
            "id=\"tab-parts\"",
        ] {
            assert!(!html.contains(gone), "{file}: {gone} in {html}");
        }
        assert!(html.contains("<section id=\"sec-machine\">"), "{file}");
        // The machine's picture: every PU, and on the DGX-2 its 16 GPUs
        // by model (each once in its box and once in its tooltip).
        let picture = r
            .text_of("machine-picture")
            .unwrap_or_else(|| panic!("{file}: no machine picture"));
        let cpus = doc["machine"]["complete_cpus"].as_array().unwrap().len();
        // ("GPU nvml0" holds "PU " too.)
        let pus = picture.matches("PU ").count() - picture.matches("GPU ").count();
        assert_eq!(pus, 2 * cpus, "{file}: {picture}");
        if file == "nvidiaDGX2.xml" {
            assert_eq!(
                picture.matches("Tesla V100-SXM3-32GB-H").count(),
                16 * 2,
                "{picture}"
            );
            assert!(picture.contains("GPU nvml15"), "{picture}");
        }
    }
}

#[test]
fn bad_input_gets_one_line_errors() {
    let _turn = turn();
    let tmp = scratch("errors");
    std::fs::create_dir_all(&tmp).unwrap();
    let d = tmp.to_str().unwrap();
    let file = tmp.join("a-file");
    std::fs::write(&file, "x").unwrap();
    // A report already in the directory (a topology one: no measuring).
    let taken = tmp.join("taken");
    stdout(&[
        "report",
        "--topology",
        &fixture("qemu-quartet-4n2c-ring.xml"),
        "-o",
        taken.to_str().unwrap(),
    ]);
    let before = std::fs::read_to_string(taken.join("results.json")).unwrap();
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["report", "-o", taken.to_str().unwrap()],
            "already holds a report: --resume completes it, --force overwrites it",
        ),
        (
            vec!["report", "-o", taken.to_str().unwrap(), "--resume"],
            "describes a topology file, not this machine",
        ),
        (vec!["report", "-o", d, "--resume"], "--resume: "),
        (
            vec!["report", "--parts", "latency", "-o", d],
            "--parts: unknown part 'latency'; valid: latency-matrix",
        ),
        (
            vec!["report", "--budget", "0", "-o", d],
            "--budget 0 must be at least 1 second",
        ),
        (
            vec!["report", "--budget", "soon", "-o", d],
            "--budget 'soon' is not a number of seconds",
        ),
        (
            vec!["report", "--size", "10K", "-o", d],
            "--size 10K is too small",
        ),
        (
            vec!["report", "--topology", &quartet, "--resume", "-o", d],
            "measures nothing",
        ),
        (
            vec![
                "report",
                "--resume",
                "--quick",
                "-o",
                taken.to_str().unwrap(),
            ],
            "drop --quick",
        ),
        (
            vec!["report", "-o", file.to_str().unwrap()],
            "not a directory",
        ),
        (vec!["report", "--quick", "--full"], "cannot be used with"),
        (
            vec!["report", "--topology", "/nonexistent.xml", "-o", d],
            "cannot read topology file /nonexistent.xml",
        ),
    ];
    for (args, needle) in cases {
        fails(&args, needle);
    }
    // Nothing was lost or changed.
    assert_eq!(
        std::fs::read_to_string(taken.join("results.json")).unwrap(),
        before
    );
}

#[test]
fn the_schema_rejects_what_it_should() {
    let dir = scratch("schema");
    stdout(&[
        "report",
        "--topology",
        &fixture("qemu-ring4-cpuless-hmat.xml"),
        "-o",
        dir.to_str().unwrap(),
    ]);
    let good = results(&dir);
    assert_valid(&good, "topology report");
    type Breakage = (&'static str, Box<dyn Fn(&mut Value)>);
    let broken: Vec<Breakage> = vec![
        (
            "unknown status",
            Box::new(|d| d["parts"]["sizes"]["status"] = "finished".into()),
        ),
        (
            "done without a result",
            Box::new(|d| d["parts"]["c2c"]["status"] = "done".into()),
        ),
        (
            "missing part",
            Box::new(|d| {
                d["parts"].as_object_mut().unwrap().remove("policies");
            }),
        ),
        (
            "node count 0",
            Box::new(|d| d["summary"]["node_count"] = 0.into()),
        ),
        (
            "headline without nodes",
            Box::new(|d| d["summary"]["headline"] = "A machine.".into()),
        ),
        (
            "wrong schema",
            Box::new(|d| d["schema"] = "numalab-sweep".into()),
        ),
        ("unknown key", Box::new(|d| d["extra"] = 1.into())),
        (
            "missing reason",
            Box::new(|d| d["parts"]["sweep"]["reason"] = Value::Null),
        ),
        (
            "bad page key",
            Box::new(|d| {
                d["machine"]["nodes"][0]["kind"] = "sram".into();
            }),
        ),
    ];
    for (what, f) in broken {
        let mut d = good.clone();
        f(&mut d);
        assert!(!schema_errors(&d).is_empty(), "the schema accepts {what}");
    }
}
