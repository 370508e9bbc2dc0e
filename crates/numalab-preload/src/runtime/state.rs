//! The library's process-wide state: what the environment asks (read
//! once, at start), and the switches and counters every layer reads.
//! Atomics and thread-local flags only: the fault handler reads them.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::SeqCst};

/// Where records go (`NUMALAB_PROFILE_OUT`, opened for appending); -1: off.
pub static OUT_FD: AtomicI32 = AtomicI32::new(-1);
/// Set once the library sampled anything: the handler and hooks are live.
pub static ACTIVE: AtomicBool = AtomicBool::new(false);
pub static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);
/// Allocations at least this large are tracked (and their pages armed).
pub static MIN_BYTES: AtomicUsize = AtomicUsize::new(64 << 10);
/// Samples taken and pages armed, for the totals at exit.
pub static SAMPLES: AtomicUsize = AtomicUsize::new(0);
/// First touches taken (faults on pages armed absent).
pub static FIRST_TOUCHES: AtomicUsize = AtomicUsize::new(0);
pub static ARMED_TOTAL: AtomicUsize = AtomicUsize::new(0);

/// When the library started (CLOCK_MONOTONIC ns, the Start record's).
pub static START_NS: AtomicU64 = AtomicU64::new(0);

/// Set while the library starts its own thread: the interposed
/// `pthread_create` passes it through (its stack is not the program's).
pub static SAMPLER_STARTING: AtomicBool = AtomicBool::new(false);
/// The program runs Go's runtime (cgo: `crosscall2` is exported), whose
/// system calls do not go through libc: a `read` into an armed page would
/// fail with EFAULT where no hook can disarm it first. No page is armed
/// then; word counts (watchpoints, which the kernel's own accesses do not
/// trip) sample its accesses.
pub static GO_RUNTIME: AtomicBool = AtomicBool::new(false);

/// The page size (`sysconf`, read at start).
pub fn page_size() -> usize {
    PAGE_SIZE.load(SeqCst)
}

/// Whether the library samples (see [`ACTIVE`]).
pub fn active() -> bool {
    ACTIVE.load(SeqCst)
}

/// What the environment asks the library to do, read once at its start
/// (before `main`).
pub fn config() -> &'static numalab_profile_abi::config::LibraryConfig {
    static CONFIG: std::sync::OnceLock<numalab_profile_abi::config::LibraryConfig> =
        std::sync::OnceLock::new();
    CONFIG.get_or_init(numalab_profile_abi::config::LibraryConfig::from_env)
}

/// The share of the program's CPU time sampling may take by default, as
/// the library measures it: 0.5%. A delay of one thread holds up every
/// thread that waits for it: the truth program's two threads, meeting at
/// a barrier every 2 ms on a machine they fill, lost about twice the
/// measured share in wall time (3.5% at 1%, 0.3% at 0.5%, 1.5 s runs, 60
/// paired rounds). At 0.5% and sixteen pages a sampler tick it takes as
/// many samples as it took at 1% and four a tick (docs/profile.md,
/// "Overhead measured").
pub const DEFAULT_OVERHEAD: f64 = 0.005;

thread_local! {
    /// Set on the library's own thread (the sampler): its allocations are
    /// not the program's, and are never armed.
    static LIBRARY_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as the library's own.
pub fn library_thread() {
    LIBRARY_THREAD.with(|l| l.set(true));
}

/// Whether this is the library's own thread (the sampler), whose
/// allocations are not the program's.
pub fn on_library_thread() -> bool {
    LIBRARY_THREAD.with(|l| l.get())
}
