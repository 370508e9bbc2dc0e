//! Hostile numbers in every numeric option of every command: beyond any
//! range (`1e308`, 2^64), not numbers at all (`inf`, `NaN`), negative
//! (`-1`, which must reach our parser rather than clap's "unexpected
//! argument"), zero where zero means nothing. Each must be refused at parse
//! time in one line that names the option and its range, exit code 2:
//! never a panic on the float-to-Duration conversion, a capacity overflow,
//! a week-long run or `inf` in a table.

use crate::common;

use common::hostile::{check_all, Case};

/// Cases of `prefix OPT VALUE` for each bad value, each refused naming the
/// option and saying `needle`.
fn refused(prefix: &[&str], opt: &str, values: &[&str], needle: &str) -> Vec<Case> {
    values
        .iter()
        .map(|v| {
            let mut args: Vec<&str> = prefix.to_vec();
            args.extend([opt, v]);
            Case::new(format!("{} {opt} {v}", prefix.join(" ")), &args)
                .code(2)
                .says(opt)
                .says(needle)
        })
        .collect()
}

/// Commands that take the measurement options (`--budget`, `--target-ci`,
/// `--min-reps`...).
const MEASURING: &[&[&str]] = &[
    &["bench", "bandwidth"],
    &["bench", "latency"],
    &["matrix"],
    &["c2c"],
    &["policies"],
    &["scaling"],
    &["sizes"],
    &["apexmap"],
    &["loaded-latency"],
];

#[test]
fn budgets_and_durations() {
    let bad = ["1e308", "inf", "-inf", "NaN", "-1", "0", "604801", "1e-9"];
    let mut cases = Vec::new();
    for cmd in MEASURING {
        cases.extend(refused(cmd, "--budget", &bad, "from 0.001 to 604800"));
    }
    cases.extend(refused(
        &["sweep"],
        "--budget",
        &bad,
        "from 0.001 to 604800",
    ));
    cases.extend(refused(
        &["sweep"],
        "--budget-each",
        &bad,
        "from 0.001 to 604800",
    ));
    cases.extend(refused(
        &["report"],
        "--budget",
        &["1e308", "inf", "NaN", "604801"],
        "604800",
    ));
    cases.extend(refused(
        &["report"],
        "--budget",
        &["-1", "0.5"],
        "must be at least 1 second",
    ));
    check_all("budgets", cases);
}

#[test]
fn statistics_options() {
    let mut cases = Vec::new();
    for cmd in MEASURING {
        cases.extend(refused(
            cmd,
            "--target-ci",
            &["0", "100", "-5", "1e308", "NaN"],
            "above 0 and below 100",
        ));
        cases.extend(refused(
            cmd,
            "--min-reps",
            &["0", "-1", "18446744073709551616", "1000001"],
            "from 1 to 1000000",
        ));
        cases.extend(refused(
            cmd,
            "--max-reps",
            &["-1", "1e308"],
            "from 1 to 1000000",
        ));
        cases.extend(refused(
            cmd,
            "--warmup",
            &["-1", "18446744073709551615"],
            "from 0 to 1000000",
        ));
    }
    check_all("statistics options", cases);
}

#[test]
fn thread_counts() {
    let bad = ["18446744073709551615", "-1", "0", "8193", "1e3"];
    let mut cases = Vec::new();
    for (cmd, opt) in [
        (&["bench", "bandwidth"][..], "--threads"),
        (&["policies"], "--threads"),
        (&["scaling"], "--max-threads"),
    ] {
        cases.extend(refused(cmd, opt, &bad, "from 1 to 8192"));
    }
    cases.extend(refused(
        &["sweep", "--list"],
        "--thread-counts",
        &["9", "-1", "18446744073709551616"],
        "from 1 to 8",
    ));
    cases.extend(refused(
        &["bench", "latency"],
        "--chains",
        &["0", "65", "-1"],
        "from 1 to 64",
    ));
    check_all("thread counts", cases);
}

#[test]
fn sizes() {
    let mut cases = Vec::new();
    let with_size: &[(&[&str], &str)] = &[
        (&["bench", "bandwidth"], "--size"),
        (&["bench", "latency"], "--size"),
        (&["matrix"], "--size"),
        (&["policies"], "--size"),
        (&["scaling"], "--size"),
        (&["sizes"], "--max-size"),
        (&["apexmap"], "--size"),
        (&["loaded-latency"], "--size"),
        (&["loaded-latency"], "--injector-size"),
        (&["sweep"], "--size"),
        (&["sweep"], "--background-size"),
        (&["report"], "--size"),
        (&["place", "--mem", "local"], "--size"),
    ];
    let huge_digits = "9".repeat(400);
    for (cmd, opt) in with_size {
        cases.extend(refused(cmd, opt, &["-1", "-1K"], "is not a size"));
        cases.extend(refused(cmd, opt, &["200T", &huge_digits], "at most 128T"));
        cases.extend(refused(cmd, opt, &["1e308", "1P"], "unknown size unit"));
    }
    check_all("sizes", cases);
}

