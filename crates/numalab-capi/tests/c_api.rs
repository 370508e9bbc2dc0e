//! libnumalab as programs outside the workspace use it: installed by
//! scripts/install-lib.sh into a temporary prefix outside the repository,
//! C programs compiled with `cc $(pkg-config --cflags --libs numalab)`
//! (and once statically), Fortran ones with `gfortran $(pkg-config
//! --cflags --libs numalab-fortran)`, run on this machine. The multi-node
//! truths (bind:2, interleave:0-3, weighted 3:1, scatter) are checked in
//! the Quartet guest (crates/numalab-cli/tests/guests/guest_experiments/capi.rs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn target_debug() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => PathBuf::from(t).join("debug"),
        None => repo().join("target/debug"),
    }
}

struct Installed {
    /// Scratch directory outside the workspace: the prefix and the programs.
    dir: PathBuf,
    prefix: PathBuf,
}

/// The library installed once per test run, with the dev build cargo made
/// (`cargo test` builds the cdylib and staticlib with the rlib).
fn installed() -> &'static Installed {
    static I: OnceLock<Installed> = OnceLock::new();
    I.get_or_init(|| {
        let lib = target_debug().join("libnumalab_capi.so");
        assert!(
            lib.is_file(),
            "{} is missing: cargo build -p numalab-capi (scripts/test.sh does)",
            lib.display()
        );
        remove_stale_scratch();
        let dir = std::env::temp_dir().join(format!("numalab-capi-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("prefix");
        let out = Command::new("bash")
            .arg(repo().join("scripts/install-lib.sh"))
            .args(["--profile", "dev", "--no-build", "--prefix"])
            .arg(&prefix)
            .output()
            .expect("run scripts/install-lib.sh");
        assert!(
            out.status.success(),
            "install-lib.sh failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for f in [
            "lib/libnumalab.so",
            "lib/libnumalab.so.0",
            "lib/libnumalab.a",
            "lib/pkgconfig/numalab.pc",
            "include/numalab.h",
        ] {
            assert!(prefix.join(f).exists(), "{f} not installed");
        }
        Installed { dir, prefix }
    })
}

/// Scratch directories of earlier runs whose process is gone.
fn remove_stale_scratch() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name.strip_prefix("numalab-capi-test-") {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

/// Compiles `src` (from the repository) as a user would, in the scratch
/// directory, with `compiler` and the pkg-config `package`.
fn compile(src: &str, name: &str, compiler: &str, package: &str, extra: &str) -> PathBuf {
    let inst = installed();
    let copy = inst.dir.join(Path::new(src).file_name().unwrap());
    std::fs::copy(repo().join(src), &copy).unwrap();
    let out = inst.dir.join(name);
    let script = format!(
        "cd '{}' && {compiler} -O2 {extra} '{}' $(pkg-config --cflags --libs {package}) -Wl,-rpath,'{}' -o '{}'",
        inst.dir.display(),
        copy.display(),
        inst.prefix.join("lib").display(),
        out.display()
    );
    let r = Command::new("sh")
        .args(["-c", &script])
        .env("PKG_CONFIG_PATH", inst.prefix.join("lib/pkgconfig"))
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    out
}

fn c_program(src: &str, name: &str) -> PathBuf {
    compile(src, name, "cc", "numalab", "-Wall -Wextra -Werror -pthread")
}

fn check_program() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        c_program(
            "crates/numalab-capi/tests/c/numalab_check.c",
            "numalab_check",
        )
    })
    .clone()
}

struct Ran {
    rc: i32,
    out: String,
    err: String,
}

fn run(bin: &Path, args: &[&str]) -> Ran {
    let r = Command::new(bin).args(args).output().unwrap();
    Ran {
        rc: r.status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&r.stdout).into_owned(),
        err: String::from_utf8_lossy(&r.stderr).into_owned(),
    }
}

