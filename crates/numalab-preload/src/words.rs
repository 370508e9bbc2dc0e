//! Word counts: access shares that no thread's lead can bias
//! (docs/profile.md, "How the remote share is estimated").
//!
//! A protection-fault sample goes to whichever thread touches an armed page
//! first, so threads that scan shared data in step hand nearly every
//! sample to the one in front (docs/profile.md, "How the remote share is estimated"). Debug registers are
//! per thread: a watchpoint in a thread counts that thread's accesses to
//! its word, whatever the other threads do. So every program thread
//! watches a few 8-byte words (its *slots*) drawn uniformly from the
//! tracked regions, counts every access it makes to them, and draws new
//! words every window of its own CPU time (a per-thread CPU-time timer
//! whose signal it handles itself: no other CPU is interrupted).
//!
//! Each access by thread t to word w is counted by a slot with
//! probability 1/N, N the words tracked when the slot was drawn, the same
//! for every thread and every moment; weighted by N over the thread's
//! slots (and by the duty below), the counts estimate every thread's
//! accesses without bias (Horvitz–Thompson). The (thread, slot, window)
//! cells are independent draws of a word, so their spread gives an
//! honest interval ([`numalab::profile::estimate`] in the engine).
//!
//! What it costs: a window's turn (a few system calls: 30–50 µs here), a
//! debug trap per counted access (about 14 µs here, 34 µs in the TCG
//! guest), and, while a window watches, more for each of the thread's
//! context switches (1-16 µs here, a virtual machine: the armed debug
//! registers are saved and loaded at every exit to the hypervisor), which a thread that blocks
//! often pays thousands of times a second (a two-thread barrier loop ran
//! 1.3–1.4x under the counter when only the first two were counted), and
//! more for each page fault (about 1 µs here, on 1.6 µs), which a thread
//! that touches new memory pays once a page. The first two are measured
//! at start; a switch's on the program's own windows, watched against
//! skipped ([`crate::switch_cost`]); a fault's by the sampler thread once
//! watching threads have faulted [`FAULTS_BEFORE_MEASURING`] times (a
//! program that rarely faults never pays for measuring it); all are
//! charged to the cost controller. A thread's events are open only while its window is
//! watched: perf events on a thread make each of its context switches
//! dearer even while they are off ([`open_events`]).
//!
//! A word hit [`CAP`] times in a window stops counting there (the
//! kernel disables the event at its first overflow) and its count is
//! scaled to the whole window by the share of the window the event ran.
//! When the measured cost passes its target share of the program's CPU
//! time, whole windows are skipped at random (watched with probability
//! 2^-d, the duty exponent d, which every count carries for its weight).

use crate::perf::{PerfEventAttr, ATTR_DISABLED, ATTR_EXCLUDE_HV, ATTR_EXCLUDE_KERNEL};
use crate::record::{word_flags, Kind, Record, WORD_CAPPED, WORD_MOVED};
use crate::runtime::state::{config, on_library_thread, page_size, DEFAULT_OVERHEAD};
use crate::runtime::{emit, sys};
use crate::signals::{chain, take_signal, KeptAction};
use crate::tables;
use std::cell::Cell;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::SeqCst,
};

/// Words a thread watches at once: x86 has four debug registers a thread.
/// With `--refine`, two (refinement's windows take the other two).
pub const MAX_SLOTS: usize = 4;
/// Threads watched at once, at most; later ones are counted as lost.
const MAX_THREADS: usize = 4096;
/// Draws written at most (about 200 MB of records): past them no window
/// opens, and the profile says the counts stop there.
pub const MAX_CELLS: u64 = 4 << 20;
/// Accesses to one word a window before its event stops counting.
pub const CAP: u64 = 8;
/// A window starts at this much of the thread's own CPU time, and adapts
/// (see [`next_interval`]) between the bounds below.
const DEFAULT_WINDOW_NS: u64 = 20_000_000;
const MIN_WINDOW_NS: u64 = 1_000_000;
const MAX_WINDOW_NS: u64 = 50_000_000;
/// A window's length at most while the switches' price is learnt
/// ([`crate::switch_cost`]): the system time it compares is apportioned
/// by 4 ms ticks, pooled over the windows.
const LEARNING_WINDOW_NS: u64 = 4_000_000;
/// The duty exponent's ceiling: at worst one window in 4096 is watched.
const MAX_DUTY: u32 = 12;
const WORD: usize = 8;

const PERF_TYPE_BREAKPOINT: u32 = 5;
const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_DUMMY: u64 = 9;
const HW_BREAKPOINT_RW: u32 = 3;
/// `read_format`: the count, then the times enabled and running.
const READ_TIMES: u64 = 1 | 2;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_REFRESH: libc::c_ulong = 0x2402;
const IOC_ENABLE: libc::c_ulong = 0x2400;
/// `_IOW('$', 11, struct perf_event_attr *)`.
const IOC_MODIFY_ATTRIBUTES: libc::c_ulong = 0x4008_240b;
/// `si_code` of a POSIX timer's signal.
const SI_TIMER: i32 = -2;
/// The timer signal's value: tells the counter's signals from the
/// program's own uses of the same number.
const MAGIC: usize = 0x6e75_6d61_6c61_6277;

