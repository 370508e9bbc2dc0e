//! What sampling costs the program, measured while it runs, and the rate
//! that keeps that cost at a target share of the program's CPU time.
//!
//! A sample costs the faulting thread the kernel's fault and signal
//! delivery, the handler and `sigreturn`; it costs the sampler thread the
//! page lookup and the `mprotect` that armed it. The handler times itself;
//! the kernel's part is measured once at start on a page of the
//! library's own (the median of a few faults); the sampler's part is its
//! thread CPU time. Word counting's part (its turns, traps and watched
//! threads' dearer context switches) is measured in words.rs. What this
//! cannot see: the TLB shootdowns `mprotect` sends to other CPUs running
//! the program, the program's threads waiting for the memory map's lock
//! while a page is armed, and cache pollution; and a delay of one thread
//! holds up the threads that wait for it, so a program whose threads meet
//! often loses up to its thread count times the share in wall time. So
//! the controller keeps the cost to the target over the threads that run
//! in step ([`in_step`]: busy threads that block often, as at a barrier),
//! which makes the target a share of the program's wall time there. The
//! default target (0.5%) sits well below the 3% the overhead benchmark
//! holds it to (bench/profile-overhead.sh), and the sampler thread runs
//! under `SCHED_BATCH` (it takes a CPU when one comes free, not the moment
//! it wakes: [`sys::yield_on_wake_up`]).

use crate::runtime::state::{ARMED_TOTAL, FIRST_TOUCHES, SAMPLES};
use crate::runtime::{emit, sys};
use crate::tables;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::SeqCst};

/// Time spent in the fault handler on samples, in ns.
static HANDLER_NS: AtomicU64 = AtomicU64::new(0);
/// The library's own page for measuring a fault's round trip (0: none).
static CALIBRATION_PAGE: AtomicUsize = AtomicUsize::new(0);
/// The handler's time on the calibration page's last fault.
static CALIBRATION_HANDLER_NS: AtomicU64 = AtomicU64::new(0);

/// The controller's state, for the Cost records (the one at exit is
/// written by the exiting thread).
/// The sampler thread's CPU-time clock, so that any thread can read it
/// (the exiting one writes the last Cost record).
static SAMPLER_CLOCK: AtomicI32 = AtomicI32::new(libc::CLOCK_THREAD_CPUTIME_ID);
static RATE: AtomicU64 = AtomicU64::new(0);
static KERNEL_NS: AtomicU64 = AtomicU64::new(0);
/// The target share in millionths; u32::MAX: a fixed rate.
static TARGET_PPM: AtomicU64 = AtomicU64::new(u32::MAX as u64);
/// Whether a controller ran (else no Cost record at exit).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// Threads in step now ([`in_step`]), in thousandths, for the Cost records.
static IN_STEP_MILLI: AtomicU64 = AtomicU64::new(1000);

/// Rates the controller keeps to, in pages armed per second.
pub const MIN_RATE: f64 = 20.0;
pub const MAX_RATE: f64 = 50_000.0;
/// How often the rate is recomputed, and a Cost record written.
const WINDOW_NS: u64 = 100_000_000;
const RECORD_EVERY: u32 = 10;
/// At start the page rate alone is recomputed this often, this many
/// times: the rate starts at a guess (`sampler::START_RATE`) that may be
/// several halvings too high for the program, and at 100 ms a window
/// those halvings took 0.3-0.4 s in which a short program paid several
/// times the target (a third of sampling's whole cost on a 3 s run
/// here). Small allocations' draws and word counting keep the 100 ms
/// windows.
const FAST_WINDOW_NS: u64 = 20_000_000;
const FAST_WINDOWS: u32 = 10;
/// Blocking waits a second of the program's CPU time from which its busy
/// threads count as wholly in step (a wait every 20 ms of CPU time): the
/// delays sampling makes (a sample's fault, a word-count trap or turn, the
/// sampler thread taking a CPU) come 50-100 times a second a thread, so
/// a delay then mostly meets the others alone at their next meeting and
/// holds every one of them up; threads that wait for each other a few
/// times a second average their delays out before they meet (`xz -T2`'s
/// compressors). Between the two, in proportion. The truth program's
/// two threads meet at a barrier every pass, and the one that comes
/// first blocks 130-200 times a second (400-650 waits in its 3.3 s).
pub const MEETS_PER_CPU_S: f64 = 50.0;
/// Waits sampling itself may cause the program for each page it arms,
/// which are no meeting of the program's: the arming and the restoring
/// `mprotect` hold the memory map's lock for writing, and a thread that
/// faults meanwhile, or restores its own sampled page, waits for it. Two
/// readers that never wait for each other blocked 65 times for 138
/// samples here (`perf record -e sched:sched_switch`: 36 in the page
/// fault's `lock_mm_and_find_vma`, 25 in the handler's `mprotect`), and
/// counted as 1.3-1.75 threads in step before these were taken off.
const WAITS_PER_ARMED_PAGE: u64 = 1;

