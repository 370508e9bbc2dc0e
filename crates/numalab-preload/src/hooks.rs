//! The interposed libc functions. Each passes through to libc; while the
//! library is active it also tracks large allocations, disarms the buffers
//! system calls are given, and keeps the program's SIGSEGV action and
//! memory protections.

use crate::record::{Kind, Record};
use crate::runtime::next::{enosys, real, real_syscall};
use crate::runtime::stacks::{call_stack, emit_frames, STACK_CAPACITY};
use crate::runtime::state::{
    active, config, on_library_thread, page_size, MIN_BYTES, SAMPLER_STARTING,
};
use crate::runtime::{emit, next, stacks, sys};
use crate::tables::{self, BusyGuard};
use crate::{fault, plan, select, signals};
use libc::{c_char, c_int, c_uint, c_void, size_t, ssize_t};
use std::sync::atomic::Ordering::SeqCst;

/// The allocator's `malloc_usable_size` (this library's answers for its
/// pools).
unsafe fn libc_usable_size(p: *mut c_void) -> size_t {
    next::usable_size(p)
}

fn floor(a: usize) -> usize {
    a & !(page_size() - 1)
}

fn restore(start: usize, len: usize, prot: i32) {
    sys::mprotect(start, len, prot);
}

/// Publishes `[p, p + n)` as a system call's buffer and disarms its pages.
fn shield(p: *const c_void, n: usize) -> Option<BusyGuard> {
    if !active() || p.is_null() || n == 0 {
        return None;
    }
    let (start, end) = (floor(p as usize), (p as usize).saturating_add(n));
    let g = tables::publish_busy(start, end);
    tables::disarm_range(start, end, restore);
    Some(g)
}

/// [`shield`] over every buffer of an iovec array (their hull).
fn shield_iov(iov: *const libc::iovec, count: c_int) -> Option<BusyGuard> {
    if !active() {
        return None;
    }
    let (lo, hi) = iov_hull(iov, count);
    shield_hull(lo, hi)
}

/// [`shield`] over `[lo, hi)`, a hull of buffers (none when `lo >= hi`).
fn shield_hull(lo: usize, hi: usize) -> Option<BusyGuard> {
    (lo < hi)
        .then(|| shield(lo as *const c_void, hi - lo))
        .flatten()
}

/// The hull `[lo, hi)` of an iovec array's non-empty buffers (`lo >= hi`
/// when there is none).
fn iov_hull(iov: *const libc::iovec, count: c_int) -> (usize, usize) {
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    if iov.is_null() {
        return (lo, hi);
    }
    // (The kernel takes at most UIO_MAXIOV, 1024, buffers a call.)
    for i in 0..count.clamp(0, 1024) as usize {
        // SAFETY: the caller gives `count` iovecs.
        let v = unsafe { *iov.add(i) };
        if v.iov_len > 0 {
            lo = lo.min(v.iov_base as usize);
            hi = hi.max((v.iov_base as usize).saturating_add(v.iov_len));
        }
    }
    (lo, hi)
}

fn shield_msg(msg: *const libc::msghdr) -> Option<BusyGuard> {
    if msg.is_null() {
        return None;
    }
    // SAFETY: the caller gives a valid msghdr.
    let m = unsafe { &*msg };
    shield_iov(m.msg_iov, m.msg_iovlen as c_int)
}

/// [`shield`] over the fd_sets `select` is given (their hull): the
/// kernel reads and writes `nfds` bits of each, in whole longs.
fn shield_sets(nfds: c_int, sets: [*mut libc::fd_set; 3]) -> Option<BusyGuard> {
    if !active() || nfds <= 0 {
        return None;
    }
    let bytes = (nfds as usize).min(libc::FD_SETSIZE).div_ceil(64) * 8;
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    for s in sets.into_iter().filter(|s| !s.is_null()) {
        lo = lo.min(s as usize);
        hi = hi.max(s as usize + bytes);
    }
    shield_hull(lo, hi)
}

/// [`shield`] over every buffer of every message of an mmsghdr array
/// (recvmmsg, sendmmsg): their hull.
fn shield_mmsg(msgs: *const libc::mmsghdr, count: c_uint) -> Option<BusyGuard> {
    if !active() || msgs.is_null() {
        return None;
    }
    let (mut lo, mut hi) = (usize::MAX, 0usize);
    // (The kernel takes at most UIO_MAXIOV, 1024, messages a call.)
    for i in 0..count.min(1024) as usize {
        // SAFETY: the caller gives `count` messages.
        let m = unsafe { &(*msgs.add(i)).msg_hdr };
        let (l, h) = iov_hull(m.msg_iov, m.msg_iovlen as c_int);
        lo = lo.min(l);
        hi = hi.max(h);
    }
    shield_hull(lo, hi)
}

