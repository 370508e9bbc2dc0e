//! Placement plans and stripes on this machine (one node): `run --plan`
//! places a program's regions through the preload library and `--verify`
//! reads where their pages are from the kernel; the program's own `mbind`
//! on a planned region is skipped; `profile` writes plan.json and
//! `profile --plan` profiles without and with it; `run --mem
//! interleave:0@8` and emulated weights run any program; bad plans are
//! refused in one line. Where the pages go on several nodes is tested in
//! the Quartet guest (guest_experiments/plan.rs).

use crate::common;

use common::{
    fails, numalab, open_envelope, parse_json, preload_library, profile_truth_program, scratch,
    stripes_program,
};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// The lines of profile_truth.c that allocate A and C (an mmap the
/// program binds itself).
const A_LINE: u32 = 168;
const C_LINE: u32 = 170;

fn write_plan(dir: &Path, entries: &[(&str, &str)]) -> String {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(r, p)| serde_json::json!({"region": r, "policy": p}))
        .collect();
    let path = dir.join("plan.json");
    std::fs::write(
        &path,
        serde_json::json!({"schema": "numalab-plan/1", "entries": entries}).to_string(),
    )
    .unwrap();
    path.to_string_lossy().into_owned()
}

fn check<'a>(v: &'a Value, region: &str) -> &'a Value {
    v["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["region"] == region)
        .unwrap_or_else(|| panic!("no check of {region}: {v}"))
}

