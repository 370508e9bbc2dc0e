//! The library `numalab profile` preloads into a program
//! (`LD_PRELOAD=libnumalab_preload.so`) to sample which memory its threads
//! access, from which CPU, without a hardware PMU.
//!
//! How: a sampler thread arms a few pages of the program's large
//! allocations with `mprotect(PROT_NONE)`. The next access to such a page
//! faults; the SIGSEGV handler records the thread, its CPU, the page's node
//! (`move_pages`, asked when it was armed) and whether it was a write,
//! restores the protection and lets the access run again. A page that was
//! not present when armed records its first touch instead (who put it
//! where). Everything else is about not changing what
//! the program sees (docs/profile.md):
//!
//! - A system call given an armed buffer would fail with EFAULT instead of
//!   faulting: the buffer-taking calls (`read`, `write`, `recv`, `send`,
//!   their vector and message-vector forms, `fread`, `fwrite`, their
//!   unlocked forms, `getrandom`, glibc's fortified `__*_chk` variants,
//!   which call libc's internal `read`, and the calls answered in an array
//!   the program gives: `epoll_wait`, `poll`, `select`, `getdents64`,
//!   `readlink`, `getcwd`) are interposed, publish their buffer as busy and
//!   disarm it first ([`tables`] has the handshake).
//! - Only pages wholly inside allocations of at least
//!   `NUMALAB_PROFILE_MIN_BYTES` (malloc family and anonymous mmaps) are
//!   armed: never a stack (the handler runs on it), never small heap
//!   objects (mutexes, whose futex calls cannot be interposed).
//! - The program's SIGSEGV handler is kept: `sigaction` and `signal` are
//!   interposed, and a fault that is not a sample goes to the program's
//!   handler, or kills the process as the default action would.
//! - The program's own `mprotect`, `munmap` and `mremap` win: the range's
//!   armed pages are disarmed and its regions are never armed again.
//! - Memory libc fills with system calls of its own (a directory's buffer,
//!   a stdio buffer the program gives `setvbuf`) is never armed: libc's own
//!   allocations are counted by word only (`tables::Arming::WordsOnly`), and
//!   `setvbuf`'s buffer is let go.
//! - The program's descriptors stay its own: the library's sit from 700
//!   up and are known again before each use (`runtime::sys::HIGH_FD`), so
//!   a program that closes every descriptor and opens files under the
//!   same numbers never has one read or closed by the library.
//!
//! It also places memory where the kernel cannot for a whole process
//! (`numalab run --plan`, stripes of `interleave:NODES@PAGES`): the `plan`
//! module, driven by `NUMALAB_PLAN`. Without `NUMALAB_PROFILE_OUT` and
//! `NUMALAB_PLAN` in the environment the library does nothing but pass
//! every call through.
//!
//! # Layers
//!
//! Each module calls only the layers before it (a test checks it); nothing
//! below the hooks calls into them, and nothing calls up into this file:
//!
//! 1. `runtime`: what everything stands on: the process-wide state and
//!    configuration (`state`), records out (`emit`, `queue`, `channel`),
//!    call stacks (`stacks`), system calls made directly (`sys`) and the
//!    libc functions the hooks forward to (`next`).
//! 2. [`tables`]: the armed pages, tracked allocations and busy buffers
//!    the sampler, the handler and the hooks share.
//! 3. The mechanisms: which allocations and threads are selected
//!    (`select`), huge pages (`huge`), static data, stacks and a region's
//!    pages (`places`), the signals the library takes (`signals`, `traps`,
//!    `fault`), small allocations (`small`), word counts (`words`, with what their
//!    context switches cost measured in `switch_cost`), the
//!    cost controller (`cost`), placement (`plan`, `pool`), refinement
//!    (`refine`), PMU sampling (`pmu`) and threads pinned one CPU each
//!    (`pin`, `numalab run --pin`).
//! 4. `hooks` (the interposed libc functions) and `sampler` (the library's
//!    thread).
//! 5. This file: the constructor that starts them, and the handlers at
//!    exit and in a forked child.

// The records, their flags and the perf structures: the contract crate's,
// which the engine reads them back with.
pub(crate) use numalab_profile_abi::{perf, record};

