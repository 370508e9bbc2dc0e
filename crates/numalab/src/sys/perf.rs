//! perf events as owned descriptors.

use numalab_profile_abi::perf::{PerfEventAttr, PERF_FLAG_FD_CLOEXEC};
use std::os::fd::{FromRawFd, OwnedFd};

/// Opens the event `attr` for thread `tid` (0: the caller) on any CPU; the
/// descriptor closes when dropped. Err: the errno.
pub fn open_event(attr: &PerfEventAttr, tid: u32) -> Result<OwnedFd, i32> {
    open_event_on(attr, tid as i32, -1)
}

/// Opens the event `attr` for process `pid` (0: the caller, -1: every
/// process, as uncore PMUs need) on `cpu` (-1: any), in no group,
/// close-on-exec. Err: the errno.
pub fn open_event_on(attr: &PerfEventAttr, pid: i32, cpu: i32) -> Result<OwnedFd, i32> {
    // SAFETY: a valid attr of the size it says; no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL));
    }
    // SAFETY: a descriptor the kernel just gave us, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}
