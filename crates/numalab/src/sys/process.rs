//! Descriptors and clocks of processes and threads.

use super::numa::{set_affinity_mask, set_mempolicy_mask, KernelMask, Mode};
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};

/// A pidfd for `pid`, readable once the process exits (Linux 5.3 and
/// later); `None` where the kernel has none or refuses.
pub fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative return is a descriptor this process now owns.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// CPU time of the calling thread, in seconds (`CLOCK_THREAD_CPUTIME_ID`):
/// what it ran, not the time it waited descheduled.
pub fn thread_cpu_seconds() -> Option<f64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then_some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}

/// Clears `O_NONBLOCK` on an open descriptor (one opened non-blocking so
/// that opening a FIFO could not wait, then written blocking).
pub fn set_blocking(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let fd = fd.as_raw_fd();
    // SAFETY: fcntl on a descriptor the caller keeps open for the call.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `sig`'s disposition is "ignore" (SIG_IGN), as a process started
/// in the background by a shell without job control, or by nohup-like
/// wrappers, inherits it for SIGINT, SIGQUIT or SIGHUP through exec.
pub fn signal_ignored(sig: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the current
    // disposition into a local struct.
    unsafe {
        let mut now: libc::sigaction = std::mem::zeroed();
        libc::sigaction(sig, std::ptr::null(), &mut now) == 0 && now.sa_sigaction == libc::SIG_IGN
    }
}

/// Whether `fd` is an open descriptor of this process (fcntl F_GETFD,
/// which changes nothing).
pub fn descriptor_is_open(fd: i32) -> bool {
    // SAFETY: F_GETFD only reads the descriptor's flags; a closed or
    // invalid number is EBADF.
    fd >= 0 && unsafe { libc::fcntl(fd, libc::F_GETFD) } >= 0
}

/// Writes all of `bytes` to this process's open descriptor `fd`, which
/// stays open (standard output given as /dev/stdout, say).
pub fn write_to_descriptor(fd: i32, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    if !descriptor_is_open(fd) {
        return Err(std::io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: `fd` is open; ManuallyDrop keeps it open after the write,
    // so its owner (the standard streams, say) still has it.
    let mut f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    f.write_all(bytes)?;
    f.flush()
}

/// How long thread `tid` of this process has waited, ready to run, for a
/// CPU that another task held: the second field of
/// `/proc/self/task/TID/schedstat`, in nanoseconds. `None` where the kernel
/// keeps no such account (no `CONFIG_SCHED_INFO`) or the thread is gone.
pub fn run_delay_ns(tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_ascii_whitespace().nth(1)?.parse().ok()
}

/// The kernel's id of the calling thread (`gettid`).
pub fn current_tid() -> i32 {
    // SAFETY: gettid has no preconditions and cannot fail.
    unsafe { libc::gettid() }
}

/// The effective user id numalab runs with.
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// The effective group id numalab runs with.
pub fn effective_gid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

/// Puts back the default action of `sig` (SIGPIPE at start-up: a reader
/// that goes away ends numalab quietly); false when refused. No handler of
/// ours is installed, so nothing runs in signal context.
pub fn default_signal_action(sig: nix::sys::signal::Signal) -> bool {
    use nix::sys::signal::{signal, SigHandler};
    // SAFETY: SIG_DFL installs no function, only the kernel's default.
    unsafe { signal(sig, SigHandler::SigDfl) }.is_ok()
}

/// Whether numalab runs with effective user id 0.
pub fn effective_root() -> bool {
    effective_uid() == 0
}

/// Takes an exclusive `flock` on an open file, waiting for it (a signal
/// does not end the wait); released when the file closes.
pub fn lock_exclusive(f: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor `f` keeps open for the call.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// `access(path, W_OK)`: whether this process may write `path`, by its
/// real ids, without opening it.
pub fn may_write(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: access() reads a NUL-terminated path that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the calling thread's timer slack (`PR_SET_TIMERSLACK`): its sleeps
/// end within about `ns` of their deadline instead of the default 50 µs.
pub fn set_timer_slack(ns: u64) -> bool {
    // SAFETY: prctl with integer arguments; affects only this thread.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) == 0 }
}

/// Waits up to `ms` milliseconds for `fd` to be readable (or at its end):
/// `Ok(true)` when it is, `Ok(false)` when the time ran out; a signal that
/// ends the wait early is an error of kind `Interrupted`.
pub fn wait_readable(fd: BorrowedFd<'_>, ms: i32) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    let mut p = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r > 0)
}

/// One read(2) of `fd` into `buf` (a perf event's counts come whole in
/// one read): the bytes read.
pub fn read_once(fd: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<usize> {
    use std::os::fd::AsRawFd;
    // SAFETY: reads at most `buf.len()` bytes into `buf`.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| std::io::Error::last_os_error())
}

/// This process's limit on open descriptors (`RLIMIT_NOFILE`): (soft, hard).
pub fn descriptor_limit() -> Option<(u64, u64)> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } == 0)
        .then_some((l.rlim_cur, l.rlim_max))
}

/// Sets this process's limit on open descriptors; false when refused.
pub fn set_descriptor_limit(soft: u64, hard: u64) -> bool {
    let l = libc::rlimit {
        rlim_cur: soft as libc::rlim_t,
        rlim_max: hard as libc::rlim_t,
    };
    // SAFETY: a valid pointer to an initialised rlimit.
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &l) == 0 }
}

/// Makes a FIFO (named pipe) at `path` with permissions `mode`.
pub fn make_fifo(path: &std::path::Path, mode: u32) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::mkfifo(c.as_ptr(), mode as libc::mode_t) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> std::io::Result<(std::fs::File, std::fs::File)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid out-array of two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: two descriptors the kernel just gave us, owned by no one else.
    Ok(unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    })
}

