//! `numalab profile` in the multi-node guests, on a program whose truth is
//! known by construction (crates/numalab-preload/tests/programs/
//! profile_truth.c): the array the main thread initialised is 75% remote
//! (6 of 8 readers elsewhere), the per-thread slices local, the array bound
//! to the farthest node 100% remote from node 0, and in the ring a region
//! bound to the CPU-less node is found there. Pages and CPUs are the
//! guest's real ones; sample counts vary, the shares are asserted with
//! the sampling error the counts allow.

use crate::common::{parse_json, Guest};
use crate::guest_experiments::{
    quartet_for_refinement, quartet_for_truth, quartet_profile as quartet, ring,
};
use serde_json::Value;

/// Steps run in the Quartet guest: (unique name, shell command).
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "profile_truth",
        "numalab profile --rate 2000 --overhead 99 -o /tmp/prof -- profile_truth 100 2>/tmp/prof.err; rc=$?; cat /tmp/prof/profile.json; grep ^numalab /tmp/prof.err >&2; exit $rc",
    ),
    (
        "profile_distance_0",
        "cat /sys/devices/system/node/node0/distance",
    ),
    (
        "profile_threads",
        "numalab profile --rate 2000 --only-threads 1-2 -o /tmp/prof-threads -- profile_truth 50 2>/tmp/prof-threads.err; rc=$?; cat /tmp/prof-threads/profile.json; grep ^numalab /tmp/prof-threads.err >&2; exit $rc",
    ),
    // Names without binutils: the guest has none (and no ldd); a site
    // term is resolved in the program's symbols.
    (
        "profile_no_binutils",
        "for t in addr2line objdump nm readelf c++filt ldd; do command -v $t || echo no-$t; done",
    ),
    (
        "profile_site_term",
        "numalab profile --rate 500 --regions site:main -o /tmp/prof-site -- profile_truth 20 2>/tmp/prof-site.err; rc=$?; cat /tmp/prof-site/profile.json; grep ^numalab /tmp/prof-site.err >&2; exit $rc",
    ),
];

/// The truth suite's steps (crates/numalab-preload/tests/programs/
/// truth.c), in a fresh Quartet guest of their own (see
/// `quartet_for_truth`): nine profiles of a few seconds each (tens in the
/// emulated guest).
pub const TRUTH_STEPS: &[(&str, &str)] = &[
    // The program: 8 workers read A (first-touched by the main
    // thread) in step, worker 0 in front. (--overhead 99: the guest's
    // emulated CPUs make every cost look large; the shares need draws.)
    // 40 passes: at 30 the clean-clone run of stop 12, its host loaded by
    // other tests, got 92 placed word counts of A (100 needed; the share
    // 0.748 was right): the windows grow with the passes.
    (
        "truth_leader",
        "numalab profile --rate 500 --overhead 99 -o /tmp/tl -- truth leader 8 40 4096 2>/tmp/tl.err; rc=$?; cat /tmp/tl/profile.json; grep ^numalab /tmp/tl.err >&2; exit $rc",
    ),
    ("truth_leader_plan", "cat /tmp/tl/plan.json"),
    ("truth_leader_plain", "truth leader 8 4 4096"),
    (
        "truth_leader_planned",
        "numalab run --plan /tmp/tl/plan.json --verify --verify-json /tmp/tlv.json -- truth leader 8 4 4096",
    ),
    ("truth_leader_check", "cat /tmp/tlv.json"),
    // The rest of the truth suite (bench/profile-truth.sh repeats them).
    // 24 passes where 12 were: since the guest reads the TSC, not the
    // HPET (guest/boot.sh), the library's clock reads cost the threads
    // less CPU time, so fewer windows; staggered reached 29 placed cells
    // (30 needed) in one run of three at 12.
    (
        "truth_staggered",
        "numalab profile --rate 500 --overhead 99 -o /tmp/t1 -- truth staggered 8 24 4096 2>/tmp/t1.err; rc=$?; cat /tmp/t1/profile.json; grep ^numalab /tmp/t1.err >&2; exit $rc",
    ),
    (
        "truth_random",
        "numalab profile --rate 500 --overhead 99 -o /tmp/t2 -- truth random 8 24 4096 2>/tmp/t2.err; rc=$?; cat /tmp/t2/profile.json; grep ^numalab /tmp/t2.err >&2; exit $rc",
    ),
    // 100 passes: a thread's draws land on its own slice one time in
    // eight, so S gathers counts slowly; at 40 passes S had fewer than 30
    // in a CI run on a loaded host.
    (
        "truth_slices",
        "numalab profile --rate 500 --overhead 99 -o /tmp/t3 -- truth slices 8 100 4096 2>/tmp/t3.err; rc=$?; cat /tmp/t3/profile.json; grep ^numalab /tmp/t3.err >&2; exit $rc",
    ),
    // 200 passes: producers and consumers wait on each other, so their
    // threads run fewer word-count windows; at 40 passes no region reached
    // 30 counts in 2 of 4 runs on a loaded host, and at 100 the clean-clone
    // run of stop 11 got 25 and 28 placed cells (a fault cost 944 us, the
    // guest slow): the windows grow with the passes.
    (
        "truth_prodcons",
        "numalab profile --rate 500 --overhead 99 -o /tmp/t4 -- truth prodcons 8 200 4096 2>/tmp/t4.err; rc=$?; cat /tmp/t4/profile.json; grep ^numalab /tmp/t4.err >&2; exit $rc",
    ),
    (
        "truth_unequal",
        "numalab profile --rate 500 --overhead 99 -o /tmp/t5 -- truth unequal 8 24 4096 2>/tmp/t5.err; rc=$?; cat /tmp/t5/profile.json; grep ^numalab /tmp/t5.err >&2; exit $rc",
    ),
    (
        "truth_migrate",
        "numalab profile --rate 500 --overhead 99 -o /tmp/t6 -- truth migrate 8 24 4096 2>/tmp/t6.err; rc=$?; cat /tmp/t6/profile.json; grep ^numalab /tmp/t6.err >&2; exit $rc",
    ),
];

