//! Clusters: what Slurm and MPI tell a process about where it runs (its
//! job, its node list, its rank on the node), and the `srun` command lines
//! numalab hands to Slurm. numalab builds on the engines a cluster already
//! runs; it starts nothing on a node by itself.

pub mod hostlist;
pub mod ranks;
pub mod slurm;
pub mod tasks;

/// This machine's host name as the kernel has it (its UTS namespace's),
/// the name ranks and tasks are recorded under; `None` where unreadable.
pub fn host_name() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
}