/// Stops tracking `[p, p + n)` and disarms it; returns whether a tracked
/// region was in it.
fn untrack(p: usize, n: usize) -> bool {
    if !active() || n == 0 {
        return false;
    }
    // Pages are armed only inside tracked regions: disarming each removed
    // region whole covers every armed page of the range.
    let removed = tables::remove_regions(p, p.saturating_add(n), |s, len| {
        tables::disarm_range(floor(s), s + len, restore);
        crate::places::emit_pages(s, len);
    });
    if removed > 0 {
        emit(&Record {
            kind: Kind::Free,
            tid: sys::gettid(),
            cpu: u32::MAX,
            node: -1,
            flags: 0,
            addr: p as u64,
            size: removed as u64,
            time_ns: sys::monotonic_ns(),
            aux: 0,
        });
    }
    removed > 0
}

/// Tracks a new heap allocation when it is large enough and the region
/// filter (`--regions`) selects it.
fn track(p: *mut c_void, n: usize, flags: u32) -> *mut c_void {
    track_with(p, n, flags, libc::PROT_READ | libc::PROT_WRITE, -1)
}

/// [`track`] for any allocation or mapping; `prot`: its protection, which
/// an armed page gets back; `fd`: the file a mapping maps (-1: none).
fn track_with(p: *mut c_void, n: usize, flags: u32, prot: i32, fd: c_int) -> *mut c_void {
    if !active() || p.is_null() {
        return p;
    }
    // The hot path: one comparison and, below the threshold, a
    // subtraction (the library's own thread is looked at only when a
    // small allocation is drawn).
    if n < MIN_BYTES.load(SeqCst) {
        if flags & ALLOC_MMAP == 0 {
            crate::small::allocated(p as usize, n, flags);
        }
        return p;
    }
    if on_library_thread() {
        return p;
    }
    let mut pcs = [0usize; STACK_CAPACITY];
    // The call stack first: the filter may judge by it, and an allocation
    // libc makes for itself is never armed.
    let depth = call_stack(&mut pcs);
    // The mapped file's path, only when a `file:` term needs it.
    let mut path_buf = [0u8; 512];
    let path = (fd >= 0 && select::needs_path())
        .then(|| sys::fd_path(fd, &mut path_buf))
        .flatten();
    let c = select::Candidate {
        addr: p as usize,
        len: n,
        mmap: flags & ALLOC_MMAP != 0,
        stack: &pcs[..depth],
        path,
    };
    if !select::tracks(&c) {
        return p;
    }
    let refine = select::refines(&c);
    let arming = if stacks::made_by_libc(&pcs[..depth]) {
        tables::Arming::WordsOnly
    } else {
        tables::Arming::Pages
    };
    if !tables::add_region(p as usize, n, refine, prot, arming) {
        return p;
    }
    emit(&Record {
        kind: Kind::Alloc,
        tid: sys::gettid(),
        cpu: u32::MAX,
        node: -1,
        flags,
        addr: p as u64,
        size: n as u64,
        time_ns: sys::monotonic_ns(),
        aux: 0,
    });
    emit_frames(p as u64, &pcs[..depth]);
    p
}

pub use crate::record::{ALLOC_FILE, ALLOC_MMAP, ALLOC_SHARED};

fn untrack_heap(p: *mut c_void) {
    // (The size is asked only when a profile tracks allocations or a plan
    // placed some: malloc_usable_size on every free is the churn's cost.)
    if (active() || plan::placed_any()) && !p.is_null() {
        // SAFETY: p is a live allocation of this malloc.
        let n = unsafe { libc_usable_size(p) };
        if active() && n >= MIN_BYTES.load(SeqCst) {
            untrack(p as usize, n);
        }
        if n >= page_size() {
            plan::released(p as usize, n);
        }
    }
}

/// A heap allocation of `n` bytes (aligned to `align`, 0: malloc's own)
/// as the plan places it: one an entry selects, of a page or more, is made
/// page aligned and its pages placed before the program gets it (`zero`:
/// then cleared, as calloc's); small blocks let the heap's stripes grow.
/// `alloc` makes it otherwise.
unsafe fn planned(
    n: usize,
    align: usize,
    zero: bool,
    alloc: impl FnOnce() -> *mut c_void,
) -> *mut c_void {
    if !plan::active() {
        return alloc();
    }
    if align <= 16 {
        if let Some(i) = plan::entry_for_small(n) {
            if let Some(p) = crate::pool::alloc(i, n, zero, plan::place_pool) {
                return p;
            }
        }
    }
    if let Some(i) = plan::entry_for_allocation(n) {
        if plan::heap_striped(i) {
            let p = alloc();
            plan::striped_block(i, p as usize, n);
            return p;
        }
        let ps = page_size();
        let p = next::memalign(align.max(ps), n.div_ceil(ps) * ps);
        if !p.is_null() {
            plan::place_allocation(i, p as usize, n);
            if zero {
                std::ptr::write_bytes(p as *mut u8, 0, n);
            }
        }
        return p;
    }
    let p = alloc();
    plan::heap_block(p as usize, n);
    p
}

