//! The `numalab` binary end to end on this machine and on topology files:
//! outputs, JSON keys other tools read, exit codes, one-line errors.

use crate::common;

use common::{fails, fails_rc, fixture, json, numalab, scratch, stdout, Run};
use serde_json::Value;

/// The CPU of each thread of a `set --threads N --json` result.
fn thread_cpus(v: &Value) -> Vec<u64> {
    v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect()
}

#[test]
fn topology_json_has_the_documented_keys() {
    let t = json(&[
        "topology",
        "--json",
        "--topology",
        &fixture("qemu-quartet-4n2c-ring.xml"),
    ]);
    assert_eq!(t["schema_version"], "1.1");
    let nodes = t["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 4);
    assert_eq!(nodes[3]["os_index"], 3);
    assert_eq!(nodes[3]["cpus"], serde_json::json!([6, 7]));
    assert!(nodes[3]["memory_bytes"].as_u64().unwrap() > 0);
    assert_eq!(nodes[3]["cpuless"], false);
    assert_eq!(t["distances"]["nodes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(
        t["distances"]["matrix"][0],
        serde_json::json!([10, 16, 16, 22])
    );
    assert_eq!(t["hops"]["matrix"][0], serde_json::json!([0, 1, 1, 2]));
    // A machine without a distance table says so with null.
    let one = json(&[
        "topology",
        "--json",
        "--topology",
        &fixture("offline-cpu0-node0.xml"),
    ]);
    assert!(one["distances"].is_null());
    assert_eq!(one["hops"]["matrix"], serde_json::json!([[0]]));
}

#[test]
fn topology_svg_draws_the_machine_with_its_named_gpus() {
    let d = scratch("topology_svg");
    let svg = d.join("dgx2.svg");
    let dgx = fixture("nvidiaDGX2.xml");
    let text = stdout(&[
        "topology",
        "--topology",
        &dgx,
        "--svg",
        svg.to_str().unwrap(),
    ]);
    // The text view still printed, with each GPU's model.
    assert!(
        text.lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>()
                == [
                    "GPU",
                    "nvml0",
                    "Tesla",
                    "V100-SXM3-32GB-H",
                    "0000:34:00.0",
                    "node",
                    "0"
                ]),
        "{text}"
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(
        picture.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""),
        "{picture}"
    );
    // In a box's text (a tooltip names it again, after "<title>").
    assert_eq!(picture.matches("\">GPU nvml").count(), 16, "{picture}");
    assert_eq!(picture.matches(">Tesla V100-SXM3-32GB-H<").count(), 16);
    for label in [
        ">NUMA node 0 (755 GiB)<",
        ">NUMA node 1 (756 GiB)<",
        ">PU 25<",
        ">L3 (33 MiB)<",
    ] {
        assert!(picture.contains(label), "{label} not in {picture}");
    }
    // Never over the topology file it reads; a directory is refused.
    let copy = d.join("in.xml");
    std::fs::copy(&dgx, &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let c = copy.to_str().unwrap();
    let r = numalab(&["topology", "--topology", c, "--svg", c]);
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(
        r.err.contains("numalab never writes over an input"),
        "{}",
        r.err
    );
    assert_eq!(std::fs::read(&copy).unwrap(), before);
    let r = numalab(&["topology", "--svg", d.to_str().unwrap()]);
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(r.err.contains("is a directory"), "{}", r.err);
}

#[test]
fn topology_of_the_live_machine() {
    let t = json(&["topology", "--json"]);
    assert_eq!(t["source"]["kind"], "live");
    let nodes = t["nodes"].as_array().unwrap();
    assert!(!nodes.is_empty());
    assert!(
        nodes[0]["free_bytes"].as_u64().unwrap() > 0,
        "free memory when live"
    );
    let online = std::fs::read_to_string("/sys/devices/system/node/online").unwrap();
    let n_online: usize = online
        .trim()
        .split(',')
        .map(|r| match r.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum();
    assert_eq!(nodes.len(), n_online, "node count equals /sys online nodes");
    let text = stdout(&["topology"]);
    assert!(text.contains("Nodes") && text.contains("Caches"), "{text}");
}

#[test]
fn topology_text_warns_about_suspicious_firmware() {
    let text = stdout(&["topology", "--topology", &fixture("16amd64-8n2c.xml")]);
    assert!(
        text.to_lowercase().contains("flat"),
        "flat SLIT warning expected:\n{text}"
    );
    let text = stdout(&[
        "topology",
        "--topology",
        &fixture("32amd64-4s2n4c-cgroup2.xml"),
    ]);
    assert!(text.contains("restricted"), "{text}");
}

#[test]
fn set_command_evaluates_expressions_and_threads() {
    let q = fixture("qemu-quartet-4n2c-ring.xml");
    let v = json(&["set", "node:0-1 ~ core:0", "--topology", &q, "--json"]);
    assert_eq!(v["cpus"], serde_json::json!([1, 2, 3]));
    assert_eq!(v["nodes"], serde_json::json!([0, 1]));
    let v = json(&[
        "set",
        "all",
        "--threads",
        "5",
        "--layout",
        "scatter",
        "--topology",
        &q,
        "--json",
    ]);
    assert_eq!(thread_cpus(&v), [0, 2, 4, 6, 1]);
    let v = json(&[
        "set",
        "0-1",
        "--nodes",
        "--threads",
        "4",
        "--topology",
        &q,
        "--json",
    ]);
    assert_eq!(thread_cpus(&v), [0, 1, 2, 3]);
    fails(
        &["set", "all", "--threads", "9", "--topology", &q],
        "9 threads but only 8 CPUs",
    );
    let v = json(&[
        "set",
        "all",
        "--threads",
        "9",
        "--oversubscribe",
        "--topology",
        &q,
        "--json",
    ]);
    assert_eq!(v["threads"][8]["cpu"], 0);
    fails(
        &["set", "node:0", "--threads", "two", "--topology", &q],
        "not a thread count",
    );
    fails(
        &[
            "set",
            "node:0",
            "--threads",
            "1",
            "--layout",
            "zigzag",
            "--topology",
            &q,
        ],
        "valid: compact",
    );
}

#[test]
fn place_on_this_machine_verifies_pages() {
    let v = json(&[
        "place", "--size", "32M", "--mem", "bind:0", "--cpu", "0", "--json",
    ]);
    assert_eq!(v["pages_total"], 8192);
    assert_eq!(v["pages_by_node"]["0"], 8192);
    assert_eq!(v["untouched_pages"], 0);
    assert_eq!(v["verified"], true);
    assert_eq!(v["toucher_cpu"], 0);
    assert_eq!(v["run_lengths"]["runs"], 1);
    assert_eq!(v["run_lengths"]["max"], 8192);
    let v = json(&["place", "--size", "8M", "--mem", "interleave:0@3", "--json"]);
    assert_eq!(v["realization"]["mechanism"], "chunks");
    assert_eq!(v["pages_by_node"]["0"], 2048);
    let text = stdout(&[
        "place",
        "--size",
        "4M",
        "--mem",
        "first-touch",
        "--cpu",
        "1",
        "--workers",
        "0-1",
    ]);
    assert!(
        text.contains("worker pinned to CPU 0 ran on CPU 0"),
        "{text}"
    );
    assert!(text.contains("verified"), "{text}");
}

#[test]
fn bad_input_gets_one_line_errors() {
    let q = fixture("qemu-quartet-4n2c-ring.xml");
    let bad = scratch("bad-input").join("bad.xml");
    let bad = bad.to_str().unwrap();
    std::fs::write(bad, "<topology version=\"2.0\"><object type=\"Machine\"").unwrap();
    fails(
        &["topology", "--topology", bad],
        "is not a valid hwloc XML topology",
    );
    std::fs::write(bad, [0xffu8, 0xfe, 0x00, 0x12]).unwrap();
    fails(
        &["topology", "--topology", bad],
        "is not a valid hwloc XML topology",
    );
    let usage: &[(&[&str], &str)] = &[
        (
            &["topology", "--topology", "/no/such/file.xml"],
            "cannot read topology file /no/such/file.xml",
        ),
        (
            &["place", "--size", "1M", "--mem", "bind:99"],
            "node 99 does not exist; valid nodes:",
        ),
        (
            &["place", "--size", "1M", "--mem", "stripe:0"],
            "unknown memory policy 'stripe:0'; valid: first-touch",
        ),
        (
            &["place", "--size", "1M", "--mem", "interleave:0@x"],
            "@PAGES",
        ),
        (&["place", "--size", "12Q"], "unknown size unit 'q'"),
        (
            &["place", "--size", "1M", "--cpu", "4096"],
            "CPU 4096 does not exist; valid CPUs:",
        ),
        (&["place", "--size", "1M", "--cpu", "0-1"], "give one CPU"),
        (
            &["place", "--size", "1M", "--thp", "maybe"],
            "valid: on, off, system",
        ),
        (
            &["place", "--size", "1M", "--weighted-impl", "magic"],
            "valid: auto, kernel, emulate",
        ),
        (
            &["place", "--size", "0"],
            "--size 0 is too small: at least 1 B (a buffer holds one byte or more)",
        ),
        (
            &["place", "--size", "0.0000001K"],
            "--size 0.0000001K is too small: at least 1 B",
        ),
        (
            &["place", "--size", "1P", "--mem", "bind:0"],
            "unknown size unit",
        ),
        (&["place", "--mem", "local"], "--size"),
        (&["set", "node:0 +", "--topology", &q], "expected a set"),
        (&["set", "rack:1", "--topology", &q], "unknown kind 'rack'"),
        (&["verify", "--pid", "abc"], "not a process id"),
        (&["verify", "--pid", "2147483646"], "no process 2147483646"),
        (
            &["run", "--cpus", "0", "-m", "0", "-i", "0", "--", "true"],
            "give one memory policy, not --membind and --interleave",
        ),
        (
            &["run", "-C", "0", "-N", "0", "--", "true"],
            "give one CPU placement",
        ),
        (&["run", "--mem", "interleave:0@0", "--", "true"], "--mem"),
        (&["frobnicate"], "unrecognized subcommand 'frobnicate'"),
        (
            &["place", "--size", "1M", "--bogus"],
            "unexpected argument '--bogus'",
        ),
    ];
    for (args, needle) in usage {
        fails(args, needle);
    }
    // Failures that are not bad input: exit 1, or 127 for no such command.
    fails_rc(
        &["place", "--size", "100T", "--mem", "bind:0"],
        1,
        "cannot fit",
    );
    fails_rc(
        &["place", "--size", "100T", "--mem", "first-touch"],
        1,
        "cannot fit",
    );
    fails_rc(&["bench", "bandwidth", "--size", "100T"], 1, "do not fit");
    fails_rc(
        &["run", "--", "/no/such/cmd"],
        127,
        "cannot run '/no/such/cmd'",
    );
}

#[test]
fn run_places_the_child_and_propagates_its_status() {
    let r = numalab(&[
        "run",
        "-C",
        "1",
        "-m",
        "0",
        "--",
        "sh",
        "-c",
        "grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status; exit 5",
    ]);
    assert_eq!(r.rc, 5, "{}", r.err);
    assert!(r.out.contains("Cpus_allowed_list:\t1\n"), "{}", r.out);
    let r = numalab(&["run", "--", "sh", "-c", "kill -KILL $$"]);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        r.status.signal(),
        Some(9),
        "numalab dies of the child's signal"
    );
    // The command gets numalab's standard input and environment.
    let r = Run::new(&["run", "--", "sh", "-c", "echo \"$NUMALAB_TEST_VAR\"; cat"])
        .env("NUMALAB_TEST_VAR", "from the environment")
        .stdin("from stdin\n")
        .run();
    assert_eq!(r.rc, 0, "{}", r.err);
    assert_eq!(r.out, "from the environment\nfrom stdin\n");
    // --verify reports the child's memory at exit, on stderr.
    let r = numalab(&[
        "run",
        "--membind",
        "0",
        "--verify",
        "--",
        "dd",
        "if=/dev/zero",
        "of=/dev/null",
        "bs=16M",
        "count=1",
        "status=none",
    ]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(r.err.contains("placement of 'dd' at exit"), "{}", r.err);
    assert!(r.err.contains("memory policy: bind:0"), "{}", r.err);
    // A command that executes another program under --verify: the trap
    // of the second exec is ptrace's, not the program's (it used to be
    // delivered and ended the program with SIGTRAP, exit 133).
    let r = numalab(&["run", "--verify", "--", "sh", "-c", "exec echo again"]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert_eq!(r.out, "again\n");
    assert!(r.err.contains("process "), "{}", r.err);
    assert!(r.err.contains(" (echo)"), "{}", r.err);
}

#[test]
fn numactl_and_perf_habits_work_in_run() {
    // The command without `--`, its own options left to it.
    let r = numalab(&["run", "-m", "0", "-C", "0", "echo", "hi", "-x", "--verify"]);
    assert_eq!((r.rc, r.out.as_str()), (0, "hi -x --verify\n"), "{}", r.err);
    // -H: numactl -H's lines, with what each node can give.
    let nodes = json(&["topology", "--json"])["nodes"]
        .as_array()
        .unwrap()
        .len();
    let hw = stdout(&["run", "-H"]);
    let lines: Vec<&str> = hw.lines().collect();
    assert!(
        lines[0].starts_with(&format!("available: {nodes} nodes (")),
        "{hw}"
    );
    for key in ["cpus: ", "size: ", "free: ", "can give: "] {
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("node ") && l.contains(key))
                .count(),
            nodes,
            "{key}: {hw}"
        );
    }
    assert!(lines.contains(&"node distances:"), "{hw}");
    assert!(lines.contains(&"  0:  10 "), "{hw}");
    fails(
        &["run", "-H", "true"],
        "'--hardware' cannot be used with '[CMD]...'",
    );
    // perf's -e, and --counters LIST with a space said, not run.
    let r = numalab(&["run", "-e", "task-clock,page-faults", "true"]);
    assert_eq!(r.rc, 0, "{}", r.err);
    assert!(r.err.contains("  task-clock  "), "{}", r.err);
    assert!(r.err.contains("  page-faults  "), "{}", r.err);
    let r = numalab(&["run", "--counters", "instructions", "--", "true"]);
    assert_eq!(r.rc, 2, "{}", r.err);
    assert_eq!(
        r.err,
        "numalab: --counters takes its list after '=' (--counters=instructions) or as perf's -e instructions; 'instructions' is no program to run\n"
    );
    fails(
        &["run", "-e", "cycles", "--counters=all", "true"],
        "cannot be used with",
    );
    // profile's --counters takes the same lists, and its command comes
    // after `--`, so a list after a space is no command either.
    let r = numalab(&["profile", "--counters=bogus", "--", "true"]);
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(
        r.err
            .starts_with("numalab: --counters: unknown counter 'bogus'; valid: task-clock, "),
        "{}",
        r.err
    );
    fails(
        &["profile", "--counters", "cycles", "--", "true"],
        "unexpected argument 'cycles'",
    );
    // A subcommand's error points to its own help.
    let r = numalab(&["bench", "bandwidth", "--repetitions", "3"]);
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(
        r.err.ends_with("; see numalab bench bandwidth --help\n"),
        "{}",
        r.err
    );
    // matrix --threads-per-node takes its value.
    let v = json(&[
        "matrix",
        "--bandwidth",
        "--threads-per-node",
        "all",
        "--size",
        "1M",
        "--json",
    ]);
    assert_eq!(v["threads_per_node"], "all", "{v}");
}

#[test]
fn verify_reads_another_process() {
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    // spawn returns once the child is forked; until it has exec'd, it is
    // still a copy of this test thread (its comm is the test's name).
    let comm = format!("/proc/{}/comm", child.id());
    let t0 = std::time::Instant::now();
    while std::fs::read_to_string(&comm).unwrap_or_default().trim() != "sleep"
        && t0.elapsed() < std::time::Duration::from_secs(5)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let v = json(&["verify", "--pid", &child.id().to_string(), "--json"]);
    child.kill().ok();
    child.wait().ok();
    assert_eq!(v["command"], "verify");
    assert_eq!(v["program"], "sleep");
    assert_eq!(v["schema_version"], "1.7");
    assert!(v["environment"]["kernel"].is_string(), "{v}");
    assert_eq!(v["threads"].as_array().unwrap().len(), 1);
    assert!(v["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "stack"));
    assert!(v["bytes_by_node"]["0"].as_u64().unwrap() > 0);
    assert_eq!(v["process_policy"], "default");
}
