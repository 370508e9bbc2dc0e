//! Cooperative cancellation: one process-wide flag that every long loop of
//! the library looks at between units of work (for Ctrl-C during a long
//! report).
//!
//! Once [`request`]ed, measurements stop as soon as they can and the
//! experiments return quickly with whatever they have:
//!
//! - [`super::stats::measure`] takes no further warm-up run or repetition
//!   (it looks before the first run and after every run) and returns the
//!   summary of the samples taken, with [`super::stats::StopReason::Cancelled`]
//!   (with no finite sample, the usual no-data summary: `n` = 0, NaN
//!   statistics). Everything built on it (the harness, the pointer chase,
//!   c2c, Apex-MAP, the sweep's cases, loaded latency) therefore ends its
//!   current unit within about one sample.
//! - The experiments' own loops (matrix cells, sizes, scaling thread counts,
//!   sweep cases, c2c pairs and figures, loaded-latency steps and mixes,
//!   policy cells, Apex-MAP points) look between units and return the units
//!   done so far: a truncated result (fewer cells, rows, points, pairs or
//!   steps than asked; a unit cut short has few or no samples), never a
//!   panic, a hang or a thread left running. Background threads (paced
//!   loads, c2c partners) belong to the run that started them and are
//!   stopped and joined before it returns. A result whose run saw the flag
//!   carries the warning [`WARNING`].
//!
//! A cancelled result is not valid data: the caller that asked for
//! cancellation discards it or marks it as such; nothing else in the library
//! treats it as a measurement. The flag stays set until [`reset`], so every
//! experiment started meanwhile returns at once (nearly empty): reset it
//! before starting new work.

use std::sync::atomic::{AtomicBool, Ordering};

static REQUESTED: AtomicBool = AtomicBool::new(false);

/// Whether a SIGTERM (rather than a SIGINT) asked for cancellation.
static TERMINATED: AtomicBool = AtomicBool::new(false);

/// The warning an experiment adds to a result it cut short.
pub const WARNING: &str =
    "cancelled: the run stopped early; this result is incomplete and not valid data";

/// Asks every running and future measurement of this process to stop.
///
/// Async-signal-safe (a single lock-free atomic store): a `SIGINT` handler
/// may call it.
pub fn request() {
    REQUESTED.store(true, Ordering::SeqCst);
}

/// Whether cancellation has been requested (and not [`reset`] since).
#[inline]
pub fn requested() -> bool {
    REQUESTED.load(Ordering::Relaxed)
}

/// Clears the flag, so that measurements run normally again.
pub fn reset() {
    REQUESTED.store(false, Ordering::SeqCst);
}

/// Makes SIGINT (Ctrl-C) and SIGTERM (a batch scheduler's time limit)
/// [`request`] cancellation, for front ends that stop cleanly and keep what
/// they measured. A second such signal, once cancellation is requested,
/// does what the signal does by default: the process ends at once. The
/// handlers stay for the life of the process. A signal the process was
/// started ignoring (a background job of a shell without job control,
/// `nohup`) stays ignored, as POSIX tools and the settings' own handler
/// (`placement::settings`) do.
pub fn request_on_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let handled: Vec<i32> = [SIGINT, SIGTERM]
        .into_iter()
        .filter(|&s| !crate::sys::process::signal_ignored(s))
        .collect();
    // Registered first, so that the first signal finds the flag clear and
    // only the second one ends the process.
    for &sig in &handled {
        signal_hook::flag::register_conditional_default(sig, &REQUESTED)?;
    }
    if handled.contains(&SIGTERM) {
        signal_hook::flag::register(SIGTERM, &TERMINATED)?;
    }
    for &sig in &handled {
        signal_hook::flag::register(sig, &REQUESTED)?;
    }
    Ok(())
}

/// The exit status of a process that a signal cancelled, as shells report
/// a death by that signal: 143 after SIGTERM, 130 after SIGINT.
pub fn signal_exit_code() -> u8 {
    if TERMINATED.load(Ordering::SeqCst) {
        143
    } else {
        130
    }
}