/// One thread's watch. Its own thread turns the windows; the exiting
/// thread closes every watch's last window (`busy` keeps them apart).
struct Watch {
    tid: AtomicU32,
    slots: AtomicUsize,
    fds: [AtomicI32; MAX_SLOTS],
    /// Each event's id (`sys::perf_id`): a descriptor is read, changed or
    /// closed only while it is still that event.
    ids: [AtomicU64; MAX_SLOTS],
    /// The word each slot watches this window (0: none, a skipped window).
    words: [AtomicU64; MAX_SLOTS],
    /// Each event's count and running time when the window opened.
    count_at: [AtomicU64; MAX_SLOTS],
    running_at: [AtomicU64; MAX_SLOTS],
    /// The thread's CPU time and its CPU's node when the window opened.
    cpu_at: AtomicU64,
    /// The thread's context switches, page faults, system time and CPU
    /// time when its last turn ended (`usage_valid`: read by its own
    /// thread's turn), for the surcharge of watched switches
    /// ([`crate::switch_cost`]) and their charge.
    switches_at: AtomicU64,
    blocked_at: AtomicU64,
    faults_at: AtomicU64,
    sys_at: AtomicU64,
    run_at: AtomicU64,
    usage_valid: AtomicBool,
    node_at: AtomicI32,
    /// Tracked pages when the window's words were drawn, and its duty.
    frame: AtomicU64,
    duty: AtomicU32,
    /// The POSIX timer that turns the windows, and its interval now.
    timer: AtomicUsize,
    interval: AtomicU64,
    seed: AtomicU64,
    busy: AtomicBool,
    /// The program closed or reused the events' descriptors: no more
    /// windows ([`forget_events`]).
    forgotten: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const FREE_WATCH: Watch = Watch {
    tid: AtomicU32::new(0),
    slots: AtomicUsize::new(0),
    fds: [const { AtomicI32::new(-1) }; MAX_SLOTS],
    ids: [const { AtomicU64::new(0) }; MAX_SLOTS],
    words: [const { AtomicU64::new(0) }; MAX_SLOTS],
    count_at: [const { AtomicU64::new(0) }; MAX_SLOTS],
    running_at: [const { AtomicU64::new(0) }; MAX_SLOTS],
    cpu_at: AtomicU64::new(0),
    switches_at: AtomicU64::new(0),
    blocked_at: AtomicU64::new(0),
    faults_at: AtomicU64::new(0),
    sys_at: AtomicU64::new(0),
    run_at: AtomicU64::new(0),
    usage_valid: AtomicBool::new(false),
    node_at: AtomicI32::new(-1),
    frame: AtomicU64::new(0),
    duty: AtomicU32::new(0),
    timer: AtomicUsize::new(0),
    interval: AtomicU64::new(0),
    seed: AtomicU64::new(0),
    busy: AtomicBool::new(false),
    forgotten: AtomicBool::new(false),
};

static WATCHES: [Watch; MAX_THREADS] = [FREE_WATCH; MAX_THREADS];

thread_local! {
    /// This thread's entry in [`WATCHES`].
    static MINE: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// Set once counting started (its totals are written at exit), and while
/// windows open (cleared when sampling ends: `--duration`, exit).
static STARTED: AtomicBool = AtomicBool::new(false);
static ON: AtomicBool = AtomicBool::new(false);
static SLOTS: AtomicUsize = AtomicUsize::new(MAX_SLOTS);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
static WINDOW_NS: AtomicU64 = AtomicU64::new(DEFAULT_WINDOW_NS);
/// The share of the program's CPU time sampling may take in all
/// (`NUMALAB_PROFILE_OVERHEAD` in percent), in millionths.
static TARGET_PPM: AtomicU64 = AtomicU64::new(0);

/// Word counting's part of the whole target; the page sampler aims at
/// what word counting leaves ([`crate::cost::pages_target`]). With the
/// whole target here, the truth program measured 0.96% at 0.5%: word
/// counting used its 0.5%, and the page sampler's costs that do not
/// shrink with its rate (snapshots, the slowest rate's pages, the start)
/// came on top.
pub const SHARE_OF_TARGET: f64 = 0.75;
/// What word counting leaves the page sampler at most, as a share of the
/// program's time: those fixed costs do not grow with the target, and at
/// `--overhead 99` (the guests' truth suite, whose emulated CPUs make
/// every cost look large) word counting keeps 98%.
const LEFT_FOR_PAGES_AT_MOST: f64 = 0.01;

/// The share of the program's CPU time word counting may take:
/// [`SHARE_OF_TARGET`] of sampling's whole target, leaving the pages at
/// most a percentage point.
pub fn target() -> f64 {
    let whole = match TARGET_PPM.load(SeqCst) {
        0 => DEFAULT_OVERHEAD,
        ppm => ppm as f64 / 1e6,
    };
    share_of(whole)
}

fn share_of(whole: f64) -> f64 {
    whole - (whole * (1.0 - SHARE_OF_TARGET)).min(LEFT_FOR_PAGES_AT_MOST)
}

/// The duty exponent windows open with now.
static DUTY: AtomicU32 = AtomicU32::new(0);
/// The cost of one counted access (ns), measured at start.
static HIT_NS: AtomicU64 = AtomicU64::new(0);
/// Totals: time the turns took, accesses counted (raw), windows watched
/// and skipped, slot-windows (cells), threads watched and lost.
static TURN_NS: AtomicU64 = AtomicU64::new(0);
static TURNS: AtomicU64 = AtomicU64::new(0);
/// The turns that closed and opened a watched window, and their time.
static OPEN_TURNS: AtomicU64 = AtomicU64::new(0);
static OPEN_TURN_NS: AtomicU64 = AtomicU64::new(0);
static HITS: AtomicU64 = AtomicU64::new(0);
/// What a context switch and a page fault cost a thread more while its
/// window watches ([`Surcharge`]). A switch's is measured on the
/// program's own windows, watched against skipped ([`crate::switch_cost`]),
/// and charged for every watched switch; a fault's by the sampler thread
/// ([`measure_surcharges_when_due`]), for the share of its window the
/// watchpoints were on.
static SWITCH: Surcharge = Surcharge::new();
static FAULT: Surcharge = Surcharge::new();
/// Watched page faults before their cost is measured (about 1 ms of
/// faults, 1-2 ms to measure).
const FAULTS_BEFORE_MEASURING: u64 = 1000;

/// What one kind of event (a context switch, a page fault) costs a thread
/// more while its window watches: on this virtual machine 1-2 µs more a
/// switch on one busy CPU, about 16 µs more one that halts its CPU and is
/// woken from another, and about 1 µs more a fault (1.6 µs unarmed: a program that
/// first-touches 60 MB with its windows on paid 15 ms more), most likely
/// because armed debug registers are saved and loaded with every exit to
/// the hypervisor, which a switch or a fault makes. Its cost (0: not measured, or
/// nothing measurable), whether the measurement was tried and whether it
/// gave a value, the events of watching threads, and those events
/// weighted by the share of their window the watchpoints were on, in
/// thousandths: the charge is the two multiplied, so that events counted
/// before the measurement are charged once it is made. (A cost measured
/// on the program's own windows is already their average, watchpoints on
/// or not: its events are added as on for the whole window.)
/// `unwatched_ns`: what the event takes in a skipped window,
/// where it was measured there.
struct Surcharge {
    ns: AtomicU64,
    unwatched_ns: AtomicU64,
    tried: AtomicBool,
    measured: AtomicBool,
    events: AtomicU64,
    on_milli: AtomicU64,
}

impl Surcharge {
    const fn new() -> Surcharge {
        Surcharge {
            ns: AtomicU64::new(0),
            unwatched_ns: AtomicU64::new(0),
            tried: AtomicBool::new(false),
            measured: AtomicBool::new(false),
            events: AtomicU64::new(0),
            on_milli: AtomicU64::new(0),
        }
    }

    /// A cost measured on the program's windows (it is updated as they
    /// come).
    fn set(&self, ns: u64, unwatched_ns: u64) {
        self.ns.store(ns, SeqCst);
        self.unwatched_ns.store(unwatched_ns, SeqCst);
        self.tried.store(true, SeqCst);
        self.measured.store(true, SeqCst);
    }

    /// A watched window's events, its watchpoints on for `ran` of its
    /// `window` ns.
    fn add(&self, events: u64, ran: u64, window: u64) {
        self.events.fetch_add(events, SeqCst);
        self.on_milli
            .fetch_add(events_on_milli(events, ran, window), SeqCst);
    }

    /// What the watched events cost so far, at the measured cost.
    fn charge(&self) -> u64 {
        let milli = self.on_milli.load(SeqCst) as u128;
        (milli * self.ns.load(SeqCst) as u128 / 1000).min(u64::MAX as u128) as u64
    }

    /// Measures the cost with `measure` once the watched events reach
    /// `due` (a program that rarely blocks or faults never pays for the
    /// measurement). Once only; `None` leaves it unmeasured.
    fn measure_when_due(&self, due: u64, measure: impl FnOnce() -> Option<u64>) {
        if self.events.load(SeqCst) < due || self.tried.swap(true, SeqCst) {
            return;
        }
        if let Some(ns) = measure() {
            self.ns.store(ns, SeqCst);
            self.measured.store(true, SeqCst);
        }
    }

    fn record(&self, events_are: Kind) -> numalab_profile_abi::events::WordSurcharge {
        numalab_profile_abi::events::WordSurcharge {
            events_are,
            tid: sys::gettid(),
            ns_each: self.ns.load(SeqCst).min(u32::MAX as u64) as u32,
            unwatched_ns_each: self.unwatched_ns.load(SeqCst).min(u32::MAX as u64) as u32,
            measured: self.measured.load(SeqCst),
            events: self.events.load(SeqCst),
            charged_ns: self.charge(),
            time_ns: sys::monotonic_ns(),
        }
    }
}
static WINDOWS: AtomicU64 = AtomicU64::new(0);
static CELLS: AtomicU64 = AtomicU64::new(0);
static THREADS: AtomicU64 = AtomicU64::new(0);
static LOST: AtomicU64 = AtomicU64::new(0);
/// The node of each CPU (u8::MAX: unknown), read at start.
static CPU_NODE: [AtomicU8; 4096] = [const { AtomicU8::new(u8::MAX) }; 4096];
/// The program's action for the timer signal.
static PROGRAM: KeptAction = KeptAction::new();
/// pthread key whose destructor ends a thread's watch.
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Whether word counting runs.
pub fn running() -> bool {
    ON.load(SeqCst)
}

/// The signal the windows' timers send (0: none).
pub fn signal() -> i32 {
    SIGNAL.load(SeqCst)
}

/// The signal number the counter takes: a real-time signal few programs
/// use; the program's own uses of it still reach it (see `on_signal`).
pub fn signal_number() -> i32 {
    libc::SIGRTMAX() - 7
}

/// The program's action for the timer signal, kept while the counter
/// holds it: the interposed `sigaction` reads and replaces it here.
pub fn program_action() -> &'static KeptAction {
    &PROGRAM
}

/// The cost of one counted access, in ns (0: not measured).
pub fn hit_ns() -> u64 {
    HIT_NS.load(SeqCst)
}

/// What word counting spent so far, for the cost controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spent {
    /// The turns' own time, and the turns (each a signal delivered).
    pub turn_ns: u64,
    pub turns: u64,
    /// Accesses counted (each a trap).
    pub hits: u64,
    /// What watching threads' context switches and page faults cost
    /// more.
    pub switch_ns: u64,
    pub fault_ns: u64,
}

