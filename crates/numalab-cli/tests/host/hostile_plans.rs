//! Hostile input that asks for too much: plans and outputs sized by the
//! input (sweep plans of huge machines, `--case-limit` near u64::MAX, a
//! layout of millions of threads) and buffers larger than the machine
//! (every measuring command, and buffers that only fail when summed on one
//! node). Each must be refused up front in one line, within the harness's
//! address-space and time limits.

use crate::common;

use common::hostile::{check_all, Case, ADDRESS_SPACE};
use common::{fixture, Run};

/// This machine's memory in GiB (MemTotal), rounded up.
fn memory_gib() -> u64 {
    let text = std::fs::read_to_string("/proc/meminfo").expect("/proc/meminfo");
    let kib: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("MemTotal in /proc/meminfo");
    kib.div_ceil(1 << 20)
}

/// A size of `fraction` of this machine's memory, as an option value.
fn share_of_memory(fraction: f64) -> String {
    format!(
        "{}M",
        (memory_gib() as f64 * 1024.0 * fraction).ceil() as u64
    )
}

#[test]
fn buffers_larger_than_the_machine_are_refused_before_anything_is_allocated() {
    let twice = share_of_memory(2.0);
    let four_times = share_of_memory(4.0);
    // Each alone fits in the machine's memory, together they do not: the
    // check must sum them, not look at one buffer at a time.
    let most = share_of_memory(0.55);
    let mut cases = vec![
        Case::new(
            "sizes up to 4x memory",
            &["sizes", "--max-size", &four_times],
        )
        .code(1)
        .says("do not fit in this machine")
        .says("--max-size"),
        Case::new("sizes --max-size 100G", &["sizes", "--max-size", "100G"]),
        Case::new("policies 2x memory", &["policies", "--size", &twice])
            .code(1)
            .says("do not fit in this machine")
            .says("use a smaller --size"),
        Case::new(
            "policies one-node 2x memory",
            &["policies", "--size", &twice, "--policies", "one-node"],
        )
        .code(1)
        .says("do not fit"),
        Case::new(
            "policies interleave 2x memory",
            &["policies", "--size", &twice, "--policies", "interleave"],
        )
        .code(1)
        .says("do not fit"),
        Case::new(
            "loaded-latency chase and injector together",
            &["loaded-latency", "--size", &most, "--injector-size", &most],
        )
        .code(1)
        .says("do not fit")
        .says("--injector-size"),
        Case::new(
            "loaded-latency huge injectors",
            &["loaded-latency", "--size", "64M", "--injector-size", &twice],
        )
        .code(1)
        .says("do not fit"),
        Case::new("matrix 2x memory", &["matrix", "--size", &twice])
            .code(1)
            .says("do not fit"),
        Case::new("scaling 2x memory", &["scaling", "--size", &twice])
            .code(1)
            .says("do not fit"),
        Case::new(
            "apexmap 2x memory",
            &["apexmap", "--size", &twice, "--ls", "64"],
        )
        .code(1)
        .says("do not fit"),
        Case::new("sweep 2x memory", &["sweep", "--size", &twice])
            .code(1)
            .says("do not fit")
            .says("--size"),
        Case::new(
            "sweep threads and memory nodes together",
            &["sweep", "--size", &most, "--thread-counts", "2"],
        )
        .code(1)
        .says("do not fit"),
        Case::new(
            "bench bandwidth 2x memory",
            &["bench", "bandwidth", "--size", &twice],
        )
        .code(1)
        .says("do not fit"),
        Case::new(
            "bench latency 2x memory",
            &["bench", "latency", "--size", &twice],
        )
        .code(1)
        .says("do not fit"),
    ];
    // 100G is the issue's own case: on a machine with more memory it would
    // measure for real, so it only runs where it cannot fit.
    if memory_gib() >= 60 {
        eprintln!("skipping 'sizes --max-size 100G': this machine has enough memory for it");
        cases.retain(|c| c.name != "sizes --max-size 100G");
    }
    check_all("plans (capacity)", cases);
}

