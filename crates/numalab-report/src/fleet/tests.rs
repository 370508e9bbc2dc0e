use super::*;
use serde_json::json;

/// A node's results.json as a report writes it (the fields a fleet reads,
/// and one it skips), with its local read bandwidth and THP setting.
fn doc(gbps: f64, thp: &str, cpus: &[u32]) -> String {
    json!({
        "schema": "numalab-report",
        "schema_version": "1.1",
        "mode": "quick",
        "complete": true,
        "parts": [{"name": "topology", "huge": [1, 2, 3]}],
        "environment": {
            "kernel": "6.1.0-18-amd64",
            "logical_cpus": 2,
            "thp_enabled": thp,
            "numa_balancing": false,
            "governor": null,
            "cgroup": {"memory_max": "max"}
        },
        "machine": {
            "nodes": [
                {"os_index": 0, "memory_bytes": 12u64 << 30, "cpus": [0]},
                {"os_index": 1, "memory_bytes": 12u64 << 30, "cpus": [1]}
            ],
            "distances": {"nodes": [0, 1], "matrix": [[10, 21], [21, 10]]},
            "allowed_cpus": cpus,
            "warnings": []
        },
        "summary": {"key_figures": {
            "local_latency_ns": 95.0 + gbps / 100.0,
            "local_read_gbps": gbps,
            "numa_ratio_min": 1.6,
            "c2c_within_node_ns": null
        }}
    })
    .to_string()
}

fn fleet_of(nodes: &[(&str, String)], baseline: Option<&Baseline>) -> Fleet {
    let mut b = FleetBuilder::default();
    for (name, text) in nodes {
        b.add(name, &NodeDoc::parse(text).unwrap());
    }
    b.finish(baseline)
}

fn node<'a>(f: &'a Fleet, name: &str) -> &'a NodeVerdict {
    f.nodes.iter().find(|n| n.name == name).unwrap()
}

#[test]
fn a_slow_node_and_a_node_with_another_thp_setting_are_the_outliers_of_ten() {
    let mut nodes: Vec<(String, String)> = (1..=10)
        .map(|i| {
            (
                format!("cn{i}"),
                doc(27.0 + 0.1 * (i % 3) as f64, "madvise", &[0, 1]),
            )
        })
        .collect();
    nodes[6].1 = doc(13.4, "madvise", &[0, 1]); // cn7: half the bandwidth
    nodes[9].1 = doc(27.1, "never", &[0, 1]); // cn10: THP off
    let nodes: Vec<(&str, String)> = nodes.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let f = fleet_of(&nodes, None);
    assert_eq!((f.nodes_total, f.reported), (10, 10));
    let odd: Vec<&str> = f
        .nodes
        .iter()
        .filter(|n| n.verdict != Verdict::Conforms)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(odd, vec!["cn7", "cn10"], "natural order, only the two");
    let cn7 = node(&f, "cn7");
    assert_eq!(cn7.verdict, Verdict::Outlier);
    assert_eq!(cn7.reasons.len(), 1, "{:?}", cn7.reasons);
    assert!(
        cn7.reasons[0].starts_with("Read bandwidth, local memory: 13.4 GB/s, modified z -"),
        "{:?}",
        cn7.reasons
    );
    let cn10 = node(&f, "cn10");
    assert_eq!(
        cn10.reasons,
        vec!["transparent huge pages: never, where 9 of 10 nodes have madvise".to_string()]
    );
    let bw = f
        .figures
        .iter()
        .find(|x| x.name == "local_read_gbps")
        .unwrap();
    let sp = bw.spread.unwrap();
    assert_eq!(sp.n, 10);
    assert_eq!((sp.min, sp.max), (13.4, 27.2));
    assert_eq!(bw.outliers.len(), 1);
    assert_eq!(bw.outliers[0].node, "cn7");
    // The local latency moves with the bandwidth by 0.14 ns: under 5%.
    let lat = f
        .figures
        .iter()
        .find(|x| x.name == "local_latency_ns")
        .unwrap();
    assert!(lat.outliers.is_empty());
    let thp = f.settings.iter().find(|s| s.name == "thp_enabled").unwrap();
    assert_eq!(thp.majority.as_deref(), Some("madvise"));
    assert_eq!(thp.values[1].nodes, vec!["cn10".to_string()]);
    assert_eq!(
        f.summary[0],
        "10 of 10 nodes reported: 8 conform, 2 outliers, 0 undecided, 0 failed."
    );
    assert!(f.summary.contains(
        &"The nodes differ in transparent huge pages: madvise on 9 nodes, never on 1 node."
            .to_string()
    ));
    // Settings every node shares are not differences.
    assert!(!f
        .settings
        .iter()
        .find(|s| s.name == "distances")
        .unwrap()
        .differs());
    assert_eq!(
        node(&f, "cn1")
            .settings
            .get("distances")
            .map(String::as_str),
        Some("10 21; 21 10")
    );
    assert_eq!(
        node(&f, "cn1")
            .settings
            .get("memory_per_node")
            .map(String::as_str),
        Some("0: 12, 1: 12")
    );
}

