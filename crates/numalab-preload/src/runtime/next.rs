//! What the interposers forward to: the next definition of each function in
//! the loader's search order, found once when the library starts.
//!
//! Two rules make the library safe inside any allocator and runtime
//! (issue 36):
//!
//! - **No loader call from a hook.** `dlsym` takes the loader's lock. A
//!   hook reached from inside an allocator's lock (jemalloc maps its
//!   arenas with `mmap`) that then waits for the loader, while another
//!   thread holds the loader's lock and waits for the allocator, hangs
//!   both. So every symbol a hook forwards to is looked up in [`resolve`]
//!   at start, and a hook finds it in [`Symbol::get`] without the loader.
//! - **One allocator per block.** `malloc` and its family go to the next
//!   allocator (jemalloc, tcmalloc or mimalloc where the program links or
//!   preloads one; glibc's otherwise), never to glibc's `__libc_*`
//!   directly: a block is freed, resized and measured
//!   (`malloc_usable_size`) by the allocator that made it. Each member of
//!   the family must come from the object that defines `malloc`; one that
//!   does not is replaced by an equivalent built on that object's own
//!   calls.
//!
//! While the lookup runs (the loader may allocate), allocations come from
//! a small static arena whose blocks are never given back.

use libc::{c_int, c_void, size_t};
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::SeqCst};

/// One function of libc (or of the allocator) that a hook forwards to.
pub struct Symbol {
    /// NUL-terminated.
    name: &'static str,
    addr: AtomicUsize,
}

impl Symbol {
    pub const fn new(name: &'static str) -> Self {
        Symbol {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// Its address, or None where no later object defines it. Found in the
    /// table [`resolve`] filled at start; only a symbol missing from
    /// [`EARLY`] (a test keeps that list whole) or a call before the
    /// library's start asks the loader.
    pub fn get(&self) -> Option<usize> {
        let p = self.addr.load(SeqCst);
        if p != 0 {
            return (p != MISSING).then_some(p);
        }
        let found = TABLE
            .iter()
            .find(|s| s.name == self.name)
            .map(|s| s.addr.load(SeqCst))
            .filter(|&p| p != 0)
            .unwrap_or_else(|| lookup(self.name));
        self.addr.store(found, SeqCst);
        (found != MISSING).then_some(found)
    }
}

/// Stored for a symbol no later object defines.
const MISSING: usize = usize::MAX;

fn lookup(name: &str) -> usize {
    debug_assert!(name.ends_with('\0'));
    // SAFETY: dlsym with a NUL-terminated name.
    let p = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) } as usize;
    if p == 0 {
        MISSING
    } else {
        p
    }
}

/// Every function a hook forwards to by name (`real!`, in hooks.rs and
/// [`real_syscall`]): looked up at start. hooks.rs's test
/// `every_forwarded_symbol_is_resolved_at_start` keeps this list whole.
pub const EARLY: &[&str] = &[
    "pthread_create\0",
    "mmap\0",
    "mremap\0",
    "pthread_sigmask\0",
    "sigprocmask\0",
    "syscall\0",
    "read\0",
    "write\0",
    "pread\0",
    "pwrite\0",
    "readv\0",
    "writev\0",
    "preadv\0",
    "pwritev\0",
    "recv\0",
    "send\0",
    "recvfrom\0",
    "sendto\0",
    "recvmsg\0",
    "sendmsg\0",
    "fread\0",
    "fwrite\0",
    "fread_unlocked\0",
    "fwrite_unlocked\0",
    "recvmmsg\0",
    "sendmmsg\0",
    "preadv2\0",
    "pwritev2\0",
    "preadv64\0",
    "pwritev64\0",
    "preadv64v2\0",
    "pwritev64v2\0",
    "getrandom\0",
    "__read_chk\0",
    "__pread_chk\0",
    "__pread64_chk\0",
    "__recv_chk\0",
    "__recvfrom_chk\0",
    "__fread_chk\0",
    "__fread_unlocked_chk\0",
    "epoll_wait\0",
    "epoll_pwait\0",
    "epoll_pwait2\0",
    "poll\0",
    "ppoll\0",
    "__poll_chk\0",
    "__ppoll_chk\0",
    "select\0",
    "pselect\0",
    "getdents64\0",
    "readlink\0",
    "readlinkat\0",
    "__readlink_chk\0",
    "__readlinkat_chk\0",
    "getcwd\0",
    "__getcwd_chk\0",
    "setvbuf\0",
    "setbuffer\0",
    "sigaction\0",
];

/// The addresses of [`EARLY`], in its order.
static TABLE: [Symbol; EARLY.len()] = {
    let mut t = [const { Symbol::new("") }; EARLY.len()];
    let mut i = 0;
    while i < EARLY.len() {
        t[i] = Symbol::new(EARLY[i]);
        i += 1;
    }
    t
};

