//! Placement plans and stripes in the Quartet guest (4 nodes, 2 CPUs
//! each): the plan `numalab profile` wrote for profile_truth proposes
//! interleave for the array the main thread initialised (A) and binding to
//! node 0 for the array bound to node 3 but read from node 0 (C);
//! `run --plan --verify` puts them there (pages from the kernel);
//! `profile --plan` shows C local; `run --mem interleave:0-3@8` and an
//! emulated `weighted:` lay their stripes on a program's big allocation,
//! its break heap and its threads' arenas (crates/numalab-preload/tests/
//! programs/stripes.c asks the kernel where each page is), and no more
//! stripes than half of `vm.max_map_count`; small allocations come from
//! their entry's pool, placed (tests/programs/small_nodes.c).

use crate::common::{parse_json, Guest};
use crate::guest_experiments::quartet_profile as quartet;
use serde_json::Value;
use std::collections::BTreeMap;

/// Steps run in the Quartet guest after the profile steps (the plan is the
/// one `profile_truth` wrote in /tmp/prof).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    ("plan_written", "cat /tmp/prof/plan.json"),
    (
        "plan_run",
        "numalab run --plan /tmp/prof/plan.json --verify --verify-json /tmp/pv.json -- profile_truth 20 >/dev/null; rc=$?; cat /tmp/pv.json; exit $rc",
    ),
    (
        "plan_profile",
        "numalab profile --rate 2000 --plan /tmp/prof/plan.json -o /tmp/pp -- profile_truth 50 >/dev/null; rc=$?; cat /tmp/pp/after/profile.json; exit $rc",
    ),
    (
        "stripes_interleave",
        "numalab run --mem interleave:0-3@8 -- stripes",
    ),
    // A program that calls mremap itself on a striped mapping (one
    // mapping per stripe): grown, shrunk, partly unmapped, every byte kept.
    (
        "stripes_remap",
        "numalab run --mem interleave:0-3@4 -- stripes remap",
    ),
    // madvise(MADV_DONTNEED) on part of a striped mapping, then fork.
    (
        "stripes_advise",
        "numalab run --mem interleave:0-3@4 -- stripes advise",
    ),
    (
        "stripes_weighted",
        "numalab run --mem weighted:0=3,1=1@4 --weighted-impl emulate -- stripes",
    ),
    // Small allocations (size<4096) from a pool interleaved over nodes 1
    // and 2; the program checks what it reads back.
    (
        "plan_small",
        "printf '{\"schema\":\"numalab-plan/1\",\"entries\":[{\"region\":\"size<4096\",\"policy\":\"interleave:1-2\",\"small\":true}]}' > /tmp/ps.json && numalab run --plan /tmp/ps.json --verify --verify-json /tmp/psv.json -- small_nodes 20000 > /tmp/pso.txt; rc=$?; grep -q '^ok nodes 20000$' /tmp/pso.txt || exit 9; cat /tmp/psv.json; exit $rc",
    ),
    // Room for 600 stripes: the big allocation's 513 fit, the break
    // heap's (about 70) and the arenas' (about 100 each: a heap is striped
    // as far as its blocks reach) do not all.
    (
        "stripes_budget",
        "old=$(cat /proc/sys/vm/max_map_count); echo 1200 > /proc/sys/vm/max_map_count; numalab run --mem interleave:0-3@8 -- stripes; rc=$?; echo $old > /proc/sys/vm/max_map_count; exit $rc",
    ),
];

fn json(g: &Guest, step: &str) -> Value {
    let s = g.step(step);
    assert_eq!(s.rc, 0, "step {step}: {}\n{}", s.err, s.out);
    parse_json(&s.out, step)
}

/// The entry for the region of this kind and size (the guest's programs
/// are stripped: sites are calls, `profile_truth+0x17b6`, not lines).
fn entry<'a>(plan: &'a Value, kind: &str, bytes: u64) -> &'a Value {
    plan["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == kind && e["bytes"] == bytes)
        .unwrap_or_else(|| panic!("no entry for the {kind} of {bytes} bytes: {plan}"))
}

