//! Language runtimes nobody here wrote, from Debian's packages, under the
//! preload library (`profile`, `run --plan`, `run --mem interleave:0@4`):
//! Go (with cgo, and static), a JVM, Node, Python with numpy, sqlite3 and
//! cargo. Each prints exactly what a plain run prints, with the same exit
//! status, and no run hangs (issue 36). Where a runtime changes what the
//! library can do, the profile says so at its top.

use crate::common;
use crate::real_programs::{bounded, have, modes, plan_not_written};

use common::{preload_library, scratch, written_profile, Ran};
use serde_json::Value;
use std::path::Path;
use std::process::Command;

/// Runs `cmd` in `dir` plainly, then under each of numalab's modes, and
/// asserts the same stdout and exit status every time (stdout non-empty:
/// every program here prints its result). Returns the plain run and the
/// profile the `profile` mode wrote.
fn same_in_every_mode(cmd: &[&str], dir: &Path, env: &[(&str, &str)], limit: u64) -> (Ran, Value) {
    let plain = bounded(&[], cmd, dir, env, limit);
    assert!(
        !plain.out.is_empty(),
        "plain {cmd:?}: no output (rc {}): {}",
        plain.rc,
        common::tail(&plain.err, 20)
    );
    let mut profile = None;
    for (mode, args) in modes(dir) {
        if mode == "profile" {
            let _ = std::fs::remove_dir_all(dir.join("prof"));
        }
        if plan_not_written(mode, &args) {
            continue;
        }
        let r = bounded(&args, cmd, dir, env, limit);
        assert_eq!(
            (r.rc, &r.out),
            (plain.rc, &plain.out),
            "{mode} -- {cmd:?}: exit status and stdout differ from a plain run's; stderr:\n{}",
            common::tail(&r.err, 30)
        );
        if mode == "profile" {
            profile = Some(written_profile(&r, &dir.join("prof")).1);
        }
    }
    (plain, profile.expect("a profile mode"))
}

/// The go tool: Debian's golang-go (scripts/install-deps.sh --test), or
/// one already on PATH.
fn go() -> &'static str {
    let ok = Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "go is missing: scripts/install-deps.sh --test installs golang-go"
    );
    "go"
}

/// Builds the Go program `src` in `dir` as `name`, with cgo or without
/// (then statically linked). The build cache stays under target/ between
/// runs; nothing is fetched (no module has dependencies).
fn go_build(dir: &Path, name: &str, src: &str, cgo: bool) -> std::path::PathBuf {
    let pkg = dir.join(format!("{name}-src"));
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("main.go"), src).unwrap();
    std::fs::write(pkg.join("go.mod"), format!("module {name}\n\ngo 1.19\n")).unwrap();
    let exe = dir.join(name);
    let cache = common::repo_root().join("target/go-build-cache");
    let o = Command::new(go())
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&exe)
        .arg(".")
        .current_dir(&pkg)
        .env("CGO_ENABLED", if cgo { "1" } else { "0" })
        .env("GOCACHE", &cache)
        .env("GOFLAGS", "-mod=mod")
        .env("GOPROXY", "off")
        .env("GOTOOLCHAIN", "local")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "go build {name}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    exe
}

/// A Go program whose heap buffers go to the kernel through Go's own
/// system calls (no libc): it writes 64 MiB from the heap to a file and
/// reads it back into the heap 6 times. Such a `read` into a page armed
/// for sampling failed with EFAULT ("bad address", exit 3).
const GO_FILES: &str = include_str!("../programs/gofiles.go");