#[test]
fn two_nodes_that_differ_are_undecided_until_a_baseline_says_which_is_right() {
    let nodes = [
        ("nlnode1", doc(27.0, "madvise", &[0, 1])),
        ("nlnode2", doc(26.0, "never", &[0])),
    ];
    let f = fleet_of(&nodes, None);
    assert!(f.nodes.iter().all(|n| n.verdict == Verdict::Undecided));
    assert!(node(&f, "nlnode2").reasons.iter().any(|r| r
        == "transparent huge pages: never, and no value is held by a majority (madvise on 1 node, never on 1 node)"));
    assert!(f.summary.iter().any(|s| s.contains("give --baseline")));
    let base = Baseline::parse(&nodes[0].1, "nlnode1", DEFAULT_TOLERANCE).unwrap();
    let f = fleet_of(&nodes, Some(&base));
    assert_eq!(node(&f, "nlnode1").verdict, Verdict::Conforms);
    let n2 = node(&f, "nlnode2");
    assert_eq!(n2.verdict, Verdict::Outlier);
    assert_eq!(
        n2.reasons,
        vec![
            "CPUs the report could use (cgroup, affinity): 0, the baseline 0-1".to_string(),
            "transparent huge pages: never, the baseline madvise".to_string(),
        ],
        "26 GB/s is within 10% of 27"
    );
    let strict = Baseline::parse(&nodes[0].1, "nlnode1", 0.02).unwrap();
    let f = fleet_of(&nodes, Some(&strict));
    assert!(node(&f, "nlnode2").reasons.contains(
        &"Read bandwidth, local memory: 26.0 GB/s, 4% below the baseline's 27.0 (tolerance 2%)"
            .to_string()
    ));
    assert!(f.rule.text.starts_with("against the baseline nlnode1"));
}

#[test]
fn a_fleet_json_reads_back_and_serves_as_a_baseline() {
    let nodes: Vec<(String, String)> = (0..5)
        .map(|i| {
            (
                format!("n{i}"),
                doc(20.0 + i as f64 * 0.2, "always", &[0, 1]),
            )
        })
        .collect();
    let nodes: Vec<(&str, String)> = nodes.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let f = fleet_of(&nodes, None);
    let text = serde_json::to_string(&f).unwrap();
    let back: Fleet = serde_json::from_str(&text).unwrap();
    assert_eq!(back.nodes.len(), 5);
    assert_eq!(back.figures[3].spread, f.figures[3].spread);
    let base = Baseline::parse(&text, "fleet.json", 0.1).unwrap();
    assert_eq!(base.setting("thp_enabled"), Some("always"));
    assert_eq!(base.figure("local_read_gbps"), Some(20.4));
    let e = Baseline::parse("{\"schema\": \"x\"}", "b", 0.1).unwrap_err();
    assert!(
        e.contains("a baseline is a node's results.json or a fleet.json"),
        "{e}"
    );
}