#[test]
fn sweep_plans_of_big_machines_are_refused_with_their_size() {
    let big = fixture("256ia64-64n2s2c.xml");
    let smt = fixture("192em64t-24n8c2t.xml");
    let small = fixture("16amd64-8n2c.xml");
    let too_large = "sweep plan too large";
    let cases = vec![
        Case::new(
            "64 nodes, 3 threads",
            &[
                "sweep",
                "--list",
                "--topology",
                &big,
                "--thread-counts",
                "3",
            ],
        )
        .code(2)
        .says(too_large)
        .says("more than 200000 classes")
        // Its cheap bounds do not decide it: the classes of thread
        // sequences are counted (more than 200000 x 3!), 1.5 s here where
        // enumerating the classes took 5.6 s, within the common 30 s.
        .says("fewer --thread-counts"),
        Case::new(
            "64 nodes, 8 threads, json",
            &[
                "sweep",
                "--list",
                "--json",
                "--topology",
                &big,
                "--thread-counts",
                "8",
            ],
        )
        .code(2)
        .says(too_large),
        Case::new(
            "64 nodes, every thread count",
            &[
                "sweep",
                "--list",
                "--topology",
                &big,
                "--thread-counts",
                "1,2,3,4,5,6,7,8",
            ],
        )
        .code(2)
        .says(too_large),
        Case::new(
            "24-node SMT, 3 threads",
            &[
                "sweep",
                "--list",
                "--topology",
                &smt,
                "--thread-counts",
                "3",
            ],
        )
        .code(2)
        .says(too_large)
        .says("fold into more than 200000 classes"),
        Case::new(
            "24-node SMT, 1 to 3 threads",
            &[
                "sweep",
                "--list",
                "--topology",
                &smt,
                "--thread-counts",
                "1,2,3",
            ],
        )
        .code(2)
        .says(too_large),
        Case::new(
            "16 CPUs, 8 threads",
            &[
                "sweep",
                "--list",
                "--topology",
                &small,
                "--thread-counts",
                "8",
            ],
        )
        .code(2)
        .says(too_large),
        Case::new(
            "--full on 64 nodes with the largest limit",
            &[
                "sweep",
                "--list",
                "--every-case",
                "--case-limit",
                "1500000",
                "--topology",
                &big,
            ],
        )
        .code(2)
        .says("more than the"),
        Case::new(
            "--case-limit u64::MAX",
            &[
                "sweep",
                "--list",
                "--every-case",
                "--case-limit",
                "18446744073709551615",
                "--topology",
                &big,
            ],
        )
        .code(2)
        .says("--case-limit")
        .says("from 1 to 1500000"),
        Case::new(
            "--case-limit beyond u64",
            &["sweep", "--case-limit", "99999999999999999999999"],
        )
        .code(2)
        .says("from 1 to 1500000"),
        Case::new("--case-limit 0", &["sweep", "--case-limit", "0"])
            .code(2)
            .says("from 1 to 1500000"),
    ];
    check_all("plans (sweep)", cases);
}

#[test]
fn sweep_plans_that_fit_are_listed_within_the_address_space_limit() {
    let limit = format!("--as={ADDRESS_SPACE}");
    let wrapper = ["prlimit", limit.as_str()];
    // One and two threads of the 64-node machine, and of the 24-node SMT
    // machine, as text and as JSON.
    let big = fixture("256ia64-64n2s2c.xml");
    let smt = fixture("192em64t-24n8c2t.xml");
    let power = fixture("256ppc-8n8s4t.xml");
    let runs: [(&[&str], &str); 6] = [
        (
            &[
                "sweep",
                "--list",
                "--topology",
                &big,
                "--thread-counts",
                "1",
            ],
            "14 classes",
        ),
        // Two threads on 64 nodes: 2^30 cases under the machine tree's
        // automorphisms (about 9.3 x 10^24 of the nodes).
        (&["sweep", "--list", "--topology", &big], "1791 classes"),
        // Three threads on the 8-node POWER: 2^36 cases; refused as too
        // large under the distance table's symmetry, they fold into 5012
        // classes under the machine tree's automorphisms (issue 32).
        (
            &[
                "sweep",
                "--list",
                "--topology",
                &power,
                "--thread-counts",
                "3",
            ],
            "5012 classes",
        ),
        (
            &[
                "sweep",
                "--list",
                "--topology",
                &smt,
                "--thread-counts",
                "1",
            ],
            "34 classes",
        ),
        (
            &[
                "sweep",
                "--list",
                "--topology",
                &smt,
                "--thread-counts",
                "2",
            ],
            "5717 classes",
        ),
        (
            &[
                "sweep",
                "--list",
                "--json",
                "--topology",
                &smt,
                "--thread-counts",
                "1",
            ],
            "\"classes\": 34",
        ),
    ];
    for (args, needle) in runs {
        let r = Run::new(args).via(&wrapper).run();
        assert_eq!(r.rc, 0, "{args:?}: {}", r.err);
        assert!(r.out.contains(needle), "{args:?}: no '{needle}'");
    }
}

#[test]
fn layouts_of_too_many_threads_are_refused() {
    let cases = vec![
        Case::new(
            "set 50 million threads",
            &["set", "all", "--threads", "50000000", "--oversubscribe"],
        )
        .code(2)
        .says("from 1 to 65536"),
        Case::new(
            "set threads beyond u64",
            &[
                "set",
                "all",
                "--threads",
                "99999999999999999999999",
                "--oversubscribe",
            ],
        )
        .code(2)
        .says("--threads"),
        Case::new(
            "set 65537 threads as JSON",
            &[
                "set",
                "all",
                "--threads",
                "65537",
                "--oversubscribe",
                "--json",
            ],
        )
        .code(2)
        .says("65536"),
    ];
    check_all("plans (threads)", cases);
}

#[test]
fn the_largest_layout_is_printed_in_bounded_output() {
    let r = Run::new(&["set", "all", "--threads", "65536", "--oversubscribe"]).run();
    assert_eq!(r.rc, 0, "{}", r.err);
    assert_eq!(
        r.out.lines().filter(|l| l.starts_with("thread")).count(),
        65536
    );
    assert!(r.out.len() < 4 << 20, "{} bytes", r.out.len());
}
