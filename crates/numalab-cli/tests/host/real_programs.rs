//! Real programs nobody here wrote, from Debian's packages, under the
//! preload library (`profile`, `run --plan`, `run --mem interleave:0@4`):
//! the same output and exit status as a plain run, and no hang (issue 36).
//! Each allocator case is one that broke before: rustc links jemalloc
//! (its arena set-up called `mmap`, whose hook's first `backtrace` loaded
//! libgcc's unwinder under jemalloc's lock: a hang, every time); xz with
//! libjemalloc preloaded (the library's `malloc_usable_size` was
//! jemalloc's, given glibc's blocks: SIGSEGV at start); redis-server links
//! libjemalloc, and serves redis-benchmark on the loopback meanwhile.
//! xz runs under tcmalloc and mimalloc preloaded too, and every program
//! under the plan its own profile wrote, where it wrote one.

use crate::common;

use common::{preload_library, scratch, Ran};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const JEMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2";
const TCMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4";
const MIMALLOC: &str = "/usr/lib/x86_64-linux-gnu/libmimalloc.so.2";

/// The mode that applies the plan the `profile` mode wrote (DIR/prof).
pub(crate) const PROFILE_PLAN: &str = "run --plan (the profile's plan)";

/// The ways numalab runs a program with its library: a profile, the plan
/// that profile wrote (where it wrote one: [`plan_not_written`]), a plan
/// that places every allocation over 1 MiB, and 4-page stripes. In this
/// order: the profile's plan exists only after the profile.
pub(crate) fn modes(dir: &Path) -> Vec<(&'static str, Vec<String>)> {
    let plan = dir.join("plan.json");
    std::fs::write(
        &plan,
        r#"{"schema": "numalab-plan/1", "entries": [{"region": "size>1M", "policy": "interleave:0"}]}"#,
    )
    .unwrap();
    vec![
        (
            "profile",
            vec![
                "profile".into(),
                "-o".into(),
                dir.join("prof").to_string_lossy().into_owned(),
            ],
        ),
        (
            PROFILE_PLAN,
            vec![
                "run".into(),
                "--plan".into(),
                dir.join("prof/plan.json").to_string_lossy().into_owned(),
            ],
        ),
        (
            "run --plan",
            vec![
                "run".into(),
                "--plan".into(),
                plan.to_string_lossy().into_owned(),
            ],
        ),
        (
            "run --mem interleave:0@4",
            vec!["run".into(), "--mem".into(), "interleave:0@4".into()],
        ),
    ]
}

/// Whether `mode` is [`PROFILE_PLAN`] and the profile wrote no plan (its
/// diagnoses called for no fix): then there is nothing to apply, and the
/// caller skips the mode, said on stderr.
pub(crate) fn plan_not_written(mode: &str, args: &[String]) -> bool {
    let missing = mode == PROFILE_PLAN && args.last().is_none_or(|p| !Path::new(p).exists());
    if missing {
        eprintln!("{mode}: the profile wrote no plan (no fix called for): nothing to apply");
    } else if mode == PROFILE_PLAN {
        eprintln!("{mode}: applying {}", args.last().unwrap());
    }
    missing
}

/// Runs `numalab ARGS -- CMD` (or CMD alone when `args` is empty) in
/// `dir`, with `env`; a run longer than `limit` is killed and fails the
/// test as a hang.
pub(crate) fn bounded(
    args: &[String],
    cmd: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    limit: u64,
) -> Ran {
    bounded_into(args, cmd, dir, env, limit, None)
}

