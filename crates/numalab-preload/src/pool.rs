//! Pools for the small allocations a plan entry asks to place (`small`
//! in the plan, docs/plan.md): an allocation smaller than a page shares
//! its page with other objects, so it cannot get a policy of its own in
//! the heap. An entry's small allocations are carved instead from a pool
//! of its own, reserved once (64 MiB of address space, pages made on
//! touch) and placed whole with the entry's policy.
//!
//! - Size classes double from 16 bytes to a page; each 64 KiB slab of the
//!   pool serves one class. A freed object goes on its class's free list
//!   and is handed out again first.
//! - A full pool, or one that could not be reserved, lets the allocation
//!   go to the heap as before (counted).
//! - `free`, `realloc` and `malloc_usable_size` know a pool's objects by
//!   their address; each pool has a spin lock, taken around `fork` so that
//!   a child never inherits it held.

use crate::runtime::next;
use crate::runtime::state::page_size;
use std::sync::atomic::Ordering::SeqCst;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize};

/// Address space reserved per pool.
pub const POOL_BYTES: usize = 64 << 20;
/// Each slab serves one size class.
const SLAB: usize = 64 << 10;
const SLABS: usize = POOL_BYTES / SLAB;
/// Size classes: 16 << k bytes, up to a page (64 KiB pages at most).
const CLASSES: usize = 13;
const MIN_CLASS: usize = 16;
/// Pools at most: one per plan entry.
const MAX_POOLS: usize = 64;
/// `start` of a pool that could not be reserved.
const FAILED: usize = usize::MAX;

struct Pool {
    lock: AtomicBool,
    /// 0: not reserved yet; [`FAILED`]: could not be.
    start: AtomicUsize,
    /// Slabs handed out.
    slabs: AtomicUsize,
    /// Each class's free list head (0: empty) and its current slab's
    /// unused part.
    free: [AtomicUsize; CLASSES],
    next: [AtomicUsize; CLASSES],
    end: [AtomicUsize; CLASSES],
    /// Each slab's class.
    class_of: [AtomicU8; SLABS],
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicUsize = AtomicUsize::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const NO_CLASS: AtomicU8 = AtomicU8::new(0);
#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Pool = Pool {
    lock: AtomicBool::new(false),
    start: AtomicUsize::new(0),
    slabs: AtomicUsize::new(0),
    free: [ZERO; CLASSES],
    next: [ZERO; CLASSES],
    end: [ZERO; CLASSES],
    class_of: [NO_CLASS; SLABS],
};
static POOLS: [Pool; MAX_POOLS] = [EMPTY; MAX_POOLS];
/// Pools `0..USED` may be reserved: `free` looks no further.
static USED: AtomicUsize = AtomicUsize::new(0);
/// Small allocations an entry selected that went to the heap (its pool
/// full or not reserved).
static SPILLED: AtomicUsize = AtomicUsize::new(0);
static AT_FORK: AtomicBool = AtomicBool::new(false);

impl Pool {
    fn lock(&self) {
        let mut spins = 0u32;
        while self
            .lock
            .compare_exchange_weak(false, true, SeqCst, SeqCst)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    fn unlock(&self) {
        self.lock.store(false, SeqCst);
    }

    /// The pool's start, reserving and placing it on first use (under the
    /// lock); `None` when it cannot be.
    fn reserved(&self, entry: usize, place: fn(usize, usize, usize)) -> Option<usize> {
        match self.start.load(SeqCst) {
            FAILED => None,
            0 => {
                // The raw call: this library's own `mmap` would judge the
                // mapping against the plan as the program's.
                // SAFETY: a fresh anonymous mapping, no address given.
                let p = unsafe {
                    next::real_syscall(
                        libc::SYS_mmap,
                        [
                            0,
                            POOL_BYTES as libc::c_long,
                            (libc::PROT_READ | libc::PROT_WRITE) as libc::c_long,
                            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE)
                                as libc::c_long,
                            -1,
                            0,
                        ],
                    )
                };
                if p <= 0 || p as usize >= usize::MAX - 4095 {
                    self.start.store(FAILED, SeqCst);
                    return None;
                }
                let p = p as usize;
                place(entry, p, POOL_BYTES);
                self.start.store(p, SeqCst);
                USED.fetch_max(entry + 1, SeqCst);
                Some(p)
            }
            p => Some(p),
        }
    }
}

/// The class of an `n`-byte object, and its size; `None` above a page.
fn class(n: usize) -> Option<(usize, usize)> {
    let mut size = MIN_CLASS;
    for k in 0..CLASSES {
        if n <= size {
            return (size <= page_size().max(MIN_CLASS)).then_some((k, size));
        }
        size <<= 1;
    }
    None
}

/// An `n`-byte object (below a page) from entry `entry`'s pool, zeroed
/// when `zero`; the pool is reserved and placed (`place(entry, start,
/// len)`) on first use. `None` when the pool cannot give one: the caller
/// allocates from the heap.
pub fn alloc(
    entry: usize,
    n: usize,
    zero: bool,
    place: fn(usize, usize, usize),
) -> Option<*mut libc::c_void> {
    let pool = POOLS.get(entry)?;
    let (k, size) = class(n.max(1))?;
    if !AT_FORK.swap(true, SeqCst) {
        // SAFETY: registers functions without arguments, once.
        unsafe { libc::pthread_atfork(Some(lock_all), Some(unlock_all), Some(unlock_all)) };
    }
    pool.lock();
    let got = take(pool, entry, k, size, place);
    pool.unlock();
    match got {
        Some(p) => {
            if zero {
                // SAFETY: p is `size` >= n bytes of the pool, this object's alone.
                unsafe { std::ptr::write_bytes(p as *mut u8, 0, n) };
            }
            Some(p as *mut libc::c_void)
        }
        None => {
            SPILLED.fetch_add(1, SeqCst);
            None
        }
    }
}

