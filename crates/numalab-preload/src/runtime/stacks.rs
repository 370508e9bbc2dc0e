//! Call stacks: the return addresses of an allocation's caller, and their
//! Frame records. They are taken by the library's own unwinder
//! ([`unwind`]: no lock, no allocation, no loader call, so safe in a hook
//! that runs inside an allocator's lock or a signal handler); where it
//! cannot run (no `_dl_find_object` in glibc before 2.35, or not x86_64),
//! by glibc's `backtrace` (libgcc's unwinder), made once at start so that
//! its loading happens there. Both give the same frames: this function's
//! caller first.

use super::{emit, sys, unwind};
use libc::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

/// Frames of the call stack recorded per allocation.
const FRAMES: usize = 8;

/// Whether [`unwind`] takes the stacks (set by [`prepare`]).
static OWN_UNWINDER: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this thread takes a stack: `backtrace` may allocate, and
    /// a hook reached from a signal handler must not start a second walk.
    static IN_BACKTRACE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

extern "C" {
    fn backtrace(buf: *mut *mut c_void, size: c_int) -> c_int;
}

/// Return addresses taken per allocation: the recorded frames and the
/// library's own (malloc's hook, `track`, this function).
pub const STACK_CAPACITY: usize = FRAMES + 3;

/// Readies the stacks at start, before any hook can take one: the
/// unwinder's one loader call, or else `backtrace`'s first call (which
/// loads libgcc's unwinder with `dlopen`, allocating).
pub fn prepare() {
    // The objects of this library and of libc, by their functions.
    for (range, f) in [
        (&OWN_OBJECT, made_by_libc as *const () as usize),
        (&LIBC_OBJECT, libc::getpid as *const () as usize),
    ] {
        if unwind::resolve_find_object() {
            if let Some(o) = unwind::find_object(f) {
                range[0].store(o[1] as usize, Relaxed);
                range[1].store(o[2] as usize, Relaxed);
            }
        }
    }
    if unwind::init() {
        OWN_UNWINDER.store(true, Relaxed);
    } else {
        let mut pcs = [0usize; STACK_CAPACITY];
        let _ = call_stack(&mut pcs);
    }
}

/// The mapped ranges `[start, end)` of this library and of libc, found
/// at start (`_dl_find_object`); 0, 0 where unknown.
static OWN_OBJECT: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static LIBC_OBJECT: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

fn within(range: &[AtomicUsize; 2], pc: usize) -> bool {
    pc >= range[0].load(Relaxed) && pc < range[1].load(Relaxed)
}

/// Whether the allocation whose stack is `pcs` ([`call_stack`]'s) was
/// made by libc for itself: the first frame outside this library is
/// libc's. Such memory may be filled or emptied by system calls libc
/// makes itself (a directory's buffer, by `getdents64`), which no hook
/// can disarm first: it is never armed (`tables::Arming::WordsOnly`).
pub fn made_by_libc(pcs: &[usize]) -> bool {
    pcs.iter()
        .find(|&&pc| !within(&OWN_OBJECT, pc))
        .is_some_and(|&pc| within(&LIBC_OBJECT, pc))
}

/// Fills `pcs` with the calling thread's stack; returns how many frames.
/// None when this thread is already taking one (`backtrace` allocating:
/// its allocations are not the program's).
pub fn call_stack(pcs: &mut [usize; STACK_CAPACITY]) -> usize {
    if IN_BACKTRACE.with(|b| b.replace(true)) {
        return 0;
    }
    let n = if OWN_UNWINDER.load(Relaxed) {
        unwind::trace(pcs)
    } else {
        glibc_backtrace(pcs)
    };
    IN_BACKTRACE.with(|b| b.set(false));
    n
}

/// glibc's `backtrace` into `pcs`. Inlined: its first frame must be
/// [`call_stack`]'s, as [`unwind::trace`]'s is, so that both give the
/// library's own frames (the hook, `track`, `call_stack`) in the same
/// count.
#[inline(always)]
fn glibc_backtrace(pcs: &mut [usize; STACK_CAPACITY]) -> usize {
    let mut buf = [std::ptr::null_mut::<c_void>(); STACK_CAPACITY];
    // SAFETY: buf holds STACK_CAPACITY pointers.
    let n = unsafe { backtrace(buf.as_mut_ptr(), buf.len() as c_int) }.max(0) as usize;
    for (pc, b) in pcs.iter_mut().zip(&buf[..n]) {
        *pc = *b as usize;
    }
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
