//! `numalab profile` on this machine: a program whose truth is known by
//! construction (crates/numalab-preload/tests/programs/hazards.c) run with
//! the preload library; the regions, samples, pages and threads it finds,
//! the command's exit status passed on, and bad input refused.
//!
//! The library is built by `cargo test --workspace` (the README's test
//! command) beside the numalab binary.

mod common;

use common::{compile_c, fails, numalab, parse_json, preload_library, scratch, Run};
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
    let r = numalab(&[
        "profile",
        "--json",
        "-o",
        out.to_str().unwrap(),
        "--",
        prog,
        "sample",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    // The program's own output comes first on stdout, then the profile.
    let (program_out, json) = r.out.split_at(r.out.find('{').unwrap());
    assert!(program_out.contains("sums right"), "{program_out}");
    let v = parse_json(json, "numalab profile --json");
    assert_eq!(v["schema_version"], "1.0");
    assert_eq!(v["rate"], 2000);
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
    assert_eq!(a["reads"], samples, "the threads only read");
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
    let nodes = numalab::Machine::live().unwrap().nodes.len();
    if nodes == 1 {
        assert_eq!(a["remote_share"], 0.0);
        assert_eq!(a["accesses"]["0"]["0"], samples);
    }
    // Two reader threads, each named with its samples.
    let threads = a["threads"].as_object().unwrap();
    assert_eq!(threads.len(), 2, "{threads:?}");
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
    let v = parse_json(&r.out, "profile of a static program");
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
        &["profile", "--min-bytes", "100", "--", "true"],
        "--min-bytes 100 is too small: at least 4 KiB (one page)",
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
