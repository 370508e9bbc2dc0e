//! What the CLI test files share: running the numalab binary on this host
//! (`numalab`, `json`, `fails`, `Run` for stdin, environment or a wrapper),
//! the measuring tests' turn, topology fixtures; and booting the multi-node
//! QEMU guest (guest/boot.sh) with a list of named shell steps and parsing
//! what each printed, for the guest test files.
#![allow(dead_code)] // each test binary uses its own part

pub mod browser;
pub mod hostile;
pub mod report;

use serde_json::Value;
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

/// What one run of the numalab binary did.
#[derive(Debug)]
pub struct Ran {
    /// Its exit status (signals included).
    pub status: ExitStatus,
    /// Its exit code; -1 when a signal ended it.
    pub rc: i32,
    pub out: String,
    pub err: String,
}

/// A run of the numalab binary being set up: its arguments, and optionally
/// its standard input, environment variables and a wrapper command.
pub struct Run {
    args: Vec<String>,
    stdin: Option<Vec<u8>>,
    env: Vec<(String, String)>,
    via: Vec<String>,
}

impl Run {
    pub fn new(args: &[&str]) -> Run {
        Run {
            args: args.iter().map(|a| a.to_string()).collect(),
            stdin: None,
            env: Vec::new(),
            via: Vec::new(),
        }
    }

    /// Feeds `input` on standard input (otherwise it is empty).
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Run {
        self.stdin = Some(input.into());
        self
    }

