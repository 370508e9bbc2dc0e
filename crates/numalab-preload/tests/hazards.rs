//! The preload library under a program that meets each hazard of
//! protection-fault sampling (tests/programs/hazards.c): system calls into
//! sampled buffers, the program's own SIGSEGV handler, a real crash, the
//! program's own mprotect. Each runs at a high sampling rate, so that the
//! hazard is met many times, and must see what it would see without the
//! library.

#[path = "../src/record.rs"]
#[allow(dead_code)]
mod record;

use record::{Kind, Record};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The library cargo built beside this test.
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let lib = dir.join("libnumalab_preload.so");
    assert!(
        lib.exists(),
        "{} not built: cargo build --workspace builds it (scripts/test.sh does)",
        lib.display()
    );
    lib
}

/// The hazards program, compiled once.
fn program() -> &'static Path {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("preload-hazards");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs/hazards.c");
        let st = Command::new("gcc")
            .args(["-O1", "-g", "-pthread", "-o"])
            .arg(&out)
            .arg(&src)
            .status()
            .expect("gcc (scripts/install-deps.sh installs it)");
        assert!(st.success(), "gcc failed on {}", src.display());
        out
    })
}

/// Runs a mode under the library; returns its output and records.
fn run(mode: &str, rate: u32) -> (Output, Vec<Record>) {
    let records = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("preload-{mode}.bin"));
    let _ = std::fs::remove_file(&records);
    let _ = std::fs::remove_file(records.with_extension("bin.maps"));
    let out = Command::new(program())
        .arg(mode)
        .env("LD_PRELOAD", library())
        .env("NUMALAB_PROFILE_OUT", &records)
        .env("NUMALAB_PROFILE_RATE", rate.to_string())
        .output()
        .unwrap();
    let bytes = std::fs::read(&records).unwrap_or_default();
    if o_ok(&records) {
        // The maps, for symbols, once the program exited normally.
        let maps = std::fs::read_to_string(records.with_extension("bin.maps")).unwrap();
        assert!(maps.contains("libnumalab_preload.so"), "{maps}");
    }
    (out, Record::decode_all(&bytes))
}

/// Whether the run left its records (every mode but the crash exits).
fn o_ok(records: &Path) -> bool {
    !records.to_string_lossy().contains("crash")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn samples(r: &[Record]) -> Vec<&Record> {
    r.iter().filter(|x| x.kind == Kind::Sample).collect()
}

#[test]
fn reads_and_receives_into_sampled_buffers_return_every_byte() {
    let (o, r) = run("read", 20_000);
    assert!(o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains(", 0 failures"), "{t}");
    let rounds: u32 = t
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(rounds > 50, "{t}");
    // The buffers were sampled while the calls used them.
    assert!(samples(&r).len() > 20, "{} samples", samples(&r).len());
}

#[test]
fn the_programs_own_segv_handler_still_runs() {
    let (o, r) = run("segv-handled", 20_000);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("handled 3, handler kept 1"), "{t}");
    assert_eq!(t.matches("handler: signal 11 at 0x10").count(), 3, "{t}");
    assert!(
        !samples(&r).is_empty(),
        "no samples: the hazard was not met"
    );
}

#[test]
fn a_real_crash_still_crashes_with_sigsegv() {
    let (o, r) = run("crash", 20_000);
    assert_eq!(
        o.status.signal(),
        Some(libc::SIGSEGV),
        "{:?} {}",
        o.status,
        text(&o)
    );
    assert!(!samples(&r).is_empty(), "no samples before the crash");
    // Without the library, the same status.
    let plain = Command::new(program()).arg("crash").output().unwrap();
    assert_eq!(plain.status.signal(), o.status.signal());
}

#[test]
fn the_programs_own_mprotect_stands() {
    let (o, r) = run("mprotect", 20_000);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("read-only reads 1024, writes blocked 4 of 4"),
        "{t}"
    );
    assert!(!samples(&r).is_empty());
}