/// `key=value` fields of one output line (a value runs to the next space,
/// `message=` to the end of the line).
fn fields(line: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let (head, message) = match line.split_once(" message=") {
        Some((h, m)) => (h, Some(m)),
        None => (line, None),
    };
    for f in head.split_whitespace() {
        if let Some((k, v)) = f.split_once('=') {
            out.insert(k.to_string(), v.to_string());
        }
    }
    if let Some(m) = message {
        out.insert("message".into(), m.to_string());
    }
    out
}

/// This process's allowed CPUs or memory nodes, from /proc/self/status.
fn allowed(kind: &str) -> Vec<u32> {
    let key = match kind {
        "cpus" => "Cpus_allowed_list:",
        _ => "Mems_allowed_list:",
    };
    let list = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_string()))
        .unwrap();
    let mut ids = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => ids.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => ids.push(part.parse().unwrap()),
        }
    }
    ids
}

#[test]
fn bad_input_from_c_gets_an_error_status_never_a_crash() {
    let r = run(&check_program(), &["errors"]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert!(!r.out.contains("FAIL"), "{}", r.out);
    assert!(r.out.ends_with("failures=0\n"), "{}", r.out);
    let oks = r.out.lines().filter(|l| l.starts_with("ok ")).count();
    // Every EXPECT of the program, each its own line.
    let cases = std::fs::read_to_string(repo().join("crates/numalab-capi/tests/c/numalab_check.c"))
        .unwrap()
        .matches("EXPECT(\"")
        .count();
    assert_eq!((oks, cases), (36, 36), "{}", r.out);
    for (case, status, text) in [
        (
            "null out",
            "NUMALAB_E_NULL",
            "numalab_machine_load: argument 'out' is NULL",
        ),
        (
            "freed set",
            "NUMALAB_E_HANDLE",
            "is not a live set handle: already freed",
        ),
        (
            "freed set bound to",
            "NUMALAB_E_HANDLE",
            "numalab_bind_thread: argument 'set'",
        ),
        (
            "machine given as a set",
            "NUMALAB_E_HANDLE",
            "is a machine handle, not a set",
        ),
        (
            "buffer freed twice",
            "NUMALAB_E_HANDLE",
            "or it was already freed",
        ),
        (
            "count times size overflows",
            "NUMALAB_E_OVERFLOW",
            "overflow the size of any allocation",
        ),
        (
            "size beyond the address space",
            "NUMALAB_E_OVERFLOW",
            "larger than any address space",
        ),
        (
            "range wraps around",
            "NUMALAB_E_OVERFLOW",
            "runs past the end of the address space",
        ),
        (
            "more than the machine",
            "NUMALAB_E_CAPACITY",
            "cannot fit in this machine",
        ),
        (
            "bad policy",
            "NUMALAB_E_INVALID",
            "policy 'interleave' needs nodes",
        ),
        (
            "bad expression",
            "NUMALAB_E_INVALID",
            "node 99 does not exist",
        ),
        ("buffer too small", "NUMALAB_E_TRUNCATED", "the text needs"),
    ] {
        let line = r
            .out
            .lines()
            .find(|l| l.starts_with(&format!("ok {case}: ")))
            .unwrap_or_else(|| panic!("case '{case}' missing:\n{}", r.out));
        assert!(line.contains(&format!(": {status}: ")), "{line}");
        assert!(line.contains(text), "{line}");
    }
}

#[test]
fn every_policy_allocates_and_verifies_from_c() {
    let node = allowed("mems")[0];
    let last_cpu = *allowed("cpus").last().unwrap();
    let policies = [
        "first-touch".to_string(),
        "local".into(),
        format!("from:cpu:{last_cpu}/first-touch"),
        format!("from:cpu:{last_cpu}/local"),
        format!("bind:{node}"),
        format!("preferred:{node}"),
        format!("interleave:{node}"),
        format!("interleave:{node}@4"),
        format!("weighted:{node}=3"),
        format!("weighted:{node}=2@2"),
        "team:all".into(),
        format!("range:bind:{node}"),
        format!("range:interleave:{node}@2"),
        format!("range:weighted:{node}=3"),
    ];
    let mut args = vec!["policies", "64"];
    args.extend(policies.iter().map(String::as_str));
    let r = run(&check_program(), &args);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    let lines: Vec<&str> = r.out.lines().collect();
    assert_eq!(lines.len(), policies.len(), "{}", r.out);
    for (line, policy) in lines.iter().zip(&policies) {
        let f = fields(line);
        assert_eq!(f["policy"], *policy, "{line}");
        assert_eq!(f["status"], "NUMALAB_OK", "{line}");
        assert_eq!(f["verified"], "1", "{line}");
        assert_eq!(f["untouched"], "0", "{line}");
        // A malloc'ed range of 64 pages starts inside a page: 65 pages.
        let total: u64 = f["total"].parse().unwrap();
        let want = if policy.starts_with("range:") {
            64..=65
        } else {
            64..=64
        };
        assert!(want.contains(&total), "{line}");
        if policy.contains("bind:")
            || policy.contains("weighted:")
            || policy.contains("interleave:")
        {
            assert_eq!(f["nodes"], format!("{node}:{total}"), "{line}");
        }
    }
    // remote needs a second memory node: refused by name where there is
    // none (the Quartet guest checks where it lands).
    if allowed("mems").len() == 1 {
        for p in ["remote:near", "remote:far"] {
            let r = run(
                &check_program(),
                &["policies", "4", &format!("from:cpu:{last_cpu}/{p}")],
            );
            assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
            assert!(
                r.out.starts_with(&format!(
                    "policy=from:cpu:{last_cpu}/{p} status=NUMALAB_E_INVALID error=numalab_alloc: remote placement needs a second memory node; this machine has only node {node}"
                )),
                "{}",
                r.out
            );
        }
    }
}

#[test]
fn threads_are_bound_by_id_and_as_a_whole_process_from_c() {
    let cpus = allowed("cpus");
    let (a, b) = (*cpus.last().unwrap(), cpus[0]);
    let r = run(
        &check_program(),
        &["bind", &format!("cpu:{a}"), &format!("cpu:{b}")],
    );
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert_eq!(
        r.out,
        format!(
            "step=thread_id thread=second running={a} allowed={a} verified=1\n\
             step=process thread=main running={b} allowed={b} verified=1\n\
             step=process thread=second running={b} allowed={b} verified=1\n"
        )
    );
}

#[test]
fn team_threads_run_on_the_cpus_a_scatter_policy_gives() {
    let cpus = allowed("cpus");
    let n = cpus.len().min(8);
    let r = run(
        &check_program(),
        &["threads", "all", "scatter", &n.to_string()],
    );
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    let mut seen = Vec::new();
    for line in r.out.lines() {
        let f = fields(line);
        assert_eq!(f["verified"], "1", "{line}");
        assert_eq!(f["running"], f["cpu"], "{line}");
        assert_eq!(f["allowed"], f["cpu"], "{line}");
        seen.push(f["cpu"].parse::<u32>().unwrap());
    }
    seen.sort_unstable();
    let mut want = cpus[..n].to_vec();
    want.sort_unstable();
    assert_eq!(seen.len(), n, "{}", r.out);
    // One node here: scatter is every CPU once.
    assert_eq!(
        seen.iter().collect::<std::collections::BTreeSet<_>>().len(),
        n
    );
}

#[test]
fn named_sets_nest_from_c_on_the_quartet_topology() {
    let topo = repo().join("tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml");
    let r = run(&check_program(), &["sets", topo.to_str().unwrap()]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert_eq!(
        r.out,
        "job cpus {0-3,6-7} nodes {0-1,3}\n\
         compute/left cpus {6-7} nodes {3}\n\
         subset 0 io cpus {0-1} nodes {0}\n\
         subset 1 compute cpus {2-3,6-7} nodes {1,3}\n\
         missing NUMALAB_E_INVALID numalab_set_named: 'compute' has no subset named 'right'; its subsets: left\n\
         distance 0-3 22 hops 2\n"
    );
}

#[test]
fn a_reports_results_json_is_read_from_c() {
    let numalab = target_debug().join("numalab");
    assert!(
        numalab.is_file(),
        "{} is missing: cargo build --workspace builds it (scripts/test.sh does)",
        numalab.display()
    );
    let dir = installed().dir.join("report");
    let topo = repo().join("tests/fixtures/topologies/qemu-quartet-4n2c-ring.xml");
    let made = Command::new(&numalab)
        .args(["report", "--topology"])
        .arg(&topo)
        .arg("-o")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let r = run(
        &check_program(),
        &["results", dir.join("results.json").to_str().unwrap()],
    );
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    let lines: Vec<&str> = r.out.lines().collect();
    assert_eq!(lines[0], "kind report tables 4", "{}", r.out);
    assert!(
        lines.contains(&"table machine-nodes rows 4 columns 9 first-column node first-cell 0"),
        "{}",
        r.out
    );
    assert!(
        lines.contains(&"table distances rows 16 columns 4 first-column from_node first-cell 0"),
        "{}",
        r.out
    );
    // The same tables as the CSV files numalab wrote.
    let csv = std::fs::read_to_string(dir.join("distances.csv")).unwrap();
    assert_eq!(csv.lines().count(), 17);
    assert!(lines.contains(&"machine nodes 4"), "{}", r.out);
    assert!(lines.contains(&"second node 1"), "{}", r.out);
    // Tables by name, and values as text sized first.
    assert!(lines.contains(&"find distances 1"), "{}", r.out);
    assert!(
        lines.contains(&"find no-such-table NUMALAB_E_INVALID numalab_results_table_find: no table named 'no-such-table'; tables: machine-nodes, distances, parts, key-figures"),
        "{}",
        r.out
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let version = json["schema_version"].as_str().unwrap();
    assert!(
        lines.contains(&format!("schema_version {version} ({} bytes)", version.len() + 1).as_str()),
        "{}",
        r.out
    );
    let node0 = json["machine"]["nodes"][0].to_string();
    assert!(
        lines.contains(&format!("node 0 as JSON needs {} bytes", node0.len() + 1).as_str()),
        "{}",
        r.out
    );
}

#[test]
fn the_examples_build_and_verify_their_placements() {
    let triad = c_program("examples/triad.c", "triad");
    let r = run(&triad, &["262144"]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    let node = allowed("mems")[0];
    for a in ["a", "b", "c"] {
        let line = r
            .out
            .lines()
            .find(|l| l.starts_with(&format!("{a}: ")))
            .unwrap_or_else(|| panic!("{}", r.out));
        assert!(line.contains("verified  node "), "{line}");
        // 262144 doubles: 512 pages.
        assert!(line.contains(": 512 pages (100.0%)"), "{line}");
    }
    assert!(r.out.contains(&format!("a: bind:{node} ")), "{}", r.out);
    assert!(r.out.contains("result correct"), "{}", r.out);
    assert!(r.out.contains(") verified\n"), "{}", r.out);

    let team = c_program("examples/team.c", "team");
    let r = run(&team, &["all", "compact"]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    let threads = r.out.lines().filter(|l| l.starts_with("thread ")).count();
    assert_eq!(threads, allowed("cpus").len(), "{}", r.out);
    assert_eq!(
        r.out.matches(": verified; its 1 MiB: ").count(),
        threads,
        "{}",
        r.out
    );
}

#[test]
fn the_examples_build_with_cmake_through_pkg_config() {
    let inst = installed();
    let build = inst.dir.join("cmake-build");
    let cmake = |args: &[&std::ffi::OsStr]| {
        let r = Command::new("cmake").args(args).output().unwrap();
        assert!(
            r.status.success(),
            "cmake {args:?}: {}{}",
            String::from_utf8_lossy(&r.stdout),
            String::from_utf8_lossy(&r.stderr)
        );
    };
    let prefix = format!("-DCMAKE_PREFIX_PATH={}", inst.prefix.display());
    let examples = repo().join("examples");
    cmake(&[
        "-S".as_ref(),
        examples.as_os_str(),
        "-B".as_ref(),
        build.as_os_str(),
        prefix.as_ref(),
    ]);
    cmake(&["--build".as_ref(), build.as_os_str()]);
    let r = run(&build.join("triad"), &["65536"]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert_eq!(r.out.matches("  verified  node ").count(), 3, "{}", r.out);
    assert!(r.out.contains("result correct"), "{}", r.out);
    let r = run(&build.join("team"), &["all", "scatter"]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert_eq!(
        r.out.matches(": verified; its 1 MiB: ").count(),
        allowed("cpus").len(),
        "{}",
        r.out
    );
}

#[test]
fn a_static_link_needs_only_what_pkg_config_lists() {
    let inst = installed();
    let src = repo().join("examples/triad.c");
    let out = inst.dir.join("triad_static");
    // The archive itself, then what `pkg-config --static` says it needs.
    let script = format!(
        "cc -O2 '{}' $(pkg-config --cflags numalab) '{}' $(pkg-config --static --libs-only-l numalab | sed 's/-lnumalab //') -o '{}'",
        src.display(),
        inst.prefix.join("lib/libnumalab.a").display(),
        out.display()
    );
    let r = Command::new("sh")
        .args(["-c", &script])
        .env("PKG_CONFIG_PATH", inst.prefix.join("lib/pkgconfig"))
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "{script}\n{}",
        String::from_utf8_lossy(&r.stderr)
    );
    let needed = Command::new("readelf")
        .arg("-d")
        .arg(&out)
        .output()
        .unwrap();
    let needed = String::from_utf8_lossy(&needed.stdout);
    assert!(!needed.contains("libnumalab"), "{needed}");
    let r = run(&out, &["65536"]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert_eq!(r.out.matches("  verified  ").count(), 3, "{}", r.out);
}

#[test]
fn fortran_places_verifies_and_reports_errors() {
    let fortran = |src: &str, name: &str, extra: &str| {
        compile(src, name, "gfortran", "numalab-fortran", extra)
    };
    let check = fortran(
        "crates/numalab-capi/tests/fortran/check.f90",
        "check_f",
        "-fopenmp",
    );
    let r = run(&check, &[]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert!(!r.out.contains("FAIL"), "{}", r.out);
    // Every policy, each array verified on the first node.
    let node = allowed("mems")[0];
    for p in [
        "first-touch".to_string(),
        "local".into(),
        format!("bind:{node}"),
        format!("preferred:{node}"),
        format!("interleave:{node}"),
        format!("interleave:{node}@4"),
        format!("weighted:{node}=3"),
        format!("weighted:{node}=2@2"),
    ] {
        assert!(
            r.out.contains(&format!("ok policy {p} verified: ")),
            "{p}: {}",
            r.out
        );
    }
    assert_eq!(r.out.matches("ok placed by ").count(), 3, "{}", r.out);
    // The OpenMP team: one thread per allowed CPU, each on its own.
    let cpus = allowed("cpus");
    let mut seen: Vec<u32> = r
        .out
        .lines()
        .filter_map(|l| l.strip_prefix("ok thread "))
        .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, cpus, "{}", r.out);
    assert!(r.out.contains("ok x kept its values"), "{}", r.out);
    assert!(r.out.contains("ok the message names it"), "{}", r.out);
    assert!(
        r.out
            .contains("ok free it again through another pointer: status 3"),
        "{}",
        r.out
    );
    assert!(r.out.ends_with("failures=0\n"), "{}", r.out);

    let triad = fortran("examples/triad.f90", "triad_f", "");
    let r = run(&triad, &["262144"]);
    assert_eq!(r.rc, 0, "{}{}", r.out, r.err);
    assert_eq!(r.out.matches("  verified  node ").count(), 3, "{}", r.out);
    assert_eq!(
        r.out.matches(": 512 pages (100.0%)").count(),
        3,
        "{}",
        r.out
    );
    assert!(r.out.contains("result correct"), "{}", r.out);
}
