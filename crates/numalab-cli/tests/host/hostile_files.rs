//! Hostile input files: topology files that crashed hwloc or overflowed its
//! stack, files of no size limit or no end (`/dev/zero`, a FIFO with no
//! writer, huge sparse files), results of unknown schemas, and `sweep
//! --from` with options it would ignore.

use crate::common;

use common::hostile::{check_all, Case};
use common::{fixture, scratch};
use std::path::{Path, PathBuf};

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The quartet fixture with `from` replaced by `to` (once), written to `dir`.
fn damaged(dir: &Path, name: &str, from: &str, to: &str) -> PathBuf {
    let text = std::fs::read_to_string(fixture("qemu-quartet-4n2c-ring.xml")).unwrap();
    assert!(text.contains(from), "{from}");
    let p = dir.join(name);
    std::fs::write(&p, text.replacen(from, to, 1)).unwrap();
    p
}

/// A named pipe nobody writes to: reading it would wait forever.
fn fifo(dir: &Path, name: &str) -> PathBuf {
    let p = dir.join(name);
    let c = std::ffi::CString::new(path(&p)).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    p
}

/// A sparse file of `bytes`: its size counts, no block is written.
fn sparse(dir: &Path, name: &str, bytes: u64) -> PathBuf {
    let p = dir.join(name);
    std::fs::File::create(&p).unwrap().set_len(bytes).unwrap();
    p
}

#[test]
fn topology_files_that_crashed_hwloc() {
    let d = scratch("hostile-topology-files");
    let package = "<object type=\"Package\" os_index=\"0\"";
    let quartet = std::fs::read_to_string(fixture("qemu-quartet-4n2c-ring.xml")).unwrap();

    // A Group with a cpuset and a nodeset, no complete sets: SIGSEGV in
    // hwloc_topology_load before numalab checked files.
    let at = quartet
        .find("<object type=\"Package\" os_index=\"1\"")
        .unwrap();
    let group = format!("{}</object>\n{}", &quartet[..at], &quartet[at..]).replacen(
        package,
        &format!("<object type=\"Group\" cpuset=\"0x00000003\" nodeset=\"0x00000001\">{package}"),
        1,
    );
    let group_file = d.join("group.xml");
    std::fs::write(&group_file, group).unwrap();

    // Objects nested 50 000 deep: hwloc recursed until the stack ran out.
    let level = "<object type=\"Group\" cpuset=\"0x000000ff\" complete_cpuset=\"0x000000ff\" nodeset=\"0x0000000f\" complete_nodeset=\"0x0000000f\">";
    let at = quartet.find("<distances2").unwrap();
    let deep = format!(
        "{}{}{}",
        &quartet[..at],
        "</object>".repeat(50_000),
        &quartet[at..]
    )
    .replacen(package, &format!("{}{package}", level.repeat(50_000)), 1);
    let deep_file = d.join("deep.xml");
    std::fs::write(&deep_file, deep).unwrap();

    // A bitmap starting with a comma: an assertion in hwloc_bitmap_sscanf
    // (SIGABRT).
    let comma = damaged(
        &d,
        "comma.xml",
        "cpuset=\"0x00000001\"",
        "cpuset=\",0x00000001\"",
    );
    let negative = damaged(
        &d,
        "negative-cache.xml",
        "cache_size=\"16777216\"",
        "cache_size=\"-1\"",
    );
    let huge_node = damaged(
        &d,
        "huge-node.xml",
        "local_memory=\"526729216\"",
        "local_memory=\"100000000000000000000000\"",
    );
    let absurd_pu = damaged(
        &d,
        "absurd-pu.xml",
        "<object type=\"PU\" os_index=\"0\"",
        "<object type=\"PU\" os_index=\"99999999\"",
    );
    let v1 = damaged(&d, "v1.xml", "<topology version=\"2.0\">", "<topology>");
    let entities = damaged(
        &d,
        "entities.xml",
        "<topology version=\"2.0\">",
        "<!DOCTYPE t [<!ENTITY a \"aaaaaaaaaaaaaaaa\"><!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]>\n<topology version=\"2.0\">",
    );
    let huge_matrix = damaged(&d, "matrix.xml", "nbobjs=\"4\"", "nbobjs=\"4000000000\"");
    let comment = damaged(
        &d,
        "comment.xml",
        "<object type=\"Package\" os_index=\"1\"",
        "<!-- edited --><object type=\"Package\" os_index=\"1\"",
    );

    let topology = |name: &str, file: &Path| {
        Case::new(name, &["topology", "--topology", path(file)])
            .code(2)
            .keeps(file)
    };
    let cases = vec![
        topology("group without complete sets", &group_file)
            .says("group.xml")
            .says("Group (line 25): no complete_cpuset attribute"),
        Case::new(
            "group without complete sets, set --topology",
            &["set", "0", "--topology", path(&group_file)],
        )
        .code(2)
        .says("no complete_cpuset"),
        Case::new(
            "group without complete sets, sweep --list --topology",
            &["sweep", "--list", "--topology", path(&group_file)],
        )
        .code(2)
        .says("no complete_cpuset"),
        topology("50 000 nested objects", &deep_file).says("nest more than 64 levels deep"),
        topology("bitmap starting with a comma", &comma)
            .says("cpuset=\",0x00000001\" starts or ends with a comma"),
        topology("negative cache size", &negative)
            .says("L3Cache P#0 (line 36): cache_size=\"-1\" is not a cache size"),
        topology("10^23-byte node", &huge_node).says("below 1 PiB"),
        topology("absurd PU index", &absurd_pu).says("os_index 99999999 is above 65535"),
        topology("XML v1", &v1).says("XML v1"),
        topology("entity declarations", &entities).says("<!ENTITY>"),
        topology("4e9-object distance matrix", &huge_matrix)
            .says("nbobjs=\"4000000000\" is not a number of objects up to 4096"),
        topology("a comment hwloc's own reader cannot read", &comment)
            .says("comment or processing instruction"),
    ];
    check_all("topology files", cases);
}

