//! The hostile-input harness: runs numalab as a careless or hostile user
//! would, each case under an address-space limit and a time limit, and checks
//! that it ends the way bad input must end.
//!
//! Every case must end with exit code 1 or 2 (or the one it names), exactly
//! one line `numalab: ...` on stderr, no "internal error" and no signal,
//! within its time limit, and with every input file it names byte-identical
//! afterwards. A runaway allocation hits the address-space limit and fails
//! the case instead of the machine.
//!
//! The cases live in `tests/hostile_*.rs`, one file per area; each calls
//! [`check_all`] with its table so one run lists every failing case.

use std::ffi::{OsStr, OsString};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Address space a hostile case may use: enough for numalab's threads, hwloc
/// and its small buffers, far below what a runaway plan or read reaches.
pub const ADDRESS_SPACE: u64 = 2 << 30;

/// CPU time a hostile case may take unless it says otherwise. CPU time, not
/// the wall clock: the guest lane runs beside the host tests and keeps the
/// CPUs busy, and a refusal that takes 9 s of a core alone took over 30 s
/// of the wall clock there. A case that waits without working (a hang) is
/// killed at [`HANG_FACTOR`] times its limit on the wall clock.
pub const TIME_LIMIT: Duration = Duration::from_secs(30);

/// A case still running after this many times its limit on the wall clock
/// is killed, whatever CPU time it used.
pub const HANG_FACTOR: u32 = 4;

/// One hostile run of numalab and what it must do.
pub struct Case {
    /// What is tried, for the failure list.
    pub name: String,
    pub args: Vec<OsString>,
    /// Standard input (empty when `None`).
    pub stdin: Option<Vec<u8>>,
    /// Exit codes accepted (default: 1 or 2).
    pub codes: Vec<i32>,
    /// Text the one stderr line must contain (case-insensitive).
    pub needles: Vec<String>,
    /// Files that must be byte-identical afterwards (missing ones must stay
    /// missing).
    pub inputs: Vec<PathBuf>,
    pub time_limit: Duration,
    pub address_space: u64,
    /// Where stdout goes: captured (default), closed, or a file.
    pub stdout: Stdout,
}

/// Where a case's standard output goes.
#[derive(Clone)]
pub enum Stdout {
    /// A pipe the harness reads.
    Captured,
    /// A file (e.g. `/dev/full`).
    File(PathBuf),
    /// No standard output at all (`>&-`).
    Closed,
}

impl Case {
    /// `numalab ARGS`, expected to end in exit code 1 or 2.
    pub fn new(name: impl Into<String>, args: &[&str]) -> Case {
        Case::os(name, args.iter().map(OsString::from).collect())
    }

    /// [`Case::new`] with arguments that need not be UTF-8.
    pub fn os(name: impl Into<String>, args: Vec<OsString>) -> Case {
        Case {
            name: name.into(),
            args,
            stdin: None,
            codes: vec![1, 2],
            needles: Vec::new(),
            inputs: Vec::new(),
            time_limit: TIME_LIMIT,
            address_space: ADDRESS_SPACE,
            stdout: Stdout::Captured,
        }
    }

    /// The stderr line must contain `needle` (case-insensitive).
    pub fn says(mut self, needle: &str) -> Case {
        self.needles.push(needle.to_string());
        self
    }

    /// Only exit code `code` is accepted.
    pub fn code(mut self, code: i32) -> Case {
        self.codes = vec![code];
        self
    }

    /// `path` must be byte-identical after the run.
    pub fn keeps(mut self, path: impl AsRef<Path>) -> Case {
        self.inputs.push(path.as_ref().to_path_buf());
        self
    }

    /// Standard input.
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Case {
        self.stdin = Some(input.into());
        self
    }

    /// Another time limit.
    pub fn within(mut self, limit: Duration) -> Case {
        self.time_limit = limit;
        self
    }

    /// Standard output somewhere else than a pipe.
    pub fn stdout(mut self, to: Stdout) -> Case {
        self.stdout = to;
        self
    }