#[test]
fn gather_lists_failed_and_missing_nodes_beside_those_that_reported() {
    let dir = std::env::temp_dir().join(format!("numalab-fleet-gather-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let nodes = dir.join(NODES_DIR);
    for (n, text) in [
        ("a1", doc(10.0, "madvise", &[0, 1])),
        ("a2", doc(10.2, "madvise", &[0, 1])),
    ] {
        std::fs::create_dir_all(nodes.join(n)).unwrap();
        std::fs::write(nodes.join(n).join("results.json"), text).unwrap();
    }
    // a3: its report refused its options before making its directory.
    let logs = dir.join(LOGS_DIR);
    std::fs::create_dir_all(&logs).unwrap();
    std::fs::write(logs.join("a3.exit_status"), "2\n").unwrap();
    std::fs::write(
        logs.join("a3.log"),
        "numalab: measuring\nnumalab: --parts: unknown part 'x'\n\n",
    )
    .unwrap();
    std::fs::create_dir_all(nodes.join("a4")).unwrap();
    std::fs::write(
        nodes.join("a4").join("results.json"),
        "{\"schema\": \"other\"}",
    )
    .unwrap();
    let expected = vec!["a1".to_string(), "a5".to_string()];
    let f = gather(&dir, &expected, "never started: srun could not reach it")
        .unwrap()
        .finish(None);
    let got: Vec<(&str, Verdict)> = f
        .nodes
        .iter()
        .map(|n| (n.name.as_str(), n.verdict))
        .collect();
    assert_eq!(
        got,
        vec![
            ("a1", Verdict::Conforms),
            ("a2", Verdict::Conforms),
            ("a3", Verdict::Failed),
            ("a4", Verdict::Failed),
            ("a5", Verdict::Failed),
        ]
    );
    assert_eq!(
        node(&f, "a3").reasons,
        vec!["numalab report exited with status 2: numalab: --parts: unknown part 'x'".to_string()]
    );
    assert!(node(&f, "a4").reasons[0].contains("its schema is \"other\""));
    assert_eq!(
        node(&f, "a5").reasons[0],
        "never started: srun could not reach it"
    );
    assert_eq!(f.reported, 2);
    // The outputs: a CSV row per node, the page's tables.
    assert_eq!(render_csv(&f).lines().count(), 6);
    let html = render_html(&f);
    for id in [
        "id=\"summary\"",
        "id=\"figures\"",
        "id=\"settings\"",
        "id=\"nodes\"",
    ] {
        assert!(html.contains(id), "{id}");
    }
    assert!(render_text(&f).contains("a3                       failed"));
    let empty = std::env::temp_dir().join(format!("numalab-fleet-empty-{}", std::process::id()));
    std::fs::create_dir_all(empty.join(NODES_DIR)).unwrap();
    let e = gather(&empty, &[], "").err().unwrap();
    assert!(
        e.ends_with("holds no node (nodes/NAME/results.json): nothing to aggregate"),
        "{e}"
    );
    let e = gather(&dir.join("nope"), &[], "").err().unwrap();
    assert!(
        e.contains("is not a directory (a fleet directory holds nodes/NAME/results.json"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).ok();
    std::fs::remove_dir_all(&empty).ok();
}

#[test]
fn compare_finds_a_figure_that_moved_on_every_node_and_the_changed_verdicts() {
    let before: Vec<(String, String)> = (0..8)
        .map(|i| {
            (
                format!("n{i}"),
                doc(20.0 + 0.1 * i as f64, "madvise", &[0, 1]),
            )
        })
        .collect();
    let mut after: Vec<(String, String)> = (0..8)
        .map(|i| {
            (
                format!("n{i}"),
                doc(22.0 + 0.1 * i as f64, "madvise", &[0, 1]),
            )
        })
        .collect();
    after[3].1 = doc(22.3, "never", &[0, 1]);
    let v = |x: &Vec<(String, String)>| -> Vec<(String, String)> { x.clone() };
    let a = fleet_of(
        &v(&before)
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect::<Vec<_>>(),
        None,
    );
    let b = fleet_of(
        &v(&after)
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect::<Vec<_>>(),
        None,
    );
    let c = compare::compare(&a, &b);
    let bw = c
        .figures
        .iter()
        .find(|f| f.name == "local_read_gbps")
        .unwrap();
    assert_eq!((bw.higher_in_b, bw.lower_in_b, bw.paired_nodes), (8, 0, 8));
    assert_eq!(bw.verdict, "higher");
    assert!((bw.p_value.unwrap() - 2.0 / 256.0).abs() < 1e-12);
    let ratio = c
        .figures
        .iter()
        .find(|f| f.name == "numa_ratio_min")
        .unwrap();
    assert_eq!(ratio.verdict, "cannot tell", "no node moved");
    assert_eq!(c.settings.len(), 1);
    assert_eq!(
        (
            c.settings[0].node.as_str(),
            c.settings[0].a.as_str(),
            c.settings[0].b.as_str()
        ),
        ("n3", "madvise", "never")
    );
    assert_eq!(c.verdicts.len(), 1);
    assert_eq!(
        (c.verdicts[0].a, c.verdicts[0].b),
        (Verdict::Conforms, Verdict::Outlier)
    );
    assert!(compare::render_text(&c).contains("n3 thp_enabled: madvise → never"));
}