/// [`bounded`] with the command's stdout (numalab's, which the program
/// inherits) going into the file `stdout` when it is given.
fn bounded_into(
    args: &[String],
    cmd: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    limit: u64,
    stdout: Option<&Path>,
) -> Ran {
    let mut c = if args.is_empty() {
        Command::new(cmd[0])
    } else {
        let mut c = Command::new(env!("CARGO_BIN_EXE_numalab"));
        c.args(args).arg("--").arg(cmd[0]);
        c
    };
    // A group of its own: a hang is killed whole (the program under
    // numalab holds the pipes too).
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    c.args(&cmd[1..])
        .current_dir(dir)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    match stdout {
        Some(path) => c.stdout(std::fs::File::create(path).unwrap()),
        None => c.stdout(Stdio::piped()),
    };
    let _beside = crate::common::beside();
    let mut child = c.spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let start = Instant::now();
    // Drain both pipes beside the wait: a chatty program must not block.
    let out = child.stdout.take();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        if let Some(mut out) = out {
            std::io::Read::read_to_end(&mut out, &mut v).ok();
        }
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).ok();
        v
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(limit) {
            // SAFETY: killpg has no memory preconditions; the group is
            // the child's own.
            unsafe { libc::killpg(child.id() as i32, libc::SIGKILL) };
            let _ = child.wait();
            let err = String::from_utf8_lossy(&t_err.join().unwrap()).into_owned();
            panic!(
                "numalab {args:?} -- {cmd:?} hung: killed after {limit} s; stderr:\n{}",
                common::tail(&err, 20)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        status,
        rc: status.code().unwrap_or(-1),
        out: String::from_utf8_lossy(&t_out.join().unwrap()).into_owned(),
        err: String::from_utf8_lossy(&t_err.join().unwrap()).into_owned(),
    }
}

/// Whether a Debian package's file is here; else the test cannot run, and
/// says which package `scripts/install-deps.sh --test` installs for it.
pub(crate) fn have(path: &str, package: &str) {
    assert!(
        Path::new(path).exists(),
        "{path} is missing: scripts/install-deps.sh --test installs {package}"
    );
}

/// Deterministic text that compresses like a log: 8 MiB.
fn log_like(path: &Path) {
    let mut s = String::with_capacity(9 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut i = 0u64;
    while s.len() < 8 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!(
            "{i:08} worker-{} served /item/{} in {} us status {}\n",
            x % 16,
            x % 100_000,
            x % 5000,
            [200, 200, 200, 404, 500][(x % 5) as usize]
        ));
        i += 1;
    }
    std::fs::write(path, s).unwrap();
}

#[test]
fn xz_with_jemalloc_preloaded_compresses_the_same_in_every_mode() {
    xz_with_allocator_preloaded(JEMALLOC, "libjemalloc2", "real-xz-jemalloc");
}

/// The same with Google's tcmalloc (its minimal build, as programs link
/// it) preloaded: its own `malloc_usable_size`, `memalign` and arenas.
#[test]
fn xz_with_tcmalloc_preloaded_compresses_the_same_in_every_mode() {
    xz_with_allocator_preloaded(TCMALLOC, "libtcmalloc-minimal4", "real-xz-tcmalloc");
}

/// The same with Microsoft's mimalloc preloaded.
#[test]
fn xz_with_mimalloc_preloaded_compresses_the_same_in_every_mode() {
    xz_with_allocator_preloaded(MIMALLOC, "libmimalloc2.0", "real-xz-mimalloc");
}

