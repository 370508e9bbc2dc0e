//! The measuring commands end to end on this machine. Timings on a shared
//! machine are noisy, so assertions are on orders of magnitude (L1 vs DRAM),
//! on byte accounting, on structure and on placement proofs, never on a
//! tight speed figure (speed targets live in bench/compare.sh).

use crate::common;

use common::{fails, fails_rc, fixture, json, num, stdout, turn};
use serde_json::Value;

const QUICK: [&str; 6] = [
    "--budget-each",
    "0.3",
    "--min-reps",
    "3",
    "--target-ci",
    "5",
];

/// `numalab ARGS` with the quick stopping rule, as JSON.
fn quick(args: &[&str]) -> Value {
    json(&[args, &QUICK[..]].concat())
}

/// `numalab bench bandwidth --kernel KERNEL --size SIZE --json`, quick.
fn bandwidth(kernel: &str, size: &str) -> Value {
    quick(&[
        "bench",
        "bandwidth",
        "--kernel",
        kernel,
        "--size",
        size,
        "--json",
    ])
}

#[test]
fn bandwidth_result_has_figures_verification_and_environment() {
    let _turn = turn();
    let v = bandwidth("triad", "16M");
    assert_eq!(v["schema_version"], "1.7");
    assert_eq!(v["command"], "bench bandwidth");
    assert_eq!(v["kernel"], "triad");
    let (med, best) = (
        v["gbps"]["median"].as_f64().unwrap(),
        v["gbps"]["best"].as_f64().unwrap(),
    );
    assert!(med > 0.1 && best >= med, "median {med} best {best}");
    // Triad moves 24 bytes per element for the program, 32 with write-allocate.
    let ratio = v["memory_gbps"]["median"].as_f64().unwrap() / med;
    assert!((ratio - 32.0 / 24.0).abs() < 1e-9, "{ratio}");
    assert_eq!(v["bytes_per_pass"]["program"], 24 * (16 << 20) / 8);
    let w = &v["verification"]["workers"][0];
    assert_eq!(v["verification"]["verified"], true);
    assert_eq!(w["buffers"].as_array().unwrap().len(), 3);
    assert_eq!(w["buffers"][0]["pages_by_node"]["0"], 4096);
    // At least --min-reps 3 samples, unless the 0.3 s budget ran out first:
    // the stop rule takes two samples at least and then keeps to its
    // budget (CI saw two beside the guest lane).
    let samples = v["measurement"]["samples"].as_array().unwrap().len();
    let reason = &v["measurement"]["stop_reason"];
    assert!(
        samples >= 3 || (samples == 2 && reason == "budget"),
        "{samples} samples, stopped by {reason}"
    );
    for key in [
        "kernel",
        "cpu_model",
        "thp_enabled",
        "numa_balancing",
        "hwloc_version",
        "numalab_version",
        "command_line",
    ] {
        assert!(
            !v["environment"][key].is_null() || key == "numa_balancing",
            "environment.{key}"
        );
    }
    assert!(v["environment"]["command_line"]
        .as_array()
        .unwrap()
        .iter()
        .any(|a| a == "triad"));
}

/// Whether this machine lists a memory-controller PMU.
fn has_memory_controller_pmu() -> bool {
    std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            d.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("uncore_imc") || n == "amd_df"
            })
        })
        .unwrap_or(false)
}

#[test]
fn memory_bytes_are_labelled_measured_or_assumed() {
    let _turn = turn();
    let v = bandwidth("write", "4M");
    let t = &v["memory_traffic"];
    let source = t["source"].as_str().unwrap();
    assert!(source == "assumed" || source == "measured", "{t}");
    // The assumed figure keeps its meaning: write counts 2x program bytes.
    let ratio =
        v["memory_gbps"]["median"].as_f64().unwrap() / v["gbps"]["median"].as_f64().unwrap();
    assert!((ratio - 2.0).abs() < 1e-9, "{ratio}");
    let text = common::stdout(
        &[
            &["bench", "bandwidth", "--kernel", "write", "--size", "4M"][..],
            &QUICK[..],
        ]
        .concat(),
    );
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("memory bytes"))
        .unwrap_or_else(|| panic!("{text}"));
    if !has_memory_controller_pmu() {
        assert_eq!(source, "assumed");
        assert_eq!(
            t["reason"],
            "not available on this machine: no uncore_imc, amd_umc or amd_df PMU"
        );
        assert!(t["read_bytes"].is_null() && t["gbps"].is_null(), "{t}");
        assert!(
            line.ends_with("(assumed: write-allocate counted, no memory-controller counters: not available on this machine: no uncore_imc, amd_umc or amd_df PMU)"),
            "{line}"
        );
    } else if source == "measured" {
        assert!(t["read_bytes"].as_u64().is_some(), "{t}");
        assert!(t["write_bytes"].as_u64().unwrap() > 0, "{t}");
        assert!(
            text.contains("measured by uncore_imc CAS counts: "),
            "{text}"
        );
    } else {
        assert!(line.contains("(assumed: "), "{line}");
        assert!(t["reason"].as_str().unwrap().len() > 10, "{t}");
    }
}

