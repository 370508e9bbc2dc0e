//! numalab: a laboratory for NUMA machines on Linux.
//!
//! Layers, each depending only on those before it (ARCHITECTURE.md at the
//! repository root is the map):
//! 0. foundations every layer uses: [`idset`] (sets of CPU and node ids),
//!    [`text`] (formatting, escaping, parsing), [`random`] (seeded streams),
//!    [`serde_util`], [`input`] (bounded reading of the files a user names);
//! 1. [`machine`]: the machine model (live hwloc or a topology file);
//! 2. [`placement`]: resource sets, thread and memory policies, placed
//!    buffers, verification of where threads and pages really are;
//! 3. [`measure`]: kernels, pointer chases, statistics, paced load, the
//!    environment, a harness of pinned workers, cancellation;
//! 4. [`experiments`]: matrices, sweeps, scaling, loaded latency, c2c,
//!    Apex-MAP, the policy comparison;
//! 5. models (to come: the placement distribution model, contention
//!    models, prediction), and [`profile`]: what a program's sampled
//!    accesses say (records of the preload library, regions by allocation
//!    site, access matrices);
//! 6. reports, in the crate `numalab-report`: one view per experiment
//!    (text, tables, HTML, summary), `numalab report` and its document,
//!    charts, `numalab compare`.

// Unsafe code lives in `sys`, behind safe functions, and the crate denies
// it everywhere else.
#![deny(unsafe_code)]

pub mod cluster;
pub mod experiments;
pub mod idset;
pub mod input;
pub mod machine;
pub mod measure;
pub mod model;
pub mod placement;
pub mod profile;
pub mod random;
pub mod serde_util;
#[allow(unsafe_code)]
pub mod sys;
pub mod text;

pub use idset::IdSet;
pub use machine::Machine;