/// Steps run in the Quartet guest whose vCPUs share one host thread
/// (`--tcg single`): refinement's perf events make the guest kernel patch
/// its own code, which multi-threaded TCG sometimes gets wrong. (The other
/// steps stay in the multi-threaded guest: round-robin vCPUs decide which
/// of the lockstep readers reaches an armed page first, and skew the
/// shares.)
// Word counts off: with them on (the default since issue 29) the
// refinement watched one word of the falsely shared line from one thread
// only (both take the thread's debug registers); open in issue 29.
// 250 passes: 500 ran 48 s on an idle host (71 word windows, 145 write
// probes) and 266 s in a loaded lane (29 windows), its vCPUs sharing one
// host thread; 250 ran 15-20 s here with 59-63 windows, D's line found
// falsely shared each time (the test asks for 10 windows).
pub const REFINE_STEPS: &[(&str, &str)] = &[(
    "profile_refine",
    "numalab profile --rate 2000 --refine auto --word-counts off -o /tmp/prof -- profile_truth 250 2>/tmp/prof.err; rc=$?; cat /tmp/prof/profile.json; grep ^numalab /tmp/prof.err >&2; exit $rc",
)];

/// Steps run in the ring guest with the CPU-less node 4.
pub const RING_STEPS: &[(&str, &str)] = &[(
    "profile_cpuless",
    "numalab profile --rate 2000 -o /tmp/prof -- profile_truth 100 4 2>/tmp/prof.err; rc=$?; cat /tmp/prof/profile.json; grep ^numalab /tmp/prof.err >&2; exit $rc",
)];

/// The program's lines (array addresses) and the profile after them.
/// (A fixed rate: the guest's emulated CPUs make the adaptive rate's
/// costs meaningless, and the shares need the samples.)
fn run(g: &Guest, step: &str) -> (Vec<(String, u64, u64)>, Value) {
    let s = g.step(step);
    assert_eq!(s.rc, 0, "step {step}: {}\n{}", s.err, s.out);
    let at = s
        .out
        .find("\n{")
        .expect("a JSON profile after the program's output")
        + 1;
    let (program, json) = s.out.split_at(at);
    assert!(program.contains("wrong sums 0"), "{program}");
    let arrays = program
        .lines()
        .filter(|l| l.len() > 2 && l.as_bytes()[1] == b' ' && l.contains(" 0x"))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (
                w[0].to_string(),
                u64::from_str_radix(w[1].trim_start_matches("0x"), 16).unwrap(),
                w[2].parse().unwrap(),
            )
        })
        .collect();
    (arrays, parse_json(json, step))
}

/// The region holding the array named `name`.
fn region<'a>(arrays: &[(String, u64, u64)], v: &'a Value, name: &str) -> &'a Value {
    let (_, addr, bytes) = arrays.iter().find(|a| a.0 == name).unwrap();
    v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["first_address"] == *addr && r["bytes"] == *bytes)
        .unwrap_or_else(|| panic!("no region for {name} at {addr:#x}: {v}"))
}

fn pages(r: &Value) -> Vec<(String, u64)> {
    r["pages_by_node"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(n, p)| (n.clone(), p.as_u64().unwrap()))
        .collect()
}

/// `--threads 1-2` keeps the samples of the first two workers the program
/// created, pinned to CPUs 0 and 1 (node 0): array A, on node 0, is then
/// local, C (bound to node 3, read from node 0) all remote, and E (read
/// only by node 3's threads) unsampled; the other six threads' faults are
/// counted, not recorded.
#[test]
fn quartet_threads_keep_only_the_selected_threads_samples() {
    let g = quartet();
    let (arrays, v) = run(g, "profile_threads");
    let threads = v["threads"].as_array().unwrap();
    let sampled: Vec<(u64, Vec<u64>)> = threads
        .iter()
        .filter(|t| t["samples"].as_u64().unwrap() > 0)
        .map(|t| {
            let nodes = t["nodes"].as_array().unwrap();
            (
                t["ordinal"].as_u64().unwrap(),
                nodes.iter().map(|n| n.as_u64().unwrap()).collect(),
            )
        })
        .collect();
    assert_eq!(
        sampled,
        [(1, vec![0]), (2, vec![0])],
        "the selected workers, on node 0: {threads:?}"
    );
    assert!(
        v["selection"]["samples_of_other_threads"].as_u64().unwrap() > 0,
        "{}",
        v["selection"]
    );
    let a = region(&arrays, &v, "A");
    let n = a["samples"].as_u64().unwrap();
    assert!(n >= 10, "A: only {n} samples");
    assert!(a["remote_share"].as_f64().unwrap() <= 0.05, "{a}");
    let c = region(&arrays, &v, "C");
    assert!(c["samples"].as_u64().unwrap() >= 5, "{c}");
    assert_eq!(c["remote_share"], 1.0, "{c}");
    assert_eq!(region(&arrays, &v, "E")["samples"], 0);
}

