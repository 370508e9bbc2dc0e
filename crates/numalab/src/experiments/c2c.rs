//! `numalab c2c`: cache-line transfer latency between every pair of CPUs.