/// Arrays A (heap, 24 MiB), C (mmap, 8 MiB) and E (heap, 8 MiB).
const A: (&str, u64) = ("heap", 24 << 20);
const C: (&str, u64) = ("mmap", 8 << 20);
const E: (&str, u64) = ("heap", 8 << 20);

#[test]
fn quartet_plan_proposes_interleave_for_shared_data_and_binding_for_remote_data() {
    let p = json(quartet(), "plan_written");
    assert_eq!(p["schema"], "numalab-plan/1");
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(crate::common::repo_root().join("docs/plan-schema.json")).unwrap(),
    )
    .unwrap();
    let v = jsonschema::draft202012::new(&schema).expect("docs/plan-schema.json is a JSON Schema");
    let errors: Vec<String> = v.iter_errors(&p).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "plan.json breaks docs/plan-schema.json: {errors:?}"
    );
    let a = entry(&p, A.0, A.1);
    assert!(
        a["region"]
            .as_str()
            .unwrap()
            .starts_with("site:profile_truth+0x"),
        "{a}"
    );
    assert_eq!(a["policy"], "interleave:0-3", "{a}");
    assert!(
        a["reason"].as_str().unwrap().starts_with("one-node-shared"),
        "{a}"
    );
    let ex = &a["expected"];
    assert!(ex["remote_share_before"].as_f64().unwrap() > 0.5, "{a}");
    assert!(
        ex["remote_share_after"].as_f64().unwrap() > 0.5,
        "interleave over all four nodes keeps 3/4 remote: {a}"
    );
    let c = entry(&p, C.0, C.1);
    assert_eq!(c["policy"], "bind:0", "{c}");
    assert_eq!(c["kind"], "mmap");
    assert_eq!(c["expected"]["remote_share_before"], 1.0, "{c}");
    // 1 - 1 in floating point: zero within rounding.
    let after = c["expected"]["remote_share_after"].as_f64().unwrap();
    assert!(after.abs() < 1e-9, "{c}");
    let e = entry(&p, E.0, E.1);
    assert_eq!(e["policy"], "bind:3", "{e}");
}

/// The check of the plan's entry for a region of this kind and size.
fn checked<'a>(plan: &Value, check: &'a Value, region: (&str, u64)) -> &'a Value {
    let want = entry(plan, region.0, region.1)["region"].clone();
    check["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["region"] == want)
        .unwrap_or_else(|| panic!("no check of {want}: {check}"))
}

fn nodes(e: &Value) -> BTreeMap<String, u64> {
    e["pages_by_node"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(n, k)| (n.clone(), k.as_u64().unwrap()))
        .collect()
}

#[test]
fn quartet_run_plan_puts_each_region_where_the_plan_says() {
    let plan = json(quartet(), "plan_written");
    let v = json(quartet(), "plan_run");
    let check = &v["plan"];
    let a = checked(&plan, check, A);
    assert_eq!(a["verdict"], "placed", "{a}");
    // 24 MiB made page aligned: 6144 pages, interleaved page by page.
    let an = nodes(a);
    assert_eq!(an.keys().collect::<Vec<_>>(), ["0", "1", "2", "3"], "{a}");
    assert_eq!(an.values().sum::<u64>(), 6144, "{a}");
    for (n, k) in &an {
        assert!(
            (1536 - 8..=1536 + 8).contains(k),
            "node {n}: {k} of A's pages: {a}"
        );
    }
    let c = checked(&plan, check, C);
    assert_eq!(c["verdict"], "placed", "{c}");
    assert_eq!(nodes(c), BTreeMap::from([("0".to_string(), 2048)]), "{c}");
    let e = checked(&plan, check, E);
    assert_eq!(nodes(e), BTreeMap::from([("3".to_string(), 2048)]), "{e}");
    // The program binds C to node 3 itself: that call is skipped.
    assert!(
        check["program_mbinds_skipped"].as_u64().unwrap() >= 1,
        "{check}"
    );
    assert_eq!(check["refused"], 0, "{check}");
}