#[test]
fn samples_fall_in_the_array_the_threads_read() {
    let (o, r) = run("sample", 5_000);
    let t = text(&o);
    assert!(o.status.success() && t.contains("sums right"), "{t}");
    let line = t.lines().find(|l| l.starts_with("array ")).unwrap();
    let mut w = line.split_whitespace().skip(1);
    let start = u64::from_str_radix(w.next().unwrap().trim_start_matches("0x"), 16).unwrap();
    let len: u64 = w.next().unwrap().parse().unwrap();
    let s = samples(&r);
    assert!(s.len() > 100, "{} samples", s.len());
    let inside = s
        .iter()
        .filter(|x| x.addr >= start && x.addr < start + len)
        .count();
    assert_eq!(inside, s.len(), "samples outside the only large array");
    // Reads only, from the two reader threads (not the main thread, which
    // wrote the array before sampling could arm it... or did: then writes).
    let readers: std::collections::BTreeSet<u32> = s
        .iter()
        .filter(|x| x.flags & record::FLAG_WRITE == 0)
        .map(|x| x.tid)
        .collect();
    assert!(readers.len() >= 2, "{readers:?}");
    // Every sample names a CPU and the node of its page (one node here).
    assert!(
        s.iter().all(|x| x.cpu != u32::MAX && x.node >= 0),
        "{:?}",
        s[0]
    );
    let alloc = r.iter().find(|x| x.kind == Kind::Alloc).unwrap();
    assert_eq!((alloc.addr, alloc.size), (start, len));
    assert!(r.iter().any(|x| x.kind == Kind::Free && x.addr == start));
    // Where its pages were when freed: every whole page, on this
    // machine's nodes (malloc's 16-byte header leaves 8191 whole pages).
    let pages: u64 = r
        .iter()
        .filter(|x| x.kind == Kind::PageNodes && x.addr == start && x.cpu == u32::MAX)
        .inspect(|x| assert!(x.node >= 0, "{x:?}"))
        .map(|x| x.size)
        .sum();
    assert_eq!(pages, len / 4096 - 1);
    // The snapshots taken while it lived (numbered in `cpu`) each count
    // every whole page once, present or not.
    let mut snapshots: std::collections::BTreeMap<u32, u64> = Default::default();
    for x in r
        .iter()
        .filter(|x| x.kind == Kind::PageNodes && x.addr == start && x.cpu != u32::MAX)
    {
        *snapshots.entry(x.cpu).or_default() += x.size;
    }
    assert!(
        snapshots.values().all(|p| *p == len / 4096 - 1),
        "{snapshots:?}"
    );
    // The allocation's call stack, innermost first.
    let frames: Vec<&Record> = r
        .iter()
        .filter(|x| x.kind == Kind::Frame && x.addr == start)
        .collect();
    assert!(frames.len() >= 3, "{frames:?}");
    assert!(frames
        .iter()
        .enumerate()
        .all(|(i, f)| f.size == i as u64 && f.time_ns != 0));
    let totals = r.iter().find(|x| x.kind == Kind::Totals).unwrap();
    assert_eq!(totals.size as usize, s.len(), "samples counted at exit");
}

#[test]
fn without_an_output_the_library_does_nothing() {
    let o = Command::new(program())
        .arg("sample")
        .env("LD_PRELOAD", library())
        .output()
        .unwrap();
    assert!(
        o.status.success() && text(&o).contains("sums right"),
        "{}",
        text(&o)
    );
}

#[test]
fn threads_started_with_every_signal_blocked_are_sampled_too() {
    // Without the interposed sigmask these threads would be killed by the
    // first sample's fault (xz -T2 was).
    let (o, r) = run("blocked", 5_000);
    let t = text(&o);
    assert!(o.status.success() && t.contains("sums right"), "{t}");
    let readers: std::collections::BTreeSet<u32> = samples(&r).iter().map(|x| x.tid).collect();
    assert!(readers.len() >= 2, "{readers:?}");
}
