//! Hostile conditions on numalab's output side: standard output closed or
//! on a full device, output files that are the inputs, folders holding the
//! user's files, a full disk, two reports into one folder, paths and
//! arguments that are not UTF-8, and no arguments at all.

use crate::common;

use common::hostile::{arg, check_all, file, Case, Stdout};
use common::{fixture, scratch, turn};
use serde_json::Value;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_numalab")
}

/// A result `numalab compare` accepts (one latency figure).
fn result_json(latency: f64) -> String {
    format!(
        r#"{{"schema_version": "1.0", "command": "matrix", "latency": [[{{"cpu_node": 0, "mem_node": 1, "value": {{"median": {latency}, "best": {latency}, "min": {latency}, "max": {latency}, "spread": 0.01, "rel_ci": 0.01}}}}]]}}"#
    )
}

/// A path with a byte that is not UTF-8 in its last component.
fn not_utf8(dir: &Path, stem: &[u8], ext: &str) -> PathBuf {
    let mut name = stem.to_vec();
    name.push(0xff);
    name.extend_from_slice(ext.as_bytes());
    dir.join(OsStr::from_bytes(&name))
}

fn os(args: &[&OsStr]) -> Vec<OsString> {
    args.iter().map(|a| a.to_os_string()).collect()
}

/// Names in `dir`, sorted.
fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn standard_output_closed_or_full() {
    let d = scratch("hostile-stdout");
    let (a, b) = (
        file(&d, "a.json", result_json(100.0)),
        file(&d, "b.json", result_json(130.0)),
    );
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    let big = fixture("16amd64-8n2c.xml");
    let full = || Stdout::File(PathBuf::from("/dev/full"));
    let report_dir = d.join("report");
    let cases = vec![
        Case::new("topology, stdout closed", &["topology"])
            .stdout(Stdout::Closed)
            .code(1)
            .says("cannot write to standard output")
            .says("closed"),
        Case::new("topology --json, stdout closed", &["topology", "--json"])
            .stdout(Stdout::Closed)
            .code(1)
            .says("closed"),
        Case::new(
            "sweep --list, stdout closed",
            &["sweep", "--list", "--topology", &big],
        )
        .stdout(Stdout::Closed)
        .code(1)
        .says("standard output"),
        Case::new("compare, stdout closed", &["compare", &arg(&a), &arg(&b)])
            .stdout(Stdout::Closed)
            .code(1)
            .says("standard output")
            .keeps(&a)
            .keeps(&b),
        Case::new("--version, stdout closed", &["--version"])
            .stdout(Stdout::Closed)
            .code(1)
            .says("standard output"),
        Case::new("topology > /dev/full", &["topology"])
            .stdout(full())
            .code(1)
            .says("cannot write to standard output")
            .says("no space left"),
        Case::new("topology --json > /dev/full", &["topology", "--json"])
            .stdout(full())
            .code(1)
            .says("no space left"),
        // Megabytes of text: the write fails in the middle of the stream.
        Case::new(
            "sweep --list > /dev/full",
            &["sweep", "--list", "--topology", &big],
        )
        .stdout(full())
        .code(1)
        .says("no space left"),
        Case::new("--help > /dev/full", &["--help"])
            .stdout(full())
            .code(1)
            .says("standard output"),
        Case::new(
            "compare > /dev/full",
            &["compare", &arg(&a), &arg(&b), "--json"],
        )
        .stdout(full())
        .code(1)
        .says("no space left")
        .keeps(&a)
        .keeps(&b),
        Case::new(
            "topology report > /dev/full",
            &["report", "--topology", &quartet, "-o", &arg(&report_dir)],
        )
        .stdout(full())
        .code(1)
        .says("no space left"),
    ];
    check_all("standard output", cases);
    // The report itself was written; only its summary was lost.
    assert!(report_dir.join("results.json").is_file());
}