// 1. runtime
mod runtime;
// 2. tables
pub mod tables;
// 3. mechanisms (the test below lists them in an order where each uses
// only those before it)
mod cost;
mod fault;
mod huge;
mod pin;
mod places;
mod plan;
mod pmu;
mod pool;
mod refine;
mod select;
mod signals;
mod small;
mod switch_cost;
mod traps;
mod words;
// 4. hooks and the sampler
mod hooks;
mod sampler;

use runtime::emit::{emit, emit_thread_names, save_maps};
use runtime::state::{
    active, config, page_size, ACTIVE, ARMED_TOTAL, DEFAULT_OVERHEAD, GO_RUNTIME, MIN_BYTES,
    OUT_FD, PAGE_SIZE, SAMPLER_STARTING, SAMPLES, START_NS,
};
use runtime::{channel, queue, sys};
use std::sync::atomic::Ordering::SeqCst;

/// Whether the program runs Go's runtime (see [`GO_RUNTIME`]); looked up
/// once at start, outside any hook.
fn go_runtime_linked() -> bool {
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name; called
    // from the library's constructor, not from a hook.
    unsafe { !libc::dlsym(libc::RTLD_DEFAULT, c"crosscall2".as_ptr()).is_null() }
}

extern "C" fn at_exit() {
    plan::at_exit();
    if !active() {
        return;
    }
    // Every thread's last window of word counts.
    words::at_exit();
    // First touches since the sampler's last tick.
    tables::take_pending(sampler::touched);
    tables::for_each_region(places::emit_pages);
    places::at_exit();
    pmu::report();
    emit_thread_names();
    save_maps();
    cost::emit_totals();
    // A descriptor the program closed or took since the last write is
    // found (and opened again) now, so that the Totals say so.
    channel::checked();
    emit(
        &numalab_profile_abi::events::Totals {
            tid: sys::gettid(),
            pages_armed: ARMED_TOTAL.load(SeqCst) as u64,
            samples: SAMPLES.load(SeqCst) as u64,
            lost_records: queue::overflowed().min(i32::MAX as usize) as u32,
            other_thread_samples: select::SKIPPED.load(SeqCst).min(u32::MAX as u64) as u32,
            channel_reopened: channel::reopened().min(u32::MAX as usize) as u32,
            busy_table_full: Some(tables::busy_table_full().min(u32::MAX as u64) as u32),
            time_ns: sys::monotonic_ns(),
        }
        .to_record(),
    );
    queue::drain(OUT_FD.load(SeqCst), true);
}

/// In a forked child: records are written directly (the child has no
/// sampler thread; its copy of the queue holds the parent's records).
extern "C" fn after_fork_in_child() {
    queue::disable();
    words::after_fork_in_child();
    // Said, so that the profile can tell that a child was not sampled.
    // SAFETY: getpid and getppid have no preconditions.
    let (pid, parent) = unsafe { (libc::getpid(), libc::getppid()) };
    emit(&record::Record {
        kind: record::Kind::Forked,
        tid: pid as u32,
        cpu: u32::MAX,
        node: 0,
        flags: 0,
        addr: parent as u64,
        size: 0,
        time_ns: sys::monotonic_ns(),
        aux: 0,
    });
}

/// The sampling rate the environment asks for: `NUMALAB_PROFILE_RATE`
/// (pages a second, fixed) or `NUMALAB_PROFILE_OVERHEAD` (percent of the
/// program's CPU time, adaptive), else the default target.
fn rate_policy() -> sampler::RatePolicy {
    if let Some(r) = config().rate {
        return sampler::RatePolicy::Fixed(r);
    }
    sampler::RatePolicy::Overhead(
        config()
            .overhead_percent
            .map_or(DEFAULT_OVERHEAD, |p| p / 100.0),
    )
}