type MallocFn = unsafe extern "C" fn(size_t) -> *mut c_void;
type CallocFn = unsafe extern "C" fn(size_t, size_t) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, size_t) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void);
type MemalignFn = unsafe extern "C" fn(size_t, size_t) -> *mut c_void;
type PosixMemalignFn = unsafe extern "C" fn(*mut *mut c_void, size_t, size_t) -> c_int;
type UsableFn = unsafe extern "C" fn(*mut c_void) -> size_t;

/// The next allocator's functions, by address (0: none).
struct Allocator {
    malloc: AtomicUsize,
    calloc: AtomicUsize,
    realloc: AtomicUsize,
    free: AtomicUsize,
    memalign: AtomicUsize,
    aligned_alloc: AtomicUsize,
    posix_memalign: AtomicUsize,
    usable: AtomicUsize,
}

static NEXT: Allocator = Allocator {
    malloc: AtomicUsize::new(0),
    calloc: AtomicUsize::new(0),
    realloc: AtomicUsize::new(0),
    free: AtomicUsize::new(0),
    memalign: AtomicUsize::new(0),
    aligned_alloc: AtomicUsize::new(0),
    posix_memalign: AtomicUsize::new(0),
    usable: AtomicUsize::new(0),
};

/// 0: not looked up; 1: being looked up (allocations from the arena); 2:
/// found.
static STATE: AtomicU8 = AtomicU8::new(0);

/// The base address of the object that defines `p` (0: unknown).
fn object_of(p: usize) -> usize {
    // SAFETY: an all-zero Dl_info is valid; dladdr only writes it.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: p is an address; dladdr reads the loader's tables.
    if unsafe { libc::dladdr(p as *const c_void, &mut info) } == 0 {
        return 0;
    }
    info.dli_fbase as usize
}

/// Looks up the allocator and every symbol of [`EARLY`]. Called first thing
/// at the library's start, and by the first allocation if one comes
/// earlier (another library's constructor).
pub fn resolve() {
    if STATE.compare_exchange(0, 1, SeqCst, SeqCst).is_err() {
        return;
    }
    let malloc = lookup("malloc\0");
    let home = if malloc == MISSING {
        0
    } else {
        object_of(malloc)
    };
    // A member of the family counts only from malloc's own object.
    let same = |name: &str| {
        let p = lookup(name);
        if p == MISSING || (home != 0 && object_of(p) != home) {
            0
        } else {
            p
        }
    };
    let ok = |p: usize| if p == MISSING { 0 } else { p };
    NEXT.calloc.store(same("calloc\0"), SeqCst);
    NEXT.realloc.store(same("realloc\0"), SeqCst);
    NEXT.free.store(same("free\0"), SeqCst);
    NEXT.memalign.store(same("memalign\0"), SeqCst);
    NEXT.aligned_alloc.store(same("aligned_alloc\0"), SeqCst);
    NEXT.posix_memalign.store(same("posix_memalign\0"), SeqCst);
    NEXT.usable.store(same("malloc_usable_size\0"), SeqCst);
    for s in &TABLE {
        if s.addr.load(SeqCst) == 0 {
            s.addr.store(lookup(s.name), SeqCst);
        }
    }
    NEXT.malloc.store(ok(malloc), SeqCst);
    // glibc's own malloc: its exported `__libc_malloc` is in malloc's
    // object (jemalloc, tcmalloc and mimalloc define no such name).
    let libc_malloc = lookup("__libc_malloc\0");
    GLIBC.store(
        home != 0 && libc_malloc != MISSING && object_of(libc_malloc) == home,
        SeqCst,
    );
    STATE.store(2, SeqCst);
}

/// Whether the next allocator is glibc's.
static GLIBC: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether the program's allocator is glibc's `malloc`.
pub fn is_glibc() -> bool {
    GLIBC.load(SeqCst)
}

/// The mapping of a block glibc's malloc served by a mapping of its own
/// (`mmap`, past its threshold): `(start, bytes)`, the block's header page
/// included; None for any other block, or another allocator. glibc moves
/// such a block with `mremap` on `realloc` (its internal call, which no
/// hook sees), and the kernel refuses one that spans two mappings, as a
/// policy laid on the block's pages alone makes it.
pub fn own_mapping(p: usize) -> Option<(usize, usize)> {
    if !is_glibc() || p < 16 || !p.is_multiple_of(16) {
        return None;
    }
    // SAFETY: a block glibc returned: the 16 bytes before it are its
    // chunk's header (the previous size, then the size with its flags),
    // on the block's own mapping or the heap.
    let (prev, size) = unsafe { (*((p - 16) as *const usize), *((p - 8) as *const usize)) };
    const IS_MMAPPED: usize = 2;
    if size & IS_MMAPPED == 0 {
        return None;
    }
    // A mapped chunk keeps its offset into its mapping (alignment's
    // slack) in the previous-size word.
    let start = (p - 16).checked_sub(prev)?;
    let bytes = prev.checked_add(size & !7)?;
    let ps = 4096;
    (start % ps == 0 && bytes % ps == 0 && p < start + bytes).then_some((start, bytes))
}