/// Adds a sample's handler time (the handling thread's CPU time).
pub fn handler_took(page: usize, ns: u64) {
    if page == CALIBRATION_PAGE.load(SeqCst) {
        CALIBRATION_HANDLER_NS.store(ns, SeqCst);
    } else {
        HANDLER_NS.fetch_add(ns, SeqCst);
    }
}

/// Whether a fault on `page` is the calibration's (no record).
pub fn is_calibration(page: usize) -> bool {
    page != 0 && page == CALIBRATION_PAGE.load(SeqCst)
}

/// The kernel's share of one sample's fault (fault entry, signal delivery,
/// sigreturn), in ns: the median of a few round trips on a page of our
/// own less the handler's time on it. 0 when it cannot be measured.
pub fn calibrate(page_size: usize) -> u64 {
    // SAFETY: an anonymous private mapping of one page, by the system
    // call itself (the interposed mmap would track it).
    let p = unsafe {
        libc::syscall(
            libc::SYS_mmap,
            0usize,
            page_size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0usize,
        )
    };
    if p < 0 {
        return 0;
    }
    let page = p as usize;
    // SAFETY: the page is ours, readable and writable.
    unsafe { std::ptr::write_volatile(page as *mut u8, 1) };
    CALIBRATION_PAGE.store(page, SeqCst);
    let mut trips = [0u64; 7];
    let mut n = 0;
    for _ in 0..trips.len() {
        let Some(i) = tables::begin_arming(page, page_size, libc::PROT_READ | libc::PROT_WRITE, -1)
        else {
            continue;
        };
        if sys::mprotect(page, page_size, libc::PROT_NONE) != 0 {
            tables::abandon_arming(i);
            continue;
        }
        tables::finish_arming(i, sys::monotonic_ns());
        let t0 = sys::monotonic_ns();
        // SAFETY: the page is ours; the read faults and the handler
        // restores it.
        unsafe { std::ptr::read_volatile(page as *const u8) };
        let trip = sys::monotonic_ns() - t0;
        trips[n] = trip.saturating_sub(CALIBRATION_HANDLER_NS.load(SeqCst));
        n += 1;
    }
    CALIBRATION_PAGE.store(0, SeqCst);
    // SAFETY: unmaps the page mapped above.
    unsafe { libc::syscall(libc::SYS_munmap, page, page_size) };
    if n == 0 {
        return 0;
    }
    let t = &mut trips[..n];
    t.sort_unstable();
    t[n / 2]
}

/// The rate controller, run by the sampler thread.
pub struct Controller {
    /// Target cost over the program's CPU time (`None`: a fixed rate).
    target: Option<f64>,
    pub rate: f64,
    kernel_ns: u64,
    window_start: u64,
    windows: u32,
    last: Totals,
    /// The short windows at start: where the open one starts, how many
    /// closed, the totals at its start.
    fast_start: u64,
    fast_windows: u32,
    fast_last: Totals,
    /// Word counting's cost and the program's time, each window's half
    /// added to half the last (ns): a watched window's context switches
    /// are charged when it closes, in lumps that a window's share alone
    /// would swing the duty by.
    words_smooth: (f64, f64),
    /// Threads in step ([`in_step`]), each window's half added to half
    /// the last; the program's blocking waits and the pages armed at the
    /// last window.
    in_step: f64,
    blocks_at: u64,
    armed_at: u64,
}

