//! `numalab loaded-latency`: chase latency while injectors add traffic.