/// # Safety
/// As C's `malloc`.
#[no_mangle]
pub unsafe extern "C" fn malloc(n: size_t) -> *mut c_void {
    track(planned(n, 0, false, || next::malloc(n)), n, 0)
}

/// # Safety
/// As C's `calloc`.
#[no_mangle]
pub unsafe extern "C" fn calloc(n: size_t, m: size_t) -> *mut c_void {
    let Some(bytes) = n.checked_mul(m) else {
        return next::calloc(n, m);
    };
    track(planned(bytes, 0, true, || next::calloc(n, m)), bytes, 0)
}

/// # Safety
/// As C's `realloc`.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, n: size_t) -> *mut c_void {
    if let Some(size) = crate::pool::usable(p) {
        // A pool's object: kept when it still fits, else moved to a new
        // allocation (which the plan judges as any other).
        if n != 0 && n <= size {
            return p;
        }
        let q = malloc(n);
        if !q.is_null() || n == 0 {
            if !q.is_null() {
                std::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, size.min(n));
            }
            crate::pool::free(p);
        }
        return q;
    }
    untrack_heap(p);
    let q = next::realloc(p, n);
    // A moved or grown block cannot be made aligned: its whole pages are
    // placed (and moved there) where an entry selects it.
    if let Some(i) = plan::entry_for_allocation(n) {
        plan::place_within(i, q as usize, n);
    }
    track(q, n, 0)
}

/// # Safety
/// As C's `free`.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    if crate::pool::free(p) {
        return;
    }
    untrack_heap(p);
    next::free(p)
}

/// # Safety
/// As C's `malloc_usable_size`.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> size_t {
    match crate::pool::usable(p) {
        Some(size) => size,
        None => libc_usable_size(p),
    }
}

/// # Safety
/// As C's `memalign`.
#[no_mangle]
pub unsafe extern "C" fn memalign(align: size_t, n: size_t) -> *mut c_void {
    track(planned(n, align, false, || next::memalign(align, n)), n, 0)
}

/// # Safety
/// As C's `aligned_alloc`.
#[no_mangle]
pub unsafe extern "C" fn aligned_alloc(align: size_t, n: size_t) -> *mut c_void {
    track(planned(n, align, false, || next::memalign(align, n)), n, 0)
}

/// # Safety
/// As C's `posix_memalign`.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: size_t, n: size_t) -> c_int {
    if align == 0 || !align.is_power_of_two() || !align.is_multiple_of(std::mem::size_of::<usize>())
    {
        return libc::EINVAL;
    }
    let p = planned(n, align, false, || next::memalign(align, n));
    if p.is_null() && n != 0 {
        return libc::ENOMEM;
    }
    *out = track(p, n, 0);
    0
}

/// # Safety
/// As C's `valloc`.
#[no_mangle]
pub unsafe extern "C" fn valloc(n: size_t) -> *mut c_void {
    track(
        planned(n, page_size(), false, || next::memalign(page_size(), n)),
        n,
        0,
    )
}

/// # Safety
/// As C's `pvalloc`.
#[no_mangle]
pub unsafe extern "C" fn pvalloc(n: size_t) -> *mut c_void {
    let ps = page_size();
    let rounded = n.div_ceil(ps).max(1) * ps;
    track(
        planned(rounded, ps, false, || next::memalign(ps, rounded)),
        n,
        0,
    )
}

type StartFn = extern "C" fn(*mut c_void) -> *mut c_void;
type PthreadCreateFn = unsafe extern "C" fn(
    *mut libc::pthread_t,
    *const libc::pthread_attr_t,
    StartFn,
    *mut c_void,
) -> c_int;

/// A new thread's start routine and argument, for [`thread_trampoline`].
struct Start {
    routine: StartFn,
    arg: *mut c_void,
    /// Its number in creation order (`--threads`).
    ordinal: u32,
}

/// Runs a program thread's start routine between recording its stack and
/// locating the stack's pages.
extern "C" fn thread_trampoline(p: *mut c_void) -> *mut c_void {
    // SAFETY: p is the Start that pthread_create below allocated for this
    // thread alone.
    let start = unsafe { Box::from_raw(p as *mut Start) };
    crate::runtime::unwind::thread_starts();
    crate::pin::thread_starts(start.ordinal);
    // A thread created while only pinning (no profile) is only pinned.
    let sampled = active();
    if sampled {
        select::thread_starts(start.ordinal);
        crate::places::thread_starts();
        crate::pmu::thread_starts();
        crate::words::thread_starts();
    }
    let r = (start.routine)(start.arg);
    if sampled {
        crate::pmu::thread_ends();
        crate::places::thread_ends();
    }
    r
}