    /// Runs the case; `Err` says what went wrong.
    pub fn check(&self) -> Result<(), String> {
        let before: Vec<Option<Vec<u8>>> =
            self.inputs.iter().map(|p| std::fs::read(p).ok()).collect();
        let ran = run_limited(self)?;
        let mut problems = Vec::new();
        if let Some(sig) = ran.signal {
            problems.push(format!("ended by signal {sig}"));
        }
        if ran.timed_out {
            problems.push(format!(
                "still running after {:.1} s of CPU and {:.0} s of wall time (killed; limit {:.0?} of CPU, {} times that of wall time)",
                ran.cpu_s, ran.wall_s, self.time_limit, HANG_FACTOR
            ));
        }
        if ran.signal.is_none() && !ran.timed_out && !self.codes.contains(&ran.code) {
            problems.push(format!(
                "exit code {} (want one of {:?})",
                ran.code, self.codes
            ));
        }
        let lines: Vec<&str> = ran.err.lines().collect();
        if lines.len() != 1 {
            problems.push(format!("{} lines on stderr", lines.len()));
        } else if !lines[0].starts_with("numalab: ") {
            problems.push("stderr does not start with 'numalab: '".to_string());
        }
        if ran.err.contains("internal error") || ran.err.contains("panicked") {
            problems.push("internal error".to_string());
        }
        let lower = ran.err.to_lowercase();
        for n in &self.needles {
            if !lower.contains(&n.to_lowercase()) {
                problems.push(format!("stderr lacks '{n}'"));
            }
        }
        for (p, was) in self.inputs.iter().zip(before) {
            if std::fs::read(p).ok() != was {
                problems.push(format!("{} changed", p.display()));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            let err: String = ran.err.chars().take(400).collect();
            Err(format!(
                "{}: {} [stderr: {}]",
                self.name,
                problems.join("; "),
                err.trim_end()
            ))
        }
    }
}

/// Runs every case (in parallel, a few at a time) and panics listing each
/// one that failed; prints how many ran.
pub fn check_all(area: &str, cases: Vec<Case>) {
    let total = cases.len();
    let queue = std::sync::Mutex::new(cases.into_iter().collect::<Vec<_>>());
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let Some(case) = queue.lock().unwrap().pop() else {
                    return;
                };
                if let Err(e) = case.check() {
                    failures.lock().unwrap().push(e);
                }
            });
        }
    });
    let mut failures = failures.into_inner().unwrap();
    failures.sort();
    eprintln!("hostile {area}: {total} cases, {} failed", failures.len());
    assert!(
        failures.is_empty(),
        "hostile {area}: {} of {total} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// What a limited run did.
struct Limited {
    code: i32,
    signal: Option<i32>,
    timed_out: bool,
    /// CPU time (user and system, all threads) and wall time it ran.
    cpu_s: f64,
    wall_s: f64,
    err: String,
}

/// CPU time of process `pid` so far, all its threads (utime + stime of
/// /proc/PID/stat), in seconds; 0 once it is gone.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces: fields count from its ')'.
    let Some(rest) = stat.rsplit_once(')').map(|x| x.1) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    let ticks: f64 = [11, 12]
        .iter()
        .filter_map(|&i| f.get(i)?.parse::<f64>().ok())
        .sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    ticks / hz
}

/// Runs the case under `prlimit --as` (util-linux, which execs numalab in
/// its own process), killing it at its CPU-time limit or, hung, at
/// [`HANG_FACTOR`] times that of wall time.
fn run_limited(case: &Case) -> Result<Limited, String> {
    use std::os::unix::process::ExitStatusExt;
    let bin = env!("CARGO_BIN_EXE_numalab");
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--as={}", case.address_space))
        .arg("--")
        .arg(bin)
        .args(&case.args)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped());
    match &case.stdout {
        Stdout::Captured => {
            cmd.stdout(Stdio::piped());
        }
        Stdout::File(p) => {
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| format!("{}: open {}: {e}", case.name, p.display()))?;
            cmd.stdout(f);
        }
        Stdout::Closed => {
            // `>&-` through the shell: Command cannot leave fd 1 closed.
            let mut sh = Command::new("sh");
            let mut line = vec![OsString::from("exec \"$0\" \"$@\" >&-")];
            line.push(OsString::from("prlimit"));
            line.push(OsString::from(format!("--as={}", case.address_space)));
            line.push(OsString::from("--"));
            line.push(OsString::from(bin));
            line.extend(case.args.iter().cloned());
            sh.arg("-c")
                .args(&line)
                .stdin(Stdio::piped())
                .stderr(Stdio::piped());
            cmd = sh;
        }
    }
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{}: cannot start prlimit: {e}", case.name))?;
    let mut stdin = child.stdin.take().expect("stdin piped");
    let input = case.stdin.clone().unwrap_or_default();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                // Bounded: a runaway writer must not fill the test's memory.
                let _ = r.by_ref().take(1 << 20).read_to_end(&mut buf);
                let _ = std::io::copy(&mut r, &mut std::io::sink());
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|o| Box::new(o) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|e| Box::new(e) as Box<dyn Read + Send>),
    );
    let mut timed_out = false;
    let mut cpu_s = 0.0;
    let limit = case.time_limit.as_secs_f64();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        cpu_s = cpu_seconds(child.id()).max(cpu_s);
        if cpu_s > limit || start.elapsed() > case.time_limit * HANG_FACTOR {
            timed_out = true;
            let _ = child.kill();
            break child.wait().map_err(|e| e.to_string())?;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let wall_s = start.elapsed().as_secs_f64();
    writer.join().ok();
    let _ = out.join();
    let err = err.join().unwrap_or_default();
    Ok(Limited {
        code: status.code().unwrap_or(-1),
        signal: if timed_out { None } else { status.signal() },
        timed_out,
        cpu_s,
        wall_s,
        err: String::from_utf8_lossy(&err).into_owned(),
    })
}

/// A file in `dir` holding `bytes`, for cases that read a file.
pub fn file(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A path as an argument.
pub fn arg(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `OsStr` arguments from text.
pub fn os_args(args: &[&str]) -> Vec<OsString> {
    args.iter().map(|a| OsStr::new(a).to_os_string()).collect()
}