/// A C program linked (not preloaded) with jemalloc, tcmalloc and
/// mimalloc in turn: the allocator is malloc's own object, so the library
/// passes its blocks to it (`memalign`, `malloc_usable_size` and all), in
/// two threads, blocks of 16 bytes to 8 MiB, calloc, realloc, aligned
/// ones. Every mode prints the plain run's sums and the profile saw its
/// allocations.
#[test]
fn a_program_linked_with_jemalloc_tcmalloc_or_mimalloc_runs_the_same_in_every_mode() {
    preload_library();
    for (allocator, package, name) in [
        (JEMALLOC, "libjemalloc2", "real-linked-jemalloc"),
        (TCMALLOC, "libtcmalloc-minimal4", "real-linked-tcmalloc"),
        (MIMALLOC, "libmimalloc2.0", "real-linked-mimalloc"),
    ] {
        have(allocator, package);
        let dir = scratch(name);
        let prog = dir.join("alloc_churn");
        let st = Command::new("gcc")
            .args(["-O1", "-pthread", "-o"])
            .arg(&prog)
            .arg(common::repo_root().join("crates/numalab-cli/tests/programs/alloc_churn.c"))
            .arg(allocator)
            .status()
            .unwrap();
        assert!(st.success(), "gcc with {allocator}");
        let p = prog.to_str().unwrap();
        let plain = bounded(&[], &[p], &dir, &[], 120);
        assert_eq!(
            (plain.rc, plain.out.as_str()),
            (0, "sums 846610241 835203623\n"),
            "{allocator}: {}",
            plain.err
        );
        for (mode, args) in modes(&dir) {
            if plan_not_written(mode, &args) {
                continue;
            }
            let r = bounded(&args, &[p], &dir, &[], 120);
            assert_eq!(
                (r.rc, &r.out),
                (0, &plain.out),
                "{mode} with {allocator} linked:\n{}",
                common::tail(&r.err, 20)
            );
        }
        let prof = std::fs::read_to_string(dir.join("prof/profile.json")).unwrap();
        let v = common::parse_json(&prof, "profile.json");
        assert!(
            v["regions"].as_array().is_some_and(|r| !r.is_empty()),
            "no region with {allocator} linked"
        );
    }
}

/// xz compressing a log with `allocator` preloaded (from Debian's
/// `package`), plainly and in every mode: the same archive, exit 0, no
/// hang, and a profile that saw the program's allocations through it.
fn xz_with_allocator_preloaded(allocator: &str, package: &str, name: &str) {
    preload_library();
    have(allocator, package);
    have("/usr/bin/xz", "xz-utils");
    let dir = scratch(name);
    let data = dir.join("data.log");
    log_like(&data);
    let env = [("LD_PRELOAD", allocator)];
    // Two threads, so that jemalloc's arenas and the library's hooks meet
    // on more than the main thread.
    // The archive on stdout, as `xz -c data > out.xz` is used: numalab
    // must add nothing to it (the profile once came after the archive).
    let xz = ["xz", "-T2", "-3", "-c", "data.log"];
    let archive = dir.join("data.log.xz");
    let plain = bounded_into(&[], &xz, &dir, &env, 120, Some(&archive));
    assert_eq!(plain.rc, 0, "plain xz: {}", plain.err);
    let want = std::fs::read(&archive).unwrap();
    assert!(
        want.len() > 1000 && want.len() < 8 << 20,
        "{} bytes",
        want.len()
    );
    for (mode, args) in modes(&dir) {
        if plan_not_written(mode, &args) {
            continue;
        }
        std::fs::remove_file(&archive).unwrap();
        let r = bounded_into(&args, &xz, &dir, &env, 120, Some(&archive));
        assert_eq!(
            r.rc, 0,
            "{mode}: xz under {allocator}: {:?}\n{}",
            r.status, r.err
        );
        let got = std::fs::read(&archive).unwrap();
        assert!(
            got == want,
            "{mode}: the archive differs ({} vs {} bytes)",
            got.len(),
            want.len()
        );
    }
    // The profile saw the program's allocations through the allocator.
    let prof = std::fs::read_to_string(dir.join("prof/profile.json")).unwrap();
    let v: serde_json::Value = common::parse_json(&prof, "profile.json");
    assert!(
        v["regions"].as_array().is_some_and(|r| !r.is_empty()),
        "no region under {allocator}: {}",
        common::tail(&prof, 30)
    );
}

