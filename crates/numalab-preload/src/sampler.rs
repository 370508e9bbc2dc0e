//! The sampler thread: arms random pages of the tracked regions, a few
//! every tick (a present page's fault is an access sample, an absent
//! one's a first touch), disarms those no access touched in time, writes the
//! queued records out, and keeps the rate at its target cost ([`cost`]).

use crate::cost::{self, Controller};
use crate::huge::{HugePages, Span};
use crate::places;
use crate::refine::Refiner;
use crate::runtime::state::{
    library_thread, page_size, ARMED_TOTAL, DEFAULT_OVERHEAD, FIRST_TOUCHES, GO_RUNTIME, OUT_FD,
    SAMPLES, START_NS,
};
use crate::runtime::{emit, queue, sys};
use crate::tables;
use std::sync::atomic::Ordering::SeqCst;

/// Where an adaptive rate starts (pages armed a second): low, so that a
/// short program is not overcharged before the first measurement; the
/// rate doubles a window while under its target.
pub const START_RATE: usize = 500;
/// Samples after which the sampler stops arming (about 200 MB of records):
/// a program profiled for hours keeps its profile bounded.
pub const MAX_SAMPLES: usize = 4 << 20;
/// Ticks last from 1 to 100 ms: about sixteen pages armed a tick. Each
/// wake-up costs more than arming a page: on a virtual machine whose CPUs
/// the program fills, a tick that arms one page took 100-120 µs of the
/// sampler's CPU time (timer, wake-up and the preempted program thread's
/// switch, all exits to the hypervisor) against about 50 µs a page armed.
/// At four pages a tick the truth program's default rate woke the sampler
/// 50 times a second; at sixteen, about ten, and the budget goes to pages.
const MIN_TICK_NS: u64 = 1_000_000;
const MAX_TICK_NS: u64 = 100_000_000;
const PAGES_PER_TICK: f64 = 16.0;
/// The longest tick in the first 200 ms (a short program at a low fixed
/// rate still gets its pages armed) and while the controller's short
/// windows run, and throughout with refinement (its windows last 20 ms)
/// or a PMU (its buffer is read every tick).
const FINE_TICK_NS: u64 = 20_000_000;
const FINE_START_NS: u64 = 200_000_000;
/// Pages armed in one tick at most.
const MAX_BURST: usize = 256;
/// A page armed longer than this without an access is disarmed, at the
/// first tick after: with ticks of up to 100 ms an untouched page stays
/// armed 200-300 ms (expiry bounds how long a page holds its entry, not
/// what its sample means).
const MAX_ARMED_NS: u64 = 200_000_000;
/// Pages by node of every tracked region are written at 250 ms, then at
/// least a second apart, and far enough apart that snapshots take at most
/// a tenth of sampling's target share of the time, and never more than
/// 0.25% (0.05% at the default 0.5%: one taking 3 ms waits 6 s for the
/// next; at 0.25% whatever the target, as before, snapshots took half
/// the default's budget); the spacing doubles every 256 snapshots, so a
/// long run keeps few.
const FIRST_SNAPSHOT_NS: u64 = 250_000_000;
const MIN_SNAPSHOT_GAP_NS: u64 = 1_000_000_000;
const SNAPSHOT_SHARE_OF_TARGET: f64 = 0.1;
const MAX_SNAPSHOT_SHARE: f64 = 0.0025;

/// When the next snapshot of the regions' pages is due.
struct Snapshots {
    next_at: u64,
    taken: u32,
    /// The share of the time snapshots may take.
    share: f64,
}

/// When the program's memory map is saved beside the records while it
/// runs: at the sampler's first tick, then 1, 2, 4, 8… s in (a log of the map grows with the
/// log of the run time). A program that never calls libc's `exit` (Go's
/// runtime exits by a raw system call) or that a signal ends still has
/// its sites named; the save at exit comes last and is the fullest.
struct MapSaves {
    next_at: u64,
}

impl MapSaves {
    fn save_when_due(&mut self, now: u64) {
        if now < self.next_at {
            return;
        }
        emit::save_maps();
        emit::emit_thread_names();
        // Word counts' totals so far (the last one read wins): a Go
        // program's at-exit totals never come.
        crate::words::totals_so_far();
        let since = now.saturating_sub(START_NS.load(SeqCst));
        self.next_at = now + since.max(1_000_000_000);
    }
}

