//! `numalab advise` end to end: the advice for shapes on the Quartet
//! (4 nodes x 2 CPUs, a ring) under the AMD note's parameters, its command
//! lines exactly, a profile's plan, bad input in one line, and `--verify`
//! on this machine (the mechanics: both runs measured and predicted; on
//! one node every placement is the same memory, so no figure is judged).

use crate::common;

use common::{allowed_cpus, fails, fixture, json, num, scratch, stdout, turn};
use serde_json::Value;

const QUARTET: &str = "qemu-quartet-4n2c-ring.xml";

/// `advise` on the Quartet with the built-in parameters and `extra`.
fn quartet(extra: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "advise".into(),
        "--topology".into(),
        fixture(QUARTET),
        "--params".into(),
        "amd-quartet-2006".into(),
    ];
    a.extend(extra.iter().map(|s| s.to_string()));
    a
}

fn run_json(args: &[String]) -> Value {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    json(&refs)
}

fn run_text(args: &[String]) -> String {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    stdout(&refs)
}

fn layout(c: &Value) -> &Value {
    &c["memory"][0]["layout"]
}

#[test]
fn eight_independent_threads_keep_local_first_touch_spread() {
    let v = run_json(&quartet(&[
        "--threads",
        "8",
        "--sharing",
        "independent",
        "--data",
        "256M",
        "--json",
        "--",
        "./app",
        "in put",
    ]));
    assert_eq!(v["command"], "advise");
    assert!(v["schema_version"].is_string());
    assert!(v["environment"]["kernel"].is_string());
    assert_eq!(v["params_from"], "builtin:amd-quartet-2006");
    let best = &v["best"];
    assert_eq!(layout(best)["kind"], "first-touch");
    assert_eq!(best["threads"]["name"], "spread");
    assert_eq!(
        best["threads"]["cpus"],
        serde_json::json!([0, 2, 4, 6, 1, 3, 5, 7])
    );
    assert_eq!(
        best["threads"]["nodes"],
        serde_json::json!([0, 1, 2, 3, 0, 1, 2, 3])
    );
    // Each slice on its own node: a quarter of the data on each.
    for p in best["memory"][0]["pages"].as_array().unwrap() {
        assert!((num(&p[1]) - 0.25).abs() < 1e-9, "{p}");
    }
    assert_eq!(
        best["commands"]["numalab"],
        "numalab run --pin 0,2,4,6,1,3,5,7 --localalloc -- ./app 'in put'"
    );
    assert_eq!(
        best["commands"]["numactl"],
        "numactl --physcpubind=0-7 --localalloc ./app 'in put'"
    );
    // The default (the scheduler spreads, first touch) is the same memory
    // pinned or not: no gain, and no uncertainty without a calibration.
    assert!(
        (num(&v["gain"]["ratio"]) - 1.0).abs() < 1e-9,
        "{}",
        v["gain"]
    );
    assert_eq!(v["gain"]["verdict"], "not calibrated");
    assert!(v["gain"]["low"].is_null());
    assert!(
        v["gain"]["basis"]
            .as_str()
            .unwrap()
            .starts_with("not calibrated on this machine: built-in parameters amd-quartet-2006"),
        "{}",
        v["gain"]["basis"]
    );
    assert_eq!(v["default"]["commands"]["numalab"], "./app 'in put'");
    // Binding everything to one node is the slowest kind: last.
    let last = v["candidates"].as_array().unwrap().last().unwrap();
    assert_eq!(layout(last)["kind"], "bind", "{last}");
    assert!(num(&last["vs_best"]) > 1.5, "{last}");
}

