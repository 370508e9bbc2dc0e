//! Clusters: what Slurm and MPI tell a process about where it runs (its
//! job, its node list, its rank on the node), and the `srun` command lines
//! numalab hands to Slurm. numalab builds on the engines a cluster already
//! runs; it starts nothing on a node by itself.

pub mod hostlist;
pub mod ranks;
pub mod slurm;
pub mod tasks;