pub fn spent() -> Spent {
    Spent {
        turn_ns: TURN_NS.load(SeqCst),
        turns: TURNS.load(SeqCst),
        hits: HITS.load(SeqCst),
        switch_ns: SWITCH.charge(),
        fault_ns: FAULT.charge(),
    }
}

/// A thread's context switches (voluntary and not; `blocked`: the
/// voluntary ones), page faults and system time so far.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    switches: u64,
    blocked: u64,
    faults: u64,
    sys_ns: u64,
}

/// The calling thread's usage so far, by the system call itself: safe in
/// the turn's signal handler.
fn own_usage() -> Usage {
    let Some(ru) = sys::usage(libc::RUSAGE_THREAD) else {
        return Usage::default();
    };
    Usage {
        switches: (ru.ru_nvcsw as u64).saturating_add(ru.ru_nivcsw as u64),
        blocked: ru.ru_nvcsw as u64,
        faults: (ru.ru_minflt as u64).saturating_add(ru.ru_majflt as u64),
        sys_ns: (ru.ru_stime.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ru.ru_stime.tv_usec as u64 * 1000),
    }
}

/// Thread `tid`'s context switches and page faults so far (at exit,
/// from another thread: its /proc status and stat; allocates).
fn task_usage(tid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    let switches = field("voluntary_ctxt_switches:")? + field("nonvoluntary_ctxt_switches:")?;
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    Some((switches, stat_faults(&stat)?))
}

/// Minor and major faults from a /proc stat line: its 10th and 12th
/// fields, counted after the command name's closing parenthesis (the
/// name may hold spaces and parentheses).
fn stat_faults(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ")": state is field 3, so field n is at index n - 3.
    let minor: u64 = fields.get(7)?.parse().ok()?;
    let major: u64 = fields.get(9)?.parse().ok()?;
    Some(minor + major)
}

/// The events of a watched window that its watchpoints paid for, in
/// thousandths: `events` for the share of the window the watchpoints
/// were on (`ran` of `window` ns of the thread's CPU time: an event that
/// reached its cap is off for the rest). Times the measured cost of one,
/// the window's charge.
pub fn events_on_milli(events: u64, ran: u64, window: u64) -> u64 {
    if window == 0 {
        return 0;
    }
    let on = (ran as f64 / window as f64).clamp(0.0, 1.0);
    (events as f64 * 1000.0 * on).round() as u64
}

/// Measures what a page fault costs a watching thread once the watched
/// ones pass [`FAULTS_BEFORE_MEASURING`], on the calling thread (the
/// sampler's, between ticks): it never holds the program's start. (A
/// switch's cost comes from the program's own windows: see
/// [`crate::switch_cost`].)
pub fn measure_surcharges_when_due() {
    if !STARTED.load(SeqCst) {
        return;
    }
    let slots = SLOTS.load(SeqCst);
    FAULT.measure_when_due(FAULTS_BEFORE_MEASURING, || {
        without_hold(|| sys::undelayed(|| fault::calibrate(slots)))
    });
}

/// The duty exponent now; the controller raises it when counting costs
/// more than its target, lowers it when it costs far less.
pub fn duty() -> u32 {
    DUTY.load(SeqCst)
}

pub fn set_duty(d: u32) {
    DUTY.store(d.min(MAX_DUTY), SeqCst);
}

fn attr(word: u64) -> PerfEventAttr {
    PerfEventAttr {
        kind: PERF_TYPE_BREAKPOINT,
        size: PerfEventAttr::SIZE,
        sample_period: CAP,
        read_format: READ_TIMES,
        // Created off; each window enables it for one overflow
        // (IOC_REFRESH). User-space accesses only.
        flags: ATTR_DISABLED | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV,
        bp_type: HW_BREAKPOINT_RW,
        config1: word,
        config2: WORD as u64,
        ..Default::default()
    }
}

fn ioctl(fd: i32, request: libc::c_ulong, arg: usize) -> i32 {
    // SAFETY: perf ioctls on the descriptor; MODIFY's argument points to
    // a live PerfEventAttr (the caller's).
    unsafe { libc::ioctl(fd, request as _, arg) }
}

/// The event's count and running time, or `None` when the descriptor is
/// gone (the program closed it).
fn read_event(fd: i32) -> Option<(u64, u64)> {
    let mut v = [0u64; 3];
    // SAFETY: reads 24 bytes into v.
    let n = unsafe { libc::read(fd, v.as_mut_ptr().cast(), 24) };
    (n == 24).then_some((v[0], v[2]))
}

fn node_of(cpu: u32) -> i32 {
    match CPU_NODE.get(cpu as usize).map(|n| n.load(SeqCst)) {
        Some(n) if n != u8::MAX => n as i32,
        _ => -1,
    }
}

/// A thread's CPU-time clock (glibc's MAKE_THREAD_CPUCLOCK with
/// CPUCLOCK_SCHED), readable from any thread of the process.
fn thread_clock(tid: u32) -> libc::clockid_t {
    ((!(tid as libc::clockid_t)) << 3) | 6
}

fn next_random(w: &Watch) -> u64 {
    let mut x = w.seed.load(SeqCst);
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w.seed.store(x, SeqCst);
    x
}