#[test]
fn shared_data_read_by_eight_threads_interleaves_over_all_four_nodes() {
    let v = run_json(&quartet(&[
        "--threads",
        "8",
        "--sharing",
        "shared",
        "--data",
        "256M",
        "--rw",
        "1:0",
        "--json",
    ]));
    let best = &v["best"];
    assert_eq!(best["name"], "spread, interleave 0-3");
    assert_eq!(best["memory"][0]["policy"], "interleave:0-3");
    assert_eq!(
        best["commands"]["numalab"],
        "numalab run --pin 0,2,4,6,1,3,5,7 --interleave 0-3 -- CMD"
    );
    assert_eq!(
        best["commands"]["numactl"],
        "numactl --physcpubind=0-7 --interleave=0-3 CMD"
    );
    // The default: the main thread touched it all, every page on node 0,
    // whose controller all eight threads wait at.
    let d = &v["default"];
    assert_eq!(d["memory"][0]["pages"], serde_json::json!([[0, 1.0]]));
    assert_eq!(d["predicted"]["bottleneck"], "node 0's memory controller");
    assert!(num(&d["predicted"]["bottleneck_utilisation"]) > 0.95);
    let gain = num(&v["gain"]["ratio"]);
    assert!(gain > 1.5, "gain {gain}");
    let (b, dd) = (
        num(&best["predicted"]["seconds"]),
        num(&d["predicted"]["seconds"]),
    );
    assert!((dd / b - gain).abs() < 1e-9, "{dd} / {b} vs {gain}");
    // The runner-up is a different placement, slower than the best.
    assert_ne!(v["runner_up"]["name"], best["name"]);
    assert!(num(&v["runner_up"]["vs_best"]) > 1.0);
    // Every candidate is ranked: the best first, the rest fastest first.
    let c = v["candidates"].as_array().unwrap();
    assert_eq!(c[0]["name"], best["name"]);
    let times: Vec<f64> = c[1..]
        .iter()
        .filter(|c| c["fits"] == true)
        .map(|c| num(&c["predicted"]["seconds"]))
        .collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
}

#[test]
fn the_text_gives_the_advice_the_runner_up_the_default_and_the_commands() {
    let out = run_text(&quartet(&[
        "--threads",
        "8",
        "--sharing",
        "shared",
        "--data",
        "256M",
        "--",
        "./app",
    ]));
    for want in [
        "Workload: 8 threads, shared data (every thread accesses all of it), 256 MiB of data, 0% of the lines written\n",
        "Predicted time: makespan of one pass over the data",
        "Advice: spread, interleave 0-3\n",
        "  threads    spread, pinned to CPUs 0,2,4,6,1,3,5,7 (nodes 0,1,2,3,0,1,2,3)\n",
        "  memory     interleave:0-3 (node 0 25%, node 1 25%, node 2 25%, node 3 25%)\n",
        "  numalab    numalab run --pin 0,2,4,6,1,3,5,7 --interleave 0-3 -- ./app\n",
        "  numactl    numactl --physcpubind=0-7 --interleave=0-3 ./app\n",
        "             uncertainty: not calibrated on this machine",
        "\nRunner-up (",
        "\nDefault: OS default: threads not pinned, first touch by the main thread: every page on node 0\n",
        "  threads    not pinned, spread by the scheduler (assumed): modelled on CPUs 0,2,4,6,1,3,5,7",
        "\nCandidates (predicted, the advice first, then fastest first)\n",
    ] {
        assert!(out.contains(want), "'{want}' not in:\n{out}");
    }
    assert!(out.contains("x over the OS default"), "{out}");
}

#[test]
fn producer_consumer_pairs_share_a_node() {
    let v = run_json(&quartet(&[
        "--threads",
        "8",
        "--sharing",
        "producer-consumer",
        "--data",
        "256M",
        "--json",
    ]));
    let best = &v["best"];
    // Compact order: threads 2i and 2i+1 on one node, the pair's buffer
    // where its producer touched it.
    assert_eq!(best["name"], "compact, first touch");
    assert_eq!(
        best["threads"]["nodes"],
        serde_json::json!([0, 0, 1, 1, 2, 2, 3, 3])
    );
    assert_eq!(
        best["commands"]["numalab"],
        "numalab run --pin 0,1,2,3,4,5,6,7 --localalloc -- CMD"
    );
    // The scheduler's spread splits every pair over two nodes.
    assert!(num(&v["gain"]["ratio"]) > 1.2, "{}", v["gain"]);
    // A producer writes what its consumer reads: half the lines written.
    assert!((num(&v["workload"]["shape"]["write_share"]) - 0.5).abs() < 1e-12);
}