#[test]
fn quartet_profile_with_the_plan_shows_c_local() {
    let v = json(quartet(), "plan_profile");
    let regions = v["regions"].as_array().unwrap();
    let c = regions
        .iter()
        .find(|r| r["kind"] == C.0 && r["bytes"] == C.1)
        .unwrap_or_else(|| panic!("no region for C: {v}"));
    let n = c["samples"].as_u64().unwrap();
    assert!(n >= 10, "C: only {n} samples: {c}");
    assert!(c["remote_share"].as_f64().unwrap() <= 0.05, "{c}");
    assert_eq!(c["pages_by_node"]["0"], 2048, "{c}");
    assert_eq!(
        v["plan_check"]["entries"].as_array().unwrap().len(),
        3,
        "{v}"
    );
}

/// "NAME pages P nodes N:K,... runs R,..." lines of stripes.c.
fn stripes(g: &Guest, step: &str) -> BTreeMap<String, (BTreeMap<u32, u64>, Vec<u64>)> {
    let s = g.step(step);
    assert_eq!(s.rc, 0, "step {step}: {}\n{}", s.err, s.out);
    assert!(s.out.contains("missing 0"), "{}", s.out);
    s.out
        .lines()
        .filter(|l| l.contains(" pages "))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let hist = w[4]
                .split(',')
                .map(|p| {
                    let (n, k) = p.split_once(':').unwrap();
                    (n.parse().unwrap(), k.parse().unwrap())
                })
                .collect();
            let runs = w[6].split(',').map(|r| r.parse().unwrap()).collect();
            (w[0].to_string(), (hist, runs))
        })
        .collect()
}

/// The 16 MiB block interleaved over nodes 0-3 in stripes of 8 pages from
/// its first whole page: glibc maps it whole and returns it 16 bytes in,
/// as without numalab, so it has 4095 whole pages (127 rounds of 32, then
/// 8, 8, 8 and 7).
fn big_in_runs_of_8((hist, runs): &(BTreeMap<u32, u64>, Vec<u64>)) {
    assert_eq!(
        hist,
        &BTreeMap::from([(0, 1024), (1, 1024), (2, 1024), (3, 1023)])
    );
    let (last, whole) = runs.split_last().unwrap();
    assert!(
        whole.iter().all(|r| *r == 8) && *last == 7,
        "runs of 8 pages, the last 7: {runs:?}"
    );
}

#[test]
fn quartet_interleave_with_stripes_reaches_the_big_allocation_the_heap_and_every_arena() {
    let out = stripes(quartet(), "stripes_interleave");
    big_in_runs_of_8(&out["big"]);
    for name in ["brk", "arena0", "arena1", "arena2", "arena3"] {
        let (hist, runs) = &out[name];
        assert_eq!(hist.len(), 4, "{name}: on every node: {hist:?}");
        let total: u64 = hist.values().sum();
        for (n, k) in hist {
            assert!(
                *k * 8 >= total,
                "{name}: node {n} has {k} of {total} pages: {hist:?}"
            );
        }
        // Stripes of 8 inside the heap: a page holding none of the blocks
        // (malloc's own, stdio's buffer) cuts one, and the ends may.
        let inner = &runs[1..runs.len() - 1];
        assert!(inner.iter().all(|r| *r <= 8), "{name}: {runs:?}");
        let whole = inner.iter().filter(|r| **r == 8).count();
        assert!(whole * 10 >= inner.len() * 9, "{name}: {runs:?}");
    }
}

/// mremap works on one mapping, and stripes make one per stripe: the
/// library makes the range one mapping again for the call and lays the
/// stripes again after it, so the program's own mremap (grow with
/// MREMAP_MAYMOVE, shrink in place) and a munmap inside succeed as without
/// numalab (before: EFAULT), its bytes kept. The first MiB keeps the
/// pages its stripes placed, the rest is striped from the new start: runs
/// of 4 pages over all four nodes.
#[test]
fn quartet_a_programs_own_mremap_of_a_striped_mapping_works() {
    let s = quartet().step("stripes_remap");
    assert_eq!(s.rc, 0, "stripes remap: {}\n{}", s.err, s.out);
    assert!(s.out.contains("remap ok"), "{}", s.out);
    let line = s
        .out
        .lines()
        .find(|l| l.starts_with("remap pages"))
        .unwrap();
    assert_eq!(
        line,
        format!(
            "remap pages 448 nodes 0:112,1:112,2:112,3:112 runs {}",
            ["4"; 112].join(",")
        ),
        "{}",
        s.out
    );
}