/// What word counting is assumed to cost a program at its start, before
/// the controller has measured anything: the duty starts where that
/// would be kept to the target ([`start_duty`]), as the page rate starts
/// low, and each of the controller's windows lowers it by one while
/// counting costs under a third of its target. At duty 0 from the start,
/// the truth program's first 100 ms cost word counting 6-10 ms of its
/// 160-180 (4-6%), mostly its first touches' page faults made dearer by
/// the armed registers. Counts carry their duty as their weight, so the
/// estimates stay unbiased.
const START_COST: f64 = 0.015;

/// The duty windows open with when a cost controller runs and word
/// counting's target is `target`: 2 (one window in four) at the default
/// 0.375%, 0 from 1.5% up.
pub fn start_duty(target: f64) -> u32 {
    if target <= 0.0 {
        return MAX_DUTY;
    }
    // Less a hair, so that a target that is START_COST over an exact
    // power of two (the default's 4) does not round up to one more.
    ((START_COST / target).log2() - 1e-9)
        .ceil()
        .clamp(0.0, MAX_DUTY as f64) as u32
}

/// Starts word counting, on the main thread before `main`: the signal, a
/// trial watchpoint (a refusal is written once, with its errno), the cost
/// of one counted access, the CPUs' nodes, and the main thread's watch.
/// `controlled`: a cost controller (the sampler thread) will run and
/// adapt the duty, which then starts at [`start_duty`].
pub fn init(refining: bool, controlled: bool) {
    let config = config();
    if !config.word_counts {
        return;
    }
    if let Some(pct) = config.overhead_percent {
        TARGET_PPM.store((pct * 1e4).round() as u64, SeqCst);
    }
    if controlled {
        set_duty(start_duty(target()));
    }
    let slots = config
        .word_slots
        .unwrap_or(if refining { 2 } else { MAX_SLOTS })
        .clamp(1, if refining { 2 } else { MAX_SLOTS });
    SLOTS.store(slots, SeqCst);
    if let Some(ms) = config.word_window_ms {
        WINDOW_NS.store((ms as u64).clamp(1, 10_000) * 1_000_000, SeqCst);
    }
    if let Err(errno) = calibrate() {
        totals(-errno);
        return;
    }
    for (cpu, node) in sys::cpu_nodes().into_iter().enumerate().take(4096) {
        CPU_NODE[cpu].store(node, SeqCst);
    }
    let sig = signal_number();
    if !take_signal(sig, on_signal, None, &PROGRAM) {
        return;
    }
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a key for this library, its destructor an extern "C" fn.
    if unsafe { libc::pthread_key_create(&mut key, Some(key_destructor)) } == 0 {
        KEY.store(key, SeqCst);
    }
    SIGNAL.store(sig, SeqCst);
    STARTED.store(true, SeqCst);
    ON.store(true, SeqCst);
    thread_starts();
}

/// What one counted access costs this thread, measured on a word of its
/// own (the median of a few rounds); the errno when the kernel refuses a
/// watchpoint.
fn calibrate() -> Result<(), i32> {
    let mut word = std::hint::black_box(Box::new(0u64));
    let p: *mut u64 = &mut *word;
    let mut a = attr(p as u64);
    a.flags &= !ATTR_DISABLED;
    a.sample_period = 0;
    let fd = sys::perf_event_open(&a, 0)?;
    const HITS: u64 = 16;
    let mut rounds = [0u64; 5];
    for r in rounds.iter_mut() {
        let t0 = sys::monotonic_ns();
        for k in 0..HITS {
            // SAFETY: p points to the boxed word, alive here.
            unsafe { std::ptr::write_volatile(p, k) };
        }
        *r = (sys::monotonic_ns() - t0) / HITS;
    }
    rounds.sort_unstable();
    HIT_NS.store(rounds[rounds.len() / 2], SeqCst);
    sys::close(fd);
    drop(word);
    Ok(())
}

/// The middle of `v` (sorted in place).
fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Watchpoints the calibrations arm on the calling thread, each on a word
/// nobody touches (they only need to be armed). Open only around the
/// armed rounds: the rounds they are compared with have no event at all,
/// as a thread has in a skipped window ([`open_events`]), so the
/// difference is what a watched window adds over a skipped one, the
/// events' mere presence included.
struct Armed {
    words: Box<[u64; MAX_SLOTS]>,
    slots: usize,
    fds: Vec<i32>,
}

impl Armed {
    /// `None` when the kernel opens no watchpoint now.
    fn new(slots: usize) -> Option<Armed> {
        let mut a = Armed {
            words: std::hint::black_box(Box::new([0u64; MAX_SLOTS])),
            slots,
            fds: Vec::with_capacity(MAX_SLOTS),
        };
        a.on();
        let opened = !a.fds.is_empty();
        a.off();
        opened.then_some(a)
    }

    /// Opens the events, enabled (as many as open).
    fn on(&mut self) {
        for word in self.words.iter().take(self.slots) {
            let mut a = attr(word as *const u64 as u64);
            a.flags &= !ATTR_DISABLED;
            a.sample_period = 0;
            match sys::perf_event_open(&a, 0) {
                Ok(fd) => self.fds.push(fd),
                Err(_) => break,
            }
        }
    }

    /// Closes them: the thread has no event.
    fn off(&mut self) {
        for fd in self.fds.drain(..) {
            sys::close(fd);
        }
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        self.off();
    }
}

/// What a page fault costs a thread more while its watchpoints are on,
/// measured on the calling thread: rounds of first touches of pages of a
/// mapping of the library's own (dropped between rounds), without events
/// and with them armed alternately ([`Armed`]); the difference of the pooled medians of a
/// fault's time, 0 where the armed rounds were no slower.
mod fault {
    use super::median;
    use crate::runtime::state::page_size;
    use crate::runtime::sys;

    /// Pages a round, and pairs of rounds (off, on): 512 faults, 1-2 ms
    /// here.
    const PAGES: usize = 64;
    const PAIRS: usize = 4;

    /// The time of one round's faults, per fault (ns); `None` when the
    /// pages cannot be dropped.
    fn round(base: usize, ps: usize) -> Option<u64> {
        // SAFETY: drops the pages of the library's own mapping below, by
        // the system call itself (the interposed madvise would not).
        if unsafe { libc::syscall(libc::SYS_madvise, base, PAGES * ps, libc::MADV_DONTNEED) } != 0 {
            return None;
        }
        let t0 = sys::monotonic_ns();
        for k in 0..PAGES {
            // SAFETY: inside the mapping, readable and writable.
            unsafe { std::ptr::write_volatile((base + k * ps) as *mut u8, 1) };
        }
        Some((sys::monotonic_ns() - t0) / PAGES as u64)
    }

    pub fn calibrate(slots: usize) -> Option<u64> {
        measure(&mut super::Armed::new(slots)?)
    }

    fn measure(armed: &mut super::Armed) -> Option<u64> {
        let ps = page_size();
        // SAFETY: an anonymous private mapping, by the system call itself
        // (the interposed mmap would track it as the program's).
        let p = unsafe {
            libc::syscall(
                libc::SYS_mmap,
                0usize,
                PAGES * ps,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0usize,
            )
        };
        if p < 0 {
            return None;
        }
        let base = p as usize;
        let mut off = [0u64; PAIRS];
        let mut on = [0u64; PAIRS];
        let mut ok = true;
        for k in 0..PAIRS {
            let Some(a) = round(base, ps) else {
                ok = false;
                break;
            };
            off[k] = a;
            armed.on();
            let b = round(base, ps);
            armed.off();
            let Some(b) = b else {
                ok = false;
                break;
            };
            on[k] = b;
        }
        // SAFETY: unmaps the mapping made above.
        unsafe { libc::syscall(libc::SYS_munmap, base, PAGES * ps) };
        ok.then(|| median(&mut on).saturating_sub(median(&mut off)))
    }
}

