//! The `numalab` binary end to end on this machine and on topology files:
//! outputs, JSON keys other tools read, exit codes, one-line errors.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/topologies")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn numalab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args(args)
        .output()
        .expect("run numalab")
}

fn json(args: &[&str]) -> Value {
    let o = numalab(args);
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON: {e}"))
}

/// Asserts a one-line `numalab: ...` error with `code` containing `needle`.
fn fails(args: &[&str], code: i32, needle: &str) {
    let o = numalab(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "{args:?}: {err}");
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err:?}");
    assert!(err.starts_with("numalab: "), "{err}");
    assert!(err.contains(needle), "{args:?}: '{needle}' not in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn topology_json_has_the_documented_keys() {
    let t = json(&[
        "topology",
        "--json",
        "--topology",
        &fixture("qemu-quartet-4n2c-ring.xml"),
    ]);
    assert_eq!(t["schema_version"], "1.0");
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
    let text = String::from_utf8(numalab(&["topology"]).stdout).unwrap();
    assert!(text.contains("Nodes") && text.contains("Caches"), "{text}");
}

#[test]
fn topology_text_warns_about_suspicious_firmware() {
    let o = numalab(&["topology", "--topology", &fixture("16amd64-8n2c.xml")]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        text.to_lowercase().contains("flat"),
        "flat SLIT warning expected:\n{text}"
    );
    let o = numalab(&[
        "topology",
        "--topology",
        &fixture("32amd64-4s2n4c-cgroup2.xml"),
    ]);
    let text = String::from_utf8_lossy(&o.stdout);
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
        "--threads-policy",
        "scatter",
        "--topology",
        &q,
        "--json",
    ]);
    let cpus: Vec<u64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, vec![0, 2, 4, 6, 1]);
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
    let cpus: Vec<u64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["cpu"].as_u64().unwrap())
        .collect();
    assert_eq!(cpus, vec![0, 1, 2, 3]);
    fails(
        &["set", "all", "--threads", "9", "--topology", &q],
        2,
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
        2,
        "not a thread count",
    );
    fails(
        &[
            "set",
            "node:0",
            "--threads",
            "1",
            "--threads-policy",
            "zigzag",
            "--topology",
            &q,
        ],
        2,
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
    let o = numalab(&[
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
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        text.contains("worker pinned to CPU 0 ran on CPU 0"),
        "{text}"
    );
    assert!(text.contains("verified"), "{text}");
}

#[test]
fn bad_input_gets_one_line_errors() {
    let q = fixture("qemu-quartet-4n2c-ring.xml");
    fails(
        &["topology", "--topology", "/no/such/file.xml"],
        2,
        "cannot read topology file /no/such/file.xml",
    );
    let bad = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("numalab-bad-{}.xml", std::process::id()));
    std::fs::write(&bad, "<topology version=\"2.0\"><object type=\"Machine\"").unwrap();
    fails(
        &["topology", "--topology", bad.to_str().unwrap()],
        2,
        "is not a valid hwloc XML topology",
    );
    std::fs::write(&bad, [0xffu8, 0xfe, 0x00, 0x12]).unwrap();
    fails(
        &["topology", "--topology", bad.to_str().unwrap()],
        2,
        "is not a valid hwloc XML topology",
    );
    std::fs::remove_file(&bad).ok();
    fails(
        &["place", "--size", "1M", "--mem", "bind:99"],
        2,
        "node 99 does not exist; valid nodes:",
    );
    fails(
        &["place", "--size", "1M", "--mem", "stripe:0"],
        2,
        "unknown memory policy 'stripe:0'; valid: first-touch",
    );
    fails(
        &["place", "--size", "1M", "--mem", "interleave:0@x"],
        2,
        "@PAGES",
    );
    fails(&["place", "--size", "12Q"], 2, "unknown size unit 'q'");
    fails(
        &["place", "--size", "1M", "--cpu", "4096"],
        2,
        "CPU 4096 does not exist; valid CPUs:",
    );
    fails(
        &["place", "--size", "1M", "--cpu", "0-1"],
        2,
        "give one CPU",
    );
    fails(
        &["place", "--size", "1M", "--thp", "maybe"],
        2,
        "valid: on, off, system",
    );
    fails(
        &["place", "--size", "1M", "--weighted-impl", "magic"],
        2,
        "valid: auto, kernel, emulate",
    );
    fails(&["place", "--size", "0"], 2, "at least 1 byte");
    fails(
        &["place", "--size", "1P", "--mem", "bind:0"],
        2,
        "unknown size unit",
    );
    fails(
        &["place", "--size", "100T", "--mem", "bind:0"],
        1,
        "cannot fit",
    );
    fails(
        &["place", "--size", "100T", "--mem", "first-touch"],
        1,
        "cannot fit",
    );
    fails(&["bench", "bandwidth", "--size", "100T"], 1, "do not fit");
    fails(&["place", "--mem", "local"], 2, "--size");
    fails(&["set", "node:0 +", "--topology", &q], 2, "expected a set");
    fails(
        &["set", "rack:1", "--topology", &q],
        2,
        "unknown kind 'rack'",
    );
    fails(&["verify", "--pid", "abc"], 2, "not a process id");
    fails(
        &["verify", "--pid", "2147483646"],
        2,
        "no process 2147483646",
    );
    fails(
        &["run", "--cpus", "0", "-m", "0", "-i", "0", "--", "true"],
        2,
        "give one memory policy, not --membind and --interleave",
    );
    fails(
        &["run", "-C", "0", "-N", "0", "--", "true"],
        2,
        "give one CPU placement",
    );
    fails(
        &["run", "--mem", "interleave:0@2", "--", "true"],
        2,
        "needs chunk-wise placement",
    );
    fails(
        &["run", "--", "/no/such/cmd"],
        127,
        "cannot run '/no/such/cmd'",
    );
    fails(&["frobnicate"], 2, "unrecognized subcommand 'frobnicate'");
    fails(
        &["place", "--size", "1M", "--bogus"],
        2,
        "unexpected argument '--bogus'",
    );
}

#[test]
fn run_places_the_child_and_propagates_its_status() {
    let o = Command::new(env!("CARGO_BIN_EXE_numalab"))
        .args([
            "run",
            "-C",
            "1",
            "-m",
            "0",
            "--",
            "sh",
            "-c",
            "grep -E 'Cpus_allowed_list|Mems_allowed_list' /proc/self/status; exit 5",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(5));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("Cpus_allowed_list:\t1\n"), "{out}");
    let o = numalab(&["run", "--", "sh", "-c", "kill -KILL $$"]);
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        o.status.signal(),
        Some(9),
        "numalab dies of the child's signal"
    );
    // --verify reports the child's memory at exit, on stderr.
    let o = numalab(&[
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
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("placement of 'dd' at exit"), "{err}");
    assert!(err.contains("memory policy: bind:0"), "{err}");
}

#[test]
fn verify_reads_another_process() {
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let v = json(&["verify", "--pid", &child.id().to_string(), "--json"]);
    child.kill().ok();
    child.wait().ok();
    assert_eq!(v["command"], "sleep");
    assert_eq!(v["threads"].as_array().unwrap().len(), 1);
    assert!(v["mappings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["name"] == "stack"));
    assert!(v["bytes_by_node"]["0"].as_u64().unwrap() > 0);
    assert_eq!(v["process_policy"], "default");
}