/// # Safety
/// As C's `pthread_create`.
#[no_mangle]
pub unsafe extern "C" fn pthread_create(
    thread: *mut libc::pthread_t,
    attr: *const libc::pthread_attr_t,
    routine: StartFn,
    arg: *mut c_void,
) -> c_int {
    let Some(real) = real!("pthread_create", PthreadCreateFn) else {
        return libc::EAGAIN;
    };
    // A thread the library's own threads start is the library's too.
    if (!active() && !crate::pin::on()) || SAMPLER_STARTING.load(SeqCst) || on_library_thread() {
        return real(thread, attr, routine, arg);
    }
    let start = Box::into_raw(Box::new(Start {
        routine,
        arg,
        ordinal: select::next_ordinal(),
    }));
    let r = real(thread, attr, thread_trampoline, start as *mut c_void);
    if r != 0 {
        // SAFETY: the thread was not created: the Start is still ours.
        drop(Box::from_raw(start));
    }
    r
}

type MmapFn =
    unsafe extern "C" fn(*mut c_void, size_t, c_int, c_int, c_int, libc::off_t) -> *mut c_void;

/// # Safety
/// As C's `mmap`.
#[no_mangle]
pub unsafe extern "C" fn mmap(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    let Some(real) = real!("mmap", MmapFn) else {
        *libc::__errno_location() = libc::ENOSYS;
        return libc::MAP_FAILED;
    };
    if flags & libc::MAP_FIXED != 0 {
        // A fixed mapping replaces what was there.
        untrack(addr as usize, len);
    }
    let p = real(addr, len, prot, flags, fd, off);
    // Data mappings: anonymous or of a file, private or shared, readable,
    // not code (an armed code page would fault on instruction fetch) and
    // not a thread's stack (located as a stack).
    let data =
        prot & libc::PROT_READ != 0 && prot & libc::PROT_EXEC == 0 && flags & libc::MAP_STACK == 0;
    if p != libc::MAP_FAILED && plan::active() && flags & libc::MAP_STACK == 0 {
        let file = flags & libc::MAP_ANONYMOUS == 0 && fd >= 0;
        let mut buf = [0u8; 512];
        let path = (file && plan::needs_path())
            .then(|| sys::fd_path(fd, &mut buf))
            .flatten();
        plan::mapped(p as usize, len, path);
    }
    if p != libc::MAP_FAILED && data {
        let file = flags & libc::MAP_ANONYMOUS == 0 && fd >= 0;
        let shared = flags & libc::MAP_SHARED != 0;
        let kind =
            ALLOC_MMAP | if file { ALLOC_FILE } else { 0 } | if shared { ALLOC_SHARED } else { 0 };
        track_with(p, len, kind, prot, if file { fd } else { -1 });
    }
    p
}

/// # Safety
/// As C's `mmap64`.
#[no_mangle]
pub unsafe extern "C" fn mmap64(
    addr: *mut c_void,
    len: size_t,
    prot: c_int,
    flags: c_int,
    fd: c_int,
    off: libc::off_t,
) -> *mut c_void {
    mmap(addr, len, prot, flags, fd, off)
}

/// # Safety
/// As C's `munmap`.
#[no_mangle]
pub unsafe extern "C" fn munmap(addr: *mut c_void, len: size_t) -> c_int {
    untrack(addr as usize, len);
    plan::released(addr as usize, len);
    crate::huge::forget(addr as usize, (addr as usize).saturating_add(len));
    libc::syscall(libc::SYS_munmap, addr, len) as c_int
}

/// # Safety
/// As C's `mprotect`: the program's protection wins; the range is never
/// armed again.
#[no_mangle]
pub unsafe extern "C" fn mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int {
    untrack(addr as usize, len);
    libc::syscall(libc::SYS_mprotect, addr, len, prot) as c_int
}

/// # Safety
/// As C's `sigaltstack`. The kernel writes a signal's frame on this stack,
/// ours included (the fault handler runs `SA_ONSTACK`): a frame written
/// onto an armed page cannot be written, and the kernel kills the process
/// with SIGSEGV. So the range is never armed again, as after `mprotect`.
/// (LLVM in rustc sets a malloc'd 77,488-byte stack: large enough to be a
/// tracked allocation whose pages the sampler draws.)
#[no_mangle]
pub unsafe extern "C" fn sigaltstack(ss: *const libc::stack_t, old: *mut libc::stack_t) -> c_int {
    if !ss.is_null() && (*ss).ss_flags & libc::SS_DISABLE == 0 {
        untrack((*ss).ss_sp as usize, (*ss).ss_size);
    }
    libc::syscall(libc::SYS_sigaltstack, ss, old) as c_int
}

type SetvbufFn = unsafe extern "C" fn(*mut libc::FILE, *mut libc::c_char, c_int, size_t) -> c_int;
type SetbufferFn = unsafe extern "C" fn(*mut libc::FILE, *mut libc::c_char, size_t);

