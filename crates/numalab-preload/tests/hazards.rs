//! The preload library under a program that meets each hazard of
//! protection-fault sampling (tests/programs/hazards.c): system calls into
//! sampled buffers, the program's own SIGSEGV handler, a real crash, the
//! program's own mprotect. Each runs at a high sampling rate, so that the
//! hazard is met many times, and must see what it would see without the
//! library.

use numalab_profile_abi::record::{self, Kind, Record};
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
    run_with(mode, rate, &[])
}

/// [`run`] with more environment (records in a file of their own).
fn run_with(mode: &str, rate: u32, env: &[(&str, &str)]) -> (Output, Vec<Record>) {
    // Each environment its own file: tests run at once.
    let tag: String = env
        .iter()
        .flat_map(|(_, v)| std::iter::once('-').chain(v.chars()))
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    // A mode may carry its arguments after a space.
    let name = mode.replace(' ', "-");
    let records = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("preload-{name}{tag}.bin"));
    let _ = std::fs::remove_file(&records);
    let _ = std::fs::remove_file(records.with_extension("bin.maps"));
    let out = Command::new(program())
        .args(mode.split(' '))
        .env("LD_PRELOAD", library())
        .env("NUMALAB_PROFILE_OUT", &records)
        .env("NUMALAB_PROFILE_RATE", rate.to_string())
        .envs(env.iter().copied())
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
fn a_stray_breakpoint_trap_is_dropped_and_every_other_trap_goes_where_it_went() {
    // Without the library a breakpoint trap nobody watches ends the
    // program: the hazard the word counter's watches bring.
    let plain = Command::new(program()).arg("traps").output().unwrap();
    assert_eq!(
        plain.status.signal(),
        Some(libc::SIGTRAP),
        "{}",
        text(&plain)
    );
    let under_library = |args: &[&str], records: &str| {
        Command::new(program())
            .args(args)
            .env("LD_PRELOAD", library())
            .env(
                "NUMALAB_PROFILE_OUT",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join(records),
            )
            .output()
            .unwrap()
    };
    let o = under_library(&["traps"], "preload-traps.bin");
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    for line in [
        "stray breakpoint trap survived",
        "ignored kill survived",
        "handler: SIGTRAP code 128",
        "handler: SIGTRAP code 4",
        "traps seen by the handler 2, sum ok",
    ] {
        assert!(t.contains(line), "no '{line}' in {t}");
    }
    // An int3 with no handler still ends the program by SIGTRAP.
    let int3 = under_library(&["traps", "int3"], "preload-traps-int3.bin");
    assert_eq!(int3.status.signal(), Some(libc::SIGTRAP), "{}", text(&int3));
    assert!(!text(&int3).contains("after int3"), "{}", text(&int3));
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
    let (start, len) = array_of(&t);
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

#[test]
fn three_hundred_threads_blocked_in_read_do_not_stop_the_sampling() {
    // A thread-per-connection server's blocked calls each hold a busy
    // slot: with 256 slots the array below got no sample at all.
    let (o, r) = run("many-blocked", 5_000);
    let t = text(&o);
    assert!(o.status.success() && t.contains("sums right"), "{t}");
    assert!(
        t.contains("blocked readers: 300 of 300 read their byte"),
        "{t}"
    );
    let (start, len) = array_of(&t);
    let inside = samples(&r)
        .iter()
        .filter(|x| x.addr >= start && x.addr < start + len)
        .count();
    assert!(inside > 100, "{inside} samples in the array");
}

/// The calls that found the busy table full, from a run's Totals record.
fn busy_table_full(r: &[Record]) -> Option<u32> {
    let totals = r.iter().find(|x| x.kind == Kind::Totals).unwrap();
    numalab_profile_abi::events::Totals::from_record(totals)
        .unwrap()
        .busy_table_full
}

#[test]
fn calls_past_the_busy_table_are_counted_for_the_profile() {
    // 4200 threads blocked in read: 104 more calls than the table's 4096
    // slots. While they block the sampler arms nothing, and the Totals
    // record counts every call that found the table full (its `cpu`), so
    // that the profile can say why samples are missing.
    let (o, r) = run("many-blocked 4200", 5_000);
    let t = text(&o);
    assert!(o.status.success() && t.contains("sums right"), "{t}");
    assert!(
        t.contains("blocked readers: 4200 of 4200 read their byte"),
        "{t}"
    );
    let full = busy_table_full(&r);
    assert!(full.is_some_and(|n| n >= 104), "{full:?}");
    // 300 readers fit: none found it full. (Its own records file: the
    // 300-reader test runs the same mode at once.)
    let (_, r) = run_with("many-blocked", 5_000, &[("NUMALAB_HAZARDS_RUN", "fits")]);
    assert_eq!(busy_table_full(&r), Some(0));
}

/// Why this machine cannot show huge pages kept whole, if it cannot.
fn no_huge_pages() -> Option<String> {
    let enabled = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
        .unwrap_or_else(|_| "[never]".into());
    if enabled.contains("[never]") {
        return Some(format!(
            "transparent huge pages are off on this machine ({})",
            enabled.trim()
        ));
    }
    let (major, minor) = kernel_version();
    if (major, minor) < (6, 7) {
        return Some(format!(
            "Linux {major}.{minor} has no PAGEMAP_SCAN (6.7): the library cannot tell huge pages"
        ));
    }
    None
}

fn kernel_version() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut v = r.trim().split(['.', '-']).map(|x| x.parse().unwrap_or(0));
    (v.next().unwrap_or(0), v.next().unwrap_or(0))
}

