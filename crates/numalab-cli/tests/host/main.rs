//! The host tests of the numalab binary: they run it on this machine (fast lane).
//!
//! One binary per lane (scripts/lanes.py): each former test file is a
//! module here, so the binary is linked once and its tests share one
//! process (and `common::turn`, which keeps measurements apart).

#[path = "../common/mod.rs"]
mod common;

mod advise;
mod blas;
mod c2c_apexmap;
mod cache_fit;
mod cli;
mod compare;
mod counters;
mod envelope;
mod extrapolate;
mod fleet;
mod hostile_affinity;
mod hostile_cli;
mod hostile_files;
mod hostile_numbers;
mod hostile_outputs;
mod hostile_pids;
mod hostile_plans;
mod hostile_sets;
mod loaded_latency;
mod measure;
mod migrate;
mod model;
mod options;
mod pdm;
mod pin;
mod plan;
mod policies;
mod profile;
mod profile_names;
mod real_programs;
mod real_runtimes;
mod report_blas;
mod report_looks;
mod report_plan;
mod scaling_copies;
mod signals;
mod sizes;
mod sweep;
mod sweep_scenarios;
