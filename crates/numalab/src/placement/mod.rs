//! Layer 2, placement: resource sets (and named trees of them), thread and
//! memory policies, placed buffers, placing ranges a program already has,
//! binding the program's threads, and verification of where threads and
//! pages really are.
//!
//! Placement is never assumed: [`PlacedBuffer::histogram`] asks the kernel
//! where every page is, workers check the CPU they run on
//! ([`write_from_workers`]), [`BufferCheck`] compares both with the request,
//! and [`launch`] reads a launched command's placement at its exit.

pub mod arrays;
pub mod buffer;
pub mod capacity;
pub mod check;
pub mod launch;
pub mod memory_policy;
pub mod node_memory;
pub mod pin_check;
pub mod range;
pub mod resource_set;
pub mod set_tree;
pub mod settings;
pub mod sys;
pub(crate) mod sysroot;
pub mod thread_policy;
pub mod threads;
pub mod touch;
pub mod verify;

pub use arrays::{parse_placement_file, ArrayPolicies, ThreadArrays};
pub use buffer::{
    pin_current_thread, usable_free_bytes, BufferSpec, PlacedBuffer, Prefault, SysfsWeights, Thp,
};
pub use capacity::{check_plan, exceeds_file_memory, BufferDemand};
pub use check::{check_pages, parallel_touch_problems, place_and_check, BufferCheck, PlaceResult};
pub use launch::{ExitStatus, LaunchOutcome, LaunchPlan, SpawnError};
pub use memory_policy::{remote_node, MemoryPolicy, Realization, WeightedImpl};
pub use range::{place_range, RangeOptions, RangePlacement};
pub use resource_set::{ListMeaning, ResourceSet};
pub use set_tree::SetTree;
pub use thread_policy::ThreadPolicy;
pub use threads::{bind_process, bind_thread, check_thread, ThreadCheck};
pub use touch::{write_from_workers, WorkerCheck};
pub use verify::{PageHistogram, ProcessPlacement, RunLengths};

/// Why a placement could not be made. Every message is one line that names
/// the problem and, where there is one, the way out.
#[derive(Debug, thiserror::Error)]
pub enum PlacementError {
    /// Bad request: unknown ids, impossible combinations.
    #[error("{0}")]
    Invalid(String),
    /// The running kernel or system lacks a feature.
    #[error("{0}")]
    Unsupported(String),
    /// Not permitted (capabilities, cgroup, sysfs).
    #[error("{0}")]
    Permission(String),
    /// A strict placement that cannot fit in the nodes' free memory.
    #[error("{0}")]
    Capacity(String),
    /// Any other OS failure.
    #[error("{0}")]
    Os(String),
}