/// rustc, built with jemalloc, compiling a small program: every mode
/// finishes (it hung under `profile` before) and the program it built
/// prints what the plain compiler's does.
#[test]
fn rustc_with_its_jemalloc_compiles_the_same_in_every_mode() {
    preload_library();
    let rustc = Command::new("rustc").arg("--version").output();
    assert!(
        rustc.as_ref().is_ok_and(|o| o.status.success()),
        "rustc is missing (scripts/install-deps.sh installs Rust)"
    );
    let dir = scratch("real-rustc");
    std::fs::write(
        dir.join("sum.rs"),
        "fn main() { let v: Vec<u64> = (0..2_000_000).collect(); \
         println!(\"{}\", v.iter().sum::<u64>()); }\n",
    )
    .unwrap();
    let exe = |name: &str| -> PathBuf { dir.join(name) };
    let build = |args: &[String], name: &str| {
        let out = exe(name);
        let cmd = ["rustc", "-O", "-o", out.to_str().unwrap(), "sum.rs"];
        bounded(args, &cmd, &dir, &[], 180)
    };
    let plain = build(&[], "plain");
    assert_eq!(plain.rc, 0, "plain rustc: {}", plain.err);
    for (i, (mode, args)) in modes(&dir).into_iter().enumerate() {
        if plan_not_written(mode, &args) {
            continue;
        }
        let name = format!("mode{i}");
        let r = build(&args, &name);
        assert_eq!(r.rc, 0, "{mode}: rustc: {:?}\n{}", r.status, r.err);
        let run = Command::new(exe(&name)).output().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&run.stdout),
            "1999999000000\n",
            "{mode}: the program rustc built"
        );
    }
}

/// A process group, killed when the test ends (passed or failed).
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: killpg has no memory preconditions; the group is the
        // test's own child's (gone already when it ended: ESRCH).
        unsafe { libc::killpg(self.0 as i32, libc::SIGKILL) };
    }
}

/// A free TCP port on the loopback.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The profile at 20,000 arms a second. redis-server's epoll events array
/// (121 KiB at 10,000 clients) is tracked: before `epoll_wait` was
/// interposed, an armed page of it stopped redis with "Guru Meditation:
/// aeApiPoll: epoll_wait, Bad address" (seen once in nine such runs; the
/// hazards program's `buffer-calls` mode meets it every run).
const FAST_PROFILE: &str = "profile --rate 20000";

