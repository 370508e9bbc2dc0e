//! Records on their way to the output file. A `write(2)` per sample cost a
//! system call in the fault handler; the handler now puts its record in a
//! bounded lock-free queue (Vyukov's, over static slots) and the sampler
//! thread writes them out a tick later, many per call. Pushing allocates
//! nothing and takes no lock, so it is safe in a signal handler.
//!
//! The queue's order is the order records were pushed, so an allocation's
//! record still comes before its samples and its free. When the queue is
//! off (no sampler thread, or in a forked child, whose copy of the queue
//! holds the parent's records) or full, a record is written directly;
//! records lost that way are counted.

use super::sys;
use crate::record::RECORD_BYTES;
use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};

/// Records queued at most (1.5 MiB): several ticks of the busiest program.
const CAPACITY: usize = 32 << 10;

struct Slot {
    /// Vyukov's sequence number less the slot's index, so that the table
    /// can start all zero: slot i takes position p when `seq + i == p`,
    /// and holds a record of p when `seq + i == p + 1`.
    seq: AtomicUsize,
    bytes: UnsafeCell<[u8; RECORD_BYTES]>,
}

// SAFETY: `bytes` is written only by the producer that won the slot's
// position and read only by the consumer once `seq` published it.
unsafe impl Sync for Slot {}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY: Slot = Slot {
    seq: AtomicUsize::new(0),
    bytes: UnsafeCell::new([0; RECORD_BYTES]),
};

static SLOTS: [Slot; CAPACITY] = [EMPTY; CAPACITY];
/// The next position to push to and to take from.
static TAIL: AtomicUsize = AtomicUsize::new(0);
static HEAD: AtomicUsize = AtomicUsize::new(0);
/// Whether records go through the queue (a sampler thread drains it).
static ON: AtomicBool = AtomicBool::new(false);
/// Held by the one thread draining.
static DRAINING: AtomicBool = AtomicBool::new(false);
/// Records written past a full queue (possibly out of order).
static OVERFLOWED: AtomicUsize = AtomicUsize::new(0);

/// Turns the queue on: call once the sampler thread runs.
pub fn enable() {
    ON.store(true, SeqCst);
}

/// Turns it off (a forked child: no sampler, and the slots hold the
/// parent's records, which the parent writes).
pub fn disable() {
    ON.store(false, SeqCst);
}

/// Records that went around a full queue.
pub fn overflowed() -> usize {
    OVERFLOWED.load(SeqCst)
}

/// Queues `b`, or writes it to `fd` when the queue is off or full.
pub fn push(fd: i32, b: &[u8; RECORD_BYTES]) {
    if ON.load(SeqCst) && try_push(b) {
        return;
    }
    if ON.load(SeqCst) {
        OVERFLOWED.fetch_add(1, SeqCst);
    }
    if fd >= 0 {
        write_checked(b);
    }
}

/// Writes to the records' channel, checked first ([`super::channel`]): never
/// into a file of the program's that took over its descriptor.
fn write_checked(b: &[u8]) {
    let fd = super::channel::checked();
    if fd >= 0 {
        sys::write_all(fd, b);
    }
}

fn try_push(b: &[u8; RECORD_BYTES]) -> bool {
    loop {
        let pos = TAIL.load(SeqCst);
        let i = pos % CAPACITY;
        let slot = &SLOTS[i];
        let seq = slot.seq.load(SeqCst).wrapping_add(i);
        let lead = seq.wrapping_sub(pos) as isize;
        if lead == 0 {
            if TAIL
                .compare_exchange(pos, pos.wrapping_add(1), SeqCst, SeqCst)
                .is_ok()
            {
                // SAFETY: this thread won position `pos`: the slot is its
                // own until it publishes the record below.
                unsafe { *slot.bytes.get() = *b };
                slot.seq.store(pos.wrapping_add(1).wrapping_sub(i), SeqCst);
                return true;
            }
        } else if lead < 0 {
            return false;
        }
    }
}

/// Writes every published record to `fd`, in order, many per system call.
/// One thread drains at a time; another caller waits for it (at exit) or
/// returns (`wait` false: the sampler's tick).
pub fn drain(fd: i32, wait: bool) {
    drain_inspecting(fd, wait, |_| {});
}

/// [`drain`], showing each record to `inspect` on its way out.
pub fn drain_inspecting(fd: i32, wait: bool, mut inspect: impl FnMut(&[u8; RECORD_BYTES])) {
    while DRAINING
        .compare_exchange(false, true, SeqCst, SeqCst)
        .is_err()
    {
        if !wait {
            return;
        }
        std::hint::spin_loop();
    }
    let mut out = [0u8; 128 * RECORD_BYTES];
    loop {
        let mut n = 0;
        while n < 128 {
            let pos = HEAD.load(SeqCst);
            let i = pos % CAPACITY;
            let slot = &SLOTS[i];
            let seq = slot.seq.load(SeqCst).wrapping_add(i);
            if seq != pos.wrapping_add(1) {
                break;
            }
            // SAFETY: `seq` says the record of `pos` is published; no
            // producer takes the slot until it is released below.
            let b = unsafe { *slot.bytes.get() };
            inspect(&b);
            out[n * RECORD_BYTES..(n + 1) * RECORD_BYTES].copy_from_slice(&b);
            slot.seq
                .store(pos.wrapping_add(CAPACITY).wrapping_sub(i), SeqCst);
            HEAD.store(pos.wrapping_add(1), SeqCst);
            n += 1;
        }
        if n == 0 {
            break;
        }
        if fd >= 0 {
            write_checked(&out[..n * RECORD_BYTES]);
        }
    }
    DRAINING.store(false, SeqCst);
}
