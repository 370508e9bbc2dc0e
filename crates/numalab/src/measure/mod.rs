//! Layer 3, measurement: kernels (bandwidth and pointer-chase latency), a
//! statistics engine, rate-paced background traffic, the environment a result depends on, a harness of
//! pinned workers started together, and cooperative cancellation of all of it.

// OpenBLAS, loaded with dlopen and called through its C ABI, lives in
// `crate::sys::blas`.
pub use crate::sys::blas;
pub mod cancel;
// The pointer chases (loads through raw addresses) live in
// `crate::sys::chase`.
pub use crate::sys::chase;
pub mod compare;
pub mod counters;
pub mod environment;
pub mod event_syntax;
pub mod harness;
// The kernels (SIMD instructions, non-temporal stores: `unsafe`) live in
// `crate::sys::kernels`.
pub use crate::sys::kernels;
pub mod memory_traffic;
pub mod pacing;
pub mod probe;
pub mod sample_clock;
pub mod stats;
pub mod task_counters;
