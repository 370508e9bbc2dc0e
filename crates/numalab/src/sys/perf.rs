//! perf events as owned descriptors.

use super::perf_abi::{perf_event_open, PerfEventAttr};
use std::os::fd::{FromRawFd, OwnedFd};

/// Opens the event `attr` for thread `tid` (0: the caller) on any CPU; the
/// descriptor closes when dropped. Err: the errno.
pub fn open_event(attr: &PerfEventAttr, tid: u32) -> Result<OwnedFd, i32> {
    let fd = perf_event_open(attr, tid)?;
    // SAFETY: a descriptor perf_event_open just returned: open, and owned
    // by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