#[derive(Clone, Copy, Default)]
struct Totals {
    process_ns: u64,
    sampler_ns: u64,
    handler_ns: u64,
    /// Drawing small allocations (see [`crate::small`]).
    small_ns: u64,
    samples: u64,
    /// Word counting (see [`crate::words`]): its turns, and the traps of
    /// the accesses it counted.
    words_ns: u64,
}

fn totals() -> Totals {
    Totals {
        process_ns: sys::process_cpu_ns(),
        sampler_ns: sys::cpu_clock_ns(SAMPLER_CLOCK.load(SeqCst)),
        handler_ns: HANDLER_NS.load(SeqCst),
        small_ns: crate::small::draw_ns(),
        samples: (SAMPLES.load(SeqCst) + FIRST_TOUCHES.load(SeqCst)) as u64,
        words_ns: words_ns(),
    }
}

/// What word counting cost so far: its turns' time, each turn's signal
/// (delivery and return, about a fault's kernel part, measured at
/// start), a trap per counted access at the cost measured at start, and
/// what watching threads' context switches and page faults cost more.
fn words_ns() -> u64 {
    let s = crate::words::spent();
    s.turn_ns
        .saturating_add(s.turns.saturating_mul(KERNEL_NS.load(SeqCst)))
        .saturating_add(s.hits.saturating_mul(crate::words::hit_ns()))
        .saturating_add(s.switch_ns)
        .saturating_add(s.fault_ns)
}

impl Controller {
    /// `target`: the share of the program's CPU time sampling may take
    /// (adaptive), or `None` to keep `rate`. Call on the sampler thread.
    pub fn new(rate: f64, target: Option<f64>, kernel_ns: u64) -> Controller {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: clock receives the calling (sampler) thread's clock id.
        if unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0 {
            SAMPLER_CLOCK.store(clock, SeqCst);
        }
        let (now, t) = (sys::monotonic_ns(), totals());
        let c = Controller {
            target,
            rate: rate.clamp(MIN_RATE, MAX_RATE),
            kernel_ns,
            window_start: now,
            windows: 0,
            last: t,
            fast_start: now,
            fast_windows: 0,
            fast_last: t,
            words_smooth: (0.0, 0.0),
            in_step: 1.0,
            blocks_at: program_blocks(),
            armed_at: ARMED_TOTAL.load(SeqCst) as u64,
        };
        IN_STEP_MILLI.store(1000, SeqCst);
        KERNEL_NS.store(kernel_ns, SeqCst);
        RATE.store(c.rate.round() as u64, SeqCst);
        if let Some(t) = target {
            TARGET_PPM.store((t * 1e6).round().min(1e6) as u64, SeqCst);
        }
        RUNNING.store(true, SeqCst);
        c
    }

    /// Whether the short windows at start still run (the rate is then
    /// recomputed every 20 ms, so the sampler ticks at least as often).
    pub fn starting(&self) -> bool {
        self.target.is_some() && self.fast_windows < FAST_WINDOWS
    }