/// Runs when the library is loaded, before the program's `main`.
extern "C" fn init() {
    // SAFETY: sysconf has no preconditions.
    let ps = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if ps > 0 {
        PAGE_SIZE.store(ps as usize, SeqCst);
    }
    hooks::resolve_early();
    let profiled = config().records.as_ref();
    // Records go to the profile's file, or with placement only (`numalab
    // run --plan`) to the plan's, written by the thread that makes them.
    let out = profiled.or(config().plan_records.as_ref());
    // On a high descriptor, checked before every write: a program that
    // closes or reuses descriptors never gets records in its own files.
    if let Some(path) = out {
        match channel::open(path) {
            Ok(fd) => OUT_FD.store(fd, SeqCst),
            // Set by hand (numalab makes its own files): said once, on
            // the program's stderr, rather than a run that silently
            // records nothing.
            Err(errno) => {
                let var = if profiled.is_some() {
                    numalab_profile_abi::config::var::PROFILE_OUT
                } else {
                    numalab_profile_abi::config::var::PLAN_OUT
                };
                let line = format!(
                    "numalab: {var}={}: {}; the program runs without the library's records\n",
                    path.to_string_lossy(),
                    std::io::Error::from_raw_os_error(errno)
                );
                // SAFETY: writes the line's bytes to descriptor 2.
                unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
            }
        }
    }
    // Threads pinned (`run --pin`): the main thread now, before `main`.
    pin::init();
    if plan::init() {
        // SAFETY: at_exit is an extern "C" fn with no arguments.
        unsafe { libc::atexit(at_exit) };
    }
    if profiled.is_none() {
        return;
    }
    if let Some(b) = config().min_bytes {
        MIN_BYTES.store(b.max(page_size()), SeqCst);
    }
    START_NS.store(sys::monotonic_ns(), SeqCst);
    select::init();
    small::init();
    let pmu = pmu::init();
    let policy = rate_policy();
    // The seconds to sample for, from the start.
    let duration_ns = config()
        .duration_s
        .map(|s| (s * 1e9).min(u64::MAX as f64) as u64);
    if OUT_FD.load(SeqCst) < 0 {
        return;
    }
    if !fault::install() {
        return;
    }
    GO_RUNTIME.store(go_runtime_linked(), SeqCst);
    ACTIVE.store(true, SeqCst);
    emit(
        &numalab_profile_abi::events::Start {
            // SAFETY: getpid has no preconditions.
            pid: unsafe { libc::getpid() } as u32,
            page_size: page_size() as u64,
            min_bytes: MIN_BYTES.load(SeqCst) as u64,
            fixed_rate: match policy {
                sampler::RatePolicy::Fixed(r) => Some(r.min(i32::MAX as usize) as u32),
                sampler::RatePolicy::Overhead(_) => None,
            },
            window_ms: duration_ns.map(|d| (d / 1_000_000).min(u32::MAX as u64 - 1) as u32),
            refining: refine::requested(),
            pmu,
            go_runtime: GO_RUNTIME.load(SeqCst),
            time_ns: START_NS.load(SeqCst),
        }
        .to_record(),
    );
    // SAFETY: at_exit is an extern "C" fn with no arguments (registered
    // once: the plan's start did when a plan is in force); the fork hook
    // is a valid child handler.
    unsafe {
        if !plan::active() {
            libc::atexit(at_exit);
        }
        libc::pthread_atfork(None, None, Some(after_fork_in_child));
    }
    sys::watch_forks();
    // Word counts need no sampler thread: each thread turns its own
    // windows (words.rs). Started before the sampler so that its first
    // Cost record sees the cost of one counted access. Both watch words
    // with debug registers: SIGTRAP is held first (traps.rs).
    traps::guard();
    words::init(
        refine::requested(),
        !matches!(policy, sampler::RatePolicy::Fixed(0)),
    );
    SAMPLER_STARTING.store(true, SeqCst);
    let sampling = sampler::start(policy, duration_ns);
    SAMPLER_STARTING.store(false, SeqCst);
    if sampling {
        queue::enable();
    }
    places::thread_starts();
    pmu::thread_starts();
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[cfg(test)]
mod layering {
    /// The modules in an order where each uses only modules before it
    /// (the layers of the crate's documentation, bottom first).
    const ORDER: &[&str] = &[
        "runtime",
        "tables",
        "pin",
        "select",
        "huge",
        "places",
        "signals",
        "traps",
        "small",
        "switch_cost",
        "words",
        "cost",
        "fault",
        "pool",
        "plan",
        "refine",
        "pmu",
        "hooks",
        "sampler",
    ];

    #[test]
    fn every_module_uses_only_the_layers_below_it() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        numalab_testkit::layering::assert_layered(&src, ORDER);
    }
}
