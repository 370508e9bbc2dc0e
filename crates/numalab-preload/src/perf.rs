//! `perf_event_open(2)`: the attribute structure (the libc crate has no
//! definition) and the call. The engine includes this file by path for
//! its PMU probe (`numalab::profile::pmu`), as it does `record`.

/// `struct perf_event_attr` up to `PERF_ATTR_SIZE_VER5` (112 bytes).
/// `config1` is `bp_addr` for a breakpoint, `config2` its `bp_len`.
#[repr(C)]
#[derive(Default)]
pub struct PerfEventAttr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved: u16,
}

impl PerfEventAttr {
    /// The structure's size, as `size` must say.
    pub const SIZE: u32 = std::mem::size_of::<PerfEventAttr>() as u32;
}

/// `flags` bits of [`PerfEventAttr`].
pub const ATTR_DISABLED: u64 = 1;
pub const ATTR_EXCLUDE_KERNEL: u64 = 1 << 5;
pub const ATTR_EXCLUDE_HV: u64 = 1 << 6;
/// `precise_ip` (two bits) starts here.
pub const ATTR_PRECISE_SHIFT: u32 = 15;

const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// `perf_event_open(attr, tid, any CPU, no group, close-on-exec)` (tid 0:
/// this thread): the descriptor or the errno.
pub fn perf_event_open(attr: &PerfEventAttr, tid: u32) -> Result<i32, i32> {
    // SAFETY: a valid attr of the size it says; no group.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            tid as libc::pid_t,
            -1 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL))
    } else {
        Ok(fd as i32)
    }
}