    /// Sets an environment variable for the run.
    pub fn env(mut self, key: &str, value: &str) -> Run {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Starts numalab through `wrapper` (e.g. `["taskset", "-c", "0"]`).
    pub fn via(mut self, wrapper: &[&str]) -> Run {
        self.via = wrapper.iter().map(|a| a.to_string()).collect();
        self
    }

    /// Runs it to the end.
    pub fn run(self) -> Ran {
        let _beside = beside();
        let bin = env!("CARGO_BIN_EXE_numalab");
        let mut cmd = match self.via.split_first() {
            Some((wrapper, rest)) => {
                let mut c = Command::new(wrapper);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("run numalab {:?}: {e}", self.args));
        let mut pipe = child.stdin.take().unwrap();
        let input = self.stdin.unwrap_or_default();
        // A writer thread: a child that does not read its input must not
        // block the test.
        let writer = std::thread::spawn(move || {
            let _ = pipe.write_all(&input);
        });
        let out = child.wait_with_output().expect("wait for numalab");
        writer.join().unwrap();
        Ran {
            status: out.status,
            rc: out.status.code().unwrap_or(-1),
            out: String::from_utf8_lossy(&out.stdout).into_owned(),
            err: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

/// Runs `numalab ARGS` with empty standard input.
pub fn numalab(args: &[&str]) -> Ran {
    Run::new(args).run()
}

/// The commands `numalab ARGS --help` lists (`help` left out): the
/// subcommands of `numalab ARGS`.
pub fn subcommands(args: &[&str]) -> Vec<String> {
    let mut with_help = args.to_vec();
    with_help.push("--help");
    numalab(&with_help)
        .out
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

/// Runs `numalab ARGS`, asserts exit code 0 and returns stdout.
pub fn stdout(args: &[&str]) -> String {
    let r = numalab(args);
    assert_eq!(r.rc, 0, "numalab {args:?}: exit code; stderr: {}", r.err);
    r.out
}

/// Runs `numalab ARGS`, asserts exit code 0 and parses stdout as JSON.
pub fn json(args: &[&str]) -> Value {
    json_rc(args, 0)
}

/// Runs `numalab ARGS`, asserts exit code `rc` and parses stdout as JSON.
pub fn json_rc(args: &[&str], rc: i32) -> Value {
    let r = numalab(args);
    assert_eq!(r.rc, rc, "numalab {args:?}: exit code; stderr: {}", r.err);
    parse_json(&r.out, &format!("numalab {args:?}"))
}

/// What `numalab profile [--json] -o DIR -- PROGRAM` left: the program's
/// stdout, which must hold nothing of the profile (stdout is the
/// program's), and DIR/profile.json. With `--json` the JSON printed on
/// stderr (after the program's own stderr) must be that file's.
pub fn written_profile(r: &Ran, dir: &Path) -> (String, Value) {
    assert!(
        !r.out.contains("\"schema_version\"") && !r.out.contains("numalab profile"),
        "numalab printed into the program's stdout:\n{}",
        r.out
    );
    let file = dir.join("profile.json");
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("{}: {e}; stderr: {}", file.display(), r.err));
    let v = parse_json(&text, "profile.json");
    let top = if r.err.starts_with("{\n") {
        Some(0)
    } else {
        r.err.rfind("\n{\n").map(|i| i + 1)
    };
    if let Some(at) = top {
        // `--json`: profile.json in the envelope every command's JSON has
        // (its own schema version, the command, the environment).
        let mut printed = parse_json(&r.err[at..], "the JSON numalab profile printed on stderr");
        open_envelope(&mut printed, "profile");
        assert_eq!(
            printed, v,
            "stderr's JSON is not profile.json's in the envelope"
        );
    }
    (r.out.clone(), v)
}

/// Takes the envelope's `command` (which must be `command`) and its
/// `environment` (which must name the kernel) out of `v`, leaving the
/// result and its `schema_version`.
pub fn open_envelope(v: &mut Value, command: &str) {
    let o = v.as_object_mut().expect("a JSON object");
    assert_eq!(o.remove("command"), Some(command.into()));
    let env = o.remove("environment");
    assert!(
        env.as_ref().is_some_and(|e| e["kernel"].is_string()),
        "{env:?}"
    );
}

/// `text` as JSON, or a panic naming `what` and quoting the text.
pub fn parse_json(text: &str, what: &str) -> Value {
    serde_json::from_str(text)
        .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e}):\n{text}"))
}

/// Runs `numalab ARGS` and asserts bad input: exit code 2, nothing on
/// stdout, one `numalab: ...` line on stderr that contains `needle`.
pub fn fails(args: &[&str], needle: &str) {
    fails_rc(args, 2, needle);
}

/// [`fails`] with another exit code (1: a failure, 127: no such command).
pub fn fails_rc(args: &[&str], rc: i32, needle: &str) {
    let r = numalab(args);
    let what = format!("numalab {args:?}");
    assert_one_line_error(&what, r.rc, &r.err, rc, needle);
    assert_eq!(r.out, "", "{what}: nothing on stdout");
}

/// Asserts that a run ended with exit code `want_rc` and one line
/// `numalab: ...` on stderr that contains `needle` (and no panic).
pub fn assert_one_line_error(what: &str, rc: i32, err: &str, want_rc: i32, needle: &str) {
    assert_eq!(rc, want_rc, "{what}: exit code; stderr: {err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{what}: one line: {err:?}");
    assert!(lines[0].starts_with("numalab: "), "{what}: {err}");
    assert!(
        lines[0].contains(needle),
        "{what}: '{needle}' not in: {err}"
    );
    assert!(!err.contains("panicked"), "{what}: {err}");
}

/// Measuring tests of one test binary take turns, and while one measures
/// no other test of the binary runs a process ([`Run::run`] and the
/// programs of real_programs wait in [`beside`]): on a 2-core machine a
/// measurement beside anything else measures that too (a loaded-latency
/// median below idle, a per-thread trace's races, seen in CI). Hold the
/// guard for the whole test; the processes it runs itself do not wait.
pub fn turn() -> Turn {
    static TURN: Mutex<()> = Mutex::new(());
    let turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let alone = ALONE.write().unwrap_or_else(|p| p.into_inner());
    MEASURING.with(|m| m.set(true));
    Turn {
        _alone: alone,
        _turn: turn,
        since: std::time::Instant::now(),
    }
}

/// A turn held longer than this is noted in the lane's summary: the
/// turns run one at a time, so their sum bounds the binary's time.
const LONG_TURN_S: f64 = 10.0;

/// A measuring test's turn ([`turn`]); dropping it lets the others run.
pub struct Turn {
    _alone: RwLockWriteGuard<'static, ()>,
    _turn: MutexGuard<'static, ()>,
    since: std::time::Instant,
}

impl Drop for Turn {
    fn drop(&mut self) {
        MEASURING.with(|m| m.set(false));
        let held = self.since.elapsed().as_secs_f64();
        if held > LONG_TURN_S {
            let thread = std::thread::current();
            numalab_testkit::note(&format!(
                "measuring turn of {}: {held:.0} s",
                thread.name().unwrap_or("a test")
            ));
        }
    }
}

/// Taken for reading by every process a test runs ([`beside`]), for
/// writing by a measuring test's [`turn`].
static ALONE: RwLock<()> = RwLock::new(());

thread_local! {
    /// Whether this test thread holds a [`turn`].
    static MEASURING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Held while a test runs a process on the host: waits while another test
/// measures ([`turn`]); nothing for the measuring test's own processes.
pub fn beside() -> Option<RwLockReadGuard<'static, ()>> {
    if MEASURING.with(|m| m.get()) {
        return None;
    }
    Some(ALONE.read().unwrap_or_else(|p| p.into_inner()))
}

/// The path of a topology file of tests/fixtures/topologies.
pub fn fixture(name: &str) -> String {
    repo_root()
        .join("tests/fixtures/topologies")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// A fresh, empty scratch directory named after one test (tests run in
/// parallel, and test binaries too).
pub fn scratch(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("scratch")
        .join(format!("{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether this machine has a memory-controller PMU numalab counts
/// (`uncore_imc_N`, `amd_umc_N` or `amd_df`).
pub fn memory_controller_pmus() -> bool {
    std::fs::read_dir("/sys/bus/event_source/devices")
        .map(|d| {
            d.flatten().any(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                n.starts_with("uncore_imc") || n.starts_with("amd_umc") || n == "amd_df"
            })
        })
        .unwrap_or(false)
}

/// The CPUs this process may use, as `numalab topology --json` lists them.
pub fn allowed_cpus() -> Vec<u64> {
    let v = json(&["topology", "--json"]);
    serde_json::from_value(v["allowed_cpus"].clone())
        .unwrap_or_else(|e| panic!("allowed_cpus {}: {e}", v["allowed_cpus"]))
}

/// The largest last-level (data or unified) cache of this machine, from
/// `numalab topology --json`; `None` when hwloc reports no cache.
pub fn last_level_cache_bytes() -> Option<u64> {
    let v = json(&["topology", "--json"]);
    let caches: Vec<(u64, u64)> = v["caches"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["kind"] != "instruction")
        .map(|c| {
            (
                c["level"].as_u64().unwrap(),
                c["size_bytes"].as_u64().unwrap(),
            )
        })
        .collect();
    let top = caches.iter().map(|c| c.0).max()?;
    caches.iter().filter(|c| c.0 == top).map(|c| c.1).max()
}

/// A buffer size ("NM") of at least `multiple` times the last-level cache,
/// a power of two and at least 64 MiB: memory must serve most accesses,
/// and no more is touched than that needs (first touches are slow on a
/// virtual machine whose free memory goes back to its host).
pub fn beyond_cache(multiple: u64) -> String {
    let llc = last_level_cache_bytes().unwrap_or(0);
    format!(
        "{}M",
        (multiple * llc)
            .div_ceil(1 << 20)
            .next_power_of_two()
            .max(64)
    )
}

/// A JSON number as f64.
pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[derive(Debug, Clone)]
pub struct Step {
    pub out: String,
    pub err: String,
    pub rc: i32,
}

/// A guest of the lane, booted in the background: the first test that asks
/// for any guest starts them all (`start_guests`), longest first, at most
/// [`guest_jobs`] at a time, so that the lane's time is the guests' work
/// spread over the host's CPUs rather than the sum of their boots (tests
/// asking for one guest used to wait while a single guest ran). A boot that
/// fails fails every test of its guest with its message.
pub struct LazyGuest {
    cell: std::sync::OnceLock<Result<Guest, String>>,
    boot: fn() -> Guest,
}

impl LazyGuest {
    pub const fn new(boot: fn() -> Guest) -> LazyGuest {
        LazyGuest {
            cell: std::sync::OnceLock::new(),
            boot,
        }
    }

    /// The guest once booted (every guest of `all` starts booting first,
    /// unless NUMALAB_GUESTS_ON_DEMAND is set: then only the guests the
    /// tests that run ask for boot, one by one, which is what a filtered
    /// run of a few steps wants).
    pub fn get(&'static self, all: &'static [&'static LazyGuest]) -> &'static Guest {
        if std::env::var_os("NUMALAB_GUESTS_ON_DEMAND").is_some() {
            self.cell.get_or_init(|| self.booted());
        } else {
            start_guests(all);
        }
        match self.cell.wait() {
            Ok(g) => g,
            Err(e) => panic!("{e}"),
        }
    }

    fn booted(&self) -> Result<Guest, String> {
        let booted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(self.boot));
        booted.map_err(|e| match panic_text(&*e) {
            t if t.is_empty() => "the guest's boot panicked".to_string(),
            t => t,
        })
    }

    fn run(&self) {
        // Only this function and `get` on demand set the cell, once per guest.
        let _ = self.cell.set(self.booted());
    }
}

/// A caught panic's message (empty when it carried no text).
pub fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<String>()
        .cloned()
        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Guests booted at once: NUMALAB_GUEST_JOBS, or 3. Two guests left one of
/// two host cores idle much of the time (a guest's steps are mostly one
/// thread); more than three stretch every guest's steps without adding
/// work done.
pub fn guest_jobs() -> usize {
    std::env::var("NUMALAB_GUEST_JOBS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(3)
}

/// Starts booting every guest of `all`, in their order, once per process.
pub fn start_guests(all: &'static [&'static LazyGuest]) {
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(|| {
        std::thread::spawn(move || {
            let jobs = guest_jobs();
            let free = std::sync::Arc::new((Mutex::new(jobs), std::sync::Condvar::new()));
            for g in all {
                {
                    let (lock, cv) = &*free;
                    let mut n = cv.wait_while(lock.lock().unwrap(), |n| *n == 0).unwrap();
                    *n -= 1;
                }
                let free = free.clone();
                std::thread::spawn(move || {
                    g.run();
                    let (lock, cv) = &*free;
                    *lock.lock().unwrap() += 1;
                    cv.notify_one();
                });
            }
        });
    });
}

pub struct Guest {
    pub steps: HashMap<String, Step>,
    pub console: String,
}

impl Guest {
    pub fn step(&self, name: &str) -> &Step {
        self.steps.get(name).unwrap_or_else(|| {
            panic!(
                "step '{name}' missing from the guest output; console tail:\n{}",
                tail(&self.console, 60)
            )
        })
    }

    /// The step's stdout as JSON, with its exit code checked.
    pub fn json(&self, name: &str, rc: i32) -> Value {
        let s = self.step(name);
        assert_eq!(s.rc, rc, "step {name}: exit code; stderr: {}", s.err);
        parse_json(&s.out, &format!("step {name}"))
    }
}

pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The preload library of `numalab profile`, beside the numalab binary
/// (`cargo test` builds no cdylib: scripts/test.sh, the README's command,
/// runs `cargo build --workspace` first).
pub fn preload_library() -> PathBuf {
    let lib = std::path::Path::new(env!("CARGO_BIN_EXE_numalab"))
        .parent()
        .unwrap()
        .join("libnumalab_preload.so");
    assert!(
        lib.is_file(),
        "{} is missing: cargo build --workspace builds it (scripts/test.sh, the README's command, does)",
        lib.display()
    );
    lib
}

/// The C program at `src` (from the repository root) compiled with
/// debug info into this test binary's scratch folder as `name`.
pub fn compile_c(src: &str, name: &str) -> PathBuf {
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("programs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join(name);
    let src = repo_root().join(src);
    // Built aside and renamed into place: two tests compiling the same
    // program at once must not run each other's half-written binary.
    static BUILDS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = BUILDS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let aside = dir.join(format!(".{name}.{k}"));
    let st = Command::new("gcc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&aside)
        .arg(&src)
        .status()
        .expect("gcc (scripts/install-deps.sh installs it)");
    assert!(st.success(), "gcc failed on {}", src.display());
    std::fs::rename(&aside, &out).unwrap();
    out
}

/// The program whose NUMA truth `numalab profile` must find
/// (crates/numalab-preload/tests/programs/profile_truth.c), compiled once
/// per test binary; in the guests it is `/bin/profile_truth`.
pub fn profile_truth_program() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        compile_c(
            "crates/numalab-preload/tests/programs/profile_truth.c",
            "profile_truth",
        )
    })
    .clone()
}

/// The truth suite's program (crates/numalab-preload/tests/programs/
/// truth.c: threads in step, staggered, random, partitioned, producers
/// and consumers..., with every access counted by construction); `/bin/truth`
/// in the guests.
pub fn truth_program() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| compile_c("crates/numalab-preload/tests/programs/truth.c", "truth"))
        .clone()
}

/// The program that asks the kernel where its heap's pages went
/// (crates/numalab-preload/tests/programs/stripes.c); `/bin/stripes` in
/// the guests.
pub fn stripes_program() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| compile_c("crates/numalab-preload/tests/programs/stripes.c", "stripes"))
        .clone()
}

/// crates/numalab-cli/tests/programs/small_nodes.c: a list of small
/// nodes from one site; `/bin/small_nodes` in the guests.
pub fn small_nodes_program() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        compile_c(
            "crates/numalab-cli/tests/programs/small_nodes.c",
            "small_nodes",
        )
    })
    .clone()
}

