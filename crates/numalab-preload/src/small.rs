//! Allocations below `--min-bytes`: too many to track one by one, and
//! never armed (a mutex in a small heap object would see its futex call
//! fail on an armed page). They are sampled by bytes instead, as heap
//! profilers do: each thread draws the bytes until its next sampled
//! allocation from an exponential distribution of mean
//! `NUMALAB_PROFILE_SMALL_EVERY` (default 512 KiB; 0: off), so that an
//! allocation of n bytes is drawn with probability 1 - exp(-n/mean). A
//! drawn allocation is a SmallAlloc record with its call stack, its size
//! and its page's node; the engine weighs each by the inverse of its
//! probability to estimate each site's allocations and bytes. The cost
//! when nothing is drawn: a subtraction per allocation (see [`Shard`]); the
//! draws' time counts in what sampling costs, and the mean doubles while
//! draws alone take over half the target.

use crate::runtime::state::{config, on_library_thread, page_size};
use crate::runtime::{emit, stacks, sys};
use std::sync::atomic::{
    AtomicI64, AtomicU64, AtomicUsize,
    Ordering::{Relaxed, SeqCst},
};

/// The default mean of bytes between two sampled small allocations.
pub const DEFAULT_EVERY: usize = 512 << 10;
/// The mean in force (0: off).
static EVERY: AtomicUsize = AtomicUsize::new(DEFAULT_EVERY);
/// Numbers the sampled allocations: their Frame records' key.
static SEQUENCE: AtomicU64 = AtomicU64::new(0);
/// Time spent recording drawn allocations (call stack, node, records),
/// in ns: part of what sampling costs (see [`crate::cost`]).
static DRAW_NS: AtomicU64 = AtomicU64::new(0);
/// The largest mean the controller raises it to (1 TiB).
const MAX_EVERY: usize = 1 << 40;

/// Time spent on drawn allocations so far, in ns.
pub fn draw_ns() -> u64 {
    DRAW_NS.load(SeqCst)
}

/// The controller's say: drawing took `share` of the program's CPU time
/// in its last window, against a `target` for all of sampling. Above
/// half of it, the mean doubles (the records say each draw's mean, so
/// the estimates stay unbiased).
pub fn adapt(share: f64, target: f64) {
    let every = every();
    if every != 0 && share > target / 2.0 {
        EVERY.store((every * 2).min(MAX_EVERY), SeqCst);
    }
}

/// Sampled allocations at most (about 430 MB of records with their
/// stacks): a program profiled for hours keeps a bounded profile.
const MAX_SAMPLED: u64 = 1 << 20;

/// Bytes still to allocate before the next draw, in shards chosen by the
/// allocating thread's stack address (thread stacks lie megabytes apart:
/// a thread has its shard to itself in practice). A thread-local would be
/// the natural home, but in a shared library every access to one is a
/// call to `__tls_get_addr`, which doubled the cost of this hot path (3
/// ns an allocation on the malloc benchmark of docs/profile.md). Plain
/// loads and stores, no read-modify-write: two threads sharing a shard
/// may lose a subtraction, which draws a little less often there.
#[repr(align(64))]
struct Shard {
    left: AtomicI64,
    random: AtomicU64,
}

const SHARDS: usize = 256;
#[allow(clippy::declare_interior_mutable_const)]
const NEW_SHARD: Shard = Shard {
    left: AtomicI64::new(i64::MIN),
    random: AtomicU64::new(0),
};
static SHARDS_LEFT: [Shard; SHARDS] = [NEW_SHARD; SHARDS];

/// This thread's shard.
fn shard() -> &'static Shard {
    let here = 0u8;
    let sp = std::ptr::addr_of!(here) as usize;
    &SHARDS_LEFT[(sp >> 21) % SHARDS]
}

/// Reads `NUMALAB_PROFILE_SMALL_EVERY` (bytes, 0: off), at the library's
/// start.
pub fn init() {
    if let Some(b) = config().small_every {
        EVERY.store(b, SeqCst);
    }
}

/// The mean in force, in bytes (0: off).
pub fn every() -> usize {
    EVERY.load(SeqCst)
}

/// Bytes to the next draw: exponential of mean `every`, from `shard`'s
/// generator.
fn draw(shard: &Shard, every: usize) -> i64 {
    let mut x = shard.random.load(Relaxed);
    if x == 0 {
        x = (sys::monotonic_ns() ^ (sys::gettid() as u64).rotate_left(32)) | 1;
    }
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    shard.random.store(x, Relaxed);
    // A uniform in (0, 1].
    let u = ((x >> 11) as f64 + 1.0) / (1u64 << 53) as f64;
    (-u.ln() * every as f64).min(i64::MAX as f64 / 2.0) as i64
}

/// Counts an allocation of `n` bytes at `p` below the tracking threshold
/// (`flags` as an Alloc record's); records it when drawn.
pub fn allocated(p: usize, n: usize, flags: u32) {
    let every = every();
    if every == 0 {
        return;
    }
    let sh = shard();
    let mut left = sh.left.load(Relaxed);
    if left == i64::MIN {
        left = draw(sh, every);
    }
    left -= n as i64;
    let drawn = left <= 0;
    sh.left
        .store(if drawn { draw(sh, every) } else { left }, Relaxed);
    if !drawn || on_library_thread() {
        return;
    }
    let seq = SEQUENCE.fetch_add(1, SeqCst);
    if seq >= MAX_SAMPLED {
        return;
    }
    let key = crate::record::KEY_BIT_SMALL | seq;
    // The drawing thread's CPU time, not the wall clock: the controller
    // weighs it against the program's CPU time, and a draw that another
    // process preempted cost the program nothing (on a busy host the wall
    // clock doubled the mean until a third fewer allocations were drawn).
    let t0 = sys::cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
    let ps = page_size();
    let node = match sys::page_state(p & !(ps - 1), ps) {
        sys::PageState::Present(n) => n,
        sys::PageState::Absent => -1,
    };
    emit(
        &numalab_profile_abi::events::SmallAlloc {
            tid: sys::gettid(),
            addr: p as u64,
            size: n as u64,
            node,
            flags,
            mean_bytes: every as u64,
            key,
        }
        .to_record(),
    );
    stacks::emit_call_stack(key);
    DRAW_NS.fetch_add(
        sys::cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(t0),
        SeqCst,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_average_the_mean() {
        let n = 20_000;
        let sh = shard();
        let sum: i64 = (0..n).map(|_| draw(sh, 1000)).sum();
        let mean = sum as f64 / n as f64;
        assert!((mean - 1000.0).abs() < 50.0, "{mean}");
        assert!((0..1000).all(|_| draw(sh, 1000) >= 0));
    }
}
