//! `numalab pdm`: the study's case on the Quartet counted exactly, the JSON
//! shape, sampling past the exact count, and one-line errors. Nothing here
//! measures, so the tests run in parallel.

use crate::common;

use common::{fails, fails_rc, fixture, json, num, stdout};

const QUARTET: &str = "qemu-quartet-4n2c-ring.xml";

#[test]
fn quartet_triad_one_thread_per_node_is_counted_exactly() {
    let q = fixture(QUARTET);
    let v = json(&["pdm", "--topology", &q, "--kernel", "triad", "--json"]);
    assert_eq!(v["command"], "pdm");
    assert!(v["schema_version"].is_string());
    // 4 threads in 4! orders, 12 quantities on 4 nodes each.
    assert_eq!(v["total_placements"].as_u64(), Some(402_653_184));
    assert!((num(&v["total_placements_log10"]) - 402_653_184f64.log10()).abs() < 1e-9);
    assert_eq!(v["exact"], true);
    assert_eq!(v["thread_placement"], "one-per-node");
    assert_eq!(v["threads"], 4);
    assert_eq!(v["links"].as_array().unwrap().len(), 4, "a ring of 4");
    let classes = v["classes"].as_array().unwrap();
    let counted: u64 = classes.iter().map(|c| c["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, 402_653_184);
    let shares: f64 = classes.iter().map(|c| num(&c["share"])).sum();
    assert!((shares - 1.0).abs() < 1e-9, "shares sum to {shares}");
    // All local is the least contention: 3 quantities per controller.
    assert_eq!(num(&classes[0]["low"]), 3.0);
    assert_eq!(num(&classes[0]["high"]), 4.0);
    // All 12 quantities on one node: 12 on its controller, 4 nodes x 4! ways.
    let last = classes.last().unwrap();
    assert_eq!(num(&last["low"]), 12.0);
    assert_eq!(last["count"].as_u64(), Some(96));
    for c in classes {
        let ex = c["examples"].as_array().unwrap();
        assert!((1..=3).contains(&ex.len()), "{c}");
        let e = ex[0].as_str().unwrap();
        assert!(
            e.starts_with("T0@") && e.contains(":a→") && e.contains(",c→"),
            "{e}"
        );
        assert_eq!(e.split(' ').count(), 4, "one label per thread: {e}");
        assert!(
            c.get("interval").is_none(),
            "exact classes carry no interval"
        );
    }
}

/// The 2007 study's Tables 4 (copy) and 5 (triad): share of placements
/// per contention class on the Opteron ring, one thread per node, in
/// percent to one decimal; the written array moves both ways.
#[test]
fn quartet_copy_and_triad_give_the_studys_tables() {
    let q = fixture(QUARTET);
    let tables: [(&str, f64, &[f64]); 2] = [
        ("copy", 2.0, &[2.6, 51.9, 34.6, 9.2, 1.5]),
        ("triad", 3.0, &[1.9, 38.1, 38.2, 16.0]),
    ];
    for (kernel, first, table) in tables {
        let v = json(&["pdm", "--topology", &q, "--kernel", kernel, "--json"]);
        assert_eq!(v["exact"], true);
        let qs = v["quantities"].as_array().unwrap();
        assert_eq!(qs.last().unwrap()["direction"], "both", "{kernel}");
        let classes = v["classes"].as_array().unwrap();
        for (i, want) in table.iter().enumerate() {
            let c = &classes[i];
            assert_eq!(num(&c["low"]), first + i as f64, "{kernel}");
            let got = num(&c["share"]) * 100.0;
            assert!(
                (got - want).abs() < 0.05,
                "{kernel} class {}: {got:.3}% against {want}%",
                num(&c["low"])
            );
        }
    }
}

#[test]
fn text_lists_classes_and_says_exact() {
    let q = fixture(QUARTET);
    let out = stdout(&[
        "pdm",
        "--topology",
        &q,
        "--kernel",
        "copy",
        "--class-width",
        "2",
    ]);
    assert!(out.contains("placement distribution model: copy"), "{out}");
    assert!(out.contains("[2, 4)"), "{out}");
    // copy: 8 quantities on 4 nodes, 4^8 x 4! placements.
    assert!(
        out.contains("total: 1572864 placements, counted exactly"),
        "{out}"
    );
}

#[test]
fn given_links_fixed_threads_and_weights_change_the_model() {
    let q = fixture(QUARTET);
    let v = json(&[
        "pdm",
        "--topology",
        &q,
        "--quantities",
        "2",
        "--directions",
        "r,both",
        "--weights",
        "1,0.5",
        "--thread-nodes",
        "0,3",
        "--links",
        "0-1,1-2,2-3",
        "--json",
    ]);
    assert_eq!(v["links_given"], true);
    assert_eq!(v["links"], serde_json::json!([[0, 1], [1, 2], [2, 3]]));
    assert_eq!(v["thread_nodes"], serde_json::json!([0, 3]));
    assert_eq!(
        v["total_placements"].as_u64(),
        Some(256),
        "4^(2 threads x 2)"
    );
    assert_eq!(v["quantities"][1]["direction"], "both");
    assert_eq!(num(&v["quantities"][1]["weight"]), 0.5);
}

#[test]
fn sampling_states_its_intervals() {
    let q = fixture(QUARTET);
    let v = json(&[
        "pdm",
        "--topology",
        &q,
        "--kernel",
        "triad",
        "--samples",
        "20000",
        "--seed",
        "3",
        "--json",
    ]);
    assert_eq!(v["exact"], false);
    assert_eq!(v["samples"], 20000);
    assert_eq!(v["seed"], 3);
    let classes = v["classes"].as_array().unwrap();
    let drawn: u64 = classes.iter().map(|c| c["count"].as_u64().unwrap()).sum();
    assert_eq!(drawn, 20000);
    for c in classes {
        let iv = c["interval"].as_array().unwrap();
        let (lo, hi, s) = (num(&iv[0]), num(&iv[1]), num(&c["share"]));
        assert!(lo <= s && s <= hi, "{c}");
    }
}

#[test]
fn bad_inputs_are_one_line_errors() {
    let q = fixture(QUARTET);
    let t = |extra: &[&'static str]| -> Vec<String> {
        let mut a = vec!["pdm".to_string(), "--topology".into(), q.clone()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let fails = |a: Vec<String>, needle: &str| {
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        fails(&a, needle);
    };
    fails(t(&["--kernel", "dgemm"]), "valid: copy, scale, add, triad");
    fails(
        t(&["--links", "0-1,1-1"]),
        "--links: 1-1 links a node to itself",
    );
    fails(
        t(&["--links", "0-1,1-7"]),
        "node 7 is not on this machine (nodes: 0,1,2,3)",
    );
    fails(t(&["--links", "0-1,2-3"]), "cannot reach");
    fails(t(&["--links", "0+1"]), "write A-B");
    fails(
        t(&["--quantities", "9"]),
        "--quantities '9' is not a whole number from 1 to 8",
    );
    fails(
        t(&["--quantities", "2", "--directions", "r,up"]),
        "valid: r, w, both",
    );
    fails(
        t(&["--weights", "1,1,-2"]),
        "--weights: '-2' is not a number above 0",
    );
    fails(t(&["--weights", "1,inf,1"]), "--weights");
    fails(t(&["--weights", "1,1"]), "2 given for 3 quantities");
    fails(t(&["--class-width", "0"]), "--class-width");
    fails(
        t(&["--thread-nodes", "0,9"]),
        "node 9 is not a CPU node (CPU nodes: 0,1,2,3)",
    );
    fails(t(&["--threads", "65"]), "--threads");
    fails(
        t(&["--threads", "2", "--thread-nodes", "0"]),
        "cannot be used with",
    );
    fails_rc(&["pdm", "--topology", "/nonexistent/pdm.xml"], 2, "pdm.xml");
}

#[test]
fn eight_nodes_eight_threads_fall_back_to_sampling_within_two_tenths_of_a_point() {
    let t = fixture("16amd64-8n2c.xml");
    let v = json(&["pdm", "--topology", &t, "--kernel", "copy", "--json"]);
    assert_eq!(v["exact"], false);
    assert_eq!(v["samples"], 250_000);
    // 8^16 memory placements times 8! thread orders.
    assert_eq!(num(&v["total_placements"]), 8f64.powi(16) * 40320.0);
    assert!(
        v["notes"][0].as_str().unwrap().contains("sampled"),
        "{}",
        v["notes"]
    );
    for c in v["classes"].as_array().unwrap() {
        let iv = c["interval"].as_array().unwrap();
        let half = (num(&iv[1]) - num(&iv[0])) / 2.0;
        assert!(half <= 0.002, "{c}: half-width {half}");
    }
}

#[test]
fn sixty_four_nodes_say_how_many_placements_beyond_any_float() {
    let t = fixture("256ia64-64n2s2c.xml");
    let v = json(&[
        "pdm",
        "--topology",
        &t,
        "--kernel",
        "copy",
        "--samples",
        "1000",
        "--json",
    ]);
    assert!(v["total_placements"].is_null(), "{}", v["total_placements"]);
    // 64 threads x 2 quantities on 64 nodes, times 64!.
    let want = 128.0 * 64f64.log10() + (1..=64).map(|i| (i as f64).log10()).sum::<f64>();
    assert!((num(&v["total_placements_log10"]) - want).abs() < 1e-6);
    assert_eq!(v["exact"], false);
    let out = stdout(&[
        "pdm",
        "--topology",
        &t,
        "--kernel",
        "copy",
        "--samples",
        "1000",
    ]);
    assert!(
        out.contains(&format!("total: about 10^{want:.2} placements")),
        "{out}"
    );
}

/// On this one-node machine `--measure` runs the single placement of the
/// single class once (it has no other), with every array's pages on node 0,
/// and says a trend cannot be judged from one class.
#[test]
fn measure_runs_each_distinct_placement_of_each_class() {
    let _turn = common::turn();
    let v = json(&[
        "pdm",
        "--kernel",
        "triad",
        "--measure",
        "5",
        "--size",
        "8M",
        "--budget-each",
        "0.1",
        "--json",
    ]);
    let nodes = v["nodes"].as_array().unwrap().len();
    if nodes != 1 {
        numalab_testkit::skip(format!(
            "pdm --measure: this machine has {nodes} nodes; the checks are of one node"
        ));
        return;
    }
    let m = &v["measured"];
    assert_eq!(m["kernel"], "triad");
    assert_eq!(m["per_class"], 5);
    let classes = m["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 1);
    let c = &classes[0];
    // One placement exists: three arrays on node 0's controller.
    assert_eq!((num(&c["low"]), c["wanted"].as_u64()), (3.0, Some(1)));
    let p = &c["placements"][0];
    assert_eq!(p["label"], "T0@0:a→0,b→0,c→0");
    assert_eq!(p["verified"], true);
    for a in ["a", "b", "c"] {
        assert_eq!(p["pages"][0][a]["0"], 2048, "array {a}");
    }
    assert!(num(&p["gbps"]["median"]) > 0.0);
    assert_eq!(c["verified"], 1);
    assert_eq!(m["trend"]["verdict"], "cannot tell");
    assert!(m["trend"]["reason"]
        .as_str()
        .unwrap()
        .starts_with("1 contention class measured"));
    fails(
        &["pdm", "--quantities", "3", "--measure", "2"],
        "'--quantities <Q>' cannot be used with '--measure [<K>]'",
    );
    fails(
        &["pdm", "--measure", "1001"],
        "--measure '1001' is not a whole number from 1 to 1000",
    );
    fails(&["pdm", "--size", "8M"], "--measure");
    // Three 16 GiB arrays on this machine's one node: refused before any runs.
    fails_rc(
        &["pdm", "--measure", "1", "--size", "16G"],
        1,
        "placement T0@0:a→0,b→0,c→0: ",
    );
}
