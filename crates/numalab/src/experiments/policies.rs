//! `numalab policies`: memory and thread policies for canonical workloads.