#[test]
fn write_nt_moves_fewer_memory_bytes_than_write() {
    let _turn = turn();
    let w = bandwidth("write", "16M");
    let nt = bandwidth("write-nt", "16M");
    assert_eq!(w["bytes_per_pass"]["memory"], 2 * (16u64 << 20));
    assert_eq!(nt["bytes_per_pass"]["memory"], 16u64 << 20);
    assert_eq!(
        w["bytes_per_pass"]["program"],
        nt["bytes_per_pass"]["program"]
    );
}

#[test]
fn latency_rises_from_l1_to_dram() {
    let _turn = turn();
    let small = quick(&["bench", "latency", "--size", "16K", "--json"]);
    let big = quick(&["bench", "latency", "--size", "512M", "--json"]);
    let (s, b) = (
        small["ns"]["median"].as_f64().unwrap(),
        big["ns"]["median"].as_f64().unwrap(),
    );
    // Plausibility, not a speed target: an L1 hit costs a few ns, a chase
    // that missed or timed nothing would give far more or less. A loaded
    // shared host stretched one clean-clone run's median to 13 ns, so the
    // bound is wide; the test's claim is the ratio below.
    assert!(s > 0.3 && s < 50.0, "L1 latency {s} ns");
    assert!(b > 5.0 * s, "DRAM {b} ns vs L1 {s} ns");
    assert!(
        big["cycles"]["median"].as_f64().unwrap() > big["ns"]["median"].as_f64().unwrap() * 0.5
    );
    assert_eq!(big["verification"]["verified"], true);
    // Several chains overlap their misses: the time per access drops.
    let chains = quick(&[
        "bench", "latency", "--size", "512M", "--chains", "4", "--json",
    ]);
    assert_eq!(chains["chains"], 4);
    assert!(
        chains["ns_per_access"].as_f64().unwrap() < b,
        "{} vs {b}",
        chains["ns_per_access"]
    );
}

#[test]
fn sizes_marks_cache_boundaries() {
    let _turn = turn();
    let v = json(&[
        "sizes",
        "--max-size",
        "4M",
        "--json",
        "--budget-each",
        "0.1",
        "--min-reps",
        "2",
        "--target-ci",
        "10",
    ]);
    let points = v["points"].as_array().unwrap();
    assert!(points.len() >= 6, "{}", points.len());
    assert_eq!(points[0]["fits_in"], "L1");
    let caches = v["caches"].as_array().unwrap();
    assert_eq!(caches[0]["name"], "L1");
    for p in points {
        assert_eq!(p["gbps"].as_array().unwrap().len(), 3);
        let bytes = p["bytes"].as_u64().unwrap();
        let fits = p["fits_in"].as_str().unwrap();
        let first_fit = caches
            .iter()
            .find(|c| bytes <= c["bytes"].as_u64().unwrap())
            .map(|c| c["name"].as_str().unwrap())
            .unwrap_or("memory");
        assert_eq!(fits, first_fit, "{bytes}");
    }
}

