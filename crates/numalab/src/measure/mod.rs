//! Layer 3, measurement: kernels (bandwidth and pointer-chase latency), a
//! statistics engine, rate-paced background traffic, the environment a result depends on, a harness of
//! pinned workers started together, and cooperative cancellation of all of it.

pub mod blas;
pub mod cancel;
pub mod chase;
pub mod compare;
pub mod counters;
pub mod environment;
pub mod harness;
pub mod kernels;
pub mod memory_traffic;
pub mod pacing;
pub mod probe;
pub mod sample_clock;
pub mod stats;
pub mod task_counters;
