//! The sampler thread: arms random resident pages of the tracked regions,
//! a few every millisecond, and disarms those no access touched in time.

use crate::tables;
use crate::{page_size, sys, ARMED_TOTAL};
use std::sync::atomic::Ordering::SeqCst;

/// Pages armed per second by default.
pub const DEFAULT_RATE: usize = 2000;
/// Samples after which the sampler stops arming (about 200 MB of records):
/// a program profiled for hours keeps its profile bounded.
pub const MAX_SAMPLES: usize = 4 << 20;
/// A tick of the sampler.
const TICK_NS: u64 = 1_000_000;
/// Pages armed in one tick at most.
const MAX_BURST: usize = 256;
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
    // Pages owed, in billionths: `rate` a second of the time that passed,
    // whatever a tick really took (a loaded or emulated machine sleeps
    // longer), at most MAX_BURST at once.
    let mut owed: u128 = 0;
    let mut last = sys::monotonic_ns();
    loop {
        sys::sleep_ns(TICK_NS);
        let now = sys::monotonic_ns();
        tables::expire(now.saturating_sub(MAX_ARMED_NS), |page, prot| {
            sys::mprotect(page, ps, prot);
        });
        owed += rate as u128 * now.saturating_sub(last) as u128;
        last = now;
        let mut burst = 0;
        // The tracked pages are counted once a tick, not once a page.
        let (_, total) = tables::nth_page(0, ps);
        while owed >= 1_000_000_000 && burst < MAX_BURST {
            owed -= 1_000_000_000;
            burst += 1;
            arm_one(&mut rng, ps, total);
        }
        owed = owed.min(MAX_BURST as u128 * 1_000_000_000);
    }
}

/// Arms one random resident tracked page, if one is free to arm.
/// `total`: the tracked pages counted this tick (a region freed since is
/// caught by the handshake below).
fn arm_one(rng: &mut Random, ps: usize, total: usize) {
    if crate::SAMPLES.load(SeqCst) >= MAX_SAMPLES {
        return;
    }
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