impl Snapshots {
    fn take_when_due(&mut self, now: u64) {
        if now < self.next_at {
            return;
        }
        let n = self.taken;
        crate::tables::for_each_region(|start, len| places::emit_page_records(start, len, n));
        let took = sys::monotonic_ns().saturating_sub(now);
        self.taken += 1;
        self.next_at = now + snapshot_gap_ns(took, self.share, self.taken);
    }
}

/// The time from a snapshot that took `took` ns to the next, when
/// snapshots may take `share` of the time and `taken` were taken.
fn snapshot_gap_ns(took: u64, share: f64, taken: u32) -> u64 {
    let gap = (took as f64 / share.max(1e-6)).min(3_600e9) as u64;
    MIN_SNAPSHOT_GAP_NS.max(gap) << (taken / 256).min(16)
}

/// How the rate is chosen.
#[derive(Clone, Copy)]
pub enum RatePolicy {
    /// Pages armed a second, whatever they cost.
    Fixed(usize),
    /// The rate that keeps sampling at this share of the program's CPU
    /// time.
    Overhead(f64),
}

/// Starts the sampler thread; returns whether it runs.
/// `duration_ns`: stop sampling that long after the start (the program
/// runs on unsampled).
pub fn start(policy: RatePolicy, duration_ns: Option<u64>) -> bool {
    if matches!(policy, RatePolicy::Fixed(0)) {
        return false;
    }
    std::thread::Builder::new()
        .name("numalab-sampler".into())
        .stack_size(64 << 10)
        .spawn(move || run(policy, duration_ns))
        .is_ok()
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

fn run(policy: RatePolicy, duration_ns: Option<u64>) {
    library_thread();
    crate::words::hold_switch_hooks();
    // The program's signal handlers run on its own threads, never here
    // (one that calls exit() while this thread writes records out would
    // wait for itself); SIGSEGV stays open (the interposed mask).
    // SAFETY: a full sigset, filled before use.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, std::ptr::null_mut());
    }
    let ps = page_size();
    let mut rng = Random(sys::monotonic_ns() | 1);
    let kernel_ns = cost::calibrate(ps);
    // From here the thread waits for a free CPU rather than preempt a
    // program thread as it wakes: where the program's threads meet (a
    // barrier, a lock), whatever took one's CPU held up all of them; the
    // waits they make leave CPUs free for it (docs/profile.md, "Overhead
    // measured"). The calibration above is timed, so it ran first.
    sys::yield_on_wake_up();
    let mut control = match policy {
        RatePolicy::Fixed(r) => Controller::new(r as f64, None, kernel_ns),
        RatePolicy::Overhead(t) => Controller::new(START_RATE as f64, Some(t), kernel_ns),
    };
    cost::emit_totals();
    // Pages owed: the rate times the time that passed,
    // whatever a tick really took (a loaded or emulated machine sleeps
    // longer), at most MAX_BURST at once.
    let mut owed: f64 = 0.0;
    let mut last = sys::monotonic_ns();
    let target = match policy {
        RatePolicy::Overhead(t) => t,
        RatePolicy::Fixed(_) => DEFAULT_OVERHEAD,
    };
    let mut snapshots = Snapshots {
        next_at: last + FIRST_SNAPSHOT_NS,
        taken: 0,
        share: (target * SNAPSHOT_SHARE_OF_TARGET).min(MAX_SNAPSHOT_SHARE),
    };
    // The window counts from the library's start, as the records' times.
    let stop_at = duration_ns.map(|d| START_NS.load(SeqCst).saturating_add(d));
    let mut map_saves = MapSaves {
        next_at: START_NS.load(SeqCst),
    };
    let mut refiner = Refiner::from_env(ps);
    let huge = crate::huge::HugePages::open();
    let mut pmu = crate::pmu::PmuSampler::from_env(ps);
    loop {
        let early = sys::monotonic_ns() < START_NS.load(SeqCst).saturating_add(FINE_START_NS);
        let fine = early || control.starting() || refiner.wants_small_regions() || pmu.is_some();
        let tick = tick_ns(control.rate, fine);
        sys::sleep_ns(sleep_ns(tick, sys::monotonic_ns(), stop_at));
        let now = sys::monotonic_ns();
        if stop_at.is_some_and(|end| now >= end) {
            if let Some(p) = pmu.as_mut() {
                p.tick(true);
            }
            stop(&mut snapshots, now);
            return;
        }
        tables::expire(now.saturating_sub(MAX_ARMED_NS), |start, len, prot| {
            sys::mprotect(start, len, prot);
        });
        tables::take_pending(touched);
        queue::drain_inspecting(OUT_FD.load(SeqCst), false, |r| refiner.observe(r));
        refiner.tick(now);
        owed += control.rate * now.saturating_sub(last) as f64 / 1e9;
        owed = owed.min(MAX_BURST as f64);
        last = now;
        // With a PMU, its samples, and no page armed.
        if let Some(p) = pmu.as_mut() {
            p.tick(false);
            owed = 0.0;
            if p.refused() {
                pmu = None;
            }
        }
        // Go's runtime makes system calls libc never sees: no page armed.
        if GO_RUNTIME.load(SeqCst) {
            owed = 0.0;
        }
        // The tracked pages are counted once a tick, not once a page.
        let (_, total) = tables::nth_page(0, ps);
        while owed >= 1.0 {
            owed -= 1.0;
            // Refinement needs samples of small regions too: every other
            // page is then chosen region first (the Start record says so),
            // and one in four is a page of a line it found interesting,
            // armed against writes only (a write probe).
            let choice = match (refiner.wants_small_regions(), rng.next() % 4) {
                (false, _) => Choice::Uniform,
                (true, 0) => refiner
                    .hot_page(rng.next() as usize)
                    .map_or(Choice::ByRegion, Choice::Page),
                (true, 1) => Choice::ByRegion,
                (true, _) => Choice::Uniform,
            };
            arm_one(&mut rng, ps, huge.as_ref(), total, choice);
        }
        control.tick(now);
        crate::words::measure_surcharges_when_due();
        snapshots.take_when_due(now);
        map_saves.save_when_due(now);
    }
}

