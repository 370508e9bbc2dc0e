//! Descriptors and clocks of processes and threads.

use std::os::fd::{FromRawFd, OwnedFd};

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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn a_pidfd_of_this_process_and_none_of_no_process() {
        assert!(pidfd_open(std::process::id() as i32).is_some());
        assert!(pidfd_open(-1).is_none());
    }
}
