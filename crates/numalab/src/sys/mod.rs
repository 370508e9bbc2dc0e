//! System calls and machine instructions that need `unsafe`, behind safe
//! functions. The crate denies `unsafe_code` everywhere else (lib.rs names
//! the modules still allowed it, each to move here).
//!
//! - [`blas`]: OpenBLAS, loaded when first needed and called through its C
//!   ABI behind dimension-checked wrappers, re-exported as `measure::blas`;
//! - [`cache`]: writing back and invalidating cache lines, and the fence
//!   that waits for it (core-to-core's clean-line figure);
//! - [`chase`]: pointer chases laid out in a buffer and timed (loads
//!   through raw addresses), re-exported as `measure::chase`;
//! - [`child`]: work in a forked child, and what it wrote back (hwloc's
//!   trial load of a topology file, `migrate_pages` from a process of its
//!   own);
//! - [`kernels`]: the bandwidth kernels (SIMD instructions, non-temporal
//!   stores), re-exported as `measure::kernels`;
//! - [`mapping`]: anonymous mappings owned by a value;
//! - [`numa`]: the kernel's memory-policy, page-moving, affinity and
//!   capability calls, re-exported as `placement::sys`;
//! - [`perf`]: perf events as owned descriptors (the only
//!   `perf_event_open` call; the attribute structure is the contract
//!   crate's, `numalab_profile_abi::perf`, which the preload library fills
//!   too);
//! - [`process`]: descriptors and clocks of processes and threads, pipes,
//!   waits, what a launched program's child does before exec;
//! - [`restore`]: system settings put back from a signal handler or a
//!   watchdog process (`placement::settings` holds them).

pub mod blas;
pub mod cache;
pub mod chase;
pub mod child;
pub mod kernels;
pub mod mapping;
pub mod numa;
pub mod perf;
pub mod process;
pub mod restore;
