//! What a context switch costs a thread more while its window watches,
//! measured on the program's own threads.
//!
//! Word counting watches a thread's windows or skips them at random (its
//! duty), so the program's windows are a controlled experiment already:
//! the system time a switch takes in watched windows, less what it takes
//! in skipped ones, is what the armed registers add to it. On this VM
//! that is about 16 µs a switch for a thread that blocks and is woken
//! from another CPU (its CPU halts meanwhile, and every exit to the
//! hypervisor with armed debug registers saves and reloads them), 1-2 µs
//! where the switch stays on one busy CPU. A helper thread of the
//! library's, passing a futex back and forth beside the running program,
//! measured 0.4-2.9 µs where the program paid 16: its switches met a CPU
//! the program kept busy, never a halted one (docs/profile.md, "Context
//! switches while words are watched").
//!
//! Only windows whose system time is mostly switching count: at least
//! [`SWITCHY`] blocking switches, [`SWITCHY_PER_CPU_S`] a second of CPU
//! time, and no more faults than switches (a first-touch
//! phase's faults would swamp the comparison). A watched window's own
//! counted accesses (each a trap) and its faults' surcharge are taken
//! off first, as they are charged apart. System time comes from
//! `getrusage`, which the kernel apportions by its ticks (4 ms here), so
//! the estimate waits for [`MIN_CPU_NS`] of CPU time and [`MIN_SWITCHES`]
//! switches on each side, a window or two of a program that switches
//! often, and is refined with every window after: waiting longer costs
//! more than it saves, as watched switches cost while their price is
//! unknown (at 100 ms of watched CPU time, a two-thread barrier loop had
//! paid 85 ms, 7% of its CPU time, before the first estimate). Every
//! watched switch, those before the estimate too, is charged at the
//! latest estimate.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering::SeqCst};

/// A window counts when its thread blocked (voluntary switches) at least
/// this often, and at least [`SWITCHY_PER_CPU_S`] times a second of its
/// CPU time. Preemptions do not count: what armed registers make dear is
/// a thread that blocks, its CPU halting, and on a loaded host (a clean
/// clone's test suite beside) a thread that never blocked was preempted
/// often enough to count, and its windows, half skipped, broke a test
/// that wants every window watched at `--overhead 99`.
pub const SWITCHY: u64 = 8;
pub const SWITCHY_PER_CPU_S: u64 = 1000;
/// Switches and CPU time on each side (watched, skipped) before the
/// difference is taken: 5 ticks of system time at 250 Hz.
pub const MIN_SWITCHES: u64 = 100;
pub const MIN_CPU_NS: u64 = 20_000_000;
/// Switchy switches seen before the estimate asks for skipped windows
/// (see [`Sums::wants_skipped_windows`]), and the skipped windows' CPU
/// time it asks for: the first estimate is charged at once, but rests on
/// a window or two of each kind (one run's estimate was 9-20 µs where
/// whole runs differed by 9-13 µs); the baseline it is refined against
/// keeps coming from skipped windows until it has 100 ms.
const ASK_AFTER: u64 = 64;
const SKIPPED_CPU_WANTED_NS: u64 = 100_000_000;

/// One window of one thread, between two of its turns (the turns' own
/// system calls left out).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    pub watched: bool,
    /// Its context switches, and those where it blocked.
    pub switches: u64,
    pub blocked: u64,
    pub faults: u64,
    /// The thread's system time and CPU time in the window.
    pub sys_ns: u64,
    pub cpu_ns: u64,
    /// What a watched window's system time holds that is charged apart:
    /// its counted accesses' traps and its faults' surcharge.
    pub charged_apart_ns: u64,
}

/// The sums of the switchy windows, by side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Sums {
    /// Watched: system time less what is charged apart (may go below 0).
    pub watched_windows: u64,
    pub watched_sys_ns: i64,
    pub watched_switches: u64,
    pub watched_cpu_ns: u64,
    pub skipped_windows: u64,
    pub skipped_sys_ns: u64,
    pub skipped_switches: u64,
    pub skipped_cpu_ns: u64,
}

/// The system time of a switch on each side, in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub watched_ns: f64,
    pub skipped_ns: f64,
}

impl Estimate {
    /// What a watched switch costs more, never below 0.
    pub fn surcharge_ns(&self) -> u64 {
        (self.watched_ns - self.skipped_ns).clamp(0.0, 1e9) as u64
    }
}