/// Whether the next allocator is known (else: the arena).
fn ready() -> bool {
    match STATE.load(SeqCst) {
        2 => true,
        0 => {
            resolve();
            STATE.load(SeqCst) == 2
        }
        // Being looked up: this call comes from inside the lookup (or from
        // another thread meanwhile).
        _ => false,
    }
}

/// The bootstrap arena: blocks for allocations made while the allocator
/// is looked up. Each block has a 16-byte header holding its size.
const ARENA_BYTES: usize = 64 << 10;
#[repr(C, align(4096))]
struct Arena(std::cell::UnsafeCell<[u8; ARENA_BYTES]>);
// SAFETY: blocks are handed out once each (ARENA_USED, atomically): no two
// threads ever get the same bytes.
unsafe impl Sync for Arena {}
static ARENA: Arena = Arena(std::cell::UnsafeCell::new([0; ARENA_BYTES]));
static ARENA_USED: AtomicUsize = AtomicUsize::new(0);
const HEADER: usize = 16;

fn arena_base() -> usize {
    ARENA.0.get() as usize
}

/// Whether `p` is a block of the bootstrap arena.
pub fn in_arena(p: *mut c_void) -> bool {
    let p = p as usize;
    p >= arena_base() && p < arena_base() + ARENA_BYTES
}

fn arena_alloc(n: usize, align: usize) -> *mut c_void {
    let align = align.max(HEADER);
    let mut used = ARENA_USED.load(SeqCst);
    loop {
        let start = (arena_base() + used + HEADER).next_multiple_of(align);
        let end = start.saturating_add(n.max(1));
        if end > arena_base() + ARENA_BYTES {
            return std::ptr::null_mut();
        }
        match ARENA_USED.compare_exchange(used, end - arena_base(), SeqCst, SeqCst) {
            Ok(_) => {
                // SAFETY: [start - HEADER, end) is this block's, inside the
                // arena (start - HEADER >= the previous end).
                unsafe { ((start - HEADER) as *mut usize).write(n) };
                return start as *mut c_void;
            }
            Err(now) => used = now,
        }
    }
}

fn arena_size(p: *mut c_void) -> usize {
    // SAFETY: p is an arena block: its header precedes it.
    unsafe { ((p as usize - HEADER) as *const usize).read() }
}

/// # Safety
/// As C's `malloc`.
pub unsafe fn malloc(n: size_t) -> *mut c_void {
    if !ready() {
        return arena_alloc(n, 16);
    }
    match NEXT.malloc.load(SeqCst) {
        0 => std::ptr::null_mut(),
        // SAFETY: the allocator's malloc.
        f => std::mem::transmute::<usize, MallocFn>(f)(n),
    }
}

/// # Safety
/// As C's `calloc`.
pub unsafe fn calloc(n: size_t, m: size_t) -> *mut c_void {
    let Some(bytes) = n.checked_mul(m) else {
        *libc::__errno_location() = libc::ENOMEM;
        return std::ptr::null_mut();
    };
    if !ready() {
        // The arena is zeroed and never reused.
        return arena_alloc(bytes, 16);
    }
    match NEXT.calloc.load(SeqCst) {
        0 => {
            let p = malloc(bytes);
            if !p.is_null() {
                std::ptr::write_bytes(p as *mut u8, 0, bytes);
            }
            p
        }
        // SAFETY: the allocator's calloc.
        f => std::mem::transmute::<usize, CallocFn>(f)(n, m),
    }
}

/// # Safety
/// As C's `realloc`.
pub unsafe fn realloc(p: *mut c_void, n: size_t) -> *mut c_void {
    if in_arena(p) {
        // An arena block moves to the allocator (arena blocks are never
        // given back).
        let q = malloc(n);
        if !q.is_null() {
            std::ptr::copy_nonoverlapping(p as *const u8, q as *mut u8, arena_size(p).min(n));
        }
        return q;
    }
    if !ready() {
        return if p.is_null() {
            arena_alloc(n, 16)
        } else {
            std::ptr::null_mut()
        };
    }
    match NEXT.realloc.load(SeqCst) {
        0 => std::ptr::null_mut(),
        // SAFETY: the allocator's realloc, given its own block.
        f => std::mem::transmute::<usize, ReallocFn>(f)(p, n),
    }
}

