//! libnumalab from a C program in the Quartet guest (4 nodes in a ring, 2
//! CPUs each): the library installed by scripts/install-lib.sh into a
//! scratch prefix outside the workspace, the programs compiled with `cc
//! $(pkg-config --cflags --libs numalab)` (rpath to the prefix, which the
//! guest gets with the library at the same path), then `bind:2` all on
//! node 2, `interleave:0-3` a quarter per node within a point, weighted 3:1
//! as 75/25 within two points (laid by chunks, and by the kernel's
//! weighted interleave), a team first-touching its shares, ranges placed,
//! remote, first-touch, local and preferred relative to the calling
//! thread's node, threads bound by a scatter policy, by thread id and as a
//! whole process on the CPUs asked, and the triad example with each array
//! on its own node.

use crate::common::{repo_root, Step};
use crate::guest_experiments::quartet;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// 1024 pages (4 MiB) per policy: a quarter is 256 pages, a point 10.
pub const QUARTET_STEPS: &[(&str, &str)] = &[
    (
        "capi_policies",
        "numalab_check policies 1024 bind:2 interleave:0-3 interleave:0-3@4 weighted:0=3,1=1 k/weighted:0=3,1=1 preferred:3 team:all range:bind:1 range:interleave:0-3 range:weighted:0=3,1=1 from:node:1/remote:near from:node:1/remote:far from:node:3/first-touch from:node:2/local from:node:0/preferred:1,3",
    ),
    ("capi_bind", "numalab_check bind cpu:5 cpu:2"),
    ("capi_scatter4", "numalab_check threads all scatter 4"),
    ("capi_scatter8", "numalab_check threads all scatter 8"),
    ("capi_compact3", "numalab_check threads node:1-2 compact 3"),
    ("capi_triad", "triad 262144"),
];

