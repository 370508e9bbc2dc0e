//! The SIGSEGV handler: a fault on an armed page is a sample; any other
//! fault is the program's, delivered to the handler it installed (kept by
//! the interposed `sigaction` and `signal`), or fatal as without us.

use crate::cost;
use crate::record::{Kind, Record, FLAG_ACCESS_UNKNOWN, FLAG_HUGE, FLAG_WRITE, FLAG_WRITE_PROBE};
use crate::runtime::state::{page_size, FIRST_TOUCHES, SAMPLES};
use crate::runtime::{emit, sys};
use crate::signals::{chain, take_signal, KeptAction};
use crate::tables::{self, Lookup};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// The program's SIGSEGV action.
static PROGRAM: KeptAction = KeptAction::new();

/// Whether the handler is installed (then SIGSEGV actions are the
/// program's, kept here).
static INSTALLED: AtomicBool = AtomicBool::new(false);

pub fn installed() -> bool {
    INSTALLED.load(SeqCst)
}

/// The program's SIGSEGV action, for the interposed `sigaction`.
pub fn program_action_kept() -> &'static KeptAction {
    &PROGRAM
}

/// Installs the handler, keeping the action in place as the program's.
pub fn install() -> bool {
    // A word counter's turn never runs inside a sample's handler (both
    // write records and read the tables).
    let blocked = Some(crate::words::signal_number());
    if !take_signal(libc::SIGSEGV, on_fault, blocked, &PROGRAM) {
        return false;
    }
    INSTALLED.store(true, SeqCst);
    true
}

/// Whether the faulting access wrote (x86_64: the page-fault error code).
#[cfg(target_arch = "x86_64")]
fn access_flags(ctx: *mut libc::c_void) -> u32 {
    if ctx.is_null() {
        return FLAG_ACCESS_UNKNOWN;
    }
    // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
    let err =
        unsafe { (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_ERR as usize] };
    if err & 2 != 0 {
        FLAG_WRITE
    } else {
        0
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn access_flags(_ctx: *mut libc::c_void) -> u32 {
    FLAG_ACCESS_UNKNOWN
}

extern "C" fn on_fault(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // The program's errno survives the handler's own system calls (a
    // sample lands between any call and the program's look at its errno;
    // `sched_getaffinity` for a thread's first sample can fail, EINVAL on
    // a machine of more CPUs than its mask holds). A fault chained to the
    // program's own handler leaves errno to that handler, as without us.
    // SAFETY: this thread's errno location.
    let errno = unsafe { *libc::__errno_location() };
    if !handle(sig, info, ctx) {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = errno };
    }
}

/// Takes a fault; whether it went to the program's own handler.
fn handle(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) -> bool {
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = addr & !(page_size() - 1);
    match tables::lookup_fault(page) {
        Lookup::Claimed {
            index,
            start,
            len,
            prot,
            node,
            probe,
        } => {
            // The record's time, and the handler's cost by this thread's
            // CPU clock: by the wall clock, a handler preempted on a busy
            // host counted the other threads' time as the library's (one
            // of 15 samples once took 4 ms of a 0.2 s run), and an adaptive
            // rate fell for it.
            let t0 = sys::monotonic_ns();
            let c0 = sys::cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID);
            let took = || sys::cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(c0);
            sys::mprotect(start, len, prot);
            if cost::is_calibration(page) {
                tables::release(index);
                cost::handler_took(page, took());
                return false;
            }
            if !crate::select::thread_selected() {
                // Outside --threads: the access runs on, unrecorded (the
                // protection is the process's, so other threads fault too).
                crate::select::SKIPPED.fetch_add(1, SeqCst);
                tables::release(index);
                cost::handler_took(page, took());
                return false;
            }
            if !SEEN.with(|s| s.replace(true)) {
                // Once per thread: whether it is pinned, and its ordinal.
                crate::places::emit_thread(t0);
            }
            // A page armed absent: this access puts it somewhere (first
            // touch); the sampler looks up where at its next tick.
            let first = node == tables::NODE_ABSENT && !probe;
            if first {
                tables::add_pending(page);
                FIRST_TOUCHES.fetch_add(1, SeqCst);
            } else {
                SAMPLES.fetch_add(1, SeqCst);
            }
            // Queued before the entry is released: a free of the region
            // waits for the release, so its record comes after this one.
            emit(&Record {
                kind: if first {
                    Kind::FirstTouch
                } else {
                    Kind::Sample
                },
                tid: sys::gettid(),
                cpu: sys::cpu(),
                node: if first { -1 } else { node },
                flags: access_flags(ctx)
                    | if probe { FLAG_WRITE_PROBE } else { 0 }
                    | if len > page_size() { FLAG_HUGE } else { 0 },
                addr: addr as u64,
                size: 0,
                time_ns: t0,
                aux: 0,
            });
            tables::release(index);
            cost::handler_took(page, took());
        }
        // Another thread is arming or restoring the page: run the access
        // again once it settles.
        Lookup::Settling => {}
        Lookup::NotOurs if sent_by_kernel(info) && !repeated(addr, ip_of(ctx)) => {}
        Lookup::NotOurs => {
            chain(&PROGRAM, sig, info, ctx);
            return true;
        }
    }
    false
}

thread_local! {
    /// Whether this thread's affinity was recorded.
    static SEEN: Cell<bool> = const { Cell::new(false) };
    /// This thread's last fault taken for a late one: address, instruction,
    /// and the disarm count then.
    static LAST_RETRY: Cell<(usize, usize, u64)> = const { Cell::new((0, 0, u64::MAX)) };
}

/// Whether this fault is the program's: the same access faulted last time
/// with no page disarmed since. Otherwise it may have hit a page another
/// thread disarmed before this handler ran: it is run again once.
fn repeated(addr: usize, ip: usize) -> bool {
    let now = tables::disarms();
    LAST_RETRY.with(|c| {
        let (a, i, g) = c.get();
        if a == addr && i == ip && g == now {
            c.set((0, 0, u64::MAX));
            true
        } else {
            c.set((addr, ip, now));
            false
        }
    })
}

#[cfg(target_arch = "x86_64")]
fn ip_of(ctx: *mut libc::c_void) -> usize {
    if ctx.is_null() {
        return 0;
    }
    // SAFETY: the kernel passes a ucontext_t to an SA_SIGINFO handler.
    unsafe {
        (*(ctx as *const libc::ucontext_t)).uc_mcontext.gregs[libc::REG_RIP as usize] as usize
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn ip_of(_ctx: *mut libc::c_void) -> usize {
    0
}

fn sent_by_kernel(info: *mut libc::siginfo_t) -> bool {
    // SAFETY: info is the kernel's siginfo_t.
    unsafe { (*info).si_code > 0 }
}
