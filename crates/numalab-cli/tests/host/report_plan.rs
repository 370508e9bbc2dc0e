//! `numalab report --dry-run`: the plan of every part, on topology files
//! (reference or preset costs) and on this machine (probed costs), without
//! measuring or writing anything.

use crate::common;

use common::{fails, fixture, json, numalab, scratch, stdout};
use serde_json::Value;

fn plan(args: &[&str]) -> Value {
    let mut all = vec!["report", "--dry-run", "--json"];
    all.extend_from_slice(args);
    json(&all)
}

fn part<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no part {name}"))
}

#[test]
fn a_topology_plan_schedules_every_applicable_part_within_the_budget() {
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    let p = plan(&["--topology", &quartet]);
    assert_eq!(p["mode"], "default");
    // A topology file's report measures nothing: no looks at the host.
    assert!(p.get("looks").is_none(), "{}", p["looks"]);
    // 80 s plus 40 s per further memory node.
    assert_eq!(p["budget_s"], 200.0);
    assert_eq!(p["costs"]["source"]["preset"], "reference-vm");
    let parts = p["parts"].as_array().unwrap();
    assert_eq!(parts.len(), 12);
    let mut sum = 0.0;
    for x in parts {
        if x["name"] == "blas" {
            // Full-only: listed, not planned, with the reason.
            assert_eq!(x["applicable"], false, "{x}");
            assert_eq!(x["planned"], false, "{x}");
            assert_eq!(x["reason"], "runs with --full", "{x}");
            continue;
        }
        assert_eq!(x["applicable"], true, "{x}");
        assert_eq!(x["planned"], true, "{x}");
        let s = x["predicted_s"].as_f64().unwrap();
        assert!(s > 0.0, "{x}");
        sum += s;
        assert!(x["work"]["measurements"].as_u64().unwrap() > 0, "{x}");
    }
    let total = p["predicted_total_s"].as_f64().unwrap();
    assert!((total - sum).abs() < 1.0, "{total} vs {sum}");
    assert!(total <= 200.0 * 1.0001, "{total}");
    // The matrices have 4 x 4 cells; c2c every pair of the 8 CPUs.
    assert_eq!(part(&p, "latency-matrix")["work"]["cells"], 16);
    assert_eq!(part(&p, "c2c")["work"]["pairs"], 28);
    // The model counts copy and triad; classes are measured only with --full.
    assert_eq!(part(&p, "pdm")["work"]["measurements"], 2);
    // The study's scenarios: as many of the six as the share pays for,
    // at least 4 rounds, the rest named as left out.
    let sc = part(&p, "sweep-scenarios");
    let [run, all] = [0, 1].map(|i| sc["work"]["scenarios"][i].as_u64().unwrap());
    assert_eq!(all, 6, "{sc}");
    assert!(run >= 1, "{sc}");
    assert!(sc["work"]["rounds"].as_u64().unwrap() >= 4, "{sc}");
    if run < 6 {
        let cut = sc["cut"].as_str().unwrap();
        assert!(
            cut.starts_with(&format!("{run} of 6 scenarios (crossfire")),
            "{cut}"
        );
        assert!(cut.contains("the budget leaves out"), "{cut}");
    }
}