#[test]
fn output_files_never_replace_inputs_or_the_users_files() {
    let d = scratch("hostile-over-inputs");
    let (a, b) = (
        file(&d, "a.json", result_json(100.0)),
        file(&d, "b.json", result_json(130.0)),
    );
    let (a_s, b_s) = (arg(&a), arg(&b));
    let link = d.join("link.html");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    let hard = d.join("hard.html");
    std::fs::hard_link(&b, &hard).unwrap();
    let mine = file(&d, "mine.html", "<html>the user's page</html>");
    let dir_out = d.join("a-folder");
    std::fs::create_dir_all(&dir_out).unwrap();
    // Folders for `report -o`.
    let foreign = d.join("foreign");
    std::fs::create_dir_all(&foreign).unwrap();
    let foreign_html = file(&foreign, "report.html", "<html>not numalab's</html>");
    let foreign_notes = file(&foreign, "notes.txt", "notes");
    let foreign_json = d.join("foreign-json");
    std::fs::create_dir_all(&foreign_json).unwrap();
    let their_results = file(&foreign_json, "results.json", r#"{"mine": true}"#);
    let holds_input = d.join("holds-input");
    std::fs::create_dir_all(&holds_input).unwrap();
    let input_there = holds_input.join("report.txt");
    std::fs::copy(fixture("qemu-quartet-4n2c-ring.xml"), &input_there).unwrap();
    let ran = d.join("ran-anyway");
    let script = file(&d, "script.sh", format!("touch '{}'\n", ran.display()));
    let cases = vec![
        Case::new(
            "compare a a --html a",
            &["compare", &a_s, &a_s, "--html", &a_s],
        )
        .code(2)
        .says("same file")
        .says("never writes over an input")
        .keeps(&a),
        Case::new(
            "--html is B under another spelling",
            &[
                "compare",
                &a_s,
                &b_s,
                "--html",
                &format!("{}/./b.json", d.display()),
            ],
        )
        .code(2)
        .says("same file as B")
        .keeps(&b),
        Case::new(
            "--html is a link to A",
            &["compare", &a_s, &b_s, "--html", &arg(&link)],
        )
        .code(2)
        .says("is a symbolic link")
        .keeps(&a),
        Case::new(
            "--html is a hard link of B",
            &["compare", &a_s, &b_s, "--html", &arg(&hard)],
        )
        .code(2)
        .says("same file as B")
        .keeps(&b),
        Case::new(
            "--html over a page numalab did not write",
            &["compare", &a_s, &b_s, "--html", &arg(&mine)],
        )
        .code(2)
        .says("not a page numalab compare wrote")
        .says("--force")
        .keeps(&mine),
        Case::new(
            "--html is a folder",
            &["compare", &a_s, &b_s, "--html", &arg(&dir_out)],
        )
        .code(2)
        .says("is a directory"),
        Case::new(
            "--html in a missing folder",
            &[
                "compare",
                &a_s,
                &b_s,
                "--html",
                &arg(&d.join("no/such/x.html")),
            ],
        )
        .code(2)
        .says("does not exist"),
        Case::new(
            "--html where nothing can be created",
            &["compare", &a_s, &b_s, "--html", "/proc/numalab-out.html"],
        )
        .code(1)
        .says("cannot write /proc/numalab-out.html"),
        Case::os(
            "--html not UTF-8 in a missing folder",
            os(&[
                OsStr::new("compare"),
                a.as_os_str(),
                b.as_os_str(),
                OsStr::new("--html"),
                not_utf8(&d.join("none"), b"out", ".html").as_os_str(),
            ]),
        )
        .code(2)
        .says("does not exist"),
        Case::new(
            "report -o a folder of the user's files",
            &["report", "-o", &arg(&foreign)],
        )
        .code(2)
        .says("2 file(s) numalab did not make (notes.txt, report.html)")
        .says("--force")
        .keeps(&foreign_html)
        .keeps(&foreign_notes)
        .keeps(foreign.join(".numalab-report")),
        Case::new(
            "report --topology -o a folder of the user's files",
            &[
                "report",
                "--topology",
                &fixture("qemu-quartet-4n2c-ring.xml"),
                "-o",
                &arg(&foreign),
            ],
        )
        .code(2)
        .says("did not make")
        .keeps(&foreign_html),
        Case::new(
            "report -o a folder whose results.json is not numalab's",
            &["report", "-o", &arg(&foreign_json)],
        )
        .code(2)
        .says("did not make (results.json)")
        .keeps(&their_results),
        Case::new(
            "report --force over its own --topology file",
            &[
                "report",
                "--topology",
                &arg(&input_there),
                "-o",
                &arg(&holds_input),
                "--force",
            ],
        )
        .code(2)
        .says("never writes over an input")
        .keeps(&input_there),
        Case::new(
            "report -o where nothing can be created",
            &["report", "-o", "/proc/numalab-report-here"],
        )
        .code(1)
        .says("/proc/numalab-report-here"),
        Case::new(
            "run --verify-json where nothing can be created",
            &[
                "run",
                "--verify",
                "--verify-json",
                "/proc/numalab-v.json",
                "--",
                "sh",
                &arg(&script),
            ],
        )
        .code(1)
        .says("cannot create a file in /proc"),
        Case::new(
            "run --verify-json in a missing folder",
            &[
                "run",
                "--verify",
                "--verify-json",
                &arg(&d.join("no/such/v.json")),
                "--",
                "sh",
                &arg(&script),
            ],
        )
        .code(2)
        .says("does not exist"),
        Case::new(
            "run --verify-json is a folder",
            &[
                "run",
                "--verify",
                "--verify-json",
                &arg(&dir_out),
                "--",
                "sh",
                &arg(&script),
            ],
        )
        .code(2)
        .says("is a directory"),
        Case::new(
            "run --verify-json over the command's script",
            &[
                "run",
                "--verify",
                "--verify-json",
                &arg(&script),
                "--",
                "sh",
                &arg(&script),
            ],
        )
        .code(2)
        .says("same file as the command's argument")
        .keeps(&script),
    ];
    check_all("output files", cases);
    // Refused before the command started: the script never ran.
    assert!(
        !ran.exists(),
        "the command ran although its --verify-json could not be written"
    );
    // Refused folders got nothing, not even the lock file.
    assert_eq!(names_in(&foreign), vec!["notes.txt", "report.html"]);
    assert_eq!(names_in(&foreign_json), vec!["results.json"]);
    // --force writes beside the user's files, never over them: a folder
    // holding a user's results.json or report.html is refused, unchanged.
    for (folder, theirs, name) in [
        (&foreign, &foreign_html, "report.html"),
        (&foreign_json, &their_results, "results.json"),
    ] {
        let before = std::fs::read(theirs).unwrap();
        let r = Command::new(bin())
            .args(["report", "--topology"])
            .arg(fixture("qemu-quartet-4n2c-ring.xml"))
            .arg("-o")
            .arg(folder)
            .arg("--force")
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "{err}");
        assert!(
            err.contains(&format!("under names the report writes ({name}): --force writes the report's files beside a folder's own files, never over them")),
            "{err}"
        );
        assert_eq!(std::fs::read(theirs).unwrap(), before);
        assert!(!names_in(folder).contains(&".numalab-report".to_string()));
    }
    // Beside other files, --force writes and removes none.
    std::fs::remove_file(&foreign_html).unwrap();
    let r = Command::new(bin())
        .args(["report", "--topology"])
        .arg(fixture("qemu-quartet-4n2c-ring.xml"))
        .arg("-o")
        .arg(&foreign)
        .arg("--force")
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    assert!(names_in(&foreign).contains(&"notes.txt".to_string()));
    assert!(names_in(&foreign).contains(&".numalab-report".to_string()));
}

