//! The rhythm shared by a timing thread and the worker threads it times:
//! every sample starts with all of them at one barrier and ends with all of
//! them at another, so that the workers run their passes together and the
//! timing thread reads every worker's time of the same sample.
//!
//! Used by the bandwidth harness (pinned workers streaming their buffers)
//! and the placement sweep (a case's foreground threads).

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, Condvar, Mutex};

/// The barriers, the stop flag, the passes per sample and each worker's
/// seconds of the last sample.
pub struct SampleClock {
    start: Barrier,
    done: Barrier,
    /// Set before the last `start`: the workers leave instead of sampling.
    stop: AtomicBool,
    passes: AtomicUsize,
    /// Each worker's seconds of the last sample, as `f64` bits.
    times: Vec<AtomicU64>,
}

impl SampleClock {
    /// For `workers` workers and one timing thread; one pass per sample.
    pub fn new(workers: usize) -> Self {
        SampleClock {
            start: Barrier::new(workers + 1),
            done: Barrier::new(workers + 1),
            stop: AtomicBool::new(false),
            passes: AtomicUsize::new(1),
            times: (0..workers).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// How many workers the clock waits for.
    pub fn workers(&self) -> usize {
        self.times.len()
    }

    /// Timing thread: runs one sample and returns each worker's seconds.
    pub fn sample(&self) -> Vec<f64> {
        self.start.wait();
        self.done.wait();
        self.times
            .iter()
            .map(|t| f64::from_bits(t.load(Ordering::Acquire)))
            .collect()
    }

    /// Timing thread: passes each worker makes in the next samples.
    pub fn set_passes(&self, k: usize) {
        self.passes.store(k, Ordering::Release);
    }

    /// Passes per sample now.
    pub fn passes(&self) -> usize {
        self.passes.load(Ordering::Acquire)
    }

    /// Timing thread: ends the workers' loops (each sees it at its next
    /// [`SampleClock::next`]). Call once, after the last sample.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.start.wait();
    }

    /// Worker: waits for the next sample; the passes to make, or `None`
    /// when the timing thread stopped the clock.
    pub fn next(&self) -> Option<usize> {
        self.start.wait();
        (!self.stop.load(Ordering::Acquire)).then(|| self.passes())
    }

    /// Worker `i`: its seconds of this sample; ends the sample.
    pub fn finish(&self, i: usize, seconds: f64) {
        self.times[i].store(seconds.to_bits(), Ordering::Release);
        self.done.wait();
    }
}

/// A barrier for one meeting that a failed thread start can open: the
/// workers that did start, and the main thread, are not left waiting for
/// one that never will (a `std::sync::Barrier` cannot be told).
pub struct Gate {
    /// Arrived so far, and whether the gate was opened for everyone.
    state: Mutex<(usize, bool)>,
    met: Condvar,
    parties: usize,
}

impl Gate {
    pub fn new(parties: usize) -> Self {
        Gate {
            state: Mutex::new((0, false)),
            met: Condvar::new(),
            parties,
        }
    }

    /// Waits until every party arrived or the gate was opened.
    pub fn wait(&self) {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        g.0 += 1;
        if g.0 >= self.parties {
            self.met.notify_all();
        }
        while g.0 < self.parties && !g.1 {
            g = self.met.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Lets everyone through, now and later.
    pub fn open(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1 = true;
        self.met.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_run_each_sample_together_until_stopped() {
        let clock = SampleClock::new(2);
        let runs = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for i in 0..2 {
                let (clock, runs) = (&clock, &runs);
                s.spawn(move || {
                    while let Some(k) = clock.next() {
                        runs.fetch_add(k, Ordering::Relaxed);
                        clock.finish(i, (i + 1) as f64 * k as f64);
                    }
                });
            }
            assert_eq!(clock.sample(), vec![1.0, 2.0]);
            clock.set_passes(3);
            assert_eq!(clock.passes(), 3);
            assert_eq!(clock.sample(), vec![3.0, 6.0]);
            clock.stop();
        });
        // Two workers, one pass then three.
        assert_eq!(runs.load(Ordering::Relaxed), 8);
        assert_eq!(clock.workers(), 2);
    }

    /// Opened, the gate lets the parties that came through without the
    /// ones that never will; full, it lets them through by itself.
    #[test]
    fn a_gate_opens_for_the_parties_that_came() {
        let g = Gate::new(3);
        std::thread::scope(|s| {
            let waiter = s.spawn(|| g.wait());
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert!(!waiter.is_finished(), "one of three arrived: it waits");
            g.open();
            waiter.join().unwrap();
        });
        g.wait(); // opened: no wait
        let full = Gate::new(2);
        std::thread::scope(|s| {
            s.spawn(|| full.wait());
            full.wait();
        });
    }
}
