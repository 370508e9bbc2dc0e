//! numalab: a laboratory for NUMA machines on Linux.
//!
//! Layers (each depends only on those before it, as in DESIGN.md section 4):
//! 1. [`machine`]: the machine model (live hwloc or a topology file);
//! 2. [`placement`]: resource sets, thread and memory policies, placed buffers
//!    and verification of where threads and pages really are.

pub mod experiments;
pub mod idset;
pub mod machine;
pub mod measure;
pub mod placement;
pub mod random;
pub mod report;
pub mod serde_util;
pub mod text;

pub use idset::IdSet;
pub use machine::Machine;