#[test]
fn scenarios_are_added_by_priority_and_full_runs_them_all() {
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    let scenarios = |args: &[&str]| {
        let mut all = vec!["--topology", quartet.as_str(), "--parts", "sweep-scenarios"];
        all.extend_from_slice(args);
        part(&plan(&all), "sweep-scenarios").clone()
    };
    // The smallest form: crossfire alone, at the fewest rounds.
    let small = scenarios(&["--budget", "1"]);
    assert_eq!(
        small["work"]["scenarios"],
        serde_json::json!([1, 6]),
        "{small}"
    );
    assert_eq!(small["work"]["rounds"], 4, "{small}");
    assert!(small["cut"]
        .as_str()
        .unwrap()
        .starts_with("1 of 6 scenarios (crossfire), 4 rounds: the budget leaves out two-on-one-node, crossfire-full"));
    // A long budget: every scenario, the default's 6 rounds.
    let big = scenarios(&["--budget", "3000"]);
    assert_eq!(big["work"]["scenarios"], serde_json::json!([6, 6]), "{big}");
    assert_eq!(big["work"]["rounds"], 6, "{big}");
    assert!(big["cut"].is_null(), "{big}");
    // --full: every scenario whatever the budget, 10 rounds when it pays.
    let full = scenarios(&["--full", "--budget", "3000"]);
    assert_eq!(
        full["work"]["scenarios"],
        serde_json::json!([6, 6]),
        "{full}"
    );
    assert_eq!(full["work"]["rounds"], 10, "{full}");
    // One CPU node: the crossfire scenarios cannot exist, the one-node ones run.
    let one = fixture("8em64t-2s2ca2c-buggynuma.xml");
    let p = plan(&[
        "--topology",
        &one,
        "--parts",
        "sweep-scenarios",
        "--budget",
        "3000",
    ]);
    let sc = part(&p, "sweep-scenarios");
    assert_eq!(sc["applicable"], true, "{sc}");
    assert_eq!(sc["work"]["scenarios"], serde_json::json!([2, 2]), "{sc}");
}

#[test]
fn a_full_plan_schedules_blas_on_every_cpu_node_and_names_a_smaller_n() {
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    let p = plan(&["--topology", &quartet, "--full"]);
    let b = part(&p, "blas");
    assert_eq!(b["applicable"], true, "{b}");
    assert_eq!(b["planned"], true, "{b}");
    // The ring's placements of a thread and its operands under its 8
    // automorphisms: daxpy 10, triad 36, dgemv 36, dgemm 36 = 118, whether
    // the thread may be on one node or on all four (every node is alike).
    assert_eq!(b["work"]["measurements"], 118, "{b}");
    assert_eq!(b["work"]["rows"], serde_json::json!([4, 4]), "{b}");
    // Its share of 800 s does not hold 108 dgemms of n = 1600 on the
    // reference VM: n is cut, and the plan says to what.
    let bytes = b["work"]["buffer_bytes"].as_u64().unwrap();
    let n = (bytes as f64 / 8.0).sqrt() as u64;
    assert_eq!(n * n * 8, bytes, "{b}");
    assert!(n < 1600, "{b}");
    let cut = b["cut"].as_str().unwrap();
    assert!(cut.contains(&format!("n = {n} instead of 1600")), "{cut}");
    // Asked for alone without --full it is still not planned, and says why.
    let p = plan(&["--topology", &quartet, "--parts", "blas"]);
    let b = part(&p, "blas");
    assert_eq!(b["planned"], false, "{b}");
    assert_eq!(b["reason"], "runs with --full", "{b}");
}

