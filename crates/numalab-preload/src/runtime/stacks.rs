//! Call stacks: the return addresses of an allocation's caller, taken by
//! glibc's `backtrace` (libgcc's unwinder), and their Frame records.

use super::{emit, sys};
use libc::{c_int, c_void};

/// Frames of the call stack recorded per allocation.
const FRAMES: usize = 8;

thread_local! {
    /// Set while this thread takes a backtrace: the unwinder may allocate.
    static IN_BACKTRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

extern "C" {
    fn backtrace(buf: *mut *mut c_void, size: c_int) -> c_int;
}

/// Return addresses taken per allocation: the recorded frames and the
/// library's own (malloc's hook, `track`, this function).
pub const STACK_CAPACITY: usize = FRAMES + 3;

/// Fills `pcs` with the calling thread's stack; returns how many frames.
/// None when the unwinder itself allocates (its allocations are not the
/// program's).
pub fn call_stack(pcs: &mut [usize; STACK_CAPACITY]) -> usize {
    if IN_BACKTRACE.with(|b| b.replace(true)) {
        return 0;
    }
    let mut buf = [std::ptr::null_mut::<c_void>(); STACK_CAPACITY];
    // SAFETY: buf holds STACK_CAPACITY pointers.
    let n = unsafe { backtrace(buf.as_mut_ptr(), buf.len() as c_int) }.max(0) as usize;
    for (pc, b) in pcs.iter_mut().zip(&buf[..n]) {
        *pc = *b as usize;
    }
    IN_BACKTRACE.with(|b| b.set(false));
    n
}

/// This thread's call stack, as the Frame records of `key` (a sampled
/// small allocation's).
pub fn emit_call_stack(key: u64) {
    let mut pcs = [0usize; STACK_CAPACITY];
    let depth = call_stack(&mut pcs);
    emit_frames(key, &pcs[..depth]);
}

/// The call stack of the allocation at `addr`, a Frame record per frame.
pub fn emit_frames(addr: u64, pcs: &[usize]) {
    let tid = sys::gettid();
    for (depth, pc) in pcs.iter().enumerate() {
        emit(
            &numalab_profile_abi::events::Frame {
                tid,
                key: addr,
                depth: depth as u64,
                pc: *pc as u64,
            }
            .to_record(),
        );
    }
}