#[test]
fn go_with_cgo_reads_and_writes_its_heap_in_every_mode() {
    preload_library();
    let dir = scratch("real-go-cgo");
    let src = GO_FILES
        .replace(
            "import (",
            "/*\nstatic int twice(int x) { return 2 * x; }\n*/\nimport \"C\"\n\nimport (",
        )
        .replace("\"CGO\"", "\"twice\", C.twice(21)");
    let exe = go_build(&dir, "gofiles", &src, true);
    let (plain, v) = same_in_every_mode(&[exe.to_str().unwrap()], &dir, &[], 180);
    assert_eq!(plain.rc, 0);
    assert_eq!(
        plain.out,
        format!("sum {} twice 42\n", 6 * expected_go_sum())
    );
    // No page armed (Go's system calls bypass libc), and it says so first.
    assert_eq!(v["pages_armed"], 0, "{}", v["warnings"]);
    let w = v["warnings"][0].as_str().unwrap();
    assert!(
        w.starts_with("a Go program: its runtime makes system calls without libc"),
        "{w}"
    );
    let text = std::fs::read_to_string(dir.join("prof/profile.txt")).unwrap();
    let second = text.lines().nth(1).unwrap();
    assert!(second.starts_with("warning: a Go program"), "{text}");
    // No rate of pages: none was armed.
    assert_eq!(v["go_runtime"], true);
    let sampling = text.lines().find(|l| l.contains("sampling: ")).unwrap();
    assert!(
        sampling.contains("sampling: no page armed (a Go program: its runtime's own system calls would fail on one); word counts over ")
            && !sampling.contains("pages a second"),
        "{sampling}"
    );
    // The Go heap is a region, named from the map saved while it ran
    // (Go never calls libc's exit), and word counts sampled it.
    let regions = v["regions"].as_array().unwrap();
    let heap = regions
        .iter()
        .find(|r| {
            r["site"]
                .as_str()
                .is_some_and(|s| s.starts_with("x_cgo_mmap"))
        })
        .unwrap_or_else(|| panic!("no region mapped by Go's runtime: {regions:?}"));
    assert!(heap["bytes"].as_u64().unwrap() >= 64 << 20, "{heap}");
    assert!(
        v["warnings"]
            .to_string()
            .contains("the program exited without libc's exit (Go's runtime never calls it)"),
        "{}",
        v["warnings"]
    );
    // A plan on the Go heap's site is checked from the process's mappings
    // at exit (no libc exit, so the library never counts its regions'
    // pages): placed, with the heap's pages, not "not-touched".
    let plan = dir.join("go-plan.json");
    std::fs::write(
        &plan,
        r#"{"schema": "numalab-plan/1", "entries": [{"region": "site:x_cgo_mmap", "policy": "interleave:0"}]}"#,
    )
    .unwrap();
    let json = dir.join("go-verify.json");
    let args: Vec<String> = [
        "run",
        "--plan",
        plan.to_str().unwrap(),
        "--verify",
        "--verify-json",
        json.to_str().unwrap(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let r = bounded(&args, &[exe.to_str().unwrap()], &dir, &[], 180);
    assert_eq!((r.rc, &r.out), (0, &plain.out), "{}", r.err);
    let check = &common::parse_json(&std::fs::read_to_string(&json).unwrap(), "verify")["plan"];
    let e = &check["entries"][0];
    assert_eq!(e["verdict"], "placed", "{check}");
    let pages: u64 = e["pages_by_node"]
        .as_object()
        .unwrap()
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    // The 64 MiB buffer and what ReadFile read into: 16384 pages at least.
    assert!(pages >= 16384, "{check}");
    assert!(
        check["regions_read_at_exit"].as_u64().unwrap() >= 1,
        "{check}"
    );
}

/// The byte sum of GO_FILES's 64 MiB (one pass).
fn expected_go_sum() -> u64 {
    (0..64u64 << 20).map(|i| (i * 7) & 0xff).sum()
}

#[test]
fn go_static_runs_unchanged_and_numalab_says_what_it_could_not_do() {
    preload_library();
    let dir = scratch("real-go-static");
    let src = GO_FILES.replace(", \"CGO\"", "");
    let exe = go_build(&dir, "gostatic", &src, false);
    let e = exe.to_str().unwrap();
    let plain = bounded(&[], &[e], &dir, &[], 120);
    assert_eq!(plain.out, format!("sum {}\n", 6 * expected_go_sum()));
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        bounded(&args, &[e], &dir, &[], 120)
    };
    // profile: the program runs; the profile's first warning says why
    // it has no data.
    let prof = dir.join("prof");
    let r = run(&["profile", "-o", prof.to_str().unwrap()]);
    assert_eq!((r.rc, &r.out), (0, &plain.out), "{}", r.err);
    let text = std::fs::read_to_string(prof.join("profile.txt")).unwrap();
    let second = text.lines().nth(1).unwrap();
    assert!(
        second.starts_with("warning: the command left no records")
            && second.contains("statically linked and setuid programs ignore LD_PRELOAD"),
        "{text}"
    );
    // Stripes: the kernel's page interleave, said as such, not claimed
    // as stripes.
    let r = run(&["run", "--mem", "interleave:0@4"]);
    assert_eq!((r.rc, &r.out), (0, &plain.out), "{}", r.err);
    assert!(
        r.err.contains(&format!(
            "numalab: warning: {e} is statically linked, so the preload library cannot lay stripes of pages in it: the kernel interleaves its memory page by page over nodes 0 instead"
        )),
        "{}",
        r.err
    );
    assert!(!r.err.contains("laid by the preload library"), "{}", r.err);
    // A plan would place nothing: refused before the program runs.
    let plan = dir.join("plan.json");
    std::fs::write(
        &plan,
        r#"{"schema": "numalab-plan/1", "entries": [{"region": "size>1M", "policy": "interleave:0"}]}"#,
    )
    .unwrap();
    let r = run(&["run", "--plan", plan.to_str().unwrap()]);
    common::assert_one_line_error(
        "run --plan of a static program",
        r.rc,
        &r.err,
        2,
        "is statically linked, so the preload library that applies a plan cannot load into it",
    );
    assert_eq!(r.out, "", "the program did not run");
}

#[test]
fn a_jvm_runs_a_program_the_same_in_every_mode() {
    preload_library();
    have("/usr/bin/java", "default-jre-headless");
    let dir = scratch("real-jvm");
    std::fs::write(
        dir.join("Sum.java"),
        "public class Sum { public static void main(String[] a) { \
         long[] v = new long[8_000_000]; for (int i = 0; i < v.length; i++) v[i] = i; \
         long s = 0; for (int r = 0; r < 3; r++) for (long x : v) s += x; \
         java.util.HashMap<String, Integer> m = new java.util.HashMap<>(); \
         for (int i = 0; i < 200_000; i++) m.put(\"k\" + i, i); \
         System.out.println(\"sum \" + s + \" map \" + m.size()); } }\n",
    )
    .unwrap();
    // The source launcher compiles in process: javac's classes, then the
    // program, in one JVM.
    let (plain, v) = same_in_every_mode(&["java", "-Xmx512m", "Sum.java"], &dir, &[], 180);
    assert_eq!(plain.out, "sum 95999988000000 map 200000\n");
    // The Java heap is a mapping the library tracked and sampled.
    assert!(
        v["regions"].as_array().is_some_and(|r| r
            .iter()
            .any(|r| r["kind"] == "mmap" && r["bytes"].as_u64().unwrap_or(0) >= 64 << 20)),
        "{}",
        v["regions"]
    );
}

#[test]
fn node_runs_a_script_the_same_in_every_mode() {
    preload_library();
    have("/usr/bin/node", "nodejs");
    let dir = scratch("real-node");
    let script = "const a = new Float64Array(4e6); for (let i = 0; i < a.length; i++) a[i] = i; \
        let s = 0; for (let r = 0; r < 3; r++) for (let i = 0; i < a.length; i++) s += a[i]; \
        const m = new Map(); for (let i = 0; i < 200000; i++) m.set('k' + i, i); \
        console.log(s, m.size, JSON.stringify([...m.keys()].slice(0, 3)));";
    let (plain, v) = same_in_every_mode(&["node", "-e", script], &dir, &[], 180);
    assert_eq!(plain.out, "23999994000000 200000 [\"k0\",\"k1\",\"k2\"]\n");
    assert!(
        v["regions"].as_array().is_some_and(|r| !r.is_empty()),
        "{v}"
    );
}

#[test]
fn numpy_with_openblas_computes_the_same_in_every_mode() {
    preload_library();
    have("/usr/lib/python3/dist-packages/numpy", "python3-numpy");
    let dir = scratch("real-numpy");
    let script = "import numpy as np; a = np.arange(4_000_000, dtype=np.float64); \
        b = a.reshape(2000, 2000); print(float((a * a).sum()), float((b @ b[:, :10]).sum()))";
    // Debian's python3, whose dist-packages hold Debian's numpy.
    let (plain, v) = same_in_every_mode(&["/usr/bin/python3", "-c", script], &dir, &[], 180);
    assert_eq!(plain.out, "2.1333325333334e+19 1.5994698667991e+20\n");
    // numpy's arrays are allocations of 32 MB: regions tracked, their
    // pages located (sampling them is up to the run's length and load).
    let regions = v["regions"].as_array().unwrap();
    assert!(
        regions
            .iter()
            .any(|r| r["bytes"].as_u64().unwrap_or(0) >= 32_000_000
                && r["pages_by_node"].as_object().is_some_and(|p| p
                    .values()
                    .map(|n| n.as_u64().unwrap_or(0))
                    .sum::<u64>()
                    >= 7800)),
        "{regions:?}"
    );
}

#[test]
fn python_with_300_threads_blocked_in_read_still_has_its_array_sampled() {
    // A thread-per-connection server's shape: each thread blocked in an
    // interposed call holds one of the library's busy slots while it
    // blocks. With 256 slots (the library before) the array got no sample
    // in such a run, and no page anywhere was armed until the threads woke.
    preload_library();
    have("/usr/lib/python3/dist-packages/numpy", "python3-numpy");
    let dir = scratch("real-numpy-blocked");
    let script = "import os, threading, time\n\
        import numpy as np\n\
        r, w = os.pipe()\n\
        ts = [threading.Thread(target=os.read, args=(r, 1)) for _ in range(300)]\n\
        for t in ts: t.start()\n\
        time.sleep(0.5)\n\
        a = np.arange(8 << 20, dtype=np.float64)\n\
        end, s = time.time() + 2, 0.0\n\
        while time.time() < end: s += a.sum()\n\
        os.write(w, b'x' * 300)\n\
        for t in ts: t.join()\n\
        print('summed', s > 0)\n";
    let out = dir.join("prof");
    let _ = std::fs::remove_dir_all(&out);
    let args: Vec<String> = ["profile", "--rate", "2000", "-o"]
        .iter()
        .map(|s| s.to_string())
        .chain([out.to_string_lossy().into_owned()])
        .collect();
    let r = bounded(&args, &["/usr/bin/python3", "-c", script], &dir, &[], 120);
    assert_eq!((r.rc, r.out.as_str()), (0, "summed True\n"), "{}", r.err);
    let (_, v) = written_profile(&r, &out);
    let array = v["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["bytes"].as_u64().unwrap_or(0) >= 64 << 20)
        .unwrap_or_else(|| panic!("no region of numpy's 64 MiB array: {}", v["regions"]));
    let samples = array["samples"].as_u64().unwrap_or(0);
    assert!(samples >= 20, "{samples} samples in the array: {array}");
}

#[test]
fn sqlite3_builds_and_queries_a_table_the_same_in_every_mode() {
    preload_library();
    have("/usr/bin/sqlite3", "sqlite3");
    let dir = scratch("real-sqlite");
    let sql = "pragma cache_size = -65536;\n\
        create table t(k integer primary key, v text);\n\
        with recursive c(x) as (select 1 union all select x + 1 from c where x < 200000) \
        insert into t select x, printf('%08x', (x * 2654435761) % 4294967296) from c;\n\
        select count(*), sum(k), sum(length(v)) from t;\n\
        create index iv on t(v);\n\
        select count(*) from t where v like 'a%';\n\
        select v from t order by v limit 2;\n";
    std::fs::write(dir.join("q.sql"), sql).unwrap();
    // A fresh database file each run (the script creates its table).
    let cmd = ["sh", "-c", "rm -f db.sqlite && sqlite3 db.sqlite < q.sql"];
    let (plain, _) = same_in_every_mode(&cmd, &dir, &[], 180);
    let lines: Vec<&str> = plain.out.lines().collect();
    assert_eq!(lines[0], "200000|20000100000|1600000", "{}", plain.out);
    assert_eq!(lines.len(), 4, "{}", plain.out);
}

#[test]
fn cargo_builds_a_crate_the_same_in_every_mode() {
    preload_library();
    let dir = scratch("real-cargo");
    std::fs::create_dir_all(dir.join("hello/src")).unwrap();
    std::fs::write(
        dir.join("hello/Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("hello/src/main.rs"),
        "fn main() { let v: Vec<u64> = (1..=1000).collect(); println!(\"{}\", v.iter().sum::<u64>()); }\n",
    )
    .unwrap();
    // cargo runs rustc (each a process of its own under the library);
    // a fresh target folder each run, so that each compiles.
    let cmd = [
        "sh",
        "-c",
        "rm -rf t && cargo run --quiet --offline --manifest-path hello/Cargo.toml --target-dir t",
    ];
    let (plain, _) = same_in_every_mode(&cmd, &dir, &[], 240);
    assert_eq!(plain.out, "500500\n");
}