/// The C programs the steps run, built against the installed library.
pub fn programs() -> Vec<PathBuf> {
    static P: OnceLock<Vec<PathBuf>> = OnceLock::new();
    P.get_or_init(|| {
        let root = repo_root();
        let lib_dir = PathBuf::from(env!("CARGO_BIN_EXE_numalab"))
            .parent()
            .unwrap()
            .to_path_buf();
        assert!(
            lib_dir.join("libnumalab_capi.so").is_file(),
            "{} is missing: cargo build --workspace builds it (scripts/test.sh does)",
            lib_dir.join("libnumalab_capi.so").display()
        );
        // Not under /tmp: the guest mounts a tmpfs there, which would hide
        // the library at the path the programs' rpath names.
        let dir = PathBuf::from("/var/tmp").join(format!("numalab-guest-capi-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("prefix");
        let profile = if lib_dir.ends_with("release") { "release" } else { "dev" };
        let st = Command::new("bash")
            .arg(root.join("scripts/install-lib.sh"))
            .args(["--profile", profile, "--no-build", "--no-static", "--prefix"])
            .arg(&prefix)
            .status()
            .unwrap();
        assert!(st.success(), "scripts/install-lib.sh failed");
        let build = |src: &str, name: &str| {
            let out = dir.join(name);
            let script = format!(
                "cc -O2 -pthread '{}' $(pkg-config --cflags --libs numalab) -Wl,-rpath,'{}' -o '{}'",
                root.join(src).display(),
                prefix.join("lib").display(),
                out.display()
            );
            let r = Command::new("sh")
                .args(["-c", &script])
                .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
                .output()
                .unwrap();
            assert!(r.status.success(), "{script}: {}", String::from_utf8_lossy(&r.stderr));
            out
        };
        vec![
            build("crates/numalab-capi/tests/c/numalab_check.c", "numalab_check"),
            build("examples/triad.c", "triad"),
        ]
    })
    .clone()
}

/// The lines of a step, each as its `key=value` fields.
fn lines(s: &Step) -> Vec<BTreeMap<String, String>> {
    assert_eq!(s.rc, 0, "exit code; stderr: {}\n{}", s.err, s.out);
    s.out
        .lines()
        .map(|l| {
            let (head, message) = match l.split_once(" message=") {
                Some((h, m)) => (h, m),
                None => (l, ""),
            };
            let mut f: BTreeMap<String, String> = head
                .split_whitespace()
                .filter_map(|t| t.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            f.insert("message".into(), message.to_string());
            f
        })
        .collect()
}

/// `nodes=0:256,1:256` as node -> pages.
fn nodes(f: &BTreeMap<String, String>) -> BTreeMap<u32, u64> {
    f["nodes"]
        .split(',')
        .map(|p| {
            let (n, c) = p.split_once(':').unwrap();
            (n.parse().unwrap(), c.parse().unwrap())
        })
        .collect()
}

fn policy<'a>(all: &'a [BTreeMap<String, String>], p: &str) -> &'a BTreeMap<String, String> {
    all.iter()
        .find(|f| f["policy"] == p)
        .unwrap_or_else(|| panic!("no line for {p}: {all:?}"))
}

/// Each node's share in percent.
fn shares(f: &BTreeMap<String, String>) -> BTreeMap<u32, f64> {
    let n = nodes(f);
    let total: u64 = n.values().sum();
    n.into_iter()
        .map(|(k, v)| (k, 100.0 * v as f64 / total as f64))
        .collect()
}

#[test]
fn quartet_c_program_places_every_policy_where_asked() {
    let all = lines(quartet().step("capi_policies"));
    assert_eq!(all.len(), 15, "{all:?}");
    for f in &all {
        assert_eq!(f["status"], "NUMALAB_OK", "{f:?}");
        assert_eq!(f["verified"], "1", "{f:?}");
        assert_eq!(f["untouched"], "0", "{f:?}");
    }
    // bind:2: every page on node 2.
    assert_eq!(nodes(policy(&all, "bind:2")), BTreeMap::from([(2, 1024)]));
    // interleave:0-3: a quarter per node, within one point.
    for p in ["interleave:0-3", "interleave:0-3@4", "range:interleave:0-3"] {
        let s = shares(policy(&all, p));
        assert_eq!(s.len(), 4, "{p}: {s:?}");
        assert!(s.values().all(|v| (v - 25.0).abs() <= 1.0), "{p}: {s:?}");
    }
    // weighted 3:1: 75/25 within two points, by chunks and by the kernel.
    for p in [
        "weighted:0=3,1=1",
        "k/weighted:0=3,1=1",
        "range:weighted:0=3,1=1",
    ] {
        let s = shares(policy(&all, p));
        assert_eq!(s.keys().copied().collect::<Vec<_>>(), [0, 1], "{p}: {s:?}");
        assert!((s[&0] - 75.0).abs() <= 2.0, "{p}: {s:?}");
        assert!((s[&1] - 25.0).abs() <= 2.0, "{p}: {s:?}");
    }
    let kernel = policy(&all, "k/weighted:0=3,1=1");
    assert!(
        kernel["message"].starts_with("kernel weighted interleave; weights written"),
        "{kernel:?}"
    );
    assert_eq!(
        nodes(policy(&all, "preferred:3")),
        BTreeMap::from([(3, 1024)])
    );
    // A team of all 8 CPUs: 128 pages each, two CPUs a node.
    assert_eq!(
        nodes(policy(&all, "team:all")),
        BTreeMap::from([(0, 256), (1, 256), (2, 256), (3, 256)])
    );
    // A malloc'ed range of 1024 pages spans 1024 or 1025.
    let r = nodes(policy(&all, "range:bind:1"));
    assert_eq!(r.keys().copied().collect::<Vec<_>>(), [1]);
    assert!((1024..=1025).contains(&r[&1]), "{r:?}");
    // Relative to the calling thread's node (guest/boot.sh's distances:
    // 1 is 16 from 0 and 3, 22 from 2; ties go to the lowest node; 0 is
    // 16 from 1 and 22 from 3).
    for (p, node) in [
        ("from:node:1/remote:near", 0),
        ("from:node:1/remote:far", 2),
        ("from:node:3/first-touch", 3),
        ("from:node:2/local", 2),
        ("from:node:0/preferred:1,3", 1),
    ] {
        assert_eq!(
            nodes(policy(&all, p)),
            BTreeMap::from([(node, 1024)]),
            "{p}"
        );
    }
}

#[test]
fn quartet_threads_bound_by_id_and_as_a_process_run_where_asked() {
    assert_eq!(
        quartet().step("capi_bind").out,
        "step=thread_id thread=second running=5 allowed=5 verified=1\n\
         step=process thread=main running=2 allowed=2 verified=1\n\
         step=process thread=second running=2 allowed=2 verified=1\n"
    );
}

/// (cpu, running, allowed) of each thread, checked verified.
fn team(step: &str) -> Vec<(u32, u32, String)> {
    lines(quartet().step(step))
        .iter()
        .map(|f| {
            assert_eq!(f["verified"], "1", "{f:?}");
            (
                f["cpu"].parse().unwrap(),
                f["running"].parse().unwrap(),
                f["allowed"].clone(),
            )
        })
        .collect()
}

#[test]
fn quartet_threads_bound_by_thread_policy_run_on_the_cpus_asked() {
    for (step, want) in [
        ("capi_scatter4", vec![0, 2, 4, 6]),
        ("capi_scatter8", vec![0, 2, 4, 6, 1, 3, 5, 7]),
        ("capi_compact3", vec![2, 3, 4]),
    ] {
        let t = team(step);
        let cpus: Vec<u32> = t.iter().map(|x| x.0).collect();
        assert_eq!(cpus, want, "{step}");
        for (cpu, running, allowed) in &t {
            assert_eq!(running, cpu, "{step}");
            assert_eq!(allowed, &cpu.to_string(), "{step}");
        }
    }
}

#[test]
fn quartet_triad_example_puts_each_array_on_its_own_node() {
    let s = quartet().step("capi_triad");
    assert_eq!(s.rc, 0, "{}{}", s.out, s.err);
    assert!(s.out.starts_with("machine: 4 memory nodes\n"), "{}", s.out);
    for (a, n) in [("a", 0), ("b", 1), ("c", 2)] {
        let want = format!("{a}: bind:{n}   verified  node {n}: 512 pages (100.0%)");
        assert!(s.out.contains(&want), "{want} not in:\n{}", s.out);
    }
    assert!(
        s.out.contains("thread: CPU 0 (node 0) verified"),
        "{}",
        s.out
    );
    assert!(s.out.contains("result correct"), "{}", s.out);
}