#[test]
fn a_slow_machine_gets_cut_work_and_a_raised_default_budget() {
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    let p = plan(&["--topology", &quartet, "--quick", "--costs", "tcg"]);
    let budget = p["budget_s"].as_f64().unwrap();
    // The quick default is a third of 200 s; the emulator needs more.
    assert!(budget > 200.0 / 3.0, "{budget}");
    assert!(
        p["warnings"][0].as_str().unwrap().contains("was raised to"),
        "{p}"
    );
    assert!(p["predicted_total_s"].as_f64().unwrap() <= budget * 1.0001);
    // Every part still runs, cut down (but the full-only one).
    for x in p["parts"].as_array().unwrap() {
        assert_eq!(x["planned"], x["name"] != "blas", "{x}");
    }
    assert!(part(&p, "sizes")["cut"].as_str().unwrap().contains("sizes"));
    // A budget below what the smallest forms need is kept, with a warning.
    let r = numalab(&[
        "report",
        "--dry-run",
        "--topology",
        &quartet,
        "--quick",
        "--costs",
        "tcg",
        "--budget",
        "20",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(r.out.contains("budget 20 s"), "{}", r.out);
    assert!(r.err.contains("--budget 20 s is below the"), "{}", r.err);
}

#[test]
fn a_big_machine_samples_rows_and_pairs_and_says_so() {
    let big = fixture("256ia64-64n2s2c.xml");
    let p = plan(&["--topology", &big, "--quick", "--costs", "fast-server"]);
    let lat = part(&p, "latency-matrix");
    let rows = lat["work"]["rows"].as_array().unwrap();
    assert_eq!(rows[1], 64);
    assert!(rows[0].as_u64().unwrap() < 64);
    assert!(lat["cut"].as_str().unwrap().contains("of 64 CPU nodes"));
    let c2c = part(&p, "c2c");
    assert_eq!(c2c["work"]["cpus"][1], 256);
    assert!(c2c["cut"].as_str().unwrap().contains("of 256 CPUs"));
    // The sweep is planned on 64 nodes with 256 CPUs: the automorphisms of
    // the whole machine tree (about 9.3 x 10^24 of the nodes; the tree's
    // cores and caches keep apart placements the distance table alone
    // would merge) and thread exchange fold 2^30 + 2^15 cases into 1805
    // classes (14 of one thread, 1791 of two), of which the budget runs a
    // cover of the hop classes.
    let sweep = part(&p, "sweep");
    assert_eq!(sweep["applicable"], true, "{sweep}");
    assert_eq!(sweep["work"]["classes"][1], 1805, "{sweep}");
    let run = sweep["work"]["classes"][0].as_u64().unwrap();
    assert!(run > 0 && run < 1805, "{sweep}");
    assert!(
        sweep["cut"]
            .as_str()
            .unwrap()
            .contains("every hop class kept"),
        "{sweep}"
    );
    assert!(p["predicted_total_s"].as_f64().unwrap() <= p["budget_s"].as_f64().unwrap() * 1.0001);
}

#[test]
fn the_live_plan_probes_costs_and_writes_nothing() {
    let dir = scratch("dry-run");
    let d = dir.to_str().unwrap();
    let out = stdout(&["report", "--dry-run", "--quick", "-o", d]);
    assert!(out.contains("costs (probed on this machine)"), "{out}");
    assert!(out.contains("sizes"), "{out}");
    assert!(!dir.join("results.json").exists());
    let p = plan(&["--quick", "--parts", "sizes,c2c"]);
    assert_eq!(p["costs"]["source"], "probed");
    assert!(p["costs"]["fault_s_per_gib"].as_f64().unwrap() > 0.0);
    assert_eq!(part(&p, "sizes")["planned"], true);
    assert_eq!(part(&p, "scaling")["planned"], false);
    assert_eq!(part(&p, "scaling")["reason"], "left out with --parts");
    // The looks at the host's speed, as the run would judge them before
    // its first look: with 64 MiB buffers a 60 s budget's quarter holds
    // three; a 2 s budget's does not, and the plan says which would.
    let room = plan(&[
        "--quick", "--parts", "c2c", "--size", "64M", "--budget", "60",
    ]);
    let looks = &room["looks"];
    assert!(
        looks["look_s"]
            .as_f64()
            .is_some_and(|s| s > 0.0 && s <= 5.0),
        "{looks}"
    );
    assert_eq!(looks["planned"], true, "{looks}");
    assert!(looks.get("reason").is_none(), "{looks}");
    // The plan's text with `options` after `--dry-run --quick --parts c2c`.
    let text = |options: &[&str]| {
        let mut args = vec!["report", "--dry-run", "--quick", "--parts", "c2c"];
        args.extend_from_slice(options);
        stdout(&args)
    };
    let out = text(&["--size", "64M", "--budget", "60"]);
    assert!(
        out.contains("looks at the host's speed: before the first part, after the last and between parts, about "),
        "{out}"
    );
    let none = plan(&[
        "--quick", "--parts", "c2c", "--size", "64M", "--budget", "2",
    ]);
    let looks = &none["looks"];
    assert_eq!(looks["planned"], false, "{looks}");
    let why = looks["reason"].as_str().unwrap();
    assert!(
        why.starts_with("a look at the host's speed would take about ")
            && why.contains("a quarter of the 2 s budget (--budget "),
        "{why}"
    );
    let out = text(&["--budget", "2"]);
    assert!(
        out.contains(
            "looks at the host's speed: none: a look at the host's speed would take about "
        ),
        "{out}"
    );
}

#[test]
fn plan_options_need_the_dry_run() {
    fails(&["report", "--json"], "--dry-run");
    fails(&["report", "--costs", "tcg"], "--dry-run");
    fails(
        &["report", "--dry-run", "--costs", "slow"],
        "valid: fast-server, reference-vm, tcg",
    );
}