/// madvise(MADV_DONTNEED) on a quarter of a striped mapping drops its
/// pages as without numalab (they read as zeros) and they fault back in
/// their stripes; a forked child sees every byte and writes its own copy
/// while the parent's stay.
#[test]
fn quartet_madvise_and_fork_on_a_striped_mapping_behave_as_without_numalab() {
    let s = quartet().step("stripes_advise");
    assert_eq!(s.rc, 0, "stripes advise: {}\n{}", s.err, s.out);
    let lines: Vec<&str> = s.out.lines().collect();
    assert_eq!(
        lines,
        [
            format!(
                "advise pages 256 nodes 0:64,1:64,2:64,3:64 runs {}",
                ["4"; 64].join(",")
            )
            .as_str(),
            "advise ok",
            "fork ok"
        ],
        "{}",
        s.err
    );
}

#[test]
fn quartet_weighted_stripes_are_emulated_with_their_weights() {
    let out = stripes(quartet(), "stripes_weighted");
    let (hist, runs) = &out["big"];
    // 4095 whole pages: 255 rounds of 16, then 12 on node 0 and 3 on 1.
    assert_eq!(
        hist,
        &BTreeMap::from([(0, 3072), (1, 1023)]),
        "3:1 in runs of 12 and 4"
    );
    let pattern: Vec<u64> = runs.iter().take(4).copied().collect();
    assert_eq!(pattern, [12, 4, 12, 4], "{runs:?}");
    let (arena, _) = &out["arena2"];
    assert_eq!(arena.keys().collect::<Vec<_>>(), [&0, &1], "{arena:?}");
}

#[test]
fn quartet_stripes_stop_at_half_of_max_map_count_and_the_rest_is_interleaved() {
    let g = quartet();
    let out = stripes(g, "stripes_budget");
    let err = &g.step("stripes_budget").err;
    assert!(
        err.contains("at most 600 stripes are laid over the run (half of vm.max_map_count 1200"),
        "{err}"
    );
    // Laid before the budget ran out: the big allocation in runs of 8.
    big_in_runs_of_8(&out["big"]);
    // Past it: arenas interleaved page by page, still over every node, and
    // every thread had its arena (the program's own mappings never ran out).
    let mut folded = 0;
    for name in ["arena0", "arena1", "arena2", "arena3"] {
        let (hist, runs) = &out[name];
        assert_eq!(hist.len(), 4, "{name}: on every node: {hist:?}");
        let inner = &runs[1..runs.len() - 1];
        if inner.iter().filter(|r| **r == 1).count() * 10 >= inner.len() * 9 {
            folded += 1;
        }
    }
    assert!(
        folded >= 3,
        "arenas interleaved page by page: {folded} of 4: {out:?}"
    );
}

#[test]
fn quartet_small_allocations_come_from_a_pool_interleaved_over_their_nodes() {
    let v = json(quartet(), "plan_small");
    let e = checked_entry(&v["plan"], "size<4096");
    assert_eq!(e["verdict"], "placed", "{e}");
    // 20000 nodes of 64 bytes in 313 pages, the calloc'd and the
    // program's other small blocks in a few more: all on nodes 1 and 2,
    // every other page (each slab of another class, partly touched, may
    // tip the count by one: 158 and 156 measured).
    // (-1: the pool's pages never touched.)
    let by_node: BTreeMap<String, u64> = nodes(e)
        .into_iter()
        .filter(|(n, _)| !n.starts_with('-'))
        .collect();
    assert_eq!(by_node.keys().collect::<Vec<_>>(), ["1", "2"], "{e}");
    let (one, two) = (by_node["1"], by_node["2"]);
    assert!((313..=330).contains(&(one + two)), "{e}");
    assert!(one.abs_diff(two) <= 4, "{e}");
    assert_eq!(v["plan"]["small_spilled"], 0);
}

/// The check of the entry whose region is `region`.
fn checked_entry<'a>(check: &'a Value, region: &str) -> &'a Value {
    check["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["region"] == region)
        .unwrap_or_else(|| panic!("no check of {region}: {check}"))
}