impl Sums {
    /// Adds `w` when it is switchy.
    pub fn add(&mut self, w: &Window) {
        if !switchy(w) {
            return;
        }
        if w.watched {
            let net = w.sys_ns as i64 - w.charged_apart_ns.min(i64::MAX as u64) as i64;
            self.watched_windows += 1;
            self.watched_sys_ns = self.watched_sys_ns.saturating_add(net);
            self.watched_switches += w.switches;
            self.watched_cpu_ns += w.cpu_ns;
        } else {
            self.skipped_windows += 1;
            self.skipped_sys_ns += w.sys_ns;
            self.skipped_switches += w.switches;
            self.skipped_cpu_ns += w.cpu_ns;
        }
    }

    /// The estimate, once both sides have enough switches and CPU time.
    pub fn estimate(&self) -> Option<Estimate> {
        let enough = |switches: u64, cpu: u64| switches >= MIN_SWITCHES && cpu >= MIN_CPU_NS;
        if !enough(self.watched_switches, self.watched_cpu_ns)
            || !enough(self.skipped_switches, self.skipped_cpu_ns)
        {
            return None;
        }
        Some(Estimate {
            watched_ns: self.watched_sys_ns.max(0) as f64 / self.watched_switches as f64,
            skipped_ns: self.skipped_sys_ns as f64 / self.skipped_switches as f64,
        })
    }

    /// Whether the program switches often enough that the surcharge
    /// matters, while the skipped windows it is measured against are
    /// fewer than [`SKIPPED_CPU_WANTED_NS`] of CPU time.
    pub fn wants_skipped_windows(&self) -> bool {
        self.skipped_cpu_ns < SKIPPED_CPU_WANTED_NS
            && self.watched_switches + self.skipped_switches >= ASK_AFTER
    }
}

fn switchy(w: &Window) -> bool {
    w.blocked >= SWITCHY
        && w.faults <= w.switches
        && w.blocked.saturating_mul(1_000_000_000) >= SWITCHY_PER_CPU_S.saturating_mul(w.cpu_ns)
}

/// The process's sums (windows of every thread, added by their own
/// threads' turns, in the timer's signal handler: atomics only).
static WATCHED_WINDOWS: AtomicU64 = AtomicU64::new(0);
static WATCHED_SYS: AtomicI64 = AtomicI64::new(0);
static WATCHED_SWITCHES: AtomicU64 = AtomicU64::new(0);
static WATCHED_CPU: AtomicU64 = AtomicU64::new(0);
static SKIPPED_WINDOWS: AtomicU64 = AtomicU64::new(0);
static SKIPPED_SYS: AtomicU64 = AtomicU64::new(0);
static SKIPPED_SWITCHES: AtomicU64 = AtomicU64::new(0);
static SKIPPED_CPU: AtomicU64 = AtomicU64::new(0);

/// Adds a window to the process's sums.
pub fn add(w: &Window) {
    let mut one = Sums::default();
    one.add(w);
    if one == Sums::default() {
        return;
    }
    WATCHED_WINDOWS.fetch_add(one.watched_windows, SeqCst);
    WATCHED_SYS.fetch_add(one.watched_sys_ns, SeqCst);
    WATCHED_SWITCHES.fetch_add(one.watched_switches, SeqCst);
    WATCHED_CPU.fetch_add(one.watched_cpu_ns, SeqCst);
    SKIPPED_WINDOWS.fetch_add(one.skipped_windows, SeqCst);
    SKIPPED_SYS.fetch_add(one.skipped_sys_ns, SeqCst);
    SKIPPED_SWITCHES.fetch_add(one.skipped_switches, SeqCst);
    SKIPPED_CPU.fetch_add(one.skipped_cpu_ns, SeqCst);
}

/// The process's sums so far.
pub fn sums() -> Sums {
    Sums {
        watched_windows: WATCHED_WINDOWS.load(SeqCst),
        watched_sys_ns: WATCHED_SYS.load(SeqCst),
        watched_switches: WATCHED_SWITCHES.load(SeqCst),
        watched_cpu_ns: WATCHED_CPU.load(SeqCst),
        skipped_windows: SKIPPED_WINDOWS.load(SeqCst),
        skipped_sys_ns: SKIPPED_SYS.load(SeqCst),
        skipped_switches: SKIPPED_SWITCHES.load(SeqCst),
        skipped_cpu_ns: SKIPPED_CPU.load(SeqCst),
    }
}

