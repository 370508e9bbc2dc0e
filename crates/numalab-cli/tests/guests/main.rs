//! The guest lane: tests that boot QEMU guests with emulated NUMA nodes (guest/boot.sh).
//!
//! One binary per lane (scripts/lanes.py): each former test file is a
//! module here, so the binary is linked once and its tests share one
//! process (and `common::turn`, which keeps measurements apart).

#[path = "../common/mod.rs"]
mod common;

mod guest;
mod guest_experiments;
mod guest_report;