/// How long the sampler sleeps at `rate` pages a second: long enough to
/// arm [`PAGES_PER_TICK`] pages, at most [`FINE_TICK_NS`] when `fine`.
fn tick_ns(rate: f64, fine: bool) -> u64 {
    let max = if fine { FINE_TICK_NS } else { MAX_TICK_NS };
    ((PAGES_PER_TICK * 1e9 / rate.max(1.0)) as u64).clamp(MIN_TICK_NS, max)
}

/// How long the sampler sleeps before its next tick: `tick`, but no later
/// than `stop_at` (`--duration`: the window ends on time, not up to a
/// 100 ms tick late), and at least [`MIN_TICK_NS`].
fn sleep_ns(tick: u64, now: u64, stop_at: Option<u64>) -> u64 {
    let until_stop = stop_at.map_or(u64::MAX, |end| end.saturating_sub(now));
    tick.min(until_stop).max(MIN_TICK_NS)
}

/// Arms one random tracked page, if one is free to arm.
/// `total`: the tracked pages counted this tick (a region freed since is
/// caught by the handshake below).
/// How [`arm_one`] picks its page.
#[derive(Clone, Copy)]
enum Choice {
    /// Uniformly over the tracked pages.
    Uniform,
    /// A region first, then one of its pages.
    ByRegion,
    /// This one (checked as any other: it must be tracked).
    Page(usize),
}

