//! The warning about measured data small enough to fit in the last-level
//! cache, as `numalab bench bandwidth` prints it (the same helper warns in
//! `matrix` and `policies`).

use crate::common;

use common::{json, last_level_cache_bytes, stdout, turn};

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
            "--budget-each",
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
        "--budget-each",
        "0.1",
        "--min-reps",
        "2",
    ]);
    assert!(out.contains(&format!("warning: {expected}")), "{out}");
    // At the rule's edge: the three arrays together just reach 4x the
    // cache (each a third of it, rounded up to whole pages). Each array 4x
    // the cache, as before, made 5.6 GiB of first touches on a 480 MiB L3
    // (a minute of the fast lane) to test the same rule less sharply.
    let per_array = (4 * llc).div_ceil(3).div_ceil(4096) * 4096;
    let big = format!("{}K", per_array / 1024);
    let v = bench(&big);
    assert!(
        !v["warnings"].to_string().contains("last-level cache"),
        "{}",
        v["warnings"]
    );
}