/// crates/numalab-cli/tests/programs/thread_tree.c: threads and a child
/// process with known page faults; `/bin/thread_tree` in the guests.
pub fn thread_tree_program() -> PathBuf {
    static P: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        compile_c(
            "crates/numalab-cli/tests/programs/thread_tree.c",
            "thread_tree",
        )
    })
    .clone()
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Boots `machine` on `kernel` ("6.12" or "6.1") with `steps` (name, shell
/// command) and parses the output.
pub fn boot(machine: &str, kernel_version: &str, steps: &[(&str, &str)]) -> Guest {
    boot_with(machine, kernel_version, steps, &[])
}

/// [`boot`] with more guest/boot.sh options (`--tcg single`).
pub fn boot_with(
    machine: &str,
    kernel_version: &str,
    steps: &[(&str, &str)],
    options: &[&str],
) -> Guest {
    boot_with_files(machine, kernel_version, steps, options, &[])
}

/// [`boot_with`] with more programs in the guest's /bin (their shared
/// libraries come along, at the paths ldd finds them).
pub fn boot_with_files(
    machine: &str,
    kernel_version: &str,
    steps: &[(&str, &str)],
    options: &[&str],
    files: &[PathBuf],
) -> Guest {
    let root = repo_root();
    let kernel = root.join(match kernel_version {
        "6.12" => "guest/cache/vmlinuz".to_string(),
        v => format!("guest/cache/vmlinuz-{v}"),
    });
    assert!(
        kernel.exists(),
        "{} is missing: run guest/fetch-kernel.sh (the README test command does)",
        kernel.display()
    );
    // Files add their steps to shared boots: a name used twice would
    // answer one test with another's output.
    let mut names = std::collections::BTreeSet::new();
    for (name, _) in steps {
        assert!(
            names.insert(*name),
            "step '{name}' is listed twice for the {machine} guest"
        );
    }
    // A step's output over 1 KiB crosses the serial console gzipped and in
    // base64: the emulated UART carries about 125 KB a second (2 MB took
    // 16 s in the Quartet guest), JSON shrinks about tenfold.
    let mut script = String::from(
        "emit() { if [ \"$(wc -c <\"$1\")\" -gt 1024 ]; then echo '@@@GZ64'; gzip -1 -c \"$1\" | base64; \
         echo '@@@GZ64END'; else cat \"$1\"; fi; }\n\
         step() { name=$1; shift; t0=$(cut -d' ' -f1 /proc/uptime); echo \"@@@BEGIN $name\"; \
         \"$@\" >/tmp/o 2>/tmp/e; rc=$?; t1=$(cut -d' ' -f1 /proc/uptime); \
         echo '@@@OUT'; emit /tmp/o; echo '@@@ERR'; emit /tmp/e; echo \"@@@END $name $rc\"; \
         echo \"@@@TIME $name $t0 $t1\"; }\n",
    );
    // One perf event held open for the whole script: the kernel then
    // patches its perf static keys once, not at every profile's first and
    // last event, which multi-threaded TCG sometimes gets wrong ("Oops:
    // int3", guest/README.md).
    script.push_str("numalab run --counters=task-clock -- sleep 2147483647 >/dev/null 2>&1 &\n");
    for (name, cmd) in steps {
        script.push_str(&format!(
            "step {name} sh -c '{}'\n",
            cmd.replace('\'', "'\\''")
        ));
    }
    // A folder of its own per boot: guests of one machine and kernel boot
    // side by side (start_guests), and a shared script would boot one
    // guest with another's steps.
    static BOOTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "numalab-guest-test-{machine}-{kernel_version}-{}-{}-{}",
        options.join("").replace(['-', ' '], ""),
        std::process::id(),
        BOOTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let script_path = dir.join("script.sh");
    std::fs::write(&script_path, script).unwrap();
    let started = std::time::Instant::now();
    let out = Command::new("bash")
        .arg(root.join("guest/boot.sh"))
        .args([
            "--machine",
            machine,
            "--kernel",
            kernel_version,
            "--timeout",
            // A safety net, not a target: the main Quartet boot of
            // guest_experiments took 828 s on an idle 2-core host (its
            // stripes steps alone 230 s, see the lane notes).
            "1500",
        ])
        .args(options)
        .arg("--file")
        .arg(env!("CARGO_BIN_EXE_numalab"))
        .arg("--file")
        .arg(preload_library())
        .arg("--file")
        .arg(profile_truth_program())
        .arg("--file")
        .arg(truth_program())
        .arg("--file")
        .arg(stripes_program())
        .arg("--file")
        .arg(small_nodes_program())
        .arg("--file")
        .arg(thread_tree_program())
        // numalab loads OpenBLAS when `blas` runs (docs/blas.md), not at
        // start: ldd of the binary does not name it.
        .args(["--lib", "libopenblas.so.0"])
        .args(
            files
                .iter()
                .flat_map(|f| [std::ffi::OsStr::new("--file"), f.as_os_str()]),
        )
        .arg("--script")
        .arg(&script_path)
        .output()
        .expect("run guest/boot.sh");
    let console = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    std::fs::remove_dir_all(&dir).ok();
    // NUMALAB_GUEST_CONSOLES=DIR keeps every guest's console (each step's
    // output and its @@@TIME line) for a look at where the lane's time goes.
    if let Some(keep) = std::env::var_os("NUMALAB_GUEST_CONSOLES") {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let keep = PathBuf::from(keep);
        if std::fs::create_dir_all(&keep).is_ok() {
            let _ = std::fs::write(keep.join(format!("{name}.console")), &console);
        }
    }
    // Where a guest's time goes: the whole boot and its slowest steps, by
    // the guest's clock; the lane runner prints these notes after the lane.
    // boot.sh's last line names the host CPU time the guest took.
    let stderr = String::from_utf8_lossy(&out.stderr);
    let cpu = stderr
        .lines()
        .rev()
        .find_map(|l| l.strip_suffix(" CPU-seconds")?.rsplit(' ').next())
        .map_or(String::new(), |s| format!(" ({s} CPU-seconds)"));
    // How long its last boot took to reach the script: what --start-timeout
    // (a hung boot is stopped and booted again) must stay well above.
    let to_script = stderr
        .lines()
        .rev()
        .find_map(|l| l.split("script started after ").nth(1)?.split(' ').next())
        .map_or(String::new(), |s| format!(", script started after {s}"));
    numalab_testkit::note(&format!(
        "guest {machine} {kernel_version} {}: {:.0} s{cpu}{to_script}, slowest steps: {}",
        options.join(" "),
        started.elapsed().as_secs_f64(),
        slowest_steps(&console, 8)
    ));
    assert!(
        out.status.success(),
        "guest {machine} failed ({}): {}\nconsole tail:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr),
        tail(&console, 80)
    );
    Guest {
        steps: parse_steps(&console),
        console,
    }
}

/// The `n` slowest steps of a console, "name 12.3 s" each.
fn slowest_steps(console: &str, n: usize) -> String {
    let mut times: Vec<(f64, &str)> = console
        .lines()
        .filter_map(|l| {
            let mut w = l.strip_prefix("@@@TIME ")?.split(' ');
            let (name, t0, t1) = (w.next()?, w.next()?, w.next()?);
            Some((t1.parse::<f64>().ok()? - t0.parse::<f64>().ok()?, name))
        })
        .collect();
    let total: f64 = times.iter().map(|t| t.0).sum();
    times.sort_by(|a, b| b.0.total_cmp(&a.0));
    let top: Vec<String> = times
        .iter()
        .take(n)
        .map(|(t, name)| format!("{name} {t:.1} s"))
        .collect();
    format!(
        "{} (all {} steps: {total:.0} s)",
        top.join(", "),
        times.len()
    )
}

fn parse_steps(console: &str) -> HashMap<String, Step> {
    let mut steps = HashMap::new();
    let mut cur: Option<(String, String, String, u8)> = None; // name, out, err, section
                                                              // The base64 lines of a gzipped output (see `emit` in the script).
    let mut packed: Option<String> = None;
    for line in console.lines() {
        if let Some(b64) = packed.as_mut() {
            if line == "@@@GZ64END" {
                let text = unpack(b64);
                packed = None;
                if let Some(c) = cur.as_mut() {
                    let to = if c.3 == 1 { &mut c.1 } else { &mut c.2 };
                    to.push_str(&text);
                    if !text.is_empty() && !text.ends_with('\n') {
                        to.push('\n');
                    }
                }
            } else if line
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b))
            {
                // (A kernel line in the middle is not base64: skipped.)
                b64.push_str(line);
            }
            continue;
        }
        if line == "@@@GZ64" {
            packed = Some(String::new());
        } else if let Some(name) = line.strip_prefix("@@@BEGIN ") {
            cur = Some((name.trim().to_string(), String::new(), String::new(), 0));
        } else if line == "@@@OUT" {
            if let Some(c) = cur.as_mut() {
                c.3 = 1;
            }
        } else if line == "@@@ERR" {
            if let Some(c) = cur.as_mut() {
                c.3 = 2;
            }
        } else if let Some(rest) = line.strip_prefix("@@@END ") {
            if let Some((name, out, err, _)) = cur.take() {
                let rc = rest
                    .rsplit(' ')
                    .next()
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(-1);
                steps.insert(name, Step { out, err, rc });
            }
        } else if let Some(c) = cur.as_mut() {
            match c.3 {
                1 => {
                    c.1.push_str(line);
                    c.1.push('\n');
                }
                2 => {
                    c.2.push_str(line);
                    c.2.push('\n');
                }
                _ => {}
            }
        }
    }
    steps
}