/// # Safety
/// As C's `setvbuf`. A buffer the program gives stdio is let go first
/// (disarmed, never armed again): libc fills and empties it with system
/// calls of its own (`fflush` writes it out), which no hook sees. An
/// armed page of a 1 MiB buffer made `fflush` fail with EFAULT, and the
/// lines in it were lost.
#[no_mangle]
pub unsafe extern "C" fn setvbuf(
    f: *mut libc::FILE,
    buf: *mut libc::c_char,
    mode: c_int,
    size: size_t,
) -> c_int {
    if !buf.is_null() {
        untrack(buf as usize, size);
    }
    match real!("setvbuf", SetvbufFn) {
        Some(g) => g(f, buf, mode, size),
        None => enosys(),
    }
}

/// # Safety
/// As C's `setbuffer` (BSD's `setvbuf`): its buffer is let go first, as
/// [`setvbuf`]'s.
#[no_mangle]
pub unsafe extern "C" fn setbuffer(f: *mut libc::FILE, buf: *mut libc::c_char, size: size_t) {
    if !buf.is_null() {
        untrack(buf as usize, size);
    }
    if let Some(g) = real!("setbuffer", SetbufferFn) {
        g(f, buf, size);
    }
}

/// # Safety
/// As C's `madvise`: the huge-page advice is noted, so that sampling keeps
/// the huge pages it asks for whole.
#[no_mangle]
pub unsafe extern "C" fn madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int {
    let r = libc::syscall(libc::SYS_madvise, addr, len, advice) as c_int;
    if r == 0 && active() {
        crate::huge::advise(addr as usize, len, advice);
    }
    r
}

type MremapFn = unsafe extern "C" fn(*mut c_void, size_t, size_t, c_int, ...) -> *mut c_void;

/// # Safety
/// As C's `mremap`.
#[no_mangle]
pub unsafe extern "C" fn mremap(
    old: *mut c_void,
    old_len: size_t,
    new_len: size_t,
    flags: c_int,
    new_addr: *mut c_void,
) -> *mut c_void {
    untrack(old as usize, old_len);
    // Stripes split the range into one mapping per stripe: made one again
    // first, laid again after (plan::before_remap).
    let striped = plan::before_remap(old as usize, old_len);
    plan::released(old as usize, old_len);
    let q = match real!("mremap", MremapFn) {
        Some(real) => real(old, old_len, new_len, flags, new_addr),
        None => libc::MAP_FAILED,
    };
    if let Some(i) = striped {
        let errno = *libc::__errno_location();
        if q == libc::MAP_FAILED {
            plan::after_remap(i, old as usize, old_len);
        } else {
            plan::after_remap(i, q as usize, new_len);
        }
        *libc::__errno_location() = errno;
    }
    q
}

/// Interposes `$name`, a call taking a buffer: the buffer is disarmed
/// (`$shield`) before libc's `$name`, of the same C type, runs.
macro_rules! buffered {
    ($name:ident, ($($arg:ident: $t:ty),*) -> $ret:ty, $shield:expr, $missing:expr) => {
        #[doc = concat!("# Safety\nAs C's `", stringify!($name), "`: its buffer is disarmed first.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $t),*) -> $ret {
            let _g = $shield;
            match real!(stringify!($name), unsafe extern "C" fn($($t),*) -> $ret) {
                Some(f) => f($($arg),*),
                None => $missing,
            }
        }
    };
}

