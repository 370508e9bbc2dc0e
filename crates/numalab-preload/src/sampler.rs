//! The sampler thread: arms random resident pages of the tracked regions,
//! a few every millisecond, and disarms those no access touched in time.

use crate::tables;
use crate::{page_size, sys, ARMED_TOTAL};
use std::sync::atomic::Ordering::SeqCst;

/// Pages armed per second by default.
pub const DEFAULT_RATE: usize = 2000;
/// A tick of the sampler.
const TICK_NS: u64 = 1_000_000;
/// A page armed longer than this without an access is disarmed.
const MAX_ARMED_NS: u64 = 200_000_000;

pub fn start(rate: usize) {
    if rate == 0 {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("numalab-sampler".into())
        .stack_size(64 << 10)
        .spawn(move || run(rate));
}

/// A small xorshift generator: the sampler only needs spread, not quality.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

fn run(rate: usize) {
    let ps = page_size();
    let mut rng = Random(sys::monotonic_ns() | 1);
    // Pages to arm per tick, in thousandths (rate per second / 1000 ticks).
    let mut owed = 0usize;
    loop {
        sys::sleep_ns(TICK_NS);
        let now = sys::monotonic_ns();
        tables::expire(now.saturating_sub(MAX_ARMED_NS), |page, prot| {
            sys::mprotect(page, ps, prot);
        });
        owed += rate;
        while owed >= 1000 {
            owed -= 1000;
            arm_one(&mut rng, ps);
        }
    }
}

/// Arms one random resident tracked page, if one is free to arm.
fn arm_one(rng: &mut Random, ps: usize) {
    let (_, total) = tables::nth_page(0, ps);
    if total == 0 {
        return;
    }
    let k = (rng.next() % total as u64) as usize;
    let (Some(page), _) = tables::nth_page(k, ps) else {
        return;
    };
    if !sys::resident(page, ps) {
        return;
    }
    let prot = libc::PROT_READ | libc::PROT_WRITE;
    let Some(i) = tables::begin_arming(page, prot) else {
        return;
    };
    // The handshake: after claiming the entry, the region must still be
    // tracked and no system call may be using the page.
    if !tables::in_region(page, ps) || tables::is_busy(page, ps) {
        tables::abandon_arming(i);
        return;
    }
    if sys::mprotect(page, ps, libc::PROT_NONE) != 0 {
        tables::abandon_arming(i);
        return;
    }
    tables::finish_arming(i, sys::monotonic_ns());
    ARMED_TOTAL.fetch_add(1, SeqCst);
}