    /// Closes the window when it is over: measures, adapts the rate, and
    /// writes a Cost record now and then.
    pub fn tick(&mut self, now: u64) {
        self.fast_tick(now);
        let wall = now.saturating_sub(self.window_start);
        if wall < WINDOW_NS {
            return;
        }
        self.window_start = now;
        let t = totals();
        let (spent, small, words, program) = self.shares(&t, &self.last);
        self.last = t;
        let meetings = self.meetings();
        self.follow_steps(program, wall, meetings);
        // From here the program's time is what the target is a share of:
        // its CPU time over the threads that run in step.
        let program = self.held(program);
        if let Some(target) = self.target {
            if program > 0 {
                crate::small::adapt(small as f64 / program as f64, target);
            }
            // While the short windows run, they set the rate.
            if self.fast_windows >= FAST_WINDOWS {
                let pages = pages_target(target, words, program);
                self.rate = next_rate(self.rate, pages, spent, program);
                RATE.store(self.rate.round() as u64, SeqCst);
            }
        }
        // Word counting keeps to its own share (--overhead, also with a
        // fixed page rate): its windows are skipped at random, half as
        // often again, as the measured share asks.
        let (w0, p0) = self.words_smooth;
        self.words_smooth = ((w0 + words as f64) / 2.0, (p0 + program as f64) / 2.0);
        crate::words::set_duty(next_duty(
            crate::words::duty(),
            crate::words::target(),
            self.words_smooth.0 as u64,
            self.words_smooth.1 as u64,
        ));
        self.windows += 1;
        if self.windows.is_multiple_of(RECORD_EVERY) {
            emit_totals();
        }
    }
}

impl Controller {
    /// Follows how many threads run in step from a window of `wall` ns in
    /// which the program ran `program` ns of CPU time and blocked `blocks`
    /// times (a window where it hardly ran leaves it).
    fn follow_steps(&mut self, program: u64, wall: u64, blocks: u64) {
        if program < 1_000_000 || wall == 0 {
            return;
        }
        let k = in_step(
            program as f64 / wall as f64,
            blocks as f64 / (program as f64 / 1e9),
        );
        self.in_step = (self.in_step + k) / 2.0;
        IN_STEP_MILLI.store((self.in_step * 1000.0).round() as u64, SeqCst);
    }

    /// The program's waits since the last window that were no waits for
    /// sampling ([`WAITS_PER_ARMED_PAGE`] a page armed meanwhile).
    fn meetings(&mut self) -> u64 {
        let (blocks, armed) = (program_blocks(), ARMED_TOTAL.load(SeqCst) as u64);
        let ours = WAITS_PER_ARMED_PAGE.saturating_mul(armed.saturating_sub(self.armed_at));
        let waits = blocks.saturating_sub(self.blocks_at);
        (self.blocks_at, self.armed_at) = (blocks, armed);
        waits.saturating_sub(ours)
    }

    /// The program's `program` ns of CPU time over the threads in step.
    fn held(&self, program: u64) -> u64 {
        (program as f64 / self.in_step.max(1.0)) as u64
    }

    /// Since `last`: sampling's cost (sampler, handler, small allocations'
    /// draws, the kernel's part of each fault), the draws alone, word
    /// counting's cost, and the program's own CPU time, in ns.
    fn shares(&self, t: &Totals, last: &Totals) -> (u64, u64, u64, u64) {
        let d = |a: u64, b: u64| a.saturating_sub(b);
        let faults = d(t.samples, last.samples);
        let small = d(t.small_ns, last.small_ns);
        let spent = d(t.sampler_ns, last.sampler_ns)
            + d(t.handler_ns, last.handler_ns)
            + small
            + faults * self.kernel_ns;
        let words = d(t.words_ns, last.words_ns);
        let program = d(t.process_ns, last.process_ns).saturating_sub(spent + words);
        (spent, small, words, program)
    }

    /// The short windows at start: the page rate only, from their own
    /// measured share.
    fn fast_tick(&mut self, now: u64) {
        let Some(target) = self.target else { return };
        if self.fast_windows >= FAST_WINDOWS || now.saturating_sub(self.fast_start) < FAST_WINDOW_NS
        {
            return;
        }
        let t = totals();
        let (spent, _, words, program) = self.shares(&t, &self.fast_last);
        let program = self.held(program);
        self.fast_last = t;
        self.fast_start = now;
        self.fast_windows += 1;
        let pages = pages_target(target, words, program);
        self.rate = next_rate(self.rate, pages, spent, program);
        RATE.store(self.rate.round() as u64, SeqCst);
    }
}