#[test]
fn sampling_keeps_transparent_huge_pages_whole() {
    if let Some(why) = no_huge_pages() {
        numalab_testkit::skip(why);
        return;
    }
    // What the kernel gives the array without the library.
    let plain = Command::new(program()).arg("thp").output().unwrap();
    let plain_kb = huge_kb(&text(&plain));
    if plain_kb[0] < 64 << 10 {
        numalab_testkit::skip(format!(
            "memory too fragmented: the kernel gave the 64 MiB array {} kB of huge pages",
            plain_kb[0]
        ));
        return;
    }
    let (o, r) = run("thp", 20_000);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let kb = huge_kb(&t);
    // Before the fix, first touches armed page by page left the array
    // with no huge page at all, and each sample split one.
    assert_eq!(kb[0], 64 << 10, "huge pages not made while sampled: {t}");
    assert_eq!(kb[1], kb[0], "huge pages split while sampled: {t}");
    let s = samples(&r);
    assert!(s.len() > 100, "{} samples", s.len());
    assert!(
        s.iter().all(|x| x.flags & record::FLAG_HUGE != 0),
        "a sample armed page by page in a huge page"
    );
}

/// The "huge before K kB after K kB" of the thp mode.
fn huge_kb(t: &str) -> Vec<i64> {
    let line = t
        .lines()
        .find(|l| l.starts_with("huge before "))
        .unwrap_or_else(|| panic!("{t}"));
    line.split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

#[test]
fn pmu_sampling_reads_each_threads_ring_into_samples() {
    // The PMU path with a software event that carries data addresses:
    // page faults (type 1, config 2), every one (period 1). A hardware
    // memory-sampling event goes the same way: opened on each thread by
    // the sampler, its ring read each tick, samples kept in tracked
    // regions with their page's node.
    let (o, r) = run_with("sample", 5_000, &[("NUMALAB_PROFILE_PMU", "1:2:0:0:1")]);
    let t = text(&o);
    assert!(o.status.success() && t.contains("sums right"), "{t}");
    let (start, len) = array_of(&t);
    let start_record = r.iter().find(|x| x.kind == Kind::Start).unwrap();
    assert!(
        numalab_profile_abi::events::Start::from_record(start_record).is_some_and(|s| s.pmu),
        "the Start record says PMU"
    );
    let s = samples(&r);
    assert!(s.len() > 1000, "{} samples", s.len());
    // Every sample is the PMU's: no page was armed.
    assert!(s.iter().all(|x| x.flags & record::FLAG_PMU != 0));
    let totals = r.iter().find(|x| x.kind == Kind::Totals).unwrap();
    assert_eq!(totals.addr, 0, "pages armed");
    // The main thread's first writes of the array fault once a page: the
    // samples are in it, on this machine's node, with the CPU, and the
    // software event has no data source (access unknown).
    let inside: Vec<_> = s
        .iter()
        .filter(|x| x.addr >= start && x.addr < start + len)
        .collect();
    assert!(
        inside.len() > 1000,
        "{} of {} in the array",
        inside.len(),
        s.len()
    );
    assert!(inside
        .iter()
        .all(|x| x.cpu != u32::MAX && x.flags & record::FLAG_ACCESS_UNKNOWN != 0));
    // The node is asked at the sampler's next tick: a page the program
    // freed in between is unknown (-1).
    let on_node_0 = inside.iter().filter(|x| x.node == 0).count();
    assert!(
        on_node_0 * 100 >= inside.len() * 99,
        "{on_node_0} of {}",
        inside.len()
    );
    assert!(inside.iter().all(|x| x.node == 0 || x.node == -1));
    let main = r.iter().find(|x| x.kind == Kind::Start).unwrap().tid;
    assert!(
        inside.iter().any(|x| x.tid == main),
        "the main thread's faults"
    );
    // Times are the records' clock (CLOCK_MONOTONIC), after the start.
    assert!(inside.iter().all(|x| x.time_ns >= start_record.time_ns));
    let pmu = r.iter().find(|x| x.kind == Kind::Pmu).unwrap();
    assert_eq!((pmu.tid, pmu.cpu, pmu.node), (0, 0, 0), "{pmu:?}");
}

#[test]
fn a_pmu_the_kernel_refuses_gives_way_to_protection_faults() {
    // A raw event of a PMU type that does not exist: refused, with the
    // errno; pages are armed instead.
    let (o, r) = run_with(
        "sample",
        5_000,
        &[("NUMALAB_PROFILE_PMU", "4242:1:0:0:1000")],
    );
    assert!(o.status.success(), "{}", text(&o));
    let s = samples(&r);
    assert!(s.len() > 100, "{} samples", s.len());
    assert!(s.iter().all(|x| x.flags & record::FLAG_PMU == 0));
    let pmu = r.iter().find(|x| x.kind == Kind::Pmu).unwrap();
    assert!(pmu.tid >= 1, "refused: {pmu:?}");
    assert_eq!(pmu.node, libc_enoent(), "{pmu:?}");
}

/// ENOENT: the kernel's answer to an event type no PMU has.
fn libc_enoent() -> i32 {
    2
}

#[test]
fn small_allocations_are_drawn_by_bytes_with_their_stacks() {
    // 200000 allocations of 100 bytes, one drawn per 64 KiB allocated on
    // average: about 305 (20 MB / 64 KiB), each with its call stack.
    let (o, r) = run_with("small", 20, &[("NUMALAB_PROFILE_SMALL_EVERY", "65536")]);
    assert!(
        o.status.success() && text(&o).contains("small 200000"),
        "{}",
        text(&o)
    );
    let drawn: Vec<&Record> = r.iter().filter(|x| x.kind == Kind::SmallAlloc).collect();
    // Those of the program's 100-byte allocations (libc's own, stdio's
    // buffer, are drawn too).
    let ours: Vec<&&Record> = drawn.iter().filter(|x| x.size == 100).collect();
    assert!((200..=450).contains(&ours.len()), "{} drawn", ours.len());
    assert!(ours
        .iter()
        .all(|x| x.cpu == 64 && x.node == 0 && x.time_ns >> 63 == 1));
    // Each has its call stack, keyed by its number, innermost first.
    for x in ours.iter().take(20) {
        let frames = r
            .iter()
            .filter(|f| f.kind == Kind::Frame && f.addr == x.time_ns)
            .count();
        assert!(frames >= 3, "{frames} frames for {x:?}");
    }
    // Off: none drawn.
    let (_, r) = run_with("small", 20, &[("NUMALAB_PROFILE_SMALL_EVERY", "0")]);
    assert!(!r.iter().any(|x| x.kind == Kind::SmallAlloc));
}

#[test]
fn file_mappings_are_sampled_and_keep_their_protection() {
    let (o, r) = run("file", 5_000);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("sums right") && t.contains("read-only kept"),
        "{t}"
    );
    let line = t.lines().find(|l| l.starts_with("file rw ")).unwrap();
    let w: Vec<&str> = line.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let (rw, ro, len) = (hex(w[2]), hex(w[4]), w[5].parse::<u64>().unwrap());
    // Both tracked, as file mappings (shared or not).
    let alloc = |a: u64| r.iter().find(|x| x.kind == Kind::Alloc && x.addr == a);
    assert_eq!(alloc(rw).map(|x| (x.flags, x.size)), Some((1 | 2 | 4, len)));
    assert_eq!(alloc(ro).map(|x| (x.flags, x.size)), Some((1 | 2, len)));
    // Both sampled: the read-only one by the main thread's reads.
    let s = samples(&r);
    let within = |a: u64| s.iter().filter(|x| x.addr >= a && x.addr < a + len).count();
    assert!(
        within(rw) > 20 && within(ro) > 20,
        "{} {}",
        within(rw),
        within(ro)
    );
    assert!(s
        .iter()
        .filter(|x| x.addr >= ro && x.addr < ro + len)
        .all(|x| x.flags & record::FLAG_WRITE == 0));
}

