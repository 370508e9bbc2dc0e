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
//! `experiments::migrate`. [`perf_abi`] is the preload library's own file
//! (the raw perf_event_open and the sample layout), which [`perf`] wraps.

pub mod cache;
pub mod perf;
// The perf_event_open ABI and its sample records, the same file the
// preload library records with.
#[path = "../../../numalab-preload/src/perf.rs"]
pub mod perf_abi;
pub mod process;