#[test]
fn inputs_without_a_size_or_an_end() {
    let d = scratch("hostile-input-kinds");
    let topology_fifo = fifo(&d, "topology.fifo");
    let result_fifo = fifo(&d, "result.fifo");
    let big_xml = sparse(&d, "big.xml", (32 << 20) + 1);
    let big_json = sparse(&d, "big.json", (256 << 20) + 1);
    let sweep_json = d.join("sweep.json");
    std::fs::write(&sweep_json, r#"{"schema_version":"1.0","command":"sweep"}"#).unwrap();
    // A report folder whose results.json is a directory or a FIFO.
    let report_dir = d.join("report-dir");
    std::fs::create_dir_all(report_dir.join("results.json")).unwrap();
    let report_fifo = d.join("report-fifo");
    std::fs::create_dir_all(&report_fifo).unwrap();
    fifo(&report_fifo, "results.json");

    let cases = vec![
        Case::new(
            "topology from /dev/zero",
            &["topology", "--topology", "/dev/zero"],
        )
        .code(2)
        .says("/dev/zero: it is a character device, not a regular file"),
        Case::new("compare /dev/zero", &["compare", "/dev/zero", "/dev/zero"])
            .code(2)
            .says("cannot read /dev/zero: it is a character device"),
        Case::new(
            "compare a result with /dev/zero",
            &["compare", path(&sweep_json), "/dev/zero"],
        )
        .code(2)
        .says("character device")
        .keeps(&sweep_json),
        Case::new("sweep --from /dev/zero", &["sweep", "--from", "/dev/zero"])
            .code(2)
            .says("--from /dev/zero: it is a character device"),
        // Its size check once trusted metadata().len(), 0 for a device,
        // and read 2 GB before it was stopped.
        Case::new(
            "profile --machine /dev/zero",
            &["profile", "--machine", "/dev/zero", "-o", path(&d.join("pz")), "--", "true"],
        )
        .code(2)
        .says("--machine: cannot read /dev/zero: it is a character device"),
        Case::new(
            "topology from a FIFO with no writer",
            &["topology", "--topology", path(&topology_fifo)],
        )
        .code(2)
        .says("it is a FIFO (named pipe) that no program writes into (give a file saved on disk, or a pipe a program writes"),
        Case::new(
            "compare FIFOs with no writer",
            &["compare", path(&result_fifo), path(&result_fifo)],
        )
        .code(2)
        .says("FIFO"),
        Case::new(
            "sweep --from a FIFO with no writer",
            &["sweep", "--from", path(&result_fifo)],
        )
        .code(2)
        .says("FIFO"),
        Case::new("compare directories", &["compare", path(&d), path(&d)])
            .code(2)
            .says("it is a directory, not a regular file"),
        Case::new(
            "topology file above the cap",
            &["topology", "--topology", path(&big_xml)],
        )
        .code(2)
        .says(
            "it holds 33554433 bytes (32.0 MiB), above the 32 MiB numalab reads as a topology file",
        ),
        Case::new(
            "compare a result above the cap",
            &["compare", path(&big_json), path(&big_json)],
        )
        .code(2)
        .says("above the 256 MiB numalab reads as a result file"),
        Case::new(
            "sweep --from a result above the cap",
            &["sweep", "--from", path(&big_json)],
        )
        .code(2)
        .says("above the 256 MiB"),
        Case::new(
            "report --resume with results.json a directory",
            &["report", "-o", path(&report_dir), "--resume"],
        )
        .code(2)
        // Not a numalab report folder: refused before anything is read.
        .says("holds 1 file(s) numalab did not make (results.json)"),
        Case::new(
            "report --resume with results.json a FIFO",
            &["report", "-o", path(&report_fifo), "--resume"],
        )
        .code(2)
        .says("holds 1 file(s) numalab did not make (results.json)"),
    ];
    check_all("input kinds", cases);
}

#[test]
fn compare_reads_only_numalab_results_it_knows() {
    let d = scratch("hostile-compare-schemas");
    let write = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        p
    };
    let future = write(
        "future.json",
        r#"{"schema_version":"2.0","command":"matrix","latency":[]}"#,
    );
    let future_report = write(
        "future-report.json",
        r#"{"schema":"numalab-report","schema_version":"3.1"}"#,
    );
    let other_schema = write(
        "other.json",
        r#"{"schema":"not-numalab","schema_version":"1.0"}"#,
    );
    let no_command = write("machine.json", r#"{"schema_version":"1.0","nodes":[]}"#);
    let array = write("array.json", "[1, 2, 3]");
    let deep = write(
        "deep.json",
        &format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
    );
    let binary = d.join("binary.json");
    std::fs::write(&binary, [0xff, 0xfe, 0x00, 0x7b]).unwrap();
    let compare = |name: &str, file: &Path| {
        Case::new(name, &["compare", path(file), path(file)])
            .code(2)
            .keeps(file)
    };
    let cases = vec![
        compare("a result of schema 2.0", &future)
            .says("is a numalab result of schema version \"2.0\"")
            .says("(it reads 1.x)"),
        compare("a report of schema 3.1", &future_report)
            .says("is a numalab report of schema version \"3.1\""),
        compare("another schema", &other_schema).says("is not a numalab result"),
        compare("no command", &no_command).says("no command names what made it"),
        compare("not an object", &array).says("not a JSON object"),
        compare("100 000 nested arrays", &deep).says("is not JSON"),
        compare("not UTF-8", &binary).says("not UTF-8 text"),
        Case::new(
            "sweep --from a result of schema 2.0",
            &["sweep", "--from", path(&future)],
        )
        .code(2)
        .says("schema version \"2.0\"")
        .keeps(&future),
    ];
    check_all("compare schemas", cases);
}

#[test]
fn sweep_from_refuses_options_it_would_ignore() {
    let d = scratch("hostile-sweep-from");
    let saved = d.join("sweep.json");
    std::fs::write(&saved, r#"{"schema_version":"1.0","command":"sweep"}"#).unwrap();
    let from = |name: &str, extra: &[&str]| {
        let mut args = vec!["sweep", "--from", path(&saved)];
        args.extend_from_slice(extra);
        Case::new(name, &args).code(2).keeps(&saved)
    };
    let cases = vec![
        from("--thread-counts", &["--thread-counts", "1"])
            .says("'--from <FILE>' cannot be used with")
            .says("--thread-counts"),
        from(
            "--background and --reps",
            &["--background", "low", "--reps", "3"],
        )
        .says("--background")
        .says("--reps"),
        from("--list", &["--list"]).says("--list"),
        from(
            "--topology",
            &["--topology", &fixture("qemu-quartet-4n2c-ring.xml")],
        )
        .says("--topology"),
        from(
            "--every-case and --budget",
            &["--every-case", "--budget", "5"],
        )
        .says("--every-case")
        .says("--budget"),
        from("--cpus", &["--cpus", "0", "--findings"]).says("--cpus"),
    ];
    check_all("sweep --from", cases);
}