#[test]
fn four_independent_threads_take_one_node_each() {
    let v = run_json(&quartet(&[
        "--threads",
        "4",
        "--sharing",
        "independent",
        "--data",
        "128M",
        "--json",
    ]));
    assert_eq!(v["best"]["name"], "spread, first touch");
    assert_eq!(
        v["best"]["threads"]["cpus"],
        serde_json::json!([0, 2, 4, 6])
    );
    assert_eq!(
        v["best"]["commands"]["numactl"],
        "numactl --physcpubind=0,2,4,6 --localalloc CMD"
    );
    assert_eq!(v["runner_up"]["name"], "compact, first touch");
}

/// A profile as `numalab profile` writes it: the main thread (tid 10, on
/// CPU 1) first touched a 64 MiB region that four workers on nodes 0-3
/// read, and a 1 MiB one it alone writes.
fn profile_json() -> Value {
    let region = |site: &str, bytes: u64, threads: Value, reads: u64, writes: u64| {
        serde_json::json!({
            "kind": "heap", "site": site, "sampled": true, "object": null, "thread": null,
            "stack": [], "allocations": 1, "bytes": bytes, "first_address": 4096,
            "samples": reads + writes, "reads": reads, "writes": writes, "unknown_access": 0,
            "accesses": {}, "remote_share": null, "distance_ratio": null,
            "pages_by_node": {"0": bytes / 4096}, "threads": threads,
            "first_touch": {"samples": 10, "writes": 10, "threads": {"10": 10}, "nodes": {"0": 10}},
            "pages_over_time": []
        })
    };
    let thread = |tid: u32, ordinal: u32, cpu: u32| {
        serde_json::json!({
            "tid": tid, "ordinal": ordinal, "samples": 100, "allowed_cpus": 8,
            "cpus": [cpu], "nodes": [cpu / 2], "remote_share": null, "first_touches": 0,
            "memory_nodes": {}, "migrations": null, "cpu_changes_seen": 0, "timeline": []
        })
    };
    serde_json::json!({
        "schema_version": "2.0", "program": ["./app", "--big"], "pid": 10, "rate": 0,
        "min_bytes": 65536, "page_size": 4096, "pages_armed": 0, "samples": 500,
        "cost": null, "sampled_for_s": null, "unattributed": 0, "remote_share": null,
        "regions": [
            region("main app.c:10", 64 << 20,
                serde_json::json!({"11": 100, "12": 100, "13": 100, "14": 100}), 400, 0),
            region("main app.c:20", 1 << 20, serde_json::json!({"10": 100}), 50, 50),
        ],
        "threads": [
            thread(10, 0, 1), thread(11, 1, 0), thread(12, 2, 2),
            thread(13, 3, 4), thread(14, 4, 6)
        ],
        "diagnoses": [], "warnings": []
    })
}

