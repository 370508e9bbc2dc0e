//! `numalab profile` on this machine: a program whose truth is known by
//! construction (crates/numalab-preload/tests/programs/hazards.c) run with
//! the preload library; the regions, samples, pages and threads it finds,
//! the command's exit status passed on, and bad input refused.
//!
//! The library is built by `cargo test --workspace` (the README's test
//! command) beside the numalab binary.

use crate::common;

use common::{
    compile_c, fails, numalab, parse_json, preload_library, scratch, written_profile, Run,
};
use serde_json::Value;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The hazards program of the preload library's tests.
fn program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile_c("crates/numalab-preload/tests/programs/hazards.c", "hazards"))
}

fn library_built() {
    preload_library();
}

#[test]
fn an_array_read_by_two_threads_is_one_region_with_its_site_pages_and_threads() {
    library_built();
    let dir = scratch("profile-sample");
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("p");
    let prog = program().to_str().unwrap();
    let t0 = std::time::Instant::now();
    let r = numalab(&[
        "profile",
        "--json",
        "--rate",
        "2000",
        "-o",
        out.to_str().unwrap(),
        "--",
        prog,
        "sample",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    // stdout is the program's alone; the profile goes to stderr (as JSON
    // with --json) and to DIR.
    let (program_out, v) = written_profile(&r, &out);
    assert!(program_out.contains("sums right"), "{program_out}");
    assert!(
        r.err.contains("\n{\n  \"command\": \"profile\"") || r.err.starts_with("{\n"),
        "--json prints the profile on stderr: {}",
        r.err
    );
    assert_eq!(v["schema_version"], "2.9");
    // The command's own time: within numalab's, which adds its start and
    // the analysis.
    let ran = v["ran_for_s"].as_f64().unwrap();
    assert!(ran > 0.0 && ran < t0.elapsed().as_secs_f64(), "{ran}");
    assert_eq!(v["rate"], 2000);
    // A fixed rate: no target, the rate never moved, the cost measured.
    let c = &v["cost"];
    assert_eq!(c["target_percent"], serde_json::Value::Null, "{c}");
    assert_eq!(
        (c["min_rate"].clone(), c["max_rate"].clone()),
        (2000.into(), 2000.into())
    );
    assert!(c["kernel_us_per_fault"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["spent_ms"].as_f64().unwrap() > 0.0, "{c}");
    // What it got: never more than asked (the pages owed follow the
    // clock), and two threads reading 8192 pages for a second touch
    // enough of them to arm hundreds a second even on a busy host.
    let armed = c["armed_per_s"].as_f64().unwrap();
    assert!((200.0..=2000.0 * 1.05).contains(&armed), "{c}");
    let text = std::fs::read_to_string(out.join("profile.txt")).unwrap();
    assert!(
        text.contains(&format!("; {armed:.0} pages armed a second")),
        "{text}"
    );
    // Two readers that never wait for each other (the main thread joins
    // them once): no thread in step, whatever the host's load.
    let in_step = c["in_step"].as_f64().unwrap();
    assert!((1.0..1.05).contains(&in_step), "{c}");
    assert!(!text.contains("threads in step"), "{text}");
    assert_eq!(v["min_bytes"], 65536);
    let regions = v["regions"].as_array().unwrap();
    let a = &regions[0];
    assert_eq!(a["kind"], "heap");
    assert_eq!(a["bytes"], 33554432);
    assert_eq!(a["allocations"], 1);
    let site = a["site"].as_str().unwrap();
    assert!(site.starts_with("mode_sample hazards.c:"), "{site}");
    let samples = a["samples"].as_u64().unwrap();
    assert!(samples > 200, "{samples} samples in about 1 s at 2000/s");
    // The readers only read; the main thread wrote the array first, and a
    // sample may land in that loop (CI once saw 1 of 2317): such a sample
    // is a write, and the main thread's.
    let pid = v["pid"].as_u64().unwrap().to_string();
    let main_samples = a["threads"].get(&pid).map_or(0, |n| n.as_u64().unwrap());
    let writes = a["writes"].as_u64().unwrap();
    assert!(
        writes <= main_samples,
        "{writes} writes, {main_samples} samples of the main thread"
    );
    assert_eq!(a["reads"].as_u64().unwrap() + writes, samples);
    // Every page of the array (but the one malloc's header shares) found
    // on the machine's nodes; every access local on one node.
    let pages: u64 = a["pages_by_node"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(n, p)| {
            assert!(n.parse::<i32>().unwrap() >= 0, "{n}");
            p.as_u64().unwrap()
        })
        .sum();
    assert_eq!(pages, 8191);
    // Snapshots while it ran (the first at 250 ms, the program reads for
    // about a second): the array was written before, so every page is
    // present in each, on the machine's nodes.
    let snaps = a["pages_over_time"].as_array().unwrap();
    assert!(!snaps.is_empty(), "{a}");
    let mut last_t = 0.0;
    for snap in snaps {
        let t = snap["at_s"].as_f64().unwrap();
        assert!(t >= 0.2 && t >= last_t, "{snap}");
        last_t = t;
        let present: u64 = snap["pages_by_node"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(n, _)| n.parse::<i32>().unwrap() >= 0)
            .map(|(_, p)| p.as_u64().unwrap())
            .sum();
        assert_eq!(present, 8191, "{snap}");
    }
    let nodes = numalab::Machine::live().unwrap().nodes.len();
    if nodes == 1 {
        assert_eq!(a["remote_share"], 0.0);
        assert_eq!(a["accesses"]["0"]["0"], samples);
    }
    // Its page map: every page the array touches (malloc's header puts it
    // off a page boundary), in at most 2048 cells, every sample in them.
    let map = &a["page_map"];
    let address = map["address"].as_u64().unwrap();
    assert_eq!(map["address"], a["first_address"]);
    let pages = map["pages"].as_u64().unwrap();
    assert_eq!(pages, (address % 4096 + 33554432).div_ceil(4096), "{map}");
    let per_cell = map["pages_per_cell"].as_u64().unwrap();
    assert_eq!(per_cell, pages.div_ceil(2048));
    assert_eq!(map["samples"], samples);
    let runs = map["runs"].as_array().unwrap();
    let sum = |key: &str| -> u64 { runs.iter().map(|r| r[key].as_u64().unwrap_or(0)).sum() };
    assert_eq!(sum("cells"), pages.div_ceil(per_cell));
    assert_eq!(sum("samples"), samples);
    // A sampled page's node is its sample's: always known.
    assert!(runs
        .iter()
        .filter(|r| r.get("from").is_some())
        .all(|r| r["node"].as_i64().is_some_and(|n| n >= 0)));
    if nodes == 1 {
        // All present pages on node 0 at exit: that places every page.
        assert!(runs.iter().all(|r| r["node"] == 0), "{map}");
    }
    // Two reader threads, each named with its samples (and the main thread
    // only where a sample caught it writing).
    let threads = a["threads"].as_object().unwrap();
    let readers = threads.keys().filter(|t| **t != pid).count();
    assert_eq!(readers, 2, "{threads:?}");
    assert_eq!(
        threads.values().map(|n| n.as_u64().unwrap()).sum::<u64>(),
        samples
    );
    assert_eq!(
        v["samples"].as_u64().unwrap(),
        samples + v["unattributed"].as_u64().unwrap()
    );
    // Unpinned readers: each may run on every CPU this process may.
    let cpus = std::thread::available_parallelism().unwrap().get() as u64;
    for t in v["threads"].as_array().unwrap() {
        assert_eq!(t["allowed_cpus"], cpus, "{t}");
    }
    // The files beside it: the same JSON, and the text.
    let saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    assert_eq!(saved, v);
    let text = std::fs::read_to_string(out.join("profile.txt")).unwrap();
    assert!(
        text.contains("  1. heap 32 MiB in 1 allocation at mode_sample hazards.c:"),
        "{text}"
    );
    // And the page: self-contained (no script, nothing to fetch), with
    // the array's page map first.
    let html = std::fs::read_to_string(out.join("profile.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(html.contains(&format!("<title>numalab profile: {prog}</title>")));
    assert!(html.contains("<svg"));
    assert!(!html.contains("<script") && !html.contains(" src="));
    let at = html
        .find("<div id=\"page-map-1\"")
        .expect("page map of region 1");
    let map_html = &html[at..at + html[at..].find("</div>").unwrap()];
    assert!(
        map_html.contains("<h3>1. mode_sample hazards.c:"),
        "{map_html}"
    );
    assert!(map_html.contains("id=\"fig-page-map-1\""), "{map_html}");
    assert!(
        map_html.contains(&format!(
            "its allocation at {address:#x}: {pages} pages of 4 KiB, one cell per {per_cell} pages, {samples} samples."
        )),
        "{map_html}"
    );
    // One timeline row per thread a sampled fault fell in (both readers
    // at least); the others are counted in a note.
    let at = html.find("id=\"sec-threads\"").unwrap();
    let timelines = &html[at..at + html[at..].find("</section>").unwrap()];
    let threads = v["threads"].as_array().unwrap();
    let sampled = threads
        .iter()
        .filter(|t| !t["timeline"].as_array().unwrap().is_empty())
        .count();
    assert!(sampled >= 2, "{threads:?}");
    assert_eq!(
        timelines.matches("class=\"tick lane-label\"").count(),
        sampled,
        "{timelines}"
    );
    match threads.len() - sampled {
        0 => assert!(
            !timelines.contains("without a sampled fault"),
            "{timelines}"
        ),
        1 => assert!(
            timelines.contains("1 thread without a sampled fault has no row."),
            "{timelines}"
        ),
        n => assert!(
            timelines.contains(&format!("{n} threads without a sampled fault have no row.")),
            "{timelines}"
        ),
    }
}

#[test]
fn the_adaptive_rate_falls_to_meet_a_small_overhead_target() {
    library_built();
    let dir = scratch("profile-adaptive");
    let _ = std::fs::remove_dir_all(&dir);
    let r = numalab(&[
        "profile",
        "--json",
        "--overhead",
        "0.1",
        "-o",
        dir.to_str().unwrap(),
        "--",
        program().to_str().unwrap(),
        "sample",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, &dir);
    assert!(program_out.contains("sums right"), "{program_out}");
    assert_eq!(v["rate"], 0, "adaptive");
    let c = &v["cost"];
    assert_eq!(c["target_percent"], 0.1, "{c}");
    // It starts at 500 pages a second; a sample costs microseconds, so
    // 0.1% of two threads' CPU time is far fewer: the rate came down.
    let (lo, hi) = (
        c["min_rate"].as_u64().unwrap(),
        c["max_rate"].as_u64().unwrap(),
    );
    assert_eq!(hi, 500, "{c}");
    assert!((20..250).contains(&lo), "{c}");
    assert!(c["estimated_percent"].as_f64().is_some(), "{c}");
    let text = std::fs::read_to_string(dir.join("profile.txt")).unwrap();
    // The first line names the command and how long it ran, in ms below
    // a second, as the JSON says.
    let ran = v["ran_for_s"].as_f64().unwrap();
    let said = if ran < 1.0 {
        format!("(ran {:.0} ms)", ran * 1e3)
    } else {
        format!("(ran {ran:.2} s)")
    };
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with("profile of: ") && first.ends_with(&format!(" sample {said}")),
        "{first}"
    );
    assert!(
        text.contains("sampling: adaptive to 0.1% of the program's CPU time, "),
        "{text}"
    );
}

/// `numalab profile --json -o DIR -- hazards barriers ROUNDS`: the word
/// counter's part of the profile and the cost.
fn profile_barriers(
    dir: &Path,
    rounds: &str,
    options: &[&str],
) -> (serde_json::Value, serde_json::Value) {
    let v = profile_barriers_whole(dir, rounds, options);
    (v["word_counting"].clone(), v["cost"].clone())
}

/// [`profile_barriers`]'s whole profile.
fn profile_barriers_whole(dir: &Path, rounds: &str, options: &[&str]) -> serde_json::Value {
    library_built();
    let _ = std::fs::remove_dir_all(dir);
    let mut args = vec!["profile", "--json"];
    args.extend(options);
    args.extend([
        "-o",
        dir.to_str().unwrap(),
        "--",
        program().to_str().unwrap(),
        "barriers",
        rounds,
    ]);
    let r = numalab(&args);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, dir);
    assert!(
        program_out.contains(&format!("barrier rounds {rounds}, sums right")),
        "{program_out}"
    );
    v
}

#[test]
fn a_program_that_blocks_often_pays_for_its_watched_switches_in_the_cost() {
    // Two threads meeting at a barrier 40,000 times: on this VM each
    // switch of a thread whose watchpoints are armed costs microseconds
    // more, which made such a loop run 1.35x under the default profile
    // while the library counted 1.3%. The switches of watched windows are
    // counted, their cost measured on the program's own windows (watched
    // against skipped, once each kind has 100 switches and 20 ms of CPU
    // time), charged, and kept to the target with the rest of word
    // counting. --overhead 2: the duty starts at 0, so the first windows
    // watch (at the default it starts at 2, and on a loaded host the
    // library's fixed costs took 1.2-2.6% of this program's little CPU
    // time, and 1 to 4 windows watched in a run). CI once saw 2 windows
    // and 59 switches even at --overhead 2: the main thread's 16,384
    // first touches of the array, charged 12-20 ms with its window armed,
    // had taken word counting's share; the mode now has mmap populate
    // the array.
    let (w, c) = profile_barriers(&scratch("profile-switches"), "40000", &["--overhead", "2"]);
    assert_eq!(w["unavailable"], Value::Null, "{w}");
    // About one switch a thread a round: those of watched windows alone
    // are thousands, whatever share of the windows the duty left.
    let switches = w["switches"].as_u64().unwrap();
    assert!(switches > 500, "{w}");
    assert!(switches < 2 * 40_000 + 5_000, "{w}");
    // The cost is measured, with the system time of a switch in skipped
    // windows it is measured against.
    assert_charged(&w, &c, "switches", "switch", 1000.0);
    let skipped = w["us_sys_per_switch_skipped"].as_f64().unwrap();
    assert!(skipped > 0.0 && skipped < 1000.0, "{w}");
    // 50 rounds: too little CPU time in windows to compare (each thread
    // runs a few ms): not measured, nothing charged, and the switches
    // still counted. --overhead 2: word counting's duty starts at 0, so
    // each thread's first window watches (at the default it starts at 2,
    // and a run this short may watch none).
    let (w, _) = profile_barriers(&scratch("profile-few-switches"), "50", &["--overhead", "2"]);
    assert!(w["switches"].as_u64().unwrap() < 500, "{w}");
    assert_eq!(w["us_per_switch"], Value::Null, "{w}");
    assert_eq!(w["us_sys_per_switch_skipped"], Value::Null, "{w}");
    assert_eq!(w["switches_ms"], 0.0, "{w}");
    // The profile says why: a side short of 100 switches or 20 ms.
    let short =
        |s: &Value| s["switches"].as_u64().unwrap() < 100 || s["cpu_ms"].as_f64().unwrap() < 20.0;
    let sides = &w["switch_windows"];
    assert!(short(&sides["watched"]) || short(&sides["skipped"]), "{w}");
    // Its faults (its threads' and the library's own first touches of
    // its tables) are counted; a run this short usually ends before the
    // sampler measures their cost, and then nothing is charged for them.
    assert!(w["faults"].as_u64().unwrap() > 0, "{w}");
    if w["us_per_fault"].is_null() {
        assert_eq!(w["faults_ms"], 0.0, "{w}");
    }
}

#[test]
fn the_switch_price_is_its_windows_arithmetic_and_they_lie_within_the_run() {
    // What a watched switch costs more is the system time a switch took in
    // the program's watched windows less what it took in its skipped
    // ones. The profile says what that rests on (`switch_windows`); here
    // the price is checked against it, and it against the whole run's own
    // usage (wait4's rusage). Whether the price is right, against whole
    // runs with word counting off and on, is a timing comparison:
    // bench/switch-price.sh (this host's CPUs halt or not as the load
    // beside them changes, and whole runs' system time per switch spread
    // from 4 to 42 µs a run with two busy loops beside).
    // --overhead 99: every window watched once the baseline is made. CI
    // once found 20,000 rounds unpriced (15 windows watched, its skipped
    // ones under 20 ms of CPU time): a thread's last window now counts.
    // 60,000 rounds: on a faster host 20,000 ran about 0.5 s and, with two
    // busy loops beside, ended before the skipped windows had 20 ms of
    // CPU time in 4 runs of 6 (clean clone cc114 once).
    let dir = scratch("profile-switch-windows");
    let v = profile_barriers_whole(&dir, "60000", &["--rate", "20", "--overhead", "99"]);
    let w = &v["word_counting"];
    let sides = &w["switch_windows"];
    let side = |name: &str| {
        let s = &sides[name];
        (
            s["windows"].as_u64().unwrap(),
            s["switches"].as_u64().unwrap(),
            s["sys_ms"].as_f64().unwrap(),
            s["cpu_ms"].as_f64().unwrap(),
        )
    };
    let (watched, skipped) = (side("watched"), side("skipped"));
    // Each side has what the estimate waits for: 100 switches and 20 ms
    // of CPU time, in windows that blocked at least 8 times each.
    for (windows, switches, sys_ms, cpu_ms) in [watched, skipped] {
        assert!(windows >= 1 && switches >= 100 && cpu_ms >= 20.0, "{sides}");
        assert!(switches >= 8 * windows, "{sides}");
        // A 4 ms tick aside: system time is apportioned by ticks, CPU
        // time read from the clock (426.307 against 426.237 ms once).
        assert!(sys_ms <= cpu_ms + 4.0, "{sides}");
    }
    let price = w["us_per_switch"]
        .as_f64()
        .unwrap_or_else(|| panic!("not priced in 20,000 rounds: {w}"));
    let per_switch =
        |(_, switches, sys_ms, _): (u64, u64, f64, f64)| sys_ms * 1e3 / switches as f64;
    let baseline = per_switch(skipped);
    assert!(
        (w["us_sys_per_switch_skipped"].as_f64().unwrap() - baseline).abs() < 0.01,
        "{w}"
    );
    assert!(
        (price - (per_switch(watched) - baseline).max(0.0)).abs() < 0.01,
        "{w}"
    );
    // Every watched switch is charged; those of windows that blocked
    // rarely are among them, not among the sides' switches.
    assert!(w["switches"].as_u64().unwrap() >= watched.1, "{w}");
    // The sides are parts of the run: no more switches, system time (the
    // watched side's is net, so at most its gross) or CPU time than the
    // whole process had, a 4 ms tick of system time aside (the kernel
    // apportions a thread's user and system time by ticks).
    let u = &v["counters"]["usage"];
    let switches =
        u["voluntary_switches"].as_u64().unwrap() + u["involuntary_switches"].as_u64().unwrap();
    assert!(watched.1 + skipped.1 <= switches, "{sides} {u}");
    let (sys_ms, user_ms) = (
        u["system_ns"].as_f64().unwrap() / 1e6,
        u["user_ns"].as_f64().unwrap() / 1e6,
    );
    assert!(
        skipped.2 + watched.2.max(0.0) <= sys_ms + 4.0,
        "{sides} {u}"
    );
    assert!(
        skipped.3 + watched.3 <= sys_ms + user_ms + 4.0,
        "{sides} {u}"
    );
}

#[test]
fn a_program_that_touches_new_memory_pays_for_its_watched_faults_in_the_cost() {
    // The truth program first-touches 60 MB: thousands of page faults in
    // windows that watch, each about 1 µs dearer on this VM with the
    // debug registers armed (1.6 µs unarmed); a 0.04 s run paid 6-8 ms of
    // CPU time more with word counting on, which nothing counted. The
    // watched faults are counted, their cost measured by the sampler
    // thread once they pass 1000, and charged with the rest of word
    // counting. 100 passes: the program runs on past the windows that
    // saw the faults, so that a tick of the sampler's comes after them.
    // --overhead 2: word counting's duty starts at 0 (every window), so
    // the first touches are watched; at the default it starts at 2, and
    // a quarter of them, fewer than 1000, were.
    let dir = scratch("profile-faults");
    let (_, v) = profile_truth_passes(&dir, &["--overhead", "2"], "100");
    let w = &v["word_counting"];
    let c = &v["cost"];
    assert_eq!(w["unavailable"], Value::Null, "{w}");
    // The workers alone first-touch 2048 pages of B and the last one 1280
    // more (its static array and stack buffer), in windows that watch.
    let faults = w["faults"].as_u64().unwrap();
    assert!(faults > 1000, "{w}");
    assert!(faults < 40_000, "{w}");
    assert_charged(w, c, "faults", "fault", 100.0);
}

/// A word-counting surcharge (`events`: "switches" or "faults", `one` the
/// singular) of a profile
/// whose watched events were enough to measure it: its cost measured
/// (below `max_us`; 0 only where armed registers cost nothing
/// measurable, and then nothing is charged), every event charged at most
/// at that cost (less where an event reached its cap and was off), those
/// counted before the measurement too, and within what the cost record
/// says sampling spent.
fn assert_charged(w: &Value, c: &Value, events: &str, one: &str, max_us: f64) {
    let n = w[events].as_u64().unwrap();
    let us = w[format!("us_per_{one}")]
        .as_f64()
        .unwrap_or_else(|| panic!("cost measured after {n} {events}: {w}"));
    assert!((0.0..max_us).contains(&us), "{w}");
    let charged = w[format!("{events}_ms")].as_f64().unwrap();
    if us > 0.0 {
        assert!(charged > 0.0, "{w}");
        assert!(charged <= n as f64 * us / 1e3 * 1.001 + 1e-6, "{w}");
        assert!(c["spent_ms"].as_f64().unwrap() >= charged, "{c} {w}");
    } else {
        assert_eq!(charged, 0.0, "{w}");
    }
}

#[test]
fn every_created_thread_has_its_number_even_without_a_page_sample() {
    // 50 barrier rounds: the two threads run a few ms and rarely meet an
    // armed page; their numbers come from the stack record each writes
    // as it starts (before, only a page sample's thread record said it,
    // and both showed "-" here in 3 of 3 runs).
    let dir = scratch("profile-thread-numbers");
    let v = profile_barriers_whole(&dir, "50", &[]);
    let threads = v["threads"].as_array().unwrap();
    let mut ordinals: Vec<u64> = threads
        .iter()
        .filter_map(|t| t["ordinal"].as_u64())
        .collect();
    ordinals.sort_unstable();
    assert!(
        ordinals.ends_with(&[1, 2]),
        "threads #1 and #2 numbered: {}",
        v["threads"]
    );
    let text = std::fs::read_to_string(dir.join("profile.txt")).unwrap();
    for n in ["#1", "#2"] {
        assert!(
            text.lines().any(|l| l.split_whitespace().nth(1) == Some(n)),
            "{n} in the thread table: {text}"
        );
    }
}

/// `numalab profile --json OPTIONS -o DIR -- profile_truth 2`: the
/// program's own output (its sums right) and the profile.
fn profile_truth(dir: &Path, options: &[&str]) -> (String, serde_json::Value) {
    profile_truth_passes(dir, options, "2")
}

/// [`profile_truth`] with the program's passes over its arrays.
fn profile_truth_passes(dir: &Path, options: &[&str], passes: &str) -> (String, serde_json::Value) {
    library_built();
    // Compiled once: a test compiling it while another runs it would see
    // "Permission denied" (a file being written cannot be executed).
    let prog = common::profile_truth_program();
    let _ = std::fs::remove_dir_all(dir);
    let mut args = vec!["profile", "--json"];
    args.extend(options);
    args.extend([
        "-o",
        dir.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        passes,
    ]);
    let r = numalab(&args);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, dir);
    assert!(program_out.contains("wrong sums 0"), "{program_out}");
    (program_out, v)
}

/// `--refine auto` watches the words of the line both counter threads
/// write (struct D of the truth program): each word by its own thread,
/// every increment a read and a write; on one node that is no false
/// sharing, and nothing else of the line is touched. (A window can find
/// one writer idle: a watched thread traps on every increment and falls
/// behind, and the other waits for it at the program's barrier; the line
/// is watched in several windows.)
#[test]
fn refinement_watches_the_counters_line_word_by_word() {
    let dir = scratch("profile-refine");
    let (program_out, v) = profile_truth_passes(
        &dir,
        &["--rate", "2000", "--refine", "auto", "--refine-time", "2"],
        "2500",
    );
    let d = program_out
        .lines()
        .find_map(|l| l.strip_prefix("D 0x"))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .expect("the program prints D's address");
    let r = &v["refinement"];
    assert!(r["unavailable"].is_null(), "{r}");
    let windows = r["word_windows"].as_u64().unwrap();
    assert!(windows >= 10, "{windows} windows");
    // The budget of 1 s, give or take a sampler tick a window.
    let ms = r["watched_ms"].as_f64().unwrap();
    assert!(
        (1000.0..1000.0 + 25.0 * windows as f64).contains(&ms),
        "{ms} ms"
    );
    assert!(r["us_per_hit"].as_f64().unwrap() > 0.0, "{r}");
    let line = r["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["address"] == d)
        .unwrap_or_else(|| panic!("D's line {d:#x} was not watched: {r}"));
    let region = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["first_address"] == d)
        .unwrap();
    assert_eq!(
        (&line["site"], &line["offset"]),
        (&region["site"], &0.into())
    );
    assert_eq!(line["page_node"], 0);
    let words = line["words"].as_array().unwrap();
    let offsets: Vec<u64> = words
        .iter()
        .map(|w| w["offset"].as_u64().unwrap())
        .collect();
    assert_eq!(offsets, [0, 8], "only the two counters are touched: {line}");
    let mut writers = Vec::new();
    for w in words {
        let writes = w["writes"]["0"].as_u64().unwrap();
        let reads = w["reads"]["0"].as_u64().unwrap();
        assert!(writes > 0, "{w}");
        // An increment is a load and a store; the two watches of a word
        // start a moment apart, and on a loaded host the thread that sets
        // them can be preempted between the two (seen: 1346 reads, 1556
        // writes in a 152 ms window). Counting one kind twice, or not at
        // all, still fails.
        let diff = (writes as f64 - reads as f64).abs();
        assert!(
            diff <= 0.25 * writes as f64 + 4.0,
            "reads {reads} writes {writes}: {w}"
        );
        let threads = w["threads"].as_array().unwrap();
        assert_eq!(threads.len(), 1, "one thread writes each counter: {w}");
        writers.push(threads[0].clone());
    }
    assert_ne!(writers[0], writers[1], "two threads, one counter each");
    assert_eq!(line["written_from"], serde_json::json!([0]));
    assert_eq!(line["false_sharing"], false);
    assert_eq!(line["shared_words"], serde_json::json!([]));
    let kinds: Vec<&Value> = v["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| &d["kind"])
        .collect();
    assert!(!kinds.contains(&&Value::from("false-sharing")), "{kinds:?}");
    assert!(v["warnings"].as_array().unwrap().iter().any(|w| w
        .as_str()
        .unwrap()
        .starts_with("--refine armed a quarter of the pages region by region")));
    // The text says it too.
    let text = std::fs::read_to_string(dir.join("profile.txt")).unwrap();
    assert!(
        text.contains(&format!("  line {d:#x} (offset 0 of ")),
        "{text}"
    );
    assert!(
        text.contains("refinement (hardware watchpoints on 8-byte words):"),
        "{text}"
    );
}

/// `--machine` prices each region's accesses with a measured latency
/// matrix: on this one-node machine every access is local, at the
/// matrix's 87.5 ns.
/// The line of the truth program's source that holds `text`.
fn truth_line(text: &str) -> usize {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../numalab-preload/tests/programs/profile_truth.c"),
    )
    .unwrap();
    1 + src.lines().position(|l| l.contains(text)).unwrap()
}

/// A `static:` term that names no data symbol of the program or its
/// libraries is refused before the program runs (as an unknown `site:` and
/// a plan's `static:` entry are), naming the closest symbols; one that
/// names a symbol is not.
#[test]
fn unknown_static_symbols_are_refused_before_the_program_runs() {
    let dir = scratch("profile-static-nosuch");
    let truth = common::profile_truth_program();
    for (terms, closest) in [
        ("static:no_such_table,static:static_table", ""),
        ("static:static_tabel", " (closest: static_table"),
    ] {
        let out = dir.join("p");
        let r = numalab(&[
            "profile",
            "--regions",
            terms,
            "-o",
            out.to_str().unwrap(),
            "--",
            truth.to_str().unwrap(),
            "1",
        ]);
        assert_eq!(r.rc, 2, "{terms}: {}", r.err);
        let bad = terms.split(',').next().unwrap();
        assert!(
            r.err.starts_with(&format!(
                "numalab: --regions {bad} names no data symbol in {} or the libraries it loads at start{closest}",
                truth.display()
            )),
            "{terms}: {}",
            r.err
        );
        assert_eq!(r.err.lines().count(), 1, "{terms}: {}", r.err);
        assert!(!out.exists(), "{terms}: the program ran");
    }
    let out = dir.join("q");
    let r = numalab(&[
        "profile",
        "--regions",
        "static:static_table",
        "-o",
        out.to_str().unwrap(),
        "--",
        truth.to_str().unwrap(),
        "1",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
}

/// Terms joined by `&` are all required: heap blocks over 10 MiB (A, B;
/// not E, 8 MiB, nor the mapping C, 24 and 16 MiB against 8), mappings under
/// 1 MiB (none), the heap block of D's line, the static table if over
/// 1 MiB (it is 4), stacks over 100 MiB (none).
#[test]
fn regions_joined_by_and_need_every_term() {
    let d_line = truth_line("d = aligned_alloc(");
    let filter = format!(
        "heap&size>10M,mmap&size<1M,heap&site:profile_truth.c:{d_line},static:static_table&size>1M,stack&size>100M"
    );
    let dir = scratch("profile-joined");
    let (_, v) = profile_truth_passes(&dir, &["--rate", "2000", "--regions", &filter], "10");
    let regions = v["regions"].as_array().unwrap();
    let mut kept: Vec<(&str, u64)> = regions
        .iter()
        .map(|r| (r["kind"].as_str().unwrap(), r["bytes"].as_u64().unwrap()))
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        [
            ("heap", 64 << 10),
            ("heap", 16 << 20),
            ("heap", 24 << 20),
            ("static", 4 << 20)
        ],
        "{:#}",
        v["regions"]
    );
    assert_eq!(v["selection"]["regions"], filter.as_str());
}

/// `--regions` tracks only the allocations its terms select (any term:
/// array A by its source line, C as the one mapping, every allocation
/// under 1 MiB (D) by size, the static table by name; not B or E, 16 and 8
/// MiB from other lines) and keeps only
/// the static object it names; `--threads 1` keeps the first worker's
/// samples only.
#[test]
fn regions_and_threads_limit_what_is_sampled() {
    let a_line = truth_line("a = malloc(A_BYTES)");
    let filter = format!("site:profile_truth.c:{a_line},mmap,size<1M,static:static_table");
    let dir = scratch("profile-selected");
    let (_, v) = profile_truth_passes(
        &dir,
        &[
            "--rate",
            "3000",
            "--regions",
            &filter,
            "--only-threads",
            "1",
        ],
        "20",
    );
    let regions = v["regions"].as_array().unwrap();
    let mut heap: Vec<(String, u64)> = regions
        .iter()
        .filter(|r| r["kind"] == "heap" || r["kind"] == "mmap")
        .map(|r| {
            let site = r["site"].as_str().unwrap();
            let line = site.split("profile_truth.c:").nth(1).unwrap_or(site);
            (
                line.split_whitespace().next().unwrap().to_string(),
                r["bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    heap.sort();
    let line_of = |t: &str| truth_line(t).to_string();
    let mut want = vec![
        (line_of("a = malloc(A_BYTES)"), 24 << 20),
        (line_of("c = mmap(NULL, C_BYTES"), 8 << 20),
        (line_of("d = aligned_alloc("), 64 << 10),
    ];
    want.sort();
    assert_eq!(heap, want, "{:#}", v["regions"]);
    let located: Vec<(&str, &str)> = regions
        .iter()
        .filter(|r| r["kind"] == "static" || r["kind"] == "stack")
        .map(|r| (r["kind"].as_str().unwrap(), r["site"].as_str().unwrap()))
        .collect();
    assert_eq!(located, [("static", "static_table")]);
    let sel = &v["selection"];
    assert_eq!(sel["regions"], filter.as_str());
    assert_eq!(sel["threads"], "1");
    assert!(sel["regions_left_out"].as_u64().unwrap() >= 2, "{sel}");
    // Both workers read A: the second's faults were left out.
    assert!(
        sel["samples_of_other_threads"].as_u64().unwrap() > 0,
        "{sel}"
    );
    let threads = v["threads"].as_array().unwrap();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert_eq!(threads[0]["ordinal"], 1);
    let a = regions.iter().find(|r| r["bytes"] == 24 << 20).unwrap();
    assert!(a["samples"].as_u64().unwrap() >= 20, "{a}");
    assert_eq!(a["threads"].as_object().unwrap().len(), 1, "{a}");
    // The PMU: this machine (and CI's) has no cpu PMU, and says so.
    if std::path::Path::new("/sys/bus/event_source/devices/cpu").exists() {
        eprintln!("skip: this machine has a cpu PMU; the pmu field is checked where there is none");
    } else {
        assert_eq!(v["pmu"]["found"], Value::Null, "{}", v["pmu"]);
        assert_eq!(v["pmu"]["used"], false);
        let why = v["pmu"]["reason"].as_str().unwrap();
        assert!(why.starts_with("no cpu PMU (event sources: "), "{why}");
    }
    // Text: the selection is stated.
    let text = std::fs::read_to_string(dir.join("profile.txt")).unwrap();
    assert!(
        text.contains(&format!("selected: regions {filter} (")),
        "{text}"
    );
}

/// `--refine FILTER` watches lines of the selected regions only: struct
/// D's one line when it names D's allocation, lines of array A (and none
/// of D, whose two writers rank first otherwise) when it names A's.
#[test]
fn refinement_within_a_region_watches_only_its_lines() {
    for (what, line) in [
        ("D", truth_line("d = aligned_alloc(")),
        ("A", truth_line("a = malloc(A_BYTES)")),
    ] {
        let filter = format!("site:profile_truth.c:{line}");
        let dir = scratch(&format!("profile-refine-{what}"));
        let (_, v) = profile_truth_passes(
            &dir,
            &["--rate", "2000", "--refine", &filter, "--refine-time", "1"],
            // 800 passes (about 2.5 s here) give each filter about 25
            // watch windows (0.5 s): 81 and 89 hits on A's lines, about
            // 24,000 on D's, in runs of 2026-12-02 (2500 took 9 s each).
            "800",
        );
        assert_eq!(v["selection"]["refine_regions"], filter.as_str());
        let r = &v["refinement"];
        assert!(r["unavailable"].is_null(), "{r}");
        let lines = r["lines"].as_array().unwrap();
        assert!(!lines.is_empty(), "{what}: no line watched: {r}");
        let site = format!("main profile_truth.c:{line} ");
        for l in lines {
            assert!(
                l["site"].as_str().unwrap().starts_with(&site),
                "{what}: a line outside {filter}: {l}"
            );
        }
        assert!(r["hits"].as_u64().unwrap() > 0, "{what}: {r}");
    }
}

/// `numalab compare` on two profiles matches their regions by site and
/// tests each remote share: two runs of the same program on one node
/// differ in nothing that can be tested; a copy whose array A was made
/// all remote differs in A (and in the program's share), nowhere else.
#[test]
fn two_profiles_compare_region_by_region() {
    let dir = scratch("profile-compare");
    let (_, _) = profile_truth_passes(&dir.join("a"), &["--rate", "2000"], "10");
    let (_, _) = profile_truth_passes(
        &dir.join("b"),
        &["--rate", "2000", "--regions", "heap"],
        "10",
    );
    let (pa, pb) = (dir.join("a/profile.json"), dir.join("b/profile.json"));
    let r = numalab(&[
        "compare",
        "--json",
        pa.to_str().unwrap(),
        pb.to_str().unwrap(),
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let c = parse_json(&r.out, "compare of two profiles");
    let a_line = truth_line("a = malloc(A_BYTES)");
    let site_a = format!("main profile_truth.c:{a_line} ");
    let regions = c["regions"].as_array().unwrap();
    let a = regions
        .iter()
        .find(|r| r["site"].as_str().unwrap().starts_with(&site_a))
        .unwrap();
    assert!(
        a["samples_a"].as_u64().unwrap() > 0 && a["samples_b"].as_u64().unwrap() > 0,
        "{a}"
    );
    assert_eq!(
        a["remote"]["changed"],
        Value::Null,
        "one node: all local, nothing to test: {a}"
    );
    // The mapping C was left out of B by --regions heap.
    let c_line = truth_line("c = mmap(NULL, C_BYTES");
    let cmap = regions.iter().find(|r| r["kind"] == "mmap").unwrap();
    assert!(
        cmap["site"]
            .as_str()
            .unwrap()
            .contains(&format!(":{c_line} ")),
        "{cmap}"
    );
    assert_eq!(cmap["samples_b"], Value::Null);
    assert!(
        c["warnings"].to_string().contains("profile B was limited"),
        "{c}"
    );
    // A copy of A's profile with array A's samples all remote.
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&pa).unwrap()).unwrap();
    for r in v["regions"].as_array_mut().unwrap() {
        if r["site"].as_str().unwrap().starts_with(&site_a) {
            let n = r["samples"].as_u64().unwrap();
            r["accesses"] = serde_json::json!({"0": {"1": n}});
        }
    }
    let moved = dir.join("moved.json");
    std::fs::write(&moved, v.to_string()).unwrap();
    let r = numalab(&["compare", pa.to_str().unwrap(), moved.to_str().unwrap()]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let text = &r.out;
    let lines: Vec<&str> = text.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with(&format!("  heap {site_a}")))
        .unwrap_or_else(|| panic!("{text}"));
    let block = lines[at..at + 3].join("\n");
    assert!(
        block.contains("remote 0.0% → 100.0%, +100.0 points (p < 0.001 corrected: changed)"),
        "{block}"
    );
    assert!(text.contains("remote share: 0.0% → "), "{text}");
    // A profile and a result: refused.
    let bench = dir.join("bench.json");
    std::fs::write(&bench, r#"{"command": "bench", "schema_version": "1"}"#).unwrap();
    fails(
        &["compare", pa.to_str().unwrap(), bench.to_str().unwrap()],
        "profile.json is a profile and ",
    );
    fails(
        &[
            "compare",
            pa.to_str().unwrap(),
            moved.to_str().unwrap(),
            "--html",
            dir.join("c.html").to_str().unwrap(),
        ],
        "--html compares results; two profiles compare as text or --json",
    );
}

#[test]
fn a_measured_latency_matrix_prices_the_accesses() {
    let dir = scratch("profile-machine");
    std::fs::create_dir_all(&dir).unwrap();
    let results = dir.join("matrix.json");
    let doc = serde_json::json!({"command": "matrix", "cpu_nodes": [0], "mem_nodes": [0],
        "latency": [[{"cpu_node": 0, "mem_node": 0, "value": {"median": 87.5, "best": 80.0}}]]});
    std::fs::write(&results, doc.to_string()).unwrap();
    let out = dir.join("out");
    let (_, v) = profile_truth(
        &out,
        &["--rate", "2000", "--machine", results.to_str().unwrap()],
    );
    assert_eq!(v["latency_source"], results.to_str().unwrap());
    let sampled: Vec<&Value> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["samples"].as_u64().unwrap() > 0)
        .collect();
    assert!(!sampled.is_empty(), "{v}");
    for r in sampled {
        let c = &r["latency_cost"];
        assert_eq!(c["ns_per_access"], 87.5, "{r}");
        assert_eq!(
            (&c["ratio"], &c["local_ns_per_access"]),
            (&1.0.into(), &87.5.into())
        );
        assert_eq!(c["priced"], c["placed"], "{r}");
    }
    let text = std::fs::read_to_string(out.join("profile.txt")).unwrap();
    assert!(
        text.contains("latency ratio 1.00 (measured: 88 ns an access, 88 ns were all local)"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "latencies measured: the latency matrix of {}",
            results.display()
        )),
        "{text}"
    );
}

#[test]
fn static_arrays_and_stacks_are_located_and_named() {
    let dir = scratch("profile-static-stack");
    let (program_out, v) = profile_truth(&dir, &[]);
    let regions = v["regions"].as_array().unwrap();
    // The 4 MiB static array, by its symbol, with every page present (one
    // node here).
    let addr = program_out
        .lines()
        .find_map(|l| l.strip_prefix("S 0x"))
        .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
        .unwrap();
    let st = regions
        .iter()
        .find(|r| r["site"] == "static_table")
        .unwrap_or_else(|| panic!("no static_table region: {v}"));
    assert_eq!(st["kind"], "static");
    assert_eq!(st["object"], "profile_truth");
    assert_eq!(st["sampled"], false);
    assert_eq!(st["first_address"], addr);
    assert_eq!(st["bytes"], 4 << 20);
    assert_eq!(st["pages_by_node"], serde_json::json!({"0": 1024}));
    // The stack of the thread that wrote the 1 MiB buffer: at least its
    // 256 pages present, and the main thread's stack named as such.
    let tid: u64 = program_out
        .lines()
        .find_map(|l| l.strip_prefix("stack buffer: thread "))
        .and_then(|l| l.split(' ').next()?.parse().ok())
        .unwrap();
    let stack = regions
        .iter()
        .find(|r| r["thread"] == tid)
        .unwrap_or_else(|| panic!("no stack of thread {tid}: {v}"));
    assert_eq!(stack["site"], format!("stack of thread {tid}"));
    assert!(
        stack["pages_by_node"]["0"].as_u64().unwrap() >= 256,
        "{stack}"
    );
    assert!(
        regions
            .iter()
            .any(|r| r["kind"] == "stack" && r["site"].as_str().unwrap().ends_with(" (main)")),
        "{v}"
    );
    // The profiler's own tables are not the program's.
    assert!(
        regions
            .iter()
            .all(|r| !r["object"].as_str().unwrap_or("").contains("numalab")),
        "{v}"
    );
    let text = std::fs::read_to_string(dir.join("profile.txt")).unwrap();
    assert!(
        text.contains("static 4 MiB static_table in profile_truth: pages by node 0:1024"),
        "{text}"
    );
}

#[test]
fn first_touches_name_the_thread_that_placed_each_array() {
    let dir = scratch("profile-first-touch");
    // A high fixed rate: the arrays are initialised within milliseconds.
    let (program_out, v) = profile_truth(&dir, &["--rate", "20000"]);
    let pid = v["pid"].as_u64().unwrap();
    assert!(pid > 1, "{v}");
    let region_at = |name: &str| {
        let addr = program_out
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} 0x")))
            .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
            .unwrap();
        v["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["first_address"] == addr)
            .unwrap_or_else(|| panic!("no region for {name}: {v}"))
            .clone()
    };
    // A and E: every sampled first touch by the main thread, a write.
    for name in ["A", "E"] {
        let f = &region_at(name)["first_touch"];
        let n = f["samples"].as_u64().unwrap();
        assert!(n >= 1, "{name}: {f}");
        assert_eq!(f["writes"], n, "{name}: {f}");
        assert_eq!(
            f["threads"],
            serde_json::json!({ pid.to_string(): n }),
            "{name}: {f}"
        );
        // One node here; a page whose touch had not completed when the
        // sampler asked is "unknown" (-1).
        let on0 = f["nodes"]["0"].as_u64().unwrap_or(0);
        let unknown = f["nodes"]["-1"].as_u64().unwrap_or(0);
        assert!(on0 >= 1 && on0 + unknown == n, "{name}: one node here: {f}");
    }
    // B: each slice first-touched by its owner, never the main thread.
    let fb = &region_at("B")["first_touch"];
    let owners = fb["threads"].as_object().unwrap();
    assert!(
        !owners.is_empty() && !owners.contains_key(&pid.to_string()),
        "{fb}"
    );
    // The main thread is listed for its first touches, with no access
    // sampled (it only initialised), and pinned.
    let main = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] == pid)
        .unwrap_or_else(|| panic!("main thread not listed: {v}"));
    assert!(main["first_touches"].as_u64().unwrap() >= 2, "{main}");
    assert_eq!(main["allowed_cpus"], 1, "{main}");
    // Where the kernel keeps scheduler statistics, each thread's
    // migrations are read from them; its spans cover its faults.
    let sched = Path::new("/proc/self/sched").exists();
    for t in v["threads"].as_array().unwrap() {
        assert_eq!(t["migrations"].is_u64(), sched, "{t}");
        let spans = t["timeline"].as_array().unwrap();
        assert!(!spans.is_empty(), "{t}");
        let sampled: u64 = spans.iter().map(|x| x["samples"].as_u64().unwrap()).sum();
        assert_eq!(sampled, t["samples"].as_u64().unwrap(), "{t}");
        for x in spans {
            assert!(
                x["from_s"].as_f64().unwrap() <= x["to_s"].as_f64().unwrap(),
                "{x}"
            );
        }
    }
}

#[test]
fn duration_stops_sampling_and_the_program_runs_on() {
    library_built();
    let dir = scratch("profile-duration");
    let _ = std::fs::remove_dir_all(&dir);
    // The program reads its array for about a second; sampling stops at
    // 0.3 s.
    let r = numalab(&[
        "profile",
        "--json",
        "--rate",
        "2000",
        "--duration",
        "0.3",
        "-o",
        dir.to_str().unwrap(),
        "--",
        program().to_str().unwrap(),
        "sample",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, &dir);
    assert!(program_out.contains("sums right"), "{program_out}");
    assert_eq!(v["sampled_for_s"], 0.3);
    assert!(v["samples"].as_u64().unwrap() > 0, "{v}");
    // The cost as sampling ended: measured, not read from the ended
    // sampler thread's clock (which would count it as nothing).
    let c = &v["cost"];
    assert!(c["spent_ms"].as_f64().unwrap() > 0.0, "{c}");
    // Two threads for 0.3 s (at most 0.6 s of CPU), not the whole run's
    // second (about 2 s).
    assert!(
        c["program_cpu_ms"].as_f64().unwrap() < 900.0,
        "the window's, not the run's: {c}"
    );
    // No sampled fault after the window, but for pages armed before it
    // and touched before the sampler's next tick (2 ms here; a loaded
    // machine oversleeps).
    for t in v["threads"].as_array().unwrap() {
        for span in t["timeline"].as_array().unwrap() {
            assert!(span["to_s"].as_f64().unwrap() <= 0.45, "{t}");
        }
    }
    // The pages were still located at free, after the window.
    let a = &v["regions"][0];
    assert_eq!(a["bytes"], 33554432);
    assert!(!a["pages_by_node"].as_object().unwrap().is_empty(), "{a}");
    let text = std::fs::read_to_string(dir.join("profile.txt")).unwrap();
    assert!(
        text.contains("sampling: 2000 pages a second, fixed, for the first 0.3 s"),
        "{text}"
    );
}

#[test]
fn the_commands_exit_status_and_signal_are_passed_on() {
    library_built();
    let dir = scratch("profile-status");
    let _ = std::fs::remove_dir_all(&dir);
    let r = numalab(&[
        "profile",
        "-o",
        dir.join("a").to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 7",
    ]);
    assert_eq!(r.rc, 7, "{}", r.err);
    // Its own files (profile.html among them) do not stop a second run.
    let r = numalab(&[
        "profile",
        "-o",
        dir.join("a").to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "exit 7",
    ]);
    assert_eq!(r.rc, 7, "{}", r.err);
    assert!(dir.join("a/profile.html").is_file());
    // The text goes to stderr, the same as profile.txt; stdout is the
    // program's (here empty).
    assert_eq!(r.out, "");
    let txt = std::fs::read_to_string(dir.join("a/profile.txt")).unwrap();
    assert!(txt.len() > 100 && r.err.contains(&txt), "{}", r.err);
    let r = numalab(&[
        "profile",
        "-o",
        dir.join("b").to_str().unwrap(),
        "--",
        program().to_str().unwrap(),
        "crash",
    ]);
    assert_eq!(
        r.status.signal(),
        Some(libc::SIGSEGV),
        "{:?} {}",
        r.status,
        r.err
    );
}

#[test]
fn a_static_program_is_not_sampled_and_says_why() {
    library_built();
    let dir = scratch("profile-static");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("s.c");
    std::fs::write(&src, "int main(void) { return 3; }\n").unwrap();
    let exe = dir.join("s");
    let st = Command::new("gcc")
        .arg("-static")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(st.success(), "gcc -static");
    let r = numalab(&[
        "profile",
        "--json",
        "-o",
        dir.join("p").to_str().unwrap(),
        "--",
        exe.to_str().unwrap(),
    ]);
    assert_eq!(r.rc, 3, "the program's own status: {}", r.err);
    let (program_out, v) = written_profile(&r, &dir.join("p"));
    assert_eq!(program_out, "");
    assert_eq!(v["samples"], 0);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.contains("statically linked and setuid programs ignore LD_PRELOAD"),
        "{w}"
    );
}

#[test]
fn bad_input_is_refused_in_one_line() {
    fails(
        &["profile", "--rate", "0", "--", "true"],
        "--rate '0' is not a whole number from 1 to 200000",
    );
    fails(
        &["profile", "--word-counts", "maybe", "--", "true"],
        "--word-counts: 'maybe' is not on or off",
    );
    fails(
        &["profile", "--duration", "0", "--", "true"],
        "--duration '0' is not a positive number of seconds from 0.001 to 604800 (one week)",
    );
    fails(
        &["profile", "--overhead", "0", "--", "true"],
        "--overhead 0 is out of range: give a percentage above 0 and below 100",
    );
    fails(
        &["profile", "--min-bytes", "100", "--", "true"],
        "--min-bytes 100 is too small: at least 4 KiB (one page)",
    );
    fails(
        &["profile", "--refine", "hep", "--", "true"],
        "--refine: give auto, off or a region filter ('hep' is not a region term; terms: heap, mmap,",
    );
    fails(
        &[
            "profile",
            "--refine",
            "site:no_such_function_anywhere",
            "--",
            "true",
        ],
        "--refine: site:no_such_function_anywhere names no function in ",
    );
    fails(
        &["profile", "--regions", "heap,hep", "--", "true"],
        "--regions: 'hep' is not a region term; terms: heap, mmap, file:PATH, stack, static, static:SYMBOL, site:FUNCTION, site:FILE:LINE, site:OBJECT+0xOFFSET, site:OBJECT:FUNCTION, 0xSTART-0xEND, size>N, size<N",
    );
    fails(
        &["profile", "--regions", "size=4", "--", "true"],
        "--regions: 'size=4' is not size>N or size<N",
    );
    fails(
        &[
            "profile",
            "--regions",
            "site:no_such_function_anywhere",
            "--",
            "true",
        ],
        "--regions: site:no_such_function_anywhere names no function in ",
    );
    fails(
        &[
            "profile",
            "--regions",
            "site:main",
            "--",
            "/no/such/program",
        ],
        "--regions site: cannot find the program '/no/such/program' to read its symbols",
    );
    fails(
        &["profile", "--only-threads", "x", "--", "true"],
        "--only-threads x: ",
    );
    fails(
        &["profile", "--small-every", "100", "--", "true"],
        "--small-every 100 is too small: 0 (off) or at least 4 KiB",
    );
    fails(
        &["profile", "--sampler", "ibs", "--", "true"],
        "--sampler: 'ibs' is no sampler; valid: auto, faults, pmu",
    );
    if !std::path::Path::new("/sys/bus/event_source/devices/cpu").exists() {
        fails(
            &["profile", "--sampler", "pmu", "--", "true"],
            "--sampler pmu: no memory-sampling PMU usable here (no cpu PMU (event sources: ",
        );
    }
    fails(
        &["profile", "--only-threads", "5000", "--", "true"],
        "--only-threads 5000: thread 5000 is beyond the last one numalab can select (1023)",
    );
    let files = scratch("profile-machine-files");
    std::fs::create_dir_all(&files).unwrap();
    let none = files.join("none.json");
    std::fs::write(&none, r#"{"command": "bench", "latency": null}"#).unwrap();
    fails(
        &["profile", "--machine", none.to_str().unwrap(), "--", "true"],
        "none.json: it holds no latency matrix (give the --json output of numalab matrix, or a report's results.json with its latency-matrix part)",
    );
    let other = files.join("other.json");
    let cell = |c: u32, m: u32| serde_json::json!({"cpu_node": c, "mem_node": m, "value": {"median": 100.0}});
    let doc = serde_json::json!({"latency": [[cell(0, 0), cell(0, 1)], [cell(1, 0), cell(1, 1)]]});
    std::fs::write(&other, doc.to_string()).unwrap();
    fails(
        &["profile", "--machine", other.to_str().unwrap(), "--", "true"],
        "its matrix has CPU nodes 0,1 and memory nodes 0,1, this machine CPU nodes 0 and memory nodes 0: measured on another machine",
    );
    fails(
        &[
            "profile",
            "--machine",
            "/nonexistent/results.json",
            "--",
            "true",
        ],
        "--machine: cannot read /nonexistent/results.json: No such file or directory",
    );
    // Through the bounded reader: a device is refused at once (it read
    // /dev/zero to 2 GB before).
    fails(
        &["profile", "--machine", "/dev/zero", "--", "true"],
        "--machine: cannot read /dev/zero: it is a character device, not a regular file",
    );
    let dir = scratch("profile-foreign");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "mine").unwrap();
    fails(
        &["profile", "-o", dir.to_str().unwrap(), "--", "true"],
        "holds files numalab profile did not write (notes.txt); give a new or empty folder",
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("notes.txt")).unwrap(),
        "mine"
    );
    let r = Run::new(&["profile", "--", "true"])
        .env("NUMALAB_PRELOAD", "/nonexistent/lib.so")
        .run();
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(
        r.err
            .contains("NUMALAB_PRELOAD /nonexistent/lib.so is not a file"),
        "{}",
        r.err
    );
}

#[test]
fn small_allocations_are_estimated_by_site() {
    library_built();
    let dir = scratch("profile-small");
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("p");
    let prog = program().to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "profile",
            "--json",
            "--small-every",
            "64K",
            "-o",
            out.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", prog, "small"]);
        let r = numalab(&args);
        assert_eq!(r.rc, 0, "{}", r.err);
        written_profile(&r, &out).1
    };
    let v = run(&[]);
    // 200000 allocations of 100 bytes from make_small, one drawn per
    // 64 KiB on average (about 305): the estimates within 35% (six
    // standard errors).
    let regions = v["regions"].as_array().unwrap();
    let r = regions
        .iter()
        .find(|r| {
            r["kind"] == "small"
                && r["site"]
                    .as_str()
                    .unwrap()
                    .starts_with("make_small hazards.c:")
        })
        .unwrap_or_else(|| panic!("{regions:?}"));
    let n = r["allocations"].as_u64().unwrap() as f64;
    let bytes = r["bytes"].as_u64().unwrap() as f64;
    assert!((n / 200_000.0 - 1.0).abs() < 0.35, "{r}");
    assert!((bytes / 20e6 - 1.0).abs() < 0.35, "{r}");
    // About 305 draws at the 64 KiB mean; the cost controller doubles the
    // mean while draws cost too much (a clean clone beside the guest lane
    // drew 182), and each draw counts for its own mean, so the estimates
    // above hold either way: at least a quarter, at most the upper tail.
    let drawn = r["sampled_allocations"].as_u64().unwrap();
    assert!((75..=450).contains(&drawn), "{r}");
    assert_eq!(r["sampled"], false);
    assert_eq!(r["pages_by_node"]["0"].as_u64().unwrap(), drawn, "{r}");
    let text = std::fs::read_to_string(out.join("profile.txt")).unwrap();
    assert!(
        text.contains("small allocations (below 64 KiB, not armed; "),
        "{text}"
    );
    assert!(text.contains(" at make_small hazards.c:"), "{text}");
    // A filter keeps small sites by function, and leaves them out by kind.
    let v = run(&["--regions", "site:make_small"]);
    assert!(
        v["regions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "small"),
        "{v}"
    );
    let v = run(&["--regions", "mmap"]);
    assert!(
        !v["regions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["kind"] == "small"),
        "{v}"
    );
}

#[test]
fn file_mappings_are_regions_named_by_their_file_and_selected_by_it() {
    library_built();
    let dir = scratch("profile-file");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("p");
    let data = dir.join("mapped.data");
    let r = numalab(&[
        "profile",
        "--json",
        "--rate",
        "2000",
        "--regions",
        "file:mapped.data",
        "-o",
        out.to_str().unwrap(),
        "--",
        program().to_str().unwrap(),
        "file",
        data.to_str().unwrap(),
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, &out);
    assert!(program_out.contains("read-only kept"), "{program_out}");
    // Only the file's two mappings are tracked (the filter), both named by
    // it, both sampled.
    let sampled: Vec<&Value> = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["sampled"] == true)
        .collect();
    assert_eq!(sampled.len(), 2, "{sampled:?}");
    let path = std::fs::canonicalize(&data).unwrap();
    for r in &sampled {
        assert_eq!(r["kind"], "file", "{r}");
        assert_eq!(r["bytes"], 16 << 20, "{r}");
        assert_eq!(r["object"], path.to_str().unwrap(), "{r}");
        assert!(r["samples"].as_u64().unwrap() > 5, "{r}");
    }
    let text = std::fs::read_to_string(out.join("profile.txt")).unwrap();
    assert!(
        text.contains(&format!(", mapping {}", path.display())),
        "{text}"
    );
}

/// The chi-square statistic of `counts` against equal expected counts.
fn chi_square_equal(counts: &[f64]) -> f64 {
    let mean = counts.iter().sum::<f64>() / counts.len() as f64;
    counts.iter().map(|k| (k - mean).powi(2) / mean).sum()
}

/// The issue's bias: threads that scan shared data in step hand page-fault
/// samples to the one in front. The word counter draws words for every
/// thread by its own CPU time, so 16 workers doing equal work on array A
/// (truth.c instep, all in step) get draws in A in shares a chi-square test
/// at 1% (15 degrees of freedom: 30.58) does not reject as unequal. (How
/// many of a thread's draws saw an access depends on its window lengths,
/// which each thread adapts on its own; the estimate weighs them.) The
/// draws come in clusters, a window's words together (and a window of a
/// thread in A mostly draws its words there), so the statistic is taken
/// with the window as the unit, as the estimate's variance is: divided by
/// the draws in A per watched window (Rao and Scott's first-order
/// correction at its largest design effect, every word of a window in A
/// or none). Taken over draws as if each were independent, a loaded clean
/// clone once gave 47.9 ([.., 6, 17, 2, 24]) and two busy loops beside it
/// 38.3, 1 run of 10, where a 1% test should reject 1 in 100; twelve
/// loaded runs there drew 1.9-2.2 words of A per window.
#[test]
fn equal_work_threads_get_equal_word_count_samples() {
    library_built();
    let dir = scratch("profile-equal-threads");
    let _ = std::fs::remove_dir_all(&dir);
    let prog = compile_c("crates/numalab-preload/tests/programs/truth.c", "truth");
    let r = numalab(&[
        "profile",
        "--json",
        "--overhead",
        "99",
        "-o",
        dir.join("p").to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        "instep",
        "16",
        "60",
        "16384",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, &dir.join("p"));
    let a_addr = program_out
        .lines()
        .find_map(|l| l.strip_prefix("region A 0x"))
        .and_then(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
        .expect("region A in the program's output");
    let workers: Vec<u64> = program_out
        .lines()
        .filter_map(|l| l.strip_prefix("thread "))
        .map(|l| l.split_whitespace().nth(1).unwrap().parse().unwrap())
        .collect();
    assert_eq!(workers.len(), 16, "{program_out}");
    let a = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["first_address"] == a_addr)
        .unwrap_or_else(|| panic!("no region at A's address {a_addr:#x}"));
    let by_thread = &a["estimate"]["threads"];
    let draws: Vec<f64> = workers
        .iter()
        .map(|t| by_thread[t.to_string()]["draws"].as_f64().unwrap_or(0.0))
        .collect();
    let total: f64 = draws.iter().sum();
    assert!(total >= 16.0 * 5.0, "A: {total} draws in all: {by_thread}");
    // Every thread's watched windows, the main thread's too (its windows
    // draw few words in A, so the design effect is if anything too small).
    let windows = v["word_counting"]["windows"].as_f64().unwrap();
    assert!(windows >= 16.0, "{} windows", v["word_counting"]);
    let per_window = (total / windows).max(1.0);
    let chi2 = chi_square_equal(&draws) / per_window;
    assert!(
        chi2 < 30.58,
        "chi-square {chi2:.1} over windows ({per_window:.2} draws in A a window) rejects equal shares at 1% (15 df): {draws:?}"
    );
    // Every worker's accesses counted, in A's estimate.
    for t in &workers {
        assert!(
            by_thread[t.to_string()]["share"].as_f64().unwrap() > 0.0,
            "thread {t} has no share of A: {by_thread}"
        );
    }
}

#[test]
fn chi_square_rejects_a_leader_and_accepts_equal_counts() {
    let mut leader = vec![5.0; 15];
    leader.push(113.0);
    assert!(chi_square_equal(&leader) > 30.58);
    // Still rejected with the window as the unit, at the loaded runs'
    // largest 2.2 draws a window.
    assert!(chi_square_equal(&leader) / 2.2 > 30.58);
    assert!(chi_square_equal(&[20.0, 22.0, 18.0, 21.0, 19.0, 20.0]) < 1.0);
}

/// Children forked without exec have no sampler thread: the profile says
/// how many, first, and does not advise a higher rate; children that
/// exec are profiled by the library again and not counted.
#[test]
fn children_forked_without_exec_are_said_not_sampled() {
    library_built();
    let dir = scratch("profile-forks");
    let _ = std::fs::remove_dir_all(&dir);
    let workers = "import os\n\
        pids = []\n\
        for i in range(3):\n\
        \x20   p = os.fork()\n\
        \x20   if p == 0:\n\
        \x20       b = bytearray(32 << 20)\n\
        \x20       for j in range(0, len(b), 4096): b[j] = 1\n\
        \x20       os._exit(0)\n\
        \x20   pids.append(p)\n\
        print(all(os.waitpid(p, 0)[1] == 0 for p in pids))\n";
    let out = dir.join("forks");
    let r = numalab(&[
        "profile",
        "-o",
        out.to_str().unwrap(),
        "--",
        "/usr/bin/python3",
        "-c",
        workers,
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, &out);
    assert_eq!(program_out, "True\n");
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with("3 processes forked without exec (workers such as stress-ng's or a pre-forking server's) were not sampled"),
        "{}",
        v["warnings"]
    );
    assert!(
        !v["warnings"].to_string().contains("raise --rate"),
        "{}",
        v["warnings"]
    );
    // A shell that forks and execs: each child runs the library again.
    let out = dir.join("execs");
    let r = numalab(&[
        "profile",
        "-o",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        "/bin/true; /bin/true; echo done",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let (program_out, v) = written_profile(&r, &out);
    assert_eq!(program_out, "done\n");
    assert!(
        !v["warnings"].to_string().contains("forked without exec"),
        "{}",
        v["warnings"]
    );
}

/// crates/numalab-preload/tests/programs/fdjuggle.c, compiled once.
fn fdjuggle() -> std::path::PathBuf {
    static P: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        compile_c(
            "crates/numalab-preload/tests/programs/fdjuggle.c",
            "fdjuggle",
        )
    })
    .clone()
}

/// A program that closes every descriptor from 3 up, or dup2s its file
/// onto 3..63, gets byte for byte the files it wrote under `profile`,
/// `profile --per-thread` and `run --plan` (the library's records once
/// went into them), and the profile still has its samples.
#[test]
fn programs_that_close_or_dup2_descriptors_keep_their_files() {
    library_built();
    let prog = fdjuggle();
    let p = prog.to_str().unwrap();
    let dir = scratch("profile-fdjuggle");
    let _ = std::fs::remove_dir_all(&dir);
    let plan = dir.join("plan.json");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        &plan,
        r#"{"schema": "numalab-plan/1", "entries": [{"region": "size>1M", "policy": "interleave:0"}]}"#,
    )
    .unwrap();
    let files = |mode: &str| -> Vec<(&'static str, Vec<u8>)> {
        let names: &[&'static str] = if mode == "close" {
            &["a.txt", "b.txt"]
        } else {
            &["c.txt"]
        };
        names
            .iter()
            .map(|n| (*n, std::fs::read(dir.join("files").join(n)).unwrap()))
            .collect()
    };
    for mode in ["close", "dup2"] {
        let out_dir = dir.join("files");
        let _ = std::fs::remove_dir_all(&out_dir);
        std::fs::create_dir_all(&out_dir).unwrap();
        let plain = Command::new(p)
            .args([mode, out_dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(plain.status.success(), "plain {mode}");
        let want = files(mode);
        let prof = dir.join(format!("prof-{mode}"));
        let ways: Vec<Vec<String>> = vec![
            vec![
                "profile".into(),
                "--rate".into(),
                "2000".into(),
                "-o".into(),
                prof.to_string_lossy().into(),
            ],
            vec![
                "profile".into(),
                "--per-thread".into(),
                "-o".into(),
                dir.join(format!("pt-{mode}")).to_string_lossy().into(),
            ],
            vec!["run".into(), "--plan".into(), plan.to_string_lossy().into()],
            vec![
                "run".into(),
                "--verify".into(),
                "--plan".into(),
                plan.to_string_lossy().into(),
            ],
        ];
        for way in ways {
            let _ = std::fs::remove_dir_all(&out_dir);
            std::fs::create_dir_all(&out_dir).unwrap();
            let mut args: Vec<&str> = way.iter().map(String::as_str).collect();
            args.extend(["--", p, mode, out_dir.to_str().unwrap()]);
            let r = numalab(&args);
            assert_eq!(r.rc, 0, "{args:?}: {}", r.err);
            assert_eq!(r.out.as_bytes(), &plain.stdout[..], "{args:?}");
            for ((name, got), (_, w)) in files(mode).iter().zip(&want) {
                assert!(
                    got == w,
                    "{args:?}: {name} has {} bytes, the program wrote {}",
                    got.len(),
                    w.len()
                );
            }
            // The plan's check says when its records may be incomplete.
            if args.contains(&"--verify") {
                assert!(r.err.contains("plan check"), "{args:?}: {}", r.err);
                assert_eq!(
                    r.err
                        .contains("closed or reused the descriptor of the library's record file"),
                    mode == "close",
                    "{args:?}: {}",
                    r.err
                );
            }
        }
        // The profile kept its samples: the library opened its file again.
        let v = parse_json(
            &std::fs::read_to_string(prof.join("profile.json")).unwrap(),
            "profile.json",
        );
        assert!(
            v["samples"].as_u64().unwrap() > 0,
            "{mode}: {}",
            v["warnings"]
        );
        if mode == "close" {
            assert!(
                v["warnings"].to_string().contains(
                    "the program closed or reused the descriptor of the library's record file"
                ),
                "{}",
                v["warnings"]
            );
        }
    }
}

/// A program that closes every descriptor from 3 up and opens its own
/// file 800 times, over the numbers the library's events had and would
/// have (700 up), reads every byte of it through each descriptor: the
/// library never reads (24 bytes a window turn, once) nor closes what is
/// the program's now, and its word counts say the thread's events were
/// lost rather than count the file's bytes.
#[test]
fn a_program_that_reopens_files_over_the_librarys_descriptors_reads_them_whole() {
    library_built();
    let prog = fdjuggle();
    let p = prog.to_str().unwrap();
    let dir = scratch("profile-fdreopen");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let text: String = ('a'..='z')
        .chain('A'..='Z')
        .chain('0'..='9')
        .chain("+/".chars())
        .collect();
    std::fs::write(files.join("in.txt"), &text).unwrap();
    let plain = Command::new(p)
        .args(["reopen", files.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        plain.status.success(),
        "plain: {}",
        String::from_utf8_lossy(&plain.stderr)
    );
    let out = dir.join("p");
    // Every window watched (duty 0), so that the events are read often.
    let r = numalab(&[
        "profile",
        "--overhead",
        "2",
        "-o",
        out.to_str().unwrap(),
        "--",
        p,
        "reopen",
        files.to_str().unwrap(),
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(!r.err.contains("fdjuggle:"), "{}", r.err);
    assert_eq!(r.out.as_bytes(), &plain.stdout[..]);
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("profile.json")).unwrap()).unwrap();
    assert_eq!(
        v["word_counting"]["threads_lost"], 1,
        "{}",
        v["word_counting"]
    );
    assert_eq!(
        std::fs::read(files.join("in.txt")).unwrap(),
        text.as_bytes()
    );
}

/// `--granularity`: each region's units by the first rule that selects
/// it (array E at 64 B by its site, the other heap blocks at 2 MiB, the
/// mapping C at 4 KiB); every unit lies inside its region's allocation,
/// aligned to its size or clipped at the allocation's start, and the
/// units' samples (those listed and the rest) sum to the region's. Sizes
/// outside a power of two from the line to 2 MiB are refused.
#[test]
fn granularity_splits_each_region_into_units_whose_samples_sum_to_its_own() {
    let e_line = truth_line("e = malloc(E_BYTES)");
    let e_rule = format!("site:profile_truth.c:{e_line}=64");
    let dir = scratch("profile-granularity");
    let (_, v) = profile_truth_passes(
        &dir,
        &[
            "--rate",
            "4000",
            "--granularity",
            &e_rule,
            "--granularity",
            "heap=2M",
            "--granularity",
            "mmap=4K",
            "--units",
            "8",
        ],
        "10",
    );
    let g = &v["granularity"];
    assert_eq!(
        g["rules"],
        serde_json::json!([
            format!("site:profile_truth.c:{e_line}=64 B"),
            "heap=2 MiB",
            "mmap=4 KiB"
        ])
    );
    assert_eq!(
        (g["shown"].as_u64(), g["line_bytes"].as_u64()),
        (Some(8), Some(64))
    );
    assert_eq!(g["unmatched_rules"], serde_json::json!([]));
    let regions = v["regions"].as_array().unwrap();
    let e_site = format!("main profile_truth.c:{e_line} ");
    let mut checked = Vec::new();
    for r in regions.iter().filter(|r| r["sampled"] == true) {
        let site = r["site"].as_str().unwrap();
        let t = &r["units"];
        let want = if site.starts_with(&e_site) {
            64
        } else if r["kind"] == "mmap" {
            4096
        } else {
            2 << 20
        };
        assert_eq!(t["unit_bytes"].as_u64(), Some(want), "{site}: {t}");
        let n = |v: &Value| v.as_u64().unwrap();
        let (start, bytes) = (n(&r["first_address"]), n(&r["bytes"]));
        assert_eq!(n(&r["allocations"]), 1, "{site}");
        // The units the allocation spans, partial ones at its ends counted.
        assert_eq!(
            n(&t["units"]),
            (start + bytes).div_ceil(want) - start / want,
            "{site}"
        );
        let shown = t["shown"].as_array().unwrap();
        assert!(shown.len() <= 8, "{site}: {}", shown.len());
        let mut sum = 0;
        for u in shown {
            let (a, b) = (n(&u["address"]), n(&u["bytes"]));
            assert!(
                a >= start && a + b <= start + bytes,
                "{site}: unit {u} outside"
            );
            assert!(
                a.is_multiple_of(want) || a == start,
                "{site}: unit {u} not aligned"
            );
            assert!(b > 0 && b <= want, "{site}: {u}");
            assert_eq!(n(&u["offset"]), a - start, "{site}: {u}");
            let from: u64 = u["from_nodes"].as_object().unwrap().values().map(n).sum();
            assert_eq!(
                from,
                n(&u["samples"]),
                "{site}: every sample's CPU is known"
            );
            assert_eq!(
                n(&u["reads"]) + n(&u["writes"]),
                n(&u["samples"]),
                "{site}: {u}"
            );
            sum += n(&u["samples"]);
        }
        assert_eq!(
            n(&t["sampled_units"]),
            shown.len() as u64 + n(&t["rest_units"]),
            "{site}"
        );
        assert_eq!(sum + n(&t["rest_samples"]), n(&r["samples"]), "{site}");
        assert_eq!(n(&t["samples"]), n(&r["samples"]), "{site}");
        checked.push((
            r["kind"].as_str().unwrap().to_string(),
            want,
            n(&r["samples"]),
        ));
    }
    // A, B, C, E and D's block: each has its table.
    checked.sort();
    assert_eq!(checked.len(), 5, "{checked:?}");
    assert!(
        checked.iter().filter(|c| c.2 > 0).count() >= 4,
        "A, B, C and E are read ten times over: {checked:?}"
    );
    let text = std::fs::read_to_string(dir.join("profile.txt")).unwrap();
    assert!(
        text.contains("units (--granularity ")
            && text.contains(
                "  exact: samples per unit (counts of the sampled accesses), and watchpoint hits (counts in the watched windows)"
            ),
        "{text}"
    );
    let range =
        "give a power of two from 64 B (this machine's cache line) to 2 MiB (e.g. 64, 4K, 64K, 2M)";
    fails(
        &["profile", "--granularity", "3000", "--", "true"],
        &format!("numalab: --granularity 3000 B is not a unit: {range}"),
    );
    fails(
        &["profile", "--granularity", "heap=4M", "--", "true"],
        &format!("numalab: --granularity 4 MiB is not a unit: {range}"),
    );
    fails(
        &["profile", "--granularity", "hep=4K", "--", "true"],
        "numalab: --granularity: 'hep' is not a region term; terms: heap, mmap,",
    );
    fails(
        &["profile", "--units", "5", "--", "true"],
        "--granularity <[FILTER=]SIZE>",
    );
}

#[test]
fn pin_places_each_thread_on_the_next_cpu_of_the_list_while_profiling() {
    // likwid-pin's pinning under the profiler: the main thread on the
    // list's first CPU, the two readers on the next ones as they start;
    // the profile's threads say where each was seen.
    library_built();
    let dir = scratch("profile-pin");
    let _ = std::fs::remove_dir_all(&dir);
    let out = dir.join("p");
    let r = numalab(&[
        "profile",
        "--pin",
        "1,0",
        "--rate",
        "1000",
        "-o",
        out.to_str().unwrap(),
        "--",
        program().to_str().unwrap(),
        "sample",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(r.out.contains("sums right"), "{}", r.out);
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("profile.json")).unwrap()).unwrap();
    let threads = v["threads"].as_array().unwrap();
    let want = |ordinal: u64| [1, 0, 1][ordinal as usize];
    let mut readers = 0;
    let mut numbered: Vec<u64> = threads
        .iter()
        .filter_map(|t| t["ordinal"].as_u64())
        .collect();
    numbered.sort_unstable();
    assert_eq!(numbered, [0, 1, 2], "every thread listed: {threads:?}");
    for t in threads {
        let Some(o) = t["ordinal"].as_u64() else {
            continue;
        };
        // Its affinity is said as it starts; the CPUs it was seen on by
        // its samples (a thread no sample found, as the main thread often
        // is here, was seen on none).
        assert_eq!(t["allowed_cpus"], 1, "thread {o} pinned: {t}");
        if t["samples"].as_u64().unwrap() > 0 {
            assert_eq!(t["cpus"], serde_json::json!([want(o)]), "thread {o}: {t}");
        }
        readers += u64::from(o > 0 && t["samples"].as_u64().unwrap() > 0);
    }
    assert_eq!(readers, 2, "{threads:?}");
    // A bad list is the same one-line error as run's.
    let r = numalab(&["profile", "--pin", "0,7", "--", "true"]);
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(
        r.err
            .contains("--pin 0,7: CPU 7 is not one the command may run on ({0-1})"),
        "{}",
        r.err
    );
}