/// A small tmpfs that root mounts and the guard unmounts.
struct SmallDisk(PathBuf);

impl SmallDisk {
    fn mount(at: &Path) -> Option<SmallDisk> {
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=512k", "numalab-test"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk(at.to_path_buf()))
    }

    /// Fills the rest of the disk.
    fn fill(&self) {
        let _ = Command::new("dd")
            .args(["if=/dev/zero", "bs=4k"])
            .arg(format!("of={}", self.0.join("filler").display()))
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_keeps_the_old_files_whole() {
    let d = scratch("hostile-full-disk");
    let Some(disk) = SmallDisk::mount(&d.join("disk")) else {
        numalab_testkit::skip("cannot mount a small tmpfs here (needs root and mount rights)");
        return;
    };
    let (a, b) = (
        file(&d, "a.json", result_json(100.0)),
        file(&d, "b.json", result_json(130.0)),
    );
    let page = disk.0.join("compare.html");
    let report = disk.0.join("report");
    let quartet = fixture("qemu-quartet-4n2c-ring.xml");
    for args in [
        vec![
            "compare".to_string(),
            arg(&a),
            arg(&b),
            "--html".into(),
            arg(&page),
        ],
        vec![
            "report".into(),
            "--topology".into(),
            quartet.clone(),
            "-o".into(),
            arg(&report),
        ],
    ] {
        let r = Command::new(bin()).args(&args).output().unwrap();
        assert_eq!(r.status.code(), Some(0), "{args:?}: {r:?}");
    }
    // The lock file is rewritten by every run that claims the folder.
    let report_files: Vec<String> = names_in(&report)
        .into_iter()
        .filter(|n| n != ".numalab-report")
        .collect();
    disk.fill();
    let mut cases = vec![
        Case::new(
            "compare --html onto a full disk",
            &["compare", &arg(&a), &arg(&b), "--html", &arg(&page)],
        )
        .code(1)
        .says("no space left")
        .keeps(&page),
        Case::new(
            "report --force onto a full disk",
            &[
                "report",
                "--topology",
                &quartet,
                "-o",
                &arg(&report),
                "--force",
            ],
        )
        .code(1)
        .says("no space left"),
    ];
    let last = cases.pop().unwrap();
    let last = report_files
        .iter()
        .fold(last, |c, n| c.keeps(report.join(n)));
    cases.push(last);
    check_all("full disk", cases);
    // No temporary file is left behind either.
    let mut left = names_in(&report);
    left.retain(|n| n != ".numalab-report");
    assert_eq!(left, report_files);
    assert_eq!(names_in(&disk.0), vec!["compare.html", "filler", "report"]);
}

#[test]
fn paths_and_arguments_that_are_not_utf8_work() {
    let d = scratch("hostile-not-utf8");
    // `run` passes arguments through byte for byte, as numactl does.
    let odd = OsString::from_vec(b"caf\xe9-\xff".to_vec());
    let r = Command::new(bin())
        .args(["run", "--", "printf", "%s"])
        .arg(&odd)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    assert_eq!(r.stdout, odd.as_bytes());
    // A program name that is not UTF-8 and does not exist: one line, 127.
    let r = Command::new(bin())
        .args(["run", "--"])
        .arg(not_utf8(&d, b"no-such-program", ""))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(127), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no-such-program\u{fffd}"), "{err}");
    // Output files and folders with such names.
    let (a, b) = (
        file(&d, "a.json", result_json(100.0)),
        file(&d, "b.json", result_json(130.0)),
    );
    let page = not_utf8(&d, b"page", ".html");
    let r = Command::new(bin())
        .arg("compare")
        .args([&a, &b])
        .arg("--html")
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    assert!(std::fs::read_to_string(&page)
        .unwrap()
        .contains("<title>numalab compare</title>"));
    let topo = not_utf8(&d, b"machine", ".xml");
    std::fs::copy(fixture("qemu-quartet-4n2c-ring.xml"), &topo).unwrap();
    let r = Command::new(bin())
        .args(["topology", "--json", "--topology"])
        .arg(&topo)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    let v: Value = serde_json::from_slice(&r.stdout).unwrap();
    let source = v["source"]["path"].as_str().unwrap_or_default();
    assert!(source.ends_with("machine\u{fffd}.xml"), "{}", v["source"]);
    let out = not_utf8(&d, b"report", "");
    let r = Command::new(bin())
        .arg("report")
        .arg("--topology")
        .arg(&topo)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    assert!(out.join("report.html").is_file());
    // A measured report records its command line, lossily.
    let _turn = turn();
    let live = not_utf8(&d, b"live", "");
    let r = Command::new(bin())
        .args([
            "report", "--parts", "c2c", "--size", "64M", "--budget", "2", "-o",
        ])
        .arg(&live)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(live.join("results.json")).unwrap()).unwrap();
    let line = doc["runs"][0]["command_line"].to_string();
    assert!(line.contains("live\u{fffd}"), "{line}");
    let env_line = doc["environment"]["command_line"].to_string();
    assert!(env_line.contains("live\u{fffd}"), "{env_line}");
}

#[test]
fn a_second_report_into_a_folder_in_use_names_the_first() {
    let _turn = turn();
    let d = scratch("hostile-busy");
    let dir = d.join("report");
    let mut first = Command::new(bin())
        .args(["report", "--budget", "60", "-o"])
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = first.id();
    // The first run has claimed the folder once its lock file names it.
    let start = Instant::now();
    let lock = dir.join(".numalab-report");
    while !std::fs::read_to_string(&lock).is_ok_and(|t| t.contains(&format!("pid {pid}\n"))) {
        assert!(
            first.try_wait().unwrap().is_none(),
            "the first report ended before it was seen running"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the first report never locked its folder"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let holder = format!("in use by another numalab report (pid {pid}, started ");
    let o = arg(&dir);
    let cases = vec![
        Case::new("second report", &["report", "-o", &o])
            .code(1)
            .says(&holder),
        Case::new("second report --force", &["report", "-o", &o, "--force"])
            .code(1)
            .says(&holder),
        Case::new("second report --resume", &["report", "-o", &o, "--resume"])
            .code(1)
            .says(&holder),
        Case::new(
            "second report --topology",
            &[
                "report",
                "--topology",
                &fixture("qemu-quartet-4n2c-ring.xml"),
                "-o",
                &o,
                "--force",
            ],
        )
        .code(1)
        .says(&holder),
    ];
    check_all("folder in use", cases);
    let still_running = first.try_wait().unwrap().is_none();
    // Stop the first: it keeps what it measured, in a whole report.
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
    let out = first.wait_with_output().unwrap();
    assert!(still_running, "the first report ended during the cases");
    assert_eq!(
        out.status.code(),
        Some(143),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(doc["schema"], "numalab-report");
    // The folder is free again: a plain run now says a report is there.
    let r = Command::new(bin())
        .args(["report", "-o"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(r.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&r.stderr).contains("already holds a report"));
}

#[test]
fn no_arguments_shows_the_usage_on_stderr_and_exits_2() {
    for args in [&[][..], &["bench"][..]] {
        let r = Command::new(bin()).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(2), "numalab {args:?}: {err}");
        assert!(err.contains("Usage: numalab"), "numalab {args:?}: {err}");
        assert!(r.stdout.is_empty(), "numalab {args:?}: nothing on stdout");
    }
    for flag in ["--help", "--version"] {
        let r = Command::new(bin()).arg(flag).output().unwrap();
        assert_eq!(r.status.code(), Some(0), "{flag}");
        assert!(
            String::from_utf8_lossy(&r.stdout).contains("numalab"),
            "{flag}"
        );
        assert!(r.stderr.is_empty(), "{flag}");
    }
}

#[test]
fn a_closed_or_full_stderr_and_run_without_stdout() {
    use std::os::unix::process::ExitStatusExt;
    // An error that cannot be shown must still end in its exit code, not in
    // a panic or an abort.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let s = Command::new(bin())
        .args(["topology", "--frob"])
        .stderr(full)
        .status()
        .unwrap();
    assert_eq!((s.code(), s.signal()), (Some(2), None));
    let sh = |line: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(line)
            .arg(bin())
            .status()
            .unwrap()
    };
    let s = sh("exec \"$0\" topology >&- 2>&-");
    assert_eq!((s.code(), s.signal()), (Some(1), None));
    // `run` prints nothing on stdout: it runs without one, as numactl does,
    // and ends as its command ended.
    let s = sh("exec \"$0\" run -- sh -c 'exit 7' >&-");
    assert_eq!(s.code(), Some(7));
}

/// Every option that names an output file, given a character device of
/// its own (mknod: the null device's numbers, as root), a FIFO a program
/// reads from, and a FIFO nobody reads: the device stays a device (a
/// rename once turned /dev/null into a regular file), the reader gets the
/// JSON, and the FIFO without a reader is an error, never a wait.
#[test]
fn an_output_that_is_a_device_or_a_fifo_is_written_in_place() {
    let dir = scratch("hostile-output-devices");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("a.json"), dir.join("b.json"));
    std::fs::write(&a, result_json(100.0)).unwrap();
    std::fs::write(&b, result_json(120.0)).unwrap();
    let dev = dir.join("null");
    // SAFETY: a NUL-terminated path; mknod has no memory preconditions.
    let made = unsafe {
        let c = std::ffi::CString::new(dev.as_os_str().as_bytes()).unwrap();
        libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3))
    };
    let outputs: Vec<(&str, Vec<String>)> = vec![
        (
            "run --verify-json",
            vec!["run".into(), "--verify".into(), "--verify-json".into()],
        ),
        (
            "run --counters-json",
            vec!["run".into(), "--counters".into(), "--counters-json".into()],
        ),
    ];
    let with_device = |what: &str, args: &[String], out: &Path| -> common::Ran {
        let mut v: Vec<&str> = args.iter().map(String::as_str).collect();
        v.push(out.to_str().unwrap());
        v.extend(["--", "true"]);
        let r = common::numalab(&v);
        assert_eq!(r.rc, 0, "{what} {}: {}", out.display(), r.err);
        r
    };
    use std::os::unix::fs::FileTypeExt;
    if made == 0 {
        for (what, args) in &outputs {
            with_device(what, args, &dev);
            let t = std::fs::metadata(&dev).unwrap().file_type();
            assert!(t.is_char_device(), "{what} replaced the device");
        }
        let r = common::numalab(&[
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--html",
            dev.to_str().unwrap(),
            "--force",
        ]);
        assert_eq!(r.rc, 0, "compare --html DEV: {}", r.err);
        assert!(std::fs::metadata(&dev)
            .unwrap()
            .file_type()
            .is_char_device());
    } else {
        eprintln!("mknod refused (not root): the device case ran on /dev/null only");
    }
    // The system's own /dev/null, as a user would pass it.
    with_device("run --verify-json", &outputs[0].1, Path::new("/dev/null"));
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    // A FIFO a reader drains: the JSON arrives whole.
    let fifo = dir.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    with_device("run --verify-json", &outputs[0].1, &fifo);
    let got = reader.wait_with_output().unwrap();
    let v: Value =
        serde_json::from_slice(&got.stdout).expect("the verification's JSON through the FIFO");
    assert!(v.is_object(), "{v}");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // compare --html on the FIFO without --force: refused at once (its
    // check that the file is a compare page once waited for a writer).
    let start = Instant::now();
    let r = common::numalab(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        fifo.to_str().unwrap(),
    ]);
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "compare waited on the FIFO"
    );
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(
        r.err.contains("is not a page numalab compare wrote"),
        "{}",
        r.err
    );
    // Nobody reads: an error naming why, at once.
    let start = Instant::now();
    let r = common::numalab(&[
        "run",
        "--verify",
        "--verify-json",
        fifo.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "it waited for a reader"
    );
    assert_ne!(r.rc, 0, "{}", r.err);
    assert!(r.err.contains("no program reads from"), "{}", r.err);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // An input that is a FIFO nobody writes into: refused at once.
    let start = Instant::now();
    let prof = dir.join("prof");
    let r = common::numalab(&[
        "profile",
        "--machine",
        fifo.to_str().unwrap(),
        "-o",
        prof.to_str().unwrap(),
        "--",
        "true",
    ]);
    assert!(
        start.elapsed() < Duration::from_secs(30),
        "profile --machine waited for a writer"
    );
    assert_eq!(r.rc, 2, "{}", r.err);
    assert!(
        r.err.contains("--machine") && r.err.contains("no program writes into"),
        "{}",
        r.err
    );
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // The command's own plan as its output: refused, the plan kept.
    let plan = dir.join("plan.json");
    let text = r#"{"schema": "numalab-plan/1", "entries": [{"region": "size>1M", "policy": "interleave:0"}]}"#;
    std::fs::write(&plan, text).unwrap();
    let p = plan.to_str().unwrap();
    for opt in ["--verify-json", "--counters-json"] {
        let extra = if opt == "--verify-json" {
            "--verify"
        } else {
            "--counters"
        };
        let r = common::numalab(&["run", "--plan", p, extra, opt, p, "--", "true"]);
        common::assert_one_line_error(
            &format!("{opt} = --plan"),
            r.rc,
            &r.err,
            2,
            &format!("{opt} {p} is the same file as --plan {p}"),
        );
        assert_eq!(std::fs::read_to_string(&plan).unwrap(), text);
    }
}