/// The "array ADDRESS BYTES" line a mode prints.
fn array_of(t: &str) -> (u64, u64) {
    range_of(t, "array")
}

/// The "LABEL ADDRESS BYTES" line a mode prints.
fn range_of(t: &str, label: &str) -> (u64, u64) {
    let line = t
        .lines()
        .find(|l| l.strip_prefix(label).is_some_and(|r| r.starts_with(' ')))
        .unwrap_or_else(|| panic!("no '{label}' line: {t}"));
    let mut w = line.split_whitespace().skip(1);
    let start = u64::from_str_radix(w.next().unwrap().trim_start_matches("0x"), 16).unwrap();
    (start, w.next().unwrap().parse().unwrap())
}

#[test]
fn an_alternate_signal_stack_is_never_armed() {
    let (o, r) = run("altstack", 20_000);
    let t = text(&o);
    assert!(o.status.success() && t.contains("signals 200"), "{t}");
    let (at, len) = range_of(&t, "altstack");
    // Tracked when malloc returned it, let go when it became a signal
    // stack (the program never frees it).
    assert!(
        r.iter().any(|x| x.kind == Kind::Alloc && x.addr == at),
        "{t}"
    );
    assert!(
        r.iter().any(|x| x.kind == Kind::Free && x.addr == at),
        "{t}"
    );
    let end = at + len;
    assert!(
        !samples(&r).iter().any(|x| x.addr >= at && x.addr < end),
        "a sample in the signal stack"
    );
}

