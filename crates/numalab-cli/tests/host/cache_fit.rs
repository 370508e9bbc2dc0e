//! The warning about measured data small enough to fit in the last-level
//! cache, as `numalab bench bandwidth` prints it (the same helper warns in
//! `matrix` and `policies`).

use crate::common;

use common::{json, stdout, turn};

/// The largest last-level (data or unified) cache of this machine, from
/// `numalab topology --json`; `None` when hwloc reports no cache.
fn last_level_cache_bytes() -> Option<u64> {
    let v = json(&["topology", "--json"]);
    let caches: Vec<(u64, u64)> = v["caches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] != "instruction")
        .map(|c| {
            (
                c["level"].as_u64().unwrap(),
                c["size_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let top = caches.iter().map(|c| c.0).max()?;
    caches.iter().filter(|c| c.0 == top).map(|c| c.1).max()
}

#[test]
fn bench_bandwidth_warns_below_four_times_the_cache_and_not_above() {
    let _turn = turn();
    let Some(llc) = last_level_cache_bytes() else {
        numalab_testkit::skip("hwloc reports no cache on this machine");
        return;
    };
    let bench = |size: &str| {
        json(&[
            "bench",
            "bandwidth",
            "--json",
            "--kernel",
            "triad",
            "--threads",
            "1",
            "--size",
            size,
            "--budget",
            "0.1",
            "--min-reps",
            "2",
        ])
    };
    let v = bench("64K");
    let expected = format!(
        "data (all arrays of all threads) 192 KiB is below 4× the {} last-level cache: figures may come from cache, not memory",
        numalab::text::format::bytes(llc)
    );
    let warnings: Vec<&str> = v["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .collect();
    assert!(warnings.contains(&expected.as_str()), "{warnings:?}");
    // The text says it too.
    let out = stdout(&[
        "bench",
        "bandwidth",
        "--kernel",
        "triad",
        "--threads",
        "1",
        "--size",
        "64K",
        "--budget",
        "0.1",
        "--min-reps",
        "2",
    ]);
    assert!(out.contains(&format!("warning: {expected}")), "{out}");
    // Each array 4x the cache: three of them are well past it.
    let big = format!("{}K", 4 * llc / 1024);
    let v = bench(&big);
    assert!(
        !v["warnings"].to_string().contains("last-level cache"),
        "{}",
        v["warnings"]
    );
}