#[test]
fn scaling_single_thread_counts_bytes_like_bench_bandwidth() {
    let _turn = turn();
    let sc = quick(&["scaling", "--kernel", "read", "--size", "64M", "--json"]);
    let packed = sc["packed"].as_array().unwrap();
    let n = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    assert_eq!(packed.len(), n.min(packed.len()).max(1));
    assert_eq!(packed[0]["threads"], 1);
    let bw = bandwidth("read", "64M");
    // Same kernel and size: the same bytes per pass, and each figure is
    // those bytes over its own median pass time. How close the two
    // timings come is noise on this shared machine (a CI run saw 4.2 vs
    // 8.5 GB/s, another 54.6 vs 39.8), so it is bench/'s to say; the
    // accounting is the test's: bytes counted twice or in the wrong unit
    // break these equalities whatever the timing.
    assert_eq!(sc["kernel"], "read");
    assert_eq!(sc["buffer_bytes"], 64u64 << 20);
    assert_eq!(bw["bytes_per_pass"]["program"], 64u64 << 20);
    let per_pass = packed[0]["seconds_per_pass"].as_f64().unwrap();
    let median = packed[0]["gbps"]["median"].as_f64().unwrap();
    let bytes = (64u64 << 20) as f64;
    assert!(
        (median * 1e9 * per_pass / bytes - 1.0).abs() < 1e-6,
        "scaling: {median} GB/s x {per_pass} s is not 64 MiB"
    );
    assert_eq!(packed[0]["gbps"]["median"], packed[0]["per_thread_gbps"]);
    assert_eq!(bw["gbps"]["median"], bw["measurement"]["summary"]["median"]);
    // With 2 CPUs on node 0, the single-core reference also runs on the
    // pair's second CPU alone (the study ran it on each core of the pair).
    let alone = sc["alone"].as_array().cloned().unwrap_or_default();
    let t_alone: Vec<f64> = alone
        .iter()
        .map(|p| p["seconds_per_pass"].as_f64().unwrap())
        .collect();
    if packed.len() >= 2 {
        assert_eq!(alone.len(), 1, "{alone:?}");
        assert_eq!(alone[0]["threads"], 1);
        assert_eq!(alone[0]["cpus"], serde_json::json!([packed[1]["cpus"][1]]));
        assert_eq!(alone[0]["verified"], true);
    } else {
        assert!(alone.is_empty(), "{alone:?}");
    }
    if packed.len() >= 2 && sc["model"].is_null() {
        // This shared machine's noise can leave no split: the note must
        // then say which way the two packed points broke the model.
        let (t1, t2) = (
            (packed[0]["seconds_per_pass"].as_f64().unwrap() + t_alone[0]) / 2.0,
            packed[1]["seconds_per_pass"].as_f64().unwrap(),
        );
        let note = sc["model_note"].as_str().expect("no model and no note");
        let expected = if t2 < t1 {
            "there is no contention to split off"
        } else {
            "contention grows faster than the bandwidth model allows"
        };
        assert!(note.contains(expected), "{t1} -> {t2}: {note}");
    } else if packed.len() >= 2 {
        assert!(sc["model"]["core_seconds"].as_f64().unwrap() >= 0.0);
        // The split is fitted within one node: 1 and 2 packed threads.
        assert_eq!(
            sc["model"]["fitted_on"]["threads"],
            serde_json::json!([1, 2])
        );
        assert_eq!(sc["model"]["fitted_on"]["node"], 0);
        assert_eq!(
            sc["model"]["fitted_on"]["cpus"],
            serde_json::json!([packed[0]["cpus"][0], packed[1]["cpus"][1]])
        );
        // The one-core time is the mean of both cores alone: T(1) and T(2)
        // of the fit give back that mean and the 2-thread time.
        assert_eq!(
            sc["model"]["fitted_on"]["alone"],
            serde_json::json!([
                {"cpu": packed[0]["cpus"][0], "seconds_per_pass": packed[0]["seconds_per_pass"]},
                {"cpu": packed[1]["cpus"][1], "seconds_per_pass": t_alone[0]},
            ])
        );
        let core = sc["model"]["core_seconds"].as_f64().unwrap();
        let c = sc["model"]["contention_seconds"].as_f64().unwrap();
        let mean = (packed[0]["seconds_per_pass"].as_f64().unwrap() + t_alone[0]) / 2.0;
        assert!(
            (core + c - mean).abs() <= 1e-9 * mean,
            "{core} + {c} vs {mean}"
        );
        let t2 = packed[1]["seconds_per_pass"].as_f64().unwrap();
        assert!(
            (core + 2.0 * c - t2).abs() <= 1e-9 * t2,
            "{core} + 2 x {c} vs {t2}"
        );
    }
}

#[test]
fn matrix_on_this_machine() {
    let _turn = turn();
    let v = quick(&["matrix", "--size", "32M", "--json"]);
    let nodes = v["cpu_nodes"].as_array().unwrap().len();
    assert_eq!(v["latency"].as_array().unwrap().len(), nodes);
    assert_eq!(v["bandwidth"].as_array().unwrap().len(), nodes);
    assert_eq!(v["latency"][0][0]["numa_ratio"], 1.0);
    assert_eq!(v["verified"], true);
}

