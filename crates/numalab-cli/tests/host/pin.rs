//! `numalab run --pin`: one CPU per thread, likwid-pin's way, done by the
//! preload library as each thread starts and checked per thread by
//! `--verify` (the records of the library and the kernel's affinity at the
//! exit). This machine has two CPUs: the lists alternate them, so a thread
//! on the wrong one shows.

use crate::common;

use common::{assert_one_line_error, numalab, parse_json, scratch};
use serde_json::Value;

fn pins(json: &std::path::Path) -> Value {
    let v = parse_json(&std::fs::read_to_string(json).unwrap(), "verify json");
    v["pins"].clone()
}

/// `(ordinal, cpu)` of each thread of a pin check, in ordinal order.
fn cpus_by_ordinal(p: &Value) -> Vec<(u64, Option<u64>)> {
    p["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["ordinal"].as_u64().unwrap(), t["cpu"].as_u64()))
        .collect()
}

#[test]
fn each_thread_of_a_c_program_gets_the_next_cpu_and_a_forked_child_pins_its_own() {
    let prog = common::thread_tree_program();
    let json = scratch("pin_c").join("v.json");
    let out = numalab(&[
        "run",
        "--pin",
        "1,0",
        "--verify",
        "--verify-json",
        json.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        "64",
    ]);
    assert_eq!(out.rc, 0, "stderr: {}", out.err);
    let p = pins(&json);
    assert_eq!(p["verified"], true, "{p}");
    assert_eq!(p["cpus"], serde_json::json!([1, 0]));
    // The main thread on the list's first CPU; four created threads
    // (touch-1..3 and touch-2b, which touch-2 creates) on 0, 1, 0, 1 in
    // the order they were created, whatever order they started in.
    let by = cpus_by_ordinal(&p);
    assert_eq!(
        by,
        [
            (0, Some(1)),
            (1, Some(0)),
            (2, Some(1)),
            (3, Some(0)),
            (4, Some(1))
        ],
        "{p}"
    );
    for t in p["threads"].as_array().unwrap() {
        assert_eq!(t["errno"], 0, "{t}");
        assert_eq!(t["ran_on"], t["cpu"], "{t}");
        assert!(t["problem"].is_null(), "{t}");
    }
    // The forked child (its thread child-t) pinned in its own process.
    assert_eq!(p["other_processes"], 1, "{p}");
}

#[test]
fn python_threads_are_pinned_and_skip_leaves_the_one_asked() {
    // Debian's interpreter, a program nobody here wrote: its threads come
    // from pthread_create inside libpython.
    let python = "/usr/bin/python3";
    let dir = scratch("pin_python");
    let json = dir.join("v.json");
    // Each thread's CPUs are printed by the main thread after the joins
    // (threads printing at once interleave their lines).
    let script = "import threading, os, time\n\
                  seen = []\n\
                  def f():\n    time.sleep(0.2)\n    seen.append(sorted(os.sched_getaffinity(0)))\n\
                  print(os.getpid(), sorted(os.sched_getaffinity(0)))\n\
                  ts = [threading.Thread(target=f) for _ in range(3)]\n\
                  [t.start() for t in ts]\n[t.join() for t in ts]\n\
                  [print('thread', s) for s in seen]\n";
    let out = numalab(&[
        "run",
        "--pin",
        "0,1",
        "--skip",
        "0x2",
        "--verify",
        "--verify-json",
        json.to_str().unwrap(),
        "--",
        python,
        "-c",
        script,
    ]);
    assert_eq!(out.rc, 0, "stderr: {}", out.err);
    let p = pins(&json);
    assert_eq!(p["verified"], true, "{p}");
    // Main on 0; created thread 1 on 1; thread 2 skipped (bit 1); thread
    // 3 takes the next CPU of the list, 0.
    assert_eq!(
        cpus_by_ordinal(&p),
        [(0, Some(0)), (1, Some(1)), (2, None), (3, Some(0))]
    );
    // What the program itself saw: main on {0}, the others as pinned, the
    // skipped one on the process's CPUs (both), not its creator's one.
    let lines: Vec<&str> = out.out.lines().collect();
    assert!(lines[0].ends_with(" [0]"), "{}", out.out);
    let mut seen: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.split_once(' ').unwrap().1)
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, ["[0, 1]", "[0]", "[1]"], "{}", out.out);
}