/// The two sides as records (watched first), for the profile to say what
/// the price rests on.
pub fn records(tid: u32) -> [numalab_profile_abi::events::SwitchWindows; 2] {
    let s = sums();
    let side = |watched, windows: u64, switches, sys_ns, cpu_ns| {
        numalab_profile_abi::events::SwitchWindows {
            tid,
            watched,
            windows: windows.min(u32::MAX as u64) as u32,
            switches,
            sys_ns,
            cpu_ns,
        }
    };
    [
        side(
            true,
            s.watched_windows,
            s.watched_switches,
            s.watched_sys_ns,
            s.watched_cpu_ns,
        ),
        side(
            false,
            s.skipped_windows,
            s.skipped_switches,
            s.skipped_sys_ns.min(i64::MAX as u64) as i64,
            s.skipped_cpu_ns,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn window(watched: bool, switches: u64, sys_us: u64) -> Window {
        Window {
            watched,
            switches,
            blocked: switches,
            faults: 0,
            sys_ns: sys_us * 1000,
            cpu_ns: 20_000_000,
            charged_apart_ns: 0,
        }
    }

    #[test]
    fn the_surcharge_is_the_watched_switches_system_time_over_the_skipped_ones() {
        let mut s = Sums::default();
        // 500 switches a window: 17 µs each skipped, 33 µs watched.
        s.add(&window(false, 500, 500 * 17));
        assert_eq!(s.estimate(), None, "one side only");
        for _ in 0..5 {
            s.add(&window(true, 500, 500 * 33));
            s.add(&window(false, 500, 500 * 17));
        }
        let e = s
            .estimate()
            .expect("windows of 20 ms and 500 switches on each side");
        assert_eq!((e.watched_ns, e.skipped_ns), (33_000.0, 17_000.0));
        assert_eq!(e.surcharge_ns(), 16_000);
        // Cheaper watched switches (noise): nothing, not a negative charge.
        let mut cheap = Sums::default();
        for _ in 0..5 {
            cheap.add(&window(false, 500, 500 * 17));
            cheap.add(&window(true, 500, 500 * 16));
        }
        assert_eq!(cheap.estimate().unwrap().surcharge_ns(), 0);
    }

    #[test]
    fn only_switchy_windows_count_and_what_is_charged_apart_is_taken_off() {
        let mut s = Sums::default();
        // Too few switches, or too few for the CPU time (19 in 20 ms: a
        // preempted thread), or more faults than switches: left out.
        s.add(&window(true, 7, 1_000));
        s.add(&window(false, 19, 1_000));
        // A thread preempted 500 times, never blocking.
        s.add(&Window {
            blocked: 0,
            ..window(false, 500, 8_000)
        });
        let mut faulting = window(false, 100, 5_000);
        faulting.faults = 101;
        s.add(&faulting);
        assert_eq!(s, Sums::default());
        // A watched window's traps come off its system time.
        let mut traps = window(true, 500, 10_000);
        traps.charged_apart_ns = 2_000_000;
        s.add(&traps);
        assert_eq!(s.watched_sys_ns, 8_000_000);
        assert_eq!(
            (s.watched_windows, s.watched_switches, s.watched_cpu_ns),
            (1, 500, 20_000_000)
        );
        assert_eq!(s.skipped_windows, 0);
    }

    #[test]
    fn the_estimate_waits_for_enough_switches_and_cpu_time_on_each_side() {
        let mut s = Sums::default();
        // 200 switches a side, but 10 ms of CPU time: not yet.
        let half = |watched| Window {
            cpu_ns: 10_000_000,
            ..window(watched, 100, 2_000)
        };
        s.add(&half(false));
        s.add(&half(true));
        assert_eq!(s.estimate(), None);
        assert!(s.wants_skipped_windows());
        s.add(&half(false));
        assert_eq!(s.estimate(), None);
        s.add(&half(true));
        assert!(s.estimate().is_some());
        // Measured, and charged; skipped windows wanted until they have
        // 100 ms.
        assert!(s.wants_skipped_windows());
        for _ in 0..3 {
            s.add(&window(false, 250, 4_000));
        }
        assert_eq!(s.skipped_cpu_ns, 80_000_000);
        assert!(s.wants_skipped_windows());
        s.add(&window(false, 250, 4_000));
        assert!(!s.wants_skipped_windows());
        // A program that hardly switches never asks for skipped windows.
        let mut calm = Sums::default();
        calm.add(&window(true, 40, 100));
        assert!(!calm.wants_skipped_windows());
        calm.add(&window(true, 40, 100));
        assert!(calm.wants_skipped_windows());
    }
}