/// What the kernel accounted to a reaped child, from `wait4(2)`'s
/// rusage: for a process, its threads' totals and those of the children it
/// waited for. Free to read, unlike perf events, which make every context
/// switch of the counted tasks dearer (docs/profile.md, "Overhead").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ResourceUsage {
    pub user_ns: u64,
    pub system_ns: u64,
    pub minor_faults: u64,
    pub major_faults: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
    /// The largest resident set of the process or of one child it waited
    /// for, in KiB.
    pub max_rss_kib: u64,
}

impl ResourceUsage {
    fn from_rusage(r: &libc::rusage) -> Self {
        let ns = |t: libc::timeval| {
            t.tv_sec.max(0) as u64 * 1_000_000_000 + t.tv_usec.max(0) as u64 * 1000
        };
        let n = |v: libc::c_long| v.max(0) as u64;
        Self {
            user_ns: ns(r.ru_utime),
            system_ns: ns(r.ru_stime),
            minor_faults: n(r.ru_minflt),
            major_faults: n(r.ru_majflt),
            voluntary_switches: n(r.ru_nvcsw),
            involuntary_switches: n(r.ru_nivcsw),
            max_rss_kib: n(r.ru_maxrss),
        }
    }
}

/// `wait4(pid, options)` until it is not interrupted: the task, its raw
/// status and its usage, or `None` on ECHILD when `pid` is -1.
fn wait4_raw(pid: i32, options: i32) -> std::io::Result<Option<(i32, i32, ResourceUsage)>> {
    loop {
        let mut status = 0;
        // SAFETY: an all-zero rusage is a valid value of the plain C struct.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `status` and `usage` are valid out-pointers.
        let got = unsafe { libc::wait4(pid, &mut status, options, &mut usage) };
        if got > 0 {
            return Ok(Some((got, status, ResourceUsage::from_rusage(&usage))));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) if pid == -1 => return Ok(None),
            _ => return Err(e),
        }
    }
}

/// Waits for child `pid` to end; its raw wait status (a real-time signal
/// included, which nix's `WaitStatus` cannot hold).
pub fn wait_raw(pid: i32) -> std::io::Result<i32> {
    wait_raw_usage(pid).map(|(status, _)| status)
}

/// [`wait_raw`] with what the kernel accounted to the child (meaningful
/// once it ended, not for a stop).
pub fn wait_raw_usage(pid: i32) -> std::io::Result<(i32, ResourceUsage)> {
    match wait4_raw(pid, 0)? {
        Some((_, status, usage)) => Ok((status, usage)),
        None => Err(std::io::Error::from_raw_os_error(libc::ECHILD)),
    }
}

/// `waitpid(-1, __WALL)`: the task of this process's (or its tracees')
/// that changed state, its raw status and its usage (that of a task that
/// ended), or `None` when none is left.
pub fn wait_any_raw() -> std::io::Result<Option<(i32, i32, ResourceUsage)>> {
    wait4_raw(-1, libc::__WALL)
}

/// `PTRACE_CONT` of a stopped tracee, delivering signal `sig` (0: none;
/// real-time signals too).
pub fn ptrace_continue(pid: i32, sig: i32) {
    // SAFETY: resumes a stopped tracee; no memory is passed.
    unsafe { libc::ptrace(libc::PTRACE_CONT, pid, 0, sig as libc::c_ulong) };
}

/// What a launched program's child does between fork and exec, in this
/// order, with async-signal-safe calls on values built before the fork.
pub struct ExecSetup {
    /// The signal mask the program starts with.
    pub signal_mask: nix::sys::signal::SigSet,
    /// Dies by SIGKILL with the thread that spawned it, whose process has
    /// this pid (checked after the prctl: it may be gone already).
    pub end_with_parent: Option<libc::pid_t>,
    /// CPUs to bind the program to.
    pub cpus: Option<KernelMask>,
    /// The program's memory policy.
    pub policy: Option<(Mode, KernelMask)>,
    /// Asks to be traced by the parent (`PTRACE_TRACEME`).
    pub trace: bool,
    /// Waits at an exec gate (`wait_at_gate`'s descriptors).
    pub gate: Option<[i32; 3]>,
}