#[test]
fn quartet_profile_finds_main_thread_init_local_slices_and_the_far_array() {
    let g = quartet();
    let (arrays, v) = run(g, "profile_truth");
    assert_eq!(arrays.len(), 6, "{arrays:?}");
    // A: every page on node 0 (the main thread, on CPU 0, wrote it), read
    // by 8 threads, 6 of them on other nodes.
    let a = region(&arrays, &v, "A");
    assert_eq!(pages(a), [("0".to_string(), 24 * 256 - 1)]);
    let n = a["samples"].as_u64().unwrap();
    assert!(n >= 40, "A: only {n} samples");
    // The share from word counts, judged by its own interval (the fault
    // samples' count says nothing of its error).
    let e = &a["estimate"];
    assert!(e["placed_cells"].as_u64().unwrap() >= 30, "A: {e}");
    let width = e["remote"]["high"].as_f64().unwrap() - e["remote"]["low"].as_f64().unwrap();
    let got = a["remote_share"].as_f64().unwrap();
    assert!(
        (got - 0.75).abs() <= width.max(0.10),
        "A: remote share {got:.3}, want 0.75 within {width:.3}: {e}"
    );
    // The 8 readers (ordinals 1-8), and the main thread (0) only if a
    // page was armed while it was still writing it: it initialised A, so
    // such accesses are true ones (CI saw it once), but never many.
    let ordinal_of = |tid: &str| -> Option<u64> {
        v["threads"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| tid.parse().ok() == t["tid"].as_u64())
            .and_then(|t| t["ordinal"].as_u64())
    };
    let mut by_ordinal: Vec<(Option<u64>, u64)> = a["threads"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(tid, n)| (ordinal_of(tid), n.as_u64().unwrap()))
        .collect();
    by_ordinal.sort();
    if by_ordinal.first().map(|t| t.0) == Some(Some(0)) {
        let main = by_ordinal.remove(0);
        assert!(main.1 * 20 <= n, "the main thread's {} of {n}: {a}", main.1);
    }
    let readers: Vec<Option<u64>> = by_ordinal.iter().map(|t| t.0).collect();
    assert_eq!(readers, (1..=8).map(Some).collect::<Vec<_>>(), "{a}");
    let from: Vec<&String> = a["accesses"].as_object().unwrap().keys().collect();
    assert_eq!(from, ["0", "1", "2", "3"], "A is read from every node");
    // B: each thread's slice first-touched and read by its owner.
    let b = region(&arrays, &v, "B");
    let nb = b["samples"].as_u64().unwrap();
    assert!(nb >= 20, "B: only {nb} samples");
    assert!(b["remote_share"].as_f64().unwrap() <= 0.05, "{b}");
    let bp = pages(b);
    assert_eq!(bp.len(), 4, "B's slices on every node: {bp:?}");
    // Its page map, from the page runs written at exit: the slices in
    // address order, nodes 0, 1, 2, 3 (two CPUs' slices each), every page
    // placed but the partial ones at either end.
    let map = &b["page_map"];
    let (mut seq, mut unknown) = (Vec::<i64>::new(), 0);
    for r in map["runs"].as_array().unwrap() {
        match r["node"].as_i64() {
            Some(n) if seq.last() != Some(&n) => seq.push(n),
            Some(_) => {}
            None => unknown += r["cells"].as_u64().unwrap(),
        }
    }
    assert_eq!(seq, [0, 1, 2, 3], "B's pages in address order: {map}");
    assert!(unknown <= 2, "B: {unknown} cells of unknown node: {map}");
    // C: bound to node 3, read only from node 0: every access remote, at
    // the SLIT distance of 0 to 3.
    let c = region(&arrays, &v, "C");
    assert_eq!(pages(c), [("3".to_string(), 2048)]);
    assert_eq!(c["kind"], "mmap");
    assert_eq!(c["remote_share"], 1.0, "{c}");
    let cfrom: Vec<&String> = c["accesses"].as_object().unwrap().keys().collect();
    assert_eq!(cfrom, ["0"]);
    let slit: Vec<f64> = g
        .step("profile_distance_0")
        .out
        .split_whitespace()
        .map(|d| d.parse().unwrap())
        .collect();
    let ratio = c["distance_ratio"].as_f64().unwrap();
    assert!(
        (ratio - slit[3] / slit[0]).abs() < 1e-9,
        "{ratio} vs SLIT {slit:?}"
    );
    // The diagnoses, from those numbers: A is one node's pages shared by
    // all (interleave over the accessing nodes), C is bound away from its
    // only users (bind it to node 0); B has none.
    let diag = |r: &Value| -> Vec<Value> {
        let i = v["regions"]
            .as_array()
            .unwrap()
            .iter()
            .position(|x| x == r)
            .unwrap();
        v["diagnoses"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["region"] == i)
            .cloned()
            .collect()
    };
    let da = diag(a);
    assert_eq!(da.len(), 1, "{da:?}");
    assert_eq!(da[0]["kind"], "one-node-shared");
    // Its first touches, where sampled, were the main thread's (pinned to
    // CPU 0), and the diagnosis says so.
    let pid = v["pid"].as_u64().unwrap();
    let fa = &a["first_touch"];
    if fa["samples"].as_u64().unwrap_or(0) >= 5 {
        assert_eq!(fa["threads"].as_object().unwrap().len(), 1, "{fa}");
        assert!(
            da[0]["text"].as_str().unwrap().contains(&format!(
                "first touched by thread {pid} (the main thread, pinned to CPU 0)"
            )),
            "{}",
            da[0]["text"]
        );
    }
    // E: initialised by the main thread on node 0, read only by node 3's
    // threads: private data first-touched by another thread.
    let e = region(&arrays, &v, "E");
    assert_eq!(pages(e), [("0".to_string(), 2047)]);
    // The word counts also see the main thread's initialising writes
    // (node 0, local), which the fault samples missed: the share is just
    // under 1 (0.974 in a run), its accesses all from node 3.
    let share = e["remote_share"].as_f64().unwrap();
    assert!(share > 0.95 && share <= 1.0, "{e}");
    // Its fault samples: node 3's readers, and node 0's only when the
    // sampler armed a page before the main thread had finished writing it
    // (seen in CI's run with three guests side by side); those are a small
    // part of the main thread's one pass against node 3's reads.
    let from_node = |n: &str| -> u64 {
        e["accesses"][n]
            .as_object()
            .map_or(0, |m| m.values().map(|c| c.as_u64().unwrap()).sum())
    };
    let efrom: Vec<&String> = e["accesses"].as_object().unwrap().keys().collect();
    assert!(
        efrom.iter().all(|n| *n == "0" || *n == "3") && efrom.contains(&&"3".to_string()),
        "E is read from node 3 (and written once from node 0): {e}"
    );
    assert!(
        from_node("0") * 10 <= from_node("3"),
        "E's samples from node 0 (the initialising pass) against node 3's reads: {e}"
    );
    // Its first touches, where sampled, were all the main thread's. How
    // many are sampled is chance: the main thread writes E's 8 MiB in a few
    // ms, about 6 expected at this rate (CI once drew 4). With at least 5
    // the diagnosis names the main thread; with fewer it must not claim a
    // toucher, and says only that E is bound away from its users.
    let fe = &e["first_touch"];
    let ne = fe["samples"].as_u64().unwrap_or(0);
    if ne > 0 {
        assert_eq!(
            fe["threads"],
            serde_json::json!({ pid.to_string(): ne }),
            "{fe}"
        );
    }
    let de = diag(e);
    assert_eq!(de.len(), 1, "{de:?}");
    let kind = if ne >= 5 {
        "first-touched-elsewhere"
    } else {
        "remote-bound"
    };
    assert_eq!(de[0]["kind"], kind, "{ne} first touches: {de:?}");
    assert!(de[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("numalab run --membind 3 -- "));
    assert!(da[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("numalab run --interleave 0-3 -- "));
    let dc = diag(c);
    assert_eq!(dc.len(), 1, "{dc:?}");
    assert_eq!(dc[0]["kind"], "remote-bound");
    assert!(dc[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("numalab run --membind 0 -- "));
    assert!(diag(b).is_empty(), "{:?}", diag(b));
    // The threads: 9 seen at most (8 readers; the main thread only wrote
    // before sampling could see it), each on one CPU of its own.
    let threads = v["threads"].as_array().unwrap();
    assert!(threads.len() >= 8, "{threads:?}");
    for t in threads
        .iter()
        .filter(|t| t["samples"].as_u64().unwrap() > 0)
    {
        assert_eq!(t["cpus"].as_array().unwrap().len(), 1, "pinned: {t}");
        assert_eq!(t["allowed_cpus"], 1, "pinned: {t}");
    }
}

/// Struct D: two counters on one line, written by the threads on CPU 0
/// (node 0) and CPU 2 (node 1). Refinement watches the line's words and
/// finds each counter written from its node only: false sharing, told as
/// a diagnosis with the words and nodes.
#[test]
fn quartet_refinement_finds_the_falsely_shared_line_and_its_words() {
    let g = quartet_for_refinement();
    let (arrays, v) = run(g, "profile_refine");
    let (_, d, _) = arrays.iter().find(|a| a.0 == "D").unwrap();
    let r = &v["refinement"];
    assert!(r["unavailable"].is_null(), "{r}");
    assert!(r["word_windows"].as_u64().unwrap() >= 10, "{r}");
    let line = r["lines"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["address"] == *d)
        .unwrap_or_else(|| panic!("D's line {d:#x} was not watched: {r}"));
    assert_eq!(line["false_sharing"], true, "{line}");
    assert_eq!(line["written_from"], serde_json::json!([0, 1]), "{line}");
    assert_eq!(line["shared_words"], serde_json::json!([]), "{line}");
    assert_eq!(
        (&line["offset"], &line["page_node"]),
        (&0.into(), &0.into()),
        "{line}"
    );
    assert!(line["remote_hits"].as_u64().unwrap() > 0, "{line}");
    let words = line["words"].as_array().unwrap();
    let written: Vec<(u64, Vec<String>)> = words
        .iter()
        .filter(|w| !w["writes"].as_object().unwrap().is_empty())
        .map(|w| {
            (
                w["offset"].as_u64().unwrap(),
                w["writes"].as_object().unwrap().keys().cloned().collect(),
            )
        })
        .collect();
    assert_eq!(
        written,
        [(0, vec!["0".to_string()]), (8, vec!["1".to_string()])],
        "{line}"
    );
    let region = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|x| x["first_address"] == *d)
        .unwrap();
    let fs: Vec<&Value> = v["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["kind"] == "false-sharing")
        .collect();
    assert_eq!(fs.len(), 1, "{fs:?}");
    assert_eq!(fs[0]["region"], region);
    let text = fs[0]["text"].as_str().unwrap();
    assert!(
        text.contains(&format!("line {d:#x} (offset 0 of "))
            && text.contains("+0 by node 0 (")
            && text.contains("+8 by node 1 ("),
        "{text}"
    );
    assert!(fs[0]["fix"]
        .as_str()
        .unwrap()
        .starts_with("a code change: put the words"));
}

#[test]
fn quartet_profile_locates_the_static_array_and_the_stack_buffer_on_their_writers_node() {
    let g = quartet();
    let s = g.step("profile_truth");
    let (arrays, v) = run(g, "profile_truth");
    // Written by the thread on CPU 7, on node 3: every page of the
    // static array there, named by its symbol and object.
    let (_, addr, bytes) = arrays.iter().find(|a| a.0 == "S").unwrap();
    let st = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["site"] == "static_table")
        .unwrap_or_else(|| panic!("no static_table region: {v}"));
    assert_eq!(
        (&st["first_address"], &st["bytes"]),
        (&(*addr).into(), &(*bytes).into())
    );
    assert_eq!(
        (&st["kind"], &st["object"]),
        (&"static".into(), &"profile_truth".into())
    );
    assert_eq!(pages(st), [("3".to_string(), 1024)]);
    assert_eq!(st["sampled"], false);
    // The buffer on that thread's stack: at least its 256 pages on node 3
    // (the few pages glibc wrote when it made the thread are node 0's).
    let tid: u64 = s
        .out
        .lines()
        .find_map(|l| l.strip_prefix("stack buffer: thread "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|t| t.parse().ok())
        .unwrap();
    let stack = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["thread"] == tid)
        .unwrap_or_else(|| panic!("no stack of thread {tid}: {v}"));
    assert_eq!(stack["kind"], "stack");
    assert_eq!(stack["site"], format!("stack of thread {tid}"));
    let on3 = stack["pages_by_node"]["3"].as_u64().unwrap_or(0);
    assert!(on3 >= 256, "{stack}");
}

#[test]
fn ring_profile_reports_the_region_on_the_cpuless_node() {
    let g = ring();
    let (arrays, v) = run(g, "profile_cpuless");
    let c = region(&arrays, &v, "C");
    assert_eq!(pages(c), [("4".to_string(), 2048)]);
    assert_eq!(c["remote_share"], 1.0, "{c}");
    let cfrom: Vec<&String> = c["accesses"].as_object().unwrap().keys().collect();
    assert_eq!(cfrom, ["0"]);
    assert!(c["accesses"]["0"]["4"].as_u64().unwrap() > 0);
    // Diagnosed on the CPU-less node: hot in the slow tier, or bound away
    // from its only users (which one depends on its share of all samples).
    let i = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|x| x == c)
        .unwrap();
    let d: Vec<&Value> = v["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["region"] == i)
        .collect();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["pages_node"], 4);
    let kind = d[0]["kind"].as_str().unwrap();
    assert!(kind == "cpuless-hot" || kind == "remote-bound", "{kind}");
}

/// truth.c's output: each region (name, address, bytes) and its true
/// accesses by (CPU node, memory node); the threads' lines.
struct Truth {
    regions: Vec<(String, u64, u64)>,
    counts: std::collections::BTreeMap<String, std::collections::BTreeMap<(u32, u32), u64>>,
}

impl Truth {
    fn parse(out: &str) -> Truth {
        let mut t = Truth {
            regions: Vec::new(),
            counts: Default::default(),
        };
        for l in out.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["region", name, addr, bytes] => t.regions.push((
                    name.to_string(),
                    u64::from_str_radix(addr.trim_start_matches("0x"), 16).unwrap(),
                    bytes.parse().unwrap(),
                )),
                ["truth", name, c, m, n] => {
                    *t.counts
                        .entry(name.to_string())
                        .or_default()
                        .entry((c.parse().unwrap(), m.parse().unwrap()))
                        .or_default() += n.parse::<u64>().unwrap();
                }
                _ => {}
            }
        }
        t
    }

    /// The regions' names as numalab groups them (one site each): A, the
    /// private arrays P*, the buffers BUF*, S, F.
    fn group(name: &str) -> String {
        name.trim_end_matches(|c: char| c.is_ascii_digit())
            .to_string()
    }

    /// The true counts of a group, by (CPU node, memory node).
    fn group_counts(&self, group: &str) -> std::collections::BTreeMap<(u32, u32), u64> {
        let mut out = std::collections::BTreeMap::new();
        for (name, cells) in &self.counts {
            if Truth::group(name) == group {
                for (k, n) in cells {
                    *out.entry(*k).or_default() += n;
                }
            }
        }
        out
    }

    /// The profile's region for a group: the one whose first address is
    /// one of the group's and whose bytes are the group's in all.
    fn region<'a>(&self, v: &'a Value, group: &str) -> &'a Value {
        let members: Vec<&(String, u64, u64)> = self
            .regions
            .iter()
            .filter(|r| Truth::group(&r.0) == group)
            .collect();
        let bytes: u64 = members.iter().map(|r| r.2).sum();
        v["regions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["bytes"] == bytes && members.iter().any(|m| r["first_address"] == m.1))
            .unwrap_or_else(|| panic!("no region for {group} ({bytes} bytes): {v}"))
    }
}