/// # Safety
/// As C's `free`.
pub unsafe fn free(p: *mut c_void) {
    if p.is_null() || in_arena(p) || !ready() {
        return;
    }
    if let f @ 1.. = NEXT.free.load(SeqCst) {
        // SAFETY: the allocator's free, given its own block.
        std::mem::transmute::<usize, FreeFn>(f)(p)
    }
}

/// # Safety
/// As C's `memalign` (`align` a power of two).
pub unsafe fn memalign(align: size_t, n: size_t) -> *mut c_void {
    if !ready() {
        return arena_alloc(n, align);
    }
    if let f @ 1.. = NEXT.memalign.load(SeqCst) {
        // SAFETY: the allocator's memalign.
        return std::mem::transmute::<usize, MemalignFn>(f)(align, n);
    }
    if let f @ 1.. = NEXT.posix_memalign.load(SeqCst) {
        let mut out = std::ptr::null_mut();
        let align = align.max(std::mem::size_of::<usize>());
        // SAFETY: the allocator's posix_memalign, writing `out`.
        return match std::mem::transmute::<usize, PosixMemalignFn>(f)(&mut out, align, n) {
            0 => out,
            e => {
                *libc::__errno_location() = e;
                std::ptr::null_mut()
            }
        };
    }
    if let f @ 1.. = NEXT.aligned_alloc.load(SeqCst) {
        // SAFETY: the allocator's aligned_alloc (a size the alignment
        // divides, as C11 asks).
        return std::mem::transmute::<usize, MemalignFn>(f)(align, n.next_multiple_of(align));
    }
    // An allocator without any aligned allocation: malloc's alignment is
    // all it offers.
    if align <= 16 {
        malloc(n)
    } else {
        *libc::__errno_location() = libc::ENOMEM;
        std::ptr::null_mut()
    }
}

/// # Safety
/// As C's `malloc_usable_size`; 0 where the allocator cannot say.
pub unsafe fn usable_size(p: *mut c_void) -> size_t {
    if p.is_null() {
        return 0;
    }
    if in_arena(p) {
        return arena_size(p);
    }
    if !ready() {
        return 0;
    }
    match NEXT.usable.load(SeqCst) {
        0 => 0,
        // SAFETY: the allocator's malloc_usable_size, given its own block.
        f => std::mem::transmute::<usize, UsableFn>(f)(p),
    }
}

/// The next definition of a libc function: found at the library's start
/// ([`resolve`]), never by a loader call from a hook.
macro_rules! real {
    ($name:expr, $ty:ty) => {{
        static S: $crate::runtime::next::Symbol =
            $crate::runtime::next::Symbol::new(concat!($name, "\0"));
        S.get().map(|p| {
            // SAFETY: the symbol $name has the C type $ty.
            unsafe { std::mem::transmute::<usize, $ty>(p) }
        })
    }};
}
pub(crate) use real;

/// Fails a call whose libc function could not be found.
pub(crate) unsafe fn enosys<T: From<i8>>() -> T {
    *libc::__errno_location() = libc::ENOSYS;
    T::from(-1)
}

type SyscallFn = unsafe extern "C" fn(libc::c_long, ...) -> libc::c_long;

/// libc's `syscall`, looked up at the library's start (never first from a
/// signal handler).
pub(crate) unsafe fn real_syscall(n: libc::c_long, a: [libc::c_long; 6]) -> libc::c_long {
    match real!("syscall", SyscallFn) {
        Some(f) => f(n, a[0], a[1], a[2], a[3], a[4], a[5]),
        None => enosys(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arena_blocks_are_aligned_sized_and_known() {
        let a = arena_alloc(10, 16);
        let b = arena_alloc(100, 256);
        assert!(in_arena(a) && in_arena(b));
        assert_eq!(a as usize % 16, 0);
        assert_eq!(b as usize % 256, 0);
        assert_eq!(arena_size(a), 10);
        assert_eq!(arena_size(b), 100);
        assert!(b as usize >= a as usize + 10 + HEADER);
        assert!(arena_alloc(ARENA_BYTES, 16).is_null());
        let mut x = 0u8;
        assert!(!in_arena(&mut x as *mut u8 as *mut c_void));
    }

    #[test]
    fn the_next_allocator_is_the_one_that_defines_malloc() {
        resolve();
        // SAFETY: plain allocation calls.
        unsafe {
            let p = malloc(1000);
            assert!(!p.is_null() && !in_arena(p));
            assert!(usable_size(p) >= 1000);
            let q = memalign(4096, 5000);
            assert_eq!(q as usize % 4096, 0);
            let r = realloc(p, 100_000);
            assert!(usable_size(r) >= 100_000);
            free(r);
            free(q);
        }
        let m = NEXT.malloc.load(SeqCst);
        assert_ne!(m, 0);
        for f in [&NEXT.free, &NEXT.realloc, &NEXT.usable] {
            assert_eq!(object_of(f.load(SeqCst)), object_of(m));
        }
    }
}
