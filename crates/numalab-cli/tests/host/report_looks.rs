//! `numalab report`'s looks at the host's speed between its parts: taken
//! when three of them fit in a quarter of the budget, otherwise not, and
//! then the report says why and which budget gives them.

use crate::common;

use common::{numalab, scratch};
use serde_json::Value;

/// `numalab report --quick --parts c2c` with `options`, into a new folder
/// under `test`'s scratch: the folder and its results.json.
fn c2c_report(test: &str, options: &[&str]) -> (std::path::PathBuf, Value) {
    let dir = scratch(test).join("r");
    let mut args = vec!["report", "--quick", "--parts", "c2c"];
    args.extend_from_slice(options);
    args.extend(["-o", dir.to_str().unwrap()]);
    let r = numalab(&args);
    assert_eq!(r.rc, 0, "{}", r.err);
    let text = std::fs::read_to_string(dir.join("results.json")).unwrap();
    (dir, serde_json::from_str(&text).unwrap())
}

/// Small buffers make a look cheap (0.8 s here, 1.8 s beside the guest
/// lane): a 60 s budget's quarter holds three, so the run looks before
/// its part and after it, each look measuring every kind this machine
/// has. Its one short part (c2c) leaves most of the budget unused.
#[test]
fn a_report_with_room_for_three_looks_looks_before_and_after_its_parts() {
    let (_, doc) = c2c_report("looks-room", &["--size", "64M", "--budget", "60"]);
    let drift = &doc["drift"];
    assert!(drift.get("unwatched").is_none(), "{drift}");
    let probes = drift["probes"].as_array().unwrap();
    assert!(probes.len() >= 2, "{drift}");
    assert!(probes[0]["after"].is_null(), "{drift}");
    assert_eq!(probes.last().unwrap()["after"], "c2c", "{drift}");
    let m = numalab::Machine::live().unwrap();
    let cpu = m.allowed_cpus.first().unwrap();
    let node = m.node_of_cpu(cpu);
    let pair = m
        .allowed_cpus
        .iter()
        .any(|c| c != cpu && m.node_of_cpu(c) == node);
    for p in probes {
        assert_eq!(p["run"], 1, "{p}");
        let mut kinds = vec!["latency_ns", "read_gbps"];
        if pair {
            kinds.extend(["pair_read_gbps", "pair_c2c_ns"]);
        }
        for k in kinds {
            assert!(p[k].as_f64().is_some_and(|v| v > 0.0), "{k}: {p}");
        }
    }
}

/// The default buffers (four times the last-level cache) make a look
/// dearer than a quarter of a 2 s budget: the run does not look, and
/// results.json, the text and the page say why and from which budget it
/// would.
#[test]
fn a_report_without_room_for_three_looks_says_why_and_which_budget_gives_them() {
    let (dir, doc) = c2c_report("looks-none", &["--budget", "2"]);
    let drift = &doc["drift"];
    assert_eq!(drift["probes"].as_array().unwrap().len(), 0, "{drift}");
    let unwatched = drift["unwatched"].as_array().unwrap();
    assert_eq!(unwatched.len(), 1, "{drift}");
    assert_eq!(unwatched[0]["run"], 1);
    let why = unwatched[0]["why"].as_str().unwrap();
    let look_s: f64 = why
        .strip_prefix("a look at the host's speed would take about ")
        .and_then(|w| w.split(" s here").next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{why}"));
    // Three looks past a quarter of 2 s, and the budget named holds them.
    assert!(3.0 * look_s > 0.5, "{why}");
    let budget: f64 = why
        .split("(--budget ")
        .nth(1)
        .and_then(|w| w.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{why}"));
    // 3 x the look over a quarter, rounded up, from the look before it
    // was rounded to a tenth (12 x 0.05 s) for the sentence.
    assert!((budget - 12.0 * look_s).abs() < 1.6 + 1e-9, "{why}");
    assert!(
        why.ends_with(&format!(
            "and the 3 that estimate a drift more than a quarter of the 2 s budget (--budget {budget:.0} or more, or a smaller --size, gives them)"
        )),
        "{why}"
    );
    let note = format!(
        "95% intervals: each measurement's own, from its repetitions, without the host's drift: {why}."
    );
    let text = std::fs::read_to_string(dir.join("report.txt")).unwrap();
    assert!(text.contains(&note), "{text}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains(&note.replace('\'', "&#39;")),
        "no note in report.html"
    );
}
