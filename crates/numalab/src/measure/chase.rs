//! Dependent-load pointer chase for latency. (Being written.)
