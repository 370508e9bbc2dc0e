//! Hostile `verify --pid`: numbers that are not processes, kernel threads
//! (no user memory), zombies (exited, memory gone), pid 1, and processes
//! whose memory this user may not read. Each says what the process is, or
//! which file needs which rights, in one line.

use crate::common;

use common::hostile::{check_all, Case};
use common::{assert_one_line_error, Run};
use std::process::{Child, Command};
use std::time::Duration;

/// PF_KTHREAD of the kernel's task flags (field 9 of /proc/PID/stat).
const PF_KTHREAD: u64 = 0x0020_0000;

/// (command, state, flags) of /proc/PID/stat.
fn stat_of(pid: i32) -> Option<(String, char, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let comm = s.get(s.find('(')? + 1..s.rfind(')')?)?.to_string();
    let mut rest = s.get(s.rfind(')')? + 1..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    let flags = rest.nth(5)?.parse().ok()?;
    Some((comm, state, flags))
}

/// Up to two kernel threads this process can see: kthreadd and another.
fn kernel_threads() -> Vec<(i32, String)> {
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    pids.sort_unstable();
    pids.into_iter()
        .filter_map(|p| {
            let (comm, _, flags) = stat_of(p)?;
            (flags & PF_KTHREAD != 0).then_some((p, comm))
        })
        .take(2)
        .collect()
}

/// A child that has exited and is not reaped until dropped.
struct Zombie(Child);

impl Zombie {
    fn new() -> Self {
        // Reaped by `drop` whatever happens next.
        let zombie = Self(Command::new("true").spawn().expect("start true"));
        let pid = zombie.0.id() as i32;
        let became = (0..1000).any(|_| {
            std::thread::sleep(Duration::from_millis(5));
            stat_of(pid).is_some_and(|s| s.1 == 'Z')
        });
        assert!(became, "pid {pid} never became a zombie");
        zombie
    }

    fn pid(&self) -> String {
        self.0.id().to_string()
    }
}

impl Drop for Zombie {
    fn drop(&mut self) {
        let _ = self.0.wait();
    }
}

#[test]
fn pids_that_are_not_user_processes() {
    let zombie = Zombie::new();
    let z = zombie.pid();
    let mut cases = vec![
        Case::new("pid 0", &["verify", "--pid", "0"])
            .code(2)
            .says("'0' is not a process id"),
        Case::new("negative pid", &["verify", "--pid=-1"])
            .code(2)
            .says("not a process id"),
        Case::new("pid beyond 32 bits", &["verify", "--pid", "99999999999"])
            .code(2)
            .says("not a process id"),
        Case::new("empty pid", &["verify", "--pid="])
            .code(2)
            .says("not a process id"),
        Case::new("no such process", &["verify", "--pid", "2147483646"])
            .code(2)
            .says("no process 2147483646"),
        Case::new("zombie", &["verify", "--pid", &z])
            .code(1)
            .says(&format!("pid {z} (true) is a zombie"))
            .says("has exited and holds no memory")
            .says(&format!("its parent, pid {}", std::process::id())),
        Case::new("zombie as JSON", &["verify", "--pid", &z, "--json"])
            .code(1)
            .says("is a zombie"),
    ];
    let kthreads = kernel_threads();
    if kthreads.is_empty() {
        eprintln!("hostile pids: no kernel thread is visible here (a pid namespace without them): those cases are skipped");
    }
    for (pid, comm) in &kthreads {
        let p = pid.to_string();
        cases.push(
            Case::new(format!("kernel thread {comm}"), &["verify", "--pid", &p])
                .code(1)
                .says(&format!(
                    "pid {p} ({comm}) is a kernel thread: it has no user memory to verify"
                )),
        );
        cases.push(
            Case::new(
                format!("kernel thread {comm} as JSON, all mappings"),
                &["verify", "--pid", &p, "--json", "--all"],
            )
            .code(1)
            .says("is a kernel thread"),
        );
    }
    check_all("pids", cases);
    drop(zombie);
}

#[test]
fn pid_1_as_root_is_shown_or_refused_for_ptrace_rights() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        numalab_testkit::skip("pid 1 as root: not running as root");
        return;
    }
    let r = Run::new(&["verify", "--pid", "1"]).run();
    if r.rc == 0 {
        assert!(r.out.starts_with("process 1 ("), "{}", r.out);
        return;
    }
    // A container or security module may deny even root: then say that,
    // never that root is needed.
    assert_one_line_error(
        "verify --pid 1 as root",
        r.rc,
        &r.err,
        1,
        "reading /proc/1/numa_maps was refused although numalab runs as root",
    );
    assert!(r.err.contains("ptrace rights over pid 1"), "{}", r.err);
    assert!(!r.err.contains("needs the same user or root"), "{}", r.err);
}

#[test]
fn another_users_memory_names_the_file_and_the_rights() {
    let as_nobody = [
        "setpriv",
        "--reuid=nobody",
        "--regid=nogroup",
        "--clear-groups",
    ];
    let probe = Run::new(&["--version"]).via(&as_nobody).run();
    if probe.rc != 0 {
        numalab_testkit::skip(format!(
            "another user's memory: cannot run numalab as nobody here ({})",
            probe.err.trim()
        ));
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        numalab_testkit::skip("another user's memory: this test process is not root's");
        return;
    }
    let me = std::process::id().to_string();
    let r = Run::new(&["verify", "--pid", &me]).via(&as_nobody).run();
    assert_one_line_error(
        "verify --pid (root's process) as nobody",
        r.rc,
        &r.err,
        1,
        &format!("reading /proc/{me}/numa_maps needs the same user or root (ptrace rights over pid {me})"),
    );
}