#[test]
fn a_profile_gets_a_plan_file_and_a_command_line() {
    let dir = scratch("advise-profile");
    let prof = dir.join("profile.json");
    std::fs::write(&prof, serde_json::to_string(&profile_json()).unwrap()).unwrap();
    let plan = dir.join("plan.json");
    let v = run_json(&quartet(&[
        "--profile",
        prof.to_str().unwrap(),
        "--write-plan",
        plan.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(v["workload"]["threads"], 5);
    let best = &v["best"];
    // The region every worker reads is spread; the main thread's own
    // stays where it touched it.
    assert_eq!(best["memory"][0]["region"], "main app.c:10");
    assert_eq!(best["memory"][0]["layout"]["kind"], "interleave");
    assert_eq!(best["memory"][1]["layout"]["kind"], "first-touch");
    let cmd = best["commands"]["numalab"].as_str().unwrap();
    assert!(
        cmd.starts_with("numalab run --pin ")
            && cmd.ends_with(&format!(" --plan {} -- ./app --big", plan.display())),
        "{cmd}"
    );
    assert!(best["commands"]["numactl"].is_null());
    assert!(best["commands"]["numactl_note"]
        .as_str()
        .unwrap()
        .contains("numactl gives one policy to the whole process"));
    assert_eq!(v["plan_written"], plan.to_str().unwrap());
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(written["schema"], "numalab-plan/1");
    assert_eq!(written["entries"].as_array().unwrap().len(), 1);
    assert_eq!(written["entries"][0]["region"], "site:app.c:10");
    assert_eq!(written["entries"][0]["policy"], best["memory"][0]["policy"]);
    assert!(num(&v["gain"]["ratio"]) > 1.0);
}

#[test]
fn bad_input_is_one_line_with_the_choices() {
    let q = fixture(QUARTET);
    let base = [
        "advise",
        "--topology",
        q.as_str(),
        "--params",
        "amd-quartet-2006",
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    fails_with(
        &with(&[]),
        "advise needs the workload: --threads and --sharing and --data missing; give --threads N --sharing independent|shared|producer-consumer --data SIZE [--rw R:W], or --profile FILE",
    );
    fails_with(
        &with(&["--threads", "8", "--sharing", "both", "--data", "1G"]),
        "--sharing: unknown sharing 'both'; valid: independent, shared, producer-consumer",
    );
    fails_with(
        &with(&[
            "--threads",
            "8",
            "--sharing",
            "shared",
            "--data",
            "1G",
            "--rw",
            "2",
        ]),
        "--rw '2' is not a read:write ratio; valid: R:W",
    );
    fails_with(
        &with(&[
            "--threads",
            "8",
            "--sharing",
            "shared",
            "--data",
            "1G",
            "--rw",
            "0:0",
        ]),
        "valid: R:W with numbers 0 or more, not both 0",
    );
    fails_with(
        &with(&["--threads", "9", "--sharing", "shared", "--data", "1G"]),
        "9 threads but this machine has 8 CPUs (0-7); advise places one thread per CPU: valid: 1 to 8",
    );
    fails_with(
        &with(&[
            "--threads",
            "3",
            "--sharing",
            "producer-consumer",
            "--data",
            "1G",
        ]),
        "--threads 3: producer-consumer places threads in pairs; give an even number",
    );
    fails_with(
        &with(&["--threads", "0", "--sharing", "shared", "--data", "1G"]),
        "--threads '0' is not a thread count",
    );
    fails_with(
        &with(&["--threads", "2", "--sharing", "shared", "--data", "1K"]),
        "--data 1K is too small: at least 64 KiB",
    );
    fails_with(
        &with(&[
            "--threads",
            "2",
            "--sharing",
            "shared",
            "--data",
            "1G",
            "--verify",
        ]),
        "'--topology <FILE>' cannot be used with '--verify'",
    );
    fails_with(
        &with(&["--profile", "/no/such/profile.json"]),
        "--profile: cannot read /no/such/profile.json",
    );
    fails(
        &["advise", "--topology", &q, "--threads", "2", "--sharing", "shared", "--data", "1G"],
        "advise needs the model's parameters on a machine with several nodes: give --from RESULTS.json (a numalab report of this machine) or --params FILE|NAME (built in: amd-quartet-2006)",
    );
    fails(
        &[
            "advise",
            "--topology",
            &q,
            "--params",
            "nope",
            "--threads",
            "2",
            "--sharing",
            "shared",
            "--data",
            "1G",
        ],
        "--params 'nope' is neither a file nor a built-in set; built in: amd-quartet-2006",
    );
    let dir = scratch("advise-bad");
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "{\"not\": \"a profile\"}").unwrap();
    fails_with(
        &with(&["--profile", junk.to_str().unwrap()]),
        "not a profile.json numalab profile wrote",
    );
    // The plan is never written over an input.
    fails_with(
        &with(&[
            "--profile",
            junk.to_str().unwrap(),
            "--write-plan",
            junk.to_str().unwrap(),
        ]),
        "numalab never writes over an input",
    );
}

/// A parameter file for whatever machine this is: the AMD note's figures
/// on the machine's own interconnect graph (no links of the Quartet's).
fn fails_with(args: &[String], needle: &str) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    fails(&refs, needle);
}

fn params_here(dir: &std::path::Path) -> String {
    let mut p: Value = serde_json::from_str(include_str!(
        "../../../../docs/models/amd-quartet-2006.json"
    ))
    .unwrap();
    p["links"] = Value::Null;
    let f = dir.join("params.json");
    std::fs::write(&f, p.to_string()).unwrap();
    f.to_string_lossy().into_owned()
}

#[test]
fn cpuless_tiers_get_weighted_interleave_which_numactl_cannot_give() {
    // The ring of four with a CPU-less node 4 whose controller gives half
    // of a DRAM node's: two pages on each DRAM node per page on node 4.
    let dir = scratch("advise-cpuless");
    let mut p: Value = serde_json::from_str(include_str!(
        "../../../../docs/models/amd-quartet-2006.json"
    ))
    .unwrap();
    p["links"] = Value::Null;
    p["controller_overrides"] = serde_json::json!({"4": 2.24});
    let params = dir.join("tiers.json");
    std::fs::write(&params, p.to_string()).unwrap();
    let v = json(&[
        "advise",
        "--topology",
        &fixture("qemu-ring4-cpuless-hmat.xml"),
        "--params",
        params.to_str().unwrap(),
        "--threads",
        "4",
        "--sharing",
        "shared",
        "--data",
        "256M",
        "--json",
    ]);
    let weighted = v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["memory"][0]["layout"]["kind"] == "weighted")
        .unwrap_or_else(|| panic!("no weighted candidate: {}", v["candidates"]));
    assert_eq!(
        weighted["memory"][0]["policy"],
        "weighted:0=2,1=2,2=2,3=2,4=1"
    );
    assert_eq!(
        weighted["commands"]["numalab"],
        "numalab run --pin 0,1,2,3 --mem weighted:0=2,1=2,2=2,3=2,4=1 -- CMD"
    );
    assert!(weighted["commands"]["numactl"].is_null());
    assert!(weighted["commands"]["numactl_note"]
        .as_str()
        .unwrap()
        .starts_with("numactl 2.0.16 (Debian 12) has no weighted interleave"));
    // Interleave over every node, the CPU-less one included, is a
    // candidate of its own.
    assert!(v["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["memory"][0]["policy"] == "interleave:0-4"));
}

#[test]
fn verify_runs_the_best_and_the_default_here() {
    let _turn = turn();
    let dir = scratch("advise-verify");
    let params = params_here(&dir);
    let threads = allowed_cpus().len().min(2).to_string();
    let v = json(&[
        "advise",
        "--threads",
        &threads,
        "--sharing",
        "shared",
        "--data",
        "32M",
        "--params",
        &params,
        "--verify",
        "--rounds",
        "2",
        "--budget-each",
        "0.2",
        "--json",
    ]);
    let c = &v["check"];
    assert_eq!(c["kernel"], "read");
    assert_eq!(c["rounds"], 2);
    let runs = c["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["role"], "default");
    assert_eq!(runs[1]["role"], "best");
    for r in runs {
        assert!(num(&r["measured_gbps"]) > 0.0, "{r}");
        assert!(num(&r["predicted_gbps"]) > 0.0, "{r}");
        assert!(!r["samples"].as_array().unwrap().is_empty(), "{r}");
        assert_eq!(r["verified"], true, "{r}");
    }
    assert!(num(&c["measured_gain"]) > 0.0);
    assert!(num(&c["predicted_gain"]) > 0.0);
    if v["single_node"] == true {
        // One node: the same memory both ways; nothing measured is a claim.
        assert_eq!(num(&c["predicted_gain"]), 1.0);
        assert_eq!(c["verdict"], "cannot_tell");
        assert_eq!(v["gain"]["verdict"], "none: one node");
        assert!(c["notes"][0].as_str().unwrap().starts_with("one node:"));
    }
}

#[test]
fn verify_text_has_predicted_and_measured_columns() {
    let _turn = turn();
    let dir = scratch("advise-verify-text");
    let params = params_here(&dir);
    let threads = allowed_cpus().len().min(2).to_string();
    let out = stdout(&[
        "advise",
        "--params",
        &params,
        "--threads",
        &threads,
        "--sharing",
        "independent",
        "--data",
        "16M",
        "--verify",
        "--rounds",
        "1",
        "--budget-each",
        "0.1",
    ]);
    let table = out
        .split("\nVerify (this machine: kernel read")
        .nth(1)
        .unwrap_or_else(|| panic!("no Verify section:\n{out}"));
    let header = table.lines().nth(1).unwrap();
    assert!(
        header.contains("predicted GB/s") && header.contains("measured GB/s"),
        "{header}"
    );
    for role in ["default", "best"] {
        let row = table
            .lines()
            .find(|l| l.trim_start().starts_with(role))
            .unwrap_or_else(|| panic!("no {role} row:\n{table}"));
        assert!(row.ends_with("as placed"), "{row}");
    }
    assert!(
        table.contains("gain (best over default): predicted "),
        "{table}"
    );
}