/// Every option that names an output file, given a symbolic link to a
/// user's file, a read-only file, a FIFO nobody reads, a private character
/// device, a block device and the command's own input: refused (or written
/// in place, for the character device) at once, and nothing replaced,
/// followed or overwritten; the options that name an output folder
/// (`report -o`, `profile -o`) refuse every such file.
#[test]
fn every_output_option_keeps_links_read_only_files_fifos_devices_and_inputs() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    common::preload_library();
    let d = scratch("hostile-output-walk");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    let (a, b) = (
        file(&d, "a.json", result_json(100.0)),
        file(&d, "b.json", result_json(120.0)),
    );
    let users = file(&d, "users.txt", "the user's own file\n");
    let link = d.join("link.json");
    std::os::unix::fs::symlink(&users, &link).unwrap();
    let ro = file(&d, "read-only.json", "kept\n");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    let fifo = d.join("fifo");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let dev = d.join("null");
    // SAFETY: a NUL-terminated path; mknod has no memory preconditions.
    let made_dev = unsafe {
        let c = std::ffi::CString::new(dev.as_os_str().as_bytes()).unwrap();
        libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3))
    } == 0;
    let plan = file(
        &d,
        "plan.json",
        r#"{"schema": "numalab-plan/1", "entries": [{"region": "size>1M", "policy": "interleave:0"}]}"#,
    );
    // (option, the command before the output, after it, its own input)
    let (a_s, b_s, p_s) = (arg(&a), arg(&b), arg(&plan));
    let options: Vec<(&str, Vec<&str>, Vec<&str>, &Path)> = vec![
        (
            "run --verify-json",
            vec!["run", "--plan", &p_s, "--verify", "--verify-json"],
            vec!["--", "true"],
            &plan,
        ),
        (
            "run --counters-json",
            vec!["run", "--plan", &p_s, "--counters", "--counters-json"],
            vec!["--", "true"],
            &plan,
        ),
        (
            "compare --html",
            vec!["compare", &a_s, &b_s, "--html"],
            vec!["--force"],
            &a,
        ),
    ];
    let snapshot = || {
        (
            std::fs::read(&users).unwrap(),
            std::fs::read(&ro).unwrap(),
            std::fs::read(&plan).unwrap(),
            std::fs::read(&a).unwrap(),
        )
    };
    let before = snapshot();
    let mut cases = 0;
    for (what, pre, post, input) in &options {
        let mut targets: Vec<(&str, &Path, &str)> = vec![
            ("a link to a user's file", &link, "is a symbolic link to"),
            ("a read-only file", &ro, "it is read-only"),
            ("a FIFO nobody reads", &fifo, "no program reads from"),
            ("its own input", input, "is the same file as"),
        ];
        if made_dev {
            targets.push(("a private character device", &dev, ""));
        }
        for (kind, target, says) in targets {
            cases += 1;
            let t = arg(target);
            let mut v: Vec<&str> = pre.clone();
            v.push(&t);
            v.extend(post.iter().copied());
            let start = Instant::now();
            let r = common::numalab(&v);
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{what} {kind}: it waited"
            );
            if says.is_empty() {
                assert_eq!(r.rc, 0, "{what} {kind}: {}", r.err);
                assert!(std::fs::metadata(&dev)
                    .unwrap()
                    .file_type()
                    .is_char_device());
            } else {
                assert_ne!(r.rc, 0, "{what} {kind}: accepted");
                assert!(r.err.contains(says), "{what} {kind}: {}", r.err);
            }
            assert_eq!(snapshot(), before, "{what} {kind}: a file changed");
            assert!(std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        }
    }
    // A block device is a disk: refused, never written in place.
    let blk = d.join("disk");
    // SAFETY: a NUL-terminated path; mknod has no memory preconditions.
    let made_blk = unsafe {
        let c = std::ffi::CString::new(blk.as_os_str().as_bytes()).unwrap();
        libc::mknod(c.as_ptr(), libc::S_IFBLK | 0o600, libc::makedev(7, 250))
    } == 0;
    // A FIFO the command reads its plan from is its input too.
    let fifo_s = arg(&fifo);
    let mut last: Vec<(&str, Vec<&str>, &str)> = vec![(
        "run --plan FIFO --verify-json FIFO",
        vec![
            "run",
            "--plan",
            &fifo_s,
            "--verify",
            "--verify-json",
            &fifo_s,
            "--",
            "true",
        ],
        "is the same file as --plan",
    )];
    let blk_s = arg(&blk);
    if made_blk {
        for (what, pre, post, _) in &options {
            let mut v: Vec<&str> = pre.clone();
            v.push(&blk_s);
            v.extend(post.iter().copied());
            last.push((what, v, "it is a block device"));
        }
    }
    for (what, v, says) in last {
        cases += 1;
        let start = Instant::now();
        let r = common::numalab(&v);
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: it waited"
        );
        assert_eq!(r.rc, 2, "{what}: {}", r.err);
        assert!(r.err.contains(says), "{what}: {}", r.err);
        assert_eq!(snapshot(), before, "{what}: a file changed");
        assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
        if made_blk {
            assert!(std::fs::metadata(&blk)
                .unwrap()
                .file_type()
                .is_block_device());
        }
    }
    // The options that name an output folder: a file of any kind there is
    // refused before anything runs, and never replaced by a folder.
    let folders: Vec<(&str, Vec<&str>, Vec<&str>, &str)> = vec![
        (
            "report -o",
            vec!["report", "--quick", "--parts", "c2c", "-o"],
            vec![],
            "not a directory",
        ),
        (
            "profile -o",
            vec!["profile", "-o"],
            vec!["--", "true"],
            "is a file; give a folder",
        ),
    ];
    let (link_s, ro_s, dev_s) = (arg(&link), arg(&ro), arg(&dev));
    let mut kinds = vec![
        ("a link to a user's file", link_s.as_str()),
        ("a read-only file", ro_s.as_str()),
        ("a FIFO nobody reads", fifo_s.as_str()),
    ];
    if made_dev {
        kinds.push(("a private character device", dev_s.as_str()));
    }
    if made_blk {
        kinds.push(("a block device", blk_s.as_str()));
    }
    for (what, pre, post, says) in &folders {
        for (kind, target) in &kinds {
            cases += 1;
            let mut v: Vec<&str> = pre.clone();
            v.push(target);
            v.extend(post.iter().copied());
            let start = Instant::now();
            let r = common::numalab(&v);
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{what} {kind}: it waited"
            );
            assert_ne!(r.rc, 0, "{what} {kind}: accepted");
            assert!(r.err.contains(says), "{what} {kind}: {}", r.err);
            assert_eq!(snapshot(), before, "{what} {kind}: a file changed");
            assert!(std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink());
            assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
            if made_dev {
                assert!(std::fs::metadata(&dev)
                    .unwrap()
                    .file_type()
                    .is_char_device());
            }
        }
    }
    assert!(cases >= 21, "{cases} cases");
    eprintln!("output walk: {cases} cases");
}