impl ExecSetup {
    /// Has `cmd` run the setup in its child before exec.
    pub fn install(self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the child between fork and exec and
        // makes only async-signal-safe calls: sigprocmask, prctl, getppid,
        // two raw system calls on masks built before the fork,
        // ptrace(PTRACE_TRACEME) and the gate's reads and writes. It
        // allocates nothing and touches no lock.
        unsafe {
            cmd.pre_exec(move || {
                use nix::sys::signal::{sigprocmask, SigmaskHow};
                sigprocmask(SigmaskHow::SIG_SETMASK, Some(&self.signal_mask), None)?;
                if let Some(parent) = self.end_with_parent {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // Dead already, between the fork and the prctl.
                    if libc::getppid() != parent {
                        libc::_exit(128 + libc::SIGKILL);
                    }
                }
                if let Some(c) = &self.cpus {
                    set_affinity_mask(0, c)?;
                }
                if let Some((mode, nodes)) = &self.policy {
                    set_mempolicy_mask(*mode, nodes)?;
                }
                if self.trace {
                    nix::sys::ptrace::traceme()?;
                }
                if let Some(fds) = self.gate {
                    wait_at_gate(fds)?;
                }
                Ok(())
            });
        }
    }
}

/// The child's side of `placement::launch`'s exec gate, between fork and
/// exec: only async-signal-safe calls (getpid, write, close, read). `pid_w`
/// takes the child's pid; a byte (or the end) on `go_r` lets it go on.
fn wait_at_gate([pid_w, go_r, go_w]: [i32; 3]) -> std::io::Result<()> {
    // SAFETY: raw system calls on descriptors inherited from the parent,
    // with buffers on this stack.
    unsafe {
        libc::close(go_w);
        let pid = libc::getpid().to_ne_bytes();
        loop {
            let n = libc::write(pid_w, pid.as_ptr().cast(), pid.len());
            if n == pid.len() as isize {
                break;
            }
            if n >= 0 {
                // A pipe takes 4 bytes whole or not at all.
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            if *libc::__errno_location() != libc::EINTR {
                return Err(std::io::Error::last_os_error());
            }
        }
        let mut b = 0u8;
        loop {
            let n = libc::read(go_r, (&mut b as *mut u8).cast(), 1);
            if n >= 0 || *libc::__errno_location() != libc::EINTR {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_delay_is_counted_per_thread_and_never_goes_back() {
        let tid = current_tid();
        let a = run_delay_ns(tid).expect("this kernel keeps schedstat");
        // Yielding lets another runnable task in, if there is one; the
        // account may stay put, but never shrinks.
        for _ in 0..100 {
            std::thread::yield_now();
        }
        assert!(run_delay_ns(tid).unwrap() >= a);
        // A thread of another process, or none: no account.
        assert_eq!(run_delay_ns(i32::MAX), None);
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let t0 = thread_cpu_seconds().unwrap();
        let mut x = 0u64;
        while thread_cpu_seconds().unwrap() - t0 < 0.01 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        assert!(thread_cpu_seconds().unwrap() >= t0 + 0.01);
    }

    #[test]
    fn the_descriptor_limit_is_read_and_set_back() {
        let (soft, hard) = descriptor_limit().unwrap();
        assert!(soft <= hard);
        assert!(set_descriptor_limit(soft, hard));
        assert_eq!(descriptor_limit(), Some((soft, hard)));
        assert!(current_tid() > 0);
    }

    #[test]
    fn a_fifo_is_made_and_a_silent_one_waited_for() {
        let p = std::env::temp_dir().join(format!("numalab-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        make_fifo(&p, 0o600).unwrap();
        assert!(make_fifo(&p, 0o600).is_err(), "it exists");
        use std::os::fd::AsFd;
        use std::os::unix::fs::OpenOptionsExt;
        let r = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&p)
            .unwrap();
        let mut w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        assert!(!wait_readable(r.as_fd(), 10).unwrap());
        std::io::Write::write_all(&mut w, b"abc").unwrap();
        assert!(wait_readable(r.as_fd(), 1000).unwrap());
        let mut buf = [0u8; 8];
        assert_eq!(read_once(r.as_fd(), &mut buf).unwrap(), 3);
        assert_eq!(&buf[..3], b"abc");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_pidfd_of_this_process_and_none_of_no_process() {
        assert!(pidfd_open(std::process::id() as i32).is_some());
        assert!(pidfd_open(-1).is_none());
    }
}