/// The program's output (before the JSON) and the profile.
fn truth_run(g: &Guest, step: &str) -> (Truth, Value) {
    let s = g.step(step);
    assert_eq!(s.rc, 0, "step {step}: {}\n{}", s.err, s.out);
    let at = s
        .out
        .find("\n{")
        .expect("a JSON profile after the program's output")
        + 1;
    let (program, json) = s.out.split_at(at);
    (Truth::parse(program), parse_json(json, step))
}

/// z of the family-wise check: a two-sided 1% error over at most 200
/// checks of one test (Bonferroni: Φ⁻¹(1 − 0.01 / 400)). The truth suite
/// checks about 110 shares and cells a run: at 95% each, five or so miss
/// their interval by chance every run, and the tolerance used before (the
/// interval's width, fewer standard errors at the truth than at a low
/// estimate) still failed CI once: `random P (1, 1)` 0.060, 95% CI
/// 0.017–0.196, truth 0.250, from about 35 draws.
const Z_FAMILY: f64 = 4.056;

/// Wilson's interval of `p` from `n` draws at `z`.
fn wilson_at(p: f64, n: f64, z: f64) -> (f64, f64) {
    let d = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / d;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / d;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The draws a printed 95% Wilson interval stands for: the `n` whose
/// interval around `share` is as wide (the width falls as `n` grows).
fn draws_of_interval(share: f64, low: f64, high: f64) -> f64 {
    let width = |n: f64| {
        let (l, h) = wilson_at(share, n, 1.96);
        h - l
    };
    let (mut lo, mut hi) = (1.0f64, 1e9f64);
    for _ in 0..200 {
        let mid = (lo * hi).sqrt();
        if width(mid) > high - low {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// An estimate agrees with the truth: within 5 points, or inside the
/// family-wise interval at the draws its own 95% interval stands for (a
/// wrong estimator fails it: the page-fault samples' 0.95 from 167 draws
/// for the leader's 0.75 does, see the test below; one unlucky cell of a
/// hundred does not).
fn agrees(got: &Value, want: f64, what: &str) {
    let (share, low, high) = (
        got["share"].as_f64().unwrap(),
        got["low"].as_f64().unwrap(),
        got["high"].as_f64().unwrap(),
    );
    let n = draws_of_interval(share, low, high);
    let (flow, fhigh) = wilson_at(share, n, Z_FAMILY);
    assert!(
        (share - want).abs() <= 0.05 || (flow..=fhigh).contains(&want),
        "{what}: estimated {share:.3} (95% CI {low:.3}–{high:.3}, about {n:.0} draws; \
         family-wise {flow:.3}–{fhigh:.3}), truth {want:.3}"
    );
}

/// The check fails the biased estimators it exists for and passes the
/// CI's unlucky cell (no guest needed).
#[test]
fn the_family_wise_check_fails_a_biased_estimate_and_passes_chance() {
    let share = |s: f64, n: f64| {
        let (low, high) = wilson_at(s, n, 1.96);
        serde_json::json!({"share": s, "low": low, "high": high})
    };
    let n = draws_of_interval(
        0.3,
        wilson_at(0.3, 57.0, 1.96).0,
        wilson_at(0.3, 57.0, 1.96).1,
    );
    assert!((n - 57.0).abs() < 0.01, "{n}");
    // Issue 29's page-fault samples: 95% remote from 167, truth 75%.
    let biased = std::panic::catch_unwind(|| agrees(&share(0.95, 167.0), 0.75, "leader"));
    assert!(biased.is_err());
    // Word counts 0.40 from 300 draws for a truth of 0.25: a bias, caught.
    assert!(std::panic::catch_unwind(|| agrees(&share(0.40, 300.0), 0.25, "x")).is_err());
    agrees(&share(0.060, 35.0), 0.25, "random P (1, 1)");
    agrees(&share(0.72, 120.0), 0.75, "within 5 points");
}

/// Every group of the run with enough word counts: its remote share and
/// each cell of its access matrix against the truth.
fn check_truth(step: &str) -> (Truth, Value) {
    let (t, v) = truth_run(quartet_for_truth(), step);
    let groups: std::collections::BTreeSet<String> =
        t.regions.iter().map(|r| Truth::group(&r.0)).collect();
    let mut checked = 0;
    for g in &groups {
        let counts = t.group_counts(g);
        let all: u64 = counts.values().sum();
        if all == 0 {
            continue;
        }
        let r = t.region(&v, g);
        let e = &r["estimate"];
        if e["placed_cells"].as_u64().unwrap_or(0) < 30 {
            continue;
        }
        checked += 1;
        let remote: u64 = counts
            .iter()
            .filter(|((c, m), _)| c != m)
            .map(|(_, n)| n)
            .sum();
        agrees(
            &e["remote"],
            remote as f64 / all as f64,
            &format!("{step} {g} remote"),
        );
        // Known bias, open in issue 29 (docs/profile.md, "where it is
        // biased"): producer/consumer buffers' matrix cells (consumers'
        // reads under-estimated, 0.04 for a truth of 0.25 in one run); their
        // remote share is still checked.
        if step == "truth_prodcons" {
            continue;
        }
        for cell in e["matrix"].as_array().unwrap() {
            let key = (
                cell["cpu_node"].as_u64().unwrap() as u32,
                cell["memory_node"].as_u64().unwrap() as u32,
            );
            let want = counts.get(&key).copied().unwrap_or(0) as f64 / all as f64;
            agrees(cell, want, &format!("{step} {g} {key:?}"));
        }
        for (key, n) in &counts {
            let want = *n as f64 / all as f64;
            let seen = e["matrix"]
                .as_array()
                .unwrap()
                .iter()
                .any(|c| c["cpu_node"] == key.0 && c["memory_node"] == key.1);
            assert!(
                seen || want < 0.1,
                "{step} {g}: {key:?} ({want:.2} of the accesses) unseen: {e}"
            );
        }
    }
    assert!(checked >= 1, "{step}: no region had 30 word counts: {v}");
    (t, v)
}

/// The case: 8 workers on all 8 CPUs read A, which the main
/// thread initialised on node 0, in the same order, worker 0 in front
/// (truth: 6 of 8 readers remote, 75%). The page-fault samples go to the
/// leader; the word counts see every reader: A's remote share from at
/// least 100 of them within 0.60–0.90, the private arrays at most 10%.
#[test]
fn quartet_truth_leader_a_is_three_quarters_remote_by_word_counts() {
    let (t, v) = truth_run(quartet_for_truth(), "truth_leader");
    let a = t.region(&v, "A");
    let e = &a["estimate"];
    let n = e["placed_cells"].as_u64().unwrap();
    assert!(n >= 100, "A: only {n} word samples: {e}");
    let share = e["remote"]["share"].as_f64().unwrap();
    assert!((0.60..=0.90).contains(&share), "A: remote {share:.3}: {e}");
    assert_eq!(
        a["remote_share"], e["remote"]["share"],
        "the headline share is the estimate"
    );
    let nodes: Vec<&String> = e["cpu_nodes"].as_object().unwrap().keys().collect();
    assert_eq!(
        nodes,
        ["0", "1", "2", "3"],
        "A is read from every node: {e}"
    );
    let p = t.region(&v, "P");
    let pe = &p["estimate"]["remote"];
    assert!(
        pe["share"].as_f64().unwrap() <= 0.10,
        "private arrays: {pe}"
    );
    // The diagnosis rests on the word counts and names every node.
    let i = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .position(|r| r == a)
        .unwrap();
    let d: Vec<&Value> = v["diagnoses"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["region"] == i)
        .collect();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["kind"], "one-node-shared");
    assert_eq!(d[0]["source"], "word counts");
    assert_eq!(d[0]["accessing_nodes"], serde_json::json!([0, 1, 2, 3]));
}

/// The plan for A interleaves it over all four nodes, with its expected
/// interval; `run --plan --verify` puts it there (placed), and the
/// program's output, but for where its pages went, and its exit status
/// are what they are without numalab.
#[test]
fn quartet_truth_leader_plan_interleaves_a_and_run_verifies_it_placed() {
    let g = quartet_for_truth();
    let plan = parse_json(&g.step("truth_leader_plan").out, "truth_leader_plan");
    let entries = plan["entries"].as_array().unwrap();
    let (t, _) = truth_run(g, "truth_leader");
    let a_bytes = t.regions.iter().find(|r| r.0 == "A").unwrap().2;
    let a: Vec<&Value> = entries.iter().filter(|e| e["bytes"] == a_bytes).collect();
    assert_eq!(a.len(), 1, "{plan}");
    assert_eq!(a[0]["policy"], "interleave:0-3", "{}", a[0]);
    let ex = &a[0]["expected"];
    assert_eq!(ex["source"], "word counts", "{ex}");
    let before = ex["before_interval"].as_array().unwrap();
    assert!(before[0].as_f64().unwrap() > 0.5, "{ex}");
    // Only A moves: the private arrays stay where their readers are.
    assert_eq!(entries.len(), 1, "{plan}");
    let plain = g.step("truth_leader_plain");
    let planned = g.step("truth_leader_planned");
    assert_eq!(
        (plain.rc, planned.rc),
        (0, 0),
        "{}\n{}",
        plain.err,
        planned.err
    );
    // Where the pages are changes A's truth lines; the rest must not.
    let same = |out: &str| -> Vec<String> {
        let t = Truth::parse(out);
        let mut lines: Vec<String> = t
            .regions
            .iter()
            .map(|(n, _, b)| {
                let c = t.counts.get(n).cloned().unwrap_or_default();
                let cpus: std::collections::BTreeMap<u32, u64> =
                    c.iter().fold(Default::default(), |mut m, ((cpu, _), k)| {
                        *m.entry(*cpu).or_default() += k;
                        m
                    });
                format!("{n} {b} {cpus:?}")
            })
            .collect();
        lines.extend(out.lines().filter(|l| l.starts_with("thread ")).map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            format!("{} {} {} {}", w[1], w[3], w[4], w[5])
        }));
        lines
    };
    assert_eq!(same(&plain.out), same(&planned.out));
    let after = Truth::parse(&planned.out).group_counts("A");
    let by_node: std::collections::BTreeMap<u32, u64> =
        after
            .iter()
            .fold(Default::default(), |mut m, ((_, mem), k)| {
                *m.entry(*mem).or_default() += k;
                m
            });
    assert_eq!(
        by_node.len(),
        4,
        "A's accesses by memory node after the plan: {by_node:?}"
    );
    let check = parse_json(&g.step("truth_leader_check").out, "truth_leader_check");
    let checks = check["plan"]["entries"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "{check}");
    assert_eq!(checks[0]["verdict"], "placed", "{}", checks[0]);
    let pages: u64 = checks[0]["pages_by_node"]
        .as_object()
        .unwrap()
        .values()
        .map(|k| k.as_u64().unwrap())
        .sum();
    assert_eq!(pages, a_bytes / 4096, "{}", checks[0]);
}

/// The truth suite's other access patterns: staggered scans, random
/// reads, partitioned slices, producers and consumers on other nodes,
/// unequal work, a migrating thread. Every region with 30 word counts or
/// more agrees with its truth, share and matrix.
#[test]
fn quartet_truth_suite_estimates_agree_with_the_truth() {
    let mut failed = Vec::new();
    for step in [
        "truth_staggered",
        "truth_random",
        "truth_slices",
        "truth_prodcons",
        "truth_unequal",
        "truth_migrate",
    ] {
        // Every pattern checked before the verdict: one failure does not
        // hide the others.
        let checked = std::panic::catch_unwind(|| {
            let (t, v) = check_truth(step);
            if step == "truth_slices" {
                let s = t.region(&v, "S");
                let r = s["estimate"]["remote"]["share"].as_f64().unwrap();
                assert!(r <= 0.10, "slices are local: {}", s["estimate"]);
            }
        });
        if let Err(e) = checked {
            let why = crate::common::panic_text(&*e);
            failed.push(format!(
                "{step}: {}",
                why.chars().take(600).collect::<String>()
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

/// Inside the guest, which has no binutils and whose programs keep their
/// symbols but not their debug information (guest/boot.sh), the sites of
/// the truth program's arrays are named by function, with the call's
/// address: `main (profile_truth+0x…)`; `--regions site:main` resolves in
/// the program's own symbols there and keeps those arrays.
#[test]
fn quartet_sites_are_named_by_function_without_binutils() {
    let g = quartet();
    let tools = g.step("profile_no_binutils");
    assert_eq!(
        tools.out.split_whitespace().collect::<Vec<_>>(),
        [
            "no-addr2line",
            "no-objdump",
            "no-nm",
            "no-readelf",
            "no-c++filt",
            "no-ldd"
        ],
        "the guest must have no binutils: {}",
        tools.out
    );
    let (arrays, v) = run(g, "profile_truth");
    for name in ["A", "B", "C", "E"] {
        let r = region(&arrays, &v, name);
        let site = r["site"].as_str().unwrap();
        let call = site
            .strip_prefix("main (profile_truth+0x")
            .and_then(|s| s.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{name}: site {site}"));
        assert!(u64::from_str_radix(call, 16).is_ok(), "{name}: {site}");
        for f in r["stack"].as_array().unwrap() {
            assert!(
                !f.as_str().unwrap().contains("libnumalab_preload"),
                "{name}: {}",
                r["stack"]
            );
        }
    }
    let (arrays, v) = run(g, "profile_site_term");
    for name in ["A", "B", "C", "E"] {
        assert!(
            region(&arrays, &v, name)["site"]
                .as_str()
                .unwrap()
                .starts_with("main (profile_truth+0x"),
            "{name}"
        );
    }
    assert_eq!(v["selection"]["regions"], "site:main", "{}", v["selection"]);
}