#[test]
fn the_text_says_each_thread_and_bad_lists_are_one_line_errors() {
    let prog = common::thread_tree_program();
    let out = numalab(&[
        "run",
        "--pin",
        "compact",
        "--verify",
        "--",
        prog.to_str().unwrap(),
        "16",
    ]);
    assert_eq!(out.rc, 0, "stderr: {}", out.err);
    assert!(
        out.err.contains("pinned threads (--pin 0,1): 5 pinned, 0 skipped: each ran on its CPU (checked with the kernel)"),
        "{}",
        out.err
    );
    assert!(out.err.contains("  thread 0 (main, tid "), "{}", out.err);
    for (args, want) in [
        (vec!["--pin", "0,7"], "--pin 0,7: CPU 7 is not one the command may run on ({0-1})"),
        (vec!["--pin", "1-0"], "--pin 1-0: '1-0' is no ascending range of at most 65536 CPUs"),
        (vec!["--pin", "x"], "--pin x: 'x' is no CPU or range; give CPUs in order (0,2,1 or 0-3), compact or scatter"),
        (vec!["--pin", "0", "-C", "1"], "--pin 0: CPU 0 is not one the command may run on ({1})"),
    ] {
        let mut a = vec!["run"];
        a.extend(args);
        a.extend(["--", "true"]);
        let out = numalab(&a);
        assert_one_line_error(&a.join(" "), out.rc, &out.err, 2, want);
    }
    let out = numalab(&["run", "--skip", "0x1", "--", "true"]);
    assert_ne!(out.rc, 0);
    assert!(out.err.contains("--pin"), "{}", out.err);
    let out = numalab(&["run", "--pin", "0", "--skip", "zz", "--", "true"]);
    assert!(
        out.err.contains("'zz' is no hexadecimal mask of threads"),
        "{}",
        out.err
    );
}

#[test]
fn openmp_threads_are_pinned_in_team_order_and_skip_leaves_the_first_helper() {
    // GCC's OpenMP runtime (libgomp, Debian's): its team threads come from
    // pthread_create inside the library, in the order of their thread
    // numbers, so `--skip 0x1` leaves OpenMP thread 1 (the first helper,
    // as likwid-pin's skip mask does for runtimes with a shepherd thread).
    let dir = scratch("pin_openmp");
    let prog = dir.join("omp_threads");
    let st = std::process::Command::new("gcc")
        .args(["-O1", "-fopenmp", "-o"])
        .arg(&prog)
        .arg(common::repo_root().join("crates/numalab-cli/tests/programs/omp_threads.c"))
        .status()
        .expect("gcc (scripts/install-deps.sh installs it)");
    assert!(st.success(), "gcc -fopenmp failed");
    let json = dir.join("v.json");
    let out = common::Run::new(&[
        "run",
        "--pin",
        "1,0",
        "--skip",
        "0x1",
        "--verify",
        "--verify-json",
        json.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
    ])
    .env("OMP_NUM_THREADS", "4")
    .env("OMP_PROC_BIND", "false")
    .run();
    assert_eq!(out.rc, 0, "stderr: {}", out.err);
    // The program's own result, unchanged.
    assert!(
        out.out.contains("threads 4 sum 499999500000"),
        "{}",
        out.out
    );
    let p = pins(&json);
    assert_eq!(p["verified"], true, "{p}");
    // Main (OpenMP thread 0) on 1; thread 1 skipped; 2 and 3 take the next
    // CPUs of the list: 0, then 1 again.
    assert_eq!(
        cpus_by_ordinal(&p),
        [(0, Some(1)), (1, None), (2, Some(0)), (3, Some(1))]
    );
    // What each OpenMP thread saw itself: the skipped one the command's
    // CPUs, not its creator's one.
    for (t, cpus) in [(0, "1"), (1, "0,1"), (2, "0"), (3, "1")] {
        let line = format!("omp thread {t} cpus {cpus}\n");
        assert!(out.out.contains(&line), "'{line}' in {}", out.out);
    }
}