buffered!(read, (fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t, shield(buf, n), enosys());
buffered!(write, (fd: c_int, buf: *const c_void, n: size_t) -> ssize_t, shield(buf, n), enosys());
buffered!(pread, (fd: c_int, buf: *mut c_void, n: size_t, off: libc::off_t) -> ssize_t, shield(buf, n), enosys());
/// # Safety
/// As C's `pread64`.
#[no_mangle]
pub unsafe extern "C" fn pread64(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    off: libc::off_t,
) -> ssize_t {
    pread(fd, buf, n, off)
}

buffered!(pwrite, (fd: c_int, buf: *const c_void, n: size_t, off: libc::off_t) -> ssize_t, shield(buf, n), enosys());
/// # Safety
/// As C's `pwrite64`.
#[no_mangle]
pub unsafe extern "C" fn pwrite64(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    off: libc::off_t,
) -> ssize_t {
    pwrite(fd, buf, n, off)
}

buffered!(readv, (fd: c_int, iov: *const libc::iovec, count: c_int) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(writev, (fd: c_int, iov: *const libc::iovec, count: c_int) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(preadv, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(pwritev, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(recv, (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t, shield(buf, n), enosys());
buffered!(send, (fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t, shield(buf, n), enosys());
buffered!(recvfrom, (fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, from: *mut libc::sockaddr, len: *mut libc::socklen_t) -> ssize_t, shield(buf, n), enosys());
buffered!(sendto, (fd: c_int, buf: *const c_void, n: size_t, flags: c_int, to: *const libc::sockaddr, len: libc::socklen_t) -> ssize_t, shield(buf, n), enosys());
buffered!(recvmsg, (fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t, shield_msg(msg), enosys());
buffered!(sendmsg, (fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t, shield_msg(msg), enosys());
buffered!(fread, (buf: *mut c_void, size: size_t, n: size_t, f: *mut libc::FILE) -> size_t, shield(buf, size.saturating_mul(n)), 0);
buffered!(fwrite, (buf: *const c_void, size: size_t, n: size_t, f: *mut libc::FILE) -> size_t, shield(buf, size.saturating_mul(n)), 0);
buffered!(fread_unlocked, (buf: *mut c_void, size: size_t, n: size_t, f: *mut libc::FILE) -> size_t, shield(buf, size.saturating_mul(n)), 0);
buffered!(fwrite_unlocked, (buf: *const c_void, size: size_t, n: size_t, f: *mut libc::FILE) -> size_t, shield(buf, size.saturating_mul(n)), 0);
buffered!(recvmmsg, (fd: c_int, msgs: *mut libc::mmsghdr, count: c_uint, flags: c_int, timeout: *mut libc::timespec) -> c_int, shield_mmsg(msgs, count), enosys());
buffered!(sendmmsg, (fd: c_int, msgs: *mut libc::mmsghdr, count: c_uint, flags: c_int) -> c_int, shield_mmsg(msgs, count), enosys());
buffered!(preadv2, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t, flags: c_int) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(pwritev2, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t, flags: c_int) -> ssize_t, shield_iov(iov, count), enosys());
// The 64-bit offset names, which a program built with
// _FILE_OFFSET_BITS=64 calls (glibc's headers rename preadv to preadv64):
// on 64-bit targets the same calls.
buffered!(preadv64, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(pwritev64, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(preadv64v2, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t, flags: c_int) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(pwritev64v2, (fd: c_int, iov: *const libc::iovec, count: c_int, off: libc::off_t, flags: c_int) -> ssize_t, shield_iov(iov, count), enosys());
buffered!(getrandom, (buf: *mut c_void, n: size_t, flags: c_uint) -> ssize_t, shield(buf, n), enosys());
// glibc's fortified variants (_FORTIFY_SOURCE makes read() a call of
// __read_chk() where the buffer's size is known): each calls libc's
// internal read, which the hooks above never see. `n` is what the call
// moves; `len`, the buffer's size, is checked by the real function.
buffered!(__read_chk, (fd: c_int, buf: *mut c_void, n: size_t, len: size_t) -> ssize_t, shield(buf, n), enosys());
buffered!(__pread_chk, (fd: c_int, buf: *mut c_void, n: size_t, off: libc::off_t, len: size_t) -> ssize_t, shield(buf, n), enosys());
buffered!(__pread64_chk, (fd: c_int, buf: *mut c_void, n: size_t, off: libc::off_t, len: size_t) -> ssize_t, shield(buf, n), enosys());
buffered!(__recv_chk, (fd: c_int, buf: *mut c_void, n: size_t, len: size_t, flags: c_int) -> ssize_t, shield(buf, n), enosys());
buffered!(__recvfrom_chk, (fd: c_int, buf: *mut c_void, n: size_t, len: size_t, flags: c_int, from: *mut libc::sockaddr, from_len: *mut libc::socklen_t) -> ssize_t, shield(buf, n), enosys());
buffered!(__fread_chk, (buf: *mut c_void, len: size_t, size: size_t, n: size_t, f: *mut libc::FILE) -> size_t, shield(buf, size.saturating_mul(n)), 0);
buffered!(__fread_unlocked_chk, (buf: *mut c_void, len: size_t, size: size_t, n: size_t, f: *mut libc::FILE) -> size_t, shield(buf, size.saturating_mul(n)), 0);
// The calls the kernel answers in an array the program gives (ready
// events, poll's revents, select's sets, directory entries, a path):
// redis-server under `profile --rate 20000` once stopped with "aeApiPoll:
// epoll_wait, Bad address": a page of its 121 KiB events array was armed.
buffered!(epoll_wait, (fd: c_int, events: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int, shield(events.cast(), events_bytes(max)), enosys());
buffered!(epoll_pwait, (fd: c_int, events: *mut libc::epoll_event, max: c_int, timeout: c_int, mask: *const libc::sigset_t) -> c_int, shield(events.cast(), events_bytes(max)), enosys());
buffered!(epoll_pwait2, (fd: c_int, events: *mut libc::epoll_event, max: c_int, timeout: *const libc::timespec, mask: *const libc::sigset_t) -> c_int, shield(events.cast(), events_bytes(max)), enosys());
buffered!(poll, (fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int) -> c_int, shield(fds.cast(), pollfd_bytes(n)), enosys());
buffered!(ppoll, (fds: *mut libc::pollfd, n: libc::nfds_t, timeout: *const libc::timespec, mask: *const libc::sigset_t) -> c_int, shield(fds.cast(), pollfd_bytes(n)), enosys());
buffered!(__poll_chk, (fds: *mut libc::pollfd, n: libc::nfds_t, timeout: c_int, len: size_t) -> c_int, shield(fds.cast(), pollfd_bytes(n)), enosys());
buffered!(__ppoll_chk, (fds: *mut libc::pollfd, n: libc::nfds_t, timeout: *const libc::timespec, mask: *const libc::sigset_t, len: size_t) -> c_int, shield(fds.cast(), pollfd_bytes(n)), enosys());
buffered!(select, (nfds: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, timeout: *mut libc::timeval) -> c_int, shield_sets(nfds, [r, w, e]), enosys());
buffered!(pselect, (nfds: c_int, r: *mut libc::fd_set, w: *mut libc::fd_set, e: *mut libc::fd_set, timeout: *const libc::timespec, mask: *const libc::sigset_t) -> c_int, shield_sets(nfds, [r, w, e]), enosys());
buffered!(getdents64, (fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t, shield(buf, n), enosys());
buffered!(readlink, (path: *const c_char, buf: *mut c_char, n: size_t) -> ssize_t, shield(buf.cast(), n), enosys());
buffered!(readlinkat, (dir: c_int, path: *const c_char, buf: *mut c_char, n: size_t) -> ssize_t, shield(buf.cast(), n), enosys());
buffered!(__readlink_chk, (path: *const c_char, buf: *mut c_char, n: size_t, len: size_t) -> ssize_t, shield(buf.cast(), n), enosys());
buffered!(__readlinkat_chk, (dir: c_int, path: *const c_char, buf: *mut c_char, n: size_t, len: size_t) -> ssize_t, shield(buf.cast(), n), enosys());
buffered!(getcwd, (buf: *mut c_char, n: size_t) -> *mut c_char, shield(buf.cast(), n), missing_null());
buffered!(__getcwd_chk, (buf: *mut c_char, n: size_t, len: size_t) -> *mut c_char, shield(buf.cast(), n), missing_null());

/// The bytes of `max` epoll events (none for a count the kernel refuses).
fn events_bytes(max: c_int) -> usize {
    usize::try_from(max).unwrap_or(0) * std::mem::size_of::<libc::epoll_event>()
}

/// The bytes of `n` pollfds.
fn pollfd_bytes(n: libc::nfds_t) -> usize {
    (n as usize).saturating_mul(std::mem::size_of::<libc::pollfd>())
}

/// A pointer-returning call libc lacks: NULL with ENOSYS.
fn missing_null() -> *mut c_char {
    // SAFETY: errno is this thread's.
    unsafe { *libc::__errno_location() = libc::ENOSYS };
    std::ptr::null_mut()
}

/// # Safety
/// As C's `sigaction`: for SIGSEGV, once the library is active, the
/// program's action is kept and called for every fault that is not a
/// sample.
#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let kept = if sig == libc::SIGSEGV && fault::installed() {
        Some(fault::program_action_kept())
    } else if sig != 0 && sig == crate::words::signal() {
        Some(crate::words::program_action())
    } else if sig == libc::SIGTRAP {
        crate::traps::program_action()
    } else {
        None
    };
    if let Some(kept) = kept {
        let prev = if act.is_null() {
            kept.get()
        } else {
            kept.set(&*act)
        };
        if !old.is_null() {
            *old = prev;
        }
        return 0;
    }
    match signals::real_sigaction() {
        Some(f) => f(sig, act, old),
        None => enosys(),
    }
}

/// # Safety
/// As C's `signal` (BSD semantics, as glibc's).
#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    let mut act: libc::sigaction = std::mem::zeroed();
    act.sa_sigaction = handler;
    act.sa_flags = libc::SA_RESTART;
    libc::sigemptyset(&mut act.sa_mask);
    libc::sigaddset(&mut act.sa_mask, sig);
    let mut old: libc::sigaction = std::mem::zeroed();
    if sigaction(sig, &act, &mut old) != 0 {
        return libc::SIG_ERR;
    }
    old.sa_sigaction
}

type SigmaskFn = unsafe extern "C" fn(c_int, *const libc::sigset_t, *mut libc::sigset_t) -> c_int;

/// `set` without SIGSEGV, when it would block it: a thread with SIGSEGV
/// blocked cannot take a sample's fault (the kernel kills the process
/// instead). Blocking SIGSEGV changes nothing for the program's own faults,
/// which the kernel delivers or kills for whatever the mask says.
fn unblocking_segv(how: c_int, set: *const libc::sigset_t) -> Option<libc::sigset_t> {
    if !fault::installed() || set.is_null() || how == libc::SIG_UNBLOCK {
        return None;
    }
    // SAFETY: the caller gives a valid sigset.
    unsafe {
        let mut s = *set;
        libc::sigdelset(&mut s, libc::SIGSEGV);
        // Nor the word counter's timer signal: a thread that blocked it
        // would keep its words for good.
        let words = crate::words::signal();
        if words != 0 {
            libc::sigdelset(&mut s, words);
        }
        Some(s)
    }
}

/// Calls `real` (libc's `pthread_sigmask` or `sigprocmask`) with `set`
/// less SIGSEGV (see [`unblocking_segv`]); `None` when it is missing.
unsafe fn masked(
    real: Option<SigmaskFn>,
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> Option<c_int> {
    let kept = unblocking_segv(how, set);
    let set = kept.as_ref().map_or(set, |s| s as *const libc::sigset_t);
    real.map(|f| f(how, set, old))
}

/// # Safety
/// As C's `pthread_sigmask`, except that SIGSEGV is never blocked while
/// the library samples.
#[no_mangle]
pub unsafe extern "C" fn pthread_sigmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    masked(real!("pthread_sigmask", SigmaskFn), how, set, old).unwrap_or(libc::ENOSYS)
}

/// # Safety
/// As C's `sigprocmask`, except that SIGSEGV is never blocked while the
/// library samples.
#[no_mangle]
pub unsafe extern "C" fn sigprocmask(
    how: c_int,
    set: *const libc::sigset_t,
    old: *mut libc::sigset_t,
) -> c_int {
    masked(real!("sigprocmask", SigmaskFn), how, set, old).unwrap_or_else(|| enosys())
}

/// # Safety
/// As libnuma's `mbind`, except that a range the plan placed keeps the
/// plan's policy (the call succeeds and changes nothing).
#[no_mangle]
pub unsafe extern "C" fn mbind(
    addr: *mut c_void,
    len: libc::c_ulong,
    mode: c_int,
    mask: *const libc::c_ulong,
    maxnode: libc::c_ulong,
    flags: libc::c_uint,
) -> libc::c_long {
    if plan::keeps_its_policy(addr as usize, len as usize) {
        return 0;
    }
    real_syscall(
        libc::SYS_mbind,
        [
            addr as libc::c_long,
            len as libc::c_long,
            mode as libc::c_long,
            mask as libc::c_long,
            maxnode as libc::c_long,
            flags as libc::c_long,
        ],
    )
}

/// Resolves what the interposers forward to before anything else can call
/// them (from a signal handler, or from inside an allocator's lock).
pub fn resolve_early() {
    next::resolve();
    // The stack unwinder's one loader call (`_dl_find_object`), or where
    // it is missing, glibc's `backtrace`'s first call, which loads libgcc's
    // unwinder (dlopen, which allocates): made now, not from a hook that
    // an allocator calls with its own lock held (jemalloc maps its arenas
    // with mmap), which hung rustc and cargo under `profile` (issue 36).
    if config().profiling() || config().plan.is_some() {
        crate::runtime::stacks::prepare();
    }
}

/// # Safety
/// As C's `syscall`: six arguments are passed on whatever the call's own
/// number (the x86_64 and AArch64 conventions pass a variadic call's
/// integers as a fixed call's, so reading six is harmless). A program's
/// raw `mbind` on a range the plan placed is skipped as [`mbind`] skips it.
#[no_mangle]
pub unsafe extern "C" fn syscall(
    n: libc::c_long,
    a: libc::c_long,
    b: libc::c_long,
    c: libc::c_long,
    d: libc::c_long,
    e: libc::c_long,
    f: libc::c_long,
) -> libc::c_long {
    if n == libc::SYS_mbind && plan::keeps_its_policy(a as usize, b as usize) {
        return 0;
    }
    real_syscall(n, [a, b, c, d, e, f])
}

#[cfg(test)]
mod tests {
    /// Every function a hook forwards to by name is looked up at start
    /// (next::EARLY), so no hook calls the loader.
    #[test]
    fn every_forwarded_symbol_is_resolved_at_start() {
        let mut names = Vec::new();
        for (src, open) in [
            (include_str!("hooks.rs"), "real!(\""),
            (include_str!("hooks.rs"), "buffered!("),
            (include_str!("runtime/next.rs"), "real!(\""),
            (include_str!("signals.rs"), "Symbol::new(\""),
        ] {
            for piece in src.split(open).skip(1) {
                let name: String = piece
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                // The macros' own definitions.
                if !name.is_empty() && name != "stringify" {
                    names.push(name);
                }
            }
        }
        assert!(names.len() >= 20, "{names:?}");
        for n in names {
            assert!(
                super::next::EARLY.contains(&format!("{n}\0").as_str()),
                "{n} is forwarded to but not in next::EARLY"
            );
        }
    }
}