/// Writes the last Cost record as sampling ends before the program does
/// (`--duration`): later ones would read the ended sampler thread's clock.
pub fn finish() {
    emit_totals();
    RUNNING.store(false, SeqCst);
}

/// A Cost record of the totals so far (none when no sampler ran), from
/// the cumulative clocks and counters: right from any thread, at any
/// moment (at exit too, mid-window).
pub fn emit_totals() {
    if !RUNNING.load(SeqCst) {
        return;
    }
    let t = totals();
    let spent =
        t.sampler_ns + t.handler_ns + t.small_ns + t.samples * KERNEL_NS.load(SeqCst) + t.words_ns;
    let program = t.process_ns.saturating_sub(spent);
    let target = TARGET_PPM.load(SeqCst);
    emit(
        &numalab_profile_abi::events::Cost {
            tid: sys::gettid(),
            spent_ns: spent,
            program_ns: program,
            rate: RATE.load(SeqCst).min(i32::MAX as u64) as u32,
            kernel_ns_per_fault: KERNEL_NS.load(SeqCst).min(u32::MAX as u64) as u32,
            target_ppm: (target < u32::MAX as u64).then_some(target as u32),
            in_step_milli: Some(IN_STEP_MILLI.load(SeqCst).clamp(1, u32::MAX as u64) as u32),
            time_ns: sys::monotonic_ns(),
        }
        .to_record(),
    );
}

/// The program's blocking waits so far: the process's voluntary context
/// switches less the calling (sampler) thread's own sleeps.
fn program_blocks() -> u64 {
    sys::voluntary_switches(libc::RUSAGE_SELF)
        .saturating_sub(sys::voluntary_switches(libc::RUSAGE_THREAD))
}

/// How many threads run in step, from the program's `busy` threads (its
/// CPU time over the wall time) and its blocking waits a second of its CPU
/// time: where its threads wait for each other often, a delay of one holds
/// up all the busy ones, and a cost of s of the CPU time costs up to s
/// times the busy threads of the wall time; where they rarely wait, the
/// delays of each thread average out, and s of the CPU time is about s of
/// the wall time. 1 at no waits, the busy threads (at least 1) from
/// [`MEETS_PER_CPU_S`] up, in proportion between. A program that waits
/// by spinning (an OpenMP barrier before it blocks) does not block, and
/// counts as 1.
pub fn in_step(busy: f64, meets_per_cpu_s: f64) -> f64 {
    let c = (meets_per_cpu_s / MEETS_PER_CPU_S).clamp(0.0, 1.0);
    1.0 + c * (busy.max(1.0) - 1.0)
}

/// The page sampler's share of `target` in a window where word counting
/// took `words_ns` of the program's `program_ns`: what word counting
/// left, never under a quarter of the target. Each used to keep to the
/// whole target, and together they measured 1.4-1.5% at 1% on the truth
/// program (its Cost records, second by second). Word counting keeps its
/// own cap (three quarters of the target, through its duty:
/// [`crate::words::SHARE_OF_TARGET`]), so pages yield to it rather than
/// the other way round: its counts are what the remote share's interval
/// rests on.
pub fn pages_target(target: f64, words_ns: u64, program_ns: u64) -> f64 {
    if program_ns == 0 {
        return target;
    }
    let words = words_ns as f64 / program_ns as f64;
    (target - words).max(target / 4.0)
}

/// The rate for the next window: scaled by how far the measured share of
/// the program's CPU time was from the target, at most halved or doubled
/// a window (a program that pauses must not swing it wildly), within
/// [MIN_RATE, MAX_RATE]. A window where the program ran less than a
/// millisecond leaves the rate as it is.
pub fn next_rate(rate: f64, target: f64, spent_ns: u64, program_ns: u64) -> f64 {
    if program_ns < 1_000_000 {
        return rate;
    }
    let share = spent_ns as f64 / program_ns as f64;
    let factor = if share <= 0.0 {
        2.0
    } else {
        (target / share).clamp(0.5, 2.0)
    };
    (rate * factor).clamp(MIN_RATE, MAX_RATE)
}

