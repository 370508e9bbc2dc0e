//! `numalab migrate` in the multi-node guests: every method moves every
//! page to the destination (the kernel's page histogram says so), the
//! matrix covers every ordered pair, THP is reported as it is, and a
//! CPU-less node takes and gives pages. Timings are not asserted beyond
//! being finite and positive (TCG).

use crate::common::{nodes_of, one_line_error};
use crate::guest_experiments::{quartet, ring};
use serde_json::Value;

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "migrate_0_3",
        "numalab migrate --from 0 --to 3 --size 8M --reps 3 --json",
    ),
    (
        "migrate_matrix",
        "numalab migrate --matrix --size 1M --reps 1 --json",
    ),
    (
        "migrate_thp",
        "numalab migrate --from 1 --to 2 --size 8M --thp on --reps 2 --json",
    ),
    (
        "migrate_text",
        "numalab migrate --from 2 --to 0 --size 4M --reps 1 --method mbind",
    ),
    ("migrate_err_same", "numalab migrate --from 2 --to 2"),
    ("migrate_err_unknown", "numalab migrate --from 0 --to 4"),
];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[
    (
        "migrate_to_cpuless",
        "numalab migrate --from 0 --to 4 --size 8M --reps 2 --json",
    ),
    (
        "migrate_from_cpuless",
        "numalab migrate --from 4 --to 1 --size 4M --reps 1 --json",
    ),
];

/// Asserts that one method moved all `pages` from `from` to `to`.
fn moved_all(m: &Value, from: u32, to: u32, pages: u64, reps: usize) {
    let what = format!("{} {from}->{to}", m["method"]);
    assert_eq!(m["pages"].as_u64(), Some(pages), "{what}");
    assert_eq!(
        m["placed_pages_by_node"][from.to_string()].as_u64(),
        Some(pages),
        "{what}: all on the source first: {m}"
    );
    assert_eq!(nodes_of(m), vec![(to, pages)], "{what}: {m}");
    assert_eq!(m["pages_moved"].as_u64(), Some(pages), "{what}");
    assert_eq!(m["pages_not_moved"].as_u64(), Some(0), "{what}");
    assert_eq!(m["back_moves_incomplete"].as_u64(), Some(0), "{what}");
    assert_eq!(m["verified"], true, "{what}: {}", m["problems"]);
    assert_eq!(m["problems"].as_array().map(Vec::len), Some(0), "{what}");
    assert_eq!(m["seconds"].as_array().map(Vec::len), Some(reps), "{what}");
    let g = m["gbps"]["median"].as_f64().unwrap_or(f64::NAN);
    assert!(g.is_finite() && g > 0.0, "{what}: GB/s {g}");
    let us = m["us_per_page"]["median"].as_f64().unwrap_or(f64::NAN);
    assert!(us.is_finite() && us > 0.0, "{what}: us/page {us}");
    assert!(m["cpu_seen"].is_u64(), "{what}: {}", m["cpu_seen"]);
}

fn methods(p: &Value) -> &Vec<Value> {
    p["methods"].as_array().expect("methods")
}

#[test]
fn quartet_every_method_moves_every_page_from_0_to_3() {
    let v = quartet().json("migrate_0_3", 0);
    assert_eq!(v["command"], "migrate");
    assert_eq!(v["pages"].as_u64(), Some(2048));
    assert_eq!(v["verified"], true);
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 1);
    assert_eq!(
        (pairs[0]["from"].as_u64(), pairs[0]["to"].as_u64()),
        (Some(0), Some(3))
    );
    let ms = methods(&pairs[0]);
    let names: Vec<&str> = ms.iter().map(|m| m["method"].as_str().unwrap()).collect();
    assert_eq!(names, ["move_pages", "mbind", "migrate_pages"]);
    for m in ms {
        moved_all(m, 0, 3, 2048, 3);
    }
    // move_pages reports per page: none failed for 4 KiB pages.
    assert_eq!(ms[0]["move_failures"].as_u64(), Some(0));
    // Pinned to node 0's first CPU.
    assert_eq!(v["measuring_cpus"]["0"].as_u64(), Some(0));
    for m in ms {
        assert_eq!(m["cpu_seen"].as_u64(), Some(0), "{}", m["method"]);
    }
}