#[test]
fn a_records_path_that_cannot_be_written_is_said_once_and_the_program_runs() {
    // NUMALAB_PROFILE_OUT set by hand to a directory, or into one that
    // does not exist: the library used to stay silently inactive.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (path, why) in [
        (dir.to_path_buf(), "Is a directory"),
        (
            dir.join("preload-no-such-dir/records.bin"),
            "No such file or directory",
        ),
    ] {
        let o = Command::new(program())
            .args(["barriers", "50"])
            .env("LD_PRELOAD", library())
            .env("NUMALAB_PROFILE_OUT", &path)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("barrier rounds 50, sums right"),
            "{}",
            text(&o)
        );
        let said: Vec<&str> = err.lines().filter(|l| l.starts_with("numalab:")).collect();
        assert_eq!(
            said,
            [format!(
                "numalab: NUMALAB_PROFILE_OUT={}: {why} (os error {}); the program runs without the library's records",
                path.display(),
                if why.starts_with("Is") { libc::EISDIR } else { libc::ENOENT }
            )],
            "{err}"
        );
    }
}

#[test]
fn the_barrier_loop_pinned_runs_each_thread_on_its_own_allowed_cpu_under_the_library() {
    // bench/profile-overhead.sh measures `barriers 40000 pinned`: its
    // threads must stay where they were put with the library loaded (its
    // sampler thread is not pinned, and must not move them).
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let records = dir.join("preload-barriers-pinned.bin");
    // SAFETY: an all-zero cpu_set_t is an empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel fills the set, of the size given, once.
    let got = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    assert_eq!(got, 0);
    let cpus: Vec<usize> = (0..libc::CPU_SETSIZE as usize)
        // SAFETY: reads the set filled above.
        .filter(|c| unsafe { libc::CPU_ISSET(*c, &set) })
        .collect();
    let o = Command::new(program())
        .args(["barriers", "200", "pinned"])
        .env("LD_PRELOAD", library())
        .env("NUMALAB_PROFILE_OUT", &records)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let want = format!(
        "barrier rounds 200, sums right, threads ended on CPUs {} {}\n",
        cpus[0],
        cpus[1 % cpus.len()]
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), want, "{}", text(&o));
    // A placement it does not know is a one-line error naming the valid one.
    let o = Command::new(program())
        .args(["barriers", "200", "spread"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        "barriers: 'spread' is no placement; valid: pinned (or nothing)\n"
    );
}