/// A user who may not create files in /dev still writes a result to
/// /dev/null: the folder of a device is not probed (it is written in
/// place, never replaced).
#[test]
fn a_user_writes_results_to_dev_null() {
    use std::os::unix::fs::FileTypeExt;
    // setpriv is util-linux's, essential on Debian; nobody is uid 65534.
    let bin = env!("CARGO_BIN_EXE_numalab");
    let out = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", bin])
        .args([
            "run",
            "--verify",
            "--verify-json",
            "/dev/null",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("cannot create"), "{err}");
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}

/// `profile` never writes over its own inputs: a plan or a machine file
/// kept in the folder it writes (`-o`) under a name it writes there is
/// refused before the program runs, and left as it was. The plan a
/// profile wrote, given back with the same `-o`, is fine: that run writes
/// before/, after/ and the comparison, not plan.json.
#[test]
fn profile_refuses_inputs_it_would_write_over() {
    let d = scratch("hostile-profile-inputs");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("after")).unwrap();
    let plan_text = r#"{"schema": "numalab-plan/1", "entries": [{"region": "heap", "policy": "interleave:0"}]}"#;
    let plan = file(&d, "plan.json", plan_text);
    let inner = file(&d.join("after"), "profile.json", plan_text);
    let (p_s, i_s, d_s) = (arg(&plan), arg(&inner), arg(&d));
    for (what, args, says) in [
        (
            "--plan DIR/after/profile.json -o DIR",
            vec!["profile", "--plan", &i_s, "-o", &d_s, "--", "true"],
            "--plan",
        ),
        (
            "--machine DIR/plan.json -o DIR",
            vec!["profile", "--machine", &p_s, "-o", &d_s, "--", "true"],
            "--machine",
        ),
    ] {
        let r = common::numalab(&args);
        assert_eq!(r.rc, 2, "{what}: {}", r.err);
        assert!(
            r.err.starts_with(&format!("numalab: {says} "))
                && r.err.contains("a file this command writes in -o"),
            "{what}: {}",
            r.err
        );
        assert_eq!(std::fs::read_to_string(&plan).unwrap(), plan_text, "{what}");
        assert_eq!(
            std::fs::read_to_string(&inner).unwrap(),
            plan_text,
            "{what}"
        );
    }
    let r = common::numalab(&["profile", "--plan", &p_s, "-o", &d_s, "--", "true"]);
    assert!(!r.err.contains("a file this command writes"), "{}", r.err);
    assert_eq!(std::fs::read_to_string(&plan).unwrap(), plan_text);
}