#[test]
fn quartet_matrix_verifies_all_twelve_ordered_pairs() {
    let v = quartet().json("migrate_matrix", 0);
    assert_eq!(v["matrix"], true);
    let pairs = v["pairs"].as_array().unwrap();
    assert_eq!(pairs.len(), 12);
    let mut seen: Vec<(u64, u64)> = pairs
        .iter()
        .map(|p| (p["from"].as_u64().unwrap(), p["to"].as_u64().unwrap()))
        .collect();
    seen.sort();
    let want: Vec<(u64, u64)> = (0..4)
        .flat_map(|a| (0..4).filter(move |&b| b != a).map(move |b| (a, b)))
        .collect();
    assert_eq!(seen, want);
    for p in pairs {
        let (a, b) = (
            p["from"].as_u64().unwrap() as u32,
            p["to"].as_u64().unwrap() as u32,
        );
        assert_eq!(methods(p).len(), 3);
        for m in methods(p) {
            moved_all(m, a, b, 256, 1);
        }
    }
    let mx = v["matrices"].as_array().unwrap();
    assert_eq!(mx.len(), 3);
    for t in mx {
        assert_eq!(t["nodes"], serde_json::json!([0, 1, 2, 3]));
        let rows = t["gbps"].as_array().unwrap();
        for (i, row) in rows.iter().enumerate() {
            for (j, cell) in row.as_array().unwrap().iter().enumerate() {
                if i == j {
                    assert!(cell.is_null(), "diagonal {i}: {cell}");
                } else {
                    assert!(
                        cell.as_f64().is_some_and(|g| g > 0.0),
                        "[{i}][{j}] = {cell}"
                    );
                }
            }
        }
    }
    assert_eq!(v["verified"], true);
}

#[test]
fn quartet_thp_reports_huge_pages_or_why_none() {
    let v = quartet().json("migrate_thp", 0);
    assert_eq!(v["thp"], true);
    let ms = methods(&v["pairs"][0]);
    for m in ms {
        moved_all(m, 1, 2, 2048, 2);
    }
    if let Some(why) = v["thp_unavailable"].as_str() {
        assert!(why.contains("transparent huge pages"), "{why}");
        return;
    }
    // The guest boots with transparent_hugepage=madvise: 8 MiB 2 MiB-aligned
    // with MADV_HUGEPAGE are counted, whatever the kernel made of them.
    assert_eq!(v["thp_system"], "madvise");
    for m in &ms[..2] {
        let placed = m["huge_pages_placed"].as_u64().expect("counted");
        let after = m["huge_pages_after"].as_u64().expect("counted");
        assert!(placed <= 4 && after <= 4, "{m}");
    }
    // The child's buffer is not counted, and says so by null.
    assert!(ms[2]["huge_pages_placed"].is_null());
}

#[test]
fn quartet_text_and_refusals() {
    let s = quartet().step("migrate_text");
    assert_eq!(s.rc, 0, "{}", s.err);
    assert!(s.out.contains("node 2 -> node 0"), "{}", s.out);
    assert!(s.out.contains("1024/1024  yes"), "{}", s.out);
    assert!(s.out.contains("verified: every page"), "{}", s.out);
    one_line_error(
        quartet().step("migrate_err_same"),
        2,
        "--from and --to must differ (both are node 2); valid memory nodes: 0-3",
    );
    one_line_error(
        quartet().step("migrate_err_unknown"),
        2,
        "--to 4 is not a memory node this process may use; valid memory nodes: 0-3",
    );
}

#[test]
fn ring_pages_move_to_and_from_the_cpuless_node() {
    let v = ring().json("migrate_to_cpuless", 0);
    for m in methods(&v["pairs"][0]) {
        moved_all(m, 0, 4, 2048, 2);
    }
    let v = ring().json("migrate_from_cpuless", 0);
    for m in methods(&v["pairs"][0]) {
        moved_all(m, 4, 1, 1024, 1);
    }
    // Node 4 has no CPU: the destination's first CPU measures.
    assert_eq!(v["measuring_cpus"]["4"].as_u64(), Some(1));
}