/// Opens the calling thread's watch: its events (created off), its
/// timer, its first window. Called for the main thread at start and for
/// every thread `pthread_create` starts.
pub fn thread_starts() {
    // Threads outside `--threads` are not watched: their accesses are
    // not the profile's.
    if !running() || on_library_thread() || !crate::select::thread_selected() {
        return;
    }
    let tid = sys::gettid();
    let Some(i) = WATCHES
        .iter()
        .position(|w| w.tid.compare_exchange(0, tid, SeqCst, SeqCst).is_ok())
    else {
        LOST.fetch_add(1, SeqCst);
        return;
    };
    let w = &WATCHES[i];
    w.forgotten.store(false, SeqCst);
    let slots = open_events(w);
    w.seed
        .store(sys::monotonic_ns() ^ ((tid as u64) << 32) | 1, SeqCst);
    if slots == 0 || !start_timer(w, tid) {
        close_events(w);
        w.tid.store(0, SeqCst);
        LOST.fetch_add(1, SeqCst);
        return;
    }
    MINE.with(|m| m.set(i));
    let key = KEY.load(SeqCst);
    if key != u32::MAX {
        // SAFETY: a key made at init; any non-null value runs the
        // destructor at the thread's exit.
        unsafe { libc::pthread_setspecific(key, std::ptr::dangling::<libc::c_void>()) };
    }
    THREADS.fetch_add(1, SeqCst);
    turn(w, tid, true, true);
}

/// The next window's length, from the last window's accesses per draw
/// (`counted` over `slots`) and what a draw's turn costs against one
/// counted access (`turn_per_access`: a slot's share of a turn over a
/// trap's cost). The engine estimates each thread's mean count per draw,
/// so a draw is worth more the more accesses it counts, until each costs
/// as much as the turn that made the draw (then more only adds cost) or it
/// reaches its [`CAP`]: the target is that many accesses a draw, between 1
/// and CAP. Doubled while under half the target, halved while over twice
/// it. (The weights do not depend on it: every moment of the thread is
/// watched, whatever the windows' lengths.)
pub fn next_interval(interval: u64, counted: u64, slots: u64, turn_per_access: f64) -> u64 {
    let target = turn_per_access.clamp(1.0, CAP as f64);
    let per_draw = counted as f64 / slots.max(1) as f64;
    let next = if per_draw > 2.0 * target {
        interval / 2
    } else if per_draw < target / 2.0 {
        interval.saturating_mul(2)
    } else {
        interval
    };
    next.clamp(MIN_WINDOW_NS, MAX_WINDOW_NS)
}

/// A slot's share of a watched window's turn over one counted access's
/// cost, as measured so far (1 before anything is measured).
fn turn_per_access() -> f64 {
    let turns = OPEN_TURNS.load(SeqCst);
    let hit = HIT_NS.load(SeqCst);
    if turns == 0 || hit == 0 {
        return 1.0;
    }
    OPEN_TURN_NS.load(SeqCst) as f64 / turns as f64 / SLOTS.load(SeqCst).max(1) as f64 / hit as f64
}

fn set_interval(timer: usize, ns: u64) -> bool {
    let every = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    let spec = libc::itimerspec {
        it_interval: every,
        it_value: every,
    };
    // SAFETY: a timer this library created; a valid itimerspec.
    unsafe { libc::timer_settime(timer as libc::timer_t, 0, &spec, std::ptr::null_mut()) == 0 }
}

/// A per-thread CPU-time timer sending the counter's signal to `tid`
/// every window.
fn start_timer(w: &Watch, tid: u32) -> bool {
    // SAFETY: zeroed sigevent filled with a thread-directed signal; the
    // timer id is written by the kernel.
    unsafe {
        let mut ev: libc::sigevent = std::mem::zeroed();
        ev.sigev_notify = libc::SIGEV_THREAD_ID;
        ev.sigev_signo = SIGNAL.load(SeqCst);
        ev.sigev_value = libc::sigval {
            sival_ptr: MAGIC as *mut libc::c_void,
        };
        ev.sigev_notify_thread_id = tid as i32;
        let mut timer: libc::timer_t = std::ptr::null_mut();
        if libc::timer_create(libc::CLOCK_THREAD_CPUTIME_ID, &mut ev, &mut timer) != 0 {
            return false;
        }
        let ns = WINDOW_NS.load(SeqCst);
        if !set_interval(timer as usize, ns) {
            libc::timer_delete(timer);
            return false;
        }
        w.timer.store(timer as usize, SeqCst);
        w.interval.store(ns, SeqCst);
    }
    true
}

/// Opens the calling thread's events (off, on a placeholder word) into
/// its slots; how many it got. They are open only while windows are
/// watched ([`turn`] closes them for skipped ones): a thread with perf
/// events pays for each of its context switches even while they are off,
/// 2-4 µs here, which made a two-thread barrier loop 17% slower with four
/// events a thread that never counted (docs/profile.md, "Overhead
/// measured").
fn open_events(w: &Watch) -> usize {
    let mut slots = 0;
    for s in 0..SLOTS.load(SeqCst) {
        match sys::perf_event_open(&attr(w as *const Watch as u64), 0) {
            Ok(fd) => {
                w.ids[s].store(sys::perf_id(fd).unwrap_or(0), SeqCst);
                w.fds[s].store(fd, SeqCst);
                w.words[s].store(0, SeqCst);
                // A new event counts from 0.
                w.count_at[s].store(0, SeqCst);
                w.running_at[s].store(0, SeqCst);
                slots += 1;
            }
            // The registers are taken (a debugger, refinement): fewer
            // slots, which the weights know.
            Err(_) => break,
        }
    }
    w.slots.store(slots, SeqCst);
    slots
}

/// An event that counts nothing, held on the sampler thread while word
/// counting runs (its descriptor and id; -1: none). While any task has a
/// perf event the kernel keeps its context-switch hooks for them on; the
/// first event after none holds the thread that opens it while the kernel
/// patches its code and waits for every CPU (11-23 ms on this VM), and
/// the hooks go off 1 s after the last event closes. With the events
/// closed in skipped windows, a thread's next watched window would
/// otherwise pay that again after every quiet second. The sampler thread
/// switches a few times a tick, so the event's own cost there is small;
/// the calibrations, which run on that thread and compare rounds without
/// events against armed ones, let it go while they measure
/// ([`without_hold`]).
static HOLD_FD: AtomicI32 = AtomicI32::new(-1);
static HOLD_ID: AtomicU64 = AtomicU64::new(0);

/// Opens the hold on the calling thread (the sampler's), while word
/// counting runs.
pub fn hold_switch_hooks() {
    if !running() || HOLD_FD.load(SeqCst) >= 0 {
        return;
    }
    let attr = PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: PerfEventAttr::SIZE,
        config: PERF_COUNT_SW_DUMMY,
        flags: ATTR_DISABLED | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV,
        ..Default::default()
    };
    if let Ok(fd) = sys::perf_event_open(&attr, 0) {
        HOLD_ID.store(sys::perf_id(fd).unwrap_or(0), SeqCst);
        HOLD_FD.store(fd, SeqCst);
    }
}

