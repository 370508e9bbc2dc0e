//! Hostile set expressions and id lists wherever a command takes one
//! (`set`, `--cpus`, `--mem`, `run`'s numactl options, thread lists): deep
//! nesting, runs of `!`, endless texts, ids no Linux machine has. Each must
//! be refused in one line, without overflowing the stack or allocating a
//! bitmask of gigabytes, and `run` must not start its command.

use crate::common;

use common::hostile::{check_all, Case};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;

/// `n` open parentheses, a CPU, `n` closing ones.
fn nested(n: usize) -> String {
    format!("{}0{}", "(".repeat(n), ")".repeat(n))
}

#[test]
fn deep_and_long_expressions() {
    let deep = nested(30_000);
    let just_too_deep = nested(33);
    let too_long = nested(40_000);
    let bangs = format!("{}x", "!".repeat(60_000));
    let many_bangs = format!("{}0", "!".repeat(100_000));
    let long_list = "0,".repeat(40_000);
    let paren_bangs = format!("{}0{}", "!(".repeat(20_000), ")".repeat(20_000));
    let mem_deep = format!("bind:{deep}");
    let mem_weighted_deep = format!("weighted:{deep}=1");
    let cases = vec![
        Case::new("set: 30000 parentheses", &["set", &deep])
            .code(2)
            .says("nested deeper than 32 levels"),
        Case::new("set: 33 parentheses", &["set", &just_too_deep])
            .code(2)
            .says("nested deeper than 32 levels"),
        Case::new("set --nodes: 30000 parentheses", &["set", "--nodes", &deep])
            .code(2)
            .says("nested deeper than 32 levels"),
        Case::new("set: 80001 bytes of parentheses", &["set", &too_long])
            .code(2)
            .says("at most 65536"),
        Case::new("set: 60000 '!' then a bad word", &["set", &bangs])
            .code(2)
            .says("unknown word 'x'"),
        Case::new("set: 100000 '!'", &["set", &many_bangs])
            .code(2)
            .says("at most 65536"),
        Case::new("set: '!(' 20000 times", &["set", &paren_bangs])
            .code(2)
            .says("nested deeper than 32 levels"),
        Case::new("set: 80000-byte list", &["set", &long_list])
            .code(2)
            .says("at most 65536"),
        Case::new(
            "bench --cpus: 30000 parentheses",
            &["bench", "bandwidth", "--cpus", &deep],
        )
        .code(2)
        .says("--cpus")
        .says("nested deeper"),
        Case::new(
            "place --mem bind: 30000 parentheses",
            &["place", "--size", "4K", "--mem", &mem_deep],
        )
        .code(2)
        .says("nested deeper"),
        Case::new(
            "place --mem weighted: 30000 parentheses",
            &["place", "--size", "4K", "--mem", &mem_weighted_deep],
        )
        .code(2)
        .says("nested deeper"),
        Case::new(
            "loaded-latency --injector-cpus: 30000 parentheses",
            &["loaded-latency", "--injector-cpus", &deep],
        )
        .code(2)
        .says("nested deeper"),
        Case::new(
            "sweep --mem-nodes: 30000 parentheses",
            &["sweep", "--list", "--mem-nodes", &deep],
        )
        .code(2)
        .says("nested deeper"),
    ];
    check_all("deep set expressions", cases);
}

#[test]
fn run_starts_nothing_for_a_hostile_set() {
    let dir = common::scratch("hostile_sets_run");
    let canary = dir.join("ran");
    let canary_s = canary.to_string_lossy().into_owned();
    let deep = nested(30_000);
    let cases: Vec<Case> = [
        ("--cpus", deep.as_str()),
        ("--mem", &format!("interleave:{deep}")),
        ("-m", deep.as_str()),
        ("-i", deep.as_str()),
        ("-p", deep.as_str()),
        ("-N", deep.as_str()),
        ("-C", deep.as_str()),
        ("-C", "0-4294967295"),
        ("-m", "99999999999999999999"),
    ]
    .iter()
    .map(|(opt, value)| {
        Case::new(
            format!("run {opt} {}", &value[..value.len().min(20)]),
            &["run", opt, value, "--", "touch", &canary_s],
        )
        .code(2)
        .keeps(&canary)
    })
    .collect();
    check_all("run with hostile sets", cases);
    assert!(!canary.exists(), "a refused run started its command");
}