fn arm_one(rng: &mut Random, ps: usize, huge: Option<&HugePages>, total: usize, choice: Choice) {
    if SAMPLES.load(SeqCst) + FIRST_TOUCHES.load(SeqCst) >= MAX_SAMPLES {
        return;
    }
    if total == 0 {
        return;
    }
    let page = match choice {
        Choice::ByRegion => {
            let region =
                tables::nth_region(rng.next() as usize, ps, crate::select::refine_limited());
            region.and_then(|(first, pages)| present_page(rng, first, pages, ps))
        }
        Choice::Uniform => {
            let k = (rng.next() % total as u64) as usize;
            tables::nth_page(k, ps).0
        }
        Choice::Page(p) => Some(p),
    };
    let Some(page) = page else {
        return;
    };
    // One query says whether the page is present and where: the fault
    // handler then needs no system call to know the node. An absent page
    // is armed too: its fault is a first touch.
    let node = match sys::page_state(page, ps) {
        sys::PageState::Present(node) => node,
        sys::PageState::Absent => tables::NODE_ABSENT,
    };
    // A line's page is probed for writes only (reads go on unfaulted): a
    // read-modify-write samples as a read, and refinement wants the
    // writers. An absent page is not probed (its writes are first touches).
    let probe = matches!(choice, Choice::Page(_));
    if probe && node == tables::NODE_ABSENT {
        return;
    }
    // The protection its region had, which the page gets back (none for
    // libc's own buffers, counted by word only: see tables::Arming); a
    // page of a read-only mapping is not probed for writes.
    let Some(prot) = tables::armable_prot(page) else {
        return;
    };
    if probe && prot & libc::PROT_WRITE == 0 {
        return;
    }
    let (armed_prot, probe_bit) = if probe {
        (libc::PROT_READ, tables::PROBE)
    } else {
        (libc::PROT_NONE, 0)
    };
    // Huge pages stay whole (see [`crate::huge`]): a huge page is armed
    // whole (its pages are all on one node), and so is an untouched span
    // the kernel may back with one. Not for a write probe (it wants one
    // line's writers), nor when the span reaches outside the region (its
    // other bytes may be the program's to unmap or protect): those split.
    // The kernel is asked only where the span lies inside the region.
    let span_fits = |h: &HugePages| {
        let (s, l) = h.span_around(page);
        tables::in_region(s, l)
    };
    let span = match huge
        .filter(|h| !probe && span_fits(h))
        .map(|h| (h, h.span_of(page)))
    {
        Some((_, Span::Huge(s, l))) if node != tables::NODE_ABSENT => Some((s, l)),
        Some((h, Span::Empty(s, l))) if node == tables::NODE_ABSENT && h.may_be_huge(s, l) => {
            Some((s, l))
        }
        _ => None,
    };
    let (start, len) = span
        .filter(|&(s, l)| tables::in_region(s, l))
        .unwrap_or((page, ps));
    let Some(i) = tables::begin_arming(start, len, prot | probe_bit, node) else {
        return;
    };
    // The handshake: after claiming the entry, the region must still be
    // tracked and no system call may be using the span.
    if !tables::in_region(start, len) || tables::is_busy(start, len) {
        tables::abandon_arming(i);
        return;
    }
    if sys::mprotect(start, len, armed_prot) != 0 {
        tables::abandon_arming(i);
        return;
    }
    // A span found untouched may have been touched between the query and
    // the protection: its faults would not all be first touches.
    if len > ps && node == tables::NODE_ABSENT {
        let h = huge.expect("a span is armed only with huge pages known");
        if !matches!(h.span_of(page), Span::Empty(..)) {
            sys::mprotect(start, len, prot);
            tables::abandon_arming(i);
            return;
        }
    }
    // A page found absent may have been touched between the query and the
    // protection: asked again now that nothing can touch it, it is a
    // present page's sample, not a first touch.
    if node == tables::NODE_ABSENT && len == ps {
        if let sys::PageState::Present(n) = sys::page_state(page, ps) {
            tables::set_node(i, n);
        }
    }
    tables::finish_arming(i, sys::monotonic_ns());
    ARMED_TOTAL.fetch_add(1, SeqCst);
}

/// Regions of at most this many pages are asked which of their pages are
/// present (one `move_pages` call) before one is chosen.
const SMALL_REGION_PAGES: usize = 64;

/// A page of the region `[first, first + pages pages)`: in a small region
/// a present one (a small allocation is often mostly untouched, and its
/// one hot page would rarely be drawn), else any.
fn present_page(rng: &mut Random, first: usize, pages: usize, ps: usize) -> Option<usize> {
    let any = first + (rng.next() as usize % pages) * ps;
    if pages > SMALL_REGION_PAGES {
        return Some(any);
    }
    let mut addrs = [std::ptr::null_mut::<libc::c_void>(); SMALL_REGION_PAGES];
    let mut status = [0i32; SMALL_REGION_PAGES];
    for (k, a) in addrs.iter_mut().enumerate().take(pages) {
        *a = (first + k * ps) as *mut libc::c_void;
    }
    if !sys::query_pages(&addrs[..pages], &mut status[..pages]) {
        return Some(any);
    }
    let present = status[..pages].iter().filter(|s| **s >= 0).count();
    if present == 0 {
        return Some(any);
    }
    let nth = rng.next() as usize % present;
    let k = (0..pages).filter(|k| status[*k] >= 0).nth(nth)?;
    Some(first + k * ps)
}