/// `f` with the hold let go (on the hold's thread): the hooks stay on
/// meanwhile, since they go off only a second after the last event.
fn without_hold<T>(f: impl FnOnce() -> T) -> T {
    let fd = HOLD_FD.swap(-1, SeqCst);
    if fd >= 0 {
        sys::close_event(fd, HOLD_ID.load(SeqCst));
    }
    let r = f();
    if fd >= 0 {
        hold_switch_hooks();
    }
    r
}

/// Whether `w`'s events are open (closed while windows are skipped).
fn events_open(w: &Watch) -> bool {
    w.fds[0].load(SeqCst) >= 0
}

fn close_events(w: &Watch) {
    for (fd, id) in w.fds.iter().zip(&w.ids) {
        let f = fd.swap(-1, SeqCst);
        if f >= 0 {
            sys::close_event(f, id.load(SeqCst));
        }
    }
}

/// Whether every slot's descriptor is still its event: a program that
/// closed them (`closefrom`) may have opened its own files under their
/// numbers, which must then be neither read nor changed. One `ioctl` a
/// slot, on turns that use the events only.
fn events_ours(w: &Watch, slots: usize) -> bool {
    (0..slots).all(|s| {
        let fd = w.fds[s].load(SeqCst);
        fd < 0 || sys::perf_id(fd) == Some(w.ids[s].load(SeqCst))
    })
}

/// Ends the calling thread's watch (its last window counted).
pub fn thread_ends() {
    let i = MINE.with(|m| m.replace(usize::MAX));
    if i == usize::MAX {
        return;
    }
    finish(&WATCHES[i]);
}

extern "C" fn key_destructor(_: *mut libc::c_void) {
    thread_ends();
}

/// Closes a watch for good: its last window, timer and events.
fn finish(w: &Watch) {
    let tid = w.tid.load(SeqCst);
    if tid == 0 {
        return;
    }
    turn(w, tid, false, tid == sys::gettid());
    let t = w.timer.swap(0, SeqCst);
    if t != 0 {
        // SAFETY: a timer this library created and nobody else deletes.
        unsafe { libc::timer_delete(t as libc::timer_t) };
    }
    close_events(w);
    w.tid.store(0, SeqCst);
}

/// Sampling ends before the program (`--duration`): each thread closes
/// its watch at its next turn (its last window counted), so that no
/// access is trapped afterwards.
pub fn stop() {
    ON.store(false, SeqCst);
}

/// At exit: every watch's last window, then the totals.
pub fn at_exit() {
    if !STARTED.swap(false, SeqCst) {
        return;
    }
    ON.store(false, SeqCst);
    for w in WATCHES.iter() {
        finish(w);
    }
    totals(0);
}

/// In a forked child: the parent's watches are not this process's
/// threads (timers are not inherited; the descriptors are the parent's
/// events): forgotten, and no new ones.
pub fn after_fork_in_child() {
    ON.store(false, SeqCst);
    STARTED.store(false, SeqCst);
    MINE.with(|m| m.set(usize::MAX));
}

/// The totals so far, while counting runs (the sampler writes them now
/// and then: a program that never calls libc's `exit` gets no others).
pub fn totals_so_far() {
    if STARTED.load(SeqCst) {
        totals(0);
    }
}

fn totals(unavailable: i32) {
    emit(
        &numalab_profile_abi::events::WordTotals {
            tid: sys::gettid(),
            windows: WINDOWS.load(SeqCst),
            cells: CELLS.load(SeqCst),
            threads: THREADS.load(SeqCst).min(u32::MAX as u64) as u32,
            threads_lost: LOST.load(SeqCst).min(u32::MAX as u64) as u32,
            unavailable,
            ns_per_access: HIT_NS.load(SeqCst).min(u32::MAX as u64) as u32,
            turns_ns: TURN_NS.load(SeqCst),
        }
        .to_record(),
    );
    emit(&SWITCH.record(Kind::WordSwitches).to_record());
    for side in crate::switch_cost::records(sys::gettid()) {
        emit(&side.to_record());
    }
    emit(&FAULT.record(Kind::WordFaults).to_record());
}