/// The text of a gzipped, base64 output; what cannot be decoded says so
/// (a test then fails on it, with the reason).
fn unpack(b64: &str) -> String {
    use std::io::Read;
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut bytes = Vec::with_capacity(b64.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in b64.bytes().take_while(|&c| c != b'=') {
        let Some(v) = value(c) else {
            return format!("(guest output not base64: byte {c})");
        };
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            bytes.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    let mut text = Vec::new();
    match flate2::read::GzDecoder::new(&bytes[..]).read_to_end(&mut text) {
        Ok(_) => String::from_utf8_lossy(&text).replace('\r', ""),
        Err(e) => format!("(guest output not gzip: {e})"),
    }
}

/// (node, pages) of a `place --json` result, sorted by node.
pub fn nodes_of(v: &Value) -> Vec<(u32, u64)> {
    let mut out: Vec<(u32, u64)> = v["pages_by_node"]
        .as_object()
        .expect("pages_by_node")
        .iter()
        .map(|(k, v)| (k.parse().unwrap(), v.as_u64().unwrap()))
        .collect();
    out.sort();
    out
}

/// Asserts a guest step's one-line `numalab: ...` error containing
/// `needle`, exit code `rc`.
pub fn one_line_error(s: &Step, rc: i32, needle: &str) {
    assert_one_line_error("guest step", s.rc, &s.err, rc, needle);
}

/// tests/programs/mpi_ranks.c built with Open MPI's mpicc into `dir`
/// (cluster/install.sh installs it; scripts/install-deps.sh --test runs
/// that).
pub fn mpi_ranks_program(dir: &Path) -> PathBuf {
    let out = dir.join("mpi_ranks");
    let src = repo_root().join("tests/programs/mpi_ranks.c");
    let st = std::process::Command::new("mpicc")
        .args(["-O2", "-Wall", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("mpicc (Open MPI: cluster/install.sh installs it, scripts/install-deps.sh --test runs that)");
    assert!(st.success(), "mpicc failed on {}", src.display());
    out
}

/// mpi_ranks's `rank R of N local L host H cpus C` lines, as (R, N, L, H,
/// C), by rank.
pub fn mpi_ranks_printed(out: &str) -> Vec<(u32, u32, u32, String, String)> {
    let mut v: Vec<_> = out
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() == 10 && w[0] == "rank").then(|| {
                (
                    w[1].parse().unwrap(),
                    w[3].parse().unwrap(),
                    w[5].parse().unwrap(),
                    w[7].to_string(),
                    w[9].to_string(),
                )
            })
        })
        .collect();
    v.sort();
    v
}