/// The end of the sampling window: every page disarmed, the last first
/// touches looked up, a last snapshot and cost record, the queue written
/// out and turned off (the program's later records are written directly:
/// no thread drains the queue any more).
fn stop(snapshots: &mut Snapshots, now: u64) {
    crate::words::stop();
    tables::expire(u64::MAX, |start, len, prot| {
        sys::mprotect(start, len, prot);
    });
    tables::take_pending(touched);
    snapshots.next_at = 0;
    snapshots.take_when_due(now);
    cost::finish();
    let fd = OUT_FD.load(SeqCst);
    queue::drain(fd, true);
    queue::disable();
    // A record pushed between the drain and the switch.
    queue::drain(fd, true);
}

/// Where a first-touched page went (a Touched record).
pub fn touched(page: usize) {
    let pages = [page as *mut libc::c_void];
    let mut status = [0i32];
    let node = if sys::query_pages(&pages, &mut status) {
        status[0]
    } else {
        -libc::ENOSYS
    };
    emit(&crate::record::Record {
        kind: crate::record::Kind::Touched,
        tid: 0,
        cpu: u32::MAX,
        node,
        flags: 0,
        addr: page as u64,
        size: 0,
        time_ns: sys::monotonic_ns(),
        aux: 0,
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_arm_sixteen_pages_within_their_bounds() {
        let ms = 1_000_000;
        // 160 pages a second: a tick of 100 ms; 1600: 10 ms.
        assert_eq!(tick_ns(160.0, false), 100 * ms);
        assert_eq!(tick_ns(1600.0, false), 10 * ms);
        // Low rates sleep at most 100 ms, 20 ms while fine; high ones 1 ms.
        assert_eq!(tick_ns(20.0, false), MAX_TICK_NS);
        assert_eq!(tick_ns(20.0, true), FINE_TICK_NS);
        assert_eq!(tick_ns(160.0, true), 20 * ms);
        assert_eq!(tick_ns(50_000.0, false), MIN_TICK_NS);
        // A rate of 0 (never passed, but bounded anyway).
        assert_eq!(tick_ns(0.0, false), MAX_TICK_NS);
    }

    #[test]
    fn snapshots_keep_to_a_tenth_of_the_target() {
        let ms = 1_000_000;
        // At the default target (0.5%: 0.05% for snapshots) one of 3 ms
        // waits 6 s; one of 0.1 ms the least gap, a second.
        assert_eq!(snapshot_gap_ns(3 * ms, 0.0005, 0), 6_000 * ms);
        assert_eq!(snapshot_gap_ns(ms / 10, 0.0005, 0), 1_000 * ms);
        // A large share: still at least a second apart.
        assert_eq!(snapshot_gap_ns(3 * ms, 0.099, 0), 1_000 * ms);
        // 0.25% (the most, from a 2.5% target up): 400 times the time one
        // took, as before the share followed the target.
        assert_eq!(snapshot_gap_ns(10 * ms, MAX_SNAPSHOT_SHARE, 0), 4_000 * ms);
        // The spacing doubles every 256 snapshots.
        assert_eq!(snapshot_gap_ns(3 * ms, 0.0005, 256), 12_000 * ms);
        // A share of 0 is a millionth (no division by zero), and no gap
        // is longer than an hour.
        assert_eq!(snapshot_gap_ns(3 * ms, 0.0, 0), 3_000_000 * ms);
        assert_eq!(snapshot_gap_ns(30 * ms, 0.0, 0), 3_600_000 * ms);
    }

    #[test]
    fn the_sampling_window_ends_on_time_not_a_tick_late() {
        let ms = 1_000_000;
        // No window: the whole tick.
        assert_eq!(sleep_ns(100 * ms, 5_000 * ms, None), 100 * ms);
        // The window ends in 30 ms: a 100 ms tick is cut to 30 ms; a
        // shorter one is left alone.
        assert_eq!(sleep_ns(100 * ms, 970 * ms, Some(1_000 * ms)), 30 * ms);
        assert_eq!(sleep_ns(10 * ms, 970 * ms, Some(1_000 * ms)), 10 * ms);
        // At or past its end: the shortest sleep, then the stop.
        assert_eq!(
            sleep_ns(100 * ms, 1_000 * ms, Some(1_000 * ms)),
            MIN_TICK_NS
        );
        assert_eq!(
            sleep_ns(100 * ms, 2_000 * ms, Some(1_000 * ms)),
            MIN_TICK_NS
        );
    }
}