#[test]
fn ids_beyond_any_linux_machine() {
    let ranges = "0-65535,".repeat(10);
    let cases = vec![
        Case::new("set 0-4294967295", &["set", "0-4294967295"])
            .code(2)
            .says("ids go from 0 to 65535"),
        Case::new("set 4294967296", &["set", "4294967296"])
            .code(2)
            .says("ids go from 0 to 65535"),
        Case::new("set 65536", &["set", "65536"])
            .code(2)
            .says("ids go from 0 to 65535"),
        Case::new("set cpu:0-99999999999", &["set", "cpu:0-99999999999"])
            .code(2)
            .says("ids go from 0 to 65535"),
        Case::new("set node:0-65535", &["set", "node:0-65535"])
            .code(2)
            .says("node 1 does not exist"),
        Case::new(
            "set --nodes 0-4294967295",
            &["set", "--nodes", "0-4294967295"],
        )
        .code(2)
        .says("ids go from 0 to 65535"),
        Case::new(
            "bench --cpus 0-18446744073709551615",
            &["bench", "bandwidth", "--cpus", "0-18446744073709551615"],
        )
        .code(2)
        .says("--cpus"),
        Case::new(
            "place --mem bind:0-4294967295",
            &["place", "--size", "4K", "--mem", "bind:0-4294967295"],
        )
        .code(2)
        .says("ids go from 0 to 65535"),
        Case::new(
            "place --mem weighted:4294967295=1",
            &["place", "--size", "4K", "--mem", "weighted:4294967295=1"],
        )
        .code(2)
        .says("ids go from 0 to 65535"),
        Case::new(
            "place --cpu 99999999999",
            &["place", "--size", "4K", "--cpu", "99999999999"],
        )
        .code(2)
        .says("ids go from 0 to 65535"),
        Case::new(
            "bench --layout 0-65535 ten times",
            &["bench", "bandwidth", "--threads", "2", "--layout", &ranges],
        )
        .code(2)
        .says("more than 8192 threads"),
        Case::new(
            "set --layout 0-4294967295",
            &["set", "all", "--threads", "2", "--layout", "0-4294967295"],
        )
        .code(2)
        .says("ids go from 0 to 65535"),
        Case::os(
            "set: not UTF-8",
            vec![OsString::from("set"), OsString::from_vec(vec![b'0', 0xff])],
        )
        .code(2),
    ];
    check_all("ids out of range", cases);
}

#[test]
fn threads_share_a_cpu_only_when_asked() {
    let cases = vec![
        Case::new(
            "bench --layout 0,0",
            &["bench", "bandwidth", "--threads", "2", "--layout", "0,0"],
        )
        .code(2)
        .says("CPU 0 appears twice")
        .says("--oversubscribe"),
        Case::new(
            "set --layout 0,0",
            &["set", "all", "--threads", "2", "--layout", "0,0"],
        )
        .code(2)
        .says("--oversubscribe"),
        // A repeat past the threads that use the list is refused too (the
        // issue's `--threads 2 --layout 0,1,0` was accepted).
        Case::new(
            "set --threads 2 --layout 0,1,0",
            &["set", "all", "--threads", "2", "--layout", "0,1,0"],
        )
        .code(2)
        .says("CPU 0 appears twice in the thread list 0,1,0")
        .says("--oversubscribe"),
        Case::new(
            "set --layout 0,,0",
            &["set", "all", "--threads", "2", "--layout", "0,,0"],
        )
        .code(2)
        .says("empty entry"),
        Case::new(
            "set --layout zigzag",
            &["set", "all", "--threads", "1", "--layout", "zigzag"],
        )
        .code(2)
        .says("unknown thread policy 'zigzag'; valid: compact"),
        Case::new("policies --layout 0", &["policies", "--layout", "0"])
            .code(2)
            .says("--layout: the workloads place their threads, so no CPU list")
            .says("valid: scatter"),
    ];
    check_all("thread lists", cases);
    // With --oversubscribe the same list is a placement.
    let out = common::stdout(&[
        "set",
        "all",
        "--threads",
        "2",
        "--layout",
        "0,0",
        "--oversubscribe",
    ]);
    assert!(out.contains("thread   0 -> CPU 0"), "{out}");
    assert!(out.contains("thread   1 -> CPU 0"), "{out}");
}

#[test]
fn runs_of_bang_cancel_in_pairs() {
    let even = format!("{}0", "!".repeat(60_000));
    let out = common::stdout(&["set", &even]);
    assert!(out.starts_with("cpus  {0} (1)"), "{out}");
}