/// redis-server (linked with libjemalloc) under each mode, and under the
/// profile at a high rate, serves redis-benchmark and keeps a value set
/// through redis-cli; it shuts down cleanly when asked.
#[test]
fn redis_with_its_jemalloc_serves_a_benchmark_in_every_mode() {
    preload_library();
    have("/usr/bin/redis-server", "redis-server");
    have("/usr/bin/redis-benchmark", "redis-tools");
    let dir = scratch("real-redis");
    let fast = vec![
        "profile".to_string(),
        "--rate".into(),
        "20000".into(),
        "-o".into(),
        dir.join("prof-fast").to_string_lossy().into_owned(),
    ];
    for (mode, args) in modes(&dir).into_iter().chain([(FAST_PROFILE, fast)]) {
        if plan_not_written(mode, &args) {
            continue;
        }
        let port = free_port().to_string();
        let cli = |extra: &[&str]| {
            // Bounded (coreutils' timeout): a server that stops answering
            // fails the test instead of hanging it.
            let o = Command::new("timeout")
                .args(["-k", "5", "20", "redis-cli", "-p", &port])
                .args(extra)
                .output()
                .unwrap();
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let mut server = Command::new(env!("CARGO_BIN_EXE_numalab"));
        std::os::unix::process::CommandExt::process_group(&mut server, 0);
        let mut server = server
            .args(&args)
            .args([
                "--",
                "redis-server",
                "--port",
                &port,
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .args(["--bind", "127.0.0.1", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Whatever fails below, no server stays behind.
        let _group = Group(server.id());
        let start = Instant::now();
        while cli(&["ping"]) != "PONG" {
            if let Some(s) = server.try_wait().unwrap() {
                let mut err = String::new();
                std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut err).ok();
                panic!("{mode}: redis-server ended before serving: {s:?}\n{err}");
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "{mode}: redis-server never answered"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(cli(&["set", "numalab", "placed"]), "OK", "{mode}");
        // Values of 64 KiB: jemalloc's large size classes, which the
        // library tracks (and places under the plan). At the high rate,
        // small values and many clients: the events array is then most
        // of what is tracked, and epoll_wait returns many events a call.
        let load: &[&str] = if mode == FAST_PROFILE {
            &["-n", "60000", "-c", "50", "-t", "set,get", "-q"]
        } else {
            &[
                "-n", "3000", "-c", "4", "-d", "65536", "-t", "set,get", "-q",
            ]
        };
        let bench = Command::new("timeout")
            .args(["-k", "5", "300", "redis-benchmark", "-p", &port])
            .args(load)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&bench.stdout);
        assert_ne!(
            bench.status.code(),
            Some(124),
            "{mode}: redis-benchmark did not end within 300 s: {text}"
        );
        assert!(bench.status.success(), "{mode}: redis-benchmark: {text}");
        for t in ["SET: ", "GET: "] {
            assert!(
                text.contains(t) && text.contains("requests per second"),
                "{mode}: {text}"
            );
        }
        assert_eq!(cli(&["get", "numalab"]), "placed", "{mode}");
        cli(&["shutdown", "nosave"]);
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(s) = server.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                panic!("{mode}: redis-server did not end after SHUTDOWN");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(server.stderr.as_mut().unwrap(), &mut err).ok();
        assert!(
            status.success(),
            "{mode}: numalab over redis-server: {status:?}\n{err}"
        );
    }
}

/// Debian's coreutils read their input with `fread_unlocked` into a 32 KiB
/// buffer (sha256sum) or a 30 KiB one (base64), tracked at --min-bytes
/// 16384: glibc reads a large request straight into that buffer with its
/// own `read`, which no hook sees. Before the library interposed
/// `fread_unlocked`, an armed page of the buffer made the read fail:
/// "sha256sum: FILE: Bad address", exit 1, at once.
#[test]
fn coreutils_reading_through_fread_unlocked_into_sampled_buffers_gives_the_same_output() {
    let dir = scratch("real-fread-unlocked");
    let data = dir.join("data.bin");
    // 144 MiB: with 48 base64 ran about 0.2 s and took 47-91 samples
    // here at --rate 20000 (a clean clone's loaded lane: 50, one short of
    // the bound); 144 took 347-725, 273-363 with two busy loops beside it.
    let mut bytes = Vec::with_capacity(144 << 20);
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    while bytes.len() < 144 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    std::fs::write(&data, &bytes).unwrap();
    for cmd in [
        &["sha256sum", "data.bin"][..],
        &["base64", "-w", "0", "data.bin"][..],
    ] {
        let plain = bounded(&[], cmd, &dir, &[], 60);
        assert_eq!(plain.rc, 0, "{cmd:?}: {}", plain.err);
        let args: Vec<String> = [
            "profile",
            "--rate",
            "20000",
            "--min-bytes",
            "16384",
            "-o",
            dir.join("prof").to_str().unwrap(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Runs until the buffers were sampled 60 times in all, at most 8:
        // the program runs 0.15 s idle, and the samples a run gets follow
        // the sampler's ticks (each can arm a hot page only once its last
        // arming was touched), which a loaded host delays. Here one run
        // took 687-1069 idle and 209-359 with two busy loops beside; CI's
        // loaded lane once gave 38, where the bound was 50 in one run.
        let mut samples = Vec::new();
        while samples.iter().sum::<u64>() < 60 && samples.len() < 8 {
            let _ = std::fs::remove_dir_all(dir.join("prof"));
            let r = bounded(&args, cmd, &dir, &[], 120);
            // (The program's own complaint, not numalab's summary after it.)
            let said: Vec<&str> = r.err.lines().filter(|l| l.starts_with(cmd[0])).collect();
            assert_eq!(r.rc, 0, "{cmd:?} under the profile: {said:?}");
            assert!(
                r.out == plain.out,
                "{cmd:?}: the output differs under the profile"
            );
            // The buffer was tracked and sampled while the program read.
            let v: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join("prof/profile.json")).unwrap(),
            )
            .unwrap();
            samples.push(v["samples"].as_u64().unwrap());
        }
        assert!(
            samples.iter().sum::<u64>() >= 60,
            "{cmd:?}: samples of each run {samples:?}"
        );
    }
}