#[test]
fn buffers_libc_fills_itself_are_never_armed() {
    // The directory's buffer (opendir's, 32 KiB and a header) tracked as
    // on file systems whose st_blksize makes it 64 KiB and more.
    let (o, r) = run_with(
        "libc-buffers",
        20_000,
        &[("NUMALAB_PROFILE_MIN_BYTES", "16384")],
    );
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let dirs = t.lines().find(|l| l.starts_with("dirs: ")).unwrap();
    assert!(dirs.ends_with(" rounds, 0 failures"), "{t}");
    let rounds: usize = dirs.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(rounds > 20, "{t}");
    let lines = t.lines().find(|l| l.starts_with("setvbuf: ")).unwrap();
    let w: Vec<&str> = lines.split_whitespace().collect();
    assert_eq!((w[1], w[6]), (w[3], "0"), "{t}");
    // Every directory's buffer was tracked, and none was armed: no sample
    // fell in one, while the array beside was sampled.
    let buffers: Vec<(u64, u64)> = r
        .iter()
        .filter(|x| x.kind == Kind::Alloc && x.size > 32 << 10 && x.size < 64 << 10)
        .map(|x| (x.addr, x.size))
        .collect();
    assert!(buffers.len() >= rounds, "{} of {rounds}", buffers.len());
    let s = samples(&r);
    let inside = s
        .iter()
        .filter(|x| buffers.iter().any(|(a, n)| x.addr >= *a && x.addr < a + n))
        .count();
    assert_eq!(inside, 0, "{} samples in all", s.len());
    assert!(s.len() > 20, "{} samples", s.len());
}

#[test]
fn fortified_unlocked_vector_and_random_calls_into_sampled_buffers_move_every_byte() {
    let (o, r) = run("buffer-calls", 20_000);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let line = t.lines().find(|l| l.starts_with("buffer-calls: ")).unwrap();
    assert!(line.ends_with(" rounds, 0 failures"), "{t}");
    let rounds: u32 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(rounds > 10, "{t}");
    // The buffers were sampled between the calls.
    assert!(samples(&r).len() > 20, "{} samples", samples(&r).len());
}

/// Each thread's scheduling policy, as the `policies` mode prints it.
fn policies(t: &str) -> Vec<(String, i32)> {
    t.lines()
        .filter_map(|l| l.strip_prefix("thread "))
        .filter_map(|l| l.rsplit_once(" policy "))
        .map(|(name, p)| (name.to_string(), p.parse().unwrap()))
        .collect()
}