/// The options of the classic studies' scenarios, the core + contention
/// split and page migration.
#[test]
fn scenario_extrapolation_migration_and_copies_numbers() {
    let mut cases = Vec::new();
    cases.extend(refused(
        &["sweep", "--scenarios", "all"],
        "--rounds",
        &["0", "3", "-1", "101", "18446744073709551616"],
        "from 4 to 100",
    ));
    cases.extend(refused(
        &["extrapolate"],
        "--times",
        &["1,NaN", "-1,2", "1e308,2", "1,inf"],
        "from 0.001 to 604800",
    ));
    cases.extend(refused(
        &["extrapolate", "--times", "1,2"],
        "--to",
        &["0", "-1", "65537"],
        "from 1 to 65536",
    ));
    cases.extend(refused(
        &["migrate"],
        "--reps",
        &["0", "-1", "101", "1e9"],
        "from 1 to 100",
    ));
    for bad in ["0", "-1", "1025", "18446744073709551616"] {
        cases.push(
            Case::new(
                format!("scaling --copies {bad} -- true"),
                &["scaling", "--copies", bad, "--", "true"],
            )
            .code(2)
            .says("--copies")
            .says("from 1 to 1024"),
        );
    }
    cases.extend(refused(
        &["blas"],
        "--n",
        &["0", "-1", "1e9", "20001"],
        "from 1 to 20000",
    ));
    cases.extend(refused(
        &["blas"],
        "--parallel",
        &["0", "-1", "1001"],
        "from 1 to 1000",
    ));
    cases.extend(refused(
        &["blas"],
        "--budget",
        &["NaN", "-1", "1e308"],
        "from 0.001 to 604800",
    ));
    check_all(
        "scenario, extrapolation, migration, copies and blas numbers",
        cases,
    );
}

#[test]
fn rates_delays_and_other_numbers() {
    let mut cases = Vec::new();
    cases.extend(refused(
        &["loaded-latency"],
        "--rates",
        &["1e308", "inf", "1e-300", "0", "-1", "10001", "1,NaN"],
        "positive number of GB/s from 0.001 to 10000",
    ));
    cases.extend(refused(
        &["loaded-latency"],
        "--delays",
        &["18446744073709551615", "-5", "1000000001", "1e9"],
        "from 0 to 1000000000",
    ));
    cases.extend(refused(
        &["sweep"],
        "--background",
        &["1e308", "0", "-1", "low,1e-300"],
        "from 0.001 to 10000",
    ));
    cases.extend(refused(
        &["sweep"],
        "--reps",
        &["0", "-1", "1001"],
        "from 1 to 1000",
    ));
    cases.extend(refused(
        &["sweep"],
        "--sample-ms",
        &["1e308", "-1", "NaN"],
        "from 0 to 10000",
    ));
    cases.extend(refused(
        &["bench", "latency"],
        "--pattern",
        &["stride:4", "stride:12", "stride:18446744073709551616"],
        "multiple of 8",
    ));
    cases.extend(refused(
        &["bench", "latency"],
        "--pattern",
        &["page:0", "page:999999999999"],
        "from 1 to 262144",
    ));
    cases.extend(refused(
        &["verify"],
        "--pid",
        &["-1", "0", "99999999999999"],
        "not a process id",
    ));
    cases.extend(refused(
        &["apexmap"],
        "--alphas",
        &["1e308", "-1", "NaN"],
        "(0, 1]",
    ));
    cases.extend(refused(
        &["apexmap"],
        "--ls",
        &["99999999999999999999", "-1", "0"],
        "from 1 to 65536",
    ));
    cases.extend(refused(
        &["place", "--size", "4K"],
        "--mem",
        &[
            "interleave:0@0",
            "interleave:0@1073741825",
            "interleave:0@-1",
        ],
        "from 1 to 1073741824",
    ));
    cases.extend(refused(
        &["place", "--size", "4K"],
        "--mem",
        &["weighted:0=0", "weighted:0=256", "weighted:0=-1"],
        "from 1 to 255",
    ));
    check_all("rates, delays and other numbers", cases);
}

#[test]
fn error_examples_work_on_this_machine() {
    // The examples a refusal suggests are accepted: `weighted:` must not
    // propose node 1 on a machine with one node.
    let cases = vec![
        Case::new(
            "place --mem weighted:",
            &["place", "--size", "4K", "--mem", "weighted:"],
        )
        .code(2)
        .says("e.g. weighted:0="),
        Case::new(
            "place --mem weighted:x",
            &["place", "--size", "4K", "--mem", "weighted:x"],
        )
        .code(2)
        .says("e.g. weighted:0="),
    ];
    check_all("error examples", cases);
    let r = common::numalab(&["place", "--size", "4K", "--mem", "weighted:"]);
    let example = r
        .err
        .split("e.g. ")
        .nth(1)
        .and_then(|rest| rest.split([';', ' ']).next())
        .unwrap_or_else(|| panic!("no example in {}", r.err));
    let ok = common::numalab(&["place", "--size", "4K", "--mem", example]);
    assert_eq!(ok.rc, 0, "the example {example} is refused: {}", ok.err);
}

#[test]
fn a_stride_chase_names_its_pattern() {
    let out = common::stdout(&[
        "bench",
        "latency",
        "--pattern",
        "stride",
        "--size",
        "64K",
        "--budget-each",
        "0.01",
    ]);
    assert!(out.starts_with("stride chase on CPU"), "{out}");
    assert!(!out.contains("Stride {"), "{out}");
}
