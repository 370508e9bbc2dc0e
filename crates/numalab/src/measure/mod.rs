//! Layer 3, measurement: kernels (bandwidth and pointer-chase latency), a
//! statistics engine, rate-paced background traffic, the environment a result depends on, and a harness of
//! pinned workers started together.

pub mod chase;
pub mod environment;
pub mod harness;
pub mod kernels;
pub mod pacing;
pub mod stats;
