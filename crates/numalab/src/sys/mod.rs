//! System calls and machine instructions that need `unsafe`, behind safe
//! functions: the engine's experiments, report and profile modules deny
//! `unsafe_code` and come here instead.
//!
//! - [`cache`]: writing back and invalidating cache lines, and the fence
//!   that waits for it (core-to-core's clean-line figure);
//! - [`perf`]: perf events as owned descriptors;
//! - [`process`]: descriptors and clocks of processes and threads.
//!
//! Not here yet (ARCHITECTURE.md, "unsafe code"): the memory-policy calls
//! (`placement::sys`), the measuring kernels (`measure::kernels`), the
//! forked children of `machine::isolate`, `placement::launch` and
//! `experiments::migrate`, and the raw perf_event_open (in the file shared
//! with the preload library, which [`perf`] wraps).

pub mod cache;
pub mod perf;
pub mod process;
