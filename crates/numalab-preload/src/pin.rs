//! Threads pinned one CPU each (`numalab run --pin`, as likwid-pin does):
//! the main thread to the list's first CPU as the library starts, then
//! each thread the program creates to the next CPU of the list in the
//! order the threads were created (from the first again past its end),
//! whatever order they start in. A thread `--skip` names (a
//! runtime's helper, such as an OpenMP runtime's shepherd) is left on the
//! process's CPUs (those it had when the library started: a thread would
//! otherwise inherit its creator's single CPU) and takes no CPU of the
//! list.
//!
//! Each thread pins itself (`sched_setaffinity` on itself, before the
//! program's start routine runs), so the program never sees a thread
//! running elsewhere first; a Pinned record says what was done and where
//! the thread ran right after, for `run --verify`.

use crate::record::Record;
use crate::runtime::emit::emit;
use crate::runtime::state::config;
use crate::runtime::sys;
use numalab_profile_abi::events::Pinned;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};

/// The highest CPU number a mask here can hold (8192 CPUs).
const MASK_WORDS: usize = 128;

/// The process's CPUs when the library started, for skipped threads.
static ORIGINAL: [AtomicU64; MASK_WORDS] = [const { AtomicU64::new(0) }; MASK_WORDS];

/// Whether threads are pinned in this process.
pub fn on() -> bool {
    config().pin.as_ref().is_some_and(|l| !l.is_empty())
}

/// Pins the main thread (the library's constructor).
pub fn init() {
    if on() {
        let mut mask = [0u64; MASK_WORDS];
        // SAFETY: the mask is MASK_WORDS words, the size passed; tid 0 is
        // the calling thread.
        let r = unsafe {
            libc::syscall(
                libc::SYS_sched_getaffinity,
                0,
                std::mem::size_of_val(&mask),
                mask.as_mut_ptr(),
            )
        };
        if r > 0 {
            for (o, w) in ORIGINAL.iter().zip(mask) {
                o.store(w, SeqCst);
            }
        }
        place(0);
    }
}

/// Pins (or skips) a created thread of `ordinal` as it starts.
pub fn thread_starts(ordinal: u32) {
    if on() {
        place(ordinal);
    }
}

fn place(ordinal: u32) {
    let Some(list) = config().pin.as_ref().filter(|l| !l.is_empty()) else {
        return;
    };
    // From the ordinal (given at creation), not a count of starts: two
    // threads created in one order often start in the other.
    let cpu = config()
        .pin_position(ordinal)
        .map(|at| list[(at % list.len() as u64) as usize]);
    let errno = match cpu {
        Some(c) => {
            let mut mask = [0u64; MASK_WORDS];
            match mask.get_mut(c as usize / 64) {
                Some(w) => {
                    *w = 1 << (c % 64);
                    set_affinity(&mask)
                }
                None => libc::EINVAL,
            }
        }
        None => {
            let mut mask = [0u64; MASK_WORDS];
            for (m, o) in mask.iter_mut().zip(&ORIGINAL) {
                *m = o.load(SeqCst);
            }
            if mask.iter().all(|w| *w == 0) {
                0
            } else {
                set_affinity(&mask)
            }
        }
    };
    // SAFETY: sched_getcpu has no preconditions.
    let ran_on = unsafe { libc::sched_getcpu() };
    let record: Record = Pinned {
        // SAFETY: getpid has no preconditions.
        pid: unsafe { libc::getpid() } as u32,
        tid: sys::gettid(),
        ordinal,
        cpu,
        errno,
        ran_on: u32::try_from(ran_on).ok(),
        time_ns: sys::monotonic_ns(),
    }
    .to_record();
    emit(&record);
}

/// Sets the calling thread's CPUs to `mask`; the errno (0: done).
fn set_affinity(mask: &[u64; MASK_WORDS]) -> i32 {
    // SAFETY: the mask is MASK_WORDS words, the size passed; tid 0 is the
    // calling thread.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sched_setaffinity,
            0,
            std::mem::size_of_val(mask),
            mask.as_ptr(),
        )
    };
    if r == 0 {
        0
    } else {
        // SAFETY: errno is this thread's.
        unsafe { *libc::__errno_location() }
    }
}