/// `matrix --list` plans without measuring, for this machine or one read
/// from a file: rows, columns (CPU-less ones named), the CPUs of each row,
/// cells, buffers and the measuring time; a cell that cannot fit in its
/// node is refused as the measurement would be.
#[test]
fn matrix_list_plans_a_machine_from_a_file_without_measuring() {
    // The JSON plan of the machine of fixture `file`.
    let plan_of = |file: &str, args: &[&str]| -> Value {
        let mut all = vec!["matrix", "--list", "--topology", file, "--json"];
        all.extend(args);
        json(&all)["plan"].clone()
    };
    let ring = fixture("qemu-ring4-cpuless-hmat.xml");
    let p = &plan_of(&ring, &["--size", "64M"]);
    assert_eq!(p["cpu_nodes"], serde_json::json!([0, 1, 2, 3]));
    assert_eq!(p["mem_nodes"], serde_json::json!([0, 1, 2, 3, 4]));
    assert_eq!(p["cpuless_nodes"], serde_json::json!([4]));
    assert_eq!(
        (p["latency_cells"].as_u64(), p["bandwidth_cells"].as_u64()),
        (Some(20), Some(20))
    );
    for (i, row) in p["rows"].as_array().unwrap().iter().enumerate() {
        // One CPU per node on this machine: it chases and it streams.
        assert_eq!(row["cpu_node"], i);
        assert_eq!(row["chase_cpu"], i);
        assert_eq!(row["stream_cpus"], serde_json::json!([i]));
    }
    assert_eq!(p["latency_bytes"], 64 << 20);
    // The default 12 s shared by 40 cells.
    assert_eq!(p["budget_per_cell_s"], 0.3);
    assert!((num(&p["measuring_s"]) - 12.0).abs() < 1e-9, "{p}");
    // The text says the same, CPU-less column included.
    let t = stdout(&[
        "matrix",
        "--list",
        "--topology",
        &ring,
        "--size",
        "64M",
        "--latency",
    ]);
    assert!(
        t.starts_with(&format!(
            "matrix plan for the machine of {ring} (nothing measured)\n"
        )),
        "{t}"
    );
    assert!(
        t.contains("columns (memory nodes): 0-4 (5; 1 without CPUs: 4)"),
        "{t}"
    );
    assert!(
        t.contains("latency: 20 cells, a random chase over 64 MiB"),
        "{t}"
    );
    assert!(!t.contains("bandwidth:"), "latency only: {t}");
    assert!(
        t.contains("0.60 s per cell: 12.0 s of measuring"),
        "12 s shared by 20 cells: {t}"
    );

    // Every CPU of a Quartet node streams, in compact order; one chases.
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    let p = &plan_of(
        &quartet,
        &[
            "--size",
            "32M",
            "--bandwidth",
            "--threads-per-node",
            "all",
            "--kernel",
            "copy",
            "--budget-each",
            "0.5",
        ],
    );
    assert!(p["cpuless_nodes"].as_array().unwrap().is_empty());
    let streams: Vec<&Value> = p["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["stream_cpus"])
        .collect();
    assert_eq!(
        streams,
        [
            &serde_json::json!([0, 1]),
            &serde_json::json!([2, 3]),
            &serde_json::json!([4, 5]),
            &serde_json::json!([6, 7])
        ]
    );
    assert!(p["rows"][0]["chase_cpu"].is_null(), "bandwidth only: {p}");
    assert_eq!(
        (p["latency_cells"].as_u64(), p["bandwidth_cells"].as_u64()),
        (Some(0), Some(16))
    );
    // Two threads, two arrays of 32 MiB each: 128 MiB placed at once.
    assert_eq!(p["largest_cell_bytes"], 128u64 << 20);
    assert!((num(&p["measuring_s"]) - 8.0).abs() < 1e-9, "{p}");

    // Buffers larger than a node: refused as the run would be.
    fails_rc(
        &["matrix", "--list", "--topology", &ring, "--size", "1G"],
        1,
        "node 0 holds 503 MiB of memory in all, and one cell places 1 GiB there: use a smaller --size",
    );
    fails(&["matrix", "--topology", &ring], "--list");
}

/// Threads past the address space are refused before any starts, naming
/// the limit (issue 37: 8192 threads under `ulimit -v` panicked in a
/// thread's start, then hung; now Rust would abort on the signal stack).
#[test]
fn threads_past_the_address_space_limit_are_refused_first() {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 3000000 && exec timeout 60 '{}' bench bandwidth --threads 8192 --oversubscribe --size 64K",
            env!("CARGO_BIN_EXE_numalab")
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    common::assert_one_line_error(
        "bench bandwidth --threads 8192 under ulimit -v",
        out.status.code().unwrap_or(-1),
        &err,
        1,
        "8192 threads need about 17 GiB of address space (stacks and buffers), and RLIMIT_AS (ulimit -v) 2.86 GiB leaves ",
    );
    assert!(err.contains("use fewer --threads"), "{err}");
}

#[test]
fn measuring_commands_reject_bad_options() {
    let _turn = turn();
    let cases: &[(&[&str], &str)] = &[
        (
            &["bench", "bandwidth", "--kernel", "stream"],
            "unknown kernel 'stream'; valid: read, read-prefetch, write",
        ),
        (
            &["bench", "bandwidth", "--size", "0"],
            "--size 0 is too small",
        ),
        (
            &["bench", "bandwidth", "--threads", "4096"],
            "4096 threads but only",
        ),
        (
            &["bench", "bandwidth", "--threads", "0"],
            "not a thread count",
        ),
        (&["bench", "bandwidth", "--isa", "mmx"], "valid:"),
        (&["bench", "bandwidth", "--units", "furlongs"], "valid: gb"),
        (&["bench", "bandwidth", "--target-ci", "0"], "--target-ci"),
        (&["bench", "bandwidth", "--budget", "-1"], "--budget"),
        (
            &["bench", "latency", "--pattern", "zigzag"],
            "valid: random, page, stride",
        ),
        (&["bench", "latency", "--chains", "0"], "--chains"),
        (&["matrix", "--threads-per-node", "2"], "valid: 1, all"),
        (
            &["scaling", "--max-threads", "999"],
            "--max-threads 999 but only",
        ),
        (
            &["sizes", "--max-size", "1K"],
            "smaller than the smallest size",
        ),
    ];
    for (args, needle) in cases {
        fails(args, needle);
    }
}

#[test]
fn forcing_an_isa_the_cpu_lacks_is_a_clean_error() {
    let _turn = turn();
    use numalab::measure::kernels::Isa;
    let missing: Vec<Isa> = [Isa::Avx512, Isa::Avx2, Isa::Sse2, Isa::Neon]
        .into_iter()
        .filter(|i| !Isa::available().contains(i))
        .collect();
    for isa in missing {
        fails(
            &["bench", "bandwidth", "--isa", isa.name(), "--size", "1M"],
            isa.name(),
        );
    }
    // The best available ISA runs.
    let best = Isa::detect_best();
    let v = quick(&[
        "bench",
        "bandwidth",
        "--isa",
        best.name(),
        "--size",
        "4M",
        "--json",
    ]);
    assert_eq!(v["isa"], best.name());
}

/// Each array by name, as `[array, policy, pages on node 0]`.
fn arrays_of(worker: &Value) -> Vec<(String, String, u64)> {
    worker["buffers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["array"].as_str().unwrap().to_string(),
                b["policy"].as_str().unwrap().to_string(),
                b["pages_by_node"]["0"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn each_array_gets_its_own_policy_and_its_own_proof() {
    let _turn = turn();
    let v = quick(&[
        "bench",
        "bandwidth",
        "--kernel",
        "triad",
        "--mem",
        "a=bind:0,c=interleave:all",
        "--size",
        "8M",
        "--json",
    ]);
    assert_eq!(v["verification"]["verified"], true);
    assert_eq!(
        arrays_of(&v["verification"]["workers"][0]),
        vec![
            ("a".into(), "bind:0".into(), 2048),
            ("b".into(), "first-touch".into(), 2048),
            ("c".into(), "interleave:0".into(), 2048),
        ]
    );
    // The text names every array and where its pages are.
    let t = common::numalab(&[
        "bench",
        "bandwidth",
        "--kernel",
        "copy",
        "--mem",
        "b=bind:0",
        "--size",
        "8M",
        "--budget-each",
        "0.2",
    ]);
    assert_eq!(t.rc, 0, "{}", t.err);
    assert!(t.out.contains("memory b=bind:0,"), "{}", t.out);
    for line in [
        "array a: first-touch pages node 0 100%",
        "array b: bind:0 pages node 0 100%",
    ] {
        assert!(t.out.contains(line), "{line}: {}", t.out);
    }
}

#[test]
fn a_placement_file_places_each_threads_arrays() {
    let _turn = turn();
    let dir = common::scratch("placement-file");
    let file = dir.join("placement.json");
    std::fs::write(
        &file,
        r#"[{"cpu": 0, "arrays": {"a": "bind:0", "b": "interleave:all"}}, {"cpu": 1, "arrays": {"b": "local"}}]"#,
    )
    .unwrap();
    let f = file.to_string_lossy().into_owned();
    let v = quick(&[
        "bench",
        "bandwidth",
        "--kernel",
        "copy",
        "--placement",
        &f,
        "--size",
        "8M",
        "--json",
    ]);
    let w = v["verification"]["workers"].as_array().unwrap();
    assert_eq!(w.len(), 2);
    assert_eq!(
        (
            w[0]["requested_cpu"].as_u64(),
            w[1]["requested_cpu"].as_u64()
        ),
        (Some(0), Some(1))
    );
    assert_eq!(
        arrays_of(&w[0]),
        vec![
            ("a".into(), "bind:0".into(), 2048),
            ("b".into(), "interleave:0".into(), 2048)
        ]
    );
    assert_eq!(
        arrays_of(&w[1]),
        vec![
            ("a".into(), "first-touch".into(), 2048),
            ("b".into(), "local".into(), 2048)
        ]
    );
    std::fs::write(&file, r#"[{"cpu": 0, "arrays": {"c": "bind:0"}}]"#).unwrap();
    fails(
        &["bench", "bandwidth", "--kernel", "copy", "--placement", &f],
        &format!(
            "--placement {f}: entry 0 (cpu 0): kernel copy has no array 'c' (its arrays: a, b)"
        ),
    );
    fails(
        &["bench", "bandwidth", "--placement", &f, "--threads", "2"],
        "cannot be used with '--threads <N>'",
    );
    fails(
        &["bench", "bandwidth", "--placement", "/nonexistent.json"],
        "--placement: cannot read /nonexistent.json",
    );
    fails(
        &[
            "bench",
            "bandwidth",
            "--kernel",
            "add",
            "--mem",
            "a=bind:0,a=bind:0",
        ],
        "--mem: array 'a' is given twice",
    );
    fails(
        &["matrix", "--kernel", "copy", "--mem", "bind:0"],
        "--mem: the matrix binds arrays to each column; name the arrays to keep in place instead",
    );
    fails(
        &["scaling", "--kernel", "read", "--mem", "b=local"],
        "--mem: kernel read has no array 'b' (its arrays: a)",
    );
}

#[test]
fn reps_asks_for_exactly_that_many_repetitions_on_every_statistics_command() {
    let _turn = turn();
    // --reps N is --min-reps N --max-reps N: exactly N samples, whatever
    // the precision reached (a 5% target that 2 samples rarely meet).
    let v = json(&[
        "bench",
        "bandwidth",
        "--kernel",
        "read",
        "--size",
        "4M",
        "--reps",
        "4",
        "--budget-each",
        "5",
        "--target-ci",
        "50",
        "--json",
    ]);
    assert_eq!(
        v["measurement"]["samples"].as_array().unwrap().len(),
        4,
        "{v}"
    );
    let v = json(&[
        "bench",
        "latency",
        "--size",
        "4M",
        "--reps",
        "2",
        "--budget-each",
        "5",
        "--json",
    ]);
    assert_eq!(
        v["measurement"]["samples"].as_array().unwrap().len(),
        2,
        "{v}"
    );
    // It replaces the pair, so it cannot be given with either.
    fails(
        &["bench", "bandwidth", "--reps", "3", "--min-reps", "2"],
        "'--reps <N>' cannot be used with '--min-reps <N>'",
    );
    fails(&["bench", "bandwidth", "--reps", "0"], "--reps");
    // With --copies each repetition runs the whole command: at most 100.
    fails(
        &["scaling", "--copies", "1", "--reps", "101", "--", "true"],
        "--reps 101 with --copies: runs of every layout, 1 to 100",
    );
}

#[test]
fn latency_commands_take_thp_like_the_others() {
    let _turn = turn();
    // One name for one concept: --thp on|off|system, as bench bandwidth,
    // place and apexmap; --huge stays the older spelling of --thp on.
    for args in [
        &["bench", "latency", "--size", "4M", "--thp", "on"][..],
        &["bench", "latency", "--size", "4M", "--huge"][..],
    ] {
        let v = quick(&[args, &["--json"]].concat());
        assert_eq!(v["command"], "bench latency", "{args:?}");
    }
    fails(
        &["bench", "latency", "--thp", "maybe"],
        "valid: on, off, system",
    );
    fails(
        &["loaded-latency", "--huge", "--thp", "off"],
        "'--huge' cannot be used with '--thp <THP>'",
    );
}
