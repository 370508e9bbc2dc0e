//! Work in a forked child: a risky piece of work (hwloc loading an
//! untrusted file, `machine`), so that a crash inside C code becomes an
//! answer instead of the death of numalab, or system calls that must come
//! from a process of their own (`migrate_pages` moving only the child's
//! pages, `experiments::migrate`). What the child writes on its standard
//! error comes back, as text or as the bytes of a result.
//!
//! The child is a copy of this process with one thread and a copy of every
//! lock: one that another thread held at the fork is never released there.
//! So the work may do anything only while this process has a single thread
//! ([`single_threaded`]: the command-line tool loads its machine before it
//! starts any thread; test harnesses run tests on threads, and callers skip
//! the trial there). Otherwise it must make only system calls into memory
//! prepared before the fork: no allocation, no lock, no buffered I/O (write
//! with [`write_stderr`]). That is the one contract of this module its
//! types cannot check; breaking it can hang the child, which the time limit
//! then ends.

use std::io::Read;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

/// The child's exit code when `work` panicked.
pub const PANICKED: i32 = 101;

/// Bytes of the child's standard error [`in_child`] keeps (the rest is read
/// and dropped).
pub const SAID_BYTES: usize = 64 << 10;

/// How a trial in a child ended.
#[derive(Debug)]
pub enum Trial {
    /// The child exited with `code`; `said` is what it wrote on stderr.
    Exited { code: i32, said: Vec<u8> },
    /// A signal ended the child (a crash: SIGSEGV, SIGBUS, SIGABRT...).
    Killed { signal: i32, said: Vec<u8> },
    /// The child was still running at the time limit and was killed.
    TimedOut,
    /// No child could be started (no pipe, no fork, or it could not be
    /// waited for).
    NotRun,
}

/// Whether this process has exactly one thread (from /proc/self/stat).
pub fn single_threaded() -> bool {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return false;
    };
    // Field 20 is num_threads; fields are counted after the command name,
    // which is in parentheses and may itself hold spaces.
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(17))
        .and_then(|n| n.parse::<u64>().ok())
        == Some(1)
}

/// Runs `work` in a forked child whose standard error goes to a pipe, and
/// reports how the child ended and the first `keep` bytes it wrote there;
/// past `limit` the child is killed. `work` returns the child's exit code
/// and must keep to the module's contract (anything in a single-threaded
/// process, else system calls into prepared memory only); the child exits
/// straight after it, without running destructors or atexit handlers.
pub fn in_child(work: impl FnOnce() -> i32, limit: Duration, keep: usize) -> Trial {
    let Ok((reader, writer)) = super::process::pipe() else {
        return Trial::NotRun;
    };
    // SAFETY: the caller guarantees a single-threaded process, so the child
    // starts with no lock held by a thread that does not exist there.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Trial::NotRun;
    }
    if pid == 0 {
        // SAFETY: in the child: dup2 onto fd 2 (which drops O_CLOEXEC for
        // the copy) and _exit are async-signal-safe and take plain fds.
        unsafe {
            libc::dup2(writer.as_raw_fd(), 2);
        }
        drop(reader);
        drop(writer);
        let code = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).unwrap_or(PANICKED);
        // SAFETY: ends the child at once: no destructor, atexit handler or
        // stdio flush of the parent's state runs twice.
        unsafe { libc::_exit(code) }
    }
    drop(writer);
    let (said, timed_out) = read_until(reader, Instant::now() + limit, keep);
    if timed_out {
        // SAFETY: `pid` is our child, not yet reaped, so the id is still ours.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    let status = super::process::wait_raw(pid);
    match status {
        _ if timed_out => Trial::TimedOut,
        Ok(s) if libc::WIFSIGNALED(s) => Trial::Killed {
            signal: libc::WTERMSIG(s),
            said,
        },
        Ok(s) => Trial::Exited {
            code: libc::WEXITSTATUS(s),
            said,
        },
        Err(_) => Trial::NotRun,
    }
}

/// Writes all of `bytes` to this process's standard error with write(2)
/// alone: no allocation, no lock, so a forked child of a threaded process
/// may call it. False when the descriptor refused them.
pub fn write_stderr(mut bytes: &[u8]) -> bool {
    while !bytes.is_empty() {
        // SAFETY: `bytes` is readable for its length; fd 2 is a number.
        let n = unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        if n <= 0 {
            return false;
        }
        bytes = &bytes[n as usize..];
    }
    true
}

/// Reads the pipe to its end or to the deadline; returns what was read (at
/// most `keep` bytes) and whether time ran out.
fn read_until(mut file: std::fs::File, deadline: Instant, keep: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (kept, true);
        }
        let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
        match super::process::wait_readable(file.as_fd(), ms) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => return (kept, false),
        }
        match file.read(&mut buf) {
            Ok(0) => return (kept, false),
            Ok(n) => {
                let room = keep.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return (kept, false),
        }
    }
}

/// A signal's name ("SIGSEGV"), or its number.
pub fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {signal}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // These children do nothing but write, raise or exit, all
    // async-signal-safe, so forking from the multi-threaded test harness
    // cannot deadlock them.

    #[test]
    fn a_crash_in_the_child_is_reported_with_its_signal() {
        let trial = in_child(
            || {
                write_stderr(b"about to crash\n");
                // SAFETY: raises a signal whose default action ends the
                // process (std's own SIGSEGV handler, for stack overflows,
                // is put aside: it returns when no instruction faulted).
                unsafe {
                    libc::signal(libc::SIGSEGV, libc::SIG_DFL);
                    libc::raise(libc::SIGSEGV);
                }
                0
            },
            Duration::from_secs(20),
            SAID_BYTES,
        );
        match trial {
            Trial::Killed { signal, said } => {
                assert_eq!(signal_name(signal), "SIGSEGV");
                assert_eq!(said, b"about to crash\n");
            }
            other => panic!("expected a SIGSEGV, got {other:?}"),
        }
    }

    #[test]
    fn the_exit_code_of_the_child_comes_back() {
        match in_child(|| 7, Duration::from_secs(20), SAID_BYTES) {
            Trial::Exited { code, said } => {
                assert_eq!(code, 7);
                assert_eq!(said, b"");
            }
            other => panic!("expected exit 7, got {other:?}"),
        }
    }

    #[test]
    fn a_child_past_its_time_is_killed() {
        let trial = in_child(
            || {
                // SAFETY: pause only waits for a signal.
                unsafe {
                    libc::pause();
                }
                0
            },
            Duration::from_millis(100),
            SAID_BYTES,
        );
        assert!(matches!(trial, Trial::TimedOut), "{trial:?}");
    }

    /// A result written as bytes comes back whole, binary and all; past
    /// `keep` the rest is read and dropped.
    #[test]
    fn the_bytes_a_child_writes_come_back_up_to_keep() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
        let run = |keep: usize| match in_child(
            || i32::from(!write_stderr(&bytes)),
            Duration::from_secs(20),
            keep,
        ) {
            Trial::Exited { code: 0, said } => said,
            other => panic!("expected exit 0, got {other:?}"),
        };
        assert_eq!(run(100_000), bytes);
        assert_eq!(run(1000), bytes[..1000]);
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGABRT), "SIGABRT");
        assert_eq!(signal_name(1000), "signal 1000");
    }
}
