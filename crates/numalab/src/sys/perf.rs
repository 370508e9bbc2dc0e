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

/// `PERF_TYPE_SOFTWARE`, and its `PERF_COUNT_SW_DUMMY`, an event that
/// counts nothing.
pub const TYPE_SOFTWARE: u32 = 1;
const COUNT_SW_DUMMY: u64 = 9;

/// Opens an event that counts nothing on the calling thread, disabled,
/// and returns it to hold. While any thread's perf event exists the kernel
/// keeps its context-switch hooks for them on; the first such event after
/// none holds the process that opens it while the kernel patches its code
/// and waits for every CPU, 5-25 ms on a virtual machine whose virtual
/// CPUs are not scheduled together (1 s after the last one closes, they
/// are off again). Held around a profiled launch, it makes that wait
/// numalab's, before the command starts, rather than the command's (its
/// counters, opened before its exec, and the library's watchpoints in each
/// of its processes would pay it). `None` where perf events are refused.
pub fn hold_task_switch_hooks() -> Option<OwnedFd> {
    let attr = PerfEventAttr {
        kind: TYPE_SOFTWARE,
        size: PerfEventAttr::SIZE,
        config: COUNT_SW_DUMMY,
        flags: numalab_profile_abi::perf::ATTR_DISABLED
            | numalab_profile_abi::perf::ATTR_EXCLUDE_KERNEL
            | numalab_profile_abi::perf::ATTR_EXCLUDE_HV,
        ..PerfEventAttr::default()
    };
    open_event(&attr, 0).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hooks_are_held_by_an_event_that_counts_nothing() {
        // Any user may open a user-space software event on its own thread
        // at the default perf_event_paranoid (2); the descriptor is ours.
        let fd = hold_task_switch_hooks().expect("a dummy event on this thread");
        use std::os::fd::AsRawFd;
        assert!(fd.as_raw_fd() > 2);
    }
}