#[test]
fn the_sampler_thread_yields_on_wake_up_and_keeps_a_policy_the_program_chose() {
    // Under the default policy the sampler moves to SCHED_BATCH (3): it
    // never preempts a program thread as it wakes. The program's threads
    // keep SCHED_OTHER (0).
    let (o, _) = run("policies", 1000);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let p = policies(&t);
    assert_eq!(
        p.iter()
            .filter(|(n, _)| n == "numalab-sampler")
            .map(|(_, p)| *p)
            .collect::<Vec<_>>(),
        [3],
        "{t}"
    );
    assert!(
        p.iter().any(|(n, p)| n != "numalab-sampler" && *p == 0),
        "{t}"
    );
    assert!(
        p.iter().all(|(n, p)| n == "numalab-sampler" || *p == 0),
        "{t}"
    );
    // A program started under SCHED_IDLE (5): the sampler stays there
    // with it (an unprivileged thread could not leave it).
    let records = Path::new(env!("CARGO_TARGET_TMPDIR")).join("preload-policies-idle.bin");
    let o = Command::new("chrt")
        .args(["-i", "0"])
        .arg(program())
        .arg("policies")
        .env("LD_PRELOAD", library())
        .env("NUMALAB_PROFILE_OUT", &records)
        .env("NUMALAB_PROFILE_RATE", "1000")
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let p = policies(&t);
    assert!(p.iter().any(|(n, _)| n == "numalab-sampler"), "{t}");
    assert!(p.iter().all(|(_, p)| *p == 5), "{t}");
}

/// The counts "perf-fds: 1:290 5:10" prints: checks by how many perf
/// descriptors the process had.
fn perf_fd_checks(t: &str) -> Vec<(u32, u32)> {
    let line = t
        .lines()
        .find_map(|l| l.strip_prefix("perf-fds:"))
        .unwrap_or_else(|| panic!("no perf-fds line in {t}"));
    line.split_whitespace()
        .take_while(|w| !w.starts_with('('))
        .map(|w| {
            let (c, n) = w.split_once(':').unwrap();
            (c.parse().unwrap(), n.parse().unwrap())
        })
        .collect()
}

/// The share of `checks` that saw `count` descriptors, and the most any
/// check saw.
fn share_and_most(checks: &[(u32, u32)], count: u32) -> (f64, u32) {
    let total: u32 = checks.iter().map(|c| c.1).sum();
    let at: u32 = checks.iter().filter(|c| c.0 == count).map(|c| c.1).sum();
    let most = checks.iter().map(|c| c.0).max().unwrap_or(0);
    (at as f64 / total.max(1) as f64, most)
}

#[test]
fn word_counting_keeps_its_events_open_only_in_watched_windows() {
    // Every window watched (duty 0): the main thread's four watchpoints
    // and the sampler thread's event that holds the kernel's hooks. Once
    // the watched switches pass 500 (a loaded host preempts the thread
    // that often), the sampler measures their surcharge for a few ms with
    // up to four watchpoints of its own in place of its hold: a check then
    // may see 4 or 8.
    let (o, _) = run_with("perf-fds", 1, &[("NUMALAB_PROFILE_OVERHEAD", "99")]);
    assert!(o.status.success(), "{}", text(&o));
    let all = perf_fd_checks(&text(&o));
    let (open, most) = share_and_most(&all, 5);
    assert!(open >= 0.9 && most <= 8, "{all:?}");
    // One window in 256 watched: a thread with perf events pays for each
    // of its context switches even while they are off, so skipped windows
    // have none; only the sampler's stays.
    let (o, _) = run_with("perf-fds", 1, &[("NUMALAB_PROFILE_OVERHEAD", "0.01")]);
    assert!(o.status.success(), "{}", text(&o));
    let few = perf_fd_checks(&text(&o));
    let (closed, most) = share_and_most(&few, 1);
    assert!(closed >= 0.9 && most <= 8, "{few:?}");
}