/// The word counter's duty exponent for the next window of the
/// controller: while its share is above `target`, as many more (each
/// halving the windows watched) as it takes to bring the share under the
/// target (one at 2x, three at 8x: a program that blocks thousands of
/// times a second pays several times the target in context switches
/// while its windows watch); one less below a third of it; unchanged when
/// the program hardly ran. The share is of the program's time and word
/// counting's together, so at most 1: where the rest of sampling's cost
/// is over-estimated (under an emulator the program's own time can read
/// 0), a window says "all of it", never an unbounded multiple that would
/// stop the counting at once.
pub fn next_duty(duty: u32, target: f64, spent_ns: u64, program_ns: u64) -> u32 {
    if program_ns < 1_000_000 {
        return duty;
    }
    let share = spent_ns as f64 / (program_ns as f64 + spent_ns as f64);
    if share > target {
        let halvings = (share / target).log2().ceil().clamp(1.0, 12.0) as u32;
        duty + halvings
    } else if share < target / 3.0 {
        duty.saturating_sub(1)
    } else {
        duty
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rate_follows_the_measured_share_within_bounds() {
        // 4% spent against a 2% target: halved.
        assert_eq!(next_rate(2000.0, 0.02, 4_000_000, 100_000_000), 1000.0);
        // 1% against 2%: doubled; far below: doubled at most.
        assert_eq!(next_rate(2000.0, 0.02, 1_000_000, 100_000_000), 4000.0);
        assert_eq!(next_rate(2000.0, 0.02, 1, 100_000_000), 4000.0);
        // 3% against 2%: two thirds.
        let r = next_rate(3000.0, 0.02, 3_000_000, 100_000_000);
        assert!((r - 2000.0).abs() < 1e-6, "{r}");
        // Far above: halved at most, never under the floor.
        assert_eq!(next_rate(2000.0, 0.02, 90_000_000, 100_000_000), 1000.0);
        assert_eq!(next_rate(30.0, 0.02, 90_000_000, 100_000_000), MIN_RATE);
        assert_eq!(next_rate(40_000.0, 0.02, 0, 100_000_000), MAX_RATE);
        // An idle program: unchanged.
        assert_eq!(next_rate(2000.0, 0.02, 5_000, 900_000), 2000.0);
    }

    #[test]
    fn the_rate_is_recomputed_in_short_windows_at_start_then_each_100_ms() {
        let mut c = Controller::new(500.0, Some(0.01), 3000);
        let t0 = c.fast_start;
        // Ten short windows of 20 ms, one closed each 20 ms...
        for k in 1..=12u64 {
            c.tick(t0 + k * FAST_WINDOW_NS);
            assert_eq!(c.fast_windows, k.min(FAST_WINDOWS as u64) as u32, "at {k}");
        }
        // ...while the 100 ms windows went on as before: two closed by 240 ms.
        assert_eq!(c.windows, 2);
        // A fixed rate has no short windows.
        let mut f = Controller::new(500.0, None, 3000);
        f.tick(f.fast_start + 5 * FAST_WINDOW_NS);
        assert_eq!((f.fast_windows, f.rate), (0, 500.0));
    }

    #[test]
    fn threads_in_step_are_the_busy_ones_where_they_meet_often() {
        // The truth program here: 1.95 busy threads waiting 65-100 times
        // a CPU-second: all of them in step.
        assert_eq!(in_step(1.95, 65.0), 1.95);
        // Busy threads that never block (xz's compressors): none.
        assert_eq!(in_step(2.0, 0.0), 1.0);
        // In proportion between: 25 a CPU-second is half way.
        assert_eq!(in_step(3.0, 25.0), 2.0);
        // A program that mostly waits (a server, 0.3 busy) blocking
        // thousands of times: one thread, never fewer.
        assert_eq!(in_step(0.3, 5000.0), 1.0);
        // Eight busy threads at a barrier: the target over eight.
        assert_eq!(in_step(8.0, 1000.0), 8.0);
    }

    #[test]
    fn the_programs_waits_are_its_threads_blocking_at_a_barrier() {
        // Two threads meeting at a barrier 2,000 times: the one that comes
        // first blocks (a few meetings may find the other spinning). The
        // caller waits for them in one join, its own, left out. (Other
        // tests' threads may add to the count, never take from it.)
        let before = program_blocks();
        let b = std::sync::Arc::new(std::sync::Barrier::new(2));
        let meet = |b: std::sync::Arc<std::sync::Barrier>| {
            std::thread::spawn(move || {
                (0..2000).for_each(|_| {
                    b.wait();
                })
            })
        };
        let (one, two) = (meet(b.clone()), meet(b));
        one.join().unwrap();
        two.join().unwrap();
        let met = program_blocks().saturating_sub(before);
        assert!(met >= 1000, "{met} waits blocked of 2,000 meetings");
    }

    #[test]
    fn the_controller_keeps_the_target_over_the_threads_in_step() {
        let mut c = Controller::new(500.0, Some(0.005), 3000);
        assert_eq!(c.held(200_000_000), 200_000_000);
        // A 100 ms window with 195 ms of program time and 13 waits (67 a
        // CPU-second): half way from 1 to 1.95 at once (the windows are
        // smoothed half and half), then nearer.
        c.follow_steps(195_000_000, 100_000_000, 13);
        assert!((c.in_step - 1.475).abs() < 1e-9, "{}", c.in_step);
        c.follow_steps(195_000_000, 100_000_000, 13);
        assert!((c.in_step - 1.7125).abs() < 1e-9, "{}", c.in_step);
        assert_eq!(c.held(1_712_500_000), 1_000_000_000);
        // A window where the program hardly ran leaves it.
        c.follow_steps(500_000, 100_000_000, 400);
        assert!((c.in_step - 1.7125).abs() < 1e-9, "{}", c.in_step);
        // The same rate with the program's time over 1.7125: the target
        // share of 171 ms is 0.86 ms, and 1.7 ms spent halves the rate.
        let program = c.held(171_250_000);
        assert_eq!(next_rate(400.0, 0.005, 1_700_000, program), 200.0);
    }

    #[test]
    fn pages_get_what_word_counting_leaves_of_the_target() {
        // Words took 0.4% of 100 ms of program time: pages get 0.6%.
        assert!((pages_target(0.01, 400_000, 100_000_000) - 0.006).abs() < 1e-12);
        // No word counting: the whole target.
        assert_eq!(pages_target(0.01, 0, 100_000_000), 0.01);
        // Words over the target: pages keep a quarter of it.
        assert_eq!(pages_target(0.01, 5_000_000, 100_000_000), 0.0025);
        // A window without program time: the target.
        assert_eq!(pages_target(0.01, 5, 0), 0.01);
    }

    #[test]
    fn the_word_duty_halves_the_windows_while_over_target() {
        assert_eq!(next_duty(0, 0.01, 2_000_000, 100_000_000), 1);
        assert_eq!(next_duty(3, 0.01, 500_000, 100_000_000), 3);
        assert_eq!(next_duty(3, 0.01, 100_000, 100_000_000), 2);
        assert_eq!(next_duty(0, 0.01, 0, 100_000_000), 0);
        assert_eq!(next_duty(2, 0.01, 90_000_000, 500_000), 2);
        // Eight times the target: three halvings at once; just over it, one.
        assert_eq!(next_duty(1, 0.01, 8_000_000, 100_000_000), 4);
        assert_eq!(next_duty(1, 0.01, 7_900_000, 100_000_000), 4);
        assert_eq!(next_duty(1, 0.01, 1_100_000, 100_000_000), 2);
        // Fifty times the program's own time: the share is at most all of
        // it, seven halvings at 1%, none at `--overhead 99` (the guests'
        // emulated CPUs, where the rest of sampling reads as most of the
        // time).
        assert_eq!(next_duty(0, 0.01, 50_000_000, 1_000_000), 7);
        assert_eq!(next_duty(0, 0.99, 50_000_000, 1_000_000), 0);
    }
}