/// An object of class `k` from the free list, the current slab, or a new
/// slab (under the pool's lock).
fn take(
    pool: &Pool,
    entry: usize,
    k: usize,
    size: usize,
    place: fn(usize, usize, usize),
) -> Option<usize> {
    let start = pool.reserved(entry, place)?;
    let head = pool.free[k].load(SeqCst);
    if head != 0 {
        // SAFETY: a freed object of this pool holds the next one's address.
        let next = unsafe { *(head as *const usize) };
        pool.free[k].store(next, SeqCst);
        return Some(head);
    }
    let mut at = pool.next[k].load(SeqCst);
    if at == 0 || at + size > pool.end[k].load(SeqCst) {
        let slab = pool.slabs.load(SeqCst);
        if slab >= SLABS {
            return None;
        }
        pool.slabs.store(slab + 1, SeqCst);
        pool.class_of[slab].store(k as u8, SeqCst);
        at = start + slab * SLAB;
        pool.end[k].store(at + SLAB, SeqCst);
    }
    pool.next[k].store(at + size, SeqCst);
    Some(at)
}

/// The pool holding `p`, and the size of `p`'s class.
fn owner(p: usize) -> Option<(&'static Pool, usize)> {
    for pool in &POOLS[..USED.load(SeqCst).min(MAX_POOLS)] {
        let start = pool.start.load(SeqCst);
        if start != 0 && start != FAILED && p >= start && p < start + POOL_BYTES {
            let k = pool.class_of[(p - start) / SLAB].load(SeqCst) as usize;
            return Some((pool, MIN_CLASS << k));
        }
    }
    None
}

/// The usable size of `p` when a pool holds it.
pub fn usable(p: *const libc::c_void) -> Option<usize> {
    owner(p as usize).map(|(_, size)| size)
}

/// Frees `p` into its pool; false when no pool holds it.
pub fn free(p: *mut libc::c_void) -> bool {
    let Some((pool, size)) = owner(p as usize) else {
        return false;
    };
    let k = size.trailing_zeros() as usize - MIN_CLASS.trailing_zeros() as usize;
    pool.lock();
    // SAFETY: p is an object of this pool the program gave back: its
    // first word holds the free list's link until it is handed out again.
    unsafe { *(p as *mut usize) = pool.free[k].load(SeqCst) };
    pool.free[k].store(p as usize, SeqCst);
    pool.unlock();
    true
}

/// Small allocations selected but left to the heap.
pub fn spilled() -> usize {
    SPILLED.load(SeqCst)
}

extern "C" fn lock_all() {
    for pool in &POOLS[..USED.load(SeqCst).min(MAX_POOLS)] {
        pool.lock();
    }
}

extern "C" fn unlock_all() {
    for pool in &POOLS[..USED.load(SeqCst).min(MAX_POOLS)] {
        pool.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_place(_: usize, _: usize, _: usize) {}

    #[test]
    fn classes_double_from_16_to_a_page() {
        assert_eq!(class(1), Some((0, 16)));
        assert_eq!(class(16), Some((0, 16)));
        assert_eq!(class(17), Some((1, 32)));
        assert_eq!(class(2049), Some((8, 4096)));
        assert_eq!(class(page_size()), Some((8, 4096)));
        assert_eq!(class(page_size() + 1), None);
    }

    #[test]
    fn objects_come_from_the_pool_and_freed_ones_come_back_first() {
        // Pool 63: no other test uses it.
        let entry = 63;
        let a: Vec<usize> = (0..5000)
            .map(|_| alloc(entry, 24, false, no_place).unwrap() as usize)
            .collect();
        let start = POOLS[entry].start.load(SeqCst);
        assert!(a.iter().all(|&p| p >= start && p < start + POOL_BYTES));
        // 32-byte objects, each its own: 5000 of them fill 3 slabs.
        let mut sorted = a.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 5000);
        assert!(a.iter().all(|p| p % 32 == 0));
        assert_eq!(POOLS[entry].slabs.load(SeqCst), 3);
        assert_eq!(usable(a[7] as *const _), Some(32));
        let big = alloc(entry, 3000, true, no_place).unwrap();
        assert_eq!(usable(big), Some(4096));
        // SAFETY: the object's first 3000 bytes, just cleared.
        let cleared = unsafe { std::slice::from_raw_parts(big as *const u8, 3000) };
        assert!(cleared.iter().all(|b| *b == 0));
        assert!(free(a[10] as *mut _));
        assert!(free(a[20] as *mut _));
        assert_eq!(alloc(entry, 30, false, no_place).unwrap() as usize, a[20]);
        assert_eq!(alloc(entry, 17, false, no_place).unwrap() as usize, a[10]);
        // Not a pool's: left to libc.
        let heap = Box::into_raw(Box::new([0u8; 24]));
        assert!(!free(heap as *mut _));
        assert_eq!(usable(heap as *const _), None);
        // SAFETY: the box made above.
        drop(unsafe { Box::from_raw(heap) });
    }
}