/// /dev/stdout and /dev/fd/N name numalab's own descriptors: written
/// through them where they stand (a file standard output is redirected to
/// keeps what it held), never refused as links nor replaced.
#[test]
fn results_go_to_dev_stdout_and_dev_fd_where_they_stand() {
    use std::io::Write;
    use std::os::unix::fs::FileTypeExt;
    let d = scratch("hostile-dev-stdout");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    for target in ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"] {
        let out = d.join("out.txt");
        let mut f = std::fs::File::create(&out).unwrap();
        f.write_all(b"before\n").unwrap();
        let r = Command::new(env!("CARGO_BIN_EXE_numalab"))
            .args(["run", "--verify", "--verify-json", target, "--", "true"])
            .stdout(Stdio::from(f))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&r.stderr);
        assert_eq!(r.status.code(), Some(0), "{target}: {err}");
        let text = std::fs::read_to_string(&out).unwrap();
        let json = text
            .strip_prefix("before\n")
            .unwrap_or_else(|| panic!("{target}: the file lost its start: {text:?}"));
        let v: Value =
            serde_json::from_str(json).unwrap_or_else(|e| panic!("{target}: {e}: {json:?}"));
        assert!(v["pid"].as_i64().is_some_and(|p| p > 0), "{target}: {v}");
        assert!(
            v["program"].as_str().is_some_and(|c| c.contains("true")),
            "{target}: {v}"
        );
    }
    assert!(std::fs::symlink_metadata("/dev/stdout")
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
}