#[test]
fn run_plan_places_each_region_and_verifies_it_from_the_kernel() {
    preload_library();
    let dir = scratch("plan-run");
    let a = format!("site:profile_truth.c:{A_LINE}");
    let c = format!("site:profile_truth.c:{C_LINE}");
    let out = dir.join("verify.json");
    let prog = profile_truth_program();
    let plan = write_plan(
        &dir,
        &[
            (&a, "interleave:0"),
            (&c, "bind:0"),
            ("static:static_table", "preferred:0"),
            ("size>1G", "bind:0"),
        ],
    );
    let r = numalab(&[
        "run",
        "--plan",
        &plan,
        "--verify",
        "--verify-json",
        out.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        "3",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(r.out.contains("wrong sums 0"), "{}", r.out);
    let v: Value = parse_json(&std::fs::read_to_string(&out).unwrap(), "verify.json");
    // The process's placement as before, the plan's check beside it.
    assert!(
        v["mappings"].as_array().is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    let p = &v["plan"];
    let ea = check(p, &a);
    assert_eq!(ea["verdict"], "placed", "{ea}");
    // A, made page aligned: its 24 MiB are 6144 whole pages.
    assert_eq!(ea["pages_by_node"]["0"], 6144, "{ea}");
    assert_eq!(
        (ea["regions"].clone(), ea["bytes"].clone()),
        (1.into(), (6144 * 4096).into())
    );
    let ec = check(p, &c);
    assert_eq!(ec["pages_by_node"]["0"], 2048, "{ec}");
    let es = check(p, "static:static_table");
    assert_eq!(es["verdict"], "placed", "{es}");
    assert_eq!(es["pages_by_node"]["0"], 1024, "{es}");
    let big = check(p, "size>1G");
    assert_eq!(big["verdict"], "nothing-matched", "{big}");
    assert_eq!(big["regions"], 0);
    // profile_truth binds C itself: skipped, the plan kept.
    assert_eq!(p["program_mbinds_skipped"], 1, "{p}");
    assert_eq!(
        (p["refused"].clone(), p["processes"].clone()),
        (0.into(), 1.into())
    );

    // The same check as text on stderr.
    let r = numalab(&[
        "run",
        "--plan",
        &plan,
        "--verify",
        "--",
        prog.to_str().unwrap(),
        "2",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    let line = r
        .err
        .lines()
        .find(|l| l.contains(&c))
        .unwrap_or_else(|| panic!("{}", r.err));
    assert!(
        line.contains("placed") && line.contains("node 0: 2048"),
        "{line}"
    );
    assert!(
        r.err
            .contains("the program's own mbind on planned regions: 1 call(s) skipped"),
        "{}",
        r.err
    );
}

/// `numalab profile --rate 2000 OPTIONS -o OUT -- profile_truth PASSES`.
fn profile_truth(options: &[&str], out: &Path, passes: &str) -> common::Ran {
    let prog = profile_truth_program();
    let mut args = vec!["profile", "--rate", "2000"];
    args.extend_from_slice(options);
    args.extend([
        "-o",
        out.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        passes,
    ]);
    numalab(&args)
}

#[test]
fn profile_writes_a_plan_and_profiles_without_and_with_one() {
    preload_library();
    let dir = scratch("plan-profile");
    let prog = profile_truth_program();
    let out = dir.join("p");
    let r = profile_truth(&[], &out, "5");
    assert_eq!(r.rc, 0, "{}", r.err);
    // One node: nothing is remote, so there is nothing to fix, and no plan.
    assert!(out.join("profile.json").is_file());
    assert!(!out.join("plan.json").exists());
    assert!(
        r.err
            .contains("plan: no region has a placement fix (no plan.json written)"),
        "{}",
        r.err
    );
    assert!(!r.out.contains("plan:"), "the profile on stdout: {}", r.out);

    let c = format!("site:profile_truth.c:{C_LINE}");
    let plan = write_plan(&dir, &[(&c, "bind:0")]);
    let out = dir.join("q");
    let r = profile_truth(&["--plan", &plan], &out, "5");
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(
        r.err.contains("without the plan") && r.err.contains("with the plan"),
        "{}",
        r.err
    );
    let compared = std::fs::read_to_string(out.join("compare.txt")).unwrap();
    // On stderr, after the program's own stderr; stdout is the program's
    // output alone (twice: without and with).
    assert!(r.err.contains(&compared), "{}", r.err);
    assert_eq!(r.out.matches("wrong sums 0").count(), 2, "{}", r.out);
    assert!(!r.out.contains("with the plan"), "{}", r.out);
    assert!(compared.contains("plan check"), "{compared}");
    for side in ["before", "after"] {
        assert!(out.join(side).join("profile.json").is_file(), "{side}");
    }
    let read = |side: &str| -> Value {
        parse_json(
            &std::fs::read_to_string(out.join(side).join("profile.json")).unwrap(),
            side,
        )
    };
    assert_eq!(read("before")["plan_check"], Value::Null);
    let after = read("after");
    let e = check(&after["plan_check"], &c);
    assert_eq!(e["verdict"], "placed", "{e}");
    assert_eq!(e["pages_by_node"]["0"], 2048, "{e}");
    let text = std::fs::read_to_string(out.join("after").join("profile.txt")).unwrap();
    assert!(text.contains("plan check"), "{text}");

    // --repeat: unprofiled runs each way, their output discarded.
    let out = dir.join("r");
    let r = profile_truth(&["--plan", &plan, "--repeat", "4", "--json"], &out, "2");
    assert_eq!(r.rc, 0, "{}", r.err);
    // The two profiled runs print; the eight timed ones do not.
    assert_eq!(r.out.matches("wrong sums 0").count(), 2, "{}", r.out);
    let v = parse_json(
        &std::fs::read_to_string(out.join("compare.json")).unwrap(),
        "compare.json",
    );
    // `--json`: compare.json in the envelope.
    let json = &r.err[r.err.rfind("\n{\n").unwrap() + 1..];
    let mut printed = parse_json(json, "profile --plan --repeat 4 --json");
    open_envelope(&mut printed, "profile --plan");
    let o = printed.as_object_mut().unwrap();
    assert_eq!(o.remove("schema_version"), Some("1.7".into()));
    assert_eq!(printed, v);
    let t = &v["run_time"];
    assert_eq!(t["without_s"].as_array().unwrap().len(), 4, "{t}");
    assert_eq!(t["with_s"].as_array().unwrap().len(), 4, "{t}");
    assert!(["holds", "does_not_hold", "cannot_tell"].contains(&t["verdict"].as_str().unwrap()));
    assert!(t["comparison"]["p_value"].as_f64().is_some(), "{t}");
    assert_eq!(v["plan_check"]["entries"][0]["verdict"], "placed");
    fails(
        &["profile", "--repeat", "3", "--", prog.to_str().unwrap()],
        "--plan",
    );
}

#[test]
fn stripes_and_emulated_weights_run_any_program() {
    preload_library();
    let prog = stripes_program();
    let p = prog.to_str().unwrap();
    let r = numalab(&["run", "--mem", "interleave:0@8", "--", p]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(
        r.err
            .contains("stripes of pages (8 on 0) laid by the preload library"),
        "{}",
        r.err
    );
    // Every page of the big allocation, the break heap and the arenas on
    // the one node. The 16 MiB block is where glibc puts it without
    // numalab (16 bytes into its own mapping: 4095 whole pages), not made
    // page aligned.
    let lines: Vec<&str> = r.out.lines().filter(|l| l.contains(" pages ")).collect();
    assert_eq!(lines.len(), 6, "{}", r.out);
    assert!(
        lines[0].starts_with("big pages 4095 nodes 0:4095 "),
        "{}",
        lines[0]
    );
    assert!(r.out.contains("missing 0"), "{}", r.out);
    let r = numalab(&[
        "run",
        "--mem",
        "weighted:0=2@4",
        "--weighted-impl",
        "emulate",
        "--",
        p,
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(r.err.contains("stripes of pages (8 on 0)"), "{}", r.err);
    // The library is not loaded where the kernel does it all.
    let r = numalab(&[
        "run",
        "--mem",
        "interleave:0",
        "--",
        "sh",
        "-c",
        "echo \"$LD_PRELOAD\"",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert_eq!(r.out.trim(), "", "no preload for a kernel policy");
}

#[test]
fn bad_plans_are_refused_in_one_line() {
    let dir = scratch("plan-bad");
    let prog = profile_truth_program();
    let p = prog.to_str().unwrap();
    let run = |plan: &str, needle: &str| fails(&["run", "--plan", plan, "--", p], needle);
    run("/no/such/plan.json", "--plan");
    run(dir.to_str().unwrap(), "--plan");
    let text = |name: &str, body: &str| {
        let f = dir.join(name);
        std::fs::write(&f, body).unwrap();
        f.to_string_lossy().into_owned()
    };
    run(&text("a.json", "not json"), "not a plan");
    run(
        &text("b.json", r#"{"schema":"numalab-plan/2","entries":[]}"#),
        "valid: numalab-plan/1",
    );
    run(
        &text(
            "c.json",
            r#"{"schema":"numalab-plan/1","entries":[{"region":"stack","policy":"bind:0"}]}"#,
        ),
        "a stack cannot be placed by a plan",
    );
    run(
        &text(
            "d.json",
            r#"{"schema":"numalab-plan/1","entries":[{"region":"heap","policy":"remote"}]}"#,
        ),
        "name the node (bind:N)",
    );
    run(
        &text(
            "e.json",
            r#"{"schema":"numalab-plan/1","entries":[{"region":"heap","policy":"bind:7"}]}"#,
        ),
        "entry 0 (heap)",
    );
    run(
        &text(
            "f.json",
            r#"{"schema":"numalab-plan/1","entries":[{"region":"site:profile_truth.c:99999","policy":"bind:0"}]}"#,
        ),
        "site:profile_truth.c:99999 is no line with code",
    );
    run(
        &text(
            "g.json",
            r#"{"schema":"numalab-plan/1","entries":[{"region":"static:no_such_symbol_q","policy":"bind:0"}]}"#,
        ),
        "static:no_such_symbol_q names no data symbol",
    );
    fails(
        &["run", "--weighted-impl", "bogus", "--", "true"],
        "valid: auto, kernel, emulate",
    );
    let good = text(
        "h.json",
        r#"{"schema":"numalab-plan/1","entries":[{"region":"heap","policy":"bind:0"}]}"#,
    );
    for n in ["0", "101", "x"] {
        fails(
            &["profile", "--plan", &good, "--repeat", n, "--", p],
            "--repeat",
        );
    }
    // A plan of kinds only runs a missing program as any run does: 127.
    let r = numalab(&["run", "--plan", &good, "--", "/no/such/program"]);
    assert_eq!(r.rc, 127, "{}", r.err);
}

#[test]
fn small_allocations_of_an_entry_come_from_its_placed_pool() {
    preload_library();
    let dir = scratch("plan-small");
    let prog = common::compile_c(
        "crates/numalab-cli/tests/programs/small_nodes.c",
        "small_nodes",
    );
    let run = |plan: &str, tag: &str| -> (common::Ran, Value) {
        let path = dir.join(format!("{tag}.json"));
        std::fs::write(dir.join(format!("{tag}-plan.json")), plan).unwrap();
        let plan_path = dir.join(format!("{tag}-plan.json"));
        let r = numalab(&[
            "run",
            "--plan",
            plan_path.to_str().unwrap(),
            "--verify",
            "--verify-json",
            path.to_str().unwrap(),
            "--",
            prog.to_str().unwrap(),
            "20000",
        ]);
        assert_eq!(r.rc, 0, "{tag}: {}\n{}", r.err, r.out);
        // The program read back every value, through free, realloc,
        // calloc and malloc_usable_size on the pool's blocks.
        assert_eq!(r.out, "ok nodes 20000\n", "{tag}");
        let v = parse_json(&std::fs::read_to_string(&path).unwrap(), "verify.json");
        (r, v)
    };
    let (_, v) = run(
        r#"{"schema": "numalab-plan/1", "entries": [
            {"region": "site:make_node", "policy": "bind:0", "small": true}]}"#,
        "small",
    );
    let e = check(&v["plan"], "site:make_node");
    assert_eq!(e["verdict"], "placed", "{e}");
    // One pool of 64 MiB reserved, its pages made on touch: 20000 nodes of
    // 64 bytes are 313 pages (the 10000 made again reuse the freed ones).
    assert_eq!(
        (e["regions"].clone(), e["bytes"].clone()),
        (1.into(), (64u64 << 20).into())
    );
    let pages = e["pages_by_node"]["0"].as_u64().unwrap();
    assert!((313..=320).contains(&pages), "{e}");
    assert_eq!(v["plan"]["small_spilled"], 0);
    // Without "small": blocks below a page are left to the heap.
    let (_, v) = run(
        r#"{"schema": "numalab-plan/1", "entries": [
            {"region": "site:make_node", "policy": "bind:0"}]}"#,
        "heap",
    );
    let e = check(&v["plan"], "site:make_node");
    assert_eq!(e["verdict"], "nothing-matched", "{e}");
}

/// A plan given through a shell's process substitution (a pipe, not a
/// file on disk) is read like a file (issue 36: it was refused as a FIFO).
#[test]
fn a_plan_from_a_pipe_is_read() {
    preload_library();
    let dir = scratch("plan-pipe");
    let plan = write_plan(&dir, &[("size>1M", "bind:0")]);
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "'{}' run --plan <(cat '{plan}') --verify -- sh -c 'echo planned'",
            env!("CARGO_BIN_EXE_numalab")
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("planned\n"));
    assert!(!err.contains("FIFO"), "{err}");
}

/// madvise(MADV_DONTNEED) and fork on a striped mapping: the program's
/// checks pass and it prints what it prints alone (the multi-node layout
/// is checked in the Quartet guest).
#[test]
fn madvise_and_fork_under_stripes_print_what_a_plain_run_prints() {
    preload_library();
    let prog = stripes_program();
    let p = prog.to_str().unwrap();
    let plain = Command::new(p).arg("advise").output().unwrap();
    assert!(plain.status.success());
    let plain = String::from_utf8_lossy(&plain.stdout).into_owned();
    assert!(plain.ends_with("advise ok\nfork ok\n"), "{plain}");
    let r = numalab(&["run", "--mem", "interleave:0@4", "--", p, "advise"]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert_eq!(r.out, plain);
}

#[test]
fn a_big_block_stays_one_mapping_so_that_realloc_can_move_it() {
    // glibc serves a 3 MiB block by a mapping of its own and grows it with
    // mremap, which the kernel refuses on two mappings: a policy laid on
    // the block's whole pages alone split off its header page (3 of 6 of
    // sqlite's mremap calls failed under a plan, all 6 under stripes, and
    // glibc copied the blocks instead). Under a plan and under stripes the
    // block is one mapping, as in a plain run, and its bytes the same.
    preload_library();
    let prog = common::compile_c(
        "crates/numalab-cli/tests/programs/realloc_mapping.c",
        "realloc_mapping",
    );
    let p = prog.to_str().unwrap();
    let plain = Command::new(p).output().unwrap();
    assert!(plain.status.success());
    let plain = String::from_utf8_lossy(&plain.stdout).into_owned();
    assert_eq!(plain.matches(" one mapping\n").count(), 4, "{plain}");
    assert!(plain.ends_with("sum 18432\n"), "{plain}");
    let dir = scratch("plan-realloc");
    let plan = write_plan(&dir, &[("size>1M", "interleave:0")]);
    for args in [
        vec!["run", "--plan", plan.as_str(), "--", p],
        vec!["run", "--mem", "interleave:0@4", "--", p],
        vec![
            "run",
            "--mem",
            "weighted:0=2@4",
            "--weighted-impl",
            "emulate",
            "--",
            p,
        ],
    ] {
        let r = numalab(&args);
        assert_eq!(
            (r.rc, r.out.as_str()),
            (0, plain.as_str()),
            "{args:?}: {}",
            r.err
        );
    }
}