extern "C" fn on_signal(sig: i32, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO; a
    // timer's carries its sigval.
    let ours =
        unsafe { (*info).si_code == SI_TIMER && (*info).si_value().sival_ptr as usize == MAGIC };
    if !ours {
        chain(&PROGRAM, sig, info, ctx);
        return;
    }
    let i = MINE.with(|m| m.get());
    if i == usize::MAX {
        return;
    }
    // The program's errno survives the handler's system calls.
    // SAFETY: this thread's errno location.
    let errno = unsafe { *libc::__errno_location() };
    if running() {
        let w = &WATCHES[i];
        turn(w, w.tid.load(SeqCst), true, true);
    } else {
        // Sampling ended: the last window is counted, the watch closed.
        thread_ends();
    }
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Closes the window `w` (of thread `tid`) has open, writing a WordCount
/// per word it counted, and with `reopen` opens the next: new words, or a
/// skipped window at the duty's odds. `own`: called on the watch's own
/// thread. On its own thread a turn reads the thread's usage as it starts
/// and as it ends (two `getrusage` calls), so that each window's system
/// time and switches, its turns' own left out, compare watched windows
/// with skipped ones ([`crate::switch_cost`]); a skipped window followed
/// by another makes no other system call.
fn turn(w: &Watch, tid: u32, reopen: bool, own: bool) {
    if w.busy.swap(true, SeqCst) {
        return;
    }
    let t0 = sys::monotonic_ns();
    let clock = if own {
        libc::CLOCK_THREAD_CPUTIME_ID
    } else {
        thread_clock(tid)
    };
    let at_start = own.then(|| (own_usage(), sys::cpu_clock_ns(clock)));
    let slots = w.slots.load(SeqCst);
    let watching = (0..slots).any(|s| w.words[s].load(SeqCst) != 0);
    // Events open: the window was watched, for what its switches cost.
    let armed = events_open(w);
    let mut lost = watching && !events_ours(w, slots);
    let mut hits = 0;
    if watching && !lost {
        match close_window(w, tid, slots, clock, at_start.map(|(u, _)| u), t0) {
            Some((counted, watched)) => {
                hits = counted;
                if reopen && watched > 0 {
                    let interval = w.interval.load(SeqCst);
                    let next = next_interval(interval, counted, watched, turn_per_access());
                    if next != interval && set_interval(w.timer.load(SeqCst), next) {
                        w.interval.store(next, SeqCst);
                    }
                }
            }
            None => lost = true,
        }
    }
    // A thread's last window counts too (its exit, or sampling's end): a
    // thread of a short program that blocks often has few windows, and
    // on a loaded host (CI) a 20,000-round barrier loop ended before its
    // skipped ones had 20 ms of CPU time, its switches left unpriced.
    if let Some((u, cpu)) = at_start.filter(|_| !lost) {
        window_ends(w, armed, hits, u, cpu);
    }
    w.usage_valid.store(false, SeqCst);
    if lost {
        forget_events(w, slots);
    } else if reopen && CELLS.load(SeqCst) >= MAX_CELLS {
        stop();
    } else if reopen {
        // While a program that switches often has few skipped windows to
        // price its watched switches against, at least half its windows
        // are skipped (the comparison needs both kinds), and they are
        // short: a watched one costs while the price is unknown, and with
        // the floor in the controller's duty and windows grown to 50 ms
        // a thread of a 0.6 s barrier loop turned two or three times,
        // never skipping one.
        let learning = crate::switch_cost::sums().wants_skipped_windows();
        if learning
            && w.interval.load(SeqCst) > LEARNING_WINDOW_NS
            && set_interval(w.timer.load(SeqCst), LEARNING_WINDOW_NS)
        {
            w.interval.store(LEARNING_WINDOW_NS, SeqCst);
        }
        let d = DUTY.load(SeqCst).max(u32::from(learning));
        if d > 0 && !next_random(w).is_multiple_of(1u64 << d) {
            // A skipped window: no events on the thread while it runs
            // (see open_events).
            for s in 0..slots {
                w.words[s].store(0, SeqCst);
            }
            close_events(w);
        } else if !watching && events_open(w) && !events_ours(w, slots) {
            // The first window after the events sat unused: they are
            // known again first.
            forget_events(w, slots);
        } else if !events_open(w) && (w.forgotten.load(SeqCst) || open_events(w) == 0) {
            // The registers were taken while the windows were skipped: no
            // window now, another try at the next turn.
        } else {
            let slots = w.slots.load(SeqCst);
            open_window(w, slots, d);
            let cpu = if own { sys::cpu() } else { u32::MAX };
            w.node_at.store(node_of(cpu), SeqCst);
            w.cpu_at.store(sys::cpu_clock_ns(clock), SeqCst);
            if watching {
                OPEN_TURNS.fetch_add(1, SeqCst);
                OPEN_TURN_NS.fetch_add(sys::monotonic_ns().saturating_sub(t0), SeqCst);
            }
        }
        if own {
            window_starts(w, clock);
        }
    }
    TURN_NS.fetch_add(sys::monotonic_ns().saturating_sub(t0), SeqCst);
    TURNS.fetch_add(1, SeqCst);
    w.busy.store(false, SeqCst);
}

/// The usage a window of `w` starts from, read as its thread's turn ends
/// (after the turn's own system calls).
fn window_starts(w: &Watch, clock: libc::clockid_t) {
    let u = own_usage();
    w.switches_at.store(u.switches, SeqCst);
    w.blocked_at.store(u.blocked, SeqCst);
    w.faults_at.store(u.faults, SeqCst);
    w.sys_at.store(u.sys_ns, SeqCst);
    w.run_at.store(sys::cpu_clock_ns(clock), SeqCst);
    w.usage_valid.store(true, SeqCst);
}

/// A window of `w` ended (watched: `armed`, with `hits` counted accesses)
/// with the thread's usage `u` and CPU time `cpu`: it joins the
/// comparison of watched and skipped windows, and the switches' cost is
/// updated from it.
fn window_ends(w: &Watch, armed: bool, hits: u64, u: Usage, cpu: u64) {
    if !w.usage_valid.load(SeqCst) {
        return;
    }
    let faults = u.faults.saturating_sub(w.faults_at.load(SeqCst));
    let apart = if armed {
        hits.saturating_mul(HIT_NS.load(SeqCst))
            .saturating_add(faults.saturating_mul(FAULT.ns.load(SeqCst)))
    } else {
        0
    };
    crate::switch_cost::add(&crate::switch_cost::Window {
        watched: armed,
        switches: u.switches.saturating_sub(w.switches_at.load(SeqCst)),
        blocked: u.blocked.saturating_sub(w.blocked_at.load(SeqCst)),
        faults,
        sys_ns: u.sys_ns.saturating_sub(w.sys_at.load(SeqCst)),
        cpu_ns: cpu.saturating_sub(w.run_at.load(SeqCst)),
        charged_apart_ns: apart,
    });
    if let Some(e) = crate::switch_cost::sums().estimate() {
        SWITCH.set(e.surcharge_ns(), e.skipped_ns as u64);
    }
}

/// The program closed (or reused) the descriptors of `w`: its thread's
/// accesses are no longer counted, and the profile says so. The numbers
/// are the program's now: never used or closed by the library again.
fn forget_events(w: &Watch, slots: usize) {
    LOST.fetch_add(1, SeqCst);
    w.forgotten.store(true, SeqCst);
    for s in 0..slots {
        w.words[s].store(0, SeqCst);
        w.fds[s].store(-1, SeqCst);
    }
    w.slots.store(0, SeqCst);
}

/// Reads the counts of the window `w` has open and writes a WordCount per
/// slot; the accesses counted and the slots read, or `None` when the
/// descriptors are gone.
fn close_window(
    w: &Watch,
    tid: u32,
    slots: usize,
    clock: libc::clockid_t,
    usage: Option<Usage>,
    now: u64,
) -> Option<(u64, u64)> {
    // Its own thread's usage was read as the turn started.
    let own = usage.is_some();
    let window = sys::cpu_clock_ns(clock).saturating_sub(w.cpu_at.load(SeqCst));
    // Another thread's CPU (at exit) from its scheduler statistics.
    let cpu = if own {
        sys::cpu()
    } else {
        sys::task_cpu(tid).unwrap_or(u32::MAX)
    };
    let moved = node_of(cpu) != w.node_at.load(SeqCst);
    let ps = page_size();
    let (mut counted, mut watched, mut ran) = (0u64, 0u64, 0u64);
    for s in 0..slots {
        let fd = w.fds[s].load(SeqCst);
        let word = w.words[s].load(SeqCst);
        if fd < 0 || word == 0 {
            continue;
        }
        let (count, running) = read_event(fd)?;
        let c = count.saturating_sub(w.count_at[s].swap(count, SeqCst));
        let r = running.saturating_sub(w.running_at[s].swap(running, SeqCst));
        ran = ran.max(r);
        CELLS.fetch_add(1, SeqCst);
        watched += 1;
        counted += c;
        HITS.fetch_add(c, SeqCst);
        // Stopped at its cap before the window's end: the rate until then
        // over the whole window. (c - 1/2) / t: the c-th access ended the
        // time t, so c / t overstates a random (Poisson) rate by
        // c / (c - 1) and (c - 1) / t understates a periodic one; half way
        // errs by 1/(2c) at most either way.
        let capped = c > 0 && r > 0 && r.saturating_add(r / 20) < window;
        let estimate = if capped {
            ((c as f64 - 0.5) * window as f64 / r as f64)
                .round()
                .max(c as f64) as u64
        } else {
            c
        };
        // A cell without an access is written too: the engine needs every
        // draw to know how many fell in each region (docs/profile.md).
        let node = if c == 0 {
            -1
        } else {
            match sys::page_state((word as usize) & !(ps - 1), ps) {
                sys::PageState::Present(n) => n,
                sys::PageState::Absent => -1,
            }
        };
        let bits = if capped { WORD_CAPPED } else { 0 } | if moved { WORD_MOVED } else { 0 };
        emit(&Record {
            kind: Kind::WordCount,
            tid,
            cpu,
            node,
            flags: word_flags(bits, slots as u32, w.duty.load(SeqCst)),
            aux: w.frame.load(SeqCst).min(u32::MAX as u64) as u32,
            addr: word,
            size: estimate,
            time_ns: now,
        });
    }
    // The window's context switches and page faults, while its
    // watchpoints were on (counted where their cost is not measured too:
    // the profile shows how many went uncharged).
    if watched > 0 {
        let now_usage = usage
            .map(|u| (u.switches, u.faults))
            .or_else(|| task_usage(tid));
        if let Some((switches, faults)) = now_usage {
            let switches = switches.saturating_sub(w.switches_at.load(SeqCst));
            // Priced from whole windows (switch_cost): each counts whole.
            SWITCH.add(switches, window, window);
            let faults = faults.saturating_sub(w.faults_at.load(SeqCst));
            FAULT.add(faults, ran, window);
        }
    }
    Some((counted, watched))
}

/// Opens a watched window of `w` (duty exponent `duty`): each slot on a
/// word drawn uniformly from the tracked pages, enabled for one overflow
/// (its cap); a slot with nothing to draw stays off.
fn open_window(w: &Watch, slots: usize, duty: u32) {
    let ps = page_size();
    let (_, total) = tables::nth_page(0, ps);
    for s in 0..slots {
        let fd = w.fds[s].load(SeqCst);
        if fd < 0 {
            continue;
        }
        let word = (total > 0)
            .then(|| {
                let k = (next_random(w) % total as u64) as usize;
                tables::nth_page(k, ps).0
            })
            .flatten()
            .map(|page| (page + (next_random(w) as usize % (ps / WORD)) * WORD) as u64);
        let Some(word) = word else {
            if w.words[s].swap(0, SeqCst) != 0 {
                ioctl(fd, IOC_DISABLE, 0);
            }
            continue;
        };
        let a = attr(word);
        // MODIFY turns the event off while it moves (and leaves it off:
        // `a` says disabled), then it is on for one overflow.
        if ioctl(
            fd,
            IOC_MODIFY_ATTRIBUTES,
            &a as *const PerfEventAttr as usize,
        ) != 0
        {
            w.words[s].store(0, SeqCst);
            continue;
        }
        if ioctl(fd, IOC_REFRESH, 1) != 0 && ioctl(fd, IOC_ENABLE, 0) != 0 {
            w.words[s].store(0, SeqCst);
            continue;
        }
        w.words[s].store(word, SeqCst);
    }
    if total > 0 {
        WINDOWS.fetch_add(1, SeqCst);
    }
    w.frame.store(total as u64, SeqCst);
    w.duty.store(duty, SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_counting_takes_three_quarters_of_the_target_leaving_pages_a_point_at_most() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // The default 0.5%: 0.375% for word counting, 0.125% left.
        assert!(close(share_of(0.005), 0.00375), "{}", share_of(0.005));
        assert!(close(share_of(0.04), 0.03));
        // Past 4% the pages keep one point: --overhead 99 leaves 98%.
        assert!(close(share_of(0.99), 0.98));
        assert!(close(share_of(0.0), 0.0));
    }

    #[test]
    fn the_duty_starts_where_a_costly_start_keeps_to_the_target() {
        // The default 0.5% (0.375% for word counting): one window in four.
        assert_eq!(start_duty(share_of(0.005)), 2);
        // 1% (0.75%): one in two; 2% (1.5%) and up: every window.
        assert_eq!(start_duty(share_of(0.01)), 1);
        assert_eq!(start_duty(share_of(0.02)), 0);
        assert_eq!(start_duty(share_of(0.99)), 0);
        // A tiny target starts high, never past the most halvings.
        assert_eq!(start_duty(share_of(0.0001)), 8);
        assert_eq!(start_duty(1e-9), MAX_DUTY);
        assert_eq!(start_duty(0.0), MAX_DUTY);
    }

    #[test]
    fn watched_events_are_charged_for_the_share_of_the_window_the_events_ran() {
        // 1000 switches, the events on the whole window: all of them.
        assert_eq!(events_on_milli(1000, 20_000_000, 20_000_000), 1_000_000);
        // An event that reached its cap a quarter into the window.
        assert_eq!(events_on_milli(1000, 5_000_000, 20_000_000), 250_000);
        // Running time a little past the window (clock granularity): the
        // whole window, never more.
        assert_eq!(events_on_milli(10, 21_000_000, 20_000_000), 10_000);
        // No window: nothing.
        assert_eq!(events_on_milli(1000, 1, 0), 0);
        // Charged at the cost once it is measured, for the events counted
        // before the measurement too; measured once only.
        let s = Surcharge::new();
        s.add(600, 10_000_000, 20_000_000);
        assert_eq!((s.events.load(SeqCst), s.charge()), (600, 0));
        s.measure_when_due(1000, || panic!("not due at 600"));
        s.add(600, 20_000_000, 20_000_000);
        s.measure_when_due(1000, || Some(2_000));
        assert_eq!(s.charge(), 900 * 2_000);
        s.measure_when_due(1000, || Some(9_999));
        assert_eq!(s.ns.load(SeqCst), 2_000);
        // Tried and not measurable: nothing charged, and said so.
        let none = Surcharge::new();
        none.add(5000, 1, 1);
        none.measure_when_due(1000, || None);
        assert!(none.tried.load(SeqCst) && !none.measured.load(SeqCst));
        assert_eq!(none.charge(), 0);
        // Measured on the program's windows (their average, watchpoints
        // on or not): every watched event is charged, and each new
        // estimate prices them all again.
        let windows = Surcharge::new();
        windows.add(600, 20_000_000, 20_000_000);
        windows.set(16_000, 20_000);
        assert_eq!(windows.charge(), 600 * 16_000);
        windows.add(400, 20_000_000, 20_000_000);
        windows.set(10_000, 21_000);
        assert_eq!(windows.charge(), 1000 * 10_000);
        let r = windows.record(Kind::WordSwitches);
        assert_eq!(
            (r.ns_each, r.unwatched_ns_each, r.measured),
            (10_000, 21_000, true)
        );
        assert_eq!((r.events, r.charged_ns), (1000, 10_000_000));
    }

    #[test]
    fn fault_counts_are_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) R 1 4242 4242 0 -1 4194560 1234 0 56 0 7 8 0 0 20 0 1";
        assert_eq!(stat_faults(stat), Some(1234 + 56));
        assert_eq!(stat_faults("4242 (x) R 1"), None);
        // This thread's own, both ways, agree within the faults between.
        let tid = sys::gettid();
        let own = own_usage().faults;
        let (_, task) = task_usage(tid).expect("this thread's /proc files");
        assert!(task >= own && task - own < 1000, "{own} then {task}");
    }

    #[test]
    fn the_fault_calibration_measures_armed_first_touches() {
        // A value in µs range, or 0 where arming costs nothing here.
        let ns = fault::calibrate(2).expect("a breakpoint event opens");
        assert!(ns < 100_000, "{ns} ns a fault");
    }

    #[test]
    fn windows_aim_at_as_many_accesses_a_draw_as_a_turn_costs() {
        let ms = 1_000_000;
        // Turns as cheap as a trap: about one access a draw.
        assert_eq!(next_interval(20 * ms, 0, 4, 0.7), 40 * ms);
        assert_eq!(next_interval(20 * ms, 4, 4, 0.7), 20 * ms);
        assert_eq!(next_interval(20 * ms, 12, 4, 0.7), 10 * ms);
        // Turns a hundred traps dear (an emulator): up to the cap.
        assert_eq!(next_interval(20 * ms, 8, 4, 100.0), 40 * ms);
        assert_eq!(next_interval(20 * ms, 24, 4, 100.0), 20 * ms);
        assert_eq!(next_interval(MAX_WINDOW_NS, 0, 4, 1.0), MAX_WINDOW_NS);
        assert_eq!(next_interval(MIN_WINDOW_NS, 32, 4, 1.0), MIN_WINDOW_NS);
    }
}
